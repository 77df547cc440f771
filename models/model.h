/* model.h — weight-tied models: the block f(z; u) that every method applies,
 * plus the LM head around it (token + position embeddings, input injection,
 * output projection, mean next-token cross-entropy). docs/ARCHITECTURE.md
 * §Model is the exact spec.
 *
 * Letters: B batch, T sequence, d state width, H heads, dh = d/H, F
 * feed-forward width (d_ff), V vocabulary, U injection width (3d for the
 * transformer, d for tanh_cell, 4h for trellisnet), E embedding width = the
 * width the head reads. d = E = d_model for the transformer and tanh_cell;
 * trellisnet has hidden width h = d_model, state z = [h; c], d = 2h, E = h.
 *
 * Buffers are backend buffers (see kernels/backend.h): z and its gradients
 * are (B,T,d) = model->n_state elements; u and its gradient (B,T,U) =
 * model->n_u elements. The head reads the first B*T*E elements of z as a
 * (B,T,E) matrix (all of z when E = d; trellisnet stores z planar, h part
 * (B,T,h) then c part (B,T,h), and u gate-major (4,B,T,h): see
 * models/trellisnet.c). Every buffer a step needs is allocated by
 * model_create (params, grads, head, workspace); only tapes are allocated by
 * the methods (category depth), sized by model_tape_elems().
 *
 * Gradient rule: model_block_vjp and the head/inject backward ADD (+=) into
 * the parameter gradients, because every application of the tied block adds
 * into the same gradient. model_zero_grads clears them once per step.
 */
#ifndef DQ_MODEL_H
#define DQ_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "../kernels/backend.h"

/* A model kind is an index into the registry of models/registry.c, in
 * which every kind's file registers its struct model_def. The three below
 * name the first three entries for tests and bench; a kind added later
 * needs no enumerator (model_kind_parse gives its index). */
enum model_kind { MODEL_TRANSFORMER, MODEL_TANH_CELL, MODEL_TRELLISNET };

/* Index of the registered kind named s; -1 when none is. */
int model_kind_parse(const char *s);
/* Name of kind k; "?" when k is not registered. */
const char *model_kind_name(enum model_kind k);
/* Number of registered kinds (indices 0 .. count-1). */
int model_kind_count(void);
/* Writes the registered names, ", "-separated in registry order
 * ("transformer, tanh_cell, trellisnet"), NUL-terminated and cut to fit
 * n bytes: the `model` key's allowed values. */
void model_kind_list(char *buf, size_t n);

/* Parameter init presets (model.c, docs/models.md "Initialisation" give every
 * tensor's distribution per model kind):
 *   MODEL_INIT_GPT2     linear/conv weights and embeddings N(0, 0.02²),
 *                       biases 0, LayerNorm weight 1 / bias 0;
 *   MODEL_INIT_PYTORCH  PyTorch's module defaults: nn.Embedding N(0, 1),
 *                       nn.Linear / nn.Conv1d weight and bias
 *                       U(−1/√fan_in, 1/√fan_in), LayerNorm 1 / 0;
 *   MODEL_INIT_DEQ      the locuslab DEQ code's: DEQ-Transformer weights
 *                       N(0, 0.01²), embeddings N(0, (0.01 √d)²) (its
 *                       embedding scale √d folded in), biases 0;
 *                       DEQ-TrellisNet's own recipe for trellisnet.
 * tanh_cell's cell.weight is N(0, (0.25/√d)²) under every preset (a
 * contraction). */
enum model_init { MODEL_INIT_GPT2, MODEL_INIT_PYTORCH, MODEL_INIT_DEQ };

/* Parses "gpt2", "pytorch", "deq"; -1 when unknown. */
int model_init_parse(const char *s);
const char *model_init_name(enum model_init k);

/* The transformer's attention (the `attention` key, docs/configuration.md):
 * MODEL_ATT_UNFUSED keeps the B H T² probabilities on the tape
 * (attention_forward); MODEL_ATT_FLASH is the fused kernel
 * (attention_flash_forward, FlashAttention-2), whose tape keeps 2 floats a
 * row (its log-sum-exp) instead. */
enum model_attention { MODEL_ATT_UNFUSED, MODEL_ATT_FLASH };

/* Parses "unfused", "flash"; -1 when unknown. */
int model_attention_parse(const char *s);
const char *model_attention_name(enum model_attention a);

/* Where a linear layer's bias (and the transformer's ReLU) is added (the
 * `epilogue` key): MODEL_EPI_SEPARATE, a pass after the GEMM;
 * MODEL_EPI_FUSED, the GEMM's epilogue (gemm_bias_act: cuBLASLt on cuda;
 * on the CPU the same two ops, so the same bits). */
enum model_epilogue { MODEL_EPI_SEPARATE, MODEL_EPI_FUSED };

/* Parses "separate", "fused"; -1 when unknown. */
int model_epilogue_parse(const char *s);
const char *model_epilogue_name(enum model_epilogue e);

struct model_config {
	enum model_kind kind;
	int d_model;	      /* d */
	int n_heads;	      /* H (transformer); d % H == 0 */
	int d_ff;	      /* F (transformer) */
	int seq_len;	      /* T; also the size of the position table */
	int batch_size;	      /* B */
	int vocab_size;	      /* V */
	uint64_t seed;	      /* parameter init */
	enum model_init init; /* preset; 0 = MODEL_INIT_GPT2 */
	double init_std;      /* > 0: every linear/conv weight N(0, init_std²)
			   * instead of the preset's (not cell.weight) */
	double embed_std;     /* > 0: embed and pos_embed N(0, embed_std²) */
	int head_chunk;	      /* > 0: the head works on chunks of this many
			       * positions (see model_head_forward); 0 = all
			       * N = B·T at once */
	/* DQ_PREC_BF16: mixed precision (model.c, docs/precision.md): every
	 * GEMM of the model on bf16 operands, tapes stored in bf16; fp32 and
	 * tf32 compute as the backend does (tf32 is the backend's
	 * set_tf32, not the model's business) */
	enum dq_precision precision;
	enum model_attention attention; /* transformer only */
	enum model_epilogue epilogue;
};

/* One named parameter tensor inside the single parameter allocation.
 * Layouts follow PyTorch nn.Linear: weight [out, in], y = x Wᵀ + b. */
#define MODEL_MAX_PARAMS 32
struct model_param {
	const char *name; /* e.g. "block.attn.qkv.weight" */
	int ndim;	  /* 1, 2 or 3 (a Conv1d weight [out, in, kernel]) */
	int64_t shape[3];
	size_t offset; /* elements from the start of params / grads */
	size_t numel;
};

struct model_def; /* the kind's implementation (models/model_impl.h) */

struct model {
	struct backend *be;
	struct model_config cfg;
	const struct model_def *def;
	int B, T, d, U;
	int E;		/* embedding width = head input width (<= d) */
	size_t n_state; /* B*T*d */
	/* The state is state_parts blocks of (B, n_state / (state_parts B))
	 * elements: sample b's share of block p is contiguous, and samples are
	 * independent (f acts on each sample alone, so J_f is block-diagonal
	 * over them). 1, or 2 for trellisnet's [h; c]. */
	int state_parts;
	size_t n_u; /* B*T*U */

	/* parameters: one allocation each for values and gradients */
	struct model_param params[MODEL_MAX_PARAMS];
	int n_params;
	size_t n_param_elems;
	void *param_buf; /* MEM_PARAMS */
	void *grad_buf;	 /* MEM_GRADS */

	/* head buffers (MEM_HEAD), owned by the model */
	int32_t *tokens;  /* (B,T) inputs, device */
	int32_t *targets; /* (B,T) next tokens, device */
	void *x;	  /* (B,T,E) embed + pos */
	void *u;	  /* (B,T,U) injection */
	void *gu;	  /* (B,T,U) dL/du accumulated by block vjps */
	void *logits;	  /* (K,V) logits, then probs, then dlogits of K =
			   * model_head_rows() positions at a time */
	void *gz;	  /* (B,T,d) dL/dz from the head */

	void *priv; /* private state (model_impl.h), incl. workspace */
};

/* Creates a model on backend be: validates cfg, allocates params, grads,
 * head buffers and workspace, and initialises parameters deterministically
 * from cfg->seed (identical values on every backend).
 * Errors (-1, one line in err, nothing left allocated): d, H, F, T, B, V not
 * positive; head_chunk negative; d not divisible by H; trellisnet with 4 d_model² > INT_MAX;
 * an unknown init preset, init_std or embed_std negative or not finite;
 * out of device memory. */
int model_create(struct model **out, struct backend *be,
		 const struct model_config *cfg, char *err, size_t errlen);
void model_destroy(struct model *m);

/* A shape-only model: fills *m with cfg's kind, sizes (B, T, d, U, E,
 * n_state, n_u) and parameter table as model_create would, allocating
 * nothing (buffers NULL); m->be = be, of which only be->elem (and, under
 * precision=bf16, be->bf16_operand_elem) is read, so be may be a stack
 * struct with those set. Enough for model_tape_elems,
 * model_memory and method_memory: memory is estimated before a run
 * allocates it. -1 with model_create's message for bad dimensions. */
int model_shape(struct model *m, struct backend *be,
		const struct model_config *cfg, char *err, size_t errlen);

/* Bytes model_create allocates for m, per category (params, grads, head,
 * workspace; the others 0): params and grads n_param_elems elements each,
 * head 2·N int32 token ids plus N·E + 2·N·U + K·V + n_state elements (x, u,
 * gu, logits, gz; K = model_head_rows(m)), workspace the kind's workspace
 * (N = B·T). */
void model_memory(const struct model *m, size_t bytes[MEM_NCAT]);

/* Rows K of the head's logits buffer m->logits (K, V): N = B·T when
 * cfg.head_chunk is 0 or >= N, else head_chunk. */
size_t model_head_rows(const struct model *m);

/* Elements (of the backend type) one block application's tape needs; the
 * tape holds everything model_block_vjp reads, z_in included. */
size_t model_tape_elems(const struct model *m);

/* Bytes one block application's tape takes: model_tape_elems() elements
 * of the backend type, or of 2 bytes (bf16) under precision=bf16. Methods
 * allocate and address tapes in these. */
size_t model_tape_bytes(const struct model *m);

/* C(M,N) = alpha op(A) op(B) + beta C, as be_gemm: the model's matrix
 * products, which the kinds call instead of be_gemm. Under precision=bf16
 * it is be_gemm_bf16 with the model's scratch (bf16 operands, fp32
 * accumulation); otherwise be_gemm. */
void model_gemm(struct model *m, int ta, int tb, int M, int N, int K,
		double alpha, const void *A, int lda, const void *B, int ldb,
		double beta, void *C, int ldc);

/* The shapes model_gemm is called with, while a caller asks (bench-block
 * times them; tests hold each kind's model_block_flops against them).
 * One entry per distinct (ta, tb, M, N, K), in the order of its first
 * call, with count its calls: C (M,N) = op(A) op(B), op(A) (M,K), ta and
 * tb as model_gemm's. Each entry is 2 M N K count FLOPs. */
struct model_gemm_shape {
	int ta, tb, M, N, K;
	long count;
};
#define MODEL_GEMM_LOG_MAX 64
struct model_gemm_log {
	int n;	      /* entries in s */
	long dropped; /* calls of shapes that found s full (0 for every kind
		       * here: a block has at most 24 GEMM calls) */
	struct model_gemm_shape s[MODEL_GEMM_LOG_MAX];
};

/* Clears *log and has every model_gemm of m add its shape to it until
 * model_gemm_log_stop(m). The caller owns log; m keeps a pointer to it
 * meanwhile. Off (the rule), model_gemm costs one NULL check for it. m
 * comes from model_create (a model_shape model has no private state to
 * hold the pointer). */
void model_gemm_log_start(struct model *m, struct model_gemm_log *log);
void model_gemm_log_stop(struct model *m);
/* Σ over the entries of 2 M N K count (multiply-add = 2). */
double model_gemm_log_flops(const struct model_gemm_log *log);

/* z_out = f(z_in; u). tape: NULL (no tape; uses model workspace) or a buffer
 * of model_tape_bytes() that receives what the vjp needs (under bf16 the
 * block writes an fp32 tape into the model's staging buffer and stores it
 * rounded to bf16: the vjp reads the rounded values, widened back).
 * z_out must not alias z_in. Counts as one layer evaluation. */
void model_block_forward(struct model *m, void *z_out, const void *z_in,
			 const void *u, void *tape);

/* Vector-Jacobian product of one block application recorded in tape:
 *   gz_in  = gz_out · ∂f/∂z        (overwritten; must not alias gz_out)
 *   gu    += gz_out · ∂f/∂u        (skipped when gu is NULL)
 *   grads += gz_out · ∂f/∂θ        (only when param_grads != 0)
 * The IFT backward solve calls it with gu = NULL, param_grads = 0. */
void model_block_vjp(struct model *m, void *gz_in, void *gu, const void *gz_out,
		     const void *tape, int param_grads);

/* Selective tapes (method=selective): Megatron-LM's selective activation
 * recomputation (Korthikanti et al. 2022, "Reducing Activation
 * Recomputation in Large Transformer Models", §4.2). The tape leaves out
 * what is cheaper to recompute than to store — the transformer's
 * attention probabilities att (B,H,T,T) and the attention output (N,d)
 * (models/transformer.c says why) — and the selective vjp recomputes them
 * from the tape's q and k (and v) into a scratch the caller owns, then
 * runs the same vjp on the same values: its results are bitwise those of
 * model_block_vjp on the full tape (bf16: the recomputed values rounded
 * as the full tape stores them). Kinds without one (tanh_cell, trellisnet:
 * nothing in their tapes is cheaper to recompute than a block) answer 0
 * to model_has_selective and must not be given to the others. */

/* 1 when kind k (or m's kind) has a selective tape, else 0. */
int model_kind_has_selective(enum model_kind k);
int model_has_selective(const struct model *m);
/* Elements (of the backend type) and bytes (2 bytes an element under
 * precision=bf16, as model_tape_bytes) of one selective tape: the
 * transformer's N (7d + F + 4), N = B·T. */
size_t model_sel_tape_elems(const struct model *m);
size_t model_sel_tape_bytes(const struct model *m);
/* Bytes of the selective vjp's scratch: the transformer's B H T² + N d
 * elements of the backend type (fp32 under bf16: the vjp reads fp32). */
size_t model_sel_scratch_bytes(const struct model *m);
/* model_block_forward writing a selective tape (tape not NULL). */
void model_block_forward_sel(struct model *m, void *z_out, const void *z_in,
			     const void *u, void *tape);
/* model_block_vjp of a selective tape, recomputing into scratch
 * (model_sel_scratch_bytes; overwritten): the transformer's attention
 * forward once more, 4 B T² d FLOPs, then the full vjp. */
void model_block_vjp_sel(struct model *m, void *gz_in, void *gu,
			 const void *gz_out, const void *tape, void *scratch,
			 int param_grads);
/* The recomputation alone that model_block_vjp_sel starts with (scratch
 * overwritten): the work unit attn_recompute, as `deqbench price` times
 * it. */
void model_sel_recompute(struct model *m, void *scratch, const void *tape);
/* FLOPs of that recomputation, counted as model_block_flops counts (the
 * transformer's 4 B T² d); works on a model_shape model. */
double model_sel_recompute_flops(const struct model *m);

/* Loads a batch: tokens_host is int32 (B, T+1) row-major; inputs are
 * columns 0..T-1, targets columns 1..T. Returns -1 with err when a token id
 * is outside [0, V). */
int model_set_batch(struct model *m, const int32_t *tokens_host, char *err,
		    size_t errlen);

/* m->x = embed[tok] + pos; m->u = x injectᵀ + inject.bias (trellisnet: a
 * kernel-2 causal convolution of x, models/trellisnet.c). */
void model_inject_forward(struct model *m);
/* logits = z[:, :E] headᵀ + head.bias, z[:, :E] the first B*T*E elements
 * of z; returns the mean next-token cross-entropy in nats over B*T
 * positions. Leaves probabilities for model_head_backward.
 *
 * Chunked head (cfg.head_chunk = K, 0 < K < N = B·T): the positions are
 * taken K at a time (the last chunk N mod K when that is not 0), so only
 * K·V logits are live instead of N·V: per chunk the logits (one GEMM),
 * the softmax in place and the chunk's loss (be_xent_forward, one host
 * read per chunk); the mean over N is Σ chunk losses · rows / N, summed in
 * double. With K >= N or K = 0 it is the unchunked head, bitwise. */
double model_head_forward(struct model *m, const void *z);
/* model_head_forward for a training step: each chunk's softmax and its
 * backward in one pass (be_xent_train: dlogits = (probs - onehot) / N,
 * the probabilities never stored), then at once the chunk's head
 * backward GEMMs, while its logits are live: gz's rows are written and
 * the head grads added here, and a chunked head costs no extra head GEMM;
 * model_head_backward then only clears gz past B*T*E. The same loss, gz
 * and grads as model_head_forward + model_head_backward up to the
 * rounding of xent_train (scale/Σ applied once instead of 1/Σ then scale;
 * bitwise equal between chunkings of the same rows). The grads must have
 * been zeroed first (they are accumulated). */
double model_head_forward_train(struct model *m, const void *z);
/* The training head of an unchunked head (model_head_rows(m) = B*T),
 * the loss left in *loss, a device double (be_xent_train): nothing comes
 * back to the host, so a graph can record it (bench/run/step_graphs.c).
 * model_head_forward_train of such a head is this and one read. */
void model_head_forward_train_dev(struct model *m, const void *z, double *loss);
/* m->gz = dL/dz (n_state, overwritten; 0 past the first B*T*E elements);
 * head grads +=. Needs model_head_forward
 * first, and reads the z given to it: keep z unchanged in between.
 * Chunked head after model_head_forward: per chunk it recomputes the
 * logits and softmax (one extra head GEMM, 2·N·E·V FLOPs per step, and one
 * more host read per chunk), forms (probs − onehot) / N in place, writes
 * the chunk's rows of gz and adds into head.weight / head.bias grads;
 * after model_head_forward_train that was done there. */
void model_head_backward(struct model *m);
/* inject, embed and pos grads += from m->gu (dL/du). */
void model_inject_backward(struct model *m);

/* Zeroes all parameter gradients and m->gu. */
void model_zero_grads(struct model *m);

/* Parameter by name, NULL when absent. */
const struct model_param *model_param_find(const struct model *m,
					   const char *name);

/* Forward FLOPs of one block application (multiply-add = 2), for GFLOP/s. */
double model_block_flops(const struct model *m);

#endif
