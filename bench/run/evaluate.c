/* evaluate.c — see evaluate.h. Evaluation comes after training (and, with
 * eval_every, between training steps) and is not in the training step
 * statistics; it allocates nothing on the device (the
 * batch buffer is the training loop's), and on the host only the per-batch
 * log r->inf. */
#include "evaluate.h"

#include <math.h>
#include <stdio.h>

#include "../../methods/method.h"
#include "../../models/model.h"
#include "../io/interrupt.h"
#include "run_record.h"
#include "step_pass.h"

/* Whole batches of B*T tokens among the first tokens of a split of the
 * batcher b. */
static size_t batches_of(const struct run *r, const struct batcher *b,
			 long tokens)
{
	long per = (long)r->B * r->T;
	size_t nb = (size_t)(tokens / per);
	return nb < batcher_n_batches(b) ? nb : batcher_n_batches(b);
}

/* Whole batches of an evaluation after training (eval_tokens). */
static size_t eval_batches(const struct run *r, const struct batcher *b)
{
	return batches_of(r, b, r->cfg->eval_tokens);
}

/* Batch k of an evaluation, as rc.micro micro-batches of B/M rows (the
 * training step's): each forward timed by the backend's timer marks 0,
 * 1 (the method's output z: the head starts) and 2, the times summed,
 * the mean of their losses (the batch's mean) into *l; with log, the
 * times (whole, up to z, the head's) and the method's statistics
 * (summed over the micro-batches) into entry k, and log->n = k + 1 (the
 * batches evaluated so far: an interrupted evaluation's figures cover
 * only those). 0, or -1 with r->err for bad token ids. */
static int eval_batch(struct run *r, struct step_log *log, int k, double *l)
{
	struct backend *be = r->rc.be;
	int M = r->rc.micro > 1 ? r->rc.micro : 1;
	double ms = 0, fwd = 0, head = 0, lj, sum = 0;
	for (int j = 0; j < M; j++) {
		be_timer_mark(be, 0);
		if (step_forward_marked(&r->rc, r->tok, j, 1, &lj, r->err,
					sizeof(r->err)) != 0)
			return -1;
		be_timer_mark(be, 2);
		step_eval_stats(&r->rc, j);
		sum += lj;
		if (log) {
			ms += be_timer_elapsed_ms(be, 0, 2);
			fwd += be_timer_elapsed_ms(be, 0, 1);
			head += be_timer_elapsed_ms(be, 1, 2);
		}
	}
	*l = M == 1 ? lj : sum / M;
	if (log) {
		log->ms[k] = ms;
		log->fwd_ms[k] = fwd;
		log->head_ms[k] = head;
		log->loss[k] = *l;
		step_log_method(log, k, method_get_stats(r->rc.me), &r->rc.cnt);
		log->n = k + 1;
	}
	return 0;
}

/* A non-finite loss of batch k of split: the parameters, or the logits
 * they give, overflowed float32 (finite parameters of 3e38 do); -1 with
 * r->err saying so, else 0. */
static int loss_finite(struct run *r, int split, size_t k, double l)
{
	if (isfinite(l))
		return 0;
	snprintf(r->err, sizeof(r->err),
		 "the evaluation loss became %g at %s batch %zu: the "
		 "parameters%s%.300s%s or the logits they give overflow "
		 "float32; evaluate parameters of a run that did not diverge",
		 l, split == CORPUS_VALID ? "valid" : "test", k + 1,
		 r->cfg->params[0] ? " (params=" : "", r->cfg->params,
		 r->cfg->params[0] ? ")" : "");
	return -1;
}

/* Mean per-token loss of nb batches of split (each weighs by its B*T
 * target positions) into *mean_loss (NAN when none) and the tokens
 * evaluated into *n_tokens; per-batch figures into log when not NULL. 0,
 * or -1 with r->err for bad token ids. */
static int evaluate_split(struct run *r, int split, struct batcher *b,
			  size_t nb, struct step_log *log, double *mean_loss,
			  long *n_tokens)
{
	long per = (long)r->B * r->T;
	double sum = 0;

	*n_tokens = 0;
	*mean_loss = NAN;
	for (size_t k = 0; k < nb; k++) {
		double l;
		batcher_get(b, k, r->tok);
		if (eval_batch(r, log, (int)k, &l) != 0 ||
		    loss_finite(r, split, k, l) != 0)
			return -1;
		/* as the DEQ code at validation: ρ(J_f(z*)) on the first
		 * valid batch (NAN unless deq with spectral_radius_iters) */
		if (k == 0 && split == CORPUS_VALID && !r->curve_now)
			r->rc.spectral_radius =
			    method_spectral_radius(r->rc.me);
		sum += l * per;
		*n_tokens += per;
		if (r->eval_prog)
			progress_update(r->eval_prog, ++r->eval_done, l, NAN);
		if (interrupt_signal()) {
			r->status = RUN_INTERRUPTED;
			snprintf(r->err, sizeof(r->err),
				 "interrupted by %s during evaluation",
				 interrupt_name());
			return -1;
		}
	}
	if (*n_tokens > 0)
		*mean_loss = sum / *n_tokens;
	return 0;
}

/* Batcher of split, or 0 when the split is too short for one batch. */
static int split_batcher(struct run *r, int split, struct batcher *b)
{
	return batcher_init(b, r->corpus.ids[split], r->corpus.n[split], r->B,
			    r->T) == 0;
}

/* The valid split's evaluation: per-batch figures into r->inf (r->inf.n
 * the batches evaluated), the allocator's figures since its start into
 * r->inf_mem, even when it stopped early. 0, or -1 with r->err (and
 * r->status RUN_INTERRUPTED when a signal stopped it). */
static int evaluate_valid(struct run *r, struct eval_result *q)
{
	struct backend *be = r->rc.be;
	struct batcher b;
	size_t nb = 0;

	if (split_batcher(r, CORPUS_VALID, &b))
		nb = eval_batches(r, &b);
	if (step_log_alloc(&r->inf, nb ? (int)nb : 1) != 0) {
		snprintf(r->err, sizeof(r->err),
			 "out of host memory for the evaluation log");
		return -1;
	}
	r->inf.n = 0; /* eval_batch counts the batches evaluated */
	be_sync(be);
	backend_mem_reset_peak(be);
	int rc = evaluate_split(r, CORPUS_VALID, &b, nb, &r->inf,
				&q->valid_loss, &q->valid_tokens);
	/* the peaks of the batches evaluated, an interrupted evaluation's
	 * too */
	be_sync(be);
	r->inf_mem = be->mem;
	return rc;
}

/* deqbench eval: a progress bar over the valid and test batches, labelled
 * like a training run's ("[index] eval METHOD" in a suite). */
static void eval_progress_begin(struct run *r, struct progress *prog)
{
	struct batcher b;
	size_t n = 0;
	char label[96];
	for (int s = CORPUS_VALID; s <= CORPUS_TEST; s++)
		if (split_batcher(r, s, &b))
			n += eval_batches(r, &b);
	if (r->meta && r->meta->suite)
		snprintf(label, sizeof(label), "[%d] eval %s", r->meta->index,
			 method_kind_name(r->cfg->method.method));
	else
		snprintf(label, sizeof(label), "eval %s",
			 method_kind_name(r->cfg->method.method));
	progress_begin(prog, (int)n, label, r->meta && r->meta->quiet);
	r->eval_prog = prog;
}

void run_evaluate(struct run *r, struct eval_result *q)
{
	double t0 = run_wall_s();
	struct batcher b;
	struct progress prog;

	q->valid_loss = q->test_loss = NAN;
	q->valid_tokens = q->test_tokens = 0;
	if (r->eval_only && r->status == RUN_OK && r->cfg->eval_tokens > 0)
		eval_progress_begin(r, &prog);
	if (r->status == RUN_OK && r->cfg->eval_tokens > 0) {
		if (evaluate_valid(r, q) != 0 ||
		    (split_batcher(r, CORPUS_TEST, &b) &&
		     evaluate_split(r, CORPUS_TEST, &b, eval_batches(r, &b),
				    NULL, &q->test_loss, &q->test_tokens) != 0))
			r->status = r->status == RUN_INTERRUPTED
					? RUN_INTERRUPTED
					: RUN_ERROR;
	}
	if (r->eval_prog)
		progress_end(&prog, run_record_status_name(r->status));
	r->eval_prog = NULL;
	r->t_eval = run_wall_s() - t0;
}

void run_evaluate_curve(struct run *r, int s, double train_s)
{
	double t0 = run_wall_s();
	struct batcher b;
	struct curve_point *p = &r->curve[r->curve_n];
	/* the last training step's, which the record reads after training */
	struct method_stats st = *method_get_stats(r->rc.me);

	p->step = s;
	p->train_s = train_s;
	p->valid_loss = NAN;
	p->tokens = 0;
	r->curve_now = 1;
	/* curve_tokens: a shorter curve than the final evaluation keeps its
	 * cost small when eval_tokens covers the whole split */
	long tokens = r->cfg->curve_tokens > 0 ? r->cfg->curve_tokens
					       : r->cfg->eval_tokens;
	if (split_batcher(r, CORPUS_VALID, &b) &&
	    evaluate_split(r, CORPUS_VALID, &b, batches_of(r, &b, tokens), NULL,
			   &p->valid_loss, &p->tokens) != 0 &&
	    r->status != RUN_INTERRUPTED)
		r->status = RUN_ERROR;
	r->curve_now = 0;
	method_restore_stats(r->rc.me, &st);
	if (r->status == RUN_OK)
		r->curve_n++;
	r->curve_s += run_wall_s() - t0;
}
