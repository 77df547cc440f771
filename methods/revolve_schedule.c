/* revolve_schedule.c — the binomial checkpointing schedule (revolve_schedule.h
 * has the model, the counts and the sources).
 *
 * Notation: β(c, r) = C(c + r, c), β(c, r) = 0 for r < 0; T(l, c) the fewest
 * advances reversing l layers with c snapshots (the one holding the first
 * state included), so A(L, s) = T(L, s + 1). ρ_c(l), the repetition number,
 * is the smallest r ≥ 0 with β(c, r) ≥ l; T(l, c) = ρ·l − β(c + 1, ρ − 1).
 *
 * The split. Reversing [lo, hi) (l = hi − lo ≥ 2 layers, its first state
 * z_lo held) with c snapshots: advance j layers to z_{lo+j}, store it, reverse
 * [lo+j, hi) with c − 1 snapshots, then [lo, lo+j) with c, at cost
 *   g(j) = j + T(l − j, c − 1) + T(j, c).
 * From the closed form, T(m + 1, c) − T(m, c) = ρ_c(m + 1), so
 *   g(j + 1) − g(j) = 1 + ρ_c(j + 1) − ρ_{c−1}(l − j),
 * nondecreasing in j: g is convex and its smallest minimiser is the smallest
 * j with ρ_{c−1}(l − j) ≤ 1 + ρ_c(j + 1). With r = ρ_c(l) ≥ 1, no j below
 * β(c, r − 2) qualifies (it would need l − j ≤ β(c − 1, r − 1), but
 * l > β(c, r − 1) = β(c, r − 2) + β(c − 1, r − 1)), and for
 * β(c, r − 2) ≤ j < β(c, r − 1) the test reads l − j ≤ β(c − 1, r); since
 * l ≤ β(c, r) = β(c, r − 1) + β(c − 1, r),
 *   j* = max(β(c, r − 2), l − β(c − 1, r), 1)
 * (c = 1: ρ_0(x) is 0 for x = 1 and infinite above, j* = l − 1). When the
 * upper part is a single layer its first state goes straight into the taped
 * application and needs no slot; otherwise it takes the next slot, so a
 * part with c snapshots starts at slot s − c (z₀ for c = s + 1) and stores
 * into slot s + 1 − c: at most s slots, as c ≥ 2 wherever it stores.
 */
#include "revolve_schedule.h"

int revolve_slots_used(int layers, int slots)
{
	int most = layers > 2 ? layers - 2 : 0;
	return slots < most ? slots : most;
}

/* ρ_c(l) for c ≥ 1, l ≥ 1, with β(c, ρ − 2) in *b2 and β(c, ρ) in *b. Within
 * the key ranges (l ≤ 100000 layers, c ≤ 10001) β(c, ρ) < l·(c + 1) < 2^30
 * and every product here and below stays under 2^48. */
static int repetitions(int64_t l, int c, int64_t *b2, int64_t *b)
{
	int64_t prev2 = 0, prev = 0,
		cur = 1; /* β(c, r−2), β(c, r−1), β(c, r) */
	int r = 0;
	while (cur < l) {
		r++;
		prev2 = prev;
		prev = cur;
		cur = cur * (c + r) /
		      r; /* exact: C(c+r, r) = C(c+r−1, r−1)(c+r)/r */
	}
	*b2 = prev2;
	*b = cur;
	return r;
}

int64_t revolve_advances(int layers, int slots)
{
	int c = slots + 1;
	int64_t b2, b;
	int r = repetitions(layers, c, &b2, &b);
	/* β(c + 1, r − 1) = C(c + r, r − 1) = β(c, r)·r/(c + 1), exact */
	return (int64_t)r * layers - b * r / (c + 1);
}

/* j*(l, c) above: layers l ≥ 2, snapshots c ≥ 1. */
static int split(int l, int c)
{
	int64_t b2, b, j;
	if (c == 1)
		return l - 1;
	int r = repetitions(l, c, &b2, &b);
	j = l - b * c / (c + r); /* β(c − 1, r) = β(c, r)·c/(c + r), exact */
	if (j < b2)
		j = b2;
	return j < 1 ? 1 : (int)j;
}

/* The advances of [lo, hi) with c snapshots down its chain of upper parts
 * (store, go up), ending with the taped application of layer hi − 1. */
static void descend(const struct revolve_plan *p, int lo, int hi, int c)
{
	int from = p->slots - c; /* REVOLVE_ZERO at the top */
	while (hi - lo > 1) {
		int j = split(hi - lo, c);
		int to = hi - lo - j > 1 ? p->slots + 1 - c : REVOLVE_WORK;
		p->ops->advance(p->ctx, from, to, lo, j);
		from = to;
		lo += j;
		c--;
	}
	p->ops->taped(p->ctx, from, lo);
}

/* Reverses [lo, hi) with c snapshots after descend(lo, hi, c): the tape
 * holds layer hi − 1. The lower parts loop, the upper ones recurse (c − 1),
 * so the depth is at most c. */
static void ascend(const struct revolve_plan *p, int lo, int hi, int c)
{
	while (hi - lo > 1) {
		int j = split(hi - lo, c);
		ascend(p, lo + j, hi, c - 1);
		hi = lo + j;
		descend(p, lo, hi, c);
	}
	p->ops->vjp(p->ctx, lo);
}

void revolve_schedule_forward(const struct revolve_plan *p)
{
	descend(p, 0, p->layers, p->slots + 1);
}

void revolve_schedule_backward(const struct revolve_plan *p)
{
	ascend(p, 0, p->layers, p->slots + 1);
}
