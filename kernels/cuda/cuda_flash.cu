/* cuda_flash.cu — the fused causal attention of attention=flash on the GPU
 * (kernels/backend.h, attention_flash_forward and _backward):
 * FlashAttention-2 (Dao 2023, Algorithms 1 and 2) as SIMT kernels in the
 * blocking of its CPU twin, kernels/cpu/cpu_flash.c, whose header gives
 * the math. Nothing of size T² touches global memory: the forward keeps
 * each query row's max m, sum l and output o in registers across the key
 * blocks and writes out and lse (hi, lo); the backward recomputes P from
 * lse block by block.
 *
 * Every block is 256 threads = 8 warps on 32×32 tiles in shared memory
 * (rows padded to 33 floats); thread (tx = lane, ty = warp) owns the rows
 * ty + 8 j (j < 4) of a tile at column tx, and, for the outputs, columns
 * 32 c + tx of those rows for the head's 32-column chunks c < 4 (dh at
 * most DQ_FLASH_MAX_DH = 128), in registers.
 *   flash_forward_kernel  grid (B H, ⌈T/32⌉) query tiles: per key tile at
 *     or below the diagonal, the scores (tile by tile over dh), the
 *     online-softmax update (a warp's lanes hold one row: warp max and
 *     sum), P into shared memory (bf16: rounded), o = α o + P v.
 *   flash_d_kernel  a warp per row: D = rowsum(dO ∘ out).
 *   flash_dq_kernel  grid (B H, ⌈T/32⌉) query tiles: per key tile, the
 *     scores and dP = dO vᵀ, G = scale P (dP − D) (bf16: rounded) into
 *     shared memory, dq += G k.
 *   flash_dkv_kernel  grid (B H, ⌈T/32⌉) key tiles: per query tile at or
 *     below it, the same G and P, dk += Gᵀ q, dv += Pᵀ dO.
 * No atomics: each output element is written by one thread, so results are
 * deterministic; dq and dk/dv recompute the scores once each (FA2 adds dq
 * atomically instead). Under bf16 dout is read through its rounded copy in
 * ws. Shared memory: 12.4 KiB (forward, dq), 16.5 KiB (dk/dv). The chunk
 * loops are unrolled to FA_CHUNKS with a block-uniform guard, so the
 * accumulators stay in registers. */
#include "cuda_common.cuh"

#include "../bf16.h"

#define FA_TILE	   32
#define FA_THREADS 256
#define FA_CHUNKS  (DQ_FLASH_MAX_DH / FA_TILE)

typedef float fa_tile[FA_TILE][FA_TILE + 1];

/* The (b, h) pair and tile of a block: x = b H + h, y = 32-row tile. */
struct fa_block {
	int dh, r0;
	size_t C3, qoff, ooff, row0; /* qkv head, out head, (b,h) row 0 */
};

__device__ __forceinline__ struct fa_block fa_block_of(int T, int C, int H)
{
	struct fa_block a;
	const int bh = blockIdx.x, b = bh / H, h = bh % H;
	a.dh = C / H;
	a.r0 = blockIdx.y * FA_TILE;
	a.C3 = 3 * (size_t)C;
	a.qoff = (size_t)b * T * a.C3 + (size_t)h * a.dh;
	a.ooff = (size_t)b * T * C + (size_t)h * a.dh;
	a.row0 = (size_t)bh * T;
	return a;
}

/* dst = rows r0.. (32) and columns i0.. (32) of x (row stride ld, n rows,
 * w columns), zero outside. */
__device__ __forceinline__ void fa_load(fa_tile dst, const float *x, size_t ld,
					int r0, int n, int i0, int w)
{
	for (int e = threadIdx.x; e < FA_TILE * FA_TILE; e += FA_THREADS) {
		int r = e >> 5, c = e & 31;
		dst[r][c] = (r0 + r < n && i0 + c < w)
				? x[(size_t)(r0 + r) * ld + i0 + c]
				: 0.0f;
	}
}

/* acc[j] = Σ_i a[ra + ty + 8j][i] b[rb + tx][i] over the head's dh
 * columns, a and b row-major (strides lda, ldb, T rows). */
__device__ __forceinline__ void fa_dots(float acc[4], fa_tile sa, fa_tile sb,
					const float *a, size_t lda, int ra,
					const float *b, size_t ldb, int rb,
					int T, int dh)
{
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	for (int j = 0; j < 4; j++)
		acc[j] = 0.0f;
	for (int i0 = 0; i0 < dh; i0 += FA_TILE) {
		__syncthreads();
		fa_load(sa, a, lda, ra, T, i0, dh);
		fa_load(sb, b, ldb, rb, T, i0, dh);
		__syncthreads();
		for (int kk = 0; kk < FA_TILE; kk++) {
			float bv = sb[tx][kk];
			for (int j = 0; j < 4; j++)
				acc[j] += sa[ty + 8 * j][kk] * bv;
		}
	}
}

__device__ __forceinline__ float fa_rnd(float x, int bf16)
{
	return bf16 ? dq_bf16_round(x) : x;
}

__global__ void __launch_bounds__(FA_THREADS)
    flash_forward_kernel(float *out, float *lse, const float *qkv, int T, int C,
			 int H, float scale, int bf16)
{
	__shared__ fa_tile sq, sk, sp;
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	const struct fa_block a = fa_block_of(T, C, H);
	const float *q = qkv + a.qoff, *k = q + C, *v = q + 2 * (size_t)C;
	const int last = min(T, a.r0 + FA_TILE) - 1;
	float o[FA_CHUNKS][4] = {}, m[4], l[4], acc[4];
	for (int j = 0; j < 4; j++)
		m[j] = -INFINITY, l[j] = 0.0f;
	for (int s0 = 0; s0 <= last; s0 += FA_TILE) {
		fa_dots(acc, sq, sk, q, a.C3, a.r0, k, a.C3, s0, T, a.dh);
		for (int j = 0; j < 4; j++) {
			int t = a.r0 + ty + 8 * j, s = s0 + tx;
			float x =
			    (t < T && s <= t) ? acc[j] * scale : -INFINITY;
			float mx = fmaxf(m[j], dq_warp_max_f(x));
			float p = x == -INFINITY ? 0.0f : expf(x - mx);
			float al = m[j] == -INFINITY ? 0.0f : expf(m[j] - mx);
			l[j] = al * l[j] + dq_warp_sum_f(p);
			m[j] = mx;
			sp[ty + 8 * j][tx] = fa_rnd(p, bf16);
#pragma unroll
			for (int c = 0; c < FA_CHUNKS && c < FA_CHUNKS; c++)
				o[c][j] *= al;
		}
#pragma unroll
		for (int c = 0; c < FA_CHUNKS && c * FA_TILE < a.dh; c++) {
			__syncthreads();
			fa_load(sk, v, a.C3, s0, T, c * FA_TILE, a.dh);
			__syncthreads();
			for (int kk = 0; kk < FA_TILE; kk++)
				for (int j = 0; j < 4; j++)
					o[c][j] +=
					    sp[ty + 8 * j][kk] * sk[kk][tx];
		}
		__syncthreads(); /* sp and sk are read before the next tile */
	}
	for (int j = 0; j < 4; j++) {
		int t = a.r0 + ty + 8 * j;
		if (t >= T)
			break;
#pragma unroll
		for (int c = 0; c < FA_CHUNKS && c * FA_TILE + tx < a.dh; c++)
			out[a.ooff + (size_t)t * C + c * FA_TILE + tx] =
			    o[c][j] / l[j];
		if (tx == 0) {
			float x = m[j] + logf(l[j]), hi = dq_bf16_round(x);
			lse[2 * (a.row0 + t)] = hi;
			lse[2 * (a.row0 + t) + 1] = x - hi;
		}
	}
}

/* D[r] = Σ_i dO[r][i] out[r][i] for the B H T rows, a warp per row. */
__global__ void __launch_bounds__(FA_THREADS)
    flash_d_kernel(float *D, const float *dO, const float *out, int B, int T,
		   int C, int H)
{
	const size_t r = (size_t)blockIdx.x * (FA_THREADS / 32) +
			 (threadIdx.x >> 5),
		     rows = (size_t)B * H * T;
	const int tx = threadIdx.x & 31, dh = C / H;
	if (r >= rows)
		return;
	const int t = (int)(r % T), h = (int)(r / T % H), b = (int)(r / T / H);
	const size_t off = ((size_t)b * T + t) * C + (size_t)h * dh;
	float d = 0.0f;
	for (int i = tx; i < dh; i += 32)
		d += dO[off + i] * out[off + i];
	d = dq_warp_sum_f(d);
	if (tx == 0)
		D[r] = d;
}

/* P and G of query rows t = u0 + ty + 8 j against key columns s = s0 + tx
 * (zero outside the causal triangle and the sequence), from the scores
 * and dP of fa_dots. */
__device__ __forceinline__ void fa_pg(float P[4], float G[4], const float *lse,
				      const float *D, const float x[4],
				      const float dp[4], int u0, int s0, int T,
				      float scale, int bf16)
{
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	for (int j = 0; j < 4; j++) {
		int t = u0 + ty + 8 * j, s = s0 + tx;
		P[j] = G[j] = 0.0f;
		if (t >= T || s > t)
			continue;
		float L = lse[2 * t] + lse[2 * t + 1];
		P[j] = expf(x[j] * scale - L);
		G[j] = fa_rnd(scale * P[j] * (dp[j] - D[t]), bf16);
		P[j] = fa_rnd(P[j], bf16);
	}
}

__global__ void __launch_bounds__(FA_THREADS)
    flash_dq_kernel(float *dqkv, const float *D, const float *dO,
		    const float *qkv, const float *lse, int T, int C, int H,
		    float scale, int bf16)
{
	__shared__ fa_tile sa, sb, sg;
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	const struct fa_block a = fa_block_of(T, C, H);
	const float *q = qkv + a.qoff, *k = q + C, *v = q + 2 * (size_t)C;
	const float *go = dO + a.ooff;
	const int last = min(T, a.r0 + FA_TILE) - 1;
	float dq[FA_CHUNKS][4] = {}, x[4], dp[4], P[4], G[4];
	for (int s0 = 0; s0 <= last; s0 += FA_TILE) {
		fa_dots(x, sa, sb, q, a.C3, a.r0, k, a.C3, s0, T, a.dh);
		fa_dots(dp, sa, sb, go, (size_t)C, a.r0, v, a.C3, s0, T, a.dh);
		fa_pg(P, G, lse + 2 * a.row0, D + a.row0, x, dp, a.r0, s0, T,
		      scale, bf16);
		for (int j = 0; j < 4; j++)
			sg[ty + 8 * j][tx] = G[j];
#pragma unroll
		for (int c = 0; c < FA_CHUNKS && c * FA_TILE < a.dh; c++) {
			__syncthreads();
			fa_load(sb, k, a.C3, s0, T, c * FA_TILE, a.dh);
			__syncthreads();
			for (int kk = 0; kk < FA_TILE; kk++)
				for (int j = 0; j < 4; j++)
					dq[c][j] +=
					    sg[ty + 8 * j][kk] * sb[kk][tx];
		}
		__syncthreads();
	}
	for (int j = 0; j < 4; j++) {
		int t = a.r0 + ty + 8 * j;
#pragma unroll
		for (int c = 0;
		     c < FA_CHUNKS && t < T && c * FA_TILE + tx < a.dh; c++)
			dqkv[a.qoff + (size_t)t * a.C3 + c * FA_TILE + tx] =
			    dq[c][j];
	}
}

__global__ void __launch_bounds__(FA_THREADS)
    flash_dkv_kernel(float *dqkv, const float *D, const float *dO,
		     const float *qkv, const float *lse, int T, int C, int H,
		     float scale, int bf16)
{
	__shared__ fa_tile sa, sb, sg, sp;
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	const struct fa_block a = fa_block_of(T, C, H); /* rows: keys */
	const float *q = qkv + a.qoff, *k = q + C, *v = q + 2 * (size_t)C;
	const float *go = dO + a.ooff;
	const int s0 = a.r0;
	float dk[FA_CHUNKS][4] = {}, dv[FA_CHUNKS][4] = {};
	float x[4], dp[4], P[4], G[4];
	for (int u0 = s0; u0 < T; u0 += FA_TILE) {
		fa_dots(x, sa, sb, q, a.C3, u0, k, a.C3, s0, T, a.dh);
		fa_dots(dp, sa, sb, go, (size_t)C, u0, v, a.C3, s0, T, a.dh);
		fa_pg(P, G, lse + 2 * a.row0, D + a.row0, x, dp, u0, s0, T,
		      scale, bf16);
		for (int j = 0; j < 4; j++)
			sg[ty + 8 * j][tx] = G[j], sp[ty + 8 * j][tx] = P[j];
#pragma unroll
		for (int c = 0; c < FA_CHUNKS && c * FA_TILE < a.dh; c++) {
			__syncthreads();
			fa_load(sa, q, a.C3, u0, T, c * FA_TILE, a.dh);
			fa_load(sb, go, (size_t)C, u0, T, c * FA_TILE, a.dh);
			__syncthreads();
			for (int kk = 0; kk < FA_TILE; kk++)
				for (int j = 0; j < 4; j++) {
					dk[c][j] +=
					    sg[kk][ty + 8 * j] * sa[kk][tx];
					dv[c][j] +=
					    sp[kk][ty + 8 * j] * sb[kk][tx];
				}
		}
		__syncthreads();
	}
	for (int j = 0; j < 4; j++) {
		int s = s0 + ty + 8 * j;
#pragma unroll
		for (int c = 0;
		     c < FA_CHUNKS && s < T && c * FA_TILE + tx < a.dh; c++) {
			size_t at =
			    a.qoff + (size_t)s * a.C3 + c * FA_TILE + tx;
			dqkv[at + C] = dk[c][j];
			dqkv[at + 2 * (size_t)C] = dv[c][j];
		}
	}
}

/* The kernels keep FA_CHUNKS chunks of a row in registers: a wider head
 * would index past them (backend_call_ext.h asserts it first). */
static void flash_check_dh(int C, int H)
{
	if (C / H > DQ_FLASH_MAX_DH) {
		fprintf(stderr,
			"deqbench: attention_flash: head width %d > %d\n",
			C / H, DQ_FLASH_MAX_DH);
		abort();
	}
}

static dim3 flash_grid(int B, int T, int H)
{
	return dim3((unsigned int)(B * H),
		    (unsigned int)((T + FA_TILE - 1) / FA_TILE), 1);
}

void cu_attention_flash_forward(void *ctx, void *out, void *lse,
				const void *qkv, int B, int T, int C, int H,
				int bf16)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (B <= 0 || T <= 0 || C <= 0 || H <= 0)
		return;
	flash_check_dh(C, H);
	float scale = (float)(1.0 / sqrt((double)(C / H)));
	flash_forward_kernel<<<flash_grid(B, T, H), FA_THREADS, 0, c->stream>>>(
	    (float *)out, (float *)lse, (const float *)qkv, T, C, H, scale,
	    bf16);
	cuda_check_launch();
}

void cu_attention_flash_backward(void *ctx, void *dqkv, void *scratch,
				 const void *dout, const void *qkv,
				 const void *out, const void *lse, void *ws,
				 int B, int T, int C, int H, int bf16)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (B <= 0 || T <= 0 || C <= 0 || H <= 0)
		return;
	flash_check_dh(C, H);
	float scale = (float)(1.0 / sqrt((double)(C / H)));
	const float *dO = (const float *)dout;
	size_t n = (size_t)B * T * C, rows = (size_t)B * H * T;
	if (bf16) {
		cu_round_bf16_to(c, (float *)ws, (const float *)dout, n);
		dO = (const float *)ws;
	}
	flash_d_kernel<<<(unsigned int)((rows + 7) / 8), FA_THREADS, 0,
			 c->stream>>>((float *)scratch, dO, (const float *)out,
				      B, T, C, H);
	cuda_check_launch();
	dim3 g = flash_grid(B, T, H);
	flash_dq_kernel<<<g, FA_THREADS, 0, c->stream>>>(
	    (float *)dqkv, (const float *)scratch, dO, (const float *)qkv,
	    (const float *)lse, T, C, H, scale, bf16);
	cuda_check_launch();
	flash_dkv_kernel<<<g, FA_THREADS, 0, c->stream>>>(
	    (float *)dqkv, (const float *)scratch, dO, (const float *)qkv,
	    (const float *)lse, T, C, H, scale, bf16);
	cuda_check_launch();
}
