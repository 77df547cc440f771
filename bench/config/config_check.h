/* config_check.h — cross-key checks of the training keys, private to
 * bench/config/ (config.c's config_validate_keys calls them). Each
 * returns 0, or -1 with one line in err naming the keys and the fix. */
#ifndef DQ_BENCH_CONFIG_CHECK_H
#define DQ_BENCH_CONFIG_CHECK_H

#include <stddef.h>

struct bench_config;

/* pretrain_steps: only for method=deq, below steps, leaving timed deq
 * steps after warmup_steps. */
int config_check_pretrain(const struct bench_config *c, char *err,
			  size_t errlen);

/* microbatches divides batch_size, and is 1 with cuda_graphs (a recorded
 * step is one whole batch's; docs/methods.md §Micro-batches). */
int config_check_micro(const struct bench_config *c, char *err, size_t errlen);

#endif
