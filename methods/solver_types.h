/* solver_types.h — the choices a fixed-point solve takes (solvers.h):
 * which solver, how its residual is measured, where its stop rule looks;
 * with their key names; and what one solve reports (struct solve_stats,
 * carried by method_stats). No dependencies, so option structs (deq.h)
 * and the solvers (solvers.h) can use them without method.h. */
#ifndef DQ_SOLVER_TYPES_H
#define DQ_SOLVER_TYPES_H

enum solver_kind { SOLVER_BROYDEN, SOLVER_ANDERSON, SOLVER_FIXED_POINT };
enum stop_mode { STOP_ABS, STOP_REL };
/* Where a solve's stopping rule looks: the residual over the whole batch
 * (the paper's rule), or every sample's own (finished samples frozen). */
enum stop_scope { SCOPE_BATCH, SCOPE_SAMPLE };

/* Parsers for the solver enum keys (-1 when unknown) and their names ("?"
 * out of range). */
int solver_kind_parse(const char *s);
int stop_mode_parse(const char *s);
int stop_scope_parse(const char *s);
const char *solver_kind_name(int k);
const char *stop_mode_name(int s);
const char *stop_scope_name(int s);

/* Result of one solve (forward or backward), labelled with the choices it
 * ran under, so that whoever prints or saves it (deqbench grad, the
 * metadata of save_params) need not read them from the config again. */
struct solve_stats {
	enum solver_kind solver; /* the solver that ran */
	double tol;		 /* its tolerance */
	enum stop_mode stop;	 /* the sense of residual and tol */
	int iters;		 /* f (or VJP) evaluations the solver made */
	/* evaluations issued: iters, plus those the host issued after the
	 * device had stopped and before it read so (sync_every > 1) */
	int evals;
	double residual; /* final ‖f(z)−z‖ (abs) or relative, per stop mode */
	double abs_residual, rel_residual;
	int converged; /* residual <= tol (scope sample: every sample's) */
	int nonfinite; /* a non-finite residual ended the solve */
	int samples;   /* independent problems solved (1: global) */
	int samples_converged; /* of them, those whose residual <= tol */
	int protect_break;     /* stopped by protect_thres */
	int stall_break;       /* stopped by stall_window */
	/* the solver's own iterations between evaluations, for the work
	 * count (docs/methods.md §Work): Broyden's steps Δx = −B g (each
	 * followed by its rank-1 update, but for the solve's last) and
	 * Anderson's mixings, evals − 1 of them (0 for fixed_point); and
	 * the sum over them of the history in use (pairs or iterates, per
	 * sample), the length their products run over */
	long updates;
	long history_sum;
};

/* Residuals a solve's trace keeps (method_stats.fwd_trace, bwd_trace). */
#define METHOD_TRACE_MAX 256

#endif
