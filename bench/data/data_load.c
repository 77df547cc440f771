/*
 * data_load.c — corpus_load and corpus_check (data.h), on top of the
 * corpus layer: corpus_load finds a corpus' files (data_source.c), reuses
 * their token-id cache (data_cache.c) or tokenises them (data_tokenize.c,
 * data_vocab.c) and writes the cache; corpus=synthetic goes to
 * corpus_synthetic (data.c).
 */
#include "data_impl.h"

#include <stdio.h>
#include <string.h>

#include "../io/errmsg.h"

/* The data directory: DATA_DIR, or "data" when NULL or empty. */
static const char *data_root(const char *data_dir)
{
	return data_dir && *data_dir ? data_dir : "data";
}

int corpus_check(const char *kind, const char *data_dir, char *err,
		 size_t errlen)
{
	struct source s;
	if (!kind) {
		errmsg_set(err, errlen, "corpus: no corpus given");
		return -1;
	}
	if (!strcmp(kind, "synthetic"))
		return 0;
	if (data_source_find(&s, kind, data_root(data_dir), err, errlen) != 0)
		return -1;
	data_source_free(&s);
	return 0;
}

int corpus_load(struct corpus *c, const char *kind, const char *data_dir,
		int vocab_size, uint64_t seed, char *err, size_t errlen)
{
	struct source s;
	memset(c, 0, sizeof(*c));
	if (!kind) {
		errmsg_set(err, errlen, "corpus: no corpus given");
		return -1;
	}
	if (!strcmp(kind, "synthetic"))
		return corpus_synthetic(
		    c, vocab_size > 0 ? vocab_size : DATA_SYNTH_VOCAB,
		    DATA_SYNTH_TRAIN, DATA_SYNTH_VALID, DATA_SYNTH_TEST, seed,
		    err, errlen);
	if (data_source_find(&s, kind, data_root(data_dir), err, errlen) != 0)
		return -1;
	data_cache_clean(&s);
	if (data_cache_read(&s, c) == 0) {
		c->from_cache = 1;
	} else {
		corpus_free(c);
		if (data_build(&s, kind, c, err, errlen) != 0) {
			corpus_free(c);
			data_source_free(&s);
			return -1;
		}
		/* a read-only data directory still loads, just uncached */
		(void)data_cache_write(&s, c);
	}
	snprintf(c->kind, sizeof(c->kind), "%s", kind);
	snprintf(c->source_dir, sizeof(c->source_dir), "%s", s.dir);
	c->eos_id = W_EOS;
	c->unk_id = W_UNK;
	data_source_free(&s);
	return 0;
}
