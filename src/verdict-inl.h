/*
 * verdict-inl.h - the inline half of verdict.c: the failure test the
 * breaker's settle compiles inline (ADR-182); rx_verdict_is_failure is this
 * function. Never installed.
 */
#ifndef RESILIX_VERDICT_INL_H
#define RESILIX_VERDICT_INL_H

#include <stdbool.h>

#include "resilix/verdict.h"

/* rx_verdict_is_failure. */
static inline bool rx__verdict_is_failure(enum rx_verdict v)
{
	return v == RX_TRANSIENT || v == RX_TIMEOUT;
}

/* rx_verdict_from_http, inline for the kept-alive reply's fast path
 * (keepalive.c, ADR-534). */
static inline enum rx_verdict rx__verdict_from_http(int status)
{
	if (status >= 200 && status <= 399)
		return RX_SUCCESS;
	switch (status) {
	case 408:
	case 504:
		return RX_TIMEOUT;
	case 429:
	case 503:
		return RX_OVERLOAD;
	default:
		break;
	}
	if (status >= 400 && status <= 499)
		return RX_ANSWERED;
	/* 5xx other than the above, 1xx, and anything out of range. */
	return RX_TRANSIENT;
}

#endif
