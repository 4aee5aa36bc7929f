/*
 * preload/curl_hedge.h - hedged libcurl transfers (curl_hedge.c,
 * ADR-469 to ADR-474): a GET or HEAD that has no first byte after a
 * delay gets a second attempt on a duplicate handle, both run with the
 * multi interface inside the program's one curl_easy_perform, and the
 * first to get a success or an answer wins.
 */
#ifndef RESILIX_PRELOAD_CURL_HEDGE_H
#define RESILIX_PRELOAD_CURL_HEDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "curl_retry.h"
#include "resilix/p2.h"

/* rx__curl_idempotent - is request method @m safe to repeat (RFC 9110
 * section 9.2.2: GET, HEAD, OPTIONS, PUT, DELETE), for retries
 * (ADR-467)? Thread-safe, O(strlen). */
bool rx__curl_idempotent(const char *m);

/* rx__curl_hedgeable - may a transfer of method @m be hedged: hedging on
 * (RESILIX_HEDGE=1), an http(s) URL (@http) and GET or HEAD, the methods
 * without a request body whose repetition changes nothing (ADR-469).
 * Thread-safe, O(1). */
bool rx__curl_hedgeable(const char *m, bool http);

/*
 * rx__curl_hedge_perform - one attempt of @t (rx__curl_retry_perform's)
 * as a hedged race (ADR-470): the program's handle @t->h runs on this
 * thread's multi handle; when it has no first byte after the key's delay
 * (RESILIX_HEDGE_DELAY_MS, else the key's p95 of time to first byte,
 * ADR-471) and the retry budget grants it, a duplicate of it
 * (curl_easy_duphandle) joins the race. The first attempt whose final
 * status is a success or an answer (2xx, 3xx, 4xx but 408 and 429) wins
 * and only its bytes reach @fwd's callbacks; an attempt that fails while
 * the other still runs is cancelled; the last one running is the
 * transfer, whatever it gets. Returns the winner's CURLcode; a
 * duplicate that won is left in @t->info (CURLINFO, ADR-472) with
 * @t->attempt_start_ns its start. Without a delay yet (fewer than
 * RX_HEDGE_MIN_SAMPLES measured) it is the plain perform. Called with
 * rx__inside clear and rx__curl_active set, so both attempts' sockets
 * pass through the socket layer: the breaker sees one call (ADR-473).
 */
int rx__curl_hedge_perform(struct rx_curl_transfer *t,
			   const struct rx_curl_cb *fwd);

/*
 * rx__curl_hedge_keep - after a perform of the program's handle @h that
 * the duplicate @dup won (NULL: none did), keep @dup so curl_easy_getinfo
 * on @h answers from it (ADR-472) until rx__curl_hedge_forget(@h) or the
 * next hedge that wins on this thread; @cleanup frees it. Returns the
 * handle whose CURLINFO describes the transfer: @dup, else @h.
 */
void *rx__curl_hedge_keep(void *h, void *dup, void (*cleanup)(void *));

/* rx__curl_hedge_forget - @h is performed again, reset or freed: its own
 * CURLINFO is its own again. Two thread-local loads when nothing is kept.
 * Never called with a shim lock held (it may call libcurl). */
void rx__curl_hedge_forget(const void *h);

/* rx__curl_refused - this thread's perform of @h was refused before
 * libcurl ran: until @h's next perform, reset or cleanup on this thread,
 * curl_easy_getinfo reads the fields libcurl resets at each transfer
 * (CURLINFO_RESPONSE_CODE, CURLINFO_HTTP_CONNECTCODE, the times, sizes,
 * addresses, CURLINFO_NUM_CONNECTS, CURLINFO_OS_ERRNO...) as libcurl
 * does after a connection refused, not the previous transfer's (ADR-597,
 * ADR-620). O(1). */
void rx__curl_refused(const void *h);

/* ---- the per-key estimate of time to first byte (pure) -------------- */

/* Samples before a key's p95 is used: 20, the fewest of which a 95th
 * percentile is not the maximum (ADR-471). */
#define RX_HEDGE_MIN_SAMPLES 20

struct rx_hedge_est {
	struct rx_p2 p95; /* microseconds of time to first byte */
};

/* rx__hedge_est_init - an empty estimate. O(1). */
void rx__hedge_est_init(struct rx_hedge_est *e);

/* rx__hedge_est_add - one attempt's time to first byte, @us
 * microseconds (or, for an attempt cancelled before its first byte, how
 * long it had waited: a lower bound, ADR-471). O(1). */
void rx__hedge_est_add(struct rx_hedge_est *e, uint64_t us);

/* rx__hedge_est_delay_ns - the delay after which a transfer without a
 * first byte is hedged: @fixed_ms when not 0, else the p95 once
 * RX_HEDGE_MIN_SAMPLES were added (at least 1 ms), else 0: no hedge yet.
 * Pure, O(1). */
uint64_t rx__hedge_est_delay_ns(const struct rx_hedge_est *e,
				uint64_t fixed_ms);

#endif
