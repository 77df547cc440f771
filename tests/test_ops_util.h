/* test_ops_util.h — helpers shared by the op tests (test_ops.c,
 * test_vec_ops.c) and the CUDA tests (test_cuda*.c), on top of test_util.h:
 * uniform draws in [-1, 1) from its splitmix64 stream (rng_state starts at 0
 * here), backends by name and thread count, a pool of device buffers freed
 * together (with a check that nothing else stayed allocated), normalised
 * mean squared error, double-precision references for dot/norm and GEMM.
 * Header-only, static inline. */
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

#include "../kernels/solve_ctl.h"

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
	be_fill(pl->be, p, fill, n);
	return pl->p[pl->n++] = p;
}

static inline void *pool_up(struct pool *pl, const double *h, size_t n)
{
	void *p = pool_new(pl, n, 0);
	be_upload(pl->be, p, h, n);
	return p;
}

static inline void *pool_ints(struct pool *pl, const int32_t *h, size_t n)
{
	cr_assert_lt(pl->n, POOL_MAX);
	void *p =
	    backend_alloc_bytes(pl->be, n * sizeof(int32_t), MEM_WORKSPACE);
	cr_assert_not_null(p);
	be_upload_bytes(pl->be, p, h, n * sizeof(int32_t));
	return pl->p[pl->n++] = p;
}

static inline void pool_down(struct pool *pl, double *h, const void *p,
			     size_t n)
{
	be_download(pl->be, h, p, n);
}

static inline void pool_free(struct pool *pl)
{
	for (int i = 0; i < pl->n; i++)
		backend_free(pl->be, pl->p[i]);
	cr_assert_eq(pl->be->mem.n_allocs, 0);
	pl->n = 0;
}

/* Σ a b over n elements (test_util.h's hdot). */
/* x · y on the backend in double, read back: be_dot_segments of one
 * segment into the backend's own scalars. */
static inline double dot_host(const struct backend *be, const void *x,
			      const void *y, size_t n)
{
	double r;
	be_dot_segments(be, be->scal, x, y, 1, n);
	be_download_bytes(be, &r, be->scal, sizeof(r));
	return r;
}

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
	const struct backend_math_ops *o = be->ops->math;
	const size_t segs[][2] = {
	    {1, 5}, {3, 4099}, {16, 8192}, {1000, 7}, {70000, 3}};
	for (int i = 0; i < 5; i++) {
		size_t ns = segs[i][0], len = segs[i][1], n = ns * len;
		struct pool pl = {be, {0}, 0};
		double *x = rnd(n, 1), *y = rnd(n, 1);
		double *got = zeros(ns), *again = zeros(ns);
		void *dx = pool_up(&pl, x, n), *dy = pool_up(&pl, y, n);
		double *dd =
		    backend_alloc_bytes(be, ns * sizeof(double), MEM_WORKSPACE);
		pool_down(&pl, x, dx, n);
		pool_down(&pl, y, dy, n);
		o->dot_segments(be->ctx, dd, dx, dy, ns, len);
		be_download_bytes(be, got, dd, ns * sizeof(double));
		o->dot_segments(be->ctx, dd, dx, dy, ns, len);
		be_download_bytes(be, again, dd, ns * sizeof(double));
		backend_free(be, dd);
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

/* ------------------------------------------- solver control (solve_ctl.h) */

/* n doubles of device memory (MEM_SOLVER), uploaded from h when h. */
static inline double *ctl_block(struct backend *be, const double *h, size_t n)
{
	double *d = backend_alloc_bytes(be, n * sizeof(double), MEM_SOLVER);
	cr_assert_not_null(d);
	if (h)
		be_upload_bytes(be, d, h, n * sizeof(double));
	return d;
}

/* The device block d against the host block h after the same decisions:
 * equal, or (GPU arithmetic may contract into FMAs) within 1e-14. */
static inline void ctl_same(struct backend *be, const double *h,
			    const double *d, size_t n, const char *what)
{
	double *g = zeros(n);
	be_download_bytes(be, g, d, n * sizeof(double));
	for (size_t i = 0; i < n; i++)
		cr_assert(g[i] == h[i] ||
			      fabs(g[i] - h[i]) <= 1e-14 * fabs(h[i]) ||
			      (isnan(g[i]) && isnan(h[i])),
			  "%s: entry %zu %.17g vs %.17g", what, i, g[i], h[i]);
	free(g);
}

/* residual_dots against the ops it stands for (copy, axpy -1, then
 * dot_segments of fx and of g) over ns segments of len: bit for bit,
 * into a separate g and in place (g = fx, done last: it overwrites fx). */
static inline void check_residual_dots(struct backend *be, size_t ns,
				       size_t len)
{
	const size_t n = ns * len;
	struct pool pl = {be, {0}, 0};
	double *f = rnd(n, 1), *x = rnd(n, 1), *want = zeros(n),
	       *got = zeros(n);
	double *sums = zeros(4 * ns);
	void *df = pool_up(&pl, f, n), *dx = pool_up(&pl, x, n);
	void *dw = pool_new(&pl, n, 0), *dg = pool_new(&pl, n, 0);
	double *ds = ctl_block(be, NULL, 4 * ns);
	be_copy(be, dw, df, n);
	be_axpy(be, dw, -1.0, dx, n);
	be_dot_segments(be, ds, df, df, ns, len);
	be_dot_segments(be, ds + ns, dw, dw, ns, len);
	pool_down(&pl, want, dw, n);
	for (int alias = 0; alias < 2; alias++) {
		void *g = alias ? df : dg;
		be_residual_dots(be, g, df, dx, ds + 2 * ns, ds + 3 * ns, ns,
				 len);
		pool_down(&pl, got, g, n);
		for (size_t i = 0; i < n; i++)
			cr_assert(got[i] == want[i],
				  "residual_dots (alias %d) g[%zu]: %.9g vs "
				  "%.9g",
				  alias, i, got[i], want[i]);
		be_download_bytes(be, sums, ds, 4 * ns * sizeof(double));
		for (size_t k = 0; k < 2 * ns; k++)
			cr_assert(sums[2 * ns + k] == sums[k],
				  "residual_dots (alias %d) %s[%zu]: %.17g vs "
				  "%.17g",
				  alias, k < ns ? "seg_f" : "seg_g", k % ns,
				  sums[2 * ns + k], sums[k]);
	}
	backend_free(be, ds);
	pool_free(&pl);
	free(f), free(x), free(want), free(got), free(sums);
}

/* sub against the ops it stands for, bit for bit over n elements (zeros
 * of both signs among them): a − b as copy and axpy −1, in place (dst =
 * a) too; −b as copy and scale −1. */
static inline void check_sub(struct backend *be, size_t n)
{
	struct pool pl = {be, {0}, 0};
	double *a = rnd(n, 1), *b = rnd(n, 1), *want = zeros(n),
	       *got = zeros(n);
	for (size_t i = 0; i < n; i += 7)
		b[i] = i % 2 ? -0.0 : 0.0, a[i] = i % 3 ? 0.0 : -0.0;
	void *da = pool_up(&pl, a, n), *db = pool_up(&pl, b, n);
	void *dw = pool_new(&pl, n, 0), *dd = pool_new(&pl, n, 0);
	for (int neg = 0; neg < 3; neg++) {
		be_copy(be, dw, neg == 1 ? db : da, n);
		if (neg == 1)
			be_scale(be, dw, -1.0, n);
		else
			be_axpy(be, dw, -1.0, db, n);
		void *d = neg == 2 ? da : dd; /* in place last */
		be_sub(be, d, neg == 1 ? NULL : da, db, n);
		pool_down(&pl, want, dw, n);
		pool_down(&pl, got, d, n);
		for (size_t i = 0; i < n; i++)
			cr_assert(memcmp(&got[i], &want[i], sizeof(double)) ==
				      0,
				  "sub (case %d) [%zu]: %g vs %g", neg, i,
				  got[i], want[i]);
	}
	pool_free(&pl);
	free(a), free(b), free(want), free(got);
}

/* The solver-control ops of be against the host code of solve_ctl.h and
 * double loops over the values the device holds:
 *   dot_segments_dev: the bits of dot_segments, into device memory;
 *   residual_dots and sub: the bits of the ops they stand for;
 *   copy_masked (with a source and with NULL) and scale_recip over S = 5
 *     samples of P = 3 segments: flagged samples only; 1/d in double, one
 *     rounding to the type, one product; 0 for d = 0 and d = inf;
 *   solve_check: 8 rounds of random per-segment norms (scope sample with
 *     stall, scope batch with protect and a NaN in round 5) on the device
 *     and on a host copy of the block: the same block after each;
 *   anderson_weights: a random Gram matrix and row: the same Gram
 *     matrix, and α within 4 roundings of the type. */
static inline void check_solve_ctl_vector_ops(struct backend *be)
{
	const struct backend_math_ops *o = be->ops->math;
	const size_t segs[][2] = {{1, 5}, {3, 4099}, {1000, 7}, {70000, 3}};
	for (int i = 0; i < 4; i++) {
		size_t ns = segs[i][0], len = segs[i][1], n = ns * len;
		check_residual_dots(be, ns, len);
		check_sub(be, n);
	}

	const int S = 5, P = 3;
	const size_t len = 7, n = (size_t)S * P * len;
	const double flag[5] = {1, 0, 1, 1, 0};
	/* sample 1's segments sum to exactly 0, sample 3's to inf */
	const double seg[15] = {0.5, 0.5,  -2, INFINITY, 3,  -1.5, -0.25, 7,
				1,   0.25, 4,  -0.25,	 -9, 2,	   1e-3};
	struct pool pl = {be, {0}, 0};
	double *src = rnd(n, 2), *dst0 = rnd(n, 2), *got = zeros(n);
	void *ds = pool_up(&pl, src, n), *dd = pool_up(&pl, dst0, n);
	pool_down(&pl, src, ds, n);
	pool_down(&pl, dst0, dd, n);
	double *dflag = ctl_block(be, flag, 5), *dseg = ctl_block(be, seg, 15);
	for (int z = 0; z < 2; z++) {
		o->copy_masked(be->ctx, dd, z ? NULL : ds, dflag, S, P, len);
		pool_down(&pl, got, dd, n);
		for (size_t i = 0; i < n; i++) {
			int k = (int)((i / len) % (size_t)S);
			double w = flag[k] == 0 ? dst0[i] : z ? 0 : src[i];
			cr_assert(got[i] == w, "copy_masked %s [%zu]: %g vs %g",
				  z ? "zero" : "copy", i, got[i], w);
		}
		be_upload(be, dd, dst0, n);
	}
	o->scale_recip(be->ctx, dd, ds, dseg, S, P, len);
	pool_down(&pl, got, dd, n);
	for (size_t i = 0; i < n; i++) {
		int k = (int)((i / len) % (size_t)S);
		double d = seg[k] + seg[S + k] + seg[2 * S + k];
		double r = d != 0 && isfinite(d) && isfinite(1 / d) ? 1 / d : 0;
		double w = r * src[i];
		if (be->elem == sizeof(float))
			w = (double)(float)((double)(float)r * src[i]);
		cr_assert(got[i] == w,
			  "scale_recip [%zu] sample %d: %.9g vs %.9g", i, k,
			  got[i], w);
	}
	backend_free(be, dflag);
	backend_free(be, dseg);
	pool_free(&pl);
	free(src), free(dst0), free(got);
}

/* solve_check and anderson_weights of check_solve_ctl_ops. */
static inline void check_solve_ctl_decisions(struct backend *be)
{
	const struct backend_math_ops *o = be->ops->math;
	const double ulp = be->elem == sizeof(float) ? 0x1p-23 : 0x1p-52;
	for (int cfg = 0; cfg < 2; cfg++) {
		struct dq_solve_ctl c = {.S = 4,
					 .P = 2,
					 .max_iter = 6,
					 .ring = 3,
					 .trace_cap = 4,
					 .m = 3,
					 .stop_rel = cfg,
					 .per_sample = !cfg,
					 .stall = cfg ? 0 : 3,
					 .tol = cfg ? 0.05 : 0.2,
					 .protect = cfg ? 50 : 0,
					 .stall_ratio = 1.3};
		dq_ctl_layout(&c);
		size_t tot = (size_t)c.total;
		double *h = zeros(tot);
		h[DQ_CTL_GO] = 1;
		h[DQ_CTL_RES] = h[DQ_CTL_ABS] = h[DQ_CTL_REL] = INFINITY;
		double *d = ctl_block(be, h, tot);
		struct dq_solve_ctl cd = c;
		c.st = h;
		cd.st = d;
		for (int round = 0; round < 8; round++) {
			double sc = pow(0.5, round);
			for (int i = 0; i < c.S * c.P; i++) {
				h[c.o_seg_g + i] = sc * sc * (urand() + 1.01);
				h[c.o_seg_f + i] = urand() + 2;
			}
			if (cfg && round == 5)
				h[c.o_seg_g + 3] = NAN;
			be->ops->core->upload_bytes(
			    be->ctx, d + c.o_seg_g, h + c.o_seg_g,
			    2 * (size_t)(c.S * c.P) * sizeof(double));
			dq_ctl_check(&c);
			o->solve_check(be->ctx, &cd);
			ctl_same(be, h, d, tot, "solve_check");
		}
		cr_assert(h[DQ_CTL_GO] == 0 && h[DQ_CTL_ITERS] <= 6);

		/* Anderson: Gram matrices, a row at slot 1, nact 3 */
		for (long i = 0; i < (long)c.S * c.m * c.m; i++)
			h[c.o_gram + i] = urand();
		for (int k = 0; k < c.S; k++)
			for (int i = 0; i < c.m; i++)
				h[c.o_gram + (long)k * 9 + i * 4] += 4;
		be_upload_bytes(be, d + c.o_gram, h + c.o_gram,
				(size_t)(c.S * c.m * c.m) * sizeof(double));
		struct pool ap = {be, {0}, 0};
		double *row = rnd((size_t)c.S * 3, 1), *al = zeros(12);
		void *drow = pool_up(&ap, row, 12);
		pool_down(&ap, row, drow, 12);
		double want[12];
		for (int k = 0; k < c.S; k++) {
			for (int j = 0; j < 3; j++)
				dq_ctl_gram_put(&c, k, 1, j, row[k * 3 + j]);
			const double *a = dq_ctl_anderson(&c, k, 3, 1e-4);
			for (int j = 0; j < 3; j++)
				want[k * 3 + j] = a[j];
		}
		o->anderson_weights(be->ctx, &cd, drow, drow, 1, 3, 1e-4);
		pool_down(&ap, al, drow, 12);
		for (int i = 0; i < 12; i++)
			cr_assert(fabs(al[i] - want[i]) <=
				      4 * ulp * (fabs(want[i]) + 1e-3),
				  "anderson_weights [%d]: %.17g vs %.17g", i,
				  al[i], want[i]);
		double *g = zeros(tot);
		be_download_bytes(be, g, d, tot * sizeof(double));
		for (long i = 0; i < (long)c.S * c.m * c.m; i++)
			cr_assert(g[c.o_gram + i] == h[c.o_gram + i],
				  "Gram entry %ld", i);
		free(g);
		backend_free(be, d);
		pool_free(&ap);
		free(row), free(al), free(h);
	}
}

static inline void check_solve_ctl_ops(struct backend *be)
{
	check_solve_ctl_vector_ops(be);
	check_solve_ctl_decisions(be);
}

#endif
