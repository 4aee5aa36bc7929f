/*
 * breaker.c - the circuit breaker (breaker.h).
 *
 * A three-state machine over a dual-bound window (window.c) and a
 * consecutive-failure count. Decisions this file implements, each recorded
 * in docs/decisions.md:
 *   - Rates trip strictly above the threshold and are compared as the
 *     double quotient failures / n, so "0.5" never trips at exactly half
 *     and a threshold of 1 disables its condition; the comparison goes
 *     through integer cut-offs cached per window size that decide the
 *     same (ADR-183).
 *   - The backstop trips at count >= consecutive_backstop whatever the
 *     window holds (Envoy's consecutive_5xx); overload does not reset it.
 *   - min_calls above window_calls is clamped to window_calls (as
 *     resilience4j does for count windows) instead of being rejected:
 *     otherwise the rate conditions could never fire.
 *   - Starvation widening and the 5-sample floor (ADR-113).
 *   - Open -> half-open is lazy, on the next admit (Polly); no timers.
 *   - The first probe to settle decides (Polly: one probe, success closes,
 *     failure reopens); resilience4j instead waits for all permitted calls.
 *   - Self-heal: a probe outstanding for open_ms is presumed lost - unless
 *     the calls have a deadline: a probe then keeps its slot until it, and
 *     is a timeout from that moment, noticed at the next admit (ADR-381),
 *     so at most half_open_probes probes are ever at the upstream.
 *   - Late settlements are filtered by generation; RX_REJECTED releases
 *     exactly what admit reserved (ADR-007).
 * Every time goes through rx__clock, so a clock that steps back is "no
 * time passed", and every sum saturates.
 */
#include <math.h>
#include <stddef.h>

#include "breaker-inl.h"
#include "common.h"
#include "resilix/breaker.h"
#include "resilix/error.h"

#define TICKET_PROBE 1u

#define RATE_MAX_CALLS 100000u
#define DURATION_MAX_MS UINT64_C(86400000)
#define PROBES_MAX 1000u

const char *rx_breaker_state_name(enum rx_breaker_state s)
{
	switch (s) {
	case RX_BREAKER_CLOSED:
		return "closed";
	case RX_BREAKER_OPEN:
		return "open";
	case RX_BREAKER_HALF_OPEN:
		return "half-open";
	default:
		return "unknown";
	}
}

void rx_breaker_config_default(struct rx_breaker_config *cfg)
{
	/* Provenance of each default is in docs/config.md (ADR-009). */
	cfg->failure_rate = 0.5;	/* resilience4j, Polly use 0.5/0.1 */
	cfg->slow_call_rate = 0.5;	/* ours; only used with a threshold */
	cfg->slow_call_ms = 0;		/* off: ADR-006 */
	cfg->consecutive_backstop = 5;	/* Envoy consecutive_5xx */
	cfg->min_calls = 20;		/* ours, below R4J's 100 */
	cfg->window_calls = 100;	/* resilience4j slidingWindowSize */
	cfg->window_max_age_ms = 60000; /* ours: one minute of evidence */
	cfg->open_ms = 5000;		/* Polly BreakDuration */
	cfg->half_open_probes = 1;	/* Polly: a single probe */
	cfg->call_timeout_ms = 0;	/* none: RESILIX_TIMEOUT_MS unset */
}

static bool rate_ok(double r)
{
	return isfinite(r) && r >= 0.0 && r <= 1.0;
}

int rx_breaker_config_check(const struct rx_breaker_config *cfg,
			    const char **why)
{
	const char *msg = NULL;

	if (cfg == NULL)
		msg = "breaker configuration is missing";
	else if (!rate_ok(cfg->failure_rate))
		msg = "failure_rate must be a number from 0 to 1";
	else if (!rate_ok(cfg->slow_call_rate))
		msg = "slow_call_rate must be a number from 0 to 1";
	else if (cfg->slow_call_ms > DURATION_MAX_MS)
		msg = "slow_call_ms must be 0 (off) to 86400000 ms";
	else if (cfg->consecutive_backstop > RATE_MAX_CALLS)
		msg = "consecutive_backstop must be 0 (off) to 100000 calls";
	else if (cfg->min_calls < 1 || cfg->min_calls > RATE_MAX_CALLS)
		msg = "min_calls must be 1 to 100000 calls";
	else if (cfg->window_calls < 1 || cfg->window_calls > RATE_MAX_CALLS)
		msg = "window_calls must be 1 to 100000 calls";
	else if (cfg->window_max_age_ms > DURATION_MAX_MS)
		msg = "window_max_age_ms must be 0 (none) to 86400000 ms";
	else if (cfg->open_ms < 1 || cfg->open_ms > DURATION_MAX_MS)
		msg = "open_ms must be 1 to 86400000 ms";
	else if (cfg->half_open_probes < 1 ||
		 cfg->half_open_probes > PROBES_MAX)
		msg = "half_open_probes must be 1 to 1000 calls";
	else if (cfg->call_timeout_ms > DURATION_MAX_MS)
		msg = "call_timeout_ms must be 0 (none) to 86400000 ms";
	if (msg == NULL)
		return RX_OK;
	if (why != NULL)
		*why = msg;
	return RX_EINVAL;
}

/*
 * The age bound actually used: window_max_age_ms, widened to
 * min_calls x slow_call_ms when the slow condition is on and the configured
 * age could not hold min_calls slow samples (ADR-113).
 */
static uint64_t effective_max_age_ms(const struct rx_breaker_config *cfg,
				     uint32_t min_calls)
{
	uint64_t age = cfg->window_max_age_ms;
	if (age == 0 || cfg->slow_call_ms == 0)
		return age;
	uint64_t need = rx__sat_mul(min_calls, cfg->slow_call_ms);
	return age < need ? need : age;
}

int rx_breaker_init(struct rx_breaker *b, const struct rx_breaker_config *cfg,
		    struct rx_window_slot *slots)
{
	if (b == NULL || slots == NULL || rx_breaker_config_check(cfg, NULL))
		return RX_EINVAL;
	b->cfg = *cfg;
	b->min_calls = cfg->min_calls < cfg->window_calls ? cfg->min_calls
							  : cfg->window_calls;
	b->effective_max_age_ns =
	    rx__ms_to_ns(effective_max_age_ms(cfg, b->min_calls));
	if (rx_window_init(&b->window, slots, cfg->window_calls,
			   b->effective_max_age_ns) != RX_OK)
		return RX_EINVAL;
	b->state = RX_BREAKER_CLOSED;
	b->generation = 0;
	b->consecutive_failures = 0;
	b->probes_in_flight = 0;
	b->opened_ns = 0;
	b->last_now_ns = 0;
	b->transitions = 0;
	b->probe_epoch_ns = 0;
	b->starving = false;
	b->cutoff_n = 0; /* no cut-offs yet: n is at least 1 when used */
	b->failure_cutoff = 0;
	b->slow_cutoff = 0;
	/* Converted once here rather than on every admit and settle: the
	 * configuration never changes after init (ADR-300). */
	b->slow_call_us = rx__sat_mul(cfg->slow_call_ms, 1000);
	b->open_ns = rx__ms_to_ns(cfg->open_ms);
	b->call_timeout_ns = rx__ms_to_ns(cfg->call_timeout_ms);
	return RX_OK;
}

static void change_state(struct rx_breaker *b, enum rx_breaker_state s)
{
	b->state = s;
	b->generation++;
	b->transitions = rx__sat_add(b->transitions, 1);
	b->probes_in_flight = 0;
}

static void trip(struct rx_breaker *b, uint64_t now)
{
	b->opened_ns = now;
	change_state(b, RX_BREAKER_OPEN);
}

static void close_circuit(struct rx_breaker *b)
{
	rx_window_clear(&b->window);
	b->consecutive_failures = 0;
	b->starving = false;
	change_state(b, RX_BREAKER_CLOSED);
}

static uint64_t open_end_ns(const struct rx_breaker *b)
{
	return rx__sat_add(b->opened_ns, b->open_ns);
}

/* Is the slow condition on at all, and can a slow rate ever trip? */
static bool slow_tracked(const struct rx_breaker *b)
{
	return b->slow_call_us > 0;
}

static bool slow_trips(const struct rx_breaker *b)
{
	return slow_tracked(b) && b->cfg.slow_call_rate < 1.0;
}

enum rx_decision rx_breaker_admit(struct rx_breaker *b,
				  const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why)
{
	return rx__breaker_admit(b, ctx->now_ns, ticket, why);
}

static enum rx_decision admit_cold(struct rx_breaker *b, uint64_t now,
				   struct rx_ticket *ticket,
				   struct rx_refusal *why, int depth);

/* The oldest probe's deadline passed at probe_epoch + call_timeout: a
 * timeout, which reopens the circuit from that moment (ADR-381); then
 * admit as the open state says at @now. */
static enum rx_decision probe_timed_out(struct rx_breaker *b, uint64_t now,
					struct rx_ticket *ticket,
					struct rx_refusal *why)
{
	trip(b, rx__sat_add(b->probe_epoch_ns, b->call_timeout_ns));
	return admit_cold(b, now, ticket, why, 1);
}

RX__NOINLINE enum rx_decision rx__breaker_admit_cold(struct rx_breaker *b,
						     uint64_t now,
						     struct rx_ticket *ticket,
						     struct rx_refusal *why)
{
	return admit_cold(b, now, ticket, why, 0);
}

static enum rx_decision admit_cold(struct rx_breaker *b, uint64_t now,
				   struct rx_ticket *ticket,
				   struct rx_refusal *why, int depth)
{
	if (b->state == RX_BREAKER_OPEN) {
		uint64_t end = open_end_ns(b);
		if (now < end) {
			why->reason = RX_REASON_CIRCUIT_OPEN;
			why->retry_after_ms = rx__ns_to_ms_ceil(end - now);
			return RX_REFUSE;
		}
		change_state(b, RX_BREAKER_HALF_OPEN);
	}
	if (b->state == RX_BREAKER_HALF_OPEN) {
		/* A probe with a deadline keeps its slot until it, and is a
		 * timeout from then on: the first probe to settle decides,
		 * so the circuit reopens (ADR-381). Without one, self-heal: a
		 * probe out for open_ms is presumed lost. Either way a new
		 * generation makes its eventual settlement count for nothing,
		 * so it cannot free a slot that now belongs to another. */
		uint64_t age = rx__sat_sub(now, b->probe_epoch_ns);
		if (b->probes_in_flight >= b->cfg.half_open_probes) {
			if (b->call_timeout_ns > 0) {
				/* depth: a probe admitted after the reopen
				 * is at most as old as the period; never
				 * twice in one admit. */
				if (age >= b->call_timeout_ns && depth == 0)
					return probe_timed_out(b, now, ticket,
							       why);
			} else if (age >= b->open_ns) {
				b->probes_in_flight = 0;
				b->generation++;
			}
		}
		if (b->probes_in_flight >= b->cfg.half_open_probes) {
			why->reason = RX_REASON_HALF_OPEN_BUSY;
			why->retry_after_ms = 0;
			return RX_REFUSE;
		}
		if (b->probes_in_flight == 0)
			b->probe_epoch_ns = now;
		b->probes_in_flight++;
		ticket->flags = TICKET_PROBE;
	} else {
		ticket->flags = 0;
	}
	ticket->start_ns = now;
	ticket->generation = b->generation;
	return RX_ADMIT;
}

/*
 * The trip rule "count / n, as a double, strictly above @rate" as an
 * integer cut-off for a window of @n calls (n >= 1): the smallest count k
 * in [0, n] with (double)k / n > rate, or n + 1 when no count trips (a
 * rate of 1). Division rounds monotonically, so the quotient never falls
 * as k grows and "count >= cut-off" decides exactly as the quotient does,
 * rounding included (ADR-183). The guess rate x n is within one of the
 * answer; the loops settle it with the rule's own division.
 */
static uint32_t rate_cutoff(double rate, uint32_t n)
{
	double guess = rate * (double)n;
	uint32_t k = guess >= (double)n ? n : (uint32_t)guess;

	while (k > 0 && (double)(k - 1) / n > rate)
		k--;
	while (k <= n && !((double)k / n > rate))
		k++;
	return k;
}

RX__NOINLINE void rx__breaker_cutoffs(struct rx_breaker *b, uint32_t n)
{
	b->cutoff_n = n;
	b->failure_cutoff = rate_cutoff(b->cfg.failure_rate, n);
	b->slow_cutoff = rate_cutoff(b->cfg.slow_call_rate, n);
}

RX__NOINLINE void rx__breaker_trip(struct rx_breaker *b, uint64_t now)
{
	trip(b, now);
}

void rx_breaker_settle(struct rx_breaker *b, const struct rx_ticket *ticket,
		       const struct rx_observation *obs)
{
	rx__breaker_settle(b, ticket, obs);
}

RX__NOINLINE void rx__breaker_settle_cold(struct rx_breaker *b,
					  const struct rx_ticket *ticket,
					  const struct rx_observation *obs,
					  uint64_t now)
{
	enum rx_verdict v = obs->verdict;

	if (v == RX_REJECTED) {
		if (b->state == RX_BREAKER_HALF_OPEN &&
		    (ticket->flags & TICKET_PROBE))
			b->probes_in_flight =
			    rx__sat_dec32(b->probes_in_flight);
		return;
	}
	if ((unsigned)v >= RX_VERDICT_COUNT)
		v = RX_TRANSIENT; /* unrecognised reads as transient */

	bool failure = rx__verdict_is_failure(v);
	bool slow = rx__breaker_is_slow(b, obs->latency_us);

	switch (b->state) {
	case RX_BREAKER_CLOSED:
		rx__breaker_record_closed(b, now, failure, slow, v);
		break;
	case RX_BREAKER_HALF_OPEN:
		if (!(ticket->flags & TICKET_PROBE))
			break;
		b->probes_in_flight = rx__sat_dec32(b->probes_in_flight);
		if (failure || (slow && slow_trips(b)))
			trip(b, now);
		else
			close_circuit(b);
		break;
	default:
		break; /* open: no ticket of this generation exists */
	}
}

void rx_breaker_stats(const struct rx_breaker *b, uint64_t now_ns,
		      struct rx_breaker_stats *out)
{
	uint64_t now = rx__clock_peek(b->last_now_ns, now_ns);
	const struct rx_window *w = &b->window;
	uint32_t n = w->count, fail = w->failures, slow = w->slow;
	bool evicts = false;

	/* What the next settlement would see, without evicting anything. */
	if (w->max_age_ns > 0) {
		uint32_t i = w->tail;
		while (n > 0 &&
		       rx__sat_sub(now, rx_window_slots(w)[i].t_ns) >= w->max_age_ns) {
			fail -= (rx_window_slots(w)[i].flags & RX_SLOT_FAILURE) != 0;
			slow -= (rx_window_slots(w)[i].flags & RX_SLOT_SLOW) != 0;
			n--;
			evicts = true;
			i = i + 1 == w->capacity ? 0 : i + 1;
		}
	}
	out->state = b->state;
	out->window_count = n;
	out->window_failures = fail;
	out->window_slow = slow;
	out->consecutive_failures = b->consecutive_failures;
	out->probes_in_flight = b->probes_in_flight;
	out->failure_rate = n ? (double)fail / n : 0.0;
	out->slow_call_rate = n ? (double)slow / n : 0.0;
	out->effective_max_age_ms = b->effective_max_age_ns / RX__NS_PER_MS;
	out->starved = b->state == RX_BREAKER_CLOSED &&
		       (b->starving || evicts) && n < b->min_calls;
	out->open_remaining_ms = 0;
	if (b->state == RX_BREAKER_OPEN)
		out->open_remaining_ms =
		    rx__ns_to_ms_ceil(rx__sat_sub(open_end_ns(b), now));
	out->transitions = b->transitions;
}

static enum rx_decision ops_admit(void *self, const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why)
{
	return rx_breaker_admit(self, ctx, ticket, why);
}

static void ops_settle(void *self, const struct rx_ticket *ticket,
		       const struct rx_observation *obs)
{
	rx_breaker_settle(self, ticket, obs);
}

const struct rx_policy_ops rx_breaker_ops = {
    .name = "breaker",
    .admit = ops_admit,
    .settle = ops_settle,
};
