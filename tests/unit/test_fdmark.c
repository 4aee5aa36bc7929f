/*
 * test_fdmark.c - what socket() said of a number, as a connect takes it
 * (preload/fdmark.h, ADR-542, ADR-631, ADR-671): a stream mark becomes
 * the connecting kind and keeps its non-blocking bit, a void one reads
 * as nothing known, and no stream mark outlives its connect, whatever an
 * fcntl on another thread does meanwhile.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>

#include "../support/cunit_main.h"
#include "fdmark.h"

/* The shim's table, as rx__fdtable_init would map it: 8 numbers. */
_Atomic uint64_t *rx__fd_marks;
_Atomic uint32_t rx__fd_doubt;
_Atomic uint32_t rx__fd_capacity = 8;
static _Atomic uint64_t marks[8];

static unsigned kind_of(int fd)
{
	return (unsigned)(atomic_load(&marks[fd]) >> 32) & 0xffu;
}

static void test_take(void)
{
	rx__fd_marks = marks;
	rx__fd_mark_set(3, RX_MARK_STREAM);
	rx__fd_mark_flags(3, true);
	CU_ASSERT_EQUAL(rx__fd_mark_take(3), RX_MARK_STREAM);
	CU_ASSERT_EQUAL(kind_of(3), RX_MARK_CONNECTING);
	CU_ASSERT_TRUE(rx__fd_mark_nonblock(3));
	/* Taken once: the next connect knows nothing. */
	CU_ASSERT_EQUAL(rx__fd_mark_take(3), RX_MARK_CONNECTING);
	CU_ASSERT_EQUAL(kind_of(3), 0);
	rx__fd_mark_set(4, RX_MARK_OTHER);
	CU_ASSERT_EQUAL(rx__fd_mark_take(4), RX_MARK_OTHER);
	CU_ASSERT_EQUAL(kind_of(4), 0);
	/* A close the shim did not see voids the mark. */
	rx__fd_mark_set(5, RX_MARK_STREAM);
	atomic_fetch_add(&rx__fd_doubt, 1);
	CU_ASSERT_EQUAL(rx__fd_mark_take(5), 0);
	CU_ASSERT_EQUAL(atomic_load(&marks[5]), 0);
}

static atomic_bool stop;

static void *flip(void *arg)
{
	bool nonblock = false;

	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		rx__fd_mark_flags(3, nonblock);
		nonblock = !nonblock;
	}
	return NULL;
}

/* ADR-671: a take that lost its exchange to an fcntl's RX_MARK_NONBLOCK
 * returned nothing known and left RX_MARK_STREAM on the number it
 * connected (up to hundreds of thousands in 20 million takes against
 * a flipping thread), so that a later connect took it for a fresh
 * socket. Not deterministic - the window is a few instructions, and the
 * two threads must run at once: without the fix two runs in three failed
 * on a loaded two-core machine - but with it no interleaving leaves one,
 * so a failure here is always a fault. */
static void test_take_beside_fcntl(void)
{
	pthread_t t;
	long left = 0;

	rx__fd_marks = marks;
	atomic_store(&stop, false);
	CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, flip, NULL), 0);
	for (long i = 0; i < 20000000; i++) {
		rx__fd_mark_set(3, RX_MARK_STREAM);
		rx__fd_mark_take(3);
		left += kind_of(3) == RX_MARK_STREAM;
	}
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	CU_ASSERT_EQUAL(left, 0);
	if (left)
		fprintf(stderr, "stream marks left after a take: %ld\n", left);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"a connect takes the mark once", test_take},
	    {"no stream mark outlives its take beside an fcntl",
	     test_take_beside_fcntl},
	    {NULL, NULL}};

	return rx_run_suite("fdmark", tests);
}
