/* transformer.c — the post-LN DEQ-Transformer block (Bai, Kolter, Koltun
 * 2019, with learned absolute positions), ../shared/DESIGN.md §Model:
 *
 *   qkv = z Wqkvᵀ + bqkv + u                 (N,3d)  q | k | v, heads contiguous
 *   a   = causal MHA(qkv)                     (N,d)   att (B,H,T,T)
 *   r1  = z + a Woᵀ + bo ;   h = LN1(r1)      (N,d)
 *   p   = relu(h W1ᵀ + b1)                    (N,F)
 *   r2  = h + p W2ᵀ + b2 ;   f = LN2(r2)      (N,d)
 *
 * Letters: B batch, T sequence, N = B*T, d width, H heads, F feed-forward
 * width. Weights are PyTorch nn.Linear layouts ([out, in]).
 *
 * Tape layout (elements of the backend type, in this order):
 *   z    (N,d)      z_in, for dWqkv
 *   qkv  (N,3d)     attention input, for the attention backward
 *   att  (B,H,T,T)  softmax probabilities
 *   a    (N,d)      attention output, for dWo
 *   r1   (N,d)      LN1 input;   mu1, rs1 (N) its mean and 1/std
 *   h    (N,d)      LN1 output, for dW1
 *   p    (N,F)      relu output (relu' is read from it), for dW2
 *   r2   (N,d)      LN2 input;   mu2, rs2 (N)
 * size = N (8d + F + 4) + B H T².
 * The pre-relu activations and f itself are not kept: relu' comes from p,
 * and nothing in the vjp reads f.
 *
 * Workspace: max(tape, vjp scratch). A forward without tape writes a tape
 * into the workspace (z is read in place, not copied); the vjp's scratch is
 *   g1, g2 (N,d), gw (N * max(F, 3d)) for dp then dqkv, gs (B,H,T,T) for
 *   the attention backward, dummy LN parameter grads (2d)
 * = N (2d + max(F,3d)) + B H T² + 2d. They never live at the same time
 * (the vjp reads a method-owned tape), so they share one buffer.
 */
#include <stddef.h>

#include "model_impl.h"

struct tape {
	void *z, *qkv, *att, *a, *r1, *mu1, *rs1, *h, *p, *r2, *mu2, *rs2;
};

static size_t att_elems(const struct model *m)
{
	return (size_t)m->B * m->cfg.n_heads * m->T * m->T;
}

/* Carves the tape layout documented above out of base; returns its size. */
static size_t tape_layout(const struct model *m, void *base, struct tape *t)
{
	size_t N = (size_t)m->B * m->T, d = m->d, F = m->cfg.d_ff;
	size_t off = 0;
	char *b = base;
	const size_t e = m->be->elem;
#define CARVE(field, n)                                                        \
	do {                                                                   \
		t->field = b ? b + off * e : NULL;                             \
		off += (n);                                                    \
	} while (0)
	CARVE(z, N * d);
	CARVE(qkv, 3 * N * d);
	CARVE(att, att_elems(m));
	CARVE(a, N * d);
	CARVE(r1, N * d);
	CARVE(mu1, N);
	CARVE(rs1, N);
	CARVE(h, N * d);
	CARVE(p, N * F);
	CARVE(r2, N * d);
	CARVE(mu2, N);
	CARVE(rs2, N);
#undef CARVE
	return off;
}

static size_t tf_tape_elems(const struct model *m)
{
	struct tape t;
	return tape_layout(m, NULL, &t);
}

static size_t vjp_scratch_elems(const struct model *m)
{
	size_t N = (size_t)m->B * m->T, d = m->d, F = m->cfg.d_ff;
	size_t w = F > 3 * d ? F : 3 * d;
	return N * (2 * d + w) + att_elems(m) + 2 * d;
}

static size_t tf_workspace_elems(const struct model *m)
{
	size_t a = tf_tape_elems(m), b = vjp_scratch_elems(m);
	return a > b ? a : b;
}

static void tf_forward(struct model *m, void *z_out, const void *z_in,
		       const void *u, void *tape)
{
	struct backend *be = m->be;
	void *P = m->param_buf;
	int B = m->B, T = m->T, N = B * T, d = m->d, H = m->cfg.n_heads;
	int F = m->cfg.d_ff;
	struct tape t;
	tape_layout(m, tape ? tape : model_ws(m), &t);
	const void *z = z_in;
	if (tape)
		be_copy(be, t.z, z_in, m->n_state);

	/* qkv = u + z Wqkvᵀ + bqkv */
	be_copy(be, t.qkv, u, m->n_u);
	be_gemm(be, 0, 1, N, 3 * d, d, 1.0, z, d, model_p(m, P, TP_QKV_W), d,
		1.0, t.qkv, 3 * d);
	be_bias_forward(be, t.qkv, model_p(m, P, TP_QKV_B), N, 3 * d);
	be_attention_forward(be, t.a, t.att, t.qkv, B, T, d, H);
	/* r1 = z + a Woᵀ + bo; h = LN1(r1) */
	be_copy(be, t.r1, z, m->n_state);
	be_gemm(be, 0, 1, N, d, d, 1.0, t.a, d, model_p(m, P, TP_OUT_W), d, 1.0,
		t.r1, d);
	be_bias_forward(be, t.r1, model_p(m, P, TP_OUT_B), N, d);
	be_layernorm_forward(be, t.h, t.mu1, t.rs1, t.r1,
			     model_p(m, P, TP_LN1_W), model_p(m, P, TP_LN1_B),
			     N, d);
	/* p = relu(h W1ᵀ + b1), in place */
	be_gemm(be, 0, 1, N, F, d, 1.0, t.h, d, model_p(m, P, TP_FF1_W), d, 0.0,
		t.p, F);
	be_bias_forward(be, t.p, model_p(m, P, TP_FF1_B), N, F);
	be_act_forward(be, ACT_RELU, t.p, t.p, (size_t)N * F);
	/* r2 = h + p W2ᵀ + b2; f = LN2(r2) */
	be_copy(be, t.r2, t.h, m->n_state);
	be_gemm(be, 0, 1, N, d, F, 1.0, t.p, F, model_p(m, P, TP_FF2_W), F, 1.0,
		t.r2, d);
	be_bias_forward(be, t.r2, model_p(m, P, TP_FF2_B), N, d);
	be_layernorm_forward(be, z_out, t.mu2, t.rs2, t.r2,
			     model_p(m, P, TP_LN2_W), model_p(m, P, TP_LN2_B),
			     N, d);
}

/* Reverse of tf_forward. Weight gradients are dW += dyᵀ x (gemm, beta 1);
 * input gradients dx = dy W. With param_grads == 0 the LayerNorm weight
 * gradients (which the op always accumulates) go to a dummy and every
 * other parameter-gradient call is skipped: ~1/2 of the vjp's GEMM FLOPs. */
static void tf_vjp(struct model *m, void *gz_in, void *gu, const void *gz_out,
		   const void *tape_, int pg)
{
	struct backend *be = m->be;
	void *P = m->param_buf, *G = m->grad_buf;
	int B = m->B, T = m->T, N = B * T, d = m->d, H = m->cfg.n_heads;
	int F = m->cfg.d_ff;
	size_t w = (size_t)(F > 3 * d ? F : 3 * d);
	struct tape t;
	tape_layout(m, (void *)tape_, &t);

	char *ws = model_ws(m);
	const size_t e = m->be->elem, nd = m->n_state;
	void *g1 = ws, *g2 = ws + nd * e, *gw = ws + 2 * nd * e;
	void *gs = ws + (2 * nd + (size_t)N * w) * e;
	void *dum_w = ws + (2 * nd + (size_t)N * w + att_elems(m)) * e;
	void *dum_b = (char *)dum_w + (size_t)d * e;

	/* g1 = dr2 from LN2 */
	be_layernorm_backward(be, g1, pg ? model_p(m, G, TP_LN2_W) : dum_w,
			      pg ? model_p(m, G, TP_LN2_B) : dum_b, gz_out,
			      t.r2, t.mu2, t.rs2, model_p(m, P, TP_LN2_W), N,
			      d);
	/* g2 = dh = dr2 (residual) + dp W1 below; gw = dp = dr2 W2 */
	be_copy(be, g2, g1, nd);
	be_gemm(be, 0, 0, N, F, d, 1.0, g1, d, model_p(m, P, TP_FF2_W), F, 0.0,
		gw, F);
	if (pg) {
		be_gemm(be, 1, 0, d, F, N, 1.0, g1, d, t.p, F, 1.0,
			model_p(m, G, TP_FF2_W), F);
		be_bias_backward(be, model_p(m, G, TP_FF2_B), g1, N, d);
	}
	be_act_backward(be, ACT_RELU, gw, gw, NULL, t.p, (size_t)N * F);
	if (pg) {
		be_gemm(be, 1, 0, F, d, N, 1.0, gw, F, t.h, d, 1.0,
			model_p(m, G, TP_FF1_W), d);
		be_bias_backward(be, model_p(m, G, TP_FF1_B), gw, N, F);
	}
	be_gemm(be, 0, 0, N, d, F, 1.0, gw, F, model_p(m, P, TP_FF1_W), d, 1.0,
		g2, d);
	/* g1 = dr1 from LN1 */
	be_layernorm_backward(be, g1, pg ? model_p(m, G, TP_LN1_W) : dum_w,
			      pg ? model_p(m, G, TP_LN1_B) : dum_b, g2, t.r1,
			      t.mu1, t.rs1, model_p(m, P, TP_LN1_W), N, d);
	/* gz_in = dr1 (residual) + dqkv Wqkv below; g2 = da = dr1 Wo */
	be_copy(be, gz_in, g1, nd);
	be_gemm(be, 0, 0, N, d, d, 1.0, g1, d, model_p(m, P, TP_OUT_W), d, 0.0,
		g2, d);
	if (pg) {
		be_gemm(be, 1, 0, d, d, N, 1.0, g1, d, t.a, d, 1.0,
			model_p(m, G, TP_OUT_W), d);
		be_bias_backward(be, model_p(m, G, TP_OUT_B), g1, N, d);
	}
	/* gw = dqkv (N,3d) */
	be_attention_backward(be, gw, gs, g2, t.qkv, t.att, B, T, d, H);
	be_gemm(be, 0, 0, N, d, 3 * d, 1.0, gw, 3 * d, model_p(m, P, TP_QKV_W),
		d, 1.0, gz_in, d);
	if (pg) {
		be_gemm(be, 1, 0, 3 * d, d, N, 1.0, gw, 3 * d, t.z, d, 1.0,
			model_p(m, G, TP_QKV_W), d);
		be_bias_backward(be, model_p(m, G, TP_QKV_B), gw, N, 3 * d);
	}
	/* u enters qkv additively: du = dqkv */
	if (gu)
		be_axpy(be, gu, 1.0, gw, m->n_u);
}

/* 2 per multiply-add: the four GEMMs 2N(3d² + d² + 2dF), plus q kᵀ and
 * att v over the full T×T score matrix, 4 B T² d (the causal mask halves
 * the useful work; counted in full like the usual MFU convention). Bias,
 * LayerNorm, softmax and relu are not counted. */
static double tf_flops(const struct model *m)
{
	double N = (double)m->B * m->T, d = m->d, F = m->cfg.d_ff;
	return 2.0 * N * (4.0 * d * d + 2.0 * d * F) +
	       4.0 * (double)m->B * m->T * (double)m->T * d;
}

const struct model_ops model_transformer_ops = {
    .tape_elems = tf_tape_elems,
    .workspace_elems = tf_workspace_elems,
    .forward = tf_forward,
    .vjp = tf_vjp,
    .flops = tf_flops,
};
