/* cuda_ops.cu — the CUDA backend's dense and per-row ops: fill, zero_rows,
 * transpose, GEMM through cuBLAS, and kernels for bias, activations,
 * LayerNorm and embeddings (cuda_vector.cu has cross-entropy, Adam and the
 * solvers' vector ops; cuda_attention.cu attention). float32 throughout;
 * per-element formulas from elementwise.h (the CPU backend uses the same).
 * The contracts (aliasing, += vs overwrite) are kernels/backend.h's and
 * match kernels/cpu/cpu_backend.c op for op.
 *
 * What runs where: everything on the GPU, on ctx->stream, asynchronously;
 * nothing here synchronises.
 *
 * Letters: N rows, C columns, B batch, T sequence, V vocabulary.
 *
 * Determinism: every kernel but embed_backward's dwte scatter gives the
 * same bits run to run on one GPU model. Column sums (bias_backward,
 * LayerNorm dw/db) split the rows into S slabs (S from N, C and the SM
 * count), sum each slab in a fixed order in double, and the last block of
 * each column group (a ticket counter per group) adds the S partials in
 * slab order. dwte += scatter(dout) uses float atomicAdd, so rows whose
 * token occurs several times in a batch get their terms in an unspecified
 * order: the last bits of those rows of dwte vary run to run (nothing else
 * does). dwpe is summed over the batch in order, without atomics.
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

#include <type_traits>

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

/* act'(x) from y = act(x) for RELU, TANH, SIGMOID; from x for GELU. */
template <int ACT>
__device__ __forceinline__ float act_slope(const float *x, const float *y,
					   size_t i)
{
	if (ACT == ACT_RELU)
		return dq_relu_grad_from_y_f(y[i]);
	if (ACT == ACT_GELU)
		return dq_gelu_grad_f(x[i]);
	if (ACT == ACT_TANH)
		return dq_tanh_grad_from_y_f(y[i]);
	return dq_sigmoid_grad_from_y_f(y[i]);
}

/* The identity for ACT < 0 (bias_forward), else act_apply<ACT>. */
template <int ACT> __device__ __forceinline__ float act_or_id(float x)
{
	if constexpr (ACT < 0)
		return x;
	else
		return act_apply<ACT>(x);
}

/* y = act(y + b[col]) over y(n / C, C); ACT < 0: y += b. */
template <int ACT>
__global__ void bias_forward_kernel(float *y, const float *b, size_t n, int C)
{
	size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	const size_t stride = (size_t)gridDim.x * blockDim.x;
	if (i >= n)
		return;
	int col = (int)(i % (size_t)C);
	const int step = (int)(stride % (size_t)C);
	for (; i < n; i += stride) {
		y[i] = act_or_id<ACT>(y[i] + b[col]);
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
	bias_forward_kernel<-1>
	    <<<dq_grid_1d(c, n, DQ_CU_THREADS), DQ_CU_THREADS, 0, c->stream>>>(
		(float *)y, (const float *)b, n, C);
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
	dx[i] = dy[i] * act_slope<ACT>(x, y, i);
}

/* Calls launch(std::integral_constant<int, ACT>()) for the runtime act:
 * one kernel instance per activation, each with its formula fixed. Walks
 * the enum from A = ACT_RELU to ACT_SIGMOID at compile time. */
template <int A = ACT_RELU, class Launch>
static void act_dispatch(enum act_kind act, Launch launch)
{
	if constexpr (A <= ACT_SIGMOID) {
		if (act == A)
			launch(std::integral_constant<int, A>());
		else
			act_dispatch<A + 1>(act, launch);
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
	act_dispatch(act, [&](auto k) {
		act_forward_kernel<decltype(k)::value>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(y, x, n);
	});
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
	act_dispatch(act, [&](auto k) {
		act_backward_kernel<decltype(k)::value>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(dx, dy, x, y, n);
	});
	cuda_check_launch();
}

/* y = act(y + b) in one pass (bias_forward_kernel with the act). */
void cu_bias_act_forward(void *ctx, enum act_kind act, void *y_, const void *b_,
			 int N, int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	float *y = (float *)y_;
	const float *b = (const float *)b_;
	size_t n = (size_t)(N > 0 ? N : 0) * (size_t)(C > 0 ? C : 0);
	if (!n)
		return;
	unsigned int g = dq_grid_1d(c, n, DQ_CU_THREADS);
	act_dispatch(act, [&](auto k) {
		bias_forward_kernel<decltype(k)::value>
		    <<<g, DQ_CU_THREADS, 0, c->stream>>>(y, b, n, C);
	});
	cuda_check_launch();
}

/* dx = dy act'(y) written while the column sum adds it up: each (row, col)
 * is visited once by colsum_kernel, so dx may alias dy. */
template <int ACT> struct act_bias_elem {
	float *dx;
	const float *dy, *y;
	int C;
	__device__ void operator()(int r, int col, double *acc) const
	{
		size_t i = (size_t)r * C + col;
		float v = dy[i] * act_slope<ACT>(NULL, y, i);
		dx[i] = v;
		acc[0] += v;
	}
};

void cu_act_bias_backward(void *ctx, enum act_kind act, void *dx,
			  const void *dy, const void *y, void *db, int N, int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0 || C <= 0)
		return;
	if (!db) {
		cu_act_backward(ctx, act, dx, dy, NULL, y, (size_t)N * C);
		return;
	}
	act_dispatch(act, [&](auto k) {
		constexpr int A = decltype(k)::value;
		if constexpr (A != ACT_GELU) {
			act_bias_elem<A> e = {(float *)dx, (const float *)dy,
					      (const float *)y, C};
			colsum_launch<1>(c, e, (float *)db, (float *)NULL, N,
					 C);
		}
	});
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

/* Blocks of DQ_CU_THREADS for one warp per row over rows > 0 rows. */
static unsigned int warp_row_blocks(int rows)
{
	const int per = DQ_CU_THREADS / 32;
	return (unsigned int)((rows + per - 1) / per);
}

/* One warp per row (8 rows per 256-thread block): two-pass mean and biased
 * variance in double, as the CPU backend. With res or bias, x is first
 * overwritten with (x + res) + bias (each lane rewrites and rereads its own
 * elements). A whole warp leaves together when its row is past N, so the
 * shuffles always see 32 lanes. */
__global__ void layernorm_forward_kernel(float *y, float *mean, float *rstd,
					 float *x, const float *res,
					 const float *bias, const float *w,
					 const float *b, int N, int C)
{
	const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
	const int lane = threadIdx.x & 31;
	if (row >= N)
		return;
	float *xr = x + (size_t)row * C;
	float *yr = y + (size_t)row * C;
	const float *rr = res ? res + (size_t)row * C : NULL;
	double m = 0.0, v = 0.0;
	for (int i = lane; i < C; i += 32) {
		float xi = xr[i];
		if (rr)
			xi += rr[i];
		if (bias)
			xi += bias[i];
		if (rr || bias)
			xr[i] = xi;
		m += xi;
	}
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

void cu_layernorm_forward(void *ctx, void *y, void *mean, void *rstd, void *x,
			  const void *res, const void *bias, const void *w,
			  const void *b, int N, int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0 || C <= 0)
		return;
	layernorm_forward_kernel<<<warp_row_blocks(N), DQ_CU_THREADS, 0,
				   c->stream>>>(
	    (float *)y, (float *)mean, (float *)rstd, (float *)x,
	    (const float *)res, (const float *)bias, (const float *)w,
	    (const float *)b, N, C);
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
__global__ void layernorm_backward_dx_kernel(float *dx, float *dres,
					     const float *dy, const float *x,
					     const float *mean,
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
		float v = (float)((dn - dn_mean - xh * dnx_mean) * s);
		dxr[i] = v;
		if (dres)
			dres[(size_t)row * C + i] = v;
	}
}

/* dw, db first (they read dy), then dx and dres, then dbias from dx: stream
 * order makes dx = dy safe. */
void cu_layernorm_backward(void *ctx, void *dx, void *dres, void *dbias,
			   void *dw, void *db, const void *dy, const void *x,
			   const void *mean, const void *rstd, const void *w,
			   int N, int C)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (N <= 0 || C <= 0)
		return;
	struct ln_grad_elem e = {(const float *)dy, (const float *)x,
				 (const float *)mean, (const float *)rstd, C};
	colsum_launch<2>(c, e, (float *)dw, (float *)db, N, C);
	layernorm_backward_dx_kernel<<<warp_row_blocks(N), DQ_CU_THREADS, 0,
				       c->stream>>>(
	    (float *)dx, (float *)dres, (const float *)dy, (const float *)x,
	    (const float *)mean, (const float *)rstd, (const float *)w, N, C);
	cuda_check_launch();
	if (dbias)
		cu_bias_backward(ctx, dbias, dx, N, C);
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
	const int BT = B * T;
	embed_forward_kernel<<<warp_row_blocks(BT), DQ_CU_THREADS, 0,
			       c->stream>>>((float *)out, tok,
					    (const float *)wte,
					    (const float *)wpe, BT, T, C);
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
	const int BT = B * T;
	embed_backward_wte_kernel<<<warp_row_blocks(BT), DQ_CU_THREADS, 0,
				    c->stream>>>(
	    (float *)dwte, (const float *)dout, tok, BT, C, V);
	cuda_check_launch();
	size_t n = (size_t)T * (size_t)C;
	embed_backward_wpe_kernel<<<dq_grid_1d(c, n, DQ_CU_THREADS),
				    DQ_CU_THREADS, 0, c->stream>>>(
	    (float *)dwpe, (const float *)dout, B, n);
	cuda_check_launch();
}
