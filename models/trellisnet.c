/* trellisnet.c — the weight-tied TrellisNet layer with the LSTM-style gated
 * activation (Bai, Kolter, Koltun, "Trellis Networks for Sequence
 * Modeling", ICLR 2019) in the form the DEQ paper uses ("Deep Equilibrium
 * Models", NeurIPS 2019; DEQ-TrellisNet, TrellisNetLSTMLayer in
 * locuslab/deq), with the input injected by a kernel-2 causal convolution:
 *
 *   x     = embed.weight[tok] + pos_embed.weight[t]                (N,E)
 *   u     = inject(x) = Conv1d_k2(x) + inject.bias, once per step (4,N,h)
 *   f([h; c]; u):
 *     pre = u + Conv1d_k2(h) + block.conv.bias                     (4,N,h)
 *     i, o, g, f = σ(pre_i), σ(pre_o), tanh(pre_g), σ(pre_f)
 *     c'[t] = f[t] ⊙ c[t-1] + i[t] ⊙ g[t]      (c[-1] = 0)
 *     h'[t] = o[t] ⊙ tanh(c'[t])
 *   Conv1d_k2(y)[t] = W[:,:,0] y[t-1] + W[:,:,1] y[t]   (y[-1] = 0)
 *
 * Positions t restart at 0 in every batch row. As in the reference, the
 * cell state of the previous position (c[t-1] of the layer input) enters
 * c', so the time recurrence is carried across layers: one layer moves
 * information exactly one position forward (L layers see t-L..t). The head
 * reads all of h (the reference's nout = h, nhid = 0).
 *
 * Letters: B batch, T sequence, N = B*T, h hidden width (d_model), E = h
 * embedding width, d = 2h state width, U = 4h injection width.
 *
 * Parameters (PyTorch names and layouts; nn.Conv1d weight [out, in, kernel]
 * with kernel index 0 at t-1 and 1 at t, i.e. Conv1d on the sequence left-
 * padded by one zero; output channel q = j h + r for gate j in the order i,
 * o, g, f, the reference's chunk(4) order):
 *   embed.weight [V,E]   pos_embed.weight [T,E]   (the reference has no
 *                        positions; kept for the shared head, harmless)
 *   inject.weight [4h,E,2]   inject.bias [4h]     (DEQ-TrellisNet's
 *                        inject_conv)
 *   block.conv.weight [4h,h,2]   block.conv.bias [4h]  (its full_conv;
 *                        weight normalisation and dropout are not used)
 *   head.weight [V,h]    head.bias [V]
 * Init (model.c, key `init`): gpt2 N(0, 0.02²) conv weights, 0 biases;
 * deq the reference's N(0, 0.01²) block.conv weight and bias (drawn under
 * weight normalisation, which leaves the weight unchanged at init) and
 * PyTorch's default U(±1/√(2E)) injection (tn_init_deq below); pytorch
 * U(±1/√(2h)) weights and biases. At z = 0 with small u every gate is about 1/2 and g about 0,
 * so the Jacobian of f in the (h, c) state is block lower-triangular in
 * time with diagonal blocks [[~W_g1/4, 0], [~W_g1/2, 0]] (W_g1 the g rows
 * of tap 1; c enters only through c[t-1]): its spectral radius is about
 * ρ(W_g1)/4 ≈ σ sqrt(h)/4 (circular law, σ the weights' std): 0.005
 * sqrt(h) for gpt2 and 0.0025 sqrt(h) for deq, below 1 for h < 40000 and
 * 160000; pytorch's σ = 1/sqrt(6h) gives 0.10 at every h. A larger
 * injection (pytorch's N(0, 1) embeddings) moves the gates off 1/2; the
 * diagonal block of h is then diag(o tanh'(c')) (diag(i tanh'(g)) W_g1 +
 * diag(σ'(i) g) W_i1 + diag(σ'(f) c[t-1]) W_f1) + diag(σ'(o) tanh(c'))
 * W_o1, with factors at most 1 for W_g1 and about 1/4 for the others, so
 * its radius stays near σ sqrt(h) sqrt(1 + 3/16) ≈ 0.45 for pytorch.
 * Fixed-point iteration converges at init under every preset without
 * rescaling the weights (measured: at d_model=64, B×T=8×32, Broyden
 * reaches rel 1e-3 in 10 to 14 iterations under all three).
 *
 * Layouts. Every backend element-wise op is contiguous, so the state and
 * the injection are stored in blocks rather than interleaved per position:
 *   z = [h (N,h) | c (N,h)]  (n_state = 2 N h; the head reads the first N h
 *                             elements as (N,h), model.c);
 *   u = [u_i | u_o | u_g | u_f], each (N,h)  (n_u = 4 N h, gate-major).
 * The methods treat z and u as flat vectors. The Conv1d weights are
 * transposed per call into kernel-major Wk (2,4h,h) (the transpose op:
 * exact), so each gate and tap is a contiguous (h,h) block W_{j,k} and the
 * layer is eight (N,h,h) GEMMs; the kernel-major weight gradient is added
 * back by a transpose with add. Tap 0 reads the input shifted one position
 * down inside each batch row: a copy of N-1 rows, then the B rows at t = 0
 * zeroed by zero_rows (row stride T h).
 *
 * Tape layout (elements of the backend type, in this order):
 *   z      (2,N,h)  z_in: h for dW, c for df and the c-gradient
 *   gates  (4,N,h)  i, o, g, f after their activations (σ', tanh' from y)
 *   tc     (N,h)    tanh(c')
 * size = 7 N h = 7 B T h (3.5 n_state). c' and h' are not kept: the vjp
 * reads neither.
 *
 * Workspace: tape-sized region (a no-tape forward writes its tape there; z
 * is read in place), then S (N,h), then Wk (8 h²), then 4 + max(B,h)
 * elements that nothing uses any more (they held the 2x2 identity and the
 * zeros of the GEMMs that transposed and zeroed before the transpose and
 * zero_rows ops; kept so that the workspace bytes of records and of
 * tests/test_trellis.c stay as they were):
 *   8 N h + 8 h² + 4 + max(B, h).
 * The vjp uses dpre (4,N,h), dc (N,h), S (N,h) from offset 0 (6 N h); the
 * injection backward S, dx (N,E) from offset 0. Wk sits at the same offset
 * in all three.
 *
 * Gradient rule: the vjp and the injection backward ADD (+=) into the
 * parameter gradients and into gu.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "model_impl.h"

/* Block parameters (h = d/2 = E); Conv1d [out, in, kernel] */
enum {
	NP_CONV_W = P_BLOCK0, /* block.conv.weight [4h,h,2] */
	NP_CONV_B,	      /* block.conv.bias [4h] */
};

static int tn_block_specs(const struct model_config *c, struct param_spec *s)
{
	int64_t h = c->d_model;
	s[0] = SPEC("block.conv.weight", 4 * h, h, 2, R_BLOCK_W, 2 * h);
	s[1] = SPEC("block.conv.bias", 4 * h, 0, 0, R_BLOCK_B, 2 * h);
	return 2;
}

/* init=deq is DEQ-TrellisNet's own (deq_trellisnet.py): embed (its
 * encoder) and head.weight (its decoder, tied to the encoder) U(±0.1),
 * head.bias 0, block.conv weight and bias N(0, 0.01²) (WeightShareConv1d;
 * weight normalisation leaves the weight unchanged at init), inject.weight
 * and inject.bias PyTorch's Conv1d default U(±1/√(2E)), pos_embed 0 (the
 * reference has no positions). */
static void tn_init_deq(struct param_spec *p)
{
	double fb = 1.0 / sqrt((double)p->fan_in);
	switch (p->role) {
	case R_EMBED:
	case R_HEAD_W:
		p->init = INIT_UNIFORM, p->a = 0.1;
		break;
	case R_INJ_W:
	case R_INJ_B:
		p->init = INIT_UNIFORM, p->a = fb;
		break;
	case R_BLOCK_W:
	case R_BLOCK_B:
		p->init = INIT_NORMAL, p->a = 0.01;
		break;
	default: /* pos_embed, head.bias */
		p->init = INIT_CONST, p->a = 0.0;
	}
}

/* The transpose of the conv weights takes int rows: 4 d_model² of them. */
static int tn_check(const struct model_config *c, char *err, size_t errlen)
{
	if (4LL * c->d_model * c->d_model > INT_MAX)
		return model_err(err, errlen,
				 "d_model=%d is too large for model=trellisnet "
				 "(4*d_model^2 must be at most %d)",
				 c->d_model, INT_MAX);
	return 0;
}

/* Rows of 4h (the gates). */
static struct model_extent tn_extent(const struct model_config *c)
{
	return (struct model_extent){4LL * c->d_model, 0};
}

/* Buffers one call works on, carved from the workspace. */
struct tn_ws {
	void *S;  /* (N,h) shifted copies and partial sums */
	void *wk; /* (2,4h,h) kernel-major weights or their gradient */
};

struct tn_tape {
	void *z, *c, *gates, *tc;
};

static size_t tn_h(const struct model *m)
{
	return (size_t)m->E;
}

static size_t tn_n(const struct model *m)
{
	return (size_t)m->B * m->T;
}

static size_t tn_tape_elems(const struct model *m)
{
	return 7 * tn_n(m) * tn_h(m);
}

/* The tail 4 + max(B, h) is not used (see the top of the file). */
static size_t tn_workspace_elems(const struct model *m)
{
	size_t h = tn_h(m), tail = (size_t)(m->B > m->E ? m->B : m->E);
	return 8 * tn_n(m) * h + 8 * h * h + 4 + tail;
}

static void tape_layout(const struct model *m, void *base, struct tn_tape *t)
{
	size_t nh = tn_n(m) * tn_h(m);
	t->z = base;
	t->c = dq_at(m->be, base, nh);
	t->gates = dq_at(m->be, base, 2 * nh);
	t->tc = dq_at(m->be, base, 6 * nh);
}

/* S at offset s_off; Wk after 8 N h. */
static void ws_layout(struct model *m, size_t s_off, struct tn_ws *w)
{
	void *ws = model_ws(m);
	w->S = dq_at(m->be, ws, s_off);
	w->wk = dq_at(m->be, ws, 8 * tn_n(m) * tn_h(m));
}

/* Wk (2, 4h, in) = W [4h, in, 2] with the last axis moved first: the
 * transpose of W viewed as (4h in, 2). */
static void conv_weight_kmajor(struct model *m, void *wk, const void *W, int in)
{
	be_transpose(m->be, wk, W, 4 * m->E * in, 2, 0);
}

/* G [4h, in, 2] += the kernel-major gradient dWk (2, 4h, in): G viewed as
 * (4h in, 2) += dWkᵀ. */
static void conv_grad_add(struct model *m, void *G, const void *dwk, int in)
{
	be_transpose(m->be, G, dwk, 2, 4 * m->E * in, 1);
}

/* Rows t = 0 of every batch row of y (N, C) set to 0. */
static void zero_first_rows(struct model *m, void *y, int C)
{
	be_zero_rows(m->be, y, (size_t)m->B, (size_t)C, (size_t)m->T * C);
}

/* dst[b,t] = src[b,t-1], dst[b,0] = 0; (N, C) each, no aliasing. */
static void shift_down(struct model *m, void *dst, const void *src, int C)
{
	size_t N = tn_n(m);
	be_copy(m->be, dq_at(m->be, dst, (size_t)C), src, (N - 1) * (size_t)C);
	zero_first_rows(m, dst, C);
}

/* dst[b,t] += S[b,t+1] for t < T-1 (the adjoint of shift_down, added).
 * Zeroes the rows t = 0 of S first. */
static void shift_up_add(struct model *m, void *dst, void *S, int C)
{
	size_t N = tn_n(m);
	zero_first_rows(m, S, C);
	be_axpy(m->be, dst, 1.0, dq_at(m->be, S, (size_t)C),
		(N - 1) * (size_t)C);
}

/* Gate j (N,h) of a gate-major (4, N, h) buffer y. */
static void *gate(const struct model *m, const void *y, int j)
{
	return dq_at(m->be, y, (size_t)j * tn_n(m) * tn_h(m));
}

/* W_{j,k} (h, in), tap k of gate j, of kernel-major weights wk (2, 4h, in). */
static void *tap(const struct model *m, const void *wk, int j, int k, int in)
{
	return dq_at(m->be, wk, (size_t)(4 * k + j) * tn_h(m) * (size_t)in);
}

/* y_j (N,h) = x_prev W_{j,0}ᵀ + x W_{j,1}ᵀ + beta y_j for the four gates j;
 * x, x_prev (N, in); wk (2, 4h, in); y gate-major (4, N, h). */
static void conv_forward(struct model *m, void *y, const void *x_prev,
			 const void *x, const void *wk, int in, double beta)
{
	int N = m->B * m->T, h = m->E;
	for (int j = 0; j < 4; j++)
		for (int k = 0; k < 2; k++)
			model_gemm(m, 0, 1, N, h, in, 1.0, k ? x : x_prev, in,
				   tap(m, wk, j, k, in), in, k ? 1.0 : beta,
				   gate(m, y, j), h);
}

/* Input gradients of conv_forward: gx = Σ_j dy_j W_{j,1} and gS = Σ_j dy_j
 * W_{j,0} (the gradient of x_prev, not yet shifted), (N, in) each,
 * overwritten. */
static void conv_backward_input(struct model *m, void *gx, void *gS,
				const void *dy, const void *wk, int in)
{
	int N = m->B * m->T, h = m->E;
	for (int j = 0; j < 4; j++)
		for (int k = 0; k < 2; k++)
			model_gemm(m, 0, 0, N, in, h, 1.0, gate(m, dy, j), h,
				   tap(m, wk, j, k, in), in, j ? 1.0 : 0.0,
				   k ? gx : gS, in);
}

/* Kernel-major weight gradient dwk (2, 4h, in): W_{j,0} = dy_jᵀ x_prev,
 * W_{j,1} = dy_jᵀ x, overwritten. */
static void conv_backward_weight(struct model *m, void *dwk, const void *dy,
				 const void *x_prev, const void *x, int in)
{
	int N = m->B * m->T, h = m->E;
	for (int j = 0; j < 4; j++)
		for (int k = 0; k < 2; k++)
			model_gemm(m, 1, 0, h, in, N, 1.0, gate(m, dy, j), h,
				   k ? x : x_prev, in, 0.0,
				   tap(m, dwk, j, k, in), in);
}

/* Per-gate bias: y_j (N,h) += b[j h .. (j+1) h), and its gradient. */
static void gate_bias_forward(struct model *m, void *y, const void *b)
{
	for (int j = 0; j < 4; j++)
		be_bias_forward(m->be, gate(m, y, j),
				dq_at(m->be, b, (size_t)j * m->E), m->B * m->T,
				m->E);
}

static void gate_bias_backward(struct model *m, void *db, const void *dy)
{
	for (int j = 0; j < 4; j++)
		be_bias_backward(m->be, dq_at(m->be, db, (size_t)j * m->E),
				 gate(m, dy, j), m->B * m->T, m->E);
}

static void tn_forward(struct model *m, void *z_out, const void *z_in,
		       const void *u, void *tape)
{
	struct backend *be = m->be;
	void *P = m->param_buf;
	int h = m->E;
	size_t nh = tn_n(m) * tn_h(m);
	struct tn_tape t;
	struct tn_ws w;
	tape_layout(m, tape ? tape : model_ws(m), &t);
	ws_layout(m, 7 * nh, &w);
	const void *H = z_in, *C = dq_at(m->be, z_in, nh);
	void *h_out = z_out, *c_out = dq_at(m->be, z_out, nh);
	if (tape)
		be_copy(be, t.z, z_in, m->n_state);
	void *gi = gate(m, t.gates, 0), *go = gate(m, t.gates, 1);
	void *gg = gate(m, t.gates, 2), *gf = gate(m, t.gates, 3);

	/* pre = u + Conv1d_k2(h) + b, in the gates buffer */
	conv_weight_kmajor(m, w.wk, model_p(m, P, NP_CONV_W), h);
	be_copy(be, t.gates, u, m->n_u);
	shift_down(m, w.S, H, h);
	conv_forward(m, t.gates, w.S, H, w.wk, h, 1.0);
	gate_bias_forward(m, t.gates, model_p(m, P, NP_CONV_B));
	/* i, o (adjacent) σ; g tanh; f σ */
	be_act_forward(be, ACT_SIGMOID, gi, gi, 2 * nh);
	be_act_forward(be, ACT_TANH, gg, gg, nh);
	be_act_forward(be, ACT_SIGMOID, gf, gf, nh);
	/* c' = f ⊙ c[t-1] + i ⊙ g ; h' = o ⊙ tanh(c') */
	shift_down(m, w.S, C, h);
	be_mul(be, c_out, gf, w.S, nh);
	be_mul(be, w.S, gi, gg, nh);
	be_axpy(be, c_out, 1.0, w.S, nh);
	be_act_forward(be, ACT_TANH, t.tc, c_out, nh);
	be_mul(be, h_out, go, t.tc, nh);
}

/* Reverse of tn_forward. With param_grads == 0 the two weight-gradient
 * passes (8 GEMMs, half of the vjp's) and the bias sums are skipped. */
static void tn_vjp(struct model *m, void *gz_in, void *gu, const void *gz_out,
		   const void *tape_, int pg)
{
	struct backend *be = m->be;
	void *P = m->param_buf, *G = m->grad_buf;
	int h = m->E;
	size_t nh = tn_n(m) * tn_h(m);
	struct tn_tape t;
	struct tn_ws w;
	tape_layout(m, (void *)tape_, &t);
	ws_layout(m, 5 * nh, &w);
	void *dpre = model_ws(m), *dc = dq_at(m->be, dpre, 4 * nh);
	void *di = gate(m, dpre, 0), *d_o = gate(m, dpre, 1);
	void *dg = gate(m, dpre, 2), *df = gate(m, dpre, 3);
	const void *ai = gate(m, t.gates, 0), *ao = gate(m, t.gates, 1);
	const void *ag = gate(m, t.gates, 2), *af = gate(m, t.gates, 3);
	const void *gh = gz_out, *gc = dq_at(m->be, gz_out, nh);
	void *gH = gz_in, *gC = dq_at(m->be, gz_in, nh);

	/* h' = o ⊙ tc: do = gh ⊙ tc σ'; dc = gh ⊙ o tanh' + gc */
	be_mul(be, d_o, gh, t.tc, nh);
	be_act_backward(be, ACT_SIGMOID, d_o, d_o, NULL, ao, nh);
	be_mul(be, dc, gh, ao, nh);
	be_act_backward(be, ACT_TANH, dc, dc, NULL, t.tc, nh);
	be_axpy(be, dc, 1.0, gc, nh);
	/* c' = f ⊙ c[t-1] + i ⊙ g */
	be_mul(be, di, dc, ag, nh);
	be_act_backward(be, ACT_SIGMOID, di, di, NULL, ai, nh);
	be_mul(be, dg, dc, ai, nh);
	be_act_backward(be, ACT_TANH, dg, dg, NULL, ag, nh);
	shift_down(m, w.S, t.c, h);
	be_mul(be, df, dc, w.S, nh);
	be_act_backward(be, ACT_SIGMOID, df, df, NULL, af, nh);
	/* gC[t-1] = dc[t] ⊙ f[t]; gC at t = T-1 is 0 */
	be_mul(be, w.S, dc, af, nh);
	be_fill(be, gC, 0.0, nh);
	shift_up_add(m, gC, w.S, h);
	/* gH = Σ_j dpre_j W_{j,1} + shifted-up Σ_j dpre_j W_{j,0} */
	conv_weight_kmajor(m, w.wk, model_p(m, P, NP_CONV_W), h);
	conv_backward_input(m, gH, w.S, dpre, w.wk, h);
	shift_up_add(m, gH, w.S, h);
	/* u enters pre additively */
	if (gu)
		be_axpy(be, gu, 1.0, dpre, m->n_u);
	if (pg) {
		shift_down(m, w.S, t.z, h);
		conv_backward_weight(m, w.wk, dpre, w.S, t.z, h);
		conv_grad_add(m, model_p(m, G, NP_CONV_W), w.wk, h);
		gate_bias_backward(m, model_p(m, G, NP_CONV_B), dpre);
	}
}

/* x = embed + pos (N,E); u = Conv1d_k2(x) + inject.bias, gate-major. */
static void tn_inject_forward(struct model *m)
{
	struct backend *be = m->be;
	void *P = m->param_buf;
	int E = m->E;
	struct tn_ws w;
	ws_layout(m, 0, &w);
	be_embed_forward(be, m->x, m->tokens, model_p(m, P, P_EMBED_W),
			 model_p(m, P, P_POS_W), m->B, m->T, E);
	conv_weight_kmajor(m, w.wk, model_p(m, P, P_INJ_W), E);
	shift_down(m, w.S, m->x, E);
	conv_forward(m, m->u, w.S, m->x, w.wk, E, 0.0);
	gate_bias_forward(m, m->u, model_p(m, P, P_INJ_B));
}

/* From m->gu: inject.weight, inject.bias, embed and pos grads +=. */
static void tn_inject_backward(struct model *m)
{
	struct backend *be = m->be;
	void *P = m->param_buf, *G = m->grad_buf;
	int E = m->E;
	struct tn_ws w;
	ws_layout(m, 0, &w);
	void *dx = dq_at(m->be, w.S, tn_n(m) * (size_t)E);
	shift_down(m, w.S, m->x, E);
	conv_backward_weight(m, w.wk, m->gu, w.S, m->x, E);
	conv_grad_add(m, model_p(m, G, P_INJ_W), w.wk, E);
	gate_bias_backward(m, model_p(m, G, P_INJ_B), m->gu);
	conv_weight_kmajor(m, w.wk, model_p(m, P, P_INJ_W), E);
	conv_backward_input(m, dx, w.S, m->gu, w.wk, E);
	shift_up_add(m, dx, w.S, E);
	be_embed_backward(be, model_p(m, G, P_EMBED_W), model_p(m, G, P_POS_W),
			  dx, m->tokens, m->B, m->T, E, m->cfg.vocab_size);
}

/* 2 per multiply-add: the eight (N,h,h) GEMMs, 2 N (4h)(2h) = 16 N h².
 * The gates, the weight transposition and the shifts are not counted. */
static double tn_flops(const struct model *m)
{
	double N = (double)tn_n(m), h = (double)tn_h(m);
	return 16.0 * N * h * h;
}

/* z = [h; c], u = the four gates */
const struct model_def model_trellisnet = {
    .name = "trellisnet",
    .d_mult = 2,
    .u_mult = 4,
    .state_parts = 2,
    .inject_kernel = 2,
    .check = tn_check,
    .extent = tn_extent,
    .block_specs = tn_block_specs,
    .init_deq = tn_init_deq,
    .tape_elems = tn_tape_elems,
    .workspace_elems = tn_workspace_elems,
    .forward = tn_forward,
    .vjp = tn_vjp,
    .flops = tn_flops,
    .inject_forward = tn_inject_forward,
    .inject_backward = tn_inject_backward,
};
