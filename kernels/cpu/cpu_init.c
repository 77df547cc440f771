/* cpu_init.c — constructor of the CPU backends ("cpu" float32, "cpu64"
 * float64): one context type for both ops tables (cpu_ctx.h). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

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
