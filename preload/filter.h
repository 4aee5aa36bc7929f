/*
 * preload/filter.h - which destinations the shim guards: the patterns of
 * RESILIX_INCLUDE and RESILIX_EXCLUDE (ADR-143).
 *
 * A pattern list is comma-separated; each pattern is one of
 *   CIDR       10.0.0.0/8, 192.168.1.7, ::1/128, fd00::/8 (a bare address
 *              is a /32 or /128), any port;
 *   ip:port    127.0.0.1:8080, [::1]:8080 (IPv6 in brackets);
 *   *:port     any address, that port;
 *   CIDR:port  10.0.0.0/8:443, [fd00::]/8:443.
 * Spaces around a pattern are allowed; an empty pattern (",,") is not.
 * Addresses are literals only: a host name would need a resolver at
 * start-up, which may block or allocate. IPv4-mapped IPv6 destinations
 * (::ffff:a.b.c.d) also match IPv4 patterns.
 *
 * A destination is guarded when the include list is empty or one of its
 * patterns matches, and no exclude pattern matches. Port 53 (DNS over
 * TCP) is never guarded unless an include pattern names port 53
 * explicitly.
 *
 * Parsing fills a fixed table (RX_FILTER_MAX patterns per list): no
 * allocation, no locale, no global state. Matching is O(patterns) with no
 * allocation and no lock; it runs at admission only (connect, and the
 * curl layer's transfers, ADR-240), never on the I/O path.
 */
#ifndef RESILIX_PRELOAD_FILTER_H
#define RESILIX_PRELOAD_FILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define RX_FILTER_MAX 32 /* patterns per list */

struct rx_filter_pattern {
	uint8_t family;	  /* AF_INET, AF_INET6, or 0 for "*" */
	uint8_t prefix;	  /* bits of addr that must match */
	uint16_t port;	  /* host order; 0 = any port */
	uint8_t addr[16]; /* network order, 4 or 16 bytes used */
};

struct rx_filter {
	uint32_t count;
	struct rx_filter_pattern p[RX_FILTER_MAX];
};

/*
 * rx_filter_parse - parse a comma-separated pattern list into @f.
 * @text: the list; NULL or "" is invalid (the caller decides what unset
 *        means). @why/@why_size: on failure, the offending pattern and
 *        what is wrong with it, one line.
 * Returns 0, or -1 on the first malformed pattern or more than
 * RX_FILTER_MAX patterns. Reentrant, no allocation, O(length).
 */
int rx_filter_parse(struct rx_filter *f, const char *text, char *why,
		    size_t why_size);

/*
 * rx_filter_guarded - should a connect to @sa be guarded under @include
 * and @exclude (either may be NULL or empty)? @sa must be AF_INET or
 * AF_INET6 of at least the family's sockaddr size; anything else is not
 * guarded. Thread-safe, async-signal-safe, O(patterns).
 */
bool rx_filter_guarded(const struct rx_filter *include,
		       const struct rx_filter *exclude,
		       const struct sockaddr *sa, socklen_t len);

/* What the lists say about a destination whose address is not known. */
enum rx_filter_answer {
	RX_FILTER_NO = 0,      /* not guarded, whatever the address */
	RX_FILTER_DEPENDS = 1, /* an address pattern decides */
	RX_FILTER_YES = 2      /* guarded, whatever the address */
};

/*
 * rx_filter_guarded_port - should a call to @port (host order, 1..65535)
 * on an address not known yet (a host name the program has not resolved)
 * be guarded under @include and @exclude (either may be NULL or empty)?
 * Only the patterns that match every address (none, or "*:port") can
 * decide it; when an address pattern could change the answer, it is
 * RX_FILTER_DEPENDS, and the connect's address must decide (ADR-240).
 * YES and NO are what rx_filter_guarded answers for every address at
 * @port. Thread-safe, async-signal-safe, O(patterns).
 */
enum rx_filter_answer rx_filter_guarded_port(const struct rx_filter *include,
					     const struct rx_filter *exclude,
					     uint16_t port);

#endif
