/*
 * test_guard.c - a guard composes the breaker and the limiter (ADR-135):
 * the breaker runs first, so an open circuit never takes a limiter slot or
 * a queue place; a call the limiter queues holds no breaker admission; the
 * limiter's wait protocol through the guard (enqueue, try_dequeue,
 * cancel_wait) asks the breaker again when a waiter's turn comes
 * (rx_gate_admit_last, ADR-131) and releases the limiter slot when the
 * circuit opened meanwhile; refusals are counted once, by reason. With
 * the other policies on, the order is rate limiter, breaker, throttler,
 * bulkhead, limiter (ADR-460), a later refusal or queue leaves no trace
 * in the earlier ones, and a waiter's look keeps its place while the rate
 * limiter has no token (ADR-461). The fast admission of the common case
 * admits exactly as the guard does and leaves anything else untouched
 * (ADR-531), and so does the fast settlement of a success (ADR-532).
 * Deterministic: injected time, no sleeping.
 */
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix.h"
#include "guard-inl.h"

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


/* Every policy on: rate 10/s burst 2, a bulkhead of 2, the throttler,
 * a limiter fixed at @limit. */
static void make_all(struct rx_guard *g, uint32_t limit)
{
	struct rx_guard_config c;
	rx_guard_config_default(&c);
	CU_ASSERT_FALSE(c.bulkhead_on || c.ratelimit_on || c.throttler_on);
	c.breaker.window_calls = 32;
	c.breaker.consecutive_backstop = 1;
	c.breaker.open_ms = 1000;
	c.limiter.min_limit = c.limiter.max_limit = limit;
	c.limiter.initial_limit = limit;
	c.limiter.learn_first = false;
	c.ratelimit_on = true;
	c.ratelimit.tokens = 10;
	c.ratelimit.period_ms = 1000;
	c.ratelimit.burst = 2;
	c.bulkhead_on = true;
	c.bulkhead.max_in_flight = 2;
	c.throttler_on = true;
	CU_ASSERT_EQUAL_FATAL(rx_guard_config_check(&c, NULL), RX_OK);
	CU_ASSERT_EQUAL_FATAL(rx_guard_init(g, &c, slots, 0), RX_OK);
}

static void test_order(void)
{
	struct rx_guard g;
	make_all(&g, 4);
	CU_ASSERT_EQUAL(g.gate.count, 5);
	CU_ASSERT_PTR_EQUAL(g.gate.policies[0].ops, &rx_ratelimit_ops);
	CU_ASSERT_PTR_EQUAL(g.gate.policies[1].ops, &rx_breaker_ops);
	CU_ASSERT_PTR_EQUAL(g.gate.policies[2].ops, &rx_throttler_ops);
	CU_ASSERT_PTR_EQUAL(g.gate.policies[3].ops, &rx_bulkhead_ops);
	CU_ASSERT_PTR_EQUAL(g.gate.policies[4].ops, &rx_limiter_ops);
	CU_ASSERT_TRUE(g.more);
	/* A bad setting of a policy that is on fails the check. */
	struct rx_guard_config c;
	const char *why = NULL;
	rx_guard_config_default(&c);
	c.bulkhead.max_in_flight = 0;
	CU_ASSERT_EQUAL(rx_guard_config_check(&c, NULL), RX_OK);
	c.bulkhead_on = true;
	CU_ASSERT_EQUAL(rx_guard_config_check(&c, &why), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(why);
}

/* A full bulkhead queues the call, and the token it took, the throttler's
 * request and the breaker's admission are all given back. */
static void test_bulkhead_queue_leaves_no_trace(void)
{
	struct rx_guard g;
	struct rx_admit_ctx wait = {.now_ns = 1 * MS, .can_wait = true};
	struct rx_admit_ctx nowait = {.now_ns = 1 * MS, .can_wait = false};
	struct rx_gate_permit p[3];
	struct rx_refusal why;
	struct rx_throttler_stats ts;
	struct rx_ratelimit_stats rs;
	make_all(&g, 4);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[0], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(p[0].count, 5);
	wait.now_ns = 101 * MS; /* one token more */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[1], &why), RX_ADMIT);
	wait.now_ns = nowait.now_ns = 201 * MS;
	rx_ratelimit_stats(&g.ratelimit, 201 * MS, &rs);
	rx_throttler_stats(&g.throttler, 201 * MS, &ts);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[2], &why), RX_QUEUE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_BULKHEAD_FULL);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &nowait, &p[2], &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_BULKHEAD_FULL);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_BULKHEAD_FULL], 1);
	struct rx_ratelimit_stats rs2;
	struct rx_throttler_stats ts2;
	rx_ratelimit_stats(&g.ratelimit, 201 * MS, &rs2);
	rx_throttler_stats(&g.throttler, 201 * MS, &ts2);
	CU_ASSERT_EQUAL(rs2.tokens, rs.tokens);
	CU_ASSERT_EQUAL(ts2.requests, ts.requests);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 2);
	CU_ASSERT_EQUAL(g.in_flight, 2);
	struct rx_observation ok = {RX_SUCCESS, 1000, 202 * MS};
	rx_guard_settle(&g, &p[0], &ok);
	CU_ASSERT_EQUAL(g.bulkhead.in_flight, 1);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 1);
	wait.now_ns = 202 * MS;
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[2], &why), RX_ADMIT);
	rx_guard_settle(&g, &p[1], &ok);
	rx_guard_settle(&g, &p[2], &ok);
	CU_ASSERT_EQUAL(g.in_flight, 0);
	CU_ASSERT_EQUAL(g.bulkhead.in_flight, 0);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 0);
	rx_throttler_stats(&g.throttler, 202 * MS, &ts2);
	CU_ASSERT_EQUAL(ts2.accepts, 3);
	CU_ASSERT_EQUAL(ts2.requests, 3);
}

/* An empty bucket queues a caller before the breaker is asked: a
 * half-open probe is never held by a paced caller. The executor waits
 * until the next token. */
static void test_paced_holds_nothing(void)
{
	struct rx_guard g;
	struct rx_admit_ctx wait = {.now_ns = 1 * MS, .can_wait = true};
	struct rx_gate_permit p[3];
	struct rx_refusal why;
	make_all(&g, 4);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[0], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[1], &why), RX_ADMIT);
	struct rx_observation ok = {RX_SUCCESS, 1000, 2 * MS};
	rx_guard_settle(&g, &p[0], &ok);
	rx_guard_settle(&g, &p[1], &ok);
	wait.now_ns = 2 * MS;
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[2], &why), RX_QUEUE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_RATE_LIMITED);
	CU_ASSERT_EQUAL(why.retry_after_ms, 99);
	CU_ASSERT_EQUAL(rx_guard_next_token_ns(&g, 2 * MS), 101 * MS);
	CU_ASSERT_EQUAL(g.bulkhead.in_flight, 0);
	struct rx_throttler_stats ts;
	rx_throttler_stats(&g.throttler, 2 * MS, &ts);
	CU_ASSERT_EQUAL(ts.requests, 2);
	rx_guard_wait_begin(&g);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 1);
	rx_guard_wait_end(&g, RX_REASON_NONE);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 0);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_RATE_LIMITED], 0);
	rx_guard_wait_begin(&g);
	rx_guard_wait_end(&g, RX_REASON_RATE_LIMITED); /* its deadline */
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_RATE_LIMITED], 1);
	wait.now_ns = 101 * MS;
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[2], &why), RX_ADMIT);
	rx_guard_settle(&g, &p[2], &ok);
	CU_ASSERT_EQUAL(g.in_flight, 0);
}

/* A waiter of the limiter's queue whose turn has come but whose bucket is
 * empty keeps its place, holding nothing; it is admitted once a token
 * comes. The throttler is asked once, at the turn. */
static void test_waiter_paced(void)
{
	struct rx_guard g;
	struct rx_admit_ctx wait = {.now_ns = 1 * MS, .can_wait = true};
	struct rx_gate_permit p[3];
	struct rx_refusal why;
	uint64_t w;
	make_all(&g, 1);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[0], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &wait, &p[1], &why), RX_QUEUE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_LIMITER_FULL);
	CU_ASSERT_EQUAL(rx_guard_enqueue(&g, 1 * MS, &w), RX_OK);
	/* Not its turn: everything asked before the limiter is released. */
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(&g, &wait, w, &p[1], &why),
			RX_QUEUE);
	CU_ASSERT_EQUAL(g.bulkhead.in_flight, 1);
	struct rx_observation ok = {RX_SUCCESS, 1000, 2 * MS};
	rx_guard_settle(&g, &p[0], &ok);
	/* Its turn, but the second token went to a newcomer... */
	wait.now_ns = 2 * MS;
	struct rx_ratelimit_stats rs;
	rx_ratelimit_stats(&g.ratelimit, 2 * MS, &rs);
	CU_ASSERT_EQUAL(rs.tokens, 1);
	struct rx_admit_ctx nowait = {.now_ns = 2 * MS, .can_wait = false};
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &nowait, &p[2], &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_LIMITER_FULL); /* no overtaking */
	g.ratelimit.units = 0; /* ...or say the bucket is empty */
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(&g, &wait, w, &p[1], &why),
			RX_QUEUE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_RATE_LIMITED);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 1);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 0);
	wait.now_ns = 200 * MS;
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(&g, &wait, w, &p[1], &why),
			RX_ADMIT);
	CU_ASSERT_EQUAL(p[1].count, 5);
	CU_ASSERT_EQUAL(rx_guard_waiters(&g), 0);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 1);
	CU_ASSERT_EQUAL(g.bulkhead.in_flight, 1);
	ok.now_ns = 201 * MS;
	rx_guard_settle(&g, &p[1], &ok);
	CU_ASSERT_EQUAL(g.in_flight, 0);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 0);
	CU_ASSERT_EQUAL(g.bulkhead.in_flight, 0);
}

/* A throttled call takes no slot and gives its token back. */
static void test_throttled_takes_nothing(void)
{
	struct rx_guard g;
	struct rx_admit_ctx ctx = {.now_ns = 1 * MS, .can_wait = true};
	struct rx_gate_permit p;
	struct rx_refusal why;
	struct rx_rng rng;
	unsigned throttled = 0, i;
	make_all(&g, 4);
	g.throttler.cfg.max_reject = 1.0;
	g.ratelimit.cfg.burst = g.ratelimit.burst = 1000;
	g.ratelimit.cap_units = 1000 * g.ratelimit.token_units;
	g.ratelimit.units = g.ratelimit.cap_units;
	g.breaker.cfg.consecutive_backstop = 0;
	rx_rng_seed(&rng, 7);
	ctx.rng = &rng;
	for (i = 0; i < 200; i++) {
		struct rx_ratelimit_stats before, after;
		rx_ratelimit_stats(&g.ratelimit, ctx.now_ns, &before);
		enum rx_decision d = rx_guard_admit(&g, &ctx, &p, &why);
		if (d == RX_REFUSE) {
			CU_ASSERT_EQUAL(why.reason, RX_REASON_THROTTLED);
			rx_ratelimit_stats(&g.ratelimit, ctx.now_ns, &after);
			CU_ASSERT_EQUAL(after.tokens, before.tokens);
			CU_ASSERT_EQUAL(g.bulkhead.in_flight, 0);
			CU_ASSERT_EQUAL(g.limiter.in_flight, 0);
			throttled++;
			continue;
		}
		CU_ASSERT_EQUAL_FATAL(d, RX_ADMIT);
		struct rx_observation busy = {RX_OVERLOAD, 1000, ctx.now_ns};
		rx_guard_settle(&g, &p, &busy);
	}
	CU_ASSERT_TRUE(throttled > 150);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_THROTTLED], throttled);
}

/* rx_guard_admit_fast admits exactly as rx_guard_admit does in the
 * common case, and changes nothing outside it (ADR-531). */
static void test_admit_fast(void)
{
	static struct rx_window_slot sa[32], sb[32];
	struct rx_guard_config c;
	struct rx_guard a, b;
	struct rx_gate_permit pa[3], pb[3];
	struct rx_refusal why;
	struct rx_admit_ctx ctx = {.now_ns = 5 * MS, .can_wait = false};
	uint64_t t = 5 * MS;
	int i;

	rx_guard_config_default(&c);
	c.breaker.window_calls = 32;
	c.breaker.consecutive_backstop = 1;
	c.breaker.open_ms = 1000;
	c.limiter.min_limit = c.limiter.max_limit = 2;
	c.limiter.initial_limit = 2;
	c.limiter.learn_first = false;
	CU_ASSERT_EQUAL_FATAL(rx_guard_init(&a, &c, sa, 0), RX_OK);
	CU_ASSERT_EQUAL_FATAL(rx_guard_init(&b, &c, sb, 0), RX_OK);
	/* Below the limit: the same permit and the same state. */
	for (i = 0; i < 2; i++) {
		ctx.now_ns = t + (uint64_t)i;
		CU_ASSERT_TRUE(rx_guard_admit_fast(&a, &ctx, &pa[i]));
		CU_ASSERT_EQUAL(rx_guard_admit(&b, &ctx, &pb[i], &why),
				RX_ADMIT);
		CU_ASSERT_EQUAL(pa[i].count, pb[i].count);
		CU_ASSERT_EQUAL(memcmp(pa[i].tickets, pb[i].tickets,
				       2 * sizeof(pa[i].tickets[0])),
				0);
	}
	CU_ASSERT_EQUAL(a.in_flight, b.in_flight);
	CU_ASSERT_EQUAL(a.limiter.in_flight, b.limiter.in_flight);
	CU_ASSERT_EQUAL(a.last_used_ns, b.last_used_ns);
	CU_ASSERT_EQUAL(a.breaker.last_now_ns, b.breaker.last_now_ns);
	/* At the limit: not the fast path's, and nothing taken. */
	ctx.now_ns = t + 3;
	CU_ASSERT_FALSE(rx_guard_admit_fast(&a, &ctx, &pa[2]));
	CU_ASSERT_EQUAL(a.in_flight, 2);
	CU_ASSERT_EQUAL(a.limiter.in_flight, 2);
	CU_ASSERT_EQUAL(a.last_used_ns, t + 1);
	/* Settled alike; then a failure opens the circuit: not the fast
	 * path's either. */
	for (i = 0; i < 2; i++) {
		struct rx_observation ok = {RX_SUCCESS, 100, t + 10};
		struct rx_observation bad = {RX_TRANSIENT, 100, t + 10};

		rx_guard_settle(&a, &pa[i], i == 0 ? &ok : &bad);
		rx_guard_settle(&b, &pb[i], i == 0 ? &ok : &bad);
	}
	CU_ASSERT_EQUAL(a.breaker.state, b.breaker.state);
	CU_ASSERT_NOT_EQUAL(a.breaker.state, RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(a.in_flight, 0);
	CU_ASSERT_EQUAL(a.limiter.in_flight, b.limiter.in_flight);
	ctx.now_ns = t + 20;
	CU_ASSERT_FALSE(rx_guard_admit_fast(&a, &ctx, &pa[0]));
	CU_ASSERT_EQUAL(a.in_flight, 0);
	/* Another policy on: never the fast path's. */
	c.bulkhead_on = true;
	CU_ASSERT_EQUAL_FATAL(rx_guard_init(&a, &c, sa, 0), RX_OK);
	ctx.now_ns = t;
	CU_ASSERT_FALSE(rx_guard_admit_fast(&a, &ctx, &pa[0]));
	CU_ASSERT_EQUAL(a.in_flight, 0);
}

/* A guard and its window's slots side by side, so that a copy of the
 * pair is a whole guard (the window finds its slots by offset). */
struct twin {
	struct rx_guard g;
	struct rx_window_slot s[12];
};

static struct twin master, fast, slow;

/* One configuration of the random walk below, from @r. */
static void walk_config(struct rx_guard_config *c, struct rx_rng *r)
{
	rx_guard_config_default(c);
	c->breaker.window_calls = 4 + (uint32_t)(rx_rng_next(r) % 9);
	c->breaker.min_calls = 2 + (uint32_t)(rx_rng_next(r) % 8);
	c->breaker.window_max_age_ms = rx_rng_next(r) % 2 ? 0 : 40;
	c->breaker.slow_call_ms = rx_rng_next(r) % 2 ? 0 : 3;
	c->breaker.consecutive_backstop = (uint32_t)(rx_rng_next(r) % 4);
	c->breaker.open_ms = 20;
	c->limiter.window_min_samples = 2 + (uint32_t)(rx_rng_next(r) % 6);
	c->limiter.window_min_ms = 5;
	c->limiter.stale_ms = 60;
	c->limiter.learn_first = rx_rng_next(r) % 2;
	c->limiter.min_limit = 1;
	c->limiter.initial_limit = 3;
	c->limiter.max_limit = 6;
}

/* rx_guard_settle_fast settles exactly as rx_guard_settle does wherever
 * it says it did, and changes nothing where it says it did not: random
 * walks of admissions and settlements - successes, failures, slow calls,
 * waits on purpose, time that jumps and time that goes back - compared
 * after every success, byte for byte (ADR-532). */
static void test_settle_fast(void)
{
	struct rx_gate_permit held[4];
	struct rx_guard_config c;
	struct rx_refusal why;
	struct rx_rng r;
	unsigned took = 0, declined = 0, run, step;

	rx_rng_seed(&r, 532);
	for (run = 0; run < 200; run++) {
		uint64_t t = 10 * MS;
		unsigned n = 0;

		walk_config(&c, &r);
		memset(&master, 0, sizeof(master));
		CU_ASSERT_EQUAL_FATAL(rx_guard_init(&master.g, &c, master.s, 0),
				      RX_OK);
		for (step = 0; step < 400; step++) {
			uint64_t x = rx_rng_next(&r);
			struct rx_admit_ctx ctx = {.now_ns = t, .rng = &r};

			t += x % 8 == 0 ? (x >> 8) % (80 * MS)
					: (x >> 8) % (2 * MS);
			if (x % 16 == 1 && t > MS)
				t -= MS; /* a clock read that went back */
			if (n < 4 && (n == 0 || x % 3 != 0)) {
				ctx.now_ns = t;
				if (rx_guard_admit(&master.g, &ctx, &held[n],
						   &why) == RX_ADMIT)
					n++;
				/* No admission moves what the cache covers
				 * (ADR-587). */
				CU_ASSERT_EQUAL(master.g.steady,
						rx__guard_steady(&master.g));
				continue;
			}
			unsigned k = (unsigned)((x >> 4) % n);
			struct rx_gate_permit p = held[k];
			/* Slow calls (4 ms against 3), the last µs under the
			 * threshold, and waits on purpose (ADR-650, ADR-670)
			 * besides the common latencies. */
			uint64_t lat = (x >> 16) % 8 == 0   ? 4000
				       : (x >> 16) % 8 == 1 ? 2999
				       : (x >> 16) % 8 == 2 ? RX_LATENCY_NONE
							    : (x >> 20) % 900;
			enum rx_verdict v = (x >> 24) % 6 == 0 ? RX_TRANSIENT
							      : RX_SUCCESS;
			struct rx_observation obs = {v, lat, t};

			held[k] = held[--n];
			if (v != RX_SUCCESS) {
				rx_guard_settle(&master.g, &p, &obs);
				continue;
			}
			memcpy(&fast, &master, sizeof(master));
			memcpy(&slow, &master, sizeof(master));
			rx_guard_settle(&slow.g, &p, &obs);
			if (rx_guard_settle_fast(&fast.g, &p, lat, t)) {
				took++;
				CU_ASSERT_EQUAL(
				    memcmp(&fast, &slow, sizeof(fast)), 0);
			} else {
				declined++;
				CU_ASSERT_EQUAL(
				    memcmp(&fast, &master, sizeof(fast)), 0);
			}
			memcpy(&master, &slow, sizeof(master));
			CU_ASSERT_EQUAL(master.g.steady,
					rx__guard_steady(&master.g));
		}
	}
	/* Both halves were exercised. */
	CU_ASSERT_TRUE(took > 1000);
	CU_ASSERT_TRUE(declined > 1000);
}

/*
 * Where the shim judges its caller (ADR-686): every settlement that
 * closes the limiter's window was one rx_guard_limiter_window_due named
 * beforehand, and few others were; a saturated caller's mark goes on the
 * window open, and nowhere with the limiter off.
 */
static void test_window_due_and_busy_caller(void)
{
	struct rx_guard_config c;
	struct rx_guard g;
	struct rx_gate_permit p;
	struct rx_refusal why;
	uint64_t t = MS;
	int closes = 0, due_n = 0;

	rx_guard_config_default(&c);
	c.breaker.window_calls = 32; /* the slots this file has */
	CU_ASSERT_EQUAL_FATAL(rx_guard_init(&g, &c, slots, 0), RX_OK);
	for (int i = 0; i < 2000; i++) {
		struct rx_admit_ctx ctx = {.now_ns = t, .can_wait = true};
		CU_ASSERT_EQUAL_FATAL(rx_guard_admit(&g, &ctx, &p, &why),
				      RX_ADMIT);
		t += MS;
		struct rx_observation o = {RX_SUCCESS, 1000, t};
		uint64_t before = g.limiter.updates;
		bool due = rx_guard_limiter_window_due(&g, t);
		due_n += due;
		rx_guard_settle(&g, &p, &o);
		if (g.limiter.updates != before) {
			CU_ASSERT_TRUE(due);
			closes++;
		}
	}
	CU_ASSERT(closes >= 10);
	CU_ASSERT_EQUAL(due_n, closes); /* 1 ms apart: 100 per window */
	CU_ASSERT_TRUE(g.limiter.window_open);
	CU_ASSERT_FALSE(g.limiter.window_busy);
	rx_guard_note_caller_busy(&g);
	CU_ASSERT_TRUE(g.limiter.window_busy);

	c.limiter_on = false;
	CU_ASSERT_EQUAL_FATAL(rx_guard_init(&g, &c, slots, 0), RX_OK);
	CU_ASSERT_FALSE(rx_guard_limiter_window_due(&g, 10000 * MS));
	rx_guard_note_caller_busy(&g);
	CU_ASSERT_FALSE(g.limiter.window_busy);
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
	    {"order: rate, breaker, throttler, bulkhead, limiter", test_order},
	    {"a full bulkhead queues and leaves no trace",
	     test_bulkhead_queue_leaves_no_trace},
	    {"a paced caller holds nothing", test_paced_holds_nothing},
	    {"a limiter waiter keeps its place without a token",
	     test_waiter_paced},
	    {"a throttled call takes no slot and no token",
	     test_throttled_takes_nothing},
	    {"the fast admission is the common case's admission",
	     test_admit_fast},
	    {"the fast settlement is the common case's settlement",
	     test_settle_fast},
	    {"the caller is judged where the window may close",
	     test_window_due_and_busy_caller},
	    {NULL, NULL},
	};
	return rx_run_suite("guard", tests);
}
