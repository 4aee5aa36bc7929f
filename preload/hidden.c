/*
 * preload/hidden.c - the closes a program makes through libc without
 * calling close(): fclose of a stream over a socket (fdopen), fcloseall,
 * and syscall(2) with a number that closes or renumbers fds.
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
 * The real functions are found with dlsym(RTLD_NEXT) on first use: these
 * are not on any hot path, and the symbol table (symbols.c) need not know
 * them.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base.h"
#include "fdmark.h"
#include "fdtable.h"

typedef int (*fclose_fn)(FILE *);
typedef int (*fcloseall_fn)(void);
typedef long (*syscall_fn)(long, ...);

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
    *_Atomic next_syscall;

/* A number about to be closed inside libc: forgotten as close does. */
static void closing(int fd)
{
	if (fd >= 0 && rx__fd_tracked(fd))
		rx__fd_forget(fd);
	rx__fd_mark_clear(fd);
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
	return real(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}
