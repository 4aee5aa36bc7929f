/*
 * resilix/ratelimit.h - a token-bucket rate limiter for one key.
 *
 * Refills `tokens` tokens per `period_ms` (a rate as a rational number,
 * "50/s", "30/min"), holds at most `burst` of them, and starts full. A call
 * takes one token (docs/design.md section 2, "The other policies"):
 *   - a token is there: RX_ADMIT;
 *   - none, and the caller can wait (ctx->can_wait): RX_QUEUE with
 *     retry_after_ms = the time until the next token, so that a blocking
 *     executor paces its caller (rx_ratelimit_next_ns gives the exact ns);
 *   - none, and it cannot: RX_REFUSE, with the same retry_after_ms.
 * Both carry reason RX_REASON_RATE_LIMITED; retry_after_ms is rounded up,
 * so it is never 0 (unknown) and never sends a caller back early.
 *
 * No drift (ADR-421): the bucket counts in units of 1 / period_ns of a
 * token, so one token is period_ns units and every nanosecond adds exactly
 * `tokens` units; refill is exact integer arithmetic, and any way of
 * slicing the same time into refills gives the same bucket. The cap is
 * burst tokens plus less than one nanosecond's refill, so a caller
 * admitted at the first whole nanosecond of its token keeps the fraction
 * it overshot even at burst 1. A caller that always waits for
 * rx_ratelimit_next_ns from a full bucket at time s is admitted for the
 * k-th time after the burst at exactly s + floor(k x period_ns / tokens),
 * over any run length.
 *
 * Release (ADR-422): a call admitted and then settled with RX_REJECTED
 * gets its token back, capped at burst, which leaves the bucket exactly as
 * if the call had never been admitted (ADR-007; refill is linear until the
 * cap and the cap is a min, so min(burst, taken + refund + refill) equals
 * min(burst, refill) for every interleaving). Every other verdict keeps the
 * token spent: the call went to the upstream. The bucket reads no verdict
 * as evidence.
 *
 * Waiting (ADR-004): there is no queue and no reservation inside: after
 * RX_QUEUE the executor sleeps until rx_ratelimit_next_ns and asks again,
 * and whoever asks first at that time gets the token (ADR-421 on why not
 * resilience4j's reservations).
 *
 * Sources: the token bucket (RFC 2697 meters with one); resilience4j
 * AtomicRateLimiter (limitForPeriod per
 * limitRefreshPeriod, a waiting caller told when its permit comes; ours
 * refills continuously rather than per cycle). Time: now_ns is monotonic;
 * a now_ns earlier than the latest seen counts as no time passing
 * (ADR-005). Nothing here allocates, reads a clock or blocks; every
 * function is O(1). Thread safety: none; callers serialise per limiter.
 */
#ifndef RESILIX_RATELIMIT_H
#define RESILIX_RATELIMIT_H

#include <stdint.h>

#include "resilix/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Configuration (ADR-421 gives the provenance):
 *   tokens     1..1000000000 tokens per period; no default (the executor
 *              enables the limiter only when a rate is given);
 *   period_ms  1..3600000 ms (1000 for "/s", 60000 for "/min");
 *   burst      0 = one second's worth, tokens x 1000 / period_ms rounded
 *              down, at least 1 (the default); else 1..1000000000000
 *              tokens, with burst x period_ms at most 9000000000000 (the
 *              bucket's units must fit in 63 bits).
 */
struct rx_ratelimit_config {
	uint64_t tokens;
	uint64_t period_ms;
	uint64_t burst;
};

/* rx_ratelimit_config_default - 1 token per second, burst 0 (one second's
 * worth). Callers set the rate they want. O(1). */
void rx_ratelimit_config_default(struct rx_ratelimit_config *cfg);

/*
 * rx_ratelimit_config_check - validate a configuration (never clamps).
 * On RX_EINVAL, *@why (if @why is not NULL) points at a static sentence
 * naming the field and its range. Returns RX_OK or RX_EINVAL (also for a
 * NULL @cfg). Thread-safe, O(1).
 */
int rx_ratelimit_config_check(const struct rx_ratelimit_config *cfg,
			      const char **why);

/*
 * rx_ratelimit_parse_rate - read a rate written "N/s", "N/min" or "N/h"
 * (N: 1..1000000000, decimal digits only, nothing before or after).
 * Returns RX_OK with *@tokens = N and *@period_ms = 1000, 60000 or 3600000,
 * or RX_EINVAL (NULL arguments, an empty or out-of-range N, another unit;
 * the outputs are untouched). Thread-safe, O(length of @s).
 */
int rx_ratelimit_parse_rate(const char *s, uint64_t *tokens,
			    uint64_t *period_ms);

/* Read-only statistics (ADR-010), as of the now_ns given. refused and
 * queued count admit's RX_REFUSE and RX_QUEUE answers. */
struct rx_ratelimit_stats {
	uint64_t tokens;  /* whole tokens available now, <= burst */
	uint64_t burst;	  /* the effective burst (default resolved) */
	uint64_t wait_ns; /* until the next token; 0 when one is there */
	uint64_t refused; /* RX_REFUSE: empty, caller cannot wait */
	uint64_t queued;  /* RX_QUEUE: empty, caller may wait */
};

/*
 * The limiter. Plain data with no pointers: embed it, copy it. Fields are
 * public only for that; treat them as private and use the functions.
 */
struct rx_ratelimit {
	struct rx_ratelimit_config cfg;
	uint64_t units;	      /* [0, cap_units]: tokens x period_ns */
	uint64_t token_units; /* one token: period_ns */
	uint64_t cap_units;   /* burst x period_ns */
	uint64_t burst;	      /* effective burst, >= 1 */
	uint64_t last_ns;     /* time of the latest refill */
	uint64_t refused;
	uint64_t queued;
};

/*
 * rx_ratelimit_init - a full bucket. @cfg must pass
 * rx_ratelimit_config_check (checked again) and is copied. Returns RX_OK,
 * or RX_EINVAL with @r left unusable. Not thread-safe; O(1).
 */
int rx_ratelimit_init(struct rx_ratelimit *r,
		      const struct rx_ratelimit_config *cfg);

/*
 * rx_ratelimit_admit - take a token if there is one (struct rx_policy_ops
 * admit).
 * @ctx: now_ns; can_wait (RX_QUEUE or RX_REFUSE when empty); rng unused.
 * Returns RX_ADMIT (a token taken; @ticket filled: settle it exactly
 * once), or RX_QUEUE / RX_REFUSE with @why = RX_REASON_RATE_LIMITED and
 * retry_after_ms >= 1, the whole ms until the next token; the queued or
 * refused counter grows by one. Refills first, whatever the answer.
 * Not thread-safe; O(1); no allocation.
 */
enum rx_decision rx_ratelimit_admit(struct rx_ratelimit *r,
				    const struct rx_admit_ctx *ctx,
				    struct rx_ticket *ticket,
				    struct rx_refusal *why);

/*
 * rx_ratelimit_settle - end a call this limiter admitted. RX_REJECTED
 * gives its token back, capped at burst (ADR-422); every other verdict
 * leaves the token spent. @ticket is not read; @obs must not be NULL.
 * Not thread-safe; O(1).
 */
void rx_ratelimit_settle(struct rx_ratelimit *r, const struct rx_ticket *ticket,
			 const struct rx_observation *obs);

/*
 * rx_ratelimit_next_ns - the earliest monotonic ns, at or after @now_ns
 * (or the latest time seen, if later), at which admit would find a token,
 * for an executor that paces its waiter. Read-only; asking changes
 * nothing. Thread-safe against nothing; O(1).
 */
uint64_t rx_ratelimit_next_ns(const struct rx_ratelimit *r, uint64_t now_ns);

/* rx_ratelimit_stats - fill @out as of @now_ns without changing @r. O(1). */
void rx_ratelimit_stats(const struct rx_ratelimit *r, uint64_t now_ns,
			struct rx_ratelimit_stats *out);

/* The limiter as a gate policy; self is a struct rx_ratelimit *. */
extern const struct rx_policy_ops rx_ratelimit_ops;

#ifdef __cplusplus
}
#endif
#endif
