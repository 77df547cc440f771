/*
 * test_fused.c — the CPU backends' fused layer ops give the bits of the ops
 * they replace (test_fused.h says which), in float32 and float64, on one
 * thread and on two (the column sums' blocks do not depend on the thread
 * count). test_cuda_ops.c runs the same checks on a GPU, within a
 * tolerance.
 */
#include "test_fused.h"

#include <criterion/criterion.h>

static void check_backend(const char *name)
{
	for (int threads = 1; threads <= 2; threads++) {
		rng_state = 900 + (uint64_t)threads;
		struct backend *be = make(name, threads);
		check_fused_ops(be, name, 1, 0.0);
		backend_destroy(be);
	}
}

Test(fused, cpu)
{
	check_backend("cpu");
}

Test(fused, cpu64)
{
	check_backend("cpu64");
}
