/*
 * preload/runtime.c - the bottom of the shim: the per-thread flags, the
 * owner process, the generators' seed and the configuration in force
 * (runtime.h says what each is for). Nothing here calls another file of
 * the shim. Decisions: ADR-146 (the fork word), ADR-173 (the clock's
 * offset), ADR-226 (held locks count as being inside), ADR-531 (the
 * contended half of the shim's lock).
 */
#include "config.h"

#include <sys/auxv.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

RX_TLS struct rx_thread rx__thread; /* thread.h, ADR-533 */
int rx__lock_tag = 1;
bool (*rx__lock_stall)(struct rx_lock *l, int tag);
RX_TLS int rx__tls_seen_fd;

atomic_int rx__init_state = RX_INIT_NONE;
struct rx_config rx__cfg;

pid_t rx__owner_pid;
_Atomic uint32_t *rx__fork_word;

uint64_t rx__rng_seed;
atomic_uint rx__rng_epoch;
RX_TLS struct rx_rng rx__tls_rng;
RX_TLS unsigned rx__tls_rng_epoch;

void rx__lock_wait(struct rx_lock *l)
{
	unsigned spins = 0, yields = 0;
	int tag = rx__lock_tag;

	for (;;) {
		int seen = 0;

		if (atomic_compare_exchange_weak_explicit(
			&l->held, &seen, tag, memory_order_acquire,
			memory_order_relaxed))
			return;
		while ((seen = atomic_load_explicit(
			    &l->held, memory_order_relaxed)) != 0) {
			if (++spins < 128)
				continue;
			sched_yield();
			spins = 0;
			if (++yields >= RX_LOCK_STALL_YIELDS) {
				bool (*stall)(struct rx_lock *, int) =
				    rx__lock_stall;

				yields = 0;
				if (stall && stall(l, seen))
					return;
			}
		}
	}
}

/* Map and arm the fork word (start-up). Leaves it NULL on failure. The
 * page size comes from the auxiliary vector, which start-up already
 * reads: sysconf would be one more libc function to bind (ADR-552). */
static void arm_fork_word(void)
{
	size_t page = (size_t)getauxval(AT_PAGESZ);
	void *p;

	if (page == 0)
		page = 4096;
	p = mmap(NULL, page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	if (madvise(p, page, MADV_WIPEONFORK) != 0) {
		munmap(p, page);
		return;
	}
	atomic_store((_Atomic uint32_t *)p, 1);
	atomic_store(&rx__fork_word, (_Atomic uint32_t *)p);
}

void rx__runtime_setup(void)
{
	struct timespec wall = {0, 0};

	rx__owner_pid = getpid();
	arm_fork_word();
	/* The wall clock through clock_gettime, which the monotonic reads
	 * bind anyway, rather than time() (ADR-552). */
	(void)clock_gettime(CLOCK_REALTIME, &wall);
	rx__rng_seed = ((uint64_t)rx__owner_pid << 32) ^ rx__now_ns() ^
		       ((uint64_t)wall.tv_sec * UINT64_C(1000000000) +
			(uint64_t)wall.tv_nsec);
	atomic_store(&rx__rng_epoch, 1);
}

void rx__runtime_after_fork_child(void)
{
	rx__owner_pid = getpid();
	if (rx__fork_word) /* wiped by the fork; atfork ran: ours again */
		atomic_store(rx__fork_word, 1);
	rx__rng_seed ^= (uint64_t)rx__owner_pid << 32;
	atomic_fetch_add(&rx__rng_epoch, 1);
	rx__inside = 0;
}
