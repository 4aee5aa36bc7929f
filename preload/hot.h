/*
 * preload/hot.h - the real functions of the hottest wrappers, for io.c's
 * fast path (ADR-146).
 *
 * Every read and write of the host process goes through the shim, almost
 * all of them on fds it does not track. For those, io.c calls the real
 * function through this table directly: one load and an indirect tail
 * call, instead of rx__real_X's "is the table bound?" check. The table is
 * never NULL: it starts out pointing at system-call fallbacks (symbols.c)
 * and symbols.c swaps in the real functions, with atomic stores, when it
 * binds. Readers load the pointers with relaxed atomics (a plain load).
 * Hidden visibility: reached PC-relative, never through the GOT.
 */
#ifndef RESILIX_PRELOAD_HOT_H
#define RESILIX_PRELOAD_HOT_H

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct rx_hot {
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*send)(int, const void *, size_t, int);
	ssize_t (*recv)(int, void *, size_t, int);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	/* A new connection's calls (ADR-634): the same table, whose
	 * starting points for connect and socket bind the lazy name at
	 * their first call (rx__real_connect, rx__real_socket) and put what
	 * they found in its place; close's is the system call until the
	 * table is bound. */
	int (*connect)(int, const struct sockaddr *, socklen_t);
	int (*socket)(int, int, int);
	int (*close)(int);
};

extern struct rx_hot rx__hot __attribute__((visibility("hidden")));

/* The pointer to call now (relaxed: a plain load on every target). */
#define RX_HOT(name) __atomic_load_n(&rx__hot.name, __ATOMIC_RELAXED)

#endif
