/* test_report_cli.c — `deqbench report`'s flags on records of a real tiny
 * suite: the default terminal table fits REPORT_TERM_WIDTH columns with one
 * heading per group, --format md/csv/json, --where filters records, --sort
 * orders rows, --help, and bad flags exit 2 with one line. */
#include <jansson.h>
#include <math.h>

#include "report.h"
#include "stats.h"
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
 * ETA once a run has finished. */
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

/* Each record of path with every timing.step_ms figure set to a fixed
 * value by method and layers (ms[method][layers - 3][seed - 1]; NAN: the
 * record is left out), and a copy as seed 3 where that is given, into
 * fixed: the table then depends on no machine's speed or load. */
static void fix_times(const char *path, const char *fixed,
		      const double ms[3][2][3])
{
	static const char *const methods[] = {"unroll", "checkpoint", "deq"};
	char line[1 << 16];
	FILE *in = fopen(path, "r"), *out = fopen(fixed, "w");
	cr_assert(in && out);
	while (fgets(line, sizeof(line), in)) {
		json_t *r = json_loads(line, 0, NULL), *cfg, *v;
		const char *key;
		int m = 0, l, s;
		cr_assert_not_null(r, "%s", line);
		cfg = json_object_get(r, "config");
		while (strcmp(methods[m], json_string_value(
					      json_object_get(cfg, "method"))))
			m++;
		l = (int)json_integer_value(json_object_get(cfg, "layers")) - 3;
		for (s = json_integer_value(json_object_get(cfg, "seed")) - 1;
		     s < 3; s += 2) {
			json_t *step = json_object_get(
			    json_object_get(r, "timing"), "step_ms");
			char *text;
			if (isnan(ms[m][l][s]))
				break;
			json_object_foreach(step, key, v) json_object_set_new(
			    step, key, json_real(ms[m][l][s]));
			json_object_set_new(cfg, "seed", json_integer(s + 1));
			text = json_dumps(r, JSON_COMPACT);
			fprintf(out, "%s\n", text);
			free(text);
		}
		json_decref(r);
	}
	fclose(in);
	fclose(out);
}

/* The default table fits REPORT_TERM_WIDTH columns whatever the times: on
 * fixed records, from 1e-9 to 1e300 ms, intervals over 14 decades, and
 * 2-run rows (a loaded machine once made a 2-run row print "5.31
 * [0.00-409294.77] 31.0 [0.0-2082495.1]", past 100 columns): those say
 * why they have no interval. */
Test(report_cli, terminal_table_fits, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	/* [method][layers 3, 4][seed 1, 2, 3] */
	static const double ms[3][2][3] = {
	    {{5.31, 5.37, 5.26}, {1e-9, 1e300, NAN}},
	    {{5.31, 409294.77, NAN}, {99999.5, 99999.5, NAN}},
	    {{0.001, 5.31, 409294.77}, {1e6, 1e6, 1e6}}};
	char out[600], fixed[600], err[2048], want[128], *t, *l;
	int headings = 0;
	double lo, hi;
	make_records(out, sizeof(out));
	cli_path(fixed, sizeof(fixed), "fixed.jsonl");
	fix_times(out, fixed, ms);
	const char *a[] = {"report", fixed, NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_null(strstr(err, "skipped"), "%s", err);
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
	stats_log_interval(ms[0][0], 3, REPORT_LEVEL, &lo, &hi);
	snprintf(want, sizeof(want),
		 "  unroll L=3           3    %.2f [%.2f-%.2f] ",
		 cbrt(5.31 * 5.37 * 5.26), lo, hi);
	cr_assert(strstr(t, want), "%s in %s", want, t);
	cr_assert(strstr(t, "  checkpoint L=3 k=2   2   1474 (n=2: no CI)"),
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
	/* G20.6: the usage line names every flag */
	cr_assert(strstr(t, "usage: deqbench report [--format table|md|csv|"
			    "json] [--where KEY=VALUE ...] [--sort COLUMN] "
			    "[--html OUT.html] [--target-ppl P] [--price "
			    "PRICES.jsonl] FILE.jsonl ...\n"),
		  "%s", t);
	free(t);
}

/* G20.8: --where compares a value as its key's type, numbers by value:
 * lr=1e-3 is lr=0.001, layers=3.0 is layers=3, tf32=false is tf32=0;
 * a value the key cannot take is bad input. */
Test(report_cli, where_compares_as_the_key_type, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[600], err[2048], *t;
	json_t *rows;
	make_records(out, sizeof(out));
	const char *lr[] = {"report",	  "--format", "json",
			    "--where",	  "lr=1e-3",  "--where",
			    "layers=3.0", out,	      NULL};
	cr_assert_eq(cli_run(lr, 0, err, sizeof(err)), 0, "%s", err);
	t = stdout_text();
	rows = json_loads(t, 0, NULL);
	cr_assert_eq(json_array_size(rows), 3, "%s", t);
	json_decref(rows);
	free(t);
	const char *b[] = {"report",	 "--where", "tf32=0", "--where",
			   "method=deq", out,	    NULL};
	cr_assert_eq(cli_run(b, 0, err, sizeof(err)), 0, "%s", err);
	const char *bad[] = {"report", "--where", "layers=three", out, NULL};
	cr_assert_eq(cli_run(bad, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "--where layers=three") &&
		      strstr(err, "expected"),
		  "%s", err);
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
	/* G20.5: an unknown flag is named as one, not read as a file */
	const char *bogus[] = {"report", "--bogus", out, NULL};
	/* G20.7: a flag given twice is refused, not last-wins */
	char ha[600], hb[600], hbe[620];
	cli_path(ha, sizeof(ha), "a.html");
	cli_path(hb, sizeof(hb), "b.html");
	snprintf(hbe, sizeof(hbe), "--html=%s", hb);
	const char *html2[] = {"report", "--html", ha, hbe, out, NULL};
	const char *fmt2[] = {"report", "--format", "md", "--format",
			      "csv",	out,	    NULL};
	const char *sort2[] = {"report", "--sort=ppl", "--sort",
			       "method", out,	       NULL};
	const char *const *bad[] = {fmt,   where, weq,	 sort, none,
				    noval, bogus, html2, fmt2, sort2};
	const char *says[] = {"--format",
			      "not a config key",
			      "KEY=VALUE",
			      "--sort",
			      "--where keeps",
			      "needs a value",
			      "unknown flag --bogus",
			      "--html is given twice",
			      "--format is given twice",
			      "--sort is given twice"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cr_assert_eq(cli_run(bad[i], 0, err, sizeof(err)), 2,
			     "case %zu: %s", i, err);
		cr_assert(strchr(err, '\n') == strrchr(err, '\n'),
			  "case %zu: one line: %s", i, err);
		cr_assert(strstr(err, says[i]), "case %zu: %s", i, err);
	}
	cr_assert_not(cli_exists(ha) || cli_exists(hb));
}

/* G20.7: suite refuses --shard given twice (the last one used to win:
 * a second shard's runs ran as the first's). */
Test(report_cli, suite_flag_twice_exits_2, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char suite[600], err[2048];
	cli_path(suite, sizeof(suite), "s.json");
	cli_write_text(suite, "{\"name\": \"two\", \"base\": {" TINY
			      "}, \"axes\": {\"seed\": [1, 2]}}");
	const char *shard[] = {"suite",	  suite, "--shard",   "0/2",
			       "--shard", "1/2", "--dry-run", NULL};
	const char *dry[] = {"suite", suite, "--dry-run", "--dry-run", NULL};
	cr_assert_eq(cli_run(shard, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "--shard is given twice"), "%s", err);
	cr_assert(strchr(err, '\n') == strrchr(err, '\n'), "%s", err);
	cr_assert_eq(cli_run(dry, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "--dry-run is given twice"), "%s", err);
}
