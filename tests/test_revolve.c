/*
 * test_revolve.c — method=revolve (methods/revolve.c) and its schedule
 * (methods/revolve_schedule.c):
 *
 *   1. the schedule on a simulator (no model) that tracks which state z_i
 *      every slot, the work vector and the tape hold and fails on any
 *      operation on a wrong state: for every L ≤ 200 and s ≤ 10 the
 *      advances it makes equal the optimum of the dynamic program
 *        A(1, s) = 0, A(L, 0) = L(L−1)/2,
 *        A(L, s) = min_{1≤j<L} [ j + A(L−j, s−1) + A(j, s) ]
 *      (s stored slots; z₀ = 0 is free), the closed form
 *      r·L − C(s+1+r, r−1) (written again here) and revolve_advances; it
 *      uses exactly min(s, L−2) slots; the forward part makes L−1 advances
 *      and one taped application; large L and s at the key limits;
 *   2. a training step equals unroll's bitwise (loss, z, dL/du, every
 *      gradient) on "cpu" and "cpu64" for several (L, s), s = 1, s ≥ L and
 *      L = 1 included, on all three models, with forward_evals =
 *      L + A(L, s) and vjp_evals = L; an inference forward too;
 *   3. the whole-loss gradient against central differences on "cpu64";
 *   4. memory: allocator = method_memory = min(s, L−2)·n + tape + 4n
 *      (inference 2n), nothing allocated during a step;
 *   5. slots = 0 resolves to max(1, round(log2 L)); bad values name the
 *      key, through method_config_validate and the CLI (exit 2, one line);
 *      `deqbench run --help` lists the key and the method.
 */
#include "../methods/revolve.h"
#include "../methods/revolve_schedule.h"
#include "methods/method.h"

#define DQ_TEST_SEED 17
#include "test_util.h"
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_cli.h"
#include "test_deq_util.h"

/* ------------------------------------------------- 1. the schedule */

/* What the simulated buffers hold: state indices i of z_i, −1 for none. */
struct sim {
	int L, slots; /* slots: revolve_slots_used */
	int *slot;
	int work, tape, next_vjp;
	int64_t advances, taped, vjps;
	int max_slot; /* highest slot written, −1 for none */
};

/* The index of the state at `from`; the work vector is read once. */
static int sim_read(struct sim *s, int from)
{
	int z = from == REVOLVE_ZERO ? 0 : from == REVOLVE_WORK ? s->work : -1;
	if (from >= 0) {
		cr_assert_lt(from, s->slots, "slot %d of %d", from, s->slots);
		z = s->slot[from];
	}
	s->work = -1;
	cr_assert_geq(z, 0, "read from %d: nothing there", from);
	return z;
}

static void sim_advance(void *ctx, int from, int to, int layer, int n)
{
	struct sim *s = ctx;
	cr_assert_eq(sim_read(s, from), layer, "advance from the wrong state");
	cr_assert(n >= 1 && layer + n <= s->L - 1, "advance %d+%d", layer, n);
	s->advances += n;
	if (to == REVOLVE_WORK) {
		s->work = layer + n;
		return;
	}
	cr_assert(to >= 0 && to < s->slots, "store into slot %d of %d", to,
		  s->slots);
	s->slot[to] = layer + n;
	s->max_slot = to > s->max_slot ? to : s->max_slot;
}

static void sim_taped(void *ctx, int from, int layer)
{
	struct sim *s = ctx;
	cr_assert_eq(sim_read(s, from), layer, "taped layer %d", layer);
	s->tape = layer;
	s->taped++;
}

static void sim_vjp(void *ctx, int layer)
{
	struct sim *s = ctx;
	s->work = -1;
	cr_assert_eq(layer, s->next_vjp, "VJP order");
	cr_assert_eq(s->tape, layer, "VJP of %d with tape %d", layer, s->tape);
	s->tape = -1;
	s->next_vjp--;
	s->vjps++;
}

static const struct revolve_ops sim_ops = {sim_advance, sim_taped, sim_vjp};

/* Runs the schedule for L layers, s slots on the simulator; checks the
 * forward part and the whole; returns the advances. */
static int64_t simulate(int L, int s, int *max_slot)
{
	struct sim m = {.L = L, .slots = revolve_slots_used(L, s)};
	struct revolve_plan p = {L, m.slots, &sim_ops, &m};
	m.slot = malloc(sizeof(int) * (size_t)(m.slots + 1));
	for (int i = 0; i < m.slots; i++)
		m.slot[i] = -1;
	m.work = m.tape = m.max_slot = -1;
	m.next_vjp = L - 1;
	revolve_schedule_forward(&p);
	cr_assert_eq(m.advances, L - 1, "L=%d s=%d: forward advances", L, s);
	cr_assert(m.taped == 1 && m.vjps == 0 && m.tape == L - 1);
	revolve_schedule_backward(&p);
	cr_assert(m.vjps == L && m.taped == L && m.next_vjp == -1,
		  "L=%d s=%d: %lld VJPs, %lld taped", L, s, (long long)m.vjps,
		  (long long)m.taped);
	free(m.slot);
	*max_slot = m.max_slot;
	return m.advances;
}

/* C(n, k) in double: exact while the values stay below 2^53 (here < 1e6). */
static double binom(int n, int k)
{
	double b = 1;
	if (k < 0 || k > n)
		return 0;
	k = k < n - k ? k : n - k;
	for (int i = 1; i <= k; i++)
		b = b * (n - k + i) / i;
	return b;
}

/* Griewank & Walther's t(l, c) = r·l − C(c + r, r − 1), c = s + 1. */
static int64_t closed_form(int L, int s)
{
	int c = s + 1, r = 0;
	while (binom(c + r, c) < L)
		r++;
	return (int64_t)r * L - (int64_t)binom(c + r, r - 1);
}

#define DP_L 200
#define DP_S 10

Test(schedule, optimal_for_every_L_and_s)
{
	static int64_t A[DP_L + 1][DP_S + 1];
	for (int L = 1; L <= DP_L; L++)
		for (int s = 0; s <= DP_S; s++) {
			int64_t best = L == 1 ? 0 : (int64_t)L * (L - 1) / 2;
			for (int j = 1; s > 0 && j < L; j++) {
				int64_t t = j + A[L - j][s - 1] + A[j][s];
				best = t < best ? t : best;
			}
			A[L][s] = best;
			int used;
			int64_t sim = simulate(L, s, &used);
			cr_assert_eq(closed_form(L, s), best, "L=%d s=%d", L,
				     s);
			cr_assert_eq(revolve_advances(L, s), best, "L=%d s=%d",
				     L, s);
			cr_assert_eq(sim, best,
				     "L=%d s=%d: schedule %lld, "
				     "optimum %lld",
				     L, s, (long long)sim, (long long)best);
			/* every allocated slot is used */
			cr_assert_eq(used + 1, revolve_slots_used(L, s),
				     "L=%d s=%d: %d slots used", L, s,
				     used + 1);
		}
	/* the ends: every state advanced once from s = L − 2 on; pure
	 * recomputation; L = 4, s = 1: z₂ from z₀, z₁ twice (4) */
	cr_assert_eq(revolve_advances(9, 7), 8);
	cr_assert_eq(revolve_advances(9, 100), 8);
	cr_assert_eq(revolve_advances(9, 0), 36);
	cr_assert_eq(revolve_advances(4, 1), 4);
	cr_assert_eq(revolve_advances(1, 3), 0);
}

/* The key limits (layers 100000, slots 10000): no overflow, and the
 * recursion 10001 deep. */
Test(schedule, large, .timeout = 120)
{
	int cases[][2] = {{100000, 1}, {100000, 17},   {100000, 10000},
			  {1000, 3},   {10002, 10000}, {2, 10000}};
	for (int i = 0; i < 6; i++) {
		int L = cases[i][0], s = cases[i][1], used;
		int64_t sim = simulate(L, s, &used);
		cr_assert_eq(sim, revolve_advances(L, s), "L=%d s=%d", L, s);
		cr_assert_eq(sim, closed_form(L, s), "L=%d s=%d", L, s);
		cr_assert_eq(used + 1, revolve_slots_used(L, s));
	}
	cr_assert_eq(revolve_advances(10002, 10000), 10001);
}

/* ------------------------------------------- 2. bitwise vs unroll */

static struct method_config revolve_cfg(int L, int slots)
{
	struct method_config c = cfg_of(revolve_kind(), L, 0);
	revolve_config(&c)->slots = slots;
	return c;
}

/* One step of unroll and of revolve(L, slots) on backend `be`: loss, z,
 * dL/du and every gradient bit for bit, and the evaluation counts. */
static void check_equals_unroll(const char *be, enum model_kind kind,
				struct shape s, int L, int slots)
{
	struct model *m = open_model(be, kind, s, 3);
	void *z = dev_state(m);
	struct step_out un =
	    step_of(m, cfg_of(method_kind_parse("unroll"), L, 0), z);
	struct step_out rv = step_of(m, revolve_cfg(L, slots), z);
	char what[64];
	snprintf(what, sizeof(what), "%s kind %d L=%d slots=%d", be, kind, L,
		 slots);
	assert_same_step(m, &un, &rv, what);
	int sr = revolve_config(&rv.cfg)->slots;
	cr_assert_eq(rv.st.forward_evals, L + revolve_advances(L, sr),
		     "%s: %ld forwards", what, rv.st.forward_evals);
	cr_assert_eq(rv.st.vjp_evals, L, "%s", what);
	step_out_free(&un);
	step_out_free(&rv);
	backend_free(m->be, z);
	close_model(m);
}

#define odd	shape_odd
#define pow2	shape_pow2
#define trellis shape_trellis

Test(revolve, equals_unroll_transformer, .timeout = 120)
{
	const char *bes[] = {"cpu", "cpu64"};
	int cases[][2] = {{7, 1},     {7, 2}, {7, 5}, {7, 7},
			  {7, 10000}, {1, 1}, {2, 1}, {13, 0}};
	for (int b = 0; b < 2; b++)
		for (int i = 0; i < 8; i++)
			check_equals_unroll(bes[b], MODEL_TRANSFORMER,
					    i % 2 ? pow2 : odd, cases[i][0],
					    cases[i][1]);
}

Test(revolve, equals_unroll_tanh_cell_trellisnet, .timeout = 120)
{
	const char *bes[] = {"cpu", "cpu64"};
	for (int b = 0; b < 2; b++) {
		check_equals_unroll(bes[b], MODEL_TANH_CELL, pow2, 30, 2);
		check_equals_unroll(bes[b], MODEL_TANH_CELL, odd, 9, 3);
		check_equals_unroll(bes[b], MODEL_TANH_CELL, odd, 1, 5);
		check_equals_unroll(bes[b], MODEL_TRELLISNET, trellis, 6, 2);
		check_equals_unroll(bes[b], MODEL_TRELLISNET, trellis, 5, 1);
	}
}

/* An inference forward (method created for inference) gives unroll's z
 * bit for bit with L untaped applications. */
Test(revolve, inference_equals_unroll)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 4);
	void *z = dev_state(m);
	long f0, f1;
	double *h0 =
	    inference_z(m, cfg_of(method_kind_parse("unroll"), 6, 0), z, &f0);
	double *h1 = inference_z(m, revolve_cfg(6, 2), z, &f1);
	cr_assert_eq(f0, 6);
	cr_assert_eq(f1, 6);
	cr_assert_eq(memcmp(h0, h1, m->n_state * sizeof(double)), 0);
	free(h0);
	free(h1);
	backend_free(m->be, z);
	close_model(m);
}

/* --------------------------------- 3. gradients vs finite differences */

/* test_deq_util.h's check_fd_method at 6 sampled coordinates per tensor. */
static void check_fd(enum model_kind kind, struct shape s, int L, int slots)
{
	check_fd_method(kind, s, revolve_cfg(L, slots), "revolve");
}

Test(revolve, gradient_fd, .timeout = 120)
{
	check_fd(MODEL_TRANSFORMER, odd, 5, 1);
	check_fd(MODEL_TANH_CELL, pow2, 7, 2);
	check_fd(MODEL_TANH_CELL, odd, 4, 10);
}

/* ------------------------------------------------------- 4. memory */

/* Depth bytes of revolve(L, slots) on m by the header's formula. */
static size_t formula(const struct model *m, int L, int slots, int inference)
{
	size_t n = m->n_state, tape = model_tape_elems(m);
	size_t used = (size_t)revolve_slots_used(L, slots);
	return m->be->elem * (inference ? 2 * n : used * n + tape + 4 * n);
}

/* Allocator after create = method_memory = formula; a step allocates
 * nothing and the depth peak stays at what create allocated. */
static void check_memory(struct model *m, int L, int slots, int inference)
{
	struct backend *be = m->be;
	struct method_config c = revolve_cfg(L, slots);
	size_t db, sb;
	char err[256];
	c.inference = inference;
	method_config_resolve(&c);
	cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)), 0, "%s",
		     err);
	void *z = dev_state(m);
	struct method *me = new_method(m, c);
	size_t live = be->mem.live[MEM_DEPTH];
	cr_assert_eq(live, db, "L=%d s=%d: allocated %zu, method_memory %zu", L,
		     slots, live, db);
	cr_assert_eq(db, formula(m, L, revolve_config(&c)->slots, inference),
		     "L=%d s=%d", L, slots);
	cr_assert_eq(sb, 0);
	backend_mem_reset_peak(be);
	size_t allocs = be->mem.n_allocs;
	if (inference) {
		model_inject_forward(m);
		method_forward(me, m->u, z, 0);
	} else {
		step(m, me, z, NULL);
	}
	cr_assert_eq(be->mem.n_allocs, allocs, "a step allocated");
	cr_assert_eq(be->mem.peak[MEM_DEPTH], live);
	cr_assert_eq(be->mem.peak[MEM_SOLVER], 0);
	method_destroy(me);
	backend_free(be, z);
	cr_assert_eq(be->mem.live[MEM_DEPTH], 0);
}

Test(memory, formula)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, pow2, 1);
	int cases[][2] = {{1, 1}, {2, 1}, {3, 1},  {3, 4},  {8, 3},
			  {8, 6}, {8, 9}, {16, 0}, {40, 2}, {12, 10000}};
	for (int i = 0; i < 10; i++) {
		check_memory(m, cases[i][0], cases[i][1], 0);
		check_memory(m, cases[i][0], cases[i][1], 1);
	}
	/* logarithmic: at L = 64 the default 6 slots and one tape, far below
	 * unroll's 64 tapes */
	size_t n = m->n_state, tape = model_tape_elems(m), e = m->be->elem;
	cr_assert_eq(formula(m, 64, 6, 0), e * (6 * n + tape + 4 * n));
	cr_assert_lt(formula(m, 64, 6, 0) * 8, e * 64 * tape);
	close_model(m);
}

/* --------------------------------------------------------- 5. config */

Test(config, slots_auto_is_round_log2)
{
	int Ls[] = {1, 2, 3, 5, 6, 12, 16, 70, 100000};
	int want[] = {1, 1, 2, 2, 3, 4, 4, 6, 17};
	for (int i = 0; i < 9; i++) {
		struct method_config c = revolve_cfg(Ls[i], 0);
		method_config_resolve(&c);
		cr_assert_eq(revolve_config(&c)->slots, want[i], "L=%d: %d",
			     Ls[i], revolve_config(&c)->slots);
		method_config_resolve(&c); /* idempotent */
		cr_assert_eq(revolve_config(&c)->slots, want[i]);
	}
	/* an explicit value stays, even beyond L */
	struct method_config c = revolve_cfg(4, 9);
	method_config_resolve(&c);
	cr_assert_eq(revolve_config(&c)->slots, 9);
}

Test(config, bad_slots_name_the_key)
{
	int bad[] = {-1, 10001, -100000};
	for (int i = 0; i < 3; i++) {
		struct method_config c = revolve_cfg(8, bad[i]);
		char err[256] = "", want[32];
		cr_assert_eq(method_config_validate(&c, err, sizeof(err)), -1);
		snprintf(want, sizeof(want), "slots=%d ", bad[i]);
		cr_assert(strncmp(err, want, strlen(want)) == 0 &&
			      strstr(err, "[0, 10000]"),
			  "message: %s", err);
	}
	struct method_config c = revolve_cfg(8, 10000);
	char err[256] = "";
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_str_eq(method_kind_name(revolve_kind()), "revolve");
}

/* The CLI refuses a bad value up front: exit 2, one line naming the key
 * and the range; --help lists the key and the method. */
Test(config, cli, .init = cli_setup, .fini = cli_teardown, .timeout = 60)
{
	char err[4096], *out, path[512];
	const char *bad[] = {"run", "method=revolve", "slots=-3", NULL};
	const struct cli_opts o = {0, "/dev/null"};
	cr_assert_eq(cli_run_with(bad, &o, err, sizeof(err)), 2, "%s", err);
	char *nl = strchr(err, '\n');
	cr_assert(nl && nl[1] == 0, "one line expected: %s", err);
	cr_assert(strstr(err, "slots=-3") && strstr(err, "[0, 10000]"), "%s",
		  err);
	const char *help[] = {"run", "--help", NULL};
	cr_assert_eq(cli_run_with(help, &o, err, sizeof(err)), 0, "%s", err);
	cli_path(path, sizeof(path), "stdout.txt");
	out = cli_read(path, NULL);
	cr_assert_not_null(out);
	cr_assert(strstr(out, "\n  slots "), "%s", out);
	cr_assert(strstr(out, "unroll, checkpoint, deq, revolve"), "%s", out);
	free(out);
}
