/*
 * preload/init.c - the shim's start-up and its fork handlers: the top of
 * the library, which knows every other part and which no part calls.
 *
 * Start-up. Everything that allocates (the registry, via malloc; the fd
 * table and the guard locks, via mmap) runs once, in the constructor, or
 * in the first connect if another library's constructor connects before
 * ours ran. An init-once word that never blocks guards it: a call that
 * arrives while initialisation runs - re-entered from inside it, or on
 * another thread - passes through. Anything failing there leaves the shim
 * passing everything through, after one line on stderr. A secure-
 * execution process (ADR-146) and a second copy of the library (ADR-212)
 * pass through too. The configuration is read once (rx_config_parse,
 * config.c) into runtime.c's rx__cfg.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "admit.h"
#include "call.h"
#include "dns.h"
#include "fdtable.h"
#include "init.h"
#include "jump.h"
#include "log.h"
#include "metrics.h"
#include "nextsym.h"
#include "retry.h"
#include "runtime.h"
#include "state.h"
#include "symbols.h"

extern char **environ;

/* ------------------------------------------------------------------------
 * Fork. A pthread_atfork prepare handler takes every lock, so the child
 * copies consistent structures; both sides then release them. A child
 * made without atfork (vfork, posix_spawn, _Fork, a raw clone) passes
 * everything through: runtime.h's owner checks.
 * ---------------------------------------------------------------------- */

/* Set when the prepare handler took the locks (it does not when fork
 * was called from a signal handler that interrupted the shim). */
static bool fork_locked;

static void before_fork(void)
{
	fork_locked = false;
	if (!rx__ready() || rx__reentered() || !rx__owner())
		return;
	rx__fdtable_lock_all();
	rx__admit_lock_all();
	rx__retry_lock_all();
	fork_locked = true;
}

static void after_fork_parent(void)
{
	if (fork_locked) {
		rx__retry_unlock_all();
		rx__admit_unlock_all();
		rx__fdtable_unlock_all();
	}
	fork_locked = false;
	if (rx__ready())
		rx__metrics_forked();
}

static void after_fork_child(void)
{
	if (!rx__ready())
		return;
	/* Held or not, every lock is free in the child: a lock held by a
	 * thread that did not come along would never be released. */
	rx__admit_after_fork_child();
	rx__retry_after_fork_child();
	rx__fdtable_reset_locks();
	rx__locks_held = 0; /* the child has only this thread, holding none */
	rx__admit_drop_waiters();
	rx__metrics_after_fork();
	rx__state_after_fork();
	fork_locked = false;
	rx__runtime_after_fork_child();
}

/* ------------------------------------------------------------------------
 * Start-up.
 * ---------------------------------------------------------------------- */

/* Print a configuration finding: the first error with its consequence,
 * warnings and notices at level warn. */
struct report_state {
	bool printed_error;
	enum rx_log_level level;
};

static void report(void *arg, enum rx_config_diag kind, const char *name,
		   const char *msg)
{
	struct report_state *rs = arg;
	char line[480];

	(void)name;
	if (kind == RX_CONFIG_ERROR) {
		if (rs->printed_error)
			return;
		rs->printed_error = true;
		snprintf(line, sizeof(line),
			 "%s; resilix is disabled, all calls pass through",
			 msg);
		rx__log_plain(line);
		return;
	}
	if (rs->level >= RX_LOG_WARN)
		rx__log_plain(msg);
}

/* Count the findings of the silent first parse. */
static void count_finding(void *arg, enum rx_config_diag kind,
			  const char *name, const char *msg)
{
	(void)kind;
	(void)name;
	(void)msg;
	++*(unsigned *)arg;
}

static void start_failed(const char *what, int code)
{
	char line[256];

	snprintf(line, sizeof(line),
		 "%s (%s); resilix is disabled, all calls pass through", what,
		 rx_strerror(code));
	rx__log_plain(line);
}

/*
 * Is another copy of this library ahead of this one in the symbol search
 * order (two builds named in LD_PRELOAD, or an image-wide LD_PRELOAD plus
 * resilix-run with another path)? Then its wrappers see every call first
 * and reach ours through RTLD_NEXT; guarding again would count each call
 * twice and log each line twice, so this copy passes through (ADR-212).
 * Told by the object that owns the process-wide "connect": another object
 * with this library's file name, or - a renamed copy - one that owns the
 * process-wide "curl_easy_perform" too, which no libc, libcurl or other
 * socket interposer does.
 */
extern __typeof(connect) rx__connect_self; /* socket.c */

static bool another_copy_first(void)
{
	Dl_info mine, first, curl;
	const char *a, *b;
	void *sym, *perform;

	/* The usual case, this copy first: no object ahead of it defines
	 * connect, and no dlsym is needed to tell (ADR-551). */
	if (rx__next_defined_ahead("connect") == 0)
		return false;
	sym = dlsym(RTLD_DEFAULT, "connect");
	/* Or, told by dlsym, this copy first all the same: no dladdr
	 * (each walks every loaded object) is needed to tell. */
	if (sym == (void *)rx__connect_self)
		return false;
	if (sym == NULL || !dladdr((void *)another_copy_first, &mine) ||
	    !dladdr(sym, &first) || first.dli_fbase == mine.dli_fbase ||
	    first.dli_fname == NULL || mine.dli_fname == NULL)
		return false;
	a = strrchr(first.dli_fname, '/');
	b = strrchr(mine.dli_fname, '/');
	if (strcmp(a ? a + 1 : first.dli_fname, b ? b + 1 : mine.dli_fname) ==
	    0)
		return true;
	perform = dlsym(RTLD_DEFAULT, "curl_easy_perform");
	return perform != NULL && dladdr(perform, &curl) &&
	       curl.dli_fbase == first.dli_fbase;
}

static int init_once(void)
{
	struct report_state rs = {false, RX_LOG_WARN};
	const struct rx_breaker_config *b;
	const char *what = "";
	char fr[8], sr[8];
	unsigned findings = 0;
	int rc;

	rx__symbols_resolve();
	rx__jump_bind();
	/* A secure-execution process (setuid, setgid, file capabilities;
	 * reached only through /etc/ld.so.preload or dlopen, since ld.so
	 * ignores LD_PRELOAD there) passes through without reading the
	 * environment or opening a file it names (ADR-146). */
	if (getauxval(AT_SECURE))
		return RX_INIT_OFF;
	if (rx_config_parse(&rx__cfg, environ, count_finding, &findings) !=
	    0) {
		rx_config_parse(&rx__cfg, environ, report, &rs);
		return RX_INIT_OFF;
	}
	if (rx__cfg.disable)
		return RX_INIT_OFF;
	if (another_copy_first()) {
		/* The first copy reports the configuration; this one only
		 * says why it stands aside, at info level. */
		rx__log_setup(rx__cfg.log_level, NULL);
		rx__log(RX_LOG_INFO, "event=second-copy action=pass-through");
		return RX_INIT_OFF;
	}
	/* Parsed again, to print, only when there is something to print
	 * (the log level that filters it is known only now; ADR-530). */
	rs.level = rx__cfg.log_level;
	if (findings > 0)
		rx_config_parse(&rx__cfg, environ, report, &rs);
	rx__log_setup(rx__cfg.log_level, rx__cfg.log_file);

	if (rx__fdtable_init(rx__call_end_record) != 0) {
		start_failed("cannot map the fd table", RX_ENOMEM);
		return RX_INIT_OFF;
	}
	rc = rx__admit_setup(&what);
	if (rc != RX_OK) {
		start_failed(what, rc);
		return RX_INIT_OFF;
	}
	atomic_store(&rx__dns_on, rx__cfg.key_host);
	rx__runtime_setup();
	rx__retry_setup();
	if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) !=
	    0) {
		start_failed("cannot register fork handlers", RX_ENOMEM);
		return RX_INIT_OFF;
	}
	rx__metrics_setup(&rx__cfg, rx__admit_registry(),
			  rx__admit_registry_lock(), rx__admit_guard_locks());
	rx__admit_hooks(rx__log_enabled(RX_LOG_INFO) || rx__metrics_on);
	rx__connect_fast_on =
	    rx__ka_on && !rx__cfg.key_host && !rx__retry_on(); /* ADR-632 */
	/* Hydrate before the first guarded call (ADR-170). */
	rx__state_setup(&rx__cfg, rx__admit_registry(),
			rx__admit_registry_lock(), rx__admit_guard_locks());
	/* Debug, not info: a shell script under the shim starts many
	 * processes, and info is for what the breakers do. */
	/* Formatted only when written: the two rates alone cost more than
	 * the rest of a quiet start-up's logging (ADR-530). */
	if (!rx__log_enabled(RX_LOG_DEBUG))
		return RX_INIT_READY;
	b = &rx__cfg.guard.breaker;
	rx__log(RX_LOG_DEBUG,
		"event=start failure_rate=%s slow_call_rate=%s "
		"slow_call_ms=%llu consecutive_backstop=%u min_calls=%u "
		"window_calls=%u window_max_age_ms=%llu open_ms=%llu "
		"half_open_probes=%u max_keys=%u key_ttl_ms=%llu fds=%u "
		"limiter=%s limit_min=%u limit_max=%u limit_initial=%u "
		"queue_timeout_ms=%llu",
		rx__fmt_rate(fr, sizeof(fr), b->failure_rate),
		rx__fmt_rate(sr, sizeof(sr), b->slow_call_rate),
		(unsigned long long)b->slow_call_ms, b->consecutive_backstop,
		b->min_calls, b->window_calls,
		(unsigned long long)b->window_max_age_ms,
		(unsigned long long)b->open_ms, b->half_open_probes,
		rx__cfg.registry.max_keys,
		(unsigned long long)rx__cfg.registry.key_ttl_ms,
		(unsigned)atomic_load(&rx__fd_capacity),
		rx__cfg.guard.limiter_on
		    ? rx_limiter_algorithm_name(rx__cfg.guard.limiter.algorithm)
		    : "off",
		rx__cfg.guard.limiter.min_limit,
		rx__cfg.guard.limiter.max_limit,
		rx__cfg.guard.limiter.initial_limit,
		(unsigned long long)rx__cfg.queue_timeout_ms);
	rx__log(RX_LOG_DEBUG,
		"event=start-policies bulkhead=%u rate=%llu/%llums burst=%llu "
		"throttle_k_milli=%u retry_attempts=%u retry_budget_permille=%u",
		rx__cfg.guard.bulkhead_on ? rx__cfg.guard.bulkhead.max_in_flight
					  : 0,
		rx__cfg.guard.ratelimit_on
		    ? (unsigned long long)rx__cfg.guard.ratelimit.tokens
		    : 0ULL,
		(unsigned long long)rx__cfg.guard.ratelimit.period_ms,
		(unsigned long long)rx__cfg.guard.ratelimit.burst,
		rx__cfg.guard.throttler_on
		    ? (unsigned)(rx__cfg.guard.throttler.k * 1000 + 0.5)
		    : 0u,
		rx__cfg.retry.max_attempts, rx__cfg.budget.ratio_permille);
	return RX_INIT_READY;
}

bool rx__init(void)
{
	int expected = RX_INIT_NONE;
	int inside = rx__inside;
	int saved = errno;
	int result;

	if (!atomic_compare_exchange_strong(&rx__init_state, &expected,
					    RX_INIT_RUNNING))
		return expected == RX_INIT_READY;
	/* Calls re-entered from inside start-up (getenv, malloc, open)
	 * pass through. */
	rx__inside = 1;
	result = init_once();
	atomic_store_explicit(&rx__init_state, result, memory_order_release);
	rx__inside = inside;
	errno = saved;
	return result == RX_INIT_READY;
}

__attribute__((constructor)) static void rx_shim_constructor(void)
{
	(void)rx__init();
}
