/* cmd_eval.c — the config of `deqbench eval params=P` (see cmd.h): the
 * file's metadata first, read whole before anything else is looked at,
 * then FILE.json and key=value over it; the corpus check with what the
 * file said about it. docs/commands.md `eval`. */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "../config/config.h"
#include "../data/data.h"
#include "../run/param_files.h"

/* Whether key k of a params file's metadata config meta is part of
 * `eval`'s base: not where output goes, nor what machine runs it and how
 * (precision: a bf16- or tf32-trained file evaluates at fp32 unless
 * precision= says otherwise, on whatever device; a file trained with
 * cuda_graphs or under a memory cap evaluates on the CPU too). data_dir
 * is, for a corpus read from it: the corpus the file was trained on. */
static int eval_base_key(const char *k, const json_t *meta)
{
	static const char *const machine[] = {
	    "params",	   "device",	  "threads",
	    "impl",	   "tf32",	  "precision",
	    "compile",	   "cuda_graphs", "device_mem_cap_mib",
	    "eval_tokens", "eval_warmup", NULL};
	const char *corpus;
	for (int i = 0; machine[i]; i++)
		if (!strcmp(k, machine[i]))
			return 0;
	if (!strcmp(k, "data_dir")) {
		corpus = json_string_value(json_object_get(meta, "corpus"));
		return !corpus || strcmp(corpus, "synthetic") != 0;
	}
	return config_key_known(k) && !config_key_is_output(k);
}

/* A file trained with method=managed (unified memory, device=cuda only)
 * evaluated off the GPU: its base method becomes unroll, whose arithmetic
 * managed is (methods/managed.h), with a note on stderr. user holds the
 * user's keys alone (their device; a method given there overrides the
 * base anyway). */
static void managed_as_unroll(json_t *base, const struct bench_config *user)
{
	const char *m = json_string_value(json_object_get(base, "method"));
	if (!m || strcmp(m, "managed") || user->device == DEVICE_CUDA)
		return;
	json_object_set_new(base, "method", json_string("unroll"));
	fprintf(stderr, "deqbench eval: the file was trained with "
			"method=managed (unified memory, device=cuda); "
			"evaluating it as unroll, the same arithmetic\n");
}

/* The base of the eval config from params='s metadata (pm, read), and
 * what eval_corpus_check says about it into *o; NULL when the file has
 * no config. New reference. */
static json_t *eval_base(const struct params_meta *pm,
			 const struct bench_config *user, struct eval_origin *o)
{
	json_t *base, *v;
	const char *k;
	o->no_config = !pm->config;
	o->has_vocab = pm->has_vocab;
	if (!pm->config)
		return NULL;
	base = json_object();
	json_object_foreach(pm->config, k, v)
	{
		if (eval_base_key(k, pm->config))
			json_object_set(base, k, v);
	}
	managed_as_unroll(base, user);
	return base;
}

int eval_parse_config(struct bench_config *cfg, int argc, char **argv,
		      struct eval_origin *o, char *err, size_t errlen)
{
	struct bench_config user;
	struct params_meta pm;
	json_t *base = NULL;
	int rc;
	memset(o, 0, sizeof(*o));
	/* the user's keys alone, not finished: whether pretrain_steps or
	 * f_tol fit the method is for the method the file gives */
	if (apply_config_on(&user, NULL, argc, argv, NULL, NULL, err, errlen))
		return -1;
	if (user.params[0]) {
		if (params_meta_read(user.params, &pm, err, errlen) != 0)
			return -1;
		base = eval_base(&pm, &user, o);
		json_decref(pm.config);
	}
	rc = parse_config_on(cfg, base, argc, argv, NULL, NULL, err, errlen);
	o->dir_from_file = base && json_object_get(base, "data_dir") &&
			   strcmp(cfg->data_dir, user.data_dir) != 0;
	json_decref(base);
	if (rc != 0)
		return -1;
	/* keys of another method than the one evaluated: the user's only
	 * (a DEQ file's f_tol stays in an unroll evaluation unused) */
	user.method.method = cfg->method.method;
	return config_check_method_keys(&user, err, errlen);
}

int eval_corpus_check(const struct bench_config *cfg,
		      const struct eval_origin *o, char *err, size_t errlen)
{
	char e[700];
	if (corpus_check(corpus_kind_name(cfg->corpus), cfg->data_dir, e,
			 sizeof(e)) != 0) {
		snprintf(err, errlen, "%s%s%.200s%s", e,
			 o->no_config ? "; params= holds no metadata config, "
					"so the corpus is run's default: give "
					"corpus= and data_dir="
			 : o->dir_from_file ? "; data_dir="
					    : "",
			 o->dir_from_file ? cfg->data_dir : "",
			 o->dir_from_file ? " is the params= file's (its "
					    "metadata): give data_dir= where "
					    "that corpus is now"
					  : "");
		return -1;
	}
	if (cfg->params[0] && !o->has_vocab && cfg->corpus != CORPUS_SYNTHETIC)
		fprintf(stderr,
			"deqbench eval: %s holds no vocabulary fingerprint "
			"(written by params init, or before save_params= "
			"stored one): not checked that corpus=%s in %s is the "
			"corpus it was trained on\n",
			cfg->params, corpus_kind_name(cfg->corpus),
			cfg->data_dir);
	return 0;
}
