/* cmd_validate.c — `deqbench validate [--strict] FILE.jsonl ...`: checks
 * every record of each file against results/SCHEMA.md (validate.h), reading
 * the files as `report` does (record_each_line), but a key twice in one
 * object makes a line malformed. Each problem is one line
 * on stderr, "FILE:LINE: field PATH: PROBLEM" (a malformed line: "FILE:LINE:
 * malformed JSON ..."), the first VALIDATE_SHOWN of each file; then one
 * summary line per file on stdout. Exit 0 when every record of every file
 * is valid, 2 when any is not or a file cannot be read.
 * `deqbench validate --schema-markdown [FILE]` prints SCHEMA.md's field
 * tables from the schema table (validate_schema_markdown), or replaces
 * FILE's marked tables by them.
 */
#include <stdio.h>
#include <string.h>

#include "cmd.h"
#include "../io/jsontext.h"
#include "../records/record.h"
#include "../records/validate.h"

/* Problems printed per file; the rest are counted in its summary. */
#define VALIDATE_SHOWN 20

/* One file's count of records and problems. */
struct vfile {
	const char *path;
	enum validate_mode mode;
	int lineno, records, invalid, problems;
};

static void show(struct vfile *s, const char *fmt, const char *a, const char *b)
{
	if (++s->problems > VALIDATE_SHOWN)
		return;
	fprintf(stderr, "%s:%d: ", s->path, s->lineno);
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
}

static void on_problem(void *ctx, const char *path, const char *what)
{
	show(ctx, "field %s: %s", *path ? path : "(record)", what);
}

static int on_line(void *ctx, int lineno, json_t *rec, int column,
		   const char *why)
{
	struct vfile *s = ctx;
	char col[32];
	s->lineno = lineno;
	s->records++;
	if (!rec) {
		snprintf(col, sizeof(col), "%d", column);
		show(s,
		     "malformed JSON at column %s: %s; each line must be one "
		     "JSON object",
		     col, why);
		s->invalid++;
	} else if (validate_record(rec, s->mode, on_problem, s) != 0) {
		s->invalid++;
	}
	return 0;
}

/* Validates one file and prints its summary: 0 valid, 1 not, -1 not
 * readable (one line on stderr). */
static int validate_file(const char *path, enum validate_mode mode)
{
	struct vfile s = {path, mode, 0, 0, 0, 0};
	char err[1200], more[48] = "";
	if (record_each_line_flags(path, JSON_REJECT_DUPLICATES, on_line, &s,
				   err, sizeof(err)) != 0) {
		fprintf(stderr, "deqbench: validate: %s\n", err);
		return -1;
	}
	if (s.problems > VALIDATE_SHOWN)
		snprintf(more, sizeof(more), " (the first %d shown)",
			 VALIDATE_SHOWN);
	if (s.invalid == 0)
		printf("%s: %d record%s valid%s\n", path, s.records,
		       s.records == 1 ? "" : "s",
		       mode == VALIDATE_STRICT ? " (strict)" : "");
	else
		printf("%s: %d of %d record%s invalid, %d problem%s%s\n", path,
		       s.invalid, s.records, s.records == 1 ? "" : "s",
		       s.problems, s.problems == 1 ? "" : "s", more);
	fflush(stdout);
	return s.invalid ? 1 : 0;
}

static void validate_usage(FILE *f)
{
	fputs(
	    "usage: deqbench validate [--strict] FILE.jsonl ...\n"
	    "       deqbench validate --schema-markdown [SCHEMA.md]\n"
	    "Checks every record against results/SCHEMA.md (fields, types, "
	    "values).\n"
	    "  --strict           also demand the fields older records lack\n"
	    "                     (every record this build writes has them)\n"
	    "  --schema-markdown  print SCHEMA.md's field tables, each after "
	    "a\n"
	    "                     marker line, from the table validate checks\n"
	    "                     against; with a file, replace its marked\n"
	    "                     tables by them\n"
	    "Exit status: 0 all valid, 2 a problem (one line each on stderr) "
	    "or an\n"
	    "unreadable file.\n",
	    f);
}

/* --schema-markdown [FILE]: the tables on stdout, or FILE's marked tables
 * replaced by them; exit 2 when other arguments came with it or FILE
 * cannot be updated, 1 when the rows do not make whole tables
 * (validate_schema_markdown's problems: a fault of the build). */
static int schema_markdown(int argc, char **argv)
{
	char err[1200], msg[1300];
	int file = -1;
	for (int i = 0; i < argc; i++)
		if (strcmp(argv[i], "--schema-markdown")) {
			if (file >= 0 || argv[i][0] == '-')
				return bad_input(
				    "validate: --schema-markdown "
				    "takes one FILE (SCHEMA.md) at "
				    "most");
			file = i;
		}
	if (file >= 0) {
		if (validate_schema_markdown_update(argv[file], err,
						    sizeof(err)) != 0) {
			snprintf(msg, sizeof(msg), "validate: %s", err);
			return bad_input(msg);
		}
		return 0;
	}
	if (validate_schema_markdown(stdout) != 0) {
		fprintf(stderr, "deqbench: validate: the schema table's rows "
				"do not make whole tables (a row without its "
				"meaning, or a shared row of two types)\n");
		return 1;
	}
	return 0;
}

int cmd_validate(int argc, char **argv)
{
	enum validate_mode mode = VALIDATE_ALL_AGES;
	int files = 0, bad = 0;
	char msg[600];
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			validate_usage(stdout);
			return 0;
		}
		if (!strcmp(argv[i], "--schema-markdown"))
			return schema_markdown(argc, argv);
		if (!strcmp(argv[i], "--strict")) {
			mode = VALIDATE_STRICT;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			snprintf(msg, sizeof(msg),
				 "validate: unknown option '%.*s'; use "
				 "--strict or give FILE.jsonl",
				 (int)jsontext_fit(argv[i], 200), argv[i]);
			return bad_input(msg);
		}
	}
	for (int i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--strict"))
			continue;
		files++;
		bad |= validate_file(argv[i], mode) != 0;
	}
	if (files == 0)
		return bad_input("validate: give one or more FILE.jsonl, e.g. "
				 "deqbench validate results/runs.jsonl");
	return bad ? EXIT_BAD_INPUT : 0;
}
