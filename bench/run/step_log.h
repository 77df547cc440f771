/* step_log.h — the per-step statistics of one training run: a struct of
 * arrays indexed by step - 1, in one host allocation made before the timed
 * loop (the loop writes into it and allocates nothing). The record's
 * timing, evals, solver, pretrain and trace objects are computed from it
 * (run_record.c, pretrain.c; results/SCHEMA.md). Internal to the runner
 * (docs/ARCHITECTURE.md §Data flow).
 */
#ifndef DQ_BENCH_STEP_LOG_H
#define DQ_BENCH_STEP_LOG_H

#include "../../methods/method.h"
#include "run_ctx.h"

/* The units of the record's `work` object (run_work.h; docs/methods.md
 * §Work), in its order. */
enum work_unit {
	WORK_BLOCK_FWD_TAPED,
	WORK_BLOCK_FWD,
	WORK_BLOCK_FWD_RECOMPUTE,
	WORK_BLOCK_VJP,
	WORK_BLOCK_VJP_INPUT,
	WORK_SOLVER_UPDATE,
	WORK_SOLVER_HISTORY_SUM,
	WORK_HEAD_FWD,
	WORK_HEAD_BWD,
	WORK_OPTIMIZER_STEP,
	WORK_HOST_BYTES,
	WORK_ATTN_RECOMPUTE,
	WORK_UNITS
};

/* Bits of solve_log.flags (step_log_solve_flags). */
enum {
	SOLVE_CONVERGED = 1,	 /* residual <= tol */
	SOLVE_NONFINITE = 2,	 /* a non-finite residual ended the solve;
				    the method went on from the best finite
				    iterate */
	SOLVE_PROTECT_BREAK = 4, /* stopped by protect_thres */
	SOLVE_STALL_BREAK = 8,	 /* stopped by stall_window */
};

/* One solve (forward or backward) of every step. */
struct solve_log {
	double *iters;	  /* evaluations the solver made */
	double *residual; /* final residual in the stop mode's sense; NAN for
			     pretraining steps, which had no solve */
	int *flags;	  /* SOLVE_* bits */
};

struct step_log {
	int n;		 /* steps the arrays hold */
	double *loss;	 /* training loss, nats (mean over B*T positions) */
	double *ms;	 /* fwd_ms + bwd_ms */
	double *fwd_ms;	 /* device time up to the loss (an evaluation's log,
			   r->inf: up to the method's output z, the head
			   left out) */
	double *bwd_ms;	 /* the rest, optimizer included */
	double *head_ms; /* an evaluation's log: the head's forward and loss
			    (ms = fwd_ms + head_ms); 0 in a training log */
	double *gnorm;	 /* global l2 norm of the gradient, before clipping;
			   NaN for a step that computed none */
	double *lr;	 /* learning rate of the step */
	struct solve_log fwd, bwd;
	double *f_ev;  /* block forward evaluations */
	double *v_ev;  /* block VJP evaluations */
	double *reads; /* values the solvers read back to the host */
	double *jac;   /* R of the steps that applied the Jacobian
			  regulariser, NAN elsewhere */
	/* offload: bytes the method copied between device and host, the
	 * copy stream's ms and the ms the compute stream waited for copies
	 * (backend_copy_stats; 0 when nothing moved) */
	double *moved, *copy_ms, *stall_ms;
	/* the step's work by unit (enum work_unit): integers, exact in a
	 * double below 2^53 */
	double *work[WORK_UNITS];
	void *mem; /* the one allocation behind every array */
};

/* Allocates n entries of every array in one block, zeroed but gnorm (NaN
 * until a step writes it). 0, or -1 when
 * out of host memory (l is then safe to step_log_free). */
int step_log_alloc(struct step_log *l, int n);
/* Host bytes step_log_alloc takes per step (memfit's estimate). */
size_t step_log_step_bytes(void);
void step_log_free(struct step_log *l);

/* Stores the method's statistics of step index i (after its backward):
 * evaluations, host reads, both solves and the Jacobian regulariser; and
 * the step's work: the method's by unit (method_work, offload_bytes as
 * host_bytes) and the runner's head and optimizer passes c. */
void step_log_method(struct step_log *l, int i, const struct method_stats *st,
		     const struct run_counts *c);

#endif
