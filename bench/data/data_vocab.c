/*
 * data_vocab.c — the word table that tokenising fills (every distinct word
 * once, with its count in the training split) and the vocabulary built
 * from it: <eos>, <unk>, then the training words by count descending, then
 * bytewise ascending, up to a cap (data.h); the other words map to <unk>.
 */
#include "data_impl.h"

#include <stdlib.h>
#include <string.h>

int data_wtab_init(struct wtab *t)
{
	memset(t, 0, sizeof(*t));
	t->mask = 1023;
	t->slot = malloc((t->mask + 1) * sizeof(*t->slot));
	if (!t->slot)
		return -1;
	memset(t->slot, 0xff, (t->mask + 1) * sizeof(*t->slot));
	return 0;
}

void data_wtab_free(struct wtab *t)
{
	free(t->arena);
	free(t->w);
	free(t->slot);
	memset(t, 0, sizeof(*t));
}

/* Doubles the slot array and re-inserts every word. */
static int wtab_grow(struct wtab *t)
{
	size_t cap = (t->mask + 1) * 2;
	int32_t *s = malloc(cap * sizeof(*s));
	if (!s)
		return -1;
	memset(s, 0xff, cap * sizeof(*s));
	for (size_t i = 0; i < t->n; i++) {
		const char *p = t->arena + t->w[i].off;
		size_t j = fnv1a(FNV_INIT, p, t->w[i].len) & (cap - 1);
		while (s[j] >= 0)
			j = (j + 1) & (cap - 1);
		s[j] = (int32_t)i;
	}
	free(t->slot);
	t->slot = s;
	t->mask = cap - 1;
	return 0;
}

/* Appends word P[0..len) to the word array and the arena (without a slot);
 * -1 when out of memory. */
static int wtab_append(struct wtab *t, const char *p, size_t len)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct word *nw = realloc(t->w, cap * sizeof(*nw));
		if (!nw)
			return -1;
		t->w = nw;
		t->cap = cap;
	}
	if (t->arena_n + len + 1 > t->arena_cap) {
		size_t cap = t->arena_cap ? t->arena_cap * 2 : 1 << 16;
		char *na;
		while (cap < t->arena_n + len + 1)
			cap *= 2;
		na = realloc(t->arena, cap);
		if (!na)
			return -1;
		t->arena = na;
		t->arena_cap = cap;
	}
	memcpy(t->arena + t->arena_n, p, len);
	t->arena[t->arena_n + len] = 0;
	t->w[t->n] = (struct word){t->arena_n, (uint32_t)len, 0, -1};
	t->arena_n += len + 1;
	return 0;
}

int32_t data_wtab_get(struct wtab *t, const char *p, size_t len)
{
	size_t j = fnv1a(FNV_INIT, p, len) & t->mask;
	struct word *w;
	for (; t->slot[j] >= 0; j = (j + 1) & t->mask) {
		w = &t->w[t->slot[j]];
		if (w->len == len && !memcmp(t->arena + w->off, p, len))
			return t->slot[j];
	}
	if (t->n >= INT32_MAX - 1 || wtab_append(t, p, len) != 0)
		return -1;
	t->slot[j] = (int32_t)t->n;
	t->n++;
	if (t->n * 2 > t->mask + 1 && wtab_grow(t) != 0)
		return -1;
	return (int32_t)(t->n - 1);
}

/* ---- vocabulary ----------------------------------------------------------- */

struct rank {
	uint64_t count;
	const char *s;
	uint32_t len;
	int32_t idx;
};

/* Count descending, then bytewise ascending (a prefix first). */
static int cmp_rank(const void *a, const void *b)
{
	const struct rank *x = a, *y = b;
	size_t n = x->len < y->len ? x->len : y->len;
	int c;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	c = memcmp(x->s, y->s, n);
	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* Copies the specials' and the NR ranked words' text into c->vocab (V =
 * 2 + NR entries in one buffer, c->vocab_buf_). -1 when out of memory
 * (c may hold one of the two allocations: the caller frees it). */
static int vocab_fill(const struct wtab *t, const struct rank *r, size_t nr,
		      struct corpus *c)
{
	int V = 2 + (int)nr;
	size_t bytes = 0;
	char *p;
	c->vocab = malloc((size_t)V * sizeof(*c->vocab));
	for (size_t i = 0; i < nr; i++)
		bytes += r[i].len + 1;
	bytes += t->w[0].len + t->w[1].len + 2;
	c->vocab_buf_ = malloc(bytes);
	if (!c->vocab || !c->vocab_buf_)
		return -1;
	p = c->vocab_buf_;
	for (int i = 0; i < V; i++) {
		const char *s = i < 2 ? t->arena + t->w[i].off : r[i - 2].s;
		size_t len = i < 2 ? t->w[i].len : r[i - 2].len;
		memcpy(p, s, len);
		p[len] = 0;
		c->vocab[i] = p;
		p += len + 1;
	}
	c->vocab_size = V;
	return 0;
}

int data_vocab_build(struct wtab *t, int cap, struct corpus *c)
{
	struct rank *r = malloc((t->n ? t->n : 1) * sizeof(*r));
	size_t nr = 0;
	int rc;
	if (!r)
		return -1;
	for (size_t i = 2; i < t->n; i++)
		if (t->w[i].count > 0)
			r[nr++] =
			    (struct rank){t->w[i].count, t->arena + t->w[i].off,
					  t->w[i].len, (int32_t)i};
	qsort(r, nr, sizeof(*r), cmp_rank);
	if (cap > 0 && nr > (size_t)cap)
		nr = (size_t)cap;
	if (nr > (size_t)INT32_MAX - 2) {
		free(r);
		return -1;
	}
	for (size_t i = 0; i < t->n; i++)
		t->w[i].id = W_UNK;
	t->w[W_EOS].id = W_EOS;
	for (size_t i = 0; i < nr; i++)
		t->w[r[i].idx].id = (int32_t)(2 + i);
	rc = vocab_fill(t, r, nr, c);
	free(r);
	return rc;
}
