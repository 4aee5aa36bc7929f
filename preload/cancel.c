/*
 * preload/cancel.c - the ring of the process's own cancels (cancel.h,
 * ADR-676).
 *
 * Design. Sixteen entries of (key, time), written round-robin from a
 * fetch-add on the head: a note clears the entry's key, stores the time,
 * then publishes the key with release order, so a reader that sees the
 * key sees its time. A take scans every entry (cancels are rare, and
 * only a cancelled answer asks) and claims a match by compare-and-swap
 * to 0, so that two answers never take one cancel. A note that reuses an
 * entry while a take reads it makes that take's swap fail: the cancel
 * is then simply not matched, and its answer stays the timeout it was.
 * Sixteen is far above the cancels a process has in flight within the
 * bound (one per connection it cancels on).
 */
#include "config.h"

#include <stdatomic.h>

#include "cancel.h"

#define RING 16u

static struct {
	_Atomic uint64_t key;
	_Atomic uint64_t at_ns;
} ring[RING];
static atomic_uint head;

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2,
	       "the cancel ring needs lock-free 64-bit atomics (signals)");

void rx__cancel_note(uint64_t key, uint64_t now_ns)
{
	unsigned i;

	if (key == 0)
		return;
	i = atomic_fetch_add_explicit(&head, 1, memory_order_relaxed) % RING;
	atomic_store_explicit(&ring[i].key, 0, memory_order_relaxed);
	atomic_store_explicit(&ring[i].at_ns, now_ns, memory_order_relaxed);
	atomic_store_explicit(&ring[i].key, key, memory_order_release);
}

bool rx__cancel_take(uint64_t key, uint64_t now_ns)
{
	unsigned i;

	if (key == 0)
		return false;
	for (i = 0; i < RING; i++) {
		uint64_t k =
		    atomic_load_explicit(&ring[i].key, memory_order_acquire);
		uint64_t at;

		if (k != key)
			continue;
		at = atomic_load_explicit(&ring[i].at_ns, memory_order_relaxed);
		if (now_ns > at && now_ns - at > RX_CANCEL_BOUND_NS)
			continue;
		if (atomic_compare_exchange_strong_explicit(
			&ring[i].key, &k, 0, memory_order_acq_rel,
			memory_order_relaxed))
			return true;
	}
	return false;
}
