/*
 * registry-inl.h - the registry's layout, shared by registry.c and the
 * snapshot code (snapshot.c), and the registry's internal entry points the
 * snapshot loader and merge use. Never installed (ADR-320).
 *
 * An entry is a guard plus its key and bookkeeping; the guard comes first
 * so a struct rx_guard * converts back to its entry. Entries live in one of
 * four places: the free list, pinned (no list), the idle list (unpinned and
 * evictable when last released, in release order: the LRU), or the parked
 * list (unpinned but holding calls in flight or a breaker that is not
 * closed when last released). An entry never used since the block was
 * formatted is on none of them: the last `unused` entries are zero (list
 * RX__LIST_FREE, no links) and are handed out in index order once the
 * free list, which holds only entries given back, is empty (ADR-550).
 */
#ifndef RESILIX_REGISTRY_INL_H
#define RESILIX_REGISTRY_INL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resilix/registry.h"

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

/*
 * The registry is one block: this header, then the entries, the hash
 * index and the window slots, each found by its offset from the header's
 * own address - no pointer is stored, so a registry in memory that several
 * processes map at different addresses (RESILIX_SHARED, ADR-480) is read
 * the same from every mapping. rx_registry_create allocates the block;
 * rx_registry_format lays one out in memory the caller provides.
 */
struct rx_registry {
	struct rx_registry_config cfg;
	struct rx_guard_config gcfg;
	uint64_t size;	       /* bytes of the whole block */
	uint64_t entries_off;  /* max_keys entries */
	uint64_t table_off;    /* uint32_t cells: entry index + 1; 0 = empty */
	uint64_t slots_off;    /* max_keys x window_calls slots; 0 = none */
	uint32_t table_mask;   /* table size - 1, a power of two */
	uint32_t slots_per_key;
	uint32_t count;
	uint32_t unused;       /* the last `unused` entries were never used */
	uint32_t backed;       /* entries below this index may be handed out:
				* their memory is known to be there (ADR-680) */
	uint32_t pad;
	uint64_t overflows;
	uint64_t last_now_ns;
	struct rx__list free, idle, parked;
};

static inline struct rx__entry *rx__entries(const struct rx_registry *r)
{
	return (struct rx__entry *)(void *)((char *)(uintptr_t)r +
					    r->entries_off);
}

/* The entries from this index on were never used since the block was
 * formatted: zero, free, their pages possibly never touched. A scan for
 * live keys stops here, so a fork's or an exit's walk over a registry of
 * a few keys faults in a few pages, not one per entry (ADR-666). A count
 * out of range (a torn shared header) scans every entry whose memory is
 * known to be there, and never one past it: in a segment on a full file
 * system, touching such an entry is a SIGBUS (ADR-680). */
static inline uint32_t rx__entries_used(const struct rx_registry *r)
{
	uint32_t backed = r->backed < r->cfg.max_keys ? r->backed
						      : r->cfg.max_keys;

	return r->unused <= r->cfg.max_keys &&
		       r->cfg.max_keys - r->unused <= backed
		   ? r->cfg.max_keys - r->unused
		   : backed;
}

/* rx_registry_wants_backing, inline for the shim's acquire in a segment,
 * which asks it on every new connection (ADR-680). */
static inline bool rx__registry_wants_backing(const struct rx_registry *r)
{
	/* Mostly false at the first test: an entry is reserved ahead. */
	return r->cfg.max_keys - r->unused >= r->backed && r->unused > 0 &&
	       r->free.head == RX__NIL;
}

static inline uint32_t *rx__table(const struct rx_registry *r)
{
	return (uint32_t *)(void *)((char *)(uintptr_t)r + r->table_off);
}

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
