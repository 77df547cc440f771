/* runner.c — see runner.h. Everything a step touches is allocated before the
 * timed loop; the loop itself allocates nothing on the device (the host
 * keeps per-step statistics in arrays sized by `steps`, allocated up front
 * too). Corpora and batches come from data.h; parameter and gradient files
 * are param_files.c's. */
#include "runner.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../methods/method.h"
#include "../models/model.h"
#include "data.h"
#include "env.h"
#include "pretrain.h"
#include "memfit.h"
#include "progress.h"
#include "record.h"
#include "step_log.h"

/* Adam hyper-parameters (Kingma & Ba 2015 defaults, as the DEQ code). */
#define ADAM_BETA1 0.9
#define ADAM_BETA2 0.999
#define ADAM_EPS   1e-8

static double wall_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void iso_now(char *buf, size_t n)
{
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int is_synthetic(const struct bench_config *cfg)
{
	return strcmp(cfg->corpus, "synthetic") == 0;
}

/* ---- data ---- */

/* Loads cfg's corpus and works out the vocabulary the model gets: the
 * corpus's, or vocab_size when given (synthetic: the number of distinct
 * tokens generated; a file corpus: at least the corpus's, extra rows are
 * never seen). */
static int data_load(struct corpus *c, const struct bench_config *cfg, int *V,
		     char *err, size_t errlen)
{
	int want = cfg->model.vocab_size;
	if (corpus_load(c, cfg->corpus, cfg->data_dir,
			is_synthetic(cfg) ? want : 0, cfg->model.seed, err,
			errlen) != 0)
		return -1;
	*V = c->vocab_size;
	if (want > 0 && !is_synthetic(cfg)) {
		if (want < c->vocab_size) {
			snprintf(
			    err, errlen,
			    "vocab_size=%d is smaller than the %d words of "
			    "corpus=%s; use vocab_size=0 (the corpus's) "
			    "or at least %d",
			    want, c->vocab_size, cfg->corpus, c->vocab_size);
			corpus_free(c);
			return -1;
		}
		*V = want;
	}
	return 0;
}

int runner_resolve_vocab(const struct bench_config *cfg, int *V, char *err,
			 size_t errlen)
{
	struct corpus c;
	if (is_synthetic(cfg)) {
		*V = cfg->model.vocab_size > 0 ? cfg->model.vocab_size
					       : CONFIG_SYNTHETIC_VOCAB;
		return 0;
	}
	if (data_load(&c, cfg, V, err, errlen) != 0)
		return -1;
	corpus_free(&c);
	return 0;
}

int runner_precheck(const struct bench_config *cfg, char *err, size_t errlen)
{
	int V = cfg->model.vocab_size ? cfg->model.vocab_size
				      : CONFIG_SYNTHETIC_VOCAB;
	if (!is_synthetic(cfg) && cfg->model.vocab_size == 0)
		return 0; /* V comes from the corpus: ctx_create checks */
	return memfit_check(cfg, V, NULL, 1, err, errlen);
}

/* ---- context ---- */

/* runner_ctx_create; train: the run will train (the memory check counts
 * the optimizer state and the step log). */
static int ctx_create(struct run_ctx *rc, const struct bench_config *cfg, int V,
		      int train, char *err, size_t errlen)
{
	struct model_config mc = cfg->model;

	memset(rc, 0, sizeof(*rc));
	mc.vocab_size = V;
	if (backend_create(&rc->be, cfg->device, cfg->threads, err, errlen))
		return -1;
	/* before allocating: a run that cannot fit is bad input, not a
	 * process the kernel kills halfway through its setup */
	if (memfit_check(cfg, V, rc->be, train, err, errlen) != 0)
		goto fail;
	if (rc->be->ops->set_tf32)
		rc->be->ops->set_tf32(rc->be->ctx, cfg->tf32);
	else if (cfg->tf32) {
		/* config_validate catches this for cpu/cpu64; kept for a
		 * backend that lacks the switch */
		snprintf(err, errlen,
			 "tf32=true: backend %s has no TF32 mode; drop tf32 "
			 "or use device=cuda",
			 rc->be->ops->name);
		goto fail;
	}
	if (model_create(&rc->m, rc->be, &mc, err, errlen))
		goto fail;
	if (method_create(&rc->me, rc->m, &cfg->method, err, errlen))
		goto fail;
	method_seed(rc->me, cfg->model.seed);
	rc->spectral_radius = NAN;
	rc->z = backend_alloc(rc->be, rc->m->n_state, MEM_HEAD);
	if (!rc->z) {
		snprintf(err, errlen,
			 "out of device memory for z (%zu elements); lower "
			 "batch_size, seq_len or d_model",
			 rc->m->n_state);
		goto fail;
	}
	return 0;
fail:
	runner_ctx_destroy(rc);
	return -1;
}

int runner_ctx_create(struct run_ctx *rc, const struct bench_config *cfg, int V,
		      char *err, size_t errlen)
{
	return ctx_create(rc, cfg, V, 0, err, errlen);
}

void runner_ctx_destroy(struct run_ctx *rc)
{
	if (rc->me)
		method_destroy(rc->me);
	if (rc->m)
		model_destroy(rc->m);
	if (rc->be)
		backend_destroy(rc->be); /* frees z */
	memset(rc, 0, sizeof(*rc));
}

/* Forward up to the loss (nats, mean over B*T positions). */
static int step_forward(struct run_ctx *rc, const int32_t *tok, int train,
			double *loss, char *err, size_t errlen)
{
	struct model *m = rc->m;
	if (train)
		model_zero_grads(m);
	if (model_set_batch(m, tok, err, errlen) != 0)
		return -1;
	model_inject_forward(m);
	method_forward(rc->me, m->u, rc->z, train);
	*loss = model_head_forward(m, rc->z);
	return 0;
}

static void step_backward(struct run_ctx *rc)
{
	struct model *m = rc->m;
	model_head_backward(m);
	method_backward(rc->me, m->gz, m->gu);
	model_inject_backward(m);
}

int runner_grad_step(struct run_ctx *rc, const int32_t *tokens_host,
		     double *loss, char *err, size_t errlen)
{
	if (step_forward(rc, tokens_host, 1, loss, err, errlen) != 0)
		return -1;
	step_backward(rc);
	rc->be->ops->sync(rc->be->ctx);
	return 0;
}

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

/* Training loss (nats) above which a run has diverged (runner.h). */
static double diverge_limit(int V)
{
	return RUNNER_DIVERGE_FACTOR * log((double)V);
}

/* ---- record helpers ---- */

static json_t *num_or_null(double x)
{
	return isfinite(x) ? json_real(x) : json_null();
}

static json_t *mem_json(const size_t *v)
{
	json_t *o = json_object();
	for (int c = 0; c < MEM_NCAT; c++)
		json_object_set_new(o, mem_category_name(c),
				    json_integer((json_int_t)v[c]));
	return o;
}

/* Mean and max of iterations and final residuals over n steps, the
 * fraction of steps that converged and the number of steps a non-finite
 * residual, protect_thres or stall_window ended (flags: step_log.h).
 * Non-finite residuals are left out of the residual figures. */
static json_t *solve_json(const double *it, const double *res, const int *flags,
			  int n)
{
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

static json_t *darray(const double *x, int n)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++)
		json_array_append_new(a, num_or_null(x[i]));
	return a;
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

/* The record's "method" object: the method's resolved config (k, the
 * histories, ... as the method applies them) under the config keys' names
 * and types (config_key_json), in the order of `names`. */
static json_t *method_json(const struct bench_config *cfg,
			   const struct method_config *resolved)
{
	static const char names[] =
	    "method layers k f_solver f_tol f_max_iter f_stop_mode f_history "
	    "b_mode b_solver b_tol b_max_iter b_stop_mode b_history "
	    "anderson_m anderson_lambda anderson_beta solver_batching "
	    "f_stop_scope b_stop_scope protect_thres stall_window "
	    "jac_loss_weight jac_loss_freq jac_fd_eta phantom_steps "
	    "phantom_tau spectral_radius_iters";
	struct bench_config c = *cfg;
	json_t *o = json_object();
	char key[32];
	int len;

	c.method = *resolved;
	for (const char *p = names; sscanf(p, "%31s%n", key, &len) == 1;
	     p += len)
		json_object_set_new(o, key, config_key_json(&c, key));
	return o;
}

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
	json_object_set_new(o, "corpus", json_string(c->kind));
	json_object_set_new(o, "source_dir",
			    c->source_dir[0] ? json_string(c->source_dir)
					     : json_null());
	json_object_set_new(o, "from_cache", json_boolean(c->from_cache));
	json_object_set_new(o, "vocab_size", json_integer(c->vocab_size));
	json_object_set_new(o, "train_tokens",
			    json_integer((json_int_t)c->n[CORPUS_TRAIN]));
	json_object_set_new(o, "valid_tokens",
			    json_integer((json_int_t)c->n[CORPUS_VALID]));
	json_object_set_new(o, "test_tokens",
			    json_integer((json_int_t)c->n[CORPUS_TEST]));
	json_object_set_new(o, "train_batches_per_epoch",
			    json_integer((json_int_t)batcher_n_batches(train)));
	json_object_set_new(
	    o, "epochs",
	    json_real((double)steps / (double)batcher_n_batches(train)));
	return o;
}

static double mean_of(const double *x, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += x[i];
	return n ? s / n : NAN;
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

/* Perplexity data of a split: the mean per-token loss over its first
 * eval_tokens tokens (rounded down to whole batches of B*T; B*T target
 * positions per batch, each batch read as the training batcher would),
 * with the method in inference mode. Batches weigh by their token count,
 * so the mean is per token. A split too short for one batch of B streams
 * gives no tokens (NAN loss). */
static int evaluate(struct run_ctx *rc, const struct corpus *c, int split,
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

/* Pool figures over the measured steps (backends with pool_stats). */
struct pool_track {
	int on;
	size_t used_high, reserved_high, free_bytes, total_bytes;
};

static json_t *pool_json(const struct pool_track *p)
{
	json_t *o;
	if (!p->on)
		return json_null();
	o = json_object();
	json_object_set_new(o, "used_high_bytes",
			    json_integer((json_int_t)p->used_high));
	json_object_set_new(o, "reserved_high_bytes",
			    json_integer((json_int_t)p->reserved_high));
	json_object_set_new(o, "device_free_bytes",
			    json_integer((json_int_t)p->free_bytes));
	json_object_set_new(o, "device_total_bytes",
			    json_integer((json_int_t)p->total_bytes));
	return o;
}

json_t *runner_meta_json(const struct run_meta *meta)
{
	json_t *s = json_object();
	json_object_set_new(s, "name", json_string(meta->suite));
	json_object_set_new(s, "index", json_integer(meta->index));
	json_object_set_new(s, "combo", json_integer(meta->combo));
	json_object_set_new(s, "repeat", json_integer(meta->repeat));
	return s;
}

static const char *status_name(enum run_status s)
{
	return s == RUN_OK ? "ok" : s == RUN_DIVERGED ? "diverged" : "error";
}

enum run_status runner_run(const struct bench_config *cfg,
			   const struct run_meta *meta, json_t **record)
{
	json_t *rec = record_new();
	struct run_ctx rc = {0};
	struct corpus corpus;
	struct batcher train;
	struct step_log log;
	struct progress prog;
	struct pool_track pool = {0};
	struct pretrain pt = {0};
	char err[1024] = "", ts[32];
	enum run_status status = RUN_SETUP_FAILED;
	void *adam_m = NULL, *adam_v = NULL;
	int32_t *tok = NULL;
	/* steps_done: steps whose loss is known; ok_steps: steps completed
	 * with every statistic (a diverged or failed step is not) */
	int V = 0, steps_done = 0, ok_steps = 0, B = cfg->model.batch_size,
	    T = cfg->model.seq_len, have_corpus = 0;
	double t_setup0 = wall_s(), t_setup = 0, t_train = 0, t_eval = 0;
	double diverge_loss;
	struct backend_mem_stats setup_mem;
	size_t n, pred_depth = 0, pred_solver = 0;
	const struct backend_ops *ops;
	struct model *m;
	int log_ok, have_pred;

	memset(&setup_mem, 0, sizeof(setup_mem));
	memset(&corpus, 0, sizeof(corpus));
	log_ok = step_log_alloc(&log, cfg->steps) == 0;
	iso_now(ts, sizeof(ts));
	json_object_set_new(rec, "started_at", json_string(ts));
	json_object_set_new(rec, "config", config_to_json(cfg));
	if (meta && meta->suite)
		json_object_set_new(rec, "suite", runner_meta_json(meta));
	json_object_set_new(rec, "host", env_host_json());
	json_object_set_new(rec, "build", env_build_json());
	if (!log_ok) {
		snprintf(err, sizeof(err), "out of host memory");
		goto done;
	}

	/* ---- setup: everything allocated before the timed loop ---- */
	if (runner_precheck(cfg, err, sizeof(err)) != 0)
		goto done;
	if (data_load(&corpus, cfg, &V, err, sizeof(err)) != 0)
		goto done;
	have_corpus = 1;
	if (batcher_init(&train, corpus.ids[CORPUS_TRAIN],
			 corpus.n[CORPUS_TRAIN], B, T) != 0) {
		snprintf(err, sizeof(err),
			 "corpus=%s: the train split has %zu tokens, too few "
			 "for batch_size=%d streams of seq_len+1=%d tokens; "
			 "lower batch_size or seq_len",
			 cfg->corpus, corpus.n[CORPUS_TRAIN], B, T + 1);
		goto done;
	}
	if (ctx_create(&rc, cfg, V, 1, err, sizeof(err)) != 0)
		goto done;
	m = rc.m;
	ops = rc.be->ops;
	n = m->n_param_elems;
	json_object_set_new(rec, "device",
			    env_device_json(rc.be, cfg->device, cfg->tf32));
	adam_m = backend_alloc(rc.be, n, MEM_OPTIMIZER);
	adam_v = backend_alloc(rc.be, n, MEM_OPTIMIZER);
	tok = malloc((size_t)B * (T + 1) * sizeof(*tok));
	if (!adam_m || !adam_v || !tok) {
		snprintf(err, sizeof(err),
			 "out of memory for the optimizer state (%zu "
			 "parameters); lower d_model, d_ff or vocab_size",
			 n);
		goto done;
	}
	ops->fill(rc.be->ctx, adam_m, 0, n);
	ops->fill(rc.be->ctx, adam_v, 0, n);
	{
		char e2[256];
		have_pred =
		    method_memory(m, method_get_config(rc.me), &pred_depth,
				  &pred_solver, e2, sizeof(e2)) == 0;
	}
	json_object_set_new(rec, "method",
			    method_json(cfg, method_get_config(rc.me)));
	json_object_set_new(rec, "model", model_json(m));
	json_object_set_new(rec, "data",
			    data_json(&corpus, &train, cfg->steps));
	if (pretrain_create(&pt, &rc, cfg, err, sizeof(err)) != 0)
		goto done;
	ops->sync(rc.be->ctx);
	setup_mem = rc.be->mem;
	backend_mem_reset_peak(rc.be);
	pool.on = ops->pool_stats && ops->pool_reset_peak;
	t_setup = wall_s() - t_setup0;

	/* ---- timed training loop ---- */
	{
		char label[96];
		if (meta && meta->suite)
			snprintf(label, sizeof(label), "[%d] %s", meta->index,
				 method_kind_name(cfg->method.method));
		else
			snprintf(label, sizeof(label), "%s",
				 method_kind_name(cfg->method.method));
		progress_begin(&prog, cfg->steps, label, meta && meta->quiet);
	}
	status = RUN_OK;
	diverge_loss = diverge_limit(V);
	{
		double t0 = wall_s(), tms = 0;
		for (int s = 1; s <= cfg->steps; s++) {
			double loss, gn, lr = lr_at(cfg, s);
			int i = s - 1, measured = s > cfg->warmup_steps;

			batcher_next(&train, tok);
			pretrain_select(&pt, &rc, s);
			if (pool.on && measured)
				ops->pool_reset_peak(rc.be->ctx);
			ops->timer_mark(rc.be->ctx, 0);
			if (step_forward(&rc, tok, 1, &loss, err,
					 sizeof(err)) != 0) {
				status = RUN_ERROR;
				break;
			}
			ops->timer_mark(rc.be->ctx, 1);
			log.loss[i] = loss;
			steps_done = s;
			if (!isfinite(loss) || loss > diverge_loss) {
				status = RUN_DIVERGED;
				snprintf(err, sizeof(err),
					 "loss became %g at step %d%s%.4g nats "
					 "(%d ln V, V = %d); lower lr or set "
					 "clip",
					 loss, s,
					 isfinite(loss) ? ", above "
							: "; the "
							  "limit "
							  "is ",
					 diverge_loss, RUNNER_DIVERGE_FACTOR,
					 V);
				break;
			}
			step_backward(&rc);
			/* global l2 norm over every parameter gradient */
			gn = ops->norm(rc.be->ctx, m->grad_buf, n);
			if (cfg->clip > 0 && gn > cfg->clip)
				ops->scale(rc.be->ctx, m->grad_buf,
					   cfg->clip / gn, n);
			ops->adam(rc.be->ctx, m->param_buf, m->grad_buf, adam_m,
				  adam_v, n, lr, ADAM_BETA1, ADAM_BETA2,
				  ADAM_EPS, 0.0, s);
			ops->timer_mark(rc.be->ctx, 2);
			log.fwd_ms[i] = ops->timer_elapsed_ms(rc.be->ctx, 0, 1);
			log.bwd_ms[i] = ops->timer_elapsed_ms(rc.be->ctx, 1, 2);
			log.ms[i] = log.fwd_ms[i] + log.bwd_ms[i];
			log.gnorm[i] = gn;
			log.lr[i] = lr;
			step_log_method(&log, i, method_get_stats(rc.me));
			if (pool.on && measured) {
				struct backend_pool_stats ps;
				memset(&ps, 0, sizeof(ps));
				ops->pool_stats(rc.be->ctx, &ps);
				if (ps.used_high_bytes > pool.used_high)
					pool.used_high = ps.used_high_bytes;
				if (ps.reserved_high_bytes > pool.reserved_high)
					pool.reserved_high =
					    ps.reserved_high_bytes;
				pool.free_bytes = ps.free_bytes;
				pool.total_bytes = ps.total_bytes;
			}
			if (!isfinite(gn)) {
				status = RUN_DIVERGED;
				snprintf(err, sizeof(err),
					 "gradient norm became %g at step %d; "
					 "lower lr or raise clip",
					 gn, s);
				break;
			}
			ok_steps = s;
			if (measured)
				tms += log.ms[i];
			progress_update(&prog, s, loss,
					measured ? (double)B * T *
						       (s - cfg->warmup_steps) /
						       (tms / 1000)
						 : NAN);
		}
		t_train = wall_s() - t0;
	}
	pretrain_end(&pt, &rc, &log);
	progress_end(&prog, status_name(status));

	/* ---- records of the training loop ---- */
	{
		/* the deq phase only when pretraining: steps p0.. */
		int p0 = pt.steps < ok_steps ? pt.steps : ok_steps;
		int w = cfg->warmup_steps + pt.steps;
		int nt = ok_steps - w > 0 ? ok_steps - w : 0;
		json_t *tm = json_object(), *mem = json_object();
		json_t *ev = json_object(), *sv = json_object();
		double sum_ms = 0;
		const struct backend_mem_stats *ms = &rc.be->mem;
		const struct method_stats *st = method_get_stats(rc.me);
		struct rusage ru;

		for (int q = w; q < w + nt; q++)
			sum_ms += log.ms[q];
		json_object_set_new(tm, "steps_timed", json_integer(nt));
		json_object_set_new(tm, "step_ms",
				    record_stats_json(log.ms + w, nt));
		json_object_set_new(tm, "forward_ms",
				    record_stats_json(log.fwd_ms + w, nt));
		json_object_set_new(tm, "backward_ms",
				    record_stats_json(log.bwd_ms + w, nt));
		json_object_set_new(
		    tm, "tokens_per_s",
		    nt && sum_ms > 0
			? json_real((double)B * T * nt / (sum_ms / 1000))
			: json_null());
		json_object_set_new(tm, "setup_s", json_real(t_setup));
		json_object_set_new(tm, "train_s", json_real(t_train));
		json_object_set_new(rec, "timing", tm);

		json_object_set_new(mem, "peak_bytes", mem_json(ms->peak));
		json_object_set_new(
		    mem, "peak_depth_solver_bytes",
		    json_integer((json_int_t)ms->peak_depth_solver));
		json_object_set_new(mem, "peak_total_bytes",
				    json_integer((json_int_t)ms->peak_total));
		json_object_set_new(mem, "setup_live_bytes",
				    mem_json(setup_mem.live));
		json_object_set_new(
		    mem, "setup_live_total_bytes",
		    json_integer((json_int_t)setup_mem.live_total));
		json_object_set_new(mem, "predicted_depth_bytes",
				    have_pred
					? json_integer((json_int_t)pred_depth)
					: json_null());
		json_object_set_new(mem, "predicted_solver_bytes",
				    have_pred
					? json_integer((json_int_t)pred_solver)
					: json_null());
		getrusage(RUSAGE_SELF, &ru);
		json_object_set_new(
		    mem, "max_rss_bytes",
		    json_integer((json_int_t)ru.ru_maxrss * 1024));
		json_object_set_new(mem, "pool", pool_json(&pool));
		json_object_set_new(rec, "memory", mem);

		{
			double fe = 0, ve = 0;
			int ne = ok_steps - p0;
			for (int q = p0; q < ok_steps; q++) {
				fe += log.f_ev[q];
				ve += log.v_ev[q];
			}
			json_object_set_new(ev, "steps", json_integer(ne));
			json_object_set_new(ev, "forward_evals_per_step",
					    ne ? json_real(fe / ne)
					       : json_null());
			json_object_set_new(ev, "forward_evals_total",
					    json_integer((json_int_t)fe));
			json_object_set_new(ev, "vjp_evals_per_step",
					    ne ? json_real(ve / ne)
					       : json_null());
			json_object_set_new(ev, "vjp_evals_total",
					    json_integer((json_int_t)ve));
			json_object_set_new(rec, "evals", ev);
		}

		json_object_set_new(
		    sv, "forward",
		    st->has_fwd_solve
			? solve_json(log.fwd.iters + p0, log.fwd.residual + p0,
				     log.fwd.flags + p0, ok_steps - p0)
			: json_null());
		json_object_set_new(
		    sv, "backward",
		    st->has_bwd_solve
			? solve_json(log.bwd.iters + p0, log.bwd.residual + p0,
				     log.bwd.flags + p0, ok_steps - p0)
			: json_null());
		json_object_set_new(
		    sv, "host_reads_per_step",
		    num_or_null(mean_of(log.reads + p0, ok_steps - p0)));
		jac_json(sv, log.jac + p0, ok_steps - p0);
		json_object_set_new(rec, "solver", sv);
		json_object_set_new(rec, "pretrain",
				    pretrain_json(&pt, cfg, ok_steps, &log));
		if (cfg->trace) {
			json_t *tr = json_object();
			json_object_set_new(tr, "loss",
					    darray(log.loss, steps_done));
			json_object_set_new(tr, "step_ms",
					    darray(log.ms, ok_steps));
			json_object_set_new(tr, "forward_ms",
					    darray(log.fwd_ms, ok_steps));
			json_object_set_new(tr, "backward_ms",
					    darray(log.bwd_ms, ok_steps));
			json_object_set_new(tr, "grad_norm",
					    darray(log.gnorm, ok_steps));
			json_object_set_new(tr, "lr", darray(log.lr, ok_steps));
			json_object_set_new(tr, "fwd_iters",
					    darray(log.fwd.iters, ok_steps));
			json_object_set_new(tr, "fwd_residual",
					    darray(log.fwd.residual, ok_steps));
			json_object_set_new(tr, "bwd_iters",
					    darray(log.bwd.iters, ok_steps));
			json_object_set_new(tr, "bwd_residual",
					    darray(log.bwd.residual, ok_steps));
			json_object_set_new(
			    tr, "fwd_converged",
			    converged_array(log.fwd.flags, ok_steps));
			json_object_set_new(
			    tr, "bwd_converged",
			    converged_array(log.bwd.flags, ok_steps));
			json_object_set_new(tr, "host_reads",
					    darray(log.reads, ok_steps));
			json_object_set_new(tr, "jac_loss",
					    darray(log.jac, ok_steps));
			json_object_set_new(
			    tr, "last_fwd_residual_trace",
			    darray(st->fwd_trace, st->fwd_trace_len));
			json_object_set_new(
			    tr, "last_bwd_residual_trace",
			    darray(st->bwd_trace, st->bwd_trace_len));
			json_object_set_new(rec, "trace", tr);
		}
	}

	/* ---- evaluation (after training; not in the step statistics) ---- */
	{
		json_t *q = json_object();
		int last = steps_done < 10 ? steps_done : 10;
		long vt = 0, tt = 0;
		double vl = NAN, tl = NAN, t0 = wall_s();
		json_object_set_new(
		    q, "train_loss_final",
		    num_or_null(mean_of(log.loss + steps_done - last, last)));
		json_object_set_new(
		    q, "train_loss_first",
		    num_or_null(steps_done ? log.loss[0] : NAN));
		json_object_set_new(q, "tokens_trained",
				    json_integer((json_int_t)B * T * ok_steps));
		if (status == RUN_OK && cfg->eval_tokens > 0) {
			if (evaluate(&rc, &corpus, CORPUS_VALID,
				     cfg->eval_tokens, tok, &vl, &vt, err,
				     sizeof(err)) != 0 ||
			    evaluate(&rc, &corpus, CORPUS_TEST,
				     cfg->eval_tokens, tok, &tl, &tt, err,
				     sizeof(err)) != 0)
				status = RUN_ERROR;
		}
		t_eval = wall_s() - t0;
		json_object_set_new(q, "valid_loss", num_or_null(vl));
		json_object_set_new(q, "valid_ppl", num_or_null(exp(vl)));
		json_object_set_new(q, "valid_eval_tokens", json_integer(vt));
		json_object_set_new(q, "test_loss", num_or_null(tl));
		json_object_set_new(q, "test_ppl", num_or_null(exp(tl)));
		json_object_set_new(q, "test_eval_tokens", json_integer(tt));
		json_object_set_new(q, "valid_spectral_radius",
				    num_or_null(rc.spectral_radius));
		json_object_set_new(rec, "quality", q);
		json_object_set_new(json_object_get(rec, "timing"), "eval_s",
				    json_real(t_eval));
	}

done:
	json_object_set_new(rec, "status", json_string(status_name(status)));
	json_object_set_new(rec, "message",
			    json_string(status == RUN_OK ? "" : err));
	iso_now(ts, sizeof(ts));
	json_object_set_new(rec, "finished_at", json_string(ts));
	free(tok);
	if (rc.be) {
		backend_free(rc.be, adam_m);
		backend_free(rc.be, adam_v);
	}
	pretrain_free(&pt, &rc);
	runner_ctx_destroy(&rc);
	if (have_corpus)
		corpus_free(&corpus);
	step_log_free(&log);
	*record = rec;
	return status;
}
