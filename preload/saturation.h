/*
 * preload/saturation.h - is the thread that settles a window's calls its
 * own bottleneck (ADR-686)? An event loop settles every call it makes on
 * its one thread, and the latency the shim measures ends when the program
 * reads the answer: a loop on its CPU all the time reads each answer late
 * by its own lag, which grows with the calls it runs as an upstream queue
 * would. So where a settlement may close the limiter's window - the
 * general settlement only; the fast one declines there (ADR-532) - the
 * thread's CPU time over the wall time since its previous reading says
 * whether the window's latency is the caller's, and the core is told.
 */
#ifndef RESILIX_PRELOAD_SATURATION_H
#define RESILIX_PRELOAD_SATURATION_H

#include <stdbool.h>
#include <stdint.h>

#include "base.h"
#include "guard-inl.h"
#include "resilix/guard.h"

/*
 * Has this thread been on its CPU at least RX_SATURATED_PERMILLE of the
 * wall time since its previous reading, as of @now_ns (monotonic)? One
 * clock_gettime(CLOCK_THREAD_CPUTIME_ID), which neither blocks nor is
 * interposed; none when the previous reading is younger than
 * RX_SATURATED_MIN_MS (its answer is kept). False at a thread's first
 * reading and when the clock fails. Thread-local; no allocation.
 */
#define RX_SATURATED_PERMILLE 800
#define RX_SATURATED_MIN_MS 50
bool rx__caller_saturated(uint64_t now_ns) RX_HIDDEN;

/*
 * rx_guard_settle, with the caller judged first where @obs may close the
 * limiter's window (a few loads otherwise): rx__settle_judging, out of
 * line, and rx__settle_judged inline for the kept-alive settlement, whose
 * general step then costs nothing more until the window is due. Under the
 * guard's lock.
 */
void rx__settle_judging(struct rx_guard *g, const struct rx_gate_permit *permit,
			const struct rx_observation *obs) RX_HIDDEN;

static inline void rx__settle_judged(struct rx_guard *g,
				     const struct rx_gate_permit *permit,
				     const struct rx_observation *obs)
{
	if (__builtin_expect(rx__guard_limiter_window_due(g, obs->now_ns), 0))
		rx__settle_judging(g, permit, obs);
	else
		rx_guard_settle(g, permit, obs);
}

#endif
