/* validate_schema.h — results/SCHEMA.md as a declarative table
 * (validate_schema.c): one row per documented field, with its JSON types,
 * whether null is allowed, its allowed values, and when it was added. The
 * checker that walks a record along it is validate.h's; this header needs
 * nothing above it.
 */
#ifndef DQ_BENCH_VALIDATE_SCHEMA_H
#define DQ_BENCH_VALIDATE_SCHEMA_H

#include <stdio.h>

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
	/* a fraction: a number in [0, 1] */
	VF_FRACTION = 128,
	/* a count that starts at 1 (plan.rank) */
	VF_FROM_1 = 256,
	/* build.git_commit: 12 to 40 lower-case hex digits (git describe
	 * --abbrev=12 lengthens an ambiguous prefix), "-dirty" after them,
	 * or "unknown" */
	VF_COMMIT = 512,
	/* build.fingerprint: 16 lower-case hex digits
	 * (scripts/fingerprint.py) */
	VF_FINGERPRINT = 1024,
};

/* One field: a member of an object (name) or the element of an array. */
struct vfield {
	const char *name;
	unsigned types;		      /* enum vtype, or-ed */
	const char *const *values;    /* allowed strings, NULL-terminated;
				      NULL: any string */
	const int *ints;	      /* allowed integers, 0-terminated; NULL:
					 any */
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
	const char *doc;	      /* SCHEMA.md's meaning of the field (its
					 table's third column; "" for none);
					 NULL: the row shares the previous
					 row's table row ("| `a`, `b` |"),
					 whose type it has */
};

/* The top-level fields of a record (results/SCHEMA.md "Top level"),
 * ending with a row whose name is NULL. */
const struct vfield *validate_schema(void);

/* The fields of a price record (kind "price", `deqbench price`;
 * results/SCHEMA.md §Price records), ending with a row whose name is
 * NULL. */
const struct vfield *validate_price_schema(void);

/* The work units a price record may name (its `unit`; SCHEMA.md §Price
 * records), NULL-terminated: `deqbench price` times exactly these. */
extern const char *const validate_price_units[];

/* validate_schema_markdown — prints results/SCHEMA.md's field tables
 * from the rows' docs (validate_schema_md.c), each after a marker line
 * "<!-- schema:SECTION (generated: ...) -->": "top" (the top level), each
 * top-level object's name in the table's order, then "price" (§Price
 * records); a blank line between tables. Returns the number of problems
 * in the rows (a table row whose fields differ in type, a group without a
 * doc); 0: the tables are whole. `deqbench validate --schema-markdown`. */
int validate_schema_markdown(FILE *out);

/* validate_schema_markdown_update — rewrites the file path (results/
 * SCHEMA.md) with each table after a marker line replaced by the table of
 * that section from validate_schema_markdown; the rest of the file as it
 * was. Returns 0, or -1 with err (a section this build lacks, a marker
 * missing from the file, a write that failed; the file then unchanged).
 * `deqbench validate --schema-markdown FILE`. */
int validate_schema_markdown_update(const char *path, char *err, size_t n);

/* Config keys that records written before they existed lack (every other
 * key of `deqbench run --help` is in every record), NULL-terminated. */
extern const char *const validate_config_added[];
/* Config keys a record may lack even under --strict: absent means the
 * key's default (precision fp32, compile false), as in every record
 * written before these keys existed, results/cpu's included.
 * NULL-terminated. */
extern const char *const validate_config_defaulted[];

#endif
