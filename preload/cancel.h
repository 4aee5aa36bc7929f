/*
 * preload/cancel.h - the process's own cancels: a small lock-free ring of
 * the keys its recent cancel requests named (a PostgreSQL CancelRequest's
 * backend process ID and secret), so that the answer which then ends the
 * cancelled call reads as the program giving the call up, not as a
 * timeout (ADR-676).
 *
 * Async-signal-safe: psql sends its CancelRequest from its SIGINT handler,
 * so noting one takes no lock and calls nothing (atomic loads, stores and
 * one fetch-add on 64-bit words, lock-free on every target we build for).
 * Per process, no allocation: 16 entries in .bss. A key is taken once: one
 * cancel excuses one cancelled answer, within RX_CANCEL_BOUND_NS.
 */
#ifndef RESILIX_PRELOAD_CANCEL_H
#define RESILIX_PRELOAD_CANCEL_H

#include <stdbool.h>
#include <stdint.h>

/* How long after its cancel a cancelled answer is still the program's
 * own: the server acts on a cancel at its next interrupt check, within
 * milliseconds for a running query (ADR-676). */
#define RX_CANCEL_BOUND_NS (5 * UINT64_C(1000000000))

/*
 * rx__cancel_note - the program sent a cancel naming @key (nonzero; 0 is
 * ignored) at @now_ns (monotonic). Overwrites the oldest entry. Thread-
 * and async-signal-safe; O(1).
 */
void rx__cancel_note(uint64_t key, uint64_t now_ns);

/*
 * rx__cancel_take - was a cancel naming @key (nonzero) noted at most
 * RX_CANCEL_BOUND_NS before @now_ns (monotonic; a note later than @now_ns
 * counts as now)? true takes the entry, so that it excuses one answer
 * only; false leaves the ring as it was. Thread- and async-signal-safe;
 * O(16).
 */
bool rx__cancel_take(uint64_t key, uint64_t now_ns);

#endif
