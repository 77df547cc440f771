/* train_step.h — one training step (forward, loss, backward, gradient
 * clipping, Adam) and the timed loop of `steps` of them over a run's
 * state (run_state.h); the forward and backward halves are also what
 * evaluation and `deqbench grad` (param_files.c: train_step_grad_step)
 * run. Internal to the runner (docs/ARCHITECTURE.md §Data flow).
 */
#ifndef DQ_BENCH_TRAIN_STEP_H
#define DQ_BENCH_TRAIN_STEP_H

#include <stddef.h>
#include <stdint.h>

#include "run_state.h"

#include "step_pass.h"

/* The timed loop (runner.h): r->cfg->steps steps on r->train's batches,
 * progress on stderr, each step's statistics in r->log. Needs everything
 * runner.c's setup allocated; allocates nothing itself. Sets r->status
 * (RUN_OK, RUN_DIVERGED or RUN_ERROR, with r->err), r->steps_done,
 * r->ok_steps and r->t_train; rc.me is the deq method again afterwards
 * (pretrain_end). With eval_every = N, run_evaluate_curve (evaluate.h)
 * after steps N, 2N, ...: its wall time (r->curve_s) is left out of
 * r->t_train, and an evaluation that fails or is interrupted stops the
 * loop with its status. */
void train_loop(struct run *r);

#endif
