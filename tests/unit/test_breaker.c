/*
 * test_breaker.c - the circuit breaker: every state transition, each trip
 * condition exactly at its boundary, the window's two bounds, starvation,
 * half-open probes and their self-heal, late settlements, a clock that
 * goes back, and RX_REJECTED leaving no trace (ADR-007).
 */
#include <math.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix.h"

#define MS RX_NS_PER_MS
#define MAXW 256

struct fx {
	struct rx_breaker b;
	struct rx_window_slot slots[MAXW];
	struct fake_clock clk;
};

/* A configuration where only what a test sets can trip. */
static struct rx_breaker_config quiet(void)
{
	struct rx_breaker_config c;
	rx_breaker_config_default(&c);
	c.consecutive_backstop = 0;
	c.window_max_age_ms = 0;
	c.min_calls = 10;
	c.window_calls = 10;
	return c;
}

static void fx_init(struct fx *f, const struct rx_breaker_config *c)
{
	memset(f, 0, sizeof(*f));
	f->clk.now_ns = 1000 * MS;
	CU_ASSERT_FATAL(c->window_calls <= MAXW);
	CU_ASSERT_EQUAL_FATAL(rx_breaker_init(&f->b, c, f->slots), RX_OK);
}

static enum rx_decision admit(struct fx *f, struct rx_ticket *t,
			      struct rx_refusal *why)
{
	struct rx_admit_ctx ctx = {.now_ns = f->clk.now_ns};
	struct rx_refusal dummy;
	return rx_breaker_admit(&f->b, &ctx, t, why ? why : &dummy);
}

static void settle(struct fx *f, const struct rx_ticket *t, enum rx_verdict v,
		   uint64_t latency_ms)
{
	struct rx_observation o = {.verdict = v,
				   .latency_us = latency_ms * 1000,
				   .now_ns = f->clk.now_ns};
	rx_breaker_settle(&f->b, t, &o);
}

/* One whole call, 1 ms after the previous one; returns admit's decision. */
static enum rx_decision call(struct fx *f, enum rx_verdict v,
			     uint64_t latency_ms)
{
	struct rx_ticket t;
	fake_clock_advance_ms(&f->clk, 1);
	enum rx_decision d = admit(f, &t, NULL);
	if (d == RX_ADMIT)
		settle(f, &t, v, latency_ms);
	return d;
}

static struct rx_breaker_stats stats(const struct fx *f)
{
	struct rx_breaker_stats s;
	rx_breaker_stats(&f->b, f->clk.now_ns, &s);
	return s;
}

static enum rx_breaker_state state(const struct fx *f)
{
	return f->b.state;
}

/* Trip a quiet breaker with failures; leaves it open. */
static void force_open(struct fx *f)
{
	for (int i = 0; i < 1000 && state(f) == RX_BREAKER_CLOSED; i++)
		call(f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL_FATAL(state(f), RX_BREAKER_OPEN);
}

static void test_defaults(void)
{
	struct rx_breaker_config c;
	rx_breaker_config_default(&c);
	CU_ASSERT_DOUBLE_EQUAL(c.failure_rate, 0.5, 0);
	CU_ASSERT_DOUBLE_EQUAL(c.slow_call_rate, 0.5, 0);
	CU_ASSERT_EQUAL(c.slow_call_ms, 0);
	CU_ASSERT_EQUAL(c.consecutive_backstop, 5);
	CU_ASSERT_EQUAL(c.min_calls, 20);
	CU_ASSERT_EQUAL(c.window_calls, 100);
	CU_ASSERT_EQUAL(c.window_max_age_ms, 60000);
	CU_ASSERT_EQUAL(c.open_ms, 5000);
	CU_ASSERT_EQUAL(c.half_open_probes, 1);
	CU_ASSERT_EQUAL(rx_breaker_config_check(&c, NULL), RX_OK);
}

static void expect_bad(struct rx_breaker_config c, const char *field)
{
	const char *why = NULL;
	CU_ASSERT_EQUAL(rx_breaker_config_check(&c, &why), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(why);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, field));
}

static void test_config_check(void)
{
	struct rx_breaker_config c;
	rx_breaker_config_default(&c);
	const double bad_rates[] = {NAN, INFINITY, -INFINITY, -0.01, 1.01};
	for (size_t i = 0; i < 5; i++) {
		struct rx_breaker_config x = c;
		x.failure_rate = bad_rates[i];
		expect_bad(x, "failure_rate");
		x = c;
		x.slow_call_rate = bad_rates[i];
		expect_bad(x, "slow_call_rate");
	}
	struct rx_breaker_config x = c;
	x.min_calls = 0;
	expect_bad(x, "min_calls");
	x = c;
	x.window_calls = 0;
	expect_bad(x, "window_calls");
	x = c;
	x.window_calls = 100001;
	expect_bad(x, "window_calls");
	x = c;
	x.open_ms = 0;
	expect_bad(x, "open_ms");
	x = c;
	x.open_ms = 86400001;
	expect_bad(x, "open_ms");
	x = c;
	x.half_open_probes = 0;
	expect_bad(x, "half_open_probes");
	x = c;
	x.half_open_probes = 1001;
	expect_bad(x, "half_open_probes");
	x = c;
	x.slow_call_ms = 86400001;
	expect_bad(x, "slow_call_ms");
	x = c;
	x.window_max_age_ms = 86400001;
	expect_bad(x, "window_max_age_ms");
	x = c;
	x.consecutive_backstop = 100001;
	expect_bad(x, "consecutive_backstop");
	/* Boundaries that are accepted. */
	x = c;
	x.failure_rate = 0;
	x.slow_call_rate = 1;
	x.min_calls = 100000; /* above window_calls: clamped, not rejected */
	CU_ASSERT_EQUAL(rx_breaker_config_check(&x, NULL), RX_OK);
	CU_ASSERT_EQUAL(rx_breaker_config_check(NULL, NULL), RX_EINVAL);
	struct rx_breaker b;
	struct rx_window_slot s[1];
	x = c;
	x.failure_rate = NAN;
	CU_ASSERT_EQUAL(rx_breaker_init(&b, &x, s), RX_EINVAL);
}

static void test_failure_rate_boundary(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	/* S F S F ... : exactly 5/10 = 0.5 does not trip. */
	for (int i = 0; i < 10; i++)
		call(&f, i % 2 ? RX_TRANSIENT : RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_DOUBLE_EQUAL(stats(&f).failure_rate, 0.5, 1e-12);
	/* The next failure evicts a success: 6/10 trips. */
	call(&f, RX_TIMEOUT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(stats(&f).transitions, 1);
}

static void test_min_calls_boundary(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.window_calls = 20;
	fx_init(&f, &c);
	for (int i = 0; i < 9; i++)
		call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED); /* n = 9 < 10 */
	call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_slow_rate_boundary(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.slow_call_ms = 100;
	fx_init(&f, &c);
	/* 99 ms is not slow, 100 ms is (latency >= threshold). */
	for (int i = 0; i < 10; i++)
		call(&f, RX_SUCCESS, i % 2 ? 100 : 99);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(stats(&f).window_slow, 5);
	call(&f, RX_SUCCESS, 100);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_slow_off_without_threshold(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.slow_call_rate = 0;
	fx_init(&f, &c);
	for (int i = 0; i < 100; i++)
		call(&f, RX_SUCCESS, 1000000);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(stats(&f).window_slow, 0);
}

static void test_backstop_boundary(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.failure_rate = 1; /* only the backstop can trip */
	c.consecutive_backstop = 3;
	fx_init(&f, &c);
	call(&f, RX_TRANSIENT, 1);
	call(&f, RX_TIMEOUT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(stats(&f).consecutive_failures, 2);
	call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_dead_upstream_low_traffic(void)
{
	struct fx f;
	struct rx_breaker_config c;
	rx_breaker_config_default(&c); /* backstop 5, min 20, max age 60 s */
	fx_init(&f, &c);
	/* One call every two minutes: the window never holds two. */
	for (int i = 0; i < 4; i++) {
		fake_clock_advance_ms(&f.clk, 120000);
		call(&f, RX_TRANSIENT, 1);
		CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	}
	fake_clock_advance_ms(&f.clk, 120000);
	call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_resets_of_consecutive_count(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.failure_rate = 1;
	c.consecutive_backstop = 3;
	fx_init(&f, &c);
	call(&f, RX_TRANSIENT, 1);
	call(&f, RX_TRANSIENT, 1);
	call(&f, RX_SUCCESS, 1);
	call(&f, RX_TRANSIENT, 1);
	call(&f, RX_TRANSIENT, 1);
	call(&f, RX_ANSWERED, 1);
	call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(stats(&f).consecutive_failures, 1);
	/* Overload is not a failure but does not reset the count either. */
	call(&f, RX_OVERLOAD, 1);
	CU_ASSERT_EQUAL(stats(&f).consecutive_failures, 1);
	call(&f, RX_TRANSIENT, 1);
	call(&f, RX_OVERLOAD, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	call(&f, RX_TIMEOUT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_4xx_never_trips(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.failure_rate = 0;
	c.consecutive_backstop = 1;
	c.min_calls = 1;
	fx_init(&f, &c);
	for (int i = 0; i < 500; i++) {
		int status = 400 + i % 100;
		if (status == 408 || status == 429)
			continue;
		CU_ASSERT_EQUAL(call(&f, rx_verdict_from_http(status), 1),
				RX_ADMIT);
	}
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(stats(&f).window_failures, 0);
}

static void test_overload_not_failure(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.failure_rate = 0;
	c.consecutive_backstop = 1;
	c.min_calls = 1;
	fx_init(&f, &c);
	for (int i = 0; i < 100; i++) {
		call(&f, rx_verdict_from_http(429), 1);
		call(&f, rx_verdict_from_http(503), 1);
	}
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(stats(&f).window_count, 10);
	CU_ASSERT_EQUAL(stats(&f).window_failures, 0);
}

static void test_rate_zero_and_one(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.failure_rate = 0;
	fx_init(&f, &c);
	for (int i = 0; i < 9; i++)
		call(&f, RX_SUCCESS, 1);
	call(&f, RX_TRANSIENT, 1); /* 1/10 > 0 */
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);

	c = quiet();
	c.failure_rate = 1;
	c.slow_call_ms = 1;
	c.slow_call_rate = 1;
	fx_init(&f, &c);
	for (int i = 0; i < 100; i++)
		call(&f, RX_TRANSIENT, 50);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_DOUBLE_EQUAL(stats(&f).failure_rate, 1.0, 0);
	CU_ASSERT_DOUBLE_EQUAL(stats(&f).slow_call_rate, 1.0, 0);
}

static void test_window_of_one(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.window_calls = 1;
	c.min_calls = 1;
	fx_init(&f, &c);
	call(&f, RX_SUCCESS, 1);
	call(&f, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(stats(&f).window_count, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_min_calls_clamped_to_window(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.window_calls = 5;
	c.min_calls = 50;
	fx_init(&f, &c);
	CU_ASSERT_EQUAL(f.b.min_calls, 5);
	call(&f, RX_TRANSIENT, 1);
	call(&f, RX_TRANSIENT, 1);
	call(&f, RX_SUCCESS, 1);
	call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED); /* n = 4 < 5 */
	call(&f, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN); /* 3/5 > 0.5 */
}

static void test_open_refuses_with_retry_after(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	force_open(&f);
	struct rx_ticket t;
	struct rx_refusal why;
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_CIRCUIT_OPEN);
	CU_ASSERT_EQUAL(why.retry_after_ms, 5000);
	CU_ASSERT_EQUAL(stats(&f).open_remaining_ms, 5000);
	fake_clock_advance_ms(&f.clk, 1000);
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.retry_after_ms, 4000);
	f.clk.now_ns += 3999 * MS + MS / 2; /* 0.5 ms left rounds up */
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.retry_after_ms, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_open_to_half_open_to_closed(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	/* Stats do not move the state; the admit does (lazily). */
	CU_ASSERT_EQUAL(stats(&f).state, RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(stats(&f).open_remaining_ms, 0);
	struct rx_ticket probe;
	CU_ASSERT_EQUAL(admit(&f, &probe, NULL), RX_ADMIT);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_HALF_OPEN);
	CU_ASSERT_EQUAL(stats(&f).probes_in_flight, 1);
	settle(&f, &probe, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	struct rx_breaker_stats s = stats(&f);
	CU_ASSERT_EQUAL(s.window_count, 0);
	CU_ASSERT_EQUAL(s.consecutive_failures, 0);
	CU_ASSERT_EQUAL(s.probes_in_flight, 0);
	CU_ASSERT_EQUAL(s.transitions, 3);
	/* Closed again: a fresh window must fill before rates decide. */
	for (int i = 0; i < 9; i++)
		call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
}

static void test_answered_probe_closes(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket probe;
	CU_ASSERT_EQUAL(admit(&f, &probe, NULL), RX_ADMIT);
	settle(&f, &probe, RX_ANSWERED, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
}

static void test_failed_probe_reopens_with_empty_window(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.window_max_age_ms = 1000; /* the window empties while open */
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	CU_ASSERT_EQUAL(stats(&f).window_count, 0);
	struct rx_ticket probe;
	CU_ASSERT_EQUAL(admit(&f, &probe, NULL), RX_ADMIT);
	settle(&f, &probe, RX_TIMEOUT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(stats(&f).open_remaining_ms, 5000);
	CU_ASSERT_EQUAL(stats(&f).transitions, 3);
	struct rx_refusal why;
	CU_ASSERT_EQUAL(admit(&f, &probe, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_CIRCUIT_OPEN);
}

static void test_slow_probe_reopens(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.slow_call_ms = 100;
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket probe;
	CU_ASSERT_EQUAL(admit(&f, &probe, NULL), RX_ADMIT);
	settle(&f, &probe, RX_SUCCESS, 100);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

/* A call that waited on purpose (RX_LATENCY_NONE, ADR-650): never slow,
 * its verdict counts - a success closes a half-open breaker, a failure
 * is one. */
static void settle_untimed(struct fx *f, const struct rx_ticket *t,
			   enum rx_verdict v)
{
	struct rx_observation o = {.verdict = v,
				   .latency_us = RX_LATENCY_NONE,
				   .now_ns = f->clk.now_ns};
	rx_breaker_settle(&f->b, t, &o);
}

static void test_untimed_never_slow(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	struct rx_ticket t;
	c.slow_call_ms = 100;
	fx_init(&f, &c);
	for (int i = 0; i < 30; i++) {
		fake_clock_advance_ms(&f.clk, 1);
		CU_ASSERT_EQUAL_FATAL(admit(&f, &t, NULL), RX_ADMIT);
		settle_untimed(&f, &t, RX_SUCCESS);
	}
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(stats(&f).window_slow, 0);
	CU_ASSERT(stats(&f).window_count > 0);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	CU_ASSERT_EQUAL(admit(&f, &t, NULL), RX_ADMIT);
	settle_untimed(&f, &t, RX_SUCCESS);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	CU_ASSERT_EQUAL(admit(&f, &t, NULL), RX_ADMIT);
	settle_untimed(&f, &t, RX_TRANSIENT);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_exactly_one_probe(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket t[10];
	struct rx_refusal why;
	int admitted = 0;
	for (int i = 0; i < 10; i++) {
		enum rx_decision d = admit(&f, &t[i], &why);
		if (d == RX_ADMIT) {
			admitted++;
		} else {
			CU_ASSERT_EQUAL(d, RX_REFUSE);
			CU_ASSERT_EQUAL(why.reason, RX_REASON_HALF_OPEN_BUSY);
		}
	}
	CU_ASSERT_EQUAL(admitted, 1);
	CU_ASSERT_EQUAL(stats(&f).probes_in_flight, 1);
}

static void test_several_probes_first_decides(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.half_open_probes = 3;
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket t[4];
	struct rx_refusal why;
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(admit(&f, &t[i], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(admit(&f, &t[3], &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_HALF_OPEN_BUSY);
	settle(&f, &t[1], RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	/* The other probes are late now: their failures are not evidence. */
	settle(&f, &t[0], RX_TRANSIENT, 1);
	settle(&f, &t[2], RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(stats(&f).window_count, 0);
	CU_ASSERT_EQUAL(stats(&f).consecutive_failures, 0);
}

static void test_probe_self_heal(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket lost, t;
	struct rx_refusal why;
	CU_ASSERT_EQUAL(admit(&f, &lost, NULL), RX_ADMIT);
	fake_clock_advance_ms(&f.clk, 4999);
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_HALF_OPEN_BUSY);
	fake_clock_advance_ms(&f.clk, 1);
	struct rx_ticket fresh;
	CU_ASSERT_EQUAL(admit(&f, &fresh, NULL), RX_ADMIT);
	CU_ASSERT_EQUAL(stats(&f).probes_in_flight, 1);
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	/* The lost probe turns up: it neither reopens nor frees a slot. */
	settle(&f, &lost, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_HALF_OPEN);
	CU_ASSERT_EQUAL(stats(&f).probes_in_flight, 1);
	settle(&f, &fresh, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
}

/*
 * A probe with a deadline keeps its slot past open_ms, until the deadline
 * (no second probe reaches the upstream), and is a timeout from then on:
 * the next admit finds the circuit reopened at the deadline, and the
 * probe's late answer is no evidence (ADR-381).
 */
static void test_probe_with_deadline_keeps_its_slot(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.call_timeout_ms = 12000; /* longer than open_ms, 5000 */
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket probe, t;
	struct rx_refusal why;
	CU_ASSERT_EQUAL(admit(&f, &probe, NULL), RX_ADMIT);
	uint64_t transitions = f.b.transitions;
	/* Past open_ms: no self-heal, the probe still holds the slot. */
	fake_clock_advance_ms(&f.clk, 11999);
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_HALF_OPEN_BUSY);
	CU_ASSERT_EQUAL(stats(&f).probes_in_flight, 1);
	/* At its deadline it is a timeout: reopened from that moment. */
	fake_clock_advance_ms(&f.clk, 1);
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_CIRCUIT_OPEN);
	CU_ASSERT_EQUAL(why.retry_after_ms, 5000);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(f.b.transitions, transitions + 1);
	/* The late answer changes nothing. */
	settle(&f, &probe, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
	/* Noticed late (here 3 s after the deadline), the open period still
	 * runs from the deadline: the next probe goes 2 s later. */
	fake_clock_advance_ms(&f.clk, 3000);
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.retry_after_ms, 2000);
	fake_clock_advance_ms(&f.clk, 2000);
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_HALF_OPEN);
	settle(&f, &t, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
}

/* Noticed long after the deadline - past the open period that followed
 * it - the next admit is the new probe at once. */
static void test_probe_deadline_noticed_late(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.call_timeout_ms = 1000; /* shorter than open_ms, 5000 */
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket probe, t;
	CU_ASSERT_EQUAL(admit(&f, &probe, NULL), RX_ADMIT);
	fake_clock_advance_ms(&f.clk, 999);
	CU_ASSERT_EQUAL(admit(&f, &t, NULL), RX_REFUSE);
	fake_clock_advance_ms(&f.clk, 1 + 5000);
	CU_ASSERT_EQUAL(admit(&f, &t, NULL), RX_ADMIT);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_HALF_OPEN);
	CU_ASSERT_EQUAL(stats(&f).probes_in_flight, 1);
	settle(&f, &probe, RX_SUCCESS, 1); /* late: no evidence */
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_HALF_OPEN);
	settle(&f, &t, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_old_failures_before_idle_do_not_decide(void)
{
	struct fx f;
	struct rx_breaker_config c;
	rx_breaker_config_default(&c);
	c.consecutive_backstop = 0;
	fx_init(&f, &c);
	for (int i = 0; i < 20; i++)
		call(&f, i % 2 ? RX_TRANSIENT : RX_SUCCESS, 1); /* 50 % */
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	fake_clock_advance_ms(&f.clk, 61000);
	CU_ASSERT_EQUAL(stats(&f).window_count, 0);
	/* Counting the old ten, one failure today would make 11/21. */
	call(&f, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(stats(&f).window_count, 1);
	CU_ASSERT_EQUAL(stats(&f).window_failures, 1);
}

static void test_starvation_widens_max_age(void)
{
	struct fx f;
	struct rx_breaker_config c;
	rx_breaker_config_default(&c);
	c.window_max_age_ms = 1000;
	fx_init(&f, &c);
	CU_ASSERT_EQUAL(stats(&f).effective_max_age_ms, 1000);
	c.slow_call_ms = 100; /* 20 x 100 ms = 2000 ms > 1000 ms */
	fx_init(&f, &c);
	CU_ASSERT_EQUAL(stats(&f).effective_max_age_ms, 2000);
	c.slow_call_ms = 50; /* 20 x 50 = 1000: already enough */
	fx_init(&f, &c);
	CU_ASSERT_EQUAL(stats(&f).effective_max_age_ms, 1000);
	c.window_max_age_ms = 0; /* no age bound: nothing to widen */
	c.slow_call_ms = 100;
	fx_init(&f, &c);
	CU_ASSERT_EQUAL(stats(&f).effective_max_age_ms, 0);
}

static void test_starved_window_decides_on_five(void)
{
	struct fx f;
	struct rx_breaker_config c;
	rx_breaker_config_default(&c);
	c.consecutive_backstop = 0;
	c.window_max_age_ms = 10000; /* holds ten calls at one a second */
	fx_init(&f, &c);
	/* Before any age eviction, n < min_calls never decides. */
	for (int i = 0; i < 10; i++) {
		fake_clock_advance_ms(&f.clk, 999);
		call(&f, i < 6 ? RX_TRANSIENT : RX_SUCCESS, 1);
	}
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	CU_ASSERT_FALSE(stats(&f).starved);
	/* Now samples age out with n < 20: starved, decide on the window. */
	fake_clock_advance_ms(&f.clk, 1000);
	CU_ASSERT_TRUE(stats(&f).starved);
	call(&f, RX_SUCCESS, 1); /* one F aged out: 5 F of 10 */
	CU_ASSERT_EQUAL(stats(&f).window_count, 10);
	CU_ASSERT_EQUAL(stats(&f).window_failures, 5);
	CU_ASSERT_TRUE(stats(&f).starved);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	/* From here every call fails; the first 6 of 10 trips. */
	int calls = 0;
	while (state(&f) == RX_BREAKER_CLOSED && calls < 20) {
		fake_clock_advance_ms(&f.clk, 999);
		call(&f, RX_TRANSIENT, 1);
		calls++;
	}
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(f.b.window.count, 10);
	CU_ASSERT_EQUAL(f.b.window.failures, 6);
}

static void test_starved_floor_is_five(void)
{
	struct fx f;
	struct rx_breaker_config c;
	rx_breaker_config_default(&c);
	c.consecutive_backstop = 0;
	c.window_max_age_ms = 3500; /* holds four calls at one a second */
	fx_init(&f, &c);
	for (int i = 0; i < 30; i++) {
		fake_clock_advance_ms(&f.clk, 999);
		call(&f, RX_TRANSIENT, 1);
	}
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED); /* 4 < the floor */
	CU_ASSERT_EQUAL(stats(&f).window_count, 4);
	CU_ASSERT_TRUE(stats(&f).starved);
	/* An age that holds exactly five: now the window decides. */
	c.window_max_age_ms = 4500;
	fx_init(&f, &c);
	for (int i = 0; i < 30 && state(&f) == RX_BREAKER_CLOSED; i++) {
		fake_clock_advance_ms(&f.clk, 999);
		call(&f, RX_TRANSIENT, 1);
	}
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
}

static void test_late_settlement_not_evidence(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	struct rx_ticket old;
	CU_ASSERT_EQUAL(admit(&f, &old, NULL), RX_ADMIT);
	force_open(&f);
	uint64_t tr = stats(&f).transitions;
	/* Admitted while closed, ends while open: ignored. */
	settle(&f, &old, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(stats(&f).transitions, tr);
	/* Cycle back to closed; the old ticket is still not evidence. */
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket probe;
	CU_ASSERT_EQUAL(admit(&f, &probe, NULL), RX_ADMIT);
	settle(&f, &old, RX_TRANSIENT, 1); /* not a probe of this half-open */
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_HALF_OPEN);
	CU_ASSERT_EQUAL(stats(&f).probes_in_flight, 1);
	settle(&f, &probe, RX_SUCCESS, 1); /* current probe: counts */
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	settle(&f, &old, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(stats(&f).window_count, 0);
	CU_ASSERT_EQUAL(stats(&f).consecutive_failures, 0);
}

static void test_backwards_clock(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.window_max_age_ms = 1000;
	fx_init(&f, &c);
	f.clk.now_ns = 100000 * MS;
	force_open(&f);
	uint64_t opened = f.clk.now_ns;
	struct rx_ticket t;
	struct rx_refusal why;
	f.clk.now_ns = 5 * MS; /* the clock jumps back */
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.retry_after_ms, 5000);
	CU_ASSERT_EQUAL(f.b.last_now_ns, opened);
	CU_ASSERT_EQUAL(stats(&f).open_remaining_ms, 5000);
	/* Time resumes from the latest reading, not from the jump. */
	f.clk.now_ns = opened + 5000 * MS;
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_ADMIT);
	settle(&f, &t, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_CLOSED);
	/* A settlement stamped in the past lands at the latest time. */
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_ADMIT);
	f.clk.now_ns = 1;
	settle(&f, &t, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(rx_window_slots(&f.b.window)[f.b.window.tail].t_ns,
			opened + 5000 * MS);
	CU_ASSERT_EQUAL(stats(&f).window_count, 1);
}

static void test_saturating_times(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	c.open_ms = 86400000;
	fx_init(&f, &c);
	f.clk.now_ns = UINT64_MAX - 1000;
	for (int i = 0; i < 10; i++) {
		struct rx_ticket t;
		CU_ASSERT_EQUAL(admit(&f, &t, NULL), RX_ADMIT);
		settle(&f, &t, RX_TRANSIENT, UINT64_MAX / 1000);
	}
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_OPEN);
	struct rx_ticket t;
	struct rx_refusal why;
	f.clk.now_ns = UINT64_MAX - 500; /* the open end saturates */
	CU_ASSERT_EQUAL(admit(&f, &t, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.retry_after_ms, 1);
	CU_ASSERT_EQUAL(stats(&f).open_remaining_ms, 1);
}

static void assert_same_stats(const struct fx *a, const struct fx *b)
{
	struct rx_breaker_stats sa = stats(a), sb = stats(b);
	CU_ASSERT_EQUAL(sa.state, sb.state);
	CU_ASSERT_EQUAL(sa.window_count, sb.window_count);
	CU_ASSERT_EQUAL(sa.window_failures, sb.window_failures);
	CU_ASSERT_EQUAL(sa.window_slow, sb.window_slow);
	CU_ASSERT_EQUAL(sa.consecutive_failures, sb.consecutive_failures);
	CU_ASSERT_EQUAL(sa.probes_in_flight, sb.probes_in_flight);
	CU_ASSERT_EQUAL(sa.open_remaining_ms, sb.open_remaining_ms);
	CU_ASSERT_EQUAL(sa.transitions, sb.transitions);
	CU_ASSERT_EQUAL(sa.starved, sb.starved);
}

static void test_rejected_is_never_called(void)
{
	struct rx_breaker_config c = quiet();
	c.consecutive_backstop = 3;
	c.half_open_probes = 2;
	c.slow_call_ms = 50;
	c.window_max_age_ms = 200;
	static struct fx a, b;
	for (uint64_t seed = 1; seed <= 50; seed++) {
		struct rx_rng rng;
		rx_rng_seed(&rng, seed);
		fx_init(&a, &c);
		fx_init(&b, &c);
		struct rx_ticket pa[4], pb[4];
		int na = 0, nb = 0;
		for (int step = 0; step < 400; step++) {
			uint64_t dt = rx_rng_next(&rng) % 400;
			a.clk.now_ns += dt * MS;
			b.clk.now_ns = a.clk.now_ns;
			if (rx_rng_next(&rng) % 3 == 0) {
				/* The extra call, released at once. */
				struct rx_ticket t;
				if (admit(&a, &t, NULL) == RX_ADMIT)
					settle(&a, &t, RX_REJECTED, 0);
			}
			struct rx_ticket ta, tb;
			struct rx_refusal wa, wb;
			enum rx_decision da = admit(&a, &ta, &wa);
			enum rx_decision db = admit(&b, &tb, &wb);
			CU_ASSERT_EQUAL_FATAL(da, db);
			if (da != RX_ADMIT) {
				CU_ASSERT_EQUAL(wa.reason, wb.reason);
				CU_ASSERT_EQUAL(wa.retry_after_ms,
						wb.retry_after_ms);
				continue;
			}
			if (na < 4 && rx_rng_next(&rng) % 8 == 0) {
				/* Held open: settled later, or never. */
				pa[na++] = ta;
				pb[nb++] = tb;
				continue;
			}
			enum rx_verdict v =
			    (enum rx_verdict)(rx_rng_next(&rng) % 5);
			uint64_t lat = rx_rng_next(&rng) % 100;
			if (na > 0 && rx_rng_next(&rng) % 4 == 0) {
				na--, nb--;
				settle(&a, &pa[na], v, lat);
				settle(&b, &pb[nb], v, lat);
			}
			settle(&a, &ta, v, lat);
			settle(&b, &tb, v, lat);
			assert_same_stats(&a, &b);
		}
	}
}

static void test_rejected_probe_frees_slot(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	force_open(&f);
	fake_clock_advance_ms(&f.clk, 5000);
	struct rx_ticket t;
	CU_ASSERT_EQUAL(admit(&f, &t, NULL), RX_ADMIT);
	settle(&f, &t, RX_REJECTED, 0);
	CU_ASSERT_EQUAL(stats(&f).probes_in_flight, 0);
	CU_ASSERT_EQUAL(state(&f), RX_BREAKER_HALF_OPEN);
	CU_ASSERT_EQUAL(admit(&f, &t, NULL), RX_ADMIT);
	/* Rejected in closed: nothing recorded. */
	settle(&f, &t, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(admit(&f, &t, NULL), RX_ADMIT);
	settle(&f, &t, RX_REJECTED, 0);
	CU_ASSERT_EQUAL(stats(&f).window_count, 0);
}

static void test_unknown_verdict_is_transient(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	call(&f, (enum rx_verdict)42, 1);
	CU_ASSERT_EQUAL(stats(&f).window_failures, 1);
}

static void test_ops_vtable(void)
{
	struct fx f;
	struct rx_breaker_config c = quiet();
	fx_init(&f, &c);
	CU_ASSERT_STRING_EQUAL(rx_breaker_ops.name, "breaker");
	struct rx_admit_ctx ctx = {.now_ns = 1};
	struct rx_ticket t;
	struct rx_refusal why;
	CU_ASSERT_EQUAL(rx_breaker_ops.admit(&f.b, &ctx, &t, &why), RX_ADMIT);
	struct rx_observation o = {RX_TRANSIENT, 0, 2};
	rx_breaker_ops.settle(&f.b, &t, &o);
	CU_ASSERT_EQUAL(stats(&f).window_failures, 1);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"defaults", test_defaults},
	    {"config check", test_config_check},
	    {"failure rate trips strictly above", test_failure_rate_boundary},
	    {"min calls boundary", test_min_calls_boundary},
	    {"slow rate trips strictly above", test_slow_rate_boundary},
	    {"slow condition off without threshold",
	     test_slow_off_without_threshold},
	    {"backstop trips at count", test_backstop_boundary},
	    {"dead upstream at low traffic", test_dead_upstream_low_traffic},
	    {"what resets the consecutive count",
	     test_resets_of_consecutive_count},
	    {"4xx never trips", test_4xx_never_trips},
	    {"429 and 503 are not failures", test_overload_not_failure},
	    {"rates 0 and 1", test_rate_zero_and_one},
	    {"window of one", test_window_of_one},
	    {"min calls clamped to window", test_min_calls_clamped_to_window},
	    {"open refuses with retry-after",
	     test_open_refuses_with_retry_after},
	    {"open, half-open, closed", test_open_to_half_open_to_closed},
	    {"answered probe closes", test_answered_probe_closes},
	    {"failed probe reopens with empty window",
	     test_failed_probe_reopens_with_empty_window},
	    {"slow probe reopens", test_slow_probe_reopens},
	    {"a wait on purpose is never slow", test_untimed_never_slow},
	    {"exactly one probe", test_exactly_one_probe},
	    {"several probes, first decides",
	     test_several_probes_first_decides},
	    {"probe self-heal", test_probe_self_heal},
	    {"probe with a deadline keeps its slot",
	     test_probe_with_deadline_keeps_its_slot},
	    {"probe deadline noticed late", test_probe_deadline_noticed_late},
	    {"old failures before idle do not decide",
	     test_old_failures_before_idle_do_not_decide},
	    {"starvation widens max age", test_starvation_widens_max_age},
	    {"starved window decides", test_starved_window_decides_on_five},
	    {"starved floor is five", test_starved_floor_is_five},
	    {"late settlement is not evidence",
	     test_late_settlement_not_evidence},
	    {"backwards clock", test_backwards_clock},
	    {"saturating times", test_saturating_times},
	    {"rejected is never called", test_rejected_is_never_called},
	    {"rejected probe frees its slot", test_rejected_probe_frees_slot},
	    {"unknown verdict is transient", test_unknown_verdict_is_transient},
	    {"ops vtable", test_ops_vtable},
	    {NULL, NULL},
	};
	return rx_run_suite("breaker", tests);
}
