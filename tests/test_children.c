/* test_children.c — deqbench's child processes and what comes back from
 * them: a suite's run and
 * an impl=pytorch run's python die with their parent (kill -9 included),
 * the temporary directory such a kill leaves is removed by the next
 * impl=pytorch run, SIGINT/SIGTERM and a failed save_params= keep the
 * pytorch run's statistics, a params= file deqbench refuses is refused for
 * impl=pytorch with the same message, a child's record that is not a valid
 * record (or not JSON) becomes an error record naming the problem, the
 * records deqbench writes itself for a pytorch run say impl pytorch, and
 * DQ_PYTHON / deqtorch's advice say what is wrong. Most tests use the
 * stand-ins of test_peer_fake.h; those that need the real deqtorch.py and
 * torch skip with a message where /usr/bin/python3 cannot import torch.
 * Waits are bounded polls (a child that stays fails the test at the bound),
 * never timing thresholds. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "data.h"
#include "test_cli.h"
#include "test_peer_fake.h"
#include "test_proc.h"

/* deqtorch.py stand-in. check: accepts. run and eval: save the request,
 * say "fake: CMD started" on stderr, then by $FAKE_MODE: print (default)
 * cats cli_dir/$FAKE_OUT (child.json by default); sleep writes its pid to
 * child.pid and becomes `sleep 600`; die exits 1; killparent SIGKILLs the
 * deqbench process that started it, then sleeps. */
static const char FAKE_SCRIPT[] =
    "dir=$(dirname \"$0\")\n"
    "case $1 in\n"
    "check) cat > /dev/null; exit 0;;\n"
    "run|eval) cat > \"$dir/request.json\"\n"
    "  echo \"fake: $1 started\" >&2\n"
    "  case ${FAKE_MODE:-print} in\n"
    "  sleep) echo $$ > \"$dir/child.pid.tmp\"\n"
    "    mv \"$dir/child.pid.tmp\" \"$dir/child.pid\"; exec sleep 600;;\n"
    "  die) echo 'fake: dying' >&2; exit 1;;\n"
    "  killparent) kill -9 $PPID; exec sleep 600;;\n"
    "  *) cat \"$dir/${FAKE_OUT:-child.json}\"; exit 0;;\n"
    "  esac;;\n"
    "esac\n"
    "exit 3\n";

/* The tiny config as arguments (corpus=synthetic; n_heads is
 * the default 2, so a test can set it). */
#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "d_ff=32", "seq_len=8",              \
	    "batch_size=2", "layers=3", "threads=1", "warmup_steps=1",         \
	    "lr_warmup=1", "eval_warmup=0"

static void fake_setup(void)
{
	char sc[512];
	cli_setup();
	fake_python();
	fake_child_records();
	cli_path(sc, sizeof(sc), "fake_deqtorch.sh");
	cli_write_text(sc, FAKE_SCRIPT);
	setenv("DQ_PYTORCH_SCRIPT", sc, 1);
	unsetenv("FAKE_MODE");
	unsetenv("FAKE_OUT");
}

/* The real deqtorch.py under /usr/bin/python3; skips the test where torch
 * cannot be imported there. */
static void torch_setup(void)
{
	static int have = -1;
	char sc[1024];
	const char *root = getenv("DQ_SOURCE_ROOT");
	cli_setup();
	if (have < 0)
		have = system("/usr/bin/python3 -c 'import torch' "
			      ">/dev/null 2>&1") == 0;
	if (!have)
		cr_skip_test("/usr/bin/python3 cannot import torch "
			     "(apt-get install python3-torch)");
	cr_assert_not_null(root, "DQ_SOURCE_ROOT must give the source tree");
	snprintf(sc, sizeof(sc), "%s/bench/pytorch/deqtorch.py", root);
	setenv("DQ_PYTORCH_SCRIPT", sc, 1);
	setenv("DQ_PYTHON", "/usr/bin/python3", 1);
}

/* ---- helpers ---- */

/* Number of entries of cli_dir whose name starts with prefix. */
static int count_prefix(const char *prefix)
{
	DIR *d = opendir(cli_dir);
	struct dirent *de;
	int n = 0;
	cr_assert_not_null(d);
	while ((de = readdir(d)))
		n += !strncmp(de->d_name, prefix, strlen(prefix));
	closedir(d);
	return n;
}

/* The records of cli_dir/out.jsonl (an empty array when it is absent). */
static json_t *records(void)
{
	char p[512], *text, *line, *save = NULL;
	json_t *a = json_array();
	cli_path(p, sizeof(p), "out.jsonl");
	if (!(text = cli_read(p, NULL)))
		return a;
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *r = json_loads(line, 0, NULL);
		cr_assert_not_null(r, "malformed record line: %s", line);
		json_array_append_new(a, r);
	}
	free(text);
	return a;
}

/* The only record of cli_dir/out.jsonl. New reference. */
static json_t *only_record(void)
{
	json_t *a = records(), *r;
	cr_assert_eq(json_array_size(a), 1, "%zu records", json_array_size(a));
	r = json_incref(json_array_get(a, 0));
	json_decref(a);
	return r;
}

static const char *str_of(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* `deqbench validate --strict cli_dir/out.jsonl` exits 0. */
static void assert_strict_valid(void)
{
	char out[600], err[4096];
	cli_path(out, sizeof(out), "out.jsonl");
	const char *a[] = {"validate", "--strict", out, NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
}

/* "out=cli_dir/out.jsonl" into buf. */
static const char *out_arg(char *buf, size_t n)
{
	char p[512];
	cli_path(p, sizeof(p), "out.jsonl");
	snprintf(buf, n, "out=%s", p);
	return buf;
}

/* Writes a one-run suite file cli_dir/s.json of the tiny config with the
 * extra base members `extra` (JSON members, leading comma), out= as
 * out_arg. */
static void write_suite(const char *extra)
{
	char p[512], out[512], text[2048];
	cli_path(p, sizeof(p), "s.json");
	cli_path(out, sizeof(out), "out.jsonl");
	snprintf(text, sizeof(text),
		 "{\"name\": \"kids\", \"base\": {\"corpus\": \"synthetic\", "
		 "\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"seq_len\": "
		 "8, \"batch_size\": 2, \"layers\": 3, \"threads\": 1, "
		 "\"warmup_steps\": 1, \"eval_tokens\": 0, \"out\": "
		 "\"%s\"%s}}",
		 out, extra);
	cli_write_text(p, text);
}

/* ---- children die with their parent ---- */

/* kill -9 of a suite: its run's process (training, deqbench's own) ends
 * too, and appends nothing later. */
Test(children, suite_kill9_kills_its_run, .init = fake_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char suite[512];
	pid_t pid, kid = 0;
	int st, ok;
	json_t *recs;
	write_suite(", \"steps\": 1000000");
	cli_path(suite, sizeof(suite), "s.json");
	const char *a[] = {"suite", suite, NULL};
	pid = spawn(a);
	for (int i = 0; i < 12000 && !kid; i++) {
		kid = child_of(pid);
		if (!kid)
			nap();
	}
	cr_assert(kid > 0, "the suite started no run");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ok = wait_gone(kid);
	if (!ok)
		kill(kid, SIGKILL);
	cr_assert(ok,
		  "the suite's run %ld still runs after kill -9 of the "
		  "suite",
		  (long)kid);
	recs = records();
	cr_assert_eq(json_array_size(recs), 0, "a killed run appended");
	json_decref(recs);
}

/* kill -9 of a suite whose run is impl=pytorch: the python child ends too
 * (its parent, the run's process, dies with the suite). */
Test(children, suite_kill9_kills_python, .init = fake_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char suite[512];
	pid_t pid, py;
	int st, ok;
	write_suite(", \"steps\": 3, \"impl\": \"pytorch\"");
	cli_path(suite, sizeof(suite), "s.json");
	setenv("FAKE_MODE", "sleep", 1);
	const char *a[] = {"suite", suite, NULL};
	pid = spawn(a);
	wait_or_fail(pid, "child.pid", NULL, "python never started");
	py = child_pid();
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ok = wait_gone(py);
	if (!ok)
		kill(py, SIGKILL);
	cr_assert(ok, "python %ld still runs after kill -9 of the suite",
		  (long)py);
}

/* kill -9 of `run impl=pytorch`: python ends too; the token directory the
 * run could not remove is removed by the next impl=pytorch run, while
 * one of a live process and one of another host stay. */
Test(children, run_kill9_kills_python_next_run_cleans, .init = fake_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char o[700], err[4096], host[256], name[400], keep1[800], keep2[800];
	pid_t pid, py;
	int st, ok;
	const char *a[] = {
	    "run", TINY, "steps=3", "impl=pytorch", out_arg(o, sizeof(o)),
	    NULL};
	setenv("FAKE_MODE", "sleep", 1);
	pid = spawn(a);
	wait_or_fail(pid, "child.pid", NULL, "python never started");
	py = child_pid();
	cr_assert_eq(count_prefix("deqbench-peer"), 1,
		     "no token directory while python runs");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	ok = wait_gone(py);
	if (!ok)
		kill(py, SIGKILL);
	cr_assert(ok, "python %ld still runs after kill -9 of deqbench",
		  (long)py);
	cr_assert_eq(count_prefix("deqbench-peer"), 1);

	/* a live process's directory (ours) and another host's stay */
	cr_assert_eq(gethostname(host, sizeof(host)), 0);
	for (char *p = host; *p; p++)
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWX"
			    "YZ0123456789-.",
			    *p))
			*p = '_';
	snprintf(name, sizeof(name), "deqbench-peer.%.300s.%ld.abcdef", host,
		 (long)getpid());
	cli_path(keep1, sizeof(keep1), name);
	cli_path(keep2, sizeof(keep2), "deqbench-peer.otherhost-x.1.abcdef");
	cr_assert_eq(mkdir(keep1, 0700), 0);
	cr_assert_eq(mkdir(keep2, 0700), 0);

	unsetenv("FAKE_MODE");
	const char *b[] = {
	    "run", TINY, "steps=3", "impl=pytorch", out_arg(o, sizeof(o)),
	    NULL};
	cr_assert_eq(cli_run(b, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(count_prefix("deqbench-peer"), 2,
		     "the killed run's token directory is still there");
	cr_assert(cli_exists(keep1) && cli_exists(keep2),
		  "a live process's or another host's directory was removed");
}

/* ---- the statistics are kept ---- */

/* SIGINT or SIGTERM during an impl=pytorch run: deqtorch stops after the
 * current step and prints its record, status interrupted with the steps
 * so far, no traceback; deqbench exits 130 / 143. */
Test(children, signal_keeps_pytorch_statistics, .init = torch_setup,
     .fini = cli_teardown, .timeout = 300)
{
	static const int sigs[] = {SIGINT, SIGTERM};
	for (int k = 0; k < 2; k++) {
		char o[700], *e, p[512], want[64];
		json_t *r;
		pid_t pid;
		int st;
		const char *a[] = {"run",
				   TINY,
				   "steps=1000000",
				   "impl=pytorch",
				   out_arg(o, sizeof(o)),
				   NULL};
		cli_path(p, sizeof(p), "out.jsonl");
		unlink(p);
		cli_path(p, sizeof(p), "bg_err.txt");
		unlink(p);
		pid = spawn(a);
		wait_or_fail(pid, "bg_err.txt", "training",
			     "deqtorch never started training");
		cr_assert_eq(kill(pid, sigs[k]), 0);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cli_path(p, sizeof(p), "bg_err.txt");
		e = cli_read(p, NULL);
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 128 + sigs[k],
			  "status %d: %s", st, e);
		cr_assert(!strstr(e, "Traceback"), "%s", e);
		free(e);
		r = only_record();
		cr_assert_str_eq(str_of(r, "status"), "interrupted");
		snprintf(want, sizeof(want), "interrupted by %s after step",
			 sigs[k] == SIGINT ? "SIGINT" : "SIGTERM");
		cr_assert(strstr(str_of(r, "message"), want), "%s",
			  str_of(r, "message"));
		cr_assert(json_is_object(json_object_get(r, "timing")));
		cr_assert(json_is_object(json_object_get(r, "memory")));
		cr_assert(
		    json_is_number(json_object_get(
			json_object_get(r, "quality"), "train_loss_first")),
		    "statistics lost");
		cr_assert(!strncmp(str_of(r, "impl"), "pytorch-", 8));
		json_decref(r);
		assert_strict_valid();
	}
}

/* save_params= that cannot be written (it became a directory after the
 * up-front checks): status error naming it, timing, memory and quality
 * kept, as deqbench does. DQ_PYTHON is a wrapper that makes the directory
 * just before starting deqtorch.py run. */
Test(children, save_params_failure_keeps_statistics, .init = torch_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char o[700], err[4096], w[512], sp[512], text[1200], spa[600];
	json_t *r;
	cli_path(sp, sizeof(sp), "saved");
	cli_path(w, sizeof(w), "wrap.sh");
	snprintf(text, sizeof(text),
		 "#!/bin/sh\nif [ \"$2\" = run ]; then mkdir '%s'; fi\n"
		 "exec /usr/bin/python3 \"$@\"\n",
		 sp);
	cli_write_text(w, text);
	cr_assert_eq(chmod(w, 0755), 0);
	setenv("DQ_PYTHON", w, 1);
	snprintf(spa, sizeof(spa), "save_params=%s", sp);
	const char *a[] = {"run",
			   TINY,
			   "steps=3",
			   "eval_tokens=32",
			   "impl=pytorch",
			   spa,
			   out_arg(o, sizeof(o)),
			   NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 1, "%s", err);
	r = only_record();
	cr_assert_str_eq(str_of(r, "status"), "error");
	cr_assert(strstr(str_of(r, "message"), "save_params="), "%s",
		  str_of(r, "message"));
	cr_assert(json_is_object(json_object_get(r, "timing")));
	cr_assert(json_is_object(json_object_get(r, "memory")));
	cr_assert(json_is_number(json_object_get(json_object_get(r, "quality"),
						 "valid_loss")),
		  "quality lost");
	json_decref(r);
	assert_strict_valid();
	cr_assert_eq(count_prefix("saved.tmp"), 0, "temporary file left");
}

/* A pytorch run that failed before printing a record, and a suite's
 * pytorch run whose process died: the records deqbench writes say impl
 * pytorch-<version> (the torch probe's), or "pytorch" without one. */
Test(children, failed_pytorch_records_say_pytorch, .init = fake_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char o[700], err[4096], suite[512], p[512];
	json_t *r, *recs;
	const char *a[] = {
	    "run", TINY, "steps=3", "impl=pytorch", out_arg(o, sizeof(o)),
	    NULL};
	setenv("FAKE_MODE", "die", 1);
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 1, "%s", err);
	r = only_record();
	cr_assert_str_eq(str_of(r, "impl"), "pytorch");
	cr_assert(strstr(str_of(r, "message"), "fake: dying"), "%s",
		  str_of(r, "message"));
	json_decref(r);
	assert_strict_valid();

	setenv("FAKE_VERSION", "9.8.7", 1);
	cli_path(p, sizeof(p), "out.jsonl");
	unlink(p);
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 1, "%s", err);
	r = only_record();
	cr_assert_str_eq(str_of(r, "impl"), "pytorch-9.8.7");
	json_decref(r);

	/* the suite's crash record of a run whose process was killed */
	unlink(p);
	setenv("FAKE_MODE", "killparent", 1);
	write_suite(", \"steps\": 3, \"impl\": \"pytorch\"");
	cli_path(suite, sizeof(suite), "s.json");
	const char *s[] = {"suite", suite, NULL};
	cr_assert_eq(cli_run(s, 0, err, sizeof(err)), 1, "%s", err);
	recs = records();
	cr_assert_eq(json_array_size(recs), 1);
	r = json_array_get(recs, 0);
	cr_assert(strstr(str_of(r, "message"), "signal 9"), "%s",
		  str_of(r, "message"));
	cr_assert_str_eq(str_of(r, "impl"), "pytorch-9.8.7");
	json_decref(recs);
}

/* ---- params= files checked as deqbench checks them ---- */

/* Overwrites the first parameter value of the safetensors file at path
 * with a NaN. */
static void poison_params(const char *path)
{
	size_t n;
	unsigned char *b = (unsigned char *)cli_read(path, &n);
	uint64_t hl = 0;
	const float nan_f = NAN;
	cr_assert(b && n > 8);
	for (int i = 7; i >= 0; i--)
		hl = hl << 8 | b[i];
	cr_assert(8 + hl + 4 <= n);
	memcpy(b + 8 + hl, &nan_f, 4);
	cli_write(path, b, n);
	free(b);
}

/* n_heads that differs from the file's, a NaN: impl=pytorch (run and
 * eval) refuses the file with deqbench eval's message, exit 2, nothing
 * written, before deqtorch.py starts. */
Test(children, params_file_checked_as_deqbench, .init = fake_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char o[700], err[4096], want[4096], par[512], pa[600], ia[600];
	cli_path(par, sizeof(par), "p.safetensors");
	snprintf(ia, sizeof(ia), "out=%s", par);
	snprintf(pa, sizeof(pa), "params=%s", par);
	const char *init[] = {"params", "init", TINY, ia, NULL};
	cr_assert_eq(cli_run(init, 0, err, sizeof(err)), 0, "%s", err);
	for (int bad = 0; bad < 2; bad++) {
		const char *heads = bad == 0 ? "n_heads=4" : "n_heads=2";
		if (bad == 1)
			poison_params(par);
		const char *own[] = {
		    "eval", TINY, heads, pa, out_arg(o, sizeof(o)), NULL};
		cr_assert_eq(cli_run(own, 0, want, sizeof(want)), 2, "%s",
			     want);
		cr_assert(strstr(want, bad ? "must be finite" : "n_heads=2"),
			  "%s", want);
		for (int ev = 0; ev < 2; ev++) {
			const char *a[] = {ev ? "eval" : "run",
					   TINY,
					   heads,
					   pa,
					   "steps=3",
					   "impl=pytorch",
					   out_arg(o, sizeof(o)),
					   NULL};
			cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s",
				     err);
			cr_assert_str_eq(err, want);
			cr_assert(!cli_exists(o + 4), "out= written");
			cr_assert_eq(count_prefix("request.json"), 0,
				     "deqtorch.py was started");
		}
	}
}

/* ---- what the child prints is checked ---- */

/* Child outputs that are not usable records: each run ends in an error
 * record (exit 1), valid as a record, whose message names the problem
 * (for a NaN, jansson's "invalid token") and ends with the child's
 * stderr. */
Test(children, invalid_child_record_is_error, .init = fake_setup,
     .fini = cli_teardown, .timeout = 300)
{
	static const struct {
		const char *key, *json, *says;
	} bad[] = {
	    {"status", "\"weird\"", "status"},	 {"impl", "5", "impl"},
	    {"impl", "\"deqbench\"", "impl"},	 {"timing", "null", "timing"},
	    {"quality", "NaN", "invalid token"},
	};
	char o[700], err[4096], p[512];
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *c = fake_first_record("child.json"), *r;
		char *s, *line, text[200];
		json_object_set_new(c, bad[i].key, json_string("@@"));
		s = json_dumps(c, JSON_COMPACT);
		json_decref(c);
		snprintf(text, sizeof(text), "\"%s\":\"@@\"", bad[i].key);
		line = strstr(s, text);
		cr_assert_not_null(line);
		cli_path(p, sizeof(p), "bad.json");
		{ /* the member's value replaced by the raw JSON text */
			FILE *f = fopen(p, "w");
			cr_assert_not_null(f);
			fprintf(f, "%.*s\"%s\":%s%s\n", (int)(line - s), s,
				bad[i].key, bad[i].json, line + strlen(text));
			fclose(f);
		}
		free(s);
		setenv("FAKE_OUT", "bad.json", 1);
		cli_path(p, sizeof(p), "out.jsonl");
		unlink(p);
		const char *a[] = {"run",
				   TINY,
				   "steps=3",
				   "impl=pytorch",
				   out_arg(o, sizeof(o)),
				   NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 1, "%s: %s",
			     bad[i].key, err);
		r = only_record();
		cr_assert_str_eq(str_of(r, "status"), "error", "%s",
				 bad[i].key);
		cr_assert(strstr(str_of(r, "message"), bad[i].says) &&
			      strstr(str_of(r, "message"), "unusable record") &&
			      strstr(str_of(r, "message"), "fake: run started"),
			  "%s: %s", bad[i].key, str_of(r, "message"));
		cr_assert(!strncmp(str_of(r, "impl"), "pytorch", 7));
		json_decref(r);
		assert_strict_valid();
	}
}

/* deqtorch prints non-finite numbers as null (JSON has no NaN): its
 * print_record, under /usr/bin/python3 (no torch needed). */
Test(children, deqtorch_prints_no_nan, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char cmd[2048], p[512], *t;
	json_t *r;
	const char *root = getenv("DQ_SOURCE_ROOT");
	if (access("/usr/bin/python3", X_OK) != 0)
		cr_skip_test("no /usr/bin/python3");
	cr_assert_not_null(root);
	cli_path(p, sizeof(p), "nan.txt");
	snprintf(cmd, sizeof(cmd),
		 "cd '%s/bench/pytorch' && /usr/bin/python3 -c \"from "
		 "deqtorch import cli; cli.print_record({'a': float('nan'), "
		 "'b': [1.5, float('inf')], 'c': {'d': -float('inf')}})\" > "
		 "'%s'",
		 root, p);
	cr_assert_eq(system(cmd), 0);
	t = cli_read(p, NULL);
	r = json_loads(t, 0, NULL);
	cr_assert_not_null(r, "not JSON: %s", t);
	cr_assert(json_is_null(json_object_get(r, "a")));
	cr_assert(json_is_null(json_array_get(json_object_get(r, "b"), 1)));
	cr_assert(json_is_null(json_object_get(json_object_get(r, "c"), "d")));
	json_decref(r);
	free(t);
}

/* ---- messages ---- */

/* DQ_PYTHON naming nothing, or a file that is not executable: the message
 * says so and how to fix it, not to install python3-torch. */
Test(children, dq_python_nowhere, .init = fake_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char o[700], err[4096], p[512];
	const char *a[] = {
	    "run", TINY, "steps=3", "impl=pytorch", out_arg(o, sizeof(o)),
	    NULL};
	setenv("DQ_PYTHON", "/nonexistent/python3", 1);
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "DQ_PYTHON=/nonexistent/python3 does not exist"),
		  "%s", err);
	cr_assert(strstr(err, "unset it"), "%s", err);
	cr_assert(!strstr(err, "apt-get"), "%s", err);
	cli_path(p, sizeof(p), "plain.txt");
	cli_write_text(p, "not a program\n");
	setenv("DQ_PYTHON", p, 1);
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "is not executable"), "%s", err);
	cr_assert(!cli_exists(o + 4));
}

/* deqtorch's advice for a malformed request names the request's shape as
 * bench/pytorch/README.md writes it. */
Test(children, request_advice_matches_readme, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char cmd[2048], p[512], *msg, *readme, *shape, *end;
	const char *root = getenv("DQ_SOURCE_ROOT");
	if (access("/usr/bin/python3", X_OK) != 0)
		cr_skip_test("no /usr/bin/python3");
	cr_assert_not_null(root);
	cli_path(p, sizeof(p), "msg.txt");
	snprintf(cmd, sizeof(cmd),
		 "echo '{}' | /usr/bin/python3 '%s/bench/pytorch/deqtorch.py' "
		 "run 2> '%s'",
		 root, p);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
	msg = cli_read(p, NULL);
	shape = strstr(msg, "pass {");
	cr_assert_not_null(shape, "%s", msg);
	shape += 5;
	end = strstr(shape, "} as ");
	cr_assert_not_null(end, "%s", msg);
	end[1] = 0;
	snprintf(p, sizeof(p), "%s/bench/pytorch/README.md", root);
	readme = cli_read(p, NULL);
	cr_assert_not_null(readme);
	cr_assert(strstr(readme, shape), "README has no %s", shape);
	free(readme);
	free(msg);
}

/* deqtorch given a parameter file of another model (deqbench refuses it
 * before, so deqtorch.py eval is run by hand): the advice is about the
 * file, not the request's JSON. */
Test(children, wrong_model_advice_is_about_the_file, .init = torch_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char dir[512], par[512], ia[600], req[600], cmd[2048], p[600], e[256];
	char *msg, *s;
	struct corpus c;
	struct bench_config cfg;
	json_t *q, *d;
	cli_path(par, sizeof(par), "tanh.safetensors");
	snprintf(ia, sizeof(ia), "out=%s", par);
	const char *init[] = {"params",		 "init", TINY,
			      "model=tanh_cell", ia,	 NULL};
	cr_assert_eq(cli_run(init, 0, e, sizeof(e)), 0, "%s", e);
	cli_path(dir, sizeof(dir), "ids");
	cr_assert_eq(mkdir(dir, 0700), 0);
	cr_assert_eq(corpus_synthetic(&c, DATA_SYNTH_VOCAB, DATA_SYNTH_TRAIN,
				      DATA_SYNTH_VALID, DATA_SYNTH_TEST, 1, e,
				      sizeof(e)),
		     0, "%s", e);
	cr_assert_eq(corpus_write_ids(&c, dir), 0);
	corpus_free(&c);
	config_defaults(&cfg);
	const char *keys[] = {TINY, "impl=pytorch"};
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		cr_assert_eq(config_set_arg(&cfg, keys[i], e, sizeof(e)), 0,
			     "%s", e);
	snprintf(cfg.params, sizeof(cfg.params), "%s", par);
	q = json_object();
	d = json_object();
	json_object_set_new(q, "config", config_to_json(&cfg));
	json_object_set_new(d, "corpus", json_string("synthetic"));
	json_object_set_new(d, "vocab_size", json_integer(DATA_SYNTH_VOCAB));
	static const char *const split[] = {"train", "valid", "test"};
	for (int k = 0; k < 3; k++) {
		snprintf(p, sizeof(p), "%s/%s.ids", dir, split[k]);
		json_object_set_new(d, split[k], json_string(p));
	}
	json_object_set_new(q, "data", d);
	s = json_dumps(q, JSON_COMPACT);
	json_decref(q);
	cli_path(req, sizeof(req), "req.json");
	cli_write_text(req, s);
	free(s);
	cli_path(p, sizeof(p), "msg.txt");
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 '%s' eval < '%s' 2> '%s'",
		 getenv("DQ_PYTORCH_SCRIPT"), req, p);
	cr_assert_eq(WEXITSTATUS(system(cmd)), 2);
	msg = cli_read(p, NULL);
	cr_assert(strstr(msg, "every parameter of the configured model"), "%s",
		  msg);
	cr_assert(!strstr(msg, "\"config\""), "%s", msg);
	free(msg);
}
