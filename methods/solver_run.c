/* solver_run.c — the host side of a solve that both solvers.c's
 * iterations and the fused ones of solvers_fused.c issue from
 * (solver_impl.h): the solver's vectors and control block, an evaluation
 * counted, the read of the device's stop decision, the cache of recorded
 * solves. */
#include "solver_impl.h"

#include <string.h>

void *solver_vec(struct solver *s, size_t i)
{
	return dq_at(s->be, s->buf, i * s->n);
}

/* The control block's array at offset o (doubles). */
double *solver_ctl_at(struct solver *s, long o)
{
	return s->ctl.st + o;
}

void solver_run_eval(struct run *r, void *out, const void *in)
{
	r->F->apply(r->F->ctx, out, in);
	r->launched++;
}

/* Whether the host stops issuing after an evaluation the device has
 * checked (run_check's rule). */
int solver_run_poll(struct run *r)
{
	struct solver *s = r->s;
	if (r->launched >= r->p->max_iter)
		return 1;
	if (r->graph) { /* the next evaluation runs while the device goes */
		be_graph_loop_next(s->be, solver_ctl_at(s, DQ_CTL_GO));
		return 0;
	}
	if (++r->since < r->sync)
		return 0;
	r->since = 0;
	double go;
	be_download_bytes(s->be, &go, solver_ctl_at(s, DQ_CTL_GO), sizeof(go));
	(*r->reads)++;
	return go == 0;
}

/* A recording of solves with p and F (same parameters, map and keys), or
 * NULL. */
struct solve_graph *solver_graph_find(struct solver *s,
				      const struct solver_params *p,
				      const struct fp_map *F)
{
	for (int i = 0; i < SOLVER_GRAPHS; i++) {
		struct solve_graph *g = &s->cache[i];
		if (g->g && memcmp(&g->p, p, sizeof(*p)) == 0 &&
		    g->F.apply == F->apply && g->F.ctx == F->ctx &&
		    g->F.key[0] == F->key[0] && g->F.key[1] == F->key[1])
			return g;
	}
	return NULL;
}

/* The solve as a device-side loop: recorded at its first use (the host
 * issues every evaluation up to max_iter, a segment each, without a
 * read), replayed after; the device skips the segments after its stop. */
/* The cache entry a new recording of p and F goes into (the oldest's
 * graph freed), labelled; its graph is for the caller to set. */
struct solve_graph *solver_graph_slot(struct solver *s,
				      const struct solver_params *p,
				      const struct fp_map *F)
{
	struct solve_graph *g = &s->cache[s->next];
	s->next = (s->next + 1) % SOLVER_GRAPHS;
	be_graph_free(s->be, g->g);
	g->g = NULL;
	memcpy(&g->p, p, sizeof(*p));
	g->F = *F;
	return g;
}
