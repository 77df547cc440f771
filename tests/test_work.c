/* test_work.c — the record's `work` object (results/SCHEMA.md §work)
 * against docs/methods.md §Work's formulas, for every method on a tiny
 * transformer: unroll, checkpoint (L not a multiple of k), revolve (one
 * slot and the default), offload (host bytes from the record's own tape
 * size), selective and checkpoint selective=true (attn_recompute = L), deq with b_mode ift, jfb and
 * phantom, with broyden (a history that fills up), anderson and
 * fixed_point, with the Jacobian regulariser drawn on some steps, and
 * with pretrain_steps (pretrain.work); unroll and checkpoint with
 * microbatches (every unit M times, one optimizer step, run_work_micro);
 * and two
 * eval records (unroll, deq). A DEQ's per-step counts are computed from the
 * record's own iteration counts (trace.fwd_iters, bwd_iters, jac_loss), so
 * the test holds on any BLAS core. Every unit's total, per-step mean and
 * first and last means are compared exactly: they are integers and means
 * of integers. method=managed needs device=cuda: its case skips here.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../methods/revolve_schedule.h"
#include "config.h"
#include "record.h"
#include "run_work.h"
#include "test_bench_util.h"
#include "test_cli.h"

/* The units in the record's order (SCHEMA.md §work). */
enum { TAPED, FWD, RECOMP, VJP, VJPI, UPD, HIST, HF, HB, OPT, BYTES, ATTN, NU };
static const char *const units[NU] = {
    "block_fwd_taped",	  "block_fwd",	     "block_fwd_recompute",
    "block_vjp",	  "block_vjp_input", "solver_update",
    "solver_history_sum", "head_fwd",	     "head_bwd",
    "optimizer_step",	  "host_bytes",	     "attn_recompute"};

#define MAX_STEPS 64

/* What the last check_train's deq steps exercised: steps that applied
 * the regulariser, steps, and the longest forward solve. */
static int seen_jac, seen_steps, seen_nf_max;

/* The tiny run: transformer d 16, batch 4 × 8, a trace. */
#define TINY_WORK                                                              \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=4", "vocab_size=64", "eval_tokens=64", "threads=1",    \
	    "trace=true", "warmup_steps=1"

/* Runs deqbench with cmd ("run" or "eval"), the tiny keys (run only) and
 * up to 8 more (NULL-terminated), the record to <cli_dir>/r.jsonl; returns
 * the last record, checked against SCHEMA.md (strict). */
static json_t *run_rec(const char *cmd, const char *const *extra)
{
	static const char *const tiny[] = {TINY_WORK, NULL};
	const char *args[40];
	char out[512], oa[600], err[4096];
	int n = 0;
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(oa, sizeof(oa), "out=%s", out);
	args[n++] = cmd;
	for (int i = 0; !strcmp(cmd, "run") && tiny[i]; i++)
		args[n++] = tiny[i];
	for (int i = 0; extra[i]; i++)
		args[n++] = extra[i];
	args[n++] = oa;
	args[n] = NULL;
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	char *text = cli_read(out, NULL), *last = text, *p;
	cr_assert_not_null(text);
	while ((p = strchr(last, '\n')) && p[1])
		last = p + 1;
	json_t *rec = json_loads(last, 0, NULL);
	free(text);
	cr_assert_not_null(rec);
	cr_assert_str_eq(json_string_value(at(rec, "status")), "ok");
	check_schema(rec);
	return rec;
}

/* Integer at path (fails when absent). */
static long ival(const json_t *r, const char *path)
{
	return (long)json_number_value(at(r, path));
}

/* Entry i of the trace array name: a number, or -1 for null. */
static double trace_at(const json_t *rec, const char *name, int i)
{
	const json_t *a = at(rec, "trace"), *v;
	v = json_array_get(json_object_get(a, name), (size_t)i);
	cr_assert_not_null(v, "trace.%s[%d]", name, i);
	return json_is_number(v) ? json_number_value(v) : -1;
}

/* The work object wk against want[unit][0..n): total, per-step mean,
 * the mean over the timed steps (after the first w), first and last means
 * over edge = max(1, n/10) steps, exactly. */
static void check_work(const json_t *wk, double want[NU][MAX_STEPS], int n,
		       int w, const char *what)
{
	int e = n / 10 < 1 ? 1 : n / 10;
	cr_assert_eq(json_integer_value(json_object_get(wk, "steps")), n,
		     "%s: steps", what);
	cr_assert_eq(json_integer_value(json_object_get(wk, "edge_steps")), e,
		     "%s: edge_steps", what);
	for (int u = 0; u < NU; u++) {
		const json_t *o = json_object_get(wk, units[u]);
		double s = 0, f = 0, l = 0, t = 0;
		for (int i = 0; i < n; i++) {
			s += want[u][i];
			t += i >= w ? want[u][i] : 0;
			f += i < e ? want[u][i] : 0;
			l += i >= n - e ? want[u][i] : 0;
		}
		cr_assert_not_null(o, "%s: %s missing", what, units[u]);
		cr_assert_eq(
		    json_integer_value(json_object_get(o, "total")),
		    (json_int_t)s, "%s: %s total %lld, formula %.0f", what,
		    units[u],
		    (long long)json_integer_value(json_object_get(o, "total")),
		    s);
		cr_assert_eq(json_real_value(json_object_get(o, "per_step")),
			     s / n, "%s: %s per_step", what, units[u]);
		cr_assert_eq(
		    json_real_value(json_object_get(o, "per_step_timed")),
		    t / (n - w), "%s: %s per_step_timed (%d untimed)", what,
		    units[u], w);
		cr_assert_eq(
		    json_real_value(json_object_get(o, "per_step_first")),
		    f / e, "%s: %s per_step_first", what, units[u]);
		cr_assert_eq(
		    json_real_value(json_object_get(o, "per_step_last")), l / e,
		    "%s: %s per_step_last", what, units[u]);
	}
}

/* C(n, k), small arguments. */
static double binom(int n, int k)
{
	double c = 1;
	if (k < 0 || k > n)
		return 0;
	for (int i = 1; i <= k; i++)
		c = c * (n - k + i) / i;
	return c;
}

/* A(L, s) of docs/methods.md: r·L − C(s+1+r, r−1), r the smallest with
 * C(s+1+r, r) >= L. */
static long advances(int L, int s)
{
	int r = 1;
	while (binom(s + 1 + r, r) < L)
		r++;
	return (long)(r * (double)L - binom(s + 1 + r, r - 1));
}

/* U(n) and H(n) of docs/methods.md for one solve of n evaluations with
 * solver (broyden history h, anderson m = h). */
static void solve_work(const char *solver, int h, int n, double *u, double *hs)
{
	*u = *hs = 0;
	if (!strcmp(solver, "fixed_point") || n < 1)
		return;
	*u = n - 1;
	for (int t = 0; t + 1 < n; t++) {
		int k = !strcmp(solver, "broyden") ? t : t + 1;
		*hs += k < h ? k : h;
	}
}

/* Step i of a training run of an unrolled-depth method (layers L, the
 * record's resolved k / slots; b: the tape's bytes) into want[.][j]. */
static void layered_step(const json_t *rec, const char *m, int L, double b,
			 double want[NU][MAX_STEPS], int j)
{
	double w[NU] = {[TAPED] = L, [VJP] = L, [HF] = 1, [HB] = 1, [OPT] = 1};
	if (!strcmp(m, "checkpoint")) {
		int k = (int)ival(rec, "method.k"), S = (L + k - 1) / k;
		int last = L - (S - 1) * k;
		w[TAPED] = last, w[FWD] = L - last, w[RECOMP] = L - last;
		/* selective=true: one attention recomputation per VJP */
		if (json_is_true(at(rec, "method.selective")))
			w[ATTN] = L;
	} else if (!strcmp(m, "revolve")) {
		long A = advances(L, (int)ival(rec, "method.slots"));
		cr_assert_eq(A, revolve_advances(L, (int)ival(rec, "method."
								   "slots")));
		w[TAPED] = 1, w[FWD] = (double)A, w[RECOMP] = L - 1;
	} else if (!strcmp(m, "offload")) {
		w[BYTES] = 2.0 * (L > 2 ? L - 2 : 0) * b;
	} else if (!strcmp(m, "selective")) {
		w[ATTN] = L; /* one attention recomputation per VJP */
	}
	for (int u = 0; u < NU; u++)
		want[u][j] = w[u];
}

/* Step i (0-based, of the trace) of a deq training run into want[.][j],
 * from the trace's iterations and regulariser draws. */
static void deq_step(const json_t *rec, int i, double want[NU][MAX_STEPS],
		     int j)
{
	const char *bm = json_string_value(at(rec, "method.b_mode"));
	const char *fs = json_string_value(at(rec, "method.f_solver"));
	const char *bs = json_string_value(at(rec, "method.b_solver"));
	int ift = !strcmp(bm, "ift"), ph = !strcmp(bm, "phantom");
	int nf = (int)trace_at(rec, "fwd_iters", i);
	int nb = (int)trace_at(rec, "bwd_iters", i);
	int J = trace_at(rec, "jac_loss", i) >= 0;
	int app = ph ? (int)ival(rec, "method.phantom_steps") : 1;
	int hf = (int)ival(rec, !strcmp(fs, "anderson") ? "method.anderson_m"
							: "method.f_history");
	int hb = (int)ival(rec, !strcmp(bs, "anderson") ? "method.anderson_m"
							: "method.b_history");
	double uf, hsf, ub = 0, hsb = 0;
	seen_jac += J, seen_steps++;
	seen_nf_max = nf > seen_nf_max ? nf : seen_nf_max;
	solve_work(fs, hf, nf, &uf, &hsf);
	if (ift)
		solve_work(bs, hb, nb, &ub, &hsb);
	double w[NU] = {[TAPED] = app + 2 * J,
			[FWD] = nf,
			[VJP] = app + 2 * J,
			[VJPI] = (ift ? nb : 0) + J,
			[UPD] = uf + ub,
			[HIST] = hsf + hsb,
			[HF] = 1,
			[HB] = 1,
			[OPT] = 1};
	for (int u = 0; u < NU; u++)
		want[u][j] = w[u];
}

/* run_work_step (bench/run/run_work.c: the formulas `deqbench plan`
 * prices) of rec's resolved config equals want, step by step (a deq's
 * solves from the trace from step P on; b the tape's bytes). */
static void check_formula(const json_t *rec, double want[NU][MAX_STEPS], int P,
			  int n, double b, const char *what)
{
	struct bench_config c;
	char err[512];
	double x[WORK_UNITS];
	config_defaults(&c);
	cr_assert_eq(config_apply_object(&c, at(rec, "config"), "record", err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
	for (int j = 0; j < n; j++) {
		struct work_solves s = {trace_at(rec, "fwd_iters", P + j),
					trace_at(rec, "bwd_iters", P + j),
					trace_at(rec, "jac_loss", P + j) >= 0};
		cr_assert_eq(run_work_step(&c.method, b, &s, x), 0);
		run_work_micro(x, c.microbatches);
		for (int u = 0; u < NU; u++)
			cr_assert_eq(x[u], want[u][j],
				     "%s: run_work_step's %s at step %d: %g, "
				     "formula %g",
				     what, units[u], j, x[u], want[u][j]);
	}
}

/* A training run of method m with the extra keys: its work against the
 * formulas, step by step, and run_work_step's; the forward and VJP units
 * summing to evals. */
static void check_train(const char *const *extra, const char *what)
{
	static double want[NU][MAX_STEPS];
	json_t *rec = run_rec("run", extra);
	const char *m = json_string_value(at(rec, "method.method"));
	int steps = (int)ival(rec, "config.steps");
	int P = json_is_object(at(rec, "pretrain"))
		    ? (int)ival(rec, "pretrain.steps")
		    : 0;
	cr_assert_leq(steps, MAX_STEPS);
	seen_jac = seen_steps = seen_nf_max = 0;
	double b = 0;
	if (!strcmp(m, "deq")) {
		for (int i = P; i < steps; i++)
			deq_step(rec, i, want, i - P);
	} else {
		int L = (int)ival(rec, "method.layers");
		b = L > 2 ? json_number_value(
				at(rec, "memory.predicted_host_bytes")) /
				(L - 2)
			  : 0;
		for (int i = 0; i < steps; i++)
			layered_step(rec, m, L, b, want, i);
		/* microbatches = M: each micro-batch's units, one Adam */
		int M = (int)ival(rec, "config.microbatches");
		for (int i = 0; i < steps; i++)
			for (int u = 0; u < NU; u++)
				want[u][i] *= u == OPT ? 1 : M;
	}
	check_work(at(rec, "work"), want, steps - P,
		   steps - P - (int)ival(rec, "timing.steps_timed"), what);
	check_formula(rec, want, P, steps - P, b, what);
	cr_assert_eq(ival(rec, "work.block_fwd_taped.total") +
			 ival(rec, "work.block_fwd.total") +
			 ival(rec, "work.block_fwd_recompute.total"),
		     ival(rec, "evals.forward_evals_total"), "%s", what);
	cr_assert_eq(ival(rec, "work.block_vjp.total") +
			 ival(rec, "work.block_vjp_input.total"),
		     ival(rec, "evals.vjp_evals_total"), "%s", what);
	if (P > 0) { /* pretraining: unroll at pretrain_layers */
		int Lp = (int)ival(rec, "pretrain.layers");
		for (int i = 0; i < P; i++)
			layered_step(rec, "unroll", Lp, 0, want, i);
		check_work(at(rec, "pretrain.work"), want, P, 0, what);
	}
	json_decref(rec);
}

#define TRAIN(name, ...)                                                       \
	Test(work, name, .init = cli_setup, .fini = cli_teardown,              \
	     .timeout = 120)                                                   \
	{                                                                      \
		const char *extra[] = {__VA_ARGS__, NULL};                     \
		check_train(extra, #name);                                     \
	}

TRAIN(unroll, "method=unroll", "layers=5", "steps=6")
TRAIN(checkpoint, "method=checkpoint", "layers=7", "k=3", "steps=6")
TRAIN(checkpoint_default_k, "method=checkpoint", "layers=5", "steps=4")
TRAIN(revolve_one_slot, "method=revolve", "layers=7", "slots=1", "steps=4")
TRAIN(revolve_default, "method=revolve", "layers=12", "steps=4")
TRAIN(offload, "method=offload", "layers=5", "steps=4")
TRAIN(selective, "method=selective", "layers=5", "steps=4")
TRAIN(checkpoint_selective, "method=checkpoint", "layers=7", "k=3",
      "selective=true", "steps=4")
/* gradient accumulation: two micro-batches' units, one optimizer step */
TRAIN(unroll_micro, "method=unroll", "layers=5", "steps=4", "microbatches=2")
TRAIN(checkpoint_micro, "method=checkpoint", "layers=7", "k=3", "steps=4",
      "microbatches=4")
TRAIN(deq_ift_broyden, "method=deq", "steps=22")
/* a history shorter than the solves: min(t, h) saturates */
Test(work, deq_broyden_short_history, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	const char *extra[] = {"method=deq", "f_history=3", "b_history=2",
			       "steps=6", NULL};
	check_train(extra, "deq_broyden_short_history");
	cr_assert_gt(seen_nf_max, 3 + 1, "a solve longer than the history");
}
TRAIN(deq_jfb, "method=deq", "b_mode=jfb", "steps=6")
TRAIN(deq_phantom, "method=deq", "b_mode=phantom", "phantom_steps=3", "steps=6")
TRAIN(deq_anderson, "method=deq", "f_solver=anderson", "b_solver=anderson",
      "anderson_m=3", "steps=6")
TRAIN(deq_fixed_point, "method=deq", "f_solver=fixed_point",
      "b_solver=fixed_point", "f_max_iter=8", "b_max_iter=8", "steps=6")
/* the regulariser drawn on some steps (J = 1) and not on others */
Test(work, deq_jacobian_regulariser, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	const char *extra[] = {"method=deq", "jac_loss_weight=0.5",
			       "jac_loss_freq=0.5", "steps=12", NULL};
	check_train(extra, "deq_jacobian_regulariser");
	cr_assert(seen_jac > 0 && seen_jac < seen_steps,
		  "%d of %d steps applied the regulariser", seen_jac,
		  seen_steps);
}
TRAIN(deq_pretrain, "method=deq", "pretrain_steps=3", "pretrain_layers=4",
      "steps=8")

/* method=managed trains on device=cuda only (methods/managed.c); its row
 * of docs/methods.md is unroll's with (L − 1) tapes prefetched. */
Test(work, managed, .init = cli_setup, .fini = cli_teardown)
{
	cr_skip_test("method=managed needs device=cuda; this test runs on "
		     "the CPU");
}

/* Saves a tiny run's parameters (the extra keys) and evaluates them:
 * the eval record (kind eval), its work per valid batch. */
static json_t *eval_rec(const char *const *extra)
{
	char p[512], sp[600], pa[600];
	const char *run[12];
	int n = 0;
	cli_path(p, sizeof(p), "p.safetensors");
	snprintf(sp, sizeof(sp), "save_params=%s", p);
	snprintf(pa, sizeof(pa), "params=%s", p);
	for (int i = 0; extra[i]; i++)
		run[n++] = extra[i];
	run[n++] = sp;
	run[n] = NULL;
	json_decref(run_rec("run", run));
	const char *ev[] = {"eval_tokens=96", pa, NULL};
	json_t *rec = run_rec("eval", ev);
	cr_assert_str_eq(json_string_value(at(rec, "kind")), "eval");
	return rec;
}

/* An eval record's work: per valid batch L untaped forwards and a head
 * forward, nothing else. */
Test(work, eval_unroll, .init = cli_setup, .fini = cli_teardown, .timeout = 120)
{
	static double want[NU][MAX_STEPS];
	const char *extra[] = {"method=unroll", "layers=4", "steps=2", NULL};
	json_t *rec = eval_rec(extra);
	int nb = (int)ival(rec, "inference.batches");
	cr_assert_geq(nb, 2);
	memset(want, 0, sizeof(want));
	for (int i = 0; i < nb; i++)
		want[FWD][i] = 4, want[HF][i] = 1;
	check_work(at(rec, "work"), want, nb,
		   nb - (int)ival(rec, "inference.batches_timed"),
		   "eval unroll");
	json_decref(rec);
}

/* A deq eval record's work: per valid batch n_f + 1 untaped forwards and
 * the forward solve's own iterations. A tolerance float32 cannot reach
 * makes every batch's solve run its cap, so each batch's n_f is the
 * record's iters_max (checked: iters_mean equals it). */
Test(work, eval_deq, .init = cli_setup, .fini = cli_teardown, .timeout = 120)
{
	static double want[NU][MAX_STEPS];
	const char *extra[] = {"method=deq",  "f_max_iter=7", "f_history=3",
			       "f_tol=1e-12", "steps=2",      NULL};
	json_t *rec = eval_rec(extra);
	int nb = (int)ival(rec, "inference.batches");
	double mean =
	    json_number_value(at(rec, "inference.forward_solve.iters_mean"));
	int nf = (int)ival(rec, "inference.forward_solve.iters_max");
	double u, hs;
	cr_assert_eq(mean, nf, "every batch's solve ran its cap");
	solve_work("broyden", (int)ival(rec, "method.f_history"), nf, &u, &hs);
	memset(want, 0, sizeof(want));
	for (int i = 0; i < nb; i++) {
		want[FWD][i] = nf + 1, want[HF][i] = 1;
		want[UPD][i] = u, want[HIST][i] = hs;
	}
	check_work(at(rec, "work"), want, nb,
		   nb - (int)ival(rec, "inference.batches_timed"), "eval deq");
	json_decref(rec);
}
