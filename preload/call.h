/*
 * preload/call.h - the call state machine (call.c) as the wrappers see it:
 * each operation on a socket is a begin step, the real function, and an
 * end step. socket.c and io.c call these; the fd record's own entries
 * (close, shutdown, dup) are fdtable.h's.
 */
#ifndef RESILIX_PRELOAD_CALL_H
#define RESILIX_PRELOAD_CALL_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "fdlife.h"
#include "fdmark.h"
#include "fdtable.h"
#include "runtime.h"

/* struct rx_fd's awaiting: 1, a read was attempted since the call's last
 * write (ADR-193); with this bit, the call's last read or write ran out of
 * its SO_RCVTIMEO or SO_SNDTIMEO - a close now is the program giving up
 * after its own timeout (ADR-572). The next read sets 1, the next write
 * 0: the program went on. */
#define RX_AWAIT_EXPIRED 2u

/*
 * rx__call_end_record - end record @e (caller has rx__inside set; @fd is a
 * number of its socket): settle an outstanding call as abandoned, release
 * the key, untrack. The fd table's end hook (fdtable.h, rx_fd_end_fn).
 */
void rx__call_end_record(int fd, struct rx_fd *e);

/* rx__call_forget_mapped - rx__fd_forget_mapped (fdtable.h) with the
 * common end of a record - no call outstanding - inline (ADR-633): for
 * close, dup2/dup3 onto a number, close_range and socket(). Preserves
 * errno. */
void rx__call_forget_mapped(int fd);

/* What the begin step of an operation decided. */
enum rx_op_decision {
	RX_OP_PASS = 0, /* untracked: call the real function, nothing else */
	RX_OP_TRACK,	/* tracked: call the real function, then the end
			   step, immediately (it reads errno first) */
	RX_OP_REFUSE	/* refused: return -1 with rx__refusal_errno() */
};

/* One in-progress operation on a tracked fd, on the caller's stack. */
struct rx_op {
	int fd;
	struct rx_fd *e;
	size_t len;	  /* bytes asked for: 0 makes a 0 result no EOF */
	uint32_t epoch;	  /* entry epoch at begin */
	uint8_t phase;	  /* entry phase at begin (after any admission) */
	bool again;	  /* connect on a socket whose connect is pending */
	bool peek;	  /* MSG_PEEK: bytes will be read again (fed then) */
	bool dontwait;	  /* MSG_DONTWAIT: EAGAIN is not a timeout */
	bool cipher;	  /* ciphertext of a connection the TLS layer reads:
			     never a request, never the answer (ADR-440) */
	bool plain;	  /* the TLS layer's plaintext (ADR-440) */
	bool unpublished; /* connect: the record is claimed and filled but
			     mapped only by rx__connect_end (ADR-631) */
	/* Sending: the bytes (NULL: unseen), for a module that frames what
	 * is written (proto.h, ADR-408). A single buffer is copied to @one:
	 * the wrappers describe it with an iovec of their begin step's
	 * frame, gone by the end step. */
	const struct iovec *iov;
	int iovcnt;
	struct iovec one;
};

/*
 * rx__tls_cipher - an operation on record @e (@fd) begins: note the fd
 * for a TLS library call the TLS layer watches, and say whether the bytes
 * are ciphertext of a connection whose plaintext the TLS layer feeds, so
 * that the socket layer judges only what they say about the connection -
 * connected, an error, EOF - and neither starts nor answers a call with
 * them (ADR-440). Two thread-local loads when no TLS library is involved.
 */
static inline bool rx__tls_cipher(int fd, struct rx_fd *e)
{
	int mode = rx__tls_mode;

	if (mode == RX_TLS_PLAIN)
		return false;
	if (mode == RX_TLS_WATCH) {
		rx__tls_seen_fd = fd;
		if (__atomic_load_n(&e->proto.layer, __ATOMIC_RELAXED) !=
		    RX_PROTO_LAYER_TLS)
			__atomic_store_n(&e->proto.layer,
					 (uint8_t)RX_PROTO_LAYER_TLS,
					 __ATOMIC_RELAXED);
		return true;
	}
	return __atomic_load_n(&e->proto.layer, __ATOMIC_RELAXED) ==
	       RX_PROTO_LAYER_TLS;
}

/*
 * rx__connect_begin - admission at connect. Tracks AF_INET/AF_INET6
 * stream sockets only; anything else (and a shim that is not ready - the
 * wrapper runs rx__init_if_needed first, init.h -, a
 * re-entered call, a forked child without atfork) passes through with
 * stale fd state dropped. On RX_OP_TRACK the caller runs the real connect
 * and then rx__connect_end. Takes the number's mark (fdtable.h, ADR-542).
 * Thread-safe; takes and drops locks, never across the real connect.
 */
enum rx_op_decision rx__connect_begin(struct rx_op *op, int fd,
				      const struct sockaddr *sa, socklen_t len);
void rx__connect_end(struct rx_op *op, int rc);

/*
 * rx__connect_fast - connect() in one pass for its common case (connect.c,
 * ADR-632): the connect's result, with errno as the real connect left it
 * (or -1 with the refusal's errno); RX_CONNECT_GENERAL when the case does
 * not hold, with nothing changed: run rx__connect_begin and the rest.
 * Thread-safe, as rx__connect_begin.
 */
#define RX_CONNECT_GENERAL INT_MIN
int rx__connect_fast(int fd, const struct sockaddr *sa, socklen_t len);

/* rx__connect_fast_on - the process-wide half of rx__connect_fast's
 * case: rx__ka_on (no hook, no deadline), no retry, keys by address (not
 * RESILIX_KEY=host). Set once at start-up (init.c), read-only after. */
extern bool rx__connect_fast_on RX_HIDDEN;

/* The unusual ends of rx__connect_published (call.c): the record's
 * number was closed, duplicated or given another record during the
 * connect (@mapped: this record was mapped, and then the mark was gone),
 * or the connect failed or is pending (rc != 0). Clear rx__inside;
 * preserve errno. */
void rx__connect_lost(int fd, struct rx_fd *e, uint32_t epoch, bool mapped);
void rx__connect_failed(int fd, struct rx_fd *e, uint32_t epoch, int rc);

/*
 * rx__connect_published - the end of a connect on @fd that returned @rc,
 * whose record @e (at @epoch) was filled as CONNECTING but not mapped
 * (ADR-631): a connected one is WAITING at once, with no lock - no other
 * thread can reach it yet - and every outcome is mapped now, then proven
 * by the number's mark (rx__fd_mark_connected) to have been neither
 * closed nor replaced while the connect ran. A failed or pending connect
 * goes on through the general steps, mapped as CONNECTING. Clears
 * rx__inside; preserves errno. O(1) when connected.
 */
static inline __attribute__((always_inline)) void
rx__connect_published(int fd, struct rx_fd *e, uint32_t epoch, int rc)
{
	if (rc == 0) {
		/* The request has not begun: the idle time until its first
		 * write is the program's (ADR-192), as at any connect. */
		e->connected_ns = rx__now_ns();
		atomic_store_explicit(&e->phase, RX_FD_WAITING,
				      memory_order_relaxed);
	}
	if (!__builtin_expect(rx__fd_publish(fd, e), 1)) {
		rx__connect_lost(fd, e, epoch, false);
		return;
	}
	if (!__builtin_expect(rx__fd_mark_connected(fd), 1)) {
		rx__connect_lost(fd, e, epoch, true);
		return;
	}
	if (__builtin_expect(rc != 0, 0)) {
		rx__connect_failed(fd, e, epoch, rc);
		return;
	}
	rx__inside = 0;
}

/*
 * rx__getsockopt_so_error - after a real getsockopt(SO_ERROR) that returned
 * @rc, with @value the error it read: settles a non-blocking connect that
 * failed. Cheap no-op for untracked fds. Preserves errno.
 */
void rx__getsockopt_so_error(int fd, int rc, int value);

/*
 * rx__read_begin/rx__read_end - any call that receives bytes (read, recv,
 * recvfrom, readv, recvmsg). @flags are the recv flags (0 for read);
 * an MSG_ERRQUEUE or MSG_OOB read passes.
 * begin is inline: it only copies what end needs into @op (ADR-185).
 * end gets the real result and the buffers the bytes landed in; it sniffs
 * them and settles the call at its first response byte, EOF or error.
 */
/* rx__read_begin_rec - rx__read_begin for @fd's record @e, whose phase
 * the caller read as @ph (io.c's wrappers look the record up once). */
static inline enum rx_op_decision
rx__read_begin_rec(struct rx_op *op, int fd, struct rx_fd *e,
		   enum rx_fd_phase ph, int flags, size_t len)
{
	/* An error-queue or out-of-band read does not read the stream the
	 * answer comes on: whatever it returns - EAGAIN at once, 0 with
	 * control data, EINVAL - says nothing of the call (ADR-361). */
	if (flags & (MSG_ERRQUEUE | MSG_OOB))
		return RX_OP_PASS;
	/* Only a call waiting for its first byte cares about a read: body
	 * bytes of an answered call pass untouched. */
	if ((ph != RX_FD_CONNECTING && ph != RX_FD_WAITING) || rx__reentered())
		return RX_OP_PASS;
	rx__inside = 1;
	op->cipher = rx__tls_cipher(fd, e);
	op->fd = fd;
	op->e = e;
	op->len = len;
	op->phase = (uint8_t)ph;
	op->again = false;
	op->peek = (flags & MSG_PEEK) != 0;
	op->dontwait = (flags & MSG_DONTWAIT) != 0;
	/* The program waits for the answer (ADR-193); a read that then runs
	 * out of its SO_RCVTIMEO adds RX_AWAIT_EXPIRED (ADR-572). Of a TLS
	 * record's ciphertext, only a handshake's reads wait: the others are
	 * the library's, for a plaintext read the TLS layer marks itself, or
	 * for one it cannot see (a BIO_f_ssl), which waits for nothing the
	 * shim knows of, and whose EAGAIN is no timeout (ADR-642). */
	if (!op->cipher || rx__tls_mode != RX_TLS_NONE)
		atomic_store_explicit(&e->awaiting, 1, memory_order_relaxed);
	else
		op->dontwait = true;
	op->plain = rx__tls_mode == RX_TLS_PLAIN;
	op->epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
	return RX_OP_TRACK;
}

static inline enum rx_op_decision rx__read_begin(struct rx_op *op, int fd,
						 int flags, size_t len)
{
	struct rx_fd *e = rx__fd_get(fd);

	if (!e)
		return RX_OP_PASS;
	return rx__read_begin_rec(op, fd, e, rx__fd_phase(e), flags, len);
}
void rx__read_end(struct rx_op *op, ssize_t n, const struct iovec *iov,
		  int iovcnt);

/*
 * rx__read_peeked - between rx__read_begin and rx__read_end: a peek the
 * shim made itself (io.c, MSG_TRUNC) saw the answer's first bytes. Notes
 * when they arrived, as a program's own MSG_PEEK does, and feeds nothing
 * to the protocol module: the receive that follows does (ADR-360).
 */
void rx__read_peeked(struct rx_op *op);

/*
 * rx__write_begin/rx__write_end - any call that sends bytes. begin
 * admits a new call when the previous response has started (kept-alive
 * connection) and the bytes @iov (@iovcnt entries, NULL when unknown)
 * begin a new request (ADR-191), and may refuse it; any other write
 * continues the current exchange and is never refused. @iov is read only
 * then, on a tracked fd, and by end when the connection's module frames
 * the bytes written (ADR-408): end feeds it the bytes sent (@n of them;
 * a caller whose @n is not a byte count, sendmmsg's, clears op->iov
 * first). end settles the call on an I/O error.
 */
/*
 * rx__call_rekey - RESILIX_KEY=host, and the TLS session on @fd (record
 * @e) names its server @key ("name:port", @len bytes) by SNI (ADR-446):
 * unless the call is keyed so already, admit a call under @key, and end
 * the connect's call as a success of what it connected to; the request
 * that follows is then the named key's call. Only before the request's
 * first write. false: @key refused the call (the TLS layer refuses the
 * session's first write: no byte leaves). Takes and drops locks; may wait
 * in @key's limiter queue like a blocking connect.
 */
bool rx__call_rekey(int fd, struct rx_fd *e, const char *key, size_t len);

enum rx_op_decision rx__write_begin(struct rx_op *op, int fd, int flags,
				    size_t len, const struct iovec *iov,
				    int iovcnt);
void rx__write_end(struct rx_op *op, ssize_t n);

#endif
