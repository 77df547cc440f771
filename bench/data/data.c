/*
 * data.c — what a loaded corpus (data.h) owns and the corpus that needs no
 * files: corpus_free, corpus_split_name, and corpus_synthetic, which draws
 * seeded random tokens. It calls none of the other data_*.c files, which
 * build on it: loading a file corpus is data_load.c's, the batcher
 * data_batch.c's.
 */
#include "data_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/rng.h"
#include "../io/errmsg.h"

static const char *const kind_names[CORPUS_KINDS] = {
    "brown", "wikitext103", "wikitext2", "ptb", "text", "synthetic",
};

int corpus_kind_parse(const char *s)
{
	for (int k = 0; s && k < CORPUS_KINDS; k++)
		if (!strcmp(s, kind_names[k]))
			return k;
	return -1;
}

const char *corpus_kind_name(int k)
{
	return k >= 0 && k < CORPUS_KINDS ? kind_names[k] : "?";
}

const char *corpus_split_name(int split)
{
	static const char *const names[] = {"train", "valid", "test"};
	return split >= 0 && split < 3 ? names[split] : "?";
}

void corpus_free(struct corpus *c)
{
	if (!c)
		return;
	for (int k = 0; k < 3; k++)
		free(c->ids[k]);
	free(c->vocab);
	free(c->vocab_buf_);
	memset(c, 0, sizeof(*c));
}

int corpus_synthetic(struct corpus *c, int vocab_size, size_t n_train,
		     size_t n_valid, size_t n_test, uint64_t seed, char *err,
		     size_t errlen)
{
	size_t n[3] = {n_train, n_valid, n_test}, bytes = 0;
	uint64_t st = seed;
	char *p;
	memset(c, 0, sizeof(*c));
	if (vocab_size < 1 || n_train == 0) {
		errmsg_set(
		    err, errlen,
		    "corpus=synthetic: vocab_size (%d) and the train size "
		    "(%zu) must be positive",
		    vocab_size, n_train);
		return -1;
	}
	snprintf(c->kind, sizeof(c->kind), "synthetic");
	c->vocab_size = vocab_size;
	c->eos_id = c->unk_id = -1;
	for (int k = 0; k < 3; k++) {
		c->n[k] = n[k];
		c->ids[k] = malloc(n[k] ? n[k] * sizeof(int32_t) : 4);
		if (!c->ids[k])
			goto oom;
		/* Lemire's multiply-shift: bias below 2^-32 * V, negligible */
		for (size_t i = 0; i < n[k]; i++)
			c->ids[k][i] = (int32_t)(((splitmix64(&st) >> 32) *
						  (uint64_t)vocab_size) >>
						 32);
	}
	for (int i = 0; i < vocab_size; i++)
		bytes += (size_t)snprintf(NULL, 0, "w%d", i) + 1;
	c->vocab = malloc((size_t)vocab_size * sizeof(*c->vocab));
	c->vocab_buf_ = malloc(bytes);
	if (!c->vocab || !c->vocab_buf_)
		goto oom;
	p = c->vocab_buf_;
	for (int i = 0; i < vocab_size; i++) {
		c->vocab[i] = p;
		p += sprintf(p, "w%d", i) + 1;
	}
	return 0;
oom:
	corpus_free(c);
	errmsg_set(err, errlen,
		   "corpus=synthetic: out of memory for %zu tokens",
		   n_train + n_valid + n_test);
	return -1;
}
