/* cmd_common.c — the helpers the command files share (cmd.h): the one-line
 * bad-input message, the summary table after runs, and the checks of a
 * run's files and eval_tokens before anything is written. main.c,
 * cmd_suite.c, cmd_plan.c and the other cmd_*.c call them.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "../io/fileio.h"
#include "../report/report.h"
#include "../run/param_files.h"
#include "cmd.h"

int bad_input(const char *msg)
{
	/* one line whatever the input held: a newline or another control
	 * character of a key, value or path in msg is written as \n, \t or
	 * \xNN */
	fputs("deqbench: ", stderr);
	for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
		if (*p == '\n')
			fputs("\\n", stderr);
		else if (*p == '\t')
			fputs("\\t", stderr);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(stderr, "\\x%02x", *p);
		else
			fputc(*p, stderr);
	}
	fputc('\n', stderr);
	return EXIT_BAD_INPUT;
}

void print_summary(const json_t *records)
{
	fflush(stderr);
	printf("\n");
	record_summary(stdout, records);
	fflush(stdout);
}

/* save_params= (when given): a path the trained parameters can replace
 * (params_check_out: a new path or a safetensors file, in a directory
 * that takes the temporary file, renamable into place), so a long run
 * does not end unable to save. 0, or -1 with one line. */
static int check_save_params(const struct bench_config *c, char *err,
			     size_t errlen)
{
	if (!c->save_params[0])
		return 0;
	return params_check_out("save_params=", c->save_params, err, errlen);
}

/* params= of a run (required with eval): a readable regular file (a FIFO
 * is refused, not waited on); save_params= of a run (check_save_params).
 * 0, or -1 with one line. */
int check_params_key(const struct bench_config *c, int eval, char *err,
		     size_t errlen)
{
	char e[900];
	int fd;
	if (eval && !c->params[0]) {
		snprintf(err, errlen,
			 "params= is required: the safetensors file of the "
			 "parameters to evaluate (save_params= of a run)");
		return -1;
	}
	if (c->params[0]) {
		if ((fd = fileio_open_read(c->params, e, sizeof(e))) < 0) {
			snprintf(err, errlen,
				 "params=%s; give the path of a file written "
				 "by save_params= or deqbench params init",
				 e);
			return -1;
		}
		close(fd);
	}
	return check_save_params(c, err, errlen);
}

int check_distinct_files(const struct bench_config *c, const char *config_file,
			 const char *suite_file, char *err, size_t errlen)
{
	const struct fileio_named f[] = {
	    {"the config file ", config_file, 0},
	    {"the suite file ", suite_file, 0},
	    {"params=", c->params, 0},
	    {"save_params=", c->save_params, 1},
	    {"out=", c->out, 1},
	};
	return fileio_distinct(f, (int)(sizeof(f) / sizeof(f[0])), err, errlen);
}

const char *config_file_arg(int argc, char **argv)
{
	return argc > 0 && !strchr(argv[0], '=') ? argv[0] : NULL;
}

int check_eval_tokens(const struct bench_config *c, char *err, size_t errlen)
{
	long per = (long)c->model.batch_size * c->model.seq_len;
	if (c->eval_tokens >= per)
		return 0;
	snprintf(err, errlen,
		 "eval_tokens=%ld is less than one batch (batch_size * "
		 "seq_len = %ld tokens) and would evaluate nothing; give "
		 "eval_tokens=%ld or more",
		 c->eval_tokens, per, per);
	return -1;
}
