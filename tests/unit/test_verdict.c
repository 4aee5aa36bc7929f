/*
 * test_verdict.c - classification of HTTP statuses and errnos into
 * verdicts (docs/design.md's verdict table, ADR-003), the names of verdicts and
 * reasons, rx_strerror, and the SplitMix64 generator.
 */
#include <errno.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "resilix.h"

static void test_http_success_ranges(void)
{
	for (int s = 200; s <= 399; s++)
		CU_ASSERT_EQUAL(rx_verdict_from_http(s), RX_SUCCESS);
}

static void test_http_4xx(void)
{
	for (int s = 400; s <= 499; s++) {
		enum rx_verdict want = RX_ANSWERED;
		if (s == 408)
			want = RX_TIMEOUT;
		else if (s == 429)
			want = RX_OVERLOAD;
		CU_ASSERT_EQUAL(rx_verdict_from_http(s), want);
	}
}

static void test_http_5xx(void)
{
	CU_ASSERT_EQUAL(rx_verdict_from_http(500), RX_TRANSIENT);
	CU_ASSERT_EQUAL(rx_verdict_from_http(502), RX_TRANSIENT);
	CU_ASSERT_EQUAL(rx_verdict_from_http(503), RX_OVERLOAD);
	CU_ASSERT_EQUAL(rx_verdict_from_http(504), RX_TIMEOUT);
	CU_ASSERT_EQUAL(rx_verdict_from_http(501), RX_TRANSIENT);
	CU_ASSERT_EQUAL(rx_verdict_from_http(599), RX_TRANSIENT);
}

static void test_http_out_of_range_is_transient(void)
{
	const int odd[] = {-1, 0, 99, 100, 101, 199, 600, 999, 1000000};
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		CU_ASSERT_EQUAL(rx_verdict_from_http(odd[i]), RX_TRANSIENT);
}

static void test_errno_connect(void)
{
	CU_ASSERT_EQUAL(rx_verdict_from_errno(ETIMEDOUT, RX_PHASE_CONNECT),
			RX_TIMEOUT);
	const int t[] = {ECONNREFUSED, EHOSTUNREACH, ENETUNREACH, ECONNRESET,
			 EPIPE,	       EACCES,	     0,		  99999};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		CU_ASSERT_EQUAL(rx_verdict_from_errno(t[i], RX_PHASE_CONNECT),
				RX_TRANSIENT);
}

static void test_errno_io(void)
{
	CU_ASSERT_EQUAL(rx_verdict_from_errno(ETIMEDOUT, RX_PHASE_IO),
			RX_TIMEOUT);
	const int t[] = {ECONNRESET, EPIPE, ECONNREFUSED, ENETUNREACH, EIO};
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		CU_ASSERT_EQUAL(rx_verdict_from_errno(t[i], RX_PHASE_IO),
				RX_TRANSIENT);
}

static void test_is_failure(void)
{
	CU_ASSERT_FALSE(rx_verdict_is_failure(RX_SUCCESS));
	CU_ASSERT_FALSE(rx_verdict_is_failure(RX_ANSWERED));
	CU_ASSERT_FALSE(rx_verdict_is_failure(RX_OVERLOAD));
	CU_ASSERT_TRUE(rx_verdict_is_failure(RX_TRANSIENT));
	CU_ASSERT_TRUE(rx_verdict_is_failure(RX_TIMEOUT));
	CU_ASSERT_FALSE(rx_verdict_is_failure(RX_REJECTED));
}

static void test_names(void)
{
	CU_ASSERT_STRING_EQUAL(rx_verdict_name(RX_SUCCESS), "success");
	CU_ASSERT_STRING_EQUAL(rx_verdict_name(RX_ANSWERED), "answered");
	CU_ASSERT_STRING_EQUAL(rx_verdict_name(RX_OVERLOAD), "overload");
	CU_ASSERT_STRING_EQUAL(rx_verdict_name(RX_TRANSIENT), "transient");
	CU_ASSERT_STRING_EQUAL(rx_verdict_name(RX_TIMEOUT), "timeout");
	CU_ASSERT_STRING_EQUAL(rx_verdict_name(RX_REJECTED), "rejected");
	CU_ASSERT_STRING_EQUAL(rx_verdict_name(RX_VERDICT_COUNT), "unknown");
	CU_ASSERT_STRING_EQUAL(rx_verdict_name((enum rx_verdict) - 1),
			       "unknown");
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_CIRCUIT_OPEN),
			       "circuit-open");
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_HALF_OPEN_BUSY),
			       "half-open-busy");
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_LIMITER_FULL),
			       "limiter-full");
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_COUNT), "unknown");
	for (int r = 0; r < RX_REASON_COUNT; r++)
		CU_ASSERT_STRING_NOT_EQUAL(rx_reason_name(r), "unknown");
	CU_ASSERT_STRING_EQUAL(rx_breaker_state_name(RX_BREAKER_HALF_OPEN),
			       "half-open");
	CU_ASSERT_STRING_EQUAL(rx_breaker_state_name(99), "unknown");
}

static void test_strerror(void)
{
	const int codes[] = {RX_OK,	  RX_EINVAL,   RX_ENOSPC,
			     RX_ECORRUPT, RX_EVERSION, RX_ENOMEM};
	for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		CU_ASSERT_PTR_NOT_NULL(rx_strerror(codes[i]));
		CU_ASSERT_STRING_NOT_EQUAL(rx_strerror(codes[i]),
					   "unknown error");
	}
	CU_ASSERT_STRING_EQUAL(rx_strerror(-1000), "unknown error");
	CU_ASSERT_STRING_EQUAL(rx_strerror(7), "unknown error");
}

static void test_rng_deterministic(void)
{
	struct rx_rng a, b;
	rx_rng_seed(&a, 42);
	rx_rng_seed(&b, 42);
	for (int i = 0; i < 1000; i++)
		CU_ASSERT_EQUAL(rx_rng_next(&a), rx_rng_next(&b));
	/* Reference value of SplitMix64 from seed 0 (Vigna's splitmix64.c). */
	rx_rng_seed(&a, 0);
	CU_ASSERT_EQUAL(rx_rng_next(&a), UINT64_C(0xe220a8397b1dcdaf));
	rx_rng_seed(&a, 7);
	for (int i = 0; i < 10000; i++) {
		double u = rx_rng_unit(&a);
		CU_ASSERT(u >= 0.0 && u < 1.0);
	}
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"http 2xx and 3xx are success", test_http_success_ranges},
	    {"http 4xx answered but 408 and 429", test_http_4xx},
	    {"http 5xx", test_http_5xx},
	    {"http out of range is transient",
	     test_http_out_of_range_is_transient},
	    {"errno at connect", test_errno_connect},
	    {"errno at io", test_errno_io},
	    {"failure verdicts", test_is_failure},
	    {"names", test_names},
	    {"strerror", test_strerror},
	    {"rng deterministic", test_rng_deterministic},
	    {NULL, NULL},
	};
	return rx_run_suite("verdict", tests);
}
