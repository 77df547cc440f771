/* test_curve.c — eval_every and the record's quality.valid_curve
 * (results/SCHEMA.md §quality): the curve has points after steps N, 2N, ...
 * (those of the steps done), its last point's loss is the final
 * evaluation's when steps is a multiple of N, and the evaluations change
 * no training number (the trace's losses and gradient norms, the solver's
 * and work's figures equal those of the same run without eval_every) for
 * unroll, deq (the Jacobian regulariser drawn from the method's random
 * stream, the spectral radius at the final evaluation), and deq with
 * pretraining. curve_tokens: the curve averages over the first
 * curve_tokens of the valid split, the final evaluation over eval_tokens.
 * Bad values exit 2 with one line. Structure only: no value
 * of a trajectory is asserted, so the test holds on any BLAS core. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "test_bench_util.h"
#include "test_cli.h"

#define TINY_CURVE                                                             \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=4", "vocab_size=64", "eval_tokens=64", "threads=1",    \
	    "trace=true", "warmup_steps=1"

/* Whether key=value kv sets a key that one of extra (NULL-terminated)
 * sets too. */
static int overridden(const char *kv, const char *const *extra)
{
	size_t n = strcspn(kv, "=");
	for (int i = 0; extra[i]; i++)
		if (!strncmp(kv, extra[i], n + 1))
			return 1;
	return 0;
}

/* Runs the tiny config with up to 8 more keys (NULL-terminated; one the
 * tiny config sets replaces its value) into <cli_dir>/NAME.jsonl; returns
 * its record, checked against SCHEMA.md (strict) and ok. */
static json_t *run_rec(const char *name, const char *const *extra)
{
	static const char *const tiny[] = {TINY_CURVE, NULL};
	const char *args[40];
	char out[512], oa[600], err[4096], f[64];
	int n = 0;
	snprintf(f, sizeof(f), "%s.jsonl", name);
	cli_path(out, sizeof(out), f);
	snprintf(oa, sizeof(oa), "out=%s", out);
	args[n++] = "run";
	for (int i = 0; tiny[i]; i++)
		if (!overridden(tiny[i], extra))
			args[n++] = tiny[i];
	for (int i = 0; extra[i]; i++)
		args[n++] = extra[i];
	args[n++] = oa;
	args[n] = NULL;
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	char *text = cli_read(out, NULL);
	cr_assert_not_null(text);
	json_t *rec = json_loads(text, 0, NULL);
	free(text);
	cr_assert_not_null(rec);
	cr_assert_str_eq(json_string_value(at(rec, "status")), "ok");
	check_schema(rec);
	return rec;
}

/* The members of a and b at path are equal JSON. */
static void same_at(const json_t *a, const json_t *b, const char *path,
		    const char *what)
{
	const json_t *x = at(a, path), *y = at(b, path);
	char *sx = json_dumps(x, JSON_SORT_KEYS | JSON_ENCODE_ANY);
	char *sy = json_dumps(y, JSON_SORT_KEYS | JSON_ENCODE_ANY);
	cr_assert(json_equal((json_t *)x, (json_t *)y),
		  "%s: %s differs with eval_every: %.200s vs %.200s", what,
		  path, sx, sy);
	free(sx);
	free(sy);
}

/* The curve of rec: every, points at every, 2 every, ... up to steps, each
 * with tokens = valid_eval_tokens, ppl = exp(loss), train_s increasing;
 * the last point's loss is valid_loss when steps % every == 0. */
static void check_curve(const json_t *rec, int every, int steps)
{
	const json_t *c = at(rec, "quality.valid_curve"), *pts, *p;
	double prev_s = -1;
	long tokens = (long)num_at(rec, "quality.valid_eval_tokens");
	size_t i;
	cr_assert(json_is_object(c));
	cr_assert_eq(json_integer_value(json_object_get(c, "every")), every);
	cr_assert(json_number_value(json_object_get(c, "eval_s")) >= 0);
	pts = json_object_get(c, "points");
	cr_assert_eq(json_array_size(pts), (size_t)(steps / every));
	json_array_foreach(pts, i, p)
	{
		double l = num_at(p, "valid_loss"), s = num_at(p, "train_s");
		cr_assert_eq(json_integer_value(json_object_get(p, "step")),
			     (long)(i + 1) * every);
		cr_assert_eq((long)num_at(p, "tokens"), tokens);
		cr_assert(isfinite(l));
		cr_assert_float_eq(num_at(p, "valid_ppl"), exp(l),
				   1e-9 * exp(l));
		cr_assert(s >= prev_s, "train_s grows");
		prev_s = s;
	}
	cr_assert(prev_s <= num_at(rec, "timing.train_s") + 1e-9);
	if (steps % every == 0) {
		p = json_array_get(pts, json_array_size(pts) - 1);
		cr_assert_eq(num_at(p, "valid_loss"),
			     num_at(rec, "quality.valid_loss"),
			     "the last point is the final evaluation");
	}
}

/* Runs the config (key=value strings m, NULL-terminated, at most 6)
 * without and with eval_every=every; checks the curve and that the
 * training numbers are the same. */
static void check_method(const char *const *m, int every, int steps)
{
	const char *a[10], *b[10];
	char st[32], ev[32];
	int n = 0;
	snprintf(st, sizeof(st), "steps=%d", steps);
	snprintf(ev, sizeof(ev), "eval_every=%d", every);
	a[n] = b[n] = st;
	n++;
	for (int i = 0; m[i]; i++, n++)
		a[n] = b[n] = m[i];
	a[n] = NULL;
	b[n] = ev;
	b[n + 1] = NULL;
	json_t *r0 = run_rec("plain", a), *r1 = run_rec("curve", b);
	cr_assert(json_is_null(at(r0, "quality.valid_curve")));
	check_curve(r1, every, steps);
	static const char *const same[] = {"trace.loss",
					   "trace.grad_norm",
					   "trace.fwd_iters",
					   "trace.bwd_iters",
					   "trace.fwd_residual",
					   "trace.jac_loss",
					   "trace.last_fwd_residual_trace",
					   "solver",
					   "work",
					   "evals",
					   "health",
					   "quality.valid_loss",
					   "quality.test_loss",
					   "quality.valid_spectral_radius"};
	for (size_t i = 0; i < sizeof(same) / sizeof(*same); i++)
		same_at(r0, r1, same[i], m[0]);
	json_decref(r0);
	json_decref(r1);
}

Test(curve, unroll, .init = cli_setup, .fini = cli_teardown, .timeout = 120)
{
	check_method((const char *[]){"method=unroll", "layers=3", NULL}, 2, 8);
}

/* steps not a multiple of eval_every: points up to the last multiple */
Test(curve, unroll_partial, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	check_method((const char *[]){"method=unroll", "layers=2", NULL}, 3, 7);
}

Test(curve, deq_regulariser, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	check_method((const char *[]){"method=deq", "jac_loss_weight=0.5",
				      "jac_loss_freq=0.5",
				      "spectral_radius_iters=3", NULL},
		     2, 6);
}

Test(curve, deq_pretrain, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	check_method((const char *[]){"method=deq", "pretrain_steps=2",
				      "pretrain_layers=2", NULL},
		     1, 5);
}

/* curve_tokens=32 (one batch) under eval_tokens=128: each point is over
 * 32 tokens and equals the curve of the same run whose eval_tokens is 32
 * (the first batch of the split, the same parameters), while the final
 * evaluation covers 128 */
Test(curve, curve_tokens, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	const char *a[] = {
	    "method=unroll",   "layers=2",	  "steps=4", "eval_every=2",
	    "eval_tokens=128", "curve_tokens=32", NULL};
	const char *b[] = {"method=unroll", "layers=2",	      "steps=4",
			   "eval_every=2",  "eval_tokens=32", NULL};
	json_t *r0 = run_rec("short", a), *r1 = run_rec("small", b);
	const json_t *p0 = at(r0, "quality.valid_curve.points");
	const json_t *p1 = at(r1, "quality.valid_curve.points");
	cr_assert_eq(num_at(r0, "quality.valid_eval_tokens"), 128);
	cr_assert_eq(json_array_size(p0), 2);
	cr_assert_eq(json_array_size(p1), 2);
	for (size_t i = 0; i < 2; i++) {
		const json_t *x = json_array_get(p0, i);
		cr_assert_eq(num_at(x, "tokens"), 32);
		cr_assert_eq(num_at(x, "valid_loss"),
			     num_at(json_array_get(p1, i), "valid_loss"),
			     "point %zu: the first 32 valid tokens", i);
	}
	cr_assert_eq(json_integer_value(at(r0, "config.curve_tokens")), 32);
	json_decref(r0);
	json_decref(r1);
}

Test(curve, bad_values, .init = cli_setup, .fini = cli_teardown, .timeout = 60)
{
	char out[512], oa[600];
	cli_path(out, sizeof(out), "bad.jsonl");
	snprintf(oa, sizeof(oa), "out=%s", out);
	cli_write(out, "", 0);
	const char *neg[] = {"run", TINY_CURVE, "eval_every=-1", oa, NULL};
	expect_bad(neg, out, "eval_every");
	const char *txt[] = {"run", TINY_CURVE, "eval_every=two", oa, NULL};
	expect_bad(txt, out, "eval_every");
	const char *ct[] = {"run", TINY_CURVE, "curve_tokens=-1", oa, NULL};
	expect_bad(ct, out, "curve_tokens");
	const char *none[] = {"run",
			      "corpus=synthetic",
			      "steps=4",
			      "eval_every=2",
			      "eval_tokens=0",
			      oa,
			      NULL};
	expect_bad(none, out, "eval_tokens=0");
}
