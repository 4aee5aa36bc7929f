/*
 * resilix/verdict.h - the outcome of one call, read differently by each
 * policy (ADR-003: outcomes are verdicts, not booleans).
 *
 * Classification follows the table of docs/decisions.md (ADR-003):
 *   2xx/3xx, or any response bytes on a non-HTTP protocol  -> SUCCESS
 *   HTTP 4xx other than 408/429                            -> ANSWERED
 *   HTTP 429, 503                                          -> OVERLOAD
 *   HTTP 500/502 and other 5xx, ECONNRESET, EPIPE, EOF
 *   before a response, connect ECONNREFUSED/EHOSTUNREACH/
 *   ENETUNREACH, anything unrecognised                     -> TRANSIENT
 *   our deadline, connect ETIMEDOUT, SO_RCVTIMEO expiry,
 *   HTTP 408/504                                           -> TIMEOUT
 *   refused by resilix itself                              -> REJECTED
 */
#ifndef RESILIX_VERDICT_H
#define RESILIX_VERDICT_H

#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rx_verdict {
	RX_SUCCESS = 0, /* healthy answer (slow if latency >= slow threshold) */
	RX_ANSWERED,    /* the upstream answered "no" (4xx): healthy */
	RX_OVERLOAD,    /* 429/503: back off, not a breaker failure */
	RX_TRANSIENT,   /* failure that a retry may fix */
	RX_TIMEOUT,     /* no answer in time */
	RX_REJECTED,    /* refused by resilix: never evidence (ADR-007) */
	RX_VERDICT_COUNT
};

/* Where an errno was observed: it reads differently at connect and at I/O. */
enum rx_phase {
	RX_PHASE_CONNECT = 0, /* connect(), getsockopt(SO_ERROR) after it */
	RX_PHASE_IO           /* send/recv/read/write on a connected socket */
};

/*
 * rx_verdict_name - lower-case name ("success", "answered", "overload",
 * "transient", "timeout", "rejected"); "unknown" for out-of-range values.
 * Returns a static string, never NULL. Thread-safe, O(1), no allocation.
 */
const char *rx_verdict_name(enum rx_verdict v);

/*
 * rx_verdict_from_http - classify an HTTP final status code.
 * @status: the status code; values outside 100..599 are TRANSIENT
 *          (unrecognised). 1xx is not final; callers should not pass it,
 *          it classifies as TRANSIENT.
 * Never fails. Thread-safe, O(1), no allocation.
 * Source: docs/design.md's verdict table, ADR-003.
 */
enum rx_verdict rx_verdict_from_http(int status);

/*
 * rx_verdict_from_errno - classify an errno seen on a guarded socket.
 * @err:   a positive errno value. EAGAIN/EWOULDBLOCK/EINTR/EINPROGRESS are
 *         not outcomes; callers must not pass them (they classify as
 *         TRANSIENT, the safe default for "unrecognised").
 * @phase: RX_PHASE_CONNECT or RX_PHASE_IO.
 * ETIMEDOUT at connect and EAGAIN after SO_RCVTIMEO (callers map that to
 * ETIMEDOUT) are TIMEOUT; everything else is TRANSIENT.
 * Never fails. Thread-safe, O(1), no allocation.
 * Source: docs/design.md's verdict table, ADR-003.
 */
enum rx_verdict rx_verdict_from_errno(int err, enum rx_phase phase);

/*
 * rx_verdict_is_failure - true for TRANSIENT and TIMEOUT, the verdicts a
 * circuit breaker counts as failures (ADR-003, breaker.h); false for every
 * other value, out-of-range ones included. Thread-safe, O(1), no
 * allocation.
 */
bool rx_verdict_is_failure(enum rx_verdict v);

#ifdef __cplusplus
}
#endif
#endif
