/*
 * preload/io.c - the wrappers of every call that moves bytes: read, write,
 * send, recv, sendto, recvfrom, sendmsg, recvmsg, writev, readv, and the
 * fortified __read_chk, __recv_chk and __recvfrom_chk that programs built
 * with _FORTIFY_SOURCE call instead of read/recv/recvfrom.
 *
 * Design. One shape for all: ask call.c to begin (which, on an untracked
 * fd or a call already answered, costs a table lookup and a branch and
 * says "pass"), run the real function, report its result. Receiving calls
 * hand call.c the buffers the bytes landed in, as an iovec array, so the
 * sniffer reads a response that arrives through readv or recvmsg just as
 * one that arrives through read. Sending calls may be refused at the first
 * write of a new request on a kept-alive connection: then -1 with errno
 * ECONNREFUSED, and not a byte written (DESIGN.md section 3: no data is
 * lost or half-sent).
 *
 * The fortified variants check the buffer size exactly as glibc does
 * (calling __chk_fail on overflow) and then run the same logic as the
 * plain call, so they need no real counterpart: there is no symbol to go
 * missing.
 */
#include "config.h"

#undef _FORTIFY_SOURCE /* we define the functions fortify would wrap */

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim.h"

/* glibc's fortify failure: prints "buffer overflow detected" and aborts. */
extern void __chk_fail(void) __attribute__((noreturn));

/* glibc declares these only under _FORTIFY_SOURCE, which we undefine. */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       __SOCKADDR_ARG addr, socklen_t *addrlen);

/* Total bytes an iovec array asks for (0 for an invalid count: the real
 * call will fail with EINVAL). Saturates instead of wrapping. */
static size_t iov_total(const struct iovec *iov, long cnt)
{
	size_t total = 0;
	long i;

	if (!iov || cnt <= 0 || cnt > IOV_MAX)
		return 0;
	for (i = 0; i < cnt; i++) {
		if (iov[i].iov_len > SIZE_MAX - total)
			return SIZE_MAX;
		total += iov[i].iov_len;
	}
	return total;
}

/* ---- receiving ---------------------------------------------------- */

static ssize_t do_read(int fd, void *buf, size_t len)
{
	struct rx_op op;
	struct iovec iov;
	ssize_t n;

	if (rx__read_begin(&op, fd, 0, len) != RX_OP_TRACK)
		return rx__real_read(fd, buf, len);
	n = rx__real_read(fd, buf, len);
	iov.iov_base = buf;
	iov.iov_len = len;
	rx__read_end(&op, n, &iov, 1);
	return n;
}

static ssize_t do_recvfrom(int fd, void *buf, size_t len, int flags,
			   struct sockaddr *sa, socklen_t *salen)
{
	struct rx_op op;
	struct iovec iov;
	ssize_t n;

	if (rx__read_begin(&op, fd, flags, len) != RX_OP_TRACK)
		return rx__real_recvfrom(fd, buf, len, flags, sa, salen);
	n = rx__real_recvfrom(fd, buf, len, flags, sa, salen);
	iov.iov_base = buf;
	iov.iov_len = len;
	rx__read_end(&op, n, &iov, 1);
	return n;
}

static ssize_t do_recv(int fd, void *buf, size_t len, int flags)
{
	struct rx_op op;
	struct iovec iov;
	ssize_t n;

	if (rx__read_begin(&op, fd, flags, len) != RX_OP_TRACK)
		return rx__real_recv(fd, buf, len, flags);
	n = rx__real_recv(fd, buf, len, flags);
	iov.iov_base = buf;
	iov.iov_len = len;
	rx__read_end(&op, n, &iov, 1);
	return n;
}

RX_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	return do_read(fd, buf, len);
}

RX_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	return do_read(fd, buf, len);
}

RX_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	return do_recv(fd, buf, len, flags);
}

RX_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			     int flags)
{
	if (len > buflen)
		__chk_fail();
	return do_recv(fd, buf, len, flags);
}

RX_EXPORT ssize_t recvfrom(int fd, void *buf, size_t len, int flags,
			   __SOCKADDR_ARG addr, socklen_t *addrlen)
{
	return do_recvfrom(fd, buf, len, flags, RX_SA(addr), addrlen);
}

RX_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen,
				 int flags, __SOCKADDR_ARG addr,
				 socklen_t *addrlen)
{
	if (len > buflen)
		__chk_fail();
	return do_recvfrom(fd, buf, len, flags, RX_SA(addr), addrlen);
}

RX_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	struct rx_op op;
	ssize_t n;

	if (rx__read_begin(&op, fd, 0, iov_total(iov, iovcnt)) != RX_OP_TRACK)
		return rx__real_readv(fd, iov, iovcnt);
	n = rx__real_readv(fd, iov, iovcnt);
	rx__read_end(&op, n, iov, iovcnt);
	return n;
}

RX_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct rx_op op;
	ssize_t n;

	if (!msg ||
	    rx__read_begin(&op, fd, flags,
			   iov_total(msg->msg_iov, (long)msg->msg_iovlen)) !=
		RX_OP_TRACK)
		return rx__real_recvmsg(fd, msg, flags);
	n = rx__real_recvmsg(fd, msg, flags);
	rx__read_end(&op, n, msg->msg_iov, (int)msg->msg_iovlen);
	return n;
}

/* ---- sending ------------------------------------------------------ */

/* The common begin step of the sending calls: 1 = tracked, 0 = pass,
 * -1 = refused (errno set). */
static int send_begin(struct rx_op *op, int fd, int flags, size_t len)
{
	switch (rx__write_begin(op, fd, flags, len)) {
	case RX_OP_TRACK:
		return 1;
	case RX_OP_REFUSE:
		errno = ECONNREFUSED;
		return -1;
	case RX_OP_PASS:
	default:
		return 0;
	}
}

RX_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	struct rx_op op;
	ssize_t n;
	int b = send_begin(&op, fd, 0, len);

	if (b == 0)
		return rx__real_write(fd, buf, len);
	if (b < 0)
		return -1;
	n = rx__real_write(fd, buf, len);
	rx__write_end(&op, n);
	return n;
}

RX_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	struct rx_op op;
	ssize_t n;
	int b = send_begin(&op, fd, flags, len);

	if (b == 0)
		return rx__real_send(fd, buf, len, flags);
	if (b < 0)
		return -1;
	n = rx__real_send(fd, buf, len, flags);
	rx__write_end(&op, n);
	return n;
}

RX_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 __CONST_SOCKADDR_ARG addr, socklen_t addrlen)
{
	const struct sockaddr *sa = RX_CSA(addr);
	struct rx_op op;
	ssize_t n;
	int b = send_begin(&op, fd, flags, len);

	if (b == 0)
		return rx__real_sendto(fd, buf, len, flags, sa, addrlen);
	if (b < 0)
		return -1;
	n = rx__real_sendto(fd, buf, len, flags, sa, addrlen);
	rx__write_end(&op, n);
	return n;
}

RX_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	struct rx_op op;
	ssize_t n;
	int b = send_begin(&op, fd, 0, iov_total(iov, iovcnt));

	if (b == 0)
		return rx__real_writev(fd, iov, iovcnt);
	if (b < 0)
		return -1;
	n = rx__real_writev(fd, iov, iovcnt);
	rx__write_end(&op, n);
	return n;
}

RX_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct rx_op op;
	ssize_t n;
	int b = msg ? send_begin(&op, fd, flags,
				 iov_total(msg->msg_iov, (long)msg->msg_iovlen))
		    : 0;

	if (b == 0)
		return rx__real_sendmsg(fd, msg, flags);
	if (b < 0)
		return -1;
	n = rx__real_sendmsg(fd, msg, flags);
	rx__write_end(&op, n);
	return n;
}
