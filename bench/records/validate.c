/* validate.c — walks a record along the schema table of validate_schema.c
 * (validate.h): each listed field present (unless older records may lack
 * it), of a listed type, with an allowed value; then every member the table
 * does not list is reported as unknown. O(fields of the record).
 */
#include "validate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../config/config.h"
#include "../io/jsontext.h"
#include "record_num.h"
#include "validate_cross.h"

const char *validate_type_name(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "object";
	case JSON_ARRAY:
		return "array";
	case JSON_STRING:
		return "string";
	case JSON_INTEGER:
		return "int";
	case JSON_REAL:
		return "real";
	case JSON_TRUE:
	case JSON_FALSE:
		return "bool";
	default:
		return "null";
	}
}

void validate_types_text(unsigned mask, char *buf, size_t n)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{VT_INT, "int"},	{VT_NUM, "number"}, {VT_STR, "string"},
		     {VT_BOOL, "bool"}, {VT_OBJ, "object"}, {VT_ARR, "array"},
		     {VT_NULL, "null"}};
	size_t len = 0;
	if (n)
		buf[0] = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((mask & names[i].bit) && len < n)
			len +=
			    (size_t)snprintf(buf + len, n - len, "%s%s",
					     len ? " or " : "", names[i].name);
}

static int type_ok(const json_t *v, unsigned mask)
{
	return ((mask & VT_NULL) && json_is_null(v)) ||
	       ((mask & VT_BOOL) && json_is_boolean(v)) ||
	       ((mask & VT_INT) && json_is_integer(v)) ||
	       ((mask & VT_NUM) && json_is_number(v)) ||
	       ((mask & VT_STR) && json_is_string(v)) ||
	       ((mask & VT_OBJ) && json_is_object(v)) ||
	       ((mask & VT_ARR) && json_is_array(v));
}

/* A short text of a scalar for messages: "\"okay\"", "2.5"; the type name
 * for objects and arrays. */
static void value_text(const json_t *v, char *buf, size_t n)
{
	if (json_is_string(v))
		snprintf(buf, n, "\"%.*s%s\"",
			 (int)jsontext_fit(json_string_value(v), 60),
			 json_string_value(v),
			 strlen(json_string_value(v)) > 60 ? "..." : "");
	else if (json_is_number(v) || json_is_boolean(v) || json_is_null(v)) {
		char *s =
		    json_dumps(v, JSON_ENCODE_ANY | JSON_REAL_PRECISION(10));
		snprintf(buf, n, "%s", s ? s : "?");
		free(s);
	} else
		snprintf(buf, n, "%s", validate_type_name(v));
}

/* "2025-01-31T12:00:00Z", a real time: its digits in place, and the
 * time strptime reads back through timegm and gmtime_r written the same
 * (2026-13-45T99:99:99Z or 2025-02-29T00:00:00Z would come back as another
 * day). */
static int time_ok(const char *s)
{
	static const char pat[] = "dddd-dd-ddTdd:dd:ddZ";
	static const char fmt[] = "%Y-%m-%dT%H:%M:%SZ";
	struct tm tm;
	char back[sizeof(pat) + 8];
	const char *end;
	time_t t;
	if (strlen(s) != sizeof(pat) - 1)
		return 0;
	for (size_t i = 0; pat[i]; i++)
		if (pat[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9')
				  : s[i] != pat[i])
			return 0;
	memset(&tm, 0, sizeof(tm));
	end = strptime(s, fmt, &tm);
	if (!end || *end)
		return 0;
	t = timegm(&tm);
	return gmtime_r(&t, &tm) && strftime(back, sizeof(back), fmt, &tm) &&
	       !strcmp(back, s);
}

/* "deqbench" or "pytorch-<torch version>", the version starting with a
 * digit ("pytorch-2.3.1+cpu"); "pytorch" alone is checked apart (a failed
 * run's, validate_record). */
static int impl_ok(const char *s)
{
	return !strcmp(s, "deqbench") || !strcmp(s, "pytorch") ||
	       (!strncmp(s, "pytorch-", 8) && s[8] >= '0' && s[8] <= '9' &&
		!strpbrk(s, " \t\n"));
}

static void join(char *buf, size_t n, const char *path, const char *name)
{
	snprintf(buf, n, "%s%s%s", path, *path ? "." : "", name);
}

/* build.git_commit: 12 to 40 lower-case hex digits, then "-dirty" or
 * nothing; or "unknown" (VF_COMMIT). */
static int commit_ok(const char *s)
{
	size_t h = strspn(s, "0123456789abcdef");
	return !strcmp(s, "unknown") ||
	       (h >= 12 && h <= 40 && (!s[h] || !strcmp(s + h, "-dirty")));
}

/* build.fingerprint: 16 lower-case hex digits (VF_FINGERPRINT). */
static int fingerprint_ok(const char *s)
{
	return strlen(s) == 16 && strspn(s, "0123456789abcdef") == 16;
}

/* The first control character of s (C0, DEL, or C1 encoded as c2 80..9f),
 * -1 when none: SCHEMA.md's strings are text of one line. */
static int control_char(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p < 0x20 || *p == 0x7f)
			return *p;
		if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
			return p[1];
	}
	return -1;
}

/* A string without control characters (a message of one line, a label
 * that cannot move a terminal's cursor). */
static void check_text(struct validate_walk *w, const json_t *v,
		       const char *path)
{
	char got[100];
	int c;
	if (!json_is_string(v) || (c = control_char(json_string_value(v))) < 0)
		return;
	value_text(v, got, sizeof(got));
	validate_problem(
	    w, path,
	    "expected text of one line without control characters, got "
	    "0x%02x in %s",
	    c, got);
}

static void check_object(struct validate_walk *w, const json_t *o,
			 const struct vfield *members, const char *path);
static void check_config(struct validate_walk *w, const json_t *o,
			 const char *path);

/* A config key's check (config_check_json) as a problem at path. */
static void check_key(struct validate_walk *w, const char *key, const json_t *v,
		      const char *path)
{
	char expected[300], got[100];
	int rc = config_check_json(key, v, expected, sizeof(expected));
	if (rc == 0)
		return;
	if (rc == CONFIG_CHECK_UNKNOWN) {
		validate_problem(
		    w, path,
		    "unknown field (not a config key; deqbench run --help "
		    "lists them)");
		return;
	}
	if (rc == CONFIG_CHECK_TYPE)
		snprintf(got, sizeof(got), "%s", validate_type_name(v));
	else
		value_text(v, got, sizeof(got));
	validate_problem(w, path, "expected %s, got %s", expected, got);
}

static void check_array(struct validate_walk *w, const json_t *a,
			const struct vfield *f, const char *path);

/* What the row's flags ask of a value of the right type: a real time, the
 * schema version, an implementation's name, a commit, a fingerprint; and a
 * number >= 0 unless
 * VF_SIGNED (config keys and keyed fields have the key table's ranges). */
static void check_flags(struct validate_walk *w, const json_t *v,
			const struct vfield *f, const char *path)
{
	char got[100];
	value_text(v, got, sizeof(got));
	if ((f->flags & VF_TIME) && json_is_string(v) &&
	    !time_ok(json_string_value(v)))
		validate_problem(
		    w, path,
		    "expected a UTC time like 2025-01-31T12:00:00Z, "
		    "got %s",
		    got);
	if ((f->flags & VF_VERSION) && json_integer_value(v) != RECORD_SCHEMA)
		validate_problem(
		    w, path,
		    "expected %d (the schema version this deqbench "
		    "checks), got %lld",
		    RECORD_SCHEMA, (long long)json_integer_value(v));
	if ((f->flags & VF_IMPL) && json_is_string(v) &&
	    !impl_ok(json_string_value(v)))
		validate_problem(
		    w, path,
		    "expected deqbench or pytorch-<torch version>, got %s",
		    got);
	if (json_is_number(v) && json_number_value(v) < 0 && !f->key &&
	    !(f->flags & (VF_SIGNED | VF_CONFIG)))
		validate_problem(
		    w, path,
		    "expected a number >= 0 (a size, count, rate or "
		    "time), got %s",
		    got);
	if ((f->flags & VF_FRACTION) && json_is_number(v) &&
	    json_number_value(v) > 1)
		validate_problem(w, path,
				 "expected a fraction in [0, 1], got %s", got);
	if ((f->flags & VF_FROM_1) && json_is_integer(v) &&
	    json_integer_value(v) < 1)
		validate_problem(w, path,
				 "expected an int >= 1 (1 = the first), got %s",
				 got);
	if ((f->flags & VF_COMMIT) && json_is_string(v) &&
	    !commit_ok(json_string_value(v)))
		validate_problem(
		    w, path,
		    "expected 12 hex digits of a commit, with -dirty or "
		    "not, or unknown, got %s",
		    got);
	if ((f->flags & VF_FINGERPRINT) && json_is_string(v) &&
	    !fingerprint_ok(json_string_value(v)))
		validate_problem(w, path,
				 "expected 16 lower-case hex digits "
				 "(scripts/fingerprint.py), got %s",
				 got);
}

/* An integer of the row's list (f->ints). */
static void check_ints(struct validate_walk *w, const json_t *v,
		       const struct vfield *f, const char *path)
{
	char list[100] = "";
	size_t len = 0;
	if (!f->ints || !json_is_integer(v))
		return;
	for (int i = 0; f->ints[i]; i++) {
		if (json_integer_value(v) == f->ints[i])
			return;
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d",
					i ? ", " : "", f->ints[i]);
	}
	validate_problem(w, path, "expected one of %s, got %lld", list,
			 (long long)json_integer_value(v));
}

/* A stats object: min <= p10 <= p25 <= median <= p75 <= p90 <= max and
 * min <= mean <= max, nulls skipped (within VALIDATE_TOL: percentiles
 * interpolate, the mean sums). */
static void check_stats(struct validate_walk *w, const json_t *o,
			const char *path)
{
	static const char *const order[] = {"min", "p10", "p25", "median",
					    "p75", "p90", "max", NULL};
	const json_t *m = json_object_get(o, "mean");
	const char *prev = NULL;
	double pv = 0, lo, hi, x;
	char p[320];
	for (int i = 0; order[i]; i++) {
		const json_t *v = json_object_get(o, order[i]);
		if (!json_is_number(v))
			continue;
		x = json_number_value(v);
		if (prev && x < pv - VALIDATE_TOL * fmax(1, fabs(pv))) {
			join(p, sizeof(p), path, order[i]);
			validate_problem(
			    w, p, "expected at least %s (%.17g), got %.17g",
			    prev, pv, x);
		}
		prev = order[i];
		pv = x;
	}
	if (!json_is_number(m) || !json_is_number(json_object_get(o, "min")) ||
	    !json_is_number(json_object_get(o, "max")))
		return;
	lo = json_number_value(json_object_get(o, "min"));
	hi = json_number_value(json_object_get(o, "max"));
	x = json_number_value(m);
	if (x < lo - VALIDATE_TOL * fmax(1, fabs(lo)) ||
	    x > hi + VALIDATE_TOL * fmax(1, fabs(hi))) {
		join(p, sizeof(p), path, "mean");
		validate_problem(
		    w, p,
		    "expected between min and max (%.17g to %.17g), "
		    "got %.17g",
		    lo, hi, x);
	}
}

/* The value of field f at path: type, then what the row asks of it. */
static void check_value(struct validate_walk *w, const json_t *v,
			const struct vfield *f, const char *path)
{
	char t[100], got[100];
	if (!type_ok(v, f->types)) {
		validate_types_text(f->types, t, sizeof(t));
		validate_problem(w, path, "expected %s, got %s", t,
				 validate_type_name(v));
		return;
	}
	if (json_is_string(v) && f->values) {
		int ok = 0;
		char list[300] = "";
		size_t len = 0;
		for (int i = 0; f->values[i]; i++) {
			ok |= !strcmp(json_string_value(v), f->values[i]);
			len += (size_t)snprintf(list + len, sizeof(list) - len,
						"%s%s", i ? ", " : "",
						f->values[i]);
		}
		if (!ok) {
			value_text(v, got, sizeof(got));
			validate_problem(w, path, "expected one of %s, got %s",
					 list, got);
		}
	}
	check_text(w, v, path);
	if (f->key && !json_is_null(v))
		check_key(w, f->key, v, path);
	check_flags(w, v, f, path);
	check_ints(w, v, f, path);
	if (f->doc_type && !strcmp(f->doc_type, "stats") && json_is_object(v))
		check_stats(w, v, path);
	if ((f->flags & VF_CONFIG) && json_is_object(v))
		check_config(w, v, path);
	if (f->members && json_is_object(v))
		check_object(w, v, f->members, path);
	if (json_is_array(v))
		check_array(w, v, f, path);
}

static void check_array(struct validate_walk *w, const json_t *a,
			const struct vfield *f, const char *path)
{
	size_t n = json_array_size(a), i;
	const json_t *e;
	if ((f->min_items && n < (size_t)f->min_items) ||
	    (f->max_items && n > (size_t)f->max_items))
		validate_problem(w, path, "expected %d to %d entries, got %zu",
				 f->min_items, f->max_items, n);
	if (!f->elem)
		return;
	json_array_foreach(a, i, e)
	{
		char p[300];
		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		check_value(w, e, f->elem, p);
	}
}

static int listed(const struct vfield *members, const char *name)
{
	for (const struct vfield *f = members; f->name; f++)
		if (!strcmp(f->name, name))
			return 1;
	return 0;
}

static void check_object(struct validate_walk *w, const json_t *o,
			 const struct vfield *members, const char *path)
{
	const char *key;
	const json_t *v;
	char p[300], t[100];
	for (const struct vfield *f = members; f->name; f++) {
		join(p, sizeof(p), path, f->name);
		v = json_object_get(o, f->name);
		if (v) {
			check_value(w, v, f, p);
			continue;
		}
		if ((f->flags & VF_OPTIONAL) ||
		    (f->added && w->mode != VALIDATE_STRICT))
			continue;
		validate_types_text(f->types, t, sizeof(t));
		validate_problem(w, p, "missing (expected %s%s%s)", t,
				 f->added ? "; added " : "",
				 f->added ? f->added : "");
	}
	json_object_foreach((json_t *)o, key, v)
	{
		if (listed(members, key))
			continue;
		join(p, sizeof(p), path, key);
		validate_problem(w, p,
				 "unknown field (not in results/SCHEMA.md)");
	}
}

static int in_names(const char *const *names, const char *key)
{
	for (int i = 0; names[i]; i++)
		if (!strcmp(names[i], key))
			return 1;
	return 0;
}

static int config_key_added(const char *key)
{
	return in_names(validate_config_added, key);
}

/* The config object: every key of the key table (those of
 * validate_config_added only in strict mode, those of
 * validate_config_defaulted never), each value checked by
 * config_check_json, and nothing else. */
static void check_config(struct validate_walk *w, const json_t *o,
			 const char *path)
{
	const char *key;
	const json_t *v;
	char p[300];
	for (size_t i = 0; (key = config_key_name(i)); i++) {
		if (json_object_get(o, key) ||
		    (w->mode != VALIDATE_STRICT && config_key_added(key)) ||
		    in_names(validate_config_defaulted, key))
			continue;
		join(p, sizeof(p), path, key);
		validate_problem(w, p,
				 "missing (a config key: deqbench run --help)");
	}
	json_object_foreach((json_t *)o, key, v)
	{
		join(p, sizeof(p), path, key);
		check_key(w, key, v, p);
		check_text(w, v, p);
	}
}

/* ---- sections by status and kind (SCHEMA.md "Top level") ---- */

/* What an ok record has: the run finished, so every section of its
 * setup, its environment and its quality; a training run's too. */
static const char *const ok_any[] = {
    "started_at", "finished_at", "method", "model", "data",
    "quality",	  "host",	 "device", "build", NULL};
static const char *const ok_train[] = {"timing", "memory", "solver", "evals",
				       NULL};
/* What kind eval never has: no training. */
static const char *const eval_none[] = {"timing", "evals",  "memory",
					"solver", "trace",  "pretrain",
					"plan",	  "health", NULL};

/* Each present member of rec named in keys null (want_null) or not, else
 * a problem saying why. */
static void sections(struct validate_walk *w, const json_t *rec,
		     const char *const *keys, int want_null, const char *why)
{
	for (int i = 0; keys[i]; i++) {
		const json_t *v = json_object_get(rec, keys[i]);
		if (v && json_is_null(v) != want_null)
			validate_problem(w, keys[i], "expected %s %s",
					 want_null ? "null" : "non-null", why);
	}
}

/* A member of a section, NULL when the section or member is absent. */
static const json_t *member(const json_t *rec, const char *sec,
			    const char *name)
{
	return json_object_get(json_object_get(rec, sec), name);
}

/* kind eval: no training sections, quality's training fields null or 0;
 * kind train: no inference.memory (eval only). */
static void kind_rules(struct validate_walk *w, const json_t *rec, int eval)
{
	static const char *const losses[] = {"train_loss_first",
					     "train_loss_final", NULL};
	const json_t *v;
	if (!eval) {
		v = member(rec, "inference", "memory");
		if (v && !json_is_null(v))
			validate_problem(
			    w, "inference.memory",
			    "expected null with kind train (kind eval "
			    "only)");
		return;
	}
	sections(w, rec, eval_none, 1, "with kind eval (no training)");
	for (int i = 0; losses[i]; i++) {
		char p[64];
		v = member(rec, "quality", losses[i]);
		snprintf(p, sizeof(p), "quality.%s", losses[i]);
		if (v && !json_is_null(v))
			validate_problem(w, p,
					 "expected null with kind eval (no "
					 "training)");
	}
	v = member(rec, "quality", "tokens_trained");
	if (json_is_integer(v) && json_integer_value(v) != 0)
		validate_problem(w, "quality.tokens_trained",
				 "expected 0 with kind eval (no training)");
}

/* trace with config trace=true, pretrain with method=deq and
 * pretrain_steps > 0: never otherwise, and in an ok training record
 * always (config keys an older record lacks are not checked). */
static void config_rules(struct validate_walk *w, const json_t *rec,
			 int ok_train)
{
	const json_t *cfg = json_object_get(rec, "config");
	const json_t *tr = json_object_get(cfg, "trace"),
		     *ps = json_object_get(cfg, "pretrain_steps"),
		     *me = json_object_get(cfg, "method");
	const json_t *t = json_object_get(rec, "trace"),
		     *p = json_object_get(rec, "pretrain");
	if (json_is_false(tr) && t && !json_is_null(t))
		validate_problem(w, "trace",
				 "expected null with config trace=false");
	if (json_is_true(tr) && json_is_null(t) && ok_train)
		validate_problem(
		    w, "trace",
		    "expected an object with config trace=true and status "
		    "ok");
	if (json_is_integer(ps) && json_is_string(me) && p) {
		int pre = json_integer_value(ps) > 0 &&
			  !strcmp(json_string_value(me), "deq");
		if (!json_is_null(p) && !pre)
			validate_problem(w, "pretrain",
					 "expected null: only method=deq with "
					 "pretrain_steps > 0 pretrains");
		else if (json_is_null(p) && pre && ok_train)
			validate_problem(
			    w, "pretrain",
			    "expected an object with status ok, method=deq "
			    "and pretrain_steps > 0");
	}
}

/* The sections SCHEMA.md asks of the record's status and kind. */
static void status_rules(struct validate_walk *w, const json_t *rec)
{
	const char *st = json_string_value(json_object_get(rec, "status"));
	const char *kind = json_string_value(json_object_get(rec, "kind"));
	const json_t *sa = json_object_get(rec, "started_at");
	int eval = kind && !strcmp(kind, "eval"), ok = st && !strcmp(st, "ok");
	if (ok) {
		sections(w, rec, ok_any, 0,
			 "with status ok (null only when the run did not get "
			 "that far)");
		if (!eval)
			sections(w, rec, ok_train, 0,
				 "with status ok and kind train");
	}
	if (json_is_null(sa) &&
	    !(st && !strcmp(st, "error") &&
	      json_is_object(json_object_get(rec, "suite"))))
		validate_problem(
		    w, "started_at",
		    "expected a time (null only in the error record of "
		    "a crashed suite run)");
	kind_rules(w, rec, eval);
	config_rules(w, rec, ok && !eval);
}

/* A price record's fields that agree (SCHEMA.md §Price records): h,
 * solver and fit exactly with solver_update, per byte exactly with host_bytes, an
 * untimed unit priced 0 in 0 rounds, lo <= median <= hi, an interval for
 * a converged price, the config's device. */
static void price_rules(struct validate_walk *w, const json_t *rec)
{
	const char *unit = json_string_value(json_object_get(rec, "unit"));
	const char *per = json_string_value(json_object_get(rec, "per"));
	const json_t *lo = json_object_get(rec, "lo_ms"),
		     *hi = json_object_get(rec, "hi_ms");
	double med = record_num(rec, "median_ms");
	int su = unit && !strcmp(unit, "solver_update");
	const char *dc = json_string_value(member(rec, "config", "device")),
		   *dd = json_string_value(member(rec, "device", "device"));
	if (unit && json_is_null(json_object_get(rec, "h")) == su)
		validate_problem(w, "h", "expected %s with unit %s",
				 su ? "an int" : "null", unit);
	if (unit && json_is_null(json_object_get(rec, "solver")) == su)
		validate_problem(w, "solver", "expected %s with unit %s",
				 su ? "broyden or anderson" : "null", unit);
	if (unit && json_is_null(json_object_get(rec, "fit")) == su)
		validate_problem(w, "fit", "expected %s with unit %s",
				 su ? "an object" : "null", unit);
	if (unit && per && !strcmp(per, "byte") != !strcmp(unit, "host_bytes"))
		validate_problem(w, "per",
				 "expected byte exactly with unit host_bytes");
	if (json_is_false(json_object_get(rec, "timed")) &&
	    (med != 0 || record_num(rec, "rounds") != 0))
		validate_problem(w, "median_ms",
				 "expected 0 in 0 rounds with timed false");
	if ((json_is_number(lo) && json_number_value(lo) > med) ||
	    (json_is_number(hi) && json_number_value(hi) < med))
		validate_problem(w, "median_ms",
				 "expected within [lo_ms, hi_ms]");
	if (json_is_true(json_object_get(rec, "converged")) &&
	    (!json_is_number(lo) || !json_is_number(hi)))
		validate_problem(w, "converged",
				 "expected false without an interval");
	if (dc && dd && strcmp(dc, dd))
		validate_problem(w, "device.device",
				 "expected the config's device (%s)", dc);
}

int validate_record(const json_t *rec, enum validate_mode mode,
		    validate_report_fn report, void *ctx)
{
	struct validate_walk w = {mode, report, ctx, 0};
	const char *kind = json_string_value(json_object_get(rec, "kind"));
	if (kind && !strcmp(kind, "price")) {
		check_object(&w, rec, validate_price_schema(), "");
		price_rules(&w, rec);
		return w.problems;
	}
	const char *st = json_string_value(json_object_get(rec, "status"));
	const char *msg = json_string_value(json_object_get(rec, "message"));
	const char *impl = json_string_value(json_object_get(rec, "impl"));
	check_object(&w, rec, validate_schema(), "");
	status_rules(&w, rec);
	w.problems += validate_cross(rec, mode, report, ctx);
	/* a pytorch run whose torch version deqbench could not tell, only in
	 * the record of a run that failed before the child said it */
	if (impl && !strcmp(impl, "pytorch") && st && !strcmp(st, "ok"))
		validate_problem(
		    &w, "impl",
		    "expected deqbench or pytorch-<torch version>, got "
		    "\"pytorch\" (only a failed run's record may lack the "
		    "version)");
	if (st && msg && !strcmp(st, "ok") && *msg)
		validate_problem(&w, "message", "expected \"\" with status ok");
	if (st && msg && !*msg &&
	    (!strcmp(st, "diverged") || !strcmp(st, "interrupted") ||
	     !strcmp(st, "error")))
		validate_problem(&w, "message",
				 "expected a reason with status %s, got \"\"",
				 st);
	return w.problems;
}
