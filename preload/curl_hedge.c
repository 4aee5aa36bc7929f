/*
 * preload/curl_hedge.c - hedged libcurl transfers (curl_hedge.h;
 * ADR-469 to ADR-474).
 *
 * A guarded GET or HEAD over http(s), with RESILIX_HEDGE=1, runs on this
 * thread's multi handle instead of inside libcurl's own easy loop. When
 * it has had no first byte after the key's delay (RESILIX_HEDGE_DELAY_MS,
 * else the key's measured p95 of time to first byte) and the process's
 * retry budget grants a withdrawal, a duplicate of the program's handle
 * (curl_easy_duphandle) joins the same multi handle: two attempts race
 * inside the program's one curl_easy_perform. Both run on this thread
 * with rx__curl_active set, so the socket layer passes their sockets
 * through and the breaker and the other policies see one call, settled by
 * curl.c (ADR-473).
 *
 * Who wins (ADR-470). Each attempt's write and header callbacks are ours.
 * While two attempts race, no byte of either reaches the program: at its
 * final status line an attempt whose status is a success or an answer
 * (what rx__curl_verdict calls RX_SUCCESS or RX_ANSWERED) wins, and from
 * then on its bytes go to the program's callbacks (through the retry
 * layer's, ADR-467), as they come; the other is cancelled. An attempt that
 * fails while the other still runs (a 5xx, 429 or 408 at its status line,
 * or an error before it) is cancelled instead: a hedge that fails fast
 * never beats an original that would have succeeded, and an original
 * that fails after the hedge started leaves the transfer to the hedge.
 * An attempt running alone - the original before any hedge started, or
 * the one left - wins at its first byte, whatever it is. So nothing is
 * ever buffered: the decision is taken at a status line, before any byte
 * of that response was delivered; interim responses (1xx) read during a
 * race are dropped. The program sees exactly one response per transfer.
 *
 * The multi handle is this thread's, created at its first hedged-eligible
 * transfer and kept (with its connections, so keep-alive works across
 * transfers) until the thread exits; a forked child forgets its parent's
 * (the connections are the parent's) and makes its own.
 *
 * The multi functions are bound at run time (the shim never links
 * libcurl, ADR-150), the way curl.c binds its own: dlsym(RTLD_NEXT),
 * then the sonames of a libcurl a plugin may have loaded RTLD_LOCAL. If
 * one is missing, or the multi handle cannot be made, the attempt is the
 * plain perform.
 *
 * Time to first byte (ADR-471) is kept per key here, only while hedging
 * is on, in a fixed table of P-square estimators (Jain and Chlamtac,
 * 1985; src/p2.c): the original attempt's time to its first byte, or,
 * when it was cancelled for a hedge that won, how long it had waited.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#include "curl_abi.h"
#include "curl_hedge.h"
#include "curl_layer.h"
#include "log.h"
#include "retry.h"
#include "runtime.h"
#include "symbols.h"

typedef size_t (*data_fn)(char *, size_t, size_t, void *);

bool rx__curl_idempotent(const char *m)
{
	return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 ||
	       strcmp(m, "OPTIONS") == 0 || strcmp(m, "PUT") == 0 ||
	       strcmp(m, "DELETE") == 0;
}

bool rx__curl_hedgeable(const char *m, bool http)
{
	return rx__cfg.hedge && http &&
	       (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0);
}

/* ---- the estimate ---------------------------------------------------- */

/* Keys with an estimate; more keys are hedged only with a fixed delay. */
#define KEYS 256

struct key_est {
	_Atomic uint64_t hash; /* 0 = free */
	atomic_flag busy;      /* taken by the one thread updating it */
	_Atomic uint64_t delay_ns; /* published, read without the flag */
	struct rx_hedge_est est;
};

static struct key_est keys[KEYS];

static uint64_t hash_of(const char *key)
{
	uint64_t h = UINT64_C(1469598103934665603); /* FNV-1a */

	for (; *key; key++)
		h = (h ^ (unsigned char)*key) * UINT64_C(1099511628211);
	return h ? h : 1;
}

/* The slot of @key, claimed if new; NULL when the table is full. Two keys
 * with one 64-bit hash share an estimate. */
static struct key_est *slot_of(const char *key)
{
	uint64_t h = hash_of(key);
	size_t i, s = (size_t)(h % KEYS);

	for (i = 0; i < KEYS; i++, s = (s + 1) % KEYS) {
		uint64_t cur = atomic_load(&keys[s].hash), zero = 0;

		if (cur == h)
			return &keys[s];
		if (cur == 0 &&
		    atomic_compare_exchange_strong(&keys[s].hash, &zero, h)) {
			while (atomic_flag_test_and_set(&keys[s].busy))
				;
			rx__hedge_est_init(&keys[s].est);
			atomic_flag_clear(&keys[s].busy);
			return &keys[s];
		}
		if (atomic_load(&keys[s].hash) == h)
			return &keys[s];
	}
	return NULL;
}

/* A sample for @k; skipped when another thread holds it (a lost sample
 * costs nothing, a wait would cost the data path). */
static void add_sample(struct key_est *k, uint64_t ns)
{
	uint64_t d;

	if (!k || atomic_flag_test_and_set(&k->busy))
		return;
	if (k->est.p95.p == 0.0) /* claimed, init not seen yet */
		rx__hedge_est_init(&k->est);
	rx__hedge_est_add(&k->est, ns / RX_NS_PER_US);
	d = rx__hedge_est_delay_ns(&k->est, 0);
	atomic_flag_clear(&k->busy);
	atomic_store_explicit(&k->delay_ns, d, memory_order_relaxed);
}

static uint64_t delay_of(struct key_est *k)
{
	if (rx__cfg.hedge_delay_ms > 0)
		return rx__cfg.hedge_delay_ms * RX_NS_PER_MS;
	return k ? atomic_load_explicit(&k->delay_ns, memory_order_relaxed)
		 : 0;
}

/* ---- the multi interface, bound at run time ------------------------- */

/* CURLMsg (curl/multi.h): CURLMSG_DONE carries the CURLcode. */
struct rx_curlmsg {
	int msg;
	void *easy;
	union {
		void *whatever;
		int result;
	} data;
};
#define RX_CURLMSG_DONE 1
#define RX_CURLM_OK 0

static struct {
	void *(*init)(void);
	int (*cleanup)(void *);
	int (*add)(void *, void *);
	int (*remove)(void *, void *);
	int (*perform)(void *, int *);
	int (*wait)(void *, void *, unsigned, int, int *);
	struct rx_curlmsg *(*info_read)(void *, int *);
} m;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static pthread_key_t multi_key;
static bool bound;
static RX_TLS void *thread_multi;

static void *lookup(const char *name)
{
	return rx__symbol_real(name, NULL, rx__curl_sonames, RX_CURL_NSONAMES);
}

static void drop_multi(void *multi)
{
	if (multi && m.cleanup)
		(void)m.cleanup(multi);
}

/* A forked child must not drive its parent's connections: forget them. */
static void child_forgets(void)
{
	thread_multi = NULL;
}

static void bind_multi(void)
{
	int saved = errno;

	*(void **)&m.init = lookup("curl_multi_init");
	*(void **)&m.cleanup = lookup("curl_multi_cleanup");
	*(void **)&m.add = lookup("curl_multi_add_handle");
	*(void **)&m.remove = lookup("curl_multi_remove_handle");
	*(void **)&m.perform = lookup("curl_multi_perform");
	*(void **)&m.wait = lookup("curl_multi_wait");
	*(void **)&m.info_read = lookup("curl_multi_info_read");
	bound = m.init && m.cleanup && m.add && m.remove && m.perform &&
		m.wait && m.info_read &&
		pthread_key_create(&multi_key, drop_multi) == 0 &&
		pthread_atfork(NULL, NULL, child_forgets) == 0;
	errno = saved;
}

static void *get_multi(void)
{
	(void)pthread_once(&bind_once, bind_multi);
	if (!bound)
		return NULL;
	if (!thread_multi) {
		thread_multi = m.init();
		if (thread_multi &&
		    pthread_setspecific(multi_key, thread_multi) != 0) {
			(void)m.cleanup(thread_multi);
			thread_multi = NULL;
		}
	}
	return thread_multi;
}

/* ---- the winner's CURLINFO (ADR-472) -------------------------------- */

/* The program's handle whose last perform a hedge won on this thread, and
 * that duplicate, kept for curl_easy_getinfo until the handle's next
 * perform, reset or cleanup, or the next hedge that wins here. */
static RX_TLS void *kept_h, *kept_dup;
/* The handle whose last perform this thread refused: libcurl did not run,
 * so its status codes read 0, as after a connect that failed (ADR-597). */
static RX_TLS const void *refused_h;
static void (*kept_cleanup)(void *);
static int (*real_getinfo)(void *, int, ...);
static pthread_once_t getinfo_once = PTHREAD_ONCE_INIT;

void rx__curl_hedge_forget(const void *h)
{
	void *d = kept_dup;

	if (h == refused_h)
		refused_h = NULL;
	if (!d || h != kept_h)
		return;
	kept_h = kept_dup = NULL;
	kept_cleanup(d);
}

void rx__curl_refused(const void *h)
{
	refused_h = h;
}

void *rx__curl_hedge_keep(void *h, void *dup, void (*cleanup)(void *))
{
	if (!dup)
		return h;
	if (kept_dup)
		rx__curl_hedge_forget(kept_h);
	kept_cleanup = cleanup;
	kept_h = h;
	kept_dup = dup;
	return dup;
}

/* On x86-64 the one pointer argument arrives where a named third one
 * would (the psABI, 3.5.7): read as such, the wrapper ends in a jump to
 * libcurl's (ADR-560). Elsewhere, va_arg. */
#if RX_CURL_ARG_IN_REGISTER
#define RX_GETINFO_ARGS void *p
#else
#define RX_GETINFO_ARGS ...
#endif

RX_EXPORT int curl_easy_getinfo(void *h, int info, RX_GETINFO_ARGS);
RX_SELF(curl_easy_getinfo);

typedef int (*getinfo_fn)(void *, int, ...);
/* real_getinfo once found: the wrapper's one check (ADR-593). */
static _Atomic(getinfo_fn) getinfo_next;

static void bind_getinfo(void)
{
	int saved = errno;

	*(void **)&real_getinfo = rx__symbol_real(
	    "curl_easy_getinfo", (void *)self_curl_easy_getinfo, rx__curl_sonames,
	    RX_CURL_NSONAMES);
	if (real_getinfo)
		atomic_store_explicit(&getinfo_next, real_getinfo,
				      memory_order_release);
	errno = saved;
}

/* The first call: bind, then forward. Out of line, so that the common
 * path saves no register and ends in a jump. */
static __attribute__((noinline)) getinfo_fn getinfo_first(void)
{
	/* No libcurl loaded yet: no once spent on finding nothing (ADR-598). */
	if (!rx__symbol_real("curl_easy_getinfo", (void *)self_curl_easy_getinfo,
			     rx__curl_sonames, RX_CURL_NSONAMES))
		return NULL;
	(void)pthread_once(&getinfo_once, bind_getinfo);
	return real_getinfo;
}

/* What libcurl answers for CURLINFO @info (index, its type's bits
 * masked off) after a transfer whose connect was refused: the fields it
 * resets at each transfer's start (Curl_initinfo, the progress counters)
 * and that a failed connect leaves so - no status, no connection, no
 * byte, no time spent past the start, no address, an unknown length or
 * file time, the connect's errno (ADR-620). @v: the value (-1, 0 or
 * ECONNREFUSED); false: @info is not such a field. Pure. */
static bool refused_value(int info, long *v)
{
	int type = info & RX_CURLINFO_TYPEMASK, i = info & 0xfffff;

	*v = 0;
	switch (type) {
	case RX_CURLINFO_LONG:
		if (i == 25) { /* OS_ERRNO: the connect's */
			*v = ECONNREFUSED;
			return true;
		}
		if (i == 14) { /* FILETIME: unknown */
			*v = -1;
			return true;
		}
		/* RESPONSE_CODE, HEADER_SIZE, REQUEST_SIZE, REDIRECT_COUNT,
		 * HTTP_CONNECTCODE, HTTPAUTH_AVAIL, PROXYAUTH_AVAIL,
		 * NUM_CONNECTS, CONDITION_UNMET, PRIMARY_PORT, LOCAL_PORT,
		 * HTTP_VERSION, PROTOCOL */
		return i == 2 || i == 11 || i == 12 || i == 20 || i == 22 ||
		       i == 23 || i == 24 || i == 26 || i == 35 || i == 40 ||
		       i == 42 || i == 46 || i == 48;
	case RX_CURLINFO_DOUBLE:
	case RX_CURLINFO_OFF_T:
		/* CONTENT_LENGTH_DOWNLOAD/UPLOAD, FILETIME_T: unknown */
		if (i == 15 || i == 16 || (i == 14 && type == RX_CURLINFO_OFF_T)) {
			*v = -1;
			return true;
		}
		/* the times (3-6, 17, 19, 33; 50-56), sizes and speeds (7-10),
		 * RETRY_AFTER (57), QUEUE_TIME_T (65), POSTTRANSFER_TIME_T
		 * (67) */
		return (i >= 3 && i <= 10) || i == 17 || i == 19 || i == 33 ||
		       (type == RX_CURLINFO_OFF_T &&
			((i >= 50 && i <= 57) || i == 65 || i == 67));
	default:
		return false;
	}
}

/* curl_easy_getinfo on @h, whose last perform on this thread the layer
 * refused before libcurl ran (ADR-597): the fields a real connection
 * refusal resets read as after one (refused_value), PRIMARY_IP and
 * LOCAL_IP as "" and CONTENT_TYPE and REDIRECT_URL as NULL, CURLE_OK;
 * anything else - the handle's own (PRIVATE, ACTIVESOCKET, COOKIELIST,
 * CERTINFO...), EFFECTIVE_URL - goes to libcurl (@f) as asked. Out of
 * line: the common getinfo path keeps one compare (ADR-593, ADR-620). */
static __attribute__((noinline)) int refused_info(getinfo_fn f, void *h,
						  int info, void *p)
{
	int type = info & RX_CURLINFO_TYPEMASK, i = info & 0xfffff;
	long v;

	if (!p)
		return f(h, info, p);
	if (type == RX_CURLINFO_STRING) {
		if (i == 32 || i == 41) { /* PRIMARY_IP, LOCAL_IP */
			*(const char **)p = "";
			return 0;
		}
		/* CONTENT_TYPE, REDIRECT_URL, SCHEME */
		if (i == 18 || i == 31 || i == 49) {
			*(const char **)p = NULL;
			return 0;
		}
		return f(h, info, p);
	}
	if (!refused_value(info, &v))
		return f(h, info, p);
	if (type == RX_CURLINFO_LONG)
		*(long *)p = v;
	else if (type == RX_CURLINFO_DOUBLE)
		*(double *)p = (double)v;
	else
		*(int64_t *)p = (int64_t)v; /* curl_off_t */
	return 0; /* CURLE_OK */
}

RX_EXPORT int curl_easy_getinfo(void *h, int info, RX_GETINFO_ARGS)
{
	getinfo_fn f = atomic_load_explicit(&getinfo_next, memory_order_acquire);
#if !RX_CURL_ARG_IN_REGISTER
	va_list ap;
	void *p;

	/* Every CURLINFO argument is one pointer (curl.h: long *, char **,
	 * double *, curl_off_t *, struct curl_slist **, ...). */
	va_start(ap, info);
	p = va_arg(ap, void *);
	va_end(ap);
#endif
	if (!f) {
		f = getinfo_first();
		if (!f)
			return RX_CURLE_FAILED_INIT;
	}
	if (h == refused_h)
		return refused_info(f, h, info, p);
	return f(kept_dup && h == kept_h ? kept_dup : h, info, p);
}

/* ---- the race -------------------------------------------------------- */

struct race;

struct runner {
	struct race *r;
	void *h;
	uint64_t start_ns, first_byte_ns;
	bool added;   /* in the multi handle */
	bool drop;    /* cancelled: its callbacks abort it */
	bool done;    /* finished, @rc its CURLcode */
	int rc;
	char errbuf[RX_CURL_ERROR_SIZE];
};

struct race {
	struct rx_curl_transfer *t;
	const struct rx_curl_cb *fwd;
	struct runner a[2]; /* the original, the hedge */
	int winner;	    /* -1 while undecided */
};

static bool running(const struct runner *x)
{
	return x->added && !x->drop && !x->done;
}

/* Is @x the winner, deciding at line @p (@n bytes) if none is yet? */
static bool decide(struct runner *x, const char *p, size_t n)
{
	struct race *r = x->r;
	int me = x == &r->a[0] ? 0 : 1;
	struct runner *o = &r->a[1 - me];
	enum rx_verdict v;
	long s;

	if (r->winner >= 0)
		return r->winner == me;
	if (x->first_byte_ns == 0)
		x->first_byte_ns = rx__now_ns();
	if (!running(o)) {
		r->winner = me; /* alone: its first byte decides */
		return true;
	}
	s = rx__curl_status_line(p, n);
	if (s < 200)
		return false; /* interim, during a race: dropped */
	v = rx__curl_verdict(RX_CURLE_OK, s, true, false);
	if (v == RX_SUCCESS || v == RX_ANSWERED) {
		r->winner = me;
		o->drop = true;
		return true;
	}
	x->drop = true; /* fails fast: the other goes on alone */
	return false;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct runner *x = ud;
	const struct rx_curl_cb *fwd = x->r->fwd;
	size_t n = size * nmemb;

	if (x->drop)
		return 0; /* CURLE_WRITE_ERROR: it ends at once */
	if (!decide(x, p, n))
		return x->drop ? 0 : n;
	return ((data_fn)fwd->header_fn)(p, size, nmemb, fwd->header_data);
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *ud)
{
	struct runner *x = ud;
	const struct rx_curl_cb *fwd = x->r->fwd;
	size_t n = size * nmemb;

	if (x->drop)
		return n ? 0 : n;
	/* With CURLOPT_HEADER the status line comes here first. */
	if (!decide(x, p, n))
		return x->drop ? 0 : n;
	return ((data_fn)fwd->write_fn)(p, size, nmemb, fwd->write_data);
}

static void set_callbacks(const struct rx_curl_transfer *t, void *h,
			  void *wfn, void *wdata, void *hfn, void *hdata)
{
	t->setopt(h, RX_CURLOPT_WRITEFUNCTION, (data_fn)wfn);
	t->setopt(h, RX_CURLOPT_WRITEDATA, wdata);
	t->setopt(h, RX_CURLOPT_HEADERFUNCTION, (data_fn)hfn);
	t->setopt(h, RX_CURLOPT_HEADERDATA, hdata);
}

/* Start the hedge at @now if the budget grants it. */
static void launch(struct race *r, void *multi, uint64_t now)
{
	struct rx_curl_transfer *t = r->t;
	struct runner *x = &r->a[1];
	struct rx_ticket ticket;
	bool ok;

	rx__inside = 1;
	ok = rx__retry_withdraw(now, &ticket, t->g, t->key, "curl-hedge");
	rx__inside = 0;
	if (!ok)
		return; /* budget-exceeded: the original goes on alone */
	x->h = t->duphandle(t->h);
	if (x->h) {
		/* The duplicate carries our callbacks: point them at its own
		 * runner, its error text at its own buffer. */
		t->setopt(x->h, RX_CURLOPT_WRITEDATA, x);
		t->setopt(x->h, RX_CURLOPT_HEADERDATA, x);
		if (t->errbuf)
			t->setopt(x->h, RX_CURLOPT_ERRORBUFFER, x->errbuf);
		if (t->cb->timeout_ms > 0) {
			/* What is left of the program's bound, from its start. */
			uint64_t end = t->start_ns +
				       (uint64_t)t->cb->timeout_ms * RX_NS_PER_MS;
			uint64_t left = end > now ? (end - now) / RX_NS_PER_MS : 0;

			t->setopt(x->h, RX_CURLOPT_TIMEOUT_MS,
				  (long)(left > 0 ? left : 1));
		}
		x->start_ns = rx__now_ns();
		x->added = m.add(multi, x->h) == RX_CURLM_OK;
	}
	rx__inside = 1;
	if (!x->added) {
		if (x->h)
			t->cleanup(x->h);
		x->h = NULL;
		rx__retry_refund(&ticket);
	} else {
		rx__log(RX_LOG_DEBUG,
			"key=%s event=hedge at=curl after_ms=%llu", t->key,
			(unsigned long long)((now - r->a[0].start_ns) /
					     RX_NS_PER_MS));
	}
	rx__inside = 0;
}

/* The plain perform, measured (no delay known yet for the key). */
static int plain(struct rx_curl_transfer *t, struct key_est *k)
{
	rx_curl_off_t us = 0;
	long status = 0;
	int rc = t->perform(t->h);

	if (t->getinfo(t->h, RX_CURLINFO_STARTTRANSFER_TIME_T, &us) ==
		RX_CURLE_OK &&
	    t->getinfo(t->h, RX_CURLINFO_RESPONSE_CODE, &status) ==
		RX_CURLE_OK &&
	    us > 0 && rx__curl_final_status(status)) {
		rx__inside = 1;
		add_sample(k, (uint64_t)us * RX_NS_PER_US);
		rx__inside = 0;
	}
	return rc;
}

int rx__curl_hedge_perform(struct rx_curl_transfer *t,
			   const struct rx_curl_cb *fwd)
{
	struct race r;
	struct key_est *k;
	uint64_t delay, now;
	void *multi;
	int mc = RX_CURLM_OK, w, last = 0, i, rc;

	if (t->info) { /* a hedge that won the previous attempt */
		t->cleanup(t->info);
		t->info = NULL;
	}
	rx__inside = 1;
	k = rx__cfg.hedge_delay_ms > 0 ? NULL : slot_of(t->key);
	delay = delay_of(k);
	rx__inside = 0;
	multi = delay > 0 ? get_multi() : NULL;
	if (!multi)
		return plain(t, k);
	memset(&r, 0, sizeof(r));
	r.t = t;
	r.fwd = fwd;
	r.winner = -1;
	r.a[0].r = r.a[1].r = &r;
	r.a[0].h = t->h;
	set_callbacks(t, t->h, (void *)on_write, &r.a[0], (void *)on_header,
		      &r.a[0]);
	r.a[0].start_ns = rx__now_ns();
	if (m.add(multi, t->h) != RX_CURLM_OK) {
		set_callbacks(t, t->h, fwd->write_fn, fwd->write_data,
			      fwd->header_fn, fwd->header_data);
		return plain(t, k);
	}
	r.a[0].added = true;
	for (;;) {
		struct rx_curlmsg *msg;
		int still = 0, left = 0, wait_ms = 1000;

		mc = m.perform(multi, &still);
		while ((msg = m.info_read(multi, &left)) != NULL) {
			if (msg->msg != RX_CURLMSG_DONE)
				continue;
			for (i = 0; i < 2; i++)
				if (r.a[i].added && msg->easy == r.a[i].h &&
				    !r.a[i].done) {
					r.a[i].done = true;
					r.a[i].rc = msg->data.result;
				}
		}
		/* Cancelled or finished: out of the multi handle. */
		for (i = 0; i < 2; i++)
			if (r.a[i].added && (r.a[i].drop || r.a[i].done)) {
				(void)m.remove(multi, r.a[i].h);
				r.a[i].added = false;
				if (!r.a[i].done)
					r.a[i].rc = RX_CURLE_ABORTED_BY_CALLBACK;
				if (!r.a[i].drop)
					last = i;
			}
		if (r.winner >= 0 ? r.a[r.winner].done
				  : !r.a[0].added && !r.a[1].added)
			break;
		if (mc != RX_CURLM_OK)
			break;
		now = rx__now_ns();
		if (r.winner < 0 && r.a[1].h == NULL && r.a[1].start_ns == 0 &&
		    r.a[0].added && r.a[0].first_byte_ns == 0) {
			if (now >= r.a[0].start_ns + delay) {
				r.a[1].start_ns = now; /* one try only */
				launch(&r, multi, now);
			} else {
				uint64_t ms = (r.a[0].start_ns + delay - now +
					       RX_NS_PER_MS - 1) /
					      RX_NS_PER_MS;

				wait_ms = ms < 1000 ? (int)ms : 1000;
			}
		}
		mc = m.wait(multi, NULL, 0, wait_ms, NULL);
		if (mc != RX_CURLM_OK)
			break;
	}
	/* Whatever is still in (a multi error): out, cancelled. */
	for (i = 0; i < 2; i++)
		if (r.a[i].added) {
			(void)m.remove(multi, r.a[i].h);
			r.a[i].added = false;
			if (!r.a[i].done)
				r.a[i].rc = RX_CURLE_RECV_ERROR;
		}
	w = r.winner >= 0 ? r.winner : last;
	rc = r.a[w].rc;
	set_callbacks(t, t->h, fwd->write_fn, fwd->write_data, fwd->header_fn,
		      fwd->header_data);
	rx__inside = 1;
	now = rx__now_ns();
	/* The original's time to first byte, or what it waited for a hedge
	 * that won: a lower bound of it (ADR-471). */
	if (r.a[0].first_byte_ns > 0)
		add_sample(k, r.a[0].first_byte_ns - r.a[0].start_ns);
	else if (r.winner == 1)
		add_sample(k, now - r.a[0].start_ns);
	if (r.a[1].h)
		rx__log(RX_LOG_DEBUG,
			"key=%s event=hedge-done at=curl winner=%s "
			"curlcode=%d",
			t->key, w == 1 ? "hedge" : "original", rc);
	rx__inside = 0;
	if (w == 1) {
		t->info = r.a[1].h;
		t->attempt_start_ns = r.a[1].start_ns;
		if (t->errbuf && rc != RX_CURLE_OK)
			memcpy(t->errbuf, r.a[1].errbuf, sizeof(r.a[1].errbuf));
	} else if (r.a[1].h) {
		t->cleanup(r.a[1].h);
	}
	return rc;
}
