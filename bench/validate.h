/* validate.h — run records checked against results/SCHEMA.md: the schema
 * as a declarative table (validate_schema.c: one row per documented field,
 * with its JSON types, whether null is allowed, its allowed values, and
 * when it was added) and the checker that walks a record along it
 * (validate.c). `deqbench validate` (cmd_validate.c) runs it on JSONL
 * files; tests/test_validate.c checks the table against SCHEMA.md's
 * tables, both ways, so the document, the table and the records written by
 * the code cannot drift apart.
 */
#ifndef DQ_BENCH_VALIDATE_H
#define DQ_BENCH_VALIDATE_H

#include <jansson.h>

/* JSON types a field may have (or-ed). VT_NUM is any number, integer or
 * real (SCHEMA.md's `number`); VT_INT a JSON integer only. */
enum vtype {
	VT_NULL = 1,
	VT_BOOL = 2,
	VT_INT = 4,
	VT_NUM = 8,
	VT_STR = 16,
	VT_OBJ = 32,
	VT_ARR = 64,
};

/* Row flags. */
enum vflag {
	/* may be absent whatever the record's age (host.caches' levels:
	 * only those the machine has) */
	VF_OPTIONAL = 1,
	/* SCHEMA.md describes the members or elements in prose, not in
	 * table rows (stats, host.caches, model.params, the trace arrays'
	 * entries, inference.forward_solve): tests compare only the row */
	VF_PROSE = 2,
	/* the `config` object: every member is a config key, checked by
	 * config_check_json against the key table (`deqbench run --help`) */
	VF_CONFIG = 4,
	/* a UTC time "2025-01-31T12:00:00Z" */
	VF_TIME = 8,
	/* the schema version: must equal RECORD_SCHEMA */
	VF_VERSION = 16,
	/* a number that may be negative (a loss, memory.offload.overlap);
	 * every other number outside `config` and the keyed fields is a
	 * size, count, rate or time, >= 0 */
	VF_SIGNED = 32,
	/* the implementation: "deqbench" or "pytorch-<torch version>" */
	VF_IMPL = 64,
};

/* One field: a member of an object (name) or the element of an array. */
struct vfield {
	const char *name;
	unsigned types;		      /* enum vtype, or-ed */
	const char *const *values;    /* allowed strings, NULL-terminated;
				      NULL: any string */
	const char *key;	      /* config key whose type, range and values
				      the value must also satisfy (method.k,
				      model.kind: "model"); NULL: none */
	const struct vfield *members; /* an object's fields, ending with a
					 row whose name is NULL; NULL: not
					 checked */
	const struct vfield *elem;    /* an array's element; NULL: any */
	int min_items, max_items;     /* array length bounds; 0: none */
	const char *doc_type;	      /* SCHEMA.md's name of the type when
					 it is not the plain one ("stats") */
	const char *added;	      /* date the field was added: records
					 written before it lack it; NULL:
					 in every record of the schema */
	unsigned flags;		      /* enum vflag */
};

/* The top-level fields of a record (results/SCHEMA.md "Top level"),
 * ending with a row whose name is NULL. */
const struct vfield *validate_schema(void);

/* Config keys that records written before they existed lack (every other
 * key of `deqbench run --help` is in every record), NULL-terminated. */
extern const char *const validate_config_added[];

/* What to demand of a record. */
enum validate_mode {
	/* the fields every record of the schema has: a field with an
	 * `added` date, or a config key of validate_config_added, may be
	 * absent (an older record) */
	VALIDATE_ALL_AGES = 0,
	/* every field of the current schema: what this build writes */
	VALIDATE_STRICT = 1,
};

/* Called for each problem: path is the field ("timing.step_ms.p10",
 * "model.params[2].shape"; "" for the record as a whole), what is the
 * problem as a phrase ("expected int, got string", "missing (expected
 * object or null)", "unknown field", "expected one of ok, diverged,
 * interrupted, error, got \"okay\""). */
typedef void (*validate_report_fn)(void *ctx, const char *path,
				   const char *what);

/* validate_record — checks a record (one JSON object of a JSONL file)
 * against the schema table, in the table's order, then members that the
 * table does not list (unknown fields are problems: a field the code
 * writes must be documented). Also: `message` is "" exactly when `status`
 * is "ok"; numbers >= 0 but where VF_SIGNED; times real UTC times; and the
 * sections SCHEMA.md asks of the status and kind: an ok record has every
 * section a finished run has (timing, memory, solver, evals too for kind
 * train), kind eval none of training's, trace with config trace=true,
 * pretrain with method=deq and pretrain_steps > 0, started_at null only
 * in a crashed suite run's error record. Calls report (may be NULL) once
 * per problem and returns the number of problems (0: valid). */
int validate_record(const json_t *rec, enum validate_mode mode,
		    validate_report_fn report, void *ctx);

/* v's JSON type in SCHEMA.md's words: "null", "bool", "int", "real",
 * "string", "object", "array". */
const char *validate_type_name(const json_t *v);

/* mask (enum vtype) as "int or null", "number", "object or null". */
void validate_types_text(unsigned mask, char *buf, size_t n);

#endif
