/*
 * dlshim.c - calls the shim's own connect/write/read, found with dlopen and
 * dlsym, for tests/preload/secure_exec.sh: in a secure-execution process
 * (setuid) the shim must pass everything through (ADR-146).
 *
 * Usage: dlshim SHIM.so PORT N
 * Runs N requests on new connections to 127.0.0.1:PORT through the shim's
 * functions; prints "refused R of N" (connects refused with ECONNREFUSED).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n"
				  "Connection: close\r\n\r\n";
	int (*c)(int, const struct sockaddr *, socklen_t);
	ssize_t (*w)(int, const void *, size_t);
	ssize_t (*r)(int, void *, size_t);
	int (*cl)(int);
	struct sockaddr_in sin;
	void *h;
	int i, n, refused = 0;
	char buf[256];

	if (argc != 4)
		return 2;
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 3;
	c = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(h,
								    "connect");
	w = (ssize_t(*)(int, const void *, size_t))dlsym(h, "write");
	r = (ssize_t(*)(int, void *, size_t))dlsym(h, "read");
	cl = (int (*)(int))dlsym(h, "close");
	if (!c || !w || !r || !cl)
		return 3;
	n = atoi(argv[3]);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)atoi(argv[2]));
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	for (i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (c(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
			refused += errno == ECONNREFUSED;
		} else if (w(fd, req, sizeof(req) - 1) > 0) {
			while (r(fd, buf, sizeof(buf)) > 0)
				;
		}
		cl(fd);
	}
	printf("refused %d of %d\n", refused, n);
	return 0;
}
