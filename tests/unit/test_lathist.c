/*
 * test_lathist.c - the latency histogram's buckets (preload/lathist.h):
 * the O(1) bucket index against a linear search, and the quantile read
 * from the buckets against Prometheus's histogram_quantile and against
 * the exact quantile of the samples.
 *
 * Index: every value 0..2^21, both sides of every power of two and of
 * every bound, and 10^6 random values of every magnitude (SplitMix64,
 * rng.h) land where a linear search of the bounds puts them (the first
 * bound >= v; +Inf above the last).
 *
 * Quantiles: hand-made counts give the values histogram_quantile gives
 * (worked by hand below); and for 100 000 log-normal latencies (median
 * 1 ms, sigma 1), the estimate of the p50, p90 and p99 lies in the same
 * bucket as the exact quantile, so its error is bounded by that bucket's
 * width - the resolution the buckets promise (ADR-520).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../preload/lathist.h"
#include "../support/cunit_main.h"
#include "resilix/rng.h"

static unsigned linear(uint64_t us)
{
	unsigned i;

	for (i = 0; i < RX_LATHIST_BOUNDS; i++)
		if (us <= rx_lathist_bound_us[i])
			return i;
	return RX_LATHIST_BOUNDS;
}

static void test_bounds_and_labels(void)
{
	unsigned i;

	for (i = 1; i < RX_LATHIST_BOUNDS; i++) {
		/* at least a factor 2 apart: the index's premise */
		CU_ASSERT(rx_lathist_bound_us[i] >= 2 * rx_lathist_bound_us[i - 1]);
	}
	for (i = 0; i < RX_LATHIST_BOUNDS; i++)
		CU_ASSERT_DOUBLE_EQUAL(strtod(rx_lathist_le[i], NULL),
				       rx_lathist_bound_us[i] / 1e6, 1e-12);
	CU_ASSERT_STRING_EQUAL(rx_lathist_le[RX_LATHIST_BOUNDS], "+Inf");
}

static void test_index(void)
{
	struct rx_rng rng;
	uint64_t v, bad = 0;
	unsigned e, i;
	long d;

	for (v = 0; v <= (1u << 21); v++)
		bad += rx_lathist_index(v) != linear(v);
	for (e = 0; e < 64; e++)
		for (d = -2; d <= 2; d++) {
			v = (1ull << e) + (uint64_t)d;
			bad += rx_lathist_index(v) != linear(v);
		}
	for (i = 0; i < RX_LATHIST_BOUNDS; i++)
		for (d = -1; d <= 1; d++) {
			v = rx_lathist_bound_us[i] + (uint64_t)d;
			bad += rx_lathist_index(v) != linear(v);
		}
	bad += rx_lathist_index(UINT64_MAX) != RX_LATHIST_BOUNDS;
	CU_ASSERT_EQUAL(rx_lathist_index(25), 0);
	CU_ASSERT_EQUAL(rx_lathist_index(26), 1);
	CU_ASSERT_EQUAL(rx_lathist_index(50000000), RX_LATHIST_BOUNDS - 1);
	CU_ASSERT_EQUAL(rx_lathist_index(50000001), RX_LATHIST_BOUNDS);
	rx_rng_seed(&rng, 7);
	for (i = 0; i < 1000000; i++) {
		v = rx_rng_next(&rng) >> (rx_rng_next(&rng) % 64);
		bad += rx_lathist_index(v) != linear(v);
	}
	CU_ASSERT_EQUAL(bad, 0);
}

static void test_quantile_by_hand(void)
{
	uint64_t c[RX_LATHIST_BUCKETS] = {0};

	CU_ASSERT(isnan(rx_lathist_quantile(c, 0.5)));
	/* 10 calls in (100 µs, 250 µs], 10 in (250 µs, 500 µs]: the median
	 * is the 10th of 20, the top of the first bucket; the p75 (rank 15)
	 * half-way through the second: 375 µs. */
	c[3] = 10;
	c[4] = 10;
	CU_ASSERT_DOUBLE_EQUAL(rx_lathist_quantile(c, 0.5), 250e-6, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(rx_lathist_quantile(c, 0.75), 375e-6, 1e-12);
	CU_ASSERT_DOUBLE_EQUAL(rx_lathist_quantile(c, 1.0), 500e-6, 1e-12);
	/* The first bucket interpolates from 0. */
	c[3] = c[4] = 0;
	c[0] = 4;
	CU_ASSERT_DOUBLE_EQUAL(rx_lathist_quantile(c, 0.5), 12.5e-6, 1e-12);
	/* A rank in +Inf: the largest finite bound. */
	c[RX_LATHIST_BOUNDS] = 96;
	CU_ASSERT_DOUBLE_EQUAL(rx_lathist_quantile(c, 0.99), 50.0, 1e-9);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

#define N 100000
static uint64_t lat[N];

static void test_quantile_lognormal(void)
{
	static const double qs[] = {0.5, 0.9, 0.99};
	uint64_t c[RX_LATHIST_BUCKETS] = {0};
	struct rx_rng rng;
	unsigned i, j;

	rx_rng_seed(&rng, 42);
	for (i = 0; i < N; i++) {
		/* Box-Muller, one normal per pair */
		double u1 = ((double)(rx_rng_next(&rng) >> 11) + 1) / 9007199254740993.0;
		double u2 = (double)(rx_rng_next(&rng) >> 11) / 9007199254740992.0;
		double z = sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);

		lat[i] = (uint64_t)(1000.0 * exp(z));
		c[rx_lathist_index(lat[i])]++;
	}
	qsort(lat, N, sizeof(lat[0]), cmp_u64);
	for (j = 0; j < 3; j++) {
		uint64_t exact = lat[(size_t)(qs[j] * (N - 1))];
		double est = rx_lathist_quantile(c, qs[j]);
		unsigned b = rx_lathist_index(exact);
		double lo = b ? rx_lathist_bound_us[b - 1] / 1e6 : 0;
		double hi = rx_lathist_bound_us[b] / 1e6;

		printf("\n  p%g: exact %.6f s, from the buckets %.6f s (%+.1f %%)",
		       qs[j] * 100, exact / 1e6, est,
		       100 * (est - exact / 1e6) / (exact / 1e6));
		CU_ASSERT(est >= lo && est <= hi);
	}
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"bounds and labels", test_bounds_and_labels},
	    {"index = linear search", test_index},
	    {"quantile by hand (histogram_quantile)", test_quantile_by_hand},
	    {"quantile of log-normal latencies", test_quantile_lognormal},
	    {NULL, NULL}};

	return rx_run_suite("lathist", tests);
}
