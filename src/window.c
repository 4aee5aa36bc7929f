/*
 * window.c - the dual-bound sliding window (window.h).
 *
 * A ring of caller-owned slots holds the last `capacity` outcomes in
 * settlement order; running counters of failures and slow calls make every
 * rate O(1) to read. Two bounds evict from the tail: the count bound when a
 * push finds the ring full, and the age bound (strictly younger than
 * max_age_ns stays) whenever the window is touched with a time. Slots enter
 * in time order because callers pass a clock that never goes back
 * (common.h), so age eviction can stop at the first young slot; that is
 * what makes it amortised O(1). Source: resilience4j's count window (ring +
 * running totals); the age bound replaces its one-second buckets with exact
 * per-call stamps, which a 16-byte slot affords.
 */
#include <stddef.h>

#include "window-inl.h"
#include "resilix/error.h"
#include "resilix/window.h"

#define WINDOW_CAPACITY_MAX 1000000u

int rx_window_init(struct rx_window *w, struct rx_window_slot *slots,
		   uint32_t capacity, uint64_t max_age_ns)
{
	if (w == NULL || slots == NULL || capacity == 0 ||
	    capacity > WINDOW_CAPACITY_MAX)
		return RX_EINVAL;
	w->slots_off = (int64_t)((intptr_t)slots - (intptr_t)w);
	w->capacity = capacity;
	w->max_age_ns = max_age_ns;
	w->aged_out = 0;
	rx_window_clear(w);
	return RX_OK;
}

bool rx__window_evict(struct rx_window *w, uint64_t now_ns)
{
	while (w->count > 0 &&
	       rx__sat_sub(now_ns, rx_window_slots(w)[w->tail].t_ns) >=
		   w->max_age_ns) {
		rx__window_drop_tail(w);
		w->aged_out = rx__sat_add(w->aged_out, 1);
	}
	return true;
}

/* The bodies are in window-inl.h, where the breaker inlines them. */
void rx_window_expire(struct rx_window *w, uint64_t now_ns)
{
	rx__window_expire(w, now_ns);
}

void rx_window_push(struct rx_window *w, uint64_t now_ns, uint32_t flags)
{
	rx__window_expire(w, now_ns);
	rx__window_append(w, now_ns, flags);
}

void rx_window_clear(struct rx_window *w)
{
	w->tail = 0;
	w->count = 0;
	w->failures = 0;
	w->slow = 0;
}
