/* cuda_fused_solve.cu — the CUDA backend's fused Broyden and Anderson
 * iterations
 * (kernels/solve_fused.h gives the arithmetic, kernels/backend.h the
 * contracts): two launches an evaluation of F, with no host read, so that
 * the iteration can be the body of a WHILE loop in a graph.
 *
 *   fused_measure  one block per chunk of DQ_FUSED_CHUNK elements of a
 *                  segment: g_new and Δg written, the chunk's partials
 *                  (4 + 3 per act pair) in double by fixed-order block
 *                  sums; the last block to finish (a counter in the
 *                  control block, threadfence reduction) sums each
 *                  sample's partials in solve_fused.h's order, runs
 *                  dq_ctl_check and dq_fu_decide, and resets the counter.
 *   fused_apply    one block per chunk: the sample's act coefficients in
 *                  shared memory, each element's three sums over the act
 *                  pairs, the pair into its slot, the step.
 *   fused_anderson_measure, fused_anderson_apply: Anderson's the same way
 *                  (X's and G's slot written, the Gram row; the mix).
 *
 * Determinism: every sum has a fixed order; the same bits run to run.
 * Against the CPU twin (cpu_solve.c) only the order inside a chunk
 * differs.
 */
#include "cuda_common.cuh"

#include <assert.h>
#include <limits.h>

#include "../solve_fused.h"

#define FU_THREADS 256
#define FU_WARPS   (FU_THREADS / 32)

/* v[0..K) summed over the block into thread 0's v (warp shuffles, then the
 * warps in order); sh holds K FU_WARPS doubles. */
template <int K> __device__ void block_sums(double (&v)[K], double *sh)
{
	const int w = threadIdx.x / 32, l = threadIdx.x % 32;
#pragma unroll
	for (int k = 0; k < K; k++)
		for (int o = 16; o > 0; o >>= 1)
			v[k] += __shfl_down_sync(0xffffffffu, v[k], o);
	__syncthreads(); /* sh's last use is over */
	if (l == 0)
#pragma unroll
		for (int k = 0; k < K; k++)
			sh[k * FU_WARPS + w] = v[k];
	__syncthreads();
	if (threadIdx.x == 0)
#pragma unroll
		for (int k = 0; k < K; k++) {
			double r = 0;
			for (int i = 0; i < FU_WARPS; i++)
				r += sh[k * FU_WARPS + i];
			v[k] = r;
		}
}

/* The chunk of block b: segment, chunk, element range. */
struct fu_chunk {
	long seg, ch;
	size_t i0, i1;
};

__device__ fu_chunk chunk_of(const dq_solve_ctl &c, size_t len)
{
	fu_chunk r;
	r.seg = (long)blockIdx.x / c.nchunk;
	r.ch = (long)blockIdx.x % c.nchunk;
	r.i0 = (size_t)r.seg * len + (size_t)r.ch * DQ_FUSED_CHUNK;
	size_t end = (size_t)(r.seg + 1) * len;
	r.i1 = r.i0 + DQ_FUSED_CHUNK < end ? r.i0 + DQ_FUSED_CHUNK : end;
	return r;
}

/* The ring's header as this launch found it, in registers: read before
 * the block's first barrier, so before any block counts itself in and the
 * last one decides (which changes it). */
struct fu_head {
	int nu, old, slot; /* DQ_FU_NU, DQ_FU_OLD, DQ_FU_SLOT */
};

__device__ fu_head head_of(const dq_solve_ctl &c)
{
	const double *fh = c.st + c.o_fused;
	return fu_head{(int)fh[DQ_FU_NU], (int)fh[DQ_FU_OLD],
		       (int)fh[DQ_FU_SLOT]};
}

/* Whether quantity q of the per-sample numbers is one this measure
 * formed (the others were not written this launch). */
__device__ int q_formed(const dq_solve_ctl &c, fu_head hd, int q, int anderson)
{
	if (anderson)
		return q < DQ_FA_ROW ||
		       (q - DQ_FA_ROW < c.ma &&
			dq_fa_act_in(hd.nu, hd.slot, q - DQ_FA_ROW));
	return q < DQ_FQ_A ||
	       (q - DQ_FQ_A < 3 * c.hb &&
		dq_fu_act_in(hd.nu, hd.old, c.hb, (q - DQ_FQ_A) % c.hb));
}

/* The last block: each sample's quantities from every block's partials
 * (read past L1: other blocks wrote them), then the decisions (Broyden's
 * or, anderson, Anderson's). */
__device__ __noinline__ void measure_finish(const dq_solve_ctl &c, fu_head hd,
					    int anderson)
{
	const int nq = dq_fu_nq(&c);
	for (int idx = threadIdx.x; idx < c.S * nq; idx += FU_THREADS) {
		int k = idx / nq, q = idx % nq;
		if (!q_formed(c, hd, q, anderson))
			continue;
		double s = 0;
		for (long p = 0; p < c.P; p++)
			for (long ch = 0; ch < c.nchunk; ch++)
				s +=
				    __ldcg(dq_fu_part(&c, p * c.S + k, ch) + q);
		dq_fu_q(&c, k)[q] = s;
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		if (anderson)
			dq_fa_decide(&c);
		else
			dq_fu_decide(&c);
		*(unsigned long long *)(c.st + c.o_fused + DQ_FU_ARRIVE) = 0;
	}
}

/* Counts this block in; 1 in the last one (after a fence, so that the
 * other blocks' partials are visible to it). */
__device__ int arrive_last(const dq_solve_ctl &c, int *last)
{
	__syncthreads(); /* every warp of the block is done */
	__threadfence();
	if (threadIdx.x == 0) {
		unsigned long long *arrive =
		    (unsigned long long *)(c.st + c.o_fused + DQ_FU_ARRIVE);
		*last = atomicAdd(arrive, 1ull) ==
			(unsigned long long)gridDim.x - 1;
	}
	__syncthreads();
	if (!*last)
		return 0;
	__threadfence();
	return 1;
}

__global__ void __launch_bounds__(FU_THREADS)
    fused_measure_kernel(dq_solve_ctl c, const float *fx, const float *x,
			 float *g, const float *dx, float *dg, const float *U,
			 const float *V, size_t len)
{
	__shared__ double sh[4 * FU_WARPS];
	__shared__ int last;
	const fu_chunk r = chunk_of(c, len);
	const size_t n = (size_t)c.S * (size_t)c.P * len;
	const int hb = c.hb;
	const fu_head hd = head_of(c);
	double v[4] = {0, 0, 0, 0};
	/* each thread's elements: written here, read back by the same
	 * thread in the pairs' loop (cache hits; registers would cap the
	 * blocks an SM holds) */
	for (size_t i = r.i0 + threadIdx.x; i < r.i1; i += FU_THREADS) {
		float f = fx[i], gn = f - x[i], d = gn - g[i], t = dx[i];
		g[i] = gn;
		dg[i] = d;
		v[DQ_FQ_GG] += (double)gn * gn;
		v[DQ_FQ_FF] += (double)f * f;
		v[DQ_FQ_DD] += (double)t * d;
		v[DQ_FQ_DGN] += (double)t * gn;
	}
	block_sums<4>(v, sh);
	double *pt = dq_fu_part(&c, r.seg, r.ch);
	if (threadIdx.x == 0)
		for (int q = 0; q < 4; q++)
			pt[q] = v[q];
	for (int j = 0; j < hb; j++) {
		if (!dq_fu_act_in(hd.nu, hd.old, hb, j))
			continue; /* the same for the whole grid */
		const float *Uj = U + (size_t)j * n, *Vj = V + (size_t)j * n;
		double w[3] = {0, 0, 0};
		for (size_t i = r.i0 + threadIdx.x; i < r.i1; i += FU_THREADS) {
			double u = Uj[i], vv = Vj[i];
			w[0] += u * dx[i];
			w[1] += vv * dg[i];
			w[2] += vv * g[i];
		}
		block_sums<3>(w, sh);
		if (threadIdx.x == 0) {
			pt[DQ_FQ_A + j] = w[0];
			pt[DQ_FQ_A + hb + j] = w[1];
			pt[DQ_FQ_A + 2 * hb + j] = w[2];
		}
	}
	if (arrive_last(c, &last))
		measure_finish(c, hd, 0);
}

__global__ void __launch_bounds__(FU_THREADS)
    fused_apply_kernel(dq_solve_ctl c, float *x, float *dx, const float *g,
		       const float *dg, float *U, float *V, float *best,
		       size_t len)
{
	__shared__ double co[3 * DQ_FUSED_MAX_H];
	__shared__ int js[DQ_FUSED_MAX_H];
	__shared__ int nj;
	const fu_chunk r = chunk_of(c, len);
	const int k = (int)(r.seg % c.S), hb = c.hb;
	const size_t n = (size_t)c.S * (size_t)c.P * len;
	const double *st = c.st, *fh = st + c.o_fused;
	if (st[c.o_imp + k] != 0)
		for (size_t i = r.i0 + threadIdx.x; i < r.i1; i += FU_THREADS)
			best[i] = x[i];
	if (st[DQ_CTL_GO] == 0)
		return;
	if (threadIdx.x == 0) {
		int m = 0;
		for (int j = 0; j < hb; j++)
			if (dq_fu_act(fh, j))
				js[m++] = j;
		nj = m;
	}
	__syncthreads();
	const double *q = dq_fu_q(&c, k) + DQ_FQ_A;
	for (int a = threadIdx.x; a < nj; a += FU_THREADS) {
		co[a] = q[js[a]];
		co[DQ_FUSED_MAX_H + a] = q[hb + js[a]];
		co[2 * DQ_FUSED_MAX_H + a] = q[2 * hb + js[a]];
	}
	__syncthreads();
	const int pair = fh[DQ_FU_PAIR] != 0;
	const int frozen = c.per_sample && st[c.o_done + k] != 0;
	const double rr = dq_fu_rc(&c, k)[0], vg = dq_fu_rc(&c, k)[1];
	float *Us = U + (size_t)fh[DQ_FU_SLOT] * n;
	float *Vs = V + (size_t)fh[DQ_FU_SLOT] * n;
	for (size_t i = r.i0 + threadIdx.x; i < r.i1; i += FU_THREADS) {
		double sa = 0, sb = 0, sc = 0;
		for (int a = 0; a < nj; a++) {
			size_t o = (size_t)js[a] * n + i;
			double u = U[o], vv = V[o];
			sa += co[a] * vv;
			sb += co[DQ_FUSED_MAX_H + a] * u;
			sc += co[2 * DQ_FUSED_MAX_H + a] * u;
		}
		double step = (double)g[i] - sc;
		if (pair) {
			double u = rr * ((double)dx[i] + dg[i] - sb);
			Vs[i] = (float)(-(double)dx[i] + sa);
			Us[i] = (float)u;
			step -= vg * u;
		}
		float d = frozen ? 0.0f : (float)step;
		dx[i] = d;
		x[i] += d;
	}
}

/* ---- Anderson (solve_fused.h) */

__global__ void __launch_bounds__(FU_THREADS)
    fused_anderson_measure_kernel(dq_solve_ctl c, const float *fx,
				  const float *xn, float *X, float *G,
				  size_t len)
{
	__shared__ double sh[2 * FU_WARPS];
	__shared__ int last;
	const fu_chunk r = chunk_of(c, len);
	const size_t n = (size_t)c.S * (size_t)c.P * len;
	const fu_head hd = head_of(c);
	const size_t so = (size_t)hd.slot * n;
	const float *Gs = G + so;
	double v[2] = {0, 0};
	for (size_t i = r.i0 + threadIdx.x; i < r.i1; i += FU_THREADS) {
		float f = fx[i], x = xn[i], gn = f - x;
		X[so + i] = x;
		G[so + i] = gn;
		v[DQ_FQ_GG] += (double)gn * gn;
		v[DQ_FQ_FF] += (double)f * f;
	}
	block_sums<2>(v, sh);
	double *pt = dq_fu_part(&c, r.seg, r.ch);
	if (threadIdx.x == 0) {
		pt[DQ_FQ_GG] = v[DQ_FQ_GG];
		pt[DQ_FQ_FF] = v[DQ_FQ_FF];
	}
	for (int j = 0; j < c.ma; j++) {
		if (!dq_fa_act_in(hd.nu, hd.slot, j))
			continue; /* the same for the whole grid */
		const float *Gj = G + (size_t)j * n;
		double w[1] = {0};
		for (size_t i = r.i0 + threadIdx.x; i < r.i1; i += FU_THREADS)
			w[0] += (double)Gs[i] * Gj[i];
		block_sums<1>(w, sh);
		if (threadIdx.x == 0)
			pt[DQ_FA_ROW + j] = w[0];
	}
	if (arrive_last(c, &last))
		measure_finish(c, hd, 1);
}

__global__ void __launch_bounds__(FU_THREADS)
    fused_anderson_apply_kernel(dq_solve_ctl c, float *xn, const float *X,
				const float *G, float *best, size_t len)
{
	__shared__ double al[DQ_FUSED_MAX_H];
	const fu_chunk r = chunk_of(c, len);
	const int k = (int)(r.seg % c.S);
	const size_t n = (size_t)c.S * (size_t)c.P * len;
	const double *st = c.st;
	if (st[c.o_imp + k] != 0)
		for (size_t i = r.i0 + threadIdx.x; i < r.i1; i += FU_THREADS)
			best[i] = xn[i];
	if (st[DQ_CTL_GO] == 0 || (c.per_sample && st[c.o_done + k] != 0))
		return; /* the whole block: stopped, or a frozen sample */
	const int nact = (int)st[c.o_fused + DQ_FU_NU];
	const double *q = dq_fu_q(&c, k) + DQ_FA_ROW;
	for (int a = threadIdx.x; a < nact; a += FU_THREADS)
		al[a] = q[a];
	__syncthreads();
	for (size_t i = r.i0 + threadIdx.x; i < r.i1; i += FU_THREADS) {
		double v = 0;
		for (int j = 0; j < nact; j++)
			v += al[j] * ((double)X[(size_t)j * n + i] +
				      c.beta * G[(size_t)j * n + i]);
		xn[i] = (float)v;
	}
}

void cu_fused_anderson_measure(void *ctx, const struct dq_solve_ctl *c,
			       const void *fx, const void *xn, void *X, void *G,
			       size_t len)
{
	struct dq_cuda_ctx *cc = dq_cu(ctx);
	long nb = (long)c->S * c->P * c->nchunk;
	assert(nb >= 1 && nb <= INT_MAX); /* one block a chunk */
	fused_anderson_measure_kernel<<<(unsigned)nb, FU_THREADS, 0,
					cc->stream>>>(
	    *c, (const float *)fx, (const float *)xn, (float *)X, (float *)G,
	    len);
	cuda_check_launch();
}

void cu_fused_anderson_apply(void *ctx, const struct dq_solve_ctl *c, void *xn,
			     const void *X, const void *G, void *best,
			     size_t len)
{
	struct dq_cuda_ctx *cc = dq_cu(ctx);
	long nb = (long)c->S * c->P * c->nchunk;
	assert(nb >= 1 && nb <= INT_MAX); /* one block a chunk */
	fused_anderson_apply_kernel<<<(unsigned)nb, FU_THREADS, 0,
				      cc->stream>>>(
	    *c, (float *)xn, (const float *)X, (const float *)G, (float *)best,
	    len);
	cuda_check_launch();
}

void cu_fused_measure(void *ctx, const struct dq_solve_ctl *c, const void *fx,
		      const void *x, void *g, const void *dx, void *dg,
		      const void *U, const void *V, size_t len)
{
	struct dq_cuda_ctx *cc = dq_cu(ctx);
	long nb = (long)c->S * c->P * c->nchunk;
	assert(nb >= 1 && nb <= INT_MAX); /* one block a chunk */
	fused_measure_kernel<<<(unsigned)nb, FU_THREADS, 0, cc->stream>>>(
	    *c, (const float *)fx, (const float *)x, (float *)g,
	    (const float *)dx, (float *)dg, (const float *)U, (const float *)V,
	    len);
	cuda_check_launch();
}

void cu_fused_apply(void *ctx, const struct dq_solve_ctl *c, void *x, void *dx,
		    const void *g, const void *dg, void *U, void *V, void *best,
		    size_t len)
{
	struct dq_cuda_ctx *cc = dq_cu(ctx);
	long nb = (long)c->S * c->P * c->nchunk;
	assert(nb >= 1 && nb <= INT_MAX); /* one block a chunk */
	fused_apply_kernel<<<(unsigned)nb, FU_THREADS, 0, cc->stream>>>(
	    *c, (float *)x, (float *)dx, (const float *)g, (const float *)dg,
	    (float *)U, (float *)V, (float *)best, len);
	cuda_check_launch();
}
