/*
 * ratelimit.c - the token bucket (ratelimit.h).
 *
 * Integer units of 1 / period_ns token (ADR-421): a token is period_ns
 * units, a nanosecond refills `tokens` units, so no rate is rounded and
 * the bucket never drifts. Refill is lazy, on admit, and saturates at the
 * cap by comparing the elapsed time with the time the room takes to fill
 * (no product that could overflow). The refund of a released call is a
 * capped add (ADR-422): with refill linear below the cap, it leaves the
 * bucket exactly as if the token had never been taken.
 */
#include <stddef.h>

#include "common.h"
#include "resilix/error.h"
#include "resilix/ratelimit.h"

#define TOKENS_MAX UINT64_C(1000000000)
#define PERIOD_MAX_MS UINT64_C(3600000)
#define BURST_MAX UINT64_C(1000000000000)
/* burst x period_ms bound: the bucket's units (x 1e6) stay below 2^63. */
#define CAP_MAX_TOKEN_MS UINT64_C(9000000000000)

void rx_ratelimit_config_default(struct rx_ratelimit_config *cfg)
{
	cfg->tokens = 1;
	cfg->period_ms = 1000;
	cfg->burst = 0; /* one second's worth */
}

int rx_ratelimit_config_check(const struct rx_ratelimit_config *cfg,
			      const char **why)
{
	const char *msg = NULL;

	if (cfg == NULL)
		msg = "rate limiter configuration is missing";
	else if (cfg->tokens < 1 || cfg->tokens > TOKENS_MAX)
		msg = "tokens must be 1 to 1000000000 per period";
	else if (cfg->period_ms < 1 || cfg->period_ms > PERIOD_MAX_MS)
		msg = "period_ms must be 1 to 3600000 ms";
	else if (cfg->burst > BURST_MAX ||
		 rx__sat_mul(cfg->burst, cfg->period_ms) > CAP_MAX_TOKEN_MS)
		msg = "burst must be 0 (one second's worth) to 1000000000000 "
		      "tokens, and burst x period_ms at most 9000000000000";
	if (msg == NULL)
		return RX_OK;
	if (why != NULL)
		*why = msg;
	return RX_EINVAL;
}

int rx_ratelimit_parse_rate(const char *s, uint64_t *tokens,
			    uint64_t *period_ms)
{
	uint64_t n = 0;
	const char *p = s;

	if (s == NULL || tokens == NULL || period_ms == NULL)
		return RX_EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		n = n * 10 + (uint64_t)(*p - '0');
		if (n > TOKENS_MAX)
			return RX_EINVAL;
	}
	if (p == s || n < 1 || *p != '/')
		return RX_EINVAL;
	p++;
	uint64_t period;
	if (p[0] == 's' && p[1] == '\0')
		period = 1000;
	else if (p[0] == 'm' && p[1] == 'i' && p[2] == 'n' && p[3] == '\0')
		period = 60000;
	else if (p[0] == 'h' && p[1] == '\0')
		period = 3600000;
	else
		return RX_EINVAL;
	*tokens = n;
	*period_ms = period;
	return RX_OK;
}

int rx_ratelimit_init(struct rx_ratelimit *r,
		      const struct rx_ratelimit_config *cfg)
{
	if (r == NULL || rx_ratelimit_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	r->cfg = *cfg;
	r->burst = cfg->burst;
	if (r->burst == 0) {
		/* One second's worth; its units are tokens x 1e9 <= 1e18,
		 * so the default always fits. */
		r->burst = cfg->tokens * 1000 / cfg->period_ms;
		if (r->burst < 1)
			r->burst = 1;
	}
	r->token_units = cfg->period_ms * RX__NS_PER_MS;
	/* burst tokens, plus less than one ns of refill (and less than a
	 * token): a caller admitted at the first whole ns of its token keeps
	 * the fraction it overshot, even when the bucket is full (ADR-421). */
	uint64_t slack =
	    cfg->tokens < r->token_units ? cfg->tokens : r->token_units;
	r->cap_units = r->burst * r->token_units + slack - 1;
	r->units = r->burst * r->token_units; /* full: burst whole tokens */
	r->last_ns = 0;
	r->refused = 0;
	r->queued = 0;
	return RX_OK;
}

/* The units the bucket holds at @t >= last_ns, refilled from last_ns:
 * min(cap, units + (t - last) x tokens), without forming the product when
 * it could exceed the room. */
static inline uint64_t units_at(const struct rx_ratelimit *r, uint64_t t)
{
	uint64_t room = r->cap_units - r->units;
	uint64_t e = t - r->last_ns;
	if (room == 0)
		return r->units;
	if (e > (room - 1) / r->cfg.tokens)
		return r->cap_units;
	return r->units + e * r->cfg.tokens;
}

/* ns from @t until the bucket holding @u units has a whole token. */
static inline uint64_t wait_ns(const struct rx_ratelimit *r, uint64_t u)
{
	if (u >= r->token_units)
		return 0;
	uint64_t need = r->token_units - u;
	return need / r->cfg.tokens + (need % r->cfg.tokens != 0);
}

static RX__NOINLINE enum rx_decision empty(struct rx_ratelimit *r,
					   const struct rx_admit_ctx *ctx,
					   struct rx_refusal *why)
{
	if (why != NULL) {
		why->reason = RX_REASON_RATE_LIMITED;
		why->retry_after_ms = rx__ns_to_ms_ceil(wait_ns(r, r->units));
	}
	if (ctx->can_wait) {
		r->queued = rx__sat_add(r->queued, 1);
		return RX_QUEUE;
	}
	r->refused = rx__sat_add(r->refused, 1);
	return RX_REFUSE;
}

enum rx_decision rx_ratelimit_admit(struct rx_ratelimit *r,
				    const struct rx_admit_ctx *ctx,
				    struct rx_ticket *ticket,
				    struct rx_refusal *why)
{
	if (ctx->now_ns > r->last_ns) {
		r->units = units_at(r, ctx->now_ns);
		r->last_ns = ctx->now_ns;
	}
	if (RX__UNLIKELY(r->units < r->token_units))
		return empty(r, ctx, why);
	r->units -= r->token_units;
	ticket->start_ns = r->last_ns;
	ticket->generation = 0;
	ticket->flags = 0;
	return RX_ADMIT;
}

void rx_ratelimit_settle(struct rx_ratelimit *r, const struct rx_ticket *ticket,
			 const struct rx_observation *obs)
{
	(void)ticket;
	/* No refill here: the capped add commutes with refill (ADR-422), so
	 * the bucket equals the one that never lent the token, last_ns
	 * included. */
	if (obs->verdict == RX_REJECTED) {
		uint64_t u = r->units + r->token_units;
		r->units = u > r->cap_units ? r->cap_units : u;
	}
}

uint64_t rx_ratelimit_next_ns(const struct rx_ratelimit *r, uint64_t now_ns)
{
	uint64_t t = rx__clock_peek(r->last_ns, now_ns);
	return rx__sat_add(t, wait_ns(r, units_at(r, t)));
}

void rx_ratelimit_stats(const struct rx_ratelimit *r, uint64_t now_ns,
			struct rx_ratelimit_stats *out)
{
	uint64_t u = units_at(r, rx__clock_peek(r->last_ns, now_ns));
	out->tokens = u / r->token_units;
	out->burst = r->burst;
	out->wait_ns = wait_ns(r, u);
	out->refused = r->refused;
	out->queued = r->queued;
}

static enum rx_decision ops_admit(void *self, const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why)
{
	return rx_ratelimit_admit(self, ctx, ticket, why);
}

static void ops_settle(void *self, const struct rx_ticket *ticket,
		       const struct rx_observation *obs)
{
	rx_ratelimit_settle(self, ticket, obs);
}

const struct rx_policy_ops rx_ratelimit_ops = {
    .name = "ratelimit",
    .admit = ops_admit,
    .settle = ops_settle,
};
