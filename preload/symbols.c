/*
 * preload/symbols.c - the real libc functions behind our wrappers, bound
 * lazily as dlsym(RTLD_NEXT) would, all in one pass (nextsym.c, ADR-551).
 *
 * Design. The whole table is bound in one go, exactly once per process:
 * by the constructor, or earlier by the first wrapped call if another
 * library's constructor (jemalloc, tcmalloc, ASan) reaches us first. A
 * three-state word (unbound, binding, bound) replaces pthread_once on
 * purpose: dlsym may call calloc, and an allocator may call read, write or
 * close while it initialises. That call re-enters a wrapper on the very
 * thread that is binding; pthread_once would deadlock there, and so would
 * any thread that waited. Instead, every call made while the table is not
 * bound - the re-entered one, or one on another thread - goes straight to
 * the raw system call with syscall(2). Those calls are never tracked (the
 * shim tracks nothing before it is initialised), so nothing is lost.
 *
 * Each symbol is therefore looked up at most once per process, never
 * again from any path, including for symbols no object defines (a failing
 * dlsym always allocates its error message): an unbound symbol uses the
 * system call from then on. The fortified __read_chk/__recv_chk need no
 * real counterpart: io.c checks the buffer size itself and calls __chk_fail
 * like glibc does.
 *
 * The system-call fallback differs from libc only in not being a pthread
 * cancellation point, which matters solely before start-up.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hot.h"
#include "nextsym.h"
#include "symbols.h"

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);
typedef int (*getsockopt_fn)(int, int, int, void *, socklen_t *);
typedef int (*close_fn)(int);
typedef int (*socket_fn)(int, int, int);
typedef int (*accept_fn)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_fn)(int, struct sockaddr *, socklen_t *, int);
typedef int (*dup_fn)(int);
typedef int (*dup2_fn)(int, int);
typedef int (*dup3_fn)(int, int, int);
typedef ssize_t (*send_fn)(int, const void *, size_t, int);
typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef ssize_t (*sendto_fn)(int, const void *, size_t, int,
			     const struct sockaddr *, socklen_t);
typedef ssize_t (*recvfrom_fn)(int, void *, size_t, int, struct sockaddr *,
			       socklen_t *);
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
typedef ssize_t (*recvmsg_fn)(int, struct msghdr *, int);
typedef ssize_t (*iov_fn)(int, const struct iovec *, int);
typedef int (*mmsg_fn)(int, struct mmsghdr *, unsigned int, int);
typedef int (*recvmmsg_fn)(int, struct mmsghdr *, unsigned int, int,
			   struct timespec *);
typedef ssize_t (*sendfile_fn)(int, int, off_t *, size_t);
typedef ssize_t (*splice_fn)(int, off_t *, int, off_t *, size_t, unsigned int);
typedef ssize_t (*iov2_fn)(int, const struct iovec *, int, off_t, int);
typedef int (*close_range_fn)(unsigned int, unsigned int, int);
typedef void (*closefrom_fn)(int);
typedef int (*fcntl_fn)(int, int, ...);
typedef int (*shutdown_fn)(int, int);
typedef int (*getaddrinfo_fn)(const char *, const char *,
			      const struct addrinfo *, struct addrinfo **);

/* The table: each real function, its type and the name it is bound by. */
#define REALS(X)                                                               \
	X(connect, connect_fn)                                                 \
	X(getsockopt, getsockopt_fn)                                           \
	X(close, close_fn)                                                     \
	X(socket, socket_fn)                                                   \
	X(accept, accept_fn)                                                   \
	X(accept4, accept4_fn)                                                 \
	X(dup, dup_fn)                                                         \
	X(dup2, dup2_fn)                                                       \
	X(dup3, dup3_fn)                                                       \
	X(send, send_fn)                                                       \
	X(recv, recv_fn)                                                       \
	X(read, read_fn)                                                       \
	X(write, write_fn)                                                     \
	X(sendto, sendto_fn)                                                   \
	X(recvfrom, recvfrom_fn)                                               \
	X(sendmsg, sendmsg_fn)                                                 \
	X(recvmsg, recvmsg_fn)                                                 \
	X(writev, iov_fn)                                                      \
	X(readv, iov_fn)                                                       \
	X(sendmmsg, mmsg_fn)                                                   \
	X(recvmmsg, recvmmsg_fn)                                               \
	X(sendfile, sendfile_fn)                                               \
	X(sendfile64, sendfile_fn)                                             \
	X(splice, splice_fn)                                                   \
	X(preadv2, iov2_fn)                                                    \
	X(pwritev2, iov2_fn)                                                   \
	X(close_range, close_range_fn)                                         \
	X(closefrom, closefrom_fn)                                             \
	X(fcntl, fcntl_fn)                                                     \
	X(fcntl64, fcntl_fn)                                                   \
	X(shutdown, shutdown_fn)                                               \
	X(getaddrinfo, getaddrinfo_fn)

/* Written once by the binding thread before `state` becomes BOUND
 * (release); read only after an acquire load of BOUND. */
static struct {
#define FIELD(name, type) type name;
	REALS(FIELD)
#undef FIELD
} real;

enum {
#define INDEX(name, type) REAL_##name,
	REALS(INDEX)
#undef INDEX
	NREALS
};

static const char *const real_names[NREALS] = {
#define NAME(name, type) #name,
    REALS(NAME)
#undef NAME
};

enum { UNBOUND = 0, BINDING = 1, BOUND = 2 };
static atomic_int state = UNBOUND;

/*
 * Every name in one pass over the objects after the shim (ADR-551). On a
 * libc older than 2.34, close_range and closefrom stay unbound and use
 * the system call.
 */
static void bind_all(void)
{
	void *p[NREALS];

	rx__next_resolve(real_names, p, NREALS);
	/* Converting dlsym's void * to a function pointer is what POSIX
	 * requires of dlsym users; GCC defines it. */
#define SET(name, type) real.name = (type)p[REAL_##name];
	REALS(SET)
#undef SET
}

/*
 * Bind the table unless another call is binding it. Out of line: it runs
 * once per process, and keeping it out of bound() keeps every wrapper's
 * fast path free of its frame.
 */
static void publish_hot(void);

static __attribute__((noinline, cold)) bool bind_slow(int s)
{
	int expected = UNBOUND;
	int saved;

	if (s == BINDING || !atomic_compare_exchange_strong_explicit(
				&state, &expected, BINDING,
				memory_order_acq_rel, memory_order_acquire))
		return false;
	/* dlsym may set errno (a failed lookup): never let it leak. */
	saved = errno;
	bind_all();
	publish_hot();
	errno = saved;
	atomic_store_explicit(&state, BOUND, memory_order_release);
	return true;
}

/*
 * Returns true when the table is bound (possibly by this call), false
 * when binding is in progress here or elsewhere and the caller must use
 * the system call. Once bound: one load and one branch.
 */
static inline __attribute__((always_inline)) bool bound(void)
{
	int s = atomic_load_explicit(&state, memory_order_acquire);

	if (__builtin_expect(s == BOUND, 1))
		return true;
	return bind_slow(s);
}

void *rx__symbol_real(const char *name, void *ours,
		      const char *const *sonames, size_t n)
{
	void *f = dlsym(RTLD_NEXT, name);
	size_t i;

	if (f && f != ours)
		return f;
	for (i = 0; i < n; i++) {
		void *lib = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);

		if (!lib)
			continue;
		f = dlsym(lib, name); /* the reference is kept */
		if (f && f != ours)
			return f;
	}
	return NULL;
}

void rx__symbols_resolve(void)
{
	(void)bound();
}

/* The fallback when there is no real function (yet, or ever). */
#define SYS(...) syscall(__VA_ARGS__)

/*
 * The hot functions (every read and write of the process goes through
 * them) are split: the fast path - bound, and the symbol found - is a
 * load, a compare and a tail call, with no frame; anything else goes to an
 * out-of-line slow path that binds or falls back to the system call.
 */
#define FAST(name)                                                             \
	__builtin_expect(atomic_load_explicit(&state, memory_order_acquire) == \
				 BOUND &&                                      \
			     real.name != NULL,                                \
			 1)
#define RX_SLOW __attribute__((noinline, cold))

/* The hot table's starting point: the system calls (hot.h). */
static ssize_t sys_read(int fd, void *buf, size_t len)
{
	return SYS(SYS_read, fd, buf, len);
}

static ssize_t sys_write(int fd, const void *buf, size_t len)
{
	return SYS(SYS_write, fd, buf, len);
}

static ssize_t sys_send(int fd, const void *buf, size_t len, int flags)
{
	return SYS(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

static ssize_t sys_recv(int fd, void *buf, size_t len, int flags)
{
	return SYS(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

static ssize_t sys_readv(int fd, const struct iovec *iov, int iovcnt)
{
	return SYS(SYS_readv, fd, iov, iovcnt);
}

static ssize_t sys_writev(int fd, const struct iovec *iov, int iovcnt)
{
	return SYS(SYS_writev, fd, iov, iovcnt);
}

struct rx_hot rx__hot = {sys_read, sys_write, sys_send,
			 sys_recv, sys_readv, sys_writev};

/* Swap the real functions into the hot table (bind_slow, once). */
static void publish_hot(void)
{
#define PUT(name)                                                              \
	if (real.name)                                                         \
	__atomic_store_n(&rx__hot.name, real.name, __ATOMIC_RELEASE)
	PUT(read);
	PUT(write);
	PUT(send);
	PUT(recv);
	PUT(readv);
	PUT(writev);
#undef PUT
}

int rx__real_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (bound() && real.connect)
		return real.connect(fd, sa, len);
	return (int)SYS(SYS_connect, fd, sa, len);
}

int rx__real_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	if (bound() && real.getsockopt)
		return real.getsockopt(fd, level, name, val, len);
	return (int)SYS(SYS_getsockopt, fd, level, name, val, len);
}

static RX_SLOW int close_slow(int fd)
{
	if (bound() && real.close)
		return real.close(fd);
	return (int)SYS(SYS_close, fd);
}

int rx__real_close(int fd)
{
	if (FAST(close))
		return real.close(fd);
	return close_slow(fd);
}

int rx__real_socket(int domain, int type, int protocol)
{
	if (bound() && real.socket)
		return real.socket(domain, type, protocol);
	return (int)SYS(SYS_socket, domain, type, protocol);
}

int rx__real_accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	if (bound() && real.accept)
		return real.accept(fd, sa, len);
	return (int)SYS(SYS_accept4, fd, sa, len, 0);
}

int rx__real_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	if (bound() && real.accept4)
		return real.accept4(fd, sa, len, flags);
	return (int)SYS(SYS_accept4, fd, sa, len, flags);
}

int rx__real_dup(int fd)
{
	if (bound() && real.dup)
		return real.dup(fd);
	return (int)SYS(SYS_dup, fd);
}

int rx__real_dup2(int fd, int fd2)
{
	if (bound() && real.dup2)
		return real.dup2(fd, fd2);
#ifdef SYS_dup2
	return (int)SYS(SYS_dup2, fd, fd2);
#else
	/* dup3 refuses fd == fd2, where dup2 checks fd and returns it. */
	if (fd == fd2)
		return SYS(SYS_fcntl, fd, F_GETFD) < 0 ? -1 : fd2;
	return (int)SYS(SYS_dup3, fd, fd2, 0);
#endif
}

int rx__real_dup3(int fd, int fd2, int flags)
{
	if (bound() && real.dup3)
		return real.dup3(fd, fd2, flags);
	return (int)SYS(SYS_dup3, fd, fd2, flags);
}

static RX_SLOW ssize_t send_slow(int fd, const void *buf, size_t len, int flags)
{
	if (bound() && real.send)
		return real.send(fd, buf, len, flags);
	return (ssize_t)SYS(SYS_sendto, fd, buf, len, flags, NULL, 0);
}

ssize_t rx__real_send(int fd, const void *buf, size_t len, int flags)
{
	if (FAST(send))
		return real.send(fd, buf, len, flags);
	return send_slow(fd, buf, len, flags);
}

static RX_SLOW ssize_t recv_slow(int fd, void *buf, size_t len, int flags)
{
	if (bound() && real.recv)
		return real.recv(fd, buf, len, flags);
	return (ssize_t)SYS(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

ssize_t rx__real_recv(int fd, void *buf, size_t len, int flags)
{
	if (FAST(recv))
		return real.recv(fd, buf, len, flags);
	return recv_slow(fd, buf, len, flags);
}

static RX_SLOW ssize_t read_slow(int fd, void *buf, size_t len)
{
	if (bound() && real.read)
		return real.read(fd, buf, len);
	return (ssize_t)SYS(SYS_read, fd, buf, len);
}

ssize_t rx__real_read(int fd, void *buf, size_t len)
{
	if (FAST(read))
		return real.read(fd, buf, len);
	return read_slow(fd, buf, len);
}

static RX_SLOW ssize_t write_slow(int fd, const void *buf, size_t len)
{
	if (bound() && real.write)
		return real.write(fd, buf, len);
	return (ssize_t)SYS(SYS_write, fd, buf, len);
}

ssize_t rx__real_write(int fd, const void *buf, size_t len)
{
	if (FAST(write))
		return real.write(fd, buf, len);
	return write_slow(fd, buf, len);
}

ssize_t rx__real_sendto(int fd, const void *buf, size_t len, int flags,
			const struct sockaddr *sa, socklen_t salen)
{
	if (bound() && real.sendto)
		return real.sendto(fd, buf, len, flags, sa, salen);
	return SYS(SYS_sendto, fd, buf, len, flags, sa, salen);
}

ssize_t rx__real_recvfrom(int fd, void *buf, size_t len, int flags,
			  struct sockaddr *sa, socklen_t *salen)
{
	if (bound() && real.recvfrom)
		return real.recvfrom(fd, buf, len, flags, sa, salen);
	return SYS(SYS_recvfrom, fd, buf, len, flags, sa, salen);
}

ssize_t rx__real_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	if (bound() && real.sendmsg)
		return real.sendmsg(fd, msg, flags);
	return SYS(SYS_sendmsg, fd, msg, flags);
}

ssize_t rx__real_recvmsg(int fd, struct msghdr *msg, int flags)
{
	if (bound() && real.recvmsg)
		return real.recvmsg(fd, msg, flags);
	return SYS(SYS_recvmsg, fd, msg, flags);
}

static RX_SLOW ssize_t writev_slow(int fd, const struct iovec *iov, int iovcnt)
{
	if (bound() && real.writev)
		return real.writev(fd, iov, iovcnt);
	return (ssize_t)SYS(SYS_writev, fd, iov, iovcnt);
}

ssize_t rx__real_writev(int fd, const struct iovec *iov, int iovcnt)
{
	if (FAST(writev))
		return real.writev(fd, iov, iovcnt);
	return writev_slow(fd, iov, iovcnt);
}

static RX_SLOW ssize_t readv_slow(int fd, const struct iovec *iov, int iovcnt)
{
	if (bound() && real.readv)
		return real.readv(fd, iov, iovcnt);
	return (ssize_t)SYS(SYS_readv, fd, iov, iovcnt);
}

ssize_t rx__real_readv(int fd, const struct iovec *iov, int iovcnt)
{
	if (FAST(readv))
		return real.readv(fd, iov, iovcnt);
	return readv_slow(fd, iov, iovcnt);
}

int rx__real_sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags)
{
	if (bound() && real.sendmmsg)
		return real.sendmmsg(fd, vec, n, flags);
	return (int)SYS(SYS_sendmmsg, fd, vec, n, flags);
}

int rx__real_recvmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags,
		      struct timespec *timeout)
{
	if (bound() && real.recvmmsg)
		return real.recvmmsg(fd, vec, n, flags, timeout);
	return (int)SYS(SYS_recvmmsg, fd, vec, n, flags, timeout);
}

ssize_t rx__real_sendfile(int out, int in, off_t *off, size_t count)
{
	if (bound() && real.sendfile)
		return real.sendfile(out, in, off, count);
	return SYS(SYS_sendfile, out, in, off, count);
}

ssize_t rx__real_splice(int in, off_t *in_off, int out, off_t *out_off,
			size_t len, unsigned int flags)
{
	if (bound() && real.splice)
		return real.splice(in, in_off, out, out_off, len, flags);
	return SYS(SYS_splice, in, in_off, out, out_off, len, flags);
}

/* preadv2 and pwritev2 take the offset as two halves (low, high); on LP64
 * the high half is 0. preadv64v2 and pwritev64v2 are the same calls. */
ssize_t rx__real_preadv2(int fd, const struct iovec *iov, int iovcnt, off_t off,
			 int flags)
{
	if (bound() && real.preadv2)
		return real.preadv2(fd, iov, iovcnt, off, flags);
	return SYS(SYS_preadv2, fd, iov, iovcnt, off, 0, flags);
}

ssize_t rx__real_pwritev2(int fd, const struct iovec *iov, int iovcnt,
			  off_t off, int flags)
{
	if (bound() && real.pwritev2)
		return real.pwritev2(fd, iov, iovcnt, off, flags);
	return SYS(SYS_pwritev2, fd, iov, iovcnt, off, 0, flags);
}

/* off_t is 64 bits on every ABI the shim builds for (LP64): sendfile and
 * sendfile64 are the same call, bound separately only because a program
 * may name either. */
ssize_t rx__real_sendfile64(int out, int in, off_t *off, size_t count)
{
	if (bound() && real.sendfile64)
		return real.sendfile64(out, in, off, count);
	return SYS(SYS_sendfile, out, in, off, count);
}

int rx__real_close_range(unsigned int first, unsigned int last, int flags)
{
	if (bound() && real.close_range)
		return real.close_range(first, last, flags);
	return (int)SYS(SYS_close_range, first, last, flags);
}

void rx__real_closefrom(int lowfd)
{
	if (bound() && real.closefrom) {
		real.closefrom(lowfd);
		return;
	}
	/* glibc falls back to scanning /proc/self/fd when close_range is
	 * missing; before start-up the system call alone will do. */
	(void)SYS(SYS_close_range, (unsigned)lowfd, ~0U, 0);
}

/* fcntl's third argument is an int or a pointer depending on the command;
 * io.c reads it with the right type and hands it here as a long, which the
 * system call takes either way. */
int rx__real_fcntl(int fd, int cmd, long arg)
{
	if (bound() && real.fcntl)
		return real.fcntl(fd, cmd, arg);
	return (int)SYS(SYS_fcntl, fd, cmd, arg);
}

int rx__real_fcntl64(int fd, int cmd, long arg)
{
	if (bound() && real.fcntl64)
		return real.fcntl64(fd, cmd, arg);
	return (int)SYS(SYS_fcntl, fd, cmd, arg);
}

int rx__real_shutdown(int fd, int how)
{
	if (bound() && real.shutdown)
		return real.shutdown(fd, how);
	return (int)SYS(SYS_shutdown, fd, how);
}

/* No system call resolves names: a lookup before the table is bound (from
 * inside an allocator's start-up) is told to try again, which every
 * caller of getaddrinfo must handle anyway. */
int rx__real_getaddrinfo(const char *node, const char *service,
			 const struct addrinfo *hints, struct addrinfo **res)
{
	if (bound() && real.getaddrinfo)
		return real.getaddrinfo(node, service, hints, res);
	return EAI_AGAIN;
}
