/*
 * preload/state.c - RESILIX_STATE_FILE: the registry carried across
 * processes, so a shell loop of short-lived programs (curl, git, a cron
 * job) learns what the previous runs learnt about an upstream.
 *
 * Design (ADR-170 to ADR-174). At start-up, right after the registry is
 * created and before the shim is ready - so before the first guarded
 * connect of even the shortest process - the file is read and hydrated
 * with the core's rx_snapshot_hydrate (src/snapshot.c: ages plus a
 * wall-clock stamp, validated whole before anything is applied). At exit,
 * a destructor takes the file's exclusive lock, reads the file again,
 * takes every lock of the shim for the microseconds the core needs to
 * merge that into the registry and serialise the result into the buffer,
 * drops them, and replaces the file: a temporary file in the same
 * directory (O_CLOEXEC, O_NOFOLLOW, mode 0600), then rename(2), so a
 * reader sees the old file or the new one and never half of one.
 *
 * Locking. Readers take flock(LOCK_SH) and writers flock(LOCK_EX) on a
 * sibling file "<path>.lock" (the state file itself cannot carry the lock:
 * rename replaces its inode under a holder). A lock that cannot be had
 * within LOCK_WAIT_MS (a holder stopped in a debugger) is skipped with a
 * warning: the rename keeps the file whole without it, and a program must
 * never hang at start or exit because of a cache.
 *
 * Concurrency: merge at exit (ADR-171). What processes that overlapped
 * with this one wrote meanwhile is folded in with rx_snapshot_merge under
 * the exclusive lock: keys this process does not hold are kept; for a key
 * it holds, two closed views merge their windows - this process's own
 * calls since it hydrated are added to the file's (ADR-221) - else a
 * running open period wins over a closed view, else the more recently
 * used entry. So eight processes at once on eight keys leave eight keys,
 * eight processes that each fail once on one key leave eight failures,
 * and a long-lived process does not close a circuit that short ones
 * tripped while it ran. Only a process in which a call settled
 * writes:
 * the shell, `env` or `timeout` that starts the program loads the shim
 * too, exits after it, and must not put back the state it read before
 * its child learnt anything. A child forked without exec writes too when
 * its own calls settled (a daemon's work is done by such a child), and
 * only its calls since the fork count as its own in the merge: its copy
 * of the parent's are the parent's to write (ADR-222).
 *
 * Failures never crash and never stop guarding (ADR-172). A missing file
 * is the first run: nothing is said. A file of ours that cannot be read,
 * or that the core rejects (corrupt, truncated, future version, too
 * large), gives one warning naming the file and the reason, the process
 * starts empty, and its exit writes a good file over the bad one, keeping
 * its mode. A file that is not ours - not a regular file, or non-empty and
 * not starting with the snapshot magic "RXSN" - is never written over
 * (ADR-201): a mistyped path must not destroy someone's data. A path that
 * is such a file or a directory, or whose directory refuses the lock file,
 * gives one line at start; the process then guards without state and
 * never touches the path again. Setuid and setgid programs (AT_SECURE) and
 * RESILIX_DISABLE do no state I/O at all.
 *
 * Memory and calls (ADR-173). The buffer is mapped once at start-up
 * (MAP_NORESERVE: pages are committed only as a snapshot touches them),
 * sized for the largest snapshot this configuration can produce, at most
 * STATE_MAX_BYTES. File I/O uses open, flock, fstat, rename and unlink
 * (not interposed by the shim) and rx__real_read/write/close; every fd is
 * closed before the function returns, so the host never sees one. Exits
 * that run no destructors (_exit, a fatal signal, exec) write nothing.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ownfile.h"
#include "resilix/snapshot.h"
#include "log.h"
#include "runtime.h"
#include "shared.h"
#include "state.h"
#include "symbols.h"

/* The largest snapshot kept: beyond it, the file is "too large". */
#define STATE_MAX_BYTES ((size_t)64 << 20)
/* The smallest buffer: a file written under a larger window still fits. */
#define STATE_MIN_BYTES ((size_t)1 << 20)
/* How long start-up or exit waits for the lock file (ms). */
#define LOCK_WAIT_MS 200
/* Tries at each lock of the shim at exit before giving up the write. */
#define EXIT_LOCK_TRIES 100000

static bool enabled;
static struct rx_registry *registry;
static struct rx_lock *registry_lock;
static struct rx_lock *guard_locks;
static uint32_t max_keys;
static unsigned char *buf;
static size_t buf_bytes;
static pid_t writer_pid;
/* When the registry was hydrated: its window slots recorded later are this
 * process's own calls, added to the file's at exit (ADR-221). */
static uint64_t hydrated_ns;
atomic_bool rx__state_dirty; /* a call settled in this process */
static char path[PATH_MAX];
static char lock_path[PATH_MAX];
static char tmp_path[PATH_MAX];
static mode_t file_mode; /* the file's mode when last read; 0: none */

/* The snapshot's magic (src/resilix/snapshot.h): a file of ours starts
 * with it, or with a prefix of it when truncated. */
static const char magic[4] = {'R', 'X', 'S', 'N'};

static uint64_t wall_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts) != 0 || ts.tv_sec < 0)
		return 0;
	return (uint64_t)ts.tv_sec * UINT64_C(1000000000) +
	       (uint64_t)ts.tv_nsec;
}

static const char *errno_name(int err)
{
	const char *name = strerrorname_np(err);

	return name ? name : "?";
}

/* One warning about the file: @op failed because of @reason. */
static void warn(const char *event, const char *op, const char *reason)
{
	rx__log(RX_LOG_WARN, "event=%s op=%s reason=\"%s\" file=\"%.200s\"",
		event, op, reason, path);
}

/*
 * After a hydrate or merge of a file that held @in_file keys: when the
 * registry is full and the file held more keys than it can, say so, once:
 * a process run with a smaller RESILIX_MAX_KEYS drops the other processes'
 * keys from a shared file (ADR-227). No lock held.
 */
static void keys_dropped(uint32_t in_file)
{
	static bool said;

	if (said || in_file <= max_keys ||
	    rx_registry_count(registry) < max_keys)
		return;
	said = true;
	rx__log(RX_LOG_WARN,
		"event=state-keys-dropped keys_in_file=%u max_keys=%u "
		"file=\"%.200s\" msg=\"RESILIX_MAX_KEYS is smaller than the "
		"file's key count: the keys beyond it are not kept\"",
		in_file, max_keys, path);
}

/*
 * Open and lock "<path>.lock" (@how: LOCK_SH or LOCK_EX), waiting at most
 * LOCK_WAIT_MS. Returns the fd (caller closes it, which unlocks), -2 when
 * the lock was not had in time (fd closed; the caller goes on unlocked),
 * or -1 with errno when the lock file cannot be opened.
 */
static int take_lock(int how)
{
	struct timespec ms = {0, 1000000};
	int fd, i;

	fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	for (i = 0; i <= LOCK_WAIT_MS; i++) {
		if (flock(fd, how | LOCK_NB) == 0)
			return fd;
		if (errno != EWOULDBLOCK && errno != EINTR)
			break;
		nanosleep(&ms, NULL);
	}
	rx__real_close(fd);
	warn("state-lock-timeout", how == LOCK_EX ? "write" : "read",
	     "lock not had in time; going on without it");
	return -2;
}

static void drop_lock(int fd)
{
	if (fd >= 0)
		rx__real_close(fd); /* releases the flock */
}

/* Does @p[0..@len) look like ours: empty, or starting with the magic
 * (a file truncated inside the magic included)? */
static bool ours(const unsigned char *p, size_t len)
{
	return memcmp(p, magic, len < sizeof(magic) ? len : sizeof(magic)) == 0;
}

/* Is the file at path someone else's (ADR-201)? NULL when it is missing,
 * empty or ours (ownfile.h), else why not. */
static const char *foreign(void)
{
	static const struct rx_file_io io = {rx__real_read, rx__real_close};
	static char why[96];

	return rx_file_foreign(&io, path, magic, sizeof(magic),
			       "resilix state file", why, sizeof(why));
}

/*
 * Read the file into buf. Returns its length (0 for an empty file, which
 * the core rejects as truncated), -2 when it does not exist (the first
 * run: silent), -3 when it is not ours (not a regular file, or no magic:
 * never to be replaced, ADR-201), or -1 after one warning (none when
 * @quiet: at exit, where the file is about to be replaced anyway). Sets
 * file_mode to the file's mode, 0 when there is no file.
 */
static ssize_t read_file(bool quiet)
{
	const char *op = "read", *why;
	struct stat st;
	size_t len = 0;
	ssize_t n;
	int fd;

	file_mode = 0;
	/* O_NONBLOCK: a FIFO put in the file's place must not hang us. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT)
			return -2;
		op = "open";
		why = errno_name(errno);
		goto fail;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		rx__real_close(fd);
		return -3;
	}
	file_mode = st.st_mode & 07777;
	for (;;) {
		/* Read one byte past the buffer, so a file too large is
		 * seen as such even if it grew after fstat. */
		if (len == buf_bytes) {
			char extra;

			n = rx__real_read(fd, &extra, 1);
			if (n == 0)
				break;
			if (n < 0 && errno == EINTR)
				continue;
			why = n > 0 ? "larger than the state buffer"
				    : errno_name(errno);
			goto fail_close;
		}
		n = rx__real_read(fd, buf + len, buf_bytes - len);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			why = errno_name(errno);
			goto fail_close;
		}
		len += (size_t)n;
		if (!ours(buf, len)) {
			rx__real_close(fd);
			return -3;
		}
	}
	rx__real_close(fd);
	return (ssize_t)len;
fail_close:
	rx__real_close(fd);
fail:
	if (!quiet)
		warn("state-file-ignored", op, why);
	return -1;
}

/* Build "<path><suffix>" into @out. */
static bool sibling(char *out, size_t size, const char *suffix, long pid)
{
	int n = pid ? snprintf(out, size, "%s%s%ld", path, suffix, pid)
		    : snprintf(out, size, "%s%s", path, suffix);

	return n > 0 && (size_t)n < size;
}

/* The one line saying the file is not ours and is left alone. */
static void refuse(const char *why)
{
	char line[PATH_MAX + 200];

	snprintf(line, sizeof(line),
		 "RESILIX_STATE_FILE=\"%.200s\" %s; it is left untouched and "
		 "guarding goes on without state across processes",
		 path, why);
	rx__log_plain(line);
}

void rx__state_setup(const struct rx_config *cfg, struct rx_registry *reg,
		     struct rx_lock *reg_lock, struct rx_lock *locks)
{
	const struct rx_breaker_config *b = &cfg->guard.breaker;
	size_t entry, want;
	struct stat st;
	const char *why;
	ssize_t len;
	void *p;
	int fd, rc;
	char line[PATH_MAX + 160];

	if (!cfg->state_file || getauxval(AT_SECURE))
		return;
	/* A relative name is resolved now: the program may chdir before
	 * it exits (git, daemons), and the exit write must land here. */
	path[0] = '\0';
	if (cfg->state_file[0] != '/' &&
	    (!getcwd(path, sizeof(path)) || path[0] != '/'))
		path[0] = '\0';
	if (path[0] != '\0' && strcmp(path, "/") != 0)
		strcat(path, "/");
	if (strlen(path) + strlen(cfg->state_file) >= sizeof(path) - 24) {
		rx__log_plain("RESILIX_STATE_FILE is too long; guarding goes "
			      "on without state across processes");
		return;
	}
	strcat(path, cfg->state_file);
	writer_pid = getpid();
	if (!sibling(lock_path, sizeof(lock_path), ".lock", 0) ||
	    !sibling(tmp_path, sizeof(tmp_path), ".tmp.", (long)writer_pid))
		return; /* cannot happen: the length was checked */
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		snprintf(line, sizeof(line),
			 "RESILIX_STATE_FILE=\"%.200s\" is a directory; "
			 "guarding goes on without state across processes",
			 path);
		rx__log_plain(line);
		return;
	}
	/* Before the lock file is made beside it: someone else's file is
	 * left exactly as it is. */
	why = foreign();
	if (why) {
		refuse(why);
		return;
	}

	/* The largest snapshot this configuration can write: every key
	 * with a full window, plus header and trailer. */
	entry = 2 + RX_KEY_MAX + 34 + (size_t)b->window_calls * 9;
	want = 36;
	if (entry != 0 &&
	    cfg->registry.max_keys > (STATE_MAX_BYTES - want) / entry)
		want = STATE_MAX_BYTES;
	else
		want += (size_t)cfg->registry.max_keys * entry;
	if (want < STATE_MIN_BYTES)
		want = STATE_MIN_BYTES;
	p = mmap(NULL, want, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) {
		rx__log_plain("cannot map the state buffer; guarding goes on "
			      "without state across processes");
		return;
	}
	buf = p;
	buf_bytes = want;

	fd = take_lock(LOCK_SH);
	if (fd == -1) {
		snprintf(line, sizeof(line),
			 "RESILIX_STATE_FILE=\"%.200s\": cannot open "
			 "\"%.200s.lock\" (%s); guarding goes on without "
			 "state across processes",
			 path, path, errno_name(errno));
		rx__log_plain(line);
		munmap(buf, buf_bytes);
		buf = NULL;
		return;
	}
	len = read_file(false);
	drop_lock(fd);
	if (len == -3) { /* replaced by a foreign file since foreign() */
		refuse("is not a resilix state file");
		munmap(buf, buf_bytes);
		buf = NULL;
		return;
	}
	hydrated_ns = rx__now_ns();
	/* A shared segment is seeded once, by the process that made it: the
	 * others find the file's history in it already (ADR-485). */
	if (rx__shared_on && !rx__shared_created)
		len = -1;
	/* The keys it seeds need their pages first (ADR-680); those that
	 * cannot have them are dropped, as past max_keys. */
	if (len >= 0 && rx__shared_on)
		(void)rx__shared_back(rx_snapshot_keys(buf, (size_t)len),
				      hydrated_ns);
	if (len >= 0) {
		rc = rx_snapshot_hydrate(reg, buf, (size_t)len, hydrated_ns,
					 wall_ns());
		if (rc != RX_OK)
			warn("state-file-ignored", "hydrate", rx_strerror(rc));
		else
			rx__log(RX_LOG_DEBUG,
				"event=state-hydrated keys=%u bytes=%zd "
				"file=\"%.200s\"",
				rx_registry_count(reg), len, path);
	}
	registry = reg;
	registry_lock = reg_lock;
	guard_locks = locks;
	max_keys = cfg->registry.max_keys;
	enabled = true;
	if (len >= 0 && rc == RX_OK)
		keys_dropped(rx_snapshot_keys(buf, (size_t)len));
}

void rx__state_after_fork(void)
{
	if (!enabled)
		return;
	writer_pid = getpid();
	(void)sibling(tmp_path, sizeof(tmp_path), ".tmp.", (long)writer_pid);
	hydrated_ns = rx__now_ns();
	atomic_store(&rx__state_dirty, false);
}

/* Take @l, trying a bounded number of times: exit may run in a signal
 * handler that interrupted this very thread inside a critical section. */
static bool try_lock(struct rx_lock *l)
{
	unsigned i;

	for (i = 0; i < EXIT_LOCK_TRIES; i++) {
		if (rx__trylock(l))
			return true;
		if (i % 128 == 127)
			sched_yield();
	}
	return false;
}

/*
 * Under every lock of the shim (guard locks, then the registry lock: the
 * fork handler's order), merge the file's current content, buf[0..@flen)
 * (@flen <= 0: none), into the registry - what concurrent processes wrote
 * since we started (ADR-171) - and serialise the result into buf. Returns
 * the length, or 0 when the locks could not be had or the buffer is short.
 */
static size_t snapshot(ssize_t flen)
{
	uint64_t now = rx__now_ns(), wall = wall_ns();
	uint32_t in_file = flen > 0 ? rx_snapshot_keys(buf, (size_t)flen) : 0;
	size_t len = 0;
	uint32_t i, got;
	int rc = RX_OK, mrc = RX_OK;

	for (got = 0; got < max_keys; got++)
		if (!try_lock(&guard_locks[got]))
			break;
	if (got == max_keys && try_lock(registry_lock)) {
		/* The merge reads all of buf before the write reuses it. */
		/* Shared: the segment is every process's view already;
		 * merging the file into it would count again what an earlier
		 * exit of another process wrote from it (ADR-485). */
		if (flen >= 0 && !rx__shared_on)
			mrc = rx_snapshot_merge(registry, buf, (size_t)flen,
						now, wall, hydrated_ns);
		rc = rx_snapshot_write(registry, now, wall, buf, buf_bytes,
				       &len);
		rx__unlock(registry_lock);
	} else {
		rc = RX_EINVAL;
	}
	for (i = 0; i < got; i++)
		rx__unlock(&guard_locks[i]);
	if (flen >= 0 && mrc == RX_OK)
		keys_dropped(in_file);
	if (mrc != RX_OK)
		rx__log(RX_LOG_DEBUG,
			"event=state-merge-skipped reason=\"%s\" "
			"file=\"%.200s\"",
			rx_strerror(mrc), path);
	if (rc == RX_ENOSPC)
		warn("state-write-failed", "snapshot",
		     "larger than the state buffer");
	else if (rc != RX_OK)
		warn("state-write-failed", "snapshot",
		     "shim locks busy at exit");
	return rc == RX_OK ? len : 0;
}

/* Write buf[0..len) to the temporary file and rename it over the state
 * file. Returns the failing operation's name, or NULL. */
static const char *replace_file(size_t len)
{
	size_t off = 0;
	ssize_t n;
	int fd;

	fd = rx_file_create_tmp(tmp_path, 0600);
	if (fd < 0)
		return "open";
	/* The file we replace keeps its mode (the umask does not apply to
	 * fchmod, so it is exactly the old one). */
	if (file_mode != 0 && file_mode != 0600)
		(void)fchmod(fd, file_mode);
	while (off < len) {
		n = rx__real_write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int err = n < 0 ? errno : ENOSPC;

			rx__real_close(fd);
			unlink(tmp_path);
			errno = err;
			return "write";
		}
		off += (size_t)n;
	}
	if (rx__real_close(fd) != 0 && errno != EINTR) {
		unlink(tmp_path);
		return "close";
	}
	if (rename(tmp_path, path) != 0) {
		int err = errno;

		unlink(tmp_path);
		errno = err;
		return "rename";
	}
	return NULL;
}

/* The snapshot at exit (exit() or a return from main). */
__attribute__((destructor)) static void state_at_exit(void)
{
	int saved = errno;
	int inside = rx__inside;
	const char *failed;
	ssize_t flen;
	size_t len;
	int fd;

	if (!enabled || !rx__ready() || getpid() != writer_pid ||
	    !atomic_load(&rx__state_dirty))
		return;
	rx__inside = 1; /* our own I/O passes through the shim */
	/* Read, merge and replace under one exclusive lock, so no writer
	 * slips in between and is lost. No lock of the shim is held while
	 * waiting for it or doing I/O. */
	fd = take_lock(LOCK_EX);
	if (fd == -1) {
		warn("state-write-failed", "lock", errno_name(errno));
	} else if ((flen = read_file(true)) == -3) {
		/* Someone else's file took its place while we ran. */
		warn("state-write-failed", "check",
		     "not a resilix state file; left untouched");
		drop_lock(fd);
	} else {
		len = snapshot(flen);
		failed = len > 0 ? replace_file(len) : NULL;
		if (failed)
			warn("state-write-failed", failed, errno_name(errno));
		else if (len > 0)
			rx__log(RX_LOG_DEBUG,
				"event=state-written bytes=%zu "
				"file=\"%.200s\"",
				len, path);
		drop_lock(fd);
	}
	rx__inside = inside;
	errno = saved;
}
