/*
 * preload/dns.h - getaddrinfo observed for RESILIX_KEY=host (dns.c,
 * ADR-144): the address -> host name table the connect path keys by.
 */
#ifndef RESILIX_PRELOAD_DNS_H
#define RESILIX_PRELOAD_DNS_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/socket.h>

/* Set once at start-up when RESILIX_KEY=host: getaddrinfo results are
 * remembered from then on. */
extern atomic_bool rx__dns_on;

/*
 * rx__dns_key - if a getaddrinfo result of this process had @sa's address,
 * write "name:port" into @key (@size bytes) and return its length;
 * otherwise return @iplen and leave @key alone (the caller's ip:port key).
 * Never waits, no allocation, thread-safe and async-signal-safe; O(name).
 */
size_t rx__dns_key(const struct sockaddr *sa, socklen_t len, char *key,
		   size_t size, size_t iplen);

#endif
