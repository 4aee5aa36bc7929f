/*
 * registry.c - the bounded key registry (registry.h).
 *
 * Memory: rx_registry_create makes every allocation the registry will ever
 * make - the entries (guard + key bytes), the window slots of every guard,
 * and the hash index - so the number of keys an attacker or tenant can
 * invent changes nothing but which keys are present. The block starts
 * zeroed and stays untouched where no key went: entries never used are
 * handed out by index (`unused` counts those left), so creating a
 * registry writes its header only, and the free list holds just the
 * entries evictions gave back (ADR-550).
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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#ifdef MAP_ANONYMOUS
#define RX_HAVE_MMAP 1
#endif
#endif

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
	return (uint32_t)(e - rx__entries(r));
}

static struct rx_window_slot *slots_of(struct rx_registry *r, uint32_t i)
{
	if (r->slots_off == 0)
		return NULL;
	return (struct rx_window_slot *)(void *)((char *)r + r->slots_off) +
	       (size_t)i * r->slots_per_key;
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
		rx__entries(r)[l->tail].next = i;
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
		rx__entries(r)[e->prev].next = e->next;
	if (e->next == RX__NIL)
		l->tail = e->prev;
	else
		rx__entries(r)[e->next].prev = e->prev;
	e->prev = e->next = RX__NIL;
	e->list = RX__LIST_PINNED;
}

/* Is an entry left for a new key, given back or never used and backed
 * (ADR-680)? */
static bool has_room(const struct rx_registry *r)
{
	return r->free.head != RX__NIL ||
	       (r->unused > 0 && r->cfg.max_keys - r->unused < r->backed);
}

/*
 * Take an entry for a new key (has_room said there is one), on no list:
 * one given back first, else the first never used - zero from the block's
 * zeroing, its links not yet set.
 */
static struct rx__entry *take_room(struct rx_registry *r)
{
	struct rx__entry *e;

	if (r->free.head != RX__NIL) {
		e = &rx__entries(r)[r->free.head];
		list_remove(r, e);
		return e;
	}
	e = &rx__entries(r)[r->cfg.max_keys - r->unused];
	r->unused--;
	e->prev = e->next = RX__NIL;
	e->list = RX__LIST_PINNED;
	return e;
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
		uint32_t v = rx__table(r)[i];
		if (v == 0) {
			*found = false;
			return i;
		}
		const struct rx__entry *e = &rx__entries(r)[v - 1];
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
		rx__table(r)[i] = 0;
		for (;;) {
			j = (j + 1) & mask;
			if (rx__table(r)[j] == 0)
				return;
			uint32_t k = rx__entries(r)[rx__table(r)[j] - 1].hash & mask;
			/* Leave it if its home lies cyclically in (i, j]. */
			bool stays =
			    i <= j ? (i < k && k <= j) : (i < k || k <= j);
			if (!stays)
				break;
		}
		rx__table(r)[i] = rx__table(r)[j];
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
		struct rx__entry *e = &rx__entries(r)[r->idle.head];
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
		struct rx__entry *e = &rx__entries(r)[r->idle.head];
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
		struct rx__entry *e = &rx__entries(r)[r->parked.head];
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
		return &rx__entries(r)[rx__table(r)[pos] - 1];
	if (!has_room(r))
		return NULL;
	struct rx__entry *e = take_room(r);
	e->hash = h;
	e->key_len = (uint16_t)len;
	memcpy(e->key, key, len);
	e->key[len] = '\0';
	e->pins = 0;
	e->idle_since_ns = now_ns;
	reset_guard(r, e, now_ns);
	rx__table(r)[pos] = index_of(r, e) + 1;
	r->count++;
	return e;
}

void rx__registry_reset(struct rx_registry *r, struct rx__entry *e,
			uint64_t now_ns)
{
	list_remove(r, e);
	reset_guard(r, e, now_ns);
}

/* Is @e free, counting bookkeeping out of range (a torn write) as free? */
static bool checked_free(struct rx__entry *e)
{
	if (e->list > RX__LIST_PARKED || e->key_len > RX_KEY_MAX)
		e->list = RX__LIST_FREE;
	return e->list == RX__LIST_FREE;
}

void rx_registry_repair(struct rx_registry *r,
			 uint32_t (*pins_of)(void *arg, uint32_t index),
			 void *arg, uint64_t now_ns)
{
	uint32_t n = r->cfg.max_keys;

	/* Entries from the backed bound on were never handed out, and their
	 * memory may not be there (ADR-680): never read. */
	if (r->backed < n)
		n = r->backed;
	memset(rx__table(r), 0, ((size_t)r->table_mask + 1) * sizeof(uint32_t));
	r->free.head = r->free.tail = RX__NIL;
	r->idle.head = r->idle.tail = RX__NIL;
	r->parked.head = r->parked.tail = RX__NIL;
	r->count = 0;
	/* Free entries above the last one holding a key count as never
	 * used again: taking one sets every field. */
	r->unused = r->cfg.max_keys - n;
	while (r->unused < r->cfg.max_keys &&
	       checked_free(&rx__entries(r)[r->cfg.max_keys - 1 - r->unused]))
		r->unused++;
	for (uint32_t i = 0; i < r->cfg.max_keys - r->unused; i++) {
		struct rx__entry *e = &rx__entries(r)[i];
		bool half_done = e->list == RX__LIST_PINNED && e->pins == 0;
		bool found;

		if (checked_free(e)) {
			e->pins = 0;
			list_append(r, &r->free, e, RX__LIST_FREE);
			continue;
		}
		if (pins_of != NULL)
			e->pins = pins_of(arg, i);
		/* A settlement cut short leaves the cache unproven (ADR-587). */
		e->guard.steady = false;
		e->key[e->key_len] = '\0';
		e->hash = fnv1a(e->key, e->key_len);
		uint32_t pos = probe(r, e->key, e->key_len, e->hash, &found);
		if (found) {
			/* A key twice: the second is dropped, or, when
			 * pinned, renamed to a key no program makes (a NUL
			 * first) so its holders go on and it leaves later. */
			if (e->pins == 0) {
				e->list = RX__LIST_FREE;
				list_append(r, &r->free, e, RX__LIST_FREE);
				continue;
			}
			e->key_len = (uint16_t)(1 + (uint32_t)snprintf(
			    e->key + 1, RX_KEY_MAX, "resilix-orphan-%u", i));
			e->key[0] = '\0';
			e->hash = fnv1a(e->key, e->key_len);
			pos = probe(r, e->key, e->key_len, e->hash, &found);
		}
		rx__table(r)[pos] = i + 1;
		r->count++;
		e->prev = e->next = RX__NIL;
		if (half_done)
			reset_guard(r, e, now_ns);
		e->list = RX__LIST_PINNED;
		if (e->pins == 0)
			rx__registry_place(r, e);
	}
}

void rx__registry_place(struct rx_registry *r, struct rx__entry *e)
{
	e->idle_since_ns = e->guard.last_used_ns;
	if (evictable(e))
		list_append(r, &r->idle, e, RX__LIST_IDLE);
	else
		list_append(r, &r->parked, e, RX__LIST_PARKED);
}

/* The block's layout for a configuration already checked: offsets of the
 * entries, the index and the slots, each cache-line aligned, and the
 * size. */
struct layout {
	uint64_t entries, table, slots, size;
	uint32_t table_size, slots_per_key;
};

static uint64_t align64(uint64_t n)
{
	return (n + 63) & ~(uint64_t)63;
}

static void layout_of(const struct rx_registry_config *rcfg,
		      const struct rx_guard_config *gcfg, struct layout *l)
{
	uint32_t n = rcfg->max_keys;
	uint32_t tsize = 2;
	while (tsize < 2 * n)
		tsize <<= 1;
	l->table_size = tsize;
	l->slots_per_key = gcfg->breaker_on ? gcfg->breaker.window_calls : 0;
	l->entries = align64(sizeof(struct rx_registry));
	l->table = align64(l->entries + (uint64_t)n * sizeof(struct rx__entry));
	l->slots = align64(l->table + (uint64_t)tsize * sizeof(uint32_t));
	l->size = align64(l->slots + (uint64_t)n * l->slots_per_key *
					 sizeof(struct rx_window_slot));
	if (l->slots_per_key == 0)
		l->slots = 0;
}

size_t rx_registry_size(const struct rx_registry_config *rcfg,
			const struct rx_guard_config *gcfg)
{
	struct layout l;

	if (registry_config_check(rcfg) != RX_OK ||
	    rx_guard_config_check(gcfg, NULL) != RX_OK)
		return 0;
	layout_of(rcfg, gcfg, &l);
	return (size_t)l.size;
}

int rx_registry_format(void *mem, size_t size,
		       const struct rx_registry_config *rcfg,
		       const struct rx_guard_config *gcfg,
		       struct rx_registry **out)
{
	struct layout l;

	if (out == NULL || mem == NULL || ((uintptr_t)mem & 15) != 0 ||
	    registry_config_check(rcfg) != RX_OK ||
	    rx_guard_config_check(gcfg, NULL) != RX_OK)
		return RX_EINVAL;
	layout_of(rcfg, gcfg, &l);
	if (size < l.size)
		return RX_EINVAL;
	struct rx_registry *r = mem;
	memset(r, 0, sizeof(*r));
	r->cfg = *rcfg;
	r->gcfg = *gcfg;
	r->size = l.size;
	r->entries_off = l.entries;
	r->table_off = l.table;
	r->slots_off = l.slots;
	r->table_mask = l.table_size - 1;
	r->slots_per_key = l.slots_per_key;
	r->free.head = r->free.tail = RX__NIL;
	r->idle.head = r->idle.tail = RX__NIL;
	r->parked.head = r->parked.tail = RX__NIL;
	r->unused = rcfg->max_keys; /* zeroed: every entry free, untouched */
	r->backed = rcfg->max_keys; /* the caller's memory: all there */
	*out = r;
	return RX_OK;
}

int rx_registry_fixed_spans(const struct rx_registry_config *rcfg,
			    const struct rx_guard_config *gcfg,
			    struct rx_registry_span out[RX_REGISTRY_SPANS])
{
	struct layout l;

	if (rx_registry_size(rcfg, gcfg) == 0)
		return 0;
	layout_of(rcfg, gcfg, &l);
	out[0].off = 0;
	out[0].len = l.entries;
	out[1].off = l.table;
	out[1].len = (uint64_t)l.table_size * sizeof(uint32_t);
	return 2;
}

int rx_registry_entry_spans(const struct rx_registry *r, uint32_t first,
			    uint32_t n,
			    struct rx_registry_span out[RX_REGISTRY_SPANS])
{
	int k = 0;

	if (first >= r->cfg.max_keys || n == 0)
		return 0;
	if (n > r->cfg.max_keys - first)
		n = r->cfg.max_keys - first;
	out[k].off = r->entries_off + (uint64_t)first * sizeof(struct rx__entry);
	out[k++].len = (uint64_t)n * sizeof(struct rx__entry);
	if (r->slots_off != 0) {
		uint64_t per = (uint64_t)r->slots_per_key *
			       sizeof(struct rx_window_slot);

		out[k].off = r->slots_off + first * per;
		out[k++].len = n * per;
	}
	return k;
}

uint32_t rx_registry_backed(const struct rx_registry *r)
{
	return r->backed;
}

void rx_registry_set_backed(struct rx_registry *r, uint32_t n)
{
	r->backed = n < r->cfg.max_keys ? n : r->cfg.max_keys;
}

bool rx_registry_wants_backing(const struct rx_registry *r)
{
	return rx__registry_wants_backing(r);
}

/*
 * One zeroed block for create. Where there is mmap, fresh anonymous pages:
 * zero without being written, so a key's pages are touched when it comes
 * (ADR-550). calloc gives that only while malloc's mapping threshold is
 * below the block's size - it rises to 32 MB as a program frees mapped
 * blocks - and clears the block, every page of it, otherwise; it is also
 * one more libc function for the shim's start-up to bind. Elsewhere,
 * calloc.
 */
static void *zeroed_block(size_t size)
{
#ifdef RX_HAVE_MMAP
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
#else
	return calloc(1, size);
#endif
}

static void free_block(void *p, size_t size)
{
#ifdef RX_HAVE_MMAP
	(void)munmap(p, size);
#else
	(void)size;
	free(p);
#endif
}

int rx_registry_create(struct rx_registry **out,
		       const struct rx_registry_config *rcfg,
		       const struct rx_guard_config *gcfg)
{
	size_t size = rx_registry_size(rcfg, gcfg);

	if (out == NULL || size == 0)
		return RX_EINVAL;
	*out = NULL;
	void *mem = zeroed_block(size);
	if (mem == NULL)
		return RX_ENOMEM;
	int rc = rx_registry_format(mem, size, rcfg, gcfg, out);
	if (rc != RX_OK)
		free_block(mem, size);
	return rc;
}

void rx_registry_destroy(struct rx_registry *r)
{
	if (r != NULL)
		free_block(r, (size_t)r->size);
}

uint32_t rx_registry_hash(const char *key, size_t len)
{
	if (key == NULL)
		return fnv1a("", 0);
	return fnv1a(key, len > RX_KEY_MAX ? RX_KEY_MAX : len);
}

struct rx_guard *rx_registry_acquire(struct rx_registry *r, const char *key,
				     size_t len, uint64_t now_ns)
{
	return rx_registry_acquire_hashed(r, key, len,
					  rx_registry_hash(key, len), now_ns);
}

struct rx_guard *rx_registry_acquire_hashed(struct rx_registry *r,
					    const char *key, size_t len,
					    uint32_t h, uint64_t now_ns)
{
	if (r == NULL || (key == NULL && len > 0))
		return NULL;
	if (key == NULL)
		key = "";
	if (len > RX_KEY_MAX)
		len = RX_KEY_MAX;
	uint64_t now = rx__clock(&r->last_now_ns, now_ns);

	sweep_ttl(r, now);
	bool found;
	uint32_t pos = probe(r, key, len, h, &found);
	struct rx__entry *e;
	if (found) {
		e = &rx__entries(r)[rx__table(r)[pos] - 1];
		if (e->pins == 0) {
			bool was_idle = e->list == RX__LIST_IDLE;
			list_remove(r, e);
			if (was_idle && idle_expired(r, e, now) && evictable(e))
				reset_guard(r, e, now);
		}
	} else {
		if (!has_room(r) && !make_room(r)) {
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

void rx_registry_pin(struct rx_registry *r, struct rx_guard *g, uint32_t n)
{
	struct rx__entry *e = rx__entry_of(g);

	if (e->pins == 0) /* was unpinned: off its list, as acquire does */
		list_remove(r, e);
	e->pins += n;
	e->list = RX__LIST_PINNED;
}

struct rx_guard *rx_registry_guard_at(struct rx_registry *r, uint32_t index)
{
	if (r == NULL || index >= rx__entries_used(r) ||
	    rx__entries(r)[index].list == RX__LIST_FREE)
		return NULL;
	return &rx__entries(r)[index].guard;
}

void rx_registry_reset_at(struct rx_registry *r, uint32_t index,
			  uint64_t now_ns)
{
	if (rx_registry_guard_at(r, index) != NULL)
		reset_guard(r, &rx__entries(r)[index], now_ns);
}

const char *rx_registry_key(const struct rx_registry *r,
			    const struct rx_guard *g)
{
	(void)r;
	return rx__entry_of(g)->key;
}

bool rx_registry_is(const struct rx_registry *r, const struct rx_guard *g,
		    const char *key, size_t len, uint32_t hash)
{
	const struct rx__entry *e = rx__entry_of(g);

	(void)r;
	if (len > RX_KEY_MAX)
		len = RX_KEY_MAX;
	return e->hash == hash && e->key_len == len &&
	       (len == 0 || memcmp(e->key, key, len) == 0);
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
	uint32_t used = rx__entries_used(r);

	for (uint32_t i = 0; i < used; i++) {
		struct rx__entry *e = &rx__entries(r)[i];
		if (e->list != RX__LIST_FREE)
			fn(arg, e->key, &e->guard);
	}
}
