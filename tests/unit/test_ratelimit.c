/*
 * test_ratelimit.c - the token bucket (src/ratelimit.c).
 *
 * Deterministic: time is a number the test moves, nothing sleeps. Pacing
 * is checked to the nanosecond over long runs (ADR-421: no drift), the
 * refund of a released call against a twin that never lent its token
 * (ADR-422), and refusals, retry-after, defaults, parsing and overflow.
 */
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix/error.h"
#include "resilix/ratelimit.h"

#define NS_PER_S UINT64_C(1000000000)

static void init_rate(struct rx_ratelimit *r, uint64_t tokens,
		      uint64_t period_ms, uint64_t burst)
{
	struct rx_ratelimit_config c = {tokens, period_ms, burst};
	CU_ASSERT_EQUAL_FATAL(rx_ratelimit_init(r, &c), RX_OK);
}

static enum rx_decision take(struct rx_ratelimit *r, uint64_t now,
			     bool can_wait, struct rx_refusal *why)
{
	struct rx_admit_ctx ctx = {now, NULL, can_wait, 0, 0};
	struct rx_ticket t;
	return rx_ratelimit_admit(r, &ctx, &t, why);
}

/* A caller that always waits for rx_ratelimit_next_ns, from a full
 * bucket: the k-th admission after the burst is at exactly
 * start + floor(k x period / tokens) (the bucket keeps the fraction of a
 * nanosecond's refill past its cap, ADR-421), so nothing drifts. */
static void paced_run(uint64_t tokens, uint64_t period_ms, uint64_t burst,
		      uint64_t run_ns)
{
	struct rx_ratelimit r;
	struct rx_refusal why;
	uint64_t start = 5 * NS_PER_S, now = start, period_ns;
	uint64_t k = 0, admitted = 0;
	init_rate(&r, tokens, period_ms, burst);
	period_ns = period_ms * RX_NS_PER_MS;
	for (uint64_t i = 0; i < r.burst; i++)
		CU_ASSERT_EQUAL_FATAL(take(&r, now, true, &why), RX_ADMIT);
	admitted = r.burst;
	for (;;) {
		uint64_t next = rx_ratelimit_next_ns(&r, now);
		if (next - start > run_ns)
			break;
		k++;
		/* floor(k x period / tokens), in 128 bits. */
		unsigned __int128 num = (unsigned __int128)k * period_ns;
		uint64_t want = (uint64_t)(num / tokens);
		CU_ASSERT_EQUAL_FATAL(next, start + want);
		/* One ns early is too early, and says so. */
		CU_ASSERT_EQUAL_FATAL(take(&r, next - 1, true, &why), RX_QUEUE);
		CU_ASSERT_EQUAL_FATAL(why.retry_after_ms, 1);
		now = next;
		CU_ASSERT_EQUAL_FATAL(take(&r, now, true, &why), RX_ADMIT);
		admitted++;
	}
	/* Exactly burst + the k with floor(k x period / tokens) <= run:
	 * ceil((run + 1) x tokens / period) - 1 of them. */
	unsigned __int128 total = (unsigned __int128)(run_ns + 1) * tokens;
	CU_ASSERT_EQUAL(
	    admitted,
	    r.burst + (uint64_t)((total + period_ns - 1) / period_ns) - 1);
	printf("\n    %llu/%llu ms, burst %llu, %.0f s: %llu admitted, "
	       "last at +%llu ns\n",
	       (unsigned long long)tokens, (unsigned long long)period_ms,
	       (unsigned long long)r.burst, (double)run_ns / 1e9,
	       (unsigned long long)admitted, (unsigned long long)(now - start));
}

static void test_paces_exactly_without_drift(void)
{
	paced_run(3, 1000, 1, 3600 * NS_PER_S);	   /* 3/s for an hour */
	paced_run(7, 60000, 0, 86400 * NS_PER_S);  /* 7/min for a day */
	paced_run(50, 1000, 0, 600 * NS_PER_S);	   /* 50/s, burst 50 */
	paced_run(1000000, 1000, 5, 2 * NS_PER_S); /* 1 per µs */
}

/* A hammering caller polling every ms for 10 s at 50/s, burst 50: the
 * burst plus 50 a second, exactly. */
static void test_hammering_caller_gets_the_rate(void)
{
	struct rx_ratelimit r;
	struct rx_refusal why;
	uint64_t start = NS_PER_S, admitted = 0, refused = 0;
	init_rate(&r, 50, 1000, 0);
	CU_ASSERT_EQUAL(r.burst, 50);
	for (uint64_t ms = 0; ms <= 10000; ms++) {
		enum rx_decision d =
		    take(&r, start + ms * RX_NS_PER_MS, false, &why);
		if (d == RX_ADMIT) {
			admitted++;
		} else {
			CU_ASSERT_EQUAL(d, RX_REFUSE);
			CU_ASSERT_EQUAL(why.reason, RX_REASON_RATE_LIMITED);
			CU_ASSERT(why.retry_after_ms >= 1 &&
				  why.retry_after_ms <= 20);
			refused++;
		}
	}
	CU_ASSERT_EQUAL(admitted, 50 + 50 * 10);
	struct rx_ratelimit_stats s;
	rx_ratelimit_stats(&r, start + 10000 * RX_NS_PER_MS, &s);
	CU_ASSERT_EQUAL(s.refused, refused);
	CU_ASSERT_EQUAL(s.queued, 0);
	printf("\n    50/s polled every ms for 10 s: %llu admitted, %llu "
	       "refused\n",
	       (unsigned long long)admitted, (unsigned long long)refused);
}

static void test_retry_after_and_queue(void)
{
	struct rx_ratelimit r;
	struct rx_refusal why = {0};
	uint64_t t0 = 10 * NS_PER_S;
	init_rate(&r, 1, 1000, 1);
	CU_ASSERT_EQUAL(take(&r, t0, false, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(take(&r, t0 + 300 * RX_NS_PER_MS, false, &why),
			RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_RATE_LIMITED);
	CU_ASSERT_EQUAL(why.retry_after_ms, 700);
	CU_ASSERT_EQUAL(take(&r, t0 + 300 * RX_NS_PER_MS + 1, true, &why),
			RX_QUEUE);
	CU_ASSERT_EQUAL(why.retry_after_ms, 700); /* 699.999999 ms, up */
	CU_ASSERT_EQUAL(rx_ratelimit_next_ns(&r, t0), t0 + NS_PER_S);
	struct rx_ratelimit_stats s;
	rx_ratelimit_stats(&r, t0 + 500 * RX_NS_PER_MS, &s);
	CU_ASSERT_EQUAL(s.tokens, 0);
	CU_ASSERT_EQUAL(s.wait_ns, 500 * RX_NS_PER_MS);
	CU_ASSERT_EQUAL(s.refused, 1);
	CU_ASSERT_EQUAL(s.queued, 1);
	CU_ASSERT_EQUAL(take(&r, t0 + NS_PER_S, false, &why), RX_ADMIT);
	/* A clock that steps back is no time passing. */
	CU_ASSERT_EQUAL(take(&r, t0, false, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.retry_after_ms, 1000);
}

static void test_refund_is_exact_and_capped(void)
{
	struct rx_ratelimit a, b;
	struct rx_admit_ctx ctx = {NS_PER_S, NULL, false, 0, 0};
	struct rx_ticket t;
	struct rx_refusal why;
	struct rx_observation rej = {RX_REJECTED, 0, NS_PER_S};

	/* Full: the refund stops at burst. */
	init_rate(&a, 10, 1000, 4);
	CU_ASSERT_EQUAL(rx_ratelimit_admit(&a, &ctx, &t, &why), RX_ADMIT);
	rx_ratelimit_settle(&a, &t, &rej);
	struct rx_ratelimit_stats s;
	rx_ratelimit_stats(&a, NS_PER_S, &s);
	CU_ASSERT_EQUAL(s.tokens, 4);
	CU_ASSERT_EQUAL(a.units, a.cap_units);

	/* A ticket held across time (refill, the cap) and released later,
	 * against a twin that never took it: from then on the two buckets
	 * answer and report the same. Nothing else is admitted while the
	 * token is lent: a held token may cost another call its admission,
	 * which is what holding means, not a trace of the release. */
	struct rx_rng g;
	rx_rng_seed(&g, 42);
	for (int round = 0; round < 2000; round++) {
		init_rate(&a, 1 + rx_rng_next(&g) % 20, 1000,
			  1 + rx_rng_next(&g) % 5);
		b = a;
		uint64_t now = NS_PER_S;
		for (int step = 0; step < 60; step++) {
			now += rx_rng_next(&g) % (400 * RX_NS_PER_MS);
			struct rx_admit_ctx c = {now, NULL, false, 0, 0};
			if (rx_rng_next(&g) % 4 == 0) {
				struct rx_ticket lent;
				if (rx_ratelimit_admit(&a, &c, &lent, &why) !=
				    RX_ADMIT) {
					a.refused--; /* not B's refusal */
					continue;
				}
				now += rx_rng_next(&g) % (3 * NS_PER_S);
				struct rx_observation o = {RX_REJECTED, 0, now};
				rx_ratelimit_settle(&a, &lent, &o);
				continue;
			}
			CU_ASSERT_EQUAL_FATAL(
			    rx_ratelimit_admit(&a, &c, &t, &why),
			    rx_ratelimit_admit(&b, &c, &t, &why));
			struct rx_ratelimit_stats sa, sb;
			rx_ratelimit_stats(&a, now, &sa);
			rx_ratelimit_stats(&b, now, &sb);
			CU_ASSERT_EQUAL_FATAL(memcmp(&sa, &sb, sizeof(sa)), 0);
			CU_ASSERT_EQUAL_FATAL(a.units, b.units);
			CU_ASSERT_EQUAL_FATAL(rx_ratelimit_next_ns(&a, now),
					      rx_ratelimit_next_ns(&b, now));
		}
	}
}

static void test_other_verdicts_keep_the_token(void)
{
	for (int v = 0; v < RX_VERDICT_COUNT; v++) {
		struct rx_ratelimit r;
		struct rx_ticket t;
		struct rx_refusal why;
		struct rx_admit_ctx ctx = {NS_PER_S, NULL, false, 0, 0};
		init_rate(&r, 1, 1000, 1);
		CU_ASSERT_EQUAL(rx_ratelimit_admit(&r, &ctx, &t, &why),
				RX_ADMIT);
		struct rx_observation o = {(enum rx_verdict)v, 10, NS_PER_S};
		rx_ratelimit_settle(&r, &t, &o);
		CU_ASSERT_EQUAL(rx_ratelimit_admit(&r, &ctx, &t, &why),
				v == RX_REJECTED ? RX_ADMIT : RX_REFUSE);
	}
}

static void test_default_burst(void)
{
	struct rx_ratelimit r;
	init_rate(&r, 50, 1000, 0);
	CU_ASSERT_EQUAL(r.burst, 50);
	init_rate(&r, 30, 60000, 0);
	CU_ASSERT_EQUAL(r.burst, 1);
	init_rate(&r, 120, 60000, 0);
	CU_ASSERT_EQUAL(r.burst, 2);
	init_rate(&r, 1000000000, 1, 0);
	CU_ASSERT_EQUAL(r.burst, UINT64_C(1000000000000));
	init_rate(&r, 5, 1000, 3);
	CU_ASSERT_EQUAL(r.burst, 3);
	struct rx_ratelimit_config c;
	rx_ratelimit_config_default(&c);
	CU_ASSERT_EQUAL(c.tokens, 1);
	CU_ASSERT_EQUAL(c.period_ms, 1000);
	CU_ASSERT_EQUAL(c.burst, 0);
}

static void test_checks_and_parse(void)
{
	struct rx_ratelimit_config c = {1, 1000, 0};
	const char *why = NULL;
	uint64_t n = 0, p = 0;
	CU_ASSERT_EQUAL(rx_ratelimit_config_check(&c, &why), RX_OK);
	c.tokens = 0;
	CU_ASSERT_EQUAL(rx_ratelimit_config_check(&c, &why), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "tokens"));
	c.tokens = 1000000001;
	CU_ASSERT_EQUAL(rx_ratelimit_config_check(&c, NULL), RX_EINVAL);
	c.tokens = 1;
	c.period_ms = 0;
	CU_ASSERT_EQUAL(rx_ratelimit_config_check(&c, &why), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "period_ms"));
	c.period_ms = 3600001;
	CU_ASSERT_EQUAL(rx_ratelimit_config_check(&c, NULL), RX_EINVAL);
	c.period_ms = 3600000;
	c.burst = 2500000;
	CU_ASSERT_EQUAL(rx_ratelimit_config_check(&c, NULL), RX_OK);
	c.burst = 2500001;
	CU_ASSERT_EQUAL(rx_ratelimit_config_check(&c, &why), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "burst"));
	CU_ASSERT_EQUAL(rx_ratelimit_config_check(NULL, NULL), RX_EINVAL);

	CU_ASSERT_EQUAL(rx_ratelimit_parse_rate("50/s", &n, &p), RX_OK);
	CU_ASSERT(n == 50 && p == 1000);
	CU_ASSERT_EQUAL(rx_ratelimit_parse_rate("30/min", &n, &p), RX_OK);
	CU_ASSERT(n == 30 && p == 60000);
	CU_ASSERT_EQUAL(rx_ratelimit_parse_rate("1000000000/h", &n, &p), RX_OK);
	CU_ASSERT(n == 1000000000 && p == 3600000);
	static const char *const bad[] = {
	    "",	    "/s",     "0/s",	      "50",
	    "50/",  "50/sec", "50/m",	      "-5/s",
	    "5 /s", "5/s ",   "1000000001/s", "99999999999999999999999/s",
	    "50/S", "50/mins"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n = p = 7;
		CU_ASSERT_EQUAL(rx_ratelimit_parse_rate(bad[i], &n, &p),
				RX_EINVAL);
		CU_ASSERT(n == 7 && p == 7);
	}
	CU_ASSERT_EQUAL(rx_ratelimit_parse_rate(NULL, &n, &p), RX_EINVAL);
}

static void test_extreme_times(void)
{
	struct rx_ratelimit r;
	struct rx_refusal why;
	init_rate(&r, 1000000000, 1, 0);
	for (uint64_t i = 0; i < 1000; i++)
		CU_ASSERT_EQUAL(take(&r, 1, false, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(take(&r, UINT64_MAX - 1, false, &why), RX_ADMIT);
	struct rx_ratelimit_stats s;
	rx_ratelimit_stats(&r, UINT64_MAX, &s);
	CU_ASSERT_EQUAL(s.tokens, r.burst);
	init_rate(&r, 1, 3600000, 1);
	CU_ASSERT_EQUAL(take(&r, UINT64_MAX - 5, false, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(take(&r, UINT64_MAX, false, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(rx_ratelimit_next_ns(&r, UINT64_MAX), UINT64_MAX);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"paces exactly without drift", test_paces_exactly_without_drift},
	    {"hammering caller gets the rate",
	     test_hammering_caller_gets_the_rate},
	    {"retry-after and queue", test_retry_after_and_queue},
	    {"refund is exact and capped", test_refund_is_exact_and_capped},
	    {"other verdicts keep the token",
	     test_other_verdicts_keep_the_token},
	    {"default burst", test_default_burst},
	    {"checks and parse", test_checks_and_parse},
	    {"extreme times", test_extreme_times},
	    {NULL, NULL},
	};
	return rx_run_suite("ratelimit", tests);
}
