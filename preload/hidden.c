/*
 * preload/hidden.c - the closes a program makes through libc without
 * calling close(): fclose of a stream over a socket (fdopen), fcloseall,
 * and syscall(2) with a number that closes or renumbers fds; and the
 * changes of a socket's O_NONBLOCK that fcntl does not make: ioctl
 * FIONBIO, and syscall(2) with SYS_fcntl or SYS_ioctl (ADR-619).
 *
 * Design (ADR-500). The shim proves that a tracked number still holds its
 * socket by seeing every way the number can lose it: close, close_range,
 * closefrom, dup2 and dup3 onto it are wrapped and forget the number
 * first (ADR-142). These wrappers close the remaining doors a program
 * opens through libc: fclose forgets the stream's number before libc
 * closes it inside; syscall(SYS_close) forgets its number like close;
 * the other raw renumberings (close_range, dup2, dup3) and fcloseall,
 * which name no number the shim could forget cheaply, raise the fd
 * table's doubt, so that the next admission on a kept-alive connection
 * checks with one fstat again. A close the shim cannot see at all - an
 * inline system call, io_uring's close - is covered by the fstat every
 * refusal makes first (docs/limits.md).
 *
 * The number's mark (fdmark.h) keeps O_NONBLOCK as the shim saw it set,
 * and a socket it claims non-blocking is not asked at its connect's
 * EINPROGRESS (ADR-543): ioctl(FIONBIO) and the raw fcntl and ioctl make
 * the mark follow, as fcntl(F_SETFL) does, so that a blocking connect's
 * SO_SNDTIMEO expiry is still told from a pending non-blocking connect
 * when the program changed the mode that way (ADR-619).
 *
 * The real functions are found with dlsym(RTLD_NEXT) on first use: these
 * are not on any hot path, and the symbol table (symbols.c) need not know
 * them.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base.h"
#include "fdmark.h"
#include "fdtable.h"

typedef int (*fclose_fn)(FILE *);
typedef int (*fcloseall_fn)(void);
typedef long (*syscall_fn)(long, ...);
typedef int (*ioctl_fn)(int, unsigned long, ...);

/* The next definition of @name, looked up once (races only look it up
 * twice). */
static void *next_of(void *_Atomic *slot, const char *name)
{
	void *f = atomic_load_explicit(slot, memory_order_acquire);

	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		atomic_store_explicit(slot, f, memory_order_release);
	}
	return f;
}

static void *_Atomic next_fclose, *_Atomic next_fcloseall,
    *_Atomic next_syscall, *_Atomic next_ioctl;

/* A number about to be closed inside libc: forgotten as close does. */
static void closing(int fd)
{
	/* The mark first, as close does (ADR-631). */
	if (fd >= 0 && (unsigned)fd < rx__fd_capacity_now())
		rx__fd_mark_clear_closing(fd);
	atomic_thread_fence(memory_order_seq_cst);
	if (fd >= 0 && rx__fd_tracked(fd))
		rx__fd_forget(fd);
}

RX_EXPORT int fclose(FILE *f)
{
	fclose_fn real = (fclose_fn)next_of(&next_fclose, "fclose");

	if (f)
		closing(fileno(f));
	if (!real) {
		errno = ENOSYS;
		return EOF;
	}
	return real(f);
}

RX_EXPORT int fcloseall(void)
{
	fcloseall_fn real = (fcloseall_fn)next_of(&next_fcloseall, "fcloseall");

	rx__fd_doubt_raise(); /* streams over sockets may close unforgotten */
	if (!real) {
		errno = ENOSYS;
		return EOF;
	}
	return real();
}

/* A call that returned 0 may have set @fd's O_NONBLOCK: fcntl (@is_fcntl)
 * with command @cmd and argument @arg, or ioctl with request @cmd and
 * argument pointer @arg. The mark follows F_SETFL and FIONBIO (the kernel
 * read FIONBIO's int, so it is readable); anything else leaves it. */
static void mode_set(int fd, bool is_fcntl, long cmd, long arg)
{
	if (is_fcntl && cmd == F_SETFL)
		rx__fd_mark_flags(fd, (arg & O_NONBLOCK) != 0);
	else if (!is_fcntl && (unsigned)cmd == FIONBIO && arg != 0)
		rx__fd_mark_flags(fd, *(const int *)(uintptr_t)arg != 0);
}

/* syscall(@n) with arguments @a through @real, for SYS_ioctl, SYS_fcntl
 * and SYS_dup: a mode set as fcntl or ioctl would (mode_set), and a
 * duplicate drops both numbers' marks as dup does - the mode is the open
 * file's, which two numbers then share (ADR-543, ADR-619). */
static __attribute__((noinline)) long mode_call(syscall_fn real, long n,
						const long *a)
{
	long rc = real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
	int saved = errno;

	if (rc < 0)
		return rc;
	if (n == SYS_dup ||
	    (n == SYS_fcntl && (a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC))) {
		rx__fd_mark_clear((int)a[0]);
		rx__fd_mark_clear((int)rc);
	} else if (rc == 0) {
		mode_set((int)a[0], n == SYS_fcntl, a[1], a[2]);
	}
	errno = saved;
	return rc;
}

/*
 * syscall(2) takes up to six long arguments in registers (x86-64,
 * aarch64): they are read as such and handed on unchanged, as glibc's own
 * wrapper passes whatever the registers hold.
 */
RX_EXPORT long syscall(long n, ...)
{
	syscall_fn real = (syscall_fn)next_of(&next_syscall, "syscall");
	long a[6];
	va_list ap;
	int i;

	va_start(ap, n);
	for (i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (n == SYS_close)
		closing((int)a[0]);
#ifdef SYS_close_range
	else if (n == SYS_close_range)
		rx__fd_doubt_raise();
#endif
#ifdef SYS_dup2
	else if (n == SYS_dup2)
		rx__fd_doubt_raise();
#endif
	else if (n == SYS_dup3)
		rx__fd_doubt_raise();
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (n == SYS_ioctl || n == SYS_fcntl || n == SYS_dup)
		return mode_call(real, n, a);
	return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ioctl(2) takes one more argument, a pointer or an int in the same
 * register on the ABIs the shim builds for (x86-64, aarch64): read as a
 * pointer and handed on unchanged, as glibc's own wrapper does. FIONBIO
 * that succeeded: the number's mark follows (ADR-619). Any other request
 * costs a compare. */
RX_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	ioctl_fn real = (ioctl_fn)next_of(&next_ioctl, "ioctl");
	va_list ap;
	void *arg;
	int rc;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	rc = real(fd, req, arg);
	if (rc == 0 && (unsigned)req == FIONBIO)
		mode_set(fd, false, (long)req, (long)arg);
	return rc;
}
