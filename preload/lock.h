/*
 * preload/lock.h - the shim's lock: a spinlock that yields (inline).
 *
 * Every critical section of the shim is a few hundred instructions without
 * a call into libc, so spinning is cheaper than a futex; yielding after a
 * while keeps a preempted holder from starving its waiters. Being a plain
 * word, it is reset in a forked child by a store (init.c's child handler).
 * Three kinds exist, never nested: the registry lock and the guard locks
 * (admit.c), the fd stripe locks (fdtable.c). Each lock a thread holds or
 * is taking is counted in rx__locks_held, so that a signal handler's call
 * on that thread passes through instead of spinning on its own thread's
 * lock (ADR-226; runtime.h's rx__reentered).
 */
#ifndef RESILIX_PRELOAD_LOCK_H
#define RESILIX_PRELOAD_LOCK_H

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base.h"
#include "thread.h"

struct rx_lock {
	atomic_int held; /* 0 free; else the holder's rx__lock_tag */
};

/* How many shim locks this thread holds or is taking: a longjmp out of a
 * signal handler that interrupted a critical section must not let this
 * thread take them again (ADR-226). Counted before the lock is taken and
 * after it is released (signal fences keep the order on this thread), so
 * no instant of holding goes uncounted. Zeroed in a forked child. Part of
 * the per-thread block (thread.h), with the shim's other flags. */
#define rx__locks_held (rx__thread.locks_held)

/*
 * What a held lock's word says: 1, or - with RESILIX_SHARED, whose locks
 * live in memory several processes map - this process's slot in the
 * segment's process table plus 2 and the slot's generation, so a waiter
 * can tell who holds it (ADR-482, ADR-623). Set at start-up and in a
 * forked child (shared.c).
 */
extern int rx__lock_tag RX_HIDDEN;

/*
 * Called by a waiter that has yielded RX_LOCK_STALL_YIELDS times in a
 * row with @tag the holder's: NULL (no shared segment) or shared.c's
 * liveness check, which takes the lock over - returning true, the lock
 * now held by the caller and repaired - when the holder died inside its
 * critical section. The slow path only: system calls are fine there.
 */
extern bool (*rx__lock_stall)(struct rx_lock *l, int tag) RX_HIDDEN;
#define RX_LOCK_STALL_YIELDS 256

/* rx__lock_wait - the contended half of rx__lock: @l was held at the
 * first try (already counted in rx__locks_held). Spins, yielding every 128
 * spins, until it holds @l. Out of line (runtime.c): the uncontended lock
 * is then one compare-and-swap, and its callers keep no registers for a
 * loop they almost never run (ADR-531). */
void rx__lock_wait(struct rx_lock *l) RX_HIDDEN;

/* rx__lock - take @l. Never call into libc while holding it. */
static inline void rx__lock(struct rx_lock *l)
{
	int seen = 0;

	rx__locks_held++;
	atomic_signal_fence(memory_order_seq_cst);
	if (__builtin_expect(atomic_compare_exchange_weak_explicit(
				 &l->held, &seen, rx__lock_tag,
				 memory_order_acquire, memory_order_relaxed),
			     1))
		return;
	rx__lock_wait(l);
}

/* One try; true when @l is now held. */
static inline bool rx__trylock(struct rx_lock *l)
{
	int seen = 0;

	rx__locks_held++;
	atomic_signal_fence(memory_order_seq_cst);
	if (atomic_compare_exchange_strong_explicit(&l->held, &seen,
						    rx__lock_tag,
						    memory_order_acquire,
						    memory_order_relaxed))
		return true;
	atomic_signal_fence(memory_order_seq_cst);
	rx__locks_held--;
	return false;
}

static inline void rx__unlock(struct rx_lock *l)
{
	atomic_store_explicit(&l->held, 0, memory_order_release);
	atomic_signal_fence(memory_order_seq_cst);
	rx__locks_held--;
}

/* rx__lock_reset - free @l whoever held it (a forked child only). */
static inline void rx__lock_reset(struct rx_lock *l)
{
	atomic_store_explicit(&l->held, 0, memory_order_relaxed);
}

#endif
