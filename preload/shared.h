/*
 * preload/shared.h - RESILIX_SHARED: the key registry, its locks and wait
 * words in one shared-memory segment that every process of the user
 * naming it maps (shared.c; ADR-480 to ADR-486).
 *
 * The segment is a file (/dev/shm/resilix-NAME, or an absolute path),
 * mode 0600, created O_EXCL|O_NOFOLLOW or opened O_NOFOLLOW and checked:
 * owner, mode, type, magic, version, layout, every size, the settings
 * that shape a guard, the pid namespace. Anything else is refused with
 * one line on stderr and the process guards on its own.
 *
 * Every process takes a slot in the segment's process table (pid and
 * start time) and keeps, per key, what it holds there: pins, calls in
 * flight, limiter slots, half-open probes, queue places (struct
 * rx_shm_hold, its row of the hold table). A process found dead - by a
 * waiter whose lock it holds, or by the sweep at start-up, fork and on
 * refusals - gives those back: the recovery subtracts its row.
 */
#ifndef RESILIX_PRELOAD_SHARED_H
#define RESILIX_PRELOAD_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "lock.h"
#include "resilix.h"
#include "shim_config.h"

#define RX_SHM_PROCS 256 /* process table slots */

/* What one process holds on one key, as changes it made to the shared
 * counters (admit.c measures them around each guard call, under the
 * key's lock). Signed: a settlement may lower a counter another process
 * raised; the recovery gives back only what is above zero. */
struct rx_shm_hold {
	int32_t pins;	/* registry pins (under the registry lock) */
	int32_t calls;	/* guard in_flight */
	int32_t lim;	/* limiter in_flight */
	int32_t probes; /* breaker probes_in_flight */
	int32_t queued; /* limiter queue places */
	int32_t bucket; /* admitted calls counted in the criticality bucket */
	int32_t pad[2];
};

/* The shared mode is on (set at start-up; read-only afterwards). */
extern bool rx__shared_on RX_HIDDEN;
/* This process formatted the segment (it may hydrate the state file). */
extern bool rx__shared_created RX_HIDDEN;
/* This process's row of the hold table: max_keys holds. */
extern struct rx_shm_hold *rx__shm_holds RX_HIDDEN;

/* What a successful attach gives admit.c. */
struct rx_shm_view {
	struct rx_registry *registry;
	struct rx_lock *registry_lock;
	struct rx_lock *guard_locks; /* max_keys */
	void *waits;		     /* max_keys x the wait size asked */
};

/*
 * rx__shared_setup - with cfg->shared set, open or create the segment,
 * check it, map it, take a process slot and sweep the dead. @wait_size:
 * bytes of admit.c's per-key wait record (zeroed at creation). Returns
 * 1 and fills @out; 0 when RESILIX_SHARED is unset; -1 when the segment
 * was refused or cannot be had (one line on stderr said why): the caller
 * goes on per process. Start-up only.
 */
int rx__shared_setup(const struct rx_config *cfg, size_t wait_size,
		     struct rx_shm_view *out);

/* Fork: the prepare handler, holding the registry lock, remembers this
 * process's pins (the child's inherited connections hold them too); the
 * child takes a slot of its own and pins those keys again. */
void rx__shared_before_fork(void);
void rx__shared_after_fork_child(void);

/*
 * rx__shared_sweep - give back what dead processes hold, at most once per
 * RX_SHM_SWEEP_NS host-wide unless @force (a lock was taken over). No
 * lock held by the caller. A few system calls per used slot: the slow
 * paths only (a refusal, a wait).
 */
void rx__shared_sweep(uint64_t now_ns, bool force);

/*
 * rx__shared_back - make sure the next @more keys past those reserved
 * have their pages in the segment (entry, window, lock, wait record), so
 * that the registry may hand them out (ADR-680): before a new key would
 * need one, and before the state file seeds a segment. No lock held by
 * the caller. Returns false when they cannot be had - the file system is
 * full, the file was cut short or replaced - with one line on stderr the
 * first time; then new keys pass through unguarded, as when the registry
 * is full, and a second attempt waits a second. A few system calls, once
 * per key host-wide; false at once without a segment.
 */
bool rx__shared_back(uint32_t more, uint64_t now_ns);

/* A sweep is due (a lock was taken over from a dead process): one load. */
bool rx__shared_sweep_due(void);

/* Which bucket this process's calls count in (RESILIX_CRITICALITY), and
 * its tenant's id (RESILIX_TENANT, default the program's name): the
 * admission context of every call in shared mode (ADR-489). */
extern unsigned rx__shm_bucket RX_HIDDEN;
extern uint32_t rx__shm_tenant RX_HIDDEN;
#define RX_SHM_CTX .bucket = (uint8_t)rx__shm_bucket, .tenant = rx__shm_tenant

/* This process's bucket's calls in flight on @g: what a hold counts. */
static inline uint32_t rx__shm_busy(const struct rx_guard *g)
{
	return g->partition.busy[rx__shm_bucket % RX_BUCKET_COUNT];
}

/*
 * What this process holds on a key, measured (ADR-483): the shared
 * counters read before a guard call and the change after it, both under
 * the key's lock, added to this process's hold row - so a process that
 * dies gives back exactly what it took. Two branches on a word set at
 * start-up when the segment is off.
 */
struct rx_shm_mark {
	bool on;
	uint32_t calls, lim, probes, queued, bucket;
	struct rx_shm_hold *hold; /* this process's, for the key */
};

/* Before the guard call on @g, whose lock (key slot @slot) is held. */
static inline void rx__shm_mark_begin(struct rx_shm_mark *m,
				      const struct rx_guard *g, ptrdiff_t slot)
{
	m->on = rx__shared_on;
	if (!m->on)
		return;
	m->hold = &rx__shm_holds[slot];
	m->calls = g->in_flight;
	m->lim = g->limiter.in_flight;
	m->probes = g->breaker.probes_in_flight;
	m->queued = g->limiter.queued;
	m->bucket = rx__shm_busy(g);
}

/* After it, the lock still held: the changes go to the hold row. */
static inline void rx__shm_mark_end(const struct rx_shm_mark *m,
				    const struct rx_guard *g)
{
	struct rx_shm_hold *h = m->hold;

	if (!m->on)
		return;
	h->calls += (int32_t)(g->in_flight - m->calls);
	h->lim += (int32_t)(g->limiter.in_flight - m->lim);
	h->probes += (int32_t)(g->breaker.probes_in_flight - m->probes);
	h->queued += (int32_t)(g->limiter.queued - m->queued);
	h->bucket += (int32_t)(rx__shm_busy(g) - m->bucket);
}

#endif
