/* report.c — see report.h: records aggregated into rows (this file) and
 * the rows printed as the markdown summary (report_print.c). */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../config/config.h"
#include "../records/record.h"
#include "report_impl.h"
#include "stats.h"

/* ---- rows of records ---- */

const char *report_str(const json_t *o, const char *k, const char *dflt)
{
	const json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : dflt;
}

/* The run identity of cfg (record_run_identity: output-only keys aside,
 * data_dir kept unless the corpus is synthetic) without the seed (and
 * without the method keys when drop_method): rows with equal keys
 * aggregate. */
char *report_key(const json_t *cfg, int drop_method)
{
	json_t *c = record_run_identity(cfg);
	const char *key;
	json_t *v;
	void *tmp;
	char *s;
	json_object_foreach_safe(c, tmp, key, v)
	{
		if (!strcmp(key, "seed") ||
		    (drop_method && config_key_is_method(key)))
			json_object_del(c, key);
	}
	s = json_dumps(c,
		       JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	json_decref(c);
	return s;
}

/* Grows row R's per-run columns to hold one more run. 0, or -1. */
static int agg_grow(struct agg *r)
{
	int cap = r->cap ? 2 * r->cap : 4;
	double *v = realloc(r->v, (size_t)cap * NCOL * sizeof(*v));
	if (!v)
		return -1;
	/* column c of run i lives at v[c * cap + i]: move the columns */
	for (int c = NCOL - 1; c > 0; c--)
		memmove(v + (size_t)c * cap, v + (size_t)c * r->cap,
			(size_t)r->n * sizeof(*v));
	r->v = v;
	r->cap = cap;
	return 0;
}

double *agg_col(const struct agg *r, enum col c)
{
	return r->v + (size_t)c * r->cap;
}

/* The health counts of record REC into row R. */
static void agg_health(struct agg *r, const json_t *rec, int ok)
{
	const json_t *h = json_object_get(rec, "health");
	const char *v = report_str(h, "verdict", NULL);
	const char *st = report_str(rec, "status", "?");
	double p25 = record_num(rec, "timing.step_ms.p25");
	double p75 = record_num(rec, "timing.step_ms.p75");
	double med = record_num(rec, "timing.step_ms.median");
	if (!strcmp(st, "diverged") || (v && !strcmp(v, "diverged")))
		r->diverged++;
	else if (v && !strcmp(v, "unstable"))
		r->unstable++;
	else if (v && !strcmp(v, "healthy"))
		r->healthy++;
	else if (!strcmp(report_str(rec, "kind", "train"), "train"))
		r->no_health++;
	r->unconverged += json_is_true(json_object_get(h, "unconverged"));
	if (ok && med > 0 && p75 - p25 > REPORT_NOISE_IQR * med)
		r->noisy++;
}

/* The figures of record REC (kind eval or train) into run k of row R. */
static void agg_figures(struct agg *r, int k, const json_t *rec, int ok,
			int eval)
{
	agg_col(r, C_STEP)[k] =
	    ok ? record_num(rec, "timing.step_ms.median") : NAN;
	agg_col(r, C_INF)[k] =
	    ok ? record_num(rec, "inference.step_ms.median") : NAN;
	/* an eval record's memory and solve are its inference's */
	agg_col(r, C_DS)[k] =
	    record_num(rec, eval ? "inference.memory.peak_depth_solver_bytes"
				 : "memory.peak_depth_solver_bytes");
	agg_col(r, C_TOT)[k] =
	    record_num(rec, eval ? "inference.memory.peak_total_bytes"
				 : "memory.peak_total_bytes");
	agg_col(r, C_FIT)[k] =
	    record_num(rec, eval ? "inference.forward_solve.iters_mean"
				 : "solver.forward.iters_mean");
	agg_col(r, C_BIT)[k] = record_num(rec, "solver.backward.iters_mean");
	agg_col(r, C_FCV)[k] =
	    record_num(rec, eval ? "inference.forward_solve.converged_fraction"
				 : "solver.forward.converged_fraction");
	agg_col(r, C_BCV)[k] =
	    record_num(rec, "solver.backward.converged_fraction");
	agg_col(r, C_PPL)[k] = record_num(rec, "quality.valid_ppl");
	agg_col(r, C_FEV)[k] =
	    record_num(rec, eval ? "inference.forward_evals_per_batch"
				 : "evals.forward_evals_per_step");
	agg_col(r, C_VEV)[k] = record_num(rec, "evals.vjp_evals_per_step");
}

/* Adds record REC's figures to row R. 0, or -1 when out of memory. */
static int agg_add(struct agg *r, const json_t *rec)
{
	const char *st = report_str(rec, "status", "?");
	int ok = !strcmp(st, "ok"), k;
	int eval = !strcmp(report_str(rec, "kind", "train"), "eval");
	json_t *seed = json_object_get(json_object_get(rec, "config"), "seed");
	if (r->n == r->cap && agg_grow(r) != 0)
		return -1;
	k = r->n++;
	if (!ok)
		r->status = st;
	r->n_ok += ok;
	if (seed && !json_array_size(r->seeds))
		json_array_append(r->seeds, seed);
	else if (seed) {
		size_t i;
		json_t *s;
		int seen = 0;
		json_array_foreach(r->seeds, i, s) seen |= json_equal(s, seed);
		if (!seen)
			json_array_append(r->seeds, seed);
	}
	if (!strcmp(st, "error")) {
		r->error++;
		for (int c = 0; c < NCOL; c++)
			agg_col(r, (enum col)c)[k] = NAN;
		return 0;
	}
	r->interrupted += !strcmp(st, "interrupted");
	agg_figures(r, k, rec, ok, eval);
	agg_health(r, rec, ok);
	return 0;
}

/* The row of config CFG (record REC): the one with the same key, else a new
 * one. NULL when out of memory. */
static struct agg *agg_for(struct table *t, const json_t *rec,
			   const json_t *cfg)
{
	char *key = report_key(cfg, 0);
	struct agg *r;
	if (!key)
		return NULL;
	for (size_t j = 0; j < t->nrow; j++)
		if (!strcmp(t->rows[j].key, key)) {
			free(key);
			return &t->rows[j];
		}
	r = &t->rows[t->nrow++];
	memset(r, 0, sizeof(*r));
	r->key = key;
	r->group = report_key(cfg, 1);
	r->first = rec;
	r->status = "ok";
	r->seeds = json_array();
	return r;
}

/* Notes the keys of config C that differ from the first record's: non-method
 * keys label the groups, deq keys (among deq records) the deq rows. */
static void note_varying(struct table *t, const json_t *c)
{
	const char *k2;
	json_t *v2;
	if (!t->first_group_cfg)
		t->first_group_cfg = c;
	json_t *id = record_run_identity(c);
	json_object_foreach(id, k2, v2)
	{
		if (config_key_is_method(k2) || !strcmp(k2, "seed"))
			continue;
		if (!json_equal(v2, json_object_get(t->first_group_cfg, k2)))
			json_object_set_new(t->varying, k2, json_true());
	}
	json_decref(id);
	/* deq keys that differ between deq records label their rows (k and
	 * method are not deq keys) */
	if (strcmp(report_str(c, "method", ""), "deq"))
		return;
	if (!t->first_deq_cfg)
		t->first_deq_cfg = c;
	json_object_foreach((json_t *)c, k2, v2)
	{
		if (config_key_is_method(k2) && strcmp(k2, "method") &&
		    strcmp(k2, "k") &&
		    !json_equal(v2, json_object_get(t->first_deq_cfg, k2)))
			json_object_set_new(t->vary_deq, k2, json_true());
	}
}

const struct agg *report_unroll_row(const struct table *t, const struct agg *r)
{
	for (size_t q = 0; q < t->nrow; q++) {
		const json_t *qc = json_object_get(t->rows[q].first, "config");
		if (!strcmp(t->rows[q].group, r->group) &&
		    !strcmp(report_str(qc, "method", ""), "unroll"))
			return &t->rows[q];
	}
	return NULL;
}

void report_table_free(struct table *t)
{
	for (size_t j = 0; j < t->nrow; j++) {
		free(t->rows[j].key);
		free(t->rows[j].group);
		free(t->rows[j].v);
		json_decref(t->rows[j].seeds);
	}
	free(t->rows);
	json_decref(t->varying);
	json_decref(t->vary_deq);
	memset(t, 0, sizeof(*t));
}

int report_table_build(struct table *t, const json_t *records)
{
	size_t nrec = json_array_size(records), i;
	json_t *rec;
	memset(t, 0, sizeof(*t));
	t->rows = calloc(nrec ? nrec : 1, sizeof(*t->rows));
	t->varying = json_object();
	t->vary_deq = json_object();
	if (!t->rows)
		return -1;
	json_array_foreach((json_t *)records, i, rec)
	{
		const json_t *cfg = json_object_get(rec, "config");
		struct agg *r;
		if (!json_is_object(cfg))
			continue;
		if (!(r = agg_for(t, rec, cfg)) || agg_add(r, rec) != 0)
			return -1;
		note_varying(t, cfg);
	}
	return 0;
}
