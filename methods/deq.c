/* deq.c — deep equilibrium model (Bai, Kolter, Koltun, NeurIPS 2019):
 *
 * forward   solve z* = f(z*; u) from z₀ = 0 with f_solver (solvers.h), no
 *           tapes; then (ift, jfb) z = f(z*; u) once more, with its tape
 *           when training (§3.2, memory cost: the backward pass needs
 *           only this one application), or (phantom) k damped steps from
 *           z₀ = z*:
 *             z_{i+1} = λ f(z_i) + (1−λ) z_i,  z = z_k,
 *           tape i at z_i when training. Evaluation mode applies the same
 *           steps without tapes, so train and eval return the same z.
 * backward  b_mode=ift (implicit function theorem: Theorem 1 of §3.1.2,
 *           eq. (8); the linear system of §3.1.3, eq. (11)): with
 *           J = ∂f/∂z at z*, solve  y = y J + ḡ  (ḡ = ∂L/∂z) with
 *           b_solver using VJPs of the tape only, then
 *           ∂L/∂θ += y ∂f/∂θ, ∂L/∂u += y ∂f/∂u (one VJP). Since
 *           z = f(z*) and z* = f(z*), ∂z/∂θ = (I − J)⁻¹ ∂f/∂θ exactly.
 *           b_mode=jfb (Jacobian-free backprop, Fung et al. 2022): y = ḡ.
 *           b_mode=phantom (Geng et al., NeurIPS 2021; torchdeq's grad=k
 *           with tau=λ): exact backpropagation through the k damped steps
 *           with z* held constant, no solve:
 *             ḡ_k = ḡ,  ∂L/∂θ += λ ḡ_{i+1} ∂f/∂θ|_{z_i} (and u),
 *             ḡ_i = λ ḡ_{i+1} J(z_i) + (1−λ) ḡ_{i+1},  i = k−1 … 0,
 *           the VJPs taking the scaled cotangent λ ḡ_{i+1}. k = 1, λ = 1
 *           is jfb, bit for bit; as k → ∞ it tends to the IFT gradient
 *           when ρ(I − λ(I − J)) < 1 (λ Σ_j (I − λ(I − J))^j = (I − J)⁻¹).
 *
 * Jacobian regularisation (Bai, Koltun, Kolter, ICML 2021), when
 * jac_loss_weight γ > 0 and the step drew it (probability jac_loss_freq,
 * one Bernoulli draw per training forward from the method's generator):
 *   R = ‖εᵀ J_f(z*)‖² / n,  ε ~ N(0, I_n) (one Hutchinson probe; n = all
 *   state elements, the batch included, as torchdeq's jac_reg), so E R =
 *   ‖J‖_F² / n. z* is a constant (as in the DEQ code, which detaches z*
 *   and differentiates f's parameters and input injection at it): with
 *   w = εᵀ J (one VJP at z*),
 *     ∇_θ R = (2/n) ∂/∂θ [εᵀ J(θ) w̄]|_{w̄ = w}, and
 *     εᵀ J w̄ = εᵀ (f(z*+h w̄) − f(z*−h w̄)) / (2h) + O(h²),
 *   so  γ ∇_θ R ≈ VJP_θ(c ε at z*+h w) + VJP_θ(−c ε at z*−h w),
 *   c = γ/(n h): two forwards with tape 0 and two VJPs with parameter
 *   gradients (the same for ∂/∂u, into gu), after the main backward. The
 *   bias is the central difference's, (h²/3n)·∂/∂θ εᵀ f'''(z*)[w, w, w]:
 *   O(η²) relative (measured 0.34 η² on tanh_cell) with the step
 *     h ‖w‖ = η · max(‖z*‖, √n),
 *   η = jac_fd_eta, or ∛ε_mach of the arithmetic when 0
 *   (dq_precision_eps: 4.9e-3 float32, 6.1e-6 float64, 0.198 under
 *   precision=bf16, whose block outputs carry 8 significant bits), which
 *   balances that truncation against the rounding of f, ε_mach/η (√n: the
 *   norm of a state of unit elements, for a z* near 0). float32's step
 *   under bf16 would leave ε_bf16/η ≈ 1.6: noise, not a gradient. With tf32=true the GEMMs round at ~1e-3, so the quotient
 *   carries ~1e-3/η ≈ 0.2 relative noise (raise jac_fd_eta, or tf32=false).
 *   Kinks: a ReLU unit whose pre-activation lies within the band is on in
 *   one of the two evaluations and off in the other, so its parameter VJPs
 *   do not cancel and add O(γ/(n h)) — the estimate differentiates R
 *   smoothed over the band, where R jumps as units switch; autograd's
 *   double backward (torchdeq) drops those terms (relu'' = 0). On the
 *   tests' transformer (15 positions, F = 20) one unit falls in float32's
 *   band and moves the estimate by 2–7% of most tensors' largest entry and
 *   30× ff1.weight's (small) one; none falls in float64's.
 *   Cost: 2 forwards, 3 VJPs (w and the two parameter VJPs) and 2 host
 *   reads per step that applies it; R is in method_stats.jac_loss.
 *
 * Spectral radius (method_spectral_radius): power iteration on VJPs at the
 * last evaluation forward's z*: one forward with tape 0, t VJPs.
 *
 * Depth memory (elements): n_tapes · tape + n_vecs · n, with
 *   n_tapes = 1 (ift, jfb) or k (phantom),
 *   n_vecs  = max(b, 4 if γ > 0, 2 if spectral_radius_iters > 0),
 *   b = 1 (ift, jfb: the discarded ∂f/∂z of the last VJP) or 2 (phantom:
 *   the ping-pong z_i and cotangents),
 * independent of the iterations taken and of f_max_iter. The regulariser
 * reuses tape 0 after the main backward (so its forwards add no tape) and
 * needs 4 vectors at once: z* (copied at the forward, since the backward
 * solve overwrites the solver's copy), ε, w and the discarded outputs.
 * Host: n doubles for ε when γ > 0 or spectral_radius_iters > 0.
 * Solver memory: the larger of the forward and backward solvers' needs
 * (solvers.h), shared because the two solves never overlap; with Broyden,
 * 6 n + 2 h n + S h for history h and S = B samples (1 with
 * solver_batching=global). jfb and phantom have no backward solve.
 * Inference only (method_config.inference, deqbench eval): n_tapes = 1 if
 * spectral_radius_iters > 0 else 0, n_vecs = 2 for phantom or the spectral
 * radius else 1, and the forward solver's memory alone.
 * Evaluations per training step: forward solve iterations + 1 forward (+
 * k − 1 for phantom); backward solve iterations + 1 VJPs (jfb: 1, phantom:
 * k); + 2 forwards and 3 VJPs when the regulariser applies.
 */
#include <math.h>

#include "deq.h"
#include "solvers.h"
#include "method_impl.h"

/* Work vectors (method_vec). */
enum { V_OUT = 0, V_EPS = 1, V_W = 2, V_ZSTAR = 3 };

extern const struct method_desc method_deq;

/* The resolved deq options of me. */
static inline const struct deq_config *dq(const struct method *me)
{
	return deq_config(&me->cfg);
}

/* Solver parameters of the forward (bwd = 0) or backward solve: one
 * problem per sample unless solver_batching=global (solvers.h). */
static struct solver_params params_of(const struct model *m,
				      const struct deq_config *c, int bwd)
{
	int per_sample = c->solver_batching == BATCHING_PER_SAMPLE;
	struct solver_params p = {
	    .kind = bwd ? c->b_solver : c->f_solver,
	    .tol = bwd ? c->b_tol : c->f_tol,
	    .max_iter = bwd ? c->b_max_iter : c->f_max_iter,
	    .stop = bwd ? c->b_stop_mode : c->f_stop_mode,
	    .history = bwd ? c->b_history : c->f_history,
	    .anderson_m = c->anderson_m,
	    .lambda = c->anderson_lambda,
	    .beta = c->anderson_beta,
	    .samples = per_sample ? m->B : 1,
	    .parts = per_sample ? m->state_parts : 1,
	    .scope = bwd ? c->b_stop_scope : c->f_stop_scope,
	    .protect = c->protect_thres,
	    .stall = c->stall_window,
	    .sync_every = c->sync_every,
	    .fused = c->solver_kernels == SOLVER_KERNELS_FUSED,
	};
	return p;
}

static void deq_layout(const struct model *m, const struct method_config *mc,
		       struct method_layout *l)
{
	const struct deq_config *c = deq_config(mc);
	int phantom = c->b_mode == BMODE_PHANTOM;
	int v = phantom ? 2 : 1;
	if (c->jac_loss_weight > 0 && v < 4)
		v = 4;
	if (c->spectral_radius_iters > 0 && v < 2)
		v = 2;
	l->n_tapes = phantom ? c->phantom_steps : 1;
	l->n_vecs = v;
	l->n_solve = c->b_mode == BMODE_IFT ? 2 : 1;
	if (mc->inference) {
		/* the forward solve, the phantom steps' ping-pong vectors, and
		 * the spectral radius's tape at z* and two vectors */
		int sr = c->spectral_radius_iters > 0;
		l->n_tapes = sr;
		l->n_vecs = phantom || sr ? 2 : 1;
		l->n_solve = 1;
	}
	l->solve[0] = params_of(m, c, 0);
	l->solve[1] = params_of(m, c, 1);
}

/* F(z) = f(z; u), no tape. */
static void map_forward(void *ctx, void *out, const void *in)
{
	struct method *me = ctx;
	method_f(me, out, in, me->u, NULL);
}

/* F(y) = y J + ḡ: a VJP of the tape at z*, without parameter gradients. */
static void map_backward(void *ctx, void *out, const void *in)
{
	struct method *me = ctx;
	method_vjp(me, out, NULL, in, method_tape(me, 0), 0);
	be_axpy(me->m->be, out, 1.0, me->gz, me->m->n_state);
}

/* z = z_k of the k damped steps from z*; tape i at z_i when training.
 * z_1 … z_{k−1} alternate between work vectors 0 and 1. */
static void phantom_forward(struct method *me, const void *zs, void *z,
			    int train)
{
	const struct backend *be = me->m->be;
	size_t n = me->m->n_state;
	int k = dq(me)->phantom_steps;
	double lam = dq(me)->phantom_tau;
	const void *in = zs;
	for (int i = 0; i < k; i++) {
		void *out = i == k - 1 ? z : method_vec(me, i % 2);
		method_f(me, out, in, me->u, train ? method_tape(me, i) : NULL);
		if (lam != 1.0) {
			be_scale(be, out, lam, n);
			be_axpy(be, out, 1.0 - lam, in, n);
		}
		in = out;
	}
}

/* Backpropagation through the k damped steps (header). The VJPs take
 * c_{i+1} = λ ḡ_{i+1}; then c_i = λ·(c_{i+1} J) + (1−λ)·c_{i+1}. The
 * cotangents alternate between work vectors 0 and 1 (ḡ itself first when
 * λ = 1); ḡ_0, the gradient at the constant z*, is dropped. */
static void phantom_backward(struct method *me, const void *gz, void *gu)
{
	const struct backend *be = me->m->be;
	size_t n = me->m->n_state;
	double lam = dq(me)->phantom_tau;
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	const void *c = gz;
	if (lam != 1.0) {
		be_copy(be, b, gz, n);
		be_scale(be, b, lam, n);
		c = b;
	}
	for (int i = dq(me)->phantom_steps - 1; i >= 0; i--) {
		void *out = c == a ? b : a;
		method_vjp(me, out, gu, c, method_tape(me, i), 1);
		if (i == 0)
			break;
		if (lam != 1.0) {
			be_scale(be, out, lam, n);
			be_axpy(be, out, 1.0 - lam, c, n);
		}
		c = out;
	}
}

static void deq_jac_backward(struct method *me, void *gu);

/* A solve's own iterations into the step's work (method_work). */
static void deq_solver_work(struct method *me, const struct solve_stats *st)
{
	me->st.work.solver_update += st->updates;
	me->st.work.solver_history_sum += st->history_sum;
}

static void deq_forward(struct method *me, const void *u, void *z, int train)
{
	struct fp_map F = {map_forward, me, {me->u, NULL}};
	long f0 = me->st.forward_evals, w0 = me->st.work.block_fwd;
	const void *zs = solver_solve(
	    me->solver, &me->lay.solve[0], &F, &me->st.fwd, me->st.fwd_trace,
	    &me->st.fwd_trace_len, &me->st.host_reads);
	/* the evaluations that ran (a recorded solve's map is called at the
	 * recording, for every segment, and not at a replay) */
	me->st.forward_evals = f0 + me->st.fwd.evals;
	me->st.work.block_fwd = w0 + me->st.fwd.evals;
	deq_solver_work(me, &me->st.fwd);
	me->st.has_fwd_solve = 1;
	me->zstar = zs;
	if (dq(me)->b_mode == BMODE_PHANTOM)
		phantom_forward(me, zs, z, train);
	else
		method_f(me, z, zs, u, train ? method_tape(me, 0) : NULL);
	if (train && dq(me)->jac_loss_weight > 0 &&
	    method_u01(me) < dq(me)->jac_loss_freq) {
		/* the backward solve overwrites the solver's z* */
		me->st.jac_applied = 1;
		be_copy(me->m->be, method_vec(me, V_ZSTAR), zs, me->m->n_state);
	}
}

static void deq_backward(struct method *me, const void *gz, void *gu)
{
	const void *y = gz;
	if (dq(me)->b_mode == BMODE_PHANTOM) {
		phantom_backward(me, gz, gu);
	} else {
		if (dq(me)->b_mode == BMODE_IFT) {
			struct fp_map F = {map_backward, me, {gz, NULL}};
			long v0 = me->st.vjp_evals;
			long w0 = me->st.work.block_vjp_input;
			me->gz = gz;
			y = solver_solve(me->solver, &me->lay.solve[1], &F,
					 &me->st.bwd, me->st.bwd_trace,
					 &me->st.bwd_trace_len,
					 &me->st.host_reads);
			me->st.vjp_evals = v0 + me->st.bwd.evals;
			me->st.work.block_vjp_input = w0 + me->st.bwd.evals;
			deq_solver_work(me, &me->st.bwd);
			me->st.has_bwd_solve = 1;
		}
		method_vjp(me, method_vec(me, V_OUT), gu, y, method_tape(me, 0),
			   1);
	}
	if (me->st.jac_applied)
		deq_jac_backward(me, gu);
}

/* ------------------------------------------- Jacobian regularisation */

/* At the end of a training backward whose forward drew the regulariser:
 * R into the stats, γ ∇R (estimator in the header) into the parameter
 * gradients and gu. */
static void deq_jac_backward(struct method *me, void *gu)
{
	struct backend *be = me->m->be;
	size_t n = me->m->n_state;
	void *out = method_vec(me, V_OUT), *eps = method_vec(me, V_EPS);
	void *w = method_vec(me, V_W), *zs = method_vec(me, V_ZSTAR);
	void *tape = method_tape(me, 0); /* at z*: the main backward is done */

	method_gaussian(me, me->host, n);
	me->probe_valid = 1;
	be_upload(be, eps, me->host, n);
	method_vjp(me, w, NULL, eps, tape, 0); /* w = εᵀ J(z*) */
	double wn = be_norm(be, w, n), zn = be_norm(be, zs, n);
	me->st.host_reads += 2;
	me->st.jac_loss = wn * wn / (double)n;
	if (!(wn > 0) || !isfinite(wn) || !isfinite(zn))
		return; /* w = 0: ∇R = 0; non-finite: the loss will say so */
	double eta =
	    dq(me)->jac_fd_eta > 0
		? dq(me)->jac_fd_eta
		: cbrt(dq_precision_eps(me->m->cfg.precision, be->elem));
	double h = eta * fmax(zn, sqrt((double)n)) / wn;
	double c = dq(me)->jac_loss_weight / ((double)n * h);

	be_axpy(be, zs, h, w, n); /* z* + h w */
	method_f(me, out, zs, me->u, tape);
	be_scale(be, eps, c, n);
	method_vjp(me, out, gu, eps, tape, 1);
	be_axpy(be, zs, -2.0 * h, w, n); /* z* − h w */
	method_f(me, out, zs, me->u, tape);
	be_scale(be, eps, -1.0, n);
	method_vjp(me, out, gu, eps, tape, 1);
}

/* ---------------------------------------------------- spectral radius */

double method_spectral_radius(struct method *me)
{
	struct backend *be = me->m->be;
	size_t n = me->m->n_state;
	int t = dq(me)->spectral_radius_iters;
	if (me->desc != &method_deq || t <= 0 || !me->zstar ||
	    !me->eval_forward)
		return NAN;
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	void *tape = method_tape(me, 0);
	double r = NAN;

	method_f(me, a, me->zstar, me->u, tape);
	method_gaussian(me, me->host, n);
	me->probe_valid = 0;
	be_upload(be, a, me->host, n);
	be_scale(be, a, 1.0 / be_norm(be, a, n), n);
	me->st.host_reads++;
	for (int i = 0; i < t; i++) {
		method_vjp(me, b, NULL, a, tape, 0);
		r = be_norm(be, b, n);
		me->st.host_reads++;
		if (!(r > 0) || !isfinite(r))
			break; /* 0: nilpotent on v; non-finite: NAN/inf */
		be_scale(be, b, 1.0 / r, n);
		void *s = a;
		a = b;
		b = s;
	}
	return isfinite(r) ? r : NAN;
}

const struct method_ops method_deq_ops = {
    .layout = deq_layout,
    .forward = deq_forward,
    .backward = deq_backward,
};
