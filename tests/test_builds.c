/* test_builds.c — runs of several commits in one report: records whose
 * build.fingerprint (results/SCHEMA.md §build) is one ran the same code,
 * so report combines their commits into one row and names them; two
 * fingerprints are two rows with their own unroll baseline and groups
 * naming them; records before the fingerprint combine as they always
 * did. compare pairs across builds (that is what it compares) and refuses
 * a NEW row BASE has several builds of. Made-up records with fixed times
 * (never timed runs). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "record.h"
#include "report.h"
#include "test_rows.h"

#define FP1 "0123456789abcdef"
#define FP2 "fedcba9876543210"
#define C1  "111111111111"
#define C2  "222222222222"

/* A GPU record of method m, seed s, mean (and median) step ms, built from commit c
 * with fingerprint fp (NULL: none, as before it existed). */
static json_t *rec(const char *m, int s, double ms, const char *c,
		   const char *fp)
{
	char at[32];
	snprintf(at, sizeof(at), "2026-01-01T00:00:%02dZ", s);
	json_t *r = json_pack(
	    "{s:i, s:s, s:s, s:s, s:s, s:{s:s, s:i, s:s, s:i, s:s, s:s, s:s},"
	    " s:{s:{s:f, s:f}}, s:{s:I, s:I}, s:{s:f}, s:{s:s}, s:{s:s}}",
	    "schema", 1, "kind", "train", "status", "ok", "impl", "deqbench",
	    "started_at", at, "config", "method", m, "seed", s, "corpus",
	    "synthetic", "layers", 3, "device", "cuda", "out", "x.jsonl",
	    "impl", "deqbench", "timing", "step_ms", "median", ms, "mean", ms,
	    "memory", "peak_depth_solver_bytes", (json_int_t)1 << 20,
	    "peak_total_bytes", (json_int_t)8 << 20, "quality", "valid_ppl",
	    100.0, "host", "hostname", "h", "build", "git_commit", c);
	cr_assert_not_null(r);
	if (fp)
		json_object_set_new(json_object_get(r, "build"), "fingerprint",
				    json_string(fp));
	return r;
}

/* Runs of seeds s0..s1 each of unroll at u ms and deq at d ms. */
static void add_runs(json_t *a, int s0, int s1, const char *c, const char *fp,
		     double u, double d)
{
	for (int s = s0; s <= s1; s++) {
		json_array_append_new(a, rec("unroll", s, u, c, fp));
		json_array_append_new(a, rec("deq", s, d, c, fp));
	}
}

/* What printer pr writes of rows; malloc'd. */
static const char *str(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* Two commits, one fingerprint: one row per method of 4 runs, naming both
 * commits in JSON, the markdown list and the terminal notes. */
Test(builds, report_combines_commits_of_one_fingerprint)
{
	json_t *a = json_array(), *rows;
	char *md, *term;
	add_runs(a, 1, 2, C1, FP1, 100, 200);
	add_runs(a, 3, 4, C2, FP1, 100, 200);
	rows = report_rows(a);
	cr_assert_eq(json_array_size(rows), 2);
	const json_t *d = row_where(rows, "synthetic", "deq");
	cr_assert_not_null(d, "group %s",
			   str(json_array_get(rows, 0), "group"));
	cr_assert_eq(json_integer_value(json_object_get(d, "runs")), 4);
	cr_assert_str_eq(str(d, "fingerprint"), FP1);
	cr_assert_eq(json_array_size(json_object_get(d, "commits")), 2);
	cr_assert_str_eq(
	    json_string_value(json_array_get(json_object_get(d, "commits"), 0)),
	    C1);
	cr_assert_str_eq(
	    json_string_value(json_array_get(json_object_get(d, "commits"), 1)),
	    C2);
	md = printed(report_print_md, rows);
	cr_assert(strstr(md, "Rows combining commits of one build fingerprint"),
		  "%s", md);
	cr_assert(
	    strstr(md, ": commits " C1 ", " C2 " (one fingerprint, " FP1 ")"),
	    "%s", md);
	term = printed(report_print_term, rows);
	cr_assert(strstr(term, "  = deq"), "%s", term);
	cr_assert(strstr(term, "commits " C1 ", " C2), "%s", term);
	free(md);
	free(term);
	json_decref(rows);
	json_decref(a);
}

/* Two fingerprints (and records without one): rows apart, each group named
 * by its code, each DEQ row over its own code's unroll. */
Test(builds, report_splits_rows_by_fingerprint)
{
	json_t *a = json_array(), *rows;
	char *md;
	add_runs(a, 1, 4, C1, FP1, 100, 200);
	add_runs(a, 1, 4, C2, FP2, 100, 400);
	add_runs(a, 1, 4, C2, NULL, 100, 300);
	rows = report_rows(a);
	cr_assert_eq(json_array_size(rows), 6);
	const json_t *d1 = row_where(rows, "synthetic code=" FP1, "deq");
	const json_t *d2 = row_where(rows, "synthetic code=" FP2, "deq");
	const json_t *d0 = row_where(rows, "synthetic code=none", "deq");
	cr_assert(d1 && d2 && d0, "group %s",
		  str(json_array_get(rows, 0), "group"));
	cr_assert_float_eq(record_num(d1, "step_x_unroll.ratio"), 2, 1e-12);
	cr_assert_float_eq(record_num(d2, "step_x_unroll.ratio"), 4, 1e-12);
	cr_assert_float_eq(record_num(d0, "step_x_unroll.ratio"), 3, 1e-12);
	cr_assert(json_is_null(json_object_get(d0, "fingerprint")));
	cr_assert_eq(json_integer_value(json_object_get(d1, "runs")), 4);
	md = printed(report_print_md, rows);
	cr_assert_null(strstr(md, "Rows combining commits"), "%s", md);
	free(md);
	json_decref(rows);
	json_decref(a);
}

/* Records before build.fingerprint: commits combine as before, unnamed
 * (the report cannot tell whether their code was one). */
Test(builds, records_without_fingerprint_combine_as_before)
{
	json_t *a = json_array(), *rows;
	char *md;
	add_runs(a, 1, 2, C1, NULL, 100, 200);
	add_runs(a, 3, 4, C2, NULL, 100, 200);
	rows = report_rows(a);
	cr_assert_eq(json_array_size(rows), 2);
	const json_t *d = row_where(rows, "synthetic", "deq");
	cr_assert_not_null(d);
	cr_assert_eq(json_integer_value(json_object_get(d, "runs")), 4);
	cr_assert(json_is_null(json_object_get(d, "fingerprint")));
	cr_assert_eq(json_array_size(json_object_get(d, "commits")), 2);
	md = printed(report_print_md, rows);
	cr_assert_null(strstr(md, "Rows combining commits"), "%s", md);
	free(md);
	json_decref(rows);
	json_decref(a);
}

static json_t *cmp(const json_t *b, const json_t *n, char *err, size_t len)
{
	struct compare_opts o = {NULL, COMPARE_THRESHOLD, COMPARE_ALPHA};
	return compare_records(b, n, &o, err, len);
}

/* compare pairs NEW's rows with BASE's of another build, and refuses a
 * NEW row that BASE has two builds of, naming their fingerprints. */
Test(builds, compare_across_builds)
{
	json_t *b = json_array(), *n = json_array(), *res;
	char err[600];
	add_runs(b, 1, 4, C1, FP1, 100, 200);
	add_runs(n, 1, 4, C2, FP2, 100, 200);
	res = cmp(b, n, err, sizeof(err));
	cr_assert_not_null(res, "%s", err);
	cr_assert_eq(json_array_size(json_object_get(res, "pairs")), 2);
	json_decref(res);
	add_runs(b, 1, 4, C2, FP2, 100, 200);
	json_decref(n);
	n = json_array();
	add_runs(n, 1, 4, C2, "aaaaaaaaaaaaaaaa", 100, 200);
	cr_assert_null(cmp(b, n, err, sizeof(err)));
	cr_assert(strstr(err, "several other cores or builds (none code=" FP1
			      ", none code=" FP2 ")"),
		  "%s", err);
	json_decref(n);
	json_decref(b);
}
