/*
 * preload/metrics.h - the shim's Prometheus metrics file (metrics.c).
 *
 * RESILIX_METRICS_FILE names a file that the shim rewrites, atomically (a
 * temporary file in the same directory, then rename), at most every
 * RESILIX_METRICS_INTERVAL_MS when a call settles or is refused, at once
 * when a breaker changes state, and once more at exit (with "%p" in the
 * name, the file is removed at exit instead, ADR-222).
 * No thread and no timer run in the host (docs/design.md section 3): the host's
 * own calls drive the writes. Writing never influences admission
 * (ADR-010): the writer only reads copies of the statistics, and any
 * failure just skips a write. Decisions: ADR-160..ADR-164.
 *
 * Call order (admit.c settles and refuses, init.c sets up and forks):
 *   rx__metrics_setup     once, at start-up (allocates, by mmap);
 *   rx__metrics_observe   under the guard's lock, after rx_guard_settle;
 *   rx__metrics_tick      after a settlement or a refusal, no lock held;
 *   rx__metrics_after_fork in a forked child (atfork child handler),
 *   rx__metrics_forked in the parent (atfork parent handler);
 *   rx__metrics_quick_exit from the _exit wrapper (jump.c).
 * The destructor in metrics.c writes the last file at exit.
 */
#ifndef RESILIX_PRELOAD_METRICS_H
#define RESILIX_PRELOAD_METRICS_H

#include <stdint.h>

#include <stdbool.h>

#include "lock.h"
#include "resilix.h"
#include "shim_config.h"

/* Set by rx__metrics_setup when metrics are on, before the shim is ready;
 * only read afterwards. admit.c tests it before each hook below, so a
 * process without RESILIX_METRICS_FILE pays one predictable branch. */
extern bool rx__metrics_on;

/*
 * rx__metrics_setup - turn metrics on when @cfg names a file. @registry,
 * @registry_lock and @guard_locks are admit.c's (the writer takes them one
 * at a time, never nested, never across a system call). Maps the
 * snapshot and latency arrays (max_keys entries, pages touched lazily) and
 * the 64 KiB format buffer. On failure prints one line and leaves metrics
 * off; guarding goes on. Start-up only, not thread-safe.
 */
void rx__metrics_setup(const struct rx_config *cfg,
		       struct rx_registry *registry,
		       struct rx_lock *registry_lock,
		       struct rx_lock *guard_locks);

/*
 * rx__metrics_observe - feed the latency estimators of guard @g, in slot
 * @index, with one settled call (after rx_guard_settle counted it). Caller
 * holds that guard's lock. Ignores
 * RX_REJECTED (not a call the upstream saw). O(1), no allocation, no
 * system call. A no-op when metrics are off.
 */
void rx__metrics_observe(uint32_t index, const struct rx_guard *g,
			 const struct rx_observation *obs);

/*
 * rx__metrics_tick - a call settled or was refused at @now_ns (monotonic):
 * write the file if the interval has passed, or at once when @changed (a
 * breaker changed state: the file must not show the old state while the
 * program goes quiet, ADR-222), and no other thread is writing (a
 * try-lock: the others skip; a state change found during a write makes
 * that writer write once more). No lock may be held by the caller.
 * Preserves errno. Cost: one atomic load when it is not time; otherwise
 * O(keys) plus the file I/O, on this thread.
 */
void rx__metrics_tick(uint64_t now_ns, bool changed);

/* rx__metrics_after_fork - forked child: free the writer's try-lock and
 * decide whether this process writes (see ADR-161, ADR-222). */
void rx__metrics_after_fork(void);

/* rx__metrics_forked - the parent's side of a fork (atfork parent
 * handler): counts this process's forks. O(1). */
void rx__metrics_forked(void);

/*
 * rx__metrics_quick_exit - the process ends through _exit (no destructors
 * run): with %p, remove this process's file, as a normal exit does
 * (ADR-222). Does nothing in a vfork child or another process whose pid
 * is not the writer's. Preserves errno.
 */
void rx__metrics_quick_exit(void);

#endif
