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
 * curl_easy_getinfo - for a transfer that sends a body, the arrival of
 * its final status line instead, which libcurl before 8.3.0 does not
 * report (ADR-662) - and classifies them with the table of
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
 * Per-handle state (ADR-156) lives in curl_table.c: an entry per handle
 * made by curl_easy_init or curl_easy_duphandle, freed by
 * curl_easy_cleanup, found by the handle's address.
 *
 * Forwarding curl_easy_setopt. The option's number says how its variadic
 * argument was passed (curl.h, CURLOPTTYPE_*): below 10000 a long, below
 * 20000 an object pointer, below 30000 a function pointer, below 40000 a
 * curl_off_t (64-bit even where long is 32), below 50000 a blob pointer.
 * The wrapper reads exactly that type and passes it on as that type;
 * an unknown number is read as a pointer, and libcurl refuses it anyway.
 * On x86-64 every one of those is one eightbyte in the same register, so
 * the wrapper reads it as a named argument and the common path - an
 * option the layer does not read, by a bit test - is a jump to libcurl's
 * (ADR-560, ADR-590). What the wrapper learns is recorded only when libcurl
 * accepted the option.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "curl_hedge.h"
#include "curl_layer.h"
#include "curl_retry.h"
#include "curl_table.h"
#include "admit.h"
#include "log.h"
#include "retry.h"
#include "runtime.h"
#include "symbols.h"



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

/* How curl_easy_setopt receives its variadic argument (ADR-560): on
 * x86-64 as a named one, elsewhere with va_arg by the option's type. */
#if RX_CURL_ARG_IN_REGISTER
#define RX_CURL_SETOPT_ARGS uintptr_t raw
#else
#define RX_CURL_SETOPT_ARGS ...
#endif
/* bind_all ran and found curl_easy_setopt (the wrapper's fast path
 * forwards to it without a check); until then, bind_real calls
 * pthread_once, which returns at once after the first time. */
static atomic_bool bound;
/* curl_easy_setopt's next hop; not static: x86-64's wrapper, in
 * assembly, jumps through it. */
extern _Atomic(setopt_fn) rx__curl_setopt_next RX_HIDDEN;

/* Our own definitions, to recognise them if a lookup finds them. */
RX_EXPORT void *curl_easy_init(void);
RX_EXPORT int curl_easy_setopt(void *h, int option, RX_CURL_SETOPT_ARGS);
RX_EXPORT int curl_easy_perform(void *h);
RX_EXPORT void curl_easy_cleanup(void *h);
RX_EXPORT void curl_easy_reset(void *h);
RX_EXPORT void *curl_easy_duphandle(void *h);

/* Our definitions, to recognise them if a lookup finds them (symbols.h). */
RX_SELF(curl_easy_init);
#if RX_CURL_ARG_IN_REGISTER
/* Defined, with the wrapper, in assembly below. */
extern int self_curl_easy_setopt(void *h, int option, uintptr_t raw) RX_HIDDEN;
#else
RX_SELF(curl_easy_setopt);
#endif
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

/* libcurl's CURLINFO_STARTTRANSFER_TIME_T is the answer's first byte for
 * every transfer (8.3.0 and later); before, for a transfer that sends a
 * body it is where the body started to go out (ADR-662). */
static bool ttfb_sound;
/* The head of libcurl's curl_version_info_data, as every version since
 * 7.10 lays it out. */
struct curl_version_head {
	int age;
	const char *version;
	unsigned int version_num; /* 0xXXYYZZ */
};
typedef const struct curl_version_head *(*version_fn)(int);

static void bind_all(void)
{
	int saved = errno;
	version_fn version;

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
	version = (version_fn)lookup("curl_version_info", NULL);
	if (version) {
		const struct curl_version_head *v = version(0);

		ttfb_sound = v && v->version_num >= 0x080300;
	}
	rx__curl_text_learn((const void *)real.init); /* ADR-592 */
	if (real.setopt) {
		atomic_store_explicit(&rx__curl_setopt_next, real.setopt,
				      memory_order_release);
		atomic_store_explicit(&bound, true, memory_order_release);
	}
	errno = saved;
}

/* Resolve the real functions once; the first curl call of the process
 * pays for it, every later one pays a load and a branch (@bound: no call
 * into pthread_once, which curl_easy_setopt would pay dozens of times per
 * transfer, ADR-560). A call made before any libcurl is loaded (a probe
 * of a weak curl_easy_init, a plugin not yet dlopen'ed) binds nothing and
 * runs no once: binding then would leave the layer unbound for good, and
 * every curl call failing, after libcurl arrives (ADR-598). */
static void bind_real(void)
{
	if (atomic_load_explicit(&bound, memory_order_acquire))
		return;
	if (!lookup("curl_easy_setopt", (void *)self_curl_easy_setopt))
		return;
	(void)pthread_once(&bind_once, bind_all);
}

/* ------------------------------------------------------------------------
 * What setopt teaches us.
 * ---------------------------------------------------------------------- */

/* The options learn() records: the layer's own, then the retry's. */
#define LEARNT_OPTIONS(X, a)                                                   \
	LAYER_OPTIONS(X, a)                                                    \
	RX_CURL_CB_OPTIONS(X, a)
#define LAYER_OPTIONS(X, a)                                                    \
	X(RX_CURLOPT_PORT, a)                                                  \
	X(RX_CURLOPT_NOBODY, a)                                                \
	X(RX_CURLOPT_UPLOAD, a)                                                \
	X(RX_CURLOPT_POST, a)                                                  \
	X(RX_CURLOPT_FOLLOWLOCATION, a)                                        \
	X(RX_CURLOPT_PUT, a)                                                   \
	X(RX_CURLOPT_HTTPGET, a)                                               \
	X(RX_CURLOPT_URL, a)                                                   \
	X(RX_CURLOPT_ERRORBUFFER, a)                                           \
	X(RX_CURLOPT_POSTFIELDS, a)                                            \
	X(RX_CURLOPT_HTTPPOST, a)                                              \
	X(RX_CURLOPT_CUSTOMREQUEST, a)                                         \
	X(RX_CURLOPT_COPYPOSTFIELDS, a)                                        \
	X(RX_CURLOPT_DEFAULT_PROTOCOL, a)                                      \
	X(RX_CURLOPT_MIMEPOST, a)                                              \
	X(RX_CURLOPT_CURLU, a)                                                 \
	X(RX_CURLOPT_UNIX_SOCKET_PATH, a)                                      \
	X(RX_CURLOPT_ABSTRACT_UNIX_SOCKET, a)                                  \
	X(RX_CURLOPT_CONNECT_ONLY, a)
/* The layer's own and the callbacks, for a process that times the
 * transfers that send a body through them (ADR-662, ADR-685). */
#define BODY_OPTIONS(X, a)                                                     \
	LAYER_OPTIONS(X, a)                                                    \
	RX_CURL_CB_FORWARD_OPTIONS(X, a)

/*
 * A filter of those options, a bit per (option mod 1024), computed by the
 * compiler: most of the dozens of options a transfer sets (the tool curl
 * sets about eighty) miss it and are forwarded with a tail jump, without
 * a lookup of the handle (ADR-560). A hit is learnt, or ignored, by
 * learn() (ADR-590). 1024 bits, not 512: at 512 the tool curl's
 * CURLOPT_READFUNCTION (20012) and CURLOPT_NOPROGRESS (43) shared bits
 * with options the layer reads, and went out of line every transfer
 * (ADR-565). Not static: x86-64's wrapper, in assembly, tests it.
 */
#define FILTER_BITS 1024
#define FILTER_WORDS (FILTER_BITS / 64)
#define FILTER_BIT(o, w)                                                       \
	| ((((o) & (FILTER_BITS - 1)) >> 6) == (w) ? UINT64_C(1) << ((o) & 63) : 0)
#define FILTER_WORD(w) (0 LEARNT_OPTIONS(FILTER_BIT, w))
#define LAYER_WORD(w) (0 LAYER_OPTIONS(FILTER_BIT, w))
#define BODY_WORD(w) (0 BODY_OPTIONS(FILTER_BIT, w))
extern _Atomic uint64_t rx__curl_learnt_filter[FILTER_WORDS] RX_HIDDEN;
_Atomic uint64_t rx__curl_learnt_filter[FILTER_WORDS] = {
    FILTER_WORD(0),  FILTER_WORD(1),  FILTER_WORD(2),  FILTER_WORD(3),
    FILTER_WORD(4),  FILTER_WORD(5),  FILTER_WORD(6),  FILTER_WORD(7),
    FILTER_WORD(8),  FILTER_WORD(9),  FILTER_WORD(10), FILTER_WORD(11),
    FILTER_WORD(12), FILTER_WORD(13), FILTER_WORD(14), FILTER_WORD(15)};
/* The filter without the retry's options, for a process that neither
 * retries nor hedges: nothing reads what they teach (ADR-564); with the
 * callbacks, when it times bodies through them (body_timing). */
static const uint64_t layer_filter[FILTER_WORDS] = {
    LAYER_WORD(0),  LAYER_WORD(1),  LAYER_WORD(2),  LAYER_WORD(3),
    LAYER_WORD(4),  LAYER_WORD(5),  LAYER_WORD(6),  LAYER_WORD(7),
    LAYER_WORD(8),  LAYER_WORD(9),  LAYER_WORD(10), LAYER_WORD(11),
    LAYER_WORD(12), LAYER_WORD(13), LAYER_WORD(14), LAYER_WORD(15)};
static const uint64_t body_filter[FILTER_WORDS] = {
    BODY_WORD(0),  BODY_WORD(1),  BODY_WORD(2),  BODY_WORD(3),
    BODY_WORD(4),  BODY_WORD(5),  BODY_WORD(6),  BODY_WORD(7),
    BODY_WORD(8),  BODY_WORD(9),  BODY_WORD(10), BODY_WORD(11),
    BODY_WORD(12), BODY_WORD(13), BODY_WORD(14), BODY_WORD(15)};
static atomic_bool filter_final; /* the filter is what stays */
/* A transfer that sends a body is timed by the callbacks: libcurl's timer
 * is unsound and a slow-call threshold or a timeout reads the latency
 * (ADR-685). Set with the filter, before any perform reads it. */
static atomic_bool body_timing;

#if !RX_CURL_ARG_IN_REGISTER
static bool maybe_learnt(int option)
{
	unsigned b = (unsigned)option & (FILTER_BITS - 1);

	return (atomic_load_explicit(&rx__curl_learnt_filter[b >> 6],
				     memory_order_relaxed) >>
		(b & 63)) &
	       1;
}
#endif

/* Once the configuration is in force (the shim ready), narrow the filter
 * to the layer's own options when the retry's bound is never read:
 * RESILIX_RETRY_ATTEMPTS at most 1 and no hedging, fixed for the
 * process's life. Another thread reads either filter, a superset of
 * what it must see either way: learn() records only what it knows. */
static __attribute__((noinline)) void filter_settle(void)
{
	bool timing = !ttfb_sound && (rx__cfg.guard.breaker.slow_call_ms > 0 ||
				      rx__cfg.timeout_ms > 0);
	const uint64_t *f = timing ? body_filter : layer_filter;
	size_t i;

	atomic_store_explicit(&body_timing, timing, memory_order_relaxed);
	if (!rx__retry_on() && !rx__cfg.hedge)
		for (i = 0; i < FILTER_WORDS; i++)
			atomic_store_explicit(&rx__curl_learnt_filter[i], f[i],
					      memory_order_relaxed);
	atomic_store_explicit(&filter_final, true, memory_order_release);
}

static void copy_str(char *dst, size_t size, const char *s)
{
	size_t n = s ? strnlen(s, size - 1) : 0;

	if (n)
		memcpy(dst, s, n);
	dst[n] = '\0';
}

/*
 * The URL memo (ADR-563): the last URL this thread parsed, as a copy of
 * its bytes (when shorter than MEMO_URL_MAX) and the parse's result. The
 * tool curl gives each URL of its command line a new handle, and a
 * program calling one service sets the same URL again and again: a URL
 * equal to the memo's, under the same default scheme, takes the parts
 * already parsed - a compare and a copy - where a parse reads each byte
 * a few times. The generation, unique in the process (handles move
 * between threads), tells the key memo which parts it was built from.
 * Per thread, so no lock; written with rx__inside set, so a signal
 * handler's curl call does not learn into it halfway.
 */
#define MEMO_URL_MAX 256
static RX_TLS struct url_memo {
	uint64_t gen; /* 0: empty */
	size_t len;   /* of url */
	bool ok;      /* what the parse returned */
	char url[MEMO_URL_MAX];
	char default_scheme[16];
	struct rx_curl_url parsed;
} url_memo;
static atomic_uint_fast64_t memo_gens;

/* The memo's parts into a handle's: all but the path, which only
 * RESILIX_CURL_KEY=endpoint reads - 256 bytes of the struct's 570 that
 * the tool curl's one URL per handle copied for nothing (ADR-590). */
static void url_take(struct rx_curl_url *dst, const struct rx_curl_url *src)
{
	size_t at = offsetof(struct rx_curl_url, path),
	       after = at + sizeof(src->path);

	memcpy(dst, src, at);
	memcpy((char *)dst + after, (const char *)src + after,
	       sizeof(*src) - after);
	if (rx__config()->curl_key == RX_CURL_KEY_ENDPOINT)
		memcpy(dst->path, src->path, sizeof(src->path));
	else
		dst->path[0] = '\0';
}

/* CURLOPT_URL: @p (NULL: unset) parsed into @st, or taken from the memo. */
static void learn_url(struct rx_curl_handle *st, const char *p)
{
	struct url_memo *m = &url_memo;
	size_t n;

	st->url_gen = 0;
	if (!p) {
		st->url_ok = false;
		return;
	}
	n = strnlen(p, MEMO_URL_MAX);
	if (n < MEMO_URL_MAX && m->gen && n == m->len &&
	    memcmp(p, m->url, n) == 0 &&
	    st->default_scheme[0] == m->default_scheme[0] &&
	    (!st->default_scheme[0] ||
	     strcmp(st->default_scheme, m->default_scheme) == 0)) {
		st->url_ok = m->ok;
		if (m->ok) {
			url_take(&st->url, &m->parsed);
			st->url_gen = m->gen;
		}
		return;
	}
	st->url_ok = rx__curl_parse_url(p, st->default_scheme, &st->url);
	if (n >= MEMO_URL_MAX)
		return;
	m->gen = 0;
	memcpy(m->url, p, n);
	m->len = n;
	memcpy(m->default_scheme, st->default_scheme,
	       sizeof(m->default_scheme));
	m->ok = st->url_ok;
	if (st->url_ok)
		m->parsed = st->url;
	m->gen = atomic_fetch_add_explicit(&memo_gens, 1,
					   memory_order_relaxed) +
		 1;
	if (st->url_ok)
		st->url_gen = m->gen;
}

/* Record an option libcurl accepted, as libcurl's setopt.c and
 * Curl_http_method read it. Sets no errno (no call in here can). */
static void learn(struct rx_curl_handle *st, int option, long l, void *p)
{
	switch (option) {
	case RX_CURLOPT_URL:
		learn_url(st, p);
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
			st->url_gen = 0; /* no longer the memo's parts */
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
			st->httpreq = RX_CURL_REQ_HEAD;
		else if (st->httpreq == RX_CURL_REQ_HEAD)
			st->httpreq = RX_CURL_REQ_GET;
		break;
	case RX_CURLOPT_UPLOAD:
	case RX_CURLOPT_PUT:
		st->upload = l != 0;
		if (l) {
			st->httpreq = RX_CURL_REQ_PUT;
			st->no_body = false;
		} else {
			st->httpreq = RX_CURL_REQ_GET;
		}
		break;
	case RX_CURLOPT_POST:
		if (l) {
			st->httpreq = RX_CURL_REQ_POST;
			st->no_body = false;
		} else {
			st->httpreq = RX_CURL_REQ_GET;
		}
		break;
	case RX_CURLOPT_HTTPGET:
		if (l) {
			st->httpreq = RX_CURL_REQ_GET;
			st->upload = false;
			st->no_body = false;
		}
		break;
	case RX_CURLOPT_POSTFIELDS:
	case RX_CURLOPT_COPYPOSTFIELDS:
		st->httpreq = RX_CURL_REQ_POST;
		break;
	case RX_CURLOPT_HTTPPOST:
	case RX_CURLOPT_MIMEPOST:
		if (p) {
			st->httpreq = RX_CURL_REQ_POST;
			st->no_body = false;
		}
		break;
	default:
		(void)rx__curl_cb_learn(&st->cb, option, l, p);
		break;
	}
}

/* ------------------------------------------------------------------------
 * The wrappers.
 * ---------------------------------------------------------------------- */

RX_EXPORT void *curl_easy_init(void)
{
	const void *ra = __builtin_return_address(0);
	void *h;

	bind_real();
	if (!real.init)
		return NULL; /* what libcurl returns when it cannot start */
	h = real.init();
	/* Not libcurl's own closure handles (ADR-592). */
	if (h && !rx__curl_internal(ra) && rx__curl_guarding()) {
		int saved = errno;

		rx__inside = 1;
		(void)rx__curl_follow(h, NULL);
		rx__inside = 0;
		errno = saved;
	}
	return h;
}

/* curl_easy_setopt's variadic argument, as its option's type says. */
union setopt_arg {
	long l;
	void *p;
	void (*f)(void);
	rx_curl_off_t o;
};

/* Call the real setopt with @a passed as @option's type. */
static inline int forward(setopt_fn f, void *h, int option,
			  union setopt_arg a)
{
	if (option < RX_CURLOPTTYPE_OBJECTPOINT)
		return f(h, option, a.l);
	if (option < RX_CURLOPTTYPE_FUNCTIONPOINT)
		return f(h, option, a.p);
	if (option < RX_CURLOPTTYPE_OFF_T)
		return f(h, option, a.f);
	if (option < RX_CURLOPTTYPE_BLOB)
		return f(h, option, a.o);
	return f(h, option, a.p);
}

/* Forward an option the filter let through (or any, before the real
 * functions are bound), and learn it if libcurl accepted it and the layer
 * follows @h. Out of line, so that the wrapper's common path is a load,
 * a bit test and the call. */
static __attribute__((noinline)) int setopt_learn(void *h, int option,
						  union setopt_arg a)
{
	struct rx_curl_handle *st;
	int rc;

	/* @bound implies real.setopt. */
	if (!atomic_load_explicit(&bound, memory_order_acquire)) {
		bind_real();
		if (!real.setopt)
			return RX_CURLE_FAILED_INIT;
	}
#if RX_CURL_ARG_IN_REGISTER
	/* One eightbyte in one register, whatever the type (ADR-560). */
	rc = real.setopt(h, option, (uintptr_t)a.l);
#else
	rc = forward(real.setopt, h, option, a);
#endif

	/* No exact check of @option first: learn() ignores what it does
	 * not record, and the filter lets few others through (ADR-590). */
	if (rc != RX_CURLE_OK || !rx__curl_guarding())
		return rc;
	if (!atomic_load_explicit(&filter_final, memory_order_relaxed))
		filter_settle();
	st = rx__curl_find(h);
	if (st) {
		/* learn() sets no errno: nothing to save. rx__inside keeps a
		 * signal handler's curl call out of the URL memo meanwhile. */
		rx__inside = 1;
		learn(st, option,
		      option < RX_CURLOPTTYPE_OBJECTPOINT ? a.l : 0,
		      option < RX_CURLOPTTYPE_OBJECTPOINT ? NULL : a.p);
		rx__inside = 0;
	}
	return rc;
}

/* Read curl_easy_setopt's variadic argument as @option's type says. */
static inline union setopt_arg read_arg(int option, va_list ap)
{
	union setopt_arg arg;

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
	return arg;
}

/* Where the wrapper's common path goes until bind_all has found
 * libcurl's curl_easy_setopt (rx__curl_setopt_next): bind, forward, learn. */
static int setopt_bind(void *h, int option, ...)
{
	union setopt_arg arg;
	va_list ap;

	va_start(ap, option);
	arg = read_arg(option, ap);
	va_end(ap);
	return setopt_learn(h, option, arg);
}

_Atomic(setopt_fn) rx__curl_setopt_next = setopt_bind;

#if RX_CURL_ARG_IN_REGISTER
/* x86-64: the argument is one INTEGER-class eightbyte (long, pointer,
 * function pointer, curl_off_t, blob pointer), which a variadic call
 * passes in the register a third named one would use (the psABI, 3.5.7):
 * read as such (ADR-560). The wrapper itself is five instructions of
 * assembly (ADR-590): the option's bit in the filter, tested in memory
 * with r11 (a scratch register no argument uses) for the index, then a
 * jump - to libcurl's setopt, or to setopt_bind before it is bound, or
 * to the learning path - with every other register as the program left
 * it, %al included (the count of vector registers a variadic callee
 * reads). A compiled one took nine: a shift and mask for the word, and
 * %al cleared because the index went through %eax. */
int rx__curl_setopt_learn(void *h, int option, uintptr_t raw) RX_HIDDEN;

/* Would learn() leave @st as it is for @option set to @raw (the tool
 * curl sets CURLOPT_FOLLOWLOCATION, CURLOPT_UPLOAD and
 * CURLOPT_CUSTOMREQUEST to their defaults on every new handle)? Read as
 * learn() reads it: a long's eight bytes, or the pointer. */
static bool learnt_already(const struct rx_curl_handle *st, int option,
			   uintptr_t raw)
{
	switch (option) {
	case RX_CURLOPT_FOLLOWLOCATION:
		return st->follow == ((long)raw != 0);
	case RX_CURLOPT_ERRORBUFFER:
		return st->errbuf == (char *)raw;
	case RX_CURLOPT_CUSTOMREQUEST:
		return raw == 0 && st->custom[0] == '\0';
	case RX_CURLOPT_UPLOAD:
	case RX_CURLOPT_PUT:
		return (long)raw == 0 && !st->upload &&
		       st->httpreq == RX_CURL_REQ_GET;
	case RX_CURLOPT_NOBODY:
		return (long)raw == 0 && !st->no_body &&
		       st->httpreq != RX_CURL_REQ_HEAD;
	default:
		return false;
	}
}

/* An option the filter let through. When the handle's entry - this
 * thread's last, found without a lock (ADR-561) - already holds what
 * learn() would record, learning changes nothing, whether libcurl
 * accepts the option or not: a jump to libcurl's (ADR-590). */
__attribute__((used)) int rx__curl_setopt_learn(void *h, int option,
						uintptr_t raw)
{
	const struct rx_curl_handle *st = rx__curl_last_state;
	union setopt_arg arg;

	if (st && rx__curl_last_handle == h &&
	    __atomic_load_n(&st->handle, __ATOMIC_RELAXED) == h &&
	    atomic_load_explicit(&bound, memory_order_acquire) &&
	    learnt_already(st, option, raw))
		return real.setopt(h, option, raw);
	arg.l = (long)raw; /* the same eight bytes, whatever the type */
	return setopt_learn(h, option, arg);
}

__asm__("	.pushsection .text\n"
	"	.globl curl_easy_setopt\n"
	"	.type curl_easy_setopt, @function\n"
	"	.p2align 4\n"
	"curl_easy_setopt:\n"
	"	.cfi_startproc\n"
#ifdef __CET__
	"	endbr64\n"
#endif
	"	movl %esi, %r11d\n"
	"	andl $1023, %r11d\n" /* FILTER_BITS - 1 */
	"	btq %r11, rx__curl_learnt_filter(%rip)\n"
	"	jc rx__curl_setopt_learn\n"
	"	jmp *rx__curl_setopt_next(%rip)\n"
	"	.cfi_endproc\n"
	"	.size curl_easy_setopt, .-curl_easy_setopt\n"
	"	.globl self_curl_easy_setopt\n" /* as RX_SELF's alias */
	"	.hidden self_curl_easy_setopt\n"
	"	.set self_curl_easy_setopt, curl_easy_setopt\n"
	"	.popsection\n");
#else
RX_EXPORT int curl_easy_setopt(void *h, int option, ...)
{
	union setopt_arg arg;
	setopt_fn next;
	va_list ap;

	va_start(ap, option);
	arg = read_arg(option, ap);
	va_end(ap);
	/* Nothing in this path outlives a call: no register to save. */
	next =
	    atomic_load_explicit(&rx__curl_setopt_next, memory_order_acquire);
	if (maybe_learnt(option))
		return setopt_learn(h, option, arg);
	return forward(next, h, option, arg);
}
#endif

RX_EXPORT void *curl_easy_duphandle(void *h)
{
	struct rx_curl_handle *from, copy;
	void *dup;

	bind_real();
	if (!real.duphandle)
		return NULL;
	dup = real.duphandle(h);
	if (!dup || !rx__curl_guarding())
		return dup;
	rx__inside = 1;
	from = rx__curl_find(h);
	if (from)
		copy = *from; /* @h is the caller's: stable while we copy */
	(void)rx__curl_follow(dup, from ? &copy : NULL);
	rx__inside = 0;
	return dup;
}

RX_EXPORT void curl_easy_reset(void *h)
{
	struct rx_curl_handle *st;

	bind_real();
	if (!real.reset)
		return;
	real.reset(h);
	if (!rx__curl_guarding() || !rx__owner())
		return;
	st = rx__curl_find(h);
	if (st)
		rx__curl_state_clear(st);
}

RX_EXPORT void curl_easy_cleanup(void *h)
{
	bind_real();
	/* Forget first: once libcurl frees the handle, another thread's
	 * curl_easy_init may get the same address. */
	if (h && rx__curl_table_ready() &&
	    !rx__reentered()) {
		int saved = errno;

		rx__curl_hedge_forget(h);
		rx__curl_forget(h);
		errno = saved;
	}
	if (real.cleanup)
		real.cleanup(h);
}

/* Does @st's transfer send a request body (PUT, POST, a form)? */
static bool sends_body(const struct rx_curl_handle *st)
{
	return st->upload || st->httpreq == RX_CURL_REQ_POST ||
	       st->httpreq == RX_CURL_REQ_PUT;
}

RX_EXPORT int curl_easy_perform(void *h)
{
	struct rx_gate_permit permit;
	struct rx_refusal why = {RX_REASON_NONE, 0};
	struct rx_curl_handle *st;
	char key[RX_KEY_MAX + 1];
	struct rx_guard *g;
	void *ih = h; /* whose CURLINFO describes the transfer (ADR-472) */
	rx_curl_off_t ttfb_us = 0;
	uint64_t start, astart, end, slow_ns, deadline_ns, first_byte;
	uint64_t answer = 0; /* the status line's arrival, when timed */
	bool body; /* sends a body that libcurl's own timer cannot time */
	bool timed = false; /* run through the callbacks, which time it */
	enum rx_verdict v;
	size_t klen;
	uint32_t hash;
	long status = 0;
	bool http;
	int rc, err;

	bind_real();
	if (!real.perform)
		return RX_CURLE_FAILED_INIT;
	rx__curl_hedge_forget(h); /* its CURLINFO is its own again */
	/* A perform from inside another one's callback is libcurl's to
	 * refuse (CURLE_RECURSIVE_API_CALL), not ours to count. */
	if (rx__curl_active || !rx__curl_guarding())
		return real.perform(h);
	st = rx__curl_find(h);
	/* Over a Unix socket, nothing crosses the network: untracked, as
	 * the socket layer leaves AF_UNIX (ADR-242). A CONNECT_ONLY
	 * perform only connects: the exchange comes later, through
	 * curl_easy_send/recv, where the socket layer sees it (ADR-366). */
	if (!st || !st->url_ok || st->curlu || st->unix_socket ||
	    st->connect_only)
		return real.perform(h); /* the socket layer attributes it */
	err = errno;
	rx__inside = 1; /* the key memo is this thread's */
	if (!rx__curl_destination(st, key, &klen, &hash, &http)) {
		rx__inside = 0;
		errno = err;
		return real.perform(h);
	}
	start = rx__now_ns();
	g = klen ? rx__key_acquire_hashed(key, klen, hash, start) : NULL;
	if (!g) {
		rx__inside = 0;
		errno = err;
		return real.perform(h);
	}
	/* The guard's common case first, as a kept-alive request takes it
	 * (ADR-593): one lock round trip; anything else, the general
	 * admission, which may queue. */
	if (!(rx__ka_on && rx__key_admit_fast(g, start, &permit)) &&
	    !rx__key_admit(g, start, &permit, &why, "curl")) {
		rx__key_release(g);
		if (st->errbuf)
			rx__curl_refusal_message(st->errbuf, key, &why);
		rx__curl_refused(h);
		rx__inside = 0;
		errno = err;
		return RX_CURLE_COULDNT_CONNECT;
	}
	rx__inside = 0;
	errno = err;

	rx__curl_active = 1;
	astart = start;
	/* A transfer that sends a body runs with our header callback too,
	 * which times its answer: libcurl before 8.3.0 puts its first byte
	 * where the body started to go out (ADR-662). */
	body = !ttfb_sound && sends_body(st);
	if (rx__retry_on() || rx__cfg.hedge ||
	    (body && atomic_load_explicit(&body_timing, memory_order_relaxed))) {
		/* One admission (ADR-467). */
		const char *method = rx__curl_method_of(st);
		struct rx_curl_transfer t = {
		    h, &st->cb, rx__curl_idempotent(method), http, g, key,
		    start, start, 0, real.perform, real.setopt, real.getinfo,
		    rx__curl_hedgeable(method, http), st->errbuf,
		    real.duphandle, real.cleanup, NULL, 0};

		rc = rx__curl_retry_perform(&t);
		timed = true;
		astart = t.attempt_start_ns;
		answer = t.answer_ns;
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
	if (!http || rc == RX_CURLE_OK || rx__curl_final_status(status)) {
		if (answer > astart && answer <= end)
			first_byte = answer; /* the final status line's */
		else if (ttfb_us > 0 &&
			 (uint64_t)ttfb_us * RX_NS_PER_US < end - astart)
			first_byte = astart + (uint64_t)ttfb_us * RX_NS_PER_US;
	}
	/* RESILIX_TIMEOUT_MS judges, never cuts (ADR-145): an answer that
	 * came after the deadline is a timeout, though the program has it.
	 * What says nothing about the destination stays so. */
	if (deadline_ns > 0 && first_byte - start > deadline_ns &&
	    v != RX_REJECTED)
		v = RX_TIMEOUT;
	/* A body's transfer that libcurl alone timed has no latency to give
	 * (ADR-685): judged by its outcome, no sample for the limiter. One
	 * the callbacks timed has, though no status line came: a hang cut by
	 * curl's timeout, a reset, an upload of a protocol without one - the
	 * time to its end, as any transfer's with no answer. */
	if (RX__UNLIKELY(body && !timed))
		rx__key_settle_call(g, &permit, v, start, first_byte, end,
				    "curl", NULL, 0, true);
	else
		rx__key_settle(g, &permit, v, start, first_byte, end, "curl");
	rx__key_release(g);
	rx__inside = 0;
	errno = err;
	return rc;
}
