/*
 * resilix/retry.h - what the core knows about retrying: the delay before a
 * retry, whether it still fits in the call's deadline, and the one retry
 * budget of a process.
 *
 * The executor retries (ADR-013: timeout and retry belong to it, and one
 * deadline bounds the whole sequence); the core only answers three
 * questions, each O(1) and without a clock of its own:
 *
 *   How long to wait? Full jitter (ADR-426): retry n (n = 0 for the first
 *   retry) waits a uniform random delay in [0, min(base x 2^n, max)]
 *   (gRPC proposal A6 "Client Retries", random(0, min(initialBackoff x
 *   multiplier^(n-1), maxBackoff)) for attempt n >= 1; Brooker, "Exponential
 *   Backoff And Jitter", AWS Architecture Blog, 2015: of the jittered
 *   schedules it compared, full jitter did the least work and finished
 *   about as soon as any).
 *
 *   Does it fit? rx_retry_fits: a retry that would start at or after the
 *   sequence's deadline is not made (ADR-429).
 *
 *   May the process retry at all? The retry budget (ADR-427): over the
 *   last ttl, retries may not exceed ratio x first attempts plus a floor
 *   of min_retries_per_s x ttl, so a failing upstream sees at most
 *   (1 + ratio) times the process's own demand plus a trickle, and a quiet
 *   process can still retry a lone failure (Finagle's RetryBudget). It is
 *   shared by every key of the process (retry storms are a property of
 *   the process, not of one upstream) and hedges draw from it too: the
 *   executor holds one struct rx_retry_budget, not one per key.
 *
 * Budget accounting, in integer units: a first attempt deposits
 * ratio_permille units, a retry withdraws 1000, and the balance is the
 * reserve (min_retries_per_s x ttl_ms units, the floor) plus the net
 * deposits of the buckets in the last ttl (a ring of `buckets` time
 * buckets, like the throttler's). Withdrawals expire with their bucket,
 * as Finagle's do, so a withdrawal succeeds while
 *     1000 x (retries in the ttl, this one included)
 *         <= reserve + ratio_permille x (first attempts in the ttl).
 * A refused withdrawal has reason RX_REASON_BUDGET_EXCEEDED
 * ("budget-exceeded"); the executor then lets the last attempt's outcome
 * stand. A withdrawal for a retry that then never ran (a policy refused
 * it) is refunded exactly (ADR-428).
 *
 * Time: now_ns is monotonic; a now_ns earlier than the latest seen counts
 * as no time passing (ADR-005). Nothing here allocates, reads a clock or
 * blocks. Thread safety: none; the executor serialises access to its one
 * budget (a process-wide lock or a try-lock around each call).
 */
#ifndef RESILIX_RETRY_H
#define RESILIX_RETRY_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/policy.h"
#include "resilix/rng.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The retry schedule. Defaults and their provenance (ADR-426):
 *   max_attempts 1 = no retry (docs/design.md section 2: off unless
 *     asked), 1..10 attempts including the first (gRPC A6 treats more
 *     than 5 as 5; the SRE book's "Addressing Cascading Failures" limits
 *     retries per request to 3, i.e. 4 attempts);
 *   base_ms 100, 1..60000, and max_ms 1000, base_ms..600000 (the
 *     retryPolicy example of gRPC A6: initialBackoff 0.1 s, maxBackoff
 *     1 s, backoffMultiplier 2; the multiplier is fixed at 2 here).
 */
struct rx_retry_config {
	uint32_t max_attempts;
	uint64_t base_ms;
	uint64_t max_ms;
};

/* rx_retry_config_default - fill @cfg with the defaults above. O(1). */
void rx_retry_config_default(struct rx_retry_config *cfg);

/*
 * rx_retry_config_check - validate a schedule (never clamps). On
 * RX_EINVAL, *@why (if not NULL) points at a static sentence naming the
 * field and its range. Returns RX_OK or RX_EINVAL (also for NULL).
 * Thread-safe, O(1).
 */
int rx_retry_config_check(const struct rx_retry_config *cfg, const char **why);

/*
 * rx_retry_backoff_ns - the full-jitter delay before retry @retry, in ns.
 * @cfg: a schedule that passes rx_retry_config_check.
 * @retry: 0 for the first retry (the second attempt), 1 for the next...;
 *         any value (the cap stops growing at max_ms).
 * @rng: one draw; NULL gives the mean, cap / 2 (no jitter: supply one).
 * Returns a delay uniform in [0, cap], cap = min(base_ms x 2^retry,
 * max_ms) in ns; never more than max_ms. Not thread-safe (the rng);
 * O(1). Source: gRPC A6, AWS "Exponential Backoff And Jitter".
 */
uint64_t rx_retry_backoff_ns(const struct rx_retry_config *cfg, uint32_t retry,
			     struct rx_rng *rng);

/*
 * rx_retry_fits - may a retry start after waiting @delay_ns from @now_ns,
 * within the sequence's deadline @deadline_ns (monotonic ns; 0 = none)?
 * True when there is no deadline or now + delay < deadline (saturating):
 * a retry that would start at the deadline has no time left to run, and
 * a retry never extends what the program asked for (ADR-013, ADR-429).
 * The executor passes the larger of the backoff and a server's
 * Retry-After as @delay_ns. Thread-safe, O(1).
 */
bool rx_retry_fits(uint64_t deadline_ns, uint64_t now_ns, uint64_t delay_ns);

#define RX_RETRY_BUDGET_BUCKETS_MAX 60

/*
 * The budget. Defaults and their provenance (ADR-427):
 *   ttl_ms 10000 (Finagle RetryBudget), 1000..60000 (Finagle's bounds);
 *   min_retries_per_s 1, 0..1000 (ours: a tenth of Finagle's 10, since
 *     every process of a host may carry the shim; 10 retries in any 10 s);
 *   ratio_permille 100, 0..1000 (the SRE book's per-client retry ratio
 *     of 10 %; Finagle allows 20 %);
 *   buckets 10, 1..RX_RETRY_BUDGET_BUCKETS_MAX (Finagle's windowed
 *     adder slices its ttl in 10).
 */
struct rx_retry_budget_config {
	uint64_t ttl_ms;
	uint32_t min_retries_per_s;
	uint32_t ratio_permille;
	uint32_t buckets;
};

/* rx_retry_budget_config_default - the defaults above. O(1). */
void rx_retry_budget_config_default(struct rx_retry_budget_config *cfg);

/* rx_retry_budget_config_check - as rx_retry_config_check, for a budget. */
int rx_retry_budget_config_check(const struct rx_retry_budget_config *cfg,
				 const char **why);

/* Read-only statistics (ADR-010), as of the now_ns given. */
struct rx_retry_budget_stats {
	int64_t balance_units;	    /* reserve + net deposits in the ttl */
	uint64_t retries_available; /* balance / 1000, 0 when negative */
	uint64_t first_attempts;    /* deposits since init */
	uint64_t retries;	    /* withdrawals since init, less refunds */
	uint64_t refused;	    /* budget-exceeded since init */
};

/*
 * One budget per process. Plain data with no pointers: embed it (shared
 * memory too), copy it. Fields are public only for that; treat them as
 * private and use the functions.
 */
struct rx_retry_budget {
	struct rx_retry_budget_config cfg;
	uint64_t bucket_ns;
	uint64_t epoch;	  /* epoch of the current bucket */
	uint64_t last_ns; /* latest time seen */
	int64_t reserve;  /* min_retries_per_s x ttl_ms units */
	int64_t net;	  /* sum of the ring */
	uint64_t first_attempts, retries, refused;
	int64_t ring[RX_RETRY_BUDGET_BUCKETS_MAX];
};

/*
 * rx_retry_budget_init - a budget holding only its reserve. @cfg must pass
 * rx_retry_budget_config_check (checked again) and is copied. Returns
 * RX_OK, or RX_EINVAL with @b left unusable. Not thread-safe; O(buckets).
 */
int rx_retry_budget_init(struct rx_retry_budget *b,
			 const struct rx_retry_budget_config *cfg);

/*
 * rx_retry_budget_deposit - a first attempt started (not a retry, not a
 * hedge): ratio_permille units into the current bucket. Call it for every
 * call the executor may retry, whether or not it will. Not thread-safe;
 * O(1), O(buckets) when the ring moves.
 */
void rx_retry_budget_deposit(struct rx_retry_budget *b, uint64_t now_ns);

/*
 * rx_retry_budget_withdraw - may a retry (or a hedge) start now?
 * Returns RX_ADMIT with @ticket filled (1000 units withdrawn; keep the
 * ticket until the retry ran, then drop it, or refund it if it never
 * ran), or RX_REFUSE with @why (if not NULL) = RX_REASON_BUDGET_EXCEEDED,
 * retry_after_ms 0, and the refused counter grown. Never RX_QUEUE: a
 * retry is not worth waiting for. Not thread-safe; O(1), O(buckets)
 * when the ring moves; no allocation.
 */
enum rx_decision rx_retry_budget_withdraw(struct rx_retry_budget *b,
					  uint64_t now_ns,
					  struct rx_ticket *ticket,
					  struct rx_refusal *why);

/*
 * rx_retry_budget_refund - give back a withdrawal whose retry never ran
 * (a later policy refused it, its deadline passed while it waited):
 * exactly the 1000 units, to the bucket they came from if it is still in
 * the ttl (else they had already expired), and one retry less counted.
 * The budget is then exactly as if the withdrawal had never been made
 * (ADR-428). Refund each ticket at most once. Not thread-safe; O(1).
 */
void rx_retry_budget_refund(struct rx_retry_budget *b,
			    const struct rx_ticket *ticket);

/* rx_retry_budget_stats - fill @out as of @now_ns without changing @b.
 * Not thread-safe; O(buckets). */
void rx_retry_budget_stats(const struct rx_retry_budget *b, uint64_t now_ns,
			   struct rx_retry_budget_stats *out);

/*
 * The budget as a gate policy (self is a struct rx_retry_budget *), for
 * the conformance test and for an executor that composes it with a gate:
 * admit = rx_retry_budget_withdraw at ctx->now_ns (can_wait and rng
 * unused); settle(RX_REJECTED) = rx_retry_budget_refund; settle with any
 * other verdict keeps the withdrawal (the retry ran).
 */
extern const struct rx_policy_ops rx_retry_budget_ops;

#ifdef __cplusplus
}
#endif
#endif
