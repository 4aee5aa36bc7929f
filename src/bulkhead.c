/*
 * bulkhead.c - the fixed concurrency cap (bulkhead.h).
 *
 * One counter and two refusal counters. admit's fast path is a compare and
 * an increment, settle's a saturating decrement, so the guard can inline
 * both. Waiters ask again instead of holding a place (ADR-420): a bulkhead
 * without a queue has no state that a waiter's timeout, signal or fork
 * could leave behind.
 */
#include <stddef.h>

#include "common.h"
#include "resilix/bulkhead.h"
#include "resilix/error.h"

#define BULKHEAD_MAX 1000000u

void rx_bulkhead_config_default(struct rx_bulkhead_config *cfg)
{
	cfg->max_in_flight = 25; /* resilience4j maxConcurrentCalls */
}

int rx_bulkhead_config_check(const struct rx_bulkhead_config *cfg,
			     const char **why)
{
	const char *msg = NULL;

	if (cfg == NULL)
		msg = "bulkhead configuration is missing";
	else if (cfg->max_in_flight < 1 || cfg->max_in_flight > BULKHEAD_MAX)
		msg = "max_in_flight must be 1 to 1000000 calls";
	if (msg == NULL)
		return RX_OK;
	if (why != NULL)
		*why = msg;
	return RX_EINVAL;
}

int rx_bulkhead_init(struct rx_bulkhead *b,
		     const struct rx_bulkhead_config *cfg)
{
	if (b == NULL || rx_bulkhead_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	b->cfg = *cfg;
	b->in_flight = 0;
	b->refused = 0;
	b->queued = 0;
	return RX_OK;
}

static RX__NOINLINE enum rx_decision full(struct rx_bulkhead *b,
					  const struct rx_admit_ctx *ctx,
					  struct rx_refusal *why)
{
	if (why != NULL) {
		why->reason = RX_REASON_BULKHEAD_FULL;
		why->retry_after_ms = 0;
	}
	if (ctx->can_wait) {
		b->queued = rx__sat_add(b->queued, 1);
		return RX_QUEUE;
	}
	b->refused = rx__sat_add(b->refused, 1);
	return RX_REFUSE;
}

enum rx_decision rx_bulkhead_admit(struct rx_bulkhead *b,
				   const struct rx_admit_ctx *ctx,
				   struct rx_ticket *ticket,
				   struct rx_refusal *why)
{
	if (RX__UNLIKELY(b->in_flight >= b->cfg.max_in_flight))
		return full(b, ctx, why);
	b->in_flight++;
	ticket->start_ns = ctx->now_ns;
	ticket->generation = 0;
	ticket->flags = 0;
	return RX_ADMIT;
}

void rx_bulkhead_settle(struct rx_bulkhead *b, const struct rx_ticket *ticket,
			const struct rx_observation *obs)
{
	(void)ticket;
	(void)obs;
	b->in_flight = rx__sat_dec32(b->in_flight);
}

void rx_bulkhead_stats(const struct rx_bulkhead *b,
		       struct rx_bulkhead_stats *out)
{
	out->max_in_flight = b->cfg.max_in_flight;
	out->in_flight = b->in_flight;
	out->refused = b->refused;
	out->queued = b->queued;
}

static enum rx_decision ops_admit(void *self, const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why)
{
	return rx_bulkhead_admit(self, ctx, ticket, why);
}

static void ops_settle(void *self, const struct rx_ticket *ticket,
		       const struct rx_observation *obs)
{
	rx_bulkhead_settle(self, ticket, obs);
}

const struct rx_policy_ops rx_bulkhead_ops = {
    .name = "bulkhead",
    .admit = ops_admit,
    .settle = ops_settle,
};
