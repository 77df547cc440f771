/* test_params.c — parameter files (bench/run/param_files.c, safetensors.c) and
 * evaluation (bench/run/evaluate.c): `deqbench params init` and `grad` through
 * safetensors equal the in-process gradient and report their solves, bad
 * parameter and token files exit 2, save_params then eval reproduces the
 * run's perplexity, the saved metadata, a looser tolerance at inference,
 * and `deqbench eval`'s bad input.
 *
 * Safetensors files are written and read here by hand (8-byte little-endian
 * header length, JSON header, raw data), independently of bench/safetensors,
 * so the CLI is checked against the format rather than against itself. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../methods/deq.h"
#include "config.h"
#include "param_files.h"
#include "runner.h"
#include "train_step.h"
#include "test_bench_util.h"
#include "test_cli.h"

/* Minimal safetensors writer: tensors given as (name, dtype, ndim, shape,
 * data, bytes). */
struct st_tensor {
	const char *name, *dtype;
	int ndim;
	int64_t shape[3];
	const void *data;
	size_t bytes;
};

static void st_write(const char *path, const struct st_tensor *t, int n)
{
	json_t *h = json_object();
	size_t off = 0;
	char *hs;
	uint64_t hl;
	FILE *f;
	for (int i = 0; i < n; i++) {
		json_t *e = json_object(), *sh = json_array();
		for (int k = 0; k < t[i].ndim; k++)
			json_array_append_new(sh, json_integer(t[i].shape[k]));
		json_object_set_new(e, "dtype", json_string(t[i].dtype));
		json_object_set_new(e, "shape", sh);
		json_object_set_new(e, "data_offsets",
				    json_pack("[I,I]", (json_int_t)off,
					      (json_int_t)(off + t[i].bytes)));
		json_object_set_new(h, t[i].name, e);
		off += t[i].bytes;
	}
	hs = json_dumps(h, JSON_COMPACT);
	hl = strlen(hs);
	f = fopen(path, "wb");
	cr_assert_not_null(f);
	fwrite(&hl, 8, 1, f); /* little-endian hosts only (x86, arm) */
	fwrite(hs, 1, hl, f);
	for (int i = 0; i < n; i++)
		fwrite(t[i].data, 1, t[i].bytes, f);
	fclose(f);
	free(hs);
	json_decref(h);
}

/* Reads a safetensors file: header (new ref) and the data section. */
static json_t *st_read(const char *path, char **data)
{
	size_t len;
	char *buf = cli_read(path, &len);
	uint64_t hl;
	json_t *h;
	cr_assert_not_null(buf, "cannot read %s", path);
	cr_assert_geq(len, 8);
	memcpy(&hl, buf, 8);
	cr_assert_leq(8 + hl, len);
	h = json_loadb(buf + 8, hl, 0, NULL);
	cr_assert_not_null(h, "bad header in %s", path);
	*data = malloc(len - 8 - hl + 1);
	memcpy(*data, buf + 8 + hl, len - 8 - hl);
	free(buf);
	return h;
}

static const float *st_get(json_t *h, const char *data, const char *name,
			   size_t *numel)
{
	json_t *e = json_object_get(h, name);
	cr_assert_not_null(e, "tensor %s missing", name);
	cr_assert_str_eq(json_string_value(json_object_get(e, "dtype")), "F32");
	*numel = (size_t)(json_integer_value(json_array_get(
			      json_object_get(e, "data_offsets"), 1)) -
			  json_integer_value(json_array_get(
			      json_object_get(e, "data_offsets"), 0))) /
		 4;
	return (const float *)(data +
			       json_integer_value(json_array_get(
				   json_object_get(e, "data_offsets"), 0)));
}

#define GRAD_CFG                                                               \
	"corpus=synthetic", "d_model=16", "n_heads=2", "d_ff=24", "seq_len=6", \
	    "vocab_size=40", "layers=3", "threads=1"

static void write_tokens(const char *path, int B, int T, int V)
{
	int32_t *tok = malloc(sizeof(int32_t) * (size_t)B * (T + 1));
	struct st_tensor t = {"tokens", "I32",
			      2,	{B, T + 1},
			      tok,	sizeof(int32_t) * (size_t)B * (T + 1)};
	for (int i = 0; i < B * (T + 1); i++)
		tok[i] = (i * 7 + 3) % V;
	st_write(path, &t, 1);
	free(tok);
}

/* `deqbench grad`'s report of its solves against the in-process step's
 * statistics st: per solve one stderr line (and nothing else on stderr)
 * and the metadata strings <fwd|bwd>_{iters, residual, stop_mode, tol,
 * converged}; none of either for a method without a solve. */
static void check_grad_solves(const char *err, json_t *h,
			      const struct method_stats *st,
			      const struct method_config *mc)
{
	json_t *md = json_object_get(h, "__metadata__");
	const struct solve_stats *s[2] = {&st->fwd, &st->bwd};
	const int has[2] = {st->has_fwd_solve, st->has_bwd_solve};
	const double tol[2] = {deq_config(mc)->f_tol, deq_config(mc)->b_tol};
	const enum stop_mode mode[2] = {deq_config(mc)->f_stop_mode,
					deq_config(mc)->b_stop_mode};
	int lines = 0;
	for (const char *c = err; *c; c++)
		lines += *c == '\n';
	cr_assert_eq(lines, has[0] + has[1], "stderr: %s", err);
	for (int k = 0; k < 2; k++) {
		const char *pre = k ? "bwd" : "fwd";
		char key[32], want[128], line[256];
		const char *at_line, *v;
		snprintf(want, sizeof(want), "deqbench grad: %s solve (",
			 k ? "backward" : "forward");
		at_line = strstr(err, want);
		snprintf(key, sizeof(key), "%s_iters", pre);
		if (!has[k]) {
			cr_assert_null(at_line, "%s", err);
			cr_assert_null(json_object_get(md, key));
			continue;
		}
		cr_assert_not_null(at_line, "no '%s' in: %s", want, err);
		snprintf(line, sizeof(line), "%.*s",
			 (int)strcspn(at_line, "\n"), at_line);
		snprintf(want, sizeof(want), "): %d iters, %s residual ",
			 s[k]->iters, stop_mode_name(mode[k]));
		cr_assert_not_null(strstr(line, want), "%s", line);
		cr_assert_not_null(strstr(line, s[k]->converged
						    ? ", converged ("
						    : ", NOT converged ("),
				   "%s", line);
		v = json_string_value(json_object_get(md, key));
		cr_assert_not_null(v, "metadata %s", key);
		cr_assert_eq(atoi(v), s[k]->iters, "%s", key);
		snprintf(key, sizeof(key), "%s_residual", pre);
		v = json_string_value(json_object_get(md, key));
		cr_assert_not_null(v, "metadata %s", key);
		/* %.9g of the same computation: equal to 1e-8 */
		cr_assert_float_eq(strtod(v, NULL), s[k]->residual,
				   1e-8 * s[k]->residual, "%s", key);
		snprintf(key, sizeof(key), "%s_tol", pre);
		v = json_string_value(json_object_get(md, key));
		cr_assert_not_null(v, "metadata %s", key);
		cr_assert_float_eq(strtod(v, NULL), tol[k], 1e-9 * tol[k]);
		snprintf(key, sizeof(key), "%s_stop_mode", pre);
		v = json_string_value(json_object_get(md, key));
		cr_assert_not_null(v, "metadata %s", key);
		cr_assert_str_eq(v, stop_mode_name(mode[k]));
		snprintf(key, sizeof(key), "%s_converged", pre);
		v = json_string_value(json_object_get(md, key));
		cr_assert_not_null(v, "metadata %s", key);
		cr_assert_str_eq(v, s[k]->converged ? "true" : "false");
	}
}

/* Grad via the CLI (params init, grad: files through safetensors) equals
 * the gradient computed in process for every model kind this build has
 * (a kind whose model_create fails, e.g. not yet implemented, is skipped
 * with a message) and a method with and without a solver; the solves are
 * reported on stderr and in the file's metadata (check_grad_solves). */
Test(cli, grad_matches_in_process, .init = cli_setup, .fini = cli_teardown,
     .timeout = 300)
{
	const char *models[] = {"transformer", "tanh_cell", "trellisnet"};
	const char *methods[] = {"checkpoint", "deq"};
	char pp[512], tp[512], gp[512], a1[600], a2[600], a3[600], err[4096];
	cli_path(pp, sizeof(pp), "p.safetensors");
	cli_path(tp, sizeof(tp), "t.safetensors");
	cli_path(gp, sizeof(gp), "g.safetensors");
	write_tokens(tp, 3, 6, 40);
	for (int ki = 0; ki < 3; ki++) {
		char karg[64];
		struct bench_config c;
		struct run_ctx rc;
		char e2[512];
		const char *gcfg[] = {GRAD_CFG, NULL};
		snprintf(karg, sizeof(karg), "model=%s", models[ki]);
		config_defaults(&c);
		for (int i = 0; gcfg[i]; i++)
			config_set_arg(&c, gcfg[i], e2, sizeof(e2));
		if (config_set_arg(&c, karg, e2, sizeof(e2)) != 0 ||
		    config_finish(&c, e2, sizeof(e2)) != 0 ||
		    run_ctx_create(&rc, &c, 40, e2, sizeof(e2)) != 0) {
			cr_log_info("model=%s skipped: %s", models[ki], e2);
			continue;
		}
		run_ctx_destroy(&rc);
		snprintf(a1, sizeof(a1), "out=%s", pp);
		{
			const char *a[] = {"params", "init", GRAD_CFG, karg,
					   "seed=7", a1,     NULL};
			cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s",
				     err);
		}
		snprintf(a1, sizeof(a1), "params=%s", pp);
		snprintf(a2, sizeof(a2), "tokens=%s", tp);
		snprintf(a3, sizeof(a3), "out=%s", gp);
		for (int mi = 0; mi < 2; mi++) {
			char marg[64];
			char *data;
			json_t *h;
			double loss, *g;
			int32_t tok[3 * 7];
			size_t n;
			const float *fl;
			snprintf(marg, sizeof(marg), "method=%s", methods[mi]);
			{
				const char *a[] = {"grad", GRAD_CFG, karg,
						   marg,   a1,	     a2,
						   a3,	   NULL};
				cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0,
					     "%s %s: %s", karg, marg, err);
			}
			/* in process: same config, B and T from the tokens */
			config_defaults(&c);
			for (int i = 0; gcfg[i]; i++)
				config_set_arg(&c, gcfg[i], e2, sizeof(e2));
			config_set_arg(&c, karg, e2, sizeof(e2));
			config_set_arg(&c, marg, e2, sizeof(e2));
			c.model.batch_size = 3;
			cr_assert_eq(config_finish(&c, e2, sizeof(e2)), 0, "%s",
				     e2);
			cr_assert_eq(
			    run_ctx_create(&rc, &c, 40, e2, sizeof(e2)), 0,
			    "%s", e2);
			cr_assert_eq(params_load(&rc, pp, e2, sizeof(e2)), 0,
				     "%s", e2);
			for (int i = 0; i < 3 * 7; i++)
				tok[i] = (i * 7 + 3) % 40;
			cr_assert_eq(train_step_grad_step(&rc, tok, &loss, e2,
							  sizeof(e2)),
				     0);
			g = malloc(sizeof(double) * rc.m->n_param_elems);
			be_download(rc.be, g, rc.m->grad_buf,
				    rc.m->n_param_elems);
			h = st_read(gp, &data);
			check_grad_solves(err, h, method_get_stats(rc.me),
					  method_get_config(rc.me));
			fl = st_get(h, data, "loss", &n);
			cr_assert_eq(n, 1);
			cr_assert_float_eq(fl[0], (float)loss,
					   1e-6 * fabs(loss));
			for (int p = 0; p < rc.m->n_params; p++) {
				char name[160];
				const struct model_param *mp = &rc.m->params[p];
				json_t *sh;
				double gmax = 0;
				snprintf(name, sizeof(name), "grad.%s",
					 mp->name);
				fl = st_get(h, data, name, &n);
				cr_assert_eq(n, mp->numel, "%s", name);
				/* shapes as the model's, 3-D ones included */
				sh = json_object_get(json_object_get(h, name),
						     "shape");
				cr_assert_eq((int)json_array_size(sh), mp->ndim,
					     "%s", name);
				for (int k = 0; k < mp->ndim; k++)
					cr_assert_eq(json_integer_value(
							 json_array_get(sh, k)),
						     mp->shape[k], "%s", name);
				for (size_t i = 0; i < n; i++)
					gmax =
					    fmax(gmax, fabs(g[mp->offset + i]));
				/* same code path, same seed, one thread:
				 * equal up to float32 rounding of the file */
				for (size_t i = 0; i < n; i++)
					cr_assert_float_eq(
					    fl[i], (float)g[mp->offset + i],
					    1e-6 * gmax + 1e-30, "%s[%zu]",
					    name, i);
			}
			free(g);
			free(data);
			json_decref(h);
			run_ctx_destroy(&rc);
		}
	}
}

Test(cli, safetensors_bad_input_exits_2, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char pp[512], tp[512], gp[512], res[512], a1[600], a2[600], a3[600];
	char err[4096], *data;
	json_t *h, *h2;
	struct st_tensor t[MODEL_MAX_PARAMS];
	int n = 0;
	const char *key;
	json_t *e;
	cli_path(pp, sizeof(pp), "p.safetensors");
	cli_path(tp, sizeof(tp), "t.safetensors");
	cli_path(gp, sizeof(gp), "g.safetensors");
	cli_path(res, sizeof(res), "p.safetensors");
	snprintf(a1, sizeof(a1), "out=%s", pp);
	{
		const char *a[] = {"params", "init", GRAD_CFG, a1, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	write_tokens(tp, 2, 6, 40);
	/* drop one tensor: block.ff1.bias */
	h = st_read(pp, &data);
	h2 = json_object();
	json_object_foreach(h, key, e)
	{
		json_t *off = json_object_get(e, "data_offsets");
		if (!strcmp(key, "__metadata__") ||
		    !strcmp(key, "block.ff1.bias"))
			continue;
		t[n].name = key;
		t[n].dtype = json_string_value(json_object_get(e, "dtype"));
		t[n].ndim = (int)json_array_size(json_object_get(e, "shape"));
		for (int k = 0; k < t[n].ndim; k++)
			t[n].shape[k] = json_integer_value(
			    json_array_get(json_object_get(e, "shape"), k));
		t[n].data = data + json_integer_value(json_array_get(off, 0));
		t[n].bytes =
		    (size_t)(json_integer_value(json_array_get(off, 1)) -
			     json_integer_value(json_array_get(off, 0)));
		n++;
	}
	cli_path(pp, sizeof(pp), "missing.safetensors");
	st_write(pp, t, n);
	snprintf(a1, sizeof(a1), "params=%s", pp);
	snprintf(a2, sizeof(a2), "tokens=%s", tp);
	snprintf(a3, sizeof(a3), "out=%s", gp);
	{
		const char *a[] = {"grad", GRAD_CFG, a1, a2, a3, NULL};
		expect_bad(a, res, "block.ff1.bias");
	}
	/* a NaN in a parameter (a diverged run's save): refused by grad
	 * and eval, naming the tensor */
	{
		float *w = (float *)t[0].data;
		float keep = w[1];
		char nanp[512], na[600];
		w[1] = NAN;
		cli_path(nanp, sizeof(nanp), "nan.safetensors");
		st_write(nanp, t, n);
		w[1] = keep;
		snprintf(na, sizeof(na), "params=%s", nanp);
		const char *a[] = {"grad", GRAD_CFG, na, a2, a3, NULL};
		expect_bad(a, res, t[0].name);
		const char *b[] = {"eval", GRAD_CFG, na, "out=/dev/null", NULL};
		expect_bad(b, res, "finite");
	}
	/* wrong model size: the shapes do not match d_model=32 */
	cli_path(pp, sizeof(pp), "p.safetensors");
	snprintf(a1, sizeof(a1), "params=%s", pp);
	{
		/* GRAD_CFG with d_model=32 (not given twice: refused) */
		const char *a[] = {"grad",
				   "corpus=synthetic",
				   "d_model=32",
				   "n_heads=2",
				   "d_ff=24",
				   "seq_len=6",
				   "vocab_size=40",
				   "layers=3",
				   "threads=1",
				   a1,
				   a2,
				   a3,
				   NULL};
		expect_bad(a, res, "shape");
	}
	/* tokens with the wrong dtype */
	{
		float f[14] = {0};
		struct st_tensor tt = {"tokens", "F32", 2,
				       {2, 7},	 f,	sizeof(f)};
		st_write(tp, &tt, 1);
		const char *a[] = {"grad", GRAD_CFG, a1, a2, a3, NULL};
		expect_bad(a, res, "tokens");
	}
	free(data);
	json_decref(h);
	json_decref(h2);
}

/* ---- save_params and deqbench eval (ε at inference) ---- */

/* inference.body_ms and head_ms of rec: the head timed apart
 * from the rest of each batch's forward by one timer marked between them,
 * so per batch they add up to step_ms, and so do their means (to the
 * rounding of a sum of 2 batches); neither is empty. */
static void check_head_split(const json_t *rec)
{
	double step = num_at(rec, "inference.step_ms.mean");
	double body = num_at(rec, "inference.body_ms.mean");
	double head = num_at(rec, "inference.head_ms.mean");
	cr_assert(body > 0 && head > 0, "body %g head %g", body, head);
	cr_assert(fabs(body + head - step) <= 1e-9 * step, "%g + %g != %g",
		  body, head, step);
}

/* A run with save_params, then runner_eval of the file with the same
 * config: the eval record matches the schema, has kind "eval" and the
 * run's valid and test perplexity bitwise (same forward, same batches);
 * the training record carries inference timing too. */
Test(eval, save_then_eval_reproduces_run, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	const char *methods[] = {"unroll", "deq"};
	for (int i = 0; i < 2; i++) {
		struct bench_config c;
		json_t *tr = NULL, *ev = NULL;
		struct run_meta meta = {.quiet = 1};
		char p[512], err[256];
		tiny_config(&c, methods[i]);
		cli_path(p, sizeof(p), "trained.safetensors");
		snprintf(c.save_params, sizeof(c.save_params), "%s", p);
		c.eval_warmup = 0; /* 2 valid batches: time both */
		cr_assert_eq(runner_run(&c, &meta, &tr), RUN_OK);
		check_schema(tr);
		cr_assert_str_eq(json_string_value(at(tr, "kind")), "train");
		cr_assert_eq(json_integer_value(at(tr, "inference.batches")),
			     2); /* eval_tokens 64 / (4 * 8) */
		cr_assert(num_at(tr, "inference.step_ms.median") > 0);
		cr_assert(json_is_null(at(tr, "inference.memory")));
		check_head_split(tr);
		cr_assert(cli_exists(p));

		config_defaults(&c);
		tiny_config(&c, methods[i]);
		c.eval_warmup = 0;
		cr_assert_eq(config_set(&c, "params", p, err, sizeof(err)), 0);
		cr_assert_eq(runner_eval(&c, &meta, &ev), RUN_OK, "%s",
			     json_string_value(at(ev, "message")));
		check_schema(ev);
		check_head_split(ev);
		cr_assert_str_eq(json_string_value(at(ev, "kind")), "eval");
		cr_assert(json_is_null(at(ev, "timing")));
		cr_assert_eq(num_at(ev, "quality.valid_loss"),
			     num_at(tr, "quality.valid_loss"), "%s",
			     methods[i]);
		cr_assert_eq(num_at(ev, "quality.test_loss"),
			     num_at(tr, "quality.test_loss"));
		cr_assert_eq(num_at(ev, "inference.forward_evals_per_batch"),
			     num_at(tr, "inference.forward_evals_per_batch"));
		cr_assert(num_at(ev, "inference.memory.peak_total_bytes") > 0);
		/* inference holds no tapes: depth+solver below training's */
		cr_assert_lt(
		    num_at(ev, "inference.memory.peak_depth_solver_bytes"),
		    num_at(tr, "memory.peak_depth_solver_bytes"));
		json_decref(tr);
		json_decref(ev);
	}
}

/* The file save_params writes: every parameter under its name, and the
 * whole resolved config and method as metadata. */
Test(eval, save_params_metadata, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	struct bench_config c;
	json_t *r = NULL, *h, *md, *cfg, *meth;
	char p[512], *data;
	size_t n;
	tiny_config(&c, "checkpoint");
	cli_path(p, sizeof(p), "p.safetensors");
	snprintf(c.save_params, sizeof(c.save_params), "%s", p);
	cr_assert_eq(runner_run(&c, NULL, &r), RUN_OK);
	h = st_read(p, &data);
	cr_assert_not_null(st_get(h, data, "embed.weight", &n));
	cr_assert_eq(n, 50 * 16);
	md = json_object_get(h, "__metadata__");
	cfg = json_loads(json_string_value(json_object_get(md, "config")), 0,
			 NULL);
	meth = json_loads(json_string_value(json_object_get(md, "method")), 0,
			  NULL);
	cr_assert_not_null(cfg);
	cr_assert_not_null(meth);
	cr_assert(
	    json_equal(json_object_get(cfg, "steps"), at(r, "config.steps")));
	cr_assert_str_eq(json_string_value(json_object_get(cfg, "method")),
			 "checkpoint");
	/* resolved: k = round(sqrt(4)) = 2, not the given 0 */
	cr_assert_eq(json_integer_value(json_object_get(meth, "k")), 2);
	json_decref(cfg);
	json_decref(meth);
	json_decref(h);
	free(data);
	json_decref(r);
}

/* A looser tolerance at inference stops the solver earlier: fewer forward
 * evaluations per batch than at the training tolerance. */
Test(eval, looser_tolerance_fewer_evals, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	struct bench_config c;
	json_t *r = NULL;
	struct run_meta meta = {.quiet = 1};
	char p[512], err[256];
	double evals[2];
	tiny_config(&c, "deq");
	cli_path(p, sizeof(p), "d.safetensors");
	snprintf(c.save_params, sizeof(c.save_params), "%s", p);
	cr_assert_eq(runner_run(&c, &meta, &r), RUN_OK);
	json_decref(r);
	for (int i = 0; i < 2; i++) {
		tiny_config(&c, "deq");
		cr_assert_eq(config_set(&c, "params", p, err, sizeof(err)), 0);
		cr_assert_eq(config_set(&c, "f_tol", i ? "0.3" : "1e-6", err,
					sizeof(err)),
			     0);
		cr_assert_eq(runner_eval(&c, &meta, &r), RUN_OK);
		evals[i] = num_at(r, "inference.forward_evals_per_batch");
		json_decref(r);
	}
	cr_assert_lt(evals[1], evals[0], "f_tol 0.3: %g, 1e-6: %g", evals[1],
		     evals[0]);
}

/* TINY's keys but d_model and n_heads, for the mismatch cases below */
#define EVAL_SHAPE                                                             \
	"corpus=synthetic", "d_ff=32", "seq_len=8", "batch_size=4",            \
	    "eval_tokens=32"

/* deqbench eval refuses a missing, mismatched or broken parameter file
 * (and a missing params=) with exit 2 and one line; out= is untouched. */
Test(eval, bad_params_exit_2, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char res[512], arg[600], p[512], pa[600], junk[512], ja[600];
	char err[4096];
	cli_path(res, sizeof(res), "keep.jsonl");
	cli_write_text(res, "{\"schema\":1,\"status\":\"ok\",\"config\":{}}\n");
	snprintf(arg, sizeof(arg), "out=%s", res);
	cli_path(p, sizeof(p), "init.safetensors");
	snprintf(pa, sizeof(pa), "params=%s", p);
	cli_path(junk, sizeof(junk), "junk.safetensors");
	cli_write_text(junk, "not a safetensors file");
	snprintf(ja, sizeof(ja), "params=%s", junk);
	{
		char o[600];
		snprintf(o, sizeof(o), "out=%s", p);
		const char *a[] = {"params", "init", TINY, o, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
	{
		const char *a[] = {"eval", TINY, arg, NULL};
		expect_bad(a, res, "params= is required");
	}
	{
		const char *a[] = {"eval", TINY, "params=/nonexistent/p", arg,
				   NULL};
		expect_bad(a, res, "/nonexistent/p");
	}
	{
		const char *a[] = {"eval", TINY, ja, arg, NULL};
		expect_bad(a, res, "junk.safetensors");
	}
	{
		const char *a[] = {"eval",	EVAL_SHAPE, "d_model=32",
				   "n_heads=2", pa,	    arg,
				   NULL};
		expect_bad(a, res, "embed");
	}
	{
		const char *a[] = {"eval",	EVAL_SHAPE, "d_model=16",
				   "n_heads=4", pa,	    arg,
				   NULL};
		expect_bad(a, res, "n_heads=2");
	}
	{
		const char *a[] = {"eval", TINY, pa, arg, NULL};
		cr_assert_eq(cli_run(a, 0, err, sizeof(err)), 0, "%s", err);
	}
}

/* A tiny 6-step run (arg: one more key=value) saving its parameters to
 * <cli_dir>/name and its record to <cli_dir>/r.jsonl: their paths into p
 * and out, "params=p" into pa and "out=out" into oa (600 bytes each). */
static void save_tiny(const char *name, const char *arg, char *p, char *out,
		      char *pa, char *oa)
{
	char sp[600], err[4096];
	cli_path(p, 512, name);
	cli_path(out, 512, "r.jsonl");
	snprintf(pa, 600, "params=%s", p);
	snprintf(oa, 600, "out=%s", out);
	snprintf(sp, sizeof(sp), "save_params=%s", p);
	const char *run[] = {"run",
			     "corpus=synthetic",
			     "d_model=16",
			     "n_heads=2",
			     "d_ff=32",
			     "seq_len=8",
			     "batch_size=4",
			     "vocab_size=50",
			     "layers=4",
			     "steps=6",
			     "eval_tokens=64",
			     "threads=1",
			     arg,
			     sp,
			     oa,
			     NULL};
	cr_assert_eq(cli_run(run, 0, err, sizeof(err)), 0, "%s", err);
}

/* A params file trained at precision=bf16: `deqbench eval` takes the
 * model and method from its metadata but not the precision (a machine
 * setting, like device and tf32): fp32 unless precision= is given, and
 * with precision=bf16 the run's valid loss bit for bit (the same bf16
 * forward on the same batches). */
Test(eval, precision_is_not_taken_from_the_file, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char p[512], out[512], err[4096], pa[600], oa[600];
	save_tiny("bf16.safetensors", "precision=bf16", p, out, pa, oa);
	const char *e32[] = {"eval", "eval_tokens=64", pa, oa, NULL};
	cr_assert_eq(cli_run(e32, 0, err, sizeof(err)), 0, "%s", err);
	const char *e16[] = {"eval", "eval_tokens=64", "precision=bf16", pa, oa,
			     NULL};
	cr_assert_eq(cli_run(e16, 0, err, sizeof(err)), 0, "%s", err);
	char *text = cli_read(out, NULL), *line = text, *next;
	json_t *r[3];
	for (int i = 0; i < 3; i++, line = next + 1) {
		cr_assert_not_null(next = strchr(line, '\n'));
		*next = 0;
		r[i] = json_loads(line, 0, NULL);
		cr_assert_not_null(r[i]);
	}
	cr_assert_str_eq(json_string_value(at(r[0], "config.precision")),
			 "bf16");
	cr_assert_str_eq(json_string_value(at(r[1], "config.precision")),
			 "fp32");
	cr_assert_str_eq(json_string_value(at(r[2], "config.precision")),
			 "bf16");
	cr_assert_eq(num_at(r[2], "quality.valid_loss"),
		     num_at(r[0], "quality.valid_loss"));
	cr_assert_neq(num_at(r[1], "quality.valid_loss"),
		      num_at(r[0], "quality.valid_loss"));
	for (int i = 0; i < 3; i++)
		json_decref(r[i]);
	free(text);
}

/* A file saved by a GPU run with cuda_graphs=true and a memory cap
 * evaluates on the CPU: eval takes neither key from the file's metadata
 * (both describe the machine; on the CPU both are refused). The file here
 * is a CPU run's with its metadata edited in place to those values (the
 * same number of bytes). */
Test(eval, machine_keys_are_not_taken_from_the_file, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char p[512], out[512], err[4096], pa[600], oa[600];
	size_t len;
	save_tiny("g.safetensors", "precision=fp32", p, out, pa, oa);
	char *f = cli_read(p, &len);
	cr_assert_not_null(f);
	char *g = memmem(f, len, "cuda_graphs\\\":false", 19);
	char *c = memmem(f, len, "device_mem_cap_mib\\\":0,", 23);
	cr_assert(g && c, "the metadata holds both keys");
	memcpy(g, "cuda_graphs\\\":true ", 19);
	memcpy(c, "device_mem_cap_mib\\\":9,", 23);
	cli_write(p, f, len);
	free(f);
	const char *ev[] = {"eval", "eval_tokens=64", pa, oa, NULL};
	cr_assert_eq(cli_run(ev, 0, err, sizeof(err)), 0, "%s", err);
}

/* A file trained with method=managed (unified memory: device=cuda only)
 * evaluates on the CPU as unroll, whose arithmetic it is; a note says so.
 * The file is a CPU offload run's with "offload" edited to "managed" in
 * its metadata (the same number of bytes). */
Test(eval, managed_file_evaluates_as_unroll_off_cuda, .init = cli_setup,
     .fini = cli_teardown, .timeout = 120)
{
	char p[512], out[512], err[4096], pa[600], oa[600];
	size_t len;
	save_tiny("m.safetensors", "method=offload", p, out, pa, oa);
	char *f = cli_read(p, &len), *at;
	cr_assert_not_null(f);
	int n = 0;
	while ((at = memmem(f, len, "\\\"offload\\\"", 11)) != NULL)
		memcpy(at + 2, "managed", 7), n++;
	cr_assert_gt(n, 0, "the metadata names the method");
	cli_write(p, f, len);
	free(f);
	const char *ev[] = {"eval", "eval_tokens=64", pa, oa, NULL};
	cr_assert_eq(cli_run(ev, 0, err, sizeof(err)), 0, "%s", err);
	cr_assert(strstr(err, "method=managed") && strstr(err, "as unroll"),
		  "%s", err);
	const char *ev_cuda[] = {"eval", "device=cuda", "eval_tokens=64", pa,
				 oa,	 NULL};
	/* on device=cuda the file's method stands (refused here for lack
	 * of a GPU or of a CUDA build, never for the method) */
	cr_assert_eq(cli_run(ev_cuda, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(!strstr(err, "as unroll"), "%s", err);
}

/* ---- save_params= that fails after training (G17) ---- */

/* The parameter file a failed save_params= left in the rescue directory
 * ($TMPDIR: cli_dir), as params_meta_read reads it; fails the test when
 * there is none. */
static void expect_rescued_params(void)
{
	DIR *d = opendir(cli_dir);
	struct dirent *de;
	int found = 0;
	cr_assert_not_null(d);
	while ((de = readdir(d))) {
		char p[1024];
		struct params_meta pm;
		char err[512];
		if (strncmp(de->d_name, "deqbench-unsaved-", 17) ||
		    !strstr(de->d_name, ".safetensors"))
			continue;
		snprintf(p, sizeof(p), "%s/%s", cli_dir, de->d_name);
		cr_assert_eq(params_meta_read(p, &pm, err, sizeof(err)), 0,
			     "%s is not a parameter file: %s", p, err);
		cr_assert_not_null(pm.config, "%s has no config", p);
		json_decref(pm.config);
		found++;
	}
	closedir(d);
	cr_assert_eq(found, 1, "%d rescued parameter files", found);
}

/* G17: save_params= that fails after training (its directory gone, found
 * only when saving; the up-front checks are main's) keeps the trained
 * parameters in a rescue file, as a record that cannot be appended is
 * kept, and the record's message gives the reason before the path. */
Test(eval, failed_save_rescues_params, .init = cli_setup, .fini = cli_teardown,
     .timeout = 60)
{
	struct bench_config c;
	json_t *r = NULL;
	const char *msg, *why;
	char p[512];
	tiny_config(&c, "unroll");
	cli_path(p, sizeof(p), "gone/p.safetensors");
	snprintf(c.save_params, sizeof(c.save_params), "%s", p);
	cr_assert_eq(runner_run(&c, NULL, &r), RUN_ERROR);
	msg = json_string_value(at(r, "message"));
	why = strstr(msg, "(No such file or directory)");
	cr_assert(why && strstr(msg, p) > why, "%s", msg);
	cr_assert(strstr(msg, "deqbench-unsaved-"), "%s", msg);
	expect_rescued_params();
	json_decref(r);
}
