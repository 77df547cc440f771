/* suite.c — suite expansion: cartesian product of axes, exclusions, repeats,
 * sharding. O(runs × keys) work; suites hold at most thousands of runs. */
#include "suite.h"

#include <stdlib.h>
#include <string.h>

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

int suite_expand(struct suite *s, const json_t *root, const char *source,
		 int n_over, char *const *overrides, char *err, size_t errlen)
{
	const json_t *base, *axes, *exclude, *reps, *name;
	const char *key;
	json_t *v;
	int n_axes = 0, cap = 0;
	size_t n_combo = 1;
	const char *axis_name[64];
	const json_t *axis_vals[64];
	size_t axis_len[64];
	char e[512];

	memset(s, 0, sizeof(*s));
	if (!json_is_object(root)) {
		snprintf(err, errlen,
			 "%s: a suite is a JSON object with name, base, axes, "
			 "exclude and repeats",
			 source);
		return -1;
	}
	json_object_foreach((json_t *)root, key, v)
	{
		if (strcmp(key, "name") && strcmp(key, "base") &&
		    strcmp(key, "axes") && strcmp(key, "exclude") &&
		    strcmp(key, "repeats") && strcmp(key, "description")) {
			snprintf(err, errlen,
				 "%s: unknown suite member '%s'; use name, "
				 "description, base, axes, exclude, repeats",
				 source, key);
			return -1;
		}
	}
	name = json_object_get(root, "name");
	base = json_object_get(root, "base");
	axes = json_object_get(root, "axes");
	exclude = json_object_get(root, "exclude");
	reps = json_object_get(root, "repeats");
	snprintf(s->name, sizeof(s->name), "%s",
		 json_is_string(name) ? json_string_value(name) : source);
	s->repeats = 1;
	if (reps) {
		if (!json_is_integer(reps) || json_integer_value(reps) < 1 ||
		    json_integer_value(reps) > 100000) {
			snprintf(err, errlen,
				 "%s: repeats must be an integer >= 1", source);
			return -1;
		}
		s->repeats = (int)json_integer_value(reps);
	}
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
	if (exclude) {
		size_t i;
		json_array_foreach(exclude, i, v)
		{
			const char *k2;
			json_t *v2;
			struct bench_config tmp;
			if (!json_is_object(v)) {
				snprintf(err, errlen,
					 "%s: exclude[%zu] must be an object",
					 source, i);
				return -1;
			}
			config_defaults(&tmp);
			json_object_foreach(v, k2, v2)
			{
				if (config_set_json(&tmp, k2, v2, e,
						    sizeof(e)) != 0) {
					snprintf(err, errlen,
						 "%s: exclude[%zu]: %s", source,
						 i, e);
					return -1;
				}
			}
		}
	}
	if (axes) {
		json_object_foreach((json_t *)axes, key, v)
		{
			if (n_axes == 64) {
				snprintf(err, errlen, "%s: more than 64 axes",
					 source);
				return -1;
			}
			axis_name[n_axes] = key;
			axis_vals[n_axes] = v;
			axis_len[n_axes] =
			    json_is_array(v) ? json_array_size(v) : 1;
			if (axis_len[n_axes] == 0) {
				snprintf(err, errlen,
					 "%s: axes.%s is empty; give at least "
					 "one value",
					 source, key);
				return -1;
			}
			if (!config_key_known(key)) {
				/* a label: every value must be an object */
				size_t j;
				json_t *x;
				int all_obj = json_is_array(v);
				json_array_foreach(v, j, x) all_obj &=
				    json_is_object(x);
				if (!json_is_array(v) && json_is_object(v))
					all_obj = 1;
				if (!all_obj) {
					snprintf(err, errlen,
						 "%s: axes: unknown key '%s'; "
						 "did you mean '%s'? (an axis "
						 "named otherwise must hold "
						 "objects)",
						 source, key,
						 config_closest_key(key));
					return -1;
				}
			}
			n_combo *= axis_len[n_axes];
			n_axes++;
			if (n_combo > 1000000) {
				snprintf(err, errlen,
					 "%s: more than 1e6 combinations",
					 source);
				return -1;
			}
		}
	}

	for (size_t ci = 0; ci < n_combo; ci++) {
		struct bench_config c;
		size_t rem = ci, idx[64];
		/* first axis slowest: decode ci in mixed radix, last fastest */
		for (int a = n_axes - 1; a >= 0; a--) {
			idx[a] = rem % axis_len[a];
			rem /= axis_len[a];
		}
		config_defaults(&c);
		if (base &&
		    config_apply_object(&c, base, source, err, errlen) != 0)
			goto fail;
		for (int a = 0; a < n_axes; a++) {
			const json_t *av =
			    json_is_array(axis_vals[a])
				? json_array_get(axis_vals[a], idx[a])
				: axis_vals[a];
			if (apply_axis_value(&c, axis_name[a], av, source, err,
					     errlen) != 0)
				goto fail;
		}
		for (int o = 0; o < n_over; o++) {
			if (config_set_arg(&c, overrides[o], e, sizeof(e)) !=
			    0) {
				snprintf(err, errlen, "command line: %s", e);
				goto fail;
			}
		}
		if (exclude) {
			size_t i;
			int drop = 0;
			json_array_foreach(exclude, i, v) drop |=
			    excluded_by(&c, v);
			if (drop)
				continue;
		}
		if (config_validate(&c, e, sizeof(e)) != 0) {
			snprintf(err, errlen, "%s: combination %zu: %s", source,
				 ci, e);
			goto fail;
		}
		for (int r = 0; r < s->repeats; r++) {
			if (s->n_runs == cap) {
				int ncap = cap ? cap * 2 : 16;
				void *p = realloc(
				    s->runs, (size_t)ncap * sizeof(*s->runs));
				if (!p) {
					snprintf(err, errlen,
						 "out of host memory");
					goto fail;
				}
				s->runs = p;
				cap = ncap;
			}
			s->runs[s->n_runs].index = s->n_runs;
			s->runs[s->n_runs].combo = (int)ci;
			s->runs[s->n_runs].repeat = r;
			s->runs[s->n_runs].cfg = c;
			s->n_runs++;
		}
	}
	if (s->n_runs == 0) {
		snprintf(err, errlen,
			 "%s: every combination is excluded; nothing to run",
			 source);
		goto fail;
	}
	return 0;
fail:
	suite_free(s);
	return -1;
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
			t = json_is_string(x)
				? strdup(json_string_value(x))
				: json_dumps(x, JSON_ENCODE_ANY |
						    JSON_REAL_PRECISION(6));
			fprintf(f, " %s=%s", key, t ? t : "?");
			free(t);
		}
		if (s->repeats > 1)
			fprintf(f, " repeat=%d", s->runs[i].repeat);
		fputc('\n', f);
		json_decref(o);
		n++;
	}
	fprintf(f, "%d of %d runs (suite %s, shard %d/%d)\n", n, s->n_runs,
		s->name, shard_i, shard_n);
	json_decref(first);
	json_decref(varying);
}
