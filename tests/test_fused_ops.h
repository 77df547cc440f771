/* test_fused_ops.h — the fused Broyden iteration's two ops (fused_measure,
 * fused_apply; kernels/solve_fused.h) of a backend against the formulas
 * written out in double loops, for test_vec_ops.c (cpu, cpu64) and
 * test_cuda_vec_ops.c. One state: S = 3 samples of P = 2 segments of
 * len = 5000 elements (two chunks each), a full ring of hb = 4 pairs whose
 * oldest (slot 1) is dropped, two evaluations done (so a pair forms),
 * scope sample with sample 2 frozen and sample 0 improving (Anderson's
 * ops: check_fused_anderson_ops, below):
 *   measure: g_new = fx − x and Δg = g_new − g in the type (exact: one
 *     rounding each, as written); each sample's ‖g_new‖², ‖fx‖², Δx·Δg,
 *     Δx·g_new and a_j, b_j, c_j over the act pairs within 1e-12 of the
 *     sum of |terms| (the products of floats are exact in double, only the
 *     order of the sums differs); the ring moved on (slot 1, pair on);
 *   apply: best = x for the improved sample only; the pair and the step
 *     of the formulas within 8 roundings of the type over the terms'
 *     magnitude; the frozen sample's Δx 0 and x unchanged. */
#ifndef DQ_TEST_FUSED_OPS_H
#define DQ_TEST_FUSED_OPS_H

#include "../kernels/solve_fused.h"
#include "test_ops_util.h"

enum { FO_S = 3, FO_P = 2, FO_H = 4, FO_LEN = 5000 };

/* The reference's per-sample sums: [k][q] and the sums of |terms|. */
struct fo_ref {
	double q[FO_S][4 + 3 * FO_H], mag[FO_S][4 + 3 * FO_H];
};

static inline int fo_act(int j)
{
	return j != 1; /* a full ring drops its oldest, slot 1 */
}

static inline void fo_add(struct fo_ref *r, int k, int q, double v)
{
	r->q[k][q] += v;
	r->mag[k][q] += fabs(v);
}

/* The measure's dots from the host copies (gn, dg as the op must form
 * them). */
static inline void fo_dots(struct fo_ref *r, const double *fx, const double *gn,
			   const double *dg, const double *dx, const double *U,
			   const double *V)
{
	const size_t n = (size_t)FO_S * FO_P * FO_LEN;
	memset(r, 0, sizeof(*r));
	for (size_t i = 0; i < n; i++) {
		int k = (int)((i / FO_LEN) % FO_S);
		fo_add(r, k, DQ_FQ_GG, gn[i] * gn[i]);
		fo_add(r, k, DQ_FQ_FF, fx[i] * fx[i]);
		fo_add(r, k, DQ_FQ_DD, dx[i] * dg[i]);
		fo_add(r, k, DQ_FQ_DGN, dx[i] * gn[i]);
		for (int j = 0; j < FO_H; j++) {
			if (!fo_act(j))
				continue;
			fo_add(r, k, DQ_FQ_A + j, U[j * n + i] * dx[i]);
			fo_add(r, k, DQ_FQ_A + FO_H + j, V[j * n + i] * dg[i]);
			fo_add(r, k, DQ_FQ_A + 2 * FO_H + j,
			       V[j * n + i] * gn[i]);
		}
	}
}

/* The control block before the measure (host copy h of cd's layout). */
static inline struct dq_solve_ctl fo_ctl(double **h)
{
	struct dq_solve_ctl c = {.S = FO_S,
				 .P = FO_P,
				 .max_iter = 100,
				 .ring = 1,
				 .trace_cap = 8,
				 .hb = FO_H,
				 .nchunk = dq_fu_chunks(FO_LEN),
				 .per_sample = 1,
				 .tol = 1e-300};
	dq_ctl_layout(&c);
	*h = zeros((size_t)c.total);
	double *st = *h, *fh = st + c.o_fused;
	st[DQ_CTL_GO] = 1;
	st[DQ_CTL_ITERS] = 2;
	st[DQ_CTL_HAVE_BEST] = 1;
	for (int k = 0; k < FO_S; k++)
		st[c.o_best_r + k] = k == 0 ? INFINITY : 1e-200;
	st[c.o_done + 2] = 1; /* frozen */
	st[DQ_CTL_NDONE] = 1;
	fh[DQ_FU_NU] = FO_H;
	fh[DQ_FU_OLD] = 1;
	return c;
}

static inline void check_fused_measure(struct backend *be,
				       const struct dq_solve_ctl *cd,
				       const struct fo_ref *r)
{
	double *got = zeros((size_t)cd->total);
	be_download_bytes(be, got, cd->st, (size_t)cd->total * sizeof(double));
	struct dq_solve_ctl c = *cd;
	c.st = got;
	for (int k = 0; k < FO_S; k++)
		for (int q = 0; q < 4 + 3 * FO_H; q++) {
			if (q >= DQ_FQ_A && !fo_act((q - DQ_FQ_A) % FO_H))
				continue;
			double v = dq_fu_q(&c, k)[q];
			cr_assert(fabs(v - r->q[k][q]) <= 1e-12 * r->mag[k][q],
				  "measure: sample %d quantity %d: %.17g vs "
				  "%.17g",
				  k, q, v, r->q[k][q]);
		}
	const double *fh = got + c.o_fused;
	cr_assert(got[DQ_CTL_GO] == 1 && got[DQ_CTL_ITERS] == 3);
	cr_assert(fh[DQ_FU_PAIR] == 1 && fh[DQ_FU_SLOT] == 1);
	cr_assert(fh[DQ_FU_NU] == FO_H && fh[DQ_FU_OLD] == 2);
	cr_assert(fh[DQ_FU_ACTN] == FO_H && fh[DQ_FU_DROP] == 1);
	cr_assert(got[c.o_imp] == 1 && got[c.o_imp + 1] == 0 &&
		  got[c.o_imp + 2] == 0);
	free(got);
}

/* The apply's reference for element i of sample k into w (x, dx, u, v);
 * returns a bound of its terms' magnitudes (u's over |vᵀΔg|). */
static inline double fo_apply_ref(const struct fo_ref *r, int k, size_t i,
				  const double *x, const double *dx,
				  const double *gn, const double *dg,
				  const double *U, const double *V, double *w)
{
	const size_t n = (size_t)FO_S * FO_P * FO_LEN;
	const double *q = r->q[k] + DQ_FQ_A;
	double den = -r->q[k][DQ_FQ_DD], vg = -r->q[k][DQ_FQ_DGN];
	double sa = 0, sb = 0, sc = 0, mu = fabs(dx[i]) + fabs(dg[i]);
	double mv = fabs(dx[i]), ms = fabs(gn[i]);
	for (int j = 0; j < FO_H; j++) {
		if (!fo_act(j))
			continue;
		den += q[j] * q[FO_H + j];
		vg += q[j] * q[2 * FO_H + j];
		sa += q[j] * V[j * n + i];
		sb += q[FO_H + j] * U[j * n + i];
		sc += q[2 * FO_H + j] * U[j * n + i];
		mv += fabs(q[j] * V[j * n + i]);
		mu += fabs(q[FO_H + j] * U[j * n + i]);
		ms += fabs(q[2 * FO_H + j] * U[j * n + i]);
	}
	w[2] = (dx[i] + dg[i] - sb) / den;
	w[3] = -dx[i] + sa;
	w[1] = k == 2 ? 0 : gn[i] - sc - vg * w[2];
	w[0] = x[i] + w[1];
	return mu / fabs(den) * (1 + fabs(vg)) + mv + ms + fabs(x[i]);
}

/* Downloads n elements of p into a fresh host array. */
static inline double *fo_down(struct pool *pl, const void *p, size_t n)
{
	double *h = zeros(n);
	pool_down(pl, h, p, n);
	return h;
}

static inline void check_fused_ops(struct backend *be)
{
	const size_t n = (size_t)FO_S * FO_P * FO_LEN, hn = FO_H * n;
	const double eps = be->elem == sizeof(float) ? 0x1p-24 : 0x1p-53;
	struct pool pl = {be, {0}, 0};
	double *x = rnd(n, 1), *fx = rnd(n, 1), *g = rnd(n, 1);
	double *dx = rnd(n, 0.3), *U = rnd(hn, 0.5), *V = rnd(hn, 0.5);
	void *dX = pool_up(&pl, x, n), *dF = pool_up(&pl, fx, n);
	void *dG = pool_up(&pl, g, n), *dD = pool_up(&pl, dx, n);
	void *dU = pool_up(&pl, U, hn), *dV = pool_up(&pl, V, hn);
	void *dDG = pool_new(&pl, n, 0), *dB = pool_new(&pl, n, 0);
	/* the values in the type, as the ops see them */
	pool_down(&pl, x, dX, n), pool_down(&pl, fx, dF, n);
	pool_down(&pl, g, dG, n), pool_down(&pl, dx, dD, n);
	pool_down(&pl, U, dU, hn), pool_down(&pl, V, dV, hn);
	double *h, *gn = zeros(n), *dg = zeros(n);
	struct dq_solve_ctl cd = fo_ctl(&h);
	cd.st = ctl_block(be, h, (size_t)cd.total);
	be_fused_measure(be, &cd, dF, dX, dG, dD, dDG, dU, dV, FO_LEN);
	double *ggot = fo_down(&pl, dG, n), *dggot = fo_down(&pl, dDG, n);
	for (size_t i = 0; i < n; i++) {
		gn[i] = fx[i] - x[i];
		dg[i] = gn[i] - g[i];
		if (be->elem == sizeof(float)) {
			gn[i] = (float)gn[i];
			dg[i] = (float)(gn[i] - g[i]);
		}
		cr_assert(ggot[i] == gn[i] && dggot[i] == dg[i],
			  "measure: g, dg [%zu]", i);
	}
	struct fo_ref r;
	fo_dots(&r, fx, gn, dg, dx, U, V);
	check_fused_measure(be, &cd, &r);
	be_fused_apply(be, &cd, dX, dD, dG, dDG, dU, dV, dB, FO_LEN);
	double *xo = fo_down(&pl, dX, n), *dxo = fo_down(&pl, dD, n);
	double *Uo = fo_down(&pl, dU, hn), *Vo = fo_down(&pl, dV, hn);
	double *bo = fo_down(&pl, dB, n);
	for (size_t i = 0; i < n; i++) {
		int k = (int)((i / FO_LEN) % FO_S);
		double w[4], got[4] = {xo[i], dxo[i], Uo[n + i], Vo[n + i]};
		double M = fo_apply_ref(&r, k, i, x, dx, gn, dg, U, V, w);
		double tol = (8 * eps + 1e-11) * M;
		cr_assert(bo[i] == (k == 0 ? x[i] : 0), "best [%zu]", i);
		for (int t = 0; t < 4; t++)
			cr_assert(fabs(got[t] - w[t]) <=
				      tol + 4 * eps * fabs(w[t]),
				  "apply [%zu] sample %d value %d: %.17g vs "
				  "%.17g",
				  i, k, t, got[t], w[t]);
	}
	backend_free(be, cd.st);
	pool_free(&pl);
	free(x), free(fx), free(g), free(dx), free(U), free(V), free(h);
	free(gn), free(dg), free(ggot), free(dggot), free(xo), free(dxo);
	free(Uo), free(Vo), free(bo);
}

/* Anderson's two ops (solve_fused.h) on S = 3 samples of P = 2 segments
 * of 5000 elements, a ring of ma = 3 iterates with nu in use (3: full,
 * slot 1 overwritten; 1: not full), slot 1 written, one evaluation done,
 * sample 0 improving, sample 2 frozen; nact = min(nu + 1, 3):
 *   measure: X_1 = xn and G_1 = fx − xn (one rounding); the Gram row
 *     G_1·G_j (j < nact) in each sample's Gram matrix, symmetric, within
 *     1e-12 of the sum of |terms|; the ring moved on (slot 2, nact in
 *     use); each sample's weights those of dq_ctl_anderson on that Gram
 *     matrix (1e-9) and summing to 1;
 *   apply: best = xn for sample 0 only; xn = Σ α_j (X_j + β G_j) within
 *     8 roundings; the frozen sample's xn unchanged. */
struct fa_case {
	size_t n;
	double *xn, *fx, *X, *G, *Xo, *Go, *got;
	int nact;
};

/* The measure's checks of case a on the downloaded block a->got. */
static inline void fa_check_measure(const struct dq_solve_ctl *cd,
				    const struct fa_case *a, double lambda)
{
	const size_t n = a->n;
	double row[FO_S][3] = {{0}}, mag[FO_S][3] = {{0}};
	for (size_t i = 0; i < n; i++) {
		int k = (int)((i / FO_LEN) % FO_S);
		double g1 = a->Go[n + i];
		cr_assert(a->Xo[n + i] == a->xn[i], "measure: X_1 [%zu]", i);
		cr_assert(g1 == a->fx[i] - a->xn[i] ||
			      g1 == (float)(a->fx[i] - a->xn[i]),
			  "measure: G_1 [%zu]", i);
		for (int j = 0; j < a->nact; j++) {
			double t = g1 * (j == 1 ? g1 : a->G[j * n + i]);
			row[k][j] += t, mag[k][j] += fabs(t);
		}
	}
	const double *fh = a->got + cd->o_fused;
	cr_assert(fh[DQ_FU_SLOT] == 2 && fh[DQ_FU_MSLOT] == 1 &&
		  fh[DQ_FU_NU] == a->nact && a->got[DQ_CTL_GO] == 1);
	double *cp = zeros((size_t)cd->total);
	memcpy(cp, a->got, (size_t)cd->total * sizeof(double));
	struct dq_solve_ctl hc = *cd;
	hc.st = cp;
	for (int k = 0; k < FO_S; k++) {
		const double *H = a->got + cd->o_gram + (long)k * 9;
		const double *al = dq_fu_q(&hc, k) + DQ_FA_ROW;
		const double *ra = dq_ctl_anderson(&hc, k, a->nact, lambda);
		double sum = 0;
		for (int j = 0; j < a->nact; j++) {
			cr_assert(fabs(H[3 + j] - row[k][j]) <=
					  1e-12 * mag[k][j] &&
				      H[3 + j] == H[j * 3 + 1],
				  "Gram row sample %d entry %d: %.17g vs %.17g",
				  k, j, H[3 + j], row[k][j]);
			cr_assert(fabs(al[j] - ra[j]) <=
				      1e-9 * (1 + fabs(ra[j])),
				  "sample %d weight %d: %.17g vs %.17g", k, j,
				  al[j], ra[j]);
			sum += al[j];
		}
		cr_assert(fabs(sum - 1) <= 1e-9,
			  "sample %d: weights sum to %.17g", k, sum);
	}
	free(cp);
}

static inline void check_fused_anderson_at(struct backend *be, int nu)
{
	const size_t n = (size_t)FO_S * FO_P * FO_LEN, hn = 3 * n;
	const double eps = be->elem == sizeof(float) ? 0x1p-24 : 0x1p-53;
	const double beta = 0.7, lambda = 1e-4;
	struct pool pl = {be, {0}, 0};
	struct fa_case a = {.n = n,
			    .xn = rnd(n, 1),
			    .fx = rnd(n, 1),
			    .X = rnd(hn, 1),
			    .G = rnd(hn, 1)};
	double *h;
	void *dXN = pool_up(&pl, a.xn, n), *dF = pool_up(&pl, a.fx, n);
	void *dX = pool_up(&pl, a.X, hn), *dG = pool_up(&pl, a.G, hn);
	void *dB = pool_new(&pl, n, 0);
	pool_down(&pl, a.xn, dXN, n), pool_down(&pl, a.fx, dF, n);
	pool_down(&pl, a.X, dX, hn), pool_down(&pl, a.G, dG, hn);
	struct dq_solve_ctl cd = fo_ctl(&h);
	free(h);
	cd.hb = 0, cd.ma = cd.m = 3, cd.beta = beta, cd.lambda = lambda;
	dq_ctl_layout(&cd);
	h = zeros((size_t)cd.total);
	h[DQ_CTL_GO] = 1, h[DQ_CTL_ITERS] = 1, h[DQ_CTL_HAVE_BEST] = 1;
	for (int k = 0; k < FO_S; k++)
		h[cd.o_best_r + k] = k == 0 ? INFINITY : 1e-200;
	h[cd.o_done + 2] = 1, h[DQ_CTL_NDONE] = 1;
	h[cd.o_fused + DQ_FU_NU] = nu, h[cd.o_fused + DQ_FU_SLOT] = 1;
	a.nact = nu + 1 < 3 ? nu + 1 : 3;
	cd.st = ctl_block(be, h, (size_t)cd.total);
	be_fused_anderson_measure(be, &cd, dF, dXN, dX, dG, FO_LEN);
	a.Xo = fo_down(&pl, dX, hn), a.Go = fo_down(&pl, dG, hn);
	a.got = zeros((size_t)cd.total);
	be_download_bytes(be, a.got, cd.st, (size_t)cd.total * sizeof(double));
	fa_check_measure(&cd, &a, lambda);
	be_fused_anderson_apply(be, &cd, dXN, dX, dG, dB, FO_LEN);
	double *xo = fo_down(&pl, dXN, n), *bo = fo_down(&pl, dB, n);
	struct dq_solve_ctl hc = cd;
	hc.st = a.got;
	for (size_t i = 0; i < n; i++) {
		int k = (int)((i / FO_LEN) % FO_S);
		const double *al = dq_fu_q(&hc, k) + DQ_FA_ROW;
		double w = 0, m = 0;
		for (int j = 0; j < a.nact; j++) {
			double x = a.Xo[j * n + i], g = a.Go[j * n + i];
			w += al[j] * (x + beta * g);
			m += fabs(al[j]) * (fabs(x) + beta * fabs(g));
		}
		if (k == 2)
			w = a.xn[i];
		cr_assert(bo[i] == (k == 0 ? a.xn[i] : 0), "best [%zu]", i);
		cr_assert(fabs(xo[i] - w) <= 8 * eps * m + 4 * eps * fabs(w),
			  "apply [%zu] sample %d: %.17g vs %.17g", i, k, xo[i],
			  w);
	}
	backend_free(be, cd.st);
	pool_free(&pl);
	free(a.xn), free(a.fx), free(a.X), free(a.G), free(h), free(a.Xo);
	free(a.Go), free(a.got), free(xo), free(bo);
}

static inline void check_fused_anderson_ops(struct backend *be)
{
	check_fused_anderson_at(be, 3);
	check_fused_anderson_at(be, 1);
}

#endif
