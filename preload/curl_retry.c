/*
 * preload/curl_retry.c - a libcurl transfer retried inside its one
 * admission (curl_retry.h; ADR-467).
 *
 * Only what has not reached the program is retried. A connect failure
 * sent nothing, whatever the method. For an idempotent method (GET, HEAD,
 * OPTIONS, PUT, DELETE) an answered 502, 503, 504 or 429 is retried too,
 * and its bytes must never reach the program: while the transfer runs,
 * the handle's write and header callbacks are ours, forwarding to the
 * program's (or to libcurl's default, fwrite to the WRITEDATA file); at a
 * final status line of one of those codes the retry is decided there and
 * then - attempts left, the backoff fits the deadline, the budget grants
 * it - and the response's headers and body are swallowed, nothing
 * buffered. A refused retry leaves the response to the program: the
 * first attempt's outcome stands. The program's own callbacks and time
 * bound are put back when perform returns, so between transfers the
 * handle is exactly as the program set it.
 *
 * The delay is the full-jitter backoff, or the server's Retry-After (in
 * seconds) when it fits before the deadline; the deadline is
 * RESILIX_TIMEOUT_MS and the program's CURLOPT_TIMEOUT(_MS), both from
 * the transfer's start, and a retry is given only what is left of the
 * latter, so a retry never extends what the program asked for. The
 * breaker and the other policies see the transfer once: curl.c settles
 * the last attempt's outcome. The budget is the process's (retry.c).
 *
 * The same callbacks time the answer: the arrival of each attempt's last
 * final status line is handed back in answer_ns. curl.c runs every
 * transfer that sends a body through here for that alone, retries off
 * (one attempt, no budget touched), because libcurl before 8.3.0 times
 * such a transfer's first byte where its body started to go out
 * (ADR-662).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "curl_abi.h"
#include "curl_hedge.h"
#include "curl_layer.h"
#include "curl_retry.h"
#include "log.h"
#include "retry.h"
#include "runtime.h"

typedef size_t (*data_fn)(char *, size_t, size_t, void *);

bool rx__curl_cb_learn(struct rx_curl_cb *cb, int option, long l, void *p)
{
	switch (option) {
	case RX_CURLOPT_WRITEFUNCTION:
		cb->write_fn = p;
		return true;
	case RX_CURLOPT_WRITEDATA:
		cb->write_data = p;
		cb->write_data_set = true;
		return true;
	case RX_CURLOPT_HEADERFUNCTION:
		cb->header_fn = p;
		return true;
	case RX_CURLOPT_HEADERDATA:
		cb->header_data = p;
		return true;
	case RX_CURLOPT_HEADER:
		cb->header_opt = l != 0;
		return true;
	case RX_CURLOPT_TIMEOUT:
		cb->timeout_ms = l > 0 ? (int64_t)l * 1000 : 0;
		return true;
	case RX_CURLOPT_TIMEOUT_MS:
		cb->timeout_ms = l > 0 ? l : 0;
		return true;
	default:
		return false;
	}
}

/* One transfer's attempts, the callbacks' user data. */
struct attempt {
	struct rx_curl_transfer *t;
	unsigned n;	    /* this attempt, 0 = the first */
	bool withhold;	    /* the response being read is not the program's */
	bool retry;	    /* a retry was granted at its status line */
	bool delivered;	    /* a byte reached the program */
	long status;	    /* the withheld response's */
	uint64_t delay_ns;  /* the backoff granted with it */
	uint64_t retry_after_ms;
	uint64_t deadline;  /* monotonic ns, 0 = none */
	struct rx_ticket ticket;
};

static bool retriable_status(long s)
{
	return s == 502 || s == 503 || s == 504 || s == 429;
}

/* Failed before any byte reached the program: a connect failure for
 * every method; a reset or nothing at all for idempotent ones. */
static bool retriable_code(const struct attempt *a, int rc)
{
	if (rc == RX_CURLE_COULDNT_CONNECT)
		return true;
	return a->t->idempotent && (rc == RX_CURLE_GOT_NOTHING ||
				    rc == RX_CURLE_SEND_ERROR ||
				    rc == RX_CURLE_RECV_ERROR);
}

/* Grant a retry now: attempts left, the backoff fits, the budget. */
static bool grant(struct attempt *a, const char *why)
{
	uint64_t now, delay;
	bool ok;

	if (a->delivered || a->n + 1 >= rx__cfg.retry.max_attempts)
		return false;
	rx__inside = 1;
	delay = rx__retry_backoff_ns(a->n);
	now = rx__now_ns();
	ok = rx_retry_fits(a->deadline, now, delay) &&
	     rx__retry_withdraw(now, &a->ticket, a->t->g, a->t->key, why);
	rx__inside = 0;
	if (ok)
		a->delay_ns = delay;
	return ok;
}

long rx__curl_status_line(const char *p, size_t n)
{
	size_t i = 5;

	if (n < 12 || memcmp(p, "HTTP/", 5) != 0)
		return 0;
	while (i < n && p[i] != ' ')
		i++;
	if (i + 4 > n || p[i + 1] < '1' || p[i + 1] > '9' || p[i + 2] < '0' ||
	    p[i + 2] > '9' || p[i + 3] < '0' || p[i + 3] > '9')
		return 0;
	return (p[i + 1] - '0') * 100 + (p[i + 2] - '0') * 10 + (p[i + 3] - '0');
}

/* "Retry-After: <seconds>" (an HTTP date is ignored: the backoff then). */
static void retry_after(struct attempt *a, const char *p, size_t n)
{
	static const char name[] = "retry-after:";
	uint64_t v = 0;
	size_t i;

	if (n < sizeof(name))
		return;
	for (i = 0; i < sizeof(name) - 1; i++) {
		char c = p[i];

		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		if (c != name[i])
			return;
	}
	while (i < n && p[i] == ' ')
		i++;
	if (i >= n || p[i] < '0' || p[i] > '9')
		return;
	for (; i < n && p[i] >= '0' && p[i] <= '9' && v < 86400; i++)
		v = v * 10 + (uint64_t)(p[i] - '0');
	a->retry_after_ms = v * 1000;
}

static size_t to_program(data_fn fn, void *data, bool data_set, char *p,
			 size_t size, size_t nmemb)
{
	if (fn)
		return fn(p, size, nmemb, data);
	return fwrite(p, size, nmemb, data_set ? data : stdout);
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct attempt *a = ud;
	const struct rx_curl_cb *cb = a->t->cb;

	if (a->withhold)
		return size * nmemb;
	if (size * nmemb > 0)
		a->delivered = true;
	return to_program((data_fn)cb->write_fn, cb->write_data,
			  cb->write_data_set, p, size, nmemb);
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct attempt *a = ud;
	const struct rx_curl_cb *cb = a->t->cb;
	size_t n = size * nmemb;
	long s = rx__curl_status_line(p, n);

	if (s > 0) {
		/* A new response: interim ones (1xx) reach the program. A
		 * final one times the answer (ADR-662); the last one, when
		 * redirects are followed. */
		if (s >= 200 || s == 101)
			a->t->answer_ns = rx__now_ns();
		a->withhold = false;
		if (s >= 200 && a->t->http && a->t->idempotent &&
		    retriable_status(s) && grant(a, "curl-status")) {
			a->withhold = a->retry = true;
			a->status = s;
			a->retry_after_ms = 0;
		}
	}
	if (a->withhold) {
		retry_after(a, p, n);
		return n;
	}
	a->delivered = true;
	if (cb->header_fn)
		return ((data_fn)cb->header_fn)(p, size, nmemb, cb->header_data);
	/* libcurl's rule: no header function but header data - the write
	 * function writes the headers there; neither - nowhere. */
	if (cb->header_data)
		return to_program((data_fn)cb->write_fn, cb->header_data, true, p,
				  size, nmemb);
	return n;
}

/* Put the program's callbacks and bound back (also on the way out). */
static void restore(const struct rx_curl_transfer *t, bool timeout_changed)
{
	const struct rx_curl_cb *cb = t->cb;

	t->setopt(t->h, RX_CURLOPT_WRITEFUNCTION, (data_fn)cb->write_fn);
	t->setopt(t->h, RX_CURLOPT_WRITEDATA,
		  cb->write_data_set ? cb->write_data : (void *)stdout);
	t->setopt(t->h, RX_CURLOPT_HEADERFUNCTION, (data_fn)cb->header_fn);
	t->setopt(t->h, RX_CURLOPT_HEADERDATA, cb->header_data);
	if (timeout_changed)
		t->setopt(t->h, RX_CURLOPT_TIMEOUT_MS, (long)cb->timeout_ms);
}

int rx__curl_retry_perform(struct rx_curl_transfer *t)
{
	struct attempt a;
	/* What a hedged race forwards its winner's bytes to: these. */
	const struct rx_curl_cb fwd = {(void *)on_write, &a, (void *)on_header,
				       &a, true, false, 0};
	bool timeout_changed = false;
	uint64_t now;
	int rc;

	memset(&a, 0, sizeof(a));
	a.t = t;
	if (rx__cfg.timeout_ms > 0)
		a.deadline = t->start_ns + rx__cfg.timeout_ms * RX_NS_PER_MS;
	if (t->cb->timeout_ms > 0 &&
	    (a.deadline == 0 ||
	     t->start_ns + (uint64_t)t->cb->timeout_ms * RX_NS_PER_MS <
		 a.deadline))
		a.deadline = t->start_ns + (uint64_t)t->cb->timeout_ms * RX_NS_PER_MS;
	if (rx__retry_on() || t->hedge) { /* not when only timing, ADR-662 */
		rx__inside = 1;
		rx__retry_deposit(t->start_ns);
		rx__inside = 0;
	}
	t->setopt(t->h, RX_CURLOPT_WRITEFUNCTION, on_write);
	t->setopt(t->h, RX_CURLOPT_WRITEDATA, &a);
	t->setopt(t->h, RX_CURLOPT_HEADERFUNCTION, on_header);
	t->setopt(t->h, RX_CURLOPT_HEADERDATA, &a);
	for (;;) {
		uint64_t delay;

		a.withhold = a.retry = false;
		t->answer_ns = 0;
		t->attempt_start_ns = rx__now_ns();
		rc = t->hedge ? rx__curl_hedge_perform(t, &fwd)
			      : t->perform(t->h);
		t->attempts = a.n + 1;
		if (a.retry) {
			delay = a.delay_ns;
			now = rx__now_ns();
			/* The server's word when it fits, else the backoff. */
			if (a.retry_after_ms > 0 &&
			    rx_retry_fits(a.deadline, now,
					  a.retry_after_ms * RX_NS_PER_MS))
				delay = a.retry_after_ms * RX_NS_PER_MS;
		} else if (rc != RX_CURLE_OK && retriable_code(&a, rc) &&
			   grant(&a, "curl-error")) {
			delay = a.delay_ns;
		} else {
			break;
		}
		rx__inside = 1;
		rx__log(RX_LOG_DEBUG,
			"key=%s event=retry at=curl attempt=%u status=%ld "
			"curlcode=%d delay_ms=%llu",
			t->key, a.n + 2, a.retry ? a.status : 0L, rc,
			(unsigned long long)(delay / RX_NS_PER_MS));
		rx__inside = 0;
		if (delay > 0 && !rx__retry_sleep_ns(delay) && !a.retry) {
			/* A signal: the program hears of the failure now. A
			 * withheld answer must still be replaced. */
			rx__inside = 1;
			rx__retry_refund(&a.ticket);
			rx__inside = 0;
			break;
		}
		if (t->cb->timeout_ms > 0) {
			/* What is left of the program's bound, at least 1 ms
			 * (0 would mean none): past it, the attempt times out
			 * at once, as the program's transfer would have. */
			uint64_t end = a.deadline, left;

			now = rx__now_ns();
			left = end > now ? (end - now) / RX_NS_PER_MS : 0;
			t->setopt(t->h, RX_CURLOPT_TIMEOUT_MS,
				  (long)(left > 0 ? left : 1));
			timeout_changed = true;
		}
		a.n++;
	}
	restore(t, timeout_changed);
	return rc;
}
