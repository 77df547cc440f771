/* method.c — what every method shares: config defaults, parsing and
 * validation, the resolved parameters, the depth and solver allocations
 * (method_impl.h), dispatch and statistics. */
#include "method.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/rng.h"
#include "method_impl.h"

/* ------------------------------------------------------------- names */

static const char *const method_names[] = {"unroll", "checkpoint", "deq"};
static const char *const solver_names[] = {"broyden", "anderson",
					   "fixed_point"};
static const char *const stop_names[] = {"abs", "rel"};
static const char *const bmode_names[] = {"ift", "jfb", "phantom"};
static const char *const scope_names[] = {"batch", "sample"};
static const char *const batching_names[] = {"per_sample", "global"};

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int parse_in(const char *s, const char *const *names, int n)
{
	for (int i = 0; s && i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return i;
	return -1;
}

int method_kind_parse(const char *s)
{
	return parse_in(s, method_names, NELEM(method_names));
}

int solver_kind_parse(const char *s)
{
	return parse_in(s, solver_names, NELEM(solver_names));
}

int stop_mode_parse(const char *s)
{
	return parse_in(s, stop_names, NELEM(stop_names));
}

int b_mode_parse(const char *s)
{
	return parse_in(s, bmode_names, NELEM(bmode_names));
}

int stop_scope_parse(const char *s)
{
	return parse_in(s, scope_names, NELEM(scope_names));
}

int solver_batching_parse(const char *s)
{
	return parse_in(s, batching_names, NELEM(batching_names));
}

#define NAME_OF(arr, v)                                                        \
	(((int)(v) >= 0 && (int)(v) < NELEM(arr)) ? arr[(int)(v)] : "?")

const char *method_kind_name(enum method_kind k)
{
	return NAME_OF(method_names, k);
}

const char *solver_kind_name(enum solver_kind k)
{
	return NAME_OF(solver_names, k);
}

const char *stop_mode_name(enum stop_mode s)
{
	return NAME_OF(stop_names, s);
}

const char *b_mode_name(enum b_mode b)
{
	return NAME_OF(bmode_names, b);
}

const char *stop_scope_name(enum stop_scope s)
{
	return NAME_OF(scope_names, s);
}

const char *solver_batching_name(enum solver_batching b)
{
	return NAME_OF(batching_names, b);
}

/* ------------------------------------------------------------- config */

/* Defaults: the DEQ-Transformer's training thresholds (Bai et al. 2019:
 * 30 forward Broyden iterations, 40 backward), full Broyden history as in
 * the paper, relative residual 1e-3 (scale-free, so one ε means the same
 * at every width), torchdeq's Anderson settings (m 5, λ 1e-4, β 1).
 * Jacobian regularisation off (γ = 0; p = 1 so that γ > 0 alone turns it
 * on for every step); phantom k = 5, λ = 0.5 (torchdeq recommends τ
 * 0.5–0.7 for MDEQ); no spectral radius (it costs n of depth memory). */
void method_config_defaults(struct method_config *c)
{
	memset(c, 0, sizeof(*c));
	c->method = METHOD_UNROLL;
	c->layers = 12;
	c->k = 0;
	c->f_solver = SOLVER_BROYDEN;
	c->f_tol = 1e-3;
	c->f_max_iter = 30;
	c->f_stop_mode = STOP_REL;
	c->f_history = 0;
	c->b_mode = BMODE_IFT;
	c->b_solver = SOLVER_BROYDEN;
	c->b_tol = 1e-3;
	c->b_max_iter = 40;
	c->b_stop_mode = STOP_REL;
	c->b_history = 0;
	c->anderson_m = 5;
	c->anderson_lambda = 1e-4;
	c->anderson_beta = 1.0;
	c->solver_batching = BATCHING_PER_SAMPLE;
	c->f_stop_scope = SCOPE_BATCH;
	c->b_stop_scope = SCOPE_BATCH;
	c->protect_thres = 0;
	c->stall_window = 0;
	c->jac_loss_weight = 0.0;
	c->jac_loss_freq = 1.0;
	c->jac_fd_eta = 0.0;
	c->phantom_steps = 5;
	c->phantom_tau = 0.5;
	c->spectral_radius_iters = 0;
}

#define FAIL(...)                                                              \
	do {                                                                   \
		snprintf(err, errlen, __VA_ARGS__);                            \
		return -1;                                                     \
	} while (0)

/* The keys of Jacobian regularisation, phantom gradients and the spectral
 * radius (deq only). */
static int validate_jac(const struct method_config *c, char *err, size_t errlen)
{
	if (!(c->jac_loss_weight >= 0) || !isfinite(c->jac_loss_weight))
		FAIL("jac_loss_weight=%g must be a finite number >= 0 (0 = "
		     "off)",
		     c->jac_loss_weight);
	if (!(c->jac_loss_freq >= 0 && c->jac_loss_freq <= 1))
		FAIL("jac_loss_freq=%g must be in [0, 1] (the probability a "
		     "step applies the regulariser)",
		     c->jac_loss_freq);
	if (!(c->jac_fd_eta >= 0 && c->jac_fd_eta <= 1))
		FAIL("jac_fd_eta=%g must be in [0, 1] (0 = cube root of the "
		     "device's machine epsilon)",
		     c->jac_fd_eta);
	if (c->phantom_steps < 1)
		FAIL("phantom_steps=%d must be >= 1", c->phantom_steps);
	if (!(c->phantom_tau > 0 && c->phantom_tau <= 1))
		FAIL("phantom_tau=%g must be in (0, 1]", c->phantom_tau);
	if (c->spectral_radius_iters < 0)
		FAIL("spectral_radius_iters=%d must be >= 0 (0 = off)",
		     c->spectral_radius_iters);
	return 0;
}

int method_config_validate(const struct method_config *c, char *err,
			   size_t errlen)
{
	if ((int)c->method < 0 || (int)c->method >= NELEM(method_names))
		FAIL("method=%d is unknown; use unroll, checkpoint or deq",
		     (int)c->method);
	if (c->method != METHOD_DEQ && c->layers < 1)
		FAIL("layers=%d must be >= 1", c->layers);
	if (c->method == METHOD_CHECKPOINT && (c->k < 0 || c->k > c->layers))
		FAIL("k=%d must be in 1..layers=%d, or auto (round(sqrt("
		     "layers)))",
		     c->k, c->layers);
	if (c->method != METHOD_DEQ)
		return 0;
	if ((int)c->f_solver < 0 || (int)c->f_solver >= NELEM(solver_names))
		FAIL("f_solver=%d is unknown; use broyden, anderson or "
		     "fixed_point",
		     (int)c->f_solver);
	if ((int)c->b_solver < 0 || (int)c->b_solver >= NELEM(solver_names))
		FAIL("b_solver=%d is unknown; use broyden, anderson or "
		     "fixed_point",
		     (int)c->b_solver);
	if ((int)c->f_stop_mode < 0 || (int)c->f_stop_mode > 1)
		FAIL("f_stop_mode=%d is unknown; use abs or rel",
		     (int)c->f_stop_mode);
	if ((int)c->b_stop_mode < 0 || (int)c->b_stop_mode > 1)
		FAIL("b_stop_mode=%d is unknown; use abs or rel",
		     (int)c->b_stop_mode);
	if ((int)c->b_mode < 0 || (int)c->b_mode >= NELEM(bmode_names))
		FAIL("b_mode=%d is unknown; use ift, jfb or phantom",
		     (int)c->b_mode);
	if (!(c->f_tol > 0) || !isfinite(c->f_tol))
		FAIL("f_tol=%g must be a finite number > 0 (e.g. 1e-3)",
		     c->f_tol);
	if (!(c->b_tol > 0) || !isfinite(c->b_tol))
		FAIL("b_tol=%g must be a finite number > 0 (e.g. 1e-3)",
		     c->b_tol);
	if (c->f_max_iter < 1)
		FAIL("f_max_iter=%d must be >= 1", c->f_max_iter);
	if (c->b_max_iter < 1)
		FAIL("b_max_iter=%d must be >= 1", c->b_max_iter);
	if (c->f_history < 0)
		FAIL("f_history=%d must be >= 1 (or 0 for f_max_iter)",
		     c->f_history);
	if (c->b_history < 0)
		FAIL("b_history=%d must be >= 1 (or 0 for b_max_iter)",
		     c->b_history);
	if (c->anderson_m < 1 || c->anderson_m > 1000)
		FAIL("anderson_m=%d must be in 1..1000", c->anderson_m);
	if (!(c->anderson_lambda >= 0) || !isfinite(c->anderson_lambda))
		FAIL("anderson_lambda=%g must be a finite number >= 0",
		     c->anderson_lambda);
	if (!(c->anderson_beta > 0) || !isfinite(c->anderson_beta))
		FAIL("anderson_beta=%g must be a finite number > 0",
		     c->anderson_beta);
	if ((int)c->solver_batching < 0 || (int)c->solver_batching > 1)
		FAIL("solver_batching=%d is unknown; use per_sample or global",
		     (int)c->solver_batching);
	if ((int)c->f_stop_scope < 0 || (int)c->f_stop_scope > 1 ||
	    (int)c->b_stop_scope < 0 || (int)c->b_stop_scope > 1)
		FAIL("f_stop_scope/b_stop_scope must be batch or sample");
	if (!(c->protect_thres >= 0) || !isfinite(c->protect_thres) ||
	    (c->protect_thres > 0 && c->protect_thres < 1))
		FAIL("protect_thres=%g must be 0 (off) or a finite number >= 1",
		     c->protect_thres);
	if (c->stall_window < 0 || c->stall_window == 1)
		FAIL("stall_window=%d must be 0 (off) or >= 2",
		     c->stall_window);
	return validate_jac(c, err, errlen);
}

/* k = 0 → round(sqrt(L)); histories 0 → max_iter. */
static void resolve(struct method_config *c)
{
	if (c->method == METHOD_CHECKPOINT && c->k == 0) {
		c->k = (int)lround(sqrt((double)c->layers));
		if (c->k < 1)
			c->k = 1;
	}
	if (c->f_history == 0)
		c->f_history = c->f_max_iter;
	if (c->b_history == 0)
		c->b_history = c->b_max_iter;
}

static const struct method_ops *ops_of(enum method_kind k)
{
	switch (k) {
	case METHOD_UNROLL:
		return &method_unroll_ops;
	case METHOD_CHECKPOINT:
		return &method_checkpoint_ops;
	case METHOD_DEQ:
		return &method_deq_ops;
	}
	return NULL;
}

static size_t solver_need(const struct method_layout *l, size_t n)
{
	size_t e = 0;
	for (int i = 0; i < l->n_solve; i++) {
		size_t x = solver_elems(&l->solve[i], n);
		e = x > e ? x : e;
	}
	return e;
}

/* Elements of the tapes and of the states (checkpoints and vectors) of
 * layout l; SIZE_MAX each when they would pass 2^62 (layers=1e5 of a large
 * tape), so sizes saturate instead of wrapping into a small buffer. */
static void depth_elems(const struct model *m, const struct method_layout *l,
			size_t *tapes, size_t *states)
{
	size_t t = model_tape_elems(m), n = m->n_state;
	int ns = l->n_ckpts + l->n_vecs;
	*tapes = (double)l->n_tapes * (double)t >= 0x1p62
		     ? SIZE_MAX
		     : (size_t)l->n_tapes * t;
	*states = (double)ns * (double)n >= 0x1p62 ? SIZE_MAX : (size_t)ns * n;
}

int method_memory(const struct model *m, const struct method_config *cfg,
		  size_t *depth_bytes, size_t *solver_bytes, char *err,
		  size_t errlen)
{
	struct method_config c = *cfg;
	struct method_layout l;
	size_t tapes, states, solver, e = m->be->elem;
	if (method_config_validate(&c, err, errlen) != 0)
		return -1;
	resolve(&c);
	memset(&l, 0, sizeof(l));
	ops_of(c.method)->layout(m, &c, &l);
	depth_elems(m, &l, &tapes, &states);
	solver = solver_need(&l, m->n_state);
	if (tapes == SIZE_MAX || states == SIZE_MAX || solver == SIZE_MAX) {
		snprintf(err, errlen,
			 "method=%s needs more than 2^62 elements of depth or "
			 "solver memory; lower layers, f_history/b_history, "
			 "batch_size or seq_len",
			 method_kind_name(c.method));
		return -1;
	}
	*depth_bytes = e * (tapes + states);
	*solver_bytes = e * solver;
	return 0;
}

/* ------------------------------------------------------------ lifecycle */

int method_create(struct method **out, struct model *m,
		  const struct method_config *cfg, char *err, size_t errlen)
{
	struct method *me;
	*out = NULL;
	if (method_config_validate(cfg, err, errlen) != 0)
		return -1;
	me = calloc(1, sizeof(*me));
	if (!me) {
		snprintf(err, errlen, "out of host memory creating the method");
		return -1;
	}
	me->m = m;
	me->cfg = *cfg;
	me->rng = 1;
	resolve(&me->cfg);
	me->ops = ops_of(me->cfg.method);
	me->ops->layout(m, &me->cfg, &me->lay);
	me->tape_elems = model_tape_elems(m);

	struct backend *be = m->be;
	size_t tapes, states;
	depth_elems(m, &me->lay, &tapes, &states);
	me->tapes = backend_alloc(be, tapes, MEM_DEPTH);
	me->states = backend_alloc(be, states, MEM_DEPTH);
	if (!me->tapes || !me->states) {
		snprintf(err, errlen,
			 "out of device memory for method=%s's depth buffers "
			 "(%d tapes of %zu elements, %d states); lower layers, "
			 "batch_size or seq_len",
			 method_kind_name(me->cfg.method), me->lay.n_tapes,
			 me->tape_elems, me->lay.n_ckpts + me->lay.n_vecs);
		method_destroy(me);
		return -1;
	}
	if (me->cfg.method == METHOD_DEQ &&
	    (me->cfg.jac_loss_weight > 0 ||
	     me->cfg.spectral_radius_iters > 0)) {
		me->host = malloc(sizeof(double) * m->n_state);
		if (!me->host) {
			snprintf(err, errlen,
				 "out of host memory for the Jacobian "
				 "probe (%zu doubles)",
				 m->n_state);
			method_destroy(me);
			return -1;
		}
	}
	if (me->lay.n_solve > 0 &&
	    solver_create(&me->solver, be, m->n_state, me->lay.solve,
			  me->lay.n_solve, err, errlen) != 0) {
		method_destroy(me);
		return -1;
	}
	*out = me;
	return 0;
}

void method_destroy(struct method *me)
{
	if (!me)
		return;
	backend_free(me->m->be, me->tapes);
	backend_free(me->m->be, me->states);
	solver_destroy(me->solver);
	free(me->host);
	free(me);
}

void method_forward(struct method *me, const void *u, void *z, int train)
{
	memset(&me->st, 0, sizeof(me->st));
	me->have_train = train != 0;
	me->eval_forward = train == 0;
	me->u = u; /* backward recomputation reads it; the caller keeps it */
	me->ops->forward(me, u, z, train);
}

void method_backward(struct method *me, const void *gz, void *gu)
{
	if (!me->have_train) {
		fprintf(stderr, "deqbench: method_backward without a training "
				"forward\n");
		abort();
	}
	me->ops->backward(me, gz, gu);
	me->have_train = 0;
}

const struct method_stats *method_get_stats(const struct method *me)
{
	return &me->st;
}

const void *method_fixed_point(const struct method *me)
{
	return me->zstar;
}

const struct method_config *method_get_config(const struct method *me)
{
	return &me->cfg;
}

void method_seed(struct method *me, uint64_t seed)
{
	me->rng = seed;
	me->probe_valid = 0;
}

const double *method_jac_probe(const struct method *me)
{
	return me->probe_valid ? me->host : NULL;
}

double method_u01(struct method *me)
{
	return splitmix64_u01(&me->rng);
}

/* Box–Muller, both outputs of each pair used. O(n) host work: ~n/2 logs,
 * square roots and sin/cos pairs. */
void method_gaussian(struct method *me, double *x, size_t n)
{
	for (size_t i = 0; i < n; i += 2) {
		double r = sqrt(-2.0 * log(method_u01(me)));
		double a = 2.0 * M_PI * method_u01(me);
		x[i] = r * cos(a);
		if (i + 1 < n)
			x[i + 1] = r * sin(a);
	}
}

void method_run_plain(struct method *me, const void *u, const void *z_in,
		      void *z, int n_layers, void *a, void *b)
{
	const void *in = z_in;
	for (int i = 0; i < n_layers; i++) {
		void *out = i == n_layers - 1 ? z : (in == a ? b : a);
		method_f(me, out, in, u, NULL);
		in = out;
	}
}
