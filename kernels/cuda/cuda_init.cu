/* cuda_init.cu — the CUDA backend ("cuda", float32): construction, device
 * facts, memory, synchronisation, timing, transfers and the ops table. The
 * compute ops are in cuda_ops.cu, cuda_vector.cu, cuda_attention.cu and
 * cuda_bf16.cu.
 *
 * What runs where: one GPU (the CUDA runtime's current device, so
 * CUDA_VISIBLE_DEVICES picks it), one non-blocking stream per backend that
 * every op, copy, allocation and event uses, one cuBLAS handle bound to
 * that stream with its own fixed workspace.
 *
 * Memory. raw_alloc/raw_free are cudaMallocFromPoolAsync/cudaFreeAsync on
 * the stream, from the device's default memory pool, whose release
 * threshold is raised to UINT64_MAX: freed blocks stay in the pool for the
 * next allocation instead of going back to the driver at every
 * synchronisation, so steady-state training steps never call the driver.
 * Because allocations are stream-ordered, a pointer is usable by work on
 * this backend's stream as soon as raw_alloc returns. The pool is the
 * device's and so is shared by every backend (and any other user) in the
 * process: pool_stats reports process-wide figures; kernels/backend.c keeps
 * the per-category counters of this backend. destroy trims the pool.
 * Fixed per-backend memory outside the pool and outside the categories,
 * allocated once at init: the cuBLAS workspace (32 MiB), the reduction
 * scratch (8 MiB) and its counters (256 KiB) on the device; a 4 MiB pinned
 * staging buffer and an 8-byte pinned result slot on the host.
 *
 * Transfers. upload/download convert between the host's double and the
 * device's float through the staging buffer in chunks of DQ_CU_STAGING
 * elements, synchronising the stream after each chunk (the buffer is
 * reused): they block, and belong outside timed steps. upload_bytes is an
 * asynchronous copy (pageable sources are consumed before it returns; a
 * pinned source is waited for), download_bytes returns with the data.
 * copy is a device-to-device cudaMemcpyAsync (no partial overlap; dst ==
 * src is a no-op).
 *
 * Timing. timer_mark records cudaEvent slot on the stream (no host wait);
 * timer_elapsed_ms waits for the 'to' event and returns
 * cudaEventElapsedTime(from, to): device time between the two marks.
 *
 * Errors. CUDA/cuBLAS failures inside ops print the call, file and line
 * and abort (cuda_common.cuh). Init failures return -1 with one line; with
 * no usable GPU (no driver, no device) the line says "no CUDA device was
 * found", which the tests use to skip.
 */
#include "cuda_common.cuh"

#include <string.h>

extern "C" {
#include "../backend_impl.h"
}

/* ---------------------------------------------------------------- memory */

static void *cu_raw_alloc(void *ctx, size_t bytes)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	void *p = NULL;
	cudaError_t e = cudaMallocFromPoolAsync(&p, bytes, c->pool, c->stream);
	if (e != cudaSuccess) {
		(void)cudaGetLastError(); /* out of memory is not sticky */
		return NULL;
	}
	return p;
}

static void cu_raw_free(void *ctx, void *p)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (p)
		cuda_check(cudaFreeAsync(p, c->stream));
}

/* Non-fatal check for teardown: report and go on freeing the rest. */
static void cu_warn(cudaError_t e, const char *what)
{
	if (e != cudaSuccess)
		fprintf(stderr, "deqbench: CUDA teardown: %s: %s\n", what,
			cudaGetErrorString(e));
}

static void cu_destroy(void *ctx)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!c)
		return;
	if (c->stream)
		cu_warn(cudaStreamSynchronize(c->stream), "stream sync");
	for (int i = 0; i < c->n_ev; i++)
		cu_warn(cudaEventDestroy(c->ev[i]), "cudaEventDestroy");
	cu_copy_destroy(c);
	cu_epilogue_destroy(c);
	if (c->lt)
		cublasLtDestroy(c->lt);
	if (c->cublas)
		cublasDestroy(c->cublas);
	if (c->cublas_ws)
		cu_warn(cudaFree(c->cublas_ws), "cudaFree(cublas workspace)");
	if (c->red)
		cu_warn(cudaFree(c->red), "cudaFree(reduction scratch)");
	if (c->att_ptrs)
		cu_warn(cudaFree(c->att_ptrs), "cudaFree(attention pointers)");
	if (c->tickets)
		cu_warn(cudaFree(c->tickets), "cudaFree(tickets)");
	if (c->dres)
		cu_warn(cudaFree(c->dres), "cudaFree(result)");
	if (c->hres)
		cu_warn(cudaFreeHost(c->hres), "cudaFreeHost(result)");
	if (c->staging) {
		if (c->staging_pinned)
			cu_warn(cudaFreeHost(c->staging),
				"cudaFreeHost(staging)");
		else
			free(c->staging);
	}
	if (c->stream)
		cu_warn(cudaStreamDestroy(c->stream), "cudaStreamDestroy");
	/* Give the pool's unused memory back to the driver: the next backend
	 * in this process starts from the same reserved figure. */
	if (c->pool)
		cu_warn(cudaMemPoolTrimTo(c->pool, 0), "cudaMemPoolTrimTo");
	free(c);
}

static void cu_info(void *ctx, struct backend_info *out)
{
	*out = dq_cu(ctx)->info;
}

/* Process-wide figures of the device's default pool (see the top of the
 * file). Synchronises first so that frees already issued are counted. */
static void cu_pool_stats(void *ctx, struct backend_pool_stats *out)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	uint64_t v[4] = {0, 0, 0, 0};
	const enum cudaMemPoolAttr attr[4] = {
	    cudaMemPoolAttrUsedMemCurrent, cudaMemPoolAttrUsedMemHigh,
	    cudaMemPoolAttrReservedMemCurrent, cudaMemPoolAttrReservedMemHigh};
	size_t fr = 0, tot = 0;
	cuda_check(cudaStreamSynchronize(c->stream));
	for (int i = 0; i < 4; i++)
		cuda_check(cudaMemPoolGetAttribute(c->pool, attr[i], &v[i]));
	cuda_check(cudaMemGetInfo(&fr, &tot));
	memset(out, 0, sizeof(*out));
	out->used_bytes = (size_t)v[0];
	out->used_high_bytes = (size_t)v[1];
	out->reserved_bytes = (size_t)v[2];
	out->reserved_high_bytes = (size_t)v[3];
	out->free_bytes = fr;
	out->total_bytes = tot;
}

/* Setting a high-water attribute to 0 resets it to the current value (the
 * only value the runtime accepts). */
static void cu_pool_reset_peak(void *ctx)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	uint64_t zero = 0;
	cuda_check(cudaStreamSynchronize(c->stream));
	cuda_check(cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrUsedMemHigh,
					   &zero));
	zero = 0;
	cuda_check(cudaMemPoolSetAttribute(
	    c->pool, cudaMemPoolAttrReservedMemHigh, &zero));
}

/* TF32 tensor-core GEMMs (10-bit mantissa inputs, FP32 accumulate) or the
 * default exact FP32. */
static void cu_set_tf32(void *ctx, int allow)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cublas_check(
	    cublasSetMathMode(c->cublas, allow ? CUBLAS_TF32_TENSOR_OP_MATH
					       : CUBLAS_DEFAULT_MATH));
}

/* ------------------------------------------------------ sync and timing */

static void cu_sync(void *ctx)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	cuda_check(cudaStreamSynchronize(c->stream));
	if (c->copy_stream)
		cuda_check(cudaStreamSynchronize(c->copy_stream));
}

static void cu_timer_mark(void *ctx, int slot)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (slot >= 0 && slot < BACKEND_TIMER_SLOTS)
		cuda_check(cudaEventRecord(c->ev[slot], c->stream));
}

/* NaN for a bad slot or a slot never marked. */
static double cu_timer_elapsed_ms(void *ctx, int from, int to)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	float ms = 0.0f;
	if (from < 0 || from >= BACKEND_TIMER_SLOTS || to < 0 ||
	    to >= BACKEND_TIMER_SLOTS)
		return NAN;
	cudaError_t e = cudaEventSynchronize(c->ev[to]);
	if (e == cudaSuccess)
		e = cudaEventElapsedTime(&ms, c->ev[from], c->ev[to]);
	if (e != cudaSuccess) {
		(void)cudaGetLastError();
		return NAN;
	}
	return (double)ms;
}

/* ------------------------------------------------------------- transfers */

static void cu_upload(void *ctx, void *dst, const double *src, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	float *d = (float *)dst;
	for (size_t off = 0; off < n; off += DQ_CU_STAGING) {
		size_t m = n - off < DQ_CU_STAGING ? n - off : DQ_CU_STAGING;
		for (size_t i = 0; i < m; i++)
			c->staging[i] = (float)src[off + i];
		cuda_check(cudaMemcpyAsync(d + off, c->staging,
					   m * sizeof(float),
					   cudaMemcpyHostToDevice, c->stream));
		cuda_check(cudaStreamSynchronize(c->stream));
	}
}

static void cu_download(void *ctx, double *dst, const void *src, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	const float *s = (const float *)src;
	for (size_t off = 0; off < n; off += DQ_CU_STAGING) {
		size_t m = n - off < DQ_CU_STAGING ? n - off : DQ_CU_STAGING;
		cuda_check(cudaMemcpyAsync(c->staging, s + off,
					   m * sizeof(float),
					   cudaMemcpyDeviceToHost, c->stream));
		cuda_check(cudaStreamSynchronize(c->stream));
		for (size_t i = 0; i < m; i++)
			dst[off + i] = (double)c->staging[i];
	}
}

/* Asynchronous for pageable sources (the runtime stages them before
 * returning, so the caller may reuse src at once); a page-locked source
 * is waited for, for the same guarantee. */
static void cu_upload_bytes(void *ctx, void *dst, const void *src, size_t bytes)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	struct cudaPointerAttributes a;
	if (!bytes)
		return;
	cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
				   c->stream));
	if (cudaPointerGetAttributes(&a, src) != cudaSuccess) {
		(void)cudaGetLastError();
		cuda_check(cudaStreamSynchronize(c->stream));
	} else if (a.type != cudaMemoryTypeUnregistered) {
		cuda_check(cudaStreamSynchronize(c->stream));
	}
}

static void cu_download_bytes(void *ctx, void *dst, const void *src,
			      size_t bytes)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!bytes)
		return;
	cuda_check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
				   c->stream));
	cuda_check(cudaStreamSynchronize(c->stream));
}

static void cu_copy(void *ctx, void *dst, const void *src, size_t n)
{
	struct dq_cuda_ctx *c = dq_cu(ctx);
	if (!n || dst == src)
		return;
	cuda_check(cudaMemcpyAsync(dst, src, n * sizeof(float),
				   cudaMemcpyDeviceToDevice, c->stream));
}

/* ------------------------------------------------------------ ops table */

static struct backend_core_ops cu_core_make(void)
{
	struct backend_core_ops o;
	memset(&o, 0, sizeof(o));
	o.raw_alloc = cu_raw_alloc;
	o.raw_free = cu_raw_free;
	o.destroy = cu_destroy;
	o.info = cu_info;
	o.sync = cu_sync;
	o.timer_mark = cu_timer_mark;
	o.timer_elapsed_ms = cu_timer_elapsed_ms;
	o.upload = cu_upload;
	o.download = cu_download;
	o.upload_bytes = cu_upload_bytes;
	o.download_bytes = cu_download_bytes;
	o.copy = cu_copy;
	o.fill = cu_fill;
	o.zero_rows = cu_zero_rows;
	o.transpose = cu_transpose;
	o.copy_async = cu_copy_async;
	o.copy_wait = cu_copy_wait;
	o.copy_stats = cu_copy_stats;
	return o;
}

static struct backend_math_ops cu_math_make(void)
{
	struct backend_math_ops o;
	memset(&o, 0, sizeof(o));
	o.gemm = cu_gemm;
	o.bias_forward = cu_bias_forward;
	o.bias_backward = cu_bias_backward;
	o.bias_act_forward = cu_bias_act_forward;
	o.act_bias_backward = cu_act_bias_backward;
	o.act_forward = cu_act_forward;
	o.act_backward = cu_act_backward;
	o.mul = cu_mul;
	o.to_bf16 = cu_to_bf16;
	o.from_bf16 = cu_from_bf16;
	o.round_bf16 = cu_round_bf16;
	o.gemm_bf16 = cu_gemm_bf16;
	o.gemm_bf16_arrays = cu_gemm_bf16_arrays;
	o.gemm_bf16_mixed = cu_gemm_bf16_mixed;
	o.gemm_bias_act = cu_gemm_bias_act;
	o.layernorm_forward = cu_layernorm_forward;
	o.layernorm_backward = cu_layernorm_backward;
	o.attention_forward = cu_attention_forward;
	o.attention_backward = cu_attention_backward;
	o.attention_forward_bf16 = cu_attention_forward_bf16;
	o.attention_backward_bf16 = cu_attention_backward_bf16;
	o.attention_flash_forward = cu_attention_flash_forward;
	o.attention_flash_backward = cu_attention_flash_backward;
	o.embed_forward = cu_embed_forward;
	o.embed_backward = cu_embed_backward;
	o.xent_forward = cu_xent_forward;
	o.xent_backward = cu_xent_backward;
	o.xent_train = cu_xent_train;
	o.sumsq = cu_sumsq;
	o.clip = cu_clip;
	o.adam = cu_adam;
	o.axpy = cu_axpy;
	o.scale = cu_scale;
	o.sub = cu_sub;
	o.gemm_batched = cu_gemm_batched;
	o.dot_segments = cu_dot_segments;
	o.residual_dots = cu_residual_dots;
	o.solve_check = cu_solve_check;
	o.copy_masked = cu_copy_masked;
	o.scale_recip = cu_scale_recip;
	o.anderson_weights = cu_anderson_weights;
	o.fused_measure = cu_fused_measure;
	o.fused_apply = cu_fused_apply;
	o.fused_anderson_measure = cu_fused_anderson_measure;
	o.fused_anderson_apply = cu_fused_anderson_apply;
	return o;
}

static struct backend_host_ops cu_host_make(void)
{
	struct backend_host_ops o;
	memset(&o, 0, sizeof(o));
	o.host_alloc = cu_host_alloc;
	o.host_free = cu_host_free;
	return o;
}

static struct backend_pool_ops cu_pool_make(void)
{
	struct backend_pool_ops o;
	memset(&o, 0, sizeof(o));
	o.pool_stats = cu_pool_stats;
	o.pool_reset_peak = cu_pool_reset_peak;
	return o;
}

static struct backend_managed_ops cu_managed_make(void)
{
	struct backend_managed_ops o;
	memset(&o, 0, sizeof(o));
	o.managed_alloc = cu_managed_alloc;
	o.managed_free = cu_managed_free;
	o.prefetch = cu_prefetch;
	return o;
}

static struct backend_device_ops cu_device_make(void)
{
	struct backend_device_ops o;
	memset(&o, 0, sizeof(o));
	o.set_tf32 = cu_set_tf32;
	o.cap_device = cu_cap_device;
	return o;
}

static struct backend_graph_ops cu_graph_make(void)
{
	struct backend_graph_ops o;
	memset(&o, 0, sizeof(o));
	o.graph_begin = cu_graph_begin;
	o.graph_end = cu_graph_end;
	o.graph_loop_begin = cu_graph_loop_begin;
	o.graph_loop_next = cu_graph_loop_next;
	o.graph_loop_end = cu_graph_loop_end;
	o.graph_while_begin = cu_graph_while_begin;
	o.graph_while_end = cu_graph_while_end;
	o.graph_launch = cu_graph_launch;
	o.graph_free = cu_graph_free;
	return o;
}

static const struct backend_core_ops cu_core = cu_core_make();
static const struct backend_math_ops cu_math = cu_math_make();
static const struct backend_host_ops cu_host = cu_host_make();
static const struct backend_pool_ops cu_pool = cu_pool_make();
static const struct backend_managed_ops cu_managed = cu_managed_make();
static const struct backend_device_ops cu_device = cu_device_make();
static const struct backend_graph_ops cu_graph = cu_graph_make();

/* Every table: the cuda backend has all the optional ones. */
static struct backend_ops cu_ops_make(void)
{
	struct backend_ops o;
	o.name = "cuda";
	o.core = &cu_core;
	o.math = &cu_math;
	o.host = &cu_host;
	o.pool = &cu_pool;
	o.managed = &cu_managed;
	o.device = &cu_device;
	o.graph = &cu_graph;
	return o;
}

static const struct backend_ops cu_ops = cu_ops_make();

/* ------------------------------------------------------------------ init */

/* Stops an init step (a function returning int) with one line naming the
 * failed call; backend_cuda_init then frees what was made. */
#define INIT_TRY(call)                                                         \
	do {                                                                   \
		cudaError_t e_ = (call);                                       \
		if (e_ != cudaSuccess) {                                       \
			snprintf(err, errlen,                                  \
				 "CUDA initialisation failed: %s: %s", #call,  \
				 cudaGetErrorString(e_));                      \
			return -1;                                             \
		}                                                              \
	} while (0)

#define INIT_TRY_BLAS(call)                                                    \
	do {                                                                   \
		cublasStatus_t s_ = (call);                                    \
		if (s_ != CUBLAS_STATUS_SUCCESS) {                             \
			snprintf(err, errlen,                                  \
				 "cuBLAS initialisation failed: %s: %s",       \
				 #call, cublasGetStatusString(s_));            \
			return -1;                                             \
		}                                                              \
	} while (0)

/* The current device, which must support stream-ordered pools, and its
 * facts (c->info, c->sm_count). */
static int init_device(struct dq_cuda_ctx *c, char *err, size_t errlen)
{
	struct cudaDeviceProp prop;
	int pools = 0, drv = 0, rt = 0;
	INIT_TRY(cudaGetDevice(&c->device));
	INIT_TRY(cudaSetDevice(c->device));
	INIT_TRY(cudaGetDeviceProperties(&prop, c->device));
	INIT_TRY(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported,
					c->device));
	if (!pools) {
		snprintf(err, errlen,
			 "CUDA device %d (%s) does not support stream-ordered "
			 "memory pools (cudaMallocAsync)",
			 c->device, prop.name);
		return -1;
	}
	INIT_TRY(cudaDriverGetVersion(&drv));
	INIT_TRY(cudaRuntimeGetVersion(&rt));
	c->sm_count =
	    prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
	snprintf(c->info.name, sizeof(c->info.name), "%.127s", prop.name);
	c->info.total_mem_bytes = prop.totalGlobalMem;
	c->info.compute_major = prop.major;
	c->info.compute_minor = prop.minor;
	c->info.sm_count = prop.multiProcessorCount;
	c->info.driver_version = drv;
	c->info.runtime_version = rt;
	return 0;
}

/* The stream, the timer events, the copy stream and its events
 * (cuda_copy.cu) and the device's default pool, whose
 * release threshold goes to UINT64_MAX (see the top of the file). */
static int init_stream(struct dq_cuda_ctx *c, char *err, size_t errlen)
{
	uint64_t threshold = UINT64_MAX;
	INIT_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
	for (; c->n_ev < BACKEND_TIMER_SLOTS; c->n_ev++)
		INIT_TRY(cudaEventCreate(&c->ev[c->n_ev]));
	INIT_TRY(cu_copy_init(c));
	INIT_TRY(cudaDeviceGetDefaultMemPool(&c->pool, c->device));
	INIT_TRY(cudaMemPoolSetAttribute(
	    c->pool, cudaMemPoolAttrReleaseThreshold, &threshold));
	return 0;
}

/* The fixed buffers outside the pool: cuBLAS workspace, reduction scratch
 * and its tickets (zeroed), the attention's pointer arrays, the result
 * slot, and the staging buffer
 * (pinned where possible, else pageable, which works more slowly). */
static int init_buffers(struct dq_cuda_ctx *c, char *err, size_t errlen)
{
	INIT_TRY(cudaMalloc(&c->cublas_ws, DQ_CU_CUBLAS_WS));
	INIT_TRY(cudaMalloc((void **)&c->red, DQ_CU_RED_CAP * sizeof(double)));
	INIT_TRY(cudaMalloc((void **)&c->att_ptrs, (size_t)DQ_CU_ATT_ARRAYS *
						       DQ_CU_ATT_MAXBH *
						       sizeof(float *)));
	INIT_TRY(cudaMalloc((void **)&c->tickets,
			    DQ_CU_TICKETS * sizeof(unsigned int)));
	INIT_TRY(
	    cudaMemset(c->tickets, 0, DQ_CU_TICKETS * sizeof(unsigned int)));
	INIT_TRY(cudaMalloc((void **)&c->dres, sizeof(double)));
	INIT_TRY(cudaHostAlloc((void **)&c->hres, sizeof(double),
			       cudaHostAllocDefault));
	if (cudaHostAlloc((void **)&c->staging, DQ_CU_STAGING * sizeof(float),
			  cudaHostAllocDefault) == cudaSuccess) {
		c->staging_pinned = 1;
		return 0;
	}
	(void)cudaGetLastError();
	c->staging = (float *)malloc(DQ_CU_STAGING * sizeof(float));
	if (!c->staging) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	return 0;
}

/* cuBLAS on the stream with the fixed workspace, exact FP32 math. Ends
 * with a device synchronisation: the memsets of init are done. */
static int init_cublas(struct dq_cuda_ctx *c, char *err, size_t errlen)
{
	/* cublasSetStream resets the workspace to cuBLAS's own pool, so the
	 * workspace is set after it. */
	INIT_TRY_BLAS(cublasCreate(&c->cublas));
	INIT_TRY_BLAS(cublasSetStream(c->cublas, c->stream));
	INIT_TRY_BLAS(
	    cublasSetWorkspace(c->cublas, c->cublas_ws, DQ_CU_CUBLAS_WS));
	INIT_TRY_BLAS(cublasSetMathMode(c->cublas, CUBLAS_DEFAULT_MATH));
	INIT_TRY_BLAS(cublasLtCreate(&c->lt));
	if (cu_epilogue_init(c) != 0) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	INIT_TRY(cudaDeviceSynchronize());
	return 0;
}

extern "C" int backend_cuda_init(struct backend *be, char *err, size_t errlen)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);
	if (e != cudaSuccess || n <= 0) {
		(void)cudaGetLastError();
		snprintf(err, errlen, "no CUDA device was found (%s)",
			 e != cudaSuccess ? cudaGetErrorString(e)
					  : "cudaGetDeviceCount gave 0");
		return -1;
	}
	struct dq_cuda_ctx *c =
	    (struct dq_cuda_ctx *)calloc(1, sizeof(struct dq_cuda_ctx));
	if (!c) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	if (init_device(c, err, errlen) != 0 ||
	    init_stream(c, err, errlen) != 0 ||
	    init_buffers(c, err, errlen) != 0 ||
	    init_cublas(c, err, errlen) != 0) {
		cu_destroy(c);
		return -1;
	}
	be->ops = &cu_ops;
	be->ctx = c;
	be->elem = sizeof(float);
	/* gemm_bf16 multiplies bf16 copies (cuda_bf16.cu) */
	be->bf16_operand_elem = sizeof(uint16_t);
	return 0;
}
