/* plan_pipe.c — `deqbench plan stages=P`: the pipeline model of
 * plan_pipe.h filled from plan's prices (one micro-batch's shape, as
 * plan measured or read them) and the model's sizes, printed after the
 * table. A model, not a measurement (docs/methods.md §Pipelines). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../kernels/backend.h"
#include "../../models/model.h"
#include "plan.h"
#include "plan_pipe.h"

/* The price of unit u in p's prices (ms per call), NAN without one. */
static double unit_ms(const struct plan *p, const char *u)
{
	const json_t *v = json_object_get(json_object_get(p->m, "units"), u);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* Bytes of m's parameters by stage: the tied block's, the first stage's
 * (embeddings, injection) and the last's (the head). */
static void param_bytes(const struct model *m, size_t elem, struct pipe_in *in)
{
	in->block_bytes = in->first_bytes = in->last_bytes = 0;
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *q = &m->params[i];
		double b = (double)q->numel * (double)elem;
		if (!strncmp(q->name, "head.", 5))
			in->last_bytes += b;
		else if (!strncmp(q->name, "embed.", 6) ||
			 !strncmp(q->name, "pos_embed.", 10) ||
			 !strncmp(q->name, "inject.", 7))
			in->first_bytes += b;
		else
			in->block_bytes += b;
	}
}

/* The model's inputs from p (a micro-batch: batch_size / microbatches
 * rows). 0, or -1 with err. */
static int pipe_inputs(const struct plan *p, int stages, double link_gbps,
		       struct pipe_in *in, char *err, size_t errlen)
{
	struct backend stub; /* model_shape reads only elem */
	struct model_config mc = p->base.model;
	struct model m;
	size_t elem = p->base.device == DEVICE_CPU64 ? 8 : 4;
	double ht = unit_ms(p, "head_train");
	memset(&stub, 0, sizeof(stub));
	stub.elem = elem;
	mc.vocab_size = p->V;
	mc.batch_size /= p->base.microbatches;
	if (model_shape(&m, &stub, &mc, err, errlen) != 0)
		return -1;
	*in = (struct pipe_in){.L = p->base.method.layers,
			       .P = stages,
			       .M = p->base.microbatches,
			       .fwd_ms = unit_ms(p, "block_fwd_taped"),
			       .vjp_ms = unit_ms(p, "block_vjp"),
			       .head_ms = isfinite(ht)
					      ? ht
					      : unit_ms(p, "head_fwd") +
						    unit_ms(p, "head_bwd"),
			       .fixed_ms = unit_ms(p, "step_fixed"),
			       .opt_ms = unit_ms(p, "optimizer_step"),
			       .act_bytes = (double)m.n_state * (double)elem,
			       .tape_bytes = (double)model_tape_bytes(&m),
			       .link_bytes_ms = link_gbps * 1e6};
	param_bytes(&m, elem, in);
	if (!isfinite(in->fwd_ms + in->vjp_ms + in->head_ms + in->fixed_ms +
		      in->opt_ms)) {
		snprintf(err, errlen,
			 "stages=%d: the prices lack a unit the pipeline "
			 "model needs (block_fwd_taped, block_vjp, the head, "
			 "step_fixed, optimizer_step); price this shape "
			 "again with deqbench price",
			 stages);
		return -1;
	}
	return 0;
}

static double mib(double b)
{
	return b / 1048576.0;
}

int plan_pipe_print(const struct plan *p, int stages, double link_gbps,
		    char *err, size_t errlen)
{
	struct pipe_in in;
	struct pipe_out o[2];
	static const char *const name[2] = {"GPipe", "1F1B"};
	double one;
	if (pipe_inputs(p, stages, link_gbps, &in, err, errlen) != 0)
		return -1;
	one = pipe_one_device_ms(&in);
	printf("\npipeline model (not a measurement; docs/methods.md "
	       "§Pipelines): the unrolled net on stages=%d devices of %d "
	       "layers, microbatches=%d, link %g GB/s, one device's prices\n",
	       stages, pipe_stage_layers(in.L, stages), in.M, link_gbps);
	printf("%-9s %7s %9s %9s %12s %9s %9s %9s %9s\n", "schedule", "bubble",
	       "ms/step", "x 1 dev", "allreduce ms", "param MiB", "grad MiB",
	       "Adam MiB", "tape MiB");
	for (int s = 0; s < 2; s++) {
		pipe_model(&in, s, &o[s]);
		printf("%-9s %6.1f%% %9.4g %9.3f %12.4g %9.2f %9.2f %9.2f "
		       "%9.2f\n",
		       name[s], 100 * o[s].bubble, o[s].step_ms,
		       o[s].step_ms / one, o[s].allreduce_ms, mib(o[s].params),
		       mib(o[s].grads), mib(o[s].adam), mib(o[s].depth));
	}
	printf("%-9s %7s %9.4g %9.3f %12s %9.2f %9.2f %9.2f %9.2f\n",
	       "1 device", "-", one, 1.0, "-",
	       mib(in.block_bytes + in.first_bytes + in.last_bytes),
	       mib(in.block_bytes + in.first_bytes + in.last_bytes),
	       mib(2 * (in.block_bytes + in.first_bytes + in.last_bytes)),
	       mib(in.M > 0 ? in.L * in.tape_bytes : 0));
	printf("memory: the worst stage's; a weight-tied block's parameters, "
	       "gradients and Adam moments sit on every stage (pipelining "
	       "divides only the tapes), and a DEQ's solver iterations cannot "
	       "be pipelined: each needs the last one's whole state\n");
	return 0;
}
