/*
 * exitmid.c - a program that calls exit() while its threads are in the
 * middle of calls, for tests/preload/metrics_file_safety.sh: the metrics
 * writer must leave no temporary file behind (ADR-215).
 *
 * Usage: exitmid PORT MICROSECONDS
 * Four threads make requests to 127.0.0.1:PORT, a new connection each,
 * without end; main calls exit(0) after MICROSECONDS.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loopback.h"

static int port;

static void *worker(void *arg)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
	char buf[256];

	(void)arg;
	for (;;) {
		int fd = rx_dial(port);

		if (fd >= 0 && write(fd, req, sizeof(req) - 1) > 0 &&
		    read(fd, buf, sizeof(buf)) < 0) {
			/* An error ends this call; the next one starts. */
		}
		if (fd >= 0)
			close(fd);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;
	int i;

	if (argc != 3)
		return 2;
	port = atoi(argv[1]);
	for (i = 0; i < 4; i++)
		pthread_create(&t, NULL, worker, NULL);
	usleep((useconds_t)atoi(argv[2]));
	exit(0);
}
