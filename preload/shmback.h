/*
 * preload/shmback.h - making sure pages of the shared segment are there
 * before they are first touched (shmback.c; ADR-680, ADR-681).
 *
 * The segment is a sparse file mapped MAP_SHARED: a page is given memory
 * when first touched, and a touch the file system cannot back - a full
 * tmpfs such as Docker's 64 MB /dev/shm, a file cut short - is a SIGBUS
 * in the host program. So every part is reserved with fallocate(2) before
 * anything touches it, where a full file system is an error return.
 */
#ifndef RESILIX_PRELOAD_SHMBACK_H
#define RESILIX_PRELOAD_SHMBACK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base.h"
#include "lock.h"
#include "resilix.h"

/* The file a segment was mapped from: its path, identity and size, and
 * where its per-key parts are (shared.c's header records them). */
struct rx_shm_file {
	const char *path;
	dev_t dev;
	ino_t ino;
	uint64_t size; /* bytes, the whole segment */
	char *base;    /* this process's mapping of it */
	uint32_t max_keys;
	uint64_t off_registry, off_locks, lock_bytes, off_waits, wait_bytes;
	struct rx_registry *registry; /* in the mapping */
	struct rx_lock *registry_lock;
};

/*
 * rx__shm_back - reserve the @len bytes at @off of the segment @f (the
 * whole pages that hold them) without touching them: MADV_POPULATE_WRITE
 * on this process's mapping (Linux 5.14), which faults the pages in and
 * returns an error where a touch would have raised SIGBUS; where the
 * kernel has no such advice, fallocate(2) on the file opened again by
 * its path (still the file mapped, still of its size). Neither needs a
 * descriptor kept open nor the rights the process had when it mapped the
 * segment (a server's workers drop them), as long as the kernel has the
 * advice. Returns 0, or an errno: EFAULT or ENOSPC when the pages cannot
 * be had (rx__shm_back_why says why). Pages already there cost no space
 * and never fail. A system call or a few: start-up and a key's first use.
 */
int rx__shm_back(const struct rx_shm_file *f, uint64_t off, uint64_t len);

/*
 * rx__shm_back_fixed - reserve what every process touches whatever keys
 * it uses: the header and process table (all before the registry) and
 * the registry's header and hash index, for a registry of these settings
 * not formatted yet. Returns 0 or an errno.
 */
int rx__shm_back_fixed(const struct rx_shm_file *f,
		       const struct rx_registry_config *rcfg,
		       const struct rx_guard_config *gcfg);

/*
 * rx__shm_back_keys - reserve the entry, window, lock and wait record of
 * the next @more keys past the registry's backed bound, then raise the
 * bound (under the registry lock, not held by the caller). Returns
 * whether they are reserved. When not, one line on stderr the first time
 * (the path, what is wrong, what to do), and no new attempt for a second
 * after @now_ns: the calls to new keys that would each try again pass
 * through unguarded meanwhile.
 */
bool rx__shm_back_keys(const struct rx_shm_file *f, uint32_t more,
		       uint64_t now_ns);

/* A phrase for what a failed rx__shm_back's @err means to the user, with
 * what to do: the file removed, replaced or cut short since it was mapped
 * (found by its path), else no space (free some, give the file system
 * more, or name a path on a larger one), or the errno's text. */
const char *rx__shm_back_why(const struct rx_shm_file *f, int err);

#endif
