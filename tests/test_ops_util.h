/* test_ops_util.h — helpers shared by the op tests (test_ops.c) and the
 * CUDA tests (test_cuda.c): a seeded splitmix64 generator, backends by
 * name, a pool of device buffers freed together (with a check that nothing
 * else stayed allocated), normalised mean squared error, finiteness checks
 * and a naive double-precision GEMM reference. Header-only, static inline. */
#ifndef DQ_TEST_OPS_UTIL_H
#define DQ_TEST_OPS_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backend.h"

static uint64_t rng_state;

#define POOL_MAX 24

static inline double urand(void) /* splitmix64 -> [-1, 1) */
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	z ^= z >> 31;
	return (double)(z >> 11) * 0x1.0p-52 - 1.0;
}

static inline double *rnd(size_t n, double scale)
{
	double *p = malloc((n ? n : 1) * sizeof(double));
	cr_assert_not_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = scale * urand();
	return p;
}

static inline double *zeros(size_t n)
{
	double *p = calloc(n ? n : 1, sizeof(double));
	cr_assert_not_null(p);
	return p;
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

static inline double vdot(const double *a, const double *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
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

static inline void assert_finite(const double *a, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		cr_assert(isfinite(a[i]), "%s[%zu] = %g", what, i, a[i]);
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

#endif
