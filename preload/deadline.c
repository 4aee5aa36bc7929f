/*
 * preload/deadline.c - outstanding deadlines (ADR-382): with
 * RESILIX_TIMEOUT_MS set, a call past its deadline is settled as a timeout
 * when the deadline passes, at the next admission or settlement on its
 * key, not when its late answer comes. No timer and no thread: admit.c
 * calls these under the key's guard lock, which it holds anyway.
 */
#include "config.h"

#include <sys/mman.h>

#include "admit.h"
#include "deadline.h"
#include "fdtable.h"
#include "metrics.h"
#include "runtime.h"

/*
 * Outstanding deadlines (ADR-382), beside guard_locks (same index), only
 * with RESILIX_TIMEOUT_MS set: a FIFO of the calls admitted on the key,
 * each with its deadline and a copy of its permit. The timeout is one
 * constant, so arrival order is deadline order. Each admission or
 * settlement on the key settles, under the guard lock it holds anyway,
 * the entries whose deadline has passed as timeouts; a call's own end
 * claims its entry first, and finds it gone when it was settled so: its
 * late answer is then no evidence and releases nothing. An entry holds
 * its sequence number's low 16 bits (0: settled, by either) and its
 * owner (the call's fd record, which has one call armed at a time): the
 * call keeps both, and finds its entry by them. A full ring arms nothing: the
 * call is judged at its own end, as without the ring. Read and written under
 * the key's guard lock; mapped at start-up, untouched pages cost nothing.
 */
#define DL_RING 64     /* entries per key (a power of two) */
#define DL_SWEEP_MAX 8 /* most timeouts settled by one admission */
struct dl_entry {
	uint64_t deadline_ns;
	const void *owner;
	uint16_t seq; /* 0: settled */
	struct rx_gate_permit permit;
};
struct key_deadlines {
	uint64_t head, tail; /* entries head+1..tail, at seq % DL_RING */
	struct dl_entry e[DL_RING];
};
static struct key_deadlines *key_deadlines;
bool rx__deadlines_on;

bool rx__deadline_setup(uint32_t max_keys)
{
	void *p =
	    mmap(NULL, (size_t)max_keys * sizeof(struct key_deadlines),
		 PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return false;
	key_deadlines = p;
	rx__deadlines_on = true;
	return true;
}

void rx__deadline_forget(void)
{
	uint32_t k;

	if (!rx__deadlines_on)
		return;
	/* Zero pages on demand in place of the copy: the child copies none
	 * of the parent's. Should the kernel refuse, clear them one by one. */
	if (madvise(key_deadlines,
		    (size_t)rx__cfg.registry.max_keys *
			sizeof(struct key_deadlines),
		    MADV_DONTNEED) == 0)
		return;
	for (k = 0; k < rx__cfg.registry.max_keys; k++) {
		struct key_deadlines *kd = &key_deadlines[k];

		while (kd->head != kd->tail)
			kd->e[++kd->head % DL_RING].seq = 0;
	}
}

/* Arm a deadline for the call @permit admitted on slot @slot at @now:
 * its sequence number, or 0 when the ring is full (nothing armed). */
uint16_t rx__deadline_push(uint32_t slot, uint64_t now,
			   const struct rx_gate_permit *permit,
			   const void *owner)
{
	struct key_deadlines *kd = &key_deadlines[slot];

	while (kd->tail - kd->head < DL_RING) {
		struct dl_entry *x = &kd->e[++kd->tail % DL_RING];

		x->seq = (uint16_t)kd->tail;
		if (x->seq == 0)
			continue; /* 0 means settled: this place stays so */
		x->owner = owner;
		x->deadline_ns = now + rx__cfg.timeout_ms * RX_NS_PER_MS;
		rx__permit_copy(&x->permit, permit);
		return x->seq;
	}
	return 0;
}

/* The call of @seq ends on its own: take its entry out. false: the entry
 * is gone - the call was settled as a timeout when its deadline passed. */
bool rx__deadline_claim(uint32_t slot, const void *owner, uint16_t seq)
{
	struct dl_entry *x = &key_deadlines[slot].e[seq % DL_RING];

	if (x->seq != seq || x->owner != owner)
		return false;
	x->seq = 0;
	return true;
}

/* Is the program waiting on the call of @owner (ADR-384)? A connect in
 * progress, or a request written and not answered; a connection that is
 * connected and has written nothing since its last answer is idle: its
 * passed deadline is no evidence. NULL (no fd record): waiting. */
static bool owner_waiting(const void *owner)
{
	const struct rx_fd *f = owner;

	return !f ||
	       atomic_load_explicit(&f->phase, memory_order_relaxed) ==
		   RX_FD_CONNECTING ||
	       atomic_load_explicit(&f->wrote, memory_order_relaxed);
}

void rx__deadline_rearm(struct rx_guard *g, const void *owner,
			uint16_t *seq, uint64_t now)
{
	uint32_t slot = rx_registry_index(rx__admit_registry(), g);
	struct rx_lock *l = &rx__admit_guard_locks()[slot];
	struct dl_entry *x;

	rx__lock(l);
	x = &key_deadlines[slot].e[*seq % DL_RING];
	if (*seq != 0 && x->seq == *seq && x->owner == owner) {
		struct rx_gate_permit p;

		rx__permit_copy(&p, &x->permit);
		x->seq = 0;
		*seq = rx__deadline_push(slot, now, &p, owner);
	}
	rx__unlock(l);
}

bool rx__deadline_disarm(struct rx_guard *g, const void *owner, uint16_t seq)
{
	uint32_t slot = rx_registry_index(rx__admit_registry(), g);
	struct rx_lock *l = &rx__admit_guard_locks()[slot];
	bool armed;

	rx__lock(l);
	armed = rx__deadline_claim(slot, owner, seq);
	rx__unlock(l);
	return armed;
}

/* Settle as timeouts, at @now, the calls on slot @slot whose deadline has
 * passed (at most DL_SWEEP_MAX), and drop the entries their calls settled
 * themselves; a passed deadline of an idle connection settles as no
 * evidence (RX_REJECTED, ADR-384). Returns how many were settled. */
unsigned rx__deadline_sweep(struct rx_guard *g, uint32_t slot, uint64_t now)
{
	struct key_deadlines *kd = &key_deadlines[slot];
	struct rx_observation obs;
	unsigned n = 0;

	obs.verdict = RX_TIMEOUT;
	obs.latency_us = rx__cfg.timeout_ms * (RX_NS_PER_MS / RX_NS_PER_US);
	obs.now_ns = now;
	while (kd->head != kd->tail) {
		struct dl_entry *x = &kd->e[(kd->head + 1) % DL_RING];

		if (x->seq != 0) {
			if (x->deadline_ns >= now || n == DL_SWEEP_MAX)
				break;
			obs.verdict = owner_waiting(x->owner) ? RX_TIMEOUT
							      : RX_REJECTED;
			rx_guard_settle(g, &x->permit, &obs);
			if (rx__metrics_on)
				rx__metrics_observe(slot, g, &obs);
			x->seq = 0;
			n++;
		}
		kd->head++;
	}
	return n;
}
