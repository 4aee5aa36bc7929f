/*
 * preload/thread.h - the shim's per-thread flags, in one block (runtime.c
 * defines it): a thread-local variable in a shared object is reached
 * through its own GOT entry, so each flag on its own costs a load of its
 * offset at every use, and the fast paths test four of them at once
 * (ADR-533). The flags keep their names (rx__inside, rx__locks_held,
 * rx__curl_active, rx__tls_mode), which say what each is for where it is
 * declared: runtime.h, lock.h.
 */
#ifndef RESILIX_PRELOAD_THREAD_H
#define RESILIX_PRELOAD_THREAD_H

#include "base.h"

struct rx_guard;
struct rx_lock;

struct rx_thread {
	int inside;	 /* rx__inside */
	int locks_held;	 /* rx__locks_held */
	int tls_mode;	 /* rx__tls_mode */
	int curl_active; /* rx__curl_active */
	/* The guard-lock cache (admit.h's rx__key_lock), read at every
	 * admission and settlement: here, its offset is the flags' (ADR-589). */
	struct rx_guard *key_lock_g;
	struct rx_lock *key_lock_l;
};

extern RX_TLS struct rx_thread rx__thread RX_HIDDEN;

#endif
