/* transformer.c — the post-LN DEQ-Transformer block (Bai, Kolter, Koltun
 * 2019, with learned absolute positions), docs/ARCHITECTURE.md §Model:
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
 *   att  (B,H,T,T)  softmax probabilities; attention=flash: (B,H,T,2)
 *                   each row's log-sum-exp as (hi, lo), the fused
 *                   kernel's backward recomputes the probabilities
 *   a    (N,d)      attention output, for dWo
 *   r1   (N,d)      LN1 input;   mu1, rs1 (N) its mean and 1/std
 *   h    (N,d)      LN1 output, for dW1
 *   p    (N,F)      relu output (relu' is read from it), for dW2
 *   r2   (N,d)      LN2 input;   mu2, rs2 (N)
 * size = N (8d + F + 4) + B H T² (flash: + 2 B H T).
 * The pre-relu activations and f itself are not kept: relu' comes from p,
 * and nothing in the vjp reads f.
 *
 * Selective tape (method=selective; Korthikanti et al. 2022, "Reducing
 * Activation Recomputation in Large Transformer Models", §4.2 "selective
 * activation recomputation"): the layout above without att (B,H,T,T) and
 * a (N,d), size N (7d + F + 4). The selective vjp first recomputes both
 * from the tape's qkv with the same attention forward (q kᵀ, the causal
 * softmax, att v) into a scratch of B H T² + N d elements the caller
 * owns, then runs the full vjp on them. Why these two: att is the B H T²
 * term that grows with T²; a comes out of that recomputation anyway (the
 * backend's one attention op forms att v), so keeping it would spend N d
 * per layer on values the vjp recomputes bitwise. No per-row softmax
 * statistics are kept: the recomputation repeats the forward's max and
 * sum exactly, so its att is bitwise the forward's (the statistics would
 * save an O(B H T²) pass beside the O(B H T² dh) GEMMs). Everything else
 * costs a GEMM to recompute (qkv, r1, h, p, r2) or is per-row (mu, rs).
 * Under precision=bf16 the recomputed att and a are rounded to bf16 as
 * the full tape stores them (the bf16 attention's P is rounded already,
 * flash's log-sum-exp remainder is not), so the vjp reads the same
 * values.
 *
 * Workspace: max(tape, vjp scratch). A forward without tape writes a tape
 * into the workspace (z is read in place, not copied); the vjp's scratch is
 *   g1, g2 (N,d), gw (N * max(F, 3d)) for dp then dqkv, gs (B,H,T,T) for
 *   the attention backward, dummy LN parameter grads (2d)
 * = N (2d + max(F,3d)) + B H T² + 2d. They never live at the same time
 * (the vjp reads a method-owned tape), so they share one buffer. A
 * selective forward with a tape writes att and a into the workspace at
 * their places in the full layout.
 */
#include <stddef.h>
#include <stdio.h>

#include "model_impl.h"

/* Block parameters, in table order from P_BLOCK0 */
enum {
	TP_QKV_W = P_BLOCK0, /* block.attn.qkv.weight [3d,d] */
	TP_QKV_B,	     /* block.attn.qkv.bias [3d] */
	TP_OUT_W,	     /* block.attn.out.weight [d,d] */
	TP_OUT_B,	     /* block.attn.out.bias [d] */
	TP_LN1_W,	     /* block.ln1.weight [d] */
	TP_LN1_B,	     /* block.ln1.bias [d] */
	TP_FF1_W,	     /* block.ff1.weight [F,d] */
	TP_FF1_B,	     /* block.ff1.bias [F] */
	TP_FF2_W,	     /* block.ff2.weight [d,F] */
	TP_FF2_B,	     /* block.ff2.bias [d] */
	TP_LN2_W,	     /* block.ln2.weight [d] */
	TP_LN2_B,	     /* block.ln2.bias [d] */
};

static int tf_block_specs(const struct model_config *c, struct param_spec *s)
{
	int64_t d = c->d_model, F = c->d_ff;
	int n = 0;
	s[n++] = SPEC("block.attn.qkv.weight", 3 * d, d, 0, R_BLOCK_W, d);
	s[n++] = SPEC("block.attn.qkv.bias", 3 * d, 0, 0, R_BLOCK_B, d);
	s[n++] = SPEC("block.attn.out.weight", d, d, 0, R_BLOCK_W, d);
	s[n++] = SPEC("block.attn.out.bias", d, 0, 0, R_BLOCK_B, d);
	s[n++] = SPEC("block.ln1.weight", d, 0, 0, R_LN_W, 0);
	s[n++] = SPEC("block.ln1.bias", d, 0, 0, R_LN_B, 0);
	s[n++] = SPEC("block.ff1.weight", F, d, 0, R_BLOCK_W, d);
	s[n++] = SPEC("block.ff1.bias", F, 0, 0, R_BLOCK_B, d);
	s[n++] = SPEC("block.ff2.weight", d, F, 0, R_BLOCK_W, F);
	s[n++] = SPEC("block.ff2.bias", d, 0, 0, R_BLOCK_B, F);
	s[n++] = SPEC("block.ln2.weight", d, 0, 0, R_LN_W, 0);
	s[n++] = SPEC("block.ln2.bias", d, 0, 0, R_LN_B, 0);
	return n;
}

/* n_heads and d_ff positive, heads of d / H columns. */
static int tf_check(const struct model_config *c, char *err, size_t errlen)
{
	if (c->n_heads <= 0)
		return model_err(err, errlen, "n_heads=%d must be positive",
				 c->n_heads);
	if (c->d_ff <= 0)
		return model_err(err, errlen, "d_ff=%d must be positive",
				 c->d_ff);
	if (c->d_model % c->n_heads != 0)
		return model_err(err, errlen,
				 "d_model=%d is not divisible by n_heads=%d",
				 c->d_model, c->n_heads);
	if (c->attention == MODEL_ATT_FLASH &&
	    c->d_model / c->n_heads > DQ_FLASH_MAX_DH)
		return model_err(err, errlen,
				 "attention=flash takes heads of at most %d "
				 "columns, d_model/n_heads = %d; raise n_heads "
				 "or use attention=unfused",
				 DQ_FLASH_MAX_DH, c->d_model / c->n_heads);
	return 0;
}

/* Rows of 3d (qkv) or F, and the H T attention scores per position. */
static struct model_extent tf_extent(const struct model_config *c)
{
	long long qkv = 3LL * c->d_model;
	return (struct model_extent){qkv > c->d_ff ? qkv : c->d_ff,
				     (long long)c->n_heads * c->seq_len};
}

struct tape {
	void *z, *qkv, *att, *a, *r1, *mu1, *rs1, *h, *p, *r2, *mu2, *rs2;
};

/* The tape's att: the probabilities (B,H,T,T), or under attention=flash
 * each row's log-sum-exp as (hi, lo) (B,H,T,2). The attention backward's
 * scratch takes as many (flash: D, B H T). */
static size_t att_elems(const struct model *m)
{
	size_t rows = (size_t)m->B * m->cfg.n_heads * m->T;
	return m->cfg.attention == MODEL_ATT_FLASH ? 2 * rows : rows * m->T;
}

/* Carves the tape layout documented above out of base; returns its size.
 * sel: the selective layout, att and a left out (NULL). */
static size_t tape_layout(const struct model *m, void *base, struct tape *t,
			  int sel)
{
	size_t N = (size_t)m->B * m->T, d = m->d, F = m->cfg.d_ff;
	size_t off = 0;
	char *b = base;
	const size_t e = m->be->elem;
#define CARVE(field, n)                                                        \
	do {                                                                   \
		t->field = b && (n) != 0 ? b + off * e : NULL;                 \
		off += (n);                                                    \
	} while (0)
	CARVE(z, N * d);
	CARVE(qkv, 3 * N * d);
	CARVE(att, sel ? 0 : att_elems(m));
	CARVE(a, sel ? 0 : N * d);
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
	return tape_layout(m, NULL, &t, 0);
}

static size_t tf_sel_tape_elems(const struct model *m)
{
	struct tape t;
	return tape_layout(m, NULL, &t, 1);
}

/* The selective vjp's recomputed att (B,H,T,T) then a (N,d). */
static size_t tf_sel_scratch_elems(const struct model *m)
{
	return att_elems(m) + m->n_state;
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

/* tf_forward into tape (NULL: the workspace) of the full layout, or with
 * sel of the selective one, att and a then in the workspace. */
static void forward_tape(struct model *m, void *z_out, const void *z_in,
			 const void *u, void *tape, int sel)
{
	struct backend *be = m->be;
	void *P = m->param_buf;
	int N = m->B * m->T, d = m->d;
	int F = m->cfg.d_ff;
	struct tape t;
	tape_layout(m, tape ? tape : model_ws(m), &t, tape ? sel : 0);
	if (tape && sel) {
		struct tape w;
		tape_layout(m, model_ws(m), &w, 0);
		t.att = w.att, t.a = w.a;
	}
	const void *z = z_in;
	if (tape)
		be_copy(be, t.z, z_in, m->n_state);

	/* qkv = u + z Wqkvᵀ + bqkv */
	be_copy(be, t.qkv, u, m->n_u);
	model_linear_forward(m, t.qkv, 1.0, z, TP_QKV_W, N, d, 3 * d);
	/* bf16: the attention's products read bf16 q, k, v, as a bf16
	 * linear layer's output feeds them (models/model.c, precision=bf16) */
	if (m->cfg.precision == DQ_PREC_BF16)
		be_round_bf16(be, t.qkv, m->n_u);
	model_attention_forward(m, t.a, t.att, t.qkv);
	/* r1 = a Woᵀ, then in one pass r1 = (r1 + z) + bo and h = LN1(r1) */
	model_matmul_forward(m, t.r1, 0.0, t.a, TP_OUT_W, N, d, d);
	be_residual_layernorm_forward(
	    be, t.h, t.mu1, t.rs1, t.r1, z, model_p(m, P, TP_OUT_B),
	    model_p(m, P, TP_LN1_W), model_p(m, P, TP_LN1_B), N, d);
	/* p = relu(h W1ᵀ + b1): bias and relu in one pass (or, under
	 * epilogue=fused, in the GEMM's epilogue) */
	model_linear_act_forward(m, t.p, 0.0, t.h, TP_FF1_W, N, d, F, 1);
	/* r2 = p W2ᵀ, then r2 = (r2 + h) + b2 and f = LN2(r2) */
	model_matmul_forward(m, t.r2, 0.0, t.p, TP_FF2_W, N, F, d);
	be_residual_layernorm_forward(
	    be, z_out, t.mu2, t.rs2, t.r2, t.h, model_p(m, P, TP_FF2_B),
	    model_p(m, P, TP_LN2_W), model_p(m, P, TP_LN2_B), N, d);
}

static void tf_forward(struct model *m, void *z_out, const void *z_in,
		       const void *u, void *tape)
{
	forward_tape(m, z_out, z_in, u, tape, 0);
}

static void tf_sel_forward(struct model *m, void *z_out, const void *z_in,
			   const void *u, void *tape)
{
	forward_tape(m, z_out, z_in, u, tape, 1);
}

/* LayerNorm backward of parameters w, w + 1 (weight, bias): dx overwritten
 * and copied into dres (the residual branch's gradient); their gradients
 * += when pg, else into the dummies dum (2d elements); with pg also the
 * bias `bias` of the linear layer under the LayerNorm gets += Σ rows dx. */
static void ln_backward(struct model *m, void *dx, void *dres, const void *dy,
			const void *x, const void *mu, const void *rs, int w,
			int bias, int pg, void *dum)
{
	void *G = m->grad_buf;
	int N = m->B * m->T, d = m->d;
	be_residual_layernorm_backward(
	    m->be, dx, dres, pg ? model_p(m, G, bias) : NULL,
	    pg ? model_p(m, G, w) : dum,
	    pg ? model_p(m, G, w + 1) : dq_at(m->be, dum, d), dy, x, mu, rs,
	    model_p(m, m->param_buf, w), N, d);
}

/* Reverse of tf_forward. Weight gradients are dW += dyᵀ x (gemm, beta 1);
 * input gradients dx = dy W. With param_grads == 0 the LayerNorm weight
 * gradients (which the op always accumulates) go to a dummy and every
 * other parameter-gradient call is skipped: ~1/2 of the vjp's GEMM FLOPs. */
static void vjp_of(struct model *m, void *gz_in, void *gu, const void *gz_out,
		   struct tape t, int pg)
{
	struct backend *be = m->be;
	int N = m->B * m->T, d = m->d;
	int F = m->cfg.d_ff;
	size_t w = (size_t)(F > 3 * d ? F : 3 * d), nd = m->n_state;

	void *g1 = model_ws(m), *g2 = dq_at(be, g1, nd);
	void *gw = dq_at(be, g1, 2 * nd);
	void *gs = dq_at(be, gw, (size_t)N * w);
	void *dum = dq_at(be, gs, att_elems(m)); /* 2d */

	/* g1 = dr2 from LN2, db2 += Σ rows dr2; g2 = dh = dr2 (residual) +
	 * dp W1 below; gw = dp = dr2 W2 */
	ln_backward(m, g1, g2, gz_out, t.r2, t.mu2, t.rs2, TP_LN2_W, TP_FF2_B,
		    pg, dum);
	model_matmul_backward(m, gw, 0.0, g1, t.p, TP_FF2_W, N, F, d, pg);
	/* dp = dp relu'(p), db1 += Σ rows dp, in one pass */
	be_act_bias_backward(be, ACT_RELU, gw, gw, t.p,
			     pg ? model_p(m, m->grad_buf, TP_FF1_B) : NULL, N,
			     F);
	model_matmul_backward(m, g2, 1.0, gw, t.h, TP_FF1_W, N, d, F, pg);
	/* g1 = dr1 from LN1, dbo += Σ rows dr1; gz_in = dr1 (residual) +
	 * dqkv Wqkv below; g2 = da = dr1 Wo */
	ln_backward(m, g1, gz_in, g2, t.r1, t.mu1, t.rs1, TP_LN1_W, TP_OUT_B,
		    pg, dum);
	model_matmul_backward(m, g2, 0.0, g1, t.a, TP_OUT_W, N, d, d, pg);
	/* gw = dqkv (N,3d) */
	model_attention_backward(m, gw, gs, g2, t.qkv, t.att, t.a);
	model_linear_backward(m, gz_in, 1.0, gw, t.z, TP_QKV_W, N, d, 3 * d,
			      pg);
	/* u enters qkv additively: du = dqkv */
	if (gu)
		be_axpy(be, gu, 1.0, gw, m->n_u);
}

static void tf_vjp(struct model *m, void *gz_in, void *gu, const void *gz_out,
		   const void *tape, int pg)
{
	struct tape t;
	tape_layout(m, (void *)tape, &t, 0);
	vjp_of(m, gz_in, gu, gz_out, t, pg);
}

/* The selective recomputation (the header): att and a of the selective
 * tape `tape` into scratch by the forward's own attention op, O(B H T² dh)
 * (4 B T² d FLOPs, counted in full as tf_flops does); *t is the tape with
 * them filled in. */
static void sel_recompute(struct model *m, void *scratch, const void *tape,
			  struct tape *t)
{
	struct backend *be = m->be;
	tape_layout(m, (void *)tape, t, 1);
	t->att = scratch;
	t->a = dq_at(be, scratch, att_elems(m));
	model_attention_forward(m, t->a, t->att, t->qkv);
	/* bf16: att and a rounded as the full tape stores them (the op's P
	 * is rounded already; flash's lse lo is not) */
	if (m->cfg.precision == DQ_PREC_BF16) {
		be_round_bf16(be, t->att, att_elems(m));
		be_round_bf16(be, t->a, m->n_state);
	}
}

static void tf_sel_recompute(struct model *m, void *scratch, const void *tape)
{
	struct tape t;
	sel_recompute(m, scratch, tape, &t);
}

/* The selective vjp: the recomputation, then the full vjp. */
static void tf_sel_vjp(struct model *m, void *gz_in, void *gu,
		       const void *gz_out, const void *tape, void *scratch,
		       int pg)
{
	struct tape t;
	sel_recompute(m, scratch, tape, &t);
	vjp_of(m, gz_in, gu, gz_out, t, pg);
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

/* The selective recomputation: q kᵀ and att v, 4 B T² d, the attention
 * term of tf_flops. */
static double tf_sel_flops(const struct model *m)
{
	return 4.0 * (double)m->B * m->T * (double)m->T * m->d;
}

const struct model_def model_transformer = {
    .name = "transformer",
    .d_mult = 1,
    .u_mult = 3,
    .state_parts = 1,
    .attention = 1,
    .check = tf_check,
    .extent = tf_extent,
    .block_specs = tf_block_specs,
    .tape_elems = tf_tape_elems,
    .workspace_elems = tf_workspace_elems,
    .forward = tf_forward,
    .vjp = tf_vjp,
    .sel_tape_elems = tf_sel_tape_elems,
    .sel_scratch_elems = tf_sel_scratch_elems,
    .sel_forward = tf_sel_forward,
    .sel_vjp = tf_sel_vjp,
    .sel_recompute = tf_sel_recompute,
    .sel_flops = tf_sel_flops,
    .flops = tf_flops,
};
