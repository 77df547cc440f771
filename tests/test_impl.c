/* test_impl.c — impl=pytorch's wiring in deqbench (bench/pytorch/peer.h), with a
 * stand-in for python3 and deqtorch.py (shell scripts set through
 * DQ_PYTHON and DQ_PYTORCH_SCRIPT), so these run without PyTorch: the
 * request on the child's stdin (config, token files holding the corpus's
 * tokens), the record built from its stdout (deqbench's config, host and
 * build; the child's impl and figures), refusals of `check` as bad input
 * with nothing written, a child that dies as an error record naming its
 * last stderr line, missing torch, commands that refuse impl=pytorch, and
 * a suite with an impl axis whose report sets each deqbench row beside its
 * pytorch row. The real deqtorch.py is tested against deqbench by the
 * `peer` suite (tests/peer). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data.h"
#include "test_cli.h"
#include "test_peer_fake.h"

/* deqtorch.py stand-in. check: saves the configs, refuses when one has
 * method revolve. run: saves the request and a copy of the train tokens,
 * says something on stderr, prints child.json (or dies when FAKE_DIE is
 * set). eval: saves the request, prints child_eval.json
 * (test_peer_fake.h). */
static const char FAKE_SCRIPT[] =
    "dir=$(dirname \"$0\")\n"
    "case $1 in\n"
    "check) cat > \"$dir/check.json\"\n"
    "  if grep -q '\"method\": *\"revolve\"' \"$dir/check.json\"; then\n"
    "    echo 'deqtorch: method=revolve is not supported by "
    "impl=pytorch; use unroll' >&2; exit 2; fi\n"
    "  exit 0;;\n"
    "eval) cat > \"$dir/request.json\"\n"
    "  cat \"$dir/child_eval.json\"\n"
    "  exit 0;;\n"
    "run) cat > \"$dir/request.json\"\n"
    "  train=$(sed 's/.*\"train\": *\"\\([^\"]*\\)\".*/\\1/' "
    "\"$dir/request.json\")\n"
    "  cp \"$train\" \"$dir/train.copy\"\n"
    "  echo 'deqtorch: step 3/3' >&2\n"
    "  if [ -n \"$FAKE_DIE\" ]; then echo 'Traceback: boom' >&2; exit 1; "
    "fi\n"
    "  cat \"$dir/child.json\"\n"
    "  exit 0;;\n"
    "esac\n"
    "exit 3\n";

static void fake_setup(void)
{
	char sc[512];
	cli_setup();
	fake_python();
	fake_child_records();
	cli_path(sc, sizeof(sc), "fake_deqtorch.sh");
	cli_write_text(sc, FAKE_SCRIPT);
	setenv("DQ_PYTORCH_SCRIPT", sc, 1);
	unsetenv("FAKE_DIE");
}

static json_t *load_json(const char *name)
{
	char p[512];
	json_error_t e;
	json_t *j;
	cli_path(p, sizeof(p), name);
	j = json_load_file(p, 0, &e);
	cr_assert_not_null(j, "%s: %s", name, e.text);
	return j;
}

/* The records of cli_dir/out.jsonl. */
static json_t *records(void)
{
	char p[512];
	json_t *a = json_array();
	char *text, *line, *save = NULL;
	cli_path(p, sizeof(p), "out.jsonl");
	text = cli_read(p, NULL);
	cr_assert_not_null(text, "no out.jsonl");
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *r = json_loads(line, 0, NULL);
		cr_assert_not_null(r, "malformed record line");
		json_array_append_new(a, r);
	}
	free(text);
	return a;
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
	const json_t *x = json_object_get(o, a);
	return json_string_value(b ? json_object_get(x, b) : x);
}

Test(impl, run_builds_record_from_child, .init = fake_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[600], err[4096], arg[700], dir[600];
	struct corpus c;
	char cerr[256];
	json_t *req, *recs, *r;
	size_t n;
	unsigned char *ids;
	cli_path(out, sizeof(out), "out.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	const char *args[] = {"run",
			      "impl=pytorch",
			      "corpus=synthetic",
			      "layers=3",
			      "steps=3",
			      "warmup_steps=1",
			      "seed=7",
			      "eval_tokens=0",
			      "eval_warmup=0",
			      arg,
			      NULL};
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(strstr(err, "deqtorch: step 3/3"), "child stderr: %s", err);

	/* the request: the resolved config, the vocabulary, token files */
	req = load_json("request.json");
	cr_assert_str_eq(str_at(req, "config", "impl"), "pytorch");
	cr_assert_str_eq(str_at(req, "data", "corpus"), "synthetic");
	cr_assert_eq(json_integer_value(json_object_get(
			 json_object_get(req, "data"), "vocab_size")),
		     DATA_SYNTH_VOCAB);
	snprintf(dir, sizeof(dir), "%s", str_at(req, "data", "train"));
	cr_assert(!cli_exists(dir), "token file %s left behind", dir);
	*strrchr(dir, '/') = 0;
	cr_assert(!cli_exists(dir), "token directory %s left behind", dir);

	/* the train tokens are the corpus's, in the cache format */
	cli_path(arg, sizeof(arg), "train.copy");
	ids = (unsigned char *)cli_read(arg, &n);
	cr_assert_not_null(ids);
	cr_assert_eq(corpus_synthetic(&c, DATA_SYNTH_VOCAB, DATA_SYNTH_TRAIN,
				      DATA_SYNTH_VALID, DATA_SYNTH_TEST, 7,
				      cerr, sizeof(cerr)),
		     0, "%s", cerr);
	cr_assert_eq(n, 56 + 4 * c.n[CORPUS_TRAIN]);
	cr_assert_eq(memcmp(ids, DATA_CACHE_MAGIC, 8), 0);
	cr_assert_eq(memcmp(ids + 56, c.ids[CORPUS_TRAIN], 4 * c.n[0]), 0);
	corpus_free(&c);
	free(ids);

	/* the record: deqbench's config, host and build, the child's rest */
	recs = records();
	cr_assert_eq(json_array_size(recs), 1);
	r = json_array_get(recs, 0);
	cr_assert_str_eq(str_at(r, "impl", NULL), "pytorch-0.0+fake");
	cr_assert_str_eq(str_at(r, "status", NULL), "ok");
	cr_assert_str_eq(str_at(r, "config", "model"), "transformer");
	cr_assert_str_eq(str_at(r, "config", "impl"), "pytorch");
	cr_assert(json_is_object(json_object_get(r, "host")));
	cr_assert(json_is_object(json_object_get(r, "build")));
	cr_assert_eq(json_integer_value(json_object_get(r, "schema")), 1);
	cr_assert_str_eq(str_at(r, "kind", NULL), "train");
	cr_assert(json_is_object(json_object_get(r, "timing")));
	json_decref(recs);
	json_decref(req);
}

Test(impl, refusals_are_bad_input, .init = fake_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[600], err[4096], arg[700];
	cli_path(out, sizeof(out), "out.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run",
				   "impl=pytorch",
				   "method=revolve",
				   "corpus=synthetic",
				   arg,
				   NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2);
		cr_assert(strstr(err, "method=revolve is not supported"), "%s",
			  err);
		cr_assert_eq(strchr(err, '\n'), err + strlen(err) - 1,
			     "one line: %s", err);
		cr_assert(!cli_exists(out), "refused run wrote out=");
	}
	{
		const char *a[] = {"run", "impl=torch", arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2);
		cr_assert(strstr(err, "impl=torch is not a known"), "%s", err);
	}
	setenv("PROBE_RC", "3", 1);
	{
		const char *a[] = {"run", "impl=pytorch", "corpus=synthetic",
				   arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2);
		cr_assert(strstr(err, "apt-get install python3-torch"), "%s",
			  err);
		cr_assert(!cli_exists(out));
	}
	unsetenv("PROBE_RC");
	{
		const char *const cmds[][5] = {
		    {"plan", "impl=pytorch", "budget_mib=64", NULL},
		    {"params", "init", "impl=pytorch", "out=p.safetensors"},
		    {"grad", "impl=pytorch", NULL, NULL},
		};
		for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
			cr_assert_eq(cli_run(cmds[i], 0, err, sizeof(err)), 2,
				     "%s", cmds[i][0]);
			cr_assert(strstr(err, "impl=pytorch works with run, "
					      "eval and suite"),
				  "%s: %s", cmds[i][0], err);
		}
	}
}

/* deqbench eval impl=pytorch: deqtorch.py eval gets the config with its
 * params= file; the record is of kind eval whatever the child says, with
 * the child's figures. */
Test(impl, eval_runs_the_child, .init = fake_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[600], err[4096], arg[700], par[600], parg[700];
	json_t *req, *recs, *r;
	cli_path(out, sizeof(out), "out.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	cli_path(par, sizeof(par), "p.safetensors");
	snprintf(parg, sizeof(parg), "out=%s", par);
	const char *init[] = {"params",	  "init", "corpus=synthetic",
			      "layers=3", parg,	  NULL};
	cr_assert_eq(cli_run(init, 0, err, sizeof(err)), 0, "%s", err);
	snprintf(parg, sizeof(parg), "params=%s", par);
	const char *args[] = {"eval",
			      "impl=pytorch",
			      "corpus=synthetic",
			      "layers=3",
			      "eval_warmup=0",
			      parg,
			      arg,
			      NULL};
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	req = load_json("request.json");
	cr_assert_str_eq(str_at(req, "config", "params"), par);
	cr_assert_null(json_object_get(req, "init_params"));
	recs = records();
	cr_assert_eq(json_array_size(recs), 1);
	r = json_array_get(recs, 0);
	cr_assert_str_eq(str_at(r, "kind", NULL), "eval");
	cr_assert_str_eq(str_at(r, "impl", NULL), "pytorch-0.0+fake");
	cr_assert_float_eq(json_real_value(json_object_get(
			       json_object_get(r, "quality"), "valid_loss")),
			   2.5, 0);
	json_decref(recs);
	json_decref(req);
}

Test(impl, dead_child_is_an_error_record, .init = fake_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[600], err[4096], arg[700];
	json_t *recs;
	const char *msg;
	cli_path(out, sizeof(out), "out.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	setenv("FAKE_DIE", "1", 1);
	const char *args[] = {"run",	 "impl=pytorch",   "corpus=synthetic",
			      "steps=2", "warmup_steps=0", arg,
			      NULL};
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 1, "%s", err);
	recs = records();
	cr_assert_eq(json_array_size(recs), 1);
	cr_assert_str_eq(str_at(json_array_get(recs, 0), "status", NULL),
			 "error");
	msg = str_at(json_array_get(recs, 0), "message", NULL);
	cr_assert(strstr(msg, "exited with status 1") &&
		      strstr(msg, "Traceback: boom"),
		  "%s", msg);
	json_decref(recs);
}

/* Writes cli_dir/child.json, the record the fake child prints: a whole
 * record, so that `report` does not leave it out (record_usable.h): the
 * figures of a real tiny run but step_ms 1000 ms and
 * peak_depth_solver_bytes 2 MiB (fake_distinct_figures). */
static void write_child_record(void)
{
	char out[600], arg[700], err[4096], p[600];
	json_t *r;
	cli_path(out, sizeof(out), "real.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"run",
				   "corpus=synthetic",
				   "d_model=16",
				   "n_heads=2",
				   "d_ff=32",
				   "seq_len=8",
				   "batch_size=2",
				   "layers=2",
				   "steps=4",
				   "warmup_steps=1",
				   "eval_tokens=0",
				   "threads=1",
				   arg,
				   NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	r = json_load_file(out, 0, NULL);
	cr_assert_not_null(r);
	json_object_set_new(r, "impl", json_string("pytorch-0.0+fake"));
	fake_distinct_figures(r);
	cli_path(p, sizeof(p), "child.json");
	cr_assert_eq(json_dump_file(r, p, JSON_COMPACT), 0);
	json_decref(r);
	remove(out);
}

Test(impl, suite_impl_axis_and_report, .init = fake_setup, .fini = cli_teardown,
     .timeout = 300)
{
	char out[600], suite[600], err[4096], text[2048], want[128];
	char *stdout_text;
	double ms;
	json_t *recs;
	cli_path(out, sizeof(out), "out.jsonl");
	cli_path(suite, sizeof(suite), "s.json");
	snprintf(text, sizeof(text),
		 "{\"name\": \"peer\", \"base\": {\"corpus\": \"synthetic\", "
		 "\"d_model\": 16, \"n_heads\": 2, \"d_ff\": 32, \"seq_len\": "
		 "8, \"batch_size\": 2, \"layers\": 2, \"steps\": 4, "
		 "\"warmup_steps\": 1, \"eval_tokens\": 0, \"threads\": 1, "
		 "\"out\": \"%s\"}, \"axes\": {\"impl\": [\"deqbench\", "
		 "\"pytorch\"]}}",
		 out);
	cli_write_text(suite, text);
	write_child_record();
	const char *args[] = {"suite", suite, NULL};
	cr_assert_eq(cli_run(args, 0, err, sizeof(err)), 0, "%s", err);
	recs = records();
	cr_assert_eq(json_array_size(recs), 2);
	cr_assert_str_eq(str_at(json_array_get(recs, 0), "impl", NULL),
			 "deqbench");
	cr_assert_str_eq(str_at(json_array_get(recs, 1), "impl", NULL),
			 "pytorch-0.0+fake");
	cr_assert_str_eq(str_at(json_array_get(recs, 1), "suite", "name"),
			 "peer");
	/* the check saw exactly the pytorch run */
	{
		json_t *chk = load_json("check.json");
		cr_assert_eq(json_array_size(chk), 1);
		cr_assert_str_eq(json_string_value(json_object_get(
				     json_array_get(chk, 0), "impl")),
				 "pytorch");
		json_decref(chk);
	}
	ms = json_real_value(json_object_get(
	    json_object_get(json_object_get(json_array_get(recs, 0), "timing"),
			    "step_ms"),
	    "median"));
	cr_assert(ms > 0);
	snprintf(want, sizeof(want), "| %.2f | 1000.00 | %.2f |", ms,
		 1000.0 / ms);
	json_decref(recs);
	const char *rargs[] = {"report", "--format", "md", out, NULL};
	cr_assert_eq(cli_run(rargs, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(text, sizeof(text), "stdout.txt");
	stdout_text = cli_read(text, NULL);
	cr_assert(strstr(stdout_text, "| pytorch step ms |"), "%s",
		  stdout_text);
	cr_assert(strstr(stdout_text, want), "want %s in %s", want,
		  stdout_text);
	free(stdout_text);
}

/* A training child is always asked for its trace (config trace=true in
 * the request), so that deqbench judges the run's health (health.h) from
 * its per-step losses and norms; with the user's trace=false the record
 * keeps the health and leaves the trace out, as its config says. */
Test(impl, health_from_the_childs_trace, .init = fake_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char out[600], err[4096], arg[700];
	json_t *r, *req, *recs;
	/* the same tiny run twice: argv[1] is trace=true for the reference
	 * record the stand-in child prints, then impl=pytorch */
	const char *argv[] = {"run",
			      "trace=true",
			      "corpus=synthetic",
			      "d_model=16",
			      "n_heads=2",
			      "d_ff=32",
			      "seq_len=8",
			      "batch_size=2",
			      "layers=3",
			      "threads=1",
			      "eval_warmup=0",
			      "steps=3",
			      "warmup_steps=1",
			      "eval_tokens=32",
			      arg,
			      NULL};
	cli_path(out, sizeof(out), "traced.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 0, "%s", err);
	r = fake_first_record("traced.jsonl");
	cr_assert(json_is_object(json_object_get(r, "trace")));
	json_object_set_new(r, "impl", json_string("pytorch-0.0+fake"));
	json_object_set_new(r, "health", json_null()); /* deqtorch gives none */
	fake_write_record("child.json", r);
	json_decref(r);

	cli_path(out, sizeof(out), "out.jsonl");
	snprintf(arg, sizeof(arg), "out=%s", out);
	argv[1] = "impl=pytorch";
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 0, "%s", err);
	req = load_json("request.json");
	cr_assert(json_is_true(
		      json_object_get(json_object_get(req, "config"), "trace")),
		  "the child was not asked for its trace");
	recs = records();
	r = json_array_get(recs, 0);
	cr_assert(json_is_false(
	    json_object_get(json_object_get(r, "config"), "trace")));
	cr_assert(json_is_null(json_object_get(r, "trace")),
		  "trace=false but the record has a trace");
	cr_assert_str_eq(str_at(r, "health", "verdict"), "healthy");
	cr_assert_eq(json_integer_value(json_object_get(
			 json_object_get(r, "health"), "steps")),
		     3);
	json_decref(recs);
	json_decref(req);
}
