/*
 * stress.c - threads, fork, posix_spawn and a signal handler at once, for
 * tests/preload/threads_fork.sh (ADR-146).
 *
 * Usage: stress PORT THREADS REQUESTS [child-inline]
 * THREADS threads each send REQUESTS keep-alive requests to
 * 127.0.0.1:PORT (a new connection every 100), reading each response whole
 * (Content-Length); now and then a dup replaces the connection's number,
 * or an F_DUPFD duplicate carries one request (ADR-213). When half of all
 * requests are done, the main thread
 * forks: the child runs 2 threads of REQUESTS/10 requests and exits; the
 * parent carries on and reaps it. With child-inline the child runs its
 * requests on its only thread instead (ThreadSanitizer cannot start
 * threads after a multi-threaded fork). Thread 0 also posix_spawns /bin/true
 * every 500 requests (a vfork-style child of a process with the shim's
 * state). A 1 ms SIGALRM timer runs a handler that writes to a pipe and
 * reads SO_ERROR of a guarded socket, re-entering the shim while the
 * interrupted thread may be inside it.
 * Output: "parent ok N" (responses 200 of N) and "child ok M"; exit 0 when
 * every response was a 200 and the child exited 0.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loopback.h"

extern char **environ;

static int port;
static long per_thread;
static atomic_long done, ok;
static int sigpipe_w = -1;
static atomic_int sig_fd = -1;

/* Send one request, read the whole response. Returns the status or -1. */
static int request(int fd)
{
	static const char req[] = "GET /s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	char buf[4096];
	size_t got = 0, want = 0;
	char *end;
	ssize_t n;
	size_t off = 0;

	while (off < sizeof(req) - 1) {
		n = send(fd, req + off, sizeof(req) - 1 - off, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	for (;;) {
		n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
		buf[got] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end && !want) {
			char *cl = strcasestr(buf, "Content-Length:");

			want = (size_t)(end + 4 - buf) +
			       (cl ? strtoul(cl + 15, NULL, 10) : 0);
		}
		if (want && got >= want)
			return atoi(buf + 9);
		if (got >= sizeof(buf) - 1)
			return -1;
	}
}

static void on_alarm(int sig)
{
	int saved = errno, e = 0, fd = atomic_load(&sig_fd);
	socklen_t len = sizeof(e);
	char c = 's';

	(void)sig;
	if (write(sigpipe_w, &c, 1) < 0) {
		/* Full pipe: fine. */
	}
	if (fd >= 0)
		getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len);
	errno = saved;
}

static void *worker(void *arg)
{
	long id = (long)arg, i;
	int fd = -1;

	for (i = 0; i < per_thread; i++) {
		if (fd < 0 || i % 100 == 0) {
			if (fd >= 0)
				close(fd);
			fd = rx_dial(port);
			if (fd < 0)
				continue;
			if (id == 0)
				atomic_store(&sig_fd, fd);
		}
		/* Duplicates share the call state (ADR-213): now and then a
		 * duplicate replaces the number, or carries one request. */
		if (i % 7 == 3) {
			int d = dup(fd);

			if (d >= 0) {
				if (id == 0)
					atomic_store(&sig_fd, d);
				close(fd);
				fd = d;
			}
		}
		if (i % 11 == 5) {
			int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
			int s = d >= 0 ? request(d) : -1;

			if (d >= 0)
				close(d);
			if (s == 200)
				atomic_fetch_add(&ok, 1);
			else {
				close(fd);
				fd = -1;
			}
		} else if (request(fd) == 200)
			atomic_fetch_add(&ok, 1);
		else {
			close(fd);
			fd = -1;
		}
		atomic_fetch_add(&done, 1);
		if (id == 0 && i % 500 == 250) {
			char *argv[] = {"true", NULL};
			pid_t pid;

			if (posix_spawn(&pid, "/bin/true", NULL, NULL, argv,
					environ) == 0)
				while (waitpid(pid, NULL, 0) < 0 &&
				       errno == EINTR)
					;
		}
	}
	if (id == 0)
		atomic_store(&sig_fd, -1);
	if (fd >= 0)
		close(fd);
	return NULL;
}

static long run(int threads, long requests)
{
	pthread_t t[64];
	int i;

	per_thread = requests;
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)i);
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	return threads * requests;
}

int main(int argc, char **argv)
{
	struct itimerval it = {{0, 1000}, {0, 1000}};
	int threads, p[2], i, status = 0;
	long requests, total;
	pthread_t t[64];
	pid_t child = -1;

	if (argc != 4 && argc != 5)
		return 2;
	port = atoi(argv[1]);
	threads = atoi(argv[2]);
	requests = atol(argv[3]);
	if (threads < 1 || threads > 64 || pipe(p) != 0)
		return 2;
	sigpipe_w = p[1];
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &it, NULL);

	per_thread = requests;
	total = threads * requests;
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(long)i);
	while (atomic_load(&done) < total / 2)
		usleep(1000);
	child = fork();
	if (child == 0) {
		long n;

		atomic_store(&ok, 0);
		atomic_store(&done, 0);
		if (argc == 5 && strcmp(argv[4], "child-inline") == 0) {
			per_thread = requests / 5 > 0 ? requests / 5 : 1;
			worker((void *)1L);
			n = per_thread;
		} else {
			n = run(2, requests / 10 > 0 ? requests / 10 : 1);
		}
		printf("child ok %ld of %ld\n", atomic_load(&ok), n);
		fflush(stdout);
		_exit(atomic_load(&ok) == n ? 0 : 1);
	}
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	while (child > 0 && waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	it.it_value.tv_usec = it.it_interval.tv_usec = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	printf("parent ok %ld of %ld\n", atomic_load(&ok), total);
	return atomic_load(&ok) == total && child > 0 && WIFEXITED(status) &&
		       WEXITSTATUS(status) == 0
		   ? 0
		   : 1;
}
