/*
 * blackhole.c - blocking connects with SO_SNDTIMEO to a destination that
 * never answers them, on 127.0.0.1, for tests/preload/connect_sndtimeo.sh.
 *
 * The black hole: a listener of this process with a backlog of 0 that
 * never accepts, its accept queue filled by two non-blocking connects
 * made with the raw system call (so the shim does not see them). Linux
 * then drops every further SYN to it: a connect hangs, retransmitting,
 * until its SO_SNDTIMEO runs out, and returns -1/EINPROGRESS.
 *
 * Usage: blackhole [--connects N] [--sndtimeo-ms MS]
 *                  [--made-blocking | --made-blocking-ioctl |
 *                   --made-blocking-raw]
 * --made-blocking: each socket is made with SOCK_NONBLOCK and turned
 * blocking with fcntl(F_SETFL) before its connect (ADR-543);
 * --made-blocking-ioctl: the same through ioctl(FIONBIO);
 * --made-blocking-raw: through syscall(SYS_fcntl, F_SETFL) (ADR-619).
 * Output (stdout): one line per connect, "connect <errno name or OK>
 * <ms>". Exit 0; 1 when the black hole cannot be made.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>

#include "loopback.h"

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

int main(int argc, char **argv)
{
	struct sockaddr_in a = rx_loopback(0);
	socklen_t alen = sizeof(a);
	int i, l, connects = 1, timeo_ms = 300, made_blocking = 0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--connects") == 0 && i + 1 < argc)
			connects = atoi(argv[++i]);
		else if (strcmp(argv[i], "--sndtimeo-ms") == 0 && i + 1 < argc)
			timeo_ms = atoi(argv[++i]);
		else if (strcmp(argv[i], "--made-blocking") == 0)
			made_blocking = 1;
		else if (strcmp(argv[i], "--made-blocking-ioctl") == 0)
			made_blocking = 2;
		else if (strcmp(argv[i], "--made-blocking-raw") == 0)
			made_blocking = 3;
		else
			return 2;
	}
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(l, 0) != 0 ||
	    getsockname(l, (struct sockaddr *)&a, &alen) != 0)
		return 1;
	for (i = 0; i < 2; i++) {
		int f = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);

		if (f < 0)
			return 1;
		(void)syscall(SYS_connect, f, &a, sizeof(a));
	}
	usleep(50000); /* the first filler's handshake fills the queue */
	for (i = 0; i < connects; i++) {
		struct timeval tv = {timeo_ms / 1000, (timeo_ms % 1000) * 1000};
		int s = socket(
			AF_INET,
			SOCK_STREAM | (made_blocking ? SOCK_NONBLOCK : 0), 0),
		    rc, err, off = 0;
		long t0 = now_ms();

		if (made_blocking == 1)
			fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK);
		else if (made_blocking == 2 && ioctl(s, FIONBIO, &off) != 0)
			return 1;
		else if (made_blocking == 3 &&
			 syscall(SYS_fcntl, s, F_SETFL,
				 fcntl(s, F_GETFL) & ~O_NONBLOCK) != 0)
			return 1;
		setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		rc = connect(s, (struct sockaddr *)&a, sizeof(a));
		err = errno;
		printf("connect %s %ld\n",
		       rc == 0 ? "OK" : strerrorname_np(err), now_ms() - t0);
		fflush(stdout);
		close(s);
	}
	return 0;
}
