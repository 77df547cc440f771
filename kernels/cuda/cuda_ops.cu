/* cuda_ops.cu — the CUDA backend's ops except attention: GEMM through
 * cuBLAS, and kernels for bias, activations, LayerNorm, embeddings, softmax
 * cross-entropy, Adam and the solvers' vector ops. float32 throughout;
 * per-element formulas from elementwise.h (the CPU backend uses the same).
 * The contracts (aliasing, += vs overwrite) are kernels/backend.h's and
 * match kernels/cpu/cpu_backend.c op for op.
 *
 * What runs where: everything on the GPU, on ctx->stream, asynchronously.
 * Only dot, norm and xent_forward synchronise (they return a number to the
 * host): one 8-byte device-to-host copy into pinned memory each.
 *
 * Letters: N rows, C columns, B batch, T sequence, V vocabulary.
 *
 * Determinism: every kernel but embed_backward's dwte scatter gives the
 * same bits run to run on one GPU model. Reductions use fixed layouts:
 *   - column sums (bias_backward, LayerNorm dw/db) split the rows into S
 *     slabs (S from N, C and the SM count), sum each slab in a fixed order
 *     in double, and the last block of each column group (a ticket counter
 *     per group) adds the S partials in slab order;
 *   - dot / norm: per-block double sums in a fixed grid-stride assignment,
 *     then the last block adds the partials in block order;
 *   - cross-entropy: per-row losses in double, summed by one block.
 *   dwte += scatter(dout) uses float atomicAdd, so rows whose token occurs
 *   several times in a batch get their terms in an unspecified order: the
 *   last bits of those rows of dwte vary run to run (nothing else does).
 *   dwpe is summed over the batch in order, without atomics.
 * Reductions accumulate in double like the CPU backend; results differ
 * from it only by float rounding and summation order.
 *
 * GEMM: cuBLAS is column-major; a row-major X (r,c) with row stride ld is
 * the column-major Xᵀ (c,r) with leading dimension ld. So C = op(A) op(B)
 * in row-major is Cᵀ = op(B)ᵀ op(A)ᵀ in column-major: cublasSgemm with the
 * operands swapped, (N, M, K), and each operand's own transpose flag.
 * Math mode: CUBLAS_DEFAULT_MATH (exact FP32) unless set_tf32(1).
 */
#include "cuda_common.cuh"

/* ------------------------------------------ fill, zero rows, transpose */

__global__ void fill_kernel(float *d, float v, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	d[i] = v;
}

void cu_fill(void *ctx, void *dst, double value, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	float v = (float)value;
	if (!n)
		return;
	if (v == 0.0f && !signbit(v)) { /* +0.0f is all-zero bytes */
		cuda_check(
		    cudaMemsetAsync(dst, 0, n * sizeof(float), c->stream));
		return;
	}
	fill_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		      c->stream>>>((float *)dst, v, n);
	cuda_check_launch();
}

/* One strided 2-D memset on the stream: the (rows, cols) block with row
 * pitch ld floats, all bytes 0 (+0.0f). */
void cu_zero_rows(void *ctx, void *dst, size_t rows, size_t cols, size_t ld)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!rows || !cols)
		return;
	cuda_check(cudaMemset2DAsync(dst, ld * sizeof(float), 0,
				     cols * sizeof(float), rows, c->stream));
}

/* dst(C,R) = src(R,C)ᵀ or +=: a grid-stride loop over dst (coalesced
 * writes; src is read with stride C). O(R C); trellisnet's (4 h², 2)
 * weights are its use, a few MiB per block call at most. */
__global__ void transpose_kernel(float *dst, const float *src, int R, int C,
				 int add)
{
	const size_t n = (size_t)R * (size_t)C;
	DQ_GRID_STRIDE(i, n)
	{
		size_t c = i / (size_t)R, r = i % (size_t)R;
		float v = src[r * (size_t)C + c];
		dst[i] = add ? dst[i] + v : v;
	}
}

void cu_transpose(void *ctx, void *dst, const void *src, int R, int C, int add)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	size_t n = (size_t)(R > 0 ? R : 0) * (size_t)(C > 0 ? C : 0);
	if (!n)
		return;
	transpose_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
			   c->stream>>>((float *)dst, (const float *)src, R, C,
					add);
	cuda_check_launch();
}

/* ------------------------------------------------------------------ gemm */

/* Row-major C(M,N) = alpha op(A) op(B) + beta C as the column-major
 * Cᵀ = alpha op(B)ᵀ op(A)ᵀ + beta Cᵀ (see the top of the file). lda, ldb,
 * ldc are the row-major row strides, which are exactly the column-major
 * leading dimensions cuBLAS checks (lda >= K when A is not transposed...). */
void cu_gemm(void *ctx, int ta, int tb, int M, int N, int K, double alpha,
	     const void *A, int lda, const void *B, int ldb, double beta,
	     void *C, int ldc)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (M <= 0 || N <= 0)
		return;
	float al = (float)alpha, be = (float)beta;
	cublas_check(cublasSgemm(c->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
				 ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &al,
				 (const float *)B, ldb, (const float *)A, lda,
				 &be, (float *)C, ldc));
}

/* The batched form of cu_gemm: the same operand swap, one strided-batched
 * cuBLAS call. */
void cu_gemm_batched(void *ctx, int ta, int tb, int M, int N, int K,
		     double alpha, const void *A, int lda, size_t sA,
		     const void *B, int ldb, size_t sB, double beta, void *C,
		     int ldc, size_t sC, int batch)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (M <= 0 || N <= 0 || batch <= 0)
		return;
	float al = (float)alpha, be = (float)beta;
	cublas_check(cublasSgemmStridedBatched(
	    c->cublas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
	    ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &al, (const float *)B, ldb,
	    (long long)sB, (const float *)A, lda, (long long)sA, &be,
	    (float *)C, ldc, (long long)sC, batch));
}

/* ------------------------------------------------------------------ bias */

/* y(N,C) += b(C); n = N*C. The column index advances with the grid stride
 * instead of a 64-bit modulo per element. */
__global__ void bias_forward_kernel(float *y, const float *b, size_t n, int C)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	if (i >= n)
		return;
	int col = (int)(i % (size_t)C);
	const int step = (int)(stride % (size_t)C);
	for (; i < n; i += stride) {
		y[i] += b[col];
		col += step;
		if (col >= C)
			col -= C;
	}
}

void cu_bias_forward(void *ctx, void *y, const void *b, int N, int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	size_t n = (size_t)(N > 0 ? N : 0) * (size_t)(C > 0 ? C : 0);
	if (!n)
		return;
	bias_forward_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
			      c->stream>>>((float *)y, (const float *)b, n, C);
	cuda_check_launch();
}

/* ---- deterministic column sums (bias_backward, LayerNorm dw/db) ----
 *
 * grid (ceil(C/32), S), block (32, 8): block (gx, gy) sums columns
 * 32 gx .. 32 gx + 31 over the rows of slab gy; thread (tx, ty) takes rows
 * ty, ty+8, ... of the slab (a warp reads 32 consecutive floats of a row).
 * With S > 1 each block stores its NACC partial sums in red[k][gy][c]; the
 * last block of the column group (ticket counter) adds them in slab order
 * and resets the counter. The sums go += into out[k][c] as float. */

struct colsum_plan {
	dim3 grid;
	int rows_per_slab;
};

static struct colsum_plan colsum_plan_make(const struct dq_cuda_ctx *c, int N,
					   int C, int nacc)
{
	struct colsum_plan p;
	int gx = (C + 31) / 32;
	int S = 1;
	if (gx <= DQ_CU_TICKETS) {
		/* ~2 blocks per SM, slabs of at least 64 rows, partials in
		 * the scratch */
		int want = (2 * c->sm_count + gx - 1) / gx;
		int most = (N + 63) / 64;
		size_t cap = DQ_CU_RED_CAP / ((size_t)nacc * (size_t)C);
		S = want < most ? want : most;
		if ((size_t)S > cap)
			S = (int)cap;
		if (S < 1)
			S = 1;
	}
	p.rows_per_slab = (N + S - 1) / S;
	S = (N + p.rows_per_slab - 1) / p.rows_per_slab; /* no empty slab */
	p.grid = dim3((unsigned int)gx, (unsigned int)S, 1);
	return p;
}

template <int NACC, class Elem>
__global__ void __launch_bounds__(256)
    colsum_kernel(Elem elem, float *out0, float *out1, int N, int C,
		  int rows_per_slab, double *part, unsigned int *tickets)
{
	__shared__ double red[NACC][8][33];
	__shared__ int is_last;
	const int tx = threadIdx.x, ty = threadIdx.y;
	const int col = blockIdx.x * 32 + tx;
	const int r0 = blockIdx.y * rows_per_slab;
	const int r1 = min(N, r0 + rows_per_slab);
	double acc[NACC];
	for (int k = 0; k < NACC; k++)
		acc[k] = 0.0;
	if (col < C)
		for (int r = r0 + ty; r < r1; r += 8)
			elem(r, col, acc);
	for (int k = 0; k < NACC; k++)
		red[k][ty][tx] = acc[k];
	__syncthreads();
	if (ty == 0)
		for (int k = 0; k < NACC; k++) {
			double s = 0.0;
			for (int j = 0; j < 8; j++)
				s += red[k][j][tx];
			acc[k] = s;
		}
	if (gridDim.y == 1) {
		if (ty == 0 && col < C) {
			out0[col] += (float)acc[0];
			if constexpr (NACC > 1)
				out1[col] += (float)acc[1];
		}
		return;
	}
	const size_t slab = (size_t)gridDim.y * (size_t)C;
	if (ty == 0 && col < C)
		for (int k = 0; k < NACC; k++)
			part[k * slab + (size_t)blockIdx.y * C + col] = acc[k];
	__threadfence(); /* partials visible device-wide before the ticket */
	__syncthreads();
	if (tx == 0 && ty == 0)
		is_last = atomicAdd(&tickets[blockIdx.x], 1u) == gridDim.y - 1;
	__syncthreads();
	if (!is_last)
		return;
	if (ty == 0 && col < C) {
		for (int k = 0; k < NACC; k++) {
			double s = 0.0;
			for (unsigned int j = 0; j < gridDim.y; j++)
				s += __ldcg(
				    &part[k * slab + (size_t)j * C + col]);
			if (k == 0)
				out0[col] += (float)s;
			else
				out1[col] += (float)s;
		}
	}
	if (tx == 0 && ty == 0)
		tickets[blockIdx.x] = 0;
}

template <int NACC, class Elem>
static void colsum_launch(struct dq_cuda_ctx *c, Elem elem, float *out0,
			  float *out1, int N, int C)
{
	struct colsum_plan p = colsum_plan_make(c, N, C, NACC);
	colsum_kernel<NACC, Elem><<<p.grid, dim3(32, 8), 0, c->stream>>>(
	    elem, out0, out1, N, C, p.rows_per_slab, c->red, c->tickets);
	cuda_check_launch();
}

/* db(C) += Σ_n dy(n, c) */
struct bias_grad_elem {
	const float *dy;
	int C;
	__device__ void operator()(int r, int col, double *acc) const
	{
		acc[0] += dy[(size_t)r * C + col];
	}
};

void cu_bias_backward(void *ctx, void *db, const void *dy, int N, int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0 || C <= 0)
		return;
	struct bias_grad_elem e = {(const float *)dy, C};
	colsum_launch<1>(c, e, (float *)db, (float *)NULL, N, C);
}

/* ----------------------------------------------------- activations, mul */

template <int ACT> __device__ __forceinline__ float act_apply(float x)
{
	if (ACT == ACT_RELU)
		return dq_relu_f(x);
	if (ACT == ACT_GELU)
		return dq_gelu_f(x);
	if (ACT == ACT_TANH)
		return tanhf(x);
	return dq_sigmoid_f(x);
}

template <int ACT>
__global__ void act_forward_kernel(float *y, const float *x, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	y[i] = act_apply<ACT>(x[i]);
}

/* dx = dy * act'(.): from y for RELU, TANH, SIGMOID, from x for GELU. */
template <int ACT>
__global__ void act_backward_kernel(float *dx, const float *dy, const float *x,
				    const float *y, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	{
		float g;
		if (ACT == ACT_RELU)
			g = dq_relu_grad_from_y_f(y[i]);
		else if (ACT == ACT_GELU)
			g = dq_gelu_grad_f(x[i]);
		else if (ACT == ACT_TANH)
			g = dq_tanh_grad_from_y_f(y[i]);
		else
			g = dq_sigmoid_grad_from_y_f(y[i]);
		dx[i] = dy[i] * g;
	}
}

void cu_act_forward(void *ctx, enum act_kind act, void *y_, const void *x_,
		    size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	float *y = (float *)y_;
	const float *x = (const float *)x_;
	if (!n)
		return;
	unsigned int g = dq_grid_1d(c, n, DQ_CU_THREADS);
	switch (act) {
	case ACT_RELU:
		act_forward_kernel<ACT_RELU>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(y, x, n);
		break;
	case ACT_GELU:
		act_forward_kernel<ACT_GELU>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(y, x, n);
		break;
	case ACT_TANH:
		act_forward_kernel<ACT_TANH>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(y, x, n);
		break;
	case ACT_SIGMOID:
		act_forward_kernel<ACT_SIGMOID>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(y, x, n);
		break;
	}
	cuda_check_launch();
}

void cu_act_backward(void *ctx, enum act_kind act, void *dx_, const void *dy_,
		     const void *x_, const void *y_, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	float *dx = (float *)dx_;
	const float *dy = (const float *)dy_, *x = (const float *)x_,
		    *y = (const float *)y_;
	if (!n)
		return;
	unsigned int g = dq_grid_1d(c, n, DQ_CU_THREADS);
	switch (act) {
	case ACT_RELU:
		act_backward_kernel<ACT_RELU>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(dx, dy, x, y, n);
		break;
	case ACT_GELU:
		act_backward_kernel<ACT_GELU>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(dx, dy, x, y, n);
		break;
	case ACT_TANH:
		act_backward_kernel<ACT_TANH>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(dx, dy, x, y, n);
		break;
	case ACT_SIGMOID:
		act_backward_kernel<ACT_SIGMOID>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(dx, dy, x, y, n);
		break;
	}
	cuda_check_launch();
}

__global__ void mul_kernel(float *d, const float *a, const float *b, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	d[i] = a[i] * b[i];
}

void cu_mul(void *ctx, void *dst, const void *a, const void *b, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	mul_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		     c->stream>>>((float *)dst, (const float *)a,
				  (const float *)b, n);
	cuda_check_launch();
}

/* ------------------------------------------------------------- layernorm */

/* One warp per row (8 rows per 256-thread block): two-pass mean and biased
 * variance in double, as the CPU backend. A whole warp leaves together when
 * its row is past N, so the shuffles always see 32 lanes. */
__global__ void layernorm_forward_kernel(float *y, float *mean, float *rstd,
					 const float *x, const float *w,
					 const float *b, int N, int C)
{
	const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (row >= N)
		return;
	const float *xr = x + (size_t)row * C;
	float *yr = y + (size_t)row * C;
	double m = 0.0, v = 0.0;
	for (int i = lane; i < C; i += 32)
		m += xr[i];
	m = dq_warp_sum_d(m) / C;
	for (int i = lane; i < C; i += 32) {
		double d = xr[i] - m;
		v += d * d;
	}
	v = dq_warp_sum_d(v) / C;
	double s = 1.0 / sqrt(v + DQ_LN_EPS);
	for (int i = lane; i < C; i += 32)
		yr[i] = (float)((xr[i] - m) * s * w[i] + b[i]);
	if (lane == 0) {
		mean[row] = (float)m;
		rstd[row] = (float)s;
	}
}

void cu_layernorm_forward(void *ctx, void *y, void *mean, void *rstd,
			  const void *x, const void *w, const void *b, int N,
			  int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0 || C <= 0)
		return;
	const int rows = DQ_CU_THREADS / 32;
	layernorm_forward_kernel<<<(unsigned int)((N + rows - 1) / rows),
				   DQ_CU_THREADS, 0, c->stream>>>(
	    (float *)y, (float *)mean, (float *)rstd, (const float *)x,
	    (const float *)w, (const float *)b, N, C);
	cuda_check_launch();
}

/* dw(C) += Σ_n dy x̂, db(C) += Σ_n dy, x̂ = (x - mean) rstd in double from
 * the saved float mean and rstd (as the CPU backend). */
struct ln_grad_elem {
	const float *dy, *x, *mean, *rstd;
	int C;
	__device__ void operator()(int r, int col, double *acc) const
	{
		size_t i = (size_t)r * C + col;
		double g = dy[i];
		double xh = ((double)x[i] - mean[r]) * rstd[r];
		acc[0] += g * xh;
		acc[1] += g;
	}
};

/* dx row by row (warp per row): dx = (dn - mean(dn) - x̂ mean(dn x̂)) rstd,
 * dn = dy w. Each lane reads its dy entries before writing the same dx
 * entries, so dx may alias dy. */
__global__ void layernorm_backward_dx_kernel(float *dx, const float *dy,
					     const float *x, const float *mean,
					     const float *rstd, const float *w,
					     int N, int C)
{
	const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (row >= N)
		return;
	const float *dyr = dy + (size_t)row * C, *xr = x + (size_t)row * C;
	float *dxr = dx + (size_t)row * C;
	const double m = mean[row], s = rstd[row];
	double dn_mean = 0.0, dnx_mean = 0.0;
	for (int i = lane; i < C; i += 32) {
		double dn = (double)dyr[i] * w[i];
		dn_mean += dn;
		dnx_mean += dn * (xr[i] - m) * s;
	}
	dn_mean = dq_warp_sum_d(dn_mean) / C;
	dnx_mean = dq_warp_sum_d(dnx_mean) / C;
	for (int i = lane; i < C; i += 32) {
		double dn = (double)dyr[i] * w[i];
		double xh = (xr[i] - m) * s;
		dxr[i] = (float)((dn - dn_mean - xh * dnx_mean) * s);
	}
}

/* dw, db first (they read dy), then dx: stream order makes dx = dy safe. */
void cu_layernorm_backward(void *ctx, void *dx, void *dw, void *db,
			   const void *dy, const void *x, const void *mean,
			   const void *rstd, const void *w, int N, int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0 || C <= 0)
		return;
	struct ln_grad_elem e = {(const float *)dy, (const float *)x,
				 (const float *)mean, (const float *)rstd, C};
	colsum_launch<2>(c, e, (float *)dw, (float *)db, N, C);
	const int rows = DQ_CU_THREADS / 32;
	layernorm_backward_dx_kernel<<<(unsigned int)((N + rows - 1) / rows),
				       DQ_CU_THREADS, 0, c->stream>>>(
	    (float *)dx, (const float *)dy, (const float *)x,
	    (const float *)mean, (const float *)rstd, (const float *)w, N, C);
	cuda_check_launch();
}

/* ------------------------------------------------------------ embeddings */

/* out(B*T, C) = wte[tok] + wpe[t], one warp per (b, t) row. */
__global__ void embed_forward_kernel(float *out, const int32_t *tok,
				     const float *wte, const float *wpe, int BT,
				     int T, int C)
{
	const int bt = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (bt >= BT)
		return;
	const float *e = wte + (size_t)tok[bt] * C;
	const float *p = wpe + (size_t)(bt % T) * C;
	float *o = out + (size_t)bt * C;
	for (int i = lane; i < C; i += 32)
		o[i] = e[i] + p[i];
}

void cu_embed_forward(void *ctx, void *out, const int32_t *tok, const void *wte,
		      const void *wpe, int B, int T, int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (B <= 0 || T <= 0 || C <= 0)
		return;
	const int BT = B * T, rows = DQ_CU_THREADS / 32;
	embed_forward_kernel<<<(unsigned int)((BT + rows - 1) / rows),
			       DQ_CU_THREADS, 0, c->stream>>>(
	    (float *)out, tok, (const float *)wte, (const float *)wpe, BT, T,
	    C);
	cuda_check_launch();
}

/* dwte[tok] += dout row, one warp per (b, t) row, float atomics (the one
 * nondeterministic sum of the backend; see the top of the file). Ids
 * outside [0, V) are skipped rather than written out of bounds. */
__global__ void embed_backward_wte_kernel(float *dwte, const float *dout,
					  const int32_t *tok, int BT, int C,
					  int V)
{
	const int bt = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (bt >= BT)
		return;
	const int id = tok[bt];
	if (id < 0 || id >= V)
		return;
	const float *g = dout + (size_t)bt * C;
	float *e = dwte + (size_t)id * C;
	for (int i = lane; i < C; i += 32)
		atomicAdd(&e[i], g[i]);
}

/* dwpe[t, c] += dout[b, t, c] for b = 0, 1, ... in order, in float: the
 * same additions in the same order as the CPU backend. n = T*C. */
__global__ void embed_backward_wpe_kernel(float *dwpe, const float *dout, int B,
					  size_t n)
{
	DQ_GRID_STRIDE(i, n)
	{
		float acc = dwpe[i];
		for (int b = 0; b < B; b++)
			acc += dout[(size_t)b * n + i];
		dwpe[i] = acc;
	}
}

void cu_embed_backward(void *ctx, void *dwte, void *dwpe, const void *dout,
		       const int32_t *tok, int B, int T, int C, int V)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (B <= 0 || T <= 0 || C <= 0)
		return;
	const int BT = B * T, rows = DQ_CU_THREADS / 32;
	embed_backward_wte_kernel<<<(unsigned int)((BT + rows - 1) / rows),
				    DQ_CU_THREADS, 0, c->stream>>>(
	    (float *)dwte, (const float *)dout, tok, BT, C, V);
	cuda_check_launch();
	size_t n = (size_t)T * (size_t)C;
	embed_backward_wpe_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS),
				    DQ_CU_THREADS, 0, c->stream>>>(
	    (float *)dwpe, (const float *)dout, B, n);
	cuda_check_launch();
}

/* ------------------------------------------------- softmax cross-entropy */

/* One block per row n of logits (V columns): max, Σ exp in double, the
 * probabilities, and loss[n] = log Σ exp + max - logits[target] in double.
 * The target logit is read before the first barrier, i.e. before any
 * thread writes probs (which may alias logits). A target outside [0, V)
 * gives a NaN loss instead of an out-of-bounds read. */
__global__ void __launch_bounds__(256)
    xent_forward_kernel(float *probs, const float *logits,
			const int32_t *targets, int V, double *loss)
{
	__shared__ float shf[32];
	__shared__ double shd[32];
	const size_t n = blockIdx.x;
	const float *l = logits + n * (size_t)V;
	float *p = probs + n * (size_t)V;
	const int tg = targets[n];
	const float lt = (tg >= 0 && tg < V) ? l[tg] : NAN;
	float mx = -INFINITY;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		mx = fmaxf(mx, l[j]);
	mx = dq_block_max_f(mx, shf);
	double sum = 0.0;
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		sum += (double)expf(l[j] - mx);
	sum = dq_block_sum_d(sum, shd);
	const float inv = (float)(1.0 / sum);
	for (int j = threadIdx.x; j < V; j += blockDim.x)
		p[j] = expf(l[j] - mx) * inv;
	if (threadIdx.x == 0)
		loss[n] = log(sum) + (double)mx - (double)lt;
}

/* *res = Σ x[0..n) in a fixed order: one block of 1024 threads, thread i
 * sums i, i+1024, ..., then the block tree. */
__global__ void __launch_bounds__(1024)
    sum_rows_kernel(double *res, const double *x, int n)
{
	__shared__ double sh[32];
	double s = 0.0;
	for (int i = threadIdx.x; i < n; i += blockDim.x)
		s += x[i];
	s = dq_block_sum_d(s, sh);
	if (threadIdx.x == 0)
		*res = s;
}

/* Mean loss over N rows; per-row losses go through ctx->red in chunks of
 * DQ_CU_RED_CAP rows. Synchronises (returns a number to the host). */
double cu_xent_forward(void *ctx, void *probs, const void *logits,
		       const int32_t *targets, int N, int V)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0)
		return 0.0;
	double total = 0.0;
	for (int n0 = 0; n0 < N; n0 += (int)DQ_CU_RED_CAP) {
		int cnt =
		    N - n0 < (int)DQ_CU_RED_CAP ? N - n0 : (int)DQ_CU_RED_CAP;
		size_t off = (size_t)n0 * (size_t)V;
		xent_forward_kernel<<<(unsigned int)cnt, 256, 0, c->stream>>>(
		    (float *)probs + off, (const float *)logits + off,
		    targets + n0, V, c->red);
		cuda_check_launch();
		sum_rows_kernel<<<1, 1024, 0, c->stream>>>(c->dres, c->red,
							   cnt);
		cuda_check_launch();
		cuda_check(cudaMemcpyAsync(c->hres, c->dres, sizeof(double),
					   cudaMemcpyDeviceToHost, c->stream));
		cuda_check(cudaStreamSynchronize(c->stream));
		total += *c->hres;
	}
	return total / N;
}

/* dlogits = scale (probs - onehot(target)), one block per row; computed as
 * scale*p, then -= scale at the target, the CPU backend's two roundings.
 * Each element is read and written by one thread: dlogits may alias
 * probs. */
__global__ void xent_backward_kernel(float *dl, const float *p,
				     const int32_t *targets, int V, float s)
{
	const size_t n = blockIdx.x;
	const int tg = targets[n];
	const float *pn = p + n * (size_t)V;
	float *dn = dl + n * (size_t)V;
	for (int j = threadIdx.x; j < V; j += blockDim.x) {
		float v = s * pn[j];
		if (j == tg)
			v -= s;
		dn[j] = v;
	}
}

void cu_xent_backward(void *ctx, void *dlogits, const void *probs,
		      const int32_t *targets, int N, int V, double scale)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0 || V <= 0)
		return;
	xent_backward_kernel<<<(unsigned int)N, 256, 0, c->stream>>>(
	    (float *)dlogits, (const float *)probs, targets, V, (float)scale);
	cuda_check_launch();
}

/* ------------------------------------------------------------------ adam */

__global__ void adam_kernel(float *p, const float *g, float *m, float *v,
			    size_t n, float lr, float b1, float b2, float eps,
			    float wd, float bc1, float bc2)
{
	DQ_GRID_STRIDE(i, n)
	dq_adam_f(&p[i], g[i], &m[i], &v[i], lr, b1, b2, eps, wd, bc1, bc2);
}

/* Bias corrections computed once on the host in double, rounded to float,
 * as the CPU backend. */
void cu_adam(void *ctx, void *p, const void *g, void *m, void *v, size_t n,
	     double lr, double beta1, double beta2, double eps, double wd,
	     int t)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	float bc1 = (float)(1.0 - pow(beta1, t)),
	      bc2 = (float)(1.0 - pow(beta2, t));
	adam_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		      c->stream>>>(
	    (float *)p, (const float *)g, (float *)m, (float *)v, n, (float)lr,
	    (float)beta1, (float)beta2, (float)eps, (float)wd, bc1, bc2);
	cuda_check_launch();
}

/* ------------------------------------------------------ solver vector ops */

/* *res = Σ x[i] y[i] in double (float products are exact in double).
 * Block sums over a fixed grid-stride assignment go to part[block]; the
 * last block (ticket) adds them in a fixed order and resets the ticket. */
__global__ void __launch_bounds__(256)
    dot_kernel(const float *x, const float *y, size_t n, double *part,
	       unsigned int *ticket, double *res)
{
	__shared__ double sh[32];
	__shared__ int is_last;
	double s = 0.0;
	DQ_GRID_STRIDE(i, n)
	s += (double)x[i] * (double)y[i];
	s = dq_block_sum_d(s, sh);
	if (gridDim.x == 1) {
		if (threadIdx.x == 0)
			*res = s;
		return;
	}
	if (threadIdx.x == 0) {
		part[blockIdx.x] = s;
		__threadfence();
		is_last = atomicAdd(ticket, 1u) == gridDim.x - 1;
	}
	__syncthreads();
	if (!is_last)
		return;
	double t = 0.0;
	for (unsigned int j = threadIdx.x; j < gridDim.x; j += blockDim.x)
		t += __ldcg(&part[j]);
	t = dq_block_sum_d(t, sh);
	if (threadIdx.x == 0) {
		*res = t;
		*ticket = 0;
	}
}

/* Synchronises: the sum comes back to the host. */
static double dot_launch(struct dq_cuda_ctx *c, const float *x, const float *y,
			 size_t n)
{
	if (!n)
		return 0.0;
	unsigned int g = dq_grid_1d(c, n, 256);
	if (g > 4u * (unsigned int)c->sm_count)
		g = 4u * (unsigned int)c->sm_count;
	dot_kernel<<<g, 256, 0, c->stream>>>(x, y, n, c->red, c->tickets,
					     c->dres);
	cuda_check_launch();
	cuda_check(cudaMemcpyAsync(c->hres, c->dres, sizeof(double),
				   cudaMemcpyDeviceToHost, c->stream));
	cuda_check(cudaStreamSynchronize(c->stream));
	return *c->hres;
}

double cu_dot(void *ctx, const void *x, const void *y, size_t n)
{
	return dot_launch(dq_cu(ctx), (const float *)x, (const float *)y, n);
}

/* nan and inf propagate through the sum of squares. */
double cu_norm(void *ctx, const void *x, size_t n)
{
	const float *f = (const float *)x;
	return sqrt(dot_launch(dq_cu(ctx), f, f, n));
}

/* part[s G + g] = Σ over block g's grid-stride share of segment s
 * (blockIdx.y) of x·y, in double. */
__global__ void __launch_bounds__(256)
    dot_segments_kernel(const float *x, const float *y, size_t len,
			double *part)
{
	__shared__ double sh[32];
	const size_t s = blockIdx.y, G = gridDim.x;
	const float *xs = x + s * len, *ys = y + s * len;
	double acc = 0.0;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < len;
	     i += G * blockDim.x)
		acc += (double)xs[i] * (double)ys[i];
	acc = dq_block_sum_d(acc, sh);
	if (threadIdx.x == 0)
		part[s * G + blockIdx.x] = acc;
}

/* res[s] = Σ_g part[s G + g] in order: one thread per segment. */
__global__ void dot_segments_finish_kernel(const double *part, int G,
					   size_t nseg, double *res)
{
	DQ_GRID_STRIDE(s, nseg)
	{
		double t = 0.0;
		for (int g = 0; g < G; g++)
			t += part[s * (size_t)G + g];
		res[s] = t;
	}
}

/* Segments go in chunks that fit the reduction scratch and gridDim.y;
 * each chunk is two launches and one copy back, then one synchronisation
 * for all. G blocks per segment: enough blocks to fill the device about
 * four times over, none idle on short segments. */
void cu_dot_segments(void *ctx, double *out, const void *x, const void *y,
		     size_t nseg, size_t len)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!nseg)
		return;
	if (!len) {
		for (size_t i = 0; i < nseg; i++)
			out[i] = 0.0;
		return;
	}
	size_t G = (4 * (size_t)c->sm_count + nseg - 1) / nseg;
	size_t gmax = (len + 4 * 256 - 1) / (4 * 256);
	if (G > gmax)
		G = gmax;
	if (G > 64)
		G = 64;
	if (G < 1)
		G = 1;
	size_t chunk = DQ_CU_RED_CAP / (G + 1);
	if (chunk > 65535)
		chunk = 65535;
	for (size_t s0 = 0; s0 < nseg; s0 += chunk) {
		size_t ns = nseg - s0 < chunk ? nseg - s0 : chunk;
		const float *xs = (const float *)x + s0 * len;
		const float *ys = (const float *)y + s0 * len;
		double *res = c->red + ns * G;
		dot_segments_kernel<<<dim3((unsigned)G, (unsigned)ns), 256, 0,
				      c->stream>>>(xs, ys, len, c->red);
		cuda_check_launch();
		dot_segments_finish_kernel<<<dq_grid_1d(c, ns, DQ_CU_THREADS),
					     DQ_CU_THREADS, 0, c->stream>>>(
		    c->red, (int)G, ns, res);
		cuda_check_launch();
		cuda_check(cudaMemcpyAsync(out + s0, res, ns * sizeof(double),
					   cudaMemcpyDeviceToHost, c->stream));
		if (s0 + ns < nseg) /* the next chunk reuses the scratch */
			cuda_check(cudaStreamSynchronize(c->stream));
	}
	cuda_check(cudaStreamSynchronize(c->stream));
}

__global__ void axpy_kernel(float *y, float a, const float *x, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	y[i] += a * x[i];
}

void cu_axpy(void *ctx, void *y, double a, const void *x, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	axpy_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		      c->stream>>>((float *)y, (float)a, (const float *)x, n);
	cuda_check_launch();
}

__global__ void scale_kernel(float *x, float a, size_t n)
{
	DQ_GRID_STRIDE(i, n)
	x[i] *= a;
}

void cu_scale(void *ctx, void *x, double a, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n)
		return;
	scale_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0,
		       c->stream>>>((float *)x, (float)a, n);
	cuda_check_launch();
}
