/*
 * preload/runtime.h - the bottom of the shim (runtime.c): the clock, the
 * process that owns the state, per-thread randomness, the per-thread
 * flags (inside the shim, inside a curl transfer), readiness, and the
 * configuration in force. Every other file may use it; it uses none of
 * them.
 *
 * Time and randomness (ADR-005, ADR-016, ADR-173). The monotonic clock is
 * read at most twice per operation and handed to the core as now_ns.
 * Randomness comes from a per-thread SplitMix64 generator seeded from
 * pid ^ time at start-up, mixed with the thread's identity, reseeded in a
 * forked child.
 *
 * Fork. atfork does not run for vfork, posix_spawn, _Fork or a raw clone:
 * such a child has a new pid but the parent's memory (vfork shares it
 * outright), so any process whose pid is not the one that owns the state
 * passes everything through and touches nothing (it usually execs at once,
 * and an exec'd program loads a fresh shim). The pid is compared only on
 * paths that change state - about three times per call - never on an
 * untracked fd; the request path uses a word the kernel wipes in every
 * forked child instead of the getpid system call (ADR-146).
 *
 * Re-entry. rx__inside is set from the start of a tracked operation to
 * its end (the real call included): a signal handler that calls write,
 * connect or close on this thread while the shim holds a lock, or while
 * it waits in the real send, passes straight through.
 */
#ifndef RESILIX_PRELOAD_RUNTIME_H
#define RESILIX_PRELOAD_RUNTIME_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "lock.h"
#include "resilix/rng.h"
#include "shim_config.h"

/* ---- the per-thread flags ------------------------------------------- */

/* The per-thread "inside the shim" flag. */
#define rx__inside (rx__thread.inside)

/* Set on a thread while it runs libcurl's curl_easy_perform for a transfer
 * the curl layer attributes: the socket layer then passes that thread's
 * connects and new requests through (ADR-152). Set by curl.c. */
#define rx__curl_active (rx__thread.curl_active)

/*
 * The TLS layer on this thread (tls.c, ADR-440). RX_TLS_WATCH while it
 * runs a TLS library call whose socket it does not know yet (a handshake,
 * or the first call of a session): the socket layer then notes in
 * rx__tls_seen_fd the tracked fd the ciphertext goes through, and leaves
 * that record's bytes to the TLS layer. RX_TLS_PLAIN while it hands the
 * call state machine plaintext. RX_TLS_SHAKE while a tied session's
 * handshake runs: its ciphertext reads, like a watched call's, are the
 * program waiting for the server; any other read of a TLS record's
 * ciphertext is the library's, and waits for nothing the shim can judge
 * (ADR-642). 0 otherwise.
 */
enum rx_tls_mode { RX_TLS_NONE = 0, RX_TLS_WATCH, RX_TLS_PLAIN, RX_TLS_SHAKE };
#define rx__tls_mode (rx__thread.tls_mode)
extern RX_TLS int rx__tls_seen_fd;

/*
 * rx__reentered - is this thread already in the shim, so that a call now
 * (from a signal handler) must pass straight through? rx__inside says so,
 * and so does a shim lock this thread holds or is taking: the flag alone
 * can be wrong after a longjmp that stayed inside a handler (ADR-226), a
 * held lock cannot, and taking it again would spin for ever. O(1).
 */
static inline bool rx__reentered(void)
{
	return rx__inside || rx__locks_held;
}

/* ---- readiness and the configuration -------------------------------- */

/* The init-once word (init.c moves it; everything else reads it). */
enum rx_init_state {
	RX_INIT_NONE = 0,
	RX_INIT_RUNNING,
	RX_INIT_READY,
	RX_INIT_OFF
};
extern atomic_int rx__init_state RX_HIDDEN;

/* rx__ready - the shim is initialised and guarding. O(1). */
static inline bool rx__ready(void)
{
	return atomic_load_explicit(&rx__init_state, memory_order_acquire) ==
	       RX_INIT_READY;
}

/* The configuration in force: filled by init.c before the shim is ready,
 * read-only afterwards. */
extern struct rx_config rx__cfg RX_HIDDEN;

static inline const struct rx_config *rx__config(void)
{
	return &rx__cfg;
}

/* ---- the clock ------------------------------------------------------- */

/*
 * The monotonic clock in ns, plus RX_CLOCK_OFFSET_NS (ADR-173): every time
 * the core sees is this one. A snapshot hydrated from RESILIX_STATE_FILE
 * places its ages against now_ns, and the core clamps an age older than
 * the clock; just after boot the raw clock is younger than an hour-old
 * window. The offset (2^62 ns, 146 years; 2^64 is 584) keeps every age
 * whole. Nothing in the shim uses the raw value: only differences, and
 * the core. Thread-safe, async-signal-safe; one vDSO call.
 */
#define RX_CLOCK_OFFSET_NS (UINT64_C(1) << 62)

static inline __attribute__((always_inline)) uint64_t rx__now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return RX_CLOCK_OFFSET_NS;
	return (uint64_t)ts.tv_sec * UINT64_C(1000000000) +
	       (uint64_t)ts.tv_nsec + RX_CLOCK_OFFSET_NS;
}

/* ---- the owner process ----------------------------------------------- */

/* rx__owner - is this process the one whose state we hold? A system call
 * (glibc does not cache the pid): used where state is dropped (close,
 * close_range, a reconnect), which a vfork child may reach. */
extern pid_t rx__owner_pid RX_HIDDEN;

static inline bool rx__owner(void)
{
	return getpid() == rx__owner_pid;
}

/* The word behind rx__owner_fast, or NULL (runtime.c). */
extern _Atomic uint32_t *rx__fork_word RX_HIDDEN;

/*
 * rx__owner_fast - the request path's owner check (ADR-146): a word in a
 * page advised MADV_WIPEONFORK, which the kernel zeroes in every forked
 * child, with or without atfork (_Fork, a raw clone), and which the child
 * handler sets again. A load instead of a getpid system call twice per
 * request. A vfork or CLONE_VM child shares the page and passes this
 * check; the paths it guards (admission on a kept-alive write, settlement
 * at the first byte) are not ones such a child reaches before it execs,
 * and the paths that drop state keep rx__owner. Without the advice (an
 * old kernel), rx__owner.
 */
static inline bool rx__owner_fast(void)
{
	_Atomic uint32_t *w =
	    atomic_load_explicit(&rx__fork_word, memory_order_relaxed);

	if (w)
		return atomic_load_explicit(w, memory_order_relaxed) != 0;
	return rx__owner();
}

/* ---- randomness ------------------------------------------------------ */

extern uint64_t rx__rng_seed RX_HIDDEN;
extern atomic_uint rx__rng_epoch RX_HIDDEN; /* bumped in a forked child */
extern RX_TLS struct rx_rng rx__tls_rng;
extern RX_TLS unsigned rx__tls_rng_epoch;

/* rx__thread_rng - this thread's generator, (re)seeded on first use in a
 * thread and after a fork. Not async-signal-safe across a reseed; O(1). */
static inline struct rx_rng *rx__thread_rng(void)
{
	unsigned epoch =
	    atomic_load_explicit(&rx__rng_epoch, memory_order_relaxed);

	if (rx__tls_rng_epoch != epoch) {
		/* The TLS block's address tells threads apart. */
		rx_rng_seed(&rx__tls_rng,
			    rx__rng_seed ^ ((uint64_t)(uintptr_t)&rx__tls_rng *
					    UINT64_C(0x9E3779B97F4A7C15)));
		rx__tls_rng_epoch = epoch;
	}
	return &rx__tls_rng;
}

/* ---- start-up and fork ----------------------------------------------- */

/* rx__runtime_setup - this process owns the state from now on: record
 * its pid, arm the fork word, seed the generators. Start-up only. */
void rx__runtime_setup(void);

/* rx__runtime_after_fork_child - a forked child with atfork: the child
 * owns its copy now (new pid, fork word set again, generators reseeded)
 * and is inside nothing. The last step of the child handler. */
void rx__runtime_after_fork_child(void);

#endif
