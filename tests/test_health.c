/* test_health.c — the training-health verdict (bench/records/health.h): the spike
 * rule, the loss windows and the unconverged label on made-up series, then
 * on real tiny runs: a healthy run is healthy, a run made to blow up (lr
 * high, clip off) unstable, a DEQ capped at 2 iterations unconverged, and
 * health_of_record gives a record's own verdict back from its trace. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "config.h"
#include "health.h"
#include "runner.h"
#include "step_log.h"

#define N 200

static void flat(double *loss, double *g, int n)
{
	for (int i = 0; i < n; i++) {
		loss[i] = 5.0 - 1e-3 * i;
		g[i] = 1.0 + 0.01 * (i % 7);
	}
}

Test(health, flat_series_is_healthy)
{
	double loss[N], g[N];
	struct health h;
	flat(loss, g, N);
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert_eq(h.verdict, HEALTH_HEALTHY);
	cr_assert_eq(h.spike_steps, 0);
	cr_assert_eq(h.unconverged, -1);
	cr_assert(isnan(h.fwd_converged));
	cr_assert_float_eq(h.gnorm_max, 1.06, 1e-12);
	/* last 20 steps' mean; the lowest window is the last one */
	cr_assert_float_eq(h.loss_final, 5.0 - 1e-3 * 189.5, 1e-12);
	cr_assert_float_eq(h.loss_min, h.loss_final, 1e-12);
}

Test(health, spike_rule_and_share)
{
	double loss[N], g[N];
	struct health h;
	flat(loss, g, N);
	/* two spikes: 1% of 200 is not more than 1% */
	g[50] = 10.7; /* > 10 x median (about 1.03) */
	g[120] = 9.0; /* below: not a spike */
	loss[150] = loss[149] + 1.5;
	g[5] = 1e6; /* before HEALTH_WINDOW_MIN: never a spike */
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert_eq(h.spike_steps, 2);
	cr_assert_eq(h.verdict, HEALTH_HEALTHY);
	g[60] = NAN; /* non-finite: a spike; 3 of 200 is more than 1% */
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert_eq(h.spike_steps, 3);
	cr_assert_eq(h.verdict, HEALTH_UNSTABLE);
	health_assess(loss, g, N, NULL, 0, 1, NULL, &h);
	cr_assert_eq(h.verdict, HEALTH_DIVERGED);
}

Test(health, loss_that_went_back_up_is_unstable)
{
	double loss[N], g[N];
	struct health h;
	flat(loss, g, N);
	/* a slow climb (no single step 1 nat above the minimum before the
	 * last ones) that ends 1.5 nats above the best window */
	for (int i = 100; i < N; i++)
		loss[i] = loss[99] + 1.5 * (i - 99) / 100.0;
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert_gt(h.loss_final - h.loss_min, 1.0);
	cr_assert_eq(h.verdict, HEALTH_UNSTABLE);
}

Test(health, unconverged_overall_or_at_the_end)
{
	double loss[N], g[N];
	int c[N];
	struct health h;
	flat(loss, g, N);
	for (int i = 0; i < N; i++)
		c[i] = 1;
	health_assess(loss, g, N, c, N, 0, NULL, &h);
	cr_assert_eq(h.unconverged, 0);
	cr_assert_float_eq(h.fwd_converged, 1.0, 0);
	/* 95% overall, but the last 10% (20 steps) only half */
	for (int i = N - 10; i < N; i++)
		c[i] = 0;
	health_assess(loss, g, N, c, N, 0, NULL, &h);
	cr_assert_float_eq(h.fwd_converged, 0.95, 1e-12);
	cr_assert_float_eq(h.fwd_converged_last, 0.5, 1e-12);
	cr_assert_eq(h.unconverged, 1);
	/* 85% overall, all of the end */
	for (int i = 0; i < N; i++)
		c[i] = i >= 30;
	health_assess(loss, g, N, c, N, 0, NULL, &h);
	cr_assert_eq(h.unconverged, 1);
	cr_assert_eq(h.verdict, HEALTH_HEALTHY, "the label is apart");
}

static json_t *tiny_run(const char *const *kv)
{
	struct bench_config c;
	struct run_meta meta = {.quiet = 1};
	char err[512];
	json_t *r = NULL;
	const char *base[] = {"corpus=synthetic", "d_model=16",
			      "n_heads=2",	  "d_ff=32",
			      "seq_len=8",	  "batch_size=2",
			      "layers=3",	  "steps=200",
			      "warmup_steps=1",	  "lr_warmup=1",
			      "eval_tokens=64",	  "threads=1",
			      "trace=true",	  NULL};
	config_defaults(&c);
	for (int i = 0; base[i]; i++)
		cr_assert_eq(config_set_arg(&c, base[i], err, sizeof(err)), 0);
	for (int i = 0; kv[i]; i++)
		cr_assert_eq(config_set_arg(&c, kv[i], err, sizeof(err)), 0,
			     "%s", err);
	cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
	runner_run(&c, &meta, &r);
	return r;
}

static const char *verdict_of(const json_t *r)
{
	return json_string_value(
	    json_object_get(json_object_get(r, "health"), "verdict"));
}

/* The record's health equals health_of_record of the same record. */
static void same_from_trace(const json_t *r)
{
	json_t *h = health_of_record(r);
	cr_assert_not_null(h);
	cr_assert(json_equal(h, json_object_get(r, "health")));
	json_decref(h);
}

Test(health, tiny_runs, .timeout = 120)
{
	const char *healthy[] = {NULL};
	const char *blowup[] = {"lr=0.5", "clip=0", NULL};
	const char *capped[] = {"method=deq", "f_max_iter=2", NULL};
	/* init=deq (the locuslab code's small weights) and tolerances 1e-2:
	 * at most 8 forward and 6 backward Broyden iterations in any step,
	 * against caps of 30 and 40, under OpenBLAS's Prescott, Haswell and
	 * SkylakeX kernels and seeds 1-3. The defaults here (init=pytorch,
	 * 1e-3) sit at the cap from the first step, and whether training
	 * leaves that edge (94.5% of steps converged) or not (14%) depends
	 * on the BLAS kernel's summation order. */
	const char *deq[] = {"method=deq", "init=deq", "f_tol=0.01",
			     "b_tol=0.01", NULL};
	json_t *r = tiny_run(healthy);
	cr_assert_str_eq(verdict_of(r), "healthy");
	cr_assert(json_is_null(
	    json_object_get(json_object_get(r, "health"), "unconverged")));
	same_from_trace(r);
	json_decref(r);
	r = tiny_run(blowup);
	cr_assert_str_eq(verdict_of(r), "unstable");
	same_from_trace(r);
	json_decref(r);
	r = tiny_run(capped);
	cr_assert(json_is_true(
	    json_object_get(json_object_get(r, "health"), "unconverged")));
	same_from_trace(r);
	json_decref(r);
	r = tiny_run(deq);
	cr_assert(json_is_false(
	    json_object_get(json_object_get(r, "health"), "unconverged")));
	same_from_trace(r);
	json_decref(r);
}

/* ---- G5: only a solve that reached its tolerance converged ---- */

/* G5: the forward flags are step_log's bit mask; a solve that a stall,
 * the protective break or a non-finite residual ended did not converge,
 * though its flags are not 0. */
Test(health, only_converged_bit_counts)
{
	double loss[N], g[N];
	int c[N];
	struct health h;
	flat(loss, g, N);
	for (int i = 0; i < N; i++)
		c[i] = i % 3 == 0   ? SOLVE_STALL_BREAK
		       : i % 3 == 1 ? SOLVE_PROTECT_BREAK
				    : SOLVE_NONFINITE;
	health_assess(loss, g, N, c, N, 0, NULL, &h);
	cr_assert_float_eq(h.fwd_converged, 0.0, 0);
	cr_assert_float_eq(h.fwd_converged_last, 0.0, 0);
	cr_assert_eq(h.unconverged, 1);
	/* a NaN-ended solve alone is not converged either */
	for (int i = 0; i < N; i++)
		c[i] = i < N / 2 ? SOLVE_CONVERGED : SOLVE_NONFINITE;
	health_assess(loss, g, N, c, N, 0, NULL, &h);
	cr_assert_float_eq(h.fwd_converged, 0.5, 1e-12);
	cr_assert_float_eq(h.fwd_converged_last, 0.0, 0);
	/* converged with another bit set still converged */
	for (int i = 0; i < N; i++)
		c[i] = SOLVE_CONVERGED | SOLVE_NONFINITE;
	health_assess(loss, g, N, c, N, 0, NULL, &h);
	cr_assert_float_eq(h.fwd_converged, 1.0, 0);
	cr_assert_eq(h.unconverged, 0);
}

/* A run of the review's kbase.json (layers 4, 20 steps) with kv on top;
 * independent of tiny_run's configuration. */
static json_t *kbase_run(const char *const *kv)
{
	struct bench_config c;
	struct run_meta meta = {.quiet = 1};
	char err[512];
	json_t *r = NULL;
	const char *base[] = {
	    "corpus=synthetic", "d_model=16",	  "n_heads=2",
	    "d_ff=32",		"seq_len=8",	  "batch_size=2",
	    "layers=4",		"steps=20",	  "warmup_steps=1",
	    "lr_warmup=1",	"eval_tokens=64", "threads=1",
	    "eval_warmup=0",	"trace=true",	  NULL};
	config_defaults(&c);
	for (int i = 0; base[i]; i++)
		cr_assert_eq(config_set_arg(&c, base[i], err, sizeof(err)), 0);
	for (int i = 0; kv[i]; i++)
		cr_assert_eq(config_set_arg(&c, kv[i], err, sizeof(err)), 0,
			     "%s", err);
	cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
	runner_run(&c, &meta, &r);
	cr_assert_not_null(r);
	return r;
}

static double num_at(const json_t *r, const char *sec, const char *sub,
		     const char *name)
{
	const json_t *o = json_object_get(r, sec);
	if (sub)
		o = json_object_get(o, sub);
	return json_number_value(json_object_get(o, name));
}

/* G5: f_tol=1e-12 with stall_window=2 ends every forward solve on the
 * stall break, none converged (the solver says 0%): health says the same
 * and labels the run unconverged. */
Test(health, stall_broken_run_is_unconverged, .timeout = 120)
{
	const char *kv[] = {"method=deq", "f_tol=1e-12", "stall_window=2",
			    NULL};
	json_t *r = kbase_run(kv), *h = json_object_get(r, "health");
	cr_assert_str_eq(json_string_value(json_object_get(r, "status")), "ok");
	cr_assert_float_eq(num_at(r, "solver", "forward", "converged_fraction"),
			   0.0, 0);
	cr_assert_gt(num_at(r, "solver", "forward", "stall_break_steps"), 0);
	cr_assert_float_eq(num_at(r, "health", NULL, "fwd_converged"), 0.0, 0);
	cr_assert_float_eq(num_at(r, "health", NULL, "fwd_converged_last"), 0.0,
			   0);
	cr_assert(json_is_true(json_object_get(h, "unconverged")));
	same_from_trace(r);
	json_decref(r);
}

/* ---- G12: a run that made the model worse; an uncomputed norm ---- */

/* G12: the review's lr=0.3 clip=0 run, 10 steps: the loss rose 2.3 nats
 * above its start at step 3 and ended 0.64 above it; it was healthy (no
 * spike counted before step 11, w = 1). Step 3 is a spike against the
 * running minimum, and the run ended worse than it started. */
Test(health, short_run_that_went_worse_is_unstable)
{
	const double loss[] = {5.65, 5.97, 7.91, 6.26, 6.10,
			       6.49, 6.01, 6.52, 6.41, 6.29};
	double g[10];
	struct health h;
	for (int i = 0; i < 10; i++)
		g[i] = 1.0;
	health_assess(loss, g, 10, NULL, 0, 0, NULL, &h);
	cr_assert_eq(h.spike_steps, 1, "step 3 only: %d", h.spike_steps);
	cr_assert_eq(h.verdict, HEALTH_UNSTABLE);
}

/* G12: no step 1 nat above the running minimum and loss_final within
 * 1 nat of loss_min, but the run ended more than HEALTH_REGRESS_MARGIN
 * above its first loss: it made the model worse. Batch noise of a run
 * that learns nothing (within the margin) stays healthy. */
Test(health, run_that_ended_above_its_first_loss_is_unstable)
{
	double loss[N], g[N];
	struct health h;
	flat(loss, g, N);
	for (int i = 0; i < N; i++)
		loss[i] = 5.0 + 0.9 * i / (N - 1);
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert_eq(h.spike_steps, 0);
	cr_assert_leq(h.loss_final, h.loss_min + HEALTH_LOSS_MARGIN);
	cr_assert_eq(h.verdict, HEALTH_UNSTABLE);
	for (int i = 0; i < N; i++)
		loss[i] = 5.0 + (i % 2 ? 0.2 : -0.2);
	health_assess(loss, g, N, NULL, 0, 0, NULL, &h);
	cr_assert_eq(h.verdict, HEALTH_HEALTHY);
}

/* G12: the step a run diverged on never computed its gradient norm:
 * the log holds NaN there (null in the trace), not 0, so the norm's
 * median and maximum are those of the steps that computed one. */
Test(health, uncomputed_norm_is_nan)
{
	struct step_log l;
	cr_assert_eq(step_log_alloc(&l, 4), 0);
	for (int i = 0; i < 4; i++)
		cr_assert(isnan(l.gnorm[i]), "gnorm[%d] = %g", i, l.gnorm[i]);
	step_log_free(&l);
}

/* Median of the finite numbers of a JSON array (NAN when none). */
static double finite_median(const json_t *a)
{
	double x[N];
	int k = 0;
	size_t i;
	const json_t *v;
	json_array_foreach(a, i, v) if (json_is_number(v) && k < N) x[k++] =
	    json_number_value(v);
	for (int p = 1; p < k; p++)
		for (int q = p; q > 0 && x[q - 1] > x[q]; q--) {
			double t = x[q];
			x[q] = x[q - 1];
			x[q - 1] = t;
		}
	return !k ? NAN : k % 2 ? x[k / 2] : 0.5 * (x[k / 2 - 1] + x[k / 2]);
}

/* G12: lr=10 without clipping diverges within a few steps; the diverged
 * step's norm (never computed) is not in the median, and the record's
 * health is its trace's. */
Test(health, diverged_run_norm_is_the_computed_steps, .timeout = 120)
{
	const char *kv[] = {"lr=10", "clip=0", "steps=30", NULL};
	json_t *r = kbase_run(kv), *h = json_object_get(r, "health"),
	       *tr = json_object_get(r, "trace");
	double med = finite_median(json_object_get(tr, "grad_norm"));
	const json_t *hm = json_object_get(h, "grad_norm_median");
	cr_assert_str_eq(json_string_value(json_object_get(r, "status")),
			 "diverged");
	cr_assert_str_eq(json_string_value(json_object_get(h, "verdict")),
			 "diverged");
	cr_assert_eq(json_integer_value(json_object_get(h, "steps")),
		     (json_int_t)json_array_size(json_object_get(tr, "loss")));
	if (isnan(med))
		cr_assert(json_is_null(hm));
	else
		cr_assert_float_eq(json_number_value(hm), med, 1e-12 * med);
	same_from_trace(r);
	json_decref(r);
}
