/*
 * preload/keepalive.c - the fused cycle of a kept-alive HTTP connection
 * (ADR-531): idle -> waiting at the request's first write, waiting ->
 * idle at the answer's first bytes, each step one pass over the fd record
 * the wrapper found (io.c), with the clock read once and each lock - the
 * key's, the record's stripe - taken once; and on a new connection the
 * first request line, which goes on with the call its connect admitted
 * (ADR-585).
 *
 * One cheap test guards each step, and whatever it does not cover goes to
 * the call state machine's general step (call.c) untouched, which then
 * decides as if this file did not exist: no hook or deadline in the
 * process (rx__ka_on; a shared segment's hold row is kept here as in
 * admit.c, ADR-492); a thread neither inside the shim,
 * nor in a curl transfer, nor in a TLS library call; a connection the
 * HTTP module frames on the socket itself; a number proven to hold the
 * socket (ADR-500) and a record no other number shares (ADR-213); a
 * request line "GET /" or "POST /" (ADR-214) and a whole final status
 * line in the first read (ADR-187); a guard in its common case - breaker
 * closed, limiter below its slots, no other policy (rx_guard_admit_fast).
 * A step that finds, under a lock, that its case does not hold has
 * changed nothing and hands over too.
 *
 * The verdict is rx__judge's (judge.h, ADR-310), as for every call.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

#include "admit.h"
#include "call.h"
#include "fdtable.h"
#include "hot.h"
#include "judge.h"
#include "keepalive.h"
#include "protocols.h"
#include "runtime.h"
#include "verdict-inl.h"

#define KA_LIKELY(x) __builtin_expect(!!(x), 1)

/* This thread is in nothing the general steps handle: not inside the
 * shim (nor holding its locks), not in a TLS library call (ADR-440), and
 * for a write not in a curl transfer either (ADR-152: its new requests
 * are the curl layer's; a read is judged alike inside one or not). */
static inline bool thread_plain(bool writing)
{
	return (rx__inside | rx__locks_held | rx__tls_mode |
		(writing ? rx__curl_active : 0)) == 0;
}

/* rx__permit_copy for a permit with the default policies' two tickets
 * (rx_guard_admit_fast's), the general copy otherwise. */
static inline void permit_copy(struct rx_gate_permit *dst,
			       const struct rx_gate_permit *src)
{
	if (KA_LIKELY(src->count == 2)) {
		dst->count = 2;
		dst->tickets[0] = src->tickets[0];
		dst->tickets[1] = src->tickets[1];
		return;
	}
	rx__permit_copy(dst, src);
}

/* The HTTP module frames @e's connection, fed by the socket layer: the
 * module id and the layer, two adjacent bytes each stored atomically
 * (protocols.h), read as one relaxed 16-bit load. */
_Static_assert(offsetof(struct rx_proto_state, layer) ==
		   offsetof(struct rx_proto_state, id) + 1 &&
	       offsetof(struct rx_fd, proto) % 2 == 0,
	       "http_on_socket reads id and layer as one 16-bit word");

static inline bool http_on_socket(const struct rx_fd *e)
{
	const uint8_t want[2] = {RX_PROTO_HTTP, RX_PROTO_LAYER_SOCKET};
	uint16_t w, have;

	memcpy(&w, want, 2);
	have = __atomic_load_n((const uint16_t *)(const void *)&e->proto.id,
			       __ATOMIC_RELAXED);
	return have == w;
}

/* rx__fd_vouched's cheap half (ADR-500): no close went unseen since the
 * number was last seen to hold the socket. */
static inline bool proven(const struct rx_fd *e)
{
	return atomic_load_explicit(&rx__fd_proven[e - rx__fd_pool],
				    memory_order_relaxed) ==
	       atomic_load_explicit(&rx__fd_doubt, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * The request's first write: admit.
 * ---------------------------------------------------------------------- */

/* Does @buf (@len bytes) begin a request line, by the inline test alone
 * (ADR-214)? Anything else - a longer method, a body - is the general
 * step's to tell. */
static inline bool request_line(const void *buf, size_t len)
{
	const unsigned char *b = buf;
	uint32_t w4;

	if (len < 6 || (uintptr_t)buf < 4096) /* ADR-195 */
		return false;
	memcpy(&w4, b, 4);
	return (w4 == RX_HTTP_WORD4('G', 'E', 'T', ' ') && b[4] == '/') ||
	       (w4 == RX_HTTP_WORD4('P', 'O', 'S', 'T') && b[4] == ' ' &&
		b[5] == '/');
}

/* start_call's commit (call.c), with the record's stripe lock held and
 * the record idle at the epoch the admission read. */
static inline void commit_call(struct rx_fd *e,
			       const struct rx_gate_permit *permit,
			       uint64_t now)
{
	permit_copy(&e->permit, permit);
	e->dl_seq = 0; /* no deadline: rx__ka_on */
	e->start_ns = now;
	e->first_byte_ns = 0;
	e->peeked = 0;
	atomic_store_explicit(&e->wrote, 1, memory_order_relaxed);
	rx__http_next(rx__proto_http(&e->proto));
	atomic_fetch_add_explicit(&e->epoch, 1, memory_order_relaxed);
	atomic_store_explicit(&e->phase, RX_FD_WAITING, memory_order_release);
}

/* The real function a wrapper of @how stands for (hot.h). */
static inline ssize_t real_send(enum rx_ka_how how, int fd, const void *buf,
				size_t len, int flags)
{
	if (how == RX_KA_SEND)
		return RX_HOT(send)(fd, buf, len, flags);
	return RX_HOT(write)(fd, buf, len);
}

/* io.c's do_write/do_send: the general steps. */
static __attribute__((noinline)) ssize_t
send_general(enum rx_ka_how how, int fd, const void *buf, size_t len,
	     int flags)
{
	struct iovec v = {.iov_base = (void *)buf, .iov_len = len};
	struct rx_op op;
	ssize_t n;

	switch (rx__write_begin(&op, fd, flags, len, &v, 1)) {
	case RX_OP_PASS:
		return real_send(how, fd, buf, len, flags);
	case RX_OP_REFUSE:
		errno = rx__refusal_errno();
		return -1;
	case RX_OP_TRACK:
	default:
		break;
	}
	n = real_send(how, fd, buf, len, flags);
	rx__write_end(&op, n);
	return n;
}

/* The operation the general end steps see for a call of record @e (@fd,
 * @epoch) the fast path began: waiting for its answer, in the clear. */
static void waiting_op(struct rx_op *op, int fd, struct rx_fd *e,
		       uint32_t epoch, size_t len, bool dontwait)
{
	op->fd = fd;
	op->e = e;
	op->len = len;
	op->epoch = epoch;
	op->phase = RX_FD_WAITING;
	op->again = false;
	op->peek = false;
	op->dontwait = dontwait;
	op->cipher = false;
	op->plain = false;
}

/* rx__write_end's steps for a write of a waiting call that sent nothing
 * or failed (a sent one needs none: an HTTP call in flight). */
static __attribute__((noinline)) void
more_end_general(int fd, struct rx_fd *e, uint32_t epoch, size_t len,
		 int flags, ssize_t n)
{
	struct rx_op op;

	waiting_op(&op, fd, e, epoch, len, (flags & MSG_DONTWAIT) != 0);
	op.iov = NULL;
	op.iovcnt = -1; /* HTTP frames no write (ADR-408) */
	rx__write_end(&op, n);
}

ssize_t rx__ka_send(enum rx_ka_how how, int fd, struct rx_fd *e,
		    const void *buf, size_t len, int flags)
{
	struct rx_gate_permit permit;
	struct rx_guard *g;
	struct rx_lock *l;
	uint32_t epoch;
	uint64_t now;
	ssize_t n;
	bool mine = false;

	if (!KA_LIKELY(rx__ka_on && thread_plain(true) && http_on_socket(e) &&
		       request_line(buf, len) && rx__owner_fast() &&
		       proven(e)))
		return send_general(how, fd, buf, len, flags);
	/* The guard is pinned while the record is tracked (ADR-186); the
	 * commit below checks the record is still idle at this epoch. */
	epoch = atomic_load_explicit(&e->epoch, memory_order_acquire);
	g = __atomic_load_n(&e->guard, __ATOMIC_RELAXED);
	if (!g)
		return send_general(how, fd, buf, len, flags);
	rx__inside = 1;
	now = rx__now_ns();
	if (!rx__key_admit_fast(g, now, &permit)) {
		rx__inside = 0;
		return send_general(how, fd, buf, len, flags);
	}
	l = rx__fd_lock(e);
	rx__lock(l);
	if (rx__fd_phase(e) == RX_FD_IDLE &&
	    atomic_load_explicit(&e->epoch, memory_order_relaxed) == epoch) {
		commit_call(e, &permit, now);
		mine = true;
	}
	rx__unlock(l);
	if (!mine) {
		/* Another thread moved first (start_call's race): not ours,
		 * and the general steps look again. */
		rx__key_settle_call(g, &permit, RX_REJECTED, now, now, now,
				    "race", e, 0, false);
		rx__inside = 0;
		return send_general(how, fd, buf, len, flags);
	}
	/* More of the request: no answer awaited until the next read (the
	 * record's line is written already: a store, not a test). */
	atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	n = real_send(how, fd, buf, len, flags);
	/* An error or nothing sent: rx__write_end judges it. */
	if (!KA_LIKELY(n > 0))
		more_end_general(fd, e, epoch + 1, len, flags, n);
	rx__inside = 0;
	return n;
}

/* ------------------------------------------------------------------------
 * A write of the call in flight: the request's first on a new connection
 * (the connect's call goes on, ADR-585), or more of a request.
 * ---------------------------------------------------------------------- */

/* No module asked yet, fed by the socket layer: a connection whose first
 * request this is (id, layer and flags as rx__proto_open left them). */
static inline bool fresh_on_socket(const struct rx_fd *e)
{
	uint16_t have = __atomic_load_n(
	    (const uint16_t *)(const void *)&e->proto.id, __ATOMIC_RELAXED);

	return have == 0 &&
	       (__atomic_load_n(&e->proto.flags, __ATOMIC_RELAXED) &
		RX_PROTO_ASKED) == 0;
}

ssize_t rx__ka_more(enum rx_ka_how how, int fd, struct rx_fd *e,
		    const void *buf, size_t len, int flags)
{
	struct rx_lock *l;
	uint32_t epoch;
	uint64_t now;
	ssize_t n;
	bool mine = false;

	if (!KA_LIKELY(rx__ka_on && thread_plain(true) && len > 0))
		return send_general(how, fd, buf, len, flags);
	epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
	if (atomic_load_explicit(&e->wrote, memory_order_relaxed)) {
		/* More of the request (a body, a pipelined one): an HTTP
		 * call in flight only stops awaiting its answer. */
		if (!http_on_socket(e))
			return send_general(how, fd, buf, len, flags);
		rx__inside = 1;
	} else {
		/* The first request on the connection: first_write's steps
		 * (call.c, ADR-192) for the request line the HTTP module
		 * would recognise (ADR-214), no deadline to arm again. */
		if (!KA_LIKELY(fresh_on_socket(e) && request_line(buf, len) &&
			       e->dl_seq == 0 && rx__owner_fast()))
			return send_general(how, fd, buf, len, flags);
		rx__inside = 1;
		now = rx__now_ns();
		l = rx__fd_lock(e);
		rx__lock(l);
		if (atomic_load_explicit(&e->epoch, memory_order_relaxed) ==
			epoch &&
		    rx__fd_phase(e) == RX_FD_WAITING &&
		    !atomic_load_explicit(&e->wrote, memory_order_relaxed) &&
		    fresh_on_socket(e)) {
			atomic_store_explicit(&e->wrote, 1,
					      memory_order_relaxed);
			if (e->connected_ns != 0 && now > e->connected_ns &&
			    e->start_ns <= e->connected_ns)
				e->start_ns += now - e->connected_ns;
			rx__proto_claim(&e->proto, RX_PROTO_HTTP);
			mine = true;
		}
		rx__unlock(l);
		if (!mine) {
			/* Another thread moved first: the general steps
			 * look again. */
			rx__inside = 0;
			return send_general(how, fd, buf, len, flags);
		}
	}
	if (atomic_load_explicit(&e->awaiting, memory_order_relaxed))
		atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	n = real_send(how, fd, buf, len, flags);
	if (!KA_LIKELY(n > 0))
		more_end_general(fd, e, epoch, len, flags, n);
	rx__inside = 0;
	return n;
}

/* ------------------------------------------------------------------------
 * The answer's first bytes: settle.
 * ---------------------------------------------------------------------- */

/* The status of a whole final status line "HTTP/1.1 ddd" or "HTTP/1.0
 * ddd" at the start of @p (at least 12 bytes), the first digit not 1, as
 * rx__sniff_feed's inline test would read it (ADR-187); 0: not one (any
 * other version is the sniffer's to read). */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
static inline int final_status(const unsigned char *p)
{
	uint64_t w, v11;
	uint32_t t;

	memcpy(&w, p, 8);
	memcpy(&v11, "HTTP/1.1", 8);
	memcpy(&t, p + 8, 4);
	/* Word-wise (ADR-588): the versions differ in the low bit of their
	 * last byte; then ' ' and three bytes 0x30-0x3f whose low nibbles,
	 * plus 6, carry into none of their high ones (digits), the first
	 * at least 2. Little-endian: p[8] is t's low byte. */
	if ((w | ((uint64_t)1 << 56)) != v11 ||
	    (t & 0xF0F0F0FFu) != 0x30303020u ||
	    (((t & 0x0F0F0F00u) + 0x06060600u) & 0x10101000u) != 0 ||
	    ((t >> 8) & 0xFu) < 2)
		return 0;
	return (int)((t >> 8) & 0xFu) * 100 + (int)((t >> 16) & 0xFu) * 10 +
	       (int)((t >> 24) & 0xFu);
}
#else
static inline int final_status(const unsigned char *p)
{
	uint64_t w, v11, v10;

	memcpy(&w, p, 8);
	memcpy(&v11, "HTTP/1.1", 8);
	memcpy(&v10, "HTTP/1.0", 8);
	if ((w == v11 || w == v10) && p[8] == ' ' &&
	    (unsigned char)(p[9] - '2') < 8 && rx__sniff_digit(p[10]) &&
	    rx__sniff_digit(p[11]))
		return (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
	return 0;
}
#endif

/* The real function a wrapper of @how stands for (hot.h). */
static inline ssize_t real_recv(enum rx_ka_how how, int fd, void *buf,
				size_t len)
{
	if (how == RX_KA_RECV)
		return RX_HOT(recv)(fd, buf, len, 0);
	return RX_HOT(read)(fd, buf, len);
}

/* io.c's do_read: the general steps. */
static __attribute__((noinline)) ssize_t
recv_general(enum rx_ka_how how, int fd, struct rx_fd *e,
	     enum rx_fd_phase ph, void *buf, size_t len)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};
	struct rx_op op;
	ssize_t n;

	if (rx__read_begin_rec(&op, fd, e, ph, 0, len) !=
	    RX_OP_TRACK)
		return real_recv(how, fd, buf, len);
	n = real_recv(how, fd, buf, len);
	rx__read_end(&op, n, &v, 1);
	return n;
}

/* The rest of rx__read_end's steps for a read the fast path began. */
static __attribute__((noinline)) void
read_end_general(int fd, struct rx_fd *e, uint32_t epoch, ssize_t n,
		 void *buf, size_t len)
{
	struct iovec v = {.iov_base = buf, .iov_len = len};
	struct rx_op op;

	waiting_op(&op, fd, e, epoch, len, false);
	rx__read_end(&op, n, &v, 1);
}

ssize_t rx__ka_recv(enum rx_ka_how how, int fd, struct rx_fd *e,
		    enum rx_fd_phase ph, void *buf, size_t len)
{
	struct outcome o = {.cause = CAUSE_REPLY};
	struct rx_gate_permit permit;
	struct rx_sniff_http *s;
	struct rx_guard *g;
	struct verdicts vs;
	struct rx_lock *l;
	uint64_t now, start_ns, end_ns;
	uint32_t epoch;
	ssize_t n;
	int status;

	if (!KA_LIKELY(ph == RX_FD_WAITING && rx__ka_on &&
		       thread_plain(false) && http_on_socket(e)))
		return recv_general(how, fd, e, ph, buf, len);
	rx__inside = 1;
	/* The program waits for the answer (ADR-193). */
	atomic_store_explicit(&e->awaiting, 1, memory_order_relaxed);
	epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
	n = real_recv(how, fd, buf, len);
	/* on_bytes' case: bytes from the socket's only number (ADR-213),
	 * in the process that owns the state, a whole final status line. */
	if (!KA_LIKELY(n >= 12 && rx__owner_fast() &&
		       atomic_load_explicit(&e->refs, memory_order_relaxed) <=
			   1 &&
		       (status = final_status(buf)) != 0)) {
		read_end_general(fd, e, epoch, n, buf, len);
		return n;
	}
	now = rx__now_ns();
	l = rx__fd_lock(e);
	rx__lock(l);
	s = rx__proto_http(&e->proto);
	/* The same call, a fresh response, no connect's address permit
	 * still held (ADR-220): anything else is on_bytes' to read. */
	if (!KA_LIKELY(atomic_load_explicit(&e->epoch, memory_order_relaxed) ==
			   epoch &&
		       rx__fd_phase(e) == RX_FD_WAITING && s->state == 0 &&
		       s->pos == 0 && !e->addr_guard)) {
		rx__unlock(l);
		read_end_general(fd, e, epoch, n, buf, len);
		return n;
	}
	s->lines++;
	s->pos = 12;
	s->status = (uint16_t)status;
	/* Time to first byte, unless a peek saw these bytes first (ADR-360). */
	if (e->first_byte_ns == 0 || !e->peeked)
		e->first_byte_ns = now;
	e->peeked = 0;
	e->reused = 1; /* ADR-149 */
	o.requested = atomic_load_explicit(&e->wrote, memory_order_relaxed);
	g = e->guard;
	permit_copy(&permit, &e->permit);
	start_ns = e->start_ns;
	end_ns = e->first_byte_ns;
	atomic_store_explicit(&e->phase, RX_FD_IDLE, memory_order_release);
	rx__unlock(l);
	o.evidence = rx__verdict_from_http(status);
	rx__judge(fd, e, &o, start_ns, end_ns, false, now, &vs);
	rx__key_settle_fast(g, &permit, vs.call, start_ns, end_ns, now);
	if (vs.stale)
		rx__fd_forget_stale(fd, e, epoch);
	rx__inside = 0;
	return n;
}
