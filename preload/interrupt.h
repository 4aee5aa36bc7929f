/*
 * preload/interrupt.h - would the real call have been interrupted by the
 * signal whose handler just ran (interrupt.c, ADR-223)?
 */
#ifndef RESILIX_PRELOAD_INTERRUPT_H
#define RESILIX_PRELOAD_INTERRUPT_H

#include <stdbool.h>

/* rx__interrupt_wanted - true when no signal this thread can receive has
 * a handler installed with SA_RESTART, and one has a handler: whichever
 * ran, connect or write would have failed with EINTR (signal(7)). Up to
 * 64 sigaction calls; for the rare path of a wait a signal ended. */
bool rx__interrupt_wanted(void);

#endif
