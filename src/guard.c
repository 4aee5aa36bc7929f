/*
 * guard.c - one key's policies and telemetry (guard.h).
 *
 * A guard is a gate holding the policies its configuration turns on (today
 * the breaker), plus counters a metrics writer reads: settled calls by
 * verdict, refusals by reason, slow calls, calls in flight. Only RX_REFUSE
 * counts as a refusal: a queue decision may still end in admission, and
 * counting it would report one call twice. The registry reads in_flight
 * and the breaker state to decide what it may evict.
 */
#include <stddef.h>
#include <string.h>

#include "internal.h"
#include "resilix/error.h"
#include "resilix/guard.h"

void rx_guard_config_default(struct rx_guard_config *cfg)
{
	cfg->breaker_on = true;
	rx_breaker_config_default(&cfg->breaker);
}

int rx_guard_config_check(const struct rx_guard_config *cfg, const char **why)
{
	if (cfg == NULL) {
		if (why != NULL)
			*why = "guard configuration is missing";
		return RX_EINVAL;
	}
	if (!cfg->breaker_on)
		return RX_OK;
	return rx_breaker_config_check(&cfg->breaker, why);
}

int rx_guard_init(struct rx_guard *g, const struct rx_guard_config *cfg,
		  struct rx_window_slot *slots, uint64_t now_ns)
{
	if (g == NULL || rx_guard_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	memset(g, 0, sizeof(*g));
	rx_gate_init(&g->gate);
	if (cfg->breaker_on) {
		if (rx_breaker_init(&g->breaker, &cfg->breaker, slots) != RX_OK)
			return RX_EINVAL;
		rx_gate_add(&g->gate, &rx_breaker_ops, &g->breaker);
	}
	/* Without a breaker the zeroed struct reads as closed, which is what
	 * the registry's eviction test wants. */
	g->last_used_ns = now_ns;
	return RX_OK;
}

enum rx_decision rx_guard_admit(struct rx_guard *g,
				const struct rx_admit_ctx *ctx,
				struct rx_gate_permit *permit,
				struct rx_refusal *why)
{
	if (ctx->now_ns > g->last_used_ns)
		g->last_used_ns = ctx->now_ns;
	enum rx_decision d = rx_gate_admit(&g->gate, ctx, permit, why);
	if (d == RX_ADMIT) {
		g->in_flight = rx__sat_inc32(g->in_flight);
	} else if (d == RX_REFUSE) {
		unsigned r = (unsigned)why->reason;
		if (r < RX_REASON_COUNT)
			g->counters.refused[r] =
			    rx__sat_add(g->counters.refused[r], 1);
	}
	return d;
}

void rx_guard_settle(struct rx_guard *g, const struct rx_gate_permit *permit,
		     const struct rx_observation *obs)
{
	if (obs->now_ns > g->last_used_ns)
		g->last_used_ns = obs->now_ns;
	rx_gate_settle(&g->gate, permit, obs);
	g->in_flight = rx__sat_dec32(g->in_flight);
	unsigned v = (unsigned)obs->verdict;
	if (v < RX_VERDICT_COUNT)
		g->counters.settled[v] = rx__sat_add(g->counters.settled[v], 1);
	uint64_t slow_ms = g->breaker.cfg.slow_call_ms;
	if (slow_ms > 0 && obs->verdict != RX_REJECTED &&
	    obs->latency_us >= rx__sat_mul(slow_ms, 1000))
		g->counters.slow = rx__sat_add(g->counters.slow, 1);
}
