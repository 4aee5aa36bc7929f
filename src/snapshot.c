/*
 * snapshot.c - serialise and hydrate a registry (snapshot.h).
 *
 * Decisions:
 *   - Times are ages against the writer's clock plus one wall-clock
 *     stamp; the reader adds the wall-clock gap to every age. Monotonic
 *     clocks do not survive a restart, wall clocks do.
 *   - Little-endian fixed-width fields written byte by byte: the file
 *     moves between builds and machines; no struct is ever dumped.
 *   - CRC-32 over everything but the trailer: it detects every burst of
 *     up to 32 bits, so any single corrupted byte is caught. Magic and
 *     version are checked before the checksum so a future format that
 *     changes the trailer still gets RX_EVERSION, not RX_ECORRUPT.
 *   - Hydrate parses the whole buffer once to validate it and only then
 *     applies it, so a bad file leaves the registry exactly as it was.
 *   - An open period that ran out during the gap comes back half-open with
 *     no probe in flight, which is what the next admit would have made of
 *     it. A half-open breaker comes back with no probe in flight: the
 *     process that sent the probes is gone.
 *   - Merge (rx_snapshot_merge, ADR-171) is hydrate into a registry that
 *     holds keys: the same validation, ageing and insertion. Where both
 *     views of a key are closed, their windows are merged (ADR-221):
 *     this process's own calls are added to what the file holds. Else a
 *     held key is replaced only by a running open period or newer use,
 *     and never while it has a caller, so no permit outlives its guard.
 *   - The limiter is not saved (ADR-135): a restored key's limiter starts
 *     at its initial limit, as the fresh guard made by the insert has it.
 *     The format stays version 1.
 */
#include <string.h>

#include "breaker-inl.h"
#include "common.h"
#include "registry-inl.h"
#include "resilix/error.h"
#include "resilix/snapshot.h"

#define HEADER_SIZE 32u
#define TRAILER_SIZE 4u
#define ENTRY_FIXED 34u /* after the key: state .. slot count */
#define SLOT_SIZE 9u
#define FLAG_STARVED 1u
#define SLOT_COUNT_MAX 100000u

static const unsigned char magic[4] = {'R', 'X', 'S', 'N'};

/* CRC-32 (IEEE 802.3), four bits at a time from a 16-entry table. */
static uint32_t crc32_ieee(const unsigned char *p, size_t n)
{
	static const uint32_t t[16] = {
	    0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac,
	    0x76dc4190, 0x6b6b51f4, 0x4db26158, 0x5005713c,
	    0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c,
	    0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c};
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		c = (c >> 4) ^ t[c & 15];
		c = (c >> 4) ^ t[c & 15];
	}
	return c ^ 0xffffffffu;
}

/* A bounds-checked little-endian cursor over the caller's buffer. */
struct cursor {
	unsigned char *w;	/* writing */
	const unsigned char *r; /* reading */
	size_t pos, end;
	bool bad;
};

static void put(struct cursor *c, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		c->w[c->pos++] = (unsigned char)(v >> (8 * i));
}

static uint64_t get(struct cursor *c, unsigned bytes)
{
	if (c->bad || c->end - c->pos < bytes) {
		c->bad = true;
		return 0;
	}
	uint64_t v = 0;
	for (unsigned i = 0; i < bytes; i++)
		v |= (uint64_t)c->r[c->pos++] << (8 * i);
	return v;
}

static const struct rx__entry *live_entry(const struct rx_registry *r,
					  uint32_t i)
{
	const struct rx__entry *e = &rx__entries(r)[i];
	return e->list == RX__LIST_FREE ? NULL : e;
}

/* A window's slot @i, counted from its oldest (0). */
static struct rx_window_slot *slot_at(const struct rx_window *w, uint32_t i)
{
	uint32_t k = w->tail + i;
	return &rx_window_slots(w)[k >= w->capacity ? k - w->capacity : k];
}

size_t rx_snapshot_size(const struct rx_registry *r)
{
	size_t n = HEADER_SIZE + TRAILER_SIZE;
	for (uint32_t i = 0; i < rx__entries_used(r); i++) {
		const struct rx__entry *e = live_entry(r, i);
		if (e != NULL)
			n += 2 + e->key_len + ENTRY_FIXED +
			     (size_t)e->guard.breaker.window.count * SLOT_SIZE;
	}
	return n;
}

int rx_snapshot_write(const struct rx_registry *r, uint64_t now_ns,
		      uint64_t wall_ns, void *buf, size_t cap, size_t *len)
{
	if (r == NULL || len == NULL)
		return RX_EINVAL;
	size_t need = rx_snapshot_size(r);
	*len = need;
	if (buf == NULL || cap < need)
		return RX_ENOSPC;

	struct cursor c = {.w = buf, .pos = 0, .end = need};
	memcpy(c.w, magic, sizeof(magic));
	c.pos = sizeof(magic);
	put(&c, RX_SNAPSHOT_VERSION, 2);
	put(&c, 0, 2);
	put(&c, need, 8);
	put(&c, wall_ns, 8);
	put(&c, r->count, 4);
	put(&c, 0, 4);
	for (uint32_t i = 0; i < rx__entries_used(r); i++) {
		const struct rx__entry *e = live_entry(r, i);
		if (e == NULL)
			continue;
		const struct rx_breaker *b = &e->guard.breaker;
		const struct rx_window *w = &b->window;
		put(&c, e->key_len, 2);
		memcpy(c.w + c.pos, e->key, e->key_len);
		c.pos += e->key_len;
		put(&c, b->state, 1);
		put(&c, b->starving ? FLAG_STARVED : 0, 1);
		put(&c, b->consecutive_failures, 4);
		put(&c, b->transitions, 8);
		put(&c,
		    b->state == RX_BREAKER_OPEN
			? rx__sat_sub(now_ns, b->opened_ns)
			: 0,
		    8);
		put(&c, rx__sat_sub(now_ns, e->guard.last_used_ns), 8);
		put(&c, w->count, 4);
		for (uint32_t k = 0; k < w->count; k++) {
			const struct rx_window_slot *s = slot_at(w, k);
			put(&c, rx__sat_sub(now_ns, s->t_ns), 8);
			put(&c, s->flags, 1);
		}
	}
	put(&c, crc32_ieee(c.w, c.pos), 4);
	return RX_OK;
}

/* One entry as parsed; slots stay in the buffer, read again on apply. */
struct parsed {
	const char *key;
	uint16_t key_len;
	uint8_t state, flags;
	uint32_t consecutive;
	uint64_t transitions, open_age, idle_age;
	uint32_t slots;
	size_t slots_pos; /* offset of the first slot */
};

/* Parse and validate one entry; c->bad on any malformed field. */
static void parse_entry(struct cursor *c, struct parsed *p)
{
	p->key_len = (uint16_t)get(c, 2);
	if (c->bad || p->key_len > RX_KEY_MAX || c->end - c->pos < p->key_len) {
		c->bad = true;
		return;
	}
	p->key = (const char *)c->r + c->pos;
	c->pos += p->key_len;
	p->state = (uint8_t)get(c, 1);
	p->flags = (uint8_t)get(c, 1);
	p->consecutive = (uint32_t)get(c, 4);
	p->transitions = get(c, 8);
	p->open_age = get(c, 8);
	p->idle_age = get(c, 8);
	p->slots = (uint32_t)get(c, 4);
	if (c->bad || p->state > RX_BREAKER_HALF_OPEN ||
	    (p->flags & ~FLAG_STARVED) != 0 || p->slots > SLOT_COUNT_MAX ||
	    (c->end - c->pos) / SLOT_SIZE < p->slots) {
		c->bad = true;
		return;
	}
	p->slots_pos = c->pos;
	uint64_t prev_age = UINT64_MAX;
	for (uint32_t k = 0; k < p->slots; k++) {
		uint64_t age = get(c, 8);
		uint64_t flags = get(c, 1);
		/* Oldest first: ages never grow along the ring. */
		if (age > prev_age ||
		    (flags & ~(uint64_t)(RX_SLOT_FAILURE | RX_SLOT_SLOW))) {
			c->bad = true;
			return;
		}
		prev_age = age;
	}
}

/* Restore one validated entry's breaker into a fresh guard. */
static void apply_breaker(struct rx_breaker *b, const struct parsed *p,
			  const unsigned char *buf, uint64_t now, uint64_t gap)
{
	struct rx_window *w = &b->window;
	uint32_t skip = p->slots > w->capacity ? p->slots - w->capacity : 0;
	struct cursor c = {.r = buf,
			   .pos = p->slots_pos + skip * SLOT_SIZE,
			   .end = p->slots_pos + p->slots * SLOT_SIZE};
	bool aged = false;

	for (uint32_t k = skip; k < p->slots; k++) {
		uint64_t age = rx__sat_add(get(&c, 8), gap);
		uint32_t flags = (uint32_t)get(&c, 1);
		if (w->max_age_ns > 0 && age >= w->max_age_ns) {
			aged = true;
			continue;
		}
		rx_window_push(w, rx__sat_sub(now, age), flags);
	}
	b->consecutive_failures = p->consecutive;
	b->transitions = p->transitions;
	b->starving =
	    (p->flags & FLAG_STARVED) != 0 || (aged && w->count < b->min_calls);
	b->last_now_ns = now;
	if (p->state == RX_BREAKER_OPEN) {
		uint64_t age = rx__sat_add(p->open_age, gap);
		uint64_t open_ns = rx__ms_to_ns(b->cfg.open_ms);

		/* An open period that ran out stays open, opened that long
		 * ago: the first admission moves it to half-open itself, and
		 * says so (open-elapsed), so that a log never shows a
		 * half-open breaker closing that it never saw open (ADR-367).
		 * An age older than this clock's start is as good as its
		 * start, as long as that is an open period ago; a clock
		 * younger than that cannot place it, and only then does the
		 * entry come back half-open. */
		if (age >= open_ns && now < open_ns) {
			b->state = RX_BREAKER_HALF_OPEN;
		} else {
			b->state = RX_BREAKER_OPEN;
			b->opened_ns = rx__sat_sub(now, age);
		}
	} else {
		b->state = (enum rx_breaker_state)p->state;
	}
	b->probes_in_flight = 0;
	/* Processes side by side each add their calls at exit, so the file
	 * can hold counts past a trip rule that none of them saw settle:
	 * the first process to read them trips before its first call
	 * (ADR-684). */
	if (b->state == RX_BREAKER_CLOSED)
		rx__breaker_judge_closed(b, now);
}

/* The snapshot's slot @k of entry @p: its time on our clock and flags. */
static uint64_t their_slot(const struct parsed *p, const unsigned char *buf,
			   uint32_t k, uint64_t now, uint64_t gap,
			   uint32_t *flags)
{
	struct cursor c = {.r = buf,
			   .pos = p->slots_pos + (size_t)k * SLOT_SIZE,
			   .end = p->slots_pos + (size_t)p->slots * SLOT_SIZE};
	uint64_t age = rx__sat_add(get(&c, 8), gap);

	*flags = (uint32_t)get(&c, 1);
	return rx__sat_sub(now, age);
}

/*
 * Merge two closed views of one key (ADR-221): the live window keeps its
 * own calls - the slots recorded after @since, newest last - and takes
 * the snapshot's slots in place of the rest, in time order, the newest
 * `capacity` of them. The snapshot's slots are what the processes that
 * overlapped with this one saw, over the state this one hydrated (they
 * hydrated it too, so it is counted once); this process's own calls are
 * added to them. No allocation: the kept own slots are moved to the top
 * of the kept range first, then a forward merge fills it from the bottom
 * and never overtakes them.
 */
static void union_windows(struct rx_breaker *b, const struct parsed *p,
			  const unsigned char *buf, uint64_t now, uint64_t gap,
			  uint64_t since)
{
	struct rx_window *w = &b->window;
	uint32_t ours = 0, first = 0, theirs, m, drop, od = 0, td = 0;
	uint32_t i, oi, ti, run, tf, f;

	while (ours < w->count && slot_at(w, w->count - 1 - ours)->t_ns > since)
		ours++;
	/* The snapshot's oldest slots may have aged out (a prefix). */
	while (first < p->slots && w->max_age_ns > 0 &&
	       now - their_slot(p, buf, first, now, gap, &f) >= w->max_age_ns)
		first++;
	theirs = p->slots - first;
	m = theirs + ours < w->capacity ? theirs + ours : w->capacity;
	/* Which of the oldest drop out: count them off in time order. */
	drop = theirs + ours - m;
	for (oi = w->count - ours, ti = first; od + td < drop;) {
		bool take_theirs =
		    oi == w->count ||
		    (ti < p->slots && their_slot(p, buf, ti, now, gap, &f) <=
					  slot_at(w, oi)->t_ns);
		if (take_theirs)
			ti++, td++;
		else
			oi++, od++;
	}
	/* Move the kept own slots to [m - kept, m). */
	uint32_t kept = ours - od, src = w->count - kept, dst = m - kept;
	if (dst > src)
		for (i = kept; i-- > 0;)
			*slot_at(w, dst + i) = *slot_at(w, src + i);
	else if (dst < src)
		for (i = 0; i < kept; i++)
			*slot_at(w, dst + i) = *slot_at(w, src + i);
	/* Merge forward into [0, m): theirs from first + td, ours from dst. */
	for (i = 0, oi = dst, ti = first + td; i < m; i++) {
		uint64_t tt = 0;
		if (ti < p->slots)
			tt = their_slot(p, buf, ti, now, gap, &tf);
		if (ti < p->slots && (oi == m || tt <= slot_at(w, oi)->t_ns)) {
			struct rx_window_slot *s = slot_at(w, i);
			s->t_ns = tt;
			s->flags = tf & (RX_SLOT_FAILURE | RX_SLOT_SLOW);
			s->pad = 0;
			ti++;
		} else {
			*slot_at(w, i) = *slot_at(w, oi++);
		}
	}
	w->count = m;
	w->failures = w->slow = 0;
	for (i = 0; i < m; i++) {
		w->failures += (slot_at(w, i)->flags & RX_SLOT_FAILURE) != 0;
		w->slow += (slot_at(w, i)->flags & RX_SLOT_SLOW) != 0;
	}
	/* Consecutive failures: the run at the newest end; when it spans the
	 * whole window, theirs went on before it, and our kept calls (all
	 * failures then) come on top of their count. */
	for (run = 0; run < m &&
		      (slot_at(w, m - 1 - run)->flags & RX_SLOT_FAILURE) != 0;)
		run++;
	b->consecutive_failures = run;
	if (run == m && p->consecutive + kept > run)
		b->consecutive_failures = p->consecutive + kept;
	if (p->transitions > b->transitions)
		b->transitions = p->transitions;
}

/*
 * Merge: does the snapshot's entry @e (aged by @gap) replace the live
 * entry @x? An open period still running is the more cautious view and
 * wins over one that is not (for at most the open time: then a probe
 * decides); of two running open periods, the later trip; otherwise the
 * entry used last. A live entry with a caller (pinned, calls in flight or
 * waiting) always stands: its state is about to change anyway.
 */
static bool snapshot_wins(const struct rx_registry *r,
			  const struct rx__entry *x, const struct parsed *e,
			  uint64_t now, uint64_t gap)
{
	const struct rx_breaker *b = &x->guard.breaker;
	uint64_t open_ns = rx__ms_to_ns(b->cfg.open_ms);
	uint64_t snap_open_age = rx__sat_add(e->open_age, gap);
	uint64_t live_open_age = rx__sat_sub(now, b->opened_ns);
	bool snap_open, live_open;

	if (x->pins > 0 || x->guard.in_flight > 0 ||
	    rx_guard_waiters(&x->guard) > 0)
		return false;
	snap_open = r->gcfg.breaker_on && e->state == RX_BREAKER_OPEN &&
		    snap_open_age < open_ns;
	live_open = r->gcfg.breaker_on && b->state == RX_BREAKER_OPEN &&
		    live_open_age < open_ns;
	if (snap_open != live_open)
		return snap_open;
	if (snap_open)
		return snap_open_age < live_open_age;
	return rx__sat_add(e->idle_age, gap) <
	       rx__sat_sub(now, x->guard.last_used_ns);
}

/* Both views of a key are closed breakers: their windows merge. */
static bool both_closed(const struct rx_registry *r, const struct rx__entry *x,
			const struct parsed *e)
{
	return r->gcfg.breaker_on && e->state == RX_BREAKER_CLOSED &&
	       x->guard.breaker.state == RX_BREAKER_CLOSED;
}

/* Hydrate (@merge false: @r must be empty) or merge a snapshot; calls
 * after @since_ns are this process's own (merge only). */
static int load(struct rx_registry *r, const void *buf, size_t len,
		uint64_t now_ns, uint64_t wall_now_ns, bool merge,
		uint64_t since_ns)
{
	if (r == NULL || (buf == NULL && len > 0) || (!merge && r->count != 0))
		return RX_EINVAL;
	const unsigned char *p = buf;
	if (len < HEADER_SIZE + TRAILER_SIZE || memcmp(p, magic, 4) != 0)
		return RX_ECORRUPT;
	struct cursor c = {.r = p, .pos = 4, .end = len - TRAILER_SIZE};
	if (get(&c, 2) != RX_SNAPSHOT_VERSION)
		return RX_EVERSION;
	uint64_t reserved = get(&c, 2);
	uint64_t total = get(&c, 8);
	uint64_t wall_snap = get(&c, 8);
	uint32_t count = (uint32_t)get(&c, 4);
	reserved |= get(&c, 4);
	if (reserved != 0 || total != len)
		return RX_ECORRUPT;
	uint32_t crc = (uint32_t)p[len - 4] | (uint32_t)p[len - 3] << 8 |
		       (uint32_t)p[len - 2] << 16 | (uint32_t)p[len - 1] << 24;
	if (crc32_ieee(p, len - TRAILER_SIZE) != crc)
		return RX_ECORRUPT;

	/* Pass 1: validate everything; nothing is applied yet. */
	struct parsed e;
	for (uint32_t i = 0; i < count; i++) {
		parse_entry(&c, &e);
		if (c.bad)
			return RX_ECORRUPT;
	}
	if (c.pos != c.end)
		return RX_ECORRUPT;

	/* Pass 2: apply. Nothing below can fail. */
	uint64_t now = rx__clock(&r->last_now_ns, now_ns);
	uint64_t gap = rx__sat_sub(wall_now_ns, wall_snap);
	uint64_t ttl_ns = rx__ms_to_ns(r->cfg.key_ttl_ms);
	c.pos = HEADER_SIZE;
	for (uint32_t i = 0; i < count; i++) {
		parse_entry(&c, &e);
		uint64_t idle = rx__sat_add(e.idle_age, gap);
		bool closed = !r->gcfg.breaker_on || e.state == 0;
		if (closed && ttl_ns > 0 && idle >= ttl_ns)
			continue; /* the TTL would have evicted it */
		uint32_t before = r->count;
		struct rx__entry *x =
		    rx__registry_insert(r, e.key, e.key_len, now);
		if (x == NULL) {
			/* Full. Hydrate: the rest does not fit; merge: a
			 * later key may be one the registry holds. */
			if (merge)
				continue;
			break;
		}
		if (r->count == before) {
			/* Hydrate: a duplicate key, the first one stands.
			 * Merge: a key the registry holds. */
			if (!merge)
				continue;
			if (both_closed(r, x, &e)) {
				union_windows(&x->guard.breaker, &e, p, now,
					      gap, since_ns);
				x->guard.steady = false; /* ADR-587 */
				if (rx__sat_sub(now, idle) >
				    x->guard.last_used_ns)
					x->guard.last_used_ns =
					    rx__sat_sub(now, idle);
				continue;
			}
			if (!snapshot_wins(r, x, &e, now, gap))
				continue;
			rx__registry_reset(r, x, now);
		}
		x->guard.last_used_ns = rx__sat_sub(now, idle);
		if (r->gcfg.breaker_on)
			apply_breaker(&x->guard.breaker, &e, p, now, gap);
		x->guard.steady = false; /* moved by hand (ADR-587) */
		rx__registry_place(r, x);
	}
	return RX_OK;
}

uint32_t rx_snapshot_keys(const void *buf, size_t len)
{
	struct cursor c = {.r = buf, .pos = 24, .end = len};

	if (buf == NULL || len < HEADER_SIZE || memcmp(buf, magic, 4) != 0)
		return 0;
	return (uint32_t)get(&c, 4);
}

int rx_snapshot_hydrate(struct rx_registry *r, const void *buf, size_t len,
			uint64_t now_ns, uint64_t wall_now_ns)
{
	return load(r, buf, len, now_ns, wall_now_ns, false, 0);
}

int rx_snapshot_merge(struct rx_registry *r, const void *buf, size_t len,
		      uint64_t now_ns, uint64_t wall_now_ns, uint64_t since_ns)
{
	return load(r, buf, len, now_ns, wall_now_ns, true, since_ns);
}
