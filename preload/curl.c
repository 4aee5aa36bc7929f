/*
 * preload/curl.c - the curl layer: libcurl transfers attributed by URL,
 * with the status codes the socket layer cannot see over HTTPS
 * (docs/design.md section 3, "curl layer"; ADR-150 to ADR-156).
 *
 * What it interposes. curl_easy_setopt, to learn each handle's URL, method
 * and error buffer; curl_easy_perform, the call it guards; and the calls
 * that create, copy, reset and free handles (curl_easy_init,
 * curl_easy_duphandle, curl_easy_reset, curl_easy_cleanup), so what it
 * learnt follows the handle exactly. The multi interface is left to the
 * socket layer (ADR-151): curl_multi_* are not interposed.
 *
 * Which transfers. Those whose handle the table follows, with a URL the
 * curl layer can key, that do not go over a Unix socket
 * (CURLOPT_UNIX_SOCKET_PATH or CURLOPT_ABSTRACT_UNIX_SOCKET set: the
 * URL's host is then only a name in the request, ADR-242), and whose
 * destination RESILIX_INCLUDE/RESILIX_EXCLUDE let through: exactly for an
 * address literal, by the port-only patterns for a host name, and when an
 * address pattern could decide, not at all here - the socket layer, which
 * sees the address, decides at the connect (ADR-240), and that are not
 * CURLOPT_CONNECT_ONLY: such a perform only connects, and the program's
 * curl_easy_send/curl_easy_recv exchange afterwards is the socket
 * layer's, which sees its connect too (ADR-366). Every other
 * transfer runs without the curl layer and without rx__curl_active, so
 * the socket layer guards its connects as any program's (and leaves
 * AF_UNIX ones alone).
 *
 * A guarded perform. Build the key from the handle's URL (host:port by
 * default; RESILIX_CURL_KEY=endpoint or origin, ADR-154), acquire and
 * admit it through admit.c - the same registry, locks and policies as the
 * socket layer. A refusal returns CURLE_COULDNT_CONNECT before libcurl
 * runs, so nothing leaves the host, and writes one line into the
 * program's CURLOPT_ERRORBUFFER if it set one (ADR-155). An admitted
 * transfer runs with rx__curl_active set on this thread, which makes the
 * socket layer pass this thread's sockets through (ADR-152): one call,
 * attributed once, by the layer that knows most about it. The settlement
 * reads the CURLcode, CURLINFO_RESPONSE_CODE and the time to first byte
 * (CURLINFO_STARTTRANSFER_TIME_T, microseconds) through the real
 * curl_easy_getinfo, and classifies them with the table of
 * curl_verdict.c (ADR-153): an http(s) transfer that got its final
 * status is judged by it, at its first byte, whatever error ended it
 * later (ADR-241).
 *
 * libcurl is optional (ADR-150). The shim never links it. The real curl
 * functions are resolved with dlsym(RTLD_NEXT) the first time the program
 * calls one of ours - which it can only do once libcurl is loaded - and,
 * when libcurl was dlopen'ed RTLD_LOCAL by a plugin (RTLD_NEXT searches
 * only the global scope), through dlopen(soname, RTLD_NOLOAD). A process
 * that never calls libcurl never resolves, maps or locks anything here.
 * The first curl call pays one dlsym per symbol; dlsym may allocate, which
 * is harmless here since no allocator can reach a curl function.
 *
 * Per-handle state (ADR-156) lives in a table mapped with mmap the first
 * time a guarding shim meets a curl handle: RX_CURL_HANDLES entries that
 * never move, found through an open-addressing index keyed by the handle
 * pointer; one lock guards the index and the free list, never held across
 * a call into libcurl. An entry is created by curl_easy_init and
 * curl_easy_duphandle only - never by setopt, so handles libcurl makes for
 * itself (DoH) and frees without curl_easy_cleanup cannot leak entries -
 * and freed by curl_easy_cleanup. Handles created while the table is full
 * are not followed: their transfers pass to the socket layer. An entry's
 * fields belong to the thread using the handle (libcurl forbids using one
 * handle from two threads at once), so only the index needs the lock.
 *
 * Fork. A fork handler takes the table lock before fork (unless this
 * thread is inside the shim, where it may hold it: a signal handler that
 * forks) and frees it on both sides, so a child never inherits it held
 * (docs/design.md, "Never make the host worse"); the child also clears this
 * thread's rx__curl_active, set if the program forked from a libcurl
 * callback. Every holder of the lock sets rx__inside first.
 *
 * Forwarding curl_easy_setopt. The option's number says how its variadic
 * argument was passed (curl.h, CURLOPTTYPE_*): below 10000 a long, below
 * 20000 an object pointer, below 30000 a function pointer, below 40000 a
 * curl_off_t (64-bit even where long is 32), below 50000 a blob pointer.
 * The wrapper reads exactly that type and passes it on as that type;
 * an unknown number is read as a pointer, and libcurl refuses it anyway.
 * What the wrapper learns is recorded only when libcurl accepted the
 * option.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "curl_hedge.h"
#include "curl_layer.h"
#include "curl_retry.h"
#include "admit.h"
#include "log.h"
#include "retry.h"
#include "runtime.h"
#include "symbols.h"

/* Handles followed at once; more pass to the socket layer (ADR-156). */
#define RX_CURL_HANDLES 1024
#define INDEX_SLOTS (2 * RX_CURL_HANDLES) /* power of two, load <= 1/2 */


/* ------------------------------------------------------------------------
 * The real functions.
 * ---------------------------------------------------------------------- */

typedef void *(*init_fn)(void);
typedef int (*setopt_fn)(void *, int, ...);
typedef int (*perform_fn)(void *);
typedef void (*cleanup_fn)(void *);
typedef void (*reset_fn)(void *);
typedef void *(*duphandle_fn)(void *);
typedef int (*getinfo_fn)(void *, int, ...);

static struct {
	init_fn init;
	setopt_fn setopt;
	perform_fn perform;
	cleanup_fn cleanup;
	reset_fn reset;
	duphandle_fn duphandle;
	getinfo_fn getinfo;
} real;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

/* Our own definitions, to recognise them if a lookup finds them. */
RX_EXPORT void *curl_easy_init(void);
RX_EXPORT int curl_easy_setopt(void *h, int option, ...);
RX_EXPORT int curl_easy_perform(void *h);
RX_EXPORT void curl_easy_cleanup(void *h);
RX_EXPORT void curl_easy_reset(void *h);
RX_EXPORT void *curl_easy_duphandle(void *h);

/* Our definitions, to recognise them if a lookup finds them (symbols.h). */
RX_SELF(curl_easy_init);
RX_SELF(curl_easy_setopt);
RX_SELF(curl_easy_perform);
RX_SELF(curl_easy_cleanup);
RX_SELF(curl_easy_reset);
RX_SELF(curl_easy_duphandle);

/* Sonames a plugin may have dlopen'ed RTLD_LOCAL (Debian ships the
 * OpenSSL, GnuTLS and NSS builds under these). */
const char *const rx__curl_sonames[RX_CURL_NSONAMES] = {
    "libcurl.so.4", "libcurl-gnutls.so.4", "libcurl-nss.so.4"};

static void *lookup(const char *name, void *ours)
{
	return rx__symbol_real(name, ours, rx__curl_sonames, RX_CURL_NSONAMES);
}

static void bind_all(void)
{
	int saved = errno;

	real.init =
	    (init_fn)lookup("curl_easy_init", (void *)self_curl_easy_init);
	real.setopt = (setopt_fn)lookup("curl_easy_setopt",
					(void *)self_curl_easy_setopt);
	real.perform = (perform_fn)lookup("curl_easy_perform",
					  (void *)self_curl_easy_perform);
	real.cleanup = (cleanup_fn)lookup("curl_easy_cleanup",
					  (void *)self_curl_easy_cleanup);
	real.reset =
	    (reset_fn)lookup("curl_easy_reset", (void *)self_curl_easy_reset);
	real.duphandle = (duphandle_fn)lookup("curl_easy_duphandle",
					      (void *)self_curl_easy_duphandle);
	real.getinfo = (getinfo_fn)lookup("curl_easy_getinfo", NULL);
	errno = saved;
}

/* Resolve the real functions once; the first curl call of the process
 * pays for it, every later one pays a load and a branch. */
static void bind_real(void)
{
	(void)pthread_once(&bind_once, bind_all);
}

/* ------------------------------------------------------------------------
 * The handle table (ADR-156).
 * ---------------------------------------------------------------------- */

enum httpreq { REQ_GET = 0, REQ_POST, REQ_PUT, REQ_HEAD };

struct handle_state {
	void *handle;		 /* NULL when free */
	uint32_t next_free;	 /* free list link (index + 1, 0 = end) */
	bool url_ok;		 /* url holds a URL we can key */
	bool curlu;		 /* CURLOPT_CURLU: the URL is not ours to see */
	bool unix_socket;	 /* CURLOPT_(ABSTRACT_)UNIX_SOCKET(_PATH) */
	bool upload, no_body;	 /* CURLOPT_UPLOAD/PUT, CURLOPT_NOBODY */
	bool follow;		 /* CURLOPT_FOLLOWLOCATION */
	bool connect_only;	 /* CURLOPT_CONNECT_ONLY (ADR-366) */
	uint8_t httpreq;	 /* enum httpreq */
	uint16_t port;		 /* CURLOPT_PORT, 0 = the URL's */
	char *errbuf;		 /* CURLOPT_ERRORBUFFER, the program's */
	char custom[32];	 /* CURLOPT_CUSTOMREQUEST, truncated */
	char default_scheme[16]; /* CURLOPT_DEFAULT_PROTOCOL */
	struct rx_curl_url url;
	struct rx_curl_cb cb; /* callbacks and bound, for retries */
};

static struct handle_state *states; /* RX_CURL_HANDLES of them */
static uint32_t *table_index;	    /* INDEX_SLOTS: state index + 1 */
static uint32_t free_head;	    /* index + 1 of the first free state */
static struct rx_lock table_lock;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
static atomic_bool table_ready;
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
	size_t bytes = RX_CURL_HANDLES * sizeof(struct handle_state) +
		       INDEX_SLOTS * sizeof(uint32_t);
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint32_t i;

	if (p == MAP_FAILED) {
		rx__log(RX_LOG_WARN, "event=curl-table-failed msg=\"curl "
				     "transfers pass to the socket layer\"");
		return;
	}
	states = p;
	table_index = (uint32_t *)(states + RX_CURL_HANDLES);
	/* mmap'ed pages are zero: only the free list needs building. */
	for (i = 0; i < RX_CURL_HANDLES; i++)
		states[i].next_free = i + 2 <= RX_CURL_HANDLES ? i + 2 : 0;
	free_head = 1;
	if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) !=
	    0) {
		/* Without the handlers a fork could leave the lock held in the
		 * child: do without the table (pass to the socket layer). */
		munmap(p, bytes);
		states = NULL;
		return;
	}
	atomic_store_explicit(&table_ready, true, memory_order_release);
}

/* Is the curl layer guarding? Maps the table the first time it is. The
 * owner check is rx__owner_fast, a load, not a getpid system call: the
 * tool curl makes about ten curl_easy_setopt calls per transfer, each
 * one came here (ADR-390). curl_easy_reset, which drops state, checks
 * rx__owner as well. */
static bool guarding(void)
{
	if (rx__reentered() || !rx__ready())
		return false;
	if (!atomic_load_explicit(&table_ready, memory_order_acquire))
		(void)pthread_once(&table_once, table_create);
	return atomic_load_explicit(&table_ready, memory_order_acquire) &&
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
static struct handle_state *find(const void *h)
{
	struct handle_state *st = NULL;
	uint32_t s;
	int inside;

	if (!h)
		return NULL;
	table_lock_take(&inside);
	s = find_slot(h);
	if (s < INDEX_SLOTS)
		st = &states[table_index[s] - 1];
	table_lock_drop(inside);
	return st;
}

/* Remove the index slot @s, shifting later entries of its probe run back
 * (no tombstones), and free its state. table_lock held. */
static void remove_slot(uint32_t s)
{
	uint32_t v = table_index[s], next;

	states[v - 1].handle = NULL;
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
static void forget_handle(const void *h)
{
	uint32_t s;
	int inside;

	table_lock_take(&inside);
	s = find_slot(h);
	if (s < INDEX_SLOTS)
		remove_slot(s);
	table_lock_drop(inside);
}

static void state_clear(struct handle_state *st)
{
	rx__curl_hedge_forget(st->handle); /* curl_easy_reset */
	st->url_ok = false;
	st->curlu = false;
	st->unix_socket = false;
	st->upload = false;
	st->no_body = false;
	st->follow = false;
	st->connect_only = false;
	st->httpreq = REQ_GET;
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
static struct handle_state *follow(void *h, const struct handle_state *from)
{
	struct handle_state *st = NULL;
	uint32_t s, v;
	int inside;

	table_lock_take(&inside);
	s = find_slot(h);
	if (s < INDEX_SLOTS) {
		st = &states[table_index[s] - 1];
	} else if (free_head != 0) {
		v = free_head;
		st = &states[v - 1];
		free_head = st->next_free;
		st->handle = h;
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
	if (from) {
		void *keep = st->handle;
		uint32_t link = st->next_free;

		memcpy(st, from, sizeof(*st));
		st->handle = keep;
		st->next_free = link;
	} else {
		state_clear(st);
	}
	return st;
}

/* ------------------------------------------------------------------------
 * What setopt teaches us.
 * ---------------------------------------------------------------------- */

static bool interesting(int option)
{
	switch (option) {
	case RX_CURLOPT_PORT:
	case RX_CURLOPT_NOBODY:
	case RX_CURLOPT_UPLOAD:
	case RX_CURLOPT_POST:
	case RX_CURLOPT_FOLLOWLOCATION:
	case RX_CURLOPT_PUT:
	case RX_CURLOPT_HTTPGET:
	case RX_CURLOPT_URL:
	case RX_CURLOPT_ERRORBUFFER:
	case RX_CURLOPT_POSTFIELDS:
	case RX_CURLOPT_HTTPPOST:
	case RX_CURLOPT_CUSTOMREQUEST:
	case RX_CURLOPT_COPYPOSTFIELDS:
	case RX_CURLOPT_DEFAULT_PROTOCOL:
	case RX_CURLOPT_MIMEPOST:
	case RX_CURLOPT_CURLU:
	case RX_CURLOPT_UNIX_SOCKET_PATH:
	case RX_CURLOPT_ABSTRACT_UNIX_SOCKET:
	case RX_CURLOPT_CONNECT_ONLY:
		return true;
	default:
		return rx__curl_cb_option(option);
	}
}

static void copy_str(char *dst, size_t size, const char *s)
{
	size_t n = s ? strnlen(s, size - 1) : 0;

	if (n)
		memcpy(dst, s, n);
	dst[n] = '\0';
}

/* Record an option libcurl accepted, as libcurl's setopt.c and
 * Curl_http_method read it. */
static void learn(struct handle_state *st, int option, long l, void *p)
{
	switch (option) {
	case RX_CURLOPT_URL:
		st->url_ok =
		    p && rx__curl_parse_url(p, st->default_scheme, &st->url);
		break;
	case RX_CURLOPT_CURLU:
		st->curlu = p != NULL;
		break;
	case RX_CURLOPT_UNIX_SOCKET_PATH:
	case RX_CURLOPT_ABSTRACT_UNIX_SOCKET:
		/* One setting in libcurl: either option sets the path (NULL
		 * clears it), the last one wins (ADR-242). */
		st->unix_socket = p != NULL;
		break;
	case RX_CURLOPT_ERRORBUFFER:
		st->errbuf = p;
		break;
	case RX_CURLOPT_CONNECT_ONLY:
		st->connect_only = l != 0; /* 1, or 2 for WebSocket */
		break;
	case RX_CURLOPT_PORT:
		st->port = l > 0 && l <= 65535 ? (uint16_t)l : 0;
		break;
	case RX_CURLOPT_FOLLOWLOCATION:
		st->follow = l != 0;
		break;
	case RX_CURLOPT_CUSTOMREQUEST:
		copy_str(st->custom, sizeof(st->custom), p);
		break;
	case RX_CURLOPT_DEFAULT_PROTOCOL: {
		uint16_t port;
		size_t i;

		copy_str(st->default_scheme, sizeof(st->default_scheme), p);
		for (i = 0; st->default_scheme[i]; i++)
			if (st->default_scheme[i] >= 'A' &&
			    st->default_scheme[i] <= 'Z')
				st->default_scheme[i] += 'a' - 'A';
		/* A scheme-less URL set earlier takes the new scheme. */
		if (st->url_ok && !st->url.scheme_given &&
		    st->default_scheme[0] &&
		    rx__curl_default_port(st->default_scheme, &port)) {
			copy_str(st->url.scheme, sizeof(st->url.scheme),
				 st->default_scheme);
			if (!st->url.port_given)
				st->url.port = port;
		}
		break;
	}
	case RX_CURLOPT_NOBODY:
		st->no_body = l != 0;
		if (l)
			st->httpreq = REQ_HEAD;
		else if (st->httpreq == REQ_HEAD)
			st->httpreq = REQ_GET;
		break;
	case RX_CURLOPT_UPLOAD:
	case RX_CURLOPT_PUT:
		st->upload = l != 0;
		if (l) {
			st->httpreq = REQ_PUT;
			st->no_body = false;
		} else {
			st->httpreq = REQ_GET;
		}
		break;
	case RX_CURLOPT_POST:
		if (l) {
			st->httpreq = REQ_POST;
			st->no_body = false;
		} else {
			st->httpreq = REQ_GET;
		}
		break;
	case RX_CURLOPT_HTTPGET:
		if (l) {
			st->httpreq = REQ_GET;
			st->upload = false;
			st->no_body = false;
		}
		break;
	case RX_CURLOPT_POSTFIELDS:
	case RX_CURLOPT_COPYPOSTFIELDS:
		st->httpreq = REQ_POST;
		break;
	case RX_CURLOPT_HTTPPOST:
	case RX_CURLOPT_MIMEPOST:
		if (p) {
			st->httpreq = REQ_POST;
			st->no_body = false;
		}
		break;
	default:
		(void)rx__curl_cb_learn(&st->cb, option, l, p);
		break;
	}
}

/* The request method libcurl will send (Curl_http_method's order). */
static const char *method_of(const struct handle_state *st)
{
	if (st->custom[0])
		return st->custom;
	if (st->no_body)
		return "HEAD";
	if (st->upload)
		return "PUT";
	switch (st->httpreq) {
	case REQ_POST:
		return "POST";
	case REQ_PUT:
		return "PUT";
	case REQ_HEAD:
		return "HEAD";
	default:
		return "GET";
	}
}

/* A bounded appender for keys: snprintf costs a thousand instructions
 * per key, this a few dozen (scripts/bench curl). */
struct keybuf {
	char *p;
	size_t left; /* bytes that still fit, NUL excluded */
};

static void put_n(struct keybuf *k, const char *s, size_t n)
{
	if (n > k->left)
		n = k->left;
	memcpy(k->p, s, n);
	k->p += n;
	k->left -= n;
}

static void put(struct keybuf *k, const char *s)
{
	put_n(k, s, strlen(s));
}

static void put_port(struct keybuf *k, unsigned port)
{
	char d[8];
	size_t i = sizeof(d);

	do {
		d[--i] = (char)('0' + port % 10);
		port /= 10;
	} while (port && i > 0);
	put_n(k, d + i, sizeof(d) - i);
}

/* The port the transfer connects to: CURLOPT_PORT overrides the URL's. */
static uint16_t port_of(const struct handle_state *st)
{
	return st->port ? st->port : st->url.port;
}

/* Format the key of @st's transfer (ADR-154) into @buf of @size (>= 1).
 * Returns its length; keys longer than @size - 1 (RX_KEY_MAX) are
 * truncated, as the registry would truncate them. */
static size_t make_key(const struct handle_state *st, char *buf, size_t size)
{
	unsigned port = port_of(st);
	struct keybuf k = {buf, size - 1};

	switch (rx__config()->curl_key) {
	case RX_CURL_KEY_ENDPOINT:
		put(&k, method_of(st));
		put(&k, " ");
		put(&k, st->url.host);
		put(&k, ":");
		put_port(&k, port);
		put(&k, st->url.path);
		break;
	case RX_CURL_KEY_ORIGIN:
		put(&k, st->url.scheme);
		put(&k, "://");
		put(&k, st->url.host);
		put(&k, ":");
		put_port(&k, port);
		break;
	case RX_CURL_KEY_HOST:
	default:
		put(&k, st->url.host);
		put(&k, ":");
		put_port(&k, port);
		break;
	}
	*k.p = '\0';
	return (size_t)(k.p - buf);
}

/*
 * Do RESILIX_INCLUDE and RESILIX_EXCLUDE let the curl layer guard @st's
 * transfer (ADR-240)? A URL whose host is an address literal is judged as
 * its connect would be. A host name is judged by the patterns that match
 * every address ("*:port"); when an address pattern could change the
 * answer, the curl layer cannot know it before libcurl resolves the name,
 * so it does not guard the transfer: it runs as if the curl layer were
 * not there, and the socket layer, which sees each connect's address,
 * applies the filters to it and guards what they let through, by
 * ip:port. Either way one layer at most counts the transfer.
 */
static bool filters_let_guard(const struct handle_state *st)
{
	const struct rx_config *cfg = rx__config();
	uint16_t port = port_of(st);
	union {
		struct sockaddr sa;
		struct sockaddr_in in;
		struct sockaddr_in6 in6;
	} a;
	socklen_t len;

	memset(&a, 0, sizeof(a));
	switch (st->url.family) {
	case AF_INET:
		a.in.sin_family = AF_INET;
		a.in.sin_port = htons(port);
		memcpy(&a.in.sin_addr, st->url.addr, 4);
		len = sizeof(a.in);
		break;
	case AF_INET6:
		a.in6.sin6_family = AF_INET6;
		a.in6.sin6_port = htons(port);
		memcpy(&a.in6.sin6_addr, st->url.addr, 16);
		len = sizeof(a.in6);
		break;
	default:
		return rx_filter_guarded_port(&cfg->include, &cfg->exclude,
					      port) == RX_FILTER_YES;
	}
	return rx_filter_guarded(&cfg->include, &cfg->exclude, &a.sa, len);
}

static bool is_http(const struct handle_state *st)
{
	return strcmp(st->url.scheme, "http") == 0 ||
	       strcmp(st->url.scheme, "https") == 0;
}

/* ------------------------------------------------------------------------
 * The wrappers.
 * ---------------------------------------------------------------------- */

RX_EXPORT void *curl_easy_init(void)
{
	void *h;

	bind_real();
	if (!real.init)
		return NULL; /* what libcurl returns when it cannot start */
	h = real.init();
	if (h && guarding()) {
		int saved = errno;

		rx__inside = 1;
		(void)follow(h, NULL);
		rx__inside = 0;
		errno = saved;
	}
	return h;
}

RX_EXPORT int curl_easy_setopt(void *h, int option, ...)
{
	union {
		long l;
		void *p;
		void (*f)(void);
		rx_curl_off_t o;
	} arg;
	struct handle_state *st;
	va_list ap;
	int rc;

	va_start(ap, option);
	if (option < RX_CURLOPTTYPE_OBJECTPOINT)
		arg.l = va_arg(ap, long);
	else if (option < RX_CURLOPTTYPE_FUNCTIONPOINT)
		arg.p = va_arg(ap, void *);
	else if (option < RX_CURLOPTTYPE_OFF_T)
		arg.f = va_arg(ap, void (*)(void));
	else if (option < RX_CURLOPTTYPE_BLOB)
		arg.o = va_arg(ap, rx_curl_off_t);
	else
		arg.p = va_arg(ap, void *); /* blob; unknown: refused */
	va_end(ap);

	bind_real();
	if (!real.setopt)
		return RX_CURLE_FAILED_INIT;
	if (option < RX_CURLOPTTYPE_OBJECTPOINT)
		rc = real.setopt(h, option, arg.l);
	else if (option < RX_CURLOPTTYPE_FUNCTIONPOINT)
		rc = real.setopt(h, option, arg.p);
	else if (option < RX_CURLOPTTYPE_OFF_T)
		rc = real.setopt(h, option, arg.f);
	else if (option < RX_CURLOPTTYPE_BLOB)
		rc = real.setopt(h, option, arg.o);
	else
		rc = real.setopt(h, option, arg.p);

	if (rc != RX_CURLE_OK || !interesting(option) || !guarding())
		return rc;
	st = find(h);
	if (st) {
		int saved = errno;

		learn(st, option,
		      option < RX_CURLOPTTYPE_OBJECTPOINT ? arg.l : 0,
		      option < RX_CURLOPTTYPE_OBJECTPOINT ? NULL : arg.p);
		errno = saved;
	}
	return rc;
}

RX_EXPORT void *curl_easy_duphandle(void *h)
{
	struct handle_state *from, copy;
	void *dup;

	bind_real();
	if (!real.duphandle)
		return NULL;
	dup = real.duphandle(h);
	if (!dup || !guarding())
		return dup;
	rx__inside = 1;
	from = find(h);
	if (from)
		copy = *from; /* @h is the caller's: stable while we copy */
	(void)follow(dup, from ? &copy : NULL);
	rx__inside = 0;
	return dup;
}

RX_EXPORT void curl_easy_reset(void *h)
{
	struct handle_state *st;

	bind_real();
	if (!real.reset)
		return;
	real.reset(h);
	if (!guarding() || !rx__owner())
		return;
	st = find(h);
	if (st)
		state_clear(st);
}

RX_EXPORT void curl_easy_cleanup(void *h)
{
	bind_real();
	/* Forget first: once libcurl frees the handle, another thread's
	 * curl_easy_init may get the same address. */
	if (h && atomic_load_explicit(&table_ready, memory_order_acquire) &&
	    !rx__reentered()) {
		int saved = errno;

		rx__curl_hedge_forget(h);
		forget_handle(h);
		errno = saved;
	}
	if (real.cleanup)
		real.cleanup(h);
}

RX_EXPORT int curl_easy_perform(void *h)
{
	struct rx_gate_permit permit;
	struct rx_refusal why = {RX_REASON_NONE, 0};
	struct handle_state *st;
	char key[RX_KEY_MAX + 1];
	struct rx_guard *g;
	void *ih = h; /* whose CURLINFO describes the transfer (ADR-472) */
	rx_curl_off_t ttfb_us = 0;
	uint64_t start, astart, end, slow_ns, deadline_ns, first_byte;
	enum rx_verdict v;
	size_t klen;
	long status = 0;
	bool http;
	int rc, err;

	bind_real();
	if (!real.perform)
		return RX_CURLE_FAILED_INIT;
	rx__curl_hedge_forget(h); /* its CURLINFO is its own again */
	/* A perform from inside another one's callback is libcurl's to
	 * refuse (CURLE_RECURSIVE_API_CALL), not ours to count. */
	if (rx__curl_active || !guarding())
		return real.perform(h);
	st = find(h);
	/* Over a Unix socket, nothing crosses the network: untracked, as
	 * the socket layer leaves AF_UNIX (ADR-242). A CONNECT_ONLY
	 * perform only connects: the exchange comes later, through
	 * curl_easy_send/recv, where the socket layer sees it (ADR-366). */
	if (!st || !st->url_ok || st->curlu || st->unix_socket ||
	    st->connect_only || !filters_let_guard(st))
		return real.perform(h); /* the socket layer attributes it */

	err = errno;
	rx__inside = 1;
	klen = make_key(st, key, sizeof(key));
	start = rx__now_ns();
	g = klen ? rx__key_acquire(key, klen, start) : NULL;
	if (!g) {
		rx__inside = 0;
		errno = err;
		return real.perform(h);
	}
	if (!rx__key_admit(g, start, &permit, &why, "curl")) {
		rx__key_release(g);
		if (st->errbuf)
			rx__curl_refusal_message(st->errbuf, key, &why);
		rx__inside = 0;
		errno = err;
		return RX_CURLE_COULDNT_CONNECT;
	}
	rx__inside = 0;
	errno = err;

	rx__curl_active = 1;
	astart = start;
	if (rx__retry_on() || rx__cfg.hedge) { /* one admission (ADR-467) */
		struct rx_curl_transfer t = {
		    h, &st->cb, rx__curl_idempotent(method_of(st)), is_http(st),
		    g, key, start, start, 0, real.perform, real.setopt,
		    real.getinfo, rx__curl_hedgeable(method_of(st), is_http(st)),
		    st->errbuf, real.duphandle, real.cleanup, NULL};

		rc = rx__curl_retry_perform(&t);
		astart = t.attempt_start_ns;
		ih = rx__curl_hedge_keep(h, t.info, real.cleanup);
	} else {
		rc = real.perform(h);
	}
	rx__curl_active = 0;

	err = errno;
	rx__inside = 1;
	end = rx__now_ns();
	if (real.getinfo) {
		if (real.getinfo(ih, RX_CURLINFO_RESPONSE_CODE, &status) !=
		    RX_CURLE_OK)
			status = 0;
		if (real.getinfo(ih, RX_CURLINFO_STARTTRANSFER_TIME_T,
				 &ttfb_us) != RX_CURLE_OK)
			ttfb_us = 0;
	}
	http = is_http(st);
	/* A failed transfer that ends on a 3xx while following redirects
	 * failed on the way to the next hop: libcurl keeps the last status
	 * it read, and the hop it was following to never answered. */
	if (rc != RX_CURLE_OK && st->follow && status >= 300 && status <= 399)
		status = 0;
	slow_ns = rx__config()->guard.breaker.slow_call_ms * RX_NS_PER_MS;
	deadline_ns = rx__config()->timeout_ms * RX_NS_PER_MS;
	v = rx__curl_verdict(
	    rc, status, http,
	    (slow_ns > 0 && end - start >= slow_ns) ||
		(deadline_ns > 0 && end - start > deadline_ns));
	/* Latency is time to first byte when libcurl measured one (it
	 * starts its clock where we do), else the whole transfer. An
	 * http(s) transfer that failed before its final status never had
	 * its first byte: libcurl's may be an interim 100 Continue's, or
	 * the EOF that ended it (ADR-241). */
	first_byte = end; /* of the last attempt, when it was retried */
	if (ttfb_us > 0 && (uint64_t)ttfb_us * RX_NS_PER_US < end - astart &&
	    (!http || rc == RX_CURLE_OK || rx__curl_final_status(status)))
		first_byte = astart + (uint64_t)ttfb_us * RX_NS_PER_US;
	/* RESILIX_TIMEOUT_MS judges, never cuts (ADR-145): an answer that
	 * came after the deadline is a timeout, though the program has it.
	 * What says nothing about the destination stays so. */
	if (deadline_ns > 0 && first_byte - start > deadline_ns &&
	    v != RX_REJECTED)
		v = RX_TIMEOUT;
	rx__key_settle(g, &permit, v, start, first_byte, end, "curl");
	rx__key_release(g);
	rx__inside = 0;
	errno = err;
	return rc;
}
