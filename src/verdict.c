/*
 * verdict.c - classification of call outcomes into verdicts (ADR-003) and
 * the stable names of verdicts and refusal reasons.
 *
 * The table is docs/design.md's: 2xx/3xx success; 4xx other than 408/429
 * answered; 429 and 503 overload; 408 and 504 timeout; every other 5xx and
 * anything unrecognised (including status codes outside 100..599 and
 * errnos we do not know) transient. Unrecognised reads as transient because
 * it is the verdict that neither hides a failure from the breaker nor
 * claims a timeout the call did not have.
 */
#include <errno.h>
#include <stddef.h>

#include "verdict-inl.h"
#include "resilix/policy.h"
#include "resilix/verdict.h"

const char *rx_verdict_name(enum rx_verdict v)
{
	static const char *const names[RX_VERDICT_COUNT] = {
	    [RX_SUCCESS] = "success",	[RX_ANSWERED] = "answered",
	    [RX_OVERLOAD] = "overload", [RX_TRANSIENT] = "transient",
	    [RX_TIMEOUT] = "timeout",	[RX_REJECTED] = "rejected",
	};
	if ((unsigned)v >= RX_VERDICT_COUNT)
		return "unknown";
	return names[v];
}

const char *rx_reason_name(enum rx_reason r)
{
	static const char *const names[RX_REASON_COUNT] = {
	    [RX_REASON_NONE] = "none",
	    [RX_REASON_CIRCUIT_OPEN] = "circuit-open",
	    [RX_REASON_HALF_OPEN_BUSY] = "half-open-busy",
	    [RX_REASON_LIMITER_FULL] = "limiter-full",
	    [RX_REASON_BULKHEAD_FULL] = "bulkhead-full",
	    [RX_REASON_RATE_LIMITED] = "rate-limited",
	    [RX_REASON_THROTTLED] = "throttled",
	    [RX_REASON_REGISTRY_FULL] = "registry-full",
	    [RX_REASON_BUDGET_EXCEEDED] = "budget-exceeded",
	    [RX_REASON_CRITICALITY_SHED] = "criticality-shed",
	    [RX_REASON_TENANT_SHED] = "tenant-shed",
	};
	if ((unsigned)r >= RX_REASON_COUNT || names[r] == NULL)
		return "unknown";
	return names[r];
}

/* The body is in verdict-inl.h, where the shim's fast path inlines it. */
enum rx_verdict rx_verdict_from_http(int status)
{
	return rx__verdict_from_http(status);
}

enum rx_verdict rx_verdict_from_errno(int err, enum rx_phase phase)
{
	/*
	 * ETIMEDOUT means "no answer in time" at either phase: from connect()
	 * it is the SYN timeout, at I/O it is a keepalive or SO_RCVTIMEO
	 * expiry the caller mapped to it. ECONNRESET, EPIPE, ECONNREFUSED,
	 * EHOSTUNREACH, ENETUNREACH and everything else are transient.
	 */
	(void)phase;
	if (err == ETIMEDOUT)
		return RX_TIMEOUT;
	return RX_TRANSIENT;
}

bool rx_verdict_is_failure(enum rx_verdict v)
{
	return rx__verdict_is_failure(v);
}
