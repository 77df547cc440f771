/* record_usable.h — the records `deqbench report` and `suite --resume`
 * use: those of this build's schema version (RECORD_SCHEMA) that pass
 * validate_record (VALIDATE_ALL_AGES: records written before a field was
 * added count too), fields it does not know aside (a newer build's, of the
 * same schema: readers ignore them, results/SCHEMA.md). A record of another
 * schema version, or one that breaks results/SCHEMA.md otherwise (timing
 * "garbage", a missing field), is neither a row of the table nor a done
 * run; nor is a price record (kind "price", `deqbench price`: valid, but
 * the price of a unit, not a run).
 */
#ifndef DQ_BENCH_RECORD_USABLE_H
#define DQ_BENCH_RECORD_USABLE_H

#include <jansson.h>
#include <stddef.h>

/* 1 when rec is usable; else 0 with a phrase in why (n bytes): "schema 99,
 * this build reads schema 1" or the first problem validate_record finds
 * (unknown fields aside), "field timing: expected object or null, got
 * string". */
int record_usable(const json_t *rec, char *why, size_t n);

/* Appends the usable records of the JSONL file path to arr, in file order.
 * Each other record is left out with a line on stderr, "deqbench: PATH:
 * LINE: record skipped: WHY; ..." (the first few of the file, then a
 * count); *skipped is increased by how many. 0, or -1 with one line in err
 * when the file cannot be read or a line is not one JSON object (as
 * record_read_jsonl). */
int record_read_usable(const char *path, json_t *arr, int *skipped, char *err,
		       size_t errlen);

/* Called with each usable record (borrowed: the reader frees it after
 * the call); 0 to go on, non-zero when out of memory (the read stops). */
typedef int (*record_usable_fn)(void *ctx, json_t *rec);

/* record_read_usable a line at a time: fn(ctx, rec) for each usable record
 * of path instead of keeping it, so a file of any length is read in
 * constant memory; the same lines on stderr, *skipped and errors. */
int record_each_usable(const char *path, record_usable_fn fn, void *ctx,
		       int *skipped, char *err, size_t errlen);

#endif
