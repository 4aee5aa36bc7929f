/*
 * internal.h - private helpers of the policy core; never installed.
 *
 * Two rules of STYLE.md live here so every policy applies them the same
 * way: arithmetic on times and counters saturates instead of wrapping, and
 * a clock reading earlier than the last one seen means "no time passed"
 * (nginx clamps negative deltas the same way). Nothing here allocates,
 * reads a clock or does I/O.
 */
#ifndef RESILIX_INTERNAL_H
#define RESILIX_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resilix/registry.h"

#define RX__NS_PER_MS UINT64_C(1000000)
#define RX__NS_PER_US UINT64_C(1000)

/* Cold paths (state transitions, window closes, rare formulas) kept out
 * of line, so the data path that calls them saves fewer registers and
 * stays short; hot helpers the compiler must inline whatever its size
 * heuristics say (one copy per constant argument); and branch hints for
 * the tests that guard cold paths (ADR-301). All are only hints: without
 * GCC or Clang they expand to nothing (RX__INLINE to plain inline). */
#if defined(__GNUC__) || defined(__clang__)
#define RX__NOINLINE __attribute__((noinline))
#define RX__INLINE inline __attribute__((always_inline))
#define RX__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RX__NOINLINE
#define RX__INLINE inline
#define RX__UNLIKELY(x) (x)
#endif

/* a + b, or UINT64_MAX when the sum does not fit. */
static inline uint64_t rx__sat_add(uint64_t a, uint64_t b)
{
	uint64_t s = a + b;
	return s < a ? UINT64_MAX : s;
}

/* a - b, or 0 when b > a. */
static inline uint64_t rx__sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* a * b, or UINT64_MAX when the product does not fit. The data path
 * converts milliseconds to nanoseconds with it on every call, so where the
 * compiler can, the overflow comes from the multiplication's own flag
 * rather than from a 64-bit division (tens of cycles on common cores). */
static inline uint64_t rx__sat_mul(uint64_t a, uint64_t b)
{
#if defined(__GNUC__) || defined(__clang__)
	uint64_t p;
	if (__builtin_mul_overflow(a, b, &p))
		return UINT64_MAX;
	return p;
#else
	if (a != 0 && b > UINT64_MAX / a)
		return UINT64_MAX;
	return a * b;
#endif
}

/* Increment a 32-bit counter, sticking at UINT32_MAX. */
static inline uint32_t rx__sat_inc32(uint32_t v)
{
	return v == UINT32_MAX ? v : v + 1;
}

/* Decrement a 32-bit counter, sticking at 0 (a double release must not
 * turn into four billion calls in flight). */
static inline uint32_t rx__sat_dec32(uint32_t v)
{
	return v == 0 ? 0 : v - 1;
}

static inline uint64_t rx__ms_to_ns(uint64_t ms)
{
	return rx__sat_mul(ms, RX__NS_PER_MS);
}

/* Whole milliseconds covering @ns, rounded up, so a retry-after never
 * sends a caller back before the moment it names. */
static inline uint64_t rx__ns_to_ms_ceil(uint64_t ns)
{
	return ns / RX__NS_PER_MS + (ns % RX__NS_PER_MS != 0);
}

/*
 * rx__clock - the time a policy acts on: @now_ns, unless it is earlier than
 * the latest time seen (*@last), in which case no time has passed. Updates
 * *@last. Source: STYLE.md "Memory, time, errors".
 */
static inline uint64_t rx__clock(uint64_t *last, uint64_t now_ns)
{
	if (now_ns > *last)
		*last = now_ns;
	return *last;
}

/* The same clamp without recording the reading (read-only stats). */
static inline uint64_t rx__clock_peek(uint64_t last, uint64_t now_ns)
{
	return now_ns > last ? now_ns : last;
}

/*
 * The sliding window's data path (window.c), here so that the breaker's
 * settle compiles it inline: a call into the library costs more than the
 * push itself, and the exported rx_window_* functions cannot be inlined
 * across files (ADR-182). window.c's functions are these.
 */

/* Remove the oldest slot and take it out of the running counters. */
static inline void rx__window_drop_tail(struct rx_window *w)
{
	const struct rx_window_slot *s = &w->slots[w->tail];
	w->failures -= (s->flags & RX_SLOT_FAILURE) != 0;
	w->slow -= (s->flags & RX_SLOT_SLOW) != 0;
	w->tail = w->tail + 1 == w->capacity ? 0 : w->tail + 1;
	w->count--;
}

/* rx_window_expire. */
static inline void rx__window_expire(struct rx_window *w, uint64_t now_ns)
{
	if (w->max_age_ns == 0)
		return;
	while (w->count > 0 &&
	       rx__sat_sub(now_ns, w->slots[w->tail].t_ns) >= w->max_age_ns) {
		rx__window_drop_tail(w);
		w->aged_out = rx__sat_add(w->aged_out, 1);
	}
}

/* rx_window_push without its age eviction, for a caller that has just
 * run rx__window_expire at the same @now_ns (which leaves nothing for a
 * second pass to evict). */
static inline void rx__window_append(struct rx_window *w, uint64_t now_ns,
				     uint32_t flags)
{
	if (w->count == w->capacity)
		rx__window_drop_tail(w);
	uint32_t head = w->tail + w->count;
	if (head >= w->capacity)
		head -= w->capacity;
	flags &= RX_SLOT_FAILURE | RX_SLOT_SLOW;
	w->slots[head].t_ns = now_ns;
	w->slots[head].flags = flags;
	w->slots[head].pad = 0;
	w->count++;
	w->failures += (flags & RX_SLOT_FAILURE) != 0;
	w->slow += (flags & RX_SLOT_SLOW) != 0;
}

/* rx_verdict_is_failure, inline for the breaker's settle. */
static inline bool rx__verdict_is_failure(enum rx_verdict v)
{
	return v == RX_TRANSIENT || v == RX_TIMEOUT;
}

/*
 * The registry's layout, shared with the snapshot code (snapshot.c). An
 * entry is a guard plus its key and bookkeeping; the guard comes first so a
 * struct rx_guard * converts back to its entry. Entries live in one of
 * four places: the free list, pinned (no list), the idle list (unpinned and
 * evictable when last released, in release order: the LRU), or the parked
 * list (unpinned but holding calls in flight or a breaker that is not
 * closed when last released).
 */
#define RX__NIL UINT32_MAX

enum rx__list_id {
	RX__LIST_FREE = 0,
	RX__LIST_PINNED,
	RX__LIST_IDLE,
	RX__LIST_PARKED
};

struct rx__entry {
	struct rx_guard guard;	/* first: rx__entry_of relies on it */
	uint64_t idle_since_ns; /* last use when last released */
	uint32_t hash;
	uint32_t pins;
	uint32_t prev, next; /* list links, entry indices or RX__NIL */
	uint16_t key_len;
	uint8_t list; /* enum rx__list_id */
	char key[RX_KEY_MAX + 1];
};

struct rx__list {
	uint32_t head, tail;
};

struct rx_registry {
	struct rx_registry_config cfg;
	struct rx_guard_config gcfg;
	struct rx__entry *entries;    /* max_keys */
	struct rx_window_slot *slots; /* max_keys x window_calls, or NULL */
	uint32_t *table;	      /* entry index + 1; 0 = empty */
	uint32_t table_mask;	      /* table size - 1, a power of two */
	uint32_t slots_per_key;
	uint32_t count;
	uint64_t overflows;
	uint64_t last_now_ns;
	struct rx__list free, idle, parked;
};

static inline struct rx__entry *rx__entry_of(const struct rx_guard *g)
{
	return (struct rx__entry *)(void *)g;
}

/* Find-or-insert without pinning and without running eviction, for the
 * snapshot loader (registry.c). Returns NULL when no free entry is left.
 * A new entry is on no list until rx__registry_place puts it on one. */
struct rx__entry *rx__registry_insert(struct rx_registry *r, const char *key,
				      size_t len, uint64_t now_ns);

/* Put an unpinned entry on the idle or parked list, as a release does. */
void rx__registry_place(struct rx_registry *r, struct rx__entry *e);

/* Give a live, unpinned entry a fresh guard and take it off its list, for
 * the snapshot merge; rx__registry_place puts it back. */
void rx__registry_reset(struct rx_registry *r, struct rx__entry *e,
			uint64_t now_ns);

#endif
