/*
 * data_impl.h — what the corpus files share; private to bench/data*.c (the
 * public interface is data.h).
 *
 * corpus_load (data_load.c) runs three steps over one struct source:
 *   data_source.c    find the text files of a corpus kind and fingerprint
 *                    them (names, sizes, mtimes)
 *   data_cache.c     reuse the token-id cache written for that fingerprint
 *   data_tokenize.c  or build the ids from the text (tokeniser, vocabulary)
 *                    and data_cache.c writes them for the next load.
 * data_batch.c cuts a loaded stream into batches. data.c (corpus_free,
 * corpus_split_name, corpus_synthetic) and this header are what the
 * others build on; data.c calls none of them.
 */
#ifndef DQ_BENCH_DATA_IMPL_H
#define DQ_BENCH_DATA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "data.h"

/* Table indices of the specials, which are also their ids: every word-level
 * vocabulary starts <eos>, <unk>. */
enum { W_EOS = 0, W_UNK = 1 };

/* FNV-1a 64: one multiply per byte, ~1 GB/s; enough for corruption checks
 * (cache checksums, source fingerprints) and the word table's hash. */
#define FNV_INIT 1469598103934665603ull
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 1099511628211ull;
	}
	return h;
}

/* Where the text of one file corpus is, and where its cache goes. */
struct source {
	char dir[512];	 /* where the text is */
	char cache[600]; /* cache directory: dir/cache */
	char **files[3]; /* per split, nfiles[split] paths */
	int nfiles[3];
	int brown;	      /* 1: tagged Brown text (tokenise strips tags) */
	uint64_t fingerprint; /* kind, NORM_VER, names, sizes, mtimes */
};

/* data_source_find — fills *s for corpus KIND under ROOT (the data_dir),
 * checking that the files are there. 0, or -1 with *s empty and the message
 * corpus_load gives (missing files, unknown kind, out of memory). */
int data_source_find(struct source *s, const char *kind, const char *root,
		     char *err, size_t errlen);

/* data_source_free — frees the file lists and zeroes *s. */
void data_source_free(struct source *s);

/* data_read_whole — reads PATH whole into a NUL-terminated malloc'd buffer
 * *buf of *len bytes (the NUL not counted). 0, or -1 with *buf NULL and
 * errno set by the failing call. */
int data_read_whole(const char *path, char **buf, size_t *len);

/* ---- data_vocab.c: the word table and the vocabulary ---- */

struct word {
	size_t off;	/* of its text in the arena */
	uint32_t len;	/* bytes */
	uint64_t count; /* occurrences in the training split */
	int32_t id;	/* vocabulary id, set by data_vocab_build */
};

/* Every distinct word once: open addressing (hash fnv1a, linear probing,
 * at most half full) over an arena of NUL-terminated strings. */
struct wtab {
	char *arena;
	size_t arena_n, arena_cap;
	struct word *w; /* w[0..n): table index = order of first sight */
	size_t n, cap;
	int32_t *slot; /* mask+1 slots: -1 empty, else an index into w */
	size_t mask;
};

/* data_wtab_init — an empty table; -1 when out of memory. */
int data_wtab_init(struct wtab *t);

/* data_wtab_free — frees the table and zeroes *t. */
void data_wtab_free(struct wtab *t);

/* data_wtab_get — index of word P[0..len), inserted (count 0) if new; -1
 * when out of memory. */
int32_t data_wtab_get(struct wtab *t, const char *p, size_t len);

/* data_vocab_build — assigns t->w[].id: <eos> and <unk> (indices W_EOS,
 * W_UNK) keep ids 0 and 1, the training words (count > 0) get 2, 3, ... by
 * rank up to CAP of them (0 = no cap), every other word <unk>; fills
 * c->vocab, c->vocab_size. 0, or -1 when out of memory (c may be partly
 * filled: the caller frees it). */
int data_vocab_build(struct wtab *t, int cap, struct corpus *c);

/* ---- data_tokenize.c ---- */

/* data_build — tokenises the files of s into c->ids[], c->n[] and builds
 * the vocabulary (c->vocab, c->vocab_size; Brown capped at
 * DATA_BROWN_WORDS). 0, or -1 with a message naming KIND (c may be partly
 * filled: the caller frees it). */
int data_build(const struct source *s, const char *kind, struct corpus *c,
	       char *err, size_t errlen);

/* data_cache_clean — removes the temporary cache files of builders that
 * were killed. */
void data_cache_clean(const struct source *s);

/* data_cache_read — loads s's cache into *c. 0, or -1 when anything is
 * missing or does not match (c may be partly filled: the caller frees
 * it). */
int data_cache_read(const struct source *s, struct corpus *c);

/* data_cache_write — writes c as s's cache (vocab.txt, then the three .ids
 * files). 0, or -1 when it cannot (a read-only directory: the corpus is
 * used uncached). */
int data_cache_write(const struct source *s, const struct corpus *c);

#endif
