/*
 * preload/keypin.c - pinning a key's guard in the registry, and the pin a
 * thread keeps (ADR-546).
 *
 * A tracked fd pins its guard from connect to close (admit.c), so the
 * registry never evicts a key with a live connection. A program that
 * opens a new connection per request pinned and unpinned the same key once
 * per request: the registry lock twice, a hash lookup, two list
 * operations - about 300 instructions of a new connection. So the last
 * pin a thread gives back, from its second on, is kept, in one of SPARE_SLOTS process-wide
 * slots the thread owns, and the thread's next acquire of the same key
 * takes it without the registry. Any other acquire gives it back first,
 * as a close would have; so does the thread's exit (a thread-specific
 * key's destructor) and a fork, in the child, for the threads that did
 * not come along. A kept pin holds its entry no longer than the key's
 * idle TTL: past it the pin goes back and the acquire finds the entry
 * idle, and fresh, as before. And an acquire that finds the registry full
 * gives every kept pin back first (ADR-595).
 *
 * Not in shared mode (ADR-480), whose pins other processes count, nor
 * for threads beyond SPARE_SLOTS. Each slot is filled by its owning
 * thread only (and by the single-threaded fork child), and emptied with
 * an exchange, by its owner or by a full registry's reclaim; a signal handler's
 * call on the same thread passes through while it is inside the shim
 * (rx__inside), so it never sees a slot half written.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "admit.h"
#include "keypin.h"
#include "log.h"
#include "runtime.h"
#include "shared.h"

#define SPARE_SLOTS RX_KEYPIN_SLOTS
#define spare rx__keypin_spare
#define spare_slot rx__keypin_slot

/* The pin each slot's thread keeps (NULL: none; keypin.h), and whether a
 * thread owns the slot. */
struct rx_guard *_Atomic rx__keypin_spare[SPARE_SLOTS];
static atomic_bool spare_owned[SPARE_SLOTS];
RX_TLS int rx__keypin_slot;
static RX_TLS bool spare_wanted; /* this thread released a pin before */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;
static bool spare_key_ok;
static atomic_bool warned_registry_full;

/* Give @g's pin back to the registry. */
static void unpin(struct rx_guard *g)
{
	struct rx_registry *r = rx__admit_registry();
	struct rx_lock *l = rx__admit_registry_lock();

	rx__lock(l);
	if (rx__shared_on)
		rx__shm_holds[rx_registry_index(r, g)].pins--;
	rx_registry_release(r, g);
	rx__unlock(l);
}

/* Thread exit: the slot's pin goes back, and the slot is free. */
static void spare_exit(void *arg)
{
	int s = (int)(intptr_t)arg - 1;
	struct rx_guard *g;

	if (s < 0 || s >= SPARE_SLOTS)
		return;
	/* Destructors of keys made after ours still run on this thread, and
	 * may connect and close: what they give back is not kept, in a slot
	 * that is no longer this thread's (ADR-595). */
	spare_slot = -1;
	g = atomic_exchange_explicit(&spare[s], NULL, memory_order_relaxed);
	if (g)
		unpin(g);
	atomic_store_explicit(&spare_owned[s], false, memory_order_release);
}

static void spare_key_init(void)
{
	spare_key_ok = pthread_key_create(&spare_key, spare_exit) == 0;
}

/* slot_of_thread's first calls in a thread: claim a slot (-1 when none);
 * out of line (slot_claim), so that every later release is a load and a
 * store with no frame (ADR-583). */
static int slot_find(void)
{
	int s;

	/* A thread's first release keeps nothing: one that connects once -
	 * a short process's only request - never pays for a slot and its
	 * thread-exit key (about 3,600 instructions). */
	if (!spare_wanted) {
		spare_wanted = true;
		return -1;
	}
	spare_slot = -1;
	if (rx__shared_on)
		return -1;
	(void)pthread_once(&spare_once, spare_key_init);
	if (!spare_key_ok)
		return -1;
	for (s = 0; s < SPARE_SLOTS; s++) {
		bool no = false;

		if (atomic_compare_exchange_strong(&spare_owned[s], &no, true))
			break;
	}
	if (s == SPARE_SLOTS)
		return -1;
	if (pthread_setspecific(spare_key, (void *)(intptr_t)(s + 1)) != 0) {
		atomic_store_explicit(&spare_owned[s], false,
				      memory_order_release);
		return -1;
	}
	spare_slot = s + 1;
	return s;
}

/* slot_find with errno preserved: a release on a close's path touches
 * no errno (ADR-633), and pthread_once or pthread_setspecific might. */
static __attribute__((noinline, cold)) int slot_claim(void)
{
	int saved = errno, s = slot_find();

	errno = saved;
	return s;
}

/* This thread's slot, claimed on first use; -1 when none. */
static inline int slot_of_thread(void)
{
	if (__builtin_expect(spare_slot != 0, 1))
		return spare_slot - 1;
	return slot_claim();
}

/* The pin this thread keeps, taken from its slot (NULL: none). */
static struct rx_guard *spare_take(void)
{
	int s = spare_slot - 1;
	struct rx_guard *g;

	if (s < 0)
		return NULL;
	g = atomic_load_explicit(&spare[s], memory_order_relaxed);
	if (g) /* an exchange: a full registry may take it back meanwhile */
		g = atomic_exchange_explicit(&spare[s], NULL,
					     memory_order_relaxed);
	return g;
}

/* The registry @r is full: every pin the threads keep goes back, so that
 * no kept pin - of a thread idle since, or one left in a slot by a path
 * that missed its owner's exit - keeps out a key that would otherwise
 * find room (ADR-595). The slots stay their threads'. Under the registry
 * lock; not in shared mode, which keeps none. */
static void reclaim_kept(struct rx_registry *r)
{
	int s;

	for (s = 0; s < SPARE_SLOTS; s++) {
		struct rx_guard *g;

		if (!atomic_load_explicit(&spare[s], memory_order_relaxed))
			continue;
		g = atomic_exchange_explicit(&spare[s], NULL,
					     memory_order_relaxed);
		if (g)
			rx_registry_release(r, g);
	}
}

/* May a kept pin of @g (a guard of @r) serve an acquire at @now? Not once
 * the entry would have idled past the key's TTL: the registry then starts
 * it afresh. The guard's last use is read under its lock: other threads'
 * pins may be admitting and settling on it meanwhile. */
static bool fresh_enough(struct rx_registry *r, struct rx_guard *g,
			 uint64_t now)
{
	uint64_t ttl = rx__cfg.registry.key_ttl_ms, last;
	struct rx_lock *l;

	if (ttl == 0)
		return true;
	l = &rx__admit_guard_locks()[rx_registry_index(r, g)];
	rx__lock(l);
	last = g->last_used_ns;
	rx__unlock(l);
	return now < last || now - last < ttl * RX_NS_PER_MS;
}

struct rx_guard *rx__key_acquire_hashed(const char *key, size_t len,
					uint32_t hash, uint64_t now)
{
	struct rx_registry *r = rx__admit_registry();
	struct rx_lock *l;
	struct rx_guard *g = spare_take();
	bool short_of_space;

	if (g) {
		if (rx_registry_is(r, g, key, len, hash) &&
		    fresh_enough(r, g, now))
			return g;
		unpin(g); /* another key's, or idle too long */
	}
	l = rx__admit_registry_lock();
	rx__lock(l);
	if (!rx__shared_on &&
	    rx_registry_count(r) >= rx__cfg.registry.max_keys)
		reclaim_kept(r);
	/* A segment's entries are handed out as far as their pages are
	 * reserved, one key ahead: the acquire after the one that took the
	 * last reserves the next, outside the lock (ADR-680). */
	if (rx__shared_on && rx__registry_wants_backing(r)) {
		rx__unlock(l);
		rx__shared_back(1, now);
		rx__lock(l);
	}
	g = rx_registry_acquire_hashed(r, key, len, hash, now);
	if (g && rx__shared_on)
		rx__shm_holds[rx_registry_index(r, g)].pins++;
	/* Short of reserved entries, not of keys: shared.c said why. */
	short_of_space = !g && rx__shared_on && rx__registry_wants_backing(r);
	rx__unlock(l);
	if (rx__shared_on && rx__shared_sweep_due())
		rx__shared_sweep(now, true);
	if (!g && !short_of_space &&
	    !atomic_exchange(&warned_registry_full, true))
		rx__log(RX_LOG_WARN,
			"key=%s event=registry-full max_keys=%u "
			"msg=\"calls to new keys pass through unguarded\"",
			key, rx__cfg.registry.max_keys);
	return g;
}

void rx__key_unpin(struct rx_guard *g)
{
	unpin(g);
}

void rx__key_release(struct rx_guard *g)
{
	int s = slot_of_thread();

	if (s >= 0 && !atomic_load_explicit(&spare[s], memory_order_relaxed)) {
		atomic_store_explicit(&spare[s], g, memory_order_relaxed);
		return;
	}
	unpin(g);
}

void rx__keypin_after_fork_child(struct rx_registry *r)
{
	int mine = spare_slot - 1;
	int s;

	for (s = 0; s < SPARE_SLOTS; s++) {
		struct rx_guard *g;

		if (s == mine)
			continue;
		g = atomic_exchange_explicit(&spare[s], NULL,
					     memory_order_relaxed);
		if (g)
			rx_registry_release(r, g);
		atomic_store_explicit(&spare_owned[s], false,
				      memory_order_relaxed);
	}
}
