/* cpu_solve.c — the CPU backend's solver-control ops (solve_check,
 * copy_masked, scale_recip, anderson_weights; kernels/backend.h has the
 * contracts, kernels/solve_ctl.h the decisions), compiled with
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
