/* validate_cross.c — see validate_cross.h: the rules between a record's
 * fields. Each rule reads the fields it needs and skips when one is absent
 * or of the wrong type (the walk of validate.c reports those). O(fields +
 * trace entries of the record).
 */
#include "validate_cross.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../methods/method.h"
#include "../config/config.h"
#include "health.h"

/* The member at dotted path p under o ("health.verdict"); NULL when a part
 * is absent or o is not an object. */
static const json_t *at(const json_t *o, const char *p)
{
	char key[64];
	while (o && *p) {
		size_t n = strcspn(p, ".");
		snprintf(key, sizeof(key), "%.*s", (int)n, p);
		o = json_object_get(o, key);
		p += n + (p[n] == '.');
	}
	return o;
}

/* 1 with *x when the member at p is a number. */
static int num(const json_t *o, const char *p, double *x)
{
	const json_t *v = at(o, p);
	if (!json_is_number(v))
		return 0;
	*x = json_number_value(v);
	return 1;
}

/* 1 with *x when the member at p is an integer (the int fields: a real
 * there is the walk's problem). */
static int cnt(const json_t *o, const char *p, double *x)
{
	const json_t *v = at(o, p);
	if (!json_is_integer(v))
		return 0;
	*x = (double)json_integer_value(v);
	return 1;
}

/* 1 when the member at p is the string s. */
static int is(const json_t *o, const char *p, const char *s)
{
	const char *v = json_string_value(at(o, p));
	return v && !strcmp(v, s);
}

static double slack(double a, double b)
{
	double m = fmax(fabs(a), fabs(b));
	return VALIDATE_TOL * (m > 1 ? m : 1);
}

/* a <= b and a == b within VALIDATE_TOL (validate_cross.h). */
static int le(double a, double b)
{
	return a <= b + slack(a, b);
}

static int near(double a, double b)
{
	return fabs(a - b) <= slack(a, b);
}

/* config.method is deq. */
static int is_deq(const json_t *rec)
{
	return is(rec, "config.method", "deq");
}

/* ---- health ---- */

/* The verdict against the status and the figures it was made from. */
static void verdict_rules(struct validate_walk *w, const json_t *rec)
{
	const json_t *h = json_object_get(rec, "health");
	const char *v = json_string_value(at(h, "verdict"));
	const char *st = json_string_value(json_object_get(rec, "status"));
	double n = 0, sp = 0, fin = 0, min = 0, first;
	int have_s, have_l, div = st && !strcmp(st, "diverged");
	if (!json_is_object(h) || !v || !st)
		return;
	if (div != !strcmp(v, "diverged"))
		validate_problem(
		    w, "health.verdict",
		    "expected %s with status %s (diverged exactly when the "
		    "run stopped as diverged), got \"%s\"",
		    div ? "diverged" : "healthy or unstable", st, v);
	have_s = cnt(h, "steps", &n) && cnt(h, "spike_steps", &sp);
	have_l = num(h, "loss_final", &fin) && num(h, "loss_min", &min);
	if (have_s && sp > n)
		validate_problem(
		    w, "health.spike_steps",
		    "expected at most health.steps (%.0f), got %.0f", n, sp);
	if (have_l && !le(min, fin))
		validate_problem(
		    w, "health.loss_min",
		    "expected at most loss_final (%.17g; the lowest "
		    "window mean includes the last window), got %.17g",
		    fin, min);
	if (strcmp(v, "healthy"))
		return;
	if (have_s && sp > HEALTH_SPIKE_SHARE * n)
		validate_problem(
		    w, "health.verdict",
		    "expected unstable: %.0f spikes in %.0f steps is more "
		    "than 1%%, got healthy",
		    sp, n);
	if (have_l && !le(fin, min + HEALTH_LOSS_MARGIN))
		validate_problem(
		    w, "health.verdict",
		    "expected unstable: loss_final %.17g exceeds loss_min "
		    "%.17g by more than 1 nat, got healthy",
		    fin, min);
	if (w->mode == VALIDATE_STRICT && have_l &&
	    num(rec, "quality.train_loss_first", &first) &&
	    !le(fin, first + HEALTH_REGRESS_MARGIN))
		validate_problem(
		    w, "health.verdict",
		    "expected unstable: loss_final %.17g exceeds the first "
		    "loss (quality.train_loss_first %.17g) by more than "
		    "0.5 nats, got healthy",
		    fin, first);
}

/* The first day of records whose health counts only the solves that
 * reached their tolerance (G5); earlier builds also counted stall-,
 * protect- and NaN-ended ones. */
#define HEALTH_G5_FIXED "2026-11-27"

/* Whether rec was started on or after day (YYYY-MM-DD; ISO times compare
 * as text). A record without started_at counts as new. */
static int made_since(const json_t *rec, const char *day)
{
	const char *a = json_string_value(json_object_get(rec, "started_at"));
	return !a || strncmp(a, day, strlen(day)) >= 0;
}

/* unconverged from the converged fractions; those against the solver. */
static void converged_rules(struct validate_walk *w, const json_t *rec)
{
	const json_t *h = json_object_get(rec, "health");
	const json_t *u = at(h, "unconverged"), *fc = at(h, "fwd_converged"),
		     *fl = at(h, "fwd_converged_last");
	const json_t *fwd = at(rec, "solver.forward");
	double cf;
	if (!json_is_object(h) || !u || !fc || !fl)
		return;
	if (json_is_null(u) != json_is_null(fc) ||
	    json_is_null(fc) != json_is_null(fl))
		validate_problem(
		    w, "health.unconverged",
		    "expected null exactly when fwd_converged and "
		    "fwd_converged_last are (a run without a forward "
		    "solve)");
	else if (json_is_boolean(u) && json_is_number(fc) &&
		 json_is_number(fl)) {
		/* the backward solves count too where the record has them
		 * (health's bwd_converged, added with its trends) */
		const json_t *bc = at(h, "bwd_converged"),
			     *bl = at(h, "bwd_converged_last");
		double b = json_is_number(bc) ? json_number_value(bc) : 1;
		double bt = json_is_number(bl) ? json_number_value(bl) : 1;
		int want = json_number_value(fc) < HEALTH_MIN_CONVERGED ||
			   json_number_value(fl) < HEALTH_MIN_CONVERGED ||
			   b < HEALTH_MIN_CONVERGED ||
			   bt < HEALTH_MIN_CONVERGED;
		if (want != json_is_true(u))
			validate_problem(
			    w, "health.unconverged",
			    "expected %s: fwd_converged %g, "
			    "fwd_converged_last %g, bwd_converged %g, "
			    "bwd_converged_last %g (unconverged below 0.9 "
			    "in any)",
			    want ? "true" : "false", json_number_value(fc),
			    json_number_value(fl), b, bt);
	}
	if (json_is_null(fwd) && !json_is_null(fc))
		validate_problem(
		    w, "health.fwd_converged",
		    "expected null: solver.forward is null (no forward "
		    "solve)");
	if (json_is_object(fwd) && json_is_null(fc))
		validate_problem(
		    w, "health.fwd_converged",
		    "expected a number: the run has a forward solve "
		    "(solver.forward)");
	if (!json_is_number(fc) || !num(fwd, "converged_fraction", &cf))
		return;
	/* records made before G5's fix counted stall-, protect- and
	 * NaN-ended solves as converged too (SCHEMA.md §health): never
	 * fewer than the solver; from the fix on (and always under
	 * --strict for those) the same count */
	if (w->mode == VALIDATE_STRICT && made_since(rec, HEALTH_G5_FIXED)
		? !near(json_number_value(fc), cf)
		: !le(cf, json_number_value(fc)))
		validate_problem(
		    w, "health.fwd_converged",
		    "expected solver.forward.converged_fraction (%.17g): "
		    "both count the solves that reached their tolerance, "
		    "got %.17g",
		    cf, json_number_value(fc));
}

/* An ok deqbench training record has health (SCHEMA.md: null only for
 * eval records, setup failures and impl=pytorch without trace; a pytorch
 * record gets its health from its trace after the merge that validates
 * it, bench/pytorch/peer.c, so only deqbench's own are checked). */
static void health_presence(struct validate_walk *w, const json_t *rec)
{
	const char *impl = json_string_value(json_object_get(rec, "impl"));
	if (json_is_null(json_object_get(rec, "health")) &&
	    is(rec, "status", "ok") && !is(rec, "kind", "eval") &&
	    (!impl || !strcmp(impl, "deqbench")))
		validate_problem(
		    w, "health",
		    "expected an object in an ok training record of "
		    "impl=deqbench (null only for eval records, setup "
		    "failures and impl=pytorch without trace)");
}

/* ---- what the run did ---- */

static void time_order(struct validate_walk *w, const json_t *rec)
{
	const char *a = json_string_value(json_object_get(rec, "started_at"));
	const char *b = json_string_value(json_object_get(rec, "finished_at"));
	/* the one fixed-width format: text order is time order */
	if (a && b && strlen(a) == strlen(b) && strcmp(a, b) > 0)
		validate_problem(
		    w, "finished_at",
		    "expected a time not before started_at (%s), got %s", a, b);
}

/* ppl = exp(loss), null together (or where exp overflows). */
static void ppl_rules(struct validate_walk *w, const json_t *rec)
{
	static const char *const split[] = {"valid", "test"};
	for (int i = 0; i < 2; i++) {
		char lp[32], pp[32];
		const json_t *l, *p;
		double e;
		snprintf(lp, sizeof(lp), "quality.%s_loss", split[i]);
		snprintf(pp, sizeof(pp), "quality.%s_ppl", split[i]);
		l = at(rec, lp);
		p = at(rec, pp);
		if (!l || !p)
			continue;
		e = json_is_number(l) ? exp(json_number_value(l)) : NAN;
		if (json_is_null(l) && !json_is_null(p))
			validate_problem(w, pp, "expected null with %s null",
					 lp);
		else if (json_is_number(l) && isfinite(e) &&
			 !(json_is_number(p) && near(json_number_value(p), e)))
			validate_problem(w, pp, "expected exp(%s) = %.17g", lp,
					 e);
	}
}

/* steps - pretrain_steps - warmup_steps: the steps a finished run times
 * (SCHEMA.md §timing); -1 when the config lacks a key. */
static double timed_steps(const json_t *rec, double *steps, double *pre)
{
	double wu;
	*pre = 0;
	if (!cnt(rec, "config.steps", steps) ||
	    !cnt(rec, "config.warmup_steps", &wu))
		return -1;
	if (is_deq(rec))
		cnt(rec, "config.pretrain_steps", pre);
	return *steps - *pre - wu > 0 ? *steps - *pre - wu : 0;
}

/* steps_timed and evals.steps against the config: equal in an ok
 * record, at most that in one that stopped early. */
static void step_counts(struct validate_walk *w, const json_t *rec)
{
	double steps, pre, t, e, want = timed_steps(rec, &steps, &pre);
	int ok = is(rec, "status", "ok");
	if (want < 0 || is(rec, "kind", "eval"))
		return;
	if (cnt(rec, "timing.steps_timed", &t) && (ok ? t != want : t > want))
		validate_problem(w, "timing.steps_timed",
				 "expected %s%.0f (steps - pretrain_steps - "
				 "warmup_steps), got %.0f",
				 ok ? "" : "at most ", want, t);
	if (cnt(rec, "evals.steps", &e) &&
	    (ok ? e != steps - pre : e > steps - pre))
		validate_problem(
		    w, "evals.steps",
		    "expected %s%.0f (steps - pretrain_steps), got %.0f",
		    ok ? "" : "at most ", steps - pre, e);
}

/* The per-step trace arrays: one length n (the completed steps), loss n
 * or, in a diverged run, n + 1; n = steps in an ok run. */
static void trace_lengths(struct validate_walk *w, const json_t *rec)
{
	static const char *const cols[] = {"step_ms",
					   "forward_ms",
					   "backward_ms",
					   "grad_norm",
					   "lr",
					   "fwd_iters",
					   "fwd_residual",
					   "bwd_iters",
					   "bwd_residual",
					   "fwd_converged",
					   "bwd_converged",
					   "host_reads",
					   "jac_loss",
					   NULL};
	const json_t *tr = json_object_get(rec, "trace"), *a;
	size_t n = 0, len;
	double steps;
	int have = 0;
	char p[64];
	if (!json_is_object(tr))
		return;
	for (int i = 0; cols[i]; i++) {
		if (!json_is_array(a = json_object_get(tr, cols[i])))
			continue;
		len = json_array_size(a);
		if (!have++)
			n = len;
		else if (len != n) {
			snprintf(p, sizeof(p), "trace.%s", cols[i]);
			validate_problem(
			    w, p,
			    "expected %zu entries (one per completed "
			    "step, as trace.%s), got %zu",
			    n, cols[0], len);
		}
	}
	if (!have)
		return;
	a = json_object_get(tr, "loss");
	len = json_array_size(a);
	if (json_is_array(a) && len != n &&
	    !(len == n + 1 && is(rec, "status", "diverged")))
		validate_problem(
		    w, "trace.loss",
		    "expected %zu entries (one per completed step, the "
		    "diverged step's too), got %zu",
		    n, len);
	if (cnt(rec, "config.steps", &steps) &&
	    (is(rec, "status", "ok") ? (double)n != steps : (double)n > steps))
		validate_problem(
		    w, "trace.step_ms",
		    "expected %s%.0f entries (config steps), got %zu",
		    is(rec, "status", "ok") ? "" : "at most ", steps, n);
}

/* Counts of one solve section at path: each at most its steps. */
static void solve_counts(struct validate_walk *w, const json_t *s,
			 const char *path)
{
	static const char *const c[] = {"nonfinite_steps",
					"protect_break_steps",
					"stall_break_steps", NULL};
	double n, k;
	char p[96];
	if (!cnt(s, "steps", &n))
		return;
	for (int i = 0; c[i]; i++)
		if (cnt(s, c[i], &k) && k > n) {
			snprintf(p, sizeof(p), "%s.%s", path, c[i]);
			validate_problem(
			    w, p,
			    "expected at most %s.steps (%.0f), got "
			    "%.0f",
			    path, n, k);
		}
}

/* solver.forward and backward, inference.forward_solve: null exactly for
 * methods without that solve (an ok deq run has them). */
static void solve_sections(struct validate_walk *w, const json_t *rec)
{
	const json_t *f = at(rec, "solver.forward"),
		     *b = at(rec, "solver.backward"),
		     *fs = at(rec, "inference.forward_solve");
	const char *m = json_string_value(at(rec, "config.method"));
	int deq = is_deq(rec), ok = is(rec, "status", "ok");
	int ift = !at(rec, "config.b_mode") || is(rec, "config.b_mode", "ift");
	if (!m)
		return;
	if (json_is_object(f) && !deq)
		validate_problem(
		    w, "solver.forward",
		    "expected null: method=%s has no forward solve", m);
	if (json_is_object(b) && !(deq && ift))
		validate_problem(
		    w, "solver.backward",
		    "expected null: only method=deq with b_mode=ift has a "
		    "backward solve");
	if (json_is_object(fs) && !deq)
		validate_problem(
		    w, "inference.forward_solve",
		    "expected null: method=%s has no forward solve", m);
	if (ok && deq && json_is_null(f))
		validate_problem(
		    w, "solver.forward",
		    "expected an object with method=deq and status ok");
	if (ok && deq && ift && json_is_null(b))
		validate_problem(
		    w, "solver.backward",
		    "expected an object with method=deq, b_mode=ift and "
		    "status ok");
	if (ok && deq && json_is_null(fs))
		validate_problem(
		    w, "inference.forward_solve",
		    "expected an object with method=deq and status ok");
	solve_counts(w, f, "solver.forward");
	solve_counts(w, b, "solver.backward");
	solve_counts(w, fs, "inference.forward_solve");
}

/* Totals = per step x steps; per step null exactly without steps. */
static void eval_totals(struct validate_walk *w, const json_t *rec)
{
	static const char *const kind[] = {"forward", "vjp", NULL};
	const json_t *ev = json_object_get(rec, "evals");
	double n, tot, per;
	char pp[64], tp[64], path[96];
	if (!cnt(ev, "steps", &n))
		return;
	for (int i = 0; kind[i]; i++) {
		snprintf(pp, sizeof(pp), "%s_evals_per_step", kind[i]);
		snprintf(tp, sizeof(tp), "%s_evals_total", kind[i]);
		if (!cnt(ev, tp, &tot))
			continue;
		if (num(ev, pp, &per) ? !near(per * n, tot) : n > 0) {
			snprintf(path, sizeof(path), "evals.%s", tp);
			validate_problem(
			    w, path, "expected %s x steps (%.0f), got %.0f", pp,
			    num(ev, pp, &per) ? per * n : 0.0, tot);
		}
	}
}

/* One work object at path (work, pretrain.work; SCHEMA.md §work): each
 * unit's total = per_step x steps (per_step null exactly without steps),
 * edge_steps a tenth of steps, at least 1 (0 without); and the sum of the
 * block forward units' totals (VJP units') over the steps of ev (evals,
 * when given) is its forward (VJP) total. */
static void work_rules(struct validate_walk *w, const json_t *wk,
		       const char *path, const json_t *ev)
{
	static const char *const fwd[] = {"block_fwd_taped", "block_fwd",
					  "block_fwd_recompute", NULL};
	static const char *const vjp[] = {"block_vjp", "block_vjp_input", NULL};
	const char *key;
	const json_t *u;
	double n, e, tot, per, sf = 0, sv = 0, et;
	char p[96];
	if (!cnt(wk, "steps", &n) || !cnt(wk, "edge_steps", &e))
		return;
	snprintf(p, sizeof(p), "%s.edge_steps", path);
	if (e != (n < 1 ? 0 : n < 20 ? 1 : floor(n / 10)))
		validate_problem(w, p, "expected steps / 10, at least 1");
	json_object_foreach((json_t *)wk, key, u)
	{
		if (!cnt(u, "total", &tot))
			continue;
		for (int i = 0; fwd[i]; i++)
			sf += strcmp(key, fwd[i]) ? 0 : tot;
		for (int i = 0; vjp[i]; i++)
			sv += strcmp(key, vjp[i]) ? 0 : tot;
		snprintf(p, sizeof(p), "%s.%s.total", path, key);
		if (num(u, "per_step", &per) ? !near(per * n, tot) : n > 0)
			validate_problem(w, p, "expected per_step x steps");
	}
	if (!ev)
		return;
	snprintf(p, sizeof(p), "%s.steps", path);
	if (cnt(ev, "steps", &et) && et != n)
		validate_problem(w, p, "expected evals.steps, %.0f", et);
	if (cnt(ev, "forward_evals_total", &et) && et != sf)
		validate_problem(w, path,
				 "block forward totals sum to %.0f, "
				 "evals.forward_evals_total is %.0f",
				 sf, et);
	if (cnt(ev, "vjp_evals_total", &et) && et != sv)
		validate_problem(w, path,
				 "block VJP totals sum to %.0f, "
				 "evals.vjp_evals_total is %.0f",
				 sv, et);
}

/* The peaks of one memory object at path (memory, inference.memory):
 * every device category and depth + solver within the total; depth +
 * solver between its larger part and their sum. */
static void peak_rules(struct validate_walk *w, const json_t *m,
		       const char *path)
{
	static const char *const cats[] = {"params",	"grads", "optimizer",
					   "head",	"depth", "solver",
					   "workspace", NULL};
	const json_t *pb = json_object_get(m, "peak_bytes");
	double tot, ds, d = 0, s = 0, c;
	char p[96];
	if (!cnt(m, "peak_total_bytes", &tot) ||
	    !cnt(m, "peak_depth_solver_bytes", &ds))
		return;
	snprintf(p, sizeof(p), "%s.peak_total_bytes", path);
	if (ds > tot)
		validate_problem(
		    w, p,
		    "expected at least peak_depth_solver_bytes (%.0f), got "
		    "%.0f",
		    ds, tot);
	for (int i = 0; cats[i]; i++)
		if (cnt(pb, cats[i], &c) && c > tot)
			validate_problem(
			    w, p,
			    "expected at least peak_bytes.%s (%.0f), got "
			    "%.0f",
			    cats[i], c, tot);
	if (!cnt(pb, "depth", &d) || !cnt(pb, "solver", &s))
		return;
	snprintf(p, sizeof(p), "%s.peak_depth_solver_bytes", path);
	if (ds < fmax(d, s) || ds > d + s)
		validate_problem(
		    w, p,
		    "expected between max(depth, solver) and depth + solver "
		    "of peak_bytes (%.0f to %.0f), got %.0f",
		    fmax(d, s), d + s, ds);
}

/* ---- the record against its config ---- */

/* n_params is the sum of the parameters' sizes; V the data's (or the
 * config's vocab_size when given). */
static void model_rules(struct validate_walk *w, const json_t *rec)
{
	const json_t *ps = at(rec, "model.params"), *p, *d;
	double np, v, dv, cv = 0, sum = 0;
	size_t i, j;
	int whole = json_is_array(ps);
	json_array_foreach(ps, i, p)
	{
		const json_t *sh = json_object_get(p, "shape");
		double k = 1;
		/* a shape the walk refused leaves the sum unknown */
		whole &= json_array_size(sh) >= 1 && json_array_size(sh) <= 3;
		json_array_foreach(sh, j, d)
		{
			whole &= json_is_integer(d);
			k *= (double)json_integer_value(d);
		}
		sum += k;
	}
	if (whole && cnt(rec, "model.n_params", &np) && sum != np)
		validate_problem(
		    w, "model.n_params",
		    "expected %.0f, the sum of model.params' shapes, got "
		    "%.0f",
		    sum, np);
	if (!cnt(rec, "model.vocab_size", &v) ||
	    !cnt(rec, "data.vocab_size", &dv))
		return;
	cnt(rec, "config.vocab_size", &cv);
	if (cv > 0 ? v != cv : v != dv)
		validate_problem(
		    w, "model.vocab_size", "expected %.0f (%s), got %.0f",
		    cv > 0 ? cv : dv,
		    cv > 0 ? "config vocab_size" : "data.vocab_size", v);
}

/* The sections' names of the config's choices. */
static void same_as_config(struct validate_walk *w, const json_t *rec)
{
	static const struct {
		const char *path, *key;
	} pairs[] = {{"method.method", "method"},
		     {"data.corpus", "corpus"},
		     {"model.kind", "model"},
		     {"device.device", "device"}};
	for (size_t i = 0; i < sizeof(pairs) / sizeof(*pairs); i++) {
		const char *a = json_string_value(at(rec, pairs[i].path));
		const json_t *c =
		    at(json_object_get(rec, "config"), pairs[i].key);
		const char *b = json_string_value(c);
		char why[300];
		/* a config value the walk refused is no reference */
		if (a && b && strcmp(a, b) &&
		    !config_check_json(pairs[i].key, c, why, sizeof(why)))
			validate_problem(
			    w, pairs[i].path,
			    "expected \"%s\" (config %s), got \"%s\"", b,
			    pairs[i].key, a);
	}
}

/* The label of the method object me (its fields over cfg), into buf; -1
 * when a field does not apply (the walk reported it). */
static int label_of(const json_t *me, const struct bench_config *cfg, char *buf,
		    size_t n)
{
	struct bench_config c = *cfg;
	const char *key;
	const json_t *v;
	char err[256];
	json_object_foreach((json_t *)me, key, v)
	{
		if (strcmp(key, "label") &&
		    config_set_json(&c, key, v, err, sizeof(err)) != 0)
			return -1;
	}
	method_config_resolve(&c.method);
	method_label(&c.method, buf, n);
	return 0;
}

/* v as text for a message: "\"deq\"", "0.001". */
static void short_text(const json_t *v, char *buf, size_t n)
{
	if (json_is_string(v))
		snprintf(buf, n, "\"%.60s\"", json_string_value(v));
	else if (json_is_number(v))
		snprintf(buf, n, "%.17g", json_number_value(v));
	else
		snprintf(buf, n, "%s", json_is_true(v) ? "true" : "false");
}

/* The method's label from its own fields (method_label); strict: each
 * field the method uses equal to the resolved config's (older records'
 * configs hold the values as given, SCHEMA.md §method). */
static void method_fields(struct validate_walk *w, const json_t *rec,
			  const struct bench_config *cfg)
{
	const json_t *me = json_object_get(rec, "method"), *v, *want;
	const char *key, *label = json_string_value(at(me, "label"));
	struct bench_config c = *cfg;
	char buf[128], p[96];
	json_t *res;
	if (!json_is_object(me))
		return;
	if (label && label_of(me, cfg, buf, sizeof(buf)) == 0 &&
	    strcmp(buf, label))
		validate_problem(
		    w, "method.label",
		    "expected \"%s\" (from the method's fields), got "
		    "\"%.60s\"",
		    buf, label);
	if (w->mode != VALIDATE_STRICT)
		return;
	/* the keys the method uses: others' resolution is the writer's
	 * (impl=pytorch resolves k and the histories of every method) */
	method_config_resolve(&c.method);
	res = config_effective_json(&c);
	json_object_foreach((json_t *)me, key, v)
	{
		want = json_object_get(res, key);
		if (!want || json_equal(want, v) ||
		    (json_is_number(want) && json_is_number(v) &&
		     json_number_value(want) == json_number_value(v)))
			continue;
		snprintf(p, sizeof(p), "method.%s", key);
		short_text(want, buf, sizeof(buf));
		validate_problem(w, p, "expected %s (the resolved config's %s)",
				 buf, key);
	}
	json_decref(res);
}

/* The config's cross-key rules (config_validate_keys), the method object
 * from it. */
static void config_rules(struct validate_walk *w, const json_t *rec)
{
	const json_t *cj = json_object_get(rec, "config");
	struct bench_config c;
	char err[512];
	if (!json_is_object(cj))
		return;
	config_defaults(&c);
	/* a key of the wrong type or range: the walk said so */
	if (config_apply_object(&c, cj, "config", err, sizeof(err)) != 0)
		return;
	if (config_validate_keys(&c, err, sizeof(err)) != 0)
		validate_problem(w, "config",
				 "expected a config a run accepts: %s", err);
	method_fields(w, rec, &c);
}

/* batches >= 1 (strict: an older record without a valid batch had
 * batches 0, SCHEMA.md §inference); batches_timed = batches -
 * eval_warmup, at least 0. */
static void inference_rules(struct validate_walk *w, const json_t *rec)
{
	const json_t *inf = json_object_get(rec, "inference");
	double b, bt, ew, want;
	int have_ew;
	if (!cnt(inf, "batches", &b) || !cnt(inf, "batches_timed", &bt))
		return;
	if (b < 1 && w->mode == VALIDATE_STRICT)
		validate_problem(
		    w, "inference.batches",
		    "expected at least 1 (inference is null without a "
		    "valid batch), got %.0f",
		    b);
	/* records older than the key: at most batches */
	have_ew = cnt(rec, "config.eval_warmup", &ew);
	want = have_ew ? fmax(b - ew, 0) : b;
	if (have_ew ? bt != want : bt > b)
		validate_problem(
		    w, "inference.batches_timed",
		    "expected %s%.0f (batches - eval_warmup, at least 0), "
		    "got %.0f",
		    have_ew ? "" : "at most ", want, bt);
}

int validate_cross(const json_t *rec, enum validate_mode mode,
		   validate_report_fn report, void *ctx)
{
	struct validate_walk w = {mode, report, ctx, 0};
	verdict_rules(&w, rec);
	converged_rules(&w, rec);
	health_presence(&w, rec);
	time_order(&w, rec);
	ppl_rules(&w, rec);
	step_counts(&w, rec);
	trace_lengths(&w, rec);
	solve_sections(&w, rec);
	eval_totals(&w, rec);
	work_rules(&w, json_object_get(rec, "work"), "work",
		   json_object_get(rec, "evals"));
	work_rules(&w, at(rec, "pretrain.work"), "pretrain.work", NULL);
	peak_rules(&w, json_object_get(rec, "memory"), "memory");
	peak_rules(&w, at(rec, "inference.memory"), "inference.memory");
	inference_rules(&w, rec);
	model_rules(&w, rec);
	same_as_config(&w, rec);
	config_rules(&w, rec);
	return w.problems;
}
