/*
 * preload/shared.c - RESILIX_SHARED: the segment (open, check, map,
 * format), the process table, the recovery of what dead processes hold,
 * and the takeover of a lock whose holder died (shared.h; ADR-480 to
 * ADR-486).
 *
 * Layout, one file, every part at an offset the header records:
 *
 *   header (one page)  magic, version, sizes, settings, registry lock,
 *                      readiness, sweep clock
 *   process table      RX_SHM_PROCS x (pid, start time, state)
 *   registry           rx_registry_format's block (offsets only)
 *   guard locks        max_keys x struct rx_lock
 *   wait records       max_keys x admit.c's struct key_wait
 *   hold table         RX_SHM_PROCS x max_keys x struct rx_shm_hold
 *
 * The file is sparse: pages nobody touched cost nothing. Its size is
 * fixed by RESILIX_MAX_KEYS and the window: no growth, ever. Every page
 * is reserved before its first touch (shmback.h, ADR-680): at creation
 * the header, the process table, the registry's header and hash index;
 * a process's hold row before it claims the slot; a key's entry, window,
 * lock and wait record before the registry hands the entry out.
 *
 * Liveness: a slot's pid answers kill(pid, 0) and its start time (field
 * 22 of /proc/PID/stat) is the one recorded, and it is not a zombie; a
 * reused pid has another start time. Only on slow paths: a waiter that
 * yielded RX_LOCK_STALL_YIELDS times, the sweep.
 *
 * Takeover (lock.h's stall hook): the lock word holds its holder's slot
 * (+2). A waiter that finds the holder dead swaps its own tag in with a
 * compare-and-swap - one waiter wins - and repairs what the lock guards:
 * a guard lock's key gets a fresh guard and every process's holds on it
 * are zeroed (losing one key's history, never a wedge); the registry
 * lock's index and lists are rebuilt from the entries, each entry's pins
 * recomputed from the hold table. Then a sweep gives back the rest.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "runtime.h"
#include "shared.h"
#include "shmback.h"
#include "symbols.h"

#define SHM_MAGIC "RXSHARE"  /* 8 bytes with its NUL */
/* 2: criticality and tenant shares (ADR-489); 3: counted once a second
 * bucket or tenant calls (ADR-490); 4: every general settlement keeps the
 * guard's steady byte (ADR-587), which an older build leaves stale;
 * 5: lock tags name a slot's claim (ADR-623); 6: the limiter's config
 * says whether its maximum binds while learning (ADR-625), a byte an
 * older build leaves as padding and would not read; 7: the limiter knows
 * whether drops bound it (ADR-651), a byte of padding before too; 8: the
 * registry hands out only the entries reserved (ADR-680), a bound an
 * older build would not keep to; 9: a window's caller was saturated
 * (ADR-686), the next byte of padding. */
#define SHM_VERSION 9u
#define SHM_READY 0x52454459u /* "REDY" */
#define SHM_HEADER_BYTES 4096u
/* How long an opener waits for the creator to size and format it. */
#define SHM_WAIT_NS (2 * UINT64_C(1000000000))
#define RX_SHM_SWEEP_NS (500 * RX_NS_PER_MS)

enum { PROC_FREE = 0, PROC_LIVE = 1, PROC_RECOVERING = 2 };
#define PROC_STATE_MASK 3u

/* A lock tag (ADR-482) names a slot and the claim of it: bits 0-8 the
 * slot + 2, bits 9-29 the slot's generation, counted up at each claim.
 * So a dead holder's tag never names the process that claims its slot
 * next (ADR-623): that one's locks carry another generation. */
#define TAG_SLOT_BITS 9
#define TAG_GEN_MASK ((1u << 21) - 1)

struct shm_proc {
	_Atomic uint32_t pid;	 /* 0 = free */
	_Atomic uint32_t state;	 /* PROC_*, | recoverer's lock tag << 2 */
	_Atomic uint64_t start;	 /* /proc start time, 0 = unknown yet */
	uint32_t criticality;	 /* RESILIX_CRITICALITY (its bucket) */
	char tenant[32];	 /* RESILIX_TENANT, cut to 31 bytes */
	_Atomic uint32_t gen;	 /* claims of the slot so far (TAG_GEN_MASK) */
	uint32_t pad[4];
};

struct shm_header {
	char magic[8];
	uint32_t version;
	uint32_t header_bytes;
	uint64_t size; /* the whole file */
	uint32_t uid;
	uint32_t max_keys;
	uint32_t procs;
	uint32_t window_calls;
	uint32_t sizeof_proc, sizeof_hold, sizeof_lock, sizeof_wait;
	uint32_t sizeof_guard, sizeof_registry_cfg, sizeof_guard_cfg;
	uint32_t pad0;
	uint64_t pidns; /* inode of /proc/self/ns/pid, 0 = unknown */
	uint64_t off_procs, off_registry, off_locks, off_waits, off_holds;
	uint64_t registry_bytes;
	struct rx_registry_config rcfg;
	struct rx_guard_config gcfg;
	/* Mutable. */
	_Atomic uint32_t ready;
	_Atomic uint32_t sweep_due;
	_Atomic uint64_t last_sweep_ns;
	struct rx_lock registry_lock;
};

bool rx__shared_on;
bool rx__shared_created;
struct rx_shm_hold *rx__shm_holds;
unsigned rx__shm_bucket;
uint32_t rx__shm_tenant;

static struct shm_header *hdr;
static struct shm_proc *procs;
static struct rx_shm_hold *holds; /* [proc][key] */
static struct rx_registry *registry;
static struct rx_lock *guard_locks;
static uint32_t max_keys;
static int my_slot = -1;
static uint64_t my_start;
static char seg_path[4096 + 32];
/* The file mapped, for reserving its pages (ADR-680). */
static struct rx_shm_file seg_file;
/* This process's pins at fork (prepare handler), for the child. */
static int32_t *fork_pins;

static struct rx_shm_hold *row(int slot)
{
	return holds + (size_t)slot * max_keys;
}

/* A tenant's id on every key (fairshare.h): FNV-1a of its name, never 0
 * (0 is "no tenant"). The same name gives the same id in every process. */
static uint32_t tenant_id(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 16777619u;
	return h ? h : 1;
}

/* ---- liveness --------------------------------------------------------- */

/* Field 22 of /proc/@pid/stat (start time, clock ticks since boot), and
 * whether it is a zombie; 0 when it cannot be read. */
static uint64_t start_time_of(pid_t pid, bool *zombie)
{
	char path[64], buf[1024];
	const char *p;
	ssize_t n;
	int fd, field;

	*zombie = false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = rx__real_read(fd, buf, sizeof(buf) - 1);
	rx__real_close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strrchr(buf, ')'); /* the name may hold spaces and ')' */
	if (!p || p[1] != ' ')
		return 0;
	p += 2; /* field 3, the state */
	*zombie = *p == 'Z' || *p == 'X';
	for (field = 3; field < 22 && *p; p++)
		if (*p == ' ')
			field++;
	return field == 22 ? strtoull(p, NULL, 10) : 0;
}

/* Is the process recorded as (@pid, @start) alive? */
static bool alive(uint32_t pid, uint64_t start)
{
	int saved = errno;
	bool zombie, yes = true;
	uint64_t now_start;

	if (pid == 0)
		yes = false;
	else if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
		yes = false;
	else {
		now_start = start_time_of((pid_t)pid, &zombie);
		if (zombie || (start != 0 && now_start != 0 &&
			       now_start != start))
			yes = false;
	}
	errno = saved;
	return yes;
}

static bool slot_alive(int s)
{
	uint32_t pid = atomic_load(&procs[s].pid);

	return pid != 0 && alive(pid, atomic_load(&procs[s].start));
}

static int tag_of(int s)
{
	return (int)(((atomic_load(&procs[s].gen) & TAG_GEN_MASK)
		      << TAG_SLOT_BITS) |
		     (uint32_t)(s + 2));
}

/* The slot lock tag @tag names (out of range for a garbled one). */
static int slot_of_tag(int tag)
{
	return (int)((uint32_t)tag & ((1u << TAG_SLOT_BITS) - 1)) - 2;
}

/* Whether the process that took lock tag @tag is still the live owner of
 * its slot: the slot not claimed again since (its generation) and its
 * process alive. */
static bool tag_alive(int tag)
{
	int s = slot_of_tag(tag);

	if (s < 0 || s >= RX_SHM_PROCS || tag_of(s) != tag)
		return false;
	return slot_alive(s);
}

/* ---- repair after a takeover ------------------------------------------ */

static uint32_t pins_of(void *arg, uint32_t index)
{
	int64_t sum = 0;
	int s;

	(void)arg;
	for (s = 0; s < RX_SHM_PROCS; s++)
		if (atomic_load(&procs[s].pid) != 0 && row(s)[index].pins > 0)
			sum += row(s)[index].pins;
	return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

/* @sum plus the hold *@hold, saturating at UINT32_MAX; a negative hold
 * (none should be) counts and is set to 0. */
static uint32_t sum_sat(uint64_t sum, int32_t *hold)
{
	if (*hold < 0)
		*hold = 0;
	sum += (uint32_t)*hold;
	return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

/*
 * Key @k's guard after its lock was taken over from @dead, a slot that
 * died inside the critical section: a fresh state, whose counters of what
 * is held - calls in flight, limiter slots, queue places, the buckets'
 * calls - are the sum of the other processes' holds, which only change
 * under that lock and so are whole (ADR-624). Their calls then settle
 * against counts that hold them, and a hold never falls below what its
 * process has in flight - so a process that dies later gives back no
 * less than it took. The dead slot's holds on the key go (its recovery
 * finds nothing there); half-open probes go with the old breaker.
 */
static void repair_key(uint32_t k, int dead, uint64_t now)
{
	uint32_t calls = 0, lim = 0, queued = 0, busy[RX_BUCKET_COUNT] = {0};
	struct rx_guard *g;
	int s;

	rx_registry_reset_at(registry, k, now);
	for (s = 0; s < RX_SHM_PROCS; s++) {
		struct rx_shm_hold *h = &row(s)[k];

		/* A free slot's row may have no memory (ADR-680), and is
		 * zeroed when claimed. */
		if (atomic_load(&procs[s].pid) == 0)
			continue;
		h->probes = 0;
		if (s == dead) {
			h->calls = h->lim = h->queued = h->bucket = 0;
			continue;
		}
		calls = sum_sat(calls, &h->calls);
		lim = sum_sat(lim, &h->lim);
		queued = sum_sat(queued, &h->queued);
		busy[procs[s].criticality % RX_BUCKET_COUNT] = sum_sat(
		    busy[procs[s].criticality % RX_BUCKET_COUNT], &h->bucket);
	}
	g = rx_registry_guard_at(registry, k);
	if (!g)
		return;
	g->in_flight = calls;
	g->limiter.in_flight = lim;
	g->limiter.queued = queued;
	if (g->shares_on)
		memcpy(g->partition.busy, busy, sizeof(busy));
}

/* The caller now holds @l, taken over from @dead, its holder. */
static void repair(struct rx_lock *l, int dead)
{
	uint64_t now = rx__now_ns();

	if (l == &hdr->registry_lock)
		rx_registry_repair(registry, pins_of, NULL, now);
	else if (l >= guard_locks && l < guard_locks + max_keys)
		repair_key((uint32_t)(l - guard_locks), dead, now);
	atomic_store(&hdr->sweep_due, 1);
}

static bool stall(struct rx_lock *l, int tag)
{
	int s = slot_of_tag(tag), mine = rx__lock_tag;
	char line[200];

	if (s < 0 || s >= RX_SHM_PROCS || tag == mine || tag_alive(tag))
		return false;
	if (!atomic_compare_exchange_strong(&l->held, &tag, mine))
		return false; /* released, or another waiter took it over */
	repair(l, s);
	snprintf(line, sizeof(line),
		 "event=shared-lock-recovered holder_pid=%u lock=%s",
		 (unsigned)atomic_load(&procs[s].pid),
		 l == &hdr->registry_lock ? "registry" : "key");
	rx__log(RX_LOG_WARN, "%s", line);
	return true;
}

/* ---- recovery of a dead process's holds -------------------------------- */

static uint32_t sub_sat(uint32_t v, int32_t d)
{
	return d <= 0 ? v : (uint32_t)d >= v ? 0 : v - (uint32_t)d;
}

static void recover(int s)
{
	uint32_t st = atomic_load(&procs[s].state);
	uint32_t mine = PROC_RECOVERING | ((uint32_t)rx__lock_tag << 2);
	struct rx_shm_hold *r = row(s);
	bool any_pins = false;
	uint32_t k;

	if ((st & PROC_STATE_MASK) == PROC_RECOVERING && st != mine &&
	    tag_alive((int)(st >> 2)))
		return; /* another process is on it */
	if (!atomic_compare_exchange_strong(&procs[s].state, &st, mine))
		return;
	for (k = 0; k < max_keys; k++) {
		struct rx_shm_hold *h = &r[k];
		struct rx_guard *g;

		if (h->pins > 0)
			any_pins = true;
		if (h->calls == 0 && h->lim == 0 && h->probes == 0 &&
		    h->queued == 0 && h->bucket == 0)
			continue;
		rx__lock(&guard_locks[k]);
		g = rx_registry_guard_at(registry, k);
		if (g) {
			g->in_flight = sub_sat(g->in_flight, h->calls);
			g->limiter.in_flight =
			    sub_sat(g->limiter.in_flight, h->lim);
			g->breaker.probes_in_flight =
			    sub_sat(g->breaker.probes_in_flight, h->probes);
			g->limiter.queued = sub_sat(g->limiter.queued, h->queued);
			if (h->bucket > 0 && g->shares_on)
				g->partition.busy[procs[s].criticality %
						  RX_BUCKET_COUNT] =
				    sub_sat(g->partition.busy
						[procs[s].criticality %
						 RX_BUCKET_COUNT],
					    h->bucket);
		}
		h->calls = h->lim = h->probes = h->queued = h->bucket = 0;
		rx__unlock(&guard_locks[k]);
	}
	if (any_pins) {
		rx__lock(&hdr->registry_lock);
		for (k = 0; k < max_keys; k++) {
			struct rx_guard *g = rx_registry_guard_at(registry, k);

			while (r[k].pins > 0) {
				if (g)
					rx_registry_release(registry, g);
				r[k].pins--;
			}
			r[k].pins = 0;
		}
		rx__unlock(&hdr->registry_lock);
	}
	atomic_store(&procs[s].start, 0);
	atomic_store(&procs[s].state, PROC_FREE);
	atomic_store(&procs[s].pid, 0);
	rx__log(RX_LOG_DEBUG, "event=shared-process-recovered slot=%d", s);
}

static void sweep(void)
{
	uint32_t me = (uint32_t)getpid();
	int s;

	for (s = 0; s < RX_SHM_PROCS; s++) {
		uint32_t pid = atomic_load(&procs[s].pid);
		uint32_t st = atomic_load(&procs[s].state);

		if (s == my_slot || pid == 0)
			continue;
		/* Our own pid in another slot: this process before an exec
		 * (the new program re-attaches). */
		if (pid == me || !alive(pid, atomic_load(&procs[s].start)) ||
		    ((st & PROC_STATE_MASK) == PROC_RECOVERING &&
		     !tag_alive((int)(st >> 2))))
			recover(s);
	}
}

bool rx__shared_sweep_due(void)
{
	return hdr && atomic_load_explicit(&hdr->sweep_due,
					   memory_order_relaxed) != 0;
}

void rx__shared_sweep(uint64_t now, bool force)
{
	uint64_t last;

	if (!rx__shared_on || my_slot < 0)
		return;
	last = atomic_load(&hdr->last_sweep_ns);
	if (!force && !atomic_load(&hdr->sweep_due) &&
	    now - last < RX_SHM_SWEEP_NS)
		return;
	if (!atomic_compare_exchange_strong(&hdr->last_sweep_ns, &last, now))
		return; /* another thread or process sweeps */
	atomic_store(&hdr->sweep_due, 0);
	sweep();
}

/* ---- the process slot ---------------------------------------------------- */

/*
 * Claim a free process slot for this process. A slot's hold row is
 * reserved before the slot is taken (ADR-680): whoever sees a slot in use
 * may read and write its row, so a taken slot's row is always there. A
 * row that cannot be reserved - a full file system - is skipped (a row
 * some earlier process used is there already). Returns the slot, or -1
 * with *@why saying why none could be had.
 */
static int claim_slot(const struct rx_config *cfg, const char **why)
{
	uint32_t me = (uint32_t)getpid();
	int pass, s, err = 0;
	bool zombie;

	my_start = start_time_of((pid_t)me, &zombie);
	for (pass = 0; pass < 2; pass++) {
		for (s = 0; s < RX_SHM_PROCS; s++) {
			uint32_t zero = 0;
			int e;

			if (atomic_load(&procs[s].pid) != 0)
				continue;
			e = rx__shm_back(&seg_file,
					 (uint64_t)((char *)row(s) -
						    seg_file.base),
					 sizeof(*holds) * max_keys);
			if (e != 0) {
				err = e;
				continue;
			}
			if (!atomic_compare_exchange_strong(&procs[s].pid,
							    &zero, me))
				continue;
			atomic_fetch_add(&procs[s].gen, 1); /* a new tag */
			atomic_store(&procs[s].start, my_start);
			procs[s].criticality = (uint32_t)cfg->criticality;
			snprintf(procs[s].tenant, sizeof(procs[s].tenant), "%s",
				 cfg->tenant ? cfg->tenant
					     : program_invocation_short_name);
			memset(row(s), 0, sizeof(*holds) * max_keys);
			atomic_store(&procs[s].state, PROC_LIVE);
			return s;
		}
		sweep(); /* full: give back the dead ones' slots, once */
	}
	*why = err ? rx__shm_back_why(&seg_file, err) : NULL;
	return -1;
}

bool rx__shared_back(uint32_t more, uint64_t now_ns)
{
	return rx__shared_on && rx__shm_back_keys(&seg_file, more, now_ns);
}

static void take_slot(int s)
{
	my_slot = s;
	rx__lock_tag = tag_of(s);
	rx__shm_holds = row(s);
}

/* ---- open, check, map, format ------------------------------------------- */

static void refuse(const char *what)
{
	char line[sizeof(seg_path) + 400];

	snprintf(line, sizeof(line),
		 "RESILIX_SHARED: %.4000s %s; this process guards on its own",
		 seg_path, what);
	rx__log_plain(line);
}

static uint64_t pid_namespace(void)
{
	struct stat st;

	return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The header this process would write; the layout it implies. */
static void expected(const struct rx_config *cfg, size_t wait_size,
		     struct shm_header *h)
{
	uint64_t off;

	memset(h, 0, sizeof(*h));
	memcpy(h->magic, SHM_MAGIC, 8);
	h->version = SHM_VERSION;
	h->header_bytes = SHM_HEADER_BYTES;
	h->uid = (uint32_t)geteuid();
	h->max_keys = cfg->registry.max_keys;
	h->procs = RX_SHM_PROCS;
	h->window_calls =
	    cfg->guard.breaker_on ? cfg->guard.breaker.window_calls : 0;
	h->sizeof_proc = sizeof(struct shm_proc);
	h->sizeof_hold = sizeof(struct rx_shm_hold);
	h->sizeof_lock = sizeof(struct rx_lock);
	h->sizeof_wait = (uint32_t)wait_size;
	h->sizeof_guard = sizeof(struct rx_guard);
	h->sizeof_registry_cfg = sizeof(struct rx_registry_config);
	h->sizeof_guard_cfg = sizeof(struct rx_guard_config);
	h->pidns = pid_namespace();
	h->rcfg = cfg->registry;
	h->gcfg = cfg->guard;
	/* Buckets and tenants are what a key shared by processes is for
	 * (ADR-489); a process alone is one bucket and one tenant. */
	h->gcfg.shares_on = cfg->guard.limiter_on;
	h->registry_bytes = rx_registry_size(&cfg->registry, &cfg->guard);
	off = SHM_HEADER_BYTES;
	h->off_procs = off;
	off += RX_SHM_PROCS * sizeof(struct shm_proc);
	off = (off + 4095) & ~UINT64_C(4095);
	h->off_registry = off;
	off += (h->registry_bytes + 4095) & ~UINT64_C(4095);
	h->off_locks = off;
	off += ((uint64_t)h->max_keys * sizeof(struct rx_lock) + 4095) &
	       ~UINT64_C(4095);
	h->off_waits = off;
	off += ((uint64_t)h->max_keys * wait_size + 4095) & ~UINT64_C(4095);
	h->off_holds = off;
	off += (uint64_t)RX_SHM_PROCS * h->max_keys * sizeof(struct rx_shm_hold);
	h->size = (off + 4095) & ~UINT64_C(4095);
}

/* What differs between the header found and the one wanted, or NULL. */
static const char *mismatch(const struct shm_header *f,
			    const struct shm_header *w, char *why, size_t n)
{
	if (memcmp(f->magic, SHM_MAGIC, 8) != 0)
		return "is not a resilix shared segment (no magic)";
	if (f->version != w->version) {
		snprintf(why, n,
			 "has format version %u, this resilix reads %u",
			 f->version, w->version);
		return why;
	}
	if (f->header_bytes != w->header_bytes ||
	    f->sizeof_proc != w->sizeof_proc ||
	    f->sizeof_hold != w->sizeof_hold ||
	    f->sizeof_lock != w->sizeof_lock ||
	    f->sizeof_wait != w->sizeof_wait ||
	    f->sizeof_guard != w->sizeof_guard ||
	    f->sizeof_registry_cfg != w->sizeof_registry_cfg ||
	    f->sizeof_guard_cfg != w->sizeof_guard_cfg ||
	    f->procs != w->procs)
		return "has another layout (another build of resilix)";
	if (f->uid != w->uid)
		return "was made by another user";
	if (f->max_keys != w->max_keys) {
		snprintf(why, n, "holds %u keys, RESILIX_MAX_KEYS is %u",
			 f->max_keys, w->max_keys);
		return why;
	}
	if (f->window_calls != w->window_calls ||
	    memcmp(&f->gcfg, &w->gcfg, sizeof(w->gcfg)) != 0 ||
	    memcmp(&f->rcfg, &w->rcfg, sizeof(w->rcfg)) != 0)
		return "was made with other breaker, limiter or key settings";
	if (f->pidns != w->pidns)
		return "was made in another pid namespace";
	if (f->size != w->size || f->off_holds != w->off_holds ||
	    f->registry_bytes != w->registry_bytes)
		return "has another layout (another build of resilix)";
	return NULL;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {0, ms * 1000000L};

	nanosleep(&ts, NULL);
}

static void *map_all(int fd, size_t size)
{
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* What seg_file records of the file on @fd mapped at @p (the layout
 * @w): false when it cannot be examined. */
static bool file_of(int fd, void *p, const struct shm_header *w)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return false;
	seg_file = (struct rx_shm_file){
	    .path = seg_path, .dev = st.st_dev, .ino = st.st_ino,
	    .size = w->size, .base = p, .max_keys = w->max_keys,
	    .off_registry = w->off_registry, .off_locks = w->off_locks,
	    .lock_bytes = sizeof(struct rx_lock), .off_waits = w->off_waits,
	    .wait_bytes = w->sizeof_wait,
	    .registry = (struct rx_registry *)(void *)((char *)p +
							w->off_registry),
	    .registry_lock = &((struct shm_header *)p)->registry_lock};
	return true;
}

/* Open an existing segment, check it, map it. NULL: refused (said). */
static void *open_existing(const struct shm_header *want)
{
	struct shm_header *h;
	struct stat st;
	uint64_t until = rx__now_ns() + SHM_WAIT_NS;
	char why[160], buf[200];
	const char *bad;
	void *p;
	int fd;

	fd = open(seg_path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		snprintf(buf, sizeof(buf), "cannot be opened (%s)",
			 errno == ELOOP ? "it is a symbolic link"
					: strerror(errno));
		refuse(buf);
		return NULL;
	}
	for (;;) {
		if (fstat(fd, &st) != 0) {
			refuse("cannot be examined");
			goto fail;
		}
		if (!S_ISREG(st.st_mode)) {
			refuse("is not a regular file");
			goto fail;
		}
		if (st.st_uid != geteuid()) {
			snprintf(buf, sizeof(buf),
				 "is owned by uid %u, not by this user (%u)",
				 (unsigned)st.st_uid, (unsigned)geteuid());
			refuse(buf);
			goto fail;
		}
		if ((st.st_mode & 07777) != 0600) {
			snprintf(buf, sizeof(buf), "has mode %04o, not 0600",
				 (unsigned)(st.st_mode & 07777));
			refuse(buf);
			goto fail;
		}
		if ((uint64_t)st.st_size >= SHM_HEADER_BYTES)
			break;
		/* Empty: the creator may not have sized it yet (ftruncate
		 * sizes it at once, so a few bytes are never that). */
		if (st.st_size != 0 || rx__now_ns() >= until) {
			snprintf(buf, sizeof(buf),
				 "is truncated (%lld bytes, less than its "
				 "header)",
				 (long long)st.st_size);
			refuse(buf);
			goto fail;
		}
		sleep_ms(5);
	}
	h = mmap(NULL, SHM_HEADER_BYTES, PROT_READ, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		refuse("cannot be mapped");
		goto fail;
	}
	while (atomic_load(&h->ready) != SHM_READY &&
	       memcmp(h->magic, SHM_MAGIC, 8) != 0 && rx__now_ns() < until)
		sleep_ms(5);
	while (memcmp(h->magic, SHM_MAGIC, 8) == 0 &&
	       atomic_load(&h->ready) != SHM_READY && rx__now_ns() < until)
		sleep_ms(5);
	bad = mismatch(h, want, why, sizeof(why));
	if (!bad && atomic_load(&h->ready) != SHM_READY)
		bad = "was never finished by the process that made it "
		      "(remove it)";
	if (!bad && (uint64_t)st.st_size != want->size) {
		snprintf(why, sizeof(why),
			 "is truncated or resized (%lld bytes, its header "
			 "says %llu)",
			 (long long)st.st_size, (unsigned long long)want->size);
		bad = why;
	}
	munmap(h, SHM_HEADER_BYTES);
	if (bad) {
		refuse(bad);
		goto fail;
	}
	p = map_all(fd, want->size);
	if (!p) {
		refuse("cannot be mapped");
		goto fail;
	}
	if (!file_of(fd, p, want)) {
		refuse("cannot be examined");
		munmap(p, want->size);
		goto fail;
	}
	close(fd);
	return p;
fail:
	close(fd);
	return NULL;
}

/* Create and format a new segment. NULL with *@exists when another
 * process made it first; NULL otherwise when it failed (said). */
static void *create_new(const struct shm_header *want, bool *exists)
{
	struct shm_header *h;
	struct rx_registry *r;
	void *p;
	int fd, err = 0;

	*exists = false;
	fd = open(seg_path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		  0600);
	if (fd < 0) {
		char buf[160];

		if (errno == EEXIST) {
			*exists = true;
			return NULL;
		}
		snprintf(buf, sizeof(buf), "cannot be created (%s)",
			 strerror(errno));
		refuse(buf);
		return NULL;
	}
	/* The umask may have taken bits away; never add any. */
	if (fchmod(fd, 0600) != 0 || ftruncate(fd, (off_t)want->size) != 0 ||
	    !(p = map_all(fd, want->size))) {
		refuse("cannot be sized or mapped");
		unlink(seg_path);
		close(fd);
		return NULL;
	}
	if (!file_of(fd, p, want) ||
	    (err = rx__shm_back_fixed(&seg_file, &want->rcfg, &want->gcfg)) !=
		0) {
		char buf[300];

		snprintf(buf, sizeof(buf), "cannot be made (%s)",
			 err ? rx__shm_back_why(&seg_file, err)
			     : "cannot be examined");
		refuse(buf);
		munmap(p, want->size);
		unlink(seg_path);
		close(fd);
		return NULL;
	}
	close(fd);
	h = p;
	memcpy(h, want, sizeof(*h));
	atomic_store(&h->ready, 0);
	if (rx_registry_format((char *)p + h->off_registry, h->registry_bytes,
			       &want->rcfg, &want->gcfg, &r) != RX_OK) {
		refuse("cannot be formatted");
		munmap(p, want->size);
		unlink(seg_path);
		return NULL;
	}
	/* No key's memory is reserved yet: the first use of each reserves
	 * it (ADR-680). */
	rx_registry_set_backed(r, 0);
	atomic_store_explicit(&h->ready, SHM_READY, memory_order_release);
	return p;
}

int rx__shared_setup(const struct rx_config *cfg, size_t wait_size,
		     struct rx_shm_view *out)
{
	struct shm_header want;
	const char *why = NULL;
	bool exists = false;
	void *p = NULL;
	int s;

	if (!cfg->shared)
		return 0;
	if (cfg->shared[0] == '/')
		snprintf(seg_path, sizeof(seg_path), "%s", cfg->shared);
	else
		snprintf(seg_path, sizeof(seg_path), "/dev/shm/resilix-%s",
			 cfg->shared);
	expected(cfg, wait_size, &want);
	if (want.registry_bytes == 0) {
		refuse("cannot hold this configuration");
		return -1;
	}
	p = create_new(&want, &exists);
	if (p)
		rx__shared_created = true;
	else if (exists)
		p = open_existing(&want);
	if (!p)
		return -1;
	hdr = p;
	procs = (struct shm_proc *)(void *)((char *)p + hdr->off_procs);
	holds = (struct rx_shm_hold *)(void *)((char *)p + hdr->off_holds);
	registry = (struct rx_registry *)(void *)((char *)p + hdr->off_registry);
	guard_locks = (struct rx_lock *)(void *)((char *)p + hdr->off_locks);
	max_keys = hdr->max_keys;
	fork_pins = mmap(NULL, (size_t)max_keys * sizeof(int32_t),
			 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	if (fork_pins == MAP_FAILED) {
		refuse("cannot be used (no memory)");
		munmap(p, hdr->size);
		return -1;
	}
	s = claim_slot(cfg, &why);
	if (s < 0) {
		char buf[300], all[48];

		snprintf(all, sizeof(all), "%d processes use it", RX_SHM_PROCS);
		snprintf(buf, sizeof(buf), "has no %s process slot (%s)",
			 why ? "usable" : "free", why ? why : all);
		refuse(buf);
		munmap(p, hdr->size);
		return -1;
	}
	take_slot(s);
	rx__shm_bucket = (unsigned)cfg->criticality;
	rx__shm_tenant = tenant_id(procs[s].tenant);
	rx__lock_stall = stall;
	rx__shared_on = true;
	sweep();
	out->registry = registry;
	out->registry_lock = &hdr->registry_lock;
	out->guard_locks = guard_locks;
	out->waits = (char *)p + hdr->off_waits;
	rx__log(RX_LOG_DEBUG,
		"event=shared-attached path=\"%.300s\" created=%d slot=%d "
		"bytes=%llu",
		seg_path, rx__shared_created, s,
		(unsigned long long)hdr->size);
	return 1;
}

/* ---- fork ---------------------------------------------------------------- */

void rx__shared_before_fork(void)
{
	uint32_t k;

	if (!rx__shared_on)
		return;
	for (k = 0; k < max_keys; k++)
		fork_pins[k] = rx__shm_holds[k].pins;
}

void rx__shared_after_fork_child(void)
{
	struct rx_config cfg;
	const char *why = NULL;
	uint32_t k;
	int s;

	if (!rx__shared_on)
		return;
	memset(&cfg, 0, sizeof(cfg));
	cfg.criticality = (enum rx_criticality)procs[my_slot].criticality;
	cfg.tenant = procs[my_slot].tenant;
	s = claim_slot(&cfg, &why);
	if (s < 0) {
		/* No slot: the child passes every call through rather than
		 * settle under its parent's name. */
		rx__log(RX_LOG_WARN,
			"event=shared-no-slot action=pass-through why=\"%s\"",
			why ? why : "all in use");
		atomic_store(&rx__init_state, RX_INIT_OFF);
		return;
	}
	take_slot(s);
	/* The connections the child inherited hold their keys' pins. */
	rx__lock(&hdr->registry_lock);
	for (k = 0; k < max_keys; k++) {
		struct rx_guard *g;

		if (fork_pins[k] <= 0 ||
		    !(g = rx_registry_guard_at(registry, k)))
			continue;
		rx_registry_pin(registry, g, (uint32_t)fork_pins[k]);
		rx__shm_holds[k].pins = fork_pins[k];
	}
	rx__unlock(&hdr->registry_lock);
}
