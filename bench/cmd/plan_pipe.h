/* plan_pipe.h — `deqbench plan stages=P`'s pipeline model: the
 * unrolled weight-tied net of L layers cut into P stages of ⌈L/P⌉ layers
 * (one device each), its batch into M micro-batches (microbatches=M), run
 * under GPipe (Huang et al., NeurIPS 2019: every micro-batch's forward,
 * then every backward) and 1F1B (PipeDream-Flush; Narayanan et al., SC
 * 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
 * Using Megatron-LM", §2.2: a stage's backward follows as soon as it can).
 * A model from single-device prices (docs/methods.md §Pipelines), not a
 * measurement: no multi-device run is made.
 *
 * Time: both schedules take (M + P − 1) slots of the slowest stage's
 * micro-batch (its layers' forward and VJP, the head on the last stage,
 * step_fixed on the first) plus the micro-batch's activation sent
 * forward and its gradient sent back over the link; the bubble fraction
 * is (P − 1) / (M + P − 1). Then the shared block's gradients are summed
 * across the P stages (a ring all-reduce: 2 (P − 1) / P of its bytes over
 * the link) before one optimizer step.
 * Memory per stage: the weight-tied block's parameters, gradients and
 * Adam moments on every stage (a stage runs every layer's weights: a
 * pipeline divides no parameter memory of a tied block), the embeddings
 * on the first and the head on the last; tapes of ⌈L/P⌉ layers for M
 * micro-batches in flight under GPipe, for min(M, P − s) on stage s under
 * 1F1B (stage 0 the most). Header-only (static inline), tested on fixed
 * numbers in tests/test_plan_pipe.c. Times in ms, sizes in bytes. */
#ifndef DQ_BENCH_PLAN_PIPE_H
#define DQ_BENCH_PLAN_PIPE_H

/* What the model reads: the net, the prices of one micro-batch (B/M
 * rows), the sizes and the link. */
struct pipe_in {
	int L, P, M;
	double fwd_ms, vjp_ms; /* a layer's taped forward and full VJP */
	double head_ms;	       /* the head's forward and backward */
	double fixed_ms;       /* step_fixed: batch, embeddings, zeroing */
	double opt_ms;	       /* one optimizer step over every parameter */
	double act_bytes;      /* a micro-batch's state (B/M)·T·d elements */
	double tape_bytes;     /* a layer's tape of one micro-batch */
	double block_bytes;    /* the tied block's parameters */
	double first_bytes;    /* parameters on the first stage only */
	double last_bytes;     /* parameters on the last stage only */
	double link_bytes_ms;  /* link bandwidth, bytes per ms */
};

/* One schedule's figures: the step, the bubble, and the most any stage
 * holds of each category. */
struct pipe_out {
	double step_ms, bubble, allreduce_ms;
	double params, grads, adam, depth; /* bytes, the worst stage's */
};

/* Layers of the deepest stage. */
static inline int pipe_stage_layers(int L, int P)
{
	return (L + P - 1) / P;
}

/* The slowest stage's time for one micro-batch, with its sends. */
static inline double pipe_slot_ms(const struct pipe_in *in)
{
	double ls = pipe_stage_layers(in->L, in->P);
	double body = ls * (in->fwd_ms + in->vjp_ms);
	double first = body + in->fixed_ms, last = body + in->head_ms;
	double slot = first > last ? first : last;
	return slot + 2 * in->act_bytes / in->link_bytes_ms;
}

/* GPipe (one1f1b 0) or 1F1B (1) under in. */
static inline void pipe_model(const struct pipe_in *in, int one1f1b,
			      struct pipe_out *out)
{
	double ls = pipe_stage_layers(in->L, in->P);
	double ends =
	    in->first_bytes > in->last_bytes ? in->first_bytes : in->last_bytes;
	int inflight = one1f1b ? (in->M < in->P ? in->M : in->P) : in->M;
	out->allreduce_ms =
	    2.0 * (in->P - 1) / in->P * in->block_bytes / in->link_bytes_ms;
	out->step_ms = (in->M + in->P - 1) * pipe_slot_ms(in) +
		       out->allreduce_ms + in->opt_ms;
	out->bubble = (double)(in->P - 1) / (in->M + in->P - 1);
	out->params = in->block_bytes + ends;
	out->grads = out->params;
	out->adam = 2 * out->params;
	out->depth = inflight * ls * in->tape_bytes;
}

/* The same step on one device: M micro-batches through all L layers. */
static inline double pipe_one_device_ms(const struct pipe_in *in)
{
	return in->M * (in->L * (in->fwd_ms + in->vjp_ms) + in->head_ms +
			in->fixed_ms) +
	       in->opt_ms;
}

#endif
