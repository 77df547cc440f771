/*
 * test_offload.c — method=offload (methods/offload.c) and the host memory
 * category:
 *
 *   1. a training step equals unroll's bitwise (loss, z, dL/du, every
 *      gradient) on "cpu" and "cpu64" for L = 1, 2, 3, 7, 12 on all three
 *      models, with L forward evaluations and L VJPs, 2·(L−2) tapes copied
 *      (method_stats.offload_bytes and the backend's copy statistics); an
 *      inference forward too;
 *   2. the whole-loss gradient against central differences on "cpu64";
 *   3. memory: device depth = allocator = method_memory =
 *      min(L, 2)·tape + 2n, host = allocator's MEM_HOST =
 *      method_host_memory = (L−2)·tape, MEM_HOST outside the device
 *      totals, nothing allocated during a step; memfit's estimate of a
 *      whole run equals the allocator's live bytes after setup;
 *   4. the CLI: `deqbench run method=offload` writes a record whose
 *      memory.offload counts the bytes and whose host peak is the
 *      predicted one.
 */
#include "methods/method.h"

#define DQ_TEST_SEED 23
#include "test_util.h"
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli.h"
#include "test_deq_util.h"

static struct method_config offload_cfg(int L)
{
	return cfg_of(method_kind_parse("offload"), L, 0);
}

static size_t tape_bytes(const struct model *m)
{
	return model_tape_elems(m) * m->be->elem;
}

/* ------------------------------------------- 1. bitwise vs unroll */

static void check_equals_unroll(const char *be, enum model_kind kind,
				struct shape s, int L)
{
	struct model *m = open_model(be, kind, s, 3);
	void *z = dev_state(m);
	struct backend_copy_stats cs;
	struct step_out un =
	    step_of(m, cfg_of(method_kind_parse("unroll"), L, 0), z);
	be_copy_stats(m->be, &cs); /* nothing moved so far */
	cr_assert_eq(cs.copies, 0);
	struct step_out of = step_of(m, offload_cfg(L), z);
	char what[64];
	snprintf(what, sizeof(what), "%s kind %d L=%d", be, kind, L);
	assert_same_step(m, &un, &of, what);
	long moved = L > 2 ? 2L * (L - 2) * (long)tape_bytes(m) : 0;
	cr_assert_eq(of.st.forward_evals, L, "%s", what);
	cr_assert_eq(of.st.vjp_evals, L, "%s", what);
	cr_assert_eq(of.st.offload_bytes, moved, "%s: %ld bytes", what,
		     of.st.offload_bytes);
	be_copy_stats(m->be, &cs);
	cr_assert_eq((long)cs.bytes, moved, "%s", what);
	cr_assert_eq(cs.copies, L > 2 ? 2 * (L - 2) : 0, "%s", what);
	cr_assert(cs.copy_ms >= 0 && cs.stall_ms >= 0);
	step_out_free(&un);
	step_out_free(&of);
	backend_free(m->be, z);
	close_model(m);
}

#define odd	shape_odd
#define pow2	shape_pow2
#define trellis shape_trellis

Test(offload, equals_unroll, .timeout = 120)
{
	const char *bes[] = {"cpu", "cpu64"};
	int Ls[] = {1, 2, 3, 7, 12};
	for (int b = 0; b < 2; b++) {
		for (int i = 0; i < 5; i++)
			check_equals_unroll(bes[b], MODEL_TRANSFORMER,
					    i % 2 ? pow2 : odd, Ls[i]);
		check_equals_unroll(bes[b], MODEL_TANH_CELL, pow2, 9);
		check_equals_unroll(bes[b], MODEL_TRELLISNET, trellis, 6);
	}
}

Test(offload, inference_equals_unroll)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 4);
	void *z = dev_state(m);
	double *h0 =
	    inference_z(m, cfg_of(method_kind_parse("unroll"), 6, 0), z, NULL);
	double *h1 = inference_z(m, offload_cfg(6), z, NULL);
	cr_assert_eq(memcmp(h0, h1, m->n_state * sizeof(double)), 0);
	free(h0);
	free(h1);
	backend_free(m->be, z);
	close_model(m);
}

/* --------------------------------- 2. gradients vs finite differences */

static void check_fd(enum model_kind kind, struct shape s, int L)
{
	check_fd_method(kind, s, offload_cfg(L), "offload");
}

Test(offload, gradient_fd, .timeout = 120)
{
	check_fd(MODEL_TRANSFORMER, odd, 5);
	check_fd(MODEL_TANH_CELL, pow2, 4);
}

/* ------------------------------------------------------- 3. memory */

static void check_memory(struct model *m, int L)
{
	struct backend *be = m->be;
	struct method_config c = offload_cfg(L);
	size_t db, sb, n = m->n_state, tape = tape_bytes(m);
	char err[256];
	method_config_resolve(&c);
	cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)), 0, "%s",
		     err);
	size_t want_host = L > 2 ? (size_t)(L - 2) * tape : 0;
	cr_assert_eq(method_host_memory(m, &c), want_host, "L=%d", L);
	cr_assert_eq(db, (size_t)(L < 2 ? L : 2) * tape + 2 * n * be->elem,
		     "L=%d", L);
	cr_assert_eq(sb, 0);
	assert_outside_memory(m, c, db, MEM_HOST, want_host, L);
}

Test(memory, layout)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 2);
	int Ls[] = {1, 2, 3, 4, 12, 40};
	for (int i = 0; i < 6; i++)
		check_memory(m, Ls[i]);
	close_model(m);
}

/* ---------------------------------------------------------- 4. CLI */

Test(cli, record_counts_the_copies, .init = cli_setup, .fini = cli_teardown,
     .timeout = 120)
{
	char out[512], path[512], err[4096];
	json_error_t je;
	snprintf(out, sizeof(out), "out=%s/o.jsonl", cli_dir);
	const char *argv[] = {"run",
			      "method=offload",
			      "layers=5",
			      "d_model=16",
			      "n_heads=2",
			      "d_ff=32",
			      "seq_len=8",
			      "batch_size=2",
			      "steps=4",
			      "warmup_steps=1",
			      "corpus=synthetic",
			      "vocab_size=50",
			      "threads=1",
			      "eval_tokens=64",
			      out,
			      NULL};
	cr_assert_eq(cli_run(argv, 0, err, sizeof(err)), 0, "%s", err);
	cli_path(path, sizeof(path), "o.jsonl");
	json_t *rec = json_load_file(path, 0, &je);
	cr_assert_not_null(rec, "%s", je.text);
	json_t *mem = json_object_get(rec, "memory");
	double host = json_number_value(
	    json_object_get(json_object_get(mem, "peak_bytes"), "host"));
	double pred =
	    json_number_value(json_object_get(mem, "predicted_host_bytes"));
	json_t *off = json_object_get(mem, "offload");
	cr_assert(host > 0 && host == pred, "host %g predicted %g", host, pred);
	cr_assert(json_is_object(off));
	/* 3 of 5 tapes go out and come back each step */
	cr_assert_eq(json_number_value(json_object_get(off, "bytes_per_step")),
		     2 * host);
	json_decref(rec);
}
