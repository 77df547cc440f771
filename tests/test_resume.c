/*
 * test_resume.c — `suite --resume` and `report` on the records already in
 * a file: a record stands for one run (one repeat), reals are
 * stored exactly so a resumed run matches its record, data_dir is part of
 * a run's identity for the corpora read from it, a report row counts all
 * of its records, records of another schema version or invalid ones are
 * neither done runs nor rows, two concurrent resumes run each run once,
 * and a resume that ran nothing says so. Most tests run the deqbench
 * binary on a tiny synthetic suite (test_cli.h).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>

#include "record.h"
#include "test_cli.h"

/* The tiny suite's base config (tiny.json). */
#define TINY_BASE                                                              \
	"\"corpus\": \"synthetic\", \"d_model\": 16, \"n_heads\": 2, "         \
	"\"d_ff\": 32, \"seq_len\": 8, \"batch_size\": 2, \"layers\": 3, "     \
	"\"steps\": 3, \"warmup_steps\": 1, \"lr_warmup\": 1, "                \
	"\"eval_tokens\": 64, \"threads\": 1, \"eval_warmup\": 0"

/* ---- helpers ------------------------------------------------------------ */

/* Writes suite file cli_dir/name: the tiny base plus the extra JSON members
 * tail (", \"axes\": ..." or ""), into path. */
static void write_suite(char *path, size_t n, const char *name,
			const char *tail)
{
	char text[2048];
	snprintf(text, sizeof(text),
		 "{\"name\": \"r\", \"base\": {" TINY_BASE "}%s}", tail);
	cli_path(path, n, name);
	cli_write_text(path, text);
}

/* deqbench with args; asserts exit status want, stderr in err. */
static void run_ok(const char *const *args, int want, char *err, size_t n)
{
	int rc = cli_run(args, 0, err, n);
	cr_assert_eq(rc, want, "exit %d, want %d: %s", rc, want, err);
}

/* The records of a JSONL file (an empty array when it does not exist). */
static json_t *records_of(const char *path)
{
	json_t *arr = json_array();
	char err[1024];
	if (cli_exists(path))
		cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0,
			     "%s", err);
	return arr;
}

/* cli_dir/stdout.txt of the last cli_run. malloc'd. */
static char *last_stdout(void)
{
	char p[512], *s;
	cli_path(p, sizeof(p), "stdout.txt");
	s = cli_read(p, NULL);
	cr_assert_not_null(s);
	return s;
}

/* Number of times needle occurs in s. */
static int count_of(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* The member at dotted path of o, or NULL. */
static const json_t *at(const json_t *o, const char *path)
{
	char buf[256], *save = NULL, *tok;
	const json_t *cur = o;
	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && cur;
	     tok = strtok_r(NULL, ".", &save))
		cur = json_object_get(cur, tok);
	return cur;
}

/* Appends rec as one line to path. */
static void append_record(const char *path, const json_t *rec)
{
	char *s = json_dumps(rec, JSON_COMPACT | JSON_REAL_PRECISION(17));
	FILE *f = fopen(path, "a");
	cr_assert(s && f);
	fprintf(f, "%s\n", s);
	fclose(f);
	free(s);
}

/* One ok record of the tiny config: a one-run suite into cli_dir/one.jsonl.
 * New reference. */
static json_t *one_ok_record(void)
{
	char sp[512], out[512], arg[600], err[4096];
	json_t *arr, *r;
	write_suite(sp, sizeof(sp), "one.json", "");
	cli_path(out, sizeof(out), "one.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", sp, arg, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	arr = records_of(out);
	cr_assert_eq(json_array_size(arr), 1);
	r = json_incref(json_array_get(arr, 0));
	json_decref(arr);
	cr_assert_str_eq(json_string_value(at(r, "status")), "ok");
	remove(out);
	return r;
}

/* ---- reals stored exactly ------------------------------------------------ */

/* record_dumps writes each real in the shortest text that reads back as
 * the same double, as a real, outside strings only. */
Test(resume, reals_shortest_exact)
{
	static const double x[] = {0.1,
				   0.00031622776601683794,
				   1e-5,
				   120.0,
				   1e6,
				   1e16,
				   1e23,
				   -0.0,
				   5e-324,
				   1.7976931348623157e308,
				   1.0,
				   -2.5,
				   4.8000768012288194e-5,
				   0.18959299999999998};
	static const char *want =
	    "[0.1,0.00031622776601683794,1e-5,120.0,1000000.0,"
	    "10000000000000000.0,1e23,-0.0,5e-324,1.7976931348623157e308,1.0,"
	    "-2.5,4.8000768012288194e-5,0.18959299999999998,"
	    "\"0.10000000000000001 \\\"1.5\",7]";
	json_t *a = json_array(), *back;
	char *s;
	for (size_t i = 0; i < sizeof(x) / sizeof(*x); i++)
		json_array_append_new(a, json_real(x[i]));
	json_array_append_new(a, json_string("0.10000000000000001 \"1.5"));
	json_array_append_new(a, json_integer(7));
	s = record_dumps(a);
	cr_assert_str_eq(s, want);
	back = json_loads(s, 0, NULL);
	cr_assert(json_equal(a, back), "%s does not read back", s);
	cr_assert(signbit(json_real_value(json_array_get(back, 7))));
	json_decref(back);
	json_decref(a);
	free(s);
}

/* A suite run with lr = 10^-3.5 stores that very double, and --resume
 * finds its record (it re-ran and duplicated the run on every resume when
 * records kept 10 significant digits). */
Test(resume, real_config_resumes, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char sp[512], out[512], arg[600], err[4096], *o;
	const char *lr = "lr=0.00031622776601683794";
	json_t *arr;
	write_suite(sp, sizeof(sp), "s.json", "");
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", sp, arg, lr, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	o = cli_read(out, NULL);
	cr_assert(o && strstr(o, "\"lr\":0.00031622776601683794,"), "%s", o);
	free(o);
	for (int k = 0; k < 2; k++) {
		const char *a[] = {"suite", sp, arg, lr, "--resume", NULL};
		run_ok(a, 0, err, sizeof(err));
		cr_assert(strstr(err, "[0] skipped (--resume)"), "%s", err);
	}
	arr = records_of(out);
	cr_assert_eq(json_array_size(arr), 1);
	cr_assert_eq(json_real_value(at(json_array_get(arr, 0), "config.lr")),
		     strtod("0.00031622776601683794", NULL));
	json_decref(arr);
}

/* ---- a record is used up by one run -------------------------------------- */

/* repeats 1 -> 3 with --resume: the one record stands for repeat 0 only,
 * so repeats 1 and 2 run, and the file ends with one record per repeat. */
Test(resume, record_stands_for_one_repeat, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char s1[512], s3[512], out[512], arg[600], err[4096], *o;
	int per_repeat[3] = {0};
	json_t *arr, *r;
	size_t i;
	write_suite(s1, sizeof(s1), "s1.json", ", \"repeats\": 1");
	write_suite(s3, sizeof(s3), "s3.json", ", \"repeats\": 3");
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", s1, arg, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	{
		const char *a[] = {"suite", s3, arg, "--resume", NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	o = last_stdout();
	cr_assert(strstr(o, "--resume: 1 run(s) skipped"), "%s", o);
	free(o);
	arr = records_of(out);
	cr_assert_eq(json_array_size(arr), 3);
	json_array_foreach(arr, i, r)
	{
		json_int_t k = json_integer_value(at(r, "suite.repeat"));
		cr_assert(k >= 0 && k < 3);
		per_repeat[k]++;
	}
	for (int k = 0; k < 3; k++)
		cr_assert_eq(per_repeat[k], 1, "repeat %d: %d records", k,
			     per_repeat[k]);
	json_decref(arr);
}

/* Two runs of one suite with the same resolved config and repeat
 * (checkpoint L=4: k=0 resolves to 2) are one run (the
 * expansion collapses them), and one record of that config in out= stands
 * for it: nothing runs twice, nothing is appended twice. */
Test(resume, record_used_up_by_one_run, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char s1[512], s2[512], out[512], arg[600], err[4096];
	json_t *arr;
	write_suite(s1, sizeof(s1), "s1.json",
		    ", \"axes\": {\"method\": [{\"method\": \"checkpoint\", "
		    "\"layers\": 4, \"k\": 2}]}");
	write_suite(s2, sizeof(s2), "s2.json",
		    ", \"axes\": {\"method\": [{\"method\": \"checkpoint\", "
		    "\"layers\": 4, \"k\": 0}, {\"method\": \"checkpoint\", "
		    "\"layers\": 4, \"k\": 2}]}");
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", s1, arg, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	{
		const char *a[] = {"suite", s2, arg, "--resume", NULL};
		run_ok(a, 0, err, sizeof(err));
		/* k=0 resolves to round(sqrt(4)) = 2: the expansion collapses
		 * the two into one run, which the record stands
		 * for */
		cr_assert(strstr(err, "run 1 is the same run as run 0") &&
			      strstr(err, "[0] skipped (--resume)") &&
			      !strstr(err, "[1]"),
			  "%s", err);
	}
	arr = records_of(out);
	cr_assert_eq(json_array_size(arr), 1);
	json_decref(arr);
}

/* Shards sharing out=: shard 1/2 of a 2-repeat combination appends the
 * record of repeat 1; shard 0/2 --resume still runs repeat 0. */
Test(resume, shard_record_is_its_own_repeat, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char sp[512], out[512], arg[600], err[4096];
	json_t *arr;
	write_suite(sp, sizeof(sp), "s.json", ", \"repeats\": 2");
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", sp, arg, "--shard", "1/2", NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	{
		const char *a[] = {"suite", sp,		arg, "--shard",
				   "0/2",   "--resume", NULL};
		run_ok(a, 0, err, sizeof(err));
		cr_assert_null(strstr(err, "skipped"), "%s", err);
	}
	arr = records_of(out);
	cr_assert_eq(json_array_size(arr), 2);
	cr_assert_neq(
	    json_integer_value(at(json_array_get(arr, 0), "suite.repeat")),
	    json_integer_value(at(json_array_get(arr, 1), "suite.repeat")));
	json_decref(arr);
}

/* ---- message: a resume that ran nothing ---------------------------------- */

Test(resume, nothing_ran_says_so, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char sp[512], out[512], arg[600], err[4096], *o;
	size_t n0, n1;
	write_suite(sp, sizeof(sp), "s.json",
		    ", \"axes\": {\"layers\": [2, 3]}");
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", sp, arg, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	free(cli_read(out, &n0));
	{
		const char *a[] = {"suite", sp, arg, "--resume", NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	free(cli_read(out, &n1));
	cr_assert_eq(n0, n1);
	o = last_stdout();
	cr_assert(strstr(o, "nothing ran, nothing appended to"), "%s", o);
	cr_assert_null(strstr(o, "records appended"), "%s", o);
	free(o);
}

/* ---- data_dir is part of a run's identity -------------------------------- */

/* A small text corpus (train/valid/test.txt) in cli_dir/name, its words
 * drawn with seed x. */
static void write_text_corpus(char *dir, size_t n, const char *name, unsigned x)
{
	static const char *const words[] = {"the", "cat", "sat", "on",
					    "a",   "mat", "and", "dog"};
	static const char *const files[] = {"train.txt", "valid.txt",
					    "test.txt"};
	cli_path(dir, n, name);
	cr_assert_eq(mkdir(dir, 0777), 0);
	for (int k = 0; k < 3; k++) {
		char p[700], text[8192];
		size_t len = 0;
		for (int l = 0; l < (k ? 30 : 100); l++)
			for (int w = 0; w < 8; w++) {
				x = x * 1103515245u + 12345u;
				len += (size_t)snprintf(
				    text + len, sizeof(text) - len, "%s%s",
				    words[(x >> 16) % 8], w < 7 ? " " : "\n");
			}
		snprintf(p, sizeof(p), "%s/%s", dir, files[k]);
		cli_write(p, text, len);
	}
}

/* corpus=text: a record made on data_dir A is not the run on data_dir B
 * (--resume runs it), and report shows the two as two rows; for the
 * synthetic corpus data_dir is not read, so it stays output-only. */
Test(resume, data_dir_is_identity, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char sp[512], out[512], arg[600], err[4096], da[512], db[512];
	char aa[600], ab[600], *o;
	json_t *arr;
	write_text_corpus(da, sizeof(da), "A", 7);
	write_text_corpus(db, sizeof(db), "B", 11);
	snprintf(aa, sizeof(aa), "data_dir=%s", da);
	snprintf(ab, sizeof(ab), "data_dir=%s", db);
	write_suite(sp, sizeof(sp), "s.json", "");
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", sp, arg, "corpus=text", aa, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	for (int k = 0; k < 2; k++) {
		const char *a[] = {"suite", sp,		arg, "corpus=text",
				   ab,	    "--resume", NULL};
		run_ok(a, 0, err, sizeof(err));
		cr_assert_eq(!!strstr(err, "[0] skipped (--resume)"), k, "%s",
			     err);
	}
	arr = records_of(out);
	cr_assert_eq(json_array_size(arr), 2);
	json_decref(arr);
	{
		const char *a[] = {"report", "--format", "md", out, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	o = last_stdout();
	cr_assert_eq(count_of(o, "| ok | 1 |"), 2, "%s", o);
	cr_assert(strstr(o, "data_dir="), "%s", o);
	free(o);
	/* synthetic: data_dir does not make another run */
	{
		const char *a[] = {"suite", sp, arg, aa, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	{
		const char *a[] = {"suite", sp, arg, ab, "--resume", NULL};
		run_ok(a, 0, err, sizeof(err));
		cr_assert(strstr(err, "[0] skipped (--resume)"), "%s", err);
	}
}

/* ---- a report row counts all of its records ------------------------------ */

/* 69 ok records (seeds 1..69: 69 runs, not one record repeated, which
 * report would count once) and then an error record of one config: one
 * row of 70 runs whose status is error (only the first 64 records
 * counted). */
Test(resume, report_row_counts_every_record, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char path[512], err[4096], *o;
	json_t *r = one_ok_record(), *e;
	cli_path(path, sizeof(path), "many.jsonl");
	for (int k = 0; k < 69; k++) {
		json_object_set_new(json_object_get(r, "config"), "seed",
				    json_integer(k + 1));
		append_record(path, r);
	}
	e = json_deep_copy(r);
	json_object_set_new(e, "status", json_string("error"));
	json_object_set_new(e, "message", json_string("boom"));
	append_record(path, e);
	{
		const char *a[] = {"report", "--format", "md", path, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	o = last_stdout();
	cr_assert(strstr(o, "| error | 70 |"), "%s", o);
	free(o);
	json_decref(e);
	json_decref(r);
}

/* A run that a signal or the budget stopped (status interrupted) and that
 * `suite --resume` ran again to the end (same config and seed, status ok)
 * is left out of its row and named, in the file's order either way; an
 * interrupted run that was not rerun stays a run of its row. Seeds 1..3:
 * 1 interrupted then ok, 2 interrupted only, 3 ok; and seed 4 ok before
 * its interrupted record (a file appended out of order). */
Test(resume, report_leaves_out_superseded_runs, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const struct {
		int seed;
		const char *status;
	} file[] = {{1, "interrupted"}, {2, "interrupted"}, {1, "ok"},
		    {3, "ok"},		{4, "ok"},	    {4, "interrupted"}};
	char path[512], err[4096], *o;
	json_t *r = one_ok_record(), *out, *row;
	cli_path(path, sizeof(path), "resumed.jsonl");
	for (size_t k = 0; k < sizeof(file) / sizeof(file[0]); k++) {
		json_t *c = json_deep_copy(r);
		json_object_set_new(json_object_get(c, "config"), "seed",
				    json_integer(file[k].seed));
		json_object_set_new(c, "status", json_string(file[k].status));
		if (!strcmp(file[k].status, "interrupted"))
			json_object_set_new(
			    c, "message",
			    json_string("interrupted by SIGTERM at step 3"));
		append_record(path, c);
		json_decref(c);
	}
	{
		const char *a[] = {"report", "--format", "json", path, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	o = last_stdout();
	out = json_loads(o, 0, NULL);
	cr_assert(json_is_array(out) && json_array_size(out) == 1, "%s", o);
	row = json_array_get(out, 0);
	cr_assert_eq(json_integer_value(json_object_get(row, "runs")), 4, "%s",
		     o);
	cr_assert_eq(json_integer_value(json_object_get(row, "superseded")), 2,
		     "%s", o);
	cr_assert_eq(json_integer_value(at(row, "health.interrupted")), 1, "%s",
		     o);
	cr_assert(strstr(o, "interrupted and rerun: left out 2"), "%s", o);
	json_decref(out);
	free(o);
	json_decref(r);
}

/* ---- schema version and validity ----------------------------------------- */

/* The two unusable variants of ok record r: schema 99, and timing
 * "garbage". New references in bad[2]. */
static void unusable_copies(const json_t *r, json_t *bad[2])
{
	bad[0] = json_deep_copy(r);
	json_object_set_new(bad[0], "schema", json_integer(99));
	bad[1] = json_deep_copy(r);
	json_object_set_new(bad[1], "timing", json_string("garbage"));
}

/* --resume counts neither a record of schema 99 nor an invalid one as
 * done: the run runs. */
Test(resume, unusable_records_are_not_done, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char sp[512], out[512], arg[600], err[4096];
	json_t *r = one_ok_record(), *bad[2], *arr;
	unusable_copies(r, bad);
	write_suite(sp, sizeof(sp), "one.json", "");
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	for (int k = 0; k < 2; k++) {
		remove(out);
		append_record(out, bad[k]);
		{
			const char *a[] = {"suite", sp, arg, "--resume", NULL};
			run_ok(a, 0, err, sizeof(err));
			cr_assert_null(strstr(err, "skipped"), "%d: %s", k,
				       err);
		}
		arr = records_of(out);
		cr_assert_eq(json_array_size(arr), 2);
		json_decref(arr);
	}
	json_decref(bad[0]);
	json_decref(bad[1]);
	json_decref(r);
}

/* report leaves out records of another schema version and invalid ones,
 * naming each on stderr (exit 0 with the rest), but not one with a field
 * it does not know (a newer build's); it refuses a file with nothing else
 * (exit 2). */
Test(resume, report_skips_unusable_records, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char path[512], only[512], err[4096], *o;
	json_t *r = one_ok_record(), *bad[2];
	unusable_copies(r, bad);
	cli_path(path, sizeof(path), "mixed.jsonl");
	cli_path(only, sizeof(only), "bad.jsonl");
	append_record(path, r);
	append_record(path, bad[0]);
	append_record(path, bad[1]);
	json_object_set_new(r, "future_field", json_true());
	append_record(path, r);
	append_record(only, bad[0]);
	append_record(only, bad[1]);
	{
		const char *a[] = {"report", "--format", "md", path, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	cr_assert(strstr(err, "mixed.jsonl:2: record skipped: schema 99") &&
		      strstr(err, "mixed.jsonl:3: record skipped: field "
				  "timing"),
		  "%s", err);
	cr_assert_null(strstr(err, "mixed.jsonl:4"), "%s", err);
	o = last_stdout();
	cr_assert(strstr(o, "| ok | 2 |"), "%s", o);
	free(o);
	{
		const char *a[] = {"report", only, NULL};
		run_ok(a, 2, err, sizeof(err));
		cr_assert(strstr(err, "no usable records"), "%s", err);
	}
	json_decref(bad[0]);
	json_decref(bad[1]);
	json_decref(r);
}

/* ---- concurrent resumes -------------------------------------------------- */

/* Starts deqbench with args, its output to files named by tag. */
static pid_t spawn(const char *const *args, const char *tag)
{
	char *argv[64], p[512];
	const char *bin = cli_argv(args, argv);
	pid_t pid;
	cli_path(p, sizeof(p), tag);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execv(bin, argv);
		_exit(127);
	}
	return pid;
}

/* Two `suite --resume` of one 6-run suite started together, 4 times on a
 * fresh out=: both exit 0 and each run's record is in out= exactly once
 * (each ran everything before runs were claimed). */
Test(resume, concurrent_resumes_run_each_once, .init = cli_setup,
     .fini = cli_teardown, .timeout = 240)
{
	char sp[512], out[512], arg[600];
	write_suite(sp, sizeof(sp), "s.json",
		    ", \"axes\": {\"layers\": [2, 3, 4, 5, 6, 7]}");
	for (int t = 0; t < 4; t++) {
		const char *a[] = {"suite", sp, arg, "--resume", NULL};
		int per_index[6] = {0}, st;
		json_t *arr, *r;
		pid_t p[2];
		size_t i;
		snprintf(out, sizeof(out), "%s/r%d.jsonl", cli_dir, t);
		snprintf(arg, sizeof(arg), "out=%s", out);
		p[0] = spawn(a, "a.txt");
		p[1] = spawn(a, "b.txt");
		for (int k = 0; k < 2; k++) {
			cr_assert_eq(waitpid(p[k], &st, 0), p[k]);
			cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
				  "try %d: resume %d ended with %d", t, k, st);
		}
		arr = records_of(out);
		json_array_foreach(arr, i, r)
		{
			json_int_t x = json_integer_value(at(r, "suite.index"));
			cr_assert(x >= 0 && x < 6);
			per_index[x]++;
		}
		for (int k = 0; k < 6; k++)
			cr_assert_eq(per_index[k], 1,
				     "try %d: run %d has %d records", t, k,
				     per_index[k]);
		json_decref(arr);
	}
}

/* precision and compile at their defaults are not part
 * of a run's identity: a record written before them (no such keys) is the
 * same run as one at fp32 and compile=false, so compare pairs them and
 * --resume skips; precision=bf16 is another run. */
Test(resume, defaulted_keys_not_identity_at_default)
{
	json_t *old = json_pack("{s:s, s:i}", "method", "unroll", "steps", 3);
	json_t *now = json_pack("{s:s, s:i, s:s, s:b}", "method", "unroll",
				"steps", 3, "precision", "fp32", "compile", 0);
	json_t *bf = json_pack("{s:s, s:i, s:s, s:b}", "method", "unroll",
			       "steps", 3, "precision", "bf16", "compile", 0);
	json_t *a = record_run_identity(old), *b = record_run_identity(now),
	       *c = record_run_identity(bf);
	cr_assert(json_equal(a, b));
	cr_assert(!json_equal(a, c));
	cr_assert_str_eq(json_string_value(json_object_get(c, "precision")),
			 "bf16");
	json_decref(old), json_decref(now), json_decref(bf);
	json_decref(a), json_decref(b), json_decref(c);
}

/* G1: data_dir is part of the identity of a run on a corpus read from
 * disk, compared as a normalised path: "dA", "./dA", "dA/", "dA//." and
 * "./dA/./" are one directory (the suite's collapse says one run, so
 * --resume, report and compare must too); "dB" and "../dA" are others;
 * with corpus=synthetic data_dir is no part of it. */
Test(resume, data_dir_identity_is_a_normalised_path)
{
	static const char *const same[] = {"dA", "./dA", "dA/", "dA//.",
					   "./dA/./"};
	json_t *ref = NULL;
	for (size_t i = 0; i < sizeof(same) / sizeof(*same); i++) {
		json_t *c = json_pack("{s:s, s:s}", "corpus", "text",
				      "data_dir", same[i]);
		json_t *id = record_run_identity(c);
		cr_assert_str_eq(
		    json_string_value(json_object_get(id, "data_dir")), "dA",
		    "%s", same[i]);
		if (!ref)
			ref = json_incref(id);
		cr_assert(json_equal(ref, id), "%s", same[i]);
		json_decref(c), json_decref(id);
	}
	static const char *const other[] = {"dB", "../dA", "/dA"};
	for (size_t i = 0; i < sizeof(other) / sizeof(*other); i++) {
		json_t *c = json_pack("{s:s, s:s}", "corpus", "text",
				      "data_dir", other[i]);
		json_t *id = record_run_identity(c);
		cr_assert(!json_equal(ref, id), "%s", other[i]);
		json_decref(c), json_decref(id);
	}
	static const char *const kept[][2] = {
	    {"/", "/"}, {"//x//", "/x"}, {".", "."}, {"./", "."}, {"", "."}};
	for (size_t i = 0; i < sizeof(kept) / sizeof(*kept); i++) {
		json_t *c = json_pack("{s:s, s:s}", "corpus", "ptb", "data_dir",
				      kept[i][0]);
		json_t *id = record_run_identity(c);
		cr_assert_str_eq(
		    json_string_value(json_object_get(id, "data_dir")),
		    kept[i][1], "'%s'", kept[i][0]);
		json_decref(c), json_decref(id);
	}
	json_t *syn =
	    json_pack("{s:s, s:s}", "corpus", "synthetic", "data_dir", "dA");
	json_t *id = record_run_identity(syn);
	cr_assert_null(json_object_get(id, "data_dir"));
	json_decref(syn), json_decref(id), json_decref(ref);
}

/* A suite in its default round-robin order stopped after its first three
 * runs (seed 1 of both methods, seed 2 of unroll): --resume runs exactly
 * the three missing runs, each once, at their positions in that order. */
Test(resume, interleaved_suite_resumes_the_missing_runs, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char sp[512], out[512], arg[600], err[4096];
	int seen[2][3] = {{0}};
	json_t *arr, *r;
	size_t i;
	write_suite(sp, sizeof(sp), "s.json",
		    ", \"axes\": {\"method\": [\"unroll\", \"checkpoint\"], "
		    "\"seed\": [1, 2, 3]}");
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", sp, arg, NULL};
		run_ok(a, 0, err, sizeof(err));
	}
	arr = records_of(out);
	cr_assert_eq(json_array_size(arr), 6);
	remove(out);
	for (i = 0; i < 3; i++) /* the records of the runs done before */
		append_record(out, json_array_get(arr, i));
	json_decref(arr);
	{
		const char *a[] = {"suite", sp, arg, "--resume", NULL};
		run_ok(a, 0, err, sizeof(err));
		for (int k = 0; k < 6; k++) {
			char sk[64];
			snprintf(sk, sizeof(sk), "[%d] skipped (--resume)", k);
			cr_assert_eq(strstr(err, sk) != NULL, k < 3,
				     "run %d: %s", k, err);
		}
	}
	arr = records_of(out);
	cr_assert_eq(json_array_size(arr), 6);
	json_array_foreach(arr, i, r)
	{
		int ck = !strcmp(json_string_value(at(r, "config.method")),
				 "checkpoint");
		json_int_t seed = json_integer_value(at(r, "config.seed"));
		cr_assert(seed >= 1 && seed <= 3);
		seen[ck][seed - 1]++;
		/* round-robin: seed s of unroll, then of checkpoint */
		cr_assert_eq(json_integer_value(at(r, "suite.index")),
			     (seed - 1) * 2 + ck);
		cr_assert_str_eq(json_string_value(at(r, "suite.order")),
				 "round-robin");
	}
	for (int m = 0; m < 2; m++)
		for (int s = 0; s < 3; s++)
			cr_assert_eq(seen[m][s], 1, "method %d seed %d: %d", m,
				     s + 1, seen[m][s]);
	json_decref(arr);
}
