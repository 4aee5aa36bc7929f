/*
 * resilix/registry.h - the bounded key registry.
 *
 * Maps key bytes ("127.0.0.1:8080", "GET api:443/users") to a struct
 * rx_guard. Every guard and every window slot is allocated once, in
 * rx_registry_create; lookups never allocate. A hard cap on keys and an idle
 * TTL bound memory however many keys an attacker or tenant can make up.
 * A guard is pinned while a caller holds it (acquire .. release) and is
 * never evicted while pinned, while calls are in flight or callers wait in
 * its limiter's queue, or while its breaker is not closed. When full and
 * nothing can be evicted, acquire returns NULL: the caller passes the call
 * through unguarded, and the overflow counter says so.
 *
 * Eviction (registry.c): when full, the least recently released idle
 * entry goes (an LRU list, O(1)). Hold the pin from admit to settle: the
 * registry judges an entry by the state it had when last released, so a
 * guard settled while unpinned becomes evictable only once a bounded scan
 * (a few entries per acquire) comes across it. Idle TTL: each acquire
 * evicts up to two entries idle for key_ttl_ms, and a key found after that
 * long idle starts from fresh state. Lookup is open addressing with
 * backward-shift deletion (no tombstones), FNV-1a hashed (Fowler, Noll,
 * Vo; Knuth, TAOCP vol. 3, 6.4 Algorithm R).
 *
 * Thread safety: none; callers serialise on the registry (the shim holds
 * its registry lock around acquire and release, and a key's lock around
 * the guard's calls).
 */
#ifndef RESILIX_REGISTRY_H
#define RESILIX_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "resilix/guard.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RX_KEY_MAX 255 /* longest key in bytes; longer keys are truncated */

struct rx_registry_config {
	uint32_t max_keys;   /* 1..1000000, default 1024 (the shim accepts
	                        at most 65536: ADR-205) */
	uint64_t key_ttl_ms; /* idle time before eviction, default 600000;
	                        0 = no idle eviction; at most 30 days */
};

/* rx_registry_config_default - fill @cfg with the defaults above (1024
 * keys, about 1 MB with the default breaker window; ten idle minutes).
 * Writes only @cfg: thread-safe; O(1); no allocation. */
void rx_registry_config_default(struct rx_registry_config *cfg);

struct rx_registry;

/*
 * rx_registry_create - allocate a registry (the only allocation it makes).
 * @rcfg, @gcfg: copied; every key's guard is made from @gcfg.
 * Allocates, zeroed, max_keys entries (a guard and RX_KEY_MAX + 1 key
 * bytes each), max_keys x window_calls window slots of 16 bytes (none with
 * the breaker off) and a hash index of 4-byte cells, the smallest power of
 * two >= 2 x max_keys.
 * Returns RX_OK and *@out; RX_EINVAL for a NULL @out or a bad config
 * (either one; *@out untouched); RX_ENOMEM (*@out NULL, nothing leaked).
 * Not thread-safe; O(1) besides the zeroing (entries are set up when
 * first used, ADR-550).
 */
int rx_registry_create(struct rx_registry **out,
                       const struct rx_registry_config *rcfg,
                       const struct rx_guard_config *gcfg);

/*
 * rx_registry_size - the bytes of the one block a registry of this
 * configuration takes (header, entries, index, window slots); 0 for a bad
 * config. Thread-safe; O(1); no allocation.
 *
 * rx_registry_format - lay a registry out in @mem (@size bytes, at least
 * rx_registry_size, 16-aligned, zeroed), which the caller owns: the block
 * holds no pointer, only offsets from its start, so memory mapped at a
 * different address in each of several processes holds one registry that
 * every mapping reads (callers serialise across processes themselves).
 * Returns RX_OK and *@out (== @mem), or RX_EINVAL. Not thread-safe;
 * O(1): it writes the header alone, and an entry is written when first
 * used (ADR-550); no allocation. Do not rx_registry_destroy it.
 */
size_t rx_registry_size(const struct rx_registry_config *rcfg,
                        const struct rx_guard_config *gcfg);
int rx_registry_format(void *mem, size_t size,
                       const struct rx_registry_config *rcfg,
                       const struct rx_guard_config *gcfg,
                       struct rx_registry **out);

/* rx_registry_destroy - free everything create allocated; every guard and
 * key pointer it handed out dies with it. NULL is accepted. Not
 * thread-safe; O(1). */
void rx_registry_destroy(struct rx_registry *r);

/*
 * rx_registry_acquire - find or create the guard of a key, and pin it.
 * @key/@len: key bytes (len > RX_KEY_MAX is truncated); any bytes, NUL
 *   included; @key may be NULL only with @len 0 (the empty key).
 * @now_ns: monotonic ns; earlier than the latest seen counts as no time
 *   passing (idle ages and the TTL are measured on it).
 * Returns the guard (valid until rx_registry_release), or NULL when the
 * registry is full and no key can be evicted (counted as an overflow), or
 * for a NULL @r or a NULL @key with @len > 0 (not counted).
 * Not thread-safe: callers serialise on the registry. O(1) expected (at
 * most two TTL evictions and a bounded scan of parked entries); no
 * allocation.
 */
struct rx_guard *rx_registry_acquire(struct rx_registry *r, const char *key,
                                     size_t len, uint64_t now_ns);

/*
 * rx_registry_hash - the hash rx_registry_acquire gives @key/@len: 32-bit
 * FNV-1a of the bytes (truncated at RX_KEY_MAX, as acquire truncates);
 * NULL is the empty key. For a caller that meets the same key often and
 * keeps its hash (the shim's memo of a thread's last destination).
 * Pure: any thread; O(len); no allocation.
 *
 * rx_registry_acquire_hashed - rx_registry_acquire with @hash, which must
 * be rx_registry_hash(@key, @len): the same guard, without hashing again.
 * A wrong @hash finds or makes a different entry for the same key. Not
 * thread-safe, as acquire; O(1) expected; no allocation.
 */
uint32_t rx_registry_hash(const char *key, size_t len);
struct rx_guard *rx_registry_acquire_hashed(struct rx_registry *r,
                                            const char *key, size_t len,
                                            uint32_t hash, uint64_t now_ns);

/* rx_registry_release - unpin a guard returned by acquire. NULL @r or @g,
 * or a guard that is not pinned (a double release), is ignored. Not
 * thread-safe; O(1); no allocation. */
void rx_registry_release(struct rx_registry *r, struct rx_guard *g);

/* rx_registry_index - a guard's stable slot number, 0..max_keys-1, for
 * callers that keep per-guard data (locks) beside the registry. @g: a
 * guard of @r, not NULL. Reads nothing that changes: any thread; O(1); no
 * allocation. */
uint32_t rx_registry_index(const struct rx_registry *r,
                           const struct rx_guard *g);

/* rx_registry_guard_at - the guard in slot @index (< max_keys) when the
 * slot holds a key, else NULL. rx_registry_reset_at - give that guard a
 * fresh state (a half-done update found by a caller that serialises across
 * processes: ADR-482), keeping its key and pins. Not thread-safe: callers
 * hold the key's lock; O(1); no allocation. */
struct rx_guard *rx_registry_guard_at(struct rx_registry *r, uint32_t index);
void rx_registry_reset_at(struct rx_registry *r, uint32_t index,
                          uint64_t now_ns);

/*
 * rx_registry_repair - rebuild the index, the lists and the count from the
 * entries, after a process that shares the registry died while it changed
 * them (ADR-482). An entry on no list with no pin (a half-done insert) gets
 * a fresh guard; one whose bookkeeping is out of range is freed; a key found
 * twice keeps its first entry (a pinned second one is renamed to a key no
 * program makes, and leaves when unpinned). @pins_of, when not NULL, gives
 * each slot's true pin count. Not thread-safe; O(max_keys); no allocation.
 *
 * rx_registry_pin - pin an acquired guard @n more times (a forked child
 * whose inherited connections hold it, in a shared registry). Not
 * thread-safe; O(1).
 */
void rx_registry_repair(struct rx_registry *r,
                        uint32_t (*pins_of)(void *arg, uint32_t index),
                        void *arg, uint64_t now_ns);
void rx_registry_pin(struct rx_registry *r, struct rx_guard *g, uint32_t n);

/* rx_registry_key - the key bytes of a guard of @r, NUL-terminated; valid
 * while the guard is pinned (an evicted entry's bytes are reused). Not
 * thread-safe; O(1); no allocation. */
const char *rx_registry_key(const struct rx_registry *r,
                            const struct rx_guard *g);

/* rx_registry_is - is @g (pinned, of @r) the guard of @key (@len bytes,
 * clamped to RX_KEY_MAX as acquire does), whose rx_registry_hash is
 * @hash? What an acquire of that key would find, without the lookup: for
 * a caller holding a pin it may hand on (preload/keypin.c, ADR-546). Not
 * thread-safe; O(len); no allocation. */
bool rx_registry_is(const struct rx_registry *r, const struct rx_guard *g,
                    const char *key, size_t len, uint32_t hash);

/*
 * Backing (ADR-680). A block in memory that may not be there when first
 * touched - a file on a tmpfs that fills up, mapped MAP_SHARED, where the
 * first touch of a page with no space left is a SIGBUS - is handed out
 * only as far as its owner has made sure of it. An entry at or past the
 * backed bound is never handed out nor read: a new key that would need
 * one evicts an idle key or is refused, as when the registry is full.
 * rx_registry_format and rx_registry_create back every entry.
 *
 * rx_registry_fixed_spans - the byte ranges, from the block's start, that
 * any use touches (the header, the hash index) in a block of these
 * settings, known before it is formatted; 0 ranges for settings
 * rx_registry_size refuses. rx_registry_entry_spans -
 * those of entries @first to @first + @n - 1 (each entry and its window
 * slots), clamped to max_keys; 0 ranges when @first is past it. Both
 * write at most RX_REGISTRY_SPANS ranges to @out and return how many.
 * rx_registry_backed - the bound; rx_registry_set_backed - set it (to at
 * most max_keys; a caller lowers it only before the first acquire).
 * rx_registry_wants_backing - would a new key need an entry past the
 * bound (none given back is free, and never-used ones are left)? Not
 * thread-safe: callers serialise on the registry; O(1); no allocation.
 */
#define RX_REGISTRY_SPANS 2
struct rx_registry_span {
        uint64_t off, len; /* bytes */
};
int rx_registry_fixed_spans(const struct rx_registry_config *rcfg,
                            const struct rx_guard_config *gcfg,
                            struct rx_registry_span out[RX_REGISTRY_SPANS]);
int rx_registry_entry_spans(const struct rx_registry *r, uint32_t first,
                            uint32_t n,
                            struct rx_registry_span out[RX_REGISTRY_SPANS]);
uint32_t rx_registry_backed(const struct rx_registry *r);
void rx_registry_set_backed(struct rx_registry *r, uint32_t n);
bool rx_registry_wants_backing(const struct rx_registry *r);

/* rx_registry_count - live keys; rx_registry_overflows - acquire calls
 * that found no room, since create (saturating). Not thread-safe; O(1);
 * no allocation. */
uint32_t rx_registry_count(const struct rx_registry *r);
uint64_t rx_registry_overflows(const struct rx_registry *r);

/* rx_registry_foreach - call @fn on every live guard (telemetry,
 * snapshot), pinned or not, in slot order. @fn must not acquire or
 * release. Not thread-safe; O(max_keys); no allocation. */
void rx_registry_foreach(struct rx_registry *r,
                         void (*fn)(void *arg, const char *key,
                                    struct rx_guard *g),
                         void *arg);

#ifdef __cplusplus
}
#endif
#endif
