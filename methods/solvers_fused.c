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

/* A fused solve's vectors, in fixed roles (an iteration is the same ops
 * at every index): Broyden's x, g, fx, dx, dg, U, V (solve_broyden's
 * buffers); Anderson's x (xn), fx, U (X), V (G) (solve_anderson's). */
struct fused {
	void *x, *g, *fx, *dx, *dg, *U, *V;
};

/* One iteration (kernels/solve_fused.h): F, measure, apply. */
static void broyden_iter(struct run *r, const struct fused *v)
{
	struct solver *s = r->s;
	solver_run_eval(r, v->fx, v->x);
	be_fused_measure(s->be, &s->ctl, v->fx, v->x, v->g, v->dx, v->dg, v->U,
			 v->V, s->len);
	be_fused_apply(s->be, &s->ctl, v->x, v->dx, v->g, v->dg, v->U, v->V,
		       r->best, s->len);
}

static void anderson_iter(struct run *r, const struct fused *v)
{
	struct solver *s = r->s;
	solver_run_eval(r, v->fx, v->x);
	be_fused_anderson_measure(s->be, &s->ctl, v->fx, v->x, v->U, v->V,
				  s->len);
	be_fused_anderson_apply(s->be, &s->ctl, v->x, v->U, v->V, r->best,
				s->len);
}

/* The iterations from x₀ = 0 (for Broyden also Δx = g = 0: the first
 * measure forms no pair): a host loop that reads the decision as
 * run_check does, or with graphs one WHILE loop whose body is one
 * iteration, recorded once. */
static void fused_solve(struct run *r, const struct fused *v,
			void (*iter)(struct run *, const struct fused *))
{
	struct solver *s = r->s;
	be_fill(s->be, v->x, 0.0, s->n);
	if (v->g)
		be_fill(s->be, v->g, 0.0, s->n);
	if (v->dx)
		be_fill(s->be, v->dx, 0.0, s->n);
	if (!s->graphs) {
		do
			iter(r, v);
		while (!solver_run_poll(r));
		return;
	}
	struct solve_graph *g = solver_graph_find(s, r->p, r->F);
	if (!g) {
		g = solver_graph_slot(s, r->p, r->F);
		be_graph_while_begin(s->be);
		iter(r, v);
		g->g = be_graph_while_end(s->be, solver_ctl_at(s, DQ_CTL_GO));
	}
	be_graph_launch(s->be, g->g);
}

void solve_broyden_fused(struct run *r)
{
	struct solver *s = r->s;
	const size_t h = (size_t)r->p->history;
	const struct fused v = {solver_vec(s, 0),    solver_vec(s, 1),
				solver_vec(s, 2),    solver_vec(s, 3),
				solver_vec(s, 4),    solver_vec(s, 6),
				solver_vec(s, 6 + h)};
	fused_solve(r, &v, broyden_iter);
}

void solve_anderson_fused(struct run *r)
{
	struct solver *s = r->s;
	const size_t m = (size_t)r->p->anderson_m;
	const struct fused v = {.x = solver_vec(s, 0),
				.fx = solver_vec(s, 1),
				.U = solver_vec(s, 3),
				.V = solver_vec(s, 3 + m)};
	fused_solve(r, &v, anderson_iter);
}
