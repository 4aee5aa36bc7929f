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

struct rx_lock {
	atomic_int held;
};

/* How many shim locks this thread holds or is taking: a longjmp out of a
 * signal handler that interrupted a critical section must not let this
 * thread take them again (ADR-226). Counted before the lock is taken and
 * after it is released (signal fences keep the order on this thread), so
 * no instant of holding goes uncounted. Zeroed in a forked child. Defined
 * in runtime.c, with the shim's other per-thread state. */
extern RX_TLS int rx__locks_held;

/* rx__lock - take @l, spinning, yielding every 128 spins. Never call into
 * libc while holding it. */
static inline void rx__lock(struct rx_lock *l)
{
	unsigned spins = 0;

	rx__locks_held++;
	atomic_signal_fence(memory_order_seq_cst);
	while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire)) {
		while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
			if (++spins >= 128) {
				sched_yield();
				spins = 0;
			}
		}
	}
}

/* One try; true when @l is now held. */
static inline bool rx__trylock(struct rx_lock *l)
{
	rx__locks_held++;
	atomic_signal_fence(memory_order_seq_cst);
	if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
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
