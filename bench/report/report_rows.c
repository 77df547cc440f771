/* report_rows.c — see report.h: the rows as JSON objects, each figure with
 * its interval, the labels of groups and methods, and the health labels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../config/config.h"
#include "../records/health.h"
#include "../records/record.h"
#include "report.h"
#include "report_impl.h"
#include "stats.h"

static json_t *num(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

/* The finite values of column c of row r into out (r->n doubles). */
static int finite_col(const struct agg *r, enum col c, double *out)
{
	const double *x = agg_col(r, c);
	int k = 0;
	for (int i = 0; i < r->n; i++)
		if (isfinite(x[i]))
			out[k++] = x[i];
	return k;
}

static double col_median(const struct agg *r, enum col c)
{
	return stats_median(agg_col(r, c), r->n);
}

static double col_mean(const struct agg *r, enum col c)
{
	double *x = malloc(((size_t)r->n + 1) * sizeof(*x)), m, sd;
	int k = x ? finite_col(r, c, x) : 0;
	stats_mean_sd(x, k, &m, &sd);
	free(x);
	return m;
}

/* The geometric mean of x[0..k): NAN when k < 1 or a value is not > 0
 * (the interval of stats_log_interval is about this estimate). */
static double gmean(const double *x, int k)
{
	double s = 0;
	if (k < 1)
		return NAN;
	for (int i = 0; i < k; i++) {
		if (!(x[i] > 0))
			return NAN;
		s += log(x[i]);
	}
	return exp(s / k);
}

/* {"median", "gmean", "lo", "hi", "n"} of column c: the runs' median, their
 * geometric mean and its 95% interval (nulls with fewer than
 * REPORT_MIN_CI_RUNS runs), n the runs with a value. */
/* The row mean of r's priced parts (report_cost.h), 0 without. */
static struct cost_parts mean_parts(const struct agg *r)
{
	struct cost_parts p = r->parts;
	for (int u = 0; u < CU_N && r->n_parts; u++) {
		p.ms[u] /= r->n_parts;
		p.sd[u] /= r->n_parts;
	}
	return p;
}

/* Whether column c is a priced step time (its interval adds the prices'
 * uncertainty): the step with its fixed cost, mean, early and late. */
static int priced_col(enum col c)
{
	return c == C_PR || c == C_PRF || c == C_PRL;
}

/* The variance the prices add to the log of row r's priced column c, or
 * with b to the log of r's over b's (shared prices: report_cost_log_var
 * of the two; prices of two shapes: the sum of each's). */
static double price_var(const struct agg *r, const struct agg *b, enum col c)
{
	struct cost_parts x, y;
	if (!priced_col(c) || !r->n_parts || (b && !b->n_parts))
		return 0;
	x = mean_parts(r);
	if (!b)
		return report_cost_log_var(&x, NULL);
	y = mean_parts(b);
	if (json_equal(r->price, b->price))
		return report_cost_log_var(&x, &y);
	return report_cost_log_var(&x, NULL) + report_cost_log_var(&y, NULL);
}

static json_t *interval_json(const struct agg *r, enum col c)
{
	double *x = malloc(((size_t)r->n + 1) * sizeof(*x)), lo = NAN, hi = NAN;
	int k = x ? finite_col(r, c, x) : 0;
	json_t *o = json_object();
	if (k >= REPORT_MIN_CI_RUNS)
		stats_log_interval_plus(x, k, REPORT_LEVEL,
					price_var(r, NULL, c), &lo, &hi);
	json_object_set_new(o, "median", num(stats_median(x, k)));
	json_object_set_new(o, "gmean", num(gmean(x, k)));
	json_object_set_new(o, "lo", num(lo));
	json_object_set_new(o, "hi", num(hi));
	json_object_set_new(o, "n", json_integer(k));
	free(x);
	return o;
}

/* {"ratio", "median_ratio", "lo", "hi", "self", "n", "n_unroll"} of column
 * c, row r over row b: the ratio of the geometric means with Welch's 95%
 * interval (the interval is about that ratio, not the medians'; none
 * unless both sides have REPORT_MIN_CI_RUNS runs with a value, n and
 * n_unroll), and the ratio of the medians. b's own row (self) is 1 without
 * interval: Welch's interval of a sample against itself says nothing.
 * Null without b or a value. */
static json_t *ratio_json(const struct agg *r, const struct agg *b, enum col c)
{
	double *x, *y, lo = NAN, hi = NAN, ratio, med;
	int kx, ky, self = r == b;
	json_t *o = NULL;
	if (!b)
		return json_null();
	x = malloc(((size_t)r->n + 1) * sizeof(*x));
	y = malloc(((size_t)b->n + 1) * sizeof(*y));
	kx = x ? finite_col(r, c, x) : 0;
	ky = y ? finite_col(b, c, y) : 0;
	ratio = gmean(x, kx) / gmean(y, ky);
	med = stats_median(x, kx) / stats_median(y, ky);
	if (isfinite(ratio) && self)
		ratio = med = 1;
	else if (isfinite(ratio) && kx >= REPORT_MIN_CI_RUNS &&
		 ky >= REPORT_MIN_CI_RUNS)
		stats_log_ratio_interval_plus(x, kx, y, ky, REPORT_LEVEL,
					      price_var(r, b, c), &lo, &hi);
	if (isfinite(ratio)) {
		o = json_object();
		json_object_set_new(o, "ratio", num(ratio));
		json_object_set_new(o, "median_ratio", num(med));
		json_object_set_new(o, "lo", num(lo));
		json_object_set_new(o, "hi", num(hi));
		json_object_set_new(o, "self", json_boolean(self));
		json_object_set_new(o, "n", json_integer(kx));
		json_object_set_new(o, "n_unroll", json_integer(ky));
	}
	free(x);
	free(y);
	return o ? o : json_null();
}

/* Column c of row r, run by run in the order read (null where a run has
 * no value). */
static json_t *per_run(const struct agg *r, enum col c)
{
	json_t *a = json_array();
	for (int i = 0; i < r->n; i++)
		json_array_append_new(a, num(agg_col(r, c)[i]));
	return a;
}

/* interval_json of column c with its per-run values as "per_run". */
static json_t *runs_json(const struct agg *r, enum col c)
{
	json_t *o = interval_json(r, c);
	json_object_set_new(o, "per_run", per_run(r, c));
	return o;
}

/* Row r's fixed cost per step: the mean over its runs of priced step
 * less priced units (step_fixed × optimizer steps); NAN without one. */
static double fixed_ms(const struct agg *r)
{
	double s = 0;
	int k = 0;
	for (int i = 0; i < r->n; i++) {
		double d = agg_col(r, C_PR)[i] - agg_col(r, C_PU)[i];
		if (isfinite(d)) {
			s += d;
			k++;
		}
	}
	return k ? s / k : NAN;
}

/* A row's "priced" object (docs/commands.md §report): null without
 * --price; else whether prices matched its shape, the priced step time
 * (units + fixed) with its interval and per-run values, × unroll, early
 * and late, the fixed cost, the units left unpriced, and priced /
 * measured. */
static json_t *priced_json(const struct table *t, const struct agg *r,
			   const struct agg *b)
{
	json_t *o;
	double f = fixed_ms(r), pm, mm;
	const char *note = NULL;
	if (!t->prices)
		return json_null();
	o = json_object();
	if (!r->price)
		note = "no price records of this shape";
	else if (r->no_work)
		note = "no work in these records (made before issue 40)";
	else if (json_array_size(r->unpriced))
		note = "some units have no price: see unpriced";
	json_object_set_new(o, "matched", json_boolean(r->price != NULL));
	json_object_set_new(o, "note", note ? json_string(note) : json_null());
	json_object_set_new(o, "units_ms", interval_json(r, C_PU));
	json_object_set_new(o, "units_x_unroll", ratio_json(r, b, C_PU));
	json_object_set_new(o, "fixed_ms", num(f));
	json_object_set_new(o, "step_ms", runs_json(r, C_PR));
	json_object_set_new(o, "x_unroll", ratio_json(r, b, C_PR));
	json_object_set_new(o, "early_ms", runs_json(r, C_PRF));
	json_object_set_new(o, "late_ms", runs_json(r, C_PRL));
	json_object_set_new(o, "unpriced", json_deep_copy(r->unpriced));
	pm = record_num(json_object_get(o, "step_ms"), "gmean");
	{
		double *x = malloc(((size_t)r->n + 1) * sizeof(*x));
		int k = x ? finite_col(r, C_MEAN, x) : 0;
		mm = gmean(x, k);
		free(x);
	}
	json_object_set_new(o, "x_measured", num(pm / mm));
	return o;
}

/* Drops an incomplete UTF-8 sequence at the end of buf (a label cut by
 * snprintf), so that json_string takes it. */
static void utf8_trim(char *buf)
{
	size_t l = strlen(buf), i = l, need;
	unsigned char c;
	while (i > 0 && ((unsigned char)buf[i - 1] & 0xC0) == 0x80 && l - i < 3)
		i--;
	if (i == 0)
		return;
	c = (unsigned char)buf[i - 1];
	need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
	if (c >= 0x80 && l - (i - 1) < need)
		buf[i - 1] = 0;
}

/* A row's method label from an older record, which lacks method.label:
 * what method_label (methods/method.h) writes, read from
 * the record's config and method objects. */
static void label_of_old(char *buf, size_t n, const json_t *rec)
{
	const json_t *cfg = json_object_get(rec, "config");
	const json_t *m = json_object_get(rec, "method");
	const char *meth = report_str(cfg, "method", "?");
	double L = record_num(cfg, "layers");
	if (!strcmp(meth, "unroll") || !strcmp(meth, "offload"))
		snprintf(buf, n, "%s L=%.0f", meth, L);
	else if (!strcmp(meth, "checkpoint") || !strcmp(meth, "revolve")) {
		const char *key = meth[0] == 'c' ? "k" : "slots";
		double k = record_num(m, key);
		if (!isfinite(k))
			k = record_num(cfg, key);
		snprintf(buf, n, "%s L=%.0f %s=%.0f", meth, L, key, k);
	} else if (!strcmp(meth, "deq"))
		snprintf(buf, n, "deq %s/%s", report_str(cfg, "f_solver", "?"),
			 report_str(cfg, "b_mode", "?"));
	else
		snprintf(buf, n, "%s", meth);
}

/* The row's method label: the record's method.label (label_of_old where
 * it lacks one). vary_deq: the deq keys whose values differ between the deq
 * records of the table; each is appended to a deq row's label, so rows
 * that differ only in, say, f_tol or f_history get distinct labels. */
static void row_label(char *buf, size_t n, const json_t *rec,
		      const json_t *vary_deq)
{
	const json_t *cfg = json_object_get(rec, "config");
	const char *label = json_string_value(
	    json_object_get(json_object_get(rec, "method"), "label"));
	const char *k2;
	json_t *v2;
	size_t l;
	double mb = record_num(cfg, "microbatches");
	if (label)
		snprintf(buf, n, "%s", label);
	else
		label_of_old(buf, n, rec);
	l = strlen(buf);
	if (mb > 1 && l < n) /* gradient accumulation: another method row */
		l += (size_t)snprintf(buf + l, n - l, " microbatches=%.0f", mb);
	if (strcmp(report_str(cfg, "method", "?"), "deq"))
		return;
	json_object_foreach((json_t *)vary_deq, k2, v2)
	{
		char *t;
		if (l >= n || !strcmp(k2, "f_solver") || !strcmp(k2, "b_mode"))
			continue;
		t = record_value_text(json_object_get(cfg, k2));
		l +=
		    (size_t)snprintf(buf + l, n - l, " %s=%s", k2, t ? t : "?");
		free(t);
	}
}

/* The group label: "key=value ..." of the varying keys, or the corpus,
 * then "blas=CORE" when blas (the rows ran on several OpenBLAS cores) and
 * "code=FINGERPRINT" when code (the rows ran code of several fingerprints;
 * "code=none" for records before build.fingerprint). An eval group's
 * (eval) starts "eval" and leaves out params and layers, its rows'. */
static void group_label(char *group, size_t n, const json_t *cfg,
			const json_t *varying, const char *blas,
			const char *code, int eval)
{
	const char *k2;
	json_t *v2;
	size_t gl = 0;
	group[0] = 0;
	if (eval) /* an eval group: params and layers are its rows' */
		gl = (size_t)snprintf(group, n, "eval");
	json_object_foreach((json_t *)varying, k2, v2)
	{
		char *t;
		if (eval && (!strcmp(k2, "params") || !strcmp(k2, "layers")))
			continue;
		t = record_value_text(json_object_get(cfg, k2));
		gl +=
		    (size_t)snprintf(group + gl, gl < n ? n - gl : 0, "%s%s=%s",
				     gl ? " " : "", k2, t ? t : "?");
		free(t);
		if (gl >= n)
			break;
	}
	if (!group[0] || (eval && gl == 4))
		gl += (size_t)snprintf(group + gl, n - gl, "%s%s",
				       eval ? " " : "",
				       report_str(cfg, "corpus", "-"));
	if (blas && gl < n)
		gl += (size_t)snprintf(group + gl, n - gl, " blas=%s", blas);
	if (code && gl < n)
		snprintf(group + gl, n - gl, " code=%s", code);
}

static void add_label(json_t *labels, const char *what, int k, int n)
{
	char buf[64];
	if (k <= 0)
		return;
	snprintf(buf, sizeof(buf), "%s %d/%d", what, k, n);
	json_array_append_new(labels, json_string(buf));
}

/* The row's health object: the counts and the labels ("error 1/3",
 * "unstable 1/3", ...; empty when every run finished, healthy and
 * steady). */
static json_t *row_health_json(const struct agg *r)
{
	json_t *o = json_object(), *labels = json_array();
	json_object_set_new(o, "healthy", json_integer(r->healthy));
	json_object_set_new(o, "unstable", json_integer(r->unstable));
	json_object_set_new(o, "diverged", json_integer(r->diverged));
	json_object_set_new(o, "unconverged", json_integer(r->unconverged));
	json_object_set_new(o, "noisy", json_integer(r->noisy));
	json_object_set_new(o, "beside", json_integer(r->beside));
	json_object_set_new(o, "unknown", json_integer(r->no_health));
	json_object_set_new(o, "error", json_integer(r->error));
	json_object_set_new(o, "interrupted", json_integer(r->interrupted));
	add_label(labels, "error", r->error, r->n);
	add_label(labels, "interrupted", r->interrupted, r->n);
	add_label(labels, "diverged", r->diverged, r->n);
	add_label(labels, "unstable", r->unstable, r->n);
	add_label(labels, "unconverged", r->unconverged, r->n);
	for (int i = 0; i < REPORT_HEALTH_FLAGS; i++)
		add_label(labels, health_flag_name((enum health_flag)(1 << i)),
			  r->flagged[i], r->n);
	add_label(labels, "noisy", r->noisy, r->n);
	add_label(labels, "beside", r->beside, r->n);
	add_label(labels, "health unknown", r->no_health, r->n);
	json_object_set_new(o, "labels", labels);
	return o;
}

/* {"mean", "sd", "n"} of the runs' perplexities of column c (C_PPL
 * valid, C_TPPL test). */
static json_t *ppl_json(const struct agg *r, enum col c)
{
	double *x = malloc(((size_t)r->n + 1) * sizeof(*x)), m, sd;
	int k = x ? finite_col(r, c, x) : 0;
	json_t *o = json_object();
	stats_mean_sd(x, k, &m, &sd);
	json_object_set_new(o, "mean", num(m));
	json_object_set_new(o, "sd", num(sd));
	json_object_set_new(o, "n", json_integer(k));
	free(x);
	return o;
}

/* The row's config: the first record's without the seed. */
static json_t *row_config(const struct agg *r)
{
	json_t *c = json_deep_copy(json_object_get(r->first, "config"));
	json_object_del(c, "seed");
	return c;
}

static void set_mem(json_t *o, const struct agg *r, const struct agg *b)
{
	double ds = col_median(r, C_DS), tot = col_median(r, C_TOT);
	json_object_set_new(o, "depth_solver_mib", num(ds / 1048576.0));
	json_object_set_new(o, "depth_solver_x_unroll",
			    num(b ? ds / col_median(b, C_DS) : NAN));
	json_object_set_new(o, "total_mib", num(tot / 1048576.0));
	json_object_set_new(o, "total_x_unroll",
			    num(b ? tot / col_median(b, C_TOT) : NAN));
}

static void set_solver(json_t *o, const struct agg *r)
{
	json_object_set_new(o, "fwd_iters", num(col_mean(r, C_FIT)));
	json_object_set_new(o, "fwd_converged", num(col_mean(r, C_FCV)));
	json_object_set_new(o, "bwd_iters", num(col_mean(r, C_BIT)));
	json_object_set_new(o, "bwd_converged", num(col_mean(r, C_BCV)));
	json_object_set_new(o, "forward_evals", num(col_mean(r, C_FEV)));
	json_object_set_new(o, "vjp_evals", num(col_mean(r, C_VEV)));
}

/* Whether row q is an eval row of the unrolled net in r's group. */
static int eval_unroll_of(const struct agg *q, const struct agg *r)
{
	const json_t *c = json_object_get(q->first, "config");
	return report_is_eval(q) && !strcmp(q->group, r->group) &&
	       !strcmp(report_str(c, "method", ""), "unroll");
}

/* The unroll row eval row r is timed against (docs/commands.md
 * §report): r itself when it is the unrolled net's; else, among the
 * unroll eval rows of its group, the shallowest whose mean valid
 * perplexity is at most r's (the unrolled net at the least depth that
 * matches r's quality), *as_good 1; when none matches, the one of lowest
 * mean perplexity, *as_good 0. NULL without an unroll row with a
 * perplexity. O(rows). */
static const struct agg *matched_unroll(const struct table *t,
					const struct agg *r, int *as_good)
{
	const struct agg *m = NULL, *best = NULL;
	double p = col_mean(r, C_PPL), bl = INFINITY, bp = INFINITY;
	*as_good = 1;
	if (eval_unroll_of(r, r))
		return r;
	for (size_t j = 0; j < t->nrow; j++) {
		const struct agg *q = &t->rows[j];
		double qp = col_mean(q, C_PPL);
		double L =
		    record_num(json_object_get(q->first, "config"), "layers");
		if (!eval_unroll_of(q, r) || !isfinite(qp))
			continue;
		if (qp < bp)
			bp = qp, best = q;
		if (qp <= p && L < bl)
			bl = L, m = q;
	}
	*as_good = m != NULL;
	return m ? m : best;
}

/* An eval row's "matched_unroll": the method label, depth and mean valid
 * perplexity of b, the row its ratios are against, and whether it is as
 * good as r (as_good; "rule" names the choice); null for a training row
 * or without b. */
static json_t *matched_json(const struct agg *r, const struct agg *b,
			    int as_good)
{
	const json_t *c;
	char label[128];
	if (!report_is_eval(r) || !b)
		return json_null();
	c = json_object_get(b->first, "config");
	label_of_old(label, sizeof(label), b->first); /* "unroll L=8" */
	return json_pack(
	    "{s:s, s:O, s:o, s:b, s:s}", "method", label, "layers",
	    json_object_get(c, "layers"), "valid_ppl", num(col_mean(b, C_PPL)),
	    "as_good", as_good, "rule",
	    b == r    ? "self"
	    : as_good ? "shallowest unroll with valid ppl <= this row's"
		      : "no unroll as good: the one of lowest valid ppl");
}

/* Row j of t as a JSON object (report.h). */
static json_t *row_json(const struct table *t, size_t j)
{
	const struct agg *r = &t->rows[j], *b;
	const json_t *cfg = json_object_get(r->first, "config");
	char label[256], group[256];
	json_t *o = json_object();
	int as_good = 1;
	b = report_is_eval(r) ? matched_unroll(t, r, &as_good)
			      : report_unroll_row(t, r);
	group_label(group, sizeof(group), cfg, t->varying,
		    t->blas_varies ? r->blas : NULL,
		    t->fp_varies ? (r->fp ? r->fp : "none") : NULL,
		    report_is_eval(r));
	row_label(label, sizeof(label), r->first, t->vary_deq);
	utf8_trim(group);
	utf8_trim(label);
	json_object_set_new(o, "group", json_string(group));
	json_object_set_new(o, "method", json_string(label));
	json_object_set_new(o, "impl",
			    json_string(report_str(cfg, "impl", "deqbench")));
	json_object_set_new(o, "kind",
			    json_string(report_str(r->first, "kind", "train")));
	json_object_set_new(o, "status", json_string(r->status));
	json_object_set_new(o, "runs", json_integer(r->n));
	json_object_set_new(o, "runs_ok", json_integer(r->n_ok));
	json_object_set_new(o, "seeds", json_deep_copy(r->seeds));
	json_object_set_new(o, "health", row_health_json(r));
	json_object_set_new(o, "step_ms", interval_json(r, C_STEP));
	json_object_set_new(o, "step_x_unroll", ratio_json(r, b, C_STEP));
	json_object_set_new(o, "step_mean_ms", runs_json(r, C_MEAN));
	json_object_set_new(o, "step_mean_x_unroll", ratio_json(r, b, C_MEAN));
	json_object_set_new(o, "early_ms", runs_json(r, C_EARLY));
	json_object_set_new(o, "late_ms", runs_json(r, C_END));
	json_object_set_new(o, "priced", priced_json(t, r, b));
	json_object_set_new(o, "inference_ms", interval_json(r, C_INF));
	json_object_set_new(o, "inference_x_unroll", ratio_json(r, b, C_INF));
	json_object_set_new(o, "inference_head_ms", interval_json(r, C_HEAD));
	json_object_set_new(o, "inference_body_ms", interval_json(r, C_BODY));
	json_object_set_new(o, "inference_body_x_unroll",
			    ratio_json(r, b, C_BODY));
	json_object_set_new(o, "matched_unroll", matched_json(r, b, as_good));
	set_mem(o, r, b);
	set_solver(o, r);
	json_object_set_new(o, "valid_ppl", ppl_json(r, C_PPL));
	json_object_set_new(o, "test_ppl", ppl_json(r, C_TPPL));
	json_object_set_new(o, "config", row_config(r));
	json_object_set_new(o, "blas_core",
			    r->blas ? json_string(r->blas) : json_null());
	json_object_set_new(o, "fingerprint",
			    r->fp ? json_string(r->fp) : json_null());
	json_object_set_new(o, "commits", json_deep_copy(r->commits));
	return o;
}

/* The index of the impl=pytorch row of row j's config, or -1 (row j
 * itself a pytorch row). */
static json_int_t pytorch_row(const struct table *t, size_t j)
{
	json_t *c = json_deep_copy(json_object_get(t->rows[j].first, "config"));
	json_int_t found = -1;
	const json_t *at;
	char *k;
	if (!strcmp(report_str(c, "impl", "deqbench"), "pytorch")) {
		json_decref(c);
		return -1;
	}
	json_object_set_new(c, "impl", json_string("pytorch"));
	if (report_is_eval(&t->rows[j])) /* keyed so (report.c row_cfg) */
		json_object_del(c, "params");
	k = report_key(c, t->rows[j].blas, t->rows[j].fp, 0);
	if (k && (at = json_object_get(t->index, k)))
		found = json_integer_value(at);
	free(k);
	json_decref(c);
	return found;
}

/* The row's duplicates (report_unique's records left out of row r) as
 * "duplicates" and, when there are any, a label of its health. */
static void set_duplicates(json_t *o, const struct agg *r)
{
	char buf[64];
	json_object_set_new(o, "duplicates", json_integer(r->duplicates));
	if (!r->duplicates)
		return;
	snprintf(buf, sizeof(buf), "duplicates left out %d", r->duplicates);
	json_array_append_new(
	    json_object_get(json_object_get(o, "health"), "labels"),
	    json_string(buf));
}

/* The row's interrupted runs rerun to the end (report_acc) as
 * "superseded" and, when there are any, a label of its health. */
static void set_superseded(json_t *o, const struct agg *r)
{
	char buf[64];
	json_object_set_new(o, "superseded", json_integer(r->superseded));
	if (!r->superseded)
		return;
	snprintf(buf, sizeof(buf), "interrupted and rerun: left out %d",
		 r->superseded);
	json_array_append_new(
	    json_object_get(json_object_get(o, "health"), "labels"),
	    json_string(buf));
}

/* The best (lowest) mean valid loss of the training rows of group g in
 * rows; INFINITY when none has one. */
static double group_best(const json_t *rows, const char *g)
{
	double best = INFINITY;
	size_t i;
	json_t *o;
	json_array_foreach(rows, i, o)
	{
		double p = json_number_value(
		    json_object_get(json_object_get(o, "valid_ppl"), "mean"));
		if (!strcmp(json_string_value(json_object_get(o, "group")),
			    g) &&
		    !strcmp(json_string_value(json_object_get(o, "kind")),
			    "train") &&
		    p > 0 && log(p) < best)
			best = log(p);
	}
	return best;
}

/* REPORT_SUSPECT_GAP's rule (report_impl.h) over the rows of t. */
static void label_suspects(const struct table *t, json_t *rows)
{
	size_t j;
	json_t *o;
	json_array_foreach(rows, j, o)
	{
		const struct agg *r = &t->rows[j];
		double p = json_number_value(
		    json_object_get(json_object_get(o, "valid_ppl"), "mean"));
		double gain = col_median(r, C_LATE);
		double best = group_best(
		    rows, json_string_value(json_object_get(o, "group")));
		if (p > 0 && isfinite(best) && isfinite(gain) &&
		    log(p) > best + REPORT_SUSPECT_GAP && gain < REPORT_PLATEAU)
			json_array_append_new(
			    json_object_get(json_object_get(o, "health"),
					    "labels"),
			    json_string("suspect baseline"));
	}
}

json_t *report_table_rows(const struct table *t)
{
	json_t *rows = json_array();
	for (size_t j = 0; rows && j < t->nrow; j++) {
		json_t *o = row_json(t, j);
		json_int_t p = pytorch_row(t, j);
		json_object_set_new(o, "pytorch_row",
				    p < 0 ? json_null() : json_integer(p));
		set_duplicates(o, &t->rows[j]);
		set_superseded(o, &t->rows[j]);
		if (json_array_append_new(rows, o) != 0) {
			json_decref(rows);
			rows = NULL;
		}
	}
	if (rows) {
		label_suspects(t, rows);
		report_target_rows(t, rows);
	}
	return rows;
}
