/*
 * limiter-inl.h - the inline half of limiter.c: the limiter's data path,
 * inline in the guard for the same reason as the breaker's (ADR-302):
 * admission under the limit, and the settlement of a sample that does not
 * close its window. A refusal or a queue decision, a drop, a stale limit
 * and a window that may close run out of line in limiter.c.
 * rx_limiter_admit and rx_limiter_settle are these functions. Never
 * installed; included by limiter.c and by the guard, which composes it
 * with the breaker (ADR-320). It sees its P² estimator, never another
 * policy.
 */
#ifndef RESILIX_LIMITER_INL_H
#define RESILIX_LIMITER_INL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "whist-inl.h"
#include "resilix/limiter.h"

/* rx_limiter_admit's answer over the limit: refuse, queue or shed, with
 * the limit L and the backlog (in flight + queued) it found. */
enum rx_decision rx__limiter_admit_over(struct rx_limiter *l,
					const struct rx_admit_ctx *ctx,
					uint64_t limit, uint64_t backlog,
					struct rx_ticket *ticket,
					struct rx_refusal *why);

/* The first evidence after stale_ms: relax a clamped limit and start a
 * new window. */
void rx__limiter_relax(struct rx_limiter *l);

/* Settle a drop (overload or timeout) at @now. */
void rx__limiter_drop(struct rx_limiter *l, const struct rx_ticket *ticket,
		      uint64_t now);

/* Close the window if it has been open for its duration (@open_for ns). */
void rx__limiter_window_due(struct rx_limiter *l, uint64_t now,
			    uint64_t open_for);

/* Might a sample settled at @now (clamped) close the window? The test
 * the fast settlement declines on (ADR-532), and where the shim judges
 * its caller for the window (ADR-686): only the general settlement closes
 * a window. */
static inline bool rx__limiter_window_may_close(const struct rx_limiter *l,
						uint64_t now)
{
	return l->window.count + 1 >= l->cfg.window_min_samples &&
	       rx__sat_sub(now, l->window_start_ns) >= l->window_min_ns;
}

/* The window now open was settled by a saturated caller (ADR-686). */
static inline void rx__limiter_note_caller_busy(struct rx_limiter *l)
{
	if (l->window_open)
		l->window_busy = true;
}

/* Has no evidence been settled for stale_ms, as of @now (clamped)? */
static inline bool rx__limiter_is_stale(const struct rx_limiter *l,
					uint64_t now)
{
	return rx__sat_sub(now, l->last_evidence_ns) >= l->stale_ns;
}

/* The limit L at @now_ns, staleness included: the bands' unit. */
static inline uint32_t rx__limiter_effective_limit(const struct rx_limiter *l,
						   uint64_t now_ns)
{
	uint64_t now = rx__clock_peek(l->last_now_ns, now_ns);
	uint32_t limit = (uint32_t)l->limit; /* in [1, 1000000] */

	if (limit < l->cfg.initial_limit && rx__limiter_is_stale(l, now))
		limit = l->cfg.initial_limit;
	return limit;
}

/* The unit of the bands at @now_ns: L, or while learning (no evidence
 * yet that the upstream queues, ADR-210, ADR-380) max_limit when it binds
 * then, else UINT32_MAX: a default maximum is the learnt limit's ceiling,
 * not a cap on what a healthy program runs at once (ADR-625). */
static inline uint32_t rx__limiter_band_limit(const struct rx_limiter *l,
					      uint64_t now_ns)
{
	return l->learning ? l->learning_cap
			   : rx__limiter_effective_limit(l, now_ns);
}

/* The calls a probe lets in flight: half the limit it drains from, or
 * while learning half the concurrency the program ran before it (the
 * limit may be well above that), not below min_limit. */
static inline uint32_t rx__limiter_probe_slots(const struct rx_limiter *l)
{
	uint32_t from = (uint32_t)l->limit;

	if (l->learning && l->probe_ref_peak < from)
		from = l->probe_ref_peak;
	uint32_t half = from / 2;

	return half > l->cfg.min_limit ? half : l->cfg.min_limit;
}

/* The calls that may be in flight with bands of @limit: all of them, or
 * the probe's slots while a probe drains the upstream's queue. */
static inline uint32_t rx__limiter_slot_limit(const struct rx_limiter *l,
					      uint32_t limit)
{
	uint32_t probe;

	if (!l->probing)
		return limit;
	probe = rx__limiter_probe_slots(l);
	return probe < limit ? probe : limit;
}

/* Admit one call: the only write admit makes. */
static inline void rx__limiter_take_slot(struct rx_limiter *l, uint64_t now_ns,
					 struct rx_ticket *ticket)
{
	l->in_flight = rx__sat_inc32(l->in_flight);
	ticket->start_ns = rx__clock_peek(l->last_now_ns, now_ns);
	ticket->generation = l->drop_epoch;
	ticket->flags = l->in_flight; /* concurrency at admission, itself
					 included */
}

/* rx_limiter_admit. */
static RX__INLINE enum rx_decision
rx__limiter_admit(struct rx_limiter *l, const struct rx_admit_ctx *ctx,
		  struct rx_ticket *ticket, struct rx_refusal *why)
{
	/* No evidence yet that the upstream queues (ADR-210, ADR-380): a
	 * limit enforced then would shed a healthy program's calls, whether
	 * invented before the first window closed or read from latency that
	 * this busy host added. Until then only the maximum binds. */
	uint64_t limit = rx__limiter_band_limit(l, ctx->now_ns);
	uint64_t slots = rx__limiter_slot_limit(l, (uint32_t)limit);
	uint64_t backlog = (uint64_t)l->in_flight + l->queued;

	/* Free slots beyond those the waiters will claim: newcomers do not
	 * overtake the queue. */
	if (RX__UNLIKELY(backlog >= slots))
		return rx__limiter_admit_over(l, ctx, limit, backlog, ticket,
					      why);
	rx__limiter_take_slot(l, ctx->now_ns, ticket);
	return RX_ADMIT;
}

/* A limiter ticket whose slot was given back before its call settled
 * (rx_guard_release_limiter, ADR-654); no admission counts that high. */
#define RX_TICKET_RELEASED UINT32_MAX

/* rx_limiter_settle. */
static RX__INLINE void rx__limiter_settle(struct rx_limiter *l,
					  const struct rx_ticket *ticket,
					  const struct rx_observation *obs)
{
	enum rx_verdict v = obs->verdict;

	/* Given back already: a call that waits on purpose (ADR-654). */
	if (RX__UNLIKELY(ticket->flags == RX_TICKET_RELEASED))
		return;
	l->in_flight = rx__sat_dec32(l->in_flight);
	/* RX_REJECTED and anything unknown: release only. Overload and
	 * timeout are drops; success, answered and transient samples. */
	if ((unsigned)v >= RX_REJECTED)
		return;

	uint64_t now = rx__clock(&l->last_now_ns, obs->now_ns);
	if (RX__UNLIKELY(rx__limiter_is_stale(l, now)))
		rx__limiter_relax(l);
	l->last_evidence_ns = now;
	if (v == RX_OVERLOAD || v == RX_TIMEOUT) {
		rx__limiter_drop(l, ticket, now);
		return;
	}
	/* A wait on purpose is no latency sample (ADR-650). */
	if (RX__UNLIKELY(obs->latency_us == RX_LATENCY_NONE))
		return;

	/* A probe measures only the calls it admitted within its slots: the
	 * others saw the queue it is draining, or (learning, a caller that
	 * could not wait) were let past it. */
	if (l->probing && (ticket->start_ns < l->probe_start_ns ||
			   ticket->flags > rx__limiter_probe_slots(l)))
		return;
	if (!l->window_open) {
		l->window_open = true;
		l->window_start_ns = now;
	}
	if (ticket->flags > l->window_peak)
		l->window_peak = ticket->flags;

	rx__whist_add(&l->window, obs->latency_us);
	if (obs->latency_us > l->window.max_us)
		l->window.max_us = obs->latency_us;
	if (obs->latency_us < l->window_min_us)
		l->window_min_us = obs->latency_us;
	/* window_ns is never below window_min_ms, and most settlements find
	 * the window younger than that: testing the floor first spares
	 * computing the bound (ADR-184). */
	uint64_t open_for = rx__sat_sub(now, l->window_start_ns);
	if (RX__UNLIKELY(l->window.count >= l->cfg.window_min_samples &&
			 open_for >= l->window_min_ns))
		rx__limiter_window_due(l, now, open_for);
}

#endif
