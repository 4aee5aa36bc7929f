/*
 * resilix/guard.h - everything resilix keeps for one key (destination):
 * the policies configured for it, composed by a gate, plus counters for
 * telemetry. The registry (registry.h) owns guards; the shim drives them.
 *
 * The order (ADR-460), each policy asked only when it is on:
 *
 *   rate limiter -> breaker -> throttler -> bulkhead -> limiter
 *
 *   - the rate limiter first: a caller paced for its token holds no
 *     probe, no bulkhead slot and no limiter slot while it waits, and a
 *     token goes back exactly (ADR-422) when a later policy refuses;
 *   - the breaker before the throttler: an open circuit refuses without
 *     counting a request to the throttler, whose requests are what
 *     reached the upstream's judgement (ADR-424);
 *   - the throttler before the slots: a throttled call never takes a
 *     bulkhead or limiter slot, nor a place in a queue;
 *   - the bulkhead before the limiter, which comes last: its queue is the
 *     only one with places, and a waiter holds its place and nothing else.
 * The retry budget (retry.h) is not in the gate: it is one per process,
 * and the executor consults it before each retry or hedge, which then
 * runs inside the first attempt's admission (the breaker sees one outcome
 * per retried call).
 *
 * Waiting. When the limiter answers RX_QUEUE (reason limiter-full), a
 * blocking executor waits through rx_guard_enqueue, rx_guard_try_dequeue
 * and rx_guard_cancel_wait, the limiter's wait protocol (limiter.h), with
 * the policies before it asked again at each look (ADR-131, ADR-461).
 * When the rate limiter (rate-limited) or the bulkhead (bulkhead-full)
 * answers RX_QUEUE, nothing is reserved: the executor registers the wait
 * (rx_guard_wait_begin, so settlements wake it and the registry keeps the
 * key), sleeps until rx_guard_next_token_ns or a settlement, and admits
 * again from the start; rx_guard_wait_end ends it.
 *
 * Cost. With only the breaker and the limiter on (the default), admit and
 * settle run the two by name behind one test of `more` (ADR-180); the
 * other policies are a cold path.
 */
#ifndef RESILIX_GUARD_H
#define RESILIX_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/breaker.h"
#include "resilix/bulkhead.h"
#include "resilix/fairshare.h"
#include "resilix/gate.h"
#include "resilix/limiter.h"
#include "resilix/partition.h"
#include "resilix/policy.h"
#include "resilix/ratelimit.h"
#include "resilix/throttler.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rx_guard_config {
	bool breaker_on;
	struct rx_breaker_config breaker;
	bool limiter_on;
	struct rx_limiter_config limiter;
	bool bulkhead_on; /* off by default: a cap is the user's choice */
	struct rx_bulkhead_config bulkhead;
	bool ratelimit_on; /* off by default: no rate without a number */
	struct rx_ratelimit_config ratelimit;
	bool throttler_on; /* off by default (docs/design.md section 2) */
	struct rx_throttler_config throttler;
	/* Criticality buckets and tenant fairness in front of the limiter
	 * (ADR-489): off by default; needs limiter_on. */
	bool shares_on;
	struct rx_partition_config partition;
	struct rx_fairshare_config fairshare;
};

/* rx_guard_config_default - breaker and limiter (Vegas) on, each with its
 * defaults (ADR-135); bulkhead, rate limiter and throttler off, their
 * configurations at their own defaults. Writes only @cfg: thread-safe;
 * O(1); no allocation. */
void rx_guard_config_default(struct rx_guard_config *cfg);

/* rx_guard_config_check - the checks of every policy that is on, breaker
 * first. Returns RX_OK, or RX_EINVAL (also for a NULL @cfg) with *@why,
 * when @why is not NULL, at a static sentence naming the field and its
 * range. Thread-safe, O(1), no allocation. */
int rx_guard_config_check(const struct rx_guard_config *cfg,
                          const char **why);

struct rx_guard_counters {
	uint64_t settled[RX_VERDICT_COUNT]; /* admitted calls, by verdict */
	uint64_t refused[RX_REASON_COUNT];  /* refusals, by reason */
	uint64_t slow;                      /* settled calls that were slow */
};

struct rx_guard {
	struct rx_gate gate;
	struct rx_breaker breaker;
	struct rx_limiter limiter; /* zeroed (queued 0) when off */
	bool breaker_on;           /* the gate's policies, as rx_guard_admit */
	bool limiter_on;           /* calls them directly (ADR-180) */
	bool bulkhead_on, ratelimit_on, throttler_on;
	bool more; /* any of the three: admit and settle take the long way */
	bool plain; /* breaker and limiter only (shares or not): the common
		       case rx_guard_admit_fast admits (ADR-531, ADR-492) */
	bool steady; /* plain, and what only rx_guard_settle moves is in
			rx_guard_settle_fast's case: its cache (ADR-587) */
	struct rx_guard_counters counters;
	uint32_t in_flight;   /* admitted, not yet settled */
	uint32_t waiting;     /* rx_guard_wait_begin without its end */
	uint64_t last_used_ns;
	/* Zeroed when off; kept after the fields every call reads. */
	struct rx_bulkhead bulkhead;
	struct rx_ratelimit ratelimit;
	struct rx_throttler throttler;
	bool shares_on; /* the two below are asked before the limiter */
	struct rx_partition partition;
	struct rx_fairshare fairshare;
};

/*
 * Shares (ADR-489; cfg.shares_on, with the limiter on). The limiter's
 * step of every admission - a new call or a waiter whose turn came -
 * becomes: under pressure (the limiter would not admit at once: its
 * backlog reaches its slots), rx_partition_decide with ctx->bucket and
 * the limiter's L: a shed call is refused (criticality-shed), a
 * guaranteed one takes a limiter slot over L; a call that passes is
 * asked rx_fairshare_decide with ctx->tenant (tenant-shed), then the
 * limiter as usual. An admitted call is counted in its bucket once a
 * second bucket has called on the key, and in its tenant once a second
 * tenant has (ADR-490: until then neither rule can shed, and a bucket
 * alone passes to the limiter under pressure). A call that was counted
 * has one more ticket after the policies' (the permit's count is theirs
 * + 1), carrying the bucket, the tenant's row and epoch, and settle gives
 * them back (the tenant's count only for RX_REJECTED); one that was not
 * has none. Without pressure, on a key one bucket and one tenant use,
 * the cost is a few branches.
 */

/*
 * rx_guard_init - set up a guard's policies from @cfg (already checked).
 * @slots: cfg->breaker.window_calls slots, outliving the guard (unused,
 * may be NULL, with the breaker off). @now_ns: monotonic ns, the guard's
 * first use (last_used_ns, which the registry's idle TTL reads).
 * Returns RX_OK, or RX_EINVAL for a NULL @g, a @cfg that fails
 * rx_guard_config_check, or NULL @slots with the breaker on.
 * Not thread-safe; O(1); no allocation.
 */
int rx_guard_init(struct rx_guard *g, const struct rx_guard_config *cfg,
                  struct rx_window_slot *slots, uint64_t now_ns);

/*
 * rx_guard_admit / rx_guard_settle - the gate, plus counters and in_flight.
 * Same contract as rx_gate_admit / rx_gate_settle, whose steps they run
 * with the breaker and limiter called directly (ADR-180). Not
 * thread-safe: callers serialise per guard. O(policies), no allocation;
 * about 350 instructions per admit + settle with both policies on
 * (scripts/bench core; ADR-302).
 */
enum rx_decision rx_guard_admit(struct rx_guard *g,
                                const struct rx_admit_ctx *ctx,
                                struct rx_gate_permit *permit,
                                struct rx_refusal *why);
void rx_guard_settle(struct rx_guard *g, const struct rx_gate_permit *permit,
                     const struct rx_observation *obs);

/*
 * rx_guard_admit_fast - rx_guard_admit for the common case only: the
 * default policies (breaker and limiter on, nothing else; shares on or
 * off), a closed circuit and a limiter below its slots. Then it admits
 * at @ctx->now_ns exactly as rx_guard_admit would (with shares, counting
 * the call in @ctx's bucket and tenant as the limiter's step does below
 * its slots), fills @permit (two tickets, three when the shares counted
 * it) and returns true; otherwise it changes nothing and returns false,
 * and the caller asks rx_guard_admit (ADR-531, ADR-492). Not
 * thread-safe: callers serialise per guard. O(1), no allocation.
 */
bool rx_guard_admit_fast(struct rx_guard *g, const struct rx_admit_ctx *ctx,
                         struct rx_gate_permit *permit);

/*
 * rx_guard_release_limiter - the call admitted with @permit waits on
 * purpose (a Redis BLPOP, ADR-654): its limiter slot, and its share of a
 * bucket, go back now; its other tickets stay for its settlement.
 * rx_guard_mark_limiter_released marks the permit the call will settle
 * with, so that the settlement leaves the limiter and the shares alone,
 * and returns false when there is nothing to give back (no limiter, or
 * marked already); rx_guard_release_limiter then gives back what an
 * unmarked copy of it holds, under the guard's lock. Not thread-safe:
 * callers serialise per guard (the release) or per permit (the mark).
 * O(1).
 */
bool rx_guard_mark_limiter_released(const struct rx_guard *g,
                                    struct rx_gate_permit *permit);
void rx_guard_release_limiter(struct rx_guard *g,
                              const struct rx_gate_permit *permit,
                              uint64_t now_ns);

/*
 * rx_guard_limiter_window_due - might a sample settled at @now_ns close
 * the limiter's window (false with the limiter off)? Reads only.
 * rx_guard_note_caller_busy - the thread that settles on @g has been
 * saturated (on its CPU nearly all the time) over the window now open:
 * the latencies it measured include its own lag, so the window is no
 * queueing evidence and no baseline; its drops count as ever (ADR-686).
 * A no-op with the limiter off or no window open. The shim asks the first
 * and judges its caller only where it is true, once a window, and calls
 * the second before rx_guard_settle. Not thread-safe: callers serialise
 * per guard. O(1).
 */
bool rx_guard_limiter_window_due(const struct rx_guard *g, uint64_t now_ns);
void rx_guard_note_caller_busy(struct rx_guard *g);

/*
 * rx_guard_settle_fast - rx_guard_settle for the common case only: a
 * permit of rx_guard_admit_fast's two tickets settled as RX_SUCCESS,
 * @latency_us µs long (not slow), at @now_ns, on a closed breaker whose
 * full window's oldest slot is a young success below the cut-offs, and a
 * limiter whose window is open, fresh, not probing and not due to close.
 * Then it settles exactly as rx_guard_settle would with that observation
 * and returns true; otherwise it changes nothing and returns false, and
 * the caller asks rx_guard_settle (ADR-532). Not thread-safe: callers
 * serialise per guard. O(1), no allocation. The shim inlines the same
 * body (guard-inl.h, ADR-586).
 */
bool rx_guard_settle_fast(struct rx_guard *g,
                          const struct rx_gate_permit *permit,
                          uint64_t latency_us, uint64_t now_ns);

/*
 * rx_guard_enqueue - take a place in the limiter's wait queue after
 * rx_guard_admit said RX_QUEUE (under the same lock hold).
 * Returns RX_OK and *@wait_ticket, or RX_ENOSPC when the backlog already
 * reaches 3L (the caller refuses the call; counted as a limiter-full
 * refusal) or when the limiter is off. @now_ns: monotonic ns.
 * Not thread-safe; O(1); no allocation.
 */
int rx_guard_enqueue(struct rx_guard *g, uint64_t now_ns,
                     uint64_t *wait_ticket);

/*
 * rx_guard_try_dequeue - is it this waiter's turn? The rate limiter, the
 * breaker and the bulkhead are asked first (each released at once, exactly,
 * if the turn has not come), then rx_limiter_try_dequeue, then the
 * throttler, which draws a random number and so is asked once per turn,
 * not once per look (ADR-461); the permit's tickets are in gate order.
 * Returns RX_ADMIT with @permit filled (settle it exactly once; the place
 * is gone); RX_QUEUE: not yet - no turn, no token, no bulkhead slot -, ask
 * again later (the place is kept); RX_REFUSE with @why (limiter-full, or
 * the reason of the policy that refused: the circuit opened meanwhile, the
 * call was throttled): the place is gone and the refusal counted.
 * With the limiter off, RX_REFUSE (limiter-full) and nothing counted.
 * @ctx as for rx_guard_admit. Not thread-safe; O(policies); no allocation.
 */
enum rx_decision rx_guard_try_dequeue(struct rx_guard *g,
                                      const struct rx_admit_ctx *ctx,
                                      uint64_t wait_ticket,
                                      struct rx_gate_permit *permit,
                                      struct rx_refusal *why);

/*
 * rx_guard_cancel_wait - give a place up (end each place exactly once).
 * @refused: true when the call is refused because of it (the executor's
 * queue timeout): counted as a limiter-full refusal. Ignored with the
 * limiter off. Not thread-safe; O(1); no allocation.
 */
void rx_guard_cancel_wait(struct rx_guard *g, uint64_t wait_ticket,
                          bool refused);

/*
 * rx_guard_drop_waiters - forget every place in the limiter's queue, and
 * every rx_guard_wait_begin, for a forked child: the threads that held them did not come along (only the
 * forking thread did, and it was not waiting), and a place nobody will ever
 * end would hold a slot and pin the key for good. The dropped place
 * numbers are dead afterwards. Not thread-safe; O(places); no allocation.
 */
void rx_guard_drop_waiters(struct rx_guard *g);

/*
 * rx_guard_wait_begin / rx_guard_wait_end - a blocking caller told RX_QUEUE
 * by the rate limiter or the bulkhead starts / stops waiting to admit
 * again (nothing is reserved meanwhile). While any waits, settlements wake
 * the key's waiters and the registry keeps the key (rx_guard_waiters).
 * @refused: RX_REASON_NONE when the wait ended in an admission (or
 * another try), else the reason its caller was refused for (its deadline
 * passed): counted as a refusal. Not thread-safe; O(1); no allocation.
 */
void rx_guard_wait_begin(struct rx_guard *g);
void rx_guard_wait_end(struct rx_guard *g, enum rx_reason refused);

/* rx_guard_count_refusal - count a refusal by @reason that the executor
 * decided outside the gate (a retry the budget refused, retry.h), so the
 * key's refusals by reason say it. Not thread-safe; O(1). */
void rx_guard_count_refusal(struct rx_guard *g, enum rx_reason reason);

/* rx_guard_next_token_ns - when the rate limiter will next have a token
 * (rx_ratelimit_next_ns), at or after @now_ns; @now_ns when it is off.
 * Read-only. Not thread-safe; O(1). */
uint64_t rx_guard_next_token_ns(const struct rx_guard *g, uint64_t now_ns);

/* rx_guard_waiters - places held in the limiter's queue (0 when off), plus
 * callers between rx_guard_wait_begin and _end. The registry never evicts
 * a guard with waiters. Not thread-safe (read under the key's lock); O(1);
 * no allocation. */
static inline uint32_t rx_guard_waiters(const struct rx_guard *g)
{
	return g->limiter.queued + g->waiting;
}

#ifdef __cplusplus
}
#endif
#endif
