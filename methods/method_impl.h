/* method_impl.h — private to methods/: the state behind struct method and
 * the table each method file fills.
 *
 * Every method's depth memory has the same shape, so method.c allocates it
 * from the numbers a method's `layout` returns:
 *   depth = n_tapes · model_tape_bytes + (n_ckpts + n_vecs) · n_state
 *   elements of the backend type (with `selective`: n_tapes ·
 *   model_sel_tape_bytes + model_sel_scratch_bytes instead of the first
 *   term; method=selective),
 * tapes in one MEM_DEPTH allocation (bf16 under precision=bf16),
 * checkpoints then state vectors (fp32) in a second; solver memory
 * (MEM_SOLVER) comes from solvers.h; offloaded tapes n_host_tapes ·
 * model_tape_bytes in one MEM_HOST allocation (MEM_MANAGED when the
 * layout says host_managed: method=managed).
 */
#ifndef DQ_METHOD_IMPL_H
#define DQ_METHOD_IMPL_H

#include "method.h"
#include "solvers.h"

struct method_layout {
	int n_tapes;	  /* block tapes kept at once (device) */
	int n_host_tapes; /* tapes outside device memory (MEM_HOST, offload) */
	int host_managed; /* 1: those are MEM_MANAGED (unified memory) */
	int n_ckpts;	  /* saved states */
	int n_vecs;	  /* work vectors of n_state (ping-pong z and ḡ) */
	int n_solve;	  /* solver parameter sets (deq: 1 or 2), in solve[] */
	/* 1: the tapes are selective tapes (model.h §Selective tapes), and
	 * when n_tapes > 0 one recompute scratch (model_sel_scratch_bytes,
	 * MEM_DEPTH, an allocation of its own): method_f writes
	 * them with model_block_forward_sel, method_vjp reads them with
	 * model_block_vjp_sel (method=selective) */
	int selective;
	struct solver_params solve[2];
};

struct method_ops {
	/* Layout for the resolved cfg (k and histories filled in). */
	void (*layout)(const struct model *m, const struct method_config *c,
		       struct method_layout *out);
	void (*forward)(struct method *me, const void *u, void *z, int train);
	void (*backward)(struct method *me, const void *gz, void *gu);
};

/* A registered method (methods/registry.c lists them, one line each): its
 * name, its ops, and its options — the struct its file owns (at most
 * METHOD_OPTS_BYTES), the key rows that describe it (keys.h; offsets into
 * that struct), its defaults, its cross-key rules and its derived values.
 * Any hook may be NULL (unroll has no options). */
struct method_desc {
	const char *name;
	const struct method_ops *ops;
	size_t opts_offset; /* offsetof(struct method_opts, <its member>) */
	const struct key_desc *keys;
	size_t n_keys;
	void (*defaults)(void *opts);
	/* Rules across keys (k <= layers, protect_thres 0 or >= 1, ...),
	 * after every row is in range: 0, or -1 with "KEY=VALUE ..." */
	int (*check)(const struct method_config *c, const void *opts, char *err,
		     size_t errlen);
	/* Fills derived values (k = 0 → round(√L)); idempotent. */
	void (*resolve)(const struct method_config *c, void *opts);
	/* After the depth and solver buffers: the method's own host state
	 * (deq: the Jacobian probe). 0, or -1 with a message. */
	int (*init)(struct method *me, char *err, size_t errlen);
	int uses_layers; /* 1: the `layers` key sets its depth */
	/* 1: needs a backend with managed memory (be_has_managed: cuda) */
	int needs_managed;
	/* 1: its layout asks for selective tapes, so it needs a model kind
	 * that has them (model_kind_has_selective: transformer) */
	int needs_selective;
	/* Whether the config c asks for selective tapes through an option
	 * (checkpoint's selective=true); NULL: needs_selective alone */
	int (*selective)(const struct method_config *c);
	/* 1: forward and backward issue device work only (no reads, no
	 * copies on another stream), so that with cfg.graphs they run as
	 * recorded CUDA graphs (unroll, checkpoint, revolve) */
	int graphable;
	/* Block forward and VJP evaluations of one training step of the
	 * resolved c, where they follow from the config alone (NULL: they
	 * depend on the solves, deq). */
	void (*evals)(const struct method_config *c, long *fwd, long *vjp);
	/* What follows the name in method_label for the resolved c ("L=16
	 * k=4", "broyden/ift"); NULL: "L=<layers>" when uses_layers, else
	 * nothing. */
	void (*label)(const struct method_config *c, char *buf, size_t n);
	/* plan's candidate i on base config c (method_candidate: 1 with *out
	 * filled, 0 past the last); NULL: one candidate, the method itself. */
	int (*candidate)(const struct method_config *c, int i,
			 struct method_candidate *out);
};

/* Fills out with label and the settings key[0..n) = value[0..n) (value
 * text, at most 23 characters). For the candidate hooks. */
void method_candidate_set(struct method_candidate *out, const char *label,
			  int n, const char *const *key,
			  const char *const *value);

/* method_desc.evals of methods that apply the block once per layer and
 * take one VJP per layer (unroll, offload): fwd = vjp = layers. */
void method_evals_layers(const struct method_config *c, long *fwd, long *vjp);

/* NULL-terminated, in registry order (the index is the `method` key). */
extern const struct method_desc *const method_registry[];

struct method {
	struct model *m;
	struct method_config cfg; /* resolved: k, f_history, b_history */
	const struct method_desc *desc;
	const struct method_ops *ops;
	struct method_layout lay;
	struct method_stats st;
	int have_train; /* a train forward awaits its backward */

	size_t tape_bytes; /* model_tape_bytes(m) (bf16 under precision=bf16);
			    * model_sel_tape_bytes(m) with lay.selective */
	void *tapes;	   /* n_tapes of tape_bytes each, MEM_DEPTH */
	void *sel_scratch; /* lay.selective with tapes: the recompute
			    * scratch, MEM_DEPTH; else NULL */
	void *host_tapes;  /* n_host_tapes of tape_bytes each, MEM_HOST or
			    * MEM_MANAGED (lay.host_managed) */
	void *states;	   /* (n_ckpts + n_vecs, n_state), MEM_DEPTH */
	struct solver *solver;
	/* the recorded forward and backward (cfg.graphs, desc->graphable) */
	struct method_graph {
		void *g;	   /* NULL: none yet */
		const void *a, *u; /* u: me->u at the recording */
		void *b;
		int train;		 /* -1: the backward */
		long fwd, vjp;		 /* the evaluations it runs */
		struct method_work work; /* and by unit */
	} gfwd, gbwd;
	/* 1 while a backward recomputes taped forwards (checkpoint,
	 * revolve): method_f counts them as block_fwd_recompute */
	int recompute;

	const void *u;	   /* injection of the current forward (deq map) */
	const void *gz;	   /* dL/dz of the current backward (deq map) */
	const void *zstar; /* deq: the last forward's fixed point */
	int eval_forward;  /* the last forward had train = 0 */

	/* deq Jacobian tools (deq.c): host draws, n_state doubles,
	 * allocated by method_create when jac_loss_weight > 0 or
	 * spectral_radius_iters > 0 (NULL otherwise) */
	uint64_t rng;	 /* splitmix64 state (method_seed) */
	double *host;	 /* ε or the power iteration's start */
	int probe_valid; /* host holds the last step's ε */
};

/* Tape i, checkpoint i, work vector i. */
static inline void *method_tape(const struct method *me, int i)
{
	return (char *)me->tapes + (size_t)i * me->tape_bytes;
}

/* Host tape i (offload), or managed tape i (managed). */
static inline void *method_host_tape(const struct method *me, int i)
{
	return (char *)me->host_tapes + (size_t)i * me->tape_bytes;
}

static inline void *method_ckpt(const struct method *me, int i)
{
	return dq_at(me->m->be, me->states, (size_t)i * me->m->n_state);
}

static inline void *method_vec(const struct method *me, int i)
{
	return method_ckpt(me, me->lay.n_ckpts + i);
}

/* Counted block application and VJP (method_stats, its work by unit:
 * a forward without a tape is block_fwd, with one block_fwd_recompute
 * while me->recompute, else block_fwd_taped; a VJP with parameter
 * gradients block_vjp, else block_vjp_input, and with lay.selective one
 * attn_recompute beside it). Selective tapes under lay.selective. */
static inline void method_f(struct method *me, void *z_out, const void *z_in,
			    const void *u, void *tape)
{
	if (tape && me->lay.selective)
		model_block_forward_sel(me->m, z_out, z_in, u, tape);
	else
		model_block_forward(me->m, z_out, z_in, u, tape);
	me->st.forward_evals++;
	if (!tape)
		me->st.work.block_fwd++;
	else if (me->recompute)
		me->st.work.block_fwd_recompute++;
	else
		me->st.work.block_fwd_taped++;
}

static inline void method_vjp(struct method *me, void *gz_in, void *gu,
			      const void *gz_out, const void *tape, int pg)
{
	if (me->lay.selective) {
		model_block_vjp_sel(me->m, gz_in, gu, gz_out, tape,
				    me->sel_scratch, pg);
		me->st.work.attn_recompute++;
	} else
		model_block_vjp(me->m, gz_in, gu, gz_out, tape, pg);
	me->st.vjp_evals++;
	if (pg)
		me->st.work.block_vjp++;
	else
		me->st.work.block_vjp_input++;
}

/* x[0..n) ~ N(0, 1) on the host from the method's generator
 * (splitmix64, Steele et al. 2014; Box–Muller). */
void method_gaussian(struct method *me, double *x, size_t n);
/* Uniform in (0, 1) from the same generator. */
double method_u01(struct method *me);

/* Applies n_layers ≥ 1 block layers without tapes from z_in, the last
 * output into z, the others alternating between work vectors a and b (z_in
 * may be a or b, z neither); z NULL: the last output alternates too. Returns
 * the vector holding the last output. Shared by unroll, checkpoint and
 * revolve. */
const void *method_run_plain(struct method *me, const void *u, const void *z_in,
			     void *z, int n_layers, void *a, void *b);

/* unroll's forward from z₀ = 0 through cfg.layers layers into z, with
 * work vectors 0 and 1; training writes layer i's tape at tapes + i ·
 * tape_bytes (unroll's device tapes, managed's unified-memory ones). */
void method_unroll_forward(struct method *me, const void *u, void *z, int train,
			   void *tapes);

/* VJP back through the n ≥ 0 layers taped in tapes 0..n-1, last first, from
 * the cotangent g; parameter gradients accumulate, the input cotangents
 * alternate between work vectors a and b (g may be a or b). Returns the
 * vector holding the cotangent of layer 0's input (g itself when n = 0).
 * Shared by unroll, checkpoint and revolve. */
const void *method_vjp_taped(struct method *me, const void *g, void *gu, int n,
			     void *a, void *b);

#endif
