/* solve_ctl.h — the device-resident state of one fixed-point solve
 * (methods/solvers.c) and the decisions made on it after every evaluation
 * of F, shared by the CPU backend (called directly) and the CUDA backend
 * (one device thread), so that both decide the same way, in double:
 *
 *   dq_ctl_check      the stop test, each sample's lowest-residual
 *                     bookkeeping, the trace and the DEQ code's breaks
 *                     (solvers.h gives the rules);
 *   dq_ctl_anderson   one sample's Anderson weights from its Gram matrix
 *                     (Walker & Ni 2011, eq. (1.2), bordered system).
 *
 * The state is one block of doubles in device memory (st); offsets are in
 * doubles. The host reads the head (DQ_CTL_GO, every sync_every
 * evaluations) and, once per solve, the head and the trace.
 *
 * Samples: S samples of P segments, segment p of sample k is entry
 * p S + k of the per-segment arrays (the layout of dot_segments over the
 * solver's vectors). Flags are 0.0 or 1.0.
 */
#ifndef DQ_SOLVE_CTL_H
#define DQ_SOLVE_CTL_H

#ifdef __CUDACC__
#define DQ_CTL_FN __host__ __device__ inline
#else
#define DQ_CTL_FN static inline
#endif

#include <math.h>

/* The head of the block: decisions and the numbers the record reports. */
enum {
	DQ_CTL_GO,	  /* 1 while the solve goes on, 0 once it stopped */
	DQ_CTL_ITERS,	  /* evaluations checked while going on */
	DQ_CTL_NONFINITE, /* stopped at a non-finite residual */
	DQ_CTL_PROTECT,	  /* stopped by protect */
	DQ_CTL_STALL,	  /* stopped by stall */
	DQ_CTL_RES,	  /* composite residual of the best iterate (stop) */
	DQ_CTL_ABS,	  /* its absolute residual */
	DQ_CTL_REL,	  /* its relative residual */
	DQ_CTL_NCONV,	  /* samples whose best residual is <= tol */
	DQ_CTL_HAVE_BEST, /* some iterate had a finite residual */
	DQ_CTL_NDONE,	  /* samples frozen (scope sample) */
	DQ_CTL_TRACE_LEN, /* entries in the trace */
	DQ_CTL_HEAD = 16  /* the trace starts here */
};

/* What a backend op needs to work on the block; passed by value to
 * kernels, so pointers are device pointers and the rest plain numbers. */
struct dq_solve_ctl {
	double *st;    /* device: the block, total doubles */
	int S, P;      /* samples, segments per sample */
	int max_iter;  /* evaluations allowed */
	int ring;      /* residual ring entries, >= the stall window, >= 1 */
	int trace_cap; /* trace entries kept */
	int m;	       /* Anderson history the Gram arrays fit (0: none) */
	int hb;	       /* fused Broyden ring (solve_fused.h; 0: none) */
	int ma;	       /* fused Anderson ring (0: none; m >= ma) */
	long nchunk;   /* chunks per segment of the fused passes */
	double lambda, beta; /* fused Anderson: regularisation, mixing */
	int stop_rel;	     /* 1: r = ‖g‖/‖F‖; 0: r = ‖g‖ */
	int per_sample;	     /* scope sample: stop when every sample is done */
	int stall;	     /* no-progress window, 0 = off */
	double tol, protect, stall_ratio; /* protect 0 = off */
	/* offsets (doubles) of: the batch residuals (the first, then a ring
	 * of the last `ring`: 1 + ring), the
	 * per-segment ‖g‖², ‖F‖² and Broyden-denominator dots (S P each; the
	 * first S entries of seg_g and seg_f become the per-sample sums),
	 * each sample's best residual, ‖g‖², ‖F‖² (S each), the frozen and
	 * improved flags (S each), the Gram matrices (S m m) and the bordered
	 * systems' scratch (S ((m+1)² + m+1)); for a fused ring (hb or ma
	 * > 0, nq = dq_ctl_fused_nq), the fused header and per-sample
	 * numbers (8 + S nq + 2 S) and the chunk partials (S P nchunk nq) */
	long o_hist, o_seg_g, o_seg_f, o_seg_d, o_best_r, o_best_g, o_best_f,
	    o_done, o_imp, o_gram, o_sys, o_fused, o_part;
	long total;
};

/* Doubles per sample (and per chunk) of the fused iterations
 * (solve_fused.h): Broyden's 4 + 3 hb, Anderson's 2 + ma, the larger. */
DQ_CTL_FN int dq_ctl_fused_nq(const struct dq_solve_ctl *c)
{
	int b = c->hb ? 4 + 3 * c->hb : 0, a = c->ma ? 2 + c->ma : 0;
	return b > a ? b : a;
}

/* Fills c's offsets and total from S, P, ring, trace_cap, m, hb, ma and
 * nchunk. */
DQ_CTL_FN void dq_ctl_layout(struct dq_solve_ctl *c)
{
	long S = c->S, SP = (long)c->S * c->P, m = c->m, q = m + 1;
	long nq = dq_ctl_fused_nq(c);
	long o = DQ_CTL_HEAD + c->trace_cap;
	c->o_hist = o;
	o += 1 + c->ring;
	c->o_seg_g = o;
	c->o_seg_f = o += SP;
	c->o_seg_d = o += SP;
	c->o_best_r = o += SP;
	c->o_best_g = o += S;
	c->o_best_f = o += S;
	c->o_done = o += S;
	c->o_imp = o += S;
	c->o_gram = o += S;
	c->o_sys = o += S * m * m;
	c->o_fused = o += m ? S * (q * q + q) : 0;
	c->o_part = o += nq ? 8 + S * nq + 2 * S : 0;
	c->total = o + (nq ? SP * c->nchunk * nq : 0);
}

DQ_CTL_FN double dq_ctl_resid(int rel, double gn, double fn)
{
	double r = fn > 0 ? gn / fn : (gn == 0 ? 0.0 : INFINITY);
	return rel ? r : gn;
}

/* The DEQ code's breaks after the batch residual res of evaluation k
 * (from 0): h[0] holds the first residual, h[1 + i % ring] that of
 * evaluation i. 1 when one fires (its flag set in st). */
DQ_CTL_FN int dq_ctl_breaks(const struct dq_solve_ctl *c, double *h, int k,
			    double res)
{
	double *st = c->st;
	if (k == 0)
		h[0] = res;
	h[1 + k % c->ring] = res;
	if (c->protect > 0 && k > 0 && res > c->protect * h[0]) {
		st[DQ_CTL_PROTECT] = 1;
		return 1;
	}
	if (c->stall > 0 && k + 1 >= c->stall) {
		double lo = INFINITY, hi = 0;
		for (int i = k + 1 - c->stall; i <= k; i++) {
			double v = h[1 + i % c->ring];
			lo = v < lo ? v : lo;
			hi = v > hi ? v : hi;
		}
		if (hi < c->stall_ratio * lo) {
			st[DQ_CTL_STALL] = 1;
			return 1;
		}
	}
	return 0;
}

/* Each sample's best from the current iterate's per-sample ‖g‖², ‖F‖²
 * (gn, fn): the improved flags, the composite residual of the bests, the
 * frozen set. 1 when the stopping rule is met. */
DQ_CTL_FN int dq_ctl_best(const struct dq_solve_ctl *c, const double *gn,
			  const double *fn)
{
	double *st = c->st, *best_r = st + c->o_best_r;
	double *bg = st + c->o_best_g, *bf = st + c->o_best_f;
	double *done = st + c->o_done, *imp = st + c->o_imp;
	int have = st[DQ_CTL_HAVE_BEST] != 0, nconv = 0;
	double G = 0, Fn = 0;
	for (int k = 0; k < c->S; k++) {
		double rk = dq_ctl_resid(c->stop_rel, sqrt(gn[k]), sqrt(fn[k]));
		int i = done[k] == 0 && (!have || rk < best_r[k]);
		imp[k] = i;
		if (i) {
			best_r[k] = rk;
			bg[k] = gn[k];
			bf[k] = fn[k];
		}
		G += bg[k];
		Fn += bf[k];
		nconv += best_r[k] <= c->tol;
	}
	st[DQ_CTL_HAVE_BEST] = 1;
	st[DQ_CTL_ABS] = sqrt(G);
	st[DQ_CTL_REL] = dq_ctl_resid(1, sqrt(G), sqrt(Fn));
	st[DQ_CTL_RES] = c->stop_rel ? st[DQ_CTL_REL] : st[DQ_CTL_ABS];
	st[DQ_CTL_NCONV] = nconv;
	if (!c->per_sample)
		return st[DQ_CTL_RES] <= c->tol;
	for (int k = 0; k < c->S; k++)
		if (done[k] == 0 && best_r[k] <= c->tol) {
			done[k] = 1;
			st[DQ_CTL_NDONE] += 1;
		}
	return st[DQ_CTL_NDONE] == c->S;
}

/* After an evaluation whose per-segment ‖g‖² and ‖F‖² are in seg_g and
 * seg_f: counts it, sums the segments per sample, appends the batch
 * residual to the trace, updates the bests (improved flags: which samples'
 * iterates the caller copies into the best iterate) and clears GO when the
 * solve must stop: rule met, a residual not finite, a break, or max_iter
 * evaluations. Does nothing once GO is 0 (flags cleared). */
DQ_CTL_FN void dq_ctl_check(const struct dq_solve_ctl *c)
{
	double *st = c->st, *g = st + c->o_seg_g, *f = st + c->o_seg_f;
	double *imp = st + c->o_imp;
	const int S = c->S;
	if (st[DQ_CTL_GO] == 0) {
		for (int k = 0; k < S; k++)
			imp[k] = 0;
		return;
	}
	double G = 0, Fn = 0;
	for (int k = 0; k < S; k++) {
		for (int p = 1; p < c->P; p++) {
			g[k] += g[(long)p * S + k];
			f[k] += f[(long)p * S + k];
		}
		G += g[k];
		Fn += f[k];
	}
	double res = dq_ctl_resid(c->stop_rel, sqrt(G), sqrt(Fn));
	int it = (int)st[DQ_CTL_ITERS] + 1, tl = (int)st[DQ_CTL_TRACE_LEN];
	st[DQ_CTL_ITERS] = it;
	if (tl < c->trace_cap) {
		st[DQ_CTL_HEAD + tl] = res;
		st[DQ_CTL_TRACE_LEN] = tl + 1;
	}
	int stop;
	if (!isfinite(res) || !isfinite(G) || !isfinite(Fn)) {
		st[DQ_CTL_NONFINITE] = 1;
		for (int k = 0; k < S; k++)
			imp[k] = 0;
		stop = 1;
	} else if (dq_ctl_best(c, g, f)) {
		stop = 1;
	} else {
		stop = dq_ctl_breaks(c, st + c->o_hist, it - 1, res) ||
		       it >= c->max_iter;
	}
	if (stop)
		st[DQ_CTL_GO] = 0;
}

/* Anderson weights of sample k: its Gram matrix (m, m at o_gram, row
 * `slot` and column `slot` already holding the new G's products with the
 * nact in use) in the bordered system [[0, 1ᵀ], [1, H + λI]] [ν; α] =
 * [1; 0], solved by Gaussian elimination with partial pivoting in double
 * (Walker & Ni 2011, eq. (1.2), the constraint Σα = 1 as a Lagrange row).
 * Returns α (nact) in the sample's scratch, uniform 1/nact when the system
 * is singular. */
DQ_CTL_FN double *dq_ctl_anderson(const struct dq_solve_ctl *c, int k, int nact,
				  double lambda)
{
	const int ld = c->m, q = nact + 1, qm = c->m + 1;
	const double *H = c->st + c->o_gram + (long)k * ld * ld;
	double *A = c->st + c->o_sys + (long)k * (qm * qm + qm);
	double *b = A + (long)qm * qm;
	for (int i = 0; i < q; i++) {
		b[i] = i == 0 ? 1.0 : 0.0;
		for (int j = 0; j < q; j++) {
			double v;
			if (i == 0 && j == 0)
				v = 0;
			else if (i == 0 || j == 0)
				v = 1;
			else
				v = H[(long)(i - 1) * ld + (j - 1)] +
				    (i == j ? lambda : 0.0);
			A[(long)i * q + j] = v;
		}
	}
	for (int kk = 0; kk < q; kk++) {
		int piv = kk;
		for (int i = kk + 1; i < q; i++)
			if (fabs(A[(long)i * q + kk]) >
			    fabs(A[(long)piv * q + kk]))
				piv = i;
		if (!(fabs(A[(long)piv * q + kk]) > 0)) {
			for (int i = 1; i <= nact; i++)
				b[i] = 1.0 / nact;
			return b + 1;
		}
		if (piv != kk) {
			for (int j = 0; j < q; j++) {
				double t = A[(long)kk * q + j];
				A[(long)kk * q + j] = A[(long)piv * q + j];
				A[(long)piv * q + j] = t;
			}
			double t = b[kk];
			b[kk] = b[piv];
			b[piv] = t;
		}
		for (int i = kk + 1; i < q; i++) {
			double fct = A[(long)i * q + kk] / A[(long)kk * q + kk];
			for (int j = kk; j < q; j++)
				A[(long)i * q + j] -= fct * A[(long)kk * q + j];
			b[i] -= fct * b[kk];
		}
	}
	for (int i = q - 1; i >= 0; i--) {
		double v = b[i];
		for (int j = i + 1; j < q; j++)
			v -= A[(long)i * q + j] * b[j];
		b[i] = v / A[(long)i * q + i];
	}
	return b + 1;
}

/* Entry j of sample k's Gram row and column `slot`: the new G's product
 * with the G in slot j. */
DQ_CTL_FN void dq_ctl_gram_put(const struct dq_solve_ctl *c, int k, int slot,
			       int j, double v)
{
	const int ld = c->m;
	double *H = c->st + c->o_gram + (long)k * ld * ld;
	H[(long)slot * ld + j] = v;
	H[(long)j * ld + slot] = v;
}

#endif
