/* test_ops_util.h — helpers shared by the op tests (test_ops.c) and the
 * CUDA tests (test_cuda.c), on top of test_util.h: uniform draws in
 * [-1, 1) from its splitmix64 stream (rng_state starts at 0 here), backends
 * by name and thread count, a pool of device buffers freed together (with a
 * check that nothing else stayed allocated), normalised mean squared error,
 * double-precision references for dot/norm and GEMM. Header-only, static
 * inline. */
#ifndef DQ_TEST_OPS_UTIL_H
#define DQ_TEST_OPS_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef DQ_TEST_SEED
#define DQ_TEST_SEED 0
#endif
#include "test_util.h"

#define POOL_MAX 24

static inline double urand(void) /* splitmix64 -> [-1, 1) */
{
	return (double)(splitmix64(&rng_state) >> 11) * 0x1.0p-52 - 1.0;
}

static inline double *rnd(size_t n, double scale)
{
	double *p = malloc((n ? n : 1) * sizeof(double));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = scale * urand();
	return p;
}

/* n zeroed doubles on the host (test_util.h's host). */
static inline double *zeros(size_t n)
{
	return host(n);
}

static inline struct backend *make(const char *name, int threads)
{
	struct backend *be = NULL;
	char err[256] = "";
	cr_assert_eq(backend_create(&be, name, threads, err, sizeof(err)), 0,
		     "%s: %s", name, err);
	return be;
}

/* Device buffers of one test step, freed together. */
struct pool {
	struct backend *be;
	void *p[POOL_MAX];
	int n;
};

static inline void *pool_new(struct pool *pl, size_t n, double fill)
{
	cr_assert_lt(pl->n, POOL_MAX);
	void *p = backend_alloc(pl->be, n, MEM_WORKSPACE);
	cr_assert_not_null(p);
	pl->be->ops->fill(pl->be->ctx, p, fill, n);
	return pl->p[pl->n++] = p;
}

static inline void *pool_up(struct pool *pl, const double *h, size_t n)
{
	void *p = pool_new(pl, n, 0);
	pl->be->ops->upload(pl->be->ctx, p, h, n);
	return p;
}

static inline void *pool_ints(struct pool *pl, const int32_t *h, size_t n)
{
	cr_assert_lt(pl->n, POOL_MAX);
	void *p =
	    backend_alloc_bytes(pl->be, n * sizeof(int32_t), MEM_WORKSPACE);
	cr_assert_not_null(p);
	pl->be->ops->upload_bytes(pl->be->ctx, p, h, n * sizeof(int32_t));
	return pl->p[pl->n++] = p;
}

static inline void pool_down(struct pool *pl, double *h, const void *p,
			     size_t n)
{
	pl->be->ops->download(pl->be->ctx, h, p, n);
}

static inline void pool_free(struct pool *pl)
{
	for (int i = 0; i < pl->n; i++)
		backend_free(pl->be, pl->p[i]);
	cr_assert_eq(pl->be->mem.n_allocs, 0);
	pl->n = 0;
}

/* Σ a b over n elements (test_util.h's hdot). */
static inline double vdot(const double *a, const double *b, size_t n)
{
	return hdot(a, b, n);
}

/* The references for dot(x, y) and norm(x) over n elements, summed in
 * order in double: *dot = Σ x y, *abs_dot = Σ |x y| (the scale of dot's
 * rounding error), *norm = √Σ x². */
static inline void ref_dot_norm(const double *x, const double *y, size_t n,
				double *dot, double *abs_dot, double *norm)
{
	double rd = 0, rn = 0, ad = 0;
	for (size_t i = 0; i < n; i++) {
		rd += x[i] * y[i];
		ad += fabs(x[i] * y[i]);
		rn += x[i] * x[i];
	}
	*dot = rd;
	*abs_dot = ad;
	*norm = sqrt(rn);
}

static inline double nmse(const double *a, const double *ref, size_t n)
{
	double e = 0, r = 0;
	for (size_t i = 0; i < n; i++) {
		e += (a[i] - ref[i]) * (a[i] - ref[i]);
		r += ref[i] * ref[i];
	}
	return e / (r > 1e-300 ? r : 1e-300);
}

static inline void naive_gemm(double *Cm, int ldc, int ta, int tb, int M, int N,
			      int K, double alpha, const double *A, int lda,
			      const double *B, int ldb, double beta)
{
	for (int m = 0; m < M; m++)
		for (int n = 0; n < N; n++) {
			double s = 0;
			for (int k = 0; k < K; k++) {
				double a = ta ? A[k * lda + m] : A[m * lda + k];
				double b = tb ? B[n * ldb + k] : B[k * ldb + n];
				s += a * b;
			}
			Cm[m * ldc + n] = alpha * s + beta * Cm[m * ldc + n];
		}
}

/* The per-sample solver ops on backend be against double loops over the
 * values the device holds:
 *   dot_segments: nseg × len ∈ {1×5, 3×4099, 16×8192, 1000×7, 70000×3}
 *     (one and many segments, segments longer and shorter than a reduction
 *     block, more segments than one chunk of the CUDA scratch/grid holds
 *     at 70000), twice for determinism; |error| ≤ tol Σ|x y| (products are
 *     exact in double, sums in double: tol 1e-11 covers n ε on any path);
 *   gemm_batched: 3 batches of (M,N,K) = (2,5,7) and (1,33,300) with every
 *     transpose, padded leading dimensions and batch strides larger than a
 *     matrix, alpha 0.7 and beta -0.4 on a C outside which nothing may be
 *     written; relative error ≤ gtol of Σ|a b| (one float rounding per
 *     product and sum for the float backends). */
static inline void check_batched_ops(struct backend *be, double gtol)
{
	const struct backend_ops *o = be->ops;
	const size_t segs[][2] = {
	    {1, 5}, {3, 4099}, {16, 8192}, {1000, 7}, {70000, 3}};
	for (int i = 0; i < 5; i++) {
		size_t ns = segs[i][0], len = segs[i][1], n = ns * len;
		struct pool pl = {be, {0}, 0};
		double *x = rnd(n, 1), *y = rnd(n, 1);
		double *got = zeros(ns), *again = zeros(ns);
		void *dx = pool_up(&pl, x, n), *dy = pool_up(&pl, y, n);
		pool_down(&pl, x, dx, n);
		pool_down(&pl, y, dy, n);
		o->dot_segments(be->ctx, got, dx, dy, ns, len);
		o->dot_segments(be->ctx, again, dx, dy, ns, len);
		for (size_t s = 0; s < ns; s++) {
			double r = 0, a = 0;
			for (size_t j = s * len; j < (s + 1) * len; j++) {
				r += x[j] * y[j];
				a += fabs(x[j] * y[j]);
			}
			cr_assert(fabs(got[s] - r) <= 1e-11 * a || got[s] == r,
				  "dot_segments %zux%zu [%zu]: %.17g vs %.17g",
				  ns, len, s, got[s], r);
			cr_assert(got[s] == again[s], "not deterministic");
		}
		pool_free(&pl);
		free(x), free(y), free(got), free(again);
	}
	const int shp[2][3] = {{2, 5, 7}, {1, 33, 300}};
	for (int si = 0; si < 2; si++)
		for (int v = 0; v < 4; v++) {
			int M = shp[si][0], N = shp[si][1], K = shp[si][2];
			int ta = v & 1, tb = v >> 1, nb = 3;
			int lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1,
			    ldc = N + 3;
			size_t sA = (size_t)lda * (ta ? K : M) + 5,
			       sB = (size_t)ldb * (tb ? N : K) + 1,
			       sC = (size_t)ldc * M + 4;
			size_t na = sA * nb, nbb = sB * nb, nc = sC * nb;
			double *A = rnd(na, 1), *B = rnd(nbb, 1),
			       *C = rnd(nc, 1), *R = zeros(nc), *G = zeros(nc);
			struct pool pl = {be, {0}, 0};
			void *dA = pool_up(&pl, A, na),
			     *dB = pool_up(&pl, B, nbb),
			     *dC = pool_up(&pl, C, nc);
			pool_down(&pl, A, dA, na);
			pool_down(&pl, B, dB, nbb);
			pool_down(&pl, C, dC, nc);
			memcpy(R, C, nc * sizeof(double));
			for (int b = 0; b < nb; b++)
				naive_gemm(R + b * sC, ldc, ta, tb, M, N, K,
					   0.7, A + b * sA, lda, B + b * sB,
					   ldb, -0.4);
			o->gemm_batched(be->ctx, ta, tb, M, N, K, 0.7, dA, lda,
					sA, dB, ldb, sB, -0.4, dC, ldc, sC, nb);
			pool_down(&pl, G, dC, nc);
			for (size_t j = 0; j < nc; j++) {
				size_t b = j / sC, r = j % sC;
				int inside = (int)(r / (size_t)ldc) < M &&
					     (int)(r % (size_t)ldc) < N;
				if (!inside || b >= (size_t)nb) {
					cr_assert(G[j] == C[j],
						  "gemm_batched wrote outside "
						  "C at %zu",
						  j);
					continue;
				}
				cr_assert(fabs(G[j] - R[j]) <=
					      gtol * (K + 1.0) *
						  (fabs(R[j]) + 1.0),
					  "gemm_batched %dx%dx%d t%d%d [%zu]: "
					  "%.9g vs %.9g",
					  M, N, K, ta, tb, j, G[j], R[j]);
			}
			pool_free(&pl);
			free(A), free(B), free(C), free(R), free(G);
		}
}

#endif
