/*
 * preload/log.c - the shim's log: logfmt lines, one real write(2) each.
 *
 * Design. The shim runs inside programs it must not disturb, often inside
 * a signal handler's reach and always inside somebody else's allocator and
 * stdio. So a line is formatted into a stack buffer with snprintf (no
 * FILE *, no malloc for the formats used here) and handed to the real
 * write in one call: lines from several threads, or from several processes
 * appending to one RESILIX_LOG_FILE (O_APPEND), never interleave.
 *
 * Format (stable; the demo parses transition lines):
 *   ts=2025-01-31T12:34:56.789Z level=info pid=4242 key=127.0.0.1:8080 \
 *   event=breaker-transition from=closed to=open reason=failure-rate ...
 * `ts` is RFC 3339 in UTC with milliseconds, computed from CLOCK_REALTIME
 * with a civil-from-days conversion instead of gmtime_r, which may take
 * the timezone lock and read files (allocating) on first use. Numbers with
 * a fraction are formatted by hand: printf's %f follows LC_NUMERIC.
 *
 * The level and the fd are set once at start-up. RESILIX_LOG_FILE is
 * moved to an fd number >= 100, out of the way of the low numbers programs
 * hard-code; if the program closes that number anyway (a daemon closing
 * every fd) or dup2s over it, the log falls back to stderr instead of
 * writing into whatever file gets the number next.
 *
 * Never into the program's files (ADR-202). A daemon closes fd 2 and its
 * next open() gets the number; fclose(stderr) or a raw close does so
 * where the shim cannot see it. So the file behind fd 2 at start-up
 * (device and inode) is recorded, and each line checks it with one fstat:
 * while fd 2 still holds that file the line goes there, otherwise it is
 * dropped - after a close of fd 2 the shim saw, for good. The log file is
 * checked the same way (a hidden close of fd >= 100), falling back to
 * stderr. No copy of stderr is kept open: a pipe's reader (a shell's
 * `$(daemon)`) must see EOF when the program closes its stderr.
 *
 * Never blocking (ADR-203). The log file is opened with O_NONBLOCK and
 * kept so: a FIFO without a reader is refused at open (ENXIO: one line,
 * stderr instead) and a full pipe drops the line, counted and reported
 * with the next line that gets through (`event=log-suppressed`).
 *
 * Never a signal (ADR-362). A write to a pipe or a socket whose reader is
 * gone raises SIGPIPE, whose default action ends the program: a shell's
 * `prog 2>&1 | head` that stopped reading, a FIFO log file whose reader
 * went away, journald's stream socket behind a service's stderr. A line is
 * the shim's, and the program's signal disposition must be what it would
 * be without the shim: to a socket the line goes with send(MSG_NOSIGNAL);
 * to a pipe or FIFO with SIGPIPE blocked on the thread for the write, and
 * a SIGPIPE the write raised - one that was not pending before it - taken
 * back with sigtimedwait before the mask is restored. A regular file or a
 * terminal raises none: written as they are. The file type comes from the
 * fstat each line makes anyway (ADR-202).
 *
 * Rate limit (ADR-165). A flapping upstream trips and recovers its breaker
 * as fast as its calls allow, and a program with many keys can log many
 * transitions a second; the host's stderr (often a container's log, billed
 * and rotated by someone else) must not be flooded. Lines at levels error,
 * warn and info pass a token bucket per process: 20 lines a second,
 * bursts of 50 (a whole incident's transitions across dozens of keys get
 * through; a flap of thousands a second does not). It is GCRA - one
 * atomic "theoretical arrival time", updated with compare-and-swap - so it
 * needs no lock and no timer. Lines over the limit are counted, and the
 * next line written is preceded by `event=log-suppressed lines=N` (which
 * takes a token too: such a pair waits for two, so the bound holds for
 * every line, and lines keep coming through between summaries); a
 * destructor reports a count still pending at exit. Debug lines (one per
 * call by design, asked for explicitly) are not limited.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
#include "symbols.h"

#define LINE_MAX_BYTES 512

/* The rate limit (ADR-165): 20 lines/s, bursts of 50. */
#define LOG_RATE_PER_S 20
#define LOG_BURST 50
#define LOG_EMISSION_NS (UINT64_C(1000000000) / LOG_RATE_PER_S)

static _Atomic uint64_t log_tat_ns;	/* GCRA theoretical arrival time */
static _Atomic uint64_t log_suppressed; /* lines dropped, not reported */

enum rx_log_level rx__log_level = RX_LOG_WARN;
/* The log's file; 2 is stderr. Read inline by rx__log_fd_lost. */
atomic_int rx__log_fd = 2;

/* The files behind stderr and the log file at start-up (ADR-202). */
enum { ERR_ANY, ERR_CHECK, ERR_GONE };
static atomic_int err_state = ERR_ANY; /* ERR_ANY until rx__log_setup */
static dev_t err_dev, log_dev;
static ino_t err_ino, log_ino;

/* Where RESILIX_LOG_FILE goes: above the numbers programs hard-code
 * (shells' `exec 3>`, socket activation's fd 3), out of their way. */
#define LOG_FD_MIN 100

/* Does @fd still hold the file @dev/@ino? One fstat; *@mode: its type. */
static bool same_file(int fd, dev_t dev, ino_t ino, mode_t *mode)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return false;
	*mode = st.st_mode;
	return st.st_dev == dev && st.st_ino == ino;
}

/* fd 2 when it still holds the stderr of start-up, else -1; *@mode: the
 * type of its file. */
static int err_fd(mode_t *mode)
{
	struct stat st;

	switch (atomic_load_explicit(&err_state, memory_order_relaxed)) {
	case ERR_ANY:
		/* Before start-up: any file, but its type all the same. */
		*mode = fstat(2, &st) == 0 ? st.st_mode : S_IFIFO;
		return 2;
	case ERR_CHECK:
		if (same_file(2, err_dev, err_ino, mode))
			return 2;
		atomic_store(&err_state, ERR_GONE);
		return -1;
	default:
		return -1;
	}
}

/* Where a line goes: the log file while it holds its file, else stderr
 * while it holds its own (ADR-202); -1: nowhere. *@mode: the file's
 * type (ADR-362). */
static int line_fd(mode_t *mode)
{
	int fd = atomic_load_explicit(&rx__log_fd, memory_order_relaxed);

	if (fd == 2)
		return err_fd(mode);
	if (same_file(fd, log_dev, log_ino, mode))
		return fd;
	atomic_compare_exchange_strong(&rx__log_fd, &fd, 2);
	return err_fd(mode);
}

/*
 * One write of @buf to @fd, a file of type @mode, that raises no SIGPIPE
 * the program would see (ADR-362). Async-signal-safe, like the calls it
 * makes. Returns what the write returned, errno as it left it.
 */
static ssize_t quiet_write(int fd, mode_t mode, const void *buf, size_t len)
{
	static const struct timespec zero = {0, 0};
	sigset_t pipe_set, old, pending;
	bool was_pending;
	ssize_t n;
	int err;

	if (S_ISSOCK(mode)) {
		n = rx__real_send(fd, buf, len, MSG_NOSIGNAL);
		if (n >= 0 || errno != ENOTSOCK)
			return n;
		/* The number changed hands since the fstat: go on. */
	} else if (!S_ISFIFO(mode)) {
		return rx__real_write(fd, buf, len);
	}
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	if (pthread_sigmask(SIG_BLOCK, &pipe_set, &old) != 0)
		return rx__real_write(fd, buf, len);
	/* A SIGPIPE pending already (the program blocks it) is the
	 * program's: it stays, and ours merges with it. */
	was_pending =
	    sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
	n = rx__real_write(fd, buf, len);
	err = errno;
	if (n < 0 && err == EPIPE && !was_pending)
		(void)sigtimedwait(&pipe_set, NULL, &zero);
	(void)pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return n;
}

/* Write all of @len bytes with as few real writes as the kernel allows
 * (one, for a line on a regular file or a pipe). A line that finds the
 * non-blocking log pipe full is dropped and counted (ADR-203). */
/*
 * Write one line: @buf[0..@len) ends in its only newline. Anything else
 * that is a control character (from a key, a path or a value the line
 * quotes) becomes '?', so a line stays one printable line.
 */
static void write_line(int fd, mode_t mode, char *buf, size_t len)
{
	int tries = 0;
	size_t i;

	if (fd < 0)
		return;
	for (i = 0; i + 1 < len; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = '?';
	while (len > 0 && tries++ < 8) {
		ssize_t n = quiet_write(fd, mode, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			atomic_fetch_add_explicit(&log_suppressed, 1,
						  memory_order_relaxed);
			return;
		}
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

void rx__log_plain(const char *msg)
{
	char line[LINE_MAX_BYTES];
	int saved = errno;
	int n = snprintf(line, sizeof(line), "resilix: %s\n", msg);

	if (n > 0) {
		if ((size_t)n >= sizeof(line)) {
			n = (int)sizeof(line) - 1;
			line[n - 1] = '\n';
		}
		mode_t mode = 0;
		int fd = err_fd(&mode);

		write_line(fd, mode, line, (size_t)n);
	}
	errno = saved;
}

void rx__log_setup(enum rx_log_level level, const char *path)
{
	int fd;

	struct stat st;

	rx__log_level = level;
	atomic_store(&rx__log_fd, 2);
	if (fstat(2, &st) == 0) {
		err_dev = st.st_dev;
		err_ino = st.st_ino;
		atomic_store(&err_state, ERR_CHECK);
	} else {
		atomic_store(&err_state, ERR_GONE); /* no stderr to write to */
	}
	if (!path)
		return;
	/* O_NONBLOCK: a FIFO without a reader fails with ENXIO instead of
	 * hanging the program before main (ADR-203); kept for the writes. */
	fd = open(path,
		  O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY |
		      O_NONBLOCK,
		  0644);
	if (fd >= 0 && fd < LOG_FD_MIN) {
		/* The real fcntl: the shim's own wrapper is the program's. */
		int high = rx__real_fcntl(fd, F_DUPFD_CLOEXEC, LOG_FD_MIN);

		if (high >= 0) {
			rx__real_close(fd);
			fd = high;
		}
	}
	if (fd < 0) {
		char msg[LINE_MAX_BYTES - 16];
		const char *name = strerrorname_np(errno);

		/* Unguarded logging is not a reason to stop guarding. */
		snprintf(msg, sizeof(msg),
			 "RESILIX_LOG_FILE=\"%.200s\" cannot be opened (%s%s); "
			 "logging to stderr",
			 path, name ? name : "error",
			 errno == ENXIO ? ": a FIFO with no reader" : "");
		rx__log_plain(msg);
		return;
	}
	if (fstat(fd, &st) != 0) {
		rx__real_close(fd);
		return;
	}
	log_dev = st.st_dev;
	log_ino = st.st_ino;
	atomic_store(&rx__log_fd, fd);
}

/* rx__log_fd_lost's rest, once @fd is stderr or the log's file. */
void rx__log_fd_lost_slow(int fd)
{
	int expected = fd;

	/* A vfork child (posix_spawn, python's subprocess) shares this
	 * memory and closes or dup2s fds before it execs: its closes are not
	 * the owner's, and must not move the owner's log (ADR-363). Before
	 * start-up recorded the owner, the process is its own. */
	if (rx__owner_pid != 0 && !rx__owner())
		return;
	/* Our own file: back to stderr. Stderr itself closed or replaced
	 * by the program: its next file is the program's (ADR-202). */
	if (fd != 2)
		atomic_compare_exchange_strong(&rx__log_fd, &expected, 2);
	else if (atomic_load_explicit(&err_state, memory_order_relaxed) ==
		 ERR_CHECK)
		atomic_store(&err_state, ERR_GONE);
}

/*
 * Civil date from days since 1970-01-01 (Howard Hinnant's
 * days_from_civil inverse, valid for the proleptic Gregorian calendar).
 */
static void civil(int64_t days, int *y, unsigned *m, unsigned *d)
{
	int64_t z = days + 719468;
	int64_t era = (z >= 0 ? z : z - 146096) / 146097;
	unsigned doe = (unsigned)(z - era * 146097);
	unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	unsigned mp = (5 * doy + 2) / 153;

	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y = (int)(yoe + era * 400) + (*m <= 2);
}

/* Format "2025-01-31T12:34:56.789Z" into @buf. */
static int fmt_ts(char *buf, size_t size)
{
	struct timespec ts;
	int64_t secs, days, sod;
	unsigned m, d;
	int y;

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return snprintf(buf, size, "1970-01-01T00:00:00.000Z");
	secs = (int64_t)ts.tv_sec;
	days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
	sod = secs - days * 86400;
	civil(days, &y, &m, &d);
	return snprintf(buf, size, "%04d-%02u-%02uT%02u:%02u:%02u.%03uZ", y, m,
			d, (unsigned)(sod / 3600), (unsigned)(sod / 60 % 60),
			(unsigned)(sod % 60), (unsigned)(ts.tv_nsec / 1000000));
}

/*
 * May @lines (1 or 2) lines be written now? GCRA: each line pushes the
 * theoretical arrival time one emission interval later; a line is refused while
 * that time is more than (burst - 1) intervals ahead of now. Lock-free, O(1)
 * expected.
 */
static bool log_admit(unsigned lines)
{
	const uint64_t tolerance = (LOG_BURST - 1) * LOG_EMISSION_NS;
	struct timespec ts;
	uint64_t now, tat, base, next;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
		return true;
	now = (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
	tat = atomic_load_explicit(&log_tat_ns, memory_order_relaxed);
	do {
		base = tat > now ? tat : now;
		if (base + (lines - 1) * LOG_EMISSION_NS - now > tolerance)
			return false;
		next = base + lines * LOG_EMISSION_NS;
	} while (!atomic_compare_exchange_weak_explicit(&log_tat_ns, &tat, next,
							memory_order_relaxed,
							memory_order_relaxed));
	return true;
}

/* Write the line that reports @n suppressed lines. */
static void log_suppressed_line(uint64_t n)
{
	char line[LINE_MAX_BYTES];
	char ts[40];
	int len;

	fmt_ts(ts, sizeof(ts));
	len = snprintf(line, sizeof(line),
		       "ts=%s level=warn pid=%ld event=log-suppressed "
		       "lines=%llu limit_per_s=%d burst=%d\n",
		       ts, (long)getpid(), (unsigned long long)n,
		       LOG_RATE_PER_S, LOG_BURST);
	if (len > 0 && (size_t)len < sizeof(line)) {
		mode_t mode = 0;
		int fd = line_fd(&mode);

		write_line(fd, mode, line, (size_t)len);
	}
}

void rx__log(enum rx_log_level level, const char *fmt, ...)
{
	char line[LINE_MAX_BYTES];
	char ts[40];
	int saved = errno;
	mode_t mode = 0;
	size_t len;
	va_list ap;
	int n, fd;

	if (!rx__log_enabled(level))
		return;
	if (level != RX_LOG_DEBUG) {
		uint64_t dropped;
		bool pending;

		/* After a gap the summary goes first, and takes a token of
		 * its own: the bound holds for every line written. */
		pending = atomic_load_explicit(&log_suppressed,
					       memory_order_relaxed) != 0;
		if (!log_admit(pending ? 2 : 1)) {
			atomic_fetch_add_explicit(&log_suppressed, 1,
						  memory_order_relaxed);
			goto out;
		}
		dropped = atomic_exchange_explicit(&log_suppressed, 0,
						   memory_order_relaxed);
		if (dropped)
			log_suppressed_line(dropped);
	}
	fmt_ts(ts, sizeof(ts));
	n = snprintf(line, sizeof(line), "ts=%s level=%s pid=%ld ", ts,
		     rx_log_level_name(level), (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(line))
		goto out;
	len = (size_t)n;
	va_start(ap, fmt);
	n = vsnprintf(line + len, sizeof(line) - len, fmt, ap);
	va_end(ap);
	if (n < 0)
		goto out;
	len += (size_t)n;
	if (len >= sizeof(line) - 1)
		len = sizeof(line) - 2; /* truncated: keep room for '\n' */
	line[len++] = '\n';
	fd = line_fd(&mode);
	write_line(fd, mode, line, len);
out:
	errno = saved;
}

char *rx__fmt_rate(char *buf, size_t size, double rate)
{
	unsigned hundredths;

	if (!(rate >= 0.0)) /* also catches NaN */
		rate = 0.0;
	if (rate > 1.0)
		rate = 1.0;
	hundredths = (unsigned)(rate * 100.0 + 0.5);
	snprintf(buf, size, "%u.%02u", hundredths / 100, hundredths % 100);
	return buf;
}

/* Lines suppressed near the end would otherwise go unmentioned. */
__attribute__((destructor)) static void log_at_exit(void)
{
	int saved = errno;
	uint64_t dropped = atomic_exchange(&log_suppressed, 0);

	if (dropped)
		log_suppressed_line(dropped);
	errno = saved;
}
