/* record_usable.c — which records report and --resume use (see
 * record_usable.h). */
#include "record_usable.h"

#include <stdio.h>
#include <string.h>

#include "record.h"
#include "validate.h"

/* Skipped records of one file named one by one on stderr; the rest are
 * counted. */
#define USABLE_SHOWN 5

/* validate_record's report: keeps the first problem that is not an
 * unknown field. */
struct first_problem {
	char *why;
	size_t n;
	int got;
};

static void on_problem(void *ctx, const char *path, const char *what)
{
	struct first_problem *p = ctx;
	/* a field of a newer build (same schema): readers ignore it */
	if (!strncmp(what, "unknown field", 13) || p->got++)
		return;
	if (*path)
		snprintf(p->why, p->n, "field %s: %s", path, what);
	else
		snprintf(p->why, p->n, "%s", what);
}

int record_usable(const json_t *rec, char *why, size_t n)
{
	const json_t *v = json_object_get(rec, "schema");
	struct first_problem p = {why, n, 0};
	const char *kind = json_string_value(json_object_get(rec, "kind"));
	if (kind && !strcmp(kind, "price")) {
		snprintf(why, n,
			 "a price record (deqbench price), not a run's: "
			 "report, compare and suite --resume read run records");
		return 0;
	}
	if (json_is_integer(v) && json_integer_value(v) != RECORD_SCHEMA) {
		snprintf(why, n, "schema %lld, this build reads schema %d",
			 (long long)json_integer_value(v), RECORD_SCHEMA);
		return 0;
	}
	validate_record(rec, VALIDATE_ALL_AGES, on_problem, &p);
	return p.got == 0;
}

/* record_each_usable's state. */
struct usable_ctx {
	record_usable_fn fn;
	void *fctx;
	const char *path;
	char *err;
	size_t errlen;
	int bad, skipped;
};

static int usable_line(void *ctx, int lineno, json_t *rec, int column,
		       const char *why)
{
	struct usable_ctx *c = ctx;
	char what[512];
	if (rec && !record_usable(rec, what, sizeof(what))) {
		const char *k = json_string_value(json_object_get(rec, "kind"));
		int price = k && !strcmp(k, "price");
		if (c->skipped++ < USABLE_SHOWN)
			fprintf(stderr,
				"deqbench: %s:%d: record skipped: %s%s%s%s\n",
				c->path, lineno, what,
				price ? "" : "; deqbench validate ",
				price ? "" : c->path,
				price ? "" : " lists its problems");
		return 0;
	}
	if (rec && c->fn(c->fctx, rec) == 0)
		return 0;
	snprintf(c->err, c->errlen,
		 "%s:%d:%d: malformed record: %s; each line must be one JSON "
		 "object",
		 c->path, lineno, rec ? 0 : column,
		 rec ? "out of memory" : why);
	c->bad = 1;
	return 1;
}

int record_each_usable(const char *path, record_usable_fn fn, void *ctx,
		       int *skipped, char *err, size_t errlen)
{
	struct usable_ctx c = {fn, ctx, path, err, errlen, 0, 0};
	if (record_each_line(path, usable_line, &c, err, errlen) != 0)
		return -1;
	if (c.skipped > USABLE_SHOWN)
		fprintf(stderr,
			"deqbench: %s: %d records skipped in all (the first "
			"%d named above)\n",
			path, c.skipped, USABLE_SHOWN);
	*skipped += c.skipped;
	return c.bad ? -1 : 0;
}

static int append_to(void *arr, json_t *rec)
{
	return json_array_append(arr, rec);
}

int record_read_usable(const char *path, json_t *arr, int *skipped, char *err,
		       size_t errlen)
{
	return record_each_usable(path, append_to, arr, skipped, err, errlen);
}
