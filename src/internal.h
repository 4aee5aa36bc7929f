/*
 * internal.h - private helpers of the policy core; never installed.
 *
 * Two rules of STYLE.md live here so every policy applies them the same
 * way: arithmetic on times and counters saturates instead of wrapping, and
 * a clock reading earlier than the last one seen means "no time passed"
 * (nginx clamps negative deltas the same way). Nothing here allocates,
 * reads a clock or does I/O.
 */
#ifndef RESILIX_INTERNAL_H
#define RESILIX_INTERNAL_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resilix/registry.h"

#define RX__NS_PER_MS UINT64_C(1000000)
#define RX__NS_PER_US UINT64_C(1000)

/* The smallest window a starved breaker decides on (issue 3). */
#define RX__STARVED_MIN_CALLS 5u

/* Cold paths (state transitions, window closes, rare formulas) kept out
 * of line, so the data path that calls them saves fewer registers and
 * stays short; hot helpers the compiler must inline whatever its size
 * heuristics say (one copy per constant argument); and branch hints for
 * the tests that guard cold paths (ADR-301). All are only hints: without
 * GCC or Clang they expand to nothing (RX__INLINE to plain inline). */
#if defined(__GNUC__) || defined(__clang__)
#define RX__NOINLINE __attribute__((noinline))
#define RX__INLINE inline __attribute__((always_inline))
#define RX__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define RX__NOINLINE
#define RX__INLINE inline
#define RX__UNLIKELY(x) (x)
#endif

/* a + b, or UINT64_MAX when the sum does not fit. */
static inline uint64_t rx__sat_add(uint64_t a, uint64_t b)
{
	uint64_t s = a + b;
	return s < a ? UINT64_MAX : s;
}

/* a - b, or 0 when b > a. */
static inline uint64_t rx__sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* a * b, or UINT64_MAX when the product does not fit. The data path
 * converts milliseconds to nanoseconds with it on every call, so where the
 * compiler can, the overflow comes from the multiplication's own flag
 * rather than from a 64-bit division (tens of cycles on common cores). */
static inline uint64_t rx__sat_mul(uint64_t a, uint64_t b)
{
#if defined(__GNUC__) || defined(__clang__)
	uint64_t p;
	if (__builtin_mul_overflow(a, b, &p))
		return UINT64_MAX;
	return p;
#else
	if (a != 0 && b > UINT64_MAX / a)
		return UINT64_MAX;
	return a * b;
#endif
}

/* Increment a 32-bit counter, sticking at UINT32_MAX. */
static inline uint32_t rx__sat_inc32(uint32_t v)
{
	return v == UINT32_MAX ? v : v + 1;
}

/* Decrement a 32-bit counter, sticking at 0 (a double release must not
 * turn into four billion calls in flight). */
static inline uint32_t rx__sat_dec32(uint32_t v)
{
	return v == 0 ? 0 : v - 1;
}

static inline uint64_t rx__ms_to_ns(uint64_t ms)
{
	return rx__sat_mul(ms, RX__NS_PER_MS);
}

/* Whole milliseconds covering @ns, rounded up, so a retry-after never
 * sends a caller back before the moment it names. */
static inline uint64_t rx__ns_to_ms_ceil(uint64_t ns)
{
	return ns / RX__NS_PER_MS + (ns % RX__NS_PER_MS != 0);
}

/*
 * rx__clock - the time a policy acts on: @now_ns, unless it is earlier than
 * the latest time seen (*@last), in which case no time has passed. Updates
 * *@last. Source: STYLE.md "Memory, time, errors".
 */
static inline uint64_t rx__clock(uint64_t *last, uint64_t now_ns)
{
	if (now_ns > *last)
		*last = now_ns;
	return *last;
}

/* The same clamp without recording the reading (read-only stats). */
static inline uint64_t rx__clock_peek(uint64_t last, uint64_t now_ns)
{
	return now_ns > last ? now_ns : last;
}

/*
 * The sliding window's data path (window.c), here so that the breaker's
 * settle compiles it inline: a call into the library costs more than the
 * push itself, and the exported rx_window_* functions cannot be inlined
 * across files (ADR-182). window.c's functions are these.
 */

/* Remove the oldest slot and take it out of the running counters. */
static inline void rx__window_drop_tail(struct rx_window *w)
{
	const struct rx_window_slot *s = &w->slots[w->tail];
	w->failures -= (s->flags & RX_SLOT_FAILURE) != 0;
	w->slow -= (s->flags & RX_SLOT_SLOW) != 0;
	w->tail = w->tail + 1 == w->capacity ? 0 : w->tail + 1;
	w->count--;
}

/* rx_window_expire; true when it evicted a slot. */
static inline bool rx__window_expire(struct rx_window *w, uint64_t now_ns)
{
	bool evicted = false;

	if (w->max_age_ns == 0)
		return false;
	while (w->count > 0 &&
	       rx__sat_sub(now_ns, w->slots[w->tail].t_ns) >= w->max_age_ns) {
		rx__window_drop_tail(w);
		w->aged_out = rx__sat_add(w->aged_out, 1);
		evicted = true;
	}
	return evicted;
}

/* rx_window_push without its age eviction, for a caller that has just
 * run rx__window_expire at the same @now_ns (which leaves nothing for a
 * second pass to evict). */
static inline void rx__window_append(struct rx_window *w, uint64_t now_ns,
				     uint32_t flags)
{
	flags &= RX_SLOT_FAILURE | RX_SLOT_SLOW;
	if (w->count == w->capacity) {
		/* A full ring, the steady state: the new slot takes the
		 * oldest one's place, which is the tail, and the tail moves
		 * on; the count stays (ADR-302). */
		struct rx_window_slot *s = &w->slots[w->tail];
		uint32_t old = s->flags;
		w->failures +=
		    (flags & RX_SLOT_FAILURE) - (old & RX_SLOT_FAILURE);
		w->slow += (flags >> 1) - ((old & RX_SLOT_SLOW) >> 1);
		s->t_ns = now_ns;
		s->flags = flags;
		s->pad = 0;
		w->tail = w->tail + 1 == w->capacity ? 0 : w->tail + 1;
		return;
	}
	uint32_t head = w->tail + w->count;
	if (head >= w->capacity)
		head -= w->capacity;
	w->slots[head].t_ns = now_ns;
	w->slots[head].flags = flags;
	w->slots[head].pad = 0;
	w->count++;
	w->failures += (flags & RX_SLOT_FAILURE) != 0;
	w->slow += (flags & RX_SLOT_SLOW) != 0;
}

/* rx_verdict_is_failure, inline for the breaker's settle. */
static inline bool rx__verdict_is_failure(enum rx_verdict v)
{
	return v == RX_TRANSIENT || v == RX_TIMEOUT;
}

/*
 * The breaker's data path (breaker.c), here so that the guard compiles it
 * inline (ADR-302): a closed breaker admits and records a settlement
 * without a call. Everything else - the open and half-open states, a
 * release, an unknown verdict, a trip, new rate cut-offs - is out of line
 * in breaker.c, behind one test. rx_breaker_admit and rx_breaker_settle
 * are these functions.
 */

/* rx_breaker_admit past the clock, for a breaker that is not closed. */
enum rx_decision rx__breaker_admit_cold(struct rx_breaker *b, uint64_t now,
					struct rx_ticket *ticket,
					struct rx_refusal *why);

/* rx_breaker_settle past the clock and the generation test, for a breaker
 * that is not closed, RX_REJECTED, or a verdict out of range. */
void rx__breaker_settle_cold(struct rx_breaker *b,
			     const struct rx_ticket *ticket,
			     const struct rx_observation *obs, uint64_t now);

/* Open the circuit at @now. */
void rx__breaker_trip(struct rx_breaker *b, uint64_t now);

/* Cache the rate cut-offs for a window of @n calls (ADR-183). */
void rx__breaker_cutoffs(struct rx_breaker *b, uint32_t n);

/* rx_breaker_admit. */
static RX__INLINE enum rx_decision rx__breaker_admit(struct rx_breaker *b,
						     uint64_t now_ns,
						     struct rx_ticket *ticket,
						     struct rx_refusal *why)
{
	uint64_t now = rx__clock(&b->last_now_ns, now_ns);

	if (RX__UNLIKELY(b->state != RX_BREAKER_CLOSED))
		return rx__breaker_admit_cold(b, now, ticket, why);
	ticket->flags = 0;
	ticket->start_ns = now;
	ticket->generation = b->generation;
	return RX_ADMIT;
}

/* Record one closed-state settlement and trip if a condition holds. The
 * rates are compared through cut-offs cached for the window's size, which
 * stays put once the window is full: a division per settlement becomes
 * two integer comparisons (ADR-183). */
static RX__INLINE void rx__breaker_record_closed(struct rx_breaker *b,
						 uint64_t now, bool failure,
						 bool slow, enum rx_verdict v)
{
	struct rx_window *w = &b->window;

	if (rx__window_expire(w, now) && w->count < b->min_calls)
		b->starving = true;
	rx__window_append(w, now,
			  (failure ? RX_SLOT_FAILURE : 0) |
			      (slow ? RX_SLOT_SLOW : 0));
	if (w->count >= b->min_calls)
		b->starving = false;

	if (failure)
		b->consecutive_failures =
		    rx__sat_inc32(b->consecutive_failures);
	else if (v == RX_SUCCESS || v == RX_ANSWERED)
		b->consecutive_failures = 0;

	if (b->cfg.consecutive_backstop > 0 &&
	    b->consecutive_failures >= b->cfg.consecutive_backstop) {
		rx__breaker_trip(b, now);
		return;
	}
	uint32_t n = w->count;
	if (n < b->min_calls && !(b->starving && n >= RX__STARVED_MIN_CALLS))
		return;
	if (RX__UNLIKELY(n != b->cutoff_n))
		rx__breaker_cutoffs(b, n);
	if (RX__UNLIKELY(w->failures >= b->failure_cutoff ||
			 (b->slow_call_us > 0 && w->slow >= b->slow_cutoff)))
		rx__breaker_trip(b, now);
}

/* rx_breaker_settle. */
static RX__INLINE void rx__breaker_settle(struct rx_breaker *b,
					  const struct rx_ticket *ticket,
					  const struct rx_observation *obs)
{
	uint64_t now = rx__clock(&b->last_now_ns, obs->now_ns);
	enum rx_verdict v = obs->verdict;

	if (ticket->generation != b->generation)
		return; /* late: the call saw a state that is gone */
	if (RX__UNLIKELY(b->state != RX_BREAKER_CLOSED ||
			 (unsigned)v >= RX_REJECTED)) {
		rx__breaker_settle_cold(b, ticket, obs, now);
		return;
	}
	rx__breaker_record_closed(
	    b, now, rx__verdict_is_failure(v),
	    b->slow_call_us > 0 && obs->latency_us >= b->slow_call_us, v);
}

/*
 * The P² estimator's update (p2.c), inline in the limiter's settlement,
 * which the guard inlines in turn (ADR-302). rx_p2_add is this function;
 * the formulas that move a marker's height are out of line.
 */

/* Move marker @i (1..3) one position in direction @s (+1 or -1). */
void rx__p2_move(struct rx_p2 *e, int i, int s);

/* A marker position as a double: through the signed conversion (one
 * instruction on x86-64) when @small says every position is below 2^63,
 * where it gives the same double as the unsigned one. */
static RX__INLINE double rx__p2_position(uint64_t n, bool small)
{
	return small ? (double)(int64_t)n : (double)n;
}

/*
 * Step marker @i (1..3) towards @desired, its desired position, when it
 * has drifted at least one position from it and the neighbour it steps
 * towards is more than one position away. Called for the three middle
 * markers in order with a constant @i and @small, so the compiler
 * specialises each call (no loop, no array of increments, fixed offsets).
 */
static RX__INLINE void rx__p2_adjust(struct rx_p2 *e, int i, double desired,
				     bool small)
{
	double d = desired - rx__p2_position(e->n[i], small);
	int s;

	if (d >= 1.0) {
		if (e->n[i + 1] - e->n[i] <= 1)
			return;
		s = 1;
	} else if (d <= -1.0) {
		if (e->n[i] - e->n[i - 1] <= 1)
			return;
		s = -1;
	} else {
		return;
	}

	if (e->q[i - 1] == e->q[i + 1]) {
		/* Heights are ordered, so all three are equal: the parabola
		 * lands on q[i], which is not strictly between its
		 * neighbours, and the linear step moves it by t x 0. Both
		 * are skipped (ADR-181); the "+ 0.0" keeps the one bit they
		 * change, a -0.0 height becoming +0.0. */
		e->q[i] = e->q[i] + 0.0;
		e->n[i] = s > 0 ? e->n[i] + 1 : e->n[i] - 1;
	} else {
		rx__p2_move(e, i, s);
	}
}

/* Desired positions 1 + c x {p/2, p, (1+p)/2} for the middle markers, c
 * the count before this observation, converted once per observation, not
 * once per marker (ADR-181). */
static RX__INLINE void rx__p2_adjust_all(struct rx_p2 *e, double c, bool small)
{
	rx__p2_adjust(e, 1, 1.0 + c * (e->p / 2.0), small);
	rx__p2_adjust(e, 2, 1.0 + c * e->p, small);
	rx__p2_adjust(e, 3, 1.0 + c * ((1.0 + e->p) / 2.0), small);
}

/* rx_p2_add. */
static RX__INLINE void rx__p2_add(struct rx_p2 *e, double x)
{
	uint64_t count = e->count;

	if (!isfinite(x))
		return;
	/* One test for both rare cases: count < 5 and count == UINT64_MAX
	 * (the subtraction wraps below 5). */
	if (count - 5 >= UINT64_MAX - 5) {
		if (count == UINT64_MAX)
			return;
		/* Keep the first five sorted: they become the markers. */
		int i = (int)count;
		while (i > 0 && e->q[i - 1] > x) {
			e->q[i] = e->q[i - 1];
			i--;
		}
		e->q[i] = x;
		e->count = count + 1;
		return;
	}

	/* The cell k holding x (q[k] <= x < q[k+1]; extremes move out)
	 * only decides which positions grow: those of the markers above x.
	 * Heights are ordered, so a middle marker is above x exactly when
	 * x < its height, and the top marker always is. Tested from the top,
	 * where the p90's and the maximum's markers make the common answers
	 * short (ADR-301). */
	if (x < e->q[0]) {
		e->q[0] = x;
		e->n[1]++;
		e->n[2]++;
		e->n[3]++;
	} else if (x >= e->q[4]) {
		e->q[4] = x;
	} else if (x < e->q[3]) {
		e->n[3]++;
		if (x < e->q[2]) {
			e->n[2]++;
			if (x < e->q[1])
				e->n[1]++;
		}
	}
	e->n[4]++;
	e->count = count + 1;

	/* Every position is at most the count, so below 2^62 every one
	 * converts through int64_t, to the same double (ADR-301). */
	if (count < (UINT64_C(1) << 62))
		rx__p2_adjust_all(e, (double)(int64_t)count, true);
	else
		rx__p2_adjust_all(e, (double)count, false);
}

/*
 * The limiter's data path (limiter.c), inline in the guard for the same
 * reason as the breaker's (ADR-302): admission under the limit, and the
 * settlement of a sample that does not close its window. A refusal or a
 * queue decision, a drop, a stale limit and a window that may close run
 * out of line in limiter.c. rx_limiter_admit and rx_limiter_settle are
 * these functions.
 */

/* rx_limiter_admit's answer over the limit: refuse, queue or shed, with
 * the limit L and the backlog (in flight + queued) it found. */
enum rx_decision rx__limiter_admit_over(struct rx_limiter *l,
					const struct rx_admit_ctx *ctx,
					uint64_t limit, uint64_t backlog,
					struct rx_refusal *why);

/* The first evidence after stale_ms: relax a clamped limit and start a
 * new window. */
void rx__limiter_relax(struct rx_limiter *l);

/* Settle a drop (overload or timeout) at @now. */
void rx__limiter_drop(struct rx_limiter *l, const struct rx_ticket *ticket,
		      uint64_t now);

/* Close the window if it has been open for its duration (@open_for ns). */
void rx__limiter_window_due(struct rx_limiter *l, uint64_t now,
			    uint64_t open_for);

/* Has no evidence been settled for stale_ms, as of @now (clamped)? */
static inline bool rx__limiter_is_stale(const struct rx_limiter *l,
					uint64_t now)
{
	return rx__sat_sub(now, l->last_evidence_ns) >= l->stale_ns;
}

/* The limit L at @now_ns, staleness included: the bands' unit. */
static inline uint32_t rx__limiter_effective_limit(const struct rx_limiter *l,
						   uint64_t now_ns)
{
	uint64_t now = rx__clock_peek(l->last_now_ns, now_ns);
	uint32_t limit = (uint32_t)l->limit; /* in [1, 1000000] */

	if (limit < l->cfg.initial_limit && rx__limiter_is_stale(l, now))
		limit = l->cfg.initial_limit;
	return limit;
}

/* The calls that may be in flight: L, or half of it (not below
 * min_limit) while a probe drains the upstream's queue. */
static inline uint32_t rx__limiter_slot_limit(const struct rx_limiter *l,
					      uint32_t limit)
{
	uint32_t half = limit / 2;

	if (!l->probing)
		return limit;
	return half > l->cfg.min_limit ? half : l->cfg.min_limit;
}

/* Admit one call: the only write admit makes. */
static inline void rx__limiter_take_slot(struct rx_limiter *l, uint64_t now_ns,
					 struct rx_ticket *ticket)
{
	l->in_flight = rx__sat_inc32(l->in_flight);
	ticket->start_ns = rx__clock_peek(l->last_now_ns, now_ns);
	ticket->generation = l->drop_epoch;
	ticket->flags = l->in_flight; /* concurrency at admission, itself
					 included */
}

/* rx_limiter_admit. */
static RX__INLINE enum rx_decision
rx__limiter_admit(struct rx_limiter *l, const struct rx_admit_ctx *ctx,
		  struct rx_ticket *ticket, struct rx_refusal *why)
{
	/* No evidence yet that the upstream queues (ADR-210): a limit of 20
	 * invented before the first window closed would shed a healthy
	 * program's first burst. Until then only the maximum binds. */
	uint64_t limit = l->learning
			     ? l->cfg.max_limit
			     : rx__limiter_effective_limit(l, ctx->now_ns);
	uint64_t slots = rx__limiter_slot_limit(l, (uint32_t)limit);
	uint64_t backlog = (uint64_t)l->in_flight + l->queued;

	/* Free slots beyond those the waiters will claim: newcomers do not
	 * overtake the queue. */
	if (RX__UNLIKELY(backlog >= slots))
		return rx__limiter_admit_over(l, ctx, limit, backlog, why);
	rx__limiter_take_slot(l, ctx->now_ns, ticket);
	return RX_ADMIT;
}

/* rx_limiter_settle. */
static RX__INLINE void rx__limiter_settle(struct rx_limiter *l,
					  const struct rx_ticket *ticket,
					  const struct rx_observation *obs)
{
	enum rx_verdict v = obs->verdict;

	l->in_flight = rx__sat_dec32(l->in_flight);
	/* RX_REJECTED and anything unknown: release only. Overload and
	 * timeout are drops; success, answered and transient samples. */
	if ((unsigned)v >= RX_REJECTED)
		return;

	uint64_t now = rx__clock(&l->last_now_ns, obs->now_ns);
	if (RX__UNLIKELY(rx__limiter_is_stale(l, now)))
		rx__limiter_relax(l);
	l->last_evidence_ns = now;
	if (v == RX_OVERLOAD || v == RX_TIMEOUT) {
		rx__limiter_drop(l, ticket, now);
		return;
	}

	/* A probe measures only the calls it admitted: the others saw the
	 * queue it is draining. */
	if (l->probing && ticket->start_ns < l->probe_start_ns)
		return;
	if (!l->window_open) {
		l->window_open = true;
		l->window_start_ns = now;
	}
	if (ticket->flags > l->window_peak)
		l->window_peak = ticket->flags;

	rx__p2_add(&l->window, (double)obs->latency_us);
	if (obs->latency_us < l->window_min_us)
		l->window_min_us = obs->latency_us;
	/* window_ns is never below window_min_ms, and most settlements find
	 * the window younger than that: testing the floor first spares
	 * computing the bound (ADR-184). */
	uint64_t open_for = rx__sat_sub(now, l->window_start_ns);
	if (RX__UNLIKELY(l->window.count >= l->cfg.window_min_samples &&
			 open_for >= l->window_min_ns))
		rx__limiter_window_due(l, now, open_for);
}

/*
 * The registry's layout, shared with the snapshot code (snapshot.c). An
 * entry is a guard plus its key and bookkeeping; the guard comes first so a
 * struct rx_guard * converts back to its entry. Entries live in one of
 * four places: the free list, pinned (no list), the idle list (unpinned and
 * evictable when last released, in release order: the LRU), or the parked
 * list (unpinned but holding calls in flight or a breaker that is not
 * closed when last released).
 */
#define RX__NIL UINT32_MAX

enum rx__list_id {
	RX__LIST_FREE = 0,
	RX__LIST_PINNED,
	RX__LIST_IDLE,
	RX__LIST_PARKED
};

struct rx__entry {
	struct rx_guard guard;	/* first: rx__entry_of relies on it */
	uint64_t idle_since_ns; /* last use when last released */
	uint32_t hash;
	uint32_t pins;
	uint32_t prev, next; /* list links, entry indices or RX__NIL */
	uint16_t key_len;
	uint8_t list; /* enum rx__list_id */
	char key[RX_KEY_MAX + 1];
};

struct rx__list {
	uint32_t head, tail;
};

struct rx_registry {
	struct rx_registry_config cfg;
	struct rx_guard_config gcfg;
	struct rx__entry *entries;    /* max_keys */
	struct rx_window_slot *slots; /* max_keys x window_calls, or NULL */
	uint32_t *table;	      /* entry index + 1; 0 = empty */
	uint32_t table_mask;	      /* table size - 1, a power of two */
	uint32_t slots_per_key;
	uint32_t count;
	uint64_t overflows;
	uint64_t last_now_ns;
	struct rx__list free, idle, parked;
};

static inline struct rx__entry *rx__entry_of(const struct rx_guard *g)
{
	return (struct rx__entry *)(void *)g;
}

/* Find-or-insert without pinning and without running eviction, for the
 * snapshot loader (registry.c). Returns NULL when no free entry is left.
 * A new entry is on no list until rx__registry_place puts it on one. */
struct rx__entry *rx__registry_insert(struct rx_registry *r, const char *key,
				      size_t len, uint64_t now_ns);

/* Put an unpinned entry on the idle or parked list, as a release does. */
void rx__registry_place(struct rx_registry *r, struct rx__entry *e);

/* Give a live, unpinned entry a fresh guard and take it off its list, for
 * the snapshot merge; rx__registry_place puts it back. */
void rx__registry_reset(struct rx_registry *r, struct rx__entry *e,
			uint64_t now_ns);

#endif
