/*
 * resilix/breaker.h - circuit breaker that trips on failures, on slow calls
 * and on a consecutive-failure backstop.
 *
 * States: closed -> open -> half-open -> closed (or back to open).
 * Trip conditions, evaluated on every settlement in closed state:
 *   - failure rate  > failure_rate   over the window, n >= min_calls;
 *   - slow-call rate > slow_call_rate over the window, n >= min_calls
 *     (only when slow_call_ms > 0: ADR-006, the threshold has no default);
 *   - consecutive failures >= consecutive_backstop (0 = off), at any
 *     traffic, so a dead upstream with few calls still trips.
 * Slow means latency >= slow_call_ms. Failures are RX_TRANSIENT and
 * RX_TIMEOUT; RX_SUCCESS and RX_ANSWERED reset the consecutive count,
 * RX_OVERLOAD is healthy but leaves the count alone (a 503 between two
 * resets says nothing about recovery). Rates trip strictly above their
 * threshold, so a threshold of 1 disables its condition.
 *
 * The window holds the last window_calls settlements younger than
 * window_max_age_ms. Starvation: when the slow condition is on and
 * window_max_age_ms < min_calls x slow_call_ms, the age bound could never
 * hold min_calls slow samples, so it is widened to that product
 * (stats.effective_max_age_ms). Once the age bound has evicted a sample and
 * left fewer than min_calls, the breaker decides on what the window holds,
 * down to 5 samples, and reports stats.starved.
 *
 * Open for open_ms (a refusal's retry_after_ms is the time left), then the
 * next admit turns half-open (lazily, no timers). Half-open admits
 * half_open_probes probes and refuses the rest with
 * RX_REASON_HALF_OPEN_BUSY. The first probe to settle decides: a failure
 * (or a slow success, when the slow condition is on) reopens, even with an
 * empty window; any other verdict closes, clearing the window and the
 * consecutive count. A probe still unsettled open_ms after it was admitted
 * is presumed lost and its slots are handed out again (self-heal); its own
 * settlement then counts for nothing.
 *
 * Late settlements: every state change (and every self-heal) bumps the
 * generation, and a ticket from another generation is not evidence: a call
 * admitted while closed that ends after the trip saw the old state.
 * RX_REJECTED is never evidence and releases exactly what admit reserved:
 * a probe slot in half-open, nothing otherwise (ADR-007).
 *
 * Sources: resilience4j CircuitBreakerStateMachine (rates over a count
 * window, half-open permits), Polly AdvancedCircuitBehavior (lazy
 * open -> half-open on the next call), Envoy outlier detection
 * (consecutive-5xx backstop). Differences are in docs/decisions.md.
 */
#ifndef RESILIX_BREAKER_H
#define RESILIX_BREAKER_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/policy.h"
#include "resilix/window.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rx_breaker_state {
	RX_BREAKER_CLOSED = 0,
	RX_BREAKER_OPEN,
	RX_BREAKER_HALF_OPEN
};

/* rx_breaker_state_name - "closed", "open", "half-open"; "unknown" out of
 * range. A static string, never NULL. Thread-safe, O(1), no allocation. */
const char *rx_breaker_state_name(enum rx_breaker_state s);

struct rx_breaker_config {
	double failure_rate;           /* [0,1], default 0.5; 1 disables */
	double slow_call_rate;         /* [0,1], default 0.5; 1 disables */
	uint64_t slow_call_ms;         /* 0 = slow condition off (default);
	                                  at most 86400000 */
	uint32_t consecutive_backstop; /* 0 = off; default 5; <= 100000 */
	uint32_t min_calls;            /* 1..100000; default 20; a value
	                                  above window_calls is clamped to it */
	uint32_t window_calls;         /* 1..100000; default 100 */
	uint64_t window_max_age_ms;    /* 0 = none; default 60000;
	                                  at most 86400000 */
	uint64_t open_ms;              /* 1..86400000; default 5000 */
	uint32_t half_open_probes;     /* 1..1000; default 1 */
	uint64_t call_timeout_ms;      /* the calls' deadline, 0 = none
	                                  (default); at most 86400000. A
	                                  probe keeps its slot until then,
	                                  and is then a timeout (ADR-381) */
};

/* rx_breaker_config_default - fill @cfg with the documented defaults
 * (docs/config.md gives each one's provenance, ADR-009). Writes only
 * @cfg: thread-safe; O(1); no allocation. */
void rx_breaker_config_default(struct rx_breaker_config *cfg);

/*
 * rx_breaker_config_check - validate a configuration.
 * Rejects NaN, infinities, rates outside [0,1], zero or out-of-range counts
 * and durations (never clamps). On RX_EINVAL, *@why (if not NULL) points at
 * a static sentence naming the field and the accepted range.
 * Returns RX_OK or RX_EINVAL (also for a NULL @cfg). Thread-safe, O(1), no
 * allocation.
 */
int rx_breaker_config_check(const struct rx_breaker_config *cfg,
                            const char **why);

/* Read-only statistics (telemetry; ADR-010). */
struct rx_breaker_stats {
	enum rx_breaker_state state;
	uint32_t window_count;      /* calls in the window now */
	uint32_t window_failures;
	uint32_t window_slow;
	uint32_t consecutive_failures;
	uint32_t probes_in_flight;
	double failure_rate;        /* 0 when the window is empty */
	double slow_call_rate;
	uint64_t effective_max_age_ms; /* after starvation widening */
	bool starved;               /* age bound keeps n below min_calls */
	uint64_t open_remaining_ms; /* 0 unless open */
	uint64_t transitions;       /* state changes since init */
};

/* The breaker. Fields are public so callers can embed it without
 * allocating; treat them as private and use the functions. */
struct rx_breaker {
	struct rx_breaker_config cfg;
	struct rx_window window;
	enum rx_breaker_state state;
	uint32_t generation;      /* bumped on every state change */
	uint32_t consecutive_failures;
	uint32_t probes_in_flight;
	uint64_t opened_ns;       /* when the current open period began */
	uint64_t last_now_ns;     /* latest time seen (clock never goes back) */
	uint64_t effective_max_age_ns;
	uint64_t transitions;
	uint64_t probe_epoch_ns;  /* admission of the oldest probe in flight */
	uint32_t min_calls;       /* effective: min(cfg min_calls, window) */
	bool starving;            /* age eviction left n below min_calls */
	uint32_t cutoff_n;        /* window size the cut-offs are for */
	uint32_t failure_cutoff;  /* failures that trip at cutoff_n calls */
	uint32_t slow_cutoff;     /* slow calls that trip at cutoff_n calls */
	uint64_t slow_call_us;    /* cfg slow_call_ms in µs (0 = off) */
	uint64_t open_ns;         /* cfg open_ms in ns */
	uint64_t call_timeout_ns; /* cfg call_timeout_ms in ns (0 = none) */
};

/*
 * rx_breaker_init - initialise a closed breaker.
 * @cfg must pass rx_breaker_config_check; @slots has cfg->window_calls
 * entries and outlives the breaker. Returns RX_OK, or RX_EINVAL for a
 * NULL @b or @slots or a @cfg that fails the check.
 * Not thread-safe; O(1); no allocation.
 */
int rx_breaker_init(struct rx_breaker *b, const struct rx_breaker_config *cfg,
                    struct rx_window_slot *slots);

/*
 * rx_breaker_admit - may a call start now?
 * Closed: admits. Open: refuses with RX_REASON_CIRCUIT_OPEN and the ms left,
 * until open_ms has passed, then becomes half-open. Half-open: admits up to
 * half_open_probes probes (ticket flags mark them), refuses the rest with
 * RX_REASON_HALF_OPEN_BUSY. Never returns RX_QUEUE.
 * @ctx: only now_ns is read (monotonic ns; earlier than the latest seen
 * counts as no time passing, ADR-005); the breaker draws nothing and
 * never queues. @why->retry_after_ms: whole ms left of the open period,
 * rounded up; 0 (unknown) for half-open-busy.
 * Not thread-safe (callers serialise per breaker); O(1); no allocation.
 */
enum rx_decision rx_breaker_admit(struct rx_breaker *b,
                                  const struct rx_admit_ctx *ctx,
                                  struct rx_ticket *ticket,
                                  struct rx_refusal *why);

/*
 * rx_breaker_settle - report the outcome of a call admitted by this breaker.
 * RX_REJECTED releases the ticket exactly as if the call had never been
 * admitted (ADR-007). A ticket from an earlier generation (the state changed
 * since admission) is not evidence: the call did not observe the state it
 * would change (docs/decisions.md, late settlements).
 * @obs: verdict (a value out of range reads as RX_TRANSIENT); latency_us
 * in µs, slow when >= slow_call_ms x 1000 and the slow condition is on;
 * now_ns, monotonic ns. Never fails.
 * Not thread-safe; O(1) amortised; no allocation.
 */
void rx_breaker_settle(struct rx_breaker *b, const struct rx_ticket *ticket,
                       const struct rx_observation *obs);

/* rx_breaker_stats - fill @out at @now_ns without changing the breaker's
 * state (ADR-010): the window counts leave out slots the age bound would
 * evict at @now_ns, and the state is the stored one (an open breaker whose
 * time is up reports open with open_remaining_ms 0 until the next admit).
 * Not thread-safe; O(slots the next settlement would evict), else O(1);
 * no allocation. */
void rx_breaker_stats(const struct rx_breaker *b, uint64_t now_ns,
                      struct rx_breaker_stats *out);

/* The breaker as a gate policy; self is a struct rx_breaker *. */
extern const struct rx_policy_ops rx_breaker_ops;

#ifdef __cplusplus
}
#endif
#endif
