/*
 * test_plan_work.c — `deqbench plan`'s step times as work × price
 * (bench/cmd/plan_cost.h, plan_price.c, run_work_step and
 * run_work_from_record in bench/run/run_work.c, record_find in
 * bench/records/):
 *
 *   1. counts × prices on fixed numbers, no runs and no clocks: each
 *      method's counts (docs/methods.md §Work) and Σ count × price (the
 *      training head at head_train's price, each solver's line at the
 *      mean history, a unit without a price noted), step_fixed once a
 *      step, and the floor;
 *   2. the iteration lookup: the longest run of the configuration among
 *      records files (other configs, impl=pytorch, failed runs and
 *      subdirectories named local left out; ties to the first read), and
 *      a record's work from its work object, its trace or its means;
 *   3. `plan` on a tiny model with a --price file: a deq candidate with no
 *      committed run says so and is priced at its caps; with a run of its
 *      configuration its iterations come from that run and the table puts
 *      its measured time beside the prediction;
 *   4. bad input: --price / --records without a value, unreadable or
 *      without prices of the shape, price_cap_s out of range: exit 2, one
 *      line.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "methods/method.h"
#include "plan_cost.h"
#include "record_find.h"
#include "test_cli.h"

/* ----------------------------------------------- 1. counts × prices */

/* The tiny shape of every test here. */
static const char *const tiny[] = {
    "model=transformer", "d_model=16",	   "n_heads=2",	       "d_ff=32",
    "seq_len=8",	 "batch_size=4",   "corpus=synthetic", "vocab_size=40",
    "steps=3",		 "warmup_steps=1", "eval_tokens=64",   "threads=1"};
#define NTINY ((int)(sizeof(tiny) / sizeof(*tiny)))

/* The tiny config with up to 8 more key=value settings (NULL-ended). */
static struct bench_config cfg_of(const char *const *kv)
{
	struct bench_config c;
	char err[512];
	config_defaults(&c);
	for (int i = 0; i < NTINY; i++)
		cr_assert_eq(config_set_arg(&c, tiny[i], err, sizeof(err)), 0);
	for (int i = 0; kv && kv[i]; i++)
		cr_assert_eq(config_set_arg(&c, kv[i], err, sizeof(err)), 0,
			     "%s", err);
	cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
	return c;
}

/* One price record of the tiny shape (d_model), solver NULL for the
 * units that are not solver_update. */
static json_t *price_rec(int d_model, const char *unit, double ms,
			 const char *solver, double h)
{
	return json_pack(
	    "{s:s, s:s, s:f, s:f, s:s?, s:{s:s, s:i, s:i, s:i, s:i, s:i, s:i, "
	    "s:s}, s:{s:s}}",
	    "kind", "price", "unit", unit, "median_ms", ms, "h", h, "solver",
	    solver, "shape", "model", "transformer", "d_model", d_model,
	    "n_heads", 2, "d_ff", 32, "seq_len", 8, "batch_size", 4,
	    "vocab_size", 40, "precision", "fp32", "config", "device", "cpu");
}

/* Price records of the tiny shape at fixed prices (ms; host_bytes per
 * byte): Broyden's line through (1, 0.1), (15, 0.8), (30, 1.5), and with
 * anderson Anderson's through (1, 0.2), (8, 0.9). */
static json_t *fixed_prices(int d_model, int anderson)
{
	static const char *const u[] = {
	    "block_fwd_taped", "block_fwd", "block_vjp",  "block_vjp_input",
	    "head_fwd",	       "head_bwd",  "head_train", "optimizer_step",
	    "step_fixed",      "host_bytes"};
	static const double ms[] = {2.0, 1.5,  4.0, 3.0, 5.0,
				    6.0, 10.0, 7.0, 3.0, 0.001};
	static const double h[] = {1, 15, 30}, hs[] = {0.1, 0.8, 1.5};
	json_t *a = json_array();
	for (int i = 0; i < 10; i++)
		json_array_append_new(a,
				      price_rec(d_model, u[i], ms[i], NULL, 0));
	for (int i = 0; i < 3; i++)
		json_array_append_new(a, price_rec(d_model, "solver_update",
						   hs[i], "broyden", h[i]));
	for (int i = 0; anderson && i < 2; i++)
		json_array_append_new(a, price_rec(d_model, "solver_update",
						   0.2 + 0.7 * i, "anderson",
						   i ? 8 : 1));
	return a;
}

/* The prices of the tiny shape (report_cost_match) of fixed_prices. */
static json_t *tiny_prices(int anderson)
{
	struct bench_config c = cfg_of(NULL);
	json_t *p = fixed_prices(16, anderson);
	json_t *rec = json_pack("{s:o, s:{s:i}}", "config", config_to_json(&c),
				"model", "vocab_size", 40);
	json_t *m = report_cost_match(p, rec);
	cr_assert_not_null(m, "the fixed prices match the tiny shape");
	json_decref(rec);
	json_decref(p);
	return m;
}

/* Σ count × price (step_fixed apart) of config kv (deq: solves s; tape
 * bytes b; Anderson priced when anderson), and its counts in w. */
static double priced(const char *const *kv, const struct work_solves *s,
		     double b, double w[WORK_UNITS], int anderson,
		     json_t *unpriced)
{
	struct bench_config c = cfg_of(kv);
	json_t *m = tiny_prices(anderson);
	json_t *cj = config_to_json(&c);
	int deq =
	    !strcmp(json_string_value(json_object_get(cj, "method")), "deq");
	const char *fs =
	    deq ? json_string_value(json_object_get(cj, "f_solver")) : NULL;
	const char *bs =
	    deq ? json_string_value(json_object_get(cj, "b_solver")) : NULL;
	cr_assert_eq(run_work_step(&c.method, b, s, w), 0);
	double ms = plan_units_ms(w, m, fs, bs, unpriced);
	json_decref(cj);
	json_decref(m);
	return ms;
}

Test(cost, layered_counts_times_prices)
{
	double w[WORK_UNITS];
	const char *un[] = {"method=unroll", "layers=4", NULL};
	const char *ck[] = {"method=checkpoint", "layers=7", "k=3", NULL};
	const char *rv[] = {"method=revolve", "layers=7", "slots=1", NULL};
	const char *of[] = {"method=offload", "layers=5", NULL};
	/* unroll: 4 taped, 4 VJPs, the training head (head_train: 10, not
	 * head_fwd + head_bwd) and the optimizer 7 */
	cr_assert_float_eq(priced(un, NULL, 0, w, 1, NULL), 41.0, 1e-12);
	/* checkpoint L = 7, k = 3: last segment 1, 6 untaped + 6 recomputed
	 * (at the taped price) */
	cr_assert_float_eq(priced(ck, NULL, 0, w, 1, NULL), 68.0, 1e-12);
	cr_assert_eq(w[WORK_BLOCK_FWD_TAPED], 1);
	cr_assert_eq(w[WORK_BLOCK_FWD], 6);
	cr_assert_eq(w[WORK_BLOCK_FWD_RECOMPUTE], 6);
	/* revolve L = 7, one slot: A(7, 1) = 3·7 − C(5, 2) = 11 advances */
	cr_assert_float_eq(priced(rv, NULL, 0, w, 1, NULL), 75.5, 1e-12);
	cr_assert_eq(w[WORK_BLOCK_FWD], 11);
	cr_assert_eq(w[WORK_BLOCK_FWD_RECOMPUTE], 6);
	/* offload L = 5, 1000-byte tapes: 2·3 tapes moved, 0.001 ms a byte */
	cr_assert_float_eq(priced(of, NULL, 1000, w, 1, NULL), 53.0, 1e-12);
	cr_assert_eq(w[WORK_HOST_BYTES], 6000);
}

Test(cost, deq_counts_times_prices)
{
	double w[WORK_UNITS];
	const char *dq[] = {"method=deq", NULL};
	const char *sh[] = {"method=deq", "f_history=3", "b_history=2", NULL};
	const char *an[] = {"method=deq", "f_solver=anderson",
			    "b_solver=anderson", NULL};
	struct work_solves s = {10, 6, 0};
	json_t *unp = json_array();
	/* U = 9 + 5, H = 36 + 10: the line at h = 46/14 is 0.1 + 0.05 (h −
	 * 1), 14 updates of it 3 ms; 2 + 15 + 4 + 18 + 17 + 3 */
	cr_assert_float_eq(priced(dq, &s, 0, w, 1, NULL), 59.0, 1e-12);
	cr_assert_eq(w[WORK_SOLVER_UPDATE], 14);
	cr_assert_eq(w[WORK_SOLVER_HISTORY_SUM], 46);
	/* histories shorter than the solves: min(t, h) saturates */
	priced(sh, &s, 0, w, 1, NULL);
	cr_assert_eq(w[WORK_SOLVER_HISTORY_SUM], 21 + 7);
	/* a mean n_f between integers: H linear between H(10) and H(11) */
	s.nf = 10.5;
	priced(dq, &s, 0, w, 1, NULL);
	cr_assert_float_eq(w[WORK_SOLVER_HISTORY_SUM], 40.5 + 10, 1e-12);
	/* the regulariser on half the steps: 1 + 2J taped and full VJPs */
	s.nf = 10, s.jac = 0.5;
	priced(dq, &s, 0, w, 1, NULL);
	cr_assert_eq(w[WORK_BLOCK_FWD_TAPED], 2);
	cr_assert_eq(w[WORK_BLOCK_VJP_INPUT], 6.5);
	/* Anderson, m = 5: H = Σ_{j<10} min(j, 5) + Σ_{j<6} min(j, 5) = 35 +
	 * 15, its line 0.2 + 0.1 (h − 1) at 50/14: 14 updates 6.4 ms */
	s.jac = 0;
	cr_assert_float_eq(priced(an, &s, 0, w, 1, NULL), 62.4, 1e-12);
	cr_assert_eq(w[WORK_SOLVER_HISTORY_SUM], 50);
	/* prices without Anderson's update: noted, and left out */
	cr_assert_float_eq(priced(an, &s, 0, w, 0, unp), 56.0, 1e-12);
	cr_assert_str_eq(json_string_value(json_array_get(unp, 0)),
			 "solver_update");
	json_decref(unp);
	/* deq needs its solves */
	struct bench_config c = cfg_of(dq);
	cr_assert_eq(run_work_step(&c.method, 0, NULL, w), -1);
}

Test(cost, fixed_cost_and_floor)
{
	int clamped = 0;
	double w[WORK_UNITS];
	const char *un[] = {"method=unroll", "layers=4", NULL};
	json_t *unp = json_array(), *m = tiny_prices(1);
	priced(un, NULL, 0, w, 1, NULL);
	/* one optimizer step a training step × step_fixed */
	cr_assert_float_eq(plan_fixed_ms(w, m, unp), 3.0, 1e-12);
	cr_assert_eq(json_array_size(unp), 0);
	json_object_del(json_object_get(m, "units"), "step_fixed");
	cr_assert_eq(plan_fixed_ms(w, m, unp), 0); /* prices made before it */
	cr_assert_str_eq(json_string_value(json_array_get(unp, 0)),
			 "step_fixed");
	cr_assert_float_eq(plan_step_ms(41, 3, &clamped), 44.0, 1e-12);
	cr_assert_eq(clamped, 0);
	cr_assert_eq(plan_step_ms(0, 0, &clamped), PLAN_MIN_MS);
	cr_assert_eq(clamped, 1);
	json_decref(unp);
	json_decref(m);
}

/* microbatches = 2 at batch_size 4: the units of two micro-batches of 2
 * rows (run_work_micro: every unit twice, one optimizer step), priced at
 * batch_size 2's prices (report_cost_match divides the record's
 * batch_size by microbatches), step_fixed once a micro-batch; the prices
 * of batch 4 do not match it. */
Test(cost, micro_batches)
{
	double w[WORK_UNITS];
	struct bench_config c = cfg_of((const char *[]){
	    "method=unroll", "layers=4", "microbatches=2", NULL});
	json_t *p = fixed_prices(16, 0);
	json_t *rec = json_pack("{s:o, s:{s:i}}", "config", config_to_json(&c),
				"model", "vocab_size", 40);
	cr_assert_null(report_cost_match(p, rec), "batch 4's prices");
	json_decref(p);
	p = fixed_prices(16, 0);
	for (size_t i = 0; i < json_array_size(p); i++)
		json_object_set_new(
		    json_object_get(json_array_get(p, i), "shape"),
		    "batch_size", json_integer(2));
	json_t *m = report_cost_match(p, rec);
	cr_assert_not_null(m, "batch 2's prices match microbatches=2");
	cr_assert_eq(run_work_step(&c.method, 0, NULL, w), 0);
	run_work_micro(w, c.microbatches);
	cr_assert_eq(w[WORK_BLOCK_FWD_TAPED], 8);
	cr_assert_eq(w[WORK_BLOCK_VJP], 8);
	cr_assert_eq(w[WORK_HEAD_FWD], 2);
	cr_assert_eq(w[WORK_HEAD_BWD], 2);
	cr_assert_eq(w[WORK_OPTIMIZER_STEP], 1);
	/* 8 × 2 + 8 × 4 + 2 head_train × 10 + 7: unroll's 41 of one
	 * micro-batch's rows, twice, one Adam */
	cr_assert_float_eq(plan_units_ms(w, m, NULL, NULL, NULL), 75.0, 1e-12);
	cr_assert_float_eq(plan_fixed_ms(w, m, NULL), 2 * 3.0, 1e-12);
	json_decref(m);
	json_decref(p);
	json_decref(rec);
}

/* ------------------------------------------- 2. the iteration lookup */

/* A run record line: config {f_tol, seed, d_model (omitted when < 0)},
 * evals.steps, impl and status. */
static char *run_line(double f_tol, int seed, int d_model, int steps,
		      const char *impl, const char *status)
{
	json_t *c = json_pack("{s:f, s:i}", "f_tol", f_tol, "seed", seed);
	if (d_model >= 0)
		json_object_set_new(c, "d_model", json_integer(d_model));
	json_t *r = json_pack("{s:s, s:s, s:s, s:o, s:{s:i}}", "kind", "train",
			      "impl", impl, "status", status, "config", c,
			      "evals", "steps", steps);
	char *t = json_dumps(r, JSON_COMPACT);
	json_decref(r);
	return t;
}

static int skip_seed(const char *key, void *ctx)
{
	(void)ctx;
	return !strcmp(key, "seed");
}

static void write_lines(const char *path, char **lines, int n)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < n; i++) {
		fprintf(f, "%s\n", lines[i]);
		free(lines[i]);
	}
	fclose(f);
}

Test(lookup, the_longest_run_of_the_configuration, .init = cli_setup,
     .fini = cli_teardown)
{
	char a[512], sub[512], b[512], loc[512], c[512], err[512];
	char *la[] = {
	    run_line(0.001, 1, 16, 40, "deqbench", "ok"),
	    run_line(0.001, 2, 16, 2000, "deqbench", "ok"),    /* longest */
	    run_line(0.01, 1, 16, 5000, "deqbench", "ok"),     /* other tol */
	    run_line(0.001, 1, 16, 9000, "pytorch-2.1", "ok"), /* not ours */
	    run_line(0.001, 1, 16, 9000, "deqbench", "error"), /* failed */
	    strdup("not json"),
	    run_line(0.001, 3, 16, 2000, "deqbench", "ok")}; /* a tie */
	char *lb[] = {run_line(0.001, 1, 16, 300, "deqbench", "ok")};
	char *lc[] = {run_line(0.001, 1, 16, 8000, "deqbench", "ok")};
	cli_path(a, sizeof(a), "a.jsonl");
	cli_path(sub, sizeof(sub), "sub");
	cli_path(b, sizeof(b), "sub/b.jsonl");
	cli_path(loc, sizeof(loc), "local");
	cli_path(c, sizeof(c), "local/c.jsonl");
	mkdir(sub, 0755);
	mkdir(loc, 0755);
	write_lines(a, la, 7);
	write_lines(b, lb, 1);
	write_lines(c, lc, 1); /* a user's own: left out */
	json_t *runs = record_find_load(cli_dir, "local", err, sizeof(err));
	cr_assert_not_null(runs, "%s", err);
	cr_assert_eq(json_array_size(runs), 5, "%zu runs",
		     json_array_size(runs));
	json_t *want = json_pack("{s:f, s:i, s:i}", "f_tol", 0.001, "seed", 1,
				 "d_model", 16);
	const json_t *r =
	    record_find_longest(runs, want, NULL, skip_seed, NULL);
	char where[600];
	snprintf(where, sizeof(where), "%s:2", a);
	cr_assert_not_null(r);
	cr_assert_str_eq(json_string_value(json_object_get(r, "where")), where);
	/* seed compared: only seed 1's 40 and 300 steps */
	r = record_find_longest(runs, want, NULL, NULL, NULL);
	snprintf(where, sizeof(where), "%s:1", b);
	cr_assert_str_eq(json_string_value(json_object_get(r, "where")), where);
	/* none of the configuration */
	json_object_set_new(want, "f_tol", json_real(0.1));
	cr_assert_null(record_find_longest(runs, want, NULL, skip_seed, NULL));
	json_decref(want);
	json_decref(runs);
}

/* A record made before a key exists matches where want holds the key's
 * default. */
Test(lookup, a_key_the_record_lacks_is_its_default, .init = cli_setup,
     .fini = cli_teardown)
{
	char a[512], err[512];
	char *la[] = {run_line(0.001, 1, -1, 50, "deqbench", "ok")};
	cli_path(a, sizeof(a), "a.jsonl");
	write_lines(a, la, 1);
	json_t *runs = record_find_load(a, NULL, err, sizeof(err));
	json_t *want = json_pack("{s:f, s:i}", "f_tol", 0.001, "d_model", 16);
	json_t *d16 = json_pack("{s:i}", "d_model", 16);
	json_t *d64 = json_pack("{s:i}", "d_model", 64);
	cr_assert_not_null(record_find_longest(runs, want, d16, skip_seed, 0));
	cr_assert_null(record_find_longest(runs, want, d64, skip_seed, 0));
	json_decref(d16);
	json_decref(d64);
	json_decref(want);
	json_decref(runs);
}

/* A committed deq record's work: its work object's means, else its trace
 * step by step (H of each step, not of the mean), else its mean
 * iterations. */
Test(lookup, work_from_work_trace_or_means)
{
	const char *dq[] = {"method=deq", "f_history=3", "b_history=2", NULL};
	struct bench_config c = cfg_of(dq);
	double w[WORK_UNITS];
	const char *how;
	json_t *rec = json_pack(
	    "{s:{s:i}, s:{s:[i, i], s:[i, i], s:[n, f]}, s:{s:{s:f}, "
	    "s:{s:f}, s:i}}",
	    "evals", "steps", 2, "trace", "fwd_iters", 4, 8, "bwd_iters", 3, 5,
	    "jac_loss", 0.5, "solver", "forward", "iters_mean", 6.0, "backward",
	    "iters_mean", 4.0, "jac_loss_steps", 1);
	cr_assert_eq(run_work_from_record(rec, &c.method, 0, w, &how), 0);
	cr_assert_str_eq(how, "trace");
	/* H_f: (0+1+2) and (0+1+2+3+3+3+3) → 3 and 15; H_b: 1 and 1+2+2 */
	cr_assert_float_eq(w[WORK_SOLVER_HISTORY_SUM], (3 + 1 + 15 + 5) / 2.0,
			   1e-12);
	cr_assert_float_eq(w[WORK_BLOCK_FWD], 6, 1e-12);
	cr_assert_float_eq(w[WORK_BLOCK_VJP_INPUT], 4 + 0.5, 1e-12);
	json_object_del(rec, "trace");
	cr_assert_eq(run_work_from_record(rec, &c.method, 0, w, &how), 0);
	cr_assert_str_eq(how, "means");
	/* at n_f = 6: 0+1+2+3+3 = 9; n_b = 4: 0+1+2 = 3 */
	cr_assert_float_eq(w[WORK_SOLVER_HISTORY_SUM], 12, 1e-12);
	cr_assert_float_eq(w[WORK_BLOCK_FWD_TAPED], 1 + 2 * 0.5, 1e-12);
	json_t *wk = plan_work_json(w);
	json_object_set_new(rec, "work", wk);
	json_object_set_new(json_object_get(wk, "block_fwd"), "per_step",
			    json_real(7.25));
	cr_assert_eq(run_work_from_record(rec, &c.method, 0, w, &how), 0);
	cr_assert_str_eq(how, "work");
	cr_assert_eq(w[WORK_BLOCK_FWD], 7.25);
	json_decref(rec);
}

/* ------------------------------------------------------ 3. plan's table */

/* Writes fixed_prices(d_model) to <cli_dir>/prices.jsonl into path. */
static void price_file(char *path, size_t n, int d_model)
{
	json_t *p = fixed_prices(d_model, 1), *x;
	size_t i;
	cli_path(path, n, "prices.jsonl");
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	json_array_foreach(p, i, x)
	{
		char *t = json_dumps(x, JSON_COMPACT);
		fprintf(f, "%s\n", t);
		free(t);
	}
	fclose(f);
	json_decref(p);
}

/* deqbench plan on the tiny model (layers 4) with more args (NULL-ended);
 * its exit status, stdout in *out (free it). */
static int plan(const char *const *more, char **out, char *err, size_t n)
{
	const char *argv[48];
	char path[512];
	int k = 0;
	argv[k++] = "plan";
	argv[k++] = "budget_mib=1000";
	argv[k++] = "layers=4";
	for (int i = 0; i < NTINY; i++)
		argv[k++] = tiny[i];
	for (int i = 0; more[i]; i++)
		argv[k++] = more[i];
	argv[k] = NULL;
	int rc = cli_run(argv, 0, err, n);
	cli_path(path, sizeof(path), "stdout.txt");
	*out = cli_read(path, NULL);
	return rc;
}

Test(table, a_deq_without_a_run_says_so, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char pf[512], rf[512], pa[600], ra[600], err[4096], *out;
	price_file(pf, sizeof(pf), 16);
	cli_path(rf, sizeof(rf), "none.jsonl");
	cli_write_text(rf, "");
	snprintf(pa, sizeof(pa), "--price=%s", pf);
	snprintf(ra, sizeof(ra), "--records=%s", rf);
	const char *more[] = {pa, ra, NULL};
	cr_assert_eq(plan(more, &out, err, sizeof(err)), 0, "%s", err);
	char want[1024];
	snprintf(want, sizeof(want),
		 "deq broyden h=4: has no committed run of its configuration "
		 "in %s; priced at its caps (31 forwards, 41 VJPs a step)",
		 rf);
	cr_assert(strstr(out, want), "want \"%s\" in:\n%s", want, out);
	cr_assert(strstr(out, "prices from "), "%s", out);
	free(out);
}

Test(table, a_committed_run_gives_iterations_and_measured, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char pf[512], rf[512], pa[600], ra[600], oa[600], err[4096], *out;
	const char *run[NTINY + 8];
	int k = 0;
	price_file(pf, sizeof(pf), 16);
	cli_path(rf, sizeof(rf), "runs.jsonl");
	snprintf(oa, sizeof(oa), "out=%s", rf);
	run[k++] = "run";
	for (int i = 0; i < NTINY; i++)
		run[k++] = tiny[i];
	run[k++] = "method=deq";
	run[k++] = "f_history=4";
	run[k++] = "b_history=4";
	run[k++] = "seed=7"; /* a replicate: seed aside */
	run[k++] = oa;
	run[k] = NULL;
	cr_assert_eq(cli_run(run, 0, err, sizeof(err)), 0, "%s", err);
	snprintf(pa, sizeof(pa), "--price=%s", pf);
	snprintf(ra, sizeof(ra), "--records=%s", rf);
	const char *more[] = {pa, ra, NULL};
	cr_assert_eq(plan(more, &out, err, sizeof(err)), 0, "%s", err);
	cr_assert(strstr(out, "deq broyden h=4: iterations from r1 (the mean "
			      "over its steps, from its work object)"),
		  "%s", out);
	cr_assert(strstr(out, "r1 = "), "%s", out);
	/* its row: measured and pred/meas beside the prediction, src r1 */
	const char *row = strstr(out, "deq broyden h=4 ");
	cr_assert_not_null(row, "%s", out);
	const char *eol = strchr(row, '\n');
	cr_assert(eol && eol - row > 4 && !strncmp(eol - 2, "r1", 2),
		  "row: %.*s", (int)(eol ? eol - row : 80), row);
	free(out);
}

/* ------------------------------------------------------ 4. bad input */

static void bad(const char *a1, const char *want)
{
	char err[4096], *out;
	const char *more[] = {a1, NULL};
	cr_assert_eq(plan(more, &out, err, sizeof(err)), 2, "%s: %s", a1, err);
	free(out);
	char *nl = strchr(err, '\n');
	cr_assert(nl && nl[1] == 0, "one line expected: %s", err);
	cr_assert(strstr(err, want), "%s: want \"%s\" in %s", a1, want, err);
}

Test(table, bad_input, .init = cli_setup, .fini = cli_teardown, .timeout = 120)
{
	char pf[512], pa[600], ra[600], missing[512];
	cli_path(missing, sizeof(missing), "missing.jsonl");
	snprintf(pa, sizeof(pa), "--price=%s", missing);
	snprintf(ra, sizeof(ra), "--records=%s", missing);
	bad("--price", "--price needs a value");
	bad("--records", "--records needs a value");
	bad(pa, "plan --price");
	bad(ra, "plan --records");
	bad("price_cap_s=0", "price_cap_s=0");
	bad("price_cap_s=x", "price_cap_s=x");
	price_file(pf, sizeof(pf), 32); /* another d_model */
	snprintf(pa, sizeof(pa), "--price=%s", pf);
	bad(pa, "no price record of this shape");
}
