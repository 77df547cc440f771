/* step_pass.c — see step_pass.h: a step's halves. Forward: zero the
 * grads, load the batch, inject, method forward → z, head forward → loss;
 * backward: head backward, method backward, inject backward; with
 * micro-batches, each micro-batch's halves and their statistics gathered.
 * Nothing here allocates: the buffers are the setup's (runner.c). */
#include "step_pass.h"

#include <math.h>
#include <string.h>

#include "../../methods/method.h"
#include "../../models/model.h"
/* Host rows (B/micro, T+1) of micro-batch j of the host batch tok
 * (B, T+1): the model's batch is one micro-batch. */
static const int32_t *micro_rows(const struct run_ctx *rc, const int32_t *tok,
				 int j)
{
	return tok + (size_t)j * rc->m->B * ((size_t)rc->m->T + 1);
}

int step_forward_to_z(struct run_ctx *rc, const int32_t *tok, int train,
		      int fresh, char *err, size_t errlen)
{
	struct model *m = rc->m;
	if (fresh)
		memset(&rc->cnt, 0, sizeof(rc->cnt));
	if (train && fresh)
		model_zero_grads(m);
	else if (train) /* a later micro-batch: dL/du is its own */
		be_fill(m->be, m->gu, 0.0, m->n_u);
	if (model_set_batch(m, tok, err, errlen) != 0)
		return -1;
	model_inject_forward(m);
	method_forward(rc->me, m->u, rc->z, train);
	return 0;
}

int step_forward(struct run_ctx *rc, const int32_t *tok, int train,
		 double *loss, char *err, size_t errlen)
{
	struct model *m = rc->m;
	if (step_forward_to_z(rc, tok, train, 1, err, errlen) != 0)
		return -1;
	/* training: a chunked head does its backward with its forward */
	*loss = train ? model_head_forward_train(m, rc->z)
		      : model_head_forward(m, rc->z);
	rc->cnt.head_fwd++;
	return 0;
}

int step_forward_marked(struct run_ctx *rc, const int32_t *tok, int j, int slot,
			double *loss, char *err, size_t errlen)
{
	if (step_forward_to_z(rc, micro_rows(rc, tok, j), 0, j == 0, err,
			      errlen) != 0)
		return -1;
	be_timer_mark(rc->be, slot);
	*loss = model_head_forward(rc->m, rc->z);
	rc->cnt.head_fwd++;
	return 0;
}

void step_backward(struct run_ctx *rc)
{
	struct model *m = rc->m;
	model_head_backward(m);
	rc->cnt.head_bwd++;
	method_backward(rc->me, m->gz, m->gu);
	model_inject_backward(m);
}

/* The solves of micro-batches as one step's: the most iterations and the
 * largest residuals any took (as the samples of one per-sample solve),
 * converged when all did, their samples and solver work summed. */
static void solve_add(struct solve_stats *a, const struct solve_stats *s)
{
	a->iters = s->iters > a->iters ? s->iters : a->iters;
	a->evals = s->evals > a->evals ? s->evals : a->evals;
	a->residual = fmax(a->residual, s->residual);
	a->abs_residual = fmax(a->abs_residual, s->abs_residual);
	a->rel_residual = fmax(a->rel_residual, s->rel_residual);
	a->converged = a->converged && s->converged;
	a->nonfinite |= s->nonfinite;
	a->samples += s->samples;
	a->samples_converged += s->samples_converged;
	a->protect_break |= s->protect_break;
	a->stall_break |= s->stall_break;
	a->updates += s->updates;
	a->history_sum += s->history_sum;
}

void step_stats_add(struct method_stats *a, const struct method_stats *s)
{
	struct method_work *w = &a->work;
	const struct method_work *v = &s->work;
	double jac =
	    a->jac_loss * a->jac_applied + s->jac_loss * s->jac_applied;
	a->forward_evals += s->forward_evals;
	a->vjp_evals += s->vjp_evals;
	w->block_fwd_taped += v->block_fwd_taped;
	w->block_fwd += v->block_fwd;
	w->block_fwd_recompute += v->block_fwd_recompute;
	w->block_vjp += v->block_vjp;
	w->block_vjp_input += v->block_vjp_input;
	w->solver_update += v->solver_update;
	w->solver_history_sum += v->solver_history_sum;
	solve_add(&a->fwd, &s->fwd);
	solve_add(&a->bwd, &s->bwd);
	a->host_reads += s->host_reads;
	a->offload_bytes += s->offload_bytes;
	/* jac_applied counts the micro-batches that drew it; jac_loss their
	 * mean */
	a->jac_applied += s->jac_applied;
	a->jac_loss = a->jac_applied ? jac / a->jac_applied : 0;
	a->fwd_trace_len = s->fwd_trace_len; /* the last micro-batch's */
	a->bwd_trace_len = s->bwd_trace_len;
	memcpy(a->fwd_trace, s->fwd_trace, sizeof(a->fwd_trace));
	memcpy(a->bwd_trace, s->bwd_trace, sizeof(a->bwd_trace));
}

/* After micro-batch j's backward (or forward, evaluating): its method
 * statistics gathered into rc->micro_st; after the last, those of every
 * micro-batch put back as the method's (method_restore_stats). Nothing at
 * micro = 1. */
static void micro_stats(struct run_ctx *rc, int j)
{
	const struct method_stats *st = method_get_stats(rc->me);
	if (rc->micro <= 1)
		return;
	if (j == 0)
		rc->micro_st = *st;
	else
		step_stats_add(&rc->micro_st, st);
	if (j == rc->micro - 1)
		method_restore_stats(rc->me, &rc->micro_st);
}

void step_eval_stats(struct run_ctx *rc, int j)
{
	micro_stats(rc, j);
}

/* Forward of micro-batch j to its loss, training. */
static int micro_forward(struct run_ctx *rc, const int32_t *tok, int j,
			 double *loss, char *err, size_t errlen)
{
	if (step_forward_to_z(rc, micro_rows(rc, tok, j), 1, j == 0, err,
			      errlen) != 0)
		return -1;
	*loss = model_head_forward_train(rc->m, rc->z);
	rc->cnt.head_fwd++;
	return 0;
}

int step_grad_forward(struct run_ctx *rc, const int32_t *tok, double *loss,
		      char *err, size_t errlen)
{
	int M = rc->micro > 1 ? rc->micro : 1;
	double l, sum = 0;
	for (int j = 0; j < M; j++) {
		if (micro_forward(rc, tok, j, &l, err, errlen) != 0)
			return -1;
		sum += l;
		if (j < M - 1) {
			step_backward(rc);
			micro_stats(rc, j);
		}
	}
	/* every micro-batch has B/M·T positions: the batch's mean */
	*loss = M == 1 ? l : sum / M;
	return 0;
}

void step_grad_backward(struct run_ctx *rc)
{
	struct model *m = rc->m;
	int M = rc->micro > 1 ? rc->micro : 1;
	step_backward(rc);
	if (M == 1)
		return;
	micro_stats(rc, M - 1);
	/* each micro-batch's head took the mean over its own B/M·T
	 * positions: the sum of M such gradients over M is the batch's */
	be_scale(rc->be, m->grad_buf, 1.0 / M, m->n_param_elems);
}

int train_step_grad_step(struct run_ctx *rc, const int32_t *tokens_host,
			 double *loss, char *err, size_t errlen)
{
	if (step_grad_forward(rc, tokens_host, loss, err, errlen) != 0)
		return -1;
	step_grad_backward(rc);
	be_sync(rc->be);
	return 0;
}
