/*
 * preload/curl_table.h - the curl layer's per-handle table (ADR-156):
 * what curl_easy_setopt taught the layer about each easy handle the
 * program created, found by the handle's address (curl_table.c).
 */
#ifndef RESILIX_PRELOAD_CURL_TABLE_H
#define RESILIX_PRELOAD_CURL_TABLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base.h"
#include "curl_layer.h"
#include "curl_retry.h"
#include "runtime.h"

/* Handles followed at once; more pass to the socket layer (ADR-156). */
#define RX_CURL_HANDLES 1024

enum rx_curl_httpreq {
	RX_CURL_REQ_GET = 0,
	RX_CURL_REQ_POST,
	RX_CURL_REQ_PUT,
	RX_CURL_REQ_HEAD
};

struct rx_curl_handle {
	/* The table's own two fields first (a copy skips them). */
	void *handle;	     /* NULL when free; atomic, written locked */
	uint32_t next_free;  /* free list link (index + 1, 0 = end) */
	bool url_ok;		 /* url holds a URL we can key */
	bool curlu;		 /* CURLOPT_CURLU: the URL is not ours to see */
	bool unix_socket;	 /* CURLOPT_(ABSTRACT_)UNIX_SOCKET(_PATH) */
	bool upload, no_body;	 /* CURLOPT_UPLOAD/PUT, CURLOPT_NOBODY */
	bool follow;		 /* CURLOPT_FOLLOWLOCATION */
	bool connect_only;	 /* CURLOPT_CONNECT_ONLY (ADR-366) */
	uint8_t httpreq;	 /* enum rx_curl_httpreq */
	uint16_t port;		 /* CURLOPT_PORT, 0 = the URL's */
	char *errbuf;		 /* CURLOPT_ERRORBUFFER, the program's */
	char custom[32];	 /* CURLOPT_CUSTOMREQUEST, truncated */
	char default_scheme[16]; /* CURLOPT_DEFAULT_PROTOCOL */
	/* The URL memo's generation @url was copied from or stored as, 0
	 * when none: a perform whose generation matches the key memo's
	 * reuses its key and filter verdict (curl.c, ADR-563). */
	uint64_t url_gen;
	struct rx_curl_url url;
	struct rx_curl_cb cb; /* callbacks and bound, for retries */
};

/* Set once the table is mapped (curl_table.c). */
extern atomic_bool rx__curl_table_mapped RX_HIDDEN;

/* The entry this thread found last (ADR-561), for rx__curl_find. */
extern RX_TLS const void *rx__curl_last_handle RX_HIDDEN;
extern RX_TLS struct rx_curl_handle *rx__curl_last_state RX_HIDDEN;

/* rx__curl_guarding's first call: maps the table. */
bool rx__curl_guarding_first(void);

/* rx__curl_find's lookup under the table lock; remembers what it found. */
struct rx_curl_handle *rx__curl_find_locked(const void *h);

/*
 * rx__curl_guarding - is the curl layer guarding in this thread now (the
 * shim ready, not re-entered, this process the owner)? Maps the table the
 * first time it is; false when that failed. Thread-safe, O(1): inline,
 * since every option the layer learns asks.
 */
static inline bool rx__curl_guarding(void)
{
	if (rx__reentered() || !rx__ready())
		return false;
	if (!atomic_load_explicit(&rx__curl_table_mapped,
				  memory_order_acquire))
		return rx__curl_guarding_first();
	return rx__owner_fast();
}

/*
 * rx__curl_table_ready - has the table been mapped (so a handle may be
 * followed)? A load, no mapping. Thread-safe, O(1).
 */
static inline bool rx__curl_table_ready(void)
{
	return atomic_load_explicit(&rx__curl_table_mapped,
				    memory_order_acquire);
}

/*
 * rx__curl_find - the state of @h (NULL allowed), or NULL when the table
 * does not follow it. A hit on the entry this thread found last costs a
 * few loads and no lock (ADR-561): an entry holds @h in its handle field
 * while, and only while, it is @h's, and the rest of it belongs to the
 * thread using @h. Otherwise the table lock, with rx__inside set. Call
 * only once the table is ready. O(1) expected.
 */
static inline struct rx_curl_handle *rx__curl_find(const void *h)
{
	struct rx_curl_handle *st = rx__curl_last_state;

	if (h && st && rx__curl_last_handle == h &&
	    __atomic_load_n(&st->handle, __ATOMIC_RELAXED) == h)
		return st;
	return rx__curl_find_locked(h);
}

/*
 * rx__curl_follow - follow the new handle @h, as a copy of @from
 * (curl_easy_duphandle; NULL: libcurl's defaults). A stale entry for the
 * same address (a handle freed behind the layer's back) is reused.
 * Returns the entry, or NULL when the table is full (logged once).
 * Thread-safe, O(1) expected.
 */
struct rx_curl_handle *rx__curl_follow(void *h,
				       const struct rx_curl_handle *from);

/* Where libcurl's code lies: [lo, lo + len), len 0 when not known. */
extern uintptr_t rx__curl_text_lo RX_HIDDEN, rx__curl_text_len RX_HIDDEN;

/*
 * rx__curl_text_learn - note the executable segment of the shared object
 * holding @fn (libcurl's curl_easy_init), for rx__curl_internal; nothing
 * when @fn is NULL or lies in the program itself. Once, when the real
 * functions are bound; takes the loader's lock (dl_iterate_phdr).
 */
void rx__curl_text_learn(const void *fn);

/*
 * rx__curl_internal - did libcurl itself make the call that returns to
 * @ra (a return address)? libcurl 7.x makes each connection cache's
 * closure handle with curl_easy_init and frees it with no
 * curl_easy_cleanup: such a handle is never the program's, never
 * performs, and is not followed (ADR-592). Two compares, O(1).
 */
static inline bool rx__curl_internal(const void *ra)
{
	return (uintptr_t)ra - rx__curl_text_lo < rx__curl_text_len;
}

/* rx__curl_forget - stop following @h (curl_easy_cleanup). Thread-safe,
 * O(1) expected. */
void rx__curl_forget(const void *h);

/* rx__curl_state_clear - back to libcurl's defaults (curl_easy_reset);
 * also drops a hedged duplicate kept for @st's CURLINFO. O(1). */
void rx__curl_state_clear(struct rx_curl_handle *st);

/* ---- the key (curl_key.c) ---------------------------------------- */

/* rx__curl_method_of - the request method libcurl will send for @st
 * (Curl_http_method's order): a static string or @st->custom. O(1). */
const char *rx__curl_method_of(const struct rx_curl_handle *st);

/*
 * rx__curl_destination - what perform needs of @st's destination (ADR-154,
 * ADR-240): false when the filters leave it to the socket layer; else
 * true, with the key in @key (RX_KEY_MAX + 1 bytes), its length in
 * *@klen (0: no key), its rx_registry_hash in *@hash and whether the
 * scheme is http(s) in *@http. A handle whose URL parts came from the
 * URL memo generation this thread keyed last takes the key memo's
 * (ADR-563, ADR-590). Call with rx__inside set (the memo is this
 * thread's). O(key length).
 */
bool rx__curl_destination(const struct rx_curl_handle *st, char *key,
			  size_t *klen, uint32_t *hash, bool *http);

#endif
