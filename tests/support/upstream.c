/*
 * upstream.c - a scriptable HTTP/1.1 test upstream for the integration tests
 * and the demo. It listens on 127.0.0.1 only, never on another address.
 *
 * Usage:
 *   upstream [--port N] [--port-file FILE] [--log FILE] [--conn-log FILE]
 *            [--phases SPEC] [--capacity N] [--max-conns N]
 *            [--max-seconds S] [--verbose]
 *
 *   --port N         port to listen on; 0 (the default) picks an ephemeral
 *                    port. The first line on stdout is always `port=N`,
 *                    flushed, printed once the port is known.
 *   --port-file F    also write the port number to F (atomically, via a
 *                    rename), for shell tests that start us in background.
 *   --log F          one line per request that reached us, flushed per line:
 *                      <ms since start> <method> <path> <status>
 *                    status is the HTTP status sent, `rst` when the
 *                    connection was reset instead of answered (mode reset),
 *                    `hang` when it was never answered (mode hang). Requests
 *                    that arrive while a `refuse` phase runs are not logged:
 *                    the upstream is "dead" then.
 *   --conn-log F     one line when a connection is accepted and one when
 *                    it ends:
 *                      <ms since start> accept <peer port>
 *                      <ms since start> close <peer port> <unparsed bytes>
 *                    unparsed bytes counts what arrived after the last
 *                    complete request (a partial request the client sent
 *                    before it went away).
 *   --phases SPEC    the timeline: a comma-separated list of
 *                    DURATION_MS:MODE[:ARG...], run in order; the last phase
 *                    lasts forever whatever its duration says. Modes:
 *                      ok[:LAT_MS]               200 after LAT_MS (default 0)
 *                      status:CODE[:LAT_MS]      CODE after LAT_MS; 429 and
 *                                                503 carry Retry-After: 1
 *                      slow:LAT_MS               200 after LAT_MS
 *                      mix:PCT:CODE:LAT_MS       PCT% of the requests of the
 *                                                phase get CODE, the others
 *                                                200, all after LAT_MS. The
 *                                                errors are spread evenly
 *                                                (deterministic, no random)
 *                      refuse                    close the listening socket
 *                                                so connects get
 *                                                ECONNREFUSED, and reset the
 *                                                open connections; listen
 *                                                again on the same port when
 *                                                the next phase starts
 *                      reset                     read the request, then
 *                                                close with RST (SO_LINGER 0)
 *                      hang                      read the request and never
 *                                                answer (until the client
 *                                                closes or the phase ends)
 *                      stream:EVERY_MS[:CHUNKS]  200 at once, with the
 *                                                first chunk of its body,
 *                                                then one chunk every
 *                                                EVERY_MS: CHUNKS chunks
 *                                                of "data: tick\n\n" in
 *                                                all (default 1000), as
 *                                                Content-Length says; a
 *                                                stream or a slow body.
 *                                                The connection ends when
 *                                                the client goes away
 *                      continue                  an interim "100 Continue"
 *                                                at once, then the body is
 *                                                read and never answered
 *                                                (as hang); logged as 100
 *                    Default: 0:ok:0. The phase of a request is the one in
 *                    force when its header arrives.
 *   --capacity N     serve at most N requests at once; the others wait in a
 *                    queue (their latency sleep starts when served). 0 (the
 *                    default) = unlimited.
 *   --max-conns N    at most N connections (threads) at once, default 256;
 *                    above that we stop accepting and the kernel backlog
 *                    queues the connects.
 *   --max-seconds S  exit (status 0) after S seconds, default 300: a safety
 *                    bound so a forgotten upstream never outlives a test.
 *   --verbose        phase changes on stderr.
 *
 * HTTP: HTTP/1.1 keep-alive is the default (HTTP/1.0 closes unless the
 * client asks for keep-alive); `Connection: close` from the client closes
 * after the response; Content-Length is always set; a request body is read
 * and discarded according to its Content-Length. Pipelined requests are
 * served in order. An idle kept-alive connection is closed after 60 s.
 *
 * Design: the main thread owns the listening socket, polls it with a short
 * timeout so it can follow the phase timeline (close and reopen it for
 * `refuse`), and starts one detached thread per accepted connection, at
 * most --max-conns of them. SIGTERM and SIGINT end the process cleanly with
 * status 0. Log lines are written with one write() to an O_APPEND file, so
 * lines from concurrent connections never interleave.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MAX_PHASES 64
#define REQ_BUF 16384
#define IDLE_MS 60000
#define TICK_MS 10

enum mode {
	M_OK,
	M_STATUS,
	M_MIX,
	M_REFUSE,
	M_RESET,
	M_HANG,
	M_STREAM,
	M_CONTINUE
};

struct phase {
	long duration_ms;
	long start_ms; /* computed: sum of the earlier durations */
	enum mode mode;
	int code;
	long lat_ms;
	int pct;
	long chunks;	      /* stream: chunks of the body */
	long every_ms;	      /* stream: between two chunks */
	unsigned long served; /* requests of this phase so far (mix) */
};

static struct phase phases[MAX_PHASES];
static int nphases;
static int log_fd = -1;
static int conn_log_fd = -1;
static int verbose;
static long capacity;
static long max_conns = 256;
static struct timespec t0;
static volatile sig_atomic_t stopping;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cap_cv = PTHREAD_COND_INITIALIZER;
static long in_service;
static long active_conns;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("upstream: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(2);
}

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)(t.tv_sec - t0.tv_sec) * 1000 +
	       (t.tv_nsec - t0.tv_nsec) / 1000000;
}

static void sleep_ms(long ms)
{
	struct timespec ts;
	if (ms <= 0)
		return;
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = (ms % 1000) * 1000000L;
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR && !stopping)
		;
}

/* The index of the phase in force at t_ms (the last one lasts forever). */
static int phase_at(long t_ms)
{
	int i;
	for (i = 0; i < nphases - 1; i++)
		if (t_ms < phases[i + 1].start_ms)
			return i;
	return nphases - 1;
}

static long parse_long(const char *s, const char *what, long lo, long hi)
{
	char *end;
	long v;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		die("bad %s '%s' (want an integer in [%ld, %ld])", what, s, lo,
		    hi);
	return v;
}

/*
 * Parses SPEC into phases[]. Accepts the grammar of the opening comment and
 * rejects anything else with exit status 2, so a typo in a test's timeline
 * fails the test loudly instead of serving the default.
 */
static void parse_phases(const char *spec)
{
	char *copy = strdup(spec), *item, *save = NULL;
	long start = 0;
	if (!copy)
		die("out of memory");
	nphases = 0;
	for (item = strtok_r(copy, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		char *f[6] = {0}, *fs = NULL, *tok;
		int n = 0;
		struct phase *p;
		if (nphases == MAX_PHASES)
			die("too many phases (max %d)", MAX_PHASES);
		for (tok = strtok_r(item, ":", &fs); tok && n < 6;
		     tok = strtok_r(NULL, ":", &fs))
			f[n++] = tok;
		if (tok || n < 2)
			die("bad phase '%s'", item);
		p = &phases[nphases++];
		memset(p, 0, sizeof *p);
		p->duration_ms = parse_long(f[0], "duration", 0, LONG_MAX / 4);
		p->start_ms = start;
		start += p->duration_ms;
		p->code = 200;
		if (!strcmp(f[1], "ok") || !strcmp(f[1], "slow")) {
			if (n > 3 || (!strcmp(f[1], "slow") && n != 3))
				die("bad phase '%s:%s'", f[0], f[1]);
			p->mode = M_OK;
			if (n == 3)
				p->lat_ms =
				    parse_long(f[2], "latency", 0, 3600000);
		} else if (!strcmp(f[1], "status")) {
			if (n < 3 || n > 4)
				die("status wants CODE[:LAT_MS]");
			p->mode = M_STATUS;
			p->code = (int)parse_long(f[2], "code", 100, 599);
			if (n == 4)
				p->lat_ms =
				    parse_long(f[3], "latency", 0, 3600000);
		} else if (!strcmp(f[1], "mix")) {
			if (n != 5)
				die("mix wants PCT:CODE:LAT_MS");
			p->mode = M_MIX;
			p->pct = (int)parse_long(f[2], "percent", 0, 100);
			p->code = (int)parse_long(f[3], "code", 100, 599);
			p->lat_ms = parse_long(f[4], "latency", 0, 3600000);
		} else if (!strcmp(f[1], "refuse") && n == 2) {
			p->mode = M_REFUSE;
		} else if (!strcmp(f[1], "reset") && n == 2) {
			p->mode = M_RESET;
		} else if (!strcmp(f[1], "hang") && n == 2) {
			p->mode = M_HANG;
		} else if (!strcmp(f[1], "stream")) {
			if (n < 3 || n > 4)
				die("stream wants EVERY_MS[:CHUNKS]");
			p->mode = M_STREAM;
			p->every_ms = parse_long(f[2], "interval", 1, 3600000);
			p->chunks =
			    n == 4 ? parse_long(f[3], "chunks", 1, 100000000)
				   : 1000;
		} else if (!strcmp(f[1], "continue") && n == 2) {
			p->mode = M_CONTINUE;
		} else {
			die("unknown phase mode '%s'", f[1]);
		}
	}
	free(copy);
	if (nphases == 0)
		die("empty --phases");
}

static const char *reason(int code)
{
	switch (code) {
	case 200:
		return "OK";
	case 201:
		return "Created";
	case 204:
		return "No Content";
	case 301:
		return "Moved Permanently";
	case 302:
		return "Found";
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 408:
		return "Request Timeout";
	case 409:
		return "Conflict";
	case 422:
		return "Unprocessable Content";
	case 429:
		return "Too Many Requests";
	case 431:
		return "Request Header Fields Too Large";
	case 500:
		return "Internal Server Error";
	case 502:
		return "Bad Gateway";
	case 503:
		return "Service Unavailable";
	case 504:
		return "Gateway Timeout";
	default:
		return "Status";
	}
}

/* Sends all of buf; -1 when the connection failed first. */
static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static void log_line(int fd, const char *fmt, ...)
{
	char line[1024];
	int n;
	va_list ap;
	if (fd < 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof line)
		n = sizeof line - 1;
	/* One write to an O_APPEND file: lines never interleave. */
	if (write(fd, line, (size_t)n) < 0)
		perror("upstream: log");
}

static void close_rst(int fd)
{
	struct linger lg = {1, 0};
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
	close(fd);
}

static void capacity_acquire(void)
{
	if (capacity <= 0)
		return;
	pthread_mutex_lock(&mu);
	while (in_service >= capacity)
		pthread_cond_wait(&cap_cv, &mu);
	in_service++;
	pthread_mutex_unlock(&mu);
}

static void capacity_release(void)
{
	if (capacity <= 0)
		return;
	pthread_mutex_lock(&mu);
	in_service--;
	pthread_cond_signal(&cap_cv);
	pthread_mutex_unlock(&mu);
}

/* Finds the end of the header block; returns its length or 0. */
static size_t header_end(const char *buf, size_t len)
{
	size_t i;
	for (i = 3; i < len; i++)
		if (buf[i - 3] == '\r' && buf[i - 2] == '\n' &&
		    buf[i - 1] == '\r' && buf[i] == '\n')
			return i + 1;
	return 0;
}

/*
 * Looks for header NAME (case-insensitive) in the header block HDR of
 * length LEN; copies its trimmed value into OUT. Returns 1 when found.
 */
static int header_value(const char *hdr, size_t len, const char *name,
			char *out, size_t outlen)
{
	size_t nl = strlen(name);
	const char *p = hdr, *end = hdr + len;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		if (!eol)
			break;
		if ((size_t)(eol - p) > nl && p[nl] == ':' &&
		    !strncasecmp(p, name, nl)) {
			const char *v = p + nl + 1;
			size_t vl;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			vl = (size_t)(eol - v);
			while (vl > 0 &&
			       (v[vl - 1] == '\r' || v[vl - 1] == ' '))
				vl--;
			if (vl >= outlen)
				vl = outlen - 1;
			memcpy(out, v, vl);
			out[vl] = 0;
			return 1;
		}
		p = eol + 1;
	}
	return 0;
}

/*
 * Waits until fd is readable. Returns 1 when readable, 0 when the
 * connection must end (stop, idle limit), -1 when a refuse phase began
 * (the caller resets the connection).
 */
static int wait_readable(int fd, long *idle_since)
{
	for (;;) {
		struct pollfd pfd = {fd, POLLIN, 0};
		int r;
		if (stopping)
			return 0;
		if (phases[phase_at(now_ms())].mode == M_REFUSE)
			return -1;
		if (now_ms() - *idle_since > IDLE_MS)
			return 0;
		r = poll(&pfd, 1, 100);
		if (r > 0)
			return 1;
		if (r < 0 && errno != EINTR)
			return 0;
	}
}

struct conn {
	int fd;
	int peer_port;
};

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	int fd = c->fd, peer_port = c->peer_port;
	char *buf = malloc(REQ_BUF + 1);
	size_t len = 0;
	long idle_since = now_ms();
	int rst = 0;

	free(c);
	if (!buf)
		goto out;
	for (;;) {
		size_t hlen;
		char method[32], path[2048], version[16], val[128];
		long t, body = 0;
		int keep, code, idx, w;
		struct phase *p;
		char resp[512], payload[64];
		int rlen, plen;

		while ((hlen = header_end(buf, len)) == 0) {
			ssize_t n;
			if (len >= REQ_BUF) {
				const char *e = "HTTP/1.1 431 Request Header "
						"Fields Too Large\r\nContent-"
						"Length: 0\r\nConnection: "
						"close\r\n\r\n";
				write_all(fd, e, strlen(e));
				goto out;
			}
			w = wait_readable(fd, &idle_since);
			if (w < 0) {
				rst = 1;
				goto out;
			}
			if (w == 0)
				goto out;
			n = read(fd, buf + len, REQ_BUF - len);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				goto out;
			len += (size_t)n;
		}
		t = now_ms();
		idx = phase_at(t);
		p = &phases[idx];
		if (p->mode == M_REFUSE) {
			rst = 1;
			goto out;
		}
		buf[hlen] = 0;
		if (sscanf(buf, "%31s %2047s %15s", method, path, version) !=
		    3) {
			const char *e =
			    "HTTP/1.1 400 Bad Request\r\nContent-"
			    "Length: 0\r\nConnection: close\r\n\r\n";
			write_all(fd, e, strlen(e));
			goto out;
		}
		keep = strcmp(version, "HTTP/1.0") != 0;
		if (header_value(buf, hlen, "Connection", val, sizeof val)) {
			if (strcasestr(val, "close"))
				keep = 0;
			else if (strcasestr(val, "keep-alive"))
				keep = 1;
		}
		if (header_value(buf, hlen, "Content-Length", val, sizeof val))
			body = atol(val);
		if (body < 0)
			body = 0;
		if (p->mode == M_CONTINUE) {
			/* Before the body: the client waits for it to send
			 * one. */
			static const char c100[] =
			    "HTTP/1.1 100 Continue\r\n\r\n";

			log_line(log_fd, "%ld %s %s 100\n", t, method, path);
			write_all(fd, c100, sizeof c100 - 1);
		}
		/* Drop the header; read and discard the body. */
		memmove(buf, buf + hlen, len - hlen);
		len -= hlen;
		while (body > 0) {
			ssize_t n;
			if ((long)len >= body) {
				memmove(buf, buf + body, len - (size_t)body);
				len -= (size_t)body;
				body = 0;
				break;
			}
			body -= (long)len;
			len = 0;
			n = read(fd, buf, REQ_BUF);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				goto out;
			len = (size_t)n;
		}

		if (p->mode == M_RESET) {
			log_line(log_fd, "%ld %s %s rst\n", t, method, path);
			rst = 1;
			goto out;
		}
		if (p->mode == M_HANG || p->mode == M_CONTINUE) {
			if (p->mode == M_HANG)
				log_line(log_fd, "%ld %s %s hang\n", t, method,
					 path);
			/*
			 * Hold the connection until the client closes it or
			 * the phase ends (then close it: the client sees EOF).
			 */
			for (;;) {
				struct pollfd hp = {fd, POLLIN, 0};
				ssize_t n;
				if (stopping ||
				    phases[phase_at(now_ms())].mode != p->mode)
					goto out;
				if (poll(&hp, 1, 50) <= 0)
					continue;
				n = read(fd, buf, REQ_BUF);
				if (n <= 0 && !(n < 0 && errno == EINTR))
					goto out;
			}
		}
		code = p->code;
		if (p->mode == M_MIX) {
			unsigned long k;
			pthread_mutex_lock(&mu);
			k = p->served++;
			pthread_mutex_unlock(&mu);
			/* Bresenham spread: exactly pct% of the requests. */
			code = ((k + 1) * (unsigned long)p->pct / 100 >
				k * (unsigned long)p->pct / 100)
				   ? p->code
				   : 200;
		}
		log_line(log_fd, "%ld %s %s %d\n", t, method, path, code);

		if (p->mode == M_STREAM) {
			static const char chunk[] = "data: tick\n\n";
			const size_t clen = sizeof chunk - 1;
			long k;

			rlen = snprintf(resp, sizeof resp,
					"HTTP/1.1 200 OK\r\n"
					"Content-Type: text/event-stream\r\n"
					"Content-Length: %ld\r\n"
					"Connection: %s\r\n\r\n",
					strcmp(method, "HEAD")
					    ? p->chunks * (long)clen
					    : 0L,
					keep ? "keep-alive" : "close");
			if (write_all(fd, resp, (size_t)rlen) != 0)
				goto out;
			for (k = 0; strcmp(method, "HEAD") && k < p->chunks;
			     k++) {
				if (k > 0)
					sleep_ms(p->every_ms);
				if (stopping || write_all(fd, chunk, clen) != 0)
					goto out;
			}
			if (!keep) {
				shutdown(fd, SHUT_WR);
				break;
			}
			idle_since = now_ms();
			continue;
		}

		capacity_acquire();
		sleep_ms(p->lat_ms);
		capacity_release();

		plen = snprintf(payload, sizeof payload, "%d %s\n", code,
				reason(code));
		rlen = snprintf(
		    resp, sizeof resp,
		    "HTTP/1.1 %d %s\r\n"
		    "Content-Type: text/plain\r\n"
		    "Content-Length: %d\r\n"
		    "%s"
		    "Connection: %s\r\n\r\n",
		    code, reason(code), strcmp(method, "HEAD") ? plen : 0,
		    (code == 503 || code == 429) ? "Retry-After: 1\r\n" : "",
		    keep ? "keep-alive" : "close");
		if (strcmp(method, "HEAD") && code != 204 && code != 304 &&
		    rlen + plen < (int)sizeof resp) {
			memcpy(resp + rlen, payload, (size_t)plen);
			rlen += plen;
		}
		write_all(fd, resp, (size_t)rlen);
		if (!keep) {
			shutdown(fd, SHUT_WR);
			break;
		}
		idle_since = now_ms();
	}
out:
	/* Unparsed bytes prove whether a partial request ever arrived. */
	log_line(conn_log_fd, "%ld close %d %zu\n", now_ms(), peer_port, len);
	if (rst)
		close_rst(fd);
	else
		close(fd);
	free(buf);
	pthread_mutex_lock(&mu);
	active_conns--;
	pthread_mutex_unlock(&mu);
	return NULL;
}

/* Opens the listening socket on 127.0.0.1:port (0 = ephemeral). */
static int open_listener(int port, int *bound_port, int quiet)
{
	struct sockaddr_in sa;
	socklen_t sl = sizeof sa;
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	memset(&sa, 0, sizeof sa);
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
	    listen(fd, 512) < 0) {
		if (!quiet)
			fprintf(stderr,
				"upstream: bind/listen 127.0.0.1:%d: "
				"%s\n",
				port, strerror(errno));
		close(fd);
		return -1;
	}
	if (getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		*bound_port = ntohs(sa.sin_port);
	return fd;
}

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static int open_log(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		die("open %s: %s", path, strerror(errno));
	return fd;
}

static void usage(void)
{
	fputs("usage: upstream [--port N] [--port-file FILE] [--log FILE] "
	      "[--conn-log FILE]\n"
	      "                [--phases SPEC] [--capacity N] [--max-conns N]"
	      "\n                [--max-seconds S] [--verbose]\n"
	      "SPEC: DURATION_MS:MODE[:ARG...],... with MODE one of ok[:LAT], "
	      "status:CODE[:LAT],\n      slow:LAT, mix:PCT:CODE:LAT, refuse, "
	      "reset, hang,\n      stream:EVERY_MS[:CHUNKS], continue\n"
	      "--max-seconds: exit after S seconds (default 300), so a "
	      "forgotten upstream never outlives a test\n",
	      stderr);
}

int main(int argc, char **argv)
{
	int port = 0, bound = 0, lfd, i, cur = -1;
	long max_seconds = 300;
	const char *port_file = NULL;
	struct sigaction sa;

	parse_phases("0:ok:0");
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage();
			return 0;
		}
		if (!strcmp(a, "--verbose")) {
			verbose = 1;
			continue;
		}
		if (!v) {
			usage();
			die("missing value for %s", a);
		}
		i++;
		if (!strcmp(a, "--port"))
			port = (int)parse_long(v, "port", 0, 65535);
		else if (!strcmp(a, "--port-file"))
			port_file = v;
		else if (!strcmp(a, "--log"))
			log_fd = open_log(v);
		else if (!strcmp(a, "--conn-log"))
			conn_log_fd = open_log(v);
		else if (!strcmp(a, "--phases"))
			parse_phases(v);
		else if (!strcmp(a, "--capacity"))
			capacity = parse_long(v, "capacity", 0, 1000000);
		else if (!strcmp(a, "--max-conns"))
			max_conns = parse_long(v, "max-conns", 1, 100000);
		else if (!strcmp(a, "--max-seconds"))
			max_seconds = parse_long(v, "max-seconds", 1, 86400);
		else {
			usage();
			die("unknown option %s", a);
		}
	}

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	lfd = open_listener(port, &bound, 0);
	if (lfd < 0)
		return 1;
	port = bound;
	/* A timeline that starts dead: keep the port, but close it first. */
	if (phases[0].mode == M_REFUSE && nphases > 1) {
		close(lfd);
		lfd = -1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (port_file) {
		char tmp[4096];
		FILE *f;
		snprintf(tmp, sizeof tmp, "%s.tmp", port_file);
		f = fopen(tmp, "w");
		if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 ||
		    rename(tmp, port_file) != 0)
			die("cannot write %s", port_file);
	}
	printf("port=%d\n", port);
	fflush(stdout);

	while (!stopping) {
		long t = now_ms();
		int idx = phase_at(t);
		struct pollfd pfd;
		int r;

		if (t >= max_seconds * 1000) {
			if (verbose)
				fprintf(stderr, "upstream: --max-seconds "
						"reached\n");
			break;
		}
		if (idx != cur) {
			cur = idx;
			if (verbose)
				fprintf(stderr, "upstream: %ld ms: phase %d\n",
					t, idx);
		}
		if (phases[idx].mode == M_REFUSE && lfd >= 0) {
			close(lfd);
			lfd = -1;
		} else if (phases[idx].mode != M_REFUSE && lfd < 0) {
			lfd = open_listener(port, &bound, 1);
			if (lfd < 0) {
				sleep_ms(TICK_MS);
				continue;
			}
		}
		if (lfd < 0) {
			sleep_ms(TICK_MS);
			continue;
		}
		pthread_mutex_lock(&mu);
		r = active_conns >= max_conns;
		pthread_mutex_unlock(&mu);
		if (r) {
			sleep_ms(TICK_MS);
			continue;
		}
		pfd.fd = lfd;
		pfd.events = POLLIN;
		pfd.revents = 0;
		r = poll(&pfd, 1, TICK_MS);
		if (r > 0) {
			struct sockaddr_in peer;
			socklen_t pl = sizeof peer;
			int cfd = accept4(lfd, (struct sockaddr *)&peer, &pl,
					  SOCK_CLOEXEC);
			struct conn *c;
			pthread_t th;
			pthread_attr_t attr;
			int one = 1;
			if (cfd < 0)
				continue;
			log_line(conn_log_fd, "%ld accept %d\n", now_ms(),
				 ntohs(peer.sin_port));
			setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof one);
			c = malloc(sizeof *c);
			if (!c) {
				close(cfd);
				continue;
			}
			c->fd = cfd;
			c->peer_port = ntohs(peer.sin_port);
			pthread_attr_init(&attr);
			pthread_attr_setdetachstate(&attr,
						    PTHREAD_CREATE_DETACHED);
			pthread_attr_setstacksize(&attr, 256 * 1024);
			pthread_mutex_lock(&mu);
			active_conns++;
			pthread_mutex_unlock(&mu);
			if (pthread_create(&th, &attr, conn_main, c) != 0) {
				pthread_mutex_lock(&mu);
				active_conns--;
				pthread_mutex_unlock(&mu);
				close(cfd);
				free(c);
			}
			pthread_attr_destroy(&attr);
		}
	}
	if (lfd >= 0)
		close(lfd);
	/* Detached connection threads end with the process. */
	return 0;
}
