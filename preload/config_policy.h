/*
 * preload/config_policy.h - the environment variables of the bulkhead,
 * the rate limiter, the throttler, retry and hedging, and a process's
 * criticality and tenant (config_policy.c),
 * for config.c's parser, which walks the environment and reports what
 * these functions decide (ADR-463). Pure: no clock, no I/O, no
 * allocation, no global state; thread-safe.
 */
#ifndef RESILIX_PRELOAD_CONFIG_POLICY_H
#define RESILIX_PRELOAD_CONFIG_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shim_config.h"

/* What a variable of this table sets; its index in the table too. */
enum rx__pfield {
	P_BULKHEAD = 0,
	P_RATE,
	P_RATE_BURST,
	P_THROTTLE_K,
	P_THROTTLE_PERIOD_MS,
	P_RETRY_ATTEMPTS,
	P_RETRY_BUDGET,
	P_RETRY_BASE_MS,
	P_RETRY_MAX_MS,
	P_HEDGE,
	P_HEDGE_DELAY_MS,
	P_CRITICALITY,
	P_TENANT,
	RX__PVAR_COUNT
};

struct rx__pvar {
	const char *name;
	enum rx__pfield field;
	uint64_t min, max; /* integers only */
	const char *accepted;
};

/* rx__pvar - entry @i of the table, NULL at or past RX__PVAR_COUNT. */
const struct rx__pvar *rx__pvar(size_t i);

/* rx__pconfig_default - the retry schedule and budget defaults
 * (the guard's policies are rx_guard_config_default's, all off). */
void rx__pconfig_default(struct rx_config *cfg);

/* rx__pvar_parse - set @cfg from the non-empty @value of variable @i.
 * Returns false, @cfg untouched for that field, when the value is not
 * valid (the caller reports it with the entry's accepted text). */
bool rx__pvar_parse(struct rx_config *cfg, size_t i, const char *value);

/*
 * rx__pconfig_check - the checks that combine variables, after every one
 * parsed: RESILIX_RETRY_BASE_MS above RESILIX_RETRY_MAX_MS (when one of
 * them is left at its default, the default moves), a burst too large for
 * the rate, and the core's checks. @seen: by enum rx__pfield, whether
 * each was set to a value (an empty one is unset, ADR-596). Returns 0,
 * or 1 with one line in @msg (@size bytes).
 */
int rx__pconfig_check(struct rx_config *cfg, const bool *seen, char *msg,
		      size_t size);

/* rx__pconfig_orphan - a variable that needs another one to mean
 * anything, set without it: a sentence for a notice, else NULL. @seen as
 * rx__pconfig_check's (set to a value). */
const char *rx__pconfig_orphan(const struct rx_config *cfg, const bool *seen);

/* rx__pvar_value - the effective value of variable @i, as rx_config_value
 * (shim_config.h) gives it. */
bool rx__pvar_value(const struct rx_config *cfg, size_t i, char *buf,
		    size_t size);

/* rx__value_text - the closing step of a variable's shown value: @s when
 * not NULL, else @u in decimal, into @buf (@size > 0 bytes, truncated as
 * snprintf does). Returns true. Reentrant; no allocation. */
bool rx__value_text(char *buf, size_t size, const char *s, uint64_t u);

/* rx__micro_text - @u millionths as a decimal into @buf (@size bytes),
 * without trailing zeros: "2", "1.5", "0.125". Locale-free, no
 * allocation, thread-safe. */
void rx__micro_text(char *buf, size_t size, uint64_t u);

#endif
