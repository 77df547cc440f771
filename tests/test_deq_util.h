/* test_deq_util.h — helpers shared by the method tests (test_methods.c,
 * test_deq_grad.c, test_deq_tools.c, test_trellis.c): models and methods on
 * the CPU backends, seeded tokens, method configs, a contraction per model
 * kind, one training step as the runner takes it and what it leaves, the
 * comparisons of two such steps, and central differences of a scalar
 * function of the parameters at sampled coordinates. */
#ifndef DQ_TEST_DEQ_UTIL_H
#define DQ_TEST_DEQ_UTIL_H

#include <stdio.h>
#include <string.h>

#include "../methods/checkpoint.h"
#include "../methods/deq.h"
#include "methods/method.h"
#include "test_model_util.h"

/* The model the method tests start from: kind at shape s on be, init
 * seed 11. */
static inline struct model *deq_model(struct backend *be, enum model_kind kind,
				      struct shape s)
{
	return make_model(be, kind, s, 11);
}

/* Random tokens (B, T+1) loaded into m, drawn from rng_state = seed (the
 * test's own stream is left as it was). */
static inline void set_tokens(struct model *m, uint64_t seed)
{
	uint64_t save = rng_state;
	rng_state = seed;
	int32_t *t = random_tokens(m);
	rng_state = save;
	load_tokens(m, t);
	free(t);
}

/* deq_model on a fresh backend `name` ("cpu", "cpu64") with a batch of
 * tokens from seed `tokens` (set_tokens); close_model destroys both. */
static inline struct model *open_model(const char *name, enum model_kind kind,
				       struct shape s, uint64_t tokens)
{
	struct model *m = deq_model(make_be(name), kind, s);
	set_tokens(m, tokens);
	return m;
}

static inline void close_model(struct model *m)
{
	struct backend *be = m->be;
	model_destroy(m);
	backend_destroy(be);
}

/* method_create of c on m (its random stream as method_create leaves it);
 * fails the test on error. */
static inline struct method *new_method(struct model *m, struct method_config c)
{
	struct method *me = NULL;
	char err[256] = "";
	method_config_resolve(&c);
	cr_assert_eq(method_create(&me, m, &c, err, sizeof(err)), 0, "%s", err);
	return me;
}

/* new_method, its random stream then seeded with seed (method_seed). */
static inline struct method *make_method(struct model *m,
					 struct method_config c, uint64_t seed)
{
	struct method *me = new_method(m, c);
	method_seed(me, seed);
	return me;
}

/* The defaults with method k, layers L and checkpoint segment kk. */
static inline struct method_config cfg_of(int k, int L, int kk)
{
	struct method_config c;
	method_config_defaults(&c);
	c.method = k;
	c.layers = L;
	checkpoint_config(&c)->k = kk;
	return c;
}

static inline struct method_config deq_cfg(enum b_mode b)
{
	struct method_config c;
	method_config_defaults(&c);
	c.method = deq_kind();
	deq_config(&c)->b_mode = b;
	return c;
}

/* deq with forward solver fs and backward solver bs, both stopped at the
 * absolute residual tol or after cap evaluations, the other keys at their
 * defaults. */
static inline struct method_config
deq_solvers(enum solver_kind fs, enum solver_kind bs, double tol, int cap)
{
	struct method_config c = cfg_of(deq_kind(), 0, 0);
	deq_config(&c)->f_solver = fs;
	deq_config(&c)->b_solver = bs;
	deq_config(&c)->f_tol = deq_config(&c)->b_tol = tol;
	deq_config(&c)->f_stop_mode = deq_config(&c)->b_stop_mode = STOP_ABS;
	deq_config(&c)->f_max_iter = deq_config(&c)->b_max_iter = cap;
	return c;
}

static inline double *download(struct backend *be, const void *p, size_t n)
{
	double *h = host(n);
	down(be, h, p, n);
	return h;
}

/* Multiplies parameter `name` by s. */
static inline void scale_param(struct model *m, const char *name, double s)
{
	const struct model_param *p = model_param_find(m, name);
	cr_assert_not_null(p);
	be_scale(m->be, dq_at(m->be, m->param_buf, p->offset), s, p->numel);
}

/* The transformer block at init is not a contraction: post-LN makes f
 * nearly scale-free in z, and with N(0, 0.02) weights the residual path
 * z → LN1(z + …) dominates. A strong input injection makes the attention
 * output and the LayerNorm inputs depend mostly on u, the regime a trained
 * DEQ-Transformer reaches. Measured on the odd shape (fixed-point
 * iteration's residual ratio per step, cpu64): strong = inject.weight
 * × 300, embed.weight × 30, ln2.weight × 0.3 gives ρ ≈ 0.38 (z* to 1e-12 in
 * ~30 plain iterations, ~15 Broyden); weak = × 60, × 10, × 0.5 gives
 * ρ ≈ 0.975 (nothing converges within 31 iterations, nothing diverges). */
static inline void make_contractive_transformer(struct model *m, int strong)
{
	scale_param(m, "inject.weight", strong ? 300.0 : 60.0);
	scale_param(m, "embed.weight", strong ? 30.0 : 10.0);
	scale_param(m, "block.ln2.weight", strong ? 0.3 : 0.5);
}

/* A contraction: tanh_cell with ‖W‖_F = 0.45 (so ‖W‖₂ ≤ 0.45); the
 * transformer with the strong injection of make_contractive_transformer
 * (ρ ≈ 0.38). */
static inline void make_contractive(struct model *m)
{
	if (m->cfg.kind == MODEL_TANH_CELL) {
		const struct model_param *p =
		    model_param_find(m, "cell.weight");
		void *w = dq_at(m->be, m->param_buf, p->offset);
		double f = be_norm(m->be, w, p->numel);
		be_scale(m->be, w, 0.45 / f, p->numel);
	} else {
		make_contractive_transformer(m, 1);
	}
}

/* open_model, then made a contraction by make_contractive. */
static inline struct model *open_contractive(const char *name,
					     enum model_kind kind,
					     struct shape s, uint64_t tokens)
{
	struct model *m = open_model(name, kind, s, tokens);
	make_contractive(m);
	return m;
}

/* One training step as the runner takes it: the loss and gradients (left
 * in m->grad_buf). z is a caller buffer of n_state elements; z* of the
 * forward is copied to zs_host (n_state doubles) when not NULL. Returns
 * the loss. */
static inline double step(struct model *m, struct method *me, void *z,
			  double *zs_host)
{
	model_zero_grads(m);
	model_inject_forward(m);
	method_forward(me, m->u, z, 1);
	if (zs_host)
		down(m->be, zs_host, method_fixed_point(me), m->n_state);
	double loss = model_head_forward(m, z);
	model_head_backward(m);
	method_backward(me, m->gz, m->gu);
	model_inject_backward(m);
	return loss;
}

/* What one training step left on the host: the loss, the parameter
 * gradients (n_param_elems), dL/du (n_u) and the output z (n_state), with
 * the method's stats and resolved config. */
struct step_out {
	double loss;
	double *g, *gu, *z;
	struct method_stats st;
	struct method_config cfg;
};

/* One step of a fresh method c (new_method) on m's batch; z is a caller
 * buffer of n_state elements. Free with step_out_free. */
static inline struct step_out step_of(struct model *m, struct method_config c,
				      void *z)
{
	struct step_out r;
	struct method *me = new_method(m, c);
	r.loss = step(m, me, z, NULL);
	r.g = download(m->be, m->grad_buf, m->n_param_elems);
	r.gu = download(m->be, m->gu, m->n_u);
	r.z = download(m->be, z, m->n_state);
	r.st = *method_get_stats(me);
	r.cfg = *method_get_config(me);
	method_destroy(me);
	return r;
}

static inline void step_out_free(struct step_out *r)
{
	free(r->g);
	free(r->gu);
	free(r->z);
}

/* b took the same block calls on the same values in the same order as a:
 * its loss, z, dL/du and every gradient are a's, bit for bit. */
static inline void assert_same_step(const struct model *m,
				    const struct step_out *a,
				    const struct step_out *b, const char *what)
{
	cr_assert_eq(memcmp(&a->loss, &b->loss, sizeof(double)), 0,
		     "%s: loss %.17g vs %.17g", what, a->loss, b->loss);
	cr_assert_eq(memcmp(a->z, b->z, m->n_state * sizeof(double)), 0,
		     "%s: z differs", what);
	cr_assert_eq(memcmp(a->gu, b->gu, m->n_u * sizeof(double)), 0,
		     "%s: dL/du differs", what);
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		cr_assert_eq(memcmp(a->g + p->offset, b->g + p->offset,
				    p->numel * sizeof(double)),
			     0, "%s: grad %s differs", what, p->name);
	}
}

/* b, a deq step solved to tolerances ~1e-12, against a, the same loss by
 * unrolling to convergence: the loss within 1e-10 relative, z within 1e-10
 * and dL/du and every gradient tensor within 1e-7 of their largest entry
 * (the callers argue the margins; a missing or doubled term is O(1)). */
static inline void assert_step_near(const struct model *m,
				    const struct step_out *a,
				    const struct step_out *b, const char *what)
{
	cr_assert(fabs(a->loss - b->loss) <= 1e-10 * fabs(a->loss),
		  "%s: loss %.15g vs %.15g", what, a->loss, b->loss);
	cr_assert_leq(rel_max_err(b->z, a->z, m->n_state), 1e-10, "%s: z",
		      what);
	cr_assert_leq(rel_max_err(b->gu, a->gu, m->n_u), 1e-7, "%s: dL/du: %g",
		      what, rel_max_err(b->gu, a->gu, m->n_u));
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		double e =
		    rel_max_err(b->g + p->offset, a->g + p->offset, p->numel);
		cr_assert_leq(e, 1e-7, "%s: grad %s rel err %g", what, p->name,
			      e);
	}
}

/* Unrolls L layers, then takes a deq step with c on m's batch (z: a
 * buffer of n_state elements): both of deq's solves converged within f_tol
 * and b_tol, and its step is near the unrolled one (assert_step_near).
 * Returns deq's stats. */
static inline struct method_stats
deq_matches_unroll(struct model *m, void *z, struct method_config c, int L)
{
	struct step_out un =
	    step_of(m, cfg_of(method_kind_parse("unroll"), L, 0), z);
	struct step_out dq = step_of(m, c, z);
	const struct method_stats *st = &dq.st;
	char what[64];
	snprintf(what, sizeof(what), "%s/%s",
		 solver_kind_name(deq_config(&c)->f_solver),
		 solver_kind_name(deq_config(&c)->b_solver));
	cr_assert(st->fwd.converged &&
		      st->fwd.residual <= deq_config(&c)->f_tol,
		  "%s forward: %d iters, residual %g", what, st->fwd.iters,
		  st->fwd.residual);
	cr_assert(st->bwd.converged &&
		      st->bwd.residual <= deq_config(&c)->b_tol,
		  "%s backward: %d iters, residual %g", what, st->bwd.iters,
		  st->bwd.residual);
	assert_step_near(m, &un, &dq, what);
	struct method_stats r = dq.st;
	step_out_free(&un);
	step_out_free(&dq);
	return r;
}

/* Checks analytic gradient g (n_param_elems, host) against central
 * differences of phi(ctx) in every parameter tensor at 6 sampled
 * coordinates (rng_state = 99, the test's own stream kept); h = 1e-6
 * relative to the coordinate's size (at least 1e-6); a coordinate off by
 * more than rtol·max|g of its tensor| + atol is retried at h/16 and h/256
 * (a ReLU kink within h; a wrong formula does not improve). Returns the
 * number of tensors whose gradient was not identically 0. */
static inline int fd_params(struct model *m, const double *g, double rtol,
			    double atol, double (*phi)(void *), void *ctx,
			    const char *what)
{
	struct backend *be = m->be;
	double *p = download(be, m->param_buf, m->n_param_elems);
	uint64_t save = rng_state;
	int nonzero = 0;
	rng_state = 99;
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *pp = &m->params[i];
		double gmax = 0;
		for (size_t j = 0; j < pp->numel; j++)
			gmax = fmax(gmax, fabs(g[pp->offset + j]));
		nonzero += gmax > 0;
		for (int t = 0; t < 6; t++) {
			size_t j = pp->offset +
				   (size_t)(rnd_u01() * (double)pp->numel);
			double h = 1e-6 * fmax(1.0, fabs(p[j])), fd = 0;
			for (int r = 0; r < 3; r++, h /= 16) {
				double v = p[j] + h;
				up(be, dq_at(be, m->param_buf, j), &v, 1);
				double fp = phi(ctx);
				v = p[j] - h;
				up(be, dq_at(be, m->param_buf, j), &v, 1);
				double fm = phi(ctx);
				up(be, dq_at(be, m->param_buf, j), &p[j], 1);
				fd = (fp - fm) / (2 * h);
				if (fabs(fd - g[j]) <= rtol * gmax + atol)
					break;
			}
			cr_assert(fabs(fd - g[j]) <= rtol * gmax + atol,
				  "%s %s[%zu]: analytic %.12g fd %.12g (max "
				  "%.3g)",
				  what, pp->name, j - pp->offset, g[j], fd,
				  gmax);
		}
	}
	rng_state = save;
	free(p);
	return nonzero;
}

/* loss_only's arguments: m with its batch, a method and a z buffer. */
struct eval_fx {
	struct model *m;
	struct method *me;
	void *z;
};

/* The loss of an evaluation forward: what the methods' finite-difference
 * checks differentiate (fd_params's phi). */
static inline double loss_only(void *ctx)
{
	struct eval_fx *f = ctx;
	model_inject_forward(f->m);
	method_forward(f->me, f->m->u, f->z, 0);
	return model_head_forward(f->m, f->z);
}

/* A device buffer of n_state elements (tagged MEM_HEAD). */
static inline void *dev_state(struct model *m)
{
	void *z = backend_alloc(m->be, m->n_state, MEM_HEAD);
	cr_assert_not_null(z);
	return z;
}

/* Shapes {B, T, d, H, F, V} of the depth-method tests (test_revolve.c,
 * test_offload.c): odd sizes, powers of two, and a TrellisNet's. */
static const struct shape shape_odd = {3, 5, 12, 3, 20, 17};
static const struct shape shape_pow2 = {2, 8, 16, 4, 32, 32};
static const struct shape shape_trellis = {3, 5, 6, 0, 0, 17};

/* z of an inference forward (c.inference set here) of a method made from
 * c on m's current batch, downloaded (free it); *fwd its forward
 * evaluations when non-NULL. Checks that inference puts nothing in host
 * memory. */
static inline double *inference_z(struct model *m, struct method_config c,
				  void *z, long *fwd)
{
	double *h;
	struct method *me;
	c.inference = 1;
	me = new_method(m, c);
	cr_assert_eq(m->be->mem.live[MEM_HOST], 0);
	model_inject_forward(m);
	method_forward(me, m->u, z, 0);
	if (fwd)
		*fwd = method_get_stats(me)->forward_evals;
	h = download(m->be, z, m->n_state);
	method_destroy(me);
	return h;
}

/* Central differences of the whole loss on cpu64 at sampled coordinates of
 * every tensor of a contractive model of kind at shape s trained by a
 * method made from c, as test_methods' check_fd for unroll: h = 1e-6
 * relative to the coordinate, truncation below 1e-9, rounding ~3e-10;
 * tolerance 1e-6 of the tensor's largest gradient + 1e-9 (a wrong term is
 * O(1)). make_contractive's strong injection: test_methods explains why
 * the plain init is a poor point for quotients. */
static inline void check_fd_method(enum model_kind kind, struct shape s,
				   struct method_config c, const char *what)
{
	struct model *m = open_contractive("cpu64", kind, s, 5);
	struct eval_fx f = {m, new_method(m, c), dev_state(m)};
	step(m, f.me, f.z, NULL);
	double *g = download(m->be, m->grad_buf, m->n_param_elems);
	cr_assert_gt(fd_params(m, g, 1e-6, 1e-9, loss_only, &f, what), 0);
	free(g);
	method_destroy(f.me);
	backend_free(m->be, f.z);
	close_model(m);
}

/* A method of config c on m whose tapes live outside the device totals
 * in category out (MEM_HOST: offload; MEM_MANAGED: managed): at creation
 * and as a step's peaks, depth db and `want` bytes of out, none of the
 * other outside category; the totals hold db and a state buffer only;
 * the step allocates nothing; destroying the method frees it all. */
static inline void assert_outside_memory(struct model *m,
					 struct method_config c, size_t db,
					 enum mem_category out, size_t want,
					 int L)
{
	struct backend *be = m->be;
	enum mem_category other = out == MEM_HOST ? MEM_MANAGED : MEM_HOST;
	size_t dev0 = be->mem.live_total;
	void *z = dev_state(m);
	struct method *me = new_method(m, c);
	cr_assert_eq(be->mem.live[MEM_DEPTH], db, "L=%d", L);
	cr_assert_eq(be->mem.live[out], want, "L=%d", L);
	cr_assert_eq(be->mem.live[other], 0, "L=%d", L);
	cr_assert_eq(be->mem.live_total, dev0 + db + m->n_state * be->elem,
		     "L=%d", L);
	backend_mem_reset_peak(be);
	size_t allocs = be->mem.n_allocs;
	step(m, me, z, NULL);
	cr_assert_eq(be->mem.n_allocs, allocs, "a step allocated");
	cr_assert_eq(be->mem.peak[MEM_DEPTH], db);
	cr_assert_eq(be->mem.peak[out], want);
	method_destroy(me);
	backend_free(be, z);
	cr_assert_eq(be->mem.live[out], 0);
	cr_assert_eq(be->mem.live_total, dev0);
}

#endif
