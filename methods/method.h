/* method.h — how the depth of a weight-tied model is computed and
 * differentiated: plain unrolling, gradient checkpointing every k layers,
 * or a deep equilibrium solve with implicit differentiation
 * (docs/ARCHITECTURE.md §Methods). Methods call only the model's
 * forward/vjp and the backend's vector ops.
 *
 * All method-owned buffers come from the tracked allocator: tapes and
 * checkpoints under MEM_DEPTH, solver history under MEM_SOLVER; all of them
 * are allocated by method_create, never inside forward/backward.
 */
#ifndef DQ_METHOD_H
#define DQ_METHOD_H

#include <stddef.h>
#include <stdint.h>

#include "../models/model.h"

enum method_kind { METHOD_UNROLL, METHOD_CHECKPOINT, METHOD_DEQ };
enum solver_kind { SOLVER_BROYDEN, SOLVER_ANDERSON, SOLVER_FIXED_POINT };
enum stop_mode { STOP_ABS, STOP_REL };
enum b_mode { BMODE_IFT, BMODE_JFB, BMODE_PHANTOM };
/* Where a solve's stopping rule looks: the residual over the whole batch
 * (the paper's rule), or every sample's own (finished samples frozen). */
enum stop_scope { SCOPE_BATCH, SCOPE_SAMPLE };
/* One quasi-Newton estimate per sample of the batch (the locuslab DEQ code
 * and torchdeq), or one for the whole batch. */
enum solver_batching { BATCHING_PER_SAMPLE, BATCHING_GLOBAL };

/* torchdeq's names where they exist. Defaults: method_config_defaults(). */
struct method_config {
	enum method_kind method;
	int layers; /* L for unroll / checkpoint */
	int k;	    /* checkpoint interval; 0 = auto: round(sqrt(L)) */

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

void method_config_defaults(struct method_config *c);
/* Checks ranges; -1 with a one-line message naming the key and the allowed
 * values (k < 1 or k > layers, tol <= 0, max_iter < 1, history < 1...). */
int method_config_validate(const struct method_config *c, char *err,
			   size_t errlen);

/* Parsers for enum keys; -1 when unknown. */
int method_kind_parse(const char *s);
int solver_kind_parse(const char *s);
int stop_mode_parse(const char *s);
int b_mode_parse(const char *s);
int stop_scope_parse(const char *s);
int solver_batching_parse(const char *s);
const char *method_kind_name(enum method_kind k);
const char *solver_kind_name(enum solver_kind k);
const char *stop_mode_name(enum stop_mode s);
const char *b_mode_name(enum b_mode b);
const char *stop_scope_name(enum stop_scope s);
const char *solver_batching_name(enum solver_batching b);

/* Result of one solve (forward or backward). */
struct solve_stats {
	int iters;	 /* f (or VJP) evaluations the solver made */
	double residual; /* final ‖f(z)−z‖ (abs) or relative, per stop mode */
	double abs_residual, rel_residual;
	int converged; /* residual <= tol (scope sample: every sample's) */
	int nonfinite; /* a non-finite residual ended the solve */
	int samples;   /* independent problems solved (1: global) */
	int samples_converged; /* of them, those whose residual <= tol */
	int protect_break;     /* stopped by protect_thres */
	int stall_break;       /* stopped by stall_window */
};

#define METHOD_TRACE_MAX 256

/* Per-step statistics of a method; reset by every forward. */
struct method_stats {
	long forward_evals;	/* block applications (model_block_forward) */
	long vjp_evals;		/* block VJPs (model_block_vjp) */
	struct solve_stats fwd; /* deq only */
	struct solve_stats bwd; /* deq ift only */
	int has_fwd_solve, has_bwd_solve;
	/* Values read back to the host by the solvers (norms, dots,
	 * coefficient downloads): each is a device synchronisation on a GPU.
	 * Forward and backward together. */
	long host_reads;
	/* Jacobian regularisation of this step (deq, jac_loss_weight > 0):
	 * jac_applied is 1 when the step drew it (probability
	 * jac_loss_freq), jac_loss the unweighted R = ‖εᵀ J_f(z*)‖² / n
	 * (valid after the backward; 0 when not applied). */
	int jac_applied;
	double jac_loss;
	/* Optional residual trace of the last solves (deq): residual after
	 * each iteration, up to METHOD_TRACE_MAX entries. */
	int fwd_trace_len, bwd_trace_len;
	double fwd_trace[METHOD_TRACE_MAX], bwd_trace[METHOD_TRACE_MAX];
};

struct method;

/* Bytes method cfg allocates for model m, per category (MEM_DEPTH: tapes,
 * checkpoints and state vectors; MEM_SOLVER: solver history and vectors),
 * computed without allocating: the formulas in each method's file header.
 * -1 with a message when cfg is invalid. */
int method_memory(const struct model *m, const struct method_config *cfg,
		  size_t *depth_bytes, size_t *solver_bytes, char *err,
		  size_t errlen);

/* Creates a method for model m: validates cfg and allocates every buffer
 * (depth, solver) the method needs. -1 with a one-line message on error. */
int method_create(struct method **out, struct model *m,
		  const struct method_config *cfg, char *err, size_t errlen);
void method_destroy(struct method *me);

/* z = depth(u): (B,T,d) output from u (B,T,U). train != 0 keeps what
 * backward needs. z must be n_state elements and is owned by the caller. */
void method_forward(struct method *me, const void *u, void *z, int train);
/* Given gz = dL/dz (n_state), adds dL/du into gu (n_u, +=) and the
 * parameter gradients into the model's grads (+=). Needs a train forward. */
void method_backward(struct method *me, const void *gz, void *gu);

const struct method_stats *method_get_stats(const struct method *me);
/* deq: the fixed point z* of the last forward (n_state elements; valid
 * until the next forward or backward). NULL for unroll and checkpoint. */
const void *method_fixed_point(const struct method *me);
const struct method_config *method_get_config(const struct method *me);

/* Seeds the method's random draws (deq: the Bernoulli draw of
 * jac_loss_freq, the Hutchinson probe ε, the power iteration's start);
 * the bench passes the run's `seed`. Without a call the seed is 1. */
void method_seed(struct method *me, uint64_t seed);

/* deq with jac_loss_weight > 0: the probe ε (n_state doubles, host) of
 * the last step that applied the regulariser; NULL before the first or
 * for other methods. Valid until the next forward or spectral radius. */
const double *method_jac_probe(const struct method *me);

/* deq with spectral_radius_iters = t > 0, after a forward in evaluation
 * mode (train = 0; also after a training step's backward): estimates the
 * spectral radius ρ(J_f(z*)) of the Jacobian at the last fixed point by t
 * power iterations on VJPs over the whole batch (J is block-diagonal over
 * samples, so this is the largest of the samples' radii):
 *   v₀ = ε/‖ε‖ (Gaussian),  r_i = ‖v_{i−1} J‖,  v_i = v_{i−1} J / r_i,
 * returning r_t. r_t → |λ₁| when J has one eigenvalue of largest modulus
 * (at rate |λ₂/λ₁| per iteration); with a complex dominant pair it
 * oscillates about it. torchdeq's power_method returns the per-sample
 * Rayleigh quotient |vᵀ(vJ)| instead, equal in the limit for a real λ₁.
 * Costs one forward with tape 0 and t VJPs (counted in method_stats), t
 * host reads. NAN when off, not deq, before a forward, or while a training
 * forward awaits its backward (the tape is in use); 0 when vJ = 0. */
double method_spectral_radius(struct method *me);

#endif
