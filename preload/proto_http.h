/*
 * preload/proto_http.h - the HTTP/1.x protocol module (proto_http.c): the
 * first module of the protocol interface (proto.h).
 *
 * Two halves. The sniffer, fed the response bytes of one call in as many
 * pieces as the application reads them, decides once it has seen
 * "HTTP/x.y NNN" (or that the bytes are not HTTP); 1xx interim responses
 * other than 101 are skipped up to the blank line that ends their headers,
 * then the next status line is read. And the request side: whether bytes
 * written begin a request line (ADR-191). Below them, the four functions
 * of the module contract (proto.h), inline: the common case of both
 * directions is decided in a few compares on the data path (ADR-187).
 * Pure: no clock, no I/O, no allocation; O(bytes fed until decided).
 */
#ifndef RESILIX_PRELOAD_PROTO_HTTP_H
#define RESILIX_PRELOAD_PROTO_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include "proto.h"

/* "GET " and "POST" as the 32-bit words memcpy reads from the bytes. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define RX_HTTP_WORD4(a, b, c, d)                                              \
	((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 |            \
	 (uint32_t)(d) << 24)
#else
#define RX_HTTP_WORD4(a, b, c, d)                                              \
	((uint32_t)(d) | (uint32_t)(c) << 8 | (uint32_t)(b) << 16 |            \
	 (uint32_t)(a) << 24)
#endif

/* ---- the sniffer ------------------------------------------------------ */

enum rx_sniff_result {
	RX_SNIFF_MORE = 0, /* undecided: feed the next bytes */
	RX_SNIFF_FINAL,	   /* a final status line: *status is set */
	RX_SNIFF_UPGRADE,  /* 101 Switching Protocols: stop tracking */
	RX_SNIFF_OTHER,	   /* the first bytes are not HTTP: a success */
	RX_SNIFF_MALFORMED /* HTTP that broke after an interim response */
};

struct RX_PROTO_STATE_TYPE rx_sniff_http {
	uint8_t state;	  /* status line or skipping interim headers */
	uint8_t pos;	  /* position within "HTTP/x.y NNN" */
	uint8_t interim;  /* interim responses seen (saturates) */
	uint8_t line_len; /* bytes on the current header line (saturates) */
	uint8_t lines;	  /* status lines begun, mod 256: a caller that sees
			     it change during a feed knows a (possibly final)
			     response began in that piece */
	uint8_t pad;
	uint16_t status; /* digits accumulated */
};

/* rx__sniff_reset - start a new response. O(1). */
void rx__sniff_reset(struct rx_sniff_http *s);

/* The byte-at-a-time sniffer behind rx__sniff_feed (proto_http.c). */
enum rx_sniff_result rx__sniff_feed_slow(struct rx_sniff_http *s,
					 const void *buf, size_t len,
					 int *status);

static inline bool rx__sniff_digit(unsigned char c)
{
	return (unsigned char)(c - '0') < 10;
}

/*
 * rx__sniff_feed - consume @len bytes of response.
 * @status (not NULL): set for RX_SNIFF_FINAL and RX_SNIFF_UPGRADE.
 * Returns RX_SNIFF_MORE until decided, then the decision. After a decision
 * the sniffer must be reset before it is fed again.
 *
 * Inline fast path (ADR-146, ADR-187): a whole final status line
 * "HTTP/d.d ddd" (first digit not 1) at the start of a fresh response -
 * the usual first read of an answer - is decided here with a few
 * compares, exactly as the byte-at-a-time machine would decide it;
 * interim responses, split status lines and everything else go to it.
 */
static inline enum rx_sniff_result rx__sniff_feed(struct rx_sniff_http *s,
						  const void *buf, size_t len,
						  int *status)
{
	const unsigned char *p = buf;

	if (s->state == 0 && s->pos == 0 && len >= 12 &&
	    __builtin_memcmp(p, "HTTP/", 5) == 0 && rx__sniff_digit(p[5]) &&
	    p[6] == '.' && rx__sniff_digit(p[7]) && p[8] == ' ' &&
	    rx__sniff_digit(p[9]) && p[9] != '1' && rx__sniff_digit(p[10]) &&
	    rx__sniff_digit(p[11])) {
		s->lines++;
		s->pos = 12;
		s->status = (uint16_t)((p[9] - '0') * 100 + (p[10] - '0') * 10 +
				       (p[11] - '0'));
		*status = s->status;
		return RX_SNIFF_FINAL;
	}
	return rx__sniff_feed_slow(s, buf, len, status);
}

/* The byte-wise check behind rx__http_request_start (proto_http.c). */
bool rx__http_request_start_slow(const struct iovec *iov, int iovcnt);

/*
 * rx__http_request_start - do the bytes @iov (@iovcnt entries; NULL when
 * unknown, as for sendfile) begin an HTTP/1.x request line: a method of
 * A-Z, '-', '_', a space and a request target's first byte (ADR-191)?
 * Reads at most 24 bytes. Pure, O(1).
 *
 * Inline fast path (ADR-214): the usual request, "GET /" or "POST /" in
 * the first buffer, is decided with two loads and compares; everything
 * else goes to the byte-wise check, which decides those the same.
 */
static inline bool rx__http_request_start(const struct iovec *iov, int iovcnt)
{
	if (iov && iovcnt > 0 && iov[0].iov_len >= 6) {
		const unsigned char *b = iov[0].iov_base;
		uint32_t w4;

		memcpy(&w4, b, 4);
		if ((w4 == RX_HTTP_WORD4('G', 'E', 'T', ' ') && b[4] == '/') ||
		    (w4 == RX_HTTP_WORD4('P', 'O', 'S', 'T') && b[4] == ' ' &&
		     b[5] == '/'))
			return true;
	}
	return rx__http_request_start_slow(iov, iovcnt);
}

RX_PROTO_STATE_FITS(struct rx_sniff_http);

/* ---- the module (proto.h's contract) ---------------------------------- */

/* rx__http_recognise - is the first request of a connection HTTP/1.x?
 * A request line begins it. */
static inline bool rx__http_recognise(const struct iovec *iov, int iovcnt)
{
	return rx__http_request_start(iov, iovcnt);
}

/* rx__http_starts - on an answered connection, a request line begins a
 * new request; anything else is the rest of a body still being sent
 * after an early response (ADR-191). */
static inline bool rx__http_starts(const struct rx_sniff_http *s,
				   const struct iovec *iov, int iovcnt)
{
	(void)s;
	return rx__http_request_start(iov, iovcnt);
}

/*
 * rx__http_reply - the status line decides: a final status is the answer,
 * judged by rx_verdict_from_http (src/verdict.c); 101 ends HTTP on the
 * connection (stop tracking it: a success); a status line broken after an
 * interim response is HTTP spoken badly (transient); bytes that do not
 * begin "HTTP/" are not HTTP. A status line that began in these bytes is
 * a reply that began: an interim 100 Continue does not count as the
 * answer's first byte.
 */
static inline void rx__http_reply(struct rx_sniff_http *s, const void *buf,
				  size_t len, struct rx_proto_reply *out)
{
	uint8_t lines = s->lines;
	int status = 0;

	switch (rx__sniff_feed(s, buf, len, &status)) {
	case RX_SNIFF_MORE:
		out->kind = RX_PROTO_MORE;
		break;
	case RX_SNIFF_FINAL:
		out->kind = RX_PROTO_REPLY;
		out->verdict = rx_verdict_from_http(status);
		break;
	case RX_SNIFF_UPGRADE:
		out->kind = RX_PROTO_LAST;
		out->verdict = RX_SUCCESS;
		break;
	case RX_SNIFF_MALFORMED:
		out->kind = RX_PROTO_REPLY;
		out->verdict = RX_TRANSIENT;
		break;
	case RX_SNIFF_OTHER:
	default:
		out->kind = RX_PROTO_NOT_MINE;
		break;
	}
	out->began = s->lines != lines;
}

/* rx__http_next - a new request: read a new response. */
static inline void rx__http_next(struct rx_sniff_http *s)
{
	memset(s, 0, sizeof(*s));
}

#endif
