/* deq_config.c — the options of method=deq (deq.h): their key rows (the
 * one place their types, ranges and meaning are written), defaults, the
 * rules across keys, the derived values, and deq's registry entry. The
 * method itself is deq.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kernels/solve_fused.h"
#include "deq.h"
#include "solvers.h"
#include "method_impl.h"

extern const struct method_ops method_deq_ops;
extern const struct method_desc method_deq;

/* ------------------------------------------------------------- names */

static const char *const bmode_names[] = {"ift", "jfb", "phantom"};
static const char *const batching_names[] = {"per_sample", "global"};
static const char *const kernels_names[] = {"ops", "fused"};

KEY_NAME_FUNCS(b_mode_parse, b_mode_name, bmode_names)
KEY_NAME_FUNCS(solver_batching_parse, solver_batching_name, batching_names)
KEY_NAME_FUNCS(solver_kernels_parse, solver_kernels_name, kernels_names)

/* -------------------------------------------------------------- keys */

#define D struct deq_config
#define M KEY_METHOD
static const struct key_desc deq_keys[] = {
    KEY_ENUM(D, "f_solver", "deq", f_solver, solver_kind_parse,
	     solver_kind_name, "forward solver", M),
    KEY_DBL_GT(D, "f_tol", "deq", f_tol, 0, 1e30, "forward stop tolerance", M),
    KEY_INT(D, "f_max_iter", "deq", f_max_iter, 1, 100000,
	    "forward iteration cap", M),
    KEY_ENUM(D, "f_stop_mode", "deq", f_stop_mode, stop_mode_parse,
	     stop_mode_name, "forward residual: absolute or relative", M),
    KEY_INT(D, "f_history", "deq", f_history, 0, 100000,
	    "Broyden updates kept; 0 = f_max_iter", M),
    KEY_ENUM(D, "b_mode", "deq", b_mode, b_mode_parse, b_mode_name,
	     "backward: implicit (ift), Jacobian-free (jfb) or phantom "
	     "gradient",
	     M),
    KEY_ENUM(D, "b_solver", "deq", b_solver, solver_kind_parse,
	     solver_kind_name, "backward solver", M),
    KEY_DBL_GT(D, "b_tol", "deq", b_tol, 0, 1e30, "backward stop tolerance", M),
    KEY_INT(D, "b_max_iter", "deq", b_max_iter, 1, 100000,
	    "backward iteration cap", M),
    KEY_ENUM(D, "b_stop_mode", "deq", b_stop_mode, stop_mode_parse,
	     stop_mode_name, "backward residual: absolute or relative", M),
    KEY_INT(D, "b_history", "deq", b_history, 0, 100000,
	    "Broyden updates kept; 0 = b_max_iter", M),
    KEY_INT(D, "anderson_m", "deq", anderson_m, 1, 1000, "Anderson history", M),
    KEY_DBL(D, "anderson_lambda", "deq", anderson_lambda, 0, 1e30,
	    "Anderson regularisation", M),
    KEY_DBL_GT(D, "anderson_beta", "deq", anderson_beta, 0, 1e30,
	       "Anderson mixing", M),
    KEY_ENUM(D, "solver_batching", "deq", solver_batching,
	     solver_batching_parse, solver_batching_name,
	     "one Broyden/Anderson estimate per sample of the batch, or one "
	     "for the whole batch",
	     M),
    KEY_ENUM(D, "f_stop_scope", "deq", f_stop_scope, stop_scope_parse,
	     stop_scope_name,
	     "forward stop: residual over the batch, or every sample's own "
	     "(finished samples frozen)",
	     M),
    KEY_ENUM(D, "b_stop_scope", "deq", b_stop_scope, stop_scope_parse,
	     stop_scope_name,
	     "backward stop: residual over the batch, or every sample's own",
	     M),
    KEY_DBL(D, "protect_thres", "deq", protect_thres, 0, 1e30,
	    "0 = off; stop a solve whose residual exceeds this multiple of "
	    "its first (>= 1)",
	    M),
    KEY_INT(D, "stall_window", "deq", stall_window, 0, 100000,
	    "0 = off; stop a solve whose last N residuals lie within a factor "
	    "1.3 (>= 2)",
	    M),
    KEY_INT(D, "sync_every", "deq", sync_every, 1, 100000,
	    "solver evaluations between host reads of the stop decision "
	    "(made on the device); up to N-1 evaluations may run after it",
	    M),
    KEY_ENUM(D, "solver_kernels", "deq", solver_kernels, solver_kernels_parse,
	     solver_kernels_name,
	     "Broyden/Anderson as backend ops, or fused: two passes an "
	     "evaluation (with cuda_graphs one WHILE loop a solve; histories "
	     "and anderson_m <= 256)",
	     M),
    KEY_DBL(D, "jac_loss_weight", "deq", jac_loss_weight, 0, 1e30,
	    "Jacobian regularisation weight γ of ‖εᵀJ_f(z*)‖²/n; 0 = off", M),
    KEY_DBL(D, "jac_loss_freq", "deq", jac_loss_freq, 0, 1,
	    "probability that a training step applies the Jacobian "
	    "regularisation",
	    M),
    KEY_DBL(D, "jac_fd_eta", "deq", jac_fd_eta, 0, 1,
	    "relative step of the Jacobian regulariser's central difference; "
	    "0 = cube root of the arithmetic's machine epsilon (float32, "
	    "float64, or bf16's 2^-7 under precision=bf16)",
	    M),
    KEY_INT(D, "phantom_steps", "deq", phantom_steps, 1, 100000,
	    "b_mode=phantom: damped steps k from z*, backpropagated", M),
    KEY_DBL_GT(D, "phantom_tau", "deq", phantom_tau, 0, 1,
	       "b_mode=phantom: damping λ of z ← λ f(z) + (1−λ) z", M),
    KEY_INT(D, "spectral_radius_iters", "deq", spectral_radius_iters, 0, 100000,
	    "power iterations for ρ(J_f(z*)) at the valid evaluation; 0 = off",
	    M),
};
#undef D
#undef M

/* ---------------------------------------------------------- options */

/* Defaults: the DEQ-Transformer's training thresholds (Bai et al. 2019:
 * 30 forward Broyden iterations, 40 backward), full Broyden history as in
 * the paper, relative residual 1e-3 (scale-free, so one ε means the same
 * at every width), torchdeq's Anderson settings (m 5, λ 1e-4, β 1).
 * Jacobian regularisation off (γ = 0; p = 1 so that γ > 0 alone turns it
 * on for every step); phantom k = 5, λ = 0.5 (torchdeq recommends τ
 * 0.5–0.7 for MDEQ); no spectral radius (it costs n of depth memory). */
static void deq_defaults(void *opts)
{
	struct deq_config *c = opts;
	memset(c, 0, sizeof(*c));
	c->f_solver = SOLVER_BROYDEN;
	c->f_tol = 1e-3;
	c->f_max_iter = 30;
	c->f_stop_mode = STOP_REL;
	c->b_mode = BMODE_IFT;
	c->b_solver = SOLVER_BROYDEN;
	c->b_tol = 1e-3;
	c->b_max_iter = 40;
	c->b_stop_mode = STOP_REL;
	c->anderson_m = 5;
	c->anderson_lambda = 1e-4;
	c->anderson_beta = 1.0;
	c->solver_batching = BATCHING_PER_SAMPLE;
	c->f_stop_scope = SCOPE_BATCH;
	c->b_stop_scope = SCOPE_BATCH;
	c->jac_loss_freq = 1.0;
	c->phantom_steps = 5;
	c->phantom_tau = 0.5;
	c->sync_every = 1;
}

/* solver_kernels=fused: the fused iterations are Broyden's and
 * Anderson's (kernels/solve_fused.h), whose rings keep at most
 * DQ_FUSED_MAX_H pairs or iterates. */
static int fused_check(const struct deq_config *c, char *err, size_t errlen)
{
	int bwd = c->b_mode == BMODE_IFT;
	int fh = c->f_history ? c->f_history : c->f_max_iter;
	int bh = c->b_history ? c->b_history : c->b_max_iter;
	if (c->f_solver == SOLVER_FIXED_POINT ||
	    (bwd && c->b_solver == SOLVER_FIXED_POINT)) {
		snprintf(err, errlen,
			 "solver_kernels=fused is Broyden's or Anderson's "
			 "iteration: set %s to broyden or anderson, or "
			 "solver_kernels=ops",
			 c->f_solver == SOLVER_FIXED_POINT ? "f_solver"
							   : "b_solver");
		return -1;
	}
	int big_f = c->f_solver == SOLVER_BROYDEN && fh > DQ_FUSED_MAX_H;
	int big_b = bwd && c->b_solver == SOLVER_BROYDEN && bh > DQ_FUSED_MAX_H;
	int uses_a = c->f_solver == SOLVER_ANDERSON ||
		     (bwd && c->b_solver == SOLVER_ANDERSON);
	if (big_f || big_b || (uses_a && c->anderson_m > DQ_FUSED_MAX_H)) {
		snprintf(err, errlen,
			 "solver_kernels=fused keeps at most %d pairs or "
			 "iterates: set %s <= %d (or solver_kernels=ops)",
			 DQ_FUSED_MAX_H,
			 big_f ? "f_history (or the f_max_iter it defaults to)"
			 : big_b
			     ? "b_history (or the b_max_iter it defaults to)"
			     : "anderson_m",
			 DQ_FUSED_MAX_H);
		return -1;
	}
	return 0;
}

/* The breaks are off at 0; on, protect_thres below 1 would stop every
 * solve at once and a window of 1 compares a residual with itself. */
static int deq_check(const struct method_config *mc, const void *opts,
		     char *err, size_t errlen)
{
	const struct deq_config *c = opts;
	(void)mc;
	if (c->protect_thres > 0 && c->protect_thres < 1) {
		snprintf(err, errlen,
			 "protect_thres=%g must be 0 (off) or a finite number "
			 ">= 1",
			 c->protect_thres);
		return -1;
	}
	if (c->solver_kernels == SOLVER_KERNELS_FUSED &&
	    fused_check(c, err, errlen) != 0)
		return -1;
	if (c->stall_window == 1) {
		snprintf(err, errlen, "stall_window=%d must be 0 (off) or >= 2",
			 c->stall_window);
		return -1;
	}
	return 0;
}

/* Histories 0 → the iteration caps (the paper's full Broyden history). */
static void deq_resolve(const struct method_config *mc, void *opts)
{
	struct deq_config *c = opts;
	(void)mc;
	if (c->f_history == 0)
		c->f_history = c->f_max_iter;
	if (c->b_history == 0)
		c->b_history = c->b_max_iter;
}

/* The host vector of the Jacobian tools: ε of the regulariser or the
 * power iteration's start, n_state doubles. */
static int deq_init(struct method *me, char *err, size_t errlen)
{
	const struct deq_config *c = deq_config(&me->cfg);
	if (!(c->jac_loss_weight > 0 || c->spectral_radius_iters > 0))
		return 0;
	me->host = malloc(sizeof(double) * me->m->n_state);
	if (!me->host) {
		snprintf(err, errlen,
			 "out of host memory for the Jacobian probe (%zu "
			 "doubles)",
			 me->m->n_state);
		return -1;
	}
	return 0;
}

struct deq_config *deq_config(const struct method_config *c)
{
	return (struct deq_config *)&c->opts.deq;
}

int deq_kind(void)
{
	return method_kind_parse(method_deq.name);
}

/* Forward solver / backward mode: "broyden/ift". */
static void deq_label(const struct method_config *mc, char *buf, size_t n)
{
	const struct deq_config *c = deq_config(mc);
	snprintf(buf, n, "%s/%s", solver_kind_name(c->f_solver),
		 b_mode_name(c->b_mode));
}

/* plan tries Broyden with history h (forward and backward) in {4, 8, 16,
 * and full history (0: each solve's own cap) when f_max_iter is above
 * 16}, then Anderson with m in {3, 5, 8}. */
static int deq_candidate(const struct method_config *mc, int i,
			 struct method_candidate *out)
{
	static const int hs[] = {4, 8, 16}, ms[] = {3, 5, 8};
	int cap = deq_config(mc)->f_max_iter, nb = cap > 16 ? 4 : 3;
	const char *bk[] = {"f_solver", "b_solver", "f_history", "b_history"};
	const char *ak[] = {"f_solver", "b_solver", "anderson_m"};
	char v[24], label[64];
	if (i < nb) {
		/* the last: full history, 0 (each solve its own cap), as the
		 * suites and the defaults run it */
		const char *bv[] = {"broyden", "broyden", v, v};
		snprintf(v, sizeof(v), "%d", i < 3 ? hs[i] : 0);
		if (i < 3)
			snprintf(label, sizeof(label), "deq broyden h=%s", v);
		else
			snprintf(label, sizeof(label),
				 "deq broyden full history");
		method_candidate_set(out, label, 4, bk, bv);
		return 1;
	}
	if (i - nb >= 3)
		return 0;
	const char *av[] = {"anderson", "anderson", v};
	snprintf(v, sizeof(v), "%d", ms[i - nb]);
	snprintf(label, sizeof(label), "deq anderson m=%s", v);
	method_candidate_set(out, label, 3, ak, av);
	return 1;
}

const struct method_desc method_deq = {
    .name = "deq",
    .ops = &method_deq_ops,
    .opts_offset = offsetof(struct method_opts, deq),
    .keys = deq_keys,
    .n_keys = sizeof(deq_keys) / sizeof(deq_keys[0]),
    .defaults = deq_defaults,
    .check = deq_check,
    .resolve = deq_resolve,
    .init = deq_init,
    .uses_layers = 0,
    .label = deq_label,
    .candidate = deq_candidate,
};
