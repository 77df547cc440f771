/* cpu_xent.c — the CPU backend's softmax cross-entropy (xent_forward,
 * xent_train; kernels/backend.h has the contracts), compiled with
 * cpu_backend.c in both instantiations (float: DQ_SFX f, double: d) and
 * reached through its ops table. Rows run in parallel (OpenMP) in groups of
 * XENT_GROUP whose losses are summed in row order: the same bits for any
 * thread count.
 */
#ifndef DQ_REAL
#error "compile with -DDQ_REAL=float|double -DDQ_SFX=f|d"
#endif

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../backend.h"
#include "../elementwise.h"
#include "cpu_ctx.h"

typedef DQ_REAL real;

/* Rows per group (per-row losses kept on the stack). */
#define XENT_GROUP 256

/* ---------------------------------------------------- softmax cross-entropy */

/* The float row loops below keep XENT_LANES partial maxima / sums in
 * SSE2 registers: the order of every reduction is fixed (the same bits for
 * any thread count). Elsewhere (double, or no SSE2) plain loops with libm's
 * exp. */
/* Elements summed in float per lane before the lane sums go to double. */
#define XENT_CHUNK 512

#if DQ_REAL_IS_FLOAT && defined(__SSE2__)
/* exp(x) in float for x <= 0, four lanes (SSE2, the x86-64 baseline; no
 * libm call): x = n ln2 + r with n = rint(x log2 e) and |r| <= ln2/2
 * (Cody-Waite: ln2 = XENT_LN2_HI + XENT_LN2_LO, the high part exact in 9
 * bits), exp(r) by its Taylor polynomial to degree 7 (truncation
 * |r|^8/8! <= 5.2e-9, below float's half-ulp 6e-8), times 2^n built in
 * the exponent bits. Within 2 ulp of the correctly rounded exp
 * (tests/test_xent.c); 0 below XENT_EXP_MIN, where exp(x) < 2^-126. n is
 * rounded by the 1.5·2^23 trick and read from the bits, so no float to
 * int conversion is made (NaN in: garbage out, never UB). */
#define XENT_LN2_HI  0.693359375f
#define XENT_LN2_LO  -2.12194440e-4f
#define XENT_EXP_MIN -87.33654f
#define XENT_LANES   8 /* two __m128 per step: two dependency chains */

static inline __m128 exp_nonpos(__m128 x)
{
	const __m128 lo = _mm_set1_ps(XENT_EXP_MIN);
	const __m128 magic = _mm_set1_ps(12582912.0f); /* 1.5 · 2^23 */
	__m128 under = _mm_cmplt_ps(x, lo);
	__m128 xc = _mm_max_ps(x, lo);
	__m128 t = _mm_add_ps(_mm_mul_ps(xc, _mm_set1_ps(1.44269504088896341f)),
			      magic);
	__m128 n = _mm_sub_ps(t, magic);
	__m128 r =
	    _mm_sub_ps(_mm_sub_ps(xc, _mm_mul_ps(n, _mm_set1_ps(XENT_LN2_HI))),
		       _mm_mul_ps(n, _mm_set1_ps(XENT_LN2_LO)));
	static const float c[] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6,
				  0.5f,	      1.0f,	  1.0f};
	__m128 p = _mm_set1_ps(1.0f / 5040);
	for (int k = 0; k < 7; k++)
		p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(c[k]));
	/* t's low bits hold n + 0x400000 (two's complement in 23 bits) */
	__m128i e = _mm_slli_epi32(
	    _mm_add_epi32(
		_mm_sub_epi32(_mm_castps_si128(t), _mm_set1_epi32(0x4B400000)),
		_mm_set1_epi32(127)),
	    23);
	return _mm_andnot_ps(under, _mm_mul_ps(p, _mm_castsi128_ps(e)));
}

/* The k < XENT_LANES elements at p, the other lanes `fill`, as two
 * vectors. */
static inline void load_tail(const float *p, int k, float fill, __m128 *a,
			     __m128 *b)
{
	float buf[XENT_LANES];
	for (int i = 0; i < XENT_LANES; i++)
		buf[i] = i < k ? p[i] : fill;
	*a = _mm_loadu_ps(buf);
	*b = _mm_loadu_ps(buf + 4);
}

/* max over l[0..V): lane maxima, then across the lanes in order. */
static real row_max(const real *l, int V)
{
	__m128 m0 = _mm_set1_ps(l[0]), m1 = m0, a, b;
	int j = 0;
	for (; j + XENT_LANES <= V; j += XENT_LANES) {
		m0 = _mm_max_ps(m0, _mm_loadu_ps(l + j));
		m1 = _mm_max_ps(m1, _mm_loadu_ps(l + j + 4));
	}
	if (j < V) {
		load_tail(l + j, V - j, l[0], &a, &b);
		m0 = _mm_max_ps(m0, a);
		m1 = _mm_max_ps(m1, b);
	}
	float lanes[XENT_LANES];
	_mm_storeu_ps(lanes, m0);
	_mm_storeu_ps(lanes + 4, m1);
	real m = lanes[0];
	for (int k = 1; k < XENT_LANES; k++)
		m = lanes[k] > m ? lanes[k] : m;
	return m;
}

/* e[j] = exp(l[j] - mx) for j < V (e may alias l); returns Σ e in double:
 * per lane in float over chunks of XENT_CHUNK, the lane sums of each chunk
 * added to the total in lane order. */
static double row_exp_sum(real *e, const real *l, int V, real mx)
{
	const __m128 m = _mm_set1_ps(mx);
	double total = 0;
	for (int c0 = 0; c0 < V; c0 += XENT_CHUNK) {
		int c1 = c0 + XENT_CHUNK < V ? c0 + XENT_CHUNK : V;
		__m128 s0 = _mm_setzero_ps(), s1 = s0, a, b;
		int j = c0;
		for (; j + XENT_LANES <= c1; j += XENT_LANES) {
			a = exp_nonpos(_mm_sub_ps(_mm_loadu_ps(l + j), m));
			b = exp_nonpos(_mm_sub_ps(_mm_loadu_ps(l + j + 4), m));
			_mm_storeu_ps(e + j, a);
			_mm_storeu_ps(e + j + 4, b);
			s0 = _mm_add_ps(s0, a);
			s1 = _mm_add_ps(s1, b);
		}
		if (j < c1) { /* padding lanes: exp(-inf - mx) = 0 */
			float buf[XENT_LANES];
			load_tail(l + j, c1 - j, -INFINITY, &a, &b);
			a = exp_nonpos(_mm_sub_ps(a, m));
			b = exp_nonpos(_mm_sub_ps(b, m));
			_mm_storeu_ps(buf, a);
			_mm_storeu_ps(buf + 4, b);
			memcpy(e + j, buf, (size_t)(c1 - j) * sizeof(float));
			s0 = _mm_add_ps(s0, a);
			s1 = _mm_add_ps(s1, b);
		}
		float lanes[XENT_LANES];
		_mm_storeu_ps(lanes, s0);
		_mm_storeu_ps(lanes + 4, s1);
		for (int k = 0; k < XENT_LANES; k++)
			total += lanes[k];
	}
	return total;
}
#else
/* max over l[0..V). */
static real row_max(const real *l, int V)
{
	real m = l[0];
	for (int j = 1; j < V; j++)
		m = l[j] > m ? l[j] : m;
	return m;
}

/* e[j] = exp(l[j] - mx) for j < V (e may alias l); returns Σ e in order. */
static double row_exp_sum(real *e, const real *l, int V, real mx)
{
	double total = 0;
	for (int j = 0; j < V; j++) {
		e[j] = exp(l[j] - mx);
		total += e[j];
	}
	return total;
}
#endif

/* Row n of the softmax cross-entropy: out (may alias logits) gets the
 * probabilities times `scale`, minus `scale` at the target when grad is
 * set (the row of dlogits); returns logsumexp(l) - l[target] in double,
 * read before out is written. */
static double xent_row(real *out, const real *l, int target, int V,
		       double scale, int grad)
{
	real mx = row_max(l, V);
	double lt = l[target];
	double sum = row_exp_sum(out, l, V, mx);
	real f = (real)(scale / sum);
	for (int j = 0; j < V; j++)
		out[j] *= f;
	if (grad)
		out[target] -= (real)scale;
	return log(sum) + (double)mx - lt;
}

/* Mean over N rows of xent_row's losses; rows go in groups whose losses are
 * summed in row order: the mean does not depend on the thread count. */
static double xent_rows(real *out, const real *logits, const int32_t *targets,
			int N, int V, double scale, int grad)
{
	double total = 0;
	for (int n0 = 0; n0 < N; n0 += XENT_GROUP) {
		int n1 = N - n0 < XENT_GROUP ? N : n0 + XENT_GROUP;
		double loss[XENT_GROUP];
#pragma omp parallel for if ((long long)(n1 - n0) * V >= PAR_MIN_N)
		for (int n = n0; n < n1; n++)
			loss[n - n0] = xent_row(out + (size_t)n * V,
						logits + (size_t)n * V,
						targets[n], V, scale, grad);
		for (int n = n0; n < n1; n++)
			total += loss[n - n0];
	}
	return N > 0 ? total / N : 0.0;
}

double DQ_FN(dq_cpu_xent_forward_)(void *ctx, void *probs, const void *logits,
				   const int32_t *targets, int N, int V)
{
	(void)ctx;
	return xent_rows(probs, logits, targets, N, V, 1.0, 0);
}

double DQ_FN(dq_cpu_xent_train_)(void *ctx, void *dlogits, const void *logits,
				 const int32_t *targets, int N, int V,
				 double scale)
{
	(void)ctx;
	return xent_rows(dlogits, logits, targets, N, V, scale, 1);
}
