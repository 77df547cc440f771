/* cpu_ctx.h — private: the context shared by both instantiations of
 * cpu_backend.c (float and double) and cpu_init.c. */
#ifndef DQ_CPU_CTX_H
#define DQ_CPU_CTX_H

#include <time.h>

#include "../backend.h"

struct dq_cpu_ctx {
	struct timespec marks[BACKEND_TIMER_SLOTS]; /* CLOCK_MONOTONIC */
	int is_double;
};

/* The two ops tables, one per compilation of cpu_backend.c. */
extern const struct backend_ops dq_cpu_ops_f;
extern const struct backend_ops dq_cpu_ops_d;

#endif
