/* test_rate.c — timing.step_gflop and timing.gflops (results/SCHEMA.md
 * §timing) of tiny in-process runs: the FLOPs of a step are computed here
 * from the config alone, by the documented formula with each model's
 * shapes written out (not by run_step_flops or model_block_flops), and
 * the rate must be the count over the median step time. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "runner.h"

enum { TB = 4, TT = 8, TD = 16, TF = 24, TV = 50, TL = 3 };

/* A tiny synthetic config of model kind and method; steps and warmup. */
static void tiny(struct bench_config *c, const char *kind, const char *method,
		 int steps, int warmup)
{
	char err[512], kv[64];
	const char *fixed[] = {"corpus=synthetic", "n_heads=2", "lr_warmup=2",
			       "eval_tokens=0",	   "threads=1", NULL};
	config_defaults(c);
	for (int i = 0; fixed[i]; i++)
		cr_assert_eq(config_set_arg(c, fixed[i], err, sizeof(err)), 0,
			     "%s", err);
	const struct {
		const char *key;
		int v;
	} ints[] = {{"d_model", TD},	{"d_ff", TF},
		    {"seq_len", TT},	{"batch_size", TB},
		    {"vocab_size", TV}, {"layers", TL},
		    {"steps", steps},	{"warmup_steps", warmup}};
	for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
		snprintf(kv, sizeof(kv), "%s=%d", ints[i].key, ints[i].v);
		cr_assert_eq(config_set_arg(c, kv, err, sizeof(err)), 0, "%s",
			     err);
	}
	cr_assert_eq(config_set(c, "model", kind, err, sizeof(err)), 0);
	cr_assert_eq(config_set(c, "method", method, err, sizeof(err)), 0);
	cr_assert_eq(config_finish(c, err, sizeof(err)), 0, "%s", err);
}

static json_t *run(const struct bench_config *c)
{
	json_t *r = NULL;
	struct run_meta meta = {.quiet = 1};
	cr_assert_eq(runner_run(c, &meta, &r), RUN_OK, "%s",
		     json_string_value(json_object_get(r, "message")));
	return r;
}

static double num(const json_t *r, const char *sec, const char *key)
{
	const json_t *v = json_object_get(json_object_get(r, sec), key);
	cr_assert(json_is_number(v), "%s.%s not a number", sec, key);
	return json_number_value(v);
}

/* Forward FLOPs of one block, head input width E, injection width U and
 * injection kernel k of the tiny config's kind, from models/model.h's
 * letters (2 per multiply-add). */
static double block_f(const char *kind, double *E, double *U, double *k)
{
	double N = TB * TT, d = TD;
	*E = d;
	*k = 1;
	if (!strcmp(kind, "transformer")) {
		*U = 3 * d; /* qkv, out, ff1, ff2 and q kᵀ, att v */
		return 2 * N * (3 * d * d + d * d + 2 * d * TF) +
		       2 * 2 * (double)TB * TT * TT * d;
	}
	if (!strcmp(kind, "tanh_cell")) {
		*U = d;
		return 2 * N * d * d;
	}
	/* trellisnet: h = d_model, 4 gates x 2 taps of (N,h,h) */
	*U = 4 * d;
	*k = 2;
	return 2 * N * 8 * d * d;
}

/* The record's gflops is its step_gflop over the median step. */
static void check_rate(const json_t *r)
{
	double gf = num(r, "timing", "step_gflop");
	double med = json_number_value(json_object_get(
	    json_object_get(json_object_get(r, "timing"), "step_ms"),
	    "median"));
	cr_assert_gt(med, 0);
	double want = gf / (med / 1000);
	cr_assert_float_eq(num(r, "timing", "gflops"), want, 1e-9 * want,
			   "gflops %.9g, step_gflop / median s %.9g",
			   num(r, "timing", "gflops"), want);
}

/* unroll: L forward evaluations and L VJPs, so the whole count follows
 * from the config: 3 L F + 3·2·N·E·V + 3·2·N·E·U·k. */
Test(rate, unroll_step_gflop_from_config, .timeout = 120)
{
	const char *kinds[] = {"transformer", "tanh_cell", "trellisnet"};
	for (int i = 0; i < 3; i++) {
		struct bench_config c;
		double E, U, k, N = TB * TT;
		tiny(&c, kinds[i], "unroll", 4, 1);
		json_t *r = run(&c);
		double F = block_f(kinds[i], &E, &U, &k);
		double want =
		    (3.0 * TL * F + 6 * N * E * TV + 6 * N * E * U * k) / 1e9;
		cr_assert_eq(num(r, "evals", "forward_evals_per_step"), TL);
		cr_assert_eq(num(r, "evals", "vjp_evals_per_step"), TL);
		cr_assert_eq(num(r, "model", "block_flops"), F, "%s", kinds[i]);
		cr_assert_float_eq(num(r, "timing", "step_gflop"), want,
				   1e-12 * want,
				   "%s: step_gflop %.12g, want %.12g", kinds[i],
				   num(r, "timing", "step_gflop"), want);
		check_rate(r);
		json_decref(r);
	}
}

/* deq: the count follows the record's own (fractional) evals per step. */
Test(rate, deq_step_gflop_from_evals, .timeout = 120)
{
	struct bench_config c;
	double E, U, k, N = TB * TT;
	tiny(&c, "transformer", "deq", 4, 1);
	json_t *r = run(&c);
	double F = block_f("transformer", &E, &U, &k);
	double fe = num(r, "evals", "forward_evals_per_step");
	double ve = num(r, "evals", "vjp_evals_per_step");
	double want =
	    (fe * F + 2 * ve * F + 6 * N * E * TV + 6 * N * E * U) / 1e9;
	cr_assert_gt(fe, 1);
	cr_assert_float_eq(num(r, "timing", "step_gflop"), want, 1e-12 * want);
	check_rate(r);
	json_decref(r);
}
