/* test_step_scalars.h — the ops that leave a training step's scalars on
 * the device (kernels/backend.h: xent_train_dev, sumsq_dev, clip_dev,
 * adam_dev) against their host-returning twins on the same backend, bit
 * for bit: the loss and dlogits of xent_train, norm as the square root of
 * the sum of squares, clipping engaged / not engaged / off as the runner's
 * norm-and-scale, Adam at step 3 with weight decay. test_vec_ops.c runs it
 * on cpu and cpu64, test_cuda_vec_ops.c on the GPU. Header-only; include
 * after test_ops_util.h. */
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

static inline void check_xent_dev(struct backend *be)
{
	int N = 7, V = 11;
	int32_t tg[7] = {0, 10, 3, 3, 9, 1, 5};
	struct pool pl = {be, {0}, 0};
	double *d = pool_new(&pl, 8, 0); /* >= 3 doubles in any type */
	double *h = rnd((size_t)N * V, 3);
	void *lg = pool_up(&pl, h, (size_t)N * V), *a = pool_new(&pl, N * V, 7),
	     *b = pool_new(&pl, N * V, -7);
	const int32_t *t = pool_ints(&pl, tg, N);
	double loss = be_xent_train(be, a, lg, t, N, V, 1.0 / N);
	be_xent_train_dev(be, b, lg, t, N, V, 1.0 / N, d);
	double ld = dev_double(be, d);
	cr_assert_eq(memcmp(&loss, &ld, sizeof(loss)), 0,
		     "%s: loss %.17g vs %.17g", be_name(be), ld, loss);
	same_bits(be, a, b, (size_t)N * V, "dlogits");
	pool_free(&pl);
	free(h);
}

static inline void check_clip_dev(struct backend *be, size_t n)
{
	struct pool pl = {be, {0}, 0};
	double *d = pool_new(&pl, 8, 0); /* >= 3 doubles in any type */
	double *h = rnd(n, 1);
	void *x = pool_up(&pl, h, n), *a = pool_new(&pl, n, 0),
	     *b = pool_new(&pl, n, 0);
	double gn = be_norm(be, x, n);
	be_sumsq_dev(be, d, x, n);
	double s = sqrt(dev_double(be, d));
	cr_assert_eq(memcmp(&s, &gn, sizeof(s)), 0, "%s: norm %.17g vs %.17g",
		     be_name(be), s, gn);
	const double clips[] = {0.5 * gn, 2 * gn, 0.0};
	for (int k = 0; k < 3; k++) {
		be_copy(be, a, x, n);
		be_copy(be, b, x, n);
		if (clips[k] > 0 && gn > clips[k])
			be_scale(be, a, clips[k] / gn, n);
		be_clip_dev(be, b, n, d, clips[k]);
		same_bits(be, a, b, n, "clipped gradient");
	}
	pool_free(&pl);
	free(h);
}

static inline void check_adam_dev(struct backend *be, size_t n)
{
	struct pool pl = {be, {0}, 0};
	double *d = pool_new(&pl, 8, 0); /* >= 3 doubles in any type */
	double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01;
	int t = 3;
	double hyper[3] = {lr, 1.0 - pow(b1, t), 1.0 - pow(b2, t)};
	double *hp = rnd(n, 1), *hg = rnd(n, 1), *hm = rnd(n, 0.1),
	       *hv = rnd(n, 0.1);
	for (size_t i = 0; i < n; i++)
		hv[i] = fabs(hv[i]);
	void *buf[2][4];
	for (int j = 0; j < 2; j++) {
		buf[j][0] = pool_up(&pl, hp, n),
		buf[j][1] = pool_up(&pl, hg, n);
		buf[j][2] = pool_up(&pl, hm, n),
		buf[j][3] = pool_up(&pl, hv, n);
	}
	be_adam(be, buf[0][0], buf[0][1], buf[0][2], buf[0][3], n, lr, b1, b2,
		eps, wd, t);
	be_upload_bytes(be, d, hyper, sizeof(hyper));
	be_adam_dev(be, buf[1][0], buf[1][1], buf[1][2], buf[1][3], n, d, b1,
		    b2, eps, wd);
	same_bits(be, buf[0][0], buf[1][0], n, "adam p");
	same_bits(be, buf[0][2], buf[1][2], n, "adam m");
	same_bits(be, buf[0][3], buf[1][3], n, "adam v");
	pool_free(&pl);
	free(hp), free(hg), free(hm), free(hv);
}

/* All of them on be at n elements (clipping, Adam). */
static inline void check_step_scalars(struct backend *be, size_t n)
{
	rng_state = 4242;
	check_xent_dev(be);
	check_clip_dev(be, n);
	check_adam_dev(be, n);
}

#endif
