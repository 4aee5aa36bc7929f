/*
 * preload/addr_permit.h - a connect's address permit (ADR-220) as the fd
 * record keeps it: two tickets and one byte. The byte holds the count
 * (0..2) and, on a shared key with buckets and tenants (guard.h,
 * ADR-489), the bucket the call was counted in, so that its settlement
 * gives the bucket's slot back; the tenant's row is not kept (an address
 * permit released with RX_REJECTED leaves its admission counted, which
 * decays within the tenants' half-life, ADR-488).
 */
#ifndef RESILIX_PRELOAD_ADDR_PERMIT_H
#define RESILIX_PRELOAD_ADDR_PERMIT_H

#include <stdint.h>

#include "resilix.h"

/* Pack @p into @t (two tickets); returns the byte. */
static inline uint8_t rx__addr_pack(const struct rx_gate_permit *p,
				    struct rx_ticket *t)
{
	uint32_t n = p->count < 2 ? p->count : 2;
	uint32_t b1 = p->count > 2 ? (p->tickets[2].generation >> 8) & 7 : 0;

	t[0] = p->tickets[0];
	t[1] = p->tickets[1];
	return (uint8_t)(n | b1 << 2);
}

/* The permit packed as @byte with tickets @t, into @p. */
static inline void rx__addr_unpack(struct rx_gate_permit *p, uint8_t byte,
				   const struct rx_ticket *t)
{
	uint32_t n = byte & 3, b1 = byte >> 2;

	p->tickets[0] = t[0];
	p->tickets[1] = t[1];
	p->count = n;
	if (b1 && n == 2) {
		p->tickets[2].start_ns = 0;
		p->tickets[2].generation = b1 << 8; /* bucket + 1, no row */
		p->tickets[2].flags = 0;
		p->count = 3;
	}
}

#endif
