/* report_cost.h — the cost model of `deqbench report --price` (issue 40,
 * docs/commands.md §report): a run's priced step time is Σ over the work
 * units of its record's `work` (results/SCHEMA.md §work) × the unit's
 * price from price records (§Price records) at the run's shape, plus the
 * fixed per-step cost `step_fixed` (measured by price, as every unit) per
 * optimizer step. Internal to the report. */
#ifndef DQ_BENCH_REPORT_COST_H
#define DQ_BENCH_REPORT_COST_H

#include <jansson.h>
#include <stddef.h>

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
 * a price is appended, once, to unpriced (may be NULL). NAN without work
 * or without that mean. */
double report_cost_units_ms(const json_t *work, const json_t *m,
			    const char *which, const char *f_solver,
			    const char *b_solver, json_t *unpriced);

/* The fixed cost of one step of work's `which` means: its optimizer steps
 * (1 per training step, 0 in evaluation; with microbatches = M its M
 * micro-batches, the head backwards, each uploading and injecting its
 * rows) × step_fixed's price, step_fixed
 * noted in unpriced without one (0 then). NAN without work. */
double report_cost_fixed_ms(const json_t *work, const json_t *m,
			    const char *which, json_t *unpriced);

#endif
