/* evaluate.h — perplexity of a trained model on its valid and test splits,
 * inference timing and solver statistics per valid batch, and the spectral
 * radius ρ(J_f(z*)) at the first valid batch. Used after training
 * (runner_run) and by deqbench eval (runner_eval). Internal to the runner
 * (docs/ARCHITECTURE.md §Data flow).
 */
#ifndef DQ_BENCH_EVALUATE_H
#define DQ_BENCH_EVALUATE_H

#include "run_state.h"

/* When the run is ok and eval_tokens > 0: evaluates valid, then test (the
 * first eval_tokens tokens of each, rounded down to whole batches of B*T,
 * read as the training batcher would; a split too short for one batch of B
 * streams gives no tokens), the method in inference mode (train = 0).
 * Each valid batch's forward (batch upload to loss, the backend's timer:
 * CUDA events on the GPU) and the method's statistics go to r->inf (one
 * entry per batch evaluated, r->inf.n of them: fewer than planned when the
 * evaluation stopped early, 0 when no valid batch was evaluated; the
 * caller leaves the first eval_warmup out of timing figures); the
 * allocator's figures of the valid evaluation (peaks since its start, over
 * the batches evaluated) to r->inf_mem. The spectral radius of the first
 * valid batch goes to r->rc.spectral_radius (NAN unless deq with
 * spectral_radius_iters). Always sets r->t_eval (wall seconds). Bad token
 * ids, a non-finite loss (parameters or logits that overflow float32), out
 * of host memory for r->inf: r->status = RUN_ERROR, r->err says why.
 * SIGINT/SIGTERM (interrupt.h): stops after the current batch with
 * r->status = RUN_INTERRUPTED. */
void run_evaluate(struct run *r, struct eval_result *q);

/* eval_every: after training step s, whose loop has run train_s wall
 * seconds (evaluations left out), the valid split's mean loss over
 * curve_tokens (eval_tokens when 0) as run_evaluate computes it (the method in inference mode,
 * train = 0; no spectral radius, no per-batch log, no allocator reset)
 * appended to r->curve, its wall seconds added to r->curve_s. It changes
 * nothing a later training step reads: the method's statistics and the
 * step counts start afresh at every forward, and the batch buffer is
 * refilled. Errors as run_evaluate's (r->status and r->err). */
void run_evaluate_curve(struct run *r, int s, double train_s);

#endif
