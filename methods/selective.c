/* selective.c — unroll with selective activation recomputation, after
 * Megatron-LM's (Korthikanti et al. 2022, "Reducing Activation
 * Recomputation in Large Transformer Models", §4.2): the L layers of
 * unroll.c, each keeping a selective tape (model.h §Selective tapes: the
 * transformer's tape without its attention probabilities att (B,H,T,T)
 * and attention output (N,d)); each VJP first recomputes those two from
 * the tape's q, k and v with the forward's own attention op, into one
 * scratch that every layer's VJP reuses.
 *
 * Same block arithmetic on the same values in the same order as unroll.c
 * (the recomputation repeats the forward's attention op on the same qkv),
 * so its gradients are bitwise unroll's on the CPU, float32 and float64,
 * fp32 and bf16 (tests/test_selective.c).
 *
 * Depth memory (bytes; e the element size, e_t the tape's: 2 under
 * precision=bf16, else e; N = B·T):
 *   L · e_t · N (7d + F + 4)     selective tapes
 * + e · (B H T² + N d)           the recompute scratch
 * + 2 · e · n_state              z and ḡ ping-pong, as unroll
 * against unroll's L · e_t · (N (8d + F + 4) + B H T²) + 2 e n_state.
 * Evaluations per training step: L forward, L VJPs and L attention
 * recomputations (work unit attn_recompute). Inference only: 2 · n_state,
 * no tapes and no scratch. Models without a selective tape (tanh_cell,
 * trellisnet) are refused: nothing in their tapes is cheaper to
 * recompute than a whole block, which is checkpoint k=1.
 */
#include "method_impl.h"

static void selective_layout(const struct model *m,
			     const struct method_config *c,
			     struct method_layout *l)
{
	(void)m;
	l->n_tapes = c->inference ? 0 : c->layers;
	l->n_vecs = 2;
	l->selective = 1;
}

static void selective_forward(struct method *me, const void *u, void *z,
			      int train)
{
	method_unroll_forward(me, u, z, train, me->tapes);
}

static void selective_backward(struct method *me, const void *gz, void *gu)
{
	method_vjp_taped(me, gz, gu, me->cfg.layers, method_vec(me, 0),
			 method_vec(me, 1));
}

static const struct method_ops method_selective_ops = {
    .layout = selective_layout,
    .forward = selective_forward,
    .backward = selective_backward,
};

const struct method_desc method_selective = {
    .name = "selective",
    .ops = &method_selective_ops,
    .uses_layers = 1,
    .graphable = 1,
    .needs_selective = 1,
    .evals = method_evals_layers,
};
