/*
 * test_cuda_ops.c — the layer ops of the CUDA backend ("cuda", float32,
 * kernels/cuda/) against the CPU backends, run by `meson test --suite cuda`
 * with test_cuda_vec_ops.c (the other ops) and test_cuda.c (allocator,
 * timers, methods). Every test first creates the "cuda" backend; where that
 * fails because there is no GPU ("no CUDA device was found") or no CUDA in
 * this build, the test is skipped with that message (test_cuda_util.h), so
 * machines without a GPU pass.
 *
 * Every layer op of struct backend_ops on the same random inputs on "cuda",
 * "cpu" and "cpu64", forward and backward, at odd shapes (B=3 T=5 C=12 H=3
 * F=20 V=17), powers of two (B=2 T=8 C=16 H=4 F=64 V=32), a model-sized one
 * (B=4 T=64 C=128 H=4 F=512 V=1000), two that exercise the attention
 * tiling (T=77: three 32-row tiles, dh=48: two head-dimension chunks;
 * T=100, dh=128) and one the batched-GEMM attention (T=131 >= 128, B=3,
 * H=3), compared by normalised mean squared error against both CPU
 * backends, plus NaN/inf checks; aliasing (in-place activation,
 * LayerNorm dx = dy, probs = logits = dlogits), += outputs pre-filled,
 * overwritten outputs pre-filled with garbage; the fused layer ops also
 * against the unfused ones on the GPU (test_fused.h); GEMM with padded row
 * strides (padding untouched), TF32 on and off. The bf16 ops are in
 * test_cuda_bf16.c.
 *
 * Tolerance. NMSE_TOL 1e-9 for single ops: both sides compute in float32
 * with different summation orders (cuBLAS vs OpenBLAS blocking, warp trees
 * vs sequential loops) and a few float-vs-double intermediates (expf,
 * erff on the GPU; the CPU rounds double results). Each rounding is 2^-24
 * ≈ 6e-8 relative; a dot product of K ≤ 1000 terms accumulates ~√K of them
 * in rms, ~2e-6 relative at worst, so NMSE ≲ 4e-12 against cpu64 and
 * about twice that against cpu. 1e-9 leaves a 100x margin, while one wrong
 * element of O(1) among ≤ 4·10⁵ gives NMSE ≥ 2.5e-6 and a wrong formula
 * O(1).
 */
#include "test_cuda_util.h"
#include "test_fused.h"
#include "test_ops_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMSE_TOL 1e-9
/* outputs one op run may collect: run_fused has the most, 11 (3 for each
 * activation, 2 of the LayerNorm forward, 3 of its backward) */
#define MAXO 16

/* ---- ops on three backends ------------------------------------------------
 */

struct shape {
	int B, T, C, H, F, V;
	const char *name;
};

static const struct shape SHAPES[] = {
    {3, 5, 12, 3, 20, 17, "odd"},
    {2, 8, 16, 4, 64, 32, "pow2"},
    {4, 64, 128, 4, 512, 1000, "large"},
    {2, 77, 96, 2, 40, 300, "tiles"}, /* dh = 48 */
    {1, 100, 256, 2, 64, 50, "dh128"},
    /* T >= 128: the batched-GEMM attention, several (b, h) pairs */
    {3, 131, 96, 3, 40, 50, "gemm"},
};
#define NSHAPES (int)(sizeof(SHAPES) / sizeof(SHAPES[0]))

/* Host copies of the outputs of one run. */
struct outs {
	int n;
	const char *name[MAXO];
	double *v[MAXO];
	size_t len[MAXO];
};

static void outs_add(struct outs *o, struct pool *pl, const char *name,
		     const void *dev, size_t n)
{
	cr_assert_lt(o->n, MAXO);
	double *h = zeros(n);
	be_download(pl->be, h, dev, n);
	o->name[o->n] = name;
	o->v[o->n] = h;
	o->len[o->n] = n;
	o->n++;
}

static void outs_free(struct outs *o)
{
	for (int i = 0; i < o->n; i++)
		free(o->v[i]);
	o->n = 0;
}

/* One op (forward and backward) on backend be at shape s; inputs come from
 * rng_state, which compare_op sets to the same seed for every backend. */
typedef void (*op_run)(struct pool *pl, const struct shape *s, struct outs *o);

static void compare_op(const char *op, op_run run, uint64_t seed)
{
	struct backend *cu = cuda_or_skip();
	struct backend *c32 = make("cpu", 0), *c64 = make("cpu64", 0);
	for (int si = 0; si < NSHAPES; si++) {
		const struct shape *s = &SHAPES[si];
		struct outs a = {0}, b = {0}, r = {0};
		struct pool pc = {cu, {0}, 0}, p32 = {c32, {0}, 0},
			    p64 = {c64, {0}, 0};
		rng_state = seed + (uint64_t)si;
		run(&pc, s, &b);
		rng_state = seed + (uint64_t)si;
		run(&p32, s, &a);
		rng_state = seed + (uint64_t)si;
		run(&p64, s, &r);
		cr_assert_eq(a.n, b.n);
		for (int k = 0; k < b.n; k++) {
			char what[128];
			snprintf(what, sizeof(what), "%s %s %s (cuda)", op,
				 s->name, b.name[k]);
			assert_finite(b.v[k], b.len[k], what);
			double e64 = nmse(b.v[k], r.v[k], b.len[k]);
			double e32 = nmse(b.v[k], a.v[k], b.len[k]);
			cr_assert_lt(e64, NMSE_TOL,
				     "%s: NMSE vs cpu64 %g (vs cpu %g)", what,
				     e64, e32);
			cr_assert_lt(e32, NMSE_TOL, "%s: NMSE vs cpu %g", what,
				     e32);
		}
		outs_free(&a);
		outs_free(&b);
		outs_free(&r);
	}
	backend_destroy(cu);
	backend_destroy(c32);
	backend_destroy(c64);
}

/* ---- gemm: C(M,N) with M = B*T, N = F, K = C, every transpose, two
 * (alpha, beta) pairs; row strides are the natural ones. */
static void run_gemm(struct pool *pl, const struct shape *s, struct outs *o)
{
	static const char *names[8] = {"nn a1b0",    "tn a1b0",	   "nt a1b0",
				       "tt a1b0",    "nn a.7b-.4", "tn a.7b-.4",
				       "nt a.7b-.4", "tt a.7b-.4"};
	int M = s->B * s->T, N = s->F, K = s->C;
	size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
	double *A = rnd(na, 1), *B = rnd(nb, 1), *C = rnd(nc, 1);
	void *dA = pool_up(pl, A, na), *dB = pool_up(pl, B, nb);
	for (int v = 0; v < 8; v++) {
		int ta = v & 1, tb = (v >> 1) & 1;
		double al = v < 4 ? 1.0 : 0.7, be = v < 4 ? 0.0 : -0.4;
		/* beta = 0: C starts as NaN garbage that must not be read */
		void *dC = v < 4 ? pool_new(pl, nc, NAN) : pool_up(pl, C, nc);
		be_gemm(pl->be, ta, tb, M, N, K, al, dA, ta ? M : K, dB,
			tb ? K : N, be, dC, N);
		outs_add(o, pl, names[v], dC, nc);
	}
	pool_free(pl);
	free(A), free(B), free(C);
}

Test(cuda_ops, gemm, .timeout = 300)
{
	compare_op("gemm", run_gemm, 100);
}

/* ---- bias over (N = B*T, C = V) columns: forward y = x + b, backward
 * db += Σ rows (db starts at 0.25). Wide C exercises the column groups,
 * large N the multi-slab reduction. */
static void run_bias(struct pool *pl, const struct shape *s, struct outs *o)
{
	int N = s->B * s->T, C = s->V;
	size_t n = (size_t)N * C;
	double *x = rnd(n, 1), *b = rnd((size_t)C, 1), *dy = rnd(n, 1);
	void *dx = pool_up(pl, x, n), *db = pool_up(pl, b, (size_t)C);
	void *ddy = pool_up(pl, dy, n), *dgb = pool_new(pl, (size_t)C, 0.25);
	be_bias_forward(pl->be, dx, db, N, C);
	be_bias_backward(pl->be, dgb, ddy, N, C);
	outs_add(o, pl, "y", dx, n);
	outs_add(o, pl, "db", dgb, (size_t)C);
	pool_free(pl);
	free(x), free(b), free(dy);
}

Test(cuda_ops, bias, .timeout = 300)
{
	compare_op("bias", run_bias, 200);
}

/* ---- activations in place (y = x) and their backward in place
 * (dx = dy), on B*T*F elements; mul. */
static void run_act(struct pool *pl, const struct shape *s, struct outs *o)
{
	static const char *fn[4] = {"relu", "gelu", "tanh", "sigmoid"};
	static const char *bn[4] = {"relu'", "gelu'", "tanh'", "sigmoid'"};
	size_t n = (size_t)s->B * s->T * s->F;
	double *x = rnd(n, 3), *g = rnd(n, 1), *w = rnd(n, 1);
	for (int a = ACT_RELU; a <= ACT_SIGMOID; a++) {
		void *dx = pool_up(pl, x, n), *y = pool_up(pl, x, n);
		void *dg = pool_up(pl, g, n);
		be_act_forward(pl->be, (enum act_kind)a, y, y, n);
		outs_add(o, pl, fn[a], y, n);
		int uses_x = a == ACT_GELU;
		be_act_backward(pl->be, (enum act_kind)a, dg, dg,
				uses_x ? dx : NULL, uses_x ? NULL : y, n);
		outs_add(o, pl, bn[a], dg, n);
	}
	void *da = pool_up(pl, x, n), *dw = pool_up(pl, w, n);
	void *dm = pool_new(pl, n, NAN);
	be_mul(pl->be, dm, da, dw, n);
	outs_add(o, pl, "mul", dm, n);
	pool_free(pl);
	free(x), free(g), free(w);
}

Test(cuda_ops, activations_mul, .timeout = 300)
{
	compare_op("act", run_act, 300);
}

/* ---- layernorm over (B*T, C): y, mean | rstd; backward with dx
 * pre-filled with garbage, dw and db with 0.5 (+=); and again in place
 * (dx = dy). */
static void run_layernorm(struct pool *pl, const struct shape *s,
			  struct outs *o)
{
	int N = s->B * s->T, C = s->C;
	size_t n = (size_t)N * C;
	double *x = rnd(n, 2), *w = rnd((size_t)C, 1), *b = rnd((size_t)C, 1);
	double *dy = rnd(n, 1);
	for (size_t i = 0; i < n; i++) /* row offsets: mean far from 0 */
		x[i] += 0.3 * (double)(i / (size_t)C);
	void *dx_in = pool_up(pl, x, n), *dw_ = pool_up(pl, w, (size_t)C);
	void *db_ = pool_up(pl, b, (size_t)C), *y = pool_new(pl, n, NAN);
	void *mr = pool_new(pl, 2 * (size_t)N, NAN);
	void *rs = dq_at(pl->be, mr, (size_t)N);
	be_layernorm_forward(pl->be, y, mr, rs, dx_in, dw_, db_, N, C);
	outs_add(o, pl, "y", y, n);
	outs_add(o, pl, "mean|rstd", mr, 2 * (size_t)N);
	void *ddy = pool_up(pl, dy, n), *gx = pool_new(pl, n, 123.0);
	void *gw = pool_new(pl, (size_t)C, 0.5),
	     *gb = pool_new(pl, (size_t)C, 0.5);
	be_layernorm_backward(pl->be, gx, gw, gb, ddy, dx_in, mr, rs, dw_, N,
			      C);
	outs_add(o, pl, "dx", gx, n);
	outs_add(o, pl, "dw", gw, (size_t)C);
	outs_add(o, pl, "db", gb, (size_t)C);
	be_layernorm_backward(pl->be, ddy, gw, gb, ddy, dx_in, mr, rs, dw_, N,
			      C);
	outs_add(o, pl, "dx (in place)", ddy, n);
	outs_add(o, pl, "dw twice", gw, (size_t)C);
	pool_free(pl);
	free(x), free(w), free(b), free(dy);
}

Test(cuda_ops, layernorm, .timeout = 300)
{
	compare_op("layernorm", run_layernorm, 500);
}

/* ---- the fused layer ops over (B*T, F) and (B*T, C): relu and tanh with
 * their bias (forward in place, backward with db += and in place); the
 * residual LayerNorm forward (x is rewritten with x + res + bias) and its
 * backward with dres and dbias. */
static void run_fused(struct pool *pl, const struct shape *s, struct outs *o)
{
	int N = s->B * s->T, F = s->F, C = s->C;
	size_t nf = (size_t)N * F, n = (size_t)N * C;
	size_t nx = nf > n ? nf : n;
	size_t np = (size_t)(F > 3 * C ? F : 3 * C); /* b1 | bias, w, b */
	double *x = rnd(nx, 2), *g = rnd(nx, 1), *p = rnd(np, 1);
	void *dp = pool_up(pl, p, np);
	for (int a = ACT_RELU; a <= ACT_TANH; a += ACT_TANH - ACT_RELU) {
		void *y = pool_up(pl, x, nf), *dg = pool_up(pl, g, nf);
		void *db = pool_new(pl, (size_t)F, 0.25);
		be_bias_act_forward(pl->be, (enum act_kind)a, y, dp, N, F);
		outs_add(o, pl, a == ACT_RELU ? "relu(y+b)" : "tanh(y+b)", y,
			 nf);
		be_act_bias_backward(pl->be, (enum act_kind)a, dg, dg, y, db, N,
				     F);
		outs_add(o, pl, "dx", dg, nf);
		outs_add(o, pl, "db", db, (size_t)F);
	}
	/* LayerNorm over the first n entries of x; res from g */
	void *dx_in = pool_up(pl, x, n), *res = pool_up(pl, g, n);
	void *y = pool_new(pl, n, NAN), *mr = pool_new(pl, 2 * (size_t)N, NAN);
	void *rs = dq_at(pl->be, mr, (size_t)N);
	void *w = dq_at(pl->be, dp, (size_t)C),
	     *b = dq_at(pl->be, dp, 2 * (size_t)C);
	be_residual_layernorm_forward(pl->be, y, mr, rs, dx_in, res, dp, w, b,
				      N, C);
	outs_add(o, pl, "x+res+bias", dx_in, n);
	outs_add(o, pl, "LN(x+res+bias)", y, n);
	void *ddy = pool_up(pl, x, n), *gx = pool_new(pl, n, 77.0);
	void *dres = pool_new(pl, n, 77.0);
	void *gp = pool_new(pl, 3 * (size_t)C, 0.5); /* dbias | dw | db */
	be_residual_layernorm_backward(
	    pl->be, gx, dres, gp, dq_at(pl->be, gp, (size_t)C),
	    dq_at(pl->be, gp, 2 * (size_t)C), ddy, dx_in, mr, rs, w, N, C);
	outs_add(o, pl, "dx", gx, n);
	outs_add(o, pl, "dres", dres, n);
	outs_add(o, pl, "dbias | dw | db", gp, 3 * (size_t)C);
	pool_free(pl);
	free(x), free(g), free(p);
}

Test(cuda_ops, fused, .timeout = 300)
{
	compare_op("fused", run_fused, 550);
}

/* The fused ops against the unfused ones on the GPU (test_fused.h). Both
 * sides do each element's float arithmetic in the same order, so they
 * agree to the last bit but for contraction into FMAs: 1e-6. */
Test(cuda_ops, fused_vs_unfused, .timeout = 120)
{
	struct backend *be = cuda_or_skip();
	rng_state = 901;
	check_fused_ops(be, "cuda", 0, 1e-6);
	backend_destroy(be);
}

/* ---- attention: out, att (pre-filled with -1: every entry must be
 * written), dqkv (pre-filled 77: overwritten), scratch pre-filled 55. */
static void run_attention(struct pool *pl, const struct shape *s,
			  struct outs *o)
{
	int B = s->B, T = s->T, C = s->C, H = s->H;
	size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C,
	       natt = (size_t)B * H * T * T;
	double *qkv = rnd(nqkv, 2.0), *dout = rnd(nout, 1.0);
	void *dq = pool_up(pl, qkv, nqkv), *out = pool_new(pl, nout, NAN);
	void *att = pool_new(pl, natt, -1.0);
	be_attention_forward(pl->be, out, att, dq, B, T, C, H);
	outs_add(o, pl, "out", out, nout);
	outs_add(o, pl, "att", att, natt);
	void *dd = pool_up(pl, dout, nout), *dqkv = pool_new(pl, nqkv, 77.0);
	void *scr = pool_new(pl, natt, 55.0);
	be_attention_backward(pl->be, dqkv, scr, dd, dq, att, B, T, C, H);
	outs_add(o, pl, "dqkv", dqkv, nqkv);
	pool_free(pl);
	free(qkv), free(dout);
}

Test(cuda_ops, attention, .timeout = 300)
{
	compare_op("attention", run_attention, 600);
}

/* Exact zeros above the diagonal and rows summing to 1, on cuda alone, for
 * the tiled kernels (T 77) and the batched-GEMM path (T 130). */
static void check_attention_mask(struct backend *be, int B, int T, int C, int H)
{
	size_t nqkv = (size_t)B * T * 3 * C, natt = (size_t)B * H * T * T;
	struct pool pl = {be, {0}, 0};
	rng_state = 650;
	double *qkv = rnd(nqkv, 3.0), *att = zeros(natt);
	void *dq = pool_up(&pl, qkv, nqkv);
	void *out = pool_new(&pl, (size_t)B * T * C, 0);
	void *da = pool_new(&pl, natt, -1.0);
	be_attention_forward(be, out, da, dq, B, T, C, H);
	be_download(be, att, da, natt);
	for (int bh = 0; bh < B * H; bh++)
		for (int t = 0; t < T; t++) {
			const double *row = att + ((size_t)bh * T + t) * T;
			double sum = 0;
			for (int s = 0; s < T; s++) {
				if (s > t)
					cr_assert_eq(row[s], 0.0,
						     "att[%d][%d][%d] = %g", bh,
						     t, s, row[s]);
				else
					cr_assert(row[s] >= 0 && row[s] <= 1);
				sum += row[s];
			}
			/* T float roundings of ≤ 2^-24 each */
			cr_assert(fabs(sum - 1) < 1e-5, "row sum %.9g", sum);
		}
	pool_free(&pl);
	free(qkv), free(att);
}

Test(cuda_ops, attention_mask)
{
	struct backend *be = cuda_or_skip();
	check_attention_mask(be, 2, 77, 96, 2);
	check_attention_mask(be, 2, 130, 96, 2);
	backend_destroy(be);
}

/* ---- embeddings: tokens in [0, V/2) with repeats (the atomic scatter),
 * wpe with T + 2 rows; dwte and dwpe start at 0.5 (+=). */
static void run_embed(struct pool *pl, const struct shape *s, struct outs *o)
{
	int B = s->B, T = s->T, C = s->C, V = s->V, BT = B * T;
	size_t nte = (size_t)V * C, npe = (size_t)(T + 2) * C,
	       nout = (size_t)BT * C;
	int32_t *tok = malloc((size_t)BT * sizeof(int32_t));
	cr_assert_not_null(tok);
	for (int i = 0; i < BT; i++)
		tok[i] = (int32_t)((urand() + 1) * 0.25 * V) % V;
	tok[0] = tok[BT - 1] = V / 2 - 1;
	double *wte = rnd(nte, 1), *wpe = rnd(npe, 1), *g = rnd(nout, 1);
	void *dte = pool_up(pl, wte, nte), *dpe = pool_up(pl, wpe, npe);
	int32_t *dt = pool_ints(pl, tok, (size_t)BT);
	void *out = pool_new(pl, nout, NAN);
	be_embed_forward(pl->be, out, dt, dte, dpe, B, T, C);
	outs_add(o, pl, "out", out, nout);
	void *dg = pool_up(pl, g, nout);
	void *gte = pool_new(pl, nte, 0.5), *gpe = pool_new(pl, npe, 0.5);
	be_embed_backward(pl->be, gte, gpe, dg, dt, B, T, C, V);
	outs_add(o, pl, "dwte", gte, nte);
	outs_add(o, pl, "dwpe", gpe, npe);
	pool_free(pl);
	free(tok), free(wte), free(wpe), free(g);
}

Test(cuda_ops, embedding, .timeout = 300)
{
	compare_op("embedding", run_embed, 700);
}

/* ---- softmax cross-entropy over (B*T, V): loss, probs in place of the
 * logits, dlogits in place of the probs with scale 0.37 / N. */
static void run_xent(struct pool *pl, const struct shape *s, struct outs *o)
{
	int N = s->B * s->T, V = s->V;
	size_t n = (size_t)N * V;
	int32_t *tg = malloc((size_t)N * sizeof(int32_t));
	cr_assert_not_null(tg);
	for (int i = 0; i < N; i++)
		tg[i] = (int32_t)((urand() + 1) * 0.5 * V) % V;
	double *l = rnd(n, 3.0);
	l[5] += 40; /* needs the max subtraction */
	void *dl = pool_up(pl, l, n);
	int32_t *dt = pool_ints(pl, tg, (size_t)N);
	double loss = be_xent_forward(pl->be, dl, dl, dt, N, V);
	void *dloss = pool_new(pl, 1, 0);
	be_upload(pl->be, dloss, &loss, 1);
	outs_add(o, pl, "loss", dloss, 1);
	outs_add(o, pl, "probs", dl, n);
	be_xent_backward(pl->be, dl, dl, dt, N, V, 0.37 / N);
	outs_add(o, pl, "dlogits", dl, n);
	pool_free(pl);
	free(tg), free(l);
}

Test(cuda_ops, xent, .timeout = 300)
{
	compare_op("xent", run_xent, 800);
}

/* ---- gemm with padded row strides: the padding stays as uploaded ---- */

Test(cuda_ops, gemm_strided)
{
	struct backend *be = cuda_or_skip();
	int M = 37, N = 21, K = 45;
	for (int tr = 0; tr < 4; tr++) {
		int ta = tr & 1, tb = tr >> 1;
		int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 4;
		size_t na = (size_t)(ta ? K : M) * lda,
		       nb = (size_t)(tb ? N : K) * ldb, nc = (size_t)M * ldc;
		rng_state = 7 + tr;
		double *A = rnd(na, 1), *B = rnd(nb, 1), *C = rnd(nc, 1);
		struct pool pl = {be, {0}, 0};
		void *dA = pool_up(&pl, A, na), *dB = pool_up(&pl, B, nb),
		     *dC = pool_up(&pl, C, nc);
		/* the float values the device holds */
		be_download(be, A, dA, na);
		be_download(be, B, dB, nb);
		be_download(be, C, dC, nc);
		double *ref = zeros(nc), *got = zeros(nc);
		memcpy(ref, C, nc * sizeof(double));
		naive_gemm(ref, ldc, ta, tb, M, N, K, 1.3, A, lda, B, ldb, 0.5);
		be_gemm(be, ta, tb, M, N, K, 1.3, dA, lda, dB, ldb, 0.5, dC,
			ldc);
		be_download(be, got, dC, nc);
		for (int m = 0; m < M; m++)
			for (int n = 0; n < ldc; n++) {
				size_t i = (size_t)m * ldc + n;
				if (n >= N) {
					cr_assert_eq(got[i], C[i],
						     "padding [%d][%d] written",
						     m, n);
					continue;
				}
				/* K = 45 float products summed in float:
				 * ≤ 45 · 2^-24 Σ|a b| ≲ 3e-6 · 45 */
				cr_assert(fabs(got[i] - ref[i]) <= 1e-4,
					  "ta=%d tb=%d C[%d][%d] %.9g vs %.9g",
					  ta, tb, m, n, got[i], ref[i]);
			}
		pool_free(&pl);
		free(A), free(B), free(C), free(ref), free(got);
	}
	backend_destroy(be);
}

/* TF32 tensor-core GEMM: inputs rounded to a 10-bit mantissa (relative
 * 2^-11 ≈ 5e-4), so C has NMSE ~ (5e-4)² ≈ 2.5e-7 against FP32; 1e-5 is a
 * 40x margin. Switching back gives exact FP32 again (NMSE_TOL). */
Test(cuda_ops, tf32_switch)
{
	struct backend *be = cuda_or_skip();
	struct backend *c64 = make("cpu64", 0);
	cr_assert(be_has_device(be));
	cr_assert(!be_has_device(c64));
	int M = 256, N = 192, K = 512;
	size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
	rng_state = 31;
	double *A = rnd(na, 1), *B = rnd(nb, 1);
	double *ref = zeros(nc), *got = zeros(nc);
	struct pool p64 = {c64, {0}, 0}, pc = {be, {0}, 0};
	void *a64 = pool_up(&p64, A, na), *b64 = pool_up(&p64, B, nb),
	     *r64 = pool_new(&p64, nc, 0);
	be_gemm(c64, 0, 0, M, N, K, 1, a64, K, b64, N, 0, r64, N);
	be_download(c64, ref, r64, nc);
	void *da = pool_up(&pc, A, na), *db = pool_up(&pc, B, nb),
	     *dc = pool_new(&pc, nc, 0);
	for (int mode = 1; mode >= 0; mode--) {
		be_set_tf32(be, mode);
		be_gemm(be, 0, 0, M, N, K, 1, da, K, db, N, 0, dc, N);
		be_download(be, got, dc, nc);
		double e = nmse(got, ref, nc);
		cr_assert_lt(e, mode ? 1e-5 : NMSE_TOL, "tf32=%d: NMSE %g",
			     mode, e);
	}
	pool_free(&p64);
	pool_free(&pc);
	backend_destroy(be);
	backend_destroy(c64);
	free(A), free(B), free(ref), free(got);
}
