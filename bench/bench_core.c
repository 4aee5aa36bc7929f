/*
 * bench_core.c - cost of the policy core on the data path.
 *
 * Usage: bench/bench_core [calls-per-thread [case]]  (default 2000000)
 * With a case name, only that case runs, single-threaded.
 *
 * Prints one line per case: nanoseconds per admit + settle, and heap
 * allocations per call (which must be 0: the core never allocates on the
 * data path, CONTRIBUTING.md). Cases:
 *   breaker   rx_breaker_admit + rx_breaker_settle on one breaker
 *   limiter   rx_limiter_admit + rx_limiter_settle on one Vegas limiter
 *   guard-br  rx_guard_admit + rx_guard_settle, breaker only (limiter off)
 *   guard     rx_guard_admit + rx_guard_settle with the default policies:
 *             breaker and limiter together (gate, counters); the
 *             figure to hold at <= 40 ns single-threaded
 *   registry  what the shim does per call: rx_registry_acquire under a
 *             registry mutex, admit + settle under a per-key mutex,
 *             rx_registry_release under the registry mutex
 * each single-threaded and with two threads on distinct keys. Time is
 * synthetic (1 µs per call) so the window's age bound is exercised;
 * verdicts cycle success/answered/overload/transient so the breaker stays
 * closed and every settle path runs. Every latency is 1000 µs, which is
 * the P² estimator's equal-heights case (ADR-181); with latencies spread
 * over 800-1200 µs the limiter costs about a dozen instructions more.
 * Allocation counting wraps malloc and friends; under AddressSanitizer,
 * which owns those symbols, it reports "n/a" instead.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "resilix.h"

#if defined(__SANITIZE_ADDRESS__)
#define COUNT_ALLOCS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define COUNT_ALLOCS 0
#endif
#endif
#ifndef COUNT_ALLOCS
#define COUNT_ALLOCS 1
#endif

/* Per thread, so thread start-up allocations stay out of the count. */
static __thread unsigned long allocs;

#if COUNT_ALLOCS
/* Interpose the allocator for this process (and libresilix in it). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

void *malloc(size_t n)
{
	allocs++;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	allocs++;
	return __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	allocs++;
	return __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	allocs++;
	*out = __libc_memalign(align, n);
	return *out == NULL ? 12 /* ENOMEM */ : 0;
}

void free(void *p)
{
	__libc_free(p);
}
#endif

enum bench_case {
	CASE_BREAKER,
	CASE_LIMITER,
	CASE_GUARD_BREAKER,
	CASE_GUARD,
	CASE_REGISTRY
};

static const char *const case_names[] = {"breaker", "limiter", "guard-br",
					 "guard", "registry"};

struct shared {
	struct rx_registry *reg;
	pthread_mutex_t reg_lock;
	unsigned long calls;
	enum bench_case which;
};

struct worker {
	struct shared *sh;
	unsigned id;
	pthread_t thread;
	double ns_per_call;
	unsigned long allocs;
	/* Thread-private state for the breaker and guard cases. */
	struct rx_breaker breaker;
	struct rx_limiter limiter;
	struct rx_guard guard;
	struct rx_window_slot slots[100];
	pthread_mutex_t key_lock;
	char pad[64]; /* keep neighbouring workers off each other's lines */
};

static const enum rx_verdict cycle[4] = {RX_SUCCESS, RX_ANSWERED, RX_OVERLOAD,
					 RX_TRANSIENT};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	struct rx_admit_ctx ctx = {.now_ns = 1, .rng = NULL, .can_wait = false};
	struct rx_observation obs = {RX_SUCCESS, 1000, 0};
	struct rx_ticket t;
	struct rx_gate_permit permit;
	struct rx_refusal why;
	char key[32];
	size_t key_len =
	    (size_t)snprintf(key, sizeof(key), "10.0.0.%u:443", w->id + 1);

	unsigned long a0 = allocs;
	double t0 = now_s();
	for (unsigned long i = 0; i < sh->calls; i++) {
		ctx.now_ns += 1000;
		obs.now_ns = ctx.now_ns;
		obs.verdict = cycle[i & 3];
		switch (sh->which) {
		case CASE_BREAKER:
			if (rx_breaker_admit(&w->breaker, &ctx, &t, &why) ==
			    RX_ADMIT)
				rx_breaker_settle(&w->breaker, &t, &obs);
			break;
		case CASE_LIMITER:
			if (rx_limiter_admit(&w->limiter, &ctx, &t, &why) ==
			    RX_ADMIT)
				rx_limiter_settle(&w->limiter, &t, &obs);
			break;
		case CASE_GUARD_BREAKER:
		case CASE_GUARD:
			if (rx_guard_admit(&w->guard, &ctx, &permit, &why) ==
			    RX_ADMIT)
				rx_guard_settle(&w->guard, &permit, &obs);
			break;
		case CASE_REGISTRY: {
			pthread_mutex_lock(&sh->reg_lock);
			struct rx_guard *g = rx_registry_acquire(
			    sh->reg, key, key_len, ctx.now_ns);
			pthread_mutex_unlock(&sh->reg_lock);
			if (g == NULL)
				break;
			pthread_mutex_lock(&w->key_lock);
			if (rx_guard_admit(g, &ctx, &permit, &why) == RX_ADMIT)
				rx_guard_settle(g, &permit, &obs);
			pthread_mutex_unlock(&w->key_lock);
			pthread_mutex_lock(&sh->reg_lock);
			rx_registry_release(sh->reg, g);
			pthread_mutex_unlock(&sh->reg_lock);
			break;
		}
		}
	}
	w->ns_per_call = (now_s() - t0) * 1e9 / (double)sh->calls;
	w->allocs = allocs - a0;
	return NULL;
}

static int bench(enum bench_case which, unsigned threads, unsigned long calls)
{
	struct rx_guard_config gc;
	rx_guard_config_default(&gc);
	gc.breaker.consecutive_backstop = 0; /* stay closed: measure the
						full closed-state path */
	if (which == CASE_GUARD_BREAKER)
		gc.limiter_on = false;
	struct rx_registry_config rc;
	rx_registry_config_default(&rc);
	struct shared sh = {.calls = calls, .which = which};
	pthread_mutex_init(&sh.reg_lock, NULL);
	if (rx_registry_create(&sh.reg, &rc, &gc) != RX_OK)
		return 1;
	struct worker *w = calloc(threads, sizeof(*w));
	if (w == NULL)
		return 1;
	for (unsigned i = 0; i < threads; i++) {
		w[i].sh = &sh;
		w[i].id = i;
		pthread_mutex_init(&w[i].key_lock, NULL);
		rx_breaker_init(&w[i].breaker, &gc.breaker, w[i].slots);
		rx_limiter_init(&w[i].limiter, &gc.limiter);
		rx_guard_init(&w[i].guard, &gc, w[i].slots, 0);
	}

	for (unsigned i = 0; i < threads; i++)
		if (pthread_create(&w[i].thread, NULL, run, &w[i]) != 0)
			return 1;
	for (unsigned i = 0; i < threads; i++)
		pthread_join(w[i].thread, NULL);

	double ns = 0;
	unsigned long core_allocs = 0;
	for (unsigned i = 0; i < threads; i++) {
		ns += w[i].ns_per_call;
		core_allocs += w[i].allocs;
	}
	ns /= threads;

	if (COUNT_ALLOCS)
		printf("%-10s %7u %10.1f %12.6f\n", case_names[which], threads,
		       ns, (double)core_allocs / ((double)calls * threads));
	else
		printf("%-10s %7u %10.1f %12s\n", case_names[which], threads,
		       ns, "n/a");
	rx_registry_destroy(sh.reg);
	free(w);
	return COUNT_ALLOCS && core_allocs != 0 ? 2 : 0;
}

int main(int argc, char **argv)
{
	unsigned long calls = 2000000;
	int only = -1;
	if (argc > 1) {
		char *end;
		calls = strtoul(argv[1], &end, 10);
		if (*end != '\0' || calls == 0) {
			fprintf(stderr, "usage: %s [calls-per-thread [case]]\n",
				argv[0]);
			return 64;
		}
	}
	/* One case, single-threaded: for instruction counts under
	 * valgrind (scripts/bench), where the other cases are noise. */
	if (argc > 2) {
		for (int c = CASE_BREAKER; c <= CASE_REGISTRY; c++)
			if (strcmp(argv[2], case_names[c]) == 0)
				only = c;
		if (only < 0) {
			fprintf(stderr, "%s: unknown case %s\n", argv[0],
				argv[2]);
			return 64;
		}
	}
	int rc = 0;
	printf("%-10s %7s %10s %12s\n", "case", "threads", "ns/call",
	       "allocs/call");
	for (int c = CASE_BREAKER; c <= CASE_REGISTRY; c++)
		for (unsigned th = 1; th <= 2; th++)
			if (only < 0 || (c == only && th == 1))
				rc |= bench((enum bench_case)c, th, calls);
	if (rc == 2 || rc == 3)
		fprintf(stderr, "bench_core: the core allocated on the data "
				"path\n");
	return rc;
}
