/*
 * resilix/guard.h - everything resilix keeps for one key (destination):
 * the policies configured for it, composed by a gate, plus counters for
 * telemetry. The registry (registry.h) owns guards; the shim drives them.
 */
#ifndef RESILIX_GUARD_H
#define RESILIX_GUARD_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/breaker.h"
#include "resilix/gate.h"
#include "resilix/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rx_guard_config {
	bool breaker_on;
	struct rx_breaker_config breaker;
};

/* rx_guard_config_default - breaker on, with its defaults. */
void rx_guard_config_default(struct rx_guard_config *cfg);

/* rx_guard_config_check - RX_OK or RX_EINVAL with *why set (static). */
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
	struct rx_guard_counters counters;
	uint32_t in_flight;   /* admitted, not yet settled */
	uint64_t last_used_ns;
};

/*
 * rx_guard_init - set up a guard's policies from @cfg (already checked).
 * @slots: cfg->breaker.window_calls slots, outliving the guard.
 * Returns RX_OK or RX_EINVAL. Not thread-safe; O(1); no allocation.
 */
int rx_guard_init(struct rx_guard *g, const struct rx_guard_config *cfg,
                  struct rx_window_slot *slots, uint64_t now_ns);

/*
 * rx_guard_admit / rx_guard_settle - the gate, plus counters and in_flight.
 * Same contract as rx_gate_admit / rx_gate_settle. Not thread-safe:
 * callers serialise per guard. O(policies), no allocation.
 */
enum rx_decision rx_guard_admit(struct rx_guard *g,
                                const struct rx_admit_ctx *ctx,
                                struct rx_gate_permit *permit,
                                struct rx_refusal *why);
void rx_guard_settle(struct rx_guard *g, const struct rx_gate_permit *permit,
                     const struct rx_observation *obs);

#ifdef __cplusplus
}
#endif
#endif
