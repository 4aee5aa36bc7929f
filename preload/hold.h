/*
 * preload/hold.h - with RESILIX_SHARED, what this process holds on a key
 * (shared.h): the shared counters read before a guard call and the change
 * after it, both under the key's lock, added to this process's hold row -
 * so a process that dies gives back exactly what it took (ADR-483). Two
 * branches on a word set at start-up when the segment is off. Inline;
 * used by admission and settlement (admit.c) around every guard call.
 */
#ifndef RESILIX_PRELOAD_HOLD_H
#define RESILIX_PRELOAD_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix.h"
#include "shared.h"

struct rx_hold_mark {
	bool on;
	uint32_t calls, lim, probes, queued, bucket;
};

/* rx__hold_begin - before a guard call on @g, under its lock. */
static inline void rx__hold_begin(struct rx_hold_mark *m,
				  const struct rx_guard *g)
{
	m->on = rx__shared_on;
	if (!m->on)
		return;
	m->calls = g->in_flight;
	m->lim = g->limiter.in_flight;
	m->probes = g->breaker.probes_in_flight;
	m->queued = g->limiter.queued;
	m->bucket = rx__shm_busy(g);
}

/* rx__hold_end - after it, still under the lock: add the change to this
 * process's row of @g (a guard of registry @r). */
static inline void rx__hold_end(const struct rx_hold_mark *m,
				const struct rx_registry *r,
				struct rx_guard *g)
{
	struct rx_shm_hold *h;

	if (!m->on)
		return;
	h = &rx__shm_holds[rx_registry_index(r, g)];
	h->calls += (int32_t)(g->in_flight - m->calls);
	h->lim += (int32_t)(g->limiter.in_flight - m->lim);
	h->probes += (int32_t)(g->breaker.probes_in_flight - m->probes);
	h->queued += (int32_t)(g->limiter.queued - m->queued);
	h->bucket += (int32_t)(rx__shm_busy(g) - m->bucket);
}

#endif
