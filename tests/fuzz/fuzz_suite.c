/* fuzz_suite.c — libFuzzer target: a suite file and command-line overrides
 * as `deqbench suite FILE.json [--dry-run] key=value ...` reads them:
 * suite_load (suite_expand: axes, exclusions, repeats, every run's config
 * validated), then the --dry-run listing of small suites.
 *
 * Input: the file's bytes, then optionally a NUL byte and the overrides,
 * one per line. Every refusal must come with a message; an accepted suite
 * holds n_runs = combinations kept x repeats, indexed in order. */
#include "fuzz_util.h"

#include "bench/suite.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char abuf[4096];
	char *args[64], err[1024] = "";
	struct suite s;
	int nargs;
	size_t flen =
	    fuzz_split_args(data, size, abuf, sizeof(abuf), args, 64, &nargs);

	if (suite_load(&s, fuzz_file(data, flen), nargs, args, err,
		       sizeof(err)) != 0) {
		FUZZ_CHECK(err[0]);
		FUZZ_CHECK(s.runs == NULL);
		return 0;
	}
	FUZZ_CHECK(s.n_runs >= 1 && s.n_runs <= SUITE_MAX_RUNS);
	FUZZ_CHECK(s.repeats >= 1 && s.n_runs % s.repeats == 0);
	for (int i = 0; i < s.n_runs; i++)
		FUZZ_CHECK(s.runs[i].index == i &&
			   s.runs[i].repeat == i % s.repeats);
	/* the listing builds two JSON objects a run: small suites only */
	if (s.n_runs <= 256)
		suite_print_runs(&s, 0, 1, fuzz_devnull());
	suite_free(&s);
	return 0;
}
