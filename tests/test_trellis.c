/*
 * test_trellis.c — what is particular to model=trellisnet
 * (models/trellisnet.c) on the CPU backends, and the methods on it; the
 * checks every model kind shares (block vjp and whole-loss gradients
 * against finite differences, vjp flags, determinism) run for trellisnet
 * in test_model.c:
 *   1. the forward and the injection against an independent host
 *      implementation of the spec (PyTorch Conv1d semantics on the
 *      [out, in, kernel] weights, gates i, o, g, f, c[t-1] from the
 *      previous position), on "cpu64";
 *   2. one layer moves information exactly one position forward: a change
 *      at (b, t0) changes the outputs at t0 and t0+1 of row b only, every
 *      other output bitwise the same;
 *   3. c at the last position reaches nothing: its gradient is exactly 0;
 *   4. "cpu" (float) against "cpu64": forward NMSE and loss;
 *   5. the parameter table (names, Conv1d shapes), the tape formula 7 B T h,
 *      the workspace 8 B T h + 8 h² + 4 + max(B, h), head memory and FLOPs
 *      asserted exactly; init statistics;
 *   6. methods: checkpoint equals unroll bitwise on "cpu"; on an instance
 *      trained from the seeded init, the DEQ forward converges and its IFT
 *      gradient matches unrolling to convergence (200 layers).
 */
#include "../methods/checkpoint.h"
#include "../methods/deq.h"
#include "methods/method.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* test_fd.h's step and tolerance (test_model.c argues them); only its
 * fixture and fx_vjp are used here. */
#define FD_H   1e-6
#define FD_TOL 1e-6

#include "test_deq_util.h"
#include "test_fd.h"

/* ------------------------------------------------------------- helpers */

/* d is the hidden width h (the state [h; c] is 2h wide); no heads, no
 * d_ff. */
static const struct shape odd = {3, 5, 6, 0, 0, 17};
static const struct shape pow2 = {2, 8, 8, 0, 0, 32};

static double sigm(double x)
{
	return 1.0 / (1.0 + exp(-x));
}

/* ------------------------------------ 1. against a host reference */

/* y_j[b,t,r] (gate-major (4,N,h)) = bias[j h + r] + Σ_e W[jh+r, e, 0]
 * x[b,t-1,e] + W[jh+r, e, 1] x[b,t,e], x (N,in), x[b,-1] = 0: PyTorch's
 * F.conv1d(F.pad(x, (1, 0)), W, bias) on the (B, in, T) view. */
static void ref_conv(double *y, const double *x, const double *W,
		     const double *bias, int B, int T, int h, int in)
{
	size_t N = (size_t)B * T;
	for (int j = 0; j < 4; j++)
		for (int b = 0; b < B; b++)
			for (int t = 0; t < T; t++)
				for (int r = 0; r < h; r++) {
					int q = j * h + r;
					double s = bias[q];
					const double *xt =
					    x + ((size_t)b * T + t) * in;
					for (int e = 0; e < in; e++) {
						const double *w =
						    W +
						    ((size_t)q * in + e) * 2;
						s += w[1] * xt[e];
						if (t > 0)
							s += w[0] * xt[e - in];
					}
					y[j * N * h + ((size_t)b * T + t) * h +
					  r] = s;
				}
}

/* f([h; c]; u) of the spec, planar z, gate-major u. */
static void ref_block(double *zo, const double *z, const double *u,
		      const double *W, const double *bias, int B, int T, int h)
{
	size_t N = (size_t)B * T, nh = N * h;
	double *pre = host(4 * nh);
	ref_conv(pre, z, W, bias, B, T, h, h);
	for (size_t k = 0; k < 4 * nh; k++)
		pre[k] += u[k];
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int r = 0; r < h; r++) {
				size_t n = ((size_t)b * T + t) * h + r;
				double ig = sigm(pre[n]),
				       og = sigm(pre[nh + n]),
				       gg = tanh(pre[2 * nh + n]),
				       fg = sigm(pre[3 * nh + n]);
				double cp = t > 0 ? z[nh + n - h] : 0.0;
				double c = fg * cp + ig * gg;
				zo[nh + n] = c;
				zo[n] = og * tanh(c);
			}
	free(pre);
}

static const double *param_of(const struct model *m, const double *theta,
			      const char *name)
{
	const struct model_param *p = model_param_find(m, name);
	cr_assert_not_null(p, "%s", name);
	return theta + p->offset;
}

/* The spec computed on the host agrees with cpu64 to rounding: O(1)
 * values through sums of ≤ 2h = 16 terms, so |Δ| ≤ 1e-13. */
static void check_reference(struct shape s)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, MODEL_TRELLISNET, s, 21);
	int B = s.B, T = s.T, h = s.d;
	size_t N = (size_t)B * T, nd = m->n_state, nu = m->n_u;
	size_t np = m->n_param_elems;
	rng_state = 500 + (uint64_t)h;
	double *th = host(np), *z = host(nd), *u = host(nu), *out = host(nd),
	       *ref = host(nd), *x = host(N * h), *uref = host(nu),
	       *ugot = host(nu);
	random_params(m, th);
	rnd_fill(z, nd, 1.0);
	rnd_fill(u, nu, 1.0);
	up(be, m->param_buf, th, np);
	int32_t *tok = random_tokens(m);
	load_tokens(m, tok);

	/* injection: x = embed[tok] + pos, u = conv(x) + bias */
	model_inject_forward(m);
	const double *emb = param_of(m, th, "embed.weight"),
		     *pos = param_of(m, th, "pos_embed.weight");
	for (int b = 0; b < B; b++)
		for (int t = 0; t < T; t++)
			for (int e = 0; e < h; e++)
				x[((size_t)b * T + t) * h + e] =
				    emb[(size_t)tok[b * (T + 1) + t] * h + e] +
				    pos[(size_t)t * h + e];
	ref_conv(uref, x, param_of(m, th, "inject.weight"),
		 param_of(m, th, "inject.bias"), B, T, h, h);
	down(be, ugot, m->u, nu);
	for (size_t k = 0; k < nu; k++)
		cr_assert(fabs(ugot[k] - uref[k]) <= 1e-13,
			  "u[%zu] %.17g vs %.17g", k, ugot[k], uref[k]);

	/* the block, with and without tape: the same bits */
	void *dz = dev(be, nd), *du = dev(be, nu), *dout = dev(be, nd);
	void *tape = dev(be, model_tape_elems(m));
	up(be, dz, z, nd);
	up(be, du, u, nu);
	model_block_forward(m, dout, dz, du, NULL);
	down(be, out, dout, nd);
	ref_block(ref, z, u, param_of(m, th, "block.conv.weight"),
		  param_of(m, th, "block.conv.bias"), B, T, h);
	double amax = 0;
	for (size_t k = 0; k < nd; k++) {
		cr_assert(fabs(out[k] - ref[k]) <= 1e-13,
			  "f[%zu] %.17g vs %.17g", k, out[k], ref[k]);
		amax = fmax(amax, fabs(ref[k]));
	}
	cr_assert(amax > 0.3, "outputs too small to test: %g", amax);
	model_block_forward(m, dout, dz, du, tape);
	down(be, ref, dout, nd);
	cr_assert(memcmp(ref, out, nd * sizeof(double)) == 0,
		  "tape changes the output");

	free(th), free(z), free(u), free(out), free(ref), free(x), free(uref),
	    free(ugot), free(tok);
	backend_free(be, dz);
	backend_free(be, du);
	backend_free(be, dout);
	backend_free(be, tape);
	model_destroy(m);
	cr_assert_eq(be->mem.live_total, 0);
	backend_destroy(be);
}

Test(trellis, matches_reference)
{
	check_reference(odd);
	check_reference(pow2);
}

/* ------------------------------------------------ 2. causality, reach */

/* Perturbing z (h and c) and u at (b0, t0) changes the layer's output at
 * (b0, t0) and (b0, t0+1) only: kernel 2 and c[t-1] reach one position. */
Test(trellis, one_layer_reaches_one_position)
{
	struct backend *be = make_be("cpu");
	struct shape s = odd;
	struct model *m = make_model(be, MODEL_TRELLISNET, s, 4);
	size_t nd = m->n_state, nu = m->n_u, np = m->n_param_elems;
	size_t N = (size_t)s.B * s.T, nh = N * s.d;
	rng_state = 17;
	double *th = host(np), *z = host(nd), *u = host(nu), *o1 = host(nd),
	       *o2 = host(nd);
	random_params(m, th);
	rnd_fill(z, nd, 1.0);
	rnd_fill(u, nu, 1.0);
	up(be, m->param_buf, th, np);
	void *dz = dev(be, nd), *du = dev(be, nu), *dout = dev(be, nd);
	up(be, dz, z, nd);
	up(be, du, u, nu);
	model_block_forward(m, dout, dz, du, NULL);
	down(be, o1, dout, nd);
	const int b0 = 1, t0 = 2;
	size_t n0 = (size_t)b0 * s.T + t0;
	for (int r = 0; r < s.d; r++) {
		z[n0 * s.d + r] += 0.5;
		z[nh + n0 * s.d + r] += 0.5;
		for (int j = 0; j < 4; j++)
			u[j * nh + n0 * s.d + r] += 0.5;
	}
	up(be, dz, z, nd);
	up(be, du, u, nu);
	model_block_forward(m, dout, dz, du, NULL);
	down(be, o2, dout, nd);
	for (size_t k = 0; k < nd; k++) {
		size_t n = (k % nh) / (size_t)s.d;
		int hit = n == n0 || n == n0 + 1;
		if (hit)
			cr_assert(o1[k] != o2[k], "no change at %zu", k);
		else
			cr_assert(o1[k] == o2[k], "change reached %zu", k);
	}
	free(th), free(z), free(u), free(o1), free(o2);
	backend_free(be, dz);
	backend_free(be, du);
	backend_free(be, dout);
	model_destroy(m);
	backend_destroy(be);
}

/* ------------------------------------------- 3. the last c, no gradient */

/* The block vjp at random O(1) parameters and inputs (the point of
 * test_model.c's FD check): the gradient of c at the last position of
 * every row is exactly 0 (no later position reads it), the rest of c's
 * is not. */
static void check_last_c(struct shape s)
{
	struct fx f;
	struct fx_grads g;
	fx_open_block(&f, &g, MODEL_TRELLISNET, s);
	size_t nh = f.m->n_state / 2, nonzero = 0;
	for (int b = 0; b < s.B; b++)
		for (int t = 0; t < s.T; t++)
			for (int r = 0; r < s.d; r++) {
				double gc =
				    g.z[nh + ((size_t)b * s.T + t) * s.d + r];
				if (t == s.T - 1)
					cr_assert_eq(gc, 0.0, "b=%d r=%d", b,
						     r);
				else
					nonzero += gc != 0.0;
			}
	cr_assert_gt(nonzero, 0, "c gets no gradient at all");
	fx_close(&f, &g);
}

Test(trellis, last_c_gets_no_gradient)
{
	check_last_c(odd);
	check_last_c(pow2);
}

/* ------------------------------------------- 4. float vs double */

/* Random O(1) parameters and inputs on both backends. Float rounds each
 * value to 2^-24 ≈ 6e-8 relative and the layer sums ≤ 2h + 2 = 18 terms
 * per pre-activation; gates and products keep the relative error ~1e-7,
 * so the NMSE Σ(f32 - f64)² / Σ f64² is ~1e-14; asserted ≤ 1e-11 (a wrong
 * op in one of the two paths gives O(1)). The loss through 3 layers and
 * the head: 1e-6 relative. */
static void check_float(struct shape s)
{
	struct backend *bf = make_be("cpu"), *bd = make_be("cpu64");
	struct model *mf = make_model(bf, MODEL_TRELLISNET, s, 5),
		     *md = make_model(bd, MODEL_TRELLISNET, s, 5);
	size_t nd = md->n_state, nu = md->n_u, np = md->n_param_elems;
	double *z = host(nd), *u = host(nu), *th = host(np),
	       *outs[2] = {host(nd), host(nd)}, loss[2];
	rng_state = 99 + (uint64_t)s.d;
	int32_t *tok = random_tokens(md);

	assert_same_init(mf, md);
	/* default init: logits ≈ 0, loss ≈ log V */
	for (int k = 0; k < 2; k++) {
		struct model *m = k ? md : mf;
		struct backend *be = k ? bd : bf;
		void *z0 = dev(be, nd), *z1 = dev(be, nd);
		load_tokens(m, tok);
		model_inject_forward(m);
		be_fill(be, z0, 0.0, nd);
		model_block_forward(m, z1, z0, m->u, NULL);
		double l = model_head_forward(m, z1);
		cr_assert(fabs(l - log((double)s.V)) < 0.05, "init loss %g", l);
		backend_free(be, z0);
		backend_free(be, z1);
	}

	rnd_fill(z, nd, 1.0);
	rnd_fill(u, nu, 1.0);
	random_params(md, th);
	for (int k = 0; k < 2; k++) {
		struct backend *be = k ? bd : bf;
		struct model *m = k ? md : mf;
		void *dz = dev(be, nd), *du = dev(be, nu), *o = dev(be, nd),
		     *o2 = dev(be, nd);
		up(be, m->param_buf, th, np);
		up(be, dz, z, nd);
		up(be, du, u, nu);
		model_block_forward(m, o, dz, du, NULL);
		down(be, outs[k], o, nd);
		assert_finite(outs[k], nd, be_name(be));
		model_inject_forward(m);
		be_fill(be, dz, 0.0, nd);
		model_block_forward(m, o, dz, m->u, NULL);
		model_block_forward(m, o2, o, m->u, NULL);
		model_block_forward(m, o, o2, m->u, NULL);
		loss[k] = model_head_forward(m, o);
		cr_assert(isfinite(loss[k]));
		backend_free(be, dz);
		backend_free(be, du);
		backend_free(be, o);
		backend_free(be, o2);
	}
	double num = 0, den = 0;
	for (size_t i = 0; i < nd; i++) {
		num += (outs[0][i] - outs[1][i]) * (outs[0][i] - outs[1][i]);
		den += outs[1][i] * outs[1][i];
	}
	cr_assert(den > 0 && num / den <= 1e-11, "NMSE %g", num / den);
	cr_assert(fabs(loss[0] - loss[1]) <= 1e-6 * loss[1], "loss %g vs %g",
		  loss[0], loss[1]);
	free(z), free(u), free(th), free(outs[0]), free(outs[1]), free(tok);
	model_destroy(mf);
	model_destroy(md);
	backend_destroy(bf);
	backend_destroy(bd);
}

Test(trellis, float_vs_double)
{
	check_float(odd);
	check_float(pow2);
}

/* ------------------------------------------- 5. table, sizes, flops */

Test(trellis, param_table_and_sizes)
{
	struct backend *be = make_be("cpu64");
	struct shape s = odd;
	struct model *m = make_model(be, MODEL_TRELLISNET, s, 1);
	int64_t h = s.d, V = s.V, T = s.T;
	const struct param_want want[] = {
	    {"embed.weight", 2, {V, h}},
	    {"pos_embed.weight", 2, {T, h}},
	    {"inject.weight", 3, {4 * h, h, 2}},
	    {"inject.bias", 1, {4 * h}},
	    {"block.conv.weight", 3, {4 * h, h, 2}},
	    {"block.conv.bias", 1, {4 * h}},
	    {"head.weight", 2, {V, h}},
	    {"head.bias", 1, {V}},
	};
	size_t off = assert_param_table(m, want, sizeof(want) / sizeof(*want));

	/* widths: state [h; c], injection four gates, head reads h */
	size_t N = (size_t)s.B * s.T;
	cr_assert_eq(m->d, 2 * s.d);
	cr_assert_eq(m->E, s.d);
	cr_assert_eq(m->U, 4 * s.d);
	cr_assert_eq(m->n_state, 2 * N * h);
	cr_assert_eq(m->n_u, 4 * N * h);
	/* tape 7 B T h, the formula in trellisnet.c */
	cr_assert_eq(model_tape_elems(m), 7 * N * h);
	/* workspace 8 B T h + 8 h² + 4 + max(B, h) */
	size_t mx = (size_t)(s.B > s.d ? s.B : s.d);
	cr_assert_eq(be->mem.live[MEM_WORKSPACE],
		     8 * (8 * N * h + 8 * h * h + 4 + mx));
	/* head: tokens, targets (int32); x (N,h), gz (N,2h), u, gu (N,4h),
	 * logits (N,V) */
	cr_assert_eq(be->mem.live[MEM_HEAD],
		     2 * N * 4 + 8 * (N * h + 2 * N * h + 8 * N * h + N * V));
	cr_assert_eq(be->mem.live[MEM_PARAMS], off * 8);
	cr_assert_eq(be->mem.live[MEM_DEPTH], 0);
	/* flops: the eight (N,h,h) GEMMs */
	cr_assert_eq(model_block_flops(m), 16.0 * N * h * h);

	/* init: weights N(0, 0.02), biases 0 (≥ 30 samples) */
	assert_default_init(m);
	model_destroy(m);
	cr_assert_eq(be->mem.live_total, 0);

	/* n_heads and d_ff are not used; the model is created without them */
	struct model_config c =
	    model_cfg(MODEL_TRELLISNET, (struct shape){1, 3, 5, 0, 0, 7}, 1);
	m = model_of(be, &c);
	cr_assert_eq(model_tape_elems(m), 7 * 3 * 5);
	model_destroy(m);
	backend_destroy(be);
}

/* --------------------------------------------------------- 6. methods */

/* Loss, z, dL/du and every gradient, bitwise, on "cpu" (float: any
 * reordering would show): checkpoint runs the same block calls on the same
 * values in the same order as unroll. */
static void check_ckpt(struct shape s, int L, int k)
{
	struct backend *be = make_be("cpu");
	struct model *m = make_model(be, MODEL_TRELLISNET, s, 8);
	size_t np = m->n_param_elems;
	double *th = host(np);
	rng_state = 303;
	random_params(m, th);
	up(be, m->param_buf, th, np);
	int32_t *tok = random_tokens(m);
	load_tokens(m, tok);
	void *z = dev(be, m->n_state);
	struct step_out un =
	    step_of(m, cfg_of(method_kind_parse("unroll"), L, 0), z);
	struct step_out ck = step_of(m, cfg_of(checkpoint_kind(), L, k), z);
	char what[32];
	snprintf(what, sizeof(what), "L=%d k=%d", L, k);
	assert_same_step(m, &un, &ck, what);
	step_out_free(&un);
	step_out_free(&ck);
	free(th);
	free(tok);
	backend_free(be, z);
	model_destroy(m);
	backend_destroy(be);
}

Test(trellis, checkpoint_equals_unroll)
{
	check_ckpt(odd, 7, 3);
	check_ckpt(pow2, 6, 2);
	check_ckpt(odd, 5, 5);
}

/* Adam (lr 1e-2, 40 steps) from the seeded init, unrolling 6 layers on a
 * fixed batch: an instance "trained from init", with conv weights grown
 * well past their init scale. Returns the first and last losses. */
static void train_from_init(struct model *m, int steps, double *l0, double *l1)
{
	struct backend *be = m->be;
	size_t np = m->n_param_elems;
	void *mo = backend_alloc(be, np, MEM_OPTIMIZER),
	     *vo = backend_alloc(be, np, MEM_OPTIMIZER);
	void *z = dev(be, m->n_state);
	cr_assert(mo && vo);
	be_fill(be, mo, 0.0, np);
	be_fill(be, vo, 0.0, np);
	struct method *me =
	    new_method(m, cfg_of(method_kind_parse("unroll"), 6, 0));
	for (int t = 1; t <= steps; t++) {
		double l = step(m, me, z, NULL);
		if (t == 1)
			*l0 = l;
		*l1 = l;
		be_adam_host(be, m->param_buf, m->grad_buf, mo, vo, np, 1e-2,
			     0.9, 0.999, 1e-8, 0.0, t);
	}
	method_destroy(me);
	backend_free(be, mo);
	backend_free(be, vo);
	backend_free(be, z);
}

/* Unrolled 200 layers vs deq/ift on cpu64, both gradients of the same
 * loss. The c path is a shift (nilpotent of order T), so unrolling
 * converges like the h path, geometrically at the contraction rate ρ of
 * J_f at z*. ρ is measured, not assumed: the second case solves the
 * backward y = y J + ḡ by plain fixed-point iteration, whose error shrinks
 * by ρ per iteration; reaching 1e-12 from O(1) in ≤ 60 iterations
 * (asserted) means ρ ≲ 0.63, so 200 unrolled layers leave ≲ 1e-40 of z
 * and of the gradient (a sum of ḡ Jⁱ ∂f/∂θ). The deq side is exact up to
 * its solver tolerances 1e-12 (abs, on O(1) vectors): errors ≲ tol/(1−ρ)
 * ≈ 3e-12 absolute against tensors whose largest gradient is ≥ 1e-3;
 * measured ≤ 6e-11 relative. Asserted: 1e-7 of each tensor's largest
 * entry (a missing or doubled term is O(1) off). */
static void check_deq(struct shape s, enum solver_kind fs, enum solver_kind bs)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, MODEL_TRELLISNET, s, 12);
	rng_state = 909 + (uint64_t)s.d;
	int32_t *tok = random_tokens(m);
	load_tokens(m, tok);
	double l0, l1;
	train_from_init(m, 40, &l0, &l1);
	cr_assert(l1 < l0 - 0.5, "training did not move: %g -> %g", l0, l1);
	const struct model_param *cw = model_param_find(m, "block.conv.weight");
	double *w = host(cw->numel);
	down(be, w, dq_at(be, m->param_buf, cw->offset), cw->numel);
	double rms = sqrt(hdot(w, w, cw->numel) / cw->numel);
	cr_assert(rms > 0.05, "conv weights still at init scale: rms %g", rms);
	free(w);

	void *z = dev(be, m->n_state);
	struct method_stats st =
	    deq_matches_unroll(m, z, deq_solvers(fs, bs, 1e-12, 150), 200);
	if (bs == SOLVER_FIXED_POINT)
		cr_assert_leq(st.bwd.iters, 60, "contraction rate too slow");
	free(tok);
	backend_free(be, z);
	model_destroy(m);
	backend_destroy(be);
}

Test(trellis, deq_ift_matches_unroll, .timeout = 300)
{
	check_deq(odd, SOLVER_BROYDEN, SOLVER_BROYDEN);
	check_deq(pow2, SOLVER_ANDERSON, SOLVER_FIXED_POINT);
}
