/* record.h — run records: one JSON object per run, one line each, appended
 * whole or not at all to a JSONL file (results/SCHEMA.md documents every
 * field); the summary table of records is report.h's.
 */
#ifndef DQ_BENCH_RECORD_H
#define DQ_BENCH_RECORD_H

#include <jansson.h>
#include <stdio.h>

#include "record_num.h" /* RECORD_SCHEMA, record_num */

/* A record skeleton: "schema", "status" = "error", "message" = "", and
 * every other top-level key of results/SCHEMA.md present as null, so
 * readers can rely on the keys. */
json_t *record_new(void);

/* The record (or any JSON value) as compact JSON text, every real in the
 * shortest form that reads back as the same double (0.1, 0.00031622776601683794,
 * 1e-05; ".0" kept on integral reals so they read back as reals), so what a
 * record stores is exactly the value the run used. malloc'd (free it); NULL
 * when out of memory. */
char *record_dumps(const json_t *rec);

/* What makes two runs the same run, the one definition for suite
 * expansion's collapse of duplicates, `suite --resume`, the rows of the
 * summary table and compare's pairs: the flat config cfg without its
 * output-only keys (out, trace, save_params; config_key_is_output), and
 * without data_dir when the corpus is synthetic (the other corpora are
 * read from data_dir, so two directories are two datasets). data_dir is
 * compared as record_path_normalise writes it, so "dA", "./dA" and "dA/"
 * are one run; the directory is not looked at (a symbolic link and its
 * target, or "x/../dA" and "dA", stay two spellings: two runs). New
 * reference. */
json_t *record_run_identity(const json_t *cfg);

/* Path p spelt one way, from its text alone: empty and "." components
 * dropped ("./dA/", "dA//." and "dA" give "dA"; "//x//" gives "/x"), ".."
 * kept as it is, "." for a path that names the current directory ("",
 * "./"). malloc'd (free it); NULL when out of memory. */
char *record_path_normalise(const char *p);

/* Makes sure records can be appended to path without leaving anything
 * behind (fileio_probe_append: nothing is created that stays, so a run
 * refused later leaves no empty file or directory), and that an existing
 * regular file is a file of records report can read: empty or blank, or
 * its first non-blank line a record ("schema" and "config", or valid) and
 * every non-blank line one JSON object (a safetensors, config or suite
 * file, or records with a malformed line, are refused; the whole file is
 * read, under a shared lock). 0, or -1 with one line naming the path (and
 * the malformed line) and the fix. */
int record_check_out(const char *path, char *err, size_t errlen);
/* Appends the record as one compact line under an exclusive lock, creating
 * missing parent directories (kept) and the file; a file whose last byte is
 * not '\n' gets one first. On failure (full disk, /dev/full, a signal while
 * waiting for the lock) the file is left as it was (fileio_append) and err
 * says why. */
int record_append(const char *path, const json_t *rec, char *err,
		  size_t errlen);
/* record_append, and when that fails keeps the record: appends it to the
 * rescue file (fileio_rescue_path) and prints one line on stderr naming
 * out=, the reason and the rescue file, then the record line itself.
 * Returns 0 when appended to path, -1 when only rescued. */
int record_save(const char *path, const json_t *rec);

/* {"median","mean","p10","p90","min","max","p25","p75"} of x[n]
 * (percentiles by linear interpolation between order statistics); nulls
 * when n == 0. */
json_t *record_stats_json(const double *x, int n);

/* Called by record_each_line for each non-blank line of a JSONL file, with
 * its number (from 1) and either the parsed object (rec, borrowed: incref
 * it to keep it; column 0, why NULL) or, for a line that is not one JSON
 * object, rec NULL, the column of the error and jansson's reason ("not an
 * object" when the line is JSON of another type). Returns 0 to go on,
 * nonzero to stop reading. */
typedef int (*record_line_fn)(void *ctx, int lineno, json_t *rec, int column,
			      const char *why);

/* Reads a JSONL file line by line (trailing blanks, "\r" and "\n" cut,
 * blank lines skipped) and calls fn for each other line. 0 when the file
 * was read to its end or fn stopped, -1 with one line in err naming the
 * path for a file that cannot be opened, a directory, a FIFO or another
 * file that is not regular (refused, never waited on), or a read error. */
int record_each_line(const char *path, record_line_fn fn, void *ctx, char *err,
		     size_t errlen);

/* record_each_line with jansson's decoding flags for each line:
 * JSON_REJECT_DUPLICATES makes a line with a key twice in one object
 * malformed (why: jansson's "duplicate object key"), as `deqbench
 * validate` reads; record_each_line passes 0 (the last value counts). */
int record_each_line_flags(const char *path, size_t json_flags,
			   record_line_fn fn, void *ctx, char *err,
			   size_t errlen);

/* Appends every record (line) of a JSONL file to arr. Blank lines are
 * skipped; a malformed line is an error naming path:line, a directory or a
 * read error an error naming path. */
int record_read_jsonl(const char *path, json_t *arr, char *err, size_t errlen);


/* record_value_text — a config value as the summary table and
 * `suite --dry-run` print it: a string as it is, anything else as compact
 * JSON (reals with 6 significant digits). malloc'd (free it); NULL when out
 * of memory. */
char *record_value_text(const json_t *x);

/* record_blas_core — the OpenBLAS kernels a CPU record's times come from
 * (host.blas.core, results/SCHEMA.md §host): "unknown" for a CPU record
 * made before host.blas; NULL for a record of another device (a GPU's
 * times do not come from the host's BLAS). report and compare treat two
 * cores as two machines. Points into rec. */
const char *record_blas_core(const json_t *rec);

/* record_build — the string build.MEMBER of a record ("git_commit",
 * "fingerprint"), NULL when absent or not a string (build.fingerprint:
 * records made before the field). Points into rec. */
const char *record_build(const json_t *rec, const char *member);

#endif
