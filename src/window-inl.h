/*
 * window-inl.h - the inline half of window.c: the sliding window's data
 * path, so that the breaker's settle compiles it inline (the window is the
 * breaker's data structure): a call into the library costs more than the
 * push itself, and the exported rx_window_* functions cannot be inlined
 * across files (ADR-182). window.c's functions are these. Never installed;
 * included by window.c and breaker-inl.h (ADR-320).
 */
#ifndef RESILIX_WINDOW_INL_H
#define RESILIX_WINDOW_INL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "resilix/window.h"

/* Remove the oldest slot and take it out of the running counters. */
static inline void rx__window_drop_tail(struct rx_window *w)
{
	const struct rx_window_slot *s = &rx_window_slots(w)[w->tail];
	w->failures -= (s->flags & RX_SLOT_FAILURE) != 0;
	w->slow -= (s->flags & RX_SLOT_SLOW) != 0;
	w->tail = w->tail + 1 == w->capacity ? 0 : w->tail + 1;
	w->count--;
}

/* The eviction loop of rx__window_expire, for a tail that is due: out of
 * line (window.c), so the data path that finds the tail young keeps no
 * registers for it (ADR-531). Returns true (it evicts at least one). */
bool rx__window_evict(struct rx_window *w, uint64_t now_ns);

/* rx_window_expire; true when it evicted a slot. Slots are in time order,
 * so a young tail means nothing is due: one load and a compare. */
static inline bool rx__window_expire(struct rx_window *w, uint64_t now_ns)
{
	if (w->max_age_ns == 0 || w->count == 0 ||
	    RX__LIKELY(rx__sat_sub(now_ns, rx_window_slots(w)[w->tail].t_ns) <
		       w->max_age_ns))
		return false;
	return rx__window_evict(w, now_ns);
}

/* rx_window_push without its age eviction, for a caller that has just
 * run rx__window_expire at the same @now_ns (which leaves nothing for a
 * second pass to evict). */
static inline void rx__window_append(struct rx_window *w, uint64_t now_ns,
				     uint32_t flags)
{
	flags &= RX_SLOT_FAILURE | RX_SLOT_SLOW;
	if (w->count == w->capacity) {
		/* A full ring, the steady state: the new slot takes the
		 * oldest one's place, which is the tail, and the tail moves
		 * on; the count stays (ADR-302). */
		struct rx_window_slot *s = &rx_window_slots(w)[w->tail];
		uint32_t old = s->flags;
		/* Mostly a success over a success: the counters stay. */
		if (RX__UNLIKELY(old != flags)) {
			w->failures += (flags & RX_SLOT_FAILURE) -
				       (old & RX_SLOT_FAILURE);
			w->slow += (flags >> 1) - ((old & RX_SLOT_SLOW) >> 1);
		}
		s->t_ns = now_ns;
		s->flags = flags;
		s->pad = 0;
		w->tail = w->tail + 1 == w->capacity ? 0 : w->tail + 1;
		return;
	}
	uint32_t head = w->tail + w->count;
	struct rx_window_slot *slots = rx_window_slots(w);
	if (head >= w->capacity)
		head -= w->capacity;
	slots[head].t_ns = now_ns;
	slots[head].flags = flags;
	slots[head].pad = 0;
	w->count++;
	w->failures += (flags & RX_SLOT_FAILURE) != 0;
	w->slow += (flags & RX_SLOT_SLOW) != 0;
}

#endif
