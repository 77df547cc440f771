/* step_graphs.c — see step_graphs.h: the head and the optimizer of a
 * training step, their scalars on the device, recorded once and replayed
 * with cuda_graphs. */
#include "step_graphs.h"

#include <math.h>
#include <string.h>

enum { S_LOSS, S_SUMSQ, S_HYPER, S_N = S_HYPER + 3 };

_Static_assert(S_N <= BACKEND_SCALARS - BACKEND_WRAP_SCALARS,
	       "the step's scalars fit the caller's part of be->scal");

int step_graphs_wanted(const struct model *m, int graphs)
{
	return graphs && be_has_graphs(m->be) &&
	       model_head_rows(m) == (size_t)m->B * m->T;
}

int step_graphs_init(struct step_graphs *sg, struct model *m, int graphs,
		     int micro)
{
	memset(sg, 0, sizeof(*sg));
	sg->one_pass = micro <= 1 && model_head_rows(m) == (size_t)m->B * m->T;
	sg->record = sg->one_pass && step_graphs_wanted(m, graphs);
	if (!sg->record) {
		sg->scal = m->be->scal + BACKEND_WRAP_SCALARS;
		return 0;
	}
	sg->scal =
	    backend_alloc_bytes(m->be, S_N * sizeof(double), MEM_WORKSPACE);
	return sg->scal ? 0 : -1;
}

void step_graphs_free(struct step_graphs *sg, struct model *m)
{
	if (sg->record) {
		be_graph_free(m->be, sg->head);
		be_graph_free(m->be, sg->opt);
		backend_free(m->be, sg->scal);
	}
	memset(sg, 0, sizeof(*sg));
}

/* The head's forward and backward, the loss to the device. */
static void head_ops(struct step_graphs *sg, struct model *m, const void *z)
{
	model_head_forward_train_dev(m, z, sg->scal + S_LOSS);
	model_head_backward(m);
}

void step_graphs_head(struct step_graphs *sg, struct model *m, const void *z)
{
	const struct backend *be = m->be;
	if (!sg->record) {
		head_ops(sg, m, z);
		return;
	}
	if (!sg->head || sg->head_z != z) {
		be_graph_free(be, sg->head);
		be_graph_begin(be);
		head_ops(sg, m, z);
		sg->head = be_graph_end(be);
		sg->head_z = z;
	}
	be_graph_launch(be, sg->head);
}

/* The optimizer's ops: [the injection's backward,] Σ g², clipping, Adam. */
static void opt_ops(struct step_graphs *sg, struct model *m, void *adam_m,
		    void *adam_v, const struct step_opt *o, int inject)
{
	const struct backend *be = m->be;
	size_t n = m->n_param_elems;
	if (inject)
		model_inject_backward(m);
	be_sumsq(be, sg->scal + S_SUMSQ, m->grad_buf, n);
	be_clip(be, m->grad_buf, n, sg->scal + S_SUMSQ, o->clip);
	be_adam(be, m->param_buf, m->grad_buf, adam_m, adam_v, n,
		sg->scal + S_HYPER, o->beta1, o->beta2, o->eps, o->wd);
}

void step_graphs_opt(struct step_graphs *sg, struct model *m, void *adam_m,
		     void *adam_v, const struct step_opt *o, int inject,
		     double *loss, double *gn)
{
	const struct backend *be = m->be;
	double hyper[3], back[2];
	dq_adam_hyper(hyper, o->lr, o->beta1, o->beta2, o->t);
	be_upload_bytes(be, sg->scal + S_HYPER, hyper, sizeof(hyper));
	if (!sg->record) {
		opt_ops(sg, m, adam_m, adam_v, o, inject);
	} else {
		if (!sg->opt || sg->opt_m != adam_m || sg->opt_v != adam_v) {
			be_graph_free(be, sg->opt);
			be_graph_begin(be);
			opt_ops(sg, m, adam_m, adam_v, o, inject);
			sg->opt = be_graph_end(be);
			sg->opt_m = adam_m, sg->opt_v = adam_v;
		}
		be_graph_launch(be, sg->opt);
	}
	be_download_bytes(be, back, sg->scal + S_LOSS, sizeof(back));
	if (loss)
		*loss = back[0];
	*gn = sqrt(back[1]);
}
