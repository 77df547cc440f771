/* plan_cost.h — `deqbench plan`'s cost model as arithmetic on calibration
 * numbers (cmd_plan.c's header gives the model): the unit costs from the
 * five calibration runs, and each candidate's predicted step from them.
 * No runs and no clocks, so tests/test_plan.c checks it on fixed numbers.
 * Header-only (static inline): cmd/ is built into the deqbench executable
 * alone, and the tests include this header. All times in ms.
 */
#ifndef DQ_BENCH_PLAN_COST_H
#define DQ_BENCH_PLAN_COST_H

#include <math.h>

/* The least step plan predicts: above 0, so a record's
 * plan.predicted_step_ms stays valid whatever the calibrations' noise. */
#define PLAN_MIN_MS 1e-3

/* One calibration run: its median step and the spread of its steps. */
struct plan_cal {
	double ms;  /* median step */
	double iqr; /* p75 - p25 of its timed steps (0: none known) */
};

/* The five calibration runs of the unit costs: unroll at La and at Lb
 * layers, revolve slots=1 at La (revolve_extra forwards more than La),
 * unroll at La with head_chunk, offload at La. */
struct plan_cals {
	struct plan_cal unroll_a, unroll_b, revolve, unroll_chunk, offload;
	int La, Lb;
	long revolve_extra;
};

/* The cost model's terms: T(c) = R·(head_chunk ? head_ratio : 1)
 * + fwd·F + vjp·V + (offload) tapes·X_tape. */
struct plan_costs {
	double R;	   /* the rest: embeddings, head, optimizer */
	double head_ratio; /* R with head_chunk over R without */
	double F, V;	   /* per block forward, per block VJP */
	double X_tape;	   /* offload: per tape moved to the host */
};

/* The least head_ratio: a chunked head does the same arithmetic in
 * pieces, so it may save time (cache) but not nine tenths of it; below
 * this the calibrations are noise. */
#define PLAN_MIN_HEAD_RATIO 0.1

/* b - a of two calibrations' medians, or 0 when the difference is within
 * their noise: no more than the larger interquartile range, about two
 * standard errors of a difference of two medians of a few steps. */
static inline double plan_delta(struct plan_cal a, struct plan_cal b)
{
	double d = b.ms - a.ms, noise = a.iqr > b.iqr ? a.iqr : b.iqr;
	return fabs(d) <= noise ? 0 : d;
}

static inline double plan_nonneg(double x)
{
	return x > 0 ? x : 0;
}

/* The unit costs from the calibrations c. A cost is never negative (a
 * difference that came out below zero is noise: 0), F is at most the
 * slope F + V, and the head_chunk effect is a ratio of the head's time R,
 * 1 where the delta is within the noise or R is 0 (no head to scale). */
static inline void plan_costs_fit(const struct plan_cals *c,
				  struct plan_costs *k)
{
	double T1 = c->unroll_a.ms, T2 = c->unroll_b.ms, T3 = c->revolve.ms;
	double T5 = c->offload.ms, d = plan_delta(c->unroll_a, c->unroll_chunk);
	double FV = plan_nonneg((T1 - T2) / (c->La - c->Lb));
	double F = c->revolve_extra > 0 ? (T3 - T1) / c->revolve_extra : FV / 2;
	k->F = F < 0 ? 0 : F > FV ? FV : F;
	k->V = FV - k->F;
	k->R = plan_nonneg(T1 - c->La * FV);
	k->head_ratio = k->R > 0 ? (k->R + d) / k->R : 1;
	if (k->head_ratio < PLAN_MIN_HEAD_RATIO)
		k->head_ratio = PLAN_MIN_HEAD_RATIO;
	k->X_tape = plan_nonneg((T5 - T1) / (c->La - 2));
}

/* ms, or PLAN_MIN_MS, counted in *clamped, when ms is below it (or
 * NaN). */
static inline double plan_floor(double ms, int *clamped)
{
	if (ms >= PLAN_MIN_MS)
		return ms;
	(*clamped)++;
	return PLAN_MIN_MS;
}

/* The step of a candidate whose evaluation counts are closed forms: fwd
 * block forwards and vjp block VJPs a step, head_chunk on with chunk,
 * tapes tapes moved to the host (offload, else 0); at least PLAN_MIN_MS.
 * *clamped counts the predictions raised to that floor. */
static inline double plan_predict_ms(const struct plan_costs *k, long fwd,
				     long vjp, int chunk, long tapes,
				     int *clamped)
{
	return plan_floor(k->R * (chunk ? k->head_ratio : 1) +
			      (double)fwd * k->F + (double)vjp * k->V +
			      (double)tapes * k->X_tape,
			  clamped);
}

/* The with-head_chunk twin of a calibrated candidate (deq) whose own
 * calibration step is ms: its head's time is R, but no more than its
 * whole step (the unroll calibrations R comes from may be far longer and
 * noisier), scaled by head_ratio; at least PLAN_MIN_MS, *clamped as
 * plan_predict_ms's. */
static inline double plan_chunk_twin_ms(const struct plan_costs *k, double ms,
					int *clamped)
{
	double head = k->R < ms ? k->R : ms;
	return plan_floor(ms + head * (k->head_ratio - 1), clamped);
}

#endif
