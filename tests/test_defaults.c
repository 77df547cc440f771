/* test_defaults.c — defaults that work and keys that do something:
 * `run` refuses a key of another method than its own; a suite whose
 * axis only varies such keys collapses the runs that would be identical;
 * `eval` takes the model and method saved in the parameter file as its
 * base; a run of two steps works (the default warm-up scales with steps). */
#include <jansson.h>

#include "test_cli.h"

#define TINY_ARGS                                                              \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=2", "eval_tokens=64", "threads=1"

static json_t *last_record(const char *name)
{
	char p[600], *text, *nl;
	json_t *r;
	cli_path(p, sizeof(p), name);
	text = cli_read(p, NULL);
	cr_assert_not_null(text, "%s", p);
	nl = strrchr(text, '\n');
	if (nl)
		*nl = 0;
	nl = strrchr(text, '\n');
	r = json_loads(nl ? nl + 1 : text, 0, NULL);
	cr_assert_not_null(r);
	free(text);
	return r;
}

static const char *cfg_str(const json_t *r, const char *k)
{
	return json_string_value(
	    json_object_get(json_object_get(r, "config"), k));
}

static long long cfg_int(const json_t *r, const char *k)
{
	return json_integer_value(
	    json_object_get(json_object_get(r, "config"), k));
}

Test(defaults, keys_of_another_method_refused, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char out[600], arg[700], err[2048];
	const char *unroll[] = {"run",	      TINY_ARGS, "method=unroll",
				"f_tol=0.01", arg,	 NULL};
	const char *ckpt[] = {"run",	 TINY_ARGS, "method=checkpoint",
			      "slots=3", arg,	    NULL};
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	cr_assert_eq(cli_run(unroll, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "f_tol=0.01 has no effect with method=unroll: "
			      "it is a key of method=deq"),
		  "%s", err);
	cr_assert_eq(cli_run(ckpt, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "slots=3 has no effect with method=checkpoint") &&
		      strstr(err, "method=revolve"),
		  "%s", err);
	cr_assert(!cli_exists(out), "nothing written");
}

Test(defaults, suite_collapses_runs_that_differ_in_unused_keys,
     .init = cli_setup, .fini = cli_teardown, .timeout = 60)
{
	char sp[600], err[2048], o[600], *text;
	cli_path(sp, sizeof(sp), "s.json");
	cli_write_text(sp, "{\"name\": \"tol\", \"base\": {\"corpus\": "
			   "\"synthetic\"}, \"axes\": {\"method\": "
			   "[\"unroll\", \"deq\"], \"f_tol\": [0.1, 0.01]}}");
	const char *a[] = {"suite", sp, "--dry-run", NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(strstr(err, "run 1 is the same run as run 0 (differing only "
			      "in keys its method does not use or output "
			      "keys: f_tol)"),
		  "%s", err);
	cli_path(o, sizeof(o), "stdout.txt");
	text = cli_read(o, NULL);
	/* unroll once, deq at both tolerances */
	cr_assert(strstr(text, "3 of 3 runs"), "%s", text);
	free(text);
}

Test(defaults, eval_takes_the_file_config, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char p[600], pa[700], r[600], ra[700], e[600], ea[700], err[4096];
	json_t *rec;
	cli_path(p, sizeof(p), "p.safetensors");
	cli_path(r, sizeof(r), "r.jsonl");
	cli_path(e, sizeof(e), "e.jsonl");
	snprintf(ra, sizeof(ra), "out=%s", r);
	snprintf(ea, sizeof(ea), "out=%s", e);
	snprintf(pa, sizeof(pa), "save_params=%s", p);
	const char *train[] = {"run",	   TINY_ARGS,	 "method=deq",
			       "layers=5", "f_tol=0.05", "steps=4",
			       pa,	   ra,		 NULL};
	cr_assert_eq(cli_run(train, 0, err, sizeof(err)), 0, "%s", err);
	snprintf(pa, sizeof(pa), "params=%s", p);
	/* nothing but the file: the DEQ it was trained as */
	const char *plain[] = {"eval",	    pa, "eval_tokens=64",
			       "threads=1", ea, NULL};
	cr_assert_eq(cli_run(plain, 0, err, sizeof(err)), 0, "%s", err);
	rec = last_record("e.jsonl");
	cr_assert_str_eq(cfg_str(rec, "method"), "deq");
	cr_assert_eq(cfg_int(rec, "d_model"), 16);
	cr_assert_eq(cfg_int(rec, "layers"), 5);
	cr_assert_str_eq(cfg_str(rec, "corpus"), "synthetic");
	json_decref(rec);
	/* what may differ at evaluation overrides it */
	const char *unroll[] = {"eval",	    pa,		 "method=unroll",
				"layers=2", "threads=1", "eval_tokens=64",
				ea,	    NULL};
	cr_assert_eq(cli_run(unroll, 0, err, sizeof(err)), 0, "%s", err);
	rec = last_record("e.jsonl");
	cr_assert_str_eq(cfg_str(rec, "method"), "unroll");
	cr_assert_eq(cfg_int(rec, "layers"), 2);
	json_decref(rec);
	/* a shape that contradicts the file stays bad input */
	const char *shape[] = {"eval", pa, "d_model=32", "n_heads=2", ea, NULL};
	cr_assert_eq(cli_run(shape, 0, err, sizeof(err)), 2, "%s", err);
}

Test(defaults, two_steps_run, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	char out[600], arg[700], err[2048];
	json_t *rec;
	const char *a[] = {"run", TINY_ARGS, "layers=3", "steps=2", arg, NULL};
	cli_path(out, sizeof(out), "r.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	rec = last_record("r.jsonl");
	/* min(10, steps/5) */
	cr_assert_eq(cfg_int(rec, "warmup_steps"), 0);
	cr_assert_str_eq(cfg_str(rec, "init"), "pytorch");
	json_decref(rec);
}
