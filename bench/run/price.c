/* price.c — see price.h. One configuration: the run's own backend, model
 * and method (run_ctx.h), buffers of the units' own (block_units.h,
 * price_solver.h, Adam moments, a host staging buffer on a GPU), then
 * price_measure over the units and one record per unit.
 *
 * What each unit times (one call per sample, between the backend's timer
 * marks; a GPU's timer is its events):
 *   block_fwd_taped, block_fwd, block_vjp, block_vjp_input  block_units.h
 *   solver_update   price_solver.h, Broyden's at h = 1, 2, 4, … and hmax
 *                   (the config's f_history, or f_max_iter when 0) and
 *                   Anderson's at h = 1, 2, 4, … and anderson_m; the
 *                   record's `solver` says which. Also the least-squares
 *                   line a + b h through each solver's medians (`fit`)
 *   head_fwd        model_head_forward (logits, softmax, loss: the head as
 *                   an evaluation runs it)
 *   head_bwd        model_head_backward after an untimed head_fwd (dlogits,
 *                   gz and the head's gradients)
 *   head_train      model_head_forward_train + model_head_backward: the
 *                   head as a training step runs it (the fused softmax,
 *                   loss and dlogits, then the head's gradients), priced
 *                   for a training step's head_fwd + head_bwd pair
 *   optimizer_step  be_norm + be_adam over every parameter (lr 0, so the
 *                   parameters stay; the cost is the same), as
 *                   train_step.c's optimizer_step without clipping's scale
 *   step_fixed      what else a training step does (step_fixed below):
 *                   one per optimizer_step
 *   host_bytes      one tape (model_tape_bytes) copied to host memory
 *                   and back (copy_async + copy_wait, as offload copies
 *                   it: a DMA on a GPU, a memcpy on the CPU backends),
 *                   the price per byte
 *   attn_recompute  model_sel_recompute on a selective tape written once
 *                   at setup (method=selective's recomputation inside
 *                   each VJP); only for a model kind with selective
 *                   tapes (model=transformer)
 */
#include "price.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../kernels/solve_fused.h"
#include "../../methods/method.h"
#include "../../models/model.h"
#include "../records/env.h"
#include "../records/record.h"
#include "../records/validate_schema.h"
#include "block_units.h"
#include "price_solver.h"
#include "price_stats.h"
#include "run_ctx.h"
#include "run_record.h"

const char *const *const price_unit_names = validate_price_units;

enum unit_kind {
	U_BLOCK,
	U_SOLVER,   /* Broyden's update */
	U_ANDERSON, /* Anderson's mixing (unit solver_update too) */
	U_HEAD_FWD,
	U_HEAD_BWD,
	U_HEAD_TRAIN,
	U_OPT,
	U_FIXED,
	U_HOST,
	U_ATTN, /* attn_recompute */
};

struct unit {
	const char *name;
	enum unit_kind kind;
	int arg; /* U_BLOCK: enum block_unit; U_SOLVER, U_ANDERSON: h */
};

/* The history lengths a solver is timed at: 1, 2, 4, … below hmax, and
 * hmax (at most this many for hmax < 2^PRICE_MAX_POINTS). */
#define PRICE_MAX_POINTS 8
#define MAX_UNITS	 (11 + 2 * PRICE_MAX_POINTS)

struct price_run {
	struct run_ctx rc;
	struct block_bufs bb;
	struct price_solver ps;
	void *am, *av;		      /* Adam moments (n_param_elems) */
	void *hdev, *hhost;	      /* host_bytes: device and host staging */
	size_t hbytes;		      /* bytes of one copy */
	void *sel_tape, *sel_scratch; /* attn_recompute (MEM_DEPTH) */
	int32_t *tok;		      /* (B, T+1) zeros: the batch */
	double lambda, beta;	      /* Anderson's regularisation and mixing */
	struct unit u[MAX_UNITS];
	int nu;
};

int price_pin(int core, char *err, size_t errlen)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	if (core < 0 || core >= CPU_SETSIZE) {
		snprintf(err, errlen, "core=%d: give a CPU number from 0",
			 core);
		return -1;
	}
	CPU_SET(core, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		snprintf(err, errlen,
			 "core=%d: cannot pin to that CPU (not online or not "
			 "allowed to this process; taskset -p $$ shows which "
			 "are)",
			 core);
		return -1;
	}
	return 0;
}

/* The fused rings' cap on h (solver_kernels=fused: both kinds of unit
 * are priced, and the checks bound only the solver in use). */
static int fused_cap(const struct bench_config *cfg, int h)
{
	int fused = cfg->method.opts.deq.solver_kernels == SOLVER_KERNELS_FUSED;
	return fused && h > DQ_FUSED_MAX_H ? DQ_FUSED_MAX_H : h;
}

/* Broyden's longest history of cfg (f_history, or f_max_iter when 0). */
static int broyden_hmax(const struct bench_config *cfg)
{
	const struct deq_config *d = &cfg->method.opts.deq;
	int h = d->f_history > 0 ? d->f_history : d->f_max_iter;
	return fused_cap(cfg, h > 0 ? h : 1);
}

/* Anderson's ring of cfg (anderson_m, at least 1). */
static int anderson_m(const struct bench_config *cfg)
{
	int m = cfg->method.opts.deq.anderson_m;
	return fused_cap(cfg, m > 0 ? m : 1);
}

/* The history lengths a solver is timed at up to hmax, into h: 1, 2, 4, …
 * below hmax (the cost bends where the history leaves the caches, so
 * report interpolates between close points), then hmax. Returns how many
 * (1 to PRICE_MAX_POINTS, distinct, increasing). */
static int history_points(int hmax, int *h)
{
	int n = 0;
	for (int c = 1; c < hmax && n < PRICE_MAX_POINTS - 1; c *= 2)
		h[n++] = c;
	h[n++] = hmax;
	return n;
}

static void add_unit(struct price_run *p, const char *name, enum unit_kind k,
		     int arg)
{
	p->u[p->nu++] = (struct unit){name, k, arg};
}

/* The unit table of p (cfg: the history lengths of both solvers;
 * host_bytes on every backend: offload copies tapes on each). */
static void units_of(struct price_run *p, const struct bench_config *cfg)
{
	int h[PRICE_MAX_POINTS], nh = history_points(broyden_hmax(cfg), h);
	p->nu = 0;
	add_unit(p, "block_fwd_taped", U_BLOCK, BLOCK_FWD_TAPED);
	add_unit(p, "block_fwd", U_BLOCK, BLOCK_FWD);
	add_unit(p, "block_vjp", U_BLOCK, BLOCK_VJP);
	add_unit(p, "block_vjp_input", U_BLOCK, BLOCK_VJP_INPUT);
	for (int i = 0; i < nh; i++)
		add_unit(p, "solver_update", U_SOLVER, h[i]);
	nh = history_points(anderson_m(cfg), h);
	for (int i = 0; i < nh; i++)
		add_unit(p, "solver_update", U_ANDERSON, h[i]);
	add_unit(p, "head_fwd", U_HEAD_FWD, 0);
	add_unit(p, "head_bwd", U_HEAD_BWD, 0);
	add_unit(p, "head_train", U_HEAD_TRAIN, 0);
	add_unit(p, "optimizer_step", U_OPT, 0);
	add_unit(p, "step_fixed", U_FIXED, 0);
	add_unit(p, "host_bytes", U_HOST, 0);
	if (p->sel_tape)
		add_unit(p, "attn_recompute", U_ATTN, 0);
}

/* step_fixed: what a training step does besides the other units
 * (step_pass.c: step_forward_to_z and step_backward): the gradients zeroed, the
 * batch uploaded, the injection (embeddings) forward and its backward. */
static void step_fixed(struct price_run *p)
{
	struct model *m = p->rc.m;
	char err[16];
	model_zero_grads(m);
	(void)model_set_batch(m, p->tok, err, sizeof(err)); /* ids are 0 */
	model_inject_forward(m);
	model_inject_backward(m);
}

/* One call of unit i, its milliseconds (price_clock.sample). */
static double sample(void *ctx, int i)
{
	struct price_run *p = ctx;
	const struct unit *u = &p->u[i];
	struct backend *be = p->rc.be;
	struct model *m = p->rc.m;
	if (u->kind == U_SOLVER || u->kind == U_ANDERSON)
		price_solver_reset(&p->ps, u->arg, u->kind == U_ANDERSON);
	if (u->kind == U_HEAD_BWD)
		model_head_forward(m, p->rc.z);
	be_sync(be);
	be_timer_mark(be, 0);
	switch (u->kind) {
	case U_BLOCK:
		block_unit_run(m, &p->bb, (enum block_unit)u->arg);
		break;
	case U_SOLVER:
		price_solver_update(&p->ps, u->arg);
		break;
	case U_ANDERSON:
		price_solver_anderson(&p->ps, u->arg, p->lambda, p->beta);
		break;
	case U_HEAD_FWD:
		model_head_forward(m, p->rc.z);
		break;
	case U_HEAD_BWD:
		model_head_backward(m);
		break;
	case U_HEAD_TRAIN:
		model_head_forward_train(m, p->rc.z);
		model_head_backward(m);
		break;
	case U_FIXED:
		step_fixed(p);
		break;
	case U_OPT:
		be_norm(be, m->grad_buf, m->n_param_elems);
		be_adam_host(be, m->param_buf, m->grad_buf, p->am, p->av,
			     m->n_param_elems, 0.0, 0.9, 0.999, 1e-8, 0.0, 1);
		break;
	case U_ATTN:
		model_sel_recompute(m, p->sel_scratch, p->sel_tape);
		break;
	case U_HOST:
		be_copy_async(be, p->hhost, p->hdev, p->hbytes, 0);
		be_copy_wait(be, 0);
		be_copy_async(be, p->hdev, p->hhost, p->hbytes, 0);
		be_copy_wait(be, 0);
		break;
	}
	be_timer_mark(be, 1);
	return be_timer_elapsed_ms(be, 0, 1);
}

static double now_s(void *ctx)
{
	struct timespec t;
	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void run_free(struct price_run *p)
{
	struct backend *be = p->rc.be;
	if (be) {
		block_bufs_free(be, &p->bb);
		if (p->ps.be)
			price_solver_free(&p->ps);
		backend_free(be, p->am);
		backend_free(be, p->av);
		backend_free(be, p->hdev);
		backend_free(be, p->hhost);
		backend_free(be, p->sel_tape);
		backend_free(be, p->sel_scratch);
	}
	free(p->tok);
	run_ctx_destroy(&p->rc);
	memset(p, 0, sizeof(*p));
}

/* The solver's samples and segments (methods/deq.c params_of). */
static void solver_layout(const struct bench_config *cfg, const struct model *m,
			  int *S, int *P)
{
	int per = cfg->method.opts.deq.solver_batching == BATCHING_PER_SAMPLE;
	*S = per ? m->B : 1;
	*P = per ? m->state_parts : 1;
}

/* attn_recompute's buffers, for a model with selective tapes: a
 * selective tape written by one forward, and the scratch. 0, or -1 when
 * out of memory. */
static int sel_setup(struct price_run *p)
{
	struct model *m = p->rc.m;
	if (!model_has_selective(m))
		return 0;
	p->sel_tape =
	    backend_alloc_bytes(p->rc.be, model_sel_tape_bytes(m), MEM_DEPTH);
	p->sel_scratch = backend_alloc_bytes(
	    p->rc.be, model_sel_scratch_bytes(m), MEM_DEPTH);
	if (!p->sel_tape || !p->sel_scratch)
		return -1;
	model_block_forward_sel(m, p->bb.zo, p->bb.z, m->u, p->sel_tape);
	be_sync(p->rc.be);
	return 0;
}

/* Backend, model, method and the units' buffers of cfg. 0, or -1 with
 * err (p freed). */
static int run_setup(struct price_run *p, const struct bench_config *cfg, int V,
		     char *err, size_t errlen)
{
	int S, P;
	struct model *m;
	memset(p, 0, sizeof(*p));
	if (run_ctx_create(&p->rc, cfg, V, err, errlen) != 0)
		return -1;
	m = p->rc.m;
	p->tok = calloc((size_t)m->B * (size_t)(m->T + 1), sizeof(int32_t));
	if (!p->tok || model_set_batch(m, p->tok, err, errlen) != 0)
		goto oom;
	solver_layout(cfg, m, &S, &P);
	p->am = backend_alloc(p->rc.be, m->n_param_elems, MEM_OPTIMIZER);
	p->av = backend_alloc(p->rc.be, m->n_param_elems, MEM_OPTIMIZER);
	if (block_bufs_alloc(p->rc.be, m, &p->bb) != 0 || !p->am || !p->av ||
	    price_solver_alloc(&p->ps, p->rc.be, m->n_state, S, P,
			       broyden_hmax(cfg), anderson_m(cfg),
			       cfg->method.opts.deq.solver_kernels ==
				   SOLVER_KERNELS_FUSED) != 0)
		goto oom;
	p->lambda = cfg->method.opts.deq.anderson_lambda;
	p->beta = cfg->method.opts.deq.anderson_beta;
	be_fill(p->rc.be, p->am, 0.0, m->n_param_elems);
	be_fill(p->rc.be, p->av, 0.0, m->n_param_elems);
	{ /* offload copies tapes on every backend (the CPU's: memcpy) */
		p->hbytes = model_tape_bytes(m);
		p->hdev = backend_alloc_bytes(p->rc.be, p->hbytes, MEM_DEPTH);
		p->hhost = backend_alloc_bytes(p->rc.be, p->hbytes, MEM_HOST);
		if (!p->hdev || !p->hhost)
			goto oom;
	}
	if (sel_setup(p) != 0)
		goto oom;
	units_of(p, cfg);
	return 0;
oom:
	snprintf(err, errlen,
		 "out of memory setting up the units' buffers; price a "
		 "smaller config");
	run_free(p);
	return -1;
}

/* The shape the prices hold for (SCHEMA.md §Price records `shape`). */
static json_t *shape_json(const struct bench_config *cfg,
			  const struct price_run *p)
{
	const struct model *m = p->rc.m;
	return json_pack(
	    "{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:I, s:I, s:i, s:i, s:s, s:s}",
	    "model", model_kind_name(cfg->model.kind), "d_model",
	    cfg->model.d_model, "n_heads", cfg->model.n_heads, "d_ff",
	    cfg->model.d_ff, "seq_len", m->T, "batch_size", m->B, "vocab_size",
	    m->cfg.vocab_size, "n_params", (json_int_t)m->n_param_elems,
	    "state_elems", (json_int_t)m->n_state, "samples", p->ps.S, "parts",
	    p->ps.P, "precision", dq_precision_name(cfg->model.precision),
	    "solver_kernels",
	    solver_kernels_name(cfg->method.opts.deq.solver_kernels));
}

/* How the prices were measured (`measure`). */
static json_t *measure_json(const struct price_opts *o, int units)
{
	return json_pack(
	    "{s:f, s:f, s:i, s:i, s:s, s:I, s:i, s:o}", "cap_s", o->cap_s,
	    "rel", o->rel, "warmup_rounds", o->warmup, "min_rounds",
	    PRICE_MIN_ROUNDS, "interval", "order-statistic", "seed",
	    (json_int_t)(o->seed & 0x7fffffffffffffffull), "units", units,
	    "core", o->core >= 0 ? json_integer(o->core) : json_null());
}

/* The fields every record of this configuration shares (a template the
 * unit records copy). */
static json_t *common_json(const struct bench_config *cfg,
			   const struct price_run *p, const char *source,
			   const struct price_opts *o, const char *started)
{
	json_t *r = json_object();
	json_object_set_new(r, "schema", json_integer(RECORD_SCHEMA));
	json_object_set_new(r, "kind", json_string("price"));
	json_object_set_new(r, "impl", json_string("deqbench"));
	json_object_set_new(r, "started_at", json_string(started));
	run_record_set_now(r, "finished_at");
	json_object_set_new(r, "source",
			    source ? json_string(source) : json_null());
	json_object_set_new(r, "config", config_to_json(cfg));
	json_object_set_new(r, "shape", shape_json(cfg, p));
	json_object_set_new(r, "measure", measure_json(o, p->nu));
	json_object_set_new(r, "host", env_host_json());
	json_object_set_new(
	    r, "device",
	    env_device_json(p->rc.be, config_device_name(cfg->device),
			    cfg->model.precision == DQ_PREC_TF32));
	json_object_set_new(r, "build", env_build_json());
	return r;
}

static json_t *num_or_null(int have, double x)
{
	return have ? json_real(x) : json_null();
}

/* The record of unit u (series s; scale: ms -> the unit's measure, 1 per
 * call or 1 / bytes per byte) from the template. */
static json_t *unit_json(const json_t *tmpl, const struct unit *u,
			 const struct price_series *s, double scale,
			 size_t call_bytes, int rounds)
{
	json_t *r = json_deep_copy(tmpl);
	json_object_set_new(r, "unit", json_string(u->name));
	int solver = u->kind == U_SOLVER || u->kind == U_ANDERSON;
	json_object_set_new(r, "h",
			    solver ? json_integer(u->arg) : json_null());
	json_object_set_new(
	    r, "solver",
	    solver ? json_string(u->kind == U_SOLVER ? "broyden" : "anderson")
		   : json_null());
	json_object_set_new(r, "per",
			    json_string(u->kind == U_HOST ? "byte" : "call"));
	json_object_set_new(r, "call_bytes",
			    call_bytes ? json_integer((json_int_t)call_bytes)
				       : json_null());
	json_object_set_new(r, "timed", json_boolean(s != NULL));
	json_object_set_new(r, "median_ms",
			    json_real(s ? s->median * scale : 0));
	json_object_set_new(
	    r, "lo_ms",
	    num_or_null(s && s->have_interval, s ? s->lo * scale : 0));
	json_object_set_new(
	    r, "hi_ms",
	    num_or_null(s && s->have_interval, s ? s->hi * scale : 0));
	json_object_set_new(r, "rounds", json_integer(s ? rounds : 0));
	json_object_set_new(r, "converged", json_boolean(s && s->done));
	json_object_set_new(r, "fit", json_null());
	return r;
}

/* The fit a + b h over solver k's solver_update series (k: U_SOLVER or
 * U_ANDERSON), set on each of their records (recs[i] is unit i's). */
static void set_fit(const struct price_run *p, const struct price_series *s,
		    json_t **recs, enum unit_kind k)
{
	double h[MAX_UNITS], y[MAX_UNITS], a, b;
	int n = 0;
	for (int i = 0; i < p->nu; i++)
		if (p->u[i].kind == k) {
			h[n] = p->u[i].arg;
			y[n++] = s[i].median;
		}
	if (n == 1) { /* hmax = 1: the price is flat */
		a = y[0];
		b = 0;
	} else
		price_fit_line(h, y, n, &a, &b);
	for (int i = 0; i < p->nu; i++)
		if (p->u[i].kind == k)
			json_object_set_new(
			    recs[i], "fit",
			    json_pack("{s:f, s:f}", "a_ms", a, "b_ms", b));
}

int price_config(const struct bench_config *cfg, int V, const char *source,
		 const struct price_opts *o, json_t *out, char *err,
		 size_t errlen)
{
	struct price_run p;
	struct price_series s[MAX_UNITS];
	struct price_clock clk = {sample, now_s, &p};
	json_t *recs[MAX_UNITS + 1], *tmpl;
	char started[32];
	int rounds = 0, rc;
	time_t t = time(NULL);
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(started, sizeof(started), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (run_setup(&p, cfg, V, err, errlen) != 0)
		return -1;
	run_ctx_warn_blas(cfg->device);
	rc = price_measure(p.nu, &clk, o->warmup, o->cap_s, o->rel,
			   o->max_rounds, o->seed, s, &rounds, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "out of host memory for the samples");
		price_series_free(s, p.nu);
		run_free(&p);
		return -1;
	}
	tmpl = common_json(cfg, &p, source, o, started);
	for (int i = 0; i < p.nu; i++)
		recs[i] = unit_json(
		    tmpl, &p.u[i], &s[i],
		    p.u[i].kind == U_HOST ? 1.0 / (2.0 * (double)p.hbytes)
					  : 1.0,
		    p.u[i].kind == U_HOST ? 2 * p.hbytes : 0, rounds);
	set_fit(&p, s, recs, U_SOLVER);
	set_fit(&p, s, recs, U_ANDERSON);
	for (int i = 0; i < p.nu; i++)
		json_array_append_new(out, recs[i]);
	json_decref(tmpl);
	price_series_free(s, p.nu);
	run_free(&p);
	return 0;
}
