/* solve_fused.h — the fused Broyden and Anderson iterations
 * (solver_kernels=fused;
 * methods/solvers.h): the good-Broyden step and rank-1 update of Bai,
 * Kolter, Koltun 2019 §3.1.3 as two passes over the vectors per
 * evaluation of F, on a fixed ring of hb pairs, with every count and
 * coefficient in the control block (kernels/solve_ctl.h), so that an
 * iteration is the same ops whatever its index (one body of a WHILE loop
 * in a CUDA graph).
 *
 * Per evaluation fx = F(x), with Δx the step that led to x, g the residual
 * before it and the act pairs j (those in use, less the one a full ring
 * drops next):
 *
 *   measure (one reduction pass): g_new = fx − x, Δg = g_new − g, and per
 *     sample ‖g_new‖², ‖fx‖², Δx·Δg, Δx·g_new, a_j = U_j·Δx, b_j = V_j·Δg,
 *     c_j = V_j·g_new; then dq_ctl_check and this file's decisions:
 *       vᵀΔg = −Δx·Δg + Σ a_j b_j,   r = 1 / vᵀΔg (0 when 0 or not finite),
 *       v·g_new = −Δx·g_new + Σ a_j c_j;
 *   apply (one element-wise pass, every act pair read once):
 *       v = −Δx + Σ a_j V_j                      (= Bᵀ Δx)
 *       u = r (Δx + Δg − Σ b_j U_j)              (= (Δx − B Δg) / vᵀΔg)
 *       Δx' = g_new − Σ c_j U_j − (v·g_new) u    (= −B' g_new)
 *       x ← x + Δx' (0 for a frozen sample); (u, v) into the ring's slot.
 *
 * This is solvers.h's Broyden, term for term: the same pairs, the same
 * dropped pair, the same zero pair for a bad denominator; only the sums'
 * order differs (products of dots instead of products of vectors), so
 * results agree within rounding, not bit for bit (tests: test_solvers).
 *
 * Sums: every dot is a sum of chunks of DQ_FUSED_CHUNK elements of one
 * segment (each chunk's partial in double), taken in the order segment p,
 * then chunk; on a GPU one block per chunk.
 */
#ifndef DQ_SOLVE_FUSED_H
#define DQ_SOLVE_FUSED_H

#include "solve_ctl.h"

/* Elements of one chunk of a segment (a GPU block's share). */
#define DQ_FUSED_CHUNK 4096
/* The longest ring the fused iteration takes (a GPU block keeps a
 * sample's 3 hb coefficients in shared memory). */
#define DQ_FUSED_MAX_H 256

/* The fused header at o_fused (doubles). */
enum {
	DQ_FU_NU,     /* pairs in use */
	DQ_FU_OLD,    /* oldest pair once the ring is full */
	DQ_FU_PAIR,   /* 1: this evaluation's apply forms a pair */
	DQ_FU_SLOT,   /* where it goes */
	DQ_FU_ACTN,   /* pairs in use when measure ran */
	DQ_FU_DROP,   /* the one of them act leaves out, −1 for none */
	DQ_FU_ARRIVE, /* GPU: blocks of measure done (64-bit counter) */
	DQ_FU_MSLOT,  /* Anderson: the slot this measure wrote */
	DQ_FU_HEAD = 8
};

/* Per-sample quantities (nq each, dq_ctl_fused_nq): Broyden's
 * ‖g_new‖², ‖fx‖², Δx·Δg, Δx·g_new, then a (hb), b (hb), c (hb);
 * Anderson's ‖g_new‖², ‖fx‖², then the Gram row (ma), which its decide
 * replaces by the weights α. */
enum { DQ_FQ_GG, DQ_FQ_FF, DQ_FQ_DD, DQ_FQ_DGN, DQ_FQ_A };
enum { DQ_FA_ROW = 2 };

DQ_CTL_FN int dq_fu_nq(const struct dq_solve_ctl *c)
{
	return dq_ctl_fused_nq(c);
}

DQ_CTL_FN long dq_fu_chunks(long len)
{
	return (len + DQ_FUSED_CHUNK - 1) / DQ_FUSED_CHUNK;
}

/* Sample k's quantities (nq), then its r and v·g_new (2 S at the end). */
DQ_CTL_FN double *dq_fu_q(const struct dq_solve_ctl *c, int k)
{
	return c->st + c->o_fused + DQ_FU_HEAD + (long)k * dq_fu_nq(c);
}

DQ_CTL_FN double *dq_fu_rc(const struct dq_solve_ctl *c, int k)
{
	return c->st + c->o_fused + DQ_FU_HEAD + (long)c->S * dq_fu_nq(c) +
	       2L * k;
}

/* Chunk `ch` of segment seg's partials (nq). */
DQ_CTL_FN double *dq_fu_part(const struct dq_solve_ctl *c, long seg, long ch)
{
	return c->st + c->o_part + (seg * c->nchunk + ch) * dq_fu_nq(c);
}

/* Whether pair j is in measure's act set: in use and not the one a full
 * ring drops next (from the header as measure finds it). */
DQ_CTL_FN int dq_fu_act_in(int nu, int old, int hb, int j)
{
	return j < nu && !(nu == hb && j == old);
}

DQ_CTL_FN int dq_fu_act_now(const double *fh, int hb, int j)
{
	return dq_fu_act_in((int)fh[DQ_FU_NU], (int)fh[DQ_FU_OLD], hb, j);
}

/* The same set for apply, which runs after decide moved the ring on. */
DQ_CTL_FN int dq_fu_act(const double *fh, int j)
{
	return j < (int)fh[DQ_FU_ACTN] && j != (int)fh[DQ_FU_DROP];
}

/* Sample k's quantity q: its partials summed, segment by segment, chunk by
 * chunk, into dq_fu_q. */
DQ_CTL_FN void dq_fu_sum(const struct dq_solve_ctl *c, int k, int q)
{
	double s = 0;
	for (long p = 0; p < c->P; p++)
		for (long ch = 0; ch < c->nchunk; ch++)
			s += dq_fu_part(c, p * c->S + k, ch)[q];
	dq_fu_q(c, k)[q] = s;
}

/* The check on the sums: each sample's ‖g‖² and ‖F‖² as its segment 0's,
 * zeros for the others (dq_ctl_check adds the segments). */
DQ_CTL_FN void dq_fu_check(const struct dq_solve_ctl *c)
{
	double *st = c->st;
	for (int k = 0; k < c->S; k++)
		for (int p = 0; p < c->P; p++) {
			long e = (long)p * c->S + k;
			st[c->o_seg_g + e] = p ? 0 : dq_fu_q(c, k)[DQ_FQ_GG];
			st[c->o_seg_f + e] = p ? 0 : dq_fu_q(c, k)[DQ_FQ_FF];
		}
	dq_ctl_check(c);
}

/* After the sums: the check (dq_fu_check), then, while the solve goes on, each sample's r and v·g_new and
 * the ring's next slot. */
DQ_CTL_FN void dq_fu_decide(const struct dq_solve_ctl *c)
{
	double *st = c->st, *fh = st + c->o_fused;
	const int S = c->S, go = st[DQ_CTL_GO] != 0;
	fh[DQ_FU_ACTN] = fh[DQ_FU_NU];
	fh[DQ_FU_DROP] = fh[DQ_FU_NU] == c->hb ? fh[DQ_FU_OLD] : -1;
	dq_fu_check(c);
	fh[DQ_FU_PAIR] = 0;
	if (!go || st[DQ_CTL_GO] == 0 || st[DQ_CTL_ITERS] < 2)
		return;
	for (int k = 0; k < S; k++) {
		const double *q = dq_fu_q(c, k), *a = q + DQ_FQ_A;
		double den = -q[DQ_FQ_DD], vg = -q[DQ_FQ_DGN];
		for (int j = 0; j < c->hb; j++)
			if (dq_fu_act(fh, j)) {
				den += a[j] * a[c->hb + j];
				vg += a[j] * a[2 * c->hb + j];
			}
		int ok = den != 0 && isfinite(den) && isfinite(1.0 / den);
		dq_fu_rc(c, k)[0] = ok ? 1.0 / den : 0.0;
		dq_fu_rc(c, k)[1] = vg;
	}
	int nu = (int)fh[DQ_FU_NU];
	fh[DQ_FU_PAIR] = 1;
	fh[DQ_FU_SLOT] = nu < c->hb ? nu : fh[DQ_FU_OLD];
	if (nu < c->hb)
		fh[DQ_FU_NU] = nu + 1;
	else
		fh[DQ_FU_OLD] = ((int)fh[DQ_FU_OLD] + 1) % c->hb;
}

/* ---- Anderson (Walker & Ni 2011; solvers.h's anderson, type II) ----
 *
 * Per evaluation fx = F(xn), slot = the ring's next (k mod ma), the act
 * iterates j those in use less the slot:
 *   measure (one reduction pass): G_slot = fx − xn and X_slot = xn
 *     written; per sample ‖G_slot‖², ‖fx‖² and the Gram row G_slot·G_j;
 *     then dq_ctl_check and, while the solve goes on, the row into the
 *     sample's Gram matrix and its weights α (dq_ctl_anderson) over the
 *     nact = min(in use + 1, ma) iterates;
 *   apply (one element-wise pass): best ← xn for the improved samples;
 *     xn ← Σ α_j (X_j + β G_j) (unchanged for a frozen sample).
 * The ops path's algorithm; its Gram row is rounded to the backend type
 * before the bordered solve, this one stays in double. */

/* Whether iterate j is in measure's act set (the header before decide). */
DQ_CTL_FN int dq_fa_act_in(int nu, int slot, int j)
{
	return j < nu && j != slot;
}

DQ_CTL_FN int dq_fa_act_now(const double *fh, int j)
{
	return dq_fa_act_in((int)fh[DQ_FU_NU], (int)fh[DQ_FU_SLOT], j);
}

/* After the sums: the check, then each sample's Gram row and weights
 * (into its quantities from DQ_FA_ROW), the ring moved on. */
DQ_CTL_FN void dq_fa_decide(const struct dq_solve_ctl *c)
{
	double *st = c->st, *fh = st + c->o_fused;
	const int S = c->S, go = st[DQ_CTL_GO] != 0;
	const int slot = (int)fh[DQ_FU_SLOT], nu = (int)fh[DQ_FU_NU];
	const int nact = nu + 1 < c->ma ? nu + 1 : c->ma;
	dq_fu_check(c);
	fh[DQ_FU_MSLOT] = slot;
	if (!go || st[DQ_CTL_GO] == 0)
		return;
	for (int k = 0; k < S; k++) {
		double *q = dq_fu_q(c, k);
		for (int j = 0; j < nact; j++)
			dq_ctl_gram_put(c, k, slot, j,
					j == slot ? q[DQ_FQ_GG]
						  : q[DQ_FA_ROW + j]);
		const double *a = dq_ctl_anderson(c, k, nact, c->lambda);
		for (int j = 0; j < nact; j++)
			q[DQ_FA_ROW + j] = a[j];
	}
	fh[DQ_FU_NU] = nact;
	fh[DQ_FU_SLOT] = (slot + 1) % c->ma;
}

#endif
