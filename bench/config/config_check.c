/* config_check.c — a config's checks after its keys are read: the
 * cross-key checks of the training keys (config_check.h: pretraining and
 * micro-batches), then config_validate_keys, config_validate and
 * config_finish (config.h), which run them with the method's and the
 * feature matrix's (config_features.h). Above config.c, which parses. */
#include "config_check.h"

#include <stdio.h>
#include <string.h>

#include "config.h"
#include "config_features.h"
#include "../../kernels/backend.h"
#include "../../methods/deq.h"
#include "../../methods/method.h"

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

int config_validate_keys(const struct bench_config *c, char *err, size_t errlen)
{
	const struct model_config *m = &c->model;

	if (m->kind == MODEL_TRANSFORMER && m->d_model % m->n_heads != 0) {
		snprintf(err, errlen,
			 "d_model=%d is not divisible by n_heads=%d; choose "
			 "n_heads dividing d_model",
			 m->d_model, m->n_heads);
		return -1;
	}
	if (c->warmup_steps >= c->steps) {
		snprintf(err, errlen,
			 "warmup_steps=%d must be smaller than steps=%d; "
			 "lower warmup_steps or raise steps",
			 c->warmup_steps, c->steps);
		return -1;
	}
	if (config_check_pretrain(c, err, errlen) != 0 ||
	    config_check_micro(c, err, errlen) != 0)
		return -1;
	if (c->eval_every > 0 && c->eval_tokens <= 0) {
		snprintf(err, errlen,
			 "eval_every=%d evaluates eval_tokens of the valid "
			 "split, but eval_tokens=0; raise eval_tokens or set "
			 "eval_every=0",
			 c->eval_every);
		return -1;
	}
	if (method_config_validate(&c->method, err, errlen) != 0 ||
	    method_check_model(&c->method, m->kind, err, errlen) != 0)
		return -1;
	return config_check_features(c, err, errlen);
}

int config_validate(const struct bench_config *c, char *err, size_t errlen)
{
	if (config_validate_keys(c, err, errlen) != 0)
		return -1;
	if (!backend_caps(config_device_name(c->device))) {
		snprintf(err, errlen,
			 "device=%s: this build has no %s backend; use "
			 "device=cpu or reconfigure with -Dcuda=enabled where "
			 "the CUDA toolkit is",
			 config_device_name(c->device),
			 config_device_name(c->device));
		return -1;
	}
	return 0;
}

int config_finish(struct bench_config *c, char *err, size_t errlen)
{
	/* the default warm-up scales with short runs: steps=2 runs */
	if (c->warmup_steps < 0)
		c->warmup_steps = c->steps / 5 < 10 ? c->steps / 5 : 10;
	/* tf32=true is precision=tf32: one spelling in the resolved config
	 * (tf32 then says the same as precision) */
	if (c->tf32 && c->model.precision == DQ_PREC_FP32)
		c->model.precision = DQ_PREC_TF32;
	if (c->model.precision == DQ_PREC_TF32)
		c->tf32 = 1;
	c->method.graphs = c->cuda_graphs;
	if (config_validate(c, err, errlen) != 0)
		return -1;
	method_config_resolve(&c->method);
	return 0;
}
