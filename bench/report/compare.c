/* compare.c — see compare.h: pairing BASE's and NEW's rows, each run's
 * sample, the ratios, the U test, the verdict and the notes of a pair;
 * compare_print.c prints them and gates --fail-above. */
#include "compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../config/config.h"
#include "../records/record.h"
#include "report.h"
#include "stats.h"

/* The key of a config without the seed and the match key (NULL: none),
 * after kind and before the OpenBLAS core blas of CPU runs and the build
 * fingerprint fp (NULL: none): rows and records of one kind,
 * configuration, machine and code share it, as report's rows split them
 * (report_key); without the method keys too when group (report's group:
 * a method's unroll baseline shares it). malloc'd, NULL when out of
 * memory. */
static char *key_of(const char *kind, const json_t *cfg, const char *blas,
		    const char *fp, const char *match, int group)
{
	json_t *c = record_run_identity(cfg), *v;
	const char *name;
	void *tmp;
	char *s, *k;
	json_object_foreach_safe(c, tmp, name, v)
	{
		if (!strcmp(name, "seed") || (match && !strcmp(name, match)) ||
		    (group && config_key_is_method(name)))
			json_object_del(c, name);
	}
	s = json_dumps(c,
		       JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	json_decref(c);
	k = s ? malloc(strlen(kind) + strlen(s) + (blas ? strlen(blas) : 0) +
		       (fp ? strlen(fp) : 0) + 4)
	      : NULL;
	if (k)
		sprintf(k, "%s\n%s\n%s\n%s", kind, s, blas ? blas : "",
			fp ? fp : "");
	free(s);
	return k;
}

static char *row_key(const char *kind, const json_t *cfg, const char *blas,
		     const char *fp, const char *match)
{
	return key_of(kind, cfg, blas, fp, match, 0);
}

static const char *kind_of(const json_t *o)
{
	const char *k = json_string_value(json_object_get(o, "kind"));
	return k ? k : "train";
}

/* One side of the comparison. */
struct side {
	json_t *recs; /* records, second readings left out (report_unique) */
	json_t *rows; /* report_rows of the records as given */
	size_t nrec, nrow;
	char **rec_key; /* per record: row_key without match (NULL: none) */
	char **key;	/* per row: row_key without match */
	char **pkey;	/* per row: row_key with match (the pairing key) */
	double *t;	/* per record: its sample, run_time (NAN: none) */
	double *ut;	/* per record: its file's unroll time (unroll_times) */
};

static void side_free(struct side *s)
{
	for (size_t i = 0; s->rec_key && i < s->nrec; i++)
		free(s->rec_key[i]);
	for (size_t i = 0; s->key && i < s->nrow; i++)
		free(s->key[i]);
	for (size_t i = 0; s->pkey && i < s->nrow; i++)
		free(s->pkey[i]);
	free(s->rec_key);
	free(s->key);
	free(s->pkey);
	free(s->t);
	free(s->ut);
	json_decref(s->recs);
	json_decref(s->rows);
}

/* A run's sample (compare.h): its mean time, NAN for none. */
static double run_time(const json_t *rec)
{
	const char *st = json_string_value(json_object_get(rec, "status"));
	double x;
	if (!st || strcmp(st, "ok"))
		return NAN;
	x = record_num(rec, strcmp(kind_of(rec), "eval")
				? "timing.step_ms.mean"
				: "inference.step_ms.mean");
	return isfinite(x) && x > 0 ? x : NAN;
}

/* The key of record r (config cfg) that its file's unroll run of the same
 * group and seed shares: report's group key, then the seed. malloc'd, NULL
 * when out of memory. */
static char *unroll_key(const json_t *r, const json_t *cfg)
{
	char *g = key_of(kind_of(r), cfg, record_blas_core(r),
			 record_build(r, "fingerprint"), NULL, 1);
	const json_t *seed = json_object_get(cfg, "seed");
	char *sd = seed ? json_dumps(seed, JSON_ENCODE_ANY) : NULL;
	char *k = g ? malloc(strlen(g) + (sd ? strlen(sd) : 1) + 2) : NULL;
	if (k)
		sprintf(k, "%s\n%s", g, sd ? sd : "-");
	free(g);
	free(sd);
	return k;
}

static int is_unroll(const json_t *cfg)
{
	const char *m = json_string_value(json_object_get(cfg, "method"));
	return m && !strcmp(m, "unroll");
}

/* ut[i] (compare.h, × unroll): the median of the times of the unroll runs
 * among records[0..n) with key gk[i] (by: key -> their times), NAN for
 * none; x holds n doubles. */
static void unroll_medians(double *ut, char **gk, size_t n, const json_t *by,
			   double *x)
{
	for (size_t i = 0; i < n; i++) {
		const json_t *a = gk[i] ? json_object_get(by, gk[i]) : NULL, *v;
		size_t k, m = 0;
		json_array_foreach(a, k, v) x[m++] = json_real_value(v);
		ut[i] = m ? stats_median(x, (int)m) : NAN;
	}
}

/* s->t: each record's run_time; s->ut: the unroll time of its file, the
 * median of run_time over s's ok unroll runs of its group and seed
 * (unroll_key; several with repeats of one seed), NAN for none. A map of
 * unroll_key to those times keeps it O(records). 0, or -1 when out of
 * memory. */
static int unroll_times(struct side *s)
{
	json_t *by = json_object(), *a;
	char **gk = calloc(s->nrec + 1, sizeof(*gk));
	double *x = malloc((s->nrec + 1) * sizeof(*x));
	int rc = by && gk && x ? 0 : -1;
	for (size_t i = 0; !rc && i < s->nrec; i++) {
		const json_t *r = json_array_get(s->recs, i);
		const json_t *cfg = json_object_get(r, "config");
		s->t[i] = run_time(r);
		if (!json_is_object(cfg))
			continue;
		if (!(gk[i] = unroll_key(r, cfg)))
			rc = -1;
		else if (is_unroll(cfg) && isfinite(s->t[i])) {
			if (!(a = json_object_get(by, gk[i])))
				json_object_set_new(by, gk[i],
						    a = json_array());
			rc = a ? json_array_append_new(a, json_real(s->t[i]))
			       : -1;
		}
	}
	if (!rc)
		unroll_medians(s->ut, gk, s->nrec, by, x);
	for (size_t i = 0; gk && i < s->nrec; i++)
		free(gk[i]);
	free(gk);
	free(x);
	json_decref(by);
	return rc;
}

/* s from recs. 0, or -1 when out of memory (side_free s either way). */
static int side_init(struct side *s, const json_t *recs, const char *match)
{
	json_t *dropped = json_array(), *r;
	size_t i;
	memset(s, 0, sizeof(*s));
	s->recs = dropped ? report_unique(recs, dropped) : NULL;
	json_decref(dropped);
	/* the rows of recs as given, so that they name the duplicates */
	if (!s->recs || !(s->rows = report_rows(recs)))
		return -1;
	s->nrec = json_array_size(s->recs);
	s->nrow = json_array_size(s->rows);
	s->rec_key = calloc(s->nrec + 1, sizeof(char *));
	s->key = calloc(s->nrow + 1, sizeof(char *));
	s->pkey = calloc(s->nrow + 1, sizeof(char *));
	s->t = calloc(s->nrec + 1, sizeof(double));
	s->ut = calloc(s->nrec + 1, sizeof(double));
	if (!s->rec_key || !s->key || !s->pkey || !s->t || !s->ut ||
	    unroll_times(s) != 0)
		return -1;
	json_array_foreach(s->recs, i, r)
	{
		const json_t *cfg = json_object_get(r, "config");
		if (json_is_object(cfg) &&
		    !(s->rec_key[i] =
			  row_key(kind_of(r), cfg, record_blas_core(r),
				  record_build(r, "fingerprint"), NULL)))
			return -1;
	}
	json_array_foreach(s->rows, i, r)
	{
		const json_t *cfg = json_object_get(r, "config");
		const char *blas =
		    json_string_value(json_object_get(r, "blas_core"));
		const char *fp =
		    json_string_value(json_object_get(r, "fingerprint"));
		s->key[i] = row_key(kind_of(r), cfg, blas, fp, NULL);
		/* pairs across sides may join two machines (blas_note) and
		 * two builds (comparing them is what compare is for) */
		s->pkey[i] = row_key(kind_of(r), cfg, NULL, NULL, match);
		if (!s->key[i] || !s->pkey[i])
			return -1;
	}
	return 0;
}

/* The samples of row j of s into x (s->nrec doubles): its runs' times,
 * or with ratio their times over their file's unroll time of the same
 * seed (unroll_times); their count. */
static int samples(const struct side *s, size_t j, double *x, int ratio)
{
	int n = 0;
	for (size_t i = 0; i < s->nrec; i++) {
		double t = ratio ? s->t[i] / s->ut[i] : s->t[i];
		if (s->rec_key[i] && !strcmp(s->rec_key[i], s->key[j]) &&
		    isfinite(t))
			x[n++] = t;
	}
	return n;
}

static json_t *num(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

/* The test of one pair, on its runs' times or on their ratios to unroll
 * (x_unroll). */
struct pair_test {
	int x_unroll;  /* samples are time / unroll's time of the file */
	int nb, nn;    /* samples of BASE and NEW */
	double mb, mn; /* their medians (ms, or × unroll; NAN: none) */
	double d;      /* mn / mb - 1 */
	double u, p;   /* U of NEW against BASE, its two-sided p */
	double p_min;  /* the smallest p nb + nn samples can reach */
};

/* Of row r's runs, how many diverged (its health counts). */
static long diverged(const json_t *r)
{
	return (long)json_integer_value(
	    json_object_get(json_object_get(r, "health"), "diverged"));
}

/* The verdict of t (compare.h) for NEW's row n, its reason into why. */
static const char *verdict(const struct pair_test *t, const json_t *n,
			   const struct compare_opts *o, char *why, size_t len)
{
	double mu = 0.5 * t->nb * t->nn;
	why[0] = 0;
	if (!t->nn && diverged(n) > 0) {
		snprintf(why, len, "diverged %ld/%lld", diverged(n),
			 json_integer_value(json_object_get(n, "runs")));
		return "NEW DIVERGED";
	}
	if (!t->nn || !t->nb) {
		snprintf(why, len, "no ok run with a time%s in %s",
			 t->x_unroll ? " and an unroll run of its seed" : "",
			 t->nn	 ? "BASE"
			 : t->nb ? "NEW"
				 : "BASE or NEW");
		return "NO DATA";
	}
	if (fabs(t->d) <= o->threshold)
		return "SAME";
	if (!(t->p_min < o->alpha)) {
		snprintf(why, len,
			 "too few runs to call (n=%d vs %d; smallest p = %.2g; "
			 "need n ≥ %d a side at α = %g)",
			 t->nb, t->nn, t->p_min,
			 stats_mann_whitney_need_n(o->alpha), o->alpha);
		return "UNDECIDED";
	}
	if (!(t->p < o->alpha)) {
		snprintf(why, len, "p >= alpha %g", o->alpha);
		return "NOISY";
	}
	/* U above its mean: NEW's runs mostly the slower; the medians must
	 * say the same, or neither direction is supported */
	if (!(t->d > 0 ? t->u > mu : t->u < mu)) {
		snprintf(why, len,
			 "direction: the medians say %s, the U test %s",
			 t->d > 0 ? "slower" : "faster",
			 t->d > 0 ? "faster" : "slower");
		return "NOISY";
	}
	return t->d < 0 ? "FASTER" : "SLOWER";
}

/* The BLAS cores of row j's runs (record_blas_core), distinct, in
 * first-seen order, ", "-joined into buf (at most 8 named); "" when none
 * is a CPU run. */
static void cores_of(const struct side *s, size_t j, char *buf, size_t n)
{
	const char *seen[8];
	size_t ns = 0, l = 0;
	buf[0] = 0;
	for (size_t i = 0; i < s->nrec && ns < 8; i++) {
		const char *c;
		size_t k = 0;
		if (!s->rec_key[i] || strcmp(s->rec_key[i], s->key[j]) ||
		    !(c = record_blas_core(json_array_get(s->recs, i))))
			continue;
		while (k < ns && strcmp(seen[k], c))
			k++;
		if (k < ns)
			continue;
		seen[ns++] = c;
		l += (size_t)snprintf(buf + l, l < n ? n - l : 0, "%s%s",
				      l ? ", " : "", c);
	}
}

/* A note when the pair's CPU runs ran on different OpenBLAS kernels: two
 * machines, whose time ratio says as much about the kernels as about the
 * configurations. NULL when they agree or neither side ran on a CPU. */
static json_t *blas_note(const struct side *B, size_t ib, const struct side *N,
			 size_t jn)
{
	char cb[96], cn[96], buf[400];
	cores_of(B, ib, cb, sizeof(cb));
	cores_of(N, jn, cn, sizeof(cn));
	if (!strcmp(cb, cn) || (!cb[0] && !cn[0]))
		return NULL;
	snprintf(buf, sizeof(buf),
		 "different machines: BASE ran OpenBLAS core %s, NEW %s "
		 "(host.blas.core); the time ratio compares the kernels as "
		 "well as the runs",
		 cb[0] ? cb : "none (not a CPU run)",
		 cn[0] ? cn : "none (not a CPU run)");
	return json_string(buf);
}

/* The notes of the pair of row ib of B and row jn of N (its test t): one
 * string each, what a reader needs to trust the pair's figures that its
 * other fields do not say. A row's runs are the records i of its side
 * with rec_key[i] equal to key[row] (samples() reads them so). Add a note
 * here, e.g. a fact that makes the two sides' machines differ. */
static json_t *notes(const struct side *B, size_t ib, const struct side *N,
		     size_t jn, const struct pair_test *t)
{
	json_t *a = json_array();
	const json_t *row[] = {json_array_get(B->rows, ib),
			       json_array_get(N->rows, jn)};
	const int ns[] = {t->nb, t->nn};
	for (int k = 0; k < 2; k++) {
		long runs =
		    (long)json_integer_value(json_object_get(row[k], "runs"));
		char buf[160];
		if (ns[k] >= runs)
			continue;
		snprintf(buf, sizeof(buf),
			 "%s: %ld of %ld runs gave no sample (not ok, or "
			 "no mean time)",
			 k ? "NEW" : "BASE", runs - ns[k], runs);
		json_array_append_new(a, json_string(buf));
	}
	json_t *blas = blas_note(B, ib, N, jn);
	if (blas)
		json_array_append_new(a, blas);
	return a;
}

/* The statistics of the pair (row ib of B, row jn of N) into t, on the
 * runs' times, or with x_unroll on their ratios to unroll. 0, or -1 when
 * out of memory. */
static int pair_test(struct pair_test *t, const struct side *B, size_t ib,
		     const struct side *N, size_t jn, int x_unroll)
{
	double *xb = malloc((B->nrec + 1) * sizeof(*xb));
	double *xn = malloc((N->nrec + 1) * sizeof(*xn));
	if (!xb || !xn) {
		free(xb);
		free(xn);
		return -1;
	}
	memset(t, 0, sizeof(*t));
	t->x_unroll = x_unroll;
	t->nb = samples(B, ib, xb, x_unroll);
	t->nn = samples(N, jn, xn, x_unroll);
	t->mb = stats_median(xb, t->nb);
	t->mn = stats_median(xn, t->nn);
	t->d = t->mn / t->mb - 1;
	stats_mann_whitney(xn, t->nn, xb, t->nb, &t->u, &t->p);
	t->p_min = stats_mann_whitney_min_p(t->nb, t->nn);
	free(xb);
	free(xn);
	return 0;
}

static double ratio(const json_t *n, const json_t *b, const char *path)
{
	return record_num(n, path) / record_num(b, path);
}

/* {"key", "base", "new"}: the match key's values of the pair's rows. */
static json_t *match_json(const char *key, const json_t *b, const json_t *n)
{
	return json_pack("{s:s, s:O*, s:O*}", "key", key, "base",
			 json_object_get(json_object_get(b, "config"), key),
			 "new",
			 json_object_get(json_object_get(n, "config"), key));
}

/* The pair's × unroll object (compare.h) of row ib of B and row jn of
 * N: the test on each run's time over its file's unroll time, its
 * verdict into *v (NULL for unroll beside unroll: 1 by definition); NULL
 * when out of memory. */
static json_t *x_unroll_json(const struct side *B, size_t ib,
			     const struct side *N, size_t jn,
			     const struct compare_opts *o, const char **v)
{
	const json_t *b = json_array_get(B->rows, ib);
	const json_t *n = json_array_get(N->rows, jn);
	struct pair_test t;
	char why[200] = "unroll itself: 1 by definition";
	*v = NULL;
	if (is_unroll(json_object_get(b, "config")) &&
	    is_unroll(json_object_get(n, "config")))
		return json_pack(
		    "{s:f, s:f, s:f, s:n, s:n, s:n, s:n, s:n, s:n, "
		    "s:s}",
		    "base", 1.0, "new", 1.0, "ratio", 1.0, "n_base", "n_new",
		    "u", "p", "p_min", "verdict", "reason", why);
	if (pair_test(&t, B, ib, N, jn, 1) != 0)
		return NULL;
	*v = verdict(&t, n, o, why, sizeof(why));
	return json_pack("{s:o, s:o, s:o, s:i, s:i, s:o, s:o, s:o, s:s, s:s}",
			 "base", num(t.mb), "new", num(t.mn), "ratio",
			 num(t.mn / t.mb), "n_base", t.nb, "n_new", t.nn, "u",
			 num(t.u), "p", num(t.p), "p_min", num(t.p_min),
			 "verdict", *v, "reason", why);
}

/* A note when the time moved (FASTER, SLOWER) but its ratio to unroll
 * did not move the same way (vx: SAME, NOISY, UNDECIDED, NO DATA): every
 * method of the file moved alike, so the machine or its load changed
 * between the files (a rerun on a shared machine reads so), and only ×
 * unroll speaks for the method. */
static void machine_note(json_t *notes, const char *v, const char *vx)
{
	char buf[300];
	if (!vx || (strcmp(v, "FASTER") && strcmp(v, "SLOWER")) ||
	    !strcmp(vx, v))
		return;
	snprintf(buf, sizeof(buf), "%s in time but × unroll %s: %s", v, vx,
		 !strcmp(vx, "SAME")
		     ? "the time changed with unroll's, so the machine or its "
		       "load changed, not the method"
		     : "not seen beside unroll, so the machine or its load "
		       "may have changed rather than the method");
	json_array_append_new(notes, json_string(buf));
}

/* The pair of row ib of B and row jn of N; NULL when out of memory. */
static json_t *pair_json(const struct side *B, size_t ib, const struct side *N,
			 size_t jn, const struct compare_opts *o)
{
	const json_t *b = json_array_get(B->rows, ib);
	const json_t *n = json_array_get(N->rows, jn);
	json_t *p = json_object(), *x, *nt;
	struct pair_test t;
	const char *v, *vx;
	char why[200];
	if (!p || pair_test(&t, B, ib, N, jn, 0) != 0 ||
	    !(x = x_unroll_json(B, ib, N, jn, o, &vx))) {
		json_decref(p);
		return NULL;
	}
	json_object_set(p, "group", json_object_get(b, "group"));
	json_object_set(p, "method", json_object_get(b, "method"));
	if (o->match)
		json_object_set_new(p, "match", match_json(o->match, b, n));
	json_object_set_new(
	    p, "time",
	    json_string(strcmp(kind_of(b), "eval") ? "step" : "inference"));
	json_object_set(p, "runs_base", json_object_get(b, "runs"));
	json_object_set(p, "runs_new", json_object_get(n, "runs"));
	json_object_set_new(p, "step_ms_base", num(t.mb));
	json_object_set_new(p, "step_ms_new", num(t.mn));
	json_object_set_new(p, "step_ratio", num(t.mn / t.mb));
	json_object_set_new(p, "total_peak_ratio",
			    num(ratio(n, b, "total_mib")));
	json_object_set_new(p, "depth_solver_ratio",
			    num(ratio(n, b, "depth_solver_mib")));
	json_object_set_new(p, "valid_ppl_ratio",
			    num(ratio(n, b, "valid_ppl.mean")));
	json_object_set_new(p, "samples", json_string("run means"));
	json_object_set_new(p, "n_base", json_integer(t.nb));
	json_object_set_new(p, "n_new", json_integer(t.nn));
	json_object_set_new(p, "u", num(t.u));
	json_object_set_new(p, "p", num(t.p));
	json_object_set_new(p, "p_min", num(t.p_min));
	json_object_set_new(p, "need_n",
			    json_integer(stats_mann_whitney_need_n(o->alpha)));
	v = verdict(&t, n, o, why, sizeof(why));
	json_object_set_new(p, "verdict", json_string(v));
	json_object_set_new(p, "reason", json_string(why));
	json_object_set_new(p, "x_unroll", x);
	json_object_set(
	    p, "health_base",
	    json_object_get(json_object_get(b, "health"), "labels"));
	json_object_set(
	    p, "health_new",
	    json_object_get(json_object_get(n, "health"), "labels"));
	nt = notes(B, ib, N, jn, &t);
	machine_note(nt, v, vx);
	json_object_set_new(p, "notes", nt);
	return p;
}

/* The BASE row NEW's row j pairs with: the one row of its pairing key, or
 * among several the one of its own configuration. -1: none; -2: several,
 * none its own (ambiguous). */
static long base_of(const struct side *B, const struct side *N, size_t j)
{
	long found = -1, n = 0;
	for (size_t i = 0; i < B->nrow; i++) {
		if (strcmp(B->pkey[i], N->pkey[j]))
			continue;
		if (!strcmp(B->key[i], N->key[j]))
			return (long)i;
		found = (long)i;
		n++;
	}
	return n > 1 ? -2 : found;
}

/* err: NEW's row n pairs with BASE rows of the OpenBLAS cores (and
 * builds, when code) vals. */
static void blas_refusal(char *err, size_t errlen, const json_t *n,
			 const char *vals, int code)
{
	const char *c = json_string_value(json_object_get(n, "blas_core"));
	snprintf(err, errlen,
		 "compare: NEW's %.60s %.60s (OpenBLAS core %.40s) pairs "
		 "with BASE runs of several other cores%s (%.150s): different "
		 "machines%s; compare files of one machine%s each (report "
		 "groups them by blas=CORE%s)",
		 json_string_value(json_object_get(n, "group")),
		 json_string_value(json_object_get(n, "method")),
		 c ? c : "none", code ? " or builds" : "", vals,
		 code ? " or code" : "", code ? " and one build" : "",
		 code ? " and code=FINGERPRINT" : "");
}

static const char *row_str(const json_t *row, const char *k)
{
	return json_string_value(json_object_get(row, k));
}

/* The one-line refusal of NEW's row j, which pairs with several BASE rows
 * of other OpenBLAS cores or build fingerprints than its own (no
 * --match); the fingerprints are named where they differ. */
static void ambiguous_blas(const struct side *B, const struct side *N, size_t j,
			   char *err, size_t errlen)
{
	const json_t *n = json_array_get(N->rows, j), *b;
	const char *nfp = row_str(n, "fingerprint"), *c, *fp;
	char vals[200] = "";
	size_t l = 0;
	int code = 0;
	for (size_t i = 0; i < B->nrow; i++) {
		fp = row_str(json_array_get(B->rows, i), "fingerprint");
		code |= !strcmp(B->pkey[i], N->pkey[j]) && (fp || nfp) &&
			(!fp || !nfp || strcmp(fp, nfp));
	}
	for (size_t i = 0; i < B->nrow && l < sizeof(vals); i++) {
		if (strcmp(B->pkey[i], N->pkey[j]))
			continue;
		b = json_array_get(B->rows, i);
		c = row_str(b, "blas_core");
		fp = row_str(b, "fingerprint");
		l += (size_t)snprintf(vals + l, sizeof(vals) - l, "%s%s%s%s",
				      l ? ", " : "", c ? c : "none",
				      code ? " code=" : "",
				      code ? (fp ? fp : "none") : "");
	}
	blas_refusal(err, errlen, n, vals, code);
}

/* The one-line refusal of NEW's row j, which pairs with several BASE rows
 * differing in the match key. */
static void ambiguous(const struct side *B, const struct side *N, size_t j,
		      const char *match, char *err, size_t errlen)
{
	const json_t *n = json_array_get(N->rows, j);
	if (!match) {
		ambiguous_blas(B, N, j, err, errlen);
		return;
	}
	char vals[200] = "";
	size_t l = 0;
	char *v = record_value_text(
	    json_object_get(json_object_get(n, "config"), match));
	for (size_t i = 0; i < B->nrow && l < sizeof(vals); i++) {
		char *w;
		if (strcmp(B->pkey[i], N->pkey[j]))
			continue;
		w = record_value_text(json_object_get(
		    json_object_get(json_array_get(B->rows, i), "config"),
		    match));
		l += (size_t)snprintf(vals + l, sizeof(vals) - l, "%s%s=%s",
				      l ? ", " : "", match, w ? w : "?");
		free(w);
	}
	snprintf(err, errlen,
		 "compare: --match %s: NEW's %.60s %.60s (%s=%.40s) pairs with "
		 "several BASE configurations (%.150s); keep one value of %s "
		 "in BASE, or give NEW the same values",
		 match, json_string_value(json_object_get(n, "group")),
		 json_string_value(json_object_get(n, "method")), match,
		 v ? v : "?", vals, match);
	free(v);
}

static json_t *unpaired_json(const json_t *row)
{
	return json_pack("{s:O, s:O, s:O, s:s}", "group",
			 json_object_get(row, "group"), "method",
			 json_object_get(row, "method"), "runs",
			 json_object_get(row, "runs"), "time",
			 strcmp(kind_of(row), "eval") ? "step" : "inference");
}

/* The pairs into out (compare.h), in BASE's row order, then NEW's. 0, or
 * -1 (err set for an ambiguous pairing). */
static int pair_rows(json_t *out, const struct side *B, const struct side *N,
		     const struct compare_opts *o, char *err, size_t errlen)
{
	long *of = calloc(N->nrow + 1, sizeof(*of));
	json_t *pairs = json_array(), *ub = json_array(), *un = json_array();
	int rc = of && pairs && ub && un ? 0 : -1;
	for (size_t j = 0; !rc && j < N->nrow; j++)
		if ((of[j] = base_of(B, N, j)) == -2) {
			ambiguous(B, N, j, o->match, err, errlen);
			rc = -1;
		}
	for (size_t i = 0; !rc && i < B->nrow; i++) {
		int paired = 0;
		for (size_t j = 0; !rc && j < N->nrow; j++) {
			json_t *p;
			if (of[j] != (long)i)
				continue;
			paired = 1;
			p = pair_json(B, i, N, j, o);
			rc = p ? json_array_append_new(pairs, p) : -1;
		}
		if (!paired && !rc)
			rc = json_array_append_new(
			    ub, unpaired_json(json_array_get(B->rows, i)));
	}
	for (size_t j = 0; !rc && j < N->nrow; j++)
		if (of[j] < 0)
			rc = json_array_append_new(
			    un, unpaired_json(json_array_get(N->rows, j)));
	free(of);
	json_object_set_new(out, "pairs", pairs);
	json_object_set_new(out, "unpaired_base", ub);
	json_object_set_new(out, "unpaired_new", un);
	return rc;
}

json_t *compare_records(const json_t *base, const json_t *new_recs,
			const struct compare_opts *o, char *err, size_t errlen)
{
	struct side B, N;
	json_t *out = json_object();
	memset(&B, 0, sizeof(B));
	memset(&N, 0, sizeof(N));
	if (errlen)
		err[0] = 0;
	if (side_init(&B, base, o->match) != 0 ||
	    side_init(&N, new_recs, o->match) != 0 || !out ||
	    pair_rows(out, &B, &N, o, err, errlen) != 0) {
		json_decref(out);
		out = NULL;
	}
	side_free(&B);
	side_free(&N);
	return out;
}
