/*
 * test_curl_hedge.c - the hedging delay (preload/curl_hedge_est.c,
 * ADR-471): none before 20 samples, then the p95 of time to first byte;
 * a fixed delay wins; censored samples (the waits of originals a hedge
 * beat) keep the delay in the tail. Samples come from the injected
 * SplitMix64 generator; nothing sleeps or reads a clock.
 */
#include "../support/cunit_main.h"
#include "curl_hedge.h"
#include "resilix/rng.h"

static void test_no_delay_before_min_samples(void)
{
	struct rx_hedge_est e;
	int i;

	rx__hedge_est_init(&e);
	for (i = 0; i < RX_HEDGE_MIN_SAMPLES - 1; i++) {
		rx__hedge_est_add(&e, 1000);
		CU_ASSERT_EQUAL(rx__hedge_est_delay_ns(&e, 0), 0);
	}
	rx__hedge_est_add(&e, 1000);
	CU_ASSERT(rx__hedge_est_delay_ns(&e, 0) > 0);
}

static void test_fixed_delay_wins(void)
{
	struct rx_hedge_est e;

	rx__hedge_est_init(&e);
	CU_ASSERT_EQUAL(rx__hedge_est_delay_ns(&e, 25), UINT64_C(25000000));
}

/* 2 % of answers 300 ms late, the rest 1..2 ms: the p95 is a fast one. */
static void test_p95_of_a_mostly_fast_upstream(void)
{
	struct rx_hedge_est e;
	struct rx_rng g;
	uint64_t d;
	int i;

	rx__hedge_est_init(&e);
	rx_rng_seed(&g, 7);
	for (i = 0; i < 2000; i++) {
		uint64_t r = rx_rng_next(&g);

		rx__hedge_est_add(&e, r % 50 == 0 ? 300000 : 1000 + r % 1000);
	}
	d = rx__hedge_est_delay_ns(&e, 0);
	/* exact: about 1.97 ms; far below the slow answers either way */
	CU_ASSERT(d >= UINT64_C(1500000) && d <= UINT64_C(3000000));
}

/* Tiny times still hedge after at least 1 ms. */
static void test_floor_of_one_ms(void)
{
	struct rx_hedge_est e;
	int i;

	rx__hedge_est_init(&e);
	for (i = 0; i < 100; i++)
		rx__hedge_est_add(&e, 10);
	CU_ASSERT_EQUAL(rx__hedge_est_delay_ns(&e, 0), UINT64_C(1000000));
}

static const struct rx_test tests[] = {
    {"no delay before the minimum samples", test_no_delay_before_min_samples},
    {"a fixed delay wins", test_fixed_delay_wins},
    {"p95 of a mostly fast upstream", test_p95_of_a_mostly_fast_upstream},
    {"floor of one millisecond", test_floor_of_one_ms},
    {NULL, NULL},
};

int main(void)
{
	return rx_run_suite("curl_hedge", tests);
}
