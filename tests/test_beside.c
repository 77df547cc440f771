/*
 * test_beside.c — a record says what of ours ran beside it
 * (bench/run/beside.h): a run alone counts none and leaves the registry
 * empty; of two runs that overlap, each counts the other, the second
 * because the first was registered when it started, the first because the
 * second marked it (the first is stopped with SIGSTOP while the second
 * runs, so nothing hangs on timing); the file of a dead process is removed
 * and not counted; `suite --lanes 2` says so in every record; and `report`
 * labels a row whose runs ran beside others ("beside k/n"), in the table
 * and in JSON, while records without `beside` (older) get no label.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <signal.h>

#include "record.h"
#include "report.h"
#include "test_cli.h"

#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=2", "layers=2", "warmup_steps=1", "lr_warmup=1",       \
	    "eval_tokens=64", "threads=1", "eval_warmup=0"

static char reg[512];

/* A test's own registry: cli_dir/reg, as DQ_RUNS_DIR of every run. */
static void setup(void)
{
	cli_setup();
	cli_path(reg, sizeof(reg), "reg");
	setenv("DQ_RUNS_DIR", reg, 1);
}

/* The last record of path (new reference). */
static json_t *last_record(const char *path)
{
	json_t *arr = json_array(), *r;
	char err[1024];
	cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert(json_array_size(arr) > 0);
	r = json_incref(json_array_get(arr, json_array_size(arr) - 1));
	json_decref(arr);
	return r;
}

/* beside.KEY of rec: its integer, -1 for null. */
static json_int_t beside_of(const json_t *rec, const char *key)
{
	const json_t *b = json_object_get(rec, "beside"), *v;
	cr_assert(json_is_object(b), "no beside object");
	v = json_object_get(b, key);
	cr_assert(v, "no beside.%s", key);
	return json_is_null(v) ? -1 : json_integer_value(v);
}

/* Files of the registry whose names start with prefix. */
static int files_in_reg(const char *prefix)
{
	DIR *d = opendir(reg);
	struct dirent *e;
	int n = 0;
	if (!d)
		return 0;
	while ((e = readdir(d)))
		n += !strncmp(e->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

Test(beside, a_run_alone_counts_none, .init = setup, .fini = cli_teardown,
     .timeout = 60)
{
	char out[512], arg[600], err[4096];
	json_t *r;
	cli_path(out, sizeof(out), "a.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run", TINY, "steps=3", arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	r = last_record(out);
	cr_assert_eq(beside_of(r, "runs"), 0);
	cr_assert_eq(beside_of(r, "at_start"), 0);
	cr_assert_eq(beside_of(r, "at_end"), 0);
	cr_assert_eq(beside_of(r, "lanes"), -1);
	cr_assert_eq(files_in_reg(""), 2, "only . and .. are left");
	json_decref(r);
}

/* Starts deqbench with args in the background, its output to files in
 * cli_dir; its pid. */
static pid_t start_bg(const char *const *args)
{
	char *argv[64], o[512];
	const char *bin = cli_argv(args, argv);
	pid_t pid;
	cli_path(o, sizeof(o), "bg.txt");
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int fd = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(126);
		execv(bin, argv);
		_exit(127);
	}
	return pid;
}

/* Run A (long) registers; it is stopped; run B runs whole beside it; A is
 * interrupted and goes on to write its record. Each counts the other. */
Test(beside, two_runs_count_each_other, .init = setup, .fini = cli_teardown,
     .timeout = 120)
{
	char oa[512], ob[512], aa[600], ab[600], err[4096], mine[600];
	json_t *ra, *rb;
	pid_t a;
	cli_path(oa, sizeof(oa), "a.jsonl");
	cli_path(ob, sizeof(ob), "b.jsonl");
	snprintf(aa, sizeof(aa), "out=%s", oa);
	snprintf(ab, sizeof(ab), "out=%s", ob);
	{
		const char *args[] = {"run", TINY, "steps=200000", aa, NULL};
		a = start_bg(args);
	}
	snprintf(mine, sizeof(mine), "%s/run.%ld", reg, (long)a);
	while (!cli_exists(mine)) { /* A registers before its setup */
		int st;
		cr_assert_eq(waitpid(a, &st, WNOHANG), 0, "A ended first");
		usleep(10000);
	}
	cr_assert_eq(kill(a, SIGSTOP), 0);
	{
		const char *args[] = {"run", TINY, "steps=3", ab, NULL};
		cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	}
	/* the interrupt waits for SIGCONT; A stops after its current step */
	cr_assert_eq(kill(a, SIGINT), 0);
	cr_assert_eq(kill(a, SIGCONT), 0);
	cli_wait_exit(a);
	rb = last_record(ob);
	cr_assert_eq(beside_of(rb, "runs"), 1);
	cr_assert_eq(beside_of(rb, "at_start"), 1);
	cr_assert_eq(beside_of(rb, "at_end"), 1, "A, stopped, still runs");
	ra = last_record(oa);
	cr_assert_str_eq(json_string_value(json_object_get(ra, "status")),
			 "interrupted");
	cr_assert_eq(beside_of(ra, "runs"), 1, "B's mark tells A");
	cr_assert_eq(beside_of(ra, "at_start"), 0);
	cr_assert_eq(beside_of(ra, "at_end"), 0);
	cr_assert_eq(files_in_reg("run."), 0);
	cr_assert_eq(files_in_reg("seen."), 0);
	json_decref(ra);
	json_decref(rb);
}

/* The file and the marks of a process that is gone are removed by the next
 * run, which does not count it. */
Test(beside, a_dead_process_is_not_counted, .init = setup, .fini = cli_teardown,
     .timeout = 60)
{
	char out[512], arg[600], err[4096], p[700], q[700];
	json_t *r;
	pid_t dead = fork();
	cr_assert(dead >= 0);
	if (dead == 0)
		_exit(0);
	cr_assert_eq(cli_wait_exit(dead), 0);
	mkdir(reg, 0700);
	snprintf(p, sizeof(p), "%s/run.%ld", reg, (long)dead);
	snprintf(q, sizeof(q), "%s/seen.%ld.1", reg, (long)dead);
	cli_write_text(p, "1 1\ndeqbench run\n");
	cli_write_text(q, "");
	cli_path(out, sizeof(out), "a.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run", TINY, "steps=3", arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	r = last_record(out);
	cr_assert_eq(beside_of(r, "runs"), 0);
	cr_assert(!cli_exists(p) && !cli_exists(q));
	json_decref(r);
}

/* suite --lanes 2: every record says it ran as one of two lanes, and
 * report labels the row; --lanes is checked. */
Test(beside, suite_lanes_are_recorded_and_labelled, .init = setup,
     .fini = cli_teardown, .timeout = 120)
{
	char sp[512], out[512], arg[600], err[4096], op[512], *o;
	json_t *r;
	cli_path(sp, sizeof(sp), "s.json");
	cli_path(out, sizeof(out), "s.jsonl");
	cli_path(op, sizeof(op), "stdout.txt");
	snprintf(arg, sizeof(arg), "out=%s", out);
	cli_write_text(sp, "{\"name\":\"l\",\"base\":{\"corpus\":\"synthetic\","
			   "\"d_model\":16,\"n_heads\":2,\"d_ff\":32,"
			   "\"seq_len\":8,\"batch_size\":2,\"layers\":2,"
			   "\"steps\":3,\"warmup_steps\":1,\"eval_tokens\":64,"
			   "\"threads\":1},\"axes\":{\"seed\":[1,2]}}");
	{
		const char *a[] = {"suite",   sp,    "--lanes", "2",
				   "--shard", "1/2", arg,	NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	r = last_record(out);
	cr_assert_eq(beside_of(r, "lanes"), 2);
	cr_assert_eq(beside_of(r, "runs"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(r, "suite"), "shard")),
			 "1/2");
	json_decref(r);
	{
		const char *a[] = {"report", out, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	o = cli_read(op, NULL);
	cr_assert(strstr(o, "beside 1/1"), "%s", o);
	free(o);
	{
		const char *a[] = {"validate", "--strict", out, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	{
		const char *a[] = {"suite", sp, "--lanes", "0", arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2);
		cr_assert(strstr(err, "--lanes"), "%s", err);
	}
}

/* report: of three runs of one row, one ran beside another run, one as a
 * lane, one (an older record) says nothing: "beside 2/3", and the count in
 * the JSON health object; without any, no label. */
Test(beside, report_labels_runs_that_ran_beside, .init = setup,
     .fini = cli_teardown, .timeout = 60)
{
	char out[512], arg[600], err[4096];
	json_t *base, *recs = json_array(), *rows, *h;
	cli_path(out, sizeof(out), "a.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run", TINY, "steps=3", arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	base = last_record(out);
	for (int k = 0; k < 3; k++) {
		json_t *r = json_deep_copy(base);
		json_t *b = json_object_get(r, "beside");
		/* steady step times: a 3-step run's own quartiles may read
		 * `noisy` on a loaded machine, which is not this test's label */
		json_t *ms =
		    json_object_get(json_object_get(r, "timing"), "step_ms");
		json_object_set(ms, "p25", json_object_get(ms, "median"));
		json_object_set(ms, "p75", json_object_get(ms, "median"));
		json_object_set_new(json_object_get(r, "config"), "seed",
				    json_integer(k + 1));
		if (k == 0)
			json_object_set_new(b, "runs", json_integer(2));
		else if (k == 1)
			json_object_set_new(b, "lanes", json_integer(2));
		else
			json_object_del(r, "beside");
		json_array_append_new(recs, r);
	}
	rows = report_rows(recs);
	cr_assert_eq(json_array_size(rows), 1);
	h = json_object_get(json_array_get(rows, 0), "health");
	cr_assert_eq(json_integer_value(json_object_get(h, "beside")), 2);
	cr_assert_str_eq(
	    json_string_value(json_array_get(json_object_get(h, "labels"), 0)),
	    "beside 2/3");
	json_decref(rows);
	json_array_remove(recs, 0);
	json_array_remove(recs, 0);
	rows = report_rows(recs);
	h = json_object_get(json_array_get(rows, 0), "health");
	cr_assert_eq(json_array_size(json_object_get(h, "labels")), 0);
	json_decref(rows);
	json_decref(recs);
	json_decref(base);
}
