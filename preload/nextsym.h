/*
 * preload/nextsym.h - many dlsym(RTLD_NEXT) look-ups in one pass over the
 * objects loaded after the shim (nextsym.c, ADR-551).
 */
#ifndef RESILIX_PRELOAD_NEXTSYM_H
#define RESILIX_PRELOAD_NEXTSYM_H

#include <stdbool.h>
#include <stddef.h>

/*
 * rx__next_resolve - set @out[i] to what dlsym(RTLD_NEXT, @names[i]) would
 * return from the shim, for i in [0, @n), reading the dynamic symbol
 * tables (GNU hash) of the objects that follow the shim in the search
 * order, up to and including libc. A name it cannot settle that way (no
 * GNU hash table on the way, an indirect function, a name with two
 * default versions, one libc does not define, the shim not loaded ahead
 * of libc) gets a dlsym call of its own, as before ADR-551, so the
 * result is the same in every case. @names: NUL-terminated, not NULL; an
 * entry of @out is NULL when no object defines the name. Preserves errno.
 * Thread-safe, not async-signal-safe (dl_iterate_phdr takes the loader's
 * lock); no allocation besides dlsym's. Cost: one pass over the loaded
 * objects plus O(1) per name and object (a Bloom filter test), against
 * dlsym's lock, error frame and full look-up per name.
 */
void rx__next_resolve(const char *const *names, void **out, size_t n);

/*
 * rx__next_kept - walk the objects now unless a complete walk is kept;
 * true when one is (the shim is loaded ahead of libc and every object on
 * the way has a GNU hash table). Thread-safe; not async-signal-safe (the
 * walk takes the loader's lock); no allocation.
 *
 * rx__next_lookup - what dlsym(RTLD_NEXT, @name) returns, into *@out,
 * from the kept walk alone; true when that settles it, false when there
 * is no kept walk or it cannot tell (ask dlsym; the same cases as
 * rx__next_resolve's, and a name no object up to libc defines: one after
 * libc may). Async-signal-safe and thread-safe: it reads only the kept
 * walk and the objects' symbol tables; no allocation; preserves errno.
 */
bool rx__next_kept(void);
bool rx__next_lookup(const char *name, void **out);

/*
 * rx__next_defined_ahead - does an object ahead of the shim in the search
 * order (the program, a library preloaded before it) define @name? Then
 * dlsym(RTLD_DEFAULT, @name) finds that one, else the shim's own when the
 * shim defines it. Returns 1 (one does), 0 (none does) or -1 (the walk
 * cannot tell: ask dlsym). Thread-safe; not async-signal-safe; no
 * allocation; O(objects ahead) once the objects are known.
 */
int rx__next_defined_ahead(const char *name);

#endif
