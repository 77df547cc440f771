/* test_peer_fake.h — for tests of impl=pytorch's wiring without PyTorch
 * (test_impl.c, test_children.c): a stand-in for python3 (set through
 * DQ_PYTHON) and records for a stand-in deqtorch.py to print. deqbench
 * appends only what, merged with its own part, is a valid record
 * (validate --strict), so the stand-ins print records of real deqbench
 * runs with impl "pytorch-0.0+fake". Include after test_cli.h; header-only. */
#ifndef DQ_TEST_PEER_FAKE_H
#define DQ_TEST_PEER_FAKE_H

#include <jansson.h>
#include <math.h>
#include <sys/stat.h>

#include "test_cli.h"

/* python3 stand-in: "-c PROBE" is the torch probe (prints $FAKE_VERSION,
 * nothing when unset, and exits $PROBE_RC, 0 by default); otherwise runs
 * the script with sh. */
static const char FAKE_PY[] =
    "#!/bin/sh\n"
    "if [ \"$1\" = -c ]; then\n"
    "  if [ -n \"$FAKE_VERSION\" ]; then echo \"$FAKE_VERSION\"; fi\n"
    "  exit ${PROBE_RC:-0}; fi\n"
    "exec /bin/sh \"$@\"\n";

/* Writes FAKE_PY to cli_dir/fakepy and sets DQ_PYTHON to it. */
static inline void fake_python(void)
{
	char py[512];
	cli_path(py, sizeof(py), "fakepy");
	cli_write_text(py, FAKE_PY);
	cr_assert_eq(chmod(py, 0755), 0);
	setenv("DQ_PYTHON", py, 1);
	unsetenv("FAKE_VERSION");
	unsetenv("PROBE_RC");
}

/* The first record of cli_dir/name (a JSONL file). New reference. */
static inline json_t *fake_first_record(const char *name)
{
	char p[512], *text, *nl;
	json_t *r;
	cli_path(p, sizeof(p), name);
	text = cli_read(p, NULL);
	cr_assert_not_null(text, "no %s", name);
	if ((nl = strchr(text, '\n')))
		*nl = 0;
	r = json_loads(text, 0, NULL);
	cr_assert(json_is_object(r), "%s: malformed first line", name);
	free(text);
	return r;
}

/* Writes rec to cli_dir/name as one line. */
static inline void fake_write_record(const char *name, const json_t *rec)
{
	char p[512], *s = json_dumps(rec, JSON_COMPACT);
	cr_assert_not_null(s);
	cli_path(p, sizeof(p), name);
	cli_write_text(p, s);
	free(s);
}

/* Makes r (a real training record) tell the child's figures from
 * deqbench's while staying a valid record (validate's rules between
 * fields): every step_ms statistic 1000.0 ms, and a depth peak of 2 MiB,
 * peak_depth_solver_bytes and peak_total_bytes raised with it. */
static inline void fake_distinct_figures(json_t *r)
{
	static const char *const st[] = {"median", "mean", "p10", "p90", "min",
					 "max",	   "p25",  "p75", NULL};
	json_t *ms = json_object_get(json_object_get(r, "timing"), "step_ms");
	json_t *m = json_object_get(r, "memory");
	json_t *pb = json_object_get(m, "peak_bytes");
	json_int_t d = 2097152,
		   old = json_integer_value(json_object_get(pb, "depth"));
	for (int i = 0; st[i]; i++)
		json_object_set_new(ms, st[i], json_real(1000.0));
	json_object_set_new(pb, "depth", json_integer(d));
	json_object_set_new(m, "peak_depth_solver_bytes", json_integer(d));
	json_object_set_new(m, "peak_total_bytes",
			    json_integer(json_integer_value(json_object_get(
					     m, "peak_total_bytes")) +
					 d - old));
}

/*
 * fake_child_records — writes what a stand-in deqtorch.py prints, one line
 * each: cli_dir/child.json, the record of a real deqbench run of a tiny
 * synthetic config (layers=3, eval_warmup=0: a request must ask for the
 * same, or the merged record's method and inference contradict its config
 * and validate refuses it), and cli_dir/child_eval.json, of a deqbench eval of that
 * model (its kind set to "train": deqbench's own kind must win). Both have
 * impl "pytorch-0.0+fake"; child.json has timing.step_ms.median 1000.0 and
 * memory.peak_depth_solver_bytes 2 MiB (fake_distinct_figures),
 * child_eval.json quality.valid_loss 2.5 (and its ppl), so a test can tell the child's figures from deqbench's. Uses cli_run (stdout.txt, stderr.txt).
 */
static inline void fake_child_records(void)
{
	char out[600], par[600], a_out[700], a_par[700], err[2048];
	json_t *r;
	const char *tiny[] = {
	    "corpus=synthetic", "d_model=16", "n_heads=2",
	    "d_ff=32",		"seq_len=8",  "batch_size=2",
	    "layers=3",		"threads=1",  "eval_warmup=0"};
	const char *args[20];
	int n = 0;

	cli_path(out, sizeof(out), "ref.jsonl");
	cli_path(par, sizeof(par), "ref.safetensors");
	snprintf(a_out, sizeof(a_out), "out=%s", out);
	args[n++] = "run";
	for (size_t i = 0; i < sizeof(tiny) / sizeof(tiny[0]); i++)
		args[n++] = tiny[i];
	args[n++] = "steps=3";
	args[n++] = "warmup_steps=1";
	args[n++] = "eval_tokens=32";
	args[n++] = a_out;
	snprintf(a_par, sizeof(a_par), "save_params=%s", par);
	args[n++] = a_par;
	args[n] = NULL;
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	r = fake_first_record("ref.jsonl");
	json_object_set_new(r, "impl", json_string("pytorch-0.0+fake"));
	fake_distinct_figures(r);
	fake_write_record("child.json", r);
	json_decref(r);
	cr_assert_eq(unlink(out), 0);

	args[0] = "eval";
	n = 1 + (int)(sizeof(tiny) / sizeof(tiny[0]));
	args[n++] = "eval_tokens=32";
	args[n++] = a_out;
	snprintf(a_par, sizeof(a_par), "params=%s", par);
	args[n++] = a_par;
	args[n] = NULL;
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	r = fake_first_record("ref.jsonl");
	json_object_set_new(r, "impl", json_string("pytorch-0.0+fake"));
	json_object_set_new(r, "kind", json_string("train"));
	json_object_set_new(json_object_get(r, "quality"), "valid_loss",
			    json_real(2.5));
	json_object_set_new(json_object_get(r, "quality"), "valid_ppl",
			    json_real(exp(2.5)));
	fake_write_record("child_eval.json", r);
	json_decref(r);
	cr_assert_eq(unlink(out), 0);
}

#endif
