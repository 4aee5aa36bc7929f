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

/* rx_rng_seed - set the seed; any value is valid. O(1), not thread-safe. */
void rx_rng_seed(struct rx_rng *rng, uint64_t seed);

/* rx_rng_next - next 64 uniformly distributed bits. O(1), not thread-safe. */
uint64_t rx_rng_next(struct rx_rng *rng);

/* rx_rng_unit - uniform double in [0, 1), 53 bits. O(1), not thread-safe. */
double rx_rng_unit(struct rx_rng *rng);

#ifdef __cplusplus
}
#endif
#endif
