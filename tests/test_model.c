/*
 * test_model.c — models/ on the CPU backends: one harness run for every
 * model kind (transformer, tanh_cell, trellisnet; KIND_TESTS below), then
 * the tests of the transformer and tanh_cell alone (test_trellis.c has
 * trellisnet's own):
 *   1. the block vjp (gz_in, gu, every parameter gradient, every coordinate;
 *      each part of the state on its own, so trellisnet's c cannot hide
 *      behind h) against central finite differences of <R, f(z; u)> on
 *      "cpu64", at odd shapes and powers of two (shape_of);
 *   2. vjp flags: param_grads=0 leaves the gradients untouched, gu=NULL
 *      works, gz_in does not depend on either and is overwritten; two vjps
 *      add (+=); zero_grads clears;
 *   3. the whole LM loss (inject -> 2 or 3 block applications -> head)
 *      gradient of every parameter against finite differences (sampled
 *      coordinates); the head's dL/dz is 0 past the B·T·E elements it
 *      reads;
 *   4. the same seed gives bitwise the same loss and gradient twice;
 *   5. the chunked head (head_chunk): loss and every gradient equal the
 *      whole head's (cpu, cpu64; bitwise for head_chunk >= N), the head's
 *      peak shrinks by (N - head_chunk)·V elements, and 3. with it;
 *   6. transformer and tanh_cell: "cpu" (float) against "cpu64" forward and
 *      loss; NaN/inf; the parameter table, init statistics, tape/workspace
 *      sizes and FLOPs against the documented formulas; bad configs and
 *      token ids return -1 with a message and leave nothing allocated.
 *
 * Finite differences (double, ε = 1.1e-16): central quotient with h = 1e-6
 * (the scale of every perturbed value is O(1)): truncation h² f''' / 6 ~
 * 1e-13, rounding ~ ε |φ| / h with |φ| ≲ 1e2 → ~1e-8 per coordinate at the
 * very worst. Tolerance: |fd - an| ≤ 1e-6 (1 + max|an| of the tensor) per
 * element and ‖fd - an‖ / ‖an‖ ≤ 1e-6 per tensor; a wrong formula gives
 * O(max|an|) errors, 10⁵× above that. ReLU kinks (transformer): a
 * pre-activation within h of 0 makes the quotient mix the two slopes; such
 * a coordinate is re-checked at h/16 and h/256 (a kink that close is 16×
 * less likely), a real bug does not go away with smaller h. tanh_cell and
 * trellisnet (σ, tanh, products) are smooth.
 */
#include "models/model.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H   1e-6
#define FD_TOL 1e-6

#include "test_fd.h"

/* ------------------------------------------------------------- shapes */

static const struct shape odd = {3, 5, 12, 3, 20, 17};
static const struct shape pow2 = {2, 8, 16, 4, 32, 32};

/* The shapes the shared checks run at: odd sizes, or powers of two.
 * trellisnet's d is its hidden width h (the state [h; c] is 2h wide); it
 * takes no heads or d_ff. */
static struct shape shape_of(enum model_kind kind, int is_pow2)
{
	static const struct shape trellis[2] = {{3, 5, 6, 0, 0, 17},
						{2, 8, 8, 0, 0, 32}};
	if (kind == MODEL_TRELLISNET)
		return trellis[is_pow2];
	return is_pow2 ? pow2 : odd;
}

/* ---------------------------------------------------- 1. block vjp vs FD */

static int is_block_param(const char *name)
{
	return strncmp(name, "block.", 6) == 0 ||
	       strncmp(name, "cell.", 5) == 0;
}

static void check_block(enum model_kind kind, int is_pow2)
{
	struct fx f;
	struct fx_grads g;
	fx_open_block(&f, &g, kind, shape_of(kind, is_pow2));
	struct model *m = f.m;
	size_t nd = m->n_state, np = m->n_param_elems;
	assert_finite(f.out, nd, "f");
	assert_finite(g.z, nd, "gz_in");
	assert_finite(g.theta, np, "grads");

	/* each part of the state (model.h: state_parts) on its own */
	size_t part = nd / (size_t)m->state_parts;
	for (int q = 0; q < m->state_parts; q++) {
		char what[32];
		snprintf(what, sizeof(what), "z part %d of %d", q,
			 m->state_parts);
		fd_check(&f, what, f.z + q * part, g.z + q * part, part, NULL,
			 0);
	}
	fd_check(&f, "u", f.u, g.u, m->n_u, NULL, 0);
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		if (is_block_param(p->name)) {
			fd_check(&f, p->name, f.theta + p->offset,
				 g.theta + p->offset, p->numel, NULL, 0);
			continue;
		}
		/* embeddings, injection and head do not enter the block */
		for (size_t k = 0; k < p->numel; k++)
			cr_assert_eq(g.theta[p->offset + k], 0.0, "%s",
				     p->name);
	}

	fx_close(&f, &g);
}

/* ------------------------------------------------ 2. vjp flags, += rule */

static void check_flags(enum model_kind kind)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, kind, shape_of(kind, 0), 3);
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

	/* reference: one vjp into zeroed grads */
	model_zero_grads(m);
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);
	down(be, g1, gz_in, nd);
	down(be, gu1, m->gu, nu);
	down(be, th1, m->grad_buf, np);

	/* param_grads = 0, gu = NULL: grads and gu bitwise untouched, gz_in
	 * the same bits (the same ops in the same order compute it) */
	rnd_fill(sent, np, 1.0);
	rnd_fill(usent, nu, 1.0);
	up(be, m->grad_buf, sent, np);
	up(be, m->gu, usent, nu);
	be_fill(be, gz_in, 123.0, nd); /* overwritten, not += */
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

	/* gu given, param_grads = 0: gu += only */
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 0);
	down(be, gu2, m->gu, nu);
	for (size_t i = 0; i < nu; i++)
		cr_assert(fabs(gu2[i] - (usent[i] + gu1[i])) <=
			      1e-14 * (1 + fabs(gu2[i])),
			  "gu += at %zu", i);

	/* two vjps from the sentinel values (gu reset to them): grads = sent
	 * + 2 g, gu = usent + 2 g; gemm with beta = 1 may sum in another
	 * order, so compare to 1e-13 relative rather than bitwise */
	up(be, m->gu, usent, nu);
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);
	down(be, th2, m->grad_buf, np);
	down(be, gu2, m->gu, nu);
	for (size_t i = 0; i < np; i++)
		cr_assert(fabs(th2[i] - (sent[i] + 2 * th1[i])) <=
			      1e-13 * (1 + fabs(th2[i])),
			  "grads += at %zu: %g vs %g", i, th2[i],
			  sent[i] + 2 * th1[i]);
	for (size_t i = 0; i < nu; i++)
		cr_assert(fabs(gu2[i] - (usent[i] + 2 * gu1[i])) <=
			      1e-13 * (1 + fabs(gu2[i])),
			  "gu += at %zu", i);

	/* zero_grads clears grads and gu */
	model_zero_grads(m);
	down(be, th2, m->grad_buf, np);
	down(be, gu2, m->gu, nu);
	for (size_t i = 0; i < np; i++)
		cr_assert_eq(th2[i], 0.0);
	for (size_t i = 0; i < nu; i++)
		cr_assert_eq(gu2[i], 0.0);

	free(g1), free(g2), free(gu1), free(gu2), free(th1), free(th2),
	    free(sent), free(usent);
	backend_free(be, tape);
	backend_free(be, gz_in);
	backend_free(be, gz_out);
	fx_close(&f, NULL);
}

/* --------------------------------------------------- 3. whole LM loss */

enum { LM_COORDS = 24 };

/* LM_COORDS coordinates of parameter i (all when it has fewer) into idx,
 * their count returned: random ones, but for embed.weight every other one
 * in the row of an input token of the batch, so that its mostly-zero
 * gradient is checked where it is not 0. */
static size_t lm_coords(const struct model *m, int i, const int32_t *tok,
			size_t idx[LM_COORDS])
{
	const struct model_param *p = &m->params[i];
	size_t n = p->numel < LM_COORDS ? p->numel : LM_COORDS;
	size_t T = (size_t)m->T, E = (size_t)m->E;
	for (size_t k = 0; k < n; k++) {
		if (p->numel <= LM_COORDS) {
			idx[k] = k;
		} else if (i == 0 && k % 2 == 0) {
			size_t bt = (k * 7) % ((size_t)m->B * T);
			size_t row = (size_t)tok[bt / T * (T + 1) + bt % T];
			idx[k] = row * E + (size_t)(rnd_u01() * E) % E;
		} else {
			idx[k] = (size_t)(rnd_u01() * p->numel) % p->numel;
		}
	}
	return n;
}

/* inject -> `layers` block applications from z = 0 -> head (head_chunk
 * hc); backward the way a method does it (head, vjps from the last
 * application back, each with gu +=, inject). Every parameter tensor is
 * checked on lm_coords. */
static void check_lm(enum model_kind kind, int is_pow2, int layers, int hc)
{
	struct shape s = shape_of(kind, is_pow2);
	struct backend *be = make_be("cpu64");
	struct model_config cfg = model_cfg(kind, s, 11);
	cfg.head_chunk = hc;
	struct model *m = model_of(be, &cfg);
	struct fx f;
	rng_state = 4242 + (uint64_t)s.V + (uint64_t)layers;
	fx_init(&f, be, m, 1, layers, random_params);
	int32_t *tok = random_tokens(m);
	load_tokens(m, tok);

	size_t nd = m->n_state, np = m->n_param_elems, nt = model_tape_elems(m);
	char *tapes = dev(be, nt * (size_t)layers);
	void *zs[2] = {f.dz, f.dout};
	void *g = dev(be, nd), *g2 = dev(be, nd);

	model_zero_grads(m);
	model_inject_forward(m);
	be_fill(be, zs[0], 0.0, nd);
	for (int l = 0; l < layers; l++)
		model_block_forward(m, zs[(l + 1) % 2], zs[l % 2], m->u,
				    dq_at(be, tapes, nt * (size_t)l));
	/* zs[layers % 2] is the output; keep it alive through head_backward */
	double loss = model_head_forward(m, zs[layers % 2]);
	cr_assert(isfinite(loss));
	cr_assert(loss > 0 && loss < 3 * log((double)s.V), "loss %g", loss);
	model_head_backward(m);
	double *gzh = host(nd);
	down(be, gzh, m->gz, nd);
	for (size_t k = (size_t)m->B * m->T * m->E; k < nd; k++)
		cr_assert_eq(gzh[k], 0.0, "gz past what the head reads: %zu",
			     k);
	free(gzh);
	be_copy(be, g, m->gz, nd);
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

	/* loss through the FD objective agrees with the one above */
	cr_assert(fabs(fx_eval(&f) - loss) <= 1e-13 * loss);

	size_t idx[LM_COORDS];
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		size_t n = lm_coords(m, i, tok, idx);
		fd_check(&f, p->name, f.theta + p->offset, gth + p->offset,
			 p->numel, idx, n);
	}

	free(gth);
	free(tok);
	backend_free(be, tapes);
	backend_free(be, g);
	backend_free(be, g2);
	fx_close(&f, NULL);
}

/* --------------------------------------------------- 4. determinism */

/* A step (inject, two layers, head, the vjp of the first layer, inject
 * backward) on "cpu" from the seeded init: the loss plus the gradient
 * norm, so the gradient is compared too. */
static double seeded_loss(enum model_kind kind, uint64_t seed)
{
	struct backend *be = make_be("cpu");
	struct model *m = make_model(be, kind, shape_of(kind, 1), seed);
	rng_state = 31;
	int32_t *tok = random_tokens(m);
	void *z0 = dev(be, m->n_state), *z1 = dev(be, m->n_state);
	void *tape = dev(be, model_tape_elems(m));
	load_tokens(m, tok);
	model_zero_grads(m);
	model_inject_forward(m);
	be_fill(be, z0, 0.0, m->n_state);
	model_block_forward(m, z1, z0, m->u, tape);
	model_block_forward(m, z0, z1, m->u, NULL);
	double loss = model_head_forward(m, z0);
	model_head_backward(m);
	model_block_vjp(m, z1, m->gu, m->gz, tape, 1);
	model_inject_backward(m);
	loss += be_norm(be, m->grad_buf, m->n_param_elems);
	free(tok);
	backend_free(be, z0);
	backend_free(be, z1);
	backend_free(be, tape);
	model_destroy(m);
	backend_destroy(be);
	return loss;
}

static void check_same_seed(enum model_kind kind)
{
	double a = seeded_loss(kind, 2024), b = seeded_loss(kind, 2024),
	       c = seeded_loss(kind, 2025);
	cr_assert(memcmp(&a, &b, sizeof(a)) == 0, "%.17g vs %.17g", a, b);
	cr_assert(a != c, "seed does not change the init");
}

/* ------------------------------------------------ 5. chunked head */

/* One LM step on backend `bn` (inject, two block applications from z = 0,
 * head, both vjps, inject backward) of kind at the odd shape (N = 15) with
 * head_chunk hc, from parameters theta and tokens tok: returns the loss;
 * the gradient into g (n_param_elems), the head's peak bytes into *head. */
static double chunk_step(const char *bn, enum model_kind kind, int hc,
			 int train, const double *theta, const int32_t *tok,
			 double *g, size_t *head)
{
	struct backend *be = make_be(bn);
	struct model_config c = model_cfg(kind, shape_of(kind, 0), 3);
	c.head_chunk = hc;
	struct model *m = model_of(be, &c);
	size_t nd = m->n_state, nt = model_tape_elems(m);
	void *z0 = dev(be, nd), *z1 = dev(be, nd), *t0 = dev(be, nt),
	     *t1 = dev(be, nt);
	up(be, m->param_buf, theta, m->n_param_elems);
	load_tokens(m, tok);
	model_zero_grads(m);
	model_inject_forward(m);
	be_fill(be, z0, 0.0, nd);
	model_block_forward(m, z1, z0, m->u, t0);
	model_block_forward(m, z0, z1, m->u, t1);
	double loss =
	    train ? model_head_forward_train(m, z0) : model_head_forward(m, z0);
	model_head_backward(m);
	model_block_vjp(m, z1, m->gu, m->gz, t1, 1);
	model_block_vjp(m, z0, m->gu, z1, t0, 1);
	model_inject_backward(m);
	down(be, g, m->grad_buf, m->n_param_elems);
	*head = be->mem.peak[MEM_HEAD];
	backend_free(be, z0);
	backend_free(be, z1);
	backend_free(be, t0);
	backend_free(be, t1);
	model_destroy(m);
	backend_destroy(be);
	return loss;
}

/* head_chunk ∈ {1, 5 (divides N = 15), 4 (does not), 15, 40 (≥ N)}: loss
 * and every parameter gradient equal the unchunked head's, on "cpu" within
 * 1e-5 (relative; per tensor against 1 + its max |g|: float rounding of
 * the per-chunk sums) and on "cpu64" within 1e-12; bitwise for K ≥ N. The
 * head's peak shrinks by exactly (N − K)·V elements. A training step's
 * head (model_head_forward_train: xent_train's fused softmax and backward,
 * each chunk's backward with its forward) gives bitwise the loss of
 * forward, then backward, and its gradients within the same tolerance. */
static void check_head_chunk(enum model_kind kind)
{
	static const int chunks[] = {1, 5, 4, 15, 40};
	static const char *const bns[] = {"cpu", "cpu64"};
	static const double tol[] = {1e-5, 1e-12};
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, kind, shape_of(kind, 0), 3);
	size_t np = m->n_param_elems, N = (size_t)m->B * m->T, h0, h;
	size_t V = (size_t)m->cfg.vocab_size;
	double *theta = host(np), *g0 = host(np), *g = host(np), *gt = host(np);
	rng_state = 77;
	random_params(m, theta);
	int32_t *tok = random_tokens(m);
	for (int b = 0; b < 2; b++) {
		double l0 = chunk_step(bns[b], kind, 0, 0, theta, tok, g0, &h0);
		for (size_t k = 0; k < sizeof(chunks) / sizeof(*chunks); k++) {
			int K = chunks[k];
			double l =
			    chunk_step(bns[b], kind, K, 0, theta, tok, g, &h);
			double lt =
			    chunk_step(bns[b], kind, K, 1, theta, tok, gt, &h);
			cr_assert(memcmp(&l, &lt, sizeof(l)) == 0,
				  "%s K=%d: forward_train's loss differs",
				  bns[b], K);
			size_t rows = (size_t)K < N ? (size_t)K : N;
			size_t el = b ? sizeof(double) : sizeof(float);
			cr_assert_eq(h0 - h, (N - rows) * V * el, "%s K=%d",
				     bns[b], K);
			cr_assert(fabs(l - l0) <= tol[b] * l0,
				  "%s K=%d loss %.17g vs %.17g", bns[b], K, l,
				  l0);
			if ((size_t)K >= N)
				cr_assert(memcmp(&l, &l0, sizeof(l)) == 0 &&
					      memcmp(g, g0, np * sizeof(*g)) ==
						  0,
					  "K=%d >= N is not bitwise", K);
			for (int i = 0; i < m->n_params; i++) {
				const struct model_param *p = &m->params[i];
				double mx = 0, err = 0;
				for (size_t j = p->offset;
				     j < p->offset + p->numel; j++) {
					mx = fmax(mx, fabs(g0[j]));
					err = fmax(err, fabs(g[j] - g0[j]));
					err = fmax(err, fabs(gt[j] - g0[j]));
				}
				cr_assert(err <= tol[b] * (1 + mx),
					  "%s K=%d %s: err %g, max %g", bns[b],
					  K, p->name, err, mx);
			}
		}
	}
	free(theta), free(g0), free(g), free(gt), free(tok);
	model_destroy(m);
	backend_destroy(be);
}

/* ------------------------------------------ every kind, every check */

/* The shared checks of one model kind as Criterion tests named
 * model/<name>_<check>. A new kind adds one line below and its shapes to
 * shape_of. */
#define KIND_TESTS(name, kind)                                                 \
	Test(model, name##_vjp_odd)                                            \
	{                                                                      \
		check_block(kind, 0);                                          \
	}                                                                      \
	Test(model, name##_vjp_pow2)                                           \
	{                                                                      \
		check_block(kind, 1);                                          \
	}                                                                      \
	Test(model, name##_vjp_flags)                                          \
	{                                                                      \
		check_flags(kind);                                             \
	}                                                                      \
	Test(model, name##_lm_grad_odd)                                        \
	{                                                                      \
		check_lm(kind, 0, 2, 0);                                       \
	}                                                                      \
	Test(model, name##_lm_grad_pow2)                                       \
	{                                                                      \
		check_lm(kind, 1, 3, 0);                                       \
	}                                                                      \
	Test(model, name##_same_seed_same_bits)                                \
	{                                                                      \
		check_same_seed(kind);                                         \
	}                                                                      \
	Test(model, name##_lm_grad_head_chunk)                                 \
	{                                                                      \
		check_lm(kind, 0, 2, 4);                                       \
	}                                                                      \
	Test(model, name##_head_chunk_equals_whole)                            \
	{                                                                      \
		check_head_chunk(kind);                                        \
	}

KIND_TESTS(transformer, MODEL_TRANSFORMER)
KIND_TESTS(tanh_cell, MODEL_TANH_CELL)
KIND_TESTS(trellisnet, MODEL_TRELLISNET)

/* --------------------------------------------- float vs double, NaN/inf */

/* The default init on both, the same random z and u: the float block
 * output and loss agree with the double ones. Float rounds every value to
 * 2^-24 ≈ 6e-8 relative; sums over ≤ 3d = 48 terms and two LayerNorms
 * (inputs O(1), rstd O(1)) keep the error ~1e-6; tolerance 1e-4 absolute on
 * O(1) outputs, 1e-5 relative on the loss. */
static void check_float(enum model_kind kind, struct shape s)
{
	struct backend *bf = make_be("cpu"), *bd = make_be("cpu64");
	struct model *mf = make_model(bf, kind, s, 5),
		     *md = make_model(bd, kind, s, 5);
	size_t nd = md->n_state, nu = md->n_u;
	double *z = host(nd), *u = host(nu), *of = host(nd), *od = host(nd);
	rng_state = 99;
	rnd_fill(z, nd, 1.0);
	rnd_fill(u, nu, 1.0);
	int32_t *tok = random_tokens(md);
	assert_same_init(mf, md);

	struct backend *bes[2] = {bf, bd};
	struct model *ms[2] = {mf, md};
	double *outs[2] = {of, od}, loss[2];
	for (int k = 0; k < 2; k++) {
		struct backend *be = bes[k];
		struct model *m = ms[k];
		void *dz = dev(be, nd), *du = dev(be, nu), *o = dev(be, nd),
		     *tape = dev(be, model_tape_elems(m));
		up(be, dz, z, nd);
		up(be, du, u, nu);
		model_block_forward(m, o, dz, du, tape);
		down(be, outs[k], o, nd);
		assert_finite(outs[k], nd, be_name(be));
		load_tokens(m, tok);
		model_inject_forward(m);
		model_block_forward(m, o, m->u, m->u, NULL); /* z = u[:, :d] */
		loss[k] = model_head_forward(m, o);
		cr_assert(isfinite(loss[k]));
		backend_free(be, dz);
		backend_free(be, du);
		backend_free(be, o);
		backend_free(be, tape);
	}
	for (size_t i = 0; i < nd; i++)
		cr_assert(fabs(of[i] - od[i]) <= 1e-4, "f[%zu]: %g vs %g", i,
			  of[i], od[i]);
	cr_assert(fabs(loss[0] - loss[1]) <= 1e-5 * loss[1], "loss %g vs %g",
		  loss[0], loss[1]);
	/* default init: logits ≈ 0, so the loss is about log V */
	cr_assert(fabs(loss[1] - log((double)s.V)) < 0.1, "loss %g, log V %g",
		  loss[1], log((double)s.V));
	free(z);
	free(u);
	free(of);
	free(od);
	free(tok);
	model_destroy(mf);
	model_destroy(md);
	backend_destroy(bf);
	backend_destroy(bd);
}

Test(model, float_vs_double)
{
	check_float(MODEL_TRANSFORMER, odd);
	check_float(MODEL_TRANSFORMER, pow2);
	check_float(MODEL_TANH_CELL, odd);
	check_float(MODEL_TANH_CELL, pow2);
}

/* NaN in z propagates to f (no silent clamping) and inf in u too. */
Test(model, nonfinite_propagates)
{
	struct backend *be = make_be("cpu");
	struct model *m = make_model(be, MODEL_TRANSFORMER, odd, 1);
	size_t nd = m->n_state, nu = m->n_u;
	double *z = host(nd), *u = host(nu), *o = host(nd);
	void *dz = dev(be, nd), *du = dev(be, nu), *dout = dev(be, nd);
	rng_state = 5;
	rnd_fill(z, nd, 1.0);
	rnd_fill(u, nu, 1.0);
	z[0] = NAN;
	up(be, dz, z, nd);
	up(be, du, u, nu);
	model_block_forward(m, dout, dz, du, NULL);
	down(be, o, dout, nd);
	cr_assert(isnan(o[0]), "NaN at (b=0, t=0) is lost: %g", o[0]);
	z[0] = 0;
	u[nu - 1] = INFINITY;
	up(be, dz, z, nd);
	up(be, du, u, nu);
	model_block_forward(m, dout, dz, du, NULL);
	down(be, o, dout, nd);
	cr_assert(!isfinite(o[nd - 1]), "inf at the last position is lost");
	cr_assert(isfinite(o[0]), "position 0 cannot see the last one");
	free(z);
	free(u);
	free(o);
	backend_free(be, dz);
	backend_free(be, du);
	backend_free(be, dout);
	model_destroy(m);
	backend_destroy(be);
}

/* ------------------------------------------- table, init, sizes, flops */

Test(model, param_table)
{
	struct backend *be = make_be("cpu64");
	struct shape s = odd;
	struct model *m = make_model(be, MODEL_TRANSFORMER, s, 1);
	int64_t d = s.d, F = s.F, V = s.V, T = s.T;
	const struct param_want want[] = {
	    {"embed.weight", 2, {V, d}},
	    {"pos_embed.weight", 2, {T, d}},
	    {"inject.weight", 2, {3 * d, d}},
	    {"inject.bias", 1, {3 * d}},
	    {"block.attn.qkv.weight", 2, {3 * d, d}},
	    {"block.attn.qkv.bias", 1, {3 * d}},
	    {"block.attn.out.weight", 2, {d, d}},
	    {"block.attn.out.bias", 1, {d}},
	    {"block.ln1.weight", 1, {d}},
	    {"block.ln1.bias", 1, {d}},
	    {"block.ff1.weight", 2, {F, d}},
	    {"block.ff1.bias", 1, {F}},
	    {"block.ff2.weight", 2, {d, F}},
	    {"block.ff2.bias", 1, {d}},
	    {"block.ln2.weight", 1, {d}},
	    {"block.ln2.bias", 1, {d}},
	    {"head.weight", 2, {V, d}},
	    {"head.bias", 1, {V}},
	};
	size_t off = assert_param_table(m, want, sizeof(want) / sizeof(*want));

	/* memory per category: one params and one grads allocation */
	cr_assert_eq(be->mem.live[MEM_PARAMS], off * 8);
	cr_assert_eq(be->mem.live[MEM_GRADS], off * 8);
	size_t N = (size_t)s.B * s.T;
	cr_assert_eq(be->mem.live[MEM_HEAD],
		     2 * N * 4 + 8 * (2 * N * d + 2 * N * 3 * d + N * V));
	cr_assert_eq(be->mem.live[MEM_DEPTH], 0);

	/* tape: N (8d + F + 4) + B H T², the formula in transformer.c */
	size_t tape = N * (8 * d + F + 4) + (size_t)s.B * s.H * T * T;
	cr_assert_eq(model_tape_elems(m), tape);
	/* workspace: max(tape, N (2d + max(F, 3d)) + B H T² + 2d) */
	size_t w = (size_t)(F > 3 * d ? F : 3 * d);
	size_t vs = N * (2 * d + w) + (size_t)s.B * s.H * T * T + 2 * d;
	cr_assert_eq(be->mem.live[MEM_WORKSPACE], 8 * (tape > vs ? tape : vs));
	/* flops: 2N(4d² + 2dF) + 4 B T² d */
	double fl = 2.0 * N * (4.0 * d * d + 2.0 * d * F) +
		    4.0 * s.B * (double)T * T * d;
	cr_assert_eq(model_block_flops(m), fl);

	/* init: N(0, 0.02) weights, zero biases, LN weight 1 (≥ 60 samples) */
	assert_default_init(m);
	model_destroy(m);
	cr_assert_eq(be->mem.live_total, 0);
	backend_destroy(be);
}

Test(model, tanh_cell_table_and_init)
{
	struct backend *be = make_be("cpu64");
	struct shape s = {2, 4, 64, 1, 1, 10};
	struct model *m = make_model(be, MODEL_TANH_CELL, s, 9);
	const char *names[] = {
	    "embed.weight", "pos_embed.weight", "inject.weight", "inject.bias",
	    "cell.weight",  "head.weight",	"head.bias"};
	cr_assert_eq(m->n_params, 7);
	for (int i = 0; i < 7; i++)
		cr_assert_str_eq(m->params[i].name, names[i]);
	const struct model_param *c = model_param_find(m, "cell.weight");
	cr_assert_eq(c->shape[0], 64);
	cr_assert_eq(c->shape[1], 64);
	cr_assert_eq(model_param_find(m, "inject.weight")->shape[0], 64);
	cr_assert_eq(m->U, 64);
	cr_assert_eq(model_tape_elems(m), 2 * m->n_state);
	cr_assert_eq(model_block_flops(m), 2.0 * 8 * 64 * 64);

	/* spectral norm of cell.weight by power iteration: ≈ 0.5 */
	double *w = host(c->numel), *v = host(64), *wv = host(64);
	down(be, w, dq_at(be, m->param_buf, c->offset), c->numel);
	for (int i = 0; i < 64; i++)
		v[i] = 1.0;
	double sn = 0;
	for (int it = 0; it < 200; it++) {
		/* v <- Wᵀ W v / ‖.‖ */
		for (int i = 0; i < 64; i++)
			wv[i] = hdot(w + i * 64, v, 64);
		double nv = 0;
		for (int j = 0; j < 64; j++) {
			v[j] = 0;
			for (int i = 0; i < 64; i++)
				v[j] += w[i * 64 + j] * wv[i];
			nv += v[j] * v[j];
		}
		nv = sqrt(nv);
		sn = sqrt(nv);
		for (int j = 0; j < 64; j++)
			v[j] /= nv;
	}
	cr_assert(sn > 0.35 && sn < 0.65, "‖cell.weight‖₂ = %g", sn);
	free(w);
	free(v);
	free(wv);
	model_destroy(m);
	backend_destroy(be);
}

/* ------------------------------------------------------- bad input */

/* assert_model_refused on a fresh "cpu" backend. */
static void expect_fail(struct model_config c, const char *needle)
{
	struct backend *be = make_be("cpu");
	assert_model_refused(be, &c, needle);
	backend_destroy(be);
}

#define CFG_FIELD(f) offsetof(struct model_config, f)

Test(model, bad_config)
{
	const struct model_config ok = model_cfg(MODEL_TRANSFORMER, odd, 1);
	/* one int field of ok changed, and the message it must give */
	const struct {
		size_t field;
		int value;
		const char *needle;
	} bad[] = {
	    {CFG_FIELD(d_model), 10,
	     "d_model=10 is not divisible by n_heads=3"},
	    {CFG_FIELD(d_model), 0, "d_model=0"},
	    {CFG_FIELD(n_heads), -2, "n_heads=-2"},
	    {CFG_FIELD(d_ff), 0, "d_ff=0"},
	    {CFG_FIELD(seq_len), -1, "seq_len=-1"},
	    {CFG_FIELD(batch_size), 0, "batch_size=0"},
	    {CFG_FIELD(vocab_size), 0, "vocab_size=0"},
	    {CFG_FIELD(head_chunk), -1, "head_chunk=-1 must be >= 0"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct model_config c = ok;
		memcpy((char *)&c + bad[i].field, &bad[i].value, sizeof(int));
		expect_fail(c, bad[i].needle);
	}
	struct model_config c = ok;
	c.kind = MODEL_TRELLISNET; /* its weight transposition needs 4 d² */
	c.d_model = 30000;	   /* <= INT_MAX (models/trellisnet.c) */
	expect_fail(c, "d_model=30000 is too large for model=trellisnet");
	/* tanh_cell ignores n_heads and d_ff */
	c = ok;
	c.kind = MODEL_TANH_CELL;
	c.n_heads = 0;
	c.d_ff = 0;
	c.d_model = 10;
	struct backend *be = make_be("cpu");
	model_destroy(model_of(be, &c));
	cr_assert_eq(be->mem.live_total, 0);
	backend_destroy(be);

	cr_assert_eq(model_kind_parse("transformer"), MODEL_TRANSFORMER);
	cr_assert_eq(model_kind_parse("tanh_cell"), MODEL_TANH_CELL);
	cr_assert_eq(model_kind_parse("trellisnet"), MODEL_TRELLISNET);
	cr_assert_eq(model_kind_parse("lstm"), -1);
	cr_assert_str_eq(model_kind_name(MODEL_TANH_CELL), "tanh_cell");
}

Test(model, bad_tokens)
{
	struct backend *be = make_be("cpu");
	struct model *m = make_model(be, MODEL_TRANSFORMER, odd, 1);
	char err[256] = "";
	rng_state = 8;
	int32_t *tok = random_tokens(m);
	cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), 0, "%s", err);
	/* the last column is a target only; still checked */
	tok[2 * (m->T + 1) + m->T] = 17;
	cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), -1);
	cr_assert(strstr(err, "token id 17") && strstr(err, "vocab_size=17"),
		  "%s", err);
	tok[2 * (m->T + 1) + m->T] = 0;
	tok[1] = -3;
	cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), -1);
	cr_assert(strstr(err, "token id -3"), "%s", err);
	free(tok);
	model_destroy(m);
	cr_assert_eq(be->mem.live_total, 0);
	backend_destroy(be);
}
