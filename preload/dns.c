/*
 * preload/dns.c - getaddrinfo, observed: the address -> host name table
 * behind RESILIX_KEY=host (ADR-144).
 *
 * Design. The wrapper calls the real getaddrinfo and returns exactly what
 * it returned: the same EAI_* code, the same list, errno as it left it;
 * freeaddrinfo is not wrapped at all (the list is libc's, untouched). When
 * RESILIX_KEY=host is on and the lookup succeeded for a name (not an
 * address literal), each AF_INET/AF_INET6 address of the result is
 * remembered with the name, so a later connect to that address is keyed
 * "name:port" instead of "ip:port".
 *
 * The table is a fixed, direct-mapped array in static storage (no
 * allocation, ever): an address hashes to one slot, and a newer mapping
 * overwrites whatever shared the slot. A mapping lost that way only means
 * the connect is keyed by ip:port, the default. Each slot is a seqlock
 * whose words are all atomics, so lookups never wait and writers never
 * block: a writer that finds the slot being written by another thread
 * skips its update. No lock is held at all, so fork needs no handler; a
 * slot a thread was writing when another thread forked stays odd, and so
 * unused, in the child.
 *
 * Names longer than RX_DNS_NAME_MAX bytes are not remembered (a truncated
 * name would merge different hosts).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>

#include "base.h"
#include "dns.h"
#include "runtime.h"
#include "sockkey.h"
#include "symbols.h"

#define RX_DNS_SLOTS 512    /* power of two */
#define RX_DNS_NAME_MAX 120 /* bytes of a remembered name */
#define NAME_WORDS ((RX_DNS_NAME_MAX + 8) / 8)

struct slot {
	_Atomic uint32_t seq; /* odd while written */
	_Atomic uint32_t family;
	_Atomic uint64_t addr[2];
	_Atomic uint64_t name[NAME_WORDS]; /* NUL-terminated, padded */
};

static struct slot table[RX_DNS_SLOTS];

atomic_bool rx__dns_on;

/* The 16 address bytes of @family at @a as two words (IPv4 zero-padded). */
static void addr_words(int family, const void *a, uint64_t w[2])
{
	w[0] = w[1] = 0;
	memcpy(w, a, family == AF_INET ? 4 : 16);
}

static unsigned slot_of(const uint64_t w[2], int family)
{
	uint64_t h =
	    (w[0] ^ (w[1] * UINT64_C(0x9E3779B97F4A7C15)) ^ (uint64_t)family) *
	    UINT64_C(0xBF58476D1CE4E5B9);

	return (unsigned)(h >> 40) & (RX_DNS_SLOTS - 1);
}

static void remember(int family, const void *a, const char *name, size_t len)
{
	uint64_t w[2], words[NAME_WORDS];
	struct slot *s;
	uint32_t seq;
	size_t i;

	addr_words(family, a, w);
	s = &table[slot_of(w, family)];
	seq = atomic_load_explicit(&s->seq, memory_order_relaxed);
	if ((seq & 1) || !atomic_compare_exchange_strong_explicit(
			     &s->seq, &seq, seq + 1, memory_order_acquire,
			     memory_order_relaxed))
		return; /* another writer: its mapping will do */
	memset(words, 0, sizeof(words));
	memcpy(words, name, len);
	atomic_store_explicit(&s->family, (uint32_t)family,
			      memory_order_relaxed);
	atomic_store_explicit(&s->addr[0], w[0], memory_order_relaxed);
	atomic_store_explicit(&s->addr[1], w[1], memory_order_relaxed);
	for (i = 0; i < NAME_WORDS; i++)
		atomic_store_explicit(&s->name[i], words[i],
				      memory_order_relaxed);
	atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

size_t rx__dns_key(const struct sockaddr *sa, socklen_t len, char *key,
		   size_t size, size_t iplen)
{
	uint64_t w[2], words[NAME_WORDS];
	const void *a;
	struct slot *s;
	uint32_t s1, s2;
	unsigned port;
	size_t i, n, p;
	int family = sa->sa_family;

	if (family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		port = ntohs(
		    ((const struct sockaddr_in *)(const void *)sa)->sin_port);
	} else if (family == AF_INET6 && len >= RX_SIN6_MIN_LEN) {
		a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
		port = ntohs(
		    ((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
	} else {
		return iplen;
	}
	addr_words(family, a, w);
	s = &table[slot_of(w, family)];
	s1 = atomic_load_explicit(&s->seq, memory_order_acquire);
	if (s1 == 0 || (s1 & 1))
		return iplen;
	if (atomic_load_explicit(&s->family, memory_order_relaxed) !=
		(uint32_t)family ||
	    atomic_load_explicit(&s->addr[0], memory_order_relaxed) != w[0] ||
	    atomic_load_explicit(&s->addr[1], memory_order_relaxed) != w[1])
		return iplen;
	for (i = 0; i < NAME_WORDS; i++)
		words[i] =
		    atomic_load_explicit(&s->name[i], memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	s2 = atomic_load_explicit(&s->seq, memory_order_relaxed);
	if (s1 != s2)
		return iplen;
	n = strnlen((const char *)words, RX_DNS_NAME_MAX);
	if (n == 0 || n + 7 > size)
		return iplen;
	memcpy(key, words, n);
	p = n + rx__sockkey_port(key + n, port);
	key[p] = '\0';
	return p;
}

/* Is @node an address literal (then the ip:port key says it all)? */
static bool literal(const char *node)
{
	unsigned char buf[16];

	return inet_pton(AF_INET, node, buf) == 1 ||
	       inet_pton(AF_INET6, node, buf) == 1;
}

RX_EXPORT int getaddrinfo(const char *node, const char *service,
			  const struct addrinfo *hints, struct addrinfo **res)
{
	int rc = rx__real_getaddrinfo(node, service, hints, res);
	const struct addrinfo *ai;
	size_t len;
	int saved;

	if (rc != 0 || !node || !res ||
	    !atomic_load_explicit(&rx__dns_on, memory_order_relaxed))
		return rc;
	len = strnlen(node, RX_DNS_NAME_MAX + 1);
	if (len == 0 || len > RX_DNS_NAME_MAX)
		return rc;
	saved = errno;
	if (!literal(node)) {
		for (ai = *res; ai; ai = ai->ai_next) {
			if (!ai->ai_addr)
				continue;
			if (ai->ai_family == AF_INET &&
			    ai->ai_addrlen >= sizeof(struct sockaddr_in))
				remember(
				    AF_INET,
				    &((struct sockaddr_in *)(void *)ai->ai_addr)
					 ->sin_addr,
				    node, len);
			else if (ai->ai_family == AF_INET6 &&
				 ai->ai_addrlen >= sizeof(struct sockaddr_in6))
				remember(AF_INET6,
					 &((struct sockaddr_in6 *)(void *)
					       ai->ai_addr)
					      ->sin6_addr,
					 node, len);
		}
	}
	errno = saved;
	return rc;
}
