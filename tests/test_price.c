/* test_price.c — `deqbench price` (bench/run/price.h, price_stats.h,
 * bench/cmd/cmd_price.c): the round-robin order, the median's interval and
 * the stop rule on fixed samples and a fake clock, the price records'
 * shape and validation (results/SCHEMA.md §Price records against
 * validate_price_schema), a tiny config priced end to end, the readers
 * that pass price records over, and bad input. No assertion on a time the
 * machine measured. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "price.h"
#include "price_stats.h"
#include "record.h"
#include "test_cli.h"
#include "validate.h"
#include "validate_schema.h"

/* ---- the order of a round ---- */

Test(price_order, each_round_a_permutation_and_rounds_differ)
{
	uint64_t s = 7, t = 7;
	int a[9], b[9], differ = 0, first[9];
	for (int r = 0; r < 20; r++) {
		int seen[9] = {0};
		price_shuffle(a, 9, &s);
		price_shuffle(b, 9, &t);
		for (int i = 0; i < 9; i++) {
			cr_assert(a[i] >= 0 && a[i] < 9);
			cr_assert_eq(seen[a[i]]++, 0, "unit %d twice", a[i]);
			cr_assert_eq(a[i], b[i], "same seed, same order");
		}
		if (r == 0)
			memcpy(first, a, sizeof(a));
		else
			differ += memcmp(first, a, sizeof(a)) != 0;
	}
	cr_assert_gt(differ, 15, "the order changes from round to round");
}

/* ---- the median and its interval ---- */

Test(price_stats, order_statistic_interval)
{
	double x[10] = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1}, med, lo, hi;
	/* n = 10: P(Bin(10, 1/2) <= 1) = 11/1024 <= 2.5% < P(<= 2) = 56/1024,
	 * so l = 2: [x_(2), x_(9)] */
	cr_assert_eq(price_median_interval(x, 10, &med, &lo, &hi), 0);
	cr_assert_float_eq(med, 5.5, 1e-12);
	cr_assert_float_eq(lo, 2, 1e-12);
	cr_assert_float_eq(hi, 9, 1e-12);
	/* n = 6: 1/64 <= 2.5%: l = 1, the extremes; n = 5: 1/32 > 2.5% */
	double y[6] = {3, 1, 2, 6, 5, 4};
	cr_assert_eq(price_median_interval(y, 6, &med, &lo, &hi), 0);
	cr_assert_float_eq(lo, 1, 1e-12);
	cr_assert_float_eq(hi, 6, 1e-12);
	cr_assert_eq(price_median_interval(y, 5, &med, &lo, &hi), -1);
}

Test(price_stats, stop_rule_on_fixed_samples)
{
	double x[40];
	for (int i = 0; i < 40; i++)
		x[i] = 100 + (i % 3); /* within 100..102: ±1% of 101 */
	cr_assert(price_done(x, 40, 0.02));
	cr_assert_not(price_done(x, PRICE_MIN_ROUNDS - 1, 0.02),
		      "fewer than the minimum rounds is never done");
	for (int i = 0; i < 40; i++)
		x[i] = i % 2 ? 100 : 110; /* half 10% above */
	cr_assert_not(price_done(x, 40, 0.02));
	cr_assert(price_done(x, 40, 0.2));
}

Test(price_stats, fit_line)
{
	double h[3] = {1, 15, 30}, y[3] = {2.5, 9.5, 17}, a, b;
	price_fit_line(h, y, 3, &a, &b);
	cr_assert_float_eq(a, 2, 1e-12);
	cr_assert_float_eq(b, 0.5, 1e-12);
}

/* ---- the loop on fake units and a fake clock ---- */

struct fake {
	double t;     /* the fake clock, seconds */
	int noisy;    /* unit 1 alternates 1 and 2 ms: never within 2% */
	int calls[4]; /* samples taken per unit, warmup included */
};

static double fake_sample(void *ctx, int u)
{
	struct fake *f = ctx;
	int k = f->calls[u]++;
	f->t += 0.01;
	if (u == 1 && f->noisy)
		return k % 2 ? 2.0 : 1.0;
	return 1.0 + u;
}

static double fake_now(void *ctx)
{
	return ((struct fake *)ctx)->t;
}

Test(price_measure, stops_when_every_unit_is_within_2_percent)
{
	struct fake f = {0};
	struct price_clock clk = {fake_sample, fake_now, &f};
	struct price_series s[4];
	int rounds, log[4 * 1000];
	cr_assert_eq(
	    price_measure(4, &clk, 3, 1e9, 0.02, 1000, 5, s, &rounds, log), 0);
	cr_assert_eq(rounds, PRICE_MIN_ROUNDS, "constant units: done at once");
	for (int u = 0; u < 4; u++) {
		cr_assert(s[u].done);
		cr_assert_eq(s[u].n, rounds);
		cr_assert_float_eq(s[u].median, 1.0 + u, 1e-12);
		cr_assert_eq(f.calls[u], 3 + rounds, "warmup rounds untimed");
	}
	for (int r = 0; r < rounds; r++) {
		int seen[4] = {0};
		for (int i = 0; i < 4; i++)
			cr_assert_eq(seen[log[r * 4 + i]]++, 0);
	}
	price_series_free(s, 4);
}

Test(price_measure, stops_at_the_time_cap)
{
	struct fake f = {.noisy = 1};
	struct price_clock clk = {fake_sample, fake_now, &f};
	struct price_series s[4];
	int rounds;
	/* 4 samples of 0.01 s a round: the cap (4.999 s) passes after 125 */
	cr_assert_eq(
	    price_measure(4, &clk, 0, 4.999, 0.02, 100000, 5, s, &rounds, NULL),
	    0);
	cr_assert_eq(rounds, 125);
	cr_assert_not(s[1].done, "the noisy unit never reached ±2%%");
	cr_assert(s[0].done && s[2].done && s[3].done);
	cr_assert(s[1].have_interval);
	cr_assert_float_eq(s[1].lo, 1, 1e-12);
	cr_assert_float_eq(s[1].hi, 2, 1e-12);
	price_series_free(s, 4);
}

/* ---- deqbench price end to end ---- */

#define TINY_RUN                                                               \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=4", "layers=3", "threads=1"
#define TINY TINY_RUN, "f_max_iter=6"

/* The records of path (all of them: price records are not "usable"). */
static json_t *read_all(const char *path)
{
	json_t *arr = json_array();
	char err[1024];
	cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0, "%s",
		     err);
	return arr;
}

static void on_problem(void *ctx, const char *path, const char *what)
{
	cr_log_error("%s: %s: %s", (const char *)ctx, path, what);
}

/* out= of a tiny config priced with a 2 s cap: every unit, exit 0. */
static json_t *price_tiny(char *out, size_t n)
{
	char arg[600], err[4096];
	cli_path(out, n, "p.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	const char *args[] = {"price", TINY, "price_cap_s=2", arg, NULL};
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	return read_all(out);
}

Test(price_cli, tiny_config_prices_every_unit, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[512], err[4096];
	json_t *recs = price_tiny(out, sizeof(out)), *r;
	size_t i;
	int count[16] = {0}, hs = 0, ha = 0;
	/* f_max_iter=6, f_history 0: Broyden's h_max 6, timed at 1, 2, 4, 6;
	 * anderson_m 5: Anderson's at 1, 2, 4, 5; eleven other units
	 * (attn_recompute: the transformer has selective tapes) */
	cr_assert_eq(json_array_size(recs), 19);
	json_array_foreach(recs, i, r)
	{
		const char *u = json_string_value(json_object_get(r, "unit"));
		int k = 0;
		while (price_unit_names[k] && strcmp(price_unit_names[k], u))
			k++;
		cr_assert_not_null(price_unit_names[k], "unit %s", u);
		count[k]++;
		cr_assert_eq(
		    validate_record(r, VALIDATE_STRICT, on_problem, (void *)u),
		    0, "%s is not valid", u);
		if (!strcmp(u, "solver_update")) {
			const char *sv =
			    json_string_value(json_object_get(r, "solver"));
			int h =
			    (int)json_integer_value(json_object_get(r, "h"));
			cr_assert_not_null(sv);
			*(strcmp(sv, "broyden") ? &ha : &hs) += h;
		}
		/* every unit timed, host_bytes too: offload's memcpy on
		 * the CPU costs time */
		cr_assert(json_is_true(json_object_get(r, "timed")), "%s", u);
		cr_assert_gt(json_real_value(json_object_get(r, "median_ms")),
			     0, "%s", u);
	}
	for (int k = 0; price_unit_names[k]; k++)
		cr_assert_eq(count[k],
			     strcmp(price_unit_names[k], "solver_update") ? 1
									  : 8,
			     "%s", price_unit_names[k]);
	cr_assert_eq(hs, 1 + 2 + 4 + 6);
	cr_assert_eq(ha, 1 + 2 + 4 + 5);
	const char *val[] = {"validate", "--strict", out, NULL};
	cr_assert_eq(cli_run(val, 0, err, sizeof(err)), 0, "%s", err);
	json_decref(recs);
}

/* One price record with field path set to v (NULL: removed). */
static int problems_with(const json_t *r0, const char *key, json_t *v)
{
	json_t *r = json_deep_copy(r0);
	int n;
	if (v)
		json_object_set_new(r, key, v);
	else
		json_object_del(r, key);
	n = validate_record(r, VALIDATE_STRICT, NULL, NULL);
	json_decref(r);
	return n;
}

Test(price_cli, validate_checks_price_records, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[512];
	json_t *recs = price_tiny(out, sizeof(out)), *su = NULL, *bf = NULL, *r;
	size_t i;
	json_array_foreach(recs, i, r)
	{
		const char *u = json_string_value(json_object_get(r, "unit"));
		if (!su && !strcmp(u, "solver_update"))
			su = r;
		if (!strcmp(u, "block_fwd"))
			bf = r;
	}
	cr_assert(su && bf);
	cr_assert_eq(problems_with(su, "h", NULL), 1, "h missing");
	cr_assert_gt(problems_with(su, "h", json_null()), 0,
		     "solver_update without h");
	cr_assert_gt(problems_with(bf, "h", json_integer(3)), 0,
		     "h on block_fwd");
	cr_assert_gt(problems_with(bf, "solver", json_string("broyden")), 0,
		     "solver on block_fwd");
	cr_assert_gt(problems_with(su, "solver", json_null()), 0,
		     "solver_update without its solver");
	cr_assert_gt(problems_with(su, "solver", json_string("newton")), 0,
		     "a solver deqbench does not have");
	cr_assert_gt(problems_with(bf, "unit", json_string("block_bwd")), 0,
		     "a unit without that name");
	cr_assert_gt(problems_with(bf, "median_ms", json_real(1e9)), 0,
		     "median outside its interval");
	cr_assert_gt(problems_with(bf, "per", json_string("byte")), 0,
		     "per byte off host_bytes");
	cr_assert_gt(problems_with(bf, "extra", json_true()), 0,
		     "an undocumented field");
	cr_assert_gt(
	    problems_with(bf, "fit",
			  json_pack("{s:f,s:f}", "a_ms", 1.0, "b_ms", 0.1)),
	    0, "fit off solver_update");
	json_decref(recs);
}

/* The readers of run records pass price records over, saying so. */
Test(price_cli, readers_pass_price_records_over, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[512], err[4096];
	json_t *recs = price_tiny(out, sizeof(out));
	const char *rep[] = {"report", out, NULL};
	cr_assert_eq(cli_run(rep, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "a price record (deqbench price), not a run's"),
		  "%s", err);
	const char *cmp[] = {"compare", out, out, NULL};
	cr_assert_eq(cli_run(cmp, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "a price record (deqbench price)"), "%s", err);
	/* price itself passes its own records over: none is a run */
	const char *again[] = {"price", out, NULL};
	cr_assert_eq(cli_run(again, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "no run record to price"), "%s", err);
	json_decref(recs);
}

/* suite --resume over an out= that holds price records: it says so, and
 * the suite's runs are done as before. */
Test(price_cli, suite_resume_passes_price_records_over, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char out[512], suite[512], text[2048], err[4096];
	json_t *recs = price_tiny(out, sizeof(out));
	cli_path(suite, sizeof(suite), "s.json");
	snprintf(text, sizeof(text),
		 "{\"name\": \"t\", \"base\": {\"corpus\": \"synthetic\", "
		 "\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"seq_len\": "
		 "8, \"batch_size\": 4, \"layers\": 3, \"steps\": 3, "
		 "\"warmup_steps\": 1, \"eval_tokens\": 32, \"threads\": 1, "
		 "\"out\": \"%s\"}, \"axes\": {\"method\": [{\"method\": "
		 "\"unroll\"}]}}",
		 out);
	cli_write_text(suite, text);
	const char *args[] = {"suite", suite, "--resume", NULL};
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(strstr(err, "holds price records (deqbench price): not "
			      "runs, passed over"),
		  "%s", err);
	json_decref(recs);
	recs = read_all(out);
	cr_assert_eq(json_array_size(recs), 20, "the run appended after them");
	json_decref(recs);
}

/* A records file: each shape priced once whatever the runs' seeds,
 * methods and depths, its solver histories the longest of them, its
 * source (the first run of that shape) named. */
Test(price_cli, records_file_prices_each_configuration, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	char runs[512], out[512], a1[600], a2[600], err[4096];
	json_t *recs, *r;
	size_t i;
	cli_path(runs, sizeof(runs), "runs.jsonl");
	cli_path(out, sizeof(out), "p.jsonl");
	snprintf(a1, sizeof(a1), "out=%s", runs);
	snprintf(a2, sizeof(a2), "out=%s", out);
	/* two seeds of unroll, then a deq of a longer history */
	for (int s = 1; s <= 3; s++) {
		char seed[32];
		snprintf(seed, sizeof(seed), "seed=%d", s);
		const char *run[] = {"run",
				     TINY_RUN,
				     "steps=2",
				     "warmup_steps=1",
				     "eval_tokens=32",
				     seed,
				     a1,
				     s < 3 ? "method=unroll" : "method=deq",
				     s < 3 ? "clip=1" : "f_max_iter=40",
				     NULL};
		cr_assert_eq(cli_run(run, 0, err, sizeof(err)), 0, "%s", err);
	}
	const char *args[] = {"price", runs, "price_cap_s=1", a2, NULL};
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	recs = read_all(out);
	/* one shape: priced once, Broyden's history widened to the deq's 40
	 * (1, 2, 4, 8, 16, 32, 40); Anderson at 1, 2, 4, 5; eleven other
	 * units (attn_recompute with them: a transformer) */
	cr_assert_eq(json_array_size(recs), 22,
		     "three runs of one shape: one configuration");
	json_array_foreach(recs, i, r)
	{
		const char *src =
		    json_string_value(json_object_get(r, "source"));
		cr_assert(src && strstr(src, "runs.jsonl:1"), "%s", src);
		cr_assert_eq(json_integer_value(json_object_get(
				 json_object_get(r, "shape"), "vocab_size")),
			     256);
	}
	json_decref(recs);
}

Test(price_cli, bad_input_exits_2_with_one_line, .init = cli_setup,
     .fini = cli_teardown)
{
	char bad[512], missing[512];
	cli_path(bad, sizeof(bad), "bad.jsonl");
	cli_path(missing, sizeof(missing), "none.jsonl");
	cli_write_text(bad, "{\"schema\": 1}\n");
	struct {
		const char *args[6];
		const char *want;
	} cases[] = {
	    {{"price", "corpus=synthetic", "price_cap_s=0", NULL},
	     "price_cap_s='0'"},
	    {{"price", "corpus=synthetic", "price_cap_s=x", NULL},
	     "price_cap_s='x'"},
	    {{"price", "corpus=synthetic", "core=-1", NULL}, "core='-1'"},
	    {{"price", "corpus=synthetic", "bogus=1", NULL},
	     "unknown key 'bogus'"},
	    {{"price", "corpus=synthetic", "d_model=0", NULL}, "d_model"},
	    {{"price", missing, NULL}, "none.jsonl"},
	    {{"price", bad, NULL}, "no config object"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[4096];
		cr_assert_eq(cli_run(cases[i].args, 0, err, sizeof(err)), 2,
			     "%s: %s", cases[i].want, err);
		cr_assert(strstr(err, cases[i].want), "want %s in %s",
			  cases[i].want, err);
		cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1,
			     "one line: %s", err);
	}
}

/* ---- SCHEMA.md §Price records against validate_price_schema ---- */

/* "|int|null|" of a type mask. */
static void types_of(unsigned t, char *buf, size_t n)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{VT_INT, "int"},	{VT_NUM, "number"}, {VT_STR, "string"},
		     {VT_BOOL, "bool"}, {VT_OBJ, "object"}, {VT_ARR, "array"},
		     {VT_NULL, "null"}};
	size_t l = (size_t)snprintf(buf, n, "|");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (t & names[i].bit)
			l += (size_t)snprintf(buf + l, n - l, "%s|",
					      names[i].name);
}

/* The table's rows as "path types" lines; host, device, build and
 * config are a run record's (not listed again). */
static void table_lines(const struct vfield *f, const char *prefix, json_t *out)
{
	for (; f->name; f++) {
		char p[128], t[64], line[200];
		snprintf(p, sizeof(p), "%s%s", prefix, f->name);
		types_of(f->types, t, sizeof(t));
		snprintf(line, sizeof(line), "%s %s", p, t);
		json_object_set_new(out, line, json_true());
		if (f->members && !prefix[0] && strcmp(f->name, "host") &&
		    strcmp(f->name, "device") && strcmp(f->name, "build")) {
			char q[140];
			snprintf(q, sizeof(q), "%s.", p);
			table_lines(f->members, q, out);
		}
	}
}

/* SCHEMA.md's rows after "## Price records" as "path types" lines. */
static void doc_lines(json_t *out)
{
	char path[1024], *line = NULL;
	size_t cap = 0;
	int in = 0;
	snprintf(path, sizeof(path), "%s/results/SCHEMA.md",
		 getenv("DQ_SOURCE_ROOT"));
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	while (getline(&line, &cap, f) > 0) {
		char t[64] = "|", *cells[3], *p = line + 1, *q;
		int nc = 0;
		if (!strncmp(line, "## ", 3))
			in = strstr(line, "Price records") != NULL;
		if (!in || strncmp(line, "| `", 3))
			continue;
		while (nc < 3 && (q = strchr(p, '|'))) {
			while (q[-1] == '\\')
				q = strchr(q + 1, '|');
			*q = 0;
			cells[nc++] = p;
			p = q + 1;
		}
		for (char *w = strtok(cells[1], " \\|"); w;
		     w = strtok(NULL, " \\|"))
			strcat(strcat(t, w), "|");
		for (char *a = strchr(cells[0], '`'); a;
		     a = strchr(a + 1, '`')) {
			char *b = strchr(a + 1, '`'), l[200];
			*b = 0;
			snprintf(l, sizeof(l), "%s %s", a + 1, t);
			json_object_set_new(out, l, json_true());
			a = b;
		}
	}
	free(line);
	fclose(f);
}

Test(price_schema, table_matches_schema_md)
{
	json_t *doc = json_object(), *tab = json_object(), *v;
	const char *k;
	doc_lines(doc);
	table_lines(validate_price_schema(), "", tab);
	cr_assert_gt(json_object_size(doc), 30);
	json_object_foreach(doc, k, v) cr_assert_not_null(
	    json_object_get(tab, k), "SCHEMA.md: %s; the table differs", k);
	json_object_foreach(tab, k, v)
	    cr_assert_not_null(json_object_get(doc, k),
			       "validate_schema.c: %s; SCHEMA.md differs", k);
	json_decref(doc);
	json_decref(tab);
}

/* core=N pins the process (as taskset -c N) and the records say which. */
Test(price_cli, core_pins_and_is_recorded, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[512], arg[600], core[32], err[4096];
	cpu_set_t set;
	int c = 0;
	json_t *recs;
	cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
	while (c < CPU_SETSIZE && !CPU_ISSET(c, &set))
		c++;
	cli_path(out, sizeof(out), "p.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	snprintf(core, sizeof(core), "core=%d", c);
	const char *args[] = {"price", TINY, "price_cap_s=1", core, arg, NULL};
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	recs = read_all(out);
	cr_assert_eq(
	    json_integer_value(json_object_get(
		json_object_get(json_array_get(recs, 0), "measure"), "core")),
	    c);
	json_decref(recs);
}
