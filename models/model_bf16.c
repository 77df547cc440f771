/* model_bf16.c — precision=bf16, mixed precision as practitioners train
 * (Micikevicius et al. 2018, "Mixed Precision Training"; Kalamkar et al.
 * 2019 for bf16, which needs no loss scaling): docs/precision.md.
 *
 *   matrix products   every model_gemm on bf16 operands (be_gemm_bf16),
 *                     forward and backward, block and head, with fp32
 *                     accumulation and an fp32 result; the transformer
 *                     rounds qkv to bf16 before the attention, so q kᵀ
 *                     and att v read bf16 q, k, v
 *   tapes             stored in bf16 (model_tape_bytes = 2 bytes an
 *                     element): the block writes its fp32 tape into
 *                     tape32 and stores it rounded; the vjp widens it
 *                     back into tape32 and reads that
 *   fp32              parameters (master weights), gradients and their
 *                     accumulation, Adam, LayerNorm, softmax and
 *                     cross-entropy and their statistics, the state z,
 *                     checkpoints, and every solver's state
 *
 * Memory: tape32 (one fp32 tape) and gemm_scratch are workspace, so a
 * method with n tapes keeps n/2 + 1 fp32 tapes' worth of bytes. */
#include <stdio.h>

#include "model_impl.h"

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
	size_t wmax = 0, a = act_elems(m), K = model_head_rows(m);
	size_t V = (size_t)m->cfg.vocab_size, E = (size_t)m->E;
	for (int i = 0; i < m->n_params; i++)
		if (m->params[i].numel > wmax)
			wmax = m->params[i].numel;
	size_t block = a + (a > wmax ? a : wmax);
	size_t head = K * V + (V > K ? V : K) * E;
	/* + 7: op(B) starts at op(A)'s size rounded up to 8 (be_gemm_bf16) */
	return (block > head ? block : head) + 7;
}

size_t model_bf16_workspace_bytes(const struct model *m)
{
	if (m->cfg.precision != DQ_PREC_BF16)
		return 0;
	return m->be->elem * model_tape_elems(m) +
	       m->be->bf16_operand_elem * gemm_operand_elems(m);
}

int model_bf16_alloc(struct model *m, char *err, size_t errlen)
{
	struct model_priv *pv = m->priv;
	struct backend *be = m->be;
	if (m->cfg.precision != DQ_PREC_BF16)
		return 0;
	pv->gemm_scratch_bytes = be->bf16_operand_elem * gemm_operand_elems(m);
	pv->tape32 = backend_alloc(be, model_tape_elems(m), MEM_WORKSPACE);
	pv->gemm_scratch =
	    backend_alloc_bytes(be, pv->gemm_scratch_bytes, MEM_WORKSPACE);
	if (!pv->tape32 || !pv->gemm_scratch)
		return model_err(err, errlen,
				 "out of device memory for precision=bf16's "
				 "workspace (one fp32 tape and %zu bytes of "
				 "GEMM operands); lower batch_size or seq_len",
				 pv->gemm_scratch_bytes);
	return 0;
}

size_t model_tape_bytes(const struct model *m)
{
	size_t e =
	    m->cfg.precision == DQ_PREC_BF16 ? sizeof(uint16_t) : m->be->elem;
	return e * model_tape_elems(m);
}

void model_gemm(struct model *m, int ta, int tb, int M, int N, int K,
		double alpha, const void *A, int lda, const void *B, int ldb,
		double beta, void *C, int ldc)
{
	struct model_priv *pv = m->priv;
	if (m->cfg.precision != DQ_PREC_BF16) {
		be_gemm(m->be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
			ldc);
		return;
	}
	assert(be_gemm_bf16_scratch_bytes(m->be, M, N, K) <=
	       pv->gemm_scratch_bytes);
	be_gemm_bf16(m->be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C,
		     ldc, pv->gemm_scratch);
}
