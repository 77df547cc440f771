/* compare.c — see compare.h: pairing BASE's and NEW's configurations, the
 * ratios, the U test and the verdict; compare_print.c prints them. */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../records/record.h"
#include "report.h"
#include "stats.h"

/* The pairing key of a config: its run identity without the seed and the
 * match key, as sorted compact JSON; malloc'd. */
static char *pair_key(const json_t *cfg, const char *match)
{
	json_t *c = record_run_identity(cfg);
	char *s;
	json_object_del(c, "seed");
	if (match)
		json_object_del(c, match);
	s = json_dumps(c,
		       JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	json_decref(c);
	return s;
}

/* A growable array of doubles. */
struct vec {
	double *x;
	int n, cap;
};

static int vec_push(struct vec *v, double x)
{
	if (v->n == v->cap) {
		int cap = v->cap ? 2 * v->cap : 64;
		double *p = realloc(v->x, (size_t)cap * sizeof(*p));
		if (!p)
			return -1;
		v->x = p;
		v->cap = cap;
	}
	v->x[v->n++] = x;
	return 0;
}

/* The step times of the ok records of recs whose key is key: each run's
 * median into med, and every timed step into steps when the record has
 * trace.step_ms (*all_traced cleared when one has none). */
static void collect(const json_t *recs, const char *key, const char *match,
		    struct vec *med, struct vec *steps, int *all_traced)
{
	size_t i;
	json_t *r;
	json_array_foreach(recs, i, r)
	{
		const json_t *cfg = json_object_get(r, "config");
		const char *st =
		    json_string_value(json_object_get(r, "status"));
		const json_t *tr;
		char *k;
		int same, w;
		if (!json_is_object(cfg) || !st || strcmp(st, "ok"))
			continue;
		k = pair_key(cfg, match);
		same = k && !strcmp(k, key);
		free(k);
		if (!same)
			continue;
		vec_push(med, record_num(r, "timing.step_ms.median"));
		tr = json_object_get(json_object_get(r, "trace"), "step_ms");
		w = (int)json_integer_value(
		    json_object_get(cfg, "warmup_steps"));
		if (!json_is_array(tr)) {
			*all_traced = 0;
			continue;
		}
		for (size_t s = (size_t)w; s < json_array_size(tr); s++)
			vec_push(steps,
				 json_number_value(json_array_get(tr, s)));
	}
}

static json_t *num(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static const char *verdict(double d, double p, const struct compare_opts *o)
{
	if (!isfinite(d))
		return "NOISY";
	if (fabs(d) <= o->threshold)
		return "SAME";
	if (!(p < o->alpha))
		return "NOISY";
	return d < 0 ? "FASTER" : "SLOWER";
}

/* The U test of one pair into o: samples, their kind, U, p. Returns p. */
static double u_test(json_t *o, const json_t *base, const json_t *new_recs,
		     const char *key, const char *match)
{
	struct vec bm = {0}, bs = {0}, nm = {0}, ns = {0};
	int traced = 1;
	double u, p;
	const struct vec *a, *b;
	collect(base, key, match, &bm, &bs, &traced);
	collect(new_recs, key, match, &nm, &ns, &traced);
	a = traced && bs.n && ns.n ? &ns : &nm;
	b = traced && bs.n && ns.n ? &bs : &bm;
	stats_mann_whitney(a->x, a->n, b->x, b->n, &u, &p);
	json_object_set_new(o, "samples",
			    json_string(a == &ns ? "steps" : "run medians"));
	json_object_set_new(o, "n_base", json_integer(b->n));
	json_object_set_new(o, "n_new", json_integer(a->n));
	json_object_set_new(o, "u", num(u));
	json_object_set_new(o, "p", num(p));
	free(bm.x);
	free(bs.x);
	free(nm.x);
	free(ns.x);
	return p;
}

static double at(const json_t *row, const char *path)
{
	return record_num(row, path);
}

/* One pair: row b of BASE and row n of NEW. */
static json_t *pair_json(const json_t *b, const json_t *n, const json_t *base,
			 const json_t *new_recs, const char *key,
			 const struct compare_opts *o)
{
	json_t *p = json_object();
	double ms_b = at(b, "step_ms.median"), ms_n = at(n, "step_ms.median");
	double d = ms_n / ms_b - 1, pv;
	json_object_set(p, "group", json_object_get(b, "group"));
	json_object_set(p, "method", json_object_get(b, "method"));
	json_object_set(p, "runs_base", json_object_get(b, "runs"));
	json_object_set(p, "runs_new", json_object_get(n, "runs"));
	json_object_set_new(p, "step_ms_base", num(ms_b));
	json_object_set_new(p, "step_ms_new", num(ms_n));
	json_object_set_new(p, "step_ratio", num(ms_n / ms_b));
	json_object_set_new(p, "total_peak_ratio",
			    num(at(n, "total_mib") / at(b, "total_mib")));
	json_object_set_new(
	    p, "depth_solver_ratio",
	    num(at(n, "depth_solver_mib") / at(b, "depth_solver_mib")));
	json_object_set_new(
	    p, "valid_ppl_ratio",
	    num(at(n, "valid_ppl.mean") / at(b, "valid_ppl.mean")));
	pv = u_test(p, base, new_recs, key, o->match);
	json_object_set_new(p, "verdict", json_string(verdict(d, pv, o)));
	json_object_set(
	    p, "health_base",
	    json_object_get(json_object_get(b, "health"), "labels"));
	json_object_set(
	    p, "health_new",
	    json_object_get(json_object_get(n, "health"), "labels"));
	return p;
}

/* The row of rows whose config has pairing key key, or NULL. */
static const json_t *row_with(const json_t *rows, const char *key,
			      const char *match)
{
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r)
	{
		char *k = pair_key(json_object_get(r, "config"), match);
		int same = k && !strcmp(k, key);
		free(k);
		if (same)
			return r;
	}
	return NULL;
}

static json_t *unpaired_json(const json_t *row)
{
	return json_pack("{s:O, s:O, s:O}", "group",
			 json_object_get(row, "group"), "method",
			 json_object_get(row, "method"), "runs",
			 json_object_get(row, "runs"));
}

json_t *compare_records(const json_t *base, const json_t *new_recs,
			const struct compare_opts *o)
{
	json_t *rb = report_rows(base), *rn = report_rows(new_recs), *r;
	json_t *out = json_object(), *pairs = json_array();
	json_t *ub = json_array(), *un = json_array();
	size_t i;
	json_array_foreach(rb, i, r)
	{
		char *k = pair_key(json_object_get(r, "config"), o->match);
		const json_t *m = k ? row_with(rn, k, o->match) : NULL;
		if (m)
			json_array_append_new(
			    pairs, pair_json(r, m, base, new_recs, k, o));
		else
			json_array_append_new(ub, unpaired_json(r));
		free(k);
	}
	json_array_foreach(rn, i, r)
	{
		char *k = pair_key(json_object_get(r, "config"), o->match);
		if (k && !row_with(rb, k, o->match))
			json_array_append_new(un, unpaired_json(r));
		free(k);
	}
	json_object_set_new(out, "pairs", pairs);
	json_object_set_new(out, "unpaired_base", ub);
	json_object_set_new(out, "unpaired_new", un);
	json_decref(rb);
	json_decref(rn);
	return out;
}

int compare_count_slower(const json_t *result, double pct)
{
	size_t i;
	json_t *p;
	int n = 0;
	json_array_foreach(json_object_get(result, "pairs"), i, p)
	{
		const char *v =
		    json_string_value(json_object_get(p, "verdict"));
		n += v && !strcmp(v, "SLOWER") &&
		     record_num(p, "step_ratio") > 1 + pct / 100;
	}
	return n;
}
