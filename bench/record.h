/* record.h — run records: one JSON object per run, one line each, appended
 * to a JSONL file with a single write() (results/SCHEMA.md documents every
 * field), and the markdown summary table printed after a suite and by
 * `deqbench report`.
 */
#ifndef DQ_BENCH_RECORD_H
#define DQ_BENCH_RECORD_H

#include <jansson.h>
#include <stdio.h>

#define RECORD_SCHEMA 1

/* A record skeleton: "schema", "status" = "error", "message" = "", and
 * every other top-level key of results/SCHEMA.md present as null, so
 * readers can rely on the keys. */
json_t *record_new(void);

/* Makes sure records can be appended to path: creates missing parent
 * directories and the file (existing content untouched). 0, or -1 with one
 * line naming the path and the fix. */
int record_check_out(const char *path, char *err, size_t errlen);
/* Appends the record as one compact line with a single write() on an
 * O_APPEND descriptor, so concurrent writers never interleave lines. */
int record_append(const char *path, const json_t *rec, char *err,
		  size_t errlen);

/* {"median","mean","p10","p90","min","max"} of x[n] (percentiles by linear
 * interpolation between order statistics); nulls when n == 0. */
json_t *record_stats_json(const double *x, int n);

/* Appends every record (line) of a JSONL file to arr. Blank lines are
 * skipped; a malformed line is an error naming path:line. */
int record_read_jsonl(const char *path, json_t *arr, char *err, size_t errlen);

/* Prints the markdown summary of records (array): one row per distinct
 * config (repeats aggregated: medians), step time and depth+solver peak
 * relative to the unroll row of the same group (same config apart from the
 * method keys), solver iterations and valid perplexity. */
void record_summary(FILE *f, const json_t *records);

#endif
