/* test_fd.h — the finite-difference harness of the model tests
 * (test_model.c runs it for every model kind; test_trellis.c uses its
 * fixture): a fixture holding double-precision host copies of a block's
 * input z, injection u, a random cotangent R and the parameters θ, the
 * scalar objective
 *   φ = R · f(z; u; θ)                          (lm = 0: one block)
 *   φ = LM loss after `layers` applications     (lm = 1, from z₀ = 0)
 * evaluated on the backend, the block's vjp at the fixture's point
 * (fx_vjp), central differences of φ, and fd_check, which compares an
 * analytic gradient with them. The including file defines FD_H (step) and
 * FD_TOL (tolerance) and justifies them. */
#ifndef DQ_TEST_FD_H
#define DQ_TEST_FD_H

#include <string.h>

#include "test_model_util.h"

struct fx {
	struct backend *be;
	struct model *m;
	int lm, layers;
	double *z, *u, *R, *theta, *out;
	void *dz, *du, *dout;
};

/* Fills z, u, R with N(0, 1) draws and θ with init_params (the including
 * test's choice of O(1) parameters) and uploads θ, z and u. */
static inline void fx_init(struct fx *f, struct backend *be, struct model *m,
			   int lm, int layers,
			   void (*init_params)(const struct model *, double *))
{
	memset(f, 0, sizeof(*f));
	f->be = be;
	f->m = m;
	f->lm = lm;
	f->layers = layers;
	f->z = host(m->n_state);
	f->u = host(m->n_u);
	f->R = host(m->n_state);
	f->out = host(m->n_state);
	f->theta = host(m->n_param_elems);
	f->dz = dev(be, m->n_state);
	f->du = dev(be, m->n_u);
	f->dout = dev(be, m->n_state);
	rnd_fill(f->z, m->n_state, 1.0);
	rnd_fill(f->u, m->n_u, 1.0);
	rnd_fill(f->R, m->n_state, 1.0);
	init_params(m, f->theta);
	up(be, m->param_buf, f->theta, m->n_param_elems);
	up(be, f->dz, f->z, m->n_state);
	up(be, f->du, f->u, m->n_u);
}

static inline void fx_free(struct fx *f)
{
	free(f->z);
	free(f->u);
	free(f->R);
	free(f->out);
	free(f->theta);
	backend_free(f->be, f->dz);
	backend_free(f->be, f->du);
	backend_free(f->be, f->dout);
}

/* Host copies of the block's vjp at the fixture's point: gz_in (n_state),
 * gu (n_u) and the parameter gradients (n_param_elems). */
struct fx_grads {
	double *z, *u, *theta;
};

/* One taped block application at (z, u) into f->out, then its vjp with
 * gz_out = R into zeroed gradients (gz_in filled with a sentinel first:
 * the vjp overwrites it). Free g with fx_grads_free. */
static inline void fx_vjp(struct fx *f, struct fx_grads *g)
{
	struct backend *be = f->be;
	struct model *m = f->m;
	size_t nd = m->n_state, nu = m->n_u, np = m->n_param_elems;
	void *tape = dev(be, model_tape_elems(m));
	void *gz_in = dev(be, nd), *gz_out = dev(be, nd);
	model_block_forward(m, f->dout, f->dz, f->du, tape);
	up(be, gz_out, f->R, nd);
	model_zero_grads(m);
	be_fill(be, gz_in, 99.0, nd);
	model_block_vjp(m, gz_in, m->gu, gz_out, tape, 1);
	g->z = host(nd);
	g->u = host(nu);
	g->theta = host(np);
	down(be, g->z, gz_in, nd);
	down(be, g->u, m->gu, nu);
	down(be, g->theta, m->grad_buf, np);
	down(be, f->out, f->dout, nd);
	backend_free(be, tape);
	backend_free(be, gz_in);
	backend_free(be, gz_out);
}

static inline void fx_grads_free(struct fx_grads *g)
{
	free(g->z);
	free(g->u);
	free(g->theta);
}

/* The block's FD experiment at a random point: a model of kind with shape
 * s on a fresh "cpu64" backend, init seed 7; from rng_state = 1000 + s.d
 * random O(1) parameters (random_params), z, u and R (lm = 0), and the
 * vjp there into *g. fx_close frees it all. */
static inline void fx_open_block(struct fx *f, struct fx_grads *g,
				 enum model_kind kind, struct shape s)
{
	struct backend *be = make_be("cpu64");
	struct model *m = make_model(be, kind, s, 7);
	rng_state = 1000 + (uint64_t)s.d;
	fx_init(f, be, m, 0, 1, random_params);
	fx_vjp(f, g);
}

/* Frees g (when not NULL) and f, destroys the model and its backend,
 * asserting that nothing else stayed allocated. */
static inline void fx_close(struct fx *f, struct fx_grads *g)
{
	struct backend *be = f->be;
	if (g)
		fx_grads_free(g);
	fx_free(f);
	model_destroy(f->m);
	cr_assert_eq(be->mem.live_total, 0, "%zu bytes leaked",
		     be->mem.live_total);
	backend_destroy(be);
}

/* Loss of the LM: inject, z0 = 0, `layers` applications, head. */
static inline double lm_loss(struct fx *f)
{
	struct model *m = f->m;
	model_inject_forward(m);
	be_fill(f->be, f->dz, 0.0, m->n_state);
	void *a = f->dz, *b = f->dout;
	for (int l = 0; l < f->layers; l++) {
		model_block_forward(m, b, a, m->u, NULL);
		void *t = a;
		a = b;
		b = t;
	}
	return model_head_forward(m, a);
}

static inline double fx_eval(struct fx *f)
{
	struct model *m = f->m;
	up(f->be, m->param_buf, f->theta, m->n_param_elems);
	if (f->lm)
		return lm_loss(f);
	up(f->be, f->dz, f->z, m->n_state);
	up(f->be, f->du, f->u, m->n_u);
	model_block_forward(m, f->dout, f->dz, f->du, NULL);
	down(f->be, f->out, f->dout, m->n_state);
	return hdot(f->R, f->out, m->n_state);
}

static inline double fd_at(struct fx *f, double *x, size_t i, double h)
{
	double x0 = x[i];
	x[i] = x0 + h;
	double fp = fx_eval(f);
	x[i] = x0 - h;
	double fm = fx_eval(f);
	x[i] = x0;
	return (fp - fm) / (2 * h);
}

/* Checks analytic gradient an[0..n) of φ w.r.t. host array x[0..n) at the
 * coordinates idx (NULL: all); see the header for the tolerance. */
static inline void fd_check(struct fx *f, const char *what, double *x,
			    const double *an, size_t n, const size_t *idx,
			    size_t nidx)
{
	size_t cnt = idx ? nidx : n;
	double amax = 0, num = 0, den = 0;
	for (size_t k = 0; k < cnt; k++) {
		double a = fabs(an[idx ? idx[k] : k]);
		amax = a > amax ? a : amax;
	}
	double tol = FD_TOL * (1.0 + amax);
	int retried = 0;
	for (size_t k = 0; k < cnt; k++) {
		size_t i = idx ? idx[k] : k;
		double fd = fd_at(f, x, i, FD_H);
		for (double h = FD_H / 16; fabs(fd - an[i]) > tol && h > 1e-9;
		     h /= 16) {
			fd = fd_at(f, x, i, h);
			retried++;
		}
		cr_assert(fabs(fd - an[i]) <= tol,
			  "%s[%zu]: analytic %.12g, finite difference %.12g "
			  "(tol %.3g)",
			  what, i, an[i], fd, tol);
		num += (fd - an[i]) * (fd - an[i]);
		den += an[i] * an[i];
	}
	cr_assert(den > 0,
		  "%s: gradient identically 0 on the checked "
		  "coordinates",
		  what);
	cr_assert(sqrt(num / den) <= FD_TOL, "%s: relative error %.3g", what,
		  sqrt(num / den));
	cr_assert(retried <= (int)(cnt / 20) + 2,
		  "%s: %d coordinates needed a smaller h", what, retried);
	/* fx_eval left the device params / inputs at the unperturbed values */
}

#endif
