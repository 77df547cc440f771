/* cuda_common.cuh — private to kernels/cuda/: the CUDA backend's context,
 * the check macros, launch helpers, warp/block reductions and the op entry
 * points that cuda_init.cu puts into the ops table.
 *
 * Structure (ggml / llm.c): every op is kernel (`<op>_kernel`, __global__)
 * → launcher (grid/block sizes, one launch, error check) → op entry
 * (`cu_<op>`, the struct backend_ops signature). Files:
 *   cuda_init.cu       init/destroy, info, memory (pool), sync, events,
 *                      transfers, pool stats, TF32, the ops table
 *   cuda_ops.cu        fill, zero_rows, transpose, GEMM (cuBLAS), bias,
 *                      activations, LayerNorm, embeddings
 *   cuda_vector.cu     cross-entropy, Adam, solver vector ops
 *   cuda_solve.cu      the solvers' decisions on the device (solve_ctl.h)
 *   cuda_attention.cu  causal multi-head attention forward/backward
 *   cuda_copy.cu       offload: pinned host memory, the copy stream, its
 *                      events and statistics
 *   cuda_bf16.cu       bf16 mixed precision: float32 <-> bf16 conversion,
 *                      GEMM on bf16 operands (cublasGemmEx)
 *
 * Everything runs on one non-blocking stream per backend (ctx->stream);
 * cuBLAS is bound to it. Element type float32; token ids int32.
 */
#ifndef DQ_CUDA_COMMON_CUH
#define DQ_CUDA_COMMON_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "../backend.h"
}

/* The per-element formulas shared with the CPU backend, float instance
 * (dq_gelu_f, dq_adam_f, ...), __host__ __device__ under nvcc. */
#define DQ_REAL float
#define DQ_SFX	f
#include "../elementwise.h"

/* Threads per block of the 1-D (grid-stride) and warp-per-row kernels. */
#define DQ_CU_THREADS 256
/* Doubles in the device reduction scratch (ctx->red): partial sums of
 * column reductions, dot/norm and per-row cross-entropy losses. 8 MiB. */
#define DQ_CU_RED_CAP ((size_t)1 << 20)
/* "Last block done" counters (ctx->tickets), one per column group of 32. */
#define DQ_CU_TICKETS 65536
/* Floats in the host staging buffer of upload/download (4 MiB, pinned). */
#define DQ_CU_STAGING ((size_t)1 << 20)
/* cuBLAS workspace, NVIDIA's recommendation for Hopper (32 MiB). */
#define DQ_CU_CUBLAS_WS ((size_t)32 << 20)
/* The attention's batched-GEMM path (cuda_attention.cu): sequences of at
 * least this length take it, up to DQ_CU_ATT_MAXBH (batch, head) pairs;
 * its pointer arrays (ctx->att_ptrs, DQ_CU_ATT_ARRAYS of them: 9 fp32,
 * 6 bf16) take DQ_CU_ATT_MAXBH * 15 * 8 bytes = 1.875 MiB. */
#define DQ_CU_ATT_GEMM_MIN_T 128
#define DQ_CU_ATT_MAXBH	     16384
#define DQ_CU_ATT_ARRAYS     15

/* A device-side loop being recorded (cuda_graph.cu): its root graph and
 * the root's last node (NULL while empty). */
struct dq_cu_loop {
	cudaGraph_t root;
	cudaGraphNode_t last;
	cudaGraphConditionalHandle handle; /* a WHILE loop's */
};

/* cuda_epilogue.cu's kept cuBLASLt plans (descriptors and algorithm per
 * shape, mode and alignment). */
#define DQ_LT_PLANS 16
struct dq_lt_plan;

struct dq_cuda_ctx {
	int device;
	int sm_count;
	cudaStream_t stream; /* every op, copy and event goes here */
	cublasHandle_t cublas;
	cublasLtHandle_t lt;	     /* cuda_epilogue.cu's matmuls */
	struct dq_lt_plan *lt_plans; /* DQ_LT_PLANS, calloc */
	int lt_next;		     /* the plan the next new one replaces */
	cudaMemPool_t pool; /* the device's default pool, shared in-process */
	cudaEvent_t ev[BACKEND_TIMER_SLOTS];
	int n_ev;	  /* events created (for cleanup) */
	void *cublas_ws;  /* DQ_CU_CUBLAS_WS bytes, cudaMalloc */
	double *red;	  /* DQ_CU_RED_CAP doubles, cudaMalloc */
	float **att_ptrs; /* DQ_CU_ATT_ARRAYS x DQ_CU_ATT_MAXBH, cudaMalloc */
	unsigned int *tickets; /* DQ_CU_TICKETS, zero between launches */
	double *dres;	       /* device result slot of dot/norm/xent */
	double *hres;	       /* pinned host copy of *dres */
	float *staging;	       /* DQ_CU_STAGING floats */
	int staging_pinned;    /* cudaHostAlloc (1) or malloc (0) */
	struct backend_info info;
	/* offload (cuda_copy.cu): the copy stream, the copy events, an event
	 * to order it after the compute stream, and timing event pairs */
	cudaStream_t copy_stream;
	cudaEvent_t cev[BACKEND_COPY_EVENTS];
	cudaEvent_t order_ev;
	int n_cev; /* copy events created, order_ev included */
	struct dq_cu_timing *timing; /* cap_timing pairs, n_timing in use */
	int n_timing, cap_timing;
	struct backend_copy_stats copies; /* counts since copy_stats */
	void *reserve; /* cap_device's hold on the memory above the cap */
	struct dq_cu_loop loop; /* the device-side loop being recorded */
};

/* A pair of timing events: a copy on the copy stream (stall 0) or a wait of
 * the compute stream (stall 1). */
struct dq_cu_timing {
	cudaEvent_t a, b;
	int stall;
};

/* ---- error checks: print the failing call, file and line, then abort
 * (ops return void; a failed launch leaves nothing sensible to return, and
 * the suite runner turns a crashed child into an error record). */

static inline void dq_cuda_check_(cudaError_t e, const char *call,
				  const char *file, int line)
{
	if (e == cudaSuccess)
		return;
	fprintf(stderr, "deqbench: CUDA error %s (%s) in %s at %s:%d\n",
		cudaGetErrorName(e), cudaGetErrorString(e), call, file, line);
	abort();
}

static inline void dq_cublas_check_(cublasStatus_t s, const char *call,
				    const char *file, int line)
{
	if (s == CUBLAS_STATUS_SUCCESS)
		return;
	fprintf(stderr, "deqbench: cuBLAS error %d (%s) in %s at %s:%d\n",
		(int)s, cublasGetStatusString(s), call, file, line);
	abort();
}

#define cuda_check(call)   dq_cuda_check_((call), #call, __FILE__, __LINE__)
#define cublas_check(call) dq_cublas_check_((call), #call, __FILE__, __LINE__)
/* After every <<<>>>: launch-configuration errors surface here, errors of
 * the running kernel at the next synchronising call. */
#define cuda_check_launch()                                                    \
	dq_cuda_check_(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

static inline struct dq_cuda_ctx *dq_cu(void *ctx)
{
	return (struct dq_cuda_ctx *)ctx;
}

/* Blocks for a grid-stride loop over n elements: enough to fill the device
 * a couple of times over, never more than the loop needs. n > 0. */
static inline unsigned int dq_grid_1d(const struct dq_cuda_ctx *c, size_t n,
				      int threads)
{
	size_t b = (n + (size_t)threads - 1) / (size_t)threads;
	size_t cap = (size_t)c->sm_count * 16;
	if (b > cap)
		b = cap;
	return (unsigned int)(b ? b : 1);
}

/* Grid-stride loop over [0, n) with a size_t index (n may exceed 2^31). */
#define DQ_GRID_STRIDE(i, n)                                                   \
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;         \
	     i < (n); i += (size_t)gridDim.x * blockDim.x)

/* ---- warp and block reductions. Fixed shuffle trees: the result depends
 * only on the inputs and the block shape, so reductions are deterministic
 * run to run. All 32 lanes of the warp must call them. */

__device__ __forceinline__ float dq_warp_max_f(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

__device__ __forceinline__ float dq_warp_sum_f(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ double dq_warp_sum_d(double v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

/* Reduction over a 1-D block (blockDim.x a multiple of 32, <= 1024) with
 * the warp reduction warp and pad for the lanes past the last warp,
 * returned to every thread. sh: 32 T of shared memory; may be reused by
 * the next call (the leading barrier protects it). Every thread must call
 * it. */
template <class T, T (*warp)(T)>
__device__ __forceinline__ T dq_block_reduce(T v, T *sh, T pad)
{
	const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
	const int nw = blockDim.x >> 5;
	v = warp(v);
	__syncthreads();
	if (lane == 0)
		sh[w] = v;
	__syncthreads();
	if (w == 0) {
		v = lane < nw ? sh[lane] : pad;
		v = warp(v);
		if (lane == 0)
			sh[0] = v;
	}
	__syncthreads();
	return sh[0];
}

/* Sum of a double over the block. */
__device__ __forceinline__ double dq_block_sum_d(double v, double *sh)
{
	return dq_block_reduce<double, dq_warp_sum_d>(v, sh, 0.0);
}

/* Max over the block. NaN inputs are dropped by fmaxf; callers that need
 * NaN to propagate (softmax) get it through the sum. */
__device__ __forceinline__ float dq_block_max_f(float v, float *sh)
{
	return dq_block_reduce<float, dq_warp_max_f>(v, sh, -INFINITY);
}

/* ---- op entries (struct backend_ops signatures), by file ---- */

/* cuda_ops.cu */
void cu_fill(void *ctx, void *dst, double value, size_t n);
void cu_zero_rows(void *ctx, void *dst, size_t rows, size_t cols, size_t ld);
void cu_transpose(void *ctx, void *dst, const void *src, int R, int C, int add);
void cu_gemm(void *ctx, int ta, int tb, int M, int N, int K, double alpha,
	     const void *A, int lda, const void *B, int ldb, double beta,
	     void *C, int ldc);
void cu_gemm_batched(void *ctx, int ta, int tb, int M, int N, int K,
		     double alpha, const void *A, int lda, size_t sA,
		     const void *B, int ldb, size_t sB, double beta, void *C,
		     int ldc, size_t sC, int batch);
void cu_bias_forward(void *ctx, void *y, const void *b, int N, int C);
void cu_bias_backward(void *ctx, void *db, const void *dy, int N, int C);
void cu_act_forward(void *ctx, enum act_kind act, void *y, const void *x,
		    size_t n);
void cu_act_backward(void *ctx, enum act_kind act, void *dx, const void *dy,
		     const void *x, const void *y, size_t n);
void cu_mul(void *ctx, void *dst, const void *a, const void *b, size_t n);
void cu_bias_act_forward(void *ctx, enum act_kind act, void *y, const void *b,
			 int N, int C);
void cu_act_bias_backward(void *ctx, enum act_kind act, void *dx,
			  const void *dy, const void *y, void *db, int N,
			  int C);
void cu_layernorm_forward(void *ctx, void *y, void *mean, void *rstd, void *x,
			  const void *res, const void *bias, const void *w,
			  const void *b, int N, int C);
void cu_layernorm_backward(void *ctx, void *dx, void *dres, void *dbias,
			   void *dw, void *db, const void *dy, const void *x,
			   const void *mean, const void *rstd, const void *w,
			   int N, int C);
void cu_embed_forward(void *ctx, void *out, const int32_t *tok, const void *wte,
		      const void *wpe, int B, int T, int C);
void cu_embed_backward(void *ctx, void *dwte, void *dwpe, const void *dout,
		       const int32_t *tok, int B, int T, int C, int V);

/* cuda_vector.cu */
double cu_xent_forward(void *ctx, void *probs, const void *logits,
		       const int32_t *targets, int N, int V);
void cu_xent_backward(void *ctx, void *dlogits, const void *probs,
		      const int32_t *targets, int N, int V, double scale);
void cu_xent_train(void *ctx, void *dlogits, const void *logits,
		   const int32_t *targets, int N, int V, double scale,
		   double *loss);
void cu_adam(void *ctx, void *p, const void *g, void *m, void *v, size_t n,
	     const double *hyper, double beta1, double beta2, double eps,
	     double wd);
void cu_sumsq(void *ctx, double *sumsq, const void *x, size_t n);
void cu_clip(void *ctx, void *x, size_t n, const double *sumsq, double clip);
void cu_dot_segments(void *ctx, double *out, const void *x, const void *y,
		     size_t nseg, size_t len);
void cu_residual_dots(void *ctx, void *g, const void *fx, const void *x,
		      double *seg_f, double *seg_g, size_t nseg, size_t len);
void cu_axpy(void *ctx, void *y, double a, const void *x, size_t n);
void cu_scale(void *ctx, void *x, double a, size_t n);
void cu_sub(void *ctx, void *dst, const void *a, const void *b, size_t n);

/* cuda_solve.cu */
void cu_solve_check(void *ctx, const struct dq_solve_ctl *c);
void cu_copy_masked(void *ctx, void *dst, const void *src, const double *flag,
		    int S, int P, size_t len);
void cu_scale_recip(void *ctx, void *dst, const void *src, const double *seg,
		    int S, int P, size_t len);
void cu_anderson_weights(void *ctx, const struct dq_solve_ctl *c,
			 const void *row, void *alpha, int slot, int nact,
			 double lambda);

/* cuda_epilogue.cu */
void cu_gemm_bias_act(void *ctx, int relu, int M, int N, int K, double beta,
		      const void *A, const void *W, const uint16_t *W16,
		      const void *b, void *C, void *scratch);
/* The plans' table (0, or -1 out of host memory) and its release (with
 * every plan's descriptors; none made is fine). */
int cu_epilogue_init(struct dq_cuda_ctx *c);
void cu_epilogue_destroy(struct dq_cuda_ctx *c);

/* cuda_fused_solve.cu */
void cu_fused_measure(void *ctx, const struct dq_solve_ctl *c, const void *fx,
		      const void *x, void *g, const void *dx, void *dg,
		      const void *U, const void *V, size_t len);
void cu_fused_apply(void *ctx, const struct dq_solve_ctl *c, void *x, void *dx,
		    const void *g, const void *dg, void *U, void *V, void *best,
		    size_t len);
void cu_fused_anderson_measure(void *ctx, const struct dq_solve_ctl *c,
			       const void *fx, const void *xn, void *X, void *G,
			       size_t len);
void cu_fused_anderson_apply(void *ctx, const struct dq_solve_ctl *c, void *xn,
			     const void *X, const void *G, void *best,
			     size_t len);

/* cuda_attention.cu */
void cu_attention_forward(void *ctx, void *out, void *att, const void *qkv,
			  int B, int T, int C, int H);
void cu_attention_backward(void *ctx, void *dqkv, void *scratch,
			   const void *dout, const void *qkv, const void *att,
			   int B, int T, int C, int H);
void cu_attention_forward_bf16(void *ctx, void *out, void *att, const void *qkv,
			       void *ws, int B, int T, int C, int H);
void cu_attention_backward_bf16(void *ctx, void *dqkv, void *scratch,
				const void *dout, const void *qkv,
				const void *att, void *ws, int B, int T, int C,
				int H);

/* cuda_flash.cu */
void cu_attention_flash_forward(void *ctx, void *out, void *lse,
				const void *qkv, int B, int T, int C, int H,
				int bf16);
void cu_attention_flash_backward(void *ctx, void *dqkv, void *scratch,
				 const void *dout, const void *qkv,
				 const void *out, const void *lse, void *ws,
				 int B, int T, int C, int H, int bf16);

/* cuda_bf16.cu */
void cu_to_bf16(void *ctx, uint16_t *dst, const void *src, size_t n);
void cu_from_bf16(void *ctx, void *dst, const uint16_t *src, size_t n);
void cu_round_bf16(void *ctx, void *x, size_t n);
/* dst(n) = bf16(src(n)) widened, float32 (the attention's rounded dout). */
void cu_round_bf16_to(void *ctx, float *dst, const float *src, size_t n);
void cu_gemm_bf16_arrays(void *ctx, int ta, int tb, int M, int N, int K,
			 double alpha, const uint16_t *A, int lda,
			 const uint16_t *B, int ldb, double beta, void *C,
			 int ldc, void *scratch);
void cu_gemm_bf16_mixed(void *ctx, int ta, int tb, int M, int N, int K,
			double alpha, const void *A, int lda, const uint16_t *B,
			int ldb, double beta, void *C, int ldc, void *scratch);
void cu_gemm_bf16(void *ctx, int ta, int tb, int M, int N, int K, double alpha,
		  const void *A, int lda, const void *B, int ldb, double beta,
		  void *C, int ldc, void *scratch);

/* cuda_copy.cu: the ops, and their setup and teardown (called by
 * backend_cuda_init's steps and cu_destroy). */
void *cu_host_alloc(void *ctx, size_t bytes);
void cu_host_free(void *ctx, void *p);
void cu_copy_async(void *ctx, void *dst, const void *src, size_t bytes, int ev);
void cu_copy_wait(void *ctx, int ev);
void cu_copy_stats(void *ctx, struct backend_copy_stats *out);
void *cu_managed_alloc(void *ctx, size_t bytes);
void cu_managed_free(void *ctx, void *p);
void cu_prefetch(void *ctx, const void *p, size_t bytes, int to_device, int ev);
int cu_cap_device(void *ctx, size_t bytes, char *err, size_t errlen);
cudaError_t cu_copy_init(struct dq_cuda_ctx *c);

/* cuda_graph.cu: the graph ops. */
void cu_graph_begin(void *ctx);
void *cu_graph_end(void *ctx);
void cu_graph_loop_begin(void *ctx);
void cu_graph_loop_next(void *ctx, const double *go);
void *cu_graph_loop_end(void *ctx);
void cu_graph_while_begin(void *ctx);
void *cu_graph_while_end(void *ctx, const double *go);
void cu_graph_launch(void *ctx, void *g);
void cu_graph_free(void *ctx, void *g);
void cu_copy_destroy(struct dq_cuda_ctx *c);

#endif
