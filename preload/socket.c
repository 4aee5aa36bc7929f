/*
 * preload/socket.c - the socket-lifecycle wrappers: connect, getsockopt,
 * close, and the calls that hand out fd numbers (socket, accept, accept4,
 * dup, dup2, dup3).
 *
 * Each wrapper is the first of the three layers (socket_wrapper's
 * pattern): the exported libc name, the lifecycle logic in call.c, and the
 * lazily bound real function of symbols.c. A wrapper only decides which
 * real function runs and returns what it returned, with errno untouched;
 * the one exception is a refused connect, which returns -1 with errno
 * ECONNREFUSED - an errno connect(2) documents - without calling the real
 * connect, for blocking and non-blocking sockets alike (DESIGN.md: a
 * refusal never sends a packet).
 *
 * Calls that return a fd number drop any state the table still holds for
 * that number: the kernel only hands out free numbers, so such state is
 * stale (the socket was closed through a path we do not see, such as
 * close_range or fclose on an fdopen'd socket) and must not be mistaken
 * for the new file. Tracking dup'ed and accepted sockets is a later step;
 * today they pass through untracked, as inbound sockets always will.
 */
#include "config.h"

#undef _FORTIFY_SOURCE /* we define the functions fortify would wrap */

#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "shim.h"

/* Drop stale state for a number the kernel just handed out. */
static int fresh_fd(int fd)
{
	if (fd >= 0 && rx__fd_tracked(fd))
		rx__fd_forget(fd);
	return fd;
}

RX_EXPORT int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
	const struct sockaddr *sa = RX_CSA(addr);
	struct rx_op op;
	int rc;

	switch (rx__connect_begin(&op, fd, sa, len)) {
	case RX_OP_REFUSE:
		errno = ECONNREFUSED;
		return -1;
	case RX_OP_TRACK:
		rc = rx__real_connect(fd, sa, len);
		rx__connect_end(&op, rc);
		return rc;
	case RX_OP_PASS:
	default:
		return rx__real_connect(fd, sa, len);
	}
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
	if (rx__fd_tracked(fd))
		rx__fd_forget(fd);
	rx__log_fd_lost(fd);
	return rx__real_close(fd);
}

RX_EXPORT int socket(int domain, int type, int protocol)
{
	return fresh_fd(rx__real_socket(domain, type, protocol));
}

RX_EXPORT int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
	return fresh_fd(rx__real_accept(fd, RX_SA(addr), len));
}

RX_EXPORT int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
	return fresh_fd(rx__real_accept4(fd, RX_SA(addr), len, flags));
}

RX_EXPORT int dup(int fd)
{
	return fresh_fd(rx__real_dup(fd));
}

/* dup2/dup3 close fd2 first (when it differs): forget it like close. */
RX_EXPORT int dup2(int fd, int fd2)
{
	if (fd != fd2 && rx__fd_tracked(fd2))
		rx__fd_forget(fd2);
	if (fd != fd2)
		rx__log_fd_lost(fd2);
	return rx__real_dup2(fd, fd2);
}

RX_EXPORT int dup3(int fd, int fd2, int flags)
{
	if (fd != fd2 && rx__fd_tracked(fd2))
		rx__fd_forget(fd2);
	if (fd != fd2)
		rx__log_fd_lost(fd2);
	return rx__real_dup3(fd, fd2, flags);
}
