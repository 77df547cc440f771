/* run_state.h — the state of one training run (runner_run), shared by the
 * runner's parts: runner.c sets it up and tears it down, train_step.c runs
 * the timed loop on it, evaluate.c evaluates its model and run_record.c
 * turns it into the record. Internal to the runner (docs/ARCHITECTURE.md
 * §Data flow).
 */
#ifndef DQ_BENCH_RUN_STATE_H
#define DQ_BENCH_RUN_STATE_H

#include <jansson.h>
#include <stdint.h>
#include <time.h>

#include "../config/config.h"
#include "../data/data.h"
#include "pretrain.h"
#include "../io/progress.h"
#include "run_ctx.h"
#include "step_graphs.h"
#include "step_log.h"

/* Pool figures over the measured steps (backends with pool_stats). */
struct pool_track {
	int on;
	size_t used_high, reserved_high, free_bytes, total_bytes;
};

struct run {
	const struct bench_config *cfg;
	const struct run_meta *meta; /* NULL for `deqbench run` */
	json_t *rec;		     /* the record being built */
	enum run_status status;
	char err[1024]; /* why, when status is not RUN_OK */

	struct corpus corpus;
	int have_corpus;
	struct batcher train; /* the train split's ordered iterator */
	int V, B, T;	      /* vocabulary, batch, sequence length */
	struct run_ctx rc;
	struct pretrain pt;
	void *adam_m, *adam_v; /* (n_param_elems) Adam moments, MEM_OPTIMIZER */
	/* the step's scalars, and with cuda_graphs its head and optimizer
	 * recorded (step_graphs.h) */
	struct step_graphs sg;
	int32_t *tok; /* (B, T+1) host batch */
	struct step_log log;
	/* the evaluation (evaluate.h): per valid batch, and the allocator's
	 * figures over the valid evaluation */
	struct step_log inf;
	struct backend_mem_stats inf_mem;
	int eval_only; /* deqbench eval: no training */
	/* deqbench eval's progress over valid and test batches (NULL in a
	 * training run, whose evaluation is short beside its training) */
	struct progress *eval_prog;
	int eval_done;
	struct pool_track pool;
	/* eval_every: the valid evaluations during training (evaluate.h:
	 * run_evaluate_curve), curve_n of at most steps / eval_every points,
	 * allocated in the setup; curve_s: their wall seconds, left out of
	 * t_train; curve_now: one is running (no spectral radius, which
	 * would draw from the method's random stream) */
	struct curve_point *curve;
	int curve_n, curve_now;
	double curve_s;

	/* method_memory's prediction of the deq method's buffers (bytes) */
	int have_pred;
	size_t pred_depth, pred_solver, pred_host, pred_managed;
	struct backend_mem_stats setup_mem; /* allocator after setup */

	/* steps_done: steps whose loss is known; ok_steps: steps completed
	 * with every statistic (a diverged or failed step is not) */
	int steps_done, ok_steps;
	double t_setup, t_train, t_eval; /* wall seconds */
};

/* What the evaluation (evaluate.h: run_evaluate) gives the record
 * (run_record.h: run_record_quality). */
struct eval_result {
	double valid_loss, test_loss;	/* mean per-token loss, nats; NAN when
					 no tokens were evaluated */
	long valid_tokens, test_tokens; /* tokens evaluated */
};

/* One point of quality.valid_curve: after training step `step`, the mean
 * valid loss over `tokens` tokens, and the training loop's wall seconds up
 * to the end of that step, the evaluations before it left out. */
struct curve_point {
	int step;
	double valid_loss, train_s;
	long tokens;
};

/* Monotonic wall clock, seconds. */
static inline double run_wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#endif
