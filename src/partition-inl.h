/*
 * partition-inl.h - the inline half of partition.c: which buckets have
 * called on a key, so that a key one bucket uses is not counted at all
 * (ADR-490). Never installed; included by partition.c and by the guard,
 * which asks it on every admission of a shared key.
 */
#ifndef RESILIX_PARTITION_INL_H
#define RESILIX_PARTITION_INL_H

#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "resilix/partition.h"

/*
 * rx__partition_note - a call of @bucket (out of range = bulk) arrives on
 * the key: remember the bucket in p->seen. Returns whether more than one
 * bucket has called since rx_partition_init. Until then the caller may
 * leave busy[] alone and skip the rule, since a bucket alone on the key
 * is never shed and what the limit behind says stands (the rule's last
 * case, ADR-487); from then on every admitted call is counted. Not
 * thread-safe (under the guard's lock); O(1): a load, a test, a store the
 * first time a bucket is seen.
 */
static RX__INLINE bool rx__partition_note(struct rx_partition *p,
					  unsigned bucket)
{
	uint32_t bit =
	    1u << (bucket < RX_BUCKET_COUNT ? bucket : RX_BUCKET_BULK);

	if (RX__UNLIKELY((p->seen & bit) == 0))
		p->seen |= bit;
	return (p->seen & (p->seen - 1)) != 0;
}

#endif
