/*
 * resilix/window.h - the dual-bound sliding window of call outcomes.
 *
 * Holds the last `capacity` calls and only those younger than max_age_ns.
 * A preallocated ring with running counters: push is O(1), eviction by age
 * advances the tail (amortised O(1) per call, each slot leaves once).
 * Storage is supplied by the caller, so nothing here allocates. Source:
 * resilience4j's count window (ring + running totals), with exact per-call
 * stamps for the age bound; the data path is inline in the breaker
 * (ADR-182). Thread safety: none; callers serialise per window.
 */
#ifndef RESILIX_WINDOW_H
#define RESILIX_WINDOW_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	RX_SLOT_FAILURE = 1u, /* transient or timeout */
	RX_SLOT_SLOW = 2u     /* latency >= slow threshold */
};

struct rx_window_slot {
	uint64_t t_ns;  /* settlement time, monotonic ns */
	uint32_t flags; /* RX_SLOT_* */
	uint32_t pad;
};

/* The slots' address relative to the window's own (self-relative, not a
 * pointer): a window in memory that processes map at different addresses
 * (a shared registry, ADR-480) reaches its slots from each mapping. Read
 * it with rx_window_slots; a window is never copied by value. */
struct rx_window {
	int64_t slots_off;
	uint32_t capacity;  /* N, >= 1 */
	uint32_t tail;      /* index of the oldest slot */
	uint32_t count;     /* slots in use, <= capacity */
	uint32_t failures;  /* running count of RX_SLOT_FAILURE in use */
	uint32_t slow;      /* running count of RX_SLOT_SLOW in use */
	uint64_t max_age_ns; /* 0 = no age bound */
	uint64_t aged_out;   /* slots evicted by age since init (telemetry,
	                        and the breaker's starvation signal) */
};

/* rx_window_slots - the window's slot array. O(1). */
static inline struct rx_window_slot *rx_window_slots(const struct rx_window *w)
{
	return (struct rx_window_slot *)(void *)((char *)(uintptr_t)w +
						 w->slots_off);
}

/*
 * rx_window_init - bind a window to caller storage.
 * @slots:      array of @capacity slots, outlives the window; not NULL.
 * @capacity:   1 .. 1 000 000.
 * @max_age_ns: 0 (count bound only) or the age bound in ns.
 * Returns RX_OK, or RX_EINVAL for NULL storage or a capacity out of range.
 * Not thread-safe; O(1); no allocation.
 */
int rx_window_init(struct rx_window *w, struct rx_window_slot *slots,
                   uint32_t capacity, uint64_t max_age_ns);

/*
 * rx_window_expire - evict slots whose age (now_ns - t_ns) is >= max_age_ns,
 * so the window holds only calls strictly younger than max age. A slot
 * stamped later than @now_ns has age 0. @now_ns: monotonic ns. No effect
 * when max_age_ns is 0. Amortised O(1): each slot leaves once. Not
 * thread-safe; no allocation.
 */
void rx_window_expire(struct rx_window *w, uint64_t now_ns);

/* rx_window_push - record one outcome at @now_ns, monotonic ns (evicting
 * the oldest when full, and anything past max age). @flags: RX_SLOT_*
 * bits; any other bit is ignored. O(1) amortised, not thread-safe, no
 * allocation. */
void rx_window_push(struct rx_window *w, uint64_t now_ns, uint32_t flags);

/* rx_window_clear - forget every slot (aged_out is kept). O(1), not
 * thread-safe, no allocation. */
void rx_window_clear(struct rx_window *w);

#ifdef __cplusplus
}
#endif
#endif
