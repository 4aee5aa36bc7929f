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

#endif
