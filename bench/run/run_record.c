/* run_record.c — see run_record.h: the record's sections from the run's
 * state and per-step log. Key order within each object is the schema's
 * (results/SCHEMA.md); the top-level order is record_new's. */
#include "run_record.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "../../methods/method.h"
#include "../../models/model.h"
#include "../records/env.h"
#include "../records/health.h"
#include "../io/jsontext.h"
#include "../records/record.h"
#include "run_state.h"
#include "run_work.h"

/* ---- value helpers ---- */

static json_t *num_or_null(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static json_t *size_json(size_t b)
{
	return json_integer((json_int_t)b);
}

static json_t *darray(const double *x, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, num_or_null(x[i]));
	return a;
}

static double mean_of(const double *x, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += x[i];
	return n ? s / n : NAN;
}

void run_record_set_now(json_t *rec, const char *key)
{
	char ts[32];
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_object_set_new(rec, key, json_string(ts));
}

const char *run_record_status_name(enum run_status s)
{
	return s == RUN_OK	      ? "ok"
	       : s == RUN_DIVERGED    ? "diverged"
	       : s == RUN_INTERRUPTED ? "interrupted"
				      : "error";
}

json_t *run_record_meta_json(const struct run_meta *meta)
{
	json_t *s = json_object();
	json_object_set_new(s, "name", jsontext_string(meta->suite));
	json_object_set_new(s, "index", json_integer(meta->index));
	json_object_set_new(s, "combo", json_integer(meta->combo));
	json_object_set_new(s, "repeat", json_integer(meta->repeat));
	if (!meta->order)
		return s;
	json_object_set_new(s, "order", json_string(meta->order));
	json_object_set_new(s, "order_seed",
			    meta->order_seed >= 0
				? json_integer((json_int_t)meta->order_seed)
				: json_null());
	json_object_set_new(
	    s, "shard",
	    json_sprintf("%d/%d", meta->shard_i,
			 meta->shard_n > 0 ? meta->shard_n : 1));
	return s;
}

/* ---- before and during setup ---- */

void run_record_begin(struct run *r)
{
	run_record_set_now(r->rec, "started_at");
	json_object_set_new(r->rec, "config", config_to_json(r->cfg));
	if (r->meta && r->meta->suite)
		json_object_set_new(r->rec, "suite",
				    run_record_meta_json(r->meta));
	json_object_set_new(r->rec, "host", env_host_json());
	json_object_set_new(r->rec, "build", env_build_json());
}

void run_record_device(struct run *r)
{
	/* again now that the backend set the run's thread count */
	json_t *host = json_object_get(r->rec, "host");
	if (host)
		json_object_set_new(host, "blas", env_blas_json());
	json_object_set_new(
	    r->rec, "device",
	    env_device_json(r->rc.be, config_device_name(r->cfg->device),
			    r->cfg->model.precision == DQ_PREC_TF32));
}

/* The record's "method" object: the method's resolved config (k, the
 * histories, ... as the method applies them) under the config keys' names
 * and types (config_key_json), in the order of `names`. */
static json_t *shape_json(int ndim, const int64_t *shape)
{
	json_t *a = json_array();
	for (int k = 0; k < ndim; k++)
		json_array_append_new(a, json_integer(shape[k]));
	return a;
}

static json_t *model_json(const struct model *m)
{
	json_t *md = json_object(), *pl = json_array();
	json_object_set_new(md, "kind",
			    json_string(model_kind_name(m->cfg.kind)));
	json_object_set_new(md, "vocab_size", json_integer(m->cfg.vocab_size));
	json_object_set_new(md, "n_params",
			    json_integer((json_int_t)m->n_param_elems));
	json_object_set_new(md, "block_flops", json_real(model_block_flops(m)));
	for (int i = 0; i < m->n_params; i++) {
		json_t *p = json_object();
		json_object_set_new(p, "name", json_string(m->params[i].name));
		json_object_set_new(
		    p, "shape",
		    shape_json(m->params[i].ndim, m->params[i].shape));
		json_array_append_new(pl, p);
	}
	json_object_set_new(md, "params", pl);
	return md;
}

static json_t *data_json(const struct corpus *c, const struct batcher *train,
			 int steps)
{
	json_t *o = json_object();
	size_t nb = batcher_n_batches(train);
	json_object_set_new(o, "corpus", json_string(c->kind));
	json_object_set_new(o, "source_dir",
			    c->source_dir[0] ? jsontext_string(c->source_dir)
					     : json_null());
	json_object_set_new(o, "from_cache", json_boolean(c->from_cache));
	json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
	json_object_set_new(o, "train_tokens", size_json(c->n[CORPUS_TRAIN]));
	json_object_set_new(o, "valid_tokens", size_json(c->n[CORPUS_VALID]));
	json_object_set_new(o, "test_tokens", size_json(c->n[CORPUS_TEST]));
	json_object_set_new(o, "train_batches_per_epoch", size_json(nb));
	json_object_set_new(o, "epochs", json_real((double)steps / (double)nb));
	return o;
}

void run_record_setup(struct run *r)
{
	json_object_set_new(
	    r->rec, "method",
	    config_method_record_json(method_get_config(r->rc.me)));
	json_object_set_new(r->rec, "model", model_json(r->rc.m));
	json_object_set_new(r->rec, "data",
			    data_json(&r->corpus, &r->train, r->cfg->steps));
}

/* ---- after the timed loop ---- */

/* Timed steps of the deq phase: after warmup_steps untimed steps of each
 * phase (pretraining's first), up to ok_steps. */
static int timed_from(const struct run *r)
{
	return r->cfg->warmup_steps + r->pt.steps;
}

/* Block applications (*fe) and VJPs (*ve) summed over steps
 * p0..ok_steps-1 (the record's evals); returns the number of steps. */
static int evals_sum(const struct step_log *l, int p0, int ok_steps, double *fe,
		     double *ve)
{
	int ne = ok_steps - p0 > 0 ? ok_steps - p0 : 0;
	*fe = *ve = 0;
	for (int q = p0; q < p0 + ne; q++) {
		*fe += l->f_ev[q];
		*ve += l->v_ev[q];
	}
	return ne;
}

/* The count and what it leaves out: run_record.h. */
double run_step_flops(const struct model *m, double fwd_evals, double vjp_evals)
{
	double N = (double)m->B * m->T, E = m->E, U = m->U;
	double V = m->cfg.vocab_size, F = model_block_flops(m);
	const struct model_param *inj = model_param_find(m, "inject.weight");
	double k = inj && inj->ndim == 3 ? (double)inj->shape[2] : 1.0;
	double head = 3.0 * 2.0 * N * E * V;
	double inject = 3.0 * 2.0 * N * E * U * k;
	return fwd_evals * F + vjp_evals * 2.0 * F + head + inject;
}

/* timing.step_gflop and timing.gflops (SCHEMA.md): null without evals,
 * gflops null without a median step time. */
static void flops_json(const struct run *r, json_t *tm, double median_ms)
{
	int p0 = r->pt.steps < r->ok_steps ? r->pt.steps : r->ok_steps;
	double fe, ve;
	int ne = evals_sum(&r->log, p0, r->ok_steps, &fe, &ve);
	/* microbatches = M: M micro-batch steps of the model's B/M rows,
	 * their evaluations the step's over M */
	double M = r->rc.micro > 1 ? r->rc.micro : 1;
	double gf =
	    ne ? M * run_step_flops(r->rc.m, fe / ne / M, ve / ne / M) / 1e9
	       : NAN;
	json_object_set_new(tm, "step_gflop", num_or_null(gf));
	json_object_set_new(tm, "gflops",
			    median_ms > 0 ? num_or_null(gf / (median_ms / 1000))
					  : json_null());
}

static json_t *timing_json(const struct run *r)
{
	const struct step_log *l = &r->log;
	int w = timed_from(r), nt = r->ok_steps - w > 0 ? r->ok_steps - w : 0;
	json_t *tm = json_object();
	double sum_ms = 0;

	for (int q = w; q < w + nt; q++)
		sum_ms += l->ms[q];
	json_object_set_new(tm, "steps_timed", json_integer(nt));
	json_object_set_new(tm, "step_ms", record_stats_json(l->ms + w, nt));
	json_object_set_new(tm, "forward_ms",
			    record_stats_json(l->fwd_ms + w, nt));
	json_object_set_new(tm, "backward_ms",
			    record_stats_json(l->bwd_ms + w, nt));
	json_object_set_new(tm, "tokens_per_s",
			    nt && sum_ms > 0 ? json_real((double)r->B * r->T *
							 nt / (sum_ms / 1000))
					     : json_null());
	json_t *med = json_object_get(json_object_get(tm, "step_ms"), "median");
	flops_json(r, tm, json_is_number(med) ? json_number_value(med) : NAN);
	json_object_set_new(tm, "setup_s", json_real(r->t_setup));
	json_object_set_new(tm, "train_s", json_real(r->t_train));
	return tm;
}

static json_t *mem_json(const size_t *v)
{
	json_t *o = json_object();
	for (int c = 0; c < MEM_NCAT; c++)
		json_object_set_new(o, mem_category_name(c), size_json(v[c]));
	return o;
}

static json_t *pool_json(const struct pool_track *p)
{
	json_t *o;
	if (!p->on)
		return json_null();
	o = json_object();
	json_object_set_new(o, "used_high_bytes", size_json(p->used_high));
	json_object_set_new(o, "reserved_high_bytes",
			    size_json(p->reserved_high));
	json_object_set_new(o, "device_free_bytes", size_json(p->free_bytes));
	json_object_set_new(o, "device_total_bytes", size_json(p->total_bytes));
	return o;
}

/* The offload copies of the timed steps (null when the method moved
 * nothing): bytes and copy/stall statistics per step, and the share of the
 * copy time hidden behind compute. */
static json_t *offload_json(const struct run *r)
{
	const struct step_log *l = &r->log;
	int w = timed_from(r), nt = r->ok_steps - w > 0 ? r->ok_steps - w : 0;
	double copy = 0, stall = 0;
	json_t *o;
	if (nt == 0 || !(l->moved[w] > 0))
		return json_null();
	for (int q = w; q < w + nt; q++)
		copy += l->copy_ms[q], stall += l->stall_ms[q];
	o = json_object();
	json_object_set_new(o, "bytes_per_step",
			    num_or_null(mean_of(l->moved + w, nt)));
	json_object_set_new(o, "copy_ms",
			    record_stats_json(l->copy_ms + w, nt));
	json_object_set_new(o, "stall_ms",
			    record_stats_json(l->stall_ms + w, nt));
	json_object_set_new(
	    o, "overlap",
	    num_or_null(copy > 0 ? 1.0 - (stall < copy ? stall : copy) / copy
				 : NAN));
	return o;
}

static json_t *memory_json(const struct run *r)
{
	const struct backend_mem_stats *ms = &r->rc.be->mem;
	json_t *mem = json_object();
	struct rusage ru;

	json_object_set_new(mem, "peak_bytes", mem_json(ms->peak));
	json_object_set_new(mem, "peak_depth_solver_bytes",
			    size_json(ms->peak_depth_solver));
	json_object_set_new(mem, "peak_total_bytes", size_json(ms->peak_total));
	json_object_set_new(mem, "setup_live_bytes",
			    mem_json(r->setup_mem.live));
	json_object_set_new(mem, "setup_live_total_bytes",
			    size_json(r->setup_mem.live_total));
	json_object_set_new(mem, "predicted_depth_bytes",
			    r->have_pred ? size_json(r->pred_depth)
					 : json_null());
	json_object_set_new(mem, "predicted_solver_bytes",
			    r->have_pred ? size_json(r->pred_solver)
					 : json_null());
	json_object_set_new(mem, "predicted_host_bytes",
			    r->have_pred ? size_json(r->pred_host)
					 : json_null());
	json_object_set_new(mem, "predicted_managed_bytes",
			    r->have_pred ? size_json(r->pred_managed)
					 : json_null());
	json_object_set_new(mem, "offload", offload_json(r));
	getrusage(RUSAGE_SELF, &ru);
	json_object_set_new(mem, "max_rss_bytes",
			    json_integer((json_int_t)ru.ru_maxrss * 1024));
	json_object_set_new(mem, "pool", pool_json(&r->pool));
	return mem;
}

/* Layer evaluations per step over steps p0..ok_steps-1. */
static json_t *evals_json(const struct step_log *l, int p0, int ok_steps)
{
	json_t *ev = json_object();
	double fe, ve;
	int ne = evals_sum(l, p0, ok_steps, &fe, &ve);
	json_object_set_new(ev, "steps", json_integer(ne));
	json_object_set_new(ev, "forward_evals_per_step",
			    ne ? json_real(fe / ne) : json_null());
	json_object_set_new(ev, "forward_evals_total",
			    json_integer((json_int_t)fe));
	json_object_set_new(ev, "vjp_evals_per_step",
			    ne ? json_real(ve / ne) : json_null());
	json_object_set_new(ev, "vjp_evals_total",
			    json_integer((json_int_t)ve));
	return ev;
}

/* Mean and max of iterations and final residuals of one solve over steps
 * p0..p0+n-1, the fraction of them that converged and the number of steps
 * a non-finite residual, protect_thres or stall_window ended (step_log.h).
 * Non-finite residuals are left out of the residual figures. */
static json_t *solve_json(const struct solve_log *l, int p0, int n)
{
	const double *it = l->iters + p0, *res = l->residual + p0;
	const int *flags = l->flags + p0;
	json_t *o = json_object();
	double isum = 0, imax = 0, rsum = 0, rmax = 0;
	int nc = 0, nf = 0, nnf = 0, npb = 0, nsb = 0;
	for (int i = 0; i < n; i++) {
		isum += it[i];
		imax = it[i] > imax ? it[i] : imax;
		if (isfinite(res[i])) {
			rsum += res[i];
			rmax = res[i] > rmax ? res[i] : rmax;
			nf++;
		}
		nc += !!(flags[i] & SOLVE_CONVERGED);
		nnf += !!(flags[i] & SOLVE_NONFINITE);
		npb += !!(flags[i] & SOLVE_PROTECT_BREAK);
		nsb += !!(flags[i] & SOLVE_STALL_BREAK);
	}
	json_object_set_new(o, "steps", json_integer(n));
	json_object_set_new(o, "iters_mean",
			    n ? json_real(isum / n) : json_null());
	json_object_set_new(o, "iters_max", n ? json_real(imax) : json_null());
	json_object_set_new(o, "residual_mean",
			    nf ? json_real(rsum / nf) : json_null());
	json_object_set_new(o, "residual_max",
			    nf ? json_real(rmax) : json_null());
	json_object_set_new(o, "converged_fraction",
			    n ? json_real((double)nc / n) : json_null());
	json_object_set_new(o, "nonfinite_steps", json_integer(nnf));
	json_object_set_new(o, "protect_break_steps", json_integer(npb));
	json_object_set_new(o, "stall_break_steps", json_integer(nsb));
	return o;
}

/* solver.jac_loss_mean and jac_loss_steps: the mean of R = ‖εᵀ J‖²/n over
 * the n steps that applied the Jacobian regulariser (NAN in jac[] marks the
 * others; a non-finite R counts as applied and makes the mean null). */
static void jac_json(json_t *sv, const double *jac, int n)
{
	double s = 0;
	int k = 0;
	for (int i = 0; i < n; i++)
		if (!isnan(jac[i])) {
			s += jac[i];
			k++;
		}
	json_object_set_new(sv, "jac_loss_mean", num_or_null(k ? s / k : NAN));
	json_object_set_new(sv, "jac_loss_steps", json_integer(k));
}

static json_t *solver_json(const struct run *r, int p0)
{
	const struct method_stats *st = method_get_stats(r->rc.me);
	const struct step_log *l = &r->log;
	int n = r->ok_steps - p0;
	json_t *sv = json_object();
	json_object_set_new(sv, "forward",
			    st->has_fwd_solve ? solve_json(&l->fwd, p0, n)
					      : json_null());
	json_object_set_new(sv, "backward",
			    st->has_bwd_solve ? solve_json(&l->bwd, p0, n)
					      : json_null());
	json_object_set_new(sv, "host_reads_per_step",
			    num_or_null(mean_of(l->reads + p0, n)));
	jac_json(sv, l->jac + p0, n);
	return sv;
}

/* Per-step converged flags as booleans. */
static json_t *converged_array(const int *flags, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a,
				      json_boolean(flags[i] & SOLVE_CONVERGED));
	return a;
}

static json_t *trace_json(const struct run *r)
{
	const struct step_log *l = &r->log;
	const struct {
		const char *name;
		const double *x;
	} cols[] = {
	    {"step_ms", l->ms},
	    {"forward_ms", l->fwd_ms},
	    {"backward_ms", l->bwd_ms},
	    {"grad_norm", l->gnorm},
	    {"lr", l->lr},
	    {"fwd_iters", l->fwd.iters},
	    {"fwd_residual", l->fwd.residual},
	    {"bwd_iters", l->bwd.iters},
	    {"bwd_residual", l->bwd.residual},
	};
	const struct method_stats *st = method_get_stats(r->rc.me);
	int n = r->ok_steps;
	json_t *tr = json_object();

	json_object_set_new(tr, "loss", darray(l->loss, r->steps_done));
	for (size_t i = 0; i < sizeof(cols) / sizeof(*cols); i++)
		json_object_set_new(tr, cols[i].name, darray(cols[i].x, n));
	json_object_set_new(tr, "fwd_converged",
			    converged_array(l->fwd.flags, n));
	json_object_set_new(tr, "bwd_converged",
			    converged_array(l->bwd.flags, n));
	json_object_set_new(tr, "host_reads", darray(l->reads, n));
	json_object_set_new(tr, "jac_loss", darray(l->jac, n));
	json_object_set_new(tr, "last_fwd_residual_trace",
			    darray(st->fwd_trace, st->fwd_trace_len));
	json_object_set_new(tr, "last_bwd_residual_trace",
			    darray(st->bwd_trace, st->bwd_trace_len));
	return tr;
}

/* health_assess reads the solve flags' converged bit as its own */
_Static_assert(SOLVE_CONVERGED == HEALTH_CONVERGED_BIT,
	       "step_log's converged bit is health's");
_Static_assert(SOLVE_NONFINITE == HEALTH_NONFINITE_BIT,
	       "step_log's non-finite bit is health's");

/* The record's health object (health.h) over every training step done,
 * pretraining's included; the solve flags of the deq phase's. */
static json_t *health_of_run(const struct run *r, int p0)
{
	const struct method_stats *st = method_get_stats(r->rc.me);
	int n = r->steps_done < r->ok_steps ? r->steps_done : r->ok_steps;
	struct health h;
	/* a diverged step has a loss but no complete statistics: keep it */
	if (r->status == RUN_DIVERGED && r->steps_done > n)
		n = r->steps_done;
	struct health_more more = {
	    .clip = r->cfg->clip,
	    .bwd_flags = st->has_bwd_solve ? r->log.bwd.flags + p0 : NULL};
	health_assess(r->log.loss, r->log.gnorm, n,
		      st->has_fwd_solve ? r->log.fwd.flags + p0 : NULL,
		      r->ok_steps - p0, r->status == RUN_DIVERGED, &more, &h);
	return health_json(&h);
}

void run_record_train(struct run *r)
{
	/* the deq phase only when pretraining: steps p0.. */
	int p0 = r->pt.steps < r->ok_steps ? r->pt.steps : r->ok_steps;
	json_object_set_new(r->rec, "timing", timing_json(r));
	json_object_set_new(r->rec, "memory", memory_json(r));
	json_object_set_new(r->rec, "evals",
			    evals_json(&r->log, p0, r->ok_steps));
	json_object_set_new(
	    r->rec, "work",
	    run_work_json(&r->log, p0, r->ok_steps - p0, timed_from(r) - p0));
	json_object_set_new(r->rec, "solver", solver_json(r, p0));
	json_object_set_new(r->rec, "health", health_of_run(r, p0));
	json_object_set_new(
	    r->rec, "pretrain",
	    pretrain_json(&r->pt, r->cfg, r->ok_steps, &r->log));
	if (r->cfg->trace)
		json_object_set_new(r->rec, "trace", trace_json(r));
}

/* ---- after evaluation ---- */

/* quality.valid_curve: null without eval_every (and in eval records),
 * else {every, eval_s, points} of the evaluations during training. */
static json_t *valid_curve_json(const struct run *r)
{
	json_t *o, *pts;
	if (r->eval_only || r->cfg->eval_every <= 0)
		return json_null();
	o = json_object();
	pts = json_array();
	for (int i = 0; i < r->curve_n; i++) {
		const struct curve_point *c = &r->curve[i];
		json_t *p = json_object();
		json_object_set_new(p, "step", json_integer(c->step));
		json_object_set_new(p, "valid_loss",
				    num_or_null(c->valid_loss));
		json_object_set_new(p, "valid_ppl",
				    num_or_null(exp(c->valid_loss)));
		json_object_set_new(p, "train_s", json_real(c->train_s));
		json_object_set_new(p, "tokens", json_integer(c->tokens));
		json_array_append_new(pts, p);
	}
	json_object_set_new(o, "every", json_integer(r->cfg->eval_every));
	json_object_set_new(o, "eval_s", json_real(r->curve_s));
	json_object_set_new(o, "points", pts);
	return o;
}

void run_record_quality(struct run *r, const struct eval_result *e)
{
	json_t *q = json_object();
	int done = r->steps_done, last = done < 10 ? done : 10;
	const double *loss = r->log.loss;

	json_object_set_new(q, "train_loss_final",
			    num_or_null(mean_of(loss + done - last, last)));
	json_object_set_new(q, "train_loss_first",
			    num_or_null(done ? loss[0] : NAN));
	json_object_set_new(
	    q, "tokens_trained",
	    json_integer((json_int_t)r->B * r->T * r->ok_steps));
	json_object_set_new(q, "valid_loss", num_or_null(e->valid_loss));
	json_object_set_new(q, "valid_ppl", num_or_null(exp(e->valid_loss)));
	json_object_set_new(q, "valid_eval_tokens",
			    json_integer(e->valid_tokens));
	json_object_set_new(q, "test_loss", num_or_null(e->test_loss));
	json_object_set_new(q, "test_ppl", num_or_null(exp(e->test_loss)));
	json_object_set_new(q, "test_eval_tokens",
			    json_integer(e->test_tokens));
	json_object_set_new(q, "valid_spectral_radius",
			    num_or_null(r->rc.spectral_radius));
	json_object_set_new(q, "valid_curve", valid_curve_json(r));
	json_object_set_new(r->rec, "quality", q);
	if (json_is_object(json_object_get(r->rec, "timing")))
		json_object_set_new(json_object_get(r->rec, "timing"), "eval_s",
				    json_real(r->t_eval));
}

/* Inference figures of the valid evaluation (evaluate.h): timing over the
 * batches after eval_warmup, evaluations, host reads and the forward solve
 * over all of them; with memory, the allocator's peaks (meaningful for
 * deqbench eval, whose method holds only inference's buffers). */
static json_t *inference_json(const struct run *r, int memory)
{
	const struct step_log *l = &r->inf;
	int n = l->n, w = r->cfg->eval_warmup < n ? r->cfg->eval_warmup : n;
	int nt = n - w;
	const struct method_stats *st = method_get_stats(r->rc.me);
	json_t *o = json_object(), *mem = json_null();
	double sum_ms = 0;

	for (int i = w; i < n; i++)
		sum_ms += l->ms[i];
	json_object_set_new(o, "split", json_string("valid"));
	json_object_set_new(o, "batches", json_integer(n));
	json_object_set_new(o, "batches_timed", json_integer(nt));
	json_object_set_new(o, "step_ms", record_stats_json(l->ms + w, nt));
	json_object_set_new(o, "body_ms", record_stats_json(l->fwd_ms + w, nt));
	json_object_set_new(o, "head_ms",
			    record_stats_json(l->head_ms + w, nt));
	json_object_set_new(o, "tokens_per_s",
			    nt && sum_ms > 0 ? json_real((double)r->B * r->T *
							 nt / (sum_ms / 1000))
					     : json_null());
	json_object_set_new(o, "forward_evals_per_batch",
			    num_or_null(mean_of(l->f_ev, n)));
	json_object_set_new(o, "host_reads_per_batch",
			    num_or_null(mean_of(l->reads, n)));
	json_object_set_new(o, "forward_solve",
			    n && st->has_fwd_solve ? solve_json(&l->fwd, 0, n)
						   : json_null());
	if (memory) {
		mem = json_object();
		json_object_set_new(mem, "peak_bytes",
				    mem_json(r->inf_mem.peak));
		json_object_set_new(mem, "peak_depth_solver_bytes",
				    size_json(r->inf_mem.peak_depth_solver));
		json_object_set_new(mem, "peak_total_bytes",
				    size_json(r->inf_mem.peak_total));
	}
	json_object_set_new(o, "memory", mem);
	json_object_set_new(o, "eval_s", json_real(r->t_eval));
	return o;
}

void run_record_inference(struct run *r)
{
	/* null (record_new's) when no valid batch was evaluated */
	if (!(r->cfg->eval_tokens > 0 && r->inf.mem && r->inf.n > 0))
		return;
	json_object_set_new(r->rec, "inference",
			    inference_json(r, r->eval_only));
	/* an eval record's work: per valid batch, as inference's figures */
	if (r->eval_only)
		json_object_set_new(
		    r->rec, "work",
		    run_work_json(&r->inf, 0, r->inf.n, r->cfg->eval_warmup));
}

void run_record_end(struct run *r)
{
	json_object_set_new(r->rec, "status",
			    json_string(run_record_status_name(r->status)));
	json_object_set_new(r->rec, "message",
			    r->status == RUN_OK
				? json_string("")
				: jsontext_buf(r->err, sizeof(r->err)));
	run_record_set_now(r->rec, "finished_at");
}
