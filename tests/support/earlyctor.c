/*
 * earlyctor.c - a library whose constructor makes an HTTP request, for
 * tests/preload/early_ctor.sh: another library's constructor may call
 * wrapped functions before the shim's own constructor ran (ADR-146).
 *
 * When RX_EARLY_PORT is set, the constructor connects to 127.0.0.1 on that
 * port, sends one request, reads the status line and prints
 * "early status=N errno-kept=1" on stdout with write(2).
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

__attribute__((constructor)) static void early(void)
{
	static const char req[] = "GET /early HTTP/1.1\r\nHost: x\r\n"
				  "Connection: close\r\n\r\n";
	const char *p = getenv("RX_EARLY_PORT");
	struct sockaddr_in sin;
	char buf[256], line[64];
	int fd, status = 0, kept;
	ssize_t n;

	if (!p)
		return;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)atoi(p));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	errno = 777;
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1)) {
		kept = errno == 777;
		n = read(fd, buf, sizeof(buf) - 1);
		if (n > 12) {
			buf[n] = '\0';
			status = atoi(buf + 9);
		}
	} else {
		kept = 0;
	}
	if (fd >= 0)
		close(fd);
	n = snprintf(line, sizeof(line), "early status=%d errno-kept=%d\n",
		     status, kept);
	if (write(1, line, (size_t)n) < 0)
		_exit(3);
}
