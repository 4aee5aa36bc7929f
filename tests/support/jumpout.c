/*
 * jumpout.c - the alarm() + siglongjmp timeout of old C daemons, out of a
 * wrapped call, for tests/preload/jump_timeout.sh (ADR-226).
 *
 * Usage: jumpout read HANG_PORT BAD_PORT
 *   A request to HANG_PORT (an upstream that never answers) is timed out
 *   by a SIGALRM handler that siglongjmp()s out of the blocked read. Then
 *   8 requests to BAD_PORT, a new connection each; one line per request:
 *   "<i> <status>" or "<i> <errno name>".
 * Usage: jumpout wait PORT
 *   A thread holds PORT's only limiter slot with a slow request; main's
 *   connect, queued for the slot, is timed out by the same jump. When the
 *   thread's request ends, main connects again, prints "<rc> <errno
 *   name|OK> <ms>" and makes one request: a place the jump left behind
 *   would make the connect wait or be refused, and a thread the shim
 *   stopped guarding would settle no call.
 * Usage: jumpout storm PORT | jumpout handler PORT
 *   2000 requests under a 300 us SIGALRM. storm: the handler siglongjmps
 *   out of the request under way, wherever it is - inside the shim's
 *   critical sections too. handler: the handler setjmp/longjmps for itself
 *   and then connects. Prints how many requests were answered 200.
 */
#define _GNU_SOURCE /* strerrorname_np */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "loopback.h"

static sigjmp_buf back;
static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
static int port;
static volatile int holding;

static void on_alarm(int sig)
{
	(void)sig;
	siglongjmp(back, 1);
}

/* Arm a one-shot SIGALRM in 300 ms whose handler jumps to `back`. */
static void arm(void)
{
	struct itimerval it = {{0, 0}, {0, 300000}};
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
}

static void *hold(void *arg)
{
	char buf[256];
	int fd = rx_dial(port);

	(void)arg;
	__atomic_store_n(&holding, 1, __ATOMIC_RELEASE);
	if (fd >= 0 && write(fd, req, sizeof(req) - 1) > 0 &&
	    read(fd, buf, sizeof(buf)) < 0) {
		/* answered or failed: the slot is free again either way */
	}
	__atomic_store_n(&holding, 2, __ATOMIC_RELEASE);
	return NULL;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

static int read_mode(int hang, int bad)
{
	volatile int fd = rx_dial(hang);
	char buf[256];
	int i;

	if (fd < 0 || write(fd, req, sizeof(req) - 1) < 0)
		return 1;
	if (sigsetjmp(back, 1) == 0) {
		arm();
		if (read(fd, buf, sizeof(buf)) >= 0)
			return 1; /* the upstream was to hang */
	}
	close(fd);
	for (i = 0; i < 8; i++) {
		int c = rx_dial(bad);
		ssize_t n;

		if (c < 0) {
			printf("%d %s\n", i, strerrorname_np(errno));
			continue;
		}
		n = write(c, req, sizeof(req) - 1) < 0
			? -1
			: read(c, buf, sizeof(buf) - 1);
		if (n > 12)
			printf("%d %.3s\n", i, buf + 9);
		else
			printf("%d %s\n", i,
			       n < 0 ? strerrorname_np(errno) : "EOF");
		close(c);
	}
	return 0;
}

static int wait_mode(void)
{
	struct sockaddr_in sin = rx_loopback(port);
	struct timespec t0;
	pthread_t t;
	volatile int fd;
	int rc, i;

	if (pthread_create(&t, NULL, hold, NULL) != 0)
		return 1;
	for (i = 0; i < 500 && !__atomic_load_n(&holding, __ATOMIC_ACQUIRE);
	     i++)
		usleep(10000);
	usleep(50000);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (sigsetjmp(back, 1) == 0) {
		arm();
		connect(fd, (struct sockaddr *)&sin, sizeof(sin));
		return 1; /* the connect was to wait past the alarm */
	}
	close(fd);
	pthread_join(t, NULL);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	printf("%d %s %.0f\n", rc, rc == 0 ? "OK" : strerrorname_np(errno),
	       ms_since(&t0));
	fflush(stdout);
	/* One request on it, so the shim, if it guards the thread, settles
	 * a call (a debug line says so). */
	if (rc == 0 && write(fd, req, sizeof(req) - 1) > 0) {
		char buf[256];

		if (read(fd, buf, sizeof(buf)) < 0)
			return 1;
	}
	return 0;
}

/* storm: a 300 us timer whose handler siglongjmps out of whatever request
 * is under way, shim critical sections included; 2000 requests. */
static volatile sig_atomic_t armed;

static void on_storm(int sig)
{
	(void)sig;
	if (armed) {
		armed = 0;
		siglongjmp(back, 1);
	}
}

/* handler: a handler that uses setjmp/longjmp for itself, then connects. */
static void on_tick(int sig)
{
	struct sockaddr_in sin = rx_loopback(port);
	int e = errno, s;
	jmp_buf b;

	(void)sig;
	if (!setjmp(b))
		longjmp(b, 1);
	s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (s >= 0) {
		connect(s, (struct sockaddr *)&sin, sizeof(sin));
		close(s);
	}
	errno = e;
}

static int tick_mode(bool storm)
{
	struct itimerval it = {{0, 300}, {0, 300}};
	struct sigaction sa;
	volatile int ok = 0, i;
	char buf[256];

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = storm ? on_storm : on_tick;
	sa.sa_flags = storm ? 0 : SA_RESTART;
	sigaction(SIGALRM, &sa, NULL);
	setitimer(ITIMER_REAL, &it, NULL);
	for (i = 0; i < 2000; i++) {
		struct sockaddr_in sin = rx_loopback(port);
		static volatile int fd = -1;

		if (storm && sigsetjmp(back, 1)) {
			if (fd >= 0)
				close(fd);
			fd = -1;
			continue;
		}
		fd = socket(AF_INET, SOCK_STREAM, 0);
		armed = 1;
		if (fd >= 0 &&
		    connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
		    write(fd, req, sizeof(req) - 1) > 0 &&
		    read(fd, buf, sizeof(buf)) > 12 &&
		    memcmp(buf + 9, "200", 3) == 0)
			ok++;
		armed = 0;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	setitimer(ITIMER_REAL, &(struct itimerval){{0, 0}, {0, 0}}, NULL);
	printf("%d\n", ok);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "read") == 0)
		return read_mode(atoi(argv[2]), atoi(argv[3]));
	if (argc == 3 && strcmp(argv[1], "wait") == 0) {
		port = atoi(argv[2]);
		return wait_mode();
	}
	if (argc == 3 && (strcmp(argv[1], "storm") == 0 ||
			  strcmp(argv[1], "handler") == 0)) {
		port = atoi(argv[2]);
		return tick_mode(strcmp(argv[1], "storm") == 0);
	}
	fprintf(stderr, "usage: jumpout read HANG_PORT BAD_PORT | "
			"jumpout wait PORT\n");
	return 2;
}
