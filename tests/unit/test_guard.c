/*
 * test_guard.c - a guard composes the breaker and the limiter (ADR-135):
 * the breaker runs first, so an open circuit never takes a limiter slot or
 * a queue place; a call the limiter queues holds no breaker admission; the
 * limiter's wait protocol through the guard (enqueue, try_dequeue,
 * cancel_wait) asks the breaker again when a waiter's turn comes
 * (rx_gate_admit_last, ADR-131) and releases the limiter slot when the
 * circuit opened meanwhile; refusals are counted once, by reason.
 * Deterministic: injected time, no sleeping.
 */
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix.h"

#define MS RX_NS_PER_MS

static struct rx_window_slot slots[32];

/* A guard whose limiter holds exactly @limit calls, and whose breaker
 * opens on the first failure. */
static void make(struct rx_guard *g, uint32_t limit)
{
	struct rx_guard_config c;
	rx_guard_config_default(&c);
	c.breaker.window_calls = 32;
	c.breaker.consecutive_backstop = 1;
	c.breaker.open_ms = 1000;
	c.limiter.min_limit = c.limiter.max_limit = limit;
	c.limiter.initial_limit = limit;
	c.limiter.learn_first = false; /* a fixed limit from the first call */
	CU_ASSERT_EQUAL_FATAL(rx_guard_config_check(&c, NULL), RX_OK);
	CU_ASSERT_EQUAL_FATAL(rx_guard_init(g, &c, slots, 0), RX_OK);
}

static void test_default_has_both(void)
{
	struct rx_guard_config c;
	struct rx_guard g;
	rx_guard_config_default(&c);
	CU_ASSERT_TRUE(c.breaker_on);
	CU_ASSERT_TRUE(c.limiter_on);
	CU_ASSERT_EQUAL(c.limiter.algorithm, RX_LIMITER_VEGAS);
	CU_ASSERT_EQUAL(rx_guard_init(&g, &c, slots, 0), RX_OK);
	CU_ASSERT_EQUAL(g.gate.count, 2);
	CU_ASSERT_PTR_EQUAL(g.gate.policies[0].ops, &rx_breaker_ops);
	CU_ASSERT_PTR_EQUAL(g.gate.policies[1].ops, &rx_limiter_ops);
	/* A bad limiter setting fails the check, naming the field. */
	const char *why = NULL;
	c.limiter.min_limit = 0;
	CU_ASSERT_EQUAL(rx_guard_config_check(&c, &why), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(why);
	c.limiter_on = false;
	CU_ASSERT_EQUAL(rx_guard_config_check(&c, NULL), RX_OK);
	CU_ASSERT_EQUAL(rx_guard_init(&g, &c, slots, 0), RX_OK);
	CU_ASSERT_EQUAL(g.gate.count, 1);
	uint64_t place;
	CU_ASSERT_EQUAL(rx_guard_enqueue(&g, 1, &place), RX_ENOSPC);
}

static void test_wait_in_order(void)
{
	struct rx_guard g;
	struct rx_admit_ctx wait = {.now_ns = 1 * MS, .can_wait = true};
	struct rx_admit_ctx nowait = {.now_ns = 1 * MS, .can_wait = false};
	struct rx_gate_permit p[4];
	struct rx_refusal why;
	uint64_t w1, w2;
	make(&g, 2);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[0], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[1], &why), RX_ADMIT);
	/* Full: a caller that can wait is told to queue (not a refusal), one
	 * that cannot is shed. */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[2], &why), RX_QUEUE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_LIMITER_FULL);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_LIMITER_FULL], 0);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &nowait, &p[2], &why), RX_REFUSE);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_LIMITER_FULL], 1);
	CU_ASSERT_EQUAL(rx_guard_enqueue(&g, 1 * MS, &w1), RX_OK);
	CU_ASSERT_EQUAL(rx_guard_enqueue(&g, 1 * MS, &w2), RX_OK);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 2);
	/* The breaker holds nothing for the waiters. */
	struct rx_breaker_stats bs;
	rx_breaker_stats(&g.breaker, 1 * MS, &bs);
	CU_ASSERT_EQUAL(bs.window_count, 0);
	CU_ASSERT_EQUAL(g.in_flight, 2);

	wait.now_ns = 2 * MS;
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(&g, &wait, w1, &p[2], &why),
			RX_QUEUE);
	struct rx_observation ok = {RX_SUCCESS, 1000, 3 * MS};
	rx_guard_settle(&g, &p[0], &ok);
	/* One slot free: the second waiter is not first in line. */
	wait.now_ns = 3 * MS;
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(&g, &wait, w2, &p[3], &why),
			RX_QUEUE);
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(&g, &wait, w1, &p[2], &why),
			RX_ADMIT);
	CU_ASSERT_EQUAL(p[2].count, 2);
	CU_ASSERT_EQUAL(g.in_flight, 2);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 1);
	/* The second gives up (its queue timeout): a counted refusal. */
	rx_guard_cancel_wait(&g, w2, true);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 0);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_LIMITER_FULL], 2);
	rx_guard_settle(&g, &p[1], &ok);
	rx_guard_settle(&g, &p[2], &ok);
	CU_ASSERT_EQUAL(g.in_flight, 0);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 0);
	CU_ASSERT_EQUAL(g.counters.settled[RX_SUCCESS], 3);
}

/* The circuit opens while a caller waits: its turn ends in a refusal with
 * the breaker's reason, and the limiter slot it was given is released. */
static void test_breaker_opens_while_waiting(void)
{
	struct rx_guard g;
	struct rx_admit_ctx wait = {.now_ns = 1 * MS, .can_wait = true};
	struct rx_gate_permit p[2];
	struct rx_refusal why;
	uint64_t w;
	make(&g, 1);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[0], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[1], &why), RX_QUEUE);
	CU_ASSERT_EQUAL(rx_guard_enqueue(&g, 1 * MS, &w), RX_OK);
	struct rx_observation bad = {RX_TRANSIENT, 1000, 2 * MS};
	rx_guard_settle(&g, &p[0], &bad);
	CU_ASSERT_EQUAL(g.breaker.state, RX_BREAKER_OPEN);
	wait.now_ns = 2 * MS;
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(&g, &wait, w, &p[1], &why),
			RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_CIRCUIT_OPEN);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_CIRCUIT_OPEN], 1);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 0);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 0);
	CU_ASSERT_EQUAL(g.in_flight, 0);
	/* An open circuit refuses before the limiter is asked. */
	struct rx_admit_ctx nowait = {.now_ns = 3 * MS, .can_wait = false};
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &nowait, &p[0], &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_CIRCUIT_OPEN);
	CU_ASSERT_EQUAL(g.limiter.shed_nonblocking, 0);
}

/* A forked child drops the places of threads that did not come along:
 * newcomers are admitted directly again, and the old places are dead. */
static void test_drop_waiters(void)
{
	struct rx_guard g;
	struct rx_admit_ctx wait = {.now_ns = 1 * MS, .can_wait = true};
	struct rx_gate_permit p[5];
	struct rx_refusal why;
	uint64_t w[3];
	make(&g, 2);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[0], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[4], &why), RX_ADMIT);
	for (int i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[1], &why),
				RX_QUEUE);
		CU_ASSERT_EQUAL(rx_guard_enqueue(&g, 1 * MS, &w[i]), RX_OK);
	}
	/* A place given up in the middle first: the count stays exact. */
	rx_guard_cancel_wait(&g, w[1], false);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 2);
	rx_guard_drop_waiters(&g);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 0);
	struct rx_observation ok = {RX_SUCCESS, 1000, 2 * MS};
	rx_guard_settle(&g, &p[0], &ok);
	rx_guard_settle(&g, &p[4], &ok);
	wait.now_ns = 2 * MS;
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[2], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(&g, &wait, w[0], &p[3], &why),
			RX_REFUSE);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 1);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 0);
	rx_guard_settle(&g, &p[2], &ok);
	CU_ASSERT_EQUAL(g.in_flight, 0);
}

/* rx_gate_admit_last on its own: the pre-obtained ticket lands last, and
 * a refusal before it releases it (ADR-007). */
struct count {
	unsigned admits, settles, rejected;
	bool refuse;
};

static enum rx_decision count_admit(void *self, const struct rx_admit_ctx *c,
				    struct rx_ticket *t, struct rx_refusal *why)
{
	struct count *n = self;
	(void)c;
	t->flags = 7;
	if (n->refuse) {
		why->reason = RX_REASON_RATE_LIMITED;
		return RX_REFUSE;
	}
	n->admits++;
	return RX_ADMIT;
}

static void count_settle(void *self, const struct rx_ticket *t,
			 const struct rx_observation *o)
{
	struct count *n = self;
	(void)t;
	n->settles++;
	n->rejected += o->verdict == RX_REJECTED;
}

static const struct rx_policy_ops count_ops = {"count", count_admit,
					       count_settle};

static void test_gate_admit_last(void)
{
	struct count a = {0}, b = {0}, last = {0};
	struct rx_gate g;
	struct rx_gate_permit p;
	struct rx_refusal why;
	struct rx_admit_ctx ctx = {.now_ns = 5};
	struct rx_ticket t = {.start_ns = 1, .generation = 2, .flags = 3};
	rx_gate_init(&g);
	CU_ASSERT_EQUAL(rx_gate_admit_last(&g, &ctx, &t, &p, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(p.count, 0);
	rx_gate_add(&g, &count_ops, &a);
	rx_gate_add(&g, &count_ops, &b);
	rx_gate_add(&g, &count_ops, &last);
	CU_ASSERT_EQUAL(rx_gate_admit_last(&g, &ctx, &t, &p, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(p.count, 3);
	CU_ASSERT_EQUAL(p.tickets[2].flags, 3);
	CU_ASSERT_EQUAL(p.tickets[2].generation, 2);
	CU_ASSERT_EQUAL(a.admits + b.admits + last.admits, 2);
	b.refuse = true;
	CU_ASSERT_EQUAL(rx_gate_admit_last(&g, &ctx, &t, &p, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_RATE_LIMITED);
	CU_ASSERT_EQUAL(a.rejected, 1);
	CU_ASSERT_EQUAL(last.rejected, 1);
	CU_ASSERT_EQUAL(b.settles, 0);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"default guard: breaker, then Vegas limiter",
	     test_default_has_both},
	    {"waiters through the guard, in order", test_wait_in_order},
	    {"breaker opens while a caller waits",
	     test_breaker_opens_while_waiting},
	    {"a forked child drops the waiters", test_drop_waiters},
	    {"gate admit with a pre-obtained last ticket",
	     test_gate_admit_last},
	    {NULL, NULL},
	};
	return rx_run_suite("guard", tests);
}
