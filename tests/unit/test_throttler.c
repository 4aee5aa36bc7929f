/*
 * test_throttler.c - SRE client-side adaptive throttling (src/throttler.c).
 *
 * Deterministic: a fake clock and seeded generators. The figures the
 * tests measure are printed so docs can quote them:
 *   - an upstream answering 503 to everything: the refused fraction
 *     matches the formula's requests / (requests + 1);
 *   - an upstream that accepts C calls a second under a demand of 10 C:
 *     about K x C calls a second still reach it (the SRE book's bound),
 *     and the refused fraction is 1 - K C / demand;
 *   - a healthy upstream, or one answering 4xx: nothing refused;
 *   - recovery within one period; the verdicts that count as accepts;
 *     throttled calls counted as requests; release without a trace.
 */
#include <math.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix/error.h"
#include "resilix/throttler.h"

#define MS RX_NS_PER_MS

static void init_default(struct rx_throttler *t)
{
	struct rx_throttler_config c;
	rx_throttler_config_default(&c);
	CU_ASSERT_EQUAL_FATAL(rx_throttler_init(t, &c), RX_OK);
}

/* One call at @now, settled at once with @v when admitted. */
static bool call(struct rx_throttler *t, struct rx_rng *g, uint64_t now,
		 enum rx_verdict v)
{
	struct rx_admit_ctx ctx = {now, g, false, 0, 0};
	struct rx_ticket tk;
	struct rx_refusal why = {0};
	if (rx_throttler_admit(t, &ctx, &tk, &why) != RX_ADMIT) {
		CU_ASSERT_EQUAL(why.reason, RX_REASON_THROTTLED);
		CU_ASSERT_EQUAL(why.retry_after_ms, 0);
		return false;
	}
	struct rx_observation o = {v, 1000, now};
	rx_throttler_settle(t, &tk, &o);
	return true;
}

static void test_defaults_and_checks(void)
{
	struct rx_throttler_config c;
	const char *why = NULL;
	rx_throttler_config_default(&c);
	CU_ASSERT_EQUAL(c.k, 2.0);
	CU_ASSERT_EQUAL(c.period_ms, 120000);
	CU_ASSERT_EQUAL(c.buckets, 20);
	CU_ASSERT_EQUAL(c.max_reject, 0.9);
	CU_ASSERT_EQUAL(rx_throttler_config_check(&c, &why), RX_OK);
	struct rx_throttler_config bad[] = {c, c, c, c, c, c, c, c};
	bad[0].k = 0.99;
	bad[1].k = NAN;
	bad[2].period_ms = 999;
	bad[3].period_ms = 3600001;
	bad[4].buckets = 0;
	bad[5].buckets = RX_THROTTLER_BUCKETS_MAX + 1;
	bad[6].max_reject = 0.0;
	bad[7].max_reject = 1.01;
	for (size_t i = 0; i < 8; i++) {
		why = NULL;
		CU_ASSERT_EQUAL(rx_throttler_config_check(&bad[i], &why),
				RX_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(why);
	}
	CU_ASSERT_EQUAL(rx_throttler_config_check(NULL, NULL), RX_EINVAL);
	struct rx_throttler t;
	CU_ASSERT_EQUAL(rx_throttler_init(&t, &bad[0]), RX_EINVAL);
}

/* An upstream answering 503 to every call, one call every 100 ms for 20
 * minutes: once the period is full, each call is refused with the
 * formula's probability, requests / (requests + 1). */
static void test_all_503_follows_the_formula(void)
{
	struct rx_throttler t;
	struct rx_throttler_config c;
	struct rx_rng g;
	rx_throttler_config_default(&c);
	c.max_reject = 1.0; /* the book's formula, uncapped */
	CU_ASSERT_EQUAL_FATAL(rx_throttler_init(&t, &c), RX_OK);
	rx_rng_seed(&g, 503);
	uint64_t now = 1000 * MS, attempts = 0, refused = 0;
	double p_sum = 0.0;
	for (int i = 0; i < 12000; i++, now += 100 * MS) {
		struct rx_throttler_stats s;
		rx_throttler_stats(&t, now, &s);
		bool sent = call(&t, &g, now, RX_OVERLOAD);
		if (i < 6000)
			continue; /* the first 10 minutes fill the period */
		CU_ASSERT_EQUAL(s.accepts, 0);
		/* The period holds 19 to 20 buckets of 60 calls. */
		CU_ASSERT(s.requests >= 1140 && s.requests <= 1200);
		CU_ASSERT_DOUBLE_EQUAL(
		    s.reject_probability,
		    (double)s.requests / ((double)s.requests + 1.0), 1e-12);
		p_sum += s.reject_probability;
		attempts++;
		refused += !sent;
	}
	double measured = (double)refused / (double)attempts;
	double formula = p_sum / (double)attempts;
	printf("\n    all 503, 10/s, last 10 min: refused %.5f, formula "
	       "%.5f (%llu of %llu sent)\n",
	       measured, formula, (unsigned long long)(attempts - refused),
	       (unsigned long long)attempts);
	CU_ASSERT(fabs(measured - formula) < 0.002);
	CU_ASSERT(measured > 0.997);
	struct rx_throttler_stats s;
	rx_throttler_stats(&t, now, &s);
	CU_ASSERT_EQUAL(s.throttled, t.throttled);
	CU_ASSERT(s.throttled > 11000);

	/* With the default cap, a tenth of the calls still probe. */
	init_default(&t);
	attempts = refused = 0;
	for (int i = 0; i < 12000; i++, now += 100 * MS) {
		bool sent = call(&t, &g, now, RX_OVERLOAD);
		if (i >= 6000) {
			attempts++;
			refused += !sent;
		}
	}
	measured = (double)refused / (double)attempts;
	printf("    all 503, capped at 0.9: refused %.4f\n", measured);
	CU_ASSERT(fabs(measured - 0.9) < 0.015); /* sd 0.004 */
}

/* An upstream with capacity C = 10 calls a second (it accepts the first
 * 10 calls of each second and answers 503 to the rest) under a demand of
 * 100 calls a second: the throttle lets about K x C = 20 a second through
 * and refuses the rest, p = 1 - K C / demand = 0.8. */
static void capacity_run(double k, double *sent_per_s, double *refused)
{
	struct rx_throttler t;
	struct rx_throttler_config c;
	struct rx_rng g;
	rx_throttler_config_default(&c);
	c.k = k;
	CU_ASSERT_EQUAL_FATAL(rx_throttler_init(&t, &c), RX_OK);
	rx_rng_seed(&g, 1000 + (uint64_t)(k * 10));
	uint64_t now = 0, sent = 0, attempts = 0, refusals = 0;
	unsigned accepted_this_second = 0;
	for (int i = 0; i < 100 * 900; i++, now += 10 * MS) {
		if (i % 100 == 0)
			accepted_this_second = 0;
		enum rx_verdict v =
		    accepted_this_second < 10 ? RX_SUCCESS : RX_OVERLOAD;
		bool ok = call(&t, &g, now, v);
		if (ok && v == RX_SUCCESS)
			accepted_this_second++;
		if (i < 100 * 300)
			continue; /* 5 minutes to settle */
		attempts++;
		sent += ok;
		refusals += !ok;
	}
	*sent_per_s = (double)sent / ((double)attempts / 100.0);
	*refused = (double)refusals / (double)attempts;
}

static void test_capacity_bound_k_times_accepts(void)
{
	static const double ks[] = {1.5, 2.0, 3.0, 5.0};
	for (size_t i = 0; i < 4; i++) {
		double per_s, refused;
		capacity_run(ks[i], &per_s, &refused);
		printf("\n    K %.1f, demand 100/s, capacity 10/s: %.2f/s "
		       "sent, refused %.4f (formula %.4f)",
		       ks[i], per_s, refused, 1.0 - ks[i] * 10.0 / 100.0);
		CU_ASSERT(fabs(per_s - ks[i] * 10.0) < 0.05 * ks[i] * 10.0);
		CU_ASSERT(fabs(refused - (1.0 - ks[i] * 0.1)) < 0.01);
	}
	printf("\n");
}

static void test_healthy_and_answered_never_throttled(void)
{
	static const enum rx_verdict vs[] = {RX_SUCCESS, RX_ANSWERED};
	for (size_t i = 0; i < 2; i++) {
		struct rx_throttler t;
		struct rx_rng g;
		init_default(&t);
		rx_rng_seed(&g, 1);
		uint64_t now = 0;
		for (int n = 0; n < 50000; n++, now += 7 * MS)
			CU_ASSERT_FATAL(call(&t, &g, now, vs[i]));
		struct rx_throttler_stats s;
		rx_throttler_stats(&t, now, &s);
		CU_ASSERT_EQUAL(s.throttled, 0);
		CU_ASSERT_EQUAL(s.reject_probability, 0.0);
		CU_ASSERT_EQUAL(s.requests, s.accepts);
	}
	/* Half the calls failing, K = 2: requests = 2 x accepts, p = 0. */
	struct rx_throttler t;
	struct rx_rng g;
	init_default(&t);
	rx_rng_seed(&g, 2);
	uint64_t now = 0;
	for (int n = 0; n < 20000; n++, now += 10 * MS)
		CU_ASSERT_FATAL(
		    call(&t, &g, now, n % 2 ? RX_TRANSIENT : RX_SUCCESS));
}

/* Which verdicts are accepts (ADR-423). */
static void test_accepted_verdicts(void)
{
	static const struct {
		enum rx_verdict v;
		uint64_t requests, accepts;
	} want[] = {
	    {RX_SUCCESS, 1, 1},	  {RX_ANSWERED, 1, 1}, {RX_OVERLOAD, 1, 0},
	    {RX_TRANSIENT, 1, 0}, {RX_TIMEOUT, 1, 0},  {RX_REJECTED, 0, 0},
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct rx_throttler t;
		struct rx_rng g;
		init_default(&t);
		rx_rng_seed(&g, 3);
		CU_ASSERT(call(&t, &g, 5 * MS, want[i].v));
		struct rx_throttler_stats s;
		rx_throttler_stats(&t, 5 * MS, &s);
		CU_ASSERT_EQUAL(s.requests, want[i].requests);
		CU_ASSERT_EQUAL(s.accepts, want[i].accepts);
	}
}

/* A throttled call counts as a request (ADR-424): requests grow with the
 * attempts, not with what was sent. */
static void test_throttled_calls_count_as_requests(void)
{
	struct rx_throttler t;
	struct rx_throttler_config c;
	struct rx_rng g;
	rx_throttler_config_default(&c);
	c.max_reject = 1.0;
	CU_ASSERT_EQUAL_FATAL(rx_throttler_init(&t, &c), RX_OK);
	rx_rng_seed(&g, 4);
	unsigned sent = 0;
	for (int n = 0; n < 1000; n++)
		sent += call(&t, &g, 1000 * MS + (uint64_t)n * MS, RX_TIMEOUT);
	struct rx_throttler_stats s;
	rx_throttler_stats(&t, 2000 * MS, &s);
	CU_ASSERT_EQUAL(s.requests, 1000);
	CU_ASSERT_EQUAL(s.throttled, 1000 - sent);
	/* Sum of 1 / (n + 1): about ln 1000 + 0.58 = 7.5 sent. */
	CU_ASSERT(sent >= 2 && sent <= 20);
	printf("\n    1000 timeouts in a row: %u sent\n", sent);
}

/* After a 60 s outage at 50 calls a second the upstream recovers. The
 * throttle's own refusals count as requests, so the fraction it lets
 * through grows only as accepts come back: about e-fold every period /
 * 1.6 with K = 2 (ADR-425). With the default cap of 0.9 a tenth of the
 * calls still probe during the outage and recovery takes about one
 * period; uncapped, the book's formula sends one call in thousands at
 * the end of the outage and takes several periods. */
static double recovery_s(double max_reject)
{
	struct rx_throttler t;
	struct rx_throttler_config c;
	struct rx_rng g;
	rx_throttler_config_default(&c);
	c.max_reject = max_reject;
	CU_ASSERT_EQUAL_FATAL(rx_throttler_init(&t, &c), RX_OK);
	rx_rng_seed(&g, 5);
	uint64_t now = 0;
	for (int n = 0; n < 3000; n++, now += 20 * MS)
		call(&t, &g, now, RX_OVERLOAD);
	uint64_t healed = now, last_refusal = now;
	for (int n = 0; n < 50 * 3600; n++, now += 20 * MS)
		if (!call(&t, &g, now, RX_SUCCESS))
			last_refusal = now;
	struct rx_throttler_stats s;
	rx_throttler_stats(&t, now, &s);
	CU_ASSERT_EQUAL(s.reject_probability, 0.0);
	return (double)(last_refusal - healed) / 1e9;
}

static void test_recovers_after_an_outage(void)
{
	double capped = recovery_s(0.9), uncapped = recovery_s(1.0);
	printf("\n    after a 60 s outage: last refusal %.1f s into "
	       "recovery (max_reject 0.9), %.1f s (uncapped)\n",
	       capped, uncapped);
	CU_ASSERT(capped <= 240.0);
	CU_ASSERT(uncapped > capped);
}

static void test_max_reject_caps(void)
{
	struct rx_throttler t;
	struct rx_throttler_config c;
	struct rx_rng g;
	rx_throttler_config_default(&c);
	c.max_reject = 0.5;
	CU_ASSERT_EQUAL_FATAL(rx_throttler_init(&t, &c), RX_OK);
	rx_rng_seed(&g, 6);
	unsigned sent = 0;
	for (int n = 0; n < 20000; n++)
		sent += call(&t, &g, (uint64_t)n * MS, RX_TRANSIENT);
	CU_ASSERT(fabs(sent / 20000.0 - 0.5) < 0.02);
}

/* admit + settle(RX_REJECTED) leaves every byte as it was (ADR-007),
 * whether the release comes at once, later in the same bucket, or after
 * the admission's bucket has left the ring. */
static void test_release_leaves_no_trace(void)
{
	struct rx_throttler a, b;
	struct rx_rng g;
	struct rx_ticket tk;
	struct rx_refusal why;
	init_default(&a);
	rx_rng_seed(&g, 7);
	uint64_t now = 0;
	for (int n = 0; n < 500; n++, now += 50 * MS)
		call(&a, &g, now, n % 3 == 2 ? RX_OVERLOAD : RX_SUCCESS);
	b = a;
	struct rx_rng ga = g, gb = g, scratch = g;
	struct rx_admit_ctx ctx = {now, &scratch, false, 0, 0};
	CU_ASSERT_EQUAL_FATAL(rx_throttler_admit(&a, &ctx, &tk, &why),
			      RX_ADMIT);
	struct rx_observation rej = {RX_REJECTED, 0, now + 10 * MS};
	rx_throttler_settle(&a, &tk, &rej);
	/* The same next call on both: the same bytes after it. */
	CU_ASSERT_EQUAL(call(&a, &ga, now, RX_OVERLOAD),
			call(&b, &gb, now, RX_OVERLOAD));
	CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof(a)), 0);

	/* Released after its bucket left the ring: nothing to undo. */
	init_default(&a);
	ctx.now_ns = 1000 * MS;
	CU_ASSERT_EQUAL(rx_throttler_admit(&a, &ctx, &tk, &why), RX_ADMIT);
	now = 1000 * MS + 130000 * MS;
	call(&a, &g, now, RX_SUCCESS);
	b = a;
	b.outstanding--; /* the twin never had the call in flight */
	struct rx_observation o = {RX_REJECTED, 0, now};
	rx_throttler_settle(&a, &tk, &o);
	CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof(a)), 0);

	/* Released in the same bucket, later: exactly the twin's bytes. */
	init_default(&a);
	b = a;
	ctx.now_ns = 0;
	CU_ASSERT_EQUAL(rx_throttler_admit(&a, &ctx, &tk, &why), RX_ADMIT);
	o.now_ns = 5000 * MS;
	rx_throttler_settle(&a, &tk, &o);
	CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof(a)), 0);
}

/* Calls in flight are no evidence (ADR-462): a program that starts eight
 * calls at once on a fresh key sees none throttled, and once they are
 * answered with overload the next ones are. */
static void test_in_flight_no_evidence(void)
{
	struct rx_throttler t;
	struct rx_rng g;
	struct rx_ticket tk[8];
	struct rx_refusal why;
	init_default(&t);
	rx_rng_seed(&g, 8);
	struct rx_admit_ctx ctx = {1 * MS, &g, true, 0, 0};
	for (int i = 0; i < 8; i++)
		CU_ASSERT_EQUAL(rx_throttler_admit(&t, &ctx, &tk[i], &why),
				RX_ADMIT);
	CU_ASSERT_EQUAL(t.outstanding, 8);
	struct rx_observation busy = {RX_OVERLOAD, 1000, 2 * MS};
	for (int i = 0; i < 8; i++)
		rx_throttler_settle(&t, &tk[i], &busy);
	CU_ASSERT_EQUAL(t.outstanding, 0);
	struct rx_throttler_stats st;
	rx_throttler_stats(&t, 2 * MS, &st);
	CU_ASSERT(fabs(st.reject_probability - 8.0 / 9.0) < 1e-9);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"defaults and checks", test_defaults_and_checks},
	    {"all 503 follows the formula", test_all_503_follows_the_formula},
	    {"capacity bound, K x accepts",
	     test_capacity_bound_k_times_accepts},
	    {"healthy and answered never throttled",
	     test_healthy_and_answered_never_throttled},
	    {"accepted verdicts", test_accepted_verdicts},
	    {"throttled calls count as requests",
	     test_throttled_calls_count_as_requests},
	    {"recovers after an outage", test_recovers_after_an_outage},
	    {"max_reject caps", test_max_reject_caps},
	    {"release leaves no trace", test_release_leaves_no_trace},
	    {"calls in flight are no evidence", test_in_flight_no_evidence},
	    {NULL, NULL},
	};
	return rx_run_suite("throttler", tests);
}
