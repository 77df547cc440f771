/* test_validate.c — `deqbench validate` (bench/records/validate.h; its
 * schema table against results/SCHEMA.md: test_schema.c): records of real
 * tiny runs of the current binary (every method, eval, diverged,
 * interrupted, a crashed suite run's error record) valid in strict mode; every committed results/ JSONL file valid; bad records
 * (wrong type, missing field, bad enum, unknown field, malformed line)
 * exit 2 with one line each naming file, line and field. */
#include <criterion/criterion.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "config.h"
#include "record.h"
#include "test_cli.h"
#include "validate.h"

/* ---- deqbench validate on real records ---- */

#define BASE                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=4", "layers=3", "warmup_steps=1", "eval_tokens=32",    \
	    "threads=1"
#define TINY BASE, "steps=4"

/* Starts deqbench with args, stdout to /dev/null and stderr to cli_dir/
 * stderr.txt; cpu_s > 0 limits the CPU seconds of it and its children
 * (RLIMIT_CPU: SIGXCPU past it, no core file). */
static pid_t spawn(const char *const *args, int cpu_s)
{
	char *argv[64], err_p[512];
	const char *bin = cli_argv(args, argv);
	pid_t pid;
	cli_path(err_p, sizeof(err_p), "stderr.txt");
	unlink(err_p);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int o = open(err_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int nul = open("/dev/null", O_WRONLY);
		struct rlimit rl = {(rlim_t)cpu_s, (rlim_t)cpu_s + 1};
		struct rlimit nocore = {0, 0};
		if (o < 0 || nul < 0 || dup2(o, 2) < 0 || dup2(nul, 1) < 0)
			_exit(126);
		/* SIGXCPU dumps core by default: no core file */
		if (cpu_s > 0 && (setrlimit(RLIMIT_CPU, &rl) != 0 ||
				  setrlimit(RLIMIT_CORE, &nocore) != 0))
			_exit(126);
		execv(bin, argv);
		_exit(127);
	}
	return pid;
}

/* Waits up to 60 s for a training step's progress line on stderr. */
static void wait_progress(void)
{
	char err_p[512];
	cli_path(err_p, sizeof(err_p), "stderr.txt");
	for (int t = 0; t < 600; t++) {
		char *e = cli_read(err_p, NULL);
		int seen = e && strstr(e, " step ");
		free(e);
		if (seen)
			return;
		usleep(100000);
	}
	cr_assert_fail("no progress line in 60 s");
}

/* Runs deqbench with args; asserts the exit status. */
static void run_ok(const char *const *args, int want)
{
	char err[4096];
	int rc = cli_run(args, 0, err, sizeof(err));
	cr_assert_eq(rc, want, "%s exited %d, not %d: %s", args[0], rc, want,
		     err);
}

/* The records' "kind/status" in file order, comma-separated, into buf. */
static void record_statuses(const char *path, char *buf, size_t n)
{
	json_t *arr = json_array(), *r;
	char err[1024];
	size_t i, len = 0;
	buf[0] = 0;
	cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0, "%s",
		     err);
	json_array_foreach(arr, i, r) len +=
	    (size_t)snprintf(buf + len, n - len, "%s%s/%s", i ? "," : "",
			     json_string_value(json_object_get(r, "kind")),
			     json_string_value(json_object_get(r, "status")));
	json_decref(arr);
}

/* Appends to out= (arg) a record of every way a run of the current binary
 * ends: every registered method (traced), deq with pretraining, eval,
 * diverged, interrupted (SIGTERM) and a suite run that crashed (error). */
static void write_current_records(const char *arg)
{
	char params[512], parg[600], sp[512];
	cli_path(params, sizeof(params), "p.safetensors");
	for (int i = 0; i < method_kind_count(); i++) {
		char m[64];
		if (method_kind_needs_managed(i))
			continue; /* refused off device=cuda */
		snprintf(m, sizeof(m), "method=%s", method_kind_name(i));
		const char *a[] = {"run", TINY, m, "trace=true", arg, NULL};
		run_ok(a, 0);
	}
	snprintf(parg, sizeof(parg), "save_params=%s", params);
	{
		const char *a[] = {
		    "run", TINY, "method=deq", "pretrain_steps=2",
		    parg,  arg,	 NULL};
		run_ok(a, 0);
	}
	snprintf(parg, sizeof(parg), "params=%s", params);
	{
		const char *a[] = {"eval", TINY, "method=deq", parg, arg, NULL};
		run_ok(a, 0);
	}
	{
		const char *a[] = {"run",	  TINY, "lr=1000", "clip=0",
				   "lr_warmup=0", arg,	NULL};
		run_ok(a, 0);
	}
	{
		const char *a[] = {"run", BASE, "steps=1000000", arg, NULL};
		pid_t pid = spawn(a, 0);
		wait_progress();
		kill(pid, SIGTERM);
		cr_assert_eq(cli_wait_exit(pid), 143);
	}
	/* the suite's child runs into the CPU limit (SIGXCPU); the parent,
	 * waiting, writes the crash's error record and exits 1 */
	cli_path(sp, sizeof(sp), "crash.json");
	cli_write_text(sp, "{\"name\": \"crash\", \"base\": {\"corpus\": "
			   "\"synthetic\", \"d_model\": 16, \"n_heads\": 2, "
			   "\"d_ff\": 32, \"seq_len\": 8, \"batch_size\": 4, "
			   "\"layers\": 3, \"steps\": 100000000, "
			   "\"warmup_steps\": 1, \"eval_tokens\": 32, "
			   "\"threads\": 1}}");
	{
		const char *a[] = {"suite", sp, arg, NULL};
		cr_assert_eq(cli_wait_exit(spawn(a, 2)), 1);
	}
}

/* stdout.txt of the last cli_run contains want. */
static void stdout_has(const char *want)
{
	char p[512], *s;
	cli_path(p, sizeof(p), "stdout.txt");
	s = cli_read(p, NULL);
	cr_assert(s && strstr(s, want), "stdout lacks '%s':\n%s", want,
		  s ? s : "");
	free(s);
}

Test(validate, current_records_are_strictly_valid, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char out[512], arg[600], st[1024], want[1024] = "", line[64];
	int n = 0;
	cli_path(out, sizeof(out), "runs.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	write_current_records(arg);
	record_statuses(out, st, sizeof(st));
	for (int i = 0; i < method_kind_count(); i++) {
		if (method_kind_needs_managed(i))
			continue;	   /* refused on the cpu */
		strcat(want, "train/ok,"); /* one run per method */
		n++;
	}
	strcat(want, "train/ok,eval/ok,train/diverged,train/interrupted,"
		     "train/error");
	cr_assert_str_eq(st, want);
	{
		const char *a[] = {"validate", "--strict", out, NULL};
		run_ok(a, 0);
	}
	snprintf(line, sizeof(line), "runs.jsonl: %d records valid (strict)\n",
		 n + 5);
	stdout_has(line);
}

/* ---- every committed record ---- */

static char committed[200][512];
static int n_committed;

static int collect_jsonl(const char *p, const struct stat *st, int flag,
			 struct FTW *ftw)
{
	size_t n = strlen(p);
	(void)st;
	(void)ftw;
	/* results/local/ holds a user's own runs (scripts/run.sh), not
	 * committed results */
	if (flag == FTW_F && n > 6 && !strcmp(p + n - 6, ".jsonl") &&
	    !strstr(p, "/results/local/") && n_committed < 200)
		snprintf(committed[n_committed++], 512, "%s", p);
	return 0;
}

/* Every committed record file passes validate --strict: they all come from
 * one reproduce.sh run of this commit (results/README.md). */
Test(validate, committed_results_are_valid, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char dir[1024];
	cr_assert_not_null(root, "DQ_SOURCE_ROOT must give the source tree");
	snprintf(dir, sizeof(dir), "%s/results", root);
	n_committed = 0;
	cr_assert_eq(nftw(dir, collect_jsonl, 16, FTW_PHYS), 0);
	/* none between a reproduction's start and its records' commit
	 * (results/README.md: the findings then say pending) */
	if (n_committed == 0)
		cr_log_info("no committed results/**/*.jsonl to validate");
	cr_assert_lt(n_committed, 200, "raise the limit of this test");
	for (int i = 0; i < n_committed; i += 60) {
		const char *a[64] = {"validate", "--strict"};
		int n = 2;
		for (int j = i; j < n_committed && j < i + 60; j++)
			a[n++] = committed[j];
		a[n] = NULL;
		run_ok(a, 0);
		for (int j = i; j < n_committed && j < i + 60; j++) {
			char want[600];
			snprintf(want, sizeof(want), "%.511s: ", committed[j]);
			stdout_has(want);
		}
	}
}

/* ---- bad records ---- */

/* The member at dotted path p of r ("a.b.c"; a numeric part indexes an
 * array): its parent object or array in *parent, the last part in *last. */
static void locate(json_t *r, const char *p, json_t **parent, char *last)
{
	char buf[256], *save = NULL, *tok, *next;
	json_t *cur = r;
	snprintf(buf, sizeof(buf), "%s", p);
	tok = strtok_r(buf, ".", &save);
	while ((next = strtok_r(NULL, ".", &save))) {
		cur = json_is_array(cur) ? json_array_get(cur, atoi(tok))
					 : json_object_get(cur, tok);
		cr_assert_not_null(cur, "%s", p);
		tok = next;
	}
	*parent = cur;
	snprintf(last, 64, "%s", tok);
}

/* A copy of r with the value at p replaced by v (stolen), or removed when
 * v is NULL, as one JSONL line appended to f. */
static void put_line(FILE *f, const json_t *r, const char *p, json_t *v)
{
	json_t *c = json_deep_copy(r), *parent;
	char last[64], *s;
	if (p) {
		locate(c, p, &parent, last);
		if (json_is_array(parent))
			json_array_set_new(parent, (size_t)atoi(last), v);
		else if (v)
			json_object_set_new(parent, last, v);
		else
			json_object_del(parent, last);
	}
	s = json_dumps(c, JSON_COMPACT);
	fprintf(f, "%s\n", s);
	free(s);
	json_decref(c);
}

/* One valid traced record of the current binary. */
static json_t *one_record(void)
{
	char out[512], arg[600], err[1024];
	json_t *arr = json_array(), *r;
	cli_path(out, sizeof(out), "one.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run", TINY, "trace=true", arg, NULL};
		run_ok(a, 0);
	}
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	r = json_incref(json_array_get(arr, 0));
	json_decref(arr);
	return r;
}

/* stderr.txt of the last run: its lines, counted, and each of want[]
 * found (NULL-terminated). */
static void stderr_lines(const char *const *want, int n_lines)
{
	char p[512], *s;
	int n = 0;
	cli_path(p, sizeof(p), "stderr.txt");
	s = cli_read(p, NULL);
	cr_assert_not_null(s);
	for (const char *c = s; *c; c++)
		n += *c == '\n';
	for (int i = 0; want[i]; i++)
		cr_assert(strstr(s, want[i]), "stderr lacks '%s':\n%s", want[i],
			  s);
	cr_assert_eq(n, n_lines, "%d lines, not %d:\n%s", n, n_lines, s);
	free(s);
}

/* bad.jsonl of bad_records_exit_2: r, then r broken one way per line (a
 * blank line and a valid record of a failed run among them). */
static void write_bad_lines(const char *bad, const json_t *r)
{
	FILE *f = fopen(bad, "w");
	cr_assert_not_null(f);
	put_line(f, r, NULL, NULL);
	put_line(f, r, "timing.steps_timed", json_string("4"));
	put_line(f, r, "memory.peak_total_bytes", NULL);
	put_line(f, r, "status", json_string("okay"));
	fprintf(f, "{\"schema\": 1, \"status\": \n");
	put_line(f, r, "quality.extra", json_integer(1));
	put_line(f, r, "config.method", json_string("magic"));
	put_line(f, r, "schema", json_integer(2));
	fprintf(f, "\n[1, 2]\n");
	put_line(f, r, "model.params.0.shape", json_array());
	put_line(f, r, "trace.loss.1", json_string("x"));
	put_line(f, r, "started_at", json_string("yesterday"));
	put_line(f, r, "config.layers", json_integer(0));
	put_line(f, r, "kind", NULL); /* valid: older records lack it */
	put_line(f, r, "message", json_string("boom"));
	put_line(f, r, "memory.peak_bytes.depth", json_real(1.5));
	put_line(f, r, "config.lyers", json_integer(3));
	{
		/* valid: a section of a run that did not get that far (an ok
		 * run's are not: test_records_strict.c) */
		json_t *e = json_deep_copy(r);
		json_object_set_new(e, "status", json_string("error"));
		json_object_set_new(e, "message", json_string("setup failed"));
		put_line(f, e, "timing", json_null());
		json_decref(e);
	}
	fclose(f);
}

/* One problem per bad line, each naming file, line and field; blank lines
 * counted but skipped; exit 2. */
Test(validate, bad_records_exit_2, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char meth[256];
	snprintf(meth, sizeof(meth),
		 "bad.jsonl:7: field config.method: expected one of %s, got "
		 "\"magic\"",
		 method_kind_list());
	const char *const want[] = {
	    "bad.jsonl:2: field timing.steps_timed: expected int, got string",
	    "bad.jsonl:3: field memory.peak_total_bytes: missing (expected "
	    "int)",
	    "bad.jsonl:4: field status: expected one of ok, diverged, "
	    "interrupted, error, got \"okay\"",
	    "bad.jsonl:5: malformed JSON at column ",
	    "bad.jsonl:6: field quality.extra: unknown field (not in "
	    "results/SCHEMA.md)",
	    meth,
	    "bad.jsonl:8: field schema: expected 1 (the schema version",
	    "bad.jsonl:10: malformed JSON at column 1: not an object",
	    "bad.jsonl:11: field model.params[0].shape: expected 1 to 3 "
	    "entries, got 0",
	    "bad.jsonl:12: field trace.loss[1]: expected number or null, got "
	    "string",
	    "bad.jsonl:13: field started_at: expected a UTC time like "
	    "2025-01-31T12:00:00Z, got \"yesterday\"",
	    "bad.jsonl:14: field config.layers: expected int in [1, 100000], "
	    "got 0",
	    "bad.jsonl:16: field message: expected \"\" with status ok",
	    "bad.jsonl:17: field memory.peak_bytes.depth: expected int, got "
	    "real",
	    "bad.jsonl:18: field config.lyers: unknown field (not a config "
	    "key",
	    NULL};
	json_t *r = one_record();
	char bad[512], good[512];
	FILE *f;
	cli_path(bad, sizeof(bad), "bad.jsonl");
	cli_path(good, sizeof(good), "good.jsonl");
	f = fopen(good, "w");
	put_line(f, r, NULL, NULL);
	fclose(f);
	write_bad_lines(bad, r);
	{
		const char *a[] = {"validate", good, bad, NULL};
		run_ok(a, 2);
	}
	stderr_lines(want, 15);
	stdout_has("good.jsonl: 1 record valid\n");
	stdout_has("bad.jsonl: 15 of 18 records invalid, 15 problems\n");
	/* strict: the record without "kind" is not what this build writes */
	f = fopen(bad, "w");
	put_line(f, r, "kind", NULL);
	fclose(f);
	{
		const char *a[] = {"validate", "--strict", bad, NULL};
		const char *const w[] = {"bad.jsonl:1: field kind: missing "
					 "(expected string; added 2026-11-23)",
					 NULL};
		run_ok(a, 2);
		stderr_lines(w, 1);
	}
	/* the first 20 problems of a file are shown, all are counted */
	f = fopen(bad, "w");
	for (int i = 0; i < 30; i++)
		put_line(f, r, "status", json_integer(i));
	fclose(f);
	{
		const char *a[] = {"validate", bad, NULL};
		const char *const w[] = {
		    "bad.jsonl:20: field status: expected string, got int",
		    NULL};
		run_ok(a, 2);
		stderr_lines(w, 20);
		stdout_has("bad.jsonl: 30 of 30 records invalid, 30 problems "
			   "(the first 20 shown)\n");
	}
	json_decref(r);
}

/* Bad input: exit 2 and one line; --help exits 0. */
Test(validate, bad_input_exits_2, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	char missing[512];
	struct {
		const char *args[4];
		const char *says;
	} cases[] = {
	    {{"validate", NULL}, "give one or more FILE.jsonl"},
	    {{"validate", "--strict", NULL}, "give one or more FILE.jsonl"},
	    {{"validate", "--bogus", "x.jsonl", NULL}, "unknown option"},
	    {{"validate", cli_dir, NULL}, "is a directory"},
	    {{"validate", missing, NULL}, "cannot read"},
	};
	cli_path(missing, sizeof(missing), "missing.jsonl");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[2048];
		cr_assert_eq(cli_run(cases[i].args, 0, err, sizeof(err)), 2,
			     "%s", err);
		cr_assert(strstr(err, cases[i].says), "%s", err);
		cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1,
			     "one line: %s", err);
	}
	{
		const char *a[] = {"validate", "--help", NULL};
		run_ok(a, 0);
		stdout_has("usage: deqbench validate");
	}
	{
		const char *a[] = {"--help", NULL};
		run_ok(a, 0);
		stdout_has("validate [--strict] FILE.jsonl");
	}
}

/* timing.step_gflop and timing.gflops: numbers or null;
 * a string is a problem; older records lack them (valid), which strict
 * mode calls missing. */
Test(validate, timing_flops_fields, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	static const char *const want[] = {
	    "bad.jsonl:1: field timing.step_gflop: expected number or null, "
	    "got string",
	    "bad.jsonl:2: field timing.gflops: expected number or null, got "
	    "bool",
	    NULL};
	json_t *r = one_record();
	const json_t *tm = json_object_get(r, "timing");
	char bad[512];
	FILE *f;
	cr_assert_gt(json_number_value(json_object_get(tm, "step_gflop")), 0);
	cr_assert_gt(json_number_value(json_object_get(tm, "gflops")), 0);
	cli_path(bad, sizeof(bad), "bad.jsonl");
	f = fopen(bad, "w");
	cr_assert_not_null(f);
	put_line(f, r, "timing.step_gflop", json_string("1.5"));
	put_line(f, r, "timing.gflops", json_true());
	put_line(f, r, "timing.gflops", json_null()); /* valid */
	put_line(f, r, "timing.step_gflop", NULL);    /* valid: older */
	fclose(f);
	{
		const char *a[] = {"validate", bad, NULL};
		run_ok(a, 2);
	}
	stderr_lines(want, 2);
	stdout_has("bad.jsonl: 2 of 4 records invalid, 2 problems\n");
	f = fopen(bad, "w");
	put_line(f, r, "timing.gflops", NULL);
	fclose(f);
	{
		const char *a[] = {"validate", "--strict", bad, NULL};
		const char *const w[] = {"bad.jsonl:1: field timing.gflops: "
					 "missing (expected number or null; "
					 "added 2026-11-23)",
					 NULL};
		run_ok(a, 2);
		stderr_lines(w, 1);
	}
	json_decref(r);
}

/* compile (impl=pytorch compile=true): optional even for
 * --strict (deqbench's records lack it); null or an object of SCHEMA.md's
 * fields, its mode one of torch.compile's. */
Test(validate, compile_object, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	static const char *const want[] = {
	    "bad.jsonl:3: field compile.mode: expected one of max-autotune, "
	    "reduce-overhead, max-autotune-no-cudagraphs, default, got "
	    "\"fast\"",
	    "bad.jsonl:4: field compile.break_reasons[0]: expected string, "
	    "got int",
	    NULL};
	json_t *r = one_record(),
	       *c = json_pack("{s:s, s:s, s:f, s:i, s:i, s:i, s:i, s:[]}",
			      "mode", "max-autotune", "scope", "step",
			      "compile_s", 38.4, "graphs", 1, "graph_breaks", 0,
			      "recompiles", 0, "cudagraph_skips", 0,
			      "break_reasons");
	char bad[512];
	FILE *f;
	cr_assert_null(json_object_get(r, "compile"));
	cli_path(bad, sizeof(bad), "bad.jsonl");
	f = fopen(bad, "w");
	cr_assert_not_null(f);
	put_line(f, r, "compile", json_deep_copy(c)); /* valid */
	put_line(f, r, "compile", json_null());	      /* valid */
	json_object_set_new(c, "mode", json_string("fast"));
	put_line(f, r, "compile", json_deep_copy(c));
	json_object_set_new(c, "mode", json_string("default"));
	json_object_set_new(c, "break_reasons", json_pack("[i]", 1));
	put_line(f, r, "compile", json_deep_copy(c));
	fclose(f);
	{
		const char *a[] = {"validate", "--strict", bad, NULL};
		run_ok(a, 2);
	}
	stderr_lines(want, 2);
	stdout_has("bad.jsonl: 2 of 4 records invalid, 2 problems\n");
	json_decref(c);
	json_decref(r);
}

/* work: optional even for --strict (the committed
 * records lack it, impl=pytorch's are null); each unit's total an int
 * >= 0, its means numbers; totals = per_step x steps, the block forward
 * units summing to evals' forward total, edge_steps a tenth of steps. */
Test(validate, work_object, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	static const char *const want[] = {
	    "bad.jsonl:4: field work.block_vjp.total: expected a number >= 0",
	    "bad.jsonl:5: field work.head_fwd.total: expected int, got real",
	    "bad.jsonl:6: field work.block_fwd.per_step: expected number or "
	    "null, got string",
	    "bad.jsonl:7: field work.block_fwd_taped.total: expected "
	    "per_step x "
	    "steps",
	    "bad.jsonl:7: field work: block forward totals sum to ",
	    "bad.jsonl:8: field work.edge_steps: expected steps / 10, at "
	    "least 1",
	    NULL};
	json_t *r = one_record();
	const json_t *fw =
	    json_object_get(json_object_get(r, "work"), "block_fwd_taped");
	json_int_t t = json_integer_value(json_object_get(fw, "total"));
	char bad[512];
	FILE *f;
	cr_assert_gt(t, 0, "the tiny unroll run's taped forwards");
	cli_path(bad, sizeof(bad), "bad.jsonl");
	f = fopen(bad, "w");
	cr_assert_not_null(f);
	put_line(f, r, NULL, NULL);	     /* valid */
	put_line(f, r, "work", NULL);	     /* valid: older */
	put_line(f, r, "work", json_null()); /* valid */
	put_line(f, r, "work.block_vjp.total", json_integer(-1));
	put_line(f, r, "work.head_fwd.total", json_real(1.5));
	put_line(f, r, "work.block_fwd.per_step", json_string("x"));
	put_line(f, r, "work.block_fwd_taped.total", json_integer(t + 1));
	put_line(f, r, "work.edge_steps", json_integer(3));
	fclose(f);
	{
		const char *a[] = {"validate", "--strict", bad, NULL};
		run_ok(a, 2);
	}
	stderr_lines(want, 9);
	stdout_has("bad.jsonl: 5 of 8 records invalid, 9 problems\n");
	json_decref(r);
}
