/*
 * preload/errclass.h - what an errno seen on a guarded socket says (inline,
 * used by the call state machine and admission): nothing about the
 * upstream (a local problem), nothing yet (the call goes on), or the
 * verdict the core's rx_verdict_from_errno gives it; and whether a socket
 * blocks, which tells an SO_RCVTIMEO expiry from a non-blocking EAGAIN.
 */
#ifndef RESILIX_PRELOAD_ERRCLASS_H
#define RESILIX_PRELOAD_ERRCLASS_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <sys/socket.h>

#include "resilix/verdict.h"
#include "symbols.h"

/*
 * rx__local_errno - errnos that say something about this host or this
 * program, not about the destination: a bad fd or buffer, no local port
 * or memory left, a firewall rule on this host. They are not evidence
 * about the upstream (the breaker must not trip on a local problem); the
 * call is released as RX_REJECTED.
 */
static inline bool rx__local_errno(int err)
{
	switch (err) {
	case EBADF:
	case ENOTSOCK:
	case EFAULT:
	case EINVAL:
	case EAFNOSUPPORT:
	case EPROTOTYPE:
	case EADDRINUSE:
	case EADDRNOTAVAIL:
	case EISCONN:
	case EALREADY:
	case ENOTCONN:
	case EPERM:
	case EACCES:
	case ENOBUFS:
	case ENOMEM:
	case EMSGSIZE:
	case EOPNOTSUPP:
		return true;
	default:
		return false;
	}
}

/* rx__pending_errno - errnos that are not an outcome: the call goes on. */
static inline bool rx__pending_errno(int err)
{
	return err == EAGAIN || err == EWOULDBLOCK || err == EINTR ||
	       err == EINPROGRESS;
}

/* rx__errno_verdict - the verdict of @err seen in @phase. */
static inline enum rx_verdict rx__errno_verdict(int err, enum rx_phase phase)
{
	if (rx__local_errno(err))
		return RX_REJECTED;
	/* A connect() on a socket whose earlier connect failed, the failure
	 * already read (SO_ERROR): the kernel reports the socket's state
	 * without sending anything. The failure counted once (ADR-216). */
	if (phase == RX_PHASE_CONNECT && err == ECONNABORTED)
		return RX_REJECTED;
	return rx_verdict_from_errno(err, phase);
}

/* rx__fd_blocking - is @fd in blocking mode? Then EAGAIN means
 * SO_RCVTIMEO/SO_SNDTIMEO ran out: a timeout. Through the real fcntl:
 * the shim's own fcntl wrapper is for the program. */
static inline bool rx__fd_blocking(int fd)
{
	long fl = rx__real_fcntl(fd, F_GETFL, 0);

	return fl >= 0 && !(fl & O_NONBLOCK);
}

/* rx__fd_connected - has the socket on @fd a peer (is it connected)?
 * Preserves errno. One getpeername. */
static inline bool rx__fd_connected(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int saved = errno;
	bool peer = getpeername(fd, (struct sockaddr *)&ss, &len) == 0;

	errno = saved;
	return peer;
}

#endif
