/* cuda_solve.cu — the CUDA backend's solver-control ops: the decisions of
 * kernels/solve_ctl.h on the device, so that a fixed-point solve
 * (methods/solvers.c) never brings a number back between its reads of
 * the stop decision. None of these ops synchronises.
 *
 *   solve_check       dq_ctl_check, one thread (S is a batch: tens)
 *   anderson_weights  one thread per sample: its Gram row and column, its
 *                     bordered solve (dq_ctl_anderson) in double
 *   copy_masked       element-wise, the sample of each element from its
 *                     segment index
 *   scale_recip       element-wise, 1 / Σ_p of the sample's segment dots
 *
 * Determinism: every thread's arithmetic is fixed; the same bits run to
 * run. The per-sample arithmetic is solve_ctl.h's, as on the CPU.
 */
#include "cuda_common.cuh"

#include "../solve_ctl.h"

__global__ void solve_check_kernel(struct dq_solve_ctl c)
{
	if (blockIdx.x == 0 && threadIdx.x == 0)
		dq_ctl_check(&c);
}

void cu_solve_check(void *ctx, const struct dq_solve_ctl *c)
{
	struct dq_cuda_ctx *cc = dq_cu(ctx);
	solve_check_kernel<<<1, 32, 0, cc->stream>>>(*c);
	cuda_check_launch();
}

/* Sample k = (i / len) % S of element i. */
__global__ void copy_masked_kernel(float *dst, const float *src,
				   const double *flag, int S, size_t len,
				   size_t n)
{
	DQ_GRID_STRIDE(i, n)
	{
		size_t k = (i / len) % (size_t)S;
		if (flag[k] != 0)
			dst[i] = src ? src[i] : 0.0f;
	}
}

void cu_copy_masked(void *ctx, void *dst, const void *src, const double *flag,
		    int S, int P, size_t len)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	size_t n = (size_t)S * (size_t)P * len;
	if (!n)
		return;
	copy_masked_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
			     c->stream>>>((float *)dst, (const float *)src,
					  flag, S, len, n);
	cuda_check_launch();
}

/* The reciprocal of sample k's summed dots, 0 when not usable (solve_ctl
 * order: segment 0 first). */
__device__ float recip_of(const double *seg, int S, int P, size_t k)
{
	double d = seg[k];
	for (int p = 1; p < P; p++)
		d += seg[(size_t)p * (size_t)S + k];
	int ok = d != 0 && isfinite(d) && isfinite(1.0 / d);
	return ok ? (float)(1.0 / d) : 0.0f;
}

__global__ void scale_recip_kernel(float *dst, const float *src,
				   const double *seg, int S, int P, size_t len,
				   size_t n)
{
	DQ_GRID_STRIDE(i, n)
	{
		size_t k = (i / len) % (size_t)S;
		dst[i] = recip_of(seg, S, P, k) * src[i];
	}
}

void cu_scale_recip(void *ctx, void *dst, const void *src, const double *seg,
		    int S, int P, size_t len)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	size_t n = (size_t)S * (size_t)P * len;
	if (!n)
		return;
	scale_recip_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
			     c->stream>>>((float *)dst, (const float *)src, seg,
					  S, P, len, n);
	cuda_check_launch();
}

/* Thread k: sample k's Gram row and column from row (S, nact), its weights
 * into alpha (may alias row: sample k reads its row before writing). */
__global__ void anderson_weights_kernel(struct dq_solve_ctl c, const float *row,
					float *alpha, int slot, int nact,
					double lambda)
{
	int k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k >= c.S)
		return;
	for (int j = 0; j < nact; j++)
		dq_ctl_gram_put(&c, k, slot, j,
				(double)row[(size_t)k * (size_t)nact + j]);
	const double *a = dq_ctl_anderson(&c, k, nact, lambda);
	for (int j = 0; j < nact; j++)
		alpha[(size_t)k * (size_t)nact + j] = (float)a[j];
}

void cu_anderson_weights(void *ctx, const struct dq_solve_ctl *c,
			 const void *row, void *alpha, int slot, int nact,
			 double lambda)
{
	struct dq_cuda_ctx *cc = dq_cu(ctx);
	if (c->S <= 0)
		return;
	int threads = 64, blocks = (c->S + threads - 1) / threads;
	anderson_weights_kernel<<<blocks, threads, 0, cc->stream>>>(
	    *c, (const float *)row, (float *)alpha, slot, nact, lambda);
	cuda_check_launch();
}
