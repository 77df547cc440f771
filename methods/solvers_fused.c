/* solvers_fused.c — the fused solver iterations, Broyden's and Anderson's
 * (solver_kernels=fused; kernels/solve_fused.h): each evaluation of F followed by two backend
 * passes whose counters live in the control block, so that an iteration
 * is the same ops at every index; a host loop polling as solvers.c's, or
 * with graphs one WHILE loop recorded once. */
#include "solver_impl.h"

#include "../kernels/solve_fused.h"

/* Whether p's solve is a fused one (Broyden's or Anderson's). */
int solver_fused(const struct solver_params *p)
{
	return p->fused &&
	       (p->kind == SOLVER_BROYDEN || p->kind == SOLVER_ANDERSON);
}

/* The fused Broyden's vectors: solve_broyden's buffers, in fixed roles
 * (an iteration is the same ops at every index). */
struct fused {
	void *x, *g, *fx, *dx, *dg, *best, *U, *V;
};

static struct fused fused_of(struct solver *s, int h)
{
	return (struct fused){solver_vec(s, 0), solver_vec(s, 1),
			      solver_vec(s, 2), solver_vec(s, 3),
			      solver_vec(s, 4), solver_vec(s, 5),
			      solver_vec(s, 6), solver_vec(s, 6 + (size_t)h)};
}

/* One iteration (kernels/solve_fused.h): F, measure, apply. */
static void fused_iter(struct run *r, const struct fused *v)
{
	struct solver *s = r->s;
	solver_run_eval(r, v->fx, v->x);
	be_fused_measure(s->be, &s->ctl, v->fx, v->x, v->g, v->dx, v->dg, v->U,
			 v->V, s->len);
	be_fused_apply(s->be, &s->ctl, v->x, v->dx, v->g, v->dg, v->U, v->V,
		       v->best, s->len);
}

/* Broyden as solve_fused.h's two passes an evaluation, from x₀ = 0 with
 * Δx = g = 0 (the first measure forms no pair): a host loop that reads the
 * decision as run_check does, or with graphs one WHILE loop whose body is
 * the iteration, recorded once. */
void solve_broyden_fused(struct run *r)
{
	struct solver *s = r->s;
	const struct fused v = fused_of(s, r->p->history);
	be_fill(s->be, v.x, 0.0, s->n);
	be_fill(s->be, v.g, 0.0, s->n);
	be_fill(s->be, v.dx, 0.0, s->n);
	if (!s->graphs) {
		do
			fused_iter(r, &v);
		while (!solver_run_poll(r));
		return;
	}
	struct solve_graph *g = solver_graph_find(s, r->p, r->F);
	if (!g) {
		g = solver_graph_slot(s, r->p, r->F);
		be_graph_while_begin(s->be);
		fused_iter(r, &v);
		g->g = be_graph_while_end(s->be, solver_ctl_at(s, DQ_CTL_GO));
	}
	be_graph_launch(s->be, g->g);
}

/* Anderson as solve_fused.h's two passes an evaluation, from x₀ = 0: the
 * vectors of solvers.c's solve_anderson (xn, F(x), best; the rings X and
 * G), the slot and the iterates in use counted in the control block. */
static void anderson_iter(struct run *r, void *xn, void *fx, void *X, void *G)
{
	struct solver *s = r->s;
	solver_run_eval(r, fx, xn);
	be_fused_anderson_measure(s->be, &s->ctl, fx, xn, X, G, s->len);
	be_fused_anderson_apply(s->be, &s->ctl, xn, X, G, r->best, s->len);
}

void solve_anderson_fused(struct run *r)
{
	struct solver *s = r->s;
	const size_t m = (size_t)r->p->anderson_m;
	void *xn = solver_vec(s, 0), *fx = solver_vec(s, 1);
	void *X = solver_vec(s, 3), *G = solver_vec(s, 3 + m);
	be_fill(s->be, xn, 0.0, s->n);
	if (!s->graphs) {
		do
			anderson_iter(r, xn, fx, X, G);
		while (!solver_run_poll(r));
		return;
	}
	struct solve_graph *g = solver_graph_find(s, r->p, r->F);
	if (!g) {
		g = solver_graph_slot(s, r->p, r->F);
		be_graph_while_begin(s->be);
		anderson_iter(r, xn, fx, X, G);
		g->g = be_graph_while_end(s->be, solver_ctl_at(s, DQ_CTL_GO));
	}
	be_graph_launch(s->be, g->g);
}
