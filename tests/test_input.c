/* test_input.c — input the CLI must refuse up front (exit 2, one line on
 * stderr, nothing written) or report clearly, and the `diverged` status.
 *
 *   e  every shard of a suite makes the same up-front corpus check
 *   g  runs that cannot fit in memory, suites too large to expand, grad's
 *      sequence length, FIFOs as config or out=
 *   h  a key given twice (command line, JSON object, suite axes)
 *   i  messages: real limits, exclusive bounds, overflow as out of range,
 *      control characters escaped,
 *      directories, long paths, suggestions, no arguments
 *   j  a loss blow-up ends a run as `diverged` (exit 0)
 *
 * The deqbench binary comes from DQ_DEQBENCH (tests/meson.build). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "memfit.h"
#include "pretrain.h"
#include "record.h"
#include "runner.h"
#include "suite.h"
#include "test_cli.h"

/* deqbench with stdin from /dev/null (it never reads stdin), stdout and
 * stderr to files in cli_dir (test_cli.h); stderr's text in err. Returns
 * the exit status. */
static int run_cli(const char *const *args, char *err, size_t errlen)
{
	const struct cli_opts o = {0, "/dev/null"};
	return cli_run_with(args, &o, err, errlen);
}

/* Bad input: exit 2, exactly one line on stderr containing every string
 * of `want` (NULL-terminated), and `untouched` (when given) not created. */
static void expect_bad(const char *const *args, const char *untouched,
		       const char *const *want)
{
	char err[8192];
	int rc = run_cli(args, err, sizeof(err));
	char *nl = strchr(err, '\n');
	cr_assert_eq(rc, 2, "%s %s: exit %d, stderr: %s", args[0], args[1], rc,
		     err);
	cr_assert(nl && nl[1] == 0, "one line expected, got: %s", err);
	for (int i = 0; want && want[i]; i++)
		cr_assert(strstr(err, want[i]), "'%s' not in: %s", want[i],
			  err);
	if (untouched)
		cr_assert(!cli_exists(untouched), "%s was written", untouched);
}

#define W(...) ((const char *const[]){__VA_ARGS__, NULL})

#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=4", "layers=3", "warmup_steps=1", "eval_tokens=32",    \
	    "threads=1"

/* ------------------------------------------------------------- e: shards */

/* A missing corpus is bad input in every shard, not only in the shard
 * that holds run 0 (the check compared each run with the previous run of
 * the whole suite, which another shard owns). */
Test(shard, every_shard_checks_the_corpus_up_front, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char sp[512], out[512], arg[600];
	static const char *const shards[] = {"0/2", "1/2", "2/3", "1/3"};
	cli_path(sp, sizeof(sp), "miss.json");
	cli_path(out, sizeof(out), "res/r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	cli_write_text(sp,
		       "{\"name\": \"m\", \"base\": {\"corpus\": \"text\", "
		       "\"data_dir\": \"/nonexistent/dq\", \"steps\": 3, "
		       "\"warmup_steps\": 1}, \"axes\": {\"layers\": [1, 2, "
		       "3]}}");
	for (int i = 0; i < 4; i++) {
		const char *a[] = {"suite",   sp,  "--shard",
				   shards[i], arg, NULL};
		expect_bad(a, out, W("train.txt", "missing"));
	}
}

/* --------------------------------------------------------- g: memory */

/* c from the defaults and the n pairs key = value of kv, then
 * run_ctx_create of it into rc with V = 37; fails the test on error. */
static void ctx_of(struct bench_config *c, struct run_ctx *rc,
		   const char *const (*kv)[2], size_t n)
{
	char err[512];
	config_defaults(c);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(
		    config_set(c, kv[i][0], kv[i][1], err, sizeof(err)), 0,
		    "%s", err);
	cr_assert_eq(config_finish(c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(run_ctx_create(rc, c, 37, err, sizeof(err)), 0, "%s", err);
}

/* run_ctx_create of model `kind`, d_model 12, N = 3·5 = 15 positions,
 * V = 37, key k = v, head_chunk = hc and precision prec: every category of
 * the tracked allocator equals memfit_estimate's (and training adds
 * Adam's two moments); returns the head's bytes. */
static size_t estimate_at(const char *kind, const char *k, const char *v,
			  const char *hc, const char *prec)
{
	struct bench_config c;
	struct run_ctx rc;
	struct run_memory e;
	char err[512];
	const char *kv[][2] = {
	    {"model", kind},	  {"d_model", "12"},	{"n_heads", "3"},
	    {"d_ff", "20"},	  {"seq_len", "5"},	{"batch_size", "3"},
	    {"layers", "7"},	  {"threads", "1"},	{"head_chunk", hc},
	    {"method", "unroll"}, {"method", "unroll"}, {k, v},
	    {"precision", prec}};
	if (strcmp(k, "f_solver") == 0)
		kv[10][1] = "deq";
	ctx_of(&c, &rc, (const char *const(*)[2])kv,
	       sizeof(kv) / sizeof(kv[0]));
	cr_assert_eq(
	    memfit_estimate(&c, 37, rc.be->elem, 0, &e, err, sizeof(err)), 0,
	    "%s", err);
	for (int m = 0; m < MEM_NCAT; m++)
		cr_assert_eq(e.device[m], rc.be->mem.live[m],
			     "%s %s head_chunk=%s %s: estimate %zu, "
			     "allocated %zu",
			     kind, v, hc, mem_category_name(m), e.device[m],
			     rc.be->mem.live[m]);
	cr_assert_eq(e.device_total, rc.be->mem.live_total);
	cr_assert_eq(
	    memfit_estimate(&c, 37, rc.be->elem, 1, &e, err, sizeof(err)), 0);
	cr_assert_eq(e.device[MEM_OPTIMIZER], 2 * rc.be->mem.live[MEM_PARAMS]);
	size_t head = rc.be->mem.live[MEM_HEAD];
	run_ctx_destroy(&rc);
	return head;
}

static size_t estimate_vs_allocator(const char *kind, const char *k,
				    const char *v, const char *hc)
{
	return estimate_at(kind, k, v, hc, "fp32");
}

/* The same under precision=bf16: the tapes at 2 bytes an element and the
 * workspace's fp32 tape and GEMM operands, as allocated. */
Test(memfit, estimate_equals_the_allocator_bf16, .timeout = 120)
{
	static const char *const kinds[] = {"transformer", "tanh_cell",
					    "trellisnet"};
	for (int k = 0; k < 3; k++) {
		estimate_at(kinds[k], "method", "unroll", "0", "bf16");
		estimate_at(kinds[k], "method", "checkpoint", "4", "bf16");
		estimate_at(kinds[k], "f_solver", "broyden", "0", "bf16");
	}
}

/* The estimate is what setup allocates: every category of the tracked
 * allocator after run_ctx_create equals memfit_estimate's, for every
 * model kind and method, with the head whole and chunked (a formula off by
 * one buffer fails here); head_chunk = K shrinks the head by exactly
 * (N − K)·V elements (K ≥ N: by nothing). */
Test(memfit, estimate_equals_the_allocator, .timeout = 240)
{
	static const char *const kinds[] = {"transformer", "tanh_cell",
					    "trellisnet"};
	static const char *const methods[][2] = {{"method", "unroll"},
						 {"method", "checkpoint"},
						 {"f_solver", "broyden"},
						 {"f_solver", "anderson"},
						 {"f_solver", "fixed_point"}};
	for (int k = 0; k < 3; k++)
		for (int j = 0; j < 5; j++) {
			const char *const *mj = methods[j];
			size_t h0 =
			    estimate_vs_allocator(kinds[k], mj[0], mj[1], "0");
			size_t h4 =
			    estimate_vs_allocator(kinds[k], mj[0], mj[1], "4");
			size_t h1 =
			    estimate_vs_allocator(kinds[k], mj[0], mj[1], "1");
			size_t h15 =
			    estimate_vs_allocator(kinds[k], mj[0], mj[1], "15");
			/* cpu: float elements */
			cr_assert_eq(h0 - h4, (15 - 4) * 37 * sizeof(float));
			cr_assert_eq(h0 - h1, (15 - 1) * 37 * sizeof(float));
			cr_assert_eq(h15, h0);
		}
}

/* With pretrain_steps > 0 the run also holds an unroll method of
 * pretrain_layers beside the deq's (pretrain.c): the estimate counts its
 * depth too. */
Test(memfit, estimate_counts_the_pretraining_unroll, .timeout = 60)
{
	static const char *const kv[][2] = {
	    {"model", "transformer"}, {"d_model", "12"},
	    {"n_heads", "3"},	      {"d_ff", "20"},
	    {"seq_len", "5"},	      {"batch_size", "3"},
	    {"threads", "1"},	      {"method", "deq"},
	    {"steps", "20"},	      {"warmup_steps", "2"},
	    {"pretrain_steps", "4"},  {"pretrain_layers", "6"}};
	struct bench_config c;
	struct run_ctx rc;
	struct run_memory e;
	struct pretrain pt;
	char err[512];
	ctx_of(&c, &rc, kv, sizeof(kv) / sizeof(kv[0]));
	cr_assert_eq(pretrain_create(&pt, &rc, &c, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_gt(pt.depth_bytes, 0);
	cr_assert_eq(
	    memfit_estimate(&c, 37, rc.be->elem, 1, &e, err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(e.device[MEM_DEPTH], rc.be->mem.live[MEM_DEPTH],
		     "estimate %zu, allocated %zu", e.device[MEM_DEPTH],
		     rc.be->mem.live[MEM_DEPTH]);
	pretrain_free(&pt, &rc);
	run_ctx_destroy(&rc);
}

/* Sizes inside every key's range that need far more memory than any host
 * has are refused before anything is allocated: quickly, naming the
 * estimate, nothing written. */
Test(memfit, runs_that_cannot_fit_are_refused, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char out[512], arg[600], sp[512];
	cli_path(out, sizeof(out), "res/r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		/* 2 V d parameters alone: 2^26 x 2^16 x 2 floats = 32 TiB */
		const char *a[] = {"run",
				   "corpus=synthetic",
				   "vocab_size=67108864",
				   "d_model=65536",
				   "n_heads=1",
				   "steps=3",
				   "warmup_steps=1",
				   arg,
				   NULL};
		expect_bad(
		    a, out,
		    W("estimated", "GiB", "host memory", "params", "lower"));
	}
	{
		/* 1e9 steps: a per-step log of about 112 GB */
		const char *a[] = {"run", TINY, "steps=1000000000", arg, NULL};
		size_t lim = memfit_host_limit();
		if (lim > (size_t)120e9)
			cr_log_warn("host has %zu bytes; skipping the steps "
				    "case",
				    lim);
		else
			expect_bad(a, out, W("estimated", "steps"));
	}
	{
		/* the same in a suite: refused up front by the parent */
		cli_path(sp, sizeof(sp), "big.json");
		cli_write_text(
		    sp, "{\"name\": \"b\", \"base\": {\"corpus\": "
			"\"synthetic\", \"vocab_size\": 67108864, "
			"\"d_model\": 65536, \"n_heads\": 1, \"steps\": "
			"3, \"warmup_steps\": 1}, \"axes\": {\"layers\": "
			"[1, 2]}}");
		const char *a[] = {"suite", sp, "--shard", "1/2", arg, NULL};
		expect_bad(a, out, W("estimated", "GiB"));
	}
}

/* Writes a synthetic suite to path with axis steps = 2..1001 and, when
 * seeds > 0, axis seed = 0..seeds-1, repeated `repeats` times. */
static void write_big_suite(const char *path, int seeds, int repeats)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fprintf(f, "{\"name\": \"h\", \"base\": {\"corpus\": "
		   "\"synthetic\", \"warmup_steps\": 1}, \"axes\": "
		   "{\"steps\": [");
	for (int i = 0; i < 1000; i++)
		fprintf(f, "%s%d", i ? ", " : "", i + 2);
	fprintf(f, "]");
	if (seeds > 0) {
		fprintf(f, ", \"seed\": [");
		for (int i = 0; i < seeds; i++)
			fprintf(f, "%s%d", i ? ", " : "", i);
		fprintf(f, "]");
	}
	fprintf(f, "}, \"repeats\": %d}", repeats);
	fclose(f);
}

/* A suite whose expansion would not fit is refused before expanding, in
 * --dry-run too (1000 combinations x 100000 repeats took 8 GiB); 1e6
 * combinations without exclusions are refused by count, before each of
 * them is validated (that took 16 s). */
Test(memfit, suite_run_count_is_bounded, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char sp[512];
	const char *a[] = {"suite", sp, "--dry-run", NULL};
	cli_path(sp, sizeof(sp), "huge.json");
	write_big_suite(sp, 0, 100000);
	expect_bad(a, NULL, W("100000000 runs", "split"));
	write_big_suite(sp, 1000, 1);
	expect_bad(a, NULL, W("1000000 runs", "split"));
}

/* grad takes B and T from the tokens file: they meet the keys' ranges. */
Test(memfit, grad_checks_seq_len_from_tokens, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char tp[512], a1[600], a2[600], a3[600];
	int64_t cols = (1 << 20) + 2; /* T = 2^20 + 1 > seq_len's max */
	uint64_t hl;
	char hdr[256];
	FILE *f;
	cli_path(tp, sizeof(tp), "tok.safetensors");
	snprintf(hdr, sizeof(hdr),
		 "{\"tokens\":{\"dtype\":\"I32\",\"shape\":[1,%lld],"
		 "\"data_offsets\":[0,%lld]}}",
		 (long long)cols, (long long)(4 * cols));
	hl = strlen(hdr);
	f = fopen(tp, "wb");
	cr_assert_not_null(f);
	fwrite(&hl, 8, 1, f); /* little-endian hosts (x86, arm) */
	fwrite(hdr, 1, hl, f);
	for (int64_t i = 0; i < cols; i++) {
		int32_t z = 0;
		fwrite(&z, 4, 1, f);
	}
	fclose(f);
	snprintf(a1, sizeof(a1), "tokens=%s", tp);
	snprintf(a2, sizeof(a2), "params=%s/none.safetensors", cli_dir);
	snprintf(a3, sizeof(a3), "out=%s/g.safetensors", cli_dir);
	{
		const char *a[] = {"grad", "corpus=synthetic", a1, a2, a3,
				   NULL};
		char g[600];
		cli_path(g, sizeof(g), "g.safetensors");
		expect_bad(
		    a, g,
		    W("tok.safetensors", "seq_len=1048577", "[1, 1048576]"));
	}
}

/* A FIFO as config file or out= is refused, never waited on (a blocked
 * open would hang this test until its timeout fails it). */
Test(fifo, config_and_out_do_not_block, .init = cli_setup, .fini = cli_teardown,
     .timeout = 30)
{
	char fc[512], fo[512], arg[600];
	cli_path(fc, sizeof(fc), "c.json");
	cli_path(fo, sizeof(fo), "out.jsonl");
	cr_assert_eq(mkfifo(fc, 0644), 0);
	cr_assert_eq(mkfifo(fo, 0644), 0);
	{
		const char *a[] = {"run", fc, NULL};
		expect_bad(a, NULL, W("c.json", "not a regular file"));
	}
	{
		const char *a[] = {"suite", fc, "--dry-run", NULL};
		expect_bad(a, NULL, W("not a regular file"));
	}
	snprintf(arg, sizeof(arg), "out=%s", fo);
	{
		const char *a[] = {"run", TINY, "steps=3", arg, NULL};
		expect_bad(a, NULL, W("out=", "FIFO"));
	}
}

/* ------------------------------------------------------ h: duplicates */

Test(duplicates, refused_everywhere, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	char p[512], out[512], arg[600];
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run",     TINY, "steps=4",
				   "steps=5", arg,  NULL};
		expect_bad(a, out,
			   W("steps is given twice", "steps=4", "steps=5"));
	}
	cli_path(p, sizeof(p), "dup.json");
	cli_write_text(p, "{\"steps\": 4,\n \"layers\": 2,\n \"steps\": 5}\n");
	{
		const char *a[] = {"run", p, arg, NULL};
		expect_bad(a, out, W("dup.json:3:", "twice", "steps"));
	}
	cli_path(p, sizeof(p), "axes2.json");
	cli_write_text(p, "{\"name\": \"s\", \"axes\": {\"layers\": [1, 2]}, "
			  "\"axes\": {\"layers\": [3]}}");
	{
		const char *a[] = {"suite", p, "--dry-run", NULL};
		expect_bad(a, NULL, W("axes2.json:1:", "twice", "axes"));
	}
	cli_path(p, sizeof(p), "axis2.json");
	cli_write_text(p, "{\"name\": \"s\", \"axes\": {\"layers\": [1, 2], "
			  "\"layers\": [3]}}");
	{
		const char *a[] = {"suite", p, "--dry-run", NULL};
		expect_bad(a, NULL, W("twice", "layers"));
	}
	/* two axes that set one key (an object value and a scalar axis) */
	cli_path(p, sizeof(p), "overlap.json");
	cli_write_text(p,
		       "{\"name\": \"s\", \"axes\": {\"method\": [\"unroll\", "
		       "{\"method\": \"checkpoint\", \"k\": 2}], \"k\": [1, "
		       "2]}}");
	{
		const char *a[] = {"suite", p, "--dry-run", NULL};
		expect_bad(a, NULL, W("axes.method and axes.k", "'k'"));
	}
	/* command-line overrides of a suite, and grad's file arguments */
	cli_path(p, sizeof(p), "ok.json");
	cli_write_text(p, "{\"name\": \"s\", \"axes\": {\"layers\": [1, 2]}}");
	{
		const char *a[] = {"suite",  p,	       "--dry-run",
				   "lr=0.1", "lr=0.2", NULL};
		expect_bad(a, NULL, W("command line", "lr is given twice"));
	}
	{
		const char *a[] = {"grad",
				   "params=a.safetensors",
				   "params=b.safetensors",
				   "tokens=t",
				   "out=o",
				   NULL};
		expect_bad(a, NULL, W("params is given twice"));
	}
}

/* A whole number written as a real means the integer, in a file and on
 * the command line alike; a fraction is refused in both; a real is never a
 * boolean. */
Test(duplicates, integral_reals_agree_in_files_and_arguments, .init = cli_setup,
     .fini = cli_teardown)
{
	struct bench_config c;
	char err[512], p[512];
	json_t *three = json_real(3.0), *half = json_real(3.5),
	       *one = json_real(1.0);
	config_defaults(&c);
	cr_assert_eq(config_set(&c, "steps", "3.0", err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(c.steps, 3);
	cr_assert_eq(config_set(&c, "steps", "1e6", err, sizeof(err)), 0);
	cr_assert_eq(c.steps, 1000000);
	cr_assert_eq(config_set_json(&c, "steps", three, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(c.steps, 3);
	cr_assert_eq(config_set(&c, "steps", "3.5", err, sizeof(err)), -1);
	cr_assert(strstr(err, "expected an integer"), "%s", err);
	cr_assert_eq(config_set_json(&c, "steps", half, err, sizeof(err)), -1);
	cr_assert(strstr(err, "expected an integer"), "%s", err);
	cr_assert_eq(config_set(&c, "tf32", "1.0", err, sizeof(err)), -1);
	cr_assert_eq(config_set_json(&c, "tf32", one, err, sizeof(err)), -1);
	cr_assert_eq(config_set(&c, "seed", "1e3", err, sizeof(err)), 0);
	cr_assert_eq(c.model.seed, 1000);
	json_decref(three);
	json_decref(half);
	json_decref(one);
	/* a suite's repeats follows the same rule */
	cli_path(p, sizeof(p), "r.json");
	cli_write_text(p, "{\"name\": \"s\", \"base\": {\"warmup_steps\": 1}, "
			  "\"axes\": {\"steps\": [5, 6]}, \"repeats\": 2.0}");
	{
		struct suite s;
		cr_assert_eq(suite_load(&s, p, 0, NULL, err, sizeof(err)), 0,
			     "%s", err);
		cr_assert_eq(s.n_runs, 4);
		suite_free(&s);
	}
}

/* -------------------------------------------------------- i: messages */

Test(messages, ranges_state_the_real_limits)
{
	struct bench_config c;
	char err[512];
	static const struct {
		const char *key, *value, *want;
	} cases[] = {
	    {"lr", "1000.0001", "use a value in (0, 1000]"},
	    {"lr", "0", "(0, 1000]"},
	    {"lr", "1e-400", "lr=1e-400 is out of range"},
	    {"f_tol", "1e31", "use a value in (0, 1e+30]"},
	    {"b_tol", "0", "(0, 1e+30]"},
	    {"anderson_beta", "0", "(0, 1e+30]"},
	    {"steps", "9223372036854775808",
	     "out of range; use a value in "
	     "[1, 1000000000]"},
	    {"steps", "1e10", "out of range"},
	    {"eval_tokens", "-1", "[0, 1e+15]"},
	    {"seed", "18446744073709551616", "[0, 9223372036854775807]"},
	};
	config_defaults(&c);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert_eq(config_set(&c, cases[i].key, cases[i].value, err,
					sizeof(err)),
			     -1, "%s=%s accepted", cases[i].key,
			     cases[i].value);
		cr_assert(strstr(err, cases[i].want), "%s=%s: '%s' not in: %s",
			  cases[i].key, cases[i].value, cases[i].want, err);
	}
	/* the bounds themselves: closed where the table says so */
	cr_assert_eq(config_set(&c, "lr", "1000", err, sizeof(err)), 0);
	cr_assert_eq(config_set(&c, "clip", "0", err, sizeof(err)), 0);
	cr_assert_eq(config_set(&c, "anderson_lambda", "0", err, sizeof(err)),
		     0);
	cr_assert_eq(config_set(&c, "anderson_beta", "1e-9", err, sizeof(err)),
		     0);
	/* the key table, hence --help and docs/configuration.md, says "> 0" */
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		config_print_markdown(f);
		fclose(f);
		cr_assert(strstr(buf,
				 "| `anderson_beta` | deq | `1.0` | number "
				 "> 0, <= 1e+30 |"),
			  "%s", buf);
		cr_assert(strstr(buf, "| `lr` | training | `0.001` | number > "
				      "0, <= 1000 |"));
		free(buf);
	}
}

/* head_chunk: negative, past its range or not an integer is bad input:
 * exit 2, one line naming the key, before anything runs. */
Test(messages, head_chunk_refused, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	expect_bad(W("run", TINY, "head_chunk=-1", "out=r.jsonl"), "r.jsonl",
		   W("head_chunk=-1", "[0, 1073741824]"));
	expect_bad(W("run", TINY, "head_chunk=1073741825", "out=r.jsonl"),
		   "r.jsonl", W("head_chunk"));
	expect_bad(W("run", TINY, "head_chunk=2.5", "out=r.jsonl"), "r.jsonl",
		   W("head_chunk"));
}

/* A newline or another control character in a key, a value, a path or a
 * command stays on the message's one line, escaped (seen while writing the
 * fuzz targets: messages quote the input as it is). */
Test(messages, control_characters_stay_on_one_line, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char p[512];
	cli_path(p, sizeof(p), "nl.json");
	cli_write_text(p, "{\"a\\nb\": 1}");
	expect_bad(W("run", p), NULL, W("unknown key 'a\\nb'"));
	cli_write_text(p, "{\"corpus\": \"x\\u0001\\ty\"}");
	expect_bad(W("run", p), NULL, W("corpus=x\\x01\\ty"));
	expect_bad(W("run", "layers=1\n2"), NULL, W("layers=1\\n2"));
	expect_bad(W("frob\rnicate"), NULL, W("'frob\\x0dnicate'"));
}

Test(messages, suggestions_only_for_typos)
{
	struct bench_config c;
	char err[512];
	config_defaults(&c);
	cr_assert_null(config_closest_key("foo"));
	cr_assert_null(config_closest_key("x"));
	cr_assert_null(config_closest_key("f_tolerance"));
	cr_assert_str_eq(config_closest_key("lyers"), "layers");
	cr_assert_str_eq(config_closest_key("d_modle"), "d_model");
	cr_assert_str_eq(config_closest_key("step"), "steps");
	cr_assert_eq(config_set(&c, "foo", "1", err, sizeof(err)), -1);
	cr_assert(strstr(err, "'foo'") && !strstr(err, "did you mean"), "%s",
		  err);
}

Test(messages, files_and_paths, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	char d[512], arg[1300], dd[600], out[1200];
	/* a directory as config file */
	cli_path(d, sizeof(d), "cfg.json");
	cr_assert_eq(mkdir(d, 0755), 0);
	{
		const char *a[] = {"run", d, NULL};
		expect_bad(a, NULL, W("cfg.json is a directory"));
	}
	/* a directory where train.txt should be */
	cli_path(d, sizeof(d), "corpus");
	mkdir(d, 0755);
	snprintf(dd, sizeof(dd), "%s/train.txt", d);
	mkdir(dd, 0755);
	snprintf(dd, sizeof(dd), "%s/valid.txt", d);
	cli_write_text(dd, "a b\n");
	snprintf(dd, sizeof(dd), "%s/test.txt", d);
	cli_write_text(dd, "a b\n");
	snprintf(dd, sizeof(dd), "data_dir=%s", d);
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run", "corpus=text", dd, arg, NULL};
		expect_bad(a, out, W("a directory", "train.txt"));
	}
	/* a ~1000-character out= keeps the cause and the fix */
	{
		size_t n = (size_t)snprintf(out, sizeof(out), "out=/proc/dq");
		while (n < 1000)
			n += (size_t)snprintf(out + n, sizeof(out) - n,
					      "/abcdefghij");
		snprintf(out + n, sizeof(out) - n, "/x.jsonl");
		const char *a[] = {"run", TINY, "steps=3", out, NULL};
		char err[8192];
		cr_assert_eq(run_cli(a, err, sizeof(err)), 2, "%s", err);
		cr_assert(strstr(err, "No such file or directory") &&
			      strstr(err, "choose a writable out= path") &&
			      strstr(err, "..."),
			  "%s", err);
		cr_assert_lt(strlen(err), 600, "%s", err);
	}
}

/* No arguments: one line pointing at --help, exit 2; --help: the full
 * usage on stdout, exit 0. */
Test(messages, no_arguments_is_one_line, .init = cli_setup,
     .fini = cli_teardown, .timeout = 30)
{
	char err[4096], so[512], *text;
	{
		const char *a[] = {NULL};
		char e2[4096];
		int rc = run_cli(a, e2, sizeof(e2));
		char *nl = strchr(e2, '\n');
		cr_assert_eq(rc, 2);
		cr_assert(nl && nl[1] == 0, "one line expected: %s", e2);
		cr_assert(strstr(e2, "--help"), "%s", e2);
	}
	{
		const char *a[] = {"--help", NULL};
		cr_assert_eq(run_cli(a, err, sizeof(err)), 0);
		cli_path(so, sizeof(so), "stdout.txt");
		text = cli_read(so, NULL);
		cr_assert(strstr(text, "usage: deqbench") &&
			      strstr(text, "suite FILE.json"),
			  "%s", text);
		free(text);
	}
}

/* ------------------------------------------------------- j: divergence */

/* lr=1000 without clipping blows the loss far above 10 ln V within a few
 * steps (it stayed finite, 3e7, so it used to end `ok`): the run stops
 * with status `diverged`, its record says why, and `run` exits 0. */
Test(diverge, loss_blow_up_is_diverged, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[512], arg[600], err[4096];
	json_t *arr = json_array(), *r;
	const char *msg;
	cli_path(out, sizeof(out), "d.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run",	 TINY,	   "steps=50",
				   "lr=1000",	 "clip=0", "lr_warmup=0",
				   "trace=true", arg,	   NULL};
		cr_assert_eq(run_cli(a, err, sizeof(err)), 0, "%s", err);
	}
	cr_assert(strstr(err, "diverged"), "%s", err);
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 1);
	r = json_array_get(arr, 0);
	cr_assert_str_eq(json_string_value(json_object_get(r, "status")),
			 "diverged");
	msg = json_string_value(json_object_get(r, "message"));
	cr_assert(strstr(msg, "10 ln V") && strstr(msg, "V = 256"), "%s", msg);
	{
		/* the last logged loss is the one above the limit; every one
		 * before it was below */
		json_t *tl =
		    json_object_get(json_object_get(r, "trace"), "loss");
		size_t n = json_array_size(tl);
		double lim = RUN_DIVERGE_FACTOR * log(256.0);
		cr_assert_geq(n, 2);
		cr_assert_lt(n, 50, "stopped at the blow-up");
		cr_assert_gt(json_number_value(json_array_get(tl, n - 1)), lim);
		for (size_t i = 0; i + 1 < n; i++)
			cr_assert_leq(json_number_value(json_array_get(tl, i)),
				      lim);
	}
	json_decref(arr);
	/* an ordinary run of the same config stays ok */
	arr = json_array();
	{
		const char *a[] = {"run", TINY, "steps=50", arg, NULL};
		cr_assert_eq(run_cli(a, err, sizeof(err)), 0, "%s", err);
	}
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0);
	cr_assert_str_eq(json_string_value(
			     json_object_get(json_array_get(arr, 1), "status")),
			 "ok");
	json_decref(arr);
}
