/*
 * preload/admit.c - admission and settlement: the key registry and its
 * locks, the wait for a limiter slot, and the log lines of breaker
 * transitions and limit changes (ADR-136, ADR-138, ADR-185, ADR-223,
 * ADR-226).
 *
 * Locks. Two of the shim's three kinds live here, never nested, never
 * held across a call into libc: the registry lock (acquire/release of a
 * key, O(1)) and one lock per guard (indexed by rx_registry_index;
 * admit/settle, O(1)). The fd stripe locks are fdtable.c's. So no lock
 * order exists to get wrong, and a thread blocked in recv holds nothing.
 * The guard of a tracked fd stays pinned from connect to close, so the
 * registry never evicts a key with a live connection; pins are taken and
 * given back in keypin.c, which keeps a thread's last one (ADR-546).
 *
 * Waiting for a limiter slot (ADR-136). Where the adaptive limiter would
 * queue a call, a blocking caller (a blocking socket's connect, or the
 * first write of a new request on a blocking socket without MSG_DONTWAIT,
 * or libcurl's perform) takes a place in the key's queue and waits, in
 * arrival order, at most RESILIX_QUEUE_TIMEOUT_MS (and RESILIX_TIMEOUT_MS,
 * when set: the call's deadline covers its wait); a non-blocking caller
 * never waits, it is refused (limiter-full) where it would have queued.
 * The wait holds no lock: it sleeps on a per-key futex word that every
 * settlement of a key with waiters bumps and wakes (and at most
 * WAIT_SLICE_MS at a time, so a missed wake-up, or a limit that grew or
 * relaxed, costs a few ms, never a hang). The guard stays pinned while
 * its caller waits; a close of the fd meanwhile releases that pin, and
 * the registry keeps a key with waiters anyway. Limit changes are logged
 * at info, at most one line per key per LIMIT_LOG_NS (ADR-138).
 *
 * Waiting for a token or a bulkhead slot (ADR-464, ADR-383). Where the
 * rate limiter or the bulkhead would queue a call, a blocking caller waits
 * the same way, bounded the same way, with a place in line (fifo.c) but
 * none in the limiter: the head sleeps until the next token (or a
 * settlement, for a slot) and asks the whole guard again; a blocking
 * newcomer finding a line queues behind it. A token that comes after the
 * head's deadline refuses it at once, with its retry-after. A
 * non-blocking caller is refused where it would wait. */
#include "config.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "admit.h"
#include "deadline.h"
#include "errclass.h"
#include "fifo.h"
#include "interrupt.h"
#include "keypin.h"
#include "log.h"
#include "metrics.h"
#include "runtime.h"
#include "shared.h"
#include "state.h"
#include "symbols.h"
#include "transition.h"

static struct rx_registry *registry;
/* The registry lock: this process's own, or the shared segment's. */
static struct rx_lock own_registry_lock;
static struct rx_lock *registry_lock = &own_registry_lock;
static struct rx_lock *guard_locks; /* rx__cfg.registry.max_keys of them */
/* FUTEX_PRIVATE_FLAG, or 0 when the wait words are in a shared segment
 * that other processes' settlements wake (ADR-480). */
static int futex_private = FUTEX_PRIVATE_FLAG;

/*
 * Per-key state of the limiter's executor, beside guard_locks (same
 * index). wake_seq is the futex word waiters sleep on (atomic, no lock);
 * the logged_* fields are read and written under the key's guard lock.
 */
struct key_wait {
	_Atomic uint32_t wake_seq;
	uint32_t logged_limit; /* last limit logged, 0 = none yet */
	uint64_t logged_ns;    /* when it was logged */
};
static struct key_wait *key_waits; /* rx__cfg.registry.max_keys of them */

/* Longest single sleep of a waiter: bounds the cost of a missed wake. */
#define WAIT_SLICE_MS 10
/* At most one limit-change line per key per this long (ADR-138). */
#define LIMIT_LOG_NS (100 * RX_NS_PER_MS)
/* Any hook of a settlement on: log level info or debug, or a metrics
 * file. Set once at start-up, read-only afterwards (ADR-185). */
static bool hooks_on;
bool rx__ka_on;

/* The slot's lock, uncached: for a signal handler's rx__jumped, which must
 * not touch a cache the code it interrupted may be filling. */
static struct rx_lock *guard_lock_uncached(struct rx_guard *g)
{
	return &guard_locks[rx_registry_index(registry, g)];
}

struct rx_lock *rx__key_lock_miss(struct rx_guard *g)
{
	struct rx_lock *l = guard_lock_uncached(g);

	/* Emptied first, filled last: a longjmp out of a signal handler
	 * that interrupts this leaves the cache empty or whole, never a
	 * guard paired with another's lock (ADR-226). */
	rx__key_lock_g = NULL;
	atomic_signal_fence(memory_order_seq_cst);
	rx__key_lock_l = l;
	atomic_signal_fence(memory_order_seq_cst);
	rx__key_lock_g = g;
	return l;
}

static inline struct rx_lock *guard_lock(struct rx_guard *g)
{
	return rx__key_lock(g);
}

static const char *key_of(struct rx_guard *g)
{
	return rx_registry_key(registry, g);
}

const char *rx__key_name(struct rx_guard *g)
{
	return key_of(g);
}

/* ------------------------------------------------------------------------
 * Admission and settlement, with breaker transitions logged.
 * ---------------------------------------------------------------------- */

/* After an admission step: log a transition, and let the metrics file
 * show it at once (ADR-222). No lock held. */
static void watch_report(const struct watch *w, struct rx_guard *g,
			 uint64_t now)
{
	rx__watch_log(w, key_of(g));
	if (w->changed && rx__metrics_on)
		rx__metrics_tick(now, true);
}

static struct key_wait *key_wait_of(struct rx_guard *g)
{
	return &key_waits[rx_registry_index(registry, g)];
}

/* Wake every waiter of @kw: one of them may now have its turn. Called
 * with no lock held. */
static void wake_waiters(struct key_wait *kw)
{
	int saved = errno;

	atomic_fetch_add_explicit(&kw->wake_seq, 1, memory_order_release);
	syscall(SYS_futex, &kw->wake_seq, FUTEX_WAKE | futex_private, INT32_MAX, NULL,
		NULL, 0);
	errno = saved;
}

/* Sleep until woken or @ns pass. Returns false when a signal handler ran
 * (EINTR). */
static bool wait_for_wake(struct key_wait *kw, uint32_t seq, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / UINT64_C(1000000000)),
			      (long)(ns % UINT64_C(1000000000))};

	return syscall(SYS_futex, &kw->wake_seq, FUTEX_WAIT | futex_private, seq, &ts,
		       NULL, 0) == 0 ||
	       errno != EINTR;
}

/* Outstanding deadlines (ADR-382, deadline.c). After a sweep that settled
 * @n calls of @g: what a settlement does once
 * the lock is dropped. @waiters: the guard's, read under the lock. */
static void dl_report(struct rx_guard *g, uint32_t slot, unsigned n,
		      uint32_t waiters)
{
	if (n == 0)
		return;
	rx__state_touched();
	if (waiters > 0)
		wake_waiters(&key_waits[slot]);
	if (rx__log_enabled(RX_LOG_DEBUG))
		rx__log(RX_LOG_DEBUG,
			"key=%s event=deadline-passed settled=%u", key_of(g),
			n);
}

/* The place this thread waits in, while it waits (ADR-226): a jump out
 * of the wait (siglongjmp from a signal handler) gives it up. */
static RX_TLS struct {
	struct rx_guard *g;
	uint64_t place;
	uint32_t line; /* its place in the token/slot line (fifo.c) */
} waiting;

/* The place of a caller waiting for a token or a bulkhead slot, which
 * holds no place in the limiter's queue. End this thread's place at @g
 * (@refused: counted as a limiter-full refusal) under @g's lock @l, so
 * rx__jumped does not end it a second time. Then wake the queue. */
#define PLACE_NONE UINT64_MAX

static void end_place_locked(struct rx_guard *g, struct rx_lock *l,
			     uint64_t place, bool refused)
{
	struct rx_shm_mark m;

	waiting.g = NULL;
	rx__shm_mark_begin(&m, g, l - guard_locks);
	if (place == PLACE_NONE) {
		rx_guard_wait_end(g, RX_REASON_NONE);
		rx__fifo_leave(rx_registry_index(registry, g), waiting.line);
	} else
		rx_guard_cancel_wait(g, place, refused);
	rx__shm_mark_end(&m, g);
	rx__unlock(l);
	wake_waiters(key_wait_of(g));
}

void rx__jumped(void)
{
	struct rx_guard *g = waiting.g;
	struct rx_lock *l;

	/* The handler that jumps interrupted a critical section of this
	 * thread: its lock stays taken for good, and this thread, taking it
	 * again, would spin for ever. It goes on passing every call through
	 * (other threads wait on that lock: the jump's own fault). */
	if (rx__locks_held > 0)
		return;
	rx__inside = 0;
	if (!g)
		return;
	l = guard_lock_uncached(g);
	if (!rx__trylock(l)) {
		waiting.g = NULL; /* another thread holds it: the place stays */
		return;
	}
	end_place_locked(g, l, waiting.place, false);
}

/* The errno a refusal gives the caller (ADR-223): ECONNREFUSED, or EINTR
 * when a signal ended a send's wait for a limiter slot. Per thread; read
 * once by rx__refusal_errno. */
static RX_TLS int refusal_errno;

int rx__refusal_errno(void)
{
	int e = refusal_errno ? refusal_errno : ECONNREFUSED;

	refusal_errno = 0;
	return e;
}

/* The program's own bound on a send on @fd (SO_SNDTIMEO, which Linux
 * applies to connect too), in ns; 0 = none or not a socket. */
static uint64_t send_timeout_ns(int fd)
{
	struct timeval tv = {0, 0};
	socklen_t len = sizeof(tv);

	if (fd < 0 ||
	    rx__real_getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) != 0 ||
	    tv.tv_sec < 0 || tv.tv_usec < 0)
		return 0;
	return (uint64_t)tv.tv_sec * UINT64_C(1000000000) +
	       (uint64_t)tv.tv_usec * 1000;
}

/* The last refusal on this thread, for the curl layer's error message
 * (rx__key_admit). */
static RX_TLS struct rx_refusal last_refusal;

static void log_refused(struct rx_guard *g, const struct rx_refusal *why,
			const char *where, uint64_t waited_ns)
{
	last_refusal = *why;
	if (rx__log_enabled(RX_LOG_DEBUG)) /* no varargs call when off */
		rx__log(RX_LOG_DEBUG,
			"key=%s event=refused reason=%s retry_after_ms=%llu "
			"at=%s waited_ms=%llu",
			key_of(g), rx_reason_name(why->reason),
			(unsigned long long)why->retry_after_ms, where,
			(unsigned long long)(waited_ns / RX_NS_PER_MS));
}

/*
 * Wait in @g's limiter queue at place @place until the caller's turn (true,
 * @permit filled, *@now the admission time), a refusal, the queue timeout,
 * the program's own send timeout on @fd, or a signal that would have
 * interrupted the real call (false; refusal_errno says how). No lock is
 * held while sleeping; rx__inside stays set, so a signal handler's I/O on
 * this thread passes through.
 */
/* The latest a caller starting to wait at @start on @fd may wait until:
 * RESILIX_QUEUE_TIMEOUT_MS, or a deadline for the call
 * (RESILIX_TIMEOUT_MS) when shorter, since it covers the wait, or the
 * program's own (SO_SNDTIMEO, ADR-223). */
static uint64_t wait_deadline(uint64_t start, int fd)
{
	uint64_t bound_ms = rx__cfg.queue_timeout_ms;
	uint64_t own_ns = send_timeout_ns(fd);
	uint64_t deadline;

	if (rx__cfg.timeout_ms > 0 && rx__cfg.timeout_ms < bound_ms)
		bound_ms = rx__cfg.timeout_ms;
	deadline = start + bound_ms * RX_NS_PER_MS;
	if (own_ns > 0 && start + own_ns < deadline)
		deadline = start + own_ns;
	return deadline;
}

static bool wait_turn(struct rx_guard *g, uint64_t place, uint64_t *now,
		      struct rx_gate_permit *permit, const char *where, int fd,
		      uint64_t deadline)
{
	struct rx_admit_ctx ctx = {.rng = rx__thread_rng(), .can_wait = true,
				   RX_SHM_CTX};
	struct rx_refusal why = {RX_REASON_LIMITER_FULL, 0};
	struct key_wait *kw = key_wait_of(g);
	struct rx_lock *l = guard_lock(g);
	uint64_t start = *now;
	enum rx_decision d;

	/* Every end of the place below clears this under the guard's lock,
	 * and rx__jumped only tries that lock: a place ends once. */
	waiting.place = place;
	waiting.g = g;
	for (;;) {
		uint32_t seq =
		    atomic_load_explicit(&kw->wake_seq, memory_order_acquire);
		struct watch w;

		struct rx_shm_mark m;

		ctx.now_ns = *now;
		rx__lock(l);
		rx__watch_begin(&w, g, *now);
		rx__shm_mark_begin(&m, g, l - guard_locks);
		d = rx_guard_try_dequeue(g, &ctx, place, permit, &why);
		rx__shm_mark_end(&m, g);
		if (d != RX_QUEUE)
			waiting.g = NULL; /* the place ended */
		rx__watch_end(&w, g, *now);
		rx__unlock(l);
		watch_report(&w, g, *now);
		if (d == RX_ADMIT) {
			uint64_t waited_ms = (*now - start) / RX_NS_PER_MS;

			rx__log(RX_LOG_DEBUG,
				"key=%s event=admitted-after-wait "
				"waited_ms=%llu at=%s",
				key_of(g), (unsigned long long)waited_ms,
				where);
			return true;
		}
		if (d != RX_QUEUE) {
			/* The slot it was given went back (circuit open):
			 * someone behind may use it. */
			wake_waiters(kw);
			break;
		}
		if (rx__shared_on)
			rx__shared_sweep(*now, false);
		if (*now >= deadline) {
			rx__lock(l);
			end_place_locked(g, l, place, true);
			why.reason = RX_REASON_LIMITER_FULL;
			why.retry_after_ms = 0;
			break;
		}
		uint64_t left = deadline - *now;
		if (!wait_for_wake(kw, seq,
				   left < WAIT_SLICE_MS * RX_NS_PER_MS
				       ? left
				       : WAIT_SLICE_MS * RX_NS_PER_MS) &&
		    fd >= 0 && rx__interrupt_wanted()) { /* fd < 0: libcurl's */
			rx__lock(l);
			end_place_locked(g, l, place, false);
			*now = rx__now_ns();
			/* A send interrupted before any byte went fails with
			 * EINTR. A connect interrupted so would go on in the
			 * background (POSIX), and a program then waits for it
			 * to complete - but this one never started: it is
			 * refused, at the program's deadline. */
			refusal_errno = strcmp(where, "connect") == 0
					    ? ECONNREFUSED
					    : EINTR;
			rx__log(
			    RX_LOG_DEBUG,
			    "key=%s event=wait-interrupted waited_ms=%llu "
			    "at=%s",
			    key_of(g),
			    (unsigned long long)((*now - start) / RX_NS_PER_MS),
			    where);
			return false;
		}
		*now = rx__now_ns();
	}
	log_refused(g, &why, where, *now - start);
	return false;
}


/*
 * Wait for a token or a bulkhead slot (ADR-464): @why says which the
 * guard lacked (rate-limited, bulkhead-full); the caller registered the
 * wait (rx_guard_wait_begin) under the lock hold that decided it. Sleep
 * until the next token or a settlement on the key, then ask the whole
 * guard again; the limiter may then queue the call (its wait follows,
 * with what is left of the deadline). Returns as wait_turn does.
 */
static bool wait_again(struct rx_guard *g, uint64_t *now,
		       struct rx_gate_permit *permit, const char *where,
		       int fd, struct rx_refusal *why)
{
	struct rx_admit_ctx ctx = {.rng = rx__thread_rng(), .can_wait = true,
				   RX_SHM_CTX};
	struct key_wait *kw = key_wait_of(g);
	struct rx_lock *l = guard_lock(g);
	uint64_t start = *now, deadline = wait_deadline(*now, fd);
	uint64_t place = 0, wake;
	uint32_t slot = rx_registry_index(registry, g);
	enum rx_decision d;
	struct rx_shm_mark m = {false, 0, 0, 0, 0, 0, NULL};
	bool head;

	waiting.place = PLACE_NONE;
	waiting.g = g; /* waiting.line: taken by the caller (ADR-383) */
	for (;;) {
		uint32_t seq =
		    atomic_load_explicit(&kw->wake_seq, memory_order_acquire);

		rx__lock(l);
		head = rx__fifo_turn(slot, waiting.line);
		wake = *now + WAIT_SLICE_MS * RX_NS_PER_MS;
		if (head && why->reason == RX_REASON_RATE_LIMITED)
			wake = rx_guard_next_token_ns(g, *now);
		else if (wake > deadline)
			wake = deadline;
		if (wake > deadline || *now >= deadline) {
			/* The token comes too late, or the slot did not come
			 * in time: refused, with what the guard said. */
			waiting.g = NULL;
			rx_guard_wait_end(g, why->reason);
			rx__fifo_leave(slot, waiting.line);
			rx__unlock(l);
			wake_waiters(kw);
			break;
		}
		rx__unlock(l);
		if (wake > *now &&
		    !wait_for_wake(kw, seq,
				   wake - *now < WAIT_SLICE_MS * RX_NS_PER_MS
				       ? wake - *now
				       : WAIT_SLICE_MS * RX_NS_PER_MS) &&
		    fd >= 0 && rx__interrupt_wanted()) {
			rx__lock(l);
			end_place_locked(g, l, PLACE_NONE, false);
			refusal_errno =
			    strcmp(where, "connect") == 0 ? ECONNREFUSED : EINTR;
			*now = rx__now_ns();
			return false;
		}
		*now = rx__now_ns();
		ctx.now_ns = *now;
		rx__lock(l);
		if (!rx__fifo_turn(slot, waiting.line)) {
			rx__unlock(l); /* not its turn yet */
			continue;
		}
		rx__shm_mark_begin(&m, g, l - guard_locks);
		d = rx_guard_admit(g, &ctx, permit, why);
		if (d == RX_QUEUE && why->reason == RX_REASON_LIMITER_FULL &&
		    rx_guard_enqueue(g, *now, &place) != RX_OK)
			d = RX_REFUSE;
		rx__shm_mark_end(&m, g);
		head = d != RX_QUEUE || why->reason == RX_REASON_LIMITER_FULL;
		if (head) { /* it leaves the line */
			waiting.g = NULL;
			rx_guard_wait_end(g, RX_REASON_NONE);
			rx__fifo_leave(slot, waiting.line);
		}
		rx__unlock(l);
		if (head)
			wake_waiters(kw); /* the next head's turn */
		if (d == RX_ADMIT) {
			rx__log(RX_LOG_DEBUG,
				"key=%s event=admitted-after-wait "
				"waited_ms=%llu at=%s",
				key_of(g),
				(unsigned long long)((*now - start) /
						     RX_NS_PER_MS),
				where);
			return true;
		}
		if (d == RX_REFUSE)
			break;
		if (why->reason == RX_REASON_LIMITER_FULL)
			return wait_turn(g, place, now, permit, where, fd,
					 deadline);
	}
	log_refused(g, why, where, *now - start);
	return false;
}

/*
 * Ask @g whether a call may start at *@now on @fd. @dontwait: the caller
 * asked not to block (MSG_DONTWAIT). Returns true with @permit filled and
 * *@now the admission time (later than on entry when the call waited in
 * the limiter's queue: the wait is not the upstream's latency). Preserves
 * errno: only the wait makes system calls that may set it, and it puts
 * errno back itself, so the common path reads errno not at all (ADR-185).
 */
static inline __attribute__((always_inline)) bool
admit_impl(struct rx_guard *g, uint64_t *now, struct rx_gate_permit *permit,
	   const char *where, int fd, bool dontwait, bool deadlines,
	   const void *owner, uint16_t *seq, bool queued)
{
	/* Optimistic: most calls are admitted at once, and whether the
	 * caller may wait costs a system call, asked only when it matters. */
	struct rx_admit_ctx ctx = {
	    .now_ns = *now, .rng = rx__thread_rng(), .can_wait = true,
	    RX_SHM_CTX};
	struct rx_refusal why = {RX_REASON_NONE, 0};
	struct rx_lock *l = guard_lock(g);
	uint64_t place = 0;
	enum rx_decision d;
	struct watch w;
	struct rx_shm_mark m = {false, 0, 0, 0, 0, 0, NULL};
	unsigned timed_out = 0;
	uint32_t slot = 0, waiters = 0;

	if (queued) { /* decided once already (rx__admit_queued) */
		d = RX_QUEUE;
		goto queue;
	}
	rx__lock(l);
	rx__watch_begin(&w, g, *now);
	rx__shm_mark_begin(&m, g, l - guard_locks);
	if (deadlines) { /* RESILIX_TIMEOUT_MS set (ADR-382) */
		slot = rx_registry_index(registry, g);
		timed_out = rx__deadline_sweep(g, slot, *now);
		waiters = timed_out ? rx_guard_waiters(g) : 0;
	}
	/* A line of token/slot waiters (ADR-383): decide below whether to
	 * queue behind it. */
	d = rx__fifo_ahead(rx_registry_index(registry, g))
		? RX_QUEUE
		: rx_guard_admit(g, &ctx, permit, &why);
	if (deadlines && d == RX_ADMIT && seq)
		*seq = rx__deadline_push(slot, *now, permit, owner);
	rx__shm_mark_end(&m, g);
	rx__watch_end(&w, g, *now);
	rx__unlock(l);
	if (deadlines && timed_out)
		dl_report(g, slot, timed_out, waiters);
	watch_report(&w, g, *now);
	if (d == RX_ADMIT)
		return true;
queue:
	if (d == RX_QUEUE) {
		int saved = errno;

		/* Decide again with the caller's real ability to wait, under
		 * one lock hold with the enqueue: a non-blocking caller is
		 * refused where it would queue (and counted as such). */
		ctx.can_wait =
		    !dontwait && rx__cfg.queue_timeout_ms > 0 &&
		    (fd < 0 || rx__fd_blocking(fd)); /* fd < 0: curl.c */
		rx__lock(l);
		rx__shm_mark_begin(&m, g, l - guard_locks);
		if (ctx.can_wait && rx__fifo_ahead(rx_registry_index(registry, g))) {
			d = RX_QUEUE; /* behind the line (ADR-383) */
			why.reason = rx_guard_next_token_ns(g, *now) > *now
					 ? RX_REASON_RATE_LIMITED
					 : RX_REASON_BULKHEAD_FULL;
		} else
			d = rx_guard_admit(g, &ctx, permit, &why);
		if (d == RX_QUEUE && why.reason != RX_REASON_LIMITER_FULL) {
			rx_guard_wait_begin(g); /* a token, a slot (ADR-464) */
			waiting.line = rx__fifo_take(rx_registry_index(registry, g));
		} else if (d == RX_QUEUE &&
			 rx_guard_enqueue(g, *now, &place) != RX_OK)
			d = RX_REFUSE;
		rx__shm_mark_end(&m, g);
		rx__unlock(l);
		if (d == RX_QUEUE) {
			bool ok = why.reason == RX_REASON_LIMITER_FULL
				      ? wait_turn(g, place, now, permit, where,
						  fd, wait_deadline(*now, fd))
				      : wait_again(g, now, permit, where, fd,
						   &why);

			if (deadlines && ok && seq) {
				/* Admitted after a wait: its deadline counts
				 * from now, as its start does. */
				rx__lock(l);
				*seq = rx__deadline_push(slot, *now, permit, owner);
				rx__unlock(l);
			}
			errno = saved;
			return ok;
		}
		if (deadlines && d == RX_ADMIT && seq) {
			rx__lock(l);
			*seq = rx__deadline_push(slot, *now, permit, owner);
			rx__unlock(l);
		}
		errno = saved;
		if (d == RX_ADMIT)
			return true;
	}
	log_refused(g, &why, where, 0);
	/* Slots a dead process holds may be what refused this call: give
	 * them back (at most twice a second host-wide; system calls, on a
	 * refusal only). */
	if (rx__shared_on)
		rx__shared_sweep(*now, false);
	/* A refusal storm changes the refusal counters the most: let it
	 * drive the metrics file too (no lock held here). */
	if (rx__metrics_on)
		rx__metrics_tick(*now, false);
	return false;
}

/* With RESILIX_TIMEOUT_MS set: admit_impl with the deadlines' work
 * (ADR-382), apart, so the path without it stays as it was. */
static __attribute__((noinline)) bool
admit_deadlined(struct rx_guard *g, uint64_t *now,
		struct rx_gate_permit *permit, const char *where, int fd,
		bool dontwait, const void *owner, uint16_t *seq)
{
	return admit_impl(g, now, permit, where, fd, dontwait, true, owner,
			  seq, false);
}

bool rx__admit(struct rx_guard *g, uint64_t *now, struct rx_gate_permit *permit,
	       const char *where, int fd, bool dontwait)
{
	if (__builtin_expect(rx__deadlines_on, 0))
		return admit_deadlined(g, now, permit, where, fd, dontwait,
				       NULL, NULL);
	return admit_impl(g, now, permit, where, fd, dontwait, false, NULL,
			  NULL, false);
}

bool rx__admit_call(struct rx_guard *g, uint64_t *now,
		    struct rx_gate_permit *permit, const char *where, int fd,
		    bool dontwait, const void *owner, uint16_t *seq)
{
	*seq = 0;
	if (__builtin_expect(rx__deadlines_on, 0))
		return admit_deadlined(g, now, permit, where, fd, dontwait,
				       owner, seq);
	return admit_impl(g, now, permit, where, fd, dontwait, false, NULL,
			  NULL, false);
}

bool rx__admit_queued(struct rx_guard *g, uint64_t *now,
		      struct rx_gate_permit *permit, const char *where, int fd,
		      bool dontwait)
{
	return admit_impl(g, now, permit, where, fd, dontwait, false, NULL,
			  NULL, true);
}

void rx__key_count_refusal(struct rx_guard *g, enum rx_reason reason)
{
	/* Uncached: the retry layer may count with rx__inside clear. */
	struct rx_lock *l = guard_lock_uncached(g);

	rx__lock(l);
	rx_guard_count_refusal(g, reason);
	rx__unlock(l);
}

/*
 * Has @g's limit moved since it was last logged, and may it be logged now
 * (at most once per LIMIT_LOG_NS per key, ADR-138)? Then fills @ls. A
 * key starts from its initial limit. Caller holds @g's lock. O(1); a
 * load and a compare when nothing moved.
 */
static bool limit_changed(struct rx_guard *g, uint64_t now,
			  struct rx_limiter_stats *ls)
{
	struct key_wait *kw;
	uint32_t limit;

	if (!g->limiter_on || !rx__log_enabled(RX_LOG_INFO))
		return false;
	kw = key_wait_of(g);
	limit = (uint32_t)g->limiter.limit;
	if (kw->logged_limit == 0)
		kw->logged_limit = g->limiter.cfg.initial_limit;
	if (limit == kw->logged_limit)
		return false;
	if (kw->logged_ns != 0 && now - kw->logged_ns < LIMIT_LOG_NS)
		return false;
	rx_limiter_stats(&g->limiter, now, ls);
	kw->logged_limit = limit;
	kw->logged_ns = now;
	return true;
}

/*
 * settle with every hook that may be on: breaker transitions and limit
 * changes (log level info), the debug line, the metrics file.
 */
static __attribute__((noinline)) void
settle_hooked(struct rx_guard *g, const struct rx_gate_permit *permit,
	      enum rx_verdict v, uint64_t start_ns, uint64_t end_ns,
	      uint64_t now, const char *at, const void *owner, uint16_t seq,
	      bool untimed)
{
	unsigned timed_out = 0;
	uint32_t slot = rx_registry_index(registry, g);
	struct rx_observation obs;
	struct rx_lock *l = &guard_locks[slot];
	struct rx_limiter_stats ls;
	uint32_t waiters;
	bool log_limit;
	struct watch w;
	struct rx_shm_mark m = {false, 0, 0, 0, 0, 0, NULL};
	uint64_t measured_us =
	    end_ns > start_ns ? (end_ns - start_ns) / RX_NS_PER_US : 0;

	obs.verdict = v;
	obs.latency_us = untimed ? RX_LATENCY_NONE : measured_us;
	obs.now_ns = now;
	rx__state_touched(); /* this process has something to save */
	rx__lock(l);
	if (seq != 0 && !rx__deadline_claim(slot, owner, seq)) {
		rx__unlock(l);
		rx__settle_skipped(key_of(g), at);
		return;
	}
	rx__watch_begin(&w, g, now);
	rx__shm_mark_begin(&m, g, l - guard_locks);
	(owner ? rx__settle_judging : rx_guard_settle)(g, permit, &obs);
	if (rx__metrics_on)
		rx__metrics_observe(slot, g, &obs);
	if (rx__deadlines_on)
		timed_out = rx__deadline_sweep(g, slot, now);
	rx__shm_mark_end(&m, g);
	rx__watch_end(&w, g, now);
	waiters = rx_guard_waiters(g);
	log_limit = limit_changed(g, now, &ls);
	rx__unlock(l);
	if (waiters > 0)
		wake_waiters(&key_waits[slot]);
	if (timed_out)
		dl_report(g, slot, timed_out, 0);
	/* Checked here, not only in rx__log: the arguments (a registry
	 * lookup for the key) cost more than the check (ADR-146). */
	if (rx__log_enabled(RX_LOG_DEBUG))
		rx__log(RX_LOG_DEBUG,
			"key=%s event=settle verdict=%s latency_us=%llu "
			"at=%s",
			key_of(g), rx_verdict_name(v),
			(unsigned long long)measured_us, at);
	rx__watch_log(&w, key_of(g));
	if (log_limit)
		rx__log_limit_change(key_of(g), &ls);
	if (rx__metrics_on) /* no lock held: it may write the file */
		rx__metrics_tick(now, w.changed);
}

/*
 * Settle @permit on @g: latency end_ns - start_ns, logged with @at. The
 * common case - log below info, no metrics file - is one guard lock round
 * trip around rx_guard_settle, after one branch on a word set at start-up
 * (ADR-185); it does exactly what settle_hooked does with its hooks off.
 * Preserves errno.
 */
static inline __attribute__((always_inline)) void
settle(struct rx_guard *g, const struct rx_gate_permit *permit,
       enum rx_verdict v, uint64_t start_ns, uint64_t end_ns, uint64_t now,
       const char *at, const void *owner, uint16_t seq, bool untimed)
{
	struct rx_observation obs;
	struct rx_lock *l;
	uint32_t waiters;
	struct rx_shm_mark m = {false, 0, 0, 0, 0, 0, NULL};

	/* hooks_on is also set with RESILIX_TIMEOUT_MS: the deadlines are
	 * the hooked path's (ADR-382), and seq is 0 without them. */
	if (hooks_on) {
		settle_hooked(g, permit, v, start_ns, end_ns, now, at, owner,
			      seq, untimed);
		return;
	}
	(void)seq;
	l = guard_lock(g);
	obs.verdict = v;
	obs.latency_us =
	    untimed ? RX_LATENCY_NONE
		    : end_ns > start_ns ? (end_ns - start_ns) / RX_NS_PER_US : 0;
	obs.now_ns = now;
	rx__state_touched(); /* this process has something to save */
	rx__lock(l);
	rx__shm_mark_begin(&m, g, l - guard_locks);
	/* A success that moves no count: the core's one pass (ADR-532). */
	/* A socket's call is judged for its thread's saturation; a
	 * curl_easy_perform (no owner) blocks its caller, no event loop's
	 * (ADR-686). */
	if (v != RX_SUCCESS ||
	    !rx__guard_settle_fast(g, permit, obs.latency_us, now))
		(owner ? rx__settle_judging : rx_guard_settle)(g, permit, &obs);
	rx__shm_mark_end(&m, g);
	waiters = rx_guard_waiters(g);
	rx__unlock(l);
	if (waiters > 0)
		wake_waiters(key_wait_of(g));
}

void rx__key_settle(struct rx_guard *g, const struct rx_gate_permit *permit,
		    enum rx_verdict v, uint64_t start_ns, uint64_t end_ns,
		    uint64_t now, const char *at)
{
	settle(g, permit, v, start_ns, end_ns, now, at, NULL, 0, false);
}

void rx__key_wake(struct rx_guard *g)
{
	wake_waiters(key_wait_of(g));
}

void rx__key_settle_call(struct rx_guard *g,
			 const struct rx_gate_permit *permit, enum rx_verdict v,
			 uint64_t start_ns, uint64_t end_ns, uint64_t now,
			 const char *at, const void *owner, uint16_t seq,
			 bool untimed)
{
	settle(g, permit, v, start_ns, end_ns, now, at, owner, seq, untimed);
}

/* ------------------------------------------------------------------------
 * Keys for the curl layer.
 * ---------------------------------------------------------------------- */

bool rx__key_admit(struct rx_guard *g, uint64_t now,
		   struct rx_gate_permit *permit, struct rx_refusal *why,
		   const char *where)
{
	/* No fd: curl_easy_perform blocks, so it may wait in the limiter's
	 * queue like a blocking socket (ADR-136, ADR-152). */
	last_refusal.reason = RX_REASON_NONE;
	last_refusal.retry_after_ms = 0;
	if (rx__admit(g, &now, permit, where, -1, false))
		return true;
	/* Why, for the program's error message: the refusal just logged. */
	*why = last_refusal;
	return false;
}

/* ------------------------------------------------------------------------
 * Start-up and fork.
 * ---------------------------------------------------------------------- */

/* An array of one @size-byte element per registry slot, zeroed, never
 * freed (start-up). NULL when it cannot be mapped. */
static void *map_per_key(size_t size)
{
	void *p =
	    mmap(NULL, (size_t)rx__cfg.registry.max_keys * size,
		 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

int rx__admit_setup(const char **what)
{
	struct rx_shm_view v;
	int rc;

	if (!rx__fifo_setup(rx__cfg.registry.max_keys))
		return RX_ENOMEM; /* ADR-383 */
	/* Per process in both modes (ADR-382, ADR-491). */
	if (rx__cfg.timeout_ms > 0 &&
	    !rx__deadline_setup(rx__cfg.registry.max_keys)) {
		*what = "cannot map the key locks";
		return RX_ENOMEM;
	}
	/* RESILIX_SHARED: the registry, its locks and the wait words live
	 * in the segment; refused or unset, in this process (ADR-480). */
	if (rx__shared_setup(&rx__cfg, sizeof(struct key_wait), &v) == 1) {
		registry = v.registry;
		registry_lock = v.registry_lock;
		guard_locks = v.guard_locks;
		key_waits = v.waits;
		futex_private = 0;
		return RX_OK;
	}
	guard_locks = map_per_key(sizeof(struct rx_lock));
	key_waits = map_per_key(sizeof(struct key_wait));
	if (!guard_locks || !key_waits) {
		*what = "cannot map the key locks";
		return RX_ENOMEM;
	}
	rc = rx_registry_create(&registry, &rx__cfg.registry, &rx__cfg.guard);
	if (rc != RX_OK)
		*what = "cannot create the key registry";
	return rc;
}

void rx__admit_hooks(bool on)
{
	hooks_on = on || rx__deadlines_on;
	rx__ka_on = !hooks_on; /* ADR-531, ADR-492 */
}

struct rx_registry *rx__admit_registry(void)
{
	return registry;
}

struct rx_lock *rx__admit_registry_lock(void)
{
	return registry_lock;
}

struct rx_lock *rx__admit_guard_locks(void)
{
	return guard_locks;
}

void rx__admit_lock_all(void)
{
	uint32_t i;

	/* Shared: the child copies no registry, so only the registry lock
	 * is taken - to read this process's pins, which the child's
	 * inherited connections hold too. */
	if (!rx__shared_on)
		for (i = 0; i < rx__cfg.registry.max_keys; i++)
			rx__lock(&guard_locks[i]);
	rx__lock(registry_lock);
	rx__shared_before_fork();
}

void rx__admit_unlock_all(void)
{
	uint32_t i;

	rx__unlock(registry_lock);
	if (!rx__shared_on)
		for (i = 0; i < rx__cfg.registry.max_keys; i++)
			rx__unlock(&guard_locks[i]);
}

/* A forked child: drop the limiter places of threads that did not come
 * along (ADR-136). */
static void drop_waiters(void *arg, const char *key, struct rx_guard *g)
{
	(void)arg;
	(void)key;
	rx_guard_drop_waiters(g);
	rx__fifo_drop(rx_registry_index(registry, g));
}

void rx__admit_after_fork_child(void)
{
	uint32_t i;

	/* Shared locks are the host's: the parent releases the one it took,
	 * and others may hold the rest. The child takes a slot of its own. */
	if (rx__shared_on) {
		rx__shared_after_fork_child();
		rx__deadline_forget(); /* the parent's calls, not ours */
		return;
	}
	/* Held or not, every lock is free in the child: a lock held by a
	 * thread that did not come along would never be released. */
	rx__lock_reset(registry_lock);
	for (i = 0; i < rx__cfg.registry.max_keys; i++)
		rx__lock_reset(&guard_locks[i]);
	rx__keypin_after_fork_child(registry);
}

void rx__admit_drop_waiters(void)
{
	/* Shared: the places are the parent's threads', still waiting. */
	if (rx__shared_on)
		return;
	rx_registry_foreach(registry, drop_waiters, NULL);
}
