/* test_record.c — the record of a run (bench/run/run_record.c, record.c): every
 * section present and typed against results/SCHEMA.md (check_record, one
 * function per section), records deterministic on the CPU, the learning-rate
 * schedule, head_chunk's saving, the two phases of a pretrained deq run, an
 * error record's shape, the summary table's converged columns, and the
 * statistics and JSONL appends of bench/records/record.c. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "data.h"
#include "record.h"
#include "report.h"
#include "runner.h"
#include "test_bench_util.h"
#include "test_cli.h"

/* The per-step converged flags of the trace: one bool per step, all false
 * without a solve, and their mean is the record's converged fraction. */
static void check_converged_trace(const json_t *r, const char *trace,
				  const char *solve)
{
	const json_t *a = at(r, trace), *v;
	const json_t *fr = json_object_get(at(r, solve), "converged_fraction");
	size_t i, n = 0;
	cr_assert(json_is_array(a), "%s", trace);
	cr_assert_eq(json_array_size(a),
		     json_array_size(at(r, "trace.fwd_residual")), "%s", trace);
	json_array_foreach(a, i, v)
	{
		cr_assert(json_is_boolean(v), "%s[%zu]", trace, i);
		n += json_is_true(v);
	}
	if (json_is_null(at(r, solve)))
		cr_assert_eq(n, 0, "%s without a solve", trace);
	else
		cr_assert_float_eq(json_number_value(fr),
				   (double)n / json_array_size(a), 1e-12, "%s",
				   trace);
}

/* ---- check_record: the sections of an ok record of tiny_config ---- */

/* schema, status, the documented shape, the run's dates and its config. */
static void check_status(const json_t *r)
{
	cr_assert_eq(json_integer_value(at(r, "schema")), 1);
	cr_assert_str_eq(json_string_value(at(r, "status")), "ok", "%s",
			 json_string_value(at(r, "message")));
	check_schema(r);
	STR(r, "started_at");
	STR(r, "finished_at");
	OBJ(r, "config");
	cr_assert_geq(json_object_size(at(r, "config")), 38);
}

/* data, model and method: the synthetic corpus of 50 words. */
static void check_data_model(const json_t *r)
{
	cr_assert_str_eq(json_string_value(at(r, "data.corpus")), "synthetic");
	cr_assert_eq(json_integer_value(at(r, "data.vocab_size")), 50);
	cr_assert_eq(json_integer_value(at(r, "model.vocab_size")), 50);
	cr_assert_eq(json_integer_value(at(r, "data.train_tokens")),
		     DATA_SYNTH_TRAIN);
	STR(r, "method.method");
	NUM(r, "method.k");
	NUM(r, "model.n_params");
	NUM(r, "model.vocab_size");
	cr_assert(json_is_array(at(r, "model.params")));
	OBJ(r, "data");
}

/* timing: 4 timed steps (6 - 2 warm-up), their statistics positive. */
static void check_timing(const json_t *r)
{
	static const char *const st[] = {"median", "mean", "p10", "p90",
					 "min",	   "max",  NULL};
	NUM(r, "timing.steps_timed");
	cr_assert_eq(json_integer_value(at(r, "timing.steps_timed")), 4);
	for (int i = 0; st[i]; i++) {
		char p[128];
		snprintf(p, sizeof(p), "timing.step_ms.%s", st[i]);
		NUM(r, p);
		cr_assert_gt(json_number_value(at(r, p)), 0);
	}
	NUM(r, "timing.forward_ms.median");
	NUM(r, "timing.backward_ms.median");
	NUM(r, "timing.tokens_per_s");
	NUM(r, "timing.train_s");
	NUM(r, "timing.setup_s");
	NUM(r, "timing.eval_s");
}

/* memory: every category's peak and setup bytes, no pool on the CPU. */
static void check_memory(const json_t *r)
{
	static const char *const cats[] = {"params",	"depth", "solver",
					   "optimizer", "grads", "head",
					   "workspace", NULL};
	cr_assert(json_is_null(at(r, "memory.pool")), "no pool on the CPU");
	for (int i = 0; cats[i]; i++) {
		char p[128];
		snprintf(p, sizeof(p), "memory.peak_bytes.%s", cats[i]);
		NUM(r, p);
		snprintf(p, sizeof(p), "memory.setup_live_bytes.%s", cats[i]);
		NUM(r, p);
	}
	NUM(r, "memory.peak_depth_solver_bytes");
	cr_assert_gt(json_integer_value(at(r, "memory.peak_total_bytes")), 0);
	NUM(r, "memory.setup_live_total_bytes");
	cr_assert_gt(json_integer_value(at(r, "memory.max_rss_bytes")), 0);
}

/* solver: host reads and the forward solve's statistics for deq only. */
static void check_solver(const json_t *r, int deq)
{
	/* unroll and checkpoint read nothing back; deq reads residuals */
	if (deq)
		cr_assert_gt(
		    json_number_value(at(r, "solver.host_reads_per_step")), 0);
	else
		cr_assert_eq(
		    json_number_value(at(r, "solver.host_reads_per_step")), 0);
	OBJ(r, "solver");
	if (deq) {
		NUM(r, "solver.forward.iters_mean");
		NUM(r, "solver.forward.iters_max");
		NUM(r, "solver.forward.residual_mean");
		NUM(r, "solver.forward.residual_max");
		NUM(r, "solver.forward.converged_fraction");
	} else {
		cr_assert(json_is_null(at(r, "solver.forward")));
	}
}

/* evals and quality: counts, losses, perplexities, tokens. */
static void check_evals_quality(const json_t *r)
{
	NUM(r, "evals.forward_evals_per_step");
	NUM(r, "evals.forward_evals_total");
	NUM(r, "evals.vjp_evals_per_step");
	NUM(r, "evals.vjp_evals_total");
	cr_assert_gt(json_number_value(at(r, "evals.forward_evals_per_step")),
		     0);
	NUM(r, "quality.train_loss_final");
	NUM(r, "quality.train_loss_first");
	NUM(r, "quality.valid_ppl");
	NUM(r, "quality.test_ppl");
	NUM(r, "quality.valid_loss");
	cr_assert_eq(json_integer_value(at(r, "quality.valid_eval_tokens")),
		     64);
	cr_assert_eq(json_integer_value(at(r, "quality.tokens_trained")),
		     6 * 4 * 8);
	/* exp of a mean loss; a untrained model on 50 tokens is near 50 */
	cr_assert(json_number_value(at(r, "quality.valid_ppl")) > 1 &&
		  json_number_value(at(r, "quality.valid_ppl")) < 500);
}

/* host, device and build (bench/records/env.c): no tf32 or local CPUs on the CPU. */
static void check_env(const json_t *r)
{
	cr_assert(json_is_null(at(r, "device.tf32")));
	cr_assert(json_is_null(at(r, "device.local_cpus")));
	STR(r, "host.hostname");
	NUM(r, "host.cores");
	NUM(r, "host.pus");
	OBJ(r, "host.os");
	STR(r, "device.name");
	STR(r, "build.version");
	STR(r, "build.git_commit");
	STR(r, "build.compiler");
	STR(r, "build.blas");
	STR(r, "build.flags");
	STR(r, "build.fingerprint");
	cr_assert_eq(strlen(json_string_value(at(r, "build.fingerprint"))), 16);
}

/* trace: one entry per step (6), the converged flags per solve. */
static void check_trace(const json_t *r)
{
	cr_assert(json_is_array(at(r, "trace.loss")));
	cr_assert_eq(json_array_size(at(r, "trace.loss")), 6);
	cr_assert(json_is_array(at(r, "trace.step_ms")));
	cr_assert(json_is_array(at(r, "trace.fwd_iters")));
	cr_assert(json_is_array(at(r, "trace.last_fwd_residual_trace")));
	check_converged_trace(r, "trace.fwd_converged", "solver.forward");
	check_converged_trace(r, "trace.bwd_converged", "solver.backward");
}

/* An ok record of tiny_config, section by section; deq: the method
 * solves. */
static void check_record(const json_t *r, int deq)
{
	check_status(r);
	check_data_model(r);
	check_timing(r);
	check_memory(r);
	check_solver(r, deq);
	check_evals_quality(r);
	check_env(r);
	check_trace(r);
}

Test(record, fields_present_and_typed, .timeout = 120)
{
	const char *methods[] = {"unroll", "checkpoint", "deq"};
	for (int i = 0; i < 3; i++) {
		struct bench_config c;
		json_t *r = NULL;
		struct run_meta meta = {.quiet = 1};
		tiny_config(&c, methods[i]);
		cr_assert_eq(runner_run(&c, &meta, &r), RUN_OK, "%s: %s",
			     methods[i],
			     json_string_value(json_object_get(r, "message")));
		check_record(r, i == 2);
		json_decref(r);
	}
}

/* Drops what legitimately differs between two runs of one config:
 * wall-clock times, dates, RSS, and whether the corpus came from cache. */
static void drop_volatile(json_t *r)
{
	json_t *tr = json_object_get(r, "trace");
	json_object_del(r, "timing");
	json_object_del(r, "started_at");
	json_object_del(r, "finished_at");
	json_object_del(json_object_get(r, "memory"), "max_rss_bytes");
	json_object_del(json_object_get(r, "data"), "from_cache");
	json_object_del(tr, "step_ms");
	json_object_del(tr, "forward_ms");
	json_object_del(tr, "backward_ms");
	json_object_del(json_object_get(r, "inference"), "step_ms");
	json_object_del(json_object_get(r, "inference"), "tokens_per_s");
	json_object_del(json_object_get(r, "inference"), "eval_s");
}

Test(record, deterministic_on_cpu, .timeout = 120)
{
	const char *methods[] = {"checkpoint", "deq"};
	for (int i = 0; i < 2; i++) {
		struct bench_config c;
		json_t *a, *b;
		char *sa, *sb;
		struct run_meta meta = {.quiet = 1};
		tiny_config(&c, methods[i]);
		cr_assert_eq(runner_run(&c, &meta, &a), RUN_OK);
		cr_assert_eq(runner_run(&c, &meta, &b), RUN_OK);
		drop_volatile(a);
		drop_volatile(b);
		/* same seed, one thread: every loss, norm, residual, count
		 * and perplexity is bit-identical */
		sa = json_dumps(a, JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
		sb = json_dumps(b, JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
		cr_assert_str_eq(sa, sb, "%s: records differ", methods[i]);
		free(sa);
		free(sb);
		json_decref(a);
		json_decref(b);
	}
}

/* Linear warmup over lr_warmup steps, then cosine decay: with lr=1e-3,
 * lr_warmup=2, steps=6 the rates are 0.5, 1, then (1+cos(pi p))/2 for
 * p = 0, 1/4, 2/4, 3/4 (x 1e-3). */
Test(record, lr_schedule, .timeout = 60)
{
	struct bench_config c;
	json_t *r;
	struct run_meta meta = {.quiet = 1};
	const double want[6] = {0.5, 1,
				1,   0.5 * (1 + cos(M_PI / 4)),
				0.5, 0.5 * (1 + cos(3 * M_PI / 4))};
	tiny_config(&c, "unroll");
	cr_assert_eq(c.lr_warmup, 2);
	c.lr = 1e-3;
	cr_assert_eq(runner_run(&c, &meta, &r), RUN_OK);
	for (int i = 0; i < 6; i++)
		cr_assert_float_eq(
		    json_number_value(json_array_get(at(r, "trace.lr"), i)),
		    1e-3 * want[i], 1e-15, "step %d", i + 1);
	json_decref(r);
}

/* head_chunk=5 on the tiny run (N = 4·8 = 32 positions, V = 50): the
 * head's peak is (32 − 5)·50 floats smaller, the config says 5, and the
 * training loss and valid perplexity equal head_chunk=0's within 1e-5
 * relative (float rounding of the per-chunk sums only). deq runs on
 * tanh_cell, whose solves converge: the transformer's do not at this init,
 * and a backward solve stopped at its cap turns the rounding
 * into 1e-3 differences after a few steps. */
Test(record, head_chunk_saves_head_memory, .timeout = 120)
{
	const char *const cases[][2] = {{"unroll", "transformer"},
					{"checkpoint", "trellisnet"},
					{"deq", "tanh_cell"}};
	for (int i = 0; i < 3; i++) {
		struct bench_config c;
		json_t *r[2];
		char err[256];
		struct run_meta meta = {.quiet = 1};
		for (int k = 0; k < 2; k++) {
			tiny_config(&c, cases[i][0]);
			cr_assert_eq(config_set(&c, "model", cases[i][1], err,
						sizeof(err)),
				     0, "%s", err);
			c.model.head_chunk = k ? 5 : 0;
			cr_assert_eq(config_finish(&c, err, sizeof(err)), 0,
				     "%s", err);
			cr_assert_eq(runner_run(&c, &meta, &r[k]), RUN_OK);
			check_record(r[k], i == 2);
		}
		cr_assert_eq(json_integer_value(at(r[1], "config.head_chunk")),
			     5);
		cr_assert_eq(
		    json_integer_value(at(r[0], "memory.peak_bytes.head")) -
			json_integer_value(at(r[1], "memory.peak_bytes.head")),
		    (32 - 5) * 50 * (json_int_t)sizeof(float));
		const char *q[] = {"quality.valid_ppl",
				   "quality.train_loss_final"};
		for (int k = 0; k < 2; k++) {
			double a = json_number_value(at(r[0], q[k])),
			       b = json_number_value(at(r[1], q[k]));
			cr_assert(fabs(a - b) <= 1e-5 * fabs(a),
				  "%s %s: %.17g vs %.17g", cases[i][0], q[k], a,
				  b);
		}
		json_decref(r[0]);
		json_decref(r[1]);
	}
}

/* pretrain_steps: a tiny deq run (steps=6, warmup_steps=2) whose first 3
 * steps train the block unrolled 3 deep. The record gives both phases
 * apart: pretrain.* over steps 1-3 (3 forward and 3 VJP evaluations each,
 * 1 timed step after the phase's 2 warmup steps), timing/evals/solver over
 * the deq steps 4-6 only (timing: 6 - 3 - 2 = 1 step), residuals null in
 * the trace where there was no solve, and a depth peak that holds both
 * methods' buffers exactly (both are allocated in setup). The unrolled
 * steps are an unroll run with layers=3: on the CPU with threads=1 their
 * losses are bitwise those of method=unroll layers=3, and step 4's is not
 * (the solver took over). */
Test(record, deq_pretrain_phases, .timeout = 120)
{
	struct bench_config c, cu;
	json_t *r, *ru;
	char err[512];
	size_t db = 0, sb = 0;
	struct run_meta meta = {.quiet = 1};
	tiny_config(&c, "deq");
	cr_assert_eq(config_set(&c, "pretrain_steps", "3", err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(config_set(&c, "pretrain_layers", "3", err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(config_finish(&c, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(runner_run(&c, &meta, &r), RUN_OK, "%s",
		     json_string_value(json_object_get(r, "message")));
	check_schema(r);
	cr_assert_eq(json_integer_value(at(r, "pretrain.steps")), 3);
	cr_assert_eq(json_integer_value(at(r, "pretrain.layers")), 3);
	cr_assert_eq(json_integer_value(at(r, "pretrain.steps_done")), 3);
	cr_assert_eq(json_integer_value(at(r, "pretrain.steps_timed")), 1);
	cr_assert_gt(json_number_value(at(r, "pretrain.step_ms.median")), 0);
	cr_assert_gt(json_number_value(at(r, "pretrain.tokens_per_s")), 0);
	cr_assert_eq(
	    json_number_value(at(r, "pretrain.forward_evals_per_step")), 3);
	cr_assert_eq(json_number_value(at(r, "pretrain.vjp_evals_per_step")),
		     3);
	cr_assert_eq(json_integer_value(at(r, "timing.steps_timed")), 1);
	cr_assert_eq(json_integer_value(at(r, "evals.steps")), 3);
	cr_assert_eq(json_integer_value(at(r, "solver.forward.steps")), 3);
	cr_assert_eq(json_integer_value(at(r, "solver.backward.steps")), 3);
	/* a deq step: at least one solver iteration + the final f */
	cr_assert_geq(json_number_value(at(r, "evals.forward_evals_per_step")),
		      2);
	for (int i = 0; i < 6; i++) {
		const json_t *fr =
		    json_array_get(at(r, "trace.fwd_residual"), i);
		const json_t *fi = json_array_get(at(r, "trace.fwd_iters"), i);
		cr_assert(i < 3 ? json_is_null(fr) : json_is_number(fr),
			  "trace.fwd_residual[%d]", i);
		cr_assert(i < 3 ? json_number_value(fi) == 0
				: json_number_value(fi) >= 1,
			  "trace.fwd_iters[%d]", i);
	}
	/* memory: the unroll's depth is method_memory's, and the peak holds
	 * both methods */
	{
		struct backend *be;
		struct model *m;
		struct model_config mc = c.model;
		struct method_config pc = c.method;
		mc.vocab_size = 50;
		pc.method = method_kind_parse("unroll");
		pc.layers = 3;
		cr_assert_eq(backend_create(&be, "cpu", 1, err, sizeof(err)),
			     0);
		cr_assert_eq(model_create(&m, be, &mc, err, sizeof(err)), 0);
		cr_assert_eq(method_memory(m, &pc, &db, &sb, err, sizeof(err)),
			     0);
		model_destroy(m);
		backend_destroy(be);
	}
	cr_assert_eq(json_integer_value(at(r, "pretrain.depth_bytes")),
		     (json_int_t)db);
	cr_assert_eq(json_integer_value(at(r, "memory.peak_bytes.depth")),
		     json_integer_value(at(r, "memory.predicted_depth_bytes")) +
			 (json_int_t)db);

	/* the unrolled steps are method=unroll layers=3's, bitwise */
	tiny_config(&cu, "unroll");
	cr_assert_eq(config_set(&cu, "layers", "3", err, sizeof(err)), 0);
	cr_assert_eq(runner_run(&cu, &meta, &ru), RUN_OK);
	for (int i = 0; i < 4; i++) {
		double a =
		    json_number_value(json_array_get(at(r, "trace.loss"), i));
		double b =
		    json_number_value(json_array_get(at(ru, "trace.loss"), i));
		if (i < 3)
			cr_assert_eq(a, b,
				     "step %d: loss %.17g vs unroll %.17g",
				     i + 1, a, b);
		else
			cr_assert_neq(a, b, "step 4 is a deq step");
	}
	cr_assert(json_is_null(at(ru, "pretrain")));
	json_decref(r);
	json_decref(ru);
}

/* A run that fails in setup still gives a record of the documented shape. */
Test(record, error_record_matches_schema, .init = cli_setup,
     .fini = cli_teardown, .timeout = 60)
{
	struct bench_config c;
	json_t *r;
	char err[512];
	struct run_meta meta = {.quiet = 1};
	tiny_config(&c, "unroll");
	cr_assert_eq(config_set(&c, "corpus", "text", err, sizeof(err)), 0);
	cr_assert_eq(config_set(&c, "data_dir", cli_dir, err, sizeof(err)), 0);
	cr_assert_eq(runner_run(&c, &meta, &r), RUN_SETUP_FAILED);
	cr_assert_str_eq(json_string_value(at(r, "status")), "error");
	cr_assert(strstr(json_string_value(at(r, "message")), "train.txt"),
		  "%s", json_string_value(at(r, "message")));
	cr_assert(json_is_null(at(r, "timing")));
	check_schema(r);
	json_decref(r);
}

/* The summary table's converged columns: percentages of the records'
 * converged fractions (median over repeats), never rounded to 100.0% or
 * 0.0% unless exact; a dash where there is no solve (unroll, jfb's
 * backward). */
Test(record, summary_converged_columns)
{
	static const char *const recs[] = {
	    "{\"method\": \"deq\", \"f_solver\": \"broyden\", \"b_mode\": "
	    "\"ift\"} 0.9996 0.0004",
	    "{\"method\": \"deq\", \"f_solver\": \"anderson\", \"b_mode\": "
	    "\"jfb\"} 0.2 -1",
	    "{\"method\": \"deq\", \"f_solver\": \"anderson\", \"b_mode\": "
	    "\"jfb\"} 0.6 -1",
	    "{\"method\": \"deq\", \"f_solver\": \"anderson\", \"b_mode\": "
	    "\"jfb\"} 0.4 -1",
	    "{\"method\": \"deq\", \"f_solver\": \"fixed_point\", "
	    "\"b_mode\": \"ift\"} 1 0",
	    "{\"method\": \"unroll\", \"layers\": 4} -1 -1",
	    NULL};
	json_t *all = json_array();
	char *text = NULL;
	size_t len;
	FILE *f = open_memstream(&text, &len);
	for (int i = 0; recs[i]; i++) {
		json_error_t je;
		const char *sp = strchr(recs[i], '}') + 1;
		double fc = strtod(sp, (char **)&sp), bc = strtod(sp, NULL);
		json_t *r = json_object(), *sv = json_object();
		json_object_set_new(r, "status", json_string("ok"));
		json_object_set_new(
		    r, "config",
		    json_loadb(recs[i],
			       (size_t)(strchr(recs[i], '}') - recs[i] + 1), 0,
			       &je));
		json_object_set_new(
		    sv, "forward",
		    fc < 0 ? json_null()
			   : json_pack("{s:f}", "converged_fraction", fc));
		json_object_set_new(
		    sv, "backward",
		    bc < 0 ? json_null()
			   : json_pack("{s:f}", "converged_fraction", bc));
		json_object_set_new(r, "solver", sv);
		json_array_append_new(all, r);
	}
	record_summary(f, all);
	fclose(f);
	assert_cell(text, "deq broyden/ift", "fwd converged", "99.9%");
	assert_cell(text, "deq broyden/ift", "bwd converged", "0.1%");
	assert_cell(text, "deq anderson/jfb", "runs", "3");
	assert_cell(text, "deq anderson/jfb", "fwd converged", "40.0%");
	assert_cell(text, "deq anderson/jfb", "bwd converged", "-");
	assert_cell(text, "deq fixed_point/ift", "fwd converged", "100.0%");
	assert_cell(text, "deq fixed_point/ift", "bwd converged", "0.0%");
	assert_cell(text, "unroll", "fwd converged", "-");
	assert_cell(text, "unroll", "bwd converged", "-");
	free(text);
	json_decref(all);
}

Test(record, stats_and_append, .init = cli_setup, .fini = cli_teardown)
{
	double x[] = {5, 1, 4, 2, 3};
	json_t *s = record_stats_json(x, 5), *r, *arr = json_array();
	char p[512], err[512];
	cr_assert_float_eq(json_real_value(json_object_get(s, "median")), 3,
			   1e-12);
	cr_assert_float_eq(json_real_value(json_object_get(s, "p10")), 1.4,
			   1e-12);
	cr_assert_float_eq(json_real_value(json_object_get(s, "p90")), 4.6,
			   1e-12);
	cr_assert_float_eq(json_real_value(json_object_get(s, "mean")), 3,
			   1e-12);
	json_decref(s);
	cli_path(p, sizeof(p), "a/b/r.jsonl");
	cr_assert_eq(record_check_out(p, err, sizeof(err)), 0, "%s", err);
	r = record_new();
	cr_assert_eq(record_append(p, r, err, sizeof(err)), 0);
	cr_assert_eq(record_append(p, r, err, sizeof(err)), 0);
	cr_assert_eq(record_read_jsonl(p, arr, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(json_array_size(arr), 2);
	cr_assert(json_equal(json_array_get(arr, 0), r));
	cr_assert_eq(
	    record_check_out("/proc/nonexistent/x.jsonl", err, sizeof(err)),
	    -1);
	json_decref(r);
	json_decref(arr);
}
