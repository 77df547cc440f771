/*
 * test_init.c — the parameter init presets of models/model.c (keys `init`,
 * `init_std`, `embed_std`; docs/models.md "Initialisation"), on "cpu64" so the
 * values are the doubles the init drew:
 *   1. init=gpt2 is bitwise the init before presets existed: FNV-1a hashes
 *      of every parameter's bits for every registered model kind, recorded with
 *      the init of commit d78af59 (glibc's log/cos/sin, as every test here);
 *   2. every tensor of every preset and kind against the documented
 *      distribution, from a table written here independently of model.c:
 *      empirical mean, std, bounds and the mass within one std;
 *   3. init_std and embed_std replace exactly the tensors they name;
 *   4. the presets differ, and change scales but not draws (gpt2 normal
 *      tensors are exactly twice deq's: 0.02 = 2 · 0.01 in binary);
 *   5. bad presets and stds are refused with one line;
 *   6. `deqbench params init` (params_init) writes what the model
 *      drew, with the init keys in its metadata.
 *
 * Tolerances (item 2) for n independent draws, at 5 standard errors, so a
 * correct init passes with probability > 1 − 1e-5 over the ~400 checks (the
 * draws are fixed by the seed, so the test is deterministic anyway), while
 * the wrong scale, fan_in or distribution fails (the shapes are chosen so
 * that the smallest tensor, 256 elements, separates 1/√d from 1/√F):
 *   N(0, σ²):  |mean| ≤ 5σ/√n; |s/σ − 1| ≤ 5/√(2n) (the sample std's
 *              standard error is σ/√(2n)); every |x| ≤ 6.5σ (P < 1e-10 per
 *              draw); the fraction with |x| ≤ σ within 5 √(p(1−p)/n) of
 *              p = 0.6827 (a uniform of the same std has 0.5774);
 *   U(±b):     σ = b/√3; |mean| ≤ 5σ/√n; |s/σ − 1| ≤ 5 · 0.447/√n (Var x² =
 *              4b⁴/45, so s²'s relative standard error is 0.894/√n);
 *              every x in (−b, b]; max |x| ≥ b (1 − 15/n) (a bound too
 *              small by that factor leaves P ≈ e^-15); the fraction within
 *              σ within 5 √(p(1−p)/n) of p = 1/√3;
 *   constant:  every element equal, bitwise.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/config/config.h"
#include "bench/run/param_files.h"
#include "bench/io/safetensors.h"
#include "models/model.h"
#include "test_model_util.h"

/* Shapes: every tensor has at least 256 elements. */
enum { D = 256, H = 4, F = 384, T = 64, B = 2, V = 500 };

static struct model *make(struct backend *be, enum model_kind kind,
			  enum model_init init, double init_std,
			  double embed_std, uint64_t seed, int d, int f, int t,
			  int v)
{
	struct model_config c =
	    model_cfg(kind, (struct shape){B, t, d, H, f, v}, seed);
	c.init = init;
	c.init_std = init_std;
	c.embed_std = embed_std;
	return model_of(be, &c);
}

static double *params_of(struct backend *be, const struct model *m)
{
	double *x = host(m->n_param_elems);
	down(be, x, m->param_buf, m->n_param_elems);
	return x;
}

/* ------------------------------------------------ 1. gpt2 unchanged */

static uint64_t fnv1a(const double *x, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	const unsigned char *p = (const unsigned char *)x;
	for (size_t i = 0; i < n * sizeof(double); i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}

Test(init, gpt2_bitwise_unchanged)
{
	/* d=16 H=4 F=24 T=6 B=2 V=37 seed 20261124, hashed before presets */
	const struct {
		enum model_kind kind;
		size_t n;
		uint64_t hash;
	} want[] = {
	    {MODEL_TRANSFORMER, 4093, 0xeec1b0b7b0d83af5ull},
	    {MODEL_TANH_CELL, 1845, 0x08e6e480c26b1697ull},
	    {MODEL_TRELLISNET, 5541, 0x5f0a8f565c67b2f9ull},
	};
	struct backend *be = make_be("cpu64");
	/* every registered kind has its recorded bits here */
	cr_assert_eq((int)(sizeof(want) / sizeof(want[0])), model_kind_count());
	for (int i = 0; i < model_kind_count(); i++) {
		cr_assert_eq(want[i].kind, (enum model_kind)i);
		struct model *m = make(be, want[i].kind, MODEL_INIT_GPT2, 0, 0,
				       20261124, 16, 24, 6, 37);
		double *x = params_of(be, m);
		cr_assert_eq(m->n_param_elems, want[i].n);
		cr_assert_eq(fnv1a(x, m->n_param_elems), want[i].hash,
			     "%s: gpt2 init changed",
			     model_kind_name(want[i].kind));
		free(x);
		model_destroy(m);
	}
	backend_destroy(be);
}

/* ----------------------------------------- 2. distributions per preset */

enum dist_kind { DIST_NORMAL, DIST_UNIFORM, DIST_CONST };
struct dist {
	enum dist_kind kind;
	double a; /* std, bound or value */
};

static int has(const char *name, const char *part)
{
	return strstr(name, part) != NULL;
}

/* fan_in of the layer a weight or bias belongs to (docs/models.md table). */
static double fan_in(enum model_kind kind, const char *name)
{
	if (has(name, "inject"))
		return kind == MODEL_TRELLISNET ? 2.0 * D : D;
	if (has(name, "block.conv"))
		return 2.0 * D;
	if (has(name, "ff2"))
		return F;
	return D; /* qkv, out, ff1, head (E = d_model) */
}

/* The documented distribution of tensor `name`; init_std and embed_std
 * as the keys. */
static struct dist expected(enum model_kind kind, enum model_init init,
			    const char *name, double init_std, double embed_std)
{
	int embed = has(name, "embed.weight"); /* embed and pos_embed */
	int ln = has(name, ".ln");
	int bias = has(name, "bias");
	int weight = !embed && !ln && !bias && !has(name, "cell");
	double fb = 1.0 / sqrt(fan_in(kind, name));
	struct dist r = {DIST_CONST, 0};

	if (ln)
		return (struct dist){DIST_CONST, bias ? 0.0 : 1.0};
	if (has(name, "cell.weight"))
		return (struct dist){DIST_NORMAL, 0.25 / sqrt((double)D)};
	if (weight && init_std > 0)
		return (struct dist){DIST_NORMAL, init_std};
	if (embed && embed_std > 0)
		return (struct dist){DIST_NORMAL, embed_std};
	switch (init) {
	case MODEL_INIT_GPT2:
		r = bias ? (struct dist){DIST_CONST, 0}
			 : (struct dist){DIST_NORMAL, 0.02};
		break;
	case MODEL_INIT_PYTORCH:
		r = embed ? (struct dist){DIST_NORMAL, 1.0}
			  : (struct dist){DIST_UNIFORM, fb};
		break;
	case MODEL_INIT_DEQ:
		if (kind != MODEL_TRELLISNET)
			r = embed  ? (struct dist){DIST_NORMAL, 0.01 * sqrt(D)}
			    : bias ? (struct dist){DIST_CONST, 0}
				   : (struct dist){DIST_NORMAL, 0.01};
		else if (!strcmp(name, "embed.weight") ||
			 !strcmp(name, "head.weight"))
			r = (struct dist){DIST_UNIFORM, 0.1};
		else if (has(name, "inject"))
			r = (struct dist){DIST_UNIFORM, fb};
		else if (has(name, "block.conv"))
			r = (struct dist){DIST_NORMAL, 0.01};
		else /* pos_embed, head.bias */
			r = (struct dist){DIST_CONST, 0};
		break;
	}
	return r;
}

/* Checks x[0..n) against d (tolerances in the header). */
static void check_dist(const double *x, size_t n, struct dist d,
		       const char *what)
{
	double s1 = 0, s2 = 0, amax = 0, sd, mean, p, sig;
	size_t within = 0;
	if (d.kind == DIST_CONST) {
		for (size_t k = 0; k < n; k++)
			cr_assert_eq(x[k], d.a, "%s[%zu] = %g, want %g", what,
				     k, x[k], d.a);
		return;
	}
	sig = d.kind == DIST_NORMAL ? d.a : d.a / sqrt(3.0);
	for (size_t k = 0; k < n; k++) {
		s1 += x[k];
		s2 += x[k] * x[k];
		amax = fabs(x[k]) > amax ? fabs(x[k]) : amax;
		within += fabs(x[k]) <= sig;
		if (d.kind == DIST_UNIFORM)
			cr_assert(x[k] > -d.a && x[k] <= d.a,
				  "%s[%zu] = %g outside (-%g, %g]", what, k,
				  x[k], d.a, d.a);
	}
	mean = s1 / n;
	sd = sqrt(s2 / n - mean * mean);
	cr_assert(fabs(mean) <= 5 * sig / sqrt((double)n),
		  "%s: mean %g, std %g, n %zu", what, mean, sig, n);
	if (d.kind == DIST_NORMAL) {
		cr_assert(fabs(sd / sig - 1) <= 5 / sqrt(2.0 * n),
			  "%s: std %g, want %g (n %zu)", what, sd, sig, n);
		cr_assert(amax <= 6.5 * sig, "%s: max |x| %g, std %g", what,
			  amax, sig);
		p = 0.6827;
	} else {
		cr_assert(fabs(sd / sig - 1) <= 5 * 0.447 / sqrt((double)n),
			  "%s: std %g, want %g (n %zu)", what, sd, sig, n);
		cr_assert(amax >= d.a * (1 - 15.0 / n),
			  "%s: max |x| %g, bound %g (n %zu)", what, amax, d.a,
			  n);
		p = 1 / sqrt(3.0);
	}
	cr_assert(fabs((double)within / n - p) <= 5 * sqrt(p * (1 - p) / n),
		  "%s: %zu of %zu within one std, want fraction %g", what,
		  within, n, p);
}

static void check_model(enum model_kind kind, enum model_init init,
			double init_std, double embed_std)
{
	struct backend *be = make_be("cpu64");
	struct model *m =
	    make(be, kind, init, init_std, embed_std, 7, D, F, T, V);
	double *x = params_of(be, m);
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		char what[160];
		snprintf(what, sizeof(what),
			 "%s init=%s init_std=%g "
			 "embed_std=%g %s",
			 model_kind_name(kind), model_init_name(init), init_std,
			 embed_std, p->name);
		cr_assert_geq(p->numel, 256, "%s", what);
		check_dist(x + p->offset, p->numel,
			   expected(kind, init, p->name, init_std, embed_std),
			   what);
	}
	free(x);
	model_destroy(m);
	backend_destroy(be);
}

Test(init, presets_match_formulas, .timeout = 120)
{
	for (int k = 0; k < model_kind_count(); k++)
		for (int i = 0; i < 3; i++)
			check_model((enum model_kind)k, (enum model_init)i, 0,
				    0);
}

/* ------------------------------------------------------ 3. overrides */

Test(init, init_std_and_embed_std_override, .timeout = 120)
{
	for (int k = 0; k < model_kind_count(); k++)
		for (int i = 0; i < 3; i++) {
			check_model((enum model_kind)k, (enum model_init)i,
				    0.037, 0);
			check_model((enum model_kind)k, (enum model_init)i, 0,
				    0.29);
			check_model((enum model_kind)k, (enum model_init)i,
				    0.003, 1.5);
		}
}

/* ------------------------------------------- 4. presets differ; draws */

Test(init, presets_differ_scales_not_draws)
{
	struct backend *be = make_be("cpu64");
	for (int k = 0; k < model_kind_count(); k++) {
		struct model *m[3];
		double *x[3];
		for (int i = 0; i < 3; i++) {
			m[i] = make(be, (enum model_kind)k, (enum model_init)i,
				    0, 0, 11, 32, 48, 8, 40);
			x[i] = params_of(be, m[i]);
		}
		for (int a = 0; a < 3; a++)
			for (int b = a + 1; b < 3; b++) {
				size_t diff = 0;
				for (size_t q = 0; q < m[a]->n_param_elems; q++)
					diff += x[a][q] != x[b][q];
				/* at least half the elements: the weights */
				cr_assert_gt(diff, m[a]->n_param_elems / 2,
					     "%s: init=%s and %s differ in "
					     "%zu elements",
					     model_kind_name(k),
					     model_init_name(a),
					     model_init_name(b), diff);
			}
		/* N(0, 0.02²) and N(0, 0.01²) tensors from the same stream */
		const struct model_param *p =
		    k == MODEL_TRANSFORMER ? model_param_find(m[0], "block."
								    "ff1."
								    "weight")
		    : k == MODEL_TANH_CELL
			? model_param_find(m[0], "inject."
						 "weight")
			: model_param_find(m[0], "block.conv."
						 "weight");
		for (size_t q = 0; q < p->numel; q++)
			cr_assert_eq(x[0][p->offset + q],
				     2 * x[2][p->offset + q], "%s %s[%zu]",
				     model_kind_name(k), p->name, q);
		for (int i = 0; i < 3; i++) {
			free(x[i]);
			model_destroy(m[i]);
		}
	}
	backend_destroy(be);
}

/* ------------------------------------------------------- 5. bad input */

Test(init, bad_config_refused)
{
	struct backend *be = make_be("cpu");
	struct model_config ok =
	    model_cfg(MODEL_TRANSFORMER, (struct shape){1, 4, 8, 2, 8, 9}, 1);
	struct {
		struct model_config c;
		const char *needle;
	} bad[4];
	for (int i = 0; i < 4; i++)
		bad[i].c = ok;
	bad[0].c.init = (enum model_init)3, bad[0].needle = "init=3";
	bad[1].c.init_std = -0.1, bad[1].needle = "init_std=-0.1";
	bad[2].c.embed_std = NAN, bad[2].needle = "embed_std=nan";
	bad[3].c.init_std = INFINITY, bad[3].needle = "init_std=inf";
	for (int i = 0; i < 4; i++)
		assert_model_refused(be, &bad[i].c, bad[i].needle);
	/* the config keys: names, ranges, and the one-line messages */
	struct bench_config c;
	char err[256];
	config_defaults(&c);
	/* the recipe's preset (older records: gpt2) */
	cr_assert_eq(c.model.init, MODEL_INIT_PYTORCH, "default preset");
	cr_assert_eq(config_set(&c, "init", "torch", err, sizeof(err)), -1);
	cr_assert(strstr(err, "gpt2, pytorch, deq"), "%s", err);
	cr_assert_eq(config_set(&c, "init_std", "-1", err, sizeof(err)), -1);
	cr_assert(strstr(err, "init_std=-1"), "%s", err);
	cr_assert_eq(config_set(&c, "embed_std", "x", err, sizeof(err)), -1);
	cr_assert(strstr(err, "embed_std"), "%s", err);
	cr_assert_eq(config_set(&c, "init", "deq", err, sizeof(err)), 0);
	cr_assert_eq(c.model.init, MODEL_INIT_DEQ);
	backend_destroy(be);
}

/* ------------------------------------------------- 6. params init file */

Test(init, params_init_writes_preset, .timeout = 60)
{
	const char *kv[] = {
	    "corpus=synthetic", "d_model=16",	 "n_heads=2",
	    "d_ff=32",		"seq_len=8",	 "vocab_size=50",
	    "init=pytorch",	"embed_std=0.5", NULL};
	struct bench_config c;
	struct st_file f;
	char err[512], path[256];
	struct backend *be = make_be("cpu64");
	config_defaults(&c);
	for (int i = 0; kv[i]; i++)
		cr_assert_eq(config_set_arg(&c, kv[i], err, sizeof(err)), 0,
			     "%s", err);
	snprintf(path, sizeof(path), "/tmp/dq_test_init_%d.safetensors",
		 (int)getpid());
	cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(params_init(&c, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(st_read(&f, path, err, sizeof(err)), 0, "%s", err);
	/* the file holds float32 of what the model drew */
	struct model *m = make(be, MODEL_TRANSFORMER, MODEL_INIT_PYTORCH, 0,
			       0.5, 1, 16, 32, 8, 50);
	double *x = params_of(be, m);
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		const struct st_tensor *t = st_get(&f, p->name, ST_F32, p->ndim,
						   p->shape, err, sizeof(err));
		cr_assert_not_null(t, "%s", err);
		for (size_t k = 0; k < p->numel; k++)
			cr_assert_eq(((const float *)t->data)[k],
				     (float)x[p->offset + k], "%s[%zu]",
				     p->name, k);
	}
	json_t *meta = json_loads(st_metadata(&f, "config"), 0, NULL);
	cr_assert_not_null(meta);
	cr_assert_str_eq(json_string_value(json_object_get(meta, "init")),
			 "pytorch");
	cr_assert_eq(json_number_value(json_object_get(meta, "embed_std")),
		     0.5);
	cr_assert_eq(json_number_value(json_object_get(meta, "init_std")), 0);
	json_decref(meta);
	free(x);
	model_destroy(m);
	backend_destroy(be);
	st_close(&f);
	unlink(path);
}
