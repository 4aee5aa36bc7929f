/*
 * passthru.c - the cheapest possible LD_PRELOAD interposer, the baseline
 * scripts/bench (section "preload") measures the shim against: read
 * (and __read_chk, which a -D_FORTIFY_SOURCE program calls for it),
 * write, send, recv, connect and close wrapped with dlsym(RTLD_NEXT) and
 * forwarded, nothing else. What the shim costs beyond this is its own
 * logic; what this costs over no preload at all is the price of any
 * interposer (a PLT hop into another object, a load of the real pointer).
 *
 * Built by scripts/bench itself: cc -O2 -shared -fPIC passthru.c -ldl.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

static ssize_t (*r_read)(int, void *, size_t);
static ssize_t (*r_read_chk)(int, void *, size_t, size_t);
static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_send)(int, const void *, size_t, int);
static ssize_t (*r_recv)(int, void *, size_t, int);
static int (*r_connect)(int, const struct sockaddr *, socklen_t);
static int (*r_close)(int);

ssize_t __read_chk(int fd, void *b, size_t n, size_t buflen);

__attribute__((constructor)) static void bind_real(void)
{
	r_read = (ssize_t(*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
	r_read_chk = (ssize_t(*)(int, void *, size_t, size_t))dlsym(
	    RTLD_NEXT, "__read_chk");
	r_write =
	    (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
	r_send = (ssize_t(*)(int, const void *, size_t, int))dlsym(RTLD_NEXT,
								   "send");
	r_recv = (ssize_t(*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
	r_connect = (int (*)(int, const struct sockaddr *, socklen_t))dlsym(
	    RTLD_NEXT, "connect");
	r_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
}

ssize_t read(int fd, void *b, size_t n)
{
	return r_read(fd, b, n);
}
ssize_t __read_chk(int fd, void *b, size_t n, size_t buflen)
{
	return r_read_chk(fd, b, n, buflen);
}
ssize_t write(int fd, const void *b, size_t n)
{
	return r_write(fd, b, n);
}
ssize_t send(int fd, const void *b, size_t n, int f)
{
	return r_send(fd, b, n, f);
}
ssize_t recv(int fd, void *b, size_t n, int f)
{
	return r_recv(fd, b, n, f);
}
int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	return r_connect(fd, sa, len);
}
int close(int fd)
{
	return r_close(fd);
}
