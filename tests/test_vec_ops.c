/*
 * test_vec_ops.c — the ops of the CPU backends ("cpu64", "cpu") that are not
 * layers (test_ops.c has those): Adam against its formula, the solver
 * vector ops (norm, axpy, scale; dot_segments and gemm_batched; the
 * solve-control decisions of solve_ctl.h), the step's scalars on the
 * device against references (test_step_scalars.h), the ops that move
 * values (zero_rows, transpose: exact), copy, fill and transfers, and bitwise
 * determinism of the threaded kernels (two runs, and 1 vs 2 threads).
 * Tolerances are justified where they are used.
 */
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

/* ---- Adam -----------------------------------------------------------------
 */

Test(ops, adam)
{
	const char *names[] = {"cpu64", "cpu"};
	/* float: p, m, v and the update are rounded to 2^-24 relative; the
	 * update lr * mhat / (sqrt(vhat) + eps) is O(lr) with a relative
	 * error of a few ε, so |p - ref| ≤ 1e-6 (|p| ≤ 1) */
	const double tol[] = {1e-14, 1e-6};
	size_t n = 1001;
	for (int bi = 0; bi < 2; bi++)
		for (int cfg = 0; cfg < 2; cfg++) {
			rng_state = 900 + cfg;
			double lr = 1e-2, b1 = 0.9, b2 = 0.999, eps = 1e-8;
			double wd = cfg ? 0.01 : 0;
			int t = cfg ? 3 : 1;
			double *p = rnd(n, 1), *g = rnd(n, 1), *m = rnd(n, 0.1),
			       *v = rnd(n, 0.1);
			for (size_t i = 0; i < n; i++)
				v[i] = fabs(v[i]);
			struct backend *be = make(names[bi], 0);
			struct pool pl = {be, {0}, 0};
			void *dp = pool_up(&pl, p, n), *dg = pool_up(&pl, g, n),
			     *dm = pool_up(&pl, m, n), *dv = pool_up(&pl, v, n);
			be_adam_host(be, dp, dg, dm, dv, n, lr, b1, b2, eps, wd,
				     t);
			double *gp = zeros(n), *gm = zeros(n), *gv = zeros(n);
			pool_down(&pl, gp, dp, n);
			pool_down(&pl, gm, dm, n);
			pool_down(&pl, gv, dv, n);
			pool_free(&pl);
			backend_destroy(be);
			for (size_t i = 0; i < n; i++) {
				double mi = b1 * m[i] + (1 - b1) * g[i];
				double vi = b2 * v[i] + (1 - b2) * g[i] * g[i];
				double mh = mi / (1 - pow(b1, t));
				double vh = vi / (1 - pow(b2, t));
				double pi = p[i] - lr * (mh / (sqrt(vh) + eps) +
							 wd * p[i]);
				cr_assert(fabs(gm[i] - mi) <= tol[bi] &&
					      fabs(gv[i] - vi) <= tol[bi] &&
					      fabs(gp[i] - pi) <= tol[bi],
					  "%s adam[%zu]: p %.17g vs %.17g",
					  names[bi], i, gp[i], pi);
			}
			free(p), free(g), free(m), free(v), free(gp), free(gm),
			    free(gv);
		}
}

/* The step's scalars on the device, bit for bit their host twins'. */
Test(ops, step_scalars)
{
	const char *names[] = {"cpu64", "cpu"};
	for (int bi = 0; bi < 2; bi++) {
		struct backend *be = make(names[bi], 0);
		check_step_scalars(be, 5);
		check_step_scalars(be, 100003);
		backend_destroy(be);
	}
}

/* ---- vector ops -----------------------------------------------------------
 */

/* n = 0, 5, and 100003 (many reduction blocks, parallel paths). The float
 * backend's reductions multiply float inputs exactly in double, so they
 * equal the double loop over the float-rounded inputs up to summation order:
 * |error| ≤ n ε Σ|x y| in the worst case, ~ √n ε Σ|x y| ≈ 4e-14 Σ|x y| in
 * practice; 1e-12 sits between. */
Test(ops, vector_ops)
{
	const char *names[] = {"cpu64", "cpu"};
	const size_t ns[] = {0, 5, 100003};
	for (int bi = 0; bi < 2; bi++)
		for (int ni = 0; ni < 3; ni++) {
			size_t n = ns[ni];
			rng_state = 1000 + ni;
			double *x = rnd(n, 1), *y = rnd(n, 1);
			struct backend *be = make(names[bi], 0);
			struct pool pl = {be, {0}, 0};
			void *dx = pool_up(&pl, x, n), *dy = pool_up(&pl, y, n);
			pool_down(&pl, x, dx,
				  n); /* the values the device holds */
			pool_down(&pl, y, dy, n);
			double d = dot_host(be, dx, dy, n);
			double nr = be_norm(be, dx, n);
			double rd, ad, rn;
			ref_dot_norm(x, y, n, &rd, &ad, &rn);
			cr_assert(fabs(d - rd) <= 1e-12 * (ad + 1e-300) ||
				      d == rd,
				  "dot %.17g vs %.17g", d, rd);
			cr_assert(fabs(nr - rn) <= 1e-12 * rn || nr == rn,
				  "norm %.17g vs %.17g", nr, rn);
			be_axpy(be, dy, -0.75, dx, n);
			be_scale(be, dx, 1.5, n);
			double *gx = zeros(n), *gy = zeros(n);
			pool_down(&pl, gx, dx, n);
			pool_down(&pl, gy, dy, n);
			/* one rounding in the backend's type */
			double eps = bi ? 1.2e-7 : 2.3e-16;
			for (size_t i = 0; i < n; i++) {
				double ry = y[i] - 0.75 * x[i];
				cr_assert(fabs(gy[i] - ry) <=
					      2 * eps *
						  (fabs(y[i]) + fabs(x[i])),
					  "axpy[%zu]", i);
				cr_assert(fabs(gx[i] - 1.5 * x[i]) <=
					      eps * 1.5 * fabs(x[i]),
					  "scale[%zu]", i);
			}
			if (n > 5) {
				/* nan and inf propagate through norm */
				double bad[2] = {NAN, INFINITY};
				be_upload(be, dq_at(be, dx, 77), &bad[0], 1);
				cr_assert(isnan(be_norm(be, dx, n)));
				be_upload(be, dq_at(be, dx, 77), &bad[1], 1);
				cr_assert(isinf(be_norm(be, dx, n)));
			}
			pool_free(&pl);
			backend_destroy(be);
			free(x), free(y), free(gx), free(gy);
		}
}

/* dot_segments and gemm_batched (test_ops_util.h): one rounding of the
 * backend's type per product and sum. */
Test(ops, batched_solver_ops, .timeout = 120)
{
	const char *names[] = {"cpu64", "cpu"};
	const double gtol[] = {1e-15, 1.2e-7};
	for (int bi = 0; bi < 2; bi++) {
		struct backend *be = make(names[bi], 0);
		rng_state = 4242;
		check_batched_ops(be, gtol[bi]);
		backend_destroy(be);
	}
}

/* The solvers' device-side decisions (test_ops_util.h): the ops against
 * solve_ctl.h's host code, on both types. */
Test(ops, solve_ctl_ops)
{
	const char *names[] = {"cpu64", "cpu"};
	for (int bi = 0; bi < 2; bi++) {
		struct backend *be = make(names[bi], 0);
		rng_state = 99;
		check_solve_ctl_ops(be);
		backend_destroy(be);
	}
}

/* The fused Broyden and Anderson ops against their formulas in double
 * (test_fused_ops.h), on both types. */
Test(ops, fused_solver_ops)
{
	const char *names[] = {"cpu64", "cpu"};
	for (int bi = 0; bi < 2; bi++) {
		struct backend *be = make(names[bi], 0);
		rng_state = 5;
		check_fused_ops(be);
		check_fused_anderson_ops(be);
		backend_destroy(be);
	}
}

/* zero_rows and transpose (test_move_ops.h): exact, on both types. */
Test(ops, move_ops)
{
	const char *names[] = {"cpu64", "cpu"};
	for (int bi = 0; bi < 2; bi++) {
		struct backend *be = make(names[bi], 0);
		rng_state = 77;
		check_zero_rows(be);
		check_transpose(be);
		backend_destroy(be);
	}
}

Test(ops, transfers)
{
	const char *names[] = {"cpu64", "cpu"};
	for (int bi = 0; bi < 2; bi++) {
		struct backend *be = make(names[bi], 0);
		struct pool pl = {be, {0}, 0};
		double h[7] = {1, -2.5, 3.25, 0, 1e-3, 7, -8}, g[7];
		void *a = pool_up(&pl, h, 7), *b = pool_new(&pl, 7, 0);
		be_copy(be, b, a, 7);
		be_fill(be, a, 4.5, 3);
		pool_down(&pl, g, b, 7);
		for (int i = 0; i < 7; i++)
			cr_assert_eq(g[i], bi ? (double)(float)h[i] : h[i]);
		pool_down(&pl, g, a, 7);
		cr_assert(g[0] == 4.5 && g[2] == 4.5 && g[3] == 0);
		int32_t ids[3] = {5, -1, 1 << 30}, back[3];
		int32_t *di = pool_ints(&pl, ids, 3);
		be_download_bytes(be, back, di, sizeof(ids));
		cr_assert(memcmp(ids, back, sizeof(ids)) == 0);
		pool_free(&pl);
		backend_destroy(be);
	}
}

/* ---- determinism ----------------------------------------------------------
 */

/* Attention, layernorm and embedding backward, xent and dot at a model-sized
 * shape on "cpu": run with 2 threads twice and with 1 thread once; all
 * results must be bitwise equal. */
static void det_run(int threads, double *res, size_t nres)
{
	int B = 4, T = 64, C = 128, H = 4, V = 97;
	size_t nqkv = (size_t)B * T * 3 * C, nbt = (size_t)B * T * C,
	       natt = (size_t)B * H * T * T;
	struct backend *be = make("cpu", threads);
	struct pool pl = {be, {0}, 0};
	rng_state = 4242;
	double *h = rnd(nqkv, 1.5);
	void *qkv = pool_up(&pl, h, nqkv);
	void *o = pool_new(&pl, nbt, 0), *att = pool_new(&pl, natt, 0);
	void *dq = pool_new(&pl, nqkv, 0), *scr = pool_new(&pl, natt, 0);
	void *lnw = pool_up(&pl, h, (size_t)C),
	     *mr = pool_new(&pl, 2 * (size_t)B * T, 0);
	void *dw = pool_new(&pl, 2 * (size_t)C, 0),
	     *wte = pool_new(&pl, (size_t)V * C, 0);
	int32_t tok[4 * 64];
	for (int i = 0; i < B * T; i++)
		tok[i] = (int32_t)((i * 7) % 13); /* many repeats */
	int32_t *dtok = pool_ints(&pl, tok, (size_t)B * T);
	const struct backend_math_ops *op = be->ops->math;
	op->attention_forward(be->ctx, o, att, qkv, B, T, C, H);
	op->attention_backward(be->ctx, dq, scr, o, qkv, att, B, T, C, H);
	op->layernorm_forward(be->ctx, o, mr, dq_at(be, mr, (size_t)B * T), qkv,
			      NULL, NULL, lnw, lnw, B * T, C);
	op->layernorm_backward(be->ctx, qkv, NULL, NULL, dw,
			       dq_at(be, dw, (size_t)C), o, dq, mr,
			       dq_at(be, mr, (size_t)B * T), lnw, B * T, C);
	op->embed_backward(be->ctx, wte, scr, qkv, dtok, B, T, C, V);
	double L = op->xent_forward(be->ctx, dq, dq, dtok, B * T, C);
	double d = dot_host(be, qkv, dq, nqkv);
	size_t k = 0;
	double *tmp = zeros(nqkv);
	pool_down(&pl, tmp, qkv, nqkv);
	for (size_t i = 0; i < nbt && k < nres; i++)
		res[k++] = tmp[i];
	pool_down(&pl, tmp, dw, 2 * (size_t)C);
	for (size_t i = 0; i < 2 * (size_t)C && k < nres; i++)
		res[k++] = tmp[i];
	pool_down(&pl, tmp, wte, (size_t)V * C);
	for (size_t i = 0; i < (size_t)V * C && k < nres; i++)
		res[k++] = tmp[i];
	pool_down(&pl, tmp, dq, nqkv);
	for (size_t i = 0; i < nqkv && k < nres; i++)
		res[k++] = tmp[i];
	cr_assert(k + 2 <= nres);
	res[k++] = L;
	res[k++] = d;
	while (k < nres)
		res[k++] = 0;
	free(tmp);
	free(h);
	pool_free(&pl);
	backend_destroy(be);
}

Test(ops, determinism)
{
	size_t n = 4 * 64 * 128 + 2 * 128 + 97 * 128 + 4 * 64 * 3 * 128 + 2;
	double *a = zeros(n), *b = zeros(n), *c = zeros(n);
	det_run(2, a, n);
	det_run(2, b, n);
	det_run(1, c, n);
	assert_finite(a, n, "determinism run");
	cr_assert(memcmp(a, b, n * sizeof(double)) == 0,
		  "two runs differ bitwise");
	cr_assert(memcmp(a, c, n * sizeof(double)) == 0,
		  "1 and 2 threads differ bitwise");
	free(a), free(b), free(c);
}
