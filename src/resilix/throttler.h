/*
 * resilix/throttler.h - client-side adaptive throttling for one key.
 *
 * The throttle of the Google SRE book ("Handling Overload", client-side
 * throttling): over a sliding period the client counts `requests` (calls
 * the program attempted) and `accepts` (calls the upstream accepted), and
 * refuses a new call with probability
 *     p = max(0, (requests - K x accepts) / (requests + 1)),
 * capped at max_reject, drawn from ctx->rng; a refusal has reason
 * RX_REASON_THROTTLED and retry_after_ms 0 (unknown). While the upstream
 * accepts at least one call in K, p is 0 and nothing is drawn. Against an
 * upstream that accepts C calls a second of a demand above K x C, about
 * K x C calls a second still reach it: enough to see it recover, not
 * enough to bury it.
 *
 * What counts (ADR-423, ADR-424):
 *   - a call admitted and not yet settled is left out of p: its answer is
 *     not in, so it is no evidence either way (ADR-462);
 *   - every admit counts a request, a throttled one too (the book's
 *     requests are what the application attempted, on top of the
 *     throttle; without them p would settle where the upstream still gets
 *     the square root of the demand);
 *   - RX_SUCCESS and RX_ANSWERED count an accept (the upstream took the
 *     work and answered: a 4xx is the upstream's judgement, not its
 *     distress);
 *   - RX_OVERLOAD, RX_TRANSIENT, RX_TIMEOUT count nothing more: the
 *     request stays, unaccepted;
 *   - RX_REJECTED, and any verdict this header does not name, remove the
 *     admission's request from its bucket if the bucket is still in the
 *     period (else it has already left the sums): the call is as if never
 *     admitted (ADR-007).
 *
 * The period is a ring of `buckets` buckets of period_ms / buckets each,
 * indexed by bucket epoch (now_ns / bucket_ns) with running sums; moving
 * to a new epoch subtracts and clears the buckets it passes (at most
 * `buckets` of them, whatever the gap), so the sums cover the current
 * bucket and the buckets - 1 before it (resilience4j's time window).
 * Accepts land in the bucket of their settlement, so late answers may
 * make accepts exceed requests; p is then 0.
 *
 * Sources: Beyer et al., "Site Reliability Engineering" (O'Reilly 2016),
 * chapter 21 "Handling Overload" (formula, K = 2, a 2-minute history);
 * failsafe-go's adaptive throttler (the period as 20 buckets, a maximum
 * rejection rate); Envoy admission control (the same formula with a cap).
 * Time: now_ns is monotonic; a now_ns earlier than the latest seen counts
 * as no time passing (ADR-005). Nothing here allocates, reads a clock or
 * blocks; admit and settle are O(1) (O(buckets) when the ring moves).
 * Thread safety: none; callers serialise per throttler.
 */
#ifndef RESILIX_THROTTLER_H
#define RESILIX_THROTTLER_H

#include <stdint.h>

#include "resilix/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RX_THROTTLER_BUCKETS_MAX 60

/*
 * Configuration. Defaults and their provenance (ADR-425):
 *   k 2.0 (SRE book), in [1, 10]: below 1 the throttle would refuse calls
 *     to an upstream that accepts all of them;
 *   period_ms 120000 (SRE book: two minutes), 1000..3600000;
 *   buckets 20 (failsafe-go), 1..RX_THROTTLER_BUCKETS_MAX;
 *   max_reject 0.9 (failsafe-go; Envoy uses 0.8), in (0, 1]; 1 is the
 *     book's uncapped formula. The throttle's refusals count as requests,
 *     so once p is near 1 only accepts can bring it down, and the share
 *     of calls let through grows about e-fold per period / 1.6 with
 *     K = 2: uncapped, recovery from a one-minute outage took 539 s of
 *     the test's simulation, capped at 0.9 it took 205 s.
 */
struct rx_throttler_config {
	double k;
	uint64_t period_ms;
	uint32_t buckets;
	double max_reject;
};

/* rx_throttler_config_default - fill @cfg with the defaults above. O(1). */
void rx_throttler_config_default(struct rx_throttler_config *cfg);

/*
 * rx_throttler_config_check - validate a configuration (never clamps).
 * Rejects NaN, infinities and values outside the ranges above. On
 * RX_EINVAL, *@why (if not NULL) points at a static sentence naming the
 * field and its range. Returns RX_OK or RX_EINVAL (also for a NULL @cfg).
 * Thread-safe, O(1).
 */
int rx_throttler_config_check(const struct rx_throttler_config *cfg,
			      const char **why);

/* Read-only statistics (ADR-010), as of the now_ns given (buckets that
 * have left the period by then are not counted). */
struct rx_throttler_stats {
	uint64_t requests;	   /* in the period, throttled ones included */
	uint64_t accepts;	   /* in the period */
	double reject_probability; /* p the next admit would use */
	uint64_t throttled;	   /* refusals since init */
};

struct rx_throttler_bucket {
	uint32_t requests;
	uint32_t accepts;
};

/*
 * The throttler. Plain data with no pointers: embed it, copy it. Fields
 * are public only for that; treat them as private and use the functions.
 */
struct rx_throttler {
	struct rx_throttler_config cfg;
	uint64_t bucket_ns; /* period_ms / buckets, in ns */
	uint64_t epoch;	    /* epoch of the current bucket */
	uint64_t last_ns;   /* latest time seen */
	uint64_t requests;  /* sums over the ring */
	uint64_t accepts;
	uint64_t throttled;
	uint64_t outstanding; /* admitted, not yet settled (ADR-462) */
	struct rx_throttler_bucket ring[RX_THROTTLER_BUCKETS_MAX];
};

/*
 * rx_throttler_init - an empty history (p = 0). @cfg must pass
 * rx_throttler_config_check (checked again) and is copied. Returns RX_OK,
 * or RX_EINVAL with @t left unusable. Not thread-safe; O(buckets).
 */
int rx_throttler_init(struct rx_throttler *t,
		      const struct rx_throttler_config *cfg);

/*
 * rx_throttler_admit - may a call start now? (struct rx_policy_ops admit.)
 * @ctx: now_ns; rng, drawn once only when p > 0 (a NULL rng counts as the
 *       draw 0.5: a refusal whenever p > 0.5; supply one); can_wait is not
 *       used (a throttled call is refused, never queued: waiting would not
 *       change the upstream's answer).
 * Counts a request in the current bucket, then returns RX_ADMIT (@ticket
 * filled: settle it exactly once) or RX_REFUSE (@why: RX_REASON_THROTTLED,
 * retry_after_ms 0; the throttled counter grows). Never RX_QUEUE.
 * Not thread-safe; O(1), O(buckets) when the ring moves; no allocation.
 */
enum rx_decision rx_throttler_admit(struct rx_throttler *t,
				    const struct rx_admit_ctx *ctx,
				    struct rx_ticket *ticket,
				    struct rx_refusal *why);

/*
 * rx_throttler_settle - report the outcome of a call this throttler
 * admitted; the verdicts are read as the file comment says. RX_REJECTED
 * leaves the throttler exactly as if the call had never been admitted
 * (ADR-007): it neither reads @obs->now_ns nor moves the ring.
 * Not thread-safe; O(1), O(buckets) when the ring moves.
 */
void rx_throttler_settle(struct rx_throttler *t, const struct rx_ticket *ticket,
			 const struct rx_observation *obs);

/* rx_throttler_stats - fill @out as of @now_ns without changing @t.
 * Not thread-safe; O(buckets). */
void rx_throttler_stats(const struct rx_throttler *t, uint64_t now_ns,
			struct rx_throttler_stats *out);

/* The throttler as a gate policy; self is a struct rx_throttler *. */
extern const struct rx_policy_ops rx_throttler_ops;

#ifdef __cplusplus
}
#endif
#endif
