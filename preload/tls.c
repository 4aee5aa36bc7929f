/*
 * preload/tls.c - the TLS layer's common half: which socket a TLS session
 * runs on, and its plaintext fed to the call state machine for that
 * socket's record (docs/design.md section 3, "TLS"; ADR-440 to ADR-445).
 *
 * Attribution (ADR-440). A call is attributed once, by the layer that
 * knows most: the curl layer inside curl_easy_perform (this layer then
 * stands aside, as the socket layer does), else the TLS layer for a
 * session tied to a tracked socket, else the socket layer. The socket
 * layer still admits and judges the connect, and judges what the
 * ciphertext says about the connection - an error, a reset or EOF during
 * the handshake, a deadline - but its bytes are neither a request nor an
 * answer once the record's layer is TLS (call.h, rx__tls_cipher). The
 * plaintext goes through the same entry points of call.c as socket bytes
 * do, so HTTP/1.x statuses, kept-alive requests, latency from the
 * request's first write to the answer's first byte (a record libssl
 * buffered counts when the program reads it), refusals and verdicts are
 * the socket layer's rules, unchanged.
 *
 * The tie (ADR-441). A session's socket is learnt by watching: while a
 * handshake call (or the first call of a session not tied yet) runs,
 * rx__tls_mode is RX_TLS_WATCH and the socket layer notes the tracked fd
 * the ciphertext goes through - whatever BIO or push function carries it
 * (libcurl's OpenSSL BIO is not a socket BIO: SSL_get_fd says -1). When
 * nothing was seen, the library's own answer (SSL_get_fd,
 * gnutls_transport_get_ptr2 when it holds a small integer) is tried; a
 * session on no tracked socket is marked to pass through for good. Ties
 * live in a fixed open-addressing table keyed by the session pointer,
 * mapped at the first tie and never freed: lock-free lookups (one hash,
 * one load in the common case), inserts by compare-and-swap, removal at
 * SSL_free/SSL_clear/gnutls_deinit leaving a tombstone that a later
 * insert reuses. A full table leaves new sessions to the socket layer.
 *
 * HTTP/2 (ADR-443): a session whose ALPN selected h2 is not framed here;
 * its record's call from the connect settles as a success once the
 * handshake is done, and the connection is not tracked further - the
 * socket layer's connect-only judgement.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "admit.h"
#include "call.h"
#include "fdtable.h"
#include "protocols.h"
#include "runtime.h"
#include "sockkey.h"
#include "tls.h"

/* ------------------------------------------------------------------------
 * The tie table (ADR-441).
 * ---------------------------------------------------------------------- */

#define SLOTS 4096	  /* power of two: sessions tied at once */
#define KEY_TOMB 1	  /* a removed entry: reusable, probed past */
#define FD_NONE (-1)	  /* not tied (yet) */
#define FD_PASS (-2)	  /* tied to nothing: the TLS layer stands aside */
#define FD_REFUSE (-3)	  /* its SNI name's key refused it (ADR-446) */

struct slot {
	_Atomic uintptr_t key; /* session pointer, 0 (never used), KEY_TOMB */
	_Atomic int32_t fd;    /* FD_NONE while being written */
	int32_t pad;
};

static struct slot *slots;
static atomic_int table_state; /* 0 unmapped, 1 mapping, 2 ready, 3 failed */

static unsigned slot_of(uintptr_t key)
{
	return (unsigned)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >>
			  52) &
	       (SLOTS - 1);
}

/* The table, mapped the first time a session is tied; NULL when it
 * cannot be (then nothing is tied: the socket layer's rules hold). */
static struct slot *table(void)
{
	int st = atomic_load_explicit(&table_state, memory_order_acquire);
	int zero = 0;
	void *p;

	if (st == 2)
		return slots;
	if (st != 0 || !atomic_compare_exchange_strong(&table_state, &zero, 1))
		return NULL; /* failed, or another thread maps it now */
	p = mmap(NULL, SLOTS * sizeof(struct slot), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		atomic_store_explicit(&table_state, 3, memory_order_release);
		return NULL;
	}
	slots = p;
	atomic_store_explicit(&table_state, 2, memory_order_release);
	return slots;
}

/* The fd tied to @s, FD_PASS, or FD_NONE. Lock-free, O(1) expected. */
static int lookup(void *s)
{
	uintptr_t key = (uintptr_t)s, k;
	unsigned i, n;

	if (atomic_load_explicit(&table_state, memory_order_acquire) != 2)
		return FD_NONE;
	i = slot_of(key);
	for (n = 0; n < SLOTS; n++, i = (i + 1) & (SLOTS - 1)) {
		k = atomic_load_explicit(&slots[i].key, memory_order_acquire);
		if (k == key)
			return atomic_load_explicit(&slots[i].fd,
						    memory_order_acquire);
		if (k == 0)
			break;
	}
	return FD_NONE;
}

/* Tie @s to @fd (or FD_PASS). false: the table is full or unmapped. A
 * session is used by one thread at a time (GnuTLS allows a sender and a
 * receiver: both probe the same sequence, and the compare-and-swap makes
 * one of them find the other's entry). */
static bool tie(void *s, int fd)
{
	struct slot *t = table();
	uintptr_t key = (uintptr_t)s, k;
	unsigned i, n;

	if (!t)
		return false;
	i = slot_of(key);
	for (n = 0; n < SLOTS; n++, i = (i + 1) & (SLOTS - 1)) {
		k = atomic_load_explicit(&t[i].key, memory_order_acquire);
		if (k == key) {
			atomic_store_explicit(&t[i].fd, fd,
					      memory_order_release);
			return true;
		}
		if (k != 0 && k != KEY_TOMB)
			continue;
		if (!atomic_compare_exchange_strong(&t[i].key, &k, key)) {
			if (k == key) { /* the other thread of the session */
				atomic_store_explicit(&t[i].fd, fd,
						      memory_order_release);
				return true;
			}
			continue;
		}
		atomic_store_explicit(&t[i].fd, fd, memory_order_release);
		return true;
	}
	return false;
}

void rx__tls_forget(void *s)
{
	uintptr_t key = (uintptr_t)s, k;
	unsigned i, n;

	if (!s ||
	    atomic_load_explicit(&table_state, memory_order_acquire) != 2)
		return;
	i = slot_of(key);
	for (n = 0; n < SLOTS; n++, i = (i + 1) & (SLOTS - 1)) {
		k = atomic_load_explicit(&slots[i].key, memory_order_acquire);
		if (k == 0)
			return;
		if (k == key) {
			/* fd first: a reader that still sees the key reads
			 * "not tied" and learns again. */
			atomic_store_explicit(&slots[i].fd, FD_NONE,
					      memory_order_release);
			atomic_store_explicit(&slots[i].key, KEY_TOMB,
					      memory_order_release);
		}
	}
}

/* ------------------------------------------------------------------------
 * Feeding the call state machine.
 * ---------------------------------------------------------------------- */

bool rx__tls_aside(void)
{
	return rx__curl_active || rx__tls_mode != RX_TLS_NONE ||
	       rx__reentered() || !rx__ready();
}


/* The record of @fd when it is one the shim tracks, else NULL. */
static struct rx_fd *tracked(int fd)
{
	struct rx_fd *e = fd >= 0 ? rx__fd_get(fd) : NULL;

	return e && rx__fd_phase(e) != RX_FD_UNTRACKED ? e : NULL;
}

/* The begin step of a plaintext operation on @fd (rx__tls_mode PLAIN
 * around it, so the state machine reads the bytes as the protocol's). */
static enum rx_op_decision plain_begin(struct rx_tls_call *c, int fd,
				       size_t len)
{
	struct iovec v = {.iov_base = (void *)c->buf, .iov_len = len};
	enum rx_op_decision d;

	rx__tls_mode = RX_TLS_PLAIN;
	if (c->dir == RX_TLS_WRITE)
		d = rx__write_begin(&c->op, fd, 0, len, &v, 1);
	else
		d = rx__read_begin(&c->op, fd,
				   c->dir == RX_TLS_PEEK ? MSG_PEEK : 0, len);
	rx__tls_mode = RX_TLS_NONE;
	return d;
}

/* The end step: @n bytes, 0 (EOF) or -1 with errno @err. */
static void plain_end(struct rx_tls_call *c, ssize_t n, int err)
{
	struct iovec v = {.iov_base = (void *)c->buf,
			  .iov_len = n > 0 ? (size_t)n : 0};

	rx__tls_mode = RX_TLS_PLAIN;
	if (c->dir == RX_TLS_WRITE) {
		if (n == 0) { /* the peer closed: a write fails so */
			n = -1;
			err = EPIPE;
		}
		errno = err;
		rx__write_end(&c->op, n);
	} else {
		errno = err;
		rx__read_end(&c->op, n, &v, 1);
	}
	rx__tls_mode = RX_TLS_NONE;
}

/*
 * End the current call of @fd's record as the TLS layer saw it, without a
 * plaintext operation of the program: @err 0 settles it as bytes the shim
 * cannot read (a success at this moment, and no more tracking: h2 or a
 * session the table has no room for, ADR-443), an errno fails it.
 */
static void end_record(int fd, int err)
{
	struct rx_tls_call c;

	memset(&c, 0, sizeof(c));
	c.dir = RX_TLS_READ;
	if (plain_begin(&c, fd, 1) != RX_OP_TRACK)
		return;
	rx__tls_mode = RX_TLS_PLAIN;
	if (err == 0) {
		rx__read_end(&c.op, 1, NULL, 0);
	} else {
		errno = err;
		rx__read_end(&c.op, -1, NULL, 0);
	}
	rx__tls_mode = RX_TLS_NONE;
}

/*
 * A handshake on record @e's session completed: the server has answered
 * the connect's call as far as the connection goes, and the program waits
 * for nothing until it reads. The handshake's last reads (TLS 1.2's, for
 * the server's Finished) said it waited; a connection then left unused
 * past the slow-call threshold was judged a timeout at its close
 * (ADR-642).
 */
static void shaken(struct rx_fd *e)
{
	if (atomic_load_explicit(&e->awaiting, memory_order_relaxed))
		atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
}

static enum rx_tls_step watch(struct rx_tls_call *c)
{
	rx__tls_seen_fd = -1;
	rx__tls_mode = RX_TLS_WATCH;
	c->step = RX_TLS_WATCH_IO;
	return RX_TLS_WATCH_IO;
}

enum rx_tls_step rx__tls_begin(struct rx_tls_call *c, void *s,
			       const struct rx_tls_lib *lib,
			       enum rx_tls_dir dir, const void *buf,
			       size_t len)
{
	enum rx_op_decision d;
	struct rx_fd *e;
	int fd;

	c->step = RX_TLS_PASS;
	if (s == NULL || rx__tls_aside())
		return RX_TLS_PASS;
	c->session = s;
	c->lib = lib;
	c->buf = buf;
	c->dir = (uint8_t)dir;
	c->handshake = false;
	fd = lookup(s);
	if (fd == FD_PASS)
		return RX_TLS_PASS;
	if (fd == FD_REFUSE) {
		if (dir != RX_TLS_WRITE)
			return RX_TLS_PASS;
		c->refusal = ECONNREFUSED;
		c->step = RX_TLS_REFUSE;
		return RX_TLS_REFUSE;
	}
	if (fd < 0) {
		/* Not tied yet: the library may say, else watch. */
		fd = lib->fd_of(s);
		if (!tracked(fd))
			return watch(c);
		if (!tie(s, fd))
			return RX_TLS_PASS;
	}
	e = rx__fd_get(fd);
	if (!e)
		return RX_TLS_PASS;
	rx__proto_set_layer(&e->proto, RX_PROTO_LAYER_TLS);
	c->fd = fd;
	d = plain_begin(c, fd, len);
	if (d == RX_OP_REFUSE) {
		c->refusal = rx__refusal_errno();
		c->step = RX_TLS_REFUSE;
	}
	else if (d == RX_OP_TRACK)
		c->step = RX_TLS_TRACK;
	return (enum rx_tls_step)c->step;
}

enum rx_tls_step rx__tls_handshake(struct rx_tls_call *c, void *s,
				   const struct rx_tls_lib *lib)
{
	int fd;

	c->step = RX_TLS_PASS;
	if (s == NULL || rx__tls_aside())
		return RX_TLS_PASS;
	fd = lookup(s);
	if (fd >= 0) {
		/* Tied: its socket layer knows; the reads wait (ADR-642). */
		c->fd = fd;
		c->step = RX_TLS_SHAKE_IO;
		rx__tls_mode = RX_TLS_SHAKE;
		return RX_TLS_SHAKE_IO;
	}
	if (fd != FD_NONE)
		return RX_TLS_PASS;
	c->session = s;
	c->lib = lib;
	c->buf = NULL;
	c->dir = RX_TLS_READ;
	c->handshake = true;
	return watch(c);
}

/*
 * RESILIX_KEY=host: the session's SNI name, with the port it connected
 * to, keys the connection's request from now on (ADR-446). false: that
 * key refused it.
 */
static bool sni_key(struct rx_tls_call *c, int fd, struct rx_fd *e)
{
	char key[RX_KEY_MAX + 1];
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	unsigned port;
	size_t n;

	if (!rx__cfg.key_host)
		return true;
	n = c->lib->sni(c->session, key, sizeof(key) - 7);
	if (n == 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return true;
	if (ss.ss_family == AF_INET)
		port = ntohs(((struct sockaddr_in *)(void *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		port = ntohs(((struct sockaddr_in6 *)(void *)&ss)->sin6_port);
	else
		return true;
	n += rx__sockkey_port(key + n, port);
	key[n] = '\0';
	return rx__call_rekey(fd, e, key, n);
}

/*
 * A watched call returned: tie the session to the socket its ciphertext
 * went through (or mark it to pass), stand aside for h2, judge a failed
 * handshake, and hand a first data call's plaintext to the record.
 */
static void watched(struct rx_tls_call *c, ssize_t n, int err)
{
	int fd = rx__tls_seen_fd;
	struct rx_fd *e;

	rx__tls_mode = RX_TLS_NONE;
	if (fd < 0)
		fd = c->lib->fd_of(c->session);
	e = tracked(fd);
	if (!e) {
		/* On no socket the shim tracks: leave it alone for good. */
		(void)tie(c->session, FD_PASS);
		return;
	}
	rx__proto_set_layer(&e->proto, RX_PROTO_LAYER_TLS);
	if (!tie(c->session, fd)) {
		end_record(fd, 0); /* no room: the socket layer's view */
		return;
	}
	if (c->lib->h2(c->session)) {
		(void)tie(c->session, FD_PASS);
		end_record(fd, 0);
		return;
	}
	if (!sni_key(c, fd, e)) {
		(void)tie(c->session, FD_REFUSE);
		return;
	}
	if (c->handshake) {
		/* The socket layer judged the socket's errors; a TLS-level
		 * failure it could not see is transient (ADR-442). */
		if (n <= 0 && err == EPROTO)
			end_record(fd, EPROTO);
		else if (n > 0)
			shaken(e);
		return;
	}
	/* A first data call: its plaintext, as if tied before. A write is
	 * never admitted after the fact: only one that continues the
	 * connect's call is fed. */
	c->fd = fd;
	if (c->dir == RX_TLS_WRITE && rx__fd_phase(e) == RX_FD_IDLE)
		return;
	if (plain_begin(c, fd, n > 0 ? (size_t)n : 1) == RX_OP_TRACK)
		plain_end(c, n, err);
}

void rx__tls_bye(void *s)
{
	int fd = s ? lookup(s) : FD_NONE;

	if (fd >= 0 && tracked(fd))
		rx__fd_end_unsent(fd);
}

void rx__tls_end(struct rx_tls_call *c, ssize_t n, int err)
{
	int saved = errno;
	struct rx_fd *e;

	if (c->step == RX_TLS_TRACK) {
		plain_end(c, n, err == RX_TLS_ANSWERED ? EPROTO : err);
	} else if (c->step == RX_TLS_WATCH_IO) {
		watched(c, n, err);
	} else if (c->step == RX_TLS_SHAKE_IO) {
		rx__tls_mode = RX_TLS_NONE;
		if (n > 0 && (e = tracked(c->fd)) != NULL)
			shaken(e);
	}
	errno = saved;
}
