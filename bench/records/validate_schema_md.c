/* validate_schema_md.c — results/SCHEMA.md's field tables printed from the
 * schema table's rows (validate_schema.h): `deqbench validate
 * --schema-markdown`. A row's doc is its meaning; rows with a NULL doc join
 * the row before them, so "| `a`, `b` | int | ... |" is one table row. A
 * section's table lists its object's members and, below each member that
 * is an object with a table of its own, that object's members as
 * "`member.field`", except where SCHEMA.md describes them in prose
 * (VF_PROSE), in the key table (VF_CONFIG) or in a section of their own
 * (the price record's host, device and build). Members of a group of rows
 * that share one member table (solver.forward and solver.backward) are
 * listed side by side: "`forward.steps`, `backward.steps`".
 */
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../io/fileio.h"
#include "validate_schema_rows.h"

/* Paths of one table row: its names, the prefixes of a shared group. */
#define MD_MAX_PATHS 16
#define MD_PATH_LEN  128

struct md_paths {
	char p[MD_MAX_PATHS][MD_PATH_LEN];
	int n;
};

/* The member tables a section has listed, each with the path it was
 * listed under: a table listed again (memory's setup_live_bytes, the
 * categories of peak_bytes) says "as in `peak_bytes`" instead of its
 * meanings. */
#define MD_MAX_SEEN 16

struct md_seen {
	const struct vfield *members[MD_MAX_SEEN];
	char at[MD_MAX_SEEN][MD_PATH_LEN];
	int n;
};

/* SCHEMA.md's type cell of a row: "int \| null", "stats". */
static void type_cell(const struct vfield *f, char *buf, size_t n)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{VT_INT, "int"},	{VT_NUM, "number"}, {VT_STR, "string"},
		     {VT_BOOL, "bool"}, {VT_OBJ, "object"}, {VT_ARR, "array"},
		     {VT_NULL, "null"}};
	size_t l = 0;
	buf[0] = 0;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *t = names[i].name;
		if (!(f->types & names[i].bit))
			continue;
		if (f->doc_type && names[i].bit != VT_NULL)
			t = f->doc_type;
		if (l < n)
			l += (size_t)snprintf(buf + l, n - l, "%s%s",
					      l ? " \\| " : "", t);
	}
}

/* Rows in the group that starts at f: f and the rows after it whose doc
 * is NULL. */
static int group_len(const struct vfield *f)
{
	int k = 1;
	while (f[k].name && !f[k].doc)
		k++;
	return k;
}

/* 1 when members has a section of its own (a top-level field's). */
static int own_section(const struct vfield *members)
{
	for (const struct vfield *t = validate_schema(); t->name; t++)
		if (t->members == members)
			return 1;
	return 0;
}

/* 1 when the tables list the members of f's group under it. */
static int expands(const struct vfield *f, int k)
{
	if (!f->members || (f->flags & (VF_PROSE | VF_CONFIG)) ||
	    own_section(f->members))
		return 0;
	for (int i = 1; i < k; i++)
		if (f[i].members != f->members)
			return 0;
	return 1;
}

/* The group's paths, prefix by prefix: every prefix of pre, then every
 * row of the group, each followed by tail. Returns -1 when they do not
 * fit. */
static int group_paths(const struct md_paths *pre, const struct vfield *f,
		       int k, const char *tail, struct md_paths *out)
{
	out->n = 0;
	for (int i = 0; i < pre->n; i++)
		for (int j = 0; j < k; j++) {
			if (out->n == MD_MAX_PATHS)
				return -1;
			snprintf(out->p[out->n++], MD_PATH_LEN, "%s%s%s",
				 pre->p[i], f[j].name, tail);
		}
	return 0;
}

/* Prints the meaning cell of a group: its doc, or "as in `as_in`" and
 * the row's *Added* date. */
static void meaning_cell(FILE *out, const struct vfield *f, const char *as_in)
{
	if (as_in) {
		fprintf(out, " as in `%s`%s%s |\n", as_in,
			f->added ? ". Added " : "", f->added ? f->added : "");
		return;
	}
	fprintf(out, "%s%s |\n", f->doc && *f->doc ? " " : "",
		f->doc ? f->doc : "");
}

static int md_rows(FILE *out, const struct vfield *members,
		   const struct md_paths *pre, struct md_seen *seen,
		   const char *as_in);

/* Prints the rows of f's member table under the group's paths sub,
 * "as in" where the section listed that table before. */
static int md_members(FILE *out, const struct vfield *f,
		      const struct md_paths *sub, struct md_seen *seen,
		      const char *as_in)
{
	for (int i = 0; !as_in && i < seen->n; i++)
		if (seen->members[i] == f->members)
			as_in = seen->at[i];
	if (!as_in && seen->n < MD_MAX_SEEN) {
		seen->members[seen->n] = f->members;
		snprintf(seen->at[seen->n], MD_PATH_LEN, "%.*s",
			 (int)strlen(sub->p[0]) - 1, sub->p[0]);
		seen->n++;
	}
	return md_rows(out, f->members, sub, seen, as_in);
}

/* Prints the table rows of members under the prefixes pre (recursing
 * where expands says); seen NULL: the top level, whose objects have
 * sections of their own. Returns the number of problems: a group whose
 * rows differ in type, a first row without a doc, too many paths. */
static int md_rows(FILE *out, const struct vfield *members,
		   const struct md_paths *pre, struct md_seen *seen,
		   const char *as_in)
{
	int bad = 0;
	for (const struct vfield *f = members; f->name;) {
		int k = group_len(f);
		struct md_paths names, sub;
		char t0[64], t[64];
		type_cell(f, t0, sizeof(t0));
		for (int j = 1; j < k; j++) {
			type_cell(f + j, t, sizeof(t));
			bad += strcmp(t, t0) != 0;
		}
		bad += f->doc == NULL;
		if (group_paths(pre, f, k, "", &names) != 0)
			return bad + 1;
		fputs("|", out);
		for (int i = 0; i < names.n; i++)
			fprintf(out, "%s`%s`", i ? ", " : " ", names.p[i]);
		fprintf(out, " | %s |", t0);
		meaning_cell(out, f, as_in);
		if (seen && expands(f, k)) {
			if (group_paths(pre, f, k, ".", &sub) != 0)
				return bad + 1;
			bad += md_members(out, f, &sub, seen, as_in);
		}
		f += k;
	}
	return bad;
}

/* One section: its marker line, the table's head and its rows. */
static int md_section(FILE *out, const char *name, const struct vfield *members,
		      int expand)
{
	struct md_paths root = {.n = 1};
	struct md_seen seen = {.n = 0};
	root.p[0][0] = 0;
	fprintf(out,
		"<!-- schema:%s (generated: deqbench validate "
		"--schema-markdown) -->\n"
		"| field | type | meaning |\n"
		"|---|---|---|\n",
		name);
	return md_rows(out, members, &root, expand ? &seen : NULL, NULL);
}

int validate_schema_markdown(FILE *out)
{
	int bad = md_section(out, "top", validate_schema(), 0);
	for (const struct vfield *t = validate_schema(); t->name; t++) {
		if (!t->members || (t->flags & VF_CONFIG))
			continue;
		fputc('\n', out);
		bad += md_section(out, t->name, t->members, 1);
	}
	fputc('\n', out);
	bad += md_section(out, "price", validate_price_schema(), 1);
	return bad;
}

/* The section name of a marker line "<!-- schema:NAME ...": its length
 * at *name, or 0 when line is no marker. */
static size_t marker_name(const char *line, const char **name)
{
	static const char tag[] = "<!-- schema:";
	if (strncmp(line, tag, sizeof(tag) - 1))
		return 0;
	*name = line + sizeof(tag) - 1;
	return strcspn(*name, " \n-");
}

/* In gen (validate_schema_markdown's output), the section name's table:
 * its marker line and rows, at *chunk, and their length; 0 when gen has
 * no such section. */
static size_t gen_chunk(const char *gen, const char *name, size_t nl,
			const char **chunk)
{
	for (const char *p = gen; *p;) {
		const char *n, *end = strstr(p, "\n\n");
		size_t len = end ? (size_t)(end - p) + 1 : strlen(p);
		if (marker_name(p, &n) == nl && !strncmp(n, name, nl)) {
			*chunk = p;
			return len;
		}
		p += len + (end != NULL);
	}
	return 0;
}

/* doc with each marked table replaced by gen's, into out. Returns the
 * number of sections replaced, or -1 with err for a section gen lacks. */
static int replace_tables(const char *doc, const char *gen, FILE *out,
			  char *err, size_t n)
{
	int done = 0;
	for (const char *p = doc; *p;) {
		const char *name, *chunk, *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) + 1 : strlen(p), nl, cl;
		if (!(nl = marker_name(p, &name))) {
			fwrite(p, 1, len, out);
			p += len;
			continue;
		}
		if (!(cl = gen_chunk(gen, name, nl, &chunk))) {
			snprintf(err, n,
				 "no table '%.*s' in this build's schema",
				 (int)nl, name);
			return -1;
		}
		fwrite(chunk, 1, cl, out);
		done++;
		for (p += len; *p == '|';) {
			eol = strchr(p, '\n');
			p = eol ? eol + 1 : p + strlen(p);
		}
	}
	return done;
}

int validate_schema_markdown_update(const char *path, char *err, size_t n)
{
	char *gen = NULL, *doc = NULL, *res = NULL;
	size_t glen = 0, dlen = 0, rlen = 0;
	FILE *g = open_memstream(&gen, &glen), *r, *f;
	int bad = validate_schema_markdown(g), done = -1, want = 0;
	fclose(g);
	for (const char *p = gen; (p = strstr(p, "<!-- schema:")); p++)
		want++;
	if (bad)
		snprintf(err, n,
			 "the schema table's rows do not make whole "
			 "tables");
	else if (!(f = fopen(path, "r")))
		snprintf(err, n, "cannot read %s", path);
	else {
		r = open_memstream(&doc, &dlen);
		for (int c; (c = getc(f)) != EOF;)
			putc(c, r);
		fclose(f);
		fclose(r);
		r = open_memstream(&res, &rlen);
		done = replace_tables(doc, gen, r, err, n);
		fclose(r);
	}
	if (done >= 0 && done != want)
		snprintf(err, n,
			 "%s has %d marked tables, this build %d: "
			 "mark each table with its line from "
			 "--schema-markdown",
			 path, done, want);
	else if (done >= 0) {
		struct iovec iov = {res, rlen};
		done = fileio_replace(path, &iov, 1, err, n) == 0 ? done : -1;
	}
	free(gen);
	free(doc);
	free(res);
	return done == want ? 0 : -1;
}
