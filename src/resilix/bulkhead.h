/*
 * resilix/bulkhead.h - a fixed cap on the calls in flight to one key.
 *
 * The simplest of the admission policies (docs/design.md section 2, "The
 * other policies"): at most max_in_flight calls admitted and not yet
 * settled. When all slots are taken, a caller that can wait
 * (ctx->can_wait) is told RX_QUEUE and a caller that cannot is refused;
 * both with reason RX_REASON_BULKHEAD_FULL and retry_after_ms 0 (unknown:
 * a slot frees when some call ends, which no clock predicts).
 *
 * Settlement frees the slot whatever the verdict, RX_REJECTED included:
 * for a counter of calls in flight, "as if never admitted" (ADR-007) is
 * exactly one decrement. The bulkhead reads no verdict as evidence; it
 * learns nothing, unlike the adaptive limiter (limiter.h).
 *
 * Waiting (ADR-004: only the executor waits): after RX_QUEUE the executor
 * sleeps until a settlement on the key (or a short timeout) and calls
 * rx_bulkhead_admit again. There is no queue inside: whoever asks first
 * after a slot frees gets it, so a newcomer may overtake a waiter
 * (resilience4j's semaphore bulkhead is fair by default; ADR-420 says why
 * this one is not, and how the guard keeps waiters in order).
 *
 * Source: resilience4j SemaphoreBulkhead (maxConcurrentCalls, default 25;
 * maxWaitDuration, the executor's queue timeout here). Nothing here
 * allocates, reads a clock or blocks; every function is O(1).
 * Thread safety: none; callers serialise per bulkhead (the shim holds the
 * key's lock around each call, never across a wait).
 */
#ifndef RESILIX_BULKHEAD_H
#define RESILIX_BULKHEAD_H

#include <stdint.h>

#include "resilix/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Configuration. max_in_flight: 1..1000000 calls; default 25
 * (resilience4j BulkheadConfig maxConcurrentCalls, ADR-009). */
struct rx_bulkhead_config {
	uint32_t max_in_flight;
};

/* rx_bulkhead_config_default - fill @cfg with the default above. O(1). */
void rx_bulkhead_config_default(struct rx_bulkhead_config *cfg);

/*
 * rx_bulkhead_config_check - validate a configuration (never clamps).
 * On RX_EINVAL, *@why (if @why is not NULL) points at a static sentence
 * naming the field and its range. Returns RX_OK or RX_EINVAL (also for a
 * NULL @cfg). Thread-safe, O(1).
 */
int rx_bulkhead_config_check(const struct rx_bulkhead_config *cfg,
			     const char **why);

/* Read-only statistics (ADR-010). refused and queued count admit's
 * RX_REFUSE and RX_QUEUE answers (a waiter asking again counts again). */
struct rx_bulkhead_stats {
	uint32_t max_in_flight;
	uint32_t in_flight; /* admitted, not yet settled */
	uint64_t refused;   /* RX_REFUSE: full, caller cannot wait */
	uint64_t queued;    /* RX_QUEUE: full, caller may wait */
};

/*
 * The bulkhead. Plain data with no pointers: embed it (a guard, a registry
 * entry, shared memory), copy it. Fields are public only for that; treat
 * them as private and use the functions.
 */
struct rx_bulkhead {
	struct rx_bulkhead_config cfg;
	uint32_t in_flight;
	uint64_t refused;
	uint64_t queued;
};

/*
 * rx_bulkhead_init - an empty bulkhead. @cfg must pass
 * rx_bulkhead_config_check (checked again) and is copied. Returns RX_OK,
 * or RX_EINVAL with @b left unusable. Not thread-safe; O(1); no allocation.
 */
int rx_bulkhead_init(struct rx_bulkhead *b,
		     const struct rx_bulkhead_config *cfg);

/*
 * rx_bulkhead_admit - may a call start now? (struct rx_policy_ops admit.)
 * @ctx: can_wait decides RX_QUEUE versus RX_REFUSE when full; now_ns is
 *       only copied into the ticket; rng is not used (may be NULL).
 * Returns RX_ADMIT (a slot taken, @ticket filled: settle it exactly once),
 * RX_QUEUE (nothing reserved; ask again later) or RX_REFUSE; for the last
 * two @why gets RX_REASON_BULKHEAD_FULL, retry_after_ms 0, and the queued
 * or refused counter grows by one. Not thread-safe; O(1); no allocation.
 */
enum rx_decision rx_bulkhead_admit(struct rx_bulkhead *b,
				   const struct rx_admit_ctx *ctx,
				   struct rx_ticket *ticket,
				   struct rx_refusal *why);

/*
 * rx_bulkhead_settle - end a call this bulkhead admitted: its slot is free
 * again, for every verdict (RX_REJECTED included, ADR-007). @obs is not
 * read (may be NULL). Settling more calls than were admitted leaves
 * in_flight at 0 rather than wrapping. Not thread-safe; O(1).
 */
void rx_bulkhead_settle(struct rx_bulkhead *b, const struct rx_ticket *ticket,
			const struct rx_observation *obs);

/* rx_bulkhead_stats - fill @out without changing @b. O(1). */
void rx_bulkhead_stats(const struct rx_bulkhead *b,
		       struct rx_bulkhead_stats *out);

/* The bulkhead as a gate policy; self is a struct rx_bulkhead *. */
extern const struct rx_policy_ops rx_bulkhead_ops;

#ifdef __cplusplus
}
#endif
#endif
