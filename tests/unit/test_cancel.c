/*
 * test_cancel.c - the ring of the process's own cancels (preload/cancel.c,
 * ADR-676): a noted key is taken once, within the bound, and only by its
 * own key; the ring keeps the last 16.
 */
#include <stdint.h>

#include "../support/cunit_main.h"
#include "cancel.h"

#define S UINT64_C(1000000000)

/* Keys made unique per test, so that tests do not see each other's. */
static uint64_t key(unsigned test, unsigned n)
{
	return (uint64_t)(1000 + test) << 32 | n;
}

static void test_taken_once(void)
{
	rx__cancel_note(key(1, 1), 10 * S);
	CU_ASSERT_FALSE(rx__cancel_take(key(1, 2), 10 * S));
	CU_ASSERT_TRUE(rx__cancel_take(key(1, 1), 10 * S + 3));
	/* One cancel excuses one answer. */
	CU_ASSERT_FALSE(rx__cancel_take(key(1, 1), 10 * S + 4));
	/* Two cancels of one query (^C twice): two answers at most. */
	rx__cancel_note(key(1, 3), 11 * S);
	rx__cancel_note(key(1, 3), 11 * S + 1);
	CU_ASSERT_TRUE(rx__cancel_take(key(1, 3), 11 * S + 2));
	CU_ASSERT_TRUE(rx__cancel_take(key(1, 3), 11 * S + 2));
	CU_ASSERT_FALSE(rx__cancel_take(key(1, 3), 11 * S + 2));
}

static void test_bound(void)
{
	rx__cancel_note(key(2, 1), 20 * S);
	CU_ASSERT_FALSE(
	    rx__cancel_take(key(2, 1), 20 * S + RX_CANCEL_BOUND_NS + 1));
	rx__cancel_note(key(2, 2), 30 * S);
	CU_ASSERT_TRUE(rx__cancel_take(key(2, 2), 30 * S + RX_CANCEL_BOUND_NS));
	/* A note stamped after the answer's clock read counts as now. */
	rx__cancel_note(key(2, 3), 40 * S);
	CU_ASSERT_TRUE(rx__cancel_take(key(2, 3), 40 * S - 5));
}

static void test_zero_and_overwrite(void)
{
	unsigned i;

	rx__cancel_note(0, 50 * S);
	CU_ASSERT_FALSE(rx__cancel_take(0, 50 * S));
	for (i = 0; i < 17; i++)
		rx__cancel_note(key(3, i), 60 * S);
	/* The oldest of 17 was overwritten; the 16 others are there. */
	CU_ASSERT_FALSE(rx__cancel_take(key(3, 0), 60 * S));
	for (i = 1; i < 17; i++)
		CU_ASSERT_TRUE(rx__cancel_take(key(3, i), 60 * S));
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"a cancel is taken once, by its key", test_taken_once},
	    {"only within the bound", test_bound},
	    {"zero keys, and the last 16 kept", test_zero_and_overwrite},
	    {NULL, NULL}};

	return rx_run_suite("cancel", tests);
}
