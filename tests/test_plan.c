/*
 * test_plan.c — `deqbench plan` (bench/cmd/cmd_plan.c) and the closed-form
 * evaluation counts it uses:
 *
 *   1. method_evals_per_step equals the counts a real training step makes
 *      for every plan candidate of every registered method
 *      (method_candidate: unroll, offload, checkpoint every k, revolve
 *      every slots up to L-2), and refuses deq (its counts depend on the
 *      solves);
 *   2. `plan budget_mib=M --run N` on a tiny model trains every candidate
 *      (those the method registry lists: method_candidate) that fits and, for each record, the predicted peak equals the
 *      allocator's measured peak_total_bytes and the predicted host bytes
 *      the measured host peak, for every method; each appended record's
 *      measured peak is within the budget;
 *   3. bad input: budget_mib missing, ≤ 0 or not a number, --run without
 *      a count, layers < 3: exit 2, one line naming the key or flag;
 *   4. the cost model's arithmetic (bench/cmd/plan_cost.h) on fixed
 *      calibration numbers, no runs and no clocks: a head_chunk effect
 *      within the calibrations' noise is none, a real one scales with the
 *      head's share of the step, and no prediction falls below the floor.
 */
#include "config.h"
#include "methods/method.h"

#define DQ_TEST_SEED 29
#include "test_util.h"
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_cost.h"
#include "test_cli.h"
#include "test_deq_util.h"

/* ------------------------------------------------- 1. evaluation counts */

static void check_counts(struct model *m, struct method_config c,
			 const char *what)
{
	long f, v;
	void *z = dev_state(m);
	method_config_resolve(&c);
	cr_assert_eq(method_evals_per_step(&c, &f, &v), 0, "%s", what);
	struct method *me = new_method(m, c);
	step(m, me, z, NULL);
	const struct method_stats *st = method_get_stats(me);
	cr_assert_eq(st->forward_evals, f, "%s: %ld forwards, formula %ld",
		     what, st->forward_evals, f);
	cr_assert_eq(st->vjp_evals, v, "%s", what);
	method_destroy(me);
	backend_free(m->be, z);
}

/* Every plan candidate of every registered method (method_candidate) at
 * L = 1, 5, 9: its closed form equals a real step's counts, or it has none
 * and plan calibrates it (deq). */
Test(evals, closed_forms_match_a_step, .timeout = 120)
{
	const struct shape s = {2, 4, 8, 2, 16, 11};
	struct model *m = open_model("cpu", MODEL_TANH_CELL, s, 1);
	char what[96], err[512];
	int closed = 0, calibrated = 0;
	for (int L = 1; L <= 9; L += 4) {
		struct bench_config base;
		config_defaults(&base);
		base.method.layers = L;
		cr_assert_eq(config_finish(&base, err, sizeof(err)), 0);
		for (int k = 0; k < method_kind_count(); k++) {
			struct method_candidate mc;
			for (int i = 0;
			     !method_kind_needs_managed(k) &&
			     method_candidate(k, &base.method, i, &mc);
			     i++) {
				struct bench_config c = base;
				long f, v;
				c.method.resolved = 0;
				c.method.method = k;
				for (int j = 0; j < mc.n_keys; j++)
					cr_assert_eq(config_set(&c, mc.key[j],
								mc.value[j],
								err,
								sizeof(err)),
						     0, "%s", err);
				cr_assert_eq(
				    config_finish(&c, err, sizeof(err)), 0,
				    "%s", err);
				snprintf(what, sizeof(what), "%s L=%d",
					 mc.label, L);
				if (method_evals_per_step(&c.method, &f, &v)) {
					calibrated++;
					continue;
				}
				c.method.resolved = 0;
				check_counts(m, c.method, what);
				closed++;
			}
		}
	}
	cr_assert_gt(closed, 0);
	cr_assert_gt(calibrated, 0);
	close_model(m);
}

/* ---------------------------------------------------- 2. plan --run */

static const char *const tiny[] = {
    "model=transformer", "d_model=16",	   "n_heads=2",	       "d_ff=32",
    "seq_len=8",	 "batch_size=4",   "corpus=synthetic", "vocab_size=40",
    "steps=3",		 "warmup_steps=1", "eval_tokens=64",   "threads=1"};
#define NTINY ((int)(sizeof(tiny) / sizeof(*tiny)))

/* The candidates the method registry lists for the base config of
 * predicted_peak_is_measured (tiny, layers=4). */
static int registry_candidates(void)
{
	struct bench_config c;
	struct method_candidate mc;
	char err[512];
	int n = 0;
	config_defaults(&c);
	for (int i = 0; i < NTINY; i++)
		cr_assert_eq(config_set_arg(&c, tiny[i], err, sizeof(err)), 0);
	cr_assert_eq(config_set(&c, "layers", "4", err, sizeof(err)), 0);
	cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
	for (int k = 0; k < method_kind_count(); k++)
		for (int i = 0; !method_kind_needs_managed(k) &&
				method_candidate(k, &c.method, i, &mc);
		     i++)
			n++; /* plan leaves method=managed out */
	return n;
}

Test(plan, predicted_peak_is_measured, .init = cli_setup, .fini = cli_teardown,
     .timeout = 300)
{
	char out[600], path[512], err[4096];
	const char *argv[40];
	int n = 0;
	argv[n++] = "plan";
	argv[n++] = "budget_mib=1000";
	argv[n++] = "layers=4";
	for (int i = 0; i < NTINY; i++)
		argv[n++] = tiny[i];
	snprintf(out, sizeof(out), "out=%s/p.jsonl", cli_dir);
	argv[n++] = out;
	argv[n++] = "--run";
	argv[n++] = "100";
	argv[n] = NULL;
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(path, sizeof(path), "p.jsonl");
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char line[1 << 16];
	int recs = 0, methods_seen[8] = {0};
	while (fgets(line, sizeof(line), f)) {
		json_error_t je;
		json_t *r = json_loads(line, 0, &je);
		cr_assert_not_null(r, "%s", je.text);
		json_t *p = json_object_get(r, "plan");
		json_t *mem = json_object_get(r, "memory");
		cr_assert_str_eq(
		    json_string_value(json_object_get(r, "status")), "ok");
		json_int_t pred = json_integer_value(
		    json_object_get(p, "predicted_peak_total_bytes"));
		json_int_t meas = json_integer_value(
		    json_object_get(mem, "peak_total_bytes"));
		json_int_t ph = json_integer_value(
		    json_object_get(p, "predicted_host_bytes"));
		json_int_t mh = json_integer_value(json_object_get(
		    json_object_get(mem, "peak_bytes"), "host"));
		const char *cand =
		    json_string_value(json_object_get(p, "candidate"));
		cr_assert_eq(pred, meas, "%s: predicted %lld measured %lld",
			     cand, (long long)pred, (long long)meas);
		cr_assert_eq(ph, mh, "%s host", cand);
		int mk = method_kind_parse(json_string_value(
		    json_object_get(json_object_get(r, "config"), "method")));
		cr_assert(mk >= 0 && mk < 8);
		methods_seen[mk] = 1;
		recs++;
		json_decref(r);
	}
	fclose(f);
	/* every candidate the registered methods list for this config
	 * (method_candidate), each with and without head_chunk */
	cr_assert_eq(recs, 2 * registry_candidates(), "%d records", recs);
	for (int k = 0; k < method_kind_count(); k++)
		cr_assert(methods_seen[k] != method_kind_needs_managed(k),
			  "%s: %d records", method_kind_name(k),
			  methods_seen[k]);
}

/* ------------------------------------------------------ 3. bad input */

static void bad(const char *a1, const char *a2, const char *want)
{
	char err[4096];
	const char *argv[40];
	int n = 0;
	argv[n++] = "plan";
	for (int i = 0; i < NTINY; i++)
		argv[n++] = tiny[i];
	if (a1)
		argv[n++] = a1;
	if (a2)
		argv[n++] = a2;
	argv[n] = NULL;
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 2, "%s %s: %s", a1, a2,
		     err);
	char *nl = strchr(err, '\n');
	cr_assert(nl && nl[1] == 0, "one line expected: %s", err);
	cr_assert(strstr(err, want), "%s %s: %s", a1, a2, err);
}

Test(plan, bad_input, .init = cli_setup, .fini = cli_teardown, .timeout = 60)
{
	bad(NULL, NULL, "budget_mib=(missing)");
	bad("budget_mib=0", NULL, "budget_mib=0");
	bad("budget_mib=-5", NULL, "budget_mib=-5");
	bad("budget_mib=lots", NULL, "budget_mib=lots");
	bad("budget_mib=inf", NULL, "budget_mib=inf");
	bad("budget_mib=64", "--run", "--run needs");
	bad("budget_mib=64", "layers=2", "needs layers >= 3");
	bad("budget_mib=64", "method=nope", "method=nope");
}

/* ------------------------------------- 4. the cost model's arithmetic */

/* G11: the calibrations of a layers=300 plan (two unroll steps of about
 * 47 ms, 0.7 ms apart with head_chunk, within their interquartile ranges;
 * a deq step of 0.3 ms): the deq's head_chunk twin is its own step, not
 * 0.3 - 0.7 ms, and head_chunk changes no closed-form prediction. */
Test(cost, head_chunk_delta_within_noise_is_none)
{
	const struct plan_cals c = {{47.0, 1.2}, {11.9, 0.4}, {3547.0, 20.0},
				    {46.3, 1.0}, {48.0, 1.3}, 300,
				    75,		 44850};
	struct plan_costs k;
	int clamped = 0;
	plan_costs_fit(&c, &k);
	cr_assert_eq(plan_chunk_twin_ms(&k, 0.3, &clamped), 0.3);
	cr_assert_eq(plan_predict_ms(&k, 300, 300, 1, 0, &clamped),
		     plan_predict_ms(&k, 300, 300, 0, 0, &clamped));
	cr_assert_eq(clamped, 0);
}

/* G11: a head_chunk effect beyond the noise is a ratio of the head's time
 * R (here R = 2 ms of a 10 ms unroll step, the 1 ms delta +-50%): a step
 * whose own time is below R (a fast deq) has at most that much head, so
 * its twin scales with its step and stays positive where adding the
 * unroll delta gave 0.5 - 1 < 0. */
Test(cost, head_chunk_effect_scales_with_the_head)
{
	struct plan_cals c = {{10.0, 0.1}, {4.0, 0.1}, {11.0, 0.1}, {11.0, 0.1},
			      {12.0, 0.1}, 4,	       1,	    1};
	struct plan_costs k;
	int clamped = 0;
	plan_costs_fit(&c, &k);
	cr_assert_float_eq(k.R, 2.0, 1e-12);
	cr_assert_float_eq(k.F + k.V, 2.0, 1e-12);
	cr_assert_float_eq(k.head_ratio, 1.5, 1e-12);
	/* 8 ms holds the whole 2 ms head: +1 ms, as in unroll */
	cr_assert_float_eq(plan_chunk_twin_ms(&k, 8.0, &clamped), 9.0, 1e-12);
	cr_assert_float_eq(plan_chunk_twin_ms(&k, 1.0, &clamped), 1.5, 1e-12);
	c.unroll_chunk.ms = 9.0; /* chunking saves 1 ms of the 2 */
	plan_costs_fit(&c, &k);
	cr_assert_float_eq(plan_chunk_twin_ms(&k, 0.5, &clamped), 0.25, 1e-12);
	cr_assert_float_eq(plan_predict_ms(&k, 4, 4, 1, 0, &clamped), 9.0,
			   1e-12);
	cr_assert_eq(clamped, 0);
}

/* G11, G20.13: whatever the calibrations (medians in 0..50 ms in any
 * order, as noise can leave them; seeded, so the same on every machine),
 * every prediction is finite and at least PLAN_MIN_MS, and one raised to
 * it is counted; calibrations of zero raise every prediction. */
Test(cost, predictions_stay_positive)
{
	uint64_t x = 29;
	int clamped = 0;
	for (int t = 0; t < 2000; t++) {
		double u[10];
		for (int i = 0; i < 10; i++) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			u[i] = (double)(x >> 11) / 9007199254740992.0;
		}
		const struct plan_cals c = {{50 * u[0], 5 * u[5]},
					    {50 * u[1], 5 * u[6]},
					    {50 * u[2], 5 * u[7]},
					    {50 * u[3], 5 * u[8]},
					    {50 * u[4], 5 * u[9]},
					    8,
					    2,
					    (long)(20 * u[5])};
		struct plan_costs k;
		plan_costs_fit(&c, &k);
		for (int chunk = 0; chunk < 2; chunk++) {
			double a =
			    plan_predict_ms(&k, 8, 8, chunk, 6, &clamped);
			double b =
			    plan_predict_ms(&k, 44, 8, chunk, 0, &clamped);
			cr_assert(isfinite(a) && a >= PLAN_MIN_MS, "%d: %g", t,
				  a);
			cr_assert(isfinite(b) && b >= PLAN_MIN_MS, "%d: %g", t,
				  b);
		}
		double d = plan_chunk_twin_ms(&k, 0.01 + u[0], &clamped);
		cr_assert(isfinite(d) && d >= PLAN_MIN_MS, "%d: %g", t, d);
	}
	const struct plan_cals z = {{0, 0}, {0, 0}, {0, 0}, {0, 0},
				    {0, 0}, 4,	    1,	    1};
	struct plan_costs k;
	clamped = 0;
	plan_costs_fit(&z, &k);
	cr_assert_eq(plan_predict_ms(&k, 4, 4, 0, 0, &clamped), PLAN_MIN_MS);
	cr_assert_eq(clamped, 1);
}
