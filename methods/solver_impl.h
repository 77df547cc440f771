/* solver_impl.h — private to methods/solvers*.c: the solver's state, the
 * host side of one solve, and the helpers solvers.c lends the fused
 * iterations of solvers_fused.c (kernels/solve_fused.h). */
#ifndef DQ_SOLVER_IMPL_H
#define DQ_SOLVER_IMPL_H

#include "../kernels/solve_ctl.h"
#include "solvers.h"

struct solver {
	struct backend *be;
	size_t n;
	int S, P;   /* samples, segments per sample */
	size_t len; /* n / (S P): elements of one segment */
	void *buf;  /* MEM_SOLVER: the vectors, then the control block */
	size_t elems;
	int max_iter;		 /* the largest max_iter it was created for */
	struct dq_solve_ctl ctl; /* st: the control block, in buf */
	int hb_cap, ma_cap;	 /* the fused rings the layout fits (ctl.hb and
			     * ctl.ma are the current solve's) */
	double *head;  /* host: the block's head and trace, read per solve */
	double *zeros; /* host: max(S, 8) zeros: the frozen flags' start, the
			* fused header's */
	int graphs; /* solves as recorded device-side loops (solver_graphs) */
	struct solve_graph {
		void *g; /* NULL: free */
		struct solver_params p;
		struct fp_map F;
	} cache[SOLVER_GRAPHS];
	int next; /* the cache entry the next new recording replaces */
};

/* The host side of a solve: it issues evaluations and the device decides
 * (dq_ctl_check); the host reads the decision every `sync` evaluations. */
struct run {
	struct solver *s;
	const struct solver_params *p;
	const struct fp_map *F;
	long *reads;
	void *best;   /* n elements */
	int launched; /* evaluations issued */
	int since;    /* of them since the last read of the decision */
	int sync;     /* evaluations between reads, >= 1 */
	int graph;    /* recording a device-side loop: no reads, a segment
		       * per evaluation */
	long updates, history_sum; /* solve_stats' (the solver's work) */
};

/* Vector i of the solver's buffer (n elements each). */
void *solver_vec(struct solver *s, size_t i);
/* The control block's array at offset o (doubles). */
double *solver_ctl_at(struct solver *s, long o);
/* One evaluation of F, counted. */
void solver_run_eval(struct run *r, void *out, const void *in);
/* Whether the host stops issuing after an evaluation the device has
 * checked: max_iter issued, or the device said stop at a read (every
 * r->sync evaluations; in a recording, the next segment instead). */
int solver_run_poll(struct run *r);
/* A recording of solves with p and F, or NULL; the cache entry a new one
 * goes into (the oldest's graph freed), labelled with p and F. */
struct solve_graph *solver_graph_find(struct solver *s,
				      const struct solver_params *p,
				      const struct fp_map *F);
struct solve_graph *solver_graph_slot(struct solver *s,
				      const struct solver_params *p,
				      const struct fp_map *F);

/* The fused iterations (solvers_fused.c): whether p's solve is one
 * (solver_kernels=fused), and the solves. */
int solver_fused(const struct solver_params *p);
void solve_broyden_fused(struct run *r);
void solve_anderson_fused(struct run *r);

#endif
