/*
 * registry.c - the bounded key registry (registry.h).
 *
 * Memory: rx_registry_create makes every allocation the registry will ever
 * make - the entries (guard + key bytes), the window slots of every guard,
 * and the hash index - so the number of keys an attacker or tenant can
 * invent changes nothing but which keys are present.
 *
 * Lookup: open addressing with linear probing over a power-of-two table at
 * most half full, hashed with 32-bit FNV-1a (Fowler, Noll, Vo). Removal
 * uses backward-shift deletion (Knuth, TAOCP vol. 3, 6.4 Algorithm R), so
 * there are no tombstones and probe sequences stay as short after a million
 * evictions as on the first day.
 *
 * Eviction: an entry may go only when unpinned, with no call in flight, no
 * caller waiting in its limiter's queue, and its breaker closed (an open breaker is the memory of an outage; dropping
 * it would let the next call through to a dead upstream). Such entries wait
 * in an LRU list ordered by release; entries released while not evictable
 * wait in a "parked" list until their next release. Callers are expected to
 * hold a pin from admit to settle, so nothing changes in an unpinned guard
 * and the list an entry sits on stays true: taking a victim is O(1). For
 * callers that settle unpinned, a victim found not to be evictable is moved
 * to the parked list, and when the LRU list is empty a bounded number of
 * parked entries is re-examined, round-robin; each acquire thus does O(1)
 * work. Idle TTL: every acquire evicts up to two LRU entries idle for at
 * least key_ttl_ms, and an entry found by lookup after that long idle
 * starts from fresh state, so the outcome does not depend on when the
 * sweep ran.
 */
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "registry-inl.h"
#include "resilix/error.h"
#include "resilix/registry.h"

#define MAX_KEYS_LIMIT 1000000u
#define KEY_TTL_MAX_MS UINT64_C(2592000000) /* 30 days */
#define TTL_SWEEP_PER_ACQUIRE 2
#define PARKED_SCAN_PER_ACQUIRE 8

void rx_registry_config_default(struct rx_registry_config *cfg)
{
	cfg->max_keys = 1024;	  /* ours: ~1 MB with default windows */
	cfg->key_ttl_ms = 600000; /* ours: ten idle minutes */
}

static int registry_config_check(const struct rx_registry_config *cfg)
{
	if (cfg == NULL || cfg->max_keys < 1 ||
	    cfg->max_keys > MAX_KEYS_LIMIT || cfg->key_ttl_ms > KEY_TTL_MAX_MS)
		return RX_EINVAL;
	return RX_OK;
}

static uint32_t fnv1a(const char *key, size_t len)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)key[i];
		h *= 16777619u;
	}
	return h;
}

static uint32_t index_of(const struct rx_registry *r, const struct rx__entry *e)
{
	return (uint32_t)(e - r->entries);
}

static struct rx_window_slot *slots_of(struct rx_registry *r, uint32_t i)
{
	if (r->slots == NULL)
		return NULL;
	return r->slots + (size_t)i * r->slots_per_key;
}

/* Doubly linked lists threaded through the entries by index. */
static void list_append(struct rx_registry *r, struct rx__list *l,
			struct rx__entry *e, enum rx__list_id id)
{
	uint32_t i = index_of(r, e);
	e->list = (uint8_t)id;
	e->next = RX__NIL;
	e->prev = l->tail;
	if (l->tail == RX__NIL)
		l->head = i;
	else
		r->entries[l->tail].next = i;
	l->tail = i;
}

static struct rx__list *list_for(struct rx_registry *r, uint8_t id)
{
	switch (id) {
	case RX__LIST_FREE:
		return &r->free;
	case RX__LIST_IDLE:
		return &r->idle;
	case RX__LIST_PARKED:
		return &r->parked;
	default:
		return NULL;
	}
}

static void list_remove(struct rx_registry *r, struct rx__entry *e)
{
	struct rx__list *l = list_for(r, e->list);
	if (l == NULL)
		return;
	if (e->prev == RX__NIL)
		l->head = e->next;
	else
		r->entries[e->prev].next = e->next;
	if (e->next == RX__NIL)
		l->tail = e->prev;
	else
		r->entries[e->next].prev = e->prev;
	e->prev = e->next = RX__NIL;
	e->list = RX__LIST_PINNED;
}

/*
 * Probe for @key. Returns the table position holding it (and *found =
 * true), or the empty position where it would go.
 */
static uint32_t probe(const struct rx_registry *r, const char *key, size_t len,
		      uint32_t h, bool *found)
{
	uint32_t i = h & r->table_mask;
	for (;;) {
		uint32_t v = r->table[i];
		if (v == 0) {
			*found = false;
			return i;
		}
		const struct rx__entry *e = &r->entries[v - 1];
		if (e->hash == h && e->key_len == len &&
		    memcmp(e->key, key, len) == 0) {
			*found = true;
			return i;
		}
		i = (i + 1) & r->table_mask;
	}
}

/* Backward-shift deletion of table position @i (no tombstones). */
static void table_delete(struct rx_registry *r, uint32_t i)
{
	uint32_t mask = r->table_mask;
	uint32_t j = i;
	for (;;) {
		r->table[i] = 0;
		for (;;) {
			j = (j + 1) & mask;
			if (r->table[j] == 0)
				return;
			uint32_t k = r->entries[r->table[j] - 1].hash & mask;
			/* Leave it if its home lies cyclically in (i, j]. */
			bool stays =
			    i <= j ? (i < k && k <= j) : (i < k || k <= j);
			if (!stays)
				break;
		}
		r->table[i] = r->table[j];
		i = j;
	}
}

static bool evictable(const struct rx__entry *e)
{
	/* Waiters hold no pin of their own once their connection is gone
	 * (a close while a write waits), and their place must outlive it:
	 * they still take a slot of this guard when their turn comes. */
	return e->pins == 0 && e->guard.in_flight == 0 &&
	       rx_guard_waiters(&e->guard) == 0 &&
	       e->guard.breaker.state == RX_BREAKER_CLOSED;
}

static bool idle_expired(const struct rx_registry *r, const struct rx__entry *e,
			 uint64_t now)
{
	return r->cfg.key_ttl_ms > 0 && rx__sat_sub(now, e->idle_since_ns) >=
					    rx__ms_to_ns(r->cfg.key_ttl_ms);
}

/* Drop a live entry: out of the index and its list, onto the free list. */
static void evict(struct rx_registry *r, struct rx__entry *e)
{
	bool found;
	uint32_t pos = probe(r, e->key, e->key_len, e->hash, &found);
	if (found)
		table_delete(r, pos);
	list_remove(r, e);
	list_append(r, &r->free, e, RX__LIST_FREE);
	r->count--;
}

/* Evict up to a few LRU entries idle past the TTL. */
static void sweep_ttl(struct rx_registry *r, uint64_t now)
{
	for (int k = 0; k < TTL_SWEEP_PER_ACQUIRE; k++) {
		if (r->idle.head == RX__NIL)
			return;
		struct rx__entry *e = &r->entries[r->idle.head];
		if (!idle_expired(r, e, now))
			return;
		if (evictable(e)) {
			evict(r, e);
		} else {
			list_remove(r, e);
			list_append(r, &r->parked, e, RX__LIST_PARKED);
		}
	}
}

/* Free one entry by evicting the best victim; false if none qualifies. */
static bool make_room(struct rx_registry *r)
{
	while (r->idle.head != RX__NIL) {
		struct rx__entry *e = &r->entries[r->idle.head];
		if (evictable(e)) {
			evict(r, e);
			return true;
		}
		/* Changed while unpinned; each entry moves once per release. */
		list_remove(r, e);
		list_append(r, &r->parked, e, RX__LIST_PARKED);
	}
	for (int k = 0; k < PARKED_SCAN_PER_ACQUIRE; k++) {
		if (r->parked.head == RX__NIL)
			return false;
		struct rx__entry *e = &r->entries[r->parked.head];
		if (evictable(e)) {
			evict(r, e);
			return true;
		}
		list_remove(r, e);
		list_append(r, &r->parked, e, RX__LIST_PARKED);
	}
	return false;
}

static void reset_guard(struct rx_registry *r, struct rx__entry *e,
			uint64_t now)
{
	/* gcfg was checked at create; this cannot fail. */
	(void)rx_guard_init(&e->guard, &r->gcfg, slots_of(r, index_of(r, e)),
			    now);
}

struct rx__entry *rx__registry_insert(struct rx_registry *r, const char *key,
				      size_t len, uint64_t now_ns)
{
	if (len > RX_KEY_MAX)
		len = RX_KEY_MAX;
	uint32_t h = fnv1a(key, len);
	bool found;
	uint32_t pos = probe(r, key, len, h, &found);
	if (found)
		return &r->entries[r->table[pos] - 1];
	if (r->free.head == RX__NIL)
		return NULL;
	struct rx__entry *e = &r->entries[r->free.head];
	list_remove(r, e);
	e->hash = h;
	e->key_len = (uint16_t)len;
	memcpy(e->key, key, len);
	e->key[len] = '\0';
	e->pins = 0;
	e->idle_since_ns = now_ns;
	reset_guard(r, e, now_ns);
	r->table[pos] = index_of(r, e) + 1;
	r->count++;
	return e;
}

void rx__registry_reset(struct rx_registry *r, struct rx__entry *e,
			uint64_t now_ns)
{
	list_remove(r, e);
	reset_guard(r, e, now_ns);
}

void rx__registry_place(struct rx_registry *r, struct rx__entry *e)
{
	e->idle_since_ns = e->guard.last_used_ns;
	if (evictable(e))
		list_append(r, &r->idle, e, RX__LIST_IDLE);
	else
		list_append(r, &r->parked, e, RX__LIST_PARKED);
}

int rx_registry_create(struct rx_registry **out,
		       const struct rx_registry_config *rcfg,
		       const struct rx_guard_config *gcfg)
{
	if (out == NULL || registry_config_check(rcfg) != RX_OK ||
	    rx_guard_config_check(gcfg, NULL) != RX_OK)
		return RX_EINVAL;
	*out = NULL;

	struct rx_registry *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return RX_ENOMEM;
	r->cfg = *rcfg;
	r->gcfg = *gcfg;
	uint32_t n = rcfg->max_keys;
	uint32_t tsize = 2;
	while (tsize < 2 * n)
		tsize <<= 1;
	r->table_mask = tsize - 1;
	r->slots_per_key = gcfg->breaker_on ? gcfg->breaker.window_calls : 0;
	r->entries = calloc(n, sizeof(*r->entries));
	r->table = calloc(tsize, sizeof(*r->table));
	if (r->slots_per_key > 0)
		r->slots =
		    calloc((size_t)n * r->slots_per_key, sizeof(*r->slots));
	if (r->entries == NULL || r->table == NULL ||
	    (r->slots_per_key > 0 && r->slots == NULL)) {
		rx_registry_destroy(r);
		return RX_ENOMEM;
	}
	r->free.head = r->free.tail = RX__NIL;
	r->idle.head = r->idle.tail = RX__NIL;
	r->parked.head = r->parked.tail = RX__NIL;
	for (uint32_t i = 0; i < n; i++)
		list_append(r, &r->free, &r->entries[i], RX__LIST_FREE);
	*out = r;
	return RX_OK;
}

void rx_registry_destroy(struct rx_registry *r)
{
	if (r == NULL)
		return;
	free(r->slots);
	free(r->table);
	free(r->entries);
	free(r);
}

struct rx_guard *rx_registry_acquire(struct rx_registry *r, const char *key,
				     size_t len, uint64_t now_ns)
{
	if (r == NULL || (key == NULL && len > 0))
		return NULL;
	if (key == NULL)
		key = "";
	if (len > RX_KEY_MAX)
		len = RX_KEY_MAX;
	uint64_t now = rx__clock(&r->last_now_ns, now_ns);

	sweep_ttl(r, now);
	uint32_t h = fnv1a(key, len);
	bool found;
	uint32_t pos = probe(r, key, len, h, &found);
	struct rx__entry *e;
	if (found) {
		e = &r->entries[r->table[pos] - 1];
		if (e->pins == 0) {
			bool was_idle = e->list == RX__LIST_IDLE;
			list_remove(r, e);
			if (was_idle && idle_expired(r, e, now) && evictable(e))
				reset_guard(r, e, now);
		}
	} else {
		if (r->free.head == RX__NIL && !make_room(r)) {
			r->overflows = rx__sat_add(r->overflows, 1);
			return NULL;
		}
		e = rx__registry_insert(r, key, len, now);
	}
	e->pins++;
	e->list = RX__LIST_PINNED;
	return &e->guard;
}

void rx_registry_release(struct rx_registry *r, struct rx_guard *g)
{
	if (r == NULL || g == NULL)
		return;
	struct rx__entry *e = rx__entry_of(g);
	if (e->pins == 0)
		return; /* double release: ignore rather than corrupt lists */
	if (--e->pins > 0)
		return;
	rx__registry_place(r, e);
}

uint32_t rx_registry_index(const struct rx_registry *r,
			   const struct rx_guard *g)
{
	return index_of(r, rx__entry_of(g));
}

const char *rx_registry_key(const struct rx_registry *r,
			    const struct rx_guard *g)
{
	(void)r;
	return rx__entry_of(g)->key;
}

uint32_t rx_registry_count(const struct rx_registry *r)
{
	return r->count;
}

uint64_t rx_registry_overflows(const struct rx_registry *r)
{
	return r->overflows;
}

void rx_registry_foreach(struct rx_registry *r,
			 void (*fn)(void *arg, const char *key,
				    struct rx_guard *g),
			 void *arg)
{
	for (uint32_t i = 0; i < r->cfg.max_keys; i++) {
		struct rx__entry *e = &r->entries[i];
		if (e->list != RX__LIST_FREE)
			fn(arg, e->key, &e->guard);
	}
}
