/* cuda_epilogue.cu — gemm_bias_act (kernels/backend.h): a linear layer's
 * GEMM with its bias, and ReLU, applied in cuBLASLt's epilogue
 * (CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS) instead of a
 * separate pass over C (llm.c's matmul_cublaslt does the same; the
 * research notes, ../shared/reviews/gpu-research.md §2).
 *
 * Row-major C(M,N) = A(M,K) W(N,K)ᵀ is column-major Cᵀ(N,M) = W Aᵀ: the
 * matmul's first operand is W (column-major K×N, transposed), its second
 * A (column-major K×M), D is N×M with leading dimension N, and the bias
 * (length N) runs along D's rows, as cuBLASLt's epilogue adds it. In bf16
 * (W16 given) A is rounded into scratch first (cu_gemm_bf16_mixed's
 * packing), both operands are CUDA_R_16BF and C, the bias and the
 * accumulation fp32. fp32 operands compute in FP32, or TF32 when the
 * handle's math mode allows it (set_tf32).
 *
 * Where cuBLASLt offers no algorithm for a shape, the two ops it stands
 * for run instead (gemm or gemm_bf16_mixed, then the bias pass): the
 * result is the op's either way. Descriptors are made per call (host
 * work only; a recorded graph holds the matmul alone).
 */
#include "cuda_common.cuh"

struct lt_call {
	cublasLtMatmulDesc_t op;
	cublasLtMatrixLayout_t w, a, c;
};

static void lt_free(struct lt_call *l)
{
	if (l->w)
		cublasLtMatrixLayoutDestroy(l->w);
	if (l->a)
		cublasLtMatrixLayoutDestroy(l->a);
	if (l->c)
		cublasLtMatrixLayoutDestroy(l->c);
	if (l->op)
		cublasLtMatmulDescDestroy(l->op);
}

/* The descriptors of one call; 0, or -1 when cuBLASLt refuses one. */
static int lt_make(struct dq_cuda_ctx *c, struct lt_call *l, int relu, int M,
		   int N, int K, const void *b, int bf16)
{
	cublasMath_t mode = CUBLAS_DEFAULT_MATH;
	cublasGetMathMode(c->cublas, &mode);
	cublasComputeType_t ct = !bf16 && (mode & CUBLAS_TF32_TENSOR_OP_MATH)
				     ? CUBLAS_COMPUTE_32F_FAST_TF32
				     : CUBLAS_COMPUTE_32F;
	cudaDataType_t in = bf16 ? CUDA_R_16BF : CUDA_R_32F, f32 = CUDA_R_32F;
	cublasOperation_t tw = CUBLAS_OP_T, ta = CUBLAS_OP_N;
	cublasLtEpilogue_t epi =
	    relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
	if (cublasLtMatmulDescCreate(&l->op, ct, f32) != CUBLAS_STATUS_SUCCESS)
		return -1;
	int ok =
	    cublasLtMatmulDescSetAttribute(l->op, CUBLASLT_MATMUL_DESC_TRANSA,
					   &tw, sizeof(tw)) == 0 &&
	    cublasLtMatmulDescSetAttribute(l->op, CUBLASLT_MATMUL_DESC_TRANSB,
					   &ta, sizeof(ta)) == 0 &&
	    cublasLtMatmulDescSetAttribute(l->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
					   &epi, sizeof(epi)) == 0 &&
	    cublasLtMatmulDescSetAttribute(
		l->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &b, sizeof(b)) == 0 &&
	    cublasLtMatmulDescSetAttribute(l->op,
					   CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
					   &f32, sizeof(f32)) == 0 &&
	    cublasLtMatrixLayoutCreate(&l->w, in, K, N, K) == 0 &&
	    cublasLtMatrixLayoutCreate(&l->a, in, K, M, K) == 0 &&
	    cublasLtMatrixLayoutCreate(&l->c, f32, N, M, N) == 0;
	return ok ? 0 : -1;
}

/* The matmul through cuBLASLt; 0, or -1 with nothing run when it offers
 * no algorithm. */
static int lt_run(struct dq_cuda_ctx *c, int relu, int M, int N, int K,
		  double beta, const void *A, const void *W, const void *b,
		  void *C, int bf16)
{
	struct lt_call l = {};
	cublasLtMatmulPreference_t pref = NULL;
	cublasLtMatmulHeuristicResult_t res = {};
	int nres = 0, rc = -1;
	size_t ws = DQ_CU_CUBLAS_WS;
	const float one = 1.0f, bt = (float)beta;
	if (lt_make(c, &l, relu, M, N, K, b, bf16) == 0 &&
	    cublasLtMatmulPreferenceCreate(&pref) == 0 &&
	    cublasLtMatmulPreferenceSetAttribute(
		pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
		sizeof(ws)) == 0 &&
	    cublasLtMatmulAlgoGetHeuristic(c->lt, l.op, l.w, l.a, l.c, l.c,
					   pref, 1, &res, &nres) == 0 &&
	    nres > 0) {
		cublas_check(cublasLtMatmul(c->lt, l.op, &one, W, l.w, A, l.a,
					    &bt, C, l.c, C, l.c, &res.algo,
					    c->cublas_ws, ws, c->stream));
		rc = 0;
	}
	if (pref)
		cublasLtMatmulPreferenceDestroy(pref);
	lt_free(&l);
	return rc;
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
