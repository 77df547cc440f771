/* runner.h — one training run end to end: corpus (data.h: loaded or read
 * from its cache; vocabulary from the corpus unless synthetic), backend,
 * model, method and Adam state allocated up front, then `steps` timed
 * optimizer steps on batches of the DEQ / Transformer-XL ordered iterator,
 * then evaluation on valid and test, producing one record (record.h,
 * results/SCHEMA.md).
 *
 * Step: zero grads, load batch, inject, method forward (train) → z, head
 * forward → loss, head backward, method backward, inject backward, clip the
 * global grad norm to `clip`, Adam (β 0.9, 0.999, ε 1e-8, no weight decay)
 * with linear warmup over lr_warmup steps then cosine decay towards 0.
 * Forward time = up to the loss; backward time = the rest (optimizer
 * included). The first warmup_steps steps are excluded from timing stats.
 * method=deq with pretrain_steps P > 0: steps 1..P use an unroll method
 * pretrain_layers deep (created in setup beside the deq method), the rest
 * and evaluation the deq method; the record's "pretrain" object holds the
 * first phase's statistics, timing/evals/solver the deq phase's, and each
 * phase's first warmup_steps steps are untimed.
 * Perplexity = exp(mean per-token loss) over whole eval batches.
 * On the CPU with threads=1 two runs of one config give the same record
 * apart from times.
 *
 * Implementation: runner.c (setup, teardown), run_ctx.c (the corpus and
 * the context it builds on), train_step.c (one step and the timed loop),
 * step_log.c (per-step statistics), evaluate.c, run_record.c (the record),
 * pretrain.c, param_files.c (parameter and gradient files); run_state.h is
 * the state they share. impl=pytorch is not run here: the commands choose
 * between runner_run and peer_run (dispatch.h).
 */
#ifndef DQ_BENCH_RUNNER_H
#define DQ_BENCH_RUNNER_H

#include <jansson.h>

#include "../config/config.h"
#include "run_ctx.h"

/* Runs cfg and stores a new record in *record (always, errors included:
 * status "error" with the message). Returns the status. */
enum run_status runner_run(const struct bench_config *cfg,
			   const struct run_meta *meta, json_t **record);

/* deqbench eval: loads cfg->params into cfg's model and method (created
 * for inference only: method_config.inference), evaluates the valid and
 * test splits as a training run's evaluation does (evaluate.h) and stores
 * a record with "kind": "eval" in *record (results/SCHEMA.md): quality,
 * inference (timing, solver statistics, the allocator's peaks), method,
 * model, data. Returns the status; RUN_SETUP_FAILED for a missing or
 * mismatched parameter file or corpus (bad input). */
enum run_status runner_eval(const struct bench_config *cfg,
			    const struct run_meta *meta, json_t **record);

#endif
