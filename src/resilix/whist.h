/*
 * resilix/whist.h - the limiter's window of latencies (struct rx_limiter's
 * window; ADR-522).
 *
 * A log-linear histogram of microseconds, 2^RX_WHIST_SUB buckets per
 * octave (a bucket's width is at most 1/16 of its values: 6 %), values
 * 0..15 exact, values from 2^31 µs (36 min) in the last bucket. Only the
 * buckets lo..hi were touched since the reset. Filled by
 * rx_limiter_settle, read and cleared when the window closes
 * (src/whist-inl.h); callers never touch it.
 */
#ifndef RESILIX_WHIST_H
#define RESILIX_WHIST_H

#include <stdint.h>

#define RX_WHIST_SUB 4
#define RX_WHIST_BUCKETS (28u << RX_WHIST_SUB)

struct rx_whist {
	uint32_t c[RX_WHIST_BUCKETS];
	uint64_t count;	 /* samples since the reset */
	uint64_t max_us; /* the largest of them */
	uint16_t lo, hi; /* touched buckets (lo > hi: none) */
};

#endif
