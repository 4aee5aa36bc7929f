/*
 * preload/proto_http.c - the HTTP/1.x protocol module: read the status of an
 * HTTP/1.x response from its first bytes, however the application splits its
 * reads.
 *
 * Design. A byte-at-a-time state machine over "HTTP/" DIGIT ["." DIGIT]
 * SP DIGIT DIGIT DIGIT, kept in a few bytes of the fd's entry, so a status
 * line that arrives as "HT" + "TP/1.1 5" + "03 ..." still parses. It
 * decides at the third status digit and never looks further (the reason
 * phrase is free text). Rules (docs/design.md section 3, "What is a call"):
 *   - the first byte of a response that does not continue "HTTP/" means
 *     another protocol: RX_SNIFF_OTHER, a success on the first byte;
 *   - 1xx other than 101 is interim (100 Continue, 103 Early Hints): its
 *     header block is skipped up to the blank line, then the next status
 *     line is read as the real answer;
 *   - 101 Switching Protocols ends HTTP on the connection: RX_SNIFF_UPGRADE
 *     tells the caller to stop tracking it;
 *   - a broken status line after an interim response is RX_SNIFF_MALFORMED
 *     (the server speaks HTTP badly: an unrecognised outcome).
 * "HTTP/2 200" is accepted for tolerance, although HTTP/2 never sends a
 * status line on the wire. Pure: no clock, no I/O, no allocation. The
 * common case - a whole final status line at the start of a response - is
 * decided by the inline rx__sniff_feed in proto_http.h before this machine is
 * called at all (ADR-187).
 *
 * The other direction, once: rx__http_request_start tells whether a write
 * on a connection whose last response began starts a new request (a
 * method and a space) or continues the current one (ADR-191).
 */
#include "config.h"

#include <string.h>

#include "proto_http.h"

enum { S_STATUS = 0, S_SKIP = 1 };

/* Positions within the status line. */
enum {
	P_H = 0, /* 0..4: "HTTP/" */
	P_MAJOR = 5,
	P_DOT = 6, /* '.' or, for "HTTP/2 200", the space */
	P_MINOR = 7,
	P_SP = 8,
	P_CODE = 9 /* 9, 10, 11: the three digits */
};

void rx__sniff_reset(struct rx_sniff_http *s)
{
	memset(s, 0, sizeof(*s));
}

static bool is_digit(unsigned char c)
{
	return c >= '0' && c <= '9';
}

/* Does @c continue the status line at @s->pos? Advances pos when it does. */
static bool status_step(struct rx_sniff_http *s, unsigned char c)
{
	static const char http[] = "HTTP/";

	if (s->pos < P_MAJOR) {
		if (c != (unsigned char)http[s->pos])
			return false;
	} else if (s->pos == P_MAJOR || s->pos == P_MINOR) {
		if (!is_digit(c))
			return false;
	} else if (s->pos == P_DOT) {
		if (c == ' ') {
			s->pos = P_CODE; /* "HTTP/2 200": no minor version */
			return true;
		}
		if (c != '.')
			return false;
	} else if (s->pos == P_SP) {
		if (c != ' ')
			return false;
	} else {
		if (!is_digit(c))
			return false;
		s->status = (uint16_t)(s->status * 10 + (c - '0'));
	}
	s->pos++;
	return true;
}

/* The inline rx__sniff_feed (proto_http.h) decides a whole final status line at
 * the start of a fresh response itself, with these positions. */
_Static_assert(S_STATUS == 0 && P_CODE + 3 == 12,
	       "proto_http.h's rx__sniff_feed fast path uses these positions");

enum rx_sniff_result rx__sniff_feed_slow(struct rx_sniff_http *s,
					 const void *buf, size_t len,
					 int *status)
{
	const unsigned char *p = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = p[i];

		if (s->state == S_SKIP) {
			/* Skip an interim response's headers to the blank
			 * line; tolerate bare LF line ends. */
			if (c == '\n') {
				if (s->line_len == 0) {
					s->state = S_STATUS;
					s->pos = 0;
					s->status = 0;
				}
				s->line_len = 0;
			} else if (c != '\r' && s->line_len < 255) {
				s->line_len++;
			}
			continue;
		}
		if (s->pos == 0)
			s->lines++; /* a response begins with this byte */
		if (!status_step(s, c))
			return s->interim ? RX_SNIFF_MALFORMED : RX_SNIFF_OTHER;
		if (s->pos < P_CODE + 3)
			continue;
		/* Three status digits: decided, unless interim. */
		*status = s->status;
		if (s->status == 101)
			return RX_SNIFF_UPGRADE;
		if (s->status >= 100 && s->status <= 199) {
			if (s->interim < 255)
				s->interim++;
			s->state = S_SKIP;
			s->line_len = 1; /* the rest of the status line */
			continue;
		}
		return RX_SNIFF_FINAL;
	}
	return RX_SNIFF_MORE;
}

/*
 * Does a write whose bytes are @iov start an HTTP/1.x request (ADR-191)?
 * The rule: a method - 1 to 20 characters of A-Z, '-' or '_', the first
 * A-Z (RFC 9110 allows any token, but every registered method is upper
 * case, and request bodies, chunk sizes and JSON rarely are) - then one
 * space, then the first byte of a request target: '/' (origin form), '*'
 * (asterisk form), 'h' or 'H' (absolute form, "http://"), or for CONNECT
 * a letter, digit or '[' (authority form). A write that ends before the
 * rule decides, with every byte so far fitting it ("GET", "POST "), is a
 * start: a request line written in pieces. Reads at most 24 bytes, from
 * the first iovec entries; called only for a tracked fd. O(1).
 */
bool rx__http_request_start_slow(const struct iovec *iov, int iovcnt)
{
	unsigned char buf[24];
	const unsigned char *b = buf;
	size_t n = 0, m = 0, take;
	unsigned char c;
	int i;

	if (iov && iovcnt > 0 &&
	    (iovcnt == 1 || iov[0].iov_len >= sizeof(buf))) {
		/* The bytes to judge are all in the first entry (a write or
		 * a send): read them in place, the same bytes the copy below
		 * would gather, without a memcpy call per request (ADR-187). */
		b = iov[0].iov_base;
		n = iov[0].iov_len < sizeof(buf) ? iov[0].iov_len : sizeof(buf);
	} else {
		for (i = 0; iov && i < iovcnt && n < sizeof(buf); i++) {
			take = iov[i].iov_len < sizeof(buf) - n
				   ? iov[i].iov_len
				   : sizeof(buf) - n;
			if (take > 0)
				memcpy(buf + n, iov[i].iov_base, take);
			n += take;
		}
	}
	/* The usual request, "GET /" or "POST /", decided with two loads
	 * and compares; the loop below would decide the same (ADR-214). */
	if (n >= 6) {
		uint32_t w4;

		memcpy(&w4, b, 4);
		if ((w4 == RX_HTTP_WORD4('G', 'E', 'T', ' ') && b[4] == '/') ||
		    (w4 == RX_HTTP_WORD4('P', 'O', 'S', 'T') && b[4] == ' ' &&
		     b[5] == '/'))
			return true;
	}
	while (m < n && m < 20 &&
	       ((b[m] >= 'A' && b[m] <= 'Z') ||
		(m > 0 && (b[m] == '-' || b[m] == '_'))))
		m++;
	if (m == 0)
		return false;
	if (m == n)
		return true;
	if (b[m] != ' ')
		return false;
	if (m + 1 == n)
		return true;
	c = b[m + 1];
	if (c == '/' || c == '*' || c == 'h' || c == 'H')
		return true;
	return m == 7 && memcmp(b, "CONNECT", 7) == 0 &&
	       ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '[');
}
