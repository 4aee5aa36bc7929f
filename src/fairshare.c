/*
 * fairshare.c - tenant fairness on one key (resilix/fairshare.h,
 * ADR-488): decayed counts of admitted calls per tenant, in epochs of a
 * half-life, and the shedding of the tenant furthest above its share.
 */
#include <string.h>

#include "common.h"
#include "fairshare-inl.h"
#include "resilix/error.h"
#include "resilix/fairshare.h"

#define E RX_FAIRSHARE_EPOCHS
#define T RX_FAIRSHARE_TENANTS

void rx_fairshare_config_default(struct rx_fairshare_config *cfg)
{
	cfg->half_life_ms = 10000;
	cfg->slack_percent = 25;
	cfg->limit = 20;
}

int rx_fairshare_config_check(const struct rx_fairshare_config *cfg,
			      const char **why)
{
	const char *w = NULL;

	if (cfg == NULL)
		w = "fairshare configuration is missing";
	else if (cfg->half_life_ms < 1 || cfg->half_life_ms > 3600000)
		w = "fairshare half_life_ms: 1..3600000";
	else if (cfg->slack_percent > 1000)
		w = "fairshare slack_percent: 0..1000";
	else if (cfg->limit < 1 || cfg->limit > 1000000)
		w = "fairshare limit: 1..1000000";
	if (w == NULL)
		return RX_OK;
	if (why != NULL)
		*why = w;
	return RX_EINVAL;
}

int rx_fairshare_init(struct rx_fairshare *f,
		      const struct rx_fairshare_config *cfg)
{
	if (f == NULL || rx_fairshare_config_check(cfg, NULL) != RX_OK)
		return RX_EINVAL;
	memset(f, 0, sizeof(*f));
	f->cfg = *cfg;
	f->half_life_ns = cfg->half_life_ms * RX__NS_PER_MS;
	return RX_OK;
}

/* The epoch of @now_ns, never before the latest one seen; no division
 * while @now_ns is still in it. */
static uint64_t epoch_of(const struct rx_fairshare *f, uint64_t now_ns)
{
	uint64_t e;

	if (now_ns < f->epoch_end_ns)
		return f->epoch;
	e = now_ns / f->half_life_ns;
	return e > f->epoch ? e : f->epoch;
}

/* The weight of slot @s at epoch @e: 2^(E-1-age), 0 when not counted. */
static uint64_t weight(const struct rx_fairshare *f, unsigned s, uint64_t e)
{
	uint64_t tag = f->slot_epoch[s];

	if (tag == 0 || tag - 1 > e || e - (tag - 1) >= E)
		return 0;
	return UINT64_C(1) << (E - 1 - (e - (tag - 1)));
}

static uint64_t row_heaviness(const struct rx_fairshare *f, unsigned r,
			      uint64_t e)
{
	uint64_t h = 0;
	unsigned s;

	for (s = 0; s < E; s++)
		h += (uint64_t)f->count[r][s] * weight(f, s, e);
	return h;
}

static int row_of(const struct rx_fairshare *f, uint32_t tenant)
{
	unsigned r;

	for (r = 0; r < T; r++)
		if (f->id[r] == tenant)
			return (int)r;
	return -1;
}

uint64_t rx_fairshare_heaviness(const struct rx_fairshare *f, uint32_t tenant,
				uint64_t now_ns)
{
	int r = tenant ? row_of(f, tenant) : -1;

	return r < 0 ? 0 : row_heaviness(f, (unsigned)r, epoch_of(f, now_ns));
}

uint32_t rx_fairshare_active(const struct rx_fairshare *f, uint64_t now_ns,
			     uint64_t *total)
{
	uint64_t e = epoch_of(f, now_ns), sum = 0;
	uint32_t n = 0;
	unsigned r;

	for (r = 0; r < T; r++) {
		uint64_t h = f->id[r] ? row_heaviness(f, r, e) : 0;

		if (h > 0) {
			n++;
			sum += h;
		}
	}
	if (total != NULL)
		*total = sum;
	return n;
}

bool rx_fairshare_decide(struct rx_fairshare *f, uint32_t tenant,
			 uint64_t now_ns, bool pressure)
{
	uint64_t e, mine, top = 0, sum = 0;
	uint32_t n = 0;
	int me;
	unsigned r;

	if (!pressure || tenant == 0 || (me = row_of(f, tenant)) < 0)
		return false;
	e = epoch_of(f, now_ns);
	mine = row_heaviness(f, (unsigned)me, e);
	if (mine == 0)
		return false;
	for (r = 0; r < T; r++) {
		uint64_t h = f->id[r] ? row_heaviness(f, r, e) : 0;

		if (h == 0)
			continue;
		n++;
		sum += h;
		if (h > top)
			top = h;
	}
	/* Heaviness stays below 2^32 x 2^7 per row, 2^42 in all: the
	 * products below fit in 64 bits. */
	if (n < 2 || mine < top ||
	    mine * n * 100 <= sum * (100 + (uint64_t)f->cfg.slack_percent))
		return false;
	f->shed = rx__sat_add(f->shed, 1);
	return true;
}

void rx_fairshare_take(struct rx_fairshare *f, uint32_t tenant,
		       uint64_t now_ns, struct rx_ticket *ticket)
{
	uint64_t e = epoch_of(f, now_ns);
	unsigned s = (unsigned)(e % E), r;
	int row = tenant ? row_of(f, tenant) : -1;

	ticket->start_ns = e;
	ticket->generation = 0;
	ticket->flags = 0;
	if (tenant == 0)
		return;
	if (e != f->epoch || f->epoch_end_ns == 0) {
		f->epoch = e;
		f->epoch_end_ns = e + 1 <= UINT64_MAX / f->half_life_ns
				      ? (e + 1) * f->half_life_ns
				      : UINT64_MAX;
	}
	/* The usual case: the slot is this epoch's, the tenant has a row. */
	if (f->slot_epoch[s] == e + 1 && row >= 0) {
		if (f->count[row][s] < UINT32_MAX)
			f->count[row][s]++;
		ticket->flags = (uint32_t)row + 1;
		return;
	}
	if (f->slot_epoch[s] != e + 1) {
		/* The slot's old epoch no longer counts: recycle it. */
		for (r = 0; r < T; r++)
			f->count[r][s] = 0;
		f->slot_epoch[s] = e + 1;
	}
	if (row < 0) {
		for (r = 0; r < T && row < 0; r++)
			if (f->id[r] == 0 || row_heaviness(f, r, e) == 0)
				row = (int)r;
		if (row < 0) {
			f->untracked = rx__sat_add(f->untracked, 1);
			ticket->generation = 1; /* counted as untracked */
			return;
		}
		f->id[row] = tenant;
		memset(f->count[row], 0, sizeof(f->count[row]));
	}
	if (f->count[row][s] < UINT32_MAX)
		f->count[row][s]++;
	ticket->flags = (uint32_t)row + 1;
}

void rx_fairshare_release(struct rx_fairshare *f,
			  const struct rx_ticket *ticket)
{
	uint64_t e = ticket->start_ns;
	unsigned s = (unsigned)(e % E);
	unsigned r;

	if (ticket->generation == 1 && f->untracked > 0)
		f->untracked--;
	if (ticket->flags == 0 || ticket->flags > T)
		return;
	r = ticket->flags - 1;
	if (f->slot_epoch[s] == e + 1 && f->count[r][s] > 0)
		f->count[r][s]--;
	if (row_heaviness(f, r, f->epoch) == 0) {
		f->id[r] = 0;
		memset(f->count[r], 0, sizeof(f->count[r]));
	}
}

static enum rx_decision fair_admit(void *self, const struct rx_admit_ctx *ctx,
				   struct rx_ticket *ticket,
				   struct rx_refusal *why)
{
	struct rx_fairshare *f = self;

	if (rx_fairshare_decide(f, ctx->tenant, ctx->now_ns,
				f->in_flight >= f->cfg.limit)) {
		why->reason = RX_REASON_TENANT_SHED;
		why->retry_after_ms = 0;
		return RX_REFUSE;
	}
	rx_fairshare_take(f, ctx->tenant, ctx->now_ns, ticket);
	f->in_flight = rx__sat_inc32(f->in_flight);
	return RX_ADMIT;
}

static void fair_settle(void *self, const struct rx_ticket *ticket,
			const struct rx_observation *obs)
{
	struct rx_fairshare *f = self;

	f->in_flight = rx__sat_dec32(f->in_flight);
	if (obs->verdict == RX_REJECTED)
		rx_fairshare_release(f, ticket);
}

const struct rx_policy_ops rx_fairshare_ops = {"fairshare", fair_admit,
					       fair_settle};
