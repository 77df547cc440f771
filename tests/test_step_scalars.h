/* test_step_scalars.h — the ops that leave a training step's scalars on
 * the device (kernels/backend.h: sumsq, clip, adam) against references:
 * the sum of squares against a double-precision sum of the values, and
 * be_norm as its square root; clipping engaged / not engaged / off
 * against scale with the factor computed on the host, bit for bit; Adam
 * at step 3 with weight decay, its lr and bias corrections read from
 * device doubles, against the update computed in double on the host.
 * (xent_train's device loss: test_xent.c.) test_vec_ops.c runs it on cpu
 * and cpu64, test_cuda_vec_ops.c on the GPU. Header-only; include after
 * test_ops_util.h. */
#ifndef DQ_TEST_STEP_SCALARS_H
#define DQ_TEST_STEP_SCALARS_H

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

/* The device double at d. */
static inline double dev_double(struct backend *be, const double *d)
{
	double h;
	be_download_bytes(be, &h, d, sizeof(h));
	return h;
}

/* Buffers a and b (n elements) hold the same values, bit for bit. */
static inline void same_bits(struct backend *be, const void *a, const void *b,
			     size_t n, const char *what)
{
	double *ha = zeros(n), *hb = zeros(n);
	be_download(be, ha, a, n);
	be_download(be, hb, b, n);
	cr_assert_eq(memcmp(ha, hb, n * sizeof(double)), 0, "%s: %s differs",
		     be_name(be), what);
	free(ha), free(hb);
}

static inline void check_clip_dev(struct backend *be, size_t n)
{
	struct pool pl = {be, {0}, 0};
	double *d = pool_new(&pl, 8, 0); /* >= 3 doubles in any type */
	double *h = rnd(n, 1);
	void *x = pool_up(&pl, h, n), *a = pool_new(&pl, n, 0),
	     *b = pool_new(&pl, n, 0);
	double *hx = zeros(n), ref = 0, abs_ref = 0;
	be_download(be, hx, x, n);
	for (size_t i = 0; i < n; i++)
		ref += hx[i] * hx[i], abs_ref += hx[i] * hx[i];
	be_sumsq(be, d, x, n);
	double ss = dev_double(be, d), gn = be_norm(be, x, n);
	/* float squares are exact in double: only the sums' order differs */
	cr_assert(fabs(ss - ref) <= 1e-12 * abs_ref, "%s: Σx² %.17g vs %.17g",
		  be_name(be), ss, ref);
	cr_assert_eq(gn, sqrt(ss), "%s: norm is not sqrt(sumsq)", be_name(be));
	free(hx);
	const double clips[] = {0.5 * gn, 2 * gn, 0.0};
	for (int k = 0; k < 3; k++) {
		be_copy(be, a, x, n);
		be_copy(be, b, x, n);
		if (clips[k] > 0 && gn > clips[k])
			be_scale(be, a, clips[k] / gn, n);
		be_clip(be, b, n, d, clips[k]);
		same_bits(be, a, b, n, "clipped gradient");
	}
	pool_free(&pl);
	free(h);
}

/* Adam's update of one element in double: elementwise.h's formula. */
static inline void adam_ref(double *p, double g, double *m, double *v,
			    const double h[3], double b1, double b2, double eps,
			    double wd)
{
	*m = b1 * *m + (1 - b1) * g;
	*v = b2 * *v + (1 - b2) * g * g;
	*p -= h[0] * (*m / h[1] / (sqrt(*v / h[2]) + eps) + wd * *p);
}

static inline void check_adam_dev(struct backend *be, size_t n)
{
	struct pool pl = {be, {0}, 0};
	double *d = pool_new(&pl, 8, 0); /* >= 3 doubles in any type */
	double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01, hyper[3];
	dq_adam_hyper(hyper, 1e-2, b1, b2, 3);
	double *hp = rnd(n, 1), *hg = rnd(n, 1), *hm = rnd(n, 0.1),
	       *hv = rnd(n, 0.1), *got = zeros(n);
	for (size_t i = 0; i < n; i++)
		hv[i] = fabs(hv[i]);
	void *p = pool_up(&pl, hp, n), *g = pool_up(&pl, hg, n),
	     *m = pool_up(&pl, hm, n), *v = pool_up(&pl, hv, n);
	/* the backend type's values, then the reference from them */
	be_download(be, hp, p, n), be_download(be, hg, g, n);
	be_download(be, hm, m, n), be_download(be, hv, v, n);
	be_upload_bytes(be, d, hyper, sizeof(hyper));
	be_adam(be, p, g, m, v, n, d, b1, b2, eps, wd);
	be_download(be, got, p, n);
	/* a few roundings of the type (2^-24 float, 2^-53 double) of p and
	 * of the step, whose quotient m̂ / sqrt(v̂) can be large */
	double tol = be->elem == 4 ? 1e-6 : 1e-14, h[3];
	/* the constants as the backend type holds them (elementwise.h) */
	for (int k = 0; k < 3; k++)
		h[k] = be->elem == 4 ? (float)hyper[k] : hyper[k];
	if (be->elem == 4)
		b1 = (float)b1, b2 = (float)b2, eps = (float)eps,
		wd = (float)wd;
	for (size_t i = 0; i < n; i++) {
		double want = hp[i];
		adam_ref(&want, hg[i], &hm[i], &hv[i], h, b1, b2, eps, wd);
		double bound = tol * (fabs(want) + fabs(want - hp[i]));
		cr_assert(fabs(got[i] - want) <= bound,
			  "%s: adam p[%zu] %.9g vs %.9g", be_name(be), i,
			  got[i], want);
	}
	pool_free(&pl);
	free(hp), free(hg), free(hm), free(hv), free(got);
}

/* All of them on be at n elements (clipping, Adam). */
static inline void check_step_scalars(struct backend *be, size_t n)
{
	rng_state = 4242;
	check_clip_dev(be, n);
	check_adam_dev(be, n);
}

#endif
