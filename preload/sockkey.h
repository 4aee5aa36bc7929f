/*
 * preload/sockkey.h - the socket layer's key of a destination: "ip:port"
 * ("[v6]:port"), with an IPv4-mapped IPv6 address read as the IPv4 one
 * (ADR-194). The host-name key of RESILIX_KEY=host is dns.c's (ADR-144).
 * Inline: it runs at every new connection, and a call would cost the
 * constant sizes the compiler folds in (ADR-146). Pure: no allocation, no
 * lock; thread-safe.
 */
#ifndef RESILIX_PRELOAD_SOCKKEY_H
#define RESILIX_PRELOAD_SOCKKEY_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/*
 * RX_SIN6_MIN_LEN - the shortest AF_INET6 address the kernel connects to:
 * RFC 2133's sockaddr_in6, without sin6_scope_id (SIN6_LEN_RFC2133, 24
 * bytes; Linux's inet6 connect and sendto refuse only shorter ones). The
 * shim keys, filters and unmaps such an address like a 28-byte one and
 * never reads its scope id, so a program built with the old structure is
 * guarded too (ADR-640).
 */
#define RX_SIN6_MIN_LEN                                                        \
	((socklen_t)offsetof(struct sockaddr_in6, sin6_scope_id))

/* rx__sockkey_format - write "127.0.0.1:8080" or "[::1]:8080" for @sa
 * (@len bytes) into @buf (@size bytes, NUL-terminated). Returns the
 * length, 0 when the address is not one the shim keys on (not AF_INET or
 * AF_INET6, too short, or @size too small). IPv4 by hand: inet_ntop and
 * snprintf cost over a thousand instructions (ADR-146). O(1). */
static inline size_t rx__sockkey_format(const struct sockaddr *sa,
					socklen_t len, char *buf, size_t size)
{
	char ip[INET6_ADDRSTRLEN];
	int n;

	if (len < (socklen_t)sizeof(sa_family_t))
		return 0;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		/* By hand, the common case of every new connection:
		 * inet_ntop and snprintf cost over a thousand instructions
		 * (ADR-146). "255.255.255.255:65535" is 21 bytes. */
		const struct sockaddr_in *in = (const void *)sa;
		const uint8_t *a = (const uint8_t *)&in->sin_addr;
		char tmp[24], *p = tmp;
		unsigned v, k;

		for (k = 0; k < 5; k++) {
			v = k < 4 ? a[k] : ntohs(in->sin_port);
			if (k > 0)
				*p++ = k < 4 ? '.' : ':';
			if (v >= 10000)
				*p++ = (char)('0' + v / 10000);
			if (v >= 1000)
				*p++ = (char)('0' + v / 1000 % 10);
			if (v >= 100)
				*p++ = (char)('0' + v / 100 % 10);
			if (v >= 10)
				*p++ = (char)('0' + v / 10 % 10);
			*p++ = (char)('0' + v % 10);
		}
		n = (int)(p - tmp);
		if ((size_t)n >= size)
			return 0;
		memcpy(buf, tmp, (size_t)n);
		buf[n] = '\0';
	} else if (sa->sa_family == AF_INET6 && len >= RX_SIN6_MIN_LEN) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		if (!inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip)))
			return 0;
		n = snprintf(buf, size, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		return 0;
	}
	return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/* rx__sockkey_port - write ":PORT" (no NUL) at @dst, which has room for
 * 6 bytes, and return its length (2 to 6): the suffix of the host-name
 * keys of RESILIX_KEY=host (dns.c, tls.c). By hand, as above. O(1). */
static inline size_t rx__sockkey_port(char *dst, unsigned port)
{
	char digits[5];
	size_t n = 0, d = 0;

	do {
		digits[d++] = (char)('0' + port % 10);
		port /= 10;
	} while (port && d < sizeof(digits));
	dst[n++] = ':';
	while (d)
		dst[n++] = digits[--d];
	return n;
}

/* rx__sockkey_unmapped - an IPv4-mapped IPv6 destination (::ffff:a.b.c.d,
 * what a dual-stack AF_INET6 socket connects to for an IPv4 peer) is that
 * IPv4 destination (ADR-194): returns @sa rewritten into @buf as AF_INET,
 * with *@len updated, or @sa itself for anything else. O(1). */
static inline const struct sockaddr *
rx__sockkey_unmapped(const struct sockaddr *sa, socklen_t *len,
		     struct sockaddr_in *buf)
{
	const struct sockaddr_in6 *in6 = (const void *)sa;

	if (*len < RX_SIN6_MIN_LEN || sa->sa_family != AF_INET6 ||
	    !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return sa;
	memset(buf, 0, sizeof(*buf));
	buf->sin_family = AF_INET;
	buf->sin_port = in6->sin6_port;
	memcpy(&buf->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
	*len = sizeof(*buf);
	return (const struct sockaddr *)buf;
}

#endif
