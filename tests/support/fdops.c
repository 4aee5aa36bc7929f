/*
 * fdops.c - fd-lifecycle scenarios for tests/preload/fd_lifecycle.sh: what
 * the shim must do when numbers are closed, reused, duplicated or shut
 * down behind a call's back.
 *
 * Usage: fdops MODE PORT [PORT2]
 *   reuse A B      request to A, close before the answer (abandonment);
 *                  the next socket gets the same number and calls B: its
 *                  call must be B's, answered.
 *   dup A          F_DUPFD_CLOEXEC and dup of a tracked socket, closed
 *                  again; dup2 of a file over a second tracked socket;
 *                  then a request on the first: answered.
 *   share A        duplicates share the call (ADR-213): a request written
 *                  through a dup and read through the original; the
 *                  original closed and the next request made on the dup
 *                  alone; a request written on one number, that number
 *                  closed while the answer is awaited, the answer read
 *                  through an F_DUPFD duplicate; finally a dup2'd number
 *                  whose request is abandoned by closing its last number.
 *   closerange A   a request in flight, then close_range(3, ~0U, 0) (the
 *                  shim's log file included); a new socket on the same
 *                  number calls A again: answered.
 *   closefrom A    the same with closefrom(3).
 *   shutdown A     a request, shutdown(SHUT_RDWR), read EOF: our own
 *                  doing, not the upstream's.
 *   fcntl          the variadic fcntl: int, pointer and no argument.
 *   dupstale A     a request written through stdio (fdopen) on a socket
 *                  that has a dup; fclose closes the number unseen, open
 *                  hands it to a file that is read; the answer is then
 *                  read through the dup: the file's bytes are not it.
 *   eisconn A      connect() again before each of 6 requests on one
 *                  kept-alive connection (ADR-216): prints, per request,
 *                  what connect and write returned and the status.
 *   nbabort A      3 non-blocking connects to a port nobody listens on,
 *                  each learnt through poll and SO_ERROR, then connect()
 *                  called again, as some event loops do (ADR-216).
 *   dupfail A      dup2 and dup3 onto a tracked socket that fail without
 *                  closing it (a source number that is not open, flags
 *                  dup3 does not know), and dup2 of a closed number onto
 *                  stderr; a request on the socket after each: its call
 *                  is still judged, and its line still reaches stderr.
 * Prints "step ..." lines on stderr with one write() before each step (the
 * test pairs them with the shim's log), results on stdout. Exit 0 when
 * every step did what it should without the shim's help, 1 otherwise.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback.h"

static void step(const char *what)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "fdops step=%s\n", what);

	if (write(2, line, (size_t)n) < 0)
		exit(1);
}

/* A connection to 127.0.0.1:@port, or exit. */
static int dial(int port)
{
	int fd = rx_dial(port);

	if (fd < 0) {
		perror("connect");
		exit(1);
	}
	return fd;
}

/* "ok" or the errno's name for a -1 result. */
static const char *outcome(int rc)
{
	if (rc >= 0)
		return "ok";
	return errno == EISCONN	       ? "EISCONN"
	       : errno == ECONNREFUSED ? "ECONNREFUSED"
	       : errno == ECONNABORTED ? "ECONNABORTED"
	       : errno == EINPROGRESS  ? "EINPROGRESS"
				       : "other";
}

static void request(int fd)
{
	static const char req[] = "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1)) {
		perror("write");
		exit(1);
	}
}

/* Read the status line's code of one response. */
static int status(int fd)
{
	char buf[512];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	if (n < 12)
		return 0;
	buf[n] = '\0';
	return atoi(buf + 9);
}

int main(int argc, char **argv)
{
	int a, b, fd, fd2, d, s;

	if (argc < 2)
		return 2;
	a = argc > 2 ? atoi(argv[2]) : 0;
	b = argc > 3 ? atoi(argv[3]) : 0;
	if (strcmp(argv[1], "reuse") == 0) {
		step("request-a");
		fd = dial(a);
		request(fd);
		close(fd);
		step("request-b");
		fd2 = dial(b);
		request(fd2);
		s = status(fd2);
		printf("reuse same_number=%d status=%d\n", fd == fd2, s);
		return s == 200 ? 0 : 1;
	}
	if (strcmp(argv[1], "dup") == 0) {
		step("dups");
		fd = dial(a);
		d = fcntl(fd, F_DUPFD_CLOEXEC, 40);
		if (d < 40)
			return 1;
		close(d);
		d = dup(fd);
		close(d);
		fd2 = dial(a);
		request(fd2);
		d = open("/dev/null", O_RDONLY | O_CLOEXEC);
		step("dup2-over-tracked");
		if (dup2(d, fd2) != fd2)
			return 1;
		close(d);
		close(fd2);
		step("request");
		request(fd);
		s = status(fd);
		printf("dup status=%d\n", s);
		close(fd);
		return s == 200 ? 0 : 1;
	}
	if (strcmp(argv[1], "share") == 0) {
		int ok = 1;

		step("write-dup-read-original");
		fd = dial(a);
		d = dup(fd);
		request(d);
		ok &= status(fd) == 200;
		step("original-closed");
		close(fd);
		request(d);
		ok &= status(d) == 200;
		step("closed-in-flight");
		request(d);
		fd2 = fcntl(d, F_DUPFD_CLOEXEC, 40);
		close(d);
		ok &= fd2 >= 40 && status(fd2) == 200;
		step("last-number-closed");
		if (dup2(fd2, 50) != 50)
			return 1;
		close(fd2);
		request(50);
		close(50);
		printf("share ok=%d\n", ok);
		return ok ? 0 : 1;
	}
	if (strcmp(argv[1], "dupstale") == 0) {
		char junk[64];
		FILE *out;

		step("dupstale");
		fd = dial(a);
		d = dup(fd);
		out = fdopen(fd, "w");
		if (d < 0 || !out)
			return 1;
		fputs("GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", out);
		fclose(out); /* closes fd inside libc: unseen */
		fd2 = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
		if (fd2 != fd || read(fd2, junk, sizeof(junk)) <= 0)
			return 1;
		close(fd2);
		s = status(d);
		close(d);
		printf("dupstale same_number=%d status=%d\n", fd2 == fd, s);
		return 0;
	}
	if (strcmp(argv[1], "eisconn") == 0) {
		struct sockaddr_in sin = rx_loopback(a);
		static const char req[] =
		    "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
		int i, rc;

		fd = dial(a);
		for (i = 0; i < 6; i++) {
			const char *c, *w;

			rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
			c = outcome(rc);
			rc = (int)write(fd, req, sizeof(req) - 1);
			w = outcome(rc);
			printf("request %d connect=%s write=%s status=%d\n", i,
			       c, w, rc > 0 ? status(fd) : 0);
		}
		close(fd);
		return 0;
	}
	if (strcmp(argv[1], "nbabort") == 0) {
		struct sockaddr_in sin = rx_loopback(a);
		int i, e, rc;
		socklen_t el;

		for (i = 0; i < 3; i++) {
			struct pollfd p;
			const char *first, *again;

			fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
			rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
			first = outcome(rc);
			p.fd = fd;
			p.events = POLLOUT;
			p.revents = 0;
			poll(&p, 1, 2000);
			e = 0;
			el = sizeof(e);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el);
			rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
			again = outcome(rc);
			printf("attempt %d connect=%s so_error=%s again=%s\n",
			       i, first,
			       e == ECONNREFUSED ? "ECONNREFUSED" : "other",
			       again);
			close(fd);
		}
		return 0;
	}
	if (strcmp(argv[1], "dupfail") == 0) {
		int ok = 1;

		fd = dial(a);
		d = dup(fd); /* a number that is then not open */
		close(d);
		step("dup2-closed-source");
		errno = 0;
		ok &= dup2(d, fd) == -1 && errno == EBADF;
		request(fd);
		ok &= status(fd) == 500;
		step("dup3-bad-flags");
		errno = 0;
		ok &= dup3(0, fd, 0x40000000) == -1 && errno == EINVAL;
		request(fd);
		ok &= status(fd) == 500;
		step("dup2-closed-onto-stderr");
		errno = 0;
		ok &= dup2(d, 2) == -1 && errno == EBADF;
		request(fd);
		ok &= status(fd) == 500;
		close(fd);
		printf("dupfail ok=%d\n", ok);
		return ok ? 0 : 1;
	}
	if (strcmp(argv[1], "closerange") == 0 ||
	    strcmp(argv[1], "closefrom") == 0) {
		step("in-flight");
		fd = dial(a);
		request(fd);
		step("close-all");
		if (argv[1][5] == 'r') {
			if (close_range(3, ~0U, 0) != 0)
				return 1;
		} else {
			closefrom(3);
		}
		if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
			return 1;
		step("request");
		fd2 = dial(a);
		request(fd2);
		s = status(fd2);
		printf("%s same_number=%d status=%d\n", argv[1], fd == fd2, s);
		return s == 200 ? 0 : 1;
	}
	if (strcmp(argv[1], "shutdown") == 0) {
		step("shutdown");
		fd = dial(a);
		request(fd);
		shutdown(fd, SHUT_RDWR);
		s = status(fd);
		close(fd);
		printf("shutdown status=%d\n", s);
		return 0;
	}
	if (strcmp(argv[1], "fcntl") == 0) {
		struct flock fl;
		int fl0;

		fd = open("/dev/null", O_RDWR);
		fl0 = fcntl(fd, F_GETFL);
		if (fcntl(fd, F_SETFL, fl0 | O_NONBLOCK) != 0 ||
		    !(fcntl(fd, F_GETFL) & O_NONBLOCK))
			return 1;
		d = fcntl64(fd, F_DUPFD, 77);
		if (d < 77)
			return 1;
		fd2 = open("/proc/self/exe", O_RDONLY);
		memset(&fl, 0, sizeof(fl));
		fl.l_type = F_RDLCK;
		fl.l_whence = SEEK_SET;
		if (fcntl(fd2, F_GETLK, &fl) != 0)
			return 1;
		/* A bad fd: -1/EBADF, as without the shim. */
		errno = 0;
		if (fcntl(-1, F_GETFD) != -1 || errno != EBADF)
			return 1;
		printf("fcntl ok dup=%d unlocked=%d\n", d >= 77,
		       fl.l_type == F_UNLCK);
		return 0;
	}
	return 2;
}
