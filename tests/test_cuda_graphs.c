/*
 * test_cuda_graphs.c — cuda_graphs=true against eager launches on a GPU
 * (suite `cuda`, run by scripts/gpu-check.sh; skipped without a GPU or a
 * CUDA build). tests/test_graphs.c checks the host side on the CPU with
 * stand-in graph ops; here the graphs are real.
 *
 * For unroll, checkpoint and revolve on a small transformer and deq
 * (Broyden and Anderson forward, Broyden IFT backward) on a tanh cell: three grad steps on the
 * same tokens with graphs (the first records, the others replay) and
 * three without, from the same parameters. Each step's loss agrees within
 * 1e-9 relative and the last step's gradients within NMSE 1e-12 for the
 * fixed-depth methods, 1e-8 for deq; the tests log whether they are
 * bitwise equal (the CUDA reductions that use atomics may sum in another
 * order from run to run, graphs or not). For deq: the solves stop at the
 * same iteration (forward and backward), the evaluation counts agree, and
 * with graphs a step reads the host exactly twice (once a solve).
 */
#include "../methods/deq.h"
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

enum { STEPS = 3 };

struct result {
	double loss[STEPS];
	double *g;
	size_t n;
	struct method_stats st;
};

static void make_config(struct bench_config *c, const char *method,
			enum solver_kind fs, int graphs)
{
	char err[256];
	config_defaults(c);
	c->model.d_model = 32;
	c->model.n_heads = 4;
	c->model.d_ff = 64;
	c->model.seq_len = 16;
	c->model.batch_size = 4;
	c->model.vocab_size = 29;
	c->model.seed = 11;
	c->device = config_device_parse("cuda");
	cr_assert_eq(config_set(c, "method", method, err, sizeof(err)), 0);
	/* the transformer at init is no contraction (test_cuda.c); the
	 * tanh cell's solves converge */
	if (!strcmp(method, "deq"))
		c->model.kind = MODEL_TANH_CELL;
	c->method.layers = 6;
	deq_config(&c->method)->f_solver = fs;
	deq_config(&c->method)->f_tol = 1e-4;
	deq_config(&c->method)->b_tol = 1e-4;
	c->cuda_graphs = graphs;
	c->method.graphs = graphs;
	method_config_resolve(&c->method);
}

static struct result run_steps(const struct bench_config *c)
{
	struct run_ctx rc;
	struct result r;
	char err[512] = "";
	if (cuda_run_ctx(&rc, c, err, sizeof(err)) != 0)
		cr_assert_fail("run_ctx_create: %s", err);
	int32_t *tok = cuda_test_tokens(c);
	for (int s = 0; s < STEPS; s++)
		cr_assert_eq(train_step_grad_step(&rc, tok, &r.loss[s], err,
						  sizeof(err)),
			     0, "%s", err);
	r.n = rc.m->n_param_elems;
	r.g = cuda_test_grads(&rc);
	r.st = *method_get_stats(rc.me);
	run_ctx_destroy(&rc);
	free(tok);
	return r;
}

static void check(const char *method, enum solver_kind fs, double tol)
{
	struct bench_config c;
	make_config(&c, method, fs, 0);
	struct result eager = run_steps(&c);
	make_config(&c, method, fs, 1);
	struct result gr = run_steps(&c);
	for (int s = 0; s < STEPS; s++)
		cr_assert(fabs(gr.loss[s] - eager.loss[s]) <=
			      1e-9 * fabs(eager.loss[s]),
			  "%s step %d: loss %.17g vs eager %.17g", method, s,
			  gr.loss[s], eager.loss[s]);
	double e = nmse(gr.g, eager.g, eager.n);
	cr_assert_lt(e, tol, "%s: gradient NMSE %g", method, e);
	cr_assert_eq(gr.st.forward_evals, eager.st.forward_evals, "%s", method);
	cr_assert_eq(gr.st.vjp_evals, eager.st.vjp_evals, "%s", method);
	if (gr.st.has_fwd_solve) {
		cr_assert_eq(gr.st.fwd.iters, eager.st.fwd.iters, "%s", method);
		cr_assert_eq(gr.st.bwd.iters, eager.st.bwd.iters, "%s", method);
		cr_assert_eq(gr.st.host_reads, 2, "%s: %ld host reads", method,
			     gr.st.host_reads);
	}
	cr_log_info("%s: gradient NMSE %g, bitwise %s, host reads %ld (eager "
		    "%ld)",
		    method, e,
		    memcmp(gr.g, eager.g, eager.n * sizeof(double)) ? "no"
								    : "yes",
		    gr.st.host_reads, eager.st.host_reads);
	free(eager.g);
	free(gr.g);
}

Test(cuda_graphs, recorded_passes, .timeout = 300)
{
	check("unroll", SOLVER_BROYDEN, 1e-12);
	check("checkpoint", SOLVER_BROYDEN, 1e-12);
	check("revolve", SOLVER_BROYDEN, 1e-12);
}

Test(cuda_graphs, device_side_loops, .timeout = 300)
{
	check("deq", SOLVER_BROYDEN, 1e-8);
	check("deq", SOLVER_ANDERSON, 1e-8);
}
