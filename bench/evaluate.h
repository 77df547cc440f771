/* evaluate.h — perplexity data of a trained run on its valid and test
 * splits, and the spectral radius ρ(J_f(z*)) at the first valid batch.
 * Internal to the runner (docs/ARCHITECTURE.md §Data flow).
 */
#ifndef DQ_BENCH_EVALUATE_H
#define DQ_BENCH_EVALUATE_H

#include "run_state.h"

struct eval_result {
	double valid_loss, test_loss;	/* mean per-token loss, nats; NAN when
					 no tokens were evaluated */
	long valid_tokens, test_tokens; /* tokens evaluated */
};

/* When the run ended ok and eval_tokens > 0: evaluates valid, then test
 * (the first eval_tokens tokens of each, rounded down to whole batches of
 * B*T, read as the training batcher would; a split too short for one batch
 * of B streams gives no tokens), the method in inference mode; the
 * spectral radius of the first valid batch goes to r->rc.spectral_radius
 * (NAN unless deq with spectral_radius_iters). Always sets r->t_eval (wall
 * seconds). Bad token ids: r->status = RUN_ERROR with r->err. */
void run_evaluate(struct run *r, struct eval_result *q);

#endif
