/* backend_impl.h — private to kernels/ (and its tests): constructors of the
 * compiled-in backends, called by backend_create(), and a window on the
 * allocator. Each constructor fills be->ops, be->ctx and be->elem and
 * returns 0, or -1 with a one-line message in err. */
#ifndef DQ_BACKEND_IMPL_H
#define DQ_BACKEND_IMPL_H

#include "backend.h"

/* is_double: 0 for float32 ("cpu"), 1 for float64 ("cpu64"). */
int backend_cpu_init(struct backend *be, int is_double, int threads, char *err,
		     size_t errlen);

/* Capacity of be's allocation table (kernels/backend.c), for the test of
 * its growth. */
size_t backend_alloc_table_cap(const struct backend *be);

#ifdef DQ_HAVE_CUDA
/* Fails with "no CUDA device was found" when the runtime sees no GPU. */
int backend_cuda_init(struct backend *be, char *err, size_t errlen);
#endif

#endif
