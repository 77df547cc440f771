/* record_find.c — see record_find.h. */
#include "record_find.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "record.h"

#ifndef DQ_SOURCE_ROOT
#define DQ_SOURCE_ROOT "."
#endif

const char *record_find_source_root(void)
{
	return DQ_SOURCE_ROOT;
}

struct load {
	json_t *out;
	const char *path;
};

static int take(void *ctx, int lineno, json_t *rec, int column, const char *why)
{
	struct load *l = ctx;
	const char *kind, *impl, *status;
	char where[1200];
	(void)column, (void)why;
	if (!rec)
		return 0;
	kind = json_string_value(json_object_get(rec, "kind"));
	impl = json_string_value(json_object_get(rec, "impl"));
	status = json_string_value(json_object_get(rec, "status"));
	if (!kind || strcmp(kind, "train") || !impl ||
	    strcmp(impl, "deqbench") || !status || strcmp(status, "ok"))
		return 0;
	snprintf(where, sizeof(where), "%s:%d", l->path, lineno);
	json_array_append_new(
	    l->out, json_pack("{s:s, s:O}", "where", where, "rec", rec));
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);
	return n >= t && !strcmp(s + n - t, tail);
}

/* The runs of directory dir, its entries in name order, into out. */
static void load_dir(const char *dir, const char *skip, json_t *out)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL, err[512];
	size_t n = 0, cap = 0;
	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || (skip && !strcmp(e->d_name, skip)))
			continue;
		if (n == cap) {
			char **m = realloc(names, (cap = cap ? 2 * cap : 16) *
						      sizeof(*names));
			if (!m)
				break;
			names = m;
		}
		if ((names[n] = strdup(e->d_name)))
			n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), by_name);
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		char p[4096];
		snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
		if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
			load_dir(p, skip, out);
		else if (ends_with(names[i], ".jsonl")) {
			struct load l = {out, p};
			record_each_line(p, take, &l, err, sizeof(err));
		}
		free(names[i]);
	}
	free(names);
}

json_t *record_find_load(const char *path, const char *skip, char *err,
			 size_t errlen)
{
	struct stat st;
	json_t *out = json_array();
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		load_dir(path, skip, out);
		return out;
	}
	struct load l = {out, path};
	if (record_each_line(path, take, &l, err, errlen) != 0) {
		json_decref(out);
		return NULL;
	}
	return out;
}

/* a and b equal: numbers by value, the rest as jansson compares them. */
static int same(const json_t *a, const json_t *b)
{
	if (json_is_number(a) && json_is_number(b))
		return json_number_value(a) == json_number_value(b);
	return a && b && json_equal(a, b);
}

static int matches(const json_t *cfg, const json_t *want,
		   const json_t *defaults, record_find_skip_fn skip, void *ctx)
{
	const char *key;
	const json_t *v;
	if (!json_is_object(cfg))
		return 0;
	json_object_foreach((json_t *)want, key, v)
	{
		const json_t *have = json_object_get(cfg, key);
		if (skip && skip(key, ctx))
			continue;
		if (!have)
			have = json_object_get(defaults, key);
		if (!same(have, v))
			return 0;
	}
	return 1;
}

const json_t *record_find_longest(const json_t *runs, const json_t *want,
				  const json_t *defaults,
				  record_find_skip_fn skip, void *ctx)
{
	const json_t *best = NULL, *r;
	double most = -1;
	size_t i;
	json_array_foreach(runs, i, r)
	{
		const json_t *rec = json_object_get(r, "rec");
		double steps = record_num(rec, "evals.steps");
		if (!isfinite(steps) || steps <= most ||
		    !matches(json_object_get(rec, "config"), want, defaults,
			     skip, ctx))
			continue;
		best = r;
		most = steps;
	}
	return best;
}
