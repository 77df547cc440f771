/*
 * compare.h — `deqbench compare BASE NEW`: each configuration's runs in
 * BASE beside the same configuration's runs in NEW, with the ratios, a
 * Mann–Whitney U test on the step times and a verdict, in the manner of
 * Google Benchmark's tools/compare.py and nvbench's SAME/FAST/SLOW.
 *
 * Pairing: records are paired by configuration — report's row identity
 * (report.h: the run identity without the output-only keys and the seed,
 * so seeds and repeats are replicates), and besides the `match` key when
 * given (e.g. impl: deqbench's runs against pytorch's). Host and build are
 * not part of a configuration, so the same suite run at two commits or on
 * two machines pairs. A configuration on one side only is listed as
 * unpaired.
 *
 * Samples of the U test: every timed step (trace.step_ms after
 * warmup_steps, pooled over the runs) when every record of both sides has
 * a trace, else each run's median step time (few samples: with 3 runs a
 * side the smallest two-sided p is 0.1, so such a pair cannot be called
 * faster or slower at alpha 0.05 — run more repeats or with trace=true).
 *
 * Verdict of a pair, with d = NEW's median step time / BASE's − 1:
 *   SAME    |d| <= threshold;
 *   FASTER  d < −threshold and p < alpha;
 *   SLOWER  d > threshold and p < alpha;
 *   NOISY   |d| > threshold but p >= alpha (a difference the samples do
 *           not support).
 * Defaults: threshold 5%, alpha 0.05.
 */
#ifndef DQ_BENCH_COMPARE_H
#define DQ_BENCH_COMPARE_H

#include <jansson.h>
#include <stdio.h>

#define COMPARE_THRESHOLD 0.05
#define COMPARE_ALPHA	  0.05

struct compare_opts {
	const char *match; /* config key that may differ within a pair, or
			      NULL */
	double threshold;  /* relative step-time change called SAME */
	double alpha;	   /* significance level of the U test */
};

/*
 * compare_records — pairs base and new (arrays of records; records without
 * a config object are left out) and returns {"pairs": [...],
 * "unpaired_base": [...], "unpaired_new": [...]} (docs/commands.md,
 * `compare --format json`). New reference; NULL when out of memory.
 */
json_t *compare_records(const json_t *base, const json_t *new_recs,
			const struct compare_opts *o);

/* Output formats of compare's result. */
enum compare_format { COMPARE_MD, COMPARE_CSV, COMPARE_JSON };

/* Prints the result of compare_records in format fmt. */
void compare_print(FILE *f, const json_t *result, enum compare_format fmt);

/* The number of pairs whose verdict is SLOWER by more than pct percent
 * (pct >= 0): --fail-above's test. */
int compare_count_slower(const json_t *result, double pct);

#endif
