/* pretrain.h — unrolled pretraining of a deq run (keys pretrain_steps,
 * pretrain_layers), as the DEQ code's pretrain_steps (Bai, Kolter, Koltun
 * 2019; locuslab/deq): the first pretrain_steps training steps apply the
 * tied block pretrain_layers times from z = 0 with every tape kept and
 * plain backprop (method unroll), then the run switches to the deq method
 * for the remaining steps and for evaluation.
 *
 * Both methods are created in setup (pretrain_create, beside the run's deq
 * method), so the unroll's depth buffers stay allocated for the whole run
 * and are in the memory peaks; the training loop only swaps rc->me
 * (pretrain_select), allocating nothing. With pretrain_steps = 0 every
 * function is a no-op and pretrain_json gives null.
 */
#ifndef DQ_BENCH_PRETRAIN_H
#define DQ_BENCH_PRETRAIN_H

#include <jansson.h>
#include <stddef.h>

#include "../config/config.h"
#include "run_ctx.h"
#include "step_log.h"

struct pretrain {
	int steps;	       /* pretrain_steps; 0 = off */
	int layers;	       /* pretrain_layers */
	struct method *unroll; /* pretrain_layers deep */
	struct method *deq;    /* the run's method */
	size_t depth_bytes;    /* what unroll allocated (MEM_DEPTH) */
};

/* Zeroes pt; with cfg->pretrain_steps > 0 creates the unroll method for
 * rc->m next to rc->me (the deq method; config_validate has checked the
 * keys). -1 with one line (out of device memory, naming pretrain_layers). */
int pretrain_create(struct pretrain *pt, struct run_ctx *rc,
		    const struct bench_config *cfg, char *err, size_t errlen);

/* Sets rc->me to the method of 1-based training step s: unroll for s <=
 * pretrain_steps, deq after. */
void pretrain_select(struct pretrain *pt, struct run_ctx *rc, int s);

/* After the training loop: rc->me is the deq method again (evaluation,
 * solver statistics), and the forward and backward residuals of log are
 * NAN for the pretraining steps, which had no solve. */
void pretrain_end(struct pretrain *pt, struct run_ctx *rc,
		  struct step_log *log);

/* The record's "pretrain" object (results/SCHEMA.md) from the run's
 * per-step log: the pretraining steps' timing (after cfg->warmup_steps
 * untimed steps), layer evaluations and last loss; ok_steps is the number
 * of completed steps. json_null() when off. New reference. */
json_t *pretrain_json(const struct pretrain *pt, const struct bench_config *cfg,
		      int ok_steps, const struct step_log *log);

/* Gives the deq method back to rc (run_ctx_destroy frees it), frees the
 * unroll method and zeroes pt. Safe on a zeroed pt. */
void pretrain_free(struct pretrain *pt, struct run_ctx *rc);

#endif
