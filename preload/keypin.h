/*
 * preload/keypin.h - the pins of keys, and the one a thread keeps between
 * a close and its next connect to the same key (ADR-546). The functions
 * that take and give pins, rx__key_acquire_hashed and rx__key_release,
 * are declared in admit.h with the rest of a key's life; here, inline,
 * is how a connect finds the pin its thread kept without a call
 * (ADR-576).
 */
#ifndef RESILIX_PRELOAD_KEYPIN_H
#define RESILIX_PRELOAD_KEYPIN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base.h"
#include "registry-inl.h"
#include "resilix/registry.h"

/* The slots of kept pins (keypin.c): the pin each slot's thread keeps,
 * NULL when none, written by that thread only; and this thread's slot +
 * 1 (0: none yet; -1: none to be had). */
#define RX_KEYPIN_SLOTS 64
extern struct rx_guard *_Atomic rx__keypin_spare[RX_KEYPIN_SLOTS] RX_HIDDEN;
extern RX_TLS int rx__keypin_slot;

/* Are the @n bytes at @a and @b the same? Whole words, the last one
 * overlapping the one before: a key of 8 to 16 bytes ("127.0.0.1:8080")
 * is two compares of each side, with no call. */
static inline bool rx__keypin_same(const char *a, const char *b, size_t n)
{
	uint64_t x, y;
	size_t i;

	if (n < 8)
		return memcmp(a, b, n) == 0;
	if (n <= 16) { /* "ip:port" keys: the two words, no loop */
		uint64_t x2, y2;

		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		memcpy(&x2, a + n - 8, 8);
		memcpy(&y2, b + n - 8, 8);
		return ((x ^ y) | (x2 ^ y2)) == 0;
	}
	for (i = 0; i + 8 < n; i += 8) {
		memcpy(&x, a + i, 8);
		memcpy(&y, b + i, 8);
		if (x != y)
			return false;
	}
	memcpy(&x, a + n - 8, 8);
	memcpy(&y, b + n - 8, 8);
	return x == y;
}

/*
 * rx__key_kept - the pin this thread kept (ADR-546), when it is @key's
 * (@len bytes, @hash its rx_registry_hash: the same test as
 * rx_registry_is); NULL otherwise. The pin stays in the thread's slot
 * until rx__key_kept_take takes it: a connect refused on it leaves it
 * there, with nothing to give back. Its freshness is the caller's to
 * check (rx__key_admit_kept, admit.h); rx__key_unpin gives back one
 * taken and found stale. The fast half of rx__key_acquire_hashed, for a
 * connect, inline (ADR-575, ADR-576). Only with rx__inside set: no signal
 * handler's connect on the thread comes between the two. O(key length).
 */
static inline struct rx_guard *rx__key_kept(const char *key, size_t len,
					    uint32_t hash)
{
	int s = rx__keypin_slot - 1;
	const struct rx__entry *e;
	struct rx_guard *g;

	if (s < 0)
		return NULL;
	g = atomic_load_explicit(&rx__keypin_spare[s], memory_order_relaxed);
	if (!g)
		return NULL;
	e = rx__entry_of(g);
	if (e->hash != hash || e->key_len != len ||
	    !rx__keypin_same(e->key, key, len))
		return NULL;
	return g;
}

/*
 * rx__keypin_after_fork_child - a forked child: the pins kept by threads
 * that did not come along go back to @r (the child's copy of the
 * registry, whose locks are reset already); the forking thread keeps its
 * own. Single-threaded context (the child's atfork handler).
 */
void rx__keypin_after_fork_child(struct rx_registry *r);

/* rx__key_kept_take - the caller keeps the pin rx__key_kept found: the
 * thread's slot is empty again. */
static inline void rx__key_kept_take(void)
{
	atomic_store_explicit(&rx__keypin_spare[rx__keypin_slot - 1], NULL,
			      memory_order_relaxed);
}

/* rx__key_release_inline - rx__key_release (admit.h) with its common
 * case inline: this thread's slot is claimed and empty, and keeps @g
 * (ADR-583, ADR-633); anything else is rx__key_release's. Only with
 * rx__inside set, as rx__key_kept. */
void rx__key_release(struct rx_guard *g);

static inline __attribute__((always_inline)) void
rx__key_release_inline(struct rx_guard *g)
{
	int s = rx__keypin_slot - 1;

	if (__builtin_expect(s >= 0, 1) &&
	    !atomic_load_explicit(&rx__keypin_spare[s], memory_order_relaxed)) {
		atomic_store_explicit(&rx__keypin_spare[s], g,
				      memory_order_relaxed);
		return;
	}
	rx__key_release(g);
}

#endif
