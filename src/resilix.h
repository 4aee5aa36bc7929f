/*
 * resilix.h - the policy core of resilix, for C programs that want to drive
 * the policies directly. Zero dependencies beyond libc, no I/O, no threads,
 * no allocation on the data path (ADR-001). Time and randomness are
 * injected (ADR-005, ADR-016).
 */
#ifndef RESILIX_H
#define RESILIX_H

#include "resilix/error.h"
#include "resilix/verdict.h"
#include "resilix/rng.h"
#include "resilix/policy.h"
#include "resilix/window.h"
#include "resilix/breaker.h"
#include "resilix/p2.h"
#include "resilix/limiter.h"
#include "resilix/bulkhead.h"
#include "resilix/ratelimit.h"
#include "resilix/throttler.h"
#include "resilix/retry.h"
#include "resilix/partition.h"
#include "resilix/fairshare.h"
#include "resilix/gate.h"
#include "resilix/guard.h"
#include "resilix/registry.h"
#include "resilix/snapshot.h"

#endif
