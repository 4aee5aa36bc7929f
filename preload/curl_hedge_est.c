/*
 * preload/curl_hedge_est.c - the per-key estimate of time to first byte
 * that sets the hedging delay (curl_hedge.h, ADR-471): a P-square
 * estimator of the 95th percentile (Jain and Chlamtac, 1985; src/p2.c).
 * Pure: no clock, no lock, no allocation; the caller serialises.
 */
#include "config.h"

#include "curl_hedge.h"

#define NS_PER_MS UINT64_C(1000000)

void rx__hedge_est_init(struct rx_hedge_est *e)
{
	(void)rx_p2_init(&e->p95, 0.95);
}

void rx__hedge_est_add(struct rx_hedge_est *e, uint64_t us)
{
	rx_p2_add(&e->p95, (double)us);
}

uint64_t rx__hedge_est_delay_ns(const struct rx_hedge_est *e,
				uint64_t fixed_ms)
{
	double v;

	if (fixed_ms > 0)
		return fixed_ms * NS_PER_MS;
	if (rx_p2_count(&e->p95) < RX_HEDGE_MIN_SAMPLES)
		return 0;
	v = rx_p2_value(&e->p95);
	if (!(v >= 1000.0))
		return NS_PER_MS;
	return (uint64_t)(v * 1000.0);
}
