/*
 * preload/shim.h - internal interfaces of libresilix_preload.so.
 *
 * The shim is layered like socket_wrapper: every exported libc name
 * (socket.c, io.c) is a thin wrapper that asks the call lifecycle (call.c)
 * whether the fd matters, calls the lazily bound real function (symbols.c)
 * and reports the result back. call.c owns every lock and all mutable
 * state; fdtable.c holds per-fd call state; sniff_http.c reads status
 * lines; log.c writes logfmt lines; config.c parses the environment.
 *
 * Rules every file follows (DESIGN.md section 3, "Never make the host
 * worse"):
 *   - Nothing is exported but the wrappers (RX_EXPORT); the library is
 *     built with -fvisibility=hidden, core included.
 *   - Internal code never calls an interposed libc name directly (that
 *     would re-enter our own wrapper); it calls rx__real_*().
 *   - No lock is held across a call into libc, and no allocation happens
 *     inside an interposed call: the fd table, the registry and the lock
 *     arrays are created once, at start-up.
 *   - A per-thread "inside the shim" flag (rx__inside) makes any call that
 *     re-enters the shim on the same thread (a signal handler calling write
 *     while we are inside send) pass straight through.
 *   - errno is preserved on every path that does not refuse.
 */
#ifndef RESILIX_PRELOAD_SHIM_H
#define RESILIX_PRELOAD_SHIM_H

#include <netdb.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "resilix.h"
#include "shim_config.h"

/* Make a wrapper visible in the dynamic symbol table. */
#define RX_EXPORT __attribute__((visibility("default")))

/*
 * Thread-local storage of the shim. initial-exec: the variable lives in the
 * static TLS block, so an access is one %fs-relative load and never calls
 * __tls_get_addr, which may allocate on first use (and so re-enter us).
 */
#define RX_TLS __thread __attribute__((tls_model("initial-exec")))

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

/* ------------------------------------------------------------------------
 * Locks (inline). A spinlock that yields: every critical section of the
 * shim is a few hundred instructions without a call into libc, so
 * spinning is cheaper than a futex; yielding after a while keeps a
 * preempted holder from starving its waiters. Being a plain word, it is
 * reset in a forked child by a store (see rx__after_fork_child).
 * ---------------------------------------------------------------------- */
struct rx_lock {
	atomic_int held;
};

/* How many shim locks this thread holds or is taking: a longjmp out of a
 * signal handler that interrupted a critical section must not let this
 * thread take them again (ADR-226). Counted before the lock is taken and
 * after it is released (signal fences keep the order on this thread), so
 * no instant of holding goes uncounted. Zeroed in a forked child. */
extern RX_TLS int rx__locks_held;

static inline void rx__lock(struct rx_lock *l)
{
	unsigned spins = 0;

	rx__locks_held++;
	atomic_signal_fence(memory_order_seq_cst);
	while (atomic_exchange_explicit(&l->held, 1, memory_order_acquire)) {
		while (atomic_load_explicit(&l->held, memory_order_relaxed)) {
			if (++spins >= 128) {
				sched_yield();
				spins = 0;
			}
		}
	}
}

/* One try; true when @l is now held. */
static inline bool rx__trylock(struct rx_lock *l)
{
	rx__locks_held++;
	atomic_signal_fence(memory_order_seq_cst);
	if (!atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
		return true;
	atomic_signal_fence(memory_order_seq_cst);
	rx__locks_held--;
	return false;
}

static inline void rx__unlock(struct rx_lock *l)
{
	atomic_store_explicit(&l->held, 0, memory_order_release);
	atomic_signal_fence(memory_order_seq_cst);
	rx__locks_held--;
}

static inline void rx__lock_reset(struct rx_lock *l)
{
	atomic_store_explicit(&l->held, 0, memory_order_relaxed);
}

/* ------------------------------------------------------------------------
 * symbols.c - the real libc functions, bound lazily.
 *
 * Each rx__real_X behaves like libc's X. The first call of any of them (or
 * the constructor) resolves the whole table with dlsym(RTLD_NEXT) exactly
 * once. While that is in progress - on this thread (dlsym's calloc reached
 * an allocator that called a wrapped function) or on another - calls go to
 * the raw system call instead of waiting. A symbol dlsym cannot find stays
 * unbound and its calls use the system call for good. Thread-safe and
 * async-signal-safe once resolved; O(1).
 * ---------------------------------------------------------------------- */

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
ssize_t rx__real_preadv2(int fd, const struct iovec *iov, int iovcnt,
			 off_t off, int flags);
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

/* ------------------------------------------------------------------------
 * dns.c - getaddrinfo observed for RESILIX_KEY=host (ADR-144).
 * ---------------------------------------------------------------------- */

/* Set once at start-up when RESILIX_KEY=host: getaddrinfo results are
 * remembered from then on. */
extern atomic_bool rx__dns_on;

/*
 * rx__dns_key - if a getaddrinfo result of this process had @sa's address,
 * write "name:port" into @key (@size bytes) and return its length;
 * otherwise return @iplen and leave @key alone (the caller's ip:port key).
 * Never waits, no allocation, thread-safe and async-signal-safe; O(name).
 */
size_t rx__dns_key(const struct sockaddr *sa, socklen_t len, char *key,
		   size_t size, size_t iplen);

/* ------------------------------------------------------------------------
 * sniff_http.c - the HTTP/1.x status-line sniffer.
 *
 * Fed the response bytes of one call in as many pieces as the application
 * reads them; decides once it has seen "HTTP/x.y NNN" (or that the bytes are
 * not HTTP). 1xx interim responses other than 101 are skipped up to the
 * blank line that ends their headers, then the next status line is read.
 * Pure: no clock, no I/O, no allocation; O(bytes fed until decided).
 * ---------------------------------------------------------------------- */
enum rx_sniff_result {
	RX_SNIFF_MORE = 0, /* undecided: feed the next bytes */
	RX_SNIFF_FINAL,	   /* a final status line: *status is set */
	RX_SNIFF_UPGRADE,  /* 101 Switching Protocols: stop tracking */
	RX_SNIFF_OTHER,	   /* the first bytes are not HTTP: a success */
	RX_SNIFF_MALFORMED /* HTTP that broke after an interim response */
};

struct rx_sniff_http {
	uint8_t state;	  /* status line or skipping interim headers */
	uint8_t pos;	  /* position within "HTTP/x.y NNN" */
	uint8_t interim;  /* interim responses seen (saturates) */
	uint8_t line_len; /* bytes on the current header line (saturates) */
	uint8_t lines;	  /* status lines begun, mod 256: a caller that sees
			     it change during a feed knows a (possibly final)
			     response began in that piece */
	uint8_t pad;
	uint16_t status; /* digits accumulated */
};

/* rx__sniff_reset - start a new response. O(1). */
void rx__sniff_reset(struct rx_sniff_http *s);

/* The byte-at-a-time sniffer behind rx__sniff_feed (sniff_http.c). */
enum rx_sniff_result rx__sniff_feed_slow(struct rx_sniff_http *s,
					 const void *buf, size_t len,
					 int *status);

static inline bool rx__sniff_digit(unsigned char c)
{
	return (unsigned char)(c - '0') < 10;
}

/*
 * rx__sniff_feed - consume @len bytes of response.
 * @status (not NULL): set for RX_SNIFF_FINAL and RX_SNIFF_UPGRADE.
 * Returns RX_SNIFF_MORE until decided, then the decision. After a decision
 * the sniffer must be reset before it is fed again.
 *
 * Inline fast path (ADR-146, ADR-187): a whole final status line
 * "HTTP/d.d ddd" (first digit not 1) at the start of a fresh response -
 * the usual first read of an answer - is decided here with a few
 * compares, exactly as the byte-at-a-time machine would decide it;
 * interim responses, split status lines and everything else go to it.
 */
static inline enum rx_sniff_result rx__sniff_feed(struct rx_sniff_http *s,
						  const void *buf, size_t len,
						  int *status)
{
	const unsigned char *p = buf;

	if (s->state == 0 && s->pos == 0 && len >= 12 &&
	    __builtin_memcmp(p, "HTTP/", 5) == 0 && rx__sniff_digit(p[5]) &&
	    p[6] == '.' && rx__sniff_digit(p[7]) && p[8] == ' ' &&
	    rx__sniff_digit(p[9]) && p[9] != '1' && rx__sniff_digit(p[10]) &&
	    rx__sniff_digit(p[11])) {
		s->lines++;
		s->pos = 12;
		s->status = (uint16_t)((p[9] - '0') * 100 + (p[10] - '0') * 10 +
				       (p[11] - '0'));
		*status = s->status;
		return RX_SNIFF_FINAL;
	}
	return rx__sniff_feed_slow(s, buf, len, status);
}

/*
 * rx__http_request_start - do the bytes @iov (@iovcnt entries; NULL when
 * unknown, as for sendfile) begin an HTTP/1.x request line: a method of
 * A-Z, '-', '_', a space and a request target's first byte (ADR-191)?
 * Reads at most 24 bytes. Pure, O(1).
 */
bool rx__http_request_start(const struct iovec *iov, int iovcnt);

/* ------------------------------------------------------------------------
 * fdtable.c - per-connection call state, found by fd (ADR-213).
 *
 * A flat map indexed by fd holds the index of the number's record, or 0;
 * duplicates of a socket map to one record, which counts them. Map and
 * records are sized from RLIMIT_NOFILE (capped at RX_FD_CAP) and mapped
 * once at start-up with mmap, so untouched entries cost no memory and
 * nothing goes through malloc. fds at or beyond the capacity are never
 * tracked. Record fields other than `phase` and `refs` are guarded by the
 * record's stripe lock (rx__fd_lock); `phase` is also read without it by
 * the fast path, which is the whole cost of an untracked fd: one bounds
 * check, one load, one branch.
 * ---------------------------------------------------------------------- */
#define RX_FD_CAP 65536	      /* most fds the table covers */
#define RX_FD_STRIPES 256     /* stripe locks over the records (power of 2) */
#define RX_FD_ENTRY_BYTES 256 /* bytes per record (power of 2) */

enum rx_fd_phase {
	RX_FD_UNTRACKED = 0, /* not ours: everything passes through */
	RX_FD_CONNECTING,    /* admitted at connect, outcome unknown yet */
	RX_FD_WAITING,	     /* connected, a call waits for its first byte */
	RX_FD_IDLE, /* no call outstanding: the next write starts one */
	RX_FD_DONE  /* finished for good (error, upgrade): pass
		       through until close releases the key */
};

struct rx_fd {
	_Atomic uint8_t phase; /* enum rx_fd_phase */
	uint8_t reused;	       /* a call on this connection was answered:
				  the current one reuses it (ADR-149) */
	_Atomic uint8_t wrote; /* the current call's request began: its first
				  write was seen (ADR-192) */
	_Atomic uint8_t awaiting; /* a read was attempted since the call's
				     last write: the program waits for an
				     answer (ADR-193) */
	_Atomic uint32_t epoch; /* bumped at each call start and untrack, so
				   an operation that raced with them can tell
				   its result belongs to another call */
	struct rx_guard *guard; /* pinned key while tracked */
	uint64_t start_ns;	/* admission time of the current call */
	uint64_t first_byte_ns; /* first byte of the current response, or 0 */
	uint64_t connected_ns;	/* the connect was seen to complete, or 0 */
	struct rx_sniff_http sniff;
	struct rx_gate_permit permit; /* the current call's tickets */
	/* st_dev and st_ino of the socket that connected on this number
	 * (fstat at connect): before the shim changes anything on the number
	 * later, it checks the number still holds that socket (ADR-190).
	 * Atomic: read without the stripe lock. */
	_Atomic uint64_t sock_dev, sock_ino;
	/* Numbers mapped to this record; 0: free. Changed under the stripe
	 * lock (fdtable.c). */
	_Atomic uint32_t refs;
	/* RESILIX_KEY=host: a connect's outcome is its address's (ADR-220).
	 * The address's guard, pinned from the connect until its outcome is
	 * known, and its tickets (a guard holds at most two); NULL when the
	 * call is keyed by address anyway. */
	struct rx_guard *addr_guard;
	uint32_t addr_count;
	struct rx_ticket addr_tickets[2];
} __attribute__((aligned(RX_FD_ENTRY_BYTES)));

/* A record fills one power-of-two slot: the fast path of every I/O call
 * finds it with a shift instead of a multiply (ADR-146), and no two
 * records share a cache line. Untouched records cost no memory (mmap). */
_Static_assert(sizeof(struct rx_fd) == RX_FD_ENTRY_BYTES,
	       "struct rx_fd outgrew its slot: raise RX_FD_ENTRY_BYTES");

extern _Atomic uint32_t *rx__fd_map; /* per fd: its record's index, or 0 */
extern struct rx_fd *rx__fd_pool;    /* records 1..capacity (0 unused) */
extern _Atomic uint32_t rx__fd_capacity; /* 0 until the table exists */

/* rx__fdtable_init - map the table once. Returns 0, or -1 (untracked
 * everything). Not thread-safe: called from the init-once only. */
int rx__fdtable_init(void);

/* rx__fd_get - the record of @fd, or NULL when @fd has none or is not
 * covered. Thread-safe, async-signal-safe, O(1). */
static inline struct rx_fd *rx__fd_get(int fd)
{
	uint32_t cap =
	    atomic_load_explicit(&rx__fd_capacity, memory_order_acquire);
	uint32_t i;

	if ((unsigned)fd >= cap)
		return NULL;
	i = atomic_load_explicit(&rx__fd_map[fd], memory_order_acquire);
	return i ? &rx__fd_pool[i] : NULL;
}

/* rx__fd_phase - the phase of a record, without its lock. O(1). */
static inline enum rx_fd_phase rx__fd_phase(struct rx_fd *e)
{
	return (enum rx_fd_phase)atomic_load_explicit(&e->phase,
						      memory_order_acquire);
}

/* rx__fd_tracked - does @fd map to a record? The whole cost of a
 * close/dup2/socket on an untracked fd. O(1). */
static inline bool rx__fd_tracked(int fd)
{
	return rx__fd_get(fd) != NULL;
}

/* The stripe locks, padded so stripes used by different threads do not
 * share a line (fdtable.c). */
struct rx_fd_stripe {
	struct rx_lock lock;
	char pad[64 - sizeof(struct rx_lock)];
} __attribute__((aligned(64)));
extern struct rx_fd_stripe rx__fd_stripes[RX_FD_STRIPES];

/* rx__fd_lock - the stripe lock that guards record @e. Inline: it is
 * taken on every tracked operation. O(1). */
static inline struct rx_lock *rx__fd_lock(const struct rx_fd *e)
{
	return &rx__fd_stripes[(size_t)(e - rx__fd_pool) &
			       (RX_FD_STRIPES - 1)]
		    .lock;
}

/*
 * rx__fd_attach - give @fd, which has no record, a free one (refs 1,
 * fields as the last user left them: phase untracked, epoch counting on).
 * Returns it, or NULL when @fd is not covered or already has a record.
 * Takes stripe locks, never across libc. Thread-safe; O(1) unless
 * duplicates of earlier sockets still hold the records of lower numbers.
 */
struct rx_fd *rx__fd_attach(int fd);

/*
 * rx__fd_share - @newfd (which must have no record) is a duplicate of
 * @fd: map it to @fd's record, if @fd still has one and that record's
 * socket is @dev/@ino (the caller's fstat of @newfd: a number that changed
 * hands behind the shim's back shares nothing). Returns whether it did.
 * Thread-safe, O(1).
 */
bool rx__fd_share(int fd, int newfd, uint64_t dev, uint64_t ino);

/*
 * rx__fd_detach - unmap @fd (only from @only, when not NULL) and return
 * the record it had, or NULL. *@last: @fd was its last number; the caller
 * then ends the record's call and hands the record back with rx__fd_free
 * (until then nobody else gets it). Thread-safe, O(1).
 */
struct rx_fd *rx__fd_detach(int fd, const struct rx_fd *only, bool *last);

/* rx__fd_free - @e, detached from its last number, is free again. */
void rx__fd_free(struct rx_fd *e);

/* rx__fdtable_lock_all / rx__fdtable_unlock_all - take or drop every
 * stripe, in index order (fork prepare and parent handlers). O(stripes). */
void rx__fdtable_lock_all(void);
void rx__fdtable_unlock_all(void);

/* rx__fdtable_reset_locks - free every stripe, held or not (forked child,
 * where a holder may not exist). O(stripes). */
void rx__fdtable_reset_locks(void);

/* ------------------------------------------------------------------------
 * log.c - logfmt lines, one real write(2) each.
 *
 * Every line is formatted into a stack buffer (no allocation, no stdio)
 * and written with a single rx__real_write, so lines from threads and
 * processes sharing the file never interleave. Timestamps are RFC 3339
 * UTC with milliseconds, computed without gmtime (no locale, no locks).
 * Thread-safe, errno-preserving.
 * ---------------------------------------------------------------------- */

/* rx__log_setup - set the level and open @path (NULL = stderr) with
 * O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC. On failure prints one line to
 * stderr and keeps stderr. Start-up only. */
void rx__log_setup(enum rx_log_level level, const char *path);

/* The level in force: set once by rx__log_setup, before the shim is
 * ready, and only read afterwards. */
extern enum rx_log_level rx__log_level;

/* rx__log_enabled - would a line at @level be written? Inline, a load and
 * a compare: the data path asks it several times per call. O(1). */
static inline bool rx__log_enabled(enum rx_log_level level)
{
	return level != RX_LOG_OFF && level <= rx__log_level;
}

/*
 * rx__log - write "ts=... level=... pid=N " followed by the formatted
 * fields and a newline, if @level passes the filter. Lines longer than
 * 512 bytes are truncated. No allocation.
 */
void rx__log(enum rx_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* rx__log_fd_lost - the program closes @fd or dup2s over it: if that is
 * the log file, log to stderr from now on rather than into whatever file
 * gets the number next. One compare when it is not. Thread-safe. */
void rx__log_fd_lost(int fd);

/* rx__log_plain - write "resilix: <msg>\n" to stderr whatever the level
 * (configuration errors must reach a human). No allocation. */
void rx__log_plain(const char *msg);

/* rx__fmt_rate - format a rate 0..1 as "0.60" into @buf (locale-free:
 * %f would print "0,60" under a German LC_NUMERIC). Returns @buf. */
char *rx__fmt_rate(char *buf, size_t size, double rate);

/* ------------------------------------------------------------------------
 * call.c - the call lifecycle: initialisation, admission, settlement, the
 * registry and its locks.
 * ---------------------------------------------------------------------- */

/* The per-thread "inside the shim" flag. */
extern RX_TLS int rx__inside;

/*
 * rx__reentered - is this thread already in the shim, so that a call now
 * (from a signal handler) must pass straight through? rx__inside says so,
 * and so does a shim lock this thread holds or is taking: the flag alone
 * can be wrong after a longjmp that stayed inside a handler (ADR-226), a
 * held lock cannot, and taking it again would spin for ever. O(1).
 */
static inline bool rx__reentered(void)
{
	return rx__inside || rx__locks_held;
}

/* rx__ready - the shim is initialised and guarding. O(1). */
bool rx__ready(void);

/* rx__init - initialise once (constructor, or the first connect if it
 * came before the constructor). Re-entry and concurrent callers return at
 * once; the caller then passes its call through. Returns rx__ready(). */
bool rx__init(void);

/* What the begin step of an operation decided. */
enum rx_op_decision {
	RX_OP_PASS = 0, /* untracked: call the real function, nothing else */
	RX_OP_TRACK,	/* tracked: call the real function, then the end
			   step, immediately (it reads errno first) */
	RX_OP_REFUSE	/* refused: return -1 with rx__refusal_errno() */
};

/*
 * rx__refusal_errno - the errno for the RX_OP_REFUSE just returned on this
 * thread: ECONNREFUSED, or EINTR when a signal ended a send's wait for a
 * limiter slot and the real send would have failed with EINTR (ADR-223).
 * Read it once per refusal (it resets). Thread-safe (per thread), O(1).
 */
int rx__refusal_errno(void);

/*
 * rx__jumped - this thread is about to longjmp/siglongjmp (jump.c),
 * perhaps out of a wrapped call a signal interrupted: clear rx__inside and
 * give up a limiter place the thread waits in (a try of the guard's lock;
 * the place stays taken when the lock is held) - unless the thread holds
 * or is taking a shim lock, which the jump orphans: then it keeps passing
 * every call through. Async-signal-safe: no allocation, no blocking lock,
 * one futex wake (ADR-226).
 */
void rx__jumped(void);

/* rx__jump_bind - resolve the real jump functions (start-up). */
void rx__jump_bind(void);

/* One in-progress operation on a tracked fd, on the caller's stack. */
struct rx_op {
	int fd;
	struct rx_fd *e;
	size_t len;	/* bytes asked for: 0 makes a 0 result no EOF */
	uint32_t epoch; /* entry epoch at begin */
	uint8_t phase;	/* entry phase at begin (after any admission) */
	bool again;	/* connect on a socket whose connect is pending */
	bool peek;	/* MSG_PEEK: bytes will be read again */
	bool dontwait;	/* MSG_DONTWAIT: EAGAIN is not a timeout */
};

/*
 * rx__connect_begin - admission at connect. Tracks AF_INET/AF_INET6
 * stream sockets only; anything else (and a shim that is not ready, a
 * re-entered call, a forked child without atfork) passes through with
 * stale fd state dropped. On RX_OP_TRACK the caller runs the real connect
 * and then rx__connect_end. Thread-safe; takes and drops locks, never
 * across the real connect.
 */
enum rx_op_decision rx__connect_begin(struct rx_op *op, int fd,
				      const struct sockaddr *sa, socklen_t len);
void rx__connect_end(struct rx_op *op, int rc);

/*
 * rx__getsockopt_so_error - after a real getsockopt(SO_ERROR) that returned
 * @rc, with @value the error it read: settles a non-blocking connect that
 * failed. Cheap no-op for untracked fds. Preserves errno.
 */
void rx__getsockopt_so_error(int fd, int rc, int value);

/*
 * rx__read_begin/rx__read_end - any call that receives bytes (read, recv,
 * recvfrom, readv, recvmsg). @flags are the recv flags (0 for read).
 * begin is inline: it only copies what end needs into @op (ADR-185).
 * end gets the real result and the buffers the bytes landed in; it sniffs
 * them and settles the call at its first response byte, EOF or error.
 */
static inline enum rx_op_decision rx__read_begin(struct rx_op *op, int fd,
						 int flags, size_t len)
{
	struct rx_fd *e = rx__fd_get(fd);
	enum rx_fd_phase ph;

	if (!e)
		return RX_OP_PASS;
	ph = rx__fd_phase(e);
	/* Only a call waiting for its first byte cares about a read: body
	 * bytes of an answered call pass untouched. */
	if ((ph != RX_FD_CONNECTING && ph != RX_FD_WAITING) || rx__reentered())
		return RX_OP_PASS;
	rx__inside = 1;
	/* The program waits for the answer (ADR-193). */
	atomic_store_explicit(&e->awaiting, 1, memory_order_relaxed);
	op->fd = fd;
	op->e = e;
	op->len = len;
	op->phase = (uint8_t)ph;
	op->again = false;
	op->peek = (flags & MSG_PEEK) != 0;
	op->dontwait = (flags & MSG_DONTWAIT) != 0;
	op->epoch = atomic_load_explicit(&e->epoch, memory_order_relaxed);
	return RX_OP_TRACK;
}
void rx__read_end(struct rx_op *op, ssize_t n, const struct iovec *iov,
		  int iovcnt);

/*
 * rx__write_begin/rx__write_end - any call that sends bytes. begin
 * admits a new call when the previous response has started (kept-alive
 * connection) and the bytes @iov (@iovcnt entries, NULL when unknown)
 * begin a new request (ADR-191), and may refuse it; any other write
 * continues the current exchange and is never refused. @iov is read only
 * then, on a tracked fd. end settles the call on an I/O error.
 */
enum rx_op_decision rx__write_begin(struct rx_op *op, int fd, int flags,
				    size_t len, const struct iovec *iov,
				    int iovcnt);
void rx__write_end(struct rx_op *op, ssize_t n);

/*
 * rx__fd_forget - @fd is being closed or replaced (close, dup2/dup3 onto
 * it, a new fd returned by socket/accept that still had state): unmap it;
 * when it was its socket's last number, settle an outstanding call as
 * abandoned, release the key, untrack. Must run before the real close, so
 * a concurrent thread that gets the same fd number back never sees the
 * old state. Preserves errno. O(1).
 */
void rx__fd_forget(int fd);

/*
 * rx__fd_end - the program ended @fd's connection for reading (shutdown
 * SHUT_RD or SHUT_RDWR): settle an outstanding call as abandoned, release
 * the key, untrack - for every number of the socket; they stay mapped
 * until closed. Preserves errno. O(1).
 */
void rx__fd_end(int fd);

/*
 * rx__fd_dup - @newfd was just made a duplicate of @fd (dup, dup2, dup3,
 * fcntl F_DUPFD[_CLOEXEC] succeeded): drop @newfd's stale state and, when
 * @fd is tracked, let @newfd share its record (ADR-213), so a request
 * written through one number and answered through the other is one call.
 * One fstat when @fd is tracked; otherwise a load. Preserves errno.
 */
void rx__fd_dup(int fd, int newfd);

/* ------------------------------------------------------------------------
 * call.c for the other layers (curl.c): keys admitted and settled through
 * the socket layer's registry, locks and policies. Callers set rx__inside
 * around these (a signal handler on the thread must not re-enter a lock
 * they hold) and never hold a lock of their own across them. Each is
 * thread-safe and O(1); none allocates.
 * ---------------------------------------------------------------------- */

/* Set on a thread while it runs libcurl's curl_easy_perform for a transfer
 * the curl layer attributes: the socket layer then passes that thread's
 * connects and new requests through (ADR-152). */
extern RX_TLS int rx__curl_active;

/* The configuration in force (valid once rx__ready()). */
const struct rx_config *rx__config(void);

/* The monotonic clock in ns plus RX_CLOCK_OFFSET_NS (ADR-173; every
 * now_ns handed to the core comes from here), and whether this process
 * owns the state (false in a vfork/posix_spawn child, which must pass
 * through). */
#define RX_CLOCK_OFFSET_NS (UINT64_C(1) << 62)
uint64_t rx__now_ns(void);
bool rx__owner(void);

/* Pin the guard of @key (NULL: registry full, pass through) / unpin it. */
struct rx_guard *rx__key_acquire(const char *key, size_t len, uint64_t now_ns);
void rx__key_release(struct rx_guard *g);

/*
 * rx__key_admit - may a call on @g start now? Where the limiter would
 * queue it, waits like a blocking socket, up to RESILIX_QUEUE_TIMEOUT_MS
 * (ADR-136), with no lock held and rx__inside left set. true: @permit
 * is filled and must be settled once. false: refused (logged at debug
 * with @where); @why says why as far as the breaker knows (circuit open
 * with the ms until half-open, half-open busy, or RX_REASON_NONE for a
 * refusal by another policy).
 */
bool rx__key_admit(struct rx_guard *g, uint64_t now_ns,
		   struct rx_gate_permit *permit, struct rx_refusal *why,
		   const char *where);

/* rx__key_settle - settle an admitted call: latency end_ns - start_ns,
 * logged with @at. */
void rx__key_settle(struct rx_guard *g, const struct rx_gate_permit *permit,
		    enum rx_verdict v, uint64_t start_ns, uint64_t end_ns,
		    uint64_t now_ns, const char *at);

/* ------------------------------------------------------------------------
 * state.c - RESILIX_STATE_FILE (ADR-170 to ADR-174).
 * ---------------------------------------------------------------------- */

/*
 * rx__state_setup - validate RESILIX_STATE_FILE, map the buffer and hydrate
 * the file into @reg, which must be empty and not yet shared (start-up,
 * before the shim is ready). Remembers @reg and its locks for the write
 * at exit. Any failure is one line, then guarding without state. Not
 * thread-safe (start-up only); the only allocation is one mmap.
 */
void rx__state_setup(const struct rx_config *cfg, struct rx_registry *reg,
		     struct rx_lock *reg_lock, struct rx_lock *locks);

/*
 * rx__state_after_fork - forked child (atfork child handler): this process
 * writes the file at exit if its own calls settle, and only those count as
 * its own in the merge (ADR-222): the calls its parent made before the fork
 * are the parent's to write. O(1), no system call but getpid.
 */
void rx__state_after_fork(void);

/* Set once a call settled in this process (state.c reads it at exit). */
extern atomic_bool rx__state_dirty;

/* rx__state_touched - a call settled: this process writes the file at
 * exit. Inline: thread-safe, O(1), one relaxed load once set. */
static inline void rx__state_touched(void)
{
	if (!atomic_load_explicit(&rx__state_dirty, memory_order_relaxed))
		atomic_store_explicit(&rx__state_dirty, true,
				      memory_order_relaxed);
}

#endif
