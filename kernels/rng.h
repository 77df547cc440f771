/* rng.h — splitmix64, the one seedable generator of deqbench (Steele, Lea &
 * Flood 2014, "Fast splittable pseudorandom number generators", OOPSLA;
 * the constants of their SplitMix64 / Vigna's reference C). Integer
 * arithmetic only, so a seed gives the same numbers on every platform and
 * backend: parameter init (models/), the synthetic corpus (bench/), the
 * methods' random probes (methods/) and the tests draw from it.
 * Header-only; the state is a caller's uint64_t, any value a valid seed. */
#ifndef DQ_RNG_H
#define DQ_RNG_H

#include <stdint.h>

/* Advances *s by the golden-ratio increment 0x9e3779b97f4a7c15 and returns
 * the mixed state: 64 uniform bits, period 2^64. */
static inline uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in (0, 1] from one splitmix64 draw: its top 53 bits k give
 * (k + 0.5) 2^-53, the midpoint of one of 2^53 equal cells, so never 0
 * (safe under log, as Box–Muller needs); 1.0 only from the top cell, whose
 * midpoint rounds up in double (probability 2^-53). */
static inline double splitmix64_u01(uint64_t *s)
{
	return ((double)(splitmix64(s) >> 11) + 0.5) * 0x1.0p-53;
}

#endif
