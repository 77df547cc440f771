/* cuda_attention.cu — causal multi-head self-attention on the GPU (Vaswani
 * et al. 2017), the contract of kernels/backend.h:
 *
 *   qkv (B,T,3C) = q | k | v, head h in columns h dh .. (h+1) dh - 1 of each
 *   att (B,H,T,T) = softmax(q kᵀ / sqrt(dh) + causal mask), 0 above the
 *                   diagonal (written in full by the forward)
 *   out (B,T,C)   = att v per head;  dh = C / H
 *
 * Backward (per b, h), with G the scaled softmax gradient kept in the
 * caller's scratch (B,H,T,T):
 *   datt = dout vᵀ;  G[t,s] = att[t,s] (datt[t,s] - Σ_u att[t,u] datt[t,u])
 *   / sqrt(dh) for s <= t, else 0;  dq = G k;  dk = Gᵀ q;  dv = attᵀ dout.
 *
 * Two paths, chosen by shape. T >= DQ_CU_ATT_GEMM_MIN_T (128) with heads
 * of a multiple of 4 columns (8 under bf16: pointer alignment): cuBLAS
 * batched SGEMMs for the products and warp-per-row softmax kernels (the
 * batched-GEMM path, below). Shorter sequences, where the launches count
 * more than the multiply-adds, and other heads: the tiled kernels that
 * follow.
 *
 * Kernels: every block is 256 threads = 8 warps and works on 32×32 tiles in
 * shared memory (rows padded to 33 floats: the column reads are free of
 * bank conflicts); thread (tx = lane, ty = warp) owns output rows ty, ty+8,
 * ty+16, ty+24 of a tile at column tx. Head-dimension chunks of 32 make any
 * dh work; shared memory is 8.4 KiB (forward, dq) or 16.9 KiB (dk, dv).
 *   attention_forward_kernel  grid (B*H, ceil(T/32)): one block per 32
 *     query rows of one head: (1) scaled scores q kᵀ for s <= t into att,
 *     (2) a warp per row turns its scores into probabilities in place and
 *     writes the zeros above the diagonal, (3) out = att v. The att rows
 *     belong to this block alone, so barriers order the phases.
 *   attention_backward_q_kernel  same grid: (1) datt = dout vᵀ into scratch,
 *     (2) G in place, (3) dq = G k.
 *   attention_backward_kv_kernel  grid (B*H, ceil(T/32)) over key tiles:
 *     dk = Gᵀ q and dv = attᵀ dout over the query rows t >= the tile's
 *     first key. Runs after the dq kernel (stream order): it reads G.
 * No atomics: each output element is written by one thread, so results are
 * deterministic; dqkv is overwritten in full (q columns by the first
 * backward kernel, k and v columns by the second).
 *
 * Cost: O(B H T² dh) like the CPU backend, tiled so that each q/k/v/att
 * element is read from global memory once per 32×32 tile. Tiles above the
 * diagonal are skipped (the loops stop at the tile's last row); the
 * diagonal tile computes masked entries and drops them. Softmax uses expf
 * in float (the CPU backend uses double): probabilities differ by float
 * rounding only.
 */
#include "cuda_common.cuh"

#include "../bf16.h"

#define AT_TILE	   32
#define AT_THREADS 256 /* 8 warps; rows ty + 8 j, j < 4, per thread */

/* acc[j] += Σ_kk sa[ty + 8j][kk] b(kk, tx) over one tile, with b(kk, tx)
 * = sb[tx][kk] (TB: sb holds b transposed) or sb[kk][tx]. */
template <bool TB>
__device__ __forceinline__ void tile_mac(float acc[4], float (*sa)[33],
					 float (*sb)[33])
{
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	for (int kk = 0; kk < AT_TILE; kk++) {
		float bv = TB ? sb[tx][kk] : sb[kk][tx];
		for (int j = 0; j < 4; j++)
			acc[j] += sa[ty + 8 * j][kk] * bv;
	}
}

/* Scores tile: acc[j] = Σ_i a[r0 + ty + 8j][i] b[c0 + tx][i] over i < dh,
 * a and b row-major with row strides lda, ldb; rows >= na / nb read as 0. */
__device__ __forceinline__ void tile_abt(float acc[4], float (*sa)[33],
					 float (*sb)[33], const float *a,
					 size_t lda, int r0, int na,
					 const float *b, size_t ldb, int c0,
					 int nb, int dh)
{
	const int tid = threadIdx.x;
	for (int i0 = 0; i0 < dh; i0 += AT_TILE) {
		__syncthreads(); /* previous readers of sa, sb are done */
		for (int e = tid; e < AT_TILE * AT_TILE; e += AT_THREADS) {
			int r = e >> 5, col = e & 31, i = i0 + col;
			sa[r][col] = (r0 + r < na && i < dh)
					 ? a[(size_t)(r0 + r) * lda + i]
					 : 0.0f;
			sb[r][col] = (c0 + r < nb && i < dh)
					 ? b[(size_t)(c0 + r) * ldb + i]
					 : 0.0f;
		}
		__syncthreads();
		tile_mac<true>(acc, sa, sb);
	}
}

/* o[t][i] = Σ_{s <= t} P[t][s] m[s][i] for the 32 rows t0.. of one head,
 * P (T,T) row-major (entries above the diagonal ignored), m with row stride
 * ldm, o with row stride ldo; rows t >= T are skipped. Overwrites o. */
__device__ __forceinline__ void tile_pm(float (*sa)[33], float (*sb)[33],
					const float *P, int T, int t0,
					const float *m, size_t ldm, float *o,
					size_t ldo, int dh)
{
	const int tid = threadIdx.x, tx = tid & 31, ty = tid >> 5;
	const int t_last = min(T, t0 + AT_TILE) - 1;
	for (int i0 = 0; i0 < dh; i0 += AT_TILE) {
		float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
		for (int s0 = 0; s0 <= t_last; s0 += AT_TILE) {
			__syncthreads();
			for (int e = tid; e < AT_TILE * AT_TILE;
			     e += AT_THREADS) {
				int r = e >> 5, col = e & 31;
				int t = t0 + r, s = s0 + col;
				sa[r][col] = (t < T && s <= t)
						 ? P[(size_t)t * T + s]
						 : 0.0f;
				int sr = s0 + r, i = i0 + col;
				sb[r][col] = (sr < T && i < dh)
						 ? m[(size_t)sr * ldm + i]
						 : 0.0f;
			}
			__syncthreads();
			tile_mac<false>(acc, sa, sb);
		}
		for (int j = 0; j < 4; j++) {
			int t = t0 + ty + 8 * j, i = i0 + tx;
			if (t < T && i < dh)
				o[(size_t)t * ldo + i] = acc[j];
		}
	}
}

/* Where one block works: head h of batch row b (blockIdx.x = b H + h),
 * rows t0 .. t_last (blockIdx.y): query rows in the forward and dq
 * kernels, key rows in the dk/dv kernel. */
struct at_block {
	int dh, t0, t_last;
	size_t C3;   /* row stride of qkv */
	size_t qoff; /* q of the head in qkv; k at + C, v at + 2C */
	size_t ooff; /* the head in (B,T,C) out / dout */
	size_t aoff; /* (b, h) in (B,H,T,T) att / scratch */
};

__device__ __forceinline__ struct at_block at_block_of(int T, int C, int H)
{
	struct at_block a;
	const int bh = blockIdx.x, b = bh / H, h = bh % H;
	a.dh = C / H;
	a.t0 = blockIdx.y * AT_TILE;
	a.t_last = min(T, a.t0 + AT_TILE) - 1;
	a.C3 = 3 * (size_t)C;
	a.qoff = (size_t)b * T * a.C3 + (size_t)h * a.dh;
	a.ooff = (size_t)b * T * C + (size_t)h * a.dh;
	a.aoff = (size_t)bh * T * T;
	return a;
}

/* M[t][s] = factor Σ_i x[t][i] y[s][i] for the block's rows t and s <= t;
 * x, y with row strides ldx, ldy (T rows each). */
__device__ __forceinline__ void
causal_xyt(float *M, float (*sa)[33], float (*sb)[33], const float *x,
	   size_t ldx, const float *y, size_t ldy, int T,
	   const struct at_block &a, float factor)
{
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	for (int s0 = 0; s0 <= a.t_last; s0 += AT_TILE) {
		float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
		tile_abt(acc, sa, sb, x, ldx, a.t0, T, y, ldy, s0, T, a.dh);
		for (int j = 0; j < 4; j++) {
			int t = a.t0 + ty + 8 * j, s = s0 + tx;
			if (t < T && s <= t)
				M[(size_t)t * T + s] = acc[j] * factor;
		}
	}
}

/* Row t of A (T columns) in place, by one warp (lane tx): the causal
 * softmax of its entries s <= t (max subtracted, sums in float), zeros
 * above the diagonal; bf16: each probability rounded to bf16. */
__device__ __forceinline__ void softmax_row(float *row, int t, int T, int tx,
					    int bf16)
{
	float mx = -INFINITY, sum = 0.0f;
	for (int s = tx; s <= t; s += 32)
		mx = fmaxf(mx, row[s]);
	mx = dq_warp_max_f(mx);
	for (int s = tx; s <= t; s += 32)
		sum += expf(row[s] - mx);
	sum = dq_warp_sum_f(sum);
	float inv = 1.0f / sum;
	for (int s = tx; s < T; s += 32) {
		float p = s <= t ? expf(row[s] - mx) * inv : 0.0f;
		row[s] = bf16 ? dq_bf16_round(p) : p;
	}
}

/* Row t of G (holding datt) in place, by one warp: G = att (datt − Σ att
 * datt) scale (the sum in double), 0 above the diagonal; arow is att's
 * row t; bf16: G rounded to bf16. */
__device__ __forceinline__ void softmax_backward_row(float *grow,
						     const float *arow, int t,
						     int T, int tx, float scale,
						     int bf16)
{
	double ds = 0.0;
	for (int s = tx; s <= t; s += 32)
		ds += (double)arow[s] * grow[s];
	ds = dq_warp_sum_d(ds);
	for (int s = tx; s < T; s += 32) {
		float g = s <= t ? (float)((double)arow[s] *
					   ((double)grow[s] - ds) * scale)
				 : 0.0f;
		grow[s] = bf16 ? dq_bf16_round(g) : g;
	}
}

/* The block's rows of A (T,T) in place (softmax_row), a warp per row: the
 * row index is the same for the whole warp. */
__device__ __forceinline__ void softmax_rows(float *A, int T,
					     const struct at_block &a, int bf16)
{
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	for (int j = 0; j < 4; j++) {
		int t = a.t0 + ty + 8 * j;
		if (t >= T)
			break;
		softmax_row(A + (size_t)t * T, t, T, tx, bf16);
	}
}

/* The block's rows of G (T,T), holding datt, in place
 * (softmax_backward_row). */
__device__ __forceinline__ void softmax_backward_rows(float *G, const float *A,
						      int T,
						      const struct at_block &a,
						      float scale, int bf16)
{
	const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
	for (int j = 0; j < 4; j++) {
		int t = a.t0 + ty + 8 * j;
		if (t >= T)
			break;
		softmax_backward_row(G + (size_t)t * T, A + (size_t)t * T, t, T,
				     tx, scale, bf16);
	}
}

__global__ void __launch_bounds__(AT_THREADS)
    attention_forward_kernel(float *out, float *att, const float *qkv, int T,
			     int C, int H, float scale, int bf16)
{
	__shared__ float sa[AT_TILE][33], sb[AT_TILE][33];
	const struct at_block a = at_block_of(T, C, H);
	const float *q = qkv + a.qoff;
	float *A = att + a.aoff;

	/* (1) scaled scores q kᵀ for s <= t */
	causal_xyt(A, sa, sb, q, a.C3, q + C, a.C3, T, a, scale);
	__syncthreads();
	/* (2) probabilities */
	softmax_rows(A, T, a, bf16);
	/* (3) out = att v (tile_pm starts with a barrier) */
	tile_pm(sa, sb, A, T, a.t0, q + 2 * (size_t)C, a.C3, out + a.ooff,
		(size_t)C, a.dh);
}

__global__ void __launch_bounds__(AT_THREADS)
    attention_backward_q_kernel(float *dqkv, float *G, const float *dout,
				const float *qkv, const float *att, int T,
				int C, int H, float scale, int bf16)
{
	__shared__ float sa[AT_TILE][33], sb[AT_TILE][33];
	const struct at_block a = at_block_of(T, C, H);
	const float *k = qkv + a.qoff + C, *v = k + C;
	float *Gm = G + a.aoff;

	/* (1) datt = dout vᵀ for s <= t */
	causal_xyt(Gm, sa, sb, dout + a.ooff, (size_t)C, v, a.C3, T, a, 1.0f);
	__syncthreads();
	/* (2) the softmax gradient, scaled */
	softmax_backward_rows(Gm, att + a.aoff, T, a, scale, bf16);
	/* (3) dq = G k */
	tile_pm(sa, sb, Gm, T, a.t0, k, a.C3, dqkv + a.qoff, a.C3, a.dh);
}

__global__ void __launch_bounds__(AT_THREADS)
    attention_backward_kv_kernel(float *dqkv, const float *G, const float *dout,
				 const float *qkv, const float *att, int T,
				 int C, int H)
{
	__shared__ float sg[AT_TILE][33]; /* G[t][s]   (query t, key s) */
	__shared__ float sp[AT_TILE][33]; /* att[t][s] */
	__shared__ float sq[AT_TILE][33]; /* q[t][i] */
	__shared__ float so[AT_TILE][33]; /* dout[t][i] */
	const int tid = threadIdx.x, tx = tid & 31, ty = tid >> 5;
	const struct at_block a = at_block_of(T, C, H); /* rows: keys */
	const int s0 = a.t0, dh = a.dh;
	const size_t C3 = a.C3;
	const float *q = qkv + a.qoff;
	float *dk = dqkv + a.qoff + C, *dv = dqkv + a.qoff + 2 * (size_t)C;
	const float *go = dout + a.ooff;
	const float *A = att + a.aoff, *Gm = G + a.aoff;

	for (int i0 = 0; i0 < dh; i0 += AT_TILE) {
		float ak[4] = {0.0f, 0.0f, 0.0f, 0.0f};
		float av[4] = {0.0f, 0.0f, 0.0f, 0.0f};
		/* only query rows t >= s0 see keys of this tile */
		for (int u0 = s0; u0 < T; u0 += AT_TILE) {
			__syncthreads();
			for (int e = tid; e < AT_TILE * AT_TILE;
			     e += AT_THREADS) {
				int r = e >> 5, col = e & 31;
				int t = u0 + r, s = s0 + col, i = i0 + col;
				int in = t < T && s <= t;
				sg[r][col] = in ? Gm[(size_t)t * T + s] : 0.0f;
				sp[r][col] = in ? A[(size_t)t * T + s] : 0.0f;
				sq[r][col] = (t < T && i < dh)
						 ? q[(size_t)t * C3 + i]
						 : 0.0f;
				so[r][col] = (t < T && i < dh)
						 ? go[(size_t)t * C + i]
						 : 0.0f;
			}
			__syncthreads();
			for (int kk = 0; kk < AT_TILE; kk++) {
				float qv = sq[kk][tx], ov = so[kk][tx];
				for (int j = 0; j < 4; j++) {
					int sl = ty + 8 * j;
					ak[j] += sg[kk][sl] * qv;
					av[j] += sp[kk][sl] * ov;
				}
			}
		}
		for (int j = 0; j < 4; j++) {
			int s = s0 + ty + 8 * j, i = i0 + tx;
			if (s < T && i < dh) {
				dk[(size_t)s * C3 + i] = ak[j];
				dv[(size_t)s * C3 + i] = av[j];
			}
		}
	}
}

/* ------------------------------------------------ the batched-GEMM path
 *
 * For T >= DQ_CU_ATT_GEMM_MIN_T (and B H <= DQ_CU_ATT_MAXBH): the products
 * of every (b, h) as cuBLAS batched SGEMMs over the B H pairs
 * (cublasSgemmBatched, so the handle's math mode applies: TF32 after
 * set_tf32(1), exact FP32 otherwise), on pointer arrays a kernel writes
 * into ctx->att_ptrs (a head's blocks sit at offsets no single batch
 * stride describes), and the softmax and its backward as warp-per-row
 * kernels over all B H T rows with the tiled kernels' arithmetic
 * (softmax_row, softmax_backward_row). The products run over the full
 * T×T, the masked half included: twice the useful multiply-adds, on
 * cuBLAS's kernels. The softmax writes exact zeros above the diagonal,
 * so P and G add nothing there to the products after them.
 *   forward:  S = scale Q Kᵀ into att; softmax in place; out = P V
 *   backward: G = dO Vᵀ into scratch; its softmax backward in place;
 *             dQ = G K, dK = Gᵀ Q, dV = Pᵀ dO (dqkv overwritten)
 * Results differ from the tiled kernels' by float summation order only.
 */

/* Which array of ctx->att_ptrs: q, k, v of qkv; O (out in the forward,
 * dout in the backward); S (att); G (scratch); dq, dk, dv of dqkv. */
enum { AP_Q, AP_K, AP_V, AP_O, AP_S, AP_G, AP_DQ, AP_DK, AP_DV };

/* Pair i = b H + h gets ptr[k DQ_CU_ATT_MAXBH + i] = its block in array k:
 * q, k, v, O and S always, G, dq, dk, dv when scr is not NULL. */
__global__ void att_ptrs_kernel(float **ptr, float *qkv, float *o, float *att,
				float *scr, float *dqkv, int BH, int T, int C,
				int H)
{
	const size_t M = DQ_CU_ATT_MAXBH;
	DQ_GRID_STRIDE(i, (size_t)BH)
	{
		const int b = (int)i / H, h = (int)i % H, dh = C / H;
		const size_t q = (size_t)b * T * 3 * C + (size_t)h * dh;
		const size_t a = i * (size_t)T * T;
		ptr[AP_Q * M + i] = qkv + q;
		ptr[AP_K * M + i] = qkv + q + C;
		ptr[AP_V * M + i] = qkv + q + 2 * (size_t)C;
		ptr[AP_O * M + i] = o + (size_t)b * T * C + (size_t)h * dh;
		ptr[AP_S * M + i] = att + a;
		if (!scr)
			continue;
		ptr[AP_G * M + i] = scr + a;
		ptr[AP_DQ * M + i] = dqkv + q;
		ptr[AP_DK * M + i] = dqkv + q + C;
		ptr[AP_DV * M + i] = dqkv + q + 2 * (size_t)C;
	}
}

/* C_i(M,N) = alpha op(A_i) op(B_i) for every pair i (C_i overwritten),
 * row-major, with A_i, B_i, C_i from arrays ka, kb, kc of ctx->att_ptrs:
 * cu_gemm's operand swap (cuda_ops.cu), one batched call. */
static void att_gemm(struct dq_cuda_ctx *c, int ta, int tb, int M, int N, int K,
		     float alpha, int ka, int lda, int kb, int ldb, int kc,
		     int ldc, int BH)
{
	float **p = c->att_ptrs;
	const float beta = 0.0f;
	const size_t S = DQ_CU_ATT_MAXBH;
	cublas_check(
	    cublasSgemmBatched(c->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
			       ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
			       (const float *const *)(p + kb * S), ldb,
			       (const float *const *)(p + ka * S), lda, &beta,
			       p + kc * S, ldc, BH));
}

/* Rows r < rows of A (T columns each, row r is row r % T of its (b, h)):
 * softmax_row, a warp per row. */
__global__ void __launch_bounds__(AT_THREADS)
    att_softmax_kernel(float *A, size_t rows, int T, int bf16)
{
	const size_t r =
	    (size_t)blockIdx.x * (AT_THREADS / 32) + (threadIdx.x >> 5);
	if (r < rows)
		softmax_row(A + r * T, (int)(r % (size_t)T), T,
			    threadIdx.x & 31, bf16);
}

/* att_softmax_kernel's rows of G: softmax_backward_row against att. */
__global__ void __launch_bounds__(AT_THREADS)
    att_softmax_backward_kernel(float *G, const float *A, size_t rows, int T,
				float scale, int bf16)
{
	const size_t r =
	    (size_t)blockIdx.x * (AT_THREADS / 32) + (threadIdx.x >> 5);
	if (r < rows)
		softmax_backward_row(G + r * T, A + r * T, (int)(r % (size_t)T),
				     T, threadIdx.x & 31, scale, bf16);
}

/* Whether shape (B, T, C, H) takes the batched-GEMM path: heads of a
 * multiple of 4 columns, as a head's blocks start at h dh elements and
 * cuBLAS's batched GEMMs under TF32 (set_tf32) want 16-byte aligned
 * pointers when k % 4 == 0 (cuBLAS documentation, cublasGemmBatchedEx);
 * other heads take the tiled kernels. */
static int att_gemm_path(int B, int T, int C, int H)
{
	return T >= DQ_CU_ATT_GEMM_MIN_T &&
	       (long long)B * H <= (long long)DQ_CU_ATT_MAXBH &&
	       (C / H) % 4 == 0;
}

/* Launches for the B H T rows of the two softmax kernels. */
static unsigned int att_row_blocks(int B, int T, int H)
{
	size_t rows = (size_t)B * H * T, per = AT_THREADS / 32;
	return (unsigned int)((rows + per - 1) / per);
}

static void att_gemm_forward(struct dq_cuda_ctx *c, float *out, float *att,
			     float *qkv, int B, int T, int C, int H,
			     float scale)
{
	const int BH = B * H, dh = C / H, C3 = 3 * C;
	att_ptrs_kernel<<<dq_grid_1d(c, (size_t)BH, DQ_CU_THREADS),
			  DQ_CU_THREADS, 0, c->stream>>>(
	    c->att_ptrs, qkv, out, att, NULL, NULL, BH, T, C, H);
	cuda_check_launch();
	att_gemm(c, 0, 1, T, T, dh, scale, AP_Q, C3, AP_K, C3, AP_S, T, BH);
	att_softmax_kernel<<<att_row_blocks(B, T, H), AT_THREADS, 0,
			     c->stream>>>(att, (size_t)BH * T, T, 0);
	cuda_check_launch();
	att_gemm(c, 0, 0, T, dh, T, 1.0f, AP_S, T, AP_V, C3, AP_O, C, BH);
}

static void att_gemm_backward(struct dq_cuda_ctx *c, float *dqkv, float *G,
			      float *dout, float *qkv, float *att, int B, int T,
			      int C, int H, float scale)
{
	const int BH = B * H, dh = C / H, C3 = 3 * C;
	att_ptrs_kernel<<<dq_grid_1d(c, (size_t)BH, DQ_CU_THREADS),
			  DQ_CU_THREADS, 0, c->stream>>>(
	    c->att_ptrs, qkv, dout, att, G, dqkv, BH, T, C, H);
	cuda_check_launch();
	att_gemm(c, 0, 1, T, T, dh, 1.0f, AP_O, C, AP_V, C3, AP_G, T, BH);
	att_softmax_backward_kernel<<<att_row_blocks(B, T, H), AT_THREADS, 0,
				      c->stream>>>(G, att, (size_t)BH * T, T,
						   scale, 0);
	cuda_check_launch();
	att_gemm(c, 0, 0, T, dh, T, 1.0f, AP_G, T, AP_K, C3, AP_DQ, C3, BH);
	att_gemm(c, 1, 0, T, dh, T, 1.0f, AP_G, T, AP_Q, C3, AP_DK, C3, BH);
	att_gemm(c, 1, 0, T, dh, T, 1.0f, AP_S, T, AP_O, C, AP_DV, C3, BH);
}

/* Grid of both kernels: x = (b, h) pairs, y = 32-row tiles. */
static dim3 attention_grid(int B, int T, int H)
{
	return dim3((unsigned int)(B * H),
		    (unsigned int)((T + AT_TILE - 1) / AT_TILE), 1);
}

/* The tiled path's launches (bf16: P and G rounded, dout read as given,
 * rounded by the caller). */
static void tiled_forward(struct dq_cuda_ctx *c, float *out, float *att,
			  const float *qkv, int B, int T, int C, int H,
			  float scale, int bf16)
{
	attention_forward_kernel<<<attention_grid(B, T, H), AT_THREADS, 0,
				   c->stream>>>(out, att, qkv, T, C, H, scale,
						bf16);
	cuda_check_launch();
}

static void tiled_backward(struct dq_cuda_ctx *c, float *dqkv, float *scratch,
			   const float *dout, const float *qkv,
			   const float *att, int B, int T, int C, int H,
			   float scale, int bf16)
{
	dim3 grid = attention_grid(B, T, H);
	attention_backward_q_kernel<<<grid, AT_THREADS, 0, c->stream>>>(
	    dqkv, scratch, dout, qkv, att, T, C, H, scale, bf16);
	cuda_check_launch();
	attention_backward_kv_kernel<<<grid, AT_THREADS, 0, c->stream>>>(
	    dqkv, scratch, dout, qkv, att, T, C, H);
	cuda_check_launch();
}

void cu_attention_forward(void *ctx, void *out, void *att, const void *qkv,
			  int B, int T, int C, int H)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (B <= 0 || T <= 0 || C <= 0 || H <= 0)
		return;
	float scale = (float)(1.0 / sqrt((double)(C / H)));
	if (att_gemm_path(B, T, C, H)) {
		att_gemm_forward(c, (float *)out, (float *)att, (float *)qkv, B,
				 T, C, H, scale);
		return;
	}
	tiled_forward(c, (float *)out, (float *)att, (const float *)qkv, B, T,
		      C, H, scale, 0);
}

void cu_attention_backward(void *ctx, void *dqkv, void *scratch,
			   const void *dout, const void *qkv, const void *att,
			   int B, int T, int C, int H)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (B <= 0 || T <= 0 || C <= 0 || H <= 0)
		return;
	float scale = (float)(1.0 / sqrt((double)(C / H)));
	if (att_gemm_path(B, T, C, H)) {
		att_gemm_backward(c, (float *)dqkv, (float *)scratch,
				  (float *)dout, (float *)qkv, (float *)att, B,
				  T, C, H, scale);
		return;
	}
	tiled_backward(c, (float *)dqkv, (float *)scratch, (const float *)dout,
		       (const float *)qkv, (const float *)att, B, T, C, H,
		       scale, 0);
}

/* ------------------------------------------------ precision=bf16
 *
 * attention_forward_bf16 / attention_backward_bf16 (kernels/backend.h):
 * the same two paths, with P, dO and G rounded to bf16 where FlashAttention
 * and PyTorch's bf16 SDPA hold them in bf16 (qkv arrives rounded).
 *   batched-GEMM path: bf16 copies in ws (att_ws) and the six products as
 *     cublasGemmBatchedEx on CUDA_R_16BF operands, CUDA_R_32F results,
 *     CUBLAS_COMPUTE_32F (tensor cores); the softmax kernels round P and
 *     G in place (so att holds the rounded P the tape stores), and their
 *     bf16 copies are exact.
 *   tiled path: the fp32 kernels on rounded values: the softmax rounds P
 *     and G, and dout is read through its rounded copy in ws. Products of
 *     bf16 numbers are exact in fp32, so both paths, and the CPU backend's
 *     twin, compute the same sums up to their order. */

/* ws's bf16 arrays: qkv (B,T,3C), dout (B,T,C), P and G (B,H,T,T), each
 * starting 16-byte aligned (be_attention_bf16_ws_bytes has room). */
struct att_ws {
	uint16_t *qkv, *o, *p, *g;
};

static uint16_t *att_ws_next(uint16_t *at, size_t n)
{
	return at + ((n + 7) & ~(size_t)7);
}

static struct att_ws att_ws_of(void *ws, int B, int T, int C, int H)
{
	struct att_ws w;
	size_t bt = (size_t)B * T, att = bt * (size_t)H * T;
	w.qkv = (uint16_t *)ws;
	w.o = att_ws_next(w.qkv, 3 * bt * C);
	w.p = att_ws_next(w.o, bt * C);
	w.g = att_ws_next(w.p, att);
	return w;
}

/* The bf16 arrays' blocks of pair i, at AP_QB.. of ctx->att_ptrs (void
 * pointers in its float * slots). */
enum { AP_QB = 9, AP_KB, AP_VB, AP_OB, AP_PB, AP_GB };

__global__ void att_ptrs_bf16_kernel(float **ptr, uint16_t *qkv, uint16_t *o,
				     uint16_t *p, uint16_t *g, int BH, int T,
				     int C, int H)
{
	const size_t M = DQ_CU_ATT_MAXBH;
	DQ_GRID_STRIDE(i, (size_t)BH)
	{
		const int b = (int)i / H, h = (int)i % H, dh = C / H;
		const size_t q = (size_t)b * T * 3 * C + (size_t)h * dh;
		const size_t a = i * (size_t)T * T;
		ptr[AP_QB * M + i] = (float *)(void *)(qkv + q);
		ptr[AP_KB * M + i] = (float *)(void *)(qkv + q + C);
		ptr[AP_VB * M + i] = (float *)(void *)(qkv + q + 2 * (size_t)C);
		ptr[AP_OB * M + i] =
		    (float *)(void *)(o + (size_t)b * T * C + (size_t)h * dh);
		ptr[AP_PB * M + i] = (float *)(void *)(p + a);
		ptr[AP_GB * M + i] = (float *)(void *)(g + a);
	}
}

/* att_gemm on the bf16 arrays ka, kb (AP_QB..), fp32 results in kc. */
static void att_gemm_bf16(struct dq_cuda_ctx *c, int ta, int tb, int M, int N,
			  int K, float alpha, int ka, int lda, int kb, int ldb,
			  int kc, int ldc, int BH)
{
	float **p = c->att_ptrs;
	const float beta = 0.0f;
	const size_t S = DQ_CU_ATT_MAXBH;
	cublas_check(cublasGemmBatchedEx(
	    c->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
	    ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha,
	    (const void *const *)(p + kb * S), CUDA_R_16BF, ldb,
	    (const void *const *)(p + ka * S), CUDA_R_16BF, lda, &beta,
	    (void *const *)(p + kc * S), CUDA_R_32F, ldc, BH,
	    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* Both pointer sets of the pairs: the fp32 arrays (scr NULL in the
 * forward) and the bf16 copies. */
static void att_ptrs_both(struct dq_cuda_ctx *c, float *qkv, float *o,
			  float *att, float *scr, float *dqkv,
			  const struct att_ws &w, int BH, int T, int C, int H)
{
	unsigned int g = dq_grid_1d(c, (size_t)BH, DQ_CU_THREADS);
	att_ptrs_kernel<<<g, DQ_CU_THREADS, 0, c->stream>>>(
	    c->att_ptrs, qkv, o, att, scr, dqkv, BH, T, C, H);
	cuda_check_launch();
	att_ptrs_bf16_kernel<<<g, DQ_CU_THREADS, 0, c->stream>>>(
	    c->att_ptrs, w.qkv, w.o, w.p, w.g, BH, T, C, H);
	cuda_check_launch();
}

static void att_gemm_forward_bf16(struct dq_cuda_ctx *c, float *out, float *att,
				  float *qkv, void *ws, int B, int T, int C,
				  int H, float scale)
{
	const int BH = B * H, dh = C / H, C3 = 3 * C;
	const struct att_ws w = att_ws_of(ws, B, T, C, H);
	const size_t nbt = (size_t)B * T, natt = (size_t)BH * T * T;
	att_ptrs_both(c, qkv, out, att, NULL, NULL, w, BH, T, C, H);
	cu_to_bf16(c, w.qkv, qkv, 3 * nbt * C);
	att_gemm_bf16(c, 0, 1, T, T, dh, scale, AP_QB, C3, AP_KB, C3, AP_S, T,
		      BH);
	att_softmax_kernel<<<att_row_blocks(B, T, H), AT_THREADS, 0,
			     c->stream>>>(att, (size_t)BH * T, T, 1);
	cuda_check_launch();
	cu_to_bf16(c, w.p, att, natt);
	att_gemm_bf16(c, 0, 0, T, dh, T, 1.0f, AP_PB, T, AP_VB, C3, AP_O, C,
		      BH);
}

static void att_gemm_backward_bf16(struct dq_cuda_ctx *c, float *dqkv, float *G,
				   float *dout, float *qkv, float *att,
				   void *ws, int B, int T, int C, int H,
				   float scale)
{
	const int BH = B * H, dh = C / H, C3 = 3 * C;
	const struct att_ws w = att_ws_of(ws, B, T, C, H);
	const size_t nbt = (size_t)B * T, natt = (size_t)BH * T * T;
	att_ptrs_both(c, qkv, dout, att, G, dqkv, w, BH, T, C, H);
	cu_to_bf16(c, w.qkv, qkv, 3 * nbt * C);
	cu_to_bf16(c, w.o, dout, nbt * C);
	cu_to_bf16(c, w.p, att, natt);
	att_gemm_bf16(c, 0, 1, T, T, dh, 1.0f, AP_OB, C, AP_VB, C3, AP_G, T,
		      BH);
	att_softmax_backward_kernel<<<att_row_blocks(B, T, H), AT_THREADS, 0,
				      c->stream>>>(G, att, (size_t)BH * T, T,
						   scale, 1);
	cuda_check_launch();
	cu_to_bf16(c, w.g, G, natt);
	att_gemm_bf16(c, 0, 0, T, dh, T, 1.0f, AP_GB, T, AP_KB, C3, AP_DQ, C3,
		      BH);
	att_gemm_bf16(c, 1, 0, T, dh, T, 1.0f, AP_GB, T, AP_QB, C3, AP_DK, C3,
		      BH);
	att_gemm_bf16(c, 1, 0, T, dh, T, 1.0f, AP_PB, T, AP_OB, C, AP_DV, C3,
		      BH);
}

/* Whether (B, T, C, H) takes the bf16 batched-GEMM path: att_gemm_path's
 * shapes with heads of a multiple of 8 columns. cuBLAS's batched bf16
 * GEMMs need each matrix's pointer aligned to 16 bytes when k % 8 == 0
 * (cuBLAS documentation, cublasGemmBatchedEx), and a head's blocks start
 * at h dh elements; other heads take the tiled kernels. */
static int att_gemm_bf16_path(int B, int T, int C, int H)
{
	return att_gemm_path(B, T, C, H) && (C / H) % 8 == 0;
}

void cu_attention_forward_bf16(void *ctx, void *out, void *att, const void *qkv,
			       void *ws, int B, int T, int C, int H)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (B <= 0 || T <= 0 || C <= 0 || H <= 0)
		return;
	float scale = (float)(1.0 / sqrt((double)(C / H)));
	if (att_gemm_bf16_path(B, T, C, H)) {
		att_gemm_forward_bf16(c, (float *)out, (float *)att,
				      (float *)qkv, ws, B, T, C, H, scale);
		return;
	}
	tiled_forward(c, (float *)out, (float *)att, (const float *)qkv, B, T,
		      C, H, scale, 1);
}

void cu_attention_backward_bf16(void *ctx, void *dqkv, void *scratch,
				const void *dout, const void *qkv,
				const void *att, void *ws, int B, int T, int C,
				int H)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (B <= 0 || T <= 0 || C <= 0 || H <= 0)
		return;
	float scale = (float)(1.0 / sqrt((double)(C / H)));
	if (att_gemm_bf16_path(B, T, C, H)) {
		att_gemm_backward_bf16(c, (float *)dqkv, (float *)scratch,
				       (float *)dout, (float *)qkv,
				       (float *)att, ws, B, T, C, H, scale);
		return;
	}
	float *dO = (float *)ws; /* the rounded dout */
	cu_round_bf16_to(c, dO, (const float *)dout, (size_t)B * T * C);
	tiled_backward(c, (float *)dqkv, (float *)scratch, dO,
		       (const float *)qkv, (const float *)att, B, T, C, H,
		       scale, 1);
}
