/*
 * preload/ownfile.c - replacing only our own files (ownfile.h).
 *
 * The metrics file and the state file are written as a temporary file
 * beside them, then renamed over them. rename replaces whatever has the
 * name - a device node, a symbolic link, another program's file - and the
 * open of the temporary file would write into whatever had its name - a
 * hard link to someone's file, or a FIFO that blocks the program. So the
 * target is checked before (lstat, then at most 64 bytes read without
 * following a link or blocking), and the temporary file is always a new
 * file (unlink, then O_EXCL).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ownfile.h"

const char *rx_file_foreign(const struct rx_file_io *io, const char *path,
			    const char *head, size_t len, const char *what,
			    char *why, size_t why_size)
{
	unsigned char got[64];
	struct stat st;
	size_t shown = 0;
	ssize_t n;
	int fd;

	if (lstat(path, &st) != 0)
		return NULL; /* nothing has the name: the rename creates it */
	if (S_ISLNK(st.st_mode))
		return "is a symbolic link";
	if (!S_ISREG(st.st_mode))
		return "is not a regular file";
	if (len > sizeof(got))
		len = sizeof(got);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return NULL; /* gone meanwhile, or unreadable: rename decides */
	do
		n = io->read(fd, got, len);
	while (n < 0 && errno == EINTR);
	io->close(fd);
	if (n <= 0 || memcmp(got, head, (size_t)n) == 0)
		return NULL;
	/* @head need not be a string (the state file's magic is 4 bytes). */
	while (shown < len && head[shown] != '\n' && head[shown] != '\0')
		shown++;
	snprintf(why, why_size, "is not a %s (it does not start with '%.*s')",
		 what, (int)shown, head);
	return why;
}

int rx_file_create_tmp(const char *tmp_path, mode_t mode)
{
	if (unlink(tmp_path) != 0 && errno != ENOENT)
		return -1; /* a directory, or not ours to remove */
	return open(tmp_path,
		    O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW |
			O_NONBLOCK,
		    mode);
}
