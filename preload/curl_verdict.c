/*
 * preload/curl_verdict.c - the CURLcode verdict table of the curl layer
 * (ADR-153).
 *
 * One curl_easy_perform ends with a CURLcode and, for HTTP, a status. The
 * table reads them as docs/design.md's verdict table reads errnos and statuses,
 * under two rules. A call ends at its first response byte and is judged by
 * what came back: once an http(s) transfer has its final status (101, or
 * 200 and up; a 1xx other than 101 is interim), that status is the
 * verdict, whatever CURLcode ended the transfer afterwards - a timeout
 * cutting a stream, a write error, a partial body, an abort (ADR-241).
 * Before that, a code is evidence about the destination only when the
 * destination caused it. So:
 *
 *   by status  a final status on http(s), whatever the code:
 *              rx_verdict_from_http (2xx/3xx success, 4xx answered, 429
 *              and 503 overload, 408/504 timeout, other 5xx transient),
 *              101 success (the protocol changed: the socket layer's
 *              RX_SNIFF_UPGRADE)
 *   success    CURLE_OK on a non-HTTP scheme, or with no status at all
 *   timeout    OPERATION_TIMEDOUT, FTP_ACCEPT_TIMEOUT; ABORTED_BY_CALLBACK
 *              once the transfer ran past the slow threshold
 *   transient  the destination broke or went away: COULDNT_CONNECT,
 *              SEND_ERROR, RECV_ERROR, GOT_NOTHING, PARTIAL_FILE,
 *              WEIRD_SERVER_REPLY, HTTP2, HTTP2_STREAM, HTTP3,
 *              QUIC_CONNECT_ERROR, SSL_CONNECT_ERROR (a handshake cut
 *              short: the socket layer would see the same reset), the FTP
 *              and RTSP protocol breakages, SSH, REMOTE_DISK_FULL,
 *              SSL_SHUTDOWN_FAILED, and every code this table does not
 *              know (docs/design.md: unrecognised is transient)
 *   answered   the destination answered "no", or TLS/certificate
 *              configuration does not match it: a configuration problem
 *              is not a sick server (PEER_FAILED_VERIFICATION,
 *              SSL_CACERT_BADFILE, SSL_CERTPROBLEM, SSL_CIPHER, the SSL
 *              engine, CRL, issuer, pinned key, cert status and client cert
 *              codes, USE_SSL_FAILED), access or login denied, file not
 *              found, too many redirects, bad content encoding, size
 *              limits
 *   rejected   not evidence about the destination (released, ADR-007):
 *              the program stopped the transfer (WRITE_ERROR, READ_ERROR,
 *              CHUNK_FAILED, SEND_FAIL_REWIND, ABORTED_BY_CALLBACK before
 *              the slow threshold), a local problem (OUT_OF_MEMORY,
 *              INTERFACE_FAILED, FTP_PORT_FAILED, FILE_COULDNT_READ_FILE,
 *              UNRECOVERABLE_POLL), a mistake in the program's options
 *              (URL_MALFORMAT, UNSUPPORTED_PROTOCOL, NOT_BUILT_IN,
 *              BAD_FUNCTION_ARGUMENT, UNKNOWN_OPTION, ...), name
 *              resolution (COULDNT_RESOLVE_HOST, COULDNT_RESOLVE_PROXY)
 *              and the proxy (PROXY): see ADR-153 for why DNS is not
 *              evidence.
 */
#include "config.h"

#include <stdio.h>

#include "curl_layer.h"
#include "resilix/policy.h"

bool rx__curl_final_status(long status)
{
	return status == 101 || (status >= 200 && status <= 999);
}

enum rx_verdict rx__curl_verdict(int code, long status, bool http, bool late)
{
	/* The answer came: what went wrong after it is not the
	 * destination's failure (ADR-241). CURLOPT_FAILONERROR's
	 * HTTP_RETURNED_ERROR is one such code: the status is still what
	 * happened. */
	if (http && rx__curl_final_status(status))
		return status == 101 ? RX_SUCCESS
				     : rx_verdict_from_http((int)status);

	switch (code) {
	case RX_CURLE_OK:
		if (!http || status <= 0)
			return RX_SUCCESS;
		/* An interim 1xx as the last status: no final answer. */
		return rx_verdict_from_http(status > 999 ? 0 : (int)status);
	case RX_CURLE_HTTP_RETURNED_ERROR:
		return RX_TRANSIENT; /* without a status libcurl could read */

	case RX_CURLE_OPERATION_TIMEDOUT:
	case RX_CURLE_FTP_ACCEPT_TIMEOUT:
		return RX_TIMEOUT;

	case RX_CURLE_ABORTED_BY_CALLBACK:
		/* The program gave up: not evidence, unless it had waited
		 * past the slow threshold (then it is our timeout). */
		return late ? RX_TIMEOUT : RX_REJECTED;

	/* The program's own callbacks, buffers and options; the host. */
	case RX_CURLE_WRITE_ERROR:
	case RX_CURLE_READ_ERROR:
	case RX_CURLE_CHUNK_FAILED:
	case RX_CURLE_SEND_FAIL_REWIND:
	case RX_CURLE_OUT_OF_MEMORY:
	case RX_CURLE_INTERFACE_FAILED:
	case RX_CURLE_FTP_PORT_FAILED:
	case RX_CURLE_FILE_COULDNT_READ_FILE:
	case RX_CURLE_UNRECOVERABLE_POLL:
	case RX_CURLE_UNSUPPORTED_PROTOCOL:
	case RX_CURLE_FAILED_INIT:
	case RX_CURLE_URL_MALFORMAT:
	case RX_CURLE_NOT_BUILT_IN:
	case RX_CURLE_FUNCTION_NOT_FOUND:
	case RX_CURLE_BAD_FUNCTION_ARGUMENT:
	case RX_CURLE_UNKNOWN_OPTION:
	case RX_CURLE_SETOPT_OPTION_SYNTAX:
	case RX_CURLE_BAD_DOWNLOAD_RESUME:
	case RX_CURLE_HTTP_POST_ERROR:
	case RX_CURLE_AGAIN:
	case RX_CURLE_NO_CONNECTION_AVAILABLE:
	case RX_CURLE_RECURSIVE_API_CALL:
	/* Name resolution and the proxy are not the destination. */
	case RX_CURLE_COULDNT_RESOLVE_HOST:
	case RX_CURLE_COULDNT_RESOLVE_PROXY:
	case RX_CURLE_PROXY:
		return RX_REJECTED;

	/* TLS and certificate configuration: the server is reachable and
	 * answering, the two ends just do not agree. */
	case RX_CURLE_PEER_FAILED_VERIFICATION:
	case RX_CURLE_SSL_CACERT_BADFILE:
	case RX_CURLE_SSL_CERTPROBLEM:
	case RX_CURLE_SSL_CIPHER:
	case RX_CURLE_SSL_ENGINE_NOTFOUND:
	case RX_CURLE_SSL_ENGINE_SETFAILED:
	case RX_CURLE_SSL_ENGINE_INITFAILED:
	case RX_CURLE_SSL_CRL_BADFILE:
	case RX_CURLE_SSL_ISSUER_ERROR:
	case RX_CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case RX_CURLE_SSL_INVALIDCERTSTATUS:
	case RX_CURLE_SSL_CLIENTCERT:
	case RX_CURLE_USE_SSL_FAILED:
	/* The destination answered "no". */
	case RX_CURLE_REMOTE_ACCESS_DENIED:
	case RX_CURLE_LOGIN_DENIED:
	case RX_CURLE_AUTH_ERROR:
	case RX_CURLE_FTP_COULDNT_RETR_FILE:
	case RX_CURLE_FTP_COULDNT_USE_REST:
	case RX_CURLE_FTP_PRET_FAILED:
	case RX_CURLE_QUOTE_ERROR:
	case RX_CURLE_UPLOAD_FAILED:
	case RX_CURLE_RANGE_ERROR:
	case RX_CURLE_LDAP_CANNOT_BIND:
	case RX_CURLE_LDAP_SEARCH_FAILED:
	case RX_CURLE_TOO_MANY_REDIRECTS:
	case RX_CURLE_BAD_CONTENT_ENCODING:
	case RX_CURLE_FILESIZE_EXCEEDED:
	case RX_CURLE_TFTP_NOTFOUND:
	case RX_CURLE_TFTP_PERM:
	case RX_CURLE_TFTP_ILLEGAL:
	case RX_CURLE_TFTP_UNKNOWNID:
	case RX_CURLE_TFTP_NOSUCHUSER:
	case RX_CURLE_REMOTE_FILE_EXISTS:
	case RX_CURLE_REMOTE_FILE_NOT_FOUND:
		return RX_ANSWERED;

	/* The destination failed, broke the protocol or went away; and
	 * every code not listed (docs/design.md: unrecognised is transient). */
	case RX_CURLE_COULDNT_CONNECT:
	case RX_CURLE_SEND_ERROR:
	case RX_CURLE_RECV_ERROR:
	case RX_CURLE_GOT_NOTHING:
	case RX_CURLE_PARTIAL_FILE:
	case RX_CURLE_SSL_CONNECT_ERROR:
	default:
		return RX_TRANSIENT;
	}
}

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
		/* A refusal whose reason was not recorded. */
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
