/*
 * preload/socket.c - the socket-lifecycle wrappers: connect, getsockopt,
 * close, and the calls that hand out fd numbers (socket, accept, accept4,
 * dup, dup2, dup3).
 *
 * Each wrapper is the first of the three layers (socket_wrapper's
 * pattern): the exported libc name, the lifecycle logic in connect.c and
 * call.c (connect) and fdtable.c (close, dup, shutdown), and the lazily
 * bound real function of symbols.c. A wrapper only decides which real
 * function runs and returns what it returned, with errno untouched; the
 * one exception is a refused connect, which returns -1 with errno
 * ECONNREFUSED - an errno connect(2) documents - without calling the real
 * connect, for blocking and non-blocking sockets alike (docs/design.md: a
 * refusal never sends a packet).
 *
 * socket() marks the number it returns with what it made (fdmark.h,
 * ADR-542): the connect that follows asks the kernel nothing the mark
 * says. Every close seen here clears the mark, fcntl(F_SETFL) keeps its
 * O_NONBLOCK up to date (ADR-543), and a duplicate drops it.
 *
 * Calls that return a fd number (socket, accept, dup, fcntl F_DUPFD...)
 * drop any state the table still holds for that number: the kernel only
 * hands out free numbers, so such state is stale (the socket was closed
 * through a path we do not see, such as fclose on an fdopen'd socket) and
 * must not be mistaken for the new file. Accepted sockets are inbound and
 * never tracked. A duplicate of a tracked socket shares its call state
 * (ADR-213): a request written through one number and answered through
 * the other is one call, and only the close of the socket's last number
 * ends it.
 *
 * Every way of closing a number forgets its state before the real call:
 * close, dup2/dup3 onto it, close_range, closefrom (ADR-142). shutdown
 * with SHUT_RD or SHUT_RDWR ends tracking of the socket, for all its
 * numbers: the EOF the program then reads is its own doing, not the
 * upstream's. SHUT_WR is the ordinary
 * half-close after a request and changes nothing.
 *
 * glibc also exports some of these under reserved names (__connect,
 * __close, __dup2, __fcntl); a program or library linked against them
 * would otherwise bypass the shim, so they are wrapped too (ADR-140).
 */
#include "config.h"

#undef _FORTIFY_SOURCE /* we define the functions fortify would wrap */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admit.h"
#include "base.h"
#include "call.h"
#include "fdmark.h"
#include "fdtable.h"
#include "hot.h"
#include "init.h"
#include "log.h"
#include "retry.h"
#include "symbols.h"

/* glibc exports these reserved names without declaring them. */
int __connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len);
int __close(int fd);
int __dup2(int fd, int fd2);
int __fcntl(int fd, int cmd, ...);

/* @fd is closed or replaced, or the kernel just handed it out: its state
 * (stale in the second case) and its mark go. One bounds check and two
 * loads for a number the table does not know (ADR-582). The mark first:
 * a connect that publishes its record as it returns then either sees it
 * gone or has its record seen here (ADR-631). */
static inline __attribute__((always_inline)) void forget_number(int fd)
{
	if ((unsigned)fd < rx__fd_capacity_now()) {
		rx__fd_mark_clear_closing(fd);
		if (atomic_load_explicit(&rx__fd_map[fd],
					 memory_order_seq_cst) != 0)
			rx__call_forget_mapped(fd);
	}
}

/* Drop stale state for a number the kernel just handed out. */
static int fresh_fd(int fd)
{
	forget_number(fd);
	return fd;
}

static int do_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct rx_op op;
	int rc;

	rx__init_if_needed();
	switch (rx__connect_begin(&op, fd, sa, len)) {
	case RX_OP_REFUSE:
		errno = rx__refusal_errno();
		return -1;
	case RX_OP_TRACK:
		if (rx__retry_on()) { /* ADR-466 */
			uint64_t start = rx__now_ns();

			rc = rx__real_connect(fd, sa, len);
			rc = rx__connect_retry(&op, fd, sa, len, rc, start);
		} else {
			rc = rx__real_connect(fd, sa, len);
		}
		rx__connect_end(&op, rc);
		return rc;
	case RX_OP_PASS:
	default:
		return rx__real_connect(fd, sa, len);
	}
}

RX_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	int rc = rx__connect_fast(fd, RX_CSA(addr), len); /* ADR-632 */

	if (__builtin_expect(rc != RX_CONNECT_GENERAL, 1))
		return rc;
	return do_connect(fd, RX_CSA(addr), len);
}

/* This copy's own connect, bound inside the library whatever the symbol
 * search order says: init.c compares the process-wide "connect" with it
 * (ADR-530). */
extern __typeof(connect) rx__connect_self
    __attribute__((alias("connect"), visibility("hidden")));

RX_EXPORT int __connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	int rc = rx__connect_fast(fd, RX_CSA(addr), len); /* ADR-632 */

	if (__builtin_expect(rc != RX_CONNECT_GENERAL, 1))
		return rc;
	return do_connect(fd, RX_CSA(addr), len);
}

/*
 * getsockopt(SO_ERROR) is how curl, python and most event loops learn the
 * outcome of a non-blocking connect; reading it also clears it in the
 * kernel, so this is the one chance to see a refused connect.
 */
RX_EXPORT int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	int rc = rx__real_getsockopt(fd, level, name, val, len);

	if (level == SOL_SOCKET && name == SO_ERROR && rc == 0 && val && len &&
	    *len >= (socklen_t)sizeof(int) && rx__fd_tracked(fd))
		rx__getsockopt_so_error(fd, rc, *(const int *)val);
	return rc;
}

/* State goes before the real close: once the number is free, another
 * thread may get it from socket() and connect it. */
RX_EXPORT int close(int fd)
{
	forget_number(fd);
	rx__log_fd_lost(fd);
	return RX_HOT(close)(fd); /* ADR-634 */
}

RX_EXPORT int __close(int fd)
{
	return close(fd);
}

/*
 * Forget every tracked number in [first, last] that the table covers.
 * O(min(last, capacity) - first) loads: close_range is rare (before exec,
 * in daemons) and the table is at most RX_FD_CAP entries.
 */
static void forget_range(unsigned int first, unsigned int last)
{
	uint32_t cap =
	    atomic_load_explicit(&rx__fd_capacity, memory_order_acquire);
	unsigned int fd;

	if (cap == 0 || first >= cap)
		return;
	if (last >= cap)
		last = cap - 1;
	for (fd = first; fd <= last; fd++)
		forget_number((int)fd);
}

/*
 * close_range(2): the numbers in the range close, ours included; the log
 * file, if it is among them, falls back to stderr (ADR-142). With
 * CLOSE_RANGE_CLOEXEC nothing closes now and nothing is forgotten: the
 * numbers close at exec, where the new image starts from nothing anyway.
 * Invalid arguments (first > last, unknown flags) reach the kernel, which
 * refuses them, and we forget nothing.
 */
RX_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	unsigned int fd;

	if (first <= last &&
	    !(flags & ~(CLOSE_RANGE_UNSHARE | CLOSE_RANGE_CLOEXEC)) &&
	    !(flags & CLOSE_RANGE_CLOEXEC)) {
		int saved = errno;

		forget_range(first, last);
		/* The log file sits at a fixed high number (>= 100). */
		for (fd = first; fd <= last && fd < 1024; fd++)
			rx__log_fd_lost((int)fd);
		errno = saved;
	}
	return rx__real_close_range(first, last, flags);
}

RX_EXPORT void closefrom(int lowfd)
{
	if (lowfd >= 0) {
		int saved = errno;
		unsigned int fd;

		forget_range((unsigned)lowfd, ~0U);
		for (fd = (unsigned)lowfd; fd < 1024; fd++)
			rx__log_fd_lost((int)fd);
		errno = saved;
	}
	rx__real_closefrom(lowfd);
}

RX_EXPORT int shutdown(int fd, int how)
{
	if ((how == SHUT_RD || how == SHUT_RDWR) && rx__fd_tracked(fd))
		rx__fd_end(fd);
	else if (how == SHUT_WR && rx__fd_tracked(fd))
		rx__fd_end_unsent(fd); /* ADR-643 */
	return rx__real_shutdown(fd, how);
}

/* What socket() made is known without asking the kernel at connect
 * (ADR-542). */
RX_EXPORT int socket(int domain, int type, int protocol)
{
	/* The kind first: only it is kept across the real call. */
	unsigned kind =
	    ((domain == AF_INET || domain == AF_INET6) &&
		     (type & ~(SOCK_NONBLOCK | SOCK_CLOEXEC)) == SOCK_STREAM
		 ? RX_MARK_STREAM
		 : RX_MARK_OTHER) |
	    (type & SOCK_NONBLOCK ? RX_MARK_NONBLOCK : 0);
	int fd = RX_HOT(socket)(domain, type, protocol); /* ADR-634 */

	/* The mark overwrites whatever mark the number had; stale state
	 * goes as for any new number (ADR-582). */
	if ((unsigned)fd < rx__fd_capacity_now()) {
		if (atomic_load_explicit(&rx__fd_map[fd],
					 memory_order_relaxed) != 0)
			rx__call_forget_mapped(fd);
		rx__fd_mark_set_at(fd, kind);
	}
	return fd;
}

RX_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return fresh_fd(rx__real_accept(fd, RX_SA(addr), len));
}

RX_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	return fresh_fd(rx__real_accept4(fd, RX_SA(addr), len, flags));
}

/* @newfd (or -1) is a duplicate of @fd: it shares @fd's state, and
 * whatever stale state the number had is gone. A socket with two numbers
 * may be connected through either: neither keeps a mark (ADR-542). */
static int duplicate(int fd, int newfd)
{
	if (newfd >= 0) {
		rx__fd_mark_clear(fd);
		rx__fd_mark_clear(newfd);
	}
	if (newfd >= 0 && rx__fd_tracked(fd))
		rx__fd_dup(fd, newfd);
	else
		fresh_fd(newfd);
	return newfd;
}

RX_EXPORT int dup(int fd)
{
	return duplicate(fd, rx__real_dup(fd));
}

/* Does dup2/dup3 from @fd close its target? Not when @fd is not open:
 * the kernel refuses with EBADF and fd2 keeps its file (ADR-570). One
 * fcntl, on a number the table does not know as open. */
static bool dup_source_open(int fd)
{
	int saved = errno;
	bool open = fd >= 0 && (rx__fd_tracked(fd) ||
				rx__real_fcntl(fd, F_GETFD, 0L) >= 0);

	errno = saved;
	return open;
}

/* dup2/dup3 close fd2 first (when it differs and the call is valid):
 * forget it like close. */
RX_EXPORT int dup2(int fd, int fd2)
{
	if (fd == fd2 || !dup_source_open(fd))
		return rx__real_dup2(fd, fd2);
	forget_number(fd2);
	rx__log_fd_lost(fd2);
	return duplicate(fd, rx__real_dup2(fd, fd2));
}

RX_EXPORT int __dup2(int fd, int fd2)
{
	return dup2(fd, fd2);
}

RX_EXPORT int dup3(int fd, int fd2, int flags)
{
	if (fd == fd2 || (flags & ~O_CLOEXEC) || !dup_source_open(fd))
		return rx__real_dup3(fd, fd2, flags); /* EINVAL, EBADF */
	forget_number(fd2);
	rx__log_fd_lost(fd2);
	return duplicate(fd, rx__real_dup3(fd, fd2, flags));
}

/*
 * fcntl's third argument: by command, an int, a pointer, or nothing
 * (fcntl(2)). Reading it with the wrong type is undefined behaviour, and on
 * x86-64 an int read as a long carries whatever the caller left in the
 * upper half of the register, which F_DUPFD would then reject as out of
 * range. Commands this table does not know are read as pointers, as glibc
 * itself does: every argument fits in one.
 */
enum fcntl_arg_kind { FCNTL_NONE, FCNTL_INT, FCNTL_PTR };

static inline enum fcntl_arg_kind fcntl_kind(int cmd)
{
	switch (cmd) {
	case F_GETFD:
	case F_GETFL:
	case F_GETOWN:
	case F_GETSIG:
	case F_GETLEASE:
	case F_GETPIPE_SZ:
#ifdef F_GET_SEALS
	case F_GET_SEALS:
#endif
		return FCNTL_NONE;
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
	case F_SETFD:
	case F_SETFL:
	case F_SETOWN:
	case F_SETSIG:
	case F_SETLEASE:
	case F_NOTIFY:
	case F_SETPIPE_SZ:
#ifdef F_ADD_SEALS
	case F_ADD_SEALS:
#endif
		return FCNTL_INT;
	default:
		return FCNTL_PTR;
	}
}

/* RX_FCNTL_ARG_IN_REGISTER: 1 where that argument, one INTEGER-class
 * eightbyte whatever its type, arrives in the register a named third
 * argument would use (x86-64, the psABI 3.5.7), so the wrappers read it
 * as one and spill no register save area (ADR-591); 0 elsewhere, where
 * they use va_arg. -DRX_FCNTL_VA_ARG forces 0, to test that path. */
#if defined(__x86_64__) && defined(__LP64__) && !defined(RX_FCNTL_VA_ARG)
#define RX_FCNTL_ARG_IN_REGISTER 1
#else
#define RX_FCNTL_ARG_IN_REGISTER 0
#endif

#if RX_FCNTL_ARG_IN_REGISTER
/* The register's eight bytes, as @cmd's type: an int's upper half
 * dropped and sign-extended back, as va_arg(ap, int) reads it. */
static inline long fcntl_arg_raw(int cmd, uintptr_t raw)
{
	switch (fcntl_kind(cmd)) {
	case FCNTL_NONE:
		return 0;
	case FCNTL_INT:
		return (long)(int)(unsigned)raw;
	default:
		return (long)raw;
	}
}
#else
static inline long fcntl_arg(int cmd, va_list ap)
{
	switch (fcntl_kind(cmd)) {
	case FCNTL_NONE:
		return 0;
	case FCNTL_INT:
		return (long)va_arg(ap, int);
	default:
		return (long)(intptr_t)va_arg(ap, void *);
	}
}
#endif

/* F_DUPFD and F_DUPFD_CLOEXEC make a duplicate like dup does; F_SETFL
 * may change O_NONBLOCK, which the number's mark follows (ADR-543). */
static inline int fcntl_result(int fd, int cmd, long arg, int rc)
{
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
		return duplicate(fd, rc);
	if (cmd == F_SETFL && rc == 0)
		rx__fd_mark_flags(fd, (arg & O_NONBLOCK) != 0);
	return rc;
}

#if RX_FCNTL_ARG_IN_REGISTER
/* The wrappers under the libc names, with a named third argument: the
 * headers declare fcntl variadic, so the C names differ. */
int rx__fcntl_reg(int fd, int cmd, uintptr_t raw) __asm__("fcntl");
int rx__fcntl64_reg(int fd, int cmd, uintptr_t raw) __asm__("fcntl64");
int rx__fcntl_alias(int fd, int cmd, uintptr_t raw) __asm__("__fcntl");

RX_EXPORT int rx__fcntl_reg(int fd, int cmd, uintptr_t raw)
{
	long arg = fcntl_arg_raw(cmd, raw);

	return fcntl_result(fd, cmd, arg, rx__real_fcntl(fd, cmd, arg));
}

/* glibc's reserved name for the same function: the same wrapper. */
RX_EXPORT int rx__fcntl_alias(int fd, int cmd, uintptr_t raw)
    __attribute__((alias("fcntl")));

RX_EXPORT int rx__fcntl64_reg(int fd, int cmd, uintptr_t raw)
{
	long arg = fcntl_arg_raw(cmd, raw);

	return fcntl_result(fd, cmd, arg, rx__real_fcntl64(fd, cmd, arg));
}
#else
RX_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = fcntl_arg(cmd, ap);
	va_end(ap);
	return fcntl_result(fd, cmd, arg, rx__real_fcntl(fd, cmd, arg));
}

/* glibc's reserved name for the same function: the same wrapper. */
RX_EXPORT int __fcntl(int fd, int cmd, ...) __attribute__((alias("fcntl")));

RX_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	long arg;

	va_start(ap, cmd);
	arg = fcntl_arg(cmd, ap);
	va_end(ap);
	return fcntl_result(fd, cmd, arg, rx__real_fcntl64(fd, cmd, arg));
}
#endif
