/* test_compare.c — `deqbench compare` (bench/report/compare.h). Statistics
 * on made-up records, built here with fixed times (never timed runs): the
 * run is the unit of replication, verdicts for too few runs and for a side
 * without data, pairing with --match, the timed range of a DEQ with
 * pretraining, null trace entries, the direction of a verdict, ties,
 * duplicate records, an A/A rerun, huge numbers printed whole. Then the
 * command on records cloned from one real tiny run: --fail-above's exit
 * status, unpaired configurations, formats and bad input, and the
 * committed eval records. */
#include <jansson.h>
#include <math.h>

#include "test_cli.h"

#include "compare.h"
#include "record.h"
#include "report.h"

/* ---- made-up records ---- */

/* A training record of method m, seed s, threads t with mean (and median)
 * step time ms (NAN: null); its trace when tr (n entries) is given. */
static json_t *rec_trace(const char *m, int s, int t, double ms,
			 const double *tr, int n)
{
	char at[32];
	json_t *r;
	snprintf(at, sizeof(at), "2026-01-01T00:%02d:%02dZ", t, s % 60);
	r = json_pack("{s:i, s:s, s:s, s:s, s:s, s:{s:s, s:i, s:s, s:i, s:i,"
		      " s:i, s:i, s:s, s:s}, s:{s:{s:o, s:o}}, s:{s:I, s:I},"
		      " s:{s:f}, s:{s:s}}",
		      "schema", 1, "kind", "train", "status", "ok", "impl",
		      "deqbench", "started_at", at, "config", "method", m,
		      "seed", s, "corpus", "synthetic", "layers", 3, "threads",
		      t, "warmup_steps", 2, "pretrain_steps", 0, "out",
		      "x.jsonl", "impl", "deqbench", "timing", "step_ms",
		      "median", isfinite(ms) ? json_real(ms) : json_null(),
		      "mean", isfinite(ms) ? json_real(ms) : json_null(),
		      "memory", "peak_depth_solver_bytes", (json_int_t)1 << 20,
		      "peak_total_bytes", (json_int_t)8 << 20, "quality",
		      "valid_ppl", 100.0, "host", "hostname", "h");
	cr_assert_not_null(r);
	if (tr) {
		json_t *a = json_array();
		for (int i = 0; i < n; i++)
			json_array_append_new(a, isfinite(tr[i])
						     ? json_real(tr[i])
						     : json_null());
		json_object_set_new(r, "trace",
				    json_pack("{s:o}", "step_ms", a));
	}
	return r;
}

static json_t *rec(const char *m, int s, int t, double ms)
{
	return rec_trace(m, s, t, ms, NULL, 0);
}

/* n records of method m, threads t, seeds s0.., median times ms[i] * k. */
static void add_runs(json_t *arr, const char *m, int s0, int t,
		     const double *ms, int n, double k)
{
	for (int i = 0; i < n; i++)
		json_array_append_new(arr, rec(m, s0 + i, t, ms[i] * k));
}

/* compare_records of b against n, --match match (or NULL), --threshold
 * thr (a fraction); the result, asserted non-NULL. */
static json_t *cmp(const json_t *b, const json_t *n, const char *match,
		   double thr)
{
	struct compare_opts o = {match, thr, COMPARE_ALPHA};
	char err[400];
	json_t *r = compare_records(b, n, &o, err, sizeof(err));
	cr_assert_not_null(r, "%s", err);
	return r;
}

static json_t *pair(const json_t *res, size_t i)
{
	return json_array_get(json_object_get(res, "pairs"), i);
}

static const char *pstr(const json_t *res, size_t i, const char *k)
{
	const char *s = json_string_value(json_object_get(pair(res, i), k));
	return s ? s : "";
}

static double pnum(const json_t *res, size_t i, const char *k)
{
	return record_num(pair(res, i), k);
}

static const double MS4[] = {10.0, 10.2, 9.9, 10.1}, MS3[] = {10, 10.2, 9.9};

/* G18: NaN samples (null medians, eval records without timing) once made
 * the rank sum loop spin forever; the test's timeout is the check. */
Test(compare, nan_samples_end, .timeout = 20)
{
	json_t *b = json_array(), *n = json_array(), *r;
	add_runs(b, "unroll", 1, 1, MS4, 4, 1);
	for (int s = 1; s <= 4; s++)
		json_array_append_new(n, rec("unroll", s, 1, NAN));
	r = cmp(b, n, NULL, COMPARE_THRESHOLD);
	cr_assert_eq(pnum(r, 0, "n_new"), 0);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "NO DATA");
	json_decref(r);
	/* one null among finite medians: that run only is left out */
	json_array_append_new(n, rec("unroll", 9, 1, 20));
	json_array_append_new(n, rec("unroll", 10, 1, 20));
	json_array_append_new(n, rec("unroll", 11, 1, 20));
	json_array_append_new(n, rec("unroll", 12, 1, 20));
	r = cmp(b, n, NULL, COMPARE_THRESHOLD);
	cr_assert_eq(pnum(r, 0, "n_new"), 4);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "SLOWER");
	json_decref(r);
	json_decref(b);
	json_decref(n);
}

/* G18: an eval record has no training timing; compare takes its inference
 * time per batch. */
Test(compare, eval_records_compare_inference, .timeout = 20)
{
	json_t *b = json_array(), *n = json_array(), *r;
	for (int s = 1; s <= 4; s++) {
		json_t *e = rec("deq", s, 1, NAN), *f;
		json_object_set_new(e, "kind", json_string("eval"));
		json_object_set_new(e, "timing", json_null());
		json_object_set_new(e, "inference",
				    json_pack("{s:{s:f, s:f}}", "step_ms",
					      "median", MS4[s - 1], "mean",
					      MS4[s - 1]));
		f = json_deep_copy(e);
		json_object_set_new(json_object_get(f, "inference"), "step_ms",
				    json_pack("{s:f, s:f}", "median",
					      2 * MS4[s - 1], "mean",
					      2 * MS4[s - 1]));
		json_array_append_new(b, e);
		json_array_append_new(n, f);
	}
	r = cmp(b, n, NULL, COMPARE_THRESHOLD);
	cr_assert_str_eq(pstr(r, 0, "time"), "inference");
	cr_assert_eq(pnum(r, 0, "n_base"), 4);
	cr_assert_float_eq(pnum(r, 0, "step_ratio"), 2.0, 1e-12);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "SLOWER");
	json_decref(r);
	json_decref(b);
	json_decref(n);
}

/* G6: with --match threads, NEW's threads=2 rows pair with BASE's
 * threads=1 row on their own, neither dropped nor pooled with NEW's
 * threads=1 rows. */
Test(compare, match_pairs_each_new_row)
{
	json_t *b = json_array(), *n = json_array(), *r;
	add_runs(b, "unroll", 1, 1, MS4, 4, 1);
	add_runs(n, "unroll", 1, 1, MS4, 4, 1);
	add_runs(n, "unroll", 1, 2, MS4, 4, 2);
	r = cmp(b, n, "threads", COMPARE_THRESHOLD);
	cr_assert_eq(json_array_size(json_object_get(r, "pairs")), 2);
	cr_assert_eq(json_array_size(json_object_get(r, "unpaired_new")), 0);
	for (size_t i = 0; i < 2; i++) {
		double t = pnum(r, i, "step_ratio");
		cr_assert_eq(pnum(r, i, "n_new"), 4);
		cr_assert_eq(pnum(r, i, "runs_new"), 4);
		cr_assert(fabs(t - 1) < 1e-12 || fabs(t - 2) < 1e-12, "%g", t);
		cr_assert_str_eq(pstr(r, i, "verdict"),
				 fabs(t - 1) < 1e-12 ? "SAME" : "SLOWER");
	}
	json_decref(r);
	json_decref(b);
	json_decref(n);
}

/* G7, G20.9: 3 runs a side cannot reach p < 0.05 (smallest p 0.1): such a
 * pair says UNDECIDED and why, not NOISY; a side without a timed ok run
 * says NO DATA, a NEW side whose runs all diverged NEW DIVERGED; the gate
 * of --fail-above counts them and goes by the ratio alone when the test
 * cannot decide. */
Test(compare, small_n_and_no_data)
{
	json_t *b = json_array(), *n = json_array(), *d = json_array(), *r;
	add_runs(b, "unroll", 1, 1, MS3, 3, 1);
	add_runs(n, "unroll", 1, 1, MS3, 3, 2);
	r = cmp(b, n, NULL, COMPARE_THRESHOLD);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "UNDECIDED");
	cr_assert(strstr(pstr(r, 0, "reason"),
			 "too few runs to call (n=3 vs 3; smallest p = 0.1; "
			 "need n ≥ 4 a side at α = 0.05)"),
		  "%s", pstr(r, 0, "reason"));
	cr_assert_float_eq(pnum(r, 0, "p_min"), 0.1, 1e-12);
	cr_assert_eq(compare_gate(r, 50, NULL), 1);
	cr_assert_eq(compare_gate(r, 150, NULL), 0);
	json_decref(r);
	for (int s = 1; s <= 3; s++) {
		json_t *x = rec("unroll", s, 1, NAN);
		json_object_set_new(x, "status", json_string("diverged"));
		json_array_append_new(d, x);
	}
	r = cmp(b, d, NULL, COMPARE_THRESHOLD);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "NEW DIVERGED");
	cr_assert_eq(compare_gate(r, 50, NULL), 1);
	json_decref(r);
	r = cmp(d, b, NULL, COMPARE_THRESHOLD);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "NO DATA");
	json_decref(r);
	json_decref(b);
	json_decref(n);
	json_decref(d);
}

/* Step times of a trace: 2 warmup steps, then a small fixed jitter around
 * ms, into tr[0..n). */
static void trace_of(double *tr, int n, double ms)
{
	for (int i = 0; i < n; i++)
		tr[i] = ms * (1 + 0.002 * ((i * 7) % 5 - 2));
}

/* G8: a DEQ run with pretraining traces its 12 unrolled steps and the deq
 * phase's 2 warmup steps too; none of them is a sample. */
Test(compare, pretraining_not_pooled)
{
	json_t *b = json_array(), *r;
	double tr[24];
	for (int s = 1; s <= 4; s++) {
		json_t *x;
		trace_of(tr, 24, 1.3);
		for (int i = 0; i < 12; i++)
			tr[i] = 0.3;
		x = rec_trace("deq", s, 1, 1.3, tr, 24);
		json_object_set_new(json_object_get(x, "config"),
				    "pretrain_steps", json_integer(12));
		json_array_append_new(b, x);
	}
	r = cmp(b, b, NULL, COMPARE_THRESHOLD);
	cr_assert_eq(pnum(r, 0, "n_base"), 4);
	cr_assert_str_eq(pstr(r, 0, "samples"), "run means");
	cr_assert_float_eq(pnum(r, 0, "step_ms_base"), 1.3, 1e-12);
	json_decref(r);
	json_decref(b);
}

/* G9: a null trace entry is no 0 ms step; and FASTER/SLOWER need the U
 * test on the same side as the medians: 17 runs a side whose medians say
 * +9.9% while the ranks say NEW is faster (exact p 0.0287, computed by
 * enumeration) read NOISY. */
Test(compare, null_entries_and_direction)
{
	json_t *b = json_array(), *n = json_array(), *r;
	double tr[22];
	for (int s = 1; s <= 3; s++) {
		trace_of(tr, 22, MS3[s - 1]);
		json_array_append_new(
		    b, rec_trace("unroll", s, 1, MS3[s - 1], tr, 22));
		trace_of(tr, 22, 1.1 * MS3[s - 1]);
		for (int i = 0; i < 22; i += 3)
			tr[i] = NAN;
		json_array_append_new(
		    n, rec_trace("unroll", s, 1, 1.1 * MS3[s - 1], tr, 22));
	}
	r = cmp(b, n, NULL, COMPARE_THRESHOLD);
	cr_assert_str_neq(pstr(r, 0, "verdict"), "SLOWER");
	cr_assert_str_neq(pstr(r, 0, "verdict"), "FASTER");
	json_decref(r);
	json_decref(b);
	json_decref(n);
	b = json_array();
	n = json_array();
	for (int i = 0; i < 17; i++) {
		json_array_append_new(
		    b, rec("unroll", i + 1, 1,
			   i < 9 ? 10 + 0.001 * i : 100 + 0.01 * (i - 9)));
		json_array_append_new(
		    n, rec("unroll", i + 1, 1,
			   i < 9 ? 11 + 0.001 * i : 1 + 0.01 * (i - 9)));
	}
	r = cmp(b, n, NULL, COMPARE_THRESHOLD);
	cr_assert_float_eq(pnum(r, 0, "step_ratio"), 11.0 / 10.008, 1e-9);
	cr_assert_float_eq(pnum(r, 0, "p"), 0.028670001573787372, 1e-9);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "NOISY");
	cr_assert(strstr(pstr(r, 0, "reason"), "direction"), "%s",
		  pstr(r, 0, "reason"));
	json_decref(r);
	json_decref(b);
	json_decref(n);
}

/* G10: BASE's records given twice are 3 runs, not 6, in compare and in
 * report's rows, and they are named; ties at small n take the exact
 * permutation distribution (medians 1,1,1 against 2,2,2: p 0.1, not the
 * normal approximation's 0.047). */
Test(compare, duplicates_and_ties)
{
	json_t *b = json_array(), *n = json_array(), *r, *rows;
	const double one[] = {1, 1, 1};
	add_runs(b, "unroll", 1, 1, one, 3, 1);
	add_runs(b, "unroll", 1, 1, one, 3, 1);
	add_runs(n, "unroll", 1, 1, one, 3, 2);
	r = cmp(b, n, NULL, COMPARE_THRESHOLD);
	cr_assert_eq(pnum(r, 0, "runs_base"), 3);
	cr_assert_eq(pnum(r, 0, "n_base"), 3);
	cr_assert_float_eq(pnum(r, 0, "p"), 0.1, 1e-12);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "UNDECIDED");
	cr_assert_str_eq(json_string_value(json_array_get(
			     json_object_get(pair(r, 0), "health_base"), 1)),
			 "duplicates left out 3");
	json_decref(r);
	rows = report_rows(b);
	cr_assert_eq(record_num(json_array_get(rows, 0), "runs"), 3);
	cr_assert_eq(record_num(json_array_get(rows, 0), "duplicates"), 3);
	json_decref(rows);
	json_decref(b);
	json_decref(n);
}

/* G10: the same configs run twice (an A/A rerun) differ a little from run
 * to run (medians +0.5% and +0.2% here, steps tight around each run's
 * median); pooled steps called that SLOWER at --threshold 0.1. The run is
 * the unit of replication: 3 a side reads UNDECIDED, 5 a side with
 * interleaved medians NOISY. */
Test(compare, a_a_rerun_is_no_difference)
{
	const double bm[] = {1.00, 1.01, 1.02, 0.995, 1.015};
	const double nm[] = {1.005, 1.015, 1.025, 0.99, 1.012};
	double tr[22];
	for (int k = 3; k <= 5; k += 2) {
		json_t *b = json_array(), *n = json_array(), *r;
		const char *v;
		for (int s = 0; s < k; s++) {
			trace_of(tr, 22, bm[s]);
			json_array_append_new(
			    b, rec_trace("unroll", s + 1, 1, bm[s], tr, 22));
			trace_of(tr, 22, nm[s]);
			json_array_append_new(
			    n, rec_trace("unroll", s + 1, 1, nm[s], tr, 22));
		}
		r = cmp(b, n, NULL, 0.001);
		v = pstr(r, 0, "verdict");
		cr_assert_str_eq(v, k == 3 ? "UNDECIDED" : "NOISY",
				 "%d runs a side: %s", k, v);
		json_decref(r);
		json_decref(b);
		json_decref(n);
	}
}

/* host.blas.core of every record of arr set to core (NULL: left out,
 * as in records made before host.blas). */
static void set_core(json_t *arr, const char *core)
{
	size_t i;
	json_t *r;
	json_array_foreach(arr, i, r)
	{
		json_t *h = json_object_get(r, "host");
		if (core)
			json_object_set_new(h, "blas",
					    json_pack("{s:s}", "core", core));
	}
}

/* Whether a note of pair 0 of res contains text. */
static int has_note(const json_t *res, const char *text)
{
	size_t i;
	json_t *s;
	json_array_foreach(json_object_get(pair(res, 0), "notes"), i,
			   s) if (strstr(json_string_value(s), text)) return 1;
	return 0;
}

/* Runs on two OpenBLAS cores are two machines: the pair says so, naming
 * both; the same core on both sides gives no such note, and neither do
 * GPU runs (their times do not come from the host's BLAS). */
Test(compare, different_blas_cores_named)
{
	json_t *b = json_array(), *n = json_array(), *r;
	add_runs(b, "unroll", 1, 1, MS4, 4, 1.0);
	add_runs(n, "unroll", 1, 1, MS4, 4, 3.0);
	set_core(b, "Haswell");
	set_core(n, "Prescott");
	r = cmp(b, n, NULL, 0.05);
	cr_assert(has_note(r, "different machines: BASE ran OpenBLAS core "
			      "Haswell, NEW Prescott"));
	json_decref(r);
	set_core(n, "Haswell");
	r = cmp(b, n, NULL, 0.05);
	cr_assert_not(has_note(r, "different machines"));
	json_decref(r);
	/* a record from before host.blas: its core is unknown */
	json_decref(n);
	n = json_array();
	add_runs(n, "unroll", 1, 1, MS4, 4, 1.0);
	r = cmp(b, n, NULL, 0.05);
	cr_assert(has_note(r, "NEW unknown"));
	json_decref(r);
	/* GPU runs on both sides: no BLAS note whatever the hosts ran */
	set_core(n, "Prescott");
	for (int k = 0; k < 2; k++) {
		size_t i;
		json_t *x;
		json_array_foreach(k ? n : b, i, x)
		    json_object_set_new(json_object_get(x, "config"), "device",
					json_string("cuda"));
	}
	r = cmp(b, n, NULL, 0.05);
	cr_assert_not(has_note(r, "different machines"));
	json_decref(r);
	json_decref(b);
	json_decref(n);
}

/* G20.10: 1e308 ms and a ratio of 1e308 printed whole, not cut by a
 * buffer. */
Test(compare, huge_values_printed_whole)
{
	json_t *b = json_array(), *n = json_array(), *r;
	const double one[] = {1, 1, 1, 1}, big[] = {1e308, 1e308, 1e308, 1e308};
	char *text;
	size_t len;
	FILE *f = open_memstream(&text, &len);
	add_runs(b, "unroll", 1, 1, one, 4, 1);
	add_runs(n, "unroll", 1, 1, big, 4, 1);
	r = cmp(b, n, NULL, COMPARE_THRESHOLD);
	compare_print(f, r, COMPARE_MD);
	fclose(f);
	cr_assert(strstr(text, "| 1e+308 |"), "%s", text);
	cr_assert(!strstr(text, "10000000000000000"), "%s", text);
	free(text);
	json_decref(r);
	json_decref(b);
	json_decref(n);
}

/* ---- the command, on records of a real tiny run ---- */

#define TINY                                                                   \
	"\"corpus\": \"synthetic\", \"d_model\": 16, \"n_heads\": 2, "         \
	"\"d_ff\": 32, \"seq_len\": 8, \"batch_size\": 2, \"layers\": 3, "     \
	"\"steps\": 30, \"warmup_steps\": 2, \"lr_warmup\": 1, "               \
	"\"eval_tokens\": 64, \"threads\": 1, \"eval_warmup\": 0, "            \
	"\"trace\": true"

/* cli_dir/base.jsonl: one unroll and one deq run of the tiny config. */
static void make_base(void)
{
	char suite[600], text[1200], out[600], err[2048];
	cli_path(suite, sizeof(suite), "s.json");
	cli_path(out, sizeof(out), "base.jsonl");
	snprintf(text, sizeof(text),
		 "{\"name\": \"cmp\", \"base\": {" TINY ", \"out\": \"%s\"}, "
		 "\"axes\": {\"method\": [\"unroll\", \"deq\"]}}",
		 out);
	cli_write_text(suite, text);
	const char *a[] = {"suite", suite, NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
}

/* base.jsonl's records, one per line, into recs[0..2) (new references). */
static void base_records(json_t **recs)
{
	char in[600], *text, *save = NULL;
	int k = 0;
	cli_path(in, sizeof(in), "base.jsonl");
	text = cli_read(in, NULL);
	cr_assert_not_null(text);
	for (char *l = strtok_r(text, "\n", &save); l && k < 2;
	     l = strtok_r(NULL, "\n", &save))
		cr_assert_not_null(recs[k++] = json_loads(l, 0, NULL));
	cr_assert_eq(k, 2);
	free(text);
}

/* Sets every statistic of r's timing.step_ms to ms: a record whose
 * median is ms and whose statistics stay in order (validate). */
static void set_step_ms(json_t *r, double ms)
{
	static const char *const st[] = {"median", "mean", "p10", "p90", "min",
					 "max",	   "p25",  "p75", NULL};
	json_t *o = json_object_get(json_object_get(r, "timing"), "step_ms");
	for (int i = 0; st[i]; i++)
		json_object_set_new(o, st[i], json_real(ms));
}

/* cli_dir/name: per record of base.jsonl, n runs (seeds 1..n, started a
 * second apart) whose median step time is ms[i] * k; config key `key` set
 * to value when key. The medians are what compare reads: fixed here, so
 * nothing depends on how fast the tiny run was. */
static void make_runs(const char *name, const double *ms, int n, double k,
		      const char *key, json_t *value)
{
	char out[600], at[32];
	json_t *recs[2];
	FILE *f;
	cli_path(out, sizeof(out), name);
	base_records(recs);
	f = fopen(out, "a");
	cr_assert_not_null(f);
	for (int j = 0; j < 2; j++) {
		for (int i = 0; i < n; i++) {
			json_t *r = json_deep_copy(recs[j]);
			json_t *cfg = json_object_get(r, "config");
			snprintf(at, sizeof(at), "2026-01-01T00:00:%02dZ", i);
			json_object_set_new(r, "started_at", json_string(at));
			json_object_set_new(cfg, "seed", json_integer(i + 1));
			if (key)
				json_object_set(cfg, key, value);
			/* every statistic: validate holds them in order */
			set_step_ms(r, ms[i] * k);
			json_dumpf(r, f, JSON_COMPACT);
			fputc('\n', f);
			json_decref(r);
		}
		json_decref(recs[j]);
	}
	fclose(f);
}

/* compare's JSON result of cli_dir's b against n, an extra flag after. */
static json_t *compare_json(const char *b, const char *n, const char *flag,
			    const char *value)
{
	char pb[600], pn[600], out[600], err[2048];
	const char *a[] = {"compare", pb,   pn,	   "--format",
			   "json",    flag, value, NULL};
	json_t *r;
	cli_path(pb, sizeof(pb), b);
	cli_path(pn, sizeof(pn), n);
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(out, sizeof(out), "stdout.txt");
	r = json_load_file(out, 0, NULL);
	cr_assert_not_null(r);
	return r;
}

/* G7: --fail-above fails SLOWER past its threshold, and a pair the test
 * cannot decide (3 runs a side) by its ratio alone, saying which rule. */
Test(compare, fail_above, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char b[600], n[600], err[4096];
	json_t *r;
	make_base();
	make_runs("b4.jsonl", MS4, 4, 1, NULL, NULL);
	make_runs("s4.jsonl", MS4, 4, 1.5, NULL, NULL);
	r = compare_json("b4.jsonl", "s4.jsonl", NULL, NULL);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "SLOWER");
	cr_assert_str_eq(pstr(r, 1, "verdict"), "SLOWER");
	json_decref(r);
	cli_path(b, sizeof(b), "b4.jsonl");
	cli_path(n, sizeof(n), "s4.jsonl");
	const char *over[] = {"compare", b, n, "--fail-above", "20", NULL};
	cr_assert_eq(cli_run(over, 0, err, sizeof(err)), 1, "%s", err);
	cr_assert(strstr(err, "SLOWER by more than 20%"), "%s", err);
	const char *under[] = {"compare", b, n, "--fail-above=60", NULL};
	cr_assert_eq(cli_run(under, 0, err, sizeof(err)), 0, "%s", err);
	make_runs("b3.jsonl", MS3, 3, 1, NULL, NULL);
	make_runs("s3.jsonl", MS3, 3, 2, NULL, NULL);
	cli_path(b, sizeof(b), "b3.jsonl");
	cli_path(n, sizeof(n), "s3.jsonl");
	const char *few[] = {"compare", b, n, "--fail-above", "10", NULL};
	cr_assert_eq(cli_run(few, 0, err, sizeof(err)), 1, "%s", err);
	cr_assert(strstr(err, "UNDECIDED") && strstr(err, "ratio alone"), "%s",
		  err);
	const char *lax[] = {"compare", b, n, "--fail-above", "150", NULL};
	cr_assert_eq(cli_run(lax, 0, err, sizeof(err)), 0, "%s", err);
}

/* A configuration on one side only is unpaired; --match pairs across the
 * key; G6: a key that pairs one NEW row with several BASE rows is
 * refused in one line. */
Test(compare, unpaired_and_match, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char b[600], n[600], err[2048];
	json_t *r, *v[] = {json_integer(1), json_integer(2), json_integer(4)};
	make_base();
	make_runs("t2.jsonl", MS3, 3, 1, "threads", v[1]);
	r = compare_json("base.jsonl", "t2.jsonl", NULL, NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "pairs")), 0);
	cr_assert_eq(json_array_size(json_object_get(r, "unpaired_base")), 2);
	cr_assert_eq(json_array_size(json_object_get(r, "unpaired_new")), 2);
	json_decref(r);
	r = compare_json("base.jsonl", "t2.jsonl", "--match", "threads");
	cr_assert_eq(json_array_size(json_object_get(r, "pairs")), 2);
	cr_assert_eq(json_array_size(json_object_get(r, "unpaired_new")), 0);
	cr_assert_eq(record_num(pair(r, 0), "match.new"), 2);
	json_decref(r);
	make_runs("t12.jsonl", MS3, 3, 1, "threads", v[0]);
	make_runs("t12.jsonl", MS3, 3, 1, "threads", v[1]);
	make_runs("t4.jsonl", MS3, 3, 1, "threads", v[2]);
	cli_path(b, sizeof(b), "t12.jsonl");
	cli_path(n, sizeof(n), "t4.jsonl");
	const char *amb[] = {"compare", b, n, "--match", "threads", NULL};
	cr_assert_eq(cli_run(amb, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "--match threads") &&
		      strchr(err, '\n') == strrchr(err, '\n'),
		  "%s", err);
	/* NEW's own value among BASE's rows pairs with it */
	r = compare_json("t12.jsonl", "t12.jsonl", "--match", "threads");
	cr_assert_eq(json_array_size(json_object_get(r, "pairs")), 4);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "SAME");
	json_decref(r);
	for (int i = 0; i < 3; i++)
		json_decref(v[i]);
}

/* G18: the committed eval records (no training timing) compare by their
 * inference time, and end. */
Test(compare, committed_eval_records, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	char f[600], out[600], err[2048];
	const char *root = getenv("DQ_SOURCE_ROOT");
	json_t *r, *p;
	size_t i;
	cr_assert_not_null(root);
	snprintf(f, sizeof(f), "%s/results/cpu/eps-infer.jsonl", root);
	const char *a[] = {"compare", f, f, "--format", "json", NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(out, sizeof(out), "stdout.txt");
	r = json_load_file(out, 0, NULL);
	cr_assert_not_null(r);
	cr_assert_gt(json_array_size(json_object_get(r, "pairs")), 0);
	json_array_foreach(json_object_get(r, "pairs"), i, p)
	{
		cr_assert_str_eq(json_string_value(json_object_get(p, "time")),
				 "inference");
		cr_assert_str_eq(
		    json_string_value(json_object_get(p, "verdict")), "SAME");
	}
	json_decref(r);
}

Test(compare, formats_and_bad_input, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char b[600], dir[600], out[600], err[2048], *text;
	make_base();
	cli_path(b, sizeof(b), "base.jsonl");
	/* a directory of .jsonl is a side too */
	cli_path(dir, sizeof(dir), "d");
	cr_assert_eq(mkdir(dir, 0755), 0);
	cli_path(out, sizeof(out), "d/a.jsonl");
	text = cli_read(b, NULL);
	cli_write_text(out, text);
	free(text);
	const char *csv[] = {"compare", b, dir, "--format", "csv", NULL};
	cr_assert_eq(cli_run(csv, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(out, sizeof(out), "stdout.txt");
	text = cli_read(out, NULL);
	cr_assert(!strncmp(text, "kind,group,method,runs_base", 27), "%s",
		  text);
	cr_assert(strstr(text, ",SAME,step,"), "%s", text);
	free(text);
	const char *md[] = {"compare", b, b, NULL};
	cr_assert_eq(cli_run(md, 0, err, sizeof(err)), 0, "%s", err);
	text = cli_read(out, NULL);
	cr_assert(strstr(text, "| verdict |") && strstr(text, "| SAME |"), "%s",
		  text);
	free(text);
	const char *help[] = {"compare", "--help", NULL};
	cr_assert_eq(cli_run(help, 0, err, sizeof(err)), 0);
	const char *one[] = {"compare", b, NULL};
	const char *fmt[] = {"compare", b, b, "--format", "xml", NULL};
	const char *key[] = {"compare", b, b, "--match", "nokey", NULL};
	const char *flag[] = {"compare", b, b, "--nope", NULL};
	const char *num[] = {"compare", b, b, "--fail-above", "x", NULL};
	const char *missing[] = {"compare", b, "/nonexistent.jsonl", NULL};
	/* G20.7: a flag given twice, which the last one silently won */
	const char *twice[] = {"compare",      b,   b, "--format", "md",
			       "--format=csv", NULL};
	const char *const *bad[] = {one, fmt, key, flag, num, missing, twice};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cr_assert_eq(cli_run(bad[i], 0, err, sizeof(err)), 2,
			     "case %zu: %s", i, err);
		cr_assert(strstr(err, "deqbench: ") &&
			      strchr(err, '\n') == strrchr(err, '\n'),
			  "case %zu: one line: %s", i, err);
	}
}
