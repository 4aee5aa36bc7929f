/*
 * preload/jump.c - ways out that skip the normal path: a non-local jump
 * out of a wrapped call (ADR-226), and _exit (ADR-222).
 *
 * The timeout of many old C daemons: alarm() or setitimer(), and a
 * SIGALRM handler that siglongjmp()s back to before the call. When the
 * call was one the shim wraps (a read waiting for a hung upstream, a
 * connect waiting for a limiter slot), the jump leaves the wrapper in the
 * middle: its per-thread "inside the shim" flag stays set, and every
 * later call on that thread would pass through unguarded, for good; a
 * wait for a limiter slot would keep its place in the queue.
 *
 * So longjmp, _longjmp, siglongjmp and the fortified __longjmp_chk are
 * wrapped: before jumping, rx__jumped() clears the flag and gives up a
 * place the thread was waiting in - unless the thread holds (or is taking)
 * one of the shim's locks: the signal landed inside a critical section,
 * whose lock the jump orphans, and the thread must never take it again;
 * it goes on passing every call through. A jump that stays inside the
 * handler clears the flag under a wrapper still running; every re-entry
 * check therefore also counts held locks (rx__reentered), so a nested
 * call never takes a lock its own thread holds. Then the real function
 * jumps; it does not return.
 *
 * _exit and _Exit run no destructors, so a process that ends so (Python's
 * multiprocessing workers, a forked server's workers) would leave its %p
 * metrics file behind, with stale numbers, for the collector to serve for
 * ever. They remove it first, as a normal exit does; nothing else.
 */
#include "config.h"

#include <dlfcn.h>
#include <setjmp.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "admit.h"
#include "base.h"
#include "jump.h"
#include "metrics.h"
#include "nextsym.h"

typedef void (*jump_fn)(struct __jmp_buf_tag *, int);
typedef void (*exit_fn)(int);

/* Bound at first use from the walk symbols.c keeps, a look-up that takes
 * no lock and allocates nothing, so it is safe in the signal handler that
 * usually jumps (ADR-551); without a kept walk, at start-up
 * (rx__jump_bind), since dlsym is not async-signal-safe. */
static void *real_longjmp, *real__longjmp, *real_siglongjmp, *real_chk;
static void *real__exit, *real__Exit;

void rx__jump_bind(void)
{
	static const char *const names[] = {"_exit",	  "_Exit",
					    "longjmp",	  "_longjmp",
					    "siglongjmp", "__longjmp_chk"};
	void *p[6];

	if (rx__next_kept())
		return;
	/* All six in one pass, dlsym for each (ADR-551). */
	rx__next_resolve(names, p, 6);
	__atomic_store_n(&real__exit, p[0], __ATOMIC_RELAXED);
	__atomic_store_n(&real__Exit, p[1], __ATOMIC_RELAXED);
	__atomic_store_n(&real_longjmp, p[2], __ATOMIC_RELAXED);
	__atomic_store_n(&real__longjmp, p[3], __ATOMIC_RELAXED);
	__atomic_store_n(&real_siglongjmp, p[4], __ATOMIC_RELAXED);
	__atomic_store_n(&real_chk, p[5], __ATOMIC_RELAXED);
}

/* *@fn, or the real @name from the kept walk, kept in *@fn; NULL when the
 * walk cannot tell. Any thread or handler may bind it: each finds the
 * same address. */
static void *real_of(void **fn, const char *name)
{
	void *p = __atomic_load_n(fn, __ATOMIC_RELAXED);

	if (p == NULL && rx__next_lookup(name, &p))
		__atomic_store_n(fn, p, __ATOMIC_RELAXED);
	return p;
}

/* The real function, resolved now with dlsym if the walk cannot tell. */
static __attribute__((noreturn)) void jump(void **fn, const char *name,
					   struct __jmp_buf_tag *env, int val)
{
	jump_fn f;

	rx__jumped();
	f = (jump_fn)real_of(fn, name);
	if (!f)
		f = (jump_fn)dlsym(RTLD_NEXT, name);
	f(env, val);
	__builtin_unreachable();
}

RX_EXPORT void longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump(&real_longjmp, "longjmp", env, val);
}

RX_EXPORT void _longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump(&real__longjmp, "_longjmp", env, val);
}

RX_EXPORT void siglongjmp(struct __jmp_buf_tag env[1], int val)
{
	jump(&real_siglongjmp, "siglongjmp", env, val);
}

void __longjmp_chk(struct __jmp_buf_tag env[1], int val);

RX_EXPORT void __longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	jump(&real_chk, "__longjmp_chk", env, val);
}

/* The real _exit, or the system call when the walk cannot tell (a vfork
 * child must not call dlsym). */
static __attribute__((noreturn)) void quick_exit_(void **fn, const char *name,
						  int status)
{
	exit_fn f;

	rx__metrics_quick_exit();
	f = (exit_fn)real_of(fn, name);
	if (f)
		f(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

RX_EXPORT void _exit(int status)
{
	quick_exit_(&real__exit, "_exit", status);
}

RX_EXPORT void _Exit(int status)
{
	quick_exit_(&real__Exit, "_Exit", status);
}
