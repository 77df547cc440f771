/*
 * data_batch.c — the batcher: B contiguous streams of a token stream read
 * in windows of T (+1) tokens, as the DEQ / Transformer-XL LMOrderedIterator
 * does; data.h gives the layout.
 */
#include "data.h"

#include <string.h>

int batcher_init(struct batcher *b, const int32_t *ids, size_t n, int B, int T)
{
	memset(b, 0, sizeof(*b));
	if (!ids || B < 1 || T < 1 || n / (size_t)B < (size_t)T + 1)
		return -1;
	b->ids = ids;
	b->n = n;
	b->B = B;
	b->T = T;
	b->stream_len = n / (size_t)B;
	b->n_batches = (b->stream_len - 1) / (size_t)T;
	return 0;
}

size_t batcher_n_batches(const struct batcher *b)
{
	return b->n_batches;
}

void batcher_get(const struct batcher *b, size_t k, int32_t *out)
{
	size_t w = (size_t)b->T + 1;
	for (int s = 0; s < b->B; s++)
		memcpy(out + (size_t)s * w,
		       b->ids + (size_t)s * b->stream_len + k * (size_t)b->T,
		       w * sizeof(*out));
}

size_t batcher_next(struct batcher *b, int32_t *out)
{
	size_t k = b->next;
	batcher_get(b, k, out);
	if (++b->next == b->n_batches) {
		b->next = 0;
		b->epoch++;
	}
	return k;
}

void batcher_reset(struct batcher *b)
{
	b->next = 0;
	b->epoch = 0;
}
