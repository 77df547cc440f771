/* bf16.h — the float32 <-> bfloat16 conversions every backend uses
 * (kernels/backend.h, "bf16 mixed precision"): the rounding rule written
 * once. bf16 is the upper 16 bits of an IEEE-754 binary32 (1 sign, 8
 * exponent, 7 mantissa bits); Kalamkar et al. 2019, "A Study of BFLOAT16
 * for Deep Learning Training", and PyTorch's c10/util/BFloat16.h
 * round_to_nearest_even give the rule: round to nearest, ties to even; a
 * nan stays a quiet nan, inf stays inf, a finite value past the largest
 * bf16 (about 3.39e38) becomes inf. */
#ifndef DQ_BF16_H
#define DQ_BF16_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define DQ_BF16_HD __host__ __device__ __forceinline__
#else
#define DQ_BF16_HD static inline
#endif

/* The bits of float32 f, and the float32 of bits u (bit casts). */
DQ_BF16_HD uint32_t dq_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

DQ_BF16_HD float dq_f32_of(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* The bf16 bits nearest to f (ties to even). */
DQ_BF16_HD uint16_t dq_bf16_bits(float f)
{
	uint32_t u = dq_f32_bits(f);
	if ((u & 0x7fffffffu) > 0x7f800000u) /* nan: keep sign, make quiet */
		return (uint16_t)((u >> 16) | 0x0040u);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

/* The float32 whose upper half is b (exact). */
DQ_BF16_HD float dq_bf16_float(uint16_t b)
{
	return dq_f32_of((uint32_t)b << 16);
}

/* f rounded to bf16 and widened back: the value a bf16 store keeps. */
DQ_BF16_HD float dq_bf16_round(float f)
{
	return dq_bf16_float(dq_bf16_bits(f));
}

#endif
