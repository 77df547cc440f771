/* record.c — record skeleton, append-only JSONL output, statistics helpers
 * and the summary table. */
#include "record.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"

static const char *const sections[] = {
    "suite",  "config", "method", "model", "data",
    "timing", "memory", "solver", "evals", "quality",
    "host",   "device", "build",  "trace", NULL,
};

json_t *record_new(void)
{
	json_t *r = json_object();
	json_object_set_new(r, "schema", json_integer(RECORD_SCHEMA));
	json_object_set_new(r, "status", json_string("error"));
	json_object_set_new(r, "message", json_string(""));
	json_object_set_new(r, "started_at", json_null());
	json_object_set_new(r, "finished_at", json_null());
	for (int i = 0; sections[i]; i++)
		json_object_set_new(r, sections[i], json_null());
	return r;
}

/* mkdir -p of the directory part of path. */
static int make_parents(const char *path, char *err, size_t errlen)
{
	char buf[4096], pb[160], db[160];
	size_t n = strlen(path);
	if (n >= sizeof(buf)) {
		snprintf(err, errlen, "out=%s: path too long",
			 config_brief(path, pb, sizeof(pb)));
		return -1;
	}
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
			snprintf(err, errlen,
				 "out=%s: cannot create directory %s (%s); "
				 "choose a writable out= path",
				 config_brief(path, pb, sizeof(pb)),
				 config_brief(buf, db, sizeof(db)),
				 strerror(errno));
			return -1;
		}
		*p = '/';
	}
	return 0;
}

int record_check_out(const char *path, char *err, size_t errlen)
{
	int fd;
	struct stat st;
	char pb[256];
	if (make_parents(path, err, errlen) != 0)
		return -1;
	/* a FIFO would block the open until a reader came, and a record
	 * needs a file to stay in */
	if (stat(path, &st) == 0 && S_ISFIFO(st.st_mode)) {
		snprintf(err, errlen,
			 "out=%s is a FIFO; records are appended to a regular "
			 "file: choose a file path",
			 config_brief(path, pb, sizeof(pb)));
		return -1;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen,
			 "out=%s: cannot open for appending (%s); choose a "
			 "writable out= path",
			 config_brief(path, pb, sizeof(pb)), strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

int record_append(const char *path, const json_t *rec, char *err, size_t errlen)
{
	char *s = json_dumps(rec, JSON_COMPACT | JSON_REAL_PRECISION(10));
	size_t n;
	ssize_t w;
	int fd;

	if (!s) {
		snprintf(err, errlen, "cannot serialise the record");
		return -1;
	}
	n = strlen(s);
	s[n] = '\n'; /* replaces the terminator; the buffer holds n+1 bytes */
	if (make_parents(path, err, errlen) != 0) {
		free(s);
		return -1;
	}
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "out=%s: cannot open for appending (%s)",
			 path, strerror(errno));
		free(s);
		return -1;
	}
	w = write(fd, s, n + 1);
	if (w != (ssize_t)(n + 1)) {
		snprintf(err, errlen, "out=%s: short write (%s)", path,
			 w < 0 ? strerror(errno) : "disk full?");
		close(fd);
		free(s);
		return -1;
	}
	close(fd);
	free(s);
	return 0;
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

int record_read_jsonl(const char *path, json_t *arr, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	int lineno = 0;

	if (!f) {
		snprintf(err, errlen, "%s: cannot read (%s); check the path",
			 path, strerror(errno));
		return -1;
	}
	while ((len = getline(&line, &cap, f)) >= 0) {
		json_error_t je;
		json_t *r;
		lineno++;
		while (len > 0 &&
		       (line[len - 1] == '\n' || line[len - 1] == '\r' ||
			line[len - 1] == ' '))
			line[--len] = 0;
		if (len == 0)
			continue;
		r = json_loads(line, 0, &je);
		if (!r || !json_is_object(r)) {
			snprintf(err, errlen,
				 "%s:%d:%d: malformed record: %s; each line "
				 "must be one JSON object",
				 path, lineno, r ? 1 : je.column,
				 r ? "not an object" : je.text);
			json_decref(r);
			free(line);
			fclose(f);
			return -1;
		}
		json_array_append_new(arr, r);
	}
	free(line);
	fclose(f);
	return 0;
}

/* ---- summary table ---- */

static double get_num(const json_t *o, const char *path)
{
	/* dotted path, e.g. "timing.step_ms.median"; NAN when absent */
	char buf[256], *save = NULL, *tok;
	const json_t *cur = o;
	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok && cur;
	     tok = strtok_r(NULL, ".", &save))
		cur = json_object_get(cur, tok);
	return json_is_number(cur) ? json_number_value(cur) : NAN;
}

/* Config without output-only keys: rows with equal keys are repeats. */
static char *row_key(const json_t *cfg, int drop_method)
{
	json_t *c = json_deep_copy(cfg);
	const char *key;
	json_t *v;
	void *tmp;
	char *s;
	json_object_del(c, "out");
	json_object_del(c, "trace");
	if (drop_method) {
		json_object_foreach_safe(c, tmp, key, v)
		{
			if (config_key_is_method(key))
				json_object_del(c, key);
		}
	}
	s = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
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
	double L = get_num(cfg, "layers");
	if (!strcmp(meth, "unroll"))
		snprintf(buf, n, "unroll L=%.0f", L);
	else if (!strcmp(meth, "checkpoint")) {
		double k = get_num(m, "k");
		if (!isfinite(k))
			k = get_num(cfg, "k");
		snprintf(buf, n, "checkpoint L=%.0f k=%.0f", L, k);
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
			t = json_is_string(x)
				? strdup(json_string_value(x))
				: json_dumps(x, JSON_ENCODE_ANY |
						    JSON_REAL_PRECISION(6));
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
	int n, n_ok;
	double step_ms[64], ds[64], tot[64], fit[64], bit[64], ppl[64];
	const char *status;
};

static double median_of(double *x, int n)
{
	double tmp[64];
	int m = 0;
	for (int i = 0; i < n; i++)
		if (isfinite(x[i]))
			tmp[m++] = x[i];
	if (m == 0)
		return NAN;
	qsort(tmp, (size_t)m, sizeof(*tmp), cmp_double);
	return quantile(tmp, m, 0.5);
}

static void fmt(char *buf, size_t n, double x, const char *f)
{
	if (isfinite(x))
		snprintf(buf, n, f, x);
	else
		snprintf(buf, n, "-");
}

void record_summary(FILE *f, const json_t *records)
{
	size_t nrec = json_array_size(records), nrow = 0;
	struct row *rows = calloc(nrec ? nrec : 1, sizeof(*rows));
	json_t *first_group_cfg = NULL, *varying = json_object();
	json_t *first_deq_cfg = NULL, *vary_deq = json_object();
	size_t i;
	json_t *rec;

	if (!rows) {
		json_decref(varying);
		json_decref(vary_deq);
		return;
	}
	json_array_foreach((json_t *)records, i, rec)
	{
		const json_t *cfg = json_object_get(rec, "config");
		struct row *r = NULL;
		char *key;
		if (!json_is_object(cfg))
			continue;
		key = row_key(cfg, 0);
		for (size_t j = 0; j < nrow; j++)
			if (!strcmp(rows[j].key, key)) {
				r = &rows[j];
				break;
			}
		if (!r) {
			r = &rows[nrow++];
			r->key = key;
			r->group = row_key(cfg, 1);
			r->first = rec;
			r->status = "ok";
		} else {
			free(key);
		}
		if (r->n < 64) {
			int k = r->n++;
			const char *st = str_of(rec, "status", "?");
			int ok = !strcmp(st, "ok");
			if (!ok)
				r->status = st;
			r->n_ok += ok;
			r->step_ms[k] =
			    ok ? get_num(rec, "timing.step_ms.median") : NAN;
			r->ds[k] =
			    get_num(rec, "memory.peak_depth_solver_bytes");
			r->tot[k] = get_num(rec, "memory.peak_total_bytes");
			r->fit[k] = get_num(rec, "solver.forward.iters_mean");
			r->bit[k] = get_num(rec, "solver.backward.iters_mean");
			r->ppl[k] = get_num(rec, "quality.valid_ppl");
		}
		/* non-method keys that differ between groups label them */
		{
			json_t *c = json_object_get(rec, "config");
			const char *k2;
			json_t *v2;
			if (!first_group_cfg)
				first_group_cfg = c;
			json_object_foreach(c, k2, v2)
			{
				if (config_key_is_method(k2) ||
				    !strcmp(k2, "out") || !strcmp(k2, "trace"))
					continue;
				if (!json_equal(v2, json_object_get(
							first_group_cfg, k2)))
					json_object_set_new(varying, k2,
							    json_true());
			}
			/* deq keys that differ between deq records label
			 * their rows (k and method are not deq keys) */
			if (!strcmp(str_of(c, "method", ""), "deq")) {
				if (!first_deq_cfg)
					first_deq_cfg = c;
				json_object_foreach(c, k2, v2)
				{
					if (config_key_is_method(k2) &&
					    strcmp(k2, "method") &&
					    strcmp(k2, "k") &&
					    !json_equal(v2,
							json_object_get(
							    first_deq_cfg, k2)))
						json_object_set_new(
						    vary_deq, k2, json_true());
				}
			}
		}
	}

	fprintf(f, "| group | method | status | runs | step ms | × unroll "
		   "| depth+solver MiB | × unroll | total peak MiB | × unroll "
		   "| fwd iters | bwd iters | valid ppl |\n");
	fprintf(f, "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
		   "---:|---:|\n");
	for (size_t j = 0; j < nrow; j++) {
		struct row *r = &rows[j], *base = NULL;
		const json_t *cfg = json_object_get(r->first, "config");
		char label[256], group[256] = "", c[10][32];
		double ms = median_of(r->step_ms, r->n);
		double ds = median_of(r->ds, r->n);
		const char *k2;
		json_t *v2;
		size_t gl = 0;

		for (size_t q = 0; q < nrow; q++) {
			const json_t *qc =
			    json_object_get(rows[q].first, "config");
			if (!strcmp(rows[q].group, r->group) &&
			    !strcmp(str_of(qc, "method", ""), "unroll")) {
				base = &rows[q];
				break;
			}
		}
		json_object_foreach(varying, k2, v2)
		{
			json_t *x = json_object_get(cfg, k2);
			char *t =
			    json_is_string(x)
				? strdup(json_string_value(x))
				: json_dumps(x, JSON_ENCODE_ANY |
						    JSON_REAL_PRECISION(6));
			gl += (size_t)snprintf(
			    group + gl,
			    gl < sizeof(group) ? sizeof(group) - gl : 0,
			    "%s%s=%s", gl ? " " : "", k2, t ? t : "?");
			free(t);
			if (gl >= sizeof(group))
				break;
		}
		if (!group[0])
			snprintf(group, sizeof(group), "%s",
				 str_of(cfg, "corpus", "-"));
		method_label(label, sizeof(label), r->first, vary_deq);
		fmt(c[0], 32, ms, "%.2f");
		fmt(c[1], 32,
		    base ? ms / median_of(base->step_ms, base->n) : NAN,
		    "%.2f");
		fmt(c[2], 32, ds / 1048576.0, "%.2f");
		fmt(c[3], 32, base ? ds / median_of(base->ds, base->n) : NAN,
		    "%.3f");
		fmt(c[4], 32, median_of(r->tot, r->n) / 1048576.0, "%.2f");
		fmt(c[5], 32,
		    base ? median_of(r->tot, r->n) /
			       median_of(base->tot, base->n)
			 : NAN,
		    "%.3f");
		fmt(c[6], 32, median_of(r->fit, r->n), "%.1f");
		fmt(c[7], 32, median_of(r->bit, r->n), "%.1f");
		fmt(c[8], 32, median_of(r->ppl, r->n), "%.2f");
		fprintf(
		    f,
		    "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s "
		    "| %s | %s |\n",
		    group, label, r->status, r->n, c[0], c[1], c[2], c[3], c[4],
		    c[5], c[6], c[7], c[8]);
	}
	for (size_t j = 0; j < nrow; j++) {
		free(rows[j].key);
		free(rows[j].group);
	}
	free(rows);
	json_decref(varying);
	json_decref(vary_deq);
}
