/* step_graphs.c — see step_graphs.h: the head and the optimizer of a
 * training step recorded once and replayed (cuda_graphs). */
#include "step_graphs.h"

#include <math.h>
#include <string.h>

enum { S_LOSS, S_SUMSQ, S_HYPER, S_N = S_HYPER + 3 };

int step_graphs_wanted(const struct model *m, int graphs)
{
	return graphs && be_has_graphs(m->be) &&
	       model_head_rows(m) == (size_t)m->B * m->T;
}

int step_graphs_init(struct step_graphs *sg, struct model *m)
{
	memset(sg, 0, sizeof(*sg));
	sg->scal =
	    backend_alloc_bytes(m->be, S_N * sizeof(double), MEM_WORKSPACE);
	return sg->scal ? 0 : -1;
}

void step_graphs_free(struct step_graphs *sg, struct model *m)
{
	be_graph_free(m->be, sg->head);
	be_graph_free(m->be, sg->opt);
	backend_free(m->be, sg->scal);
	memset(sg, 0, sizeof(*sg));
}

void step_graphs_head(struct step_graphs *sg, struct model *m, const void *z)
{
	const struct backend *be = m->be;
	if (!sg->head || sg->head_z != z) {
		be_graph_free(be, sg->head);
		be_graph_begin(be);
		model_head_forward_train_dev(m, z, sg->scal + S_LOSS);
		model_head_backward(m);
		sg->head = be_graph_end(be);
		sg->head_z = z;
	}
	be_graph_launch(be, sg->head);
}

/* The recorded part of step_graphs_opt. */
static void record_opt(struct step_graphs *sg, struct model *m, void *adam_m,
		       void *adam_v, const struct step_opt *o)
{
	const struct backend *be = m->be;
	size_t n = m->n_param_elems;
	be_graph_free(be, sg->opt);
	be_graph_begin(be);
	model_inject_backward(m);
	be_sumsq_dev(be, sg->scal + S_SUMSQ, m->grad_buf, n);
	be_clip_dev(be, m->grad_buf, n, sg->scal + S_SUMSQ, o->clip);
	be_adam_dev(be, m->param_buf, m->grad_buf, adam_m, adam_v, n,
		    sg->scal + S_HYPER, o->beta1, o->beta2, o->eps, o->wd);
	sg->opt = be_graph_end(be);
	sg->opt_m = adam_m, sg->opt_v = adam_v;
}

void step_graphs_opt(struct step_graphs *sg, struct model *m, void *adam_m,
		     void *adam_v, const struct step_opt *o, double *loss,
		     double *gn)
{
	const struct backend *be = m->be;
	/* the values the eager adam op computes on the host at step t */
	double hyper[3] = {o->lr, 1.0 - pow(o->beta1, o->t),
			   1.0 - pow(o->beta2, o->t)};
	double back[2];
	be_upload_bytes(be, sg->scal + S_HYPER, hyper, sizeof(hyper));
	if (!sg->opt || sg->opt_m != adam_m || sg->opt_v != adam_v)
		record_opt(sg, m, adam_m, adam_v, o);
	be_graph_launch(be, sg->opt);
	be_download_bytes(be, back, sg->scal + S_LOSS, sizeof(back));
	*loss = back[0];
	*gn = sqrt(back[1]);
}
