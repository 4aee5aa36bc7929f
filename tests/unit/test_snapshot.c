/*
 * test_snapshot.c - snapshot and hydrate of a registry: round trip, the
 * idle gap ageing the window and the open period, and rejection of every
 * corrupted byte, every truncation, a future version and a malformed entry
 * behind a valid checksum - each leaving the registry empty; and the
 * merge of a snapshot into a registry that holds keys (ADR-171).
 */
#include <stdlib.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/fake_clock.h"
#include "resilix.h"

#define MS RX_NS_PER_MS
#define S (1000 * MS)
#define WALL UINT64_C(1700000000000000000) /* some wall-clock instant */

/* Reference bitwise CRC-32 (IEEE), to forge snapshots in tests. */
static uint32_t crc32_ref(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
	}
	return ~c;
}

static void reseal(unsigned char *buf, size_t len)
{
	uint32_t c = crc32_ref(buf, len - 4);
	for (int i = 0; i < 4; i++)
		buf[len - 4 + i] = (unsigned char)(c >> (8 * i));
}

static struct rx_guard_config guard_cfg(void)
{
	struct rx_guard_config gc;
	rx_guard_config_default(&gc);
	gc.breaker.window_calls = 50;
	gc.breaker.min_calls = 10;
	gc.breaker.consecutive_backstop = 4;
	gc.breaker.slow_call_ms = 100;
	gc.breaker.slow_call_rate = 1; /* slow calls recorded, never trip */
	return gc;
}

static struct rx_registry *make(uint32_t max_keys, uint64_t ttl_ms,
				const struct rx_guard_config *gc)
{
	struct rx_registry_config rc = {max_keys, ttl_ms};
	struct rx_registry *r = NULL;
	CU_ASSERT_EQUAL_FATAL(rx_registry_create(&r, &rc, gc), RX_OK);
	return r;
}

/* Drive one call through a key's guard. */
static void call(struct rx_registry *r, const char *key, uint64_t now,
		 enum rx_verdict v, uint64_t latency_ms)
{
	struct rx_guard *g = rx_registry_acquire(r, key, strlen(key), now);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	struct rx_admit_ctx ctx = {.now_ns = now};
	struct rx_gate_permit p;
	struct rx_refusal why;
	if (rx_guard_admit(g, &ctx, &p, &why) == RX_ADMIT) {
		struct rx_observation o = {v, latency_ms * 1000, now};
		rx_guard_settle(g, &p, &o);
	}
	rx_registry_release(r, g);
}

static struct rx_breaker_stats key_stats(struct rx_registry *r, const char *key,
					 uint64_t now)
{
	struct rx_breaker_stats s;
	struct rx_guard *g = rx_registry_acquire(r, key, strlen(key), now);
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	rx_breaker_stats(&g->breaker, now, &s);
	rx_registry_release(r, g);
	return s;
}

/* A registry with a closed key (mixed window), an open key and a key
 * whose window holds one overload. Times end at 1000 s. */
static struct rx_registry *populated(void)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *r = make(16, 600000, &gc);
	uint64_t t = 980 * S;
	for (int i = 0; i < 30; i++, t += S / 2)
		call(r, "10.0.0.1:80", t, i % 4 ? RX_SUCCESS : RX_TRANSIENT,
		     (uint64_t)i * 7);
	for (int i = 0; i < 4; i++)
		call(r, "10.0.0.2:443", 998 * S, RX_TIMEOUT, 1); /* backstop */
	call(r, "api.example:8443", 999 * S, RX_OVERLOAD, 150);
	return r;
}

static unsigned char *snap(struct rx_registry *r, uint64_t now, uint64_t wall,
			   size_t *len)
{
	CU_ASSERT_EQUAL(rx_snapshot_write(r, now, wall, NULL, 0, len),
			RX_ENOSPC);
	unsigned char *buf = malloc(*len);
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	size_t len2 = 0;
	CU_ASSERT_EQUAL_FATAL(rx_snapshot_write(r, now, wall, buf, *len, &len2),
			      RX_OK);
	CU_ASSERT_EQUAL(len2, *len);
	CU_ASSERT_EQUAL(len2, rx_snapshot_size(r));
	return buf;
}

static void assert_same(const struct rx_breaker_stats *a,
			const struct rx_breaker_stats *b)
{
	CU_ASSERT_EQUAL(a->state, b->state);
	CU_ASSERT_EQUAL(a->window_count, b->window_count);
	CU_ASSERT_EQUAL(a->window_failures, b->window_failures);
	CU_ASSERT_EQUAL(a->window_slow, b->window_slow);
	CU_ASSERT_EQUAL(a->consecutive_failures, b->consecutive_failures);
	CU_ASSERT_EQUAL(a->open_remaining_ms, b->open_remaining_ms);
	CU_ASSERT_EQUAL(a->transitions, b->transitions);
	CU_ASSERT_EQUAL(a->starved, b->starved);
}

static void test_crc_reference(void)
{
	CU_ASSERT_EQUAL(crc32_ref((const unsigned char *)"123456789", 9),
			0xcbf43926u);
	struct rx_registry *r = populated();
	size_t len;
	unsigned char *buf = snap(r, 1000 * S, WALL, &len);
	uint32_t want = crc32_ref(buf, len - 4);
	uint32_t got = (uint32_t)buf[len - 4] | (uint32_t)buf[len - 3] << 8 |
		       (uint32_t)buf[len - 2] << 16 |
		       (uint32_t)buf[len - 1] << 24;
	CU_ASSERT_EQUAL(got, want);
	CU_ASSERT_EQUAL(memcmp(buf, "RXSN", 4), 0);
	free(buf);
	rx_registry_destroy(r);
}

static void test_round_trip(void)
{
	static const char *const keys[] = {"10.0.0.1:80", "10.0.0.2:443",
					   "api.example:8443"};
	struct rx_registry *a = populated();
	size_t len;
	unsigned char *buf = snap(a, 1000 * S, WALL, &len);
	/* The header's key count, read alone; nothing without a header. */
	CU_ASSERT_EQUAL(rx_snapshot_keys(buf, len), 3);
	CU_ASSERT_EQUAL(rx_snapshot_keys(buf, 31), 0);
	CU_ASSERT_EQUAL(rx_snapshot_keys("not a snapshot, not at all...!!", 32),
			0);
	CU_ASSERT_EQUAL(rx_snapshot_keys(NULL, 0), 0);
	/* The reader's monotonic clock has another origin; no wall gap. */
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *b = make(16, 600000, &gc);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 7000 * S, WALL),
			RX_OK);
	CU_ASSERT_EQUAL(rx_registry_count(b), 3);
	struct rx_breaker_stats sa, sb;
	for (int i = 0; i < 3; i++) {
		sa = key_stats(a, keys[i], 1000 * S);
		sb = key_stats(b, keys[i], 7000 * S);
		assert_same(&sa, &sb);
	}
	sa = key_stats(a, keys[0], 1000 * S);
	CU_ASSERT_EQUAL(sa.window_count, 30);
	CU_ASSERT_EQUAL(sa.window_failures, 8);
	CU_ASSERT(sa.window_slow > 0);
	sa = key_stats(a, keys[1], 1000 * S);
	CU_ASSERT_EQUAL(sa.state, RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(sa.open_remaining_ms, 3000);
	/* A second round trip gives the same bytes (wall and now shifted). */
	size_t len2;
	unsigned char *buf2 = snap(b, 7000 * S, WALL, &len2);
	CU_ASSERT_EQUAL(len2, len);
	CU_ASSERT_EQUAL(memcmp(buf, buf2, len), 0);
	free(buf2);
	free(buf);
	rx_registry_destroy(a);
	rx_registry_destroy(b);
}

static void test_empty_round_trip(void)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *a = make(4, 0, &gc);
	size_t len;
	unsigned char *buf = snap(a, 1, WALL, &len);
	CU_ASSERT_EQUAL(len, 36);
	struct rx_registry *b = make(4, 0, &gc);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 5, WALL), RX_OK);
	CU_ASSERT_EQUAL(rx_registry_count(b), 0);
	free(buf);
	rx_registry_destroy(a);
	rx_registry_destroy(b);
}

static void test_idle_gap_ages_window(void)
{
	struct rx_guard_config gc = guard_cfg(); /* max age 60 s */
	struct rx_registry *a = make(4, 0, &gc);
	/* Calls aged 50, 40, 30, 20, 10 s at the snapshot (t = 100 s). */
	for (int i = 0; i < 5; i++)
		call(a, "k", (50 + 10 * (uint64_t)i) * S, RX_OVERLOAD, 1);
	size_t len;
	unsigned char *buf = snap(a, 100 * S, WALL, &len);
	const struct {
		uint64_t gap_s;
		uint32_t left;
	} cases[] = {{0, 5}, {5, 5}, {15, 4}, {30, 2}, {49, 1}, {50, 0}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rx_registry *b = make(4, 0, &gc);
		CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 10 * S,
						    WALL + cases[i].gap_s * S),
				RX_OK);
		struct rx_breaker_stats s = key_stats(b, "k", 10 * S);
		CU_ASSERT_EQUAL(s.window_count, cases[i].left);
		CU_ASSERT_EQUAL(s.window_failures, 0);
		rx_registry_destroy(b);
	}
	/* A wall clock that went back counts as no gap. */
	struct rx_registry *b = make(4, 0, &gc);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 10 * S, WALL - S),
			RX_OK);
	CU_ASSERT_EQUAL(key_stats(b, "k", 10 * S).window_count, 5);
	rx_registry_destroy(b);
	free(buf);
	rx_registry_destroy(a);
}

static void test_idle_gap_ages_open_period(void)
{
	struct rx_registry *a = populated(); /* 10.0.0.2 opened at 998 s */
	size_t len;
	unsigned char *buf = snap(a, 1000 * S, WALL, &len);
	struct rx_guard_config gc = guard_cfg();
	const char *k = "10.0.0.2:443";

	struct rx_registry *b = make(16, 600000, &gc);
	rx_snapshot_hydrate(b, buf, len, 50 * S, WALL + 1 * S);
	struct rx_breaker_stats s = key_stats(b, k, 50 * S);
	CU_ASSERT_EQUAL(s.state, RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(s.open_remaining_ms, 2000);
	rx_registry_destroy(b);

	b = make(16, 600000, &gc);
	rx_snapshot_hydrate(b, buf, len, 50 * S, WALL + 3 * S);
	s = key_stats(b, k, 50 * S);
	/* The open period ran out, but the breaker comes back open, opened
	 * that long ago: the first admission moves it to half-open, as a
	 * transition of its own (ADR-367). */
	CU_ASSERT_EQUAL(s.state, RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(s.open_remaining_ms, 0);
	CU_ASSERT_EQUAL(s.probes_in_flight, 0);
	/* One probe is admitted, the next call is refused. */
	struct rx_guard *g = rx_registry_acquire(b, k, strlen(k), 50 * S);
	struct rx_admit_ctx ctx = {.now_ns = 50 * S};
	struct rx_gate_permit p1, p2;
	struct rx_refusal why;
	uint64_t before = g->breaker.transitions;
	CU_ASSERT_EQUAL(rx_guard_admit(g, &ctx, &p1, &why), RX_ADMIT);
	CU_ASSERT_EQUAL(g->breaker.state, RX_BREAKER_HALF_OPEN);
	CU_ASSERT_EQUAL(g->breaker.transitions, before + 1);
	CU_ASSERT_EQUAL(rx_guard_admit(g, &ctx, &p2, &why), RX_REFUSE);
	CU_ASSERT_EQUAL(why.reason, RX_REASON_HALF_OPEN_BUSY);
	struct rx_observation o = {RX_SUCCESS, 1, 50 * S};
	rx_guard_settle(g, &p1, &o);
	CU_ASSERT_EQUAL(g->breaker.state, RX_BREAKER_CLOSED);
	rx_registry_release(b, g);
	rx_registry_destroy(b);
	free(buf);
	rx_registry_destroy(a);
}

static void test_ttl_and_capacity_on_hydrate(void)
{
	struct rx_registry *a = populated();
	size_t len;
	unsigned char *buf = snap(a, 1000 * S, WALL, &len);
	struct rx_guard_config gc = guard_cfg();
	/* Ten idle minutes later: the closed keys are past the TTL, the
	 * open one is kept (it comes back open, its period run out). */
	struct rx_registry *b = make(16, 600000, &gc);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 5 * S, WALL + 600 * S),
			RX_OK);
	CU_ASSERT_EQUAL(rx_registry_count(b), 1);
	CU_ASSERT_EQUAL(key_stats(b, "10.0.0.2:443", 5 * S).state,
			RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(key_stats(b, "10.0.0.2:443", 5 * S).open_remaining_ms,
			0);
	rx_registry_destroy(b);
	/* A registry with room for two keeps two. */
	b = make(2, 600000, &gc);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 5 * S, WALL), RX_OK);
	CU_ASSERT_EQUAL(rx_registry_count(b), 2);
	rx_registry_destroy(b);
	/* A smaller window keeps the newest calls. */
	gc.breaker.window_calls = 10;
	b = make(16, 600000, &gc);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 5 * S, WALL), RX_OK);
	struct rx_breaker_stats s = key_stats(b, "10.0.0.1:80", 5 * S);
	CU_ASSERT_EQUAL(s.window_count, 10);
	CU_ASSERT_EQUAL(s.window_failures, 3); /* calls 20..29: 20, 24, 28 */
	rx_registry_destroy(b);
	free(buf);
	rx_registry_destroy(a);
}

static void test_write_errors(void)
{
	struct rx_registry *a = populated();
	size_t len = 0;
	unsigned char small[8];
	CU_ASSERT_EQUAL(
	    rx_snapshot_write(a, 1, WALL, small, sizeof(small), &len),
	    RX_ENOSPC);
	CU_ASSERT_EQUAL(len, rx_snapshot_size(a));
	CU_ASSERT_EQUAL(rx_snapshot_write(NULL, 1, WALL, small, 8, &len),
			RX_EINVAL);
	CU_ASSERT_EQUAL(rx_snapshot_write(a, 1, WALL, small, 8, NULL),
			RX_EINVAL);
	/* Hydrating into a registry that holds keys is refused. */
	unsigned char *buf = snap(a, 1000 * S, WALL, &len);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(a, buf, len, 1000 * S, WALL),
			RX_EINVAL);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(NULL, buf, len, 1, WALL),
			RX_EINVAL);
	free(buf);
	rx_registry_destroy(a);
}

static void test_every_corrupt_byte_rejected(void)
{
	struct rx_registry *a = populated();
	size_t len;
	unsigned char *buf = snap(a, 1000 * S, WALL, &len);
	unsigned char *bad = malloc(len);
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *b = make(16, 600000, &gc);
	static const unsigned char flips[] = {0x01, 0x80, 0xff, 0x5a};
	for (size_t f = 0; f < sizeof(flips); f++) {
		for (size_t off = 0; off < len; off++) {
			memcpy(bad, buf, len);
			bad[off] ^= flips[f];
			int rc = rx_snapshot_hydrate(b, bad, len, 5 * S, WALL);
			CU_ASSERT(rc == RX_ECORRUPT || rc == RX_EVERSION);
			CU_ASSERT_EQUAL_FATAL(rx_registry_count(b), 0);
		}
	}
	/* And the original still loads into the same registry. */
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 5 * S, WALL), RX_OK);
	CU_ASSERT_EQUAL(rx_registry_count(b), 3);
	free(bad);
	free(buf);
	rx_registry_destroy(a);
	rx_registry_destroy(b);
}

static void test_every_truncation_rejected(void)
{
	struct rx_registry *a = populated();
	size_t len;
	unsigned char *buf = snap(a, 1000 * S, WALL, &len);
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *b = make(16, 600000, &gc);
	for (size_t n = 0; n < len; n++) {
		/* A fresh copy of exactly n bytes, so ASan sees overreads. */
		unsigned char *t = malloc(n ? n : 1);
		memcpy(t, buf, n);
		CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, t, n, 5 * S, WALL),
				RX_ECORRUPT);
		CU_ASSERT_EQUAL_FATAL(rx_registry_count(b), 0);
		free(t);
	}
	/* One byte too many is corruption too. */
	unsigned char *x = malloc(len + 1);
	memcpy(x, buf, len);
	x[len] = 0;
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, x, len + 1, 5 * S, WALL),
			RX_ECORRUPT);
	CU_ASSERT_EQUAL(rx_registry_count(b), 0);
	free(x);
	free(buf);
	rx_registry_destroy(a);
	rx_registry_destroy(b);
}

static void test_future_version_rejected(void)
{
	struct rx_registry *a = populated();
	size_t len;
	unsigned char *buf = snap(a, 1000 * S, WALL, &len);
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *b = make(16, 600000, &gc);
	buf[4] = RX_SNAPSHOT_VERSION + 1;
	reseal(buf, len);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, buf, len, 5 * S, WALL),
			RX_EVERSION);
	CU_ASSERT_EQUAL(rx_registry_count(b), 0);
	free(buf);
	rx_registry_destroy(a);
	rx_registry_destroy(b);
}

/* Offsets of the last entry's fields, found by walking the format. */
static size_t last_entry_offset(const unsigned char *buf, size_t len)
{
	size_t pos = 32, last = 32;
	uint32_t count = (uint32_t)buf[24] | (uint32_t)buf[25] << 8;
	for (uint32_t i = 0; i < count; i++) {
		last = pos;
		size_t kl = (size_t)buf[pos] | (size_t)buf[pos + 1] << 8;
		pos += 2 + kl + 30;
		uint32_t slots = (uint32_t)buf[pos] | (uint32_t)buf[pos + 1]
							  << 8;
		pos += 4 + 9 * (size_t)slots;
	}
	CU_ASSERT_EQUAL(pos, len - 4);
	return last;
}

static void test_malformed_entry_behind_valid_checksum(void)
{
	struct rx_registry *a = populated();
	size_t len;
	unsigned char *buf = snap(a, 1000 * S, WALL, &len);
	size_t last = last_entry_offset(buf, len);
	size_t kl = (size_t)buf[last] | (size_t)buf[last + 1] << 8;
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *b = make(16, 600000, &gc);
	unsigned char *bad = malloc(len);
	/* state 3, unknown entry flag, unknown slot flag, key too long,
	 * entry count one too high, reserved field set. */
	const struct {
		size_t off;
		unsigned char val;
	} cases[] = {{last + 2 + kl, 3},
		     {last + 2 + kl + 1, 2},
		     {len - 4 - 1, 4},
		     {last + 1, 0x7f},
		     {24, 4},
		     {6, 1},
		     {28, 1}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(bad, buf, len);
		bad[cases[i].off] = cases[i].val;
		reseal(bad, len);
		CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, bad, len, 5 * S, WALL),
				RX_ECORRUPT);
		CU_ASSERT_EQUAL_FATAL(rx_registry_count(b), 0);
	}
	/* Slot ages out of order (the newest older than the oldest). */
	memcpy(bad, buf, len);
	size_t first_key = 32;
	size_t k0 = (size_t)bad[first_key] | (size_t)bad[first_key + 1] << 8;
	size_t slots0 = first_key + 2 + k0 + 34;
	memset(bad + slots0 + 9, 0xff, 8);
	reseal(bad, len);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(b, bad, len, 5 * S, WALL),
			RX_ECORRUPT);
	CU_ASSERT_EQUAL(rx_registry_count(b), 0);
	free(bad);
	free(buf);
	rx_registry_destroy(a);
	rx_registry_destroy(b);
}

/* ---- merge (RESILIX_STATE_FILE at exit, ADR-171) ---- */

/* What another process wrote: @key after @n calls of @v at @t. */
static unsigned char *other(const char *key, int n, enum rx_verdict v,
			    uint64_t t, uint64_t now, uint64_t wall,
			    size_t *len)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *w = make(16, 600000, &gc);
	for (int i = 0; i < n; i++)
		call(w, key, t, v, 1);
	unsigned char *buf = snap(w, now, wall, len);
	rx_registry_destroy(w);
	return buf;
}

static void test_merge_adds_keys_and_keeps_newer(void)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *l = make(16, 600000, &gc);
	size_t len, len2;
	unsigned char *a =
	    other("k1", 1, RX_SUCCESS, 100 * S, 100 * S, WALL, &len);
	unsigned char *b =
	    other("k2", 1, RX_TRANSIENT, 100 * S, 100 * S, WALL, &len2);

	/* k1 was used here at 200 s; the other process last used it
	 * 50 s before this merge (the wall gap), at 150 s on our clock.
	 * Both closed: the windows merge, theirs then ours (ADR-221). */
	call(l, "k1", 200 * S, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(
	    rx_snapshot_merge(l, a, len, 200 * S, WALL + 50 * S, 0), RX_OK);
	CU_ASSERT_EQUAL(
	    rx_snapshot_merge(l, b, len2, 200 * S, WALL + 50 * S, 0), RX_OK);
	CU_ASSERT_EQUAL(rx_registry_count(l), 2);
	struct rx_breaker_stats s = key_stats(l, "k1", 200 * S);
	CU_ASSERT_EQUAL(s.window_count, 2);
	CU_ASSERT_EQUAL(s.window_failures, 1);
	CU_ASSERT_EQUAL(s.consecutive_failures, 1); /* ours is the newest */
	s = key_stats(l, "k2", 200 * S);
	CU_ASSERT_EQUAL(s.window_count, 1); /* theirs was added */
	CU_ASSERT_EQUAL(s.consecutive_failures, 1);
	free(a);
	free(b);
	rx_registry_destroy(l);
}

static void test_merge_open_replaces_unless_pinned(void)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *l = make(16, 600000, &gc);
	size_t len;
	/* They tripped k (backstop 4) at 100 s and wrote at once. */
	unsigned char *a =
	    other("k", 4, RX_TRANSIENT, 100 * S, 100 * S, WALL, &len);

	call(l, "k", 50 * S, RX_SUCCESS, 1); /* ours: closed, 50 s ago */
	/* Pinned (a connection open on it): ours stands. */
	struct rx_guard *g = rx_registry_acquire(l, "k", 1, 100 * S);
	CU_ASSERT_EQUAL(rx_snapshot_merge(l, a, len, 100 * S, WALL, 0), RX_OK);
	CU_ASSERT_EQUAL(g->breaker.state, RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(g->breaker.consecutive_failures, 0);
	rx_registry_release(l, g);
	/* Unpinned: their running open period replaces it. */
	CU_ASSERT_EQUAL(rx_snapshot_merge(l, a, len, 100 * S, WALL, 0), RX_OK);
	struct rx_breaker_stats s = key_stats(l, "k", 100 * S);
	CU_ASSERT_EQUAL(s.state, RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(s.window_count, 4);
	CU_ASSERT_EQUAL(s.window_failures, 4);
	CU_ASSERT_EQUAL(rx_registry_count(l), 1);
	free(a);
	rx_registry_destroy(l);
}

/* A registry hydrated from @file at @t (wall WALL + @t): a process that
 * started then. */
static struct rx_registry *started(const unsigned char *file, size_t len,
				   uint64_t t, const struct rx_guard_config *gc)
{
	struct rx_registry *r = make(16, 600000, gc);
	CU_ASSERT_EQUAL(rx_snapshot_hydrate(r, file, len, t, WALL + t), RX_OK);
	return r;
}

/* ADR-221: processes that overlap add their calls up. Two processes
 * start from the same file (one failure on k), each fails once more; the
 * first to exit writes, the second merges at exit: three failures, not
 * two, and the next process's failure reaches the backstop (4). A
 * success by the first, later than the second's failure, ends the run. */
static void test_merge_overlapping_processes_add_up(void)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *base = make(16, 600000, &gc);
	size_t len0, len1, len2;
	call(base, "k", 100 * S, RX_TRANSIENT, 1);
	unsigned char *f0 = snap(base, 100 * S, WALL + 100 * S, &len0);

	for (int late_success = 0; late_success < 2; late_success++) {
		struct rx_registry *a = started(f0, len0, 101 * S, &gc);
		struct rx_registry *b = started(f0, len0, 101 * S, &gc);
		call(a, "k", 102 * S, RX_TRANSIENT, 1);
		call(b, "k", 103 * S,
		     late_success ? RX_SUCCESS : RX_TRANSIENT, 1);
		unsigned char *f1 = snap(b, 104 * S, WALL + 104 * S, &len1);
		CU_ASSERT_EQUAL(rx_snapshot_merge(a, f1, len1, 105 * S,
						  WALL + 105 * S, 101 * S),
				RX_OK);
		struct rx_breaker_stats s = key_stats(a, "k", 105 * S);
		CU_ASSERT_EQUAL(s.state, RX_BREAKER_CLOSED);
		CU_ASSERT_EQUAL(s.window_count, 3);
		CU_ASSERT_EQUAL(s.window_failures, late_success ? 2 : 3);
		CU_ASSERT_EQUAL(s.consecutive_failures, late_success ? 0 : 3);
		unsigned char *f2 = snap(a, 106 * S, WALL + 106 * S, &len2);
		struct rx_registry *c = started(f2, len2, 107 * S, &gc);
		call(c, "k", 108 * S, RX_TRANSIENT, 1);
		CU_ASSERT_EQUAL(key_stats(c, "k", 108 * S).state,
				late_success ? RX_BREAKER_CLOSED
					     : RX_BREAKER_OPEN);
		/* Merging the file it wrote, with @since moved to that
		 * write, adds nothing twice. */
		CU_ASSERT_EQUAL(rx_snapshot_merge(a, f2, len2, 106 * S,
						  WALL + 106 * S, 106 * S),
				RX_OK);
		CU_ASSERT_EQUAL(key_stats(a, "k", 106 * S).window_count, 3);
		free(f1);
		free(f2);
		rx_registry_destroy(a);
		rx_registry_destroy(b);
		rx_registry_destroy(c);
	}
	free(f0);
	rx_registry_destroy(base);
}

/* ADR-684: two processes start from a file with two failures on k and
 * fail once more each, three in a row as each sees it, below the
 * backstop (4); the second's merge at exit writes four. The next process
 * trips as it reads the file, before its first call, which is refused. */
static void test_hydrate_trips_on_added_up_counts(void)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *base = make(16, 600000, &gc);
	size_t len0, len1, len2;
	call(base, "k", 100 * S, RX_TRANSIENT, 1);
	call(base, "k", 100 * S, RX_TRANSIENT, 1);
	unsigned char *f0 = snap(base, 100 * S, WALL + 100 * S, &len0);
	struct rx_registry *a = started(f0, len0, 101 * S, &gc);
	struct rx_registry *b = started(f0, len0, 101 * S, &gc);

	call(a, "k", 102 * S, RX_TRANSIENT, 1);
	call(b, "k", 103 * S, RX_TRANSIENT, 1);
	CU_ASSERT_EQUAL(key_stats(a, "k", 103 * S).state, RX_BREAKER_CLOSED);
	CU_ASSERT_EQUAL(key_stats(b, "k", 103 * S).state, RX_BREAKER_CLOSED);
	unsigned char *f1 = snap(b, 104 * S, WALL + 104 * S, &len1);
	CU_ASSERT_EQUAL(
	    rx_snapshot_merge(a, f1, len1, 105 * S, WALL + 105 * S, 101 * S),
	    RX_OK);
	unsigned char *f2 = snap(a, 106 * S, WALL + 106 * S, &len2);
	struct rx_registry *c = started(f2, len2, 107 * S, &gc);
	struct rx_breaker_stats s = key_stats(c, "k", 107 * S);
	CU_ASSERT_EQUAL(s.state, RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(s.consecutive_failures, 4);

	struct rx_guard *g = rx_registry_acquire(c, "k", 1, 107 * S);
	struct rx_admit_ctx ctx = {.now_ns = 107 * S};
	struct rx_gate_permit p;
	struct rx_refusal why;
	CU_ASSERT_PTR_NOT_NULL_FATAL(g);
	CU_ASSERT_NOT_EQUAL(rx_guard_admit(g, &ctx, &p, &why), RX_ADMIT);
	rx_registry_release(c, g);
	free(f0);
	free(f1);
	free(f2);
	rx_registry_destroy(a);
	rx_registry_destroy(b);
	rx_registry_destroy(c);
	rx_registry_destroy(base);
}

/* The merged window keeps the newest window-size calls of both, in time
 * order, whichever side they come from and wherever ours sat in the
 * ring; their slots aged past the window's max age are left out. */
static void test_merge_window_order_and_bounds(void)
{
	struct rx_guard_config gc = guard_cfg();
	gc.breaker.window_calls = 4;
	gc.breaker.min_calls = 2;
	gc.breaker.consecutive_backstop = 0;
	gc.breaker.failure_rate = 1;
	size_t len;
	struct rx_breaker_stats s;

	/* Theirs: failures at 10, 20, 30, 40 s; ours: successes at 15, 25,
	 * 35 s. Newest four: 25s 30f 35s 40f. */
	struct rx_registry *t = make(16, 600000, &gc);
	for (int i = 1; i <= 4; i++)
		call(t, "k", (uint64_t)i * 10 * S, RX_TRANSIENT, 1);
	unsigned char *f = snap(t, 40 * S, WALL + 40 * S, &len);
	struct rx_registry *o = make(16, 600000, &gc);
	for (int i = 1; i <= 3; i++)
		call(o, "k", (uint64_t)(i * 10 + 5) * S, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(
	    rx_snapshot_merge(o, f, len, 41 * S, WALL + 41 * S, 0), RX_OK);
	s = key_stats(o, "k", 41 * S);
	CU_ASSERT_EQUAL(s.window_count, 4);
	CU_ASSERT_EQUAL(s.window_failures, 2);
	CU_ASSERT_EQUAL(s.consecutive_failures, 1);
	rx_registry_destroy(o);

	/* Ours moved down the ring: three calls it hydrated at 5..7 s (not
	 * its own: before since), then its own failures at 50 and 51 s;
	 * their file holds one success at 45 s. Merged: 45s 50f 51f. */
	struct rx_registry *h = make(16, 600000, &gc);
	for (int i = 5; i <= 7; i++)
		call(h, "k", (uint64_t)i * S, RX_SUCCESS, 1);
	unsigned char *fh = snap(h, 7 * S, WALL + 7 * S, &len);
	o = started(fh, len, 8 * S, &gc);
	free(fh);
	call(o, "k", 50 * S, RX_TRANSIENT, 1);
	call(o, "k", 51 * S, RX_TRANSIENT, 1);
	struct rx_registry *t2 = make(16, 600000, &gc);
	call(t2, "k", 45 * S, RX_SUCCESS, 1);
	free(f);
	f = snap(t2, 45 * S, WALL + 45 * S, &len);
	CU_ASSERT_EQUAL(
	    rx_snapshot_merge(o, f, len, 52 * S, WALL + 52 * S, 8 * S), RX_OK);
	s = key_stats(o, "k", 52 * S);
	CU_ASSERT_EQUAL(s.window_count, 3);
	CU_ASSERT_EQUAL(s.window_failures, 2);
	CU_ASSERT_EQUAL(s.consecutive_failures, 2);

	/* Theirs all newer than ours and the window full of them: ours
	 * drop out. */
	struct rx_registry *o2 = make(16, 600000, &gc);
	call(o2, "k", 1 * S, RX_TRANSIENT, 1);
	free(f);
	f = snap(t, 40 * S, WALL + 40 * S, &len);
	CU_ASSERT_EQUAL(
	    rx_snapshot_merge(o2, f, len, 41 * S, WALL + 41 * S, 0), RX_OK);
	s = key_stats(o2, "k", 41 * S);
	CU_ASSERT_EQUAL(s.window_count, 4);
	CU_ASSERT_EQUAL(s.window_failures, 4);
	/* Every slot a failure: their run of 4 goes on under ours, which
	 * dropped out of the window (0 kept): 4. */
	CU_ASSERT_EQUAL(s.consecutive_failures, 4);

	/* Their slots past the max age (60 s by default) are left out. */
	struct rx_registry *o3 = make(16, 600000, &gc);
	call(o3, "k", 200 * S, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(
	    rx_snapshot_merge(o3, f, len, 200 * S, WALL + 200 * S, 0), RX_OK);
	s = key_stats(o3, "k", 200 * S);
	CU_ASSERT_EQUAL(s.window_count, 1);
	CU_ASSERT_EQUAL(s.window_failures, 0);
	free(f);
	rx_registry_destroy(t);
	rx_registry_destroy(t2);
	rx_registry_destroy(h);
	rx_registry_destroy(o);
	rx_registry_destroy(o2);
	rx_registry_destroy(o3);
}

static void test_merge_running_open_period_wins(void)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *l = make(16, 600000, &gc);
	size_t len;
	/* They tripped k (backstop 4) at 100 s and wrote at 101 s. */
	unsigned char *a =
	    other("k", 4, RX_TIMEOUT, 100 * S, 101 * S, WALL, &len);

	/* Ours is closed and used later, 2 s after their write. */
	call(l, "k", 300 * S, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(rx_snapshot_merge(l, a, len, 300 * S, WALL + 2 * S, 0),
			RX_OK);
	struct rx_breaker_stats s = key_stats(l, "k", 300 * S);
	CU_ASSERT_EQUAL(s.state, RX_BREAKER_OPEN);
	CU_ASSERT_EQUAL(s.open_remaining_ms, gc.breaker.open_ms - 3000);

	/* Once their open period has run out, recency decides again. */
	struct rx_registry *l2 = make(16, 600000, &gc);
	call(l2, "k", 300 * S, RX_SUCCESS, 1);
	CU_ASSERT_EQUAL(
	    rx_snapshot_merge(l2, a, len, 300 * S,
			      WALL + 2 * S + gc.breaker.open_ms * MS, 0),
	    RX_OK);
	s = key_stats(l2, "k", 300 * S);
	CU_ASSERT_EQUAL(s.state, RX_BREAKER_CLOSED);

	/* An open breaker here stands against their closed, newer one. */
	unsigned char *b =
	    other("j", 1, RX_SUCCESS, 400 * S, 400 * S, WALL, &len);
	for (int i = 0; i < 4; i++)
		call(l, "j", 399 * S, RX_TIMEOUT, 1);
	CU_ASSERT_EQUAL(rx_snapshot_merge(l, b, len, 400 * S, WALL, 0), RX_OK);
	s = key_stats(l, "j", 400 * S);
	CU_ASSERT_EQUAL(s.state, RX_BREAKER_OPEN);
	free(a);
	free(b);
	rx_registry_destroy(l);
	rx_registry_destroy(l2);
}

static void test_merge_corrupt_leaves_registry(void)
{
	struct rx_guard_config gc = guard_cfg();
	struct rx_registry *l = make(16, 600000, &gc);
	size_t len;
	unsigned char *a =
	    other("k2", 3, RX_TRANSIENT, 100 * S, 100 * S, WALL, &len);

	call(l, "k1", 100 * S, RX_TRANSIENT, 1);
	a[len / 2] ^= 0x40;
	CU_ASSERT_EQUAL(rx_snapshot_merge(l, a, len, 100 * S, WALL, 0),
			RX_ECORRUPT);
	a[len / 2] ^= 0x40;
	a[4] = 9; /* version */
	CU_ASSERT_EQUAL(rx_snapshot_merge(l, a, len, 100 * S, WALL, 0),
			RX_EVERSION);
	CU_ASSERT_EQUAL(rx_registry_count(l), 1);
	CU_ASSERT_EQUAL(key_stats(l, "k1", 100 * S).consecutive_failures, 1);
	CU_ASSERT_EQUAL(rx_snapshot_merge(NULL, a, len, 100 * S, WALL, 0),
			RX_EINVAL);
	free(a);
	rx_registry_destroy(l);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"crc matches the reference", test_crc_reference},
	    {"round trip", test_round_trip},
	    {"empty round trip", test_empty_round_trip},
	    {"idle gap ages the window", test_idle_gap_ages_window},
	    {"idle gap ages the open period", test_idle_gap_ages_open_period},
	    {"ttl and capacity on hydrate", test_ttl_and_capacity_on_hydrate},
	    {"write errors", test_write_errors},
	    {"every corrupt byte rejected", test_every_corrupt_byte_rejected},
	    {"every truncation rejected", test_every_truncation_rejected},
	    {"future version rejected", test_future_version_rejected},
	    {"malformed entry behind a valid checksum",
	     test_malformed_entry_behind_valid_checksum},
	    {"merge adds keys and keeps newer", test_merge_adds_keys_and_keeps_newer},
	    {"merge: open replaces unless pinned",
	     test_merge_open_replaces_unless_pinned},
	    {"merge: overlapping processes add up",
	     test_merge_overlapping_processes_add_up},
	    {"hydrate: counts added up past a rule trip at once",
	     test_hydrate_trips_on_added_up_counts},
	    {"merge: window order and bounds", test_merge_window_order_and_bounds},
	    {"merge: a running open period wins",
	     test_merge_running_open_period_wins},
	    {"merge: corrupt leaves the registry",
	     test_merge_corrupt_leaves_registry},
	    {NULL, NULL},
	};
	return rx_run_suite("snapshot", tests);
}
