/*
 * resilix/rng.h - the injected random generator (ADR-016).
 *
 * SplitMix64 (Steele, Lea, Flood: "Fast splittable pseudorandom number
 * generators", OOPSLA 2014). Caller-owned, seeded, deterministic: a test
 * that fixes the seed sees the same draws on every run.
 */
#ifndef RESILIX_RNG_H
#define RESILIX_RNG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rx_rng {
	uint64_t state;
};

/* rx_rng_seed - set the seed; any value, 0 included, gives a full-period
 * stream. Not thread-safe (one generator per thread or per lock holder);
 * O(1); no allocation. */
void rx_rng_seed(struct rx_rng *rng, uint64_t seed);

/* rx_rng_next - next 64 uniformly distributed bits (SplitMix64: a Weyl
 * step and the reference's 3-step finaliser). Never fails. Not
 * thread-safe; O(1); no allocation. */
uint64_t rx_rng_next(struct rx_rng *rng);

/* rx_rng_unit - uniform double in [0, 1): the top 53 bits of the next
 * draw times 2^-53, so 1 is never returned. Not thread-safe; O(1); no
 * allocation. */
double rx_rng_unit(struct rx_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
