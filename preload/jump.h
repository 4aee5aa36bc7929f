/*
 * preload/jump.h - the jump and _exit wrappers (jump.c, ADR-222, ADR-226).
 */
#ifndef RESILIX_PRELOAD_JUMP_H
#define RESILIX_PRELOAD_JUMP_H

/* rx__jump_bind - resolve the real jump and exit functions now when they
 * cannot be bound at first use from the kept walk (start-up, after
 * rx__symbols_resolve: dlsym is not async-signal-safe, and a jump is
 * usually made from a signal handler; ADR-551). */
void rx__jump_bind(void);

#endif
