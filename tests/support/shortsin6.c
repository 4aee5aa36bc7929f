/*
 * shortsin6.c - HTTP requests over connects whose AF_INET6 address is
 * given with a length the kernel accepts but the full structure's is
 * not, for tests/preload/short_sin6.sh (ADR-640).
 *
 * Each request goes on a new blocking AF_INET6 socket to HOST:PORT
 * (default ::ffff:127.0.0.1, the IPv4 test upstream reached through the
 * dual-stack socket; ::1 for an IPv6 listener), its address passed to connect
 * with --len bytes: 24 is RFC 2133's sockaddr_in6 (SIN6_LEN_RFC2133: no
 * sin6_scope_id), 28 today's. With --fastopen the socket is never connected:
 * the request goes with sendto(MSG_FASTOPEN) and the same address and length,
 * the implicit connect of TCP Fast Open.
 *
 * Usage: shortsin6 --port N [--host ::1] [--len L] [--requests R]
 *                  [--fastopen]
 * Output (stdout): one line per request, "<i> <status>" with the status
 * code of the answer, or "<i> <errno name>" of the call that failed.
 * Exit 0 whatever the outcomes; 2 on a usage error, 1 when no dual-stack
 * socket can be made (the test then skips).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef MSG_FASTOPEN
#define MSG_FASTOPEN 0x20000000
#endif

static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			  "Connection: close\r\n\r\n";

static int usage(void)
{
	fprintf(stderr, "usage: shortsin6 --port N [--host ::1] [--len L] "
			"[--requests R] [--fastopen]\n");
	return 2;
}

/* One request; prints its line. */
static void one(long i, const struct sockaddr_in6 *sa, socklen_t len,
		int fastopen)
{
	char buf[64];
	ssize_t n, got = 0;
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	const char *what = NULL;

	if (fd < 0) {
		printf("%ld %s\n", i, strerrorname_np(errno));
		return;
	}
	if (fastopen) {
		if (sendto(fd, req, sizeof(req) - 1, MSG_FASTOPEN,
			   (const struct sockaddr *)sa, len) < 0)
			what = strerrorname_np(errno);
	} else if (connect(fd, (const struct sockaddr *)sa, len) != 0 ||
		   write(fd, req, sizeof(req) - 1) < 0) {
		what = strerrorname_np(errno);
	}
	while (!what && got < 12 &&
	       (n = read(fd, buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	if (!what && got < 12)
		what = "EOF";
	if (what) {
		printf("%ld %s\n", i, what);
	} else {
		buf[got] = '\0';
		printf("%ld %.3s\n", i, buf + 9);
	}
	fflush(stdout);
	close(fd);
}

int main(int argc, char **argv)
{
	struct sockaddr_in6 sa;
	const char *host = "::ffff:127.0.0.1";
	long port = -1, len = 24, requests = 1, i;
	int fastopen = 0, fd, a;

	for (a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--fastopen")) {
			fastopen = 1;
		} else if (a + 1 < argc && !strcmp(argv[a], "--port")) {
			port = strtol(argv[++a], NULL, 10);
		} else if (a + 1 < argc && !strcmp(argv[a], "--host")) {
			host = argv[++a];
		} else if (a + 1 < argc && !strcmp(argv[a], "--len")) {
			len = strtol(argv[++a], NULL, 10);
		} else if (a + 1 < argc && !strcmp(argv[a], "--requests")) {
			requests = strtol(argv[++a], NULL, 10);
		} else {
			return usage();
		}
	}
	if (port <= 0 || port > 65535 || len < 0 || len > (long)sizeof(sa) ||
	    requests < 1 || requests > 1000)
		return usage();
	fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd < 0) {
		fprintf(stderr, "shortsin6: no AF_INET6 socket: %s\n",
			strerror(errno));
		return 1;
	}
	close(fd);
	memset(&sa, 0, sizeof(sa));
	sa.sin6_family = AF_INET6;
	sa.sin6_port = htons((uint16_t)port);
	if (strcmp(host, "::1") != 0 && strcmp(host, "::ffff:127.0.0.1") != 0)
		return usage(); /* loopback only */
	inet_pton(AF_INET6, host, &sa.sin6_addr);
	for (i = 0; i < requests; i++)
		one(i, &sa, (socklen_t)len, fastopen);
	return 0;
}
