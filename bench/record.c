/* record.c — record skeleton, append-only JSONL output, statistics helpers
 * and the summary table. */
#include "record.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "fileio.h"

static const char *const sections[] = {
    "suite",  "config", "method", "model",    "data",	   "timing",
    "memory", "solver", "evals",  "quality",  "inference", "host",
    "device", "build",	"trace",  "pretrain", "plan",	   NULL,
};

json_t *record_new(void)
{
	json_t *r = json_object();
	json_object_set_new(r, "schema", json_integer(RECORD_SCHEMA));
	json_object_set_new(r, "kind", json_string("train"));
	json_object_set_new(r, "impl", json_string("deqbench"));
	json_object_set_new(r, "status", json_string("error"));
	json_object_set_new(r, "message", json_string(""));
	json_object_set_new(r, "started_at", json_null());
	json_object_set_new(r, "finished_at", json_null());
	for (int i = 0; sections[i]; i++)
		json_object_set_new(r, sections[i], json_null());
	return r;
}

/* Whether the regular file fd (out=) can take records: empty or blank, or
 * its first non-blank line is one JSON object. Reads up to that line. */
static int holds_jsonl(int fd)
{
	FILE *f = fdopen(fd, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	json_t *o;
	int c, ok;
	if (!f)
		return 1; /* cannot tell: the append decides */
	while ((c = fgetc(f)) == ' ' || c == '\t' || c == '\r' || c == '\n')
		;
	if (c == EOF || c != '{') {
		ok = c == EOF;
		fclose(f);
		return ok;
	}
	ungetc(c, f);
	len = getline(&line, &cap, f);
	while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' ||
			   line[len - 1] == ' '))
		len--;
	o = len > 0 ? json_loadb(line, (size_t)len, 0, NULL) : NULL;
	ok = json_is_object(o);
	json_decref(o);
	free(line);
	fclose(f);
	return ok;
}

int record_check_out(const char *path, char *err, size_t errlen)
{
	char e[900], pb[400];
	struct stat st;
	int fd;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    (fd = fileio_open_read(path, e, sizeof(e))) >= 0 &&
	    !holds_jsonl(fd)) {
		snprintf(err, errlen,
			 "out=%s is not a JSONL file of records (its first "
			 "line is not one JSON object: a safetensors or JSON "
			 "config file?); records are appended to out=, so give "
			 "a .jsonl path",
			 config_brief(path, pb, sizeof(pb)));
		return -1;
	}
	if (fileio_probe_append(path, e, sizeof(e)) == 0)
		return 0;
	/* a message that names its fix already (a dangling link) is whole */
	snprintf(err, errlen, "out=%s%s", e,
		 strstr(e, "; ") ? "" : "; choose a writable out= path");
	return -1;
}

/* The shortest "%.*g" text of x that reads back as the same double, in
 * buf (n >= 32): fixed notation wherever jansson's "%.17g" has it (1200000
 * rather than 1.2e+06), the exponent as jansson writes it (1e-5, 1e20),
 * ".0" appended when it would read as an integer. */
static void shortest_real(double x, char *buf, size_t n)
{
	int p = 1, e = x != 0 ? (int)floor(log10(fabs(x))) : 0;
	char *ex;
	while (p < 17) {
		snprintf(buf, n, "%.*g", p, x);
		if (strtod(buf, NULL) == x)
			break;
		p++;
	}
	if (e >= p && e < 17) {
		snprintf(buf, n, "%.*g", e + 1, x);
		if (strtod(buf, NULL) != x)
			snprintf(buf, n, "%.*g", p, x);
	} else
		snprintf(buf, n, "%.*g", p, x);
	if ((ex = strchr(buf, 'e'))) { /* as jansson: 1e-5, 1e20 */
		char *d = ex + 1 + (ex[1] == '-'), *z = d + (*d == '+');
		while (z[0] == '0' && z[1])
			z++;
		memmove(d, z, strlen(z) + 1);
	} else if (!strchr(buf, '.'))
		strncat(buf, ".0", n - strlen(buf) - 1);
}

/* Rewrites, in place, every real of JSON text s (jansson's, written with
 * 17 significant digits) in its shortest_real form, never longer. */
static void shorten_reals(char *s)
{
	char *r = s, *w = s, buf[40];
	int in_str = 0;
	while (*r) {
		size_t len = 0;
		if (in_str || (*r != '-' && !isdigit((unsigned char)*r))) {
			if (in_str && *r == '\\' && r[1])
				*w++ = *r++;
			else if (*r == '"')
				in_str = !in_str;
			*w++ = *r++;
			continue;
		}
		len = strspn(r, "+-0123456789.eE");
		buf[0] = 0;
		if (memchr(r, '.', len) || memchr(r, 'e', len) ||
		    memchr(r, 'E', len))
			shortest_real(strtod(r, NULL), buf, sizeof(buf));
		if (buf[0] && strlen(buf) <= len) {
			memmove(w, buf, strlen(buf));
			w += strlen(buf);
		} else {
			memmove(w, r, len);
			w += len;
		}
		r += len;
	}
	*w = 0;
}

char *record_dumps(const json_t *rec)
{
	char *s = json_dumps(rec, JSON_COMPACT | JSON_REAL_PRECISION(17));
	if (s)
		shorten_reals(s);
	return s;
}

/* The record as one line, '\n' included; *n its length. */
static char *record_line(const json_t *rec, size_t *n)
{
	char *s = record_dumps(rec);
	if (!s)
		return NULL;
	*n = strlen(s);
	s[*n] = '\n'; /* replaces the terminator; the buffer holds n+1 bytes */
	*n += 1;
	return s;
}

int record_append(const char *path, const json_t *rec, char *err, size_t errlen)
{
	char e[900];
	size_t n;
	char *s = record_line(rec, &n);
	int rc;

	if (!s) {
		snprintf(err, errlen, "cannot serialise the record");
		return -1;
	}
	rc = fileio_make_parents(path, e, sizeof(e));
	if (rc == 0)
		rc = fileio_append(path, s, n, 0, e, sizeof(e));
	if (rc != 0)
		snprintf(err, errlen, "out=%s", e);
	free(s);
	return rc;
}

int record_save(const char *path, const json_t *rec)
{
	char err[1024], e2[1024], rescue[1024];
	size_t n;
	char *s;

	if (record_append(path, rec, err, sizeof(err)) == 0)
		return 0;
	fileio_rescue_path(rescue, sizeof(rescue));
	s = record_line(rec, &n);
	if (s && fileio_append(rescue, s, n, 1, e2, sizeof(e2)) == 0)
		fprintf(stderr,
			"deqbench: %s; the record is appended to %s and "
			"printed below\n",
			err, rescue);
	else
		fprintf(stderr,
			"deqbench: %s; the rescue file failed too (%s); the "
			"record is printed below\n",
			err, s ? e2 : "cannot serialise the record");
	if (s)
		fwrite(s, 1, n, stderr);
	fflush(stderr);
	free(s);
	return -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double quantile(const double *sorted, int n, double q)
{
	double pos = q * (n - 1);
	int lo = (int)floor(pos);
	int hi = lo + 1 < n ? lo + 1 : lo;
	double t = pos - lo;
	return sorted[lo] * (1 - t) + sorted[hi] * t;
}

static json_t *num(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

json_t *record_stats_json(const double *x, int n)
{
	json_t *o = json_object();
	double *s, sum = 0;
	if (n <= 0 || !(s = malloc((size_t)n * sizeof(*s)))) {
		const char *k[] = {"median", "mean", "p10",
				   "p90",    "min",  "max"};
		for (int i = 0; i < 6; i++)
			json_object_set_new(o, k[i], json_null());
		return o;
	}
	memcpy(s, x, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	for (int i = 0; i < n; i++)
		sum += s[i];
	json_object_set_new(o, "median", num(quantile(s, n, 0.5)));
	json_object_set_new(o, "mean", num(sum / n));
	json_object_set_new(o, "p10", num(quantile(s, n, 0.1)));
	json_object_set_new(o, "p90", num(quantile(s, n, 0.9)));
	json_object_set_new(o, "min", num(s[0]));
	json_object_set_new(o, "max", num(s[n - 1]));
	free(s);
	return o;
}

int record_each_line(const char *path, record_line_fn fn, void *ctx, char *err,
		     size_t errlen)
{
	return record_each_line_flags(path, 0, fn, ctx, err, errlen);
}

int record_each_line_flags(const char *path, size_t json_flags,
			   record_line_fn fn, void *ctx, char *err,
			   size_t errlen)
{
	char *line = NULL, e[900];
	size_t cap = 0;
	ssize_t len;
	int lineno = 0, rerr, stop = 0;
	/* a FIFO is refused, not waited on (fileio_open_read) */
	int fd = fileio_open_read(path, e, sizeof(e));
	FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;

	if (fd >= 0 && !f)
		close(fd);
	if (!f && errno == EISDIR)
		snprintf(
		    err, errlen,
		    "%s is a directory; give record files, e.g. %s/*.jsonl",
		    path, path);
	else if (!f)
		snprintf(err, errlen, "%s; give a JSONL file of records", e);
	if (!f)
		return -1;
	while (!stop && (len = getline(&line, &cap, f)) >= 0) {
		json_error_t je;
		json_t *r;
		lineno++;
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r' ||
			line[len - 1] == ' '))
			line[--len] = 0;
		if (len == 0)
			continue;
		/* by length: a NUL byte inside the line is malformed, not
		 * the end of it */
		r = json_loadb(line, (size_t)len, json_flags, &je);
		if (json_is_object(r))
			stop = fn(ctx, lineno, r, 0, NULL);
		else
			stop = fn(ctx, lineno, NULL, r ? 1 : je.column,
				  r ? "not an object" : je.text);
		json_decref(r);
	}
	rerr = ferror(f) ? errno : 0;
	free(line);
	fclose(f);
	if (rerr) {
		snprintf(err, errlen, "%s: read failed after line %d (%s)",
			 path, lineno, strerror(rerr));
		return -1;
	}
	return 0;
}

/* record_read_jsonl's state: the array, and the first malformed line. */
struct read_ctx {
	json_t *arr;
	const char *path;
	char *err;
	size_t errlen;
	int bad;
};

static int read_line(void *ctx, int lineno, json_t *rec, int column,
		     const char *why)
{
	struct read_ctx *c = ctx;
	if (rec && json_array_append(c->arr, rec) == 0)
		return 0;
	if (rec)
		why = "out of memory";
	snprintf(c->err, c->errlen,
		 "%s:%d:%d: malformed record: %s; each line must be one JSON "
		 "object",
		 c->path, lineno, column, why);
	c->bad = 1;
	return 1;
}

int record_read_jsonl(const char *path, json_t *arr, char *err, size_t errlen)
{
	struct read_ctx c = {arr, path, err, errlen, 0};
	if (record_each_line(path, read_line, &c, err, errlen) != 0)
		return -1;
	return c.bad ? -1 : 0;
}

/* ---- summary table ---- */

double record_num(const json_t *o, const char *path)
{
	char buf[256], *save = NULL, *tok;
	const json_t *cur = o;
	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && cur;
	     tok = strtok_r(NULL, ".", &save))
		cur = json_object_get(cur, tok);
	return json_is_number(cur) ? json_number_value(cur) : NAN;
}

char *record_value_text(const json_t *x)
{
	return json_is_string(x)
		   ? strdup(json_string_value(x))
		   : json_dumps(x, JSON_ENCODE_ANY | JSON_REAL_PRECISION(6));
}

/* Whether config key KEY of CFG is part of a run's identity: every key but
 * the output-only ones, data_dir included unless the corpus is synthetic. */
static int identity_key(const char *key, const json_t *cfg)
{
	const char *corpus = json_string_value(json_object_get(cfg, "corpus"));
	if (!strcmp(key, "data_dir"))
		return !corpus || strcmp(corpus, "synthetic") != 0;
	return !config_key_is_output(key);
}

json_t *record_run_identity(const json_t *cfg)
{
	json_t *o = json_object(), *v;
	const char *k;
	json_object_foreach((json_t *)cfg, k, v)
	{
		if (identity_key(k, cfg))
			json_object_set(o, k, v);
	}
	return o;
}

/* The run identity of cfg (record_run_identity), without the method keys
 * when drop_method, as sorted compact JSON: rows with equal keys are
 * repeats. */
static char *row_key(const json_t *cfg, int drop_method)
{
	json_t *c = record_run_identity(cfg);
	const char *key;
	json_t *v;
	void *tmp;
	char *s;
	json_object_foreach_safe(c, tmp, key, v)
	{
		if (drop_method && config_key_is_method(key))
			json_object_del(c, key);
	}
	s = json_dumps(c,
		       JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	json_decref(c);
	return s;
}

static const char *str_of(const json_t *o, const char *k, const char *dflt)
{
	const json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : dflt;
}

/* vary_deq: the deq keys whose values differ between the deq records of
 * the table; each is appended to a deq row's label, so rows that differ only
 * in, say, f_tol or f_history get distinct labels. */
static void method_label(char *buf, size_t n, const json_t *rec,
			 const json_t *vary_deq)
{
	const json_t *cfg = json_object_get(rec, "config");
	const json_t *m = json_object_get(rec, "method");
	const char *meth = str_of(cfg, "method", "?");
	double L = record_num(cfg, "layers");
	if (!strcmp(meth, "unroll"))
		snprintf(buf, n, "unroll L=%.0f", L);
	else if (!strcmp(meth, "checkpoint") || !strcmp(meth, "revolve")) {
		const char *key = meth[0] == 'c' ? "k" : "slots";
		double k = record_num(m, key);
		if (!isfinite(k))
			k = record_num(cfg, key);
		snprintf(buf, n, "%s L=%.0f %s=%.0f", meth, L, key, k);
	} else if (!strcmp(meth, "deq")) {
		const char *k2;
		json_t *v2, *x;
		size_t l = (size_t)snprintf(buf, n, "deq %s/%s",
					    str_of(cfg, "f_solver", "?"),
					    str_of(cfg, "b_mode", "?"));
		json_object_foreach((json_t *)vary_deq, k2, v2)
		{
			char *t;
			if (l >= n || !strcmp(k2, "f_solver") ||
			    !strcmp(k2, "b_mode"))
				continue;
			x = json_object_get(cfg, k2);
			t = record_value_text(x);
			l += (size_t)snprintf(buf + l, n - l, " %s=%s", k2,
					      t ? t : "?");
			free(t);
		}
	} else
		snprintf(buf, n, "%s", meth);
}

struct row {
	char *key, *group;
	const json_t *first;
	int n, n_ok, cap; /* records of the row; room for cap of them */
	/* each record's figures, n of cap (row_grow) */
	double *step_ms, *inf_ms, *ds, *tot, *fit, *bit, *ppl;
	double *fcv, *bcv; /* converged fractions */
	const char *status;
};

/* The addresses of row R's figure arrays (ROW_FIGS). */
#define ROW_FIGS 9
static void row_figs(struct row *r, double **f[ROW_FIGS])
{
	double **a[ROW_FIGS] = {&r->step_ms, &r->inf_ms, &r->ds,
				&r->tot,     &r->fit,	 &r->bit,
				&r->ppl,     &r->fcv,	 &r->bcv};
	memcpy(f, a, sizeof(a));
}

/* Room for twice as many records in row R. 0, or -1 out of memory (R as
 * it was). */
static int row_grow(struct row *r)
{
	double **f[ROW_FIGS];
	int cap = r->cap ? 2 * r->cap : 16;
	row_figs(r, f);
	for (int i = 0; i < ROW_FIGS; i++) {
		double *p = realloc(*f[i], (size_t)cap * sizeof(double));
		if (!p)
			return -1;
		*f[i] = p;
	}
	r->cap = cap;
	return 0;
}

static void row_free(struct row *r)
{
	double **f[ROW_FIGS];
	row_figs(r, f);
	for (int i = 0; i < ROW_FIGS; i++)
		free(*f[i]);
	free(r->key);
	free(r->group);
}

/* The median of the finite values of x[n]; NAN when there is none. */
static double median_of(const double *x, int n)
{
	double *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof(*tmp)), m;
	int k = 0;
	if (!tmp)
		return NAN;
	for (int i = 0; i < n; i++)
		if (isfinite(x[i]))
			tmp[k++] = x[i];
	if (k == 0)
		m = NAN;
	else {
		qsort(tmp, (size_t)k, sizeof(*tmp), cmp_double);
		m = quantile(tmp, k, 0.5);
	}
	free(tmp);
	return m;
}

static void fmt(char *buf, size_t n, double x, const char *f)
{
	if (isfinite(x))
		snprintf(buf, n, f, x);
	else
		snprintf(buf, n, "-");
}

/* A fraction in [0, 1] as a percentage with one decimal; never rounded to
 * 100.0% or 0.0% unless it is exactly that, so a solve that missed its
 * tolerance once in 2000 steps does not read as always converged. */
static void fmt_pct(char *buf, size_t n, double x)
{
	double p = 100 * x;
	if (p < 100 && p > 99.9)
		p = 99.9;
	else if (p > 0 && p < 0.1)
		p = 0.1;
	fmt(buf, n, isfinite(x) ? p : NAN, "%.1f%%");
}

/* The rows of a summary table being built, and what labels them. */
struct table {
	struct row *rows; /* nrow of at most one per record */
	size_t nrow;
	json_t *varying;  /* non-method keys that differ between groups */
	json_t *vary_deq; /* deq keys that differ between deq records */
	const json_t *first_group_cfg, *first_deq_cfg;
};

/* The row of config CFG (record REC): the one with the same key, else a new
 * one. */
static struct row *row_for(struct table *t, const json_t *rec,
			   const json_t *cfg)
{
	char *key = row_key(cfg, 0);
	struct row *r;
	for (size_t j = 0; j < t->nrow; j++)
		if (!strcmp(t->rows[j].key, key)) {
			free(key);
			return &t->rows[j];
		}
	r = &t->rows[t->nrow++];
	r->key = key;
	r->group = row_key(cfg, 1);
	r->first = rec;
	r->status = "ok";
	return r;
}

/* Adds record REC's figures to row R (every record: the arrays grow). */
static void row_add(struct row *r, const json_t *rec)
{
	int k, ok, eval;
	const char *st;
	if (r->n == r->cap && row_grow(r) != 0) {
		fprintf(stderr, "deqbench: out of memory: a record of the "
				"summary table is left out\n");
		return;
	}
	k = r->n++;
	st = str_of(rec, "status", "?");
	ok = !strcmp(st, "ok");
	if (!ok)
		r->status = st;
	r->n_ok += ok;
	r->step_ms[k] = ok ? record_num(rec, "timing.step_ms.median") : NAN;
	r->inf_ms[k] = ok ? record_num(rec, "inference.step_ms.median") : NAN;
	/* an eval record's memory and solve are its inference's */
	eval = !strcmp(str_of(rec, "kind", "train"), "eval");
	r->ds[k] = record_num(rec, eval ? "inference.memory."
					  "peak_depth_solver_bytes"
					: "memory.peak_depth_solver_bytes");
	r->tot[k] = record_num(rec, eval ? "inference.memory.peak_total_bytes"
					 : "memory.peak_total_bytes");
	r->fit[k] = record_num(rec, eval ? "inference.forward_solve.iters_mean"
					 : "solver.forward.iters_mean");
	r->bit[k] = record_num(rec, "solver.backward.iters_mean");
	r->fcv[k] = record_num(rec, eval ? "inference.forward_solve."
					   "converged_fraction"
					 : "solver.forward.converged_fraction");
	r->bcv[k] = record_num(rec, "solver.backward.converged_fraction");
	r->ppl[k] = record_num(rec, "quality.valid_ppl");
}

/* Notes the keys of config C that differ from the first record's: non-method
 * keys label the groups, deq keys (among deq records) the deq rows. */
static void note_varying(struct table *t, const json_t *c)
{
	const char *k2;
	json_t *v2;
	if (!t->first_group_cfg)
		t->first_group_cfg = c;
	json_object_foreach((json_t *)c, k2, v2)
	{
		if (config_key_is_method(k2) || !identity_key(k2, c))
			continue;
		if (!json_equal(v2, json_object_get(t->first_group_cfg, k2)))
			json_object_set_new(t->varying, k2, json_true());
	}
	/* deq keys that differ between deq records label their rows (k and
	 * method are not deq keys) */
	if (strcmp(str_of(c, "method", ""), "deq"))
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

/* The unroll row of R's group (the ratios' base), or NULL. */
static const struct row *unroll_row(const struct table *t, const struct row *r)
{
	for (size_t q = 0; q < t->nrow; q++) {
		const json_t *qc = json_object_get(t->rows[q].first, "config");
		if (!strcmp(t->rows[q].group, r->group) &&
		    !strcmp(str_of(qc, "method", ""), "unroll"))
			return &t->rows[q];
	}
	return NULL;
}

/* The group column: "key=value ..." of the varying keys, or the corpus. */
static void group_label(char *group, size_t n, const json_t *cfg,
			const json_t *varying)
{
	const char *k2;
	json_t *v2;
	size_t gl = 0;
	group[0] = 0;
	json_object_foreach((json_t *)varying, k2, v2)
	{
		char *t = record_value_text(json_object_get(cfg, k2));
		gl +=
		    (size_t)snprintf(group + gl, gl < n ? n - gl : 0, "%s%s=%s",
				     gl ? " " : "", k2, t ? t : "?");
		free(t);
		if (gl >= n)
			break;
	}
	if (!group[0])
		snprintf(group, n, "%s", str_of(cfg, "corpus", "-"));
}

static void print_header(FILE *f)
{
	fprintf(f, "| group | method | status | runs | step ms | × unroll "
		   "| infer ms | × unroll "
		   "| depth+solver MiB | × unroll | total peak MiB | × unroll "
		   "| fwd iters | fwd converged | bwd iters | bwd converged "
		   "| valid ppl |\n");
	fprintf(f, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
		   "---:|---:|---:|---:|---:|\n");
}

/* One table line: row R's medians and its ratios to its group's unroll
 * row. */
static void print_row(FILE *f, const struct table *t, struct row *r)
{
	const struct row *base = unroll_row(t, r);
	const json_t *cfg = json_object_get(r->first, "config");
	char label[256], group[256], c[11][32], inf[2][32];
	double ms = median_of(r->step_ms, r->n);
	double ims = median_of(r->inf_ms, r->n);
	double ds = median_of(r->ds, r->n);
	double tot = median_of(r->tot, r->n);
	group_label(group, sizeof(group), cfg, t->varying);
	method_label(label, sizeof(label), r->first, t->vary_deq);
	fmt(c[0], 32, ms, "%.2f");
	fmt(c[1], 32, base ? ms / median_of(base->step_ms, base->n) : NAN,
	    "%.2f");
	fmt(inf[0], 32, ims, "%.2f");
	fmt(inf[1], 32, base ? ims / median_of(base->inf_ms, base->n) : NAN,
	    "%.2f");
	fmt(c[2], 32, ds / 1048576.0, "%.2f");
	fmt(c[3], 32, base ? ds / median_of(base->ds, base->n) : NAN, "%.3f");
	fmt(c[4], 32, tot / 1048576.0, "%.2f");
	fmt(c[5], 32, base ? tot / median_of(base->tot, base->n) : NAN, "%.3f");
	fmt(c[6], 32, median_of(r->fit, r->n), "%.1f");
	fmt_pct(c[7], 32, median_of(r->fcv, r->n));
	fmt(c[8], 32, median_of(r->bit, r->n), "%.1f");
	fmt_pct(c[9], 32, median_of(r->bcv, r->n));
	fmt(c[10], 32, median_of(r->ppl, r->n), "%.2f");
	fprintf(f,
		"| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | "
		"%s | %s | %s | %s | %s |\n",
		group, label, r->status, r->n, c[0], c[1], inf[0], inf[1], c[2],
		c[3], c[4], c[5], c[6], c[7], c[8], c[9], c[10]);
}

/* Row R's key with impl=pytorch: the key of its PyTorch peer row. */
static char *peer_key(const struct row *r)
{
	json_t *c = json_deep_copy(json_object_get(r->first, "config"));
	char *k;
	json_object_set_new(c, "impl", json_string("pytorch"));
	k = row_key(c, 0);
	json_decref(c);
	return k;
}

/* The impl=pytorch row of R's config, or NULL (R itself a pytorch row). */
static const struct row *pytorch_row(const struct table *t, const struct row *r)
{
	const json_t *cfg = json_object_get(r->first, "config");
	const struct row *found = NULL;
	char *k;
	if (!strcmp(str_of(cfg, "impl", "deqbench"), "pytorch"))
		return NULL;
	k = peer_key(r);
	for (size_t q = 0; q < t->nrow && !found; q++)
		if (!strcmp(t->rows[q].key, k))
			found = &t->rows[q];
	free(k);
	return found;
}

/* The second table, when records of both implementations are given: each
 * deqbench row beside the pytorch row of the same config (impl aside),
 * step time and depth+solver peak, and PyTorch's / deqbench's. */
static void print_peer_table(FILE *f, const struct table *t)
{
	int header = 0;
	for (size_t j = 0; j < t->nrow; j++) {
		const struct row *r = &t->rows[j], *p = pytorch_row(t, r);
		const json_t *cfg = json_object_get(r->first, "config");
		char label[256], group[256], c[6][32];
		double ms, pms, ds, pds;
		if (!p)
			continue;
		if (!header++)
			fprintf(f, "\n| group | method | deqbench step ms | "
				   "pytorch step ms | pytorch / deqbench | "
				   "deqbench depth+solver MiB | pytorch "
				   "depth+solver MiB | pytorch / deqbench |\n"
				   "|---|---|---:|---:|---:|---:|---:|---:|\n");
		group_label(group, sizeof(group), cfg, t->varying);
		method_label(label, sizeof(label), r->first, t->vary_deq);
		ms = median_of(r->step_ms, r->n);
		pms = median_of(p->step_ms, p->n);
		ds = median_of(r->ds, r->n);
		pds = median_of(p->ds, p->n);
		fmt(c[0], 32, ms, "%.2f");
		fmt(c[1], 32, pms, "%.2f");
		fmt(c[2], 32, pms / ms, "%.2f");
		fmt(c[3], 32, ds / 1048576.0, "%.2f");
		fmt(c[4], 32, pds / 1048576.0, "%.2f");
		fmt(c[5], 32, pds / ds, "%.2f");
		fprintf(f, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", group,
			label, c[0], c[1], c[2], c[3], c[4], c[5]);
	}
}

void record_summary(FILE *f, const json_t *records)
{
	size_t nrec = json_array_size(records), i;
	struct table t = {calloc(nrec ? nrec : 1, sizeof(struct row)),
			  0,
			  json_object(),
			  json_object(),
			  NULL,
			  NULL};
	json_t *rec;

	if (t.rows) {
		json_array_foreach((json_t *)records, i, rec)
		{
			const json_t *cfg = json_object_get(rec, "config");
			if (!json_is_object(cfg))
				continue;
			row_add(row_for(&t, rec, cfg), rec);
			note_varying(&t, cfg);
		}
		print_header(f);
		for (size_t j = 0; j < t.nrow; j++)
			print_row(f, &t, &t.rows[j]);
		json_object_del(t.varying, "impl");
		print_peer_table(f, &t);
		for (size_t j = 0; j < t.nrow; j++)
			row_free(&t.rows[j]);
	}
	free(t.rows);
	json_decref(t.varying);
	json_decref(t.vary_deq);
}
