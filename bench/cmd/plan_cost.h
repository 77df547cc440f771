/* plan_cost.h — `deqbench plan`'s cost model as arithmetic on calibration
 * numbers (cmd_plan.c's header gives the model): the unit costs from the
 * five calibration runs, and each candidate's predicted step from them.
 * No runs and no clocks, so tests/test_plan.c checks it on fixed numbers.
 * Header-only (static inline): cmd/ is built into the deqbench executable
 * alone, and the tests include this header. All times in ms.
 */
#ifndef DQ_BENCH_PLAN_COST_H
#define DQ_BENCH_PLAN_COST_H

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

/* The unit costs from the calibrations c. */
static inline void plan_costs_fit(const struct plan_cals *c,
				  struct plan_costs *k)
{
	double T1 = c->unroll_a.ms, T2 = c->unroll_b.ms, T3 = c->revolve.ms;
	double T4 = c->unroll_chunk.ms, T5 = c->offload.ms;
	double FV = (T1 - T2) / (c->La - c->Lb);
	k->F = c->revolve_extra > 0 ? (T3 - T1) / c->revolve_extra : FV / 2;
	k->V = FV - k->F;
	k->R = T1 - c->La * FV;
	k->head_ratio = k->R != 0 ? (k->R + (T4 - T1)) / k->R : 1;
	k->X_tape = (T5 - T1) / (c->La - 2);
}

/* The step of a candidate whose evaluation counts are closed forms: fwd
 * block forwards and vjp block VJPs a step, head_chunk on with chunk,
 * tapes tapes moved to the host (offload, else 0). *clamped is set to 1
 * when the prediction was raised to the floor, else left as it is. */
static inline double plan_predict_ms(const struct plan_costs *k, long fwd,
				     long vjp, int chunk, long tapes,
				     int *clamped)
{
	(void)clamped;
	return k->R * (chunk ? k->head_ratio : 1) + (double)fwd * k->F +
	       (double)vjp * k->V + (double)tapes * k->X_tape;
}

/* The with-head_chunk twin of a calibrated candidate (deq) whose own
 * calibration step is ms; *clamped as plan_predict_ms's. */
static inline double plan_chunk_twin_ms(const struct plan_costs *k, double ms,
					int *clamped)
{
	(void)clamped;
	return ms + k->R * (k->head_ratio - 1);
}

#endif
