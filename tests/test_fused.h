/* test_fused.h — the fused layer ops of backend.h (bias_act_forward,
 * act_bias_backward, and layernorm_forward / layernorm_backward with their
 * residual terms) against the unfused ops they replace, on one backend:
 *   bias_act_forward(act, y, b)        vs bias_forward, act_forward;
 *   act_bias_backward(act, dx, dy, y, db)
 *                                      vs act_backward, bias_backward (and
 *                                      with db NULL, and dx aliasing dy);
 *   layernorm_forward(y, x, res, bias) vs axpy(x, 1, res), bias_forward,
 *                                      plain layernorm_forward (also with
 *                                      res only and bias only);
 *   layernorm_backward(dx, dres, dbias) vs plain layernorm_backward, copy,
 *                                      bias_backward.
 * The unfused ops are each checked against a naive reference and finite
 * differences in test_ops.c, so agreeing with them is correctness. On the
 * CPU the fused ops promise the same bits (cpu_layer.c); elsewhere (exact
 * 0) the outputs agree to tol relative to 1 + |reference|.
 * Shapes: (37, 70) (a column block of 64 and a ragged one of 6) and
 * (300, 130), past the CPU's parallel threshold. Header-only: included by
 * test_fused.c (cpu, cpu64) and test_cuda_ops.c (cuda). */
#ifndef DQ_TEST_FUSED_H
#define DQ_TEST_FUSED_H

#include <stdio.h>

#include "test_ops_util.h"

struct fused_cmp {
	struct backend *be;
	int exact;
	double tol;
	const char *what; /* the op and act, for messages */
};

/* Device arrays a and b of n elements: equal bits, or within tol. */
static inline void fused_same(const struct fused_cmp *k, const void *a,
			      const void *b, size_t n, const char *part)
{
	double *ha = zeros(n), *hb = zeros(n);
	be_download(k->be, ha, a, n);
	be_download(k->be, hb, b, n);
	for (size_t i = 0; i < n; i++) {
		int ok = k->exact ? ha[i] == hb[i]
				  : fabs(ha[i] - hb[i]) <=
					k->tol * (1 + fabs(hb[i]));
		cr_assert(ok, "%s %s[%zu]: fused %.9g vs unfused %.9g", k->what,
			  part, i, ha[i], hb[i]);
	}
	free(ha);
	free(hb);
}

static inline void check_fused_act(const struct fused_cmp *k, enum act_kind act,
				   int N, int C)
{
	struct backend *be = k->be;
	size_t n = (size_t)N * C;
	double *h_y = rnd(n, 2.0), *h_b = rnd((size_t)C, 1.0);
	double *h_dy = rnd(n, 1.0);
	struct pool pl = {be, {0}, 0};
	void *y = pool_up(&pl, h_y, n), *y2 = pool_up(&pl, h_y, n);
	void *b = pool_up(&pl, h_b, (size_t)C);
	be_bias_act_forward(be, act, y, b, N, C);
	be_bias_forward(be, y2, b, N, C);
	be_act_forward(be, act, y2, y2, n);
	fused_same(k, y, y2, n, "y");

	void *dy = pool_up(&pl, h_dy, n), *dx = pool_new(&pl, n, 7.0);
	void *dx2 = pool_new(&pl, n, 7.0), *dx3 = pool_up(&pl, h_dy, n);
	void *db = pool_new(&pl, (size_t)C, 0.5);
	void *db2 = pool_new(&pl, (size_t)C, 0.5);
	be_act_bias_backward(be, act, dx, dy, y, db, N, C);
	be_act_backward(be, act, dx2, dy, NULL, y, n);
	be_bias_backward(be, db2, dx2, N, C);
	fused_same(k, dx, dx2, n, "dx");
	fused_same(k, db, db2, (size_t)C, "db");
	/* in place (dx = dy), no bias gradient */
	be_act_bias_backward(be, act, dx3, dx3, y, NULL, N, C);
	fused_same(k, dx3, dx2, n, "dx in place, db NULL");
	pool_free(&pl);
	free(h_y), free(h_b), free(h_dy);
}

/* use_res / use_bias pick the residual terms of the forward. */
static inline void check_fused_ln(const struct fused_cmp *k, int N, int C,
				  int use_res, int use_bias)
{
	struct backend *be = k->be;
	size_t n = (size_t)N * C;
	double *h_x = rnd(n, 2.0), *h_r = rnd(n, 1.0), *h_dy = rnd(n, 1.0);
	double *h_p = rnd(3 * (size_t)C, 1.0); /* bias | w | b */
	struct pool pl = {be, {0}, 0};
	void *x = pool_up(&pl, h_x, n), *x2 = pool_up(&pl, h_x, n);
	void *res = pool_up(&pl, h_r, n), *p = pool_up(&pl, h_p, 3 * (size_t)C);
	void *bias = p, *w = dq_at(be, p, (size_t)C);
	void *b = dq_at(be, p, 2 * (size_t)C);
	void *y = pool_new(&pl, n, 0), *y2 = pool_new(&pl, n, 0);
	void *ms = pool_new(&pl, 4 * (size_t)N, 0); /* mean, rstd twice */
	void *m1 = ms, *r1 = dq_at(be, ms, (size_t)N);
	void *m2 = dq_at(be, ms, 2 * (size_t)N);
	void *r2 = dq_at(be, ms, 3 * (size_t)N);
	be->ops->math->layernorm_forward(be->ctx, y, m1, r1, x,
					 use_res ? res : NULL,
					 use_bias ? bias : NULL, w, b, N, C);
	if (use_res)
		be_axpy(be, x2, 1.0, res, n);
	if (use_bias)
		be_bias_forward(be, x2, bias, N, C);
	be_layernorm_forward(be, y2, m2, r2, x2, w, b, N, C);
	fused_same(k, x, x2, n, "x (the sum)");
	fused_same(k, y, y2, n, "y");
	fused_same(k, m1, m2, 2 * (size_t)N, "mean | rstd");

	void *dy = pool_up(&pl, h_dy, n), *dx = pool_new(&pl, n, 7.0);
	void *dx2 = pool_new(&pl, n, 7.0), *dres = pool_new(&pl, n, 7.0);
	void *g = pool_new(&pl, 6 * (size_t)C, 0.5); /* dbias dw db, twice */
	void *g2 = dq_at(be, g, 3 * (size_t)C);
	be->ops->math->layernorm_backward(
	    be->ctx, dx, dres, g, dq_at(be, g, (size_t)C),
	    dq_at(be, g, 2 * (size_t)C), dy, x, m1, r1, w, N, C);
	be_layernorm_backward(be, dx2, dq_at(be, g2, (size_t)C),
			      dq_at(be, g2, 2 * (size_t)C), dy, x, m1, r1, w, N,
			      C);
	be_bias_backward(be, g2, dx2, N, C);
	fused_same(k, dx, dx2, n, "dx");
	fused_same(k, dres, dx2, n, "dres");
	fused_same(k, g, g2, 3 * (size_t)C, "dbias | dw | db");
	pool_free(&pl);
	free(h_x), free(h_r), free(h_dy), free(h_p);
}

/* Every fused op of be (named name in messages) against its unfused ops,
 * at both shapes. */
static inline void check_fused_ops(struct backend *be, const char *name,
				   int exact, double tol)
{
	static const int shapes[][2] = {{37, 70}, {300, 130}};
	static const enum act_kind acts[] = {ACT_RELU, ACT_TANH, ACT_SIGMOID};
	static const char *names[] = {"relu", "gelu", "tanh", "sigmoid"};
	char what[96];
	for (int s = 0; s < 2; s++) {
		int N = shapes[s][0], C = shapes[s][1];
		for (int a = 0; a < 3; a++) {
			snprintf(what, sizeof(what), "%s %s (%d,%d)", name,
				 names[acts[a]], N, C);
			struct fused_cmp k = {be, exact, tol, what};
			check_fused_act(&k, acts[a], N, C);
		}
		for (int v = 1; v < 4; v++) {
			snprintf(what, sizeof(what),
				 "%s layernorm res=%d bias=%d (%d,%d)", name,
				 v & 1, v >> 1, N, C);
			struct fused_cmp k = {be, exact, tol, what};
			check_fused_ln(&k, N, C, v & 1, v >> 1);
		}
	}
}

#endif
