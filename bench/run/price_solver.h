/* price_solver.h — the solver_update work unit of `deqbench price`: one
 * Broyden iteration's (or Anderson mixing's, price_solver_anderson) work
 * besides its evaluation of F, at h pairs of
 * history in use, issued as the backend ops methods/solvers.c's
 * solve_broyden issues them (solvers.c is private to methods/, so the
 * sequence is restated here; keep the two in step):
 *   Δx = −B g       copy, then per segment a batched (1 x h x len) GEMM for
 *                   V g and one for Uᵀ (V g)          (broyden_step)
 *   x += Δx         axpy
 *   measure         residual_dots (‖F‖², ‖g‖² per segment), solve_check
 *                   (the device's stop test), copy_masked of the improved
 *                   samples into the best iterate   (run_measure)
 *   Δg = g' − g     sub
 *   update          v = −Δx + Vᵀ (U Δx), u = (Δx + Δg − Uᵀ (V Δg)) / vᵀΔg:
 *                   sub, axpy, four batched GEMMs, dot_segments, scale_recip
 *                   (broyden_update while the history has room: a full one
 *                   adds two fills and a copy of n elements)
 * S samples of P segments (solver_batching: per_sample S = B, P = the
 * model's state_parts; global S = P = 1). Its cost is a + b h: the GEMMs
 * are linear in h, the rest is not. The host read of the stop decision
 * (every sync_every evaluations) is not in it.
 *
 * With solver_kernels=fused (price_solver_alloc's fused) the Broyden unit
 * is instead the fused iteration's two passes, fused_measure and
 * fused_apply (kernels/solve_fused.h), with h pairs in use (the ring of
 * hmax full at h = hmax, whose step then reads h − 1 of them and the new
 * pair, as the ops unit wraps to slot 0 there); Anderson's unit is
 * fused_anderson_measure and fused_anderson_apply, mixing h iterates.
 */
#ifndef DQ_BENCH_PRICE_SOLVER_H
#define DQ_BENCH_PRICE_SOLVER_H

#include <stddef.h>

#include "../../kernels/backend.h"
#include "../../kernels/solve_ctl.h"

struct price_solver {
	struct backend *be;
	size_t n, len;	/* state elements; elements of one segment */
	int S, P, hmax; /* hmax: rows of U and V */
	int m;		/* Anderson's ring (the control block's Gram size) */
	void *x, *g, *fx, *dx, *dg, *best; /* n each */
	void *x0, *g0;	    /* the values each call starts from */
	void *U, *V, *coef; /* (hmax, n) twice; (S, hmax) */
	void *ctl_mem;	    /* the control block's doubles */
	double *head;	    /* host: its head, uploaded per call */
	struct dq_solve_ctl ctl;
	int fused;		  /* Broyden as the fused iteration */
	struct dq_solve_ctl fctl; /* its control block (hb hmax, ma m) */
	void *fctl_mem;
	double *fhead; /* host: its image, zeros but for what reset sets */
};

/* Buffers for Broyden histories up to hmax and Anderson rings of m (>= 1)
 * on n = S P len elements; fused: the Broyden unit is the fused iteration
 * (hmax and m <= DQ_FUSED_MAX_H). 0, or -1 when out of memory (free with
 * price_solver_free all the same). */
int price_solver_alloc(struct price_solver *ps, struct backend *be, size_t n,
		       int S, int P, int hmax, int m, int fused);
void price_solver_free(struct price_solver *ps);

/* Puts the iterate, g and the control block back to their start (untimed:
 * so that thousands of calls never run into non-finite values); for a
 * fused unit at h, its ring's counters: h Broyden pairs in use, or
 * (anderson) h − 1 Anderson iterates, so that the mix runs over h. */
void price_solver_reset(struct price_solver *ps, int h, int anderson);

/* One Broyden iteration's work besides F at h (1 <= h <= hmax) pairs in
 * use. */
void price_solver_update(struct price_solver *ps, int h);

/* One Anderson mixing's work besides F at h (1 <= h <= m) iterates in use,
 * as solvers.c's solve_anderson issues it: the iterate into its ring slot,
 * the measure (residual_dots into the slot's G, solve_check, copy_masked
 * of the best), the new Gram row (a batched GEMM per segment), the
 * bordered solve for the weights (anderson_weights, regularised by
 * lambda) and the mix xn = αᵀX + beta αᵀG (two batched GEMMs per segment).
 * Its cost is a + b h as Broyden's. */
void price_solver_anderson(struct price_solver *ps, int h, double lambda,
			   double beta);

#endif
