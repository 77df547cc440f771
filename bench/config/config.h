/* config.h — the flat run configuration of deqbench (docs/ARCHITECTURE.md
 * §Config and records). Every key is one field here; the same names appear
 * on the command line (key=value), in config files (a flat JSON object) and
 * in each record's "config" object.
 *
 * Errors are one line, name the source (file or "command line"), the key and
 * the value, and say how to fix it; the CLI turns them into exit status 2.
 */
#ifndef DQ_BENCH_CONFIG_H
#define DQ_BENCH_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "../../methods/method.h"
#include "../../models/model.h"
#include "../data/data.h"

#define CONFIG_STR  256
#define CONFIG_PATH 1024

/* The `device` key's values: the names backend_create (kernels/backend.h)
 * takes; cuda only where the build has the CUDA backend (config_validate
 * says so). */
enum config_device { DEVICE_CPU, DEVICE_CPU64, DEVICE_CUDA };
/* The `impl` key's values: this C core, or the PyTorch peer (peer.h). */
enum config_impl { IMPL_DEQBENCH, IMPL_PYTORCH };

/* The parse/name pairs of the enum keys corpus (data.h corpus_kind_parse,
 * corpus_kind_name), device and impl: the index of s, -1 when unknown; the
 * name of k, "?" out of range. */
int config_device_parse(const char *s);
const char *config_device_name(int k);
int config_impl_parse(const char *s);
const char *config_impl_name(int k);

struct bench_config {
	/* model: kind, d_model, n_heads, d_ff, seq_len, batch_size,
	 * vocab_size (0 = from the corpus; synthetic uses 256), seed */
	struct model_config model;
	/* method, layers, k and the deq solver keys */
	struct method_config method;

	enum corpus_kind corpus;    /* brown, wikitext103, ..., synthetic */
	char data_dir[CONFIG_PATH]; /* where corpora live */

	int steps; /* optimizer steps */
	/* micro-batches a step: gradients of microbatches slices of
	 * batch_size / microbatches rows accumulated, one optimizer step;
	 * the model is built at the micro-batch (config_micro_batch) */
	int microbatches;
	int warmup_steps; /* first steps excluded from timing statistics */
	double lr;	  /* peak learning rate (Adam) */
	int lr_warmup;	  /* linear warmup steps, then cosine decay to 0 */
	double clip;	  /* global grad-norm clip; 0 = off */
	long eval_tokens; /* per split (valid, test); 0 = skip evaluation */
	int eval_warmup;  /* first valid batches left out of inference timing */
	int eval_every;	  /* valid evaluation every N training steps into
			     quality.valid_curve (untimed); 0 = off */
	long curve_tokens; /* valid tokens each eval_every evaluation averages
			      over; 0 = eval_tokens */
	char params[CONFIG_PATH];      /* start from (run) or evaluate (eval)
					  these parameters; "" = init */
	char save_params[CONFIG_PATH]; /* trained parameters written here;
					  "" = not saved */

	/* method=deq only: the first pretrain_steps steps train the block
	 * unrolled pretrain_layers deep (0 = off), then the solver */
	int pretrain_steps, pretrain_layers;

	enum config_device device; /* cpu, cpu64, cuda */
	int threads;		   /* 0 = library default */
	int tf32;    /* the key tf32, an alias of precision=tf32 read only while
		   * parsing and checking (config_finish resolves it into
		   * model.precision, which everything else reads; the record's
		   * config mirrors it) */
	int compile; /* impl=pytorch: torch.compile (bench/pytorch) */
	int device_mem_cap_mib; /* cuda: GPU memory the run may use; 0 = all */
	int cuda_graphs;	/* cuda: graphs and device-side solve loops */
	enum config_impl impl;	/* deqbench, or pytorch (bench/pytorch,
				      run by peer.c) */

	char out[CONFIG_PATH]; /* JSONL file records are appended to */
	int trace;	       /* per-step traces in the record */
};

/* Fills every key with its default (see `deqbench run --help`). */
void config_defaults(struct bench_config *c);

/* Sets one key from its textual value ("layers", "12"). Returns 0, or -1
 * with a one-line message in err naming the key and value (unknown key with
 * the closest known name, wrong type, value out of range, unknown choice). */
int config_set(struct bench_config *c, const char *key, const char *value,
	       char *err, size_t errlen);
/* Sets the field of key row d (methods/keys.h) in the struct at base from
 * its textual value, with config_set's rules and messages: how a command
 * with keys of its own (bench-block) parses them. 0, or -1 with one line
 * in err. */
int config_set_row(const struct key_desc *d, void *base, const char *value,
		   char *err, size_t errlen);
/* Same for a JSON value (number, string or boolean). */
int config_set_json(struct bench_config *c, const char *key,
		    const json_t *value, char *err, size_t errlen);
/* Parses "key=value". */
int config_set_arg(struct bench_config *c, const char *arg, char *err,
		   size_t errlen);
/* Applies every member of a flat JSON object; `source` (a file name) starts
 * each message. */
int config_apply_object(struct bench_config *c, const json_t *obj,
			const char *source, char *err, size_t errlen);
/* Reads the JSON file at path (a config, suite, ...: `what` names it in
 * the message). NULL with a one-line message naming the file: a directory
 * or a file that is not regular (a FIFO is refused, never waited on), the
 * line and column for malformed JSON or for a key given twice in one
 * object (JSON_REJECT_DUPLICATES); the caller json_decref()s the
 * result. */
json_t *config_json_load(const char *path, const char *what, char *err,
			 size_t errlen);

/* Refuses a key given twice among n "key=value" arguments (the command
 * line's keys are not last-wins): -1 with one line naming the key and both
 * arguments. Arguments without '=' are skipped. */
int config_args_unique(int n, char *const *args, char *err, size_t errlen);

/* Loads a flat JSON config file over c. Messages include jansson's
 * line:column for malformed files. */
int config_load_file(struct bench_config *c, const char *path, char *err,
		     size_t errlen);

/* Cross-key checks (d_model % n_heads, warmup_steps < steps, pretrain_steps
 * < steps and only with method=deq, method ranges, device compiled in). 0 or
 * -1 with one line. */
int config_validate(const struct bench_config *c, char *err, size_t errlen);
/* config_validate but for the last check, whether this build has the
 * device: what any config a run accepted satisfies, whichever build reads
 * its record (`deqbench validate`). 0 or -1 with one line. */
int config_validate_keys(const struct bench_config *c, char *err,
			 size_t errlen);

/* Keys of another method than c's (checkpoint's k, revolve's slots, the deq
 * keys) that differ from their defaults have no effect on the run: -1 with
 * "f_tol=0.01 has no effect with method=unroll: it is a key of method=deq;
 * drop it, or use method=deq" in err (`run` and `eval` refuse them; a suite
 * may set them in its base for the runs that use them). 0 otherwise. */
int config_check_method_keys(const struct bench_config *c, char *err,
			     size_t errlen);

/* config_to_json without the keys of other methods than c's: what the run
 * actually uses, so two runs that differ only in keys of a method neither
 * runs compare equal (suite expansion refuses such duplicates). New
 * reference. */
json_t *config_effective_json(const struct bench_config *c);

/* The last step of making a config, once: config_validate, then the
 * method's derived values (method_config_resolve: k = 0 → round(√L),
 * histories 0 → caps), so that every layer and the record read one
 * resolved config. 0, or -1 with config_validate's line (c unresolved). */
int config_finish(struct bench_config *c, char *err, size_t errlen);

/* Every key with its typed value, in table order (new reference). */
json_t *config_to_json(const struct bench_config *c);
/* The method keys of m (method, layers and every registered method's own
 * keys, in table order) with their values, given the resolved config (k
 * and histories filled in): a parameter file's "method" metadata. New
 * reference. */
json_t *config_method_json(const struct method_config *m);
/* The record's "method" object: config_method_json and `label`, the
 * method's method_label (methods/method.h). New reference. */
json_t *config_method_record_json(const struct method_config *m);
/* One key's canonical JSON value (new reference), NULL when unknown. */
json_t *config_key_json(const struct bench_config *c, const char *key);
/* 1 when `key` is a config key. */
int config_key_known(const char *key);
/* 1 for keys that choose or tune the method (method, k, solver keys,
 * pretrain_steps, pretrain_layers): the keys that differ between the rows
 * of one summary group. */
int config_key_is_method(const char *key);
/* 1 for keys that say where inputs and results go, not what is measured
 * (out, trace, save_params, data_dir): runs that differ only in them are
 * the same configuration (`deqbench report`, `suite --resume` and plots/
 * and suite expansion group them together), but for data_dir where the
 * corpus is read from it (every corpus but synthetic:
 * record_run_identity). */
int config_key_is_output(const char *key);

/* Name of key i in table order (--help's), NULL past the last key. */
const char *config_key_name(size_t i);

/* What config_check_json found wrong (0: nothing). */
enum config_check {
	CONFIG_CHECK_UNKNOWN = 1, /* not a config key */
	CONFIG_CHECK_TYPE,	  /* not the JSON type records give it */
	CONFIG_CHECK_RANGE,	  /* a number outside the key's range */
	CONFIG_CHECK_CHOICE,	  /* a string outside the key's values */
};
/* config_check_json — checks v as a record's value of config key `key`
 * (`config` and `method` objects, results/SCHEMA.md): the JSON type records
 * write for it (an integer for integer keys, any number for reals, a
 * boolean, a string for enums and strings), its range, and for an enum key
 * (model, method, corpus, device, ...) one of its values.
 * Returns 0 when it is fine, else an enum config_check with what was
 * expected in `expected` (n bytes): "int", "int in [1, 100000]", "one of
 * unroll, checkpoint, deq, revolve". */
int config_check_json(const char *key, const json_t *v, char *expected,
		      size_t n);

/* Prints the key table (key, group, default, allowed values, meaning). */ /* Prints the key table (key, group, default, allowed values, meaning). */
void config_print_help(FILE *f);
/* The key table as JSON for tools (`deqbench run --help-json`, read by
 * plots/records.py): an array of {name, group, type, default, allowed,
 * help, method, output} objects, plus min, max, min_open for numbers and
 * choices for enums, in table order. */
void config_print_json(FILE *f);
/* The same table in markdown, as docs/configuration.md carries it (`deqbench run
 * --help-markdown`; tests/test_config.c checks docs/configuration.md against it). */
void config_print_markdown(FILE *f);

/* Closest known key name to s (edit distance), for "did you mean"; NULL
 * when no key is within one edit per three letters of the longer name. */
const char *config_closest_key(const char *s);
/* "; did you mean 'KEY'?" for the closest key, or "" when none is close. */
void config_suggest(const char *s, char *buf, size_t n);

/* Rows of one micro-batch, batch_size / microbatches: the batch B the
 * model is built with (run_ctx.h, memfit.h). */
static inline int config_micro_batch(const struct bench_config *c)
{
	return c->microbatches > 1 ? c->model.batch_size / c->microbatches
				   : c->model.batch_size;
}

/* Effective vocabulary for synthetic corpora when vocab_size is 0. */
#define CONFIG_SYNTHETIC_VOCAB 256

#endif
