/* fuzz_config.c — libFuzzer target: a config file and key=value arguments
 * as `deqbench run FILE.json key=value ...` reads them (bench/cmd/main.c):
 * config_load_file, config_args_unique, config_set_arg, config_finish; then
 * what the run does first with an accepted config: memfit_estimate (the
 * sizes of every buffer) and the record's config and method objects.
 *
 * Input: the file's bytes, then optionally a NUL byte and the arguments,
 * one per line. Every refusal must come with a message. */
#include "fuzz_util.h"

#include "bench/config/config.h"
#include "bench/run/memfit.h"

/* The record's config and method objects, serialised and freed. */
static void dump_config(const struct bench_config *c)
{
	json_t *o = config_to_json(c), *m = config_method_json(&c->method);
	char *s = json_dumps(o, JSON_COMPACT), *t = json_dumps(m, 0);
	FUZZ_CHECK(o && m && s && t);
	free(s);
	free(t);
	json_decref(o);
	json_decref(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char abuf[4096];
	char *args[64], err[1024] = "";
	struct bench_config c;
	struct run_memory mem;
	int nargs, V;
	size_t flen =
	    fuzz_split_args(data, size, abuf, sizeof(abuf), args, 64, &nargs);

	config_defaults(&c);
	if (config_load_file(&c, fuzz_file(data, flen), err, sizeof(err)) !=
	    0) {
		FUZZ_CHECK(err[0]);
		return 0;
	}
	if (config_args_unique(nargs, args, err, sizeof(err)) != 0) {
		FUZZ_CHECK(err[0]);
		return 0;
	}
	for (int i = 0; i < nargs; i++)
		if (config_set_arg(&c, args[i], err, sizeof(err)) != 0) {
			FUZZ_CHECK(err[0]);
			return 0;
		}
	if (config_finish(&c, err, sizeof(err)) != 0) {
		FUZZ_CHECK(err[0]);
		return 0;
	}
	dump_config(&c);
	V = c.model.vocab_size ? c.model.vocab_size : CONFIG_SYNTHETIC_VOCAB;
	err[0] = 0;
	if (memfit_estimate(&c, V, 4, 1, &mem, err, sizeof(err)) != 0)
		FUZZ_CHECK(err[0]);
	return 0;
}
