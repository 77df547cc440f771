/* step_graphs.h — with cuda_graphs, the training step's head and its
 * optimizer as recorded graphs (docs/ARCHITECTURE.md §Graphs): the head's
 * forward and backward (logits, cross-entropy, dlogits, head grads, gz)
 * in one, and the injection's backward, global-norm clipping and Adam in
 * another. Recorded at the first step, replayed after; the method's own
 * passes are recorded by methods/method.c. Nothing recorded reads the
 * host: the loss and the gradient's sum of squares stay on the device
 * (be_xent_train_dev, be_sumsq_dev), clipping reads the latter there
 * (be_clip_dev), Adam reads lr and its bias corrections from device
 * doubles the host writes before each launch (be_adam_dev), and one
 * download after the optimizer brings the loss and the norm back: one
 * host read a step instead of two (the loss after the head, the norm
 * before clipping). Every op is its eager twin's bits (kernels/backend.h),
 * so a step with these graphs is bitwise the eager step.
 *
 * The loss is known only after the update: a diverged loss stops the run
 * one update later than the eager step would, which changes nothing in
 * its record (the step's loss is recorded, the run is diverged).
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
	double *scal; /* loss, Σ g², lr, 1 − β1^t, 1 − β2^t (MEM_WORKSPACE) */
	void *head, *opt;
	const void *head_z;	   /* the z the head graph reads */
	const void *opt_m, *opt_v; /* the Adam moments the opt graph updates */
};

/* Whether a run on m with cuda_graphs = graphs records its head and
 * optimizer: graphs on a backend with graphs and an unchunked head (a
 * chunked head reads one loss per chunk on the host). */
int step_graphs_wanted(const struct model *m, int graphs);
/* Allocates sg->scal on m's backend. 0, or -1 (out of memory). */
int step_graphs_init(struct step_graphs *sg, struct model *m);
/* Frees the graphs and the scalars; sg is zero again. */
void step_graphs_free(struct step_graphs *sg, struct model *m);
/* After the method's training forward left z: the head's forward and
 * backward (model_head_forward_train_dev, model_head_backward), recorded
 * the first time and whenever z differs, replayed otherwise. The loss
 * stays on the device until step_graphs_opt. */
void step_graphs_head(struct step_graphs *sg, struct model *m, const void *z);
/* After the method's backward: the injection's backward, clipping and
 * Adam on the moments adam_m, adam_v (n_param_elems each), recorded the
 * first time and whenever the moments differ (o's clip and Adam constants
 * go into the recording: a run keeps them; its lr and t are written for
 * each launch); then one download: *loss
 * (nats, the head's) and *gn (the gradient's l2 norm before clipping).
 * Synchronises. */
void step_graphs_opt(struct step_graphs *sg, struct model *m, void *adam_m,
		     void *adam_v, const struct step_opt *o, double *loss,
		     double *gn);

#endif
