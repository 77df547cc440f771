/* cuda_bf16.cu — the CUDA backend's bf16 mixed-precision ops: float32 <->
 * bf16 conversion (to_bf16, from_bf16, round_bf16) and the GEMM on bf16
 * operands (gemm_bf16). The contracts are kernels/backend.h's ("bf16 mixed
 * precision"); the CPU backend computes the same values.
 *
 * bf16 is the upper half of a float32, stored as uint16_t. The rounding
 * rule is kernels/bf16.h's dq_bf16_bits, the function the CPU backend calls
 * too (__host__ __device__ under nvcc), so the bits agree by construction.
 * On the float's bits b: nan -> (b >> 16) | 0x40 (quiet, sign and top
 * payload bits kept); otherwise b += 0x7FFF + ((b >> 16) & 1) and the
 * result is b >> 16: round to nearest, ties to even, inf stays inf, finite
 * values past the largest bf16 carry into the exponent and become inf,
 * subnormals round like any other value (no flush to zero): PyTorch's
 * float32 -> bfloat16 cast. Not __float2bfloat16_rn (the same rounding,
 * but its nan bits are the hardware's, which may be a canonical nan).
 * Widening is exact (bits << 16).
 *
 * gemm_bf16: the stored A and B are converted into the caller's scratch as
 * packed bf16 matrices in one launch (A's copy first, row width ta ? M : K,
 * then B's, row width tb ? K : N; lda/ldb > row width is what the strided
 * pack loop is for), then one cublasGemmEx with CUDA_R_16BF A and B, CUDA_R_32F C,
 * CUBLAS_COMPUTE_32F and CUBLAS_GEMM_DEFAULT (cuBLAS library documentation,
 * "cublasGemmEx": that type combination is in its table of supported
 * configurations; tensor cores where the device has them, products of two
 * bf16 numbers exact and sums in fp32). Row-major as column-major with the
 * operands swapped, as cu_gemm in cuda_ops.cu. Alignment: the A copy starts
 * at scratch (a pool allocation, 256-byte aligned), the B copy
 * dq_bf16_b_offset(M, K) elements later (M K rounded up to a multiple of
 * 8): both 16-byte aligned, so cuBLAS can pick its kernels with vector
 * loads.
 *
 * What runs where: everything on the GPU, on ctx->stream (cuBLAS is bound
 * to it), asynchronously; nothing here synchronises. Deterministic: the
 * conversions are per element, the GEMM is cuBLAS's with a fixed workspace.
 */
#include "cuda_common.cuh"

#include "../bf16.h"

/* ------------------------------------------------------------ conversion */

__global__ void to_bf16_kernel(uint16_t *dst, const float *src, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	dst[i] = dq_bf16_bits(src[i]);
}

__global__ void from_bf16_kernel(float *dst, const uint16_t *src, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	dst[i] = dq_bf16_float(src[i]);
}

/* dst(n) = bf16(src(n)) widened; dst may be src (round_bf16). */
__global__ void round_bf16_kernel(float *dst, const float *src, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	dst[i] = dq_bf16_round(src[i]);
}

/* One matrix of pack2_bf16_kernel: dst(rows, cols) packed = bf16(src
 * (rows, cols) with row stride ld); n = rows cols. */
struct bf16_pack {
	uint16_t *dst;
	const float *src;
	size_t n;
	int cols, ld;
};

/* gemm_bf16's two operand conversions in one launch: blockIdx.y 0 packs
 * a, 1 packs b. The column advances with the grid stride (as
 * bias_forward in cuda_ops.cu) instead of a 64-bit division per element;
 * writes coalesce. A contiguous source (ld = cols) is the same loop. */
__global__ void pack2_bf16_kernel(struct bf16_pack a, struct bf16_pack b)
{
	const struct bf16_pack j = blockIdx.y ? b : a;
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	if (i >= j.n)
		return;
	const size_t w = (size_t)j.cols;
	size_t row = i / w, col = i - row * w;
	const size_t drow = stride / w, dcol = stride - drow * w;
	for (; i < j.n; i += stride) {
		j.dst[i] = dq_bf16_bits(j.src[row * (size_t)j.ld + col]);
		row += drow;
		col += dcol;
		if (col >= w) {
			col -= w;
			row++;
		}
	}
}

void cu_to_bf16(void *ctx, uint16_t *dst, const void *src, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	to_bf16_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
			 c->stream>>>(dst, (const float *)src, n);
	cuda_check_launch();
}

void cu_from_bf16(void *ctx, void *dst, const uint16_t *src, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	from_bf16_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
			   c->stream>>>((float *)dst, src, n);
	cuda_check_launch();
}

void cu_round_bf16_to(void *ctx, float *dst, const float *src, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	round_bf16_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
			    c->stream>>>(dst, src, n);
	cuda_check_launch();
}

void cu_round_bf16(void *ctx, void *x, size_t n)
{
	cu_round_bf16_to(ctx, (float *)x, (const float *)x, n);
}

/* a and b (each the stored (rows, cols) matrix src with row stride ld)
 * into their packed bf16 copies, one launch: x covers the larger, y picks
 * the matrix. rows, cols > 0. */
static void pack2_bf16(struct dq_cuda_ctx *c, struct bf16_pack a,
		       struct bf16_pack b)
{
	const size_t n = a.n > b.n ? a.n : b.n;
	dim3 grid(dq_grid_1d(c, n, DQ_CU_THREADS), 2, 1);
	pack2_bf16_kernel<<<grid, DQ_CU_THREADS, 0, c->stream>>>(a, b);
	cuda_check_launch();
}

/* ------------------------------------------------------------------ gemm */

/* C(M,N) = alpha op(bf16(A)) op(bf16(B)) + beta C (see the top of the
 * file): both operands packed into scratch in bf16, then
 * cu_gemm_bf16_arrays. With no operands to round (M, N or K 0) that is all
 * it does, and scratch is not touched. */
void cu_gemm_bf16(void *ctx, int ta, int tb, int M, int N, int K, double alpha,
		  const void *A, int lda, const void *B, int ldb, double beta,
		  void *C, int ldc, void *scratch)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (M <= 0 || N <= 0 || K <= 0) { /* A, B unread (cu_gemm, K 0) */
		cu_gemm_bf16_arrays(
		    ctx, ta, tb, M, N, K, alpha, (const uint16_t *)A, lda,
		    (const uint16_t *)B, ldb, beta, C, ldc, NULL);
		return;
	}
	/* the stored shapes: A (K,M) or (M,K), B (N,K) or (K,N) */
	const int wa = ta ? M : K, wb = tb ? K : N;
	uint16_t *a16 = (uint16_t *)scratch;
	uint16_t *b16 = a16 + dq_bf16_b_offset(M, K);
	const int ra = ta ? K : M, rb = tb ? N : K;
	const struct bf16_pack pa = {a16, (const float *)A,
				     (size_t)ra * (size_t)wa, wa, lda};
	const struct bf16_pack pb = {b16, (const float *)B,
				     (size_t)rb * (size_t)wb, wb, ldb};
	pack2_bf16(c, pa, pb);
	cu_gemm_bf16_arrays(ctx, ta, tb, M, N, K, alpha, a16, wa, b16, wb, beta,
			    C, ldc, NULL);
}

/* C(M,N) = alpha op(A) op(B) + beta C on bf16 arrays A, B: one
 * cublasGemmEx (row-major as column-major, operands swapped). K == 0 has
 * no products: C = beta C exactly as the fp32 gemm computes it
 * (cu_gemm). */
void cu_gemm_bf16_arrays(void *ctx, int ta, int tb, int M, int N, int K,
			 double alpha, const uint16_t *A, int lda,
			 const uint16_t *B, int ldb, double beta, void *C,
			 int ldc, void *scratch)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	(void)scratch;
	if (M <= 0 || N <= 0)
		return;
	if (K <= 0) {
		cu_gemm(ctx, ta, tb, M, N, 0, alpha, A, lda, B, ldb, beta, C,
			ldc);
		return;
	}
	float al = (float)alpha, be = (float)beta;
	cublas_check(cublasGemmEx(c->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
				  ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &al,
				  B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &be,
				  C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
				  CUBLAS_GEMM_DEFAULT));
}

/* C = alpha op(bf16(A)) op(B) + beta C with B a bf16 array already (the
 * weight cast cache): A packed into scratch in bf16 (pack2_bf16 with an
 * empty second matrix), then cu_gemm_bf16_arrays: the same bf16 operands,
 * so the same bits as cu_gemm_bf16 of A and the widened B. */
void cu_gemm_bf16_mixed(void *ctx, int ta, int tb, int M, int N, int K,
			double alpha, const void *A, int lda, const uint16_t *B,
			int ldb, double beta, void *C, int ldc, void *scratch)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (M <= 0 || N <= 0 || K <= 0) {
		cu_gemm_bf16_arrays(ctx, ta, tb, M, N, K, alpha,
				    (const uint16_t *)A, lda, B, ldb, beta, C,
				    ldc, NULL);
		return;
	}
	const int wa = ta ? M : K, ra = ta ? K : M;
	uint16_t *a16 = (uint16_t *)scratch;
	const struct bf16_pack pa = {a16, (const float *)A,
				     (size_t)ra * (size_t)wa, wa, lda};
	const struct bf16_pack none = {NULL, NULL, 0, 1, 1};
	pack2_bf16(c, pa, none);
	cu_gemm_bf16_arrays(ctx, ta, tb, M, N, K, alpha, a16, wa, B, ldb, beta,
			    C, ldc, NULL);
}
