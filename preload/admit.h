/*
 * preload/admit.h - admission and settlement (admit.c): the key registry,
 * its locks, the wait for a limiter slot, and the log lines of breaker
 * transitions and limit changes. The call state machine (call.c) and the
 * curl layer (curl.c) reach the policy core only through here, so a key
 * guarded by both layers is one key.
 *
 * Callers set rx__inside around these (a signal handler on the thread
 * must not re-enter a lock they hold) and never hold a lock of their own
 * across them. Each is thread-safe and O(1) but for the wait; none
 * allocates.
 */
#ifndef RESILIX_PRELOAD_ADMIT_H
#define RESILIX_PRELOAD_ADMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guard-inl.h"
#include "lock.h"
#include "resilix.h"
#include "runtime.h"
#include "saturation.h"
#include "shared.h"
#include "shim_config.h"
#include "state.h"

/*
 * rx__permit_copy - copy a permit's tickets, not its whole array: a permit
 * has room for RX_GATE_MAX_POLICIES tickets (132 bytes) and a call holds
 * one per policy that is on, usually two. The core reads no ticket at or
 * past count (ADR-185). Inline: it runs at every call's start and end.
 */
static inline void rx__permit_copy(struct rx_gate_permit *dst,
				   const struct rx_gate_permit *src)
{
	uint32_t n = src->count < RX_GATE_MAX_POLICIES ? src->count
						       : RX_GATE_MAX_POLICIES;
	uint32_t i;

	/* The default policies' two tickets first: one compare. */
	if (__builtin_expect(n == 2, 1)) {
		dst->count = 2;
		dst->tickets[0] = src->tickets[0];
		dst->tickets[1] = src->tickets[1];
		return;
	}
	dst->count = n;
	/* The usual one to three tickets by hand (the third: a shared
	 * key's shares, ADR-490): the compiler would turn the loop into a
	 * memmove call. */
	if (n > 0)
		dst->tickets[0] = src->tickets[0];
	if (n > 1)
		dst->tickets[1] = src->tickets[1];
	if (n > 2)
		dst->tickets[2] = src->tickets[2];
	if (n > 3)
		for (i = 3; i < n; i++)
			dst->tickets[i] = src->tickets[i];
}

/* ---- keys ------------------------------------------------------------ */

/* Pin the guard of @key (@len bytes; NULL: registry full, pass through,
 * with one warning per process) / unpin it. The _hashed form takes the
 * key's rx_registry_hash, known already (dest.h's memo). In keypin.c: a
 * thread keeps the last pin it gave back for its next acquire of the same
 * key (ADR-546). Thread-safe; O(1). */
struct rx_guard *rx__key_acquire_hashed(const char *key, size_t len,
					uint32_t hash, uint64_t now_ns);
void rx__key_release(struct rx_guard *g);

/* rx__key_unpin - give pin @g back to the registry at once, never to
 * the thread's slot: a kept pin rx__key_kept (keypin.h) took back and
 * found stale. Thread-safe; O(1). */
void rx__key_unpin(struct rx_guard *g);

static inline struct rx_guard *rx__key_acquire(const char *key, size_t len,
					       uint64_t now_ns)
{
	return rx__key_acquire_hashed(key, len, rx_registry_hash(key, len),
				      now_ns);
}

/* rx__key_name - the key of pinned guard @g (NUL-terminated, valid while
 * pinned). */
const char *rx__key_name(struct rx_guard *g);

/* ---- admission ------------------------------------------------------- */

/*
 * rx__admit - may a call on @g start at *@now on @fd (-1: none, a
 * blocking caller such as libcurl's perform)? @dontwait: the caller asked
 * not to block (MSG_DONTWAIT). Where the limiter would queue the call, a
 * blocking caller waits for its turn (ADR-136): at most
 * RESILIX_QUEUE_TIMEOUT_MS, and RESILIX_TIMEOUT_MS or the program's own
 * SO_SNDTIMEO when shorter (ADR-223), sleeping on a per-key futex word
 * with no lock held and rx__inside left set; a non-blocking caller is
 * refused where it would queue. Returns true with @permit filled and
 * *@now the admission time (later than on entry when the call waited:
 * the wait is not the upstream's latency); false when refused (logged at
 * debug with @where; rx__refusal_errno says which errno). Preserves errno.
 */
bool rx__admit(struct rx_guard *g, uint64_t *now, struct rx_gate_permit *permit,
	       const char *where, int fd, bool dontwait);

/*
 * rx__admit_call - rx__admit for a call of the socket layer, whose end
 * settles with rx__key_settle_call: with RESILIX_TIMEOUT_MS set, the
 * admission also arms the call's deadline on the key (ADR-382) and *@seq
 * names it (0: none armed - no deadline configured, the key's ring full,
 * or refused); @owner is what holds the call (its fd record), which has
 * at most one call armed at a time. Once the deadline passes, the next admission or settlement
 * on the key settles the call as a timeout.
 */
bool rx__admit_call(struct rx_guard *g, uint64_t *now,
		    struct rx_gate_permit *permit, const char *where, int fd,
		    bool dontwait, const void *owner, uint16_t *seq);

/*
 * rx__admit_queued - rx__admit_call without a deadline (rx__ka_on) for a
 * call whose first decision, asked under @g's lock with a caller that may
 * wait, was RX_QUEUE and changed nothing (rx__key_admit_kept): decides
 * again with the caller's real ability to wait, and waits or refuses, as
 * rx__admit_call does from that point (ADR-575), so that a blocking
 * caller is asked twice, never three times (the limiter's shedding band
 * draws at each ask).
 */
bool rx__admit_queued(struct rx_guard *g, uint64_t *now,
		      struct rx_gate_permit *permit, const char *where, int fd,
		      bool dontwait);

/*
 * rx__refusal_errno - the errno for the refusal just returned on this
 * thread: ECONNREFUSED, or EINTR when a signal ended a send's wait for a
 * limiter slot and the real send would have failed with EINTR (ADR-223).
 * Read it once per refusal (it resets). Thread-safe (per thread), O(1).
 */
int rx__refusal_errno(void);

/*
 * rx__key_admit - rx__admit for the curl layer: no fd, so it may wait like
 * a blocking socket (ADR-136, ADR-152). false: refused; @why says why as
 * far as the breaker knows (circuit open with the ms until half-open,
 * half-open busy, or RX_REASON_NONE for a refusal by another policy).
 */
bool rx__key_admit(struct rx_guard *g, uint64_t now,
		   struct rx_gate_permit *permit, struct rx_refusal *why,
		   const char *where);

/*
 * rx__jumped - this thread is about to longjmp/siglongjmp (jump.c),
 * perhaps out of a wrapped call a signal interrupted: clear rx__inside and
 * give up a limiter place the thread waits in (a try of the guard's lock;
 * the place stays taken when the lock is held) - unless the thread holds
 * or is taking a shim lock, which the jump orphans: then it keeps passing
 * every call through. Async-signal-safe: no allocation, no blocking lock,
 * one futex wake (ADR-226).
 */
void rx__jumped(void);

/* rx__key_count_refusal - count a refusal of @g by @reason that no policy
 * of the guard made (a retry the budget refused), for the metrics. */
void rx__key_count_refusal(struct rx_guard *g, enum rx_reason reason);

/* ---- settlement ------------------------------------------------------ */

/*
 * rx__key_settle - settle @permit on @g with @v: latency end_ns - start_ns,
 * at @now_ns, logged with @at. Wakes the key's waiters. The common case -
 * log below info, no metrics file - is one guard lock round trip around
 * rx_guard_settle (ADR-185); with hooks on it also logs transitions and
 * limit changes and drives the metrics file. Preserves errno.
 */
void rx__key_settle(struct rx_guard *g, const struct rx_gate_permit *permit,
		    enum rx_verdict v, uint64_t start_ns, uint64_t end_ns,
		    uint64_t now_ns, const char *at);

/*
 * rx__key_settle_call - rx__key_settle for the call rx__admit_call armed
 * as @seq for @owner (0: as rx__key_settle): when its deadline passed and it was
 * settled as a timeout already, this settles nothing - the answer is no
 * further evidence and nothing is released twice (ADR-382). @untimed: the
 * call waited on purpose, its duration is no latency (RX_LATENCY_NONE,
 * ADR-650; the debug line still shows it).
 */
void rx__key_settle_call(struct rx_guard *g,
			 const struct rx_gate_permit *permit, enum rx_verdict v,
			 uint64_t start_ns, uint64_t end_ns, uint64_t now,
			 const char *at, const void *owner, uint16_t seq,
			 bool untimed);

/* ---- the kept-alive cycle's fast path (keepalive.c, ADR-531) ---------- */

/*
 * rx__ka_on - no settlement hook (log below info, no metrics file) and no
 * deadline (RESILIX_TIMEOUT_MS unset); a shared segment is no obstacle
 * (ADR-492): the process-wide half of the fast path's one test. Set at start-up with the
 * hooks (rx__admit_hooks), read-only afterwards.
 */
extern bool rx__ka_on RX_HIDDEN;

/*
 * rx__key_lock - the guard lock of @g. A guard's slot never changes
 * (registry.h), so a one-entry cache per thread maps it without the
 * registry's index - the keys a thread uses back to back are mostly one
 * (ADR-531); rx__key_lock_miss fills it. Only with rx__inside set, as
 * every admission and settlement runs: no signal handler's call on the
 * thread then reaches the cache between its two loads (ADR-226). O(1).
 */
#define rx__key_lock_g (rx__thread.key_lock_g)
#define rx__key_lock_l (rx__thread.key_lock_l)
struct rx_lock *rx__key_lock_miss(struct rx_guard *g);

static inline struct rx_lock *rx__key_lock(struct rx_guard *g)
{
	if (__builtin_expect(rx__key_lock_g == g, 1))
		return rx__key_lock_l;
	return rx__key_lock_miss(g);
}

/* The key slot of guard lock @l, for the shared segment's hold row: read
 * only with a segment (rx__shm_mark_begin ignores it otherwise). */
struct rx_lock *rx__admit_guard_locks(void);
static inline ptrdiff_t rx__key_slot(const struct rx_lock *l)
{
	return __builtin_expect(rx__shared_on, 0) ? l - rx__admit_guard_locks()
						  : 0;
}

/* rx__key_wake - wake @g's waiters (a settlement found some). */
void rx__key_wake(struct rx_guard *g);

/*
 * rx__key_admit_fast - admit a call on @g at @now (the caller's clock
 * read; no wait, no deadline) when the guard's common case holds
 * (rx_guard_admit_fast): true with @permit filled. false: nothing
 * changed; ask rx__admit_call. With a shared segment, in this process's
 * bucket and tenant, and what it takes goes to its hold row (ADR-492).
 * One guard lock round trip; O(1). Inline.
 */
static inline bool rx__key_admit_fast(struct rx_guard *g, uint64_t now,
				      struct rx_gate_permit *permit)
{
	struct rx_lock *l = rx__key_lock(g);
	struct rx_shm_mark m;
	bool ok;

	rx__lock(l);
	rx__shm_mark_begin(&m, g, rx__key_slot(l));
	if (__builtin_expect(g->shares_on, 0)) {
		struct rx_admit_ctx ctx = {.now_ns = now, RX_SHM_CTX};

		ok = rx_guard_admit_fast(g, &ctx, permit);
	} else {
		ok = rx__guard_admit_fast(g, now, permit);
	}
	rx__shm_mark_end(&m, g);
	rx__unlock(l);
	return ok;
}

/*
 * rx__key_admit_kept - the admission of a connect on @g, a pin this
 * thread kept (keypin.c, ADR-546) and took back for the same key, at
 * @now (the caller's clock read), with rx__ka_on (ADR-575): under one
 * hold of the guard's lock, the kept pin's freshness (the key used
 * within its idle TTL, as rx__key_acquire_hashed asks) and the
 * admission itself - rx_guard_admit_fast for the common case, else, for
 * a guard of the default policies (breaker and limiter only, which no
 * line of token or slot waiters holds, ADR-383), rx_guard_admit with a
 * caller that may wait. Returns RX_KEPT_ADMIT (@permit filled; no
 * deadline armed, none is on), RX_KEPT_REFUSE (refused and counted, as
 * rx__admit_call would; rx__refusal_errno says ECONNREFUSED),
 * RX_KEPT_STALE (nothing changed: the key idled past its TTL - give the
 * pin back and acquire afresh), RX_KEPT_QUEUE (rx_guard_admit said
 * RX_QUEUE: go on with rx__admit_queued) or RX_KEPT_ASK (nothing asked
 * but the fast admission: ask rx__admit_call). A kept pin is never in
 * shared mode, so no hold row is marked. One guard lock round trip; O(1).
 */
enum rx_kept_admission {
	RX_KEPT_ADMIT,
	RX_KEPT_REFUSE,
	RX_KEPT_STALE,
	RX_KEPT_QUEUE,
	RX_KEPT_ASK
};

static inline __attribute__((always_inline)) enum rx_kept_admission
rx__key_admit_kept(struct rx_guard *g, uint64_t now,
		   struct rx_gate_permit *permit)
{
	uint64_t ttl = rx__cfg.registry.key_ttl_ms, last;
	struct rx_lock *l = rx__key_lock(g);
	enum rx_kept_admission k = RX_KEPT_ASK;

	rx__lock(l);
	last = g->last_used_ns;
	if (ttl != 0 && now >= last && now - last >= ttl * RX_NS_PER_MS) {
		k = RX_KEPT_STALE;
	} else if (__builtin_expect(rx__guard_admit_fast(g, now, permit), 1)) {
		k = RX_KEPT_ADMIT; /* rx_guard_admit_fast, inline (ADR-605) */
	} else {
		/* The context only here: with shares (which need it), or
		 * for the general admission of the default policies. */
		struct rx_admit_ctx ctx = {
		    .now_ns = now, .can_wait = true, RX_SHM_CTX};
		struct rx_refusal why;

		if (g->shares_on && rx_guard_admit_fast(g, &ctx, permit)) {
			k = RX_KEPT_ADMIT;
		} else if (g->plain) {
			ctx.rng = rx__thread_rng();
			switch (rx_guard_admit(g, &ctx, permit, &why)) {
			case RX_ADMIT:
				k = RX_KEPT_ADMIT;
				break;
			case RX_REFUSE:
				k = RX_KEPT_REFUSE;
				break;
			default: /* RX_QUEUE */
				k = RX_KEPT_QUEUE;
				break;
			}
		}
	}
	rx__unlock(l);
	return k;
}

/*
 * rx__key_settle_fast - rx__key_settle_call with rx__ka_on: no deadline
 * to claim, no hook - settle()'s common case (admit.c), inline, through
 * rx_guard_settle_fast first, with the shared segment's hold row kept as
 * settle() keeps it. Preserves errno.
 */
static inline void rx__key_settle_fast(struct rx_guard *g,
				       const struct rx_gate_permit *permit,
				       enum rx_verdict v, uint64_t start_ns,
				       uint64_t end_ns, uint64_t now)
{
	struct rx_lock *l = rx__key_lock(g);
	uint64_t latency_us =
	    end_ns > start_ns ? (end_ns - start_ns) / RX_NS_PER_US : 0;
	struct rx_shm_mark m;
	uint32_t waiters;

	rx__state_touched(); /* this process has something to save */
	rx__lock(l);
	rx__shm_mark_begin(&m, g, rx__key_slot(l));
	/* A success that moves no count: the core's fast settlement, which
	 * changes nothing when its case does not hold (ADR-532). */
	if (!__builtin_expect(v == RX_SUCCESS &&
				  rx__guard_settle_fast(g, permit, latency_us,
							now),
			      1)) {
		struct rx_observation obs = {v, latency_us, now};

		rx__settle_judging(g, permit, &obs); /* ADR-686 */
	}
	rx__shm_mark_end(&m, g);
	waiters = rx_guard_waiters(g);
	rx__unlock(l);
	if (__builtin_expect(waiters > 0, 0))
		rx__key_wake(g);
}

/* ---- start-up and fork (init.c) --------------------------------------- */

/* rx__admit_setup - create the registry and its per-key locks and wait
 * words from the configuration in force. RX_OK, or the error (with
 * *@what naming what failed). Start-up only. */
int rx__admit_setup(const char **what);

/* rx__admit_hooks - settlements log at info/debug or feed the metrics
 * file: take the hooked path (start-up, once the log and metrics are). */
void rx__admit_hooks(bool on);

/* The registry and its locks, for the metrics writer and the state file,
 * which take them one at a time (start-up). */
struct rx_registry *rx__admit_registry(void);
struct rx_lock *rx__admit_registry_lock(void);

/* Fork: take every lock (prepare), drop them (parent), or free them
 * whoever held them and drop the limiter places of threads that did not
 * come along (child, ADR-136). */
void rx__admit_lock_all(void);
void rx__admit_unlock_all(void);
void rx__admit_after_fork_child(void);
void rx__admit_drop_waiters(void);

#endif
