/*
 * preload/curl_retry.h - retrying a libcurl transfer inside its one
 * admission (curl_retry.c, ADR-467): what the curl layer learns of a
 * handle's callbacks and time bound, and the perform that retries.
 */
#ifndef RESILIX_PRELOAD_CURL_RETRY_H
#define RESILIX_PRELOAD_CURL_RETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curl_abi.h"
#include "resilix.h"

/* The program's write and header callbacks and its time bound, as set
 * with curl_easy_setopt (zero: libcurl's defaults). */
struct rx_curl_cb {
	void *write_fn, *write_data; /* NULL fn: fwrite to data (stdout) */
	void *header_fn, *header_data;
	bool write_data_set;
	bool header_opt;    /* CURLOPT_HEADER: headers in the body stream */
	int64_t timeout_ms; /* CURLOPT_TIMEOUT(_MS); 0 = none */
};

/* rx__curl_cb_learn - record @option (accepted by libcurl) if it is one
 * of the above; @l the long argument, @p the pointer one. Returns true
 * when it was. O(1). */
bool rx__curl_cb_learn(struct rx_curl_cb *cb, int option, long l, void *p);

/* RX_CURL_CB_OPTIONS(X, a) - X(option, a) for each option
 * rx__curl_cb_learn records, for curl.c's filter of the options it reads
 * (ADR-560): one list, so a new one here cannot be missed there. The
 * callbacks and their data are read by every transfer that sends a body
 * too, which the header callback times (ADR-662); the timeouts by the
 * retry alone (ADR-564). */
#define RX_CURL_CB_FORWARD_OPTIONS(X, a)                                       \
	X(RX_CURLOPT_WRITEFUNCTION, a)                                         \
	X(RX_CURLOPT_WRITEDATA, a)                                             \
	X(RX_CURLOPT_HEADERFUNCTION, a)                                        \
	X(RX_CURLOPT_HEADERDATA, a)                                            \
	X(RX_CURLOPT_HEADER, a)
#define RX_CURL_CB_OPTIONS(X, a)                                               \
	RX_CURL_CB_FORWARD_OPTIONS(X, a)                                       \
	X(RX_CURLOPT_TIMEOUT, a)                                               \
	X(RX_CURLOPT_TIMEOUT_MS, a)

/* rx__curl_status_line - the status of header line @p (@n bytes) when it
 * is a status line, "HTTP/x[.y] NNN", else 0. Pure, O(n). */
long rx__curl_status_line(const char *p, size_t n);

/* The real libcurl functions the retry needs (curl.c binds them). */
typedef int (*rx_curl_perform_fn)(void *);
typedef int (*rx_curl_setopt_fn)(void *, int, ...);
typedef int (*rx_curl_getinfo_fn)(void *, int, ...);

/* One guarded transfer, as curl.c hands it over. */
struct rx_curl_transfer {
	void *h;
	const struct rx_curl_cb *cb;
	bool idempotent; /* GET, HEAD, OPTIONS, PUT, DELETE over http(s) */
	bool http;
	struct rx_guard *g;
	const char *key;
	uint64_t start_ns;	   /* the admission (the sequence's start) */
	uint64_t attempt_start_ns; /* out: the start of the last attempt */
	unsigned attempts;	   /* out: attempts made */
	rx_curl_perform_fn perform;
	rx_curl_setopt_fn setopt;
	rx_curl_getinfo_fn getinfo;
	/* Hedging (curl_hedge.h, ADR-469): set by curl.c after the above. */
	bool hedge;	     /* run each attempt as a hedged race */
	char *errbuf;	     /* the program's CURLOPT_ERRORBUFFER, or NULL */
	void *(*duphandle)(void *);
	void (*cleanup)(void *);
	void *info; /* out: the duplicate that won the last attempt, whose
		       CURLINFO describes the transfer (curl.c frees it after
		       reading it), or NULL: the program's handle's */
	uint64_t answer_ns; /* out: when the last attempt's last final
			       status line (101, 200 and up) reached the
			       header callback, 0 = none (ADR-662) */
};

/*
 * rx__curl_retry_perform - run @t's transfer, retrying what is safe
 * (ADR-467): a connect failure for every method; for idempotent methods
 * a 502, 503, 504 or 429 whose headers and body never reached the
 * program (withheld while the retry was decided, at the status line) and
 * a transfer that failed before any byte reached it. Each retry waits the
 * full-jitter backoff, or the server's Retry-After when that fits, draws
 * from the process's budget and must start before the deadline
 * (RESILIX_TIMEOUT_MS and CURLOPT_TIMEOUT(_MS), which each retry is given
 * only what is left of). Returns the CURLcode of the last attempt, whose
 * bytes alone the program got. With @t->hedge each attempt is a hedged
 * race (rx__curl_hedge_perform), whose winner's bytes alone reach these
 * wrapped callbacks. Called with rx__inside clear and
 * rx__curl_active set.
 */
int rx__curl_retry_perform(struct rx_curl_transfer *t);

#endif
