/* revolve.c — binomial checkpointing (Griewank 1992, "Achieving logarithmic
 * growth of temporal and spatial complexity in reverse automatic
 * differentiation"; Griewank & Walther, ACM TOMS 26(1) 2000, "Algorithm 799:
 * revolve") on the same L layers as unroll.c (docs/ARCHITECTURE.md
 * §Methods): z₀ = 0, z_{i+1} = f(z_i; u), z = z_L, with one tape and s
 * checkpoint slots.
 *
 * The schedule (revolve_schedule.c, its derivation there) needs the fewest
 * block applications any schedule with one tape and s stored states can
 * make: the forward pass advances untaped from z₀ to z_{L−1}, storing the
 * states where the schedule says, and applies layer L−1 with the tape; the
 * backward pass takes the VJPs of layers L−1 … 0, each layer i (but L−1)
 * applied with the tape from z_i right before its VJP, z_i recomputed from
 * the nearest stored state (or z₀ = 0, refilled, never stored) by untaped
 * advances, storing more states in the slots freed on the way.
 *
 * The block calls are on the same values as unroll's, and the VJPs in the
 * same order (L−1 … 0) from the same cotangents, so on the CPU its
 * gradients are bitwise unroll's.
 *
 * Evaluations per training step (method_stats): forward_evals = L + A(L, s)
 * — L taped applications (one per layer) and A(L, s) untaped advances,
 *   A(L, s) = r·L − C(s + 1 + r, r − 1),  r smallest with C(s+1+r, r) ≥ L
 * (revolve_schedule.h; L − 1 when s ≥ L − 2, ~(2/3)·L·√(2L) for s = 1);
 * vjp_evals = L. The forward pass alone makes L of them.
 *
 * Depth memory (elements), with s' = min(s, max(L − 2, 0)) the slots the
 * schedule uses (L − 2 already reach A = L − 1; more are not allocated):
 *   s' · n_state   checkpoints
 * + 1 · tape       the one tape
 * + 4 · n_state    z ping-pong for advances (z₀ is filled into one of them),
 *                  ḡ ping-pong for the VJPs (the caller's ∂L/∂z is read only)
 * so s'·n + tape + 4n; with s = round(log2 L) it grows like log L.
 * Inference only (method_config.inference): 2 · n_state (z ping-pong), L
 * untaped applications.
 */
#include <math.h>
#include <stdio.h>

#include "method_impl.h"
#include "revolve.h"
#include "revolve_schedule.h"

extern const struct method_desc method_revolve;

/* The slots the schedule of c uses (resolved config). */
static int slots_used(const struct method_config *c)
{
	return revolve_slots_used(c->layers, revolve_config(c)->slots);
}

static void revolve_layout(const struct model *m, const struct method_config *c,
			   struct method_layout *l)
{
	(void)m;
	l->n_tapes = c->inference ? 0 : 1;
	l->n_ckpts = c->inference ? 0 : slots_used(c);
	l->n_vecs = c->inference ? 2 : 4;
}

/* The schedule's context: where its operations read and write. */
struct revolve_run {
	struct method *me;
	void *z;	 /* forward: the caller's output; backward: NULL */
	const void *cur; /* REVOLVE_WORK: the last advance's output */
	const void *g;	 /* backward: the cotangent of the current layer */
	void *gu;
};

/* The state at `at` (zeros filled into work vector 0 for z₀). */
static const void *state_at(struct revolve_run *r, int at)
{
	struct method *me = r->me;
	if (at == REVOLVE_WORK)
		return r->cur;
	if (at >= 0)
		return method_ckpt(me, at);
	be_fill(me->m->be, method_vec(me, 0), 0.0, me->m->n_state);
	return method_vec(me, 0);
}

static void op_advance(void *ctx, int from, int to, int layer, int n)
{
	struct revolve_run *r = ctx;
	struct method *me = r->me;
	void *dst = to >= 0 ? method_ckpt(me, to) : NULL;
	(void)layer;
	r->cur = method_run_plain(me, me->u, state_at(r, from), dst, n,
				  method_vec(me, 0), method_vec(me, 1));
}

static void op_taped(void *ctx, int from, int layer)
{
	struct revolve_run *r = ctx;
	struct method *me = r->me;
	const void *in = state_at(r, from);
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	(void)layer;
	method_f(me, r->z ? r->z : (in == a ? b : a), in, me->u,
		 method_tape(me, 0));
}

static void op_vjp(void *ctx, int layer)
{
	struct revolve_run *r = ctx;
	(void)layer;
	r->g = method_vjp_taped(r->me, r->g, r->gu, 1, method_vec(r->me, 2),
				method_vec(r->me, 3));
}

static const struct revolve_ops block_ops = {op_advance, op_taped, op_vjp};

static void revolve_forward(struct method *me, const void *u, void *z,
			    int train)
{
	void *a = method_vec(me, 0), *b = method_vec(me, 1);
	struct revolve_run r = {me, z, NULL, NULL, NULL};
	struct revolve_plan p = {me->cfg.layers, slots_used(&me->cfg),
				 &block_ops, &r};
	if (!train) {
		be_fill(me->m->be, a, 0.0, me->m->n_state);
		method_run_plain(me, u, a, z, me->cfg.layers, a, b);
		return;
	}
	revolve_schedule_forward(&p);
}

static void revolve_backward(struct method *me, const void *gz, void *gu)
{
	struct revolve_run r = {me, NULL, NULL, gz, gu};
	struct revolve_plan p = {me->cfg.layers, slots_used(&me->cfg),
				 &block_ops, &r};
	/* the taped applications here recompute layers the forward ran
	 * untaped (block_fwd_recompute); the advances stay block_fwd */
	me->recompute = 1;
	revolve_schedule_backward(&p);
	me->recompute = 0;
}

static const struct method_ops method_revolve_ops = {
    .layout = revolve_layout,
    .forward = revolve_forward,
    .backward = revolve_backward,
};

/* ---------------------------------------------------------- options */

static const struct key_desc revolve_keys[] = {
    KEY_INT(struct revolve_config, "slots", "method", slots, 0, 10000,
	    "revolve's checkpoint slots (stored states); 0 = "
	    "max(1, round(log2(layers)))",
	    KEY_METHOD),
};

static void revolve_defaults(void *opts)
{
	((struct revolve_config *)opts)->slots = 0;
}

/* slots = 0 → max(1, round(log2 L)): memory and the repetition number r
 * (how often a layer is advanced at most) then both grow like log L, the
 * regime of Griewank's logarithmic result (L = 12: 4 slots, r = 2). */
static void revolve_resolve(const struct method_config *c, void *opts)
{
	struct revolve_config *o = opts;
	if (o->slots == 0) {
		o->slots = (int)lround(log2((double)c->layers));
		if (o->slots < 1)
			o->slots = 1;
	}
}

struct revolve_config *revolve_config(const struct method_config *c)
{
	return (struct revolve_config *)&c->opts.revolve;
}

int revolve_kind(void)
{
	return method_kind_parse(method_revolve.name);
}

/* L + A(L, s) forwards, L VJPs (the header). */
static void revolve_evals(const struct method_config *c, long *fwd, long *vjp)
{
	*fwd = c->layers +
	       (long)revolve_advances(c->layers, revolve_config(c)->slots);
	*vjp = c->layers;
}

static void revolve_label(const struct method_config *c, char *buf, size_t n)
{
	snprintf(buf, n, "L=%d slots=%d", c->layers, revolve_config(c)->slots);
}

/* plan tries slots = 1..L-2. */
static int revolve_candidate(const struct method_config *c, int i,
			     struct method_candidate *out)
{
	char label[64], v[24];
	const char *key = "slots", *val = v;
	if (i >= c->layers - 2)
		return 0;
	snprintf(v, sizeof(v), "%d", i + 1);
	snprintf(label, sizeof(label), "revolve slots=%d", i + 1);
	method_candidate_set(out, label, 1, &key, &val);
	return 1;
}

const struct method_desc method_revolve = {
    .name = "revolve",
    .ops = &method_revolve_ops,
    .opts_offset = offsetof(struct method_opts, revolve),
    .keys = revolve_keys,
    .n_keys = 1,
    .defaults = revolve_defaults,
    .resolve = revolve_resolve,
    .uses_layers = 1,
    .graphable = 1,
    .evals = revolve_evals,
    .label = revolve_label,
    .candidate = revolve_candidate,
};
