/*
 * preload/lathist.h - the fixed buckets of resilix_call_latency_seconds, a
 * Prometheus histogram (ADR-520), and the quantile Prometheus's
 * histogram_quantile reads from them. Header-only, so that the unit tests
 * (tests/unit/test_lathist.c) check the very code metrics.c runs.
 *
 * Buckets: the 1-2.5-5 series of Prometheus's default buckets, from 25 µs
 * (a loopback round trip under the shim is 30-100 µs) to 50 s (beyond the
 * longest timeouts programs set), twenty finite upper bounds plus +Inf.
 * Upper bounds are inclusive (le: a call of exactly 1 ms is counted in
 * le="0.001"), in whole microseconds, the unit of the shim's latencies.
 *
 * Index in O(1), no loop and no branch: consecutive bounds are at least a
 * factor 2 apart, so each power-of-two range [2^e, 2^(e+1)) of microseconds
 * holds at most one bound. The index of a latency v is the number of bounds
 * below v: the bounds below 2^e (a table by e = floor(log2 v), one count
 * leading zeros), plus one when v is above the range's own bound. The
 * tables are generated from the bounds; tests/unit/test_lathist.c checks
 * them against a linear search for every octave's edges and 10^6 values.
 */
#ifndef RESILIX_PRELOAD_LATHIST_H
#define RESILIX_PRELOAD_LATHIST_H

#include <math.h>
#include <stdint.h>

/* Finite bounds; the bucket after the last is +Inf. */
#define RX_LATHIST_BOUNDS 20
#define RX_LATHIST_BUCKETS (RX_LATHIST_BOUNDS + 1)

/* The upper bounds, µs, increasing. */
static const uint32_t rx_lathist_bound_us[RX_LATHIST_BOUNDS] = {
	25u, 50u, 100u, 250u, 500u, 1000u,
	2500u, 5000u, 10000u, 25000u, 50000u, 100000u,
	250000u, 500000u, 1000000u, 2500000u, 5000000u, 10000000u,
	25000000u, 50000000u,
};

/* The same bounds as the le label writes them (seconds, as Prometheus's
 * client libraries write 1-2.5-5 bounds: shortest decimal). */
static const char *const rx_lathist_le[RX_LATHIST_BUCKETS] = {
	"0.000025", "0.00005", "0.0001", "0.00025", "0.0005",
	"0.001", "0.0025", "0.005", "0.01", "0.025",
	"0.05", "0.1", "0.25", "0.5", "1",
	"2.5", "5", "10", "25", "50",
	"+Inf",
};

#define NONE UINT64_MAX
/* By e = floor(log2 v): how many bounds are below 2^e, and the bound in
 * [2^e, 2^(e+1)) (NONE: none there). */
static const uint8_t rx_lathist_below[64] = {
	0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 6, 7, 8, 9, 10,
	11, 12, 13, 14, 15, 15, 16, 17, 18, 19, 20, 20, 20, 20, 20, 20,
	20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20,
	20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20,
};
static const uint64_t rx_lathist_in_octave[64] = {
	NONE, NONE, NONE, NONE, 25u, 50u,
	100u, 250u, 500u, 1000u, NONE, 2500u,
	5000u, 10000u, 25000u, 50000u, 100000u, 250000u,
	500000u, 1000000u, NONE, 2500000u, 5000000u, 10000000u,
	25000000u, 50000000u, NONE, NONE, NONE, NONE,
	NONE, NONE, NONE, NONE, NONE, NONE,
	NONE, NONE, NONE, NONE, NONE, NONE,
	NONE, NONE, NONE, NONE, NONE, NONE,
	NONE, NONE, NONE, NONE, NONE, NONE,
	NONE, NONE, NONE, NONE, NONE, NONE,
	NONE, NONE, NONE, NONE,
};
#undef NONE

/*
 * rx_lathist_index - the bucket of a latency of @us microseconds: 0 ..
 * RX_LATHIST_BOUNDS (the +Inf bucket). Any value; O(1): one count of
 * leading zeros, two table loads, one comparison. Thread-safe (pure).
 */
static inline unsigned rx_lathist_index(uint64_t us)
{
	unsigned e = 63u - (unsigned)__builtin_clzll(us | 1u);

	return rx_lathist_below[e] + (us > rx_lathist_in_octave[e]);
}

/*
 * rx_lathist_quantile - the @q quantile (0 <= q <= 1), in seconds, of the
 * observations counted in @counts (per bucket, not cumulative), as
 * Prometheus's histogram_quantile computes it: the rank q * total is found
 * in the cumulative counts, and the value is interpolated linearly within
 * that bucket (from 0 in the first one). A rank in the +Inf bucket gives
 * the largest finite bound. NaN when no observation was counted.
 * Thread-safe (pure); O(buckets).
 */
static inline double rx_lathist_quantile(const uint64_t *counts, double q)
{
	double total = 0, rank, below = 0, lo = 0, hi;
	unsigned i;

	for (i = 0; i < RX_LATHIST_BUCKETS; i++)
		total += (double)counts[i];
	if (total == 0)
		return NAN;
	rank = q * total;
	for (i = 0; i < RX_LATHIST_BOUNDS; i++) {
		hi = rx_lathist_bound_us[i] / 1e6;
		if (counts[i] > 0 && below + (double)counts[i] >= rank)
			return lo + (hi - lo) * (rank - below) /
					(double)counts[i];
		below += (double)counts[i];
		lo = hi;
	}
	return lo;
}

#endif
