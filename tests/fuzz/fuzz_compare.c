/* fuzz_compare.c — libFuzzer target: two JSONL record files as `deqbench
 * compare BASE NEW [--match KEY] [--threshold PCT] [--alpha A]` compares
 * them (compare_records: rows, pairing, each run's sample, the U test, the
 * verdict), then the result in every format and --fail-above's gate,
 * whatever the records' fields hold (a NaN sample once hung it).
 *
 * Input: BASE's bytes, a NUL byte, NEW's bytes; optionally another NUL
 * byte and up to three lines: the --match key (used when it is a config
 * key), --threshold in percent, --alpha. A refusal must come with a
 * message; an accepted comparison gives each pair a known verdict, sample
 * counts within its runs and a p in [0, 1] no smaller than p_min, for
 * the times and for × unroll (null for unroll beside unroll). */
#include "fuzz_util.h"

#include <math.h>

#include "bench/config/config.h"
#include "bench/records/record.h"
#include "bench/report/compare.h"

/* The records of data[0..size) into a new array (empty when the file is
 * refused: that reader has fuzz_records). */
static json_t *records(const uint8_t *data, size_t size)
{
	json_t *arr = json_array();
	char err[1024] = "";
	FUZZ_CHECK(arr);
	if (record_read_jsonl(fuzz_file(data, size), arr, err, sizeof(err)) !=
	    0) {
		FUZZ_CHECK(err[0]);
		json_array_clear(arr);
	}
	return arr;
}

/* A number line in [lo, hi], else dflt. */
static double opt(int nargs, char **args, int k, double lo, double hi,
		  double dflt)
{
	char *end;
	double x = k < nargs ? strtod(args[k], &end) : dflt;
	return k < nargs && *end == 0 && x >= lo && x <= hi ? x : dflt;
}

static int known_verdict(const char *v)
{
	static const char *const verdicts[] = {
	    "SAME",	 "FASTER",  "SLOWER",	   "NOISY",
	    "UNDECIDED", "NO DATA", "NEW DIVERGED"};
	int known = 0;
	for (size_t i = 0; i < sizeof(verdicts) / sizeof(*verdicts); i++)
		known |= !strcmp(v, verdicts[i]);
	return known;
}

/* A pair's test at prefix ("" or "x_unroll."): a known verdict (x_unroll:
 * or null, unroll beside unroll), samples within the runs, p in [0, 1],
 * p_min <= p. */
static void check_test(const json_t *p, const char *prefix, const char *v)
{
	char k[5][32];
	const char *names[] = {"p", "p_min", "n_base", "n_new"};
	for (int i = 0; i < 4; i++)
		snprintf(k[i], sizeof(k[i]), "%s%s", prefix, names[i]);
	double pv = record_num(p, k[0]), pm = record_num(p, k[1]);
	FUZZ_CHECK(v ? known_verdict(v) : prefix[0] != 0);
	FUZZ_CHECK(!(record_num(p, k[2]) > record_num(p, "runs_base")));
	FUZZ_CHECK(!(record_num(p, k[3]) > record_num(p, "runs_new")));
	FUZZ_CHECK(isnan(pv) || (pv >= 0 && pv <= 1));
	FUZZ_CHECK(isnan(pv) || isnan(pm) || pm <= pv * (1 + 1e-9));
	if (v && (!strcmp(v, "SLOWER") || !strcmp(v, "FASTER")))
		FUZZ_CHECK(pv >= 0 && record_num(p, k[3]) > 0);
}

static void check_pair(const json_t *p)
{
	const json_t *x = json_object_get(p, "x_unroll");
	check_test(p, "", json_string_value(json_object_get(p, "verdict")));
	FUZZ_CHECK(json_is_object(x));
	check_test(p, "x_unroll.",
		   json_string_value(json_object_get(x, "verdict")));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char abuf[1024];
	char *args[3], err[1024];
	const uint8_t *nul = memchr(data, 0, size);
	size_t blen = nul ? (size_t)(nul - data) : size, nlen;
	const uint8_t *rest = nul ? nul + 1 : data + size;
	int nargs;
	json_t *base, *new_recs, *res, *p;
	struct compare_opts o = {NULL, COMPARE_THRESHOLD, COMPARE_ALPHA};
	size_t i;

	nlen = fuzz_split_args(rest, size - (size_t)(rest - data), abuf,
			       sizeof(abuf), args, 3, &nargs);
	if (nargs > 0 && config_key_known(args[0]))
		o.match = args[0];
	o.threshold = opt(nargs, args, 1, 0, 1000, 5) / 100;
	o.alpha = opt(nargs, args, 2, 1e-9, 1, COMPARE_ALPHA);
	base = records(data, blen);
	new_recs = records(rest, nlen);
	res = compare_records(base, new_recs, &o, err, sizeof(err));
	if (!res)
		FUZZ_CHECK(err[0]);
	else {
		json_array_foreach(json_object_get(res, "pairs"), i, p)
		    check_pair(p);
		compare_print(fuzz_devnull(), res, COMPARE_MD);
		compare_print(fuzz_devnull(), res, COMPARE_CSV);
		compare_print(fuzz_devnull(), res, COMPARE_JSON);
		FUZZ_CHECK(compare_gate(res, 10, NULL) >= 0);
	}
	json_decref(res);
	json_decref(base);
	json_decref(new_recs);
	return 0;
}
