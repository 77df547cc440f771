/* runner.c — see runner.h: runner_run (setup → timed loop → records of the
 * loop → evaluation → quality → teardown) and runner_eval. Everything a
 * step touches is allocated in the setup here, before the timed loop
 * (train_step.c), which allocates nothing. The corpus and the run context
 * are in run_ctx.c, evaluation in evaluate.c, the record in run_record.c,
 * the per-step log in step_log.c, parameter and gradient files in
 * param_files.c. */
#include "runner.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../methods/method.h"
#include "../../models/model.h"
#include "../data/data.h"
#include "evaluate.h"
#include "param_files.h"
#include "pretrain.h"
#include "../records/record.h"
#include "run_record.h"
#include "run_state.h"
#include "train_step.h"

/* ---- setup: everything allocated before the timed loop ---- */

/* Corpus, the train split's batcher, the context (backend, model, method,
 * z) and the parameters of cfg->params when given. 0, or -1 with
 * r->err. */
static int setup_context(struct run *r)
{
	const struct bench_config *cfg = r->cfg;
	struct corpus *c = &r->corpus;

	/* eval: run_ctx_create checks the inference-only memory */
	if (!r->eval_only && run_ctx_precheck(cfg, r->err, sizeof(r->err)) != 0)
		return -1;
	if (run_ctx_load_corpus(c, cfg, &r->V, r->err, sizeof(r->err)) != 0)
		return -1;
	r->have_corpus = 1;
	if (batcher_init(&r->train, c->ids[CORPUS_TRAIN], c->n[CORPUS_TRAIN],
			 r->B, r->T) != 0) {
		snprintf(r->err, sizeof(r->err),
			 "corpus=%s: the train split has %zu tokens, too few "
			 "for batch_size=%d streams of seq_len+1=%d tokens; "
			 "lower batch_size or seq_len",
			 corpus_kind_name(cfg->corpus), c->n[CORPUS_TRAIN],
			 r->B, r->T + 1);
		return -1;
	}
	if (run_ctx_create_for_run(&r->rc, cfg, r->V, !r->eval_only, r->err,
				   sizeof(r->err)) != 0)
		return -1;
	run_record_device(r);
	r->rc.corpus = c;
	r->rc.vocab_check = r->eval_only;
	if (cfg->params[0] &&
	    params_load(&r->rc, cfg->params, r->err, sizeof(r->err)) != 0)
		return -1;
	return 0;
}

/* Adam state, the host batch, the memory prediction, the pretraining
 * method; then the allocator's figures after setup and fresh peaks for
 * the loop. 0, or -1 with r->err. */
static int setup_training(struct run *r)
{
	struct backend *be = r->rc.be;
	size_t n = r->rc.m->n_param_elems;
	char e2[256];

	r->adam_m = backend_alloc(be, n, MEM_OPTIMIZER);
	r->adam_v = backend_alloc(be, n, MEM_OPTIMIZER);
	r->tok = malloc((size_t)r->B * (r->T + 1) * sizeof(*r->tok));
	if (!r->adam_m || !r->adam_v || !r->tok) {
		snprintf(r->err, sizeof(r->err),
			 "out of memory for the optimizer state (%zu "
			 "parameters); lower d_model, d_ff or vocab_size",
			 n);
		return -1;
	}
	if (r->cfg->eval_every > 0) {
		int np = r->cfg->steps / r->cfg->eval_every;
		r->curve = calloc(np > 0 ? (size_t)np : 1, sizeof(*r->curve));
		if (!r->curve) {
			snprintf(r->err, sizeof(r->err),
				 "out of host memory for the valid curve "
				 "(eval_every=%d); raise eval_every",
				 r->cfg->eval_every);
			return -1;
		}
	}
	be_fill(be, r->adam_m, 0, n);
	be_fill(be, r->adam_v, 0, n);
	if (step_graphs_init(&r->sg, r->rc.m, r->cfg->cuda_graphs,
			     r->rc.micro) != 0) {
		snprintf(r->err, sizeof(r->err),
			 "out of device memory for the step's scalars");
		return -1;
	}
	r->have_pred =
	    method_memory(r->rc.m, method_get_config(r->rc.me), &r->pred_depth,
			  &r->pred_solver, e2, sizeof(e2)) == 0;
	if (r->have_pred) {
		const struct method_config *mc = method_get_config(r->rc.me);
		r->pred_host = method_host_memory(r->rc.m, mc);
		r->pred_managed = method_managed_memory(r->rc.m, mc);
	}
	run_record_setup(r);
	if (pretrain_create(&r->pt, &r->rc, r->cfg, r->err, sizeof(r->err)))
		return -1;
	be_sync(be);
	r->setup_mem = be->mem;
	backend_mem_reset_peak(be);
	r->pool.on = be_has_pool(be);
	return 0;
}

/* deqbench eval's setup: the host batch and the record's method, model
 * and data; fresh allocator peaks. 0, or -1 with r->err. */
static int setup_eval(struct run *r)
{
	r->tok = malloc((size_t)r->B * (r->T + 1) * sizeof(*r->tok));
	if (!r->tok) {
		snprintf(r->err, sizeof(r->err), "out of host memory");
		return -1;
	}
	run_record_setup(r);
	return 0;
}

static void run_teardown(struct run *r)
{
	free(r->tok);
	free(r->curve);
	if (r->rc.be) {
		backend_free(r->rc.be, r->adam_m);
		backend_free(r->rc.be, r->adam_v);
		step_graphs_free(&r->sg, r->rc.m);
	}
	pretrain_free(&r->pt, &r->rc);
	run_ctx_destroy(&r->rc);
	if (r->have_corpus)
		corpus_free(&r->corpus);
	step_log_free(&r->log);
	step_log_free(&r->inf);
}

/* save_params= of an ok run: the trained parameters
 * (params_save_or_rescue); a failed save makes the run an error whose
 * message gives the reason and where the parameters went instead. */
static void save_params(struct run *r)
{
	if (r->status != RUN_OK || !r->cfg->save_params[0])
		return;
	if (params_save_or_rescue(&r->rc, r->cfg, r->cfg->save_params, r->err,
				  sizeof(r->err)) != 0)
		r->status = RUN_ERROR;
}

enum run_status runner_run(const struct bench_config *cfg,
			   const struct run_meta *meta, json_t **record)
{
	double t0 = run_wall_s();
	struct run r;
	struct eval_result q;
	int log_ok;

	memset(&r, 0, sizeof(r));
	r.cfg = cfg;
	r.meta = meta;
	r.rec = record_new();
	r.status = RUN_SETUP_FAILED;
	r.B = cfg->model.batch_size;
	r.T = cfg->model.seq_len;
	log_ok = step_log_alloc(&r.log, cfg->steps) == 0;
	run_record_begin(&r);
	if (!log_ok)
		snprintf(r.err, sizeof(r.err), "out of host memory");
	else if (setup_context(&r) == 0 && setup_training(&r) == 0) {
		r.t_setup = run_wall_s() - t0;
		run_ctx_warn_blas(cfg->device);
		train_loop(&r);
		run_record_train(&r);
		run_evaluate(&r, &q);
		run_record_quality(&r, &q);
		run_record_inference(&r);
		save_params(&r);
	}
	run_record_end(&r);
	run_teardown(&r);
	*record = r.rec;
	return r.status;
}

enum run_status runner_eval(const struct bench_config *cfg_in,
			    const struct run_meta *meta, json_t **record)
{
	struct bench_config cfg = *cfg_in;
	struct run r;
	struct eval_result q;

	cfg.method.inference = 1;
	memset(&r, 0, sizeof(r));
	r.cfg = &cfg;
	r.meta = meta;
	r.eval_only = 1;
	r.rec = record_new();
	r.status = RUN_SETUP_FAILED;
	r.B = cfg.model.batch_size;
	r.T = cfg.model.seq_len;
	json_object_set_new(r.rec, "kind", json_string("eval"));
	run_record_begin(&r);
	if (!cfg.params[0])
		snprintf(r.err, sizeof(r.err),
			 "params= is required: the safetensors file of the "
			 "parameters to evaluate (save_params= of a run)");
	else if (setup_context(&r) == 0 && setup_eval(&r) == 0) {
		r.status = RUN_OK;
		run_ctx_warn_blas(cfg.device);
		run_evaluate(&r, &q);
		run_record_quality(&r, &q);
		run_record_inference(&r);
	}
	run_record_end(&r);
	run_teardown(&r);
	*record = r.rec;
	return r.status;
}
