/*
 * preload/connect.c - the start of a call at connect(): which connects
 * are calls, the key a call is guarded under, its admission and the fd
 * record it gets. What follows the real connect - its outcome, a
 * non-blocking connect polled or read through SO_ERROR - is the state
 * machine's (call.c), as is everything about the call from then on.
 *
 * A call starts at connect() on an AF_INET/AF_INET6 stream socket to a
 * destination the filters guard (ADR-143), keyed by "ip:port" or, under
 * RESILIX_KEY=host, by the name getaddrinfo gave the address (ADR-144,
 * ADR-220); the thread's last destination's key, hash and filter verdict
 * are remembered (dest.h, ADR-540). What socket() said of the number
 * spares the questions a connect would otherwise ask the kernel - its
 * type, whether it is connected already, whether it blocks (ADR-542,
 * ADR-543); the owner check is the fork word, not getpid (ADR-543). A
 * refused connect leaves no record behind (ADR-541); a fresh socket's
 * record is filled unmapped and mapped when the real connect returns
 * (ADR-631). The common connect - a fresh IPv4 socket, the key the thread
 * kept pinned - runs in one pass, real connect included (rx__connect_fast,
 * ADR-632). Runs with rx__inside set; no lock is held across libc.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "addr_permit.h"
#include "admit.h"
#include "call.h"
#include "deadline.h"
#include "dest.h"
#include "errclass.h"
#include "fdlife.h"
#include "fdmark.h"
#include "fdtable.h"
#include "hot.h"
#include "keypin.h"
#include "protocols.h"
#include "retry.h"
#include "runtime.h"
#include "sockkey.h"
#include "symbols.h"

/* A connect's address permit (ADR-220) while it is being admitted. */
struct addr_hold {
	struct rx_guard *guard; /* NULL: none */
	struct rx_gate_permit permit;
	uint64_t start_ns;
};

/* Give @h's permit back without evidence, and unpin its guard. */
static void give_back(const struct addr_hold *h, uint64_t now, const char *at)
{
	if (!h->guard)
		return;
	rx__key_settle(h->guard, &h->permit, RX_REJECTED, h->start_ns, now, now,
		       at);
	rx__key_release(h->guard);
}

/* A connect refused. A @fresh socket was taken, unasked, for an
 * unconnected socket: one connected meanwhile (by another process, a raw
 * system call) is the kernel's to answer with EISCONN, as ADR-216 wants,
 * and a number that holds no socket any more its to answer with ENOTSOCK
 * or EBADF (ADR-542). */
static enum rx_op_decision refused(int fd, bool fresh, int saved)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	rx__inside = 0;
	if (!fresh || (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0 &&
		       errno != ENOTSOCK && errno != EBADF)) {
		errno = saved;
		return RX_OP_REFUSE;
	}
	(void)rx__refusal_errno();
	errno = saved;
	return RX_OP_PASS;
}

/* Fill record @e for the call @g admitted at @now with @permit, and move
 * it to CONNECTING at a new epoch, which it returns. Stripe lock held, or
 * @e not mapped yet (ADR-631). */
static inline __attribute__((always_inline)) uint32_t
fill(struct rx_fd *e, struct rx_guard *g, const struct rx_gate_permit *permit,
     uint16_t dl_seq, const struct addr_hold *ah, uint64_t now)
{
	uint32_t epoch;

	/* Atomic: start_call reads it without the lock (ADR-186). */
	__atomic_store_n(&e->guard, g, __ATOMIC_RELAXED);
	rx__permit_copy(&e->permit, permit);
	e->dl_seq = dl_seq;
	e->addr_guard = ah->guard;
	if (ah->guard)
		e->addr_count = rx__addr_pack(&ah->permit, e->addr_tickets);
	e->start_ns = now;
	e->first_byte_ns = 0;
	e->peeked = 0;
	e->connected_ns = 0;
	atomic_store_explicit(&e->wrote, 0, memory_order_relaxed);
	atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	rx__proto_open(&e->proto);
	epoch =
	    atomic_fetch_add_explicit(&e->epoch, 1, memory_order_release) + 1;
	atomic_store_explicit(&e->phase, RX_FD_CONNECTING,
			      memory_order_release);
	return epoch;
}

enum rx_op_decision rx__connect_begin(struct rx_op *op, int fd,
				      const struct sockaddr *sa, socklen_t len)
{
	/* Whatever socket() said of the number holds until a connect: a
	 * datagram, raw or local socket is never a call, and a stream
	 * socket needs no question about its type or peer (ADR-542). */
	uint32_t seen =
	    atomic_load_explicit(&rx__fd_doubt, memory_order_relaxed);
	unsigned born = rx__fd_mark_take(fd);
	bool fresh = born == RX_MARK_STREAM;
	struct rx_gate_permit permit;
	struct addr_hold ah; /* the address's permit, RESILIX_KEY=host */
	char hostkey[RX_KEY_MAX + 1];
	const struct rx_dest_memo *d;
	const char *key;
	struct sockaddr_in v4;
	struct rx_guard *g;
	uint32_t hash;
	bool named, late;
	struct rx_fd *e;
	struct rx_lock *l;
	uint64_t dev, ino;
	uint16_t dl_seq;
	size_t klen;
	int saved = errno;
	uint64_t now;

	memset(op, 0, sizeof(*op));
	op->fd = fd;
	if (born == RX_MARK_OTHER || rx__reentered())
		return RX_OP_PASS;
	rx__inside = 1;
	if (!rx__ready())
		goto pass;
	/* The fork word, not getpid: a forked child is told apart, a vfork
	 * child may not connect before it execs (ADR-543). */
	if ((unsigned)fd >=
		atomic_load_explicit(&rx__fd_capacity, memory_order_acquire) ||
	    !rx__owner_fast())
		goto pass;
	e = rx__fd_get(fd);
	if (rx__curl_active) {
		/* Inside curl_easy_perform: the curl layer attributes this
		 * call (ADR-152); whatever we knew of the fd is over. */
		rx__fd_drop(fd, e);
		goto pass;
	}
	/* ::ffff:a.b.c.d is a.b.c.d: one key, one set of filters (ADR-194).
	 * Only the key's view changes; the real connect gets @sa as given. */
	if (sa && (uintptr_t)sa < 4096)
		sa = NULL; /* a bad pointer: the kernel's EFAULT (ADR-195) */
	if (sa)
		sa = rx__sockkey_unmapped(sa, &len, &v4);
	/* The key, its hash and the filters' verdict: the thread's last
	 * destination's, when it is the same (ADR-540). */
	d = sa ? rx__dest_of(sa, len) : NULL;
	if (!d) {
		/* Not an IP destination (AF_UNIX, or AF_UNSPEC, which
		 * dissolves a TCP association): whatever we knew is over. */
		rx__fd_drop(fd, e);
		goto pass;
	}
	key = d->key;
	klen = d->len;
	hash = d->hash;
	if (rx__cfg.key_host) /* ADR-144 */
		klen = rx__dest_host_key(d, sa, len, hostkey, &key, &hash);
	/* Keyed by a name: the connect's own outcome is the address's
	 * (ADR-220). */
	named = key != d->key;
	if (!d->guarded) {
		/* Not a destination the user asked us to guard (ADR-143). */
		rx__fd_drop(fd, e);
		goto pass;
	}
	if (e && rx__fd_phase(e) == RX_FD_CONNECTING) {
		/* connect() again while a non-blocking connect is pending:
		 * the same call, polled. Another destination means the state
		 * is stale (the fd was closed behind our back). */
		bool again;

		l = rx__fd_lock(e);
		rx__lock(l);
		again = rx__fd_phase(e) == RX_FD_CONNECTING &&
			strcmp(rx__key_name(e->guard), key) == 0;
		op->epoch =
		    atomic_load_explicit(&e->epoch, memory_order_relaxed);
		rx__unlock(l);
		if (again) {
			op->e = e;
			op->again = true;
			op->phase = RX_FD_CONNECTING;
			errno = saved;
			return RX_OP_TRACK;
		}
	}
	/* connect() on a socket that is connected already - the "make sure
	 * it is connected" habit: the kernel answers EISCONN and nothing
	 * leaves the host. Not a call, never refused, and the connection's
	 * own call goes on (ADR-216). A fresh socket is not (ADR-542). */
	if (!fresh && rx__fd_connected(fd))
		goto pass;
	/* Anything else we hold for this fd is stale, or a reconnect after
	 * a failed connect: start afresh. */
	if (e)
		rx__call_end_record(fd, e);
	/* A fresh number gets its record once admitted: a refused connect
	 * then leaves none to forget at close (ADR-541). A deadline names
	 * the record at admission (ADR-382), so with deadlines on it comes
	 * first. A marked socket's identity (fstat) is left to the first
	 * check that compares it: socket()'s mark, valid while the doubt
	 * counter was @seen, proves the number holds it (ADR-545). Any
	 * other socket is asked, and seen by its fstat. */
	late = !e && !rx__deadlines_on;
	dev = ino = 0;
	if (!fresh) {
		seen =
		    atomic_load_explicit(&rx__fd_doubt, memory_order_relaxed);
		if (!rx__fd_stream_id(fd, &dev, &ino)) {
			rx__fd_drop(fd, e);
			goto pass;
		}
	}
	if (!late && !(e = rx__fd_for_connect(fd, e, dev, ino, seen)))
		goto pass;
	now = rx__now_ns();
	ah.guard = NULL;
	g = NULL;
	dl_seq = 0;
	/* The common connect: the key this thread's last connection kept
	 * pinned, admitted under one hold of its lock (ADR-575). */
	if (rx__ka_on && late && !named &&
	    (g = rx__key_kept(key, klen, hash))) {
		enum rx_kept_admission k = rx__key_admit_kept(g, now, &permit);

		/* A refusal leaves the pin kept, as a release would. */
		if (k == RX_KEPT_REFUSE)
			return refused(fd, fresh, saved);
		rx__key_kept_take();
		if (k == RX_KEPT_ADMIT)
			goto admitted;
		if (k == RX_KEPT_QUEUE) {
			if (rx__admit_queued(g, &now, &permit, "connect", fd,
					     false))
				goto admitted;
			rx__key_release(g);
			return refused(fd, fresh, saved);
		}
		if (k == RX_KEPT_STALE) {
			rx__key_unpin(g);
			g = NULL;
		}
	}
	/* The address first: a dead address of a live name is refused at
	 * once, and the program's fallback moves on (ADR-220). */
	if (named)
		ah.guard = rx__key_acquire_hashed(d->key, d->len, d->hash, now);
	ah.start_ns = now;
	if (ah.guard &&
	    !rx__admit(ah.guard, &now, &ah.permit, "connect", fd, false)) {
		rx__key_release(ah.guard);
		return refused(fd, fresh, saved);
	}
	if (!g)
		g = rx__key_acquire_hashed(key, klen, hash, now);
	if (!g || !rx__admit_call(g, &now, &permit, "connect", fd, false, e,
				  &dl_seq)) {
		give_back(&ah, now, "refused");
		if (!g)
			goto pass;
		rx__key_release(g);
		return refused(fd, fresh, saved);
	}
admitted:
	/* A socket() the shim saw, the record's first connect: claimed and
	 * filled with no lock - no other thread can reach it - and mapped
	 * when the real connect returns (ADR-631). Not with a retry, which
	 * may connect again before the end step, nor with an address permit
	 * (ADR-220), which the connect's outcome settles under the lock. */
	if (late && fresh && !ah.guard && !rx__retry_on() &&
	    (e = rx__fd_claim(fd, seen))) {
		op->epoch = fill(e, g, &permit, dl_seq, &ah, now);
		op->e = e;
		op->phase = RX_FD_CONNECTING;
		op->unpublished = true;
		errno = saved;
		return RX_OP_TRACK;
	}
	if (late && !(e = rx__fd_for_connect(fd, NULL, dev, ino, seen))) {
		/* No record to be had (another thread's meanwhile): the call
		 * was never the shim's. */
		rx__key_settle(g, &permit, RX_REJECTED, now, now, now, "pass");
		rx__key_release(g);
		give_back(&ah, now, "pass");
		goto pass;
	}
	l = rx__fd_lock(e);
	rx__lock(l);
	op->epoch = fill(e, g, &permit, dl_seq, &ah, now);
	rx__unlock(l);
	op->e = e;
	op->phase = RX_FD_CONNECTING;
	errno = saved;
	return RX_OP_TRACK;
pass:
	rx__inside = 0;
	errno = saved;
	return RX_OP_PASS;
}

bool rx__connect_fast_on;

/*
 * The common connect in one pass (ADR-632): what rx__connect_begin,
 * the real connect and rx__connect_end do for a number socket() made an
 * unconnected IPv4 stream socket with no record, connected by a plain
 * thread (not inside the shim, nor in a curl transfer) to a guarded
 * address whose key the thread kept pinned, with no hook, deadline,
 * retry or RESILIX_KEY=host: every test before the mark's take changes
 * nothing, and the kept pin's admission is the general one's
 * (rx__key_admit_kept). A fresh answer of the kept pin's - stale, or
 * "ask the general admission" - has changed nothing either; the mark
 * goes back and the general steps ask again.
 */
__attribute__((flatten)) int rx__connect_fast(int fd, const struct sockaddr *sa,
					      socklen_t len)
{
	int rc;
	uint32_t seen =
	    atomic_load_explicit(&rx__fd_doubt, memory_order_relaxed);
	struct addr_hold none = {.guard = NULL};
	const struct rx_dest_memo *d;
	struct rx_gate_permit permit;
	enum rx_kept_admission k;
	struct rx_guard *g;
	struct rx_fd *e;
	uint32_t epoch;
	uint64_t m, taken, now;

	if (!rx__connect_fast_on ||
	    (rx__inside | rx__locks_held | rx__curl_active) != 0 ||
	    !rx__ready() || (unsigned)fd >= rx__fd_capacity_now() ||
	    atomic_load_explicit(&rx__fd_map[fd], memory_order_relaxed) != 0)
		return RX_CONNECT_GENERAL;
	m = atomic_load_explicit(&rx__fd_marks[fd], memory_order_relaxed);
	if ((m & RX_MARK_KIND) != (uint64_t)RX_MARK_STREAM << 32 ||
	    (uint32_t)m != seen || !rx__owner_fast() || (uintptr_t)sa < 4096 ||
	    len < (socklen_t)sizeof(struct sockaddr_in) ||
	    sa->sa_family != AF_INET)
		return RX_CONNECT_GENERAL;
	d = rx__dest_of(sa, len);
	if (!d || !d->guarded || !(g = rx__key_kept(d->key, d->len, d->hash)))
		return RX_CONNECT_GENERAL;
	/* The mark taken, as rx__fd_mark_take: a close, duplicate or
	 * socket() of the number since the read leaves the connect to the
	 * general steps (ADR-671). */
	taken = rx__fd_mark_taken(m);
	if (!atomic_compare_exchange_strong_explicit(
		&rx__fd_marks[fd], &m, taken, memory_order_relaxed,
		memory_order_relaxed))
		return RX_CONNECT_GENERAL;
	rx__inside = 1;
	now = rx__now_ns();
	k = rx__key_admit_kept(g, now, &permit);
	if (k == RX_KEPT_STALE || k == RX_KEPT_ASK) {
		/* The mark back for the general steps' own take, unless a
		 * close or socket() has rewritten it meanwhile. */
		atomic_compare_exchange_strong_explicit(
		    &rx__fd_marks[fd], &taken, m, memory_order_relaxed,
		    memory_order_relaxed);
		rx__inside = 0;
		return RX_CONNECT_GENERAL;
	}
	if (k != RX_KEPT_REFUSE) {
		rx__key_kept_take();
		if (k == RX_KEPT_QUEUE &&
		    !rx__admit_queued(g, &now, &permit, "connect", fd, false)) {
			rx__key_release(g);
			k = RX_KEPT_REFUSE;
		}
	}
	if (k == RX_KEPT_REFUSE) {
		if (refused(fd, true, errno) == RX_OP_REFUSE) {
			errno = rx__refusal_errno();
			rc = -1;
		} else {
			rc = rx__real_connect(fd, sa, len);
		}
		return rc;
	}
	if (!(e = rx__fd_claim(fd, seen))) {
		/* No record to be had: the call was never the shim's. */
		rx__key_settle(g, &permit, RX_REJECTED, now, now, now, "pass");
		rx__key_release(g);
		rx__inside = 0;
		rc = rx__real_connect(fd, sa, len);
		return rc;
	}
	epoch = fill(e, g, &permit, 0, &none, now);
	rc = RX_HOT(connect)(fd, sa, len);
	rx__connect_published(fd, e, epoch, rc);
	return rc;
}
