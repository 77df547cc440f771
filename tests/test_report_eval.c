/* test_report_eval.c — report's eval rows (ε at the paper's
 * protocol): the evaluations of the seeds' parameter files of one
 * configuration are one row's runs, a DEQ's and the unrolled net's at
 * every depth one group, each row's × unroll against the shallowest unroll
 * row of valid perplexity at most its own (or, when none is, the one of
 * lowest), the head's time apart, test perplexity, and the printed
 * forms. Fixtures: synthetic eval records whose figures are chosen so
 * that every expected number follows by hand. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "report.h"
#include "test_rows.h"

/* An eval record of seed s's parameter file of method m (unroll: its
 * evaluation depth L; deq: f_tol tol at cap 30): valid ppl ppl (test ppl
 * ppl - 4), ms per valid batch ms of which head ms is the head's. */
static json_t *eval_rec(const char *m, int L, double tol, int s, double ppl,
			double ms, double head)
{
	char params[64];
	snprintf(params, sizeof(params), "results/params/%s-seed%d.st", m, s);
	return json_pack(
	    "{s:s, s:s, s:s, s:{s:s, s:i, s:f, s:i, s:s, s:s, s:i, s:s, s:i},"
	    " s:{s:f, s:f}, s:{s:{s:f}, s:{s:f}, s:{s:f}, s:f}}",
	    "kind", "eval", "status", "ok", "started_at", params, "config",
	    "method", m, "layers", L, "f_tol", tol, "f_max_iter", 30,
	    "f_solver", "broyden", "corpus", "brown", "d_model", 128, "params",
	    params, "seed", s, "quality", "valid_ppl", ppl, "test_ppl", ppl - 4,
	    "inference", "step_ms", "median", ms, "head_ms", "median", head,
	    "body_ms", "median", ms - head, "forward_evals_per_batch",
	    (double)L);
}

/* Three seeds (time factors 0.95, 1, 1.05: a geometric mean of 1 only
 * approximately, so the ratios below are of geometric means) of: unroll
 * at L = 4, 8, 12 (ppl 185, 172.5, 171; ms 30, 45, 60; head 20) and the
 * DEQ at f_tol 0.1 (ppl 180, 50 ms), 0.01 (ppl 173, 70 ms) and 0.001
 * (ppl 170, 90 ms, better than every unrolled depth). */
static json_t *fixture(void)
{
	static const double f[3] = {0.95, 1, 1.05};
	json_t *a = json_array();
	for (int s = 1; s <= 3; s++) {
		double k = f[s - 1];
		json_array_append_new(
		    a, eval_rec("unroll", 4, 0.001, s, 185 + s, 30 * k, 20));
		json_array_append_new(a, eval_rec("unroll", 8, 0.001, s,
						  172.5 + s - 2, 45 * k, 20));
		json_array_append_new(
		    a, eval_rec("unroll", 12, 0.001, s, 171, 60 * k, 20));
		json_array_append_new(
		    a, eval_rec("deq", 12, 0.1, s, 180 + s - 2, 50 * k, 20));
		json_array_append_new(
		    a, eval_rec("deq", 12, 0.01, s, 173 + s - 2, 70 * k, 20));
		json_array_append_new(
		    a, eval_rec("deq", 12, 0.001, s, 170, 90 * k, 20));
	}
	return a;
}

/* Member b of member a of o. */
static const json_t *member(const json_t *o, const char *a, const char *b)
{
	return json_object_get(json_object_get(o, a), b);
}

/* The row of method m (unroll: depth L; deq: f_tol tol). */
static const json_t *row_of(const json_t *rows, const char *m, int L,
			    double tol)
{
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r)
	{
		const json_t *c = json_object_get(r, "config");
		if (strcmp(json_string_value(json_object_get(c, "method")), m))
			continue;
		if (!strcmp(m, "unroll") ? record_num(c, "layers") == L
					 : record_num(c, "f_tol") == tol)
			return r;
	}
	cr_assert_fail("no row %s %d %g", m, L, tol);
	return NULL;
}

Test(report_eval, seeds_are_runs_of_one_row_in_one_group)
{
	json_t *recs = fixture(), *rows = report_rows(recs);
	size_t i;
	json_t *r;
	cr_assert_eq(json_array_size(rows), 6);
	json_array_foreach(rows, i, r)
	{
		cr_assert_eq(json_integer_value(json_object_get(r, "runs")), 3);
		cr_assert_str_eq(json_string_value(json_object_get(r, "group")),
				 "eval brown");
		cr_assert_eq(json_array_size(json_object_get(r, "seeds")), 3);
	}
	json_decref(rows);
	json_decref(recs);
}

Test(report_eval, x_unroll_is_against_the_matched_depth)
{
	json_t *recs = fixture(), *rows = report_rows(recs);
	const json_t *d1 = row_of(rows, "deq", 0, 0.1);
	const json_t *d2 = row_of(rows, "deq", 0, 0.01);
	const json_t *d3 = row_of(rows, "deq", 0, 0.001);
	const json_t *u8 = row_of(rows, "unroll", 8, 0);
	double g8 = record_num(u8, "inference_ms.gmean");
	/* ppl 180: L = 4 (186) is worse, L = 8 (172.5) the shallowest as
	 * good */
	cr_assert_eq(record_num(d1, "matched_unroll.layers"), 8);
	cr_assert(json_is_true(member(d1, "matched_unroll", "as_good")));
	cr_assert_float_eq(record_num(d1, "inference_x_unroll.ratio"),
			   record_num(d1, "inference_ms.gmean") / g8, 1e-12);
	/* equal time factors on both sides: the ratio is 50/45 exactly up
	 * to rounding, and its Welch interval holds it */
	cr_assert_float_eq(record_num(d1, "inference_x_unroll.ratio"),
			   50.0 / 45, 1e-9);
	cr_assert(record_num(d1, "inference_x_unroll.lo") < 50.0 / 45);
	cr_assert(record_num(d1, "inference_x_unroll.hi") > 50.0 / 45);
	/* the rest without the head: (50 - 20) / (45 - 20) */
	cr_assert_float_eq(record_num(d1, "inference_body_x_unroll.ratio"),
			   30.0 / 25, 0.02);
	cr_assert_float_eq(record_num(d1, "inference_head_ms.gmean"), 20, 1e-9);
	cr_assert_eq(record_num(d2, "matched_unroll.layers"), 8);
	/* ppl 170: no unrolled depth is as good; the best (L = 12) */
	cr_assert_eq(record_num(d3, "matched_unroll.layers"), 12);
	cr_assert(json_is_false(member(d3, "matched_unroll", "as_good")));
	cr_assert_float_eq(record_num(d3, "inference_x_unroll.ratio"),
			   90.0 / 60, 1e-9);
	/* an unroll row is its own */
	cr_assert(json_is_true(member(u8, "inference_x_unroll", "self")));
	cr_assert_float_eq(record_num(d1, "test_ppl.mean"), 176, 1e-9);
	json_decref(rows);
	json_decref(recs);
}

/* A training record of the same config is a group of its own: eval rows
 * are not timed against training rows. */
Test(report_eval, training_rows_are_apart)
{
	json_t *recs = fixture(), *rows;
	json_t *tr = json_deep_copy(json_array_get(recs, 0));
	json_object_set_new(tr, "kind", json_string("train"));
	json_object_set_new(tr, "started_at", json_string("train"));
	json_array_append_new(recs, tr);
	rows = report_rows(recs);
	cr_assert_eq(json_array_size(rows), 7);
	cr_assert_str_neq(json_string_value(json_object_get(
			      json_array_get(rows, 6), "group")),
			  "eval brown");
	json_decref(rows);
	json_decref(recs);
}

/* An eval run whose time per valid batch has an interquartile range
 * above 10% of its median is labelled noisy, as a training run's step
 * times are (eval records had no such label: results audit F2). */
Test(report_eval, noisy_batches_are_labelled)
{
	json_t *recs = fixture(), *rows;
	json_t *inf = json_object_get(json_array_get(recs, 0), "inference");
	json_object_set_new(json_object_get(inf, "step_ms"), "p25",
			    json_real(25));
	json_object_set_new(json_object_get(inf, "step_ms"), "p75",
			    json_real(32));
	rows = report_rows(recs);
	const json_t *u4 = row_of(rows, "unroll", 4, 0);
	const json_t *u8 = row_of(rows, "unroll", 8, 0);
	cr_assert_eq(record_num(u4, "health.noisy"), 1);
	cr_assert_eq(record_num(u8, "health.noisy"), 0);
	cr_assert_str_eq(json_string_value(
			     json_array_get(member(u4, "health", "labels"), 0)),
			 "noisy 1/3");
	json_decref(rows);
	json_decref(recs);
}

/* Columns of a line of UTF-8 text (each character one column). */
static int columns(const char *s, size_t n)
{
	int c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

Test(report_eval, printers)
{
	json_t *recs = fixture(), *rows = report_rows(recs);
	char *term = printed(report_print_term, rows);
	char *md = printed(report_print_md, rows);
	char *csv = printed(report_print_csv, rows);
	/* sorted: the DEQ's f_tol loose to tight, then unroll by depth;
	 * "12<": against L = 12, which is not as good */
	const char *a = strstr(term, "deq broyden    0.1  30");
	const char *b = strstr(term, "deq broyden   0.01  30");
	cr_assert(a && b && a < b, "%s", term);
	cr_assert(strstr(term, " 12< "), "%s", term);
	cr_assert(strstr(term, "ms/batch [95% CI]"), "%s", term);
	for (const char *l = term; *l;) {
		size_t n = strcspn(l, "\n");
		cr_assert(columns(l, n) <= REPORT_TERM_WIDTH, "%.*s", (int)n,
			  l);
		l += n + (l[n] == '\n');
	}
	cr_assert(strstr(md, "| unroll L=8 | 180.00 | 176.00 | "), "%s", md);
	cr_assert(
	    strstr(md, "| unroll L=12 (none as good) | 170.00 | 166.00 | "),
	    "%s", md);
	cr_assert(strstr(csv, ",inference_head_ms.gmean,"), "%s", csv);
	cr_assert(strstr(csv, ",matched_unroll.layers,"), "%s", csv);
	cr_assert(strstr(csv, ",test_ppl.mean,"), "%s", csv);
	free(term);
	free(md);
	free(csv);
	json_decref(rows);
	json_decref(recs);
}
