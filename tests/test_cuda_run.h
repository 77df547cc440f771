/* test_cuda_run.h — what the GPU tests of whole training steps
 * (test_cuda_managed.c, test_cuda_graphs.c) share: a run context on the
 * GPU (the test skipped where there is none), seeded tokens, and the
 * gradients brought back. Header-only, static inline; include after
 * test_ops_util.h (rng_state, urand, zeros). */
#ifndef DQ_TEST_CUDA_RUN_H
#define DQ_TEST_CUDA_RUN_H

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "run_ctx.h"

/* run_ctx_create of c; skips the test without a GPU or a CUDA build;
 * otherwise 0, or -1 with err (refused). */
static inline int cuda_run_ctx(struct run_ctx *rc, const struct bench_config *c,
			       char *err, size_t errlen)
{
	if (run_ctx_create(rc, c, c->model.vocab_size, err, errlen) == 0)
		return 0;
	if (strstr(err, "no CUDA device was found") ||
	    strstr(err, "has no CUDA backend"))
		cr_skip_test("%s", err);
	return -1;
}

/* (batch_size, seq_len + 1) token ids below vocab_size from seed 77, the
 * same for every call; free() them. */
static inline int32_t *cuda_test_tokens(const struct bench_config *c)
{
	int B = c->model.batch_size, T = c->model.seq_len,
	    V = c->model.vocab_size;
	int32_t *tok = malloc((size_t)B * (T + 1) * sizeof(int32_t));
	cr_assert_not_null(tok);
	rng_state = 77;
	for (int i = 0; i < B * (T + 1); i++)
		tok[i] = (int32_t)((urand() + 1) * 0.5 * V) % V;
	return tok;
}

/* The model's dL/dθ (n_param_elems) in a new host array (free()). */
static inline double *cuda_test_grads(const struct run_ctx *rc)
{
	double *g = zeros(rc->m->n_param_elems);
	be_download(rc->be, g, rc->m->grad_buf, rc->m->n_param_elems);
	return g;
}

#endif
