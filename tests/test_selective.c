/*
 * test_selective.c — method=selective (methods/selective.c; Megatron-LM's
 * selective activation recomputation, Korthikanti et al. 2022) and the
 * transformer's selective tape (models/transformer.c):
 *
 *   1. a training step equals unroll's bitwise (loss, z, dL/du, every
 *      gradient) on "cpu" (float32) and "cpu64" (float64) at odd and
 *      power-of-two shapes for L = 1, 2, 5, and under precision=bf16 on
 *      "cpu": the recomputation repeats the forward's attention op on the
 *      same qkv, so every later op reads the same bits (no tolerance);
 *      L forwards, L VJPs and L attn_recompute a step; an inference
 *      forward equals unroll's too;
 *   2. the whole-loss gradient against central differences on "cpu64";
 *   3. memory, exactly, from the allocator counters: depth =
 *      L · e_t · N (7d + F + 4) + e · (B H T² + N d) + 2 e n_state
 *      (e_t = 2 under bf16), the same as method_memory, below unroll's by
 *      L · e_t · (B H T² + N d) − e · (B H T² + N d); nothing allocated
 *      during a step; inference keeps 2 e n_state;
 *   4. tanh_cell and trellisnet are refused (method_create's message, and
 *      `deqbench run` exits 2 with one line naming what to use), with
 *      impl=pytorch too (deqbench's check, before deqtorch's);
 *   5. checkpoint with selective=true (methods/checkpoint.c): a step
 *      equals checkpoint's and unroll's bitwise (fp32, fp64, bf16, L not a
 *      multiple of k), L attn_recompute a step; central differences on
 *      "cpu64"; depth memory exactly (S−1)·e·n_state + k·e_t·N(7d+F+4) +
 *      e·(BHT² + Nd) + 4·e·n_state, method_memory and the allocator's peak;
 *      refused on tanh_cell and trellisnet (exit 2, one line) and by
 *      impl=pytorch.
 */
#include "methods/method.h"

#define DQ_TEST_SEED 43
#include "test_util.h"
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli.h"
#include "test_deq_util.h"

#define odd  shape_odd
#define pow2 shape_pow2

static struct method_config sel_cfg(int L)
{
	return cfg_of(method_kind_parse("selective"), L, 0);
}

/* The transformer at shape s on backend be, at precision p, tokens 3. */
static struct model *open_at(const char *be, struct shape s,
			     enum dq_precision p)
{
	struct model_config c = model_cfg(MODEL_TRANSFORMER, s, 11);
	c.precision = p;
	struct model *m = model_of(make_be(be), &c);
	set_tokens(m, 3);
	return m;
}

/* ------------------------------------------- 1. bitwise vs unroll */

static void check_equals_unroll(const char *be, struct shape s, int L,
				enum dq_precision p)
{
	struct model *m = open_at(be, s, p);
	void *z = dev_state(m);
	struct step_out un =
	    step_of(m, cfg_of(method_kind_parse("unroll"), L, 0), z);
	struct step_out se = step_of(m, sel_cfg(L), z);
	char what[64];
	snprintf(what, sizeof(what), "%s %s L=%d", be, dq_precision_name(p), L);
	assert_same_step(m, &un, &se, what);
	cr_assert_eq(se.st.forward_evals, L, "%s", what);
	cr_assert_eq(se.st.vjp_evals, L, "%s", what);
	cr_assert_eq(se.st.work.block_fwd_taped, L, "%s", what);
	cr_assert_eq(se.st.work.block_vjp, L, "%s", what);
	cr_assert_eq(se.st.work.attn_recompute, L, "%s", what);
	cr_assert_eq(un.st.work.attn_recompute, 0, "%s", what);
	step_out_free(&un);
	step_out_free(&se);
	backend_free(m->be, z);
	close_model(m);
}

Test(selective, equals_unroll_fp32_fp64, .timeout = 120)
{
	const char *bes[] = {"cpu", "cpu64"};
	int Ls[] = {1, 2, 5};
	for (int b = 0; b < 2; b++)
		for (int i = 0; i < 3; i++) {
			check_equals_unroll(bes[b], odd, Ls[i], DQ_PREC_FP32);
			check_equals_unroll(bes[b], pow2, Ls[i], DQ_PREC_FP32);
		}
}

Test(selective, equals_unroll_bf16, .timeout = 120)
{
	check_equals_unroll("cpu", odd, 3, DQ_PREC_BF16);
	check_equals_unroll("cpu", pow2, 4, DQ_PREC_BF16);
}

Test(selective, inference_equals_unroll)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 4);
	void *z = dev_state(m);
	long f0, f1;
	double *h0 =
	    inference_z(m, cfg_of(method_kind_parse("unroll"), 6, 0), z, &f0);
	double *h1 = inference_z(m, sel_cfg(6), z, &f1);
	cr_assert_eq(memcmp(h0, h1, m->n_state * sizeof(double)), 0);
	cr_assert_eq(f0, 6);
	cr_assert_eq(f1, 6);
	free(h0);
	free(h1);
	backend_free(m->be, z);
	close_model(m);
}

/* --------------------------------- 2. gradients vs finite differences */

/* check_fd_method's budget (test_deq_util.h): 1e-6 of the tensor's
 * largest gradient + 1e-9; a missing or wrong recomputed value is O(1). */
Test(selective, gradient_fd, .timeout = 120)
{
	check_fd_method(MODEL_TRANSFORMER, odd, sel_cfg(4), "selective");
	check_fd_method(MODEL_TRANSFORMER, pow2, sel_cfg(2), "selective");
}

/* ------------------------------------------------------- 3. memory */

/* The header's formula, in bytes, from the shape alone. */
static size_t formula(const struct model *m, int L, int inference)
{
	size_t B = (size_t)m->B, T = (size_t)m->T, d = (size_t)m->d;
	size_t H = (size_t)m->cfg.n_heads, F = (size_t)m->cfg.d_ff, N = B * T;
	size_t e = m->be->elem;
	size_t et = m->cfg.precision == DQ_PREC_BF16 ? 2 : e;
	size_t vecs = 2 * e * m->n_state;
	if (inference)
		return vecs;
	return (size_t)L * et * N * (7 * d + F + 4) +
	       e * (B * H * T * T + N * d) + vecs;
}

static void check_memory(const char *be, struct shape s, enum dq_precision p,
			 int L)
{
	struct model *m = open_at(be, s, p);
	struct backend *bk = m->be;
	struct method_config c = sel_cfg(L);
	size_t db, sb, want = formula(m, L, 0);
	char err[256];
	void *z = dev_state(m);
	method_config_resolve(&c);
	cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(db, want, "%s L=%d: method_memory %zu, formula %zu", be, L,
		     db, want);
	cr_assert_eq(sb, 0);
	struct method *me = new_method(m, c);
	cr_assert_eq(bk->mem.live[MEM_DEPTH], want);
	backend_mem_reset_peak(bk);
	size_t allocs = bk->mem.n_allocs;
	step(m, me, z, NULL);
	cr_assert_eq(bk->mem.n_allocs, allocs, "a step allocated");
	cr_assert_eq(bk->mem.peak[MEM_DEPTH], want, "%s L=%d: peak %zu vs %zu",
		     be, L, bk->mem.peak[MEM_DEPTH], want);
	method_destroy(me);
	cr_assert_eq(bk->mem.live[MEM_DEPTH], 0);
	/* below unroll by the L att and a it does not keep, less the one
	 * scratch that holds them in the backward */
	struct method_config u = cfg_of(method_kind_parse("unroll"), L, 0);
	size_t ud, us, et = p == DQ_PREC_BF16 ? 2 : bk->elem;
	size_t dropped =
	    (size_t)m->B * m->cfg.n_heads * m->T * m->T + m->n_state;
	method_config_resolve(&u);
	cr_assert_eq(method_memory(m, &u, &ud, &us, err, sizeof(err)), 0);
	cr_assert_eq(ud + bk->elem * dropped, want + (size_t)L * et * dropped);
	/* inference: the two vectors alone */
	c.inference = 1;
	cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)), 0);
	cr_assert_eq(db, formula(m, L, 1));
	backend_free(bk, z);
	close_model(m);
}

Test(memory, selective_formula)
{
	int Ls[] = {1, 2, 7, 16};
	for (int i = 0; i < 4; i++) {
		check_memory("cpu", odd, DQ_PREC_FP32, Ls[i]);
		check_memory("cpu64", pow2, DQ_PREC_FP32, Ls[i]);
		check_memory("cpu", pow2, DQ_PREC_BF16, Ls[i]);
	}
}

/* ------------------------------------------------------ 4. refusal */

Test(selective, refuses_models_without_selective_tapes)
{
	enum model_kind kinds[] = {MODEL_TANH_CELL, MODEL_TRELLISNET};
	struct shape ss[] = {pow2, shape_trellis};
	for (int i = 0; i < 2; i++) {
		struct model *m = open_model("cpu", kinds[i], ss[i], 1);
		struct method_config c = sel_cfg(3);
		struct method *me = NULL;
		size_t db, sb;
		char err[256] = "";
		cr_assert(!model_has_selective(m));
		cr_assert(!model_kind_has_selective(kinds[i]));
		method_config_resolve(&c);
		cr_assert_eq(method_create(&me, m, &c, err, sizeof(err)), -1);
		cr_assert_null(me);
		cr_assert(strstr(err, "use method=unroll or checkpoint"), "%s",
			  err);
		cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)),
			     -1);
		close_model(m);
	}
	cr_assert(model_kind_has_selective(MODEL_TRANSFORMER));
}

Test(cli, selective_tanh_cell_exits_2, .init = cli_setup, .fini = cli_teardown)
{
	char err[4096];
	const char *argv[] = {
	    "run",	 "method=selective", "model=tanh_cell",
	    "d_model=8", "seq_len=4",	     "batch_size=2",
	    "steps=2",	 "corpus=synthetic", NULL};
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "method=selective") &&
		      strstr(err, "use method=unroll or checkpoint"),
		  "%s", err);
	cr_assert_null(strchr(err, '\n') ? strchr(strchr(err, '\n') + 1, '\n')
					 : NULL,
		       "one line: %s", err);
	/* impl=pytorch too: deqbench's own check, before deqtorch's */
	argv[3] = "impl=pytorch";
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "method=selective") &&
		      strstr(err, "use method=unroll or checkpoint"),
		  "%s", err);
}

/* -------------------------------- 5. checkpoint with selective=true */

static struct method_config ckpt_sel_cfg(int L, int k, int sel)
{
	struct method_config c = cfg_of(checkpoint_kind(), L, k);
	checkpoint_config(&c)->selective = sel;
	return c;
}

static void check_ckpt_equals(const char *be, struct shape s, int L, int k,
			      enum dq_precision p)
{
	struct model *m = open_at(be, s, p);
	void *z = dev_state(m);
	struct step_out un =
	    step_of(m, cfg_of(method_kind_parse("unroll"), L, 0), z);
	struct step_out ck = step_of(m, ckpt_sel_cfg(L, k, 0), z);
	struct step_out cs = step_of(m, ckpt_sel_cfg(L, k, 1), z);
	char what[80];
	snprintf(what, sizeof(what), "%s %s L=%d k=%d", be,
		 dq_precision_name(p), L, k);
	assert_same_step(m, &ck, &cs, what);
	assert_same_step(m, &un, &cs, what);
	cr_assert_eq(cs.st.forward_evals, ck.st.forward_evals, "%s", what);
	cr_assert_eq(cs.st.vjp_evals, L, "%s", what);
	cr_assert_eq(cs.st.work.block_fwd_recompute,
		     ck.st.work.block_fwd_recompute, "%s", what);
	cr_assert_eq(cs.st.work.attn_recompute, L, "%s", what);
	cr_assert_eq(ck.st.work.attn_recompute, 0, "%s", what);
	step_out_free(&un);
	step_out_free(&ck);
	step_out_free(&cs);
	backend_free(m->be, z);
	close_model(m);
}

Test(ckpt_selective, equals_checkpoint_and_unroll, .timeout = 120)
{
	check_ckpt_equals("cpu", odd, 5, 2, DQ_PREC_FP32);
	check_ckpt_equals("cpu", pow2, 4, 4, DQ_PREC_FP32);
	check_ckpt_equals("cpu64", odd, 7, 3, DQ_PREC_FP32);
	check_ckpt_equals("cpu64", pow2, 1, 1, DQ_PREC_FP32);
	check_ckpt_equals("cpu", odd, 5, 2, DQ_PREC_BF16);
}

Test(ckpt_selective, gradient_fd, .timeout = 120)
{
	check_fd_method(MODEL_TRANSFORMER, odd, ckpt_sel_cfg(5, 2, 1),
			"checkpoint selective");
}

/* The header's formula for checkpoint selective=true, in bytes. */
static size_t ckpt_formula(const struct model *m, int L, int k)
{
	size_t B = (size_t)m->B, T = (size_t)m->T, d = (size_t)m->d;
	size_t H = (size_t)m->cfg.n_heads, F = (size_t)m->cfg.d_ff, N = B * T;
	size_t e = m->be->elem, S = (size_t)((L + k - 1) / k);
	size_t et = m->cfg.precision == DQ_PREC_BF16 ? 2 : e;
	return (S - 1) * e * m->n_state + (size_t)k * et * N * (7 * d + F + 4) +
	       e * (B * H * T * T + N * d) + 4 * e * m->n_state;
}

static void check_ckpt_memory(const char *be, struct shape s,
			      enum dq_precision p, int L, int k)
{
	struct model *m = open_at(be, s, p);
	struct backend *bk = m->be;
	struct method_config c = ckpt_sel_cfg(L, k, 1);
	size_t db, sb, want = ckpt_formula(m, L, k);
	char err[256];
	void *z = dev_state(m);
	method_config_resolve(&c);
	cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(db, want, "%s L=%d k=%d: method_memory %zu, formula %zu",
		     be, L, k, db, want);
	struct method *me = new_method(m, c);
	backend_mem_reset_peak(bk);
	step(m, me, z, NULL);
	cr_assert_eq(bk->mem.peak[MEM_DEPTH], want, "%s L=%d k=%d: peak %zu",
		     be, L, k, bk->mem.peak[MEM_DEPTH]);
	method_destroy(me);
	backend_free(bk, z);
	close_model(m);
}

Test(memory, ckpt_selective_formula)
{
	check_ckpt_memory("cpu", odd, DQ_PREC_FP32, 7, 3);
	check_ckpt_memory("cpu64", pow2, DQ_PREC_FP32, 16, 4);
	check_ckpt_memory("cpu", pow2, DQ_PREC_BF16, 5, 5);
}

Test(ckpt_selective, refused_without_selective_tapes)
{
	struct model *m = open_model("cpu", MODEL_TRELLISNET, shape_trellis, 1);
	struct method_config c = ckpt_sel_cfg(3, 1, 1);
	struct method *me = NULL;
	char err[256] = "";
	method_config_resolve(&c);
	cr_assert_eq(method_create(&me, m, &c, err, sizeof(err)), -1);
	cr_assert(strstr(err, "selective=true") &&
		      strstr(err, "drop selective"),
		  "%s", err);
	cr_assert_eq(method_check_model(&c, MODEL_TANH_CELL, err, sizeof(err)),
		     -1);
	cr_assert_eq(
	    method_check_model(&c, MODEL_TRANSFORMER, err, sizeof(err)), 0);
	close_model(m);
}

Test(cli, ckpt_selective_exits_2, .init = cli_setup, .fini = cli_teardown)
{
	char err[4096];
	const char *argv[] = {"run",
			      "method=checkpoint",
			      "selective=true",
			      "model=tanh_cell",
			      "d_model=8",
			      "seq_len=4",
			      "batch_size=2",
			      "steps=2",
			      "corpus=synthetic",
			      NULL};
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "drop selective"), "%s", err);
	/* impl=pytorch refuses it on the transformer (deqtorch's check) */
	argv[3] = "impl=pytorch";
	argv[4] = "layers=2";
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 2, "%s", err);
	cr_assert(strstr(err, "selective"), "%s", err);
}
