/*
 * malloccount.c - an LD_PRELOAD allocator wrapper that counts allocations
 * while a process-wide flag is set, for tests/preload/hostile_host.sh: the
 * shim must never allocate inside an interposed call (ADR-146).
 *
 * malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign
 * forward to glibc's __libc_* entry points (no dlsym, so no bootstrap
 * allocation) and, while rx_mc_on is set, count each call. The program
 * under test finds rx_mc_start/rx_mc_stop with dlsym(RTLD_DEFAULT) and
 * brackets the code it checks.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static atomic_int on;
static atomic_long count;

void rx_mc_start(void)
{
	atomic_store(&count, 0);
	atomic_store(&on, 1);
}

long rx_mc_stop(void)
{
	atomic_store(&on, 0);
	return atomic_load(&count);
}

static void counted(void)
{
	if (atomic_load_explicit(&on, memory_order_relaxed))
		atomic_fetch_add(&count, 1);
}

void *malloc(size_t n)
{
	counted();
	return __libc_malloc(n);
}

void *calloc(size_t a, size_t b)
{
	counted();
	return __libc_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
	counted();
	return __libc_realloc(p, n);
}

void free(void *p)
{
	if (p)
		counted();
	__libc_free(p);
}

void *memalign(size_t al, size_t n)
{
	counted();
	return __libc_memalign(al, n);
}

void *aligned_alloc(size_t al, size_t n)
{
	counted();
	return __libc_memalign(al, n);
}

int posix_memalign(void **out, size_t al, size_t n)
{
	void *p;

	counted();
	p = __libc_memalign(al, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}
