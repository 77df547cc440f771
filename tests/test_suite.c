/* test_suite.c — suite files (bench/suite/suite.c) and the suite command
 * (bench/cmd/cmd_suite.c): expansion of the axes in product order over the
 * base, exclusions, repeats, variant groups and command-line overrides, bad
 * suites (a name that is a path among them), shards that partition the
 * runs, the "command" member, duplicate runs collapsed by the run identity
 * (a data_dir axis over file corpora is several runs), and `deqbench suite`
 * end to end (--dry-run, two shards: every run once; a data_dir axis over
 * two corpora: both run), and the order runs run in (round-robin across
 * configurations by default, "axes", "random" with its seed: expansion and
 * the --dry-run listing). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../methods/checkpoint.h"
#include "../methods/deq.h"
#include "record.h"
#include "suite.h"
#include "test_bench_util.h"
#include "test_cli.h"

static int expand(struct suite *s, const char *text, int n_over,
		  char *const *over, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root = json_loads(text, 0, &je);
	int rc;
	cr_assert_not_null(root, "%s", je.text);
	rc = suite_expand(s, root, "t.json", n_over, over, err, errlen);
	json_decref(root);
	return rc;
}

Test(suite, product_order_and_base)
{
	struct suite s;
	char err[512];
	cr_assert_eq(
	    expand(&s,
		   "{\"name\":\"t\",\"base\":{\"steps\":7,\"warmup_steps\":1},"
		   "\"axes\":{\"method\":[\"unroll\",\"checkpoint\","
		   "\"deq\"],\"layers\":[4,8]}}",
		   0, NULL, err, sizeof(err)),
	    0, "%s", err);
	cr_assert_eq(s.n_runs, 6);
	cr_assert_str_eq(s.name, "t");
	/* first axis slowest */
	cr_assert_eq(s.runs[0].cfg.method.method, method_kind_parse("unroll"));
	cr_assert_eq(s.runs[0].cfg.method.layers, 4);
	cr_assert_eq(s.runs[1].cfg.method.layers, 8);
	cr_assert_eq(s.runs[2].cfg.method.method, checkpoint_kind());
	cr_assert_eq(s.runs[5].cfg.method.method, deq_kind());
	for (int i = 0; i < 6; i++) {
		cr_assert_eq(s.runs[i].cfg.steps, 7);
		cr_assert_eq(s.runs[i].index, i);
	}
	suite_free(&s);
}

Test(suite, exclusions_repeats_groups_overrides)
{
	struct suite s;
	char err[512];
	char *over[] = {"steps=5", "warmup_steps=2"};
	cr_assert_eq(expand(&s,
			    "{\"axes\":{\"variant\":[{\"method\":\"unroll\"},"
			    "{\"method\":\"checkpoint\",\"k\":2},"
			    "{\"method\":\"deq\",\"f_solver\":\"anderson\"}],"
			    "\"layers\":[4,8]},"
			    "\"exclude\":[{\"method\":\"deq\",\"layers\":8},"
			    "{\"k\":2,\"layers\":4.0}],\"repeats\":3,"
			    "\"order\":\"axes\"}",
			    2, over, err, sizeof(err)),
		     0, "%s", err);
	/* 6 combos - (deq,8) - (checkpoint k=2, 4) = 4 combos, x3 */
	cr_assert_eq(s.n_runs, 12, "%d", s.n_runs);
	cr_assert_eq(s.runs[0].repeat, 0);
	cr_assert_eq(s.runs[2].repeat, 2);
	cr_assert_eq(s.runs[0].combo, s.runs[2].combo);
	cr_assert_eq(s.runs[6].cfg.method.method, checkpoint_kind());
	cr_assert_eq(checkpoint_config(&s.runs[6].cfg.method)->k, 2);
	cr_assert_eq(s.runs[6].cfg.method.layers, 8);
	cr_assert_eq(s.runs[9].cfg.method.method, deq_kind());
	cr_assert_eq(deq_config(&s.runs[9].cfg.method)->f_solver,
		     SOLVER_ANDERSON);
	cr_assert_eq(s.runs[9].cfg.method.layers, 4);
	for (int i = 0; i < s.n_runs; i++)
		cr_assert_eq(s.runs[i].cfg.steps, 5);
	suite_free(&s);
}

Test(suite, bad_suites)
{
	struct suite s;
	char err[512];
	cr_assert_eq(expand(&s, "{\"axes\":{\"lyers\":[1,2]}}", 0, NULL, err,
			    sizeof(err)),
		     -1);
	cr_assert(strstr(err, "layers"), "%s", err);
	cr_assert_eq(expand(&s, "{\"axes\":{\"layers\":[1,\"x\"]}}", 0, NULL,
			    err, sizeof(err)),
		     -1);
	cr_assert_eq(
	    expand(&s, "{\"axes\":{\"layers\":[]}}", 0, NULL, err, sizeof(err)),
	    -1);
	cr_assert_eq(expand(&s, "{\"axes\":{\"layers\":[1]},\"repeats\":0}", 0,
			    NULL, err, sizeof(err)),
		     -1);
	cr_assert_eq(expand(&s,
			    "{\"axes\":{\"layers\":[1]},\"exclude\":["
			    "{\"layers\":1}]}",
			    0, NULL, err, sizeof(err)),
		     -1);
	cr_assert(strstr(err, "excluded"), "%s", err);
	cr_assert_eq(expand(&s, "{\"bases\":{}}", 0, NULL, err, sizeof(err)),
		     -1);
}

Test(suite, shards_partition_runs)
{
	struct suite s;
	char err[512];
	int si, sn;
	cr_assert_eq(expand(&s,
			    "{\"axes\":{\"method\":[\"unroll\",\"checkpoint\","
			    "\"deq\"],\"layers\":[2,3,4,5,6,7,8]}}",
			    0, NULL, err, sizeof(err)),
		     0);
	cr_assert_eq(s.n_runs, 21);
	for (int n = 1; n <= 5; n++) {
		int count[21] = {0};
		for (int i = 0; i < n; i++)
			for (int r = 0; r < s.n_runs; r++)
				count[r] += suite_in_shard(r, i, n);
		for (int r = 0; r < s.n_runs; r++)
			cr_assert_eq(count[r], 1, "run %d in %d shards of %d",
				     r, count[r], n);
	}
	cr_assert_eq(suite_shard_parse("1/3", &si, &sn, err, sizeof(err)), 0);
	cr_assert(si == 1 && sn == 3);
	cr_assert_eq(suite_shard_parse("3/3", &si, &sn, err, sizeof(err)), -1);
	cr_assert_eq(suite_shard_parse("x", &si, &sn, err, sizeof(err)), -1);
	cr_assert_eq(suite_shard_parse("0/0", &si, &sn, err, sizeof(err)), -1);
	suite_free(&s);
}

/* "command" of a suite: "run" (default) or "eval"; anything else is
 * refused. */
Test(suite, command_member)
{
	struct suite s;
	char err[512];
	json_t *ok = json_loads("{\"command\": \"eval\", \"base\": "
				"{\"params\": \"p.safetensors\", \"method\": "
				"\"deq\"}, \"axes\": {\"f_tol\": [0.1, 0.01]}}",
				0, NULL);
	json_t *bad =
	    json_loads("{\"command\": \"train\", \"axes\": {}}", 0, NULL);
	cr_assert_eq(suite_expand(&s, ok, "s.json", 0, NULL, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(s.eval, 1);
	cr_assert_eq(s.n_runs, 2);
	suite_free(&s);
	cr_assert_eq(suite_expand(&s, bad, "s.json", 0, NULL, err, sizeof(err)),
		     -1);
	cr_assert(strstr(err, "command"), "%s", err);
	json_decref(ok);
	json_decref(bad);
}

Test(cli, suite_dry_run_and_shards, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char suite_p[512], out[512], arg[600], err[4096];
	json_t *arr = json_array();
	cli_path(suite_p, sizeof(suite_p), "s.json");
	cli_path(out, sizeof(out), "s.jsonl");
	cli_write_text(
	    suite_p, "{\"name\":\"t\",\"base\":{\"corpus\":\"synthetic\","
		     "\"d_model\":16,\"n_heads\":2,\"d_ff\":32,\"seq_len\":8,"
		     "\"batch_size\":4,\"steps\":3,\"warmup_steps\":1,"
		     "\"eval_tokens\":32,\"threads\":1},"
		     "\"axes\":{\"method\":[\"unroll\",\"checkpoint\",\"deq\"],"
		     "\"layers\":[2,4]},\"exclude\":[{\"method\":\"deq\","
		     "\"layers\":4}]}");
	snprintf(arg, sizeof(arg), "out=%s", out);
	{
		const char *a[] = {"suite", suite_p, "--dry-run", arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	{
		const char *a[] = {"suite", suite_p, "--shard",
				   "0/2",   arg,     NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	{
		const char *a[] = {"suite", suite_p, "--shard",
				   "1/2",   arg,     NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0);
	cr_assert_eq(json_array_size(arr), 5);
	{
		int seen[5] = {0};
		size_t i;
		json_t *r;
		json_array_foreach(arr, i, r)
		{
			int idx = (int)json_integer_value(json_object_get(
			    json_object_get(r, "suite"), "index"));
			cr_assert(idx >= 0 && idx < 5);
			seen[idx]++;
		}
		for (int k = 0; k < 5; k++)
			cr_assert_eq(seen[k], 1, "run %d ran %d times", k,
				     seen[k]);
	}
	json_decref(arr);
}

/* G1: the collapse of duplicate runs uses the run identity
 * (record_run_identity): for a corpus read from disk, data_dir names the
 * dataset, so two directories are two runs, while one directory spelt
 * three ways ("dA", "./dA", "dA/") is one run, as --resume and report see
 * it; with corpus=synthetic data_dir reads nothing and stays out. */
Test(suite, data_dir_axis_collapse_follows_the_identity)
{
	struct suite s;
	char err[512];
	cr_assert_eq(expand(&s,
			    "{\"base\":{\"corpus\":\"text\"},\"axes\":"
			    "{\"data_dir\":[\"dA\",\"dB\"]}}",
			    0, NULL, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(s.n_runs, 2, "two corpora collapsed: %s",
		     s.collapsed_note);
	cr_assert_eq(s.n_collapsed, 0);
	suite_free(&s);
	cr_assert_eq(expand(&s,
			    "{\"base\":{\"corpus\":\"text\"},\"axes\":"
			    "{\"data_dir\":[\"dA\",\"./dA\",\"dA/\"]}}",
			    0, NULL, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(s.n_runs, 1);
	cr_assert_eq(s.n_collapsed, 2);
	cr_assert(strstr(s.collapsed_note, "same directory") &&
		      !strstr(s.collapsed_note, "output key"),
		  "%s", s.collapsed_note);
	suite_free(&s);
	cr_assert_eq(expand(&s,
			    "{\"base\":{\"corpus\":\"synthetic\"},\"axes\":"
			    "{\"data_dir\":[\"dA\",\"dB\"]}}",
			    0, NULL, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(s.n_runs, 1);
	suite_free(&s);
}

/* G1 end to end: a suite whose data_dir axis names two text corpora (other
 * vocabularies) runs on both and appends a record for each. */
Test(cli, suite_data_dir_axis_runs_every_corpus, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char da[512], db[512], sp[512], out[512], text[2048], err[4096];
	json_t *arr = json_array(), *r;
	size_t i;
	int seen_a = 0, seen_b = 0;
	cli_path(da, sizeof(da), "dA");
	cli_path(db, sizeof(db), "dB");
	cr_assert_eq(mkdir(da, 0755), 0);
	cr_assert_eq(mkdir(db, 0755), 0);
	write_word_corpus(da, "a", 14);
	write_word_corpus(db, "b", 30);
	cli_path(sp, sizeof(sp), "dd.json");
	cli_path(out, sizeof(out), "dd.jsonl");
	snprintf(text, sizeof(text),
		 "{\"name\":\"dd\",\"base\":{\"corpus\":\"text\","
		 "\"d_model\":16,\"n_heads\":2,\"d_ff\":32,\"seq_len\":8,"
		 "\"batch_size\":2,\"layers\":3,\"steps\":3,\"warmup_steps\":1,"
		 "\"eval_tokens\":64,\"threads\":1,\"out\":\"%s\"},"
		 "\"axes\":{\"data_dir\":[\"%s\",\"%s\"]}}",
		 out, da, db);
	cli_write_text(sp, text);
	const char *a[] = {"suite", sp, NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(!strstr(err, "collapsed"), "%s", err);
	cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(json_array_size(arr), 2);
	json_array_foreach(arr, i, r)
	{
		const char *d = json_string_value(
		    json_object_get(json_object_get(r, "config"), "data_dir"));
		cr_assert_str_eq(
		    json_string_value(json_object_get(r, "status")), "ok");
		seen_a += d && !strcmp(d, da);
		seen_b += d && !strcmp(d, db);
	}
	cr_assert(seen_a == 1 && seen_b == 1, "dA %d, dB %d", seen_a, seen_b);
	json_decref(arr);
}

/* G21: a suite's name is what scripts/run.sh puts in
 * results/local/NAME.jsonl, so a name that is a path ("../x", "a/b", "..")
 * is refused; a plain name with dots and dashes is fine. */
Test(suite, name_is_not_a_path)
{
	static const char *const bad[] = {"../x", "a/b", "/tmp/x", "..",
					  ".",	  "",	 "a\\\\b"};
	struct suite s;
	char err[512], text[256];
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		snprintf(text, sizeof(text),
			 "{\"name\":\"%s\",\"axes\":{\"layers\":[2]}}", bad[i]);
		cr_assert_eq(expand(&s, text, 0, NULL, err, sizeof(err)), -1,
			     "name %s accepted", bad[i]);
		cr_assert(strstr(err, "t.json: name") && !strchr(err, '\n'),
			  "%s", err);
	}
	cr_assert_eq(expand(&s,
			    "{\"name\":\"eps-infer_2.v1\",\"axes\":"
			    "{\"layers\":[2]}}",
			    0, NULL, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_str_eq(s.name, "eps-infer_2.v1");
	suite_free(&s);
}

/* G21 through the binary: exit 2 and one line, nothing run. */
Test(cli, suite_name_with_a_path_exits_2, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	char sp[512], out[512], arg[600], err[4096];
	cli_path(sp, sizeof(sp), "s.json");
	cli_path(out, sizeof(out), "r.jsonl");
	cli_write_text(sp, "{\"name\":\"../../escape\",\"base\":{\"corpus\":"
			   "\"synthetic\",\"d_model\":16,\"n_heads\":2,"
			   "\"d_ff\":32,\"seq_len\":8,\"batch_size\":2,"
			   "\"layers\":3,\"steps\":2,\"warmup_steps\":1,"
			   "\"eval_tokens\":16,\"threads\":1},\"axes\":{}}");
	snprintf(arg, sizeof(arg), "out=%s", out);
	const char *a[] = {"suite", sp, arg, NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(!cli_exists(out), "a refused suite ran");
	cr_assert(strstr(err, "name") &&
		      strchr(err, '\n') == strrchr(err, '\n'),
		  "%s", err);
}

/* The runs' (seed, repeat, method, layers) in order, one line each. */
static void order_text(const struct suite *s, char *buf, size_t n)
{
	size_t l = 0;
	buf[0] = 0;
	for (int i = 0; i < s->n_runs && l < n; i++) {
		const struct suite_run *r = &s->runs[i];
		cr_assert_eq(r->index, i);
		l += (size_t)snprintf(buf + l, n - l, "%d %d %s %d\n",
				      (int)r->cfg.model.seed, r->repeat,
				      method_kind_name(r->cfg.method.method),
				      r->cfg.method.layers);
	}
}

#define ORDER_AXES                                                             \
	"\"method\":[\"unroll\",\"checkpoint\"],\"seed\":[1,2,3],"             \
	"\"layers\":[2,4]"

/* Round-robin (the default): round k holds the k-th run of every
 * configuration, configurations in the axes' order; repeats slowest, then
 * seeds, wherever the seed axis stands among the axes. */
Test(suite, order_round_robin_by_default)
{
	static const char *const cfgs[] = {"unroll 2", "unroll 4",
					   "checkpoint 2", "checkpoint 4"};
	struct suite s, t;
	char err[512], a[4096], b[4096];
	cr_assert_eq(expand(&s, "{\"axes\":{" ORDER_AXES "},\"repeats\":2}", 0,
			    NULL, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(s.order, SUITE_ORDER_ROUND_ROBIN);
	cr_assert_eq(s.n_runs, 24);
	for (int i = 0; i < 24; i++) {
		const struct suite_run *r = &s.runs[i];
		char c[64];
		snprintf(c, sizeof(c), "%s %d",
			 method_kind_name(r->cfg.method.method),
			 r->cfg.method.layers);
		cr_assert_eq(r->repeat, i / 12, "run %d", i);
		cr_assert_eq((int)r->cfg.model.seed, i / 4 % 3 + 1, "run %d",
			     i);
		cr_assert_str_eq(c, cfgs[i % 4], "run %d", i);
	}
	/* the seed axis first or last: the same order */
	cr_assert_eq(
	    expand(&t,
		   "{\"axes\":{\"seed\":[1,2,3],\"method\":[\"unroll\","
		   "\"checkpoint\"],\"layers\":[2,4]},\"repeats\":2}",
		   0, NULL, err, sizeof(err)),
	    0, "%s", err);
	order_text(&s, a, sizeof(a));
	order_text(&t, b, sizeof(b));
	cr_assert_str_eq(a, b);
	suite_free(&s);
	suite_free(&t);
}

/* "axes": the product, first axis slowest, repeats in a row; "random" with
 * order_seed: one permutation per seed, reproducible; bad order members
 * refused. */
Test(suite, order_axes_and_random)
{
	struct suite ax, r1, r2, r3;
	char err[512], a[4096], b[4096], c[4096];
	cr_assert_eq(expand(&ax,
			    "{\"axes\":{" ORDER_AXES "},\"repeats\":2,"
			    "\"order\":\"axes\"}",
			    0, NULL, err, sizeof(err)),
		     0, "%s", err);
	for (int i = 0; i < 24; i++) {
		cr_assert_eq(ax.runs[i].combo, i / 2);
		cr_assert_eq(ax.runs[i].repeat, i % 2);
	}
	cr_assert_eq(ax.runs[11].cfg.model.seed, 3);
	cr_assert_eq(ax.runs[12].cfg.method.method, checkpoint_kind());
	for (int k = 0; k < 2; k++)
		cr_assert_eq(expand(k ? &r2 : &r1,
				    "{\"axes\":{" ORDER_AXES "},\"repeats\":2,"
				    "\"order\":\"random\",\"order_seed\":7}",
				    0, NULL, err, sizeof(err)),
			     0, "%s", err);
	cr_assert_eq(expand(&r3,
			    "{\"axes\":{" ORDER_AXES "},\"repeats\":2,"
			    "\"order\":\"random\",\"order_seed\":8}",
			    0, NULL, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(r1.order_seed, 7);
	order_text(&r1, a, sizeof(a));
	order_text(&r2, b, sizeof(b));
	cr_assert_str_eq(a, b, "one seed, one order");
	order_text(&r3, c, sizeof(c));
	cr_assert_str_neq(a, c, "another seed, another order");
	{ /* a permutation of the runs */
		int seen[24] = {0};
		for (int i = 0; i < 24; i++)
			seen[r1.runs[i].combo * 2 + r1.runs[i].repeat]++;
		for (int i = 0; i < 24; i++)
			cr_assert_eq(seen[i], 1);
	}
	order_text(&ax, b, sizeof(b));
	cr_assert_str_neq(a, b);
	suite_free(&ax);
	suite_free(&r1);
	suite_free(&r2);
	suite_free(&r3);
	static const char *const bad[] = {
	    "{\"order\":\"random\"}", "{\"order_seed\":3}",
	    "{\"order\":\"shuffled\"}",
	    "{\"order\":\"random\",\"order_seed\":-1}",
	    "{\"order\":\"random\",\"order_seed\":1.5}"};
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(expand(&ax, bad[i], 0, NULL, err, sizeof(err)), -1,
			     "%s", bad[i]);
		cr_assert(strstr(err, "order"), "%s", err);
	}
}

/* --dry-run lists the runs in the order they run, and names it; the
 * listing of a random order is the same from one call to the next. */
Test(cli, suite_dry_run_lists_the_order, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	static const char *const orders[] = {"", ",\"order\":\"axes\"",
					     ",\"order\":\"random\","
					     "\"order_seed\":5"};
	static const char *const first_lines[] = {
	    "   0  seed=1 method=unroll k=0\n"
	    "   1  seed=1 method=checkpoint k=3\n"
	    "   2  seed=2 method=unroll k=0\n",
	    "   0  seed=1 method=unroll k=0\n   1  seed=2 method=unroll k=0\n",
	    NULL};
	static const char *const last[] = {"order round-robin)", "order axes)",
					   "order random order_seed=5)"};
	char suite_p[512], out_p[512], text[1024], err[4096], *o, *again;
	cli_path(suite_p, sizeof(suite_p), "s.json");
	cli_path(out_p, sizeof(out_p), "stdout.txt");
	for (int k = 0; k < 3; k++) {
		const char *a[] = {"suite", suite_p, "--dry-run", NULL};
		snprintf(text, sizeof(text),
			 "{\"name\":\"o\",\"base\":{\"corpus\":\"synthetic\"},"
			 "\"axes\":{\"method\":[\"unroll\",\"checkpoint\"],"
			 "\"seed\":[1,2,3]}%s}",
			 orders[k]);
		cli_write_text(suite_p, text);
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
		o = cli_read(out_p, NULL);
		cr_assert(strstr(o, last[k]), "%s", o);
		if (first_lines[k])
			cr_assert(
			    !strncmp(o, first_lines[k], strlen(first_lines[k])),
			    "%s", o);
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
		again = cli_read(out_p, NULL);
		cr_assert_str_eq(o, again);
		free(o);
		free(again);
	}
}
