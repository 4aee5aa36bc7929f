/*
 * retry.c - full-jitter backoff, the deadline check and the retry budget
 * (retry.h).
 *
 * The backoff draws one 64-bit number and scales it into [0, cap] with a
 * 128-bit multiply where the compiler has one (Lemire's method without
 * the rejection step: a bias below cap / 2^64, far under a nanosecond),
 * else with a modulo. The cap doubles per retry by shifting, saturating
 * at max_ms (ADR-426).
 *
 * The budget is Finagle's leaky bucket in integer units (ADR-427): a ring
 * of per-epoch net deposits with a running sum, the same ring the
 * throttler keeps, so deposits and withdrawals both expire after the ttl.
 * Deposits of ratio_permille units against withdrawals of 1000 keep the
 * ratio exact (Finagle withdraws 1000 / percentCanRetry, rounded). A
 * refund adds the withdrawal back to its own bucket without reading the
 * clock, so the budget equals one that never lent it (ADR-428).
 */
#include <stddef.h>
#include <string.h>

#include "common.h"
#include "resilix/error.h"
#include "resilix/retry.h"

#define UNITS_PER_RETRY 1000
#define ATTEMPTS_MAX 10u
#define BASE_MAX_MS UINT64_C(60000)
#define BACKOFF_MAX_MS UINT64_C(600000)
#define TTL_MIN_MS UINT64_C(1000)
#define TTL_MAX_MS UINT64_C(60000)
#define MIN_RETRIES_MAX 1000u

/* --- schedule ------------------------------------------------------------ */

void rx_retry_config_default(struct rx_retry_config *cfg)
{
	cfg->max_attempts = 1; /* off (docs/design.md section 2) */
	cfg->base_ms = 100;    /* gRPC A6 example: initialBackoff 0.1 s */
	cfg->max_ms = 1000;    /* gRPC A6 example: maxBackoff 1 s */
}

int rx_retry_config_check(const struct rx_retry_config *cfg, const char **why)
{
	const char *msg = NULL;

	if (cfg == NULL)
		msg = "retry configuration is missing";
	else if (cfg->max_attempts < 1 || cfg->max_attempts > ATTEMPTS_MAX)
		msg = "max_attempts must be 1 (no retry) to 10 attempts";
	else if (cfg->base_ms < 1 || cfg->base_ms > BASE_MAX_MS)
		msg = "base_ms must be 1 to 60000 ms";
	else if (cfg->max_ms < cfg->base_ms || cfg->max_ms > BACKOFF_MAX_MS)
		msg = "max_ms must be base_ms to 600000 ms";
	if (msg == NULL)
		return RX_OK;
	if (why != NULL)
		*why = msg;
	return RX_EINVAL;
}

/* A uniform integer in [0, span - 1]; @span >= 1. */
static uint64_t below(struct rx_rng *rng, uint64_t span)
{
	uint64_t x = rx_rng_next(rng);
#if defined(__SIZEOF_INT128__)
	return (uint64_t)(((unsigned __int128)x * span) >> 64);
#else
	return x % span;
#endif
}

uint64_t rx_retry_backoff_ns(const struct rx_retry_config *cfg, uint32_t retry,
			     struct rx_rng *rng)
{
	uint64_t max_ns = rx__ms_to_ns(cfg->max_ms);
	uint64_t cap = rx__ms_to_ns(cfg->base_ms);
	/* base x 2^retry, stopping at max: max_ms / base_ms < 2^20, so the
	 * loop runs at most 20 times whatever @retry is. */
	for (uint32_t i = 0; i < retry && cap < max_ns; i++)
		cap = rx__sat_mul(cap, 2);
	if (cap > max_ns)
		cap = max_ns;
	if (rng == NULL)
		return cap / 2;
	return below(rng, cap + 1);
}

bool rx_retry_fits(uint64_t deadline_ns, uint64_t now_ns, uint64_t delay_ns)
{
	return deadline_ns == 0 || rx__sat_add(now_ns, delay_ns) < deadline_ns;
}

/* --- budget -------------------------------------------------------------- */

void rx_retry_budget_config_default(struct rx_retry_budget_config *cfg)
{
	cfg->ttl_ms = 10000;	    /* Finagle RetryBudget */
	cfg->min_retries_per_s = 1; /* ours: a tenth of Finagle's 10 */
	cfg->ratio_permille = 100;  /* SRE book: retries under 10 % */
	cfg->buckets = 10;	    /* Finagle's windowed adder */
}

int rx_retry_budget_config_check(const struct rx_retry_budget_config *cfg,
				 const char **why)
{
	const char *msg = NULL;

	if (cfg == NULL)
		msg = "retry budget configuration is missing";
	else if (cfg->ttl_ms < TTL_MIN_MS || cfg->ttl_ms > TTL_MAX_MS)
		msg = "ttl_ms must be 1000 to 60000 ms";
	else if (cfg->min_retries_per_s > MIN_RETRIES_MAX)
		msg = "min_retries_per_s must be 0 to 1000 retries a second";
	else if (cfg->ratio_permille > 1000)
		msg = "ratio_permille must be 0 to 1000 (a ratio of 0 to 1)";
	else if (cfg->buckets < 1 || cfg->buckets > RX_RETRY_BUDGET_BUCKETS_MAX)
		msg = "buckets must be 1 to 60";
	if (msg == NULL)
		return RX_OK;
	if (why != NULL)
		*why = msg;
	return RX_EINVAL;
}

int rx_retry_budget_init(struct rx_retry_budget *b,
			 const struct rx_retry_budget_config *cfg)
{
	if (b == NULL || rx_retry_budget_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	memset(b, 0, sizeof(*b));
	b->cfg = *cfg;
	b->bucket_ns = rx__ms_to_ns(cfg->ttl_ms) / cfg->buckets;
	/* floor retries = min_retries_per_s x ttl_ms / 1000, in units of
	 * 1 / 1000 retry: at most 1000 x 60000. */
	b->reserve = (int64_t)cfg->min_retries_per_s * (int64_t)cfg->ttl_ms;
	return RX_OK;
}

/* Add @v to a net count, sticking at the int64 bounds. */
static inline int64_t sat_add_i64(int64_t a, int64_t v)
{
	if (v > 0 && a > INT64_MAX - v)
		return INT64_MAX;
	if (v < 0 && a < INT64_MIN - v)
		return INT64_MIN;
	return a + v;
}

static RX__NOINLINE void advance(struct rx_retry_budget *b, uint64_t epoch)
{
	uint32_t n = b->cfg.buckets;
	if (epoch - b->epoch >= n) {
		memset(b->ring, 0, sizeof(b->ring));
		b->net = 0;
	} else {
		for (uint64_t e = b->epoch + 1; e <= epoch; e++) {
			b->net -= b->ring[e % n];
			b->ring[e % n] = 0;
		}
	}
	b->epoch = epoch;
}

/* Move to @now_ns and return the current bucket's index. */
static inline uint32_t current(struct rx_retry_budget *b, uint64_t now_ns)
{
	uint64_t epoch = rx__clock(&b->last_ns, now_ns) / b->bucket_ns;
	if (RX__UNLIKELY(epoch > b->epoch))
		advance(b, epoch);
	return (uint32_t)(b->epoch % b->cfg.buckets);
}

/* Add @v units to bucket @i and to the running sum, keeping the sum equal
 * to the ring's: a bucket that would saturate takes nothing. */
static inline void put(struct rx_retry_budget *b, uint32_t i, int64_t v)
{
	int64_t r = b->ring[i];
	if (v > 0 ? r > INT64_MAX - v : r < INT64_MIN - v)
		return;
	b->ring[i] = r + v;
	b->net = sat_add_i64(b->net, v);
}

void rx_retry_budget_deposit(struct rx_retry_budget *b, uint64_t now_ns)
{
	put(b, current(b, now_ns), (int64_t)b->cfg.ratio_permille);
	b->first_attempts = rx__sat_add(b->first_attempts, 1);
}

enum rx_decision rx_retry_budget_withdraw(struct rx_retry_budget *b,
					  uint64_t now_ns,
					  struct rx_ticket *ticket,
					  struct rx_refusal *why)
{
	uint32_t i = current(b, now_ns);
	if (RX__UNLIKELY(sat_add_i64(b->reserve, b->net) < UNITS_PER_RETRY)) {
		b->refused = rx__sat_add(b->refused, 1);
		if (why != NULL) {
			why->reason = RX_REASON_BUDGET_EXCEEDED;
			why->retry_after_ms = 0;
		}
		return RX_REFUSE;
	}
	put(b, i, -UNITS_PER_RETRY);
	b->retries = rx__sat_add(b->retries, 1);
	ticket->start_ns = b->last_ns;
	ticket->generation = 0;
	ticket->flags = 0;
	return RX_ADMIT;
}

void rx_retry_budget_refund(struct rx_retry_budget *b,
			    const struct rx_ticket *ticket)
{
	uint64_t epoch = ticket->start_ns / b->bucket_ns;
	if (b->retries > 0)
		b->retries--;
	if (epoch > b->epoch || b->epoch - epoch >= b->cfg.buckets)
		return; /* the withdrawal has expired with its bucket */
	put(b, (uint32_t)(epoch % b->cfg.buckets), UNITS_PER_RETRY);
}

void rx_retry_budget_stats(const struct rx_retry_budget *b, uint64_t now_ns,
			   struct rx_retry_budget_stats *out)
{
	uint64_t epoch = rx__clock_peek(b->last_ns, now_ns) / b->bucket_ns;
	uint32_t n = b->cfg.buckets;
	int64_t net = b->net;

	if (epoch - b->epoch >= n)
		net = 0;
	else
		for (uint64_t e = b->epoch + 1; e <= epoch; e++)
			net -= b->ring[e % n];
	out->balance_units = sat_add_i64(b->reserve, net);
	out->retries_available =
	    out->balance_units > 0
		? (uint64_t)out->balance_units / UNITS_PER_RETRY
		: 0;
	out->first_attempts = b->first_attempts;
	out->retries = b->retries;
	out->refused = b->refused;
}

static enum rx_decision ops_admit(void *self, const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why)
{
	return rx_retry_budget_withdraw(self, ctx->now_ns, ticket, why);
}

static void ops_settle(void *self, const struct rx_ticket *ticket,
		       const struct rx_observation *obs)
{
	if (obs->verdict == RX_REJECTED)
		rx_retry_budget_refund(self, ticket);
}

const struct rx_policy_ops rx_retry_budget_ops = {
    .name = "retry-budget",
    .admit = ops_admit,
    .settle = ops_settle,
};
