/*
 * test_gate.c - the gate's ordering and release rule (ADR-004, ADR-007),
 * and the guard built on it: counters by verdict and reason, in_flight,
 * last_used_ns.
 */
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix.h"

#define MS RX_NS_PER_MS

/* A scripted policy that logs what the gate does to it. */
struct fake {
	int id;
	enum rx_decision answer;
	unsigned admits, settles, released;
	enum rx_verdict last_verdict;
	uint32_t next_gen;
};

static int order_log[64];
static unsigned order_len;

static enum rx_decision fake_admit(void *self, const struct rx_admit_ctx *ctx,
				   struct rx_ticket *t, struct rx_refusal *why)
{
	struct fake *f = self;
	f->admits++;
	order_log[order_len++ % 64] = f->id;
	t->generation = ++f->next_gen;
	if (f->answer != RX_ADMIT) {
		why->reason = RX_REASON_BULKHEAD_FULL;
		why->retry_after_ms = (uint64_t)f->id;
	}
	return f->answer;
}

static void fake_settle(void *self, const struct rx_ticket *t,
			const struct rx_observation *obs)
{
	struct fake *f = self;
	f->settles++;
	f->last_verdict = obs->verdict;
	if (obs->verdict == RX_REJECTED)
		f->released++;
	order_log[order_len++ % 64] = -f->id;
	/* The ticket must be the one this policy handed out. */
	CU_ASSERT_EQUAL(t->generation, f->next_gen);
}

static const struct rx_policy_ops fake_ops = {
    .name = "fake", .admit = fake_admit, .settle = fake_settle};

static void test_add_limits(void)
{
	struct rx_gate g;
	struct fake f[RX_GATE_MAX_POLICIES + 1];
	rx_gate_init(&g);
	CU_ASSERT_EQUAL(rx_gate_add(&g, NULL, &f[0]), RX_EINVAL);
	CU_ASSERT_EQUAL(rx_gate_add(&g, &fake_ops, NULL), RX_EINVAL);
	for (int i = 0; i < RX_GATE_MAX_POLICIES; i++)
		CU_ASSERT_EQUAL(rx_gate_add(&g, &fake_ops, &f[i]), RX_OK);
	CU_ASSERT_EQUAL(rx_gate_add(&g, &fake_ops, &f[8]), RX_ENOSPC);
}

static void test_empty_gate_admits(void)
{
	struct rx_gate g;
	struct rx_gate_permit p;
	struct rx_refusal why;
	struct rx_admit_ctx ctx = {.now_ns = 1};
	rx_gate_init(&g);
	CU_ASSERT_EQUAL(rx_gate_admit(&g, &ctx, &p, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(p.count, 0);
	struct rx_observation o = {RX_SUCCESS, 1, 2};
	rx_gate_settle(&g, &p, &o);
}

static void test_in_order_and_settle_all(void)
{
	struct rx_gate g;
	struct fake f[3] = {{.id = 1}, {.id = 2}, {.id = 3}};
	rx_gate_init(&g);
	for (int i = 0; i < 3; i++)
		rx_gate_add(&g, &fake_ops, &f[i]);
	struct rx_gate_permit p;
	struct rx_refusal why;
	struct rx_admit_ctx ctx = {.now_ns = 1};
	order_len = 0;
	CU_ASSERT_EQUAL(rx_gate_admit(&g, &ctx, &p, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(p.count, 3);
	struct rx_observation o = {RX_TIMEOUT, 5, 2};
	rx_gate_settle(&g, &p, &o);
	const int want[] = {1, 2, 3, -1, -2, -3};
	CU_ASSERT_EQUAL(order_len, 6);
	for (int i = 0; i < 6; i++)
		CU_ASSERT_EQUAL(order_log[i], want[i]);
	for (int i = 0; i < 3; i++)
		CU_ASSERT_EQUAL(f[i].last_verdict, RX_TIMEOUT);
}

static void test_refusal_releases_earlier(void)
{
	const enum rx_decision answers[] = {RX_REFUSE, RX_QUEUE};
	for (int a = 0; a < 2; a++) {
		struct rx_gate g;
		struct fake f[3] = {{.id = 1}, {.id = 2}, {.id = 3}};
		f[2].answer = answers[a];
		rx_gate_init(&g);
		for (int i = 0; i < 3; i++)
			rx_gate_add(&g, &fake_ops, &f[i]);
		struct rx_gate_permit p;
		struct rx_refusal why;
		struct rx_admit_ctx ctx = {.now_ns = 1};
		order_len = 0;
		CU_ASSERT_EQUAL(rx_gate_admit(&g, &ctx, &p, &why), answers[a]);
		CU_ASSERT_EQUAL(why.reason, RX_REASON_BULKHEAD_FULL);
		CU_ASSERT_EQUAL(why.retry_after_ms, 3);
		CU_ASSERT_EQUAL(p.count, 0);
		/* Released in reverse order, each exactly once. */
		const int want[] = {1, 2, 3, -2, -1};
		CU_ASSERT_EQUAL(order_len, 5);
		for (int i = 0; i < 5; i++)
			CU_ASSERT_EQUAL(order_log[i], want[i]);
		CU_ASSERT_EQUAL(f[0].released, 1);
		CU_ASSERT_EQUAL(f[1].released, 1);
		CU_ASSERT_EQUAL(f[2].settles, 0);
		/* Settling an empty permit reaches no policy. */
		struct rx_observation o = {RX_SUCCESS, 1, 2};
		rx_gate_settle(&g, &p, &o);
		CU_ASSERT_EQUAL(f[0].settles, 1);
	}
}

static void test_first_refuses_releases_nothing(void)
{
	struct rx_gate g;
	struct fake f[2] = {{.id = 1, .answer = RX_REFUSE}, {.id = 2}};
	rx_gate_init(&g);
	rx_gate_add(&g, &fake_ops, &f[0]);
	rx_gate_add(&g, &fake_ops, &f[1]);
	struct rx_gate_permit p;
	struct rx_refusal why;
	struct rx_admit_ctx ctx = {.now_ns = 1};
	CU_ASSERT_EQUAL(rx_gate_admit(&g, &ctx, &p, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(f[0].settles + f[1].settles + f[1].admits, 0);
}

/* A breaker followed by a refusing policy: the breaker's probe comes back. */
static void test_release_frees_breaker_probe(void)
{
	struct rx_breaker b;
	struct rx_window_slot slots[10];
	struct rx_breaker_config c;
	rx_breaker_config_default(&c);
	c.consecutive_backstop = 1;
	rx_breaker_init(&b, &c, slots);
	struct fake f = {.id = 9, .answer = RX_REFUSE};
	struct rx_gate g;
	rx_gate_init(&g);
	rx_gate_add(&g, &rx_breaker_ops, &b);
	rx_gate_add(&g, &fake_ops, &f);
	/* Trip the breaker directly, then wait out the open period. */
	struct rx_admit_ctx ctx = {.now_ns = 1 * MS};
	struct rx_ticket t;
	struct rx_refusal why;
	rx_breaker_admit(&b, &ctx, &t, &why);
	struct rx_observation o = {RX_TRANSIENT, 1, 1 * MS};
	rx_breaker_settle(&b, &t, &o);
	CU_ASSERT_EQUAL_FATAL(b.state, RX_BREAKER_OPEN);
	ctx.now_ns = 6000 * MS;
	struct rx_gate_permit p;
	for (int i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(rx_gate_admit(&g, &ctx, &p, &why), RX_REFUSE);
		/* The refusal is the fake's, not half-open-busy. */
		CU_ASSERT_EQUAL(why.reason, RX_REASON_BULKHEAD_FULL);
		CU_ASSERT_EQUAL(b.probes_in_flight, 0);
	}
}

static void test_guard_counters(void)
{
	struct rx_guard_config gc;
	rx_guard_config_default(&gc);
	gc.breaker.consecutive_backstop = 2;
	gc.breaker.slow_call_ms = 100;
	gc.breaker.window_calls = 10;
	gc.breaker.min_calls = 10;
	CU_ASSERT_EQUAL(rx_guard_config_check(&gc, NULL), RX_OK);
	static struct rx_window_slot slots[10];
	struct rx_guard g;
	CU_ASSERT_EQUAL(rx_guard_init(&g, &gc, slots, 5), RX_OK);
	CU_ASSERT_EQUAL(g.last_used_ns, 5);
	struct rx_admit_ctx ctx = {.now_ns = 10 * MS};
	struct rx_gate_permit p1, p2, p3;
	struct rx_refusal why;
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &ctx, &p1, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &ctx, &p2, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(g.in_flight, 2);
	CU_ASSERT_EQUAL(g.last_used_ns, 10 * MS);
	struct rx_observation o = {RX_SUCCESS, 150000, 20 * MS};
	rx_guard_settle(&g, &p1, &o);
	CU_ASSERT_EQUAL(g.in_flight, 1);
	CU_ASSERT_EQUAL(g.counters.settled[RX_SUCCESS], 1);
	CU_ASSERT_EQUAL(g.counters.slow, 1);
	CU_ASSERT_EQUAL(g.last_used_ns, 20 * MS);
	o.verdict = RX_TRANSIENT;
	o.latency_us = 10;
	rx_guard_settle(&g, &p2, &o);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &ctx, &p3, &why), RX_ADMIT);
	rx_guard_settle(&g, &p3, &o);
	CU_ASSERT_EQUAL(g.counters.settled[RX_TRANSIENT], 2);
	CU_ASSERT_EQUAL(g.breaker.state, RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(g.in_flight, 0);
	ctx.now_ns = 30 * MS;
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &ctx, &p1, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &ctx, &p1, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_CIRCUIT_OPEN], 2);
	CU_ASSERT_EQUAL(g.in_flight, 0);
	CU_ASSERT_EQUAL(g.last_used_ns, 30 * MS);
	/* A clock reading from the past does not move last_used back. */
	ctx.now_ns = 1;
	rx_guard_admit(&g, &ctx, &p1, &why);
	CU_ASSERT_EQUAL(g.last_used_ns, 30 * MS);
}

static void test_guard_without_breaker(void)
{
	struct rx_guard_config gc;
	rx_guard_config_default(&gc);
	gc.breaker_on = false;
	gc.breaker.failure_rate = -1; /* ignored when off */
	CU_ASSERT_EQUAL(rx_guard_config_check(&gc, NULL), RX_OK);
	struct rx_guard g;
	CU_ASSERT_EQUAL(rx_guard_init(&g, &gc, NULL, 0), RX_OK);
	struct rx_admit_ctx ctx = {.now_ns = 1};
	struct rx_gate_permit p;
	struct rx_refusal why;
	for (int i = 0; i < 100; i++) {
		CU_ASSERT_EQUAL(rx_guard_admit(&g, &ctx, &p, &why), RX_ADMIT);
		struct rx_observation o = {RX_TRANSIENT, 1, 2};
		rx_guard_settle(&g, &p, &o);
	}
	CU_ASSERT_EQUAL(g.counters.settled[RX_TRANSIENT], 100);
	CU_ASSERT_EQUAL(g.breaker.state, RX_BREAKER_CLOSED);
	const char *why_s = NULL;
	gc.breaker_on = true;
	CU_ASSERT_EQUAL(rx_guard_config_check(&gc, &why_s), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(why_s);
	CU_ASSERT_EQUAL(rx_guard_config_check(NULL, &why_s), RX_EINVAL);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"add limits", test_add_limits},
	    {"empty gate admits", test_empty_gate_admits},
	    {"in order, settle all", test_in_order_and_settle_all},
	    {"refusal releases earlier", test_refusal_releases_earlier},
	    {"first refuses, nothing to release",
	     test_first_refuses_releases_nothing},
	    {"release frees the breaker's probe",
	     test_release_frees_breaker_probe},
	    {"guard counters", test_guard_counters},
	    {"guard without breaker", test_guard_without_breaker},
	    {NULL, NULL},
	};
	return rx_run_suite("gate", tests);
}
