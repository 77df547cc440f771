/* cuda_epilogue.cu — gemm_bias_act (kernels/backend.h): a linear layer's
 * GEMM with its bias, and ReLU, applied in cuBLASLt's epilogue
 * (CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS) instead of a
 * separate pass over C (llm.c's matmul_cublaslt does the same; the
 * research notes, ../shared/reviews/gpu-research.md §2).
 *
 * Row-major C(M,N) = A(M,K) W(N,K)ᵀ is column-major Cᵀ(N,M) = W Aᵀ: the
 * matmul's first operand is W (column-major K×N, transposed), its second
 * A (column-major K×M), D is N×M with leading dimension N, and the bias
 * (length N, D's rows) is broadcast along D's columns, as cuBLASLt's
 * epilogue adds it. In bf16 (W16 given) A is rounded into scratch first
 * (as gemm_bf16_mixed does), both operands are CUDA_R_16BF and C, the
 * bias and the accumulation fp32. fp32 operands compute in FP32, or TF32
 * when the handle's math mode is CUBLAS_TF32_TENSOR_OP_MATH (set_tf32).
 *
 * Plans. A call's descriptors and algorithm (cublasLtMatmulAlgoGetHeuristic,
 * told the pointers' real alignment: parameters and tapes sit at element
 * offsets, and an algorithm chosen for 256-byte alignment fails on less)
 * are kept per shape, mode and alignment in the context (DQ_LT_PLANS, the
 * oldest replaced), so that a step pays the host work once per layer.
 *
 * Where cuBLASLt offers no algorithm, the bias is not 16-byte aligned
 * (kernels that assume it are reported), or the matmul says NOT_SUPPORTED,
 * the two ops it stands for run instead (gemm or the bf16 GEMM, then the
 * bias pass): the result is the op's either way.
 */
#include "cuda_common.cuh"

#include <stdlib.h>
#include <string.h>

/* The key of a plan. */
struct lt_key {
	int M, N, K, relu, bf16, tf32;
	uint32_t align[5]; /* W, A, C, D, the bias */
};

struct dq_lt_plan {
	struct lt_key key;
	int ok; /* an algorithm was found */
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t w, a, c;
	cublasLtMatmulAlgo_t algo;
	size_t ws;
};

static void plan_free(struct dq_lt_plan *p)
{
	if (p->w)
		cublasLtMatrixLayoutDestroy(p->w);
	if (p->a)
		cublasLtMatrixLayoutDestroy(p->a);
	if (p->c)
		cublasLtMatrixLayoutDestroy(p->c);
	if (p->op)
		cublasLtMatmulDescDestroy(p->op);
	memset(p, 0, sizeof(*p));
}

int cu_epilogue_init(struct dq_cuda_ctx *c)
{
	c->lt_plans =
	    (struct dq_lt_plan *)calloc(DQ_LT_PLANS, sizeof(struct dq_lt_plan));
	return c->lt_plans ? 0 : -1;
}

void cu_epilogue_destroy(struct dq_cuda_ctx *c)
{
	if (!c->lt_plans)
		return;
	for (int i = 0; i < DQ_LT_PLANS; i++)
		plan_free(&c->lt_plans[i]);
	free(c->lt_plans);
	c->lt_plans = NULL;
}

/* The largest power of two up to 256 that p's address is a multiple of. */
static uint32_t align_of(const void *p)
{
	uint32_t a = 256;
	while (a > 1 && (uintptr_t)p % a)
		a /= 2;
	return a;
}

/* The descriptors of key k; 0, or -1 when cuBLASLt refuses one. */
static int plan_descs(struct dq_lt_plan *p, const struct lt_key *k)
{
	cublasComputeType_t ct =
	    k->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	cudaDataType_t in = k->bf16 ? CUDA_R_16BF : CUDA_R_32F,
		       f32 = CUDA_R_32F;
	cublasOperation_t tw = CUBLAS_OP_T, ta = CUBLAS_OP_N;
	cublasLtEpilogue_t epi =
	    k->relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
	if (cublasLtMatmulDescCreate(&p->op, ct, f32) != CUBLAS_STATUS_SUCCESS)
		return -1;
	int ok =
	    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA,
					   &tw, sizeof(tw)) == 0 &&
	    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB,
					   &ta, sizeof(ta)) == 0 &&
	    cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
					   &epi, sizeof(epi)) == 0 &&
	    cublasLtMatmulDescSetAttribute(p->op,
					   CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
					   &f32, sizeof(f32)) == 0 &&
	    cublasLtMatrixLayoutCreate(&p->w, in, k->K, k->N, k->K) == 0 &&
	    cublasLtMatrixLayoutCreate(&p->a, in, k->K, k->M, k->K) == 0 &&
	    cublasLtMatrixLayoutCreate(&p->c, f32, k->N, k->M, k->N) == 0;
	return ok ? 0 : -1;
}

/* Plan p for key k (descriptors, then the heuristic's first algorithm
 * under the real alignments and the workspace); p->ok says whether one
 * was found. The bias pointer (16-byte aligned, which the heuristic
 * reads) goes into the descriptor at each call. */
static void plan_make(struct dq_cuda_ctx *c, struct dq_lt_plan *p,
		      const struct lt_key *k, const void *b)
{
	static const cublasLtMatmulPreferenceAttributes_t al[4] = {
	    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
	    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
	    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
	    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res = {};
	int nres = 0, ok;
	uint64_t ws = DQ_CU_CUBLAS_WS;
	plan_free(p);
	p->key = *k;
	ok = plan_descs(p, k) == 0 &&
	     cublasLtMatmulDescSetAttribute(p->op,
					    CUBLASLT_MATMUL_DESC_BIAS_POINTER,
					    &b, sizeof(b)) == 0 &&
	     cublasLtMatmulPreferenceCreate(&pref) == 0 &&
	     cublasLtMatmulPreferenceSetAttribute(
		 pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
		 sizeof(ws)) == 0;
	for (int i = 0; ok && i < 4; i++)
		ok = cublasLtMatmulPreferenceSetAttribute(
			 pref, al[i], &k->align[i], sizeof(uint32_t)) == 0;
	ok = ok &&
	     cublasLtMatmulAlgoGetHeuristic(c->lt, p->op, p->w, p->a, p->c,
					    p->c, pref, 1, &res, &nres) == 0 &&
	     nres > 0 && res.state == CUBLAS_STATUS_SUCCESS;
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	p->ok = ok;
	p->algo = res.algo;
	p->ws = res.workspaceSize;
}

/* The plan of key k: a kept one, or a new one in the oldest's place. */
static struct dq_lt_plan *plan_of(struct dq_cuda_ctx *c, const struct lt_key *k,
				  const void *b)
{
	for (int i = 0; i < DQ_LT_PLANS; i++)
		if (c->lt_plans[i].op &&
		    !memcmp(&c->lt_plans[i].key, k, sizeof(*k)))
			return &c->lt_plans[i];
	struct dq_lt_plan *p = &c->lt_plans[c->lt_next];
	c->lt_next = (c->lt_next + 1) % DQ_LT_PLANS;
	plan_make(c, p, k, b);
	return p;
}

/* The matmul through cuBLASLt; 0, or -1 with nothing run. */
static int lt_run(struct dq_cuda_ctx *c, int relu, int M, int N, int K,
		  double beta, const void *A, const void *W, const void *b,
		  void *C, int bf16)
{
	cublasMath_t mode = CUBLAS_DEFAULT_MATH;
	if ((uintptr_t)b % 16 ||
	    cublasGetMathMode(c->cublas, &mode) != CUBLAS_STATUS_SUCCESS)
		return -1;
	struct lt_key k = {
	    M,
	    N,
	    K,
	    relu,
	    bf16,
	    !bf16 && (mode & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH,
	    {align_of(W), align_of(A), align_of(C), align_of(C), align_of(b)}};
	struct dq_lt_plan *p = plan_of(c, &k, b);
	if (!p->ok ||
	    cublasLtMatmulDescSetAttribute(
		p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b)) != 0)
		return -1;
	const float one = 1.0f, bt = (float)beta;
	cublasStatus_t s = cublasLtMatmul(
	    c->lt, p->op, &one, W, p->w, A, p->a, &bt, C, p->c, C, p->c,
	    &p->algo, c->cublas_ws, DQ_CU_CUBLAS_WS, c->stream);
	if (s == CUBLAS_STATUS_NOT_SUPPORTED)
		return -1;
	cublas_check(s);
	return 0;
}

void cu_gemm_bias_act(void *ctx, int relu, int M, int N, int K, double beta,
		      const void *A, const void *W, const uint16_t *W16,
		      const void *b, void *C, void *scratch)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (M <= 0 || N <= 0)
		return;
	if (W16 && K > 0) { /* A rounded to bf16, as gemm_bf16_mixed's */
		cu_to_bf16(ctx, (uint16_t *)scratch, A, (size_t)M * K);
		if (lt_run(c, relu, M, N, K, beta, scratch, W16, b, C, 1) == 0)
			return;
		cu_gemm_bf16_arrays(ctx, 0, 1, M, N, K, 1.0,
				    (const uint16_t *)scratch, K, W16, K, beta,
				    C, N, NULL);
	} else if (K > 0 &&
		   lt_run(c, relu, M, N, K, beta, A, W, b, C, 0) == 0) {
		return;
	} else {
		cu_gemm(ctx, 0, 1, M, N, K, 1.0, A, K, W, K, beta, C, N);
	}
	if (relu)
		cu_bias_act_forward(ctx, ACT_RELU, C, b, M, N);
	else
		cu_bias_forward(ctx, C, b, M, N);
}
