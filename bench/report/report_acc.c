/* report_acc.c — see report.h: records into the table one at a time
 * (report_acc), each second reading of a run left out by its 128-bit
 * hash (report_unique's rule, which compare shares), and report_rows on
 * top of them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"
#include "report_impl.h"

/* ---- 128-bit hash of a record's canonical text ---- */

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static void sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = ROTL(v[1], 13) ^ v[0];
	v[0] = ROTL(v[0], 32);
	v[2] += v[3];
	v[3] = ROTL(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = ROTL(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = ROTL(v[1], 17) ^ v[2];
	v[2] = ROTL(v[2], 32);
}

/* SipHash-2-4 with 128-bit output (Aumasson and Bernstein, 2012; the
 * reference implementation's outlen 16) of s[0..n) under key k, words
 * read in the host's byte order (x86-64: the reference's little-endian).
 * A fixed key: the hash only has to be equal for equal texts within one
 * process. */
static void siphash128(const void *s, size_t n, const uint64_t k[2],
		       uint64_t out[2])
{
	const unsigned char *p = s;
	uint64_t v[4] = {
	    0x736f6d6570736575ULL ^ k[0], 0x646f72616e646f6dULL ^ k[1] ^ 0xee,
	    0x6c7967656e657261ULL ^ k[0], 0x7465646279746573ULL ^ k[1]};
	uint64_t m, b = (uint64_t)n << 56;
	size_t i;
	for (i = 0; i + 8 <= n; i += 8) {
		memcpy(&m, p + i, 8);
		v[3] ^= m;
		sip_round(v);
		sip_round(v);
		v[0] ^= m;
	}
	for (size_t j = 0; i + j < n; j++)
		b |= (uint64_t)p[i + j] << (8 * j);
	v[3] ^= b;
	sip_round(v);
	sip_round(v);
	v[0] ^= b;
	v[2] ^= 0xee;
	for (int r = 0; r < 4; r++)
		sip_round(v);
	out[0] = v[0] ^ v[1] ^ v[2] ^ v[3];
	v[1] ^= 0xdd;
	for (int r = 0; r < 4; r++)
		sip_round(v);
	out[1] = v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* ---- the runs seen: a set of 128-bit hashes ---- */

/* The hashes of the runs seen so far (run_seen): open addressing with
 * linear probing, at most half full, so 32 to 64 bytes a run; a slot of
 * {0, 0} is empty. */
struct run_set {
	uint64_t (*slot)[2];
	size_t cap, n; /* cap a power of two, n <= cap / 2 */
};

/* Adds h to s. 0 after adding it, 1 when it was there, -1 when out of
 * memory. */
static int run_set_add(struct run_set *s, const uint64_t h[2]);

/* Doubles s's slots (16 at first). 0, or -1 when out of memory. */
static int run_set_grow(struct run_set *s)
{
	struct run_set g = {NULL, s->cap ? 2 * s->cap : 16, 0};
	if (!(g.slot = calloc(g.cap, sizeof(*g.slot))))
		return -1;
	for (size_t i = 0; i < s->cap; i++)
		if (s->slot[i][0] || s->slot[i][1])
			run_set_add(&g, s->slot[i]);
	free(s->slot);
	*s = g;
	return 0;
}

static int run_set_add(struct run_set *s, const uint64_t h[2])
{
	size_t i;
	if (2 * (s->n + 1) > s->cap && run_set_grow(s) != 0)
		return -1;
	for (i = h[0] & (s->cap - 1); s->slot[i][0] || s->slot[i][1];
	     i = (i + 1) & (s->cap - 1))
		if (s->slot[i][0] == h[0] && s->slot[i][1] == h[1])
			return 1;
	s->slot[i][0] = h[0];
	s->slot[i][1] = h[1];
	s->n++;
	return 0;
}

/* Whether rec is a second reading of a run in s, noting it there when it
 * is not: 1 when it is, 0 when not (a first reading, or a record without
 * a started_at string: a crashed suite run's error record, two of which
 * are two crashes), -1 when out of memory.
 *
 * A run is its record's canonical text: every field, compact, keys
 * sorted, reals to 17 digits, so equal records have equal texts whatever
 * their key order or spacing in the file. started_at, host and config
 * alone do not name a run: a suite's repeats of one config start in the
 * same second on a fast machine (and differ in suite.repeat and their
 * times). Only the text's hash is kept, never the record. SipHash is a
 * pseudorandom function, so two different texts collide with probability
 * 2^-128 and, by the birthday bound, any two of n records with chance
 * below n^2 / 2^129: 1.3e-30 for 30000 records, 1.5e-21 for a billion.
 * A collision would leave a run out with "duplicates left out" on its
 * row, not silently; two records made to collide on purpose take about
 * 2^64 evaluations (no shortcut is known). */
static int run_seen(struct run_set *s, const json_t *rec)
{
	static const uint64_t key[2] = {0x64657162656e6368ULL,
					0x2072756e20736574ULL};
	uint64_t h[2];
	char *text;
	if (!json_is_string(json_object_get(rec, "started_at")))
		return 0;
	text = json_dumps(rec, JSON_COMPACT | JSON_SORT_KEYS |
				   JSON_REAL_PRECISION(17));
	if (!text)
		return -1;
	siphash128(text, strlen(text), key, h);
	free(text);
	if (!h[0] && !h[1]) /* {0, 0} marks an empty slot */
		h[1] = 1;
	return run_set_add(s, h);
}

json_t *report_unique(const json_t *records, json_t *dropped)
{
	struct run_set s = {NULL, 0, 0};
	json_t *out = json_array(), *r;
	size_t i;
	json_array_foreach(records, i, r)
	{
		int dup = out ? run_seen(&s, r) : -1;
		if (dup < 0 || json_array_append(dup ? dropped : out, r) != 0) {
			json_decref(out);
			out = NULL;
			break;
		}
	}
	free(s.slot);
	return out;
}

/* ---- report_acc ---- */

/* held: the interrupted records, kept until the rows are asked for;
 * finished: the report_run_key of every ok record, as keys. */
struct report_acc {
	struct table t;
	struct run_set seen;
	json_t *held, *finished;
};

struct report_acc *report_acc_new(void)
{
	struct report_acc *a = calloc(1, sizeof(*a));
	if (a && (report_table_init(&a->t) != 0 || !(a->held = json_array()) ||
		  !(a->finished = json_object()))) {
		report_acc_free(a);
		return NULL;
	}
	return a;
}

/* Notes rec's run as finished (status ok) or holds it back (status
 * interrupted: a rerun to the end may follow, as `suite --resume` makes);
 * 1 when held, 0 when rec goes on to its row, -1 when out of memory. */
static int hold_or_note(struct report_acc *a, const json_t *rec)
{
	const char *st = json_string_value(json_object_get(rec, "status"));
	int interrupted = st && !strcmp(st, "interrupted");
	char *key;
	if (!json_is_object(json_object_get(rec, "config")) || !st ||
	    (!interrupted && strcmp(st, "ok")))
		return 0;
	if (interrupted)
		return json_array_append(a->held, (json_t *)rec) ||
			       report_table_open(&a->t, rec)
			   ? -1
			   : 1;
	if (!(key = report_run_key(rec)))
		return -1;
	int rc = json_object_set_new(a->finished, key, json_true());
	free(key);
	return rc ? -1 : 0;
}

int report_acc_add(struct report_acc *a, const json_t *rec)
{
	int dup = run_seen(&a->seen, rec), held;
	if (dup < 0)
		return -1;
	if (dup)
		return report_table_dup(&a->t, rec);
	if ((held = hold_or_note(a, rec)) != 0)
		return held < 0 ? -1 : 0;
	return report_table_add(&a->t, rec);
}

/* The held interrupted records into their rows: each whose run finished
 * later is counted as superseded, the rest as runs. 0, or -1 when out of
 * memory. */
static int flush_held(struct report_acc *a)
{
	json_t *rec;
	size_t i;
	int rc = 0;
	json_array_foreach(a->held, i, rec)
	{
		char *key = rc == 0 ? report_run_key(rec) : NULL;
		if (rc == 0 && !key)
			rc = -1;
		else if (rc == 0)
			rc = json_object_get(a->finished, key)
				 ? report_table_superseded(&a->t, rec)
				 : report_table_add(&a->t, rec);
		free(key);
	}
	json_array_clear(a->held);
	return rc;
}

void report_acc_target(struct report_acc *a, double ppl)
{
	a->t.target_ppl = ppl;
}

json_t *report_acc_rows(struct report_acc *a)
{
	return flush_held(a) == 0 ? report_table_rows(&a->t) : NULL;
}

void report_acc_free(struct report_acc *a)
{
	if (!a)
		return;
	report_table_free(&a->t);
	json_decref(a->held);
	json_decref(a->finished);
	free(a->seen.slot);
	free(a);
}

void report_acc_set_prices(struct report_acc *a, const json_t *prices)
{
	report_table_set_prices(&a->t, prices);
}

json_t *report_rows(const json_t *records)
{
	return report_rows_priced(records, NULL);
}

json_t *report_rows_priced(const json_t *records, const json_t *prices)
{
	struct report_acc *a = report_acc_new();
	json_t *rows = NULL, *rec;
	size_t i;
	int rc = a ? 0 : -1;
	if (a)
		report_acc_set_prices(a, prices);
	json_array_foreach(records, i, rec) if (rc == 0) rc =
	    report_acc_add(a, rec);
	if (rc == 0)
		rows = report_acc_rows(a);
	report_acc_free(a);
	return rows;
}
