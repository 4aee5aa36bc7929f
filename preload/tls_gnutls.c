/*
 * preload/tls_gnutls.c - the TLS layer's GnuTLS adapter:
 * gnutls_record_send and gnutls_record_recv (the plaintext),
 * gnutls_handshake (watched to tie a session to its socket), gnutls_bye
 * and gnutls_deinit (ADR-440 to ADR-445). Signatures as GnuTLS 3.7's
 * gnutls.h declares them (gnutls_record_send(3), gnutls_record_recv(3)),
 * with the session opaque: the shim builds without GnuTLS's headers.
 * Bound as tls_openssl.c binds libssl (ADR-444): at the first call, with
 * dlsym(RTLD_NEXT) or dlopen("libgnutls.so.30", RTLD_NOLOAD).
 *
 * The socket. gnutls_transport_get_int returns the transport pointer cut
 * to an int, whatever the program set: with its own push/pull functions
 * and a pointer (gnutls_transport_set_ptr), that is garbage, and in 3.7
 * nothing asserts. So the session is tied by watching its handshake
 * (tls.c), and the library's answer is taken only when
 * gnutls_transport_get_ptr2 gives the same small integer both ways - no
 * pointer is below the first 64 KiB, which the kernel never maps
 * (ADR-441).
 *
 * A refused write (ADR-445) returns GNUTLS_E_PUSH_ERROR with errno
 * ECONNREFUSED: what the library returns when its push function fails so
 * (GNUTLS_E_INTERRUPTED for EINTR, which the program retries). No byte
 * was written, and the session is as it was.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "base.h"
#include "fdtable.h"
#include "runtime.h"
#include "symbols.h"
#include "tls.h"

/* From GnuTLS 3.7's gnutls.h. */
#define GNUTLS_E_SUCCESS 0
#define GNUTLS_E_AGAIN (-28)
#define GNUTLS_E_INTERRUPTED (-52)
#define GNUTLS_E_PUSH_ERROR (-53)
#define GNUTLS_E_PULL_ERROR (-54)
#define GNUTLS_E_PREMATURE_TERMINATION (-110)
#define GNUTLS_E_CERTIFICATE_ERROR (-43)
#define GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR (-348)
#define GNUTLS_NAME_DNS 1

struct datum {
	unsigned char *data;
	unsigned int size;
};

typedef ssize_t (*send_fn)(void *, const void *, size_t);
typedef ssize_t (*recv_fn)(void *, void *, size_t);
typedef int (*one_fn)(void *);
typedef int (*bye_fn)(void *, int);
typedef void (*deinit_fn)(void *);
typedef int (*fatal_fn)(int);
typedef void (*ptr2_fn)(void *, void **, void **);
typedef int (*name_fn)(void *, void *, size_t *, unsigned *, unsigned);
typedef int (*alpn_fn)(void *, struct datum *);

static struct {
	send_fn send;
	recv_fn recv;
	one_fn handshake;
	bye_fn bye;
	deinit_fn deinit;
	fatal_fn is_fatal;
	ptr2_fn get_ptr2;
	name_fn server_name_get;
	alpn_fn alpn_selected;
} real;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static atomic_bool bound;

RX_EXPORT ssize_t gnutls_record_send(void *s, const void *data, size_t len);
RX_EXPORT ssize_t gnutls_record_recv(void *s, void *data, size_t len);
RX_EXPORT int gnutls_handshake(void *s);
RX_EXPORT int gnutls_bye(void *s, int how);
RX_EXPORT void gnutls_deinit(void *s);

RX_SELF(gnutls_record_send);
RX_SELF(gnutls_record_recv);
RX_SELF(gnutls_handshake);
RX_SELF(gnutls_bye);
RX_SELF(gnutls_deinit);

static const char *const sonames[] = {"libgnutls.so.30"};

static void *lookup(const char *name, void *ours)
{
	return rx__symbol_real(name, ours, sonames, 1);
}

#define BIND(field, name)                                                      \
	real.field = (__typeof__(real.field))lookup(#name, (void *)self_##name)

static void bind_all(void)
{
	int saved = errno;

	BIND(send, gnutls_record_send);
	BIND(recv, gnutls_record_recv);
	BIND(handshake, gnutls_handshake);
	BIND(bye, gnutls_bye);
	BIND(deinit, gnutls_deinit);
	real.is_fatal = (fatal_fn)lookup("gnutls_error_is_fatal", NULL);
	real.get_ptr2 = (ptr2_fn)lookup("gnutls_transport_get_ptr2", NULL);
	real.server_name_get =
	    (name_fn)lookup("gnutls_server_name_get", NULL);
	real.alpn_selected =
	    (alpn_fn)lookup("gnutls_alpn_get_selected_protocol", NULL);
	atomic_store_explicit(&bound, true, memory_order_release);
	errno = saved;
}

static inline void bind_real(void)
{
	if (!atomic_load_explicit(&bound, memory_order_acquire))
		(void)pthread_once(&bind_once, bind_all);
}

/* ---- what the common half asks of a session -------------------------- */

static int gtls_fd(void *s)
{
	void *r = NULL, *w = NULL;

	if (!real.get_ptr2)
		return -1;
	real.get_ptr2(s, &r, &w);
	if (r != w || (uintptr_t)r >= RX_FD_CAP)
		return -1; /* a pointer, or two sockets: not one fd */
	return (int)(uintptr_t)r;
}

static bool gtls_h2(void *s)
{
	struct datum d = {NULL, 0};

	return real.alpn_selected && real.alpn_selected(s, &d) == 0 &&
	       d.data && d.size == 2 && d.data[0] == 'h' && d.data[1] == '2';
}

static size_t gtls_sni(void *s, char *buf, size_t size)
{
	size_t len = size;
	unsigned type = 0;

	if (!real.server_name_get ||
	    real.server_name_get(s, buf, &len, &type, 0) != 0 ||
	    type != GNUTLS_NAME_DNS || len == 0 || len >= size)
		return 0;
	buf[len] = '\0';
	return strnlen(buf, size);
}

static const struct rx_tls_lib lib = {gtls_fd, gtls_h2, gtls_sni};

/*
 * What a negative result @rc says, for rx__tls_end: *@n 0 for the peer's
 * end of the stream, else -1 and the errno returned (EAGAIN: it would
 * block; EINTR: nothing yet; EPROTO: a TLS failure). errno kept.
 */
static int outcome(int rc, ssize_t *n, bool handshake)
{
	int saved = errno;

	*n = -1;
	switch (rc) {
	case GNUTLS_E_AGAIN:
		return EAGAIN;
	case GNUTLS_E_INTERRUPTED:
		return EINTR;
	case GNUTLS_E_PREMATURE_TERMINATION:
		*n = 0;
		return 0;
	case GNUTLS_E_PUSH_ERROR:
	case GNUTLS_E_PULL_ERROR:
		return saved != 0 && saved != EAGAIN ? saved : EPIPE;
	case GNUTLS_E_CERTIFICATE_ERROR:
	case GNUTLS_E_CERTIFICATE_VERIFICATION_ERROR:
		return handshake ? RX_TLS_ANSWERED : EPROTO;
	default:
		/* A warning alert, a rehandshake request: not fatal. */
		return real.is_fatal && real.is_fatal(rc) ? EPROTO : EINTR;
	}
}

static void report(struct rx_tls_call *c, ssize_t rc)
{
	ssize_t n = rc;
	int err = 0;

	if (rc < 0)
		err = outcome((int)rc, &n, false);
	rx__tls_end(c, n, err);
}

/* ---- the plaintext ------------------------------------------------------ */

RX_EXPORT ssize_t gnutls_record_send(void *s, const void *data, size_t len)
{
	struct rx_tls_call c;
	ssize_t rc;

	bind_real();
	if (!real.send) {
		errno = ENOSYS;
		return GNUTLS_E_PUSH_ERROR;
	}
	if (len == 0)
		return real.send(s, data, len);
	switch (rx__tls_begin(&c, s, &lib, RX_TLS_WRITE, data, len)) {
	case RX_TLS_PASS:
		return real.send(s, data, len);
	case RX_TLS_REFUSE:
		errno = c.refusal;
		return errno == EINTR ? GNUTLS_E_INTERRUPTED
				      : GNUTLS_E_PUSH_ERROR;
	default:
		break;
	}
	rc = real.send(s, data, len);
	report(&c, rc);
	return rc;
}

RX_EXPORT ssize_t gnutls_record_recv(void *s, void *data, size_t len)
{
	struct rx_tls_call c;
	ssize_t rc;

	bind_real();
	if (!real.recv) {
		errno = ENOSYS;
		return GNUTLS_E_PULL_ERROR;
	}
	if (len == 0 || rx__tls_begin(&c, s, &lib, RX_TLS_READ, data, len) ==
			    RX_TLS_PASS)
		return real.recv(s, data, len);
	rc = real.recv(s, data, len);
	report(&c, rc);
	return rc;
}

/* ---- the handshake, the end of a session ------------------------------ */

RX_EXPORT int gnutls_handshake(void *s)
{
	struct rx_tls_call c;
	ssize_t n = 1;
	int rc, err = 0;

	bind_real();
	if (!real.handshake) {
		errno = ENOSYS;
		return GNUTLS_E_PUSH_ERROR;
	}
	if (rx__tls_handshake(&c, s, &lib) == RX_TLS_PASS)
		return real.handshake(s);
	rc = real.handshake(s);
	if (rc != GNUTLS_E_SUCCESS)
		err = outcome(rc, &n, true);
	rx__tls_end(&c, rc == GNUTLS_E_SUCCESS ? 1 : n, err);
	return rc;
}

/* gnutls_bye sends close_notify: the program ends the session, and its
 * socket I/O says nothing of a call. */
RX_EXPORT int gnutls_bye(void *s, int how)
{
	int inside, rc;

	bind_real();
	if (!real.bye) {
		errno = ENOSYS;
		return GNUTLS_E_PUSH_ERROR;
	}
	if (!rx__reentered())
		rx__tls_bye(s); /* ADR-643 */
	inside = rx__inside;
	rx__inside = 1;
	rc = real.bye(s, how);
	rx__inside = inside;
	return rc;
}

RX_EXPORT void gnutls_deinit(void *s)
{
	bind_real();
	rx__tls_forget(s);
	if (real.deinit)
		real.deinit(s);
}
