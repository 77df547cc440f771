/* test_solvers.c — per-sample fixed-point solvers (methods/solvers.h):
 *
 *   1. A per-sample solve of S independent problems equals S separate
 *      solves, iterate for iterate (Broyden, Anderson, fixed point; one
 *      and two segments per sample), and stops when the last of them does.
 *   2. Scope batch: the reported residual is the true whole-batch residual
 *      of the returned (composite) iterate.
 *   3. The DEQ code's protective and no-progress breaks.
 *   4. Through the deq method: on tanh_cell and on a transformer scaled to
 *      a contraction both scopes reach the tolerance, and per-sample
 *      Broyden needs no more iterations than global.
 *   5. Solver memory, exactly: per sample S h (Broyden) and S m (Anderson)
 *      coefficients on top of the global solver's, and the control block.
 *   6. sync_every: reading the device's stop decision less often changes
 *      the evaluations issued and the host reads, never the result.
 *   7. On a linear map: Broyden with full history and Anderson
 *      with m = n + 1 terminate finitely; fixed-point iteration
 *      diverges there and is reported as not converged.
 */
#include "../methods/checkpoint.h"
#include "../methods/deq.h"
#include "methods/method.h"
#include "methods/solvers.h"
#include "models/model.h"

#include "test_solver_util.h"
#include "test_util.h"
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Per-sample with scope sample vs S independent solves: the same
 * arithmetic up to the order of the segment sums (P partial dot products
 * instead of one), so iterates agree to rounding. Contractions with
 * rates ≤ 0.8 keep that rounding from growing: 1e-9 relative is far below
 * an error in the layout or the per-sample coefficients (O(1)). */
static void check_equals_independent(enum solver_kind k, int P)
{
	const int S = 4, len = 5;
	struct backend *be = make_be("cpu64");
	struct diag_map m;
	diag_init(&m, be, S, P, len, 77 + (uint64_t)P);
	struct fp_map F = {.apply = diag_apply, .ctx = &m};
	size_t d = (size_t)m.d, n = (size_t)S * d;
	double *xb = host(n), *x1 = host(d);
	struct solve_stats sb =
	    solve_into(be, n, params(k, S, P, SCOPE_SAMPLE), &F, xb);
	cr_assert(sb.converged, "%s P=%d: %d iters, residual %g",
		  solver_kind_name(k), P, sb.iters, sb.residual);
	cr_assert_eq(sb.samples, S);
	cr_assert_eq(sb.samples_converged, S);
	int most = 0;
	for (int s = 0; s < S; s++) {
		m.only = s;
		struct solve_stats s1 =
		    solve_into(be, d, params(k, 1, 1, SCOPE_BATCH), &F, x1);
		m.only = -1;
		cr_assert(s1.converged);
		most = s1.iters > most ? s1.iters : most;
		double err = 0, big = 0;
		for (int p = 0; p < P; p++)
			for (int i = 0; i < len; i++) {
				double a = xb[((size_t)p * S + s) * len + i];
				double b = x1[p * len + i];
				err = fmax(err, fabs(a - b));
				big = fmax(big, fabs(b));
			}
		cr_assert_leq(err, 1e-9 * big, "%s P=%d sample %d: %g",
			      solver_kind_name(k), P, s, err);
	}
	cr_assert_eq(sb.iters, most, "%s P=%d: %d iters, slowest sample %d",
		     solver_kind_name(k), P, sb.iters, most);
	free(xb);
	free(x1);
	diag_free(&m);
	backend_destroy(be);
}

Test(solvers, per_sample_equals_independent_broyden)
{
	check_equals_independent(SOLVER_BROYDEN, 1);
	check_equals_independent(SOLVER_BROYDEN, 2);
}

Test(solvers, per_sample_equals_independent_anderson)
{
	check_equals_independent(SOLVER_ANDERSON, 1);
	check_equals_independent(SOLVER_ANDERSON, 2);
}

Test(solvers, per_sample_equals_independent_fixed_point)
{
	check_equals_independent(SOLVER_FIXED_POINT, 2);
}

/* Scope batch: the solve stops on the composite iterate's whole-batch
 * residual, and that residual is what F says of the returned iterate. */
Test(solvers, batch_scope_reports_true_residual)
{
	const int S = 5, P = 2, len = 3;
	struct backend *be = make_be("cpu64");
	struct diag_map m;
	diag_init(&m, be, S, P, len, 5);
	struct fp_map F = {.apply = diag_apply, .ctx = &m};
	size_t n = (size_t)S * m.d;
	double *x = host(n), *fx = host(n);
	enum stop_mode modes[] = {STOP_ABS, STOP_REL};
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 2; i++) {
			struct solver_params p =
			    params(k ? SOLVER_ANDERSON : SOLVER_BROYDEN, S, P,
				   SCOPE_BATCH);
			p.stop = modes[i];
			p.tol = 1e-3; /* loose: stops mid-way */
			struct solve_stats st = solve_into(be, n, p, &F, x);
			cr_assert(st.converged);
			void *dx = dev(be, n), *dy = dev(be, n);
			up(be, dx, x, n);
			diag_apply(&m, dy, dx);
			down(be, fx, dy, n);
			double g2 = 0, f2 = 0;
			for (size_t j = 0; j < n; j++) {
				g2 += (fx[j] - x[j]) * (fx[j] - x[j]);
				f2 += fx[j] * fx[j];
			}
			double r = modes[i] == STOP_ABS ? sqrt(g2)
							: sqrt(g2) / sqrt(f2);
			cr_assert_float_eq(st.residual, r, 1e-12 * r + 1e-300,
					   "reported %g, true %g", st.residual,
					   r);
			cr_assert_leq(r, p.tol);
			backend_free(be, dx);
			backend_free(be, dy);
		}
	free(x);
	free(fx);
	diag_free(&m);
	backend_destroy(be);
}

/* The stop decision is made on the device and read every sync_every
 * evaluations: the iterate, iterations, residuals and trace are those of
 * sync_every = 1, bit for bit, whatever the solver, scope and sync; the
 * host issues ⌈k/sync⌉·sync evaluations (capped at max_iter) and reads
 * ⌈k/sync⌉ + 1 times (one per sync point reached before max_iter, one at
 * the end). sync_every = 1 reads k + 1 times for k < max_iter. */
Test(solvers, sync_every_keeps_the_result)
{
	const int S = 3, P = 2, len = 4;
	struct backend *be = make_be("cpu64");
	struct diag_map m;
	diag_init(&m, be, S, P, len, 11);
	struct fp_map F = {.apply = diag_apply, .ctx = &m};
	size_t n = (size_t)S * m.d;
	double *x1 = host(n), *xk = host(n);
	enum solver_kind kinds[] = {SOLVER_BROYDEN, SOLVER_ANDERSON,
				    SOLVER_FIXED_POINT};
	int syncs[] = {2, 3, 7, 1000};
	struct solve_rec a, b;
	for (int ki = 0; ki < 3; ki++)
		for (int sc = 0; sc < 2; sc++) {
			struct solver_params p = params(
			    kinds[ki], S, P, sc ? SCOPE_SAMPLE : SCOPE_BATCH);
			p.tol = 1e-6;
			p.max_iter = 60;
			solve_rec(be, n, p, &F, x1, &a);
			int k = a.st.iters;
			cr_assert(a.st.converged && k < p.max_iter, "%s: %d",
				  solver_kind_name(kinds[ki]), k);
			cr_assert_eq(a.st.evals, k);
			cr_assert_eq(a.reads, k + 1);
			for (int si = 0; si < 4; si++) {
				p.sync_every = syncs[si];
				solve_rec(be, n, p, &F, xk, &b);
				const char *nm = solver_kind_name(kinds[ki]);
				cr_assert_eq(memcmp(x1, xk, n * sizeof(double)),
					     0, "%s sync %d: iterate differs",
					     nm, syncs[si]);
				cr_assert_eq(b.st.iters, k);
				cr_assert_eq(b.st.residual, a.st.residual);
				cr_assert_eq(b.st.converged, 1);
				cr_assert_eq(b.st.samples_converged,
					     a.st.samples_converged);
				cr_assert_eq(b.trace_len, a.trace_len);
				cr_assert_eq(memcmp(a.trace, b.trace,
						    (size_t)a.trace_len *
							sizeof(double)),
					     0);
				int q = (k + syncs[si] - 1) / syncs[si];
				int ev = q * syncs[si];
				int reads = q + 1;
				if (ev >= p.max_iter) { /* ran to the cap */
					ev = p.max_iter;
					reads =
					    (p.max_iter - 1) / syncs[si] + 1;
				}
				cr_assert_eq(b.st.evals, ev, "%s sync %d: %d",
					     nm, syncs[si], b.st.evals);
				cr_assert_eq(b.reads, reads, "%s sync %d: %ld",
					     nm, syncs[si], b.reads);
			}
		}
	free(x1);
	free(xk);
	diag_free(&m);
	backend_destroy(be);
}

/* F(x) = a x + c elementwise (host-side, one segment). */
struct affine {
	struct backend *be;
	double a, c;
	int n;
};

static void affine_apply(void *ctx, void *out, const void *in)
{
	struct affine *f = ctx;
	be_fill(f->be, out, f->c, (size_t)f->n);
	be_axpy(f->be, out, f->a, in, (size_t)f->n);
}

/* x ← 2x + 1 from 0 runs away (residual ‖x + 1‖ doubles each step):
 * protect 10 stops it at the first residual above 10× the first one,
 * the 5th (2⁴ = 16); x ← x + 1 never moves its residual (‖1‖ each time):
 * stall 6 stops it after 6 evaluations. Neither is `converged`. */
Test(solvers, protect_and_stall_breaks)
{
	struct backend *be = make_be("cpu64");
	struct affine f = {be, 2.0, 1.0, 4};
	struct fp_map F = {.apply = affine_apply, .ctx = &f};
	double x[4];
	struct solver_params p = params(SOLVER_FIXED_POINT, 1, 1, SCOPE_BATCH);
	p.protect = 10;
	struct solve_stats st = solve_into(be, 4, p, &F, x);
	cr_assert(st.protect_break && !st.stall_break && !st.converged);
	cr_assert_eq(st.iters, 5);
	p.protect = 0;
	st = solve_into(be, 4, p, &F, x);
	cr_assert(!st.protect_break && st.iters == p.max_iter);

	f.a = 1.0;
	p.stall = 6;
	st = solve_into(be, 4, p, &F, x);
	cr_assert(st.stall_break && !st.protect_break && !st.converged);
	cr_assert_eq(st.iters, 6);
	backend_destroy(be);
}

/* A solve's stats name what it ran with: the solver, its tolerance and
 * stop mode (deqbench grad's line and save_params' metadata print them). */
Test(solvers, stats_carry_solver_tol_and_stop)
{
	struct backend *be = make_be("cpu64");
	struct affine f = {be, 0.5, 1.0, 4};
	struct fp_map F = {.apply = affine_apply, .ctx = &f};
	double x[4];
	for (int k = SOLVER_BROYDEN; k <= SOLVER_FIXED_POINT; k++) {
		struct solver_params p = params(k, 1, 1, SCOPE_BATCH);
		p.tol = 1e-6 * (k + 1);
		p.stop = k == SOLVER_ANDERSON ? STOP_ABS : STOP_REL;
		struct solve_stats st = solve_into(be, 4, p, &F, x);
		cr_assert(st.converged, "%s", solver_kind_name(k));
		cr_assert_eq(st.solver, (enum solver_kind)k);
		cr_assert_eq(st.tol, p.tol);
		cr_assert_eq(st.stop, p.stop);
	}
	backend_destroy(be);
}

/* ------------------------------------------------- through the method */

static struct model *model_of(struct backend *be, enum model_kind kind, int B)
{
	struct model_config c = {.kind = kind,
				 .d_model = 12,
				 .n_heads = 3,
				 .d_ff = 20,
				 .seq_len = 5,
				 .batch_size = B,
				 .vocab_size = 17,
				 .seed = 3};
	struct model *m = NULL;
	char err[256];
	cr_assert_eq(model_create(&m, be, &c, err, sizeof(err)), 0, "%s", err);
	int nt = B * 6;
	int32_t *t = malloc(sizeof(int32_t) * (size_t)nt);
	rng_state = 9;
	for (int i = 0; i < nt; i++)
		t[i] = (int32_t)(rnd_u01() * 17);
	cr_assert_eq(model_set_batch(m, t, err, sizeof(err)), 0, "%s", err);
	free(t);
	return m;
}

static void scale_by(struct model *m, const char *name, double s)
{
	const struct model_param *p = model_param_find(m, name);
	cr_assert_not_null(p);
	be_scale(m->be, dq_at(m->be, m->param_buf, p->offset), s, p->numel);
}

/* One training forward + backward with cfg; the solve statistics. */
static struct method_stats run_deq(struct model *m, struct method_config c)
{
	struct method *me = NULL;
	char err[256];
	method_config_resolve(&c);
	cr_assert_eq(method_create(&me, m, &c, err, sizeof(err)), 0, "%s", err);
	void *z = backend_alloc(m->be, m->n_state, MEM_HEAD);
	model_zero_grads(m);
	model_inject_forward(m);
	method_forward(me, m->u, z, 1);
	model_head_forward(m, z);
	model_head_backward(m);
	method_backward(me, m->gz, m->gu);
	struct method_stats st = *method_get_stats(me);
	backend_free(m->be, z);
	method_destroy(me);
	return st;
}

/* Both scopes converge forward and backward; per-sample Broyden needs no
 * more evaluations than one estimate for the batch (each sample's
 * estimate sees only its own block of the block-diagonal Jacobian). */
static void check_scopes(struct model *m)
{
	int iters[2][2]; /* [batching][fwd, bwd] */
	for (int b = 0; b < 2; b++)
		for (int sc = 0; sc < 2; sc++) {
			struct method_config c;
			method_config_defaults(&c);
			c.method = deq_kind();
			deq_config(&c)->f_tol = deq_config(&c)->b_tol = 1e-6;
			deq_config(&c)->f_max_iter =
			    deq_config(&c)->b_max_iter = 60;
			deq_config(&c)->solver_batching =
			    b ? BATCHING_GLOBAL : BATCHING_PER_SAMPLE;
			deq_config(&c)->f_stop_scope =
			    deq_config(&c)->b_stop_scope =
				sc ? SCOPE_SAMPLE : SCOPE_BATCH;
			struct method_stats st = run_deq(m, c);
			cr_assert(st.fwd.converged && st.bwd.converged,
				  "%s %s: fwd %d (%g), bwd %d (%g)",
				  solver_batching_name(
				      deq_config(&c)->solver_batching),
				  stop_scope_name(deq_config(&c)->f_stop_scope),
				  st.fwd.iters, st.fwd.residual, st.bwd.iters,
				  st.bwd.residual);
			cr_assert_eq(st.fwd.samples, b ? 1 : m->B);
			if (sc == 0) {
				iters[b][0] = st.fwd.iters;
				iters[b][1] = st.bwd.iters;
			}
		}
	cr_assert_leq(iters[0][0], iters[1][0],
		      "forward: per-sample %d, "
		      "global %d",
		      iters[0][0], iters[1][0]);
	cr_assert_leq(iters[0][1], iters[1][1],
		      "backward: per-sample %d, "
		      "global %d",
		      iters[0][1], iters[1][1]);
}

Test(solvers, scopes_converge_tanh_cell)
{
	struct backend *be = make_be("cpu64");
	struct model *m = model_of(be, MODEL_TANH_CELL, 4);
	check_scopes(m);
	model_destroy(m);
	backend_destroy(be);
}

/* The transformer at init is no contraction (post-LN: ρ ≈ 1); the strong
 * injection of test_methods.c (inject × 300, embed × 30, ln2 × 0.3, ρ ≈
 * 0.4 measured there) makes it one. */
Test(solvers, scopes_converge_transformer, .timeout = 120)
{
	struct backend *be = make_be("cpu64");
	struct model *m = model_of(be, MODEL_TRANSFORMER, 3);
	scale_by(m, "inject.weight", 300.0);
	scale_by(m, "embed.weight", 30.0);
	scale_by(m, "block.ln2.weight", 0.3);
	check_scopes(m);
	model_destroy(m);
	backend_destroy(be);
}

/* Allocator bytes under MEM_SOLVER against the formulas of solvers.h. */
static size_t solver_bytes(struct model *m, struct method_config c)
{
	struct method *me = NULL;
	char err[256];
	size_t before = m->be->mem.live[MEM_SOLVER], pd, ps;
	method_config_resolve(&c);
	cr_assert_eq(method_create(&me, m, &c, err, sizeof(err)), 0, "%s", err);
	size_t got = m->be->mem.live[MEM_SOLVER] - before;
	cr_assert_eq(method_memory(m, &c, &pd, &ps, err, sizeof(err)), 0);
	cr_assert_eq(ps, got, "predicted %zu, allocated %zu", ps, got);
	method_destroy(me);
	return got;
}

Test(solvers, memory_exact)
{
	struct backend *be = make_be("cpu");
	enum model_kind kinds[] = {MODEL_TANH_CELL, MODEL_TRELLISNET};
	for (int i = 0; i < 2; i++) {
		struct model *m = model_of(be, kinds[i], 3);
		size_t e = be->elem, n = m->n_state, S = (size_t)m->B;
		size_t P = (size_t)m->state_parts;
		struct method_config c;
		method_config_defaults(&c);
		c.method = deq_kind();
		deq_config(&c)->f_history = deq_config(&c)->b_history = 7;
		cr_assert_eq(solver_bytes(m, c),
			     solver_mem(e, (6 + 14) * n + S * 7, S, P, 1, 0));
		deq_config(&c)->solver_batching = BATCHING_GLOBAL;
		cr_assert_eq(solver_bytes(m, c),
			     solver_mem(e, (6 + 14) * n + 7, 1, 1, 1, 0));
		deq_config(&c)->f_solver = deq_config(&c)->b_solver =
		    SOLVER_ANDERSON;
		deq_config(&c)->anderson_m = 4;
		cr_assert_eq(solver_bytes(m, c),
			     solver_mem(e, (3 + 8) * n + 4, 1, 1, 1, 4));
		deq_config(&c)->solver_batching = BATCHING_PER_SAMPLE;
		cr_assert_eq(solver_bytes(m, c),
			     solver_mem(e, (3 + 8) * n + S * 4, S, P, 1, 4));
		deq_config(&c)->f_solver = deq_config(&c)->b_solver =
		    SOLVER_FIXED_POINT;
		cr_assert_eq(solver_bytes(m, c),
			     solver_mem(e, 4 * n, S, P, 1, 0));
		model_destroy(m);
	}
	backend_destroy(be);
}

/* The new keys' ranges: protect_thres 0 or >= 1, stall_window 0 or >= 2,
 * known batching and scopes; each refusal names its key. */
static void expect_refused(struct method_config c, const char *key)
{
	char err[256] = "";
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), -1,
		     "%s accepted", key);
	cr_assert(strstr(err, key), "message '%s' does not name %s", err, key);
}

Test(solvers, bad_keys_name_the_key)
{
	struct method_config c, b;
	char err[256];
	method_config_defaults(&c);
	c.method = deq_kind();
	deq_config(&c)->protect_thres = 1.0;
	deq_config(&c)->stall_window = 2;
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), 0, "%s",
		     err);
	b = c, deq_config(&b)->protect_thres = 0.5;
	expect_refused(b, "protect_thres");
	b = c, deq_config(&b)->protect_thres = INFINITY;
	expect_refused(b, "protect_thres");
	b = c, deq_config(&b)->stall_window = 1;
	expect_refused(b, "stall_window");
	b = c, deq_config(&b)->stall_window = -3;
	expect_refused(b, "stall_window");
	b = c, deq_config(&b)->solver_batching = (enum solver_batching)2;
	expect_refused(b, "solver_batching");
	b = c, deq_config(&b)->b_stop_scope = (enum stop_scope)5;
	expect_refused(b, "stop_scope");
	cr_assert_eq(solver_batching_parse("per_sample"), BATCHING_PER_SAMPLE);
	cr_assert_eq(solver_batching_parse("global"), BATCHING_GLOBAL);
	cr_assert_eq(stop_scope_parse("sample"), SCOPE_SAMPLE);
	cr_assert_eq(stop_scope_parse("all"), -1);
}

/* ------------------------------------------- solvers on linear maps */

struct linear_map {
	struct backend *be;
	void *A, *b; /* (n, n), (n) */
	int n;
};

/* out = A in + b */
static void linear_apply(void *ctx, void *out, const void *in)
{
	struct linear_map *L = ctx;
	be_copy(L->be, out, L->b, (size_t)L->n);
	be_gemm(L->be, 0, 1, 1, L->n, L->n, 1.0, in, L->n, L->A, L->n, 1.0, out,
		L->n);
}

/* On a linear map F(x) = A x + b in n dimensions, good Broyden with full
 * history terminates in at most 2n steps (Gay 1979, "Some convergence
 * properties of Broyden's method"), and Anderson keeping m = n + 1 iterates
 * with λ = 0 is GMRES on (I − A) x = b (Walker & Ni 2011, Theorem 2.2), exact
 * after at most n + 1 iterates — in exact arithmetic; in double the residual
 * then sits at ~1e-13 of ‖b‖. A's spectral radius is 1.5 here (fixed-point
 * iteration diverges), which both methods do not care about. Any slip in
 * the rank-1 update or the mixing weights loses finite termination (seen
 * here: a Broyden update 10% off took 21 evaluations, an Anderson Gram
 * matrix 1% off took 29). */
Test(solvers, linear_finite_termination)
{
	struct backend *be = make_be("cpu64");
	const int n = 8;
	double A[64], b[8];
	uint64_t save = rng_state;
	rng_state = 1234;
	for (int i = 0; i < n * n; i++)
		A[i] = (rnd_u01() - 0.5) * 0.9;
	for (int i = 0; i < n; i++) {
		A[i * n + i] += 0.2 * i; /* eigenvalues spread to ~1.5 */
		b[i] = rnd_u01() - 0.5;
	}
	rng_state = save;
	struct linear_map L = {be, backend_alloc(be, 64, MEM_WORKSPACE),
			       backend_alloc(be, 8, MEM_WORKSPACE), n};
	be_upload(be, L.A, A, 64);
	be_upload(be, L.b, b, 8);
	struct fp_map F = {.apply = linear_apply, .ctx = &L};
	struct solver_params p[2] = {
	    {.kind = SOLVER_BROYDEN,
	     .tol = 1e-10,
	     .max_iter = 100,
	     .stop = STOP_ABS,
	     .history = 100,
	     .anderson_m = 1},
	    {.kind = SOLVER_ANDERSON,
	     .tol = 1e-10,
	     .max_iter = 100,
	     .stop = STOP_ABS,
	     .history = 1,
	     .anderson_m = n + 1,
	     .lambda = 0,
	     .beta = 1},
	};
	int bound[2] = {2 * n + 1, n + 2};
	struct solver *s;
	char err[256];
	cr_assert_eq(solver_create(&s, be, (size_t)n, p, 2, err, sizeof(err)),
		     0, "%s", err);
	for (int k = 0; k < 2; k++) {
		struct solve_stats st;
		double tr[METHOD_TRACE_MAX];
		int tl = 0;
		long reads = 0;
		const void *x =
		    solver_solve(s, &p[k], &F, &st, tr, &tl, &reads);
		cr_assert(st.converged, "%s: %d iters, residual %g",
			  solver_kind_name(p[k].kind), st.iters, st.residual);
		cr_assert_leq(st.iters, bound[k], "%s took %d evaluations",
			      solver_kind_name(p[k].kind), st.iters);
		/* the returned x really solves x = A x + b */
		double xs[8], r = 0;
		be_download(be, xs, x, 8);
		for (int i = 0; i < n; i++) {
			double v = b[i] - xs[i];
			for (int j = 0; j < n; j++)
				v += A[i * n + j] * xs[j];
			r += v * v;
		}
		cr_assert_leq(sqrt(r), 1e-10);
		cr_assert_gt(reads, 0);
	}
	/* fixed-point iteration diverges here: reported, not converged */
	struct solver_params fp = {.kind = SOLVER_FIXED_POINT,
				   .tol = 1e-10,
				   .max_iter = 100,
				   .stop = STOP_REL};
	struct solver *s2;
	cr_assert_eq(
	    solver_create(&s2, be, (size_t)n, &fp, 1, err, sizeof(err)), 0);
	struct solve_stats st;
	int tl = 0;
	long reads = 0;
	solver_solve(s2, &fp, &F, &st, NULL, &tl, &reads);
	cr_assert(!st.converged);
	solver_destroy(s2);
	solver_destroy(s);
	backend_free(be, L.A);
	backend_free(be, L.b);
	backend_destroy(be);
}
