/*
 * preload/init.h - start-up (init.c), for the wrappers that may be the
 * first call of a process: a connect made by another library's
 * constructor before ours ran.
 */
#ifndef RESILIX_PRELOAD_INIT_H
#define RESILIX_PRELOAD_INIT_H

#include <stdbool.h>

#include "runtime.h"

/* rx__init - initialise once (the constructor, or the first connect if it
 * came before the constructor). Re-entry and concurrent callers return at
 * once; the caller then passes its call through. Returns rx__ready(). */
bool rx__init(void);

/* rx__init_if_needed - before a connect's begin step: initialise now if
 * nothing did yet and this is not a re-entered call. O(1) once ready. */
static inline void rx__init_if_needed(void)
{
	if (!rx__ready() && !rx__reentered())
		(void)rx__init();
}

#endif
