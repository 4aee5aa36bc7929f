/*
 * test_registry.c - the bounded key registry: lookup, truncation, churn of
 * many more keys than the cap at constant memory (no allocation after
 * create, every guard inside the preallocated arena), an exact LRU model
 * under random churn (which exercises backward-shift deletion), pins, calls
 * in flight, limiter waiters and open breakers never evicted, the overflow
 * counter, and the idle TTL.
 */
#include <malloc.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix.h"

#define MS RX_NS_PER_MS

static struct rx_registry *make(uint32_t max_keys, uint64_t ttl_ms,
				struct rx_guard_config *gc_out)
{
	struct rx_registry_config rc = {.max_keys = max_keys,
					.key_ttl_ms = ttl_ms};
	struct rx_guard_config gc;
	rx_guard_config_default(&gc);
	gc.breaker.window_calls = 16;
	gc.breaker.min_calls = 4;
	gc.breaker.consecutive_backstop = 1;
	if (gc_out != NULL)
		*gc_out = gc;
	struct rx_registry *r = NULL;
	CU_ASSERT_EQUAL(rx_registry_create(&r, &rc, &gc), RX_OK);
	return r;
}

static struct rx_guard *get(struct rx_registry *r, const char *key,
			    uint64_t now)
{
	return rx_registry_acquire(r, key, strlen(key), now);
}

static struct rx_guard *getn(struct rx_registry *r, unsigned n, uint64_t now)
{
	char key[32];
	snprintf(key, sizeof(key), "10.0.%u.%u:443", n / 256, n % 256);
	return get(r, key, now);
}

static void test_create_rejects(void)
{
	struct rx_registry *r = NULL;
	struct rx_registry_config rc;
	struct rx_guard_config gc;
	rx_registry_config_default(&rc);
	CU_ASSERT_EQUAL(rc.max_keys, 1024);
	CU_ASSERT_EQUAL(rc.key_ttl_ms, 600000);
	rx_guard_config_default(&gc);
	rc.max_keys = 0;
	CU_ASSERT_EQUAL(rx_registry_create(&r, &rc, &gc), RX_EINVAL);
	rc.max_keys = 1000001;
	CU_ASSERT_EQUAL(rx_registry_create(&r, &rc, &gc), RX_EINVAL);
	rc.max_keys = 4;
	gc.breaker.open_ms = 0;
	CU_ASSERT_EQUAL(rx_registry_create(&r, &rc, &gc), RX_EINVAL);
	CU_ASSERT_EQUAL(rx_registry_create(NULL, &rc, &gc), RX_EINVAL);
	CU_ASSERT_PTR_NULL(r);
	rx_registry_destroy(NULL);
}

static void test_lookup_and_keys(void)
{
	struct rx_registry *r = make(8, 0, NULL);
	struct rx_guard *a = get(r, "a:1", 1);
	struct rx_guard *b = get(r, "b:1", 1);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_PTR_NOT_EQUAL(a, b);
	CU_ASSERT_PTR_EQUAL(get(r, "a:1", 2), a);
	CU_ASSERT_STRING_EQUAL(rx_registry_key(r, a), "a:1");
	CU_ASSERT(rx_registry_index(r, a) < 8);
	CU_ASSERT_NOT_EQUAL(rx_registry_index(r, a), rx_registry_index(r, b));
	CU_ASSERT_EQUAL(rx_registry_count(r), 2);
	/* An empty key is a key. */
	struct rx_guard *e = rx_registry_acquire(r, "", 0, 3);
	CU_ASSERT_PTR_NOT_NULL(e);
	CU_ASSERT_STRING_EQUAL(rx_registry_key(r, e), "");
	CU_ASSERT_PTR_EQUAL(rx_registry_acquire(r, NULL, 0, 3), e);
	CU_ASSERT_PTR_NULL(rx_registry_acquire(r, NULL, 4, 3));
	/* Prefix keys are distinct. */
	CU_ASSERT_PTR_NOT_EQUAL(get(r, "a:", 3), a);
	rx_registry_destroy(r);
}

static void test_long_keys_truncated(void)
{
	struct rx_registry *r = make(8, 0, NULL);
	char k1[400], k2[400];
	memset(k1, 'x', sizeof(k1));
	memcpy(k2, k1, sizeof(k2));
	k2[399] = 'y'; /* differs only past RX_KEY_MAX */
	struct rx_guard *a = rx_registry_acquire(r, k1, sizeof(k1), 1);
	struct rx_guard *b = rx_registry_acquire(r, k2, sizeof(k2), 1);
	CU_ASSERT_PTR_EQUAL(a, b);
	CU_ASSERT_EQUAL(strlen(rx_registry_key(r, a)), RX_KEY_MAX);
	rx_registry_destroy(r);
}

/* A hash kept from an earlier lookup finds the same guard (ADR-540). */
static void test_acquire_hashed(void)
{
	struct rx_registry *r = make(8, 0, NULL);
	char k1[400];
	struct rx_guard *a = get(r, "127.0.0.1:80", 1);
	uint32_t h = rx_registry_hash("127.0.0.1:80", 12);

	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_EQUAL(
	    rx_registry_acquire_hashed(r, "127.0.0.1:80", 12, h, 2), a);
	/* A new key made through the hashed path is the same key later. */
	struct rx_guard *b = rx_registry_acquire_hashed(
	    r, "[::1]:80", 8, rx_registry_hash("[::1]:80", 8), 3);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_PTR_EQUAL(get(r, "[::1]:80", 4), b);
	/* The hash truncates as acquire does; NULL is the empty key. */
	memset(k1, 'x', sizeof(k1));
	CU_ASSERT_EQUAL(rx_registry_hash(k1, sizeof(k1)),
			rx_registry_hash(k1, RX_KEY_MAX));
	CU_ASSERT_EQUAL(rx_registry_hash(NULL, 0), rx_registry_hash("", 0));
	CU_ASSERT_PTR_NULL(rx_registry_acquire_hashed(NULL, "a", 1, 0, 5));
	rx_registry_destroy(r);
}

static int cmp_ptr(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
	return x < y ? -1 : x > y;
}

static void test_churn_constant_memory(void)
{
	enum { CAP = 1000, KEYS = 10000 };
	struct rx_registry *r = make(CAP, 600000, NULL);
	static uintptr_t arena[CAP];
	uint64_t now = 0;
	for (unsigned i = 0; i < CAP; i++) {
		struct rx_guard *g = getn(r, i, now += MS);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		arena[i] = (uintptr_t)g;
		g->counters.slow =
		    i + 1; /* a marker that says who lives here */
		rx_registry_release(r, g);
	}
	qsort(arena, CAP, sizeof(arena[0]), cmp_ptr);
	struct mallinfo2 before = mallinfo2();
	for (unsigned round = 0; round < 3; round++) {
		for (unsigned i = 0; i < KEYS; i++) {
			struct rx_guard *g = getn(r, i, now += MS);
			CU_ASSERT_PTR_NOT_NULL_FATAL(g);
			uintptr_t p = (uintptr_t)g;
			CU_ASSERT_PTR_NOT_NULL(
			    bsearch(&p, arena, CAP, sizeof(arena[0]), cmp_ptr));
			/* Each round evicts the key before it comes back. */
			if (!(round == 0 && i < CAP))
				CU_ASSERT_EQUAL(g->counters.slow, 0);
			g->counters.slow = i + 1;
			CU_ASSERT(rx_registry_count(r) <= CAP);
			rx_registry_release(r, g);
		}
	}
	struct mallinfo2 after = mallinfo2();
	CU_ASSERT_EQUAL(before.uordblks, after.uordblks);
	CU_ASSERT_EQUAL(before.hblkhd, after.hblkhd);
	CU_ASSERT_EQUAL(rx_registry_count(r), CAP);
	CU_ASSERT_EQUAL(rx_registry_overflows(r), 0);
	/* The last CAP keys are all still there, with their state. */
	for (unsigned i = KEYS - CAP; i < KEYS; i++) {
		struct rx_guard *g = getn(r, i, now += MS);
		CU_ASSERT_EQUAL(g->counters.slow, i + 1);
		rx_registry_release(r, g);
	}
	CU_ASSERT_EQUAL(rx_registry_count(r), CAP);
	rx_registry_destroy(r);
}

/* Random churn against an exact LRU model of the registry. */
static void test_random_churn_matches_lru_model(void)
{
	enum { CAP = 64, KEYS = 300, OPS = 100000 };
	struct rx_registry *r = make(CAP, 0, NULL);
	static uint64_t released_at[KEYS];
	static bool present[KEYS];
	unsigned n_present = 0;
	struct rx_rng rng;
	rx_rng_seed(&rng, 99);
	uint64_t tick = 0;
	char key[32];
	for (unsigned op = 0; op < OPS; op++) {
		/* Skewed keys: collisions and long probe runs both happen. */
		unsigned k = (unsigned)(rx_rng_next(&rng) % KEYS);
		if (rx_rng_next(&rng) % 2)
			k %= 40;
		bool expect_existing = present[k];
		if (!present[k]) {
			if (n_present == CAP) {
				unsigned victim = KEYS;
				for (unsigned j = 0; j < KEYS; j++)
					if (present[j] &&
					    (victim == KEYS ||
					     released_at[j] <
						 released_at[victim]))
						victim = j;
				present[victim] = false;
				n_present--;
			}
			present[k] = true;
			n_present++;
		}
		snprintf(key, sizeof(key), "key-%u", k);
		struct rx_guard *g = get(r, key, ++tick);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		CU_ASSERT_STRING_EQUAL(rx_registry_key(r, g), key);
		CU_ASSERT_EQUAL(g->counters.slow, expect_existing ? k + 1 : 0);
		g->counters.slow = k + 1;
		g->last_used_ns = tick;
		rx_registry_release(r, g);
		released_at[k] = tick;
		CU_ASSERT_EQUAL_FATAL(rx_registry_count(r), n_present);
	}
	rx_registry_destroy(r);
}

static void test_pinned_never_evicted(void)
{
	struct rx_registry *r = make(4, 1000, NULL);
	struct rx_guard *g[4];
	for (unsigned i = 0; i < 4; i++) {
		g[i] = getn(r, i, 1);
		g[i]->counters.slow = i + 1;
	}
	/* Even long past the TTL, pinned keys stay; acquire overflows. */
	CU_ASSERT_PTR_NULL(getn(r, 100, 1000000 * MS));
	CU_ASSERT_PTR_NULL(getn(r, 101, 1000000 * MS));
	CU_ASSERT_EQUAL(rx_registry_overflows(r), 2);
	CU_ASSERT_EQUAL(rx_registry_count(r), 4);
	/* A second pin on g[2]: one release is not enough. */
	CU_ASSERT_PTR_EQUAL(getn(r, 2, 1000000 * MS), g[2]);
	rx_registry_release(r, g[2]);
	CU_ASSERT_PTR_NULL(getn(r, 102, 1000000 * MS));
	CU_ASSERT_EQUAL(rx_registry_overflows(r), 3);
	rx_registry_release(r, g[2]);
	rx_registry_release(r, g[2]); /* double release is ignored */
	struct rx_guard *n = getn(r, 103, 1000000 * MS);
	CU_ASSERT_PTR_EQUAL(n, g[2]); /* the only evictable slot */
	CU_ASSERT_EQUAL(n->counters.slow, 0);
	for (unsigned i = 0; i < 4; i++)
		if (i != 2)
			CU_ASSERT_EQUAL(g[i]->counters.slow, i + 1);
	rx_registry_destroy(r);
}

static void test_in_flight_never_evicted(void)
{
	struct rx_registry *r = make(2, 0, NULL);
	struct rx_admit_ctx ctx = {.now_ns = 1};
	struct rx_gate_permit p;
	struct rx_refusal why;
	struct rx_guard *a = getn(r, 1, 1);
	CU_ASSERT_EQUAL(rx_guard_admit(a, &ctx, &p, &why), RX_ADMIT);
	rx_registry_release(r, a); /* unpinned, call in flight */
	struct rx_guard *b = getn(r, 2, 2);
	rx_registry_release(r, b);
	struct rx_guard *c = getn(r, 3, 3); /* must evict b, not a */
	CU_ASSERT_PTR_EQUAL(c, b);
	CU_ASSERT_EQUAL(a->in_flight, 1);
	CU_ASSERT_PTR_NULL(getn(r, 4, 4)); /* a in flight, c pinned */
	/* The call ends without a pin (discouraged but tolerated): a becomes
	 * evictable and the bounded scan of parked entries finds it. */
	struct rx_observation o = {RX_SUCCESS, 1, 5};
	rx_guard_settle(a, &p, &o);
	struct rx_guard *d = getn(r, 5, 6);
	CU_ASSERT_PTR_EQUAL(d, a);
	CU_ASSERT_EQUAL(rx_registry_overflows(r), 1);
	rx_registry_destroy(r);
}

/* A key whose limiter has a caller waiting (and nothing in flight, no pin:
 * the waiter's connection was closed under it) is never evicted; once the
 * waiter is through and settled, it may go. */
static void test_waiters_never_evicted(void)
{
	struct rx_registry_config rc = {.max_keys = 2, .key_ttl_ms = 1};
	struct rx_guard_config gc;
	rx_guard_config_default(&gc);
	gc.limiter.min_limit = gc.limiter.max_limit = 1;
	gc.limiter.initial_limit = 1;
	struct rx_registry *r = NULL;
	CU_ASSERT_EQUAL_FATAL(rx_registry_create(&r, &rc, &gc), RX_OK);
	struct rx_admit_ctx ctx = {.now_ns = 1, .can_wait = true};
	struct rx_gate_permit p1, p2;
	struct rx_refusal why;
	uint64_t place;
	struct rx_guard *a = getn(r, 1, 1);
	CU_ASSERT_EQUAL(rx_guard_admit(a, &ctx, &p1, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_admit(a, &ctx, &p2, &why), RX_QUEUE);
	CU_ASSERT_EQUAL(rx_guard_enqueue(a, 1, &place), RX_OK);
	struct rx_observation o = {RX_SUCCESS, 1, 2};
	rx_guard_settle(a, &p1, &o);
	CU_ASSERT_EQUAL(a->in_flight, 0);
	CU_ASSERT_EQUAL(rx_guard_waiters(a), 1);
	rx_registry_release(r, a); /* unpinned, idle past the TTL, a waiter */
	for (unsigned i = 2; i < 6; i++) {
		struct rx_guard *g = getn(r, i, 10 * MS * i);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		CU_ASSERT_PTR_NOT_EQUAL(g, a);
		rx_registry_release(r, g);
	}
	CU_ASSERT_EQUAL(rx_guard_waiters(a), 1);
	/* The waiter's turn: admitted, settled without a pin. */
	ctx.now_ns = 60 * MS;
	CU_ASSERT_EQUAL(rx_guard_try_dequeue(a, &ctx, place, &p2, &why),
			RX_ADMIT);
	CU_ASSERT_EQUAL(rx_guard_waiters(a), 0);
	o.now_ns = 61 * MS;
	rx_guard_settle(a, &p2, &o);
	struct rx_guard *g = getn(r, 7, 100 * MS);
	struct rx_guard *h = getn(r, 8, 101 * MS);
	CU_ASSERT_TRUE(g == a || h == a); /* evictable again */
	rx_registry_destroy(r);
}

static void test_open_breaker_never_evicted(void)
{
	struct rx_registry *r = make(2, 1000, NULL);
	struct rx_admit_ctx ctx = {.now_ns = 1};
	struct rx_gate_permit p;
	struct rx_refusal why;
	for (unsigned i = 0; i < 2; i++) {
		struct rx_guard *g = getn(r, i, 1);
		rx_guard_admit(g, &ctx, &p, &why);
		struct rx_observation o = {RX_TRANSIENT, 1, 1};
		rx_guard_settle(g, &p, &o); /* backstop 1: open */
		CU_ASSERT_EQUAL(g->breaker.state, RX_BREAKER_OPEN);
		rx_registry_release(r, g);
	}
	/* Past the TTL and the open period: still not evictable. */
	CU_ASSERT_PTR_NULL(getn(r, 9, 3600000 * MS));
	CU_ASSERT_EQUAL(rx_registry_overflows(r), 1);
	/* The key comes back to an open breaker, not a fresh one. */
	struct rx_guard *g = getn(r, 0, 3600000 * MS);
	CU_ASSERT_EQUAL(g->breaker.state, RX_BREAKER_OPEN);
	rx_registry_destroy(r);
}

static void test_idle_ttl(void)
{
	struct rx_registry *r = make(10, 1000, NULL);
	for (unsigned i = 0; i < 3; i++) {
		struct rx_guard *g = getn(r, i, 1 * MS);
		g->counters.slow = 7;
		rx_registry_release(r, g);
	}
	CU_ASSERT_EQUAL(rx_registry_count(r), 3);
	/* 999 ms idle: nothing goes. */
	struct rx_guard *g = getn(r, 50, 1000 * MS);
	rx_registry_release(r, g);
	CU_ASSERT_EQUAL(rx_registry_count(r), 4);
	/* 1000 ms idle: each acquire sweeps up to two. */
	g = getn(r, 51, 1001 * MS);
	rx_registry_release(r, g);
	CU_ASSERT_EQUAL(rx_registry_count(r), 3);
	/* Key 2 idle past the TTL comes back fresh even if not swept. */
	g = getn(r, 2, 1001 * MS);
	CU_ASSERT_EQUAL(g->counters.slow, 0);
	rx_registry_release(r, g);
	/* Key 50 (idle 1 ms) keeps its state. */
	g = getn(r, 50, 1001 * MS);
	CU_ASSERT_PTR_NOT_NULL(g);
	rx_registry_release(r, g);
	rx_registry_destroy(r);
}

static void count_fn(void *arg, const char *key, struct rx_guard *g)
{
	unsigned *n = arg;
	(*n)++;
	CU_ASSERT_PTR_NOT_NULL(key);
	CU_ASSERT_PTR_NOT_NULL(g);
}

static void test_foreach(void)
{
	struct rx_registry *r = make(16, 0, NULL);
	for (unsigned i = 0; i < 5; i++)
		rx_registry_release(r, getn(r, i, 1));
	unsigned n = 0;
	rx_registry_foreach(r, count_fn, &n);
	CU_ASSERT_EQUAL(n, 5);
	rx_registry_destroy(r);
}

static void test_without_breaker(void)
{
	struct rx_registry_config rc = {.max_keys = 3, .key_ttl_ms = 0};
	struct rx_guard_config gc;
	rx_guard_config_default(&gc);
	gc.breaker_on = false;
	struct rx_registry *r = NULL;
	CU_ASSERT_EQUAL_FATAL(rx_registry_create(&r, &rc, &gc), RX_OK);
	for (unsigned i = 0; i < 20; i++) {
		struct rx_guard *g = getn(r, i, i);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		rx_registry_release(r, g);
	}
	CU_ASSERT_EQUAL(rx_registry_count(r), 3);
	rx_registry_destroy(r);
}

/* Entries never used are handed out in index order; an evicted one is
 * taken again before any never used (ADR-550). */
static void test_untouched_entries_in_order(void)
{
	struct rx_registry *r = make(4, 0, NULL);
	struct rx_guard *g;

	for (unsigned i = 0; i < 4; i++) {
		g = getn(r, i, 1 + i);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		CU_ASSERT_EQUAL(rx_registry_index(r, g), i);
		rx_registry_release(r, g);
	}
	/* Full: the least recently released key (index 0) makes room. */
	g = getn(r, 10, 10);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(rx_registry_index(r, g), 0);
	rx_registry_release(r, g);
	CU_ASSERT_EQUAL(rx_registry_count(r), 4);
	rx_registry_destroy(r);
}

/* Formatting writes the header alone: a key's entry, window slots and
 * index cell are written when the key comes. */
static void test_format_leaves_entries_untouched(void)
{
	struct rx_registry_config rc = {.max_keys = 64, .key_ttl_ms = 0};
	struct rx_guard_config gc;
	struct rx_registry *r = NULL;
	rx_guard_config_default(&gc);
	size_t size = rx_registry_size(&rc, &gc);
	unsigned char *mem = calloc(1, size);
	size_t nonzero = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(mem);
	CU_ASSERT_EQUAL_FATAL(rx_registry_format(mem, size, &rc, &gc, &r),
			      RX_OK);
	for (size_t i = 1024; i < size; i++)
		nonzero += mem[i] != 0;
	CU_ASSERT_EQUAL(nonzero, 0);
	for (uint32_t i = 0; i < rc.max_keys; i++)
		CU_ASSERT_PTR_NULL(rx_registry_guard_at(r, i));
	CU_ASSERT_EQUAL(rx_registry_count(r), 0);
	free(mem);
}

/* Repair keeps the keys and hands out the entries above the last key as
 * never used, the ones below it that were given back first. */
static void test_repair_keeps_untouched_tail(void)
{
	struct rx_registry *r = make(8, 0, NULL);
	struct rx_guard *g;

	for (unsigned i = 0; i < 3; i++)
		rx_registry_release(r, getn(r, i, 1 + i));
	rx_registry_repair(r, NULL, NULL, 10);
	CU_ASSERT_EQUAL(rx_registry_count(r), 3);
	g = getn(r, 1, 11);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(rx_registry_index(r, g), 1);
	rx_registry_release(r, g);
	for (unsigned i = 3; i < 8; i++) {
		g = getn(r, i, 12 + i);
		CU_ASSERT_PTR_NOT_NULL_FATAL(g);
		CU_ASSERT_EQUAL(rx_registry_index(r, g), i);
		rx_registry_release(r, g);
	}
	CU_ASSERT_EQUAL(rx_registry_count(r), 8);
	rx_registry_destroy(r);
}

/* Every walk over the registry - foreach (a fork's, the metrics'), a
 * look-up by index, the snapshot writer's (a state file at exit) - stops
 * at the entries never used: with their pages made unreadable, none of
 * them faults. Each walk used to read every entry, a page each, so a fork
 * of a process with one key faulted in a thousand pages (ADR-550). */
static sigjmp_buf walk_fault;

static void on_walk_fault(int sig)
{
	(void)sig;
	siglongjmp(walk_fault, 1);
}

/* A registry of @rc's keys, default guards, formatted in fresh anonymous
 * pages (a test may make some unreadable); its block's *@size bytes. */
static char *mapped_registry(const struct rx_registry_config *rc,
			     struct rx_registry **r, size_t *size)
{
	struct rx_guard_config gc;
	rx_guard_config_default(&gc);
	*size = rx_registry_size(rc, &gc);
	char *mem = mmap(NULL, *size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(mem != MAP_FAILED);
	CU_ASSERT_EQUAL_FATAL(rx_registry_format(mem, *size, rc, &gc, r),
			      RX_OK);
	return mem;
}

static void test_walks_stop_at_untouched_entries(void)
{
	struct rx_registry_config rc = {.max_keys = 256, .key_ttl_ms = 0};
	struct rx_registry *r = NULL;
	struct sigaction sa = {.sa_handler = on_walk_fault}, old_segv, old_bus;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size;
	char *mem = mapped_registry(&rc, &r, &size);
	for (unsigned i = 0; i < 2; i++)
		rx_registry_release(r, getn(r, i, 1 + i));
	char *e0 = (char *)rx_registry_guard_at(r, 0);
	size_t stride = (size_t)((char *)rx_registry_guard_at(r, 1) - e0);
	uintptr_t lo = ((uintptr_t)e0 + 2 * stride + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)e0 + rc.max_keys * stride) & ~(page - 1);
	CU_ASSERT_FATAL(hi > lo + 16 * page);
	CU_ASSERT_EQUAL_FATAL(mprotect((void *)lo, hi - lo, PROT_NONE), 0);
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	volatile int stage = 0;
	if (sigsetjmp(walk_fault, 1) == 0) {
		unsigned n = 0;
		size_t len = 0;
		rx_registry_foreach(r, count_fn, &n);
		CU_ASSERT_EQUAL(n, 2);
		stage = 1;
		CU_ASSERT_PTR_NULL(rx_registry_guard_at(r, rc.max_keys - 1));
		stage = 2;
		CU_ASSERT_TRUE(rx_snapshot_size(r) > 0);
		stage = 3;
		char buf[4096];
		CU_ASSERT_EQUAL(rx_snapshot_write(r, 10, 10, buf, sizeof(buf),
						  &len),
				RX_OK);
		stage = 4;
	}
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	CU_ASSERT_EQUAL(stage, 4); /* else the walk of that stage faulted */
	CU_ASSERT_EQUAL(mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE),
			0);
	/* The next key still takes the first entry never used. */
	struct rx_guard *g = getn(r, 7, 20);
	CU_ASSERT_EQUAL(rx_registry_index(r, g), 2);
	rx_registry_release(r, g);
	munmap(mem, size);
}

/* A bound on the entries handed out (ADR-680): a new key that would need
 * an entry past it evicts an idle key or is refused, as when the
 * registry is full, and says so through rx_registry_wants_backing; a
 * raised bound hands the next entry out. */
static void test_backed_bound(void)
{
	struct rx_registry *r = make(8, 0, NULL);
	struct rx_guard *a, *b, *c;

	CU_ASSERT_EQUAL(rx_registry_backed(r), 8);
	CU_ASSERT_FALSE(rx_registry_wants_backing(r));
	rx_registry_set_backed(r, 0);
	CU_ASSERT_TRUE(rx_registry_wants_backing(r));
	CU_ASSERT_PTR_NULL(getn(r, 0, 1));
	CU_ASSERT_EQUAL(rx_registry_overflows(r), 1);
	rx_registry_set_backed(r, 1);
	CU_ASSERT_FALSE(rx_registry_wants_backing(r));
	a = getn(r, 0, 2);
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_EQUAL(rx_registry_index(r, a), 0);
	CU_ASSERT_TRUE(rx_registry_wants_backing(r));
	CU_ASSERT_PTR_NULL(getn(r, 1, 3)); /* a is pinned */
	rx_registry_set_backed(r, 2);
	b = getn(r, 1, 4);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(rx_registry_index(r, b), 1);
	/* An idle key's entry is reused rather than one not backed. */
	rx_registry_release(r, a);
	c = getn(r, 2, 5);
	CU_ASSERT_PTR_NOT_NULL_FATAL(c);
	CU_ASSERT_EQUAL(rx_registry_index(r, c), 0);
	CU_ASSERT_EQUAL(rx_registry_count(r), 2);
	rx_registry_set_backed(r, 100); /* clamped to max_keys */
	CU_ASSERT_EQUAL(rx_registry_backed(r), 8);
	rx_registry_release(r, b);
	rx_registry_release(r, c);
	rx_registry_destroy(r);
}

/* The spans of a key are its entry and its window slots, where the
 * registry puts them; the fixed ones are the header before the entries
 * and the hash index after them. */
static void test_spans(void)
{
	struct rx_registry_config rc = {.max_keys = 16, .key_ttl_ms = 0};
	struct rx_registry_span fx[RX_REGISTRY_SPANS], s0[RX_REGISTRY_SPANS],
	    s1[RX_REGISTRY_SPANS], s01[RX_REGISTRY_SPANS];
	struct rx_guard_config gc;
	struct rx_registry *r = make(16, 0, &gc);
	struct rx_guard *g0, *g1;

	g0 = getn(r, 0, 1);
	g1 = getn(r, 1, 1);
	CU_ASSERT_EQUAL_FATAL(rx_registry_fixed_spans(&rc, &gc, fx), 2);
	CU_ASSERT_EQUAL_FATAL(rx_registry_entry_spans(r, 0, 1, s0), 2);
	CU_ASSERT_EQUAL_FATAL(rx_registry_entry_spans(r, 1, 1, s1), 2);
	CU_ASSERT_EQUAL_FATAL(rx_registry_entry_spans(r, 0, 2, s01), 2);
	CU_ASSERT_EQUAL(s0[0].off, (uint64_t)((char *)g0 - (char *)r));
	CU_ASSERT_EQUAL(s1[0].off, (uint64_t)((char *)g1 - (char *)r));
	CU_ASSERT_EQUAL(s1[0].off, s0[0].off + s0[0].len);
	CU_ASSERT_EQUAL(s1[1].off, s0[1].off + s0[1].len);
	CU_ASSERT_EQUAL(s01[0].len, 2 * s0[0].len);
	CU_ASSERT_EQUAL(s01[1].len, 2 * s0[1].len);
	CU_ASSERT_EQUAL(s0[1].len, 16 * sizeof(struct rx_window_slot));
	CU_ASSERT_EQUAL(fx[0].off, 0);
	CU_ASSERT_EQUAL(fx[0].len, s0[0].off);
	CU_ASSERT_TRUE(fx[1].off >= s0[0].off + 16 * s0[0].len);
	CU_ASSERT_TRUE(fx[1].off + fx[1].len <= s0[1].off);
	CU_ASSERT_EQUAL(rx_registry_entry_spans(r, 16, 1, s0), 0);
	CU_ASSERT_EQUAL(rx_registry_entry_spans(r, 15, 9, s0), 2);
	CU_ASSERT_EQUAL(s0[0].len, s1[0].len); /* clamped to one */
	rx_registry_release(r, g0);
	rx_registry_release(r, g1);
	rx_registry_destroy(r);
}

/* Nothing reads an entry past the bound, a repair included: with those
 * pages made unreadable (as a segment's pages on a full tmpfs, whose
 * first touch is a SIGBUS) repair, walks and look-ups do not fault.
 * Repair read the top entry first, so it faulted (ADR-680). */
static void test_nothing_read_past_bound(void)
{
	struct rx_registry_config rc = {.max_keys = 256, .key_ttl_ms = 0};
	struct rx_registry *r = NULL;
	struct sigaction sa = {.sa_handler = on_walk_fault}, old_segv, old_bus;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size;
	char *mem = mapped_registry(&rc, &r, &size);
	rx_registry_set_backed(r, 2);
	struct rx_guard *held[2]; /* pinned: nothing to evict for a third */
	for (unsigned i = 0; i < 2; i++)
		held[i] = getn(r, i, 1 + i);
	struct rx_registry_span sp[RX_REGISTRY_SPANS];
	CU_ASSERT_EQUAL_FATAL(rx_registry_entry_spans(r, 2, 254, sp), 2);
	uintptr_t lo[2], hi[2];
	for (int k = 0; k < 2; k++) {
		lo[k] = ((uintptr_t)mem + sp[k].off + page - 1) & ~(page - 1);
		hi[k] = ((uintptr_t)mem + sp[k].off + sp[k].len) & ~(page - 1);
		CU_ASSERT_FATAL(hi[k] > lo[k] + 8 * page);
		CU_ASSERT_EQUAL_FATAL(
		    mprotect((void *)lo[k], hi[k] - lo[k], PROT_NONE), 0);
	}
	sigaction(SIGSEGV, &sa, &old_segv);
	sigaction(SIGBUS, &sa, &old_bus);
	volatile int stage = 0;
	if (sigsetjmp(walk_fault, 1) == 0) {
		unsigned n = 0;
		rx_registry_repair(r, NULL, NULL, 10);
		stage = 1;
		CU_ASSERT_EQUAL(rx_registry_count(r), 2);
		rx_registry_foreach(r, count_fn, &n);
		CU_ASSERT_EQUAL(n, 2);
		stage = 2;
		CU_ASSERT_PTR_NULL(rx_registry_guard_at(r, rc.max_keys - 1));
		CU_ASSERT_PTR_NULL(getn(r, 9, 11)); /* the bound holds */
		stage = 3;
	}
	sigaction(SIGSEGV, &old_segv, NULL);
	sigaction(SIGBUS, &old_bus, NULL);
	CU_ASSERT_EQUAL(stage, 3); /* else that stage read past the bound */
	for (int k = 0; k < 2; k++)
		CU_ASSERT_EQUAL(mprotect((void *)lo[k], hi[k] - lo[k],
					 PROT_READ | PROT_WRITE),
				0);
	rx_registry_set_backed(r, 3);
	struct rx_guard *g = getn(r, 9, 20);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_EQUAL(rx_registry_index(r, g), 2);
	rx_registry_release(r, g);
	for (unsigned i = 0; i < 2; i++)
		rx_registry_release(r, held[i]);
	munmap(mem, size);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"create rejects", test_create_rejects},
	    {"lookup and keys", test_lookup_and_keys},
	    {"long keys truncated", test_long_keys_truncated},
	    {"acquire with a kept hash", test_acquire_hashed},
	    {"10000 keys through 1000 at constant memory",
	     test_churn_constant_memory},
	    {"random churn matches an LRU model",
	     test_random_churn_matches_lru_model},
	    {"pinned keys never evicted", test_pinned_never_evicted},
	    {"calls in flight never evicted", test_in_flight_never_evicted},
	    {"limiter waiters never evicted", test_waiters_never_evicted},
	    {"open breakers never evicted", test_open_breaker_never_evicted},
	    {"idle ttl", test_idle_ttl},
	    {"foreach", test_foreach},
	    {"without breaker", test_without_breaker},
	    {"untouched entries handed out in order",
	     test_untouched_entries_in_order},
	    {"format leaves the entries untouched",
	     test_format_leaves_entries_untouched},
	    {"repair keeps the untouched tail", test_repair_keeps_untouched_tail},
	    {"walks stop at the untouched entries",
	     test_walks_stop_at_untouched_entries},
	    {"backed bound", test_backed_bound},
	    {"spans of keys and fixed parts", test_spans},
	    {"nothing read past the bound", test_nothing_read_past_bound},
	    {NULL, NULL},
	};
	return rx_run_suite("registry", tests);
}
