/*
 * preload/shmback.c - reserving the shared segment's pages before they are
 * first touched (shmback.h; ADR-680, ADR-681).
 *
 * MADV_POPULATE_WRITE first: it works through the mapping, so it needs
 * no descriptor (a program may close every descriptor it did not open)
 * and no right to open the file again (a server's workers run as another
 * user than the master that mapped it); it changes no byte, and a page
 * it cannot back is an error, not a signal. On a kernel without it,
 * fallocate(2) with FALLOC_FL_KEEP_SIZE on the file opened again: a
 * range already there costs nothing, a full file system says ENOSPC, a
 * file cut short is never grown back. glibc's posix_fallocate is not
 * used: where the file system has no fallocate it writes a zero byte
 * into each block it reads as zero, which could overwrite what another
 * process stored through its mapping meanwhile.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
#include "shmback.h"
#include "symbols.h"

/* After a reservation failed, none is tried again before this long. */
#define BACK_RETRY_NS (1000 * RX_NS_PER_MS)

static _Atomic uint64_t retry_ns;
static atomic_bool warned;

/* MADV_POPULATE_WRITE over the pages holding [@off, @off + @len): 0, an
 * errno, or EINVAL when the kernel does not know the advice. */
static int populate(const struct rx_shm_file *f, uint64_t off, uint64_t len)
{
#ifdef MADV_POPULATE_WRITE
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t start = off & ~(page - 1);
	uint64_t end = (off + len + page - 1) & ~(page - 1);

	if (end > f->size)
		end = f->size;
	while (madvise(f->base + start, end - start, MADV_POPULATE_WRITE) !=
	       0)
		if (errno != EINTR)
			return errno;
	return 0;
#else
	(void)f;
	(void)off;
	(void)len;
	return EINVAL;
#endif
}

/* fallocate(2) on the file opened again by its path, when it is still the
 * file mapped and of its size: 0 or an errno (EFAULT when it is not). */
static int allocate(const struct rx_shm_file *f, uint64_t off, uint64_t len)
{
	struct stat st;
	int fd = open(f->path, O_RDWR | O_NOFOLLOW | O_CLOEXEC), err = 0;

	if (fd < 0)
		return errno == ENOENT ? EFAULT : errno;
	if (fstat(fd, &st) != 0 || st.st_dev != f->dev ||
	    st.st_ino != f->ino || (uint64_t)st.st_size != f->size)
		err = EFAULT;
	while (!err &&
	       fallocate(fd, FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) != 0)
		if (errno != EINTR)
			err = errno;
	rx__real_close(fd);
	return err;
}

int rx__shm_back(const struct rx_shm_file *f, uint64_t off, uint64_t len)
{
	int err;

	if (len == 0)
		return 0;
	if (off >= f->size || len > f->size - off)
		return EINVAL;
	err = populate(f, off, len);
	if (err == EINVAL)
		err = allocate(f, off, len);
	return err;
}

const char *rx__shm_back_why(const struct rx_shm_file *f, int err)
{
	struct stat st;

	if (err != EFAULT && err != ENOSPC && err != EDQUOT)
		return err == ENOMEM ? "no memory to back it (a memory limit)"
				     : strerror(err);
	if (stat(f->path, &st) != 0 || st.st_dev != f->dev ||
	    st.st_ino != f->ino)
		return "it was removed or replaced since this process mapped "
		       "it";
	if ((uint64_t)st.st_size != f->size)
		return "it was truncated or resized since this process mapped "
		       "it (a process touching a page past its end is killed "
		       "by SIGBUS: remove a segment only when no process maps "
		       "it)";
	return "no space left on its file system: free space there, give it "
	       "more (Docker: --shm-size), or point RESILIX_SHARED at a path "
	       "on a larger one";
}

int rx__shm_back_fixed(const struct rx_shm_file *f,
		       const struct rx_registry_config *rcfg,
		       const struct rx_guard_config *gcfg)
{
	struct rx_registry_span sp[RX_REGISTRY_SPANS];
	int err = rx__shm_back(f, 0, f->off_registry);
	int k, n = rx_registry_fixed_spans(rcfg, gcfg, sp);

	for (k = 0; k < n && !err; k++)
		err = rx__shm_back(f, f->off_registry + sp[k].off, sp[k].len);
	return err;
}

/* Reserve keys @from to @from + @more - 1 of @f: 0 or an errno. */
static int back_range(const struct rx_shm_file *f, uint32_t from,
		      uint32_t more)
{
	struct rx_registry_span sp[RX_REGISTRY_SPANS];
	int err = 0, k, n;

	n = rx_registry_entry_spans(f->registry, from, more, sp);
	for (k = 0; k < n && !err; k++)
		err = rx__shm_back(f, f->off_registry + sp[k].off, sp[k].len);
	if (!err)
		err = rx__shm_back(f, f->off_locks + from * f->lock_bytes,
				   more * f->lock_bytes);
	if (!err)
		err = rx__shm_back(f, f->off_waits + from * f->wait_bytes,
				   more * f->wait_bytes);
	return err;
}

bool rx__shm_back_keys(const struct rx_shm_file *f, uint32_t more,
		       uint64_t now_ns)
{
	char line[4096 + 512];
	uint32_t from;
	int err;

	rx__lock(f->registry_lock);
	from = rx_registry_backed(f->registry);
	rx__unlock(f->registry_lock);
	if (more > f->max_keys - from)
		more = f->max_keys - from;
	if (more == 0)
		return true;
	if (now_ns < atomic_load(&retry_ns))
		return false;
	err = back_range(f, from, more);
	if (err) {
		atomic_store(&retry_ns, now_ns + BACK_RETRY_NS);
		if (!atomic_exchange(&warned, true)) {
			snprintf(line, sizeof(line),
				 "RESILIX_SHARED: %.4000s cannot take another "
				 "key (it holds %u): %s; calls to new keys "
				 "pass through unguarded",
				 f->path, from, rx__shm_back_why(f, err));
			rx__log_plain(line);
		}
		return false;
	}
	rx__lock(f->registry_lock);
	if (rx_registry_backed(f->registry) < from + more)
		rx_registry_set_backed(f->registry, from + more);
	rx__unlock(f->registry_lock);
	return true;
}
