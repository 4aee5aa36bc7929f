/*
 * preload/state.h - RESILIX_STATE_FILE (state.c, ADR-170 to ADR-174,
 * ADR-221, ADR-222): the registry hydrated at start-up and merged back
 * into the file at exit.
 */
#ifndef RESILIX_PRELOAD_STATE_H
#define RESILIX_PRELOAD_STATE_H

#include <stdatomic.h>
#include <stdbool.h>

#include "lock.h"
#include "resilix.h"
#include "shim_config.h"

/*
 * rx__state_setup - validate RESILIX_STATE_FILE, map the buffer and hydrate
 * the file into @reg, which must be empty and not yet shared (start-up,
 * before the shim is ready). Remembers @reg and its locks for the write
 * at exit. Any failure is one line, then guarding without state. Not
 * thread-safe (start-up only); the only allocation is one mmap.
 */
void rx__state_setup(const struct rx_config *cfg, struct rx_registry *reg,
		     struct rx_lock *reg_lock, struct rx_lock *locks);

/*
 * rx__state_after_fork - forked child (atfork child handler): this process
 * writes the file at exit if its own calls settle, and only those count as
 * its own in the merge (ADR-222): the calls its parent made before the fork
 * are the parent's to write. O(1), no system call but getpid.
 */
void rx__state_after_fork(void);

/* Set once a call settled in this process (state.c reads it at exit). */
extern atomic_bool rx__state_dirty;

/* rx__state_touched - a call settled: this process writes the file at
 * exit. Inline: thread-safe, O(1), one relaxed load once set. */
static inline void rx__state_touched(void)
{
	if (!atomic_load_explicit(&rx__state_dirty, memory_order_relaxed))
		atomic_store_explicit(&rx__state_dirty, true,
				      memory_order_relaxed);
}

#endif
