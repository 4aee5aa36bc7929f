/*
 * preload/call_framed.h - the call state machine's part for protocol
 * modules that frame the bytes written (proto.h's fifth function: the
 * PostgreSQL and Redis modules, ADR-408, ADR-411): keeping a write's
 * bytes for its end step, feeding them to the module under the record's
 * lock, and the refusal that must also end the reading side. Included by
 * call.c only; names no protocol (protocols.h dispatches).
 */
#ifndef RESILIX_PRELOAD_CALL_FRAMED_H
#define RESILIX_PRELOAD_CALL_FRAMED_H

#include <sys/socket.h>

#include "admit.h"
#include "call.h"
#include "deadline.h"
#include "fdtable.h"
#include "protocols.h"
#include "symbols.h"

/* Keep the bytes of a tracked write for its end step (ADR-408): a single
 * buffer by value (its iovec may be the wrapper's, on a frame that ends
 * before the end step), an array by pointer (the program's own). */
static inline void rx__call_keep_iov(struct rx_op *op, const struct iovec *iov,
				     int iovcnt)
{
	op->iovcnt = iovcnt;
	op->iov = iov;
	if (iov && iovcnt == 1) {
		op->one = iov[0];
		op->iov = &op->one;
	}
}

/* The bytes of a tracked write, kept for its end step when the module
 * frames writes; ciphertext is never the module's (the TLS layer feeds it
 * the plaintext, ADR-410, ADR-440). op->cipher must be set. */
static inline void rx__call_keep_framed(struct rx_op *op,
					const struct iovec *iov, int iovcnt)
{
	op->iovcnt = -1; /* not kept */
	if (!op->cipher && rx__proto_frames_writes(&op->e->proto))
		rx__call_keep_iov(op, iov, iovcnt);
}

/* A write that starts no call on an answered connection (phase @ph,
 * IDLE): a module that frames every byte written still reads it, so the
 * write is tracked for its end step. true: track it. */
static inline bool rx__call_track_idle(struct rx_op *op, unsigned ph,
				       const struct iovec *iov, int iovcnt)
{
	if (op->cipher || !rx__proto_frames_writes(&op->e->proto) ||
	    !rx__owner_fast())
		return false;
	op->phase = (uint8_t)ph;
	op->epoch = atomic_load_explicit(&op->e->epoch, memory_order_relaxed);
	rx__call_keep_iov(op, iov, iovcnt);
	return true;
}

/*
 * rx__key_release_limiter - give back now the limiter slot (and bucket
 * share) that @permit, an unmarked copy of a call's permit, holds on @g:
 * the call waits on purpose (ADR-654). Under @g's lock, with the shared
 * segment's hold row kept; wakes the key's waiters. Holds no lock on
 * entry. Preserves errno.
 */
static inline void rx__key_release_limiter(struct rx_guard *g,
					   const struct rx_gate_permit *permit)
{
	struct rx_lock *l = rx__key_lock(g);
	struct rx_shm_mark m;
	uint32_t waiters;

	rx__lock(l);
	rx__shm_mark_begin(&m, g, rx__key_slot(l));
	rx_guard_release_limiter(g, permit, rx__now_ns());
	rx__shm_mark_end(&m, g);
	waiters = rx_guard_waiters(g);
	rx__unlock(l);
	if (waiters > 0)
		rx__key_wake(g);
}

/*
 * rx__call_wrote - the @n bytes @op sent, fed to a module that frames the
 * bytes written (ADR-408; caller: the write's end step, no lock held).
 * Returns what the module said. UNFRAMED on an answered connection stops
 * its tracking here; a call in flight is left to the default rule at its
 * first byte; NO_CALL (a CancelRequest) is the caller's to release, with
 * the key the request names in *@cancels (0: none), for the cancel ring
 * (ADR-676); *@cancels is written with NO_CALL only. Bytes
 * of another call's epoch (a race with a close, a reconnect) are not this
 * connection's: OK, nothing fed.
 */
static inline enum rx_proto_wrote rx__call_wrote(struct rx_op *op, size_t n,
						 uint64_t *cancels)
{
	struct rx_fd *e = op->e;
	enum rx_proto_wrote w = RX_PROTO_WROTE_OK;
	struct rx_lock *l = rx__fd_lock(e);
	enum rx_fd_phase ph;
	bool release = false;
	struct rx_gate_permit held;
	struct rx_guard *g = NULL;
	uint16_t seq = 0;

	if (op->iovcnt < 0)
		return w; /* not kept: not this module's bytes */
	rx__lock(l);
	ph = rx__fd_phase(e);
	if (atomic_load_explicit(&e->epoch, memory_order_relaxed) ==
		op->epoch &&
	    ph != RX_FD_UNTRACKED && ph != RX_FD_DONE) {
		w = rx__proto_wrote(&e->proto, op->iov, op->iovcnt, n);
		if (__builtin_expect(w == RX_PROTO_WROTE_NO_CALL, 0))
			*cancels = rx__proto_cancels(&e->proto);
		if (w == RX_PROTO_WROTE_UNFRAMED && ph == RX_FD_IDLE)
			atomic_store_explicit(&e->phase, RX_FD_DONE,
					      memory_order_release);
		/* A command that waits on purpose has no deadline (ADR-650)
		 * and holds no limiter slot while it waits (ADR-654). The
		 * deadline is taken from the record here, so that the call's
		 * own end does not claim it meanwhile: the claim below tells
		 * whether the sweep settled the call first (ADR-660). */
		if (ph != RX_FD_IDLE && rx__proto_untimed(&e->proto) &&
		    (g = e->guard) != NULL) {
			rx__permit_copy(&held, &e->permit);
			release = rx_guard_mark_limiter_released(g, &e->permit);
			seq = e->dl_seq;
			e->dl_seq = 0;
		}
	}
	rx__unlock(l);
	if (seq != 0 && !rx__deadline_disarm(g, e, seq)) {
		/* The sweep settled the call as its deadline passed, with
		 * the permit it armed, limiter slot included: nothing is
		 * given back twice, and the call's end settles nothing, as
		 * for any call the sweep settled (ADR-382, ADR-660). */
		release = false;
		rx__lock(l);
		if (atomic_load_explicit(&e->epoch, memory_order_relaxed) ==
			op->epoch &&
		    e->dl_seq == 0)
			e->dl_seq = seq;
		rx__unlock(l);
	}
	if (release)
		rx__key_release_limiter(g, &held);
	return w;
}

/*
 * rx__call_refused - a new request on @fd (record @e) was refused. A
 * client that reads on after a failed write, for the server's reason
 * (libpq), would wait for ever for an answer to a request never sent:
 * where the module says so, the refusal ends the reading side too
 * (ADR-411). Preserves errno.
 */
static inline void rx__call_refused(int fd, struct rx_fd *e)
{
	int saved;

	if (!rx__proto_refusal_ends_reads(&e->proto))
		return;
	saved = errno;
	(void)rx__real_shutdown(fd, SHUT_RD);
	errno = saved;
}

#endif
