/* report_cost.h — the cost model of `deqbench report --price`
 * (docs/commands.md §report): a run's priced step time is Σ over the work
 * units of its record's `work` (results/SCHEMA.md §work) × the unit's
 * price from price records (§Price records) at the run's shape, plus the
 * fixed per-step cost `step_fixed` (measured by price, as every unit) per
 * optimizer step. Internal to the report. */
#ifndef DQ_BENCH_REPORT_COST_H
#define DQ_BENCH_REPORT_COST_H

#include <jansson.h>
#include <stddef.h>

/* The parts of a priced step, one per price it uses (block_fwd_recompute
 * is priced as block_fwd_taped, so it is that part). */
enum cost_unit {
	CU_FWD_TAPED,
	CU_FWD,
	CU_VJP,
	CU_VJP_INPUT,
	CU_OPT,
	CU_HOST,
	CU_ATTN,
	CU_HEAD_TRAIN,
	CU_HEAD_FWD,
	CU_HEAD_BWD,
	CU_SOLVER,
	CU_FIXED,
	CU_N
};

/* One priced step by part: ms[u], count × price of part u, and sd[u], the
 * standard deviation of the log of that price, from the price record's
 * 95% interval (lo_ms, hi_ms) read as normal on the log scale, 0 without
 * one; for solver_update interpolated in h as the price is. */
struct cost_parts {
	double ms[CU_N], sd[CU_N];
};
/* The prices of the price records prices (borrowed) whose shape is that
 * of run record rec (config model, d_model, n_heads, d_ff, seq_len,
 * batch_size / microbatches (the rows a micro-batch's units ran on),
 * precision — fp32 when absent —, device, and vocab_size from
 * the record's model.vocab_size): a new object {"units": {UNIT: ms per
 * call (host_bytes: per byte)}, "solver": {SOLVER: [[h, ms] ... by h]}},
 * the first record of each unit (of each solver and h) kept; a
 * solver_update record without `solver` is Broyden's; NULL when none
 * matches. */
json_t *report_cost_match(const json_t *prices, const json_t *rec);
/* (The object also holds "sd": {UNIT: the log sd of its price}, and each
 * solver point a third value, its log sd: struct cost_parts.) */

/* The priced milliseconds of one step of work object work's per-step
 * means `which` ("per_step", "per_step_first" or "per_step_last") at
 * prices m (report_cost_match), step_fixed apart: Σ per-step count ×
 * price, with block_fwd_recompute at block_fwd_taped's price,
 * attn_recompute at its own (0 in a record without it), a training
 * step's head forward and backward at head_train's (where priced, else
 * head_fwd + head_bwd) and solver_update at the solver's value at the
 * mean history length (solver_history_sum / solver_update), interpolated
 * linearly between the priced h (clamped to the ends) — the priced
 * points, not the fit a + b·h, which misses them —: f_solver's points,
 * or with b_solver another the mean of the two solvers' values; NULL
 * names (not a DEQ) leave updates unpriced. A unit counted (> 0) without
 * a price is appended, once, to unpriced (may be NULL). Each part's ms
 * and price sd are added to parts (NULL: not kept). NAN without work or
 * without that mean. */
double report_cost_units_ms(const json_t *work, const json_t *m,
			    const char *which, const char *f_solver,
			    const char *b_solver, json_t *unpriced,
			    struct cost_parts *parts);

/* The fixed cost of one step of work's `which` means: its optimizer steps
 * (1 per training step, 0 in evaluation; with microbatches = M its M
 * micro-batches, the head backwards, each uploading and injecting its
 * rows) × step_fixed's price, step_fixed
 * noted in unpriced without one (0 then); its part added to parts (NULL:
 * not kept). NAN without work. */
double report_cost_fixed_ms(const json_t *work, const json_t *m,
			    const char *which, json_t *unpriced,
			    struct cost_parts *parts);

/* The variance the prices' own uncertainty gives the log of a priced
 * step (delta method: Σ_u (sd_u · ms_u / Σ ms)²), or with y the log of
 * the ratio of step x over step y priced with the same price records
 * (their errors shared: Σ_u (sd_u · x's share − sd_u · y's share)²).
 * Parts are row means (report.c); 0 where a step sums to 0. */
double report_cost_log_var(const struct cost_parts *x,
			   const struct cost_parts *y);

#endif
