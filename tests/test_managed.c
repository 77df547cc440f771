/*
 * test_managed.c — method=managed (methods/managed.c), the managed memory
 * category and device_mem_cap_mib, on the CPU. The CPU backends have no
 * unified memory, so the method runs here on a backend whose ops table
 * gets stand-in managed ops (allocations from the backend's raw_alloc,
 * prefetches recorded, not performed): that tests everything of the
 * method but the driver's paging, which tests/test_cuda_managed.c runs on
 * a GPU.
 *
 *   1. a training step equals unroll's bitwise (loss, z, dL/du, every
 *      gradient) on "cpu" and "cpu64" for L = 1, 2, 3, 7 on all three
 *      models, with and without managed_prefetch: L forward evaluations
 *      and L VJPs, and with prefetch exactly tapes L−2, …, 0 asked to the
 *      device in that order, on events (i mod 2), each before the VJP
 *      that follows the one it overlaps; an inference forward too;
 *   2. the whole-loss gradient against central differences on "cpu64";
 *   3. memory: device depth = allocator = method_memory = 2n, managed =
 *      allocator's MEM_MANAGED = method_managed_memory = L·tape, outside
 *      the device totals, method_host_memory 0, nothing allocated in a
 *      step;
 *   4. refusals: method_create on the plain CPU backend, and the CLI
 *      (exit 2, one line naming the key) for method=managed off
 *      device=cuda or with impl=pytorch and device_mem_cap_mib off
 *      device=cuda; a MEM_MANAGED allocation on the CPU backend fails.
 */
#include "methods/method.h"

#define DQ_TEST_SEED 29
#include "test_util.h"
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli.h"
#include "test_deq_util.h"

/* ------------------------------------------------ stand-in managed ops */

enum { MAX_PF = 64 };

/* What the stand-in prefetch saw: the tape pointers, events and the VJP
 * count (method_stats) when each was issued. */
static struct {
	const struct backend_ops *orig;
	struct backend_ops ops;
	struct backend_managed_ops managed;
	const char *block; /* the last managed allocation */
	const void *p[MAX_PF];
	size_t bytes[MAX_PF];
	int ev[MAX_PF], to_device[MAX_PF];
	int n;
} fake;

static void *fake_alloc(void *ctx, size_t bytes)
{
	void *p = fake.orig->core->raw_alloc(ctx, bytes);
	fake.block = p;
	return p;
}

static void fake_free(void *ctx, void *p)
{
	fake.orig->core->raw_free(ctx, p);
}

static void fake_prefetch(void *ctx, const void *p, size_t bytes, int to_device,
			  int ev)
{
	(void)ctx;
	cr_assert_lt(fake.n, MAX_PF);
	fake.p[fake.n] = p;
	fake.bytes[fake.n] = bytes;
	fake.ev[fake.n] = ev;
	fake.to_device[fake.n] = to_device;
	fake.n++;
}

/* Gives m's backend managed memory (the stand-ins above). */
static void give_managed(struct model *m)
{
	fake.orig = m->be->ops;
	fake.ops = *m->be->ops;
	fake.managed.managed_alloc = fake_alloc;
	fake.managed.managed_free = fake_free;
	fake.managed.prefetch = fake_prefetch;
	fake.ops.managed = &fake.managed;
	m->be->ops = &fake.ops;
	fake.n = 0;
}

static struct model *open_managed(const char *be, enum model_kind kind,
				  struct shape s)
{
	struct model *m = open_model(be, kind, s, 3);
	give_managed(m);
	return m;
}

static struct method_config managed_cfg(int L, int prefetch)
{
	struct method_config c = cfg_of(method_kind_parse("managed"), L, 0);
	c.resolved = 0;
	managed_config(&c)->prefetch = prefetch;
	method_config_resolve(&c);
	return c;
}

static size_t tape_bytes(const struct model *m)
{
	return model_tape_elems(m) * m->be->elem;
}

/* ------------------------------------------- 1. bitwise vs unroll */

/* The prefetches of one step with prefetch on: tapes L−2 … 0 in order,
 * each tape's bytes, to the device, on event (index mod 2); the managed
 * block holds tape i at i · tape bytes. */
static void check_prefetches(const struct model *m, int L, const char *what)
{
	size_t t = tape_bytes(m);
	cr_assert_eq(fake.n, L - 1, "%s: %d prefetches", what, fake.n);
	for (int j = 0; j < fake.n; j++) {
		int tape = L - 2 - j;
		cr_assert_eq(fake.bytes[j], t, "%s", what);
		cr_assert_eq(fake.to_device[j], 1, "%s", what);
		cr_assert_eq(fake.ev[j], tape % 2, "%s: prefetch %d", what, j);
		cr_assert_eq(fake.p[j], fake.block + (size_t)tape * t,
			     "%s: prefetch %d is not tape %d", what, j, tape);
	}
}

static void check_equals_unroll(const char *be, enum model_kind kind,
				struct shape s, int L, int prefetch)
{
	struct model *m = open_managed(be, kind, s);
	void *z = dev_state(m);
	struct step_out un =
	    step_of(m, cfg_of(method_kind_parse("unroll"), L, 0), z);
	fake.n = 0;
	struct step_out mg = step_of(m, managed_cfg(L, prefetch), z);
	char what[96];
	snprintf(what, sizeof(what), "%s kind %d L=%d prefetch %d", be, kind, L,
		 prefetch);
	assert_same_step(m, &un, &mg, what);
	cr_assert_eq(mg.st.forward_evals, L, "%s", what);
	cr_assert_eq(mg.st.vjp_evals, L, "%s", what);
	long moved = prefetch ? (long)(L - 1) * (long)tape_bytes(m) : 0;
	cr_assert_eq(mg.st.offload_bytes, moved, "%s", what);
	if (prefetch)
		check_prefetches(m, L, what);
	else
		cr_assert_eq(fake.n, 0, "%s", what);
	step_out_free(&un);
	step_out_free(&mg);
	backend_free(m->be, z);
	close_model(m);
}

#define odd	shape_odd
#define pow2	shape_pow2
#define trellis shape_trellis

Test(managed, equals_unroll, .timeout = 120)
{
	const char *bes[] = {"cpu", "cpu64"};
	int Ls[] = {1, 2, 3, 7};
	for (int b = 0; b < 2; b++)
		for (int pf = 0; pf < 2; pf++) {
			for (int i = 0; i < 4; i++)
				check_equals_unroll(bes[b], MODEL_TRANSFORMER,
						    i % 2 ? pow2 : odd, Ls[i],
						    pf);
			check_equals_unroll(bes[b], MODEL_TANH_CELL, pow2, 5,
					    pf);
			check_equals_unroll(bes[b], MODEL_TRELLISNET, trellis,
					    4, pf);
		}
}

Test(managed, inference_equals_unroll)
{
	struct model *m = open_managed("cpu", MODEL_TRANSFORMER, odd);
	void *z = dev_state(m);
	double *h0 =
	    inference_z(m, cfg_of(method_kind_parse("unroll"), 6, 0), z, NULL);
	double *h1 = inference_z(m, managed_cfg(6, 1), z, NULL);
	cr_assert_eq(memcmp(h0, h1, m->n_state * sizeof(double)), 0);
	cr_assert_eq(fake.n, 0, "an inference forward prefetched");
	free(h0);
	free(h1);
	backend_free(m->be, z);
	close_model(m);
}

/* --------------------------------- 2. gradients vs finite differences */

static void check_fd(enum model_kind kind, struct shape s, int L)
{
	struct model *m = open_contractive("cpu64", kind, s, 5);
	give_managed(m);
	struct eval_fx f = {m, new_method(m, managed_cfg(L, 1)), dev_state(m)};
	step(m, f.me, f.z, NULL);
	double *g = download(m->be, m->grad_buf, m->n_param_elems);
	cr_assert_gt(fd_params(m, g, 1e-6, 1e-9, loss_only, &f, "managed"), 0);
	free(g);
	method_destroy(f.me);
	backend_free(m->be, f.z);
	close_model(m);
}

Test(managed, gradient_fd, .timeout = 120)
{
	check_fd(MODEL_TRANSFORMER, odd, 5);
	check_fd(MODEL_TANH_CELL, pow2, 4);
}

/* ------------------------------------------------------- 3. memory */

static void check_memory(struct model *m, int L)
{
	struct backend *be = m->be;
	struct method_config c = managed_cfg(L, 1);
	size_t db, sb, n = m->n_state, tape = tape_bytes(m);
	char err[256];
	cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)), 0, "%s",
		     err);
	size_t want = (size_t)L * tape;
	cr_assert_eq(method_managed_memory(m, &c), want, "L=%d", L);
	cr_assert_eq(method_host_memory(m, &c), 0, "L=%d", L);
	cr_assert_eq(db, 2 * n * be->elem, "L=%d", L);
	cr_assert_eq(sb, 0);
	assert_outside_memory(m, c, db, MEM_MANAGED, want, L);
}

Test(memory, layout)
{
	struct model *m = open_managed("cpu", MODEL_TRANSFORMER, odd);
	int Ls[] = {1, 2, 3, 12};
	for (int i = 0; i < 4; i++)
		check_memory(m, Ls[i]);
	close_model(m);
}

/* ------------------------------------------------------ 4. refusals */

Test(refused, on_the_cpu_backend)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 3);
	struct method *me = NULL;
	char err[256] = "";
	struct method_config c = managed_cfg(4, 1);
	cr_assert_eq(method_create(&me, m, &c, err, sizeof(err)), -1);
	cr_assert_null(me);
	cr_assert(strstr(err, "method=managed needs unified memory") &&
		      strstr(err, "device=cuda"),
		  "%s", err);
	cr_assert_null(backend_alloc_bytes(m->be, 64, MEM_MANAGED),
		       "the cpu backend has no managed memory");
	cr_assert_eq(be_prefetch(m->be, NULL, 0, 1, 0), -1);
	cr_assert_eq(be_cap_device(m->be, 1 << 20, err, sizeof(err)), -1);
	cr_assert(strstr(err, "device=cuda"), "%s", err);
	close_model(m);
}

Test(refused, cli, .init = cli_setup, .fini = cli_teardown, .timeout = 60)
{
	char out[700], o[600];
	cli_path(o, sizeof(o), "r.jsonl");
	snprintf(out, sizeof(out), "out=%s", o);
	const char *const cpu[] = {"run", "method=managed", "steps=2", out,
				   NULL};
	const char *const pt[] = {
	    "run", "method=managed", "impl=pytorch", "steps=2", out, NULL};
	const char *const cap[] = {"run", "device_mem_cap_mib=512", "steps=2",
				   out, NULL};
	cli_expect_refused(cpu, "method=managed keeps tapes in CUDA unified "
				"memory");
	cli_expect_refused(cpu, "method=offload");
	cli_expect_refused(pt, "impl=deqbench");
	cli_expect_refused(cap, "device_mem_cap_mib=512 caps a GPU's memory");
}
