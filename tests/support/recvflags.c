/*
 * recvflags.c - one HTTP request per receive flag that changes what a
 * receive writes, or what it reads, for tests/preload/recv_flags.sh.
 *
 * For every mode a new blocking connection to 127.0.0.1:PORT carries one
 * "GET /<mode>" request (Connection: close) and the response is received
 * the mode's way until EOF: MSG_TRUNC into NULL or into a buffer that
 * holds a stale "HTTP/1.1 200" (the kernel discards the bytes, so the
 * buffer must not be read), through recv, recvfrom, recvmsg and recvmmsg,
 * with MSG_WAITALL too; MSG_PEEK before the read; MSG_WAITALL; an
 * error-queue read (MSG_ERRQUEUE) before the answer, empty (EAGAIN at
 * once on a blocking socket) or holding a zero-copy notification (0 bytes
 * and control data); an out-of-band read with no urgent data (EINVAL);
 * and recvmsg with control data (SO_TIMESTAMP) in a buffer that holds a
 * stale status line. Before each mode, a marker line "recvflags mode=<m>"
 * goes to stderr with one write(2), so a test that sends the shim's log
 * there too can pair each mode with the settle lines logged for it.
 *
 * Usage: recvflags --port N [--only MODE]
 * Output (stdout): "<mode> <bytes received>", one line per mode (a mode
 * the kernel cannot do prints "<mode> skip"). Exit 0 when every mode got
 * a response, 1 otherwise, 2 on a usage error.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "loopback.h"

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

static const char stale[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

enum mode {
	M_TRUNC_NULL,
	M_TRUNC_STALE,
	M_TRUNC_RECVFROM,
	M_TRUNC_RECVMSG,
	M_TRUNC_RECVMMSG,
	M_TRUNC_WAITALL,
	M_PEEK,
	M_PEEK_TRUNC,
	M_WAITALL,
	M_ERRQUEUE_EMPTY,
	M_ERRQUEUE_ZEROCOPY,
	M_OOB,
	M_CMSG
};

static const struct {
	const char *name;
	enum mode m;
} modes[] = {
    {"trunc-null", M_TRUNC_NULL},
    {"trunc-stale", M_TRUNC_STALE},
    {"trunc-recvfrom", M_TRUNC_RECVFROM},
    {"trunc-recvmsg", M_TRUNC_RECVMSG},
    {"trunc-recvmmsg", M_TRUNC_RECVMMSG},
    {"trunc-waitall", M_TRUNC_WAITALL},
    {"peek", M_PEEK},
    {"peek-trunc", M_PEEK_TRUNC},
    {"waitall", M_WAITALL},
    {"errqueue-empty", M_ERRQUEUE_EMPTY},
    {"errqueue-zerocopy", M_ERRQUEUE_ZEROCOPY},
    {"oob", M_OOB},
    {"cmsg", M_CMSG},
};

static void marker(const char *name)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "recvflags mode=%s\n", name);

	if (write(2, line, (size_t)n) < 0)
		exit(1);
}

/* A buffer that holds a stale status line, as a reused buffer does. */
static void make_stale(char *buf, size_t len)
{
	memset(buf, 'x', len);
	memcpy(buf, stale, sizeof(stale) - 1);
}

/* Read the error queue until a notification comes (zero-copy). 0 when
 * one came: recvmsg returned 0 bytes with control data. */
static int await_notification(int fd)
{
	char ctl[256], data[64];
	struct iovec iov = {.iov_base = data, .iov_len = sizeof(data)};
	struct msghdr msg;
	struct pollfd p = {.fd = fd, .events = 0};
	int i;

	for (i = 0; i < 200; i++) {
		memset(&msg, 0, sizeof(msg));
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = ctl;
		msg.msg_controllen = sizeof(ctl);
		if (recvmsg(fd, &msg, MSG_ERRQUEUE) >= 0)
			return msg.msg_controllen > 0 ? 0 : -1;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		(void)poll(&p, 1, 10); /* POLLERR is always reported */
	}
	return -1;
}

/* One receive of mode @m into @buf (@len bytes). Returns the result. */
static ssize_t recv_once(int fd, enum mode m, char *buf, size_t len)
{
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	char ctl[256];
	struct msghdr msg;
	struct mmsghdr mm;
	int n;

	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	switch (m) {
	case M_TRUNC_NULL:
		return recv(fd, NULL, len, MSG_TRUNC);
	case M_TRUNC_STALE:
		make_stale(buf, len);
		return recv(fd, buf, len, MSG_TRUNC);
	case M_TRUNC_RECVFROM:
		return recvfrom(fd, NULL, len, MSG_TRUNC, NULL, NULL);
	case M_TRUNC_RECVMSG:
		make_stale(buf, len);
		return recvmsg(fd, &msg, MSG_TRUNC);
	case M_TRUNC_RECVMMSG:
		make_stale(buf, len);
		memset(&mm, 0, sizeof(mm));
		mm.msg_hdr = msg;
		n = recvmmsg(fd, &mm, 1, MSG_TRUNC, NULL);
		return n <= 0 ? n : (ssize_t)mm.msg_len;
	case M_TRUNC_WAITALL:
		return recv(fd, NULL, len, MSG_TRUNC | MSG_WAITALL);
	case M_PEEK:
	case M_PEEK_TRUNC:
	case M_ERRQUEUE_EMPTY:
	case M_ERRQUEUE_ZEROCOPY:
	case M_OOB:
		return read(fd, buf, len);
	case M_WAITALL:
		return recv(fd, buf, len, MSG_WAITALL);
	case M_CMSG:
		make_stale(ctl, sizeof(ctl));
		msg.msg_control = ctl;
		msg.msg_controllen = sizeof(ctl);
		return recvmsg(fd, &msg, 0);
	}
	return -1;
}

static int run(const char *name, enum mode m, int port)
{
	char req[256], buf[65536];
	size_t got = 0;
	ssize_t r;
	int fd, n, on = 1;

	marker(name);
	fd = rx_dial(port);
	if (fd < 0) {
		printf("%s connect:%s\n", name, strerror(errno));
		return -1;
	}
	n = snprintf(req, sizeof(req),
		     "GET /%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Connection: close\r\n\r\n",
		     name);
	if (m == M_ERRQUEUE_ZEROCOPY &&
	    setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &on, sizeof(on)) != 0) {
		printf("%s skip\n", name);
		close(fd);
		return 0;
	}
	if (m == M_CMSG)
		(void)setsockopt(fd, SOL_SOCKET, SO_TIMESTAMP, &on, sizeof(on));
	if (send(fd, req, (size_t)n,
		 m == M_ERRQUEUE_ZEROCOPY ? MSG_ZEROCOPY : 0) != n) {
		printf("%s send:%s\n", name, strerror(errno));
		close(fd);
		return -1;
	}
	switch (m) {
	case M_PEEK:
		/* Waits for the answer; the read below takes it. */
		if (recv(fd, buf, 16, MSG_PEEK) <= 0)
			goto fail;
		break;
	case M_PEEK_TRUNC:
		if (recv(fd, NULL, 16, MSG_PEEK | MSG_TRUNC) <= 0)
			goto fail;
		break;
	case M_ERRQUEUE_EMPTY: {
		struct msghdr msg;

		memset(&msg, 0, sizeof(msg));
		if (recvmsg(fd, &msg, MSG_ERRQUEUE) >= 0 || errno != EAGAIN)
			goto fail;
		break;
	}
	case M_ERRQUEUE_ZEROCOPY:
		if (await_notification(fd) != 0)
			goto fail;
		break;
	case M_OOB:
		if (recv(fd, buf, 1, MSG_OOB) >= 0 || errno != EINVAL)
			goto fail;
		break;
	default:
		break;
	}
	for (;;) {
		r = recv_once(fd, m, buf, sizeof(buf));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	printf("%s %zu\n", name, got);
	fflush(stdout);
	close(fd);
	return got > 0 ? 0 : -1;
fail:
	printf("%s setup:%s\n", name, strerror(errno));
	close(fd);
	return -1;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int i, port = -1, bad = 0;

	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			only = argv[++i];
		else
			return 2;
	}
	if (port <= 0)
		return 2;
	for (i = 0; i < (int)(sizeof(modes) / sizeof(modes[0])); i++)
		if (!only || strcmp(only, modes[i].name) == 0)
			bad |= run(modes[i].name, modes[i].m, port) != 0;
	return bad ? 1 : 0;
}
