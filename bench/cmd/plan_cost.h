/* plan_cost.h — `deqbench plan`'s cost model as arithmetic, work ×
 * price (cmd_plan.c's header says where each number comes from):
 * a candidate's step is
 *   T = Σ_u w_u · price_u + step_fixed,
 * w_u its per-step count of work unit u (run_work_step, or a committed
 * run's, run_work_from_record), price_u the unit's price at the model's
 * shape, and step_fixed the priced cost of a step outside the units, once
 * per optimizer step — the pricing `report --price` does
 * (report_cost_units_ms, report_cost_fixed_ms: block_fwd_recompute at
 * block_fwd_taped's price, a training step's head at head_train's,
 * host_bytes per byte, solver_update at the solver's value at the mean
 * history length). No runs and no clocks, so tests/test_plan_work.c
 * checks it on fixed numbers. Header-only (static inline): cmd/ is built
 * into the deqbench executable alone, and the tests include this header.
 * Times in ms.
 */
#ifndef DQ_BENCH_PLAN_COST_H
#define DQ_BENCH_PLAN_COST_H

#include <jansson.h>
#include <math.h>

#include "../report/report_cost.h"
#include "../run/run_work.h"

/* The least step plan predicts: above 0, so a record's
 * plan.predicted_step_ms stays valid whatever the prices. */
#define PLAN_MIN_MS 1e-3

/* w as a work object of per-step means (results/SCHEMA.md §work's
 * shape, "per_step" alone). New reference. */
static inline json_t *plan_work_json(const double w[WORK_UNITS])
{
	json_t *o = json_object();
	for (int u = 0; u < WORK_UNITS; u++)
		json_object_set_new(o, run_work_unit_name(u),
				    json_pack("{s:f}", "per_step", w[u]));
	return o;
}

/* Σ w_u · price_u at prices m (report_cost_match), step_fixed apart;
 * f_solver and b_solver name a deq's solvers (NULL for the other
 * methods). A unit counted without a price is appended to unpriced (may
 * be NULL) and adds 0. */
static inline double plan_units_ms(const double w[WORK_UNITS], const json_t *m,
				   const char *f_solver, const char *b_solver,
				   json_t *unpriced)
{
	json_t *wk = plan_work_json(w);
	double ms = report_cost_units_ms(wk, m, "per_step", f_solver, b_solver,
					 unpriced, NULL);
	json_decref(wk);
	return ms;
}

/* The fixed cost of a step of w at prices m: its optimizer steps ×
 * step_fixed's price; 0, and step_fixed in unpriced, without one. */
static inline double plan_fixed_ms(const double w[WORK_UNITS], const json_t *m,
				   json_t *unpriced)
{
	json_t *wk = plan_work_json(w);
	double ms = report_cost_fixed_ms(wk, m, "per_step", unpriced, NULL);
	json_decref(wk);
	return ms > 0 ? ms : 0;
}

/* units + fixed, or PLAN_MIN_MS, counted in *clamped, when that is below
 * it (or NaN). */
static inline double plan_step_ms(double units_ms, double fixed_ms,
				  int *clamped)
{
	double ms = units_ms + fixed_ms;
	if (ms >= PLAN_MIN_MS)
		return ms;
	(*clamped)++;
	return PLAN_MIN_MS;
}

#endif
