/* cpu_ctx.h — private: the context shared by both instantiations of
 * cpu_backend.c (float and double) and cpu_init.c. */
#ifndef DQ_CPU_CTX_H
#define DQ_CPU_CTX_H

#include <time.h>

#include "../backend.h"

/* Loops over fewer elements than this run on one thread (cpu_backend.c,
 * cpu_xent.c): forking costs a few microseconds, more than the work below
 * ~32k elements. */
#define PAR_MIN_N 32768

static inline long long min_ll(long long a, long long b)
{
	return a < b ? a : b;
}

/* for i in [0, n): the statement, on the OpenMP threads from PAR_MIN_N
 * elements on (an elementwise op writes element i only, so any split gives
 * the same bits). */
/* clang-format off */
#define PAR_EACH(n, ...)                                                       \
	do {                                                                   \
		const long long nn_ = (long long)(n);                          \
		_Pragma("omp parallel for if (nn_ >= PAR_MIN_N)")              \
		for (long long i = 0; i < nn_; i++)                            \
			__VA_ARGS__;                                           \
	} while (0)
/* clang-format on */

struct dq_cpu_ctx {
	struct timespec marks[BACKEND_TIMER_SLOTS]; /* CLOCK_MONOTONIC */
	int is_double;
	struct backend_copy_stats copies; /* since the last copy_stats */
};

/* The offload copies of both instantiations (cpu_init.c): memcpy in line,
 * timed (backend.h, copy_async / copy_wait / copy_stats). */
void dq_cpu_copy_async(void *ctx, void *dst, const void *src, size_t bytes,
		       int ev);
void dq_cpu_copy_wait(void *ctx, int ev);
void dq_cpu_copy_stats(void *ctx, struct backend_copy_stats *out);

/* Bias, activation and LayerNorm ops, plain and fused (cpu_layer.c), per
 * instantiation: the ops table's members of the same names
 * (kernels/backend.h). */
#define DQ_CPU_LAYER_DECL(S)                                                   \
	void dq_cpu_bias_forward_##S(void *ctx, void *y, const void *b, int N, \
				     int C);                                   \
	void dq_cpu_bias_backward_##S(void *ctx, void *db, const void *dy,     \
				      int N, int C);                           \
	void dq_cpu_act_forward_##S(void *ctx, enum act_kind act, void *y,     \
				    const void *x, size_t n);                  \
	void dq_cpu_act_backward_##S(void *ctx, enum act_kind act, void *dx,   \
				     const void *dy, const void *x,            \
				     const void *y, size_t n);                 \
	void dq_cpu_bias_act_forward_##S(void *ctx, enum act_kind act,         \
					 void *y, const void *b, int N,        \
					 int C);                               \
	void dq_cpu_act_bias_backward_##S(                                     \
	    void *ctx, enum act_kind act, void *dx, const void *dy,            \
	    const void *y, void *db, int N, int C);                            \
	void dq_cpu_mul_##S(void *ctx, void *dst, const void *a,               \
			    const void *b, size_t n);                          \
	void dq_cpu_layernorm_forward_##S(                                     \
	    void *ctx, void *y, void *mean, void *rstd, void *x,               \
	    const void *res, const void *bias, const void *w, const void *b,   \
	    int N, int C);                                                     \
	void dq_cpu_layernorm_backward_##S(                                    \
	    void *ctx, void *dx, void *dres, void *dbias, void *dw, void *db,  \
	    const void *dy, const void *x, const void *mean, const void *rstd, \
	    const void *w, int N, int C);
DQ_CPU_LAYER_DECL(f)
DQ_CPU_LAYER_DECL(d)
#undef DQ_CPU_LAYER_DECL

/* Solver-control ops (cpu_solve.c), per instantiation: the ops table's
 * members of the same names (kernels/backend.h). */
struct dq_solve_ctl;
#define DQ_CPU_SOLVE_DECL(S)                                                   \
	void dq_cpu_solve_check_##S(void *ctx, const struct dq_solve_ctl *c);  \
	void dq_cpu_copy_masked_##S(void *ctx, void *dst, const void *src,     \
				    const double *flag, int S_, int P,         \
				    size_t len);                               \
	void dq_cpu_scale_recip_##S(void *ctx, void *dst, const void *src,     \
				    const double *seg, int S_, int P,          \
				    size_t len);                               \
	void dq_cpu_anderson_weights_##S(                                      \
	    void *ctx, const struct dq_solve_ctl *c, const void *row,          \
	    void *alpha, int slot, int nact, double lambda);                   \
	void dq_cpu_fused_measure_##S(void *ctx, const struct dq_solve_ctl *c, \
				      const void *fx, const void *x, void *g,  \
				      const void *dx, void *dg, const void *U, \
				      const void *V, size_t len);              \
	void dq_cpu_fused_apply_##S(void *ctx, const struct dq_solve_ctl *c,   \
				    void *x, void *dx, const void *g,          \
				    const void *dg, void *U, void *V,          \
				    void *best, size_t len);                   \
	void dq_cpu_fused_anderson_measure_##S(                                \
	    void *ctx, const struct dq_solve_ctl *c, const void *fx,           \
	    const void *xn, void *X, void *G, size_t len);                     \
	void dq_cpu_fused_anderson_apply_##S(                                  \
	    void *ctx, const struct dq_solve_ctl *c, void *xn, const void *X,  \
	    const void *G, void *best, size_t len);
DQ_CPU_SOLVE_DECL(f)
DQ_CPU_SOLVE_DECL(d)
#undef DQ_CPU_SOLVE_DECL

/* bf16 mixed-precision ops (cpu_bf16.c), per instantiation: the ops
 * table's members of the same names (kernels/backend.h). */
#define DQ_CPU_BF16_DECL(S)                                                    \
	void dq_cpu_to_bf16_##S(void *ctx, uint16_t *dst, const void *src,     \
				size_t n);                                     \
	void dq_cpu_from_bf16_##S(void *ctx, void *dst, const uint16_t *src,   \
				  size_t n);                                   \
	void dq_cpu_round_bf16_##S(void *ctx, void *x, size_t n);              \
	void dq_cpu_gemm_bf16_##S(void *ctx, int ta, int tb, int M, int N,     \
				  int K, double alpha, const void *A, int lda, \
				  const void *B, int ldb, double beta,         \
				  void *C, int ldc, void *scratch);            \
	void dq_cpu_gemm_bf16_arrays_##S(                                      \
	    void *ctx, int ta, int tb, int M, int N, int K, double alpha,      \
	    const uint16_t *A, int lda, const uint16_t *B, int ldb,            \
	    double beta, void *C, int ldc, void *scratch);                     \
	void dq_cpu_gemm_bf16_mixed_##S(                                       \
	    void *ctx, int ta, int tb, int M, int N, int K, double alpha,      \
	    const void *A, int lda, const uint16_t *B, int ldb, double beta,   \
	    void *C, int ldc, void *scratch);
DQ_CPU_BF16_DECL(f)
DQ_CPU_BF16_DECL(d)
#undef DQ_CPU_BF16_DECL

/* The fused attention of attention=flash (cpu_flash.c), per
 * instantiation: the ops table's members of the same names. */
#define DQ_CPU_FLASH_DECL(S)                                                   \
	void dq_cpu_attention_flash_forward_##S(                               \
	    void *ctx, void *out, void *lse, const void *qkv, int B, int T,    \
	    int C, int H, int bf16);                                           \
	void dq_cpu_attention_flash_backward_##S(                              \
	    void *ctx, void *dqkv, void *scratch, const void *dout,            \
	    const void *qkv, const void *out, const void *lse, void *ws,       \
	    int B, int T, int C, int H, int bf16);
DQ_CPU_FLASH_DECL(f)
DQ_CPU_FLASH_DECL(d)
#undef DQ_CPU_FLASH_DECL

/* Softmax cross-entropy (cpu_xent.c), per instantiation: the ops
 * xent_forward and xent_train of backend.h. */
double dq_cpu_xent_forward_f(void *ctx, void *probs, const void *logits,
			     const int32_t *targets, int N, int V);
double dq_cpu_xent_train_f(void *ctx, void *dlogits, const void *logits,
			   const int32_t *targets, int N, int V, double scale);
double dq_cpu_xent_forward_d(void *ctx, void *probs, const void *logits,
			     const int32_t *targets, int N, int V);
double dq_cpu_xent_train_d(void *ctx, void *dlogits, const void *logits,
			   const int32_t *targets, int N, int V, double scale);

/* The two ops tables, one per compilation of cpu_backend.c. */
extern const struct backend_ops dq_cpu_ops_f;
extern const struct backend_ops dq_cpu_ops_d;

#endif
