/*
 * preload/dest.h - the destination of a connect as the socket layer keys
 * it: its "ip:port" key (sockkey.h), that key's registry hash, and whether
 * RESILIX_INCLUDE/RESILIX_EXCLUDE guard it (filter.h), remembered for the
 * thread's last destination (ADR-540).
 *
 * A program that opens a new connection per request connects to the same
 * address again and again; formatting the key, hashing it and matching
 * the filters each time cost about 350 instructions of a new connection.
 * The memo is per thread (no lock, no sharing), compared on the address
 * and port alone - the key and the filter verdict depend on nothing else,
 * and the configuration does not change after start-up. Thread-safe by
 * construction; async-signal-safe as the connect path that uses it is: a
 * signal handler's connect passes through while this thread is inside the
 * shim (rx__inside), so it never sees a memo half written.
 */
#ifndef RESILIX_PRELOAD_DEST_H
#define RESILIX_PRELOAD_DEST_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "base.h"
#include "sockkey.h"

/* Room for the longest IP key: "[" + 45 bytes of inet_ntop + "]:65535". */
#define RX_DEST_KEY_MAX 63

/* The memo of a thread's last destination. */
struct rx_dest_memo {
	uint8_t family;	 /* AF_INET or AF_INET6; 0: empty */
	uint8_t guarded; /* the filters guard it */
	uint8_t len;	 /* strlen(key) */
	uint16_t port;	 /* network order */
	uint32_t hash;	 /* rx_registry_hash(key, len) */
	uint8_t addr[16];
	char key[RX_DEST_KEY_MAX + 1];
};

extern RX_TLS struct rx_dest_memo rx__dest_memo;

/* rx__dest_fill - format, hash and filter @sa (@family, @addr - 4 or 16
 * bytes - and @port, network order) into the thread's memo (dest.c).
 * Returns false when the shim keys no such destination. */
bool rx__dest_fill(const struct sockaddr *sa, socklen_t len, int family,
		   const uint8_t *addr, uint16_t port);

/*
 * rx__dest_of - the thread's memo, made to describe @sa (@len bytes): an
 * AF_INET or AF_INET6 address, IPv4-mapped ones already unmapped
 * (sockkey.h). Returns the memo - key, len, hash and guarded valid until
 * this thread's next rx__dest_of - or NULL when @sa is not a destination
 * the shim keys on (another family, too short). O(1); no allocation.
 */
static inline const struct rx_dest_memo *rx__dest_of(const struct sockaddr *sa,
						     socklen_t len)
{
	struct rx_dest_memo *m = &rx__dest_memo;
	const uint8_t *addr;
	uint16_t port;
	size_t n;

	if (len < (socklen_t)sizeof(sa_family_t))
		return NULL;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;

		addr = (const uint8_t *)&in->sin_addr;
		port = in->sin_port;
		n = 4;
	} else if (sa->sa_family == AF_INET6 && len >= RX_SIN6_MIN_LEN) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		addr = (const uint8_t *)&in6->sin6_addr;
		port = in6->sin6_port;
		n = 16;
	} else {
		return NULL;
	}
	/* Constant sizes: the compiler compares in registers. */
	if (m->family == sa->sa_family && m->port == port &&
	    (n == 4 ? memcmp(m->addr, addr, 4) : memcmp(m->addr, addr, 16)) ==
		0)
		return m;
	return rx__dest_fill(sa, len, sa->sa_family, addr, port) ? m : NULL;
}

/*
 * rx__dest_host_key - under RESILIX_KEY=host (ADR-144), the key of a
 * connect to @sa whose address key is memo @d's: the host name's
 * "name:port" when dns.c knows a name for the address, written into
 * @hostkey (RX_KEY_MAX + 1 bytes), with *@key set to @hostkey and *@hash
 * to its rx_registry_hash; else *@key and *@hash stay the address's.
 * Returns the key's length. O(key length).
 */
size_t rx__dest_host_key(const struct rx_dest_memo *d,
			 const struct sockaddr *sa, socklen_t len,
			 char *hostkey, const char **key, uint32_t *hash);

#endif
