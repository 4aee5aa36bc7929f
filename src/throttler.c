/*
 * throttler.c - SRE client-side adaptive throttling (throttler.h).
 *
 * A ring of per-epoch buckets with running sums of requests and accepts.
 * The decisions this file implements (docs/decisions.md):
 *   - every admit counts a request, throttled or not, and the
 *     probability comes from the sums before it (ADR-424);
 *   - accepts are RX_SUCCESS and RX_ANSWERED (ADR-423);
 *   - a release removes exactly the request its admit added, from the
 *     bucket the ticket's time names, and only while that bucket is still
 *     in the ring; it reads no clock, so a twin that never saw the call is
 *     byte for byte the same (ADR-007);
 *   - p = 0 is decided by one multiply and compare, without a division or
 *     a draw, so a healthy key pays almost nothing.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common.h"
#include "resilix/error.h"
#include "resilix/throttler.h"

#define PERIOD_MIN_MS UINT64_C(1000)
#define PERIOD_MAX_MS UINT64_C(3600000)

void rx_throttler_config_default(struct rx_throttler_config *cfg)
{
	cfg->k = 2.0;		 /* SRE book */
	cfg->period_ms = 120000; /* SRE book: two minutes */
	cfg->buckets = 20;	 /* failsafe-go */
	cfg->max_reject = 0.9;	 /* failsafe-go (ADR-425) */
}

int rx_throttler_config_check(const struct rx_throttler_config *cfg,
			      const char **why)
{
	const char *msg = NULL;

	if (cfg == NULL)
		msg = "throttler configuration is missing";
	else if (!isfinite(cfg->k) || cfg->k < 1.0 || cfg->k > 10.0)
		msg = "k must be a number from 1 to 10";
	else if (cfg->period_ms < PERIOD_MIN_MS ||
		 cfg->period_ms > PERIOD_MAX_MS)
		msg = "period_ms must be 1000 to 3600000 ms";
	else if (cfg->buckets < 1 || cfg->buckets > RX_THROTTLER_BUCKETS_MAX)
		msg = "buckets must be 1 to 60";
	else if (!isfinite(cfg->max_reject) || cfg->max_reject <= 0.0 ||
		 cfg->max_reject > 1.0)
		msg = "max_reject must be a number above 0 and at most 1";
	if (msg == NULL)
		return RX_OK;
	if (why != NULL)
		*why = msg;
	return RX_EINVAL;
}

int rx_throttler_init(struct rx_throttler *t,
		      const struct rx_throttler_config *cfg)
{
	if (t == NULL || rx_throttler_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	memset(t, 0, sizeof(*t));
	t->cfg = *cfg;
	t->bucket_ns = rx__ms_to_ns(cfg->period_ms) / cfg->buckets;
	return RX_OK;
}

/* Move the ring to @epoch: clear, and subtract from the sums, every bucket
 * between the current epoch and it. The same result whichever call (and
 * however many calls) make the move. */
static RX__NOINLINE void advance(struct rx_throttler *t, uint64_t epoch)
{
	uint32_t n = t->cfg.buckets;
	if (epoch - t->epoch >= n) {
		memset(t->ring, 0, sizeof(t->ring));
		t->requests = 0;
		t->accepts = 0;
	} else {
		for (uint64_t e = t->epoch + 1; e <= epoch; e++) {
			struct rx_throttler_bucket *b = &t->ring[e % n];
			t->requests -= b->requests;
			t->accepts -= b->accepts;
			b->requests = 0;
			b->accepts = 0;
		}
	}
	t->epoch = epoch;
}

static inline struct rx_throttler_bucket *current(struct rx_throttler *t,
						  uint64_t now_ns)
{
	uint64_t epoch = rx__clock(&t->last_ns, now_ns) / t->bucket_ns;
	if (RX__UNLIKELY(epoch > t->epoch))
		advance(t, epoch);
	return &t->ring[t->epoch % t->cfg.buckets];
}

/* The requests of the period whose answer has come (ADR-462): a call
 * still in flight is no evidence yet, or a program that starts eight
 * calls at once would see the second throttled with no answer in. */
static inline uint64_t answered(uint64_t requests, uint64_t outstanding)
{
	return requests > outstanding ? requests - outstanding : 0;
}

/* p from the sums, capped at max_reject; 0 without a division while
 * requests <= K x accepts. */
static inline double probability(const struct rx_throttler_config *cfg,
				 uint64_t requests, uint64_t accepts)
{
	double r = (double)requests;
	double excess = r - cfg->k * (double)accepts;
	if (excess <= 0.0)
		return 0.0;
	double p = excess / (r + 1.0);
	return p < cfg->max_reject ? p : cfg->max_reject;
}

static RX__NOINLINE bool throttle(struct rx_throttler *t,
				  const struct rx_admit_ctx *ctx, double p,
				  struct rx_refusal *why)
{
	double draw = ctx->rng != NULL ? rx_rng_unit(ctx->rng) : 0.5;
	if (draw >= p)
		return false;
	t->throttled = rx__sat_add(t->throttled, 1);
	if (why != NULL) {
		why->reason = RX_REASON_THROTTLED;
		why->retry_after_ms = 0;
	}
	return true;
}

enum rx_decision rx_throttler_admit(struct rx_throttler *t,
				    const struct rx_admit_ctx *ctx,
				    struct rx_ticket *ticket,
				    struct rx_refusal *why)
{
	struct rx_throttler_bucket *b = current(t, ctx->now_ns);
	double p = probability(&t->cfg, answered(t->requests, t->outstanding),
			       t->accepts);
	/* The request counts whatever the answer (ADR-424). A bucket that
	 * would overflow stops counting, and so do the sums, so they stay
	 * the sums of the buckets. */
	if (b->requests != UINT32_MAX) {
		b->requests++;
		t->requests++;
	}
	if (RX__UNLIKELY(p > 0.0) && throttle(t, ctx, p, why))
		return RX_REFUSE;
	t->outstanding = rx__sat_add(t->outstanding, 1);
	ticket->start_ns = t->last_ns;
	ticket->generation = 0;
	ticket->flags = 0;
	return RX_ADMIT;
}

/* Undo the request of an admission at @start_ns, if its bucket is still in
 * the ring (else the ring already dropped it with the bucket). */
static void release(struct rx_throttler *t, uint64_t start_ns)
{
	uint64_t epoch = start_ns / t->bucket_ns;
	if (epoch > t->epoch || t->epoch - epoch >= t->cfg.buckets)
		return;
	struct rx_throttler_bucket *b = &t->ring[epoch % t->cfg.buckets];
	if (b->requests > 0) {
		b->requests--;
		t->requests--;
	}
}

void rx_throttler_settle(struct rx_throttler *t, const struct rx_ticket *ticket,
			 const struct rx_observation *obs)
{
	t->outstanding = rx__sat_sub(t->outstanding, 1);
	switch (obs->verdict) {
	case RX_SUCCESS:
	case RX_ANSWERED: {
		struct rx_throttler_bucket *b = current(t, obs->now_ns);
		if (b->accepts != UINT32_MAX) {
			b->accepts++;
			t->accepts++;
		}
		break;
	}
	case RX_OVERLOAD:
	case RX_TRANSIENT:
	case RX_TIMEOUT:
		/* The request already counts, unaccepted. */
		break;
	default:
		release(t, ticket->start_ns);
		break;
	}
}

void rx_throttler_stats(const struct rx_throttler *t, uint64_t now_ns,
			struct rx_throttler_stats *out)
{
	uint64_t epoch = rx__clock_peek(t->last_ns, now_ns) / t->bucket_ns;
	uint64_t requests = t->requests, accepts = t->accepts;
	uint32_t n = t->cfg.buckets;

	if (epoch - t->epoch >= n) {
		requests = 0;
		accepts = 0;
	} else {
		/* Leave out what the next move would clear. */
		for (uint64_t e = t->epoch + 1; e <= epoch; e++) {
			requests -= t->ring[e % n].requests;
			accepts -= t->ring[e % n].accepts;
		}
	}
	out->requests = requests;
	out->accepts = accepts;
	out->reject_probability =
	    probability(&t->cfg, answered(requests, t->outstanding), accepts);
	out->throttled = t->throttled;
}

static enum rx_decision ops_admit(void *self, const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why)
{
	return rx_throttler_admit(self, ctx, ticket, why);
}

static void ops_settle(void *self, const struct rx_ticket *ticket,
		       const struct rx_observation *obs)
{
	rx_throttler_settle(self, ticket, obs);
}

const struct rx_policy_ops rx_throttler_ops = {
    .name = "throttler",
    .admit = ops_admit,
    .settle = ops_settle,
};
