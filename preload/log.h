/*
 * preload/log.h - the shim's log (log.c): logfmt lines, one real write(2)
 * each.
 *
 * Every line is formatted into a stack buffer (no allocation, no stdio)
 * and written with a single rx__real_write, so lines from threads and
 * processes sharing the file never interleave. Timestamps are RFC 3339
 * UTC with milliseconds, computed without gmtime (no locale, no locks).
 * Thread-safe, errno-preserving. Decisions: ADR-165, ADR-202, ADR-203.
 */
#ifndef RESILIX_PRELOAD_LOG_H
#define RESILIX_PRELOAD_LOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "shim_config.h"

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
 * gets the number next. Two compares, inline, when it is not: no call
 * (ADR-607). Thread-safe. */
extern atomic_int rx__log_fd; /* the log's number; 2: stderr (log.c) */

/* rx__log_fd_lost_slow - rx__log_fd_lost's rest, for @fd 2 or the log's
 * number: the owner check (ADR-363), then back to stderr (ADR-202).
 * Thread-safe. */
void rx__log_fd_lost_slow(int fd);

static inline void rx__log_fd_lost(int fd)
{
	if (__builtin_expect(
		fd == 2 || fd == atomic_load_explicit(&rx__log_fd,
						      memory_order_relaxed),
		0))
		rx__log_fd_lost_slow(fd);
}

/* rx__log_plain - write "resilix: <msg>\n" to stderr whatever the level
 * (configuration errors must reach a human). No allocation. */
void rx__log_plain(const char *msg);

/* rx__fmt_rate - format a rate 0..1 as "0.60" into @buf (locale-free:
 * %f would print "0,60" under a German LC_NUMERIC). Returns @buf. */
char *rx__fmt_rate(char *buf, size_t size, double rate);

#endif
