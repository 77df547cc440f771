/* test_model_util.h — models for the tests, of every kind: a shape, the
 * model_config it gives and model_create that fails the test on error;
 * random O(1) parameters and random token batches drawn from test_util.h's
 * rng_state; the checks of a parameter table and of the default (gpt2)
 * init. Header-only, static inline, so each test executable takes only
 * what it uses. */
#ifndef DQ_TEST_MODEL_UTIL_H
#define DQ_TEST_MODEL_UTIL_H

#include <string.h>

#include "models/model.h"
#include "test_util.h"

/* Sizes of a test model: B batch, T sequence, d d_model (trellisnet: its
 * hidden width h), H heads and F d_ff (transformer only; 0 where unused),
 * V vocabulary. */
struct shape {
	int B, T, d, H, F, V;
};

/* The config of a model of kind with shape s, init seed `seed`, the other
 * keys at their defaults (gpt2 init). */
static inline struct model_config model_cfg(enum model_kind kind,
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
	return c;
}

/* model_create of c on be; fails the test on error. */
static inline struct model *model_of(struct backend *be,
				     const struct model_config *c)
{
	struct model *m = NULL;
	char err[256] = "";
	cr_assert_eq(model_create(&m, be, c, err, sizeof(err)), 0,
		     "model_create: %s", err);
	return m;
}

static inline struct model *make_model(struct backend *be, enum model_kind kind,
				       struct shape s, uint64_t seed)
{
	struct model_config c = model_cfg(kind, s, seed);
	return model_of(be, &c);
}

/* Random parameters of O(1) effect, so every path of the block matters
 * (the default init makes attention nearly uniform and every gate nearly
 * constant), into theta (n_param_elems, host): LayerNorm weights
 * 1 + N(0, 0.2²); weights N(0, 1/fan_in), fan_in = in · kernel for the
 * convolutions, cell.weight half that scale (a contraction); embeddings
 * N(0, 1/d) for the transformer and tanh_cell; everything else (biases,
 * trellisnet's embeddings) N(0, 0.3²). */
static inline void random_params(const struct model *m, double *theta)
{
	int trellis = m->cfg.kind == MODEL_TRELLISNET;
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		double *x = theta + p->offset;
		int ln = strstr(p->name, ".ln") != NULL;
		int embed = strstr(p->name, "embed") != NULL;
		if (ln && strstr(p->name, "weight")) {
			for (size_t k = 0; k < p->numel; k++)
				x[k] = 1.0 + 0.2 * rnd_normal();
		} else if (p->ndim >= 2 && !(trellis && embed)) {
			double fan = (double)p->shape[1] *
				     (double)(p->ndim == 3 ? p->shape[2] : 1);
			double sd = 1.0 / sqrt(fan);
			if (strcmp(p->name, "cell.weight") == 0)
				sd *= 0.5;
			rnd_fill(x, p->numel, sd);
		} else {
			rnd_fill(x, p->numel, 0.3);
		}
	}
}

/* model_create of c on be is refused: -1, the model pointer NULL, a
 * one-line message containing needle, nothing left allocated on be. */
static inline void assert_model_refused(struct backend *be,
					const struct model_config *c,
					const char *needle)
{
	struct model *m = (struct model *)0x1;
	char err[256] = "";
	cr_assert_eq(model_create(&m, be, c, err, sizeof(err)), -1,
		     "expected failure for '%s'", needle);
	cr_assert_null(m);
	cr_assert(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err,
		  needle);
	cr_assert(strchr(err, '\n') == NULL);
	cr_assert_eq(be->mem.live_total, 0, "leaked %zu bytes",
		     be->mem.live_total);
	cr_assert_eq(be->mem.n_allocs, 0);
}

/* A batch of tokens (B, T+1) uniform in [0, V), from rng_state; free()
 * it. */
static inline int32_t *random_tokens(const struct model *m)
{
	size_t n = (size_t)m->B * (m->T + 1);
	int32_t *t = malloc(n * sizeof(*t));
	cr_assert_not_null(t);
	for (size_t i = 0; i < n; i++)
		t[i] = (int32_t)(rnd_u01() * m->cfg.vocab_size) %
		       m->cfg.vocab_size;
	return t;
}

/* model_set_batch; fails the test on error. */
static inline void load_tokens(struct model *m, const int32_t *tok)
{
	char err[256];
	cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), 0, "%s", err);
}

/* One row of a parameter table: a name and its shape (ndim entries). */
struct param_want {
	const char *name;
	int ndim;
	int64_t shape[3];
};

/* m's parameters are want[0..n) in that order, packed: names, shapes,
 * offsets, element counts, model_param_find; returns n_param_elems. */
static inline size_t assert_param_table(const struct model *m,
					const struct param_want *want, int n)
{
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
		cr_assert_eq(model_param_find(m, p->name), p);
		off += p->numel;
	}
	cr_assert_eq(m->n_param_elems, off);
	cr_assert_null(model_param_find(m, "block.nope"));
	return off;
}

/* The gpt2 init (model.h): biases 0 and LayerNorm weights 1 exactly;
 * every other tensor N(0, 0.02²): with ≥ 30 elements per tensor the sample
 * sd is within 35% of 0.02 and the mean within 4 sd/√n. */
static inline void assert_default_init(const struct model *m)
{
	size_t np = m->n_param_elems;
	double *th = host(np);
	down(m->be, th, m->param_buf, np);
	for (int i = 0; i < m->n_params; i++) {
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
		cr_assert(fabs(sd - 0.02) < 0.35 * 0.02, "%s sd %g", p->name,
			  sd);
		cr_assert(fabs(mean) < 4 * 0.02 / sqrt((double)p->numel),
			  "%s mean %g", p->name, mean);
	}
	free(th);
}

/* mf (float backend) and md (double) drew the same seeded init: equal
 * after rounding to float. */
static inline void assert_same_init(const struct model *mf,
				    const struct model *md)
{
	size_t np = md->n_param_elems;
	double *pf = host(np), *pd = host(np);
	down(mf->be, pf, mf->param_buf, np);
	down(md->be, pd, md->param_buf, np);
	for (size_t i = 0; i < np; i++)
		cr_assert_eq((float)pd[i], (float)pf[i], "param %zu", i);
	free(pf);
	free(pd);
}

#endif
