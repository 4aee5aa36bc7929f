/*
 * preload/fdmark.h - what the shim saw socket() return on a number, for
 * the connect that follows (ADR-542, ADR-543): its kind, and whether it
 * was made non-blocking. The array lives beside the fd records (mapped
 * with them by rx__fdtable_init); these are its only readers and writers.
 * All O(1), lock-free and async-signal-safe.
 */
#ifndef RESILIX_PRELOAD_FDMARK_H
#define RESILIX_PRELOAD_FDMARK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fdtable.h"

/*
 * Per fd: what the shim saw socket() return on the number (ADR-542), so
 * that a connect on it needs no getsockopt(SO_TYPE) to learn the type and
 * no getpeername to learn that it is not connected yet: 0, nothing known;
 * else the kind (RX_MARK_*) in the high half and rx__fd_doubt's value
 * when it was set in the low half - a close of the number the shim did
 * not see raises the doubt, and the mark is void. Every close the shim
 * sees clears it; a connect takes it. Beside the records, additive.
 */
extern _Atomic uint64_t *rx__fd_marks RX_HIDDEN;

#define RX_MARK_STREAM 1u /* AF_INET/AF_INET6 SOCK_STREAM, never connected */
#define RX_MARK_OTHER 2u  /* any other socket: never a call */
/* A stream socket's mark once a connect took it (rx__fd_mark_take): read
 * as nothing known by a later connect, and by the connect that took it,
 * whose record is published only when the real connect returns, the
 * proof that no close, duplicate or new socket() touched the number
 * meanwhile (rx__fd_mark_connected, ADR-631). */
#define RX_MARK_CONNECTING 4u
#define RX_MARK_KIND ((uint64_t)0xffu << 32)
/* Beside the kind, and kept by a connect: made non-blocking by socket(),
 * fcntl(F_SETFL) or ioctl(FIONBIO), as far as the shim saw (ADR-543,
 * ADR-619). */
#define RX_MARK_NONBLOCK 0x100u

/* rx__fd_mark_set_at - socket() just returned @fd, below the table's
 * capacity, a socket of @kind (RX_MARK_*). O(1); async-signal-safe. */
static inline void rx__fd_mark_set_at(int fd, unsigned kind)
{
	atomic_store_explicit(
	    &rx__fd_marks[(unsigned)fd],
	    (uint64_t)kind << 32 |
		atomic_load_explicit(&rx__fd_doubt, memory_order_relaxed),
	    memory_order_relaxed);
}

/* rx__fd_mark_set - rx__fd_mark_set_at for any @fd: nothing at or beyond
 * the capacity. */
static inline void rx__fd_mark_set(int fd, unsigned kind)
{
	if ((unsigned)fd < rx__fd_capacity_now())
		rx__fd_mark_set_at(fd, kind);
}

/* rx__fd_mark_clear_at - rx__fd_mark_clear for @fd below the capacity. */
static inline void rx__fd_mark_clear_at(int fd)
{
	if (atomic_load_explicit(&rx__fd_marks[(unsigned)fd],
				 memory_order_relaxed))
		atomic_store_explicit(&rx__fd_marks[(unsigned)fd], 0,
				      memory_order_relaxed);
}

/* rx__fd_mark_clear - @fd is about to be closed, replaced or shared: what
 * socket() said of it no longer holds. A load, and a store only when a
 * mark is there. O(1); async-signal-safe. */
static inline void rx__fd_mark_clear(int fd)
{
	if ((unsigned)fd < rx__fd_capacity_now())
		rx__fd_mark_clear_at(fd);
}

/* @fd's mark if it holds, else 0. */
static inline uint64_t rx__fd_mark_of(int fd)
{
	uint64_t m;

	if ((unsigned)fd >= rx__fd_capacity_now())
		return 0;
	m = atomic_load_explicit(&rx__fd_marks[fd], memory_order_relaxed);
	return m && (uint32_t)m == atomic_load_explicit(&rx__fd_doubt,
							memory_order_relaxed)
		   ? m
		   : 0;
}

/* rx__fd_mark_taken - what a connect leaves of the valid mark @m: after
 * a connect a stream socket may be connected, so RX_MARK_STREAM becomes
 * RX_MARK_CONNECTING (ADR-631) and any other kind goes; RX_MARK_NONBLOCK
 * and the doubt's value stay. */
static inline uint64_t rx__fd_mark_taken(uint64_t m)
{
	return (m & ((uint64_t)RX_MARK_NONBLOCK << 32 | UINT32_MAX)) |
	       ((m & RX_MARK_KIND) == (uint64_t)RX_MARK_STREAM << 32
		    ? (uint64_t)RX_MARK_CONNECTING << 32
		    : 0);
}

/* rx__fd_mark_take - a connect on @fd: its mark's kind (0 when none, or
 * void), which no later connect takes again (rx__fd_mark_taken). By
 * compare-and-swap: a close, duplicate or socket() of the number under
 * a new doubt between the read and the write wins, and the connect reads
 * nothing known - it never writes back a mark that a close cleared
 * (ADR-671). An fcntl's or ioctl's RX_MARK_NONBLOCK meanwhile, or a
 * socket() under the same doubt, leaves a mark that still holds: it is
 * taken as it now is, so that no stream mark outlives the connect. O(1)
 * but for those retries; lock-free; async-signal-safe. */
static inline unsigned rx__fd_mark_take(int fd)
{
	uint64_t m = rx__fd_mark_of(fd);
	uint32_t doubt = (uint32_t)m;

	if (m == 0) {
		rx__fd_mark_clear(fd);
		return 0;
	}
	while (!atomic_compare_exchange_weak_explicit(
	    &rx__fd_marks[fd], &m, rx__fd_mark_taken(m), memory_order_relaxed,
	    memory_order_relaxed))
		if (m == 0 || (uint32_t)m != doubt)
			return 0;
	return (unsigned)(m >> 32) & 0xffu;
}

/*
 * rx__fd_mark_connected - the connect that took @fd's mark (below the
 * capacity) returned, and published its record (ADR-631): true when the
 * mark is still RX_MARK_CONNECTING, which it clears (keeping
 * RX_MARK_NONBLOCK, which an fcntl may change meanwhile); false when a
 * close, a duplicate or a socket() of the number cleared or rewrote it
 * while the connect ran. Sequentially consistent, as the closes' clear
 * (rx__fd_mark_clear_closing): of the two, whichever comes second sees
 * the other's write - the connect a cleared mark, or the close the
 * published record. O(1); async-signal-safe.
 */
static inline bool rx__fd_mark_connected(int fd)
{
	uint64_t m =
	    atomic_load_explicit(&rx__fd_marks[fd], memory_order_seq_cst);

	do {
		if ((m & RX_MARK_KIND) != (uint64_t)RX_MARK_CONNECTING << 32)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(
	    &rx__fd_marks[fd], &m, m & ~RX_MARK_KIND, memory_order_seq_cst,
	    memory_order_seq_cst));
	return true;
}

/* rx__fd_mark_clear_closing - rx__fd_mark_clear for @fd below the
 * capacity, by a close or replacement of the number, before it reads the
 * number's map entry: sequentially consistent, so that a connect whose
 * record was published meanwhile either finds its mark gone or has its
 * record seen by the map read that follows (ADR-631). */
static inline void rx__fd_mark_clear_closing(int fd)
{
	if (atomic_load_explicit(&rx__fd_marks[(unsigned)fd],
				 memory_order_seq_cst))
		atomic_store_explicit(&rx__fd_marks[(unsigned)fd], 0,
				      memory_order_seq_cst);
}

/* rx__fd_mark_nonblock - is @fd non-blocking as far as its mark knows
 * (socket() with SOCK_NONBLOCK, or fcntl F_SETFL or ioctl FIONBIO since,
 * also through syscall(2))? false: not known either way. A true may be
 * stale when the mode changed where the shim cannot see (another process
 * sharing the open file, an inline system call): only a decision whose
 * error costs evidence, never a non-blocking caller's wait, may take it
 * unasked (ADR-619). O(1). */
static inline bool rx__fd_mark_nonblock(int fd)
{
	return (rx__fd_mark_of(fd) >> 32) & RX_MARK_NONBLOCK;
}

/* rx__fd_mark_flags - fcntl(F_SETFL) set @fd's flags to @nonblock or not,
 * or ioctl(FIONBIO) its mode: a mark that holds follows, by
 * compare-and-swap, so that a close's clear or a connect's take meanwhile
 * is never written over (ADR-671). O(1). */
static inline void rx__fd_mark_flags(int fd, bool nonblock)
{
	uint64_t m = rx__fd_mark_of(fd), bit = (uint64_t)RX_MARK_NONBLOCK << 32;
	uint32_t doubt = (uint32_t)m;

	while (m != 0 && (uint32_t)m == doubt &&
	       !atomic_compare_exchange_weak_explicit(
		   &rx__fd_marks[fd], &m, nonblock ? m | bit : m & ~bit,
		   memory_order_relaxed, memory_order_relaxed))
		;
}

#endif
