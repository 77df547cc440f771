/* report.c — see report.h: records aggregated into rows, one at a time,
 * each row keeping its runs' figures and not their records (this file;
 * report_acc.c gives it the records and leaves second readings out), and
 * the rows printed as the markdown summary (report_print.c). */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../config/config.h"
#include "../records/health.h"
#include "../records/record.h"
#include "report_cost.h"
#include "report_impl.h"
#include "stats.h"

/* ---- rows of records ---- */

/* The run identity of cfg (record_run_identity: output-only keys aside,
 * data_dir kept unless the corpus is synthetic) without the seed (and
 * without the method keys when drop_method), the BLAS core blas of a
 * CPU run (record_blas_core; NULL: none) and the build fingerprint fp
 * (NULL: a record before it): rows with equal keys aggregate, so runs on
 * two OpenBLAS cores are two machines' rows, and runs of two commits share
 * a row only when their code had one fingerprint. */
char *report_key(const json_t *cfg, const char *blas, const char *fp,
		 int drop_method)
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
	if (s && (blas || fp)) {
		char *k = malloc(strlen(s) + (blas ? strlen(blas) : 0) +
				 (fp ? strlen(fp) : 0) + 3);
		if (k)
			sprintf(k, "%s\x1f%s\x1e%s", s, blas ? blas : "",
				fp ? fp : "");
		free(s);
		s = k;
	}
	return s;
}

/* The config record rec's row is keyed by (report_impl.h: an eval
 * record's without params; with group, without layers too). New
 * reference. */
static json_t *row_cfg(const json_t *rec, const json_t *cfg, int group)
{
	json_t *c;
	if (strcmp(report_str(rec, "kind", "train"), "eval"))
		return json_incref((json_t *)cfg);
	c = json_deep_copy(cfg);
	json_object_del(c, "params");
	if (group)
		json_object_del(c, "layers");
	return c;
}

/* report_key of record rec's row (group: of its group); an eval group's
 * marked so, apart from any training group. malloc'd, NULL when out of
 * memory. */
static char *row_key(const json_t *rec, const json_t *cfg, int group)
{
	json_t *c = row_cfg(rec, cfg, group);
	char *k = c ? report_key(c, record_blas_core(rec),
				 record_build(rec, "fingerprint"), group)
		    : NULL;
	char *e;
	json_decref(c);
	if (!k || !group || strcmp(report_str(rec, "kind", "train"), "eval"))
		return k;
	e = malloc(strlen(k) + 6);
	if (e)
		sprintf(e, "eval\x1d%s", k);
	free(k);
	return e;
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

_Static_assert(HEALTH_F_NONFINITE == 1 << (REPORT_HEALTH_FLAGS - 1),
	       "report counts every health flag");

int report_ran_beside(const json_t *rec)
{
	const json_t *b = json_object_get(rec, "beside");
	return json_integer_value(json_object_get(b, "runs")) > 0 ||
	       json_integer_value(json_object_get(b, "lanes")) > 1;
}

/* The health counts of record REC into row R. */
static void agg_health(struct agg *r, const json_t *rec, int ok)
{
	const json_t *h = json_object_get(rec, "health");
	const char *v = report_str(h, "verdict", NULL);
	const char *st = report_str(rec, "status", "?");
	/* an eval record's times are its valid batches' */
	int eval = !strcmp(report_str(rec, "kind", "train"), "eval");
	const char *t = eval ? "inference.step_ms" : "timing.step_ms";
	char path[40];
	double p25, p75, med;
	snprintf(path, sizeof(path), "%s.p25", t);
	p25 = record_num(rec, path);
	snprintf(path, sizeof(path), "%s.p75", t);
	p75 = record_num(rec, path);
	snprintf(path, sizeof(path), "%s.median", t);
	med = record_num(rec, path);
	if (!strcmp(st, "diverged") || (v && !strcmp(v, "diverged")))
		r->diverged++;
	else if (v && !strcmp(v, "unstable"))
		r->unstable++;
	else if (v && !strcmp(v, "healthy"))
		r->healthy++;
	else if (!strcmp(report_str(rec, "kind", "train"), "train"))
		r->no_health++;
	r->unconverged += json_is_true(json_object_get(h, "unconverged"));
	for (int i = 0; i < REPORT_HEALTH_FLAGS; i++) {
		const char *name = health_flag_name((enum health_flag)(1 << i));
		size_t j;
		json_t *f;
		json_array_foreach(json_object_get(h, "flags"), j, f)
		{
			const char *v = json_string_value(f);
			if (v && !strcmp(v, name)) {
				r->flagged[i]++;
				break;
			}
		}
	}
	if (ok && med > 0 && p75 - p25 > REPORT_NOISE_IQR * med)
		r->noisy++;
	if (ok && report_ran_beside(rec))
		r->beside++;
}

/* The mean of trace.step_ms over the first (last: the last) w steps, w
 * a tenth of the trace (at least 1), as work's edge_steps; NAN without a
 * trace or with a null entry in them. */
static double trace_edge_ms(const json_t *rec, int last)
{
	const json_t *a =
	    json_object_get(json_object_get(rec, "trace"), "step_ms");
	size_t n = json_array_size(a), w = n / 10 < 1 ? 1 : n / 10;
	double s = 0;
	if (!n)
		return NAN;
	for (size_t i = last ? n - w : 0; i < (last ? n : w); i++) {
		const json_t *v = json_array_get(a, i);
		s += json_is_number(v) ? json_number_value(v) : NAN;
	}
	return s / (double)w;
}

/* The priced figures of record REC into run k of row R: the units, and
 * with the fixed cost (NAN without prices, a match or work: agg_new
 * matched the row's shape). */
static void agg_priced(struct agg *r, int k, const json_t *rec, int ok)
{
	const json_t *w = json_object_get(rec, "work");
	const json_t *cfg = json_object_get(rec, "config");
	int deq = !strcmp(report_str(cfg, "method", ""), "deq");
	const char *fs = deq ? report_str(cfg, "f_solver", "broyden") : NULL;
	const char *bs = deq ? report_str(cfg, "b_solver", fs) : NULL;
	enum col c[3] = {C_PU, C_PUF, C_PUL}, cf[3] = {C_PR, C_PRF, C_PRL};
	/* the mean over the timed steps, as timing.step_ms.mean's (records
	 * before per_step_timed: over every step) */
	const char *which[3] = {
	    json_is_number(json_object_get(
		json_object_get(w, "block_fwd_taped"), "per_step_timed"))
		? "per_step_timed"
		: "per_step",
	    "per_step_first", "per_step_last"};
	if (ok && !json_is_object(w))
		r->no_work++;
	struct cost_parts p = {{0}, {0}};
	for (int i = 0; i < 3; i++) {
		int on = ok && r->price;
		/* the timed steps' parts: the prices' share of the interval */
		struct cost_parts *pp = i == 0 ? &p : NULL;
		double u = on ? report_cost_units_ms(w, r->price, which[i], fs,
						     bs, r->unpriced, pp)
			      : NAN;
		double f = on ? report_cost_fixed_ms(w, r->price, which[i],
						     r->unpriced, pp)
			      : NAN;
		agg_col(r, c[i])[k] = u;
		agg_col(r, cf[i])[k] = u + f;
	}
	if (isfinite(agg_col(r, C_PR)[k])) {
		for (int u = 0; u < CU_N; u++) {
			r->parts.ms[u] += p.ms[u];
			r->parts.sd[u] += p.sd[u];
		}
		r->n_parts++;
	}
}

/* The figures of record REC (kind eval or train) into run k of row R. */
static void agg_figures(struct agg *r, int k, const json_t *rec, int ok,
			int eval)
{
	agg_col(r, C_MEAN)[k] =
	    ok ? record_num(rec, "timing.step_ms.mean") : NAN;
	agg_col(r, C_EARLY)[k] = ok ? trace_edge_ms(rec, 0) : NAN;
	agg_col(r, C_END)[k] = ok ? trace_edge_ms(rec, 1) : NAN;
	agg_priced(r, k, rec, ok && !eval);
	agg_col(r, C_STEP)[k] =
	    ok ? record_num(rec, "timing.step_ms.median") : NAN;
	agg_col(r, C_INF)[k] =
	    ok ? record_num(rec, "inference.step_ms.median") : NAN;
	agg_col(r, C_HEAD)[k] =
	    ok ? record_num(rec, "inference.head_ms.median") : NAN;
	agg_col(r, C_BODY)[k] =
	    ok ? record_num(rec, "inference.body_ms.median") : NAN;
	agg_col(r, C_TPPL)[k] = record_num(rec, "quality.test_ppl");
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
	agg_col(r, C_LATE)[k] = eval ? NAN : report_late_gain(rec);
}

/* Mean of the numbers a[from..from+w) (null entries: NAN). */
static double mean_at(const json_t *a, size_t from, size_t w)
{
	double s = 0;
	for (size_t i = from; i < from + w; i++) {
		const json_t *v = json_array_get(a, i);
		s += json_is_number(v) ? json_number_value(v) : NAN;
	}
	return s / (double)w;
}

double report_late_gain(const json_t *rec)
{
	const json_t *loss =
	    json_object_get(json_object_get(rec, "trace"), "loss");
	size_t n = json_array_size(loss);
	size_t w = n / 10 < 1 ? 1 : n / 10 > 50 ? 50 : n / 10;
	if (n < 4 * w || n < 4)
		return NAN;
	return mean_at(loss, n / 2 - w, w) - mean_at(loss, n - w, w);
}

/* Notes the commit of record rec (build.git_commit) in row R's commits,
 * once each, in the order they first appear. 0, or -1 when out of
 * memory. */
static int agg_commit(struct agg *r, const json_t *rec)
{
	const char *c = record_build(rec, "git_commit");
	size_t i;
	json_t *v;
	if (!c)
		return 0;
	json_array_foreach(r->commits, i,
			   v) if (!strcmp(json_string_value(v), c)) return 0;
	return json_array_append_new(r->commits, json_string(c)) ? -1 : 0;
}

/* Notes seed in row R's seeds, once each (by its canonical JSON text, so
 * equal as json_equal has it). 0, or -1 when out of memory. */
static int agg_seed(struct agg *r, const json_t *seed)
{
	char *text;
	int rc = 0;
	if (!seed)
		return 0;
	text = json_dumps(seed, JSON_ENCODE_ANY | JSON_COMPACT |
				    JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	if (!text)
		return -1;
	if (!json_object_get(r->seen, text))
		rc = json_object_set_new(r->seen, text, json_true()) ||
		     json_array_append(r->seeds, (json_t *)seed);
	free(text);
	return rc ? -1 : 0;
}

/* Adds record REC's figures to row R. 0, or -1 when out of memory. */
static int agg_add(struct agg *r, const json_t *rec)
{
	const char *st = report_str(rec, "status", "?");
	int ok = !strcmp(st, "ok"), k;
	int eval = !strcmp(report_str(rec, "kind", "train"), "eval");
	if (r->n == r->cap && agg_grow(r) != 0)
		return -1;
	if (agg_seed(r, json_object_get(json_object_get(rec, "config"),
					"seed")) != 0 ||
	    agg_commit(r, rec) != 0)
		return -1;
	if (!ok) {
		char *s = strdup(st);
		if (!s)
			return -1;
		free(r->status);
		r->status = s;
	}
	k = r->n++;
	r->n_ok += ok;
	if (report_target_add(r, rec, ok) != 0)
		return -1;
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

/* Notes the keys of config C (a new row's, held by the table) that differ
 * from the first row's: non-method keys label the groups, deq keys (among
 * deq rows) the deq rows. The records of one row are equal in these keys
 * (a row's key is its run identity without the seed, and a record holds
 * only its own method's keys), so a row's first record speaks for the
 * others. */
static int differ(const char *a, const char *b)
{
	return (a || b) && (!a || !b || strcmp(a, b));
}

static void note_varying(struct table *t, const json_t *c, const char *blas,
			 const char *fp, int eval)
{
	const char *k2;
	json_t *v2;
	if (!t->first_group_cfg) {
		t->first_group_cfg = c;
		t->first_blas = blas;
		t->first_fp = fp;
	}
	t->blas_varies |= differ(blas, t->first_blas);
	t->fp_varies |= differ(fp, t->first_fp);
	json_t *id = record_run_identity(c);
	json_object_foreach(id, k2, v2)
	{
		if (config_key_is_method(k2) || !strcmp(k2, "seed") ||
		    (eval && (!strcmp(k2, "params") || !strcmp(k2, "layers"))))
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

/* Room in t for one more row. 0, or -1 when out of memory. */
static int table_grow(struct table *t)
{
	size_t cap = t->cap ? 2 * t->cap : 16;
	struct agg *rows;
	if (t->nrow < t->cap)
		return 0;
	if (!(rows = realloc(t->rows, cap * sizeof(*rows))))
		return -1;
	t->rows = rows;
	t->cap = cap;
	return 0;
}

/* A new row for record REC (config CFG) under key (taken over). NULL when
 * out of memory. */
static struct agg *agg_new(struct table *t, const json_t *rec,
			   const json_t *cfg, char *key)
{
	struct agg *r;
	json_int_t at = (json_int_t)t->nrow;
	const char *fp = record_build(rec, "fingerprint");
	if (table_grow(t) != 0) {
		free(key);
		return NULL;
	}
	r = &t->rows[t->nrow++]; /* report_table_free frees what it holds */
	memset(r, 0, sizeof(*r));
	r->key = key;
	r->blas = record_blas_core(rec) ? strdup(record_blas_core(rec)) : NULL;
	r->fp = fp ? strdup(fp) : NULL;
	r->group = row_key(rec, cfg, 1);
	/* the members are shared, not copied: the rest of the record goes */
	r->first = json_pack("{s:O, s:O?, s:O?}", "config", cfg, "method",
			     json_object_get(rec, "method"), "kind",
			     json_object_get(rec, "kind"));
	r->seeds = json_array();
	r->seen = json_object();
	r->commits = json_array();
	r->status = strdup("ok");
	r->unpriced = json_array();
	if (t->prices)
		r->price = report_cost_match(t->prices, rec);
	if (!r->unpriced || !r->group || !r->first || !r->seeds || !r->seen ||
	    !r->status || !r->commits || (record_blas_core(rec) && !r->blas) ||
	    (fp && !r->fp) ||
	    json_object_set_new(t->index, key, json_integer(at)) != 0)
		return NULL;
	/* the group's baseline: unroll of whole batches (microbatches 1) */
	if (!strcmp(report_str(cfg, "method", ""), "unroll") &&
	    !(record_num(cfg, "microbatches") > 1) &&
	    !json_object_get(t->unroll, r->group) &&
	    json_object_set_new(t->unroll, r->group, json_integer(at)) != 0)
		return NULL;
	note_varying(t, json_object_get(r->first, "config"), r->blas, r->fp,
		     report_is_eval(r));
	return r;
}

void report_table_free(struct table *t)
{
	for (size_t j = 0; j < t->nrow; j++) {
		free(t->rows[j].key);
		free(t->rows[j].group);
		free(t->rows[j].blas);
		free(t->rows[j].fp);
		json_decref(t->rows[j].commits);
		free(t->rows[j].v);
		free(t->rows[j].status);
		json_decref(t->rows[j].first);
		json_decref(t->rows[j].seeds);
		json_decref(t->rows[j].seen);
		json_decref(t->rows[j].curves);
		json_decref(t->rows[j].price);
		json_decref(t->rows[j].unpriced);
	}
	free(t->rows);
	json_decref(t->index);
	json_decref(t->unroll);
	json_decref(t->varying);
	json_decref(t->vary_deq);
	memset(t, 0, sizeof(*t));
}

void report_table_set_prices(struct table *t, const json_t *prices)
{
	t->prices = prices;
}

int report_table_init(struct table *t)
{
	memset(t, 0, sizeof(*t));
	t->index = json_object();
	t->unroll = json_object();
	t->varying = json_object();
	t->vary_deq = json_object();
	t->target_ppl = NAN;
	return t->index && t->unroll && t->varying && t->vary_deq ? 0 : -1;
}

/* The row of record rec, config cfg (report_key in *key, malloc'd, or
 * NULL when out of memory), NULL when there is none yet. */
static struct agg *row_of(const struct table *t, const json_t *rec,
			  const json_t *cfg, char **key)
{
	const json_t *at;
	*key = row_key(rec, cfg, 0);
	at = *key ? json_object_get(t->index, *key) : NULL;
	return at ? &t->rows[json_integer_value(at)] : NULL;
}

int report_table_add(struct table *t, const json_t *rec)
{
	const json_t *cfg = json_object_get(rec, "config");
	struct agg *r;
	char *key;
	if (!json_is_object(cfg))
		return 0;
	if ((r = row_of(t, rec, cfg, &key)))
		free(key);
	else if (!key || !(r = agg_new(t, rec, cfg, key)))
		return -1;
	return agg_add(r, rec);
}

char *report_run_key(const json_t *rec)
{
	const json_t *cfg = json_object_get(rec, "config");
	char *k, *seed, *out = NULL;
	if (!json_is_object(cfg) || !(k = row_key(rec, cfg, 0)))
		return NULL;
	seed = json_dumps(json_object_get(cfg, "seed"),
			  JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS |
			      JSON_REAL_PRECISION(17));
	/* no seed: "null" is its identity, as json_dumps gives none */
	if ((out = malloc(strlen(k) + (seed ? strlen(seed) : 4) + 2)))
		sprintf(out, "%s\x1d%s", k, seed ? seed : "null");
	free(seed);
	free(k);
	return out;
}

int report_table_open(struct table *t, const json_t *rec)
{
	const json_t *cfg = json_object_get(rec, "config");
	char *key;
	if (!json_is_object(cfg))
		return 0;
	if (row_of(t, rec, cfg, &key)) {
		free(key);
		return 0;
	}
	return key && agg_new(t, rec, cfg, key) ? 0 : -1;
}

/* The row of record rec into *r (NULL: none yet, or no config object).
 * 0, or -1 when out of memory. */
static int row_found(struct table *t, const json_t *rec, struct agg **r)
{
	const json_t *cfg = json_object_get(rec, "config");
	char *key;
	*r = NULL;
	if (!json_is_object(cfg))
		return 0;
	*r = row_of(t, rec, cfg, &key);
	if (!key)
		return -1;
	free(key);
	return 0;
}

int report_table_superseded(struct table *t, const json_t *rec)
{
	struct agg *r;
	if (row_found(t, rec, &r) != 0)
		return -1;
	if (r)
		r->superseded++;
	return 0;
}

int report_table_dup(struct table *t, const json_t *rec)
{
	struct agg *r;
	if (row_found(t, rec, &r) != 0)
		return -1;
	/* an earlier equal record made the row */
	if (r)
		r->duplicates++;
	return 0;
}
