/*
 * preload/call.c - the call state machine of the socket layer: when a call
 * starts on a connection, when it ends, and with which verdict.
 *
 * What a call is (docs/design.md section 3). A call starts at connect() on
 * an AF_INET/AF_INET6 stream socket, or at the first write of a new
 * request on a kept-alive connection (the first write after a response
 * started, where the connection's protocol module says a request begins:
 * protocols.h); admission happens there (admit.c; at connect, connect.c
 * decides which connects are calls and admits them), and a refusal fails the
 * operation with -1/ECONNREFUSED before the real function runs, so nothing
 * leaves the host and nothing is half-sent. A call ends at its first
 * response byte (latency = time to first byte; the protocol module reads
 * the reply), at an error (errno classified by errclass.h), at EOF before
 * any byte (transient), or at close (abandonment: no evidence, RX_REJECTED,
 * unless it already ran past the slow threshold, then RX_TIMEOUT). Each fd
 * record moves through the phases of enum rx_fd_phase (fdtable.h):
 *
 *   connect admitted -> CONNECTING -(connected, or bytes)-> WAITING
 *   WAITING -(the reply)-> IDLE -(a request written: admit)-> WAITING
 *   any -(error, EOF, the last reply: an upgrade, no framing)-> DONE
 *   close -> UNTRACKED
 *
 * The state belongs to the connection: every number of a socket (dup,
 * dup2, dup3, fcntl F_DUPFD) maps to the same record, and only the close
 * of its last number ends it (ADR-213). The verdict a call settles with
 * is decided in one place, rx__judge() in judge.h, from what ended it
 * (ADR-310); the protocol module's verdict of a reply is one of its
 * inputs. Nothing here names a protocol.
 *
 * Re-entry and signals. rx__inside is set from the start of a tracked
 * operation to its end (the real call included): a signal handler that
 * calls write, connect or close on this thread while we hold a lock, or
 * while we wait in the real send, passes straight through. No lock is
 * held across a call into libc.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "addr_permit.h"
#include "admit.h"
#include "deadline.h"
#include "call.h"
#include "call_framed.h"
#include "cancel.h"
#include "errclass.h"
#include "fdlife.h"
#include "fdmark.h"
#include "fdtable.h"
#include "judge.h"
#include "keypin.h"
#include "log.h"
#include "protocols.h"
#include "runtime.h"
#include "symbols.h"

/* ------------------------------------------------------------------------
 * Ending a call on an fd.
 * ---------------------------------------------------------------------- */

/* A connect's address permit (ADR-220), off its record. */
struct addr_hold {
	struct rx_guard *guard; /* NULL: none */
	struct rx_gate_permit permit;
	uint64_t start_ns;
};

/* Settle @h with @v, latency end_ns - start_ns, and unpin its guard;
 * nothing when it holds none. */
static void addr_settle(const struct addr_hold *h, enum rx_verdict v,
			uint64_t end_ns, uint64_t now, const char *at)
{
	if (!h->guard)
		return;
	rx__key_settle(h->guard, &h->permit, v, h->start_ns, end_ns, now, at);
	rx__key_release(h->guard);
}

/* What a finished call needs once the entry lock is dropped. */
struct ending {
	struct rx_guard *guard;
	struct rx_gate_permit permit;
	uint64_t start_ns, end_ns;
	uint16_t dl_seq; /* its deadline on the key (ADR-382), or 0 */
	const struct rx_fd *owner;
	struct addr_hold addr; /* the connect's address (ADR-220) */
};

/* Take the connect's address permit off @e into @h, if it still has one
 * (stripe lock held); h->guard is NULL otherwise. */
static inline __attribute__((always_inline)) void
take_addr_locked(struct rx_fd *e, struct addr_hold *h)
{
	h->guard = e->addr_guard;
	if (!h->guard)
		return;
	h->start_ns = e->start_ns;
	rx__addr_unpack(&h->permit, e->addr_count, e->addr_tickets);
	e->addr_guard = NULL;
}

/* Take the current call off @e (stripe lock held) and move to @phase.
 * Inline: it runs at every first byte (ADR-187). */
static inline __attribute__((always_inline)) void
end_call_locked(struct rx_fd *e, enum rx_fd_phase phase, uint64_t end_ns,
		struct ending *out)
{
	out->guard = e->guard;
	rx__permit_copy(&out->permit, &e->permit);
	out->start_ns = e->start_ns;
	out->end_ns = end_ns;
	/* Read only by a settlement of this call: a later end of the
	 * record (close when idle) settles no call (ADR-382). */
	out->dl_seq = e->dl_seq;
	out->owner = e;
	take_addr_locked(e, &out->addr);
	atomic_store_explicit(&e->phase, phase, memory_order_release);
}

/* Is @op still about the call it began on? (stripe lock held) */
static bool same_call(const struct rx_op *op)
{
	enum rx_fd_phase ph = rx__fd_phase(op->e);

	return atomic_load_explicit(&op->e->epoch, memory_order_relaxed) ==
		   op->epoch &&
	       (ph == RX_FD_CONNECTING || ph == RX_FD_WAITING);
}

/* Settle what rx__judge decided: the connect's address first (ADR-220), then
 * the call. */
static inline __attribute__((always_inline)) void
finish(struct ending *end, const struct verdicts *vs, uint64_t now)
{
	addr_settle(&end->addr, vs->addr, end->end_ns, now, vs->at);
	rx__key_settle_call(end->guard, &end->permit, vs->call, end->start_ns,
			    end->end_ns, now, vs->at, end->owner,
			    end->dl_seq, vs->untimed);
}

/*
 * A record shared by several numbers (ADR-213) outlives any one of them:
 * a number closed where the shim cannot see it and handed out again to a
 * file still maps to the record while a duplicate keeps the socket and
 * its call alive. So on a shared record, evidence - bytes, an error, an
 * overdue read - is taken from a number only after one fstat shows that
 * it still holds the socket; a number that does not is unmapped, and what
 * it read says nothing about the call. Records with one number keep
 * ADR-190's cheaper rule. true: @op's number is not the socket's.
 */
static bool foreign_number(struct rx_op *op)
{
	if (atomic_load_explicit(&op->e->refs, memory_order_relaxed) <= 1 ||
	    rx__fd_still_ours(op->fd, op->e))
		return false;
	rx__fd_forget_stale(op->fd, op->e, op->epoch);
	return true;
}

/*
 * lock_call - take the lock of @op's fd if @op's call is still the one on
 * it. Returns the held lock, or NULL with nothing held (the call ended or
 * the fd was reused meanwhile).
 */
static struct rx_lock *lock_call(const struct rx_op *op)
{
	struct rx_lock *l = rx__fd_lock(op->e);

	rx__lock(l);
	if (!same_call(op)) {
		rx__unlock(l);
		return NULL;
	}
	return l;
}

/*
 * Settle @op's call after an error or EOF (@o: CAUSE_ERROR, with its
 * evidence and where it was seen), and retire the fd. @stale: the failure
 * is an EOF, ECONNRESET or EPIPE, which on a kept-alive connection before
 * any byte of the response means the server had closed it while idle
 * (ADR-149; rx__judge decides).
 */
static void fail_call_stale(struct rx_op *op, enum rx_verdict v, const char *at,
			    bool stale)
{
	struct outcome o = {.cause = CAUSE_ERROR, .evidence = v, .at = at};
	struct verdicts vs;
	struct rx_lock *l;
	struct ending end;
	uint64_t now;

	if (!rx__owner_fast() || foreign_number(op))
		return;
	now = rx__now_ns();
	l = lock_call(op);
	if (l == NULL)
		return;
	o.idle_close = stale && op->e->reused && op->e->first_byte_ns == 0;
	end_call_locked(op->e, RX_FD_DONE, now, &end);
	rx__unlock(l);
	rx__judge(op->fd, op->e, &o, end.start_ns, end.end_ns,
		  end.addr.guard != NULL, now, &vs);
	finish(&end, &vs, now);
	if (vs.stale)
		rx__fd_forget_stale(op->fd, op->e, op->epoch);
}

static void fail_call(struct rx_op *op, enum rx_verdict v, const char *at)
{
	fail_call_stale(op, v, at, false);
}

/* Settle with an errno seen on @op. */
static void fail_errno(struct rx_op *op, int err)
{
	enum rx_phase phase =
	    op->phase == RX_FD_CONNECTING ? RX_PHASE_CONNECT : RX_PHASE_IO;

	fail_call_stale(
	    op, rx__errno_verdict(err, phase),
	    phase == RX_PHASE_CONNECT ? "connect-error" : "io-error",
	    phase == RX_PHASE_IO && (err == ECONNRESET || err == EPIPE));
}

/* Has @fd a socket timeout (SO_RCVTIMEO or SO_SNDTIMEO) set? */
static bool has_socket_timeout(int fd)
{
	static const int names[2] = {SO_RCVTIMEO, SO_SNDTIMEO};
	struct timeval tv;
	socklen_t len;
	int i;

	for (i = 0; i < 2; i++) {
		len = sizeof(tv);
		if (rx__real_getsockopt(fd, SOL_SOCKET, names[i], &tv, &len) ==
			0 &&
		    (tv.tv_sec != 0 || tv.tv_usec != 0))
			return true;
	}
	return false;
}

/* SO_RCVTIMEO/SO_SNDTIMEO ran out on a blocking socket: a timeout if the
 * program gives the call up now, nothing if it goes on (ADR-572). A TLS
 * library's "would block" on plaintext is that only when the socket has
 * such a timeout: GnuTLS answers GNUTLS_E_AGAIN on a blocking socket after
 * a post-handshake message it read without data (ADR-643). */
static void maybe_timeout(struct rx_op *op)
{
	if (!op->dontwait && rx__fd_blocking(op->fd) &&
	    (!op->plain || has_socket_timeout(op->fd)))
		atomic_fetch_or_explicit(&op->e->awaiting, RX_AWAIT_EXPIRED,
					 memory_order_relaxed);
}

/* A read or write that would block: settle @op's call if it is overdue.
 * Returns true when it did, or when @op's number turned out not to hold
 * the socket (nothing more to do with it). */
static bool settle_overdue(struct rx_op *op)
{
	struct outcome o = {.cause = CAUSE_OVERDUE};
	struct verdicts vs;
	struct rx_lock *l;
	struct ending end;
	enum rx_verdict v;
	uint64_t now;

	if (!rx__owner_fast())
		return false;
	if (foreign_number(op))
		return true; /* nothing of the call's to settle here */
	now = rx__now_ns();
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (!same_call(op) ||
	    !rx__call_overdue(op->e, op->e->start_ns, now, &v)) {
		rx__unlock(l);
		return false;
	}
	end_call_locked(op->e, RX_FD_DONE, now, &end);
	rx__unlock(l);
	rx__judge(op->fd, op->e, &o, end.start_ns, end.end_ns,
		  end.addr.guard != NULL, now, &vs);
	finish(&end, &vs, now);
	if (vs.stale)
		rx__fd_forget_stale(op->fd, op->e, op->epoch);
	return true;
}

/* Move a pending connect to WAITING (it connected). @owned: the caller
 * is the connect whose start checked the owner (ADR-543), in this call. */
static inline __attribute__((always_inline)) void
connected_as(struct rx_op *op, bool owned)
{
	struct addr_hold ah; /* only its guard is read when it holds none */
	struct rx_lock *l;
	uint64_t now = rx__now_ns();

	ah.guard = NULL;
	if (!owned && !rx__owner_fast())
		return;
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (same_call(op) && rx__fd_phase(op->e) == RX_FD_CONNECTING) {
		/* When the request has not begun yet, the completion is seen
		 * here (a blocking connect's return): the idle time until its
		 * first write is the program's, not the upstream's (ADR-192).
		 */
		if (!atomic_load_explicit(&op->e->wrote, memory_order_relaxed))
			op->e->connected_ns = now;
		take_addr_locked(op->e, &ah);
		atomic_store_explicit(&op->e->phase, RX_FD_WAITING,
				      memory_order_release);
	}
	rx__unlock(l);
	addr_settle(&ah, RX_SUCCESS, now, now, "connected");
}

static void connected(struct rx_op *op)
{
	connected_as(op, false);
}

/*
 * getsockopt(SO_ERROR) read 0 on a pending connect: the connect completed
 * by now - note when, for first_write (ADR-192). A program reads SO_ERROR
 * when poll says the socket is writable (connect(2)), so the read is
 * taken at its word (ADR-544); only a connect that holds its address's
 * permit (ADR-220), whose success the read settles, is asked getpeername
 * first, since SO_ERROR is 0 while the connect is in progress too. The
 * phase stays CONNECTING, so that a connect() polled again still finds
 * its own call.
 */
static void seen_connected(struct rx_op *op)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addr_hold ah = {.guard = NULL};
	struct rx_lock *l;
	uint64_t now;

	if (!rx__owner_fast() ||
	    atomic_load_explicit(&op->e->wrote, memory_order_relaxed) ||
	    (__atomic_load_n(&op->e->addr_guard, __ATOMIC_RELAXED) &&
	     getpeername(op->fd, (struct sockaddr *)&ss, &sl) != 0))
		return;
	now = rx__now_ns();
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (same_call(op) && op->e->connected_ns == 0 &&
	    !atomic_load_explicit(&op->e->wrote, memory_order_relaxed))
		op->e->connected_ns = now;
	if (same_call(op))
		take_addr_locked(op->e, &ah);
	rx__unlock(l);
	addr_settle(&ah, RX_SUCCESS, now, now, "connected");
}

/* The first write of @op's call on a new connection (ADR-192): the call's
 * clock skips the idle gap from the connect's completion to this write -
 * think time. Latency is the connect's duration plus first request byte to
 * first response byte; the deadline is armed again (ADR-384). Once per
 * call: later writes see `wrote` set. */
static void first_write(struct rx_op *op, const struct iovec *iov, int iovcnt)
{
	enum rx_proto_id id = RX_PROTO_UNKNOWN;
	struct rx_fd *e = op->e;
	struct rx_lock *l;
	uint64_t now, rearm = 0;

	if (!rx__owner_fast())
		return;
	/* The first request: whose protocol? Read unlocked, recorded under
	 * the lock; a first-page buffer is the kernel's (EFAULT, ADR-195). */
	if (!rx__proto_asked(&e->proto) && iov && iovcnt > 0 &&
	    (uintptr_t)iov[0].iov_base >= 4096)
		id = rx__proto_recognise(iov, iovcnt);
	now = rx__now_ns();
	if (id == RX_PROTO_PG) /* a cancel's answer can come before its end */
		rx__cancel_note(rx__pg_cancel_request(iov, iovcnt), now);
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (same_call(op) &&
	    !atomic_load_explicit(&e->wrote, memory_order_relaxed)) {
		atomic_store_explicit(&e->wrote, 1, memory_order_relaxed);
		if (e->connected_ns != 0 && now > e->connected_ns &&
		    e->start_ns <= e->connected_ns)
			e->start_ns += now - e->connected_ns;
		rx__proto_claim(&e->proto, id);
		rearm = now; /* ADR-384: its deadline counts from now too */
	}
	rx__unlock(l);
	if (rearm != 0 && e->dl_seq != 0)
		rx__deadline_rearm(e->guard, e, &e->dl_seq, now);
}

/* rx__call_end_record's call outstanding (stripe lock @l held, released
 * here): settled as abandoned (ADR-147). */
static __attribute__((noinline)) void
end_outstanding(int fd, struct rx_fd *e, enum rx_fd_phase ph, struct rx_lock *l)
{
	struct outcome o = {.cause = CAUSE_CLOSE};
	uint64_t now = rx__now_ns();
	struct verdicts vs;
	struct ending end;
	uint8_t aw;

	end_call_locked(e, RX_FD_UNTRACKED, now, &end);
	aw = atomic_load_explicit(&e->awaiting, memory_order_relaxed);
	o.awaited = aw != 0;
	o.expired = (aw & RX_AWAIT_EXPIRED) != 0;
	atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	o.pending = ph == RX_FD_CONNECTING && e->connected_ns == 0;
	o.requested = atomic_load_explicit(&e->wrote, memory_order_relaxed);
	__atomic_store_n(&e->guard, NULL, __ATOMIC_RELAXED);
	e->reused = 0;
	/* Release: a reader that sees the new epoch sees the guard change
	 * (start_call, ADR-186). */
	atomic_fetch_add_explicit(&e->epoch, 1, memory_order_release);
	rx__unlock(l);

	rx__judge(fd, e, &o, end.start_ns, end.end_ns, end.addr.guard != NULL,
		  now, &vs);
	finish(&end, &vs, now);
	rx__key_release(end.guard);
}

/* An idle record's end under its lock: untracked, nothing awaited, no
 * guard, and a new epoch - released, so that a reader that sees it sees
 * the guard change (start_call, ADR-186). */
static inline __attribute__((always_inline)) void
untrack_idle_locked(struct rx_fd *e)
{
	atomic_store_explicit(&e->phase, RX_FD_UNTRACKED, memory_order_release);
	atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	__atomic_store_n(&e->guard, NULL, __ATOMIC_RELAXED);
	e->reused = 0;
	atomic_fetch_add_explicit(&e->epoch, 1, memory_order_release);
}

/* An idle record that still holds its connect's address permit
 * (RESILIX_KEY=host, ADR-220): given back without evidence (ADR-007).
 * Stripe lock @l held, released here. */
static __attribute__((noinline)) void end_idle_addr(struct rx_fd *e,
						    struct rx_lock *l)
{
	struct rx_guard *g = e->guard;
	struct addr_hold ah;

	take_addr_locked(e, &ah);
	untrack_idle_locked(e);
	rx__unlock(l);
	addr_settle(&ah, RX_REJECTED, 0, 0, "close");
	rx__key_release(g);
}

void rx__call_end_record(int fd, struct rx_fd *e)
{
	struct rx_lock *l = rx__fd_lock(e);
	struct rx_guard *g;
	enum rx_fd_phase ph;

	rx__lock(l);
	ph = rx__fd_phase(e);
	if (ph == RX_FD_UNTRACKED) {
		rx__unlock(l);
		return;
	}
	if (ph == RX_FD_CONNECTING || ph == RX_FD_WAITING) {
		end_outstanding(fd, e, ph, l);
		return;
	}
	if (e->addr_guard) {
		end_idle_addr(e, l);
		return;
	}
	/* No call outstanding and no permit, the common close (ADR-581):
	 * only the pin goes back. */
	g = e->guard;
	untrack_idle_locked(e);
	rx__unlock(l);
	rx__key_release(g);
}

/* rx__call_end_record preserving errno, its common case inline (ADR-633):
 * a record with no call outstanding and no address permit - every close
 * of a connection whose answer came - ends in one lock hold, then gives
 * its pin back, neither of which touches errno; anything else is
 * rx__call_end_record's, with errno saved around it. */
static inline __attribute__((always_inline)) void end_closed(int fd,
							     struct rx_fd *e)
{
	struct rx_lock *l = rx__fd_lock(e);
	enum rx_fd_phase ph;
	struct rx_guard *g;
	int saved;

	rx__lock(l);
	ph = rx__fd_phase(e);
	if (__builtin_expect(
		(ph == RX_FD_IDLE || ph == RX_FD_DONE) && !e->addr_guard, 1)) {
		g = e->guard;
		untrack_idle_locked(e);
		rx__unlock(l);
		rx__key_release_inline(g);
		return;
	}
	rx__unlock(l);
	saved = errno;
	rx__call_end_record(fd, e);
	errno = saved;
}

void rx__call_forget_mapped(int fd)
{
	rx__fd_forget_mapped_by(fd, end_closed);
}

/* ------------------------------------------------------------------------
 * connect and getsockopt(SO_ERROR).
 * ---------------------------------------------------------------------- */

void rx__connect_end(struct rx_op *op, int rc)
{
	int err;

	if (op->unpublished) {
		rx__connect_published(op->fd, op->e, op->epoch, rc);
		return;
	}
	err = errno;
	/* Right after rx__connect_begin: no fork came between (ADR-543). */
	if (rc == 0 || (op->again && err == EISCONN))
		connected_as(op, true);
	else if (err == EINPROGRESS && !op->again &&
		 !rx__fd_mark_nonblock(op->fd) && rx__fd_blocking(op->fd))
		/* A blocking connect returns EINPROGRESS only when its
		 * SO_SNDTIMEO ran out (connect(2)): a timeout, now - not an
		 * abandonment at close (ADR-365). A socket known to be
		 * non-blocking is not asked (ADR-543). */
		fail_call(op,
			  rx_verdict_from_errno(ETIMEDOUT, RX_PHASE_CONNECT),
			  "connect-timeout");
	else if (!rx__pending_errno(err) && err != EALREADY)
		/* A synchronous failure (ECONNREFUSED on a blocking socket,
		 * ENETUNREACH...) settles at once. */
		fail_errno(op, err);
	rx__inside = 0;
	errno = err;
}

void rx__connect_lost(int fd, struct rx_fd *e, uint32_t epoch, bool mapped)
{
	int err = errno;

	if (mapped) {
		/* A close or duplicate cleared the mark: the close that saw
		 * the record mapped ends it, or this does (whoever unmaps the
		 * number first). */
		rx__fd_forget_stale(fd, e, epoch);
	} else {
		/* The number got a record meanwhile: this one was never
		 * mapped, and nobody else ends it. */
		rx__call_end_record(fd, e);
		rx__fd_free(e);
	}
	rx__inside = 0;
	errno = err;
}

void rx__connect_failed(int fd, struct rx_fd *e, uint32_t epoch, int rc)
{
	struct rx_op op;

	memset(&op, 0, sizeof(op));
	op.fd = fd;
	op.e = e;
	op.epoch = epoch;
	op.phase = RX_FD_CONNECTING;
	rx__connect_end(&op, rc);
}

void rx__getsockopt_so_error(int fd, int rc, int value)
{
	struct rx_op op;
	struct rx_fd *e = rx__fd_get(fd);
	enum rx_fd_phase ph;
	int saved = errno;

	if (!e || rc != 0 || rx__reentered())
		return;
	ph = rx__fd_phase(e);
	if (ph != RX_FD_CONNECTING && (ph != RX_FD_WAITING || value == 0))
		return;
	memset(&op, 0, sizeof(op));
	op.fd = fd;
	op.e = e;
	op.phase = (uint8_t)ph;
	op.epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
	rx__inside = 1;
	if (value == 0)
		seen_connected(&op);
	else if (!rx__pending_errno(value))
		fail_errno(&op, value);
	rx__inside = 0;
	errno = saved;
}

/* ------------------------------------------------------------------------
 * Receiving: the first response byte ends the call.
 * ---------------------------------------------------------------------- */

/* Feed the received bytes to the connection's protocol module; settle when
 * it decides. */
static void on_bytes(struct rx_op *op, ssize_t n, const struct iovec *iov,
		     int iovcnt)
{
	struct rx_proto_reply r = {.kind = RX_PROTO_MORE};
	struct outcome o = {.cause = CAUSE_REPLY};
	struct rx_fd *e = op->e;
	struct verdicts vs;
	struct ending end;
	struct rx_lock *l;
	size_t left = (size_t)n;
	int i;
	uint64_t now;

	if (!rx__owner_fast() || foreign_number(op))
		return;
	now = rx__now_ns();
	l = lock_call(op);
	if (l == NULL)
		return;
	for (i = 0; i < iovcnt && left > 0 && r.kind == RX_PROTO_MORE; i++) {
		size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;

		rx__proto_reply(&e->proto, iov[i].iov_base, take, &r);
		/* Time to first byte of the reply that answers: one that
		 * began in this read resets it, so an interim reply (100
		 * Continue) does not count as the answer - unless a peek
		 * saw these very bytes arrive first (ADR-360). */
		if (e->first_byte_ns == 0 || (r.began && !e->peeked))
			e->first_byte_ns = now;
		e->peeked = 0;
		left -= take;
	}
	if (iov == NULL) {
		/* Bytes the shim could not see (spliced to a pipe): the
		 * upstream answered, in no protocol the shim reads. */
		if (e->first_byte_ns == 0)
			e->first_byte_ns = now;
		rx__proto_unframed(&r);
	}
	if (r.kind == RX_PROTO_MORE) {
		/* Bytes arrived, so a pending connect did connect. */
		end.addr.guard = NULL;
		if (rx__fd_phase(e) == RX_FD_CONNECTING) {
			take_addr_locked(e, &end.addr);
			atomic_store_explicit(&e->phase, RX_FD_WAITING,
					      memory_order_release);
		}
		rx__unlock(l);
		addr_settle(&end.addr, RX_SUCCESS, now, now, "connected");
		return;
	}
	/* Any later call on this connection reuses it (ADR-149). */
	e->reused = 1;
	o.requested = atomic_load_explicit(&e->wrote, memory_order_relaxed);
	/* The last reply ends the framing: an upgrade, or a protocol no
	 * module reads (ADR-147). Otherwise the next request starts a call. */
	end_call_locked(e, r.kind == RX_PROTO_LAST ? RX_FD_DONE : RX_FD_IDLE,
			e->first_byte_ns, &end);
	rx__unlock(l);
	o.evidence = r.verdict;
	rx__judge(op->fd, e, &o, end.start_ns, end.end_ns,
		  end.addr.guard != NULL, now, &vs);
	finish(&end, &vs, now);
	if (vs.stale)
		rx__fd_forget_stale(op->fd, e, op->epoch);
}

void rx__read_peeked(struct rx_op *op)
{
	struct rx_lock *l;
	uint64_t now;
	int saved = errno;

	if (!rx__owner_fast() || foreign_number(op))
		goto out;
	now = rx__now_ns();
	l = lock_call(op);
	if (l == NULL)
		goto out;
	if (op->e->first_byte_ns == 0) {
		op->e->first_byte_ns = now;
		op->e->peeked = 1;
	}
	rx__unlock(l);
out:
	errno = saved;
}

void rx__read_end(struct rx_op *op, ssize_t n, const struct iovec *iov,
		  int iovcnt)
{
	int err;

	if (n > 0) {
		/* Peeked bytes will be read again: sniff them then, once;
		 * their arrival is the first byte's all the same (ADR-360).
		 * on_bytes preserves errno: bytes arrived, errno is not
		 * read. */
		if (op->cipher) {
			/* Handshake bytes: the connect worked; the answer is
			 * the TLS layer's to read (ADR-440). */
			if (op->phase == RX_FD_CONNECTING)
				connected(op);
		} else if (op->peek) {
			rx__read_peeked(op);
		} else {
			on_bytes(op, n, iov, iovcnt);
		}
		rx__inside = 0;
		return;
	}
	err = errno;
	if (n == 0) {
		if (op->len > 0)
			fail_call_stale(op, RX_TRANSIENT, "eof", true);
	} else if (err == EAGAIN || err == EWOULDBLOCK) {
		if (!settle_overdue(op))
			maybe_timeout(op);
	} else if (!rx__pending_errno(err)) {
		fail_errno(op, err);
	}
	rx__inside = 0;
	errno = err;
}

/* ------------------------------------------------------------------------
 * Sending: the first write after a response started begins a new call.
 * ---------------------------------------------------------------------- */

/*
 * Start a new call on @op's kept-alive fd, which was seen idle: admit it on
 * the fd's guard and make it the fd's current call. The guard and epoch
 * are read without the stripe lock (ADR-186): the guard is published with
 * an atomic store and stays pinned while the fd is tracked, and the commit
 * under the lock checks that the fd is still idle at the same epoch, so a
 * close or reconnect in between makes this admission a race loser that is
 * released, as before. Returns false when the call is refused.
 */
static bool start_call(struct rx_op *op)
{
	struct rx_fd *e = op->e;
	struct rx_gate_permit permit;
	struct rx_guard *g;
	struct rx_lock *l;
	uint32_t epoch;
	uint16_t dl_seq;
	uint64_t now;

	epoch = atomic_load_explicit(&e->epoch, memory_order_acquire);
	g = __atomic_load_n(&e->guard, __ATOMIC_RELAXED);
	if (!g || rx__fd_phase(e) != RX_FD_IDLE)
		return true;
	now = rx__now_ns();
	if (!rx__admit_call(g, &now, &permit, "write", op->fd, op->dontwait, e,
			    &dl_seq))
		return false;
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (rx__fd_phase(e) == RX_FD_IDLE &&
	    atomic_load_explicit(&e->epoch, memory_order_relaxed) == epoch) {
		rx__permit_copy(&e->permit, &permit);
		e->dl_seq = dl_seq;
		e->start_ns = now;
		e->first_byte_ns = 0;
		e->peeked = 0;
		/* This write is the request's first (ADR-192). */
		atomic_store_explicit(&e->wrote, 1, memory_order_relaxed);
		rx__proto_next(&e->proto);
		atomic_fetch_add_explicit(&e->epoch, 1, memory_order_relaxed);
		atomic_store_explicit(&e->phase, RX_FD_WAITING,
				      memory_order_release);
		g = NULL;
	}
	rx__unlock(l);
	if (g) /* Another thread moved first: not ours. */
		rx__key_settle_call(g, &permit, RX_REJECTED, now, now, now,
				    "race", e, dl_seq, false);
	return true;
}

/*
 * errno: nothing on the way to a tracked or passed-through write sets it
 * (the admission's wait and the settlements put it back themselves), so
 * it is neither saved nor restored here (ADR-185).
 */
enum rx_op_decision rx__write_begin(struct rx_op *op, int fd, int flags,
				    size_t len, const struct iovec *iov,
				    int iovcnt)
{
	struct rx_fd *e = rx__fd_get(fd);
	enum rx_fd_phase ph;

	if (!e)
		return RX_OP_PASS;
	ph = rx__fd_phase(e);
	if (ph == RX_FD_UNTRACKED || ph == RX_FD_DONE || rx__reentered())
		return RX_OP_PASS;
	rx__inside = 1;
	op->fd = fd;
	op->e = e;
	op->len = len;
	op->again = false;
	op->peek = false;
	op->dontwait = (flags & MSG_DONTWAIT) != 0;
	op->cipher = rx__tls_cipher(fd, e);
	op->plain = rx__tls_mode == RX_TLS_PLAIN;
	/* Inside curl_easy_perform a new request on a kept-alive
	 * connection is the curl layer's (ADR-152); on a TLS connection,
	 * the TLS layer's (ADR-440). */
	if (ph == RX_FD_IDLE && len > 0 && !rx__curl_active && !op->cipher) {
		if (!rx__owner_fast())
			goto pass;
		/* Only a request line starts a call: the rest of a body
		 * still being sent after an early response continues the
		 * exchange, never refused, never half-sent (ADR-191). */
		if (!rx__proto_starts(&e->proto, iov, iovcnt))
			goto idle;
		/* A number that is another file's now is never refused a
		 * write (ADR-190): proven without a system call while no
		 * close went unseen; checked before a refusal (ADR-500). */
		if (!rx__fd_vouched(fd, e, true))
			goto pass;
		if (!start_call(op)) {
			if (!rx__fd_vouched(fd, e, false))
				goto pass;
			rx__call_refused(fd, e); /* ADR-411 */
			rx__inside = 0;
			return RX_OP_REFUSE;
		}
		ph = rx__fd_phase(e);
	}
	if (ph != RX_FD_CONNECTING && ph != RX_FD_WAITING)
		goto idle;
	op->phase = (uint8_t)ph;
	op->epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
	/* A TLS handshake's bytes are not the request (ADR-440). */
	if (len > 0 && !op->cipher &&
	    !atomic_load_explicit(&e->wrote, memory_order_relaxed))
		first_write(op, iov, iovcnt); /* once per call (ADR-192) */
	rx__call_keep_framed(op, iov, iovcnt); /* ADR-408 */
	/* More of the request: no answer awaited until the next read. */
	if (atomic_load_explicit(&e->awaiting, memory_order_relaxed))
		atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	return RX_OP_TRACK;
idle:
	if (ph == RX_FD_IDLE && len > 0 && !rx__curl_active &&
	    rx__call_track_idle(op, ph, iov, iovcnt))
		return RX_OP_TRACK; /* a framed module's bytes (ADR-408) */
pass:
	rx__inside = 0;
	return RX_OP_PASS;
}

/*
 * A send failed with ECONNRESET or EPIPE while the request was going out:
 * an upstream that answers before it has read the whole request (413 to
 * an upload, 401 before the body) and then closes. The answer is in the
 * receive queue, where the program can still read it: peek it (64 bytes,
 * no wait) and judge the call by it, as the read would (ADR-225). True
 * when an answer was there.
 */
static bool answered_early(struct rx_op *op)
{
	char head[64];
	struct iovec v = {.iov_base = head, .iov_len = 0};
	ssize_t k = rx__real_recvfrom(op->fd, head, sizeof(head),
				      MSG_PEEK | MSG_DONTWAIT, NULL, NULL);

	if (k <= 0)
		return false;
	v.iov_len = (size_t)k;
	on_bytes(op, k, &v, 1);
	return true;
}

void rx__write_end(struct rx_op *op, ssize_t n)
{
	uint64_t cancels = 0;
	int err;

	if (n > 0) {
		if (op->phase == RX_FD_CONNECTING)
			connected(op);
		if (rx__proto_frames_writes(&op->e->proto) &&
		    rx__owner_fast() &&
		    rx__call_wrote(op, (size_t)n, &cancels) ==
			RX_PROTO_WROTE_NO_CALL) {
			/* Unless first_write noted it (ADR-676; lock-free). */
			if (rx__pg_cancel_request(op->iov, op->iovcnt) != cancels)
				rx__cancel_note(cancels, rx__now_ns());
			fail_call(op, RX_REJECTED, "no-call");
		}
		rx__inside = 0;
		return;
	}
	if (n < 0) {
		err = errno;
		if (err == EAGAIN || err == EWOULDBLOCK) {
			if (!settle_overdue(op))
				maybe_timeout(op);
		} else if ((err == ECONNRESET || err == EPIPE) &&
			   op->phase == RX_FD_WAITING && !op->cipher &&
			   !op->plain && answered_early(op)) {
			/* judged by the answer */
		} else if (!rx__pending_errno(err)) {
			fail_errno(op, err);
		}
		errno = err;
	}
	rx__inside = 0;
}

/* ------------------------------------------------------------------------
 * RESILIX_KEY=host and a TLS session's SNI name (ADR-446).
 * ---------------------------------------------------------------------- */

bool rx__call_rekey(int fd, struct rx_fd *e, const char *key, size_t len)
{
	struct rx_gate_permit permit;
	struct rx_guard *g;
	struct rx_lock *l;
	struct ending end;
	uint32_t epoch;
	uint16_t dl_seq;
	uint64_t now;
	bool moved = false;

	if (!rx__owner_fast())
		return true;
	epoch = atomic_load_explicit(&e->epoch, memory_order_acquire);
	now = rx__now_ns();
	g = rx__key_acquire(key, len, now);
	if (!g)
		return true;
	if (g == __atomic_load_n(&e->guard, __ATOMIC_RELAXED)) {
		rx__key_release(g); /* keyed by that name already */
		return true;
	}
	if (!rx__admit_call(g, &now, &permit, "tls-name", fd, false, e,
			    &dl_seq)) {
		rx__key_release(g);
		return false;
	}
	l = rx__fd_lock(e);
	rx__lock(l);
	if (atomic_load_explicit(&e->epoch, memory_order_relaxed) == epoch &&
	    (rx__fd_phase(e) == RX_FD_CONNECTING ||
	     rx__fd_phase(e) == RX_FD_WAITING) &&
	    !atomic_load_explicit(&e->wrote, memory_order_relaxed)) {
		/* The connect's call ends here, a success of what it
		 * connected to; the request's call is the name's, timed
		 * from its first write (ADR-192). */
		end_call_locked(e, RX_FD_WAITING, now, &end);
		__atomic_store_n(&e->guard, g, __ATOMIC_RELAXED);
		rx__permit_copy(&e->permit, &permit);
		e->dl_seq = dl_seq;
		e->start_ns = now;
		e->connected_ns = now;
		e->first_byte_ns = 0;
		atomic_fetch_add_explicit(&e->epoch, 1, memory_order_release);
		moved = true;
	}
	rx__unlock(l);
	if (!moved) {
		rx__key_settle_call(g, &permit, RX_REJECTED, now, now, now,
				    "race", e, dl_seq, false);
		rx__key_release(g);
		return true;
	}
	/* A call keyed by a name from getaddrinfo holds its address's permit
	 * (ADR-220): the address takes the connect's success, the name's
	 * call goes back without evidence. Keyed by the address: a success. */
	addr_settle(&end.addr, RX_SUCCESS, now, now, "connected");
	rx__key_settle_call(end.guard, &end.permit,
			    end.addr.guard ? RX_REJECTED : RX_SUCCESS,
			    end.start_ns, now, now, "tls-name", end.owner,
			    end.dl_seq, false);
	rx__key_release(end.guard);
	return true;
}
