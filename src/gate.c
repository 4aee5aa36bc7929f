/*
 * gate.c - runs an ordered list of policies as one (gate.h, ADR-004).
 *
 * Admission asks each policy in order and stops at the first that does not
 * admit. Everything admitted before it is released at once by settling its
 * ticket with RX_REJECTED (ADR-007), in reverse order so that each policy
 * sees its release before anything that happened after its admission. The
 * refusing policy's decision and reason are returned unchanged; a queue
 * decision is passed through so a blocking caller can wait and ask again.
 *
 * rx_gate_admit_last serves the limiter's waiters (ADR-131): a waiter's
 * slot comes from rx_limiter_try_dequeue, outside the gate, so the
 * policies before the limiter are asked afresh at that moment (the breaker
 * may have opened while the call waited) and the pre-obtained ticket takes
 * the last place; a refusal releases it like any other admission.
 */
#include <stddef.h>

#include "resilix/error.h"
#include "resilix/gate.h"

void rx_gate_init(struct rx_gate *g)
{
	g->count = 0;
}

int rx_gate_add(struct rx_gate *g, const struct rx_policy_ops *ops, void *self)
{
	if (g == NULL || ops == NULL || self == NULL || ops->admit == NULL ||
	    ops->settle == NULL)
		return RX_EINVAL;
	if (g->count >= RX_GATE_MAX_POLICIES)
		return RX_ENOSPC;
	g->policies[g->count].ops = ops;
	g->policies[g->count].self = self;
	g->count++;
	return RX_OK;
}

/* Release tickets [0, n) of @permit in reverse order (ADR-007). */
static void release_first(struct rx_gate *g, struct rx_gate_permit *permit,
			  uint32_t n, uint64_t now_ns)
{
	struct rx_observation rel = {
	    .verdict = RX_REJECTED,
	    .latency_us = 0,
	    .now_ns = now_ns,
	};
	while (n-- > 0)
		g->policies[n].ops->settle(g->policies[n].self,
					   &permit->tickets[n], &rel);
}

/*
 * Ask policies [0, n) in order, each with its ticket primed at the admit
 * time. The first that does not admit stops the run: the ones before it
 * are released (ADR-007) and its decision returned.
 */
static enum rx_decision admit_first(struct rx_gate *g,
				    const struct rx_admit_ctx *ctx,
				    struct rx_gate_permit *permit, uint32_t n,
				    struct rx_refusal *why)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct rx_gate_entry *e = &g->policies[i];
		struct rx_ticket *t = &permit->tickets[i];
		t->start_ns = ctx->now_ns;
		t->generation = 0;
		t->flags = 0;
		enum rx_decision d = e->ops->admit(e->self, ctx, t, why);
		if (d != RX_ADMIT) {
			release_first(g, permit, i, ctx->now_ns);
			return d;
		}
	}
	return RX_ADMIT;
}

enum rx_decision rx_gate_admit(struct rx_gate *g,
			       const struct rx_admit_ctx *ctx,
			       struct rx_gate_permit *permit,
			       struct rx_refusal *why)
{
	why->reason = RX_REASON_NONE;
	why->retry_after_ms = 0;
	permit->count = 0;
	enum rx_decision d = admit_first(g, ctx, permit, g->count, why);
	if (d == RX_ADMIT)
		permit->count = g->count;
	return d;
}

enum rx_decision rx_gate_admit_last(struct rx_gate *g,
				    const struct rx_admit_ctx *ctx,
				    const struct rx_ticket *last,
				    struct rx_gate_permit *permit,
				    struct rx_refusal *why)
{
	why->reason = RX_REASON_NONE;
	why->retry_after_ms = 0;
	permit->count = 0;
	if (g->count == 0)
		return RX_ADMIT;
	uint32_t n = g->count - 1;
	permit->tickets[n] = *last;
	enum rx_decision d = admit_first(g, ctx, permit, n, why);
	if (d != RX_ADMIT) {
		/* The last policy's admission, taken earlier, goes too. */
		struct rx_observation rel = {RX_REJECTED, 0, ctx->now_ns};
		g->policies[n].ops->settle(g->policies[n].self, last, &rel);
		return d;
	}
	permit->count = g->count;
	return RX_ADMIT;
}

void rx_gate_settle(struct rx_gate *g, const struct rx_gate_permit *permit,
		    const struct rx_observation *obs)
{
	uint32_t n = permit->count < g->count ? permit->count : g->count;
	for (uint32_t i = 0; i < n; i++)
		g->policies[i].ops->settle(g->policies[i].self,
					   &permit->tickets[i], obs);
}
