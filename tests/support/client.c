/*
 * client.c - a plain HTTP/1.1 test client for the integration tests: the
 * kind of unmodified program the shim must guard. Blocking sockets and the
 * plain connect/read/write calls (built with -O2 -D_FORTIFY_SOURCE=2, so
 * read() goes through the fortified __read_chk where the compiler knows the
 * buffer size: the shim must see those too).
 *
 * Usage:
 *   client --port N [--host 127.0.0.1] [--requests R] [--threads T]
 *          [--keepalive] [--path P] [--timeout-ms MS] [--interval-ms MS]
 *          [--duration-ms MS] [--error-pause-ms MS] [--signal-io-ms MS]
 *          [--method M] [--quiet]
 *
 *   --requests R     requests per thread (default 1)
 *   --threads T      threads, each running its own loop (default 1)
 *   --keepalive      reuse one connection per thread; after an error the
 *                    connection is closed and the next request reconnects.
 *                    Without it every request opens a new connection and
 *                    sends `Connection: close`.
 *   --path P         request path (default /)
 *   --timeout-ms MS  SO_RCVTIMEO and SO_SNDTIMEO (connect honours the
 *                    latter on Linux); 0 = none (default)
 *   --interval-ms MS pause between the requests of one thread (default 0)
 *   --duration-ms MS start no request once MS have passed since the
 *                    client started (a time bound on top of --requests,
 *                    for load tests whose fast refusals would otherwise
 *                    use up the requests at once); 0 = no bound (default)
 *   --error-pause-ms MS after a failed request, pause MS before the next
 *                    (a caller that backs off instead of spinning on a
 *                    refusal); default 0
 *   --signal-io-ms MS every MS, send SIGUSR1 to every worker thread still
 *                    running; the handler (SA_RESTART) does I/O to the
 *                    same destination: socket, a non-blocking connect,
 *                    close.
 *                    A shim must not deadlock when a thread is interrupted
 *                    inside it (waiting for a slot, holding a lock). At
 *                    the end, `signals=N handled=N` goes to stderr.
 *   --method M       request method (default GET)
 *   --quiet          print no line per request (the instruction benchmarks:
 *                    a line's cost grows with the digits of its times,
 *                    which differ with and without a shim)
 *
 * Output: one line per request, flushed, in completion order:
 *   <thread> <start_ms> <latency_us> <status or 0> <errno name or OK>
 *   <reached>
 * start_ms counts from the client's start (monotonic); latency_us is the
 * time until the response was complete or the call failed; the errno name
 * is the failing call's errno (`EOF` when the connection closed before a
 * complete response, `EPROTO` for a malformed one); reached is 1 when the
 * request went out on an established connection (connect succeeded, or the
 * kept-alive connection accepted the first write), 0 otherwise.
 *
 * Exit status: 0 whatever the requests' outcomes; 2 on a usage error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static const char *host = "127.0.0.1";
static int port = -1;
static long requests = 1;
static long threads = 1;
static int keepalive;
static int quiet;
static const char *path = "/";
static const char *method = "GET";
static long timeout_ms;
static long interval_ms;
static long duration_ms;
static long error_pause_ms;
static long signal_io_ms;
static struct sockaddr_in signal_sa;
static atomic_long signals_handled;
static atomic_int workers_done;
static struct timespec t0;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;
/*
 * Bytes per read(). Not const, so the compiler cannot prove the reads fit
 * and emits the fortified __read_chk under _FORTIFY_SOURCE.
 */
static volatile size_t read_chunk = 2048;

static long long elapsed_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)(t.tv_sec - t0.tv_sec) * 1000000LL +
	       (t.tv_nsec - t0.tv_nsec) / 1000;
}

static const char *errno_name(int e)
{
	static const struct {
		int e;
		const char *n;
	} names[] = {
	    {ECONNREFUSED, "ECONNREFUSED"},
	    {ECONNRESET, "ECONNRESET"},
	    {ECONNABORTED, "ECONNABORTED"},
	    {EPIPE, "EPIPE"},
	    {ETIMEDOUT, "ETIMEDOUT"},
	    {EAGAIN, "EAGAIN"},
	    {EINPROGRESS, "EINPROGRESS"},
	    {EHOSTUNREACH, "EHOSTUNREACH"},
	    {ENETUNREACH, "ENETUNREACH"},
	    {EINTR, "EINTR"},
	    {EBADF, "EBADF"},
	    {ENOTCONN, "ENOTCONN"},
	    {EMFILE, "EMFILE"},
	    {ENFILE, "ENFILE"},
	    {EADDRNOTAVAIL, "EADDRNOTAVAIL"},
	    {EINVAL, "EINVAL"},
	    {ENOBUFS, "ENOBUFS"},
	    {EPROTO, "EPROTO"},
	    {EACCES, "EACCES"},
	    {EPERM, "EPERM"},
	};
	static __thread char buf[16];
	size_t i;
	for (i = 0; i < sizeof names / sizeof names[0]; i++)
		if (names[i].e == e)
			return names[i].n;
	snprintf(buf, sizeof buf, "E%d", e);
	return buf;
}

static void set_timeouts(int fd)
{
	struct timeval tv;
	if (timeout_ms <= 0)
		return;
	tv.tv_sec = timeout_ms / 1000;
	tv.tv_usec = (timeout_ms % 1000) * 1000;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* Opens a connection; returns the fd, or -1 with errno set. */
static int dial(void)
{
	struct sockaddr_in sa;
	int fd, e;
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		errno = EINVAL;
		return -1;
	}
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	set_timeouts(fd);
	while (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		if (errno == EINTR)
			continue;
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Writes all of buf with write(); returns 0, or -1 with errno set. */
static int write_all(int fd, const char *buf, size_t len, size_t *sent)
{
	*sent = 0;
	while (*sent < len) {
		ssize_t n = write(fd, buf + *sent, len - *sent);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		*sent += (size_t)n;
	}
	return 0;
}

/*
 * Reads one response. Returns the status, or 0 with *err set to an errno
 * (EPROTO for a malformed response, -1 for EOF). *server_close is set when
 * the server said Connection: close.
 */
static int read_response(int fd, int *err, int *server_close)
{
	char buf[8192], chunk[2048];
	size_t len = 0, hlen = 0, i, want;
	long clen = -1, have;
	int status = 0;

	*server_close = 0;
	for (;;) {
		ssize_t n;
		for (i = 3; i < len && !hlen; i++)
			if (!memcmp(buf + i - 3, "\r\n\r\n", 4))
				hlen = i + 1;
		if (hlen)
			break;
		if (len == sizeof buf) {
			*err = EPROTO;
			return 0;
		}
		/*
		 * A variable length into a fixed array: with _FORTIFY_SOURCE
		 * this read() compiles to __read_chk, as in real binaries.
		 */
		want = sizeof buf - len < read_chunk ? sizeof buf - len
						     : read_chunk;
		n = read(fd, chunk, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = errno;
			return 0;
		}
		if (n == 0) {
			*err = -1;
			return 0;
		}
		memcpy(buf + len, chunk, (size_t)n);
		len += (size_t)n;
	}
	if (sscanf(buf, "HTTP/%*d.%*d %d", &status) != 1 || status < 100) {
		*err = EPROTO;
		return 0;
	}
	{
		char *p = buf, *end = buf + hlen;
		while (p < end) {
			char *eol = memchr(p, '\n', (size_t)(end - p));
			if (!eol)
				break;
			if (!strncasecmp(p, "Content-Length:", 15))
				clen = atol(p + 15);
			else if (!strncasecmp(p, "Connection:", 11) &&
				 strcasestr(p + 11, "close") &&
				 strcasestr(p + 11, "close") < eol)
				*server_close = 1;
			p = eol + 1;
		}
	}
	if (!strcmp(method, "HEAD") || status == 204 || status == 304)
		clen = 0;
	have = (long)(len - hlen);
	if (clen < 0) {
		/* No length: the body runs to EOF. */
		*server_close = 1;
		for (;;) {
			ssize_t n = read(fd, buf, sizeof buf);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
		}
		return status;
	}
	while (have < clen) {
		ssize_t n;
		want = (size_t)(clen - have) < read_chunk
			   ? (size_t)(clen - have)
			   : read_chunk;
		n = read(fd, chunk, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			*err = errno;
			return 0;
		}
		if (n == 0) {
			*err = -1;
			return 0;
		}
		have += n;
	}
	return status;
}

/* SIGUSR1: I/O to the destination under test, async-signal-safe calls
 * only (socket, connect, close); errno is kept for the interrupted code. */
static void on_signal_io(int sig)
{
	int saved = errno, fd;
	(void)sig;
	/* Non-blocking: a handler must not itself wait for a slot. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		(void)connect(fd, (struct sockaddr *)&signal_sa,
			      sizeof signal_sa);
		close(fd);
	}
	atomic_fetch_add(&signals_handled, 1);
	errno = saved;
}

/* Interrupt every worker every signal_io_ms until all are done. */
static void *signaller(void *arg)
{
	pthread_t *th = arg;
	long sent = 0, i;
	struct timespec ts = {signal_io_ms / 1000,
			      (signal_io_ms % 1000) * 1000000L};
	while (atomic_load(&workers_done) < threads) {
		nanosleep(&ts, NULL);
		for (i = 0; i < threads; i++)
			if (pthread_kill(th[i], SIGUSR1) == 0)
				sent++;
	}
	return (void *)sent;
}

static void *worker(void *arg)
{
	long id = (long)arg, r;
	int fd = -1;
	char req[4096];
	int reqlen = snprintf(req, sizeof req,
			      "%s %s HTTP/1.1\r\nHost: %s:%d\r\n"
			      "User-Agent: resilix-test-client\r\n"
			      "Accept: */*\r\nConnection: %s\r\n\r\n",
			      method, path, host, port,
			      keepalive ? "keep-alive" : "close");

	for (r = 0; r < requests; r++) {
		long long start = elapsed_us(), lat;
		int status = 0, err = 0, reached = 0, server_close = 0;
		size_t sent = 0;

		if (duration_ms > 0 && start / 1000 >= duration_ms)
			break;

		if (r > 0 && interval_ms > 0) {
			struct timespec ts = {interval_ms / 1000,
					      (interval_ms % 1000) * 1000000L};
			nanosleep(&ts, NULL);
			start = elapsed_us();
		}
		if (fd < 0) {
			fd = dial();
			if (fd < 0)
				err = errno;
			else
				reached = 1;
		}
		if (fd >= 0) {
			if (write_all(fd, req, (size_t)reqlen, &sent) < 0) {
				err = errno;
				if (sent == 0)
					reached = 0;
			} else {
				reached = 1;
				status = read_response(fd, &err, &server_close);
			}
		}
		lat = elapsed_us() - start;
		if (fd >= 0 && (!keepalive || err || server_close)) {
			close(fd);
			fd = -1;
		}
		if (err != 0 && error_pause_ms > 0) {
			struct timespec ts = {error_pause_ms / 1000,
					      (error_pause_ms % 1000) *
						  1000000L};
			nanosleep(&ts, NULL);
		}
		if (quiet)
			continue;
		pthread_mutex_lock(&out_mu);
		printf("%ld %lld %lld %d %s %d\n", id, start / 1000, lat,
		       status,
		       err == 0	   ? "OK"
		       : err == -1 ? "EOF"
				   : errno_name(err),
		       reached);
		fflush(stdout);
		pthread_mutex_unlock(&out_mu);
	}
	if (fd >= 0)
		close(fd);
	atomic_fetch_add(&workers_done, 1);
	return NULL;
}

static long num(const char *opt, const char *v, long lo, long hi)
{
	char *end;
	long x;
	errno = 0;
	x = v ? strtol(v, &end, 10) : 0;
	if (!v || errno || end == v || *end || x < lo || x > hi) {
		fprintf(stderr, "client: %s wants an integer in [%ld, %ld]\n",
			opt, lo, hi);
		exit(2);
	}
	return x;
}

int main(int argc, char **argv)
{
	pthread_t *th;
	long i;

	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--keepalive")) {
			keepalive = 1;
			continue;
		}
		if (!strcmp(a, "--quiet")) {
			quiet = 1;
			continue;
		}
		if (!strcmp(a, "--help")) {
			puts("usage: client --port N [--host 127.0.0.1] "
			     "[--requests R] [--threads T] [--keepalive]\n"
			     "              [--path P] [--timeout-ms MS] "
			     "[--interval-ms MS] [--method M] [--quiet]");
			return 0;
		}
		if (!v) {
			fprintf(stderr, "client: %s needs a value\n", a);
			return 2;
		}
		i++;
		if (!strcmp(a, "--host"))
			host = v;
		else if (!strcmp(a, "--port"))
			port = (int)num(a, v, 1, 65535);
		else if (!strcmp(a, "--requests"))
			requests = num(a, v, 0, 10000000);
		else if (!strcmp(a, "--threads"))
			threads = num(a, v, 1, 1024);
		else if (!strcmp(a, "--path"))
			path = v;
		else if (!strcmp(a, "--method"))
			method = v;
		else if (!strcmp(a, "--timeout-ms"))
			timeout_ms = num(a, v, 0, 3600000);
		else if (!strcmp(a, "--interval-ms"))
			interval_ms = num(a, v, 0, 3600000);
		else if (!strcmp(a, "--duration-ms"))
			duration_ms = num(a, v, 0, 3600000);
		else if (!strcmp(a, "--error-pause-ms"))
			error_pause_ms = num(a, v, 0, 3600000);
		else if (!strcmp(a, "--signal-io-ms"))
			signal_io_ms = num(a, v, 1, 3600000);
		else {
			fprintf(stderr, "client: unknown option %s\n", a);
			return 2;
		}
	}
	if (port < 0) {
		fprintf(stderr, "client: --port is required\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	th = calloc((size_t)threads, sizeof *th);
	if (!th)
		return 1;
	if (signal_io_ms > 0) {
		struct sigaction act;
		memset(&act, 0, sizeof act);
		act.sa_handler = on_signal_io;
		act.sa_flags = SA_RESTART;
		sigemptyset(&act.sa_mask);
		sigaction(SIGUSR1, &act, NULL);
		signal_sa.sin_family = AF_INET;
		signal_sa.sin_port = htons((unsigned short)port);
		inet_pton(AF_INET, host, &signal_sa.sin_addr);
	}
	for (i = 0; i < threads; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i) != 0) {
			fprintf(stderr, "client: pthread_create failed\n");
			return 1;
		}
	if (signal_io_ms > 0) {
		pthread_t sig;
		void *sent = NULL;
		if (pthread_create(&sig, NULL, signaller, th) != 0) {
			fprintf(stderr, "client: pthread_create failed\n");
			return 1;
		}
		/* The signaller stops once every worker is done; join it
		 * first, so it never signals a thread already joined. */
		pthread_join(sig, &sent);
		for (i = 0; i < threads; i++)
			pthread_join(th[i], NULL);
		fprintf(stderr, "signals=%ld handled=%ld\n", (long)sent,
			atomic_load(&signals_handled));
	} else {
		for (i = 0; i < threads; i++)
			pthread_join(th[i], NULL);
	}
	free(th);
	return 0;
}
