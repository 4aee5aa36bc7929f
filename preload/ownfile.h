/*
 * preload/ownfile.h - the files resilix replaces by rename(2), the metrics
 * file and the state file, are replaced only when they are its own
 * (ADR-201, ADR-215, ADR-219). Shared by the shim and resilix-config, so
 * that `resilix-run --check` says what the shim would do.
 */
#ifndef RESILIX_PRELOAD_OWNFILE_H
#define RESILIX_PRELOAD_OWNFILE_H

#include <stddef.h>
#include <sys/types.h>

/* How a caller reads and closes: the shim passes its real functions (it
 * never calls an interposed name itself), resilix-config libc's. */
struct rx_file_io {
	ssize_t (*read)(int fd, void *buf, size_t len);
	int (*close)(int fd);
};

/*
 * rx_file_foreign - may the file at @path be replaced by one that starts
 * with the @len bytes of @head? NULL when nothing has the name, or it is a
 * regular file (not a symbolic link) that is empty or starts with @head
 * (a prefix of it, for a file cut short); otherwise why not, as a phrase
 * ("is a symbolic link", "is not a regular file", "does not start
 * with ..."): @what names the expected kind of file in that phrase. Reads
 * at most @len bytes (@len <= 64), never blocks (O_NONBLOCK: a FIFO) and
 * never follows a link. Thread-safe; errno is not preserved.
 */
const char *rx_file_foreign(const struct rx_file_io *io, const char *path,
			    const char *head, size_t len, const char *what,
			    char *why, size_t why_size);

/*
 * rx_file_create_tmp - create @tmp_path afresh for writing, mode @mode:
 * whatever had the name (a left-over of ours, a hard link to another
 * file, a FIFO) is unlinked first, and the file is created with O_EXCL,
 * O_NOFOLLOW and O_NONBLOCK, so no existing file is written into and a
 * FIFO never blocks. Returns the fd (O_CLOEXEC), or -1 with errno set.
 */
int rx_file_create_tmp(const char *tmp_path, mode_t mode);

#endif
