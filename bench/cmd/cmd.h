/* cmd.h — what the command files of deqbench (main.c: run, eval, env,
 * params, grad; cmd_eval.c: eval's config; cmd_suite.c: suite;
 * cmd_validate.c: validate; and the other cmd_*.c) share: the helpers of
 * cmd_common.c and cmd_args.c, and each command's entry. Exit status and
 * messages: main.c's header comment and docs/commands.md. */
#ifndef DQ_BENCH_CMD_H
#define DQ_BENCH_CMD_H

#include <jansson.h>
#include <stddef.h>

#include "../config/config.h"

/* Exit status of bad input: a config, suite, corpus, parameter file or flag
 * that cannot be used; nothing was written. */
#define EXIT_BAD_INPUT 2

/* Prints "deqbench: MSG" on stderr as one line (control characters that
 * came from the input escaped: \n, \t, \xNN); returns EXIT_BAD_INPUT. */
int bad_input(const char *msg);

/* The summary table of records (record_summary) on stdout, after a blank
 * line. */
void print_summary(const json_t *records);

/* params= of a run (required with eval) a readable regular file, and
 * save_params= a path that can be replaced (fileio_replace_target) in a
 * writable directory: 0, or -1 with one line naming the key and the fix. */
int check_params_key(const struct bench_config *c, int eval, char *err,
		     size_t errlen);

/* The files of one run (config_file: the FILE.json argument, suite_file:
 * a suite's file; NULL when none) and its params=, save_params= and out=:
 * no output (out=, save_params=) names the same file as another of them
 * (fileio_distinct). 0, or -1 with one line. */
int check_distinct_files(const struct bench_config *c, const char *config_file,
			 const char *suite_file, char *err, size_t errlen);

/* The FILE.json argument of key=value arguments (the first, when it is not
 * key=value), or NULL. */
const char *config_file_arg(int argc, char **argv);
/* eval_tokens of an eval (the command, an eval suite's runs) is at least
 * one batch of batch_size * seq_len tokens: an evaluation of whole batches
 * that evaluates none is no result. 0, or -1 with one line. */
int check_eval_tokens(const struct bench_config *c, char *err, size_t errlen);

/* [FILE.json] key=value... into cfg (defaults first; a key given twice
 * is refused). extra: NULL-terminated keys the caller handles itself (e.g.
 * "params"), their values returned through extra_val. 0, or -1 with one
 * line in err. */
int parse_config_args(struct bench_config *cfg, int argc, char **argv,
		      const char *const *extra, const char **extra_val,
		      char *err, size_t errlen);

/* apply_config_on — [FILE.json] key=value... over base into cfg, unchecked:
 * defaults, then the keys of the JSON object base (NULL: none; applied as
 * a config file's), then FILE.json, then the arguments (a key given twice
 * among them refused); extra as parse_config_args's. parse_config_on —
 * the same, then config_finish (checks, the method's derived values). 0,
 * or -1 with one line in err. */
int apply_config_on(struct bench_config *cfg, const json_t *base, int argc,
		    char **argv, const char *const *extra,
		    const char **extra_val, char *err, size_t errlen);
int parse_config_on(struct bench_config *cfg, const json_t *base, int argc,
		    char **argv, const char *const *extra,
		    const char **extra_val, char *err, size_t errlen);

/* What eval_parse_config learnt about params='s metadata, for
 * eval_corpus_check's message and note. */
struct eval_origin {
	int no_config;	   /* the file has no metadata config */
	int dir_from_file; /* data_dir is the metadata's */
	int has_vocab;	   /* the file stores a vocabulary fingerprint */
};

/* `eval`'s config (cmd_eval.c): params= read whole first
 * (params_meta_read: a truncated or corrupt file, or a broken metadata
 * config, is an error naming it before any corpus is looked at); the
 * model and method config saved in its metadata as the base (the machine
 * and output keys aside; data_dir kept for a corpus read from disk; a
 * managed file off device=cuda as unroll), then FILE.json and the
 * arguments over it; without such metadata as `run` parses it. Keys of
 * another method than the one evaluated are refused among the user's keys
 * only (config_check_method_keys), once the file's method is in. 0,
 * or -1 with one line. */
int eval_parse_config(struct bench_config *cfg, int argc, char **argv,
		      struct eval_origin *o, char *err, size_t errlen);

/* corpus_check of an eval's config, its message saying when data_dir came
 * from the file or the file gave no config; a note on stderr when the file
 * holds no vocabulary fingerprint to check a corpus read from disk
 * against. 0, or -1 with one line. */
int eval_corpus_check(const struct bench_config *cfg,
		      const struct eval_origin *o, char *err, size_t errlen);

/* deqbench plan budget_mib=M [FILE.json] [key=value ...] [--run N]
 * (cmd_plan.c). */
int cmd_plan(int argc, char **argv);

/* deqbench suite FILE.json [--dry-run] [--shard I/N] [key=value ...]. */
int cmd_suite(int argc, char **argv);

/* deqbench report [flags] FILE.jsonl ... (cmd_report.c). */
int cmd_report(int argc, char **argv);

/* deqbench compare BASE NEW [flags] (cmd_compare.c, compare.h). */
int cmd_compare(int argc, char **argv);

/* deqbench price [RECORDS.jsonl | FILE.json] [key=value ...]
 * (cmd_price.c). */
int cmd_price(int argc, char **argv);

/* deqbench validate [--strict] FILE.jsonl ... (cmd_validate.c). */
int cmd_validate(int argc, char **argv);

/* deqbench bench-block [key=value ...] (cmd_bench_block.c): times forward
 * + vjp of one block application of any model kind and the backend GEMM
 * on the block's own GEMM shapes (asked of the model: model_gemm's log),
 * and prints both rates and their ratio; with vocab > 0 also the LM
 * head's GEMMs and the GEMM rate of one training step's shapes (layers x
 * the block's + the head's). argv[0] is the command name; key=value
 * arguments: the config keys model d_model n_heads d_ff seq_len
 * batch_size layers device threads seed precision, parsed and checked as
 * `deqbench run`'s (config_set), and its own iters warmup vocab;
 * defaults: the bench-block preset (`--help` prints it). Returns 0, or 2
 * on bad input / 1 on a run-time failure with one line on stderr. */
int cmd_bench_block(int argc, char **argv);

#endif
