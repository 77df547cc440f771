/* checkpoint.c — gradient checkpointing every k layers (Chen et al. 2016,
 * "Training Deep Nets with Sublinear Memory Cost"), on the same L layers as
 * unroll.c:
 *   the L layers form S = ⌈L/k⌉ segments of k layers (the last one has
 *   L − (S−1)k ≤ k). The forward pass keeps only the state entering each
 *   segment after the first (segment 0 starts from z₀ = 0) and, for the
 *   last segment, its tapes. The backward pass backpropagates through the
 *   last segment's tapes, then for each earlier segment, last to first,
 *   recomputes its tapes from its checkpoint and backpropagates through
 *   them.
 *
 * Same block calls on the same values in the same order as unroll.c, so on
 * the CPU its gradients are bitwise equal to unroll's.
 *
 * Depth memory (elements):
 *   (S − 1) · n_state   checkpoints
 * +  k · tape           tapes of one segment
 * +  4 · n_state        z ping-pong for (re)computation, ḡ ping-pong
 * so with k = round(√L) it grows like √L. Evaluations per training step:
 * L + (L − len(last segment)) forward (one extra per layer outside the last
 * segment), L VJPs.
 */
#include "method_impl.h"

static int n_segments(const struct method_config *c)
{
	return (c->layers + c->k - 1) / c->k;
}

/* Layers in segment s: k, except the last. */
static int seg_len(const struct method_config *c, int s)
{
	int lo = s * c->k, hi = lo + c->k;
	return (hi < c->layers ? hi : c->layers) - lo;
}

static void ckpt_layout(const struct model *m, const struct method_config *c,
			struct method_layout *l)
{
	(void)m;
	l->n_tapes = c->k;
	l->n_ckpts = n_segments(c) - 1;
	l->n_vecs = 4;
}

/* State entering segment s (s ≥ 1: checkpoint s−1; s = 0: zeros in a). */
static const void *seg_input(struct method *me, int s, void *a)
{
	if (s > 0)
		return method_ckpt(me, s - 1);
	me->m->be->ops->fill(me->m->be->ctx, a, 0.0, me->m->n_state);
	return a;
}

/* Runs segment s with tapes from its input; the last output goes to z
 * (NULL: to a work vector). */
static void seg_taped(struct method *me, int s, const void *u, void *z)
{
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	const void *in = seg_input(me, s, a);
	int len = seg_len(&me->cfg, s);
	for (int j = 0; j < len; j++) {
		void *out = (j == len - 1 && z) ? z : (in == a ? b : a);
		method_f(me, out, in, u, method_tape(me, j));
		in = out;
	}
}

static void ckpt_forward(struct method *me, const void *u, void *z, int train)
{
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	const int S = n_segments(&me->cfg);

	if (!train) {
		method_run_plain(me, u, seg_input(me, 0, a), z, me->cfg.layers,
				 a, b);
		return;
	}
	for (int s = 0; s < S - 1; s++)
		method_run_plain(me, u, seg_input(me, s, a), method_ckpt(me, s),
				 seg_len(&me->cfg, s), a, b);
	seg_taped(me, S - 1, u, z);
}

static void ckpt_backward(struct method *me, const void *gz, void *gu)
{
	void *ga = method_vec(me, 2), *gb = method_vec(me, 3);
	const void *g = gz;
	for (int s = n_segments(&me->cfg) - 1; s >= 0; s--) {
		if (s < n_segments(&me->cfg) - 1)
			seg_taped(me, s, me->u, NULL);
		for (int j = seg_len(&me->cfg, s) - 1; j >= 0; j--) {
			void *out = g == ga ? gb : ga;
			method_vjp(me, out, gu, g, method_tape(me, j), 1);
			g = out;
		}
	}
}

const struct method_ops method_checkpoint_ops = {
    .layout = ckpt_layout,
    .forward = ckpt_forward,
    .backward = ckpt_backward,
};
