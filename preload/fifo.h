/*
 * preload/fifo.h - places in line for the callers waiting for a token or
 * a bulkhead slot (ADR-383, fifo.c). Every function but the setup runs
 * under the key's guard lock.
 */
#ifndef RESILIX_PRELOAD_FIFO_H
#define RESILIX_PRELOAD_FIFO_H

#include <stdbool.h>
#include <stdint.h>

/* No place: the line was full (FIFO_MAX waiting); such a caller asks the
 * guard as it likes, as before places existed. */
#define RX_FIFO_NONE UINT32_MAX

/* rx__fifo_setup - map one line per registry slot (@max_keys). Start-up
 * only; false when it cannot be mapped. */
bool rx__fifo_setup(uint32_t max_keys);

/* rx__fifo_take - a place at the back of slot @slot's line, or
 * RX_FIFO_NONE when the line is full. O(1). */
uint32_t rx__fifo_take(uint32_t slot);

/* rx__fifo_ahead - does anyone wait in slot @slot's line? A blocking
 * newcomer that finds someone queues behind them. O(1). */
bool rx__fifo_ahead(uint32_t slot);

/* rx__fifo_turn - may the holder of @place on @slot ask the guard now
 * (it is the head of the line, or holds no place)? O(1). */
bool rx__fifo_turn(uint32_t slot, uint32_t place);

/* rx__fifo_leave - @place leaves @slot's line (admitted, refused,
 * interrupted, or moved to the limiter's queue). O(FIFO_MAX) at worst. */
void rx__fifo_leave(uint32_t slot, uint32_t place);

/* rx__fifo_drop - empty @slot's line: a forked child's, whose waiters
 * did not come along. */
void rx__fifo_drop(uint32_t slot);

#endif
