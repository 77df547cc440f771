/* test_solvers_fused.c — the fused Broyden and Anderson iterations
 * (solver_kernels=fused,
 * kernels/solve_fused.h) against the ops path of methods/solvers.c, which
 * is the same algorithm with its sums in another order:
 *
 *   1. On the block-diagonal contraction (S samples, P segments), both
 *      scopes, a history that never fills and one that wraps (pairs
 *      dropped): the same iterations, the iterate and every residual of
 *      the trace within 1e-9 relative in double, 1e-4 in float; the same
 *      for Anderson's fused iteration; a solver made for two histories
 *      runs each solve at its own.
 *   2. On a linear map with full history: finite termination in at most
 *      2n + 1 evaluations (Gay 1979), as the ops path.
 *   3. sync_every: the result bit for bit that of sync_every = 1.
 *   4. A non-finite F stops the solve with the best finite iterate, as
 *      the ops path.
 *   5. Through the deq method: forward and backward solves and the
 *      parameter gradients of the ops path's, on tanh_cell (Broyden and
 *      Anderson) and on the contraction-scaled transformer.
 *   6. Memory exactly as solvers.h says; keys refused with a message
 *      naming them; deqbench price's fused units do a solve's work.
 */
#include "../kernels/solve_fused.h"

#include "price_solver.h"
#include "test_deq_util.h"
#include "test_solver_util.h"

/* max |a − b| over max |b| (0 when both are 0). */
static double rel_diff(const double *a, const double *b, size_t n)
{
	double e = 0, big = 0;
	for (size_t i = 0; i < n; i++) {
		e = fmax(e, fabs(a[i] - b[i]));
		big = fmax(big, fabs(b[i]));
	}
	return big > 0 ? e / big : e;
}

/* Ops and fused solves of p on the diag map: the same iterations; the
 * iterates and traces within tol relative (a trace entry against the
 * first residual). */
static void check_fused_matches_k(enum solver_kind kind, const char *bk, int S,
				  int P, int history, enum stop_scope scope,
				  double tol)
{
	struct backend *be = make_be(bk);
	struct diag_map m;
	diag_init(&m, be, S, P, 5, 31 + (uint64_t)(P + history));
	struct fp_map F = {.apply = diag_apply, .ctx = &m};
	size_t n = (size_t)S * m.d;
	double *xo = host(n), *xf = host(n);
	struct solver_params p = params(kind, S, P, scope);
	p.history = history;
	p.anderson_m = history < 80 ? history : 5;
	if (be->elem == 4)
		p.tol = 1e-5;
	struct solve_rec a, b;
	solve_rec(be, n, p, &F, xo, &a);
	p.fused = 1;
	solve_rec(be, n, p, &F, xf, &b);
	const char *what = stop_scope_name(scope);
	cr_assert(a.st.converged && b.st.converged,
		  "%s S%d P%d h%d %s: ops %d (%g), fused %d (%g)", bk, S, P,
		  history, what, a.st.iters, a.st.residual, b.st.iters,
		  b.st.residual);
	cr_assert_eq(b.st.iters, a.st.iters, "%s h%d %s: fused %d, ops %d", bk,
		     history, what, b.st.iters, a.st.iters);
	cr_assert_eq(b.st.evals, a.st.evals);
	cr_assert_eq(b.st.updates, a.st.updates);
	cr_assert_eq(b.st.history_sum, a.st.history_sum);
	cr_assert_eq(b.st.samples_converged, a.st.samples_converged);
	double dx = rel_diff(xf, xo, n);
	cr_assert_leq(dx, tol, "%s S%d P%d h%d %s: iterate %g", bk, S, P,
		      history, what, dx);
	cr_assert_eq(b.trace_len, a.trace_len);
	for (int i = 0; i < a.trace_len; i++)
		cr_assert_leq(fabs(b.trace[i] - a.trace[i]), tol * a.trace[0],
			      "%s h%d %s: residual %d: %g vs %g", bk, history,
			      what, i, b.trace[i], a.trace[i]);
	free(xo);
	free(xf);
	diag_free(&m);
	backend_destroy(be);
}

/* Broyden's: history pairs (80: never full). */
static void check_fused_matches(const char *bk, int S, int P, int history,
				enum stop_scope scope, double tol)
{
	check_fused_matches_k(SOLVER_BROYDEN, bk, S, P, history, scope, tol);
}

Test(solvers_fused, matches_ops_double)
{
	for (int P = 1; P <= 2; P++)
		for (int sc = 0; sc < 2; sc++) {
			enum stop_scope scope = sc ? SCOPE_SAMPLE : SCOPE_BATCH;
			check_fused_matches("cpu64", 4, P, 80, scope, 1e-9);
			check_fused_matches("cpu64", 4, P, 2, scope, 1e-9);
		}
	check_fused_matches("cpu64", 1, 1, 3, SCOPE_BATCH, 1e-9);
}

Test(solvers_fused, matches_ops_float)
{
	check_fused_matches("cpu", 3, 2, 80, SCOPE_BATCH, 1e-4);
	check_fused_matches("cpu", 3, 2, 2, SCOPE_SAMPLE, 1e-4);
}

/* Anderson's: m iterates (2 and 3: the ring wraps; 80 means m = 5). */
Test(solvers_fused, anderson_matches_ops)
{
	for (int P = 1; P <= 2; P++)
		for (int sc = 0; sc < 2; sc++) {
			enum stop_scope scope = sc ? SCOPE_SAMPLE : SCOPE_BATCH;
			check_fused_matches_k(SOLVER_ANDERSON, "cpu64", 4, P,
					      80, scope, 1e-9);
			check_fused_matches_k(SOLVER_ANDERSON, "cpu64", 4, P, 3,
					      scope, 1e-9);
		}
	check_fused_matches_k(SOLVER_ANDERSON, "cpu", 3, 2, 2, SCOPE_BATCH,
			      1e-4);
}

/* One solver made for fused histories 3 and 6 (the layout fits 6): a
 * solve with history 3 keeps a ring of 3, as the ops path's, and its
 * pairs never overlap (V starts at U's 3rd row). */
Test(solvers_fused, each_solve_keeps_its_own_history)
{
	struct backend *be = make_be("cpu64");
	struct diag_map m;
	diag_init(&m, be, 2, 1, 6, 41);
	struct fp_map F = {.apply = diag_apply, .ctx = &m};
	size_t n = (size_t)2 * m.d;
	struct solver_params p[2] = {params(SOLVER_BROYDEN, 2, 1, SCOPE_BATCH),
				     params(SOLVER_BROYDEN, 2, 1, SCOPE_BATCH)};
	p[0].history = 3, p[1].history = 6;
	p[0].fused = p[1].fused = 1;
	double *xo = host(n), *xf = host(n);
	struct solve_rec a;
	struct solver *s;
	char err[256];
	cr_assert_eq(solver_create(&s, be, n, p, 2, err, sizeof(err)), 0, "%s",
		     err);
	struct solve_stats st;
	long reads = 0;
	const void *x = solver_solve(s, &p[0], &F, &st, NULL, NULL, &reads);
	down(be, xf, x, n);
	struct solver_params o = p[0];
	o.fused = 0;
	solve_rec(be, n, o, &F, xo, &a);
	cr_assert(st.converged && a.st.converged);
	cr_assert_gt(st.iters, 8, "%d evaluations: the ring never wrapped",
		     st.iters);
	cr_assert_eq(st.iters, a.st.iters);
	cr_assert_leq(rel_diff(xf, xo, n), 1e-9, "%g", rel_diff(xf, xo, n));
	solver_destroy(s);
	free(xo);
	free(xf);
	diag_free(&m);
	backend_destroy(be);
}

/* F(x)_i = 0.45 tanh(x_i) + 0.3 tanh(x_{i+1}) + b_i within each sample's
 * contiguous len elements: a contraction coupling neighbours, so that
 * chunk boundaries cut through its equations. */
struct ring_map {
	struct backend *be;
	int S;
	size_t len;
	double *xh, *yh, *b;
};

static void ring_apply(void *ctx, void *out, const void *in)
{
	struct ring_map *r = ctx;
	size_t n = (size_t)r->S * r->len;
	down(r->be, r->xh, in, n);
	for (size_t i = 0; i < n; i++) {
		size_t s0 = i / r->len * r->len, j = s0 + (i - s0 + 1) % r->len;
		r->yh[i] =
		    0.45 * tanh(r->xh[i]) + 0.3 * tanh(r->xh[j]) + r->b[i];
	}
	up(r->be, out, r->yh, n);
}

/* Segments longer than a chunk (DQ_FUSED_CHUNK): a sample's dots are sums
 * of several chunks' partials, and the result is still the ops path's. */
Test(solvers_fused, segments_of_several_chunks)
{
	struct backend *be = make_be("cpu64");
	const int S = 2;
	struct ring_map r = {be, S, 2 * DQ_FUSED_CHUNK + 77, NULL, NULL, NULL};
	size_t n = (size_t)S * r.len;
	r.xh = host(n), r.yh = host(n), r.b = host(n);
	for (size_t i = 0; i < n; i++)
		r.b[i] = sin(0.37 * (double)i);
	struct fp_map F = {.apply = ring_apply, .ctx = &r};
	struct solver_params p = params(SOLVER_BROYDEN, S, 1, SCOPE_BATCH);
	p.history = 4;
	double *xo = host(n), *xf = host(n);
	struct solve_rec a, b;
	solve_rec(be, n, p, &F, xo, &a);
	p.fused = 1;
	solve_rec(be, n, p, &F, xf, &b);
	cr_assert(a.st.converged && b.st.converged);
	cr_assert_eq(b.st.iters, a.st.iters);
	cr_assert_leq(rel_diff(xf, xo, n), 1e-9, "%g", rel_diff(xf, xo, n));
	free(xo);
	free(xf);
	free(r.xh);
	free(r.yh);
	free(r.b);
	backend_destroy(be);
}

/* Full history on a linear map: good Broyden's finite termination in at
 * most 2n steps (Gay 1979), as test_solvers' linear_finite_termination
 * checks for the ops path. */
static void linear_apply(void *ctx, void *out, const void *in)
{
	const double *A = ((double **)ctx)[0], *b = ((double **)ctx)[1];
	struct backend *be = ((struct backend **)ctx)[2];
	double x[8], y[8];
	down(be, x, in, 8);
	for (int i = 0; i < 8; i++) {
		y[i] = b[i];
		for (int j = 0; j < 8; j++)
			y[i] += A[i * 8 + j] * x[j];
	}
	up(be, out, y, 8);
}

Test(solvers_fused, linear_finite_termination)
{
	struct backend *be = make_be("cpu64");
	const int n = 8;
	double A[64], b[8];
	rng_state = 1234;
	for (int i = 0; i < n * n; i++)
		A[i] = (rnd_u01() - 0.5) * 0.9;
	for (int i = 0; i < n; i++) {
		A[i * n + i] += 0.2 * i;
		b[i] = rnd_u01() - 0.5;
	}
	void *ctx[3] = {A, b, be};
	struct fp_map F = {.apply = linear_apply, .ctx = ctx};
	struct solver_params p = params(SOLVER_BROYDEN, 1, 1, SCOPE_BATCH);
	p.fused = 1;
	double x[8], r = 0;
	struct solve_stats st = solve_into(be, 8, p, &F, x);
	cr_assert(st.converged, "%d iters, residual %g", st.iters, st.residual);
	cr_assert_leq(st.iters, 2 * n + 1, "%d evaluations", st.iters);
	for (int i = 0; i < n; i++) {
		double v = b[i] - x[i];
		for (int j = 0; j < n; j++)
			v += A[i * n + j] * x[j];
		r += v * v;
	}
	cr_assert_leq(sqrt(r), 1e-10);
	backend_destroy(be);
}

/* sync_every reads the decision less often; the device ignores what the
 * host issues after its stop: the iterate, iterations and trace of
 * sync_every = 1, bit for bit, and the ops path's evaluation count. */
Test(solvers_fused, sync_every_keeps_the_result)
{
	struct backend *be = make_be("cpu64");
	struct diag_map m;
	diag_init(&m, be, 3, 2, 4, 11);
	struct fp_map F = {.apply = diag_apply, .ctx = &m};
	size_t n = (size_t)3 * m.d;
	double *x1 = host(n), *xk = host(n);
	struct solver_params p = params(SOLVER_BROYDEN, 3, 2, SCOPE_SAMPLE);
	p.tol = 1e-6;
	p.max_iter = 60;
	p.fused = 1;
	struct solve_rec a, b, o;
	solve_rec(be, n, p, &F, x1, &a);
	cr_assert(a.st.converged);
	for (int sync = 2; sync <= 7; sync += 5) {
		p.sync_every = sync;
		solve_rec(be, n, p, &F, xk, &b);
		cr_assert_eq(memcmp(x1, xk, n * sizeof(double)), 0, "sync %d",
			     sync);
		cr_assert_eq(b.st.iters, a.st.iters);
		cr_assert_eq(b.trace_len, a.trace_len);
		cr_assert_eq(memcmp(a.trace, b.trace,
				    (size_t)a.trace_len * sizeof(double)),
			     0);
		p.fused = 0;
		solve_rec(be, n, p, &F, xk, &o);
		p.fused = 1;
		cr_assert_eq(b.st.evals, o.st.evals, "sync %d: %d vs %d", sync,
			     b.st.evals, o.st.evals);
		cr_assert_eq(b.reads, o.reads);
	}
	free(x1);
	free(xk);
	diag_free(&m);
	backend_destroy(be);
}

/* F = the diag map, then NaN from the k-th evaluation on. */
struct nan_map {
	struct diag_map *m;
	int calls, from;
};

static void nan_apply(void *ctx, void *out, const void *in)
{
	struct nan_map *q = ctx;
	diag_apply(q->m, out, in);
	if (++q->calls >= q->from)
		be_fill(q->m->be, out, NAN, (size_t)q->m->S * q->m->d);
}

Test(solvers_fused, nonfinite_stops_with_the_best)
{
	struct backend *be = make_be("cpu64");
	struct diag_map m;
	diag_init(&m, be, 2, 1, 6, 5);
	struct nan_map q = {&m, 0, 4};
	struct fp_map F = {.apply = nan_apply, .ctx = &q};
	size_t n = (size_t)2 * m.d;
	double *xo = host(n), *xf = host(n);
	struct solver_params p = params(SOLVER_BROYDEN, 2, 1, SCOPE_BATCH);
	struct solve_rec a, b;
	solve_rec(be, n, p, &F, xo, &a);
	q.calls = 0;
	p.fused = 1;
	solve_rec(be, n, p, &F, xf, &b);
	cr_assert(a.st.nonfinite && b.st.nonfinite);
	cr_assert_eq(b.st.iters, a.st.iters);
	cr_assert_eq(b.st.iters, 4);
	cr_assert_leq(rel_diff(xf, xo, n), 1e-12);
	for (size_t i = 0; i < n; i++)
		cr_assert(isfinite(xf[i]));
	free(xo);
	free(xf);
	diag_free(&m);
	backend_destroy(be);
}

/* ---------------------------------------------------- through the method */

static const struct shape odd = {3, 5, 12, 3, 20, 17};

/* A deq training step with solver_kernels=fused against ops, both solved
 * to 1e-12 on a contraction: the same forward and backward iterations,
 * the loss, z, dL/du and every gradient within assert_step_near's bounds
 * (the solves differ only in the order of their sums). */
static void check_method_k(enum model_kind kind, int per_sample,
			   enum solver_kind fs, enum solver_kind bs)
{
	struct model *m = open_contractive("cpu64", kind, odd, 7);
	void *z = backend_alloc(m->be, m->n_state, MEM_HEAD);
	struct method_config c = deq_solvers(fs, bs, 1e-12, 60);
	deq_config(&c)->solver_batching =
	    per_sample ? BATCHING_PER_SAMPLE : BATCHING_GLOBAL;
	struct step_out a = step_of(m, c, z);
	deq_config(&c)->solver_kernels = SOLVER_KERNELS_FUSED;
	struct step_out b = step_of(m, c, z);
	cr_assert(a.st.fwd.converged && a.st.bwd.converged);
	cr_assert(b.st.fwd.converged && b.st.bwd.converged);
	cr_assert_eq(b.st.fwd.iters, a.st.fwd.iters, "fwd %d vs %d",
		     b.st.fwd.iters, a.st.fwd.iters);
	cr_assert_eq(b.st.bwd.iters, a.st.bwd.iters, "bwd %d vs %d",
		     b.st.bwd.iters, a.st.bwd.iters);
	assert_step_near(m, &a, &b, "fused vs ops");
	step_out_free(&a);
	step_out_free(&b);
	backend_free(m->be, z);
	close_model(m);
}

static void check_method(enum model_kind kind, int per_sample)
{
	check_method_k(kind, per_sample, SOLVER_BROYDEN, SOLVER_BROYDEN);
}

Test(solvers_fused, method_tanh_cell)
{
	check_method(MODEL_TANH_CELL, 1);
	check_method(MODEL_TANH_CELL, 0);
	check_method_k(MODEL_TANH_CELL, 1, SOLVER_ANDERSON, SOLVER_BROYDEN);
	check_method_k(MODEL_TANH_CELL, 0, SOLVER_BROYDEN, SOLVER_ANDERSON);
}

Test(solvers_fused, method_transformer, .timeout = 120)
{
	check_method(MODEL_TRANSFORMER, 1);
}

/* MEM_SOLVER: the ops path's bytes (test_util.h's solver_mem) plus the
 * fused header, per-sample numbers and chunk partials of solvers.h. */
Test(solvers_fused, memory_exact)
{
	struct model *m = open_model("cpu", MODEL_TRELLISNET, odd, 3);
	struct method_config c = cfg_of(deq_kind(), 0, 0);
	deq_config(&c)->f_history = deq_config(&c)->b_history = 7;
	deq_config(&c)->solver_kernels = SOLVER_KERNELS_FUSED;
	method_config_resolve(&c);
	size_t pd, ps, e = m->be->elem, n = m->n_state, S = (size_t)m->B;
	size_t P = (size_t)m->state_parts, len = n / (S * P);
	size_t nq = 4 + 3 * 7, ch = (len + DQ_FUSED_CHUNK - 1) / DQ_FUSED_CHUNK;
	char err[256];
	size_t before = m->be->mem.live[MEM_SOLVER];
	struct method *me = new_method(m, c);
	size_t got = m->be->mem.live[MEM_SOLVER] - before;
	cr_assert_eq(method_memory(m, &c, &pd, &ps, err, sizeof(err)), 0);
	cr_assert_eq(ps, got);
	size_t want = solver_mem(e, (6 + 14) * n + S * 7, S, P, 1, 0) +
		      8 * (8 + S * nq + 2 * S + S * P * ch * nq);
	cr_assert_eq(got, want, "allocated %zu, solvers.h says %zu", got, want);
	method_destroy(me);
	close_model(m);
}

static void expect_refused(struct method_config c, const char *what)
{
	char err[256] = "";
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), -1,
		     "%s accepted", what);
	cr_assert(strstr(err, "solver_kernels") && strstr(err, what),
		  "message '%s' does not name solver_kernels and %s", err,
		  what);
}

/* fused is Broyden's or Anderson's iteration with at most DQ_FUSED_MAX_H
 * pairs or iterates. */
Test(solvers_fused, keys_refused_with_their_names)
{
	struct method_config c = deq_cfg(BMODE_IFT), b;
	char err[256];
	deq_config(&c)->solver_kernels = SOLVER_KERNELS_FUSED;
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), 0, "%s",
		     err);
	b = c, deq_config(&b)->f_solver = SOLVER_ANDERSON;
	cr_assert_eq(method_config_validate(&b, err, sizeof(err)), 0, "%s",
		     err);
	deq_config(&b)->anderson_m = DQ_FUSED_MAX_H + 1;
	expect_refused(b, "anderson_m");
	b = c, deq_config(&b)->f_solver = SOLVER_FIXED_POINT;
	expect_refused(b, "f_solver");
	b = c, deq_config(&b)->b_solver = SOLVER_FIXED_POINT;
	expect_refused(b, "b_solver");
	b = c, deq_config(&b)->b_mode = BMODE_JFB;
	deq_config(&b)->b_solver = SOLVER_FIXED_POINT; /* no backward solve */
	cr_assert_eq(method_config_validate(&b, err, sizeof(err)), 0, "%s",
		     err);
	b = c, deq_config(&b)->f_max_iter = DQ_FUSED_MAX_H + 1;
	expect_refused(b, "f_history");
	b = c, deq_config(&b)->b_history = DQ_FUSED_MAX_H + 1;
	expect_refused(b, "b_history");
	cr_assert_eq(solver_kernels_parse("fused"), SOLVER_KERNELS_FUSED);
	cr_assert_eq(solver_kernels_parse("graph"), -1);
}

/* deqbench price's fused units (bench/run/price_solver.c) do a solve's
 * work: after each, the solve goes on, a Broyden pair was formed (the
 * ring one fuller) and Anderson's mix ran over h iterates (weights
 * summing to 1), rather than a stopped check that skips the passes. */
Test(solvers_fused, price_units_do_the_work)
{
	struct backend *be = make_be("cpu64");
	struct price_solver ps;
	const int S = 2, P = 3, len = 50, hmax = 8, m = 4;
	cr_assert_eq(
	    price_solver_alloc(&ps, be, (size_t)S * P * len, S, P, hmax, m, 1),
	    0);
	struct dq_solve_ctl c = ps.fctl;
	double *h = host((size_t)c.total);
	c.st = h;
	for (int a = 0; a < 2; a++)
		for (int k = 1; k <= (a ? m : hmax); k++) {
			price_solver_reset(&ps, k, a);
			if (a)
				price_solver_anderson(&ps, k, 1e-4, 1.0);
			else
				price_solver_update(&ps, k);
			be_download_bytes(be, h, ps.fctl.st,
					  (size_t)c.total * sizeof(double));
			const double *fh = h + c.o_fused;
			cr_assert(h[DQ_CTL_GO] == 1, "%s h %d stopped",
				  a ? "anderson" : "broyden", k);
			cr_assert_eq(fh[DQ_FU_NU],
				     a ? k : (k < hmax ? k + 1 : k));
			if (!a)
				cr_assert(fh[DQ_FU_PAIR] == 1);
			for (int s = 0; a && s < S; s++) {
				const double *al = dq_fu_q(&c, s) + DQ_FA_ROW;
				double sum = 0;
				for (int j = 0; j < k; j++)
					sum += al[j];
				cr_assert(fabs(sum - 1) < 1e-9, "h %d: %g", k,
					  sum);
			}
		}
	free(h);
	price_solver_free(&ps);
	backend_destroy(be);
}
