/* method.h — how the depth of a weight-tied model is computed and
 * differentiated: plain unrolling, gradient checkpointing every k layers,
 * or a deep equilibrium solve with implicit differentiation
 * (docs/ARCHITECTURE.md §Methods). Methods call only the model's
 * forward/vjp and the backend's vector ops.
 *
 * All method-owned buffers come from the tracked allocator: tapes and
 * checkpoints under MEM_DEPTH, solver history under MEM_SOLVER; all of them
 * are allocated by method_create, never inside forward/backward.
 */
#ifndef DQ_METHOD_H
#define DQ_METHOD_H

#include <stddef.h>
#include <stdint.h>

#include "../models/model.h"
#include "keys.h"
#include "method_opts.h"
#include "solver_types.h" /* struct solve_stats, METHOD_TRACE_MAX */

/* The method keys: which method, the depth L of unroll and checkpoint, and
 * every registered method's options (all of them, so that one config can
 * carry, say, deq's solver keys while method=unroll, as suites do).
 * Defaults: method_config_defaults(); each method's options are read with
 * its accessor (checkpoint_config(), deq_config()). */
struct method_config {
	int method; /* index in the method registry: method_kind_parse() */
	int layers; /* L for unroll / checkpoint */
	struct method_opts opts;
	/* not a key: 1 = the method is created for inference only (deqbench
	 * eval): its layout holds no tapes or checkpoints beyond what a
	 * forward with train = 0 uses and only the forward solver's memory,
	 * so the allocator's peak is inference's; method_forward with
	 * train != 0 and method_backward abort */
	int inference;
	/* not a key: set by method_config_resolve; method_create and
	 * method_memory take only resolved configs (they assert it) */
	int resolved;
	/* not a key: 1 = run as CUDA graphs where the backend has them
	 * (bench key cuda_graphs): unroll, checkpoint and revolve record
	 * their forward and backward once and replay them, deq's solves are
	 * device-side loops (solvers.h solver_graphs); no effect elsewhere */
	int graphs;
};

/* Every method's defaults; method = unroll, layers = 12. */
void method_config_defaults(struct method_config *c);
/* Holds c to the rules of the key table (each method's rows: ranges, enum
 * values) and the chosen method's cross-key rules (k <= layers, ...);
 * -1 with a one-line message starting "KEY=VALUE" that says what to use. */
int method_config_validate(const struct method_config *c, char *err,
			   size_t errlen);
/* The rules between the chosen method and the model kind: method=
 * selective needs a kind with selective tapes (model_kind_has_selective:
 * the transformer). 0, or -1 with a one-line message naming what to use
 * instead (method_create and method_memory give the same one). */
int method_check_model(const struct method_config *c, enum model_kind kind,
		       char *err, size_t errlen);
/* Fills the derived values of the chosen method in place: k = 0 →
 * round(√L), f_history/b_history = 0 → f_max_iter/b_max_iter, and marks c
 * resolved. Idempotent. The bench layer resolves its config once
 * (config_finish); method_create and method_memory assert that it was. */
void method_config_resolve(struct method_config *c);

/* The method registry (methods/registry.c): registry index of a method
 * name, -1 when unknown; the name of an index ("?" when out of range);
 * the number of registered methods; "unroll, checkpoint, deq". */
int method_kind_parse(const char *s);
const char *method_kind_name(int k);
int method_kind_count(void);
const char *method_kind_list(void);

/* The key rows a registered method owns (keys.h; offsets into its options
 * struct), NULL with *n = 0 for a method without keys. */
const struct key_desc *method_kind_keys(int k, size_t *n);
/* The options struct of registered method k in c (what its key rows'
 * offsets are relative to). */
void *method_opts_slot(const struct method_config *c, int k);
/* 1 when registered method k needs managed memory (method=managed: a
 * backend with be_has_managed, i.e. device=cuda), else 0. */
int method_kind_needs_managed(int k);
/* 1 when registered method k keeps selective tapes (method=selective),
 * which only a model kind with model_kind_has_selective has; else 0. */
int method_kind_needs_selective(int k);

/* The method of resolved config c in a few words, from its registry entry:
 * its name and what sets its depth ("unroll L=12", "checkpoint L=16 k=4",
 * "revolve L=16 slots=4", "deq broyden/ift": forward solver / backward
 * mode). The one label of `deqbench run`'s summary line, the record's
 * method.label and the report's rows. NUL-terminated, cut to fit n > 0
 * bytes. */
void method_label(const struct method_config *c, char *buf, size_t n);

/* One configuration `deqbench plan` tries (bench/cmd/cmd_plan.c): n_keys
 * key=value settings over the base config, after method=<its name>, and
 * the row's label ("checkpoint k=3", "deq broyden h=8"). */
#define METHOD_CAND_KEYS 4
struct method_candidate {
	char label[64];
	int n_keys;
	const char *key[METHOD_CAND_KEYS];
	char value[METHOD_CAND_KEYS][24];
};
/* Candidate i (0, 1, ...) of registered method k for a plan on the
 * resolved base config c (its layers and deq's f_max_iter size the list):
 * 1 with *out filled, 0 past the last. A method without a candidate hook
 * has one: itself with c's options, labelled with its name. */
int method_candidate(int k, const struct method_config *c, int i,
		     struct method_candidate *out);

/* The method's work of one step by unit (docs/methods.md §Work; the names
 * are the record's `work` keys, results/SCHEMA.md): the block applications
 * and VJPs of method_stats by kind, and the solvers' own iterations.
 *   block_fwd_taped      forwards that write a tape in the forward pass
 *                        (and the Jacobian regulariser's two, deq)
 *   block_fwd            forwards without a tape (solver iterations, the
 *                        untaped passes of checkpoint and revolve, and
 *                        revolve's untaped advances in the backward)
 *   block_fwd_recompute  forwards that write a tape in the backward
 *                        (checkpoint's segments, revolve's layers)
 *   block_vjp            VJPs with parameter and injection gradients
 *   block_vjp_input      VJPs of the input alone (IFT solve iterations,
 *                        the regulariser's w, the spectral radius)
 *   solver_update, solver_history_sum  solve_stats.updates and
 *                        history_sum of the step's solves, summed
 *   attn_recompute       the attention forwards a VJP of a selective
 *                        tape recomputes (method=selective: one per
 *                        VJP; q kᵀ, softmax, att v, 4 B T² d FLOPs)
 * block_fwd_taped + block_fwd + block_fwd_recompute = forward_evals and
 * block_vjp + block_vjp_input = vjp_evals. Bytes moved between device and
 * host are method_stats.offload_bytes. */
struct method_work {
	long block_fwd_taped, block_fwd, block_fwd_recompute;
	long block_vjp, block_vjp_input;
	long solver_update, solver_history_sum;
	long attn_recompute;
};

/* Per-step statistics of a method; reset by every forward. */
struct method_stats {
	long forward_evals;	 /* block applications (model_block_forward) */
	long vjp_evals;		 /* block VJPs (model_block_vjp) */
	struct method_work work; /* the same and the solvers', by unit */
	struct solve_stats fwd;	 /* deq only */
	struct solve_stats bwd;	 /* deq ift only */
	int has_fwd_solve, has_bwd_solve;
	/* Values read back to the host by the solvers (norms, dots,
	 * coefficient downloads): each is a device synchronisation on a GPU.
	 * Forward and backward together. */
	long host_reads;
	/* Bytes the method copied between device and host memory (offload:
	 * tapes out in the forward, back in the backward). */
	long offload_bytes;
	/* Jacobian regularisation of this step (deq, jac_loss_weight > 0):
	 * jac_applied is 1 when the step drew it (probability
	 * jac_loss_freq), jac_loss the unweighted R = ‖εᵀ J_f(z*)‖² / n
	 * (valid after the backward; 0 when not applied). */
	int jac_applied;
	double jac_loss;
	/* Optional residual trace of the last solves (deq): residual after
	 * each iteration, up to METHOD_TRACE_MAX entries. */
	int fwd_trace_len, bwd_trace_len;
	double fwd_trace[METHOD_TRACE_MAX], bwd_trace[METHOD_TRACE_MAX];
};

struct method;

/* Bytes method cfg allocates for model m, per category (MEM_DEPTH: tapes,
 * checkpoints and state vectors; MEM_SOLVER: solver history and vectors),
 * computed without allocating: the formulas in each method's file header.
 * -1 with a message when cfg is invalid. */
int method_memory(const struct model *m, const struct method_config *cfg,
		  size_t *depth_bytes, size_t *solver_bytes, char *err,
		  size_t errlen);

/* Bytes of host memory (MEM_HOST) method cfg keeps its offloaded tapes in
 * (method=offload: (L − 2) tapes; 0 for every other method), computed like
 * method_memory from the layout; SIZE_MAX when it would pass 2^64. cfg must
 * be resolved and valid. */
size_t method_host_memory(const struct model *m,
			  const struct method_config *cfg);
/* Bytes of unified memory (MEM_MANAGED) method cfg keeps its tapes in
 * (method=managed: L tapes; 0 for every other method), as
 * method_host_memory. */
size_t method_managed_memory(const struct model *m,
			     const struct method_config *cfg);

/* Block forward and VJP evaluations of one training step of resolved cfg,
 * by the formulas in each method's file header (unroll/offload L and L;
 * checkpoint L + (L − last segment) and L; revolve L + A(L, s) and L): 0,
 * or -1 when they depend on the solves (deq: the record's `evals`). */
int method_evals_per_step(const struct method_config *cfg, long *fwd,
			  long *vjp);

/* Creates a method for model m: validates cfg and allocates every buffer
 * (depth, solver) the method needs. -1 with a one-line message on error. */
int method_create(struct method **out, struct model *m,
		  const struct method_config *cfg, char *err, size_t errlen);
void method_destroy(struct method *me);

/* z = depth(u): (B,T,d) output from u (B,T,U). train != 0 keeps what
 * backward needs. z must be n_state elements and is owned by the caller. */
void method_forward(struct method *me, const void *u, void *z, int train);
/* Given gz = dL/dz (n_state), adds dL/du into gu (n_u, +=) and the
 * parameter gradients into the model's grads (+=). Needs a train forward. */
void method_backward(struct method *me, const void *gz, void *gu);

const struct method_stats *method_get_stats(const struct method *me);
/* Puts back statistics method_get_stats gave earlier (a copy of them): a
 * forward in between (an evaluation during training) leaves those of the
 * last training step for whoever reads them after training. */
void method_restore_stats(struct method *me, const struct method_stats *st);
/* deq: the fixed point z* of the last forward (n_state elements; valid
 * until the next forward or backward). NULL for unroll and checkpoint. */
const void *method_fixed_point(const struct method *me);
const struct method_config *method_get_config(const struct method *me);

/* Seeds the method's random draws (deq: the Bernoulli draw of
 * jac_loss_freq, the Hutchinson probe ε, the power iteration's start);
 * the bench passes the run's `seed`. Without a call the seed is 1. */
void method_seed(struct method *me, uint64_t seed);

/* deq with jac_loss_weight > 0: the probe ε (n_state doubles, host) of
 * the last step that applied the regulariser; NULL before the first or
 * for other methods. Valid until the next forward or spectral radius. */
const double *method_jac_probe(const struct method *me);

/* deq with spectral_radius_iters = t > 0, after a forward in evaluation
 * mode (train = 0; also after a training step's backward): estimates the
 * spectral radius ρ(J_f(z*)) of the Jacobian at the last fixed point by t
 * power iterations on VJPs over the whole batch (J is block-diagonal over
 * samples, so this is the largest of the samples' radii):
 *   v₀ = ε/‖ε‖ (Gaussian),  r_i = ‖v_{i−1} J‖,  v_i = v_{i−1} J / r_i,
 * returning r_t. r_t → |λ₁| when J has one eigenvalue of largest modulus
 * (at rate |λ₂/λ₁| per iteration); with a complex dominant pair it
 * oscillates about it. torchdeq's power_method returns the per-sample
 * Rayleigh quotient |vᵀ(vJ)| instead, equal in the limit for a real λ₁.
 * Costs one forward with tape 0 and t VJPs (counted in method_stats), t
 * host reads. NAN when off, not deq, before a forward, or while a training
 * forward awaits its backward (the tape is in use); 0 when vJ = 0. */
double method_spectral_radius(struct method *me);

#endif
