/*
 * preload/fdtable.h - the fd record: per-connection call state, found by
 * fd (fdtable.c, ADR-213).
 *
 * A flat map indexed by fd holds the index of the number's record, or 0;
 * duplicates of a socket map to one record, which counts them. Map and
 * records are sized from RLIMIT_NOFILE (capped at RX_FD_CAP) and mapped
 * once at start-up with mmap, so untouched entries cost no memory and
 * nothing goes through malloc. fds at or beyond the capacity are never
 * tracked. Record fields other than `phase` and `refs` are guarded by the
 * record's stripe lock (rx__fd_lock); `phase` is also read without it by
 * the fast path, which is the whole cost of an untracked fd: one bounds
 * check, one load, one branch (rx__fd_phase_at, io.c). This header and
 * fdtable.c are the record's only home: its layout, its lookups, its
 * life from attach to free, and the checks that a number still holds
 * the record's socket (ADR-190).
 */
#ifndef RESILIX_PRELOAD_FDTABLE_H
#define RESILIX_PRELOAD_FDTABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "lock.h"
#include "proto.h"
#include "resilix.h"

#define RX_FD_CAP 65536	      /* most fds the table covers */
#define RX_FD_STRIPES 256     /* stripe locks over the records (power of 2) */
#define RX_FD_ENTRY_BYTES 256 /* bytes per record (power of 2) */
/* A record's `refs` from its last number's count-off to rx__fd_free: read
 * as more than one number by the `refs <= 1` tests of the I/O paths, which
 * then take the general path (ADR-580). */
#define RX_FD_REFS_ENDING UINT32_MAX

enum rx_fd_phase {
	RX_FD_UNTRACKED = 0, /* not ours: everything passes through */
	RX_FD_CONNECTING,    /* admitted at connect, outcome unknown yet */
	RX_FD_WAITING,	     /* connected, a call waits for its first byte */
	RX_FD_IDLE, /* no call outstanding: the next write starts one */
	RX_FD_DONE  /* finished for good (error, upgrade): pass
		       through until close releases the key */
};

struct rx_fd {
	_Atomic uint8_t phase;	  /* enum rx_fd_phase */
	uint8_t reused;		  /* a call on this connection was answered:
				     the current one reuses it (ADR-149) */
	_Atomic uint8_t wrote;	  /* the current call's request began: its first
				     write was seen (ADR-192) */
	_Atomic uint8_t awaiting; /* a read was attempted since the call's
				     last write: the program waits for an
				     answer (ADR-193) */
	_Atomic uint32_t epoch;	  /* bumped at each call start and untrack, so
				     an operation that raced with them can tell
				     its result belongs to another call */
	struct rx_guard *guard;	  /* pinned key while tracked */
	uint64_t start_ns;	  /* admission time of the current call */
	uint64_t first_byte_ns;	  /* first byte of the current response, or 0 */
	uint64_t connected_ns;	  /* the connect was seen to complete, or 0 */
	/* The connection's protocol module and its state (proto.h). */
	struct rx_proto_state proto;
	struct rx_gate_permit permit; /* the current call's tickets */
	/* st_dev and st_ino of the socket that connected on this number
	 * (fstat at connect): before the shim changes anything on the number
	 * later, it checks the number still holds that socket (ADR-190).
	 * Atomic: read without the stripe lock. */
	_Atomic uint64_t sock_dev, sock_ino;
	/* Numbers mapped to this record; 0: free; RX_FD_REFS_ENDING: its
	 * last number was counted off and its call is being ended. Claimed
	 * (0 to 1), counted up and off by compare-and-swap without a lock
	 * (ADR-547, ADR-580); freed (to 0, a release store) when no number
	 * maps to it. */
	_Atomic uint32_t refs;
	/* RESILIX_KEY=host: a connect's outcome is its address's (ADR-220).
	 * The address's guard, pinned from the connect until its outcome is
	 * known, and its tickets (a guard holds at most two); NULL when the
	 * call is keyed by address anyway. */
	uint8_t addr_count;
	/* first_byte_ns is when a peek saw the reply's first bytes: the read
	 * that takes them keeps it (ADR-360). */
	uint8_t peeked;
	/* The current call's deadline on its key (admit.h, ADR-382), or 0. */
	uint16_t dl_seq;
	struct rx_guard *addr_guard;
	struct rx_ticket addr_tickets[2];
} __attribute__((aligned(RX_FD_ENTRY_BYTES)));

/* A record fills one power-of-two slot: the fast path of every I/O call
 * finds it with a shift instead of a multiply (ADR-146), and no two
 * records share a cache line. Untouched records cost no memory (mmap). */
_Static_assert(sizeof(struct rx_fd) == RX_FD_ENTRY_BYTES,
	       "struct rx_fd outgrew its slot: raise RX_FD_ENTRY_BYTES");

/* The records' wide protocol slots (proto.h, ADR-408): slot i belongs to
 * record i. Beside the records rather than in them: only connections a
 * framed module claimed touch theirs. */
struct rx_fd_wide {
	unsigned char bytes[RX_PROTO_WIDE_BYTES];
} __attribute__((aligned(RX_PROTO_WIDE_BYTES)));
extern struct rx_fd_wide *rx__fd_wide_pool RX_HIDDEN;

/* Per record: the value of rx__fd_doubt when its number was last seen to
 * hold the socket (fstat at connect, or a later check): while the two
 * agree, no close of a tracked number went unseen since, and the number
 * still holds it without a system call (ADR-500). Beside the records: a
 * record has no byte to spare. */
extern _Atomic uint32_t *rx__fd_proven RX_HIDDEN;

/* Per fd: its record's index, or 0. */
extern _Atomic uint32_t *rx__fd_map RX_HIDDEN;
/* Records 1..capacity (0 unused). */
extern struct rx_fd *rx__fd_pool RX_HIDDEN;
/* 0 until the table exists. */
extern _Atomic uint32_t rx__fd_capacity RX_HIDDEN;

/*
 * The end of a record's life that the call state machine owns: settle an
 * outstanding call on record @e (@fd is a number of its socket) as
 * abandoned, release its key, untrack it. Runs with rx__inside set and no
 * lock held; the numbers that map to @e keep doing so. call.c provides
 * it (rx__call_end_record); init.c hands it to rx__fdtable_init, so this
 * table never calls up into the state machine.
 */
typedef void rx_fd_end_fn(int fd, struct rx_fd *e);

/* rx__fdtable_init - map the table once, and remember @end. Returns 0, or
 * -1 (untracked everything). Not thread-safe: init-once only. */
int rx__fdtable_init(rx_fd_end_fn *end);

/* rx__fd_get - the record of @fd, or NULL when @fd has none or is not
 * covered. Thread-safe, async-signal-safe, O(1). */
static inline struct rx_fd *rx__fd_get(int fd)
{
	uint32_t cap =
	    atomic_load_explicit(&rx__fd_capacity, memory_order_acquire);
	uint32_t i;

	if ((unsigned)fd >= cap)
		return NULL;
	i = atomic_load_explicit(&rx__fd_map[fd], memory_order_acquire);
	return i ? &rx__fd_pool[i] : NULL;
}

/* rx__fd_proto_wide - the wide slot of the record whose protocol state is
 * @st (a record's `proto`, never another rx_proto_state). O(1). */
static inline void *rx__fd_proto_wide(struct rx_proto_state *st)
{
	struct rx_fd *e =
	    (struct rx_fd *)(void *)((char *)st -
				     offsetof(struct rx_fd, proto));

	return rx__fd_wide_pool[e - rx__fd_pool].bytes;
}

/* rx__fd_phase_at - the phase of @fd, which must be below the capacity:
 * untracked when it has no record (one load), else its record's. The
 * fast path of every I/O wrapper (io.c, ADR-146): relaxed loads. */
static inline __attribute__((always_inline)) unsigned rx__fd_phase_at(int fd)
{
	uint32_t i = atomic_load_explicit(&rx__fd_map[(unsigned)fd],
					  memory_order_relaxed);

	if (__builtin_expect(i == 0, 1))
		return RX_FD_UNTRACKED;
	return atomic_load_explicit(&rx__fd_pool[i].phase,
				    memory_order_relaxed);
}

/* rx__fd_capacity_now - the table's capacity: 0 until the shim is
 * initialised, and published only after the symbols were bound (init.c).
 * Plain acquire load. */
static inline __attribute__((always_inline)) uint32_t rx__fd_capacity_now(void)
{
	return __atomic_load_n((const uint32_t *)&rx__fd_capacity,
			       __ATOMIC_ACQUIRE);
}

/* rx__fd_phase - the phase of a record, without its lock. O(1). */
static inline enum rx_fd_phase rx__fd_phase(struct rx_fd *e)
{
	return (enum rx_fd_phase)atomic_load_explicit(&e->phase,
						      memory_order_acquire);
}

/* rx__fd_tracked - does @fd map to a record? The whole cost of a
 * close/dup2/socket on an untracked fd. O(1). */
static inline bool rx__fd_tracked(int fd)
{
	return rx__fd_get(fd) != NULL;
}

/* The stripe locks, padded so stripes used by different threads do not
 * share a line (fdtable.c). */
struct rx_fd_stripe {
	struct rx_lock lock;
	char pad[64 - sizeof(struct rx_lock)];
} __attribute__((aligned(64)));
extern struct rx_fd_stripe rx__fd_stripes[RX_FD_STRIPES] RX_HIDDEN;

/* rx__fd_lock - the stripe lock that guards record @e. Inline: it is
 * taken on every tracked operation. By the record's slot in memory, its
 * address over the slot's size: consecutive records take consecutive
 * stripes as by their index, without a load of the pool's base. O(1). */
static inline struct rx_lock *rx__fd_lock(const struct rx_fd *e)
{
	return &rx__fd_stripes[((uintptr_t)e / RX_FD_ENTRY_BYTES) &
			       (RX_FD_STRIPES - 1)]
		    .lock;
}

/*
 * rx__fd_share - @newfd (which must have no record) is a duplicate of
 * @fd: map it to @fd's record, if @fd still has one and that record's
 * socket is @dev/@ino (the caller's fstat of @newfd: a number that changed
 * hands behind the shim's back shares nothing). Returns whether it did.
 * Thread-safe, O(1).
 */
bool rx__fd_share(int fd, int newfd, uint64_t dev, uint64_t ino);

/*
 * rx__fd_detach - unmap @fd (only from @only, when not NULL) and return
 * the record it had, or NULL. *@last: @fd was its last number; the caller
 * then ends the record's call and hands the record back with rx__fd_free
 * (until then nobody else gets it). Thread-safe, O(1).
 */
struct rx_fd *rx__fd_detach(int fd, const struct rx_fd *only, bool *last);

/* The record's claim, publication, count-off and free, inline: fdlife.h. */

/* rx__fdtable_lock_all / rx__fdtable_unlock_all - take or drop every
 * stripe, in index order (fork prepare and parent handlers). O(stripes). */
void rx__fdtable_lock_all(void);
void rx__fdtable_unlock_all(void);

/* rx__fdtable_reset_locks - free every stripe, held or not (forked child,
 * where a holder may not exist). O(stripes). */
void rx__fdtable_reset_locks(void);

/* ---- the record's life (fdtable.c) ------------------------------------ */

/* rx__fd_socket_id - the socket on @fd: its st_dev and st_ino. false: not
 * a socket (or fstat failed). Preserves errno. One fstat. */
bool rx__fd_socket_id(int fd, uint64_t *dev, uint64_t *ino);

/* rx__fd_stream_id - rx__fd_socket_id for a stream socket only: false
 * for any other type too (getsockopt SO_TYPE first). Preserves errno. Two
 * system calls; a number whose socket() the shim saw needs neither
 * (ADR-542). */
bool rx__fd_stream_id(int fd, uint64_t *dev, uint64_t *ino);

/* rx__fd_still_ours - does @fd still hold the socket @e connected
 * (ADR-190)? A record whose identity was not taken at its connect
 * (ADR-545) takes the socket @fd holds now. Preserves errno. One
 * fstat. */
bool rx__fd_still_ours(int fd, struct rx_fd *e);

/*
 * rx__fd_doubt - bumped whenever a tracked number may have been closed
 * where the table could not forget it (ADR-500): a close, dup2 or
 * close_range the shim passed through because the thread was already
 * inside it (a signal handler), a raw syscall(2) that renumbers fds, an
 * fcloseall. Every other close of a tracked number is seen and forgets
 * it first (ADR-142), so a record whose `proven` equals this still holds
 * its socket. Async-signal-safe (one atomic add).
 */
extern _Atomic uint32_t rx__fd_doubt RX_HIDDEN;

static inline void rx__fd_doubt_raise(void)
{
	atomic_fetch_add_explicit(&rx__fd_doubt, 1, memory_order_relaxed);
}

/*
 * rx__fd_vouched - may the shim act on @fd as @e's socket? @cheap: true
 * without a system call when no close went unseen since the number was
 * last checked (ADR-500); otherwise - or with !@cheap - one fstat, as
 * rx__fd_still_ours. A number that no longer holds the socket is unmapped
 * from @e (rx__fd_forget_stale) and false returned. Preserves errno.
 */
bool rx__fd_vouched(int fd, struct rx_fd *e, bool cheap);

/* rx__fd_unmap - @fd stops mapping to its record (only to @only, when not
 * NULL); the last number of a record ends it (the end hook) and frees it.
 * Caller has rx__inside set; no lock held. */
void rx__fd_unmap(int fd, const struct rx_fd *only);

/* rx__fd_drop - whatever @e (@fd's record, or NULL) knew of the socket is
 * over: end it for every number of the socket, and unmap @fd. */
void rx__fd_drop(int fd, struct rx_fd *e);

/* rx__fd_forget_stale - @fd no longer holds @e's socket: unmap it from
 * @e, unless another operation restarted @e since @epoch. (Other numbers
 * of the socket keep the record.) No lock held on entry or exit. */
void rx__fd_forget_stale(int fd, struct rx_fd *e, uint32_t epoch);

/*
 * rx__fd_for_connect - the record for a connect on @fd, whose socket is
 * @dev/@ino (0/0: not taken yet, for a number whose socket() the shim
 * saw; the first check that compares takes it, ADR-545), seen to hold
 * it when rx__fd_doubt was @seen: @e (the record @fd maps to, already
 * ended by the caller, or NULL) when it is this socket's, else a fresh
 * one. NULL: none to be had (pass through).
 */
struct rx_fd *rx__fd_for_connect(int fd, struct rx_fd *e, uint64_t dev,
				 uint64_t ino, uint32_t seen);

/*
 * rx__fd_forget - @fd is being closed or replaced (close, dup2/dup3 onto
 * it, a new fd returned by socket/accept that still had state): unmap it;
 * when it was its socket's last number, settle an outstanding call as
 * abandoned, release the key, untrack. Must run before the real close, so
 * a concurrent thread that gets the same fd number back never sees the
 * old state. Preserves errno. O(1).
 */
void rx__fd_forget(int fd);

/* rx__fd_forget_mapped - rx__fd_forget for @fd below the capacity, whose
 * map entry the caller just saw non-zero (close, socket: ADR-580). */
void rx__fd_forget_mapped(int fd);

/*
 * rx__fd_end - the program ended @fd's connection for reading (shutdown
 * SHUT_RD or SHUT_RDWR): settle an outstanding call as abandoned, release
 * the key, untrack - for every number of the socket; they stay mapped
 * until closed. Preserves errno. O(1).
 */
void rx__fd_end(int fd);

/*
 * rx__fd_end_unsent - the program ended @fd's connection for writing
 * (shutdown SHUT_WR, a TLS close_notify) before it wrote a request: no
 * answer can come, so the call is ended as rx__fd_end ends it, and the
 * peer's EOF that follows is not taken for the upstream's failure
 * (ADR-643). A call whose request began goes on: "send, SHUT_WR, read" is
 * how some clients mark a request's end. Preserves errno. O(1).
 */
void rx__fd_end_unsent(int fd);

/*
 * rx__fd_dup - @newfd was just made a duplicate of @fd (dup, dup2, dup3,
 * fcntl F_DUPFD[_CLOEXEC] succeeded): drop @newfd's stale state and, when
 * @fd is tracked, let @newfd share its record (ADR-213), so a request
 * written through one number and answered through the other is one call.
 * One fstat when @fd is tracked; otherwise a load. Preserves errno.
 */
void rx__fd_dup(int fd, int newfd);

#endif
