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

#endif
