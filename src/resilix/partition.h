/*
 * resilix/partition.h - criticality buckets over a concurrency limit: a
 * partitioned limiter (Netflix concurrency-limits' AbstractPartitionedLimiter),
 * so that under pressure the lower buckets are shed first while idle
 * capacity is borrowed by whoever needs it (ADR-487).
 *
 * Each bucket b has a percentage p_b of the limit L and is guaranteed
 * share_b = max(1, ceil(L x p_b / 100)) calls in flight. The rule, for a
 * call of bucket b:
 *   - the calls in flight are below L: pass (any bucket may exceed its
 *     share while the whole is below the limit: idle capacity is borrowed);
 *   - at or above L, bucket b below its share: guaranteed - admitted even
 *     over L (NCL admits it; the whole is then bounded by L plus the other
 *     buckets' shares);
 *   - at or above L, bucket b at or above its share, and another bucket
 *     has calls in flight: shed (RX_REASON_CRITICALITY_SHED);
 *   - at or above L, bucket b alone on the key: pass - whatever sits
 *     behind this policy (the adaptive limiter: queue or refuse) decides,
 *     so a key used by one bucket only behaves as without partitions
 *     (ours: NCL refuses it, but its limiter has no queue).
 * Defaults (ADR-487): critical 50 %, degraded 25 %, best_effort 15 %,
 * bulk 10 %.
 *
 * Two ways to drive it. The guard (guard.h) asks rx_partition_decide with
 * the adaptive limiter's L and its own pressure test, then takes and gives
 * back with rx_partition_take / rx_partition_give. As a gate policy
 * (rx_partition_ops) it enforces cfg.limit itself, counting its own calls
 * in flight; the bucket is ctx->bucket.
 *
 * Plain data, no pointers: it lives in shared memory with its guard.
 * Thread safety: none; callers serialise per partition. Nothing here
 * allocates, reads a clock or blocks; every function is O(buckets).
 */
#ifndef RESILIX_PARTITION_H
#define RESILIX_PARTITION_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The buckets, highest first (the SRE book's criticalities, renamed). */
enum rx_criticality_bucket {
	RX_BUCKET_CRITICAL = 0, /* the default: an unlabelled call */
	RX_BUCKET_DEGRADED,
	RX_BUCKET_BEST_EFFORT,
	RX_BUCKET_BULK,
	RX_BUCKET_COUNT
};

/* rx_bucket_name - "critical", "degraded", "best_effort", "bulk";
 * "unknown" out of range. Static, never NULL. Thread-safe, O(1). */
const char *rx_bucket_name(enum rx_criticality_bucket b);

/* rx_bucket_parse - the bucket named @name exactly (as
 * RESILIX_CRITICALITY spells it). Returns RX_OK and *@out, or RX_EINVAL
 * (NULL or unknown; *@out untouched). Thread-safe, O(1). */
int rx_bucket_parse(const char *name, enum rx_criticality_bucket *out);

struct rx_partition_config {
	uint32_t percent[RX_BUCKET_COUNT]; /* 0..100 each, sum <= 100 */
	uint32_t limit; /* 1..1000000; the gate policy's fixed limit only
			   (the guard passes the adaptive limiter's) */
};

/* rx_partition_config_default - 50/25/15/10 and a limit of 20 (NCL's
 * initial limit). Writes only @cfg: thread-safe; O(1). */
void rx_partition_config_default(struct rx_partition_config *cfg);

/* rx_partition_config_check - RX_OK, or RX_EINVAL (also for NULL) with
 * *@why (when not NULL) at a static sentence naming the field and range.
 * Thread-safe, O(buckets). */
int rx_partition_config_check(const struct rx_partition_config *cfg,
			      const char **why);

struct rx_partition {
	struct rx_partition_config cfg;
	uint32_t busy[RX_BUCKET_COUNT]; /* admitted, not yet settled */
	uint32_t in_flight;		/* the gate policy's own total */
	uint32_t seen; /* bit b: bucket b called (the guard's, ADR-490) */
	uint64_t shed[RX_BUCKET_COUNT]; /* refused, by bucket */
};

/* rx_partition_init - an idle partition from @cfg (checked again, copied).
 * Returns RX_OK or RX_EINVAL. Not thread-safe; O(1). */
int rx_partition_init(struct rx_partition *p,
		      const struct rx_partition_config *cfg);

/* rx_partition_share - share_b for a limit of @limit calls (>= 1). An
 * out-of-range bucket counts as bulk. Read-only; O(1). */
uint32_t rx_partition_share(const struct rx_partition *p, unsigned bucket,
			    uint32_t limit);

enum rx_partition_verdict {
	RX_PARTITION_PASS = 0,	 /* let the limit behind decide */
	RX_PARTITION_GUARANTEED, /* below its share at the limit: admit */
	RX_PARTITION_SHED	 /* at or above its share at the limit */
};

/*
 * rx_partition_decide - the rule above for a call of @bucket (out of range
 * = bulk), with the limit @limit (>= 1) and @at_limit: whether the calls
 * in flight (or the backlog, as the caller measures pressure) reach it.
 * Side effect: RX_PARTITION_SHED counts in shed[bucket]. Nothing is
 * taken: the caller takes an admitted call with rx_partition_take.
 * Not thread-safe; O(buckets).
 */
enum rx_partition_verdict rx_partition_decide(struct rx_partition *p,
					      unsigned bucket, uint32_t limit,
					      bool at_limit);

/* rx_partition_take / rx_partition_give - a call of @bucket starts /
 * ends (any verdict: the counts are calls in flight). Saturating. Not
 * thread-safe; O(1). */
void rx_partition_take(struct rx_partition *p, unsigned bucket);
void rx_partition_give(struct rx_partition *p, unsigned bucket);

/* The partition as a gate policy with its fixed cfg.limit; self is a
 * struct rx_partition *. admit refuses with RX_REASON_CRITICALITY_SHED;
 * a pass at the limit is admitted too (nothing behind it decides), and
 * the ticket's flags carry the bucket. settle gives the slot back, so
 * settle(RX_REJECTED) after admit leaves it exactly as it was (ADR-007). */
extern const struct rx_policy_ops rx_partition_ops;

#ifdef __cplusplus
}
#endif
#endif
