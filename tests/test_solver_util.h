/* test_solver_util.h — what test_solvers.c and test_solvers_fused.c share:
 * a block-diagonal contraction in the solver layout (S samples of P
 * segments), default solver parameters and one solve through a fresh
 * solver. Include after test_util.h's dependencies (criterion, solvers.h). */
#ifndef DQ_TEST_SOLVER_UTIL_H
#define DQ_TEST_SOLVER_UTIL_H

#include "methods/solvers.h"
#include "test_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- a block-diagonal map */

/* F(x)_s = tanh(A_s x_s + b_s) for sample s's P·len elements, gathered
 * from the solver layout (segment p of sample s at (p S + s) len). Each
 * A_s has spectral norm below ~0.8, so every problem is a contraction
 * with its own rate and fixed point. */
struct diag_map {
	struct backend *be;
	int S, P, len, d; /* d = P len */
	double *A, *b;	  /* (S, d, d), (S, d) */
	double *xh, *yh;  /* host staging (S P len) */
	int only;	  /* >= 0: apply only sample `only` (S = 1 layout) */
};

static inline void diag_init(struct diag_map *m, struct backend *be, int S,
			     int P, int len, uint64_t seed)
{
	m->be = be;
	m->S = S;
	m->P = P;
	m->len = len;
	m->d = P * len;
	m->only = -1;
	size_t d = (size_t)m->d;
	m->A = host((size_t)S * d * d);
	m->b = host((size_t)S * d);
	m->xh = host((size_t)S * d);
	m->yh = host((size_t)S * d);
	rng_state = seed;
	for (int s = 0; s < S; s++) {
		/* rates differ by sample: 0.3 .. 0.8 of 1/sqrt(d) scaling */
		double g =
		    (0.3 + 0.5 * s / (S > 1 ? S - 1 : 1)) / sqrt((double)d);
		for (size_t i = 0; i < d * d; i++)
			m->A[(size_t)s * d * d + i] =
			    g * (2 * rnd_u01() - 1) * 0.8;
		for (size_t i = 0; i < d; i++)
			m->b[(size_t)s * d + i] = 2 * rnd_u01() - 1;
	}
}

static inline void diag_free(struct diag_map *m)
{
	free(m->A);
	free(m->b);
	free(m->xh);
	free(m->yh);
}

/* y = tanh(A_s x + b_s) on contiguous d-vectors. */
static inline void diag_one(const struct diag_map *m, int s, double *y,
			    const double *x)
{
	size_t d = (size_t)m->d;
	for (size_t i = 0; i < d; i++) {
		double v = m->b[(size_t)s * d + i];
		for (size_t j = 0; j < d; j++)
			v += m->A[((size_t)s * d + i) * d + j] * x[j];
		y[i] = tanh(v);
	}
}

static inline void diag_apply(void *ctx, void *out, const void *in)
{
	struct diag_map *m = ctx;
	size_t d = (size_t)m->d, len = (size_t)m->len;
	if (m->only >= 0) { /* one sample, contiguous */
		down(m->be, m->xh, in, d);
		diag_one(m, m->only, m->yh, m->xh);
		up(m->be, out, m->yh, d);
		return;
	}
	size_t n = (size_t)m->S * d;
	double *x = host(d), *y = host(d);
	down(m->be, m->xh, in, n);
	for (int s = 0; s < m->S; s++) {
		for (int p = 0; p < m->P; p++)
			memcpy(x + p * len,
			       m->xh + ((size_t)p * m->S + s) * len,
			       len * sizeof(double));
		diag_one(m, s, y, x);
		for (int p = 0; p < m->P; p++)
			memcpy(m->yh + ((size_t)p * m->S + s) * len,
			       y + p * len, len * sizeof(double));
	}
	up(m->be, out, m->yh, n);
	free(x);
	free(y);
}

static inline struct solver_params params(enum solver_kind k, int S, int P,
					  enum stop_scope scope)
{
	struct solver_params p = {.kind = k,
				  .tol = 1e-10,
				  .max_iter = 80,
				  .stop = STOP_ABS,
				  .history = 80,
				  .anderson_m = 5,
				  .lambda = 1e-10,
				  .beta = 1.0,
				  .samples = S,
				  .parts = P,
				  .scope = scope};
	return p;
}

/* One solve with p through a fresh solver: the iterate (n doubles), the
 * stats, the trace and the host reads. */
struct solve_rec {
	struct solve_stats st;
	double trace[METHOD_TRACE_MAX];
	int trace_len;
	long reads;
};

static inline void solve_rec(struct backend *be, size_t n,
			     struct solver_params p, struct fp_map *F,
			     double *x, struct solve_rec *r)
{
	struct solver *s;
	char err[256];
	memset(r, 0, sizeof(*r));
	cr_assert_eq(solver_create(&s, be, n, &p, 1, err, sizeof(err)), 0, "%s",
		     err);
	const void *res =
	    solver_solve(s, &p, F, &r->st, r->trace, &r->trace_len, &r->reads);
	down(be, x, res, n);
	solver_destroy(s);
}

/* One solve; the solution downloaded into x (n doubles). */
static inline struct solve_stats solve_into(struct backend *be, size_t n,
					    struct solver_params p,
					    struct fp_map *F, double *x)
{
	struct solve_rec r;
	solve_rec(be, n, p, F, x, &r);
	return r.st;
}

#endif
