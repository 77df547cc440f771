/* step_graphs.h — the training step's scalars on the device, and with
 * cuda_graphs its head and optimizer as recorded graphs
 * (docs/ARCHITECTURE.md §Graphs). One path for both: the head's forward
 * and backward (logits, cross-entropy, dlogits, head grads, gz) leave the
 * loss in a device double (be_xent_train); the optimizer (the
 * injection's backward, the gradient's sum of squares (be_sumsq),
 * global-norm clipping from it (be_clip), Adam reading lr and its bias
 * corrections from device doubles the host writes before each step
 * (be_adam)) reads nothing back; then one download brings the loss and
 * the norm to the host: one host read a step. With graphs, the head and
 * the optimizer are recorded at the first step and replayed after (the
 * method's own passes are recorded by methods/method.c); without, the
 * same ops run as they are issued, so a step with graphs is bitwise the
 * step without.
 *
 * The loss is known only after the update: a diverged loss stops the run
 * after that step's update, which changes nothing in its record (the
 * step's loss is recorded, the run is diverged).
 *
 * A step of several micro-batches, or with a chunked head (one loss per
 * chunk read on the host), computes its loss on the host
 * (step_pass.h) and then runs the same optimizer (step_graphs_opt with
 * inject 0).
 */
#ifndef DQ_BENCH_STEP_GRAPHS_H
#define DQ_BENCH_STEP_GRAPHS_H

#include "../../models/model.h"

/* The optimizer of one step: Adam (Kingma & Ba 2015) at lr, 1-based step
 * t, after clipping the global gradient norm to clip (when > 0). */
struct step_opt {
	double lr, clip, beta1, beta2, eps, wd;
	int t;
};

/* Step scalars (device doubles) and the two graphs. Zero it to start. */
struct step_graphs {
	/* loss, Σ g², lr, 1 − β1^t, 1 − β2^t: MEM_WORKSPACE when recording,
	 * else the caller's part of the backend's own scalars (be->scal +
	 * BACKEND_WRAP_SCALARS, untracked) */
	double *scal;
	int record;   /* head and optimizer recorded as graphs */
	int one_pass; /* one micro-batch, an unchunked head: the head's
			  loss stays on the device (step_graphs_head) */
	void *head, *opt;
	const void *head_z;	   /* the z the head graph reads */
	const void *opt_m, *opt_v; /* the Adam moments the opt graph updates */
};

/* Whether a run on m with cuda_graphs = graphs records its head and
 * optimizer: graphs on a backend with graphs and an unchunked head (a
 * chunked head reads one loss per chunk on the host). */
int step_graphs_wanted(const struct model *m, int graphs);
/* Sets sg up for a run on m with cuda_graphs = graphs and micro
 * micro-batches a step: the scalars allocated on m's backend when it
 * records. 0, or -1 (out of memory). */
int step_graphs_init(struct step_graphs *sg, struct model *m, int graphs,
		     int micro);
/* Frees the graphs and the scalars; sg is zero again. */
void step_graphs_free(struct step_graphs *sg, struct model *m);
/* sg->one_pass, after the method's training forward left z: the head's
 * forward and backward (model_head_forward_train_dev, model_head_backward),
 * with graphs recorded the first time and whenever z differs, replayed
 * otherwise. The loss stays on the device until step_graphs_opt. */
void step_graphs_head(struct step_graphs *sg, struct model *m, const void *z);
/* After the method's backward: the injection's backward when inject (a
 * one-pass step; the host-loss path did it), clipping and Adam on the
 * moments adam_m, adam_v (n_param_elems each), recorded the first time and
 * whenever the moments differ when sg records (o's clip and Adam
 * constants go into the recording: a run keeps them; its lr and t are
 * written for each step); then one download: *loss (nats, the head's;
 * when loss is not NULL) and *gn (the gradient's l2 norm before
 * clipping). Synchronises. */
void step_graphs_opt(struct step_graphs *sg, struct model *m, void *adam_m,
		     void *adam_v, const struct step_opt *o, int inject,
		     double *loss, double *gn);

#endif
