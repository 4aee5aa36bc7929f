/*
 * resilix/snapshot.h - serialise a registry and restore it (hydrate), so a
 * short-lived process learns across runs (RESILIX_STATE_FILE).
 *
 * What is kept per key: the key bytes, the breaker state, its window (each
 * call's verdict flags and age), the consecutive-failure count, the
 * transition count, how long it has been open, and how long the key has
 * been idle. Telemetry counters and calls in flight are not kept: they
 * describe the process that wrote the snapshot. Nor is the limiter's state
 * (ADR-135): its limit and baseline describe the concurrency of the
 * process that learnt them, and a restored key starts at the initial limit.
 *
 * Every time is stored as an age relative to the writer's now_ns, plus the
 * wall-clock time of the snapshot. Hydrate adds the idle gap
 * (wall_now_ns - snapshot wall time, clamped at 0) to every age, so a
 * window that sat on disk for an hour comes back an hour older and an open
 * period that ran out while nobody was looking comes back half-open. The
 * ages are then placed against the reader's now_ns; a monotonic clock
 * younger than an age (just after boot) clamps that age to the clock, so a
 * caller that wants exact ages then adds a constant offset to every now_ns.
 *
 * Format version 1, all integers little-endian:
 *   header  "RXSN", u16 version, u16 reserved (0), u64 total length,
 *           u64 wall_ns, u32 entry count, u32 reserved (0)        32 bytes
 *   entry   u16 key length (<= RX_KEY_MAX), key bytes, u8 state,
 *           u8 flags (bit 0: starved), u32 consecutive failures,
 *           u64 transitions, u64 open age ns, u64 idle age ns,
 *           u32 slot count, then per slot (oldest first) u64 age ns and
 *           u8 slot flags (RX_SLOT_*)
 *   trailer u32 CRC-32 (IEEE 802.3, reflected 0xEDB88320) of every byte
 *           before it
 * Readers reject a version they do not know (RX_EVERSION) and anything
 * malformed (RX_ECORRUPT) before applying a single entry.
 */
#ifndef RESILIX_SNAPSHOT_H
#define RESILIX_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "resilix/registry.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RX_SNAPSHOT_VERSION 1

/*
 * rx_snapshot_size - exact size in bytes rx_snapshot_write needs for @r as
 * it is now. Not thread-safe (callers serialise on the registry); O(keys);
 * no allocation.
 */
size_t rx_snapshot_size(const struct rx_registry *r);

/*
 * rx_snapshot_write - serialise every key of @r into @buf.
 * @now_ns:  monotonic ns, the clock the registry's times are on.
 * @wall_ns: wall-clock ns since the epoch at the same moment.
 * @buf/@cap: destination; @buf may be NULL when @cap is 0.
 * @len:     set to the snapshot's size, also on RX_ENOSPC (not NULL).
 * Returns RX_OK, RX_EINVAL (NULL @r or @len), or RX_ENOSPC when @cap is
 * too small (nothing written). Not thread-safe; O(keys + window slots);
 * no allocation, no I/O.
 */
int rx_snapshot_write(const struct rx_registry *r, uint64_t now_ns,
                      uint64_t wall_ns, void *buf, size_t cap, size_t *len);

/*
 * rx_snapshot_hydrate - restore a snapshot into an empty registry.
 * @buf/@len:    exactly one snapshot (trailing bytes are corruption).
 * @now_ns:      the reader's monotonic ns.
 * @wall_now_ns: wall-clock ns since the epoch now.
 * The registry's own configuration governs: a window smaller than the
 * snapshot's keeps the newest calls, slots and keys aged past the window's
 * max age or the key TTL are dropped (keys with a breaker that is not
 * closed are always kept), and keys beyond max_keys are left out.
 * Returns RX_OK; RX_EINVAL for NULL arguments or a registry that is not
 * empty; RX_EVERSION for a version other than RX_SNAPSHOT_VERSION;
 * RX_ECORRUPT for a bad magic, length, checksum, or any malformed field.
 * On any error the registry is untouched (still empty). Not thread-safe;
 * O(len); no allocation, no I/O.
 */
int rx_snapshot_hydrate(struct rx_registry *r, const void *buf, size_t len,
                        uint64_t now_ns, uint64_t wall_now_ns);

/*
 * rx_snapshot_keys - the key count in the header of the snapshot in
 * @buf/@len, as written (before any key is dropped for age, TTL or room);
 * 0 when @buf does not start with a snapshot header. Reads the header
 * only: no validation of the rest. Thread-safe, O(1), no allocation.
 */
uint32_t rx_snapshot_keys(const void *buf, size_t len);

/*
 * rx_snapshot_merge - fold a snapshot into a registry that may hold keys
 * (RESILIX_STATE_FILE at exit: what concurrent processes wrote meanwhile,
 * ADR-171, ADR-221). Same arguments, validation and ageing as hydrate,
 * and @since_ns: the monotonic ns at which this registry was hydrated
 * (or created, or last merged and written); its window slots recorded
 * later are its own calls, and nothing marks the slots a merge brought in,
 * so a caller that merges twice moves @since_ns to its write. A key
 * the registry lacks is added as hydrate adds it (room permitting). For
 * a key it holds:
 *   - when both breakers are closed, the windows merge: the registry
 *     keeps its own calls and takes the snapshot's slots for the rest, in
 *     time order, the newest window-size of them; consecutive failures are
 *     the run at the newest end, or, when it spans the merged window, the
 *     snapshot's count plus the own calls kept (ADR-221). So failures seen
 *     by processes that overlapped add up instead of one view winning.
 *   - else the snapshot's entry replaces the registry's when its open
 *     period is still running and the registry's is not (the more
 *     cautious view wins, for at most the open time), or both are running
 *     and the snapshot's trip is the later one, or neither is and the
 *     snapshot's key was used more recently; never while the registry's
 *     guard is pinned, has calls in flight or callers waiting. A replaced
 *     key's limiter starts afresh, as hydrate's.
 * Returns as hydrate (but a registry that is not empty is fine); on any
 * error the registry is untouched. Not thread-safe; O(len); no
 * allocation.
 */
int rx_snapshot_merge(struct rx_registry *r, const void *buf, size_t len,
                      uint64_t now_ns, uint64_t wall_now_ns,
                      uint64_t since_ns);

#ifdef __cplusplus
}
#endif
#endif
