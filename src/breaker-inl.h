/*
 * breaker-inl.h - the inline half of breaker.c: the breaker's data path,
 * so that the guard compiles it inline (ADR-302): a closed breaker admits
 * and records a settlement without a call. Everything else - the open and
 * half-open states, a release, an unknown verdict, a trip, new rate
 * cut-offs - is out of line in breaker.c, behind one test.
 * rx_breaker_admit and rx_breaker_settle are these functions. Never
 * installed; included by breaker.c and by the guard, which composes it
 * with the limiter (ADR-320). It sees the window and the verdicts, never
 * another policy.
 */
#ifndef RESILIX_BREAKER_INL_H
#define RESILIX_BREAKER_INL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "resilix/breaker.h"
#include "verdict-inl.h"
#include "window-inl.h"

/* The smallest window a starved breaker decides on (ADR-113). */
#define RX__STARVED_MIN_CALLS 5u

/* rx_breaker_admit past the clock, for a breaker that is not closed. */
enum rx_decision rx__breaker_admit_cold(struct rx_breaker *b, uint64_t now,
					struct rx_ticket *ticket,
					struct rx_refusal *why);

/* rx_breaker_settle past the clock and the generation test, for a breaker
 * that is not closed, RX_REJECTED, or a verdict out of range. */
void rx__breaker_settle_cold(struct rx_breaker *b,
			     const struct rx_ticket *ticket,
			     const struct rx_observation *obs, uint64_t now);

/* Open the circuit at @now. */
void rx__breaker_trip(struct rx_breaker *b, uint64_t now);

/* Cache the rate cut-offs for a window of @n calls (ADR-183). */
void rx__breaker_cutoffs(struct rx_breaker *b, uint32_t n);

/* rx__breaker_is_slow - is a call of @latency_us slow for @b: the
 * slow-call threshold is on and reached, and the call did not wait on
 * purpose (RX_LATENCY_NONE is no duration, ADR-650). */
static inline bool rx__breaker_is_slow(const struct rx_breaker *b,
				       uint64_t latency_us)
{
	return b->slow_call_us > 0 && latency_us >= b->slow_call_us &&
	       latency_us != RX_LATENCY_NONE;
}

/* rx__breaker_fast_bound - the least latency in µs that a settlement
 * without a slow-call test must leave to the general steps: one unsigned
 * comparison, latency_us >= bound, catches every slow call and every
 * RX_LATENCY_NONE. With the threshold off it is RX_LATENCY_NONE itself
 * (the subtraction wraps); with it on, one µs below the threshold, so a
 * call of exactly threshold - 1 µs also goes the general way, which
 * settles it the same (ADR-670). */
static inline uint64_t rx__breaker_fast_bound(const struct rx_breaker *b)
{
	return b->slow_call_us - 1u;
}

/* rx_breaker_admit. */
static RX__INLINE enum rx_decision rx__breaker_admit(struct rx_breaker *b,
						     uint64_t now_ns,
						     struct rx_ticket *ticket,
						     struct rx_refusal *why)
{
	uint64_t now = rx__clock(&b->last_now_ns, now_ns);

	if (RX__UNLIKELY(b->state != RX_BREAKER_CLOSED))
		return rx__breaker_admit_cold(b, now, ticket, why);
	ticket->flags = 0;
	ticket->start_ns = now;
	ticket->generation = b->generation;
	return RX_ADMIT;
}

/* rx__breaker_judge_closed - a closed breaker's trip rules on its counts
 * as they stand at @now: the consecutive-failure backstop, then the
 * failure and slow-call rates over a window of at least the minimum
 * calls (or a starved one's floor). After each settlement, and after a
 * restore from a snapshot, which may bring counts past a rule (ADR-684).
 * The rates are compared through cut-offs cached for the window's size,
 * which stays put once the window is full: a division per settlement
 * becomes two integer comparisons (ADR-183). */
static RX__INLINE void rx__breaker_judge_closed(struct rx_breaker *b,
						uint64_t now)
{
	const struct rx_window *w = &b->window;
	uint32_t n = w->count;

	if (b->cfg.consecutive_backstop > 0 &&
	    b->consecutive_failures >= b->cfg.consecutive_backstop) {
		rx__breaker_trip(b, now);
		return;
	}
	if (n < b->min_calls && !(b->starving && n >= RX__STARVED_MIN_CALLS))
		return;
	if (RX__UNLIKELY(n != b->cutoff_n))
		rx__breaker_cutoffs(b, n);
	if (RX__UNLIKELY(w->failures >= b->failure_cutoff ||
			 (b->slow_call_us > 0 && w->slow >= b->slow_cutoff)))
		rx__breaker_trip(b, now);
}

/* Record one closed-state settlement and trip if a condition holds
 * (rx__breaker_judge_closed). */
static RX__INLINE void rx__breaker_record_closed(struct rx_breaker *b,
						 uint64_t now, bool failure,
						 bool slow, enum rx_verdict v)
{
	struct rx_window *w = &b->window;

	if (rx__window_expire(w, now) && w->count < b->min_calls)
		b->starving = true;
	rx__window_append(w, now,
			  (failure ? RX_SLOT_FAILURE : 0) |
			      (slow ? RX_SLOT_SLOW : 0));
	if (w->count >= b->min_calls)
		b->starving = false;

	if (failure)
		b->consecutive_failures =
		    rx__sat_inc32(b->consecutive_failures);
	else if (v == RX_SUCCESS || v == RX_ANSWERED)
		b->consecutive_failures = 0;
	rx__breaker_judge_closed(b, now);
}

/* rx_breaker_settle. */
static RX__INLINE void rx__breaker_settle(struct rx_breaker *b,
					  const struct rx_ticket *ticket,
					  const struct rx_observation *obs)
{
	uint64_t now = rx__clock(&b->last_now_ns, obs->now_ns);
	enum rx_verdict v = obs->verdict;

	if (ticket->generation != b->generation)
		return; /* late: the call saw a state that is gone */
	if (RX__UNLIKELY(b->state != RX_BREAKER_CLOSED ||
			 (unsigned)v >= RX_REJECTED)) {
		rx__breaker_settle_cold(b, ticket, obs, now);
		return;
	}
	rx__breaker_record_closed(b, now, rx__verdict_is_failure(v),
				  rx__breaker_is_slow(b, obs->latency_us), v);
}

#endif
