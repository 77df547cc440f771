/* revolve_schedule.h — private to methods/ (and its tests): the binomial
 * checkpointing schedule of method=revolve (revolve.c) on its own, without a
 * model, so that tests can run it against a simulator.
 *
 * L layers z_{i+1} = f(z_i), z₀ = 0, one tape, s checkpoint slots (stored
 * states; z₀ is refilled, never stored). The schedule is Griewank's (1992;
 * Griewank & Walther, ACM TOMS 26(1), 2000, "Algorithm 799: revolve") with
 * c = s + 1 snapshots, his count including the snapshot of the initial state.
 * It calls three operations (struct revolve_ops), and counts in their units:
 *   advance  n untaped block applications (A(L, s) = their sum per step),
 *   taped    one block application that fills the tape (L per step: each
 *            layer once, right before its VJP),
 *   vjp      one VJP through the tape (L per step, layers L−1 down to 0).
 * A(L, s) is the minimum over all schedules with one tape and s slots:
 *   A(L, s) = r·L − C(s + 1 + r, r − 1),  r the smallest integer ≥ 0 with
 *   C(s + 1 + r, r) ≥ L
 * (Griewank & Walther's t(l, c) = r·l − β(c + 1, r − 1), β(c, r) = C(c+r, c),
 * with c = s + 1). A(1, s) = 0; A(L, s) = L − 1 for s ≥ L − 2 (every state
 * computed once untaped); s = 1 gives r ≈ √(2L), A ≈ (2/3)·L·√(2L).
 * tests/test_revolve.c checks A against the dynamic program
 *   A(1, s) = 0,  A(L, 0) = L(L−1)/2,
 *   A(L, s) = min_{1≤j<L} [ j + A(L−j, s−1) + A(j, s) ]
 * and runs the schedule on a simulator that checks every operation.
 */
#ifndef DQ_REVOLVE_SCHEDULE_H
#define DQ_REVOLVE_SCHEDULE_H

#include <stdint.h>

/* Where a state is: z₀ = 0 (refilled on use), the vector the last advance
 * left (the next operation reads it), or a slot 0..slots−1. */
enum { REVOLVE_ZERO = -1, REVOLVE_WORK = -2 };

/* The operations a schedule makes; ctx is revolve_plan's. `layer` is the
 * index of the first layer applied (the state at `from` is z_layer). */
struct revolve_ops {
	/* n ≥ 1 untaped layers from `from`, z_{layer+n} to `to` (a slot or
	 * REVOLVE_WORK) */
	void (*advance)(void *ctx, int from, int to, int layer, int n);
	/* layer `layer` with the tape, from the state at `from` */
	void (*taped)(void *ctx, int from, int layer);
	/* the VJP of layer `layer` through the tape */
	void (*vjp)(void *ctx, int layer);
};

struct revolve_plan {
	int layers; /* L ≥ 1 */
	int slots;  /* revolve_slots_used(L, s): the slots the schedule uses */
	const struct revolve_ops *ops;
	void *ctx;
};

/* Slots a schedule for L layers with s ≥ 0 slots uses: min(s, max(L−2, 0))
 * (with L−2 slots it already reaches A = L − 1). */
int revolve_slots_used(int layers, int slots);

/* A(L, s) above: untaped block applications per step, L ≥ 1, s ≥ 0. */
int64_t revolve_advances(int layers, int slots);

/* The forward part: advances from z₀ to z_{L−1}, storing checkpoints, then
 * layer L−1 with the tape. Makes L − 1 advances, one taped application. */
void revolve_schedule_forward(const struct revolve_plan *p);

/* The rest, after revolve_schedule_forward: the VJPs of layers L−1 … 0, each preceded
 * by its taped application (but L−1's) and the advances it needs. Recursion
 * depth at most slots + 1. */
void revolve_schedule_backward(const struct revolve_plan *p);

#endif
