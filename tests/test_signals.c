/* test_signals.c — SIGINT, SIGTERM and SIGKILL (bench/io/interrupt.c, the
 * suite's children, suite --resume): a signalled run stops after its step
 * with an "interrupted" record and exit 128 + signal, a signalled suite
 * finishes its current run and starts no other, and a killed suite resumed
 * ends with one ok record per run. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "record.h"
#include "test_bench_util.h"
#include "test_cli.h"

/* Starts deqbench with args in its own process group (so a test can
 * signal the group, as a terminal's Ctrl-C does), stderr to cli_dir/
 * stderr.txt; returns its pid once that file shows a progress line. */
static pid_t spawn_until_progress(const char *const *args)
{
	char *argv[64], err_p[512];
	const char *bin = cli_argv(args, argv);
	pid_t pid;
	cli_path(err_p, sizeof(err_p), "stderr.txt");
	unlink(err_p); /* not the previous run's progress lines */
	fflush(NULL);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		int o = open(err_p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		int nul = open("/dev/null", O_WRONLY);
		setpgid(0, 0);
		if (o < 0 || nul < 0 || dup2(o, 2) < 0 || dup2(nul, 1) < 0)
			_exit(126);
		execv(bin, argv);
		_exit(127);
	}
	setpgid(pid, pid); /* as the child does: no race with kill(-pid) */
	for (int t = 0; t < 600; t++) { /* up to 60 s */
		char *e = cli_read(err_p, NULL);
		int seen = e && strstr(e, " step ");
		free(e);
		if (seen)
			return pid;
		usleep(100000);
	}
	kill(pid, SIGKILL);
	cr_assert_fail("deqbench showed no progress line in 60 s");
	return pid;
}

#define LONG_RUN                                                               \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=4", "layers=3", "warmup_steps=1", "eval_tokens=32",    \
	    "threads=1"

/* SIGINT (and SIGTERM) during a run: it stops after the current step,
 * appends its record with status "interrupted" and the steps so far, and
 * exits 130 (143). */
Test(cli, signal_interrupts_run, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	const int sigs[2] = {SIGINT, SIGTERM};
	char out[512], arg[600], err[512];
	cli_path(out, sizeof(out), "int.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	for (int k = 0; k < 2; k++) {
		const char *a[] = {
		    "run",	  LONG_RUN,	  "steps=1000000",
		    "method=deq", "f_max_iter=3", arg,
		    NULL};
		json_t *arr = json_array(), *r;
		pid_t pid = spawn_until_progress(a);
		kill(-pid, sigs[k]);
		cr_assert_eq(cli_wait_exit(pid), 128 + sigs[k]);
		cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0,
			     "%s", err);
		cr_assert_eq(json_array_size(arr), (size_t)k + 1);
		r = json_array_get(arr, k);
		check_schema(r);
		cr_assert_str_eq(json_string_value(at(r, "status")),
				 "interrupted");
		cr_assert(strstr(json_string_value(at(r, "message")),
				 k ? "SIGTERM" : "SIGINT"));
		cr_assert_gt(
		    json_integer_value(at(r, "quality.tokens_trained")), 0);
		cr_assert(json_is_object(at(r, "solver.forward")));
		json_decref(arr);
	}
}

/* SIGTERM to a suite's parent: the current run (its own process, not
 * signalled) finishes ok, no later run starts, exit 143 with a line that
 * says which runs did not run. */
Test(cli, signal_stops_suite_after_current_run, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[512], arg[600], sp[512], err[512], *e, err_p[512];
	json_t *arr = json_array();
	cli_path(out, sizeof(out), "suite.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	cli_path(sp, sizeof(sp), "s.json");
	cli_write_text(sp, "{\"name\": \"sig\", \"base\": {\"corpus\": "
			   "\"synthetic\", \"d_model\": 16, \"n_heads\": 2, "
			   "\"d_ff\": 32, \"seq_len\": 8, \"batch_size\": 4, "
			   "\"steps\": 3000, \"warmup_steps\": 1, "
			   "\"eval_tokens\": 32, \"threads\": 1}, \"axes\": "
			   "{\"layers\": [2, 3, 4]}}");
	{
		const char *a[] = {"suite", sp, arg, NULL};
		pid_t pid = spawn_until_progress(a);
		kill(pid, SIGTERM); /* the parent only */
		cr_assert_eq(cli_wait_exit(pid), 143);
	}
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 1);
	cr_assert_str_eq(
	    json_string_value(at(json_array_get(arr, 0), "status")), "ok");
	cli_path(err_p, sizeof(err_p), "stderr.txt");
	e = cli_read(err_p, NULL);
	cr_assert(e && strstr(e, "interrupted: runs 1.. of 3 did not run"),
		  "%s", e ? e : "");
	free(e);
	json_decref(arr);
}

/* A suite killed with SIGKILL (parent and child, mid-run) and run again
 * with --resume ends with exactly one ok record per run; the runs done
 * before the kill are not run again. */
Test(cli, resume_after_sigkill, .init = cli_setup, .fini = cli_teardown,
     .timeout = 180)
{
	char out[512], arg[600], sp[512], err[4096], err_p[512];
	json_t *arr = json_array(), *r;
	int per_layers[5] = {0}, n_ok = 0;
	size_t i;
	cli_path(out, sizeof(out), "suite.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	cli_path(sp, sizeof(sp), "s.json");
	cli_path(err_p, sizeof(err_p), "stderr.txt");
	cli_write_text(sp, "{\"name\": \"kill\", \"base\": {\"corpus\": "
			   "\"synthetic\", \"d_model\": 16, \"n_heads\": 2, "
			   "\"d_ff\": 32, \"seq_len\": 8, \"batch_size\": 4, "
			   "\"steps\": 1500, \"warmup_steps\": 1, "
			   "\"eval_tokens\": 32, \"threads\": 1}, \"axes\": "
			   "{\"layers\": [2, 3, 4]}}");
	{
		const char *a[] = {"suite", sp, arg, NULL};
		pid_t pid = spawn_until_progress(a);
		int in_run1 = 0;
		for (int t = 0; t < 600 && !in_run1; t++) {
			char *e = cli_read(err_p, NULL);
			in_run1 = e && strstr(e, "[1] unroll step");
			free(e);
			if (!in_run1)
				usleep(100000);
		}
		cr_assert(in_run1, "run 1 never started");
		kill(-pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 1, "only run 0 had finished");
	json_array_clear(arr);
	{
		const char *a[] = {"suite", sp, arg, "--resume", NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
		cr_assert(strstr(err, "[0] skipped (--resume)"), "%s", err);
	}
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	json_array_foreach(arr, i, r)
	{
		if (strcmp(json_string_value(at(r, "status")), "ok"))
			continue;
		n_ok++;
		per_layers[json_integer_value(at(r, "config.layers"))]++;
	}
	cr_assert_eq(n_ok, 3);
	for (int L = 2; L <= 4; L++)
		cr_assert_eq(per_layers[L], 1, "layers=%d: %d ok records", L,
			     per_layers[L]);
	/* resuming a finished suite runs nothing */
	{
		const char *a[] = {"suite", sp, arg, "--resume", NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	json_array_clear(arr);
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 3);
	json_decref(arr);
}
