/* pretrain.c — see pretrain.h. */
#include "pretrain.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../records/record.h"
#include "run_work.h"

int pretrain_create(struct pretrain *pt, struct run_ctx *rc,
		    const struct bench_config *cfg, char *err, size_t errlen)
{
	struct method_config mc;
	size_t before = rc->be->mem.live[MEM_DEPTH];
	char e2[512];

	memset(pt, 0, sizeof(*pt));
	if (cfg->pretrain_steps <= 0)
		return 0;
	/* the deq's resolved config as the base: only method and L matter */
	mc = *method_get_config(rc->me);
	mc.method = method_kind_parse("unroll");
	mc.layers = cfg->pretrain_layers;
	if (method_create(&pt->unroll, rc->m, &mc, e2, sizeof(e2)) != 0) {
		snprintf(err, errlen, "pretrain_layers=%d: %s",
			 cfg->pretrain_layers, e2);
		return -1;
	}
	pt->steps = cfg->pretrain_steps;
	pt->layers = cfg->pretrain_layers;
	pt->deq = rc->me;
	pt->depth_bytes = rc->be->mem.live[MEM_DEPTH] - before;
	return 0;
}

void pretrain_select(struct pretrain *pt, struct run_ctx *rc, int s)
{
	if (pt->steps)
		rc->me = s <= pt->steps ? pt->unroll : pt->deq;
}

void pretrain_end(struct pretrain *pt, struct run_ctx *rc, struct step_log *log)
{
	if (!pt->steps)
		return;
	rc->me = pt->deq;
	for (int i = 0; i < pt->steps && i < log->n; i++)
		log->fwd.residual[i] = log->bwd.residual[i] = NAN;
}

static json_t *real_or_null(int ok, double x)
{
	return ok && isfinite(x) ? json_real(x) : json_null();
}

json_t *pretrain_json(const struct pretrain *pt, const struct bench_config *cfg,
		      int ok_steps, const struct step_log *log)
{
	const double *ms = log->ms;
	json_t *o;
	int done = ok_steps < pt->steps ? ok_steps : pt->steps;
	int w = cfg->warmup_steps, nt = done - w > 0 ? done - w : 0;
	double sum_ms = 0, fe = 0, ve = 0;
	double tokens = (double)cfg->model.batch_size * cfg->model.seq_len;

	if (!pt->steps)
		return json_null();
	for (int q = 0; q < done; q++) {
		fe += log->f_ev[q];
		ve += log->v_ev[q];
		sum_ms += q >= w ? ms[q] : 0;
	}
	o = json_object();
	json_object_set_new(o, "steps", json_integer(pt->steps));
	json_object_set_new(o, "layers", json_integer(pt->layers));
	json_object_set_new(o, "steps_done", json_integer(done));
	json_object_set_new(o, "steps_timed", json_integer(nt));
	json_object_set_new(o, "step_ms", record_stats_json(ms + w, nt));
	json_object_set_new(o, "forward_ms",
			    record_stats_json(log->fwd_ms + w, nt));
	json_object_set_new(o, "backward_ms",
			    record_stats_json(log->bwd_ms + w, nt));
	json_object_set_new(
	    o, "tokens_per_s",
	    real_or_null(nt && sum_ms > 0, tokens * nt / (sum_ms / 1000)));
	json_object_set_new(o, "forward_evals_per_step",
			    real_or_null(done, fe / (done ? done : 1)));
	json_object_set_new(o, "vjp_evals_per_step",
			    real_or_null(done, ve / (done ? done : 1)));
	json_object_set_new(o, "train_loss_last",
			    real_or_null(done, done ? log->loss[done - 1] : 0));
	json_object_set_new(o, "depth_bytes",
			    json_integer((json_int_t)pt->depth_bytes));
	json_object_set_new(o, "work", run_work_json(log, 0, done, 0));
	return o;
}

void pretrain_free(struct pretrain *pt, struct run_ctx *rc)
{
	if (pt->deq)
		rc->me = pt->deq;
	method_destroy(pt->unroll);
	memset(pt, 0, sizeof(*pt));
}
