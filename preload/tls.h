/*
 * preload/tls.h - the TLS layer's common half (tls.c) as its library
 * adapters see them: tls_openssl.c (SSL_*) and tls_gnutls.c (gnutls_*).
 *
 * An adapter's wrapper asks rx__tls_begin, runs the real library
 * function, and reports its outcome with rx__tls_end, as the socket
 * wrappers do with call.h. The common half ties a session to the socket
 * it runs on and feeds the plaintext to the call state machine (call.c)
 * for that socket's record: the same protocol modules, the same
 * admission, the same verdicts as plaintext, one call attributed once
 * (ADR-440). A session is tied by watching the socket I/O of its first
 * calls, or from what the library says its socket is (ADR-441).
 * Thread-safe; no allocation but one mmap at the first tie; no lock.
 */
#ifndef RESILIX_PRELOAD_TLS_H
#define RESILIX_PRELOAD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "call.h"

/* What an adapter tells the common half about a session (its functions
 * take the library's session pointer). */
struct rx_tls_lib {
	/* The socket the program gave the session, or -1 when it cannot be
	 * told (a memory BIO, push/pull functions of the program). */
	int (*fd_of)(void *session);
	/* Did ALPN select h2? (then the TLS layer stands aside, ADR-443) */
	bool (*h2)(void *session);
	/* The SNI host name the program set, copied into @buf (@size
	 * bytes, NUL-terminated); its length, 0 when none. */
	size_t (*sni)(void *session, char *buf, size_t size);
};

/* Which way the plaintext goes. */
enum rx_tls_dir { RX_TLS_WRITE = 0, RX_TLS_READ, RX_TLS_PEEK };

/* What rx__tls_begin decided. */
enum rx_tls_step {
	RX_TLS_PASS = 0, /* call the real function, nothing else */
	RX_TLS_TRACK,	 /* call it, then rx__tls_end */
	RX_TLS_WATCH_IO, /* call it, then rx__tls_end: its socket I/O is
			    watched to tie the session */
	RX_TLS_REFUSE,	 /* refused: fail as the library would on a
			    refused socket write, errno c->refusal */
	RX_TLS_SHAKE_IO	 /* a tied session's handshake: call it, then
			    rx__tls_end (ADR-642) */
};

/* One interposed call in progress, on the caller's stack. */
struct rx_tls_call {
	struct rx_op op;
	void *session;
	const struct rx_tls_lib *lib;
	const void *buf;
	int fd;
	int refusal;  /* RX_TLS_REFUSE: the errno to fail with */
	uint8_t dir;  /* enum rx_tls_dir */
	uint8_t step; /* enum rx_tls_step */
	bool handshake;
};

/*
 * rx__tls_begin - a data call on @session (@dir, @len plaintext bytes at
 * @buf: the bytes to write, or the buffer a read fills). PASS outside a
 * guarding shim, inside curl_easy_perform (the curl layer knows more,
 * ADR-152), in a call re-entered from the library itself, for a session
 * the TLS layer leaves alone (h2, a socket it does not track) and for
 * any operation the socket's record does not care about. REFUSE only for
 * a write that begins a new request on a kept-alive connection whose key
 * refuses it: no byte was written. O(1).
 */
enum rx_tls_step rx__tls_begin(struct rx_tls_call *c, void *session,
			       const struct rx_tls_lib *lib,
			       enum rx_tls_dir dir, const void *buf,
			       size_t len);

/*
 * rx__tls_handshake - a handshake call on @session begins (SSL_connect,
 * SSL_do_handshake, gnutls_handshake): RX_TLS_WATCH_IO while the session
 * is not tied, RX_TLS_SHAKE_IO when it is tied to a tracked socket (a
 * non-blocking handshake's later steps, a renegotiation), else
 * RX_TLS_PASS. While either runs, the library's reads of ciphertext are
 * the program waiting for the server; once the handshake completes,
 * nothing is awaited until the program reads (ADR-642).
 */
enum rx_tls_step rx__tls_handshake(struct rx_tls_call *c, void *session,
				   const struct rx_tls_lib *lib);

/*
 * rx__tls_end - the real function returned: @n plaintext bytes moved
 * (> 0), the peer's end of the stream (0), or no bytes with @err: an
 * errno (EAGAIN: it would block; EINTR: nothing happened yet; EPROTO: a
 * TLS-level failure, transient) or RX_TLS_ANSWERED (a handshake the
 * program refused, such as an unverified certificate: the upstream
 * answered). For a handshake, @n is 1 when it completed. Preserves errno.
 */
#define RX_TLS_ANSWERED (-1)
void rx__tls_end(struct rx_tls_call *c, ssize_t n, int err);

/* rx__tls_bye - the program ends @session (SSL_shutdown, gnutls_bye: its
 * close_notify): a call on its socket that sent no plaintext request is
 * ended (fdtable.h, rx__fd_end_unsent; ADR-643). O(1). */
void rx__tls_bye(void *session);

/* rx__tls_forget - @session is freed or reset (SSL_free, SSL_clear,
 * gnutls_deinit): forget its tie. O(1) but for tombstones. */
void rx__tls_forget(void *session);

/* rx__tls_aside - must this thread's TLS call pass straight through?
 * (not guarding, inside curl_easy_perform, or re-entered). O(1). */
bool rx__tls_aside(void);

#endif
