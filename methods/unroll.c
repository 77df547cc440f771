/* unroll.c — plain backpropagation through L applications of the tied
 * block (docs/ARCHITECTURE.md §Methods):
 *   z₀ = 0,  z_{i+1} = f(z_i; u) for i < L,  z = z_L;
 *   backward: ḡ_L = ∂L/∂z, ḡ_i = ḡ_{i+1} ∂f/∂z(z_i) from tape i, every VJP
 *   adding into ∂L/∂θ and ∂L/∂u.
 *
 * Depth memory (elements): L · tape + 2 · n_state — every tape is kept, plus
 * two work vectors that carry z between layers in the forward pass and ḡ in
 * the backward pass. Linear in L. Evaluations per training step: L forward,
 * L VJPs. Inference only (method_config.inference): 2 · n_state, no tapes.
 */
#include "method_impl.h"

static void unroll_layout(const struct model *m, const struct method_config *c,
			  struct method_layout *l)
{
	(void)m;
	l->n_tapes = c->inference ? 0 : c->layers;
	l->n_vecs = 2;
}

static void unroll_forward(struct method *me, const void *u, void *z, int train)
{
	method_unroll_forward(me, u, z, train, me->tapes);
}

static void unroll_backward(struct method *me, const void *gz, void *gu)
{
	method_vjp_taped(me, gz, gu, me->cfg.layers, method_vec(me, 0),
			 method_vec(me, 1));
}

static const struct method_ops method_unroll_ops = {
    .layout = unroll_layout,
    .forward = unroll_forward,
    .backward = unroll_backward,
};

const struct method_desc method_unroll = {
    .name = "unroll",
    .ops = &method_unroll_ops,
    .uses_layers = 1,
    .graphable = 1,
    .evals = method_evals_layers,
};
