/*
 * partition.c - criticality buckets over a concurrency limit
 * (resilix/partition.h; Netflix concurrency-limits'
 * AbstractPartitionedLimiter; ADR-487).
 */
#include <string.h>

#include "common.h"
#include "partition-inl.h"
#include "resilix/error.h"
#include "resilix/partition.h"

static const char *const bucket_names[RX_BUCKET_COUNT] = {
    [RX_BUCKET_CRITICAL] = "critical",
    [RX_BUCKET_DEGRADED] = "degraded",
    [RX_BUCKET_BEST_EFFORT] = "best_effort",
    [RX_BUCKET_BULK] = "bulk",
};

const char *rx_bucket_name(enum rx_criticality_bucket b)
{
	return (unsigned)b < RX_BUCKET_COUNT ? bucket_names[b] : "unknown";
}

int rx_bucket_parse(const char *name, enum rx_criticality_bucket *out)
{
	unsigned b;

	if (name == NULL || out == NULL)
		return RX_EINVAL;
	for (b = 0; b < RX_BUCKET_COUNT; b++)
		if (strcmp(name, bucket_names[b]) == 0) {
			*out = (enum rx_criticality_bucket)b;
			return RX_OK;
		}
	return RX_EINVAL;
}

void rx_partition_config_default(struct rx_partition_config *cfg)
{
	cfg->percent[RX_BUCKET_CRITICAL] = 50;
	cfg->percent[RX_BUCKET_DEGRADED] = 25;
	cfg->percent[RX_BUCKET_BEST_EFFORT] = 15;
	cfg->percent[RX_BUCKET_BULK] = 10;
	cfg->limit = 20;
}

int rx_partition_config_check(const struct rx_partition_config *cfg,
			      const char **why)
{
	uint32_t sum = 0;
	unsigned b;
	const char *w = NULL;

	if (cfg == NULL) {
		w = "partition configuration is missing";
	} else {
		for (b = 0; b < RX_BUCKET_COUNT; b++) {
			if (cfg->percent[b] > 100)
				w = "partition percent: each 0..100";
			sum += cfg->percent[b] <= 100 ? cfg->percent[b] : 0;
		}
		if (w == NULL && sum > 100)
			w = "partition percent: the buckets sum to at most 100";
		if (w == NULL && (cfg->limit < 1 || cfg->limit > 1000000))
			w = "partition limit: 1..1000000";
	}
	if (w == NULL)
		return RX_OK;
	if (why != NULL)
		*why = w;
	return RX_EINVAL;
}

int rx_partition_init(struct rx_partition *p,
		      const struct rx_partition_config *cfg)
{
	if (p == NULL || rx_partition_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	memset(p, 0, sizeof(*p));
	p->cfg = *cfg;
	return RX_OK;
}

static inline unsigned clamp_bucket(unsigned bucket)
{
	return bucket < RX_BUCKET_COUNT ? bucket : RX_BUCKET_BULK;
}

uint32_t rx_partition_share(const struct rx_partition *p, unsigned bucket,
			    uint32_t limit)
{
	uint64_t n = (uint64_t)limit * p->cfg.percent[clamp_bucket(bucket)];
	uint64_t share = (n + 99) / 100; /* ceil(L x pct) */

	return share < 1 ? 1 : share > UINT32_MAX ? UINT32_MAX
						   : (uint32_t)share;
}

enum rx_partition_verdict rx_partition_decide(struct rx_partition *p,
					      unsigned bucket, uint32_t limit,
					      bool at_limit)
{
	unsigned b = clamp_bucket(bucket), o;

	if (!at_limit)
		return RX_PARTITION_PASS;
	if (p->busy[b] < rx_partition_share(p, b, limit ? limit : 1))
		return RX_PARTITION_GUARANTEED;
	for (o = 0; o < RX_BUCKET_COUNT; o++)
		if (o != b && p->busy[o] > 0) {
			p->shed[b] = rx__sat_add(p->shed[b], 1);
			return RX_PARTITION_SHED;
		}
	return RX_PARTITION_PASS; /* alone on the key */
}

void rx_partition_take(struct rx_partition *p, unsigned bucket)
{
	unsigned b = clamp_bucket(bucket);

	p->busy[b] = rx__sat_inc32(p->busy[b]);
}

void rx_partition_give(struct rx_partition *p, unsigned bucket)
{
	unsigned b = clamp_bucket(bucket);

	p->busy[b] = rx__sat_dec32(p->busy[b]);
}

static enum rx_decision part_admit(void *self, const struct rx_admit_ctx *ctx,
				   struct rx_ticket *ticket,
				   struct rx_refusal *why)
{
	struct rx_partition *p = self;
	unsigned b = clamp_bucket(ctx->bucket);

	if (rx_partition_decide(p, b, p->cfg.limit,
				p->in_flight >= p->cfg.limit) ==
	    RX_PARTITION_SHED) {
		why->reason = RX_REASON_CRITICALITY_SHED;
		why->retry_after_ms = 0;
		return RX_REFUSE;
	}
	rx_partition_take(p, b);
	p->in_flight = rx__sat_inc32(p->in_flight);
	ticket->start_ns = ctx->now_ns;
	ticket->generation = 0;
	ticket->flags = b;
	return RX_ADMIT;
}

static void part_settle(void *self, const struct rx_ticket *ticket,
			const struct rx_observation *obs)
{
	struct rx_partition *p = self;

	(void)obs;
	rx_partition_give(p, ticket->flags);
	p->in_flight = rx__sat_dec32(p->in_flight);
}

const struct rx_policy_ops rx_partition_ops = {"partition", part_admit,
					       part_settle};
