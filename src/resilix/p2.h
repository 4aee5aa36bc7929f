/*
 * resilix/p2.h - the P² streaming quantile estimator.
 *
 * Estimates one quantile of a stream without storing it: five markers
 * (heights and positions), O(1) per observation, no allocation, about
 * 100 bytes of state that never grow. The first five observations are kept
 * exactly, so with n <= 5 samples the value is the exact quantile; after
 * that the middle marker tracks the quantile and the outer markers hold the
 * minimum and the maximum.
 *
 * Source: R. Jain and I. Chlamtac, "The P² algorithm for dynamic
 * calculation of quantiles and histograms without storing observations",
 * CACM 28(10):1076-1085, 1985, doi:10.1145/4372.4378. Differences from the
 * paper, all in src/p2.c: desired marker positions are computed from the
 * count instead of being accumulated (no rounding drift), the linear
 * fallback is written as a convex combination (no overflow however far
 * apart the markers are), and non-finite observations are ignored.
 *
 * The adaptive concurrency limiter (limiter.h) uses one estimator per
 * update window for its p90 latency signal.
 */
#ifndef RESILIX_P2_H
#define RESILIX_P2_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The estimator. Fields are public so callers can embed it without
 * allocating; treat them as private and use the functions. */
struct rx_p2 {
	double p;	/* the quantile, 0 < p < 1 */
	double q[5];	/* marker heights; the first count samples, sorted,
			   while count < 5 */
	uint64_t n[5];	/* marker positions, 1-based */
	uint64_t count; /* observations taken */
};

/*
 * rx_p2_init - start an empty estimator of the @p quantile.
 * @p: 0 < p < 1 (0.5 the median, 0.9 the 90th percentile); NaN, 0, 1 and
 *     anything outside are RX_EINVAL, and the estimator is then left empty
 *     with p = 0.5 so that a caller ignoring the error still gets a sane,
 *     finite estimator.
 * Returns RX_OK or RX_EINVAL. Also resets a used estimator.
 * Not thread-safe (callers serialise per estimator); O(1); no allocation.
 */
int rx_p2_init(struct rx_p2 *e, double p);

/*
 * rx_p2_add - take one observation.
 * @x: any finite double. NaN and infinities are ignored (they would poison
 *     the parabolic interpolation of every later estimate). After
 *     UINT64_MAX observations further ones are ignored.
 * Not thread-safe; O(1) (at most four comparisons and three marker
 * adjustments); no allocation. Source: the paper's update step, written
 * without its cell search (ADR-301).
 */
void rx_p2_add(struct rx_p2 *e, double x);

/*
 * rx_p2_value - the current estimate of the p quantile.
 * Returns 0 with no observations. With n <= 5 observations, the exact
 * quantile of them by linear interpolation between closest ranks (rank
 * p(n-1), 0-based: Hyndman and Fan's definition 7, the default of R and
 * NumPy). With more, the P² middle marker, which always lies between the
 * smallest and the largest observation.
 * Not thread-safe; O(1); no allocation.
 */
double rx_p2_value(const struct rx_p2 *e);

/* rx_p2_count - observations taken since init (non-finite ones are not
 * taken). Not thread-safe; O(1); no allocation. */
uint64_t rx_p2_count(const struct rx_p2 *e);

#ifdef __cplusplus
}
#endif
#endif
