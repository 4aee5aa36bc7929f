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
 * Open for open_ms, then half-open admits half_open_probes probes; a probe's
 * success closes the circuit, its failure reopens it. A probe that never
 * settles is replaced once open_ms elapses again (self-heal).
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

/* "closed", "open", "half-open"; "unknown" out of range. Never NULL. */
const char *rx_breaker_state_name(enum rx_breaker_state s);

struct rx_breaker_config {
	double failure_rate;           /* [0,1], default 0.5; 1 disables */
	double slow_call_rate;         /* [0,1], default 0.5; 1 disables */
	uint64_t slow_call_ms;         /* 0 = slow condition off (default) */
	uint32_t consecutive_backstop; /* 0 = off; default 5 */
	uint32_t min_calls;            /* 1..window_calls; default 20 */
	uint32_t window_calls;         /* 1..100000; default 100 */
	uint64_t window_max_age_ms;    /* 0 = none; default 60000 */
	uint64_t open_ms;              /* 1..86400000; default 5000 */
	uint32_t half_open_probes;     /* 1..1000; default 1 */
};

/* rx_breaker_config_default - fill @cfg with the documented defaults
 * (docs/config.md gives each one's provenance, ADR-009). */
void rx_breaker_config_default(struct rx_breaker_config *cfg);

/*
 * rx_breaker_config_check - validate a configuration.
 * Rejects NaN, infinities, rates outside [0,1], zero or out-of-range counts
 * and durations (never clamps). On RX_EINVAL, *@why (if not NULL) points at
 * a static sentence naming the field and the accepted range.
 * Returns RX_OK or RX_EINVAL. Thread-safe, O(1).
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
};

/*
 * rx_breaker_init - initialise a closed breaker.
 * @cfg must pass rx_breaker_config_check; @slots has cfg->window_calls
 * entries and outlives the breaker. Returns RX_OK or RX_EINVAL.
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
 * Not thread-safe; O(1) amortised; no allocation.
 */
void rx_breaker_settle(struct rx_breaker *b, const struct rx_ticket *ticket,
                       const struct rx_observation *obs);

/* rx_breaker_stats - fill @out at @now_ns without changing the breaker's
 * state (ADR-010). Not thread-safe; O(1). */
void rx_breaker_stats(const struct rx_breaker *b, uint64_t now_ns,
                      struct rx_breaker_stats *out);

/* The breaker as a gate policy; self is a struct rx_breaker *. */
extern const struct rx_policy_ops rx_breaker_ops;

#ifdef __cplusplus
}
#endif
#endif
