/* step_log.c — see step_log.h: allocation of the per-step arrays and the
 * method's statistics of one step. */
#include "step_log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The double arrays of l, in the order they sit in the block. */
#define LOG_DOUBLES(l)                                                         \
	{                                                                      \
		&(l)->loss, &(l)->ms, &(l)->fwd_ms, &(l)->bwd_ms,              \
		    &(l)->head_ms, &(l)->gnorm, &(l)->lr, &(l)->fwd.iters,     \
		    &(l)->fwd.residual, &(l)->bwd.iters, &(l)->bwd.residual,   \
		    &(l)->f_ev, &(l)->v_ev, &(l)->reads, &(l)->jac,            \
		    &(l)->moved, &(l)->copy_ms, &(l)->stall_ms                 \
	}

size_t step_log_step_bytes(void)
{
	struct step_log l;
	double **d[] = LOG_DOUBLES(&l);
	return (sizeof(d) / sizeof(*d) + WORK_UNITS) * sizeof(double) +
	       2 * sizeof(int);
}

int step_log_alloc(struct step_log *l, int n)
{
	double **d[] = LOG_DOUBLES(l);
	size_t nd = sizeof(d) / sizeof(*d), un = (size_t)n;
	double *block;

	memset(l, 0, sizeof(*l));
	block = calloc(un, step_log_step_bytes());
	if (!block)
		return -1;
	l->mem = block;
	l->n = n;
	for (size_t i = 0; i < nd; i++)
		*d[i] = block + i * un;
	for (size_t i = 0; i < WORK_UNITS; i++)
		l->work[i] = block + (nd + i) * un;
	l->fwd.flags = (int *)(block + (nd + WORK_UNITS) * un);
	l->bwd.flags = l->fwd.flags + un;
	/* a step that stops before its backward (the diverged one) never
	 * computes its norm: NaN keeps it out of health's median and max */
	for (int i = 0; i < n; i++)
		l->gnorm[i] = NAN;
	return 0;
}

void step_log_free(struct step_log *l)
{
	free(l->mem);
	memset(l, 0, sizeof(*l));
}

static int solve_flags(const struct solve_stats *s)
{
	return (s->converged ? SOLVE_CONVERGED : 0) |
	       (s->nonfinite ? SOLVE_NONFINITE : 0) |
	       (s->protect_break ? SOLVE_PROTECT_BREAK : 0) |
	       (s->stall_break ? SOLVE_STALL_BREAK : 0);
}

static void solve_put(struct solve_log *l, int i, const struct solve_stats *s)
{
	l->iters[i] = s->iters;
	l->residual[i] = s->residual;
	l->flags[i] = solve_flags(s);
}

/* The step's work by unit (enum work_unit) into entry i. */
static void work_put(struct step_log *l, int i, const struct method_stats *st,
		     const struct run_counts *c)
{
	const struct method_work *w = &st->work;
	const long v[WORK_UNITS] = {
	    [WORK_BLOCK_FWD_TAPED] = w->block_fwd_taped,
	    [WORK_BLOCK_FWD] = w->block_fwd,
	    [WORK_BLOCK_FWD_RECOMPUTE] = w->block_fwd_recompute,
	    [WORK_BLOCK_VJP] = w->block_vjp,
	    [WORK_BLOCK_VJP_INPUT] = w->block_vjp_input,
	    [WORK_SOLVER_UPDATE] = w->solver_update,
	    [WORK_SOLVER_HISTORY_SUM] = w->solver_history_sum,
	    [WORK_HEAD_FWD] = c->head_fwd,
	    [WORK_HEAD_BWD] = c->head_bwd,
	    [WORK_OPTIMIZER_STEP] = c->optimizer_step,
	    [WORK_HOST_BYTES] = st->offload_bytes,
	    [WORK_ATTN_RECOMPUTE] = w->attn_recompute,
	};
	for (int u = 0; u < WORK_UNITS; u++)
		l->work[u][i] = (double)v[u];
}

void step_log_method(struct step_log *l, int i, const struct method_stats *st,
		     const struct run_counts *c)
{
	l->f_ev[i] = (double)st->forward_evals;
	l->v_ev[i] = (double)st->vjp_evals;
	l->reads[i] = (double)st->host_reads;
	solve_put(&l->fwd, i, &st->fwd);
	solve_put(&l->bwd, i, &st->bwd);
	l->jac[i] = st->jac_applied ? st->jac_loss : NAN;
	l->moved[i] = (double)st->offload_bytes;
	work_put(l, i, st, c);
}
