/* cpu_bf16.c — bf16 mixed precision on the CPU (kernels/backend.h, "bf16
 * mixed precision"; the rounding rule in kernels/bf16.h), compiled for
 * both instantiations like cpu_backend.c.
 *
 * gemm_bf16 rounds op(A) and op(B) into scratch, in the backend type, and
 * multiplies the rounded values with the backend's GEMM (SGEMM, DGEMM).
 * A product of two bf16 numbers (8-bit significands) is exact in float32,
 * so SGEMM on them computes what a tensor core computes from the bf16
 * arrays, up to the order of its fp32 sums. Debian 12's OpenBLAS declares
 * cblas_sbgemm but is built without it, hence the widened copies. cpu64
 * rounds each double to float32 first, then to bf16. */
#ifndef DQ_REAL
#error "compile with -DDQ_REAL=float|double -DDQ_SFX=f|d"
#endif

#include <cblas.h>
#include <stdint.h>

#include "../backend.h"
#include "../bf16.h"
#include "../elementwise.h"
#include "cpu_ctx.h"

typedef DQ_REAL real;

#define DQ_GEMM_f cblas_sgemm
#define DQ_GEMM_d cblas_dgemm
#define DQ_GEMM	  DQ_CAT(DQ_GEMM_, DQ_SFX)

void DQ_FN(dq_cpu_to_bf16_)(void *ctx, uint16_t *dst, const void *src, size_t n)
{
	const real *s = src;
	(void)ctx;
	PAR_EACH(n, dst[i] = dq_bf16_bits((float)s[i]));
}

void DQ_FN(dq_cpu_from_bf16_)(void *ctx, void *dst, const uint16_t *src,
			      size_t n)
{
	real *d = dst;
	(void)ctx;
	PAR_EACH(n, d[i] = (real)dq_bf16_float(src[i]));
}

void DQ_FN(dq_cpu_round_bf16_)(void *ctx, void *x, size_t n)
{
	real *v = x;
	(void)ctx;
	PAR_EACH(n, v[i] = (real)dq_bf16_round((float)v[i]));
}

/* dst (rows, cols) packed = bf16-rounded src (rows, cols) of row stride
 * ld. */
static void round_pack(real *dst, const real *src, int rows, int cols, int ld)
{
#pragma omp parallel for if ((long long)rows * cols >= PAR_MIN_N)
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++)
			dst[(size_t)r * cols + c] =
			    (real)dq_bf16_round((float)src[(size_t)r * ld + c]);
}

/* dst (rows, cols) packed = the bf16 src (rows, cols) of row stride ld,
 * widened. */
static void widen_pack(real *dst, const uint16_t *src, int rows, int cols,
		       int ld)
{
#pragma omp parallel for if ((long long)rows * cols >= PAR_MIN_N)
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < cols; c++)
			dst[(size_t)r * cols + c] =
			    (real)dq_bf16_float(src[(size_t)r * ld + c]);
}

/* dst (rows, cols) packed = src (rows, cols) of row stride ld in bf16:
 * the backend type's values rounded (round_pack), or bf16 bits widened
 * (widen_pack). */
static void pack(real *dst, const void *src, int bf16_in, int rows, int cols,
		 int ld)
{
	if (bf16_in)
		widen_pack(dst, src, rows, cols, ld);
	else
		round_pack(dst, src, rows, cols, ld);
}

/* C = alpha op(A) op(B) + beta C on A and B packed into scratch in bf16
 * (pack: a16 and b16 say whether each is a bf16 array already), then the
 * backend's GEMM of the packed values. */
static void gemm_packed(int ta, int tb, int M, int N, int K, double alpha,
			const void *A, int lda, const void *B, int ldb,
			double beta, void *C, int ldc, void *scratch, int a16,
			int b16)
{
	if (M <= 0 || N <= 0)
		return;
	/* stored shapes: A (M,K) or, transposed, (K,M); B (K,N) or (N,K) */
	int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
	real *a = scratch, *b = a + dq_bf16_b_offset(M, K);
	pack(a, A, a16, ar, ac, lda);
	pack(b, B, b16, br, bc, ldb);
	DQ_GEMM(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
		tb ? CblasTrans : CblasNoTrans, M, N, K, (real)alpha, a,
		ac > 1 ? ac : 1, b, bc > 1 ? bc : 1, (real)beta, (real *)C,
		ldc);
}

void DQ_FN(dq_cpu_gemm_bf16_)(void *ctx, int ta, int tb, int M, int N, int K,
			      double alpha, const void *A, int lda,
			      const void *B, int ldb, double beta, void *C,
			      int ldc, void *scratch)
{
	(void)ctx;
	gemm_packed(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
		    scratch, 0, 0);
}

void DQ_FN(dq_cpu_gemm_bf16_arrays_)(void *ctx, int ta, int tb, int M, int N,
				     int K, double alpha, const uint16_t *A,
				     int lda, const uint16_t *B, int ldb,
				     double beta, void *C, int ldc,
				     void *scratch)
{
	(void)ctx;
	gemm_packed(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
		    scratch, 1, 1);
}

void DQ_FN(dq_cpu_gemm_bf16_mixed_)(void *ctx, int ta, int tb, int M, int N,
				    int K, double alpha, const void *A, int lda,
				    const uint16_t *B, int ldb, double beta,
				    void *C, int ldc, void *scratch)
{
	(void)ctx;
	gemm_packed(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc,
		    scratch, 0, 1);
}
