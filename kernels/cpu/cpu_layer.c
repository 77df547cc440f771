/* cpu_layer.c — the CPU backend's per-layer row and column ops: bias,
 * activations, elementwise product and LayerNorm, plain and fused (a
 * layer's bias with its activation; a residual add and the bias under it
 * with the LayerNorm over the sum; on the way back the activation's slope
 * with the bias gradient, the LayerNorm's input gradient with its copy into
 * the residual branch and the bias gradient). kernels/backend.h has the
 * contracts. Compiled with cpu_backend.c in both instantiations (float:
 * DQ_SFX f, double: d).
 *
 * A fused op does each element's arithmetic in the order of the ops it
 * replaces (x + res, then + bias; dy · act'(y), then the column sum in
 * double, rows in order), so it gives their bits: tests/test_fused.c holds
 * it to that. It saves passes over memory, not rounding.
 *
 * Determinism as in cpu_backend.c: column sums run over blocks of
 * COL_BLOCK contiguous columns, one block per parallel iteration and its
 * rows in order, so no result depends on the thread count.
 */
#ifndef DQ_REAL
#error "compile with -DDQ_REAL=float|double -DDQ_SFX=f|d"
#endif

#include <math.h>
#include <stddef.h>

#include "../backend.h"
#include "../elementwise.h"
#include "cpu_ctx.h"

typedef DQ_REAL real;

/* Per-element math of elementwise.h for this instantiation's type. */
#define gelu	  DQ_FN(dq_gelu_)
#define gelu_grad DQ_FN(dq_gelu_grad_)
#define relu	  DQ_FN(dq_relu_)
#define relu_grad DQ_FN(dq_relu_grad_from_y_)
#define sigm	  DQ_FN(dq_sigmoid_)
#define sigm_grad DQ_FN(dq_sigmoid_grad_from_y_)
#define tanh_grad DQ_FN(dq_tanh_grad_from_y_)

/* LayerNorm rows are short (C ~ 10²–10³): parallel from 4096 elements. */
#define LN_PAR_MIN 4096
#define COL_BLOCK  64

/* ------------------------------------------------------------------ bias */

void DQ_FN(dq_cpu_bias_forward_)(void *ctx, void *y_, const void *b_, int N,
				 int C)
{
	(void)ctx;
	real *y = y_;
	const real *b = b_;
#pragma omp parallel for if ((long long)N * C >= PAR_MIN_N)
	for (int n = 0; n < N; n++) {
		real *yn = y + (size_t)n * C;
		for (int c = 0; c < C; c++)
			yn[c] += b[c];
	}
}

/* acc[c - c0] = Σ_n dy(n, c) for c in [c0, c1), in double, rows in order. */
static void col_sums(double *acc, const real *dy, int N, int C, int c0, int c1)
{
	for (int c = c0; c < c1; c++)
		acc[c - c0] = 0;
	for (int n = 0; n < N; n++) {
		const real *r = dy + (size_t)n * C;
		for (int c = c0; c < c1; c++)
			acc[c - c0] += r[c];
	}
}

void DQ_FN(dq_cpu_bias_backward_)(void *ctx, void *db_, const void *dy_, int N,
				  int C)
{
	(void)ctx;
	real *db = db_;
	const real *dy = dy_;
	int nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for if ((long long)N * C >= PAR_MIN_N)
	for (int blk = 0; blk < nblk; blk++) {
		double acc[COL_BLOCK];
		int c0 = blk * COL_BLOCK;
		int c1 = (int)min_ll(C, (long long)c0 + COL_BLOCK);
		col_sums(acc, dy, N, C, c0, c1);
		for (int c = c0; c < c1; c++)
			db[c] += (real)acc[c - c0];
	}
}

/* ----------------------------------------------------------- activations */

/* One forward and one backward loop per activation, each with its formula
 * fixed so that it vectorises on its own (a switch inside one shared loop
 * costs relu ~30%; kernels/meson.build's -fno-trapping-math lets relu's
 * select vectorise at all). The backward's s is x for GELU, y = act(x) for
 * the others. */
#define ACT_LOOPS(NAME, VALUE, SLOPE)                                          \
	static void act_forward_##NAME(real *y, const real *x, size_t n)       \
	{                                                                      \
		PAR_EACH(n, y[i] = VALUE(x[i]));                               \
	}                                                                      \
	static void act_backward_##NAME(real *dx, const real *dy,              \
					const real *s, size_t n)               \
	{                                                                      \
		PAR_EACH(n, dx[i] = dy[i] * SLOPE(s[i]));                      \
	}

/* The fused pair of an activation whose slope comes from y: y = act(y + b)
 * row by row; dx = dy act'(y) with db += Σ_n dx over column blocks. */
/* clang-format off */
#define FUSED_LOOPS(NAME, VALUE, SLOPE)                                        \
	static void bias_act_##NAME(real *y, const real *b, int N, int C)      \
	{                                                                      \
		const long long nc_ = (long long)N * C;                        \
		_Pragma("omp parallel for if (nc_ >= PAR_MIN_N)")              \
		for (int n = 0; n < N; n++) {                                  \
			real *yn = y + (size_t)n * C;                          \
			for (int c = 0; c < C; c++)                            \
				yn[c] = VALUE(yn[c] + b[c]);                   \
		}                                                              \
	}                                                                      \
	static void act_bias_bwd_##NAME(real *dx, const real *dy,              \
					const real *y, real *db, int N, int C) \
	{                                                                      \
		const long long nc_ = (long long)N * C;                        \
		const int nblk = (C + COL_BLOCK - 1) / COL_BLOCK;              \
		_Pragma("omp parallel for if (nc_ >= PAR_MIN_N)")              \
		for (int blk = 0; blk < nblk; blk++) {                         \
			double acc[COL_BLOCK] = {0};                           \
			int c0 = blk * COL_BLOCK;                              \
			int w = (int)min_ll(C - c0, COL_BLOCK);                \
			for (int n = 0; n < N; n++) {                          \
				size_t o = (size_t)n * C + (size_t)c0;         \
				for (int c = 0; c < w; c++) {                  \
					real v = dy[o + c] * SLOPE(y[o + c]);  \
					dx[o + c] = v;                         \
					acc[c] += v;                           \
				}                                              \
			}                                                      \
			for (int c = 0; c < w; c++)                            \
				db[c0 + c] += (real)acc[c];                    \
		}                                                              \
	}
/* clang-format on */

static inline real tanh_real(real x)
{
	return (real)tanh(x);
}

ACT_LOOPS(relu, relu, relu_grad)
ACT_LOOPS(gelu, gelu, gelu_grad)
ACT_LOOPS(tanh, tanh_real, tanh_grad)
ACT_LOOPS(sigmoid, sigm, sigm_grad)
FUSED_LOOPS(relu, relu, relu_grad)
FUSED_LOOPS(tanh, tanh_real, tanh_grad)
FUSED_LOOPS(sigmoid, sigm, sigm_grad)

static const struct {
	void (*forward)(real *y, const real *x, size_t n);
	void (*backward)(real *dx, const real *dy, const real *s, size_t n);
	/* NULL for GELU (backend.h: the fused ops take acts read from y) */
	void (*bias_act)(real *y, const real *b, int N, int C);
	void (*act_bias)(real *dx, const real *dy, const real *y, real *db,
			 int N, int C);
} act_loops[] = {
    [ACT_RELU] = {act_forward_relu, act_backward_relu, bias_act_relu,
		  act_bias_bwd_relu},
    [ACT_GELU] = {act_forward_gelu, act_backward_gelu, NULL, NULL},
    [ACT_TANH] = {act_forward_tanh, act_backward_tanh, bias_act_tanh,
		  act_bias_bwd_tanh},
    [ACT_SIGMOID] = {act_forward_sigmoid, act_backward_sigmoid,
		     bias_act_sigmoid, act_bias_bwd_sigmoid},
};

void DQ_FN(dq_cpu_act_forward_)(void *ctx, enum act_kind act, void *y,
				const void *x, size_t n)
{
	(void)ctx;
	act_loops[act].forward(y, x, n);
}

void DQ_FN(dq_cpu_act_backward_)(void *ctx, enum act_kind act, void *dx,
				 const void *dy, const void *x, const void *y,
				 size_t n)
{
	(void)ctx;
	act_loops[act].backward(dx, dy, act == ACT_GELU ? x : y, n);
}

void DQ_FN(dq_cpu_bias_act_forward_)(void *ctx, enum act_kind act, void *y,
				     const void *b, int N, int C)
{
	(void)ctx;
	act_loops[act].bias_act(y, b, N, C);
}

void DQ_FN(dq_cpu_act_bias_backward_)(void *ctx, enum act_kind act, void *dx,
				      const void *dy, const void *y, void *db,
				      int N, int C)
{
	(void)ctx;
	if (db)
		act_loops[act].act_bias(dx, dy, y, db, N, C);
	else
		act_loops[act].backward(dx, dy, y, (size_t)N * C);
}

void DQ_FN(dq_cpu_mul_)(void *ctx, void *dst_, const void *a_, const void *b_,
			size_t n)
{
	(void)ctx;
	real *dst = dst_;
	const real *a = a_, *b = b_;
	PAR_EACH(n, dst[i] = a[i] * b[i]);
}

/* ------------------------------------------------------------- layernorm */

/* x(C) = (x + res) + bias, each term skipped when NULL: the order of an
 * axpy followed by bias_forward. */
static void residual_row(real *x, const real *res, const real *bias, int C)
{
	if (res)
		for (int c = 0; c < C; c++)
			x[c] += res[c];
	if (bias)
		for (int c = 0; c < C; c++)
			x[c] += bias[c];
}

/* Two-pass mean and biased variance per row, in double. */
void DQ_FN(dq_cpu_layernorm_forward_)(void *ctx, void *y_, void *mean_,
				      void *rstd_, void *x_, const void *res_,
				      const void *bias_, const void *w_,
				      const void *b_, int N, int C)
{
	(void)ctx;
	real *y = y_, *mean = mean_, *rstd = rstd_, *x = x_;
	const real *res = res_, *bias = bias_, *w = w_, *b = b_;
#pragma omp parallel for if ((long long)N * C >= LN_PAR_MIN)
	for (int n = 0; n < N; n++) {
		real *xn = x + (size_t)n * C;
		real *yn = y + (size_t)n * C;
		if (res || bias)
			residual_row(xn, res ? res + (size_t)n * C : NULL, bias,
				     C);
		double m = 0, v = 0;
		for (int c = 0; c < C; c++)
			m += xn[c];
		m /= C;
		for (int c = 0; c < C; c++) {
			double d = xn[c] - m;
			v += d * d;
		}
		v /= C;
		double s = 1.0 / sqrt(v + DQ_LN_EPS);
		for (int c = 0; c < C; c++)
			yn[c] = (real)((xn[c] - m) * s * w[c] + b[c]);
		mean[n] = (real)m;
		rstd[n] = (real)s;
	}
}

/* dw(C) += Σ_n dy x̂, db(C) += Σ_n dy, x̂ = (x - mean) rstd: parallel over
 * blocks of contiguous columns, rows in order, as col_sums. */
static void ln_param_grads(real *dw, real *db, const real *dy, const real *x,
			   const real *mean, const real *rstd, int N, int C)
{
	int nblk = (C + COL_BLOCK - 1) / COL_BLOCK;
#pragma omp parallel for if ((long long)N * C >= LN_PAR_MIN)
	for (int blk = 0; blk < nblk; blk++) {
		double sw[COL_BLOCK], sb[COL_BLOCK];
		int c0 = blk * COL_BLOCK;
		int c1 = (int)min_ll(C, (long long)c0 + COL_BLOCK);
		for (int c = c0; c < c1; c++)
			sw[c - c0] = sb[c - c0] = 0;
		for (int n = 0; n < N; n++) {
			const real *g = dy + (size_t)n * C;
			const real *xn = x + (size_t)n * C;
			double m = mean[n], r = rstd[n];
			for (int c = c0; c < c1; c++) {
				sw[c - c0] += (double)g[c] * ((xn[c] - m) * r);
				sb[c - c0] += g[c];
			}
		}
		for (int c = c0; c < c1; c++) {
			dw[c] += (real)sw[c - c0];
			db[c] += (real)sb[c - c0];
		}
	}
}

/* dw, db first, then dx row by row (each row reads its dy entirely before
 * writing dx, so dx may alias dy) with its copy into dres, then dbias from
 * the finished dx. */
void DQ_FN(dq_cpu_layernorm_backward_)(void *ctx, void *dx_, void *dres_,
				       void *dbias, void *dw, void *db,
				       const void *dy_, const void *x_,
				       const void *mean_, const void *rstd_,
				       const void *w_, int N, int C)
{
	real *dx = dx_, *dres = dres_;
	const real *dy = dy_, *x = x_, *mean = mean_, *rstd = rstd_, *w = w_;
	ln_param_grads(dw, db, dy, x, mean, rstd, N, C);
#pragma omp parallel for if ((long long)N * C >= LN_PAR_MIN)
	for (int n = 0; n < N; n++) {
		const real *dyn = dy + (size_t)n * C, *xn = x + (size_t)n * C;
		real *dxn = dx + (size_t)n * C;
		double m = mean[n], s = rstd[n];
		double dn_mean = 0, dnx_mean = 0;
		for (int c = 0; c < C; c++) {
			double dn = (double)dyn[c] * w[c];
			dn_mean += dn;
			dnx_mean += dn * (xn[c] - m) * s;
		}
		dn_mean /= C;
		dnx_mean /= C;
		for (int c = 0; c < C; c++) {
			double dn = (double)dyn[c] * w[c];
			double xh = (xn[c] - m) * s;
			dxn[c] = (real)((dn - dn_mean - xh * dnx_mean) * s);
		}
		if (dres)
			for (int c = 0; c < C; c++)
				dres[(size_t)n * C + c] = dxn[c];
	}
	if (dbias)
		DQ_FN(dq_cpu_bias_backward_)(ctx, dbias, dx, N, C);
}
