/* test_cost.c — report's cost model (bench/report/report_cost.h)
 * on made-up records and price records: priced time per
 * step = Σ work × price + step_fixed, hand-computed (the head at
 * head_train's price, each solver's updates at its own points); the
 * measured mean step time's geometric mean, its 95% t interval on logs and
 * the per-run values; unroll's ratio 1 without interval; prices matched
 * by shape or the row saying it has none; units without a price named;
 * the terminal table within 100 columns; report --price's bad file exits
 * 2 with one line. No timing is measured here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "report.h"
#include "test_cli.h"

/* A work_unit of per-step means mean, first, last. */
static json_t *unit(double mean, double first, double last)
{
	return json_pack("{s:f, s:f, s:f}", "per_step", mean, "per_step_first",
			 first, "per_step_last", last);
}

/* The work of a step (same first, mean and last) of the counts
 * taped, fwd, recompute, vjp, vjp_input, updates, history_sum; one head
 * forward and backward and one optimizer step. */
static json_t *work(double taped, double fwd, double rec, double vjp,
		    double vjpi, double upd, double hsum)
{
	return json_pack(
	    "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}",
	    "block_fwd_taped", unit(taped, taped, taped), "block_fwd",
	    unit(fwd, fwd, fwd), "block_fwd_recompute", unit(rec, rec, rec),
	    "block_vjp", unit(vjp, vjp, vjp), "block_vjp_input",
	    unit(vjpi, vjpi, vjpi), "solver_update", unit(upd, upd, upd),
	    "solver_history_sum", unit(hsum, hsum, hsum), "head_fwd",
	    unit(1, 1, 1), "head_bwd", unit(1, 1, 1), "optimizer_step",
	    unit(1, 1, 1), "host_bytes", unit(0, 0, 0));
}

/* A training record: method m (deq: solver), seed, d_model, mean step
 * ms, its work (taken). */
static json_t *rec(const char *m, const char *solver, int seed, int d,
		   double mean, json_t *w)
{
	json_t *r = json_pack(
	    "{s:i, s:s, s:s, s:s, s:{s:s, s:s, s:i, s:s, s:i, s:i, s:i, s:i,"
	    " s:i, s:s, s:i, s:s}, s:{s:i}, s:{s:{s:f, s:f}}, s:o}",
	    "schema", 1, "kind", "train", "status", "ok", "impl", "deqbench",
	    "config", "method", m, "f_solver", solver, "seed", seed, "model",
	    "transformer", "d_model", d, "n_heads", 2, "d_ff", 16, "seq_len", 4,
	    "batch_size", 2, "device", "cpu", "layers", 2, "corpus", "brown",
	    "model", "vocab_size", 50, "timing", "step_ms", "median", mean,
	    "mean", mean, "work", w);
	cr_assert_not_null(r);
	return r;
}

/* A price record of unit u (h: solver_update's history, else < 0; solver
 * its solver, NULL: none, as records before `solver`) at the shape rec()
 * writes with d_model 8. */
static json_t *price_s(const char *u, const char *solver, int h, double ms)
{
	json_t *p = json_pack(
	    "{s:s, s:s, s:o, s:o, s:f, s:{s:s, s:s, s:i, s:i, s:i, s:i, s:i,"
	    " s:i}, s:{s:s}}",
	    "kind", "price", "unit", u, "h",
	    h >= 0 ? json_integer(h) : json_null(), "solver",
	    solver ? json_string(solver) : json_null(), "median_ms", ms,
	    "shape", "model", "transformer", "precision", "fp32", "d_model", 8,
	    "n_heads", 2, "d_ff", 16, "seq_len", 4, "batch_size", 2,
	    "vocab_size", 50, "config", "device", "cpu");
	cr_assert_not_null(p);
	return p;
}

static json_t *price(const char *u, int h, double ms)
{
	return price_s(u, h >= 0 ? "broyden" : NULL, h, ms);
}

/* The prices of the sample: a training step's head (head_train) 0.5 where
 * head_fwd + head_bwd would be 0.75, step_fixed 2, Broyden's updates
 * at 0.1, 0.4, 0.6 (h 1, 4, 8) and Anderson's at 0.2, 0.5 (h 1, 4). */
static json_t *prices(void)
{
	return json_pack(
	    "[o, o, o, o, o, o, o, o, o, o, o, o, o, o, o]",
	    price("block_fwd_taped", -1, 2), price("block_fwd", -1, 1),
	    price("block_vjp", -1, 3), price("block_vjp_input", -1, 1.5),
	    price("head_fwd", -1, 0.5), price("head_bwd", -1, 0.25),
	    price("head_train", -1, 0.5), price("step_fixed", -1, 2),
	    price("optimizer_step", -1, 0.75), price("host_bytes", -1, 0),
	    price("solver_update", 1, 0.1), price("solver_update", 8, 0.6),
	    price("solver_update", 4, 0.4),
	    price_s("solver_update", "anderson", 1, 0.2),
	    price_s("solver_update", "anderson", 4, 0.5));
}

/* The sample: unroll (3 seeds, mean 12.5, 13.5, 14.5 ms), checkpoint,
 * deq broyden (first and last 10% differ), deq anderson, and an unroll at
 * d_model 16 that no price record matches. */
static json_t *sample(void)
{
	json_t *all = json_array(), *w;
	double um[] = {12.5, 13.5, 14.5};
	for (int s = 0; s < 3; s++) {
		json_array_append_new(all,
				      rec("unroll", "broyden", s + 1, 8, um[s],
					  work(2, 0, 0, 2, 0, 0, 0)));
		json_array_append_new(all,
				      rec("checkpoint", "broyden", s + 1, 8, 16,
					  work(1, 2, 1, 2, 0, 0, 0)));
	}
	w = work(1, 10, 0, 1, 6, 9, 18);
	/* first 10%: 5 forwards, 4 updates at h 6, 3 input VJPs; last:
	 * 20, 19 at h 8, 10 */
	json_object_set_new(json_object_get(w, "block_fwd"), "per_step_first",
			    json_real(5));
	json_object_set_new(json_object_get(w, "block_fwd"), "per_step_last",
			    json_real(20));
	json_object_set_new(json_object_get(w, "solver_update"),
			    "per_step_first", json_real(4));
	json_object_set_new(json_object_get(w, "solver_update"),
			    "per_step_last", json_real(19));
	json_object_set_new(json_object_get(w, "solver_history_sum"),
			    "per_step_first", json_real(24));
	json_object_set_new(json_object_get(w, "solver_history_sum"),
			    "per_step_last", json_real(152));
	json_object_set_new(json_object_get(w, "block_vjp_input"),
			    "per_step_first", json_real(3));
	json_object_set_new(json_object_get(w, "block_vjp_input"),
			    "per_step_last", json_real(10));
	json_array_append_new(all, rec("deq", "broyden", 1, 8, 30, w));
	json_array_append_new(
	    all, rec("deq", "anderson", 1, 8, 30, work(1, 10, 0, 1, 6, 9, 18)));
	json_array_append_new(all, rec("unroll", "broyden", 1, 16, 20,
				       work(2, 0, 0, 2, 0, 0, 0)));
	return all;
}

static json_t *row_of(const json_t *rows, const char *method, int d)
{
	size_t i;
	json_t *r;
	json_array_foreach(rows, i, r)
	{
		const json_t *c = json_object_get(r, "config");
		if (!strcmp(json_string_value(json_object_get(c, "method")),
			    method) &&
		    json_integer_value(json_object_get(c, "d_model")) == d &&
		    (strcmp(method, "deq") ||
		     !strcmp(json_string_value(json_object_get(c, "f_solver")),
			     "broyden")))
			return r;
	}
	cr_assert_fail("no %s row at d_model %d", method, d);
	return NULL;
}

static double num(const json_t *o, const char *path)
{
	return record_num(o, path);
}

static json_t *priced_rows(void)
{
	json_t *recs = sample(), *p = prices();
	json_t *rows = report_rows_priced(recs, p);
	cr_assert_not_null(rows);
	json_decref(recs);
	json_decref(p);
	return rows;
}

Test(cost, priced_time_is_work_times_price_plus_fixed)
{
	json_t *rows = priced_rows();
	const json_t *u = row_of(rows, "unroll", 8);
	const json_t *c = row_of(rows, "checkpoint", 8);
	const json_t *d = row_of(rows, "deq", 8);
	/* unroll: 2 taped × 2 + 2 VJPs × 3 + head_train 0.5 + Adam 0.75 =
	 * 11.25 ms; step_fixed 2 (measured by price, not from unroll) */
	cr_assert_float_eq(num(u, "priced.units_ms.gmean"), 11.25, 1e-9);
	cr_assert_float_eq(num(u, "priced.fixed_ms"), 2, 1e-9);
	cr_assert_float_eq(num(u, "priced.step_ms.gmean"), 13.25, 1e-9);
	cr_assert_float_eq(num(u, "priced.x_measured"),
			   13.25 / cbrt(12.5 * 13.5 * 14.5), 1e-9);
	/* checkpoint: taped 2 + untaped 2 × 1 + recomputed 1 at the taped
	 * price 2 + VJPs 6 + 1.25 = 13.25, + 2 */
	cr_assert_float_eq(num(c, "priced.step_ms.gmean"), 15.25, 1e-9);
	cr_assert_float_eq(num(c, "priced.x_unroll.ratio"), 15.25 / 13.25,
			   1e-9);
	cr_assert_float_eq(num(c, "priced.units_x_unroll.ratio"), 13.25 / 11.25,
			   1e-9);
	/* deq: 10 × 1 + 2 + 3 + 6 × 1.5 + 9 updates at h 18/9 = 2 (0.1 at
	 * h 1, 0.4 at h 4: 0.2) + 1.25 = 27.05, + 2 */
	cr_assert_float_eq(num(d, "priced.step_ms.gmean"), 29.05, 1e-9);
	/* first: 5 + 2 + 3 + 4.5 + 4 at h 6 (0.5) + 1.25 = 17.75, + 2; last:
	 * 20 + 2 + 3 + 15 + 19 at h 8 (0.6) + 1.25 = 52.65, + 2 */
	cr_assert_float_eq(num(d, "priced.early_ms.gmean"), 19.75, 1e-9);
	cr_assert_float_eq(num(d, "priced.late_ms.gmean"), 54.65, 1e-9);
	cr_assert_float_eq(num(d, "priced.x_measured"), 29.05 / 30, 1e-9);
	cr_assert(json_is_null(
	    json_object_get(json_object_get(d, "priced"), "note")));
	json_decref(rows);
}

/* method=selective: its attn_recompute (2 a step) at its own price 0.25
 * on top of unroll's 11.25 + 2; without that price the unit is named
 * unpriced. The sample's records lack the unit (made before it): 0. */
Test(cost, selective_pays_attn_recompute)
{
	json_t *recs = json_array(), *p = prices(), *rows, *w;
	w = work(2, 0, 0, 2, 0, 0, 0);
	json_object_set_new(w, "attn_recompute", unit(2, 2, 2));
	json_array_append_new(recs, rec("unroll", "broyden", 1, 8, 13,
					work(2, 0, 0, 2, 0, 0, 0)));
	json_array_append_new(recs, rec("selective", "broyden", 1, 8, 14, w));
	rows = report_rows_priced(recs, p);
	cr_assert_float_eq(
	    num(row_of(rows, "unroll", 8), "priced.step_ms.gmean"), 13.25,
	    1e-9);
	cr_assert_eq(
	    json_array_size(json_object_get(
		json_object_get(row_of(rows, "selective", 8), "priced"),
		"unpriced")),
	    1);
	json_decref(rows);
	json_array_append_new(p, price("attn_recompute", -1, 0.25));
	rows = report_rows_priced(recs, p);
	cr_assert_float_eq(
	    num(row_of(rows, "selective", 8), "priced.step_ms.gmean"), 13.75,
	    1e-9);
	cr_assert_eq(
	    json_array_size(json_object_get(
		json_object_get(row_of(rows, "selective", 8), "priced"),
		"unpriced")),
	    0);
	json_decref(rows);
	json_decref(recs);
	json_decref(p);
}

Test(cost, measured_mean_gmean_interval_and_per_run)
{
	json_t *rows = priced_rows();
	const json_t *u = row_of(rows, "unroll", 8);
	const json_t *pr =
	    json_object_get(json_object_get(u, "step_mean_ms"), "per_run");
	double x[] = {12.5, 13.5, 14.5}, m = 0, v = 0, t = 4.302652729911275;
	for (int i = 0; i < 3; i++)
		m += log(x[i]) / 3;
	for (int i = 0; i < 3; i++)
		v += (log(x[i]) - m) * (log(x[i]) - m) / 2;
	cr_assert_float_eq(num(u, "step_mean_ms.gmean"), exp(m), 1e-9);
	cr_assert_float_eq(num(u, "step_mean_ms.lo"), exp(m - t * sqrt(v / 3)),
			   1e-6);
	cr_assert_float_eq(num(u, "step_mean_ms.hi"), exp(m + t * sqrt(v / 3)),
			   1e-6);
	cr_assert_eq(json_array_size(pr), 3);
	for (int i = 0; i < 3; i++)
		cr_assert_float_eq(json_number_value(json_array_get(pr, i)),
				   x[i], 1e-12);
	/* unroll's own ratios: 1, no interval, measured and priced */
	cr_assert_float_eq(num(u, "step_mean_x_unroll.ratio"), 1, 0);
	cr_assert(json_is_true(
	    json_object_get(json_object_get(u, "step_mean_x_unroll"), "self")));
	cr_assert(!isfinite(num(u, "step_mean_x_unroll.lo")));
	cr_assert_float_eq(num(u, "priced.x_unroll.ratio"), 1, 0);
	cr_assert(!isfinite(num(u, "priced.x_unroll.lo")));
	json_decref(rows);
}

Test(cost, unmatched_shape_and_unpriced_units_say_so)
{
	json_t *rows = priced_rows(), *plain, *recs = sample();
	const json_t *far = row_of(rows, "unroll", 16), *a = NULL, *r;
	size_t i;
	cr_assert(json_is_false(
	    json_object_get(json_object_get(far, "priced"), "matched")));
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(far, "priced"), "note")),
			 "no price records of this shape");
	cr_assert(!isfinite(num(far, "priced.step_ms.gmean")));
	json_array_foreach(rows, i, r) if (!strcmp(json_string_value(
						       json_object_get(
							   json_object_get(
							       r, "config"),
							   "f_solver")),
						   "anderson")) a = r;
	cr_assert_not_null(a);
	/* Anderson's updates at its own points: 9 at h 2 (0.2 at h 1, 0.5 at
	 * h 4: 0.3) = 2.7; the rest as the Broyden DEQ's 25.25, + 2 */
	cr_assert_eq(json_array_size(json_object_get(
			 json_object_get(a, "priced"), "unpriced")),
		     0);
	cr_assert_float_eq(num(a, "priced.step_ms.gmean"), 29.95, 1e-9);
	/* without --price: priced is null, the measured figures stay */
	plain = report_rows(recs);
	cr_assert(json_is_null(
	    json_object_get(row_of(plain, "unroll", 8), "priced")));
	cr_assert_float_eq(
	    num(row_of(plain, "unroll", 8), "step_mean_ms.gmean"),
	    num(row_of(rows, "unroll", 8), "step_mean_ms.gmean"), 0);
	json_decref(plain);
	json_decref(recs);
	json_decref(rows);
}

/* Prices without head_train, step_fixed or `solver` (made before them):
 * the head at head_fwd + head_bwd, step_fixed named unpriced, the
 * solver_update records Broyden's; a DEQ whose two solves differ pays the
 * mean of the two solvers' prices. */
Test(cost, older_prices_and_mixed_solvers)
{
	json_t *recs = sample(), *p = prices(), *rows, *mixed;
	size_t i;
	json_t *q;
	/* drop head_train and step_fixed; Broyden's records lose `solver` */
	for (i = json_array_size(p); i-- > 0;) {
		const char *u = json_string_value(
		    json_object_get(json_array_get(p, i), "unit"));
		if (!strcmp(u, "head_train") || !strcmp(u, "step_fixed"))
			json_array_remove(p, i);
	}
	json_array_foreach(
	    p, i, q) if (!strcmp(json_string_value(json_object_get(q, "solver"))
				     ?: "",
				 "broyden"))
	    json_object_set_new(q, "solver", json_null());
	mixed = rec("deq", "broyden", 2, 8, 30, work(1, 10, 0, 1, 6, 9, 18));
	json_object_set_new(json_object_get(mixed, "config"), "b_solver",
			    json_string("anderson"));
	json_array_append_new(recs, mixed);
	rows = report_rows_priced(recs, p);
	const json_t *u = row_of(rows, "unroll", 8), *m = NULL, *r;
	/* 4 + 6 + 0.5 + 0.25 + 0.75, no fixed */
	cr_assert_float_eq(num(u, "priced.units_ms.gmean"), 11.5, 1e-9);
	cr_assert_float_eq(num(u, "priced.step_ms.gmean"), 11.5, 1e-9);
	cr_assert_str_eq(
	    json_string_value(json_array_get(
		json_object_get(json_object_get(u, "priced"), "unpriced"), 0)),
	    "step_fixed");
	json_array_foreach(rows, i, r)
	{
		const json_t *c = json_object_get(r, "config");
		const char *b =
		    json_string_value(json_object_get(c, "b_solver"));
		if (b && !strcmp(b, "anderson") &&
		    !strcmp(json_string_value(json_object_get(c, "f_solver")),
			    "broyden"))
			m = r;
	}
	cr_assert_not_null(m);
	/* 9 updates at h 2: Broyden 0.2, Anderson 0.3, mean 0.25 = 2.25;
	 * 10 + 2 + 3 + 9 + 0.75 head + 0.75 Adam = 25.5 */
	cr_assert_float_eq(num(m, "priced.units_ms.gmean"), 27.75, 1e-9);
	json_decref(rows);
	json_decref(recs);
	json_decref(p);
}

Test(cost, term_table_fits_100_columns)
{
	json_t *recs = sample(), *p = prices(), *rows;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;
	/* a long method label and huge figures */
	json_object_set_new(
	    json_object_get(json_array_get(recs, 0), "timing"), "step_ms",
	    json_pack("{s:f, s:f}", "median", 1.5e9, "mean", 1.5e9));
	rows = report_rows_priced(recs, p);
	json_object_set_new(json_array_get(rows, 0), "method",
			    json_string("a method label far longer than its "
					"column of eighteen"));
	f = open_memstream(&buf, &len);
	report_print_term(f, rows);
	fclose(f);
	cr_assert(strstr(buf, "mean step ms [95%]"), "%s", buf);
	for (char *l = buf, *e; *l; l = e + 1) {
		e = strchr(l, '\n');
		cr_assert_not_null(e);
		cr_assert_leq(e - l, REPORT_TERM_WIDTH, "%.*s", (int)(e - l),
			      l);
	}
	free(buf);
	json_decref(rows);
	json_decref(recs);
	json_decref(p);
}

Test(cost, md_has_the_measured_and_priced_table)
{
	json_t *rows = priced_rows();
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	report_print_md(f, rows);
	fclose(f);
	cr_assert(strstr(buf, "| mean step ms [95%] | priced ms |"), "%s", buf);
	/* deq broyden: measured 30 (one run), priced 29.30, 29.3/30 */
	cr_assert(strstr(buf, "| 30.00 (n=1: no interval) | 29.05 |"), "%s",
		  buf);
	cr_assert(strstr(buf, "no price records of this shape"), "%s", buf);
	free(buf);
	json_decref(rows);
}

Test(cost, bad_price_file_exits_2_with_one_line, .init = cli_setup,
     .fini = cli_teardown)
{
	char recs[600], bad[600], none[600], err[2048];
	json_t *all = sample();
	cli_path(recs, sizeof(recs), "r.jsonl");
	cli_path(bad, sizeof(bad), "bad.jsonl");
	cli_path(none, sizeof(none), "none.jsonl");
	cr_assert_eq(json_dump_file(json_array_get(all, 0), recs, JSON_COMPACT),
		     0);
	cli_write_text(bad, "{\"kind\": \"price\", oops\n");
	cli_write_text(none, "{\"kind\": \"train\"}\n");
	const char *a1[] = {"report", "--price", bad, recs, NULL};
	const char *a2[] = {"report", "--price", none, recs, NULL};
	const char *a3[] = {"report", "--price", "/nonexistent/p.jsonl", recs,
			    NULL};
	const char *const *cases[] = {a1, a2, a3};
	const char *want[] = {"not JSON", "holds no price records",
			      "No such file"};
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(cli_run(cases[k], 0, err, sizeof(err)), 2, "%s",
			     err);
		cr_assert(strstr(err, want[k]), "%s", err);
		cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "%s",
			     err);
	}
	json_decref(all);
}

/* The prices' own uncertainty in the priced intervals (report_cost_log_var,
 * stats_log_*_interval_plus): block_fwd_taped's price has a 95% interval
 * of log half-width 1.96 × 0.1 and block_vjp's of 1.96 × 0.2, the other
 * prices none. unroll's and checkpoint's three runs have the same work
 * (no spread between runs), so their intervals are the prices' alone,
 * normal on logs: the row's Σ (sd · share)², the ratio's shared-price
 * Σ (sd · (share_c − share_u))². Without intervals in the price records
 * the ratio's interval is the point, as before. */
Test(cost, price_uncertainty_in_priced_intervals)
{
	json_t *recs = sample(), *p = prices(), *rows, *x;
	const double z = 1.959963984540054;
	double vu, vr, r = 15.25 / 13.25;
	size_t i;
	rows = report_rows_priced(recs, p);
	cr_assert_float_eq(
	    num(row_of(rows, "checkpoint", 8), "priced.x_unroll.lo"), r, 1e-12);
	cr_assert_float_eq(
	    num(row_of(rows, "checkpoint", 8), "priced.x_unroll.hi"), r, 1e-12);
	json_decref(rows);
	json_array_foreach(p, i, x)
	{
		const char *u = json_string_value(json_object_get(x, "unit"));
		double ms = num(x, "median_ms"),
		       sd = !strcmp(u, "block_fwd_taped") ? 0.1
			    : !strcmp(u, "block_vjp")	  ? 0.2
							  : 0;
		if (sd > 0) {
			json_object_set_new(x, "lo_ms",
					    json_real(ms * exp(-z * sd)));
			json_object_set_new(x, "hi_ms",
					    json_real(ms * exp(z * sd)));
		}
	}
	rows = report_rows_priced(recs, p);
	/* unroll: taped 4 of 13.25 ms, VJPs 6; checkpoint: taped and
	 * recomputed 4 of 15.25, VJPs 6 */
	vu = pow(0.1 * 4 / 13.25, 2) + pow(0.2 * 6 / 13.25, 2);
	vr = pow(0.1 * (4 / 15.25 - 4 / 13.25), 2) +
	     pow(0.2 * (6 / 15.25 - 6 / 13.25), 2);
	x = row_of(rows, "unroll", 8);
	cr_assert_float_eq(num(x, "priced.step_ms.lo"),
			   13.25 * exp(-z * sqrt(vu)), 1e-9);
	cr_assert_float_eq(num(x, "priced.step_ms.hi"),
			   13.25 * exp(z * sqrt(vu)), 1e-9);
	x = row_of(rows, "checkpoint", 8);
	cr_assert_float_eq(num(x, "priced.x_unroll.ratio"), r, 1e-12);
	cr_assert_float_eq(num(x, "priced.x_unroll.lo"), r * exp(-z * sqrt(vr)),
			   1e-9);
	cr_assert_float_eq(num(x, "priced.x_unroll.hi"), r * exp(z * sqrt(vr)),
			   1e-9);
	json_decref(rows);
	json_decref(recs);
	json_decref(p);
}
