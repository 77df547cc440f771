/*
 * test_ops.c — every op of the CPU backends against three references:
 *   1. a naive double-precision forward written out here (the spec),
 *   2. central finite differences of L = <R, forward(x)> on "cpu64" for every
 *      backward (R fixed and random),
 *   3. "cpu" (float32) against "cpu64" by normalised mean squared error,
 * at odd shapes (B=3 T=5 C=12 H=3 F=20 V=17) and powers of two (B=2 T=8 C=16
 * H=4 F=64 V=32). Adam, the solver vector ops, transfers, the ops that move
 * values and bitwise determinism: test_vec_ops.c.
 *
 * Tolerances (double: ε = 1.1e-16):
 *   FD_TOL 1e-6: the central difference (L(x+h) - L(x-h)) / 2h with h = 1e-6
 *     has truncation error h² L''' / 6 ~ 1e-13 and rounding error
 *     ~ ε Σ|R_i y_i| / h ~ 1e-16 * 1e3 / 1e-6 = 1e-7 at the very worst (1e3
 *     bounds Σ|R y| for these shapes), typically 1e-9 since the rounding
 *     errors are not aligned; gradients have norm ≳ 0.1, so a relative error
 *     of 1e-6 can only fail on a wrong formula (those give O(1)).
 *   REF_TOL 1e-12 per element, relative to 1 + |ref|: cpu64 and the naive
 *     code differ only in summation order over ≤ 64 terms: ≤ 64 ε ~ 1e-14.
 *   NMSE_TOL 1e-10 float vs double: float rounding of inputs and results is
 *     2^-24 ≈ 6e-8 relative, sums of K ≤ 64 terms grow that to ~ 8 * 6e-8
 *     in rms, NMSE ≈ (5e-7)² ≈ 2.5e-13; 1e-10 leaves a 400x margin while a
 *     single wrong element (O(1) error among ≤ 10³) gives NMSE ≥ 1e-3.
 */
#include "test_ops_util.h"
#include "test_move_ops.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FD_H	 1e-6
#define FD_TOL	 1e-6
#define REF_TOL	 1e-12
#define NMSE_TOL 1e-10
#define MAXIN	 3
#define MAXOUT	 2

/* ---- helpers ------------------------------------------------------------ */

static void assert_close(const double *a, const double *ref, size_t n,
			 double tol, const char *what)
{
	for (size_t i = 0; i < n; i++)
		cr_assert(fabs(a[i] - ref[i]) <= tol * (1 + fabs(ref[i])),
			  "%s[%zu]: %.17g vs reference %.17g", what, i, a[i],
			  ref[i]);
}

/* ---- the generic op case ------------------------------------------------ */

/* One op with its inputs: fn runs the forward into out[] (host copies) and,
 * when R is not NULL, the backward with upstream gradient R (the first
 * nloss output elements) into grad[k] for every input k. The scalar loss is
 * L = <R, out[0][0 .. nloss)>. */
struct op_case {
	const char *name;
	void (*fn)(struct backend *be, const struct op_case *c,
		   double *const *in, double *const *out, const double *R,
		   double *const *grad);
	int nin, nout;
	int ngrad; /* inputs whose gradients are checked: the first ngrad
		      (0: all nin) */
	size_t inn[MAXIN], outn[MAXOUT], nloss;
	double *in[MAXIN];
	/* shape */
	int B, T, C, H, V, Tmax, N, M, K, ta, tb;
	double alpha, beta;
	enum act_kind act;
	const int32_t *ids; /* tokens (embed) or targets (xent) */
};

static void alloc_outs(const struct op_case *c, double **out)
{
	for (int j = 0; j < c->nout; j++)
		out[j] = zeros(c->outn[j]);
}

static void free_all(double **p, int n)
{
	for (int j = 0; j < n; j++)
		free(p[j]);
}

static double loss_at(struct backend *be, const struct op_case *c,
		      double *const *in, const double *R)
{
	double *out[MAXOUT];
	alloc_outs(c, out);
	c->fn(be, c, in, out, NULL, NULL);
	double L = vdot(R, out[0], c->nloss);
	free_all(out, c->nout);
	return L;
}

/* Runs the case on both backends, checks finiteness, float-vs-double NMSE
 * of outputs and gradients, the forward against ref[] (may be NULL) and
 * every input's gradient against central finite differences on cpu64. */
static void check_case(const struct op_case *c, double *const *ref)
{
	struct backend *b64 = make("cpu64", 0), *b32 = make("cpu", 0);
	double *R = rnd(c->nloss, 1.0);
	double *o64[MAXOUT], *o32[MAXOUT], *g64[MAXIN], *g32[MAXIN];
	alloc_outs(c, o64);
	alloc_outs(c, o32);
	for (int k = 0; k < c->nin; k++) {
		g64[k] = zeros(c->inn[k]);
		g32[k] = zeros(c->inn[k]);
	}
	c->fn(b64, c, c->in, o64, R, g64);
	c->fn(b32, c, c->in, o32, R, g32);

	char what[96];
	for (int j = 0; j < c->nout; j++) {
		snprintf(what, sizeof(what), "%s out%d (cpu64)", c->name, j);
		assert_finite(o64[j], c->outn[j], what);
		snprintf(what, sizeof(what), "%s out%d (cpu)", c->name, j);
		assert_finite(o32[j], c->outn[j], what);
		double e = nmse(o32[j], o64[j], c->outn[j]);
		cr_assert_lt(e, NMSE_TOL, "%s out%d: float vs double NMSE %g",
			     c->name, j, e);
		if (ref) {
			snprintf(what, sizeof(what), "%s out%d vs naive",
				 c->name, j);
			assert_close(o64[j], ref[j], c->outn[j], REF_TOL, what);
			assert_close(o32[j], ref[j], c->outn[j], 1e-5, what);
		}
	}
	int ng = c->ngrad ? c->ngrad : c->nin;
	for (int k = 0; k < ng; k++) {
		snprintf(what, sizeof(what), "%s grad%d", c->name, k);
		assert_finite(g64[k], c->inn[k], what);
		assert_finite(g32[k], c->inn[k], what);
		double e = nmse(g32[k], g64[k], c->inn[k]);
		cr_assert_lt(e, NMSE_TOL, "%s grad%d: float vs double NMSE %g",
			     c->name, k, e);
	}

	/* central differences on cpu64 */
	double *x[MAXIN];
	for (int k = 0; k < c->nin; k++) {
		x[k] = malloc(c->inn[k] * sizeof(double));
		memcpy(x[k], c->in[k], c->inn[k] * sizeof(double));
	}
	for (int k = 0; k < ng; k++) {
		double *fd = zeros(c->inn[k]);
		for (size_t i = 0; i < c->inn[k]; i++) {
			double x0 = x[k][i];
			x[k][i] = x0 + FD_H;
			double Lp = loss_at(b64, c, x, R);
			x[k][i] = x0 - FD_H;
			double Lm = loss_at(b64, c, x, R);
			x[k][i] = x0;
			fd[i] = (Lp - Lm) / (2 * FD_H);
		}
		double nd = 0, nf = 0;
		for (size_t i = 0; i < c->inn[k]; i++) {
			nd += (g64[k][i] - fd[i]) * (g64[k][i] - fd[i]);
			nf += fd[i] * fd[i];
		}
		double rel = sqrt(nd) / fmax(sqrt(nf), 1e-30);
		cr_assert_lt(rel, FD_TOL,
			     "%s: grad of input %d vs finite differences: "
			     "relative error %g (|fd| = %g)",
			     c->name, k, rel, sqrt(nf));
		/* a gradient that is zero everywhere checks nothing */
		cr_assert_gt(sqrt(nf), 1e-3, "%s: input %d has no gradient",
			     c->name, k);
		free(fd);
	}
	free_all(x, c->nin);
	free_all(o64, c->nout);
	free_all(o32, c->nout);
	free_all(g64, c->nin);
	free_all(g32, c->nin);
	free(R);
	backend_destroy(b64);
	backend_destroy(b32);
}

static void free_case(struct op_case *c)
{
	free_all(c->in, c->nin);
}

/* ---- shapes --------------------------------------------------------------
 */

struct shape {
	int B, T, C, H, F, V;
};

static const struct shape SHAPES[] = {
    {3, 5, 12, 3, 20, 17}, /* odd */
    {2, 8, 16, 4, 64, 32}, /* powers of two */
};
#define NSHAPES (int)(sizeof(SHAPES) / sizeof(SHAPES[0]))

/* ---- gemm ---------------------------------------------------------------- */

/* Gradients of C = alpha op(A) op(B) + beta C0 written with the backend's
 * own gemm, the way models call it: dop(A) = alpha R op(B)ᵀ,
 * dop(B) = alpha op(A)ᵀ R, transposed back when the operand is stored
 * transposed; dC0 = beta R. */
static void op_gemm(struct backend *be, const struct op_case *c,
		    double *const *in, double *const *out, const double *R,
		    double *const *grad)
{
	struct pool pl = {be, {0}, 0};
	const struct backend_math_ops *o = be->ops->math;
	int M = c->M, N = c->N, K = c->K, ta = c->ta, tb = c->tb;
	double al = c->alpha;
	void *A = pool_up(&pl, in[0], c->inn[0]);
	void *B = pool_up(&pl, in[1], c->inn[1]);
	void *C = pool_up(&pl, in[2], c->inn[2]);
	int lda = ta ? M : K, ldb = tb ? K : N;
	o->gemm(be->ctx, ta, tb, M, N, K, al, A, lda, B, ldb, c->beta, C, N);
	pool_down(&pl, out[0], C, c->outn[0]);
	if (R) {
		void *dR = pool_up(&pl, R, c->nloss);
		void *dA = pool_new(&pl, c->inn[0], 9); /* overwritten */
		void *dB = pool_new(&pl, c->inn[1], 9);
		if (!ta && !tb)
			o->gemm(be->ctx, 0, 1, M, K, N, al, dR, N, B, N, 0, dA,
				K);
		else if (!ta && tb)
			o->gemm(be->ctx, 0, 0, M, K, N, al, dR, N, B, K, 0, dA,
				K);
		else if (ta && !tb)
			o->gemm(be->ctx, 0, 1, K, M, N, al, B, N, dR, N, 0, dA,
				M);
		else
			o->gemm(be->ctx, 1, 1, K, M, N, al, B, K, dR, N, 0, dA,
				M);
		if (!tb && !ta)
			o->gemm(be->ctx, 1, 0, K, N, M, al, A, K, dR, N, 0, dB,
				N);
		else if (!tb && ta)
			o->gemm(be->ctx, 0, 0, K, N, M, al, A, M, dR, N, 0, dB,
				N);
		else if (tb && !ta)
			o->gemm(be->ctx, 1, 0, N, K, M, al, dR, N, A, K, 0, dB,
				K);
		else
			o->gemm(be->ctx, 1, 1, N, K, M, al, dR, N, A, M, 0, dB,
				K);
		o->scale(be->ctx, dR, c->beta, c->nloss);
		pool_down(&pl, grad[0], dA, c->inn[0]);
		pool_down(&pl, grad[1], dB, c->inn[1]);
		pool_down(&pl, grad[2], dR, c->inn[2]);
	}
	pool_free(&pl);
}

Test(ops, gemm)
{
	static const double ab[][2] = {{1.0, 0.0}, {0.7, -0.4}};
	for (int si = 0; si < NSHAPES; si++)
		for (int tr = 0; tr < 4; tr++)
			for (int ai = 0; ai < 2; ai++) {
				const struct shape *s = &SHAPES[si];
				rng_state = 100 + si * 8 + tr * 2 + ai;
				struct op_case c = {.name = "gemm",
						    .fn = op_gemm,
						    .nin = 3,
						    .nout = 1};
				c.M = s->B * s->T, c.N = s->F, c.K = s->C;
				c.ta = tr & 1, c.tb = tr >> 1;
				c.alpha = ab[ai][0], c.beta = ab[ai][1];
				c.inn[0] = (size_t)c.M * c.K;
				c.inn[1] = (size_t)c.K * c.N;
				c.inn[2] = c.outn[0] = c.nloss =
				    (size_t)c.M * c.N;
				for (int k = 0; k < 3; k++)
					c.in[k] = rnd(c.inn[k], 1.0);
				double *ref = zeros(c.outn[0]);
				memcpy(ref, c.in[2],
				       c.outn[0] * sizeof(double));
				naive_gemm(ref, c.N, c.ta, c.tb, c.M, c.N, c.K,
					   c.alpha, c.in[0], c.ta ? c.M : c.K,
					   c.in[1], c.tb ? c.K : c.N, c.beta);
				char name[64];
				snprintf(name, sizeof(name),
					 "gemm %s ta=%d tb=%d a=%g b=%g",
					 si ? "pow2" : "odd", c.ta, c.tb,
					 c.alpha, c.beta);
				c.name = name;
				if (c.beta == 0) /* dC0 is then exactly 0 */
					c.ngrad = 2;
				check_case(&c, &ref);
				free(ref);
				free_case(&c);
			}
}

/* Leading dimensions larger than the rows: the padding must stay intact. */
Test(ops, gemm_strided)
{
	const char *names[] = {"cpu64", "cpu"};
	int M = 7, N = 5, K = 9;
	for (int bi = 0; bi < 2; bi++)
		for (int tr = 0; tr < 4; tr++) {
			int ta = tr & 1, tb = tr >> 1;
			int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2,
			    ldc = N + 4;
			size_t na = (size_t)(ta ? K : M) * lda,
			       nb = (size_t)(tb ? N : K) * ldb,
			       nc = (size_t)M * ldc;
			rng_state = 7 + tr;
			double *A = rnd(na, 1), *B = rnd(nb, 1),
			       *C = rnd(nc, 1);
			double *ref = zeros(nc), *got = zeros(nc);
			memcpy(ref, C, nc * sizeof(double));
			naive_gemm(ref, ldc, ta, tb, M, N, K, 1.3, A, lda, B,
				   ldb, 0.5);
			struct backend *be = make(names[bi], 0);
			struct pool pl = {be, {0}, 0};
			void *dA = pool_up(&pl, A, na),
			     *dB = pool_up(&pl, B, nb),
			     *dC = pool_up(&pl, C, nc);
			be_gemm(be, ta, tb, M, N, K, 1.3, dA, lda, dB, ldb, 0.5,
				dC, ldc);
			pool_down(&pl, got, dC, nc);
			pool_free(&pl);
			backend_destroy(be);
			/* float: K = 9 products of float-rounded inputs */
			assert_close(got, ref, nc, bi ? 1e-6 : REF_TOL,
				     "gemm strided");
			for (int m = 0; m < M; m++)
				for (int n = N; n < ldc; n++)
					cr_assert_eq(
					    got[m * ldc + n],
					    (double)(bi ? (float)C[m * ldc + n]
							: C[m * ldc + n]),
					    "padding written");
			free(A), free(B), free(C), free(ref), free(got);
		}
}

/* ---- bias ---------------------------------------------------------------- */

/* db starts at 0.25 to check that bias_backward adds. */
static void op_bias(struct backend *be, const struct op_case *c,
		    double *const *in, double *const *out, const double *R,
		    double *const *grad)
{
	struct pool pl = {be, {0}, 0};
	int N = c->N, C = c->C;
	void *y = pool_up(&pl, in[0], c->inn[0]);
	void *b = pool_up(&pl, in[1], c->inn[1]);
	be_bias_forward(be, y, b, N, C);
	pool_down(&pl, out[0], y, c->outn[0]);
	if (R) {
		void *dy = pool_up(&pl, R, c->nloss);
		void *db = pool_new(&pl, (size_t)C, 0.25);
		be_bias_backward(be, db, dy, N, C);
		memcpy(grad[0], R, c->nloss * sizeof(double));
		pool_down(&pl, grad[1], db, (size_t)C);
		for (int j = 0; j < C; j++)
			grad[1][j] -= 0.25;
	}
	pool_free(&pl);
}

Test(ops, bias)
{
	for (int si = 0; si < NSHAPES; si++) {
		const struct shape *s = &SHAPES[si];
		rng_state = 200 + si;
		struct op_case c = {
		    .name = "bias", .fn = op_bias, .nin = 2, .nout = 1};
		c.N = s->B * s->T, c.C = s->C;
		c.inn[0] = c.outn[0] = c.nloss = (size_t)c.N * c.C;
		c.inn[1] = (size_t)c.C;
		c.in[0] = rnd(c.inn[0], 1), c.in[1] = rnd(c.inn[1], 1);
		double *ref = zeros(c.outn[0]);
		for (int n = 0; n < c.N; n++)
			for (int j = 0; j < c.C; j++)
				ref[n * c.C + j] =
				    c.in[0][n * c.C + j] + c.in[1][j];
		check_case(&c, &ref);
		free(ref);
		free_case(&c);
	}
}

/* ---- activations and mul --------------------------------------------------
 */

/* Forward in place (y aliases x's copy), backward in place (dx aliases dy);
 * the pointer the op must not need is passed as NULL. */
static void op_act(struct backend *be, const struct op_case *c,
		   double *const *in, double *const *out, const double *R,
		   double *const *grad)
{
	struct pool pl = {be, {0}, 0};
	size_t n = c->inn[0];
	void *x = pool_up(&pl, in[0], n);
	void *y = pool_up(&pl, in[0], n);
	be_act_forward(be, c->act, y, y, n);
	pool_down(&pl, out[0], y, n);
	if (R) {
		void *g = pool_up(&pl, R, n);
		int uses_x = c->act == ACT_GELU;
		be_act_backward(be, c->act, g, g, uses_x ? x : NULL,
				uses_x ? NULL : y, n);
		pool_down(&pl, grad[0], g, n);
	}
	pool_free(&pl);
}

static double naive_act(enum act_kind a, double x)
{
	switch (a) {
	case ACT_RELU:
		return x > 0 ? x : 0;
	case ACT_GELU:
		return 0.5 * x * (1 + erf(x / sqrt(2.0)));
	case ACT_TANH:
		return tanh(x);
	case ACT_SIGMOID:
		return 1 / (1 + exp(-x));
	}
	return NAN;
}

Test(ops, activations)
{
	static const char *names[] = {"relu", "gelu", "tanh", "sigmoid"};
	for (int si = 0; si < NSHAPES; si++)
		for (int a = ACT_RELU; a <= ACT_SIGMOID; a++) {
			const struct shape *s = &SHAPES[si];
			rng_state = 300 + si * 4 + a;
			struct op_case c = {.name = names[a],
					    .fn = op_act,
					    .nin = 1,
					    .nout = 1};
			c.act = (enum act_kind)a;
			c.inn[0] = c.outn[0] = c.nloss =
			    (size_t)s->B * s->T * s->F;
			/* |x| in [0.1, 3]: far from relu's kink at 0 (the FD
			 * step is 1e-6), and covering the curved parts. */
			c.in[0] = rnd(c.inn[0], 1);
			for (size_t i = 0; i < c.inn[0]; i++) {
				double v = c.in[0][i];
				c.in[0][i] = copysign(0.1 + 2.9 * fabs(v), v);
			}
			double *ref = zeros(c.outn[0]);
			for (size_t i = 0; i < c.inn[0]; i++)
				ref[i] = naive_act(c.act, c.in[0][i]);
			check_case(&c, &ref);
			free(ref);
			free_case(&c);
		}
}

static void op_mul(struct backend *be, const struct op_case *c,
		   double *const *in, double *const *out, const double *R,
		   double *const *grad)
{
	struct pool pl = {be, {0}, 0};
	size_t n = c->inn[0];
	void *a = pool_up(&pl, in[0], n), *b = pool_up(&pl, in[1], n);
	void *y = pool_new(&pl, n, 0);
	be_mul(be, y, a, b, n);
	pool_down(&pl, out[0], y, n);
	if (R) {
		void *g = pool_up(&pl, R, n);
		be_mul(be, y, g, b, n);
		pool_down(&pl, grad[0], y, n);
		be_mul(be, y, g, a, n);
		pool_down(&pl, grad[1], y, n);
	}
	pool_free(&pl);
}

Test(ops, mul)
{
	for (int si = 0; si < NSHAPES; si++) {
		const struct shape *s = &SHAPES[si];
		rng_state = 400 + si;
		struct op_case c = {
		    .name = "mul", .fn = op_mul, .nin = 2, .nout = 1};
		c.inn[0] = c.inn[1] = c.outn[0] = c.nloss =
		    (size_t)s->B * s->T * s->C;
		c.in[0] = rnd(c.inn[0], 1), c.in[1] = rnd(c.inn[1], 1);
		double *ref = zeros(c.outn[0]);
		for (size_t i = 0; i < c.inn[0]; i++)
			ref[i] = c.in[0][i] * c.in[1][i];
		check_case(&c, &ref);
		free(ref);
		free_case(&c);
	}
}

/* ---- layernorm ------------------------------------------------------------
 */

/* out0 = y (the loss), out1 = mean | rstd. dx is pre-filled with garbage
 * (overwritten), dw and db with 0.5 (+=). */
static void op_layernorm(struct backend *be, const struct op_case *c,
			 double *const *in, double *const *out, const double *R,
			 double *const *grad)
{
	struct pool pl = {be, {0}, 0};
	int N = c->N, C = c->C;
	void *x = pool_up(&pl, in[0], c->inn[0]);
	void *w = pool_up(&pl, in[1], (size_t)C);
	void *b = pool_up(&pl, in[2], (size_t)C);
	void *y = pool_new(&pl, (size_t)N * C, 0);
	void *mr = pool_new(&pl, 2 * (size_t)N, 0);
	void *rs = dq_at(be, mr, (size_t)N);
	be_layernorm_forward(be, y, mr, rs, x, w, b, N, C);
	pool_down(&pl, out[0], y, (size_t)N * C);
	pool_down(&pl, out[1], mr, 2 * (size_t)N);
	if (R) {
		void *dy = pool_up(&pl, R, c->nloss);
		void *dx = pool_new(&pl, (size_t)N * C, 123.0);
		void *dw = pool_new(&pl, (size_t)C, 0.5);
		void *db = pool_new(&pl, (size_t)C, 0.5);
		be_layernorm_backward(be, dx, dw, db, dy, x, mr, rs, w, N, C);
		pool_down(&pl, grad[0], dx, (size_t)N * C);
		pool_down(&pl, grad[1], dw, (size_t)C);
		pool_down(&pl, grad[2], db, (size_t)C);
		for (int j = 0; j < C; j++)
			grad[1][j] -= 0.5, grad[2][j] -= 0.5;
	}
	pool_free(&pl);
}

Test(ops, layernorm)
{
	for (int si = 0; si < NSHAPES; si++) {
		const struct shape *s = &SHAPES[si];
		rng_state = 500 + si;
		struct op_case c = {.name = "layernorm",
				    .fn = op_layernorm,
				    .nin = 3,
				    .nout = 2};
		c.N = s->B * s->T, c.C = s->C;
		c.inn[0] = c.outn[0] = c.nloss = (size_t)c.N * c.C;
		c.inn[1] = c.inn[2] = (size_t)c.C;
		c.outn[1] = 2 * (size_t)c.N;
		c.in[0] = rnd(c.inn[0], 2.0);
		for (size_t i = 0; i < c.inn[0]; i++) /* offset rows */
			c.in[0][i] += 0.3 * (double)(i / (size_t)c.C);
		c.in[1] = rnd(c.C, 1), c.in[2] = rnd(c.C, 1);
		double *ref[2] = {zeros(c.outn[0]), zeros(c.outn[1])};
		for (int n = 0; n < c.N; n++) {
			const double *x = c.in[0] + (size_t)n * c.C;
			double m = 0, v = 0;
			for (int j = 0; j < c.C; j++)
				m += x[j] / c.C;
			for (int j = 0; j < c.C; j++)
				v += (x[j] - m) * (x[j] - m) / c.C;
			double rs = 1 / sqrt(v + 1e-5);
			for (int j = 0; j < c.C; j++)
				ref[0][(size_t)n * c.C + j] =
				    (x[j] - m) * rs * c.in[1][j] + c.in[2][j];
			ref[1][n] = m;
			ref[1][c.N + n] = rs;
		}
		check_case(&c, ref);
		free_all(ref, 2);
		free_case(&c);
	}
}

/* ---- attention ------------------------------------------------------------
 */

/* out0 = attention output (the loss), out1 = att probabilities. dqkv is
 * pre-filled with garbage: it must be overwritten. */
static void op_attention(struct backend *be, const struct op_case *c,
			 double *const *in, double *const *out, const double *R,
			 double *const *grad)
{
	struct pool pl = {be, {0}, 0};
	int B = c->B, T = c->T, C = c->C, H = c->H;
	void *qkv = pool_up(&pl, in[0], c->inn[0]);
	void *o = pool_new(&pl, c->outn[0], 0);
	void *att = pool_new(&pl, c->outn[1], -1);
	be_attention_forward(be, o, att, qkv, B, T, C, H);
	pool_down(&pl, out[0], o, c->outn[0]);
	pool_down(&pl, out[1], att, c->outn[1]);
	if (R) {
		void *dout = pool_up(&pl, R, c->nloss);
		void *dqkv = pool_new(&pl, c->inn[0], 77.0);
		void *scr = pool_new(&pl, c->outn[1], 55.0);
		be_attention_backward(be, dqkv, scr, dout, qkv, att, B, T, C,
				      H);
		pool_down(&pl, grad[0], dqkv, c->inn[0]);
	}
	pool_free(&pl);
}

static void naive_attention(double *out, double *att, const double *qkv, int B,
			    int T, int C, int H)
{
	int dh = C / H;
	double *p = zeros((size_t)T);
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int t = 0; t < T; t++) {
				const double *q =
				    qkv + ((size_t)b * T + t) * 3 * C + h * dh;
				double mx = -INFINITY, sum = 0;
				for (int s = 0; s <= t; s++) {
					const double *k =
					    qkv + ((size_t)b * T + s) * 3 * C +
					    C + h * dh;
					double d = 0;
					for (int i = 0; i < dh; i++)
						d += q[i] * k[i];
					p[s] = d / sqrt((double)dh);
					mx = fmax(mx, p[s]);
				}
				for (int s = 0; s <= t; s++)
					sum += p[s] = exp(p[s] - mx);
				double *arow =
				    att + (((size_t)b * H + h) * T + t) * T;
				for (int s = 0; s < T; s++)
					arow[s] = s <= t ? p[s] / sum : 0;
				double *o =
				    out + ((size_t)b * T + t) * C + h * dh;
				for (int i = 0; i < dh; i++) {
					double a = 0;
					for (int s = 0; s <= t; s++)
						a += arow[s] *
						     qkv[((size_t)b * T + s) *
							     3 * C +
							 2 * C + h * dh + i];
					o[i] = a;
				}
			}
	free(p);
}

Test(ops, attention)
{
	for (int si = 0; si < NSHAPES; si++) {
		const struct shape *s = &SHAPES[si];
		rng_state = 600 + si;
		struct op_case c = {.name = "attention",
				    .fn = op_attention,
				    .nin = 1,
				    .nout = 2};
		c.B = s->B, c.T = s->T, c.C = s->C, c.H = s->H;
		c.inn[0] = (size_t)c.B * c.T * 3 * c.C;
		c.outn[0] = c.nloss = (size_t)c.B * c.T * c.C;
		c.outn[1] = (size_t)c.B * c.H * c.T * c.T;
		/* scale 2: scores of O(1), softmax far from uniform */
		c.in[0] = rnd(c.inn[0], 2.0);
		double *ref[2] = {zeros(c.outn[0]), zeros(c.outn[1])};
		naive_attention(ref[0], ref[1], c.in[0], c.B, c.T, c.C, c.H);
		check_case(&c, ref);
		free_all(ref, 2);
		free_case(&c);
	}
}

/* ---- embeddings -----------------------------------------------------------
 */

/* wpe has Tmax = T + 2 rows (the last two get no gradient); dwte and dwpe
 * start at 0.5 (+=). */
static void op_embed(struct backend *be, const struct op_case *c,
		     double *const *in, double *const *out, const double *R,
		     double *const *grad)
{
	struct pool pl = {be, {0}, 0};
	int B = c->B, T = c->T, C = c->C;
	void *wte = pool_up(&pl, in[0], c->inn[0]);
	void *wpe = pool_up(&pl, in[1], c->inn[1]);
	int32_t *tok = pool_ints(&pl, c->ids, (size_t)B * T);
	void *o = pool_new(&pl, c->outn[0], 0);
	be_embed_forward(be, o, tok, wte, wpe, B, T, C);
	pool_down(&pl, out[0], o, c->outn[0]);
	if (R) {
		void *dout = pool_up(&pl, R, c->nloss);
		void *dwte = pool_new(&pl, c->inn[0], 0.5);
		void *dwpe = pool_new(&pl, c->inn[1], 0.5);
		be_embed_backward(be, dwte, dwpe, dout, tok, B, T, C, c->V);
		pool_down(&pl, grad[0], dwte, c->inn[0]);
		pool_down(&pl, grad[1], dwpe, c->inn[1]);
		for (int k = 0; k < 2; k++)
			for (size_t i = 0; i < c->inn[k]; i++)
				grad[k][i] -= 0.5;
	}
	pool_free(&pl);
}

Test(ops, embedding)
{
	for (int si = 0; si < NSHAPES; si++) {
		const struct shape *s = &SHAPES[si];
		rng_state = 700 + si;
		struct op_case c = {
		    .name = "embedding", .fn = op_embed, .nin = 2, .nout = 1};
		c.B = s->B, c.T = s->T, c.C = s->C, c.V = s->V;
		c.Tmax = c.T + 2;
		int32_t *tok = malloc((size_t)c.B * c.T * sizeof(int32_t));
		/* ids in [0, V/2): repeated tokens, unused rows */
		for (int i = 0; i < c.B * c.T; i++)
			tok[i] = (int32_t)((urand() + 1) * 0.25 * c.V) % c.V;
		tok[0] = tok[1] = c.V / 2 - 1;
		c.ids = tok;
		c.inn[0] = (size_t)c.V * c.C;
		c.inn[1] = (size_t)c.Tmax * c.C;
		c.outn[0] = c.nloss = (size_t)c.B * c.T * c.C;
		c.in[0] = rnd(c.inn[0], 1), c.in[1] = rnd(c.inn[1], 1);
		double *ref = zeros(c.outn[0]);
		for (int bt = 0; bt < c.B * c.T; bt++)
			for (int j = 0; j < c.C; j++)
				ref[(size_t)bt * c.C + j] =
				    c.in[0][(size_t)tok[bt] * c.C + j] +
				    c.in[1][(size_t)(bt % c.T) * c.C + j];
		check_case(&c, &ref);
		free(ref);
		free(tok);
		free_case(&c);
	}
}

/* ---- softmax cross-entropy ------------------------------------------------
 */

/* out0 = loss (1 element, the loss with weight R[0]), out1 = probs. probs
 * alias logits and dlogits alias probs, as the model uses them; the upstream
 * weight R[0] enters as xent_backward's scale R[0] / N. */
static void op_xent(struct backend *be, const struct op_case *c,
		    double *const *in, double *const *out, const double *R,
		    double *const *grad)
{
	struct pool pl = {be, {0}, 0};
	int N = c->N, V = c->V;
	void *l = pool_up(&pl, in[0], c->inn[0]);
	int32_t *tg = pool_ints(&pl, c->ids, (size_t)N);
	out[0][0] = be_xent_forward(be, l, l, tg, N, V);
	pool_down(&pl, out[1], l, c->outn[1]);
	if (R) {
		be_xent_backward(be, l, l, tg, N, V, R[0] / N);
		pool_down(&pl, grad[0], l, c->inn[0]);
	}
	pool_free(&pl);
}

Test(ops, xent)
{
	for (int si = 0; si < NSHAPES; si++) {
		const struct shape *s = &SHAPES[si];
		rng_state = 800 + si;
		struct op_case c = {
		    .name = "xent", .fn = op_xent, .nin = 1, .nout = 2};
		c.N = s->B * s->T, c.V = s->V;
		int32_t *tg = malloc((size_t)c.N * sizeof(int32_t));
		for (int i = 0; i < c.N; i++)
			tg[i] = (int32_t)((urand() + 1) * 0.5 * c.V) % c.V;
		c.ids = tg;
		c.inn[0] = c.outn[1] = (size_t)c.N * c.V;
		c.outn[0] = c.nloss = 1;
		c.in[0] = rnd(c.inn[0], 3.0);
		c.in[0][5] += 40; /* a large logit: needs max subtraction */
		double *ref[2] = {zeros(1), zeros(c.outn[1])};
		for (int n = 0; n < c.N; n++) {
			const double *l = c.in[0] + (size_t)n * c.V;
			double mx = -INFINITY, sum = 0;
			for (int j = 0; j < c.V; j++)
				mx = fmax(mx, l[j]);
			for (int j = 0; j < c.V; j++)
				sum += exp(l[j] - mx);
			for (int j = 0; j < c.V; j++)
				ref[1][(size_t)n * c.V + j] =
				    exp(l[j] - mx) / sum;
			ref[0][0] += (log(sum) + mx - l[tg[n]]) / c.N;
		}
		check_case(&c, ref);
		free_all(ref, 2);
		free(tg);
		free_case(&c);
	}
}
