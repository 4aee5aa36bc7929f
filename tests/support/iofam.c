/*
 * iofam.c - one HTTP request through each I/O family the shim wraps, for
 * tests/preload/io_families.sh.
 *
 * For every family a new connection to 127.0.0.1:PORT carries one
 * "GET /<family>" request, sent with the family's sending call, and the
 * whole response is read with its receiving call until EOF (the request
 * says Connection: close). Before each family, a marker line
 * "iofam family=<name>" is written to stderr with one write(2), so a test
 * that sends the shim's log to stderr too can pair each family with the
 * settle line the shim logged for it.
 *
 * Usage: iofam --port N [--only NAME]
 * Output (stdout): "<family> <status> <response bytes> <fnv1a of them>",
 * one line per family, identical with and without the shim. Exit 0 when
 * every family got a response, 1 otherwise, 2 on a usage error.
 *
 * splice-blocking (only with --only) splices the answer out of the socket
 * while it has not come yet, so the shim cannot peek it first.
 *
 * The reserved names glibc exports (__connect, __send, __write, __read,
 * __close, __fcntl) are called directly, as a program linked against them
 * would.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

int __connect(int fd, const struct sockaddr *sa, socklen_t len);
ssize_t __send(int fd, const void *buf, size_t len, int flags);
ssize_t __write(int fd, const void *buf, size_t len);
ssize_t __read(int fd, void *buf, size_t len);
int __close(int fd);
int __fcntl(int fd, int cmd, ...);

static int port = -1;

enum snd {
	S_WRITE,
	S_SEND,
	S_SENDTO,
	S_SENDMSG,
	S_WRITEV,
	S_SENDMMSG,
	S_SENDFILE,
	S_SENDFILE64,
	S___SEND,
	S___WRITE,
	S_PWRITEV2,
	S_SPLICE
};
enum rcv {
	R_READ,
	R_RECV,
	R_RECVFROM,
	R_RECVMSG,
	R_READV,
	R_RECVMMSG,
	R___READ,
	R_PREADV2,
	R_SPLICE, /* into a pipe, once the socket is readable (a relay) */
	R_SPLICE_BLOCKING /* into a pipe, blocking until the answer comes */
};

static const struct family {
	const char *name;
	enum snd s;
	enum rcv r;
	int how; /* 0 plain; 1 __connect/__close; 2 via fcntl dup; 3 only
		    when named with --only */
} families[] = {
    {"write-read", S_WRITE, R_READ, 0},
    {"send-recv", S_SEND, R_RECV, 0},
    {"sendto-recvfrom", S_SENDTO, R_RECVFROM, 0},
    {"sendmsg-recvmsg", S_SENDMSG, R_RECVMSG, 0},
    {"writev-readv", S_WRITEV, R_READV, 0},
    {"sendmmsg-recvmmsg", S_SENDMMSG, R_RECVMMSG, 0},
    {"sendfile-read", S_SENDFILE, R_READ, 0},
    {"sendfile64-recv", S_SENDFILE64, R_RECV, 0},
    {"__send-__read", S___SEND, R___READ, 1},
    {"__write-recv", S___WRITE, R_RECV, 1},
    {"pwritev2-preadv2", S_PWRITEV2, R_PREADV2, 0},
    {"splice-splice", S_SPLICE, R_SPLICE, 0},
    {"splice-blocking", S_WRITE, R_SPLICE_BLOCKING, 3},
};

static void marker(const char *name)
{
	char line[128];
	int n = snprintf(line, sizeof(line), "iofam family=%s\n", name);

	if (write(2, line, (size_t)n) < 0)
		exit(1);
}

/* Move @len bytes with splice through a pipe: from @req into socket
 * @out (@in < 0), or from socket @in into @buf (@out < 0). */
static ssize_t spliced(int in, int out, char *buf, size_t len)
{
	int p[2];
	ssize_t n = -1;

	if (pipe(p) != 0)
		return -1;
	if (in < 0) {
		if (write(p[1], buf, len) == (ssize_t)len)
			n = splice(p[0], NULL, out, NULL, len, 0);
	} else {
		n = splice(in, NULL, p[1], NULL, len, 0);
		if (n > 0)
			n = read(p[0], buf, (size_t)n);
	}
	close(p[0]);
	close(p[1]);
	return n;
}

static ssize_t do_send(int fd, enum snd how, const char *req, size_t len)
{
	struct iovec iov[2];
	struct msghdr msg;
	struct mmsghdr mm;
	off_t off = 0;
	int mfd;
	ssize_t n;

	memset(&msg, 0, sizeof(msg));
	iov[0].iov_base = (void *)req;
	iov[0].iov_len = len / 2;
	iov[1].iov_base = (void *)(req + len / 2);
	iov[1].iov_len = len - len / 2;
	switch (how) {
	case S_WRITE:
		return write(fd, req, len);
	case S_SEND:
		return send(fd, req, len, 0);
	case S_SENDTO:
		return sendto(fd, req, len, 0, NULL, 0);
	case S_SENDMSG:
		msg.msg_iov = iov;
		msg.msg_iovlen = 2;
		return sendmsg(fd, &msg, 0);
	case S_WRITEV:
		return writev(fd, iov, 2);
	case S_SENDMMSG:
		memset(&mm, 0, sizeof(mm));
		mm.msg_hdr.msg_iov = iov;
		mm.msg_hdr.msg_iovlen = 2;
		if (sendmmsg(fd, &mm, 1, 0) != 1)
			return -1;
		return (ssize_t)mm.msg_len;
	case S_SENDFILE:
	case S_SENDFILE64:
		mfd = memfd_create("iofam", MFD_CLOEXEC);
		if (mfd < 0 || write(mfd, req, len) != (ssize_t)len)
			return -1;
		if (how == S_SENDFILE)
			n = sendfile(fd, mfd, &off, len);
		else
			n = sendfile64(fd, mfd, (off64_t *)&off, len);
		close(mfd);
		return n;
	case S___SEND:
		return __send(fd, req, len, 0);
	case S___WRITE:
		return __write(fd, req, len);
	case S_PWRITEV2:
		return pwritev2(fd, iov, 2, -1, 0);
	case S_SPLICE:
		return spliced(-1, fd, (char *)req, len);
	}
	return -1;
}

static ssize_t do_recv(int fd, enum rcv how, char *buf, size_t len)
{
	struct iovec iov[2];
	struct msghdr msg;
	struct mmsghdr mm;
	struct pollfd pfd;
	int n;

	memset(&msg, 0, sizeof(msg));
	/* Small first piece: the status line arrives split over two. */
	iov[0].iov_base = buf;
	iov[0].iov_len = len < 5 ? len : 5;
	iov[1].iov_base = buf + iov[0].iov_len;
	iov[1].iov_len = len - iov[0].iov_len;
	switch (how) {
	case R_READ:
		return read(fd, buf, len);
	case R_RECV:
		return recv(fd, buf, len, 0);
	case R_RECVFROM:
		return recvfrom(fd, buf, len, 0, NULL, NULL);
	case R_RECVMSG:
		msg.msg_iov = iov;
		msg.msg_iovlen = 2;
		return recvmsg(fd, &msg, 0);
	case R_READV:
		return readv(fd, iov, 2);
	case R_RECVMMSG:
		memset(&mm, 0, sizeof(mm));
		mm.msg_hdr.msg_iov = iov;
		mm.msg_hdr.msg_iovlen = 2;
		n = recvmmsg(fd, &mm, 1, 0, NULL);
		if (n < 0)
			return -1;
		return n == 0 ? 0 : (ssize_t)mm.msg_len;
	case R___READ:
		return __read(fd, buf, len);
	case R_PREADV2:
		return preadv2(fd, iov, 2, -1, 0);
	case R_SPLICE:
		pfd.fd = fd;
		pfd.events = POLLIN;
		if (poll(&pfd, 1, 10000) != 1)
			return -1;
		return spliced(fd, -1, buf, len);
	case R_SPLICE_BLOCKING:
		return spliced(fd, -1, buf, len);
	}
	return -1;
}

static int run(const struct family *f)
{
	struct sockaddr_in sin;
	char req[256], resp[8192];
	size_t got = 0;
	uint32_t hash = 2166136261u;
	int fd, rc, status = 0, n;
	ssize_t r;

	marker(f->name);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((uint16_t)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (f->how == 1)
		rc = __connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	else
		rc = connect(fd, (struct sockaddr *)&sin, sizeof(sin));
	if (rc != 0) {
		printf("%s 0 0 %s\n", f->name, strerror(errno));
		close(fd);
		return -1;
	}
	n = snprintf(req, sizeof(req),
		     "GET /%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Connection: close\r\n\r\n",
		     f->name);
	if (do_send(fd, f->s, req, (size_t)n) != n) {
		printf("%s 0 0 send:%s\n", f->name, strerror(errno));
		close(fd);
		return -1;
	}
	for (;;) {
		r = do_recv(fd, f->r, resp + got, sizeof(resp) - 1 - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		if (got >= sizeof(resp) - 1)
			break;
	}
	resp[got] = '\0';
	for (size_t i = 0; i < got; i++)
		hash = (hash ^ (uint8_t)resp[i]) * 16777619u;
	if (got > 12 && strncmp(resp, "HTTP/1.", 7) == 0)
		status = atoi(resp + 9);
	printf("%s %d %zu %08x\n", f->name, status, got, hash);
	fflush(stdout);
	if (f->how == 1)
		__close(fd);
	else
		close(fd);
	return status > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	const char *only = NULL;
	int i, bad = 0;

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
	/* fcntl through the reserved name, with an int argument. */
	if (__fcntl(1, F_GETFD) < 0)
		return 1;
	for (i = 0; i < (int)(sizeof(families) / sizeof(families[0])); i++)
		if (only ? strcmp(only, families[i].name) == 0
			 : families[i].how != 3)
			bad |= run(&families[i]) != 0;
	return bad ? 1 : 0;
}
