/* test_report_cli.c — `deqbench report`'s flags on records of a real tiny
 * suite: the default terminal table fits REPORT_TERM_WIDTH columns with one
 * heading per group, --format md/csv/json, --where filters records, --sort
 * orders rows, --help, and bad flags exit 2 with one line. */
#include <jansson.h>

#include "report.h"
#include "test_cli.h"

#define TINY                                                                   \
	"\"corpus\": \"synthetic\", \"d_model\": 16, \"n_heads\": 2, "         \
	"\"d_ff\": 32, \"seq_len\": 8, \"batch_size\": 2, \"layers\": 3, "     \
	"\"steps\": 6, \"warmup_steps\": 2, \"lr_warmup\": 1, "                \
	"\"eval_tokens\": 64, \"threads\": 1, \"eval_warmup\": 0"

/* cli_dir/r.jsonl: unroll, checkpoint and deq, at 3 and 4 layers, seeds 1
 * and 2 (12 records, 6 rows, 2 groups). */
static void make_records(char *out, size_t n)
{
	char suite[600], text[1200], err[2048];
	cli_path(suite, sizeof(suite), "s.json");
	cli_path(out, n, "r.jsonl");
	snprintf(
	    text, sizeof(text),
	    "{\"name\": \"rep\", \"base\": {" TINY ", \"out\": \"%s\"}, "
	    "\"axes\": {\"method\": [\"unroll\", \"checkpoint\", \"deq\"], "
	    "\"layers\": [3, 4], \"seed\": [1, 2]}}",
	    out);
	cli_write_text(suite, text);
	const char *a[] = {"suite", suite, NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
}

/* A suite says where it is before each run: run K of N, elapsed, and an
 * ETA once a run has finished (issue 29). */
Test(report_cli, suite_progress_lines, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[600], p[600], *e;
	make_records(out, sizeof(out));
	cli_path(p, sizeof(p), "stderr.txt");
	e = cli_read(p, NULL);
	cr_assert(strstr(e, "deqbench: suite rep: run 1 of 12 (index 0), "
			    "elapsed 0s\n"),
		  "%s", e);
	cr_assert(strstr(e, "run 12 of 12 (index 11), elapsed ") &&
		      strstr(e, ", ETA "),
		  "%s", e);
	free(e);
}

static char *stdout_text(void)
{
	char p[600];
	cli_path(p, sizeof(p), "stdout.txt");
	return cli_read(p, NULL);
}

/* Columns of a UTF-8 line (bytes that do not continue a character). */
static int columns(const char *s, const char *end)
{
	int c = 0;
	for (; s < end; s++)
		c += (*s & 0xC0) != 0x80;
	return c;
}

Test(report_cli, terminal_table_fits, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[600], err[2048], *t, *l;
	int headings = 0;
	make_records(out, sizeof(out));
	const char *a[] = {"report", out, NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	t = stdout_text();
	for (l = t; *l;) {
		char *e = strchr(l, '\n');
		cr_assert_not_null(e);
		cr_assert_leq(columns(l, e), REPORT_TERM_WIDTH, "%.*s",
			      (int)(e - l), l);
		headings += !strncmp(l, "== ", 3);
		l = e + 1;
	}
	cr_assert_eq(headings, 2, "%s", t);
	cr_assert(strstr(t, "== layers=3") && strstr(t, "step ms [95% CI]"),
		  "%s", t);
	free(t);
}

Test(report_cli, formats_where_sort, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[600], err[2048], *t;
	json_t *rows;
	make_records(out, sizeof(out));
	const char *md[] = {"report", "--format", "md", out, NULL};
	cr_assert_eq(cli_run(md, 0, err, sizeof(err)), 0, "%s", err);
	t = stdout_text();
	cr_assert(strstr(t, "| group | method | status | runs |"), "%s", t);
	free(t);
	const char *csv[] = {"report", "--format=csv", out, NULL};
	cr_assert_eq(cli_run(csv, 0, err, sizeof(err)), 0, "%s", err);
	t = stdout_text();
	cr_assert(!strncmp(t, "group,method,impl,kind,status,runs,", 35), "%s",
		  t);
	free(t);
	const char *js[] = {"report",  "--format",   "json",
			    "--where", "method=deq", "--sort",
			    "ppl",     out,	     NULL};
	cr_assert_eq(cli_run(js, 0, err, sizeof(err)), 0, "%s", err);
	t = stdout_text();
	rows = json_loads(t, 0, NULL);
	cr_assert_eq(json_array_size(rows), 2, "%s", t);
	cr_assert_eq(json_integer_value(
			 json_object_get(json_array_get(rows, 0), "runs")),
		     2, "seeds aggregate");
	cr_assert_leq(
	    json_number_value(json_object_get(
		json_object_get(json_array_get(rows, 0), "valid_ppl"), "mean")),
	    json_number_value(json_object_get(
		json_object_get(json_array_get(rows, 1), "valid_ppl"),
		"mean")));
	json_decref(rows);
	free(t);
	const char *help[] = {"report", "--help", NULL};
	cr_assert_eq(cli_run(help, 0, err, sizeof(err)), 0);
	t = stdout_text();
	cr_assert(strstr(t, "usage: deqbench report"), "%s", t);
	free(t);
}

Test(report_cli, bad_flags_exit_2, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[600], err[2048];
	make_records(out, sizeof(out));
	const char *fmt[] = {"report", "--format", "xml", out, NULL};
	const char *where[] = {"report", "--where", "nokey=1", out, NULL};
	const char *weq[] = {"report", "--where", "method", out, NULL};
	const char *sort[] = {"report", "--sort", "colour", out, NULL};
	const char *none[] = {"report", "--where", "method=revolve", out, NULL};
	const char *noval[] = {"report", out, "--sort", NULL};
	const char *const *bad[] = {fmt, where, weq, sort, none, noval};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cr_assert_eq(cli_run(bad[i], 0, err, sizeof(err)), 2,
			     "case %zu: %s", i, err);
		cr_assert(strchr(err, '\n') == strrchr(err, '\n'),
			  "case %zu: one line: %s", i, err);
	}
}
