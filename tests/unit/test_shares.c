/*
 * test_shares.c - criticality buckets (src/partition.c), tenant fairness
 * (src/fairshare.c) and their place in the guard, before the limiter
 * (ADR-487 to ADR-489). The clock is injected (fake_clock.h); nothing
 * sleeps.
 */
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "fairshare-inl.h"
#include "resilix.h"

#define MS RX_NS_PER_MS

static void test_partition_defaults_and_shares(void)
{
	struct rx_partition_config c;
	struct rx_partition p;
	const char *why = NULL;
	enum rx_criticality_bucket b;

	rx_partition_config_default(&c);
	CU_ASSERT_EQUAL(c.percent[RX_BUCKET_CRITICAL], 50);
	CU_ASSERT_EQUAL(c.percent[RX_BUCKET_BULK], 10);
	CU_ASSERT_EQUAL(rx_partition_config_check(&c, NULL), RX_OK);
	CU_ASSERT_EQUAL_FATAL(rx_partition_init(&p, &c), RX_OK);
	/* ceil(L x pct), at least 1 (NCL). */
	CU_ASSERT_EQUAL(rx_partition_share(&p, RX_BUCKET_CRITICAL, 9), 5);
	CU_ASSERT_EQUAL(rx_partition_share(&p, RX_BUCKET_BULK, 9), 1);
	CU_ASSERT_EQUAL(rx_partition_share(&p, RX_BUCKET_BULK, 20), 2);
	CU_ASSERT_EQUAL(rx_partition_share(&p, RX_BUCKET_BEST_EFFORT, 20), 3);
	c.percent[RX_BUCKET_BULK] = 11;
	CU_ASSERT_EQUAL(rx_partition_config_check(&c, &why), RX_EINVAL);
	CU_ASSERT_PTR_NOT_NULL(strstr(why, "100"));
	CU_ASSERT_EQUAL(rx_bucket_parse("best_effort", &b), RX_OK);
	CU_ASSERT_EQUAL(b, RX_BUCKET_BEST_EFFORT);
	CU_ASSERT_EQUAL(rx_bucket_parse("Bulk", &b), RX_EINVAL);
	CU_ASSERT_STRING_EQUAL(rx_bucket_name(RX_BUCKET_BULK), "bulk");
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_CRITICALITY_SHED),
			       "criticality-shed");
	CU_ASSERT_STRING_EQUAL(rx_reason_name(RX_REASON_TENANT_SHED),
			       "tenant-shed");
}

static void test_partition_borrow_and_shed(void)
{
	struct rx_partition_config c;
	struct rx_partition p;
	unsigned i;

	rx_partition_config_default(&c);
	CU_ASSERT_EQUAL_FATAL(rx_partition_init(&p, &c), RX_OK);
	/* Below the limit, bulk borrows the whole of it. */
	for (i = 0; i < 10; i++) {
		CU_ASSERT_EQUAL(rx_partition_decide(&p, RX_BUCKET_BULK, 10,
						    false),
				RX_PARTITION_PASS);
		rx_partition_take(&p, RX_BUCKET_BULK);
	}
	/* At the limit, alone: the limiter behind decides. */
	CU_ASSERT_EQUAL(rx_partition_decide(&p, RX_BUCKET_BULK, 10, true),
			RX_PARTITION_PASS);
	/* Critical is guaranteed its 5 even over the limit. */
	for (i = 0; i < 5; i++) {
		CU_ASSERT_EQUAL(rx_partition_decide(&p, RX_BUCKET_CRITICAL,
						    10, true),
				RX_PARTITION_GUARANTEED);
		rx_partition_take(&p, RX_BUCKET_CRITICAL);
	}
	/* Now both are at or above their shares: both shed. */
	CU_ASSERT_EQUAL(rx_partition_decide(&p, RX_BUCKET_BULK, 10, true),
			RX_PARTITION_SHED);
	CU_ASSERT_EQUAL(rx_partition_decide(&p, RX_BUCKET_CRITICAL, 10, true),
			RX_PARTITION_SHED);
	CU_ASSERT_EQUAL(p.shed[RX_BUCKET_BULK], 1);
	CU_ASSERT_EQUAL(p.shed[RX_BUCKET_CRITICAL], 1);
	/* Bulk drains to below its share: guaranteed again. */
	for (i = 0; i < 10; i++)
		rx_partition_give(&p, RX_BUCKET_BULK);
	CU_ASSERT_EQUAL(rx_partition_decide(&p, RX_BUCKET_BULK, 10, true),
			RX_PARTITION_GUARANTEED);
	/* An out-of-range bucket counts as bulk. */
	CU_ASSERT_EQUAL(rx_partition_share(&p, 77, 100), 10);
}

static void test_fairshare_heaviest_shed(void)
{
	struct rx_fairshare_config c;
	struct rx_fairshare f;
	struct fake_clock clk = {1000 * MS};
	struct rx_ticket t;
	unsigned i;

	rx_fairshare_config_default(&c);
	CU_ASSERT_EQUAL(c.half_life_ms, 10000);
	CU_ASSERT_EQUAL_FATAL(rx_fairshare_init(&f, &c), RX_OK);
	for (i = 0; i < 30; i++)
		rx_fairshare_take(&f, 1, clk.now_ns, &t);
	for (i = 0; i < 10; i++)
		rx_fairshare_take(&f, 2, clk.now_ns, &t);
	/* A tenant alone, or no pressure: never shed. */
	CU_ASSERT_FALSE(rx_fairshare_decide(&f, 1, clk.now_ns, false));
	CU_ASSERT_FALSE(rx_fairshare_decide(&f, 0, clk.now_ns, true));
	/* 30 against 10: tenant 1 is at 1.5 x its fair share of 20. */
	CU_ASSERT_TRUE(rx_fairshare_decide(&f, 1, clk.now_ns, true));
	CU_ASSERT_FALSE(rx_fairshare_decide(&f, 2, clk.now_ns, true));
	CU_ASSERT_FALSE(rx_fairshare_decide(&f, 3, clk.now_ns, true));
	CU_ASSERT_EQUAL(f.shed, 1);
	CU_ASSERT_EQUAL(rx_fairshare_active(&f, clk.now_ns, NULL), 2);
	/* Within the slack (25 %): 12 against 10 is not shed. */
	struct rx_fairshare g;
	CU_ASSERT_EQUAL_FATAL(rx_fairshare_init(&g, &c), RX_OK);
	for (i = 0; i < 12; i++)
		rx_fairshare_take(&g, 1, clk.now_ns, &t);
	for (i = 0; i < 10; i++)
		rx_fairshare_take(&g, 2, clk.now_ns, &t);
	CU_ASSERT_FALSE(rx_fairshare_decide(&g, 1, clk.now_ns, true));
}

static void test_fairshare_decays(void)
{
	struct rx_fairshare_config c;
	struct rx_fairshare f;
	struct fake_clock clk = {0};
	struct rx_ticket t;
	uint64_t h0, h1;
	unsigned i;

	rx_fairshare_config_default(&c);
	CU_ASSERT_EQUAL_FATAL(rx_fairshare_init(&f, &c), RX_OK);
	for (i = 0; i < 40; i++)
		rx_fairshare_take(&f, 1, clk.now_ns, &t);
	h0 = rx_fairshare_heaviness(&f, 1, clk.now_ns);
	CU_ASSERT(h0 > 0);
	/* One half-life later a call weighs half. */
	fake_clock_advance_ms(&clk, 10000);
	h1 = rx_fairshare_heaviness(&f, 1, clk.now_ns);
	CU_ASSERT_EQUAL(h1 * 2, h0);
	/* Tenant 2 now calls as much as tenant 1 did: 1 is no longer the
	 * heaviest, and 2, far above its share, is shed. */
	for (i = 0; i < 40; i++)
		rx_fairshare_take(&f, 2, clk.now_ns, &t);
	CU_ASSERT_FALSE(rx_fairshare_decide(&f, 1, clk.now_ns, true));
	CU_ASSERT_TRUE(rx_fairshare_decide(&f, 2, clk.now_ns, true));
	/* Nobody is punished for ever: after 8 half-lives nothing counts. */
	fake_clock_advance_ms(&clk, 8 * 10000);
	CU_ASSERT_EQUAL(rx_fairshare_heaviness(&f, 2, clk.now_ns), 0);
	CU_ASSERT_EQUAL(rx_fairshare_active(&f, clk.now_ns, NULL), 0);
	CU_ASSERT_FALSE(rx_fairshare_decide(&f, 2, clk.now_ns, true));
	/* A clock going back counts as no time passing. */
	rx_fairshare_take(&f, 3, clk.now_ns, &t);
	CU_ASSERT_EQUAL(rx_fairshare_heaviness(&f, 3, 0),
			rx_fairshare_heaviness(&f, 3, clk.now_ns));
}

static void test_fairshare_release_exact(void)
{
	struct rx_fairshare_config c;
	struct rx_fairshare f, before;
	struct rx_ticket t;
	unsigned i;

	rx_fairshare_config_default(&c);
	CU_ASSERT_EQUAL_FATAL(rx_fairshare_init(&f, &c), RX_OK);
	for (i = 0; i < 5; i++)
		rx_fairshare_take(&f, 1, 5 * MS, &t);
	before = f;
	rx_fairshare_take(&f, 7, 6 * MS, &t);
	rx_fairshare_release(&f, &t);
	CU_ASSERT_EQUAL(rx_fairshare_heaviness(&f, 7, 6 * MS), 0);
	CU_ASSERT_EQUAL(rx_fairshare_heaviness(&f, 1, 6 * MS),
			rx_fairshare_heaviness(&before, 1, 6 * MS));
	CU_ASSERT_EQUAL(rx_fairshare_active(&f, 6 * MS, NULL), 1);
	/* The table is full: a ninth tenant is admitted untracked. */
	for (i = 2; i <= RX_FAIRSHARE_TENANTS; i++)
		rx_fairshare_take(&f, i, 6 * MS, &t);
	rx_fairshare_take(&f, 99, 6 * MS, &t);
	CU_ASSERT_EQUAL(t.flags, 0);
	CU_ASSERT_EQUAL(f.untracked, 1);
	CU_ASSERT_FALSE(rx_fairshare_decide(&f, 99, 6 * MS, true));
	rx_fairshare_release(&f, &t);
	CU_ASSERT_EQUAL(f.untracked, 0);
}

/* The guard's inline take (fairshare-inl.h, ADR-490) leaves the table and
 * the ticket exactly as rx_fairshare_take does: within an epoch, at its
 * last nanosecond and the next one, with the clock going back, for a
 * newcomer and for tenant 0. */
static void test_fairshare_inline_take_same(void)
{
	static const uint64_t at_ms[] = {0,	1,     9999,  10000, 5000,
					 10001, 25000, 24000, 95000, 95001};
	static const uint32_t who[] = {1, 2, 1, 3, 0, 1, 2, 2, 1, 4};
	struct rx_fairshare_config c;
	struct rx_fairshare a, b;
	struct rx_ticket ta, tb;
	unsigned i, k;

	rx_fairshare_config_default(&c);
	CU_ASSERT_EQUAL_FATAL(rx_fairshare_init(&a, &c), RX_OK);
	CU_ASSERT_EQUAL_FATAL(rx_fairshare_init(&b, &c), RX_OK);
	for (i = 0; i < sizeof(at_ms) / sizeof(at_ms[0]); i++)
		for (k = 0; k < 3; k++) {
			uint64_t now = at_ms[i] * MS - (k == 2 && at_ms[i]);

			rx_fairshare_take(&a, who[i], now, &ta);
			rx__fairshare_take(&b, who[i], now, &tb);
			CU_ASSERT_EQUAL(memcmp(&a, &b, sizeof(a)), 0);
			CU_ASSERT_EQUAL(memcmp(&ta, &tb, sizeof(ta)), 0);
		}
	/* The epoch's end is kept with the epoch: no division inside it. */
	CU_ASSERT_EQUAL(a.epoch_end_ns, (a.epoch + 1) * c.half_life_ms * MS);
}

/* A guard with shares on and a limiter holding exactly @limit calls. */
static struct rx_window_slot slots[32];
static void make(struct rx_guard *g, uint32_t limit)
{
	struct rx_guard_config c;
	rx_guard_config_default(&c);
	c.breaker.window_calls = 32;
	c.limiter.min_limit = c.limiter.max_limit = limit;
	c.limiter.initial_limit = limit;
	c.limiter.learn_first = false;
	c.shares_on = true;
	CU_ASSERT_EQUAL_FATAL(rx_guard_config_check(&c, NULL), RX_OK);
	CU_ASSERT_EQUAL_FATAL(rx_guard_init(g, &c, slots, 0), RX_OK);
}

static void test_guard_bulk_yields_to_critical(void)
{
	struct rx_guard g;
	struct rx_gate_permit bulk[8], crit[4], p;
	struct rx_refusal why;
	struct rx_admit_ctx cb = {10 * MS, NULL, false, RX_BUCKET_BULK, 5};
	struct rx_admit_ctx cc = {10 * MS, NULL, false, RX_BUCKET_CRITICAL, 6};
	struct rx_observation ok = {RX_SUCCESS, 1000, 20 * MS};
	unsigned i;

	make(&g, 4);
	/* Both buckets have called on the key: from then on every admitted
	 * call is counted (ADR-490). */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &cc, &p, &why), RX_ADMIT);
	rx_guard_settle(&g, &p, &ok);
	/* Bulk borrows the idle limit. */
	for (i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(rx_guard_admit(&g, &cb, &bulk[i], &why),
				RX_ADMIT);
	/* Alone at the limit, bulk meets the limiter's own answer. */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &cb, &p, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_LIMITER_FULL);
	/* Critical is guaranteed ceil(4 x 50 %) = 2 over the limit. */
	for (i = 0; i < 2; i++)
		CU_ASSERT_EQUAL(rx_guard_admit(&g, &cc, &crit[i], &why),
				RX_ADMIT);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 6);
	CU_ASSERT_EQUAL(g.partition.busy[RX_BUCKET_CRITICAL], 2);
	/* Bulk is now shed first, by its reason. */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &cb, &p, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_CRITICALITY_SHED);
	CU_ASSERT_EQUAL(g.counters.refused[RX_REASON_CRITICALITY_SHED], 1);
	/* Everything settles back to nothing. */
	for (i = 0; i < 4; i++)
		rx_guard_settle(&g, &bulk[i], &ok);
	for (i = 0; i < 2; i++)
		rx_guard_settle(&g, &crit[i], &ok);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 0);
	for (i = 0; i < RX_BUCKET_COUNT; i++)
		CU_ASSERT_EQUAL(g.partition.busy[i], 0);
	/* The admitted calls counted for their tenants. */
	CU_ASSERT(rx_fairshare_heaviness(&g.fairshare, 5, 20 * MS) >
		  rx_fairshare_heaviness(&g.fairshare, 6, 20 * MS));
}

static void test_guard_tenant_shed_and_release(void)
{
	struct rx_guard g, before;
	struct rx_gate_permit held[4], p;
	struct rx_refusal why;
	struct rx_admit_ctx heavy = {10 * MS, NULL, false, 0, 1};
	struct rx_admit_ctx light = {10 * MS, NULL, false, 0, 2};
	struct rx_observation ok = {RX_SUCCESS, 1000, 10 * MS};
	struct rx_observation rel = {RX_REJECTED, 0, 10 * MS};
	unsigned i;

	make(&g, 4);
	/* Two tenants have called: every admission counts (ADR-490). */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &light, &p, &why), RX_ADMIT);
	rx_guard_settle(&g, &p, &ok);
	for (i = 0; i < 20; i++) {
		CU_ASSERT_EQUAL(rx_guard_admit(&g, &heavy, &p, &why), RX_ADMIT);
		rx_guard_settle(&g, &p, &ok);
	}
	for (i = 0; i < 4; i++)
		CU_ASSERT_EQUAL(rx_guard_admit(&g, &light, &held[i], &why),
				RX_ADMIT);
	/* At the limit the heavy tenant is shed by fairness, the light
	 * one meets the limiter. */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &heavy, &p, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_TENANT_SHED);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &light, &p, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_LIMITER_FULL);
	for (i = 0; i < 4; i++)
		rx_guard_settle(&g, &held[i], &ok);
	/* admit + settle(RX_REJECTED) leaves the shares as they were. */
	before = g;
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &light, &p, &why), RX_ADMIT);
	rx_guard_settle(&g, &p, &rel);
	CU_ASSERT_EQUAL(memcmp(&g.partition, &before.partition,
			       sizeof(g.partition)),
			0);
	CU_ASSERT_EQUAL(rx_fairshare_heaviness(&g.fairshare, 2, 10 * MS),
			rx_fairshare_heaviness(&before.fairshare, 2, 10 * MS));
}

/* A bucket and a tenant alone on a key are not counted: no share ticket,
 * nothing in busy[] or the tenants' table, and the limiter's own answer at
 * the limit (ADR-490). A second bucket and tenant start the counting; the
 * first one's uncounted calls settle without touching the counts. */
static void test_guard_alone_not_counted(void)
{
	struct rx_guard g;
	struct rx_gate_permit held[4], p, q;
	struct rx_refusal why;
	struct rx_admit_ctx one = {10 * MS, NULL, false, RX_BUCKET_CRITICAL, 7};
	struct rx_admit_ctx two = {10 * MS, NULL, false, RX_BUCKET_BULK, 8};
	struct rx_observation ok = {RX_SUCCESS, 1000, 20 * MS};
	struct rx_observation rel = {RX_REJECTED, 0, 20 * MS};
	unsigned i;

	make(&g, 4);
	for (i = 0; i < 4; i++) {
		CU_ASSERT_EQUAL(rx_guard_admit(&g, &one, &held[i], &why),
				RX_ADMIT);
		CU_ASSERT_EQUAL(held[i].count, 2); /* breaker, limiter */
	}
	CU_ASSERT_EQUAL(g.partition.busy[RX_BUCKET_CRITICAL], 0);
	CU_ASSERT_EQUAL(rx_fairshare_heaviness(&g.fairshare, 7, 10 * MS), 0);
	CU_ASSERT_FALSE(g.fairshare.many);
	/* Alone at the limit: not guaranteed, the limiter refuses. */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &one, &p, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_LIMITER_FULL);
	/* A second bucket and tenant: guaranteed its share, counted. */
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &two, &q, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(q.count, 3);
	CU_ASSERT_EQUAL(g.partition.busy[RX_BUCKET_BULK], 1);
	CU_ASSERT_TRUE(g.fairshare.many);
	CU_ASSERT(rx_fairshare_heaviness(&g.fairshare, 8, 10 * MS) > 0);
	/* The first bucket's calls from before settle leaving the counts;
	 * its calls from now on are counted. */
	for (i = 0; i < 4; i++)
		rx_guard_settle(&g, &held[i], &ok);
	CU_ASSERT_EQUAL(g.partition.busy[RX_BUCKET_CRITICAL], 0);
	CU_ASSERT_EQUAL(g.partition.busy[RX_BUCKET_BULK], 1);
	CU_ASSERT_EQUAL(rx_guard_admit(&g, &one, &p, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(p.count, 3);
	CU_ASSERT_EQUAL(g.partition.busy[RX_BUCKET_CRITICAL], 1);
	CU_ASSERT(rx_fairshare_heaviness(&g.fairshare, 7, 10 * MS) > 0);
	rx_guard_settle(&g, &p, &rel);
	rx_guard_settle(&g, &q, &ok);
	for (i = 0; i < RX_BUCKET_COUNT; i++)
		CU_ASSERT_EQUAL(g.partition.busy[i], 0);
	CU_ASSERT_EQUAL(rx_fairshare_heaviness(&g.fairshare, 7, 10 * MS), 0);
	CU_ASSERT_EQUAL(g.limiter.in_flight, 0);
}

/* With shares on, the fast admission is the limiter's step below its
 * slots: the same permit (the share ticket once a second bucket and
 * tenant called) and the same counts as rx_guard_admit (ADR-492). */
static void test_guard_fast_with_shares(void)
{
	struct rx_guard a, b;
	struct rx_gate_permit pa[4], pb[4], spare;
	struct rx_refusal why;
	struct rx_admit_ctx cx[4] = {{10 * MS, NULL, false, RX_BUCKET_CRITICAL, 1},
				     {10 * MS, NULL, false, RX_BUCKET_CRITICAL, 1},
				     {11 * MS, NULL, false, RX_BUCKET_BULK, 2},
				     {12 * MS, NULL, false, RX_BUCKET_CRITICAL, 1}};
	struct rx_observation ok = {RX_SUCCESS, 1000, 20 * MS};
	unsigned i;

	make(&a, 4);
	make(&b, 4);
	for (i = 0; i < 4; i++) {
		CU_ASSERT_TRUE(rx_guard_admit_fast(&a, &cx[i], &pa[i]));
		CU_ASSERT_EQUAL(rx_guard_admit(&b, &cx[i], &pb[i], &why),
				RX_ADMIT);
		CU_ASSERT_EQUAL(pa[i].count, pb[i].count);
		CU_ASSERT_EQUAL(memcmp(pa[i].tickets, pb[i].tickets,
				       pa[i].count * sizeof(pa[i].tickets[0])),
				0);
	}
	/* Alone, nothing counted; after the second bucket and tenant,
	 * the call carries its share ticket. */
	CU_ASSERT_EQUAL(pa[0].count, 2);
	CU_ASSERT_EQUAL(pa[3].count, 3);
	CU_ASSERT_EQUAL(memcmp(a.partition.busy, b.partition.busy,
			       sizeof(a.partition.busy)),
			0);
	CU_ASSERT_EQUAL(a.partition.busy[RX_BUCKET_CRITICAL], 1);
	/* At the limit: the long way, nothing taken. */
	CU_ASSERT_FALSE(rx_guard_admit_fast(&a, &cx[3], &spare));
	CU_ASSERT_EQUAL(a.limiter.in_flight, 4);
	CU_ASSERT_EQUAL(a.in_flight, 4);
	for (i = 0; i < 4; i++) {
		rx_guard_settle(&a, &pa[i], &ok);
		rx_guard_settle(&b, &pb[i], &ok);
	}
	CU_ASSERT_EQUAL(a.limiter.in_flight, 0);
	CU_ASSERT_EQUAL(a.in_flight, 0);
	for (i = 0; i < RX_BUCKET_COUNT; i++)
		CU_ASSERT_EQUAL(a.partition.busy[i], 0);
}

static void test_guard_shares_off_by_default(void)
{
	struct rx_guard_config c;
	struct rx_guard g;

	rx_guard_config_default(&c);
	CU_ASSERT_FALSE(c.shares_on);
	CU_ASSERT_EQUAL(rx_guard_init(&g, &c, slots, 0), RX_OK);
	CU_ASSERT_FALSE(g.shares_on);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"partition defaults and shares",
	     test_partition_defaults_and_shares},
	    {"partition borrows and sheds", test_partition_borrow_and_shed},
	    {"fairshare sheds the heaviest", test_fairshare_heaviest_shed},
	    {"fairshare decays", test_fairshare_decays},
	    {"fairshare release is exact", test_fairshare_release_exact},
	    {"fairshare: the inline take is the full one",
	     test_fairshare_inline_take_same},
	    {"guard: bulk yields to critical",
	     test_guard_bulk_yields_to_critical},
	    {"guard: tenant shed, release exact",
	     test_guard_tenant_shed_and_release},
	    {"guard: a bucket and a tenant alone are not counted",
	     test_guard_alone_not_counted},
	    {"guard: the fast admission with shares on",
	     test_guard_fast_with_shares},
	    {"guard: shares off by default", test_guard_shares_off_by_default},
	    {NULL, NULL},
	};
	return rx_run_suite("shares", tests);
}
