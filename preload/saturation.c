/*
 * preload/saturation.c - a thread's own saturation, judged once a limiter
 * window (saturation.h, ADR-686): the share of the wall time since its
 * previous reading that it was runnable - on a CPU, or waiting in the run
 * queue for one - from /proc/thread-self/schedstat (its first two fields:
 * time on a CPU and time waiting to run, ns). A loop that always has work
 * is runnable all the time whether this host gives it the CPU or not: on
 * two busy CPUs node's loop, at 2000 fetches in flight, was on its CPU
 * 60-80 % of the time and in the run queue the rest. Where that file
 * cannot be read, the thread's CPU time alone (CLOCK_THREAD_CPUTIME_ID)
 * is the runnable time, which a busy host makes an underestimate.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guard-inl.h"
#include "saturation.h"
#include "symbols.h"

/* This thread's previous reading: monotonic time and runnable time, ns
 * (wall_ns 0: none yet), and the answer it gave. */
struct saturation {
	uint64_t wall_ns, run_ns;
	bool busy;
};

static RX_TLS struct saturation saturation;

/* The decimal number at *@p, which moves past it and one separator. */
static uint64_t number(const char **p, const char *end)
{
	uint64_t v = 0;

	while (*p < end && **p >= '0' && **p <= '9' && v < UINT64_MAX / 10)
		v = v * 10 + (uint64_t)(*(*p)++ - '0');
	if (*p < end)
		(*p)++;
	return v;
}

/* The thread's runnable time so far, ns, into @out: false when neither
 * source answers. The file through the real calls, with no lock of ours
 * taken and nothing allocated; the descriptor lives for the read only. */
static bool runnable_ns(uint64_t *out)
{
	char buf[96];
	const char *p = buf;
	struct timespec ts;
	ssize_t n = -1;
	int saved = errno; /* a sandbox without /proc: the program's errno */
	int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/thread-self/schedstat",
			      O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = rx__real_read(fd, buf, sizeof buf);
		(void)rx__real_close(fd);
	}
	errno = saved;
	if (n > 0) {
		uint64_t cpu = number(&p, buf + n);
		uint64_t wait = number(&p, buf + n);

		*out = cpu + wait;
		return true;
	}
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
		errno = saved;
		return false;
	}
	*out = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	return true;
}

bool rx__caller_saturated(uint64_t now_ns)
{
	struct saturation *s = &saturation;
	uint64_t run, wall;

	if (s->wall_ns != 0 && now_ns >= s->wall_ns &&
	    now_ns - s->wall_ns < RX_SATURATED_MIN_MS * RX_NS_PER_MS)
		return s->busy;
	if (!runnable_ns(&run))
		return false;
	if (s->wall_ns != 0 && now_ns > s->wall_ns && run >= s->run_ns) {
		wall = now_ns - s->wall_ns;
		/* run / wall >= permille / 1000, without a division; both
		 * deltas are far below 2^53 ns for any real interval. */
		s->busy = (run - s->run_ns) * 1000 >=
			  wall * RX_SATURATED_PERMILLE;
	}
	s->wall_ns = now_ns;
	s->run_ns = run;
	return s->busy;
}

void rx__settle_judging(struct rx_guard *g, const struct rx_gate_permit *permit,
			const struct rx_observation *obs)
{
	if (rx__guard_limiter_window_due(g, obs->now_ns) &&
	    rx__caller_saturated(obs->now_ns))
		rx_guard_note_caller_busy(g);
	rx_guard_settle(g, permit, obs);
}
