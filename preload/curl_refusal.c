/*
 * preload/curl_refusal.c - what a transfer the curl layer refused tells
 * the program: one line in its CURLOPT_ERRORBUFFER (ADR-155), naming the
 * key, the reason and when to retry. Apart from curl.c so the wrappers'
 * file keeps to the layout's bound.
 */
#include "config.h"

#include <stdio.h>

#include "admit.h"
#include "curl_layer.h"

/* The one line a refused transfer leaves in CURLOPT_ERRORBUFFER
 * (ADR-155); at most RX_CURL_ERROR_SIZE bytes, NUL included. */
void rx__curl_refusal_message(char *buf, const char *key,
			      const struct rx_refusal *why)
{
	unsigned long long ms = (unsigned long long)why->retry_after_ms;

	switch (why->reason) {
	case RX_REASON_CIRCUIT_OPEN:
		snprintf(buf, RX_CURL_ERROR_SIZE,
			 "resilix: circuit open for %.180s, retry in %llu ms",
			 key, ms);
		break;
	case RX_REASON_HALF_OPEN_BUSY:
		snprintf(buf, RX_CURL_ERROR_SIZE,
			 "resilix: circuit half-open for %.180s, a probe is in "
			 "flight",
			 key);
		break;
	case RX_REASON_NONE:
		/* Another policy than the breaker (the limiter, today). */
		snprintf(buf, RX_CURL_ERROR_SIZE,
			 "resilix: call to %.180s refused", key);
		break;
	default:
		if (ms > 0)
			snprintf(
			    buf, RX_CURL_ERROR_SIZE,
			    "resilix: call to %.180s refused (%s), retry in "
			    "%llu ms",
			    key, rx_reason_name(why->reason), ms);
		else
			snprintf(buf, RX_CURL_ERROR_SIZE,
				 "resilix: call to %.180s refused (%s)", key,
				 rx_reason_name(why->reason));
		break;
	}
}
