/*
 * preload/metrics.c - RESILIX_METRICS_FILE: the Prometheus text exposition
 * format, written atomically, driven by the host's own calls.
 *
 * Design. There is no thread and no timer in the host (docs/design.md section
 * 3): when a call settles or is refused (a refusal storm is when the
 * counters move most), rx__metrics_tick compares the monotonic time
 * with the next write time (one atomic load) and, once
 * RESILIX_METRICS_INTERVAL_MS has passed, the settling thread writes the
 * file; a destructor writes it once more at exit (ADR-160). Only one thread
 * writes at a time: a try-lock, and a thread that finds it taken skips -
 * the next settlement or the exit write catches up.
 *
 * A write has two halves (ADR-162). Copy: the registry lock is taken to
 * list the live keys (key bytes, guard, slot), then each guard's lock in
 * turn to copy its statistics; never two locks at once, never a lock
 * across a system call, so a writer cannot deadlock with the data path,
 * with the fork handlers (which take every lock), or with a signal
 * handler. Format and write: with no lock held, the copies are formatted
 * family by family into a 64 KiB buffer mapped once at start-up, which is
 * flushed with the real write(2) into a temporary file in the same
 * directory (O_CLOEXEC, so a concurrent exec never inherits it) whenever
 * it fills; rename(2) then replaces the file, so a reader (node-exporter's
 * textfile collector, `resilix-run --status`) sees the old file or the
 * new one, never half of one. Nothing is allocated inside an interposed
 * call, and no stdio is used: numbers with a fraction are formatted by
 * hand, since printf's %f follows LC_NUMERIC. A key evicted and reused
 * between the two halves is reported under its old name for one write;
 * its counters then look reset, which Prometheus's rate() handles.
 *
 * Latency (ADR-163, ADR-520). The guard keeps no latency estimate of its
 * own, so the shim keeps one per registry slot beside the guard locks: a
 * Prometheus histogram of the time to first byte of the settled calls,
 * fixed buckets (lathist.h) counted since the key was created, with their
 * sum: one increment per call, and unlike a summary's quantiles the
 * buckets of the %p files and of hosts add up (histogram_quantile over
 * sum by (key, le)). RX_REJECTED releases are not calls the upstream saw
 * and are left out. They are fed under the guard's lock, in O(1), and the
 * slot is reset when the registry reuses it for another key.
 *
 * Metric writes never influence admission (ADR-010): the writer reads
 * stats (rx_breaker_stats does not change state) and, on any failure
 * (directory missing, disk full), skips the write and logs one warning
 * until a write succeeds again.
 *
 * Processes (ADR-161, ADR-222). RESILIX_METRICS_FILE may contain "%p",
 * replaced by the pid, so that every process of a forking server writes its
 * own file; its series then carry a pid label (node-exporter drops series
 * that two files share) and the file is removed at exit. Without "%p",
 * the process that started the shim writes: a child forked without exec
 * keeps a copy of the parent's state and would otherwise overwrite the
 * parent's file with stale numbers - until the parent is gone, when the
 * child (a daemon's) takes the file over. (An exec'd child loads a fresh
 * shim that writes the same file; use "%p" for programs that start guarded
 * children.) A process in which no call settled or was refused writes
 * nothing at all: the `timeout`, `env` or shell that starts the program
 * loads the shim too, and exits last. A breaker's change of state is
 * written at once, whatever the interval.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"
#include "runtime.h"
#include "symbols.h"
#include "ownfile.h"
#include "lathist.h"

#define BUF_BYTES (64 * 1024)
/* Flush when less than this is left: a line with an escaped 255-byte key
 * fits. */
#define LINE_ROOM 1024

/* Every file this writer makes starts so (family() below): what it may
 * replace (ADR-215). */
#define METRICS_HEAD "# HELP resilix_"

/* Latency state of one registry slot (guarded by that guard's lock). */
struct lat {
	uint64_t bucket[RX_LATHIST_BUCKETS]; /* calls per bucket (not
						cumulative) */
	uint64_t count;	 /* calls observed since the key was created */
	uint64_t sum_us; /* their total latency, µs (saturating) */
};

/* What the writer copies of one key. */
struct snap {
	char key[RX_KEY_MAX + 1];
	struct rx_guard *guard;
	uint32_t index;
	struct rx_breaker_stats breaker;
	struct rx_guard_counters counters;
	uint32_t in_flight;
	bool limiter_on;
	struct rx_limiter_stats limiter;
	uint64_t bucket[RX_LATHIST_BUCKETS]; /* as struct lat */
	uint64_t count, sum_us;
};

bool rx__metrics_on; /* metrics are on (metrics.h) */
static bool breaker_on;
static struct rx_registry *registry;
static struct rx_lock *registry_lock;
static struct rx_lock *guard_locks;
static uint32_t max_keys;
static struct lat *lats;   /* max_keys, mmap (lazily touched) */
static struct snap *snaps; /* max_keys, mmap */
static char *buf;	   /* BUF_BYTES, mmap */
/* RESILIX_METRICS_FILE, copied at start-up and made absolute: the value
 * lives in the environment block, which programs reuse (nginx writes its
 * process title over it), and a daemon may chdir before it writes. */
static char path_template[PATH_MAX];
static bool per_pid; /* the template has %p */
static char path[PATH_MAX];
static char tmp_path[PATH_MAX];
/* With %p, every series carries the pid, so that the files of the
 * processes of one program never hold the same series (ADR-222). */
static char pid_label[32]; /* `pid="N",` or "" */
static char pid_only[32];  /* `{pid="N"}` or "" */
static pid_t writer_pid;
/* Without %p, who may take the file over when the writer is gone: only a
 * process that was its parent's first fork (the chain of a daemon's double
 * fork), so that the workers a server leaves behind do not all write the
 * same file, each with its own counters (ADR-222). */
static unsigned forks; /* fork()s of this process */
static bool heir;      /* this process was its parent's first fork */
static atomic_bool said_not_writer;
static uint64_t interval_ns;
static _Atomic uint64_t next_write_ns;
static atomic_int writing;
static atomic_bool warned;
static atomic_bool active; /* a call settled or was refused here */
static atomic_bool again;  /* a state change came during a write */

static void maybe_write(uint64_t now, bool force, bool soon);

/* ------------------------------------------------------------------------
 * Set-up.
 * ---------------------------------------------------------------------- */

/* Expand @path_template for @pid into path and tmp_path. Returns false
 * when the result does not fit. */
static bool expand_paths(pid_t pid)
{
	size_t o = 0;
	const char *s;
	int n;

	for (s = path_template; *s; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			n = snprintf(path + o, sizeof(path) - o, "%ld",
				     (long)pid);
			if (n < 0 || (size_t)n >= sizeof(path) - o)
				return false;
			o += (size_t)n;
			s++;
			continue;
		}
		if (o + 1 >= sizeof(path))
			return false;
		path[o++] = *s;
	}
	path[o] = '\0';
	if (per_pid) {
		snprintf(pid_label, sizeof(pid_label), "pid=\"%ld\",",
			 (long)pid);
		snprintf(pid_only, sizeof(pid_only), "{pid=\"%ld\"}",
			 (long)pid);
	}
	/* Not *.prom: node-exporter's textfile collector reads only files
	 * ending in .prom, so it never sees a half-written temporary. */
	n = snprintf(tmp_path, sizeof(tmp_path), "%s.tmp.%ld", path, (long)pid);
	return n > 0 && (size_t)n < sizeof(tmp_path);
}

static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

void rx__metrics_setup(const struct rx_config *cfg, struct rx_registry *reg,
		       struct rx_lock *reg_lock, struct rx_lock *locks)
{
	char msg[PATH_MAX + 128];

	if (!cfg->metrics_file)
		return;
	path_template[0] = '\0';
	if (cfg->metrics_file[0] != '/' &&
	    (!getcwd(path_template, sizeof(path_template)) ||
	     path_template[0] != '/'))
		path_template[0] = '\0';
	if (path_template[0] != '\0' && strcmp(path_template, "/") != 0)
		strcat(path_template, "/");
	if (strlen(path_template) + strlen(cfg->metrics_file) >=
	    sizeof(path_template)) {
		rx__log_plain("RESILIX_METRICS_FILE is too long; metrics are "
			      "off");
		return;
	}
	strcat(path_template, cfg->metrics_file);
	per_pid = strstr(path_template, "%p") != NULL;
	writer_pid = getpid();
	if (!expand_paths(writer_pid)) {
		snprintf(msg, sizeof(msg),
			 "RESILIX_METRICS_FILE is too long; metrics are off");
		rx__log_plain(msg);
		return;
	}
	max_keys = cfg->registry.max_keys;
	lats = map((size_t)max_keys * sizeof(*lats));
	snaps = map((size_t)max_keys * sizeof(*snaps));
	buf = map(BUF_BYTES);
	if (!lats || !snaps || !buf) {
		rx__log_plain("cannot map the metrics buffers; metrics are "
			      "off (guarding goes on)");
		return;
	}
	breaker_on = cfg->guard.breaker_on;
	registry = reg;
	registry_lock = reg_lock;
	guard_locks = locks;
	interval_ns = cfg->metrics_interval_ms * RX_NS_PER_MS;
	atomic_store(&next_write_ns, 0);
	rx__metrics_on = true;
}

void rx__metrics_after_fork(void)
{
	if (!rx__metrics_on)
		return;
	atomic_store(&writing, 0);
	heir = forks == 0;
	forks = 0;
	atomic_store(&said_not_writer, false);
	if (per_pid && expand_paths(getpid()))
		writer_pid = getpid();
}

void rx__metrics_forked(void)
{
	forks++;
}

void rx__metrics_quick_exit(void)
{
	/* The exit's step for a %p file (the removal) and nothing else:
	 * without %p, _exit writes nothing, as documented. Not in a vfork
	 * child, nor in a child forked without atfork: is_writer says no
	 * to a pid that is not the writer's. */
	if (rx__metrics_on && per_pid && !rx__reentered())
		maybe_write(rx__now_ns(), true, false);
}

/* ------------------------------------------------------------------------
 * Latency, on the data path.
 * ---------------------------------------------------------------------- */

static void lat_reset(struct lat *l)
{
	memset(l, 0, sizeof(*l));
}

/* Calls @g has settled that the upstream saw (every verdict but
 * RX_REJECTED); saturating. */
static uint64_t seen_calls(const struct rx_guard_counters *c)
{
	uint64_t n = 0;
	unsigned v;

	for (v = 0; v < RX_VERDICT_COUNT; v++) {
		if (v == RX_REJECTED)
			continue;
		n = n + c->settled[v] < n ? UINT64_MAX : n + c->settled[v];
	}
	return n;
}

void rx__metrics_observe(uint32_t index, const struct rx_guard *g,
			 const struct rx_observation *obs)
{
	struct lat *l;

	/* A wait on purpose is no latency (ADR-650): the histogram is the
	 * latency of the calls that have one. */
	if (!rx__metrics_on || index >= max_keys ||
	    obs->verdict == RX_REJECTED || obs->latency_us == RX_LATENCY_NONE)
		return;
	l = &lats[index];
	/* The guard's count of such calls includes this one, so it is above
	 * ours - unless the slot now holds another key (the registry reset
	 * the guard and counts from zero again). With a shared segment the
	 * guard counts every process's calls and ours only this process's
	 * (ADR-486): above ours too, so a guard's count below ours + 1 is
	 * the one sign of reuse that holds in both modes. A zeroed page is
	 * an empty histogram. */
	if (seen_calls(&g->counters) < l->count + 1)
		lat_reset(l);
	l->bucket[rx_lathist_index(obs->latency_us)]++;
	l->count++;
	l->sum_us = l->sum_us + obs->latency_us < l->sum_us
			? UINT64_MAX
			: l->sum_us + obs->latency_us;
}

/* ------------------------------------------------------------------------
 * Copying, under the locks.
 * ---------------------------------------------------------------------- */

struct collect {
	uint32_t n;
};

/* Registry lock held: list a live key. */
static void collect_key(void *arg, const char *key, struct rx_guard *g)
{
	struct collect *c = arg;
	struct snap *s;
	size_t len;

	if (c->n >= max_keys)
		return;
	s = &snaps[c->n++];
	len = strnlen(key, RX_KEY_MAX);
	memcpy(s->key, key, len);
	s->key[len] = '\0';
	s->guard = g;
	s->index = rx_registry_index(registry, g);
}

/* Copy one key's statistics; takes and drops its guard lock. */
static void copy_guard(struct snap *s, uint64_t now)
{
	struct rx_guard *g = s->guard;
	struct rx_lock *l = &guard_locks[s->index];
	struct lat *lt = &lats[s->index];

	rx__lock(l);
	if (breaker_on)
		rx_breaker_stats(&g->breaker, now, &s->breaker);
	else
		memset(&s->breaker, 0, sizeof(s->breaker));
	s->counters = g->counters;
	s->in_flight = g->in_flight;
	s->limiter_on = g->limiter_on;
	if (g->limiter_on)
		rx_limiter_stats(&g->limiter, now, &s->limiter);
	if (seen_calls(&g->counters) < lt->count)
		lat_reset(lt); /* the slot was reused and not fed since */
	memcpy(s->bucket, lt->bucket, sizeof(s->bucket));
	s->count = lt->count;
	s->sum_us = lt->sum_us;
	rx__unlock(l);
}

/* ------------------------------------------------------------------------
 * Formatting and writing, with no lock held.
 * ---------------------------------------------------------------------- */

struct out {
	int fd;
	size_t len;
	bool failed;
};

static void flush(struct out *o)
{
	size_t done = 0;

	while (!o->failed && done < o->len) {
		ssize_t n = rx__real_write(o->fd, buf + done, o->len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			o->failed = true;
		else
			done += (size_t)n;
	}
	o->len = 0;
}

static void put(struct out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (BUF_BYTES - o->len < LINE_ROOM)
		flush(o);
	va_start(ap, fmt);
	n = vsnprintf(buf + o->len, BUF_BYTES - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= BUF_BYTES - o->len)
		o->failed = true; /* cannot happen: a line < LINE_ROOM */
	else
		o->len += (size_t)n;
}

/* Escape a label value (text format: backslash, double quote and line
 * feed). @dst holds 2 * RX_KEY_MAX + 1 bytes. */
static const char *escape(char *dst, const char *src)
{
	char *d = dst;

	for (; *src; src++) {
		if (*src == '\\' || *src == '"') {
			*d++ = '\\';
			*d++ = *src;
		} else if (*src == '\n') {
			*d++ = '\\';
			*d++ = 'n';
		} else {
			*d++ = *src;
		}
	}
	*d = '\0';
	return dst;
}

/* Format a finite non-negative number with six decimals, or "NaN";
 * locale-free. */
static const char *num(char *dst, size_t size, double v)
{
	uint64_t whole, frac;

	if (isnan(v)) {
		snprintf(dst, size, "NaN");
		return dst;
	}
	if (v < 0)
		v = 0;
	if (v > 1e15)
		v = 1e15;
	whole = (uint64_t)v;
	frac = (uint64_t)((v - (double)whole) * 1e6 + 0.5);
	if (frac >= 1000000) {
		whole++;
		frac -= 1000000;
	}
	snprintf(dst, size, "%llu.%06llu", (unsigned long long)whole,
		 (unsigned long long)frac);
	return dst;
}

static void family(struct out *o, const char *name, const char *type,
		   const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/*
 * The families with one sample per key, "NAME{key="K"} VALUE": each names
 * the field of a key's snapshot it shows and how to print it. Tables, so
 * that a family is one line here and the writing loop exists once.
 */
enum value_kind {
	V_U32,	   /* uint32_t, as is */
	V_U64,	   /* uint64_t, as is */
	V_BOOL,	   /* bool, as 0 or 1 */
	V_RATIO,   /* double, six decimals */
	V_MS_AS_S, /* uint64_t ms, as seconds */
	V_US_AS_S  /* uint64_t µs, as seconds */
};

struct per_key_family {
	const char *name, *type, *help;
	enum value_kind kind;
	size_t offset; /* of the field in struct snap */
};

#define AT(field) offsetof(struct snap, field)

/* Format the field @f shows of key @s into @v. */
static void value_of(const struct per_key_family *f, const struct snap *s,
		     char *v, size_t size)
{
	const char *p = (const char *)s + f->offset;
	uint64_t u64;
	uint32_t u32;
	double d;
	bool b;

	switch (f->kind) {
	case V_U32:
		memcpy(&u32, p, sizeof(u32));
		snprintf(v, size, "%u", u32);
		break;
	case V_U64:
		memcpy(&u64, p, sizeof(u64));
		snprintf(v, size, "%llu", (unsigned long long)u64);
		break;
	case V_BOOL:
		memcpy(&b, p, sizeof(b));
		snprintf(v, size, "%d", b ? 1 : 0);
		break;
	case V_RATIO:
		memcpy(&d, p, sizeof(d));
		num(v, size, d);
		break;
	case V_MS_AS_S:
	case V_US_AS_S:
		memcpy(&u64, p, sizeof(u64));
		num(v, size, (double)u64 / (f->kind == V_MS_AS_S ? 1e3 : 1e6));
		break;
	}
}

static const struct per_key_family breaker_families[] = {
    {"resilix_breaker_transitions_total", "counter",
     "Circuit breaker state changes.", V_U64, AT(breaker.transitions)},
    {"resilix_breaker_open_remaining_seconds", "gauge",
     "Time left before an open breaker admits a probe.", V_MS_AS_S,
     AT(breaker.open_remaining_ms)},
    {"resilix_failure_ratio", "gauge",
     "Failed calls over calls in the breaker's window (0 when empty).", V_RATIO,
     AT(breaker.failure_rate)},
    {"resilix_slow_call_ratio", "gauge",
     "Slow calls over calls in the breaker's window (0 when empty or "
     "without RESILIX_SLOW_CALL_MS).",
     V_RATIO, AT(breaker.slow_call_rate)},
    {"resilix_window_calls", "gauge", "Calls in the breaker's window now.",
     V_U32, AT(breaker.window_count)},
    {"resilix_window_max_age_seconds", "gauge",
     "Effective age bound of the window (after starvation widening; 0 = "
     "none).",
     V_MS_AS_S, AT(breaker.effective_max_age_ms)},
    {"resilix_window_starved", "gauge",
     "1 when the age bound keeps the window below RESILIX_MIN_CALLS.", V_BOOL,
     AT(breaker.starved)},
    {"resilix_consecutive_failures", "gauge",
     "Failures in a row (the backstop's count).", V_U32,
     AT(breaker.consecutive_failures)},
};

static const struct per_key_family call_families[] = {
    {"resilix_slow_calls_total", "counter",
     "Settled calls at or above RESILIX_SLOW_CALL_MS.", V_U64,
     AT(counters.slow)},
    {"resilix_calls_in_flight", "gauge", "Admitted calls not settled yet.",
     V_U32, AT(in_flight)},
};

/* For the keys where a limiter runs. */
static const struct per_key_family limiter_families[] = {
    {"resilix_limiter_limit", "gauge",
     "Adaptive concurrency limit of the key now.", V_U32, AT(limiter.limit)},
    {"resilix_limiter_in_flight_calls", "gauge",
     "Calls the limiter counts in flight.", V_U32, AT(limiter.in_flight)},
    {"resilix_limiter_queued_calls", "gauge",
     "Blocking callers waiting for a place.", V_U32, AT(limiter.queued)},
    {"resilix_limiter_latency_p90_seconds", "gauge",
     "The limiter's latency signal: the last closed window's quantile (0 "
     "before the first window).",
     V_US_AS_S, AT(limiter.p90_us)},
    {"resilix_limiter_rtt_noload_seconds", "gauge",
     "The baseline latency the limiter compares with.", V_US_AS_S,
     AT(limiter.rtt_noload_us)},
    {"resilix_limiter_drops_total", "counter",
     "Overload and timeout verdicts the limiter saw.", V_U64,
     AT(limiter.drops)},
};

/* Write @count families of @fam for the first @n keys (with
 * @limiter_only, the keys where a limiter runs). */
static void per_key(struct out *o, const struct per_key_family *fam,
		    size_t count, uint32_t n, bool limiter_only)
{
	char k[2 * RX_KEY_MAX + 1], v[40];
	uint32_t i;
	size_t f;

	for (f = 0; f < count; f++) {
		family(o, fam[f].name, fam[f].type, fam[f].help);
		for (i = 0; i < n; i++) {
			if (limiter_only && !snaps[i].limiter_on)
				continue;
			value_of(&fam[f], &snaps[i], v, sizeof(v));
			put(o, "%s{%skey=\"%s\"} %s\n", fam[f].name, pid_label,
			    escape(k, snaps[i].key), v);
		}
	}
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void format_all(struct out *o, uint32_t n, uint32_t keys,
		       uint64_t overflows)
{
	char k[2 * RX_KEY_MAX + 1], v[40];
	uint32_t i;
	unsigned j;

	if (breaker_on) {
		family(o, "resilix_breaker_state", "gauge",
		       "Circuit breaker state: 1 for the current one of "
		       "closed, open, half-open.");
		for (i = 0; i < n; i++)
			for (j = 0; j < 3; j++)
				put(o,
				    "resilix_breaker_state{%skey=\"%s\","
				    "state=\"%s\"} %d\n",
				    pid_label, escape(k, snaps[i].key),
				    rx_breaker_state_name(j),
				    snaps[i].breaker.state == j);
		per_key(o, breaker_families, COUNT(breaker_families), n, false);
	}
	family(o, "resilix_calls_total", "counter",
	       "Admitted calls, by verdict (rejected: released without "
	       "evidence, e.g. abandoned).");
	for (i = 0; i < n; i++)
		for (j = 0; j < RX_VERDICT_COUNT; j++)
			put(o,
			    "resilix_calls_total{%skey=\"%s\",verdict=\"%s\"} "
			    "%llu\n",
			    pid_label, escape(k, snaps[i].key),
			    rx_verdict_name(j),
			    (unsigned long long)snaps[i].counters.settled[j]);
	family(o, "resilix_refusals_total", "counter",
	       "Calls resilix refused before they reached the network, by "
	       "reason.");
	for (i = 0; i < n; i++)
		for (j = 1; j < RX_REASON_COUNT; j++)
			put(o,
			    "resilix_refusals_total{%skey=\"%s\",reason=\"%s\"}"
			    " "
			    "%llu\n",
			    pid_label, escape(k, snaps[i].key),
			    rx_reason_name(j),
			    (unsigned long long)snaps[i].counters.refused[j]);
	per_key(o, call_families, COUNT(call_families), n, false);
	family(o, "resilix_call_latency_seconds", "histogram",
	       "Time to first byte of settled calls, since the key was "
	       "created.");
	for (i = 0; i < n; i++) {
		uint64_t cum = 0;

		escape(k, snaps[i].key);
		/* Cumulative, +Inf last and equal to _count (the text
		 * format's rules for a histogram). */
		for (j = 0; j < RX_LATHIST_BUCKETS; j++) {
			cum += snaps[i].bucket[j];
			put(o,
			    "resilix_call_latency_seconds_bucket{%skey=\"%s\","
			    "le=\"%s\"} %llu\n",
			    pid_label, k, rx_lathist_le[j],
			    (unsigned long long)cum);
		}
		put(o, "resilix_call_latency_seconds_sum{%skey=\"%s\"} %s\n",
		    pid_label, k,
		    num(v, sizeof(v), (double)snaps[i].sum_us / 1e6));
		put(o,
		    "resilix_call_latency_seconds_count{%skey=\"%s\"} %llu\n",
		    pid_label, k, (unsigned long long)snaps[i].count);
	}
	for (i = 0; i < n && !snaps[i].limiter_on; i++)
		;
	if (i < n) /* some key runs a limiter */
		per_key(o, limiter_families, COUNT(limiter_families), n, true);
	family(o, "resilix_registry_keys", "gauge",
	       "Keys (destinations) the registry holds.");
	put(o, "resilix_registry_keys%s %u\n", pid_only, keys);
	family(o, "resilix_registry_max_keys", "gauge",
	       "The registry's cap on keys (RESILIX_MAX_KEYS).");
	put(o, "resilix_registry_max_keys%s %u\n", pid_only, max_keys);
	family(o, "resilix_registry_overflows_total", "counter",
	       "Calls passed through unguarded because the registry was "
	       "full.");
	put(o, "resilix_registry_overflows_total%s %llu\n", pid_only,
	    (unsigned long long)overflows);
	/* Whose numbers these are: without %p, each program a script runs
	 * in turn replaces the file with its own, counted from its own
	 * start (ADR-368). */
	family(o, "resilix_writer_info", "gauge",
	       "The process that wrote this file, in its pid label: every "
	       "counter here is that process's own, since it started.");
	put(o, "resilix_writer_info{pid=\"%ld\"} 1\n", (long)getpid());
}

/* Is the file at path someone else's (ADR-215)? NULL when it may be
 * replaced: missing, or a regular file that starts as every file this
 * writer makes does (ownfile.h); else why not. */
static const char *foreign(void)
{
	static const struct rx_file_io io = {rx__real_read, rx__real_close};
	static char why[96];

	return rx_file_foreign(&io, path, METRICS_HEAD, strlen(METRICS_HEAD),
			       "resilix metrics file", why, sizeof(why));
}

/* Copy, format, write, rename. Caller holds the writer try-lock. */
static void write_file(uint64_t now)
{
	struct collect c = {0};
	struct out o = {-1, 0, false};
	uint32_t keys, i;
	uint64_t overflows;
	char msg[PATH_MAX + 160];
	const char *what = NULL;

	rx__lock(registry_lock);
	rx_registry_foreach(registry, collect_key, &c);
	keys = rx_registry_count(registry);
	overflows = rx_registry_overflows(registry);
	rx__unlock(registry_lock);
	for (i = 0; i < c.n; i++)
		copy_guard(&snaps[i], now);

	what = foreign();
	if (what) {
		if (!atomic_exchange(&warned, true))
			rx__log(RX_LOG_WARN,
				"event=metrics-write-refused file=\"%.200s\" "
				"msg=\"the file %s; resilix replaces only its "
				"own metrics files\"",
				path, what);
		return;
	}
	o.fd = rx_file_create_tmp(tmp_path, 0644);
	if (o.fd < 0) {
		what = "open";
		goto fail;
	}
	format_all(&o, c.n, keys, overflows);
	flush(&o);
	if (rx__real_close(o.fd) != 0 && errno != EINTR)
		o.failed = true;
	if (o.failed) {
		what = "write";
		unlink(tmp_path);
		goto fail;
	}
	if (rename(tmp_path, path) != 0) {
		what = "rename";
		unlink(tmp_path);
		goto fail;
	}
	atomic_store(&warned, false);
	rx__log(RX_LOG_DEBUG, "event=metrics-written keys=%u file=\"%.200s\"",
		c.n, path);
	return;
fail:
	if (!atomic_exchange(&warned, true)) {
		const char *name = strerrorname_np(errno);

		snprintf(msg, sizeof(msg),
			 "event=metrics-write-failed op=%s errno=%s "
			 "file=\"%.200s\"",
			 what, name ? name : "?", path);
		rx__log(RX_LOG_WARN, "%s", msg);
	}
}

/* With %p, at exit: the file goes with the process, so that the textfile
 * collector does not serve a dead worker's numbers for ever (ADR-222).
 * Only a file of ours is removed. */
static void remove_file(void)
{
	if (!foreign() && unlink(path) == 0)
		rx__log(RX_LOG_DEBUG, "event=metrics-removed file=\"%.200s\"",
			path);
}

/*
 * At exit, another thread may be in the middle of a write; exit() would
 * end it with its temporary file left behind. Wait for it, a second at
 * the most (a write takes milliseconds, more under a sanitizer), then
 * take the try-lock. If it is still held, remove the temporary file the
 * process is about to abandon. true: the try-lock is ours.
 */
static bool await_writer(void)
{
	uint64_t until = rx__now_ns() + 1000 * RX_NS_PER_MS;

	while (rx__now_ns() < until) {
		sched_yield();
		if (!atomic_exchange_explicit(&writing, 1,
					      memory_order_acquire))
			return true;
	}
	unlink(tmp_path);
	return false;
}

/*
 * Is this process the writer? Without %p, the process that started the
 * shim writes, and a child forked without exec leaves the file to it
 * (ADR-161) - until it is gone: a daemon's work is done by a child whose
 * parent exited at once, and that child, its parent's first fork, then
 * takes the file over (ADR-222). One kill(pid, 0) when a write is due.
 */
static bool is_writer(void)
{
	pid_t self = getpid();

	if (self == writer_pid)
		return true;
	if (per_pid)
		return false; /* a vfork child, or one forked without atfork */
	if (!heir || kill(writer_pid, 0) == 0 || errno != ESRCH ||
	    !expand_paths(self)) {
		if (!atomic_exchange(&said_not_writer, true))
			rx__log(
			    RX_LOG_INFO,
			    "event=metrics-not-writer writer_pid=%ld "
			    "file=\"%.200s\" msg=\"a process forked "
			    "without exec leaves the file to its writer; put "
			    "%%p in the name for one file per process\"",
			    (long)writer_pid, path);
		return false;
	}
	writer_pid = self;
	return true;
}

/* Take the try-lock and write; @force: the write at exit, which ignores
 * the interval, waits for a writer in progress and keeps the lock; @soon:
 * a breaker changed state, written now whatever the interval (ADR-222). */
static void maybe_write(uint64_t now, bool force, bool soon)
{
	int saved = errno;
	int inside = rx__inside;

	if (!force && !soon &&
	    now < atomic_load_explicit(&next_write_ns, memory_order_relaxed))
		return;
	if (!is_writer())
		goto out; /* ADR-161: a forked child leaves the file alone */
	if (atomic_exchange_explicit(&writing, 1, memory_order_acquire) &&
	    !(force && await_writer())) {
		/* Another thread writes; it may have copied the numbers
		 * before this change: it writes once more. */
		if (soon)
			atomic_store(&again, true);
		goto out;
	}
	rx__inside = 1; /* our own I/O passes through the shim */
	if (force && per_pid) {
		remove_file(); /* ADR-222: a worker's file ends with it */
	} else if (force || soon || now >= atomic_load(&next_write_ns)) {
		for (int n = 0; n < 3; n++, now = rx__now_ns()) {
			atomic_store(&again, false);
			atomic_store(&next_write_ns, now + interval_ns);
			write_file(now);
			if (!atomic_load(&again))
				break;
		}
	}
	rx__inside = inside;
	/* The exit write keeps the try-lock: threads still running while
	 * the process exits must not start a write that _exit would cut
	 * short, leaving its temporary file behind. */
	if (!force)
		atomic_store_explicit(&writing, 0, memory_order_release);
out:
	errno = saved;
}

void rx__metrics_tick(uint64_t now_ns, bool changed)
{
	if (!rx__metrics_on)
		return;
	if (!atomic_load_explicit(&active, memory_order_relaxed))
		atomic_store(&active, true);
	maybe_write(now_ns, false, changed);
}

/* The last write, at exit (exit() or a return from main; not _exit or a
 * fatal signal, which run no destructors). */
__attribute__((destructor)) static void metrics_at_exit(void)
{
	/* Not from exit() in a signal handler that interrupted this thread
	 * inside the shim: it may hold a lock the writer would wait for. */
	if (rx__reentered())
		return;
	/* Only a process that guarded a call: the `timeout`, `env` or shell
	 * that runs the program also loads the shim, and exits after it -
	 * its empty file would replace the program's (ADR-161). */
	if (!rx__metrics_on || !rx__ready())
		return;
	if (atomic_load(&active)) {
		maybe_write(rx__now_ns(), true, false); /* the core's clock */
		return;
	}
	/* Nothing to write yet - but threads still running while the
	 * process exits must not start a write now that _exit would cut
	 * short: the writer's lock is kept all the same. */
	if (atomic_exchange_explicit(&writing, 1, memory_order_acquire))
		(void)await_writer();
}
