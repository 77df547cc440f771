/* offload.c — unrolled backpropagation with the tapes kept in host memory
 * (docs/ARCHITECTURE.md §Offload; activation offloading as in vDNN, Rhu et
 * al. 2016, and the "host memory for activations" alternative of the
 * rematerialisation literature). Same arithmetic as unroll, in the same
 * order, so its gradients are bitwise unroll's:
 *   z₀ = 0,  z_{i+1} = f(z_i; u) for i < L;  ḡ_i = ḡ_{i+1} ∂f/∂z(z_i).
 *
 * Two device tape slots, layer i in slot i mod 2 (double buffering):
 *   forward  — layer i writes slot s = i mod 2 once the copy of tape i − 2
 *              out of it has finished (copy_wait s), then tape i is copied
 *              to host tape i (copy_async, event s) while layer i + 1 runs
 *              in the other slot. Tapes L − 2 and L − 1 stay in their
 *              slots: the backward starts with them.
 *   backward — VJP i reads slot i mod 2 (for i ≤ L − 3 after waiting for
 *              its prefetch, event i mod 2); once it is issued, host tape
 *              i − 2 is copied into the same slot (event i mod 2) while
 *              VJP i − 1 runs in the other.
 * Device depth memory (elements): min(L, 2) · tape + 2 · n_state; host
 * memory (MEM_HOST): max(L − 2, 0) · tape. Copies per training step:
 * 2 · max(L − 2, 0) tapes. Evaluations: L forward, L VJPs (as unroll).
 * Inference only: 2 · n_state on the device, nothing on the host.
 *
 * On the CPU the copies are memcpy in line: an accounting model of where
 * the bytes would live and how many move, not a claim about speed.
 */
#include "method_impl.h"

static void offload_layout(const struct model *m, const struct method_config *c,
			   struct method_layout *l)
{
	(void)m;
	int L = c->layers;
	l->n_tapes = c->inference ? 0 : (L < 2 ? L : 2);
	l->n_host_tapes = c->inference || L < 2 ? 0 : L - 2;
	l->n_vecs = 2;
}

static size_t tape_bytes(const struct method *me)
{
	return me->tape_bytes;
}

static void offload_forward(struct method *me, const void *u, void *z,
			    int train)
{
	const struct backend *be = me->m->be;
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	const int L = me->cfg.layers;

	be_fill(be, a, 0.0, me->m->n_state);
	if (!train) {
		method_run_plain(me, u, a, z, L, a, b);
		return;
	}
	const void *in = a;
	for (int i = 0; i < L; i++) {
		void *out = i == L - 1 ? z : (in == a ? b : a);
		int s = i % 2;
		if (i >= 2)
			be_copy_wait(be, s);
		method_f(me, out, in, u, method_tape(me, s));
		if (i < L - 2) {
			be_copy_async(be, method_host_tape(me, i),
				      method_tape(me, s), tape_bytes(me), s);
			me->st.offload_bytes += (long)tape_bytes(me);
		}
		in = out;
	}
}

static void offload_backward(struct method *me, const void *gz, void *gu)
{
	const struct backend *be = me->m->be;
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	const void *g = gz;
	const int L = me->cfg.layers;

	for (int i = L - 1; i >= 0; i--) {
		void *out = g == a ? b : a;
		int s = i % 2;
		if (i <= L - 3)
			be_copy_wait(be, s);
		method_vjp(me, out, gu, g, method_tape(me, s), 1);
		if (i >= 2) {
			be_copy_async(be, method_tape(me, s),
				      method_host_tape(me, i - 2),
				      tape_bytes(me), s);
			me->st.offload_bytes += (long)tape_bytes(me);
		}
		g = out;
	}
}

static const struct method_ops method_offload_ops = {
    .layout = offload_layout,
    .forward = offload_forward,
    .backward = offload_backward,
};

const struct method_desc method_offload = {
    .name = "offload",
    .ops = &method_offload_ops,
    .uses_layers = 1,
    .evals = method_evals_layers,
};
