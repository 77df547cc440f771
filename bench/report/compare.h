/*
 * compare.h — `deqbench compare BASE NEW`: each configuration's runs in
 * BASE beside the same configuration's runs in NEW, with the ratios, a
 * Mann–Whitney U test on the runs' times and a verdict, in the manner of
 * Google Benchmark's tools/compare.py and nvbench's SAME/FAST/SLOW.
 *
 * Rows: each side's records become report's rows (report.h: the run
 * identity without the output-only keys and the seed, so seeds and repeats
 * are replicates; a second reading of one run, report_unique, is left
 * out). Host and build are not part of a configuration, so the same suite
 * run at two commits or on two machines pairs.
 *
 * Pairing: a NEW row pairs with the BASE row of the same configuration and
 * kind. With `match` (e.g. impl, threads) the configurations may differ in
 * that key: each NEW row pairs with the BASE row of its configuration
 * without the key, so one BASE row may be in several pairs; where BASE
 * holds several such rows, the one with the NEW row's own value, and
 * without one the pairing is ambiguous (compare_records refuses it). A
 * row on one side only is listed as unpaired.
 *
 * Samples: the run is the unit of replication. Each ok run of a row gives
 * one sample, its mean time: `timing.step_ms.mean` of a training record
 * (the sum of its timed step times over `timing.steps_timed`: pretraining
 * and both phases' warmup left out, results/SCHEMA.md §timing; what a
 * user pays per step), `inference.step_ms.mean` of an eval record (the
 * time per valid batch; "time": "inference"). Steps are never pooled
 * across runs: they share a run's state (load, clock, placement), so
 * treating them as independent finds differences between two runs of one
 * configuration (an A/A rerun read FASTER, p = 3e-19). A mean that is
 * null, not positive or not finite, and a run that is not ok, give no
 * sample.
 *
 * Verdict of a pair, with n_b, n_n the samples, d = NEW's median / BASE's
 * − 1 (medians of the samples), p the two-sided U test's (exact up to
 * STATS_MWU_EXACT_MAX runs a side: every split of the pooled runs), p_min
 * the smallest p n_b + n_n samples can reach (stats_mann_whitney_min_p),
 * in this order:
 *   NEW DIVERGED  NEW has no sample and some of its runs diverged;
 *   NO DATA       a side has no sample (no ok run with a time);
 *   SAME          |d| <= threshold;
 *   UNDECIDED     p_min >= alpha: "too few runs to call (n=3 vs 3;
 *                 smallest p = 0.1; need n ≥ 4 a side at α = 0.05)", N
 *                 from stats_mann_whitney_need_n;
 *   NOISY         p >= alpha, or U and d disagree in direction (U above
 *                 n_b n_n / 2 says NEW is slower, d > 0 says so too: the
 *                 medians alone do not make a direction);
 *   FASTER        d < −threshold, p < alpha, U below n_b n_n / 2;
 *   SLOWER        d > threshold, p < alpha, U above n_b n_n / 2.
 * Defaults: threshold 5%, alpha 0.05.
 *
 * × unroll (what carries across machines): each run's sample over its
 * file's unroll time — the median of the run means of the unroll runs of
 * the same side, group (report's: the config without method keys, one
 * kind, BLAS core and build) and seed — is a second sample per run, and
 * the same test and verdict rules compare BASE's ratios with NEW's. A run
 * whose side has no unroll run of its seed gives no ratio. unroll beside
 * unroll is 1 by definition (no test, verdict null). A pair whose time
 * reads FASTER or SLOWER while its × unroll does not read the same says
 * so in a note: the machine or its load changed (× unroll SAME), or may
 * have. --fail-above gates the times.
 */
#ifndef DQ_BENCH_COMPARE_H
#define DQ_BENCH_COMPARE_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#define COMPARE_THRESHOLD 0.05
#define COMPARE_ALPHA	  0.05

struct compare_opts {
	const char *match; /* config key that may differ within a pair, or
			      NULL */
	double threshold;  /* relative change called SAME (0.05: 5%) */
	double alpha;	   /* significance level of the U test */
};

/*
 * compare_records — pairs base and new (arrays of records; records without
 * a config object are left out) and returns {"pairs": [...],
 * "unpaired_base": [...], "unpaired_new": [...]} (docs/commands.md,
 * `compare --format json`). New reference; NULL with a one-line message
 * in err (bad input: an ambiguous --match pairing) or with err empty (out
 * of memory).
 */
json_t *compare_records(const json_t *base, const json_t *new_recs,
			const struct compare_opts *o, char *err, size_t errlen);

/* Output formats of compare's result. */
enum compare_format { COMPARE_MD, COMPARE_CSV, COMPARE_JSON };

/* Prints the result of compare_records in format fmt. */
void compare_print(FILE *f, const json_t *result, enum compare_format fmt);

/*
 * compare_gate — --fail-above PCT's test (pct >= 0): the number of pairs
 * that fail it, each named on a line of why (NULL: silent) with the rule
 * that failed it: SLOWER by more than pct percent; UNDECIDED with NEW /
 * BASE above 1 + pct/100 (the test cannot decide, so the ratio alone);
 * NEW DIVERGED; NO DATA.
 */
int compare_gate(const json_t *result, double pct, FILE *why);

#endif
