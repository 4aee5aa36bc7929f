/*
 * preload/curl_layer.h - internal interfaces of the curl layer (curl.c,
 * curl_verdict.c), kept apart from the shim's other headers so the verdict table and the
 * URL parser can be unit-tested without the rest of the shim.
 *
 * Both functions are pure: no clock, no locks, no allocation, no I/O.
 */
#ifndef RESILIX_PRELOAD_CURL_LAYER_H
#define RESILIX_PRELOAD_CURL_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "curl_abi.h"
#include "resilix/policy.h"
#include "resilix/verdict.h"

/*
 * rx__curl_verdict - the verdict of one curl_easy_perform (ADR-153,
 * ADR-241).
 * @code:   the CURLcode it returned; any int (unknown codes: TRANSIENT).
 * @status: CURLINFO_RESPONSE_CODE, 0 when there was none or getinfo
 *          failed, or when it is not this transfer's answer (the caller
 *          passes 0 for a 3xx whose redirect libcurl was following).
 * @http:   the URL's scheme is http or https, so @status is an HTTP status
 *          (FTP and SMTP report their own reply codes there).
 * @late:   the transfer ran at least the slow threshold, or past
 *          RESILIX_TIMEOUT_MS (only meaningful for
 *          CURLE_ABORTED_BY_CALLBACK: an abandonment after that long is a
 *          timeout, docs/design.md "Client-side abandonment", ADR-145).
 * Returns the verdict of the final HTTP status when @http and
 * rx__curl_final_status(@status), whatever @code; else @code's, from
 * the table in curl_verdict.c. Thread-safe, O(1).
 */
enum rx_verdict rx__curl_verdict(int code, long status, bool http, bool late);

/*
 * rx__curl_final_status - is @status (CURLINFO_RESPONSE_CODE of an http(s)
 * transfer) a final answer: 101 Switching Protocols, or 200..999? 0 (none)
 * and the interim 1xx (100 Continue, 103 Early Hints), which libcurl
 * also reports there while it waits for the final one, are not.
 * Thread-safe, O(1).
 */
bool rx__curl_final_status(long status);

/* The parts of a URL a key is built from. */
struct rx_curl_url {
	char scheme[16];   /* lower case, e.g. "https" */
	char host[256];	   /* lower case; IPv6 literals keep their [] */
	char path[256];	   /* from the first '/' up to '?' or '#'; "/"
			      when empty; truncated to fit */
	uint16_t port;	   /* explicit port, else the scheme's default */
	bool port_given;   /* the URL named the port */
	bool scheme_given; /* the URL named the scheme ("x://") */
	uint8_t family;	   /* AF_INET or AF_INET6 when host is an address
			      literal (ADR-240), else 0: a name */
	uint8_t addr[16];  /* that address, network order, 4 or 16 bytes */
};

/*
 * rx__curl_parse_url - split @url the way libcurl reads it, far enough to
 * key it: scheme (or, without "scheme://", @default_scheme, else libcurl's
 * guess from the host name: "ftp." -> ftp, otherwise http), user info
 * dropped, host lower-cased, port (or the scheme's default), path without
 * query and fragment; and whether the host is an IPv4 or IPv6 address
 * literal (in the forms inet_pton reads; an IPv6 zone, or a short form
 * such as "127.1" that libcurl widens, counts as a name).
 * Returns true when @out is filled; false for NULL, an empty host, a bad
 * port, a scheme we know no default port for or one without a network
 * (file:), so the transfer is left to the socket layer.
 * Thread-safe, O(strlen(url)), no allocation.
 */
bool rx__curl_parse_url(const char *url, const char *default_scheme,
			struct rx_curl_url *out);

/*
 * rx__curl_default_port - the port a URL of @scheme (lower case) uses when
 * it names none. Returns false for a scheme without one we know (file:).
 * Thread-safe, O(schemes).
 */
bool rx__curl_default_port(const char *scheme, uint16_t *port);

/*
 * rx__curl_refusal_message - the one line a refused transfer leaves in the
 * program's CURLOPT_ERRORBUFFER (ADR-155), naming @key and @why's reason
 * (and retry-after when known): at most RX_CURL_ERROR_SIZE bytes in @buf,
 * NUL included. Thread-safe, O(1).
 */
void rx__curl_refusal_message(char *buf, const char *key,
			      const struct rx_refusal *why);

#endif
