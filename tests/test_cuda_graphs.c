/*
 * test_cuda_graphs.c — cuda_graphs=true against eager launches on a GPU
 * (suite `cuda`, run by scripts/gpu-check.sh; skipped without a GPU or a
 * CUDA build). tests/test_graphs.c checks the host side on the CPU with
 * stand-in graph ops; here the graphs are real.
 *
 * For unroll, checkpoint, revolve and selective on a small transformer and deq
 * (Broyden and Anderson forward, Broyden IFT backward) on a tanh cell: three grad steps on the
 * same tokens with graphs (the first records, the others replay) and
 * three without, from the same parameters. Each step's loss agrees within
 * 1e-9 relative and the last step's gradients within NMSE 1e-12 for the
 * fixed-depth methods, 1e-8 for deq; the tests log whether they are
 * bitwise equal (the CUDA reductions that use atomics may sum in another
 * order from run to run, graphs or not). For deq: the solves stop at the
 * same iteration (forward and backward), the evaluation counts agree, and
 * with graphs a step reads the host exactly twice (once a solve). The
 * same for Broyden's fused iteration, whose solve is one WHILE node. The
 * head and the optimizer (bench/run/step_graphs.c) recorded: three steps
 * with clipping agree with the eager steps (loss and norm 1e-9 relative,
 * parameters NMSE 1e-12).
 */
#include "../methods/deq.h"
#include "test_cuda_util.h"
#include "test_ops_util.h"
#include "config.h"
#include "run_ctx.h"
#include "test_cuda_run.h"
#include "step_graphs.h"
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
			enum solver_kind fs, int graphs, int fused)
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
	deq_config(&c->method)->solver_kernels =
	    fused ? SOLVER_KERNELS_FUSED : SOLVER_KERNELS_OPS;
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

/* Graphs (fused: Broyden's fused iteration, a WHILE loop) against eager
 * launches of the same kernels (eager_fused == fused: the bounds above)
 * or of the other path, whose sums run in another order: then the losses
 * within 1e-5 relative, the gradients within NMSE 1e-6 and the solves'
 * iterations within one of each other (float32 residuals near the
 * tolerance may cross it one evaluation apart). */
static void check_k(const char *method, enum solver_kind fs, double tol,
		    int fused, int eager_fused)
{
	struct bench_config c;
	const int same = fused == eager_fused;
	const double ltol = same ? 1e-9 : 1e-5;
	make_config(&c, method, fs, 0, eager_fused);
	struct result eager = run_steps(&c);
	make_config(&c, method, fs, 1, fused);
	struct result gr = run_steps(&c);
	for (int s = 0; s < STEPS; s++)
		cr_assert(fabs(gr.loss[s] - eager.loss[s]) <=
			      ltol * fabs(eager.loss[s]),
			  "%s step %d: loss %.17g vs eager %.17g", method, s,
			  gr.loss[s], eager.loss[s]);
	double e = nmse(gr.g, eager.g, eager.n);
	cr_assert_lt(e, same ? tol : 1e-6, "%s: gradient NMSE %g", method, e);
	if (same) {
		cr_assert_eq(gr.st.forward_evals, eager.st.forward_evals);
		cr_assert_eq(gr.st.vjp_evals, eager.st.vjp_evals, "%s", method);
	}
	if (gr.st.has_fwd_solve) {
		int df = gr.st.fwd.iters - eager.st.fwd.iters;
		int db = gr.st.bwd.iters - eager.st.bwd.iters;
		cr_assert(same ? df == 0 && db == 0
			       : abs(df) <= 1 && abs(db) <= 1,
			  "%s: iterations fwd %d vs %d, bwd %d vs %d", method,
			  gr.st.fwd.iters, eager.st.fwd.iters, gr.st.bwd.iters,
			  eager.st.bwd.iters);
		cr_assert_eq(gr.st.host_reads, 2, "%s: %ld host reads", method,
			     gr.st.host_reads);
	}
	cr_log_info("%s%s: gradient NMSE %g, bitwise %s, host reads %ld (eager "
		    "%ld)",
		    method, fused ? " fused" : "", e,
		    memcmp(gr.g, eager.g, eager.n * sizeof(double)) ? "no"
								    : "yes",
		    gr.st.host_reads, eager.st.host_reads);
	free(eager.g);
	free(gr.g);
}

static void check(const char *method, enum solver_kind fs, double tol)
{
	check_k(method, fs, tol, 0, 0);
}

Test(cuda_graphs, recorded_passes, .timeout = 300)
{
	check("unroll", SOLVER_BROYDEN, 1e-12);
	check("checkpoint", SOLVER_BROYDEN, 1e-12);
	check("revolve", SOLVER_BROYDEN, 1e-12);
	check("selective", SOLVER_BROYDEN, 1e-12);
}

Test(cuda_graphs, device_side_loops, .timeout = 300)
{
	check("deq", SOLVER_BROYDEN, 1e-8);
	check("deq", SOLVER_ANDERSON, 1e-8);
}

/* solver_kernels=fused (a Broyden or Anderson forward, a Broyden
 * backward): each solve one WHILE node (cuda_graph.cu) whose body is F
 * and the two fused kernels; against the same kernels launched
 * eagerly, and against the ops path (the same iterations; the sums'
 * order differs, so the losses within 1e-9 and the gradients within NMSE
 * 1e-8 as for the ops' graphs). */
Test(cuda_graphs, fused_while_loop, .timeout = 300)
{
	check_k("deq", SOLVER_BROYDEN, 1e-8, 1, 1);
	check_k("deq", SOLVER_BROYDEN, 1e-8, 1, 0);
	check_k("deq", SOLVER_ANDERSON, 1e-8, 1, 1);
	check_k("deq", SOLVER_ANDERSON, 1e-8, 1, 0);
}

/* ------------------------------------- the head and the optimizer */

/* STEPS training steps of unroll from the same parameters: eager (the
 * runner's head, norm, clipping and Adam) or with step_graphs (the head
 * and the optimizer recorded at the first step, replayed after). The
 * losses, norms and the final parameters come back. */
static void opt_steps(int graphs, double *loss, double *gn, double **p,
		      size_t *n)
{
	struct bench_config c;
	struct run_ctx rc;
	char err[512] = "";
	make_config(&c, "unroll", SOLVER_BROYDEN, 0, 0);
	if (cuda_run_ctx(&rc, &c, err, sizeof(err)) != 0)
		cr_assert_fail("run_ctx_create: %s", err);
	struct model *m = rc.m;
	*n = m->n_param_elems;
	void *am = backend_alloc(rc.be, *n, MEM_OPTIMIZER),
	     *av = backend_alloc(rc.be, *n, MEM_OPTIMIZER);
	be_fill(rc.be, am, 0, *n), be_fill(rc.be, av, 0, *n);
	struct step_graphs sg;
	cr_assert(step_graphs_wanted(m, 1));
	cr_assert_eq(step_graphs_init(&sg, m, 1, 1), 0);
	int32_t *tok = cuda_test_tokens(&c);
	for (int s = 0; s < STEPS; s++) {
		struct step_opt o = {.lr = 1e-2,
				     .clip = 0.05,
				     .beta1 = 0.9,
				     .beta2 = 0.999,
				     .eps = 1e-8,
				     .t = s + 1};
		if (!graphs) {
			cr_assert_eq(step_forward(&rc, tok, 1, &loss[s], err,
						  sizeof(err)),
				     0, "%s", err);
			step_backward(&rc);
			gn[s] = be_norm(rc.be, m->grad_buf, *n);
			if (gn[s] > o.clip)
				be_scale(rc.be, m->grad_buf, o.clip / gn[s],
					 *n);
			be_adam_host(rc.be, m->param_buf, m->grad_buf, am, av,
				     *n, o.lr, o.beta1, o.beta2, o.eps, o.wd,
				     o.t);
			continue;
		}
		model_zero_grads(m);
		cr_assert_eq(model_set_batch(m, tok, err, sizeof(err)), 0);
		model_inject_forward(m);
		method_forward(rc.me, m->u, rc.z, 1);
		step_graphs_head(&sg, m, rc.z);
		method_backward(rc.me, m->gz, m->gu);
		step_graphs_opt(&sg, m, am, av, &o, 1, &loss[s], &gn[s]);
	}
	*p = zeros(*n);
	be_download(rc.be, *p, m->param_buf, *n);
	step_graphs_free(&sg, m);
	backend_free(rc.be, am), backend_free(rc.be, av);
	run_ctx_destroy(&rc);
	free(tok);
}

Test(cuda_graphs, head_and_optimizer, .timeout = 300)
{
	double le[STEPS], lg[STEPS], ge[STEPS], gg[STEPS], *pe, *pg;
	size_t n;
	opt_steps(0, le, ge, &pe, &n);
	opt_steps(1, lg, gg, &pg, &n);
	for (int s = 0; s < STEPS; s++) {
		cr_assert(fabs(lg[s] - le[s]) <= 1e-9 * fabs(le[s]),
			  "step %d: loss %.17g vs eager %.17g", s, lg[s],
			  le[s]);
		cr_assert(fabs(gg[s] - ge[s]) <= 1e-9 * fabs(ge[s]),
			  "step %d: norm %.17g vs eager %.17g", s, gg[s],
			  ge[s]);
		cr_assert_gt(ge[s], 0.05, "step %d: clipping engaged", s);
	}
	double e = nmse(pg, pe, n);
	cr_assert_lt(e, 1e-12, "parameters after %d steps: NMSE %g", STEPS, e);
	cr_log_info(
	    "head and optimizer recorded: parameter NMSE %g, bitwise %s", e,
	    memcmp(pg, pe, n * sizeof(double)) ? "no" : "yes");
	free(pe);
	free(pg);
}
