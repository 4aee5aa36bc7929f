/*
 * preload/fdlife.h - the inline steps of a record's life that the
 * connect and close paths run on every new connection (fdtable.h's
 * record, fdtable.c's table): the claim of a record not mapped yet and
 * its publication (ADR-631), the count-off of a number and the free
 * (ADR-580, ADR-547), and a close's forget with its end inline
 * (ADR-633). Lock-free; O(1).
 */
#ifndef RESILIX_PRELOAD_FDLIFE_H
#define RESILIX_PRELOAD_FDLIFE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fdtable.h"
#include "runtime.h"

/* rx__fd_free - @e, detached from its last number, is free again. No
 * lock (ADR-547): the last number was unmapped, so no share can reach the
 * record, and only a claim reads its count now; release: what ending the
 * call wrote is seen by the claim that takes it next. */
static inline void rx__fd_free(struct rx_fd *e)
{
	atomic_store_explicit(&e->refs, 0, memory_order_release);
}

/* rx__fd_count_off - count one number off @e: true when it was the last,
 * and the record is now RX_FD_REFS_ENDING - held, so nobody claims or
 * shares it, until rx__fd_free (ADR-580). No lock: a share's count-in
 * decides against it by the same compare-and-swap. */
static inline bool rx__fd_count_off(struct rx_fd *e)
{
	uint32_t r = 1, to;

	/* A socket's only number, the common close: one try. */
	if (atomic_compare_exchange_strong_explicit(
		&e->refs, &r, RX_FD_REFS_ENDING, memory_order_acq_rel,
		memory_order_relaxed))
		return true;

	do
		to =
		    r > 1 && r != RX_FD_REFS_ENDING ? r - 1 : RX_FD_REFS_ENDING;
	while (!atomic_compare_exchange_weak_explicit(
	    &e->refs, &r, to, memory_order_acq_rel, memory_order_relaxed));
	return to == RX_FD_REFS_ENDING;
}

/*
 * rx__fd_claim - a free record for a connect on @fd, a number whose
 * socket() the shim saw (identity not taken, ADR-545; seen to hold its
 * socket when rx__fd_doubt was @seen) and which has no record: claimed
 * (refs 1) but not mapped, so no other thread can reach it while the
 * connect fills it without a lock; rx__fd_publish maps it (ADR-631).
 * NULL: @fd is not covered, has a record, or none is free. Lock-free,
 * O(1) as rx__fd_for_connect.
 */
struct rx_fd *rx__fd_claim_any(int fd, uint32_t seen); /* any free one */

static inline struct rx_fd *rx__fd_claim(int fd, uint32_t seen)
{
	uint32_t i = (uint32_t)fd + 1, free = 0;
	struct rx_fd *e = &rx__fd_pool[i];

	/* The record of the same index, free unless a duplicate of a
	 * socket once on this number outlived it: inline, the claim's
	 * compare-and-swap (fdtable.c's claim). Else the search. */
	if ((unsigned)fd < rx__fd_capacity_now() && /* so i <= capacity */
	    atomic_load_explicit(&rx__fd_map[fd], memory_order_relaxed) == 0 &&
	    atomic_compare_exchange_strong_explicit(&e->refs, &free, 1,
						    memory_order_acquire,
						    memory_order_relaxed)) {
		atomic_store_explicit(&rx__fd_proven[i], seen,
				      memory_order_relaxed);
		atomic_store_explicit(&e->sock_dev, 0, memory_order_relaxed);
		atomic_store_explicit(&e->sock_ino, 0, memory_order_relaxed);
		return e;
	}
	return rx__fd_claim_any(fd, seen);
}

/* rx__fd_publish - map @fd to @e, claimed by rx__fd_claim and filled:
 * a release, so a thread that finds the record sees what was written
 * into it. false: @fd has a record meanwhile (@e stays unmapped).
 * Sequentially consistent (ADR-631, rx__fd_mark_connected). O(1). */
static inline bool rx__fd_publish(int fd, struct rx_fd *e)
{
	uint32_t none = 0;

	return atomic_compare_exchange_strong_explicit(
	    &rx__fd_map[fd], &none, (uint32_t)(e - rx__fd_pool),
	    memory_order_seq_cst, memory_order_relaxed);
}

/*
 * rx__fd_forget_mapped_by - rx__fd_forget_mapped with @end, which must
 * preserve errno, as the record's end: inline, so that the close path
 * (call.c's rx__call_forget_mapped, ADR-633) reaches the common end of a
 * record without the hook's indirect call. entry_of's checks and
 * rx__fd_unmap in one (ADR-580).
 */
static inline __attribute__((always_inline)) void
rx__fd_forget_mapped_by(int fd, rx_fd_end_fn *end)
{
	uint32_t i;

	if (rx__reentered() || !rx__owner()) {
		/* A tracked number closed or replaced unforgotten: no record
		 * is proven to hold its socket any more (ADR-500). */
		rx__fd_doubt_raise();
		return;
	}
	rx__inside = 1;
	i = atomic_exchange(&rx__fd_map[fd], 0);
	if (i != 0 && rx__fd_count_off(&rx__fd_pool[i])) {
		end(fd, &rx__fd_pool[i]);
		rx__fd_free(&rx__fd_pool[i]);
	}
	rx__inside = 0;
}

#endif
