/*
 * stamp.c - the floor of any guard, the second baseline scripts/bench
 * (section "preload") measures the shim against: the same calls as
 * bench/passthru.c, each wrapped with the least a guard must do - read
 * the monotonic clock before and after the forwarded call (a latency
 * sample needs both) and count the call - and nothing else: no fd
 * lookup, no policy, no lock. What the shim costs beyond this is the
 * price of its decisions; the bench prints the shim's extra cost over no
 * preload divided by this one's ("ratio to the stamp floor").
 *
 * Built by scripts/bench itself: cc -O2 -shared -fPIC stamp.c -ldl.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static ssize_t (*r_read)(int, void *, size_t);
static ssize_t (*r_read_chk)(int, void *, size_t, size_t);
static ssize_t (*r_write)(int, const void *, size_t);
static ssize_t (*r_send)(int, const void *, size_t, int);
static ssize_t (*r_recv)(int, void *, size_t, int);
static int (*r_connect)(int, const struct sockaddr *, socklen_t);
static int (*r_close)(int);

/* Calls seen, and the sum of their durations in ns (so the second clock
 * read is used, as a guard's latency sample would use it). */
static unsigned long stamps;
static unsigned long long stamp_ns;

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

/* The two clock reads around a call and the counter: the whole guard. */
#define STAMP(call)                                                            \
	do {                                                                   \
		struct timespec t0, t1;                                        \
		clock_gettime(CLOCK_MONOTONIC, &t0);                           \
		call;                                                          \
		clock_gettime(CLOCK_MONOTONIC, &t1);                           \
		__atomic_fetch_add(&stamps, 1, __ATOMIC_RELAXED);              \
		__atomic_fetch_add(                                            \
		    &stamp_ns,                                                 \
		    (unsigned long long)((t1.tv_sec - t0.tv_sec) *             \
					     1000000000LL +                    \
					 (t1.tv_nsec - t0.tv_nsec)),           \
		    __ATOMIC_RELAXED);                                         \
	} while (0)

ssize_t read(int fd, void *b, size_t n)
{
	ssize_t r;
	STAMP(r = r_read(fd, b, n));
	return r;
}
ssize_t __read_chk(int fd, void *b, size_t n, size_t buflen)
{
	ssize_t r;
	STAMP(r = r_read_chk(fd, b, n, buflen));
	return r;
}
ssize_t write(int fd, const void *b, size_t n)
{
	ssize_t r;
	STAMP(r = r_write(fd, b, n));
	return r;
}
ssize_t send(int fd, const void *b, size_t n, int f)
{
	ssize_t r;
	STAMP(r = r_send(fd, b, n, f));
	return r;
}
ssize_t recv(int fd, void *b, size_t n, int f)
{
	ssize_t r;
	STAMP(r = r_recv(fd, b, n, f));
	return r;
}
int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	int r;
	STAMP(r = r_connect(fd, sa, len));
	return r;
}
int close(int fd)
{
	int r;
	STAMP(r = r_close(fd));
	return r;
}
