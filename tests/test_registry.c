/*
 * test_registry.c — the registries as the one source of every per-kind
 * list:
 *
 *   - models (models/registry.c): every entry complete and named once, the
 *     names round-trip through model_kind_parse / model_kind_name at their
 *     enum model_kind indices, model_kind_list gives the `model` key's
 *     allowed values (and cuts to fit), and every kind builds a shape-only
 *     model whose sizes follow its entry;
 *   - methods (methods/registry.c): every entry complete and named once,
 *     method_kind_list joins the names; method_label, the one label of a
 *     method (summary line, record's method.label, report rows), and
 *     method_candidate, the settings `deqbench plan` tries, for every
 *     registered method;
 *   - records: `deqbench run` of every method writes method.label and
 *     prints it in its summary line; report rows prefer it and, for records
 *     made before it, make the same text;
 *   - the enum keys corpus, device and impl: their values are the data
 *     layer's corpora and the backends' names, records keep the strings;
 *   - bench-block parses its keys with the config code (its preset).
 *
 * Expected lists are built from the registries, never written here.
 */
#include "methods/method.h"
#include "methods/method_impl.h"
#include "models/model.h"
#include "models/model_impl.h"

#include <criterion/criterion.h>
#include <string.h>

#include "config.h"
#include "data.h"
#include "record.h"
#include "report.h"
#include "test_cli.h"

Test(registry, entries_complete_and_unique)
{
	cr_assert_eq(model_kind_count(), model_registry_len);
	cr_assert_geq(model_registry_len, 3);
	for (int i = 0; i < model_registry_len; i++) {
		const struct model_def *d = model_registry[i];
		cr_assert_not_null(d, "entry %d", i);
		cr_assert(d->name && d->name[0], "entry %d has no name", i);
		cr_assert(d->extent && d->block_specs && d->tape_elems &&
			      d->workspace_elems && d->forward && d->vjp &&
			      d->flops,
			  "%s lacks a required member", d->name);
		cr_assert(!d->inject_forward == !d->inject_backward,
			  "%s: inject_forward and inject_backward go together",
			  d->name);
		cr_assert(d->d_mult > 0 && d->u_mult > 0 && d->state_parts > 0,
			  "%s", d->name);
		cr_assert_eq(model_kind_parse(d->name), i, "%s", d->name);
		cr_assert_str_eq(model_kind_name((enum model_kind)i), d->name);
		for (int j = 0; j < i; j++)
			cr_assert(strcmp(model_registry[j]->name, d->name),
				  "%s registered twice", d->name);
	}
	cr_assert_eq(model_kind_parse("transformer"), MODEL_TRANSFORMER);
	cr_assert_eq(model_kind_parse("tanh_cell"), MODEL_TANH_CELL);
	cr_assert_eq(model_kind_parse("trellisnet"), MODEL_TRELLISNET);
	cr_assert_eq(model_kind_parse("lstm"), -1);
	cr_assert_eq(model_kind_parse(NULL), -1);
	cr_assert_str_eq(model_kind_name((enum model_kind) - 1), "?");
	cr_assert_str_eq(model_kind_name((enum model_kind)model_registry_len),
			 "?");
}

Test(registry, kind_list)
{
	char buf[256], want[256] = "", small[8];
	for (int i = 0; i < model_registry_len; i++) {
		strcat(want, i ? ", " : "");
		strcat(want, model_registry[i]->name);
	}
	model_kind_list(buf, sizeof(buf));
	cr_assert_str_eq(buf, want);
	model_kind_list(small, sizeof(small));
	cr_assert_eq(strncmp(small, want, 7), 0);
	cr_assert_eq(small[7], '\0');
	memset(small, 'x', sizeof(small));
	model_kind_list(small, 1);
	cr_assert_eq(small[0], '\0');
	model_kind_list(small, 0); /* writes nothing */
	cr_assert_eq(small[1], 'x');
}

/* d = d_mult d_model, U = u_mult d_model, E = d_model; the table has the
 * four injection tensors, the kind's block specs and the head. */
Test(registry, shapes_follow_the_entry)
{
	for (int i = 0; i < model_registry_len; i++) {
		const struct model_def *d = model_registry[i];
		struct model_config c = {
		    .kind = (enum model_kind)i,
		    .d_model = 8,
		    .n_heads = 2,
		    .d_ff = 12,
		    .seq_len = 5,
		    .batch_size = 3,
		    .vocab_size = 11,
		};
		struct backend stub = {.elem = sizeof(float)};
		struct model m;
		struct param_spec specs[MODEL_MAX_PARAMS];
		char err[256] = "";
		cr_assert_eq(model_shape(&m, &stub, &c, err, sizeof(err)), 0,
			     "%s: %s", d->name, err);
		cr_assert_eq(m.def, d);
		cr_assert_eq(m.d, d->d_mult * 8, "%s", d->name);
		cr_assert_eq(m.U, d->u_mult * 8, "%s", d->name);
		cr_assert_eq(m.E, 8, "%s", d->name);
		cr_assert_eq(m.state_parts, d->state_parts, "%s", d->name);
		cr_assert_eq(m.n_state, (size_t)15 * m.d, "%s", d->name);
		cr_assert_eq(m.n_params, 6 + d->block_specs(&c, specs), "%s",
			     d->name);
		cr_assert_str_eq(m.params[m.n_params - 2].name, "head.weight");
		cr_assert_eq(m.params[P_INJ_W].ndim, d->inject_kernel ? 3 : 2,
			     "%s", d->name);
	}
}

/* ------------------------------------------------------------ methods */

/* The registered methods' names joined by ", " into buf. */
static void method_names(char *buf, size_t n)
{
	size_t l = 0;
	buf[0] = 0;
	for (int i = 0; method_registry[i] && l < n; i++)
		l += (size_t)snprintf(buf + l, n - l, "%s%s", i ? ", " : "",
				      method_registry[i]->name);
}

Test(methods_registry, entries_complete_and_unique)
{
	char want[256];
	int n = method_kind_count();
	cr_assert_geq(n, 5);
	for (int i = 0; i < n; i++) {
		const struct method_desc *d = method_registry[i];
		cr_assert(d->name && d->name[0], "entry %d has no name", i);
		cr_assert(d->ops && d->ops->layout && d->ops->forward &&
			      d->ops->backward,
			  "%s lacks an op", d->name);
		cr_assert(!d->n_keys == !d->keys, "%s: keys and n_keys",
			  d->name);
		cr_assert_eq(method_kind_parse(d->name), i, "%s", d->name);
		cr_assert_str_eq(method_kind_name(i), d->name);
		for (int j = 0; j < i; j++)
			cr_assert(strcmp(method_registry[j]->name, d->name),
				  "%s registered twice", d->name);
	}
	method_names(want, sizeof(want));
	cr_assert_str_eq(method_kind_list(), want);
	cr_assert_eq(method_kind_parse("magic"), -1);
	cr_assert_str_eq(method_kind_name(n), "?");
}

/* The defaults of method k, resolved, with layers L. */
static struct method_config resolved(int k, int L)
{
	struct method_config c;
	method_config_defaults(&c);
	c.method = k;
	c.layers = L;
	method_config_resolve(&c);
	return c;
}

/* What the label says of the defaults, resolved: the depth and the
 * settings that set it (k = 0 → round(√16) = 4, slots = 0 → log2 16). */
Test(methods_registry, labels)
{
	static const struct {
		const char *method, *label;
	} want[] = {
	    {"unroll", "unroll L=16"},
	    {"checkpoint", "checkpoint L=16 k=4"},
	    {"revolve", "revolve L=16 slots=4"},
	    {"offload", "offload L=16"},
	    {"deq", "deq broyden/ift"},
	};
	char buf[128], small[8];
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct method_config c =
		    resolved(method_kind_parse(want[i].method), 16);
		method_label(&c, buf, sizeof(buf));
		cr_assert_str_eq(buf, want[i].label);
	}
	/* every registered method: its name first, then a space or the end;
	 * cut to fit */
	for (int k = 0; k < method_kind_count(); k++) {
		struct method_config c = resolved(k, 16);
		size_t l = strlen(method_kind_name(k));
		method_label(&c, buf, sizeof(buf));
		cr_assert_eq(strncmp(buf, method_kind_name(k), l), 0, "%s",
			     buf);
		cr_assert(buf[l] == 0 || (buf[l] == ' ' && buf[l + 1]), "%s",
			  buf);
		method_label(&c, small, sizeof(small));
		cr_assert_eq(strlen(small), strlen(buf) < 7 ? strlen(buf) : 7);
	}
}

/* Every registered method has plan candidates; each one's settings, over
 * the defaults with method=<name>, make a config that passes config_finish
 * and runs that method; each label starts with the method's name and
 * is unique. */
Test(methods_registry, plan_candidates)
{
	struct bench_config base;
	char err[512], seen[256][64];
	int n_seen = 0;
	config_defaults(&base);
	base.method.layers = 6;
	cr_assert_eq(config_finish(&base, err, sizeof(err)), 0, "%s", err);
	for (int k = 0; k < method_kind_count(); k++) {
		struct method_candidate mc;
		int i = 0;
		if (method_kind_needs_managed(k))
			continue; /* refused off device=cuda: the gpu tests */
		for (; method_candidate(k, &base.method, i, &mc); i++) {
			struct bench_config c = base;
			const char *name = method_kind_name(k);
			c.method.resolved = 0;
			cr_assert_eq(
			    config_set(&c, "method", name, err, sizeof(err)),
			    0);
			for (int j = 0; j < mc.n_keys; j++)
				cr_assert_eq(config_set(&c, mc.key[j],
							mc.value[j], err,
							sizeof(err)),
					     0, "%s: %s", mc.label, err);
			cr_assert_eq(config_finish(&c, err, sizeof(err)), 0,
				     "%s: %s", mc.label, err);
			cr_assert_eq(c.method.method, k);
			cr_assert_eq(strncmp(mc.label, name, strlen(name)), 0,
				     "%s", mc.label);
			for (int s = 0; s < n_seen; s++)
				cr_assert_str_neq(seen[s], mc.label);
			cr_assert_lt(n_seen, 256);
			snprintf(seen[n_seen++], 64, "%s", mc.label);
		}
		cr_assert_geq(i, 1, "%s has no candidate", method_kind_name(k));
	}
	cr_assert_eq(method_candidate(-1, &base.method, 0, NULL), 0);
	cr_assert_eq(
	    method_candidate(method_kind_count(), &base.method, 0, NULL), 0);
}

/* ------------------------------------------------------------ records */

#define TINY                                                                   \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=32", "seq_len=8", \
	    "batch_size=2", "layers=3", "steps=3", "warmup_steps=1",           \
	    "lr_warmup=1", "eval_tokens=64", "threads=1"

/* The method label an older record shows in a report row:
 * report_rows of r without method.label. */
static void row_method(const json_t *r, char *buf, size_t n)
{
	json_t *a = json_array(), *rows;
	json_array_append(a, (json_t *)r);
	rows = report_rows(a);
	cr_assert_not_null(rows);
	snprintf(buf, n, "%s",
		 json_string_value(
		     json_object_get(json_array_get(rows, 0), "method")));
	json_decref(rows);
	json_decref(a);
}

/* `run` of every registered method: the record's method.label is
 * method_label of its config, the summary line prints it, a report row
 * shows it (another label in the record, that one) and, without it (an
 * older record), the same text from the other fields. */
Test(records, method_label_in_record_summary_and_report, .init = cli_setup,
     .fini = cli_teardown, .timeout = 300)
{
	/* the methods of records made before method.label */
	static const char *const old[] = {"unroll", "checkpoint", "deq",
					  "revolve", "offload"};
	for (int k = 0; k < method_kind_count(); k++) {
		char out[512], arg[600], m[64], err[4096], want[128], got[160],
		    sp[512];
		if (method_kind_needs_managed(k))
			continue; /* refused off device=cuda */
		struct bench_config c;
		json_t *arr = json_array(), *r, *meth;
		char *so;
		cli_path(out, sizeof(out), "r.jsonl");
		remove(out);
		snprintf(arg, sizeof(arg), "out=%s", out);
		snprintf(m, sizeof(m), "method=%s", method_kind_name(k));
		const char *a[] = {"run", TINY, m, arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(record_read_jsonl(out, arr, err, sizeof(err)), 0);
		r = json_array_get(arr, 0);
		config_defaults(&c);
		cr_assert_eq(config_apply_object(&c,
						 json_object_get(r, "config"),
						 "record", err, sizeof(err)),
			     0, "%s", err);
		cr_assert_eq(config_finish(&c, err, sizeof(err)), 0);
		method_label(&c.method, want, sizeof(want));
		meth = json_object_get(r, "method");
		cr_assert_str_eq(
		    json_string_value(json_object_get(meth, "label")), want);
		cli_path(sp, sizeof(sp), "stdout.txt");
		so = cli_read(sp, NULL);
		snprintf(got, sizeof(got), "ok: transformer %s on synthetic",
			 want);
		cr_assert(so && strstr(so, got), "no '%s' in:\n%s", got, so);
		free(so);
		json_object_set_new(meth, "label", json_string("custom words"));
		row_method(r, got, sizeof(got));
		cr_assert_str_eq(got, "custom words");
		json_object_del(meth, "label");
		row_method(r, got, sizeof(got));
		for (size_t i = 0; i < sizeof(old) / sizeof(old[0]); i++)
			if (!strcmp(old[i], method_kind_name(k)))
				cr_assert_str_eq(got, want);
		json_decref(arr);
	}
}

/* ---------------------------------------------------------- enum keys */

/* corpus, device and impl are enum rows: every value parses and goes into
 * the record as the same string; an unknown one is refused with the list;
 * the corpora are those the data layer knows, the devices include every
 * backend this build has. */
Test(enum_keys, corpus_device_impl)
{
	static const struct {
		const char *key;
		const char *(*name)(int);
	} keys[] = {{"corpus", corpus_kind_name},
		    {"device", config_device_name},
		    {"impl", config_impl_name}};
	char err[512];
	for (size_t i = 0; i < 3; i++) {
		char list[256] = "", want[400];
		for (int v = 0; strcmp(keys[i].name(v), "?"); v++) {
			struct bench_config c;
			json_t *j;
			config_defaults(&c);
			cr_assert_eq(config_set(&c, keys[i].key,
						keys[i].name(v), err,
						sizeof(err)),
				     0, "%s", err);
			j = config_key_json(&c, keys[i].key);
			cr_assert_str_eq(json_string_value(j), keys[i].name(v));
			json_decref(j);
			strcat(list, v ? ", " : "");
			strcat(list, keys[i].name(v));
		}
		struct bench_config c;
		config_defaults(&c);
		cr_assert_eq(
		    config_set(&c, keys[i].key, "magic", err, sizeof(err)), -1);
		snprintf(want, sizeof(want),
			 "%s=magic is not a known value; use one of: %s",
			 keys[i].key, list);
		cr_assert_str_eq(err, want);
	}
	for (int k = 0; k < CORPUS_KINDS; k++) {
		int rc = corpus_check(corpus_kind_name(k), "/nonexistent", err,
				      sizeof(err));
		cr_assert(rc == 0 || !strstr(err, "unknown corpus"), "%s: %s",
			  corpus_kind_name(k), err);
		cr_assert_eq(corpus_kind_parse(corpus_kind_name(k)), k);
	}
	for (const char *const *b = backend_names; *b; b++)
		cr_assert_geq(config_device_parse(*b), 0, "device %s", *b);
	cr_assert_eq(config_device_parse("cuda"), DEVICE_CUDA);
}

/* --------------------------------------------------------- bench-block */

/* stdout of a tiny bench-block run with key=value arg (exit 0); free() it. */
static char *tiny_bench_block(const char *arg)
{
	char err[4096], p[512];
	const char *a[] = {"bench-block", "d_model=16", "n_heads=2",
			   "d_ff=32",	  "seq_len=8",	"batch_size=2",
			   "iters=2",	  "warmup=0",	"threads=1",
			   arg,		  NULL};
	cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s: %s", arg, err);
	cli_path(p, sizeof(p), "stdout.txt");
	char *so = cli_read(p, NULL);
	cr_assert_not_null(so);
	return so;
}

/* bench-block's keys go through the config code: run's messages, a
 * suggestion for a typo, run's keys it does not read refused; --help
 * prints the preset; a tiny run works. */
Test(bench_block, parses_with_the_config_code, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	static const struct {
		const char *arg, *want;
	} bad[] = {
	    {"lyers=3", "unknown key 'lyers'; did you mean 'layers'?"},
	    {"d_model=x", "d_model=x: expected an integer"},
	    {"iters=0", "iters=0 is out of range; use a value in [1, "},
	    {"device=gpu", "device=gpu is not a known value; use one of: "},
	    {"method=deq", "'method' is a key of deqbench run, not of "
			   "bench-block"},
	    {"n_heads=3", "d_model=128 is not divisible by n_heads=3"},
	};
	char err[4096], p[512], *so;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *a[] = {"bench-block", bad[i].arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 2, "%s",
			     bad[i].arg);
		cr_assert(strstr(err, bad[i].want), "%s: %s", bad[i].arg, err);
		cr_assert(!strchr(err, '\n') || strchr(err, '\n')[1] == 0,
			  "more than one line: %s", err);
	}
	{
		const char *a[] = {"bench-block", "--help", NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0);
		cli_path(p, sizeof(p), "stdout.txt");
		so = cli_read(p, NULL);
		cr_assert(so && strstr(so, " model=transformer d_model=128 "
					   "n_heads=4 d_ff=512 seq_len=64 "
					   "batch_size=16 layers=1 device=cpu "
					   "threads=0 seed=1 precision=fp32 "
					   "attention=unfused "
					   "epilogue=separate iters=20 "
					   "warmup=3 vocab=0\n"),
			  "%s", so);
		free(so);
	}
	/* the GEMM rows are the shapes model_gemm logged, with their counts:
	 * trellisnet's eight gate/tap GEMMs of one shape each way (N = 16,
	 * h = 16); any kind runs, tanh_cell's one GEMM each way too */
	so = tiny_bench_block("model=trellisnet");
	cr_assert(
	    strstr(so, "bench-block: model=trellisnet device=cpu") &&
		strstr(so, "\nfwd  A B^T x8              16     16     16 ") &&
		strstr(so, "\nvjp  A B x8                16     16     16 ") &&
		strstr(so, "\nvjp  A^T B x8              16     16     16 "),
	    "%s", so);
	free(so);
	so = tiny_bench_block("model=tanh_cell");
	cr_assert(
	    strstr(so, "bench-block: model=tanh_cell device=cpu") &&
		strstr(so, "\nvjp  A^T B                 16     16     16 "),
	    "%s", so);
	free(so);
	/* the transformer's non-GEMM ops, timed alone */
	so = tiny_bench_block("precision=bf16");
	cr_assert(strstr(so, "other ops (median ms): attention fwd ") &&
		      strstr(so, ", bf16 rounding of an (N,d) operand ") &&
		      strstr(so, "% of block time\n"),
		  "%s", so);
	free(so);
}
