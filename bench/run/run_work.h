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
 * price. Internal to the runner.
 */
#ifndef DQ_BENCH_RUN_WORK_H
#define DQ_BENCH_RUN_WORK_H

#include <jansson.h>

#include "../../methods/method.h"
#include "step_log.h"

/* The record key of unit u (enum work_unit): "block_fwd_taped", ... */
const char *run_work_unit_name(int u);

/* Entries at each end that the first and last means cover: a tenth of n,
 * at least 1 (0 when n is 0), as health's fwd_converged_last. */
int run_work_edge(int n);

/* The work object over entries p0 .. p0+n-1 of l (n >= 0), the first w
 * of them untimed (warmup): steps, edge and per unit {total, per_step,
 * per_step_timed (the mean over the timed steps, what the step time's
 * mean covers), per_step_first, per_step_last}, the means null when they
 * cover no step. New reference. */
json_t *run_work_json(const struct step_log *l, int p0, int n, int w);

/* A DEQ training step's solves: the forward and backward solves'
 * evaluations (n_f, n_b) and whether the step applied the Jacobian
 * regulariser (J). Means over steps are allowed (a fraction J, n between
 * integers: run_work_step is then linear between them). */
struct work_solves {
	double nf, nb, jac;
};

/* One training step's work by unit (enum work_unit) of resolved method
 * config mc by docs/methods.md §Work's formulas, the counts run_work_json
 * reports (tests/test_work.c pins both to a real run): the layered
 * methods' from method_evals_per_step's closed forms (checkpoint's and
 * revolve's forwards beyond L are their untaped passes), host_bytes from
 * tape_bytes (offload: 2·max(L − 2, 0) tapes; managed: max(L − 1, 0) with
 * managed_prefetch); a deq step's from s (its solvers' U(n) and H(n) of
 * §Work at histories mc's f_history / b_history, anderson_m). head_fwd =
 * head_bwd = optimizer_step = 1. 0, or -1 for deq without s. */
int run_work_step(const struct method_config *mc, double tape_bytes,
		  const struct work_solves *s, double w[WORK_UNITS]);

/* A step of microbatches = M (docs/methods.md §Work): M micro-batch
 * passes and one optimizer step, so w, one pass's work (run_work_step of
 * a model of batch_size / M rows), has every unit but optimizer_step
 * multiplied by M, in place. Nothing at M <= 1. */
void run_work_micro(double w[WORK_UNITS], int M);

/* The per-step work of a training record rec of resolved method config mc
 * (the record's own config, or one equal to it in what the work depends
 * on) into w: its `work` object's per-step means where it has one (how =
 * "work"), else run_work_step averaged over its trace's steps
 * (trace.fwd_iters, bwd_iters, jac_loss; "trace"), else run_work_step at
 * the mean iterations of its `solver` object and the fraction
 * solver.jac_loss_steps / evals.steps ("means": U is exact, H is
 * interpolated at the mean, which the mean of H(n) exceeds where n
 * varies). Those made before pretrain_steps are the steps after it. The
 * last three are run_work_micro'd by the record's config.microbatches
 * (absent: 1); a deq's trace then holds each step's longest micro-batch
 * solve, so they are an upper bound there. 0, or -1 when rec holds none
 * of them. */
int run_work_from_record(const json_t *rec, const struct method_config *mc,
			 double tape_bytes, double w[WORK_UNITS],
			 const char **how);

#endif
