/* test_records_strict.c — text that is not UTF-8, or cut, never
 * makes a record field vanish (bench/io/jsontext.h; out= path, suite name,
 * save_params message); `deqbench validate` refuses what results/SCHEMA.md
 * rules out beyond types (impl names, negative sizes, times that do not
 * exist, a key twice, an ok record without its sections, an eval record
 * with training's); a parameter file whose metadata holds n_heads 2.0 is
 * called malformed, not advised as n_heads=2.0. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "jsontext.h"
#include "record.h"
#include "test_cli.h"
#include "validate.h"

#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=2", "layers=3", "steps=3", "warmup_steps=1",           \
	    "lr_warmup=1", "eval_tokens=64", "threads=1", "eval_warmup=0"

/* Runs deqbench with args; asserts the exit status. */
static void run_want(const char *const *args, int want)
{
	char err[4096];
	int rc = cli_run(args, 0, err, sizeof(err));
	cr_assert_eq(rc, want, "%s exited %d, not %d: %s", args[0], rc, want,
		     err);
}

/* The only record of the JSONL file at path (new reference). */
static json_t *only_record(const char *path)
{
	json_t *arr = json_array(), *r;
	char err[1024];
	cr_assert_eq(record_read_jsonl(path, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 1, "%s: %zu records", path,
		     json_array_size(arr));
	r = json_incref(json_array_get(arr, 0));
	json_decref(arr);
	return r;
}

/* ---- 12. text that is not UTF-8, or cut ---- */

Test(utf8, helpers_escape_and_cut_between_characters)
{
	/* "é" is c3 a9, "€" e2 82 ac */
	static const char *const bad[] = {"r\xff.jsonl", "a\xc3",
					  "\xe2\x82",	 "\xed\xa0\x80",
					  "\xc0\xaf",	 NULL};
	static const char *const as[] = {"r\\xff.jsonl", "a\\xc3",
					 "\\xe2\\x82",	 "\\xed\\xa0\\x80",
					 "\\xc0\\xaf",	 NULL};
	char buf[16];
	for (int i = 0; bad[i]; i++) {
		json_t *j = jsontext_string(bad[i]);
		cr_assert_not_null(j, "%s", as[i]);
		cr_assert_str_eq(json_string_value(j), as[i]);
		json_decref(j);
	}
	{
		json_t *j = jsontext_string("caf\xc3\xa9 \xe2\x82\xac");
		cr_assert_str_eq(json_string_value(j),
				 "caf\xc3\xa9 \xe2\x82\xac");
		json_decref(j);
	}
	cr_assert_eq(jsontext_fit("ab\xc3\xa9", 3), 2);
	cr_assert_eq(jsontext_fit("ab\xc3\xa9", 4), 4);
	cr_assert_eq(jsontext_fit("a\xe2\x82\xac", 3), 1);
	cr_assert_eq(jsontext_fit("abc", 2), 2);
	snprintf(buf, sizeof(buf), "%s", "abc\xe2\x82");
	jsontext_trim(buf);
	cr_assert_str_eq(buf, "abc");
	snprintf(buf, sizeof(buf), "%s", "abc\xe2\x82\xac");
	jsontext_trim(buf);
	cr_assert_str_eq(buf, "abc\xe2\x82\xac");
	/* a message snprintf cut inside "é" */
	errmsg_set(buf, 6, "%s", "abcd\xc3\xa9");
	cr_assert_str_eq(buf, "abcd");
	{
		char full[6] = "abcd\xc3";
		json_t *j = jsontext_buf(full, sizeof(full));
		cr_assert_str_eq(json_string_value(j), "abcd");
		json_decref(j);
	}
}

/* out=$'r\xff.jsonl': the record keeps config.out, escaped, and is
 * strictly valid. */
Test(utf8, out_path_not_utf8_kept_in_record, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[512], arg[600], want[600];
	json_t *r;
	cli_path(out, sizeof(out), "r\xff.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run", TINY, arg, NULL};
		run_want(a, 0);
	}
	r = only_record(out);
	snprintf(want, sizeof(want), "%s/r\\xff.jsonl", cli_dir);
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(r, "config"), "out")),
			 want);
	cr_assert_eq(validate_record(r, VALIDATE_STRICT, NULL, NULL), 0);
	json_decref(r);
}

/* A suite name cut at 255 bytes inside "é": the record's suite.name is the
 * whole characters before it. */
Test(utf8, suite_name_cut_between_characters, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char name[300], text[1024], sp[512], out[512], arg[600];
	json_t *r;
	memset(name, 'a', 254);
	snprintf(name + 254, sizeof(name) - 254, "\xc3\xa9");
	snprintf(text, sizeof(text),
		 "{\"name\": \"%s\", \"base\": {\"corpus\": \"synthetic\", "
		 "\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"seq_len\": "
		 "8, \"batch_size\": 2, \"layers\": 3, \"steps\": 3, "
		 "\"warmup_steps\": 1, \"eval_tokens\": 64, \"threads\": 1}}",
		 name);
	cli_path(sp, sizeof(sp), "s.json");
	cli_write_text(sp, text);
	cli_path(out, sizeof(out), "s.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", sp, arg, NULL};
		run_want(a, 0);
	}
	r = only_record(out);
	name[254] = 0;
	cr_assert_str_eq(json_string_value(json_object_get(
			     json_object_get(r, "suite"), "name")),
			 name);
	json_decref(r);
}

/* save_params= failing after training (a file size limit) with a path
 * whose byte 300 is inside "é": the error record's message gives the
 * reason first (G17, G20.11) and quotes the path shortened between
 * characters (no escaped byte), not an empty message. */
Test(utf8, save_params_message_cut_between_characters, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char dir[512], path[1024], out[512], arg[1100], oarg[600], want[400];
	const char *msg;
	size_t n;
	json_t *r;
	cli_path(dir, sizeof(dir), "");
	n = strlen(dir);
	for (int i = 0; i < 100; i++, n += 2)
		snprintf(dir + n, sizeof(dir) - n, "\xc3\xa9");
	cr_assert_eq(mkdir(dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/%s", dir,
		 (300 - strlen(dir) - 1) % 2 ? "" : "x");
	n = strlen(path);
	for (int i = 0; i < 40; i++, n += 2)
		snprintf(path + n, sizeof(path) - n, "\xc3\xa9");
	cr_assert_eq((unsigned char)path[300] & 0xc0, 0x80,
		     "byte 300 must continue a character");
	cli_path(out, sizeof(out), "f.jsonl");
	snprintf(arg, sizeof(arg), "save_params=%s", path);
	snprintf(oarg, sizeof(oarg), "out=%s", out);
	{
		/* the parameters (~50 kB) pass the limit, the record not */
		const char *a[] = {"run", TINY, arg, oarg, NULL};
		char err[4096];
		cr_assert_eq(cli_run(a, 20000, err, sizeof(err)), 1, "%s", err);
	}
	r = only_record(out);
	msg = json_string_value(json_object_get(r, "message"));
	cr_assert_str_eq(json_string_value(json_object_get(r, "status")),
			 "error");
	snprintf(want, sizeof(want), "%.40s", path);
	cr_assert(msg && !strncmp(msg, "save_params: ", 13) &&
		      strstr(msg, "(File too large)") &&
		      strstr(msg, want) > strstr(msg, "(File too large)") &&
		      !strstr(msg, "\\x"),
		  "message '%s': not the reason, then '%s' cut between "
		  "characters",
		  msg ? msg : "", want);
	json_decref(r);
}

/* ---- validate: what SCHEMA.md rules out beyond types ---- */

/* A traced ok training record and an ok eval record of the current
 * binary (new references). */
static void current_records(json_t **train, json_t **eval)
{
	char t[512], e[512], p[512], targ[600], earg[600], sarg[600], parg[600];
	cli_path(t, sizeof(t), "t.jsonl");
	cli_path(e, sizeof(e), "e.jsonl");
	cli_path(p, sizeof(p), "p.safetensors");
	snprintf(targ, sizeof(targ), "out=%s", t);
	snprintf(earg, sizeof(earg), "out=%s", e);
	snprintf(sarg, sizeof(sarg), "save_params=%s", p);
	snprintf(parg, sizeof(parg), "params=%s", p);
	{
		const char *a[] = {"run", TINY, "trace=true", sarg, targ, NULL};
		run_want(a, 0);
	}
	{
		const char *a[] = {"eval", TINY, parg, earg, NULL};
		run_want(a, 0);
	}
	*train = only_record(t);
	*eval = only_record(e);
	cr_assert_eq(validate_record(*train, VALIDATE_STRICT, NULL, NULL), 0);
	cr_assert_eq(validate_record(*eval, VALIDATE_STRICT, NULL, NULL), 0);
}

/* A copy of r with the member at dotted path p (objects only) set to v
 * (stolen). */
static json_t *with(const json_t *r, const char *p, json_t *v)
{
	json_t *c = json_deep_copy(r), *cur = c;
	char buf[256], *save = NULL, *tok, *next;
	snprintf(buf, sizeof(buf), "%s", p);
	tok = strtok_r(buf, ".", &save);
	while ((next = strtok_r(NULL, ".", &save))) {
		cur = json_object_get(cur, tok);
		cr_assert(json_is_object(cur), "%s", p);
		tok = next;
	}
	json_object_set_new(cur, tok, v);
	return c;
}

struct seen {
	char text[4096];
	size_t len;
};

static void collect(void *ctx, const char *path, const char *what)
{
	struct seen *s = ctx;
	s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len,
				   "%s: %s\n", path, what);
	if (s->len >= sizeof(s->text))
		s->len = sizeof(s->text) - 1;
}

/* r (stolen) has a strict-mode problem "PATH: ...PHRASE...". */
static void refused(json_t *r, const char *path, const char *phrase)
{
	struct seen s = {"", 0};
	char want[300];
	int n = validate_record(r, VALIDATE_STRICT, collect, &s);
	snprintf(want, sizeof(want), "%s: ", path);
	cr_assert_gt(n, 0, "%s (%s) passed", path, phrase);
	cr_assert(strstr(s.text, want) && strstr(s.text, phrase),
		  "no problem '%s...%s' in:\n%s", want, phrase, s.text);
	json_decref(r);
}

/* r (stolen) is strictly valid. */
static void accepted(json_t *r, const char *what)
{
	struct seen s = {"", 0};
	cr_assert_eq(validate_record(r, VALIDATE_STRICT, collect, &s), 0,
		     "%s: %s", what, s.text);
	json_decref(r);
}

Test(validate_strict, impl_names, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	json_t *t, *e;
	current_records(&t, &e);
	refused(with(t, "impl", json_string("tensorflow")), "impl",
		"expected deqbench or pytorch-<torch version>");
	refused(with(t, "impl", json_string("pytorch")), "impl",
		"pytorch-<torch version>");
	refused(with(t, "impl", json_string("pytorch-")), "impl",
		"pytorch-<torch version>");
	accepted(with(t, "impl", json_string("pytorch-2.3.1+cpu")), "pytorch");
	accepted(with(t, "impl", json_string("pytorch-1.13.0a0")), "pytorch");
	json_decref(t);
	json_decref(e);
}

Test(validate_strict, negative_sizes_and_counts, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const char *const paths[] = {"memory.peak_bytes.depth",
					    "memory.peak_total_bytes",
					    "memory.max_rss_bytes",
					    "timing.steps_timed",
					    "data.train_tokens",
					    "quality.tokens_trained",
					    "evals.forward_evals_total",
					    "host.online_cpus",
					    "suite.repeat",
					    NULL};
	json_t *t, *e, *s;
	current_records(&t, &e);
	s = json_pack("{s:s, s:i, s:i, s:i}", "name", "x", "index", 0, "combo",
		      0, "repeat", 0);
	json_object_set_new(t, "suite", s);
	accepted(json_incref(t), "with a suite");
	for (int i = 0; paths[i]; i++)
		refused(with(t, paths[i], json_integer(-1)), paths[i],
			"expected a number >= 0");
	refused(with(t, "timing.step_ms.median", json_real(-0.5)),
		"timing.step_ms.median", "expected a number >= 0");
	/* losses may be negative (the first loss has rules beside the
	 * verdict's) */
	accepted(with(t, "quality.train_loss_final", json_real(-0.25)),
		 "negative loss");
	json_decref(t);
	json_decref(e);
}

Test(validate_strict, times_that_do_not_exist, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const char *const bad[] = {
	    "2026-13-45T99:99:99Z", "2025-02-29T12:00:00Z",
	    "2025-01-31T24:00:00Z", "2025-04-31T00:00:00Z",
	    "2025-01-31T12:60:00Z", NULL};
	json_t *t, *e;
	current_records(&t, &e);
	for (int i = 0; bad[i]; i++) {
		refused(with(t, "started_at", json_string(bad[i])),
			"started_at", "expected a UTC time");
		refused(with(t, "finished_at", json_string(bad[i])),
			"finished_at", "expected a UTC time");
	}
	accepted(with(t, "started_at", json_string("2024-02-29T23:59:59Z")),
		 "a leap day");
	json_decref(t);
	json_decref(e);
}

/* A key twice in one object makes the line malformed. */
Test(validate_strict, duplicate_key_is_malformed, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char bad[512], err[2048], *s, *line;
	json_t *t, *e;
	current_records(&t, &e);
	s = json_dumps(t, JSON_COMPACT);
	cr_assert_eq(s[0], '{');
	line = malloc(strlen(s) + 64);
	cr_assert_not_null(line);
	/* the record's own "impl" comes later in the line */
	sprintf(line, "{\"impl\":\"deqbench\",%s\n", s + 1);
	cli_path(bad, sizeof(bad), "dup.jsonl");
	cli_write_text(bad, line);
	{
		const char *a[] = {"validate", bad, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s", err);
	}
	cr_assert(strstr(err, "dup.jsonl:1: malformed JSON at column ") &&
		      strstr(err, "duplicate object key"),
		  "%s", err);
	free(line);
	free(s);
	json_decref(t);
	json_decref(e);
}

/* An ok record has the sections of a finished run: every section null
 * does not pass --strict (nor without it); an error record may lack
 * them. */
Test(validate_strict, ok_record_has_its_sections, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const char *const train[] = {
	    "method", "model",	    "data",	   "timing", "memory",
	    "solver", "evals",	    "quality",	   "host",   "device",
	    "build",  "started_at", "finished_at", NULL};
	static const char *const eval[] = {"method",  "model", "data",
					   "quality", "host",  "device",
					   "build",   NULL};
	static const char *const all[] = {
	    "suite",  "method", "model",    "data",	 "timing", "memory",
	    "solver", "evals",	"quality",  "inference", "host",   "device",
	    "build",  "trace",	"pretrain", "plan",	 NULL};
	json_t *t, *e, *nul, *err;
	current_records(&t, &e);
	for (int i = 0; train[i]; i++)
		refused(with(t, train[i], json_null()), train[i],
			"expected non-null with status ok");
	for (int i = 0; eval[i]; i++)
		refused(with(e, eval[i], json_null()), eval[i],
			"expected non-null with status ok");
	nul = json_deep_copy(t);
	for (int i = 0; all[i]; i++)
		json_object_set_new(nul, all[i], json_null());
	cr_assert_gt(validate_record(nul, VALIDATE_ALL_AGES, NULL, NULL), 8);
	err = with(nul, "status", json_string("error"));
	json_object_set_new(err, "message", json_string("setup failed"));
	accepted(err, "an error record of a run that did not get far");
	refused(nul, "quality", "expected non-null with status ok");
	/* started_at null: only a crashed suite run's error record */
	err = with(t, "status", json_string("error"));
	json_object_set_new(err, "message", json_string("boom"));
	json_object_set_new(err, "started_at", json_null());
	refused(json_incref(err), "started_at", "crashed suite run");
	json_object_set_new(err, "suite",
			    json_pack("{s:s, s:i, s:i, s:i}", "name", "x",
				      "index", 0, "combo", 0, "repeat", 0));
	accepted(err, "a crashed suite run's record");
	json_decref(t);
	json_decref(e);
}

/* kind eval: no training sections, quality's training fields null or 0;
 * kind train: no inference.memory. */
Test(validate_strict, eval_record_has_no_training, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const char *const training[] = {"timing", "memory", "solver",
					       "evals",	 "trace",  NULL};
	json_t *t, *e, *im;
	current_records(&t, &e);
	for (int i = 0; training[i]; i++)
		refused(with(e, training[i],
			     json_deep_copy(json_object_get(t, training[i]))),
			training[i], "expected null with kind eval");
	refused(with(e, "quality.train_loss_final", json_real(3.5)),
		"quality.train_loss_final", "expected null with kind eval");
	refused(with(e, "quality.tokens_trained", json_integer(48)),
		"quality.tokens_trained", "expected 0 with kind eval");
	im = json_object_get(json_object_get(e, "inference"), "memory");
	cr_assert(json_is_object(im));
	refused(with(t, "inference.memory", json_deep_copy(im)),
		"inference.memory", "expected null with kind train");
	json_decref(t);
	json_decref(e);
}

/* trace exactly with trace=true (always in an ok training record);
 * pretrain only with method=deq and pretrain_steps > 0. */
Test(validate_strict, trace_and_pretrain_follow_config, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	json_t *t, *e, *pre;
	current_records(&t, &e);
	refused(with(t, "config.trace", json_false()), "trace",
		"expected null with config trace=false");
	refused(with(t, "trace", json_null()), "trace",
		"expected an object with config trace=true");
	pre = json_pack(
	    "{s:i, s:i, s:i, s:i, s:o, s:o, s:o, s:n, s:n, s:n, "
	    "s:n, s:i}",
	    "steps", 2, "layers", 3, "steps_done", 2, "steps_timed", 1,
	    "step_ms",
	    json_deep_copy(
		json_object_get(json_object_get(t, "timing"), "step_ms")),
	    "forward_ms",
	    json_deep_copy(
		json_object_get(json_object_get(t, "timing"), "forward_ms")),
	    "backward_ms",
	    json_deep_copy(
		json_object_get(json_object_get(t, "timing"), "backward_ms")),
	    "tokens_per_s", "forward_evals_per_step", "vjp_evals_per_step",
	    "train_loss_last", "depth_bytes", 0);
	cr_assert_not_null(pre);
	refused(with(t, "pretrain", pre), "pretrain",
		"only method=deq with pretrain_steps > 0");
	json_decref(t);
	json_decref(e);
}

/* ---- G13: the rules between fields, enumerations and ranges ---- */

/* A traced deq record of the current binary (new reference). */
static json_t *deq_record(void)
{
	char d[512], darg[600];
	json_t *r;
	cli_path(d, sizeof(d), "d.jsonl");
	snprintf(darg, sizeof(darg), "out=%s", d);
	{
		const char *a[] = {"run",	 TINY, "method=deq",
				   "trace=true", darg, NULL};
		run_want(a, 0);
	}
	r = only_record(d);
	cr_assert_eq(validate_record(r, VALIDATE_STRICT, NULL, NULL), 0);
	return r;
}

/* One mutation of the review's table: on record rec ('t' unroll train,
 * 'd' deq train, 'e' eval), set path to the JSON text value ("@d": the
 * deq record's value at path) and path2 to value2 when given; strict
 * validation reports at `at` a problem containing `says`. */
struct mutation {
	char rec;
	const char *path, *value, *path2, *value2, *at, *says;
};

/* A plan object (deqbench plan --run) of the given rank. */
#define PLAN(rank)                                                             \
	"{\"budget_mib\": 1.0, \"rank\": " #rank ", \"candidate\": "           \
	"\"unroll\", \"predicted_peak_total_bytes\": 1, "                      \
	"\"predicted_host_bytes\": 0, \"predicted_step_ms\": 1.0, "            \
	"\"predicted_forward_evals\": 3.0, \"predicted_vjp_evals\": 3.0}"

/* G13: every row was accepted by validate --strict before; SCHEMA.md
 * rules each out. */
static const struct mutation g13[] = {
    {'t', "status", "\"diverged\"", "message", "\"loss became inf\"",
     "health.verdict", "expected diverged with status diverged"},
    {'d', "health.fwd_converged", "0.0", "health.unconverged", "false",
     "health.unconverged", "expected true"},
    {'t', "health.unconverged", "true", NULL, NULL, "health.unconverged",
     "expected null exactly when fwd_converged"},
    {'t', "health.spike_steps", "1000000", NULL, NULL, "health.spike_steps",
     "expected at most health.steps"},
    {'t', "health.loss_min", "100.0", NULL, NULL, "health.loss_min",
     "expected at most loss_final"},
    {'d', "health.fwd_converged_last", "2.0", NULL, NULL,
     "health.fwd_converged_last", "expected a fraction in [0, 1]"},
    {'d', "solver.forward.converged_fraction", "1.5", NULL, NULL,
     "solver.forward.converged_fraction", "expected a fraction in [0, 1]"},
    {'t', "health", "null", NULL, NULL, "health",
     "expected an object in an ok training record"},
    {'e', "inference.batches", "0", "inference.batches_timed", "0",
     "inference.batches", "expected at least 1"},
    {'e', "inference.batches_timed", "1000", NULL, NULL,
     "inference.batches_timed", "batches - eval_warmup"},
    {'t', "timing.steps_timed", "1000000000", NULL, NULL, "timing.steps_timed",
     "expected 2 (steps - pretrain_steps"},
    {'t', "quality.valid_ppl", "1.5", NULL, NULL, "quality.valid_ppl",
     "expected exp(quality.valid_loss)"},
    {'t', "trace.loss", "[5.0]", NULL, NULL, "trace.loss",
     "expected 3 entries"},
    {'d', "solver.forward", "null", NULL, NULL, "solver.forward",
     "expected an object with method=deq and status ok"},
    {'t', "solver.forward", "@d", NULL, NULL, "solver.forward",
     "expected null: method=unroll has no forward solve"},
    {'d', "method.method", "\"unroll\"", NULL, NULL, "method.method",
     "expected \"deq\" (config method)"},
    {'t', "data.corpus", "\"brown\"", NULL, NULL, "data.corpus",
     "expected \"synthetic\" (config corpus)"},
    {'d', "method.label", "\"unroll L=999\"", NULL, NULL, "method.label",
     "expected \"deq broyden/ift\""},
    {'t', "method.layers", "5", NULL, NULL, "method.layers",
     "expected 3 (the resolved config's layers)"},
    {'t', "build.git_commit", "\"xyz\"", NULL, NULL, "build.git_commit",
     "expected 12 hex digits"},
    {'t', "build.fingerprint", "\"0123456789ABCDEF\"", NULL, NULL,
     "build.fingerprint", "expected 16 lower-case hex digits"},
    {'t', "build.fingerprint", "\"0123456789abcde\"", NULL, NULL,
     "build.fingerprint", "expected 16 lower-case hex digits"},
    {'e', "build.fingerprint", "\"0123456789abcdef0\"", NULL, NULL,
     "build.fingerprint", "expected 16 lower-case hex digits"},
    {'t', "build.fingerprint", "16", NULL, NULL, "build.fingerprint",
     "expected string"},
    {'t', "device.elem_bytes", "3", NULL, NULL, "device.elem_bytes",
     "expected one of 4, 8"},
    {'t', "status", "\"error\"", "message", "\"line1\\nline2\"", "message",
     "expected text of one line"},
    {'t', "plan", PLAN(0), NULL, NULL, "plan.rank", "expected an int >= 1"},
    {'t', "memory.peak_total_bytes", "1", NULL, NULL, "memory.peak_total_bytes",
     "expected at least"},
    {'t', "evals.forward_evals_total", "999999", NULL, NULL,
     "evals.forward_evals_total", "forward_evals_per_step x steps"},
    {'t', "model.n_params", "1", NULL, NULL, "model.n_params",
     "the sum of model.params' shapes"},
    {'t', "model.vocab_size", "7", NULL, NULL, "model.vocab_size",
     "(data.vocab_size)"},
    {'t', "timing.step_ms.median", "1e9", NULL, NULL, "timing.step_ms.p75",
     "expected at least median"},
    {'t', "finished_at", "\"2000-01-01T00:00:00Z\"", NULL, NULL, "finished_at",
     "not before started_at"},
    {'t', "config.method", "\"managed\"", NULL, NULL, "config",
     "needs device=cuda"},
    {0, NULL, NULL, NULL, NULL, NULL, NULL},
};

/* The member at dotted path p of r (objects only), NULL when absent. */
static const json_t *json_path(const json_t *r, const char *p)
{
	char buf[256], *save = NULL;
	snprintf(buf, sizeof(buf), "%s", p);
	for (char *k = strtok_r(buf, ".", &save); k && r;
	     k = strtok_r(NULL, ".", &save))
		r = json_object_get(r, k);
	return r;
}

/* A copy of r with path set to the JSON text v. */
static json_t *with_text(const json_t *r, const char *path, const char *v)
{
	json_error_t e;
	json_t *j = json_loads(v, JSON_DECODE_ANY, &e);
	cr_assert_not_null(j, "%s: %s", v, e.text);
	return with(r, path, j);
}

Test(validate_strict, g13_mutations_refused, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	json_t *t, *e, *d = deq_record();
	current_records(&t, &e);
	for (const struct mutation *m = g13; m->rec; m++) {
		const json_t *base = m->rec == 't' ? t : m->rec == 'd' ? d : e;
		json_t *r = strcmp(m->value, "@d")
				? with_text(base, m->path, m->value)
				: with(base, m->path,
				       json_deep_copy(json_path(d, m->path)));
		if (m->path2) {
			json_t *r2 = with_text(r, m->path2, m->value2);
			json_decref(r);
			r = r2;
		}
		refused(r, m->at, m->says);
	}
	/* the rank of a plan record is 1 and up */
	accepted(with_text(t, "plan", PLAN(1)), "plan rank 1");
	/* records from before build.fingerprint lack it, even for --strict */
	{
		json_t *r = json_deep_copy(t);
		json_object_del(json_object_get(r, "build"), "fingerprint");
		accepted(r, "no build.fingerprint");
	}
	json_decref(t);
	json_decref(e);
	json_decref(d);
}

/* G13: float equalities hold within VALIDATE_TOL (1e-9 relative): the
 * last bits of exp may differ between writers; rules that older records
 * break apply only under --strict. */
Test(validate_strict, g13_tolerances_and_ages, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	json_t *t, *e, *r;
	double ppl;
	current_records(&t, &e);
	ppl = json_number_value(
	    json_object_get(json_object_get(t, "quality"), "valid_ppl"));
	accepted(with(t, "quality.valid_ppl", json_real(ppl * (1 + 1e-12))),
		 "ppl within 1e-12");
	refused(with(t, "quality.valid_ppl", json_real(ppl * (1 + 1e-6))),
		"quality.valid_ppl", "expected exp(quality.valid_loss)");
	/* in older records an evaluation without a batch has batches 0 */
	r = with(e, "inference.batches", json_integer(0));
	json_object_set_new(json_object_get(r, "inference"), "batches_timed",
			    json_integer(0));
	cr_assert_eq(validate_record(r, VALIDATE_ALL_AGES, NULL, NULL), 0);
	json_decref(r);
	/* a single-field rule holds for every age */
	r = with(t, "device.elem_bytes", json_integer(3));
	cr_assert_gt(validate_record(r, VALIDATE_ALL_AGES, NULL, NULL), 0);
	json_decref(r);
	json_decref(t);
	json_decref(e);
}

/* ---- G14: control characters in record strings ---- */

/* G14: a label that clears the screen, a message of two lines, a path
 * with a bell or a C1 control (U+009B, a CSI on some terminals): refused,
 * and the problem line itself carries none of them. */
Test(validate_strict, g14_control_characters_refused, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	json_t *t, *e;
	struct seen s = {"", 0};
	current_records(&t, &e);
	refused(
	    with(t, "method.label", json_string("evil\x1b[2J\x1b]0;pwned\a")),
	    "method.label", "without control characters");
	refused(with(t, "host.hostname", json_string("a\tb")), "host.hostname",
		"without control characters");
	refused(with(t, "config.out", json_string("r\a.jsonl")), "config.out",
		"without control characters");
	refused(with(t, "build.compiler",
		     json_string("gcc \xc2\x9b"
				 "2J")),
		"build.compiler", "without control characters");
	refused(with(e, "model.params",
		     json_pack("[{s:s, s:[i]}]", "name", "x\ny", "shape", 1)),
		"model.params[0].name", "without control characters");
	{
		json_t *r = with(t, "method.label", json_string("a\x1b[31mb"));
		cr_assert_gt(validate_record(r, VALIDATE_ALL_AGES, collect, &s),
			     0);
		cr_assert_null(strchr(s.text, 0x1b), "%s", s.text);
		cr_assert(strstr(s.text, "a\\x1b[31mb"), "%s", s.text);
		json_decref(r);
	}
	accepted(
	    with(t, "host.hostname", json_string("caf\xc3\xa9 \xe2\x82\xac")),
	    "UTF-8 text");
	json_decref(t);
	json_decref(e);
}

/* ---- a params file whose metadata holds n_heads 2.0 ---- */

Test(params, n_heads_real_in_metadata_is_malformed, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	static const char header[] =
	    "{\"__metadata__\": {\"config\": \"{\\\"model\\\": "
	    "\\\"transformer\\\", \\\"n_heads\\\": 2.0}\"}}";
	unsigned char file[sizeof(header) + 8];
	char p[512], parg[600], out[512], oarg[600], err[2048];
	size_t n = sizeof(header) - 1;
	for (int i = 0; i < 8; i++)
		file[i] = (unsigned char)(n >> (8 * i));
	memcpy(file + 8, header, n);
	cli_path(p, sizeof(p), "p.safetensors");
	cli_write(p, file, n + 8);
	cli_path(out, sizeof(out), "o.jsonl");
	snprintf(parg, sizeof(parg), "params=%s", p);
	snprintf(oarg, sizeof(oarg), "out=%s", out);
	{
		const char *a[] = {"run", TINY, parg, oarg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s", err);
	}
	cr_assert(strstr(err, "metadata \"config\" holds n_heads=2.0 where "
			      "an integer is expected (configured "
			      "n_heads=2)"),
		  "%s", err);
	cr_assert_null(strstr(err, "use n_heads=2.0"), "%s", err);
	cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1, "one line: %s",
		     err);
}
