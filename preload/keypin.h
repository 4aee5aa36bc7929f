/*
 * preload/keypin.h - the pins of keys, and the one a thread keeps between
 * a close and its next connect to the same key (ADR-546). The functions
 * that take and give pins, rx__key_acquire_hashed and rx__key_release,
 * are declared in admit.h with the rest of a key's life.
 */
#ifndef RESILIX_PRELOAD_KEYPIN_H
#define RESILIX_PRELOAD_KEYPIN_H

#include "resilix/registry.h"

/*
 * rx__keypin_after_fork_child - a forked child: the pins kept by threads
 * that did not come along go back to @r (the child's copy of the
 * registry, whose locks are reset already); the forking thread keeps its
 * own. Single-threaded context (the child's atfork handler).
 */
void rx__keypin_after_fork_child(struct rx_registry *r);

#endif
