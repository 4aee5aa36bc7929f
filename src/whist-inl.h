/*
 * whist-inl.h - the limiter's window histogram (struct rx_whist in
 * resilix/limiter.h, ADR-522): one increment per sample, the quantile by
 * a scan of the touched buckets when the window closes. Never installed;
 * included by limiter-inl.h and limiter.c.
 *
 * Bucket of v µs: v itself below 16; else, with e = floor(log2 v), octave
 * e - 3 and the 4 bits after the leading one - a log-linear histogram as
 * HdrHistogram's (Tene) and Prometheus's native histograms lay theirs
 * out. One count of leading zeros, no loop, no branch but the clamp.
 */
#ifndef RESILIX_WHIST_INL_H
#define RESILIX_WHIST_INL_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "resilix/limiter.h"

#define RX__WHIST_TOP ((UINT64_C(1) << 31) - 1)

static RX__INLINE unsigned rx__whist_index(uint64_t v)
{
	unsigned e;

	v = v > RX__WHIST_TOP ? RX__WHIST_TOP : v;
	if (v < (1u << RX_WHIST_SUB))
		return (unsigned)v;
	e = 63u - (unsigned)__builtin_clzll(v);
	return ((e - RX_WHIST_SUB + 1) << RX_WHIST_SUB) |
	       (unsigned)((v >> (e - RX_WHIST_SUB)) &
			  ((1u << RX_WHIST_SUB) - 1));
}

/* The smallest value of bucket @i (µs). */
static RX__INLINE double rx__whist_low(unsigned i)
{
	unsigned o = i >> RX_WHIST_SUB, m = i & ((1u << RX_WHIST_SUB) - 1);

	if (o == 0)
		return (double)m;
	return (double)(((uint64_t)((1u << RX_WHIST_SUB) | m)) << (o - 1));
}

static RX__INLINE void rx__whist_reset(struct rx_whist *h)
{
	if (h->count > 0 && h->lo <= h->hi)
		memset(&h->c[h->lo], 0, (size_t)(h->hi - h->lo + 1) *
					     sizeof(h->c[0]));
	h->count = 0;
	h->max_us = 0;
	h->lo = RX_WHIST_BUCKETS - 1;
	h->hi = 0;
}

static RX__INLINE void rx__whist_add(struct rx_whist *h, uint64_t v)
{
	unsigned i = rx__whist_index(v);

	h->c[i]++;
	h->count++;
	if (i < h->lo)
		h->lo = (uint16_t)i;
	if (i > h->hi)
		h->hi = (uint16_t)i;
}

/*
 * The @q quantile of the samples, µs: the bucket holding rank q * count,
 * linear within it (as Prometheus's histogram_quantile), clamped to the
 * window's smallest (@min_us) and largest sample, so that equal samples
 * give their value exactly. NaN without samples.
 */
static RX__INLINE double rx__whist_quantile(const struct rx_whist *h, double q,
					    uint64_t min_us)
{
	double rank = q * (double)h->count, below = 0, v = 0;
	unsigned i;

	if (h->count == 0)
		return NAN;
	for (i = h->lo; i <= h->hi; i++) {
		if (h->c[i] > 0 && below + h->c[i] >= rank) {
			double lo = rx__whist_low(i), hi = rx__whist_low(i + 1);

			v = lo + (hi - lo) * (rank - below) / h->c[i];
			break;
		}
		below += h->c[i];
	}
	if (v < (double)min_us)
		v = (double)min_us;
	if (v > (double)h->max_us)
		v = (double)h->max_us;
	return v;
}

#endif
