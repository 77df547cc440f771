/* model_gemm.c — precision=bf16's buffers and the GEMM every model kind
 * calls (model_gemm): the bf16 workspace (one fp32 tape, the rounded
 * operands, the weights' cast), the tapes' bytes, and the GEMM shape log
 * bench-block and the flops tests read. docs/precision.md. */
#include <assert.h>
#include <stdint.h>

#include "model.h"
#include "model_impl.h"

/* ------------------------------------------------------ precision=bf16
 *
 * Mixed precision as practitioners train
 * (Micikevicius et al. 2018, "Mixed Precision Training"; Kalamkar et al.
 * 2019 for bf16, which needs no loss scaling): docs/precision.md.
 *
 *   matrix products   every model_gemm on bf16 operands (be_gemm_bf16),
 *                     forward and backward, block and head, with fp32
 *                     accumulation and an fp32 result; the transformer
 *                     rounds qkv to bf16 before the attention, whose six
 *                     products read bf16 operands too (q, k, v, P, dO,
 *                     G: model_attention_forward, _backward)
 *   tapes             stored in bf16 (model_tape_bytes = 2 bytes an
 *                     element): the block writes its fp32 tape into
 *                     tape32 and stores it rounded; the vjp widens it
 *                     back into tape32 and reads that
 *   fp32              parameters (master weights), gradients and their
 *                     accumulation, Adam, LayerNorm, softmax and
 *                     cross-entropy and their statistics, the state z,
 *                     checkpoints, and every solver's state
 *
 * The weights' cast: the parameters rounded to bf16 once at each
 * model_inject_forward (wcast), so the L applications of a tied block
 * read the rounded weights instead of rounding them at every GEMM
 * (be_gemm_bf16_mixed: the same bits).
 *
 * Memory: tape32 (one fp32 tape), gemm_scratch and wcast (2 bytes a
 * parameter) are workspace, so a method with n tapes keeps n/2 + 1 fp32
 * tapes' worth of bytes. */

/* Elements of the widest activation row a kind has, times N. */
static size_t act_elems(const struct model *m)
{
	struct model_extent x = m->def->extent(&m->cfg);
	size_t row = (size_t)x.row, N = (size_t)m->B * m->T;
	if ((size_t)m->U > row)
		row = (size_t)m->U;
	if ((size_t)m->d > row)
		row = (size_t)m->d;
	return N * row;
}

/* Operand elements (op(A) plus op(B)) of the largest model_gemm: a
 * block product (an activation and a weight, or two activations for a
 * weight gradient) or a head product (logits rows K by V with the head
 * weight V by E or with z's K by E rows). model_gemm asserts the bound. */
static size_t gemm_operand_elems(const struct model *m)
{
	size_t wmax = 0, a = act_elems(m), K = model_head_rows_of(m);
	size_t V = (size_t)m->cfg.vocab_size, E = (size_t)m->E;
	for (int i = 0; i < m->n_params; i++)
		if (m->params[i].numel > wmax)
			wmax = m->params[i].numel;
	size_t block = a + (a > wmax ? a : wmax);
	size_t head = K * V + (V > K ? V : K) * E;
	/* + 7: op(B) starts at op(A)'s size rounded up to 8 (be_gemm_bf16) */
	return (block > head ? block : head) + 7;
}

/* Bytes of gemm_scratch: the largest model_gemm's operands, or, for a
 * kind whose block has attention, its bf16 operand copies when larger
 * (model_attention_forward: the two never run at once). */
static size_t bf16_scratch_bytes(const struct model *m)
{
	size_t g = m->be->bf16_operand_elem * gemm_operand_elems(m), a = 0;
	if (m->def->attention && m->cfg.attention == MODEL_ATT_FLASH)
		a = m->be->elem * (size_t)m->B * m->T * m->d; /* dO rounded */
	else if (m->def->attention)
		a = be_attention_bf16_ws_bytes(m->be, m->B, m->T, m->d,
					       m->cfg.n_heads);
	return g > a ? g : a;
}

size_t model_bf16_workspace_bytes(const struct model *m)
{
	if (m->cfg.precision != DQ_PREC_BF16)
		return 0;
	return m->be->elem * m->def->tape_elems(m) + bf16_scratch_bytes(m) +
	       sizeof(uint16_t) * m->n_param_elems;
}

int model_bf16_alloc(struct model *m)
{
	struct model_priv *pv = m->priv;
	struct backend *be = m->be;
	if (m->cfg.precision != DQ_PREC_BF16)
		return 0;
	pv->gemm_scratch_bytes = bf16_scratch_bytes(m);
	pv->tape32 = backend_alloc(be, m->def->tape_elems(m), MEM_WORKSPACE);
	pv->gemm_scratch =
	    backend_alloc_bytes(be, pv->gemm_scratch_bytes, MEM_WORKSPACE);
	pv->wcast = backend_alloc_bytes(be, sizeof(uint16_t) * m->n_param_elems,
					MEM_WORKSPACE);
	return pv->tape32 && pv->gemm_scratch && pv->wcast ? 0 : -1;
}

void model_bf16_cast(struct model *m)
{
	struct model_priv *pv = m->priv;
	if (pv->wcast)
		be_to_bf16(m->be, pv->wcast, m->param_buf, m->n_param_elems);
}

/* The cast of B when B is a parameter (a weight operand: inside
 * param_buf), else NULL. */
static const uint16_t *weight_cast(const struct model *m, const void *B)
{
	const struct model_priv *pv = m->priv;
	const char *b = B, *p0 = m->param_buf;
	if (!pv->wcast || b < p0 || b >= p0 + m->n_param_elems * m->be->elem)
		return NULL;
	return pv->wcast + (size_t)(b - p0) / m->be->elem;
}

size_t model_tape_bytes(const struct model *m)
{
	size_t e =
	    m->cfg.precision == DQ_PREC_BF16 ? sizeof(uint16_t) : m->be->elem;
	return e * m->def->tape_elems(m);
}

/* ------------------------------------------------------ the GEMM log */

void model_gemm_log_start(struct model *m, struct model_gemm_log *log)
{
	log->n = 0;
	log->dropped = 0;
	((struct model_priv *)m->priv)->gemm_log = log;
}

void model_gemm_log_stop(struct model *m)
{
	((struct model_priv *)m->priv)->gemm_log = NULL;
}

double model_gemm_log_flops(const struct model_gemm_log *log)
{
	double f = 0;
	for (int i = 0; i < log->n; i++)
		f += 2.0 * log->s[i].M * (double)log->s[i].N * log->s[i].K *
		     (double)log->s[i].count;
	return f;
}

/* Adds one call of (ta, tb, M, N, K) to log: its entry's count, or a new
 * entry. O(entries) a call, and only while logging. */
static void gemm_log_add(struct model_gemm_log *log, int ta, int tb, int M,
			 int N, int K)
{
	const struct model_gemm_shape s = {ta, tb, M, N, K, 1};
	for (int i = 0; i < log->n; i++) {
		struct model_gemm_shape *e = &log->s[i];
		if (e->ta == ta && e->tb == tb && e->M == M && e->N == N &&
		    e->K == K) {
			e->count++;
			return;
		}
	}
	if (log->n < MODEL_GEMM_LOG_MAX)
		log->s[log->n++] = s;
	else
		log->dropped++;
}

void model_gemm(struct model *m, int ta, int tb, int M, int N, int K,
		double alpha, const void *A, int lda, const void *B, int ldb,
		double beta, void *C, int ldc)
{
	struct model_priv *pv = m->priv;
	if (pv->gemm_log)
		gemm_log_add(pv->gemm_log, ta, tb, M, N, K);
	if (m->cfg.precision != DQ_PREC_BF16) {
		be_gemm(m->be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
			ldc);
		return;
	}
	assert(be_gemm_bf16_scratch_bytes(m->be, M, N, K) <=
	       pv->gemm_scratch_bytes);
	const uint16_t *Bc = weight_cast(m, B);
	if (Bc)
		be_gemm_bf16_mixed(m->be, ta, tb, M, N, K, alpha, A, lda, Bc,
				   ldb, beta, C, ldc, pv->gemm_scratch);
	else
		be_gemm_bf16(m->be, ta, tb, M, N, K, alpha, A, lda, B, ldb,
			     beta, C, ldc, pv->gemm_scratch);
}

void model_linear_act_forward(struct model *m, void *y, double beta,
			      const void *x, int w, int N, int in, int out,
			      int relu)
{
	struct model_priv *pv = m->priv;
	const void *W = model_p(m, m->param_buf, w);
	const void *b = model_p(m, m->param_buf, w + 1);
	const int bf16 = m->cfg.precision == DQ_PREC_BF16;
	const uint16_t *W16 = bf16 ? weight_cast(m, W) : NULL;
	if (m->cfg.epilogue != MODEL_EPI_FUSED || (bf16 && !W16)) {
		model_gemm(m, 0, 1, N, out, in, 1.0, x, in, W, in, beta, y,
			   out);
		if (relu)
			be_bias_act_forward(m->be, ACT_RELU, y, b, N, out);
		else
			be_bias_forward(m->be, y, b, N, out);
		return;
	}
	if (pv->gemm_log)
		gemm_log_add(pv->gemm_log, 0, 1, N, out, in);
	assert(!W16 || be_gemm_bf16_scratch_bytes(m->be, N, out, in) <=
			   pv->gemm_scratch_bytes);
	be_gemm_bias_act(m->be, relu, N, out, in, beta, x, W, W16, b, y,
			 W16 ? pv->gemm_scratch : NULL);
}

/* ------------------------------------------------------ the attention */

void model_attention_forward(struct model *m, void *out, void *att,
			     const void *qkv)
{
	struct model_priv *pv = m->priv;
	int B = m->B, T = m->T, d = m->d, H = m->cfg.n_heads;
	if (m->cfg.attention == MODEL_ATT_FLASH) {
		be_attention_flash_forward(m->be, out, att, qkv, B, T, d, H,
					   m->cfg.precision == DQ_PREC_BF16);
		return;
	}
	if (m->cfg.precision != DQ_PREC_BF16) {
		be_attention_forward(m->be, out, att, qkv, B, T, d, H);
		return;
	}
	assert(be_attention_bf16_ws_bytes(m->be, B, T, d, H) <=
	       pv->gemm_scratch_bytes);
	be_attention_forward_bf16(m->be, out, att, qkv, pv->gemm_scratch, B, T,
				  d, H);
}

void model_attention_backward(struct model *m, void *dqkv, void *scratch,
			      const void *dout, const void *qkv,
			      const void *att, const void *out)
{
	struct model_priv *pv = m->priv;
	int B = m->B, T = m->T, d = m->d, H = m->cfg.n_heads;
	int bf16 = m->cfg.precision == DQ_PREC_BF16;
	if (m->cfg.attention == MODEL_ATT_FLASH) {
		be_attention_flash_backward(
		    m->be, dqkv, scratch, dout, qkv, out, att,
		    bf16 ? pv->gemm_scratch : NULL, B, T, d, H, bf16);
		return;
	}
	if (!bf16) {
		be_attention_backward(m->be, dqkv, scratch, dout, qkv, att, B,
				      T, d, H);
		return;
	}
	assert(be_attention_bf16_ws_bytes(m->be, B, T, d, H) <=
	       pv->gemm_scratch_bytes);
	be_attention_backward_bf16(m->be, dqkv, scratch, dout, qkv, att,
				   pv->gemm_scratch, B, T, d, H);
}
