/* test_target.c — report's time to a target valid perplexity
 * (bench/report/report_target.c; docs/commands.md) on fixed, hand-made
 * records with quality.valid_curve: the automatic target (per group, the
 * largest of the runs' best curve perplexities), a given one
 * (report_acc_target, --target-ppl), the first point at or below it per
 * run, medians over the runs that reached it and their count, × unroll,
 * "not reached", rows without curves and error runs left out, and the
 * printers: the markdown table, the CSV columns, the terminal note within
 * REPORT_TERM_WIDTH columns; a bad --target-ppl exits 2 with one line. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "report.h"
#include "test_cli.h"
#include "test_rows.h"

#define NP 4

/* A training record of method m, seed s, corpus c, status st, whose valid
 * curve (every 10 steps) has perplexities ppl[NP] (0: null; ppl NULL: no
 * curve) at train_s s[NP]. */
static json_t *rec(const char *m, int seed, const char *c, const char *st,
		   const double *ppl, const double *s)
{
	json_t *pts = json_array(), *curve = json_null();
	for (int i = 0; ppl && i < NP; i++)
		json_array_append_new(
		    pts,
		    json_pack("{s:i, s:o, s:o, s:f, s:i}", "step", 10 * (i + 1),
			      "valid_loss",
			      ppl[i] > 0 ? json_real(log(ppl[i])) : json_null(),
			      "valid_ppl",
			      ppl[i] > 0 ? json_real(ppl[i]) : json_null(),
			      "train_s", s[i], "tokens", 4096));
	if (ppl)
		curve = json_pack("{s:i, s:f, s:O}", "every", 10, "eval_s", 0.5,
				  "points", pts);
	json_decref(pts);
	json_t *r = json_pack(
	    "{s:i, s:s, s:s, s:s, s:{s:s, s:i, s:s, s:i, s:s, s:s, s:i},"
	    " s:{s:{s:f, s:f, s:f}}, s:{s:I, s:I}, s:{s:f, s:o}}",
	    "schema", 1, "kind", "train", "status", st, "impl", "deqbench",
	    "config", "method", m, "seed", seed, "corpus", c, "layers", 12,
	    "out", "x.jsonl", "impl", "deqbench", "eval_every", 10, "timing",
	    "step_ms", "median", 10.0, "p25", 9.9, "p75", 10.1, "memory",
	    "peak_depth_solver_bytes", (json_int_t)1 << 20, "peak_total_bytes",
	    (json_int_t)8 << 20, "quality", "valid_ppl",
	    ppl ? ppl[NP - 1] : 100.0, "valid_curve", curve);
	cr_assert_not_null(r);
	return r;
}

/* brown: unroll and deq (3 seeds each, curves), checkpoint (no curve), an
 * error deq run; ptb: one unroll run. */
static json_t *sample(void)
{
	static const double up[3][NP] = {
	    {300, 200, 150, 120}, {310, 210, 160, 125}, {305, 190, 140, 118}};
	static const double us[3][NP] = {
	    {1, 2, 3, 4}, {1.1, 2.2, 3.3, 4.4}, {0.9, 1.8, 2.7, 3.6}};
	static const double dp[3][NP] = {
	    {250, 180, 124, 110}, {260, 170, 120, 112}, {240, 175, 135, 115}};
	static const double ds[3][NP] = {
	    {2, 4, 6, 8}, {2, 4, 6, 8}, {2.2, 4.4, 6.6, 8.8}};
	static const double pp[NP] = {500, 0, 450, 400}, ps[NP] = {1, 2, 3, 4};
	json_t *all = json_array();
	for (int i = 0; i < 3; i++) {
		json_array_append_new(
		    all, rec("unroll", i + 1, "brown", "ok", up[i], us[i]));
		json_array_append_new(
		    all, rec("deq", i + 1, "brown", "ok", dp[i], ds[i]));
	}
	/* an error run's curve (made up: 1 everywhere) is left out */
	static const double one[NP] = {1, 1, 1, 1};
	json_array_append_new(all, rec("deq", 4, "brown", "error", one, one));
	json_array_append_new(all,
			      rec("checkpoint", 1, "brown", "ok", NULL, NULL));
	json_array_append_new(all, rec("unroll", 1, "ptb", "ok", pp, ps));
	return all;
}

/* The rows of sample() with target ppl (NAN: automatic). */
static json_t *rows_at(double ppl)
{
	json_t *all = sample(), *rec_, *rows;
	struct report_acc *a = report_acc_new();
	size_t i;
	cr_assert_not_null(a);
	report_acc_target(a, ppl);
	json_array_foreach(all, i, rec_)
	    cr_assert_eq(report_acc_add(a, rec_), 0);
	rows = report_acc_rows(a);
	report_acc_free(a);
	json_decref(all);
	cr_assert_eq(json_array_size(rows), 4);
	return rows;
}

static const json_t *tt(const json_t *rows, size_t i)
{
	return json_object_get(json_array_get(rows, i), "to_target");
}

static double n_at(const json_t *o, const char *k)
{
	return record_num(o, k);
}

Test(target, automatic_per_group)
{
	json_t *rows = rows_at(NAN);
	const json_t *u = tt(rows, 0), *d = tt(rows, 1), *p = tt(rows, 3);
	/* brown: the runs' best are 120, 125, 118, 110, 112, 115 */
	cr_assert_float_eq(n_at(u, "target_ppl"), 125, 0);
	cr_assert_str_eq(json_string_value(json_object_get(u, "target")),
			 "auto");
	cr_assert_float_eq(n_at(u, "runs"), 3, 0);
	cr_assert_float_eq(n_at(u, "reached"), 3, 0);
	cr_assert_float_eq(n_at(u, "steps"), 40, 0);
	cr_assert_float_eq(n_at(u, "train_s"), 4, 1e-12);
	cr_assert_float_eq(n_at(u, "train_s_x_unroll"), 1, 1e-12);
	/* deq: steps 30, 30, 40 at 6, 6, 8.8 s; the error run left out */
	cr_assert_float_eq(n_at(d, "runs"), 3, 0);
	cr_assert_float_eq(n_at(d, "reached"), 3, 0);
	cr_assert_float_eq(n_at(d, "steps"), 30, 0);
	cr_assert_float_eq(n_at(d, "train_s"), 6, 1e-12);
	cr_assert_float_eq(n_at(d, "train_s_x_unroll"), 1.5, 1e-12);
	/* no curve: null */
	cr_assert(json_is_null(tt(rows, 2)));
	/* ptb's own target, a null point skipped */
	cr_assert_float_eq(n_at(p, "target_ppl"), 400, 0);
	cr_assert_float_eq(n_at(p, "steps"), 40, 0);
	json_decref(rows);
}

Test(target, given_and_not_reached)
{
	json_t *rows = rows_at(150);
	const json_t *u = tt(rows, 0), *d = tt(rows, 1), *p = tt(rows, 3);
	cr_assert_str_eq(json_string_value(json_object_get(u, "target")),
			 "given");
	/* unroll: step 30 (150: at or below), 40, 30 at 3, 4.4, 2.7 s */
	cr_assert_float_eq(n_at(u, "steps"), 30, 0);
	cr_assert_float_eq(n_at(u, "train_s"), 3, 1e-12);
	cr_assert_float_eq(n_at(d, "steps"), 30, 0);
	cr_assert_float_eq(n_at(d, "train_s"), 6, 1e-12);
	cr_assert_float_eq(n_at(d, "train_s_x_unroll"), 2, 1e-12);
	/* ptb never gets to 150 */
	cr_assert_float_eq(n_at(p, "runs"), 1, 0);
	cr_assert_float_eq(n_at(p, "reached"), 0, 0);
	cr_assert(json_is_null(json_object_get(p, "steps")));
	cr_assert(json_is_null(json_object_get(p, "train_s")));
	json_decref(rows);
}

/* A work_unit of per-step count c (mean, first and last alike). */
static json_t *wu(double c)
{
	return json_pack("{s:f, s:f, s:f}", "per_step", c, "per_step_first", c,
			 "per_step_last", c);
}

/* With price records (report --price): priced_s is the steps to the
 * target × the row's priced step; here unroll's work prices at 1 + 2 + 0.5
 * + 0.25 + 1 (step_fixed) = 4.75 ms and the DEQ's at 3 × 1 + 2 + 0.5 +
 * 0.25 + 1 = 6.75 ms, the sample's own shapes; without prices both are
 * null. */
Test(target, priced_time_to_target)
{
	json_t *all = sample(), *r, *rows, *prices;
	size_t i;
	json_array_foreach(all, i, r)
	{
		json_t *c = json_object_get(r, "config");
		int deq = !strcmp(
		    json_string_value(json_object_get(c, "method")), "deq");
		json_object_set_new(c, "model", json_string("transformer"));
		json_object_set_new(
		    r, "work",
		    json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, "
			      "s:o, s:o, s:o}",
			      "block_fwd_taped", wu(1), "block_fwd",
			      wu(deq ? 2 : 0), "block_fwd_recompute", wu(0),
			      "block_vjp", wu(1), "block_vjp_input", wu(0),
			      "head_fwd", wu(1), "head_bwd", wu(1),
			      "optimizer_step", wu(1), "host_bytes", wu(0)));
	}
	prices = json_array();
	const char *u[] = {"block_fwd_taped", "block_fwd",	"block_vjp",
			   "head_train",      "optimizer_step", "step_fixed"};
	const double ms[] = {1, 1, 2, 0.5, 0.25, 1};
	for (int k = 0; k < 6; k++)
		json_array_append_new(
		    prices,
		    json_pack("{s:s, s:s, s:f, s:{s:s, s:s}, s:{s:s}}", "kind",
			      "price", "unit", u[k], "median_ms", ms[k],
			      "shape", "model", "transformer", "precision",
			      "fp32", "config", "device", "cpu"));
	rows = report_rows_priced(all, prices);
	const json_t *un = tt(rows, 0), *dq = tt(rows, 1);
	/* auto target 125: unroll 40 steps, deq 30 (automatic_per_group) */
	cr_assert_float_eq(n_at(un, "priced_s"), 40 * 4.75 / 1000, 1e-12);
	cr_assert_float_eq(n_at(dq, "priced_s"), 30 * 6.75 / 1000, 1e-12);
	cr_assert_float_eq(n_at(dq, "priced_s_x_unroll"),
			   (30 * 6.75) / (40 * 4.75), 1e-12);
	json_decref(rows);
	rows = report_rows(all);
	cr_assert(json_is_null(json_object_get(tt(rows, 1), "priced_s")));
	json_decref(rows);
	json_decref(prices);
	json_decref(all);
}

/* Columns of a line of UTF-8 text (each character one column). */
static int columns(const char *s, size_t n)
{
	int c = 0;
	for (size_t i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xC0) != 0x80;
	return c;
}

Test(target, printers)
{
	json_t *rows = rows_at(150);
	char *md = printed(report_print_md, rows);
	char *csv = printed(report_print_csv, rows);
	char *term = printed(report_print_term, rows);
	cr_assert(strstr(md, "| corpus=brown | deq "), "%s", md);
	cr_assert(strstr(md, "| 150 | 3/3 | 30 | 6 | 2.000 |"), "%s", md);
	cr_assert(strstr(md, "| 150 | 0/1 | not reached |"), "%s", md);
	cr_assert(strstr(csv, ",to_target.target_ppl,to_target.runs,"
			      "to_target.reached,to_target.steps,"
			      "to_target.train_s,to_target.train_s_x_unroll,"
			      "health\n"),
		  "%s", csv);
	cr_assert(strstr(term, "~ deq"), "%s", term);
	cr_assert(strstr(term, "in 30 steps, 6 s, 2x unroll (3/3 runs"), "%s",
		  term);
	cr_assert(strstr(term, "not reached (0/1 runs)"), "%s", term);
	for (const char *l = term; *l;) {
		size_t n = strcspn(l, "\n");
		cr_assert(columns(l, n) <= REPORT_TERM_WIDTH, "%.*s", (int)n,
			  l);
		l += n + (l[n] == '\n');
	}
	free(md);
	free(csv);
	free(term);
	json_decref(rows);
}

Test(target, bad_target_exits_2, .init = cli_setup, .fini = cli_teardown)
{
	char err[4096];
	const char *bad[][4] = {{"report", "--target-ppl", "0.5", "x.jsonl"},
				{"report", "--target-ppl", "abc", "x.jsonl"},
				{"report", "--target-ppl", "nan", "x.jsonl"}};
	for (int i = 0; i < 3; i++) {
		const char *args[] = {bad[i][0], bad[i][1], bad[i][2],
				      bad[i][3], NULL};
		cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 2, "%s", err);
		char *nl = strchr(err, '\n');
		cr_assert(nl && !nl[1], "one line: %s", err);
		cr_assert(strstr(err, "--target-ppl"), "%s", err);
	}
}
