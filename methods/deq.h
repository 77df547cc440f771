/* deq.h — the options of method=deq (deq.c): solvers, stopping rules,
 * backward mode, Jacobian regularisation, phantom gradients and the
 * spectral radius. torchdeq's names where they exist; the key rows that
 * describe them (types, ranges, meaning) are deq_keys in deq.c, the
 * defaults in deq_defaults. */
#ifndef DQ_DEQ_H
#define DQ_DEQ_H

#include "solver_types.h"

struct method_config;

enum b_mode { BMODE_IFT, BMODE_JFB, BMODE_PHANTOM };
/* One quasi-Newton estimate per sample of the batch (the locuslab DEQ code
 * and torchdeq), or one for the whole batch. */
enum solver_batching { BATCHING_PER_SAMPLE, BATCHING_GLOBAL };
/* How a Broyden or Anderson solve runs: backend ops (GEMMs and vector
 * ops, ~18 launches a Broyden iteration) or the fused iteration of
 * kernels/solve_fused.h (two passes an evaluation; with cuda_graphs one
 * WHILE loop a solve). */
enum solver_kernels { SOLVER_KERNELS_OPS, SOLVER_KERNELS_FUSED };

struct deq_config {
	enum solver_kind f_solver;
	double f_tol;
	int f_max_iter;
	enum stop_mode f_stop_mode;
	int f_history; /* Broyden rank-1 updates kept; 0 = f_max_iter */

	enum b_mode b_mode;
	enum solver_kind b_solver;
	double b_tol;
	int b_max_iter;
	enum stop_mode b_stop_mode;
	int b_history; /* 0 = b_max_iter */

	int anderson_m;		/* history, default 5 */
	double anderson_lambda; /* regularisation, default 1e-4 */
	double anderson_beta;	/* mixing, default 1 */

	enum solver_batching solver_batching;	    /* default per_sample */
	enum stop_scope f_stop_scope, b_stop_scope; /* default batch */
	/* The DEQ code's breaks (0 = off): stop when the residual exceeds
	 * protect_thres × the first one, or when the last stall_window
	 * residuals vary by less than a factor 1.3. */
	double protect_thres;
	int stall_window;
	/* Evaluations between the host's reads of a solve's stop decision,
	 * which is made on the device (solvers.h); default 1. */
	int sync_every;
	enum solver_kernels solver_kernels; /* default ops */
	/* Jacobian regularisation (Bai, Koltun, Kolter, ICML 2021): weight γ
	 * of R = ‖εᵀ J_f(z*)‖² / n (>= 0, 0 = off) and the probability p in
	 * [0, 1] that a training step applies it (default 1: every step). */
	double jac_loss_weight;
	double jac_loss_freq;
	/* Relative step η of its central difference (deq.c), in [0, 1];
	 * 0 = ∛ε_mach of the backend (default). */
	double jac_fd_eta;
	/* b_mode=phantom (Geng et al., NeurIPS 2021): k >= 1 damped steps
	 * z ← λ f(z) + (1−λ) z from z*, λ in (0, 1]; defaults 5 and 0.5. */
	int phantom_steps;
	double phantom_tau;
	/* Power iterations of method_spectral_radius; 0 = off (default). */
	int spectral_radius_iters;
};

/* deq's options in c (its registry slot). Never NULL. */
struct deq_config *deq_config(const struct method_config *c);
/* The registry index of deq (method_kind_parse("deq")). */
int deq_kind(void);

/* Parsers for deq's enum keys (-1 when unknown) and their names ("?" out
 * of range). */
int b_mode_parse(const char *s);
int solver_batching_parse(const char *s);
const char *b_mode_name(int b);
const char *solver_batching_name(int b);
int solver_kernels_parse(const char *s);
const char *solver_kernels_name(int k);

#endif
