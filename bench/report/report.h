/*
 * report.h — the summary of run records that `deqbench report`, `run` and
 * `suite` print, and that the findings (plots/findings.py) are generated
 * from: one row per configuration, its runs aggregated.
 *
 * Rows: records whose configs are equal apart from the output-only keys
 * (config_key_is_output) and `seed` are one row: seeds are replicates, as
 * are a suite's repeats. A row's group is its config without the method
 * keys (config_key_is_method); ratios (× unroll) are to the unroll row of
 * the same group. Eval records (kind "eval") are keyed without
 * `params`, so the seeds' parameter files of one configuration are a
 * row's runs, and grouped without `layers` too; an eval row's ratios are
 * to its matched unroll row: the shallowest unroll eval row of its group
 * whose mean valid perplexity is at most its own, else the one of lowest
 * (docs/commands.md §report, `matched_unroll`).
 *
 * Per row (bench/report/stats.h for the intervals):
 * - step time: the geometric mean of the runs' median step times with its
 *   95% t interval (log scale), and their median beside it; × unroll: the
 *   ratio of the geometric means with Welch's 95% interval of it (and the
 *   ratio of the medians beside it), 1 without interval on the unroll row
 *   itself; no interval with fewer than REPORT_MIN_CI_RUNS runs (either
 *   side of a ratio). The printed estimate is always the one its interval
 *   is about;
 * - mean step time (what a user pays): the geometric mean of
 *   the runs' mean step times with its 95% t interval (log scale) and the
 *   per-run values, × unroll as above; the trace's first and last tenth
 *   of steps (early, late); with price records (report_rows_priced) the
 *   priced step time of each run, Σ work × price + the group's fixed cost
 *   (bench/report/report_cost.h), its × unroll, early and late;
 * - noisy runs: runs whose step-time interquartile range exceeds
 *   REPORT_NOISE_IQR of their median (torch.utils.benchmark's rule);
 * - beside: ok runs whose record says another run of ours ran beside
 *   them on their host (report_ran_beside): their times are not those of
 *   a run alone, and the row's label says how many ("beside 2/3");
 * - valid perplexity: mean ± sample sd over the runs;
 * - memory: medians (the allocator's bytes do not vary between seeds);
 * - health: how many runs were healthy, unstable, diverged, unconverged
 *   (the record's `health`, bench/records/health.h), ended in error or
 *   were interrupted, and the row's labels. An error run counts in `runs`
 *   and its label, in no statistic; only ok runs' times are averaged.
 */
#ifndef DQ_BENCH_REPORT_H
#define DQ_BENCH_REPORT_H

#include <jansson.h>
#include <stdio.h>

#define REPORT_NOISE_IQR 0.10
#define REPORT_LEVEL	 0.95
/* Fewest runs an interval is given for: with 2, t(0.975, 1) = 12.7 makes
 * one so wide it says nothing; the printers say "n=2: no interval". */
#define REPORT_MIN_CI_RUNS 3

/* 1 when record rec ran beside another run of ours: its `beside` counts
 * another deqbench run on its host during it (runs > 0) or it ran as one
 * of several lanes (lanes > 1). Records without `beside` (made
 * before the field): 0, nothing known. */
int report_ran_beside(const json_t *rec);

/* The rows of records (an array of records; those without a config object
 * are left out), in the order their configurations first appear: an array
 * of objects documented in docs/commands.md (`report --format json`). New
 * reference; NULL when out of memory. */
json_t *report_rows(const json_t *records);

/* report_rows of records priced with the price records prices (an array
 * of kind "price" records, NULL: none) by the cost model of
 * bench/report/report_cost.h: each row then has `priced` (docs/commands.md
 * §report). New reference; NULL when out of memory. */
json_t *report_rows_priced(const json_t *records, const json_t *prices);

/* The price records of the JSONL file path (what: the command and flag
 * that named it, "report --price", "plan --price"): a new array, or NULL
 * with one line "WHAT PATH: reason; fix" in err (unreadable, a line that
 * is not JSON, no price record). */
json_t *report_price_records(const char *path, const char *what, char *err,
			     size_t n);

/* report_acc — the rows of records given one at a time, as a streaming
 * reader (deqbench report) has them: report_acc_rows gives what
 * report_rows gives of the same records in the same order, duplicates
 * left out and counted by report_unique's rule, while the accumulator
 * holds per row the first record's config, method and kind and a few
 * numbers per run, and 32 to 64 bytes per run for the duplicate check.
 * It keeps no record but the interrupted ones (a reference each): a run
 * interrupted and then rerun to the end by `suite --resume` (same config
 * and seed, status ok) is left out of its row and counted as superseded,
 * which is known only at the end. The caller may free each record after
 * report_acc_add (a held one lives on by its reference). Memory grows
 * with the rows and runs, not with the records' size. */
struct report_acc;
/* A new accumulator; NULL when out of memory. */
struct report_acc *report_acc_new(void);
/* Adds record rec (borrowed, not kept; one without a config object joins
 * no row). 0, or -1 when out of memory. */
int report_acc_add(struct report_acc *a, const json_t *rec);
/* The valid perplexity report_acc_rows' "to_target" is about (report
 * --target-ppl); NAN (the default) gives each group its automatic target,
 * the best perplexity every run of the group with a valid curve reached
 * (docs/commands.md). */
void report_acc_target(struct report_acc *a, double ppl);

/* Prices the rows of the records added after it (report_rows_priced);
 * prices is borrowed and must outlive a. */
void report_acc_set_prices(struct report_acc *a, const json_t *prices);
/* The rows of the records added (report_rows): the held interrupted runs
 * not rerun join their rows last. Ask once, after the last
 * report_acc_add. New reference;
 * NULL when out of memory. */
json_t *report_acc_rows(struct report_acc *a);
/* Frees a and what it holds; a may be NULL. */
void report_acc_free(struct report_acc *a);

/* report_unique — records without a second reading of one run: a record
 * equal in every field to an earlier one (a file given twice, a file
 * appended to itself), started_at set, is left out and appended to
 * dropped. Records are compared by a 128-bit hash of their canonical
 * text (report_acc.c says why a collision is negligible), the rule
 * report_acc and report_rows apply: they count the rest as runs and say
 * how many were left out (a row's "duplicates"), so compare, which calls
 * this, and report agree. A new array of the records kept, in order;
 * NULL when out of memory. */
json_t *report_unique(const json_t *records, json_t *dropped);

/* Prints rows (report_rows) as the markdown summary table, then, where
 * rows of both implementations are present, the deqbench / PyTorch table,
 * then, where rows were priced (report_rows_priced), the measured and
 * priced table,
 * then a list of the rows that combine commits (report_commits_text). */
void report_print_md(FILE *f, const json_t *rows);

/* Width in columns of report_print_term's lines (at most). */
#define REPORT_TERM_WIDTH 100

/* Prints rows as the terminal table (report's default), no line wider
 * than REPORT_TERM_WIDTH whatever the values: per group a heading line
 * ("== GROUP", wrapped), a header with the units, one line per row
 * (method label cut to fit, runs, step ms with its 95% interval, × unroll
 * with its interval — "n=2: no CI" in their place with too few runs —,
 * depth+solver and total peak × unroll, forward / backward converged %,
 * valid ppl mean±sd, "!" when labelled; a number too wide for its column
 * in exponent form), then the group's health labels as "! METHOD: LABELS"
 * lines (wrapped). */
void report_print_term(FILE *f, const json_t *rows);

/* Prints rows as CSV (RFC 4180): a header line, then one line per row with
 * the figures of report_rows (empty where null) and the health labels.
 * Record strings in the printers are made inert (textsafe.h): no CSV
 * formula, no markdown column or line break, no terminal control. */
void report_print_csv(FILE *f, const json_t *rows);

/* Writes the HTML report of n record files (paths[i] and its rows[i]):
 * one self-contained page with, per file, its summary table and the SVG
 * figures plots/plot.py drew beside it (PATH-stem.*.svg), each an <img>
 * of a data: URI (no script in an SVG runs, the page stays one file). 0, or -1
 * on a write error. */
int report_write_html(FILE *f, int n, char *const *paths,
		      const json_t *const *rows);

/* report_html_check_out — the --html OUT path, before any work: not one of
 * the n record files paths[] (compared by device and inode, links
 * followed), and a path the page can replace (fileio_check_replace): an
 * existing file only when it is a page report_write_html wrote. 0, or -1
 * with "report --html OUT...: reason; fix" in err. */
int report_html_check_out(const char *out, int n, char *const *paths, char *err,
			  size_t errlen);

/* x printed with printf format f into buf, "-" when x is not finite (a
 * null figure), with %.6g when f's text would not fit n bytes. */
void report_fmt(char *buf, size_t n, double x, const char *f);

/* The runs an interval or ratio object of a row (step_ms, step_x_unroll,
 * ...) lacked for its interval: its n (a ratio: the fewer of n and
 * n_unroll) when that is 1 or 2 and it has no interval, else 0. What the
 * printers put beside the estimate: "n=2: no interval". */
int report_few_runs(const json_t *o);

/* A CSV field (RFC 4180): quoted, inner quotes doubled, a cell a
 * spreadsheet would run as a formula prefixed with ' (textsafe_csv). */
void report_csv_str(FILE *f, const char *s);

/* What the printers say of a row of several commits whose runs carry one
 * build fingerprint ("commits a, b (one fingerprint F)") into buf; 0 (buf
 * empty) for a row of one commit or of records without a fingerprint. */
int report_commits_text(char *buf, size_t n, const json_t *row);

/* The "to_target" of row (report_rows) as one line of text into buf, "METHOD:
 * valid ppl P in S steps, T s (k/n runs, medians)" or "... not reached
 * (0/n runs)"; 0 (buf untouched) when the row has none. */
int report_target_text(char *buf, size_t n, const json_t *row);

/* report_rows then report_print_md: the summary `run`, `suite` and
 * `report` print. */
void record_summary(FILE *f, const json_t *records);

#endif
