/* validate.h — run records checked against results/SCHEMA.md: the schema
 * as a declarative table (validate_schema.c: one row per documented field,
 * with its JSON types, whether null is allowed, its allowed values, and
 * when it was added) and the checker that walks a record along it
 * (validate.c). `deqbench validate` (cmd_validate.c) runs it on JSONL
 * files; SCHEMA.md's field tables are printed from the table's rows
 * (`deqbench validate --schema-markdown`, validate_schema_md.c), and
 * tests/test_schema.c checks the table against them, both ways, so the
 * document, the table and the records written by the code cannot drift
 * apart.
 */
#ifndef DQ_BENCH_VALIDATE_H
#define DQ_BENCH_VALIDATE_H

#include <jansson.h>

#include "validate_report.h"
#include "validate_schema.h"

/* validate_record — checks a record (one JSON object of a JSONL file)
 * against the schema table, in the table's order, then members that the
 * table does not list (unknown fields are problems: a field the code
 * writes must be documented). Also: `message` is "" exactly when `status`
 * is "ok"; numbers >= 0 but where VF_SIGNED; times real UTC times; and the
 * sections SCHEMA.md asks of the status and kind: an ok record has every
 * section a finished run has (timing, memory, solver, evals too for kind
 * train), kind eval none of training's, trace with config trace=true,
 * pretrain with method=deq and pretrain_steps > 0, started_at null only
 * in a crashed suite run's error record; strings without control
 * characters, fractions in [0, 1] and the other ranges of the table; and
 * the rules between fields (validate_cross.h). Paths and texts given to
 * report have their control characters written as \xNN. Calls report
 * (may be NULL) once per problem and returns the number of problems (0:
 * valid). */
int validate_record(const json_t *rec, enum validate_mode mode,
		    validate_report_fn report, void *ctx);

/* v's JSON type in SCHEMA.md's words: "null", "bool", "int", "real",
 * "string", "object", "array". */
const char *validate_type_name(const json_t *v);

/* mask (enum vtype) as "int or null", "number", "object or null". */
void validate_types_text(unsigned mask, char *buf, size_t n);

#endif
