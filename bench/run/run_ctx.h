/* run_ctx.h — the context a run is built on, below everything that runs
 * one: where a run sits in a suite (struct run_meta) and how it ended (enum
 * run_status), cfg's corpus and the vocabulary the model gets, the memory
 * check before a run, and the backend, model, method and state buffer of
 * one run (struct run_ctx). Used by the training run and deqbench eval
 * (runner.h), parameter and gradient files (param_files.h), impl=pytorch
 * runs (peer.h) and the commands' up-front checks (cmd_suite.c, cmd_plan.c,
 * main.c). docs/ARCHITECTURE.md §Data flow.
 */
#ifndef DQ_BENCH_RUN_CTX_H
#define DQ_BENCH_RUN_CTX_H

#include <stddef.h>

#include "../config/config.h"

/* Where a run sits in a suite (suite NULL for `deqbench run`). */
struct run_meta {
	const char *suite;
	int index, combo, repeat; /* index: position in the run order */
	int quiet;		  /* no progress output */
	const char *order;	  /* the suite's order (suite_order_name);
				     NULL: not a suite's (plan --run) */
	long long order_seed;	  /* a random order's seed; -1: none */
	int shard_i, shard_n;	  /* --shard I/N (0/1 without) */
	int lanes; /* suite --lanes N: N lanes side by side; 0: not said */
};

/* How a run ended. The record's status is "ok", "diverged" or "error"
 * (run_record_status_name); `deqbench run` exits 0 for RUN_OK and
 * RUN_DIVERGED (a blow-up is a result), 1 for RUN_ERROR and 2 (bad input,
 * no record appended) for RUN_SETUP_FAILED. */
enum run_status {
	RUN_OK = 0,
	RUN_DIVERGED = 1, /* see RUN_DIVERGE_FACTOR; the message says why */
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
 * not finite or exceeds RUN_DIVERGE_FACTOR · ln V nats, or the gradient
 * norm is not finite (train_step.c). ln V is the loss of a uniform
 * prediction, about where a freshly initialised model starts; ten times it
 * is a mean probability of the targets below V^-10, which no run that is
 * learning passes through: its logits have been blown up (lr=1000 with
 * clip=0 took the loss to 3e7 and kept it finite, so finiteness alone
 * never triggered). */
#define RUN_DIVERGE_FACTOR 10

struct corpus;

/* Loads cfg's corpus into *c (free with corpus_free) and the vocabulary V
 * the model gets: the corpus's, or vocab_size when given (a file corpus:
 * at least the corpus's). 0, or -1 with one line in err. */
int run_ctx_load_corpus(struct corpus *c, const struct bench_config *cfg,
			int *V, char *err, size_t errlen);

/* Vocabulary size the run will use: for corpus=synthetic vocab_size, or 256
 * when 0; for a file corpus the corpus's (loads it, building its cache),
 * or vocab_size when that is at least the corpus's (smaller: -1 with one
 * line). -1 with the corpus's message when it is missing. */
int run_ctx_resolve_vocab(const struct bench_config *cfg, int *V, char *err,
			  size_t errlen);

/* The memory check of a training run (memfit.h) where its vocabulary is
 * known without loading the corpus (corpus=synthetic, or vocab_size set):
 * cheap, so `run` makes it before touching out= and runner_run before
 * building a synthetic corpus of 2^26 words. 0, or -1 with one line. The
 * full check (the backend's element size, a GPU's memory, the corpus's
 * vocabulary) comes again when the run creates its backend. */
int run_ctx_precheck(const struct bench_config *cfg, char *err, size_t errlen);

/* The runner's passes of one step or evaluation batch, for the record's
 * work (docs/methods.md §Work): head forwards (loss included), head
 * backwards and optimizer steps (global-norm clipping and Adam over every
 * parameter). Zeroed by each step's or batch's forward (train_step.h),
 * counted where train_step.c calls them. */
struct run_counts {
	long head_fwd, head_bwd, optimizer_step;
};

/* Backend, model, method and the state buffer z of one run; what both the
 * training loop and `deqbench grad` build. */
struct run_ctx {
	struct backend *be;
	struct model *m;
	struct method *me;
	void *z; /* (B,T,d) depth output, MEM_HEAD */
	/* method_spectral_radius at the first valid batch; NAN until then */
	double spectral_radius;
	/* the run's corpus (borrowed; the runner sets it, NULL elsewhere):
	 * params_save stores its vocabulary's fingerprint, and with
	 * vocab_check (eval) params_load refuses a file trained on another
	 * vocabulary (param_files.h) */
	const struct corpus *corpus;
	int vocab_check;
	struct run_counts cnt; /* this step's or batch's */
	/* micro-batches a step or evaluation batch (cfg microbatches, >= 1):
	 * the model is built at B / micro rows and a host batch of B rows
	 * runs as micro slices (train_step.h); micro_st gathers the method's
	 * statistics of the slices so far (train_step.c) */
	int micro;
	struct method_stats micro_st;
};

/* Creates the backend (cfg->device, cfg->threads; TF32 set from cfg->tf32
 * where the backend has the switch, an error where it has not and tf32 is
 * on), the model (vocabulary V, batch config_micro_batch(cfg): one
 * micro-batch) and the method, whose random draws
 * (method_seed) are seeded with cfg's `seed`, after a memory check
 * (memfit.h) of a run that does not train. -1 with one line on error
 * (nothing left allocated). */
int run_ctx_create(struct run_ctx *rc, const struct bench_config *cfg, int V,
		   char *err, size_t errlen);

/* As run_ctx_create; with train the run will train, and the memory check
 * counts the optimizer state and the step log. */
int run_ctx_create_for_run(struct run_ctx *rc, const struct bench_config *cfg,
			   int V, int train, char *err, size_t errlen);

/* Frees what run_ctx_create made (z with the backend) and zeroes *rc; safe
 * on a zeroed context. */
void run_ctx_destroy(struct run_ctx *rc);

/* Before the first timed step of a CPU run or evaluation, once a process:
 * a warning on stderr when OpenBLAS runs generic kernels on a CPU that
 * allows faster ones, which makes every time of the run several times
 * slower than the machine's (kernels/blas_info.h; the record's host.blas
 * says the same). After setup, so that bad input keeps its one line. */
void run_ctx_warn_blas(enum config_device device);

#endif
