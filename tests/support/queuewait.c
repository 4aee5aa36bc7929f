/*
 * queuewait.c - a connect that waits for a limiter slot, bounded by the
 * program's own deadline, for tests/preload/limiter_wait_deadline.sh
 * (ADR-223).
 *
 * Usage: queuewait PORT MODE
 * A thread makes one request to 127.0.0.1:PORT and waits for its answer
 * (the upstream answers slowly), so it holds the key's only slot. Once
 * that thread is connected, main connects a second socket, bounded by
 * MODE:
 *   sndtimeo        SO_SNDTIMEO of 200 ms on the socket
 *   alarm           SIGALRM every 200 ms, handler without SA_RESTART
 *   alarm-restart   SIGALRM every 200 ms, handler with SA_RESTART
 *   alarm-mixed     alarm-restart, and a SIGUSR1 handler without it
 *   write-alarm     alarm, on the first write of a kept-alive
 *                   connection's second request instead of a connect
 * (every 200 ms, not once: a signal that lands before the wait starts,
 * on a loaded machine, interrupts nothing, as it would not interrupt the
 * real connect either)
 *   fionbio         none, but the socket made non-blocking with
 *                   ioctl(FIONBIO), which the shim does not see as it
 *                   sees fcntl: the call must not wait (ADR-619)
 *   write-fionbio   fionbio, on the first write of a kept-alive
 *                   connection's second request
 *   child-nonblock  none, but a forked child sets O_NONBLOCK on the
 *                   socket (the open file both processes share), which
 *                   this process's shim never sees: the call must not
 *                   wait either
 *   none            nothing
 * and prints "<rc> <errno name|OK> <elapsed ms> <alarms>".
 */
#define _GNU_SOURCE /* strerrorname_np */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "loopback.h"

static int port;
static volatile sig_atomic_t alarms;
static volatile int holding; /* the thread's connect returned */

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void *hold(void *arg)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	char buf[256];
	int fd = rx_dial(port);

	(void)arg;
	__atomic_store_n(&holding, 1, __ATOMIC_RELEASE);
	if (fd >= 0 && write(fd, req, sizeof(req) - 1) > 0 &&
	    read(fd, buf, sizeof(buf)) < 0) {
		/* The answer, or an error: either way the slot is held until
		 * then. */
	}
	return NULL;
}

static double ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) * 1e3 +
	       (double)(t.tv_nsec - t0->tv_nsec) / 1e6;
}

/* Bound the next call as @mode says (see the top of this file). */
static void arm(int fd, const char *mode)
{
	struct sigaction sa;
	struct itimerval it = {{0, 200000}, {0, 200000}};
	struct timeval tv = {0, 200000};

	if (strcmp(mode, "sndtimeo") == 0) {
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		return;
	}
	if (strcmp(mode, "fionbio") == 0) {
		int on = 1;

		if (ioctl(fd, FIONBIO, &on) != 0)
			_exit(1);
		return;
	}
	if (strcmp(mode, "child-nonblock") == 0) {
		pid_t pid = fork();
		int st;

		if (pid == 0)
			_exit(fcntl(fd, F_SETFL, O_NONBLOCK) == 0 ? 0 : 1);
		if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0)
			_exit(1);
		return;
	}
	if (strcmp(mode, "none") == 0)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = strcmp(mode, "alarm-restart") == 0 ||
			      strcmp(mode, "alarm-mixed") == 0
			  ? SA_RESTART
			  : 0;
	sigaction(SIGALRM, &sa, NULL);
	if (strcmp(mode, "alarm-mixed") == 0) {
		/* Another handler, without SA_RESTART, that never fires. */
		sa.sa_flags = 0;
		sigaction(SIGUSR1, &sa, NULL);
	}
	setitimer(ITIMER_REAL, &it, NULL);
}

int main(int argc, char **argv)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	struct sockaddr_in sin;
	struct timespec t0;
	pthread_t t;
	const char *mode;
	char buf[256];
	bool write_mode;
	int fd = -1, rc, e;

	if (argc != 3) {
		fprintf(stderr, "usage: queuewait PORT sndtimeo|alarm|"
				"alarm-restart|alarm-mixed|write-alarm|fionbio|"
				"write-fionbio|child-nonblock|none\n");
		return 2;
	}
	port = atoi(argv[1]);
	mode = argv[2];
	write_mode = strncmp(mode, "write-", 6) == 0;
	if (write_mode) {
		/* A kept-alive connection with one answered request: its
		 * next request is a new call, admitted at its first write. */
		mode += 6;
		fd = rx_dial(port);
		if (fd < 0 || write(fd, req, sizeof(req) - 1) < 0 ||
		    read(fd, buf, sizeof(buf)) <= 0)
			return 1;
	}
	sin = rx_loopback(port);
	if (pthread_create(&t, NULL, hold, NULL) != 0)
		return 1;
	for (int i = 0; i < 500 && !__atomic_load_n(&holding, __ATOMIC_ACQUIRE);
	     i++)
		usleep(10000);
	usleep(50000); /* its request on the way */
	if (!write_mode)
		fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return 1;
	arm(fd, mode);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (write_mode)
		rc = write(fd, req, sizeof(req) - 1) < 0 ? -1 : 0;
	else
		rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	e = errno;
	setitimer(ITIMER_REAL, &(struct itimerval){{0, 0}, {0, 0}}, NULL);
	printf("%d %s %.0f %d\n", rc, rc == 0 ? "OK" : strerrorname_np(e),
	       ms_since(&t0), (int)alarms);
	fflush(stdout);
	_exit(0);
}
