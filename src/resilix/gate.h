/*
 * resilix/gate.h - composes an ordered list of policies (ADR-004, ADR-007).
 *
 * admit asks each policy in order. When policy i refuses (or queues), every
 * policy before it that had admitted is settled with RX_REJECTED, which
 * leaves it exactly as if the call had never been admitted. settle hands
 * the observation to every policy, in order.
 */
#ifndef RESILIX_GATE_H
#define RESILIX_GATE_H

#include <stdint.h>

#include "resilix/policy.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RX_GATE_MAX_POLICIES 8

struct rx_gate_entry {
	const struct rx_policy_ops *ops;
	void *self;
};

struct rx_gate {
	uint32_t count;
	struct rx_gate_entry policies[RX_GATE_MAX_POLICIES];
};

/* One admitted call's tickets, one per policy, in gate order. */
struct rx_gate_permit {
	uint32_t count;
	struct rx_ticket tickets[RX_GATE_MAX_POLICIES];
};

/* rx_gate_init - an empty gate (admits everything). Not thread-safe;
 * O(1); no allocation. */
void rx_gate_init(struct rx_gate *g);

/*
 * rx_gate_add - append a policy.
 * @ops and @self are kept, not copied: both outlive the gate.
 * Returns RX_OK, RX_EINVAL for NULL @g, @ops, @self or a NULL admit or
 * settle in @ops, RX_ENOSPC past RX_GATE_MAX_POLICIES. Not thread-safe;
 * O(1); no allocation.
 */
int rx_gate_add(struct rx_gate *g, const struct rx_policy_ops *ops,
                void *self);

/*
 * rx_gate_admit - ask every policy in order.
 * Returns RX_ADMIT with @permit filled (settle it exactly once), or the
 * first refusing policy's RX_REFUSE/RX_QUEUE with @why filled and every
 * earlier admission released. Not thread-safe (callers serialise per gate);
 * O(policies); no allocation.
 */
enum rx_decision rx_gate_admit(struct rx_gate *g,
                               const struct rx_admit_ctx *ctx,
                               struct rx_gate_permit *permit,
                               struct rx_refusal *why);

/*
 * rx_gate_admit_last - admit a call whose last policy already admitted it
 * outside the gate (a waiter the limiter let through with
 * rx_limiter_try_dequeue, ADR-131): asks every policy but the last, in
 * order, and puts @last in the permit's last place.
 * Returns RX_ADMIT with @permit filled (settle it exactly once), or the
 * first refusing policy's decision with @why filled, every earlier
 * admission released, and @last released too (settled with RX_REJECTED on
 * the last policy, ADR-007): the caller holds nothing either way. An empty
 * gate returns RX_ADMIT with an empty permit. Not thread-safe;
 * O(policies); no allocation.
 */
enum rx_decision rx_gate_admit_last(struct rx_gate *g,
                                    const struct rx_admit_ctx *ctx,
                                    const struct rx_ticket *last,
                                    struct rx_gate_permit *permit,
                                    struct rx_refusal *why);

/* rx_gate_settle - report an admitted call's outcome to every policy.
 * Not thread-safe; O(policies); no allocation. */
void rx_gate_settle(struct rx_gate *g, const struct rx_gate_permit *permit,
                    const struct rx_observation *obs);

#ifdef __cplusplus
}
#endif
#endif
