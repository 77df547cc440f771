/* param_files.h — parameter and gradient files of a run context
 * (run_ctx.h): float32 safetensors (safetensors.h) named as the model's
 * parameters (docs/ARCHITECTURE.md §Model), written atomically. Loading
 * and saving for a run (runner.c) and for impl=pytorch (peer.c), the
 * checks of a suite's eval runs (cmd_suite.c), and the commands `deqbench
 * params init` and `deqbench grad` (main.c).
 */
#ifndef DQ_BENCH_PARAM_FILES_H
#define DQ_BENCH_PARAM_FILES_H

#include <jansson.h>
#include <stddef.h>

#include "../config/config.h"
#include "run_ctx.h"

struct method_stats;

/* What `deqbench eval` takes from a parameter file's metadata. */
struct params_meta {
	/* "config": the whole config of the run that wrote it (save_params=;
	 * params init: the model keys); new reference, NULL when the file
	 * has none (a file from elsewhere) */
	json_t *config;
	/* 1 when the file holds "vocab_fingerprint" (save_params= since the
	 * fingerprint was stored: params_load checks it with vocab_check) */
	int has_vocab;
};

/* Reads the safetensors file at path whole (st_read: a truncated, empty or
 * corrupt file is refused) and its metadata into *pm. A "config" that is
 * not JSON, holds a key twice or is not an object is an error naming the
 * file. 0, or -1 with one line (pm->config NULL). */
int params_meta_read(const char *path, struct params_meta *pm, char *err,
		     size_t errlen);

/* Loads float32 parameters from a safetensors file into the model: every
 * parameter must be present with the model's shape (1-D to 3-D), and the
 * file's "config" metadata, when present, must name the same model kind
 * (and n_heads for the transformer), and every value must be finite. With
 * rc->vocab_check and rc->corpus, a file whose "vocab_fingerprint" differs
 * from the corpus's vocabulary is refused too (a file without one passes).
 * -1 with one line naming the file and the tensor or key. */
int params_load(struct run_ctx *rc, const char *path, char *err, size_t errlen);

/* params_load's checks of cfg->params for cfg's model with vocabulary V,
 * without a backend (model_shape): what `deqbench eval` refuses at setup,
 * for a suite's up-front checks of its eval runs. Reads the whole file. 0,
 * or -1 with the same one line. */
int params_check(const struct bench_config *cfg, int V, char *err,
		 size_t errlen);

/* Writes the model's parameters to path as float32 safetensors named as
 * the model's parameters (params init's layout), with metadata "config"
 * (every key of cfg as the record's "config", vocab_size and seq_len as the
 * model has them; compact JSON, sorted keys), "method" (the resolved
 * method config, as the record's "method"), "vocab_fingerprint" (with
 * rc->corpus: 16 hex digits of FNV-1a over its words in id order, NUL
 * after each), "format" and "writer";
 * atomically (a temporary file next to path, then rename). -1 with one
 * line. */
int params_save(struct run_ctx *rc, const struct bench_config *cfg,
		const char *path, char *err, size_t errlen);

/* params_check_out — a parameter or gradient file output (save_params=,
 * out= of params init and grad) named WHAT ("save_params=") at PATH,
 * checked before the work (fileio_check_replace): an existing file is
 * replaced only when it is a safetensors file, and the rename into place
 * must be able to succeed. 0, or -1 with "WHATPATH...: reason; fix". */
int params_check_out(const char *what, const char *path, char *err,
		     size_t errlen);

/* params_save_or_rescue — params_save to path; when that fails (after a
 * run's training: the up-front check cannot foresee everything), the
 * parameters go to a rescue file (fileio_rescue_new, ".safetensors") as an
 * unsaved record goes to the rescue file. 0 when saved to path; -1 with
 * "save_params: reason: PATH; the trained parameters are in RESCUE ..."
 * (or why the rescue failed too) in err. */
int params_save_or_rescue(struct run_ctx *rc, const struct bench_config *cfg,
			  const char *path, char *err, size_t errlen);

/* `deqbench params init`: writes the seeded initial parameters of cfg's
 * model to float32 safetensors, docs/ARCHITECTURE.md §Model names (metadata
 * "config" holds the model keys), via PATH.tmp and rename. */
int params_init(const struct bench_config *cfg, const char *out_path, char *err,
		size_t errlen);

/* `deqbench grad`: loads parameters (float32, names and shapes as the model
 * of cfg) and tokens ("tokens", int32 [B, T+1]; B and T are taken from it),
 * computes loss and gradients with cfg's method, writes "loss" (float32 [1])
 * and "grad.<name>" for every parameter. For each solve the method made
 * (deq: forward; backward with b_mode=ift) the metadata gets "fwd_" /
 * "bwd_" + "iters", "residual" (in the stop mode's sense), "stop_mode",
 * "tol" and "converged" ("true" / "false"), all strings. The method's
 * statistics of the step go to *stats when stats != NULL and the file was
 * written. Bad input → -1 with one line. */
int params_grad(const struct bench_config *cfg, const char *params_path,
		const char *tokens_path, const char *out_path,
		struct method_stats *stats, char *err, size_t errlen);

#endif
