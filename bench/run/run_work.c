/* run_work.c — see run_work.h. */
#include "run_work.h"

#include <math.h>
#include <string.h>

#include "../config/config.h"
#include "../records/record.h"

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
    [WORK_ATTN_RECOMPUTE] = "attn_recompute",
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

/* {total, per_step, per_step_timed, per_step_first, per_step_last} of
 * x[0..n), the first w steps untimed. */
static json_t *unit_json(const double *x, int n, int w)
{
	json_t *o = json_object();
	int e = run_work_edge(n);
	json_object_set_new(o, "total", json_integer((json_int_t)sum_of(x, n)));
	json_object_set_new(o, "per_step", mean_json(x, n));
	json_object_set_new(o, "per_step_timed", mean_json(x + w, n - w));
	json_object_set_new(o, "per_step_first", mean_json(x, e));
	json_object_set_new(o, "per_step_last", mean_json(x + n - e, e));
	return o;
}

json_t *run_work_json(const struct step_log *l, int p0, int n, int w)
{
	json_t *o = json_object();
	if (n < 0)
		n = 0;
	w = w < 0 ? 0 : w > n ? n : w;
	json_object_set_new(o, "steps", json_integer(n));
	json_object_set_new(o, "edge_steps", json_integer(run_work_edge(n)));
	for (int u = 0; u < WORK_UNITS; u++)
		json_object_set_new(o, unit_names[u],
				    unit_json(l->work[u] + p0, n, w));
	return o;
}

/* H(n) of docs/methods.md §Work for one solve of n (integer) evaluations:
 * broyden Σ_{t=0}^{n−2} min(t, h), anderson Σ_{j=1}^{n−1} min(j, h). */
static double history_sum(int anderson, int h, long n)
{
	double s = 0;
	for (long t = 0; t + 1 < n; t++) {
		long k = anderson ? t + 1 : t;
		s += (double)(k < h ? k : h);
	}
	return s;
}

/* U(n) and H(n) of one solve of n evaluations with solver (its history
 * h), linear between integers for a mean n. */
static void solve_units(const char *solver, int h, double n, double *u,
			double *hs)
{
	int anderson = !strcmp(solver, "anderson");
	long n0 = (long)floor(n);
	*u = *hs = 0;
	if (!strcmp(solver, "fixed_point") || !(n >= 1))
		return;
	*u = n - 1;
	*hs = history_sum(anderson, h, n0) +
	      (n - (double)n0) * (history_sum(anderson, h, n0 + 1) -
				  history_sum(anderson, h, n0));
}

static const char *mstr(const json_t *m, const char *key)
{
	const char *v = json_string_value(json_object_get(m, key));
	return v ? v : "";
}

static int mint(const json_t *m, const char *key)
{
	return (int)json_number_value(json_object_get(m, key));
}

/* A deq step's work from its solves s and its method object m
 * (config_method_json). */
static void deq_step(const json_t *m, const struct work_solves *s,
		     double w[WORK_UNITS])
{
	const char *fs = mstr(m, "f_solver"), *bs = mstr(m, "b_solver");
	const char *bm = mstr(m, "b_mode");
	int ift = !strcmp(bm, "ift");
	double app = !strcmp(bm, "phantom") ? mint(m, "phantom_steps") : 1;
	int hf = mint(m, strcmp(fs, "anderson") ? "f_history" : "anderson_m");
	int hb = mint(m, strcmp(bs, "anderson") ? "b_history" : "anderson_m");
	double uf, hsf, ub = 0, hsb = 0;
	solve_units(fs, hf, s->nf, &uf, &hsf);
	if (ift)
		solve_units(bs, hb, s->nb, &ub, &hsb);
	w[WORK_BLOCK_FWD_TAPED] = app + 2 * s->jac;
	w[WORK_BLOCK_FWD] = s->nf;
	w[WORK_BLOCK_VJP] = app + 2 * s->jac;
	w[WORK_BLOCK_VJP_INPUT] = (ift ? s->nb : 0) + s->jac;
	w[WORK_SOLVER_UPDATE] = uf + ub;
	w[WORK_SOLVER_HISTORY_SUM] = hsf + hsb;
}

/* A layered method's step: fwd block forwards a step (method_evals_per_
 * step), the rows of docs/methods.md §Work. */
static void layered_step(const struct method_config *mc, long fwd,
			 double tape_bytes, double w[WORK_UNITS])
{
	const char *name = method_kind_name(mc->method);
	int L = mc->layers;
	double extra = (double)(fwd - L); /* untaped passes beyond L */
	w[WORK_BLOCK_FWD_TAPED] = L;
	w[WORK_BLOCK_VJP] = L;
	if (!strcmp(name, "checkpoint")) {
		json_t *m = config_method_json(mc);
		w[WORK_BLOCK_FWD_TAPED] = L - extra;
		w[WORK_BLOCK_FWD] = w[WORK_BLOCK_FWD_RECOMPUTE] = extra;
		/* selective=true: one in each VJP, as method=selective */
		if (json_is_true(json_object_get(m, "selective")))
			w[WORK_ATTN_RECOMPUTE] = L;
		json_decref(m);
	} else if (!strcmp(name, "revolve")) {
		w[WORK_BLOCK_FWD_TAPED] = 1;
		w[WORK_BLOCK_FWD] = extra;
		w[WORK_BLOCK_FWD_RECOMPUTE] = L - 1;
	} else if (!strcmp(name, "selective")) {
		w[WORK_ATTN_RECOMPUTE] = L; /* one in each VJP */
	} else if (!strcmp(name, "offload")) {
		w[WORK_HOST_BYTES] = 2.0 * (L > 2 ? L - 2 : 0) * tape_bytes;
	} else if (!strcmp(name, "managed")) {
		json_t *m = config_method_json(mc);
		int pf = json_is_true(json_object_get(m, "managed_prefetch"));
		w[WORK_HOST_BYTES] = pf ? (L > 1 ? L - 1 : 0) * tape_bytes : 0;
		json_decref(m);
	}
}

int run_work_step(const struct method_config *mc, double tape_bytes,
		  const struct work_solves *s, double w[WORK_UNITS])
{
	long f, v;
	for (int u = 0; u < WORK_UNITS; u++)
		w[u] = 0;
	w[WORK_HEAD_FWD] = w[WORK_HEAD_BWD] = w[WORK_OPTIMIZER_STEP] = 1;
	if (method_evals_per_step(mc, &f, &v) == 0) {
		layered_step(mc, f, tape_bytes, w);
		return 0;
	}
	if (!s)
		return -1;
	json_t *m = config_method_json(mc);
	deq_step(m, s, w);
	json_decref(m);
	return 0;
}

void run_work_micro(double w[WORK_UNITS], int M)
{
	if (M <= 1)
		return;
	for (int u = 0; u < WORK_UNITS; u++)
		if (u != WORK_OPTIMIZER_STEP)
			w[u] *= M;
}

/* The means of the record's work object into w (over its timed steps,
 * as its measured mean step's, where it has them); -1 without one. */
static int from_work(const json_t *wk, double w[WORK_UNITS])
{
	const char *which =
	    json_is_number(json_object_get(json_object_get(wk, unit_names[0]),
					   "per_step_timed"))
		? "per_step_timed"
		: "per_step";
	for (int u = 0; u < WORK_UNITS; u++) {
		double x =
		    record_num(json_object_get(wk, unit_names[u]), which);
		if (!isfinite(x))
			return -1;
		w[u] = x;
	}
	return 0;
}

/* The mean over the trace's deq steps of run_work_step; -1 when it has
 * no forward iterations. */
static int from_trace(const json_t *rec, const struct method_config *mc,
		      double w[WORK_UNITS])
{
	const json_t *t = json_object_get(rec, "trace");
	const json_t *fi = json_object_get(t, "fwd_iters");
	const json_t *bi = json_object_get(t, "bwd_iters");
	const json_t *jl = json_object_get(t, "jac_loss");
	double x[WORK_UNITS];
	size_t n = 0, p0 = 0;
	double p = record_num(rec, "pretrain.steps");
	if (isfinite(p) && p > 0)
		p0 = (size_t)p;
	for (int u = 0; u < WORK_UNITS; u++)
		w[u] = 0;
	for (size_t i = p0; i < json_array_size(fi); i++) {
		const json_t *f = json_array_get(fi, i);
		struct work_solves s = {
		    json_number_value(f),
		    json_number_value(json_array_get(bi, i)),
		    json_is_number(json_array_get(jl, i)) ? 1 : 0};
		if (!json_is_number(f))
			continue;
		run_work_step(mc, 0, &s, x);
		for (int u = 0; u < WORK_UNITS; u++)
			w[u] += x[u];
		n++;
	}
	if (!n)
		return -1;
	for (int u = 0; u < WORK_UNITS; u++)
		w[u] /= (double)n;
	return 0;
}

/* run_work_from_record without the micro-batches. */
static int from_record(const json_t *rec, const struct method_config *mc,
		       double tape_bytes, double w[WORK_UNITS],
		       const char **how)
{
	struct work_solves s;
	double steps = record_num(rec, "evals.steps");
	if (method_evals_per_step(mc, &(long){0}, &(long){0}) == 0) {
		*how = "formula";
		return run_work_step(mc, tape_bytes, NULL, w);
	}
	if (from_trace(rec, mc, w) == 0) {
		*how = "trace";
		return 0;
	}
	s.nf = record_num(rec, "solver.forward.iters_mean");
	s.nb = record_num(rec, "solver.backward.iters_mean");
	s.jac = record_num(rec, "solver.jac_loss_steps") / steps;
	if (!isfinite(s.nf))
		return -1;
	if (!isfinite(s.nb))
		s.nb = 0;
	if (!isfinite(s.jac))
		s.jac = 0;
	*how = "means";
	return run_work_step(mc, tape_bytes, &s, w);
}

int run_work_from_record(const json_t *rec, const struct method_config *mc,
			 double tape_bytes, double w[WORK_UNITS],
			 const char **how)
{
	double M = record_num(rec, "config.microbatches");
	if (from_work(json_object_get(rec, "work"), w) == 0) {
		*how = "work";
		return 0;
	}
	if (from_record(rec, mc, tape_bytes, w, how) != 0)
		return -1;
	run_work_micro(w, isfinite(M) ? (int)M : 1);
	return 0;
}
