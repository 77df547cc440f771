/* backend_call.h — the call wrappers of the backend ops: be_<op>(be, ...)
 * for every member of struct backend_ops (kernels/backend.h, whose
 * comments are the contracts), with their debug assertions. backend.h
 * includes this file at its end; include backend.h. */
#ifndef DQ_BACKEND_CALL_H
#define DQ_BACKEND_CALL_H

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "solve_fused.h" /* dq_solve_ctl, the fused ring: solver checks */

/* ---- call wrappers: be_<op>(be, args) runs be->ops-><op>(be->ctx, args).
 * Code above the kernels calls the ops through these only; the ops table
 * stays the interface a backend implements (its comments are the
 * contract). Each wrapper asserts the caller's side of the contract: sizes
 * not negative, row strides at least the row width, pointers not NULL
 * where the size is > 0, slots and events in range. The asserts stay on in
 * deqbench's builds (meson b_ndebug=false) and cost a few compares per
 * call, not per element.
 *
 * Optional ops (NULL allowed in a backend's table); test with be_has_<op>:
 *   host_alloc, host_free  both or neither; NULL: be_host_alloc and
 *                          be_host_free use raw_alloc and raw_free
 *                          (be_has_host_alloc)
 *   pool_stats             NULL: be_pool_stats zeroes *out, returns -1
 *   pool_reset_peak        NULL: be_pool_reset_peak returns -1
 *   set_tf32               NULL: be_set_tf32 returns -1 (FP32 stays exact)
 *   managed_alloc, managed_free, prefetch
 *                          the three or none (be_has_managed); NULL:
 *                          MEM_MANAGED allocations fail, be_prefetch
 *                          returns -1
 *   cap_device             NULL: be_cap_device returns -1 with a line
 *   graph_begin, graph_end, graph_loop_begin, graph_loop_next,
 *   graph_loop_end, graph_launch, graph_free
 *                          the seven or none (be_has_graphs); callers
 *                          test be_has_graphs first (the wrappers assert)
 * The wrappers of optional ops return 0 when the op ran. Every other op is
 * required: a backend's table sets it.
 *
 * Allocator-only: be_raw_alloc, be_raw_free, be_host_alloc, be_host_free
 * and be_destroy are untracked; kernels/backend.c's tracked allocator
 * calls them. Above the kernels allocate with backend_alloc*(be, n,
 * MEM_...) and end with backend_destroy(). */

/* p may be NULL only when n (a count) is 0. */
#define DQ_NEED(n, p) assert((n) == 0 || (p) != NULL)

static inline int dq_max1(int a)
{
	return a > 1 ? a : 1;
}

/* The backend's name ("cpu", "cpu64", "cuda"). */
static inline const char *be_name(const struct backend *be)
{
	return be->ops->name;
}

/* Allocator-only (above): bytes of untracked device memory; NULL on
 * failure. */
static inline void *be_raw_alloc(const struct backend *be, size_t bytes)
{
	return be->ops->core->raw_alloc(be->ctx, bytes);
}

static inline void be_raw_free(const struct backend *be, void *p)
{
	be->ops->core->raw_free(be->ctx, p);
}

/* Allocator-only: frees the context (backend_destroy frees the rest). */
static inline void be_destroy(const struct backend *be)
{
	be->ops->core->destroy(be->ctx);
}

/* Whether the backend has pinned host memory (the host table). */
static inline int be_has_host_alloc(const struct backend *be)
{
	return be->ops->host != NULL;
}

/* Allocator-only: MEM_HOST bytes, from raw_alloc when the backend has no
 * host table; NULL on failure. be_host_free frees them the same way. */
static inline void *be_host_alloc(const struct backend *be, size_t bytes)
{
	if (!be_has_host_alloc(be))
		return be_raw_alloc(be, bytes);
	return be->ops->host->host_alloc(be->ctx, bytes);
}

static inline void be_host_free(const struct backend *be, void *p)
{
	if (!be_has_host_alloc(be)) {
		be_raw_free(be, p);
		return;
	}
	be->ops->host->host_free(be->ctx, p);
}

static inline void be_info(const struct backend *be, struct backend_info *out)
{
	assert(out != NULL);
	be->ops->core->info(be->ctx, out);
}

static inline void be_sync(const struct backend *be)
{
	be->ops->core->sync(be->ctx);
}

static inline void be_timer_mark(const struct backend *be, int slot)
{
	assert(slot >= 0 && slot < BACKEND_TIMER_SLOTS);
	be->ops->core->timer_mark(be->ctx, slot);
}

static inline double be_timer_elapsed_ms(const struct backend *be, int from,
					 int to)
{
	assert(from >= 0 && from < BACKEND_TIMER_SLOTS);
	assert(to >= 0 && to < BACKEND_TIMER_SLOTS);
	return be->ops->core->timer_elapsed_ms(be->ctx, from, to);
}

/* be_upload, be_download, be_upload_bytes, be_download_bytes, be_copy:
 * n elements (bytes for the _bytes ones) from src to dst. */
#define DQ_MOVE_WRAPPER(op, dst_type, src_type)                                \
	static inline void be_##op(const struct backend *be, dst_type *dst,    \
				   const src_type *src, size_t n)              \
	{                                                                      \
		DQ_NEED(n, dst), DQ_NEED(n, src);                              \
		be->ops->core->op(be->ctx, dst, src, n);                       \
	}
DQ_MOVE_WRAPPER(upload, void, double)
DQ_MOVE_WRAPPER(download, double, void)
DQ_MOVE_WRAPPER(upload_bytes, void, void)
DQ_MOVE_WRAPPER(download_bytes, void, void)
DQ_MOVE_WRAPPER(copy, void, void)
#undef DQ_MOVE_WRAPPER

static inline void be_copy_async(const struct backend *be, void *dst,
				 const void *src, size_t bytes, int ev)
{
	assert(ev >= 0 && ev < BACKEND_COPY_EVENTS);
	DQ_NEED(bytes, dst), DQ_NEED(bytes, src);
	be->ops->core->copy_async(be->ctx, dst, src, bytes, ev);
}

static inline void be_copy_wait(const struct backend *be, int ev)
{
	assert(ev >= 0 && ev < BACKEND_COPY_EVENTS);
	be->ops->core->copy_wait(be->ctx, ev);
}

static inline void be_copy_stats(const struct backend *be,
				 struct backend_copy_stats *out)
{
	assert(out != NULL);
	be->ops->core->copy_stats(be->ctx, out);
}

static inline void be_fill(const struct backend *be, void *dst, double value,
			   size_t n)
{
	DQ_NEED(n, dst);
	be->ops->core->fill(be->ctx, dst, value, n);
}

static inline void be_zero_rows(const struct backend *be, void *dst,
				size_t rows, size_t cols, size_t ld)
{
	assert(ld >= cols);
	DQ_NEED(rows * cols, dst);
	be->ops->core->zero_rows(be->ctx, dst, rows, cols, ld);
}

static inline void be_transpose(const struct backend *be, void *dst,
				const void *src, int R, int C, int add)
{
	assert(R >= 0 && C >= 0 && (add == 0 || add == 1));
	DQ_NEED(R && C, dst), DQ_NEED(R && C, src);
	be->ops->core->transpose(be->ctx, dst, src, R, C, add);
}

/* The shape checks of gemm and gemm_batched: op(A) (M,K), op(B) (K,N),
 * C (M,N), each row stride at least its stored row width. */
static inline void dq_gemm_shape(int ta, int tb, int M, int N, int K,
				 const void *A, int lda, const void *B, int ldb,
				 const void *C, int ldc)
{
	assert(M >= 0 && N >= 0 && K >= 0);
	assert(lda >= dq_max1(ta ? M : K) && ldb >= dq_max1(tb ? K : N));
	assert(ldc >= dq_max1(N));
	DQ_NEED(M && K, A), DQ_NEED(K && N, B), DQ_NEED(M && N, C);
}

static inline void be_gemm(const struct backend *be, int ta, int tb, int M,
			   int N, int K, double alpha, const void *A, int lda,
			   const void *B, int ldb, double beta, void *C,
			   int ldc)
{
	dq_gemm_shape(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
	be->ops->math->gemm(be->ctx, ta, tb, M, N, K, alpha, A, lda, B, ldb,
			    beta, C, ldc);
}

static inline void be_gemm_batched(const struct backend *be, int ta, int tb,
				   int M, int N, int K, double alpha,
				   const void *A, int lda, size_t sA,
				   const void *B, int ldb, size_t sB,
				   double beta, void *C, int ldc, size_t sC,
				   int batch)
{
	assert(batch >= 0);
	dq_gemm_shape(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
	be->ops->math->gemm_batched(be->ctx, ta, tb, M, N, K, alpha, A, lda, sA,
				    B, ldb, sB, beta, C, ldc, sC, batch);
}

static inline void be_bias_forward(const struct backend *be, void *y,
				   const void *b, int N, int C)
{
	assert(N >= 0 && C >= 0);
	DQ_NEED(N && C, y), DQ_NEED(N && C, b);
	be->ops->math->bias_forward(be->ctx, y, b, N, C);
}

static inline void be_bias_backward(const struct backend *be, void *db,
				    const void *dy, int N, int C)
{
	assert(N >= 0 && C >= 0);
	DQ_NEED(C, db), DQ_NEED(N && C, dy);
	be->ops->math->bias_backward(be->ctx, db, dy, N, C);
}

static inline void be_act_forward(const struct backend *be, enum act_kind act,
				  void *y, const void *x, size_t n)
{
	assert(act >= ACT_RELU && act <= ACT_SIGMOID);
	DQ_NEED(n, y), DQ_NEED(n, x);
	be->ops->math->act_forward(be->ctx, act, y, x, n);
}

static inline void be_act_backward(const struct backend *be, enum act_kind act,
				   void *dx, const void *dy, const void *x,
				   const void *y, size_t n)
{
	assert(act >= ACT_RELU && act <= ACT_SIGMOID);
	DQ_NEED(n, dx), DQ_NEED(n, dy), DQ_NEED(n, act == ACT_GELU ? x : y);
	be->ops->math->act_backward(be->ctx, act, dx, dy, x, y, n);
}

/* bias_act_forward / act_bias_backward: the acts whose backward reads y. */
static inline int dq_act_from_y(enum act_kind act)
{
	return act == ACT_RELU || act == ACT_TANH || act == ACT_SIGMOID;
}

static inline void be_bias_act_forward(const struct backend *be,
				       enum act_kind act, void *y,
				       const void *b, int N, int C)
{
	assert(dq_act_from_y(act) && N >= 0 && C >= 0);
	DQ_NEED(N && C, y), DQ_NEED(N && C, b);
	be->ops->math->bias_act_forward(be->ctx, act, y, b, N, C);
}

/* db may be NULL (no bias gradient wanted). */
static inline void be_act_bias_backward(const struct backend *be,
					enum act_kind act, void *dx,
					const void *dy, const void *y, void *db,
					int N, int C)
{
	assert(dq_act_from_y(act) && N >= 0 && C >= 0);
	DQ_NEED(N && C, dx), DQ_NEED(N && C, dy), DQ_NEED(N && C, y);
	be->ops->math->act_bias_backward(be->ctx, act, dx, dy, y, db, N, C);
}

static inline void be_mul(const struct backend *be, void *dst, const void *a,
			  const void *b, size_t n)
{
	DQ_NEED(n, dst), DQ_NEED(n, a), DQ_NEED(n, b);
	be->ops->math->mul(be->ctx, dst, a, b, n);
}

static inline void be_to_bf16(const struct backend *be, uint16_t *dst,
			      const void *src, size_t n)
{
	DQ_NEED(n, dst), DQ_NEED(n, src);
	be->ops->math->to_bf16(be->ctx, dst, src, n);
}

static inline void be_from_bf16(const struct backend *be, void *dst,
				const uint16_t *src, size_t n)
{
	DQ_NEED(n, dst), DQ_NEED(n, src);
	be->ops->math->from_bf16(be->ctx, dst, src, n);
}

static inline void be_round_bf16(const struct backend *be, void *x, size_t n)
{
	DQ_NEED(n, x);
	be->ops->math->round_bf16(be->ctx, x, n);
}

/* Elements from the start of gemm_bf16's scratch to its copy of op(B):
 * M K rounded up to a multiple of 8, so that a bf16 copy starts 16-byte
 * aligned (cuBLAS's vector loads) whatever M K is. */
static inline size_t dq_bf16_b_offset(int M, int K)
{
	return ((size_t)M * K + 7) / 8 * 8;
}

/* Bytes of gemm_bf16's scratch for op(A) (M,K) and op(B) (K,N). */
static inline size_t be_gemm_bf16_scratch_bytes(const struct backend *be, int M,
						int N, int K)
{
	return (dq_bf16_b_offset(M, K) + (size_t)K * N) * be->bf16_operand_elem;
}

static inline void be_gemm_bf16_arrays(const struct backend *be, int ta, int tb,
				       int M, int N, int K, double alpha,
				       const uint16_t *A, int lda,
				       const uint16_t *B, int ldb, double beta,
				       void *C, int ldc, void *scratch)
{
	dq_gemm_shape(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
	be->ops->math->gemm_bf16_arrays(be->ctx, ta, tb, M, N, K, alpha, A, lda,
					B, ldb, beta, C, ldc, scratch);
}

static inline void be_gemm_bf16(const struct backend *be, int ta, int tb, int M,
				int N, int K, double alpha, const void *A,
				int lda, const void *B, int ldb, double beta,
				void *C, int ldc, void *scratch)
{
	dq_gemm_shape(ta, tb, M, N, K, A, lda, B, ldb, C, ldc);
	assert(be->bf16_operand_elem > 0);
	DQ_NEED((size_t)M * K + (size_t)K * N, scratch);
	be->ops->math->gemm_bf16(be->ctx, ta, tb, M, N, K, alpha, A, lda, B,
				 ldb, beta, C, ldc, scratch);
}

static inline void be_layernorm_forward(const struct backend *be, void *y,
					void *mean, void *rstd, const void *x,
					const void *w, const void *b, int N,
					int C)
{
	assert(N >= 0 && C >= 0);
	DQ_NEED(N && C, y), DQ_NEED(N && C, x), DQ_NEED(N, mean);
	DQ_NEED(N, rstd), DQ_NEED(C, w), DQ_NEED(C, b);
	be->ops->math->layernorm_forward(be->ctx, y, mean, rstd, (void *)x,
					 NULL, NULL, w, b, N, C);
}

/* x(N,C) = (x + res) + bias, then y = LayerNorm(x): backend.h's
 * layernorm_forward with its residual terms (res, bias not NULL). */
static inline void
be_residual_layernorm_forward(const struct backend *be, void *y, void *mean,
			      void *rstd, void *x, const void *res,
			      const void *bias, const void *w, const void *b,
			      int N, int C)
{
	assert(N >= 0 && C >= 0);
	DQ_NEED(N && C, y), DQ_NEED(N && C, x), DQ_NEED(N && C, res);
	DQ_NEED(C, bias), DQ_NEED(N, mean), DQ_NEED(N, rstd), DQ_NEED(C, w);
	DQ_NEED(C, b);
	be->ops->math->layernorm_forward(be->ctx, y, mean, rstd, x, res, bias,
					 w, b, N, C);
}

static inline void be_layernorm_backward(const struct backend *be, void *dx,
					 void *dw, void *db, const void *dy,
					 const void *x, const void *mean,
					 const void *rstd, const void *w, int N,
					 int C)
{
	assert(N >= 0 && C >= 0);
	DQ_NEED(N && C, dx), DQ_NEED(N && C, dy), DQ_NEED(N && C, x);
	DQ_NEED(N, mean), DQ_NEED(N, rstd), DQ_NEED(C, w), DQ_NEED(C, dw);
	DQ_NEED(C, db);
	be->ops->math->layernorm_backward(be->ctx, dx, NULL, NULL, dw, db, dy,
					  x, mean, rstd, w, N, C);
}

/* layernorm_backward with its residual outputs: dres (N,C) = dx, and
 * dbias(C) += Σ_n dx unless dbias is NULL. */
static inline void
be_residual_layernorm_backward(const struct backend *be, void *dx, void *dres,
			       void *dbias, void *dw, void *db, const void *dy,
			       const void *x, const void *mean,
			       const void *rstd, const void *w, int N, int C)
{
	assert(N >= 0 && C >= 0);
	DQ_NEED(N && C, dx), DQ_NEED(N && C, dres), DQ_NEED(N && C, dy);
	DQ_NEED(N && C, x), DQ_NEED(N, mean), DQ_NEED(N, rstd);
	DQ_NEED(C, w), DQ_NEED(C, dw), DQ_NEED(C, db);
	be->ops->math->layernorm_backward(be->ctx, dx, dres, dbias, dw, db, dy,
					  x, mean, rstd, w, N, C);
}

/* B, T, C, H of the attention ops: H heads of C / H columns. */
static inline void dq_attention_shape(int B, int T, int C, int H)
{
	assert(B >= 0 && T >= 0 && C >= 0 && H > 0 && C % H == 0);
}

static inline void be_attention_forward(const struct backend *be, void *out,
					void *att, const void *qkv, int B,
					int T, int C, int H)
{
	dq_attention_shape(B, T, C, H);
	DQ_NEED(B && T && C, out), DQ_NEED(B && T, att);
	DQ_NEED(B && T && C, qkv);
	be->ops->math->attention_forward(be->ctx, out, att, qkv, B, T, C, H);
}

static inline void be_attention_backward(const struct backend *be, void *dqkv,
					 void *scratch, const void *dout,
					 const void *qkv, const void *att,
					 int B, int T, int C, int H)
{
	dq_attention_shape(B, T, C, H);
	DQ_NEED(B && T && C, dqkv), DQ_NEED(B && T, scratch);
	DQ_NEED(B && T && C, dout), DQ_NEED(B && T && C, qkv);
	DQ_NEED(B && T, att);
	be->ops->math->attention_backward(be->ctx, dqkv, scratch, dout, qkv,
					  att, B, T, C, H);
}

static inline void be_embed_forward(const struct backend *be, void *out,
				    const int32_t *tok, const void *wte,
				    const void *wpe, int B, int T, int C)
{
	assert(B >= 0 && T >= 0 && C >= 0);
	DQ_NEED(B && T && C, out), DQ_NEED(B && T, tok);
	DQ_NEED(B && T && C, wte), DQ_NEED(B && T && C, wpe);
	be->ops->math->embed_forward(be->ctx, out, tok, wte, wpe, B, T, C);
}

static inline void be_embed_backward(const struct backend *be, void *dwte,
				     void *dwpe, const void *dout,
				     const int32_t *tok, int B, int T, int C,
				     int V)
{
	assert(B >= 0 && T >= 0 && C >= 0 && V > 0);
	DQ_NEED(C, dwte), DQ_NEED(T && C, dwpe);
	DQ_NEED(B && T && C, dout), DQ_NEED(B && T, tok);
	be->ops->math->embed_backward(be->ctx, dwte, dwpe, dout, tok, B, T, C,
				      V);
}

static inline double be_xent_forward(const struct backend *be, void *probs,
				     const void *logits, const int32_t *targets,
				     int N, int V)
{
	assert(N >= 0 && V > 0);
	DQ_NEED(N, probs), DQ_NEED(N, logits), DQ_NEED(N, targets);
	return be->ops->math->xent_forward(be->ctx, probs, logits, targets, N,
					   V);
}

static inline void be_xent_backward(const struct backend *be, void *dlogits,
				    const void *probs, const int32_t *targets,
				    int N, int V, double scale)
{
	assert(N >= 0 && V > 0);
	DQ_NEED(N, dlogits), DQ_NEED(N, probs), DQ_NEED(N, targets);
	be->ops->math->xent_backward(be->ctx, dlogits, probs, targets, N, V,
				     scale);
}

/* The loss goes to *loss, a device double (be_xent_train_host returns
 * it). */
static inline void be_xent_train(const struct backend *be, void *dlogits,
				 const void *logits, const int32_t *targets,
				 int N, int V, double scale, double *loss)
{
	assert(N >= 0 && V > 0 && loss != NULL);
	DQ_NEED(N, dlogits), DQ_NEED(N, logits), DQ_NEED(N, targets);
	be->ops->math->xent_train(be->ctx, dlogits, logits, targets, N, V,
				  scale, loss);
}

static inline void be_sumsq(const struct backend *be, double *sumsq,
			    const void *x, size_t n)
{
	assert(sumsq != NULL);
	DQ_NEED(n, x);
	be->ops->math->sumsq(be->ctx, sumsq, x, n);
}

static inline void be_clip(const struct backend *be, void *x, size_t n,
			   const double *sumsq, double clip)
{
	assert(sumsq != NULL);
	DQ_NEED(n, x);
	be->ops->math->clip(be->ctx, x, n, sumsq, clip);
}

static inline void be_adam(const struct backend *be, void *p, const void *g,
			   void *m, void *v, size_t n, const double *hyper,
			   double beta1, double beta2, double eps, double wd)
{
	assert(hyper != NULL);
	DQ_NEED(n, p), DQ_NEED(n, g), DQ_NEED(n, m), DQ_NEED(n, v);
	be->ops->math->adam(be->ctx, p, g, m, v, n, hyper, beta1, beta2, eps,
			    wd);
}

/* ---- the host-returning forms: the device op into be->scal, then one
 * read (a synchronisation); the same bits as the device forms ---- */

/* be_xent_train's mean loss, returned. */
static inline double be_xent_train_host(const struct backend *be, void *dlogits,
					const void *logits,
					const int32_t *targets, int N, int V,
					double scale)
{
	double loss;
	be_xent_train(be, dlogits, logits, targets, N, V, scale, be->scal);
	be_download_bytes(be, &loss, be->scal, sizeof(loss));
	return loss;
}

/* ||x||₂: the square root of be_sumsq's sum. nan/inf propagate. */
static inline double be_norm(const struct backend *be, const void *x, size_t n)
{
	double s;
	be_sumsq(be, be->scal, x, n);
	be_download_bytes(be, &s, be->scal, sizeof(s));
	return sqrt(s);
}

/* hyper = {lr, 1 − β1^t, 1 − β2^t} in double: what be_adam reads at the
 * 1-based step t. */
static inline void dq_adam_hyper(double hyper[3], double lr, double beta1,
				 double beta2, int t)
{
	hyper[0] = lr;
	hyper[1] = 1.0 - pow(beta1, t);
	hyper[2] = 1.0 - pow(beta2, t);
}

/* Adam step t (1-based) at lr: the hyper values {lr, 1 − β1^t, 1 − β2^t}
 * computed here in double and written to be->scal for be_adam. */
static inline void be_adam_host(const struct backend *be, void *p,
				const void *g, void *m, void *v, size_t n,
				double lr, double beta1, double beta2,
				double eps, double wd, int t)
{
	double hyper[3];
	assert(t >= 1);
	dq_adam_hyper(hyper, lr, beta1, beta2, t);
	be_upload_bytes(be, be->scal, hyper, sizeof(hyper));
	be_adam(be, p, g, m, v, n, be->scal, beta1, beta2, eps, wd);
}

static inline void be_axpy(const struct backend *be, void *y, double a,
			   const void *x, size_t n)
{
	DQ_NEED(n, y), DQ_NEED(n, x);
	be->ops->math->axpy(be->ctx, y, a, x, n);
}

static inline void be_scale(const struct backend *be, void *x, double a,
			    size_t n)
{
	DQ_NEED(n, x);
	be->ops->math->scale(be->ctx, x, a, n);
}

static inline void be_sub(const struct backend *be, void *dst, const void *a,
			  const void *b, size_t n)
{
	DQ_NEED(n, dst), DQ_NEED(n, b);
	be->ops->math->sub(be->ctx, dst, a, b, n);
}

/* the solver control and optional ops' wrappers */
#include "backend_call_ext.h"

#endif
