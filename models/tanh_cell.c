/* tanh_cell.c — the small contraction f(z; u) = tanh(z Wᵀ + u), W =
 * cell.weight [d,d], U = d (docs/ARCHITECTURE.md §Model). A contraction when
 * ‖W‖₂ < 1 (tanh is 1-Lipschitz); the init gives ‖W‖₂ ≈ 0.5.
 *
 * Tape: z (N,d) for dW, y = f (N,d) for tanh' = 1 - y²; size 2 N d.
 * Workspace: g = dpre (N,d) in the vjp; size N d.
 */
#include <math.h>

#include "model_impl.h"

enum { CP_CELL_W = P_BLOCK0 }; /* cell.weight [d,d] */

/* cell.weight N(0, (0.25/√d)²) under every preset (R_FIXED): its spectral
 * norm is about 0.25 * 2 = 0.5 for a square Gaussian matrix
 * (Marchenko-Pastur edge 2 σ √d), so the cell is a contraction whatever
 * the injection. */
static int tc_block_specs(const struct model_config *c, struct param_spec *s)
{
	int64_t d = c->d_model;
	s[0] = SPEC("cell.weight", d, d, 0, R_FIXED, d);
	s[0].init = INIT_NORMAL;
	s[0].a = 0.25 / sqrt((double)c->d_model);
	return 1;
}

static struct model_extent tc_extent(const struct model_config *c)
{
	return (struct model_extent){c->d_model, 0};
}

static size_t tc_tape_elems(const struct model *m)
{
	return 2 * m->n_state;
}

static size_t tc_workspace_elems(const struct model *m)
{
	return m->n_state;
}

/* Needs no workspace: the pre-activation is formed in z_out. */
static void tc_forward(struct model *m, void *z_out, const void *z_in,
		       const void *u, void *tape)
{
	struct backend *be = m->be;
	int N = m->B * m->T, d = m->d;
	be_copy(be, z_out, u, m->n_state);
	model_gemm(m, 0, 1, N, d, d, 1.0, z_in, d,
		   model_p(m, m->param_buf, CP_CELL_W), d, 1.0, z_out, d);
	be_act_forward(be, ACT_TANH, z_out, z_out, m->n_state);
	if (tape) {
		be_copy(be, tape, z_in, m->n_state);
		be_copy(be, dq_at(m->be, tape, m->n_state), z_out, m->n_state);
	}
}

static void tc_vjp(struct model *m, void *gz_in, void *gu, const void *gz_out,
		   const void *tape, int pg)
{
	struct backend *be = m->be;
	void *g = model_ws(m);
	int N = m->B * m->T, d = m->d;
	const void *z = tape, *y = dq_at(m->be, tape, m->n_state);
	/* g = gz_out (1 - y²); gz_in = g W; dW += gᵀ z; gu += g */
	be_act_backward(be, ACT_TANH, g, gz_out, NULL, y, m->n_state);
	model_gemm(m, 0, 0, N, d, d, 1.0, g, d,
		   model_p(m, m->param_buf, CP_CELL_W), d, 0.0, gz_in, d);
	if (pg)
		model_gemm(m, 1, 0, d, d, N, 1.0, g, d, z, d, 1.0,
			   model_p(m, m->grad_buf, CP_CELL_W), d);
	if (gu)
		be_axpy(be, gu, 1.0, g, m->n_state);
}

/* 2 N d² (the one GEMM; tanh not counted). */
static double tc_flops(const struct model *m)
{
	return 2.0 * (double)m->B * m->T * (double)m->d * m->d;
}

const struct model_def model_tanh_cell = {
    .name = "tanh_cell",
    .d_mult = 1,
    .u_mult = 1,
    .state_parts = 1,
    .extent = tc_extent,
    .block_specs = tc_block_specs,
    .tape_elems = tc_tape_elems,
    .workspace_elems = tc_workspace_elems,
    .forward = tc_forward,
    .vjp = tc_vjp,
    .flops = tc_flops,
};
