/* step_pass.h — a training step's two halves (forward to the loss,
 * backward to the gradient) and an evaluation batch's forward, with
 * micro-batches; what the timed loop (train_step.h), evaluation
 * (evaluate.c) and `deqbench grad` (param_files.c) run. Internal to the
 * runner (docs/ARCHITECTURE.md §Data flow). */
#ifndef DQ_BENCH_STEP_PASS_H
#define DQ_BENCH_STEP_PASS_H

#include <stddef.h>
#include <stdint.h>

#include "run_state.h"

/* step_forward up to the method's output rc->z (the head not yet: the
 * graphed step records the head itself, train_step.c); fresh: the step's
 * (batch's) first micro-batch, which starts its counts and, training,
 * zeroes the grads the micro-batches accumulate into. -1 with one line for
 * bad token ids. */
int step_forward_to_z(struct run_ctx *rc, const int32_t *tok, int train,
		      int fresh, char *err, size_t errlen);

/* Forward of host tokens tok (B, T+1) int32 up to the loss: with train,
 * zeroes the grads first and keeps what the backward needs; *loss is the
 * mean over the B*T positions, nats. -1 with one line for bad token ids.
 * Starts the step's (or batch's) counts rc->cnt afresh and counts its head
 * forward; step_backward counts the head backward. */
int step_forward(struct run_ctx *rc, const int32_t *tok, int train,
		 double *loss, char *err, size_t errlen);

/* step_forward in inference mode (train = 0) of micro-batch j (rows
 * j·B/M .. (j+1)·B/M of the host batch tok (B, T+1); j = 0 the batch's
 * first, which starts its counts) with the backend's timer marked in slot
 * between the method's output z and the head, so that an evaluation times
 * the head (its logits and loss) apart from the injection and the
 * method's forward (evaluate.c); *loss is the micro-batch's mean. Call
 * step_eval_stats(rc, j) after each. */
int step_forward_marked(struct run_ctx *rc, const int32_t *tok, int j, int slot,
			double *loss, char *err, size_t errlen);

/* After micro-batch j of an evaluation batch: its method statistics
 * gathered, and after the last put back as the whole batch's (nothing
 * at rc->micro = 1). */
void step_eval_stats(struct run_ctx *rc, int j);

/* Adds s, one micro-batch's method statistics, into a, the step's so far:
 * counts and work summed; a solve's iterations and residuals the largest
 * any micro-batch's solve had (as the samples of one per-sample solve),
 * converged when every one did, its samples and solver work summed;
 * jac_applied the micro-batches that drew the regulariser and jac_loss
 * their mean; the residual traces the last micro-batch's. */
void step_stats_add(struct method_stats *a, const struct method_stats *s);

/* The training step's gradient on host tokens (B, T+1) int32 in two
 * halves around the loss (train_step.c times and checks the loss between
 * them). With rc->micro = M micro-batches of B/M rows each: the forward
 * half zeroes the grads and runs every micro-batch's forward and all but
 * the last one's backward, *loss the mean of their M losses (= the
 * batch's mean: each has B/M·T positions); the backward half runs the
 * last backward, scales the accumulated gradient by 1/M and leaves the
 * step's method statistics, summed over the micro-batches
 * (step_stats_add), as the method's. At M = 1 they are step_forward
 * (train) and step_backward, bit for bit. -1 with one line for bad token
 * ids. */
int step_grad_forward(struct run_ctx *rc, const int32_t *tok, double *loss,
		      char *err, size_t errlen);
void step_grad_backward(struct run_ctx *rc);

/* Backward of the last training forward: dL/dθ added into m->grad_buf. */
void step_backward(struct run_ctx *rc);

/* One forward + backward on host tokens (B, T+1) int32 (step_grad_forward,
 * step_grad_backward: rc->micro micro-batches): zeroes the grads, then
 * leaves dL/dθ of the batch's mean loss in m->grad_buf. Returns the loss (nats) in *loss; -1
 * with err for bad token ids. The same path every training step takes;
 * `deqbench grad` runs it (param_files.c). */
int train_step_grad_step(struct run_ctx *rc, const int32_t *tokens_host,
			 double *loss, char *err, size_t errlen);

#endif
