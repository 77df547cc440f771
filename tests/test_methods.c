/*
 * test_methods.c — methods/ (unroll, checkpoint, deq and its solvers) on the
 * CPU backends, through the same step every training run takes:
 *   inject → method forward → head (mean cross-entropy) → head backward →
 *   method backward → inject backward.
 *
 *   1. checkpoint equals unroll bitwise on "cpu" (same block calls on the
 *      same values in the same order), for L not divisible by k too;
 *   2. every method's whole-loss gradient against central finite
 *      differences on "cpu64" (sampled coordinates of every tensor);
 *   3. memory, exactly, from the allocator counters: unroll's depth peak is
 *      L·tape + 2n (linear in L), checkpoint's (⌈L/k⌉−1)·n + k·tape + 4n,
 *      deq's tape + n whatever f_max_iter and the iterations taken, its
 *      solver peak (6 + 2h) n + h for Broyden with history h (affine in h,
 *      slope 2n); nothing is allocated during a step;
 *   4. deq on tanh_cell (‖W‖₂ = 0.45) and on the transformer block (in a
 *      contractive regime, see make_contractive_transformer in
 *      test_deq_util.h): the forward solve reaches f_tol and the IFT
 *      gradient matches unrolling to convergence; Broyden, Anderson and
 *      fixed-point iteration reach the same z*; iteration caps are exact;
 *      a non-contractive map (‖W‖₂ = 3) is reported as not converged; a
 *      non-finite one as non-finite; jfb equals its formula (one VJP at
 *      z*) bitwise;
 *   5. bad configs give a message naming the key.
 *
 * Tolerances are justified where they are used.
 */
#include "../methods/checkpoint.h"
#include "../methods/deq.h"
#include "methods/method.h"

#define DQ_TEST_SEED 7
#include "test_util.h"
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_deq_util.h"

/* ------------------------------------------------------------- helpers */

static const struct shape odd = {3, 5, 12, 3, 20, 17};
static const struct shape pow2 = {2, 8, 16, 4, 32, 32};

/* Scales parameter `name` so that its spectral norm is `target` (power
 * iteration on WᵀW in double, 200 rounds: for these d ≤ 16 matrices the
 * gap makes it exact to ~1e-12). */
static void set_spectral_norm(struct model *m, const char *name, double target)
{
	const struct model_param *p = model_param_find(m, name);
	cr_assert_not_null(p);
	size_t r = (size_t)p->shape[0], c = (size_t)p->shape[1];
	double *w = malloc(sizeof(double) * r * c),
	       *v = malloc(sizeof(double) * c), *t = malloc(sizeof(double) * r);
	void *dp = dq_at(m->be, m->param_buf, p->offset);
	be_download(m->be, w, dp, r * c);
	for (size_t j = 0; j < c; j++)
		v[j] = 1.0 + 0.01 * (double)j;
	double sigma = 0;
	for (int it = 0; it < 200; it++) {
		double nt = 0, nv = 0;
		for (size_t i = 0; i < r; i++) {
			t[i] = 0;
			for (size_t j = 0; j < c; j++)
				t[i] += w[i * c + j] * v[j];
			nt += t[i] * t[i];
		}
		for (size_t j = 0; j < c; j++) {
			v[j] = 0;
			for (size_t i = 0; i < r; i++)
				v[j] += w[i * c + j] * t[i];
			nv += v[j] * v[j];
		}
		nv = sqrt(nv);
		for (size_t j = 0; j < c; j++)
			v[j] /= nv;
		sigma = sqrt(nt) / 1.0;
		(void)sigma;
	}
	/* σ = ‖W v‖ for the top right singular vector v (unit norm) */
	double nt = 0;
	for (size_t i = 0; i < r; i++) {
		double s = 0;
		for (size_t j = 0; j < c; j++)
			s += w[i * c + j] * v[j];
		nt += s * s;
	}
	sigma = sqrt(nt);
	for (size_t k = 0; k < r * c; k++)
		w[k] *= target / sigma;
	be_upload(m->be, dp, w, r * c);
	free(w);
	free(v);
	free(t);
}

/* open_model made a contraction: tanh_cell with ‖cell.weight‖₂ = 0.45
 * (make_contractive bounds the Frobenius norm instead), the transformer
 * with the strong injection of make_contractive_transformer. */
static struct model *open_spectral(const char *name, enum model_kind kind,
				   struct shape s, uint64_t tokens)
{
	struct model *m = open_model(name, kind, s, tokens);
	if (kind == MODEL_TANH_CELL)
		set_spectral_norm(m, "cell.weight", 0.45);
	else
		make_contractive_transformer(m, 1);
	return m;
}

/* ------------------------------------------- 1. checkpoint == unroll */

/* Loss, z, dL/du and every gradient of unroll and checkpoint(k) compared
 * bit for bit on "cpu" (float32: any reordering would show). */
static void check_ckpt_equals_unroll(enum model_kind kind, struct shape s,
				     int L, int k)
{
	struct model *m = open_model("cpu", kind, s, 3);
	void *z = dev_state(m);
	struct step_out un =
	    step_of(m, cfg_of(method_kind_parse("unroll"), L, 0), z);
	struct step_out ck = step_of(m, cfg_of(checkpoint_kind(), L, k), z);
	char what[32];
	snprintf(what, sizeof(what), "L=%d k=%d", L, k);
	assert_same_step(m, &un, &ck, what);
	/* one extra forward per layer outside the last segment */
	int kk = checkpoint_config(&ck.cfg)->k,
	    last = L - ((L + kk - 1) / kk - 1) * kk;
	cr_assert_eq(un.st.forward_evals, L);
	cr_assert_eq(ck.st.forward_evals, L + (L - last), "forward evals %ld",
		     ck.st.forward_evals);
	cr_assert_eq(ck.st.vjp_evals, L);
	step_out_free(&un);
	step_out_free(&ck);
	close_model(m);
}

Test(checkpoint, equals_unroll_transformer)
{
	check_ckpt_equals_unroll(MODEL_TRANSFORMER, odd, 7, 3);
	check_ckpt_equals_unroll(MODEL_TRANSFORMER, pow2, 8, 2);
	check_ckpt_equals_unroll(MODEL_TRANSFORMER, odd, 5, 5);
	check_ckpt_equals_unroll(MODEL_TRANSFORMER, odd, 6, 1);
}

Test(checkpoint, equals_unroll_tanh_cell)
{
	check_ckpt_equals_unroll(MODEL_TANH_CELL, odd, 10, 0); /* auto: 3 */
	check_ckpt_equals_unroll(MODEL_TANH_CELL, pow2, 9, 4);
	check_ckpt_equals_unroll(MODEL_TANH_CELL, odd, 1, 1);
}

Test(checkpoint, k_auto_is_round_sqrt)
{
	struct backend *be = make_be("cpu");
	struct model *m = deq_model(be, MODEL_TANH_CELL, odd);
	int Ls[] = {1, 2, 3, 7, 12, 13, 70};
	int ks[] = {1, 1, 2, 3, 3, 4, 8};
	for (int i = 0; i < 7; i++) {
		struct method *me =
		    new_method(m, cfg_of(checkpoint_kind(), Ls[i], 0));
		cr_assert_eq(checkpoint_config(method_get_config(me))->k, ks[i],
			     "L=%d: k=%d", Ls[i],
			     checkpoint_config(method_get_config(me))->k);
		method_destroy(me);
	}
	close_model(m);
}

/* ------------------------------------- 2. gradients vs finite differences */

/* Central differences of the whole loss on cpu64 at 6 sampled coordinates
 * of every parameter tensor (fd_params), h = 1e-6 relative to the
 * coordinate (O(1) values mostly; the transformer's scaled injection and
 * embeddings reach ~20). The transformer is checked with the strong
 * injection of make_contractive_transformer: at plain init its first layer
 * takes LayerNorm of a residual of ~1e-4 (z₀ = 0 plus products of
 * 0.02-scale weights), so the loss has gradients of ~200 and curvature
 * that makes any quotient inaccurate (measured: 0.5% off at h = 1e-6) — a
 * property of that point, not of the code. Error budget: truncation
 * h² L'''/6 below 1e-9, rounding ε|L|/h ~ 3e-10. A ReLU pre-activation
 * within h of 0 mixes two slopes; such a coordinate is re-checked at h/16
 * and h/256 (a kink that close is 16× less likely, a wrong formula does
 * not improve).
 * For deq the loss is computed through solves stopped at tol: the solved
 * z* moves with θ smoothly only up to the solver error, ≤ tol/(1−ρ) with
 * contraction ρ ≤ 0.45 here, so with f_tol = 1e-13 the quotient carries
 * at most 2·1e-13/(0.55 h) ~ 4e-7 of solver noise (absolute). The IFT
 * gradient has b_tol = 1e-13 too. Tolerance: 1e-6 relative to the
 * tensor's largest gradient plus atol (1e-9 unrolled, 1e-6 deq); a wrong
 * term is O(1) off. */
static void check_fd(enum model_kind kind, struct shape s,
		     struct method_config c)
{
	const double atol = c.method == deq_kind() ? 1e-6 : 1e-9;
	struct model *m = open_spectral("cpu64", kind, s, 5);
	struct backend *be = m->be;
	struct eval_fx f = {m, new_method(m, c), dev_state(m)};
	step(m, f.me, f.z, NULL);
	double *g = download(be, m->grad_buf, m->n_param_elems);
	fd_params(m, g, 1e-6, atol, loss_only, &f, method_kind_name(c.method));
	free(g);
	method_destroy(f.me);
	close_model(m);
}

static struct method_config deq_tight(enum solver_kind fs, enum solver_kind bs)
{
	struct method_config c = deq_solvers(fs, bs, 1e-13, 200);
	deq_config(&c)->anderson_lambda =
	    0; /* absolute λ: see check_deq_vs_unroll */
	return c;
}

Test(gradients, unroll_checkpoint_fd)
{
	check_fd(MODEL_TRANSFORMER, odd,
		 cfg_of(method_kind_parse("unroll"), 3, 0));
	check_fd(MODEL_TRANSFORMER, pow2, cfg_of(checkpoint_kind(), 5, 2));
	check_fd(MODEL_TANH_CELL, odd,
		 cfg_of(method_kind_parse("unroll"), 4, 0));
	check_fd(MODEL_TANH_CELL, pow2, cfg_of(checkpoint_kind(), 7, 3));
}

Test(gradients, deq_ift_fd, .timeout = 120)
{
	check_fd(MODEL_TANH_CELL, odd,
		 deq_tight(SOLVER_BROYDEN, SOLVER_BROYDEN));
	check_fd(MODEL_TANH_CELL, pow2,
		 deq_tight(SOLVER_ANDERSON, SOLVER_FIXED_POINT));
}

/* --------------------------------------------------------- 3. memory */

struct mem_seen {
	size_t depth_after_create, solver_after_create;
	size_t depth_peak, solver_peak, ds_peak;
	size_t allocs_before, allocs_after;
};

/* Creates the method, resets the peaks, runs one training step and reads
 * the counters. */
static struct mem_seen measure(struct model *m, struct method_config c,
			       struct method_stats *st_out)
{
	struct backend *be = m->be;
	struct mem_seen r;
	void *z = dev_state(m);
	struct method *me = new_method(m, c);
	r.depth_after_create = be->mem.live[MEM_DEPTH];
	r.solver_after_create = be->mem.live[MEM_SOLVER];
	backend_mem_reset_peak(be);
	r.allocs_before = be->mem.n_allocs;
	step(m, me, z, NULL);
	r.allocs_after = be->mem.n_allocs;
	r.depth_peak = be->mem.peak[MEM_DEPTH];
	r.solver_peak = be->mem.peak[MEM_SOLVER];
	r.ds_peak = be->mem.peak_depth_solver;
	if (st_out)
		*st_out = *method_get_stats(me);

	size_t db, sb;
	char err[256];
	method_config_resolve(&c);
	cr_assert_eq(method_memory(m, &c, &db, &sb, err, sizeof(err)), 0);
	cr_assert_eq(db, r.depth_after_create, "method_memory depth %zu vs %zu",
		     db, r.depth_after_create);
	cr_assert_eq(sb, r.solver_after_create);
	method_destroy(me);
	backend_free(be, z);
	cr_assert_eq(be->mem.live[MEM_DEPTH], 0);
	cr_assert_eq(be->mem.live[MEM_SOLVER], 0);
	return r;
}

Test(memory, unroll_linear_in_L)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 1);
	struct backend *be = m->be;
	size_t e = be->elem, tape = model_tape_elems(m), n = m->n_state;
	int Ls[] = {1, 2, 5, 9, 16};
	for (int i = 0; i < 5; i++) {
		struct mem_seen r = measure(
		    m, cfg_of(method_kind_parse("unroll"), Ls[i], 0), NULL);
		size_t want = e * ((size_t)Ls[i] * tape + 2 * n);
		cr_assert_eq(r.depth_peak, want, "L=%d: %zu vs %zu", Ls[i],
			     r.depth_peak, want);
		cr_assert_eq(r.solver_peak, 0);
		cr_assert_eq(r.allocs_before, r.allocs_after,
			     "a step allocated");
	}
	close_model(m);
}

Test(memory, checkpoint_formula)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, pow2, 1);
	struct backend *be = m->be;
	size_t e = be->elem, tape = model_tape_elems(m), n = m->n_state;
	int cases[][2] = {{1, 1},  {6, 2},  {7, 3},   {9, 3},
			  {10, 4}, {16, 4}, {13, 13}, {12, 1}};
	for (int i = 0; i < 8; i++) {
		int L = cases[i][0], k = cases[i][1];
		struct mem_seen r =
		    measure(m, cfg_of(checkpoint_kind(), L, k), NULL);
		size_t S = (size_t)(L + k - 1) / (size_t)k;
		size_t want = e * ((S - 1) * n + (size_t)k * tape + 4 * n);
		cr_assert_eq(r.depth_peak, want, "L=%d k=%d: %zu vs %zu", L, k,
			     r.depth_peak, want);
		cr_assert_eq(r.allocs_before, r.allocs_after);
	}
	/* √L growth: at L = 64, k = 8 keeps 7 checkpoints and 8 tapes, far
	 * below unroll's 64 tapes */
	struct mem_seen ck = measure(m, cfg_of(checkpoint_kind(), 64, 0), NULL);
	struct mem_seen un =
	    measure(m, cfg_of(method_kind_parse("unroll"), 64, 0), NULL);
	cr_assert_eq(ck.depth_peak, e * (7 * n + 8 * tape + 4 * n));
	cr_assert_lt(ck.depth_peak * 4, un.depth_peak);
	close_model(m);
}

Test(memory, deq_depth_flat_solver_affine_in_history)
{
	struct model *m = open_model("cpu", MODEL_TANH_CELL, odd, 1);
	struct backend *be = m->be;
	size_t e = be->elem, tape = model_tape_elems(m), n = m->n_state;
	size_t depth0 = 0, S = (size_t)m->B, P = (size_t)m->state_parts;
	int caps[] = {1, 5, 50};
	for (int i = 0; i < 3; i++) {
		struct method_config c = cfg_of(deq_kind(), 0, 0);
		deq_config(&c)->f_max_iter = caps[i];
		deq_config(&c)->b_max_iter = 7;
		deq_config(&c)->f_history = 4;
		deq_config(&c)->b_history = 4;
		deq_config(&c)->f_tol = 1e-30; /* run to the cap */
		struct method_stats st;
		struct mem_seen r = measure(m, c, &st);
		cr_assert_eq(st.fwd.iters, caps[i]);
		cr_assert_eq(r.depth_peak, e * (tape + n), "depth %zu",
			     r.depth_peak);
		if (i == 0)
			depth0 = r.depth_peak;
		cr_assert_eq(r.depth_peak, depth0);
		/* same history: same solver memory whatever the cap; per
		 * sample (the default), S = B coefficient rows */
		cr_assert_eq(
		    r.solver_peak,
		    solver_mem(e, 6 * n + 2 * 4 * n + S * 4, S, P, 1, 0));
		cr_assert_eq(r.ds_peak, r.depth_peak + r.solver_peak);
		cr_assert_eq(r.allocs_before, r.allocs_after);
	}
	/* Broyden history h: (6 + 2h) n + S h, and the control block; the
	 * default history is the
	 * larger max_iter (forward and backward share one buffer) */
	int hs[] = {1, 2, 8, 30};
	for (int i = 0; i < 4; i++) {
		struct method_config c = cfg_of(deq_kind(), 0, 0);
		deq_config(&c)->f_history = deq_config(&c)->b_history = hs[i];
		struct mem_seen r = measure(m, c, NULL);
		size_t h = (size_t)hs[i];
		cr_assert_eq(r.solver_peak,
			     solver_mem(e, (6 + 2 * h) * n + S * h, S, P, 1, 0),
			     "h=%zu: %zu", h, r.solver_peak);
	}
	struct method_config c = cfg_of(deq_kind(), 0, 0);
	deq_config(&c)->f_max_iter = 12;
	deq_config(&c)->b_max_iter =
	    20; /* histories default to the caps: 20 wins */
	cr_assert_eq(measure(m, c, NULL).solver_peak,
		     solver_mem(e, (6 + 2 * 20) * n + S * 20, S, P, 1, 0));
	/* Anderson m: (3 + 2m) n + S m; fixed point: 4n */
	deq_config(&c)->f_solver = deq_config(&c)->b_solver = SOLVER_ANDERSON;
	deq_config(&c)->anderson_m = 6;
	cr_assert_eq(measure(m, c, NULL).solver_peak,
		     solver_mem(e, (3 + 12) * n + S * 6, S, P, 1, 6));
	deq_config(&c)->f_solver = deq_config(&c)->b_solver =
	    SOLVER_FIXED_POINT;
	cr_assert_eq(measure(m, c, NULL).solver_peak,
		     solver_mem(e, 4 * n, S, P, 1, 0));
	/* jfb needs no backward solver */
	deq_config(&c)->f_solver = SOLVER_BROYDEN;
	deq_config(&c)->b_mode = BMODE_JFB;
	deq_config(&c)->f_history = 3;
	cr_assert_eq(measure(m, c, NULL).solver_peak,
		     solver_mem(e, (6 + 6) * n + S * 3, S, P, 1, 0));
	close_model(m);
}

Test(memory, depth_solver_ordering)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, pow2, 1);
	struct method_config d = cfg_of(deq_kind(), 0, 0);
	deq_config(&d)->f_history = deq_config(&d)->b_history = 8;
	size_t un = measure(m, cfg_of(method_kind_parse("unroll"), 32, 0), NULL)
			.ds_peak;
	size_t ck = measure(m, cfg_of(checkpoint_kind(), 32, 0), NULL).ds_peak;
	size_t dq = measure(m, d, NULL).ds_peak;
	cr_assert(un > ck && ck > dq, "unroll %zu checkpoint %zu deq %zu", un,
		  ck, dq);
	close_model(m);
}

/* ------------------------------------------------------------- 4. deq */

/* Unrolled to convergence vs deq/ift on cpu64: both gradients of the
 * same loss. Unrolling L layers from 0 differs from the fixed point by
 * ρ^L; with ρ ≤ 0.5 and L = 200 that is 1e-60, and its gradient (a sum
 * of ḡ Jⁱ ∂f/∂θ) by the same order; the deq side is exact up to the
 * solver tolerances 1e-12 (abs, residual norms of O(1..10) vectors):
 * errors ≲ tol/(1−ρ) ≈ 2e-12 absolute, against gradients of O(1e-3..1).
 * Tolerance 1e-7 relative to each tensor's largest entry (a missing or
 * doubled term is O(1) off). */
static void check_deq_vs_unroll(enum model_kind kind, struct shape s,
				enum solver_kind fs, enum solver_kind bs,
				int L_unroll)
{
	struct model *m = open_spectral("cpu64", kind, s, 9);
	struct method_config c = deq_solvers(fs, bs, 1e-12, 150);
	/* λ is absolute (torchdeq's convention): once ‖G‖² ≪ λ the mixing
	 * degenerates to averaging and stalls near ‖G‖ ~ √λ, so tight
	 * tolerances need λ = 0 */
	deq_config(&c)->anderson_lambda = 0;
	struct method_stats st =
	    deq_matches_unroll(m, dev_state(m), c, L_unroll);
	cr_assert_eq(st.forward_evals, st.fwd.iters + 1);
	cr_assert_eq(st.vjp_evals, st.bwd.iters + 1);
	close_model(m);
}

Test(deq, ift_matches_unroll_tanh_cell, .timeout = 120)
{
	check_deq_vs_unroll(MODEL_TANH_CELL, odd, SOLVER_BROYDEN,
			    SOLVER_BROYDEN, 200);
	check_deq_vs_unroll(MODEL_TANH_CELL, pow2, SOLVER_ANDERSON,
			    SOLVER_ANDERSON, 200);
	check_deq_vs_unroll(MODEL_TANH_CELL, odd, SOLVER_FIXED_POINT,
			    SOLVER_BROYDEN, 200);
}

Test(deq, ift_matches_unroll_transformer, .timeout = 300)
{
	check_deq_vs_unroll(MODEL_TRANSFORMER, odd, SOLVER_BROYDEN,
			    SOLVER_BROYDEN, 200);
	check_deq_vs_unroll(MODEL_TRANSFORMER, pow2, SOLVER_ANDERSON,
			    SOLVER_FIXED_POINT, 200);
}

/* The three solvers find the same z* (the unique fixed point of a
 * contraction): ‖z*_a − z*_b‖ ≤ (tol_a + tol_b)/(1−ρ) ≈ 4e-12 at tol
 * 1e-12; asserted at 1e-10 of max|z*|. Broyden needs far fewer
 * evaluations than plain iteration on the transformer (asserted loosely:
 * fewer). */
Test(deq, solvers_agree_on_fixed_point, .timeout = 120)
{
	enum model_kind kinds[] = {MODEL_TANH_CELL, MODEL_TRANSFORMER};
	for (int q = 0; q < 2; q++) {
		struct model *m = open_spectral("cpu64", kinds[q], odd, 4);
		struct backend *be = m->be;
		void *z = dev_state(m);
		double *zs[3];
		int iters[3];
		for (int k = 0; k < 3; k++) {
			/* forward only: the backward keys do not matter */
			struct method_config c = deq_solvers(
			    (enum solver_kind)k, SOLVER_BROYDEN, 1e-12, 300);
			deq_config(&c)->anderson_lambda = 0;
			struct method *me = new_method(m, c);
			model_inject_forward(m);
			method_forward(me, m->u, z, 0);
			const struct method_stats *st = method_get_stats(me);
			cr_assert(st->fwd.converged, "%s: residual %g",
				  solver_kind_name(deq_config(&c)->f_solver),
				  st->fwd.residual);
			iters[k] = st->fwd.iters;
			zs[k] =
			    download(be, method_fixed_point(me), m->n_state);
			method_destroy(me);
		}
		cr_assert_leq(rel_max_err(zs[0], zs[2], m->n_state), 1e-10);
		cr_assert_leq(rel_max_err(zs[1], zs[2], m->n_state), 1e-10);
		cr_assert_lt(iters[SOLVER_BROYDEN], iters[SOLVER_FIXED_POINT],
			     "broyden %d, fixed point %d",
			     iters[SOLVER_BROYDEN], iters[SOLVER_FIXED_POINT]);
		for (int k = 0; k < 3; k++)
			free(zs[k]);
		close_model(m);
	}
}

/* Caps: with an unreachable tolerance every solver makes exactly
 * max_iter evaluations, forward and backward, and the method counts one
 * more of each (the taped application, the parameter VJP). */
Test(deq, caps_exact)
{
	/* cpu64 and a weak contraction: no solver gets near an exactly
	 * representable fixed point (residual 0) within 31 evaluations, and
	 * the backward iteration does not diverge */
	struct model *m = open_model("cpu64", MODEL_TRANSFORMER, odd, 2);
	make_contractive_transformer(m, 0);
	void *z = dev_state(m);
	int caps[] = {1, 2, 3, 7, 31};
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < 5; i++) {
			struct method_config c = cfg_of(deq_kind(), 0, 0);
			deq_config(&c)->f_solver = deq_config(&c)->b_solver =
			    (enum solver_kind)k;
			deq_config(&c)->f_tol = deq_config(&c)->b_tol = 1e-30;
			deq_config(&c)->f_max_iter = caps[i];
			deq_config(&c)->b_max_iter = caps[4 - i];
			deq_config(&c)->f_history =
			    2; /* wraps the Broyden ring */
			deq_config(&c)->anderson_m = 3;
			struct method *me = new_method(m, c);
			step(m, me, z, NULL);
			const struct method_stats *st = method_get_stats(me);
			cr_assert_eq(st->fwd.iters, caps[i]);
			cr_assert_eq(st->bwd.iters, caps[4 - i],
				     "%s f%d b%d: bwd %d (res %g nonfinite %d)",
				     solver_kind_name(deq_config(&c)->f_solver),
				     caps[i], caps[4 - i], st->bwd.iters,
				     st->bwd.residual, st->bwd.nonfinite);
			cr_assert_eq(st->forward_evals, caps[i] + 1);
			cr_assert_eq(st->vjp_evals, caps[4 - i] + 1);
			cr_assert(!st->fwd.converged && !st->fwd.nonfinite);
			cr_assert(isfinite(st->fwd.residual));
			cr_assert_eq(st->fwd_trace_len, caps[i]);
			cr_assert_eq(st->bwd_trace_len, caps[4 - i]);
			/* the reported residual is the lowest seen */
			for (int t = 0; t < st->fwd_trace_len; t++)
				cr_assert_geq(st->fwd_trace[t],
					      st->fwd.residual);
			method_destroy(me);
		}
	close_model(m);
}

/* W = −3 I (‖W‖₂ = 3): f(z) = tanh(u − 3z) has a unique fixed point, where
 * |f'| = 3 (1 − z*²) > 1 for these small u, so fixed-point iteration falls
 * into a 2-cycle and must report not converged after exactly f_max_iter
 * evaluations; its backward iteration y ← y J + ḡ diverges and must end
 * as not converged or non-finite, with finite loss and no crash. Broyden
 * and Anderson may find the (repelling) fixed point — a correct result —
 * so for them the test checks that what they report is true, by
 * recomputing ‖f(z*) − z*‖. */
Test(deq, non_contractive_reported)
{
	struct backend *be = make_be("cpu64");
	struct model *m = deq_model(be, MODEL_TANH_CELL, pow2);
	const struct model_param *p = model_param_find(m, "cell.weight");
	size_t d = (size_t)m->d, n = m->n_state;
	double *w = calloc(d * d, sizeof(double));
	for (size_t i = 0; i < d; i++)
		w[i * d + i] = -3.0;
	be_upload(be, dq_at(be, m->param_buf, p->offset), w, d * d);
	free(w);
	void *z = dev_state(m), *fz = dev_state(m);
	set_tokens(m, 2);
	for (int k = 0; k < 3; k++) {
		struct method_config c = cfg_of(deq_kind(), 0, 0);
		deq_config(&c)->f_solver = deq_config(&c)->b_solver =
		    (enum solver_kind)k;
		deq_config(&c)->f_tol = deq_config(&c)->b_tol = 1e-6;
		deq_config(&c)->f_max_iter = deq_config(&c)->b_max_iter = 40;
		struct method *me = new_method(m, c);
		double loss = step(m, me, z, NULL);
		const struct method_stats *st = method_get_stats(me);
		cr_assert(isfinite(loss));
		cr_assert(!st->fwd.nonfinite);
		if (deq_config(&c)->f_solver == SOLVER_FIXED_POINT) {
			cr_assert(!st->fwd.converged, "fixed point converged");
			cr_assert_eq(st->fwd.iters, 40);
			cr_assert_gt(st->fwd.residual, 1e-2);
			cr_assert(!st->bwd.converged);
		}
		/* the claim, checked: r = ‖f(z*) − z*‖ / ‖f(z*)‖ */
		method_forward(me, m->u, z, 0);
		st = method_get_stats(me);
		const void *zs = method_fixed_point(me);
		model_block_forward(m, fz, zs, m->u, NULL);
		be_axpy(be, fz, -1.0, zs, n);
		double r = be_norm(be, fz, n);
		model_block_forward(m, fz, zs, m->u, NULL);
		r /= be_norm(be, fz, n);
		cr_assert(fabs(r - st->fwd.residual) <= 1e-12 * (1 + r),
			  "%s: reported %g, true %g", solver_kind_name(k),
			  st->fwd.residual, r);
		cr_assert_eq(st->fwd.converged, r <= 1e-6);
		method_destroy(me);
	}
	close_model(m);
}

/* A map that produces inf: the first residual is not finite, the solve
 * stops after that one evaluation and says so; the returned iterate is
 * z₀ = 0 (finite). */
Test(deq, nonfinite_ends_solve)
{
	struct backend *be = make_be("cpu");
	struct model *m = deq_model(be, MODEL_TANH_CELL, odd);
	const struct model_param *p = model_param_find(m, "inject.bias");
	double inf = INFINITY;
	be_upload(be, dq_at(be, m->param_buf, p->offset), &inf, 1);
	/* tanh(inf) = 1 is finite: poison the weight instead */
	p = model_param_find(m, "cell.weight");
	double nan = NAN;
	be_upload(be, dq_at(be, m->param_buf, p->offset), &nan, 1);
	void *z = dev_state(m);
	set_tokens(m, 2);
	for (int k = 0; k < 3; k++) {
		struct method_config c = cfg_of(deq_kind(), 0, 0);
		deq_config(&c)->f_solver = (enum solver_kind)k;
		struct method *me = new_method(m, c);
		model_inject_forward(m);
		method_forward(me, m->u, z, 0);
		const struct method_stats *st = method_get_stats(me);
		cr_assert(st->fwd.nonfinite && !st->fwd.converged);
		cr_assert_eq(st->fwd.iters, 1);
		double *zs = download(be, method_fixed_point(me), m->n_state);
		for (size_t i = 0; i < m->n_state; i++)
			cr_assert_eq(zs[i], 0.0);
		free(zs);
		method_destroy(me);
	}
	close_model(m);
}

/* jfb: the gradient is one VJP of f at z* with ḡ = ∂L/∂z — recomputed
 * here by hand from method_fixed_point and compared bit for bit. */
Test(deq, jfb_is_one_vjp_at_fixed_point)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, odd, 6);
	struct backend *be = m->be;
	make_contractive_transformer(m, 1);
	void *z = dev_state(m), *z2 = dev_state(m), *gin = dev_state(m);
	void *tape = backend_alloc(be, model_tape_elems(m), MEM_DEPTH);
	size_t np = m->n_param_elems, nu = m->n_u;
	struct method_config c = cfg_of(deq_kind(), 0, 0);
	deq_config(&c)->b_mode = BMODE_JFB;
	struct method *me = new_method(m, c);
	step(m, me, z, NULL);
	cr_assert_eq(method_get_stats(me)->vjp_evals, 1);
	cr_assert(!method_get_stats(me)->has_bwd_solve);
	double *g1 = download(be, m->grad_buf, np),
	       *u1 = download(be, m->gu, nu);

	/* by hand: z2 = f(z*) with a tape, ḡ from the head, one VJP */
	model_zero_grads(m);
	model_inject_forward(m);
	model_block_forward(m, z2, method_fixed_point(me), m->u, tape);
	model_head_forward(m, z2);
	model_head_backward(m);
	model_block_vjp(m, gin, m->gu, m->gz, tape, 1);
	model_inject_backward(m);
	double *g2 = download(be, m->grad_buf, np),
	       *u2 = download(be, m->gu, nu);
	cr_assert_eq(memcmp(g1, g2, np * sizeof(double)), 0);
	cr_assert_eq(memcmp(u1, u2, nu * sizeof(double)), 0);
	free(g1), free(g2), free(u1), free(u2);
	method_destroy(me);
	close_model(m);
}

/* A step run twice gives the same bits (solvers included). */
Test(deq, deterministic)
{
	struct model *m = open_model("cpu", MODEL_TRANSFORMER, pow2, 8);
	struct backend *be = m->be;
	void *z = dev_state(m);
	double l[2], *g[2];
	for (int r = 0; r < 2; r++) {
		struct method *me = new_method(m, cfg_of(deq_kind(), 0, 0));
		l[r] = step(m, me, z, NULL);
		g[r] = download(be, m->grad_buf, m->n_param_elems);
		method_destroy(me);
	}
	cr_assert_eq(memcmp(&l[0], &l[1], sizeof(double)), 0);
	cr_assert_eq(memcmp(g[0], g[1], m->n_param_elems * sizeof(double)), 0);
	free(g[0]);
	free(g[1]);
	close_model(m);
}

/* ------------------------------------------------------ 5. bad configs */

/* Case i of bad_values_name_the_key: breaks one key of c, returns its
 * name (NULL past the last case). */
static const char *break_key(int i, struct method_config *c)
{
	c->method = deq_kind();
	switch (i) {
	case 0:
		c->method = (int)7;
		return "method";
	case 1:
		c->method = method_kind_parse("unroll");
		c->layers = 0;
		return "layers";
	case 2:
		c->method = checkpoint_kind();
		c->layers = 4;
		checkpoint_config(c)->k = 5;
		return "k";
	case 3:
		c->method = checkpoint_kind();
		checkpoint_config(c)->k = -1;
		return "k";
	case 4:
		deq_config(c)->f_solver = (enum solver_kind)9;
		return "f_solver";
	case 5:
		deq_config(c)->b_solver = (enum solver_kind) - 1;
		return "b_solver";
	case 6:
		deq_config(c)->f_tol = 0;
		return "f_tol";
	case 7:
		deq_config(c)->b_tol = -1e-3;
		return "b_tol";
	case 8:
		deq_config(c)->f_max_iter = 0;
		return "f_max_iter";
	case 9:
		deq_config(c)->b_max_iter = -2;
		return "b_max_iter";
	case 10:
		deq_config(c)->f_history = -1;
		return "f_history";
	case 11:
		deq_config(c)->b_history = -1;
		return "b_history";
	case 12:
		deq_config(c)->anderson_m = 0;
		return "anderson_m";
	case 13:
		deq_config(c)->anderson_beta = 0;
		return "anderson_beta";
	case 14:
		deq_config(c)->f_stop_mode = (enum stop_mode)3;
		return "f_stop_mode";
	case 15:
		deq_config(c)->f_tol = NAN;
		return "f_tol";
	}
	return NULL;
}

Test(config, bad_values_name_the_key)
{
	for (int i = 0;; i++) {
		struct method_config c;
		char err[256] = "";
		method_config_defaults(&c);
		const char *key = break_key(i, &c);
		if (!key)
			break;
		cr_assert_eq(method_config_validate(&c, err, sizeof(err)), -1,
			     "case %d (%s) accepted", i, key);
		size_t kl = strlen(key);
		cr_assert(strncmp(err, key, kl) == 0 && err[kl] == '=',
			  "case %d: message '%s' does not start with %s=", i,
			  err, key);
	}
	struct method_config c;
	method_config_defaults(&c);
	char err[256];
	cr_assert_eq(method_config_validate(&c, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(method_kind_parse("deq"), deq_kind());
	cr_assert_eq(method_kind_parse("Deq"), -1);
	cr_assert_eq(solver_kind_parse("anderson"), SOLVER_ANDERSON);
	cr_assert_eq(solver_kind_parse("newton"), -1);
	cr_assert_str_eq(solver_kind_name(SOLVER_FIXED_POINT), "fixed_point");
	cr_assert_str_eq(b_mode_name(BMODE_JFB), "jfb");
}
