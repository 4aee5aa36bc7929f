/*
 * preload/curl_table.h - the curl layer's per-handle table (ADR-156):
 * what curl_easy_setopt taught the layer about each easy handle the
 * program created, found by the handle's address (curl_table.c).
 */
#ifndef RESILIX_PRELOAD_CURL_TABLE_H
#define RESILIX_PRELOAD_CURL_TABLE_H

#include <stdbool.h>
#include <stdint.h>

#include "curl_layer.h"
#include "curl_retry.h"

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
	struct rx_curl_url url;
	struct rx_curl_cb cb; /* callbacks and bound, for retries */
};

/*
 * rx__curl_guarding - is the curl layer guarding in this thread now (the
 * shim ready, not re-entered, this process the owner)? Maps the table the
 * first time it is; false when that failed. Thread-safe, O(1).
 */
bool rx__curl_guarding(void);

/*
 * rx__curl_table_ready - has the table been mapped (so a handle may be
 * followed)? A load, no mapping. Thread-safe, O(1).
 */
bool rx__curl_table_ready(void);

/*
 * rx__curl_find - the state of @h (NULL allowed), or NULL when the table
 * does not follow it. Takes the table lock with rx__inside set; the entry
 * itself belongs to the thread using @h. Call only once the table is
 * ready. O(1) expected.
 */
struct rx_curl_handle *rx__curl_find(const void *h);

/*
 * rx__curl_follow - follow the new handle @h, as a copy of @from
 * (curl_easy_duphandle; NULL: libcurl's defaults). A stale entry for the
 * same address (a handle freed behind the layer's back) is reused.
 * Returns the entry, or NULL when the table is full (logged once).
 * Thread-safe, O(1) expected.
 */
struct rx_curl_handle *rx__curl_follow(void *h,
				       const struct rx_curl_handle *from);

/* rx__curl_forget - stop following @h (curl_easy_cleanup). Thread-safe,
 * O(1) expected. */
void rx__curl_forget(const void *h);

/* rx__curl_state_clear - back to libcurl's defaults (curl_easy_reset);
 * also drops a hedged duplicate kept for @st's CURLINFO. O(1). */
void rx__curl_state_clear(struct rx_curl_handle *st);

#endif
