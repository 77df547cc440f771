/*
 * test_graphs.c — the host side of cuda_graphs (methods/method.c's
 * recorded passes, methods/solvers.c's device-side loops) on the CPU. The
 * CPU backends have no graphs, so the backend here gets stand-in graph
 * ops: the ops "recorded" run at once (the CPU cannot defer them), the
 * recordings are counted, a loop's segments are counted together with
 * those recorded after the device's stop flag went to 0 (those a GPU
 * skips), and a launch is counted and runs nothing. So the first step with
 * graphs computes, and the tests compare it with a step without; later
 * steps only replay, and the tests check what was launched and counted.
 * tests/test_cuda_graphs.c compares real graphs with eager runs on a GPU.
 *
 *   1. unroll, checkpoint, revolve and selective: the recorded step is bitwise the
 *      eager one; a forward and a backward are recorded once and replayed
 *      while their buffers stay, with the recording's evaluation counts
 *      and work by unit; a new output buffer is recorded anew;
 *   2. deq (Broyden and Anderson forward, Broyden backward): the first
 *      step with graphs is bitwise the eager one (result, iterations,
 *      residuals, trace), each solve records max_iter segments and reads
 *      the host once, the evaluations counted are the device's iterations,
 *      not the segments recorded, and the solvers' own iterations and
 *      history (a closed form there) the eager loops'; the next step
 *      records nothing and launches one loop a solve;
 *   3. offload and managed are not recorded (their copies use a second
 *      stream), nor is anything when the backend has no graphs.
 */
#include "bench/run/step_graphs.h"
#include "methods/method.h"

#define DQ_TEST_SEED 31
#include "test_util.h"
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli.h"
#include "test_deq_util.h"

/* ------------------------------------------------- stand-in graph ops */

static struct {
	struct backend_ops ops;
	struct backend_graph_ops graph;
	int recordings, loops, segments, after_stop, launches, live;
	int in_loop;
} fake;

static void fake_begin(void *ctx)
{
	(void)ctx;
	fake.recordings++;
}

static void *fake_end(void *ctx)
{
	(void)ctx;
	fake.live++;
	return malloc(1);
}

static void fake_loop_begin(void *ctx)
{
	(void)ctx;
	fake.loops++;
	fake.segments++;
	fake.in_loop = 1;
}

/* On the CPU *go is host memory, already written by the check. */
static void fake_loop_next(void *ctx, const double *go)
{
	(void)ctx;
	cr_assert(fake.in_loop);
	fake.segments++;
	fake.after_stop += *go == 0;
}

static void *fake_loop_end(void *ctx)
{
	fake.in_loop = 0;
	return fake_end(ctx);
}

static void fake_launch(void *ctx, void *g)
{
	(void)ctx;
	cr_assert_not_null(g);
	fake.launches++;
}

static void fake_free(void *ctx, void *g)
{
	(void)ctx;
	fake.live--;
	free(g);
}

static void give_graphs(struct model *m)
{
	memset(&fake, 0, sizeof(fake));
	fake.ops = *m->be->ops;
	fake.graph.graph_begin = fake_begin;
	fake.graph.graph_end = fake_end;
	fake.graph.graph_loop_begin = fake_loop_begin;
	fake.graph.graph_loop_next = fake_loop_next;
	fake.graph.graph_loop_end = fake_loop_end;
	fake.graph.graph_launch = fake_launch;
	fake.graph.graph_free = fake_free;
	fake.ops.graph = &fake.graph;
	m->be->ops = &fake.ops;
}

static struct method_config graphed(struct method_config c)
{
	c.graphs = 1;
	return c;
}

#define odd shape_odd

/* The work of two steps by unit (method_work), equal. */
static void same_work(const struct method_stats *a,
		      const struct method_stats *b, const char *what)
{
	const struct method_work *x = &a->work, *y = &b->work;
	cr_assert_eq(x->block_fwd_taped, y->block_fwd_taped, "%s", what);
	cr_assert_eq(x->block_fwd, y->block_fwd, "%s", what);
	cr_assert_eq(x->block_fwd_recompute, y->block_fwd_recompute, "%s",
		     what);
	cr_assert_eq(x->block_vjp, y->block_vjp, "%s", what);
	cr_assert_eq(x->block_vjp_input, y->block_vjp_input, "%s", what);
	cr_assert_eq(x->solver_update, y->solver_update, "%s: %ld updates",
		     what, x->solver_update);
	cr_assert_eq(x->solver_history_sum, y->solver_history_sum,
		     "%s: history %ld", what, x->solver_history_sum);
	cr_assert_eq(x->attn_recompute, y->attn_recompute, "%s", what);
}

/* --------------------------------------------- 1. recorded passes */

static void check_passes(const char *name, int L, int k)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 3);
	give_graphs(m);
	void *z = dev_state(m), *z2 = dev_state(m);
	struct method_config c = cfg_of(method_kind_parse(name), L, k);
	struct step_out eager = step_of(m, c, z);
	cr_assert_eq(fake.recordings + fake.launches, 0, "%s", name);
	struct method *me = new_method(m, graphed(c));
	double loss = step(m, me, z, NULL);
	double *g = download(m->be, m->grad_buf, m->n_param_elems);
	cr_assert_eq(memcmp(&loss, &eager.loss, sizeof(loss)), 0, "%s", name);
	cr_assert_eq(memcmp(g, eager.g, m->n_param_elems * sizeof(double)), 0,
		     "%s", name);
	cr_assert_eq(fake.recordings, 2, "%s: a forward and a backward", name);
	cr_assert_eq(fake.launches, 2, "%s", name);
	cr_assert_eq(fake.loops, 0, "%s", name);
	/* replays: nothing recorded, the recording's counts */
	step(m, me, z, NULL);
	step(m, me, z, NULL);
	cr_assert_eq(fake.recordings, 2, "%s", name);
	cr_assert_eq(fake.launches, 6, "%s", name);
	const struct method_stats *st = method_get_stats(me);
	cr_assert_eq(st->forward_evals, eager.st.forward_evals, "%s", name);
	cr_assert_eq(st->vjp_evals, eager.st.vjp_evals, "%s", name);
	same_work(st, &eager.st, name); /* replayed: the recording's work */
	/* another output buffer: the forward is recorded anew */
	step(m, me, z2, NULL);
	cr_assert_eq(fake.recordings, 3, "%s", name);
	cr_assert_eq(fake.live, 2, "%s: the old forward was freed", name);
	method_destroy(me);
	cr_assert_eq(fake.live, 0, "%s: method_destroy frees its graphs", name);
	free(g);
	step_out_free(&eager);
	backend_free(m->be, z);
	backend_free(m->be, z2);
	close_model(m);
}

Test(graphs, recorded_passes, .timeout = 120)
{
	check_passes("unroll", 5, 0);
	check_passes("checkpoint", 7, 3);
	check_passes("revolve", 6, 0);
	check_passes("selective", 4, 0);
}

/* ------------------------------------------ 2. device-side loops */

static void check_deq(enum solver_kind fs, const char *what)
{
	struct model *m =
	    open_contractive("cpu", MODEL_TANH_CELL, shape_pow2, 5);
	give_graphs(m);
	void *z = dev_state(m);
	struct method_config c = deq_solvers(fs, SOLVER_BROYDEN, 1e-6, 25);
	struct step_out eager = step_of(m, c, z);
	struct method *me = new_method(m, graphed(c));
	double loss = step(m, me, z, NULL);
	double *g = download(m->be, m->grad_buf, m->n_param_elems);
	const struct method_stats *st = method_get_stats(me);
	cr_assert_eq(memcmp(&loss, &eager.loss, sizeof(loss)), 0, "%s", what);
	cr_assert_eq(memcmp(g, eager.g, m->n_param_elems * sizeof(double)), 0,
		     "%s", what);
	cr_assert(eager.st.fwd.converged && eager.st.bwd.converged, "%s", what);
	cr_assert_lt(eager.st.fwd.iters, 25, "%s: stops early", what);
	/* the same iterations, residuals and trace as the eager solves */
	cr_assert_eq(st->fwd.iters, eager.st.fwd.iters, "%s", what);
	cr_assert_eq(st->bwd.iters, eager.st.bwd.iters, "%s", what);
	cr_assert_eq(
	    memcmp(&st->fwd.residual, &eager.st.fwd.residual, sizeof(double)),
	    0, "%s", what);
	cr_assert_eq(st->fwd_trace_len, eager.st.fwd_trace_len, "%s", what);
	cr_assert_eq(memcmp(st->fwd_trace, eager.st.fwd_trace,
			    (size_t)st->fwd_trace_len * sizeof(double)),
		     0, "%s", what);
	/* two loops of max_iter segments, each read once; the evaluations
	 * counted are the device's, not the segments */
	cr_assert_eq(fake.loops, 2, "%s", what);
	cr_assert_eq(fake.segments, 50, "%s", what);
	cr_assert_eq(fake.after_stop,
		     50 - eager.st.fwd.iters - eager.st.bwd.iters,
		     "%s: %d segments after the stop", what, fake.after_stop);
	cr_assert_eq(st->host_reads, 2, "%s: %ld reads", what, st->host_reads);
	cr_assert_gt(eager.st.host_reads, 2, "%s", what);
	cr_assert_eq(st->fwd.evals, st->fwd.iters, "%s", what);
	cr_assert_eq(st->forward_evals, eager.st.forward_evals, "%s", what);
	cr_assert_eq(st->vjp_evals, eager.st.vjp_evals, "%s", what);
	/* the solvers' own iterations: solvers.c's closed form of a loop
	 * against the eager loops' counts */
	cr_assert_gt(eager.st.work.solver_update, 0, "%s", what);
	same_work(st, &eager.st, what);
	cr_assert_eq(fake.recordings, 0, "%s: deq's passes read the host",
		     what);
	/* the next step replays both loops */
	step(m, me, z, NULL);
	cr_assert_eq(fake.loops, 2, "%s", what);
	cr_assert_eq(fake.launches, 4, "%s", what);
	cr_assert_eq(method_get_stats(me)->host_reads, 2, "%s", what);
	method_destroy(me);
	cr_assert_eq(fake.live, 0, "%s", what);
	free(g);
	step_out_free(&eager);
	backend_free(m->be, z);
	close_model(m);
}

Test(graphs, device_side_loops, .timeout = 120)
{
	check_deq(SOLVER_BROYDEN, "broyden");
	check_deq(SOLVER_ANDERSON, "anderson");
}

/* ------------------------------- 3. the head and the optimizer */

/* One training step of me on m's batch up to the method's backward:
 * eager (sg NULL: the run's head, model_head_forward_train) or with the
 * head recorded; returns the eager loss (NAN with sg). */
static double head_and_method(struct model *m, struct method *me, void *z,
			      struct step_graphs *sg)
{
	double loss = NAN;
	model_zero_grads(m);
	model_inject_forward(m);
	method_forward(me, m->u, z, 1);
	if (sg) {
		step_graphs_head(sg, m, z);
	} else {
		loss = model_head_forward_train(m, z);
		model_head_backward(m);
	}
	method_backward(me, m->gz, m->gu);
	return loss;
}

/* What a step left: loss, norm, parameters and Adam moments. */
struct opt_out {
	double loss, gn, *p, *am, *av;
};

static struct opt_out opt_out_of(struct model *m, double loss, double gn,
				 void *am, void *av)
{
	size_t n = m->n_param_elems;
	struct opt_out o = {loss, gn, download(m->be, m->param_buf, n),
			    download(m->be, am, n), download(m->be, av, n)};
	return o;
}

/* a and b (n parameters) the same bits. */
static void same_opt_out(const struct opt_out *a, const struct opt_out *b,
			 size_t n, const char *be_name)
{
	cr_assert_eq(memcmp(&a->loss, &b->loss, sizeof(double)), 0, "%s",
		     be_name);
	cr_assert_eq(memcmp(&a->gn, &b->gn, sizeof(double)), 0, "%s", be_name);
	cr_assert_eq(memcmp(a->p, b->p, n * sizeof(double)), 0, "%s", be_name);
	cr_assert_eq(memcmp(a->am, b->am, n * sizeof(double)), 0, "%s",
		     be_name);
	cr_assert_eq(memcmp(a->av, b->av, n * sizeof(double)), 0, "%s",
		     be_name);
}

static void check_head_opt(const char *be_name, double clip)
{
	struct model *m = open_model(be_name, MODEL_TRANSFORMER, odd, 3);
	size_t n = m->n_param_elems;
	double *p0 = download(m->be, m->param_buf, n);
	void *z = dev_state(m), *am = backend_alloc(m->be, n, MEM_OPTIMIZER),
	     *av = backend_alloc(m->be, n, MEM_OPTIMIZER);
	cr_assert(am && av);
	struct method *me =
	    new_method(m, cfg_of(method_kind_parse("unroll"), 3, 0));
	struct step_opt o = {.lr = 1e-2,
			     .clip = clip,
			     .beta1 = 0.9,
			     .beta2 = 0.999,
			     .eps = 1e-8,
			     .t = 1};
	/* eager: train_step.c's head, then norm, clipping and Adam */
	be_fill(m->be, am, 0, n), be_fill(m->be, av, 0, n);
	double loss = head_and_method(m, me, z, NULL);
	model_inject_backward(m);
	double gn = be_norm(m->be, m->grad_buf, n);
	if (clip > 0 && gn > clip)
		be_scale(m->be, m->grad_buf, clip / gn, n);
	be_adam_host(m->be, m->param_buf, m->grad_buf, am, av, n, o.lr, o.beta1,
		     o.beta2, o.eps, o.wd, o.t);
	struct opt_out eager = opt_out_of(m, loss, gn, am, av);
	cr_assert(clip == 0 || gn > clip, "%s: clipping engaged", be_name);
	/* the run's step without graphs (its scalars on the device, nothing
	 * recorded): the same bits */
	be_upload(m->be, m->param_buf, p0, n);
	be_fill(m->be, am, 0, n), be_fill(m->be, av, 0, n);
	struct step_graphs sg0;
	cr_assert_eq(step_graphs_init(&sg0, m, 1, 1), 0);
	cr_assert(sg0.one_pass && !sg0.record, "%s: no graphs here", be_name);
	head_and_method(m, me, z, &sg0);
	step_graphs_opt(&sg0, m, am, av, &o, 1, &loss, &gn);
	struct opt_out u = opt_out_of(m, loss, gn, am, av);
	same_opt_out(&u, &eager, n, be_name);
	step_graphs_free(&sg0, m);
	/* recorded: the same bits */
	be_upload(m->be, m->param_buf, p0, n);
	be_fill(m->be, am, 0, n), be_fill(m->be, av, 0, n);
	give_graphs(m);
	struct step_graphs sg;
	cr_assert(step_graphs_wanted(m, 1) && !step_graphs_wanted(m, 0));
	cr_assert_eq(step_graphs_init(&sg, m, 1, 1), 0);
	cr_assert(sg.record, "%s: recorded", be_name);
	head_and_method(m, me, z, &sg);
	step_graphs_opt(&sg, m, am, av, &o, 1, &loss, &gn);
	struct opt_out g = opt_out_of(m, loss, gn, am, av);
	same_opt_out(&g, &eager, n, be_name);
	cr_assert_eq(fake.recordings, 2, "%s: the head and the optimizer",
		     be_name);
	cr_assert_eq(fake.launches, 2, "%s", be_name);
	/* the next step replays both; other moments record the optimizer anew */
	o.t = 2;
	head_and_method(m, me, z, &sg);
	step_graphs_opt(&sg, m, am, av, &o, 1, &loss, &gn);
	cr_assert_eq(fake.recordings, 2, "%s", be_name);
	cr_assert_eq(fake.launches, 4, "%s", be_name);
	step_graphs_opt(&sg, m, av, am, &o, 1, &loss, &gn);
	cr_assert_eq(fake.recordings, 3, "%s", be_name);
	step_graphs_free(&sg, m);
	cr_assert_eq(fake.live, 0, "%s: step_graphs_free frees both", be_name);
	method_destroy(me);
	struct opt_out *outs[] = {&eager, &u, &g};
	for (int i = 0; i < 3; i++)
		free(outs[i]->p), free(outs[i]->am), free(outs[i]->av);
	free(p0);
	backend_free(m->be, z), backend_free(m->be, am),
	    backend_free(m->be, av);
	close_model(m);
}

Test(graphs, head_and_optimizer, .timeout = 120)
{
	check_head_opt("cpu", 0.0);
	check_head_opt("cpu", 1e-3);
	check_head_opt("cpu64", 1e-3);
}

/* A chunked head reads the host once a chunk: it is not recorded. */
Test(graphs, chunked_head_not_recorded)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 3);
	give_graphs(m);
	cr_assert(step_graphs_wanted(m, 1));
	close_model(m);
	struct backend *be = make_be("cpu");
	struct model_config mc = model_cfg(MODEL_TRANSFORMER, odd, 11);
	mc.head_chunk = 4; /* < B T = 15 */
	struct model *mk = model_of(be, &mc);
	give_graphs(mk);
	cr_assert(!step_graphs_wanted(mk, 1));
	model_destroy(mk);
	backend_destroy(be);
}

/* ------------------------------------------------ 4. not recorded */

Test(graphs, not_recorded)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 3);
	void *z = dev_state(m);
	/* no graph ops: cfg.graphs changes nothing */
	struct step_out a =
	    step_of(m, graphed(cfg_of(method_kind_parse("unroll"), 4, 0)), z);
	struct step_out b =
	    step_of(m, cfg_of(method_kind_parse("unroll"), 4, 0), z);
	assert_same_step(m, &a, &b, "unroll without graph ops");
	give_graphs(m);
	struct method *me =
	    new_method(m, graphed(cfg_of(method_kind_parse("offload"), 4, 0)));
	step(m, me, z, NULL);
	cr_assert_eq(fake.recordings + fake.loops + fake.launches, 0);
	method_destroy(me);
	step_out_free(&a);
	step_out_free(&b);
	backend_free(m->be, z);
	close_model(m);
}

/* ------------------------------------------------------ 5. refusals */

Test(graphs, refused_off_cuda, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	char out[700], o[600];
	cli_path(o, sizeof(o), "r.jsonl");
	snprintf(out, sizeof(out), "out=%s", o);
	const char *const cpu[] = {"run", "cuda_graphs=true", "steps=2", out,
				   NULL};
	const char *const pt[] = {
	    "run", "cuda_graphs=true", "impl=pytorch", "steps=2", out, NULL};
	const char *const sync[] = {
	    "run", "device=cuda", "cuda_graphs=true", "sync_every=4", "steps=2",
	    out,   NULL};
	cli_expect_refused(cpu, "cuda_graphs=true records CUDA graphs");
	cli_expect_refused(pt, "use compile=true");
	/* in a build without CUDA device=cuda is refused for that first */
	char err[4096];
	cr_assert_eq(cli_run(sync, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "sync_every=4") || strstr(err, "no CUDA"), "%s",
		  err);
}
