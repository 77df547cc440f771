/* test_commands.c — the run command of the deqbench binary end to end
 * (bench/cmd/main.c; DQ_DEQBENCH gives its path): a tiny synthetic run appends
 * one line and its summary table matches the record, the real text-corpus
 * path, every bad input (exit 2, one line on stderr, results untouched),
 * the exit status by outcome, and pretrain_* out of range. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "record.h"
#include "test_bench_util.h"
#include "test_cli.h"

Test(cli, tiny_run_appends_one_line, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[512], arg[600], err[4096], so[600];
	char *text, *run_out, *report;
	size_t len;
	json_t *arr = json_array();
	cli_path(out, sizeof(out), "res/runs.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		/* tolerances inside the residuals' range: some steps
		 * converge, some do not */
		const char *a[] = {"run",	  TINY,		  "method=deq",
				   "f_tol=0.008", "b_tol=0.0065", arg,
				   NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	cli_path(so, sizeof(so), "stdout.txt");
	run_out = cli_read(so, NULL);
	{
		const char *a[] = {"run", TINY, "method=unroll", arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	text = cli_read(out, &len);
	cr_assert_not_null(text);
	cr_assert_eq(text[len - 1], '\n');
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 2);
	cr_assert_str_eq(json_string_value(
			     json_object_get(json_array_get(arr, 0), "status")),
			 "ok");
	{
		const char *a[] = {"report", "--format", "md", out, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	/* the converged columns of run's and report's tables are the
	 * record's fractions (4 steps: multiples of 25%, no clamping);
	 * the unroll row has dashes for every solver column */
	report = cli_read(so, NULL);
	cr_assert_not_null(run_out);
	cr_assert_not_null(report);
	for (int k = 0; k < 2; k++) {
		const char *sec = k ? "backward" : "forward";
		char col[32], want[32];
		double fr = json_number_value(json_object_get(
		    json_object_get(
			json_object_get(json_array_get(arr, 0), "solver"), sec),
		    "converged_fraction"));
		snprintf(col, sizeof(col), "%s converged", k ? "bwd" : "fwd");
		snprintf(want, sizeof(want), "%.1f%%", 100 * fr);
		assert_cell(run_out, "deq broyden/ift", col, want);
		assert_cell(report, "deq broyden/ift", col, want);
		assert_cell(report, "unroll L=3", col, "-");
		snprintf(col, sizeof(col), "%s iters", k ? "bwd" : "fwd");
		assert_cell(report, "unroll L=3", col, "-");
	}
	free(run_out);
	free(report);
	free(text);
	json_decref(arr);
}

/* The real data path end to end: corpus=text from a temp dir, the
 * vocabulary taken from the corpus, perplexity over real valid/test
 * tokens, and the one-line summary on stdout. */
Test(cli, text_corpus_run, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[512], a1[600], a2[600], err[4096], so[600];
	json_t *arr = json_array(), *r;
	char *text;
	write_text_corpus(cli_dir);
	cli_path(out, sizeof(out), "runs.jsonl");
	snprintf(a1, sizeof(a1), "out=%s", out);
	snprintf(a2, sizeof(a2), "data_dir=%s", cli_dir);
	{
		const char *a[] = {"run",
				   "corpus=text",
				   a2,
				   "d_model=16",
				   "n_heads=2",
				   "d_ff=32",
				   "seq_len=8",
				   "batch_size=4",
				   "layers=2",
				   "steps=5",
				   "warmup_steps=1",
				   "eval_tokens=1000000",
				   "threads=1",
				   a1,
				   NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 1);
	r = json_array_get(arr, 0);
	check_schema(r);
	cr_assert_str_eq(json_string_value(at(r, "status")), "ok");
	cr_assert_str_eq(json_string_value(at(r, "data.corpus")), "text");
	cr_assert_eq(json_integer_value(at(r, "data.vocab_size")), 16);
	cr_assert_eq(json_integer_value(at(r, "model.vocab_size")), 16);
	cr_assert_eq(json_integer_value(at(r, "data.train_tokens")), 300 * 9);
	cr_assert_eq(json_integer_value(at(r, "data.valid_tokens")), 40 * 9);
	/* valid: 4 streams of 90 tokens, (90 - 1) / 8 = 11 windows of 8
	 * targets each: 4 * 8 * 11 tokens however large eval_tokens is */
	cr_assert_eq(json_integer_value(at(r, "quality.valid_eval_tokens")),
		     352);
	cr_assert_eq(json_integer_value(at(r, "quality.test_eval_tokens")),
		     352);
	/* 16 words: an untrained model is near uniform (ppl ~ 16); exp of a
	 * mean loss cannot be below 1 */
	cr_assert(json_number_value(at(r, "quality.valid_ppl")) > 1 &&
		      json_number_value(at(r, "quality.valid_ppl")) < 64,
		  "%g", json_number_value(at(r, "quality.valid_ppl")));
	cr_assert_float_eq(json_number_value(at(r, "quality.valid_ppl")),
			   exp(json_number_value(at(r, "quality.valid_loss"))),
			   1e-9 *
			       json_number_value(at(r, "quality.valid_ppl")));
	cli_path(so, sizeof(so), "stdout.txt");
	text = cli_read(so, NULL);
	cr_assert(strstr(text, "ok: transformer unroll") &&
		      strstr(text, "valid ppl") && strstr(text, "| group |"),
		  "stdout: %s", text);
	free(text);
	json_decref(arr);
}

Test(cli, bad_input_exits_2, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char res[512], arg[600], cfgp[512], badjson[512], suitep[512];
	cli_path(res, sizeof(res), "keep.jsonl");
	cli_write_text(res, "{\"schema\":1,\"status\":\"ok\",\"config\":{}}\n");
	snprintf(arg, sizeof(arg), "out=%s", res);
	cli_path(cfgp, sizeof(cfgp), "bad.json");
	cli_write_text(cfgp, "{\"layers\": 4,\n  \"steps\": ,}\n");
	cli_path(badjson, sizeof(badjson), "badtype.json");
	cli_write_text(badjson, "{\"layers\": \"abc\"}\n");
	cli_path(suitep, sizeof(suitep), "badsuite.json");
	cli_write_text(suitep,
		       "{\"axes\": {\"method\": [\"unroll\", \"dq\"]}}");
	{
		const char *a[] = {"run", TINY, "layers=abc", arg, NULL};
		expect_bad(a, res, "layers");
	}
	{
		const char *a[] = {"run", TINY, "lyers=3", arg, NULL};
		expect_bad(a, res, "layers");
	}
	{
		const char *a[] = {"run", TINY, "layers=0", arg, NULL};
		expect_bad(a, res, "layers");
	}
	{
		const char *a[] = {"run", cfgp, arg, NULL};
		expect_bad(a, res, ":2:");
	}
	{
		const char *a[] = {"run", badjson, arg, NULL};
		expect_bad(a, res, "badtype.json");
	}
	{
		const char *a[] = {"run", "/nonexistent/cfg.json", arg, NULL};
		expect_bad(a, res, "cfg.json");
	}
	{
		const char *a[] = {"suite", suitep, arg, NULL};
		expect_bad(a, res, "dq");
	}
	/* a corpus missing from data_dir: the message says how to get it */
	const char *corpora[][2] = {{"corpus=brown", "scripts/fetch-brown.sh"},
				    {"corpus=ptb", "ptb.train.txt"}};
	for (int i = 0; i < 2; i++) {
		/* TINY without its corpus= (a key given twice is refused) */
		const char *a[] = {"run",
				   corpora[i][0],
				   "data_dir=/nonexistent/data",
				   "d_model=16",
				   "n_heads=2",
				   "steps=4",
				   "warmup_steps=1",
				   arg,
				   NULL};
		expect_bad(a, res, corpora[i][1]);
	}
	{
		const char *a[] = {"run", TINY, "tf32=true", arg, NULL};
		expect_bad(a, res, "tf32");
	}
	{
		const char *a[] = {"suite", suitep, "--shard",
				   "2/2",   arg,    NULL};
		expect_bad(a, res, "2/2");
	}
	{
		const char *a[] = {"suite", suitep, "--bogus", arg, NULL};
		expect_bad(a, res, "--bogus");
	}
	{
		const char *a[] = {"run", TINY, "--bogus", arg, NULL};
		expect_bad(a, res, "--bogus");
	}
	{
		const char *a[] = {"frobnicate", NULL};
		expect_bad(a, res, "frobnicate");
	}
	{
		const char *a[] = {"run", TINY, "out=/proc/deqbench/x.jsonl",
				   NULL};
		expect_bad(a, res, "out=");
	}
}

/* `run`'s exit status for each way a run ends (runner.h, enum run_status):
 * a diverged run is a result (0), 1 when its record cannot be appended
 * (out=/dev/full; ok runs: files/failed_append_keeps_record), and a run
 * that fails in setup, here a train split too short for the batch, is bad
 * input (2, one line, no record). No input reaches RUN_ERROR (a failure
 * after setup: bad token ids, which the vocabulary rules exclude). */
Test(cli, run_exit_status_by_outcome, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char res[512], arg[600], dir[600], err[65536];
	struct stat sb;
	cli_path(res, sizeof(res), "exit.jsonl");
	cli_write_text(res, "{\"schema\":1,\"status\":\"ok\",\"config\":{}}\n");
	snprintf(arg, sizeof(arg), "out=%s", res);
	{
		const char *a[] = {"run",	  TINY, "lr=1000", "clip=0",
				   "lr_warmup=0", arg,	NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
		cr_assert(strstr(err, "run diverged"), "%s", err);
	}
	/* err holds the whole record printed for rescue (about 8 KiB) and the
	 * lines around it: a BLAS warning first, the outcome last */
	if (stat("/dev/full", &sb) == 0 && S_ISCHR(sb.st_mode)) {
		const char *a[] = {"run",    TINY,	    "lr=1000",
				   "clip=0", "lr_warmup=0", "out=/dev/full",
				   NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 1, "%s", err);
		cr_assert(strstr(err, "cannot append") &&
			      strstr(err, "run diverged"),
			  "%s", err);
	}
	write_text_corpus(cli_dir);
	snprintf(dir, sizeof(dir), "data_dir=%s", cli_dir);
	{
		const char *a[] = {
		    "run", "corpus=text", dir, "batch_size=100000", arg, NULL};
		expect_bad(a, res, "too few for batch_size=100000");
	}
}

/* pretrain_steps / pretrain_layers out of range or with another method:
 * exit 2, one line naming the key and its range. */
Test(cli, pretrain_bad_input_exits_2, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	char res[512], arg[600];
	cli_path(res, sizeof(res), "keep-pretrain.jsonl");
	cli_write_text(res, "{\"schema\":1,\"status\":\"ok\",\"config\":{}}\n");
	snprintf(arg, sizeof(arg), "out=%s", res);
	{
		const char *a[] = {
		    "run", TINY, "method=deq", "pretrain_steps=4", arg, NULL};
		expect_bad(a, res,
			   "pretrain_steps=4 must be smaller than "
			   "steps=4 (use a value in [0, 3])");
	}
	{
		const char *a[] = {
		    "run", TINY, "method=deq", "pretrain_steps=3", arg, NULL};
		expect_bad(a, res, "pretrain_steps=3 + warmup_steps=1");
	}
	{
		const char *a[] = {
		    "run", TINY, "method=deq", "pretrain_layers=0", arg, NULL};
		expect_bad(a, res,
			   "pretrain_layers=0 is out of range; use a "
			   "value in [1, 100000]");
	}
	{
		const char *a[] = {"run", TINY, "pretrain_steps=-1", arg, NULL};
		expect_bad(a, res, "pretrain_steps=-1 is out of range");
	}
	{
		const char *a[] = {
		    "run", TINY, "method=checkpoint", "pretrain_steps=1",
		    arg,   NULL};
		expect_bad(a, res, "pretrain_steps=1 needs method=deq");
	}
}
