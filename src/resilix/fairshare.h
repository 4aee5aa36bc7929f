/*
 * resilix/fairshare.h - tenant fairness on one key: under pressure, the
 * tenant furthest above its fair share of admitted calls is shed first,
 * and heaviness decays, so nobody is punished for ever (ADR-488).
 *
 * Heaviness. Each tenant's admitted calls are counted in epochs of
 * cfg.half_life_ms: a tenant's heaviness is the sum over the last
 * RX_FAIRSHARE_EPOCHS epochs of its count there x 2^-age (age 0 the
 * current epoch), so a call weighs half as much one half-life later and
 * nothing after RX_FAIRSHARE_EPOCHS of them. Integers in units of
 * 2^-(RX_FAIRSHARE_EPOCHS - 1) call: exact, and a release (settle with
 * RX_REJECTED) takes back exactly what its admission counted while its
 * epoch is still counted (after, the call weighs nothing either way).
 *
 * The rule, under pressure (the caller says so: the limit is reached):
 * with n tenants of non-zero heaviness H_i summing to T, a call of tenant
 * t is shed (RX_REASON_TENANT_SHED) when H_t is the largest of them and
 * H_t x n x 100 > T x (100 + cfg.slack_percent), i.e. t is more than
 * slack above its fair share T / n. One tenant alone is never shed; a
 * tenant id of 0 (none) is never shed nor counted. The shed tenant's
 * heaviness stops growing while the others' grows, until it is no longer
 * the heaviest: the admitted calls converge to equal shares.
 *
 * At most RX_FAIRSHARE_TENANTS tenants are tracked per key; a newcomer
 * takes a row whose heaviness has decayed to 0, and when there is none
 * it is admitted untracked (never shed by this policy).
 *
 * Two ways to drive it, as for partition.h: the guard asks
 * rx_fairshare_decide with its own pressure test and counts admissions
 * with rx_fairshare_take / rx_fairshare_release; the gate policy
 * (rx_fairshare_ops) enforces cfg.limit on its own calls in flight, the
 * tenant being ctx->tenant.
 *
 * Time: now_ns is monotonic; an earlier now_ns counts as no time
 * passing. Plain data, no pointers (lives in shared memory with its
 * guard). Thread safety: none; callers serialise. No allocation, no
 * clock, no blocking; O(tenants x epochs).
 */
#ifndef RESILIX_FAIRSHARE_H
#define RESILIX_FAIRSHARE_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RX_FAIRSHARE_TENANTS 8
#define RX_FAIRSHARE_EPOCHS 8

struct rx_fairshare_config {
	uint64_t half_life_ms;	/* 1..3600000, default 10000 (ADR-488) */
	uint32_t slack_percent; /* 0..1000, default 25 */
	uint32_t limit; /* 1..1000000, the gate policy's fixed limit only */
};

/* rx_fairshare_config_default - half-life 10 s, slack 25 %, limit 20.
 * Writes only @cfg: thread-safe; O(1). */
void rx_fairshare_config_default(struct rx_fairshare_config *cfg);

/* rx_fairshare_config_check - RX_OK, or RX_EINVAL (also for NULL) with
 * *@why (when not NULL) at a static sentence. Thread-safe, O(1). */
int rx_fairshare_config_check(const struct rx_fairshare_config *cfg,
			      const char **why);

struct rx_fairshare {
	struct rx_fairshare_config cfg;
	uint64_t half_life_ns;
	uint64_t epoch;				/* latest epoch seen */
	uint64_t epoch_end_ns; /* (epoch + 1) x half-life once taken, else 0 */
	uint64_t slot_epoch[RX_FAIRSHARE_EPOCHS]; /* epoch + 1; 0 = none */
	uint32_t id[RX_FAIRSHARE_TENANTS];	/* 0 = free */
	uint32_t count[RX_FAIRSHARE_TENANTS][RX_FAIRSHARE_EPOCHS];
	uint32_t in_flight; /* the gate policy's own */
	uint32_t pad;
	/* The guard's (ADR-490): the first tenant that called, and whether
	 * another has since (then every admission is counted). */
	uint32_t first;
	uint32_t many;
	uint64_t shed;	    /* refused by this policy */
	uint64_t untracked; /* admitted with no row free */
};

/* rx_fairshare_init - an empty table from @cfg (checked again, copied).
 * Returns RX_OK or RX_EINVAL. Not thread-safe; O(1). */
int rx_fairshare_init(struct rx_fairshare *f,
		      const struct rx_fairshare_config *cfg);

/* rx_fairshare_heaviness - @tenant's heaviness at @now_ns, in units of
 * 2^-(RX_FAIRSHARE_EPOCHS - 1) admitted call; 0 for an untracked tenant.
 * Read-only; O(epochs). */
uint64_t rx_fairshare_heaviness(const struct rx_fairshare *f, uint32_t tenant,
				uint64_t now_ns);

/* rx_fairshare_active - tenants of non-zero heaviness at @now_ns, and
 * their total heaviness into *@total (may be NULL). Read-only. */
uint32_t rx_fairshare_active(const struct rx_fairshare *f, uint64_t now_ns,
			     uint64_t *total);

/*
 * rx_fairshare_decide - should a call of @tenant be shed at @now_ns?
 * @pressure: the limit is reached (false: never shed). True counts in
 * shed. Nothing is taken. Not thread-safe; O(tenants x epochs).
 */
bool rx_fairshare_decide(struct rx_fairshare *f, uint32_t tenant,
			 uint64_t now_ns, bool pressure);

/*
 * rx_fairshare_take - count an admitted call of @tenant at @now_ns.
 * Fills @ticket (start_ns: its epoch; flags: its row + 1, 0 untracked),
 * which rx_fairshare_release takes back. Not thread-safe.
 */
void rx_fairshare_take(struct rx_fairshare *f, uint32_t tenant,
		       uint64_t now_ns, struct rx_ticket *ticket);

/* rx_fairshare_release - undo rx_fairshare_take exactly (the call was
 * released, RX_REJECTED): its count goes if its epoch still counts; a row
 * left weighing nothing is freed. Not thread-safe; O(epochs). */
void rx_fairshare_release(struct rx_fairshare *f,
			  const struct rx_ticket *ticket);

/* The policy for a gate, with its fixed cfg.limit; self is a struct
 * rx_fairshare *. settle(RX_REJECTED) after admit leaves it as it was
 * (ADR-007); any other verdict keeps the admission counted. */
extern const struct rx_policy_ops rx_fairshare_ops;

#ifdef __cplusplus
}
#endif
#endif
