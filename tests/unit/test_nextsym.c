/*
 * test_nextsym.c - the one-pass look-up of the shim's real functions
 * (preload/nextsym.c, ADR-551) against the loader's own dlsym: linked
 * into this program, it looks names up after the program itself (here
 * libcunit, then libc), and must return exactly what dlsym(RTLD_NEXT)
 * returns from here, for every name the shim binds and for names that take
 * its other paths: data, an indirect function, a name only an earlier
 * object defines, a name no object defines.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "nextsym.h"

static const char *const names[] = {
    "connect", "getsockopt", "close", "socket", "accept", "accept4", "dup",
    "dup2", "dup3", "send", "recv", "read", "write", "sendto", "recvfrom",
    "sendmsg", "recvmsg", "writev", "readv", "sendmmsg", "recvmmsg", "sendfile",
    "sendfile64", "splice", "preadv2", "pwritev2", "close_range", "closefrom",
    "fcntl", "fcntl64", "shutdown", "getaddrinfo", "_exit", "_Exit", "longjmp",
    "_longjmp", "siglongjmp", "__longjmp_chk",
    /* data, indirect functions, another library, nobody, a versioned
     * name with an old compatibility version beside the default one */
    "environ", "stdout", "memcpy", "strlen", "CU_assertImplementation",
    "rx_no_such_function", "realpath", "pthread_cond_wait"};

#define N (sizeof(names) / sizeof(names[0]))

static void test_same_as_dlsym(void)
{
	void *got[N];

	errno = 1234;
	rx__next_resolve(names, got, N);
	CU_ASSERT_EQUAL(errno, 1234);
	for (size_t i = 0; i < N; i++) {
		void *want = dlsym(RTLD_NEXT, names[i]);

		if (got[i] != want)
			fprintf(stderr, "%s: %p, dlsym %p\n", names[i], got[i],
				want);
		CU_ASSERT_PTR_EQUAL(got[i], want);
	}
	/* Twice: the second pass reads the kept walk. */
	rx__next_resolve(names, got, N);
	for (size_t i = 0; i < N; i++)
		CU_ASSERT_PTR_EQUAL(got[i], dlsym(RTLD_NEXT, names[i]));
}

/* Ahead of this program there is nothing but the vDSO, which defines no
 * connect. A 0 (not -1) also says the walk was complete, so the test above
 * compared the walk's answers, not dlsym's with themselves. */
static void test_defined_ahead(void)
{
	CU_ASSERT_EQUAL(rx__next_defined_ahead("connect"), 0);
	CU_ASSERT_EQUAL(rx__next_defined_ahead("rx_no_such_function"), 0);
}

/* @p lies in libc itself. */
static bool in_libc(void *p)
{
	Dl_info info;

	return p && dladdr(p, &info) && info.dli_fname &&
	       strstr(info.dli_fname, "/libc.so") != NULL;
}

/* The lazy look-up reads the kept walk: the same answers, and a name it
 * cannot settle (an indirect function, a name nobody defines) is left to
 * dlsym. */
static void test_lookup_from_kept_walk(void)
{
	void *p = NULL;

	CU_ASSERT_TRUE(rx__next_kept());
	for (size_t i = 0; i < 38; i++) {
		CU_ASSERT_TRUE(rx__next_lookup(names[i], &p));
		CU_ASSERT_PTR_EQUAL(p, dlsym(RTLD_NEXT, names[i]));
	}
	CU_ASSERT_FALSE(rx__next_lookup("rx_no_such_function", &p));
	/* glibc's memcpy is an indirect function: left to dlsym. A
	 * sanitizer's runtime, loaded ahead of libc, defines a plain one:
	 * then the walk must find what dlsym finds. */
	if (in_libc(dlsym(RTLD_NEXT, "memcpy"))) {
		CU_ASSERT_FALSE(rx__next_lookup("memcpy", &p));
	} else if (rx__next_lookup("memcpy", &p)) {
		CU_ASSERT_PTR_EQUAL(p, dlsym(RTLD_NEXT, "memcpy"));
	}
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"same as dlsym(RTLD_NEXT)", test_same_as_dlsym},
	    {"defined ahead", test_defined_ahead},
	    {"lookup from the kept walk", test_lookup_from_kept_walk},
	    {NULL, NULL},
	};
	return rx_run_suite("nextsym", tests);
}
