/* suite_order.c — the order a suite's runs run in (suite.h): round-robin
 * across configurations by default, a seeded random permutation, or the
 * axes' product order. O(runs log runs) time, O(runs) memory. */
#include "suite.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../records/record.h"

/* Largest order_seed: every integer up to it is exact in a double, so a
 * seed reads back the same from any JSON reader. */
#define ORDER_SEED_MAX 9007199254740992.0 /* 2^53 */

static const char *const order_names[] = {"round-robin", "random", "axes"};

const char *suite_order_name(enum suite_order o)
{
	return o >= SUITE_ORDER_ROUND_ROBIN && o <= SUITE_ORDER_AXES
		   ? order_names[o]
		   : "?";
}

int suite_parse_order(struct suite *s, const json_t *root, const char *source,
		      char *err, size_t errlen)
{
	const json_t *o = json_object_get(root, "order");
	const json_t *seed = json_object_get(root, "order_seed");
	const char *name = json_string_value(o);
	double v = json_number_value(seed);
	int k = -1;

	s->order = SUITE_ORDER_ROUND_ROBIN;
	s->order_seed = -1;
	for (int i = 0; name && i < 3; i++)
		if (!strcmp(name, order_names[i]))
			k = i;
	if (o && k < 0) {
		snprintf(err, errlen,
			 "%.200s: order must be \"round-robin\" (the default), "
			 "\"random\" (with \"order_seed\") or \"axes\"",
			 source);
		return -1;
	}
	if (k >= 0)
		s->order = (enum suite_order)k;
	if (seed && (!json_is_number(seed) || v != floor(v) || v < 0 ||
		     v > ORDER_SEED_MAX)) {
		snprintf(err, errlen,
			 "%.200s: order_seed must be an integer in 0..2^53",
			 source);
		return -1;
	}
	if ((s->order == SUITE_ORDER_RANDOM) != (seed != NULL)) {
		snprintf(err, errlen, "%.200s: %s", source,
			 seed ? "order_seed is only for \"order\": \"random\"; "
				"drop it or add \"order\": \"random\""
			      : "\"order\": \"random\" needs \"order_seed\": "
				"an integer that fixes the permutation, so "
				"shards and --resume see one order");
		return -1;
	}
	if (seed)
		s->order_seed = (long long)v;
	return 0;
}

/* splitmix64 (Steele, Lea and Flood 2014; Vigna's reference code): a
 * 64-bit generator whose output is the same on every machine. */
static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* An integer uniform in 0..n-1 (n >= 1), by rejection: no modulo bias. */
static uint64_t below(uint64_t *x, uint64_t n)
{
	uint64_t lim = UINT64_MAX - UINT64_MAX % n, r;
	do
		r = splitmix64(x);
	while (r >= lim);
	return r % n;
}

static void shuffle(struct suite_run *runs, int n, long long seed)
{
	uint64_t x = (uint64_t)seed;
	for (int i = n - 1; i > 0; i--) {
		int j = (int)below(&x, (uint64_t)i + 1);
		struct suite_run t = runs[i];
		runs[i] = runs[j];
		runs[j] = t;
	}
}

/* One run's place in the round-robin order. */
struct rr {
	char *config; /* the run identity without seed, as sorted JSON */
	int at;	      /* position among the combinations */
	int repeat;
	int group; /* position of its configuration's first run */
	int round; /* how many runs of its configuration come before it */
};

static char *config_key(const struct suite_run *r)
{
	json_t *o = config_effective_json(&r->cfg);
	json_t *id = record_run_identity(o);
	char *s;
	json_object_del(id, "seed");
	s = json_dumps(id,
		       JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	json_decref(id);
	json_decref(o);
	return s;
}

/* Runs of one configuration together, in (repeat, position) order. */
static int by_config(const void *a, const void *b)
{
	const struct rr *x = a, *y = b;
	int c = strcmp(x->config, y->config);
	if (c)
		return c;
	if (x->repeat != y->repeat)
		return x->repeat < y->repeat ? -1 : 1;
	return (x->at > y->at) - (x->at < y->at);
}

static int by_round(const void *a, const void *b)
{
	const struct rr *x = a, *y = b;
	if (x->round != y->round)
		return x->round < y->round ? -1 : 1;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return (x->at > y->at) - (x->at < y->at);
}

static int round_robin(struct suite *s)
{
	struct rr *v = calloc((size_t)s->n_runs + 1, sizeof(*v));
	struct suite_run *out = malloc(((size_t)s->n_runs + 1) * sizeof(*out));
	int rc = 0;
	if (!v || !out)
		rc = -1;
	for (int i = 0; rc == 0 && i < s->n_runs; i++) {
		v[i] = (struct rr){config_key(&s->runs[i]), i,
				   s->runs[i].repeat, 0, 0};
		rc = v[i].config ? 0 : -1;
	}
	if (rc == 0) {
		qsort(v, (size_t)s->n_runs, sizeof(*v), by_config);
		for (int i = 0, first = 0; i < s->n_runs; i++) {
			if (i > 0 && strcmp(v[i].config, v[first].config))
				first = i;
			v[i].round = i - first;
		}
		/* a group is named by its first run in (repeat, position)
		 * order; name it by its first position instead */
		for (int i = 0, first = 0; i <= s->n_runs; i++) {
			if (i < s->n_runs &&
			    !strcmp(v[i].config, v[first].config))
				continue;
			int g = v[first].at;
			for (int j = first; j < i; j++)
				g = v[j].at < g ? v[j].at : g;
			for (int j = first; j < i; j++)
				v[j].group = g;
			first = i;
		}
		qsort(v, (size_t)s->n_runs, sizeof(*v), by_round);
		for (int i = 0; i < s->n_runs; i++)
			out[i] = s->runs[v[i].at];
		memcpy(s->runs, out, (size_t)s->n_runs * sizeof(*out));
	}
	for (int i = 0; v && i < s->n_runs; i++)
		free(v[i].config);
	free(v);
	free(out);
	return rc;
}

int suite_order_runs(struct suite *s)
{
	int rc = 0;
	if (s->order == SUITE_ORDER_ROUND_ROBIN && s->n_runs > 1)
		rc = round_robin(s);
	else if (s->order == SUITE_ORDER_RANDOM)
		shuffle(s->runs, s->n_runs, s->order_seed);
	for (int i = 0; i < s->n_runs; i++)
		s->runs[i].index = i;
	return rc;
}
