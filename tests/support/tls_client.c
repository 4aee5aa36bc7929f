/*
 * tls_client.c - a small HTTPS client on OpenSSL for the TLS layer's
 * tests (tests/preload/tls_*.sh): one connection, kept alive, or one per
 * request; each request's outcome on one line of stdout.
 *
 * Usage: tls_client --port P [--requests N] [--new] [--path PATH]
 *                   [--sni NAME] [--implicit] [--zero-write] [--bad-length]
 *                   [--pause-ms MS]
 *                   [--entry-points] [--tls12] [--bio] [--hold-ms MS]
 *                   [--idle-ms MS] [--bye]
 *
 *   --new          a new connection per request (default: keep-alive)
 *   --sni NAME     set the SNI host name (and the Host header)
 *   --implicit     no SSL_connect: the first SSL_write does the handshake
 *   --zero-write   no SSL_connect: SSL_write of no bytes does the handshake
 *                  before the request, as `openssl s_client` does
 *   --bad-length   as --zero-write, after an SSL_write and an SSL_read of
 *                  a negative length, which libssl refuses at once
 *   --pause-ms MS  sleep between requests
 *   --tls12        TLS 1.2 at most (the client reads the handshake's last
 *                  flight, the server's Finished)
 *   --bio          the plaintext through a BIO_f_ssl on the session
 *                  (BIO_write, BIO_read), which libssl serves without
 *                  SSL_write or SSL_read: what the TLS layer cannot see
 *   --hold-ms MS   keep each connection MS after its answer, then close it
 *                  (with --new)
 *   --idle-ms MS   no request: each connection is made, its handshake
 *                  done, left unused for MS, then closed ("I idle"); an
 *                  idle pooled connection
 *   --bye          with --idle-ms: end each session with SSL_shutdown (its
 *                  close_notify) and read until the server's EOF, then
 *                  close: a TLS check that sends no request
 *   --entry-points one request through every interposed entry point
 *                  (SSL_write_ex, SSL_peek, SSL_peek_ex, SSL_read,
 *                  SSL_read_ex, SSL_get_error, SSL_shutdown, SSL_clear,
 *                  SSL_free), printing each one's return value and errno,
 *                  so runs with and without the shim can be compared
 *
 * Output per request: "I STATUS" when answered, or
 * "I error OP ret=R ssl_error=E errno=NAME" when a call failed (a failed
 * SSL_write adds "sent=N": the bytes the kernel took from the socket
 * during that call, from TCP_INFO's tcpi_bytes_sent). The
 * certificate is not verified (self-signed test upstream).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <linux/tcp.h> /* tcpi_bytes_sent: newer than glibc's tcp_info */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *errname(int e)
{
	switch (e) {
	case 0:
		return "0";
	case ECONNREFUSED:
		return "ECONNREFUSED";
	case ECONNRESET:
		return "ECONNRESET";
	case EPIPE:
		return "EPIPE";
	case EAGAIN:
		return "EAGAIN";
	case EINTR:
		return "EINTR";
	default:
		return strerror(e);
	}
}

struct conn {
	int fd;
	SSL *ssl;
};

/* --bio: the session's BIO_f_ssl, through which the plaintext goes. */
static int use_bio;
static BIO *via;

static int tls_read(SSL *ssl, void *buf, int n)
{
	return via ? BIO_read(via, buf, n) : SSL_read(ssl, buf, n);
}

static int tls_write(SSL *ssl, const void *buf, int n)
{
	return via ? BIO_write(via, buf, n) : SSL_write(ssl, buf, n);
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	if (ms > 0)
		nanosleep(&ts, NULL);
}

static int dial(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Read one response's head and Content-Length body; the status, or -1. */
static int response(SSL *ssl, const char **op, int *ret)
{
	char buf[16384];
	size_t have = 0;
	char *end, *cl;
	long body;
	int n, status;

	for (;;) {
		*op = "SSL_read";
		n = tls_read(ssl, buf + have, (int)(sizeof(buf) - 1 - have));
		if (n <= 0) {
			*ret = n;
			return -1;
		}
		have += (size_t)n;
		buf[have] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end)
			break;
		if (have >= sizeof(buf) - 1) {
			*ret = 0;
			return -1;
		}
	}
	if (sscanf(buf, "HTTP/%*d.%*d %d", &status) != 1)
		return -1;
	cl = strstr(buf, "Content-Length:");
	body = cl ? strtol(cl + 15, NULL, 10) : 0;
	body -= (long)(have - (size_t)(end + 4 - buf));
	while (body > 0) {
		n = tls_read(ssl, buf, (int)sizeof(buf));
		if (n <= 0) {
			*ret = n;
			return -1;
		}
		body -= n;
	}
	return status;
}

static void report(int i, SSL *ssl, const char *op, int ret, int err)
{
	printf("%d error %s ret=%d ssl_error=%d errno=%s\n", i, op, ret,
	       ssl ? SSL_get_error(ssl, ret) : -1, errname(err));
}

/* Bytes the kernel has sent on @fd so far (TCP_INFO), or 0. */
static unsigned long long bytes_sent(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	memset(&ti, 0, sizeof(ti));
	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
		return 0;
	return (unsigned long long)ti.tcpi_bytes_sent;
}

static int open_conn(struct conn *c, SSL_CTX *ctx, int port, const char *sni,
		     int implicit, int i)
{
	int rc;

	c->ssl = NULL;
	c->fd = dial(port);
	if (c->fd < 0) {
		printf("%d error connect ret=-1 ssl_error=-1 errno=%s\n", i,
		       errname(errno));
		return -1;
	}
	c->ssl = SSL_new(ctx);
	SSL_set_fd(c->ssl, c->fd);
	if (sni)
		SSL_set_tlsext_host_name(c->ssl, sni);
	if (implicit) {
		SSL_set_connect_state(c->ssl);
		if (implicit == 1)
			return 0;
		if (implicit == 3) {
			char b;

			if (SSL_write(c->ssl, "", -1) != -1 ||
			    SSL_read(c->ssl, &b, -1) != -1) {
				printf("%d error negative length taken\n", i);
				return -1;
			}
			ERR_clear_error();
		}
		/* A success of no bytes returns 0, as a failure may: one
		 * that leaves the handshake unfinished is the failure. */
		while (!SSL_is_init_finished(c->ssl)) {
			errno = 0;
			rc = SSL_write(c->ssl, "", 0);
			int e = rc < 0 ? SSL_ERROR_SSL
				       : SSL_get_error(c->ssl, rc);

			if (rc < 0 ||
			    (rc == 0 && !SSL_is_init_finished(c->ssl) &&
			     e != SSL_ERROR_WANT_READ &&
			     e != SSL_ERROR_WANT_WRITE)) {
				report(i, c->ssl, "SSL_write(0)", rc, errno);
				return -1;
			}
		}
		return 0;
	}
	errno = 0;
	rc = SSL_connect(c->ssl);
	if (rc != 1) {
		report(i, c->ssl, "SSL_connect", rc, errno);
		return -1;
	}
	if (use_bio) {
		via = BIO_new(BIO_f_ssl());
		BIO_set_ssl(via, c->ssl, BIO_NOCLOSE);
	}
	return 0;
}

static void close_conn(struct conn *c)
{
	if (via) {
		/* The SSL BIO holds a reference to the session's socket BIO,
		 * its next in the chain; BIO_NOCLOSE: the session is freed
		 * below. */
		BIO_free_all(via);
		via = NULL;
	}
	if (c->ssl)
		SSL_free(c->ssl);
	if (c->fd >= 0)
		close(c->fd);
	c->ssl = NULL;
	c->fd = -1;
}

/* --entry-points: each call's return value and errno. */
static int entry_points(SSL_CTX *ctx, int port, const char *path)
{
	struct conn c;
	char req[512], buf[8192];
	size_t got = 0, wrote = 0;
	int rc;

	if (open_conn(&c, ctx, port, NULL, 0, 0) != 0)
		return 1;
	snprintf(req, sizeof(req),
		 "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: "
		 "keep-alive\r\n\r\n",
		 path);
	errno = 0;
	rc = SSL_write_ex(c.ssl, req, strlen(req), &wrote);
	printf("SSL_write_ex %d wrote=%zu errno=%s\n", rc, wrote,
	       errname(errno));
	errno = 0;
	rc = SSL_peek(c.ssl, buf, 12);
	printf("SSL_peek %d [%.12s] errno=%s\n", rc, rc > 0 ? buf : "",
	       errname(errno));
	errno = 0;
	rc = SSL_peek_ex(c.ssl, buf, 12, &got);
	printf("SSL_peek_ex %d got=%zu errno=%s\n", rc, got, errname(errno));
	errno = 0;
	rc = SSL_read(c.ssl, buf, 12);
	printf("SSL_read %d [%.12s] errno=%s\n", rc, rc > 0 ? buf : "",
	       errname(errno));
	/* The rest of the answer (the test upstream's body is "ok\n"),
	 * before the next request. */
	{
		char all[8192];
		size_t have = 0;

		do {
			errno = 0;
			rc = SSL_read_ex(c.ssl, all + have,
					 sizeof(all) - 1 - have, &got);
			if (rc == 1)
				have += got;
			all[have] = '\0';
		} while (rc == 1 && have < sizeof(all) - 1 &&
			 !strstr(all, "\r\n\r\nok\n"));
		printf("SSL_read_ex %d errno=%s rest=%s\n", rc, errname(errno),
		       strstr(all, "ok\n") ? "ok" : "short");
	}
	errno = 0;
	rc = SSL_write(c.ssl, req, (int)strlen(req));
	printf("SSL_write %d errno=%s\n", rc, errname(errno));
	{
		const char *op;
		int st = response(c.ssl, &op, &rc);

		printf("answer %d\n", st);
	}
	errno = 0;
	rc = SSL_write(c.ssl, req, 0);
	printf("SSL_write(0) %d ssl_error=%d\n", rc, SSL_get_error(c.ssl, rc));
	errno = 0;
	rc = SSL_shutdown(c.ssl);
	printf("SSL_shutdown %d errno=%s\n", rc, errname(errno));
	errno = 0;
	rc = SSL_read(c.ssl, buf, sizeof(buf));
	printf("SSL_read after shutdown %d ssl_error=%d\n", rc,
	       SSL_get_error(c.ssl, rc));
	errno = 0;
	rc = SSL_clear(c.ssl);
	printf("SSL_clear %d errno=%s\n", rc, errname(errno));
	close_conn(&c);
	printf("SSL_free done\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *path = "/", *sni = NULL;
	int port = 0, requests = 1, fresh = 0, implicit = 0, pause_ms = 0;
	int entry = 0, tls12 = 0, hold_ms = 0, idle_ms = -1, bye = 0, i;
	struct conn c = {-1, NULL};
	SSL_CTX *ctx;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--port") && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--requests") && i + 1 < argc)
			requests = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--path") && i + 1 < argc)
			path = argv[++i];
		else if (!strcmp(argv[i], "--sni") && i + 1 < argc)
			sni = argv[++i];
		else if (!strcmp(argv[i], "--pause-ms") && i + 1 < argc)
			pause_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--new"))
			fresh = 1;
		else if (!strcmp(argv[i], "--implicit"))
			implicit = 1;
		else if (!strcmp(argv[i], "--zero-write"))
			implicit = implicit == 3 ? 3 : 2;
		else if (!strcmp(argv[i], "--bad-length"))
			implicit = 3;
		else if (!strcmp(argv[i], "--entry-points"))
			entry = 1;
		else if (!strcmp(argv[i], "--tls12"))
			tls12 = 1;
		else if (!strcmp(argv[i], "--bio"))
			use_bio = 1;
		else if (!strcmp(argv[i], "--hold-ms") && i + 1 < argc)
			hold_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--idle-ms") && i + 1 < argc)
			idle_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--bye"))
			bye = 1;
		else {
			fprintf(stderr, "tls_client: bad argument %s\n",
				argv[i]);
			return 2;
		}
	}
	if (port <= 0) {
		fprintf(stderr, "tls_client: --port is required\n");
		return 2;
	}
	ctx = SSL_CTX_new(TLS_client_method());
	SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	if (tls12)
		SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (entry) {
		int rc = entry_points(ctx, port, path);

		SSL_CTX_free(ctx);
		return rc;
	}
	for (i = 0; i < requests; i++) {
		char req[512];
		const char *op = "SSL_write";
		unsigned long long before;
		int rc, status;

		if (i > 0)
			sleep_ms(pause_ms);
		if (c.ssl == NULL &&
		    open_conn(&c, ctx, port, sni, implicit, i) != 0) {
			close_conn(&c);
			continue;
		}
		if (idle_ms >= 0) {
			char b[256];

			sleep_ms(idle_ms);
			if (bye) {
				SSL_shutdown(c.ssl);
				while (SSL_read(c.ssl, b, sizeof(b)) > 0)
					;
			}
			printf("%d idle\n", i);
			close_conn(&c);
			continue;
		}
		snprintf(req, sizeof(req),
			 "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: %s\r\n\r\n",
			 path, sni ? sni : "127.0.0.1",
			 fresh ? "close" : "keep-alive");
		ERR_clear_error();
		before = bytes_sent(c.fd);
		errno = 0;
		rc = tls_write(c.ssl, req, (int)strlen(req));
		if (rc <= 0) {
			int err = errno;

			printf("%d error %s ret=%d ssl_error=%d errno=%s "
			       "sent=%llu\n",
			       i, op, rc, SSL_get_error(c.ssl, rc), errname(err),
			       bytes_sent(c.fd) - before);
			close_conn(&c);
			continue;
		}
		errno = 0;
		status = response(c.ssl, &op, &rc);
		if (status < 0) {
			report(i, c.ssl, op, rc, errno);
			close_conn(&c);
			continue;
		}
		printf("%d %d\n", i, status);
		if (fresh) {
			sleep_ms(hold_ms);
			close_conn(&c);
		}
	}
	close_conn(&c);
	SSL_CTX_free(ctx);
	return 0;
}
