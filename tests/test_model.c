/*
 * test_model.c — models/ (model.c, transformer.c, tanh_cell.c) on the CPU
 * backends:
 *   1. the block vjp (gz_in, gu, every parameter gradient, every coordinate)
 *      against central finite differences of <R, f(z; u)> on "cpu64", at odd
 *      shapes (B=3 T=5 d=12 H=3 F=20 V=17) and powers of two (B=2 T=8 d=16
 *      H=4 F=32 V=32), for the transformer and tanh_cell;
 *   2. vjp flags: param_grads=0 leaves the gradients untouched, gu=NULL
 *      works, gz_in does not depend on either; two vjps add (+=);
 *   3. the whole LM loss (inject -> two block applications -> head) gradient
 *      of every parameter against finite differences (sampled coordinates);
 *   4. "cpu" (float) against "cpu64" forward and loss; NaN/inf; the same
 *      seed gives bitwise the same loss twice;
 *   5. the parameter table, init statistics, tape/workspace sizes and FLOPs
 *      against the documented formulas; bad configs and token ids return -1
 *      with a message and leave nothing allocated.
 *
 * Finite differences (double, ε = 1.1e-16): central quotient with h = 1e-6
 * (the scale of every perturbed value is O(1)): truncation h² f''' / 6 ~
 * 1e-13, rounding ~ ε |φ| / h with |φ| ≲ 1e2 → ~1e-8 per coordinate at the
 * very worst. Tolerance: |fd - an| ≤ 1e-6 (1 + max|an| of the tensor) per
 * element and ‖fd - an‖ / ‖an‖ ≤ 1e-6 per tensor; a wrong formula gives
 * O(max|an|) errors, 10⁵× above that. ReLU kinks: a pre-activation within
 * h of 0 makes the quotient mix the two slopes; such a coordinate is
 * re-checked at h/16 and h/256 (a kink that close is 16× less likely), a
 * real bug does not go away with smaller h.
 */
#include "models/model.h"

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
	int B, T, d, H, F, V;
};
static const struct shape odd = {3, 5, 12, 3, 20, 17};
static const struct shape pow2 = {2, 8, 16, 4, 32, 32};

static struct model *make_model(struct backend *be, enum model_kind kind,
				struct shape s, uint64_t seed)
{
	struct model_config c = {
	    .kind = kind,
	    .d_model = s.d,
	    .n_heads = s.H,
	    .d_ff = s.F,
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

/* Random parameters of O(1) effect, so every path of the block matters
 * (the default init makes attention nearly uniform): weights N(0, 1/in),
 * biases and embeddings N(0, 0.3²), LayerNorm weights 1 + N(0, 0.2²). */
static void random_params(const struct model *m, double *theta)
{
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		double *x = theta + p->offset;
		int ln = strstr(p->name, ".ln") != NULL;
		if (ln && strstr(p->name, "weight")) {
			for (size_t k = 0; k < p->numel; k++)
				x[k] = 1.0 + 0.2 * rnd_normal();
		} else if (p->ndim == 2) {
			double sd = 1.0 / sqrt((double)p->shape[1]);
			if (strcmp(p->name, "cell.weight") == 0)
				sd *= 0.5;
			rnd_fill(x, p->numel, sd);
		} else {
			rnd_fill(x, p->numel, 0.3);
		}
	}
}

/* ------------------------------------------------ objectives for the FD */

/* State of one FD experiment. Host copies are the truth; every objective
 * evaluation uploads them. lm = 0: φ = <R, f(z; u)>; lm = 1: φ = the LM
 * loss through `layers` block applications from z = 0. */
/* ---------------------------------------------------- block vjp vs FD */

static int is_block_param(const char *name)
{
	return strncmp(name, "block.", 6) == 0 ||
	       strncmp(name, "cell.", 5) == 0;
}

static void check_block(enum model_kind kind, struct shape s)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, kind, s, 7);
	struct fx f;
	rng_state = 1000 + (uint64_t)s.d;
	fx_init(&f, be, m, 0, 1, random_params);

	size_t nd = m->n_state, nu = m->n_u, np = m->n_param_elems;
	void *tape = dev(be, model_tape_elems(m));
	void *gz_in = dev(be, nd), *gz_out = dev(be, nd);
	model_block_forward(m, f.dout, f.dz, f.du, tape);
	up(be, gz_out, f.R, nd);
	model_zero_grads(m);
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);

	double *gz = host(nd), *gu = host(nu), *gth = host(np);
	down(be, gz, gz_in, nd);
	down(be, gu, m->gu, nu);
	down(be, gth, m->grad_buf, np);
	down(be, f.out, f.dout, nd);
	assert_finite(f.out, nd, "f");
	assert_finite(gz, nd, "gz_in");
	assert_finite(gth, np, "grads");

	fd_check(&f, "z", f.z, gz, nd, NULL, 0);
	fd_check(&f, "u", f.u, gu, nu, NULL, 0);
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		if (!is_block_param(p->name))
			continue;
		fd_check(&f, p->name, f.theta + p->offset, gth + p->offset,
			 p->numel, NULL, 0);
	}
	/* embeddings, injection and head do not enter the block */
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		if (is_block_param(p->name))
			continue;
		for (size_t k = 0; k < p->numel; k++)
			cr_assert_eq(gth[p->offset + k], 0.0, "%s", p->name);
	}

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

Test(model, transformer_vjp_odd)
{
	check_block(MODEL_TRANSFORMER, odd);
}

Test(model, transformer_vjp_pow2)
{
	check_block(MODEL_TRANSFORMER, pow2);
}

Test(model, tanh_cell_vjp_odd)
{
	check_block(MODEL_TANH_CELL, odd);
}

Test(model, tanh_cell_vjp_pow2)
{
	check_block(MODEL_TANH_CELL, pow2);
}

/* ------------------------------------------------ vjp flags and += rule */

static void check_flags(enum model_kind kind)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, kind, odd, 3);
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
	be->ops->fill(be->ctx, gz_in, 123.0, nd); /* overwritten, not += */
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

	/* two vjps from the sentinel values: grads = sent + 2 g, gu = usent +
	 * 3 g (one more above); gemm with beta = 1 may sum in another order,
	 * so compare to 1e-13 relative rather than bitwise */
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

	free(g1);
	free(g2);
	free(gu1);
	free(gu2);
	free(th1);
	free(th2);
	free(sent);
	free(usent);
	backend_free(be, tape);
	backend_free(be, gz_in);
	backend_free(be, gz_out);
	fx_free(&f);
	model_destroy(m);
	backend_destroy(be);
}

Test(model, transformer_vjp_flags)
{
	check_flags(MODEL_TRANSFORMER);
}

Test(model, tanh_cell_vjp_flags)
{
	check_flags(MODEL_TANH_CELL);
}

/* --------------------------------------------------- whole LM loss vs FD */

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

/* inject -> `layers` block applications from z = 0 -> head; backward the
 * way a method does it (head, vjps from the last application back, each
 * with gu +=, inject). Every parameter tensor is checked on 24 sampled
 * coordinates (all when smaller), with the rows of embed.weight that the
 * batch uses favoured so its gradient is not mostly zeros. */
static void check_lm(enum model_kind kind, struct shape s, int layers)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, kind, s, 11);
	struct fx f;
	char err[256];
	rng_state = 4242 + (uint64_t)s.V + (uint64_t)layers;
	fx_init(&f, be, m, 1, layers, random_params);
	int32_t *tok = random_tokens(m);
	cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), 0, "%s", err);

	size_t nd = m->n_state, np = m->n_param_elems, nt = model_tape_elems(m);
	char *tapes = dev(be, nt * (size_t)layers);
	void *zs[3] = {f.dz, f.dout, f.dtmp};
	void *g = dev(be, nd), *g2 = dev(be, nd);

	model_zero_grads(m);
	model_inject_forward(m);
	be->ops->fill(be->ctx, zs[0], 0.0, nd);
	for (int l = 0; l < layers; l++)
		model_block_forward(m, zs[(l + 1) % 2], zs[l % 2], m->u,
				    dq_at(be, tapes, nt * (size_t)l));
	/* zs[layers % 2] is the output; keep it alive through head_backward */
	double loss = model_head_forward(m, zs[layers % 2]);
	cr_assert(isfinite(loss));
	cr_assert(loss > 0 && loss < 3 * log((double)s.V), "loss %g", loss);
	model_head_backward(m);
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

	/* loss through the FD objective agrees with the one above */
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
				/* a used row of embed.weight */
				size_t r = (size_t)
				    tok[(k * 7) % (size_t)(m->B * m->T)];
				idx[k] = r * (size_t)m->d +
					 (size_t)(rnd_u01() * m->d) % m->d;
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

Test(model, transformer_lm_grad_odd)
{
	check_lm(MODEL_TRANSFORMER, odd, 2);
}

Test(model, transformer_lm_grad_pow2)
{
	check_lm(MODEL_TRANSFORMER, pow2, 3);
}

Test(model, tanh_cell_lm_grad_odd)
{
	check_lm(MODEL_TANH_CELL, odd, 2);
}

Test(model, tanh_cell_lm_grad_pow2)
{
	check_lm(MODEL_TANH_CELL, pow2, 3);
}

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
	size_t nd = md->n_state, nu = md->n_u, np = md->n_param_elems;
	double *z = host(nd), *u = host(nu), *of = host(nd), *od = host(nd),
	       *pf = host(np), *pd = host(np);
	char err[256];
	rng_state = 99;
	rnd_fill(z, nd, 1.0);
	rnd_fill(u, nu, 1.0);
	int32_t *tok = random_tokens(md);

	/* identical parameters up to float rounding */
	down(bf, pf, mf->param_buf, np);
	down(bd, pd, md->param_buf, np);
	for (size_t i = 0; i < np; i++)
		cr_assert_eq((float)pd[i], (float)pf[i], "param %zu", i);

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
		assert_finite(outs[k], nd, be->ops->name);
		cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), 0);
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
	free(pf);
	free(pd);
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

/* ------------------------------------------------------- determinism */

static double seeded_loss(uint64_t seed)
{
	struct backend *be = make_be("cpu");
	struct model *m = make_model(be, MODEL_TRANSFORMER, pow2, seed);
	char err[256];
	rng_state = 31;
	int32_t *tok = random_tokens(m);
	void *z0 = dev(be, m->n_state), *z1 = dev(be, m->n_state);
	void *tape = dev(be, model_tape_elems(m));
	cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), 0);
	model_zero_grads(m);
	model_inject_forward(m);
	be->ops->fill(be->ctx, z0, 0.0, m->n_state);
	model_block_forward(m, z1, z0, m->u, tape);
	model_block_forward(m, z0, z1, m->u, NULL);
	double loss = model_head_forward(m, z0);
	model_head_backward(m);
	model_block_vjp(m, z1, m->gu, m->gz, tape, 1);
	model_inject_backward(m);
	/* fold the gradient in, so it is compared too */
	loss += be->ops->norm(be->ctx, m->grad_buf, m->n_param_elems);
	free(tok);
	backend_free(be, z0);
	backend_free(be, z1);
	backend_free(be, tape);
	model_destroy(m);
	backend_destroy(be);
	return loss;
}

Test(model, same_seed_same_bits)
{
	double a = seeded_loss(2024), b = seeded_loss(2024),
	       c = seeded_loss(2025);
	cr_assert(memcmp(&a, &b, sizeof(a)) == 0, "%.17g vs %.17g", a, b);
	cr_assert(a != c, "seed does not change the init");
}

/* ------------------------------------------- table, init, sizes, flops */

Test(model, param_table)
{
	struct backend *be = make_be("cpu64");
	struct shape s = odd;
	struct model *m = make_model(be, MODEL_TRANSFORMER, s, 1);
	int64_t d = s.d, F = s.F, V = s.V, T = s.T;
	const struct {
		const char *name;
		int64_t r, c;
	} want[] = {
	    {"embed.weight", V, d},
	    {"pos_embed.weight", T, d},
	    {"inject.weight", 3 * d, d},
	    {"inject.bias", 3 * d, 0},
	    {"block.attn.qkv.weight", 3 * d, d},
	    {"block.attn.qkv.bias", 3 * d, 0},
	    {"block.attn.out.weight", d, d},
	    {"block.attn.out.bias", d, 0},
	    {"block.ln1.weight", d, 0},
	    {"block.ln1.bias", d, 0},
	    {"block.ff1.weight", F, d},
	    {"block.ff1.bias", F, 0},
	    {"block.ff2.weight", d, F},
	    {"block.ff2.bias", d, 0},
	    {"block.ln2.weight", d, 0},
	    {"block.ln2.bias", d, 0},
	    {"head.weight", V, d},
	    {"head.bias", V, 0},
	};
	int n = (int)(sizeof(want) / sizeof(want[0]));
	cr_assert_eq(m->n_params, n);
	size_t off = 0;
	for (int i = 0; i < n; i++) {
		const struct model_param *p = &m->params[i];
		cr_assert_str_eq(p->name, want[i].name);
		cr_assert_eq(p->ndim, want[i].c ? 2 : 1, "%s", p->name);
		cr_assert_eq(p->shape[0], want[i].r, "%s", p->name);
		if (want[i].c)
			cr_assert_eq(p->shape[1], want[i].c, "%s", p->name);
		cr_assert_eq(p->offset, off, "%s", p->name);
		cr_assert_eq(p->numel,
			     (size_t)(want[i].r * (want[i].c ? want[i].c : 1)));
		cr_assert_eq(model_param_find(m, p->name), p);
		off += p->numel;
	}
	cr_assert_eq(m->n_param_elems, off);
	cr_assert_null(model_param_find(m, "block.nope"));

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

	/* init: N(0, 0.02) weights, zero biases, LN weight 1 */
	size_t np = m->n_param_elems;
	double *th = host(np);
	down(be, th, m->param_buf, np);
	for (int i = 0; i < n; i++) {
		const struct model_param *p = &m->params[i];
		const double *x = th + p->offset;
		int ln = strstr(p->name, ".ln") != NULL;
		int bias = strstr(p->name, "bias") != NULL;
		if (ln || bias) {
			double want_v = (ln && !bias) ? 1.0 : 0.0;
			for (size_t k = 0; k < p->numel; k++)
				cr_assert_eq(x[k], want_v, "%s", p->name);
			continue;
		}
		double s1 = 0, s2 = 0;
		for (size_t k = 0; k < p->numel; k++) {
			s1 += x[k];
			s2 += x[k] * x[k];
		}
		double mean = s1 / p->numel, sd = sqrt(s2 / p->numel);
		/* ≥ 60 samples: sd within 35%, mean within 4 sd/sqrt(n) */
		cr_assert(fabs(sd - 0.02) < 0.35 * 0.02, "%s sd %g", p->name,
			  sd);
		cr_assert(fabs(mean) < 4 * 0.02 / sqrt((double)p->numel),
			  "%s mean %g", p->name, mean);
	}
	free(th);
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

static void expect_fail(struct model_config c, const char *needle)
{
	struct backend *be = make_be("cpu");
	struct model *m = (struct model *)0x1;
	char err[256] = "";
	cr_assert_eq(model_create(&m, be, &c, err, sizeof(err)), -1,
		     "expected failure for '%s'", needle);
	cr_assert_null(m);
	cr_assert(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err,
		  needle);
	cr_assert(strchr(err, '\n') == NULL);
	cr_assert_eq(be->mem.live_total, 0, "leaked %zu bytes",
		     be->mem.live_total);
	cr_assert_eq(be->mem.n_allocs, 0);
	backend_destroy(be);
}

Test(model, bad_config)
{
	struct model_config ok = {MODEL_TRANSFORMER, 12, 3, 20, 5, 3, 17, 1,
				  MODEL_INIT_GPT2,   0,	 0};
	struct model_config c = ok;
	c.d_model = 10;
	expect_fail(c, "d_model=10 is not divisible by n_heads=3");
	c = ok;
	c.d_model = 0;
	expect_fail(c, "d_model=0");
	c = ok;
	c.n_heads = -2;
	expect_fail(c, "n_heads=-2");
	c = ok;
	c.d_ff = 0;
	expect_fail(c, "d_ff=0");
	c = ok;
	c.seq_len = -1;
	expect_fail(c, "seq_len=-1");
	c = ok;
	c.batch_size = 0;
	expect_fail(c, "batch_size=0");
	c = ok;
	c.vocab_size = 0;
	expect_fail(c, "vocab_size=0");
	c = ok;
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
	struct model *m = NULL;
	char err[256];
	cr_assert_eq(model_create(&m, be, &c, err, sizeof(err)), 0, "%s", err);
	model_destroy(m);
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
