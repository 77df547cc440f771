/* test_cuda_util.h — what the CUDA test executables (test_cuda_ops.c,
 * test_cuda_vec_ops.c, test_cuda.c; suite `cuda`) share: the "cuda"
 * backend, or the test skipped with the reason where this machine has no
 * GPU or this build no CUDA. Header-only, static inline. */
#ifndef DQ_TEST_CUDA_UTIL_H
#define DQ_TEST_CUDA_UTIL_H

#include <criterion/criterion.h>
#include <string.h>

#include "kernels/backend.h"

/* "cuda", or skip the test where there is no GPU or no CUDA build. */
static inline struct backend *cuda_or_skip(void)
{
	struct backend *be = NULL;
	char err[256] = "";
	if (backend_create(&be, "cuda", 0, err, sizeof(err)) == 0)
		return be;
	if (strstr(err, "no CUDA device was found") ||
	    strstr(err, "has no CUDA backend"))
		cr_skip_test("%s", err);
	cr_assert_fail("backend_create(cuda): %s", err);
	return NULL;
}

#endif
