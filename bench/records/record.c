/* record.c — record skeleton, append-only JSONL output, statistics helpers
 * and the summary table. */
#include "record.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../config/config.h"
#include "../io/errmsg.h"
#include "../io/fileio.h"
#include "validate.h"
#include "validate_schema.h"

static const char *const sections[] = {
    "suite",  "beside", "config", "method", "model",	"data",	   "timing",
    "memory", "solver", "evals",  "work",   "health",	"quality", "inference",
    "host",   "device", "build",  "trace",  "pretrain", "plan",	   NULL,
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

/* scan_out's state: the first malformed line, whether the first object
 * was a record, and whether to pass over an unended last line. */
struct out_scan {
	int lines, last, bad_line, bad_col, first_ok, tolerate_tail;
	char why[160];
};

/* Whether rec looks like a record: "schema" and "config", or valid. */
static int looks_like_record(const json_t *rec)
{
	return (json_object_get(rec, "schema") &&
		json_object_get(rec, "config")) ||
	       validate_record(rec, VALIDATE_ALL_AGES, NULL, NULL) == 0;
}

static int out_line(void *ctx, int lineno, json_t *rec, int column,
		    const char *why)
{
	struct out_scan *s = ctx;
	if (!s->lines++)
		s->first_ok = rec && looks_like_record(rec);
	s->last = lineno;
	if (!rec && !s->bad_line) {
		s->bad_line = lineno;
		s->bad_col = column;
		snprintf(s->why, sizeof(s->why), "%s", why);
	}
	return !s->first_ok;
}

/* Whether the file open as fd ends in something other than a newline (an
 * append by another tool in progress, when the lock could not be had). */
static int unended(int fd)
{
	struct stat st;
	char c = '\n';
	return fstat(fd, &st) == 0 && st.st_size > 0 &&
	       pread(fd, &c, 1, st.st_size - 1) == 1 && c != '\n';
}

/* The regular file path (out=, open as fd) can take records when it is
 * blank, or its first non-blank line is a record and every non-blank line
 * one JSON object: report, compare and suite --resume refuse a file with
 * one malformed line as a whole, so nothing is appended to one. Read under
 * a shared lock, so an append of another deqbench is never seen half
 * done; where a writer holds the lock, an unended last line is left out.
 * 0, or -1 with one line. */
static int scan_out(int fd, const char *path, char *err, size_t errlen)
{
	struct out_scan s = {0, 0, 0, 0, 0, 0, ""};
	char e[900], pb[400];
	const char *shown = errmsg_brief(path, pb, sizeof(pb));
	int locked = flock(fd, LOCK_SH | LOCK_NB) == 0;
	s.tolerate_tail = !locked && unended(fd);
	if (record_each_line(path, out_line, &s, e, sizeof(e)) != 0) {
		snprintf(err, errlen, "out=%s", e);
		return -1;
	}
	if (s.lines && !s.first_ok && !(s.lines == 1 && s.tolerate_tail)) {
		snprintf(err, errlen,
			 "out=%s is not a JSONL file of records (its first "
			 "line is not a record: a safetensors file, or a JSON "
			 "config or suite file?); records are appended to "
			 "out=, so give a .jsonl path",
			 shown);
		return -1;
	}
	if (s.bad_line && !(s.tolerate_tail && s.bad_line == s.last)) {
		snprintf(err, errlen,
			 "out=%s:%d:%d: malformed line (%s); report, compare "
			 "and suite --resume refuse the whole file, so no "
			 "record is appended to it: fix or delete line %d, "
			 "or give another out=",
			 shown, s.bad_line, s.bad_col, s.why, s.bad_line);
		return -1;
	}
	return 0;
}

int record_check_out(const char *path, char *err, size_t errlen)
{
	char e[900];
	struct stat st;
	int fd;
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	    (fd = fileio_open_read(path, e, sizeof(e))) >= 0) {
		int rc = scan_out(fd, path, err, errlen);
		close(fd);
		if (rc != 0)
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
		const char *k[] = {"median", "mean", "p10", "p90",
				   "min",    "max",  "p25", "p75"};
		for (int i = 0; i < 8; i++)
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
	json_object_set_new(o, "p25", num(quantile(s, n, 0.25)));
	json_object_set_new(o, "p75", num(quantile(s, n, 0.75)));
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

char *record_value_text(const json_t *x)
{
	return json_is_string(x)
		   ? strdup(json_string_value(x))
		   : json_dumps(x, JSON_ENCODE_ANY | JSON_REAL_PRECISION(6));
}

const char *record_blas_core(const json_t *rec)
{
	const char *dev = json_string_value(
	    json_object_get(json_object_get(rec, "config"), "device"));
	const char *core = json_string_value(json_object_get(
	    json_object_get(json_object_get(rec, "host"), "blas"), "core"));
	/* a GPU run's BLAS is not what computed it (the record may come
	 * from another build, so the config's names, not backend_caps) */
	if (dev && config_device_parse(dev) != DEVICE_CPU &&
	    config_device_parse(dev) != DEVICE_CPU64)
		return NULL;
	return core ? core : "unknown";
}

const char *record_build(const json_t *rec, const char *member)
{
	return json_string_value(
	    json_object_get(json_object_get(rec, "build"), member));
}

/* Whether v, the value of key, is the default of a key that records may
 * lack (validate_config_defaulted: absent means the default), so that a
 * record without it and one with its default are the same run. */
static int defaulted_at_default(const char *key, const json_t *v)
{
	struct bench_config d;
	int same = 0;
	for (int i = 0; validate_config_defaulted[i]; i++) {
		if (strcmp(validate_config_defaulted[i], key))
			continue;
		config_defaults(&d);
		json_t *dv = config_key_json(&d, key);
		same = json_equal(dv, (json_t *)v);
		json_decref(dv);
	}
	return same;
}

/* Whether config key KEY of CFG is part of a run's identity: every key but
 * the output-only ones, data_dir included unless the corpus is synthetic,
 * precision and compile unless at their defaults (records before them
 * lack them). */
static int identity_key(const char *key, const json_t *cfg)
{
	const char *corpus = json_string_value(json_object_get(cfg, "corpus"));
	if (!strcmp(key, "data_dir"))
		return !corpus || strcmp(corpus, "synthetic") != 0;
	if (defaulted_at_default(key, json_object_get(cfg, key)))
		return 0;
	return !config_key_is_output(key);
}

/* Appends component c (n bytes) to the path in out (*len bytes so far,
 * room for cap), with a '/' between components. */
static void path_push(char *out, size_t *len, size_t cap, const char *c,
		      size_t n)
{
	int abs_root = *len == 1 && out[0] == '/';
	if (*len && !abs_root && *len < cap)
		out[(*len)++] = '/';
	for (size_t i = 0; i < n && *len < cap; i++)
		out[(*len)++] = c[i];
}

char *record_path_normalise(const char *p)
{
	size_t cap = strlen(p) + 2, len = 0;
	char *out = malloc(cap + 1);
	if (!out)
		return NULL;
	if (p[0] == '/')
		out[len++] = '/';
	for (const char *s = p; *s;) {
		size_t n = strcspn(s, "/");
		/* "." components and empty ones (from "//") name nothing */
		if (n && !(n == 1 && s[0] == '.'))
			path_push(out, &len, cap, s, n);
		s += n;
		s += *s == '/';
	}
	if (!len)
		out[len++] = '.';
	out[len] = 0;
	return out;
}

json_t *record_run_identity(const json_t *cfg)
{
	json_t *o = json_object(), *v;
	const char *k;
	json_object_foreach((json_t *)cfg, k, v)
	{
		char *dir;
		if (!identity_key(k, cfg))
			continue;
		if (!strcmp(k, "data_dir") && json_is_string(v) &&
		    (dir = record_path_normalise(json_string_value(v)))) {
			json_object_set_new(o, k, json_string(dir));
			free(dir);
		} else
			json_object_set(o, k, v);
	}
	return o;
}
