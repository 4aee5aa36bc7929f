/*
 * preload/io.c - the wrappers of every call that moves bytes: read, write,
 * send, recv, sendto, recvfrom, sendmsg, recvmsg, sendmmsg, recvmmsg,
 * writev, readv, sendfile, sendfile64, the reserved names glibc exports
 * for some of them (__read, __write, __send), and the fortified
 * __read_chk, __recv_chk and __recvfrom_chk that programs built with
 * _FORTIFY_SOURCE call instead of read/recv/recvfrom (glibc 2.36 has no
 * other _chk variant of a call that moves socket bytes: readv, writev,
 * recvmsg and the *mmsg calls are not fortified; ADR-140).
 *
 * Design. One shape for all: ask the call state machine (call.h) to begin (which, on an untracked
 * fd or a call already answered, costs a table lookup and a branch and
 * says "pass"), run the real function, report its result. Receiving calls
 * hand the state machine the buffers the bytes landed in, as an iovec array, so the
 * sniffer reads a response that arrives through readv or recvmsg just as
 * one that arrives through read. Sending calls may be refused at the first
 * write of a new request on a kept-alive connection: then -1 with errno
 * ECONNREFUSED, and not a byte written (docs/design.md section 3: no data
 * is lost or half-sent).
 *
 * sendmmsg and recvmmsg count as one send or one receive of all their
 * messages: a call is a request and its response, whatever the batching.
 * recvmmsg hands the sniffer the first message's bytes, which is where a
 * status line is. sendfile sends from a file to @out_fd, which may be a
 * tracked socket; its source is never a socket.
 *
 * sendto and sendmsg with MSG_FASTOPEN and a destination are an implicit
 * connect (TCP Fast Open): they are admitted there exactly like connect,
 * and a refusal returns -1/ECONNREFUSED with nothing sent.
 *
 * The fortified variants check the buffer size exactly as glibc does
 * (calling __chk_fail on overflow) and then run the same logic as the
 * plain call, so they need no real counterpart: there is no symbol to go
 * missing.
 */
#include "config.h"

#undef _FORTIFY_SOURCE /* we define the functions fortify would wrap */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <unistd.h>

#include "admit.h"
#include "base.h"
#include "call.h"
#include "fdtable.h"
#include "hot.h"
#include "init.h"
#include "keepalive.h"
#include "symbols.h"

/* glibc's fortify failure: prints "buffer overflow detected" and aborts. */
extern void __chk_fail(void) __attribute__((noreturn));

/* glibc declares these only under _FORTIFY_SOURCE, which we undefine. */
ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t len, size_t buflen, int flags,
		       __SOCKADDR_ARG addr, socklen_t *addrlen);
/* Reserved names glibc exports without declaring them. */
ssize_t __read(int fd, void *buf, size_t len);
ssize_t __write(int fd, const void *buf, size_t len);
ssize_t __send(int fd, const void *buf, size_t len, int flags);

#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif

/*
 * The fast path of every wrapper (ADR-146): the phase of @fd, read with
 * one bounds check and one load, and nothing else. A receiving call only
 * matters while a call waits for its first byte; a sending call only on a
 * tracked fd that is not done. Everything else - the untracked fds of a
 * process, body bytes of an answered call - goes straight to the real
 * function by a tail call: the wrapper then costs a few instructions over
 * a bare interposer (scripts/bench, section preload).
 */
#define LIKELY(x) __builtin_expect(!!(x), 1)

/* The record's phase and the table's capacity, as fdtable.h reads them
 * for the fast path (one load each). */
#define phase_at(fd) rx__fd_phase_at(fd)
#define capacity() rx__fd_capacity_now()

static inline __attribute__((always_inline)) bool recv_passes(unsigned ph)
{
	return ph != RX_FD_CONNECTING && ph != RX_FD_WAITING;
}

static inline __attribute__((always_inline)) bool send_passes(unsigned ph)
{
	return ph == RX_FD_UNTRACKED || ph == RX_FD_DONE;
}

/*
 * Bad pointers (ADR-195). The kernel answers a bad msghdr, iovec or
 * sockaddr with EFAULT; the shim must not crash reading it first. So the
 * calls that take a structure by pointer and have no fast path of their
 * own (recvmsg, sendmsg, recvmmsg, sendmmsg) read nothing through it until
 * the fd's phase says the call matters - the fast paths' test - and a
 * pointer into the first page (NULL plus a small offset, the usual bad
 * pointer) is handed to the real function untouched even then. A pointer
 * elsewhere that does not map still faults on a tracked fd (docs/limits.md).
 */
static inline bool recv_matters(int fd)
{
	return (unsigned)fd < capacity() && !recv_passes(phase_at(fd));
}

static inline bool send_matters(int fd)
{
	return (unsigned)fd < capacity() && !send_passes(phase_at(fd));
}

static inline bool low_ptr(const void *p)
{
	return (uintptr_t)p < 4096;
}

/*
 * FAST_PATH(passes, name, fd, args...): the whole wrapper for an fd that
 * does not matter - below the capacity and in a phase where @passes says
 * this direction of I/O passes - is a tail call through the hot table. An
 * fd at or beyond the capacity (or any fd before start-up) takes
 * rx__real_X, which checks the binding. FAST_RECV and FAST_SEND name the
 * two directions.
 */
#define FAST_PATH(passes, name, fd, ...)                                       \
	do {                                                                   \
		if (LIKELY((unsigned)(fd) < capacity())) {                     \
			if (LIKELY(passes(phase_at(fd))))                      \
				return RX_HOT(name)(fd, __VA_ARGS__);          \
		} else {                                                       \
			return rx__real_##name(fd, __VA_ARGS__);               \
		}                                                              \
	} while (0)
#define FAST_RECV(name, fd, ...) FAST_PATH(recv_passes, name, fd, __VA_ARGS__)
#define FAST_SEND(name, fd, ...) FAST_PATH(send_passes, name, fd, __VA_ARGS__)

/*
 * FAST_PATH_TO(passes, name, to, fd, args...): FAST_PATH for the hottest
 * wrappers (read, recv, write, send), which hand an fd that matters to
 * @to with the record and phase the test just read: the record is looked
 * up once per call (ADR-531). The untracked fd's path is FAST_PATH's; a
 * tracked one's phase is read as rx__fd_phase reads it (acquire), so the
 * record's fields published with it are seen too.
 */
#define FAST_PATH_TO(passes, name, to, fd, ...)                                \
	do {                                                                   \
		if (LIKELY((unsigned)(fd) < capacity())) {                     \
			uint32_t i_ = atomic_load_explicit(                    \
			    &rx__fd_map[(unsigned)(fd)], memory_order_relaxed); \
			struct rx_fd *e_;                                      \
			unsigned ph_;                                          \
                                                                               \
			if (LIKELY(i_ == 0))                                   \
				return RX_HOT(name)(fd, __VA_ARGS__);          \
			e_ = &rx__fd_pool[i_];                                 \
			ph_ = atomic_load_explicit(&e_->phase,                 \
						   memory_order_acquire);      \
			if (LIKELY(passes(ph_)))                               \
				return RX_HOT(name)(fd, __VA_ARGS__);          \
			return to(e_, (enum rx_fd_phase)ph_, fd, __VA_ARGS__); \
		}                                                              \
		return rx__real_##name(fd, __VA_ARGS__);                       \
	} while (0)

#define RX_NOINLINE __attribute__((noinline))

/*
 * do_recv, do_write and do_send (and keepalive.c's paths) run only behind
 * FAST_PATH_TO, for an fd below the capacity, which is published after the
 * binding: their real calls go through the hot table too, without
 * rx__real_X's "is the table bound?" check (ADR-187).
 */

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

/*
 * MSG_TRUNC (ADR-360). On a TCP socket the kernel discards the bytes a
 * MSG_TRUNC receive takes instead of copying them: the program's buffer
 * (NULL, or whatever it held before) says nothing of the answer and is
 * never read. The head of the bytes about to be discarded is peeked
 * first, into the shim's own buffer, and they are judged by it. The peek
 * waits as the receive would - the program's flags and the socket's
 * mode and SO_RCVTIMEO - unless the receive has MSG_WAITALL on a socket
 * with an SO_RCVTIMEO: that timeout bounds the receive's whole wait,
 * which a waiting peek would lengthen, so the peek does not wait, and
 * bytes it did not see are judged as a blocking splice's (ADR-224).
 * Without a timeout, waiting for the first byte is waiting the receive
 * does anyway (one getsockopt tells, on this rare path only). A peek that
 * fails is the receive's own result (a socket error is read once): it is
 * returned as such and the real receive is not made.
 */
#define RX_HEAD_PEEK 64

struct head {
	bool on; /* a MSG_TRUNC receive: judged by @buf, not the program's */
	ssize_t seen; /* bytes peeked, or <= 0: none seen */
	char buf[RX_HEAD_PEEK];
};

/* Does a receive with @flags of @len bytes discard what it takes? A
 * program's own MSG_PEEK|MSG_TRUNC consumes nothing: fed at its read. */
static inline bool discards(int flags, size_t len)
{
	return (flags & (MSG_TRUNC | MSG_PEEK)) == MSG_TRUNC && len > 0;
}

/* Has @fd an SO_RCVTIMEO (or can it not tell)? Preserves errno. */
static bool rcv_timeout(int fd)
{
	struct timeval tv = {0, 0};
	socklen_t len = sizeof(tv);
	int saved = errno;
	bool set =
	    rx__real_getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) != 0 ||
	    tv.tv_sec != 0 || tv.tv_usec != 0;

	errno = saved;
	return set;
}

/* The peek before a MSG_TRUNC receive (see above). true: the receive is
 * over, return *@ret (errno set); false: make the real receive. */
static bool head_peek(struct rx_op *op, int fd, int flags, struct head *h,
		      ssize_t *ret)
{
	int pf = (flags & ~(MSG_TRUNC | MSG_WAITALL)) | MSG_PEEK;
	int saved = errno;

	h->on = true;
	if ((flags & MSG_WAITALL) && rcv_timeout(fd))
		pf |= MSG_DONTWAIT;
	h->seen = rx__real_recvfrom(fd, h->buf, sizeof(h->buf), pf, NULL, NULL);
	if (h->seen > 0)
		rx__read_peeked(op);
	/* Bytes, EOF (the receive sees it again), or nothing there yet for
	 * a MSG_WAITALL receive with a timeout, which then waits (or fails)
	 * itself. */
	if (h->seen >= 0 || ((flags & MSG_WAITALL) &&
			     (errno == EAGAIN || errno == EWOULDBLOCK))) {
		errno = saved;
		return false;
	}
	*ret = h->seen;
	rx__read_end(op, h->seen, NULL, 0);
	return true;
}

/* The end step of a receive whose bytes landed in @iov, or, when @h says
 * it discarded them, were peeked into h->buf (none: unseen). */
static void recv_end(struct rx_op *op, ssize_t n, const struct iovec *iov,
		     int iovcnt, struct head *h)
{
	struct iovec v;

	if (!h->on || n <= 0) {
		rx__read_end(op, n, iov, iovcnt);
		return;
	}
	if (h->seen <= 0) {
		rx__read_end(op, n, NULL, 0);
		return;
	}
	v.iov_base = h->buf;
	v.iov_len = (size_t)(h->seen < n ? h->seen : n);
	rx__read_end(op, (ssize_t)v.iov_len, &v, 1);
}

/* read and __read_chk on an fd that matters: the kept-alive cycle's
 * path, which takes the general steps itself when its case does not hold
 * (keepalive.h). */
static inline ssize_t read_rec(struct rx_fd *e, enum rx_fd_phase ph, int fd,
			       void *buf, size_t len)
{
	return rx__ka_recv(RX_KA_READ, fd, e, ph, buf, len);
}

static RX_NOINLINE ssize_t do_recvfrom(int fd, void *buf, size_t len, int flags,
				       struct sockaddr *sa, socklen_t *salen)
{
	struct rx_op op;
	struct iovec iov;
	struct head h = {.on = false};
	ssize_t n;

	if (rx__read_begin(&op, fd, flags, len) != RX_OP_TRACK)
		return rx__real_recvfrom(fd, buf, len, flags, sa, salen);
	if (discards(flags, len) && head_peek(&op, fd, flags, &h, &n))
		return n;
	n = rx__real_recvfrom(fd, buf, len, flags, sa, salen);
	iov.iov_base = buf;
	iov.iov_len = len;
	recv_end(&op, n, &iov, 1, &h);
	return n;
}

static RX_NOINLINE ssize_t do_recv(struct rx_fd *e, enum rx_fd_phase ph,
				   int fd, void *buf, size_t len, int flags)
{
	struct rx_op op;
	struct iovec iov;
	struct head h = {.on = false};
	ssize_t n;

	if (rx__read_begin_rec(&op, fd, e, ph, flags, len) != RX_OP_TRACK)
		return RX_HOT(recv)(fd, buf, len, flags);
	if (discards(flags, len) && head_peek(&op, fd, flags, &h, &n))
		return n;
	n = RX_HOT(recv)(fd, buf, len, flags);
	iov.iov_base = buf;
	iov.iov_len = len;
	recv_end(&op, n, &iov, 1, &h);
	return n;
}

/* recv on an fd that matters: without flags, read's path. */
static inline ssize_t recv_rec(struct rx_fd *e, enum rx_fd_phase ph, int fd,
			       void *buf, size_t len, int flags)
{
	if (flags == 0)
		return rx__ka_recv(RX_KA_RECV, fd, e, ph, buf, len);
	return do_recv(e, ph, fd, buf, len, flags);
}

RX_EXPORT ssize_t read(int fd, void *buf, size_t len)
{
	FAST_PATH_TO(recv_passes, read, read_rec, fd, buf, len);
}

RX_EXPORT ssize_t __read(int fd, void *buf, size_t len)
{
	return read(fd, buf, len);
}

RX_EXPORT ssize_t __read_chk(int fd, void *buf, size_t len, size_t buflen)
{
	if (len > buflen)
		__chk_fail();
	FAST_PATH_TO(recv_passes, read, read_rec, fd, buf, len);
}

RX_EXPORT ssize_t recv(int fd, void *buf, size_t len, int flags)
{
	FAST_PATH_TO(recv_passes, recv, recv_rec, fd, buf, len, flags);
}

RX_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t len, size_t buflen,
			     int flags)
{
	if (len > buflen)
		__chk_fail();
	FAST_PATH_TO(recv_passes, recv, recv_rec, fd, buf, len, flags);
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

	FAST_RECV(readv, fd, iov, iovcnt);

	if (low_ptr(iov) || /* ADR-195 */
	    rx__read_begin(&op, fd, 0, iov_total(iov, iovcnt)) != RX_OP_TRACK)
		return rx__real_readv(fd, iov, iovcnt);
	n = rx__real_readv(fd, iov, iovcnt);
	rx__read_end(&op, n, iov, iovcnt);
	return n;
}

/* preadv2 with offset -1 reads at the file position: on a socket, a readv
 * (with RWF_* flags). Any other offset is a file's: passed through. */
static ssize_t do_preadv2(int fd, const struct iovec *iov, int iovcnt,
			  off_t off, int flags)
{
	struct rx_op op;
	ssize_t n;

	if (off != -1 || !recv_matters(fd) || low_ptr(iov) ||
	    rx__read_begin(&op, fd, 0, iov_total(iov, iovcnt)) != RX_OP_TRACK)
		return rx__real_preadv2(fd, iov, iovcnt, off, flags);
	n = rx__real_preadv2(fd, iov, iovcnt, off, flags);
	rx__read_end(&op, n, iov, iovcnt);
	return n;
}

RX_EXPORT ssize_t preadv2(int fd, const struct iovec *iov, int iovcnt,
			  off_t off, int flags)
{
	return do_preadv2(fd, iov, iovcnt, off, flags);
}

RX_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int iovcnt,
			     off_t off, int flags)
{
	return do_preadv2(fd, iov, iovcnt, off, flags);
}

/* recvmsg's control data (msg_control) is not payload: only msg_iov is
 * read, as far as the result says the kernel filled it. */
RX_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	struct head h = {.on = false};
	struct rx_op op;
	size_t len;
	ssize_t n;

	if (!recv_matters(fd) || low_ptr(msg))
		return rx__real_recvmsg(fd, msg, flags);
	len = iov_total(msg->msg_iov, (long)msg->msg_iovlen);
	if (rx__read_begin(&op, fd, flags, len) != RX_OP_TRACK)
		return rx__real_recvmsg(fd, msg, flags);
	if (discards(flags, len) && head_peek(&op, fd, flags, &h, &n))
		return n;
	n = rx__real_recvmsg(fd, msg, flags);
	recv_end(&op, n, msg->msg_iov, (int)msg->msg_iovlen, &h);
	return n;
}

/* Bytes all messages of an mmsghdr vector ask for (saturating). */
static size_t mmsg_total(const struct mmsghdr *vec, unsigned int n)
{
	size_t total = 0, one;
	unsigned int i;

	if (!vec || n == 0 || n > UIO_MAXIOV)
		return 0;
	for (i = 0; i < n; i++) {
		one = iov_total(vec[i].msg_hdr.msg_iov,
				(long)vec[i].msg_hdr.msg_iovlen);
		if (one > SIZE_MAX - total)
			return SIZE_MAX;
		total += one;
	}
	return total;
}

RX_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags,
		       struct timespec *timeout)
{
	struct head h = {.on = false};
	struct rx_op op;
	size_t len;
	ssize_t k;
	int rc;

	if (!recv_matters(fd) || low_ptr(vec))
		return rx__real_recvmmsg(fd, vec, n, flags, timeout);
	len = mmsg_total(vec, n);
	if (rx__read_begin(&op, fd, flags, len) != RX_OP_TRACK)
		return rx__real_recvmmsg(fd, vec, n, flags, timeout);
	if (discards(flags, len) && head_peek(&op, fd, flags, &h, &k))
		return (int)k;
	rc = rx__real_recvmmsg(fd, vec, n, flags, timeout);
	if (rc > 0) {
		/* Messages after the first continue the response. */
		recv_end(&op, (ssize_t)vec[0].msg_len, vec[0].msg_hdr.msg_iov,
			 (int)vec[0].msg_hdr.msg_iovlen, &h);
	} else {
		rx__read_end(&op, rc, NULL, 0);
	}
	return rc;
}

/* ---- sending ------------------------------------------------------ */

/* A begin step's decision as the senders use it: 1 = tracked, 0 = pass,
 * -1 = refused (errno set: ECONNREFUSED, or EINTR for a wait a signal
 * ended, ADR-223). */
static int decided(enum rx_op_decision d)
{
	switch (d) {
	case RX_OP_TRACK:
		return 1;
	case RX_OP_REFUSE:
		errno = rx__refusal_errno();
		return -1;
	case RX_OP_PASS:
	default:
		return 0;
	}
}

/* The common begin step of the sending calls (see decided). @iov, the
 * bytes to send (NULL when unknown), is read only on an idle kept-alive
 * connection (ADR-191). */
static int send_begin(struct rx_op *op, int fd, int flags, size_t len,
		      const struct iovec *iov, int iovcnt)
{
	return decided(rx__write_begin(op, fd, flags, len, iov, iovcnt));
}

/* send_begin for one buffer. */
static int send_begin_buf(struct rx_op *op, int fd, int flags,
			  const void *buf, size_t len)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};

	return send_begin(op, fd, flags, len, &v, 1);
}

static RX_NOINLINE ssize_t do_write(int fd, const void *buf, size_t len)
{
	struct rx_op op;
	ssize_t n;
	int b = send_begin_buf(&op, fd, 0, buf, len);

	if (b == 0)
		return RX_HOT(write)(fd, buf, len);
	if (b < 0)
		return -1;
	n = RX_HOT(write)(fd, buf, len);
	rx__write_end(&op, n);
	return n;
}

/* write on an fd that matters: an idle record's write may start a call,
 * which the kept-alive cycle's path admits, and a waiting one's goes on
 * with its call (keepalive.h); any other continues the exchange. */
static inline ssize_t write_rec(struct rx_fd *e, enum rx_fd_phase ph, int fd,
				const void *buf, size_t len)
{
	if (ph == RX_FD_IDLE)
		return rx__ka_send(RX_KA_WRITE, fd, e, buf, len, 0);
	if (ph == RX_FD_WAITING)
		return rx__ka_more(RX_KA_WRITE, fd, e, buf, len, 0);
	return do_write(fd, buf, len);
}

RX_EXPORT ssize_t write(int fd, const void *buf, size_t len)
{
	FAST_PATH_TO(send_passes, write, write_rec, fd, buf, len);
}

RX_EXPORT ssize_t __write(int fd, const void *buf, size_t len)
{
	return write(fd, buf, len);
}

static RX_NOINLINE ssize_t do_send(int fd, const void *buf, size_t len,
				   int flags)
{
	struct rx_op op;
	ssize_t n;
	int b = send_begin_buf(&op, fd, flags, buf, len);

	if (b == 0)
		return RX_HOT(send)(fd, buf, len, flags);
	if (b < 0)
		return -1;
	n = RX_HOT(send)(fd, buf, len, flags);
	rx__write_end(&op, n);
	return n;
}

/* send on an fd that matters: write_rec's choice. */
static inline ssize_t send_rec(struct rx_fd *e, enum rx_fd_phase ph, int fd,
			       const void *buf, size_t len, int flags)
{
	if (ph == RX_FD_IDLE)
		return rx__ka_send(RX_KA_SEND, fd, e, buf, len, flags);
	if (ph == RX_FD_WAITING)
		return rx__ka_more(RX_KA_SEND, fd, e, buf, len, flags);
	return do_send(fd, buf, len, flags);
}

/*
 * TCP Fast Open: a send with MSG_FASTOPEN and a destination connects (and
 * may carry the first bytes in the SYN). Admission is the connect's; the
 * real call's result settles it like connect's would: bytes accepted or
 * EINPROGRESS leave the call waiting for its response, anything else is a
 * connect error. 1 = tracked, 0 = pass, -1 = refused (errno set).
 */
static int fastopen_begin(struct rx_op *op, int fd, int flags,
			  const struct sockaddr *sa, socklen_t salen)
{
	/* Not a fast open, or one on a socket we already track (the kernel
	 * answers EISCONN or EALREADY): the ordinary send path. */
	if (!(flags & MSG_FASTOPEN) || !sa || rx__fd_tracked(fd))
		return 2;
	rx__init_if_needed();
	return decided(rx__connect_begin(op, fd, sa, salen));
}

static void fastopen_end(struct rx_op *op, ssize_t n)
{
	rx__connect_end(op, n >= 0 ? 0 : -1);
}

RX_EXPORT ssize_t sendto(int fd, const void *buf, size_t len, int flags,
			 __CONST_SOCKADDR_ARG addr, socklen_t addrlen)
{
	const struct sockaddr *sa = RX_CSA(addr);
	struct rx_op op;
	ssize_t n;
	int b = fastopen_begin(&op, fd, flags, sa, addrlen);

	if (b == 1) {
		n = rx__real_sendto(fd, buf, len, flags, sa, addrlen);
		fastopen_end(&op, n);
		return n;
	}
	if (b == 2)
		b = send_begin_buf(&op, fd, flags, buf, len);

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
	int b;

	FAST_SEND(writev, fd, iov, iovcnt);
	if (low_ptr(iov)) /* ADR-195 */
		return rx__real_writev(fd, iov, iovcnt);
	b = send_begin(&op, fd, 0, iov_total(iov, iovcnt), iov, iovcnt);

	if (b == 0)
		return rx__real_writev(fd, iov, iovcnt);
	if (b < 0)
		return -1;
	n = rx__real_writev(fd, iov, iovcnt);
	rx__write_end(&op, n);
	return n;
}

/* pwritev2 with offset -1: on a socket, a writev (see do_preadv2). */
static ssize_t do_pwritev2(int fd, const struct iovec *iov, int iovcnt,
			   off_t off, int flags)
{
	struct rx_op op;
	ssize_t n;
	int b;

	if (off != -1 || !send_matters(fd) || low_ptr(iov))
		return rx__real_pwritev2(fd, iov, iovcnt, off, flags);
	b = send_begin(&op, fd, 0, iov_total(iov, iovcnt), iov, iovcnt);
	if (b == 0)
		return rx__real_pwritev2(fd, iov, iovcnt, off, flags);
	if (b < 0)
		return -1;
	n = rx__real_pwritev2(fd, iov, iovcnt, off, flags);
	rx__write_end(&op, n);
	return n;
}

RX_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int iovcnt,
			   off_t off, int flags)
{
	return do_pwritev2(fd, iov, iovcnt, off, flags);
}

RX_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int iovcnt,
			      off_t off, int flags)
{
	return do_pwritev2(fd, iov, iovcnt, off, flags);
}

RX_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	struct rx_op op;
	ssize_t n;
	int b;

	/* @msg is read only for a fast open or a fd that matters: a bad
	 * pointer is the kernel's to answer (EFAULT), ADR-195. */
	if ((!(flags & MSG_FASTOPEN) && !send_matters(fd)) || low_ptr(msg))
		return rx__real_sendmsg(fd, msg, flags);
	b = fastopen_begin(&op, fd, flags, msg->msg_name, msg->msg_namelen);
	if (b == 1) {
		n = rx__real_sendmsg(fd, msg, flags);
		fastopen_end(&op, n);
		return n;
	}
	if (b == 2)
		b = send_begin(&op, fd, flags,
			       iov_total(msg->msg_iov, (long)msg->msg_iovlen),
			       msg->msg_iov, (int)msg->msg_iovlen);

	if (b == 0)
		return rx__real_sendmsg(fd, msg, flags);
	if (b < 0)
		return -1;
	n = rx__real_sendmsg(fd, msg, flags);
	rx__write_end(&op, n);
	return n;
}

RX_EXPORT ssize_t send(int fd, const void *buf, size_t len, int flags)
{
	FAST_PATH_TO(send_passes, send, send_rec, fd, buf, len, flags);
}

RX_EXPORT ssize_t __send(int fd, const void *buf, size_t len, int flags)
{
	return send(fd, buf, len, flags);
}

RX_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	struct rx_op op;
	int rc;
	int b;

	if (!send_matters(fd) || low_ptr(vec)) /* ADR-195 */
		return rx__real_sendmmsg(fd, vec, n, flags);
	b = send_begin(&op, fd, flags, mmsg_total(vec, n),
		       n > 0 ? vec[0].msg_hdr.msg_iov : NULL,
		       n > 0 ? (int)vec[0].msg_hdr.msg_iovlen : 0);
	if (b == 0)
		return rx__real_sendmmsg(fd, vec, n, flags);
	if (b < 0)
		return -1;
	rc = rx__real_sendmmsg(fd, vec, n, flags);
	/* rc counts messages; any message sent means bytes went out. Not a
	 * byte count: a module that frames writes cannot be fed. */
	op.iov = NULL;
	rx__write_end(&op, rc);
	return rc;
}

static ssize_t do_sendfile(int out, int in, off_t *off, size_t count,
			   bool large)
{
	struct rx_op op;
	ssize_t n;
	int b = send_begin(&op, out, 0, count, NULL, 0);

	if (b == 0)
		return large ? rx__real_sendfile64(out, in, off, count)
			     : rx__real_sendfile(out, in, off, count);
	if (b < 0)
		return -1;
	n = large ? rx__real_sendfile64(out, in, off, count)
		  : rx__real_sendfile(out, in, off, count);
	rx__write_end(&op, n);
	return n;
}

RX_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
	return do_sendfile(out, in, off, count, false);
}

RX_EXPORT ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
	return do_sendfile(out, in, (off_t *)off, count, true);
}

/*
 * splice (ADR-224). Into a tracked socket, it sends bytes the shim cannot
 * see, as sendfile does. Out of a tracked socket waiting for its answer,
 * the bytes go to a pipe, unseen: the socket is peeked first (MSG_PEEK,
 * non-blocking, no wait) so a status line already there is read as a
 * read() would read it; bytes that arrive while splice blocks are
 * evidence that the upstream answered, judged as bytes of a protocol the
 * shim does not read (success at the first byte, ADR-147).
 */
/* Enough of a response to hold its status line. */
#define RX_SPLICE_PEEK 64

RX_EXPORT ssize_t splice(int in, off_t *in_off, int out, off_t *out_off,
			 size_t len, unsigned int flags)
{
	char head[RX_SPLICE_PEEK];
	struct iovec iov = {.iov_base = head, .iov_len = 0};
	struct rx_op op;
	ssize_t n, seen;
	int b;

	if (send_matters(out)) {
		b = send_begin(&op, out, 0, len, NULL, 0);
		if (b < 0)
			return -1;
		n = rx__real_splice(in, in_off, out, out_off, len, flags);
		if (b > 0)
			rx__write_end(&op, n);
		return n;
	}
	if (!recv_matters(in) || rx__read_begin(&op, in, 0, len) != RX_OP_TRACK)
		return rx__real_splice(in, in_off, out, out_off, len, flags);
	b = errno;
	seen = rx__real_recvfrom(in, head, sizeof(head),
				 MSG_PEEK | MSG_DONTWAIT, NULL, NULL);
	errno = b;
	n = rx__real_splice(in, in_off, out, out_off, len, flags);
	if (n > 0 && seen > 0) {
		iov.iov_len = (size_t)(seen < n ? seen : n);
		rx__read_end(&op, (ssize_t)iov.iov_len, &iov, 1);
	} else {
		rx__read_end(&op, n, NULL, 0); /* n > 0: unseen bytes */
	}
	return n;
}
