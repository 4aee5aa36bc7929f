/*
 * rng.c - SplitMix64, the injected generator (ADR-016).
 *
 * Source: Steele, Lea, Flood, "Fast splittable pseudorandom number
 * generators", OOPSLA 2014; constants as in the public-domain reference
 * by Vigna. One 64-bit state, a Weyl increment and a 3-step finaliser:
 * every seed, including 0, gives a full-period stream.
 */
#include "resilix/rng.h"

void rx_rng_seed(struct rx_rng *rng, uint64_t seed)
{
	rng->state = seed;
}

uint64_t rx_rng_next(struct rx_rng *rng)
{
	uint64_t z = (rng->state += UINT64_C(0x9e3779b97f4a7c15));
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

double rx_rng_unit(struct rx_rng *rng)
{
	/* The top 53 bits fill a double's mantissa exactly: [0, 1). */
	return (double)(rx_rng_next(rng) >> 11) * 0x1.0p-53;
}
