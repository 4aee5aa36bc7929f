/*
 * test_conformance.c - every policy honours ADR-007: a call admitted and
 * then released with RX_REJECTED leaves the policy exactly as if it had
 * never been admitted.
 *
 * For each policy kind (enum rx_policy_kind) there is one factory below.
 * The first test fails when a kind has no factory, so a new policy cannot
 * join the core without joining this test. For each kind and each of many
 * seeds, two identically built policies A and B see the same random history
 * of admissions, held calls and settlements with every verdict; A alone
 * also gets extra calls that are admitted and at once released with
 * RX_REJECTED, the way the gate releases an earlier policy when a later one
 * refuses. After every step A and B must have made the same decisions and
 * must report the same statistics. The extra calls draw from a copy of the
 * caller's generator, so a policy that draws on admit is compared on what
 * it does, not on whose random numbers it got.
 *
 * An extra call that is refused is a real refusal, not a release: a policy
 * that counts refusals (the limiter's shed_* statistics) counts it in A
 * and not in B. The factory names those statistics (refusal_stats, a bit
 * per index); what an extra call's refusal adds to them is carried as an
 * offset in the comparison, and any other statistic it changes is still a
 * failure, as is any change an admitted-then-released call leaves behind
 * (ADR-139).
 *
 * A policy whose own refusals are evidence (the throttler counts a
 * throttled call as a request, ADR-424) sets mirror_refusals instead: an
 * extra call A refuses was a real call, so B is asked the same (with a
 * copy of its own generator) and must refuse it the same way; no offset
 * is carried. Only admitted-then-released calls are A's alone (ADR-430).
 *
 * To register a policy: add its kind to enum rx_policy_kind (policy.h), a
 * make/stats pair here, and its entry in factories[].
 */
#include <stddef.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix.h"

#define MS RX_NS_PER_MS
#define CONF_STORAGE (64 * 1024)
#define CONF_STATS_MAX 64
#define CONF_SEEDS 300
#define CONF_STEPS 600
#define CONF_HELD 8
/* Tenants 1..CONF_TENANTS and none (0): more than fairshare.h tracks. */
#define CONF_TENANTS 10

struct conformance_factory {
	const char *name;
	/*
	 * Build a policy in @mem (CONF_STORAGE zeroed, max-aligned bytes),
	 * its settings drawn from @seed so that seeds cover the
	 * configuration space. Sets *@self; returns the vtable.
	 */
	const struct rx_policy_ops *(*make)(void *mem, uint64_t seed,
					    void **self);
	/* Write the policy's statistics at @now_ns as integers (doubles by
	 * bit pattern) into @out; return how many were written. */
	size_t (*stats)(const void *self, uint64_t now_ns, uint64_t *out,
			size_t max);
	/* Bit i set: statistic i counts refusals (may grow on a refused
	 * extra call, and only then). */
	uint64_t refusal_stats;
	/* A refused extra call is given to B too (ADR-430). */
	bool mirror_refusals;
};

static uint64_t bits_of(double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof(u));
	return u;
}

/* --- breaker ------------------------------------------------------------ */

struct breaker_box {
	struct rx_breaker b;
	struct rx_window_slot slots[32];
};

static const struct rx_policy_ops *breaker_make(void *mem, uint64_t seed,
						void **self)
{
	static const double rates[] = {0.0, 0.25, 0.5, 1.0};
	struct breaker_box *box = mem;
	struct rx_rng r;
	struct rx_breaker_config c;
	rx_rng_seed(&r, seed ^ UINT64_C(0x5eed));
	rx_breaker_config_default(&c);
	c.window_calls = 1 + (uint32_t)(rx_rng_next(&r) % 32);
	c.min_calls = 1 + (uint32_t)(rx_rng_next(&r) % 40);
	c.consecutive_backstop = (uint32_t)(rx_rng_next(&r) % 5);
	c.slow_call_ms = rx_rng_next(&r) % 2 ? 10 + rx_rng_next(&r) % 90 : 0;
	c.failure_rate = rates[rx_rng_next(&r) % 4];
	c.slow_call_rate = rates[rx_rng_next(&r) % 4];
	c.window_max_age_ms =
	    rx_rng_next(&r) % 2 ? 100 + rx_rng_next(&r) % 3000 : 0;
	c.open_ms = 50 + rx_rng_next(&r) % 2000;
	c.half_open_probes = 1 + (uint32_t)(rx_rng_next(&r) % 3);
	CU_ASSERT_EQUAL_FATAL(rx_breaker_init(&box->b, &c, box->slots), RX_OK);
	*self = &box->b;
	return &rx_breaker_ops;
}

static size_t breaker_stats(const void *self, uint64_t now_ns, uint64_t *out,
			    size_t max)
{
	struct rx_breaker_stats s;
	rx_breaker_stats(self, now_ns, &s);
	const uint64_t v[] = {
	    s.state,
	    s.window_count,
	    s.window_failures,
	    s.window_slow,
	    s.consecutive_failures,
	    s.probes_in_flight,
	    bits_of(s.failure_rate),
	    bits_of(s.slow_call_rate),
	    s.effective_max_age_ms,
	    s.starved,
	    s.open_remaining_ms,
	    s.transitions,
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	CU_ASSERT_FATAL(n <= max);
	memcpy(out, v, sizeof(v));
	return n;
}

static const struct conformance_factory breaker_factory = {
    .name = "breaker", .make = breaker_make, .stats = breaker_stats};

/* --- limiter ------------------------------------------------------------ */

static const struct rx_policy_ops *limiter_make(void *mem, uint64_t seed,
						void **self)
{
	struct rx_limiter *l = mem;
	struct rx_rng r;
	struct rx_limiter_config c;
	rx_rng_seed(&r, seed ^ UINT64_C(0x11e1));
	rx_limiter_config_default(&c);
	/* Small limits, so that CONF_HELD calls in flight reach the queue and
	 * shedding bands; short windows and stale periods, so that windows
	 * close, probes run and stale limits relax within a history. */
	c.algorithm = (enum rx_limiter_algorithm)(rx_rng_next(&r) %
						  RX_LIMITER_ALGORITHM_COUNT);
	c.min_limit = 1 + (uint32_t)(rx_rng_next(&r) % 3);
	c.max_limit = c.min_limit + (uint32_t)(rx_rng_next(&r) % 30);
	c.initial_limit =
	    c.min_limit +
	    (uint32_t)(rx_rng_next(&r) % (c.max_limit - c.min_limit + 1));
	c.window_min_samples = 1 + (uint32_t)(rx_rng_next(&r) % 20);
	c.window_min_ms = 1 + rx_rng_next(&r) % 200;
	c.window_max_ms = c.window_min_ms + rx_rng_next(&r) % 1000;
	c.stale_ms = 100 + rx_rng_next(&r) % 5000;
	c.probe_multiplier = 1 + (uint32_t)(rx_rng_next(&r) % 5);
	c.gradient2_long_window = 1 + (uint32_t)(rx_rng_next(&r) % 50);
	CU_ASSERT_EQUAL_FATAL(rx_limiter_init(l, &c), RX_OK);
	*self = l;
	return &rx_limiter_ops;
}

/* Indices of the refusal counters in limiter_stats' output. */
enum { LIM_SHED_NONBLOCKING = 12, LIM_SHED_BAND, LIM_SHED_FULL };

static size_t limiter_stats(const void *self, uint64_t now_ns, uint64_t *out,
			    size_t max)
{
	struct rx_limiter_stats s;
	rx_limiter_stats(self, now_ns, &s);
	const uint64_t v[] = {
	    s.algorithm,
	    s.limit,
	    s.in_flight,
	    s.queued,
	    s.window_peak,
	    s.window_samples,
	    s.p90_us,
	    s.rtt_noload_us,
	    s.updates,
	    s.drops,
	    s.drop_decreases,
	    s.wait_cancelled,
	    [LIM_SHED_NONBLOCKING] = s.shed_nonblocking,
	    [LIM_SHED_BAND] = s.shed_band,
	    [LIM_SHED_FULL] = s.shed_full,
	    s.probes,
	    s.baseline_resets,
	    s.relaxations,
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	CU_ASSERT_FATAL(n <= max);
	memcpy(out, v, sizeof(v));
	return n;
}

static const struct conformance_factory limiter_factory = {
    .name = "limiter",
    .make = limiter_make,
    .stats = limiter_stats,
    .refusal_stats = UINT64_C(1) << LIM_SHED_NONBLOCKING |
		     UINT64_C(1) << LIM_SHED_BAND |
		     UINT64_C(1) << LIM_SHED_FULL,
};

/* --- bulkhead ----------------------------------------------------------- */

static const struct rx_policy_ops *bulkhead_make(void *mem, uint64_t seed,
						 void **self)
{
	struct rx_bulkhead *b = mem;
	struct rx_bulkhead_config c;
	/* Caps around CONF_HELD, so that held calls fill it. */
	c.max_in_flight = 1 + (uint32_t)(seed % (CONF_HELD + 2));
	CU_ASSERT_EQUAL_FATAL(rx_bulkhead_init(b, &c), RX_OK);
	*self = b;
	return &rx_bulkhead_ops;
}

enum { BH_REFUSED = 2, BH_QUEUED };

static size_t bulkhead_stats(const void *self, uint64_t now_ns, uint64_t *out,
			     size_t max)
{
	struct rx_bulkhead_stats s;
	(void)now_ns;
	rx_bulkhead_stats(self, &s);
	const uint64_t v[] = {
	    s.max_in_flight,
	    s.in_flight,
	    [BH_REFUSED] = s.refused,
	    [BH_QUEUED] = s.queued,
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	CU_ASSERT_FATAL(n <= max);
	memcpy(out, v, sizeof(v));
	return n;
}

static const struct conformance_factory bulkhead_factory = {
    .name = "bulkhead",
    .make = bulkhead_make,
    .stats = bulkhead_stats,
    .refusal_stats = UINT64_C(1) << BH_REFUSED | UINT64_C(1) << BH_QUEUED,
};

/* --- rate limiter ------------------------------------------------------- */

static const struct rx_policy_ops *ratelimit_make(void *mem, uint64_t seed,
						  void **self)
{
	struct rx_ratelimit *r = mem;
	struct rx_rng g;
	struct rx_ratelimit_config c;
	rx_rng_seed(&g, seed ^ UINT64_C(0x7a7e));
	/* Rates near the history's (about 30 calls a second, with pauses),
	 * so that the bucket empties, refills and stays full by turns. */
	c.tokens = 1 + rx_rng_next(&g) % 40;
	c.period_ms = rx_rng_next(&g) % 2 ? 1000 : 100 + rx_rng_next(&g) % 3000;
	c.burst = rx_rng_next(&g) % 3 ? rx_rng_next(&g) % 6 : 0;
	CU_ASSERT_EQUAL_FATAL(rx_ratelimit_init(r, &c), RX_OK);
	*self = r;
	return &rx_ratelimit_ops;
}

enum { RL_REFUSED = 3, RL_QUEUED };

static size_t ratelimit_stats(const void *self, uint64_t now_ns, uint64_t *out,
			      size_t max)
{
	const struct rx_ratelimit *r = self;
	struct rx_ratelimit_stats s;
	rx_ratelimit_stats(r, now_ns, &s);
	const uint64_t v[] = {
	    s.tokens,
	    s.burst,
	    s.wait_ns,
	    [RL_REFUSED] = s.refused,
	    [RL_QUEUED] = s.queued,
	    /* The fraction of a token too: a refund must be exact. */
	    r->units,
	    rx_ratelimit_next_ns(r, now_ns),
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	CU_ASSERT_FATAL(n <= max);
	memcpy(out, v, sizeof(v));
	return n;
}

static const struct conformance_factory ratelimit_factory = {
    .name = "ratelimit",
    .make = ratelimit_make,
    .stats = ratelimit_stats,
    .refusal_stats = UINT64_C(1) << RL_REFUSED | UINT64_C(1) << RL_QUEUED,
};

/* --- throttler ---------------------------------------------------------- */

static const struct rx_policy_ops *throttler_make(void *mem, uint64_t seed,
						  void **self)
{
	static const double ks[] = {1.0, 1.1, 2.0, 3.0};
	static const double caps[] = {1.0, 0.9, 0.5};
	struct rx_throttler *t = mem;
	struct rx_rng g;
	struct rx_throttler_config c;
	rx_rng_seed(&g, seed ^ UINT64_C(0x7410));
	rx_throttler_config_default(&c);
	/* Short periods, so that buckets leave the ring within a history
	 * (it lasts about a minute), and tickets outlive their bucket. */
	c.k = ks[rx_rng_next(&g) % 4];
	c.max_reject = caps[rx_rng_next(&g) % 3];
	c.period_ms = 1000 + rx_rng_next(&g) % 10000;
	c.buckets = 1 + (uint32_t)(rx_rng_next(&g) % 20);
	CU_ASSERT_EQUAL_FATAL(rx_throttler_init(t, &c), RX_OK);
	*self = t;
	return &rx_throttler_ops;
}

static size_t throttler_stats(const void *self, uint64_t now_ns, uint64_t *out,
			      size_t max)
{
	struct rx_throttler_stats s;
	rx_throttler_stats(self, now_ns, &s);
	const uint64_t v[] = {
	    s.requests,
	    s.accepts,
	    bits_of(s.reject_probability),
	    s.throttled,
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	CU_ASSERT_FATAL(n <= max);
	memcpy(out, v, sizeof(v));
	return n;
}

static const struct conformance_factory throttler_factory = {
    .name = "throttler",
    .make = throttler_make,
    .stats = throttler_stats,
    .mirror_refusals = true,
};

/* --- retry budget ------------------------------------------------------- */

static const struct rx_policy_ops *budget_make(void *mem, uint64_t seed,
					       void **self)
{
	struct rx_retry_budget *b = mem;
	struct rx_rng g;
	struct rx_retry_budget_config c;
	rx_rng_seed(&g, seed ^ UINT64_C(0xb0d9));
	rx_retry_budget_config_default(&c);
	/* admit withdraws and nothing deposits, so the floor alone pays:
	 * large enough to admit for a while, small enough to run out, and
	 * short ttls, so withdrawals expire within a history. */
	c.ttl_ms = 1000 + rx_rng_next(&g) % 4000;
	c.min_retries_per_s = 1 + (uint32_t)(rx_rng_next(&g) % 40);
	c.buckets = 1 + (uint32_t)(rx_rng_next(&g) % 20);
	CU_ASSERT_EQUAL_FATAL(rx_retry_budget_init(b, &c), RX_OK);
	*self = b;
	return &rx_retry_budget_ops;
}

enum { RB_REFUSED = 4 };

static size_t budget_stats(const void *self, uint64_t now_ns, uint64_t *out,
			   size_t max)
{
	struct rx_retry_budget_stats s;
	rx_retry_budget_stats(self, now_ns, &s);
	const uint64_t v[] = {
	    (uint64_t)s.balance_units, s.retries_available,
	    s.first_attempts,	       s.retries,
	    [RB_REFUSED] = s.refused,
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	CU_ASSERT_FATAL(n <= max);
	memcpy(out, v, sizeof(v));
	return n;
}

static const struct conformance_factory budget_factory = {
    .name = "retry-budget",
    .make = budget_make,
    .stats = budget_stats,
    .refusal_stats = UINT64_C(1) << RB_REFUSED,
};

/* --- partition (criticality buckets) ----------------------------------- */

static const struct rx_policy_ops *partition_make(void *mem, uint64_t seed,
						  void **self)
{
	struct rx_partition *p = mem;
	struct rx_rng g;
	struct rx_partition_config c;
	uint32_t left = 100;
	unsigned b;

	rx_rng_seed(&g, seed ^ UINT64_C(0x9a27));
	rx_partition_config_default(&c);
	/* Limits around CONF_HELD, so that held calls reach them; shares
	 * drawn so that some buckets have less than one call's worth. */
	c.limit = 1 + (uint32_t)(rx_rng_next(&g) % (CONF_HELD + 2));
	if (rx_rng_next(&g) % 2)
		for (b = 0; b < RX_BUCKET_COUNT; b++) {
			c.percent[b] = (uint32_t)(rx_rng_next(&g) % (left + 1));
			left -= c.percent[b];
		}
	CU_ASSERT_EQUAL_FATAL(rx_partition_init(p, &c), RX_OK);
	*self = p;
	return &rx_partition_ops;
}

enum { PART_SHED = 5 };

static size_t partition_stats(const void *self, uint64_t now_ns, uint64_t *out,
			      size_t max)
{
	const struct rx_partition *p = self;
	(void)now_ns;
	const uint64_t v[] = {
	    p->busy[0],		    p->busy[1],
	    p->busy[2],		    p->busy[3],
	    p->in_flight,	    [PART_SHED] = p->shed[0],
	    [PART_SHED + 1] = p->shed[1], [PART_SHED + 2] = p->shed[2],
	    [PART_SHED + 3] = p->shed[3],
	};
	size_t n = sizeof(v) / sizeof(v[0]);
	CU_ASSERT_FATAL(n <= max);
	memcpy(out, v, sizeof(v));
	return n;
}

static const struct conformance_factory partition_factory = {
    .name = "partition",
    .make = partition_make,
    .stats = partition_stats,
    .refusal_stats = UINT64_C(0xf) << PART_SHED,
};

/* --- fairshare (tenants) ------------------------------------------------ */

static const struct rx_policy_ops *fairshare_make(void *mem, uint64_t seed,
						  void **self)
{
	struct rx_fairshare *f = mem;
	struct rx_rng g;
	struct rx_fairshare_config c;

	rx_rng_seed(&g, seed ^ UINT64_C(0xfa15));
	rx_fairshare_config_default(&c);
	/* Half-lives within a history (about a minute), so that epochs
	 * turn over and tickets outlive theirs. */
	c.limit = 1 + (uint32_t)(rx_rng_next(&g) % (CONF_HELD + 2));
	c.half_life_ms = 50 + rx_rng_next(&g) % 3000;
	c.slack_percent = (uint32_t)(rx_rng_next(&g) % 60);
	CU_ASSERT_EQUAL_FATAL(rx_fairshare_init(f, &c), RX_OK);
	*self = f;
	return &rx_fairshare_ops;
}

enum { FAIR_SHED = 2 };

static size_t fairshare_stats(const void *self, uint64_t now_ns, uint64_t *out,
			      size_t max)
{
	const struct rx_fairshare *f = self;
	uint64_t total = 0;
	size_t n = 0;
	uint32_t t;

	CU_ASSERT_FATAL(max >= 5 + CONF_TENANTS);
	out[n++] = rx_fairshare_active(f, now_ns, &total);
	out[n++] = f->in_flight;
	out[FAIR_SHED] = f->shed;
	n++;
	out[n++] = f->untracked;
	out[n++] = total;
	for (t = 1; t <= CONF_TENANTS; t++)
		out[n++] = rx_fairshare_heaviness(f, t, now_ns);
	return n;
}

static const struct conformance_factory fairshare_factory = {
    .name = "fairshare",
    .make = fairshare_make,
    .stats = fairshare_stats,
    .refusal_stats = UINT64_C(1) << FAIR_SHED,
};

/* --- the registry of factories ----------------------------------------- */

static const struct conformance_factory *const factories[] = {
    [RX_POLICY_BREAKER] = &breaker_factory,
    [RX_POLICY_LIMITER] = &limiter_factory,
    [RX_POLICY_BULKHEAD] = &bulkhead_factory,
    [RX_POLICY_RATELIMIT] = &ratelimit_factory,
    [RX_POLICY_THROTTLER] = &throttler_factory,
    [RX_POLICY_RETRY_BUDGET] = &budget_factory,
    [RX_POLICY_PARTITION] = &partition_factory,
    [RX_POLICY_FAIRSHARE] = &fairshare_factory,
};

#define N_FACTORIES (sizeof(factories) / sizeof(factories[0]))

static void test_every_kind_has_a_factory(void)
{
	CU_ASSERT_EQUAL(N_FACTORIES, RX_POLICY_KIND_COUNT);
	for (unsigned k = 0; k < RX_POLICY_KIND_COUNT; k++) {
		const struct conformance_factory *f =
		    k < N_FACTORIES ? factories[k] : NULL;
		CU_ASSERT_PTR_NOT_NULL(f);
		if (f == NULL) {
			fprintf(stderr,
				"policy kind %u has no conformance "
				"factory\n",
				k);
			continue;
		}
		CU_ASSERT_PTR_NOT_NULL(f->name);
		CU_ASSERT_PTR_NOT_NULL(f->make);
		CU_ASSERT_PTR_NOT_NULL(f->stats);
	}
}

static _Alignas(max_align_t) unsigned char mem_a[CONF_STORAGE];
static _Alignas(max_align_t) unsigned char mem_b[CONF_STORAGE];

static enum rx_verdict random_verdict(struct rx_rng *h)
{
	/* Failures are common enough to trip, heal and trip again. */
	static const enum rx_verdict pick[] = {
	    RX_SUCCESS,	 RX_SUCCESS,   RX_SUCCESS,   RX_ANSWERED,
	    RX_OVERLOAD, RX_TRANSIENT, RX_TRANSIENT, RX_TIMEOUT};
	return pick[rx_rng_next(h) % 8];
}

struct held {
	struct rx_ticket a, b;
};

/* Returns the number of extra (released) calls A was given. */
static unsigned run_history(const struct conformance_factory *f, uint64_t seed)
{
	void *sa, *sb;
	memset(mem_a, 0, sizeof(mem_a));
	memset(mem_b, 0, sizeof(mem_b));
	const struct rx_policy_ops *ops = f->make(mem_a, seed, &sa);
	CU_ASSERT_PTR_EQUAL_FATAL(f->make(mem_b, seed, &sb), ops);

	struct rx_rng hist, rng_a, rng_b;
	rx_rng_seed(&hist, seed);
	rx_rng_seed(&rng_a, ~seed);
	rx_rng_seed(&rng_b, ~seed);
	struct held held[CONF_HELD];
	unsigned n_held = 0, extra = 0;
	uint64_t now = 1000 * MS;
	/* What A's refused extra calls added to its refusal counters. */
	uint64_t offset[CONF_STATS_MAX] = {0};

	for (unsigned step = 0; step < CONF_STEPS; step++) {
		uint64_t r = rx_rng_next(&hist) % 100;
		if (r < 5)
			now += (500 + rx_rng_next(&hist) % 5000) * MS;
		else if (r < 80)
			now += rx_rng_next(&hist) % (50 * MS);
		bool can_wait = rx_rng_next(&hist) % 2;
		/* Who calls: bucket and tenant of the extra and the main
		 * call (partition.h, fairshare.h; the others ignore them). */
		uint64_t cls = rx_rng_next(&hist);

		if (rx_rng_next(&hist) % 4 == 0) {
			struct rx_rng scratch = rng_a;
			struct rx_admit_ctx x = {now, &scratch, can_wait, 0, 0};
			x.bucket = (uint8_t)(cls % RX_BUCKET_COUNT);
			x.tenant = (uint32_t)(cls / 8 % (CONF_TENANTS + 1));
			struct rx_ticket t;
			struct rx_refusal why;
			uint64_t before[CONF_STATS_MAX], after[CONF_STATS_MAX];
			size_t nb = f->stats(sa, now, before, CONF_STATS_MAX);
			enum rx_decision dx = ops->admit(sa, &x, &t, &why);
			if (dx == RX_ADMIT) {
				struct rx_observation o = {RX_REJECTED, 0, now};
				ops->settle(sa, &t, &o);
				extra++;
			} else if (f->mirror_refusals) {
				/* A real call: B is asked it too (ADR-430). */
				struct rx_rng sb_rng = rng_b;
				struct rx_admit_ctx xb = x;
				xb.rng = &sb_rng;
				struct rx_ticket tb;
				struct rx_refusal wb;
				CU_ASSERT_EQUAL_FATAL(
				    ops->admit(sb, &xb, &tb, &wb), dx);
				CU_ASSERT_EQUAL_FATAL(wb.reason, why.reason);
				CU_ASSERT_EQUAL_FATAL(wb.retry_after_ms,
						      why.retry_after_ms);
			} else {
				/* A real refusal: only refusal counters may
				 * move, and they stay ahead of B's by it. */
				size_t na =
				    f->stats(sa, now, after, CONF_STATS_MAX);
				CU_ASSERT_EQUAL_FATAL(na, nb);
				for (size_t i = 0; i < na && i < 64; i++)
					if (f->refusal_stats >> i & 1)
						offset[i] +=
						    after[i] - before[i];
			}
		}

		struct rx_admit_ctx ca = {now, &rng_a, can_wait, 0, 0};
		ca.bucket = (uint8_t)(cls / 256 % RX_BUCKET_COUNT);
		ca.tenant = (uint32_t)(cls / 4096 % (CONF_TENANTS + 1));
		struct rx_admit_ctx cb = ca;
		cb.rng = &rng_b;
		struct rx_ticket ta, tb;
		struct rx_refusal wa = {0}, wb = {0};
		enum rx_decision da = ops->admit(sa, &ca, &ta, &wa);
		enum rx_decision db = ops->admit(sb, &cb, &tb, &wb);
		CU_ASSERT_EQUAL_FATAL(da, db);
		if (da != RX_ADMIT) {
			CU_ASSERT_EQUAL_FATAL(wa.reason, wb.reason);
			CU_ASSERT_EQUAL_FATAL(wa.retry_after_ms,
					      wb.retry_after_ms);
		} else if (n_held < CONF_HELD && rx_rng_next(&hist) % 4 == 0) {
			held[n_held].a = ta;
			held[n_held].b = tb;
			n_held++;
		} else {
			struct rx_observation o = {random_verdict(&hist),
						   rx_rng_next(&hist) % 150000,
						   now};
			ops->settle(sa, &ta, &o);
			ops->settle(sb, &tb, &o);
		}
		if (n_held > 0 && rx_rng_next(&hist) % 3 == 0) {
			unsigned i = (unsigned)(rx_rng_next(&hist) % n_held);
			struct rx_observation o = {random_verdict(&hist),
						   rx_rng_next(&hist) % 150000,
						   now};
			ops->settle(sa, &held[i].a, &o);
			ops->settle(sb, &held[i].b, &o);
			held[i] = held[--n_held];
		}

		uint64_t va[CONF_STATS_MAX], vb[CONF_STATS_MAX];
		size_t na = f->stats(sa, now, va, CONF_STATS_MAX);
		size_t nb = f->stats(sb, now, vb, CONF_STATS_MAX);
		CU_ASSERT_EQUAL_FATAL(na, nb);
		for (size_t i = 0; i < na; i++) {
			va[i] -= offset[i];
			if (va[i] != vb[i])
				fprintf(stderr,
					"%s seed %llu step %u stat %zu: "
					"%llu != %llu\n",
					f->name, (unsigned long long)seed, step,
					i, (unsigned long long)va[i],
					(unsigned long long)vb[i]);
			CU_ASSERT_EQUAL_FATAL(va[i], vb[i]);
		}
	}
	return extra;
}

static void test_release_leaves_no_trace(void)
{
	for (unsigned k = 0; k < N_FACTORIES; k++) {
		if (factories[k] == NULL)
			continue;
		unsigned long extra = 0;
		for (uint64_t seed = 1; seed <= CONF_SEEDS; seed++)
			extra += run_history(factories[k], seed);
		/* The histories must actually exercise releases. */
		CU_ASSERT(extra > CONF_SEEDS * 10);
	}
}

/* The same invariant through the gate, whose refusal path does the
 * releasing: a breaker before a policy that refuses every other call. */
struct flaky {
	unsigned n;
};

static enum rx_decision flaky_admit(void *self, const struct rx_admit_ctx *ctx,
				    struct rx_ticket *t, struct rx_refusal *why)
{
	struct flaky *f = self;
	if (f->n++ % 2 == 0)
		return RX_ADMIT;
	why->reason = RX_REASON_RATE_LIMITED;
	why->retry_after_ms = 0;
	return RX_REFUSE;
}

static void flaky_settle(void *self, const struct rx_ticket *t,
			 const struct rx_observation *obs)
{
}

static const struct rx_policy_ops flaky_ops = {"flaky", flaky_admit,
					       flaky_settle};

static void test_gate_release_leaves_no_trace(void)
{
	for (uint64_t seed = 1; seed <= 50; seed++) {
		void *sa, *sb;
		memset(mem_a, 0, sizeof(mem_a));
		memset(mem_b, 0, sizeof(mem_b));
		breaker_make(mem_a, seed, &sa);
		breaker_make(mem_b, seed, &sb);
		struct flaky fl = {0};
		struct rx_gate g;
		rx_gate_init(&g);
		rx_gate_add(&g, &rx_breaker_ops, sa);
		rx_gate_add(&g, &flaky_ops, &fl);
		struct rx_rng hist;
		rx_rng_seed(&hist, seed);
		uint64_t now = 1000 * MS;
		for (unsigned step = 0; step < 400; step++) {
			now += rx_rng_next(&hist) % (300 * MS);
			struct rx_admit_ctx ctx = {now, NULL, false, 0, 0};
			struct rx_gate_permit p;
			struct rx_refusal why;
			/* Through the gate until the flaky policy admits. */
			enum rx_decision dg;
			do {
				dg = rx_gate_admit(&g, &ctx, &p, &why);
			} while (dg == RX_REFUSE &&
				 why.reason == RX_REASON_RATE_LIMITED);
			struct rx_ticket t;
			enum rx_decision db =
			    rx_breaker_ops.admit(sb, &ctx, &t, &why);
			CU_ASSERT_EQUAL_FATAL(dg, db);
			if (dg == RX_ADMIT) {
				struct rx_observation o = {
				    random_verdict(&hist),
				    rx_rng_next(&hist) % 150000, now};
				rx_gate_settle(&g, &p, &o);
				rx_breaker_ops.settle(sb, &t, &o);
			}
			uint64_t va[CONF_STATS_MAX], vb[CONF_STATS_MAX];
			size_t n = breaker_stats(sa, now, va, CONF_STATS_MAX);
			breaker_stats(sb, now, vb, CONF_STATS_MAX);
			CU_ASSERT_EQUAL_FATAL(memcmp(va, vb, n * 8), 0);
		}
	}
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"every policy kind has a factory", test_every_kind_has_a_factory},
	    {"release leaves no trace", test_release_leaves_no_trace},
	    {"gate release leaves no trace", test_gate_release_leaves_no_trace},
	    {NULL, NULL},
	};
	return rx_run_suite("conformance", tests);
}
