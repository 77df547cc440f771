/*
 * test_cuda_managed.c — method=managed and device_mem_cap_mib on a GPU
 * (suite `cuda`, run by scripts/gpu-check.sh; skipped without a GPU or a
 * CUDA build). tests/test_managed.c tests the method on the CPU with
 * stand-in managed ops; here the tapes are cudaMallocManaged memory and
 * the driver pages them:
 *
 *   1. one training step of managed (prefetch on and off) against unroll
 *      on the same GPU, parameters and tokens: the loss within 1e-9
 *      relative and every gradient within NMSE 1e-10 (the arithmetic is
 *      unroll's; the CUDA reductions that use atomics may order sums
 *      differently run to run, so the test does not demand bits; it logs
 *      whether they were equal), managed live bytes = L tapes, prefetched
 *      bytes = (L − 1) tapes;
 *   2. oversubscription: under device_mem_cap_mib = 256, unroll at L = 16
 *      of a model whose tapes take ~0.4 GiB is refused (memfit, before
 *      allocating), managed runs the same step, its tapes paged by the
 *      driver, and gives the uncapped unroll's loss and gradients (same
 *      tolerances).
 */
#include "test_cuda_util.h"
#include "test_ops_util.h"
#include "config.h"
#include "run_ctx.h"
#include "test_cuda_run.h"
#include "train_step.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRAD_TOL 1e-10

struct shape {
	int d, T, B, L;
};

static void make_config(struct bench_config *c, const char *method,
			struct shape s, int prefetch, int cap_mib)
{
	char err[256];
	config_defaults(c);
	c->model.d_model = s.d;
	c->model.n_heads = 4;
	c->model.d_ff = 2 * s.d;
	c->model.seq_len = s.T;
	c->model.batch_size = s.B;
	c->model.vocab_size = 29;
	c->model.seed = 11;
	c->device = config_device_parse("cuda");
	cr_assert_eq(config_set(c, "method", method, err, sizeof(err)), 0);
	c->method.layers = s.L;
	c->method.opts.managed.prefetch = prefetch;
	c->device_mem_cap_mib = cap_mib;
	method_config_resolve(&c->method);
}

struct result {
	double loss;
	double *g;
	size_t n;
	long moved;
	size_t managed_live;
};

/* One grad step of c on seeded tokens; the parameters are the init of
 * seed 11 on this GPU (the same for every method). */
static struct result grad_step(const struct bench_config *c)
{
	struct run_ctx rc;
	struct result r;
	char err[512] = "";
	cr_assert_eq(cuda_run_ctx(&rc, c, err, sizeof(err)), 0, "%s", err);
	int32_t *tok = cuda_test_tokens(c);
	cr_assert_eq(train_step_grad_step(&rc, tok, &r.loss, err, sizeof(err)),
		     0, "%s", err);
	r.n = rc.m->n_param_elems;
	r.g = cuda_test_grads(&rc);
	r.moved = method_get_stats(rc.me)->offload_bytes;
	r.managed_live = rc.be->mem.live[MEM_MANAGED];
	run_ctx_destroy(&rc);
	free(tok);
	return r;
}

static void assert_close(const struct result *a, const struct result *b,
			 const char *what)
{
	cr_assert(isfinite(a->loss) && isfinite(b->loss));
	cr_assert(fabs(a->loss - b->loss) <= 1e-9 * fabs(a->loss),
		  "%s: loss %.17g vs %.17g", what, a->loss, b->loss);
	cr_assert_eq(a->n, b->n);
	double e = nmse(b->g, a->g, a->n);
	cr_assert_lt(e, GRAD_TOL, "%s: gradient NMSE %g", what, e);
	cr_log_info("%s: loss %.9g, gradient NMSE %g, bitwise %s", what,
		    b->loss, e,
		    memcmp(a->g, b->g, a->n * sizeof(double)) ? "no" : "yes");
}

Test(cuda_managed, equals_unroll, .timeout = 300)
{
	struct shape s = {32, 16, 4, 6};
	struct bench_config c;
	make_config(&c, "unroll", s, 1, 0);
	struct result un = grad_step(&c);
	for (int pf = 0; pf < 2; pf++) {
		make_config(&c, "managed", s, pf, 0);
		struct result mg = grad_step(&c);
		assert_close(&un, &mg, pf ? "prefetch" : "no prefetch");
		cr_assert_gt(mg.managed_live, 0);
		cr_assert_eq(mg.managed_live % (size_t)s.L, 0);
		size_t tape = mg.managed_live / (size_t)s.L;
		cr_assert_eq(mg.moved, pf ? (long)((s.L - 1) * tape) : 0L);
		free(mg.g);
	}
	free(un.g);
}

Test(cuda_managed, oversubscribed, .timeout = 600)
{
	struct shape s = {256, 128, 16, 16};
	struct bench_config c;
	struct run_ctx rc;
	char err[512] = "";
	make_config(&c, "unroll", s, 1, 0);
	struct result un = grad_step(&c);
	make_config(&c, "unroll", s, 1, 256);
	cr_assert_eq(cuda_run_ctx(&rc, &c, err, sizeof(err)), -1,
		     "unroll's tapes fit under the cap");
	cr_log_info("unroll under the cap: %s", err);
	make_config(&c, "managed", s, 1, 256);
	struct result mg = grad_step(&c);
	cr_assert_gt(mg.managed_live, (size_t)256 << 20,
		     "the managed tapes (%zu bytes) fit under the cap",
		     mg.managed_live);
	assert_close(&un, &mg, "oversubscribed");
	free(un.g);
	free(mg.g);
}
