/* suite.c — suite expansion: cartesian product of axes, exclusions, repeats,
 * sharding (the order runs run in: suite_order.c). O(runs × keys) work; suites hold at most thousands of runs. */
#include "suite.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../io/jsontext.h"
#include "../records/record.h"

/* Applies one axis value (scalar for key `axis`, or an object of keys). */
static int apply_axis_value(struct bench_config *c, const char *axis,
			    const json_t *v, const char *source, char *err,
			    size_t errlen)
{
	char e[512];
	if (json_is_object(v))
		return config_apply_object(c, v, source, err, errlen);
	if (config_set_json(c, axis, v, e, sizeof(e)) != 0) {
		snprintf(err, errlen, "%s: axes.%s: %s", source, axis, e);
		return -1;
	}
	return 0;
}

/* 1 when the resolved config matches every key of the exclusion. Values are
 * compared after parsing into a config, so 1e-3 matches 0.001. */
static int excluded_by(const struct bench_config *c, const json_t *ex)
{
	const char *key;
	json_t *v;
	char e[512];

	json_object_foreach((json_t *)ex, key, v)
	{
		struct bench_config tmp = *c;
		json_t *want, *have;
		int eq;
		if (config_set_json(&tmp, key, v, e, sizeof(e)) != 0)
			return 0;
		want = config_key_json(&tmp, key);
		have = config_key_json(c, key);
		eq = json_equal(want, have);
		json_decref(want);
		json_decref(have);
		if (!eq)
			return 0;
	}
	return 1;
}

/* Adds to `set` the keys one axis sets: its name for a scalar value, the
 * members of an object value. */
static void axis_keys(json_t *set, const char *axis, const json_t *vals)
{
	size_t j;
	json_t *x;
	const char *k;
	json_t *v;
	if (!json_is_array(vals)) {
		if (json_is_object(vals))
			json_object_foreach((json_t *)vals, k, v)
			    json_object_set_new(set, k, json_true());
		else
			json_object_set_new(set, axis, json_true());
		return;
	}
	json_array_foreach(vals, j, x) axis_keys(set, axis, x);
}

/* Two axes setting one key would be last-wins: refused, as a key given
 * twice anywhere else (docs/configuration.md §Suites). */
static int axes_disjoint(int n, const char *const *name,
			 const json_t *const *vals, const char *source,
			 char *err, size_t errlen)
{
	json_t **set = calloc((size_t)n + 1, sizeof(*set));
	int rc = 0;
	if (!set) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	for (int a = 0; a < n; a++) {
		set[a] = json_object();
		axis_keys(set[a], name[a], vals[a]);
	}
	for (int a = 0; a < n && rc == 0; a++)
		for (int b = 0; b < a && rc == 0; b++) {
			const char *k;
			json_t *v;
			json_object_foreach(set[a], k, v)
			{
				if (!json_object_get(set[b], k))
					continue;
				snprintf(err, errlen,
					 "%s: axes.%s and axes.%s both set "
					 "'%s'; set each key in one axis",
					 source, name[b], name[a], k);
				rc = -1;
				break;
			}
		}
	for (int a = 0; a < n; a++)
		json_decref(set[a]);
	free(set);
	return rc;
}

/* What suite_expand parsed, for resolving one combination. */
struct expansion {
	const json_t *base, *exclude;
	const char *source;
	int n_axes;
	const char *const *axis_name;
	const json_t *const *axis_vals;
	const size_t *axis_len;
	int n_over;
	char *const *overrides;
};

/* Resolves combination ci into c: defaults, base, one value of every axis
 * (the first axis varies slowest), the overrides. *keep = 0 when an
 * exclusion drops it; kept configs are validated. 0 or -1 with one line. */
static int resolve_combo(const struct expansion *x, size_t ci,
			 struct bench_config *c, int *keep, char *err,
			 size_t errlen)
{
	size_t rem = ci, idx[64], i;
	json_t *v;
	char e[512];

	for (int a = x->n_axes - 1; a >= 0; a--) {
		idx[a] = rem % x->axis_len[a];
		rem /= x->axis_len[a];
	}
	config_defaults(c);
	if (x->base &&
	    config_apply_object(c, x->base, x->source, err, errlen) != 0)
		return -1;
	for (int a = 0; a < x->n_axes; a++) {
		const json_t *av = json_is_array(x->axis_vals[a])
				       ? json_array_get(x->axis_vals[a], idx[a])
				       : x->axis_vals[a];
		if (apply_axis_value(c, x->axis_name[a], av, x->source, err,
				     errlen) != 0)
			return -1;
	}
	for (int o = 0; o < x->n_over; o++) {
		if (config_set_arg(c, x->overrides[o], e, sizeof(e)) != 0) {
			snprintf(err, errlen, "command line: %s", e);
			return -1;
		}
	}
	*keep = 1;
	if (x->exclude)
		json_array_foreach(x->exclude, i,
				   v) if (excluded_by(c, v)) *keep = 0;
	if (*keep && config_finish(c, e, sizeof(e)) != 0) {
		snprintf(err, errlen, "%s: combination %zu: %s", x->source, ci,
			 e);
		return -1;
	}
	return 0;
}

/* Run identity for duplicates: the run identity (record_run_identity, the
 * one --resume, report and compare use) of the keys the run's method uses,
 * and the repeat, as compact sorted JSON; malloc'd. */
static char *effective_key(const struct suite_run *r)
{
	json_t *o = config_effective_json(&r->cfg);
	json_t *id = record_run_identity(o);
	char *s;
	json_object_set_new(id, " repeat", json_integer(r->repeat));
	s = json_dumps(id,
		       JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	json_decref(id);
	json_decref(o);
	return s;
}

struct keyed {
	char *key;
	int index;
};

static int by_key(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int c = strcmp(x->key, y->key);
	return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* The config keys whose values differ between runs a and b, as "k1, k2"
 * into buf, data_dir aside when it counts (a corpus read from disk: the
 * runs are the same run only where it names one directory); *same_dir = 1
 * when data_dir was left out so. */
static void differing(const struct suite_run *a, const struct suite_run *b,
		      char *buf, size_t n, int *same_dir)
{
	json_t *x = config_to_json(&a->cfg), *y = config_to_json(&b->cfg), *v;
	const char *k;
	size_t l = 0;
	buf[0] = 0;
	*same_dir = 0;
	json_object_foreach(x, k, v)
	{
		if (json_equal(v, json_object_get(y, k)))
			continue;
		if (!strcmp(k, "data_dir") &&
		    a->cfg.corpus != CORPUS_SYNTHETIC) {
			*same_dir = 1;
			continue;
		}
		l += (size_t)snprintf(buf + l, l < n ? n - l : 0, "%s%s",
				      l ? ", " : "", k);
	}
	json_decref(x);
	json_decref(y);
}

/* s->collapsed_note for run i, the same run as run first: the keys they
 * differ in, and data_dir where it is one directory spelt two ways. */
static void collapse_note(struct suite *s, const char *source, int i, int first)
{
	char keys[200];
	int same_dir;
	differing(&s->runs[first], &s->runs[i], keys, sizeof(keys), &same_dir);
	snprintf(s->collapsed_note, sizeof(s->collapsed_note),
		 "%.150s: run %d is the same run as run %d (%s%.150s%s); it "
		 "runs once",
		 source, i, first,
		 keys[0] ? "differing only in keys its method does not use or "
			   "output keys: "
		 : same_dir ? ""
			    : "the same config once resolved",
		 keys,
		 !same_dir ? ""
		 : keys[0] ? "; data_dir names the same directory"
			   : "data_dir names the same directory, spelt "
			     "another way");
}

/* Collapses each run that is the same run as an earlier one (same
 * effective_key) into it: the later runs go, the others keep their order
 * and are numbered again; s->collapsed_note names the first pair. 0, or -1
 * when out of memory. */
static int collapse_duplicates(struct suite *s, const char *source)
{
	struct keyed *v = calloc((size_t)s->n_runs + 1, sizeof(*v));
	char *drop = calloc((size_t)s->n_runs + 1, 1);
	int n = 0;
	if (!v || !drop) {
		free(v);
		free(drop);
		return -1;
	}
	for (int i = 0; i < s->n_runs; i++)
		v[i] = (struct keyed){effective_key(&s->runs[i]), i};
	qsort(v, (size_t)s->n_runs, sizeof(*v), by_key);
	for (int i = 1, first = 0; i < s->n_runs; i++) {
		if (!v[i].key || !v[first].key ||
		    strcmp(v[i].key, v[first].key)) {
			first = i;
			continue;
		}
		drop[v[i].index] = 1;
		if (!s->n_collapsed++)
			collapse_note(s, source, v[i].index, v[first].index);
	}
	for (int i = 0; i < s->n_runs; i++) {
		free(v[i].key);
		if (!drop[i]) {
			s->runs[n] = s->runs[i];
			s->runs[n].index = n;
			n++;
		}
	}
	s->n_runs = n;
	free(v);
	free(drop);
	return 0;
}

/* Two passes over the combinations: the first validates them and counts
 * the runs, so a suite too large to hold is refused before anything is
 * allocated; the second stores exactly that many runs. */
static int expand_runs(struct suite *s, const struct expansion *x,
		       size_t n_combo, char *err, size_t errlen)
{
	struct bench_config c;
	size_t kept = 0, n;
	int keep;

	/* without exclusions every combination is a run: a suite too large
	 * is refused before validating up to 1e6 configs (seconds) */
	if (json_array_size(x->exclude) == 0)
		kept = n_combo;
	else
		for (size_t ci = 0; ci < n_combo; ci++) {
			if (resolve_combo(x, ci, &c, &keep, err, errlen) != 0)
				return -1;
			kept += (size_t)keep;
		}
	if (kept == 0) {
		snprintf(err, errlen,
			 "%s: every combination is excluded; nothing to run",
			 x->source);
		return -1;
	}
	n = kept * (size_t)s->repeats;
	if (n > SUITE_MAX_RUNS) {
		snprintf(err, errlen,
			 "%s: %zu combinations x %d repeats = %zu runs, more "
			 "than the %d one suite may hold (%zu bytes of config "
			 "each); split it into several suites or lower "
			 "repeats",
			 x->source, kept, s->repeats, n, SUITE_MAX_RUNS,
			 sizeof(struct suite_run));
		return -1;
	}
	s->runs = malloc(n * sizeof(*s->runs));
	if (!s->runs) {
		snprintf(err, errlen, "out of host memory for %zu runs", n);
		return -1;
	}
	for (size_t ci = 0; ci < n_combo; ci++) {
		if (resolve_combo(x, ci, &c, &keep, err, errlen) != 0) {
			suite_free(s);
			return -1;
		}
		for (int r = 0; keep && r < s->repeats; r++) {
			struct suite_run *run = &s->runs[s->n_runs];
			run->index = s->n_runs;
			run->combo = (int)ci;
			run->repeat = r;
			run->cfg = c;
			s->n_runs++;
		}
	}
	if (collapse_duplicates(s, x->source) != 0 ||
	    suite_order_runs(s) != 0) {
		snprintf(err, errlen, "out of host memory");
		suite_free(s);
		return -1;
	}
	return 0;
}

/* Refuses a member of the suite object other than name, description,
 * command, base, axes, exclude, repeats, order and order_seed. */
static int check_members(const json_t *root, const char *source, char *err,
			 size_t errlen)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)root, key, v)
	{
		if (strcmp(key, "name") && strcmp(key, "base") &&
		    strcmp(key, "axes") && strcmp(key, "exclude") &&
		    strcmp(key, "repeats") && strcmp(key, "description") &&
		    strcmp(key, "command") && strcmp(key, "order") &&
		    strcmp(key, "order_seed")) {
			snprintf(err, errlen,
				 "%s: unknown suite member '%s'; use name, "
				 "description, command, base, axes, exclude, "
				 "repeats, order, order_seed",
				 source, key);
			return -1;
		}
	}
	return 0;
}

/* "command" (NULL: "run") into *eval: "run" trains each run, "eval"
 * evaluates each run's params= (deqbench eval). */
static int parse_command(const json_t *cmd, const char *source, int *eval,
			 char *err, size_t errlen)
{
	const char *c = json_string_value(cmd);
	*eval = 0;
	if (!cmd)
		return 0;
	if (c && (!strcmp(c, "run") || !strcmp(c, "eval"))) {
		*eval = !strcmp(c, "eval");
		return 0;
	}
	snprintf(err, errlen, "%s: command must be \"run\" or \"eval\"",
		 source);
	return -1;
}

/* "repeats" (NULL: 1) into *repeats: an integer in 1..100000. */
static int parse_repeats(const json_t *reps, const char *source, int *repeats,
			 char *err, size_t errlen)
{
	double r;
	*repeats = 1;
	if (!reps)
		return 0;
	/* a whole real (3.0) counts as an integer, as for keys */
	r = json_number_value(reps);
	if (!json_is_number(reps) || r != floor(r) || r < 1 || r > 100000) {
		snprintf(err, errlen,
			 "%s: repeats must be an integer in 1..100000", source);
		return -1;
	}
	*repeats = (int)r;
	return 0;
}

/* base must be an object, axes an object, exclude an array of objects
 * whose keys all parse (each checked alone, against the defaults). */
static int check_shapes(const json_t *base, const json_t *axes,
			const json_t *exclude, const char *source, char *err,
			size_t errlen)
{
	size_t i;
	json_t *v;
	char e[512];
	if (base && !json_is_object(base)) {
		snprintf(err, errlen,
			 "%s: base must be an object of config keys", source);
		return -1;
	}
	if (axes && !json_is_object(axes)) {
		snprintf(err, errlen,
			 "%s: axes must be an object {key: [values...]}",
			 source);
		return -1;
	}
	if (exclude && !json_is_array(exclude)) {
		snprintf(err, errlen,
			 "%s: exclude must be an array of partial configs",
			 source);
		return -1;
	}
	json_array_foreach(exclude, i, v)
	{
		const char *k2;
		json_t *v2;
		struct bench_config tmp;
		if (!json_is_object(v)) {
			snprintf(err, errlen,
				 "%s: exclude[%zu] must be an object", source,
				 i);
			return -1;
		}
		config_defaults(&tmp);
		json_object_foreach(v, k2, v2)
		{
			if (config_set_json(&tmp, k2, v2, e, sizeof(e)) != 0) {
				snprintf(err, errlen, "%s: exclude[%zu]: %s",
					 source, i, e);
				return -1;
			}
		}
	}
	return 0;
}

/* An axis named KEY that is not a config key is a label: every value V
 * holds must be an object. */
static int check_label_axis(const char *key, const json_t *v,
			    const char *source, char *err, size_t errlen)
{
	size_t j;
	json_t *x;
	int all_obj = json_is_array(v);
	char sug[96];
	if (config_key_known(key))
		return 0;
	json_array_foreach(v, j, x) all_obj &= json_is_object(x);
	if (!json_is_array(v) && json_is_object(v))
		all_obj = 1;
	if (all_obj)
		return 0;
	config_suggest(key, sug, sizeof(sug));
	snprintf(err, errlen,
		 "%s: axes: unknown key '%s'%s (an axis named otherwise must "
		 "hold objects)",
		 source, key, sug);
	return -1;
}

/* The axes of a suite, in file order. */
struct axes {
	int n;
	const char *name[64];
	const json_t *vals[64]; /* an array of values, or one value */
	size_t len[64];		/* values per axis */
	size_t n_combo;		/* product of len[] */
};

/* Reads AXES (NULL: none) into *ax: at most 64 axes, none empty, at most
 * 1e6 combinations. */
static int collect_axes(const json_t *axes, struct axes *ax, const char *source,
			char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	ax->n = 0;
	ax->n_combo = 1;
	json_object_foreach((json_t *)axes, key, v)
	{
		if (ax->n == 64) {
			snprintf(err, errlen, "%s: more than 64 axes", source);
			return -1;
		}
		ax->name[ax->n] = key;
		ax->vals[ax->n] = v;
		ax->len[ax->n] = json_is_array(v) ? json_array_size(v) : 1;
		if (ax->len[ax->n] == 0) {
			snprintf(err, errlen,
				 "%s: axes.%s is empty; give at least one "
				 "value",
				 source, key);
			return -1;
		}
		if (check_label_axis(key, v, source, err, errlen) != 0)
			return -1;
		ax->n_combo *= ax->len[ax->n];
		ax->n++;
		if (ax->n_combo > 1000000) {
			snprintf(err, errlen,
				 "%s: axes give more than 1e6 combinations; "
				 "split the suite",
				 source);
			return -1;
		}
	}
	return 0;
}

/* "name" (NULL: the file's name stands in) must be a plain file name:
 * scripts and users build paths like results/local/NAME.jsonl from it, so
 * a name with '/' or '\\', "." or "..", an empty one or one with a control
 * character (a line break in a message or a path) is refused. 0, or -1
 * with one line. */
static int check_name(const json_t *name, const char *source, char *err,
		      size_t errlen)
{
	const char *n = json_string_value(name);
	int ctl = 0;
	if (!name)
		return 0;
	if (!n) {
		snprintf(err, errlen,
			 "%.200s: name must be a string, a plain file name",
			 source);
		return -1;
	}
	for (const unsigned char *c = (const unsigned char *)n; *c; c++)
		ctl |= *c < 0x20 || *c == 0x7f;
	if (*n && !ctl && strcmp(n, ".") && strcmp(n, "..") &&
	    !strpbrk(n, "/\\"))
		return 0;
	snprintf(err, errlen,
		 "%.200s: name \"%.*s\" is not a plain file name (paths such "
		 "as results/local/NAME.jsonl are built from it): give a name "
		 "without '/', '\\' or control characters, other than \".\" "
		 "and \"..\"",
		 source, ctl ? 0 : (int)jsontext_fit(n, 100), n);
	return -1;
}

int suite_expand(struct suite *s, const json_t *root, const char *source,
		 int n_over, char *const *overrides, char *err, size_t errlen)
{
	const json_t *base, *axes, *exclude, *name;
	const char *nm;
	struct axes ax;

	memset(s, 0, sizeof(*s));
	if (!json_is_object(root)) {
		snprintf(err, errlen,
			 "%s: a suite is a JSON object with name, base, axes, "
			 "exclude and repeats",
			 source);
		return -1;
	}
	if (check_members(root, source, err, errlen) != 0)
		return -1;
	name = json_object_get(root, "name");
	base = json_object_get(root, "base");
	axes = json_object_get(root, "axes");
	exclude = json_object_get(root, "exclude");
	if (check_name(name, source, err, errlen) != 0)
		return -1;
	nm = name ? json_string_value(name) : source;
	snprintf(s->name, sizeof(s->name), "%.*s",
		 (int)jsontext_fit(nm, sizeof(s->name) - 1), nm);
	if (parse_command(json_object_get(root, "command"), source, &s->eval,
			  err, errlen) != 0 ||
	    parse_repeats(json_object_get(root, "repeats"), source, &s->repeats,
			  err, errlen) != 0 ||
	    suite_parse_order(s, root, source, err, errlen) != 0 ||
	    check_shapes(base, axes, exclude, source, err, errlen) != 0 ||
	    collect_axes(axes, &ax, source, err, errlen) != 0 ||
	    axes_disjoint(ax.n, ax.name, ax.vals, source, err, errlen) != 0)
		return -1;
	{
		struct expansion x = {base,   exclude, source,
				      ax.n,   ax.name, ax.vals,
				      ax.len, n_over,  overrides};
		return expand_runs(s, &x, ax.n_combo, err, errlen);
	}
}

int suite_load(struct suite *s, const char *path, int n_over,
	       char *const *overrides, char *err, size_t errlen)
{
	int rc;

	memset(s, 0, sizeof(*s));
	json_t *root = config_json_load(path, "suite", err, errlen);
	if (!root)
		return -1;
	rc = suite_expand(s, root, path, n_over, overrides, err, errlen);
	json_decref(root);
	return rc;
}

void suite_free(struct suite *s)
{
	free(s->runs);
	s->runs = NULL;
	s->n_runs = 0;
}

int suite_shard_parse(const char *arg, int *shard_i, int *shard_n, char *err,
		      size_t errlen)
{
	char *end;
	long i, n;

	i = strtol(arg, &end, 10);
	if (end == arg || *end != '/')
		goto bad;
	n = strtol(end + 1, &end, 10);
	if (*end || n < 1 || i < 0 || i >= n || n > 1000000)
		goto bad;
	*shard_i = (int)i;
	*shard_n = (int)n;
	return 0;
bad:
	snprintf(err, errlen,
		 "--shard %s: expected I/N with 0 <= I < N, e.g. --shard 0/4",
		 arg);
	return -1;
}

void suite_print_runs(const struct suite *s, int shard_i, int shard_n, FILE *f)
{
	json_t *first, *varying = json_object();
	const char *key;
	json_t *v;
	int n = 0;

	if (s->n_runs == 0) {
		json_decref(varying);
		return;
	}
	first = config_to_json(&s->runs[0].cfg);
	for (int i = 1; i < s->n_runs; i++) {
		json_t *o = config_to_json(&s->runs[i].cfg);
		json_object_foreach(first, key, v)
		{
			if (!json_equal(v, json_object_get(o, key)))
				json_object_set_new(varying, key, json_true());
		}
		json_decref(o);
	}
	for (int i = 0; i < s->n_runs; i++) {
		json_t *o;
		if (!suite_in_shard(i, shard_i, shard_n))
			continue;
		o = config_to_json(&s->runs[i].cfg);
		fprintf(f, "%4d ", i);
		json_object_foreach(first, key, v)
		{
			char *t;
			json_t *x;
			if (!json_object_get(varying, key))
				continue;
			x = json_object_get(o, key);
			t = record_value_text(x);
			fprintf(f, " %s=%s", key, t ? t : "?");
			free(t);
		}
		if (s->repeats > 1)
			fprintf(f, " repeat=%d", s->runs[i].repeat);
		fputc('\n', f);
		json_decref(o);
		n++;
	}
	fprintf(f, "%d of %d runs (suite %s, shard %d/%d, order %s", n,
		s->n_runs, s->name, shard_i, shard_n,
		suite_order_name(s->order));
	if (s->order == SUITE_ORDER_RANDOM)
		fprintf(f, " order_seed=%lld", s->order_seed);
	fputs(")\n", f);
	json_decref(first);
	json_decref(varying);
}
