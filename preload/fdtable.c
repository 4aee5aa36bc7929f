/*
 * preload/fdtable.c - the per-fd call state of the shim.
 *
 * Design. Call state belongs to a connection, not to a number: dup, dup2,
 * dup3 and fcntl(F_DUPFD) give a socket a second number, and a program
 * may send its request through one and read the answer through the other
 * (ADR-213). So the state lives in records, and a flat map indexed by fd
 * - the kernel hands numbers out lowest-first, so an array is both the
 * simplest and the fastest map - holds, per number, the index of its
 * record or 0. Duplicates map to the same record, which counts the
 * numbers that map to it and is ended when the last of them goes.
 *
 * The cost of a call on an untracked fd stays a bounds check, one load
 * and one branch (rx__fd_get, io.c's fast path). Map and records are
 * sized once from RLIMIT_NOFILE - the larger of the soft and hard limits,
 * since a program may raise its soft limit later - capped at RX_FD_CAP
 * numbers, and mapped with mmap: no malloc, and the kernel's zero pages
 * mean entries never touched cost no memory (a record is 256 bytes; 65536
 * of them reserve 16 MB of address space, of which a program with a few
 * sockets touches a few pages; a 64-byte wide protocol slot per record
 * follows the records, touched only by a database connection's module,
 * ADR-408). Every record maps from at least one
 * number below the capacity, so there are never more records in use than
 * numbers, and one record per number always suffices. fds at or above the
 * capacity are simply never tracked: the shim degrades to pass-through,
 * never to an error (socket_wrapper makes the same trade with its fixed
 * table).
 *
 * Records are guarded by RX_FD_STRIPES stripe locks (a record's slot in
 * memory modulo the stripe count, rx__fd_lock) instead of a lock per
 * record, so a forked child can reset every lock in constant time without
 * touching the whole table.
 *
 * A record's life is here too: attached at a connect, shared by a
 * duplicate, unmapped number by number, ended when its last number goes
 * (the end hook: the call state machine settles what was outstanding)
 * and freed. And the checks that a number still holds the record's
 * socket: a socket closed where the shim cannot see it (fclose of an
 * fdopen'd socket, a raw close system call, a close inside libc, a
 * signal handler's close while this thread was inside the shim) leaves
 * its record behind, and the number may come back from open, pipe or any
 * call the shim does not wrap. Before the shim changes behaviour on a
 * number or takes evidence from it, it checks with one fstat, on those
 * rare paths only (ADR-190).
 */
#include "config.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "fdlife.h"
#include "fdmark.h"
#include "fdtable.h"
#include "log.h"
#include "runtime.h"
#include "symbols.h"

_Atomic uint32_t *rx__fd_map;
struct rx_fd *rx__fd_pool;
struct rx_fd_wide *rx__fd_wide_pool;
_Atomic uint32_t rx__fd_capacity;
_Atomic uint32_t rx__fd_doubt;
_Atomic uint32_t *rx__fd_proven;
_Atomic uint64_t *rx__fd_marks;

struct rx_fd_stripe rx__fd_stripes[RX_FD_STRIPES];

/* The call state machine's end of a record (call.c), set at start-up. */
static rx_fd_end_fn *end_hook;

int rx__fdtable_init(rx_fd_end_fn *end)
{
	struct rlimit rl;
	uint64_t want = 1024;
	size_t map_bytes, pool_bytes, wide_bytes, proven_bytes, marks_bytes;
	void *p;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		want = rl.rlim_cur;
		if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max > want)
			want = rl.rlim_max;
		if (rl.rlim_cur == RLIM_INFINITY ||
		    rl.rlim_max == RLIM_INFINITY)
			want = RX_FD_CAP;
	}
	if (want > RX_FD_CAP)
		want = RX_FD_CAP;
	if (want < 64)
		want = 64;
	/* Record 0 is never used: a map entry of 0 means "no record". The
	 * map goes first, page-aligned; the records follow on a page. */
	map_bytes = ((size_t)want * sizeof(uint32_t) + 4095) & ~(size_t)4095;
	pool_bytes = ((size_t)want + 1) * sizeof(struct rx_fd);
	/* The wide protocol slots follow the records (ADR-408). */
	wide_bytes = ((size_t)want + 1) * sizeof(struct rx_fd_wide);
	/* Then each record's proof (ADR-500). */
	proven_bytes = ((size_t)want + 1) * sizeof(uint32_t);
	/* Then each number's mark (ADR-542), 8-aligned. */
	proven_bytes = (proven_bytes + 7) & ~(size_t)7;
	marks_bytes = (size_t)want * sizeof(uint64_t);
	p = mmap(NULL,
		 map_bytes + pool_bytes + wide_bytes + proven_bytes +
		     marks_bytes,
		 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	end_hook = end;
	rx__fd_map = p;
	rx__fd_pool = (struct rx_fd *)((char *)p + map_bytes);
	rx__fd_wide_pool =
	    (struct rx_fd_wide *)((char *)p + map_bytes + pool_bytes);
	rx__fd_proven = (_Atomic uint32_t *)((char *)p + map_bytes +
					     pool_bytes + wide_bytes);
	rx__fd_marks = (_Atomic uint64_t *)((char *)p + map_bytes + pool_bytes +
					    wide_bytes + proven_bytes);
	atomic_store_explicit(&rx__fd_capacity, (uint32_t)want,
			      memory_order_release);
	return 0;
}

/* Claim record @i if it is free. No lock (ADR-547): a free record has no
 * number mapped to it, so no share or count-off can touch its count, and
 * claimers race on the count alone; acquire: what ending its last call
 * wrote (rx__fd_free's release) is seen. */
static bool claim(uint32_t i)
{
	uint32_t free = 0;

	return atomic_compare_exchange_strong_explicit(
	    &rx__fd_pool[i].refs, &free, 1, memory_order_acquire,
	    memory_order_relaxed);
}

/* Claim a free record for @fd, which has no record (refs 1, fields as
 * the last user left them: phase untracked, epoch counting on), unmapped.
 * Returns its index, or 0 when @fd is not covered or already has a
 * record. Lock-free (ADR-547), never calls libc; O(1) unless duplicates
 * of earlier sockets still hold the records of lower numbers. */
static inline __attribute__((always_inline)) uint32_t claim_for(int fd)
{
	uint32_t cap =
	    atomic_load_explicit(&rx__fd_capacity, memory_order_acquire);
	uint32_t i, n;

	if ((unsigned)fd >= cap ||
	    atomic_load_explicit(&rx__fd_map[fd], memory_order_acquire) != 0)
		return 0;
	/* The record of the same index is free unless a duplicate of a
	 * socket once on this number outlived it; then the next free one. */
	for (n = 0, i = (uint32_t)fd + 1; n < cap; n++, i = i % cap + 1)
		if (claim(i))
			return i;
	return 0;
}

/* Give @fd, which has no record, a free one, mapped (claim_for). NULL:
 * none. Inline in rx__fd_for_connect, every admitted connect's claim
 * (ADR-607). */
static inline __attribute__((always_inline)) struct rx_fd *attach(int fd)
{
	uint32_t i = claim_for(fd);

	if (i == 0)
		return NULL;
	atomic_store_explicit(&rx__fd_map[fd], i, memory_order_release);
	return &rx__fd_pool[i];
}

struct rx_fd *rx__fd_claim_any(int fd, uint32_t seen)
{
	/* As attach, but the number is mapped by rx__fd_publish. */
	uint32_t i = claim_for(fd);
	struct rx_fd *e = &rx__fd_pool[i];

	if (i == 0)
		return NULL;
	atomic_store_explicit(&rx__fd_proven[i], seen, memory_order_relaxed);
	atomic_store_explicit(&e->sock_dev, 0, memory_order_relaxed);
	atomic_store_explicit(&e->sock_ino, 0, memory_order_relaxed);
	return e;
}

/* Has @e's socket identity been taken? A connect on a number whose
 * socket() the shim saw leaves it for the first check that needs it
 * (ADR-545); no socket has inode 0 on device 0. */
static bool identity_known(const struct rx_fd *e)
{
	return atomic_load_explicit(&e->sock_dev, memory_order_relaxed) != 0 ||
	       atomic_load_explicit(&e->sock_ino, memory_order_relaxed) != 0;
}

static void identity_set(struct rx_fd *e, uint64_t dev, uint64_t ino)
{
	atomic_store_explicit(&e->sock_dev, dev, memory_order_relaxed);
	atomic_store_explicit(&e->sock_ino, ino, memory_order_relaxed);
}

/* Count one more number in on @e, unless its last number is being
 * closed (RX_FD_REFS_ENDING) or it is free: compare-and-swap, so that a
 * count-off that takes the last number and a share never both win
 * (ADR-580). */
static bool count_in(struct rx_fd *e)
{
	uint32_t r = atomic_load_explicit(&e->refs, memory_order_relaxed);

	do {
		if (r == 0 || r == RX_FD_REFS_ENDING)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(
	    &e->refs, &r, r + 1, memory_order_acq_rel, memory_order_relaxed));
	return true;
}

bool rx__fd_share(int fd, int newfd, uint64_t dev, uint64_t ino)
{
	uint32_t cap =
	    atomic_load_explicit(&rx__fd_capacity, memory_order_acquire);
	struct rx_fd *e;
	struct rx_lock *l;
	uint32_t i;
	bool shared = false;

	if ((unsigned)fd >= cap || (unsigned)newfd >= cap || fd == newfd)
		return false;
	i = atomic_load_explicit(&rx__fd_map[fd], memory_order_acquire);
	if (i == 0)
		return false;
	e = &rx__fd_pool[i];
	l = rx__fd_lock(e);
	rx__lock(l);
	/* Still the record of @fd's socket, and @newfd free of state. A
	 * record whose identity is not taken yet (ADR-545) takes @newfd's,
	 * the socket just duplicated from @fd. The count goes last: a close
	 * of @fd's last number that counted it off first wins (ADR-580). */
	if (atomic_load_explicit(&rx__fd_map[fd], memory_order_relaxed) == i &&
	    (!identity_known(e) ||
	     (atomic_load_explicit(&e->sock_dev, memory_order_relaxed) == dev &&
	      atomic_load_explicit(&e->sock_ino, memory_order_relaxed) ==
		  ino)) &&
	    atomic_load_explicit(&rx__fd_map[newfd], memory_order_relaxed) ==
		0 &&
	    count_in(e)) {
		if (!identity_known(e))
			identity_set(e, dev, ino);
		atomic_store_explicit(&rx__fd_map[newfd], i,
				      memory_order_release);
		shared = true;
	}
	rx__unlock(l);
	return shared;
}

struct rx_fd *rx__fd_detach(int fd, const struct rx_fd *only, bool *last)
{
	uint32_t cap =
	    atomic_load_explicit(&rx__fd_capacity, memory_order_acquire);
	uint32_t i;

	*last = false;
	if ((unsigned)fd >= cap)
		return NULL;
	if (only) {
		i = (uint32_t)(only - rx__fd_pool);
		if (!atomic_compare_exchange_strong(&rx__fd_map[fd], &i, 0))
			return NULL;
	} else {
		i = atomic_exchange(&rx__fd_map[fd], 0);
		if (i == 0)
			return NULL;
	}
	*last = rx__fd_count_off(&rx__fd_pool[i]);
	return &rx__fd_pool[i];
}

void rx__fdtable_lock_all(void)
{
	size_t i;

	for (i = 0; i < RX_FD_STRIPES; i++)
		rx__lock(&rx__fd_stripes[i].lock);
}

void rx__fdtable_unlock_all(void)
{
	size_t i;

	for (i = 0; i < RX_FD_STRIPES; i++)
		rx__unlock(&rx__fd_stripes[i].lock);
}

void rx__fdtable_reset_locks(void)
{
	size_t i;

	for (i = 0; i < RX_FD_STRIPES; i++)
		rx__lock_reset(&rx__fd_stripes[i].lock);
}

/* ------------------------------------------------------------------------
 * Is the number still the record's socket? (ADR-190)
 * ---------------------------------------------------------------------- */

bool rx__fd_socket_id(int fd, uint64_t *dev, uint64_t *ino)
{
	struct stat st;
	int saved = errno;
	bool sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);

	errno = saved;
	*dev = sock ? (uint64_t)st.st_dev : 0;
	*ino = sock ? (uint64_t)st.st_ino : 0;
	return sock;
}

bool rx__fd_stream_id(int fd, uint64_t *dev, uint64_t *ino)
{
	int type = 0, saved = errno;
	socklen_t len = sizeof(type);
	bool stream =
	    rx__real_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
	    type == SOCK_STREAM;

	errno = saved;
	return stream && rx__fd_socket_id(fd, dev, ino);
}

bool rx__fd_still_ours(int fd, struct rx_fd *e)
{
	struct stat st;
	int saved = errno;
	bool same = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);

	if (same && !identity_known(e))
		/* The first check of a number connected as socket() made it
		 * (ADR-545): what it holds now is the record's socket. */
		identity_set(e, (uint64_t)st.st_dev, (uint64_t)st.st_ino);
	else
		same = same &&
		       (uint64_t)st.st_ino ==
			   atomic_load_explicit(&e->sock_ino,
						memory_order_relaxed) &&
		       (uint64_t)st.st_dev ==
			   atomic_load_explicit(&e->sock_dev,
						memory_order_relaxed);
	errno = saved;
	return same;
}

bool rx__fd_vouched(int fd, struct rx_fd *e, bool cheap)
{
	/* Read before the fstat: a close unseen while it runs is doubt the
	 * next check sees. */
	uint32_t d = atomic_load_explicit(&rx__fd_doubt, memory_order_relaxed);
	int saved;

	if (cheap && atomic_load_explicit(&rx__fd_proven[e - rx__fd_pool],
					  memory_order_relaxed) == d)
		return true;
	if (rx__fd_still_ours(fd, e)) {
		atomic_store_explicit(&rx__fd_proven[e - rx__fd_pool], d,
				      memory_order_relaxed);
		return true;
	}
	/* The socket is gone; the number is another file's now (ADR-190). */
	saved = errno;
	rx__fd_forget_stale(
	    fd, e, atomic_load_explicit(&e->epoch, memory_order_relaxed));
	errno = saved;
	return false;
}

/* ------------------------------------------------------------------------
 * The record's life.
 * ---------------------------------------------------------------------- */

void rx__fd_unmap(int fd, const struct rx_fd *only)
{
	bool last;
	struct rx_fd *e = rx__fd_detach(fd, only, &last);

	if (e && last) {
		end_hook(fd, e);
		rx__fd_free(e);
	}
}

void rx__fd_drop(int fd, struct rx_fd *e)
{
	if (!e)
		return;
	end_hook(fd, e);
	rx__fd_unmap(fd, e);
}

void rx__fd_forget_stale(int fd, struct rx_fd *e, uint32_t epoch)
{
	if (atomic_load_explicit(&e->epoch, memory_order_relaxed) != epoch)
		return;
	if (rx__log_enabled(RX_LOG_DEBUG))
		rx__log(RX_LOG_DEBUG, "fd=%d event=stale-fd", fd);
	rx__fd_unmap(fd, e);
}

struct rx_fd *rx__fd_for_connect(int fd, struct rx_fd *e, uint64_t dev,
				 uint64_t ino, uint32_t seen)
{
	bool fresh = dev == 0 && ino == 0;

	if (e && (fresh ||
		  (identity_known(e) &&
		   (atomic_load_explicit(&e->sock_dev, memory_order_relaxed) !=
			dev ||
		    atomic_load_explicit(&e->sock_ino, memory_order_relaxed) !=
			ino)))) {
		/* A record of another socket: the number changed hands
		 * behind our back (ADR-190), or socket() just returned it.
		 * Its duplicates keep it. A record whose identity was never
		 * taken takes this one, as at any first check (ADR-545). */
		rx__fd_unmap(fd, e);
		e = NULL;
	}
	if (!e)
		e = attach(fd);
	if (e) {
		/* The caller saw the socket when the doubt counter was @seen:
		 * its fstat, or socket()'s mark (ADR-500, ADR-545). */
		atomic_store_explicit(&rx__fd_proven[e - rx__fd_pool], seen,
				      memory_order_relaxed);
		identity_set(e, dev, ino);
	}
	return e;
}

/* ------------------------------------------------------------------------
 * For socket.c: numbers closed, shut down and duplicated.
 * ---------------------------------------------------------------------- */

/* The checks every entry from socket.c makes: a record, not re-entered,
 * the process that owns the state. */
static struct rx_fd *entry_of(int fd)
{
	struct rx_fd *e = rx__fd_get(fd);

	if (!e)
		return NULL;
	if (rx__reentered() || !rx__owner()) {
		/* A tracked number closed or replaced unforgotten: no record
		 * is proven to hold its socket any more (ADR-500). */
		rx__fd_doubt_raise();
		return NULL;
	}
	return e;
}

/* The end hook with errno preserved, for rx__fd_forget_mapped_by. */
static void end_saving(int fd, struct rx_fd *e)
{
	int saved = errno;

	end_hook(fd, e);
	errno = saved;
}

void rx__fd_forget_mapped(int fd)
{
	rx__fd_forget_mapped_by(fd, end_saving);
}

void rx__fd_forget(int fd)
{
	uint32_t cap =
	    atomic_load_explicit(&rx__fd_capacity, memory_order_acquire);

	if ((unsigned)fd < cap &&
	    atomic_load_explicit(&rx__fd_map[fd], memory_order_relaxed) != 0)
		rx__fd_forget_mapped(fd);
}

void rx__fd_end(int fd)
{
	struct rx_fd *e = entry_of(fd);
	int saved = errno;

	if (!e)
		return;
	rx__inside = 1;
	end_hook(fd, e);
	rx__inside = 0;
	errno = saved;
}

void rx__fd_end_unsent(int fd)
{
	struct rx_fd *e = entry_of(fd);
	enum rx_fd_phase ph;

	if (!e)
		return;
	ph = rx__fd_phase(e);
	if ((ph == RX_FD_CONNECTING || ph == RX_FD_WAITING) &&
	    !atomic_load_explicit(&e->wrote, memory_order_relaxed))
		rx__fd_end(fd);
}

void rx__fd_dup(int fd, int newfd)
{
	uint64_t dev, ino;
	int saved = errno;

	if (newfd < 0 || newfd == fd || !entry_of(fd))
		return;
	rx__inside = 1;
	/* Stale state on the new number goes first (its old socket was
	 * closed where the shim could not see it). */
	rx__fd_unmap(newfd, NULL);
	if (rx__fd_socket_id(newfd, &dev, &ino))
		(void)rx__fd_share(fd, newfd, dev, ino);
	rx__inside = 0;
	errno = saved;
}
