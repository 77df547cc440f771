/* test_schema.c — the schema table of `deqbench validate`
 * (bench/records/validate.h) against results/SCHEMA.md's tables, both
 * ways, and those tables the output of `deqbench validate
 * --schema-markdown`. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "test_cli.h"
#include "validate.h"

/* ---- results/SCHEMA.md's tables ----
 * Sections are "## `name`" headings (or "## Top level"); each table row
 * "| `a`, `b.c` | type \\| null | meaning |" documents the paths under the
 * section with a type from a small vocabulary; a meaning with "Added 20"
 * marks fields that older records lack. */

struct doc_field {
	char path[128];
	char types[64]; /* "|int|null|" */
	int added;
};

struct doc {
	struct doc_field f[400];
	int n;
};

/* Splits a table row into up to 4 cells on '|' not preceded by '\'. */
static int row_cells(char *line, char **cells)
{
	char *p = line + 1, *q;
	int nc = 0;
	while (nc < 4 && (q = strchr(p, '|'))) {
		while (q && q[-1] == '\\')
			q = strchr(q + 1, '|');
		if (!q)
			break;
		*q = 0;
		cells[nc++] = p;
		p = q + 1;
	}
	return nc;
}

static void doc_row(struct doc *d, const char *prefix, char *line)
{
	static const char *const known = "|int|number|string|bool|object|"
					 "array|stats|work_unit|null|";
	char *cells[4], types[64] = "|";
	int nc = row_cells(line, cells), added;
	cr_assert_geq(nc, 3, "SCHEMA.md: bad row %s", line);
	added = strstr(cells[2], "Added 20") != NULL;
	for (char *t = strtok(cells[1], " \\|"); t; t = strtok(NULL, " \\|")) {
		char tok[32];
		snprintf(tok, sizeof(tok), "|%s|", t);
		cr_assert(strstr(known, tok), "SCHEMA.md: unknown type '%s'",
			  t);
		strcat(types, t);
		strcat(types, "|");
	}
	for (char *a = strchr(cells[0], '`'); a; a = strchr(a + 1, '`')) {
		char *b = strchr(a + 1, '`');
		struct doc_field *f;
		cr_assert_not_null(b);
		*b = 0;
		cr_assert_lt(d->n, 400);
		f = &d->f[d->n++];
		snprintf(f->path, sizeof(f->path), "%s%s", prefix, a + 1);
		snprintf(f->types, sizeof(f->types), "%s", types);
		f->added = added;
		a = b;
	}
}

static void doc_load(struct doc *d)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char path[1024], prefix[64] = "", *line = NULL;
	int in_section = 0;
	size_t cap = 0;
	FILE *f;
	cr_assert_not_null(root, "DQ_SOURCE_ROOT must give the source tree");
	snprintf(path, sizeof(path), "%s/results/SCHEMA.md", root);
	f = fopen(path, "r");
	cr_assert_not_null(f, "cannot read %s", path);
	d->n = 0;
	while (getline(&line, &cap, f) > 0) {
		if (!strncmp(line, "## ", 3)) {
			char *a = strchr(line, '`'),
			     *b = a ? strchr(a + 1, '`') : NULL;
			in_section = 1;
			if (a && b) {
				*b = 0;
				snprintf(prefix, sizeof(prefix), "%s.", a + 1);
			} else if (strstr(line, "Top level")) {
				prefix[0] = 0;
			} else {
				in_section = 0;
			}
			continue;
		}
		if (in_section && !strncmp(line, "| `", 3))
			doc_row(d, prefix, line);
	}
	free(line);
	fclose(f);
	cr_assert_gt(d->n, 50, "SCHEMA.md: only %d fields parsed", d->n);
}

/* The table flattened to SCHEMA.md's rows: members of rows whose members
 * the document gives in prose (VF_PROSE) or in the key table (VF_CONFIG)
 * are not rows there. */
static void table_rows(const struct vfield *members, const char *prefix,
		       struct doc *out)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{VT_INT, "int"},	{VT_NUM, "number"}, {VT_STR, "string"},
		     {VT_BOOL, "bool"}, {VT_OBJ, "object"}, {VT_ARR, "array"},
		     {VT_NULL, "null"}};
	for (const struct vfield *f = members; f->name; f++) {
		struct doc_field *d = &out->f[out->n++];
		cr_assert_lt(out->n, 400);
		snprintf(d->path, sizeof(d->path), "%s%s", prefix, f->name);
		snprintf(d->types, sizeof(d->types), "|");
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
			const char *t = names[i].name;
			if (!(f->types & names[i].bit))
				continue;
			if (f->doc_type && names[i].bit != VT_NULL)
				t = f->doc_type;
			strcat(d->types, t);
			strcat(d->types, "|");
		}
		d->added = f->added != NULL;
		if (f->members && !(f->flags & (VF_PROSE | VF_CONFIG))) {
			char p[140];
			snprintf(p, sizeof(p), "%s.", d->path);
			table_rows(f->members, p, out);
		}
	}
}

/* "|a|b|" and "|b|a|" name the same types. */
static int same_types(const char *a, const char *b)
{
	char buf[64], *save = NULL;
	int na = 0, nb = 0;
	snprintf(buf, sizeof(buf), "%s", a);
	for (char *t = strtok_r(buf, "|", &save); t;
	     t = strtok_r(NULL, "|", &save)) {
		char tok[40];
		snprintf(tok, sizeof(tok), "|%s|", t);
		if (!strstr(b, tok))
			return 0;
		na++;
	}
	for (const char *p = b + 1; *p; p++)
		nb += *p == '|';
	return na == nb;
}

static const struct doc_field *doc_find(const struct doc *d, const char *p)
{
	for (int i = 0; i < d->n; i++)
		if (!strcmp(d->f[i].path, p))
			return &d->f[i];
	return NULL;
}

Test(schema, table_matches_schema_md)
{
	static struct doc doc, table;
	doc_load(&doc);
	table.n = 0;
	table_rows(validate_schema(), "", &table);
	for (int i = 0; i < doc.n; i++) {
		const struct doc_field *t = doc_find(&table, doc.f[i].path);
		cr_assert_not_null(t,
				   "SCHEMA.md documents %s; "
				   "bench/records/validate_schema.c lacks it",
				   doc.f[i].path);
		cr_assert(same_types(t->types, doc.f[i].types),
			  "%s: SCHEMA.md says %s, the table %s", t->path,
			  doc.f[i].types, t->types);
		cr_assert_eq(t->added, doc.f[i].added,
			     "%s: 'Added' in SCHEMA.md %d, in the table %d",
			     t->path, doc.f[i].added, t->added);
	}
	for (int i = 0; i < table.n; i++)
		cr_assert_not_null(doc_find(&doc, table.f[i].path),
				   "bench/records/validate_schema.c lists %s; "
				   "SCHEMA.md does not",
				   table.f[i].path);
	cr_assert_eq(doc.n, table.n);
	for (int i = 0; validate_config_added[i]; i++)
		cr_assert(config_key_known(validate_config_added[i]), "%s",
			  validate_config_added[i]);
}

/* results/SCHEMA.md's field tables are `deqbench validate
 * --schema-markdown`'s: each table after its marker line, row for row,
 * and no marked table the build lacks. */
Test(schema, tables_generated)
{
	const char *root = getenv("DQ_SOURCE_ROOT");
	char path[1024], *gen = NULL, *doc;
	size_t glen = 0;
	int want = 0, have = 0;
	FILE *mf = open_memstream(&gen, &glen);
	cr_assert_not_null(root, "DQ_SOURCE_ROOT must give the source tree");
	cr_assert_eq(validate_schema_markdown(mf), 0,
		     "validate_schema*.c: a row without its .doc, or rows of "
		     "two types in one table row");
	fclose(mf);
	snprintf(path, sizeof(path), "%s/results/SCHEMA.md", root);
	doc = cli_read(path, NULL);
	cr_assert_not_null(doc, "cannot read %s", path);
	for (char *p = gen; *p; want++) {
		char *end = strstr(p, "\n\n"), *at;
		if (end)
			end[1] = 0;
		at = strstr(doc, p);
		cr_assert(at && at[strlen(p)] != '|',
			  "results/SCHEMA.md's table is stale or unmarked; "
			  "regenerate its tables with `build/bench/deqbench "
			  "validate --schema-markdown results/SCHEMA.md` "
			  "(after the fields' .doc in "
			  "bench/records/validate_schema*.c). Wanted:\n%s",
			  p);
		p = end ? end + 2 : p + strlen(p);
	}
	for (const char *p = doc; (p = strstr(p, "\n<!-- schema:")); p++)
		have++;
	cr_assert_eq(have, want,
		     "results/SCHEMA.md has %d marked tables, deqbench "
		     "validate --schema-markdown %d",
		     have, want);
	free(gen);
	free(doc);
}
