/*
 * preload/curl_table.c - the curl layer's per-handle table (ADR-156).
 *
 * RX_CURL_HANDLES entries mapped with mmap the first time a guarding shim
 * meets a curl handle, that never move, found through an open-addressing
 * index keyed by the handle pointer (Fibonacci hashing, linear probing,
 * deletion by backward shift: no tombstones). One lock guards the index
 * and the free list, never held across a call into libcurl. An entry is
 * created by curl_easy_init and curl_easy_duphandle only - never by
 * setopt, so handles libcurl makes for itself (DoH) and frees without
 * curl_easy_cleanup cannot leak entries; nor by the curl_easy_init calls
 * libcurl makes itself, whose return address lies in its own code
 * (ADR-592) - and freed by curl_easy_cleanup.
 * Handles created while the table is full are not followed: their
 * transfers pass to the socket layer. An entry's fields belong to the
 * thread using the handle (libcurl forbids using one handle from two
 * threads at once), so only the index needs the lock.
 *
 * Fork. A fork handler takes the table lock before fork (unless this
 * thread is inside the shim, where it may hold it: a signal handler that
 * forks) and frees it on both sides, so a child never inherits it held
 * (docs/design.md, "Never make the host worse"); the child also clears
 * this thread's rx__curl_active, set if the program forked from a libcurl
 * callback. Every holder of the lock sets rx__inside first.
 */
#include "config.h"

#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>

#include "curl_hedge.h"
#include "curl_table.h"
#include "lock.h"
#include "log.h"
#include "runtime.h"

#define INDEX_SLOTS (2 * RX_CURL_HANDLES) /* power of two, load <= 1/2 */

static struct rx_curl_handle *states; /* RX_CURL_HANDLES of them */
static uint32_t *table_index;	    /* INDEX_SLOTS: state index + 1 */
static uint32_t free_head;	    /* index + 1 of the first freed state */
static uint32_t never_used;	    /* states[never_used..] never held one */
static struct rx_lock table_lock;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
atomic_bool rx__curl_table_mapped;
static atomic_bool warned_full;
static bool fork_locked; /* the prepare handler took table_lock */

static void before_fork(void)
{
	fork_locked = !rx__inside;
	if (fork_locked)
		rx__lock(&table_lock);
}

static void after_fork_parent(void)
{
	if (fork_locked)
		rx__unlock(&table_lock);
	fork_locked = false;
}

static void after_fork_child(void)
{
	rx__lock_reset(&table_lock);
	rx__locks_held = 0; /* every lock is free in the child */
	fork_locked = false;
	rx__curl_active = 0;
}

/* Take / drop the table lock, with rx__inside set in between (see Fork
 * above). @inside keeps the caller's flag. */
static void table_lock_take(int *inside)
{
	*inside = rx__inside;
	rx__inside = 1;
	rx__lock(&table_lock);
}

static void table_lock_drop(int inside)
{
	rx__unlock(&table_lock);
	rx__inside = inside;
}

static void table_create(void)
{
	size_t bytes = RX_CURL_HANDLES * sizeof(struct rx_curl_handle) +
		       INDEX_SLOTS * sizeof(uint32_t);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		rx__log(RX_LOG_WARN, "event=curl-table-failed msg=\"curl "
				     "transfers pass to the socket layer\"");
		return;
	}
	states = p;
	table_index = (uint32_t *)(states + RX_CURL_HANDLES);
	/* mmap'ed pages are zero; the free list holds only freed entries,
	 * the others are taken in order (never_used), so nothing is
	 * written here and no page is touched before it is used. */
	if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) !=
	    0) {
		/* Without the handlers a fork could leave the lock held in the
		 * child: do without the table (pass to the socket layer). */
		munmap(p, bytes);
		states = NULL;
		return;
	}
	atomic_store_explicit(&rx__curl_table_mapped, true, memory_order_release);
}

/* Is the curl layer guarding? Maps the table the first time it is. The
 * owner check is rx__owner_fast, a load, not a getpid system call: the
 * tool curl makes about ten curl_easy_setopt calls per transfer, each
 * one came here (ADR-390). curl_easy_reset, which drops state, checks
 * rx__owner as well. */
bool rx__curl_guarding_first(void)
{
	(void)pthread_once(&table_once, table_create);
	return atomic_load_explicit(&rx__curl_table_mapped,
				    memory_order_acquire) &&
	       rx__owner_fast();
}

static uint32_t slot_of(const void *h)
{
	uint64_t x = (uint64_t)(uintptr_t)h;

	/* Fibonacci hashing of the address (allocations are 16-aligned,
	 * so the low bits carry nothing). */
	return (uint32_t)((x * UINT64_C(0x9E3779B97F4A7C15)) >> 40) &
	       (INDEX_SLOTS - 1);
}

/* The index slot holding @h, or INDEX_SLOTS. table_lock held. */
static uint32_t find_slot(const void *h)
{
	uint32_t s = slot_of(h), n;

	for (n = 0; n < INDEX_SLOTS; n++, s = (s + 1) & (INDEX_SLOTS - 1)) {
		uint32_t v = table_index[s];

		if (v == 0)
			return INDEX_SLOTS;
		if (states[v - 1].handle == h)
			return s;
	}
	return INDEX_SLOTS;
}

/* The state of @h, or NULL when it is not followed. O(1) expected. */
/*
 * The entry this thread found last (ADR-561): a program sets a dozen
 * options the layer reads between a handle's init and its perform, each
 * a lookup. The hit is exact without the lock: an entry holds @h in its
 * handle field while, and only while, it is @h's (the field is written
 * under the lock, atomically, and never holds another handle's address
 * on the way: see rx__curl_follow), and the fields past it belong to the
 * one thread using @h.
 */
RX_TLS const void *rx__curl_last_handle;
RX_TLS struct rx_curl_handle *rx__curl_last_state;

struct rx_curl_handle *rx__curl_find_locked(const void *h)
{
	struct rx_curl_handle *st;
	uint32_t s;
	int inside;

	if (!h)
		return NULL;
	table_lock_take(&inside);
	s = find_slot(h);
	st = s < INDEX_SLOTS ? &states[table_index[s] - 1] : NULL;
	table_lock_drop(inside);
	if (st) {
		rx__curl_last_handle = h;
		rx__curl_last_state = st;
	}
	return st;
}

/* Remove the index slot @s, shifting later entries of its probe run back
 * (no tombstones), and free its state. table_lock held. */
static void remove_slot(uint32_t s)
{
	uint32_t v = table_index[s], next;

	__atomic_store_n(&states[v - 1].handle, NULL, __ATOMIC_RELAXED);
	states[v - 1].next_free = free_head;
	free_head = v;
	for (;;) {
		uint32_t home;

		table_index[s] = 0;
		next = (s + 1) & (INDEX_SLOTS - 1);
		for (;;) {
			v = table_index[next];
			if (v == 0)
				return;
			home = slot_of(states[v - 1].handle);
			/* Move it back unless its home lies cyclically in
			 * (s, next]. */
			if (s <= next ? (home <= s || home > next)
				      : (home <= s && home > next))
				break;
			next = (next + 1) & (INDEX_SLOTS - 1);
		}
		table_index[s] = v;
		s = next;
	}
}

/* Stop following @h. O(1) expected. */
void rx__curl_forget(const void *h)
{
	uint32_t s;
	int inside;

	table_lock_take(&inside);
	s = find_slot(h);
	if (s < INDEX_SLOTS)
		remove_slot(s);
	table_lock_drop(inside);
}

void rx__curl_state_clear(struct rx_curl_handle *st)
{
	rx__curl_hedge_forget(st->handle); /* curl_easy_reset */
	st->url_ok = false;
	st->url_gen = 0;
	st->curlu = false;
	st->unix_socket = false;
	st->upload = false;
	st->no_body = false;
	st->follow = false;
	st->connect_only = false;
	st->httpreq = RX_CURL_REQ_GET;
	st->port = 0;
	st->errbuf = NULL;
	st->custom[0] = '\0';
	st->default_scheme[0] = '\0';
	memset(&st->cb, 0, sizeof(st->cb));
}

/*
 * Follow the new handle @h, as a copy of @from (duphandle) or with
 * libcurl's defaults. A stale entry for the same address (a handle freed
 * behind our back) is reused. Returns NULL when the table is full.
 */
struct rx_curl_handle *rx__curl_follow(void *h,
					const struct rx_curl_handle *from)
{
	struct rx_curl_handle *st = NULL;
	uint32_t s, v;
	int inside;

	table_lock_take(&inside);
	s = find_slot(h);
	if (s < INDEX_SLOTS) {
		st = &states[table_index[s] - 1];
	} else if (free_head != 0 || never_used < RX_CURL_HANDLES) {
		if (free_head != 0) {
			v = free_head;
			free_head = states[v - 1].next_free;
		} else {
			v = ++never_used;
		}
		st = &states[v - 1];
		__atomic_store_n(&st->handle, h, __ATOMIC_RELAXED);
		for (s = slot_of(h); table_index[s] != 0;
		     s = (s + 1) & (INDEX_SLOTS - 1))
			;
		table_index[s] = v;
	}
	table_lock_drop(inside);
	if (!st) {
		if (!atomic_exchange(&warned_full, true))
			rx__log(RX_LOG_WARN,
				"event=curl-handles-full max=%d msg=\"further "
				"curl handles pass to the socket layer\"",
				RX_CURL_HANDLES);
		return NULL;
	}
	/* The options that follow are this thread's to set, most often:
	 * their lookups hit without the lock (ADR-561, ADR-563). */
	rx__curl_last_handle = h;
	rx__curl_last_state = st;
	if (from) {
		/* All but the table's own two fields: st->handle never holds
		 * another handle's address, even for a moment (rx__curl_find
		 * reads it without the lock). */
		size_t off = offsetof(struct rx_curl_handle, url_ok);

		memcpy((char *)st + off, (const char *)from + off,
		       sizeof(*st) - off);
	} else {
		rx__curl_state_clear(st);
	}
	return st;
}

uintptr_t rx__curl_text_lo, rx__curl_text_len;

/* dl_iterate_phdr's visit: the executable PT_LOAD holding @arg. */
static int text_visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	uintptr_t fn = (uintptr_t)arg;
	int i;

	(void)size;
	for (i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *p = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + p->p_vaddr;

		if (p->p_type != PT_LOAD || !(p->p_flags & PF_X) ||
		    fn - lo >= p->p_memsz)
			continue;
		/* In the program itself (a static libcurl it exports), every
		 * call would look internal: learn nothing. */
		if (info->dlpi_name && info->dlpi_name[0]) {
			rx__curl_text_lo = lo;
			rx__curl_text_len = p->p_memsz;
		}
		return 1;
	}
	return 0;
}

void rx__curl_text_learn(const void *fn)
{
	if (fn)
		(void)dl_iterate_phdr(text_visit, (void *)fn);
}
