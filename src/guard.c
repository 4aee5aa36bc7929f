/*
 * guard.c - one key's policies and telemetry (guard.h).
 *
 * A guard is a gate holding the policies its configuration turns on, in
 * this order (guard.h, ADR-460): the rate limiter, the breaker, the
 * throttler, the bulkhead, the adaptive concurrency limiter (ADR-135: a
 * circuit that is open refuses before a limiter slot or a queue place is
 * taken, and a call the limiter queues releases its breaker admission at
 * once, so a half-open probe is never held by a waiting call). With only
 * the breaker and the limiter on, admit and settle call the two by name
 * (ADR-180); any other policy on takes the general path below. Plus
 * counters a metrics writer reads: settled calls by verdict, refusals by
 * reason, slow calls, calls in flight. Only RX_REFUSE counts as a refusal:
 * a queue decision may still end in admission, and counting it would
 * report one call twice; a waiter that ends refused (its place taken by a
 * falling limit, the circuit opened, the executor's queue timeout) is
 * counted when it ends. The registry reads in_flight, the waiters and the
 * breaker state to decide what it may evict.
 */
#include <stddef.h>
#include <string.h>

#include "breaker-inl.h"
#include "common.h"
#include "fairshare-inl.h"
#include "guard-inl.h"
#include "limiter-inl.h"
#include "partition-inl.h"
#include "resilix/error.h"
#include "resilix/guard.h"

/* The policies in gate order (ADR-460). */
enum pol { P_RATE, P_BREAKER, P_THROTTLER, P_BULKHEAD, P_LIMITER, P_COUNT };

void rx_guard_config_default(struct rx_guard_config *cfg)
{
	cfg->breaker_on = true;
	rx_breaker_config_default(&cfg->breaker);
	cfg->limiter_on = true;
	rx_limiter_config_default(&cfg->limiter);
	cfg->bulkhead_on = false;
	rx_bulkhead_config_default(&cfg->bulkhead);
	cfg->ratelimit_on = false;
	rx_ratelimit_config_default(&cfg->ratelimit);
	cfg->throttler_on = false;
	rx_throttler_config_default(&cfg->throttler);
	cfg->shares_on = false;
	rx_partition_config_default(&cfg->partition);
	rx_fairshare_config_default(&cfg->fairshare);
}

int rx_guard_config_check(const struct rx_guard_config *cfg, const char **why)
{
	if (cfg == NULL) {
		if (why != NULL)
			*why = "guard configuration is missing";
		return RX_EINVAL;
	}
	if (cfg->breaker_on &&
	    rx_breaker_config_check(&cfg->breaker, why) != RX_OK)
		return RX_EINVAL;
	if (cfg->limiter_on &&
	    rx_limiter_config_check(&cfg->limiter, why) != RX_OK)
		return RX_EINVAL;
	if (cfg->bulkhead_on &&
	    rx_bulkhead_config_check(&cfg->bulkhead, why) != RX_OK)
		return RX_EINVAL;
	if (cfg->ratelimit_on &&
	    rx_ratelimit_config_check(&cfg->ratelimit, why) != RX_OK)
		return RX_EINVAL;
	if (cfg->throttler_on &&
	    rx_throttler_config_check(&cfg->throttler, why) != RX_OK)
		return RX_EINVAL;
	if (cfg->shares_on &&
	    (rx_partition_config_check(&cfg->partition, why) != RX_OK ||
	     rx_fairshare_config_check(&cfg->fairshare, why) != RX_OK))
		return RX_EINVAL;
	return RX_OK;
}

int rx_guard_init(struct rx_guard *g, const struct rx_guard_config *cfg,
		  struct rx_window_slot *slots, uint64_t now_ns)
{
	if (g == NULL || rx_guard_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	memset(g, 0, sizeof(*g));
	rx_gate_init(&g->gate);
	if (cfg->ratelimit_on) {
		if (rx_ratelimit_init(&g->ratelimit, &cfg->ratelimit) != RX_OK)
			return RX_EINVAL;
		rx_gate_add(&g->gate, &rx_ratelimit_ops, &g->ratelimit);
		g->ratelimit_on = true;
	}
	if (cfg->breaker_on) {
		if (rx_breaker_init(&g->breaker, &cfg->breaker, slots) != RX_OK)
			return RX_EINVAL;
		rx_gate_add(&g->gate, &rx_breaker_ops, &g->breaker);
		g->breaker_on = true;
	}
	if (cfg->throttler_on) {
		if (rx_throttler_init(&g->throttler, &cfg->throttler) != RX_OK)
			return RX_EINVAL;
		rx_gate_add(&g->gate, &rx_throttler_ops, &g->throttler);
		g->throttler_on = true;
	}
	if (cfg->bulkhead_on) {
		if (rx_bulkhead_init(&g->bulkhead, &cfg->bulkhead) != RX_OK)
			return RX_EINVAL;
		rx_gate_add(&g->gate, &rx_bulkhead_ops, &g->bulkhead);
		g->bulkhead_on = true;
	}
	if (cfg->limiter_on) {
		if (rx_limiter_init(&g->limiter, &cfg->limiter) != RX_OK)
			return RX_EINVAL;
		rx_gate_add(&g->gate, &rx_limiter_ops, &g->limiter);
		g->limiter_on = true;
	}
	if (cfg->shares_on && cfg->limiter_on) {
		if (rx_partition_init(&g->partition, &cfg->partition) !=
			RX_OK ||
		    rx_fairshare_init(&g->fairshare, &cfg->fairshare) != RX_OK)
			return RX_EINVAL;
		g->shares_on = true;
	}
	g->more = g->ratelimit_on || g->throttler_on || g->bulkhead_on;
	g->plain = g->breaker_on && g->limiter_on && !g->more;
	/* Without a breaker the zeroed struct reads as closed, and without a
	 * limiter it has no waiters, which is what the registry's eviction
	 * test wants. */
	g->last_used_ns = now_ns;
	return RX_OK;
}

static void count_refusal(struct rx_guard *g, enum rx_reason reason)
{
	unsigned r = (unsigned)reason;
	if (r < RX_REASON_COUNT)
		g->counters.refused[r] = rx__sat_add(g->counters.refused[r], 1);
}

/* A ticket as the gate hands it to a policy's admit (rx_gate_admit). */
static inline void prime(struct rx_ticket *t, uint64_t now_ns)
{
	t->start_ns = now_ns;
	t->generation = 0;
	t->flags = 0;
}

/* ---- shares: criticality and tenants before the limiter (ADR-489) ---- */

/* Count an admitted call in its bucket and its tenant, each only once a
 * second bucket (tenant) has called on the key (ADR-490), into the share
 * ticket @st: generation holds (bucket + 1) << 8 | the tenant's
 * untracked mark, flags the tenant's row + 1; all zero when nothing was
 * counted, and the permit then leaves the ticket out (with_shares). */
static RX__INLINE void shares_take(struct rx_guard *g,
				   const struct rx_admit_ctx *ctx,
				   struct rx_ticket *st)
{
	unsigned b = ctx->bucket < RX_BUCKET_COUNT ? ctx->bucket
						   : RX_BUCKET_BULK;
	uint32_t b1 = 0;

	st->start_ns = 0;
	st->generation = 0;
	st->flags = 0;
	if (RX__UNLIKELY(rx__partition_note(&g->partition, b))) {
		g->partition.busy[b] = rx__sat_inc32(g->partition.busy[b]);
		b1 = (uint32_t)(b + 1) << 8;
	}
	if (RX__UNLIKELY(rx__fairshare_note(&g->fairshare, ctx->tenant)))
		rx__fairshare_take(&g->fairshare, ctx->tenant, ctx->now_ns,
				   st);
	st->generation |= b1;
}

/* The count of a permit admitted with the policies' @n tickets: one more
 * when the shares counted the call (shares_take wrote the ticket after
 * the policies'). */
static RX__INLINE uint32_t with_shares(const struct rx_guard *g,
				       const struct rx_gate_permit *permit,
				       uint32_t n)
{
	const struct rx_ticket *st = &permit->tickets[g->gate.count];

	return n + (RX__UNLIKELY(g->shares_on) &&
		    (st->generation | st->flags) != 0);
}

/* Give back what shares_take counted (@st: the permit's share ticket). */
static RX__INLINE void shares_settle(struct rx_guard *g,
				     const struct rx_ticket *st,
				     enum rx_verdict v)
{
	uint32_t b1 = st->generation >> 8;

	if (b1 != 0) {
		b1 = (b1 - 1) & 3; /* RX_BUCKET_COUNT buckets */
		g->partition.busy[b1] = rx__sat_dec32(g->partition.busy[b1]);
	}
	if (RX__UNLIKELY(v == RX_REJECTED)) {
		struct rx_ticket t = *st;

		t.generation &= 0xff;
		rx_fairshare_release(&g->fairshare, &t);
	}
}

/* The limiter's step with shares on, under pressure (see guard.h):
 * @limit is the limiter's L, which the backlog reaches. */
static RX__NOINLINE enum rx_decision
shares_pressed(struct rx_guard *g, const struct rx_admit_ctx *ctx,
	       struct rx_ticket *t, struct rx_ticket *st,
	       struct rx_refusal *why, uint32_t limit)
{
	struct rx_limiter *l = &g->limiter;
	enum rx_decision d;

	/* A bucket alone on the key passes (ADR-487), uncounted (ADR-490). */
	switch (rx__partition_note(&g->partition, ctx->bucket)
		    ? rx_partition_decide(&g->partition, ctx->bucket, limit,
					  true)
		    : RX_PARTITION_PASS) {
	case RX_PARTITION_SHED:
		why->reason = RX_REASON_CRITICALITY_SHED;
		why->retry_after_ms = 0;
		return RX_REFUSE;
	case RX_PARTITION_GUARANTEED:
		rx__limiter_take_slot(l, ctx->now_ns, t);
		d = RX_ADMIT;
		break;
	default:
		if (rx__fairshare_note(&g->fairshare, ctx->tenant) &&
		    rx_fairshare_decide(&g->fairshare, ctx->tenant,
					ctx->now_ns, true)) {
			why->reason = RX_REASON_TENANT_SHED;
			why->retry_after_ms = 0;
			return RX_REFUSE;
		}
		d = rx__limiter_admit(l, ctx, t, why);
		break;
	}
	if (d == RX_ADMIT)
		shares_take(g, ctx, st);
	return d;
}

/* The limiter's admit step, with or without shares. With them, below the
 * limit every bucket borrows and nobody is shed: the limiter's slot is
 * taken and the call counted inline (ADR-490); pressure - the backlog
 * reaches the limiter's slots - takes the long way. */
static RX__INLINE enum rx_decision
limiter_step(struct rx_guard *g, const struct rx_admit_ctx *ctx,
	     struct rx_gate_permit *permit, struct rx_ticket *t,
	     struct rx_refusal *why)
{
	if (RX__UNLIKELY(g->shares_on)) {
		struct rx_limiter *l = &g->limiter;
		struct rx_ticket *st = &permit->tickets[g->gate.count];
		uint32_t limit = rx__limiter_band_limit(l, ctx->now_ns);

		if (RX__UNLIKELY((uint64_t)l->in_flight + l->queued >=
				 rx__limiter_slot_limit(l, limit)))
			return shares_pressed(g, ctx, t, st, why, limit);
		rx__limiter_take_slot(l, ctx->now_ns, t);
		shares_take(g, ctx, st);
		return RX_ADMIT;
	}
	return rx__limiter_admit(&g->limiter, ctx, t, why);
}

/*
 * rx_gate_admit for the guard's own gate, with the calls made directly.
 * The gate holds the breaker (when on), then the limiter (when on), and
 * nothing else: rx_guard_init builds it and nothing adds to it later. So
 * the guard knows at compile time what the gate would call, and calling
 * rx_breaker_admit and rx_limiter_admit by name spares two indirect calls
 * and their trampolines on every admit (ADR-180). The steps are the gate's,
 * in its order: refusal cleared, permit emptied, each ticket primed before
 * its admit, the first policy that does not admit stops the run, and the
 * breaker's admission released at once with RX_REJECTED at the admit time
 * when the limiter refuses or queues (ADR-007). The gate itself stays the
 * composition of record: rx_guard_try_dequeue uses it for waiters, and
 * the conformance test drives it.
 */
static enum rx_decision admit_policies(struct rx_guard *g,
				       const struct rx_admit_ctx *ctx,
				       struct rx_gate_permit *permit,
				       struct rx_refusal *why)
{
	enum rx_decision d;
	uint32_t n = 0;

	why->reason = RX_REASON_NONE;
	why->retry_after_ms = 0;
	permit->count = 0;
	if (g->breaker_on) {
		prime(&permit->tickets[0], ctx->now_ns);
		d = rx__breaker_admit(&g->breaker, ctx->now_ns,
				      &permit->tickets[0], why);
		if (d != RX_ADMIT)
			return d;
		n = 1;
	}
	if (g->limiter_on) {
		prime(&permit->tickets[n], ctx->now_ns);
		d = limiter_step(g, ctx, permit, &permit->tickets[n], why);
		if (d != RX_ADMIT) {
			if (n == 1) {
				struct rx_observation rel = {
				    .verdict = RX_REJECTED,
				    .latency_us = 0,
				    .now_ns = ctx->now_ns,
				};
				rx__breaker_settle(&g->breaker,
						   &permit->tickets[0], &rel);
			}
			return d;
		}
		n++;
	}
	permit->count = with_shares(g, permit, n); /* the shares' after */
	return RX_ADMIT;
}

/* rx_gate_settle for the guard's own gate, called directly (see
 * admit_policies): every policy the permit holds a ticket for, in order. */
static void settle_policies(struct rx_guard *g,
			    const struct rx_gate_permit *permit,
			    const struct rx_observation *obs)
{
	uint32_t n = permit->count < g->gate.count ? permit->count
						   : g->gate.count;
	uint32_t i = 0;

	if (g->breaker_on) {
		if (n > 0)
			rx__breaker_settle(&g->breaker, &permit->tickets[0],
					   obs);
		i = 1;
	}
	if (g->limiter_on && n > i) {
		rx__limiter_settle(&g->limiter, &permit->tickets[i], obs);
		if (RX__UNLIKELY(g->shares_on) && permit->count > n)
			shares_settle(g, &permit->tickets[n], obs->verdict);
	}
}


/* ------------------------------------------------------------------------
 * The general path: any policy besides the breaker and the limiter on.
 * Tickets sit in gate order, one per policy that is on; a set of policies
 * is a bit mask of enum pol.
 * ---------------------------------------------------------------------- */

static bool is_on(const struct rx_guard *g, enum pol p)
{
	switch (p) {
	case P_RATE:
		return g->ratelimit_on;
	case P_BREAKER:
		return g->breaker_on;
	case P_THROTTLER:
		return g->throttler_on;
	case P_BULKHEAD:
		return g->bulkhead_on;
	case P_LIMITER:
		return g->limiter_on;
	default:
		return false;
	}
}

/* The permit index of policy @p: how many policies before it are on. */
static uint32_t index_of(const struct rx_guard *g, enum pol p)
{
	uint32_t n = 0;
	int q;

	for (q = 0; q < (int)p; q++)
		n += is_on(g, (enum pol)q);
	return n;
}

static enum rx_decision admit_one(struct rx_guard *g, enum pol p,
				  const struct rx_admit_ctx *ctx,
				  struct rx_gate_permit *permit,
				  struct rx_ticket *t, struct rx_refusal *why)
{
	prime(t, ctx->now_ns);
	switch (p) {
	case P_RATE:
		return rx_ratelimit_admit(&g->ratelimit, ctx, t, why);
	case P_BREAKER:
		return rx__breaker_admit(&g->breaker, ctx->now_ns, t, why);
	case P_THROTTLER:
		return rx_throttler_admit(&g->throttler, ctx, t, why);
	case P_BULKHEAD:
		return rx_bulkhead_admit(&g->bulkhead, ctx, t, why);
	case P_LIMITER:
	default:
		return limiter_step(g, ctx, permit, t, why);
	}
}

static void settle_one(struct rx_guard *g, enum pol p,
		       const struct rx_ticket *t,
		       const struct rx_observation *obs)
{
	switch (p) {
	case P_RATE:
		rx_ratelimit_settle(&g->ratelimit, t, obs);
		break;
	case P_BREAKER:
		rx__breaker_settle(&g->breaker, t, obs);
		break;
	case P_THROTTLER:
		rx_throttler_settle(&g->throttler, t, obs);
		break;
	case P_BULKHEAD:
		rx_bulkhead_settle(&g->bulkhead, t, obs);
		break;
	case P_LIMITER:
	default:
		rx__limiter_settle(&g->limiter, t, obs);
		break;
	}
}

/* Release the admissions of @mask at @now_ns, latest first (ADR-007). */
static void release_mask(struct rx_guard *g, struct rx_gate_permit *permit,
			 unsigned mask, uint64_t now_ns)
{
	struct rx_observation rel = {RX_REJECTED, 0, now_ns};
	int p;

	for (p = P_COUNT - 1; p >= 0; p--)
		if (mask & (1u << p))
			settle_one(g, (enum pol)p,
				   &permit->tickets[index_of(g, (enum pol)p)],
				   &rel);
	/* The limiter's step took the shares too (limiter_step). */
	if (g->shares_on && (mask & (1u << P_LIMITER)))
		shares_settle(g, &permit->tickets[g->gate.count], RX_REJECTED);
}

/* Admit, in gate order, the policies of @want that are on; the first that
 * does not admit stops the run and the ones before it are released. On
 * RX_ADMIT, *@got holds what was admitted. */
static enum rx_decision admit_mask(struct rx_guard *g, unsigned want,
				   const struct rx_admit_ctx *ctx,
				   struct rx_gate_permit *permit,
				   struct rx_refusal *why, unsigned *got)
{
	uint32_t n = 0;
	int p;

	*got = 0;
	for (p = 0; p < P_COUNT; p++) {
		enum rx_decision d;

		if (!is_on(g, (enum pol)p))
			continue;
		if (want & (1u << p)) {
			d = admit_one(g, (enum pol)p, ctx, permit,
				      &permit->tickets[n],
				      why);
			if (d != RX_ADMIT) {
				release_mask(g, permit, *got, ctx->now_ns);
				*got = 0;
				return d;
			}
			*got |= 1u << p;
		}
		n++;
	}
	return RX_ADMIT;
}

static RX__NOINLINE enum rx_decision
admit_general(struct rx_guard *g, const struct rx_admit_ctx *ctx,
	      struct rx_gate_permit *permit, struct rx_refusal *why)
{
	unsigned got;
	enum rx_decision d;

	why->reason = RX_REASON_NONE;
	why->retry_after_ms = 0;
	permit->count = 0;
	d = admit_mask(g, (1u << P_COUNT) - 1, ctx, permit, why, &got);
	if (d == RX_ADMIT)
		permit->count = with_shares(g, permit, g->gate.count);
	return d;
}

static RX__NOINLINE void settle_general(struct rx_guard *g,
					const struct rx_gate_permit *permit,
					const struct rx_observation *obs)
{
	uint32_t n = permit->count < g->gate.count ? permit->count
						   : g->gate.count;
	uint32_t i = 0;
	int p;

	for (p = 0; p < P_COUNT && i < n; p++)
		if (is_on(g, (enum pol)p))
			settle_one(g, (enum pol)p, &permit->tickets[i++], obs);
	if (g->shares_on && permit->count > n)
		shares_settle(g, &permit->tickets[n], obs->verdict);
}

enum rx_decision rx_guard_admit(struct rx_guard *g,
				const struct rx_admit_ctx *ctx,
				struct rx_gate_permit *permit,
				struct rx_refusal *why)
{
	if (ctx->now_ns > g->last_used_ns)
		g->last_used_ns = ctx->now_ns;
	enum rx_decision d = RX__UNLIKELY(g->more)
				 ? admit_general(g, ctx, permit, why)
				 : admit_policies(g, ctx, permit, why);
	if (d == RX_ADMIT) {
		g->in_flight = rx__sat_inc32(g->in_flight);
	} else if (d == RX_REFUSE) {
		count_refusal(g, why->reason);
	}
	return d;
}

/* The steps of admit_policies for a closed breaker and a limiter below
 * its slots, with the tests that lead elsewhere asked first, before any
 * write: prime's stores are those the two admits overwrite (ADR-531). */
bool rx_guard_admit_fast(struct rx_guard *g, const struct rx_admit_ctx *ctx,
			 struct rx_gate_permit *permit)
{
	if (!rx__guard_admit_tickets(g, ctx->now_ns, permit))
		return false;
	if (RX__UNLIKELY(g->shares_on)) { /* limiter_step below its slots */
		shares_take(g, ctx, &permit->tickets[2]);
		permit->count = with_shares(g, permit, 2);
	}
	g->in_flight = rx__sat_inc32(g->in_flight);
	return true;
}

void rx_guard_settle(struct rx_guard *g, const struct rx_gate_permit *permit,
		     const struct rx_observation *obs)
{
	if (obs->now_ns > g->last_used_ns)
		g->last_used_ns = obs->now_ns;
	if (RX__LIKELY(g->plain && permit->count == 2)) {
		/* settle_policies for the default policies' two tickets,
		 * without its tests (ADR-531). */
		rx__breaker_settle(&g->breaker, &permit->tickets[0], obs);
		rx__limiter_settle(&g->limiter, &permit->tickets[1], obs);
	} else if (RX__UNLIKELY(g->more)) {
		settle_general(g, permit, obs);
	} else {
		settle_policies(g, permit, obs);
	}
	g->in_flight = rx__sat_dec32(g->in_flight);
	unsigned v = (unsigned)obs->verdict;
	if (v < RX_VERDICT_COUNT)
		g->counters.settled[v] = rx__sat_add(g->counters.settled[v], 1);
	/* The breaker's threshold is 0 when it is off or absent (the zeroed
	 * struct). */
	if (obs->verdict != RX_REJECTED &&
	    rx__breaker_is_slow(&g->breaker, obs->latency_us))
		g->counters.slow = rx__sat_add(g->counters.slow, 1);
	g->steady = rx__guard_steady(g); /* ADR-587 */
}

/* The limiter is the last policy of the gate (rx_guard_init), the
 * shares' ticket after it; NULL when @permit holds no limiter ticket. */
static struct rx_ticket *limiter_ticket(const struct rx_guard *g,
					const struct rx_gate_permit *permit)
{
	uint32_t n = g->gate.count;

	if (!g->limiter_on || n == 0 || permit->count < n)
		return NULL;
	return (struct rx_ticket *)&permit->tickets[n - 1];
}

bool rx_guard_limiter_window_due(const struct rx_guard *g, uint64_t now_ns)
{
	return rx__guard_limiter_window_due(g, now_ns);
}

void rx_guard_note_caller_busy(struct rx_guard *g)
{
	if (g->limiter_on)
		rx__limiter_note_caller_busy(&g->limiter);
}

bool rx_guard_mark_limiter_released(const struct rx_guard *g,
				    struct rx_gate_permit *permit)
{
	struct rx_ticket *t = limiter_ticket(g, permit);

	if (t == NULL || t->flags == RX_TICKET_RELEASED)
		return false;
	t->flags = RX_TICKET_RELEASED;
	if (permit->count > g->gate.count)
		permit->count = g->gate.count; /* the shares' ticket too */
	return true;
}

void rx_guard_release_limiter(struct rx_guard *g,
			      const struct rx_gate_permit *permit,
			      uint64_t now_ns)
{
	struct rx_observation rel = {RX_REJECTED, 0, now_ns};
	struct rx_ticket *t = limiter_ticket(g, permit);

	if (t == NULL || t->flags == RX_TICKET_RELEASED)
		return;
	rx__limiter_settle(&g->limiter, t, &rel);
	if (g->shares_on && permit->count > g->gate.count)
		shares_settle(g, &permit->tickets[g->gate.count], RX_REJECTED);
}

/* The inline function's steps (guard-inl.h, ADR-532). */
bool rx_guard_settle_fast(struct rx_guard *g,
			  const struct rx_gate_permit *permit,
			  uint64_t latency_us, uint64_t now_ns)
{
	return rx__guard_settle_fast(g, permit, latency_us, now_ns);
}

int rx_guard_enqueue(struct rx_guard *g, uint64_t now_ns, uint64_t *wait_ticket)
{
	if (!g->limiter_on)
		return RX_ENOSPC;
	if (now_ns > g->last_used_ns)
		g->last_used_ns = now_ns;
	int rc = rx_limiter_enqueue(&g->limiter, now_ns, wait_ticket);
	if (rc != RX_OK)
		count_refusal(g, RX_REASON_LIMITER_FULL);
	return rc;
}

/*
 * A waiter's look with other policies on (guard.h, ADR-461): the rate
 * limiter, the breaker and the bulkhead first - deterministic, and
 * released exactly when the turn has not come -, then the limiter's turn,
 * then the throttler, whose draw must happen once per admission. Its
 * refusal releases the limiter's slot too, and the place is gone.
 */
static RX__NOINLINE enum rx_decision
try_dequeue_general(struct rx_guard *g, const struct rx_admit_ctx *ctx,
		    uint64_t wait_ticket, struct rx_gate_permit *permit,
		    struct rx_refusal *why)
{
	unsigned first = (1u << P_RATE) | (1u << P_BREAKER) |
			 (1u << P_BULKHEAD);
	unsigned got;
	enum rx_decision d;

	why->reason = RX_REASON_NONE;
	why->retry_after_ms = 0;
	d = admit_mask(g, first, ctx, permit, why, &got);
	if (d == RX_QUEUE)
		return RX_QUEUE; /* the place is kept: no token, no slot yet */
	if (d == RX_REFUSE) {
		rx_limiter_cancel_wait(&g->limiter, wait_ticket);
		count_refusal(g, why->reason);
		return RX_REFUSE;
	}
	d = rx_limiter_try_dequeue(&g->limiter, wait_ticket, ctx->now_ns,
				   &permit->tickets[index_of(g, P_LIMITER)],
				   why);
	if (d != RX_ADMIT) {
		release_mask(g, permit, got, ctx->now_ns);
		if (d == RX_REFUSE)
			count_refusal(g, why->reason);
		return d;
	}
	if (g->shares_on)
		shares_take(g, ctx, &permit->tickets[g->gate.count]);
	got |= 1u << P_LIMITER;
	if (g->throttler_on) {
		d = admit_one(g, P_THROTTLER, ctx, permit,
			      &permit->tickets[index_of(g, P_THROTTLER)], why);
		if (d != RX_ADMIT) {
			release_mask(g, permit, got, ctx->now_ns);
			count_refusal(g, why->reason);
			return RX_REFUSE;
		}
	}
	permit->count = with_shares(g, permit, g->gate.count);
	g->in_flight = rx__sat_inc32(g->in_flight);
	return RX_ADMIT;
}

enum rx_decision rx_guard_try_dequeue(struct rx_guard *g,
				      const struct rx_admit_ctx *ctx,
				      uint64_t wait_ticket,
				      struct rx_gate_permit *permit,
				      struct rx_refusal *why)
{
	struct rx_ticket t;

	permit->count = 0;
	if (!g->limiter_on) {
		why->reason = RX_REASON_LIMITER_FULL;
		why->retry_after_ms = 0;
		return RX_REFUSE;
	}
	if (ctx->now_ns > g->last_used_ns)
		g->last_used_ns = ctx->now_ns;
	if (g->more)
		return try_dequeue_general(g, ctx, wait_ticket, permit, why);
	enum rx_decision d = rx_limiter_try_dequeue(&g->limiter, wait_ticket,
						    ctx->now_ns, &t, why);
	if (d == RX_QUEUE)
		return RX_QUEUE;
	if (d == RX_ADMIT) {
		/* rx_gate_admit_last with the breaker called by name: the
		 * limiter is the last policy (rx_guard_init), and the gate's
		 * pointers are not followed, so a guard in memory mapped at
		 * another address in each process works (ADR-481). */
		why->reason = RX_REASON_NONE;
		why->retry_after_ms = 0;
		if (g->breaker_on) {
			prime(&permit->tickets[0], ctx->now_ns);
			d = rx__breaker_admit(&g->breaker, ctx->now_ns,
					      &permit->tickets[0], why);
		}
		if (d == RX_ADMIT) {
			permit->tickets[g->breaker_on ? 1 : 0] = t;
			if (RX__UNLIKELY(g->shares_on))
				shares_take(g, ctx,
					    &permit->tickets[g->gate.count]);
			permit->count =
			    with_shares(g, permit, g->breaker_on ? 2u : 1u);
		} else {
			struct rx_observation rel = {RX_REJECTED, 0,
						     ctx->now_ns};
			rx__limiter_settle(&g->limiter, &t, &rel);
		}
		if (d == RX_ADMIT) {
			g->in_flight = rx__sat_inc32(g->in_flight);
			return RX_ADMIT;
		}
	}
	/* A place is never handed back: whatever stopped it is a refusal. */
	count_refusal(g, why->reason);
	return RX_REFUSE;
}

void rx_guard_cancel_wait(struct rx_guard *g, uint64_t wait_ticket,
			  bool refused)
{
	if (!g->limiter_on)
		return;
	rx_limiter_cancel_wait(&g->limiter, wait_ticket);
	if (refused)
		count_refusal(g, RX_REASON_LIMITER_FULL);
}

void rx_guard_wait_begin(struct rx_guard *g)
{
	g->waiting = rx__sat_inc32(g->waiting);
}

void rx_guard_wait_end(struct rx_guard *g, enum rx_reason refused)
{
	g->waiting = rx__sat_dec32(g->waiting);
	if (refused != RX_REASON_NONE)
		count_refusal(g, refused);
}

void rx_guard_count_refusal(struct rx_guard *g, enum rx_reason reason)
{
	count_refusal(g, reason);
}

uint64_t rx_guard_next_token_ns(const struct rx_guard *g, uint64_t now_ns)
{
	return g->ratelimit_on ? rx_ratelimit_next_ns(&g->ratelimit, now_ns)
			       : now_ns;
}

void rx_guard_drop_waiters(struct rx_guard *g)
{
	g->waiting = 0;
	/* Giving up the newest place removes it exactly (limiter.h), so the
	 * queue empties from the back without per-place storage. */
	while (g->limiter_on && g->limiter.queued > 0)
		rx_limiter_cancel_wait(&g->limiter, g->limiter.queue_next - 1);
}
