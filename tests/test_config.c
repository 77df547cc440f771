/* test_config.c — the key table and its inputs (bench/config/config.c,
 * config_input.c, config_print.c): defaults, types, ranges and cross-key
 * checks, unknown keys with a suggestion, config files and overrides, the
 * JSON round trip, tf32 only with device=cuda, and docs/configuration.md's
 * key table as --help-markdown prints it. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../methods/checkpoint.h"
#include "../methods/deq.h"
#include "config.h"
#include "test_cli.h"

Test(config, defaults_are_valid)
{
	struct bench_config c;
	char err[512];
	config_defaults(&c);
	cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(c.out, "results/runs.jsonl");
}

Test(config, types_parse)
{
	struct bench_config c;
	char err[512];
	config_defaults(&c);
	cr_assert_eq(config_set(&c, "layers", "24", err, sizeof(err)), 0);
	cr_assert_eq(c.method.layers, 24);
	cr_assert_eq(config_set(&c, "lr", "3e-4", err, sizeof(err)), 0);
	cr_assert_float_eq(c.lr, 3e-4, 1e-18);
	cr_assert_eq(config_set(&c, "trace", "true", err, sizeof(err)), 0);
	cr_assert_eq(c.trace, 1);
	cr_assert_eq(config_set(&c, "method", "deq", err, sizeof(err)), 0);
	cr_assert_eq(c.method.method, deq_kind());
	cr_assert_eq(config_set(&c, "f_solver", "anderson", err, sizeof(err)),
		     0);
	cr_assert_eq(deq_config(&c.method)->f_solver, SOLVER_ANDERSON);
	cr_assert_eq(
	    config_set(&c, "seed", "9223372036854775807", err, sizeof(err)), 0);
	cr_assert_eq(c.model.seed, (uint64_t)INT64_MAX);
	cr_assert_eq(
	    config_set(&c, "seed", "18446744073709551615", err, sizeof(err)),
	    -1);
	cr_assert_eq(config_set(&c, "eval_tokens", "100000", err, sizeof(err)),
		     0);
	cr_assert_eq(c.eval_tokens, 100000);
	cr_assert_eq(config_set(&c, "corpus", "synthetic", err, sizeof(err)),
		     0);
	cr_assert_eq(c.corpus, CORPUS_SYNTHETIC);
}

Test(config, wrong_type_names_key)
{
	struct bench_config c;
	char err[512];
	config_defaults(&c);
	cr_assert_eq(config_set(&c, "layers", "abc", err, sizeof(err)), -1);
	cr_assert(strstr(err, "layers") && strstr(err, "abc") &&
		      strstr(err, "integer"),
		  "%s", err);
	cr_assert_eq(c.method.layers, 12, "a failed set leaves the value");
	cr_assert_eq(config_set(&c, "lr", "fast", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "trace", "maybe", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "layers", "12.5", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "method", "magic", err, sizeof(err)), -1);
	cr_assert(strstr(err, "unroll, checkpoint, deq"), "%s", err);
	cr_assert_eq(config_set(&c, "corpus", "enwik", err, sizeof(err)), -1);
	cr_assert_null(strchr(err, '\n'));
}

Test(config, unknown_key_suggests)
{
	struct bench_config c;
	char err[512];
	config_defaults(&c);
	cr_assert_eq(config_set(&c, "lyers", "3", err, sizeof(err)), -1);
	cr_assert(strstr(err, "'lyers'") && strstr(err, "'layers'"), "%s", err);
	cr_assert_str_eq(config_closest_key("f_tool"), "f_tol");
	cr_assert_str_eq(config_closest_key("batchsize"), "batch_size");
	cr_assert_eq(config_set_arg(&c, "noequals", err, sizeof(err)), -1);
}

Test(config, ranges)
{
	struct bench_config c;
	char err[512];
	config_defaults(&c);
	cr_assert_eq(config_set(&c, "layers", "0", err, sizeof(err)), -1);
	cr_assert(strstr(err, "out of range"), "%s", err);
	cr_assert_eq(config_set(&c, "steps", "-5", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "lr", "0", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "f_tol", "-1e-3", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "seed", "-1", err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "clip", "0", err, sizeof(err)), 0);
	/* cross-key checks */
	config_defaults(&c);
	c.model.d_model = 65;
	cr_assert_eq(config_finish(&c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "n_heads"), "%s", err);
	config_defaults(&c);
	c.warmup_steps = c.steps;
	cr_assert_eq(config_finish(&c, err, sizeof(err)), -1);
	config_defaults(&c);
	c.method.method = checkpoint_kind();
	checkpoint_config(&c.method)->k = 13;
	cr_assert_eq(config_finish(&c, err, sizeof(err)), -1);
}

Test(config, file_and_overrides, .init = cli_setup, .fini = cli_teardown)
{
	struct bench_config c;
	char err[512], p[512];
	cli_path(p, sizeof(p), "c.json");
	cli_write_text(
	    p, "{\"layers\": 6, \"lr\": 0.01, \"method\": \"checkpoint\","
	       " \"trace\": true, \"corpus\": \"synthetic\"}");
	config_defaults(&c);
	cr_assert_eq(config_load_file(&c, p, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(c.method.layers, 6);
	cr_assert_float_eq(c.lr, 0.01, 1e-15);
	cr_assert_eq(c.method.method, checkpoint_kind());
	cr_assert_eq(c.trace, 1);
	cr_assert_eq(config_set_arg(&c, "layers=9", err, sizeof(err)), 0);
	cr_assert_eq(c.method.layers, 9);

	/* JSON type errors and malformed files */
	cli_write_text(p, "{\"layers\": \"abc\"}");
	config_defaults(&c);
	cr_assert_eq(config_load_file(&c, p, err, sizeof(err)), -1);
	cr_assert(strstr(err, p) && strstr(err, "layers"), "%s", err);
	cli_write_text(p, "{\"layers\": true}");
	cr_assert_eq(config_load_file(&c, p, err, sizeof(err)), -1);
	cli_write_text(p, "{\"layers\": 12,\n \"lr\": }\n");
	cr_assert_eq(config_load_file(&c, p, err, sizeof(err)), -1);
	cr_assert(strstr(err, ":2:"), "line number in: %s", err);
	cli_path(p, sizeof(p), "missing.json");
	cr_assert_eq(config_load_file(&c, p, err, sizeof(err)), -1);
	cr_assert(strstr(err, "missing.json"), "%s", err);
}

Test(config, json_roundtrip_has_every_key)
{
	struct bench_config c, d;
	char err[512];
	json_t *o;
	const char *key;
	json_t *v;
	config_defaults(&c);
	config_set(&c, "method", "deq", err, sizeof(err));
	config_set(&c, "anderson_beta", "0.5", err, sizeof(err));
	o = config_to_json(&c);
	cr_assert_geq(json_object_size(o), 38);
	config_defaults(&d);
	cr_assert_eq(config_apply_object(&d, o, "x", err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(memcmp(&c, &d, sizeof(c)), 0);
	json_object_foreach(o, key, v) cr_assert(config_key_known(key));
	json_decref(o);
}

/* docs/configuration.md carries the key table; it must be what
 * --help-markdown prints (regenerate with: deqbench run --help-markdown). */
Test(config, docs_key_table_current)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char path[1024], *want = NULL, *readme;
	size_t wlen = 0;
	FILE *mf = open_memstream(&want, &wlen);
	cr_assert_not_null(root, "DQ_SOURCE_ROOT must give the source tree");
	config_print_markdown(mf);
	fclose(mf);
	snprintf(path, sizeof(path), "%s/docs/configuration.md", root);
	readme = cli_read(path, NULL);
	cr_assert_not_null(readme, "cannot read %s", path);
	cr_assert(strstr(readme, want),
		  "docs/configuration.md's key table is stale; replace it with "
		  "the output of deqbench run --help-markdown:\n%s",
		  want);
	free(want);
	free(readme);
}

Test(config, tf32_only_on_cuda)
{
	struct bench_config c;
	char err[512];
	config_defaults(&c);
	cr_assert_eq(config_set(&c, "tf32", "true", err, sizeof(err)), 0);
	cr_assert_eq(config_finish(&c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "tf32=true") && strstr(err, "device=cuda"), "%s",
		  err);
}

/* precision: tf32 needs device=cuda whichever way it is spelled; tf32=true
 * is an alias of precision=tf32 (both say so once resolved) and
 * contradicts precision=bf16; compile=true is impl=pytorch's. */
static int finish_with(const char *const *kv, char *err, size_t errlen,
		       struct bench_config *c)
{
	config_defaults(c);
	for (; *kv; kv += 2)
		cr_assert_eq(config_set(c, kv[0], kv[1], err, errlen), 0, "%s",
			     err);
	return config_finish(c, err, errlen);
}

Test(config, precision_keys)
{
	struct bench_config c;
	char err[512];
	const char *tf32_cpu[] = {"precision", "tf32", NULL};
	cr_assert_eq(finish_with(tf32_cpu, err, sizeof(err), &c), -1);
	cr_assert(strstr(err, "precision=tf32") && strstr(err, "device=cuda"),
		  "%s", err);
	const char *both[] = {"precision", "bf16", "tf32", "true", NULL};
	cr_assert_eq(finish_with(both, err, sizeof(err), &c), -1);
	cr_assert(strstr(err, "contradicts precision=bf16"), "%s", err);
	const char *bf16[] = {"precision", "bf16", NULL};
	cr_assert_eq(finish_with(bf16, err, sizeof(err), &c), 0, "%s", err);
	cr_assert_eq(c.model.precision, DQ_PREC_BF16);
	cr_assert_eq(c.tf32, 0);
	const char *b64[] = {"precision", "bf16", "device", "cpu64", NULL};
	cr_assert_eq(finish_with(b64, err, sizeof(err), &c), -1);
	cr_assert(strstr(err, "cpu64"), "%s", err);
	const char *comp[] = {"compile", "true", NULL};
	cr_assert_eq(finish_with(comp, err, sizeof(err), &c), -1);
	cr_assert(strstr(err, "compile=true") && strstr(err, "impl=pytorch"),
		  "%s", err);
	cr_assert_eq(dq_precision_parse("fp16"), -1);
	for (int p = DQ_PREC_FP32; p <= DQ_PREC_BF16; p++)
		cr_assert_eq(dq_precision_parse(dq_precision_name(p)), p);
}

/* The alias resolves the same on a build with CUDA: tf32=true and
 * precision=tf32 give one resolved config. */
Test(config, tf32_is_precision_tf32)
{
	struct bench_config a, b;
	char err[512];
	int cuda = 0;
	for (int i = 0; backend_names[i]; i++)
		cuda |= strcmp(backend_names[i], "cuda") == 0;
	if (!cuda)
		cr_skip_test("this build has no CUDA backend");
	const char *ka[] = {"device", "cuda", "tf32", "true", NULL};
	const char *kb[] = {"device", "cuda", "precision", "tf32", NULL};
	cr_assert_eq(finish_with(ka, err, sizeof(err), &a), 0, "%s", err);
	cr_assert_eq(finish_with(kb, err, sizeof(err), &b), 0, "%s", err);
	cr_assert_eq(a.model.precision, DQ_PREC_TF32);
	cr_assert_eq(b.tf32, 1);
}
