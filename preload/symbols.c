/*
 * preload/symbols.c - the real libc functions behind our wrappers, bound
 * as dlsym(RTLD_NEXT) would find them, from one pass over the objects
 * after the shim (nextsym.c, ADR-551).
 *
 * Design. The table is bound once per process: by the constructor, or
 * earlier by the first wrapped call if another library's constructor
 * (jemalloc, tcmalloc, ASan) reaches us first. That binding walks the
 * loaded objects once and binds the seven hot names (close, read, write,
 * send, recv, readv, writev: the ones a signal handler's first write
 * reaches, and io.c's hot table); every other name is bound at its first
 * call from the walk kept then, a look-up in the objects' symbol tables
 * that takes no lock and allocates nothing, so it is safe in a signal
 * handler. A three-state word (unbound, binding, bound) replaces
 * pthread_once on purpose: dlsym may call calloc, and an allocator may call
 * read, write or close while it initialises. That call re-enters a wrapper
 * on the very thread that is binding; pthread_once would deadlock there,
 * and so would any thread that waited. Instead, every call made while the
 * table is not bound - the re-entered one, or one on another thread - goes
 * straight to the raw system call with syscall(2). Those calls are never
 * tracked (the shim tracks nothing before it is initialised), so nothing
 * is lost. A lazy name has a word of its own; a call that finds another
 * binding it looks the name up for itself.
 *
 * Each symbol is stored at most once per process, and dlsym - needed only
 * for what the walk cannot settle - is called at most once per symbol,
 * never again from any path, including for symbols no object defines (a
 * failing dlsym always allocates its error message): an unbound symbol
 * uses the system call from then on. Without a kept walk (the shim loaded
 * after libc) every name is bound at once with dlsym, as dlsym at first
 * use could run in a signal handler. The fortified __read_chk/__recv_chk
 * need no real counterpart: io.c checks the buffer size itself and calls
 * __chk_fail like glibc does.
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

/* The table: each real function by the name it is bound by, its type,
 * and when it is bound: EAGER with the table, LAZY at its first call. */
#define REALS(X)                                                               \
	X(connect, connect_fn, LAZY)                                           \
	X(getsockopt, getsockopt_fn, LAZY)                                     \
	X(close, close_fn, EAGER)                                              \
	X(socket, socket_fn, LAZY)                                             \
	X(accept, accept_fn, LAZY)                                             \
	X(accept4, accept4_fn, LAZY)                                           \
	X(dup, dup_fn, LAZY)                                                   \
	X(dup2, dup2_fn, LAZY)                                                 \
	X(dup3, dup3_fn, LAZY)                                                 \
	X(send, send_fn, EAGER)                                                \
	X(recv, recv_fn, EAGER)                                                \
	X(read, read_fn, EAGER)                                                \
	X(write, write_fn, EAGER)                                              \
	X(sendto, sendto_fn, LAZY)                                             \
	X(recvfrom, recvfrom_fn, LAZY)                                         \
	X(sendmsg, sendmsg_fn, LAZY)                                           \
	X(recvmsg, recvmsg_fn, LAZY)                                           \
	X(writev, iov_fn, EAGER)                                               \
	X(readv, iov_fn, EAGER)                                                \
	X(sendmmsg, mmsg_fn, LAZY)                                             \
	X(recvmmsg, recvmmsg_fn, LAZY)                                         \
	X(sendfile, sendfile_fn, LAZY)                                         \
	X(sendfile64, sendfile_fn, LAZY)                                       \
	X(splice, splice_fn, LAZY)                                             \
	X(preadv2, iov2_fn, LAZY)                                              \
	X(pwritev2, iov2_fn, LAZY)                                             \
	X(close_range, close_range_fn, LAZY)                                   \
	X(closefrom, closefrom_fn, LAZY)                                       \
	X(fcntl, fcntl_fn, LAZY)                                               \
	X(fcntl64, fcntl_fn, LAZY)                                             \
	X(shutdown, shutdown_fn, LAZY)                                         \
	X(getaddrinfo, getaddrinfo_fn, LAZY)

/* Written once by the binding thread before `state` becomes BOUND
 * (release); read only after an acquire load of BOUND. */
static struct {
#define FIELD(name, type, when) FIELD_##when(name, type)
#define FIELD_EAGER(name, type) type name;
#define FIELD_LAZY(name, type)
	REALS(FIELD)
#undef FIELD
#undef FIELD_EAGER
#undef FIELD_LAZY
} real;

enum {
#define INDEX(name, type, when) REAL_##name,
	REALS(INDEX)
#undef INDEX
	    NREALS
};

static const char *const real_names[NREALS] = {
#define NAME(name, type, when) #name,
    REALS(NAME)
#undef NAME
};

enum { EAGER = 1, LAZY = 0 };

static const bool real_eager[NREALS] = {
#define WHEN(name, type, when) when,
    REALS(WHEN)
#undef WHEN
};

enum { UNBOUND = 0, BINDING = 1, BOUND = 2 };
static atomic_int state = UNBOUND;

/* A lazy name's real function (its `one_state` BOUND, release, after
 * the write; read after an acquire load of BOUND). */
static void *slot[NREALS];
static atomic_uchar one_state[NREALS];

/* Store @p as the real function of name @i: an eager name's typed field,
 * or a lazy name's slot. */
static void set_real(int i, void *p)
{
	/* Converting dlsym's void * to a function pointer is what POSIX
	 * requires of dlsym users; GCC defines it. */
	switch (i) {
#define SET(name, type, when) SET_##when(name, type)
#define SET_EAGER(name, type)                                                  \
	case REAL_##name:                                                      \
		real.name = (type)p;                                           \
		return;
#define SET_LAZY(name, type)
		REALS(SET)
#undef SET
#undef SET_EAGER
#undef SET_LAZY
	default:
		slot[i] = p;
		return;
	}
}

/*
 * The eager names in one pass over the objects after the shim (ADR-551):
 * the hot ones, which a signal handler's first write reaches. The lazy
 * ones are bound at their first call (bind_one), from the walk this pass
 * keeps - unless it keeps none (the shim loaded after libc): then they
 * are bound now, since dlsym at first use could run in a signal handler.
 * On a libc older than 2.34, close_range and closefrom stay unbound and
 * use the system call.
 */
static void bind_all(void)
{
	const char *names[NREALS];
	void *p[NREALS];
	int idx[NREALS];
	bool all = !rx__next_kept();
	size_t n = 0;

	for (int i = 0; i < NREALS; i++) {
		if (!real_eager[i] && !all)
			continue;
		idx[n] = i;
		names[n++] = real_names[i];
	}
	rx__next_resolve(names, p, n);
	for (size_t k = 0; k < n; k++) {
		set_real(idx[k], p[k]);
		atomic_store_explicit(&one_state[idx[k]], BOUND,
				      memory_order_relaxed);
	}
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

/*
 * Lazy name @i's real function, bound now if no call did yet. The look-up
 * reads the kept walk's tables alone, which is async-signal-safe, and has
 * no side effect: a call that finds another binding (another thread, or
 * this one re-entered from dlsym's allocation) looks up for itself
 * without storing. dlsym is called only for a name the walk cannot
 * settle, by the call that binds, once (ADR-551). NULL: the system call.
 */
static __attribute__((noinline, cold)) void *bind_one(int i)
{
	unsigned char expected = UNBOUND;
	int saved = errno;
	void *p = NULL;
	bool mine = atomic_compare_exchange_strong_explicit(
	    &one_state[i], &expected, BINDING, memory_order_acq_rel,
	    memory_order_acquire);

	if (!mine && expected == BOUND)
		return slot[i];
	if (!rx__next_lookup(real_names[i], &p) && mine)
		p = dlsym(RTLD_NEXT, real_names[i]);
	if (mine) {
		slot[i] = p;
		atomic_store_explicit(&one_state[i], BOUND,
				      memory_order_release);
	}
	errno = saved;
	return p;
}

/* Lazy name @i's real function, NULL for the system call: once bound,
 * two loads and two branches. */
static inline __attribute__((always_inline)) void *real_of(int i)
{
	if (!bound())
		return NULL;
	if (__builtin_expect(atomic_load_explicit(
				 &one_state[i], memory_order_acquire) == BOUND,
			     1))
		return slot[i];
	return bind_one(i);
}

/* lazy_<name>() - real_of with the name's type. */
#define GETTER(name, type, when) GETTER_##when(name, type)
#define GETTER_EAGER(name, type)
#define GETTER_LAZY(name, type)                                                \
	static inline type lazy_##name(void)                                   \
	{                                                                      \
		return (type)real_of(REAL_##name);                             \
	}
REALS(GETTER)
#undef GETTER
#undef GETTER_EAGER
#undef GETTER_LAZY

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

/* The hot table's starting points for connect, socket and close (hot.h,
 * ADR-634): the real function, once bound, takes their place. */
static int hot_connect(int fd, const struct sockaddr *sa, socklen_t len);
static int hot_socket(int domain, int type, int protocol);
static int close_slow(int fd);

struct rx_hot rx__hot = {sys_read,    sys_write,  sys_send,
			 sys_recv,    sys_readv,  sys_writev,
			 hot_connect, hot_socket, close_slow};

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
	PUT(close);
#undef PUT
}

int rx__real_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	connect_fn f = lazy_connect();

	if (f)
		return f(fd, sa, len);
	return (int)SYS(SYS_connect, fd, sa, len);
}

static int hot_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	connect_fn f = lazy_connect();

	if (!f)
		return (int)SYS(SYS_connect, fd, sa, len);
	/* Bound (a binding is never undone): the real one from now on. */
	__atomic_store_n(&rx__hot.connect, f, __ATOMIC_RELEASE);
	return f(fd, sa, len);
}

int rx__real_getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	getsockopt_fn f = lazy_getsockopt();

	if (f)
		return f(fd, level, name, val, len);
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

static int hot_socket(int domain, int type, int protocol)
{
	socket_fn f = lazy_socket();

	if (!f)
		return (int)SYS(SYS_socket, domain, type, protocol);
	__atomic_store_n(&rx__hot.socket, f, __ATOMIC_RELEASE);
	return f(domain, type, protocol);
}

int rx__real_socket(int domain, int type, int protocol)
{
	socket_fn f = lazy_socket();

	if (f)
		return f(domain, type, protocol);
	return (int)SYS(SYS_socket, domain, type, protocol);
}

int rx__real_accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	accept_fn f = lazy_accept();

	if (f)
		return f(fd, sa, len);
	return (int)SYS(SYS_accept4, fd, sa, len, 0);
}

int rx__real_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	accept4_fn f = lazy_accept4();

	if (f)
		return f(fd, sa, len, flags);
	return (int)SYS(SYS_accept4, fd, sa, len, flags);
}

int rx__real_dup(int fd)
{
	dup_fn f = lazy_dup();

	if (f)
		return f(fd);
	return (int)SYS(SYS_dup, fd);
}

int rx__real_dup2(int fd, int fd2)
{
	dup2_fn f = lazy_dup2();

	if (f)
		return f(fd, fd2);
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
	dup3_fn f = lazy_dup3();

	if (f)
		return f(fd, fd2, flags);
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
	sendto_fn f = lazy_sendto();

	if (f)
		return f(fd, buf, len, flags, sa, salen);
	return SYS(SYS_sendto, fd, buf, len, flags, sa, salen);
}

ssize_t rx__real_recvfrom(int fd, void *buf, size_t len, int flags,
			  struct sockaddr *sa, socklen_t *salen)
{
	recvfrom_fn f = lazy_recvfrom();

	if (f)
		return f(fd, buf, len, flags, sa, salen);
	return SYS(SYS_recvfrom, fd, buf, len, flags, sa, salen);
}

ssize_t rx__real_sendmsg(int fd, const struct msghdr *msg, int flags)
{
	sendmsg_fn f = lazy_sendmsg();

	if (f)
		return f(fd, msg, flags);
	return SYS(SYS_sendmsg, fd, msg, flags);
}

ssize_t rx__real_recvmsg(int fd, struct msghdr *msg, int flags)
{
	recvmsg_fn f = lazy_recvmsg();

	if (f)
		return f(fd, msg, flags);
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
	mmsg_fn f = lazy_sendmmsg();

	if (f)
		return f(fd, vec, n, flags);
	return (int)SYS(SYS_sendmmsg, fd, vec, n, flags);
}

int rx__real_recvmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags,
		      struct timespec *timeout)
{
	recvmmsg_fn f = lazy_recvmmsg();

	if (f)
		return f(fd, vec, n, flags, timeout);
	return (int)SYS(SYS_recvmmsg, fd, vec, n, flags, timeout);
}

ssize_t rx__real_sendfile(int out, int in, off_t *off, size_t count)
{
	sendfile_fn f = lazy_sendfile();

	if (f)
		return f(out, in, off, count);
	return SYS(SYS_sendfile, out, in, off, count);
}

ssize_t rx__real_splice(int in, off_t *in_off, int out, off_t *out_off,
			size_t len, unsigned int flags)
{
	splice_fn f = lazy_splice();

	if (f)
		return f(in, in_off, out, out_off, len, flags);
	return SYS(SYS_splice, in, in_off, out, out_off, len, flags);
}

/* preadv2 and pwritev2 take the offset as two halves (low, high); on LP64
 * the high half is 0. preadv64v2 and pwritev64v2 are the same calls. */
ssize_t rx__real_preadv2(int fd, const struct iovec *iov, int iovcnt, off_t off,
			 int flags)
{
	iov2_fn f = lazy_preadv2();

	if (f)
		return f(fd, iov, iovcnt, off, flags);
	return SYS(SYS_preadv2, fd, iov, iovcnt, off, 0, flags);
}

ssize_t rx__real_pwritev2(int fd, const struct iovec *iov, int iovcnt,
			  off_t off, int flags)
{
	iov2_fn f = lazy_pwritev2();

	if (f)
		return f(fd, iov, iovcnt, off, flags);
	return SYS(SYS_pwritev2, fd, iov, iovcnt, off, 0, flags);
}

/* off_t is 64 bits on every ABI the shim builds for (LP64): sendfile and
 * sendfile64 are the same call, bound separately only because a program
 * may name either. */
ssize_t rx__real_sendfile64(int out, int in, off_t *off, size_t count)
{
	sendfile_fn f = lazy_sendfile64();

	if (f)
		return f(out, in, off, count);
	return SYS(SYS_sendfile, out, in, off, count);
}

int rx__real_close_range(unsigned int first, unsigned int last, int flags)
{
	close_range_fn f = lazy_close_range();

	if (f)
		return f(first, last, flags);
	return (int)SYS(SYS_close_range, first, last, flags);
}

void rx__real_closefrom(int lowfd)
{
	closefrom_fn f = lazy_closefrom();

	if (f) {
		f(lowfd);
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
	fcntl_fn f = lazy_fcntl();

	if (f)
		return f(fd, cmd, arg);
	return (int)SYS(SYS_fcntl, fd, cmd, arg);
}

int rx__real_fcntl64(int fd, int cmd, long arg)
{
	fcntl_fn f = lazy_fcntl64();

	if (f)
		return f(fd, cmd, arg);
	return (int)SYS(SYS_fcntl, fd, cmd, arg);
}

int rx__real_shutdown(int fd, int how)
{
	shutdown_fn f = lazy_shutdown();

	if (f)
		return f(fd, how);
	return (int)SYS(SYS_shutdown, fd, how);
}

/* No system call resolves names: a lookup before the table is bound (from
 * inside an allocator's start-up) is told to try again, which every
 * caller of getaddrinfo must handle anyway. */
int rx__real_getaddrinfo(const char *node, const char *service,
			 const struct addrinfo *hints, struct addrinfo **res)
{
	getaddrinfo_fn f = lazy_getaddrinfo();

	if (f)
		return f(node, service, hints, res);
	return EAI_AGAIN;
}
