/* evaluate.c — see evaluate.h. Evaluation comes after training and is not
 * in the step statistics; it allocates nothing on the device (the batch
 * buffer is the training loop's). */
#include "evaluate.h"

#include <math.h>

#include "../methods/method.h"
#include "../models/model.h"
#include "train_step.h"

/* Mean per-token loss of the first max_tokens tokens of split (whole
 * batches; each weighs by its B*T target positions) into *mean_loss (NAN
 * when none) and the tokens evaluated into *n_tokens. tok: (B, T+1) host
 * buffer. 0, or -1 with err for bad token ids. */
static int evaluate_split(struct run_ctx *rc, const struct corpus *c, int split,
			  long max_tokens, int32_t *tok, double *mean_loss,
			  long *n_tokens, char *err, size_t errlen)
{
	struct batcher b;
	long per = (long)rc->m->B * rc->m->T;
	size_t nb;
	double sum = 0;

	*n_tokens = 0;
	*mean_loss = NAN;
	if (max_tokens <= 0 || batcher_init(&b, c->ids[split], c->n[split],
					    rc->m->B, rc->m->T) != 0)
		return 0;
	nb = (size_t)(max_tokens / per);
	if (nb > batcher_n_batches(&b))
		nb = batcher_n_batches(&b);
	for (size_t k = 0; k < nb; k++) {
		double l;
		batcher_get(&b, k, tok);
		if (step_forward(rc, tok, 0, &l, err, errlen) != 0)
			return -1;
		/* as the DEQ code at validation: ρ(J_f(z*)) on the first
		 * valid batch (NAN unless deq with spectral_radius_iters) */
		if (k == 0 && split == CORPUS_VALID)
			rc->spectral_radius = method_spectral_radius(rc->me);
		sum += l * per;
		*n_tokens += per;
	}
	if (*n_tokens > 0)
		*mean_loss = sum / *n_tokens;
	return 0;
}

void run_evaluate(struct run *r, struct eval_result *q)
{
	long max_tokens = r->cfg->eval_tokens;
	double t0 = run_wall_s();

	q->valid_loss = q->test_loss = NAN;
	q->valid_tokens = q->test_tokens = 0;
	if (r->status == RUN_OK && max_tokens > 0) {
		if (evaluate_split(&r->rc, &r->corpus, CORPUS_VALID, max_tokens,
				   r->tok, &q->valid_loss, &q->valid_tokens,
				   r->err, sizeof(r->err)) != 0 ||
		    evaluate_split(&r->rc, &r->corpus, CORPUS_TEST, max_tokens,
				   r->tok, &q->test_loss, &q->test_tokens,
				   r->err, sizeof(r->err)) != 0)
			r->status = RUN_ERROR;
	}
	r->t_eval = run_wall_s() - t0;
}
