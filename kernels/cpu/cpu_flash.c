/* cpu_flash.c — the fused causal attention of attention=flash on the CPU
 * (kernels/backend.h, attention_flash_forward and _backward), the twin of
 * kernels/cuda/cuda_flash.cu: FlashAttention-2 (Dao 2023, "FlashAttention-2:
 * Faster Attention with Better Parallelism and Work Partitioning",
 * Algorithms 1 and 2) in the same blocking, compiled for both
 * instantiations like cpu_backend.c.
 *
 * Per (b, h), query rows in blocks of FA_BR = 32, keys in blocks of FA_BC =
 * 32 (the CUDA kernels' tiles), scale = 1/√dh:
 *   forward   per query block, per key block at or below the diagonal:
 *             S = scale q kᵀ (causal: s <= t); m' = max(m, rowmax S);
 *             P = exp(S − m'); l = e^(m − m') l + rowsum P;
 *             o = e^(m − m') o + bf16?(P) v; m = m'. Then out = o / l and
 *             lse = m + log l. Nothing of size T² is stored: lse is kept
 *             per row, as (hi, lo) with hi = bf16(lse) and lo = lse − hi
 *             (fp32), so that a bf16 tape, which rounds both, still holds
 *             lse to about 16 bits (hi + lo is lse exactly in fp32).
 *   backward  dO = bf16?(dout); D = rowsum(dO ∘ out); for every s <= t:
 *             P = exp(scale q_t·k_s − lse_t), dP = dO_t·v_s,
 *             G = bf16?(scale P (dP − D_t)); dq_t += G k_s,
 *             dk_s += G q_t, dv_s += bf16?(P) dO_t.
 * bf16 (precision=bf16): the products' operands as attention_forward_bf16
 * rounds them (q, k, v arrive rounded; P, dO, G rounded here); the row
 * statistics m, l, lse and D stay fp32. Sums in the backend type, in the
 * order above; results differ from attention_forward's by rounding only.
 * Parallel over (b, h); each writes only its own rows and columns. The
 * head width dh is at most DQ_FLASH_MAX_DH (backend.h). */
#ifndef DQ_REAL
#error "compile with -DDQ_REAL=float|double -DDQ_SFX=f|d"
#endif

#include <math.h>
#include <stdint.h>

#include "../backend.h"
#include "../bf16.h"
#include "../elementwise.h"
#include "cpu_ctx.h"

typedef DQ_REAL real;

#define FA_BR 32
#define FA_BC 32

static inline real rnd(real x, int bf16)
{
	return bf16 ? (real)dq_bf16_round((float)x) : x;
}

/* One query block [t0, t1) of one head: the online softmax over the key
 * blocks (the header), o in acc (FA_BR × dh), then out and lse. */
static void flash_rows(real *out, real *lse, const real *q, const real *k,
		       const real *v, int t0, int t1, int C, int dh, real scale,
		       int bf16, real *acc)
{
	const int ld = 3 * C;
	real m[FA_BR], l[FA_BR], p[FA_BC];
	for (int r = 0; r < t1 - t0; r++) {
		m[r] = -INFINITY, l[r] = 0;
		for (int i = 0; i < dh; i++)
			acc[r * dh + i] = 0;
	}
	for (int s0 = 0; s0 < t1; s0 += FA_BC)
		for (int t = t0; t < t1; t++) {
			int r = t - t0,
			    s1 = s0 + FA_BC <= t + 1 ? s0 + FA_BC : t + 1;
			real mx = m[r], sum = 0;
			if (s1 <= s0)
				continue;
			for (int s = s0; s < s1; s++) {
				real x = 0;
				for (int i = 0; i < dh; i++)
					x += q[(size_t)t * ld + i] *
					     k[(size_t)s * ld + i];
				p[s - s0] = x * scale;
				mx = p[s - s0] > mx ? p[s - s0] : mx;
			}
			real alpha = (real)exp((double)(m[r] - mx));
			for (int s = s0; s < s1; s++) {
				p[s - s0] = (real)exp((double)(p[s - s0] - mx));
				sum += p[s - s0];
			}
			l[r] = alpha * l[r] + sum;
			m[r] = mx;
			for (int i = 0; i < dh; i++) {
				real o = 0;
				for (int s = s0; s < s1; s++)
					o += rnd(p[s - s0], bf16) *
					     v[(size_t)s * ld + i];
				acc[r * dh + i] = alpha * acc[r * dh + i] + o;
			}
		}
	for (int t = t0; t < t1; t++) {
		int r = t - t0;
		real x = m[r] + (real)log((double)l[r]);
		real hi = (real)dq_bf16_round((float)x);
		lse[2 * t] = hi, lse[2 * t + 1] = x - hi;
		for (int i = 0; i < dh; i++)
			out[(size_t)t * C + i] = acc[r * dh + i] / l[r];
	}
}

void DQ_FN(dq_cpu_attention_flash_forward_)(void *ctx, void *out_, void *lse_,
					    const void *qkv_, int B, int T,
					    int C, int H, int bf16)
{
	real *out = out_, *lse = lse_;
	const real *qkv = qkv_;
	const int dh = C / H, ld = 3 * C;
	const real scale = (real)(1.0 / sqrt((double)dh));
	(void)ctx;
#pragma omp parallel for if (B * H > 1)
	for (int bh = 0; bh < B * H; bh++) {
		int b = bh / H, h = bh % H;
		real acc[FA_BR * DQ_FLASH_MAX_DH];
		const real *q = qkv + (size_t)b * T * ld + (size_t)h * dh;
		for (int t0 = 0; t0 < T; t0 += FA_BR)
			flash_rows(out + (size_t)b * T * C + (size_t)h * dh,
				   lse + (size_t)bh * T * 2, q, q + C,
				   q + 2 * (size_t)C, t0,
				   t0 + FA_BR < T ? t0 + FA_BR : T, C, dh,
				   scale, bf16, acc);
	}
}

/* One (b, h) of the backward (the header), dq, dk, dv of the head zeroed
 * first; D (T) its rows' rowsum(dO ∘ out). */
static void flash_back_pair(real *dq, const real *q, const real *dO,
			    const real *o, const real *lse, real *D, int T,
			    int C, int dh, real scale, int bf16)
{
	const int ld = 3 * C;
	const real *k = q + C, *v = q + 2 * (size_t)C;
	real *dk = dq + C, *dv = dq + 2 * (size_t)C;
	for (int t = 0; t < T; t++) {
		real d = 0;
		for (int i = 0; i < dh; i++) {
			d += dO[(size_t)t * C + i] * o[(size_t)t * C + i];
			dq[(size_t)t * ld + i] = dk[(size_t)t * ld + i] =
			    dv[(size_t)t * ld + i] = 0;
		}
		D[t] = d;
	}
	for (int t = 0; t < T; t++) {
		real L = lse[2 * t] + lse[2 * t + 1];
		for (int s = 0; s <= t; s++) {
			real x = 0, dp = 0;
			for (int i = 0; i < dh; i++) {
				x += q[(size_t)t * ld + i] *
				     k[(size_t)s * ld + i];
				dp += dO[(size_t)t * C + i] *
				      v[(size_t)s * ld + i];
			}
			real P = (real)exp((double)(x * scale - L));
			real G = rnd(scale * P * (dp - D[t]), bf16);
			real Pr = rnd(P, bf16);
			for (int i = 0; i < dh; i++) {
				dq[(size_t)t * ld + i] +=
				    G * k[(size_t)s * ld + i];
				dk[(size_t)s * ld + i] +=
				    G * q[(size_t)t * ld + i];
				dv[(size_t)s * ld + i] +=
				    Pr * dO[(size_t)t * C + i];
			}
		}
	}
}

void DQ_FN(dq_cpu_attention_flash_backward_)(void *ctx, void *dqkv_,
					     void *scratch_, const void *dout_,
					     const void *qkv_, const void *out_,
					     const void *lse_, void *ws, int B,
					     int T, int C, int H, int bf16)
{
	real *dqkv = dqkv_, *D = scratch_;
	const real *qkv = qkv_, *out = out_, *lse = lse_, *dout = dout_;
	const int dh = C / H, ld = 3 * C;
	const real scale = (real)(1.0 / sqrt((double)dh));
	(void)ctx;
	if (bf16) { /* dO = bf16(dout) into ws */
		real *r = ws;
		size_t n = (size_t)B * T * C;
		PAR_EACH(n, r[i] = rnd(dout[i], 1));
		dout = r;
	}
#pragma omp parallel for if (B * H > 1)
	for (int bh = 0; bh < B * H; bh++) {
		int b = bh / H, h = bh % H;
		size_t off = (size_t)b * T * ld + (size_t)h * dh;
		size_t oo = (size_t)b * T * C + (size_t)h * dh;
		flash_back_pair(dqkv + off, qkv + off, dout + oo, out + oo,
				lse + (size_t)bh * T * 2, D + (size_t)bh * T, T,
				C, dh, scale, bf16);
	}
}
