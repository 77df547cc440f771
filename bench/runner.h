/* runner.h — one training run end to end: corpus (data.h: loaded or read
 * from its cache; vocabulary from the corpus unless synthetic), backend,
 * model, method and Adam state allocated up front, then `steps` timed
 * optimizer steps on batches of the DEQ / Transformer-XL ordered iterator,
 * then evaluation on valid and test, producing one record (record.h,
 * results/SCHEMA.md).
 *
 * Step: zero grads, load batch, inject, method forward (train) → z, head
 * forward → loss, head backward, method backward, inject backward, clip the
 * global grad norm to `clip`, Adam (β 0.9, 0.999, ε 1e-8, no weight decay)
 * with linear warmup over lr_warmup steps then cosine decay towards 0.
 * Forward time = up to the loss; backward time = the rest (optimizer
 * included). The first warmup_steps steps are excluded from timing stats.
 * method=deq with pretrain_steps P > 0: steps 1..P use an unroll method
 * pretrain_layers deep (created in setup beside the deq method), the rest
 * and evaluation the deq method; the record's "pretrain" object holds the
 * first phase's statistics, timing/evals/solver the deq phase's, and each
 * phase's first warmup_steps steps are untimed.
 * Perplexity = exp(mean per-token loss) over whole eval batches.
 * On the CPU with threads=1 two runs of one config give the same record
 * apart from times.
 *
 * Implementation: runner.c (setup, context, teardown), train_step.c (one
 * step and the timed loop), step_log.c (per-step statistics), evaluate.c,
 * run_record.c (the record), pretrain.c, param_files.c (parameter and
 * gradient files); run_state.h is the state they share.
 */
#ifndef DQ_BENCH_RUNNER_H
#define DQ_BENCH_RUNNER_H

#include <jansson.h>

#include "config.h"

/* Where a run sits in a suite (suite NULL for `deqbench run`). */
struct run_meta {
	const char *suite;
	int index, combo, repeat;
	int quiet; /* no progress output */
};

/* How a run ended. The record's status is "ok", "diverged" or "error"
 * (runner_status_name); `deqbench run` exits 0 for RUN_OK and
 * RUN_DIVERGED (a blow-up is a result), 1 for RUN_ERROR and 2 (bad input,
 * no record appended) for RUN_SETUP_FAILED. */
enum run_status {
	RUN_OK = 0,
	RUN_DIVERGED = 1, /* see RUNNER_DIVERGE_FACTOR; the message says why */
	RUN_ERROR = 2,	  /* failed after setup (the record has timing) */
	/* failed before the timed loop: a corpus missing or too short for
	 * batch_size x (seq_len+1), vocab_size below the corpus's, a run
	 * that does not fit in memory; the record has no timing */
	RUN_SETUP_FAILED = 3,
	/* SIGINT or SIGTERM (interrupt.h): stopped after the current step
	 * or evaluation batch; the record has the statistics so far */
	RUN_INTERRUPTED = 4,
};

/* A run diverges (status "diverged"; it stops at that step, and `deqbench
 * run` still exits 0: a blow-up is a result) when a step's training loss is
 * not finite or exceeds RUNNER_DIVERGE_FACTOR · ln V nats, or the gradient
 * norm is not finite. ln V is the loss of a uniform prediction, about where
 * a freshly initialised model starts; ten times it is a mean probability of
 * the targets below V^-10, which no run that is learning passes through:
 * its logits have been blown up (lr=1000 with clip=0 took the loss to 3e7
 * and kept it finite, so finiteness alone never triggered). */
#define RUNNER_DIVERGE_FACTOR 10

/* Runs cfg and stores a new record in *record (always, errors included:
 * status "error" with the message). Returns the status. */
enum run_status runner_run(const struct bench_config *cfg,
			   const struct run_meta *meta, json_t **record);

struct corpus;

/* Loads cfg's corpus into *c (free with corpus_free) and the vocabulary V
 * the model gets: the corpus's, or vocab_size when given (a file corpus:
 * at least the corpus's). 0, or -1 with one line in err. */
int runner_load_corpus(struct corpus *c, const struct bench_config *cfg, int *V,
		       char *err, size_t errlen);

/* The record's status string of s: "ok", "diverged", "interrupted" or
 * "error". */
const char *runner_status_name(enum run_status s);

/* rec[key] = the UTC time now, ISO 8601 to the second
 * ("2026-11-25T18:00:00Z"). */
void runner_set_now(json_t *rec, const char *key);

/* The record's "suite" object of a suite run: {"name", "index", "combo",
 * "repeat"} from meta (meta->suite non-NULL). New reference. */
json_t *runner_meta_json(const struct run_meta *meta);

/* Backend, model, method and the state buffer z of one run; what both the
 * training loop and `deqbench grad` build. */
struct run_ctx {
	struct backend *be;
	struct model *m;
	struct method *me;
	void *z; /* (B,T,d) depth output, MEM_HEAD */
	/* method_spectral_radius at the first valid batch; NAN until then */
	double spectral_radius;
};

/* Creates the backend (cfg->device, cfg->threads; TF32 set from cfg->tf32
 * where the backend has the switch, an error where it has not and tf32 is
 * on), the model (vocabulary V) and the method, whose random draws
 * (method_seed) are seeded with cfg's `seed`. -1 with one line on error
 * (nothing left allocated). */
int runner_ctx_create(struct run_ctx *rc, const struct bench_config *cfg, int V,
		      char *err, size_t errlen);
void runner_ctx_destroy(struct run_ctx *rc);

/* One forward + backward on host tokens (B, T+1) int32: zeroes the grads,
 * then leaves dL/dθ in m->grad_buf. Returns the loss (nats) in *loss; -1
 * with err for bad token ids. The same path every training step takes. */
int runner_grad_step(struct run_ctx *rc, const int32_t *tokens_host,
		     double *loss, char *err, size_t errlen);

/* Writes the model's parameters to path as float32 safetensors named as
 * the model's parameters (params init's layout), with metadata "config"
 * (every key of cfg as the record's "config", vocab_size and seq_len as the
 * model has them; compact JSON, sorted keys), "method" (the resolved
 * method config, as the record's "method"), "format" and "writer";
 * atomically (a temporary file next to path, then rename). -1 with one
 * line. */
int runner_save_params(struct run_ctx *rc, const struct bench_config *cfg,
		       const char *path, char *err, size_t errlen);

/* deqbench eval: loads cfg->params into cfg's model and method (created
 * for inference only: method_config.inference), evaluates the valid and
 * test splits as a training run's evaluation does (evaluate.h) and stores
 * a record with "kind": "eval" in *record (results/SCHEMA.md): quality,
 * inference (timing, solver statistics, the allocator's peaks), method,
 * model, data. Returns the status; RUN_SETUP_FAILED for a missing or
 * mismatched parameter file or corpus (bad input). */
enum run_status runner_eval(const struct bench_config *cfg,
			    const struct run_meta *meta, json_t **record);

/* The "config" metadata of the safetensors file at path (the whole config
 * of the run that wrote it: save_params=, params init), or NULL when the
 * file cannot be read or has none (runner_load_params then says why). New
 * reference. */
json_t *runner_params_config(const char *path);

/* Loads float32 parameters from a safetensors file into the model: every
 * parameter must be present with the model's shape (1-D to 3-D), and the
 * file's "config" metadata, when present, must name the same model kind
 * (and n_heads for the transformer), and every value must be finite. -1
 * with one line naming the file and the tensor or key. */
int runner_load_params(struct run_ctx *rc, const char *path, char *err,
		       size_t errlen);

/* runner_load_params's checks of cfg->params for cfg's model with
 * vocabulary V, without a backend (model_shape): what `deqbench eval`
 * refuses at setup, for a suite's up-front checks of its eval runs. Reads
 * the whole file. 0, or -1 with the same one line. */
int runner_check_params(const struct bench_config *cfg, int V, char *err,
			size_t errlen);

/* Vocabulary size the run will use: for corpus=synthetic vocab_size, or 256
 * when 0; for a file corpus the corpus's (loads it, building its cache),
 * or vocab_size when that is at least the corpus's (smaller: -1 with one
 * line). -1 with the corpus's message when it is missing. */
int runner_resolve_vocab(const struct bench_config *cfg, int *V, char *err,
			 size_t errlen);

/* The memory check of a training run (memfit.h) where its vocabulary is
 * known without loading the corpus (corpus=synthetic, or vocab_size set):
 * cheap, so `run` makes it before touching out= and runner_run before
 * building a synthetic corpus of 2^26 words. 0, or -1 with one line. The
 * full check (the backend's element size, a GPU's memory, the corpus's
 * vocabulary) comes again when the run creates its backend. */
int runner_precheck(const struct bench_config *cfg, char *err, size_t errlen);

/* `deqbench params init`: writes the seeded initial parameters of cfg's
 * model to float32 safetensors, docs/ARCHITECTURE.md §Model names (metadata
 * "config" holds the model keys), via PATH.tmp and rename. */
int runner_params_init(const struct bench_config *cfg, const char *out_path,
		       char *err, size_t errlen);

/* `deqbench grad`: loads parameters (float32, names and shapes as the model
 * of cfg) and tokens ("tokens", int32 [B, T+1]; B and T are taken from it),
 * computes loss and gradients with cfg's method, writes "loss" (float32 [1])
 * and "grad.<name>" for every parameter. For each solve the method made
 * (deq: forward; backward with b_mode=ift) the metadata gets "fwd_" /
 * "bwd_" + "iters", "residual" (in the stop mode's sense), "stop_mode",
 * "tol" and "converged" ("true" / "false"), all strings. The method's
 * statistics of the step go to *stats when stats != NULL and the file was
 * written. Bad input → -1 with one line. */
int runner_grad(const struct bench_config *cfg, const char *params_path,
		const char *tokens_path, const char *out_path,
		struct method_stats *stats, char *err, size_t errlen);

#endif
