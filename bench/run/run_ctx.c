/* run_ctx.c — see run_ctx.h: cfg's corpus and vocabulary, the memory
 * check before a run, and the run context's creation and teardown. */
#include "run_ctx.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../kernels/blas_info.h"
#include "../../methods/method.h"
#include "../../models/model.h"
#include "../data/data.h"
#include "memfit.h"

static int is_synthetic(const struct bench_config *cfg)
{
	return cfg->corpus == CORPUS_SYNTHETIC;
}

/* ---- data ---- */

/* The vocabulary the model gets: the corpus's, or vocab_size when given
 * (synthetic: the number of distinct tokens generated; a file corpus: at
 * least the corpus's, extra rows are never seen). */
int run_ctx_load_corpus(struct corpus *c, const struct bench_config *cfg,
			int *V, char *err, size_t errlen)
{
	int want = cfg->model.vocab_size;
	if (corpus_load(c, corpus_kind_name(cfg->corpus), cfg->data_dir,
			is_synthetic(cfg) ? want : 0, cfg->model.seed, err,
			errlen) != 0)
		return -1;
	*V = c->vocab_size;
	if (want > 0 && !is_synthetic(cfg)) {
		if (want < c->vocab_size) {
			snprintf(
			    err, errlen,
			    "vocab_size=%d is smaller than the %d words of "
			    "corpus=%s; use vocab_size=0 (the corpus's) "
			    "or at least %d",
			    want, c->vocab_size, corpus_kind_name(cfg->corpus),
			    c->vocab_size);
			corpus_free(c);
			return -1;
		}
		*V = want;
	}
	return 0;
}

int run_ctx_resolve_vocab(const struct bench_config *cfg, int *V, char *err,
			  size_t errlen)
{
	struct corpus c;
	if (is_synthetic(cfg)) {
		*V = cfg->model.vocab_size > 0 ? cfg->model.vocab_size
					       : CONFIG_SYNTHETIC_VOCAB;
		return 0;
	}
	if (run_ctx_load_corpus(&c, cfg, V, err, errlen) != 0)
		return -1;
	corpus_free(&c);
	return 0;
}

int run_ctx_precheck(const struct bench_config *cfg, char *err, size_t errlen)
{
	int V = cfg->model.vocab_size ? cfg->model.vocab_size
				      : CONFIG_SYNTHETIC_VOCAB;
	if (!is_synthetic(cfg) && cfg->model.vocab_size == 0)
		return 0; /* V comes from the corpus: run_ctx_create checks */
	return memfit_check(cfg, V, NULL, 1, err, errlen);
}

/* ---- context ---- */

/* bf16 GEMMs (cublasGemmEx on CUDA_R_16BF) need compute capability 8.0
 * (Ampere) or later; the cpu backends emulate them. */
static int bf16_check(const struct bench_config *cfg, struct backend *be,
		      char *err, size_t errlen)
{
	struct backend_info in;
	const struct backend_caps *k = backend_caps(be_name(be));
	if (cfg->model.precision != DQ_PREC_BF16 || !k || !k->bf16_min_major)
		return 0;
	be_info(be, &in);
	if (in.compute_major >= k->bf16_min_major)
		return 0;
	snprintf(err, errlen,
		 "precision=bf16 needs a GPU of compute capability %d.0 or "
		 "later (%s is %d.%d); use precision=fp32",
		 k->bf16_min_major, in.name, in.compute_major,
		 in.compute_minor);
	return -1;
}

void run_ctx_warn_blas(enum config_device device)
{
	static int warned;
	struct blas_info b;
	char line[256];
	if (warned || device == DEVICE_CUDA)
		return;
	warned = 1;
	blas_info_query(&b);
	if (blas_info_warning(&b, line, sizeof(line)))
		fprintf(stderr, "deqbench: %s\n", line);
}

int run_ctx_create_for_run(struct run_ctx *rc, const struct bench_config *cfg,
			   int V, int train, char *err, size_t errlen)
{
	struct model_config mc = cfg->model;

	memset(rc, 0, sizeof(*rc));
	mc.vocab_size = V;
	mc.batch_size = config_micro_batch(cfg);
	rc->micro = cfg->microbatches > 1 ? cfg->microbatches : 1;
	if (backend_create(&rc->be, config_device_name(cfg->device),
			   cfg->threads, err, errlen))
		return -1;
	if (cfg->device_mem_cap_mib > 0 &&
	    be_cap_device(rc->be, (size_t)cfg->device_mem_cap_mib << 20, err,
			  errlen) != 0)
		goto fail;
	/* before allocating: a run that cannot fit is bad input, not a
	 * process the kernel kills halfway through its setup */
	if (memfit_check(cfg, V, rc->be, train, err, errlen) != 0)
		goto fail;
	if (be_has_device(rc->be))
		be_set_tf32(rc->be, cfg->model.precision == DQ_PREC_TF32);
	else if (cfg->model.precision == DQ_PREC_TF32) {
		/* config_validate catches this for cpu/cpu64; kept for a
		 * backend that lacks the switch */
		snprintf(err, errlen,
			 "precision=tf32: backend %s has no TF32 mode; use "
			 "precision=fp32 or bf16, or device=cuda",
			 be_name(rc->be));
		goto fail;
	}
	if (bf16_check(cfg, rc->be, err, errlen) != 0)
		goto fail;
	if (model_create(&rc->m, rc->be, &mc, err, errlen))
		goto fail;
	if (method_create(&rc->me, rc->m, &cfg->method, err, errlen))
		goto fail;
	method_seed(rc->me, cfg->model.seed);
	rc->spectral_radius = NAN;
	rc->z = backend_alloc(rc->be, rc->m->n_state, MEM_HEAD);
	if (!rc->z) {
		snprintf(err, errlen,
			 "out of device memory for z (%zu elements); lower "
			 "batch_size, seq_len or d_model",
			 rc->m->n_state);
		goto fail;
	}
	return 0;
fail:
	run_ctx_destroy(rc);
	return -1;
}

int run_ctx_create(struct run_ctx *rc, const struct bench_config *cfg, int V,
		   char *err, size_t errlen)
{
	return run_ctx_create_for_run(rc, cfg, V, 0, err, errlen);
}

void run_ctx_destroy(struct run_ctx *rc)
{
	if (rc->me)
		method_destroy(rc->me);
	if (rc->m)
		model_destroy(rc->m);
	if (rc->be)
		backend_destroy(rc->be); /* frees z */
	memset(rc, 0, sizeof(*rc));
}
