/*
 * preload/transition.h - what a breaker transition leaves in the log: an
 * admission or settlement step is watched under the key's lock (inline,
 * two stats copies only when level info is on) and logged after the lock
 * is dropped, with the reason for the move (transition.c).
 */
#ifndef RESILIX_PRELOAD_TRANSITION_H
#define RESILIX_PRELOAD_TRANSITION_H

#include <stdbool.h>
#include <stdint.h>

#include "log.h"
#include "resilix/guard.h"
#include "runtime.h"

struct watch {
	bool on;	      /* log a transition (level info) */
	bool changed;	      /* the breaker changed state */
	uint64_t transitions; /* its count before */
	struct rx_breaker_stats before, after;
};

/* rx__watch_begin - before an admission step; the caller holds @g's lock
 * from here to rx__watch_end. */
static inline void rx__watch_begin(struct watch *w, struct rx_guard *g,
				   uint64_t now)
{
	w->transitions = g->breaker.transitions;
	w->on = rx__cfg.guard.breaker_on && rx__log_enabled(RX_LOG_INFO);
	if (w->on)
		rx_breaker_stats(&g->breaker, now, &w->before);
}

/* rx__watch_end - after the step, still under @g's lock. */
static inline void rx__watch_end(struct watch *w, struct rx_guard *g,
				 uint64_t now)
{
	w->changed = g->breaker.transitions != w->transitions;
	if (w->on)
		rx_breaker_stats(&g->breaker, now, &w->after);
}

/* rx__watch_log - log the transition @w saw on key @key, if any, at level
 * info. Called with no lock held; one write. */
void rx__watch_log(const struct watch *w, const char *key);

/* rx__log_limit_change - the limit-change line (ADR-138) of @key. */
void rx__log_limit_change(const char *key, const struct rx_limiter_stats *ls);

/* rx__settle_skipped - the debug line of a call of @key whose own end found
 * it settled already (ADR-382). */
void rx__settle_skipped(const char *key, const char *at);

#endif
