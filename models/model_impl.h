/* model_impl.h — private to models/: what one model kind provides (struct
 * model_def, defined in the kind's own file and listed in models/registry.c),
 * the parameter specs the kinds contribute to the table, the host-side state
 * m->priv points to, and helpers shared by model.c and the kind files.
 *
 * Parameter table order (docs/ARCHITECTURE.md §Model): the four injection
 * parameters first, the kind's block parameters next (its block_specs, at
 * P_BLOCK0 on), the head last. */
#ifndef DQ_MODEL_IMPL_H
#define DQ_MODEL_IMPL_H

#include "model.h"

/* Common parameters at fixed indices; the head is at n_params-2, -1. */
enum {
	P_EMBED_W, /* embed.weight [V,E] */
	P_POS_W,   /* pos_embed.weight [T,E] */
	P_INJ_W,   /* inject.weight [U,E] ([U,E,k] for a Conv1d injection) */
	P_INJ_B,   /* inject.bias [U] */
	P_BLOCK0,  /* first block parameter */
};

/* What a tensor is, for the init presets of model.c. */
enum param_role {
	R_EMBED,
	R_POS,
	R_INJ_W,
	R_INJ_B,
	R_BLOCK_W,
	R_BLOCK_B,
	R_LN_W,
	R_LN_B,
	R_FIXED, /* the kind sets init and a itself; presets leave them */
	R_HEAD_W,
	R_HEAD_B,
};

enum init_kind { INIT_NORMAL, INIT_UNIFORM, INIT_CONST };

/* Table entry plus how to initialise it. */
struct param_spec {
	const char *name;
	int64_t rows, cols; /* cols = 0: a vector of `rows` */
	int64_t kern;	    /* > 0: a Conv1d weight [rows, cols, kern] */
	enum param_role role;
	int64_t fan_in; /* of the layer (weights and biases) */
	enum init_kind init;
	double a; /* NORMAL: std; UNIFORM: bound b of (−b, b]; CONST: value */
};

/* A spec whose init the preset fills in (model.c). */
#define SPEC(nm, r, c, k, role, fin)                                           \
	(struct param_spec)                                                    \
	{                                                                      \
		nm, r, c, k, role, fin, INIT_CONST, 0                          \
	}

/* Elements per position of a kind's activations, for model.c's size
 * check: its widest row beside the head's V, and what it keeps on top of
 * that (the transformer's attention scores, H T). */
struct model_extent {
	long long row, extra;
};

/* One model kind. model.c reads nothing kind-specific but this. Required
 * members unless marked optional (NULL then means what it says). Sizes:
 * d = d_mult d_model, U = u_mult d_model, E = d_model. */
struct model_def {
	const char *name; /* the `model` key's value */
	int d_mult, u_mult;
	int state_parts;   /* struct model's state_parts */
	int inject_kernel; /* 0: inject.weight [U,E], u = x Wᵀ + b; k > 0: a
			    * Conv1d weight [U,E,k] (fan-in k E) */
	int attention; /* 1: the block calls model_attention_forward/_backward
			* (precision=bf16 sizes their operand copies) */
	/* Kind-specific checks of c (n_heads, d_ff, limits of its own ops);
	 * -1 with one line in err. Optional. */
	int (*check)(const struct model_config *c, char *err, size_t errlen);
	struct model_extent (*extent)(const struct model_config *c);
	/* Appends the block's parameter specs (SPEC, in table order from
	 * P_BLOCK0) to s; returns their count. */
	int (*block_specs)(const struct model_config *c, struct param_spec *s);
	/* The kind's own recipe under init=deq for every role but LayerNorm
	 * and R_FIXED: sets p->init and p->a. Optional (NULL: the
	 * DEQ-Transformer recipe of model.c). */
	void (*init_deq)(struct param_spec *p);

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
	/* Optional, all six or none (NULL: the kind has no selective tape
	 * and method=selective refuses it; model.h §Selective tapes): the
	 * selective tape's elements, the selective vjp's recompute scratch
	 * (elements of the backend type, owned by the caller), the forward
	 * writing that tape (no NULL tape), the vjp reading it, the
	 * recomputation that vjp starts with, alone (for price), and that
	 * recomputation's FLOPs (for plan). */
	size_t (*sel_tape_elems)(const struct model *m);
	size_t (*sel_scratch_elems)(const struct model *m);
	void (*sel_forward)(struct model *m, void *z_out, const void *z_in,
			    const void *u, void *tape);
	void (*sel_vjp)(struct model *m, void *gz_in, void *gu,
			const void *gz_out, const void *tape, void *scratch,
			int param_grads);
	void (*sel_recompute)(struct model *m, void *scratch, const void *tape);
	double (*sel_flops)(const struct model *m);
	/* Optional (NULL: the linear injection of model.c, u = x Wᵀ + b):
	 * m->u from m->x, and its backward (param grads +=, embed/pos grads
	 * += through embed_backward), which may use the whole workspace. */
	void (*inject_forward)(struct model *m);
	void (*inject_backward)(struct model *m);
};

/* The registry (models/registry.c): entry i is enum model_kind i. */
extern const struct model_def *const model_registry[];
extern const int model_registry_len;

/* What m->priv points to (host memory, owned by the model). */
struct model_priv {
	void *ws; /* MEM_WORKSPACE, workspace_elems() elements */
	size_t ws_elems;
	const void *head_z; /* z of the last model_head_forward */
	/* model_head_forward_train did the chunked head's backward too */
	int head_grads_done;
	int32_t *staging; /* host (2,B,T): inputs then targets */
	/* precision=bf16 only (model.c), else NULL: */
	void *tape32;	    /* MEM_WORKSPACE, one fp32 tape: the block's own */
	void *gemm_scratch; /* MEM_WORKSPACE, model_gemm's rounded operands */
	size_t gemm_scratch_bytes;
	/* MEM_WORKSPACE, the parameters rounded to bf16 (n_param_elems):
	 * the weight operands of model_gemm, refreshed by model_bf16_cast */
	uint16_t *wcast;
	/* model_gemm's shape log between model_gemm_log_start and _stop;
	 * NULL (the rule) when off */
	struct model_gemm_log *gemm_log;
};

/* model.c: bytes of the bf16 buffers above (0 unless precision=bf16),
 * and their allocation (-1 when out of device memory;
 * model_destroy frees what was allocated). */
size_t model_bf16_workspace_bytes(const struct model *m);
/* model.c: rounds the parameters into wcast (precision=bf16; else
 * nothing): at every model_inject_forward, so after any writer of the
 * parameters (Adam, init, a params file, a test) the next forward pass
 * reads them. */
void model_bf16_cast(struct model *m);
int model_bf16_alloc(struct model *m);

/* model_head_rows (model.h), for the files below model.c. */
static inline size_t model_head_rows_of(const struct model *m)
{
	size_t N = (size_t)m->B * m->T, K = (size_t)m->cfg.head_chunk;
	return K > 0 && K < N ? K : N;
}

static inline void *model_ws(const struct model *m)
{
	return ((const struct model_priv *)m->priv)->ws;
}

/* Parameter i inside the params (or grads) allocation `base`. */
static inline void *model_p(const struct model *m, const void *base, int i)
{
	return dq_at(m->be, base, m->params[i].offset);
}

/* Writes the printf-style message into err (errlen bytes) and returns -1,
 * for `return model_err(err, errlen, "d_ff=%d must be positive", F);`. */
int model_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A linear layer of parameters w (weight [out,in]) and w + 1 (bias [out]):
 *   forward   y (N,out) = x (N,in) Wᵀ + beta y + b;
 *   backward  dx (N,in) = dy W + beta dx, and with param_grads
 *             dW += dyᵀ x, db += Σ rows dy.
 * Each is one GEMM (two, and a column sum, backward). */
void model_linear_forward(struct model *m, void *y, double beta, const void *x,
			  int w, int N, int in, int out);
/* model_linear_forward with y = relu(...) when relu: under epilogue=fused
 * one gemm_bias_act (the bias and ReLU in the GEMM's epilogue; on the
 * CPU the same ops, so the same bits), else the GEMM, then bias_forward
 * or bias_act_forward. */
void model_linear_act_forward(struct model *m, void *y, double beta,
			      const void *x, int w, int N, int in, int out,
			      int relu);
void model_linear_backward(struct model *m, void *dx, double beta,
			   const void *dy, const void *x, int w, int N, int in,
			   int out, int param_grads);

/* The causal self-attention of the block (kernels/backend.h's
 * attention_forward and _backward, shapes B, T, d, n_heads of m): under
 * precision=bf16 the bf16 ops (attention_forward_bf16, _backward_bf16),
 * their operand copies in gemm_scratch; under attention=flash the fused
 * ops (attention_flash_forward, _backward: att is then each row's lse,
 * and the backward reads the forward's out). A kind that calls these sets
 * model_def.attention. */
void model_attention_forward(struct model *m, void *out, void *att,
			     const void *qkv);
void model_attention_backward(struct model *m, void *dqkv, void *scratch,
			      const void *dout, const void *qkv,
			      const void *att, const void *out);

/* The same layer without its bias, for a caller that fuses the bias into
 * the next op (bias_act_forward, the residual LayerNorm; their backwards
 * take db): forward y = x Wᵀ + beta y; backward dx = dy W + beta dx and,
 * with param_grads, dW += dyᵀ x. */
void model_matmul_forward(struct model *m, void *y, double beta, const void *x,
			  int w, int N, int in, int out);
void model_matmul_backward(struct model *m, void *dx, double beta,
			   const void *dy, const void *x, int w, int N, int in,
			   int out, int param_grads);

#endif
