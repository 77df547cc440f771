/* param_files.c — see param_files.h: parameter and gradient files of a
 * run context (run_ctx.h): params_load and params_save, and the commands
 * `deqbench params init` (params_init) and `deqbench grad` (params_grad).
 * Files are float32 safetensors (safetensors.h) named as the model's
 * parameters (docs/ARCHITECTURE.md §Model), written atomically. */
#include "param_files.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../methods/method.h"
#include "../../models/model.h"
#include "dq_build.h"
#include "../data/data.h"
#include "../io/fileio.h"
#include "../io/safetensors.h"
#include "step_pass.h"

/* The model keys that change what the parameters mean without changing
 * their shapes, checked against the file's "config" metadata when it has
 * them (files written by params init, save_params); n_heads only for the
 * transformer, the one block that reads it. */
static const char *const meaning_keys[] = {"model", "n_heads", NULL};

/* Key `key` of meaning_keys as the model has it (new reference); JSON null
 * when the model does not read it. */
static json_t *model_key_json(const struct model *m, const char *key)
{
	if (!strcmp(key, "model"))
		return json_string(model_kind_name(m->cfg.kind));
	return m->cfg.kind == MODEL_TRANSFORMER ? json_integer(m->cfg.n_heads)
						: json_null();
}

/* A JSON string's text or a number's JSON, malloc'd (NULL when out of
 * memory). */
static char *value_text(const json_t *v)
{
	return json_is_string(v) ? strdup(json_string_value(v))
				 : json_dumps(v, JSON_ENCODE_ANY);
}

/* The line of check_meaning for key, whose value in the file's metadata
 * (have) differs from the model's (want): a value of another JSON type
 * (n_heads 2.0 where the integer 2 is expected) is not a key= value to
 * advise, so the file is called malformed. */
static void meaning_error(const char *path, const char *key, const json_t *have,
			  const json_t *want, char *err, size_t errlen)
{
	char *h = value_text(have), *w = value_text(want);
	if (json_typeof(have) != json_typeof(want))
		snprintf(err, errlen,
			 "%s: metadata \"config\" holds %s=%s where %s is "
			 "expected (configured %s=%s); write the file again "
			 "with deqbench params init or save_params=",
			 path, key, h ? h : "?",
			 json_is_integer(want) ? "an integer" : "a string", key,
			 w ? w : "?");
	else
		snprintf(err, errlen,
			 "%s: written for %s=%s, configured %s=%s; use %s=%s "
			 "or the matching parameter file",
			 path, key, h ? h : "?", key, w ? w : "?", key,
			 h ? h : "?");
	free(h);
	free(w);
}

/* 0 when the file's "config" metadata (if any) agrees with the model on
 * meaning_keys; else -1 with one line naming the key and both values, or
 * saying the metadata is not a JSON object (a file whose keys cannot be
 * checked is not loaded: params_meta's rule). */
static int check_meaning(const struct st_file *f, const struct model *m,
			 const char *path, char *err, size_t errlen)
{
	const char *s = st_metadata(f, "config");
	json_error_t je;
	json_t *fc = s ? json_loads(s, JSON_REJECT_DUPLICATES, &je) : NULL;
	int rv = 0;
	if (s && !json_is_object(fc)) {
		snprintf(err, errlen,
			 "%.400s: metadata \"config\" is not JSON (%.100s); "
			 "write the file again with save_params= or deqbench "
			 "params init",
			 path, fc ? "not an object of config keys" : je.text);
		json_decref(fc);
		return -1;
	}
	for (int i = 0; fc && meaning_keys[i] && rv == 0; i++) {
		json_t *have = json_object_get(fc, meaning_keys[i]);
		json_t *want = model_key_json(m, meaning_keys[i]);
		if (have && !json_is_null(want) && !json_equal(have, want)) {
			meaning_error(path, meaning_keys[i], have, want, err,
				      errlen);
			rv = -1;
		}
		json_decref(want);
	}
	json_decref(fc);
	return rv;
}

/* The fingerprint of corpus c's vocabulary, its word -> id map: FNV-1a (64
 * bits) over the words in id order, each with its terminating NUL, as 16
 * hex digits into out[17]. Equal fingerprints: every id stands for the
 * same word (but for a 2^-64 chance). */
static void vocab_fingerprint(const struct corpus *c, char out[17])
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (int i = 0; i < c->vocab_size; i++) {
		const unsigned char *w = (const unsigned char *)c->vocab[i];
		do
			h = (h ^ *w) * 0x100000001b3ull;
		while (*w++);
	}
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

/* 0 when the file's "vocab_fingerprint" metadata (save_params) is absent
 * (an older file, params init) or matches corpus c's vocabulary; else -1
 * with one line naming both and the file's data_dir: the file's word ids
 * would stand for other words. */
static int check_vocab(const struct st_file *f, const struct corpus *c,
		       const char *path, char *err, size_t errlen)
{
	const char *have = st_metadata(f, "vocab_fingerprint");
	const char *s = st_metadata(f, "config");
	json_t *fc;
	const char *dir;
	char want[17];
	if (!have)
		return 0;
	vocab_fingerprint(c, want);
	if (!strcmp(have, want))
		return 0;
	fc = s ? json_loads(s, 0, NULL) : NULL;
	dir = json_string_value(json_object_get(fc, "data_dir"));
	snprintf(err, errlen,
		 "%.300s: trained on a corpus of another vocabulary "
		 "(fingerprint %.16s; corpus=%s%s%.200s has %s): its word ids "
		 "would stand for other words; evaluate it on the corpus it "
		 "was trained on%s%.200s%s",
		 path, have, c->kind, c->source_dir[0] ? " in " : "",
		 c->source_dir, want, dir ? " (data_dir=" : "", dir ? dir : "",
		 dir ? " in its metadata)" : "");
	json_decref(fc);
	return -1;
}

/* Parameters are finite: a NaN or infinity (a diverged run's save, a
 * corrupted file) would make every loss and gradient NaN without saying
 * why, so it is refused, naming the tensor and the first bad element. */
static int check_finite(const double *x, size_t n, const char *path,
			const char *name, char *err, size_t errlen)
{
	for (size_t k = 0; k < n; k++)
		if (!isfinite(x[k])) {
			snprintf(err, errlen,
				 "%s: tensor '%s' holds %g at element %zu; "
				 "parameters must be finite (a diverged or "
				 "corrupted save?)",
				 path, name, x[k], k);
			return -1;
		}
	return 0;
}

/* The parameters of file path for model m (its parameter table; buffers
 * not needed), checked as params_load says (and against corpus vc's
 * vocabulary when vc is not NULL: check_vocab), into tmp[n_param_elems]
 * as float64. 0, or -1 with one line. */
static int read_params(const struct model *m, const char *path,
		       const struct corpus *vc, double *tmp, char *err,
		       size_t errlen)
{
	struct st_file f;
	int rv = -1;

	if (st_read(&f, path, err, errlen) != 0)
		return -1;
	if (check_meaning(&f, m, path, err, errlen) != 0 ||
	    (vc && check_vocab(&f, vc, path, err, errlen) != 0))
		goto out;
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		const struct st_tensor *t;
		char e2[512];
		t = st_get(&f, p->name, ST_F32, p->ndim, p->shape, e2,
			   sizeof(e2));
		if (!t) {
			snprintf(err, errlen,
				 "%s; the file must hold every parameter of "
				 "the configured model with its shape (make "
				 "it with deqbench params init and the same "
				 "model keys)",
				 e2);
			goto out;
		}
		for (size_t k = 0; k < p->numel; k++)
			tmp[p->offset + k] = ((const float *)t->data)[k];
		if (check_finite(tmp + p->offset, p->numel, path, p->name, err,
				 errlen) != 0)
			goto out;
	}
	rv = 0;
out:
	st_close(&f);
	return rv;
}

/* float64 room for m's parameters; NULL with err when out of memory. */
static double *params_room(const struct model *m, char *err, size_t errlen)
{
	double *tmp =
	    malloc(sizeof(double) * (m->n_param_elems ? m->n_param_elems : 1));
	if (!tmp)
		snprintf(err, errlen, "out of host memory");
	return tmp;
}

int params_meta_read(const char *path, struct params_meta *pm, char *err,
		     size_t errlen)
{
	struct st_file f;
	const char *s;
	json_error_t je;
	json_t *c = NULL;
	int rv = 0;
	memset(pm, 0, sizeof(*pm));
	if (st_read(&f, path, err, errlen) != 0)
		return -1;
	s = st_metadata(&f, "config");
	pm->has_vocab = st_metadata(&f, "vocab_fingerprint") != NULL;
	/* a key twice would be last-wins, as nowhere else in deqbench */
	if (s && !(c = json_loads(s, JSON_REJECT_DUPLICATES, &je))) {
		snprintf(err, errlen,
			 "%.400s: metadata \"config\" is not JSON (%.100s at "
			 "column %d); write the file again with save_params= "
			 "or deqbench params init",
			 path, je.text, je.column);
		rv = -1;
	} else if (c && !json_is_object(c)) {
		snprintf(err, errlen,
			 "%.400s: metadata \"config\" is not a JSON object of "
			 "config keys; write the file again with save_params= "
			 "or deqbench params init",
			 path);
		rv = -1;
	}
	st_close(&f);
	if (rv)
		json_decref(c);
	else
		pm->config = c;
	return rv;
}

int params_load(struct run_ctx *rc, const char *path, char *err, size_t errlen)
{
	struct model *m = rc->m;
	double *tmp = params_room(m, err, errlen);
	int rv = -1;

	if (tmp && read_params(m, path, rc->vocab_check ? rc->corpus : NULL,
			       tmp, err, errlen) == 0) {
		be_upload(rc->be, m->param_buf, tmp, m->n_param_elems);
		be_sync(rc->be);
		rv = 0;
	}
	free(tmp);
	return rv;
}

int params_check(const struct bench_config *cfg, int V, char *err,
		 size_t errlen)
{
	struct backend stub; /* model_shape reads only elem */
	struct model_config mc = cfg->model;
	struct model m;
	double *tmp;
	int rv = -1;

	memset(&stub, 0, sizeof(stub));
	stub.elem = sizeof(float);
	mc.vocab_size = V;
	if (model_shape(&m, &stub, &mc, err, errlen) != 0)
		return -1;
	tmp = params_room(&m, err, errlen);
	if (tmp)
		rv = read_params(&m, cfg->params, NULL, tmp, err, errlen);
	free(tmp);
	return rv;
}

/* ---- writing ---- */

/* Metadata "<pre>_iters", "<pre>_residual" (in the stop mode's sense, %.9g;
 * "nan" or "inf" when the solve ended at a non-finite one),
 * "<pre>_stop_mode", "<pre>_tol" and "<pre>_converged" ("true" or "false")
 * of one solve; safetensors metadata values are strings. -1 when out of
 * memory. */
static int solve_metadata(struct st_writer *w, const char *pre,
			  const struct solve_stats *s)
{
	static const char *const names[] = {"iters", "residual", "stop_mode",
					    "tol", "converged"};
	char k[32], v[5][40];
	snprintf(v[0], sizeof(v[0]), "%d", s->iters);
	snprintf(v[1], sizeof(v[1]), "%.9g", s->residual);
	snprintf(v[2], sizeof(v[2]), "%s", stop_mode_name(s->stop));
	snprintf(v[3], sizeof(v[3]), "%.9g", s->tol);
	snprintf(v[4], sizeof(v[4]), "%s", s->converged ? "true" : "false");
	for (int i = 0; i < 5; i++) {
		snprintf(k, sizeof(k), "%s_%s", pre, names[i]);
		if (st_writer_set_metadata(w, k, v[i]) != 0)
			return -1;
	}
	return 0;
}

/* The last step's forward ("fwd_") and backward ("bwd_") solve, for the
 * solves the method made. -1 when out of memory. */
static int solves_metadata(struct st_writer *w, const struct method *me)
{
	const struct method_stats *st = method_get_stats(me);
	if (st->has_fwd_solve && solve_metadata(w, "fwd", &st->fwd) != 0)
		return -1;
	if (st->has_bwd_solve && solve_metadata(w, "bwd", &st->bwd) != 0)
		return -1;
	return 0;
}

/* The model keys that fix the shapes, and the init's, as compact JSON with
 * sorted keys (metadata "config"), for whoever loads the file; vocab_size
 * and seq_len as the model has them. NULL when out of memory. */
static char *model_keys_json(const struct bench_config *cfg,
			     const struct model *m)
{
	static const char *const keys[] = {"model",	"d_model", "n_heads",
					   "d_ff",	"seq_len", "vocab_size",
					   "seed",	"init",	   "init_std",
					   "embed_std", NULL};
	json_t *mk = json_object();
	char *s;
	for (int i = 0; keys[i]; i++)
		json_object_set_new(mk, keys[i], config_key_json(cfg, keys[i]));
	json_object_set_new(mk, "vocab_size", json_integer(m->cfg.vocab_size));
	json_object_set_new(mk, "seq_len", json_integer(m->T));
	s = json_dumps(mk, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(mk);
	return s;
}

/* The whole config (every key, as the record's "config", with vocab_size
 * and seq_len as the model has them) as compact JSON with sorted keys
 * (metadata "config" of save_params), and the method's resolved config
 * (the record's "method") into *method. NULL when out of memory. */
static char *full_config_json(const struct bench_config *cfg,
			      const struct run_ctx *rc, char **method)
{
	json_t *c = config_to_json(cfg);
	json_t *mj = config_method_json(method_get_config(rc->me));
	char *s;
	json_object_set_new(c, "vocab_size",
			    json_integer(rc->m->cfg.vocab_size));
	json_object_set_new(c, "seq_len", json_integer(rc->m->T));
	s = json_dumps(c,
		       JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
	*method = json_dumps(mj, JSON_COMPACT | JSON_SORT_KEYS |
				     JSON_REAL_PRECISION(17));
	json_decref(c);
	json_decref(mj);
	return s;
}

/* "format", "writer" and "config" metadata (model_keys_json; with full,
 * full_config_json and "method"), and the solves with with_solves. -1 when
 * out of memory. */
static int add_metadata(struct st_writer *w, const struct run_ctx *rc,
			const struct bench_config *cfg, int with_solves,
			int full)
{
	char *meth = NULL;
	char *mks = full ? full_config_json(cfg, rc, &meth)
			 : model_keys_json(cfg, rc->m);
	int bad =
	    st_writer_set_metadata(w, "format", "pt") != 0 ||
	    st_writer_set_metadata(w, "writer", "deqbench " DQ_VERSION) != 0 ||
	    !mks || st_writer_set_metadata(w, "config", mks) != 0 ||
	    (full && (!meth || st_writer_set_metadata(w, "method", meth) != 0));
	free(mks);
	free(meth);
	if (!bad && full && rc->corpus) {
		char fp[17];
		vocab_fingerprint(rc->corpus, fp);
		bad = st_writer_set_metadata(w, "vocab_fingerprint", fp) != 0;
	}
	if (!bad && with_solves)
		bad = solves_metadata(w, rc->me) != 0;
	return bad ? -1 : 0;
}

/* Tensors: float32 [1] "loss" when loss_f != NULL, then prefix + name of
 * every parameter (shapes as the model's) from the model's buffer buf,
 * converted into f32 (n_param_elems entries). w borrows loss_f and f32. */
static int add_tensors(struct st_writer *w, const struct run_ctx *rc,
		       const void *buf, const char *prefix, const float *loss_f,
		       float *f32, char *err, size_t errlen)
{
	const struct model *m = rc->m;
	double *tmp = malloc(sizeof(double) * (m->n_param_elems + 1));
	int64_t one = 1;

	if (!tmp) {
		snprintf(err, errlen, "out of host memory");
		return -1;
	}
	be_download(rc->be, tmp, buf, m->n_param_elems);
	for (size_t k = 0; k < m->n_param_elems; k++)
		f32[k] = (float)tmp[k];
	free(tmp);
	if (loss_f &&
	    st_writer_add(w, "loss", ST_F32, 1, &one, loss_f, err, errlen) != 0)
		return -1;
	for (int i = 0; i < m->n_params; i++) {
		const struct model_param *p = &m->params[i];
		char name[256];
		snprintf(name, sizeof(name), "%s%s", prefix, p->name);
		if (st_writer_add(w, name, ST_F32, p->ndim, p->shape,
				  f32 + p->offset, err, errlen) != 0)
			return -1;
	}
	return 0;
}

/* What save_buffer writes besides the tensors. */
struct save_what {
	const char *prefix; /* of every parameter's tensor name */
	const double *loss; /* a float32 [1] "loss" tensor when not NULL */
	int with_solves;    /* the last step's solves in the metadata */
	int full_config;    /* the whole config and "method" as metadata */
};

/* Writes the model's buffer `buf` (params or grads) as float32 tensors
 * named prefix + parameter name, with what's loss tensor and the metadata
 * of add_metadata; atomically (st_writer_write). -1 with one line. */
static int save_buffer(struct run_ctx *rc, const void *buf,
		       const struct save_what *what,
		       const struct bench_config *cfg, const char *path,
		       char *err, size_t errlen)
{
	struct st_writer *w = st_writer_new();
	float *f32 = malloc(sizeof(float) * (rc->m->n_param_elems + 1));
	const double *loss = what->loss;
	float loss_f = loss ? (float)*loss : 0;
	int rv = -1;

	if (!w || !f32) {
		snprintf(err, errlen, "out of host memory");
		goto out;
	}
	if (add_tensors(w, rc, buf, what->prefix, loss ? &loss_f : NULL, f32,
			err, errlen) != 0)
		goto out;
	if (add_metadata(w, rc, cfg, what->with_solves, what->full_config) !=
	    0) {
		snprintf(err, errlen, "out of host memory");
		goto out;
	}
	rv = st_writer_write(w, path, err, errlen);
out:
	st_writer_free(w);
	free(f32);
	return rv;
}

int params_init(const struct bench_config *cfg, const char *out_path, char *err,
		size_t errlen)
{
	struct run_ctx rc;
	int V, rv;
	if (run_ctx_resolve_vocab(cfg, &V, err, errlen) != 0)
		return -1;
	if (run_ctx_create(&rc, cfg, V, err, errlen) != 0)
		return -1;
	struct save_what what = {"", NULL, 0, 0};
	rv = save_buffer(&rc, rc.m->param_buf, &what, cfg, out_path, err,
			 errlen);
	run_ctx_destroy(&rc);
	return rv;
}

int params_save(struct run_ctx *rc, const struct bench_config *cfg,
		const char *path, char *err, size_t errlen)
{
	struct save_what what = {"", NULL, 0, 1};
	return save_buffer(rc, rc->m->param_buf, &what, cfg, path, err, errlen);
}

/* ---- output paths ---- */

int params_check_out(const char *what, const char *path, char *err,
		     size_t errlen)
{
	char e[900];
	if (fileio_check_replace(path, &fileio_kind_safetensors, e,
				 sizeof(e)) == 0)
		return 0;
	snprintf(err, errlen, "%s%s", what, e);
	return -1;
}

int params_save_or_rescue(struct run_ctx *rc, const struct bench_config *cfg,
			  const char *path, char *err, size_t errlen)
{
	char e[900], e2[900], rescue[1024];
	if (params_save(rc, cfg, path, e, sizeof(e)) == 0)
		return 0;
	fileio_rescue_new(rescue, sizeof(rescue), ".safetensors");
	if (params_save(rc, cfg, rescue, e2, sizeof(e2)) == 0)
		snprintf(err, errlen,
			 "save_params: %s; the trained parameters are in %s "
			 "(move them where they belong)",
			 e, rescue);
	else
		snprintf(err, errlen,
			 "save_params: %s; the rescue file failed too (%s): "
			 "the trained parameters are lost",
			 e, e2);
	return -1;
}

/* ---- deqbench grad ---- */

/* Sets cfg's batch_size and seq_len from a tokens tensor [B, T+1], within
 * the keys' ranges as typed ones would be, B a multiple of microbatches.
 * -1 with one line. */
static int tokens_shape(struct bench_config *cfg, const struct st_tensor *t,
			const char *tokens_path, char *err, size_t errlen)
{
	char nb[32], nt[32], e2[256];
	snprintf(nb, sizeof(nb), "%lld", (long long)t->shape[0]);
	snprintf(nt, sizeof(nt), "%lld", (long long)t->shape[1] - 1);
	if (config_set(cfg, "batch_size", nb, e2, sizeof(e2)) != 0 ||
	    config_set(cfg, "seq_len", nt, e2, sizeof(e2)) != 0) {
		snprintf(err, errlen,
			 "%s: tensor 'tokens' [B, T+1] gives %s; use a smaller "
			 "tokens file",
			 tokens_path, e2);
		return -1;
	}
	if (cfg->model.batch_size % cfg->microbatches == 0)
		return 0;
	snprintf(err, errlen,
		 "%s: tensor 'tokens' has %d rows, which microbatches=%d does "
		 "not divide; choose microbatches dividing them",
		 tokens_path, cfg->model.batch_size, cfg->microbatches);
	return -1;
}

/* Reads tensor "tokens" (int32 [B, T+1], B >= 1, T >= 1) of the file at
 * path into a new host array *tokens, B and T into cfg. -1 with one
 * line. */
static int read_tokens(struct bench_config *cfg, const char *path,
		       int32_t **tokens, char *err, size_t errlen)
{
	struct st_file tf;
	const struct st_tensor *t;
	int rv = -1;

	*tokens = NULL;
	if (st_read(&tf, path, err, errlen) != 0)
		return -1;
	t = st_get(&tf, "tokens", ST_I32, -1, NULL, err, errlen);
	if (t && (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] < 2 ||
		  t->shape[0] > INT32_MAX || t->shape[1] > INT32_MAX)) {
		snprintf(err, errlen,
			 "%s: tensor 'tokens' must be I32 [B, T+1] with B >= 1 "
			 "and T >= 1",
			 path);
		t = NULL;
	}
	if (t && tokens_shape(cfg, t, path, err, errlen) == 0) {
		*tokens = malloc(t->nbytes);
		if (*tokens) {
			memcpy(*tokens, t->data, t->nbytes);
			rv = 0;
		} else
			snprintf(err, errlen, "out of host memory");
	}
	st_close(&tf);
	return rv;
}

/* Vocabulary of a parameter file: the rows of "embed.weight" (F32 [V,
 * d_model]). 0 with one line in err when missing or malformed. */
static int params_vocab(const char *path, char *err, size_t errlen)
{
	struct st_file pf;
	const struct st_tensor *t;
	int V;
	if (st_read(&pf, path, err, errlen) != 0)
		return 0;
	t = st_get(&pf, "embed.weight", ST_F32, -1, NULL, err, errlen);
	if (t && (t->ndim != 2 || t->shape[0] < 1 || t->shape[0] > INT32_MAX)) {
		snprintf(err, errlen,
			 "%s: tensor 'embed.weight' must be F32 [V, d_model]",
			 path);
		t = NULL;
	}
	V = t ? (int)t->shape[0] : 0;
	st_close(&pf);
	return V;
}

int params_grad(const struct bench_config *cfg_in, const char *params_path,
		const char *tokens_path, const char *out_path,
		struct method_stats *stats, char *err, size_t errlen)
{
	struct bench_config cfg = *cfg_in;
	struct run_ctx rc;
	int32_t *tokens;
	int V = cfg.model.vocab_size, rv = -1;
	double loss;
	char e2[512];

	if (read_tokens(&cfg, tokens_path, &tokens, err, errlen) != 0)
		return -1;
	/* vocabulary: the key, else the parameter file's embedding rows */
	if (V <= 0)
		V = params_vocab(params_path, err, errlen);
	if (!V || run_ctx_create(&rc, &cfg, V, err, errlen) != 0) {
		free(tokens);
		return -1;
	}
	if (params_load(&rc, params_path, err, errlen) == 0) {
		if (train_step_grad_step(&rc, tokens, &loss, e2, sizeof(e2)) ==
		    0) {
			struct save_what what = {"grad.", &loss, 1, 0};
			rv = save_buffer(&rc, rc.m->grad_buf, &what, &cfg,
					 out_path, err, errlen);
			if (stats && rv == 0)
				*stats = *method_get_stats(rc.me);
		} else
			snprintf(err, errlen, "%s: %s", tokens_path, e2);
	}
	run_ctx_destroy(&rc);
	free(tokens);
	return rv;
}
