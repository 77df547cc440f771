/* model_impl.h — private to models/: the per-kind operations table behind
 * struct model, the host-side state m->priv points to, and the parameter
 * indices shared by model.c and the per-kind files.
 *
 * Parameter table order (docs/ARCHITECTURE.md §Model): the four injection
 * parameters first, the kind's block parameters next, the head last. */
#ifndef DQ_MODEL_IMPL_H
#define DQ_MODEL_IMPL_H

#include "model.h"

/* Common parameters at fixed indices; the head is at n_params-2, -1. */
enum {
	P_EMBED_W, /* embed.weight [V,E] */
	P_POS_W,   /* pos_embed.weight [T,E] */
	P_INJ_W,   /* inject.weight [U,E] ([U,E,2] for trellisnet) */
	P_INJ_B,   /* inject.bias [U] */
	P_BLOCK0,  /* first block parameter */
};

/* transformer block parameters, in table order from P_BLOCK0 */
enum {
	TP_QKV_W = P_BLOCK0, /* block.attn.qkv.weight [3d,d] */
	TP_QKV_B,	     /* block.attn.qkv.bias [3d] */
	TP_OUT_W,	     /* block.attn.out.weight [d,d] */
	TP_OUT_B,	     /* block.attn.out.bias [d] */
	TP_LN1_W,	     /* block.ln1.weight [d] */
	TP_LN1_B,	     /* block.ln1.bias [d] */
	TP_FF1_W,	     /* block.ff1.weight [F,d] */
	TP_FF1_B,	     /* block.ff1.bias [F] */
	TP_FF2_W,	     /* block.ff2.weight [d,F] */
	TP_FF2_B,	     /* block.ff2.bias [d] */
	TP_LN2_W,	     /* block.ln2.weight [d] */
	TP_LN2_B,	     /* block.ln2.bias [d] */
	TP_END,
};

/* tanh_cell block parameters */
enum {
	CP_CELL_W = P_BLOCK0, /* cell.weight [d,d] */
	CP_END,
};

/* trellisnet block parameters (h = d/2 = E); Conv1d [out, in, kernel] */
enum {
	NP_CONV_W = P_BLOCK0, /* block.conv.weight [4h,h,2] */
	NP_CONV_B,	      /* block.conv.bias [4h] */
	NP_END,
};

struct model_ops {
	/* tape elements of one block application (model_tape_elems) */
	size_t (*tape_elems)(const struct model *m);
	/* workspace elements: no-tape forward, vjp scratch, and at least
	 * n_state (model_inject_backward uses the first n_state) */
	size_t (*workspace_elems)(const struct model *m);
	void (*forward)(struct model *m, void *z_out, const void *z_in,
			const void *u, void *tape);
	void (*vjp)(struct model *m, void *gz_in, void *gu, const void *gz_out,
		    const void *tape, int param_grads);
	double (*flops)(const struct model *m);
	/* Optional (NULL: the linear injection of model.c, u = x Wᵀ + b):
	 * m->u from m->x, and its backward (param grads +=, embed/pos grads
	 * += through embed_backward), which may use the whole workspace. */
	void (*inject_forward)(struct model *m);
	void (*inject_backward)(struct model *m);
};

extern const struct model_ops model_transformer_ops;
extern const struct model_ops model_tanh_cell_ops;
extern const struct model_ops model_trellisnet_ops;

/* What m->priv points to (host memory, owned by the model). */
struct model_priv {
	void *ws; /* MEM_WORKSPACE, workspace_elems() elements */
	size_t ws_elems;
	const void *head_z; /* z of the last model_head_forward */
	int32_t *staging;   /* host (2,B,T): inputs then targets */
};

static inline void *model_ws(const struct model *m)
{
	return ((const struct model_priv *)m->priv)->ws;
}

/* Parameter i inside the params (or grads) allocation `base`. */
static inline void *model_p(const struct model *m, const void *base, int i)
{
	return dq_at(m->be, base, m->params[i].offset);
}

#endif
