/*
 * preload/dest.c - the memo of a thread's last connect destination
 * (dest.h, ADR-540), filled here when a connect goes to another address
 * than the thread's last one; and the host-name key that replaces the
 * address's under RESILIX_KEY=host (ADR-144).
 */
#include "config.h"

#include "dest.h"
#include "dns.h"
#include "filter.h"
#include "resilix.h"
#include "runtime.h"
#include "sockkey.h"

RX_TLS struct rx_dest_memo rx__dest_memo;

bool rx__dest_fill(const struct sockaddr *sa, socklen_t len, int family,
		   const uint8_t *addr, uint16_t port)
{
	struct rx_dest_memo *m = &rx__dest_memo;
	size_t n = rx__sockkey_format(sa, len, m->key, sizeof(m->key));

	if (n == 0) {
		m->family = 0;
		return false;
	}
	m->len = (uint8_t)n;
	m->hash = rx_registry_hash(m->key, n);
	m->guarded =
	    rx_filter_guarded(&rx__cfg.include, &rx__cfg.exclude, sa, len);
	memcpy(m->addr, addr, family == AF_INET ? 4 : 16);
	m->port = port;
	m->family = (uint8_t)family;
	return true;
}

size_t rx__dest_host_key(const struct rx_dest_memo *d,
			 const struct sockaddr *sa, socklen_t len,
			 char *hostkey, const char **key, uint32_t *hash)
{
	size_t n;

	memcpy(hostkey, d->key, d->len + 1u);
	n = rx__dns_key(sa, len, hostkey, RX_KEY_MAX + 1, d->len);
	if (n == d->len && memcmp(hostkey, d->key, n) == 0)
		return n;
	*key = hostkey;
	*hash = rx_registry_hash(hostkey, n);
	return n;
}
