/*
 * preload/config_policy.c - the variables of the policies beyond the
 * breaker and the limiter: bulkhead, rate limiter, throttler, retry and
 * hedging (config_policy.h; ADR-463), and a process's criticality and
 * tenant on shared keys (ADR-487 to ADR-489). config.c walks the
 * environment and reports; this file says, for its own table, what a
 * value means.
 *
 * Each policy is off unless its variable is set (docs/design.md section
 * 2): RESILIX_BULKHEAD, RESILIX_RATE and RESILIX_THROTTLE_K turn one on;
 * retry is off at RESILIX_RETRY_ATTEMPTS=1, the default. Every range is the core's (bulkhead.h, ratelimit.h,
 * throttler.h, retry.h), checked again by the core's own config checks
 * at the end, so nothing is accepted here that the core would refuse.
 * Same rules as config.c: decimal digits only, no sign, no spaces, no
 * locale, never clamped.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "config_policy.h"
#include "resilix/error.h"

/* clang-format off */
static const struct rx__pvar pvars[RX__PVAR_COUNT] = {
    {"RESILIX_BULKHEAD", P_BULKHEAD, 1, 1000000,
     "integer 1..1000000 calls in flight per key; unset = off"},
    {"RESILIX_RATE", P_RATE, 0, 0,
     "N/s, N/min or N/h with N 1..1000000000; unset = off"},
    {"RESILIX_RATE_BURST", P_RATE_BURST, 1, UINT64_C(1000000000000),
     "integer tokens 1..1000000000000, burst x period at most "
     "9000000000000 ms; unset = one second's worth"},
    {"RESILIX_THROTTLE_K", P_THROTTLE_K, 1, 10,
     "a decimal number 1..10 (the SRE book's K is 2); unset = off"},
    {"RESILIX_THROTTLE_PERIOD_MS", P_THROTTLE_PERIOD_MS, 1000, 3600000,
     "integer milliseconds 1000..3600000"},
    {"RESILIX_RETRY_ATTEMPTS", P_RETRY_ATTEMPTS, 1, 10,
     "integer 1..10 attempts, the first included; 1 = no retry"},
    {"RESILIX_RETRY_BUDGET", P_RETRY_BUDGET, 0, 1,
     "a decimal number 0..1 with at most 3 decimals, retries per first attempt"},
    {"RESILIX_RETRY_BASE_MS", P_RETRY_BASE_MS, 1, 60000,
     "integer milliseconds 1..60000, at most RESILIX_RETRY_MAX_MS"},
    {"RESILIX_RETRY_MAX_MS", P_RETRY_MAX_MS, 1, 600000,
     "integer milliseconds 1..600000, at least RESILIX_RETRY_BASE_MS"},
    {"RESILIX_HEDGE", P_HEDGE, 0, 1, "0 (off) or 1 (hedge GET and HEAD)"},
    {"RESILIX_HEDGE_DELAY_MS", P_HEDGE_DELAY_MS, 1, 600000,
     "integer milliseconds 1..600000; unset = the key's p95 of time to "
     "first byte"},
    /* Shared keys only (ADR-487 to ADR-489). */
    {"RESILIX_CRITICALITY", P_CRITICALITY, 0, 0,
     "critical, degraded, best_effort or bulk"},
    {"RESILIX_TENANT", P_TENANT, 0, 0,
     "1 to 31 characters of [A-Za-z0-9._-]; unset = the program's name"},
};
/* clang-format on */

const struct rx__pvar *rx__pvar(size_t i)
{
	return i < RX__PVAR_COUNT ? &pvars[i] : NULL;
}

void rx__pconfig_default(struct rx_config *cfg)
{
	rx_retry_config_default(&cfg->retry);
	rx_retry_budget_config_default(&cfg->budget);
}

/* [0-9]+ into *out; false on anything else or overflow. */
static bool digits(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (*s == '\0')
		return false;
	for (; *s; s++) {
		unsigned d = (unsigned)(*s - '0');

		if (*s < '0' || *s > '9' || v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}

/* A plain decimal, [0-9]+(.[0-9]+)? or .[0-9]+, into millionths (digits
 * past the sixth must be 0: K and a budget ratio need no finer grain, and
 * a value that would be rounded is refused rather than changed). */
static bool decimal_micro(const char *s, uint64_t *out)
{
	uint64_t ip = 0, frac = 0, scale = 1000000;
	bool any = false;

	for (; *s >= '0' && *s <= '9'; s++) {
		any = true;
		if (ip > 1000000)
			return false;
		ip = ip * 10 + (uint64_t)(*s - '0');
	}
	if (*s == '.') {
		bool fd = false;

		for (s++; *s >= '0' && *s <= '9'; s++) {
			fd = true;
			if (scale > 1) {
				scale /= 10;
				frac += (uint64_t)(*s - '0') * scale;
			} else if (*s != '0') {
				return false;
			}
		}
		if (!fd)
			return false;
		any = true;
	}
	if (!any || *s != '\0')
		return false;
	*out = ip * 1000000 + frac;
	return true;
}

bool rx__pvar_parse(struct rx_config *cfg, size_t i, const char *value)
{
	const struct rx__pvar *v = rx__pvar(i);
	uint64_t u = 0;

	if (!v)
		return false;
	switch (v->field) {
	case P_CRITICALITY: {
		enum rx_criticality_bucket b;

		if (rx_bucket_parse(value, &b) != RX_OK)
			return false;
		cfg->criticality = (enum rx_criticality)b;
		return true;
	}
	case P_TENANT: {
		size_t n = strspn(value, "abcdefghijklmnopqrstuvwxyz"
					 "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
					 "0123456789._-");

		if (n == 0 || n > 31 || value[n] != '\0')
			return false;
		cfg->tenant = value;
		return true;
	}
	case P_RATE:
		if (rx_ratelimit_parse_rate(value, &cfg->guard.ratelimit.tokens,
					    &cfg->guard.ratelimit.period_ms) !=
		    RX_OK)
			return false;
		cfg->guard.ratelimit_on = true;
		return true;
	case P_THROTTLE_K:
		if (!decimal_micro(value, &u) || u < 1000000 || u > 10000000)
			return false;
		cfg->guard.throttler.k = (double)u / 1e6;
		cfg->guard.throttler_on = true;
		return true;
	case P_RETRY_BUDGET:
		/* Permille in the core: a finer ratio would be rounded. */
		if (!decimal_micro(value, &u) || u > 1000000 || u % 1000 != 0)
			return false;
		cfg->budget.ratio_permille = (uint32_t)(u / 1000);
		return true;
	default:
		break;
	}
	if (!digits(value, &u) || u < v->min || u > v->max)
		return false;
	switch (v->field) {
	case P_BULKHEAD:
		cfg->guard.bulkhead.max_in_flight = (uint32_t)u;
		cfg->guard.bulkhead_on = true;
		break;
	case P_RATE_BURST:
		cfg->guard.ratelimit.burst = u;
		break;
	case P_THROTTLE_PERIOD_MS:
		cfg->guard.throttler.period_ms = u;
		break;
	case P_RETRY_ATTEMPTS:
		cfg->retry.max_attempts = (uint32_t)u;
		break;
	case P_RETRY_BASE_MS:
		cfg->retry.base_ms = u;
		break;
	case P_RETRY_MAX_MS:
		cfg->retry.max_ms = u;
		break;
	case P_HEDGE:
		cfg->hedge = u == 1;
		break;
	case P_HEDGE_DELAY_MS:
		cfg->hedge_delay_ms = u;
		break;
	default:
		return false;
	}
	return true;
}

int rx__pconfig_check(struct rx_config *cfg, const bool *seen, char *msg,
		      size_t size)
{
	const char *why = NULL;

	if (cfg->retry.base_ms > cfg->retry.max_ms) {
		/* One of the two left at its default: the default moves, as
		 * the limiter's initial limit does (config.c). */
		if (seen[P_RETRY_BASE_MS] && !seen[P_RETRY_MAX_MS]) {
			cfg->retry.max_ms = cfg->retry.base_ms;
		} else if (!seen[P_RETRY_BASE_MS]) {
			cfg->retry.base_ms = cfg->retry.max_ms;
		} else {
			snprintf(msg, size,
				 "RESILIX_RETRY_BASE_MS=%llu is above "
				 "RESILIX_RETRY_MAX_MS=%llu (accepted: BASE <= "
				 "MAX; defaults 100 and 1000)",
				 (unsigned long long)cfg->retry.base_ms,
				 (unsigned long long)cfg->retry.max_ms);
			return 1;
		}
	}
	if (cfg->guard.ratelimit_on &&
	    rx_ratelimit_config_check(&cfg->guard.ratelimit, &why) != RX_OK) {
		snprintf(msg, size,
			 "RESILIX_RATE with RESILIX_RATE_BURST=%llu is not "
			 "valid: %s",
			 (unsigned long long)cfg->guard.ratelimit.burst,
			 why ? why : "(no reason given)");
		return 1;
	}
	if (rx_retry_config_check(&cfg->retry, &why) != RX_OK ||
	    rx_retry_budget_config_check(&cfg->budget, &why) != RX_OK) {
		snprintf(msg, size, "the retry settings are not valid: %s",
			 why ? why : "(no reason given)");
		return 1;
	}
	return 0;
}

const char *rx__pconfig_orphan(const struct rx_config *cfg, const bool *seen)
{
	if (seen[P_RATE_BURST] && !cfg->guard.ratelimit_on)
		return "RESILIX_RATE_BURST is set without RESILIX_RATE; "
		       "ignored (no rate limiter)";
	if (seen[P_THROTTLE_PERIOD_MS] && !cfg->guard.throttler_on)
		return "RESILIX_THROTTLE_PERIOD_MS is set without "
		       "RESILIX_THROTTLE_K; ignored (no throttler)";
	if (seen[P_HEDGE_DELAY_MS] && !cfg->hedge)
		return "RESILIX_HEDGE_DELAY_MS is set without RESILIX_HEDGE=1; "
		       "ignored (no hedging)";
	if ((seen[P_CRITICALITY] || seen[P_TENANT]) && !cfg->shared)
		return seen[P_CRITICALITY]
			   ? "RESILIX_CRITICALITY is set without RESILIX_SHARED; "
			     "it sheds nothing (one process is one bucket)"
			   : "RESILIX_TENANT is set without RESILIX_SHARED; it "
			     "sheds nothing (one process is one tenant)";
	return NULL;
}

void rx__micro_text(char *buf, size_t size, uint64_t u)
{
	int n = snprintf(buf, size, "%llu.%06llu",
			 (unsigned long long)(u / 1000000),
			 (unsigned long long)(u % 1000000));

	while (n > 0 && (size_t)n < size && buf[n - 1] == '0')
		buf[--n] = '\0';
	if (n > 0 && (size_t)n < size && buf[n - 1] == '.')
		buf[--n] = '\0';
}

bool rx__value_text(char *buf, size_t size, const char *s, uint64_t u)
{
	if (s)
		snprintf(buf, size, "%s", s);
	else
		snprintf(buf, size, "%llu", (unsigned long long)u);
	return true;
}

bool rx__pvar_value(const struct rx_config *cfg, size_t i, char *buf,
		    size_t size)
{
	const struct rx__pvar *v = rx__pvar(i);
	const struct rx_guard_config *g = &cfg->guard;
	const char *s = NULL;
	uint64_t u = 0;

	if (!v || size == 0)
		return false;
	switch (v->field) {
	case P_BULKHEAD:
		s = g->bulkhead_on ? NULL : "unset (no bulkhead)";
		u = g->bulkhead.max_in_flight;
		break;
	case P_RATE:
		if (!g->ratelimit_on) {
			s = "unset (no rate limiter)";
			break;
		}
		snprintf(buf, size, "%llu/%s",
			 (unsigned long long)g->ratelimit.tokens,
			 g->ratelimit.period_ms == 1000	   ? "s"
			 : g->ratelimit.period_ms == 60000 ? "min"
							   : "h");
		return true;
	case P_RATE_BURST:
		if (g->ratelimit.burst == 0)
			s = "unset (one second's worth)";
		u = g->ratelimit.burst;
		break;
	case P_THROTTLE_K:
		if (!g->throttler_on) {
			s = "unset (no throttler)";
			break;
		}
		rx__micro_text(buf, size, (uint64_t)(g->throttler.k * 1e6 + 0.5));
		return true;
	case P_THROTTLE_PERIOD_MS:
		u = g->throttler.period_ms;
		break;
	case P_RETRY_ATTEMPTS:
		u = cfg->retry.max_attempts;
		break;
	case P_RETRY_BUDGET:
		rx__micro_text(buf, size, (uint64_t)cfg->budget.ratio_permille * 1000);
		return true;
	case P_RETRY_BASE_MS:
		u = cfg->retry.base_ms;
		break;
	case P_RETRY_MAX_MS:
		u = cfg->retry.max_ms;
		break;
	case P_HEDGE:
		u = cfg->hedge ? 1 : 0;
		break;
	case P_HEDGE_DELAY_MS:
		if (cfg->hedge_delay_ms == 0)
			s = "unset (the key's p95 of time to first byte)";
		u = cfg->hedge_delay_ms;
		break;
	case P_CRITICALITY:
		s = rx_bucket_name((enum rx_criticality_bucket)cfg->criticality);
		break;
	case P_TENANT:
		s = cfg->tenant ? cfg->tenant : "unset (the program's name)";
		break;
	default:
		return false;
	}
	return rx__value_text(buf, size, s, u);
}
