/* managed.c — unrolled backpropagation with every tape in unified memory
 * (docs/ARCHITECTURE.md §Managed): the alternative to explicit offload
 * that reviewers of rematerialisation work ask for (cudaMallocManaged
 * with the driver paging activations between device and host, as in
 * the "unified memory" baselines of Rhu et al. 2016 and of Checkmate,
 * Jain et al. 2020). Same arithmetic as unroll, in the same order, so
 * its gradients are bitwise unroll's:
 *   z₀ = 0,  z_{i+1} = f(z_i; u) for i < L;  ḡ_i = ḡ_{i+1} ∂f/∂z(z_i).
 *
 * The L tapes are one MEM_MANAGED allocation, written and read by the
 * kernels in place. Where their pages are is the driver's business: a
 * page is created on the device by the forward's first write and stays
 * there until the device is full, when the driver evicts the least
 * recently used pages to the host (oversubscription; device_mem_cap_mib
 * makes a large card small enough to see it). With managed_prefetch =
 * true the backward asks for tape i − 1 to come to the device (prefetch
 * on the copy stream, event (i − 1) mod 2) while VJP i runs and waits
 * for it before VJP i − 1; with false every page the backward needs on
 * the host comes back by fault, which is the driver left alone.
 *
 * Device depth memory (elements): 2 · n_state (MEM_DEPTH); managed
 * memory (MEM_MANAGED, outside the device totals because its residency
 * is the driver's): L · tape. Prefetches per training step: L − 1 tapes
 * with managed_prefetch, none without. Evaluations: L forward, L VJPs.
 * Inference only: 2 · n_state on the device, nothing managed.
 *
 * Needs a backend with managed memory (cuda): config_validate refuses it
 * elsewhere, and method_create fails there with a message.
 */
#include "method_impl.h"

#include <stddef.h>

static const struct key_desc managed_keys[] = {
    KEY_BOOL(struct managed_config, "managed_prefetch", "method", prefetch,
	     "method=managed: prefetch tape i-1 to the device while VJP i "
	     "runs (false: the pages the backward needs come back by fault)",
	     KEY_METHOD),
};

struct managed_config *managed_config(const struct method_config *c)
{
	return (struct managed_config *)&c->opts.managed;
}

static void managed_defaults(void *opts)
{
	((struct managed_config *)opts)->prefetch = 1;
}

static void managed_layout(const struct model *m, const struct method_config *c,
			   struct method_layout *l)
{
	(void)m;
	l->n_host_tapes = c->inference ? 0 : c->layers;
	l->host_managed = 1;
	l->n_vecs = 2;
}

static void managed_forward(struct method *me, const void *u, void *z,
			    int train)
{
	method_unroll_forward(me, u, z, train, me->host_tapes);
}

static void managed_backward(struct method *me, const void *gz, void *gu)
{
	const struct backend *be = me->m->be;
	const struct managed_config *mc = managed_config(&me->cfg);
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	const void *g = gz;
	const int L = me->cfg.layers;

	for (int i = L - 1; i >= 0; i--) {
		void *out = g == a ? b : a;
		if (mc->prefetch && i < L - 1)
			be_copy_wait(be, i % 2); /* tape i is on the device */
		if (mc->prefetch && i >= 1) {
			be_prefetch(be, method_host_tape(me, i - 1),
				    me->tape_bytes, 1, (i - 1) % 2);
			me->st.offload_bytes += (long)me->tape_bytes;
		}
		method_vjp(me, out, gu, g, method_host_tape(me, i), 1);
		g = out;
	}
}

static const struct method_ops method_managed_ops = {
    .layout = managed_layout,
    .forward = managed_forward,
    .backward = managed_backward,
};

const struct method_desc method_managed = {
    .name = "managed",
    .ops = &method_managed_ops,
    .opts_offset = offsetof(struct method_opts, managed),
    .keys = managed_keys,
    .n_keys = sizeof(managed_keys) / sizeof(managed_keys[0]),
    .defaults = managed_defaults,
    .uses_layers = 1,
    .needs_managed = 1,
    .evals = method_evals_layers,
};
