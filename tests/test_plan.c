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
 *      a count, layers < 3: exit 2, one line naming the key or flag.
 * The step times (work × price, plan_cost.h, plan_price.c) are
 * tests/test_plan_work.c's.
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
 * and plan takes it from a committed run (deq). */
Test(evals, closed_forms_match_a_step, .timeout = 120)
{
	const struct shape s = {2, 4, 8, 2, 16, 11};
	struct model *tc = open_model("cpu", MODEL_TANH_CELL, s, 1);
	struct model *tf = open_model("cpu", MODEL_TRANSFORMER, s, 1);
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
				check_counts(
				    method_kind_needs_selective(k) ? tf : tc,
				    c.method, what);
				closed++;
			}
		}
	}
	cr_assert_gt(closed, 0);
	cr_assert_gt(calibrated, 0);
	close_model(tc);
	close_model(tf);
}

/* ---------------------------------------------------- 2. plan --run */

static const char *const tiny[] = {
    "model=transformer", "d_model=16",	   "n_heads=2",	       "d_ff=32",
    "seq_len=8",	 "batch_size=4",   "corpus=synthetic", "vocab_size=40",
    "steps=3",		 "warmup_steps=1", "eval_tokens=64",   "threads=1"};
#define NTINY ((int)(sizeof(tiny) / sizeof(*tiny)))

/* The candidates the method registry lists for the base config of
 * predicted_peak_is_measured (tiny, layers=4). */
static int registry_candidates(int *micro)
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
		     i++) {
			n++; /* plan leaves method=managed out */
			/* unroll and checkpoint again at microbatches=2
			 * (batch_size=4 splits) */
			*micro += k == method_kind_parse("unroll") ||
				  k == method_kind_parse("checkpoint");
		}
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
	argv[n++] = "price_cap_s=0.5";
	argv[n++] = "--run";
	argv[n++] = "100";
	argv[n] = NULL;
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(path, sizeof(path), "p.jsonl");
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char line[1 << 16];
	int recs = 0, methods_seen[8] = {0}, micro = 0, micro_recs = 0;
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
		/* a micro-batched twin: the config says so, its peak is
		 * the allocator's (above) and it carries the label */
		if (json_integer_value(json_object_get(
			json_object_get(r, "config"), "microbatches")) == 2) {
			micro_recs++;
			cr_assert(strstr(cand, " mb2"), "%s", cand);
		}
		json_decref(r);
	}
	fclose(f);
	/* every candidate the registered methods list for this config
	 * (method_candidate), and unroll's and checkpoint's again with
	 * microbatches=2, each with and without head_chunk */
	int nc = registry_candidates(&micro);
	cr_assert_eq(recs, 2 * (nc + micro), "%d records", recs);
	cr_assert_eq(micro_recs, 2 * micro, "%d micro-batched", micro_recs);
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
