/*
 * test_retry.c - full-jitter backoff, the deadline check and the retry
 * budget (src/retry.c).
 *
 * Deterministic: a fake clock, seeded generators, no sleeping. Measured
 * figures are printed so docs can quote them: the mean of each backoff
 * against half its cap, and the retries a budget allowed against
 * ratio x first attempts + floor.
 */
#include <math.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix/error.h"
#include "resilix/retry.h"

#define MS RX_NS_PER_MS
#define NS_PER_S UINT64_C(1000000000)

/* --- schedule ------------------------------------------------------------ */

static void test_schedule_defaults_and_checks(void)
{
	struct rx_retry_config c;
	const char *why = NULL;
	rx_retry_config_default(&c);
	CU_ASSERT_EQUAL(c.max_attempts, 1);
	CU_ASSERT_EQUAL(c.base_ms, 100);
	CU_ASSERT_EQUAL(c.max_ms, 1000);
	CU_ASSERT_EQUAL(rx_retry_config_check(&c, &why), RX_OK);
	struct rx_retry_config bad[] = {c, c, c, c, c, c};
	bad[0].max_attempts = 0;
	bad[1].max_attempts = 11;
	bad[2].base_ms = 0;
	bad[3].base_ms = 60001;
	bad[4].max_ms = 99;
	bad[5].max_ms = 600001;
	for (size_t i = 0; i < 6; i++) {
		why = NULL;
		CU_ASSERT_EQUAL(rx_retry_config_check(&bad[i], &why),
				RX_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(why);
	}
	CU_ASSERT_EQUAL(rx_retry_config_check(NULL, NULL), RX_EINVAL);
}

/* Full jitter: every delay in [0, cap], the mean half the cap, and the
 * whole range used. */
static void test_full_jitter_mean_and_bound(void)
{
	struct rx_retry_config c;
	struct rx_rng g;
	rx_retry_config_default(&c);
	rx_rng_seed(&g, 6);
	static const uint64_t caps_ms[] = {100, 200, 400, 800, 1000, 1000};
	for (uint32_t n = 0; n < 6; n++) {
		uint64_t cap = caps_ms[n] * MS, lo = UINT64_MAX, hi = 0;
		double sum = 0.0;
		const int draws = 200000;
		for (int i = 0; i < draws; i++) {
			uint64_t d = rx_retry_backoff_ns(&c, n, &g);
			CU_ASSERT_FATAL(d <= cap);
			sum += (double)d;
			lo = d < lo ? d : lo;
			hi = d > hi ? d : hi;
		}
		double mean = sum / draws;
		printf("\n    retry %u: cap %llu ms, mean %.2f ms (%.4f of "
		       "the cap), max %.2f ms",
		       n, (unsigned long long)caps_ms[n], mean / 1e6,
		       mean / (double)cap, (double)hi / 1e6);
		CU_ASSERT(fabs(mean / (double)cap - 0.5) < 0.005);
		CU_ASSERT(lo < cap / 100);
		CU_ASSERT(hi > cap - cap / 100);
	}
	printf("\n");
}

static void test_cap_grows_and_saturates(void)
{
	struct rx_retry_config c = {3, 100, 1000};
	CU_ASSERT_EQUAL(rx_retry_backoff_ns(&c, 0, NULL), 50 * MS);
	CU_ASSERT_EQUAL(rx_retry_backoff_ns(&c, 1, NULL), 100 * MS);
	CU_ASSERT_EQUAL(rx_retry_backoff_ns(&c, 2, NULL), 200 * MS);
	CU_ASSERT_EQUAL(rx_retry_backoff_ns(&c, 3, NULL), 400 * MS);
	CU_ASSERT_EQUAL(rx_retry_backoff_ns(&c, 4, NULL), 500 * MS);
	CU_ASSERT_EQUAL(rx_retry_backoff_ns(&c, UINT32_MAX, NULL), 500 * MS);
	struct rx_retry_config wide = {10, 1, 600000};
	CU_ASSERT_EQUAL(rx_retry_backoff_ns(&wide, 100, NULL), 300000 * MS);
	struct rx_retry_config flat = {2, 250, 250};
	struct rx_rng g;
	rx_rng_seed(&g, 1);
	for (uint32_t n = 0; n < 40; n++)
		CU_ASSERT(rx_retry_backoff_ns(&flat, n, &g) <= 250 * MS);
}

static void test_deadline_fits(void)
{
	CU_ASSERT(rx_retry_fits(0, 5, UINT64_MAX));
	CU_ASSERT(rx_retry_fits(100, 10, 89));
	CU_ASSERT(!rx_retry_fits(100, 10, 90));
	CU_ASSERT(!rx_retry_fits(100, 10, 91));
	CU_ASSERT(!rx_retry_fits(100, 100, 0));
	CU_ASSERT(!rx_retry_fits(100, 200, 0));
	CU_ASSERT(!rx_retry_fits(UINT64_MAX, UINT64_MAX - 1, 5));
	CU_ASSERT(rx_retry_fits(UINT64_MAX, UINT64_MAX - 2, 1));
}

/* --- budget -------------------------------------------------------------- */

static void init_budget(struct rx_retry_budget *b, uint64_t ttl_ms,
			uint32_t per_s, uint32_t permille)
{
	struct rx_retry_budget_config c;
	rx_retry_budget_config_default(&c);
	c.ttl_ms = ttl_ms;
	c.min_retries_per_s = per_s;
	c.ratio_permille = permille;
	CU_ASSERT_EQUAL_FATAL(rx_retry_budget_init(b, &c), RX_OK);
}

static bool withdraw(struct rx_retry_budget *b, uint64_t now)
{
	struct rx_ticket t;
	struct rx_refusal why = {0};
	if (rx_retry_budget_withdraw(b, now, &t, &why) == RX_ADMIT)
		return true;
	CU_ASSERT_EQUAL(why.reason, RX_REASON_BUDGET_EXCEEDED);
	CU_ASSERT_EQUAL(why.retry_after_ms, 0);
	return false;
}

static void test_budget_defaults_and_checks(void)
{
	struct rx_retry_budget_config c;
	const char *why = NULL;
	rx_retry_budget_config_default(&c);
	CU_ASSERT_EQUAL(c.ttl_ms, 10000);
	CU_ASSERT_EQUAL(c.min_retries_per_s, 1);
	CU_ASSERT_EQUAL(c.ratio_permille, 100);
	CU_ASSERT_EQUAL(c.buckets, 10);
	CU_ASSERT_EQUAL(rx_retry_budget_config_check(&c, &why), RX_OK);
	struct rx_retry_budget_config bad[] = {c, c, c, c, c, c};
	bad[0].ttl_ms = 999;
	bad[1].ttl_ms = 60001;
	bad[2].min_retries_per_s = 1001;
	bad[3].ratio_permille = 1001;
	bad[4].buckets = 0;
	bad[5].buckets = RX_RETRY_BUDGET_BUCKETS_MAX + 1;
	for (size_t i = 0; i < 6; i++) {
		why = NULL;
		CU_ASSERT_EQUAL(rx_retry_budget_config_check(&bad[i], &why),
				RX_EINVAL);
		CU_ASSERT_PTR_NOT_NULL(why);
	}
	CU_ASSERT_EQUAL(rx_retry_budget_config_check(NULL, NULL), RX_EINVAL);
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_BUDGET_EXCEEDED),
			       "budget-exceeded");
	/* Existing names keep their spelling. */
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_REGISTRY_FULL),
			       "registry-full");
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_THROTTLED),
			       "throttled");
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_COUNT), "unknown");
}

/* A quiet process: no first attempts, only the floor, 1 a second over
 * 10 s = 10 retries, and 10 more once those have expired. */
static void test_quiet_process_gets_the_floor(void)
{
	struct rx_retry_budget b;
	init_budget(&b, 10000, 1, 100);
	uint64_t now = 100 * NS_PER_S;
	unsigned ok = 0;
	for (int i = 0; i < 30; i++)
		ok += withdraw(&b, now + (uint64_t)i * MS);
	CU_ASSERT_EQUAL(ok, 10);
	struct rx_retry_budget_stats s;
	rx_retry_budget_stats(&b, now, &s);
	CU_ASSERT_EQUAL(s.retries, 10);
	CU_ASSERT_EQUAL(s.refused, 20);
	CU_ASSERT_EQUAL(s.retries_available, 0);
	/* 11 s later every withdrawal has left the ring. */
	now += 11 * NS_PER_S;
	rx_retry_budget_stats(&b, now, &s);
	CU_ASSERT_EQUAL(s.retries_available, 10);
	ok = 0;
	for (int i = 0; i < 30; i++)
		ok += withdraw(&b, now);
	CU_ASSERT_EQUAL(ok, 10);
	/* Floor 0, ratio 0: never a retry. */
	init_budget(&b, 10000, 0, 0);
	for (int i = 0; i < 100; i++)
		rx_retry_budget_deposit(&b, now);
	CU_ASSERT(!withdraw(&b, now));
}

/* Every first attempt fails and wants a retry, 100 calls a second for
 * 10 minutes: the budget allows ratio x attempts + floor per ttl, so
 * 0.1 + 1 / 100 = 0.11 retries per attempt. */
static void test_budget_allows_ratio_plus_floor(void)
{
	static const uint32_t permille[] = {100, 200, 50};
	for (size_t k = 0; k < 3; k++) {
		struct rx_retry_budget b;
		init_budget(&b, 10000, 1, permille[k]);
		uint64_t now = 0, attempts = 0, retries = 0;
		for (int i = 0; i < 100 * 600; i++, now += 10 * MS) {
			rx_retry_budget_deposit(&b, now);
			attempts++;
			retries += withdraw(&b, now);
		}
		double per_attempt = (double)retries / (double)attempts;
		double want = permille[k] / 1000.0 + 10.0 / 1000.0;
		printf("\n    ratio %.2f, floor 1/s, 100 failing calls/s for "
		       "600 s: %llu retries, %.4f per attempt (expected "
		       "%.4f)",
		       permille[k] / 1000.0, (unsigned long long)retries,
		       per_attempt, want);
		CU_ASSERT(fabs(per_attempt - want) < 0.05 * want);
	}
	printf("\n");
}

/* The bound holds in every window the ring covers: at each successful
 * withdrawal, 1000 x retries <= reserve + ratio_permille x attempts over
 * the buckets the ring holds. Checked against a count kept by the test. */
static void test_budget_bound_holds_in_every_window(void)
{
	struct rx_retry_budget b;
	struct rx_rng g;
	init_budget(&b, 2000, 3, 150);
	rx_rng_seed(&g, 77);
	enum { STEPS = 20000 };
	static uint64_t at[STEPS];
	static bool is_retry[STEPS];
	uint64_t now = 0;
	int n = 0;
	for (int i = 0; i < STEPS; i++) {
		now += rx_rng_next(&g) % (30 * MS);
		if (rx_rng_next(&g) % 3) {
			rx_retry_budget_deposit(&b, now);
			at[n] = now;
			is_retry[n++] = false;
		} else if (withdraw(&b, now)) {
			at[n] = now;
			is_retry[n++] = true;
			/* Count what the ring covers: the epochs from
			 * current - buckets + 1 to current. */
			uint64_t e = now / b.bucket_ns;
			uint64_t first = e >= b.cfg.buckets - 1
					     ? e - (b.cfg.buckets - 1)
					     : 0;
			int64_t units = b.reserve;
			for (int j = n - 1; j >= 0; j--) {
				if (at[j] / b.bucket_ns < first)
					break;
				units += is_retry[j] ? -1000 : 150;
			}
			CU_ASSERT_FATAL(units >= 0);
		}
	}
}

/* withdraw then refund leaves the budget exactly as before (ADR-428),
 * with deposits interleaved, refunds at once, later, and after the
 * withdrawal's bucket expired: byte for byte the twin's. */
static void test_refund_leaves_no_trace(void)
{
	struct rx_rng g;
	rx_rng_seed(&g, 428);
	unsigned refunds = 0;
	for (int round = 0; round < 300; round++) {
		struct rx_retry_budget a, b;
		init_budget(&a, 1000 + rx_rng_next(&g) % 5000,
			    (uint32_t)(rx_rng_next(&g) % 5),
			    (uint32_t)(rx_rng_next(&g) % 400));
		b = a;
		uint64_t now = NS_PER_S;
		for (int step = 0; step < 300; step++) {
			now += rx_rng_next(&g) % (100 * MS);
			uint64_t r = rx_rng_next(&g) % 10;
			if (r < 5) {
				rx_retry_budget_deposit(&a, now);
				rx_retry_budget_deposit(&b, now);
			} else if (r < 8) {
				struct rx_ticket ta, tb;
				enum rx_decision da = rx_retry_budget_withdraw(
				    &a, now, &ta, NULL);
				enum rx_decision db = rx_retry_budget_withdraw(
				    &b, now, &tb, NULL);
				CU_ASSERT_EQUAL_FATAL(da, db);
			} else {
				/* A's alone: a withdrawal refunded, now or
				 * after some time. A refusal is real, and
				 * B sees it too. */
				struct rx_ticket t;
				if (rx_retry_budget_withdraw(
					&a, now, &t, NULL) != RX_ADMIT) {
					rx_retry_budget_withdraw(&b, now, &t,
								 NULL);
					continue;
				}
				if (rx_rng_next(&g) % 2)
					now += rx_rng_next(&g) % (8 * NS_PER_S);
				rx_retry_budget_refund(&a, &t);
				refunds++;
				/* b catches up with a's clock and ring. */
				struct rx_retry_budget_stats s;
				rx_retry_budget_stats(&b, now, &s);
				rx_retry_budget_deposit(&a, now);
				rx_retry_budget_deposit(&b, now);
			}
			CU_ASSERT_EQUAL_FATAL(memcmp(&a, &b, sizeof(a)), 0);
		}
	}
	CU_ASSERT(refunds > 10000);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"schedule defaults and checks", test_schedule_defaults_and_checks},
	    {"full jitter mean and bound", test_full_jitter_mean_and_bound},
	    {"cap grows and saturates", test_cap_grows_and_saturates},
	    {"deadline fits", test_deadline_fits},
	    {"budget defaults and checks", test_budget_defaults_and_checks},
	    {"quiet process gets the floor", test_quiet_process_gets_the_floor},
	    {"budget allows ratio plus floor",
	     test_budget_allows_ratio_plus_floor},
	    {"budget bound holds in every window",
	     test_budget_bound_holds_in_every_window},
	    {"refund leaves no trace", test_refund_leaves_no_trace},
	    {NULL, NULL},
	};
	return rx_run_suite("retry", tests);
}
