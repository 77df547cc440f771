/* test_eval.c — `deqbench eval params=P` and the file's metadata
 * (bench/cmd/main.c's eval config, bench/run/param_files.c): the corpus a
 * file was trained on (data_dir from the metadata, the vocabulary's
 * fingerprint), the file's own method keys taken before keys of other
 * methods are checked, and a broken file or metadata named before any
 * corpus is looked for. The rest of eval (records, precision, machine
 * keys) is in test_params.c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "test_bench_util.h"
#include "test_cli.h"

/* A tiny 6-step run with two more key=value arguments (a1, a2) saving its
 * parameters to <cli_dir>/name and its record to <cli_dir>/r.jsonl: their
 * paths into p and out, "params=p" into pa and "out=out" into oa (600
 * bytes each). */
static void save_tiny_on(const char *name, const char *a1, const char *a2,
			 char *p, char *out, char *pa, char *oa)
{
	char sp[600], err[4096];
	cli_path(p, 512, name);
	cli_path(out, 512, "r.jsonl");
	snprintf(pa, 600, "params=%s", p);
	snprintf(oa, 600, "out=%s", out);
	snprintf(sp, sizeof(sp), "save_params=%s", p);
	const char *run[] = {"run",
			     "d_model=16",
			     "n_heads=2",
			     "d_ff=32",
			     "seq_len=8",
			     "batch_size=4",
			     "vocab_size=64",
			     "layers=4",
			     "steps=6",
			     "eval_tokens=64",
			     "threads=1",
			     a1,
			     a2,
			     sp,
			     oa,
			     NULL};
	cr_assert_eq(cli_run(run, 0, err, sizeof(err)), 0, "%s", err);
}

/* save_tiny_on over the synthetic corpus with one more key=value. */
static void save_tiny(const char *name, const char *arg, char *p, char *out,
		      char *pa, char *oa)
{
	save_tiny_on(name, "corpus=synthetic", arg, p, out, pa, oa);
}

/* The safetensors file src written to dst with its metadata "config"
 * replaced by the text cfg (the header re-encoded; the data as it is). */
static void write_with_config(const char *src, const char *dst, const char *cfg)
{
	size_t len;
	uint64_t hl;
	char *f = cli_read(src, &len), *hs;
	cr_assert(f && len >= 8);
	memcpy(&hl, f, 8);
	json_t *h = json_loadb(f + 8, hl, 0, NULL);
	cr_assert_not_null(h);
	json_object_set_new(json_object_get(h, "__metadata__"), "config",
			    json_string(cfg));
	hs = json_dumps(h, JSON_COMPACT);
	uint64_t nl = strlen(hs);
	FILE *o = fopen(dst, "wb");
	cr_assert_not_null(o);
	fwrite(&nl, 8, 1, o); /* little-endian hosts only, as the reader */
	fwrite(hs, 1, nl, o);
	fwrite(f + 8 + hl, 1, len - 8 - hl, o);
	fclose(o);
	free(hs);
	free(f);
	json_decref(h);
}

/* G4: a file trained on a corpus read from disk evaluates on that corpus
 * (data_dir from its metadata, not ./data), reproducing the run's valid
 * loss; another corpus (another vocabulary) is refused (impl=pytorch
 * too), one with the same
 * vocabulary is fine, and a file written before the vocabulary's
 * fingerprint was stored (the key renamed in place) still evaluates, with
 * a note. */
Test(eval, file_corpus_comes_from_the_metadata, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char d[3][512], dd[3][600], p[512], out[512], pa[600], oa[600];
	char err[4096], *f;
	size_t len;
	for (int i = 0; i < 3; i++) {
		cli_path(d[i], 512, (const char *[]){"dA", "dB", "dC"}[i]);
		cr_assert_eq(mkdir(d[i], 0755), 0);
		write_word_corpus(d[i], i == 1 ? "b" : "a", i == 1 ? 30 : 14);
		snprintf(dd[i], 600, "data_dir=%s", d[i]);
	}
	save_tiny_on("t.safetensors", "corpus=text", dd[0], p, out, pa, oa);
	const char *ev[] = {"eval", pa, "eval_tokens=64", oa, NULL};
	cr_assert_eq(cli_run(ev, 0, err, sizeof(err)), 0, "%s", err);
	json_t *arr = json_array();
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0);
	json_t *tr = json_array_get(arr, 0), *e = json_array_get(arr, 1);
	cr_assert_str_eq(json_string_value(at(e, "config.data_dir")), d[0]);
	cr_assert_eq(num_at(e, "quality.valid_loss"),
		     num_at(tr, "quality.valid_loss"));
	json_decref(arr);
	const char *other[] = {"eval", pa, dd[1], "eval_tokens=64", oa, NULL};
	expect_bad(other, out, "vocabulary");
	/* impl=pytorch checks the file with deqbench's loader first: the
	 * same refusal, before any child starts */
	const char *other_pt[] = {"eval",	    pa, dd[1], "impl=pytorch",
				  "eval_tokens=64", oa, NULL};
	expect_bad(other_pt, out, "vocabulary");
	const char *copy[] = {"eval", pa, dd[2], "eval_tokens=64", oa, NULL};
	cr_assert_eq(cli_run(copy, 0, err, sizeof(err)), 0, "%s", err);
	f = cli_read(p, &len);
	char *k = memmem(f, len, "vocab_fingerprint", 17);
	cr_assert_not_null(k, "the file stores the fingerprint");
	k[16] = 'X';
	cli_write(p, f, len);
	free(f);
	cr_assert_eq(cli_run(other, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(strstr(err, "fingerprint"), "no note: %s", err);
}

/* G15, G20.2: `eval params=P` of a DEQ file takes the DEQ keys (f_tol,
 * f_solver, f_max_iter, pretrain_steps, from key=value or a config file):
 * the file's method=deq is merged before keys of other methods are
 * checked; with method=unroll they are still refused. */
Test(eval, deq_file_takes_deq_keys, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char p[512], out[512], err[4096], pa[600], oa[600], ft[512];
	static const char *const keys[] = {"f_tol=0.5", "f_solver=anderson",
					   "f_max_iter=5", "pretrain_steps=2"};
	save_tiny("deq.safetensors", "method=deq", p, out, pa, oa);
	for (int i = 0; i < 4; i++) {
		const char *a[] = {"eval",	     pa, keys[i],
				   "eval_tokens=64", oa, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s: %s",
			     keys[i], err);
	}
	cli_path(ft, sizeof(ft), "ft.json");
	cli_write_text(ft, "{\"f_tol\": 0.5}");
	const char *file[] = {"eval", ft, pa, "eval_tokens=64", oa, NULL};
	cr_assert_eq(cli_run(file, 0, err, sizeof(err)), 0, "%s", err);
	const char *unroll[] = {"eval",	     pa, "method=unroll",
				"f_tol=0.5", oa, NULL};
	expect_bad(unroll, out, "has no effect with method=unroll");
}

/* G20.1: a truncated, empty or corrupt file, or one whose metadata config
 * is broken, is named before any corpus is looked for (the message never
 * falls back to the default corpus's). */
Test(eval, broken_file_named_before_the_corpus, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const char *const cfgs[] = {"{not json", "[1, 2]",
					   "{\"seed\": 1, \"seed\": 2}", NULL};
	char p[512], out[512], err[4096], pa[600], oa[600], b[512], ba[600];
	size_t len;
	save_tiny("ok.safetensors", "method=unroll", p, out, pa, oa);
	char *f = cli_read(p, &len);
	cli_path(b, sizeof(b), "broken.safetensors");
	snprintf(ba, sizeof(ba), "params=%s", b);
	const char *a[] = {"eval", ba, oa, NULL};
	for (int i = 0; i < 6; i++) {
		if (i < 3) { /* truncated, empty, a byte past the data */
			cli_write(b, f, i == 0 ? len / 2 : 0);
			if (i == 2) {
				cli_write(b, f, len);
				FILE *x = fopen(b, "ab");
				fputc(0, x), fclose(x);
			}
		} else
			write_with_config(p, b, cfgs[i - 3]);
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%d: %s", i,
			     err);
		cr_assert(strstr(err, "broken.safetensors") &&
			      !strstr(err, "corpus=") &&
			      strchr(err, '\n') == strrchr(err, '\n'),
			  "%d: %s", i, err);
	}
	free(f);
}

/* A file whose "config" metadata is not JSON (here a saved file with one
 * byte of it edited in place) is bad input to `run params=` as to eval:
 * exit 2, one line naming the file and what to do, no record. */
Test(eval, run_refuses_broken_metadata, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char p[512], out[512], err[4096], pa[600], oa[600];
	size_t len;
	save_tiny("m.safetensors", "precision=fp32", p, out, pa, oa);
	char *f = cli_read(p, &len);
	cr_assert_not_null(f);
	char *c = memmem(f, len, "\"config\":\"{", 11);
	cr_assert_not_null(c, "the metadata holds a config");
	c[10] = '['; /* "[\"...}" is not JSON */
	cli_write(p, f, len);
	free(f);
	cli_write_text(out, "");
	const char *a[] = {"run",
			   "corpus=synthetic",
			   "d_model=16",
			   "n_heads=2",
			   "d_ff=32",
			   "seq_len=8",
			   "batch_size=4",
			   "vocab_size=50",
			   "layers=4",
			   "steps=2",
			   "eval_tokens=64",
			   "threads=1",
			   pa,
			   oa,
			   NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "m.safetensors") && strstr(err, "not JSON"), "%s",
		  err);
	cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "%s", err);
	f = cli_read(out, &len);
	cr_assert_eq(len, 0, "a record was written");
	free(f);
}
