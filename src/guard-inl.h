/*
 * guard-inl.h - the inline half of guard.c's fast admission and
 * settlement (ADR-531, ADR-532): the default policies' common case,
 * inline in the shim's kept-alive cycle so that a round trip pays no
 * call, no frame and no argument copy for it (ADR-586).
 * rx_guard_admit_fast and rx_guard_settle_fast are these functions. Never
 * installed; included by guard.c and by the shim's admission header. It
 * composes the breaker's and the limiter's inline halves, as the guard
 * does.
 */
#ifndef RESILIX_GUARD_INL_H
#define RESILIX_GUARD_INL_H

#include <stdbool.h>
#include <stdint.h>

#include "breaker-inl.h"
#include "common.h"
#include "limiter-inl.h"
#include "resilix/guard.h"

/* rx_guard_admit_fast's steps before its shares and its count of calls in
 * flight: for a closed breaker and a limiter below its slots, the two
 * tickets (false, nothing changed, otherwise). */
static inline bool rx__guard_admit_tickets(struct rx_guard *g, uint64_t now_ns,
					   struct rx_gate_permit *permit)
{
	struct rx_breaker *b = &g->breaker;
	struct rx_limiter *l = &g->limiter;
	uint64_t slots;

	if (RX__UNLIKELY(!g->plain || b->state != RX_BREAKER_CLOSED))
		return false;
	slots = rx__limiter_slot_limit(l, rx__limiter_band_limit(l, now_ns));
	if (RX__UNLIKELY((uint64_t)l->in_flight + l->queued >= slots))
		return false;
	if (now_ns > g->last_used_ns)
		g->last_used_ns = now_ns;
	permit->tickets[0].start_ns = rx__clock(&b->last_now_ns, now_ns);
	permit->tickets[0].generation = b->generation;
	permit->tickets[0].flags = 0;
	rx__limiter_take_slot(l, now_ns, &permit->tickets[1]);
	permit->count = 2;
	return true;
}

/* rx_guard_admit_fast at @now_ns for a guard without shares, inline:
 * the same answer and writes; false, nothing changed, with shares too (the
 * caller asks rx_guard_admit_fast, whose shares need the context). */
static RX__INLINE bool rx__guard_admit_fast(struct rx_guard *g, uint64_t now_ns,
					    struct rx_gate_permit *permit)
{
	if (RX__UNLIKELY(g->shares_on) ||
	    !rx__guard_admit_tickets(g, now_ns, permit))
		return false;
	g->in_flight = rx__sat_inc32(g->in_flight);
	return true;
}

/*
 * The part of rx__guard_settle_fast's case that only the general
 * settlement (and a restore) moves (ADR-587): the default policies, the
 * breaker closed, its window a full ring of the cut-offs' size below both
 * cut-offs; the limiter neither probing nor with its window closed. The
 * admissions never move these: a closed breaker admits with its ticket
 * alone, an open one moves only to half-open, and the limiter's admission
 * touches its queue and slots, never its window or probe. Kept in
 * g->steady by rx_guard_settle; the fast settlement moves none of it.
 */
static inline bool rx__guard_steady(const struct rx_guard *g)
{
	const struct rx_breaker *b = &g->breaker;
	const struct rx_window *w = &b->window;
	const struct rx_limiter *l = &g->limiter;

	return g->plain && b->state == RX_BREAKER_CLOSED &&
	       w->count == w->capacity && w->count == b->cutoff_n &&
	       w->failures < b->failure_cutoff &&
	       !(b->slow_call_us > 0 && w->slow >= b->slow_cutoff) &&
	       !l->probing && l->window_open;
}

/*
 * rx_guard_settle_fast, inline (its contract: resilix/guard.h). The steps
 * of rx_guard_settle for the default policies' two tickets and a success
 * that moves no count (ADR-532): the breaker closed at the ticket's
 * generation, its window a full ring whose oldest slot is a young
 * success, at the cut-offs' size, below both cut-offs; the limiter fresh,
 * not probing, its window open and not due. Every test that leads
 * elsewhere is asked before any write; the writes are then exactly the
 * general steps' for that case.
 */
static inline bool rx__guard_settle_fast(struct rx_guard *g,
					 const struct rx_gate_permit *permit,
					 uint64_t latency_us, uint64_t now_ns)
{
	struct rx_breaker *b = &g->breaker;
	struct rx_window *w = &b->window;
	struct rx_limiter *l = &g->limiter;
	struct rx_window_slot *s;
	uint64_t bnow, lnow;

	/* g->steady: rx__guard_steady, as the last general settlement left
	 * it; what it does not cover is asked here, before any write. */
	if (RX__UNLIKELY(!g->steady || permit->count != 2 ||
			 permit->tickets[0].generation != b->generation ||
			 latency_us >= rx__breaker_fast_bound(b) ||
			 permit->tickets[1].flags == RX_TICKET_RELEASED))
		return false;
	bnow = rx__clock_peek(b->last_now_ns, now_ns);
	s = &rx_window_slots(w)[w->tail];
	/* A success over a success: no eviction, no count moves, so no
	 * new cut-offs and no trip (rx__breaker_record_closed). */
	if (RX__UNLIKELY(s->flags != 0 ||
			 (w->max_age_ns != 0 &&
			  rx__sat_sub(bnow, s->t_ns) >= w->max_age_ns)))
		return false;
	lnow = rx__clock_peek(l->last_now_ns, now_ns);
	/* rx__limiter_window_may_close, written out: through the helper
	 * GCC kept count + 1 in a stack slot for the update below, a store
	 * and a load more on the kept-alive round trip (ADR-686). */
	if (RX__UNLIKELY(rx__limiter_is_stale(l, lnow) ||
			 (l->window.count + 1 >= l->cfg.window_min_samples &&
			  rx__sat_sub(lnow, l->window_start_ns) >=
			      l->window_min_ns)))
		return false;
	if (now_ns > g->last_used_ns)
		g->last_used_ns = now_ns;
	/* The breaker: the slot, the tail, the closed state's marks. */
	b->last_now_ns = bnow;
	s->t_ns = bnow;
	s->pad = 0;
	w->tail = w->tail + 1 == w->capacity ? 0 : w->tail + 1;
	b->starving = false;
	b->consecutive_failures = 0;
	/* The limiter: the slot back, the sample in the window. */
	l->in_flight = rx__sat_dec32(l->in_flight);
	l->last_now_ns = lnow;
	l->last_evidence_ns = lnow;
	if (permit->tickets[1].flags > l->window_peak)
		l->window_peak = permit->tickets[1].flags;
	rx__whist_add(&l->window, latency_us);
	if (latency_us > l->window.max_us)
		l->window.max_us = latency_us;
	if (latency_us < l->window_min_us)
		l->window_min_us = latency_us;
	/* The guard's counters; not slow (tested above). */
	g->in_flight = rx__sat_dec32(g->in_flight);
	g->counters.settled[RX_SUCCESS] =
	    rx__sat_add(g->counters.settled[RX_SUCCESS], 1);
	return true;
}

/*
 * rx_guard_limiter_window_due, inline (resilix/guard.h): might a sample
 * settled at @now_ns close the limiter's window? False with the limiter
 * off. Reads only; O(1).
 */
static inline bool rx__guard_limiter_window_due(const struct rx_guard *g,
						uint64_t now_ns)
{
	const struct rx_limiter *l = &g->limiter;

	return g->limiter_on &&
	       rx__limiter_window_may_close(
		   l, rx__clock_peek(l->last_now_ns, now_ns));
}

#endif
