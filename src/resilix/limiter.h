/*
 * resilix/limiter.h - the adaptive concurrency limiter.
 *
 * Caps the calls in flight to one key at a limit L that it learns from
 * latency, so that an upstream is never sent more concurrent work than it
 * can finish without queueing (docs/design.md section 2, ADR-008, ADR-015).
 *
 * Admission, measured against the current limit L:
 *   - in_flight < L (L / 2 in a probe), fewer waiters than free slots: admit;
 *   - otherwise, with W = in_flight + queued (waiters):
 *       W <  2L: RX_QUEUE for a caller that can wait; one that cannot is
 *                never made to wait: RX_ADMIT below max_limit (learn_first,
 *                no drop in the window: ADR-630), else RX_REFUSE;
 *       2L <= W < 3L: RX_REFUSE with probability (W - 2L) / L, drawn from
 *                ctx->rng (0 at exactly 2L, so that point still queues),
 *                else RX_QUEUE;
 *       W >= 3L: RX_REFUSE.
 *     Every refusal has reason RX_REASON_LIMITER_FULL (FGO queueing
 *     limiter, whose thresholds count waiters only; ours count waiters and
 *     calls in flight, so that the bands scale with the whole backlog).
 *
 * The control loop runs on settlement, one update per window. A window
 * closes on the first settlement at which it holds at least
 * window_min_samples latency samples and has lasted at least
 * clamp(2 x its smallest latency, window_min_ms, window_max_ms) (NCL
 * WindowedLimit and FGO: a window must span a couple of round trips before
 * a change of the limit can show in latency). Its signal: the quantile
 * (p90 by default) and median of its latencies (whist.h, ADR-522) and the
 * peak in-flight count its calls saw at their admission.
 *
 * What each verdict does (ADR-003):
 *   RX_SUCCESS, RX_ANSWERED, RX_TRANSIENT: a latency sample;
 *   RX_OVERLOAD, RX_TIMEOUT: a drop; the limit is multiplied by
 *     drop_backoff at once, at most once per round trip (only a call
 *     admitted after the previous drop-decrease can cause the next, as
 *     TCP reacts once per window of data); the window that saw it does
 *     not increase the limit; never a latency sample (a fast 429 says
 *     nothing about service time, a timeout's latency is the deadline).
 *     While learning, drops count only at 1 in 20 or more of the calls
 *     settled in the window and the one before (ADR-573);
 *   RX_REJECTED, and any verdict this header does not name: release only,
 *     exactly undoing admit (ADR-007); never evidence.
 *
 * The algorithms (each update rule's source, and where ours differs):
 *   Vegas (default; NCL VegasLimit): baseline rtt_noload = the lowest
 *     window quantile seen (a new lowest only moves the baseline, no
 *     change that window); queue = ceil(L (1 - rtt_noload / rtt)), and
 *     above f the smaller of that and the same from the window's median
 *     against the baseline window's median (ours, ADR-573);
 *     f = max(1, floor(log10 L)) at every L (NCL switches to floor(sqrt L)
 *     at 1000, a discontinuity we do not copy); alpha = 3f, beta = 6f;
 *     queue <= f: L += beta; queue < alpha: L += f; queue > beta: L -= f;
 *     else hold. App-limited (peak in flight x 2 < L): hold (NCL).
 *   gradient2 (NCL Gradient2Limit): long = average of the first 10 window
 *     quantiles, then an EMA with alpha = 2 / (gradient2_long_window + 1)
 *     that, ours, only takes windows within rtt_tolerance of it (NCL's
 *     takes every one, so at equilibrium it climbs with the queueing the
 *     limit itself causes and a windowed gradient2 drifts up); if
 *     long / short > 2, long *= 0.95 (NCL); app-limited (peak < L / 2):
 *     hold; g = clamp(rtt_tolerance x long / short, 0.5, 1);
 *     L = (1 - s) L + s (g L + gradient2_queue_size), s =
 *     gradient2_smoothing.
 *   AIMD (NCL AIMDLimit): rtt above rtt_tolerance x baseline, the baseline
 *     kept as for Vegas, and the median above rtt_tolerance x its window's
 *     (ours: NCL compares with a fixed 5 s timeout, ADR-006, ADR-573):
 *     L = floor(L x drop_backoff); else if peak in flight x 2 >= L:
 *     L += 1; else hold.
 *
 * Baseline re-probe, all three (ours, replacing NCL Vegas's "rtt_noload :=
 * current rtt", which with a windowed p90 adopts the queue the limit
 * itself causes: the Vegas limit drifted from 1.1 C to 3.9 C in a
 * simulated hour). Like BRPC's auto limiter, Envoy and BBR's ProbeRTT, a
 * probe drains the upstream: every U[0.5, 1) x probe_multiplier x L
 * windows (NCL's cadence; the U[0.5, 1) a SplitMix64 hash of the time),
 * and once 10 windows after start (the first baseline may have been
 * measured in a queue), one window admits at most max(min_limit, L / 2)
 * calls (the bands stay at 2L and 3L: a non-blocking caller finding the
 * L / 2 slots full is treated as above) and measures only calls admitted during
 * it. Its quantile becomes the baseline if lower, or if halving the
 * concurrency cut latency by less than a quarter (the upstream itself
 * became slower); a larger cut means it still queued at L / 2.
 * Also ours: after 5 consecutive windows that ask for less but cannot get
 * it (at min_limit, or gradient2 at its largest decrease), the baseline
 * is re-measured from the current window (Envoy re-measures minRTT after
 * 5 windows at the minimum), and so it is when windows asking for less
 * have halved the peak in flight and cut the median by under a quarter
 * (the latency is not our queue; ADR-573).
 *
 * Bounds on the limit, applied after every change: growth is tethered to
 * observed concurrency (an increase stops at
 * max(min_limit, growth_tether x peak in flight of the window), but the
 * tether never lowers a limit that is already above it: a lull does not
 * shrink the limit); then clamp to [min_limit, max_limit]; a non-finite
 * result keeps the old limit. The limit is always finite, >= min_limit >= 1
 * and <= max_limit, whatever the samples.
 *
 * Do no harm (ADR-380; cfg.learn_first, the default): until there is
 * evidence that the upstream queues the limiter is learning: nothing binds
 * but max_limit with cfg.max_binds_learning (ADR-625), the control loop
 * runs, and each window raises the limit to its peak in flight at least.
 * Evidence: drops (above), or two windows in a row that ran a quarter
 * more calls at once than the baseline was measured at, with a quantile
 * and a median above the baseline by more than max(queue_floor_ms,
 * (rtt_tolerance - 1) x it) (ADR-571). A window in which nobody waited or
 * was refused, with no drop and no evidence, or a stale limit, returns it
 * to learning. A probe while learning holds only callers that can wait,
 * at half the peak (others: admitted).
 *
 * Staleness: when no evidence (sample or drop) has been settled for
 * stale_ms, a limit below initial_limit counts as initial_limit from that
 * moment (admit, enqueue and stats see it at once; the next settlement
 * writes it back and starts a fresh window): no timer.
 *
 * Waiting (for blocking executors; the core never waits, ADR-004): after
 * RX_QUEUE a caller takes a place with rx_limiter_enqueue and polls
 * rx_limiter_try_dequeue until it is admitted or refused, or gives its
 * place up with rx_limiter_cancel_wait (its timeout). Places are served in
 * arrival order (see rx_limiter_try_dequeue for the one approximation),
 * and newcomers do not overtake waiters (the admission rule above).
 *
 * Time: now_ns is monotonic; an earlier one counts as no time passing
 * (ADR-005). Arithmetic saturates. Nothing allocates, reads a clock, or
 * blocks; every function is O(1).
 * Thread safety: none; callers serialise per limiter (the shim holds the
 * key's lock around each call, never across a wait).
 */
#ifndef RESILIX_LIMITER_H
#define RESILIX_LIMITER_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/whist.h"
#include "resilix/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rx_limiter_algorithm {
	RX_LIMITER_VEGAS = 0, /* default */
	RX_LIMITER_GRADIENT2,
	RX_LIMITER_AIMD,
	RX_LIMITER_ALGORITHM_COUNT
};

/* rx_limiter_algorithm_name - "vegas", "gradient2", "aimd"; "unknown" out
 * of range. A static string, never NULL. Thread-safe, O(1), no
 * allocation. */
const char *rx_limiter_algorithm_name(enum rx_limiter_algorithm a);

/*
 * rx_limiter_algorithm_parse - the algorithm named @name ("vegas",
 * "gradient2" or "aimd", exactly, as RESILIX_LIMITER spells them).
 * Returns RX_OK and *@out, or RX_EINVAL (NULL or unknown name; *@out
 * untouched). "off" is the executor's business, not an algorithm.
 * Thread-safe, O(1), no allocation.
 */
int rx_limiter_algorithm_parse(const char *name,
			       enum rx_limiter_algorithm *out);

/*
 * Configuration. Defaults and their provenance (ADR-009):
 *   algorithm vegas (docs/design.md); initial_limit 20 (NCL Vegas, FGO);
 *   max_limit 1000 (NCL Vegas, Envoy); min_limit 4 (ours: a
 *   single-threaded program, at most a few calls in flight, is never shed);
 *   quantile 0.9 (FGO); window_min_samples 50 (FGO); window_min_ms 100
 *   (Envoy's example update interval; NCL and FGO use 1 s, which makes a
 *   windowed gradient2 or AIMD, growing by under one per window, too slow
 *   to follow a recovery); window_max_ms 30000 (FGO); stale_ms 30000
 *   (ours: FGO's longest window); growth_tether 2 (ours, from the NCL
 *   app-limited rules, inflight x 2 < L; FGO's factor is 5);
 *   drop_backoff 0.9 (NCL AIMD); rtt_tolerance 1.5 (NCL gradient2);
 *   queue_floor_ms 20 (ours, ADR-380: above what a saturated client host
 *   adds on loopback, 6-14 ms); probe_multiplier 30 (NCL Vegas);
 *   max_binds_learning true (the shim: when the maximum is set, ADR-625);
 *   gradient2_long_window 600, smoothing 0.2, queue_size 4 (NCL).
 */
struct rx_limiter_config {
	enum rx_limiter_algorithm algorithm;
	uint32_t min_limit;	/* 1..max_limit */
	uint32_t max_limit;	/* min_limit..1000000 */
	uint32_t initial_limit; /* min_limit..max_limit */
	double quantile;	/* latency quantile of the signal, (0, 1) */
	uint32_t window_min_samples;	/* 1..1000000 latency samples */
	uint64_t window_min_ms;		/* 1..3600000 */
	uint64_t window_max_ms;		/* window_min_ms..3600000 */
	uint64_t stale_ms;		/* 1..86400000 */
	double growth_tether;		/* [1, 100], x peak in flight */
	double drop_backoff;		/* [0.5, 1) */
	double rtt_tolerance;		/* [1, 10], gradient2 and AIMD */
	uint32_t probe_multiplier;	/* 1..1000000, x L windows */
	uint32_t gradient2_long_window; /* 1..1000000 windows */
	double gradient2_smoothing;	/* (0, 1] */
	uint32_t gradient2_queue_size;	/* 0..1000 */
	bool learn_first; /* admit all until the upstream is seen to queue
			     (ADR-210, ADR-380); default true */
	bool max_binds_learning; /* max_limit caps while learning (ADR-625) */
	uint32_t queue_floor_ms; /* 0..3600000, evidence threshold (ADR-380) */
};

/* rx_limiter_config_default - fill @cfg with the defaults above. Writes
 * only @cfg: thread-safe; O(1); no allocation. */
void rx_limiter_config_default(struct rx_limiter_config *cfg);

/*
 * rx_limiter_config_check - validate a configuration.
 * Rejects NaN, infinities and every value outside the ranges above (never
 * clamps), and an unknown algorithm. On RX_EINVAL, *@why (if @why is not
 * NULL) points at a static sentence naming the field and its accepted
 * range. Returns RX_OK or RX_EINVAL (also for a NULL @cfg).
 * Thread-safe, O(1), no allocation.
 */
int rx_limiter_config_check(const struct rx_limiter_config *cfg,
			    const char **why);

/*
 * Read-only statistics (telemetry, ADR-010). p90_us is the last closed
 * window's quantile (p90 unless cfg.quantile says otherwise), 0 before
 * the first window. rtt_noload_us is the baseline the algorithm compares
 * with: for Vegas and AIMD the lowest window quantile or the last probe's,
 * for gradient2 the long average; 0 before it is measured. shed_full
 * counts refusals at >= 3L by admit and enqueue, and waiters that a
 * falling limit left beyond 3L.
 */
struct rx_limiter_stats {
	enum rx_limiter_algorithm algorithm;
	uint32_t limit;		   /* L as admit uses it now, >= min_limit */
	uint32_t in_flight;	   /* admitted, not yet settled */
	uint32_t queued;	   /* waiters holding a place */
	uint32_t window_peak;	   /* peak in flight seen by this window */
	uint64_t window_samples;   /* latency samples in this window */
	uint64_t p90_us;	   /* µs */
	uint64_t rtt_noload_us;	   /* µs */
	uint64_t updates;	   /* windows closed (control loop runs) */
	uint64_t drops;		   /* RX_OVERLOAD and RX_TIMEOUT settled */
	uint64_t drop_decreases;   /* of which decreased the limit */
	uint64_t shed_nonblocking; /* refused: full, caller cannot wait */
	uint64_t shed_band;	   /* refused in the 2L..3L band */
	uint64_t shed_full;	   /* refused at >= 3L */
	uint64_t wait_cancelled;   /* places given up by cancel_wait */
	uint64_t probes;	   /* probe windows completed */
	uint64_t baseline_resets;  /* baselines re-measured */
	uint64_t relaxations, engagements; /* stale raised; learning ended */
	bool learning; /* no evidence of a queue: admitting all */
};

/*
 * The limiter. Plain data with no pointers: embed it anywhere (a guard, a
 * registry entry, shared memory), copy it, initialise it from a config.
 * Fields are public only for that; treat them as private and use the
 * functions.
 */
struct rx_limiter {
	struct rx_limiter_config cfg;
	double limit; /* [min_limit, max_limit], always finite */
	uint32_t in_flight;
	uint32_t queued;
	uint64_t queue_next;	/* the next wait ticket number */
	uint32_t drop_epoch;	/* bumped by every drop-decrease */
	uint32_t stuck_windows; /* windows in a row asking less in vain */
	/* The current window. */
	struct rx_whist window; /* latency quantile, µs (ADR-522) */
	uint64_t window_start_ns;
	uint64_t window_min_us; /* smallest latency in the window */
	uint32_t window_peak;	/* max in flight at admission, this window */
	bool window_open, window_busy; /* window_busy: its caller saturated */
	bool window_drop, drop_bound; /* a drop this window; drops bound it */
	/* Time. */
	uint64_t last_now_ns;	   /* latest time seen by settle */
	uint64_t last_evidence_ns; /* last sample or drop settled */
	/* The signal. */
	double p90_us;			     /* last closed window's quantile */
	double baseline_us, baseline_med_us; /* 0 = unknown; its median */
	uint32_t baseline_windows; /* gradient2 warm-up count, up to 10 */
	uint32_t probe_count;	   /* windows since the last probe */
	double probe_jitter;	   /* [0.5, 1) */
	bool probing;		   /* a probe window is running */
	bool probed;		   /* a probe has completed since init */
	bool learning;		   /* cfg.learn_first, until evidence */
	bool window_bound;	   /* a call waited or was refused (window) */
	uint32_t evidence_windows, baseline_peak, window_drops, prev_samples;
	uint64_t probe_start_ns; /* when the probe started */
	double probe_ref_us, walk_peak, walk_med_us; /* see limiter.c */
	uint32_t probe_ref_peak, learning_cap; /* before the probe; band unit */
	/* Counters. */
	uint64_t updates, drops, drop_decreases;
	uint64_t shed_nonblocking, shed_band, shed_full;
	uint64_t wait_cancelled, probes, baseline_resets, relaxations,
	    engagements;
	/* The configuration's durations in ns, converted once at init. */
	uint64_t stale_ns, window_min_ns, window_max_ns;
	double queue_floor_us;
};

/*
 * rx_limiter_init - an idle limiter at cfg->initial_limit.
 * @cfg must pass rx_limiter_config_check (it is checked again) and is
 * copied; nothing is kept pointing at it. Returns RX_OK, or RX_EINVAL with
 * @l left unusable. Not thread-safe; O(1); no allocation.
 */
int rx_limiter_init(struct rx_limiter *l, const struct rx_limiter_config *cfg);

/*
 * rx_limiter_admit - may a call start now? (struct rx_policy_ops admit.)
 * @ctx: now_ns; can_wait (false: never RX_QUEUE); rng, used only in the
 *       2L..3L band, where a NULL rng sheds every time (no draw, so no
 *       proportion: supply one).
 * Returns RX_ADMIT with @ticket filled (settle it exactly once; the ticket
 * carries the in-flight count at admission and the drop epoch), RX_QUEUE
 * (nothing reserved; a blocking caller may call rx_limiter_enqueue), or
 * RX_REFUSE. For RX_QUEUE and RX_REFUSE, @why gets RX_REASON_LIMITER_FULL
 * and retry_after_ms 0 (unknown). The bands are in the file comment above.
 * Side effects: in_flight + 1 on RX_ADMIT, which settle(RX_REJECTED) undoes
 * exactly; a refusal counts in the shed_* statistics; one draw from
 * ctx->rng in the band. Not thread-safe; O(1); no allocation.
 */
enum rx_decision rx_limiter_admit(struct rx_limiter *l,
				  const struct rx_admit_ctx *ctx,
				  struct rx_ticket *ticket,
				  struct rx_refusal *why);

/*
 * rx_limiter_settle - report the outcome of a call this limiter admitted.
 * @ticket: from rx_limiter_admit or rx_limiter_try_dequeue, settled once.
 * @obs: verdict (see the file comment), latency_us (any value; 0 and
 *       UINT64_MAX are fine), now_ns.
 * RX_REJECTED releases the slot and changes nothing else (ADR-007).
 * Not thread-safe; O(1); no allocation.
 */
void rx_limiter_settle(struct rx_limiter *l, const struct rx_ticket *ticket,
		       const struct rx_observation *obs);

/*
 * rx_limiter_enqueue - take a place at the back of the wait queue, after
 * admit said RX_QUEUE (call both under the same lock hold).
 * @now_ns: monotonic ns. @wait_ticket: out, the place's number.
 * Returns RX_OK, or RX_ENOSPC when in_flight + queued >= 3L already (the
 * caller refuses the call with RX_REASON_LIMITER_FULL; counted in
 * shed_full). Every place taken must end exactly once: RX_ADMIT or
 * RX_REFUSE from rx_limiter_try_dequeue, or rx_limiter_cancel_wait.
 * Not thread-safe; O(1); no allocation.
 */
int rx_limiter_enqueue(struct rx_limiter *l, uint64_t now_ns,
		       uint64_t *wait_ticket);

/*
 * rx_limiter_try_dequeue - is it this waiter's turn?
 * Returns:
 *   RX_ADMIT: the place is given up and the call admitted; @ticket is
 *     filled exactly as by rx_limiter_admit (settle it once, RX_REJECTED
 *     if a later policy refuses);
 *   RX_QUEUE: not yet; wait (for a settlement on this key, or a short
 *     sleep) and ask again;
 *   RX_REFUSE: the place is given up and the call refused (@why:
 *     RX_REASON_LIMITER_FULL): the limit fell so far that the calls in
 *     flight and the waiters ahead already reach 3L, or @wait_ticket is not
 *     a live place (nothing changes then).
 * Turn: a waiter is admitted when fewer waiters are ahead of it than there
 * are free slots (L - in_flight). Waiters ahead are counted without
 * per-place storage, as queued minus the places issued after this one.
 * That is exact while places are given up at the front or the back of
 * the queue (the usual case: equal timeouts expire in arrival order); a
 * place given up in the middle makes each waiter before it look one place
 * nearer the front, so such a waiter may overtake as many earlier waiters
 * as there are places given up behind it. The first live waiter is always
 * counted at the front, so a free slot is never left unused while someone
 * waits. @now_ns: monotonic ns, as for admit. Not thread-safe; O(1); no
 * allocation.
 */
enum rx_decision rx_limiter_try_dequeue(struct rx_limiter *l,
					uint64_t wait_ticket, uint64_t now_ns,
					struct rx_ticket *ticket,
					struct rx_refusal *why);

/*
 * rx_limiter_cancel_wait - give a place up (the waiter's timeout, or its
 * thread is interrupted). A number never issued, or any number while
 * nobody waits, is ignored; but places are counted, not stored, so giving
 * up a place that already ended (cancelled, or ended by try_dequeue)
 * while others wait takes one of theirs from the count: end each place
 * exactly once. Not thread-safe; O(1); no allocation.
 */
void rx_limiter_cancel_wait(struct rx_limiter *l, uint64_t wait_ticket);

/*
 * rx_limiter_stats - fill @out as of @now_ns (which only decides
 * staleness, monotonic ns) without changing the limiter (ADR-010).
 * Not thread-safe; O(1); no allocation.
 */
void rx_limiter_stats(const struct rx_limiter *l, uint64_t now_ns,
		      struct rx_limiter_stats *out);

/* The limiter as a gate policy; self is a struct rx_limiter *. */
extern const struct rx_policy_ops rx_limiter_ops;

#ifdef __cplusplus
}
#endif
#endif
