/* run_work.h — the record's `work` object (results/SCHEMA.md §work;
 * docs/methods.md §Work): what a run computed, counted by unit (block
 * forwards with and without a tape, recomputed forwards, full and
 * input-only VJPs, the solvers' own iterations and their history, head
 * and optimizer passes, bytes moved between device and host), over a
 * range of the per-step log's entries: the total, the mean per entry and
 * the means over the first and last tenth of them. A training record's
 * covers the steps `evals` covers, `pretrain.work` the pretraining
 * steps, an eval record's the valid batches of `inference`. Exact and
 * machine-independent for a given seed and arithmetic: time is work ×
 * price (issue 40). Internal to the runner.
 */
#ifndef DQ_BENCH_RUN_WORK_H
#define DQ_BENCH_RUN_WORK_H

#include <jansson.h>

#include "step_log.h"

/* The record key of unit u (enum work_unit): "block_fwd_taped", ... */
const char *run_work_unit_name(int u);

/* Entries at each end that the first and last means cover: a tenth of n,
 * at least 1 (0 when n is 0), as health's fwd_converged_last. */
int run_work_edge(int n);

/* The work object over entries p0 .. p0+n-1 of l (n >= 0): steps, edge
 * and per unit {total, per_step, per_step_first, per_step_last}, the
 * means null when n is 0. New reference. */
json_t *run_work_json(const struct step_log *l, int p0, int n);

#endif
