/* deq.c — deep equilibrium model (Bai, Kolter, Koltun, NeurIPS 2019):
 *
 * forward   solve z* = f(z*; u) from z₀ = 0 with f_solver (solvers.h), no
 *           tapes; then z = f(z*; u) once more, with its tape when
 *           training (§3.1.3: the backward pass needs only this one
 *           application). Evaluation mode applies it without a tape, so
 *           train and eval return the same z.
 * backward  b_mode=ift (implicit function theorem, §3.1.2, eq. (6)): with
 *           J = ∂f/∂z at z*, solve  y = y J + ḡ  (ḡ = ∂L/∂z) with
 *           b_solver using VJPs of the tape only, then
 *           ∂L/∂θ += y ∂f/∂θ, ∂L/∂u += y ∂f/∂u (one VJP). Since
 *           z = f(z*) and z* = f(z*), ∂z/∂θ = (I − J)⁻¹ ∂f/∂θ exactly.
 *           b_mode=jfb (Jacobian-free backprop, Fung et al. 2022): y = ḡ.
 *
 * Depth memory (elements): tape + n_state (the discarded y ∂f/∂z of the
 * last VJP) — independent of the iterations taken and of f_max_iter.
 * Solver memory: the larger of the forward and backward solvers' needs
 * (solvers.h), shared because the two solves never overlap; with Broyden,
 * 6 n + 2 h n + S h for history h and S = B samples (1 with
 * solver_batching=global).
 * Evaluations per training step: forward solve iterations + 1 forward;
 * backward solve iterations + 1 VJPs (jfb: 1).
 */
#include "method_impl.h"

/* Solver parameters of the forward (bwd = 0) or backward solve: one
 * problem per sample unless solver_batching=global (solvers.h). */
static struct solver_params params_of(const struct model *m,
				      const struct method_config *c, int bwd)
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
	};
	return p;
}

static void deq_layout(const struct model *m, const struct method_config *c,
		       struct method_layout *l)
{
	l->n_tapes = 1;
	l->n_vecs = 1;
	l->n_solve = c->b_mode == BMODE_IFT ? 2 : 1;
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
	me->m->be->ops->axpy(me->m->be->ctx, out, 1.0, me->gz, me->m->n_state);
}

static void deq_forward(struct method *me, const void *u, void *z, int train)
{
	struct fp_map F = {map_forward, me};
	const void *zs = solver_solve(
	    me->solver, &me->lay.solve[0], &F, &me->st.fwd, me->st.fwd_trace,
	    &me->st.fwd_trace_len, &me->st.host_reads);
	me->st.has_fwd_solve = 1;
	me->zstar = zs;
	method_f(me, z, zs, u, train ? method_tape(me, 0) : NULL);
}

static void deq_backward(struct method *me, const void *gz, void *gu)
{
	const void *y = gz;
	if (me->cfg.b_mode == BMODE_IFT) {
		struct fp_map F = {map_backward, me};
		me->gz = gz;
		y = solver_solve(me->solver, &me->lay.solve[1], &F, &me->st.bwd,
				 me->st.bwd_trace, &me->st.bwd_trace_len,
				 &me->st.host_reads);
		me->st.has_bwd_solve = 1;
	}
	method_vjp(me, method_vec(me, 0), gu, y, method_tape(me, 0), 1);
}

const struct method_ops method_deq_ops = {
    .layout = deq_layout,
    .forward = deq_forward,
    .backward = deq_backward,
};
