/*
 * preload/tls_openssl.c - the TLS layer's OpenSSL adapter: SSL_write,
 * SSL_write_ex, SSL_read, SSL_read_ex, SSL_peek, SSL_peek_ex (the
 * plaintext; one of no bytes during the handshake runs the handshake, and
 * is watched as one, ADR-673; one of a negative length is refused by
 * libssl before any handshake, and passes), SSL_connect and
 * SSL_do_handshake (watched to tie a session to its socket),
 * SSL_shutdown, SSL_clear, SSL_free, and SSL_get_error
 * (ADR-440 to ADR-445). Signatures as OpenSSL 3's ssl.h declares them
 * (SSL_read(3), SSL_write(3), SSL_get_error(3)), with the SSL pointer
 * opaque: the shim builds without OpenSSL's headers.
 *
 * Binding (ADR-444). libssl is never linked. The real functions are
 * resolved the first time the program calls one of ours - which it can
 * only do once libssl is loaded - with dlsym(RTLD_NEXT), and through
 * dlopen(soname, RTLD_NOLOAD) when libssl was loaded into a local scope
 * (python's _ssl module is dlopen'ed: RTLD_NEXT does not see its
 * libssl). A process that never calls OpenSSL resolves, maps and costs
 * nothing here. No allocator reaches these functions, so the one-time
 * dlsym is safe here.
 *
 * A refused write (ADR-445). A new request on a kept-alive connection
 * that its key refuses writes no byte: SSL_write returns -1 (SSL_write_ex
 * 0) with errno ECONNREFUSED, and SSL_get_error for that session says
 * SSL_ERROR_SYSCALL until the next call on it - the real one would read
 * the session's last state (a WANT_READ left by an earlier read, say)
 * rather than our return. So python raises ConnectionRefusedError and
 * curl reports a send error, as for a refused socket write.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "base.h"
#include "runtime.h"
#include "symbols.h"
#include "tls.h"

/* From OpenSSL 3's ssl.h and tls1.h. */
#define SSL_ERROR_SSL 1
#define SSL_ERROR_WANT_READ 2
#define SSL_ERROR_WANT_WRITE 3
#define SSL_ERROR_SYSCALL 5
#define SSL_ERROR_ZERO_RETURN 6
#define TLSEXT_NAMETYPE_host_name 0
#define X509_V_OK 0

typedef int (*io_fn)(void *, void *, int);
typedef int (*io_ex_fn)(void *, void *, size_t, size_t *);
typedef int (*wr_fn)(void *, const void *, int);
typedef int (*wr_ex_fn)(void *, const void *, size_t, size_t *);
typedef int (*one_fn)(void *);
typedef void (*free_fn)(void *);
typedef int (*err_fn)(const void *, int);
typedef int (*fd_fn)(const void *);
typedef const char *(*name_fn)(const void *, int);
typedef void (*alpn_fn)(const void *, const unsigned char **, unsigned *);
typedef long (*verify_fn)(const void *);

static struct {
	wr_fn write;
	wr_ex_fn write_ex;
	io_fn read, peek;
	io_ex_fn read_ex, peek_ex;
	one_fn connect, do_handshake, shutdown, clear;
	free_fn free;
	err_fn get_error;
	fd_fn get_fd;
	name_fn get_servername;
	alpn_fn get0_alpn_selected;
	verify_fn get_verify_result;
	fd_fn in_init;
} real;

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static atomic_bool bound;

/* The session whose last write this thread refused, until its next call. */
static RX_TLS void *refused;

RX_EXPORT int SSL_write(void *s, const void *buf, int num);
RX_EXPORT int SSL_write_ex(void *s, const void *buf, size_t num,
			   size_t *written);
RX_EXPORT int SSL_read(void *s, void *buf, int num);
RX_EXPORT int SSL_read_ex(void *s, void *buf, size_t num, size_t *got);
RX_EXPORT int SSL_peek(void *s, void *buf, int num);
RX_EXPORT int SSL_peek_ex(void *s, void *buf, size_t num, size_t *got);
RX_EXPORT int SSL_connect(void *s);
RX_EXPORT int SSL_do_handshake(void *s);
RX_EXPORT int SSL_shutdown(void *s);
RX_EXPORT int SSL_clear(void *s);
RX_EXPORT void SSL_free(void *s);
RX_EXPORT int SSL_get_error(const void *s, int ret);

/* Our definitions, to recognise them if a lookup finds them (symbols.h). */
RX_SELF(SSL_write);
RX_SELF(SSL_write_ex);
RX_SELF(SSL_read);
RX_SELF(SSL_read_ex);
RX_SELF(SSL_peek);
RX_SELF(SSL_peek_ex);
RX_SELF(SSL_connect);
RX_SELF(SSL_do_handshake);
RX_SELF(SSL_shutdown);
RX_SELF(SSL_clear);
RX_SELF(SSL_free);
RX_SELF(SSL_get_error);

static const char *const sonames[] = {"libssl.so.3", "libssl.so.1.1"};

/* The real @name, never ours (@ours: our definition). */
static void *lookup(const char *name, void *ours)
{
	return rx__symbol_real(name, ours, sonames,
			       sizeof(sonames) / sizeof(sonames[0]));
}

#define BIND(field, name)                                                      \
	real.field = (__typeof__(real.field))lookup(#name, (void *)self_##name)

static void bind_all(void)
{
	int saved = errno;

	BIND(write, SSL_write);
	BIND(write_ex, SSL_write_ex);
	BIND(read, SSL_read);
	BIND(read_ex, SSL_read_ex);
	BIND(peek, SSL_peek);
	BIND(peek_ex, SSL_peek_ex);
	BIND(connect, SSL_connect);
	BIND(do_handshake, SSL_do_handshake);
	BIND(shutdown, SSL_shutdown);
	BIND(clear, SSL_clear);
	BIND(free, SSL_free);
	BIND(get_error, SSL_get_error);
	real.get_fd = (fd_fn)lookup("SSL_get_fd", NULL);
	real.get_servername = (name_fn)lookup("SSL_get_servername", NULL);
	real.get0_alpn_selected =
	    (alpn_fn)lookup("SSL_get0_alpn_selected", NULL);
	real.get_verify_result =
	    (verify_fn)lookup("SSL_get_verify_result", NULL);
	real.in_init = (fd_fn)lookup("SSL_in_init", NULL);
	atomic_store_explicit(&bound, true, memory_order_release);
	errno = saved;
}

/* Resolve once; later calls pay a load and a branch. */
static inline void bind_real(void)
{
	if (!atomic_load_explicit(&bound, memory_order_acquire))
		(void)pthread_once(&bind_once, bind_all);
}

/* ---- what the common half asks of a session -------------------------- */

static int ossl_fd(void *s)
{
	return real.get_fd ? real.get_fd(s) : -1;
}

static bool ossl_h2(void *s)
{
	const unsigned char *p = NULL;
	unsigned len = 0;

	if (!real.get0_alpn_selected)
		return false;
	real.get0_alpn_selected(s, &p, &len);
	return p && len == 2 && p[0] == 'h' && p[1] == '2';
}

static size_t ossl_sni(void *s, char *buf, size_t size)
{
	const char *n = real.get_servername
			    ? real.get_servername(s, TLSEXT_NAMETYPE_host_name)
			    : NULL;
	size_t len = n ? strnlen(n, size) : 0;

	if (len == 0 || len >= size)
		return 0;
	memcpy(buf, n, len + 1);
	return len;
}

static const struct rx_tls_lib lib = {ossl_fd, ossl_h2, ossl_sni};

/*
 * What a failed call (@ret <= 0) says, for rx__tls_end: *@n 0 for the
 * peer's end of the stream, else -1 and the errno returned (EAGAIN: it
 * would block; EINTR: nothing yet; EPROTO: a TLS failure). errno kept.
 */
static int outcome(void *s, int ret, ssize_t *n, bool handshake)
{
	int saved = errno, err;

	*n = -1;
	switch (real.get_error ? real.get_error(s, ret) : SSL_ERROR_SSL) {
	case SSL_ERROR_WANT_READ:
	case SSL_ERROR_WANT_WRITE:
		err = EAGAIN;
		break;
	case SSL_ERROR_ZERO_RETURN:
		*n = 0;
		err = 0;
		break;
	case SSL_ERROR_SYSCALL:
		/* ret 0, or no errno: the peer went away without a word. */
		err = ret == 0 || saved == 0 ? 0 : saved;
		if (err == 0)
			*n = 0;
		break;
	case SSL_ERROR_SSL:
		/* An unverified peer answered; the program refused it
		 * (the curl layer's rule, ADR-153). */
		err = handshake && real.get_verify_result &&
			      real.get_verify_result(s) != X509_V_OK
			  ? RX_TLS_ANSWERED
			  : EPROTO;
		break;
	default:
		err = EINTR; /* a callback's wait: nothing happened yet */
		break;
	}
	errno = saved;
	return err;
}

/* A refused write: -1, the refusal's errno, SSL_ERROR_SYSCALL. */
static int refuse(void *s, const struct rx_tls_call *c)
{
	refused = s;
	errno = c->refusal;
	return -1;
}

/* ---- a zero-length call ------------------------------------------------ */

/*
 * A data call of no bytes moves no plaintext, but on a session still in
 * its handshake it runs the handshake: `openssl s_client` drives it with
 * SSL_write(s, buf, 0) until it is done. Such a call is watched as a
 * handshake (ADR-673), so that the session is tied and its ciphertext is
 * not read as the answer of the connect's call; any other zero-length
 * call runs as the real one, unseen. true: call the real function, then
 * zero_end.
 */
static bool zero_begin(struct rx_tls_call *c, void *s)
{
	return real.in_init && real.in_init(s) &&
	       rx__tls_handshake(c, s, &lib) != RX_TLS_PASS;
}

/* The zero-length call returned @ret: the handshake completed or not. */
static void zero_end(struct rx_tls_call *c, void *s, int ret)
{
	ssize_t n = 1;
	int err = 0;

	if (real.in_init(s))
		err = outcome(s, ret, &n, true);
	rx__tls_end(c, n, err);
}

/* Return what @call, a data call of no bytes on @s, returns, watched as
 * above when it runs the handshake. */
#define ZERO_CALL(c, s, call)                                                  \
	do {                                                                   \
		int zret_;                                                     \
		if (!zero_begin(c, s))                                         \
			return (call);                                         \
		zret_ = (call);                                                \
		zero_end(c, s, zret_);                                         \
		return zret_;                                                  \
	} while (0)

/* ---- the plaintext ------------------------------------------------------ */

/* Report a call's result @ret (@got bytes when it succeeded). */
static void report(struct rx_tls_call *c, void *s, int ret, size_t got)
{
	ssize_t n = (ssize_t)got;
	int err = 0;

	if (ret <= 0)
		err = outcome(s, ret, &n, false);
	rx__tls_end(c, n, err);
}

RX_EXPORT int SSL_write(void *s, const void *buf, int num)
{
	struct rx_tls_call c;
	int ret;

	bind_real();
	refused = NULL;
	if (!real.write) {
		errno = ENOSYS;
		return -1;
	}
	if (num < 0) /* refused before any handshake: no bytes, no evidence */
		return real.write(s, buf, num);
	if (num == 0)
		ZERO_CALL(&c, s, real.write(s, buf, num));
	switch (rx__tls_begin(&c, s, &lib, RX_TLS_WRITE, buf, (size_t)num)) {
	case RX_TLS_PASS:
		return real.write(s, buf, num);
	case RX_TLS_REFUSE:
		return refuse(s, &c);
	default:
		break;
	}
	ret = real.write(s, buf, num);
	report(&c, s, ret, ret > 0 ? (size_t)ret : 0);
	return ret;
}

RX_EXPORT int SSL_write_ex(void *s, const void *buf, size_t num,
			   size_t *written)
{
	struct rx_tls_call c;
	size_t n = 0;
	int ret;

	bind_real();
	refused = NULL;
	if (!real.write_ex) {
		errno = ENOSYS;
		return 0;
	}
	if (num == 0)
		ZERO_CALL(&c, s, real.write_ex(s, buf, num, written));
	switch (rx__tls_begin(&c, s, &lib, RX_TLS_WRITE, buf, num)) {
	case RX_TLS_PASS:
		return real.write_ex(s, buf, num, written);
	case RX_TLS_REFUSE:
		if (written)
			*written = 0;
		(void)refuse(s, &c);
		return 0;
	default:
		break;
	}
	ret = real.write_ex(s, buf, num, written ? written : &n);
	report(&c, s, ret, ret > 0 ? (written ? *written : n) : 0);
	return ret;
}

/* SSL_read and SSL_peek: @fn with @dir. */
static int read_int(io_fn fn, enum rx_tls_dir dir, void *s, void *buf,
		    int num)
{
	struct rx_tls_call c;
	int ret;

	refused = NULL;
	if (!fn) {
		errno = ENOSYS;
		return -1;
	}
	if (num < 0) /* refused before any handshake (SSL_R_BAD_LENGTH) */
		return fn(s, buf, num);
	if (num == 0)
		ZERO_CALL(&c, s, fn(s, buf, num));
	if (rx__tls_begin(&c, s, &lib, dir, buf, (size_t)num) == RX_TLS_PASS)
		return fn(s, buf, num);
	ret = fn(s, buf, num);
	report(&c, s, ret, ret > 0 ? (size_t)ret : 0);
	return ret;
}

/* SSL_read_ex and SSL_peek_ex. */
static int read_ex(io_ex_fn fn, enum rx_tls_dir dir, void *s, void *buf,
		   size_t num, size_t *got)
{
	struct rx_tls_call c;
	size_t n = 0;
	int ret;

	refused = NULL;
	if (!fn) {
		errno = ENOSYS;
		return 0;
	}
	if (num == 0)
		ZERO_CALL(&c, s, fn(s, buf, num, got));
	if (rx__tls_begin(&c, s, &lib, dir, buf, num) == RX_TLS_PASS)
		return fn(s, buf, num, got);
	ret = fn(s, buf, num, got ? got : &n);
	report(&c, s, ret, ret > 0 ? (got ? *got : n) : 0);
	return ret;
}

RX_EXPORT int SSL_read(void *s, void *buf, int num)
{
	bind_real();
	return read_int(real.read, RX_TLS_READ, s, buf, num);
}

RX_EXPORT int SSL_peek(void *s, void *buf, int num)
{
	bind_real();
	return read_int(real.peek, RX_TLS_PEEK, s, buf, num);
}

RX_EXPORT int SSL_read_ex(void *s, void *buf, size_t num, size_t *got)
{
	bind_real();
	return read_ex(real.read_ex, RX_TLS_READ, s, buf, num, got);
}

RX_EXPORT int SSL_peek_ex(void *s, void *buf, size_t num, size_t *got)
{
	bind_real();
	return read_ex(real.peek_ex, RX_TLS_PEEK, s, buf, num, got);
}

/* ---- the handshake, the end of a session ------------------------------ */

static int handshake(one_fn fn, void *s)
{
	struct rx_tls_call c;
	ssize_t n = 1;
	int ret, err = 0;

	refused = NULL;
	if (!fn) {
		errno = ENOSYS;
		return -1;
	}
	if (rx__tls_handshake(&c, s, &lib) == RX_TLS_PASS)
		return fn(s);
	ret = fn(s);
	if (ret != 1)
		err = outcome(s, ret, &n, true);
	rx__tls_end(&c, ret == 1 ? 1 : n, err);
	return ret;
}

RX_EXPORT int SSL_connect(void *s)
{
	bind_real();
	return handshake(real.connect, s);
}

RX_EXPORT int SSL_do_handshake(void *s)
{
	bind_real();
	return handshake(real.do_handshake, s);
}

/*
 * SSL_shutdown sends close_notify: the program ends the session. Its
 * socket I/O says nothing of a call, so it runs as the shim's own.
 */
RX_EXPORT int SSL_shutdown(void *s)
{
	int inside, ret;

	bind_real();
	refused = NULL;
	if (!real.shutdown) {
		errno = ENOSYS;
		return -1;
	}
	if (!rx__reentered())
		rx__tls_bye(s); /* ADR-643 */
	inside = rx__inside;
	rx__inside = 1;
	ret = real.shutdown(s);
	rx__inside = inside;
	return ret;
}

/* SSL_clear readies a session for another connection: forget its tie. */
RX_EXPORT int SSL_clear(void *s)
{
	bind_real();
	if (refused == s)
		refused = NULL;
	rx__tls_forget(s);
	if (!real.clear) {
		errno = ENOSYS;
		return 0;
	}
	return real.clear(s);
}

RX_EXPORT void SSL_free(void *s)
{
	bind_real();
	if (refused == s)
		refused = NULL;
	rx__tls_forget(s);
	if (real.free)
		real.free(s);
}

/* What the program asks after a refused write is what it would have been
 * told had the socket refused it (ADR-445). */
RX_EXPORT int SSL_get_error(const void *s, int ret)
{
	if (refused != NULL && refused == s && ret <= 0)
		return SSL_ERROR_SYSCALL;
	bind_real();
	return real.get_error ? real.get_error(s, ret) : SSL_ERROR_SSL;
}
