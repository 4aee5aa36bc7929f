/*
 * preload/call.c - the call lifecycle of the shim: start-up, admission,
 * settlement, the key registry and every lock.
 *
 * What a call is (DESIGN.md section 3). A call starts at connect() on an
 * AF_INET/AF_INET6 stream socket, or at the first write of a new request
 * on a kept-alive connection (the first write after a response started);
 * admission happens there, and a refusal fails the operation with
 * -1/ECONNREFUSED before the real function runs, so nothing leaves the
 * host and nothing is half-sent. A call ends at its first response byte
 * (latency = time to first byte; the verdict comes from the HTTP sniffer),
 * at an error (errno classified by rx_verdict_from_errno), at EOF before
 * any byte (transient), or at close (abandonment: no evidence, RX_REJECTED,
 * unless it already ran past the slow threshold, then RX_TIMEOUT). Each fd
 * moves through the phases of enum rx_fd_phase:
 *
 *   connect admitted -> CONNECTING -(connected, or bytes)-> WAITING
 *   WAITING -(first byte, final status)-> IDLE -(write: admit)-> WAITING
 *   any -(error, EOF, 101 upgrade)-> DONE;  close -> UNTRACKED
 *
 * The state belongs to the connection: every number of a socket (dup,
 * dup2, dup3, fcntl F_DUPFD) maps to the same record, and only the close
 * of its last number ends it (ADR-213).
 *
 * Locks. Three kinds, never nested, never held across a call into libc:
 * the registry lock (acquire/release of a key, O(1)), one lock per guard
 * (indexed by rx_registry_index; admit/settle, O(1)) and the fd stripe
 * locks (record updates). So no lock order exists to get wrong, and a
 * thread blocked in recv holds nothing. The guard of a tracked fd stays
 * pinned from connect to close, so the registry never evicts a key with a
 * live connection.
 *
 * Waiting for a limiter slot (ADR-136). Where the adaptive limiter would
 * queue a call, a blocking caller (a blocking socket's connect, or the
 * first write of a new request on a blocking socket without MSG_DONTWAIT)
 * takes a place in the key's queue and waits, in arrival order, at most
 * RESILIX_QUEUE_TIMEOUT_MS (and RESILIX_TIMEOUT_MS, when set: the call's
 * deadline covers its wait); a non-blocking caller never waits, it is
 * refused (limiter-full) where it would have queued. The wait holds no
 * lock: it sleeps on a per-key futex word that every settlement of a key
 * with waiters bumps and wakes (and at most WAIT_SLICE_MS at a time, so a
 * missed wake-up, or a limit that grew or relaxed, costs a few ms, never
 * a hang). The guard stays pinned while its caller waits; a close of the
 * fd meanwhile releases that pin, and the registry keeps a key with
 * waiters anyway. Limit changes are logged at info, at most one line per
 * key per LIMIT_LOG_NS (ADR-138).
 *
 * Re-entry and signals. rx__inside is set from the start of a tracked
 * operation to its end (the real call included): a signal handler that
 * calls write, connect or close on this thread while we hold a lock, or
 * while we wait in the real send, passes straight through.
 *
 * Fork. A pthread_atfork prepare handler takes every lock, so the child
 * copies consistent structures; both sides then release them. atfork does
 * not run for vfork, posix_spawn, _Fork or a raw clone: such a child has
 * a new pid but the parent's memory (vfork shares it outright), so any
 * process whose pid is not the one that owns the state passes everything
 * through and touches nothing (it usually execs at once, and an exec'd
 * program loads a fresh shim). The pid is compared only on paths that
 * change state - about three times per call - never on an untracked fd.
 *
 * Time and randomness. The monotonic clock is read at most twice per
 * operation and handed to the core as now_ns. Randomness comes from a
 * per-thread SplitMix64 generator seeded from pid ^ time at start-up,
 * mixed with the thread's identity, reseeded in a forked child.
 *
 * Start-up. Everything that allocates (the registry, via malloc; the fd
 * table and the guard locks, via mmap) runs once, in the constructor, or
 * in the first connect if another library's constructor connects before
 * ours ran. An init-once word that never blocks guards it: a call that
 * arrives while initialisation runs - re-entered from inside it, or on
 * another thread - passes through. Anything failing there leaves the shim
 * passing everything through, after one line on stderr.
 */
#include "config.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "metrics.h"
#include "shim.h"

extern char **environ;

RX_TLS int rx__inside;
RX_TLS int rx__locks_held;

enum { INIT_NONE = 0, INIT_RUNNING, INIT_READY, INIT_OFF };
static atomic_int init_state = INIT_NONE;

static struct rx_config cfg;
static struct rx_registry *registry;
static struct rx_lock registry_lock;
static struct rx_lock *guard_locks; /* cfg.registry.max_keys of them */

/*
 * Per-key state of the limiter's executor, beside guard_locks (same
 * index). wake_seq is the futex word waiters sleep on (atomic, no lock);
 * the logged_* fields are read and written under the key's guard lock.
 */
struct key_wait {
	_Atomic uint32_t wake_seq;
	uint32_t logged_limit; /* last limit logged, 0 = none yet */
	uint64_t logged_ns;    /* when it was logged */
};
static struct key_wait *key_waits; /* cfg.registry.max_keys of them */

/* Longest single sleep of a waiter: bounds the cost of a missed wake. */
#define WAIT_SLICE_MS 10
/* At most one limit-change line per key per this long (ADR-138). */
#define LIMIT_LOG_NS (100 * RX_NS_PER_MS)
/* Any hook of a settlement on: log level info or debug, or a metrics
 * file. Set once at start-up, read-only afterwards (ADR-185). */
static bool hooks_on;
static pid_t owner_pid;
static uint64_t rng_seed;
static atomic_uint rng_epoch; /* bumped in a forked child: reseed */
static atomic_bool warned_registry_full;

static RX_TLS struct rx_rng tls_rng;
static RX_TLS unsigned tls_rng_epoch;

/* ------------------------------------------------------------------------
 * Small helpers.
 * ---------------------------------------------------------------------- */

/*
 * The monotonic clock in ns, plus RX_CLOCK_OFFSET_NS (ADR-173): every time
 * the core sees is this one. A snapshot hydrated from RESILIX_STATE_FILE
 * places its ages against now_ns, and the core clamps an age older than
 * the clock; just after boot the raw clock is younger than an hour-old
 * window. The offset (2^62 ns, 146 years; 2^64 is 584) keeps every age
 * whole. Nothing in the shim uses the raw value: only differences, and
 * the core.
 */
static uint64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return RX_CLOCK_OFFSET_NS;
	return (uint64_t)ts.tv_sec * UINT64_C(1000000000) +
	       (uint64_t)ts.tv_nsec + RX_CLOCK_OFFSET_NS;
}

bool rx__ready(void)
{
	return atomic_load_explicit(&init_state, memory_order_acquire) ==
	       INIT_READY;
}

/* Is this process the one whose state we hold? See "Fork" above. A
 * system call (glibc does not cache the pid): used where state is dropped
 * (close, close_range, a reconnect), which a vfork child may reach. */
static bool owner(void)
{
	return getpid() == owner_pid;
}

/*
 * The request path's owner check (ADR-146): a word in a page advised
 * MADV_WIPEONFORK, which the kernel zeroes in every forked child, with or
 * without atfork (_Fork, a raw clone), and which after_fork_child sets
 * again. A load instead of a getpid system call twice per request. A vfork
 * or CLONE_VM child shares the page and passes this check; the paths it
 * guards (admission on a kept-alive write, settlement at the first byte)
 * are not ones such a child reaches before it execs, and the paths that
 * drop state keep owner(). Without the advice (an old kernel), owner().
 */
static _Atomic uint32_t *fork_word;

static bool owner_fast(void)
{
	_Atomic uint32_t *w =
	    atomic_load_explicit(&fork_word, memory_order_relaxed);

	if (w)
		return atomic_load_explicit(w, memory_order_relaxed) != 0;
	return owner();
}

/* Map and arm the word (start-up). Leaves fork_word NULL on failure. */
static void arm_fork_word(void)
{
	void *p =
	    mmap(NULL, (size_t)sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return;
	if (madvise(p, (size_t)sysconf(_SC_PAGESIZE), MADV_WIPEONFORK) != 0) {
		munmap(p, (size_t)sysconf(_SC_PAGESIZE));
		return;
	}
	atomic_store((_Atomic uint32_t *)p, 1);
	atomic_store(&fork_word, (_Atomic uint32_t *)p);
}

static struct rx_rng *thread_rng(void)
{
	unsigned epoch = atomic_load_explicit(&rng_epoch, memory_order_relaxed);

	if (tls_rng_epoch != epoch) {
		/* The TLS block's address tells threads apart. */
		rx_rng_seed(&tls_rng,
			    rng_seed ^ ((uint64_t)(uintptr_t)&tls_rng *
					UINT64_C(0x9E3779B97F4A7C15)));
		tls_rng_epoch = epoch;
	}
	return &tls_rng;
}

static struct rx_lock *guard_lock(struct rx_guard *g)
{
	return &guard_locks[rx_registry_index(registry, g)];
}

static const char *key_of(struct rx_guard *g)
{
	return rx_registry_key(registry, g);
}

/*
 * Copy a permit's tickets, not its whole array: a permit has room for
 * RX_GATE_MAX_POLICIES tickets (132 bytes) and a call holds one per policy
 * that is on, usually two. The core reads no ticket at or past count
 * (ADR-185).
 */
static inline void permit_copy(struct rx_gate_permit *dst,
			       const struct rx_gate_permit *src)
{
	uint32_t n = src->count < RX_GATE_MAX_POLICIES ? src->count
						       : RX_GATE_MAX_POLICIES;
	uint32_t i;

	dst->count = n;
	/* The usual one or two tickets by hand: the compiler would turn
	 * the loop into a memmove call. */
	if (n > 0)
		dst->tickets[0] = src->tickets[0];
	if (n > 1)
		dst->tickets[1] = src->tickets[1];
	if (n > 2)
		for (i = 2; i < n; i++)
			dst->tickets[i] = src->tickets[i];
}

/* Format "127.0.0.1:8080" or "[::1]:8080". Returns the length, 0 when the
 * address is not one we key on. */
static size_t format_key(const struct sockaddr *sa, socklen_t len, char *buf,
			 size_t size)
{
	char ip[INET6_ADDRSTRLEN];
	int n;

	if (len < (socklen_t)sizeof(sa_family_t))
		return 0;
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		/* By hand, the common case of every new connection:
		 * inet_ntop and snprintf cost over a thousand instructions
		 * (ADR-146). "255.255.255.255:65535" is 21 bytes. */
		const struct sockaddr_in *in = (const void *)sa;
		const uint8_t *a = (const uint8_t *)&in->sin_addr;
		char tmp[24], *p = tmp;
		unsigned v, k;

		for (k = 0; k < 5; k++) {
			v = k < 4 ? a[k] : ntohs(in->sin_port);
			if (k > 0)
				*p++ = k < 4 ? '.' : ':';
			if (v >= 10000)
				*p++ = (char)('0' + v / 10000);
			if (v >= 1000)
				*p++ = (char)('0' + v / 1000 % 10);
			if (v >= 100)
				*p++ = (char)('0' + v / 100 % 10);
			if (v >= 10)
				*p++ = (char)('0' + v / 10 % 10);
			*p++ = (char)('0' + v % 10);
		}
		n = (int)(p - tmp);
		if ((size_t)n >= size)
			return 0;
		memcpy(buf, tmp, (size_t)n);
		buf[n] = '\0';
	} else if (sa->sa_family == AF_INET6 &&
		   len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;

		if (!inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip)))
			return 0;
		n = snprintf(buf, size, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		return 0;
	}
	return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

/*
 * An IPv4-mapped IPv6 destination (::ffff:a.b.c.d, what a dual-stack
 * AF_INET6 socket connects to for an IPv4 peer) is that IPv4 destination
 * (ADR-194): returns @sa rewritten into @buf as AF_INET, with *@len
 * updated, or @sa itself for anything else.
 */
static const struct sockaddr *unmapped(const struct sockaddr *sa,
				       socklen_t *len, struct sockaddr_in *buf)
{
	const struct sockaddr_in6 *in6 = (const void *)sa;

	if (*len < (socklen_t)sizeof(struct sockaddr_in6) ||
	    sa->sa_family != AF_INET6 ||
	    !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return sa;
	memset(buf, 0, sizeof(*buf));
	buf->sin_family = AF_INET;
	buf->sin_port = in6->sin6_port;
	memcpy(&buf->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
	*len = sizeof(*buf);
	return (const struct sockaddr *)buf;
}

/*
 * Errnos that say something about this host or this program, not about
 * the destination: a bad fd or buffer, no local port or memory left, a
 * firewall rule on this host. They are not evidence about the upstream
 * (the breaker must not trip on a local problem); the call is released
 * as RX_REJECTED.
 */
static bool local_errno(int err)
{
	switch (err) {
	case EBADF:
	case ENOTSOCK:
	case EFAULT:
	case EINVAL:
	case EAFNOSUPPORT:
	case EPROTOTYPE:
	case EADDRINUSE:
	case EADDRNOTAVAIL:
	case EISCONN:
	case EALREADY:
	case ENOTCONN:
	case EPERM:
	case EACCES:
	case ENOBUFS:
	case ENOMEM:
	case EMSGSIZE:
	case EOPNOTSUPP:
		return true;
	default:
		return false;
	}
}

/* Errnos that are not an outcome: the call goes on. */
static bool pending_errno(int err)
{
	return err == EAGAIN || err == EWOULDBLOCK || err == EINTR ||
	       err == EINPROGRESS;
}

static enum rx_verdict verdict_of_errno(int err, enum rx_phase phase)
{
	if (local_errno(err))
		return RX_REJECTED;
	/* A connect() on a socket whose earlier connect failed, the failure
	 * already read (SO_ERROR): the kernel reports the socket's state
	 * without sending anything. The failure counted once (ADR-216). */
	if (phase == RX_PHASE_CONNECT && err == ECONNABORTED)
		return RX_REJECTED;
	return rx_verdict_from_errno(err, phase);
}

/* Is @fd in blocking mode? Then EAGAIN means SO_RCVTIMEO/SO_SNDTIMEO ran
 * out: a timeout. fcntl is reached through the system call because it is
 * the follow-up's to interpose. */
static bool blocking(int fd)
{
	long fl = syscall(SYS_fcntl, fd, F_GETFL);

	return fl >= 0 && !(fl & O_NONBLOCK);
}

/* ------------------------------------------------------------------------
 * Admission and settlement, with breaker transitions logged.
 * ---------------------------------------------------------------------- */

struct watch {
	bool on;	      /* log a transition (level info) */
	bool changed;	      /* the breaker changed state */
	uint64_t transitions; /* its count before */
	struct rx_breaker_stats before, after;
};

/* Caller holds @g's lock, from watch_begin to watch_end. */
static void watch_begin(struct watch *w, struct rx_guard *g, uint64_t now)
{
	w->transitions = g->breaker.transitions;
	w->on = cfg.guard.breaker_on && rx__log_enabled(RX_LOG_INFO);
	if (w->on)
		rx_breaker_stats(&g->breaker, now, &w->before);
}

static void watch_end(struct watch *w, struct rx_guard *g, uint64_t now)
{
	w->changed = g->breaker.transitions != w->transitions;
	if (w->on)
		rx_breaker_stats(&g->breaker, now, &w->after);
}

/* Why the breaker moved from @from to @to, judged from the stats after
 * the move (a trip does not clear the window). */
static const char *transition_reason(const struct rx_breaker_stats *st,
				     enum rx_breaker_state from,
				     enum rx_breaker_state to)
{
	const struct rx_breaker_config *b = &cfg.guard.breaker;
	uint32_t min =
	    b->min_calls < b->window_calls ? b->min_calls : b->window_calls;
	bool enough;

	if (from == RX_BREAKER_OPEN && to == RX_BREAKER_HALF_OPEN)
		return "open-elapsed";
	if (from == RX_BREAKER_HALF_OPEN && to == RX_BREAKER_CLOSED)
		return "probe-succeeded";
	if (from == RX_BREAKER_HALF_OPEN && to == RX_BREAKER_OPEN)
		return "probe-failed";
	if (from != RX_BREAKER_CLOSED || to != RX_BREAKER_OPEN)
		return "unknown";
	/* A starved window decides on what it holds, down to 5 samples. */
	if (st->starved && min > 5)
		min = 5;
	enough = st->window_count >= min;
	if (enough && b->failure_rate < 1.0 &&
	    st->failure_rate > b->failure_rate)
		return "failure-rate";
	if (enough && b->slow_call_ms > 0 && b->slow_call_rate < 1.0 &&
	    st->slow_call_rate > b->slow_call_rate)
		return "slow-call-rate";
	if (b->consecutive_backstop > 0 &&
	    st->consecutive_failures >= b->consecutive_backstop)
		return "consecutive-failures";
	return "unknown";
}

/* Log a transition seen by @w. Called with no lock held. */
static void watch_log(const struct watch *w, struct rx_guard *g)
{
	char fr[8], sr[8];

	if (!w->on || w->before.transitions == w->after.transitions)
		return;
	rx__log(RX_LOG_INFO,
		"key=%s event=breaker-transition from=%s to=%s reason=%s "
		"failure_rate=%s slow_call_rate=%s window=%u consecutive=%u",
		key_of(g), rx_breaker_state_name(w->before.state),
		rx_breaker_state_name(w->after.state),
		transition_reason(&w->after, w->before.state, w->after.state),
		rx__fmt_rate(fr, sizeof(fr), w->after.failure_rate),
		rx__fmt_rate(sr, sizeof(sr), w->after.slow_call_rate),
		w->after.window_count, w->after.consecutive_failures);
}

/* After an admission step: log a transition, and let the metrics file
 * show it at once (ADR-222). No lock held. */
static void watch_report(const struct watch *w, struct rx_guard *g,
			 uint64_t now)
{
	watch_log(w, g);
	if (w->changed && rx__metrics_on)
		rx__metrics_tick(now, true);
}

static struct key_wait *key_wait_of(struct rx_guard *g)
{
	return &key_waits[rx_registry_index(registry, g)];
}

/* Wake every waiter of @kw: one of them may now have its turn. Called
 * with no lock held. */
static void wake_waiters(struct key_wait *kw)
{
	int saved = errno;

	atomic_fetch_add_explicit(&kw->wake_seq, 1, memory_order_release);
	syscall(SYS_futex, &kw->wake_seq, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL,
		NULL, 0);
	errno = saved;
}

/* Sleep until woken or @ns pass. Returns false when a signal handler ran
 * (EINTR). */
static bool wait_for_wake(struct key_wait *kw, uint32_t seq, uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / UINT64_C(1000000000)),
			      (long)(ns % UINT64_C(1000000000))};

	return syscall(SYS_futex, &kw->wake_seq, FUTEX_WAIT_PRIVATE, seq, &ts,
		       NULL, 0) == 0 ||
	       errno != EINTR;
}

/*
 * A signal handler ran while a caller waited for a limiter slot: would the
 * real call have been interrupted? Not if that handler was installed with
 * SA_RESTART (signal(7): connect and write are restarted then). The kernel
 * does not say which signal it was, so the wait ends only when no signal
 * this thread can receive has a handler with SA_RESTART - whichever of
 * them ran, the real call would have been interrupted (ADR-223). A
 * program that mixes the two keeps waiting: a spurious interruption is
 * worse than a wait the queue timeout bounds. Up to 64 sigaction calls,
 * on this rare path only.
 */
static bool interrupt_wanted(void)
{
	struct sigaction sa;
	bool handled = false;
	sigset_t mask;
	int s;

	if (pthread_sigmask(SIG_SETMASK, NULL, &mask) != 0)
		return false;
	for (s = 1; s < NSIG; s++) {
		if (s == SIGKILL || s == SIGSTOP || sigismember(&mask, s) == 1 ||
		    sigaction(s, NULL, &sa) != 0 || sa.sa_handler == SIG_DFL ||
		    sa.sa_handler == SIG_IGN)
			continue;
		if (sa.sa_flags & SA_RESTART)
			return false;
		handled = true;
	}
	return handled;
}

/* The place this thread waits in, while it waits (ADR-226): a jump out
 * of the wait (siglongjmp from a signal handler) gives it up. */
static RX_TLS struct {
	struct rx_guard *g;
	uint64_t place;
} waiting;

/* End this thread's place at @g (@refused: counted as a limiter-full
 * refusal). The caller holds @g's lock @l; forgetting the place under it
 * keeps rx__jumped from ending it a second time. Then wake the queue. */
static void end_place_locked(struct rx_guard *g, struct rx_lock *l,
			     uint64_t place, bool refused)
{
	waiting.g = NULL;
	rx_guard_cancel_wait(g, place, refused);
	rx__unlock(l);
	wake_waiters(key_wait_of(g));
}

void rx__jumped(void)
{
	struct rx_guard *g = waiting.g;
	struct rx_lock *l;

	/* The handler that jumps interrupted a critical section of this
	 * thread: its lock stays taken for good, and this thread, taking it
	 * again, would spin for ever. It goes on passing every call through
	 * (other threads wait on that lock: the jump's own fault). */
	if (rx__locks_held > 0)
		return;
	rx__inside = 0;
	if (!g)
		return;
	l = guard_lock(g);
	if (!rx__trylock(l)) {
		waiting.g = NULL; /* another thread holds it: the place stays */
		return;
	}
	end_place_locked(g, l, waiting.place, false);
}

/* The errno a refusal gives the caller (ADR-223): ECONNREFUSED, or EINTR
 * when a signal ended a send's wait for a limiter slot. Per thread; read
 * once by rx__refusal_errno. */
static RX_TLS int refusal_errno;

int rx__refusal_errno(void)
{
	int e = refusal_errno ? refusal_errno : ECONNREFUSED;

	refusal_errno = 0;
	return e;
}

/* The program's own bound on a send on @fd (SO_SNDTIMEO, which Linux
 * applies to connect too), in ns; 0 = none or not a socket. */
static uint64_t send_timeout_ns(int fd)
{
	struct timeval tv = {0, 0};
	socklen_t len = sizeof(tv);

	if (fd < 0 ||
	    rx__real_getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, &len) != 0 ||
	    tv.tv_sec < 0 || tv.tv_usec < 0)
		return 0;
	return (uint64_t)tv.tv_sec * UINT64_C(1000000000) +
	       (uint64_t)tv.tv_usec * 1000;
}

static void log_refused(struct rx_guard *g, const struct rx_refusal *why,
			const char *where, uint64_t waited_ns)
{
	rx__log(RX_LOG_DEBUG,
		"key=%s event=refused reason=%s retry_after_ms=%llu at=%s "
		"waited_ms=%llu",
		key_of(g), rx_reason_name(why->reason),
		(unsigned long long)why->retry_after_ms, where,
		(unsigned long long)(waited_ns / RX_NS_PER_MS));
}

/*
 * Wait in @g's limiter queue at place @place until the caller's turn (true,
 * @permit filled, *@now the admission time), a refusal, the queue timeout,
 * the program's own send timeout on @fd, or a signal that would have
 * interrupted the real call (false; refusal_errno says how). No lock is
 * held while sleeping; rx__inside stays set, so a signal handler's I/O on
 * this thread passes through.
 */
static bool wait_turn(struct rx_guard *g, uint64_t place, uint64_t *now,
		      struct rx_gate_permit *permit, const char *where, int fd)
{
	struct rx_admit_ctx ctx = {.rng = thread_rng(), .can_wait = true};
	struct rx_refusal why = {RX_REASON_LIMITER_FULL, 0};
	struct key_wait *kw = key_wait_of(g);
	struct rx_lock *l = guard_lock(g);
	uint64_t start = *now;
	uint64_t bound_ms = cfg.queue_timeout_ms;
	uint64_t own_ns = send_timeout_ns(fd);
	uint64_t deadline;
	enum rx_decision d;

	/* A deadline for the call (RESILIX_TIMEOUT_MS) covers its wait, and
	 * so does the program's own (SO_SNDTIMEO, ADR-223). */
	if (cfg.timeout_ms > 0 && cfg.timeout_ms < bound_ms)
		bound_ms = cfg.timeout_ms;
	deadline = start + bound_ms * RX_NS_PER_MS;
	if (own_ns > 0 && start + own_ns < deadline)
		deadline = start + own_ns;

	/* Every end of the place below clears this under the guard's lock,
	 * and rx__jumped only tries that lock: a place ends once. */
	waiting.place = place;
	waiting.g = g;
	for (;;) {
		uint32_t seq =
		    atomic_load_explicit(&kw->wake_seq, memory_order_acquire);
		struct watch w;

		ctx.now_ns = *now;
		rx__lock(l);
		watch_begin(&w, g, *now);
		d = rx_guard_try_dequeue(g, &ctx, place, permit, &why);
		if (d != RX_QUEUE)
			waiting.g = NULL; /* the place ended */
		watch_end(&w, g, *now);
		rx__unlock(l);
		watch_report(&w, g, *now);
		if (d == RX_ADMIT) {
			uint64_t waited_ms = (*now - start) / RX_NS_PER_MS;

			rx__log(RX_LOG_DEBUG,
				"key=%s event=admitted-after-wait "
				"waited_ms=%llu at=%s",
				key_of(g), (unsigned long long)waited_ms,
				where);
			return true;
		}
		if (d != RX_QUEUE) {
			/* The slot it was given went back (circuit open):
			 * someone behind may use it. */
			wake_waiters(kw);
			break;
		}
		if (*now >= deadline) {
			rx__lock(l);
			end_place_locked(g, l, place, true);
			why.reason = RX_REASON_LIMITER_FULL;
			why.retry_after_ms = 0;
			break;
		}
		uint64_t left = deadline - *now;
		if (!wait_for_wake(kw, seq,
				   left < WAIT_SLICE_MS * RX_NS_PER_MS
				       ? left
				       : WAIT_SLICE_MS * RX_NS_PER_MS) &&
		    fd >= 0 && interrupt_wanted()) { /* fd < 0: libcurl's */
			rx__lock(l);
			end_place_locked(g, l, place, false);
			*now = now_ns();
			/* A send interrupted before any byte went fails with
			 * EINTR. A connect interrupted so would go on in the
			 * background (POSIX), and a program then waits for it
			 * to complete - but this one never started: it is
			 * refused, at the program's deadline. */
			refusal_errno = strcmp(where, "connect") == 0
					    ? ECONNREFUSED
					    : EINTR;
			rx__log(RX_LOG_DEBUG,
				"key=%s event=wait-interrupted waited_ms=%llu "
				"at=%s",
				key_of(g),
				(unsigned long long)((*now - start) /
						     RX_NS_PER_MS),
				where);
			return false;
		}
		*now = now_ns();
	}
	log_refused(g, &why, where, *now - start);
	return false;
}

/*
 * Ask @g whether a call may start at *@now on @fd. @dontwait: the caller
 * asked not to block (MSG_DONTWAIT). Returns true with @permit filled and
 * *@now the admission time (later than on entry when the call waited in
 * the limiter's queue: the wait is not the upstream's latency). Preserves
 * errno: only the wait makes system calls that may set it, and it puts
 * errno back itself, so the common path reads errno not at all (ADR-185).
 */
static bool admit(struct rx_guard *g, uint64_t *now,
		  struct rx_gate_permit *permit, const char *where, int fd,
		  bool dontwait)
{
	/* Optimistic: most calls are admitted at once, and whether the
	 * caller may wait costs a system call, asked only when it matters. */
	struct rx_admit_ctx ctx = {
	    .now_ns = *now, .rng = thread_rng(), .can_wait = true};
	struct rx_refusal why = {RX_REASON_NONE, 0};
	struct rx_lock *l = guard_lock(g);
	uint64_t place = 0;
	enum rx_decision d;
	struct watch w;

	rx__lock(l);
	watch_begin(&w, g, *now);
	d = rx_guard_admit(g, &ctx, permit, &why);
	watch_end(&w, g, *now);
	rx__unlock(l);
	watch_report(&w, g, *now);
	if (d == RX_ADMIT)
		return true;
	if (d == RX_QUEUE) {
		int saved = errno;

		/* Decide again with the caller's real ability to wait, under
		 * one lock hold with the enqueue: a non-blocking caller is
		 * refused where it would queue (and counted as such). */
		ctx.can_wait = !dontwait && cfg.queue_timeout_ms > 0 &&
			       (fd < 0 || blocking(fd)); /* fd < 0: curl.c */
		rx__lock(l);
		d = rx_guard_admit(g, &ctx, permit, &why);
		if (d == RX_QUEUE && rx_guard_enqueue(g, *now, &place) != RX_OK)
			d = RX_REFUSE;
		rx__unlock(l);
		if (d == RX_QUEUE) {
			bool ok = wait_turn(g, place, now, permit, where, fd);

			errno = saved;
			return ok;
		}
		errno = saved;
		if (d == RX_ADMIT)
			return true;
	}
	log_refused(g, &why, where, 0);
	/* A refusal storm changes the refusal counters the most: let it
	 * drive the metrics file too (no lock held here). */
	if (rx__metrics_on)
		rx__metrics_tick(*now, false);
	return false;
}

/*
 * Has @g's limit moved since it was last logged, and may it be logged now
 * (at most once per LIMIT_LOG_NS per key, ADR-138)? Then fills @ls. A
 * key starts from its initial limit. Caller holds @g's lock. O(1); a
 * load and a compare when nothing moved.
 */
static bool limit_changed(struct rx_guard *g, uint64_t now,
			  struct rx_limiter_stats *ls)
{
	struct key_wait *kw;
	uint32_t limit;

	if (!g->limiter_on || !rx__log_enabled(RX_LOG_INFO))
		return false;
	kw = key_wait_of(g);
	limit = (uint32_t)g->limiter.limit;
	if (kw->logged_limit == 0)
		kw->logged_limit = g->limiter.cfg.initial_limit;
	if (limit == kw->logged_limit)
		return false;
	if (kw->logged_ns != 0 && now - kw->logged_ns < LIMIT_LOG_NS)
		return false;
	rx_limiter_stats(&g->limiter, now, ls);
	kw->logged_limit = limit;
	kw->logged_ns = now;
	return true;
}

/*
 * One limit-change line (ADR-138). The latency figures are left out until
 * the limiter has measured them (a drop can move the limit before its
 * first window closes) rather than shown as 0 us.
 */
static void log_limit_change(struct rx_guard *g,
			     const struct rx_limiter_stats *ls)
{
	char lat[64] = "";

	if (ls->p90_us > 0 || ls->rtt_noload_us > 0)
		snprintf(lat, sizeof(lat), " p90_us=%llu rtt_noload_us=%llu",
			 (unsigned long long)ls->p90_us,
			 (unsigned long long)ls->rtt_noload_us);
	rx__log(RX_LOG_INFO,
		"key=%s event=limit-change limit=%u in_flight=%u queued=%u%s",
		key_of(g), ls->limit, ls->in_flight, ls->queued, lat);
}

/*
 * settle with every hook that may be on: breaker transitions and limit
 * changes (log level info), the debug line, the metrics file.
 */
static __attribute__((noinline)) void
settle_hooked(struct rx_guard *g, const struct rx_gate_permit *permit,
	      enum rx_verdict v, uint64_t start_ns, uint64_t end_ns,
	      uint64_t now, const char *at)
{
	uint32_t slot = rx_registry_index(registry, g);
	struct rx_observation obs;
	struct rx_lock *l = &guard_locks[slot];
	struct rx_limiter_stats ls;
	uint32_t waiters;
	bool log_limit;
	struct watch w;

	obs.verdict = v;
	obs.latency_us =
	    end_ns > start_ns ? (end_ns - start_ns) / RX_NS_PER_US : 0;
	obs.now_ns = now;
	rx__state_touched(); /* this process has something to save */
	rx__lock(l);
	watch_begin(&w, g, now);
	rx_guard_settle(g, permit, &obs);
	if (rx__metrics_on)
		rx__metrics_observe(slot, g, &obs);
	watch_end(&w, g, now);
	waiters = rx_guard_waiters(g);
	log_limit = limit_changed(g, now, &ls);
	rx__unlock(l);
	if (waiters > 0)
		wake_waiters(&key_waits[slot]);
	/* Checked here, not only in rx__log: the arguments (a registry
	 * lookup for the key) cost more than the check (ADR-146). */
	if (rx__log_enabled(RX_LOG_DEBUG))
		rx__log(RX_LOG_DEBUG,
			"key=%s event=settle verdict=%s latency_us=%llu "
			"at=%s",
			key_of(g), rx_verdict_name(v),
			(unsigned long long)obs.latency_us, at);
	watch_log(&w, g);
	if (log_limit)
		log_limit_change(g, &ls);
	if (rx__metrics_on) /* no lock held: it may write the file */
		rx__metrics_tick(now, w.changed);
}

/*
 * Settle @permit on @g: latency end_ns - start_ns, logged with @at. The
 * common case - log below info, no metrics file - is one guard lock round
 * trip around rx_guard_settle, after one branch on a word set at start-up
 * (ADR-185); it does exactly what settle_hooked does with its hooks off.
 * Preserves errno.
 */
static void settle(struct rx_guard *g, const struct rx_gate_permit *permit,
		   enum rx_verdict v, uint64_t start_ns, uint64_t end_ns,
		   uint64_t now, const char *at)
{
	struct rx_observation obs;
	struct rx_lock *l;
	uint32_t slot, waiters;

	if (hooks_on) {
		settle_hooked(g, permit, v, start_ns, end_ns, now, at);
		return;
	}
	slot = rx_registry_index(registry, g);
	l = &guard_locks[slot];
	obs.verdict = v;
	obs.latency_us =
	    end_ns > start_ns ? (end_ns - start_ns) / RX_NS_PER_US : 0;
	obs.now_ns = now;
	rx__state_touched(); /* this process has something to save */
	rx__lock(l);
	rx_guard_settle(g, permit, &obs);
	waiters = rx_guard_waiters(g);
	rx__unlock(l);
	if (waiters > 0)
		wake_waiters(&key_waits[slot]);
}

static struct rx_guard *acquire(const char *key, size_t len, uint64_t now)
{
	struct rx_guard *g;

	rx__lock(&registry_lock);
	g = rx_registry_acquire(registry, key, len, now);
	rx__unlock(&registry_lock);
	if (!g && !atomic_exchange(&warned_registry_full, true))
		rx__log(RX_LOG_WARN,
			"key=%s event=registry-full max_keys=%u "
			"msg=\"calls to new keys pass through unguarded\"",
			key, cfg.registry.max_keys);
	return g;
}

static void release(struct rx_guard *g)
{
	rx__lock(&registry_lock);
	rx_registry_release(registry, g);
	rx__unlock(&registry_lock);
}

/* A connect's address permit (ADR-220), off its record. */
struct addr_hold {
	struct rx_guard *guard; /* NULL: none */
	struct rx_gate_permit permit;
	uint64_t start_ns;
};

/* Settle @h with @v, latency end_ns - start_ns, and unpin its guard;
 * nothing when it holds none. */
static void addr_settle(const struct addr_hold *h, enum rx_verdict v,
			uint64_t end_ns, uint64_t now, const char *at)
{
	if (!h->guard)
		return;
	settle(h->guard, &h->permit, v, h->start_ns, end_ns, now, at);
	release(h->guard);
}

/* ------------------------------------------------------------------------
 * Ending a call on an fd.
 * ---------------------------------------------------------------------- */

/* What a finished call needs once the entry lock is dropped. */
struct ending {
	struct rx_guard *guard;
	struct rx_gate_permit permit;
	uint64_t start_ns, end_ns;
	struct addr_hold addr; /* the connect's address (ADR-220) */
};

/* Take the connect's address permit off @e into @h, if it still has one
 * (stripe lock held); h->guard is NULL otherwise. */
static inline __attribute__((always_inline)) void
take_addr_locked(struct rx_fd *e, struct addr_hold *h)
{
	uint32_t i;

	h->guard = e->addr_guard;
	if (!h->guard)
		return;
	h->start_ns = e->start_ns;
	h->permit.count = e->addr_count;
	for (i = 0; i < e->addr_count && i < 2; i++)
		h->permit.tickets[i] = e->addr_tickets[i];
	e->addr_guard = NULL;
}

/* Take the current call off @e (stripe lock held) and move to @phase.
 * Inline: it runs at every first byte (ADR-187). */
static inline __attribute__((always_inline)) void
end_call_locked(struct rx_fd *e, enum rx_fd_phase phase, uint64_t end_ns,
		struct ending *out)
{
	out->guard = e->guard;
	permit_copy(&out->permit, &e->permit);
	out->start_ns = e->start_ns;
	out->end_ns = end_ns;
	take_addr_locked(e, &out->addr);
	atomic_store_explicit(&e->phase, phase, memory_order_release);
}

/*
 * Settle a finished call with @v. Under RESILIX_KEY=host a connect whose
 * outcome was not seen yet still holds its address's permit (ADR-220):
 * the address takes the connect's outcome - a success when the call got
 * @connected (bytes came back), else @v - and a failure then releases
 * the name's call without evidence, since the program's own fallback
 * may reach the name through another address.
 */
static inline __attribute__((always_inline)) void
finish(struct ending *end, enum rx_verdict v, bool connected, uint64_t now,
       const char *at)
{
	if (end->addr.guard) {
		addr_settle(&end->addr, connected ? RX_SUCCESS : v,
			    end->end_ns, now, at);
		if (!connected)
			v = RX_REJECTED;
	}
	settle(end->guard, &end->permit, v, end->start_ns, end->end_ns, now,
	       at);
}

/* Is @op still about the call it began on? (stripe lock held) */
static bool same_call(const struct rx_op *op)
{
	enum rx_fd_phase ph = rx__fd_phase(op->e);

	return atomic_load_explicit(&op->e->epoch, memory_order_relaxed) ==
		   op->epoch &&
	       (ph == RX_FD_CONNECTING || ph == RX_FD_WAITING);
}

/*
 * Stale entries (ADR-190). A socket closed where the shim cannot see it
 * (fclose of an fdopen'd socket, a raw close system call, a close inside
 * libc, a signal handler's close while this thread was inside the shim)
 * leaves its entry behind, and the number may come back from open, pipe
 * or any call the shim does not wrap. Before the shim changes behaviour
 * on a number (admits - and may refuse - a new request) or takes evidence
 * from it, it checks that the number still holds the socket that
 * connected: one fstat, on those rare paths only.
 */

/* Has the socket on @fd a peer (is it connected)? Preserves errno. */
static bool connected_socket(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int saved = errno;
	bool peer = getpeername(fd, (struct sockaddr *)&ss, &len) == 0;

	errno = saved;
	return peer;
}

/* The socket on @fd: its st_dev and st_ino. false: not a socket (or
 * fstat failed). Preserves errno. */
static bool socket_id(int fd, uint64_t *dev, uint64_t *ino)
{
	struct stat st;
	int saved = errno;
	bool sock = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);

	errno = saved;
	*dev = sock ? (uint64_t)st.st_dev : 0;
	*ino = sock ? (uint64_t)st.st_ino : 0;
	return sock;
}

/* Does @fd still hold the socket @e connected? Preserves errno. */
static bool still_ours(int fd, struct rx_fd *e)
{
	struct stat st;
	int saved = errno;
	bool same = fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
		    (uint64_t)st.st_ino == atomic_load_explicit(
					       &e->sock_ino,
					       memory_order_relaxed) &&
		    (uint64_t)st.st_dev == atomic_load_explicit(
					       &e->sock_dev,
					       memory_order_relaxed);

	errno = saved;
	return same;
}

/*
 * Would settling @v with this latency count against the upstream - a
 * failure, an overload, a timeout, or a slow call? Only such evidence is
 * worth an fstat (ADR-190): the healthy path settles without one.
 */
static bool adverse(enum rx_verdict v, uint64_t start_ns, uint64_t end_ns)
{
	uint64_t slow_ns = cfg.guard.breaker.slow_call_ms * RX_NS_PER_MS;

	if (v == RX_REJECTED)
		return false;
	if (v != RX_SUCCESS && v != RX_ANSWERED)
		return true;
	return slow_ns > 0 && end_ns > start_ns && end_ns - start_ns >= slow_ns;
}

static void unmap(int fd, const struct rx_fd *only);

/* @fd no longer holds @e's socket: unmap it from @e, unless another
 * operation restarted @e since @epoch. (Other numbers of the socket keep
 * the record.) No lock held on entry or exit. */
static void forget_stale(int fd, struct rx_fd *e, uint32_t epoch)
{
	if (atomic_load_explicit(&e->epoch, memory_order_relaxed) != epoch)
		return;
	if (rx__log_enabled(RX_LOG_DEBUG))
		rx__log(RX_LOG_DEBUG, "fd=%d event=stale-fd", fd);
	unmap(fd, e);
}

/*
 * A record shared by several numbers (ADR-213) outlives any one of them:
 * a number closed where the shim cannot see it and handed out again to a
 * file still maps to the record while a duplicate keeps the socket and
 * its call alive. So on a shared record, evidence - bytes, an error, an
 * overdue read - is taken from a number only after one fstat shows that
 * it still holds the socket; a number that does not is unmapped, and what
 * it read says nothing about the call. Records with one number keep
 * ADR-190's cheaper rule. true: @op's number is not the socket's.
 */
static bool foreign_number(struct rx_op *op)
{
	if (atomic_load_explicit(&op->e->refs, memory_order_relaxed) <= 1 ||
	    still_ours(op->fd, op->e))
		return false;
	forget_stale(op->fd, op->e, op->epoch);
	return true;
}

/*
 * lock_call - take the lock of @op's fd if @op's call is still the one on
 * it. Returns the held lock, or NULL with nothing held (the call ended or
 * the fd was reused meanwhile).
 */
static struct rx_lock *lock_call(const struct rx_op *op)
{
	struct rx_lock *l = rx__fd_lock(op->e);

	rx__lock(l);
	if (!same_call(op)) {
		rx__unlock(l);
		return NULL;
	}
	return l;
}

/*
 * Settle @op's call with @v after an error or EOF, and retire the fd.
 * @stale: the failure is an EOF, ECONNRESET or EPIPE, which on a kept-alive
 * connection before any byte of the response means the server had closed
 * it while idle (ADR-149): then the call is released as RX_REJECTED, not
 * evidence, and the program's retry on a new connection decides.
 */
static void fail_call_stale(struct rx_op *op, enum rx_verdict v, const char *at,
			    bool stale)
{
	struct rx_lock *l;
	struct ending end;
	uint64_t now;

	if (!owner_fast() || foreign_number(op))
		return;
	now = now_ns();
	l = lock_call(op);
	if (l == NULL)
		return;
	/* A kept-alive connection the upstream had closed while idle fails
	 * at once: no evidence (ADR-149). One that fails after the slow-call
	 * threshold was not idle-closed: the request was being worked on
	 * (a worker that died on it), and that is evidence (ADR-225). */
	if (stale && op->e->reused && op->e->first_byte_ns == 0 &&
	    !(cfg.guard.breaker.slow_call_ms > 0 &&
	      now - op->e->start_ns >=
		  cfg.guard.breaker.slow_call_ms * RX_NS_PER_MS)) {
		v = RX_REJECTED;
		at = "stale-connection";
	}
	end_call_locked(op->e, RX_FD_DONE, now, &end);
	rx__unlock(l);
	if (adverse(v, end.start_ns, end.end_ns) && !still_ours(op->fd, op->e)) {
		/* Not the upstream's socket any more (ADR-190). */
		finish(&end, RX_REJECTED, false, now, "stale-fd");
		forget_stale(op->fd, op->e, op->epoch);
		return;
	}
	finish(&end, v, false, now, at);
}

static void fail_call(struct rx_op *op, enum rx_verdict v, const char *at)
{
	fail_call_stale(op, v, at, false);
}

/* Settle with an errno seen on @op. */
static void fail_errno(struct rx_op *op, int err)
{
	enum rx_phase phase =
	    op->phase == RX_FD_CONNECTING ? RX_PHASE_CONNECT : RX_PHASE_IO;

	fail_call_stale(
	    op, verdict_of_errno(err, phase),
	    phase == RX_PHASE_CONNECT ? "connect-error" : "io-error",
	    phase == RX_PHASE_IO && (err == ECONNRESET || err == EPIPE));
}

/* A timeout of SO_RCVTIMEO/SO_SNDTIMEO on a blocking socket. */
static void maybe_timeout(struct rx_op *op)
{
	if (!op->dontwait && blocking(op->fd))
		fail_call(op, rx_verdict_from_errno(ETIMEDOUT, RX_PHASE_IO),
			  "socket-timeout");
}

/*
 * Calls that never answer (ADR-145). With RESILIX_TIMEOUT_MS set, a call
 * whose answer comes (or whose fd is next used or closed) after that
 * deadline is a timeout. Without it, a call outstanding longer than
 * CALL_BOUND_NS is released as RX_REJECTED: it holds its permit no longer,
 * and it says nothing about the upstream (a long poll, a stream). The shim
 * has no thread and imposes no timer on the program: the deadline is
 * applied when the program next touches the fd (a read or write that
 * would block, the response's first byte, close).
 */
#define CALL_BOUND_NS (300 * UINT64_C(1000000000))

/* Is a call started at @start past its deadline or bound at @t? Then *@v
 * is what it settles as. */
static bool past_deadline(uint64_t start, uint64_t t, enum rx_verdict *v)
{
	uint64_t age = t > start ? t - start : 0;

	if (cfg.timeout_ms > 0) {
		if (age <= cfg.timeout_ms * RX_NS_PER_MS)
			return false;
		*v = RX_TIMEOUT;
		return true;
	}
	if (age <= CALL_BOUND_NS)
		return false;
	*v = RX_REJECTED;
	return true;
}

/* A read or write that would block: settle @op's call if it is overdue.
 * Returns true when it did, or when @op's number turned out not to hold
 * the socket (nothing more to do with it). */
static bool settle_overdue(struct rx_op *op)
{
	struct rx_lock *l;
	struct ending end;
	enum rx_verdict v;
	uint64_t now;

	if (!owner_fast())
		return false;
	if (foreign_number(op))
		return true; /* nothing of the call's to settle here */
	now = now_ns();
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (!same_call(op) || !past_deadline(op->e->start_ns, now, &v)) {
		rx__unlock(l);
		return false;
	}
	end_call_locked(op->e, RX_FD_DONE, now, &end);
	rx__unlock(l);
	if (v == RX_TIMEOUT && !still_ours(op->fd, op->e)) {
		finish(&end, RX_REJECTED, false, now, "stale-fd"); /* ADR-190 */
		forget_stale(op->fd, op->e, op->epoch);
		return true;
	}
	finish(&end, v, false, now, v == RX_TIMEOUT ? "deadline" : "expired");
	return true;
}

/* The shortest of the slow threshold and the deadline that are set: how
 * long a call runs before its abandonment can be a timeout. */
static uint64_t wait_ns(void)
{
	uint64_t slow_ns = cfg.guard.breaker.slow_call_ms * RX_NS_PER_MS;
	uint64_t deadline_ns = cfg.timeout_ms * RX_NS_PER_MS;

	if (slow_ns == 0 || (deadline_ns > 0 && deadline_ns < slow_ns))
		return deadline_ns;
	return slow_ns;
}

/*
 * Has the program sent nothing on @fd for at least @ns (ADR-193)? From
 * the kernel's TCP_INFO (tcpi_last_data_sent, in ms): no cost on the data
 * path. false when it cannot tell. Preserves errno.
 */
static bool quiet_for(int fd, uint64_t ns)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int saved = errno;
	bool quiet;

	memset(&ti, 0, sizeof(ti));
	quiet = rx__real_getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ==
			0 &&
		len >= offsetof(struct tcp_info, tcpi_last_data_sent) +
			   sizeof(ti.tcpi_last_data_sent) &&
		(uint64_t)ti.tcpi_last_data_sent * RX_NS_PER_MS >= ns;
	errno = saved;
	return quiet;
}

/* Move a pending connect to WAITING (it connected). */
static void connected(struct rx_op *op)
{
	struct addr_hold ah = {.guard = NULL};
	struct rx_lock *l;
	uint64_t now = now_ns();

	if (!owner_fast())
		return;
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (same_call(op) && rx__fd_phase(op->e) == RX_FD_CONNECTING) {
		/* When the request has not begun yet, the completion is seen
		 * here (a blocking connect's return): the idle time until its
		 * first write is the program's, not the upstream's (ADR-192). */
		if (!atomic_load_explicit(&op->e->wrote, memory_order_relaxed))
			op->e->connected_ns = now;
		take_addr_locked(op->e, &ah);
		atomic_store_explicit(&op->e->phase, RX_FD_WAITING,
				      memory_order_release);
	}
	rx__unlock(l);
	addr_settle(&ah, RX_SUCCESS, now, now, "connected");
}

/*
 * getsockopt(SO_ERROR) read 0 on a pending connect: if the socket has a
 * peer, the connect completed by now - note when, for first_write
 * (ADR-192). SO_ERROR is 0 while the connect is still in progress too,
 * hence getpeername; the phase stays CONNECTING, so that a connect()
 * polled again still finds its own call.
 */
static void seen_connected(struct rx_op *op)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct addr_hold ah = {.guard = NULL};
	struct rx_lock *l;
	uint64_t now;

	if (!owner_fast() ||
	    atomic_load_explicit(&op->e->wrote, memory_order_relaxed) ||
	    getpeername(op->fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	now = now_ns();
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (same_call(op) && op->e->connected_ns == 0 &&
	    !atomic_load_explicit(&op->e->wrote, memory_order_relaxed))
		op->e->connected_ns = now;
	if (same_call(op))
		take_addr_locked(op->e, &ah);
	rx__unlock(l);
	addr_settle(&ah, RX_SUCCESS, now, now, "connected");
}

/*
 * The first write of @op's call on a new connection (ADR-192): the call's
 * clock skips the idle gap between the connect's completion, where it was
 * seen, and this write - the program's think time. Latency is then the
 * connect's duration plus the time from the first request byte to the
 * first response byte. Once per call: later writes see `wrote` set.
 */
static void first_write(struct rx_op *op)
{
	struct rx_fd *e = op->e;
	struct rx_lock *l;
	uint64_t now;

	if (!owner_fast())
		return;
	now = now_ns();
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (same_call(op) &&
	    !atomic_load_explicit(&e->wrote, memory_order_relaxed)) {
		atomic_store_explicit(&e->wrote, 1, memory_order_relaxed);
		if (e->connected_ns != 0 && now > e->connected_ns &&
		    e->start_ns <= e->connected_ns)
			e->start_ns += now - e->connected_ns;
	}
	rx__unlock(l);
}

/*
 * End record @e (caller holds rx__inside; @fd is a number of its socket):
 * settle an outstanding call as abandoned, release the key, untrack. The
 * numbers that map to it keep doing so. No lock is held on entry or exit.
 */
static void end_record(int fd, struct rx_fd *e)
{
	struct rx_lock *l = rx__fd_lock(e);
	enum rx_fd_phase ph;
	struct ending end;
	uint64_t now = 0;
	bool awaited, pending, requested;

	rx__lock(l);
	ph = rx__fd_phase(e);
	if (ph == RX_FD_UNTRACKED) {
		rx__unlock(l);
		return;
	}
	if (ph == RX_FD_CONNECTING || ph == RX_FD_WAITING)
		now = now_ns();
	end_call_locked(e, RX_FD_UNTRACKED, now, &end);
	awaited = atomic_load_explicit(&e->awaiting, memory_order_relaxed);
	atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	pending = ph == RX_FD_CONNECTING && e->connected_ns == 0;
	requested = atomic_load_explicit(&e->wrote, memory_order_relaxed);
	__atomic_store_n(&e->guard, NULL, __ATOMIC_RELAXED);
	e->reused = 0;
	/* Release: a reader that sees the new epoch sees the guard change
	 * (start_call, ADR-186). */
	atomic_fetch_add_explicit(&e->epoch, 1, memory_order_release);
	rx__unlock(l);

	if (ph == RX_FD_CONNECTING || ph == RX_FD_WAITING) {
		/* Abandonment is not evidence (ADR-007), unless the call had
		 * already run past the slow threshold: then it timed out. */
		uint64_t slow_ns =
		    cfg.guard.breaker.slow_call_ms * RX_NS_PER_MS;
		bool late = slow_ns > 0 && now - end.start_ns >= slow_ns;
		enum rx_verdict over;

		/* Or past its RESILIX_TIMEOUT_MS deadline (ADR-145). */
		if (cfg.timeout_ms > 0 &&
		    past_deadline(end.start_ns, now, &over))
			late = true;
		/* Only a program that waited timed out: for its connect to
		 * complete, or for an answer - it tried to read since its
		 * last write, or it sent a request and then nothing for as
		 * long as the threshold (it waited in poll, as python does
		 * with a socket timeout). One that only sent (log shipping,
		 * a metrics push), or never sent (an idle pooled
		 * connection), and hung up abandoned nothing (ADR-193). */
		if (late && !awaited && !pending &&
		    !(requested && quiet_for(fd, wait_ns())))
			late = false;
		/* A number that no longer holds the socket (ADR-190). */
		if (late && !still_ours(fd, e))
			late = false;

		finish(&end, late ? RX_TIMEOUT : RX_REJECTED, false, now,
		       "close");
	} else {
		addr_settle(&end.addr, RX_REJECTED, now, now, "close");
	}
	release(end.guard);
}

/* @fd stops mapping to its record (only to @only, when not NULL); the
 * last number of a record ends it and frees it. */
static void unmap(int fd, const struct rx_fd *only)
{
	bool last;
	struct rx_fd *e = rx__fd_detach(fd, only, &last);

	if (e && last) {
		end_record(fd, e);
		rx__fd_free(e);
	}
}

/* Whatever @e (@fd's record, or NULL) knew of the socket is over: end it
 * for every number of the socket, and unmap @fd. */
static void drop(int fd, struct rx_fd *e)
{
	if (!e)
		return;
	end_record(fd, e);
	unmap(fd, e);
}

/* The checks every entry from socket.c makes: a record, not re-entered,
 * the process that owns the state. */
static struct rx_fd *entry_of(int fd)
{
	struct rx_fd *e = rx__fd_get(fd);

	if (!e || rx__reentered() || !owner())
		return NULL;
	return e;
}

void rx__fd_forget(int fd)
{
	int saved = errno;

	if (!entry_of(fd))
		return;
	rx__inside = 1;
	unmap(fd, NULL);
	rx__inside = 0;
	errno = saved;
}

void rx__fd_end(int fd)
{
	struct rx_fd *e = entry_of(fd);
	int saved = errno;

	if (!e)
		return;
	rx__inside = 1;
	end_record(fd, e);
	rx__inside = 0;
	errno = saved;
}

void rx__fd_dup(int fd, int newfd)
{
	uint64_t dev, ino;
	int saved = errno;

	if (newfd < 0 || newfd == fd || !entry_of(fd))
		return;
	rx__inside = 1;
	/* Stale state on the new number goes first (its old socket was
	 * closed where the shim could not see it). */
	unmap(newfd, NULL);
	if (socket_id(newfd, &dev, &ino))
		(void)rx__fd_share(fd, newfd, dev, ino);
	rx__inside = 0;
	errno = saved;
}

/*
 * The record for a connect on @fd, whose socket is @dev/@ino: @e (the
 * record @fd maps to, ended by the caller, or NULL) when it is this
 * socket's, else a fresh one. NULL: none to be had (pass through).
 */
static struct rx_fd *record_for_connect(int fd, struct rx_fd *e,
					uint64_t dev, uint64_t ino)
{
	if (e && (atomic_load_explicit(&e->sock_dev, memory_order_relaxed) !=
		      dev ||
		  atomic_load_explicit(&e->sock_ino, memory_order_relaxed) !=
		      ino)) {
		/* A record of another socket: the number changed hands
		 * behind our back (ADR-190). Its duplicates keep it. */
		unmap(fd, e);
		e = NULL;
	}
	if (!e)
		e = rx__fd_attach(fd);
	if (e) {
		atomic_store_explicit(&e->sock_dev, dev, memory_order_relaxed);
		atomic_store_explicit(&e->sock_ino, ino, memory_order_relaxed);
	}
	return e;
}

/* ------------------------------------------------------------------------
 * connect and getsockopt(SO_ERROR).
 * ---------------------------------------------------------------------- */

enum rx_op_decision rx__connect_begin(struct rx_op *op, int fd,
				      const struct sockaddr *sa, socklen_t len)
{
	struct rx_gate_permit permit;
	struct addr_hold ah;
	char key[RX_KEY_MAX + 1], ipkey[RX_KEY_MAX + 1];
	struct sockaddr_in v4;
	struct rx_guard *g;
	size_t iplen;
	bool named;
	struct rx_fd *e;
	struct rx_lock *l;
	uint64_t dev, ino;
	size_t klen;
	int saved = errno;
	int type = 0;
	socklen_t tlen = sizeof(type);
	uint64_t now;

	memset(op, 0, sizeof(*op));
	op->fd = fd;
	if (rx__reentered())
		return RX_OP_PASS;
	rx__inside = 1;
	if (!rx__ready() && !rx__init())
		goto pass;
	if ((unsigned)fd >=
		atomic_load_explicit(&rx__fd_capacity, memory_order_acquire) ||
	    !owner())
		goto pass;
	e = rx__fd_get(fd);
	if (rx__curl_active) {
		/* Inside curl_easy_perform: the curl layer attributes this
		 * call (ADR-152); whatever we knew of the fd is over. */
		drop(fd, e);
		goto pass;
	}
	/* ::ffff:a.b.c.d is a.b.c.d: one key, one set of filters (ADR-194).
	 * Only the key's view changes; the real connect gets @sa as given. */
	if (sa && (uintptr_t)sa < 4096)
		sa = NULL; /* a bad pointer: the kernel's EFAULT (ADR-195) */
	if (sa)
		sa = unmapped(sa, &len, &v4);
	iplen = sa ? format_key(sa, len, ipkey, sizeof(ipkey)) : 0;
	memcpy(key, ipkey, iplen + 1);
	klen = iplen;
	if (klen > 0 && cfg.key_host) /* ADR-144 */
		klen = rx__dns_key(sa, len, key, sizeof(key), klen);
	/* Keyed by a name: the connect's own outcome is the address's
	 * (ADR-220). */
	named = klen != iplen || memcmp(key, ipkey, klen) != 0;
	if (klen == 0) {
		/* Not an IP destination (AF_UNIX, or AF_UNSPEC, which
		 * dissolves a TCP association): whatever we knew is over. */
		drop(fd, e);
		goto pass;
	}
	if (!rx_filter_guarded(&cfg.include, &cfg.exclude, sa, len)) {
		/* Not a destination the user asked us to guard (ADR-143). */
		drop(fd, e);
		goto pass;
	}
	if (e && rx__fd_phase(e) == RX_FD_CONNECTING) {
		/* connect() again while a non-blocking connect is pending:
		 * the same call, polled. Another destination means the state
		 * is stale (the fd was closed behind our back). */
		bool again;

		l = rx__fd_lock(e);
		rx__lock(l);
		again = rx__fd_phase(e) == RX_FD_CONNECTING &&
			strcmp(key_of(e->guard), key) == 0;
		op->epoch =
		    atomic_load_explicit(&e->epoch, memory_order_relaxed);
		rx__unlock(l);
		if (again) {
			op->e = e;
			op->again = true;
			op->phase = RX_FD_CONNECTING;
			errno = saved;
			return RX_OP_TRACK;
		}
	}
	/* connect() on a socket that is connected already - the "make sure
	 * it is connected" habit: the kernel answers EISCONN and nothing
	 * leaves the host. Not a call, never refused, and the connection's
	 * own call goes on (ADR-216). */
	if (connected_socket(fd))
		goto pass;
	/* Anything else we hold for this fd is stale, or a reconnect after
	 * a failed connect: start afresh. */
	if (e)
		end_record(fd, e);
	if (rx__real_getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 ||
	    type != SOCK_STREAM || !socket_id(fd, &dev, &ino)) {
		drop(fd, e);
		goto pass;
	}
	e = record_for_connect(fd, e, dev, ino);
	if (!e)
		goto pass;

	now = now_ns();
	/* The address first: a dead address of a live name is refused at
	 * once, and the program's fallback moves on (ADR-220). */
	ah.guard = named ? acquire(ipkey, iplen, now) : NULL;
	ah.start_ns = now;
	if (ah.guard && !admit(ah.guard, &now, &ah.permit, "connect", fd,
			       false)) {
		release(ah.guard);
		rx__inside = 0;
		return RX_OP_REFUSE;
	}
	g = acquire(key, klen, now);
	if (!g || !admit(g, &now, &permit, "connect", fd, false)) {
		addr_settle(&ah, RX_REJECTED, now, now, "refused");
		if (!g)
			goto pass;
		release(g);
		rx__inside = 0;
		return RX_OP_REFUSE;
	}
	l = rx__fd_lock(e);
	rx__lock(l);
	/* Atomic: start_call reads it without the lock (ADR-186). */
	__atomic_store_n(&e->guard, g, __ATOMIC_RELAXED);
	permit_copy(&e->permit, &permit);
	e->addr_guard = ah.guard;
	if (ah.guard) {
		e->addr_count = ah.permit.count < 2 ? ah.permit.count : 2;
		e->addr_tickets[0] = ah.permit.tickets[0];
		e->addr_tickets[1] = ah.permit.tickets[1];
	}
	e->start_ns = now;
	e->first_byte_ns = 0;
	e->connected_ns = 0;
	atomic_store_explicit(&e->wrote, 0, memory_order_relaxed);
	atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	rx__sniff_reset(&e->sniff);
	op->epoch =
	    atomic_fetch_add_explicit(&e->epoch, 1, memory_order_release) + 1;
	atomic_store_explicit(&e->phase, RX_FD_CONNECTING,
			      memory_order_release);
	rx__unlock(l);
	op->e = e;
	op->phase = RX_FD_CONNECTING;
	errno = saved;
	return RX_OP_TRACK;
pass:
	rx__inside = 0;
	errno = saved;
	return RX_OP_PASS;
}

void rx__connect_end(struct rx_op *op, int rc)
{
	int err = errno;

	if (rc == 0 || (op->again && err == EISCONN))
		connected(op);
	else if (!pending_errno(err) && err != EALREADY)
		/* A synchronous failure (ECONNREFUSED on a blocking socket,
		 * ENETUNREACH...) settles at once. */
		fail_errno(op, err);
	rx__inside = 0;
	errno = err;
}

void rx__getsockopt_so_error(int fd, int rc, int value)
{
	struct rx_op op;
	struct rx_fd *e = rx__fd_get(fd);
	enum rx_fd_phase ph;
	int saved = errno;

	if (!e || rc != 0 || rx__reentered())
		return;
	ph = rx__fd_phase(e);
	if (ph != RX_FD_CONNECTING && (ph != RX_FD_WAITING || value == 0))
		return;
	memset(&op, 0, sizeof(op));
	op.fd = fd;
	op.e = e;
	op.phase = (uint8_t)ph;
	op.epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
	rx__inside = 1;
	if (value == 0)
		seen_connected(&op);
	else if (!pending_errno(value))
		fail_errno(&op, value);
	rx__inside = 0;
	errno = saved;
}

/* ------------------------------------------------------------------------
 * Receiving: the first response byte ends the call.
 * ---------------------------------------------------------------------- */

/* Feed the received bytes to the sniffer; settle when it decides. */
static void on_bytes(struct rx_op *op, ssize_t n, const struct iovec *iov,
		     int iovcnt)
{
	enum rx_sniff_result r = RX_SNIFF_MORE;
	struct rx_fd *e = op->e;
	enum rx_fd_phase next;
	enum rx_verdict v;
	struct ending end;
	struct rx_lock *l;
	size_t left = (size_t)n;
	bool late;
	int status = 0, i;
	uint64_t now;

	if (!owner_fast() || foreign_number(op))
		return;
	now = now_ns();
	l = lock_call(op);
	if (l == NULL)
		return;
	for (i = 0; i < iovcnt && left > 0 && r == RX_SNIFF_MORE; i++) {
		size_t take = iov[i].iov_len < left ? iov[i].iov_len : left;
		uint8_t lines = e->sniff.lines;

		r = rx__sniff_feed(&e->sniff, iov[i].iov_base, take, &status);
		/* Time to first byte of the response that answers: a final
		 * status line that began in this read resets it, so an
		 * interim 100 Continue does not count as the answer. */
		if (e->first_byte_ns == 0 || e->sniff.lines != lines)
			e->first_byte_ns = now;
		left -= take;
	}
	if (iov == NULL) {
		/* Bytes the shim could not see (spliced to a pipe): the
		 * upstream answered, in no protocol the shim reads. */
		if (e->first_byte_ns == 0)
			e->first_byte_ns = now;
		r = RX_SNIFF_OTHER;
	}
	switch (r) {
	case RX_SNIFF_MORE:
		/* Bytes arrived, so a pending connect did connect. */
		end.addr.guard = NULL;
		if (rx__fd_phase(e) == RX_FD_CONNECTING) {
			take_addr_locked(e, &end.addr);
			atomic_store_explicit(&e->phase, RX_FD_WAITING,
					      memory_order_release);
		}
		rx__unlock(l);
		addr_settle(&end.addr, RX_SUCCESS, now, now, "connected");
		return;
	case RX_SNIFF_FINAL:
		v = rx_verdict_from_http(status);
		next = RX_FD_IDLE;
		break;
	case RX_SNIFF_UPGRADE:
		/* The connection stops being HTTP: stop tracking it. */
		v = RX_SUCCESS;
		next = RX_FD_DONE;
		break;
	case RX_SNIFF_MALFORMED:
		v = RX_TRANSIENT;
		next = RX_FD_IDLE;
		break;
	case RX_SNIFF_OTHER:
	default:
		/* Not HTTP (TLS, a database protocol, a raw stream): the
		 * connection succeeded, and there is no request/response
		 * framing to find calls in, so every later write would
		 * otherwise start a call of its own. Stop tracking, as after
		 * an upgrade (ADR-147). */
		v = RX_SUCCESS;
		next = RX_FD_DONE;
		break;
	}
	/* Any later call on this connection reuses it (ADR-149). */
	e->reused = 1;
	late = past_deadline(e->start_ns, e->first_byte_ns, &v);
	end_call_locked(e, next, e->first_byte_ns, &end);
	rx__unlock(l);
	if (adverse(v, end.start_ns, end.end_ns) && !still_ours(op->fd, e)) {
		/* Bytes of whatever now has the number, not a response
		 * (ADR-190). */
		finish(&end, RX_REJECTED, false, now, "stale-fd");
		forget_stale(op->fd, e, op->epoch);
		return;
	}
	finish(&end, v, true, now,
	       late ? (v == RX_TIMEOUT ? "deadline" : "expired")
		    : "first-byte");
}

void rx__read_end(struct rx_op *op, ssize_t n, const struct iovec *iov,
		  int iovcnt)
{
	int err;

	if (n > 0) {
		/* Peeked bytes will be read again: sniff them then. on_bytes
		 * preserves errno: bytes arrived, errno is not read. */
		if (!op->peek)
			on_bytes(op, n, iov, iovcnt);
		rx__inside = 0;
		return;
	}
	err = errno;
	if (n == 0) {
		if (op->len > 0)
			fail_call_stale(op, RX_TRANSIENT, "eof", true);
	} else if (err == EAGAIN || err == EWOULDBLOCK) {
		if (!settle_overdue(op))
			maybe_timeout(op);
	} else if (!pending_errno(err)) {
		fail_errno(op, err);
	}
	rx__inside = 0;
	errno = err;
}

/* ------------------------------------------------------------------------
 * Sending: the first write after a response started begins a new call.
 * ---------------------------------------------------------------------- */

/*
 * Start a new call on @op's kept-alive fd, which was seen idle: admit it on
 * the fd's guard and make it the fd's current call. The guard and epoch
 * are read without the stripe lock (ADR-186): the guard is published with
 * an atomic store and stays pinned while the fd is tracked, and the commit
 * under the lock checks that the fd is still idle at the same epoch, so a
 * close or reconnect in between makes this admission a race loser that is
 * released, as before. Returns false when the call is refused.
 */
static bool start_call(struct rx_op *op)
{
	struct rx_fd *e = op->e;
	struct rx_gate_permit permit;
	struct rx_guard *g;
	struct rx_lock *l;
	uint32_t epoch;
	uint64_t now;

	epoch = atomic_load_explicit(&e->epoch, memory_order_acquire);
	g = __atomic_load_n(&e->guard, __ATOMIC_RELAXED);
	if (!g || rx__fd_phase(e) != RX_FD_IDLE)
		return true;
	now = now_ns();
	if (!admit(g, &now, &permit, "write", op->fd, op->dontwait))
		return false;
	l = rx__fd_lock(op->e);
	rx__lock(l);
	if (rx__fd_phase(e) == RX_FD_IDLE &&
	    atomic_load_explicit(&e->epoch, memory_order_relaxed) == epoch) {
		permit_copy(&e->permit, &permit);
		e->start_ns = now;
		e->first_byte_ns = 0;
		/* This write is the request's first (ADR-192). */
		atomic_store_explicit(&e->wrote, 1, memory_order_relaxed);
		rx__sniff_reset(&e->sniff);
		atomic_fetch_add_explicit(&e->epoch, 1, memory_order_relaxed);
		atomic_store_explicit(&e->phase, RX_FD_WAITING,
				      memory_order_release);
		g = NULL;
	}
	rx__unlock(l);
	if (g) /* Another thread moved first: not ours. */
		settle(g, &permit, RX_REJECTED, now, now, now, "race");
	return true;
}

/*
 * errno: nothing on the way to a tracked or passed-through write sets it
 * (the admission's wait and the settlements put it back themselves), so
 * it is neither saved nor restored here (ADR-185).
 */
enum rx_op_decision rx__write_begin(struct rx_op *op, int fd, int flags,
				    size_t len, const struct iovec *iov,
				    int iovcnt)
{
	struct rx_fd *e = rx__fd_get(fd);
	enum rx_fd_phase ph;

	if (!e)
		return RX_OP_PASS;
	ph = rx__fd_phase(e);
	if (ph == RX_FD_UNTRACKED || ph == RX_FD_DONE || rx__reentered())
		return RX_OP_PASS;
	rx__inside = 1;
	op->fd = fd;
	op->e = e;
	op->len = len;
	op->again = false;
	op->peek = false;
	op->dontwait = (flags & MSG_DONTWAIT) != 0;
	/* Inside curl_easy_perform a new request on a kept-alive
	 * connection is the curl layer's (ADR-152). */
	if (ph == RX_FD_IDLE && len > 0 && !rx__curl_active) {
		if (!owner_fast())
			goto pass;
		/* Only a request line starts a call: the rest of a body
		 * still being sent after an early response continues the
		 * exchange, never refused, never half-sent (ADR-191). */
		if (!rx__http_request_start(iov, iovcnt))
			goto pass;
		if (!still_ours(fd, e)) {
			/* The socket is gone; the number is another file's
			 * now: never refuse a write to it (ADR-190). */
			int saved = errno;

			forget_stale(fd, e,
				     atomic_load_explicit(
					 &e->epoch, memory_order_relaxed));
			errno = saved;
			goto pass;
		}
		if (!start_call(op)) {
			rx__inside = 0;
			return RX_OP_REFUSE;
		}
		ph = rx__fd_phase(e);
	}
	if (ph != RX_FD_CONNECTING && ph != RX_FD_WAITING)
		goto pass;
	op->phase = (uint8_t)ph;
	op->epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
	if (len > 0 && !atomic_load_explicit(&e->wrote, memory_order_relaxed))
		first_write(op); /* once per call (ADR-192) */
	/* More of the request: no answer awaited until the next read. */
	if (atomic_load_explicit(&e->awaiting, memory_order_relaxed))
		atomic_store_explicit(&e->awaiting, 0, memory_order_relaxed);
	return RX_OP_TRACK;
pass:
	rx__inside = 0;
	return RX_OP_PASS;
}

/*
 * A send failed with ECONNRESET or EPIPE while the request was going out:
 * an upstream that answers before it has read the whole request (413 to
 * an upload, 401 before the body) and then closes. The answer is in the
 * receive queue, where the program can still read it: peek it (64 bytes,
 * no wait) and judge the call by it, as the read would (ADR-225). True
 * when an answer was there.
 */
static bool answered_early(struct rx_op *op)
{
	char head[64];
	struct iovec v = {.iov_base = head, .iov_len = 0};
	ssize_t k = rx__real_recvfrom(op->fd, head, sizeof(head),
				      MSG_PEEK | MSG_DONTWAIT, NULL, NULL);

	if (k <= 0)
		return false;
	v.iov_len = (size_t)k;
	on_bytes(op, k, &v, 1);
	return true;
}

void rx__write_end(struct rx_op *op, ssize_t n)
{
	int err;

	if (n > 0) {
		if (op->phase == RX_FD_CONNECTING)
			connected(op);
		rx__inside = 0;
		return;
	}
	if (n < 0) {
		err = errno;
		if (err == EAGAIN || err == EWOULDBLOCK) {
			if (!settle_overdue(op))
				maybe_timeout(op);
		} else if ((err == ECONNRESET || err == EPIPE) &&
			   op->phase == RX_FD_WAITING && answered_early(op)) {
			/* judged by the answer */
		} else if (!pending_errno(err)) {
			fail_errno(op, err);
		}
		errno = err;
	}
	rx__inside = 0;
}

/* ------------------------------------------------------------------------
 * Keys for the other layers (curl.c): the same registry, locks, policies
 * and log lines as the socket layer, so a key guarded by both is one key.
 * ---------------------------------------------------------------------- */

const struct rx_config *rx__config(void)
{
	return &cfg;
}

uint64_t rx__now_ns(void)
{
	return now_ns();
}

bool rx__owner(void)
{
	return owner();
}

struct rx_guard *rx__key_acquire(const char *key, size_t len, uint64_t now)
{
	return acquire(key, len, now);
}

void rx__key_release(struct rx_guard *g)
{
	release(g);
}

bool rx__key_admit(struct rx_guard *g, uint64_t now,
		   struct rx_gate_permit *permit, struct rx_refusal *why,
		   const char *where)
{
	struct rx_breaker_stats st;
	struct rx_lock *l;

	/* No fd: curl_easy_perform blocks, so it may wait in the limiter's
	 * queue like a blocking socket (ADR-136, ADR-152). */
	if (admit(g, &now, permit, where, -1, false))
		return true;
	/* Why, for the program's error message: read back from the
	 * breaker rather than threaded through admit. */
	why->reason = RX_REASON_NONE;
	why->retry_after_ms = 0;
	if (!cfg.guard.breaker_on)
		return false;
	l = guard_lock(g);
	rx__lock(l);
	rx_breaker_stats(&g->breaker, now, &st);
	rx__unlock(l);
	if (st.state == RX_BREAKER_OPEN) {
		why->reason = RX_REASON_CIRCUIT_OPEN;
		why->retry_after_ms = st.open_remaining_ms;
	} else if (st.state == RX_BREAKER_HALF_OPEN) {
		why->reason = RX_REASON_HALF_OPEN_BUSY;
	}
	return false;
}

void rx__key_settle(struct rx_guard *g, const struct rx_gate_permit *permit,
		    enum rx_verdict v, uint64_t start_ns, uint64_t end_ns,
		    uint64_t now, const char *at)
{
	settle(g, permit, v, start_ns, end_ns, now, at);
}

/* ------------------------------------------------------------------------
 * Start-up and fork.
 * ---------------------------------------------------------------------- */

static void lock_all(void)
{
	uint32_t i;

	rx__fdtable_lock_all();
	for (i = 0; i < cfg.registry.max_keys; i++)
		rx__lock(&guard_locks[i]);
	rx__lock(&registry_lock);
}

static void unlock_all(void)
{
	uint32_t i;

	rx__unlock(&registry_lock);
	for (i = 0; i < cfg.registry.max_keys; i++)
		rx__unlock(&guard_locks[i]);
	rx__fdtable_unlock_all();
}

/* Set when the prepare handler took the locks (it does not when fork
 * was called from a signal handler that interrupted the shim). */
static bool fork_locked;

static void before_fork(void)
{
	fork_locked = false;
	if (!rx__ready() || rx__reentered() || !owner())
		return;
	lock_all();
	fork_locked = true;
}

static void after_fork_parent(void)
{
	if (fork_locked)
		unlock_all();
	fork_locked = false;
	if (rx__ready())
		rx__metrics_forked();
}

/* A forked child: drop the limiter places of threads that did not come
 * along (ADR-136). */
static void drop_waiters(void *arg, const char *key, struct rx_guard *g)
{
	(void)arg;
	(void)key;
	rx_guard_drop_waiters(g);
}

static void after_fork_child(void)
{
	uint32_t i;

	if (!rx__ready())
		return;
	/* Held or not, every lock is free in the child: a lock held by a
	 * thread that did not come along would never be released. */
	rx__lock_reset(&registry_lock);
	for (i = 0; i < cfg.registry.max_keys; i++)
		rx__lock_reset(&guard_locks[i]);
	rx__fdtable_reset_locks();
	rx__locks_held = 0; /* the child has only this thread, holding none */
	rx_registry_foreach(registry, drop_waiters, NULL);
	rx__metrics_after_fork();
	rx__state_after_fork();
	fork_locked = false;
	owner_pid = getpid();
	if (fork_word) /* wiped by the fork; atfork ran: ours again */
		atomic_store(fork_word, 1);
	rng_seed ^= (uint64_t)owner_pid << 32;
	atomic_fetch_add(&rng_epoch, 1);
	rx__inside = 0;
}

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
static bool another_copy_first(void)
{
	Dl_info mine, first, curl;
	const char *a, *b;
	void *sym = dlsym(RTLD_DEFAULT, "connect"), *perform;

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

/* An array of one @size-byte element per registry slot, zeroed, never
 * freed (start-up). NULL when it cannot be mapped. */
static void *map_per_key(size_t size)
{
	void *p = mmap(NULL, (size_t)cfg.registry.max_keys * size,
		       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
		       0);

	return p == MAP_FAILED ? NULL : p;
}

static int init_once(void)
{
	struct report_state rs = {false, RX_LOG_WARN};
	const struct rx_breaker_config *b;
	char fr[8], sr[8];
	int rc;

	rx__symbols_resolve();
	rx__jump_bind();
	/* A secure-execution process (setuid, setgid, file capabilities;
	 * reached only through /etc/ld.so.preload or dlopen, since ld.so
	 * ignores LD_PRELOAD there) passes through without reading the
	 * environment or opening a file it names (ADR-146). */
	if (getauxval(AT_SECURE))
		return INIT_OFF;
	if (rx_config_parse(&cfg, environ, NULL, NULL) != 0) {
		rx_config_parse(&cfg, environ, report, &rs);
		return INIT_OFF;
	}
	if (cfg.disable)
		return INIT_OFF;
	if (another_copy_first()) {
		/* The first copy reports the configuration; this one only
		 * says why it stands aside, at info level. */
		rx__log_setup(cfg.log_level, NULL);
		rx__log(RX_LOG_INFO, "event=second-copy action=pass-through");
		return INIT_OFF;
	}
	rs.level = cfg.log_level;
	rx_config_parse(&cfg, environ, report, &rs);
	rx__log_setup(cfg.log_level, cfg.log_file);

	if (rx__fdtable_init() != 0) {
		start_failed("cannot map the fd table", RX_ENOMEM);
		return INIT_OFF;
	}
	guard_locks = map_per_key(sizeof(struct rx_lock));
	key_waits = map_per_key(sizeof(struct key_wait));
	if (!guard_locks || !key_waits) {
		start_failed("cannot map the key locks", RX_ENOMEM);
		return INIT_OFF;
	}
	rc = rx_registry_create(&registry, &cfg.registry, &cfg.guard);
	if (rc != RX_OK) {
		start_failed("cannot create the key registry", rc);
		return INIT_OFF;
	}
	atomic_store(&rx__dns_on, cfg.key_host);
	owner_pid = getpid();
	arm_fork_word();
	rng_seed =
	    ((uint64_t)owner_pid << 32) ^ now_ns() ^ (uint64_t)time(NULL);
	atomic_store(&rng_epoch, 1);
	if (pthread_atfork(before_fork, after_fork_parent, after_fork_child) !=
	    0) {
		start_failed("cannot register fork handlers", RX_ENOMEM);
		return INIT_OFF;
	}
	rx__metrics_setup(&cfg, registry, &registry_lock, guard_locks);
	hooks_on = rx__log_enabled(RX_LOG_INFO) || rx__metrics_on;
	/* Hydrate before the first guarded call (ADR-170). */
	rx__state_setup(&cfg, registry, &registry_lock, guard_locks);
	/* Debug, not info: a shell script under the shim starts many
	 * processes, and info is for what the breakers do. */
	b = &cfg.guard.breaker;
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
		cfg.registry.max_keys,
		(unsigned long long)cfg.registry.key_ttl_ms,
		(unsigned)atomic_load(&rx__fd_capacity),
		cfg.guard.limiter_on
		    ? rx_limiter_algorithm_name(cfg.guard.limiter.algorithm)
		    : "off",
		cfg.guard.limiter.min_limit, cfg.guard.limiter.max_limit,
		cfg.guard.limiter.initial_limit,
		(unsigned long long)cfg.queue_timeout_ms);
	return INIT_READY;
}

bool rx__init(void)
{
	int expected = INIT_NONE;
	int inside = rx__inside;
	int saved = errno;
	int result;

	if (!atomic_compare_exchange_strong(&init_state, &expected,
					    INIT_RUNNING))
		return expected == INIT_READY;
	/* Calls re-entered from inside start-up (getenv, malloc, open)
	 * pass through. */
	rx__inside = 1;
	result = init_once();
	atomic_store_explicit(&init_state, result, memory_order_release);
	rx__inside = inside;
	errno = saved;
	return result == INIT_READY;
}

__attribute__((constructor)) static void rx_shim_constructor(void)
{
	(void)rx__init();
}
