/*
 * preload/deadline.h - outstanding deadlines (ADR-382, deadline.c): a
 * per-key FIFO of the calls admitted under RESILIX_TIMEOUT_MS, so that a
 * call past its deadline is a timeout from the moment it passes. Every
 * function but the setup runs under the key's guard lock.
 */
#ifndef RESILIX_PRELOAD_DEADLINE_H
#define RESILIX_PRELOAD_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/gate.h"
#include "resilix/guard.h"

/* True once rx__deadline_setup succeeded (RESILIX_TIMEOUT_MS set; the
 * rings are per process, with or without a shared segment: ADR-491);
 * read-only after start-up but for a shared-mode child's forget. */
extern bool rx__deadlines_on;

/* rx__deadline_setup - map one ring per registry slot (@max_keys of them;
 * untouched pages cost nothing). Start-up only; false when it cannot be
 * mapped. */
bool rx__deadline_setup(uint32_t max_keys);

/* rx__deadline_forget - a forked child of a shared-segment process
 * (ADR-491): drop every entry of its copy of the rings, which are its
 * parent's calls on guards both still share - the parent settles them;
 * the child's inherited records then find their entries gone and settle
 * nothing. One madvise; no lock held (the child's only thread). */
void rx__deadline_forget(void);

/* rx__deadline_push - arm a deadline of now + RESILIX_TIMEOUT_MS for the
 * call @permit admitted on slot @slot at @now (ns), owned by @owner (the
 * call's fd record). Returns its sequence number, or 0 when the ring is
 * full (nothing armed: the call is judged at its own end). O(1). */
uint16_t rx__deadline_push(uint32_t slot, uint64_t now,
			   const struct rx_gate_permit *permit,
			   const void *owner);

/* rx__deadline_claim - the call of @seq ends on its own: take its entry
 * out. false: the entry is gone, the call was settled as a timeout when
 * its deadline passed (its answer is then no evidence). O(1). */
bool rx__deadline_claim(uint32_t slot, const void *owner, uint16_t seq);

/* rx__deadline_rearm - the call of @owner, armed as *@seq on @g, starts
 * its clock again at @now (ns): its request's first write (ADR-384). Its
 * entry moves to the back with a deadline from @now; *@seq becomes the
 * new sequence number (0: the ring was full, the call is judged at its
 * own end). Takes @g's guard lock: call it holding no lock. */
void rx__deadline_rearm(struct rx_guard *g, const void *owner,
			uint16_t *seq, uint64_t now);

/* rx__deadline_disarm - the call of @owner, armed as @seq (not 0) on @g,
 * has no deadline after all: it waits on purpose (ADR-650). Its entry is
 * taken out: true. false when the entry is gone - the deadline passed and
 * the sweep settled the call with the permit it armed, limiter slot
 * included, so that nothing of it may be given back again (ADR-660).
 * The caller took @seq off the record, so that the call's own end claims
 * nothing meanwhile. Takes @g's guard lock: call it holding no lock. */
bool rx__deadline_disarm(struct rx_guard *g, const void *owner, uint16_t seq);

/* rx__deadline_sweep - settle on @g as timeouts, at @now (ns), the calls
 * of slot @slot whose deadline has passed (at most 8), and drop entries
 * their calls settled themselves. Returns how many timed out. */
unsigned rx__deadline_sweep(struct rx_guard *g, uint32_t slot, uint64_t now);

#endif
