/*
 * test_bulkhead.c - the fixed concurrency cap (src/bulkhead.c).
 *
 * Deterministic and clock-free (the bulkhead reads no time): the cap,
 * RX_QUEUE for a caller that can wait and RX_REFUSE for one that cannot,
 * a slot freed by every verdict, a waiter admitted by asking again, and
 * admit + settle(RX_REJECTED) leaving every byte as it was (ADR-007).
 */
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix/bulkhead.h"
#include "resilix/error.h"

static void init_cap(struct rx_bulkhead *b, uint32_t cap)
{
	struct rx_bulkhead_config c = {cap};
	CU_ASSERT_EQUAL_FATAL(rx_bulkhead_init(b, &c), RX_OK);
}

static void test_defaults_and_checks(void)
{
	struct rx_bulkhead_config c;
	const char *why = NULL;
	rx_bulkhead_config_default(&c);
	CU_ASSERT_EQUAL(c.max_in_flight, 25);
	CU_ASSERT_EQUAL(rx_bulkhead_config_check(&c, &why), RX_OK);
	c.max_in_flight = 0;
	CU_ASSERT_EQUAL(rx_bulkhead_config_check(&c, &why), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "max_in_flight"));
	c.max_in_flight = 1000001;
	CU_ASSERT_EQUAL(rx_bulkhead_config_check(&c, NULL), RX_EINVAL);
	CU_ASSERT_EQUAL(rx_bulkhead_config_check(NULL, NULL), RX_EINVAL);
	struct rx_bulkhead b;
	CU_ASSERT_EQUAL(rx_bulkhead_init(&b, &c), RX_EINVAL);
}

static void test_cap_queue_refuse(void)
{
	struct rx_bulkhead b;
	struct rx_ticket t[3];
	struct rx_refusal why = {0};
	struct rx_admit_ctx wait = {0, NULL, true, 0, 0};
	struct rx_admit_ctx nowait = {0, NULL, false, 0, 0};
	init_cap(&b, 2);
	CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &nowait, &t[0], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &wait, &t[1], &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &wait, &t[2], &why), RX_QUEUE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_BULKHEAD_FULL);
	CU_ASSERT_EQUAL(why.retry_after_ms, 0);
	why.reason = RX_REASON_NONE;
	CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &nowait, &t[2], &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_BULKHEAD_FULL);
	CU_ASSERT_STRING_EQUAL(rx_reason_name(why.reason), "bulkhead-full");
	/* A NULL refusal is allowed. */
	CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &nowait, &t[2], NULL), RX_REFUSE);
	struct rx_bulkhead_stats s;
	rx_bulkhead_stats(&b, &s);
	CU_ASSERT_EQUAL(s.in_flight, 2);
	CU_ASSERT_EQUAL(s.max_in_flight, 2);
	CU_ASSERT_EQUAL(s.queued, 1);
	CU_ASSERT_EQUAL(s.refused, 2);
}

static void test_every_verdict_frees_the_slot(void)
{
	for (int v = 0; v < RX_VERDICT_COUNT; v++) {
		struct rx_bulkhead b;
		struct rx_ticket t, u;
		struct rx_refusal why;
		struct rx_admit_ctx wait = {0, NULL, true, 0, 0};
		init_cap(&b, 1);
		CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &wait, &t, &why),
				RX_ADMIT);
		/* The waiter asks again after the settlement (ADR-420). */
		CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &wait, &u, &why),
				RX_QUEUE);
		struct rx_observation o = {(enum rx_verdict)v, 1000, 0};
		rx_bulkhead_settle(&b, &t, &o);
		CU_ASSERT_EQUAL(b.in_flight, 0);
		CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &wait, &u, &why),
				RX_ADMIT);
	}
}

static void test_release_leaves_no_trace(void)
{
	struct rx_bulkhead a, b;
	struct rx_ticket t;
	struct rx_refusal why;
	struct rx_admit_ctx ctx = {0, NULL, false, 0, 0};
	init_cap(&a, 3);
	init_cap(&b, 3);
	CU_ASSERT_EQUAL(rx_bulkhead_admit(&a, &ctx, &t, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_bulkhead_admit(&b, &ctx, &t, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_bulkhead_admit(&a, &ctx, &t, &why), RX_ADMIT);
	struct rx_observation o = {RX_REJECTED, 0, 0};
	rx_bulkhead_settle(&a, &t, &o);
	CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof(a)), 0);
	/* More settlements than admissions stick at zero. */
	rx_bulkhead_settle(&a, &t, &o);
	rx_bulkhead_settle(&a, &t, &o);
	CU_ASSERT_EQUAL(a.in_flight, 0);
}

/* Eight threads' worth of calls through a cap of 2, in an interleaving
 * drawn from a seeded generator: never more than 2 in flight, and every
 * call that can wait is eventually admitted. */
static void test_eight_callers_cap_two(void)
{
	struct rx_bulkhead b;
	struct rx_rng g;
	struct rx_ticket held[8];
	bool in[8] = {false};
	unsigned done = 0, peak = 0, n_in = 0;
	init_cap(&b, 2);
	rx_rng_seed(&g, 8);
	while (done < 8000) {
		unsigned c = (unsigned)(rx_rng_next(&g) % 8);
		struct rx_admit_ctx ctx = {0, NULL, true, 0, 0};
		struct rx_refusal why;
		if (in[c]) {
			struct rx_observation o = {RX_SUCCESS, 10, 0};
			rx_bulkhead_settle(&b, &held[c], &o);
			in[c] = false;
			n_in--;
			done++;
		} else if (rx_bulkhead_admit(&b, &ctx, &held[c], &why) ==
			   RX_ADMIT) {
			in[c] = true;
			n_in++;
		} else {
			CU_ASSERT_EQUAL(why.reason, RX_REASON_BULKHEAD_FULL);
		}
		if (n_in > peak)
			peak = n_in;
		CU_ASSERT(b.in_flight == n_in);
	}
	CU_ASSERT_EQUAL(peak, 2);
	printf("\n    8 callers, cap 2: %u calls, peak in flight %u\n", done,
	       peak);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"defaults and checks", test_defaults_and_checks},
	    {"cap, queue, refuse", test_cap_queue_refuse},
	    {"every verdict frees the slot", test_every_verdict_frees_the_slot},
	    {"release leaves no trace", test_release_leaves_no_trace},
	    {"eight callers, cap two", test_eight_callers_cap_two},
	    {NULL, NULL},
	};
	return rx_run_suite("bulkhead", tests);
}
