/*
 * preload/symbols.h - the real libc functions behind the wrappers
 * (symbols.c), bound lazily.
 *
 * Each rx__real_X behaves like libc's X, found as dlsym(RTLD_NEXT) would
 * find it (nextsym.h, ADR-551). The first call of any of them (or the
 * constructor) walks the objects after the shim once and binds the hot
 * names; each other name is bound from that walk at its first call,
 * without a lock or an allocation. While that is in progress - on this thread (dlsym's calloc reached
 * an allocator that called a wrapped function) or on another - calls go to
 * the raw system call instead of waiting. A symbol dlsym cannot find stays
 * unbound and its calls use the system call for good. Thread-safe and
 * async-signal-safe once resolved; O(1). Internal code calls these, never
 * the interposed names (which would re-enter the shim's own wrapper).
 * The hottest six also have a direct table for io.c's fast path (hot.h).
 */
#ifndef RESILIX_PRELOAD_SYMBOLS_H
#define RESILIX_PRELOAD_SYMBOLS_H

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/*
 * RX_SELF(name) - declare self_<name>, a hidden alias of the shim's own
 * exported definition of @name, for rx__symbol_real's @ours: taking an
 * exported function's address goes through the GOT, which the dynamic
 * linker fills at load time by looking the name up - a cost every process
 * would pay; an alias is addressed PC-relative, with no lookup.
 */
#define RX_SELF(name)                                                          \
	extern __typeof__(name) self_##name                                    \
	    __attribute__((alias(#name), visibility("hidden")))

/*
 * rx__symbol_real - the real @name of a library the shim wraps, never
 * ours (@ours: our own definition, a hidden alias): dlsym(RTLD_NEXT)
 * first; then, for a library a plugin dlopen'ed RTLD_LOCAL (RTLD_NEXT
 * searches only the global scope), dlsym in each of @sonames[0..@n) that
 * dlopen(RTLD_NOLOAD) finds loaded. The reference RTLD_NOLOAD takes is
 * kept, so the library stays while the caller points into it. Returns
 * NULL when no loaded object defines it. May set errno (dlsym's); not
 * async-signal-safe (dlsym, dlopen); thread-safe.
 */
void *rx__symbol_real(const char *name, void *ours,
		      const char *const *sonames, size_t n);

/* rx__symbols_resolve - bind the table now (constructor). Idempotent. */
void rx__symbols_resolve(void);

int rx__real_connect(int fd, const struct sockaddr *sa, socklen_t len);
int rx__real_getsockopt(int fd, int level, int name, void *val, socklen_t *len);
int rx__real_close(int fd);
int rx__real_socket(int domain, int type, int protocol);
int rx__real_accept(int fd, struct sockaddr *sa, socklen_t *len);
int rx__real_accept4(int fd, struct sockaddr *sa, socklen_t *len, int flags);
int rx__real_dup(int fd);
int rx__real_dup2(int fd, int fd2);
int rx__real_dup3(int fd, int fd2, int flags);
ssize_t rx__real_send(int fd, const void *buf, size_t len, int flags);
ssize_t rx__real_recv(int fd, void *buf, size_t len, int flags);
ssize_t rx__real_read(int fd, void *buf, size_t len);
ssize_t rx__real_write(int fd, const void *buf, size_t len);
ssize_t rx__real_sendto(int fd, const void *buf, size_t len, int flags,
			const struct sockaddr *sa, socklen_t salen);
ssize_t rx__real_recvfrom(int fd, void *buf, size_t len, int flags,
			  struct sockaddr *sa, socklen_t *salen);
ssize_t rx__real_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t rx__real_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t rx__real_writev(int fd, const struct iovec *iov, int iovcnt);
ssize_t rx__real_readv(int fd, const struct iovec *iov, int iovcnt);
int rx__real_sendmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags);
int rx__real_recvmmsg(int fd, struct mmsghdr *vec, unsigned int n, int flags,
		      struct timespec *timeout);
ssize_t rx__real_sendfile(int out, int in, off_t *off, size_t count);
ssize_t rx__real_sendfile64(int out, int in, off_t *off, size_t count);
ssize_t rx__real_splice(int in, off_t *in_off, int out, off_t *out_off,
			size_t len, unsigned int flags);
ssize_t rx__real_preadv2(int fd, const struct iovec *iov, int iovcnt, off_t off,
			 int flags);
ssize_t rx__real_pwritev2(int fd, const struct iovec *iov, int iovcnt,
			  off_t off, int flags);
int rx__real_close_range(unsigned int first, unsigned int last, int flags);
void rx__real_closefrom(int lowfd);
/* @arg: the third argument, already read with the type @cmd takes (int
 * or pointer) and widened to long; 0 for commands that take none. */
int rx__real_fcntl(int fd, int cmd, long arg);
int rx__real_fcntl64(int fd, int cmd, long arg);
int rx__real_shutdown(int fd, int how);
/* Returns EAI_AGAIN while the table is being bound (a resolver called from
 * an allocator's initialisation) or when libc has no getaddrinfo. */
int rx__real_getaddrinfo(const char *node, const char *service,
			 const struct addrinfo *hints, struct addrinfo **res);

#endif
