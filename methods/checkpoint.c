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
 * segment), L VJPs. Inference only (method_config.inference): 4 · n_state
 * (the layout's vectors), no tapes or checkpoints.
 *
 * selective=true (transformer only): each segment's k tapes are selective
 * tapes (selective.c: no attention probabilities (B,H,T,T) and no
 * attention output (N,d)), and one recompute scratch of e · (B H T² + N d)
 * bytes serves every VJP, which first recomputes those two from the tape's
 * q, k and v (work unit attn_recompute, L a step). The block arithmetic and
 * its order are checkpoint's, so its gradients are bitwise checkpoint's
 * (and unroll's) on the CPU (tests/test_selective.c).
 */
#include <math.h>
#include <stdio.h>

#include "checkpoint.h"
#include "method_impl.h"

extern const struct method_desc method_checkpoint;

/* k of the resolved options of a method_config. */
static int k_of(const struct method_config *c)
{
	return checkpoint_config(c)->k;
}

static int n_segments(const struct method_config *c)
{
	return (c->layers + k_of(c) - 1) / k_of(c);
}

/* Layers in segment s: k, except the last. */
static int seg_len(const struct method_config *c, int s)
{
	int lo = s * k_of(c), hi = lo + k_of(c);
	return (hi < c->layers ? hi : c->layers) - lo;
}

static void ckpt_layout(const struct model *m, const struct method_config *c,
			struct method_layout *l)
{
	(void)m;
	/* inference runs all L layers plainly through vectors 0 and 1 */
	l->n_tapes = c->inference ? 0 : k_of(c);
	l->n_ckpts = c->inference ? 0 : n_segments(c) - 1;
	l->n_vecs = 4;
	l->selective = !c->inference && checkpoint_config(c)->selective;
}

/* State entering segment s (s ≥ 1: checkpoint s−1; s = 0: zeros in a). */
static const void *seg_input(struct method *me, int s, void *a)
{
	if (s > 0)
		return method_ckpt(me, s - 1);
	be_fill(me->m->be, a, 0.0, me->m->n_state);
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
		if (s < n_segments(&me->cfg) - 1) {
			me->recompute = 1;
			seg_taped(me, s, me->u, NULL);
			me->recompute = 0;
		}
		g = method_vjp_taped(me, g, gu, seg_len(&me->cfg, s), ga, gb);
	}
}

static const struct method_ops method_checkpoint_ops = {
    .layout = ckpt_layout,
    .forward = ckpt_forward,
    .backward = ckpt_backward,
};

/* ---------------------------------------------------------- options */

static const struct key_desc checkpoint_keys[] = {
    KEY_INT(struct checkpoint_config, "k", "method", k, 0, 100000,
	    "checkpoint interval; 0 = round(sqrt(layers))", KEY_METHOD),
    KEY_BOOL(struct checkpoint_config, "selective", "method", selective,
	     "true: each segment keeps selective tapes (no attention "
	     "probabilities; its VJPs recompute them; transformer only)",
	     KEY_METHOD),
};

static void checkpoint_defaults(void *opts)
{
	((struct checkpoint_config *)opts)->k = 0;
	((struct checkpoint_config *)opts)->selective = 0;
}

static int checkpoint_check(const struct method_config *c, const void *opts,
			    char *err, size_t errlen)
{
	const struct checkpoint_config *o = opts;
	if (o->k > c->layers) {
		snprintf(err, errlen,
			 "k=%d is larger than layers=%d; use 1 <= k <= layers "
			 "(0 = round(sqrt(layers)))",
			 o->k, c->layers);
		return -1;
	}
	return 0;
}

/* k = 0 → round(√L): the interval that minimises checkpoints + one
 * segment's tapes, (L/k + k) · n (Chen et al. 2016). */
static void checkpoint_resolve(const struct method_config *c, void *opts)
{
	struct checkpoint_config *o = opts;
	if (o->k == 0) {
		o->k = (int)lround(sqrt((double)c->layers));
		if (o->k < 1)
			o->k = 1;
	}
}

struct checkpoint_config *checkpoint_config(const struct method_config *c)
{
	return (struct checkpoint_config *)&c->opts.checkpoint;
}

int checkpoint_kind(void)
{
	return method_kind_parse(method_checkpoint.name);
}

/* Whether c's segments keep selective tapes (method_desc.selective). */
static int checkpoint_selective(const struct method_config *c)
{
	return checkpoint_config(c)->selective;
}

/* L + (L − len(last segment)) forwards, L VJPs (the header). */
static void checkpoint_evals(const struct method_config *c, long *fwd,
			     long *vjp)
{
	int last = c->layers - (n_segments(c) - 1) * k_of(c);
	*fwd = 2L * c->layers - last;
	*vjp = c->layers;
}

static void checkpoint_label(const struct method_config *c, char *buf, size_t n)
{
	snprintf(buf, n, "L=%d k=%d%s", c->layers, k_of(c),
		 checkpoint_config(c)->selective ? " selective" : "");
}

/* plan tries every interval k = 1..L, with the base's selective (plan
 * method=checkpoint selective=true: selective segments). */
static int checkpoint_candidate(const struct method_config *c, int i,
				struct method_candidate *out)
{
	char label[64], v[24];
	const char *key = "k", *val = v;
	if (i >= c->layers)
		return 0;
	snprintf(v, sizeof(v), "%d", i + 1);
	snprintf(label, sizeof(label), "checkpoint k=%d%s", i + 1,
		 checkpoint_config(c)->selective ? " selective" : "");
	method_candidate_set(out, label, 1, &key, &val);
	return 1;
}

const struct method_desc method_checkpoint = {
    .name = "checkpoint",
    .ops = &method_checkpoint_ops,
    .opts_offset = offsetof(struct method_opts, checkpoint),
    .keys = checkpoint_keys,
    .n_keys = 2,
    .defaults = checkpoint_defaults,
    .check = checkpoint_check,
    .resolve = checkpoint_resolve,
    .uses_layers = 1,
    .graphable = 1,
    .selective = checkpoint_selective,
    .evals = checkpoint_evals,
    .label = checkpoint_label,
    .candidate = checkpoint_candidate,
};
