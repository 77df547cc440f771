/*
 * test_trellis.c — model=trellisnet (models/trellisnet.c) on the CPU
 * backends, and the methods on it:
 *   1. the forward and the injection against an independent host
 *      implementation of the spec (PyTorch Conv1d semantics on the
 *      [out, in, kernel] weights, gates i, o, g, f, c[t-1] from the
 *      previous position), on "cpu64";
 *   2. one layer moves information exactly one position forward: a change
 *      at (b, t0) changes the outputs at t0 and t0+1 of row b only, every
 *      other output bitwise the same;
 *   3. the block vjp (gz_in, gu, every coordinate of block.conv.weight and
 *      block.conv.bias) against central finite differences of <R, f(z; u)>
 *      on "cpu64", at odd shapes (B=3 T=5 h=6 V=17) and powers of two (B=2
 *      T=8 h=8 V=32); the vjp flags and the += rule;
 *   4. the whole LM loss (inject -> 2 or 3 layers -> head) gradient of every
 *      parameter tensor against finite differences (sampled coordinates);
 *   5. "cpu" (float) against "cpu64": forward NMSE and loss; the same seed
 *      gives the same bits;
 *   6. the parameter table (names, Conv1d shapes), the tape formula 7 B T h,
 *      the workspace 8 B T h + 8 h² + 4 + max(B, h), head memory and FLOPs
 *      asserted exactly; init statistics;
 *   7. methods: checkpoint equals unroll bitwise on "cpu"; on an instance
 *      trained from the seeded init, the DEQ forward converges and its IFT
 *      gradient matches unrolling to convergence (200 layers).
 *
 * Finite differences (double, ε = 1.1e-16): central quotient with h = 1e-6
 * on O(1) values: truncation h² f''' / 6 ~ 1e-13, rounding ~ ε |φ| / h with
 * |φ| ≲ 1e2 → ~1e-8 per coordinate at the very worst. Tolerance: |fd - an|
 * ≤ 1e-6 (1 + max|an| of the tensor) per element and ‖fd - an‖ / ‖an‖ ≤
 * 1e-6 per tensor; a wrong formula gives O(max|an|) errors, 10⁵× above
 * that. The layer is smooth (σ, tanh, products), so no kink retries.
 */
#include "methods/method.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H   1e-6
#define FD_TOL 1e-6

#include "test_fd.h"

/* ------------------------------------------------------------- helpers */

struct shape {
	int B, T, h, V;
};
static const struct shape odd = {3, 5, 6, 17};
static const struct shape pow2 = {2, 8, 8, 32};

static struct model *make_model(struct backend *be, struct shape s,
				uint64_t seed)
{
	struct model_config c = {
	    .kind = MODEL_TRELLISNET,
	    .d_model = s.h,
	    .seq_len = s.T,
	    .batch_size = s.B,
	    .vocab_size = s.V,
	    .seed = seed,
	};
	struct model *m = NULL;
	char err[256] = "";
	cr_assert_eq(model_create(&m, be, &c, err, sizeof(err)), 0,
		     "model_create: %s", err);
	return m;
}

/* Random parameters of O(1) effect, so every gate matters: weights N(0,
 * 1/fan_in) (fan_in = in * kernel for the convolutions), biases and
 * embeddings N(0, 0.3²). */
static void random_params(const struct model *m, double *theta)
{
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		double *x = theta + p->offset;
		if (p->ndim >= 2 && strstr(p->name, "embed") == NULL) {
			double fan = (double)p->shape[1] *
				     (double)(p->ndim == 3 ? p->shape[2] : 1);
			rnd_fill(x, p->numel, 1.0 / sqrt(fan));
		} else {
			rnd_fill(x, p->numel, 0.3);
		}
	}
}

static int32_t *random_tokens(const struct model *m)
{
	size_t n = (size_t)m->B * (m->T + 1);
	int32_t *t = malloc(n * sizeof(*t));
	cr_assert_not_null(t);
	for (size_t i = 0; i < n; i++)
		t[i] = (int32_t)(rnd_u01() * m->cfg.vocab_size) %
		       m->cfg.vocab_size;
	return t;
}

static void set_tokens(struct model *m, const int32_t *tok)
{
	char err[256];
	cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), 0, "%s", err);
}

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
	struct model *m = make_model(be, s, 21);
	int B = s.B, T = s.T, h = s.h;
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
	set_tokens(m, tok);

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
	struct model *m = make_model(be, s, 4);
	size_t nd = m->n_state, nu = m->n_u, np = m->n_param_elems;
	size_t N = (size_t)s.B * s.T, nh = N * s.h;
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
	for (int r = 0; r < s.h; r++) {
		z[n0 * s.h + r] += 0.5;
		z[nh + n0 * s.h + r] += 0.5;
		for (int j = 0; j < 4; j++)
			u[j * nh + n0 * s.h + r] += 0.5;
	}
	up(be, dz, z, nd);
	up(be, du, u, nu);
	model_block_forward(m, dout, dz, du, NULL);
	down(be, o2, dout, nd);
	for (size_t k = 0; k < nd; k++) {
		size_t n = (k % nh) / (size_t)s.h;
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

/* ------------------------------------------------ objectives for the FD */

/* lm = 0: φ = <R, f(z; u)>; lm = 1: φ = the LM loss through `layers`
 * block applications from z = 0. Host copies are the truth; every
 * evaluation uploads them. */
/* ---------------------------------------------------- 3. block vjp vs FD */

static int is_block_param(const char *name)
{
	return strncmp(name, "block.", 6) == 0;
}

static void check_block(struct shape s)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, s, 7);
	struct fx f;
	rng_state = 1000 + (uint64_t)s.h;
	fx_init(&f, be, m, 0, 1, random_params);

	size_t nd = m->n_state, nu = m->n_u, np = m->n_param_elems;
	void *tape = dev(be, model_tape_elems(m));
	void *gz_in = dev(be, nd), *gz_out = dev(be, nd);
	model_block_forward(m, f.dout, f.dz, f.du, tape);
	up(be, gz_out, f.R, nd);
	model_zero_grads(m);
	be->ops->fill(be->ctx, gz_in, 99.0, nd); /* overwritten, not += */
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);

	double *gz = host(nd), *gu = host(nu), *gth = host(np);
	down(be, gz, gz_in, nd);
	down(be, gu, m->gu, nu);
	down(be, gth, m->grad_buf, np);
	assert_finite(gz, nd, "gz_in");
	assert_finite(gth, np, "grads");

	/* h and c separately, so a zero c-gradient cannot hide */
	size_t nh = nd / 2;
	fd_check(&f, "z.h", f.z, gz, nh, NULL, 0);
	fd_check(&f, "z.c", f.z + nh, gz + nh, nh, NULL, 0);
	fd_check(&f, "u", f.u, gu, nu, NULL, 0);
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		if (is_block_param(p->name))
			fd_check(&f, p->name, f.theta + p->offset,
				 gth + p->offset, p->numel, NULL, 0);
		else
			for (size_t k = 0; k < p->numel; k++)
				cr_assert_eq(gth[p->offset + k], 0.0, "%s",
					     p->name);
	}
	/* c at the last position reaches nothing */
	for (int b = 0; b < s.B; b++)
		for (int r = 0; r < s.h; r++)
			cr_assert_eq(
			    gz[nh + ((size_t)b * s.T + s.T - 1) * s.h + r],
			    0.0);

	free(gz);
	free(gu);
	free(gth);
	backend_free(be, tape);
	backend_free(be, gz_in);
	backend_free(be, gz_out);
	fx_free(&f);
	model_destroy(m);
	cr_assert_eq(be->mem.live_total, 0);
	backend_destroy(be);
}

Test(trellis, vjp_odd)
{
	check_block(odd);
}

Test(trellis, vjp_pow2)
{
	check_block(pow2);
}

/* param_grads = 0 and gu = NULL leave grads and gu bitwise untouched and
 * give the same gz_in bits; two vjps add (+=). */
Test(trellis, vjp_flags)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, odd, 3);
	struct fx f;
	rng_state = 77;
	fx_init(&f, be, m, 0, 1, random_params);
	size_t nd = m->n_state, nu = m->n_u, np = m->n_param_elems;
	void *tape = dev(be, model_tape_elems(m));
	void *gz_in = dev(be, nd), *gz_out = dev(be, nd);
	double *g1 = host(nd), *g2 = host(nd), *gu1 = host(nu), *gu2 = host(nu),
	       *th1 = host(np), *th2 = host(np), *sent = host(np),
	       *usent = host(nu);
	model_block_forward(m, f.dout, f.dz, f.du, tape);
	up(be, gz_out, f.R, nd);

	model_zero_grads(m);
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);
	down(be, g1, gz_in, nd);
	down(be, gu1, m->gu, nu);
	down(be, th1, m->grad_buf, np);

	rnd_fill(sent, np, 1.0);
	rnd_fill(usent, nu, 1.0);
	up(be, m->grad_buf, sent, np);
	up(be, m->gu, usent, nu);
	be->ops->fill(be->ctx, gz_in, 123.0, nd);
	model_block_vjp(m, gz_in, NULL, gz_out, tape, 0);
	down(be, g2, gz_in, nd);
	down(be, th2, m->grad_buf, np);
	down(be, gu2, m->gu, nu);
	cr_assert(memcmp(g1, g2, nd * sizeof(double)) == 0,
		  "gz_in depends on the flags");
	cr_assert(memcmp(th2, sent, np * sizeof(double)) == 0,
		  "param_grads=0 changed the gradients");
	cr_assert(memcmp(gu2, usent, nu * sizeof(double)) == 0,
		  "gu=NULL changed m->gu");

	/* two vjps from the sentinels: sent + 2 g; gemm with beta = 1 may
	 * sum in another order, hence 1e-13 relative, not bitwise */
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);
	down(be, th2, m->grad_buf, np);
	down(be, gu2, m->gu, nu);
	for (size_t i = 0; i < np; i++)
		cr_assert(fabs(th2[i] - (sent[i] + 2 * th1[i])) <=
			      1e-13 * (1 + fabs(th2[i])),
			  "grads += at %zu", i);
	for (size_t i = 0; i < nu; i++)
		cr_assert(fabs(gu2[i] - (usent[i] + 2 * gu1[i])) <=
			      1e-13 * (1 + fabs(gu2[i])),
			  "gu += at %zu", i);

	free(g1), free(g2), free(gu1), free(gu2), free(th1), free(th2),
	    free(sent), free(usent);
	backend_free(be, tape);
	backend_free(be, gz_in);
	backend_free(be, gz_out);
	fx_free(&f);
	model_destroy(m);
	backend_destroy(be);
}

/* --------------------------------------------------- 4. whole LM loss */

/* inject -> `layers` applications from z = 0 -> head; backward the way a
 * method does it. Every parameter tensor on 24 sampled coordinates (all
 * when smaller), used rows of embed.weight favoured. */
static void check_lm(struct shape s, int layers)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, s, 11);
	struct fx f;
	rng_state = 4242 + (uint64_t)s.V + (uint64_t)layers;
	fx_init(&f, be, m, 1, layers, random_params);
	int32_t *tok = random_tokens(m);
	set_tokens(m, tok);

	size_t nd = m->n_state, np = m->n_param_elems, nt = model_tape_elems(m);
	char *tapes = dev(be, nt * (size_t)layers);
	void *zs[2] = {f.dz, f.dout};
	void *g = dev(be, nd), *g2 = dev(be, nd);

	model_zero_grads(m);
	model_inject_forward(m);
	be->ops->fill(be->ctx, zs[0], 0.0, nd);
	for (int l = 0; l < layers; l++)
		model_block_forward(m, zs[(l + 1) % 2], zs[l % 2], m->u,
				    dq_at(be, tapes, nt * (size_t)l));
	double loss = model_head_forward(m, zs[layers % 2]);
	cr_assert(isfinite(loss) && loss > 0 && loss < 3 * log((double)s.V),
		  "loss %g", loss);
	model_head_backward(m);
	/* the head writes zeros into the c half of gz */
	double *gzh = host(nd);
	down(be, gzh, m->gz, nd);
	for (size_t k = nd / 2; k < nd; k++)
		cr_assert_eq(gzh[k], 0.0, "gz c part at %zu", k);
	free(gzh);
	be->ops->copy(be->ctx, g, m->gz, nd);
	for (int l = layers - 1; l >= 0; l--) {
		model_block_vjp(m, g2, m->gu, g,
				dq_at(be, tapes, nt * (size_t)l), 1);
		void *t = g;
		g = g2;
		g2 = t;
	}
	model_inject_backward(m);
	double *gth = host(np);
	down(be, gth, m->grad_buf, np);
	assert_finite(gth, np, "grads");
	cr_assert(fabs(fx_eval(&f) - loss) <= 1e-13 * loss);

	enum { NS = 24 };
	size_t idx[NS];
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		size_t n = p->numel < NS ? p->numel : NS;
		for (size_t k = 0; k < n; k++) {
			if (p->numel <= NS) {
				idx[k] = k;
			} else if (i == 0 && k % 2 == 0) {
				size_t r = (size_t)
				    tok[(k * 7) % (size_t)(m->B * (m->T + 1))];
				idx[k] = r * (size_t)m->E +
					 (size_t)(rnd_u01() * m->E) % m->E;
			} else {
				idx[k] =
				    (size_t)(rnd_u01() * p->numel) % p->numel;
			}
		}
		fd_check(&f, p->name, f.theta + p->offset, gth + p->offset,
			 p->numel, idx, n);
	}

	free(gth);
	free(tok);
	backend_free(be, tapes);
	backend_free(be, g);
	backend_free(be, g2);
	fx_free(&f);
	model_destroy(m);
	cr_assert_eq(be->mem.live_total, 0);
	backend_destroy(be);
}

Test(trellis, lm_grad_odd)
{
	check_lm(odd, 2);
}

Test(trellis, lm_grad_pow2)
{
	check_lm(pow2, 3);
}

/* --------------------------------------- 5. float vs double, same bits */

/* Random O(1) parameters and inputs on both backends. Float rounds each
 * value to 2^-24 ≈ 6e-8 relative and the layer sums ≤ 2h + 2 = 18 terms
 * per pre-activation; gates and products keep the relative error ~1e-7,
 * so the NMSE Σ(f32 - f64)² / Σ f64² is ~1e-14; asserted ≤ 1e-11 (a wrong
 * op in one of the two paths gives O(1)). The loss through 3 layers and
 * the head: 1e-6 relative. */
static void check_float(struct shape s)
{
	struct backend *bf = make_be("cpu"), *bd = make_be("cpu64");
	struct model *mf = make_model(bf, s, 5), *md = make_model(bd, s, 5);
	size_t nd = md->n_state, nu = md->n_u, np = md->n_param_elems;
	double *z = host(nd), *u = host(nu), *th = host(np), *pf = host(np),
	       *pd = host(np), *outs[2] = {host(nd), host(nd)}, loss[2];
	rng_state = 99 + (uint64_t)s.h;
	int32_t *tok = random_tokens(md);

	/* the seeded init: identical up to float rounding */
	down(bf, pf, mf->param_buf, np);
	down(bd, pd, md->param_buf, np);
	for (size_t i = 0; i < np; i++)
		cr_assert_eq((float)pd[i], (float)pf[i], "param %zu", i);
	/* default init: logits ≈ 0, loss ≈ log V */
	for (int k = 0; k < 2; k++) {
		struct model *m = k ? md : mf;
		struct backend *be = k ? bd : bf;
		void *z0 = dev(be, nd), *z1 = dev(be, nd);
		set_tokens(m, tok);
		model_inject_forward(m);
		be->ops->fill(be->ctx, z0, 0.0, nd);
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
		assert_finite(outs[k], nd, be->ops->name);
		model_inject_forward(m);
		be->ops->fill(be->ctx, dz, 0.0, nd);
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
	free(z), free(u), free(th), free(pf), free(pd), free(outs[0]),
	    free(outs[1]), free(tok);
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

/* A step (inject, two layers, head, vjps, inject backward) on "cpu": the
 * loss plus the gradient norm, bitwise the same for the same seed. */
static double seeded_step(uint64_t seed)
{
	struct backend *be = make_be("cpu");
	struct model *m = make_model(be, pow2, seed);
	rng_state = 31;
	int32_t *tok = random_tokens(m);
	void *z0 = dev(be, m->n_state), *z1 = dev(be, m->n_state);
	void *tape = dev(be, model_tape_elems(m));
	set_tokens(m, tok);
	model_zero_grads(m);
	model_inject_forward(m);
	be->ops->fill(be->ctx, z0, 0.0, m->n_state);
	model_block_forward(m, z1, z0, m->u, tape);
	model_block_forward(m, z0, z1, m->u, NULL);
	double loss = model_head_forward(m, z0);
	model_head_backward(m);
	model_block_vjp(m, z1, m->gu, m->gz, tape, 1);
	model_inject_backward(m);
	loss += be->ops->norm(be->ctx, m->grad_buf, m->n_param_elems);
	free(tok);
	backend_free(be, z0);
	backend_free(be, z1);
	backend_free(be, tape);
	model_destroy(m);
	backend_destroy(be);
	return loss;
}

Test(trellis, same_seed_same_bits)
{
	double a = seeded_step(2024), b = seeded_step(2024),
	       c = seeded_step(2025);
	cr_assert(memcmp(&a, &b, sizeof(a)) == 0, "%.17g vs %.17g", a, b);
	cr_assert(a != c, "seed does not change the init");
}

/* ------------------------------------------- 6. table, sizes, flops */

Test(trellis, param_table_and_sizes)
{
	struct backend *be = make_be("cpu64");
	struct shape s = odd;
	struct model *m = make_model(be, s, 1);
	int64_t h = s.h, V = s.V, T = s.T;
	const struct {
		const char *name;
		int ndim;
		int64_t shape[3];
	} want[] = {
	    {"embed.weight", 2, {V, h, 0}},
	    {"pos_embed.weight", 2, {T, h, 0}},
	    {"inject.weight", 3, {4 * h, h, 2}},
	    {"inject.bias", 1, {4 * h, 0, 0}},
	    {"block.conv.weight", 3, {4 * h, h, 2}},
	    {"block.conv.bias", 1, {4 * h, 0, 0}},
	    {"head.weight", 2, {V, h, 0}},
	    {"head.bias", 1, {V, 0, 0}},
	};
	int n = (int)(sizeof(want) / sizeof(want[0]));
	cr_assert_eq(m->n_params, n);
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		const struct model_param *p = &m->params[i];
		size_t numel = 1;
		cr_assert_str_eq(p->name, want[i].name);
		cr_assert_eq(p->ndim, want[i].ndim, "%s", p->name);
		for (int k = 0; k < p->ndim; k++) {
			cr_assert_eq(p->shape[k], want[i].shape[k], "%s",
				     p->name);
			numel *= (size_t)want[i].shape[k];
		}
		cr_assert_eq(p->offset, off, "%s", p->name);
		cr_assert_eq(p->numel, numel, "%s", p->name);
		off += p->numel;
	}
	cr_assert_eq(m->n_param_elems, off);

	/* widths: state [h; c], injection four gates, head reads h */
	size_t N = (size_t)s.B * s.T;
	cr_assert_eq(m->d, 2 * s.h);
	cr_assert_eq(m->E, s.h);
	cr_assert_eq(m->U, 4 * s.h);
	cr_assert_eq(m->n_state, 2 * N * h);
	cr_assert_eq(m->n_u, 4 * N * h);
	/* tape 7 B T h, the formula in trellisnet.c */
	cr_assert_eq(model_tape_elems(m), 7 * N * h);
	/* workspace 8 B T h + 8 h² + 4 + max(B, h) */
	size_t mx = (size_t)(s.B > s.h ? s.B : s.h);
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

	/* init: weights N(0, 0.02), biases 0 */
	size_t np = m->n_param_elems;
	double *th = host(np);
	down(be, th, m->param_buf, np);
	for (int i = 0; i < n; i++) {
		const struct model_param *p = &m->params[i];
		const double *x = th + p->offset;
		if (strstr(p->name, "bias")) {
			for (size_t k = 0; k < p->numel; k++)
				cr_assert_eq(x[k], 0.0, "%s", p->name);
			continue;
		}
		double s1 = 0, s2 = 0;
		for (size_t k = 0; k < p->numel; k++) {
			s1 += x[k];
			s2 += x[k] * x[k];
		}
		double mean = s1 / p->numel, sd = sqrt(s2 / p->numel);
		/* ≥ 30 samples: sd within 35%, mean within 4 sd/sqrt(n) */
		cr_assert(fabs(sd - 0.02) < 0.35 * 0.02, "%s sd %g", p->name,
			  sd);
		cr_assert(fabs(mean) < 4 * 0.02 / sqrt((double)p->numel),
			  "%s mean %g", p->name, mean);
	}
	free(th);
	model_destroy(m);
	cr_assert_eq(be->mem.live_total, 0);

	/* n_heads and d_ff are not used; the model is created without them */
	struct model_config c = {MODEL_TRELLISNET, 5, 0, 0, 3, 1, 7, 1,
				 MODEL_INIT_GPT2,  0, 0};
	char err[256];
	cr_assert_eq(model_create(&m, be, &c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(model_tape_elems(m), 7 * 3 * 5);
	model_destroy(m);
	backend_destroy(be);
}

/* --------------------------------------------------------- 7. methods */

static struct method *make_method(struct model *m, struct method_config c)
{
	struct method *me = NULL;
	char err[256] = "";
	cr_assert_eq(method_create(&me, m, &c, err, sizeof(err)), 0,
		     "method_create: %s", err);
	return me;
}

static struct method_config cfg_of(enum method_kind k, int L, int kk)
{
	struct method_config c;
	method_config_defaults(&c);
	c.method = k;
	c.layers = L;
	c.k = kk;
	return c;
}

/* One training step; loss returned, gradients left in m->grad_buf. */
static double step(struct model *m, struct method *me, void *z)
{
	model_zero_grads(m);
	model_inject_forward(m);
	method_forward(me, m->u, z, 1);
	double loss = model_head_forward(m, z);
	model_head_backward(m);
	method_backward(me, m->gz, m->gu);
	model_inject_backward(m);
	return loss;
}

/* Loss, z, dL/du and every gradient, bitwise, on "cpu" (float: any
 * reordering would show): checkpoint runs the same block calls on the same
 * values in the same order as unroll. */
static void check_ckpt(struct shape s, int L, int k)
{
	struct backend *be = make_be("cpu");
	struct model *m = make_model(be, s, 8);
	size_t np = m->n_param_elems, nu = m->n_u, nd = m->n_state;
	double *th = host(np), *r[2][4];
	rng_state = 303;
	random_params(m, th);
	up(be, m->param_buf, th, np);
	int32_t *tok = random_tokens(m);
	set_tokens(m, tok);
	void *z = dev(be, nd);
	double loss[2];
	for (int v = 0; v < 2; v++) {
		struct method *me =
		    make_method(m, v ? cfg_of(METHOD_CHECKPOINT, L, k)
				     : cfg_of(METHOD_UNROLL, L, 0));
		loss[v] = step(m, me, z);
		r[v][0] = host(np);
		r[v][1] = host(nu);
		r[v][2] = host(nd);
		down(be, r[v][0], m->grad_buf, np);
		down(be, r[v][1], m->gu, nu);
		down(be, r[v][2], z, nd);
		method_destroy(me);
	}
	cr_assert(memcmp(&loss[0], &loss[1], sizeof(double)) == 0,
		  "L=%d k=%d: loss %.17g vs %.17g", L, k, loss[0], loss[1]);
	cr_assert(memcmp(r[0][1], r[1][1], nu * sizeof(double)) == 0);
	cr_assert(memcmp(r[0][2], r[1][2], nd * sizeof(double)) == 0);
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		cr_assert(memcmp(r[0][0] + p->offset, r[1][0] + p->offset,
				 p->numel * sizeof(double)) == 0,
			  "L=%d k=%d: grad %s differs", L, k, p->name);
	}
	for (int v = 0; v < 2; v++)
		for (int q = 0; q < 3; q++)
			free(r[v][q]);
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
	be->ops->fill(be->ctx, mo, 0.0, np);
	be->ops->fill(be->ctx, vo, 0.0, np);
	struct method *me = make_method(m, cfg_of(METHOD_UNROLL, 6, 0));
	for (int t = 1; t <= steps; t++) {
		double l = step(m, me, z);
		if (t == 1)
			*l0 = l;
		*l1 = l;
		be->ops->adam(be->ctx, m->param_buf, m->grad_buf, mo, vo, np,
			      1e-2, 0.9, 0.999, 1e-8, 0.0, t);
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
	struct model *m = make_model(be, s, 12);
	rng_state = 909 + (uint64_t)s.h;
	int32_t *tok = random_tokens(m);
	set_tokens(m, tok);
	double l0, l1;
	train_from_init(m, 40, &l0, &l1);
	cr_assert(l1 < l0 - 0.5, "training did not move: %g -> %g", l0, l1);
	const struct model_param *cw = model_param_find(m, "block.conv.weight");
	double *w = host(cw->numel);
	down(be, w, dq_at(be, m->param_buf, cw->offset), cw->numel);
	double rms = sqrt(hdot(w, w, cw->numel) / cw->numel);
	cr_assert(rms > 0.05, "conv weights still at init scale: rms %g", rms);
	free(w);

	size_t np = m->n_param_elems, nu = m->n_u, nd = m->n_state;
	void *z = dev(be, nd);
	struct method *un = make_method(m, cfg_of(METHOD_UNROLL, 200, 0));
	double lu = step(m, un, z);
	double *g1 = host(np), *u1 = host(nu), *z1 = host(nd);
	down(be, g1, m->grad_buf, np);
	down(be, u1, m->gu, nu);
	down(be, z1, z, nd);
	method_destroy(un);

	struct method_config c = cfg_of(METHOD_DEQ, 0, 0);
	c.f_solver = fs;
	c.b_solver = bs;
	c.f_tol = c.b_tol = 1e-12;
	c.f_stop_mode = c.b_stop_mode = STOP_ABS;
	c.f_max_iter = c.b_max_iter = 150;
	struct method *dq = make_method(m, c);
	double ld = step(m, dq, z);
	const struct method_stats *st = method_get_stats(dq);
	cr_assert(st->fwd.converged && st->fwd.residual <= 1e-12,
		  "%s forward: %d iters, residual %g", solver_kind_name(fs),
		  st->fwd.iters, st->fwd.residual);
	cr_assert(st->bwd.converged && st->bwd.residual <= 1e-12,
		  "%s backward: %d iters, residual %g", solver_kind_name(bs),
		  st->bwd.iters, st->bwd.residual);
	if (bs == SOLVER_FIXED_POINT)
		cr_assert_leq(st->bwd.iters, 60, "contraction rate too slow");
	double *g2 = host(np), *u2 = host(nu), *z2 = host(nd);
	down(be, g2, m->grad_buf, np);
	down(be, u2, m->gu, nu);
	down(be, z2, z, nd);

	cr_assert(fabs(lu - ld) <= 1e-10 * fabs(lu), "loss %.15g vs %.15g", lu,
		  ld);
	cr_assert_leq(rel_max_err(z2, z1, nd), 1e-10);
	cr_assert_leq(rel_max_err(u2, u1, nu), 1e-7, "dL/du: %g",
		      rel_max_err(u2, u1, nu));
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		double e =
		    rel_max_err(g2 + p->offset, g1 + p->offset, p->numel);
		cr_assert_leq(e, 1e-7, "%s/%s: grad %s rel err %g",
			      solver_kind_name(fs), solver_kind_name(bs),
			      p->name, e);
	}
	free(g1), free(g2), free(u1), free(u2), free(z1), free(z2), free(tok);
	method_destroy(dq);
	backend_free(be, z);
	model_destroy(m);
	backend_destroy(be);
}

Test(trellis, deq_ift_matches_unroll, .timeout = 300)
{
	check_deq(odd, SOLVER_BROYDEN, SOLVER_BROYDEN);
	check_deq(pow2, SOLVER_ANDERSON, SOLVER_FIXED_POINT);
}
