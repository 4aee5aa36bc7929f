/*
 * preload/base.h - the few definitions every file of the shim shares: how
 * a wrapper is exported, how per-thread state is declared, the sockaddr
 * argument form glibc chose, and time units.
 *
 * The shim is layered like socket_wrapper: every exported libc name
 * (socket.c, io.c, dns.c, jump.c, curl.c) is a thin wrapper over the
 * call state machine (call.c) and admission (admit.c), which reach libc
 * only through the lazily bound real functions (symbols.c). docs/
 * architecture.md draws the layers; a lower file never calls up into a
 * higher one, and `make check` fails on an include cycle
 * (tests/layout.sh). The rules every file follows are those of
 * docs/design.md section 3, "Never make the host worse":
 *   - Nothing is exported but the wrappers (RX_EXPORT); the library is
 *     built with -fvisibility=hidden, core included.
 *   - Internal code never calls an interposed libc name directly (that
 *     would re-enter our own wrapper); it calls rx__real_*() (symbols.h).
 *   - No lock is held across a call into libc, and no allocation happens
 *     inside an interposed call.
 *   - A per-thread "inside the shim" flag (runtime.h) makes any call that
 *     re-enters the shim on the same thread pass straight through.
 *   - errno is preserved on every path that does not refuse.
 */
#ifndef RESILIX_PRELOAD_BASE_H
#define RESILIX_PRELOAD_BASE_H

#include <stdint.h>
#include <sys/socket.h>

/* Make a wrapper visible in the dynamic symbol table. */
#define RX_EXPORT __attribute__((visibility("default")))

/*
 * Thread-local storage of the shim. initial-exec: the variable lives in the
 * static TLS block, so an access is one %fs-relative load and never calls
 * __tls_get_addr, which may allocate on first use (and so re-enter us).
 */
#define RX_TLS __thread __attribute__((tls_model("initial-exec")))

/* An internal variable declared in a header: reached PC-relative, never
 * through the GOT (the library is built with -fvisibility=hidden, but a
 * declaration without the attribute does not say so). */
#define RX_HIDDEN __attribute__((visibility("hidden")))

/*
 * glibc declares the sockaddr arguments of connect/accept/sendto/recvfrom
 * as a transparent union under _GNU_SOURCE and as a plain pointer
 * otherwise; our definitions must match whichever the header chose.
 */
#ifdef __CONST_SOCKADDR_ARG
#define RX_CSA(a) (a)
#define RX_SA(a) (a)
#else
#define RX_CSA(a) ((a).__sockaddr__)
#define RX_SA(a) ((a).__sockaddr__)
#endif

#define RX_NS_PER_US UINT64_C(1000)
#define RX_NS_PER_MS UINT64_C(1000000)

#endif
