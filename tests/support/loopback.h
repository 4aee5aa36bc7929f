/*
 * tests/support/loopback.h - how the test programs reach the test
 * upstream: TCP to 127.0.0.1, never another address.
 */
#ifndef RESILIX_TESTS_LOOPBACK_H
#define RESILIX_TESTS_LOOPBACK_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* 127.0.0.1:@port. */
static inline struct sockaddr_in rx_loopback(int port)
{
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return sin;
}

/* A blocking TCP socket connected to 127.0.0.1:@port (connect retried
 * on EINTR), or -1 with errno set and nothing left open. */
static inline int rx_dial(int port)
{
	struct sockaddr_in sin = rx_loopback(port);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int e;

	if (fd < 0)
		return -1;
	while (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		if (errno == EINTR)
			continue;
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

#endif
