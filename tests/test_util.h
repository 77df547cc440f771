/* test_util.h — helpers shared by the Criterion tests: a seeded
 * splitmix64 generator (uniform and normal draws), backend creation, and
 * host/device buffers in double precision (upload/download convert to the
 * backend's element type). Header-only, static inline, so each test
 * executable takes only what it uses. */
#ifndef DQ_TEST_UTIL_H
#define DQ_TEST_UTIL_H

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels/backend.h"
#include "kernels/rng.h"

/* A test file may pick another starting state by defining DQ_TEST_SEED
 * before including this header. */
#ifndef DQ_TEST_SEED
#define DQ_TEST_SEED 1
#endif
static uint64_t rng_state = DQ_TEST_SEED;

/* Uniform in (0, 1], from splitmix64 (kernels/rng.h). */
static inline double rnd_u01(void)
{
	return splitmix64_u01(&rng_state);
}

/* Standard normal (Box–Muller). */
static inline double rnd_normal(void)
{
	return sqrt(-2.0 * log(rnd_u01())) * cos(2.0 * M_PI * rnd_u01());
}

/* x[0..n) ~ N(0, std²). */
static inline void rnd_fill(double *x, size_t n, double std)
{
	for (size_t i = 0; i < n; i++)
		x[i] = std * rnd_normal();
}

/* Backend by name ("cpu", "cpu64", "cuda"); fails the test on error. */
static inline struct backend *make_be(const char *name)
{
	struct backend *be = NULL;
	char err[256] = "";
	cr_assert_eq(backend_create(&be, name, 1, err, sizeof(err)), 0,
		     "backend_create(%s): %s", name, err);
	return be;
}

/* n zeroed doubles on the host. */
/* MEM_SOLVER bytes by methods/solvers.h's formula: x elements of e
 * bytes (the vectors, rounded up to 8 bytes), then the control block of
 * doubles for S samples of P segments, a residual ring of W and Anderson
 * history m (0: not Anderson). */
static inline size_t solver_mem(size_t e, size_t x, size_t S, size_t P,
				size_t W, size_t m)
{
	size_t ctl = 16 + 256 + 1 + W + 3 * S * P + 5 * S;
	if (m)
		ctl += S * m * m + S * ((m + 1) * (m + 1) + m + 1);
	return (e * x + 7) / 8 * 8 + 8 * ctl;
}

static inline double *host(size_t n)
{
	double *p = calloc(n ? n : 1, sizeof(double));
	cr_assert_not_null(p);
	return p;
}

/* n elements of the backend's type, tagged MEM_DEPTH. */
static inline void *dev(struct backend *be, size_t n)
{
	void *p = backend_alloc(be, n, MEM_DEPTH);
	cr_assert_not_null(p);
	return p;
}

static inline void up(struct backend *be, void *d, const double *h, size_t n)
{
	be_upload(be, d, h, n);
}

static inline void down(struct backend *be, double *h, const void *d, size_t n)
{
	be_download(be, h, d, n);
}

static inline double hdot(const double *a, const double *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += a[i] * b[i];
	return s;
}

/* max |a − b| / max |b| over n elements (max |a − b| when b is 0). */
static inline double rel_max_err(const double *a, const double *b, size_t n)
{
	double e = 0, s = 0;
	for (size_t i = 0; i < n; i++) {
		e = fmax(e, fabs(a[i] - b[i]));
		s = fmax(s, fabs(b[i]));
	}
	return s > 0 ? e / s : e;
}

static inline void assert_finite(const double *x, size_t n, const char *what)
{
	for (size_t i = 0; i < n; i++)
		cr_assert(isfinite(x[i]), "%s[%zu] = %g", what, i, x[i]);
}

#endif
