/* config_check.c — cross-key checks of the training keys (config_check.h):
 * pretraining and micro-batches. config.c's config_validate_keys runs
 * them with the rest. */
#include "config_check.h"

#include <stdio.h>

#include "config.h"
#include "../../methods/deq.h"

/* pretrain_steps: only for method=deq, and leaving the deq phase at least
 * one timed step (each phase's first warmup_steps steps are untimed). */
int config_check_pretrain(const struct bench_config *c, char *err,
			  size_t errlen)
{
	int p = c->pretrain_steps;
	if (p <= 0)
		return 0;
	if (c->method.method != deq_kind()) {
		snprintf(err, errlen,
			 "pretrain_steps=%d needs method=deq (method=%s "
			 "trains unrolled or checkpointed throughout); use "
			 "pretrain_steps=0 or method=deq",
			 p, method_kind_name(c->method.method));
		return -1;
	}
	if (p >= c->steps) {
		snprintf(err, errlen,
			 "pretrain_steps=%d must be smaller than steps=%d "
			 "(use a value in [0, %d]); lower pretrain_steps or "
			 "raise steps",
			 p, c->steps, c->steps - 1);
		return -1;
	}
	if (p + c->warmup_steps >= c->steps) {
		snprintf(err, errlen,
			 "pretrain_steps=%d + warmup_steps=%d must be smaller "
			 "than steps=%d (the deq phase after pretraining "
			 "needs timed steps); lower them or raise steps",
			 p, c->warmup_steps, c->steps);
		return -1;
	}
	return 0;
}

int config_check_micro(const struct bench_config *c, char *err, size_t errlen)
{
	if (c->model.batch_size % c->microbatches != 0) {
		snprintf(err, errlen,
			 "microbatches=%d does not divide batch_size=%d; "
			 "choose microbatches dividing batch_size",
			 c->microbatches, c->model.batch_size);
		return -1;
	}
	return 0;
}
