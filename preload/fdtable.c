/*
 * preload/fdtable.c - the per-fd call state of the shim.
 *
 * Design. An fd is a small integer the kernel hands out lowest-first, so a
 * flat array indexed by fd is both the simplest and the fastest map: the
 * cost of a call on an untracked fd is a bounds check, one load and one
 * branch (rx__fd_get, rx__fd_phase in shim.h). The array is sized once from
 * RLIMIT_NOFILE - the larger of the soft and hard limits, since a program
 * may raise its soft limit later - capped at RX_FD_CAP entries, and mapped
 * with mmap: no malloc, and the kernel's zero pages mean entries never
 * touched cost no memory (an entry is ~200 bytes; 65536 of them reserve
 * 13 MB of address space, of which a program with a few sockets touches a
 * few pages). fds at or above the capacity are simply never tracked: the
 * shim degrades to pass-through, never to an error (socket_wrapper makes
 * the same trade with its fixed table).
 *
 * Entries are guarded by RX_FD_STRIPES stripe locks (fd modulo the stripe
 * count) instead of a lock per entry, so a forked child can reset every
 * lock in constant time without touching the whole table.
 */
#include "config.h"

#include <sys/mman.h>
#include <sys/resource.h>

#include "shim.h"

struct rx_fd *rx__fd_table;
_Atomic uint32_t rx__fd_capacity;

struct rx_fd_stripe rx__fd_stripes[RX_FD_STRIPES];

int rx__fdtable_init(void)
{
	struct rlimit rl;
	uint64_t want = 1024;
	size_t bytes;
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
	bytes = (size_t)want * sizeof(struct rx_fd);
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	rx__fd_table = p;
	atomic_store_explicit(&rx__fd_capacity, (uint32_t)want,
			      memory_order_release);
	return 0;
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
