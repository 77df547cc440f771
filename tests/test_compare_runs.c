/* test_compare_runs.c — `deqbench compare` at the level of runs
 * (bench/report/compare.h): the run's mean step time is the sample,
 * the exact U test on run means calls a difference only when the runs
 * allow one, and × unroll compares each run's ratio to its file's unroll
 * run of the same seed. Every time here is fixed: records are cloned from
 * the committed results/cpu/default.jsonl (or made up) with run means
 * drawn by a seeded generator, never timed, so nothing depends on how
 * fast this machine is. */
#include <jansson.h>
#include <math.h>

#include "test_cli.h"

#include "compare.h"
#include "record.h"

/* ---- fixed run means ---- */

/* xorshift64: the same stream on every machine. */
static double uniform(unsigned long long *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (double)(*s >> 11) / 9007199254740992.0;
}

/* ms × (1 + U(-j, j)): a run mean jittered by up to j (0.05: 5%). */
static double jittered(unsigned long long *s, double ms, double j)
{
	return ms * (1 + j * (2 * uniform(s) - 1));
}

/* The unroll and DEQ run means of n seeds into t[0][..] and t[1][..]:
 * unroll about 190 ms, the DEQ about 150, each jittered 5%. */
static void draw_side(unsigned long long *s, double t[2][8], int n)
{
	for (int i = 0; i < n; i++) {
		t[0][i] = jittered(s, 190, 0.05);
		t[1][i] = jittered(s, 150, 0.05);
	}
}

/* ---- in memory: made-up records ---- */

/* A training record of method m, seed s, with mean (and median) step time
 * ms: what compare reads of a record. */
static json_t *rec(const char *m, int s, double ms)
{
	char at[32];
	snprintf(at, sizeof(at), "2026-01-01T00:00:%02dZ", s % 60);
	json_t *r = json_pack(
	    "{s:i, s:s, s:s, s:s, s:s, s:{s:s, s:i, s:s, s:i, s:i},"
	    " s:{s:{s:f, s:f}}, s:{s:s}}",
	    "schema", 1, "kind", "train", "status", "ok", "impl", "deqbench",
	    "started_at", at, "config", "method", m, "seed", s, "corpus",
	    "synthetic", "layers", 3, "threads", 1, "timing", "step_ms",
	    "median", ms, "mean", ms, "host", "hostname", "h");
	cr_assert_not_null(r);
	return r;
}

/* Records of t[0] (unroll) and t[1] (deq), seeds 1..n, times k. */
static json_t *side_of(double t[2][8], int n, double k)
{
	json_t *a = json_array();
	for (int i = 0; i < n; i++) {
		json_array_append_new(a, rec("unroll", i + 1, t[0][i] * k));
		json_array_append_new(a, rec("deq", i + 1, t[1][i] * k));
	}
	return a;
}

static json_t *cmp(const json_t *b, const json_t *n)
{
	struct compare_opts o = {NULL, COMPARE_THRESHOLD, COMPARE_ALPHA};
	char err[400];
	json_t *r = compare_records(b, n, &o, err, sizeof(err));
	cr_assert_not_null(r, "%s", err);
	return r;
}

/* Pair i's string at dotted path k ("verdict", "x_unroll.verdict"). */
static const char *pstr(const json_t *res, size_t i, const char *k)
{
	const json_t *p = json_array_get(json_object_get(res, "pairs"), i);
	const char *dot = strchr(k, '.'), *s;
	if (dot) {
		p = json_object_get(p, "x_unroll");
		k = dot + 1;
	}
	s = json_string_value(json_object_get(p, k));
	return s ? s : "";
}

static double pnum(const json_t *res, size_t i, const char *k)
{
	return record_num(json_array_get(json_object_get(res, "pairs"), i), k);
}

static int called(const char *v)
{
	return !strcmp(v, "FASTER") || !strcmp(v, "SLOWER");
}

/* A/A: 1000 pairs of 5 runs a side drawn from one distribution (5%
 * jitter). The exact test's p falls below alpha for at most alpha of
 * them, and a call needs the medians 5% apart as well, so FASTER or
 * SLOWER must stay well under 5% of the verdicts (pooled steps called
 * such pairs FASTER at p = 3e-19); the count is printed. */
Test(compare_runs, a_a_false_calls_below_alpha, .timeout = 120)
{
	unsigned long long s = 0x9e3779b97f4a7c15ull;
	int calls = 0, xcalls = 0, same = 0, total = 1000;
	double tb[2][8], tn[2][8];
	for (int k = 0; k < total; k++) {
		json_t *b, *n, *r;
		draw_side(&s, tb, 5);
		draw_side(&s, tn, 5);
		b = side_of(tb, 5, 1);
		n = side_of(tn, 5, 1);
		r = cmp(b, n);
		for (size_t i = 0; i < 2; i++) {
			calls += called(pstr(r, i, "verdict"));
			same += !strcmp(pstr(r, i, "verdict"), "SAME");
			cr_assert_str_neq(pstr(r, i, "verdict"), "UNDECIDED");
		}
		xcalls += called(pstr(r, 1, "x_unroll.verdict"));
		json_decref(r);
		json_decref(b);
		json_decref(n);
	}
	printf("A/A, %d pairs of 5 runs a side (5%% jitter): FASTER/SLOWER "
	       "%d of %d time verdicts (%d SAME), %d of %d x-unroll "
	       "verdicts\n",
	       total, calls, 2 * total, same, xcalls, total);
	cr_assert_leq(calls, 0.05 * 2 * total, "%d", calls);
	cr_assert_leq(xcalls, 0.05 * total, "%d", xcalls);
}

/* × unroll: each run's mean over its own side's unroll run of its seed
 * (hand numbers); a seed without an unroll run gives no ratio; repeats
 * of an unroll seed take their median; unroll itself is 1 with no test. */
Test(compare_runs, x_unroll_per_seed)
{
	json_t *b = json_array(), *n = json_array(), *r;
	const double ub[] = {100, 110, 120, 130, 140};
	const double xb[] = {0.80, 0.82, 0.78, 0.81, 0.79};
	const double xn[] = {0.60, 0.61, 0.59, 0.62, 0.58};
	for (int i = 0; i < 5; i++) {
		json_array_append_new(b, rec("unroll", i + 1, ub[i]));
		json_array_append_new(b, rec("deq", i + 1, ub[i] * xb[i]));
		/* NEW's machine is 3x slower; its DEQ 0.75x its old ratio */
		json_array_append_new(n, rec("unroll", i + 1, 3 * ub[i]));
		json_array_append_new(n, rec("deq", i + 1, 3 * ub[i] * xn[i]));
	}
	/* a DEQ seed with no unroll run: a time but no ratio */
	json_array_append_new(n, rec("deq", 9, 200));
	r = cmp(b, n);
	cr_assert_str_eq(pstr(r, 0, "verdict"), "SLOWER");
	cr_assert_float_eq(pnum(r, 0, "x_unroll.ratio"), 1, 0);
	cr_assert_str_eq(pstr(r, 0, "x_unroll.verdict"), "");
	cr_assert_eq(pnum(r, 1, "n_new"), 6);
	cr_assert_eq(pnum(r, 1, "x_unroll.n_new"), 5);
	cr_assert_float_eq(pnum(r, 1, "x_unroll.base"), 0.80, 1e-12);
	cr_assert_float_eq(pnum(r, 1, "x_unroll.new"), 0.60, 1e-12);
	cr_assert_float_eq(pnum(r, 1, "x_unroll.ratio"), 0.75, 1e-12);
	cr_assert_float_eq(pnum(r, 1, "x_unroll.p"), 2.0 / 252, 1e-12);
	cr_assert_str_eq(pstr(r, 1, "x_unroll.verdict"), "FASTER");
	json_decref(r);
	/* a second unroll run of seed 1 in BASE: the median of the two,
	 * 80 ms, so that seed's DEQ ratio is 1.0 and BASE's median 0.81 */
	json_array_append_new(b, rec("unroll", 1, 60));
	r = cmp(b, n);
	cr_assert_float_eq(pnum(r, 1, "x_unroll.base"), 0.81, 1e-12);
	cr_assert_eq(pnum(r, 1, "x_unroll.n_base"), 5);
	json_decref(r);
	json_decref(b);
	json_decref(n);
}

/* A rerun while the machine's load fell: every run of NEW 40% faster,
 * the DEQ's ratio to unroll scattered around BASE's. The time reads
 * FASTER (the runs were faster), × unroll NOISY, and a note says the
 * machine may have changed rather than the method. */
Test(compare_runs, machine_moved_not_method)
{
	unsigned long long s = 7;
	const double f[] = {0.8, 1.2, 0.9, 1.1, 1.0};
	double tb[2][8];
	json_t *b, *n = json_array(), *r, *note;
	draw_side(&s, tb, 5);
	b = side_of(tb, 5, 1);
	for (int i = 0; i < 5; i++) {
		json_array_append_new(n, rec("unroll", i + 1, 0.6 * tb[0][i]));
		json_array_append_new(n,
				      rec("deq", i + 1, 0.6 * tb[1][i] * f[i]));
	}
	r = cmp(b, n);
	cr_assert_str_eq(pstr(r, 1, "verdict"), "FASTER");
	cr_assert_str_eq(pstr(r, 1, "x_unroll.verdict"), "NOISY");
	note = json_array_get(
	    json_object_get(json_array_get(json_object_get(r, "pairs"), 1),
			    "notes"),
	    0);
	cr_assert(strstr(json_string_value(note),
			 "FASTER in time but × unroll NOISY"),
		  "%s", json_string_value(note));
	json_decref(r);
	json_decref(b);
	json_decref(n);
}

/* ---- the command, on records cloned from the committed reference ---- */

/* The first record of each method of results/cpu/default.jsonl into
 * tpl[0] (unroll) and tpl[1] (deq): real records, valid as they are. */
static void templates(json_t **tpl)
{
	char path[600], err[400];
	const char *root = getenv("DQ_SOURCE_ROOT");
	json_t *all = json_array(), *r;
	size_t i;
	cr_assert_not_null(root);
	snprintf(path, sizeof(path), "%s/results/cpu/default.jsonl", root);
	cr_assert_eq(record_read_jsonl(path, all, err, sizeof(err)), 0, "%s",
		     err);
	tpl[0] = tpl[1] = NULL;
	json_array_foreach(all, i, r)
	{
		const char *m = json_string_value(
		    json_object_get(json_object_get(r, "config"), "method"));
		int k = !strcmp(m, "unroll") ? 0 : !strcmp(m, "deq") ? 1 : -1;
		if (k >= 0 && !tpl[k])
			tpl[k] = json_incref(r);
	}
	cr_assert(tpl[0] && tpl[1]);
	json_decref(all);
}

/* cli_dir/name: per method k, n runs (seeds 1..n) of tpl[k] whose step
 * time statistics are all t[k][i] (validate keeps them in order). */
static void write_side(const char *name, json_t **tpl, double t[2][8], int n)
{
	static const char *const st[] = {"median", "mean", "p10", "p90",
					 "min",	   "max",  "p25", "p75"};
	char out[600], at[32];
	FILE *f;
	cli_path(out, sizeof(out), name);
	f = fopen(out, "w");
	cr_assert_not_null(f);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < n; i++) {
			json_t *r = json_deep_copy(tpl[k]), *o;
			snprintf(at, sizeof(at), "2026-01-01T00:0%d:%02dZ", k,
				 i);
			json_object_set_new(r, "started_at", json_string(at));
			json_object_set_new(json_object_get(r, "config"),
					    "seed", json_integer(i + 1));
			o = json_object_get(json_object_get(r, "timing"),
					    "step_ms");
			for (size_t j = 0; j < 8; j++)
				json_object_set_new(o, st[j],
						    json_real(t[k][i]));
			json_dumpf(r, f, JSON_COMPACT);
			fputc('\n', f);
			json_decref(r);
		}
	fclose(f);
}

/* deqbench compare b n [flag value] in cli_dir; its exit status, its
 * stdout into *out (malloc'd) when out. */
static int run_compare(const char *b, const char *n, const char *flag,
		       const char *value, char **out)
{
	char pb[600], pn[600], so[600], err[4096];
	const char *a[] = {"compare", pb, pn, flag, value, NULL};
	int rc;
	cli_path(pb, sizeof(pb), b);
	cli_path(pn, sizeof(pn), n);
	rc = cli_run(a, 0, err, sizeof(err));
	cr_assert(rc == 0 || rc == 1, "%s", err);
	cli_path(so, sizeof(so), "stdout.txt");
	if (out)
		*out = cli_read(so, NULL);
	return rc;
}

static json_t *json_of(const char *b, const char *n)
{
	char *text;
	json_t *r;
	run_compare(b, n, "--format", "json", &text);
	r = json_loads(text, 0, NULL);
	cr_assert_not_null(r, "%s", text);
	free(text);
	return r;
}

/* Whether a note of pair i of res contains text. */
static int has_note(const json_t *res, size_t i, const char *text)
{
	const json_t *p = json_array_get(json_object_get(res, "pairs"), i);
	size_t k;
	json_t *s;
	json_array_foreach(json_object_get(p, "notes"), k, s)
	{
		if (strstr(json_string_value(s), text))
			return 1;
	}
	return 0;
}

/* A recorded A/A pair (two files of 5 seeds a side, run means drawn from
 * one distribution) reads SAME or NOISY, in time and × unroll, and
 * --fail-above 10 passes it; its table is printed. The doubled-time copy
 * reads SLOWER with 5 a side, × unroll SAME (the machine, not the
 * method), and fails --fail-above 10. */
Test(compare_runs, recorded_a_a_and_doubled, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	unsigned long long s = 40;
	double tb[2][8], tn[2][8];
	json_t *tpl[2], *r;
	char *text;
	templates(tpl);
	draw_side(&s, tb, 5);
	draw_side(&s, tn, 5);
	write_side("a.jsonl", tpl, tb, 5);
	write_side("a2.jsonl", tpl, tn, 5);
	for (int i = 0; i < 5; i++)
		tn[0][i] = 2 * tb[0][i], tn[1][i] = 2 * tb[1][i];
	write_side("a_x2.jsonl", tpl, tn, 5);
	cr_assert_eq(run_compare("a.jsonl", "a2.jsonl", NULL, NULL, &text), 0);
	printf("A/A, recorded (5 runs a side, 5%% jitter):\n%s\n", text);
	free(text);
	r = json_of("a.jsonl", "a2.jsonl");
	for (size_t i = 0; i < 2; i++) {
		const char *v = pstr(r, i, "verdict"),
			   *x = pstr(r, i, "x_unroll.verdict");
		cr_assert(!strcmp(v, "SAME") || !strcmp(v, "NOISY"), "%s", v);
		cr_assert(!*x || !strcmp(x, "SAME") || !strcmp(x, "NOISY"),
			  "%s", x);
		cr_assert_str_eq(pstr(r, i, "samples"), "run means");
	}
	json_decref(r);
	cr_assert_eq(
	    run_compare("a.jsonl", "a2.jsonl", "--fail-above", "10", NULL), 0);
	r = json_of("a.jsonl", "a_x2.jsonl");
	for (size_t i = 0; i < 2; i++) {
		cr_assert_str_eq(pstr(r, i, "verdict"), "SLOWER");
		cr_assert_float_eq(pnum(r, i, "step_ratio"), 2, 1e-12);
		cr_assert_float_eq(pnum(r, i, "p"), 2.0 / 252, 1e-12);
	}
	cr_assert_str_eq(pstr(r, 1, "x_unroll.verdict"), "SAME");
	cr_assert(has_note(r, 1, "the machine or its load changed"));
	json_decref(r);
	cr_assert_eq(
	    run_compare("a.jsonl", "a_x2.jsonl", "--fail-above", "10", NULL),
	    1);
	json_decref(tpl[0]);
	json_decref(tpl[1]);
}

/* 3 runs a side cannot reach p < 0.05 (smallest exact p 0.1): a doubled
 * time reads UNDECIDED, "too few runs to call", naming the n that would
 * do, in the JSON and under the table. */
Test(compare_runs, three_a_side_too_few, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	unsigned long long s = 3;
	double tb[2][8], tn[2][8];
	json_t *tpl[2], *r;
	char *text;
	templates(tpl);
	draw_side(&s, tb, 3);
	for (int i = 0; i < 3; i++)
		tn[0][i] = 2 * tb[0][i], tn[1][i] = 2 * tb[1][i];
	write_side("b.jsonl", tpl, tb, 3);
	write_side("b_x2.jsonl", tpl, tn, 3);
	r = json_of("b.jsonl", "b_x2.jsonl");
	for (size_t i = 0; i < 2; i++) {
		cr_assert_str_eq(pstr(r, i, "verdict"), "UNDECIDED");
		cr_assert_str_eq(pstr(r, i, "reason"),
				 "too few runs to call (n=3 vs 3; smallest p "
				 "= 0.1; need n ≥ 4 a side at α = 0.05)");
		cr_assert_float_eq(pnum(r, i, "p_min"), 0.1, 1e-12);
		cr_assert_eq(pnum(r, i, "need_n"), 4);
	}
	json_decref(r);
	run_compare("b.jsonl", "b_x2.jsonl", NULL, NULL, &text);
	cr_assert(strstr(text, "| 0.1 (smallest 0.1; 3+3) | UNDECIDED (too "
			       "few runs to call"),
		  "%s", text);
	cr_assert(strstr(text, "run at least 4 a side"), "%s", text);
	free(text);
	json_decref(tpl[0]);
	json_decref(tpl[1]);
}
