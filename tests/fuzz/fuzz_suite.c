/* fuzz_suite.c — libFuzzer target: a suite file and command-line overrides
 * as `deqbench suite FILE.json [--dry-run] key=value ...` reads them:
 * suite_load (suite_expand: axes, exclusions, repeats, every run's config
 * validated), then the --dry-run listing of small suites.
 *
 * Input: the file's bytes, then optionally a NUL byte and the overrides,
 * one per line. Every refusal must come with a message; an accepted suite
 * holds n_runs = combinations kept x repeats, indexed in order. */
#include "fuzz_util.h"

#include "bench/suite/suite.h"

/* Suites of more combinations than this, up to the 1e6 suite_expand
 * allows (more are refused at once), are not handed to suite_load: one of
 * 1e6 combinations (700 bytes of JSON) resolves each of them, minutes under
 * AddressSanitizer, which libFuzzer would report as a timeout, and runs the
 * code paths of a small suite, only more often. */
#define MAX_COMBOS 20000

/* The product of the axes' lengths of the suite in F[0..n), as far as it
 * can be read without suite_load (1 when there are none). */
static double suite_combos(const uint8_t *f, size_t n)
{
	json_t *root = json_loadb((const char *)f, n, 0, NULL), *v;
	const char *k;
	double combos = 1;
	json_object_foreach(json_object_get(root, "axes"), k, v)
	{
		if (json_is_array(v))
			combos *= (double)json_array_size(v);
	}
	json_decref(root);
	return combos;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char abuf[4096];
	char *args[64], err[1024] = "";
	struct suite s;
	int nargs;
	size_t flen =
	    fuzz_split_args(data, size, abuf, sizeof(abuf), args, 64, &nargs);
	double combos = suite_combos(data, flen);

	if (combos > MAX_COMBOS && combos <= 1e6)
		return 0;
	if (suite_load(&s, fuzz_file(data, flen), nargs, args, err,
		       sizeof(err)) != 0) {
		FUZZ_CHECK(err[0]);
		FUZZ_CHECK(s.runs == NULL);
		return 0;
	}
	FUZZ_CHECK(s.n_runs >= 1 && s.n_runs <= SUITE_MAX_RUNS);
	FUZZ_CHECK(s.repeats >= 1 && s.n_runs % s.repeats == 0);
	/* every repeat holds n_runs / repeats runs; round-robin runs the
	 * repeats one after the other (they vary slowest), "axes" keeps the
	 * combinations' order (repeats fastest), "random" any permutation */
	int per_repeat = 0;
	for (int i = 0; i < s.n_runs; i++) {
		FUZZ_CHECK(s.runs[i].index == i);
		FUZZ_CHECK(s.runs[i].repeat >= 0 &&
			   s.runs[i].repeat < s.repeats);
		per_repeat += s.runs[i].repeat == 0;
		if (s.order == SUITE_ORDER_ROUND_ROBIN && i > 0)
			FUZZ_CHECK(s.runs[i].repeat >= s.runs[i - 1].repeat);
		if (s.order == SUITE_ORDER_AXES)
			FUZZ_CHECK(s.runs[i].repeat == i % s.repeats);
	}
	FUZZ_CHECK(per_repeat == s.n_runs / s.repeats);
	/* the listing builds two JSON objects a run: small suites only */
	if (s.n_runs <= 256)
		suite_print_runs(&s, 0, 1, fuzz_devnull());
	suite_free(&s);
	return 0;
}
