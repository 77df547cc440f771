/* train_step.c — see train_step.h: one training step and the timed loop.
 * Step: zero grads, load batch, inject, method forward (train) → z, head
 * forward → loss, head backward, method backward, inject backward, clip
 * the global gradient norm to `clip`, Adam. Nothing here allocates: the
 * buffers are the setup's (runner.c), the statistics go to the step log
 * allocated with them. */
#include "train_step.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../methods/method.h"
#include "../../models/model.h"
#include "../io/interrupt.h"
#include "../io/progress.h"
#include "evaluate.h"
#include "step_pass.h"
#include "run_record.h"

/* Adam hyper-parameters (Kingma & Ba 2015 defaults, as the DEQ code). */
#define ADAM_BETA1 0.9
#define ADAM_BETA2 0.999
#define ADAM_EPS   1e-8

/* Learning rate of 1-based step: linear warmup lr*step/lr_warmup for the
 * first lr_warmup steps, then cosine decay lr*(1+cos(pi*p))/2 with p going
 * from 0 (first step after warmup) towards 1 (p = 1 would be the step after
 * the last), as the DEQ / Transformer-XL training scripts do. */
static double lr_at(const struct bench_config *c, int step)
{
	int w = c->lr_warmup;
	if (w > 0 && step <= w)
		return c->lr * step / w;
	if (c->steps <= w)
		return c->lr;
	double p = (double)(step - 1 - w) / (c->steps - w);
	return c->lr * 0.5 * (1 + cos(M_PI * p));
}

/* The fix a divergence at step s suggests into buf: lr_fix after an
 * update; at step 1, before any, lr plays no part: the parameters (of
 * params=, or the initial ones), or the values they give (gives: "logits",
 * "gradients"), overflowed float32 (overflow) or are too large. */
static void diverge_hint(const struct run *r, int s, const char *lr_fix,
			 const char *gives, int overflow, char *buf, size_t n)
{
	const char *p = r->cfg->params;
	const char *what = overflow ? "overflow float32" : "are too large";
	if (s > 1)
		snprintf(buf, n, "%s", lr_fix);
	else if (p[0])
		snprintf(buf, n,
			 "before any update, so lr plays no part: the "
			 "parameters of params=%.300s or the %s they give %s; "
			 "use the parameters of a run that did not diverge",
			 p, gives, what);
	else
		snprintf(buf, n,
			 "before any update, so lr plays no part: the initial "
			 "parameters or the %s they give %s; lower init_std or "
			 "embed_std",
			 gives, what);
}

/* Whether the loss of step s has diverged (run_ctx.h: not finite, or above
 * RUN_DIVERGE_FACTOR · ln V nats); if so r->err says so. */
static int loss_diverged(struct run *r, double loss, int s)
{
	double limit = RUN_DIVERGE_FACTOR * log((double)r->V);
	char hint[512];
	if (isfinite(loss) && loss <= limit)
		return 0;
	diverge_hint(r, s, "lower lr or set clip", "logits", !isfinite(loss),
		     hint, sizeof(hint));
	snprintf(r->err, sizeof(r->err),
		 "loss became %g at step %d%s%.4g nats (%d ln V, V = %d); %s",
		 loss, s, isfinite(loss) ? ", above " : "; the limit is ",
		 limit, RUN_DIVERGE_FACTOR, r->V, hint);
	return 1;
}

/* The optimizer of step s at learning rate lr (step_graphs.h). */
static struct step_opt step_opt_of(const struct run *r, int s, double lr)
{
	struct step_opt o = {.lr = lr,
			     .clip = r->cfg->clip,
			     .beta1 = ADAM_BETA1,
			     .beta2 = ADAM_BETA2,
			     .eps = ADAM_EPS,
			     .wd = 0.0,
			     .t = s};
	return o;
}

/* The forward, backward and optimizer of step s at learning rate lr
 * (step_graphs.h: one path with and without graphs): *loss and *gn (the
 * gradient's norm before clipping) come back after the update. A
 * one-pass step keeps its loss on the device until then; micro-batches or
 * a chunked head compute it on the host (step_pass.h). Timer mark 1 falls
 * after the head. 0, or -1 with r->err (bad token ids). */
static int step_all(struct run *r, int s, double lr, double *loss, double *gn)
{
	struct run_ctx *rc = &r->rc;
	struct model *m = rc->m;
	struct step_opt o = step_opt_of(r, s, lr);
	int one = r->sg.one_pass;
	if (one) {
		if (step_forward_to_z(rc, r->tok, 1, 1, r->err,
				      sizeof(r->err)) != 0)
			return -1;
		step_graphs_head(&r->sg, m, rc->z);
		rc->cnt.head_fwd++;
		rc->cnt.head_bwd++;
	} else if (step_grad_forward(rc, r->tok, loss, r->err,
				     sizeof(r->err))) {
		return -1;
	}
	be_timer_mark(rc->be, 1);
	if (one)
		method_backward(rc->me, m->gz, m->gu);
	else
		step_grad_backward(rc);
	step_graphs_opt(&r->sg, m, r->adam_m, r->adam_v, &o, one,
			one ? loss : NULL, gn);
	rc->cnt.optimizer_step++;
	return 0;
}

/* Raises the pool's high-water marks by this step's. */
static void pool_update(struct run *r)
{
	struct backend_pool_stats ps;
	struct pool_track *p = &r->pool;
	memset(&ps, 0, sizeof(ps));
	be_pool_stats(r->rc.be, &ps);
	if (ps.used_high_bytes > p->used_high)
		p->used_high = ps.used_high_bytes;
	if (ps.reserved_high_bytes > p->reserved_high)
		p->reserved_high = ps.reserved_high_bytes;
	p->free_bytes = ps.free_bytes;
	p->total_bytes = ps.total_bytes;
}

/* Training step s (1-based) on the batch in r->tok, timed by the backend's
 * timer marks 0 (start), 1 (loss) and 2 (after Adam). Returns RUN_OK,
 * RUN_DIVERGED or RUN_ERROR (r->err says why). */
static enum run_status train_step(struct run *r, int s, int measured)
{
	const struct backend *be = r->rc.be;
	struct step_log *log = &r->log;
	double loss, gn, lr = lr_at(r->cfg, s);
	int i = s - 1;

	be_timer_mark(be, 0);
	if (step_all(r, s, lr, &loss, &gn) != 0)
		return RUN_ERROR;
	log->loss[i] = loss;
	r->steps_done = s;
	/* a diverged step's norm and times stay out of the log */
	if (loss_diverged(r, loss, s))
		return RUN_DIVERGED;
	be_timer_mark(be, 2);
	log->fwd_ms[i] = be_timer_elapsed_ms(be, 0, 1);
	log->bwd_ms[i] = be_timer_elapsed_ms(be, 1, 2);
	log->ms[i] = log->fwd_ms[i] + log->bwd_ms[i];
	log->gnorm[i] = gn;
	log->lr[i] = lr;
	step_log_method(log, i, method_get_stats(r->rc.me), &r->rc.cnt);
	if (log->moved[i] > 0) {
		struct backend_copy_stats cs;
		be_copy_stats(r->rc.be, &cs);
		log->copy_ms[i] = cs.copy_ms;
		log->stall_ms[i] = cs.stall_ms;
	}
	if (r->pool.on && measured)
		pool_update(r);
	if (!isfinite(gn)) {
		char hint[512];
		diverge_hint(r, s, "lower lr or raise clip", "gradients", 1,
			     hint, sizeof(hint));
		snprintf(r->err, sizeof(r->err),
			 "gradient norm became %g at step %d; %s", gn, s, hint);
		return RUN_DIVERGED;
	}
	return RUN_OK;
}

/* After step s completed: the run stops here as interrupted (its steps so
 * far count; no evaluation follows). */
static void interrupted(struct run *r, int s)
{
	r->status = RUN_INTERRUPTED;
	snprintf(r->err, sizeof(r->err),
		 "interrupted by %s after step %d of %d", interrupt_name(), s,
		 r->cfg->steps);
}

/* "[index] method" in a suite, "method" alone otherwise. */
static void progress_start(const struct run *r, struct progress *prog)
{
	const char *name = method_kind_name(r->cfg->method.method);
	char label[96];
	if (r->meta && r->meta->suite)
		snprintf(label, sizeof(label), "[%d] %s", r->meta->index, name);
	else
		snprintf(label, sizeof(label), "%s", name);
	progress_begin(prog, r->cfg->steps, label, r->meta && r->meta->quiet);
}

void train_loop(struct run *r)
{
	const struct bench_config *cfg = r->cfg;
	struct progress prog;
	double t0, tms = 0; /* tms: device ms of the measured steps */

	progress_start(r, &prog);
	r->status = RUN_OK;
	t0 = run_wall_s();
	for (int s = 1; s <= cfg->steps; s++) {
		int measured = s > cfg->warmup_steps;
		batcher_next(&r->train, r->tok);
		pretrain_select(&r->pt, &r->rc, s);
		if (r->pool.on && measured)
			be_pool_reset_peak(r->rc.be);
		r->status = train_step(r, s, measured);
		if (r->status != RUN_OK)
			break;
		r->ok_steps = s;
		if (measured)
			tms += r->log.ms[s - 1];
		progress_update(&prog, s, r->log.loss[s - 1],
				measured
				    ? (double)r->B * r->T *
					  (s - cfg->warmup_steps) / (tms / 1000)
				    : NAN);
		if (interrupt_signal()) {
			interrupted(r, s);
			break;
		}
		if (cfg->eval_every > 0 && s % cfg->eval_every == 0) {
			/* untimed: its wall seconds go to r->curve_s */
			run_evaluate_curve(r, s,
					   run_wall_s() - t0 - r->curve_s);
			if (r->status != RUN_OK)
				break;
		}
	}
	r->t_train = run_wall_s() - t0 - r->curve_s;
	pretrain_end(&r->pt, &r->rc, &r->log);
	progress_end(&prog, run_record_status_name(r->status));
}
