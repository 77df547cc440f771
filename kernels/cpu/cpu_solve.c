/* cpu_solve.c — the CPU backend's solver-control ops (solve_check,
 * copy_masked, scale_recip, anderson_weights, fused_measure, fused_apply;
 * kernels/backend.h has the contracts, kernels/solve_ctl.h and
 * kernels/solve_fused.h the decisions), compiled with
 * cpu_backend.c in both instantiations (float: DQ_SFX f, double: d).
 * Device memory is host memory here, so the control block's decisions are
 * solve_ctl.h's functions called directly; dot_segments stays in
 * cpu_backend.c beside the reduction it reuses.
 */
#ifndef DQ_REAL
#error "compile with -DDQ_REAL=float|double -DDQ_SFX=f|d"
#endif

#include <math.h>
#include <string.h>

#include "../backend.h"
#include "../elementwise.h"
#include "../solve_ctl.h"
#include "../solve_fused.h"
#include "cpu_ctx.h"

typedef DQ_REAL real;

void DQ_FN(dq_cpu_solve_check_)(void *ctx, const struct dq_solve_ctl *c)
{
	(void)ctx;
	dq_ctl_check(c);
}

void DQ_FN(dq_cpu_copy_masked_)(void *ctx, void *dst_, const void *src_,
				const double *flag, int S, int P, size_t len)
{
	(void)ctx;
	real *dst = dst_;
	const real *src = src_;
	for (int k = 0; k < S; k++)
		for (int p = 0; flag[k] != 0 && p < P; p++) {
			size_t o = ((size_t)p * (size_t)S + (size_t)k) * len;
			if (src)
				memmove(dst + o, src + o, len * sizeof(real));
			else
				memset(dst + o, 0, len * sizeof(real));
		}
}

void DQ_FN(dq_cpu_scale_recip_)(void *ctx, void *dst_, const void *src_,
				const double *seg, int S, int P, size_t len)
{
	(void)ctx;
	real *dst = dst_;
	const real *src = src_;
	for (int k = 0; k < S; k++) {
		double d = seg[k];
		for (int p = 1; p < P; p++)
			d += seg[(size_t)p * (size_t)S + (size_t)k];
		int ok = d != 0 && isfinite(d) && isfinite(1.0 / d);
		real r = ok ? (real)(1.0 / d) : 0;
		for (int p = 0; p < P; p++) {
			size_t o = ((size_t)p * (size_t)S + (size_t)k) * len;
			for (size_t i = 0; i < len; i++)
				dst[o + i] = r * src[o + i];
		}
	}
}

void DQ_FN(dq_cpu_anderson_weights_)(void *ctx, const struct dq_solve_ctl *c,
				     const void *row_, void *alpha_, int slot,
				     int nact, double lambda)
{
	(void)ctx;
	const real *row = row_;
	real *alpha = alpha_;
	for (int k = 0; k < c->S; k++) {
		for (int j = 0; j < nact; j++)
			dq_ctl_gram_put(c, k, slot, j,
					row[(size_t)k * (size_t)nact + j]);
		const double *a = dq_ctl_anderson(c, k, nact, lambda);
		for (int j = 0; j < nact; j++)
			alpha[(size_t)k * (size_t)nact + j] = (real)a[j];
	}
}

/* Σ x_i y_i over m elements in double, in LANES interleaved partial sums
 * added in order at the end: a fixed order (the same bits for any thread
 * count) that the compiler vectorizes. */
#define LANES 8
static double lane_dot(const real *x, const real *y, size_t m)
{
	double acc[LANES] = {0}, s = 0;
	size_t i = 0;
	for (; i + LANES <= m; i += LANES)
		for (int l = 0; l < LANES; l++)
			acc[l] += (double)x[i + l] * y[i + l];
	for (int l = 0; l < LANES; l++)
		s += acc[l];
	for (; i < m; i++)
		s += (double)x[i] * y[i];
	return s;
}

/* One chunk's partials (solve_fused.h): g_new and Δg written over g and
 * dg, then the act pairs' dots, each a sum in double in element order. */
static void fused_chunk(const struct dq_solve_ctl *c, double *pt,
			const real *fx, const real *x, real *g, const real *dx,
			real *dg, const real *U, const real *V, size_t n,
			size_t i0, size_t i1)
{
	const double *fh = c->st + c->o_fused;
	const int hb = c->hb;
	for (int q = 0; q < dq_fu_nq(c); q++)
		pt[q] = 0;
	const size_t m = i1 - i0;
	for (size_t i = i0; i < i1; i++) {
		real gn = fx[i] - x[i];
		dg[i] = gn - g[i];
		g[i] = gn;
	}
	pt[DQ_FQ_GG] = lane_dot(g + i0, g + i0, m);
	pt[DQ_FQ_FF] = lane_dot(fx + i0, fx + i0, m);
	pt[DQ_FQ_DD] = lane_dot(dx + i0, dg + i0, m);
	pt[DQ_FQ_DGN] = lane_dot(dx + i0, g + i0, m);
	for (int j = 0; j < hb; j++) {
		if (!dq_fu_act_now(fh, hb, j))
			continue;
		const real *Uj = U + (size_t)j * n + i0;
		const real *Vj = V + (size_t)j * n + i0;
		pt[DQ_FQ_A + j] = lane_dot(Uj, dx + i0, m);
		pt[DQ_FQ_A + hb + j] = lane_dot(Vj, dg + i0, m);
		pt[DQ_FQ_A + 2 * hb + j] = lane_dot(Vj, g + i0, m);
	}
}

/* One chunk of the fused Anderson measure (solve_fused.h): X_slot and
 * G_slot written, the partials ‖G_slot‖², ‖fx‖², G_slot·G_j. */
static void anderson_chunk(const struct dq_solve_ctl *c, double *pt,
			   const real *fx, const real *xn, real *X, real *G,
			   size_t n, size_t i0, size_t i1)
{
	const double *fh = c->st + c->o_fused;
	real *Xs = X + (size_t)fh[DQ_FU_SLOT] * n;
	real *Gs = G + (size_t)fh[DQ_FU_SLOT] * n;
	for (int q = 0; q < dq_fu_nq(c); q++)
		pt[q] = 0;
	const size_t m = i1 - i0;
	for (size_t i = i0; i < i1; i++) {
		Xs[i] = xn[i];
		Gs[i] = fx[i] - xn[i];
	}
	pt[DQ_FQ_GG] = lane_dot(Gs + i0, Gs + i0, m);
	pt[DQ_FQ_FF] = lane_dot(fx + i0, fx + i0, m);
	for (int j = 0; j < c->ma; j++) {
		if (!dq_fa_act_now(fh, j))
			continue;
		pt[DQ_FA_ROW + j] =
		    lane_dot(Gs + i0, G + (size_t)j * n + i0, m);
	}
}

/* The vectors of a fused measure: Broyden's fx, x, g, dx, dg, U, V;
 * Anderson's fx, x (xn), U (X), V (G). */
struct fu_vecs {
	const real *fx, *x, *dx;
	real *g, *dg, *U, *V;
};

/* Every chunk's partials (in parallel: chunks are independent), then
 * each sample's sums in solve_fused.h's order. */
static void chunk_pass(const struct dq_solve_ctl *c, size_t len, int anderson,
		       const struct fu_vecs *v)
{
	const long nseg = (long)c->S * c->P, nb = nseg * c->nchunk;
	const size_t n = (size_t)nseg * len;
#pragma omp parallel for if ((long long)n * dq_fu_nq(c) >= PAR_MIN_N)
	for (long b = 0; b < nb; b++) {
		long seg = b / c->nchunk, ch = b % c->nchunk;
		size_t i0 = (size_t)seg * len + (size_t)ch * DQ_FUSED_CHUNK;
		size_t i1 = (size_t)(seg + 1) * len;
		double *pt = dq_fu_part(c, seg, ch);
		i1 = i0 + DQ_FUSED_CHUNK < i1 ? i0 + DQ_FUSED_CHUNK : i1;
		if (anderson)
			anderson_chunk(c, pt, v->fx, v->x, v->U, v->V, n, i0,
				       i1);
		else
			fused_chunk(c, pt, v->fx, v->x, v->g, v->dx, v->dg,
				    v->U, v->V, n, i0, i1);
	}
	for (int k = 0; k < c->S; k++)
		for (int q = 0; q < dq_fu_nq(c); q++)
			dq_fu_sum(c, k, q);
}

void DQ_FN(dq_cpu_fused_measure_)(void *ctx, const struct dq_solve_ctl *c,
				  const void *fx, const void *x, void *g,
				  const void *dx, void *dg, const void *U,
				  const void *V, size_t len)
{
	(void)ctx;
	const struct fu_vecs v = {fx, x, dx, g, dg, (real *)U, (real *)V};
	chunk_pass(c, len, 0, &v);
	dq_fu_decide(c);
}

/* Elements of one apply tile: the act pairs' sums are taken row by row
 * over a tile (contiguous reads), each element's in ascending j. */
#define FU_TILE 256

/* Elements [i0, i1) of sample k (solve_fused.h's apply), i1 − i0 <=
 * FU_TILE. */
static void fused_tile(const struct dq_solve_ctl *c, int k, real *x, real *dx,
		       const real *g, const real *dg, real *U, real *V,
		       size_t n, size_t i0, size_t i1)
{
	const double *fh = c->st + c->o_fused, *q = dq_fu_q(c, k);
	const double *rc = dq_fu_rc(c, k);
	const int hb = c->hb, pair = fh[DQ_FU_PAIR] != 0;
	const int frozen = c->per_sample && c->st[c->o_done + k] != 0;
	real *Us = U + (size_t)fh[DQ_FU_SLOT] * n;
	real *Vs = V + (size_t)fh[DQ_FU_SLOT] * n;
	double sa[FU_TILE] = {0}, sb[FU_TILE] = {0}, sc[FU_TILE] = {0};
	const size_t m = i1 - i0;
	for (int j = 0; j < hb; j++) {
		if (!dq_fu_act(fh, j))
			continue;
		const real *Uj = U + (size_t)j * n + i0;
		const real *Vj = V + (size_t)j * n + i0;
		const double a = q[DQ_FQ_A + j], b = q[DQ_FQ_A + hb + j];
		const double cc = q[DQ_FQ_A + 2 * hb + j];
		for (size_t t = 0; t < m; t++) {
			sa[t] += a * Vj[t];
			sb[t] += b * Uj[t];
			sc[t] += cc * Uj[t];
		}
	}
	for (size_t t = 0; t < m; t++) {
		size_t i = i0 + t;
		double step = (double)g[i] - sc[t];
		if (pair) {
			double u = rc[0] * ((double)dx[i] + dg[i] - sb[t]);
			Vs[i] = (real)(-(double)dx[i] + sa[t]);
			Us[i] = (real)u;
			step -= rc[1] * u;
		}
		dx[i] = frozen ? 0 : (real)step;
		x[i] += dx[i];
	}
}

/* Elements [i0, i1) of sample k, tile by tile. */
static void fused_elems(const struct dq_solve_ctl *c, int k, real *x, real *dx,
			const real *g, const real *dg, real *U, real *V,
			size_t n, size_t i0, size_t i1)
{
	for (size_t t = i0; t < i1; t += FU_TILE)
		fused_tile(c, k, x, dx, g, dg, U, V, n, t,
			   t + FU_TILE < i1 ? t + FU_TILE : i1);
}

void DQ_FN(dq_cpu_fused_apply_)(void *ctx, const struct dq_solve_ctl *c,
				void *x_, void *dx_, const void *g_,
				const void *dg_, void *U_, void *V_, void *best,
				size_t len)
{
	real *x = x_, *dx = dx_, *U = U_, *V = V_;
	const real *g = g_, *dg = dg_;
	const int S = c->S;
	const size_t n = (size_t)S * (size_t)c->P * len;
	DQ_FN(dq_cpu_copy_masked_)
	(ctx, best, x, c->st + c->o_imp, S, c->P, len);
	if (c->st[DQ_CTL_GO] == 0)
		return;
	const long nseg = (long)S * c->P;
#pragma omp parallel for if ((long long)n * (1 + c->hb) >= PAR_MIN_N)
	for (long e = 0; e < nseg; e++)
		fused_elems(c, (int)(e % S), x, dx, g, dg, U, V, n,
			    (size_t)e * len, (size_t)(e + 1) * len);
}

void DQ_FN(dq_cpu_fused_anderson_measure_)(void *ctx,
					   const struct dq_solve_ctl *c,
					   const void *fx, const void *xn,
					   void *X, void *G, size_t len)
{
	(void)ctx;
	const struct fu_vecs v = {fx, xn, NULL, NULL, NULL, X, G};
	chunk_pass(c, len, 1, &v);
	dq_fa_decide(c);
}

/* xn over [i0, i1) (<= FU_TILE): Σ_j α_j (X_j + β G_j), row by row. */
static void anderson_tile(const struct dq_solve_ctl *c, const double *a,
			  int nact, real *xn, const real *X, const real *G,
			  size_t n, size_t i0, size_t i1)
{
	double v[FU_TILE] = {0};
	const size_t m = i1 - i0;
	for (int j = 0; j < nact; j++) {
		const real *Xj = X + (size_t)j * n + i0;
		const real *Gj = G + (size_t)j * n + i0;
		for (size_t t = 0; t < m; t++)
			v[t] += a[j] * ((double)Xj[t] + c->beta * Gj[t]);
	}
	for (size_t t = 0; t < m; t++)
		xn[i0 + t] = (real)v[t];
}

void DQ_FN(dq_cpu_fused_anderson_apply_)(void *ctx,
					 const struct dq_solve_ctl *c,
					 void *xn_, const void *X_,
					 const void *G_, void *best, size_t len)
{
	real *xn = xn_;
	const real *X = X_, *G = G_;
	const int S = c->S, nact = (int)c->st[c->o_fused + DQ_FU_NU];
	const size_t n = (size_t)S * (size_t)c->P * len;
	DQ_FN(dq_cpu_copy_masked_)
	(ctx, best, xn, c->st + c->o_imp, S, c->P, len);
	if (c->st[DQ_CTL_GO] == 0)
		return;
	const long nseg = (long)S * c->P;
#pragma omp parallel for if ((long long)n * (1 + nact) >= PAR_MIN_N)
	for (long e = 0; e < nseg; e++) {
		int k = (int)(e % S);
		if (c->per_sample && c->st[c->o_done + k] != 0)
			continue; /* frozen: xn stays X_slot */
		const double *a = dq_fu_q(c, k) + DQ_FA_ROW;
		for (size_t i0 = (size_t)e * len; i0 < (size_t)(e + 1) * len;
		     i0 += FU_TILE)
			anderson_tile(c, a, nact, xn, X, G, n, i0,
				      i0 + FU_TILE < (size_t)(e + 1) * len
					  ? i0 + FU_TILE
					  : (size_t)(e + 1) * len);
	}
}
