/* run_work.c — see run_work.h. */
#include "run_work.h"

static const char *const unit_names[WORK_UNITS] = {
    [WORK_BLOCK_FWD_TAPED] = "block_fwd_taped",
    [WORK_BLOCK_FWD] = "block_fwd",
    [WORK_BLOCK_FWD_RECOMPUTE] = "block_fwd_recompute",
    [WORK_BLOCK_VJP] = "block_vjp",
    [WORK_BLOCK_VJP_INPUT] = "block_vjp_input",
    [WORK_SOLVER_UPDATE] = "solver_update",
    [WORK_SOLVER_HISTORY_SUM] = "solver_history_sum",
    [WORK_HEAD_FWD] = "head_fwd",
    [WORK_HEAD_BWD] = "head_bwd",
    [WORK_OPTIMIZER_STEP] = "optimizer_step",
    [WORK_HOST_BYTES] = "host_bytes",
};

const char *run_work_unit_name(int u)
{
	return u >= 0 && u < WORK_UNITS ? unit_names[u] : "?";
}

int run_work_edge(int n)
{
	return n <= 0 ? 0 : n / 10 < 1 ? 1 : n / 10;
}

/* Sum of x[0..n). The entries are integers below 2^53, so the sum is
 * exact while it stays there. */
static double sum_of(const double *x, int n)
{
	double s = 0;
	for (int i = 0; i < n; i++)
		s += x[i];
	return s;
}

static json_t *mean_json(const double *x, int n)
{
	return n > 0 ? json_real(sum_of(x, n) / n) : json_null();
}

/* {total, per_step, per_step_first, per_step_last} of x[0..n). */
static json_t *unit_json(const double *x, int n)
{
	json_t *o = json_object();
	int e = run_work_edge(n);
	json_object_set_new(o, "total", json_integer((json_int_t)sum_of(x, n)));
	json_object_set_new(o, "per_step", mean_json(x, n));
	json_object_set_new(o, "per_step_first", mean_json(x, e));
	json_object_set_new(o, "per_step_last", mean_json(x + n - e, e));
	return o;
}

json_t *run_work_json(const struct step_log *l, int p0, int n)
{
	json_t *o = json_object();
	if (n < 0)
		n = 0;
	json_object_set_new(o, "steps", json_integer(n));
	json_object_set_new(o, "edge_steps", json_integer(run_work_edge(n)));
	for (int u = 0; u < WORK_UNITS; u++)
		json_object_set_new(o, unit_names[u],
				    unit_json(l->work[u] + p0, n));
	return o;
}
