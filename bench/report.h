/*
 * report.h — the summary of run records that `deqbench report`, `run` and
 * `suite` print, and that the findings (plots/findings.py) are generated
 * from: one row per configuration, its runs aggregated.
 *
 * Rows: records whose configs are equal apart from the output-only keys
 * (config_key_is_output) and `seed` are one row: seeds are replicates, as
 * are a suite's repeats. A row's group is its config without the method
 * keys (config_key_is_method); ratios (× unroll) are to the unroll row of
 * the same group.
 *
 * Per row (bench/stats.h for the intervals):
 * - step time: the median of the runs' median step times, with the 95% t
 *   interval of their geometric mean (log scale); × unroll with Welch's
 *   95% interval of the ratio of geometric means; none with one run;
 * - noisy runs: runs whose step-time interquartile range exceeds
 *   REPORT_NOISE_IQR of their median (torch.utils.benchmark's rule);
 * - valid perplexity: mean ± sample sd over the runs;
 * - memory: medians (the allocator's bytes do not vary between seeds);
 * - health: how many runs were healthy, unstable, diverged, unconverged
 *   (the record's `health`, bench/health.h), and the row's labels.
 */
#ifndef DQ_BENCH_REPORT_H
#define DQ_BENCH_REPORT_H

#include <jansson.h>
#include <stdio.h>

#define REPORT_NOISE_IQR 0.10
#define REPORT_LEVEL	 0.95

/* The rows of records (an array of records; those without a config object
 * are left out), in the order their configurations first appear: an array
 * of objects documented in docs/commands.md (`report --format json`). New
 * reference; NULL when out of memory. */
json_t *report_rows(const json_t *records);

/* Prints rows (report_rows) as the markdown summary table, then, where
 * rows of both implementations are present, the deqbench / PyTorch table. */
void report_print_md(FILE *f, const json_t *rows);

/* report_rows then report_print_md: the summary `run`, `suite` and
 * `report` print. */
void record_summary(FILE *f, const json_t *records);

#endif
