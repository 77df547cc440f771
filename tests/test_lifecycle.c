/* test_lifecycle.c — the lifecycle of evaluations, runs and plans, end to
 * end through the deqbench binary (DQ_DEQBENCH):
 *
 *   - an evaluation stopped by SIGINT / SIGTERM describes only the batches
 *     it evaluated (inference counts, timing, solver, memory);
 *   - eval's input refused up front: eval_tokens below one batch, an eval
 *     suite's bad parameter file; a training run evaluating no batch has a
 *     null inference; a crashed eval-suite run's record says kind "eval";
 *     parameters that overflow float32 say so (eval: error; run: diverged
 *     at step 1 without blaming lr);
 *   - plan: interrupted (pricing, --run) exits 130 / 143 with a line
 *     saying what stopped; every candidate past 512; budget_mib bounded;
 *     nothing fitting, pretrain_steps and an unavailable device are bad
 *     input;
 *   - a memory refusal dominated by the vocabulary names vocab_size first.
 *
 * Signals are sent where the process is known to be: its stderr is a pipe
 * the test filled beforehand, so deqbench blocks in its first write to it
 * (the first progress line, after the signal handlers are installed); the
 * test waits until /proc says it is blocked in write(2, ...), signals, and
 * only then drains the pipe. Nothing depends on timing.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "record.h"
#include "test_bench_util.h"
#include "test_cli.h"
#include "validate.h"

static double num(const json_t *r, const char *path)
{
	const json_t *v = at(r, path);
	cr_assert(json_is_number(v), "%s is not a number", path);
	return json_number_value(v);
}

/* The last record of cli_dir/name (new reference). */
static json_t *last_record(const char *name)
{
	char path[512], err[512];
	json_t *arr = json_array(), *r;
	cli_path(path, sizeof(path), name);
	cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_gt(json_array_size(arr), 0, "%s holds no record", name);
	r = json_incref(json_array_get(arr, json_array_size(arr) - 1));
	json_decref(arr);
	return r;
}

/* The tiny config (tiny.json). */
#define TINY27                                                                 \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=2", "layers=3", "steps=3", "warmup_steps=1",           \
	    "lr_warmup=1", "threads=1", "eval_warmup=0"

/* "key=cli_dir/name" into buf. */
static const char *arg_path(char *buf, size_t n, const char *key,
			    const char *name)
{
	snprintf(buf, n, "%s=%s/%s", key, cli_dir, name);
	return buf;
}

/* params init of TINY27 into cli_dir/p.st. */
static void params_init(void)
{
	char out[600], err[1024];
	const char *a[] = {"params", "init", TINY27,
			   arg_path(out, sizeof(out), "out", "p.st"), NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
}

/* cli_run expecting exit 2 with one line on stderr holding want. */
static void expect_bad_line(const char *const *args, const char *want)
{
	char err[4096], *nl;
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 2, "%s", err);
	nl = strchr(err, '\n');
	cr_assert(nl && nl[1] == 0, "one line expected: %s", err);
	cr_assert(strstr(err, want), "'%s' expected: %s", want, err);
}

/* ---- a process blocked writing its stderr ---- */

/* Whether process pid is blocked in write(2, ...) (/proc/PID/syscall). */
static int blocked_on_stderr(pid_t pid)
{
	char path[64], buf[256];
	long nr;
	unsigned long fd;
	FILE *f;
	int ok;
	snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	ok = fgets(buf, sizeof(buf), f) &&
	     sscanf(buf, "%ld 0x%lx", &nr, &fd) == 2 && nr == SYS_write &&
	     fd == 2;
	fclose(f);
	return ok;
}

/* A pipe whose write end is full (filled with newlines); fds[0] read,
 * fds[1] write (blocking). */
static void full_pipe(int fds[2], int packets)
{
	char path[64], buf[4096];
	int w;
	/* packets (O_DIRECT): every write takes a slot of its own, so
	 * reading one packet frees room for exactly one write */
	cr_assert_eq(pipe2(fds, packets ? O_DIRECT : 0), 0);
	/* a second, non-blocking open of the write end */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fds[1]);
	w = open(path, O_WRONLY | O_NONBLOCK);
	cr_assert(w >= 0, "%s: %s", path, strerror(errno));
	memset(buf, '\n', sizeof(buf));
	while (write(w, buf, sizeof(buf)) > 0)
		;
	while (write(w, buf, 1) > 0)
		;
	cr_assert_eq(errno, EAGAIN);
	close(w);
}

/* Starts deqbench args (stdout to cli_dir/stdout.txt) with its stderr the
 * write end of a full pipe (of packets when packets), whose read end goes
 * to *rd. */
static pid_t spawn_full_stderr_as(const char *const *args, int *rd, int packets)
{
	char *argv[64], out_p[512];
	const char *bin = cli_argv(args, argv);
	int fds[2];
	pid_t pid;
	cli_path(out_p, sizeof(out_p), "stdout.txt");
	full_pipe(fds, packets);
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int o = open(out_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int in = open("/dev/null", O_RDONLY);
		if (o < 0 || in < 0 || dup2(o, 1) < 0 || dup2(in, 0) < 0 ||
		    dup2(fds[1], 2) < 0)
			_exit(126);
		close(fds[0]);
		execv(bin, argv);
		_exit(127);
	}
	close(fds[1]);
	*rd = fds[0];
	return pid;
}

static pid_t spawn_full_stderr(const char *const *args, int *rd)
{
	return spawn_full_stderr_as(args, rd, 0);
}

/* Waits (up to 60 s) until process pid is blocked writing its stderr. */
static void wait_blocked(pid_t pid)
{
	for (int t = 0; t < 6000; t++) {
		if (blocked_on_stderr(pid))
			return;
		usleep(10000);
	}
	cr_assert_fail("process %d never blocked writing its stderr", (int)pid);
}

/* Reads fd to its end (closing it); the text after the filler, malloc'd. */
static char *drain(int fd)
{
	size_t len = 0, cap = 1 << 16, skip = 0;
	char *buf = malloc(cap + 1);
	ssize_t got;
	cr_assert_not_null(buf);
	for (;;) {
		if (cap - len < 4096) {
			cap *= 2;
			buf = realloc(buf, cap + 1);
			cr_assert_not_null(buf);
		}
		got = read(fd, buf + len, cap - len);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	close(fd);
	buf[len] = 0;
	while (skip < len && buf[skip] == '\n')
		skip++;
	memmove(buf, buf + skip, len - skip + 1);
	return buf;
}

/* Runs args with a full stderr, sends sig once it is blocked in its first
 * write there, and returns its exit status; its stderr text in *text
 * (malloc'd). */
static int signal_when_blocked(const char *const *args, int sig, char **text)
{
	int rd;
	pid_t pid = spawn_full_stderr(args, &rd);
	wait_blocked(pid);
	cr_assert_eq(kill(pid, sig), 0);
	*text = drain(rd);
	return cli_wait_exit(pid);
}

/* ----------------------------------------------- interrupted evaluation */

/* SIGINT / SIGTERM during `deqbench eval` (blocked on its first progress
 * line, after the first valid batch): the record counts that one batch
 * only: inference.batches 1, its time, one forward solve of at least one
 * iteration, the allocator's peaks of that batch; strict-valid. */
Test(lifecycle, interrupted_eval_counts_batches_evaluated, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	const int sigs[2] = {SIGINT, SIGTERM};
	char params[600], out[600];
	params_init();
	for (int k = 0; k < 2; k++) {
		const char *a[] = {
		    "eval",
		    TINY27,
		    "method=deq",
		    "eval_tokens=1000000",
		    arg_path(params, sizeof(params), "params", "p.st"),
		    arg_path(out, sizeof(out), "out", "e.jsonl"),
		    NULL};
		char *text;
		json_t *r;
		cr_assert_eq(signal_when_blocked(a, sigs[k], &text),
			     128 + sigs[k], "%s", text);
		cr_assert(strstr(text, "during evaluation"), "%s", text);
		free(text);
		r = last_record("e.jsonl");
		check_schema(r);
		cr_assert_str_eq(json_string_value(at(r, "status")),
				 "interrupted");
		cr_assert_eq(num(r, "inference.batches"), 1);
		cr_assert_eq(num(r, "inference.batches_timed"), 1);
		cr_assert_gt(num(r, "inference.step_ms.median"), 0);
		cr_assert_eq(num(r, "inference.forward_solve.steps"), 1);
		cr_assert_geq(num(r, "inference.forward_solve.iters_mean"), 1);
		cr_assert_gt(num(r, "inference.memory.peak_total_bytes"), 0);
		cr_assert_gt(num(r, "inference.memory.peak_bytes.params"), 0);
		cr_assert_eq(num(r, "quality.valid_eval_tokens"), 16);
		json_decref(r);
	}
}

/* ------------------------------------------------------ eval's input */

/* eval_tokens below one batch (batch_size * seq_len = 16): `eval` is bad
 * input, nothing written (it reported ok with no batch evaluated). */
Test(lifecycle, eval_refuses_eval_tokens_below_one_batch, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char params[600], out[600], p[512];
	const char *a[] = {"eval",
			   TINY27,
			   "eval_tokens=15",
			   arg_path(params, sizeof(params), "params", "p.st"),
			   arg_path(out, sizeof(out), "out", "e.jsonl"),
			   NULL};
	params_init();
	expect_bad_line(a, "eval_tokens=15 is less than one batch");
	cli_path(p, sizeof(p), "e.jsonl");
	cr_assert(!cli_exists(p), "a refused eval wrote %s", p);
}

/* A training run with eval_tokens below one batch is still a result, and
 * its record follows the schema: no valid batch was evaluated, so
 * inference is null (it was an object with batches 0), and so are the
 * perplexities. */
Test(lifecycle, run_below_one_eval_batch_has_null_inference, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[600], err[4096];
	const char *a[] = {"run", TINY27, "eval_tokens=15",
			   arg_path(out, sizeof(out), "out", "r.jsonl"), NULL};
	json_t *r;
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	r = last_record("r.jsonl");
	check_schema(r);
	cr_assert_str_eq(json_string_value(at(r, "status")), "ok");
	cr_assert(json_is_null(at(r, "inference")), "inference not null");
	cr_assert(json_is_null(at(r, "quality.valid_ppl")));
	cr_assert_eq(num(r, "quality.valid_eval_tokens"), 0);
	json_decref(r);
}

/* The suite file of an eval suite over TINY27 with params (cli_dir/s.json). */
static void write_eval_suite(const char *params, const char *extra)
{
	char sp[512], text[2048];
	cli_path(sp, sizeof(sp), "s.json");
	snprintf(text, sizeof(text),
		 "{\"name\": \"ev\", \"command\": \"eval\", \"base\": "
		 "{\"corpus\": \"synthetic\", \"d_model\": 16, \"n_heads\": 2, "
		 "\"d_ff\": 32, \"seq_len\": 8, \"batch_size\": 2, \"layers\": "
		 "3, \"threads\": 1, \"params\": \"%s/%s\"%s}, \"axes\": "
		 "{\"method\": [\"unroll\", \"deq\"]}}",
		 cli_dir, params, extra);
	cli_write_text(sp, text);
}

/* An eval suite whose parameter file cannot be loaded is bad input, as
 * `eval` alone is: exit 2 from the up-front checks (it was 1, with error
 * records), nothing written. */
Test(lifecycle, eval_suite_bad_params_is_bad_input, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char sp[512], out[600], p[512];
	const char *a[] = {"suite", sp,
			   arg_path(out, sizeof(out), "out", "s.jsonl"), NULL};
	cli_path(sp, sizeof(sp), "s.json");
	cli_path(p, sizeof(p), "bad.st");
	cli_write_text(p, "garbage, not safetensors");
	write_eval_suite("bad.st", ", \"eval_tokens\": 64");
	expect_bad_line(a, "bad.st");
	cli_path(p, sizeof(p), "s.jsonl");
	cr_assert(!cli_exists(p), "a refused suite wrote %s", p);
}

/* An eval suite with eval_tokens below one batch: bad input up front, as
 * for `eval`. */
Test(lifecycle, eval_suite_refuses_eval_tokens_below_one_batch,
     .init = cli_setup, .fini = cli_teardown, .timeout = 120)
{
	char sp[512], out[600], p[512];
	const char *a[] = {"suite", sp,
			   arg_path(out, sizeof(out), "out", "s.jsonl"), NULL};
	cli_path(sp, sizeof(sp), "s.json");
	params_init();
	write_eval_suite("p.st", ", \"eval_tokens\": 8");
	expect_bad_line(a, "eval_tokens=8 is less than one batch");
	cli_path(p, sizeof(p), "s.jsonl");
	cr_assert(!cli_exists(p), "a refused suite wrote %s", p);
}

/* The child pid of process ppid that is blocked writing its stderr, once
 * there is one (up to 60 s). */
static pid_t blocked_child(pid_t ppid)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)ppid,
		 (int)ppid);
	for (int t = 0; t < 6000; t++) {
		char kids[4096] = "", *s, *end;
		FILE *f =
		    fopen(path, "r"); /* not cli_read: /proc sizes are 0 */
		if (f) {
			if (!fgets(kids, sizeof(kids), f))
				kids[0] = 0;
			fclose(f);
		}
		for (s = kids; *s; s = end) {
			long c = strtol(s, &end, 10);
			if (end == s)
				break;
			if (blocked_on_stderr((pid_t)c))
				return (pid_t)c;
		}
		usleep(10000);
	}
	cr_assert_fail("no child of %d blocked writing its stderr", (int)ppid);
	return -1;
}

/* A run of an eval suite whose child dies (SIGKILL, while blocked on its
 * first progress line) gets the crash record, with kind "eval". */
Test(lifecycle, eval_suite_crash_record_is_eval, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char sp[512], out[600];
	const char *a[] = {"suite", sp,
			   arg_path(out, sizeof(out), "out", "s.jsonl"), NULL};
	int rd;
	pid_t pid, child;
	cli_path(sp, sizeof(sp), "s.json");
	params_init();
	write_eval_suite("p.st", ", \"eval_tokens\": 64");
	pid = spawn_full_stderr_as(a, &rd, 1);
	/* the suite first says which run it starts (one line):
	 * one packet read makes room for that line alone, so the run's
	 * child is the one that blocks */
	wait_blocked(pid);
	{
		char sink[4096];
		cr_assert_gt(read(rd, sink, sizeof(sink)), 0);
	}
	child = blocked_child(pid);
	cr_assert_eq(kill(child, SIGKILL), 0);
	free(drain(rd));
	cr_assert_eq(cli_wait_exit(pid), 1);
	{
		char path[512], err[512];
		json_t *arr = json_array(), *r;
		cli_path(path, sizeof(path), "s.jsonl");
		cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0);
		cr_assert_eq(json_array_size(arr), 2);
		r = json_array_get(arr, 0);
		cr_assert(
		    strstr(json_string_value(at(r, "message")), "signal 9"),
		    "%s", json_string_value(at(r, "message")));
		cr_assert_str_eq(json_string_value(at(r, "kind")), "eval");
		cr_assert_str_eq(
		    json_string_value(at(json_array_get(arr, 1), "kind")),
		    "eval");
		json_decref(arr);
	}
}

/* cli_dir/huge.st: p.st with every parameter 3e38 (finite float32). */
static void write_huge_params(void)
{
	char p[512];
	size_t len;
	uint64_t hl = 0;
	char *d;
	float big = 3e38f;
	cli_path(p, sizeof(p), "p.st");
	d = cli_read(p, &len);
	cr_assert(d && len > 8);
	for (int i = 0; i < 8; i++)
		hl |= (uint64_t)(unsigned char)d[i] << (8 * i);
	cr_assert(8 + hl <= len);
	for (size_t o = 8 + hl; o + 4 <= len; o += 4)
		memcpy(d + o, &big, 4);
	cli_path(p, sizeof(p), "huge.st");
	cli_write(p, d, len);
	free(d);
}

/* eval of finite parameters that overflow float32 (3e38): an error whose
 * message says so (it was ok, with null perplexities and no message). */
Test(lifecycle, eval_huge_parameters_is_error, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char params[600], out[600], err[4096];
	const char *a[] = {
	    "eval",
	    TINY27,
	    "eval_tokens=64",
	    arg_path(params, sizeof(params), "params", "huge.st"),
	    arg_path(out, sizeof(out), "out", "e.jsonl"),
	    NULL};
	json_t *r;
	const char *msg;
	params_init();
	write_huge_params();
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 1, "%s", err);
	r = last_record("e.jsonl");
	check_schema(r);
	cr_assert_str_eq(json_string_value(at(r, "status")), "error");
	msg = json_string_value(at(r, "message"));
	cr_assert(strstr(msg, "overflow float32") && strstr(msg, "huge.st"),
		  "%s", msg);
	json_decref(r);
}

/* A run from those parameters diverges at step 1 with a message that says
 * they overflow float32, not "lower lr" (no update has happened). */
Test(lifecycle, run_huge_parameters_message, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char params[600], out[600], err[4096];
	const char *a[] = {
	    "run",
	    TINY27,
	    "eval_tokens=64",
	    arg_path(params, sizeof(params), "params", "huge.st"),
	    arg_path(out, sizeof(out), "out", "r.jsonl"),
	    NULL};
	json_t *r;
	const char *msg;
	params_init();
	write_huge_params();
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	r = last_record("r.jsonl");
	cr_assert_str_eq(json_string_value(at(r, "status")), "diverged");
	msg = json_string_value(at(r, "message"));
	cr_assert(strstr(msg, "at step 1") && strstr(msg, "overflow float32"),
		  "%s", msg);
	cr_assert(!strstr(msg, "lower lr"), "%s", msg);
	json_decref(r);
}

/* ------------------------------------------------------ plan (14, 15) */

/* plan's tiny config, without steps (each test gives them). */
#define PLAN_TINY                                                              \
	"plan", "corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32",      \
	    "seq_len=8", "batch_size=2", "warmup_steps=1", "eval_tokens=16",   \
	    "threads=1"

/* SIGINT / SIGTERM while plan prices the units (blocked on its "pricing"
 * line): it stops when the pricing ends, before the table: exit 130 /
 * 143 and a line saying so. */
Test(lifecycle, plan_interrupted_while_pricing, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	const int sigs[2] = {SIGINT, SIGTERM};
	for (int k = 0; k < 2; k++) {
		const char *a[] = {PLAN_TINY,	     "layers=3",      "steps=3",
				   "budget_mib=100", "price_cap_s=1", NULL};
		char *text;
		cr_assert_eq(signal_when_blocked(a, sigs[k], &text),
			     128 + sigs[k], "%s", text);
		cr_assert(strstr(text, k ? "interrupted by SIGTERM while "
					   "pricing; no plan was made"
					 : "interrupted by SIGINT while "
					   "pricing; no plan was made"),
			  "%s", text);
		free(text);
	}
}

/* SIGINT during plan --run's training (a run of a million steps, signalled
 * once its progress line shows; the pricing is quiet): exit 130
 * and a line saying --run was interrupted. */
Test(lifecycle, plan_run_interrupted, .init = cli_setup, .fini = cli_teardown,
     .timeout = 180)
{
	char out[600], err_p[512], *e = NULL;
	const char *a[] = {PLAN_TINY,
			   "layers=3",
			   "budget_mib=100",
			   "price_cap_s=1",
			   "steps=1000000",
			   arg_path(out, sizeof(out), "out", "p.jsonl"),
			   "--run",
			   "1",
			   NULL};
	char *argv[64];
	const char *bin = cli_argv(a, argv);
	pid_t pid;
	cli_path(err_p, sizeof(err_p), "stderr.txt");
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int o = open(err_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int nul = open("/dev/null", O_WRONLY);
		if (o < 0 || nul < 0 || dup2(o, 2) < 0 || dup2(nul, 1) < 0)
			_exit(126);
		execv(bin, argv);
		_exit(127);
	}
	for (int t = 0; t < 1200; t++) { /* up to 120 s */
		int st;
		e = cli_read(err_p, NULL);
		if (e && strstr(e, " step "))
			break;
		cr_assert_eq(waitpid(pid, &st, WNOHANG), 0,
			     "plan ended before --run started: %s", e ? e : "");
		free(e);
		e = NULL;
		usleep(100000);
	}
	cr_assert_not_null(e, "no --run progress line in 120 s");
	free(e);
	cr_assert_eq(kill(pid, SIGINT), 0);
	cr_assert_eq(cli_wait_exit(pid), 130);
	e = cli_read(err_p, NULL);
	cr_assert(e && strstr(e, "plan --run interrupted by SIGINT"), "%s",
		  e ? e : "");
	free(e);
}

/* Places in plan's output (cli_dir/stdout.txt) that name label. */
static int table_rows(const char *label)
{
	char p[512], *t, *s;
	int n = 0;
	cli_path(p, sizeof(p), "stdout.txt");
	t = cli_read(p, NULL);
	cr_assert_not_null(t);
	for (s = strstr(t, label); s; s = strstr(s + 1, label))
		n++;
	free(t);
	return n;
}

/* At 130 layers plan has 2 * (3 + 130 + 128 + 4 + 3) = 536 candidates
 * (unroll, offload, selective; checkpoint k; revolve slots; deq's 4
 * Broyden and 3 Anderson), and unroll and the 130 checkpoints again with
 * microbatches=2, 2 * 131 more: 798; none is dropped (the deq ones came
 * last and vanished past 512). */
Test(lifecycle, plan_keeps_every_candidate, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char err[4096], p[512], *t, *s;
	int rows = 0;
	const char *a[] = {PLAN_TINY,		"layers=130",	 "steps=3",
			   "budget_mib=100000", "price_cap_s=1", NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	/* the label and a space: its rows, not the notes under the table */
	cr_assert_eq(table_rows("deq anderson m=8 "), 2);
	cr_assert_eq(table_rows("deq broyden full history "), 2);
	cr_assert_eq(table_rows("checkpoint k=130 mb2 "), 2);
	cr_assert_eq(table_rows("checkpoint k=130 "), 4); /* mb2 too */
	cli_path(p, sizeof(p), "stdout.txt");
	t = cli_read(p, NULL);
	/* table rows: lines that start with a rank */
	for (s = t; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
		rows += atoi(s) > 0;
	free(t);
	cr_assert_eq(table_rows("selective "), 2);
	cr_assert_eq(rows, 798, "%d rows", rows);
}

/* budget_mib above 1e9 MiB is bad input (its size_t conversion
 * overflowed from about 1.8e13: "nothing fits", exit 0). */
Test(lifecycle, plan_budget_bounded, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	const char *a[] = {PLAN_TINY, "layers=3", "steps=3", "budget_mib=2e13",
			   NULL};
	const char *b[] = {PLAN_TINY, "layers=3", "steps=3", "budget_mib=1.1e9",
			   NULL};
	expect_bad_line(a, "at most 1e9");
	expect_bad_line(b, "at most 1e9");
}

/* Nothing fits the budget: bad input naming the smallest candidate's peak
 * (--run trained nothing and exited 0), nothing written. */
Test(lifecycle, plan_nothing_fits_is_bad_input, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char out[600], p[512];
	const char *a[] = {PLAN_TINY,
			   "layers=3",
			   "steps=3",
			   "budget_mib=0.01",
			   arg_path(out, sizeof(out), "out", "p.jsonl"),
			   "--run",
			   "1",
			   NULL};
	expect_bad_line(a, "no candidate fits; the smallest, ");
	expect_bad_line(a, " MiB of device memory: give budget_mib=");
	cli_path(p, sizeof(p), "p.jsonl");
	cr_assert(!cli_exists(p));
}

/* pretrain_steps: plan says it does not take it (it said pretraining needs
 * method=deq to a method=deq config). */
Test(lifecycle, plan_refuses_pretrain_steps, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	const char *a[] = {
	    PLAN_TINY,	  "layers=3",	      "steps=10", "budget_mib=100",
	    "method=deq", "pretrain_steps=1", NULL};
	expect_bad_line(a, "plan does not take pretrain_steps");
}

/* device=cuda where `run` refuses it (no GPU: CUDA_VISIBLE_DEVICES hides
 * any): bad input for plan too (a CUDA build exited 1 after a failed
 * calibration; a build without CUDA refused it already). Skipped where
 * `run` still runs it. */
Test(lifecycle, plan_unavailable_device_is_bad_input, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[600], err[4096];
	const char *r[] = {"run", TINY27, "device=cuda",
			   arg_path(out, sizeof(out), "out", "c.jsonl"), NULL};
	const char *a[] = {PLAN_TINY,	     "layers=3",    "steps=3",
			   "budget_mib=100", "device=cuda", NULL};
	cr_assert_eq(setenv("CUDA_VISIBLE_DEVICES", "", 1), 0);
	if (cli_run(r, 0, err, sizeof(err)) != 2)
		cr_skip_test("device=cuda runs here");
	expect_bad_line(a, "CUDA");
}

/* --------------------------------------------------------- messages */

/* A memory refusal whose parameters are mostly the vocabulary's rows
 * advises lowering vocab_size first. */
Test(lifecycle, vocab_refusal_names_vocab_size, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char out[600];
	const char *a[] = {"run",
			   "corpus=synthetic",
			   "d_model=4096",
			   "n_heads=2",
			   "vocab_size=67108864",
			   "steps=3",
			   "warmup_steps=1",
			   "threads=1",
			   arg_path(out, sizeof(out), "out", "v.jsonl"),
			   NULL};
	expect_bad_line(a, "lower vocab_size");
}
