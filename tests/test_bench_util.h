/* test_bench_util.h — helpers shared by the tests of bench/ (test_record.c,
 * test_commands.c, test_params.c, test_signals.c, test_data.c): the tiny
 * in-process config, fields of a record by dotted path, the record checked
 * against results/SCHEMA.md, word-level text corpora in a directory, bad
 * input through the binary (exit 2, one line, results untouched) and a cell
 * of the summary table. Header-only, static inline (a test need not use
 * every helper), on top of test_cli.h. */
#ifndef DQ_TEST_BENCH_UTIL_H
#define DQ_TEST_BENCH_UTIL_H

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "test_cli.h"
#include "validate.h"

/* The tiny run's keys on the command line (3 layers, 4 steps). */
#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=4", "layers=3", "steps=4", "warmup_steps=1",           \
	    "eval_tokens=32", "threads=1"

/* The tiny in-process run of method: synthetic corpus of 50 words,
 * d_model 16, 4 layers, 6 steps (2 warm-up), a trace; finished. */
static inline void tiny_config(struct bench_config *c, const char *method)
{
	char err[512];
	const char *kv[] = {"corpus=synthetic", "d_model=16",  "n_heads=2",
			    "d_ff=32",		"seq_len=8",   "batch_size=4",
			    "vocab_size=50",	"layers=4",    "steps=6",
			    "warmup_steps=2",	"lr_warmup=2", "eval_tokens=64",
			    "threads=1",	"trace=true",  NULL};
	config_defaults(c);
	for (int i = 0; kv[i]; i++)
		cr_assert_eq(config_set_arg(c, kv[i], err, sizeof(err)), 0,
			     "%s", err);
	cr_assert_eq(config_set(c, "method", method, err, sizeof(err)), 0);
	cr_assert_eq(config_finish(c, err, sizeof(err)), 0, "%s", err);
}

/* The member of o at a dotted path ("timing.step_ms.median"); fails the
 * test when one is missing. */
static inline const json_t *at(const json_t *o, const char *path)
{
	char buf[256], *save = NULL, *tok;
	const json_t *cur = o;
	snprintf(buf, sizeof(buf), "%s", path);
	for (tok = strtok_r(buf, ".", &save); tok;
	     tok = strtok_r(NULL, ".", &save)) {
		cur = json_object_get(cur, tok);
		cr_assert_not_null(cur, "record lacks %s", path);
	}
	return cur;
}

/* Number at path of r (NAN when absent). */
static inline double num_at(const json_t *r, const char *path)
{
	return json_number_value(at(r, path));
}

#define NUM(r, p) cr_assert(json_is_number(at(r, p)), "%s not a number", p)
#define STR(r, p) cr_assert(json_is_string(at(r, p)), "%s not a string", p)
#define OBJ(r, p) cr_assert(json_is_object(at(r, p)), "%s not an object", p)

/* ---- results/SCHEMA.md as a checker ----
 * The schema's table (bench/records/validate.h, compared with SCHEMA.md's tables by
 * tests/test_validate.c) in strict mode: every field of the current schema
 * present with a documented type and value, and nothing undocumented. */

static inline void report_problem(void *ctx, const char *path, const char *what)
{
	(void)ctx;
	cr_log_error("record field %s: %s", path, what);
}

static inline void check_schema(const json_t *r)
{
	int n = validate_record(r, VALIDATE_STRICT, report_problem, NULL);
	cr_assert_eq(n, 0, "%d problems against results/SCHEMA.md (logged)", n);
}

/* Word-level text in a temp dir: 3 files, vocabulary from the train split. */
static inline void write_text_corpus(const char *dir)
{
	static const char *const words[] = {
	    "the", "cat", "sat", "on",	  "a",	   "mat", "and",
	    "dog", "ran", "to",	 "house", "green", "big", "red"};
	const char *names[] = {"train.txt", "valid.txt", "test.txt"};
	const int lines[] = {300, 40, 40};
	unsigned x = 12345;
	for (int k = 0; k < 3; k++) {
		char p[600];
		FILE *f;
		snprintf(p, sizeof(p), "%s/%s", dir, names[k]);
		f = fopen(p, "w");
		cr_assert_not_null(f);
		for (int l = 0; l < lines[k]; l++) {
			for (int w = 0; w < 8; w++) {
				x = x * 1103515245u + 12345u;
				fprintf(f, "%s%s", w ? " " : "",
					words[(x >> 16) % 14]);
			}
			/* one word only the test split has: <unk> there */
			fprintf(f, "%s\n", k == 2 && l == 0 ? " zebra" : "");
		}
		fclose(f);
	}
}

/* A word-level text corpus in dir (which must exist) whose vocabulary is
 * the n_words words PREFIX0 .. PREFIX<n_words-1>: two prefixes, two
 * corpora with different word -> id maps (train 300 lines, valid and test
 * 40, of 8 words). */
static inline void write_word_corpus(const char *dir, const char *prefix,
				     int n_words)
{
	const char *names[] = {"train.txt", "valid.txt", "test.txt"};
	const int lines[] = {300, 40, 40};
	unsigned x = 777;
	for (int k = 0; k < 3; k++) {
		char p[600];
		FILE *f;
		snprintf(p, sizeof(p), "%s/%s", dir, names[k]);
		f = fopen(p, "w");
		cr_assert_not_null(f);
		for (int l = 0; l < lines[k]; l++)
			for (int w = 0; w < 8; w++) {
				x = x * 1103515245u + 12345u;
				fprintf(f, "%s%s%u%s", w ? " " : "", prefix,
					(x >> 16) % (unsigned)n_words,
					w == 7 ? "\n" : "");
			}
		fclose(f);
	}
}

/* Every bad input: exit 2, one line on stderr, results file untouched. */
static inline void expect_bad(const char *const *args, const char *results,
			      const char *must_contain)
{
	char err[4096];
	size_t n0, n1;
	char *before = cli_read(results, &n0), *after;
	int rc = cli_run(args, 0, err, sizeof(err));
	char *nl = strchr(err, '\n');
	cr_assert_eq(rc, 2, "%s %s: exit %d, stderr: %s", args[0], args[1], rc,
		     err);
	cr_assert(nl && nl[1] == 0, "one line expected, got: %s", err);
	if (must_contain)
		cr_assert(strstr(err, must_contain), "'%s' not in: %s",
			  must_contain, err);
	after = cli_read(results, &n1);
	cr_assert_eq(n0, n1);
	cr_assert_eq(memcmp(before, after, n0), 0, "results file changed");
	free(before);
	free(after);
}

/* Cell of deqbench's summary table (markdown) in text: the column headed
 * col, in the first row whose method cell starts with method. A malloc'd,
 * trimmed copy; fails the test when the table, column or row is missing. */
static inline char *table_cell(const char *text, const char *method,
			       const char *col)
{
	char cells[2][32][128];
	int ncol = -1, want = -1;
	for (const char *l = text; l && *l;
	     l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		int n = 0, row = ncol >= 0;
		const char *p = l + 1;
		if (*l != '|')
			continue;
		while (n < 32 && *p && *p != '\n') {
			const char *e = strpbrk(p, "|\n");
			size_t len;
			if (!e || *e != '|')
				break;
			while (*p == ' ')
				p++;
			len = (size_t)(e - p);
			while (len && p[len - 1] == ' ')
				len--;
			snprintf(cells[row][n++], 128, "%.*s", (int)len, p);
			p = e + 1;
		}
		if (!row && n > 1 && !strcmp(cells[0][1], "method")) {
			ncol = n;
			for (int i = 0; i < n; i++)
				if (!strcmp(cells[0][i], col))
					want = i;
			cr_assert_geq(want, 0, "no column '%s' in:\n%s", col,
				      text);
		} else if (row && n == ncol &&
			   !strncmp(cells[1][1], method, strlen(method))) {
			return strdup(cells[1][want]);
		}
	}
	cr_assert_fail("no row '%s' in the table:\n%s", method, text);
	return NULL;
}

/* table_cell(text, method, col) must be want. */
static inline void assert_cell(const char *text, const char *method,
			       const char *col, const char *want)
{
	char *c = table_cell(text, method, col);
	cr_assert_str_eq(c, want, "%s, %s", method, col);
	free(c);
}

#endif
