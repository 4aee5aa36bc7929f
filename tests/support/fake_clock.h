/*
 * fake_clock.h - the injected clock of the core tests (ADR-005). Tests
 * advance time explicitly; nothing sleeps.
 */
#ifndef RESILIX_TEST_FAKE_CLOCK_H
#define RESILIX_TEST_FAKE_CLOCK_H

#include <stdint.h>

#define RX_NS_PER_MS UINT64_C(1000000)

struct fake_clock {
	uint64_t now_ns;
};

static inline uint64_t fake_clock_advance_ms(struct fake_clock *c,
                                             uint64_t ms)
{
	c->now_ns += ms * RX_NS_PER_MS;
	return c->now_ns;
}

#endif
