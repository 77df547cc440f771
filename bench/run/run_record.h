/* run_record.h — the record of one training run (results/SCHEMA.md),
 * filled from the run's state (run_state.h) section by section as the run
 * gets there, so a run that fails part way still gives a record of the
 * documented shape: the sections it did not reach stay null
 * (record_new). Internal to the runner (docs/ARCHITECTURE.md §Config and
 * records), apart from the three helpers at the end, which impl=pytorch
 * runs (peer.c) and a suite's crash records (cmd_suite.c) share.
 */
#ifndef DQ_BENCH_RUN_RECORD_H
#define DQ_BENCH_RUN_RECORD_H

#include <jansson.h>

#include "run_ctx.h"

struct eval_result;
struct model;
struct run;

/* Before setup: started_at, config, suite (r->meta in a suite), host and
 * build. */
void run_record_begin(struct run *r);

/* After the context exists: device. */
void run_record_device(struct run *r);

/* After the optimizer state and the memory prediction: method (the
 * method's resolved config), model and data. */
void run_record_setup(struct run *r);

/* After the timed loop, before evaluation (which would overwrite the
 * method's statistics and the memory peaks): timing (without eval_s),
 * memory, evals, solver, pretrain and, with cfg->trace, trace. The deq
 * phase only where the run pretrained. */
void run_record_train(struct run *r);

/* After evaluation: quality, and timing.eval_s. */
void run_record_quality(struct run *r, const struct eval_result *q);

/* The record's "inference" object after run_evaluate (results/SCHEMA.md)
 * over the valid batches evaluated (r->inf.n: all planned, or those before
 * an interruption or error); left null when none was. Memory figures only
 * with r->eval_only. */
void run_record_inference(struct run *r);

/* FLOPs counted in one training step of model m (timing.step_gflop × 1e9;
 * results/SCHEMA.md §timing), 2 per multiply-add, N = B·T positions:
 *   fwd_evals · F + vjp_evals · 2F + head + injection,
 *   F = model_block_flops(m), one block application's forward (each
 *     kind's count in its models/<kind>.c); a VJP counts 2F, the usual
 *     "backward is twice forward", whether or not it forms parameter
 *     gradients (the IFT solve's VJPs do not);
 *   head = 3 · 2·N·E·V: the logits GEMM (N,E)×(E,V) and its two backward
 *     GEMMs, dz = dlogits W and dW = dlogitsᵀ z (a chunked head's
 *     recomputed logits are not counted);
 *   injection = 3 · 2·N·E·U·k: u = x Winjᵀ (Winj (U,E), or a Conv1d
 *     weight (U,E,k), k = 2 for trellisnet, k = 1 otherwise), its dx and
 *     its dWinj.
 * Not counted (their time is in the step all the same): biases, norms,
 * activations, softmax and cross-entropy, embeddings, the solver's own
 * vector work, grad clipping and Adam. fwd_evals and vjp_evals are per
 * step (means, as evals.*_per_step). With microbatches = M, m is the
 * model of one micro-batch (N = B/M·T) and the step's count is M times
 * that of a micro-batch, fwd_evals / M and vjp_evals / M. */
double run_step_flops(const struct model *m, double fwd_evals,
		      double vjp_evals);

/* Last: status, message (empty when ok, else r->err) and finished_at. */
void run_record_end(struct run *r);

/* The record's status string of s: "ok", "diverged", "interrupted" or
 * "error". */
const char *run_record_status_name(enum run_status s);

/* rec[key] = the UTC time now, ISO 8601 to the second
 * ("2026-11-25T18:00:00Z"). */
void run_record_set_now(json_t *rec, const char *key);

/* The record's "suite" object of a suite run: {"name", "index", "combo",
 * "repeat"} from meta (meta->suite non-NULL), and "order", "order_seed"
 * and "shard" when meta->order is set. New reference. */
json_t *run_record_meta_json(const struct run_meta *meta);

#endif
