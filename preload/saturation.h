/*
 * preload/saturation.h - is the thread that settles a window's calls its
 * own bottleneck (ADR-686)? An event loop settles every call it makes on
 * its one thread, and the latency the shim measures ends when the program
 * reads the answer: a loop on its CPU all the time reads each answer late
 * by its own lag, which grows with the calls it runs as an upstream queue
 * would. So where a settlement may close the limiter's window - the
 * general settlement only; the fast one declines there (ADR-532) - the
 * thread's runnable time over the wall time since its previous reading says
 * whether the window's latency is the caller's, and the core is told.
 */
#ifndef RESILIX_PRELOAD_SATURATION_H
#define RESILIX_PRELOAD_SATURATION_H

#include <stdbool.h>
#include <stdint.h>

#include "base.h"
#include "resilix/guard.h"

/*
 * Has this thread been runnable (on a CPU or waiting for one) at least
 * RX_SATURATED_PERMILLE of the wall time since its previous reading, as
 * of @now_ns (monotonic)? A reading is an open, a read and a close of
 * /proc/thread-self/schedstat through the real calls (none blocks or
 * re-enters the shim), or clock_gettime(CLOCK_THREAD_CPUTIME_ID) where
 * that fails; none when the previous reading is younger than
 * RX_SATURATED_MIN_MS (its answer is kept). False at a thread's first
 * reading and when both fail. Thread-local; no allocation.
 */
#define RX_SATURATED_PERMILLE 800
#define RX_SATURATED_MIN_MS 50
bool rx__caller_saturated(uint64_t now_ns) RX_HIDDEN;

/*
 * rx_guard_settle, with the caller judged first where @obs may close the
 * limiter's window (a few loads otherwise). Out of line: inline in the
 * kept-alive settlement's general step, the test cost the round trip
 * instructions it does not run (scripts/bench preload). Under the guard's
 * lock.
 */
void rx__settle_judging(struct rx_guard *g, const struct rx_gate_permit *permit,
			const struct rx_observation *obs) RX_HIDDEN;

#endif
