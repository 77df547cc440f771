/*
 * test_cuda_bf16.c — the bf16 mixed-precision ops of the CUDA backend
 * (kernels/cuda/cuda_bf16.cu) against the rounding rule and the cpu
 * backend, run by `meson test --suite cuda` (skipped without a GPU, as
 * test_cuda_ops.c's tests are): to_bf16, from_bf16, round_bf16 bit for
 * bit; gemm_bf16 against the cpu backend's and a double loop over the
 * rounded operands (tolerance at its test); the bf16 attention and the
 * fused attention of attention=flash (kernels/cuda/cuda_attention.cu,
 * cuda_flash.cu) and gemm_bias_act (cuda_epilogue.cu) against the cpu
 * backend's.
 */
#include "../kernels/bf16.h"
#include "test_cuda_util.h"
#include "test_ops_util.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bf16 mixed precision: to_bf16, from_bf16, round_bf16 bit for bit
 * against the rounding rule of backend.h and the cpu backend; gemm_bf16
 * against the cpu backend's and a double loop over the rounded operands.
 * ---- */

/* bf16 bits of the float with bits b: backend.h's rule (nan stays a quiet
 * nan, else round to nearest even, overflow to inf), written out here so
 * that the test does not lean on either backend. */
static uint16_t ref_bf16(uint32_t b)
{
	if ((b & 0x7FFFFFFFu) > 0x7F800000u)
		return (uint16_t)((b >> 16) | 0x40u);
	b += 0x7FFFu + ((b >> 16) & 1u);
	return (uint16_t)(b >> 16);
}

/* bytes of device memory on pl's backend, uploaded from h when h; freed
 * with the pool. */
static void *pool_bytes(struct pool *pl, const void *h, size_t bytes)
{
	cr_assert_lt(pl->n, POOL_MAX);
	void *p = backend_alloc_bytes(pl->be, bytes, MEM_WORKSPACE);
	cr_assert_not_null(p);
	if (h && bytes)
		be_upload_bytes(pl->be, p, h, bytes);
	return pl->p[pl->n++] = p;
}

/* The float32 inputs of the conversion tests: ties (even below and odd
 * below, both signs), values one float ulp off a tie, zeros, subnormals
 * (ties, the largest, rounding up into the normals), ±inf, quiet and
 * signalling nans with payloads in either half, the largest bf16, values
 * past it (a tie that rounds up to inf, FLT_MAX), then random bit patterns
 * (every class) and random values of moderate size. */
static const uint32_t BF16_SPECIAL[] = {
    0x3F808000u, 0x3F818000u, 0xBF808000u, 0xBF818000u, /* ties */
    0x3F808001u, 0x3F807FFFu, 0xBF818001u, 0xBF817FFFu, /* near ties */
    0x00000000u, 0x80000000u,				/* ±0 */
    0x00000001u, 0x00008000u, 0x00018000u, 0x0000FFFFu, /* subnormals */
    0x80008000u, 0x80018000u, 0x807FFFFFu, 0x007FFFFFu,
    0x007F8000u, 0x00408000u, 0x7F800000u, 0xFF800000u, /* ±inf */
    0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, /* nans */
    0x7F80FFFFu, 0x7FBF0000u, 0xFF812345u, 0x7FFFFFFFu,
    0x7F7F0000u, 0xFF7F0000u, /* the largest bf16 */
    0x7F7F7FFFu, 0x7F7F8000u, 0xFF7F8000u, 0x7F7FFFFFu,
    0xFF7FFFFFu, 0x7F7FC000u, 0x3F800000u, 0x40490FDBu, /* 1, pi */
};
#define N_SPECIAL (sizeof(BF16_SPECIAL) / sizeof(BF16_SPECIAL[0]))
#define N_BF16_IN (N_SPECIAL + 8192)

static float *bf16_inputs(void)
{
	float *x = malloc(N_BF16_IN * sizeof(float));
	cr_assert_not_null(x);
	rng_state = 4242;
	for (size_t i = 0; i < N_BF16_IN; i++) {
		if (i < N_SPECIAL)
			x[i] = dq_f32_of(BF16_SPECIAL[i]);
		else if (i < N_SPECIAL + 4096)
			x[i] = dq_f32_of((uint32_t)splitmix64(&rng_state));
		else
			x[i] = (float)(urand() * 1000.0);
	}
	return x;
}

Test(cuda_bf16, bf16_to)
{
	struct backend *cu = cuda_or_skip();
	struct backend *c32 = make("cpu", 0);
	const size_t n = N_BF16_IN;
	float *x = bf16_inputs();
	uint16_t *got = calloc(n, sizeof(uint16_t)),
		 *cpu = calloc(n, sizeof(uint16_t));
	cr_assert(got && cpu);
	struct pool pc = {cu, {0}, 0}, p32 = {c32, {0}, 0};
	void *dx = pool_bytes(&pc, x, n * sizeof(float));
	uint16_t *dh = (uint16_t *)pool_bytes(&pc, NULL, n * sizeof(uint16_t));
	be_to_bf16(cu, dh, dx, n);
	be_download_bytes(cu, got, dh, n * sizeof(uint16_t));
	void *hx = pool_bytes(&p32, x, n * sizeof(float));
	uint16_t *hh = (uint16_t *)pool_bytes(&p32, NULL, n * sizeof(uint16_t));
	be_to_bf16(c32, hh, hx, n);
	be_download_bytes(c32, cpu, hh, n * sizeof(uint16_t));
	for (size_t i = 0; i < n; i++) {
		uint32_t b = dq_f32_bits(x[i]);
		cr_assert_eq(got[i], ref_bf16(b),
			     "to_bf16(%08x) [%zu]: cuda %04x, rule %04x", b, i,
			     got[i], ref_bf16(b));
		cr_assert_eq(got[i], cpu[i],
			     "to_bf16(%08x) [%zu]: cuda %04x, cpu %04x", b, i,
			     got[i], cpu[i]);
	}
	pool_free(&pc);
	pool_free(&p32);
	backend_destroy(cu);
	backend_destroy(c32);
	free(x), free(got), free(cpu);
}

/* from_bf16 of all 2^16 patterns is the exact widening (bits << 16), nans
 * and subnormals included. round_bf16 in place gives the bits of
 * from_bf16(to_bf16(x)) and of the rule, and the cpu backend's. */
Test(cuda_bf16, bf16_from_round)
{
	struct backend *cu = cuda_or_skip();
	struct backend *c32 = make("cpu", 0);
	const size_t nh = 65536, n = N_BF16_IN;
	uint16_t *h = malloc(nh * sizeof(uint16_t));
	float *w = calloc(nh, sizeof(float));
	cr_assert(h && w);
	for (size_t i = 0; i < nh; i++)
		h[i] = (uint16_t)i;
	struct pool pc = {cu, {0}, 0}, p32 = {c32, {0}, 0};
	uint16_t *dh = (uint16_t *)pool_bytes(&pc, h, nh * sizeof(uint16_t));
	void *dw = pool_bytes(&pc, NULL, nh * sizeof(float));
	be_from_bf16(cu, dw, dh, nh);
	be_download_bytes(cu, w, dw, nh * sizeof(float));
	for (size_t i = 0; i < nh; i++)
		cr_assert_eq(dq_f32_bits(w[i]), (uint32_t)i << 16,
			     "from_bf16(%04zx): %08x", i, dq_f32_bits(w[i]));

	float *x = bf16_inputs();
	float *r = calloc(n, sizeof(float)), *rt = calloc(n, sizeof(float)),
	      *rc = calloc(n, sizeof(float));
	cr_assert(r && rt && rc);
	void *dx = pool_bytes(&pc, x, n * sizeof(float));
	void *dy = pool_bytes(&pc, NULL, n * sizeof(float));
	uint16_t *dt = (uint16_t *)pool_bytes(&pc, NULL, n * sizeof(uint16_t));
	be_to_bf16(cu, dt, dx, n);
	be_from_bf16(cu, dy, dt, n);
	be_download_bytes(cu, rt, dy, n * sizeof(float));
	be_round_bf16(cu, dx, n);
	be_download_bytes(cu, r, dx, n * sizeof(float));
	void *hx = pool_bytes(&p32, x, n * sizeof(float));
	be_round_bf16(c32, hx, n);
	be_download_bytes(c32, rc, hx, n * sizeof(float));
	for (size_t i = 0; i < n; i++) {
		uint32_t b = dq_f32_bits(x[i]), want = (uint32_t)ref_bf16(b)
						       << 16;
		cr_assert_eq(dq_f32_bits(r[i]), want,
			     "round_bf16(%08x): cuda %08x, rule %08x", b,
			     dq_f32_bits(r[i]), want);
		cr_assert_eq(dq_f32_bits(r[i]), dq_f32_bits(rt[i]),
			     "round_bf16(%08x): %08x, from(to(x)) %08x", b,
			     dq_f32_bits(r[i]), dq_f32_bits(rt[i]));
		cr_assert_eq(dq_f32_bits(r[i]), dq_f32_bits(rc[i]),
			     "round_bf16(%08x): cuda %08x, cpu %08x", b,
			     dq_f32_bits(r[i]), dq_f32_bits(rc[i]));
	}
	pool_free(&pc);
	pool_free(&p32);
	backend_destroy(cu);
	backend_destroy(c32);
	free(h), free(w), free(x), free(r), free(rt), free(rc);
}

/* The double value of bf16(float(v)). */
static double bf16_of(double v)
{
	return (double)dq_f32_of((uint32_t)ref_bf16(dq_f32_bits((float)v))
				 << 16);
}

/* gemm_bf16 with every transpose, padded row strides (the padding of C
 * stays as uploaded), alpha 0.5, beta 1 and 0, at (M,N,K) = (37,29,53)
 * (odd: M K odd puts B's bf16 copy at a 2-byte offset) and (64,48,96), and
 * K = 0 (C = beta C). Against the cpu backend's gemm_bf16 and a double loop
 * over the rounded operands: a product of two bf16 numbers is exact in
 * float32, so the backends differ only in the order of K float sums, each
 * rounding ≤ 2^-24 of the partial sum: |error| ≤ K 2^-24 Σ|a b| ≈ 3e-6
 * Σ|a b| at K = 53; 1e-5 of the scale |alpha| Σ|a||b| + |beta C| covers it,
 * and one operand left unrounded (relative 2^-9) does not pass. */
static void check_gemm_bf16(struct backend *cu, struct backend *c32, int M,
			    int N, int K, int ta, int tb, double beta)
{
	const double alpha = 0.5;
	int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 2, ldc = N + 4;
	size_t na = (size_t)(ta ? K : M) * lda, nb = (size_t)(tb ? N : K) * ldb,
	       nc = (size_t)M * ldc;
	double *A = rnd(na ? na : 1, 1), *B = rnd(nb ? nb : 1, 1),
	       *C = rnd(nc, 1);
	double *got = zeros(nc), *cpu = zeros(nc), *ref = zeros(nc);
	double *Ar = zeros(na ? na : 1), *Br = zeros(nb ? nb : 1);
	struct pool pc = {cu, {0}, 0}, p32 = {c32, {0}, 0};
	void *dA = pool_up(&pc, A, na), *dB = pool_up(&pc, B, nb),
	     *dC = pool_up(&pc, C, nc);
	void *ds =
	    pool_bytes(&pc, NULL, be_gemm_bf16_scratch_bytes(cu, M, N, K));
	void *hA = pool_up(&p32, A, na), *hB = pool_up(&p32, B, nb),
	     *hC = pool_up(&p32, C, nc);
	void *hs =
	    pool_bytes(&p32, NULL, be_gemm_bf16_scratch_bytes(c32, M, N, K));
	/* the float values both backends hold */
	be_download(cu, C, dC, nc);
	for (size_t i = 0; i < na; i++)
		Ar[i] = bf16_of(A[i]);
	for (size_t i = 0; i < nb; i++)
		Br[i] = bf16_of(B[i]);
	memcpy(ref, C, nc * sizeof(double));
	naive_gemm(ref, ldc, ta, tb, M, N, K, alpha, Ar, lda, Br, ldb, beta);
	be_gemm_bf16(cu, ta, tb, M, N, K, alpha, dA, lda, dB, ldb, beta, dC,
		     ldc, ds);
	be_download(cu, got, dC, nc);
	be_gemm_bf16(c32, ta, tb, M, N, K, alpha, hA, lda, hB, ldb, beta, hC,
		     ldc, hs);
	be_download(c32, cpu, hC, nc);
	/* gemm_bf16_arrays on bf16 copies of A and B (bench-block's floor) */
	uint16_t *a16 = pool_bytes(&pc, NULL, 2 * (na ? na : 1)),
		 *b16 = pool_bytes(&pc, NULL, 2 * (nb ? nb : 1));
	void *dC2 = pool_up(&pc, C, nc);
	double *arr = zeros(nc);
	be_to_bf16(cu, a16, dA, na), be_to_bf16(cu, b16, dB, nb);
	be_gemm_bf16_arrays(cu, ta, tb, M, N, K, alpha, a16, lda, b16, ldb,
			    beta, dC2, ldc, NULL);
	be_download(cu, arr, dC2, nc);
	/* gemm_bf16_mixed on A and B's bf16 copy (the weight cast): the same
	 * bf16 operands as gemm_bf16, so its bits */
	double *mix = zeros(nc);
	void *dC3 = pool_up(&pc, C, nc);
	be_gemm_bf16_mixed(cu, ta, tb, M, N, K, alpha, dA, lda, b16, ldb, beta,
			   dC3, ldc, ds);
	be_download(cu, mix, dC3, nc);
	cr_assert_eq(memcmp(mix, got, nc * sizeof(double)), 0,
		     "gemm_bf16_mixed (%d,%d,%d) ta=%d tb=%d differs from "
		     "gemm_bf16",
		     M, N, K, ta, tb);
	free(mix);
	for (int m = 0; m < M; m++)
		for (int n = 0; n < ldc; n++) {
			size_t i = (size_t)m * ldc + n;
			if (n >= N) {
				cr_assert_eq(
				    got[i], C[i],
				    "gemm_bf16 padding [%d][%d] written", m, n);
				continue;
			}
			double s = 0;
			for (int k = 0; k < K; k++)
				s += fabs(Ar[ta ? (size_t)k * lda + m
						: (size_t)m * lda + k] *
					  Br[tb ? (size_t)n * ldb + k
						: (size_t)k * ldb + n]);
			double tol =
			    1e-5 * (fabs(alpha) * s + fabs(beta * C[i]));
			cr_assert(fabs(got[i] - cpu[i]) <= tol,
				  "gemm_bf16 (%d,%d,%d) ta=%d tb=%d beta=%g "
				  "C[%d][%d]: cuda %.9g, cpu %.9g",
				  M, N, K, ta, tb, beta, m, n, got[i], cpu[i]);
			cr_assert(fabs(arr[i] - cpu[i]) <= tol,
				  "gemm_bf16_arrays (%d,%d,%d) ta=%d tb=%d "
				  "C[%d][%d]: cuda %.9g, cpu %.9g",
				  M, N, K, ta, tb, m, n, arr[i], cpu[i]);
			cr_assert(fabs(got[i] - ref[i]) <= tol,
				  "gemm_bf16 (%d,%d,%d) ta=%d tb=%d beta=%g "
				  "C[%d][%d]: cuda %.9g, rounded operands "
				  "in double %.9g",
				  M, N, K, ta, tb, beta, m, n, got[i], ref[i]);
		}
	pool_free(&pc);
	pool_free(&p32);
	free(A), free(B), free(C), free(got), free(cpu), free(ref);
	free(Ar), free(Br), free(arr);
}

Test(cuda_bf16, gemm_bf16)
{
	struct backend *cu = cuda_or_skip();
	struct backend *c32 = make("cpu", 0);
	static const int shapes[][3] = {{37, 29, 53}, {64, 48, 96}, {5, 7, 0}};
	cr_assert_eq(cu->bf16_operand_elem, 2);
	for (int s = 0; s < 3; s++)
		for (int tr = 0; tr < 8; tr++) {
			rng_state = 900 + 8 * (uint64_t)s + (uint64_t)tr;
			check_gemm_bf16(cu, c32, shapes[s][0], shapes[s][1],
					shapes[s][2], tr & 1, (tr >> 1) & 1,
					(tr >> 2) ? 0.0 : 1.0);
		}
	backend_destroy(cu);
	backend_destroy(c32);
}

/* ---- the bf16 attention: attention_forward_bf16 and _backward_bf16 of
 * the CUDA backend against the cpu backend's (tests/test_bf16.c checks
 * that one against a double reference), on the same bf16 q, k, v and
 * dout, both paths: the tiled kernels (T 37, a partial tile; and T 128
 * with heads of 12 columns, which the batched path leaves to them) and
 * the batched cublasGemmBatchedEx on bf16 copies (T 131 >= 128). The same
 * products of bf16 numbers summed in fp32 in another order, and float
 * expf against double exp: a few bf16 roundings of P and G may flip, each
 * moving one element by 2^-8 of itself, hence relative L2 within 2e-4;
 * one rounding left out on either side costs more (test_bf16.c). ---- */

static double rel_l2(const double *a, const double *b, size_t n)
{
	double d = 0, s = 0;
	for (size_t i = 0; i < n; i++)
		d += (a[i] - b[i]) * (a[i] - b[i]), s += b[i] * b[i];
	return sqrt(d / (s + 1e-300));
}

/* out, att and dqkv of backend pl->be's bf16 attention on qkv, dout. */
static void att_bf16_on(struct pool *pl, const double *qkv, const double *dout,
			int B, int T, int C, int H, double *out, double *att,
			double *dqkv)
{
	size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
	size_t na = (size_t)B * H * T * T;
	struct backend *be = pl->be;
	void *Q = pool_up(pl, qkv, nq), *dO = pool_up(pl, dout, no);
	void *O = pool_new(pl, no, 0), *A = pool_new(pl, na, 0);
	void *G = pool_new(pl, na, 0), *D = pool_new(pl, nq, 0);
	void *ws =
	    pool_bytes(pl, NULL, be_attention_bf16_ws_bytes(be, B, T, C, H));
	be_attention_forward_bf16(be, O, A, Q, ws, B, T, C, H);
	be_attention_backward_bf16(be, D, G, dO, Q, A, ws, B, T, C, H);
	be_download(be, out, O, no);
	be_download(be, att, A, na);
	be_download(be, dqkv, D, nq);
}

Test(cuda_bf16, attention_bf16, .timeout = 300)
{
	struct backend *cu = cuda_or_skip();
	struct backend *c32 = make("cpu", 0);
	static const int shapes[][4] = {
	    {2, 37, 24, 3}, {2, 131, 64, 2}, {2, 128, 24, 2}};
	for (int k = 0; k < 3; k++) {
		int B = shapes[k][0], T = shapes[k][1], C = shapes[k][2],
		    H = shapes[k][3];
		size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
		size_t na = (size_t)B * H * T * T;
		double *qkv = rnd(nq, 1), *dout = rnd(no, 1);
		double *o[2] = {zeros(no), zeros(no)};
		double *a[2] = {zeros(na), zeros(na)};
		double *d[2] = {zeros(nq), zeros(nq)};
		struct pool pc = {cu, {0}, 0}, p32 = {c32, {0}, 0};
		for (size_t i = 0; i < nq; i++)
			qkv[i] = bf16_of(qkv[i]);
		att_bf16_on(&pc, qkv, dout, B, T, C, H, o[0], a[0], d[0]);
		att_bf16_on(&p32, qkv, dout, B, T, C, H, o[1], a[1], d[1]);
		for (size_t i = 0; i < na; i++)
			cr_assert_eq(a[0][i], bf16_of(a[0][i]),
				     "T=%d: P[%zu] is not bf16", T, i);
		cr_assert_leq(rel_l2(a[0], a[1], na), 2e-4, "T=%d: P", T);
		cr_assert_leq(rel_l2(o[0], o[1], no), 2e-4, "T=%d: out", T);
		cr_assert_leq(rel_l2(d[0], d[1], nq), 2e-4, "T=%d: dqkv", T);
		pool_free(&pc);
		pool_free(&p32);
		free(qkv), free(dout);
		for (int j = 0; j < 2; j++)
			free(o[j]), free(a[j]), free(d[j]);
	}
	backend_destroy(cu);
	backend_destroy(c32);
}

/* ---- attention=flash: attention_flash_forward and _backward of the CUDA
 * backend (kernels/cuda/cuda_flash.cu) against the cpu backend's twin
 * (tests/test_flash.c checks that one against the unfused attention and
 * finite differences), fp32 and bf16, T 37, 131, 70 and 40, dh 8, 32, 72
 * and 128 (one and several row blocks, a partial one; one to four
 * 32-column chunks of a row, a partial one). The same sums in another order,
 * expf against exp: fp32 within 1e-5 relative L2; bf16 within 2e-4 (a
 * few roundings of P and G may flip). lse's hi + lo within 1e-5. ---- */

static void flash_on(struct pool *pl, const double *qkv, const double *dout,
		     int B, int T, int C, int H, int bf16, double *out,
		     double *lse, double *dqkv)
{
	size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
	size_t rows = (size_t)B * H * T;
	struct backend *be = pl->be;
	void *Q = pool_up(pl, qkv, nq), *dO = pool_up(pl, dout, no);
	void *O = pool_new(pl, no, 0), *L = pool_new(pl, 2 * rows, 0);
	void *S = pool_new(pl, rows, 0), *D = pool_new(pl, nq, 0);
	void *ws =
	    pool_bytes(pl, NULL, be_attention_bf16_ws_bytes(be, B, T, C, H));
	be_attention_flash_forward(be, O, L, Q, B, T, C, H, bf16);
	be_attention_flash_backward(be, D, S, dO, Q, O, L, ws, B, T, C, H,
				    bf16);
	be_download(be, out, O, no);
	be_download(be, lse, L, 2 * rows);
	be_download(be, dqkv, D, nq);
}

Test(cuda_bf16, attention_flash, .timeout = 300)
{
	struct backend *cu = cuda_or_skip();
	struct backend *c32 = make("cpu", 0);
	static const int shapes[][4] = {
	    {2, 37, 24, 3}, {2, 131, 64, 2}, {1, 70, 144, 2}, {1, 40, 128, 1}};
	for (int k = 0; k < 8; k++) {
		int B = shapes[k / 2][0], T = shapes[k / 2][1],
		    C = shapes[k / 2][2], H = shapes[k / 2][3], bf16 = k % 2;
		size_t nq = (size_t)B * T * 3 * C, no = (size_t)B * T * C;
		size_t rows = (size_t)B * H * T;
		double *qkv = rnd(nq, 1), *dout = rnd(no, 1);
		double *o[2] = {zeros(no), zeros(no)};
		double *l[2] = {zeros(2 * rows), zeros(2 * rows)};
		double *d[2] = {zeros(nq), zeros(nq)};
		double tol = bf16 ? 2e-4 : 1e-5;
		struct pool pc = {cu, {0}, 0}, p32 = {c32, {0}, 0};
		for (size_t i = 0; bf16 && i < nq; i++)
			qkv[i] = bf16_of(qkv[i]);
		flash_on(&pc, qkv, dout, B, T, C, H, bf16, o[0], l[0], d[0]);
		flash_on(&p32, qkv, dout, B, T, C, H, bf16, o[1], l[1], d[1]);
		for (size_t r = 0; r < rows; r++)
			cr_assert(fabs(l[0][2 * r] + l[0][2 * r + 1] -
				       l[1][2 * r] - l[1][2 * r + 1]) < 1e-5,
				  "T=%d bf16=%d: lse of row %zu", T, bf16, r);
		cr_assert_leq(rel_l2(o[0], o[1], no), tol, "T=%d bf16=%d: out",
			      T, bf16);
		cr_assert_leq(rel_l2(d[0], d[1], nq), tol, "T=%d bf16=%d: dqkv",
			      T, bf16);
		pool_free(&pc);
		pool_free(&p32);
		free(qkv), free(dout);
		for (int j = 0; j < 2; j++)
			free(o[j]), free(l[j]), free(d[j]);
	}
	backend_destroy(cu);
	backend_destroy(c32);
}

/* ---- epilogue=fused: gemm_bias_act (cuda_epilogue.cu, cuBLASLt's
 * BIAS and RELU_BIAS epilogues) against the cpu backend's (its GEMM and
 * bias pass, test_epilogue.c), on the same operands, fp32 (TF32 off) and
 * bf16 (the weights' cast), beta 0 and 1, ReLU or not, at a shape with
 * odd sizes and at the transformer's d_model 512 FF1 (N 2048 rows of
 * 512 → 2048), each with every operand at its buffer's start and one
 * element past it. Both sides round A and W by the same rule, so the
 * operands are the same and each bf16 product is exact in fp32: only the
 * order of the fp32 sums differs, within 1e-5 relative L2 in fp32 and
 * 1e-4 in bf16 (tensor-core accumulation order); a missing bias or ReLU
 * is O(1). ---- */

/* h (n doubles) on pl's backend, off elements into a fresh buffer. */
static void *up_at(struct pool *pl, const double *h, size_t n, int off)
{
	void *p = pool_new(pl, n + (size_t)off, 0);
	be_upload(pl->be, dq_at(pl->be, p, (size_t)off), h, n);
	return dq_at(pl->be, p, (size_t)off);
}

/* One case: operands and bias, then gemm_bias_act on pl's backend into
 * out. off: every operand one element past its buffer's start (4-byte
 * aligned fp32, 2-byte bf16 weights: cuBLASLt must be told, or the op
 * falls back to the two ops). */
struct ba_case {
	int M, N, K, bf16, relu, off;
	double beta;
	const double *A, *W, *b, *C0;
};

static void bias_act_on(struct pool *pl, const struct ba_case *t, double *out)
{
	struct backend *be = pl->be;
	const int M = t->M, N = t->N, K = t->K;
	void *dA = up_at(pl, t->A, (size_t)M * K, t->off);
	void *dW = up_at(pl, t->W, (size_t)N * K, t->off);
	void *db = up_at(pl, t->b, (size_t)N, t->off);
	void *dC = up_at(pl, t->C0, (size_t)M * N, t->off);
	uint16_t *w16 = NULL;
	void *scr = NULL;
	if (t->bf16) {
		w16 = pool_bytes(pl, NULL,
				 sizeof(uint16_t) * ((size_t)N * K + 1));
		w16 += t->off;
		scr = pool_bytes(pl, NULL,
				 be_gemm_bf16_scratch_bytes(be, M, N, K));
		be_to_bf16(be, w16, dW, (size_t)N * K);
	}
	be_gemm_bias_act(be, t->relu, M, N, K, t->beta, dA, dW, w16, db, dC,
			 scr);
	be_download(be, out, dC, (size_t)M * N);
}

static void check_bias_act(struct backend *cu, struct backend *c32,
			   struct ba_case t)
{
	size_t mn = (size_t)t.M * t.N;
	double *A = rnd((size_t)t.M * t.K, 1), *W = rnd((size_t)t.N * t.K, 0.1);
	double *b = rnd((size_t)t.N, 1), *C0 = rnd(mn, 1);
	double *x = zeros(mn), *y = zeros(mn);
	struct pool pc = {cu, {0}, 0}, pr = {c32, {0}, 0};
	t.A = A, t.W = W, t.b = b, t.C0 = C0;
	bias_act_on(&pc, &t, x);
	bias_act_on(&pr, &t, y);
	double e = rel_l2(x, y, mn);
	cr_assert_leq(e, t.bf16 ? 1e-4 : 1e-5,
		      "M %d N %d K %d bf16 %d relu %d beta %g offset %d: "
		      "relative L2 %g",
		      t.M, t.N, t.K, t.bf16, t.relu, t.beta, t.off, e);
	pool_free(&pc);
	pool_free(&pr);
	free(A), free(W), free(b), free(C0), free(x), free(y);
}

Test(cuda_bf16, gemm_bias_act, .timeout = 300)
{
	struct backend *cu = cuda_or_skip();
	struct backend *c32 = make("cpu", 0);
	static const int shapes[][3] = {{37, 29, 23}, {2048, 2048, 512}};
	for (int s = 0; s < 2; s++)
		for (int v = 0; v < 16; v++) {
			rng_state = 700 + 16 * (uint64_t)s + (uint64_t)v;
			struct ba_case t = {.M = shapes[s][0],
					    .N = shapes[s][1],
					    .K = shapes[s][2],
					    .bf16 = v & 1,
					    .relu = (v >> 1) & 1,
					    .off = v >> 3,
					    .beta = (double)((v >> 2) & 1)};
			check_bias_act(cu, c32, t);
		}
	backend_destroy(cu);
	backend_destroy(c32);
}
