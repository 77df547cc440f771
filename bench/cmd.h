/* cmd.h — what the command files of deqbench (main.c: run, eval, report,
 * env, params, grad; cmd_suite.c: suite) share. Exit status and messages:
 * main.c's header comment and the README. */
#ifndef DQ_BENCH_CMD_H
#define DQ_BENCH_CMD_H

#include <jansson.h>
#include <stddef.h>

#include "config.h"

/* Exit status of bad input: a config, suite, corpus, parameter file or flag
 * that cannot be used; nothing was written. */
#define EXIT_BAD_INPUT 2

/* Prints "deqbench: MSG" on stderr as one line (control characters that
 * came from the input escaped: \n, \t, \xNN); returns EXIT_BAD_INPUT. */
int bad_input(const char *msg);

/* The summary table of records (record_summary) on stdout, after a blank
 * line. */
void print_summary(const json_t *records);

/* params= of a run (required with eval) readable, and save_params='s
 * directory writable: 0, or -1 with one line naming the key and the fix. */
int check_params_key(const struct bench_config *c, int eval, char *err,
		     size_t errlen);

/* deqbench suite FILE.json [--dry-run] [--shard I/N] [key=value ...]. */
int cmd_suite(int argc, char **argv);

#endif
