/*
 * sigpipe.c - a program that leaves SIGPIPE at its default action (which
 * ends it) and makes HTTP requests, for tests/preload/sigpipe_log.sh: the
 * shim's own log writes must not raise a SIGPIPE the program would see.
 *
 * Usage: sigpipe --port N [--requests R] [--blocked | --pending]
 *   --blocked  block SIGPIPE first: no SIGPIPE may be pending at the end
 *              (one the shim raised and left behind)
 *   --pending  block SIGPIPE and raise one first: it must still be
 *              pending at the end (the shim must not take the program's)
 * Each request is "GET /" with Connection: close on a new blocking
 * connection, read to EOF (a refused connect is a request made too).
 * Output (stdout): "requests=R pending=0|1". Exit 0; 2 on a usage error.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loopback.h"

int main(int argc, char **argv)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"
				  "Connection: close\r\n\r\n";
	int i, port = -1, requests = 1, done = 0;
	bool blocked = false, pending = false;
	sigset_t pipe_set, now;
	char buf[4096];

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (strcmp(argv[i], "--requests") == 0 && i + 1 < argc)
			requests = atoi(argv[++i]);
		else if (strcmp(argv[i], "--blocked") == 0)
			blocked = true;
		else if (strcmp(argv[i], "--pending") == 0)
			blocked = pending = true;
		else
			return 2;
	}
	if (port <= 0)
		return 2;
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (blocked)
		pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
	if (pending)
		raise(SIGPIPE);
	for (i = 0; i < requests; i++) {
		int fd = rx_dial(port);

		done++; /* refused by an open breaker or not */
		if (fd < 0)
			continue;
		if (write(fd, req, sizeof(req) - 1) == (ssize_t)sizeof(req) - 1)
			while (read(fd, buf, sizeof(buf)) > 0)
				;
		close(fd);
	}
	sigpending(&now);
	printf("requests=%d pending=%d\n", done, sigismember(&now, SIGPIPE));
	return 0;
}
