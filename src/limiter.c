/*
 * limiter.c - the adaptive concurrency limiter (limiter.h).
 *
 * One struct, three update rules behind one switch: Vegas queue estimation
 * (Netflix concurrency-limits VegasLimit, the default), gradient2 (NCL
 * Gradient2Limit) and AIMD (NCL AIMDLimit), windowed as NCL's WindowedLimit
 * and failsafe-go's adaptive limiter do, with the p90 of a per-window
 * log-linear histogram (whist-inl.h, ADR-522; a P² estimator, Jain &
 * Chlamtac 1985, before) as the latency signal and failsafe-go's queueing bands in
 * front (queue to 2L, shed linearly to 3L). limiter.h states every rule and
 * default with its source; the decisions that are ours, and why:
 *
 *   - admit writes nothing but in_flight (and the shed counters on a
 *     refusal). The peak concurrency of a window is taken from the tickets
 *     at settlement (NCL hands its limit the in-flight count at
 *     acquisition the same way), staleness is computed from the time
 *     rather than written, and only settle records the clock. So admit
 *     followed by settle(RX_REJECTED) leaves every byte of the limiter as
 *     it was (ADR-007).
 *   - Drops (overload, timeout) decrease the limit at once, multiplicatively
 *     (drop_backoff, NCL AIMD's 0.9, for all three algorithms: NCL Vegas
 *     subtracts log10 L, which is nothing at L = 500, and NCL gradient2
 *     ignores drops). Only a call admitted after the previous
 *     drop-decrease can cause the next one (the ticket carries the drop
 *     epoch): a burst of 429s from calls sent together is one congestion
 *     signal, as for TCP; a storm that goes on shrinks the limit by a
 *     tenth every round trip.
 *   - The tether caps growth at growth_tether x the window's peak in
 *     flight and never lowers a limit (a lull is not evidence).
 *   - Baselines are re-measured by draining, not adopted from a loaded
 *     window: NCL Vegas's probe (rtt_noload := current rtt) is harmless
 *     with per-sample minima but, with a windowed p90, each probe took in
 *     the queue the limit itself caused and the limit drifted to 3.9 C in
 *     a simulated hour (tests/unit/test_limiter.c keeps the regression).
 *     A probe window admits L / 2 and measures only what it admitted; its
 *     result may raise the baseline only when halving the concurrency
 *     left latency within a quarter of where it was (the upstream became
 *     slower), so a probe during a capacity collapse, when L / 2 still
 *     queues, cannot inflate it. gradient2's long EMA takes only windows
 *     within rtt_tolerance of it for the same reason (NCL's drifts).
 *   - After 5 consecutive windows that ask for less but cannot get it
 *     (Envoy's "5 windows at the minimum"), the baseline is re-measured
 *     from the current window, so no baseline can pin the limit down.
 *   - A queue delays every call, the median one too (ADR-571, ADR-573):
 *     Vegas's queue is the smaller of the p90's and the median's
 *     estimates, AIMD's congestion needs both; a walk down that halved
 *     the calls in flight and cut the median by under a quarter
 *     re-measures the baseline; while learning, a drop binds only at an
 *     error share of 1 in 20, so one 503 among thousands of answers binds
 *     nothing.
 *   - The probe cadence's U[0.5, 1) jitter is a SplitMix64 hash of the
 *     settlement time and the update count: settle has no generator
 *     (struct rx_observation), and the hash keeps runs reproducible under
 *     an injected clock while desynchronising keys.
 *   - Latencies of 0 µs count as 1 µs in ratios (no division by zero);
 *     every new limit is checked finite and clamped, so no sample stream
 *     can make it NaN, 0 or larger than max_limit. The limit is a double
 *     (gradient2 smooths in fractions); admission uses its floor.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "common.h"
#include "limiter-inl.h"
#include "resilix/error.h"
#include "resilix/limiter.h"

/* Gradient2 averages its first windows before it starts the EMA (NCL
 * ExpAvgMeasurement warm-up). */
#define GRADIENT2_WARMUP_WINDOWS 10
/* The first re-probe comes early; a probe whose latency fell below this
 * share of the window before it saw load-dependent latency: see probe()
 * and close_window(). */
#define PROBE_RESPONSE 0.75
#define FIRST_PROBE_WINDOWS 10
/* Envoy re-measures minRTT after this many windows at the minimum. */
#define STUCK_WINDOWS_BEFORE_REBASE 5
/* While learning, drops are evidence once they are at least 1 in this
 * many of the calls settled in the window and the one before (ADR-573). */
#define DROP_EVIDENCE_EVERY 20
/* A walk down that has cut the calls in flight to this share of where it
 * began has cut a queue's latency about as much; see walk_down(). */
#define WALK_CUT 0.5


/* SplitMix64's finaliser (Steele, Lea, Flood 2014), as a hash. */
static uint64_t mix64(uint64_t z)
{
	z += UINT64_C(0x9e3779b97f4a7c15);
	z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
	z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
	return z ^ (z >> 31);
}

/* A U[0.5, 1) probe jitter from @seed. */
static double probe_jitter(uint64_t seed)
{
	return 0.5 + 0.5 * ((double)(mix64(seed) >> 11) * 0x1.0p-53);
}

/* A double as uint64_t, saturating (a cast of an out-of-range double is
 * undefined behaviour). */
static uint64_t to_u64(double v)
{
	if (!(v > 0.0))
		return 0;
	if (v >= 18446744073709551615.0)
		return UINT64_MAX;
	return (uint64_t)v;
}

static void window_reset(struct rx_limiter *l)
{
	rx__whist_reset(&l->window);
	l->window_start_ns = 0;
	l->window_min_us = UINT64_MAX;
	l->window_peak = 0;
	l->window_open = false;
	l->window_busy = false;
	l->window_drop = false;
	l->window_drops = 0;
	l->window_bound = false;
}

int rx_limiter_init(struct rx_limiter *l, const struct rx_limiter_config *cfg)
{
	if (l == NULL || rx_limiter_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	/* Zero every byte, padding included, so copies compare equal. */
	memset(l, 0, sizeof *l);
	l->cfg = *cfg;
	l->limit = (double)cfg->initial_limit;
	l->probe_jitter = probe_jitter(0);
	l->learning = cfg->learn_first;
	l->learning_cap = cfg->max_binds_learning ? cfg->max_limit : UINT32_MAX;
	/* The data path compares against these on every settlement; the
	 * configuration never changes after init (ADR-300). */
	l->stale_ns = rx__ms_to_ns(cfg->stale_ms);
	l->window_min_ns = rx__ms_to_ns(cfg->window_min_ms);
	l->window_max_ns = rx__ms_to_ns(cfg->window_max_ms);
	l->queue_floor_us = (double)cfg->queue_floor_ms * 1000.0;
	window_reset(l);
	return RX_OK;
}

static void refuse(struct rx_refusal *why)
{
	if (why != NULL) {
		why->reason = RX_REASON_LIMITER_FULL;
		why->retry_after_ms = 0;
	}
}

enum rx_decision rx_limiter_admit(struct rx_limiter *l,
				  const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why)
{
	return rx__limiter_admit(l, ctx, ticket, why);
}

static bool probe_stalled(struct rx_limiter *l, uint64_t now);

RX__NOINLINE enum rx_decision
rx__limiter_admit_over(struct rx_limiter *l, const struct rx_admit_ctx *ctx,
		       uint64_t limit, uint64_t backlog,
		       struct rx_ticket *ticket, struct rx_refusal *why)
{
	/* A probe the calls in flight will not let drain ends (ADR-653). */
	if (RX__UNLIKELY(l->probing) && probe_stalled(l, ctx->now_ns) &&
	    backlog < rx__limiter_slot_limit(l, (uint32_t)limit)) {
		rx__limiter_take_slot(l, ctx->now_ns, ticket);
		return RX_ADMIT;
	}
	/* Learning, only a probe holds calls back, and only those that can
	 * wait for it: a probe on a healthy upstream refuses nobody
	 * (ADR-380). The call is not one of the probe's samples. */
	if (l->learning && !ctx->can_wait && backlog < limit) {
		rx__limiter_take_slot(l, ctx->now_ns, ticket);
		return RX_ADMIT;
	}
	/* A learnt limit, a caller that cannot wait, no drop in the window:
	 * admitted where a caller that can would wait its turn (below 2L, and
	 * max_limit, which binds everyone) - refusing it there treats it
	 * worse than that one - and refused where that one starts to be
	 * shed. A drop in the window (the upstream fails), or a limit set by
	 * hand (no learn_first): from L on (ADR-630). */
	if (!ctx->can_wait && l->cfg.learn_first && !l->window_drop &&
	    backlog < 2 * limit && backlog < l->cfg.max_limit) {
		rx__limiter_take_slot(l, ctx->now_ns, ticket);
		return RX_ADMIT;
	}
	l->window_bound = true;
	refuse(why);
	if (!ctx->can_wait) {
		l->shed_nonblocking = rx__sat_add(l->shed_nonblocking, 1);
		return RX_REFUSE;
	}
	if (backlog < 2 * limit)
		return RX_QUEUE;
	if (backlog >= 3 * limit) {
		l->shed_full = rx__sat_add(l->shed_full, 1);
		return RX_REFUSE;
	}
	/* 2L <= backlog < 3L: shed with probability (backlog - 2L) / L,
	 * which is 0 at exactly 2L (no draw then). */
	uint64_t over = backlog - 2 * limit;
	if (over > 0 &&
	    (ctx->rng == NULL ||
	     rx_rng_unit(ctx->rng) < (double)over / (double)limit)) {
		l->shed_band = rx__sat_add(l->shed_band, 1);
		return RX_REFUSE;
	}
	return RX_QUEUE;
}

/* The next limit after tether, clamp and finiteness (limiter.h). */
static double bound_limit(const struct rx_limiter *l, double old, double next)
{
	double min = (double)l->cfg.min_limit;
	double max = (double)l->cfg.max_limit;

	if (!isfinite(next))
		next = old;
	if (next > old) {
		double cap = l->cfg.growth_tether * (double)l->window_peak;
		if (cap < min)
			cap = min;
		if (next > cap)
			next = cap > old ? cap : old;
	}
	if (next < min)
		next = min;
	if (next > max)
		next = max;
	return next;
}

/* The window's median, µs: read only where a window closes, out of line,
 * and there only where the p90 alone would not do. */
static double window_median(const struct rx_limiter *l)
{
	return rx__whist_quantile(&l->window, 0.5, l->window_min_us);
}

/* Vegas/AIMD baseline: the running minimum of the window quantiles, and
 * the median of the window that set it (ADR-573). Returns true when this
 * window set it. */
static bool track_noload(struct rx_limiter *l, double rtt)
{
	if (l->baseline_us <= 0.0 || rtt < l->baseline_us) {
		l->baseline_us = rtt;
		l->baseline_med_us = window_median(l);
		return true;
	}
	return false;
}

/*
 * Has the window's median risen above the baseline's median by more than
 * a share @over of it (ADR-573)? A queue delays every call in it, the
 * median one too (ADR-571); the p90 of an upstream with a slow share -
 * cache misses, a bimodal upstream - swings between its modes from window
 * to window, so a running minimum of p90s sits far below its usual value,
 * while the median stays put. True when no baseline median is known.
 */
static bool median_rose(const struct rx_limiter *l, double over)
{
	double base = l->baseline_med_us;

	return !(base > 0.0) || window_median(l) > base * (1.0 + over);
}

/*
 * The re-probe, for all three algorithms (ours; BRPC's auto limiter halves
 * its limit to re-measure no-load latency, Envoy pins it to the minimum,
 * BBR drains to four packets). NCL's cadence: every U[0.5, 1) x
 * probe_multiplier x L windows, and the first after FIRST_PROBE_WINDOWS
 * (the first baseline may have been measured while the upstream already
 * queued). The window after a start is the probe: admission is held to
 * L / 2 (never below min_limit), the bands stay at 2L and 3L, and only
 * calls admitted during the probe are measured; its quantile becomes the
 * baseline (close_window says when it may raise it). Returns PROBE_DONE
 * at the end of a probe window, PROBE_STARTED when one starts, else
 * PROBE_NONE.
 */
enum probe_step { PROBE_NONE, PROBE_STARTED, PROBE_DONE };

/* A probe ends: the next is due on the cadence from @now. */
static void end_probe(struct rx_limiter *l, uint64_t now)
{
	l->probing = false;
	l->probed = true;
	l->probes = rx__sat_add(l->probes, 1);
	l->probe_count = 0;
	l->probe_jitter = probe_jitter(now ^ mix64(l->updates));
}

static enum probe_step probe(struct rx_limiter *l, uint64_t now)
{
	if (l->probing) {
		end_probe(l, now);
		return PROBE_DONE;
	}
	if (l->probe_count < UINT32_MAX)
		l->probe_count++;
	if (l->baseline_us <= 0.0)
		return PROBE_NONE;
	double due = l->probed
			 ? l->probe_jitter * l->cfg.probe_multiplier * l->limit
			 : FIRST_PROBE_WINDOWS;
	if ((double)l->probe_count >= due) {
		l->probing = true;
		l->probe_start_ns = now;
		return PROBE_STARTED;
	}
	return PROBE_NONE;
}

static uint64_t window_ns(const struct rx_limiter *l);

/* Window lengths a probe may run without its window closing. */
#define PROBE_STALL_WINDOWS 2

/*
 * A probe holds admission to its slots until its window closes, and only
 * calls admitted within those slots are its samples. Calls that stay in
 * flight on purpose - a Redis BLPOP, a long poll, a slow query - can keep
 * the calls in flight at or above the slots for as long as they wait: the
 * probe gets no sample, never closes, and holds every caller that can
 * wait until its queue timeout refuses it, on a healthy upstream (ADR-653).
 * So a probe that has run PROBE_STALL_WINDOWS window lengths without a
 * single sample ends unmeasured, as if done, with the baseline it had;
 * the next one is due on the usual cadence. One that is draining a queue
 * gets samples as it drains and runs to its end. Asked only where a
 * caller finds the slots full. Returns true when it ended the probe.
 */
static bool probe_stalled(struct rx_limiter *l, uint64_t now)
{
	if (l->window.count > 0 ||
	    rx__sat_sub(now, l->probe_start_ns) <
		rx__sat_mul(window_ns(l), PROBE_STALL_WINDOWS))
		return false;
	end_probe(l, now);
	window_reset(l);
	return true;
}

static void rebase(struct rx_limiter *l, double rtt)
{
	l->baseline_us = rtt;
	l->baseline_med_us = window_median(l);
	l->baseline_windows = GRADIENT2_WARMUP_WINDOWS;
	l->baseline_resets = rx__sat_add(l->baseline_resets, 1);
}

/* max(1, floor(log10 L)) at every L: the powers of ten up to L counted
 * (exact where log10 rounds, and no libm; L <= 1000000, at most 6 steps,
 * bounded at 308 for any double). */
static double vegas_f(double limit)
{
	double f = 0.0;

	for (double p = 10.0; p <= limit && f < 308.0; p *= 10.0)
		f += 1.0;
	return f < 1.0 ? 1.0 : f;
}

static double vegas_update(struct rx_limiter *l, double rtt, bool *wants_less)
{
	double limit = l->limit;

	if (track_noload(l, rtt))
		return limit;
	if (l->window_drop)
		return limit; /* already decreased at once */
	if ((double)l->window_peak * 2.0 < limit)
		return limit; /* app-limited */

	double f = vegas_f(limit);
	double queue = rx__ceil(limit * (1.0 - l->baseline_us / rtt));
	/* NCL's alpha = 3f and beta = 6f calls of queue are a sliver of a
	 * large limit but most of a small one: at L = 8 they let the
	 * upstream's latency reach 2.5 x. Below L = 18 the tolerated queue
	 * is capped at a third of L (ADR-211). */
	double beta = 6.0 * f, alpha = 3.0 * f;
	if (beta > limit / 3.0) {
		beta = limit / 3.0 > 1.0 ? limit / 3.0 : 1.0;
		alpha = beta / 2.0;
	}
	/* A queue the p90 shows must show in the median too (ADR-573):
	 * the queue is the smaller of the two estimates, the median's
	 * against the baseline window's median. */
	if (queue > f && l->baseline_med_us > 0.0) {
		double med = window_median(l);
		double mq =
		    rx__ceil(limit * (1.0 - l->baseline_med_us /
						(med >= 1.0 ? med : 1.0)));
		if (mq < queue)
			queue = mq;
	}
	if (queue <= f)
		return limit + beta;
	if (queue < alpha)
		return limit + f;
	if (queue > beta) {
		*wants_less = true;
		return limit - f;
	}
	return limit;
}

static double aimd_update(struct rx_limiter *l, double rtt, bool *wants_less)
{
	double limit = l->limit;

	/* The first window only learns the baseline; a lower rtt later
	 * lowers it and is judged against it like any other. */
	if (track_noload(l, rtt) && l->updates <= 1)
		return limit;
	if (l->window_drop)
		return limit;
	if (rtt > l->cfg.rtt_tolerance * l->baseline_us &&
	    median_rose(l, l->cfg.rtt_tolerance - 1.0)) {
		*wants_less = true;
		return rx__floor(limit * l->cfg.drop_backoff);
	}
	if ((double)l->window_peak * 2.0 >= limit)
		return limit + 1.0;
	return limit;
}

static double gradient2_update(struct rx_limiter *l, double rtt,
			       bool *wants_less)
{
	const struct rx_limiter_config *c = &l->cfg;
	double limit = l->limit;
	double shortr = rtt;

	if (l->baseline_windows < GRADIENT2_WARMUP_WINDOWS) {
		double n = (double)l->baseline_windows;
		l->baseline_us = (l->baseline_us * n + shortr) / (n + 1.0);
		l->baseline_windows++;
	} else if (shortr <= c->rtt_tolerance * l->baseline_us) {
		double alpha = 2.0 / ((double)c->gradient2_long_window + 1.0);
		l->baseline_us += alpha * (shortr - l->baseline_us);
	}
	/* Latency back to normal after a long incident: let the long
	 * average catch up faster than its EMA would (NCL). */
	if (l->baseline_us / shortr > 2.0)
		l->baseline_us *= 0.95;

	if (l->window_drop)
		return limit;
	if ((double)l->window_peak < limit / 2.0)
		return limit; /* app-limited */

	double g = c->rtt_tolerance * l->baseline_us / shortr;
	if (g < 0.5)
		g = 0.5;
	if (g > 1.0)
		g = 1.0;
	double target = limit * g + (double)c->gradient2_queue_size;
	/* Only the largest decrease counts as asking for less: near its
	 * equilibrium g is just below 1 on every window. */
	if (g <= 0.5)
		*wants_less = true;
	return limit * (1.0 - c->gradient2_smoothing) +
	       target * c->gradient2_smoothing;
}

/*
 * Do no harm (ADR-380): is the window's quantile @rtt evidence that the
 * upstream queues? Its queueing delay over the baseline must exceed both
 * the absolute floor and (rtt_tolerance - 1) x the baseline, and so must
 * the window's median (ADR-571).
 */
static bool queue_evidence(const struct rx_limiter *l, double rtt)
{
	double base = l->baseline_us;
	double margin = (l->cfg.rtt_tolerance - 1.0) * base;

	/* A queue that our calls build grows with their number: latency
	 * that rose while the program ran no more calls than when the
	 * baseline was measured came from elsewhere - this host, most
	 * often, when an event loop runs a fixed number of connections. */
	if (!(base > 0.0) ||
	    (uint64_t)l->window_peak * 4 <= (uint64_t)l->baseline_peak * 5)
		return false;
	if (margin < l->queue_floor_us)
		margin = l->queue_floor_us;
	if (!(rtt - base > margin))
		return false;
	/* A queue delays every call in it, the median one too: a queue of
	 * more than @margin puts the window's median above @margin. A
	 * quantile that rose while the median stayed below it is the
	 * upstream's own slow share - cache misses, slow queries, a
	 * bimodal upstream - read from a noisier window, not a queue: the
	 * running minimum of such windows' quantiles sits far below their
	 * usual value (ADR-571). */
	return rx__whist_quantile(&l->window, 0.5, l->window_min_us) > margin;
}

/* Windows in a row with queueing evidence that end the learning period. */
#define EVIDENCE_WINDOWS 2
/* Windows in a row without a drop or queueing evidence that end a binding
 * the drops began, whether or not callers were held back (ADR-651). */
#define CALM_WINDOWS 2

/*
 * The learning period, window by window (ADR-210, ADR-380). While
 * learning, the limit @next never falls below the window's peak in
 * flight (every call was admitted, so that is the concurrency the program
 * runs: the upstream answered it), and EVIDENCE_WINDOWS windows of
 * queueing evidence in a row end the period; a drop ends it at once
 * (rx__limiter_drop). Bound, a window in which nobody waited or was
 * refused, with no drop and no evidence, starts it again: the limit binds
 * nothing, and nothing says the upstream still queues. So do CALM_WINDOWS
 * such windows in a row, callers held back or not, when drops ended the
 * period and no window since showed a queue: the overload is over, and
 * callers that cannot wait, refused in every window, would otherwise keep
 * the limit bound on latency their own host adds (ADR-651). Returns the
 * limit to bound.
 */
static double learn(struct rx_limiter *l, bool evidence, double next)
{
	if (!l->learning) {
		if (l->cfg.learn_first && !l->window_drop && !evidence &&
		    (!l->window_bound ||
		     (l->drop_bound &&
		      ++l->evidence_windows >= CALM_WINDOWS))) {
			l->learning = true;
			l->evidence_windows = 0;
			l->drop_bound = false;
		} else if (evidence || l->window_drop) {
			/* A queue shows: bound by latency from now on. */
			l->drop_bound = l->drop_bound && !evidence;
			l->evidence_windows = 0;
		}
		return next;
	}
	if (evidence && !l->window_drop) {
		if (++l->evidence_windows >= EVIDENCE_WINDOWS) {
			l->learning = false;
			l->evidence_windows = 0;
			l->engagements = rx__sat_add(l->engagements, 1);
		}
	} else {
		l->evidence_windows = 0;
	}
	if ((double)l->window_peak > next)
		next = (double)l->window_peak;
	return next;
}

/*
 * A walk down, window by window (ADR-573): the queue our calls build
 * shrinks with their number, so once a run of windows that asked for
 * less has cut the calls in flight (the window's peak) to WALK_CUT of
 * what they were where it began, a median that fell by less than half as
 * much says the latency is not that queue - this host, loaded by the
 * very callers the limit refuses, or an upstream that became slower - and
 * the baseline is re-measured from this window (as a probe adopts a
 * baseline when halving the concurrency cut latency by less than a
 * quarter). @old is the limit the window ran at, @next the one it leaves.
 */
static void walk_down(struct rx_limiter *l, double rtt, double old, double next,
		      bool wants_less)
{
	double peak = (double)l->window_peak;

	if (!wants_less || !(next < old)) {
		l->walk_peak = 0.0;
		return;
	}
	double med = window_median(l);
	if (!(l->walk_peak > 0.0)) {
		l->walk_peak = peak;
		l->walk_med_us = med;
		return;
	}
	if (peak > WALK_CUT * l->walk_peak)
		return;
	if (med > (1.0 + WALK_CUT) / 2.0 * l->walk_med_us)
		rebase(l, rtt);
	l->walk_peak = 0.0;
}

static void close_window_update(struct rx_limiter *l, uint64_t now);

/*
 * A window settled by a caller that was saturated all along (ADR-686): an
 * event loop on its CPU the whole window reads every answer late by its
 * own lag, which grows with the calls it runs as a queue would, so its
 * latency says nothing about the upstream. No queueing evidence (learn()
 * is told none: no binding, and two windows of evidence must again be two
 * in a row), no baseline, no probe measured, no step of the control law:
 * the limit moves only as learning raises it to the window's peak. A probe
 * it ran ends unmeasured, as a stalled one does (ADR-653). Drops are
 * evidence as ever: a window with one is not this one's.
 */
static void busy_window(struct rx_limiter *l, uint64_t now)
{
	double old = l->limit;

	if (l->probing)
		end_probe(l, now);
	l->limit = bound_limit(l, old, learn(l, false, old));
	window_reset(l);
}

/* Run the control loop on the window that just closed. */
static void close_window(struct rx_limiter *l, uint64_t now)
{
	double base_before = l->baseline_us;
	uint32_t peak = l->window_peak;
	uint64_t samples = l->window.count;

	/* The concurrency a baseline was measured at (ADR-380). */
	close_window_update(l, now);
	if (l->baseline_us != base_before)
		l->baseline_peak = peak;
	/* The calls a drop's share is counted against (ADR-573). */
	l->prev_samples = samples < UINT32_MAX ? (uint32_t)samples : UINT32_MAX;
}

static void close_window_update(struct rx_limiter *l, uint64_t now)
{
	double rtt = rx__whist_quantile(&l->window, l->cfg.quantile,
					l->window_min_us);
	double old = l->limit;
	double next = old;
	bool wants_less = false;

	if (!(rtt >= 1.0))
		rtt = 1.0; /* 0 µs samples; also catches NaN */
	l->p90_us = rtt;
	l->updates = rx__sat_add(l->updates, 1);
	if (RX__UNLIKELY(l->window_busy && !l->window_drop)) {
		busy_window(l, now);
		return;
	}

	switch (probe(l, now)) {
	case PROBE_DONE:
		/* Measured at half the concurrency. A lower value is always
		 * news. A higher one is adopted only if halving did not cut
		 * latency by more than a quarter: if it did, the upstream
		 * still queues at L / 2 and the probe saw that queue, not a
		 * slower upstream. */
		/* Still queueing at half the concurrency, and a baseline
		 * more than a quarter lower than the one it replaces: the
		 * old one was measured in a queue (a learning period that
		 * started in one), and the new one may still be; probe
		 * again soon, not in probe_multiplier x L windows
		 * (ADR-380). */
		if (rtt < PROBE_RESPONSE * l->probe_ref_us &&
		    rtt < PROBE_RESPONSE * l->baseline_us)
			l->probed = false;
		if (rtt <= l->baseline_us ||
		    rtt >= PROBE_RESPONSE * l->probe_ref_us)
			rebase(l, rtt);
		l->stuck_windows = 0;
		window_reset(l);
		return;
	case PROBE_STARTED:
		l->probe_ref_us = rtt;
		l->probe_ref_peak = l->window_peak;
		window_reset(l);
		return;
	default:
		break;
	}

	switch (l->cfg.algorithm) {
	case RX_LIMITER_GRADIENT2:
		next = gradient2_update(l, rtt, &wants_less);
		break;
	case RX_LIMITER_AIMD:
		next = aimd_update(l, rtt, &wants_less);
		break;
	default:
		next = vegas_update(l, rtt, &wants_less);
		break;
	}
	next = learn(l, queue_evidence(l, rtt), next);
	next = bound_limit(l, old, next);

	/* Asked for less and could not get it (at min_limit, or at
	 * gradient2's fixed point under its largest decrease, 2 x queue
	 * size): after a few such windows the baseline, not the upstream, is
	 * the likelier culprit. */
	if (wants_less && next > old - 1.0) {
		if (++l->stuck_windows >= STUCK_WINDOWS_BEFORE_REBASE) {
			rebase(l, rtt);
			l->stuck_windows = 0;
		}
	} else {
		l->stuck_windows = 0;
	}
	if (wants_less || l->walk_peak > 0.0)
		walk_down(l, rtt, old, next, wants_less);
	l->limit = next;
	window_reset(l);
}

/* Window duration: clamp(2 x smallest latency, window_min, window_max). */
static uint64_t window_ns(const struct rx_limiter *l)
{
	uint64_t lo = l->window_min_ns;
	uint64_t hi = l->window_max_ns;
	uint64_t two_rtt =
	    l->window_min_us == UINT64_MAX
		? 0
		: rx__sat_mul(rx__sat_mul(l->window_min_us, RX__NS_PER_US), 2);

	if (two_rtt < lo)
		return lo;
	if (two_rtt > hi)
		return hi;
	return two_rtt;
}

void rx_limiter_settle(struct rx_limiter *l, const struct rx_ticket *ticket,
		       const struct rx_observation *obs)
{
	rx__limiter_settle(l, ticket, obs);
}

RX__NOINLINE void rx__limiter_relax(struct rx_limiter *l)
{
	if (l->limit < (double)l->cfg.initial_limit) {
		l->limit = (double)l->cfg.initial_limit;
		l->relaxations = rx__sat_add(l->relaxations, 1);
	}
	/* The incident's evidence is gone with it (ADR-380). */
	if (l->cfg.learn_first) {
		l->learning = true;
		l->evidence_windows = 0;
		l->drop_bound = false;
	}
	window_reset(l);
}

/* floor(@v) for 0 <= v < 2^63, without the libm call: truncation is the
 * floor there, and the integer converts back exactly (limits are at most
 * 1000000). */
static double floor_small(double v)
{
	return (double)(int64_t)v;
}

RX__NOINLINE void rx__limiter_drop(struct rx_limiter *l,
				   const struct rx_ticket *ticket, uint64_t now)
{
	if (!l->window_open) {
		l->window_open = true;
		l->window_start_ns = now;
	}
	if (ticket->flags > l->window_peak)
		l->window_peak = ticket->flags;

	l->drops = rx__sat_add(l->drops, 1);
	/* Learning, one overload among many answers is no evidence: a
	 * server sheds a call now and then (a restart, a full accept
	 * queue) without being overloaded, and the limit a drop would bind
	 * could not climb back while the program's callers keep it bound.
	 * Drops at 1 in DROP_EVIDENCE_EVERY of the calls settled in this
	 * window and the last are (ADR-573); a first call's drop is. */
	if (l->learning) {
		l->window_drops = rx__sat_inc32(l->window_drops);
		if ((uint64_t)l->window_drops * DROP_EVIDENCE_EVERY <
		    l->window.count + l->prev_samples + l->window_drops)
			return;
		l->learning = false; /* overload is evidence enough */
		l->drop_bound = true;
		l->evidence_windows = 0;
	}
	l->window_drop = true;
	if (ticket->generation == l->drop_epoch) {
		/* limit x drop_backoff is in [0.5, 1000000). */
		double next = floor_small(l->limit * l->cfg.drop_backoff);
		if (next < (double)l->cfg.min_limit)
			next = (double)l->cfg.min_limit;
		l->limit = next;
		l->drop_epoch++;
		l->drop_decreases = rx__sat_add(l->drop_decreases, 1);
	}
}

RX__NOINLINE void rx__limiter_window_due(struct rx_limiter *l, uint64_t now,
					 uint64_t open_for)
{
	if (open_for >= window_ns(l))
		close_window(l, now);
}

int rx_limiter_enqueue(struct rx_limiter *l, uint64_t now_ns,
		       uint64_t *wait_ticket)
{
	uint64_t limit = rx__limiter_band_limit(l, now_ns);
	uint64_t backlog = (uint64_t)l->in_flight + l->queued;

	if (backlog >= 3 * limit || l->queued == UINT32_MAX ||
	    l->queue_next == UINT64_MAX) {
		l->shed_full = rx__sat_add(l->shed_full, 1);
		return RX_ENOSPC;
	}
	*wait_ticket = l->queue_next++;
	l->queued++;
	return RX_OK;
}

/* Is @t a place that may still be live? */
static bool live_place(const struct rx_limiter *l, uint64_t t)
{
	return l->queued > 0 && t < l->queue_next;
}

/* Give place @t up. Removing the newest place exactly keeps the count of
 * places "behind" a waiter honest in the common cases. */
static void leave_queue(struct rx_limiter *l, uint64_t t)
{
	l->queued--;
	if (t + 1 == l->queue_next)
		l->queue_next--;
}

enum rx_decision rx_limiter_try_dequeue(struct rx_limiter *l,
					uint64_t wait_ticket, uint64_t now_ns,
					struct rx_ticket *ticket,
					struct rx_refusal *why)
{
	if (!live_place(l, wait_ticket)) {
		refuse(why);
		return RX_REFUSE;
	}

	if (RX__UNLIKELY(l->probing))
		(void)probe_stalled(l, now_ns); /* ADR-653 */

	uint64_t limit = rx__limiter_band_limit(l, now_ns);
	uint64_t slots = rx__limiter_slot_limit(l, (uint32_t)limit);
	uint64_t free = l->in_flight < slots ? slots - l->in_flight : 0;
	/* Waiters ahead, as a lower bound: queued minus the places issued
	 * from this one on. */
	uint64_t from_here = l->queue_next - wait_ticket;
	uint64_t ahead = from_here >= l->queued ? 0 : l->queued - from_here;

	if (ahead < free) {
		leave_queue(l, wait_ticket);
		rx__limiter_take_slot(l, now_ns, ticket);
		return RX_ADMIT;
	}
	if ((uint64_t)l->in_flight + ahead >= 3 * limit) {
		leave_queue(l, wait_ticket);
		l->shed_full = rx__sat_add(l->shed_full, 1);
		refuse(why);
		return RX_REFUSE;
	}
	refuse(why);
	return RX_QUEUE;
}

void rx_limiter_cancel_wait(struct rx_limiter *l, uint64_t wait_ticket)
{
	if (!live_place(l, wait_ticket))
		return;
	leave_queue(l, wait_ticket);
	l->wait_cancelled = rx__sat_add(l->wait_cancelled, 1);
}

void rx_limiter_stats(const struct rx_limiter *l, uint64_t now_ns,
		      struct rx_limiter_stats *out)
{
	memset(out, 0, sizeof *out);
	out->algorithm = l->cfg.algorithm;
	out->limit = rx__limiter_effective_limit(l, now_ns);
	out->in_flight = l->in_flight;
	out->queued = l->queued;
	out->window_peak = l->window_peak;
	out->window_samples = l->window.count;
	out->p90_us = to_u64(l->p90_us);
	out->rtt_noload_us = to_u64(l->baseline_us);
	out->updates = l->updates;
	out->drops = l->drops;
	out->drop_decreases = l->drop_decreases;
	out->shed_nonblocking = l->shed_nonblocking;
	out->shed_band = l->shed_band;
	out->shed_full = l->shed_full;
	out->wait_cancelled = l->wait_cancelled;
	out->probes = l->probes;
	out->baseline_resets = l->baseline_resets;
	out->relaxations = l->relaxations;
	out->engagements = l->engagements;
	out->learning = l->learning;
}

static enum rx_decision ops_admit(void *self, const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why)
{
	return rx_limiter_admit(self, ctx, ticket, why);
}

static void ops_settle(void *self, const struct rx_ticket *ticket,
		       const struct rx_observation *obs)
{
	rx_limiter_settle(self, ticket, obs);
}

const struct rx_policy_ops rx_limiter_ops = {
    .name = "limiter",
    .admit = ops_admit,
    .settle = ops_settle,
};
