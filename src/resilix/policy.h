/*
 * resilix/policy.h - the one shape every policy has (ADR-004).
 *
 * A policy is a synchronous state machine with four operations: admit,
 * settle, release (settle with RX_REJECTED, ADR-007) and read-only stats.
 * Policies never wait, never read a clock and never allocate: time and
 * randomness arrive in struct rx_admit_ctx / struct rx_observation
 * (ADR-005, ADR-016). Only an executor (the shim) waits.
 *
 * The gate (gate.h) composes policies through struct rx_policy_ops, so a
 * policy never includes another policy's header.
 */
#ifndef RESILIX_POLICY_H
#define RESILIX_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "resilix/rng.h"
#include "resilix/verdict.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What admit decided. A refusal is a normal result, not an error. */
enum rx_decision {
	RX_ADMIT = 0,  /* go ahead; settle the ticket exactly once later */
	RX_REFUSE = 1, /* fail the call fast; see struct rx_refusal */
	RX_QUEUE = 2   /* a blocking caller may wait and ask again; a caller
	                  that cannot wait treats this as RX_REFUSE */
};

/* Why a call was refused. Names are stable: they appear in logs/metrics. */
enum rx_reason {
	RX_REASON_NONE = 0,
	RX_REASON_CIRCUIT_OPEN,   /* breaker open */
	RX_REASON_HALF_OPEN_BUSY, /* breaker half-open, probes all in flight */
	RX_REASON_LIMITER_FULL,   /* adaptive concurrency limit reached */
	RX_REASON_BULKHEAD_FULL,
	RX_REASON_RATE_LIMITED,
	RX_REASON_THROTTLED,
	RX_REASON_REGISTRY_FULL, /* no key state available (pass-through) */
	RX_REASON_BUDGET_EXCEEDED, /* retry budget spent (retry.h) */
	RX_REASON_CRITICALITY_SHED, /* a lower bucket at its share, at the
				       limit (partition.h) */
	RX_REASON_TENANT_SHED, /* the tenant furthest above its fair share,
				  at the limit (fairshare.h) */
	RX_REASON_COUNT
};

/* rx_reason_name - "circuit-open", "half-open-busy", "limiter-full", ...;
 * "unknown" out of range. A static string, never NULL. Thread-safe, O(1),
 * no allocation. */
const char *rx_reason_name(enum rx_reason r);

struct rx_refusal {
	enum rx_reason reason;
	uint64_t retry_after_ms; /* 0 = unknown */
};

/* Everything admit may depend on besides the policy's own state. */
struct rx_admit_ctx {
	uint64_t now_ns;     /* monotonic ns; earlier than last seen = no time */
	struct rx_rng *rng;  /* may be NULL for policies that draw nothing */
	bool can_wait;       /* false for non-blocking callers: never RX_QUEUE */
	uint8_t bucket;      /* criticality bucket (partition.h); 0 = critical */
	uint32_t tenant;     /* tenant id (fairshare.h); 0 = none, never shed */
};

/*
 * What a policy hands out on admit and gets back on settle. Opaque to the
 * caller: copy it, keep it with the call, give it back once.
 */
struct rx_ticket {
	uint64_t start_ns;   /* admission time */
	uint32_t generation; /* policy-defined epoch, see breaker.h */
	uint32_t flags;      /* policy-defined (e.g. "this call is a probe") */
};

/* The outcome of one admitted call. */
struct rx_observation {
	enum rx_verdict verdict;
	uint64_t latency_us; /* time to first byte or to the error, in µs,
				or RX_LATENCY_NONE */
	uint64_t now_ns;     /* monotonic ns at settlement */
};

/*
 * latency_us of a call whose duration says nothing about the upstream: it
 * waited on purpose (a Redis BLPOP, ADR-650). Its verdict counts as any
 * other's - a success closes a half-open breaker, an error is a failure,
 * an overload or a timeout lowers the limit - but it is never slow, and
 * the limiter takes no latency sample from it.
 */
#define RX_LATENCY_NONE UINT64_MAX

/*
 * Every kind of policy the core implements. The conformance test
 * (tests/unit/test_conformance.c) holds one factory per kind and fails when
 * a kind in [0, RX_POLICY_KIND_COUNT) has none, so a new policy cannot skip
 * the ADR-007 release invariant: add the kind here, then its factory there.
 */
enum rx_policy_kind {
	RX_POLICY_BREAKER = 0,
	RX_POLICY_LIMITER,
	RX_POLICY_BULKHEAD,     /* bulkhead.h */
	RX_POLICY_RATELIMIT,    /* ratelimit.h */
	RX_POLICY_THROTTLER,    /* throttler.h */
	RX_POLICY_RETRY_BUDGET, /* retry.h: admit = withdraw a retry */
	RX_POLICY_PARTITION,    /* partition.h: criticality buckets */
	RX_POLICY_FAIRSHARE,    /* fairshare.h: tenants */
	RX_POLICY_KIND_COUNT
};

/* A policy's vtable, used by the gate and by the conformance test. */
struct rx_policy_ops {
	const char *name; /* "breaker", "limiter", ... */
	enum rx_decision (*admit)(void *self, const struct rx_admit_ctx *ctx,
	                          struct rx_ticket *ticket,
	                          struct rx_refusal *why);
	void (*settle)(void *self, const struct rx_ticket *ticket,
	               const struct rx_observation *obs);
};

#ifdef __cplusplus
}
#endif
#endif
