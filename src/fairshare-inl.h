/*
 * fairshare-inl.h - the inline half of fairshare.c: whether a second
 * tenant has called on a key, so that a key one tenant uses is not
 * counted at all (ADR-490). Never installed; included by fairshare.c and
 * by the guard, which asks it on every admission of a shared key.
 */
#ifndef RESILIX_FAIRSHARE_INL_H
#define RESILIX_FAIRSHARE_INL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "resilix/fairshare.h"

/*
 * rx__fairshare_note - a call of @tenant (0: none) arrives on the key.
 * Returns whether two non-zero tenants have called since
 * rx_fairshare_init (f->many). Until then the caller may leave the table
 * alone: one tenant alone is never shed (fairshare.h), and it starts
 * being counted when a second one arrives. The first tenant is kept in
 * f->first. Not thread-safe (under the guard's lock); O(1): two loads
 * and two tests while one tenant is alone.
 */
static RX__INLINE bool rx__fairshare_note(struct rx_fairshare *f,
					  uint32_t tenant)
{
	if (f->many)
		return true;
	if (tenant == f->first || tenant == 0)
		return false;
	if (f->first == 0) {
		f->first = tenant;
		return false;
	}
	f->many = 1;
	return true;
}

/*
 * rx__fairshare_take - rx_fairshare_take, with its usual case inline: the
 * call falls in the latest epoch taken (no division), whose slot is
 * current, and @tenant (not 0) has a row. Anything else - a new epoch, a
 * newcomer, tenant 0 - takes the full path. Same result and ticket. Not
 * thread-safe; O(tenants).
 */
static RX__INLINE void rx__fairshare_take(struct rx_fairshare *f,
					  uint32_t tenant, uint64_t now_ns,
					  struct rx_ticket *ticket)
{
	uint64_t e = f->epoch;
	unsigned s = (unsigned)(e % RX_FAIRSHARE_EPOCHS), r;

	if (now_ns < f->epoch_end_ns && tenant != 0 &&
	    f->slot_epoch[s] == e + 1)
		for (r = 0; r < RX_FAIRSHARE_TENANTS; r++)
			if (f->id[r] == tenant) {
				if (f->count[r][s] < UINT32_MAX)
					f->count[r][s]++;
				ticket->start_ns = e;
				ticket->generation = 0;
				ticket->flags = r + 1;
				return;
			}
	rx_fairshare_take(f, tenant, now_ns, ticket);
}

#endif
