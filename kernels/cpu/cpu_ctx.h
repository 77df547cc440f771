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
	    void *alpha, int slot, int nact, double lambda);
DQ_CPU_SOLVE_DECL(f)
DQ_CPU_SOLVE_DECL(d)
#undef DQ_CPU_SOLVE_DECL

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
