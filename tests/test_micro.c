/* test_micro.c — microbatches=M (gradient accumulation, docs/methods.md
 * §Micro-batches): the gradient of M micro-batches of B/M rows equals the
 * full batch's for unroll, checkpoint and deq (per-sample solves, each
 * sample's own stopping rule) within a tolerance that is the summation
 * order's (the DEQ's: its solves', MICRO_DEQ_TOL below): the weight gradients' GEMMs and bias sums run over B/M·T rows
 * twice instead of B·T once, and the 1/(B·T) of the loss is applied as
 * 1/(B/M·T) then 1/M. Both round at the backend's unit roundoff per
 * addition, over sums of a few hundred terms here: 1e-12 of the gradient's
 * largest magnitude on cpu64 (float64, u = 1.1e-16), 1e-5 on cpu (float32,
 * u = 6e-8). The depth memory (the allocator's MEM_DEPTH, as
 * method_memory predicts it) falls by exactly M for unroll and
 * checkpoint; records carry microbatches and count the work of every
 * micro-batch with one optimizer step; a microbatches that does not
 * divide batch_size, or one with cuda_graphs, is refused with one line. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../methods/method.h"
#include "../models/model.h"
#include "config.h"
#include "run_ctx.h"
#include "test_bench_util.h"
#include "test_cli.h"
#include "train_step.h"

#define MICRO_B 4
#define MICRO_T 5
#define MICRO_V 37

/* The config: a tiny transformer of batch 4, `method` (with its keys) on
 * device, micro micro-batches. */
static void micro_cfg(struct bench_config *c, const char *device,
		      const char *const *method, int micro)
{
	static const char *const base[] = {"d_model=12",   "n_heads=2",
					   "d_ff=16",	   "seq_len=5",
					   "batch_size=4", "vocab_size=37",
					   "seed=3",	   "threads=1",
					   "init_std=0.2", NULL};
	char e[512], arg[64];
	config_defaults(c);
	for (int i = 0; base[i]; i++)
		cr_assert_eq(config_set_arg(c, base[i], e, sizeof(e)), 0, "%s",
			     e);
	for (int i = 0; method[i]; i++)
		cr_assert_eq(config_set_arg(c, method[i], e, sizeof(e)), 0,
			     "%s", e);
	snprintf(arg, sizeof(arg), "device=%s", device);
	cr_assert_eq(config_set_arg(c, arg, e, sizeof(e)), 0, "%s", e);
	snprintf(arg, sizeof(arg), "microbatches=%d", micro);
	cr_assert_eq(config_set_arg(c, arg, e, sizeof(e)), 0, "%s", e);
	cr_assert_eq(config_finish(c, e, sizeof(e)), 0, "%s", e);
}

struct grad_run {
	double loss;
	double *g; /* (n_param_elems) dL/dθ, host */
	size_t n;
	long fwd_evals;	   /* the step's block applications */
	size_t depth_peak; /* the allocator's MEM_DEPTH peak */
	size_t depth_pred; /* method_memory's depth bytes */
};

/* One gradient step of cfg on fixed tokens (B, T+1). */
static struct grad_run grad_of(const struct bench_config *c)
{
	struct grad_run r;
	struct run_ctx rc;
	int32_t tok[MICRO_B * (MICRO_T + 1)];
	size_t solver;
	char e[512];
	for (int i = 0; i < MICRO_B * (MICRO_T + 1); i++)
		tok[i] = (i * 11 + 5) % MICRO_V;
	cr_assert_eq(run_ctx_create(&rc, c, MICRO_V, e, sizeof(e)), 0, "%s", e);
	cr_assert_eq(rc.m->B, MICRO_B / c->microbatches);
	cr_assert_eq(method_memory(rc.m, method_get_config(rc.me),
				   &r.depth_pred, &solver, e, sizeof(e)),
		     0, "%s", e);
	cr_assert_eq(train_step_grad_step(&rc, tok, &r.loss, e, sizeof(e)), 0,
		     "%s", e);
	r.n = rc.m->n_param_elems;
	r.g = malloc(r.n * sizeof(double));
	cr_assert_not_null(r.g);
	be_download(rc.be, r.g, rc.m->grad_buf, r.n);
	r.fwd_evals = method_get_stats(rc.me)->forward_evals;
	r.depth_peak = rc.be->mem.peak[MEM_DEPTH];
	run_ctx_destroy(&rc);
	return r;
}

/* Gradients of micro = 1, 2 and 4 agree within tol of the largest; the
 * losses (the batch's mean) too; the depth peak is the allocator's as
 * predicted and, where `scales`, falls by exactly M. */
static void check_method(const char *device, const char *const *method,
			 double tol, int scales)
{
	struct bench_config c;
	micro_cfg(&c, device, method, 1);
	struct grad_run full = grad_of(&c);
	double gmax = 0;
	for (size_t i = 0; i < full.n; i++)
		gmax = fmax(gmax, fabs(full.g[i]));
	cr_assert_gt(gmax, 0);
	for (int M = 2; M <= 4; M *= 2) {
		micro_cfg(&c, device, method, M);
		struct grad_run mb = grad_of(&c);
		double d = 0;
		cr_assert_eq(mb.n, full.n);

		for (size_t i = 0; i < full.n; i++)
			d = fmax(d, fabs(mb.g[i] - full.g[i]));
		cr_log_info(
		    "%s %s M=%d: gradients differ by %.3g of the largest",
		    device, method[0], M, d / gmax);
		cr_assert_leq(d, tol * gmax,
			      "%s %s M=%d: gradients differ by %g (largest "
			      "%g, tolerance %g of it)",
			      device, method[0], M, d, gmax, tol);
		cr_assert_leq(fabs(mb.loss - full.loss), tol * fabs(full.loss),
			      "%s %s M=%d: loss %.17g "
			      "vs %.17g",
			      device, method[0], M, mb.loss, full.loss);
		cr_assert_eq(mb.depth_peak, mb.depth_pred, "%s M=%d", method[0],
			     M);
		if (scales) {
			cr_assert_eq(mb.depth_peak * M, full.depth_peak,
				     "%s M=%d: depth %zu, full %zu", method[0],
				     M, mb.depth_peak, full.depth_peak);
			cr_assert_eq(mb.fwd_evals, M * full.fwd_evals);
		}
		free(mb.g);
	}
	free(full.g);
}

static const char *const unroll_keys[] = {"method=unroll", "layers=3", NULL};
static const char *const checkpoint_keys[] = {"method=checkpoint", "layers=4",
					      "k=2", NULL};
/* per-sample solves, each sample stopping on its own residual: a
 * micro-batch's samples are solved exactly as in the full batch */
static const char *const deq_keys[] = {"method=deq",
				       "solver_batching=per_sample",
				       "f_stop_scope=sample",
				       "b_stop_scope=sample",
				       "f_tol=1e-6",
				       "b_tol=1e-6",
				       NULL};

/* The DEQ's tolerance is its solves', not the summation order's: the
 * block's GEMMs over B/M·T rows round apart from B·T rows' on some BLAS
 * kernels (seen under OPENBLAS_CORETYPE=Prescott), so a sample's solve
 * may stop an iteration earlier or later, anywhere within its residual of
 * 1e-6; the IFT gradient carries that residual amplified by (I − J)^-1.
 * Measured, of the largest gradient: up to 4.6e-4 on cpu and 3.5e-9 on
 * cpu64 under OPENBLAS_CORETYPE=Prescott and Haswell, at most 1.5e-7
 * under SkylakeX and Sandybridge; the bound is 2e-3 (a wrong scale of a
 * micro-batch, 1/M or M, is O(1)). */
#define MICRO_DEQ_TOL 2e-3

Test(micro, gradients_cpu64)
{
	check_method("cpu64", unroll_keys, 1e-12, 1);
	check_method("cpu64", checkpoint_keys, 1e-12, 1);
	check_method("cpu64", deq_keys, MICRO_DEQ_TOL, 0);
}

Test(micro, gradients_cpu)
{
	check_method("cpu", unroll_keys, 1e-5, 1);
	check_method("cpu", checkpoint_keys, 1e-5, 1);
	check_method("cpu", deq_keys, MICRO_DEQ_TOL, 0);
}

/* The record: config.microbatches, the work of both micro-batches with
 * one optimizer step, half of unroll's depth peak. */
static json_t *run_record(int micro)
{
	char out[512], oa[600], ma[64], err[4096], f[64];
	snprintf(f, sizeof(f), "m%d.jsonl", micro);
	cli_path(out, sizeof(out), f);
	remove(out);
	snprintf(oa, sizeof(oa), "out=%s", out);
	snprintf(ma, sizeof(ma), "microbatches=%d", micro);
	const char *a[] = {"run",
			   "corpus=synthetic",
			   "d_model=16",
			   "n_heads=2",
			   "d_ff=32",
			   "seq_len=8",
			   "batch_size=4",
			   "vocab_size=64",
			   "steps=3",
			   "threads=1",
			   "eval_tokens=64",
			   "device=cpu64",
			   "method=unroll",
			   "layers=3",
			   ma,
			   oa,
			   NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	char *text = cli_read(out, NULL);
	cr_assert_not_null(text);
	json_t *rec = json_loads(text, 0, NULL);
	free(text);
	cr_assert_not_null(rec);
	cr_assert_str_eq(json_string_value(at(rec, "status")), "ok");
	check_schema(rec);
	return rec;
}

static double num(const json_t *rec, const char *path)
{
	return json_number_value(at(rec, path));
}

Test(micro, record, .init = cli_setup, .fini = cli_teardown)
{
	json_t *r1 = run_record(1), *r2 = run_record(2);
	cr_assert_eq(json_integer_value(at(r2, "config.microbatches")), 2);
	cr_assert_eq(json_integer_value(at(r1, "config.microbatches")), 1);
	cr_assert_eq(num(r2, "work.block_fwd_taped.per_step"),
		     2 * num(r1, "work.block_fwd_taped.per_step"));
	cr_assert_eq(num(r2, "work.head_fwd.per_step"), 2);
	cr_assert_eq(num(r2, "work.head_bwd.per_step"), 2);
	cr_assert_eq(num(r2, "work.optimizer_step.per_step"), 1);
	cr_assert_eq(2 * num(r2, "memory.peak_bytes.depth"),
		     num(r1, "memory.peak_bytes.depth"));
	cr_assert_eq(num(r2, "memory.predicted_depth_bytes"),
		     num(r2, "memory.peak_bytes.depth"));
	/* the same tokens trained on and evaluated: step 1's loss (before
	 * any update) and the valid and test losses after 3 steps within the
	 * summation order's float64 differences (Adam's steps carry the
	 * gradients' ~1e-16 relative differences into the parameters) */
	cr_assert_eq(num(r2, "quality.valid_eval_tokens"),
		     num(r1, "quality.valid_eval_tokens"));
	const char *same[] = {"quality.train_loss_first", "quality.valid_loss",
			      "quality.test_loss", NULL};
	for (int i = 0; same[i]; i++)
		cr_assert_leq(fabs(num(r2, same[i]) - num(r1, same[i])),
			      1e-12 * num(r1, same[i]), "%s: %.17g vs %.17g",
			      same[i], num(r2, same[i]), num(r1, same[i]));
	json_decref(r1);
	json_decref(r2);
}

Test(micro, bad_values, .init = cli_setup, .fini = cli_teardown)
{
	char err[4096];
	const char *a[] = {"run", "corpus=synthetic", "batch_size=4",
			   "microbatches=3", NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2);
	cr_assert(strstr(err, "microbatches=3") && strstr(err, "batch_size=4"),
		  "%s", err);
	cr_assert_eq(strchr(err, '\n'), strrchr(err, '\n'), "one line: %s",
		     err);
	/* cuda_graphs: checked on the keys alone (this build may lack cuda) */
	struct bench_config c;
	char e[512];
	config_defaults(&c);
	c.device = DEVICE_CUDA;
	c.cuda_graphs = 1;
	c.microbatches = 2;
	cr_assert_eq(config_validate_keys(&c, e, sizeof(e)), -1);
	cr_assert(strstr(e, "microbatches=2") && strstr(e, "cuda_graphs"), "%s",
		  e);
}

/* price of a micro-batched config: its units at batch_size/M rows, the
 * shape report_cost_match looks a micro-batched record's prices up at */
Test(micro, price_shape, .init = cli_setup, .fini = cli_teardown)
{
	char out[512], oa[600], err[4096];
	cli_path(out, sizeof(out), "p.jsonl");
	remove(out);
	snprintf(oa, sizeof(oa), "out=%s", out);
	const char *a[] = {"price",
			   "corpus=synthetic",
			   "d_model=16",
			   "n_heads=2",
			   "d_ff=32",
			   "seq_len=8",
			   "batch_size=4",
			   "microbatches=2",
			   "threads=1",
			   "price_cap_s=0.5",
			   oa,
			   NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	char *text = cli_read(out, NULL);
	cr_assert_not_null(text);
	json_t *rec = json_loads(text, JSON_DISABLE_EOF_CHECK, NULL);
	free(text);
	cr_assert_not_null(rec);
	cr_assert_eq(json_integer_value(at(rec, "shape.batch_size")), 2);
	json_decref(rec);
}
