/* price_solver.c — see price_solver.h. */
#include "price_solver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../methods/solver_types.h"
#include "../../kernels/solve_fused.h"
#include "block_units.h"

/* The fused units' control block (price_solver_alloc): hb = hmax, ma =
 * m; tol −1, so that the check never stops (the fused passes skip their
 * work once it has); its host image of zeros, uploaded by every reset. */
static int fused_alloc(struct price_solver *ps)
{
	ps->fctl = ps->ctl; /* m: the Gram matrices of Anderson's unit */
	ps->fctl.hb = ps->hmax;
	ps->fctl.ma = ps->m;
	ps->fctl.tol = -1;
	ps->fctl.nchunk = dq_fu_chunks((long)ps->len);
	dq_ctl_layout(&ps->fctl);
	ps->fctl_mem = backend_alloc_bytes(
	    ps->be, (size_t)ps->fctl.total * sizeof(double), MEM_SOLVER);
	ps->fhead = calloc((size_t)ps->fctl.total, sizeof(double));
	ps->fctl.st = ps->fctl_mem;
	return ps->fctl_mem && ps->fhead ? 0 : -1;
}

int price_solver_alloc(struct price_solver *ps, struct backend *be, size_t n,
		       int S, int P, int hmax, int m, int fused)
{
	void **v[] = {&ps->x,  &ps->g,	  &ps->fx, &ps->dx,
		      &ps->dg, &ps->best, &ps->x0, &ps->g0};
	double *host = malloc(sizeof(double) * (n + 1));
	int rc = host ? 0 : -1;
	if (m > hmax)
		hmax = m; /* the rings hold Broyden's pairs or Anderson's m */
	*ps = (struct price_solver){
	    .be = be, .n = n, .S = S, .P = P, .hmax = hmax, .m = m};
	ps->len = n / ((size_t)S * (size_t)P);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		rc |= (*v[i] = backend_alloc(be, n, MEM_SOLVER)) ? 0 : -1;
	rc |=
	    (ps->U = backend_alloc(be, (size_t)hmax * n, MEM_SOLVER)) ? 0 : -1;
	rc |=
	    (ps->V = backend_alloc(be, (size_t)hmax * n, MEM_SOLVER)) ? 0 : -1;
	rc |= (ps->coef = backend_alloc(be, (size_t)S * hmax, MEM_SOLVER)) ? 0
									   : -1;
	ps->ctl = (struct dq_solve_ctl){.S = S,
					.P = P,
					.max_iter = 1 << 30,
					.m = m,
					.ring = 1,
					.trace_cap = METHOD_TRACE_MAX};
	dq_ctl_layout(&ps->ctl);
	ps->ctl_mem = backend_alloc_bytes(
	    be, (size_t)ps->ctl.total * sizeof(double), MEM_SOLVER);
	ps->head = calloc((size_t)ps->ctl.total, sizeof(double));
	if (rc || !ps->ctl_mem || !ps->head) {
		free(host);
		return -1;
	}
	ps->ctl.st = ps->ctl_mem;
	ps->fused = fused;
	if (fused && fused_alloc(ps) != 0) {
		free(host);
		return -1;
	}
	block_fill_host(host, n + 1);
	be_upload(be, ps->x0, host, n);
	be_upload(be, ps->g0, host + 1, n);
	be_upload(be, ps->U, host, n); /* rows past the first: zero */
	be_fill(be, dq_at(be, ps->U, n), 0.0, (size_t)(hmax - 1) * n);
	be_upload(be, ps->V, host + 1, n);
	be_fill(be, dq_at(be, ps->V, n), 0.0, (size_t)(hmax - 1) * n);
	free(host);
	price_solver_reset(ps, 1, 0);
	return 0;
}

void price_solver_free(struct price_solver *ps)
{
	void *v[] = {ps->x,    ps->g,	    ps->fx,	 ps->dx, ps->dg,
		     ps->best, ps->x0,	    ps->g0,	 ps->U,	 ps->V,
		     ps->coef, ps->ctl_mem, ps->fctl_mem};
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		backend_free(ps->be, v[i]);
	free(ps->head);
	free(ps->fhead);
	memset(ps, 0, sizeof(*ps));
}

void price_solver_reset(struct price_solver *ps, int h, int anderson)
{
	struct backend *be = ps->be;
	be_copy(be, ps->x, ps->x0, ps->n);
	be_copy(be, ps->g, ps->g0, ps->n);
	be_copy(be, ps->fx, ps->x0, ps->n);
	/* going on, no evaluation yet, nothing frozen (solvers.c ctl_start);
	 * tol 0: the check never stops */
	memset(ps->head, 0, sizeof(double) * (size_t)ps->ctl.total);
	ps->head[DQ_CTL_GO] = 1;
	ps->head[DQ_CTL_RES] = ps->head[DQ_CTL_ABS] = ps->head[DQ_CTL_REL] =
	    INFINITY;
	be_upload_bytes(be, ps->ctl.st, ps->head,
			sizeof(double) * (size_t)ps->ctl.total);
	if (!ps->fused)
		return;
	/* the fused block: zeros, its head as the other's after one
	 * evaluation (so that the measure forms a pair), h pairs or h − 1
	 * iterates in use (the mix then runs over h); F(x) ≠ x and Δx ≠ 0,
	 * so that the numbers are those of a solve under way */
	const struct dq_solve_ctl *f = &ps->fctl;
	double *fh = ps->fhead + f->o_fused;
	memcpy(ps->fhead, ps->head, sizeof(double) * DQ_CTL_HEAD);
	ps->fhead[DQ_CTL_ITERS] = 1;
	if (anderson) {
		fh[DQ_FU_NU] = h - 1 < ps->m ? h - 1 : ps->m;
		fh[DQ_FU_SLOT] = (h - 1) % ps->m;
	} else {
		fh[DQ_FU_NU] = h < f->hb ? h : f->hb;
		fh[DQ_FU_SLOT] = 0;
	}
	be_upload_bytes(be, f->st, ps->fhead,
			sizeof(double) * (size_t)f->total);
	fh[DQ_FU_NU] = fh[DQ_FU_SLOT] = 0; /* the image stays zeros */
	be_copy(be, ps->fx, ps->g0, ps->n);
	be_copy(be, ps->dx, ps->g0, ps->n);
}

/* Segment p of sample k of x (solvers.c seg_of). */
static void *seg_of(const struct price_solver *ps, const void *x, int k, int p)
{
	return dq_at(ps->be, x,
		     ((size_t)p * (size_t)ps->S + (size_t)k) * ps->len);
}

/* coef row k = x_k R_kᵀ over h rows (solvers.c sample_coef). */
static void coef_of(struct price_solver *ps, const void *x, const void *R,
		    int h)
{
	for (int p = 0; p < ps->P; p++)
		be_gemm_batched(ps->be, 0, 1, 1, h, (int)ps->len, 1.0,
				seg_of(ps, x, 0, p), (int)ps->len, ps->len,
				seg_of(ps, R, 0, p), (int)ps->n, ps->len,
				p ? 1.0 : 0.0, ps->coef, h, (size_t)h, ps->S);
}

/* y_k = a coef_k R_k + beta y_k (solvers.c sample_apply). */
static void apply_beta(struct price_solver *ps, void *y, double a,
		       const void *R, int h, double beta)
{
	for (int p = 0; p < ps->P; p++)
		be_gemm_batched(ps->be, 0, 0, 1, (int)ps->len, h, a, ps->coef,
				h, (size_t)h, seg_of(ps, R, 0, p), (int)ps->n,
				ps->len, beta, seg_of(ps, y, 0, p),
				(int)ps->len, ps->len, ps->S);
}

/* y_k = a coef_k R_k + y_k (beta 1: Broyden's updates). */
static void apply_to(struct price_solver *ps, void *y, double a, const void *R,
		     int h)
{
	apply_beta(ps, y, a, R, h, 1.0);
}

/* The fused unit: after F, measure and apply (solvers.c fused_iter). */
static void fused_update(struct price_solver *ps)
{
	be_fused_measure(ps->be, &ps->fctl, ps->fx, ps->x, ps->g, ps->dx,
			 ps->dg, ps->U, ps->V, ps->len);
	be_fused_apply(ps->be, &ps->fctl, ps->x, ps->dx, ps->g, ps->dg, ps->U,
		       ps->V, ps->best, ps->len);
}

void price_solver_update(struct price_solver *ps, int h)
{
	if (ps->fused) {
		fused_update(ps);
		return;
	}
	struct backend *be = ps->be;
	const size_t n = ps->n, nseg = (size_t)ps->S * (size_t)ps->P;
	struct dq_solve_ctl *c = &ps->ctl;
	void *Us = dq_at(be, ps->U, (size_t)(h < ps->hmax ? h : 0) * n);
	void *Vs = dq_at(be, ps->V, (size_t)(h < ps->hmax ? h : 0) * n);
	be_copy(be, ps->dx, ps->g, n); /* broyden_step */
	coef_of(ps, ps->g, ps->V, h);
	apply_to(ps, ps->dx, -1.0, ps->U, h);
	be_axpy(be, ps->x, 1.0, ps->dx, n);
	/* run_measure(x, fx, fx): fx = F(x) − x, the dots, the check */
	be_residual_dots(be, ps->fx, ps->fx, ps->x, c->st + c->o_seg_f,
			 c->st + c->o_seg_g, nseg, ps->len);
	be_solve_check(be, c);
	be_copy_masked(be, ps->best, ps->x, c->st + c->o_imp, ps->S, ps->P,
		       ps->len);
	be_sub(be, ps->dg, ps->fx, ps->g, n); /* Δg */
	be_sub(be, Vs, NULL, ps->dx, n);      /* broyden_update */
	coef_of(ps, ps->dx, ps->U, h);
	apply_to(ps, Vs, 1.0, ps->V, h);
	be_axpy(be, ps->dx, 1.0, ps->dg, n);
	coef_of(ps, ps->dg, ps->V, h);
	apply_to(ps, ps->dx, -1.0, ps->U, h);
	be_dot_segments(be, c->st + c->o_seg_d, Vs, ps->dg, nseg, ps->len);
	be_scale_recip(be, Us, ps->dx, c->st + c->o_seg_d, ps->S, ps->P,
		       ps->len);
}

/* Anderson's fused unit: after F, measure and apply (solvers_fused.c). */
static void fused_anderson(struct price_solver *ps, double lambda, double beta)
{
	struct dq_solve_ctl c = ps->fctl;
	c.lambda = lambda;
	c.beta = beta;
	be_fused_anderson_measure(ps->be, &c, ps->fx, ps->x, ps->U, ps->V,
				  ps->len);
	be_fused_anderson_apply(ps->be, &c, ps->x, ps->U, ps->V, ps->best,
				ps->len);
}

void price_solver_anderson(struct price_solver *ps, int h, double lambda,
			   double beta)
{
	if (ps->fused) {
		fused_anderson(ps, lambda, beta);
		return;
	}
	struct backend *be = ps->be;
	const size_t n = ps->n, nseg = (size_t)ps->S * (size_t)ps->P;
	struct dq_solve_ctl *c = &ps->ctl;
	int slot = (h - 1) % ps->m;
	void *Xs = dq_at(be, ps->U, (size_t)slot * n);
	void *Gs = dq_at(be, ps->V, (size_t)slot * n);
	be_copy(be, Xs, ps->x, n);
	/* run_measure(xn, Gs, fx): Gs = F(x) − x, the dots, the check */
	be_residual_dots(be, Gs, ps->fx, ps->x, c->st + c->o_seg_f,
			 c->st + c->o_seg_g, nseg, ps->len);
	be_solve_check(be, c);
	be_copy_masked(be, ps->best, ps->x, c->st + c->o_imp, ps->S, ps->P,
		       ps->len);
	coef_of(ps, Gs, ps->V, h); /* the new Gram row */
	be_anderson_weights(be, c, ps->coef, ps->coef, slot, h, lambda);
	apply_beta(ps, ps->x, 1.0, ps->U, h, 0.0); /* xn = αᵀX + β αᵀG */
	apply_beta(ps, ps->x, beta, ps->V, h, 1.0);
}
