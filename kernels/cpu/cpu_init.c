/* cpu_init.c — constructor of the CPU backends ("cpu" float32, "cpu64"
 * float64): one context type for both ops tables (cpu_ctx.h). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "../backend_impl.h"
#include "cpu_ctx.h"

int backend_cpu_init(struct backend *be, int is_double, int threads, char *err,
		     size_t errlen)
{
	struct dq_cpu_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	ctx->is_double = is_double != 0;
	be->ops = is_double ? &dq_cpu_ops_d : &dq_cpu_ops_f;
	be->elem = is_double ? sizeof(double) : sizeof(float);
	be->bf16_operand_elem = be->elem; /* rounded values, own type */
	be->ctx = ctx;
	/* Process-wide settings: the last backend created wins. */
	if (threads > 0) {
#ifdef _OPENMP
		omp_set_num_threads(threads);
#endif
		openblas_set_num_threads(threads);
	}
	return 0;
}

/* The host is the device: a copy runs in line, after the ops before it
 * (which have finished), so it overlaps nothing and all of its time is
 * stall time. */
void dq_cpu_copy_async(void *ctx, void *dst, const void *src, size_t bytes,
		       int ev)
{
	struct dq_cpu_ctx *c = ctx;
	struct timespec a, b;
	(void)ev;
	clock_gettime(CLOCK_MONOTONIC, &a);
	memcpy(dst, src, bytes);
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ms =
	    (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6;
	c->copies.copies++;
	c->copies.bytes += bytes;
	c->copies.copy_ms += ms;
	c->copies.stall_ms += ms;
}

void dq_cpu_copy_wait(void *ctx, int ev)
{
	(void)ctx, (void)ev;
}

void dq_cpu_copy_stats(void *ctx, struct backend_copy_stats *out)
{
	struct dq_cpu_ctx *c = ctx;
	*out = c->copies;
	memset(&c->copies, 0, sizeof(c->copies));
}
