/*
 * preload/retry.h - the shim's retries (retry.c): the one retry budget of
 * the process, the full-jitter backoff, one deadline per sequence, and
 * the socket layer's retry of a blocking connect (ADR-465, ADR-466). The
 * curl layer's retries draw from the same budget (and hedges will).
 *
 * Callers have rx__inside set; each function takes and drops the budget
 * lock itself (never nested with another shim lock, never held across a
 * call into libc). Thread-safe; O(1) but for rx__connect_retry, which
 * sleeps between attempts; nothing allocates.
 */
#ifndef RESILIX_PRELOAD_RETRY_H
#define RESILIX_PRELOAD_RETRY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "call.h"
#include "resilix.h"
#include "runtime.h"

/* rx__retry_on - may this process retry at all (RESILIX_RETRY_ATTEMPTS
 * above 1)? One load: the data path's whole cost when retry is off. */
static inline bool rx__retry_on(void)
{
	return rx__cfg.retry.max_attempts > 1;
}

/* rx__retry_setup - the budget, from the configuration (start-up). */
void rx__retry_setup(void);

/* Fork: take the budget lock (prepare), drop it (parent), free it
 * whoever held it (child). */
void rx__retry_lock_all(void);
void rx__retry_unlock_all(void);
void rx__retry_after_fork_child(void);

/* rx__retry_deposit - a first attempt of a call that may be retried
 * started at @now_ns: it earns the budget its share (ratio x 1000). */
void rx__retry_deposit(uint64_t now_ns);

/* rx__retry_withdraw - may a retry or a hedge start at @now_ns? true with
 * @ticket (refund it with rx__retry_refund if the attempt never runs);
 * false: budget-exceeded, counted as a refusal of @g (if not NULL) and
 * logged at debug with @key and @at. */
bool rx__retry_withdraw(uint64_t now_ns, struct rx_ticket *ticket,
			struct rx_guard *g, const char *key, const char *at);
void rx__retry_refund(const struct rx_ticket *ticket);

/* rx__retry_backoff_ns - the full-jitter delay before retry @n (0 = the
 * first retry), from this thread's generator. */
uint64_t rx__retry_backoff_ns(uint32_t n);

/* rx__retry_sleep_ns - sleep @ns (no lock held). false when a signal
 * handler ran: the caller stops retrying and keeps the last outcome. */
bool rx__retry_sleep_ns(uint64_t ns);

/*
 * rx__connect_retry - the socket layer's retry (ADR-466): called by the
 * connect wrapper when the real connect of tracked operation @op on @fd
 * returned @rc, with the real connect's errno, when rx__retry_on(). A
 * blocking connect (not a poll of a pending one) that failed with
 * ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH or ENETUNREACH is connected again
 * after a full-jitter backoff, within RESILIX_RETRY_ATTEMPTS, the budget
 * and one deadline for the sequence from @start_ns (RESILIX_TIMEOUT_MS,
 * the socket's SO_SNDTIMEO, which each retry is given only what is left
 * of). Returns the last attempt's result with its errno, as the real
 * connect would; the call stays one call of @op's admission.
 */
int rx__connect_retry(struct rx_op *op, int fd, const struct sockaddr *sa,
		      socklen_t len, int rc, uint64_t start_ns);

#endif
