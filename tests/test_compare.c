/* test_compare.c — `deqbench compare` (bench/report/compare.h) on records of real
 * tiny runs and on copies of them made to differ: identical files are SAME,
 * step times scaled by 1.5 are SLOWER and by 0.5 FASTER (U test on the
 * traced steps), one run a side cannot tell (NOISY), --fail-above exits 1
 * only past its threshold, a configuration on one side is listed as
 * unpaired, --match pairs across one key, csv and json formats, bad input
 * exits 2. */
#include <jansson.h>
#include <math.h>

#include "test_cli.h"

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

/* Scales every step time of record r by k (trace and timing stats). */
static void scale_times(json_t *r, double k)
{
	json_t *tr = json_object_get(json_object_get(r, "trace"), "step_ms");
	json_t *st = json_object_get(json_object_get(r, "timing"), "step_ms");
	const char *key;
	json_t *v;
	size_t i;
	json_array_foreach(tr, i, v)
	    json_array_set_new(tr, i, json_real(json_number_value(v) * k));
	json_object_foreach(st, key, v) if (json_is_number(v))
	    json_object_set_new(st, key, json_real(json_number_value(v) * k));
}

/* cli_dir/name: base.jsonl's records, step times scaled by k, without
 * their traces when drop_trace, config key `key` set to value when key. */
static void make_variant(const char *name, double k, int drop_trace,
			 const char *key, json_t *value)
{
	char in[600], out[600], *text, *save = NULL;
	FILE *f;
	cli_path(in, sizeof(in), "base.jsonl");
	cli_path(out, sizeof(out), name);
	text = cli_read(in, NULL);
	f = fopen(out, "w");
	cr_assert_not_null(f);
	for (char *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		json_t *r = json_loads(l, 0, NULL);
		cr_assert_not_null(r);
		scale_times(r, k);
		if (drop_trace) {
			json_object_set_new(r, "trace", json_null());
			json_object_set_new(json_object_get(r, "config"),
					    "trace", json_false());
		}
		if (key)
			json_object_set(json_object_get(r, "config"), key,
					value);
		json_dumpf(r, f, JSON_COMPACT);
		fputc('\n', f);
		json_decref(r);
	}
	fclose(f);
	free(text);
}

/* compare's JSON result of base.jsonl against name, extra flags after. */
static json_t *compare_json(const char *name, const char *flag,
			    const char *value)
{
	char b[600], n[600], out[600], err[2048];
	const char *a[] = {"compare", b,    n,	   "--format",
			   "json",    flag, value, NULL};
	json_t *r;
	cli_path(b, sizeof(b), "base.jsonl");
	cli_path(n, sizeof(n), name);
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(out, sizeof(out), "stdout.txt");
	r = json_load_file(out, 0, NULL);
	cr_assert_not_null(r);
	return r;
}

static const char *verdict(const json_t *res, size_t i)
{
	return json_string_value(json_object_get(
	    json_array_get(json_object_get(res, "pairs"), i), "verdict"));
}

Test(compare, verdicts, .init = cli_setup, .fini = cli_teardown, .timeout = 120)
{
	json_t *r;
	make_base();
	r = compare_json("base.jsonl", NULL, NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "pairs")), 2);
	cr_assert_str_eq(verdict(r, 0), "SAME");
	cr_assert_str_eq(verdict(r, 1), "SAME");
	json_decref(r);
	make_variant("slow.jsonl", 1.5, 0, NULL, NULL);
	r = compare_json("slow.jsonl", NULL, NULL);
	cr_assert_str_eq(verdict(r, 0), "SLOWER");
	cr_assert_str_eq(
	    json_string_value(json_object_get(
		json_array_get(json_object_get(r, "pairs"), 0), "samples")),
	    "steps");
	cr_assert_float_eq(
	    json_number_value(json_object_get(
		json_array_get(json_object_get(r, "pairs"), 0), "step_ratio")),
	    1.5, 1e-9);
	json_decref(r);
	make_variant("fast.jsonl", 0.5, 0, NULL, NULL);
	r = compare_json("fast.jsonl", NULL, NULL);
	cr_assert_str_eq(verdict(r, 1), "FASTER");
	json_decref(r);
	/* one run a side, no trace: a U test of 1 against 1 supports
	 * nothing */
	make_variant("slow1.jsonl", 1.5, 1, NULL, NULL);
	r = compare_json("slow1.jsonl", NULL, NULL);
	cr_assert_str_eq(verdict(r, 0), "NOISY");
	json_decref(r);
}

Test(compare, fail_above, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char b[600], n[600], err[2048];
	make_base();
	make_variant("slow.jsonl", 1.5, 0, NULL, NULL);
	cli_path(b, sizeof(b), "base.jsonl");
	cli_path(n, sizeof(n), "slow.jsonl");
	const char *over[] = {"compare", b, n, "--fail-above", "20", NULL};
	cr_assert_eq(cli_run(over, 0, err, sizeof(err)), 1, "%s", err);
	cr_assert(strstr(err, "SLOWER by more than 20%"), "%s", err);
	const char *under[] = {"compare", b, n, "--fail-above=60", NULL};
	cr_assert_eq(cli_run(under, 0, err, sizeof(err)), 0, "%s", err);
}

Test(compare, unpaired_and_match, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	json_t *r, *two = json_integer(2);
	make_base();
	make_variant("threads.jsonl", 1.0, 0, "threads", two);
	r = compare_json("threads.jsonl", NULL, NULL);
	cr_assert_eq(json_array_size(json_object_get(r, "pairs")), 0);
	cr_assert_eq(json_array_size(json_object_get(r, "unpaired_base")), 2);
	cr_assert_eq(json_array_size(json_object_get(r, "unpaired_new")), 2);
	json_decref(r);
	r = compare_json("threads.jsonl", "--match", "threads");
	cr_assert_eq(json_array_size(json_object_get(r, "pairs")), 2);
	cr_assert_eq(json_array_size(json_object_get(r, "unpaired_new")), 0);
	json_decref(r);
	json_decref(two);
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
	cr_assert(strstr(text, ",SAME\n"), "%s", text);
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
	const char *const *bad[] = {one, fmt, key, flag, num, missing};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cr_assert_eq(cli_run(bad[i], 0, err, sizeof(err)), 2,
			     "case %zu: %s", i, err);
		cr_assert(strstr(err, "deqbench: ") &&
			      strchr(err, '\n') == strrchr(err, '\n'),
			  "case %zu: one line: %s", i, err);
	}
}
