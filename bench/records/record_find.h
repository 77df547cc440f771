/* record_find.h — the longest run of a configuration among records files
 * (`deqbench plan`: a DEQ candidate's solver iterations and a candidate's
 * measured step time from the committed runs, docs/commands.md §plan). */
#ifndef DQ_BENCH_RECORD_FIND_H
#define DQ_BENCH_RECORD_FIND_H

#include <jansson.h>
#include <stddef.h>

/* The runs of path: a JSONL file, or a directory whose *.jsonl files are
 * read, subdirectories too, in byte order of their names, leaving out
 * subdirectories named skip (NULL: none). A run is a record of kind
 * train, impl deqbench and status ok; other lines (price records, eval
 * records, lines that are not JSON) are passed over. A new array of
 * {"where": "PATH:LINE", "rec": record}; NULL with one line in err when
 * path cannot be read (a directory's unreadable entries are passed over). */
json_t *record_find_load(const char *path, const char *skip, char *err,
			 size_t errlen);

/* Whether key is left out of the comparison (ctx: the caller's). */
typedef int (*record_find_skip_fn)(const char *key, void *ctx);

/* The run of runs (record_find_load) whose `config` equals want (a
 * config object, config_to_json) on every key of want that skip does not
 * leave out — numbers by value, a key the record lacks (a record made
 * before it) as defaults' value of it — with the most evals.steps; of
 * equally long ones the first. Borrowed; NULL when none. */
const json_t *record_find_longest(const json_t *runs, const json_t *want,
				  const json_t *defaults,
				  record_find_skip_fn skip, void *ctx);

/* The checkout deqbench was built from (DQ_SOURCE_ROOT, "." when the
 * build did not say): its results/ holds the committed runs. */
const char *record_find_source_root(void);

#endif
