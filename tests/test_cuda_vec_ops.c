/*
 * test_cuda_vec_ops.c — the ops of the CUDA backend that are not layers
 * (test_cuda_ops.c has those), in suite `cuda`; skipped without a GPU or a
 * CUDA build (test_cuda_util.h): Adam against its formula; dot/norm/axpy/
 * scale up to 3·10⁶ elements (multi-block reductions), NaN/inf
 * propagation; the batched solver ops and the solve-control decisions;
 * transfers larger than the staging buffer; fill/copy; zero_rows and
 * transpose bit for bit; bitwise determinism of every op but the embedding
 * scatter; the step's scalars on the device against references
 * (test_step_scalars.h). Tolerances are justified where they are used.
 */
#include "test_cuda_util.h"
#include "test_fused_ops.h"
#include "test_ops_util.h"
#include "test_move_ops.h"
#include "test_step_scalars.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adam against its formula in double from the float values the device
 * holds; two steps (t = 1, 2), with and without weight decay. Tolerance as
 * test_vec_ops.c's float case: |p - ref| ≤ 1e-6 for |p| ≤ 1 and lr = 1e-2. */
Test(cuda_ops, adam)
{
	struct backend *be = cuda_or_skip();
	size_t n = 100003;
	for (int cfg = 0; cfg < 2; cfg++) {
		double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8;
		double wd = cfg ? 0.01 : 0;
		rng_state = 900 + cfg;
		double *p = rnd(n, 1), *g = rnd(n, 1), *m = rnd(n, 0.1),
		       *v = rnd(n, 0.1);
		for (size_t i = 0; i < n; i++)
			v[i] = fabs(v[i]);
		struct pool pl = {be, {0}, 0};
		void *dp = pool_up(&pl, p, n), *dg = pool_up(&pl, g, n),
		     *dm = pool_up(&pl, m, n), *dv = pool_up(&pl, v, n);
		be_download(be, p, dp, n);
		be_download(be, g, dg, n);
		be_download(be, m, dm, n);
		be_download(be, v, dv, n);
		for (int t = 1; t <= 2; t++) {
			be_adam_host(be, dp, dg, dm, dv, n, lr, b1, b2, eps, wd,
				     t);
			for (size_t i = 0; i < n; i++) {
				m[i] = b1 * m[i] + (1 - b1) * g[i];
				v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
				double mh = m[i] / (1 - pow(b1, t));
				double vh = v[i] / (1 - pow(b2, t));
				p[i] -=
				    lr * (mh / (sqrt(vh) + eps) + wd * p[i]);
			}
		}
		double *gp = zeros(n), *gm = zeros(n), *gv = zeros(n);
		be_download(be, gp, dp, n);
		be_download(be, gm, dm, n);
		be_download(be, gv, dv, n);
		for (size_t i = 0; i < n; i++)
			cr_assert(fabs(gp[i] - p[i]) <= 1e-6 &&
				      fabs(gm[i] - m[i]) <= 1e-6 &&
				      fabs(gv[i] - v[i]) <= 1e-6,
				  "adam[%zu] p %.9g vs %.9g, m %.9g vs %.9g, "
				  "v %.9g vs %.9g",
				  i, gp[i], p[i], gm[i], m[i], gv[i], v[i]);
		pool_free(&pl);
		free(p), free(g), free(m), free(v), free(gp), free(gm),
		    free(gv);
	}
	backend_destroy(be);
}

Test(cuda_ops, step_scalars, .timeout = 120)
{
	struct backend *be = cuda_or_skip();
	check_step_scalars(be, 5);
	check_step_scalars(be, 3000017);
	backend_destroy(be);
}

/* dot / norm / axpy / scale at n = 0, 5, 100003 and 3000017 (more
 * elements than one grid pass covers, many blocks in the reduction).
 * Products of floats are exact in double and summed in double: |error| ≤
 * n ε Σ|x y| in the worst case, ~√n ε Σ|x y| ≈ 4e-13 Σ|x y| in practice;
 * 1e-11 sits between. axpy/scale: one float rounding. */
Test(cuda_ops, vector_ops, .timeout = 120)
{
	struct backend *be = cuda_or_skip();
	const size_t ns[] = {0, 5, 100003, 3000017};
	for (int ni = 0; ni < 4; ni++) {
		size_t n = ns[ni];
		rng_state = 1000 + ni;
		double *x = rnd(n, 1), *y = rnd(n, 1);
		struct pool pl = {be, {0}, 0};
		void *dx = pool_up(&pl, x, n), *dy = pool_up(&pl, y, n);
		be_download(be, x, dx, n);
		be_download(be, y, dy, n);
		double d = dot_host(be, dx, dy, n);
		double nr = be_norm(be, dx, n);
		double d2 = dot_host(be, dx, dy, n);
		cr_assert(d == d2 || (isnan(d) && isnan(d2)),
			  "dot not deterministic: %.17g vs %.17g", d, d2);
		double rd, ad, rn;
		ref_dot_norm(x, y, n, &rd, &ad, &rn);
		cr_assert(fabs(d - rd) <= 1e-11 * ad || d == rd,
			  "n=%zu dot %.17g vs %.17g", n, d, rd);
		cr_assert(fabs(nr - rn) <= 1e-11 * rn || nr == rn,
			  "n=%zu norm %.17g vs %.17g", n, nr, rn);
		be_axpy(be, dy, -0.75, dx, n);
		be_scale(be, dx, 1.5, n);
		double *gx = zeros(n), *gy = zeros(n);
		be_download(be, gx, dx, n);
		be_download(be, gy, dy, n);
		for (size_t i = 0; i < n; i++) {
			double ry = y[i] - 0.75 * x[i];
			cr_assert(fabs(gy[i] - ry) <=
				      2.4e-7 * (fabs(y[i]) + fabs(x[i])),
				  "axpy[%zu] %.9g vs %.9g", i, gy[i], ry);
			cr_assert(fabs(gx[i] - 1.5 * x[i]) <=
				      1.2e-7 * 1.5 * fabs(x[i]),
				  "scale[%zu]", i);
		}
		if (n > 5) {
			double bad[2] = {NAN, INFINITY};
			be_upload(be, dq_at(be, dx, n - 3), &bad[0], 1);
			cr_assert(isnan(be_norm(be, dx, n)));
			cr_assert(isnan(dot_host(be, dx, dy, n)));
			be_upload(be, dq_at(be, dx, n - 3), &bad[1], 1);
			cr_assert(isinf(be_norm(be, dx, n)));
		}
		pool_free(&pl);
		free(x), free(y), free(gx), free(gy);
	}
	backend_destroy(be);
}

/* dot_segments (two kernels, chunked past the scratch) and gemm_batched
 * (cublasSgemmStridedBatched) against double loops: test_ops_util.h. */
Test(cuda_ops, batched_solver_ops, .timeout = 120)
{
	struct backend *be = cuda_or_skip();
	rng_state = 4242;
	check_batched_ops(be, 1.2e-7);
	backend_destroy(be);
}

/* The solvers' decisions on the device (cuda_solve.cu, dot_segments_dev)
 * against solve_ctl.h's host code: test_ops_util.h. */
Test(cuda_ops, solve_ctl_ops, .timeout = 120)
{
	struct backend *be = cuda_or_skip();
	rng_state = 99;
	check_solve_ctl_ops(be);
	backend_destroy(be);
}

/* The fused Broyden and Anderson iterations' kernels (cuda_fused_solve.cu)
 * against their formulas in double (test_fused_ops.h): two chunks a segment, the
 * last block's sums and decisions, the pair and the step. */
Test(cuda_ops, fused_solver_ops, .timeout = 120)
{
	struct backend *be = cuda_or_skip();
	rng_state = 5;
	check_fused_ops(be);
	check_fused_anderson_ops(be);
	backend_destroy(be);
}

/* upload/download over more than the 2^20-element staging buffer; copy,
 * fill (0 through memset, -0 and 4.5 through the kernel), byte copies. */
/* zero_rows and transpose (test_move_ops.h): the exact host reference,
 * which "cpu" meets too, so the same bits as the CPU. */
Test(cuda_ops, move_ops)
{
	struct backend *be = cuda_or_skip();
	rng_state = 77;
	check_zero_rows(be);
	check_transpose(be);
	backend_destroy(be);
}

Test(cuda_ops, transfers)
{
	struct backend *be = cuda_or_skip();
	size_t n = ((size_t)1 << 21) + 7;
	double *h = zeros(n), *g = zeros(n);
	for (size_t i = 0; i < n; i++)
		h[i] = (double)(i % 1000003) * 0.25 - 7; /* exact in float */
	struct pool pl = {be, {0}, 0};
	void *a = pool_up(&pl, h, n), *b = pool_new(&pl, n, 3.0);
	be_download(be, g, a, n);
	cr_assert(memcmp(g, h, n * sizeof(double)) == 0, "round trip");
	be_copy(be, b, a, n);
	be_fill(be, a, 0.0, 5);
	be_fill(be, dq_at(be, a, 5), -0.0, 3);
	be_fill(be, dq_at(be, a, 8), 4.5, 2);
	be_download(be, g, b, n);
	cr_assert(memcmp(g, h, n * sizeof(double)) == 0, "copy");
	be_download(be, g, a, 11);
	for (int i = 0; i < 5; i++)
		cr_assert(g[i] == 0 && !signbit(g[i]));
	for (int i = 5; i < 8; i++)
		cr_assert(g[i] == 0 && signbit(g[i]), "fill -0.0");
	cr_assert(g[8] == 4.5 && g[9] == 4.5 && g[10] == h[10]);
	int32_t ids[3] = {5, -1, 1 << 30}, back[3];
	int32_t *di = pool_ints(&pl, ids, 3);
	be_download_bytes(be, back, di, sizeof(ids));
	cr_assert(memcmp(ids, back, sizeof(ids)) == 0);
	pool_free(&pl);
	backend_destroy(be);
	free(h), free(g);
}

/* Every op but embed_backward's dwte scatter (float atomics) gives the
 * same bits twice, on one backend and on a second one. */
static void det_run(struct backend *be, double *res, size_t nres)
{
	int B = 4, T = 64, C = 128, H = 4, V = 97, N = B * T;
	size_t nqkv = (size_t)N * 3 * C, nbt = (size_t)N * C,
	       natt = (size_t)B * H * T * T;
	struct pool pl = {be, {0}, 0};
	rng_state = 4242;
	double *h = rnd(nqkv, 1.5);
	void *qkv = pool_up(&pl, h, nqkv);
	void *o = pool_new(&pl, nbt, 0), *att = pool_new(&pl, natt, 0);
	void *dq = pool_new(&pl, nqkv, 0), *scr = pool_new(&pl, natt, 0);
	void *lnw = pool_up(&pl, h, (size_t)C);
	void *mr = pool_new(&pl, 2 * (size_t)N, 0);
	void *dw = pool_new(&pl, 3 * (size_t)C, 0);
	int32_t tok[4 * 64];
	for (int i = 0; i < N; i++)
		tok[i] = (int32_t)((i * 7) % 13);
	int32_t *dtok = pool_ints(&pl, tok, (size_t)N);
	be_attention_forward(be, o, att, qkv, B, T, C, H);
	be_attention_backward(be, dq, scr, o, qkv, att, B, T, C, H);
	be_layernorm_forward(be, o, mr, dq_at(be, mr, (size_t)N), qkv, lnw, lnw,
			     N, C);
	be_layernorm_backward(be, qkv, dw, dq_at(be, dw, (size_t)C), o, dq, mr,
			      dq_at(be, mr, (size_t)N), lnw, N, C);
	be_bias_backward(be, dq_at(be, dw, 2 * (size_t)C), dq, 3 * N, C);
	be_embed_backward(be, scr, dq_at(be, scr, (size_t)V * C), qkv, dtok, B,
			  T, C, V);
	double L = be_xent_forward(be, dq, dq, dtok, N, V);
	double d = dot_host(be, qkv, dq, nqkv);
	double *tmp = zeros(nqkv);
	size_t k = 0;
	be_download(be, tmp, qkv, nbt);
	for (size_t i = 0; i < nbt && k < nres; i++)
		res[k++] = tmp[i];
	be_download(be, tmp, dw, 3 * (size_t)C);
	for (size_t i = 0; i < 3 * (size_t)C && k < nres; i++)
		res[k++] = tmp[i];
	/* dwpe (deterministic) after the dwte rows */
	be_download(be, tmp, dq_at(be, scr, (size_t)V * C), (size_t)T * C);
	for (size_t i = 0; i < (size_t)T * C && k < nres; i++)
		res[k++] = tmp[i];
	be_download(be, tmp, dq, nqkv);
	for (size_t i = 0; i < nqkv && k < nres; i++)
		res[k++] = tmp[i];
	be_download(be, tmp, att, natt); /* natt <= nqkv */
	for (size_t i = 0; i < natt && k + 2 < nres; i++)
		res[k++] = tmp[i];
	cr_assert_eq(k + 2, nres);
	res[k++] = L;
	res[k++] = d;
	free(tmp);
	free(h);
	pool_free(&pl);
}

Test(cuda_ops, determinism, .timeout = 120)
{
	struct backend *be = cuda_or_skip();
	/* x (N,C), dw | db | dbias (3C), dwpe (T,C), dqkv (N,3C), att
	 * (B,H,T,T), loss, dot */
	size_t n = 4 * 64 * 128 + 3 * 128 + 64 * 128 + 4 * 64 * 3 * 128 +
		   4 * 4 * 64 * 64 + 2;
	double *a = zeros(n), *b = zeros(n), *c = zeros(n);
	det_run(be, a, n);
	det_run(be, b, n);
	backend_destroy(be);
	be = cuda_or_skip();
	det_run(be, c, n);
	backend_destroy(be);
	assert_finite(a, n, "determinism run");
	cr_assert(memcmp(a, b, n * sizeof(double)) == 0,
		  "two runs differ bitwise");
	cr_assert(memcmp(a, c, n * sizeof(double)) == 0,
		  "two backends differ bitwise");
	free(a), free(b), free(c);
}
