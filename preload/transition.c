/*
 * preload/transition.c - the log line of a breaker transition: from, to,
 * and why (open time elapsed, a probe's verdict, the failure or
 * slow-call rate, consecutive failures), with the window's figures
 * (ADR-165 for the rate limit of the log itself).
 */
#include "config.h"

#include <stdio.h>

#include "transition.h"

/* Why the breaker moved from @from to @to, judged from the stats after
 * the move (a trip does not clear the window). */
static const char *transition_reason(const struct rx_breaker_stats *st,
				     enum rx_breaker_state from,
				     enum rx_breaker_state to)
{
	const struct rx_breaker_config *b = &rx__cfg.guard.breaker;
	uint32_t min =
	    b->min_calls < b->window_calls ? b->min_calls : b->window_calls;
	bool enough;

	if (from == RX_BREAKER_OPEN && to == RX_BREAKER_HALF_OPEN)
		return "open-elapsed";
	if (from == RX_BREAKER_HALF_OPEN && to == RX_BREAKER_CLOSED)
		return "probe-succeeded";
	if (from == RX_BREAKER_HALF_OPEN && to == RX_BREAKER_OPEN)
		return "probe-failed";
	if (from != RX_BREAKER_CLOSED || to != RX_BREAKER_OPEN)
		return "unknown";
	/* A starved window decides on what it holds, down to 5 samples. */
	if (st->starved && min > 5)
		min = 5;
	enough = st->window_count >= min;
	if (enough && b->failure_rate < 1.0 &&
	    st->failure_rate > b->failure_rate)
		return "failure-rate";
	if (enough && b->slow_call_ms > 0 && b->slow_call_rate < 1.0 &&
	    st->slow_call_rate > b->slow_call_rate)
		return "slow-call-rate";
	if (b->consecutive_backstop > 0 &&
	    st->consecutive_failures >= b->consecutive_backstop)
		return "consecutive-failures";
	return "unknown";
}

void rx__watch_log(const struct watch *w, const char *key)
{
	char fr[8], sr[8];

	if (!w->on || w->before.transitions == w->after.transitions)
		return;
	rx__log(RX_LOG_INFO,
		"key=%s event=breaker-transition from=%s to=%s reason=%s "
		"failure_rate=%s slow_call_rate=%s window=%u consecutive=%u",
		key, rx_breaker_state_name(w->before.state),
		rx_breaker_state_name(w->after.state),
		transition_reason(&w->after, w->before.state, w->after.state),
		rx__fmt_rate(fr, sizeof(fr), w->after.failure_rate),
		rx__fmt_rate(sr, sizeof(sr), w->after.slow_call_rate),
		w->after.window_count, w->after.consecutive_failures);
}

/*
 * One limit-change line (ADR-138). The latency figures are left out until
 * the limiter has measured them (a drop can move the limit before its
 * first window closes) rather than shown as 0 us.
 */
void rx__log_limit_change(const char *key,
			  const struct rx_limiter_stats *ls)
{
	char lat[64] = "";

	if (ls->p90_us > 0 || ls->rtt_noload_us > 0)
		snprintf(lat, sizeof(lat), " p90_us=%llu rtt_noload_us=%llu",
			 (unsigned long long)ls->p90_us,
			 (unsigned long long)ls->rtt_noload_us);
	rx__log(RX_LOG_INFO,
		"key=%s event=limit-change limit=%u in_flight=%u queued=%u%s",
		key, ls->limit, ls->in_flight, ls->queued, lat);
}

/* A call's own end found it settled already, as a timeout when its
 * deadline passed (ADR-382): its answer is no evidence. No lock held. */
void rx__settle_skipped(const char *key, const char *at)
{
	if (rx__log_enabled(RX_LOG_DEBUG))
		rx__log(RX_LOG_DEBUG,
			"key=%s event=settle-skipped reason=deadline-passed "
			"at=%s",
			key, at);
}
