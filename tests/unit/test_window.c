/*
 * test_window.c - the dual-bound window: count bound, age bound (strictly
 * younger stays), running counters, wrap-around, window of one.
 */
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix.h"

#define MS RX_NS_PER_MS

/* Recount from the slots: the running counters must always agree. */
static void assert_consistent(const struct rx_window *w)
{
	uint32_t f = 0, s = 0;
	for (uint32_t k = 0; k < w->count; k++) {
		uint32_t i = (w->tail + k) % w->capacity;
		f += (rx_window_slots(w)[i].flags & RX_SLOT_FAILURE) != 0;
		s += (rx_window_slots(w)[i].flags & RX_SLOT_SLOW) != 0;
	}
	CU_ASSERT_EQUAL(f, w->failures);
	CU_ASSERT_EQUAL(s, w->slow);
	CU_ASSERT(w->count <= w->capacity);
}

static void test_init_rejects(void)
{
	struct rx_window w;
	struct rx_window_slot s[4];
	CU_ASSERT_EQUAL(rx_window_init(&w, NULL, 4, 0), RX_EINVAL);
	CU_ASSERT_EQUAL(rx_window_init(&w, s, 0, 0), RX_EINVAL);
	CU_ASSERT_EQUAL(rx_window_init(&w, s, 1000001, 0), RX_EINVAL);
	CU_ASSERT_EQUAL(rx_window_init(&w, s, 4, 0), RX_OK);
	CU_ASSERT_EQUAL(w.count, 0);
}

static void test_count_bound(void)
{
	struct rx_window w;
	struct rx_window_slot s[3];
	rx_window_init(&w, s, 3, 0);
	rx_window_push(&w, 1, RX_SLOT_FAILURE);
	rx_window_push(&w, 2, 0);
	rx_window_push(&w, 3, RX_SLOT_SLOW);
	CU_ASSERT_EQUAL(w.count, 3);
	CU_ASSERT_EQUAL(w.failures, 1);
	CU_ASSERT_EQUAL(w.slow, 1);
	rx_window_push(&w, 4, 0); /* evicts the failure */
	CU_ASSERT_EQUAL(w.count, 3);
	CU_ASSERT_EQUAL(w.failures, 0);
	CU_ASSERT_EQUAL(w.slow, 1);
	assert_consistent(&w);
}

static void test_window_of_one(void)
{
	struct rx_window w;
	struct rx_window_slot s[1];
	rx_window_init(&w, s, 1, 0);
	for (int i = 0; i < 10; i++) {
		rx_window_push(&w, (uint64_t)i, i % 2 ? RX_SLOT_FAILURE : 0);
		CU_ASSERT_EQUAL(w.count, 1);
		CU_ASSERT_EQUAL(w.failures, (uint32_t)(i % 2));
	}
}

static void test_age_bound_strict(void)
{
	struct rx_window w;
	struct rx_window_slot s[8];
	rx_window_init(&w, s, 8, 100 * MS);
	rx_window_push(&w, 0, RX_SLOT_FAILURE);
	rx_window_push(&w, 50 * MS, 0);
	rx_window_expire(&w, 100 * MS - 1);
	CU_ASSERT_EQUAL(w.count, 2);
	rx_window_expire(&w, 100 * MS); /* age == max age: gone */
	CU_ASSERT_EQUAL(w.count, 1);
	CU_ASSERT_EQUAL(w.failures, 0);
	CU_ASSERT_EQUAL(w.aged_out, 1);
	rx_window_expire(&w, 1000 * MS);
	CU_ASSERT_EQUAL(w.count, 0);
	CU_ASSERT_EQUAL(w.aged_out, 2);
	assert_consistent(&w);
}

static void test_push_expires(void)
{
	struct rx_window w;
	struct rx_window_slot s[8];
	rx_window_init(&w, s, 8, 10 * MS);
	for (int i = 0; i < 5; i++)
		rx_window_push(&w, (uint64_t)i * MS, RX_SLOT_FAILURE);
	rx_window_push(&w, 12 * MS, 0); /* 0,1,2 ms are >= 10 ms old */
	CU_ASSERT_EQUAL(w.count, 3);
	CU_ASSERT_EQUAL(w.failures, 2);
	assert_consistent(&w);
}

static void test_future_slot_has_age_zero(void)
{
	struct rx_window w;
	struct rx_window_slot s[2];
	rx_window_init(&w, s, 2, 10 * MS);
	rx_window_push(&w, 100 * MS, 0);
	rx_window_expire(&w, 5 * MS); /* a reading from before the slot */
	CU_ASSERT_EQUAL(w.count, 1);
}

static void test_clear(void)
{
	struct rx_window w;
	struct rx_window_slot s[4];
	rx_window_init(&w, s, 4, 0);
	rx_window_push(&w, 1, RX_SLOT_FAILURE | RX_SLOT_SLOW);
	rx_window_clear(&w);
	CU_ASSERT_EQUAL(w.count, 0);
	CU_ASSERT_EQUAL(w.failures, 0);
	CU_ASSERT_EQUAL(w.slow, 0);
	rx_window_push(&w, 2, 0);
	CU_ASSERT_EQUAL(w.count, 1);
	assert_consistent(&w);
}

static void test_random_wraparound_consistent(void)
{
	struct rx_window w;
	struct rx_window_slot s[7];
	struct rx_rng rng;
	rx_rng_seed(&rng, 1);
	rx_window_init(&w, s, 7, 20 * MS);
	uint64_t now = 0;
	for (int i = 0; i < 20000; i++) {
		now += rx_rng_next(&rng) % (6 * MS);
		uint32_t f = (uint32_t)(rx_rng_next(&rng) & 3);
		if (rx_rng_next(&rng) % 5 == 0)
			rx_window_expire(&w, now);
		else
			rx_window_push(&w, now, f);
		assert_consistent(&w);
		/* Every slot is younger than max age after a push/expire. */
		if (w.count > 0)
			CU_ASSERT(now - rx_window_slots(&w)[w.tail].t_ns < 20 * MS);
	}
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"init rejects bad arguments", test_init_rejects},
	    {"count bound evicts oldest", test_count_bound},
	    {"window of one", test_window_of_one},
	    {"age bound is strict", test_age_bound_strict},
	    {"push expires by age", test_push_expires},
	    {"slot from the future has age zero",
	     test_future_slot_has_age_zero},
	    {"clear", test_clear},
	    {"random history keeps counters consistent",
	     test_random_wraparound_consistent},
	    {NULL, NULL},
	};
	return rx_run_suite("window", tests);
}
