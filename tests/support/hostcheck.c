/*
 * hostcheck.c - "never make the host worse" checks for
 * tests/preload/hostile_host.sh (ADR-146).
 *
 * Usage: hostcheck MODE [PORT] [DEADPORT]
 *   alloc PORT DEAD  allocations made inside interposed calls, counted by
 *                    tests/support/libmalloccount (preloaded): keep-alive
 *                    requests, new connections, refused connects to DEAD
 *                    (after the breaker opens), pipe I/O, dup and close.
 *                    Prints "allocs N selftest M" (M must be 1: the counter
 *                    works).
 *   fds PORT         open fds after a guarded request: "fds N".
 *   exec N           re-executes itself N times; each image prints
 *                    "exec-fds K", which must not grow.
 *   threads PORT     threads after a guarded request: "threads N".
 *   errno PORT       errno survives every successful call and is libc's on
 *                    a failing one: prints "errno ok" or what broke.
 * Exit 0 unless a step failed outright.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback.h"

static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

/* One request and the start of its response (the upstream's responses
 * are small: one read holds them). */
static int roundtrip(int fd)
{
	char buf[1024];

	if (write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		return -1;
	return read(fd, buf, sizeof(buf)) > 0 ? 0 : -1;
}

static int count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - (strcmp(path, "/proc/self/fd") == 0); /* the DIR's own */
}

static int mode_alloc(int port, int dead)
{
	void (*start)(void) =
	    (void (*)(void))dlsym(RTLD_DEFAULT, "rx_mc_start");
	long (*stop)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "rx_mc_stop");
	int fd, p[2], i, d;
	long n, self;
	char c = 'x';
	void *volatile m;

	if (!start || !stop || pipe(p) != 0)
		return 1;
	/* Warm up outside the count: first connect, first key. */
	fd = rx_dial(port);
	if (fd < 0 || roundtrip(fd) != 0)
		return 1;
	for (i = 0; i < 6; i++) {
		d = rx_dial(dead);
		if (d >= 0)
			close(d);
	}
	start();
	for (i = 0; i < 50; i++)
		if (roundtrip(fd) != 0)
			return 1;
	for (i = 0; i < 20; i++) {
		d = rx_dial(port);
		if (d < 0 || roundtrip(d) != 0)
			return 1;
		close(d);
		d = rx_dial(dead); /* refused, by the kernel or the breaker */
		if (d >= 0)
			close(d);
		if (write(p[1], &c, 1) != 1 || read(p[0], &c, 1) != 1)
			return 1;
		d = dup(fd);
		close(d);
	}
	n = stop();
	start();
	m = malloc(16);
	self = stop();
	free(m);
	close(fd);
	printf("allocs %ld selftest %ld\n", n, self);
	return 0;
}

static int mode_errno(int port)
{
	int p[2], fd, bad = 0;
	char c = 'x', buf[512];

#define KEEP(call)                                                             \
	do {                                                                   \
		errno = 4242;                                                  \
		if ((call) < 0 || errno != 4242) {                             \
			printf("errno changed by %s: %d\n", #call, errno);     \
			bad = 1;                                               \
		}                                                              \
	} while (0)
	if (pipe(p) != 0)
		return 1;
	KEEP(write(p[1], &c, 1));
	KEEP(read(p[0], &c, 1));
	errno = 4242;
	fd = rx_dial(port);
	if (fd < 0 || errno != 4242) {
		printf("errno changed by connect: %d\n", errno);
		bad = 1;
	}
	KEEP(write(fd, req, sizeof(req) - 1));
	KEEP(read(fd, buf, sizeof(buf)));
	KEEP(send(fd, req, sizeof(req) - 1, 0));
	KEEP(recv(fd, buf, sizeof(buf), 0));
	KEEP(fcntl(fd, F_GETFL));
	KEEP(close(fd));
	KEEP(close(p[0]));
	/* Failing calls: libc's errno, not ours. */
	errno = 0;
	if (read(-1, buf, 1) != -1 || errno != EBADF) {
		printf("read(-1): errno %d\n", errno);
		bad = 1;
	}
	errno = 0;
	if (close(p[0]) != -1 || errno != EBADF) {
		printf("close twice: errno %d\n", errno);
		bad = 1;
	}
	if (!bad)
		printf("errno ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	int port = argc > 2 ? atoi(argv[2]) : 0;
	int fd;

	if (argc < 2)
		return 2;
	if (strcmp(argv[1], "alloc") == 0 && argc > 3)
		return mode_alloc(port, atoi(argv[3]));
	if (strcmp(argv[1], "errno") == 0)
		return mode_errno(port);
	if (strcmp(argv[1], "fds") == 0 || strcmp(argv[1], "threads") == 0) {
		fd = rx_dial(port);
		if (fd < 0 || roundtrip(fd) != 0)
			return 1;
		if (argv[1][0] == 'f')
			printf("fds %d\n", count_dir("/proc/self/fd") - 1);
		else
			printf("threads %d\n", count_dir("/proc/self/task"));
		close(fd);
		return 0;
	}
	if (strcmp(argv[1], "exec") == 0) {
		int left = atoi(argv[2]);
		char n[16];

		printf("exec-fds %d\n", count_dir("/proc/self/fd"));
		fflush(stdout);
		if (left <= 0)
			return 0;
		snprintf(n, sizeof(n), "%d", left - 1);
		execl("/proc/self/exe", argv[0], "exec", n, (char *)NULL);
		return 1;
	}
	return 2;
}
