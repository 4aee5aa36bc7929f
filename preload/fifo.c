/*
 * preload/fifo.c - places in line for the callers waiting for a token or
 * a bulkhead slot (ADR-383). A ticket counter per key: a waiter takes the
 * next number, only the head of the line asks the guard for the token or
 * slot, and a blocking newcomer that finds anyone in line takes a number
 * behind them rather than the token the head is waiting for. A waiter
 * may leave out of order (its own send timeout, a signal): its number is
 * marked gone in a 64-bit ring, and the head skips gone numbers. So a
 * blocking caller is refused only when its turn comes after its deadline.
 * Per process; read and written under the key's guard lock; mapped at
 * start-up, untouched pages cost nothing.
 */
#include "config.h"

#include <stddef.h>
#include <sys/mman.h>

#include "fifo.h"

#define FIFO_MAX 64 /* places per key: bits of the gone ring */

struct key_line {
	uint32_t head, next; /* places head..next-1 */
	uint64_t gone; /* bit p % FIFO_MAX: place p left */
};
static struct key_line *lines;

bool rx__fifo_setup(uint32_t max_keys)
{
	void *p = mmap(NULL, (size_t)max_keys * sizeof(struct key_line),
		       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	if (p == MAP_FAILED)
		return false;
	lines = p;
	return true;
}

uint32_t rx__fifo_take(uint32_t slot)
{
	struct key_line *k = &lines[slot];

	if (k->next - k->head >= FIFO_MAX)
		return RX_FIFO_NONE;
	if (k->next == RX_FIFO_NONE) { /* wrap past the sentinel */
		if (k->head != k->next)
			return RX_FIFO_NONE;
		k->head = k->next = 0;
	}
	return k->next++;
}

bool rx__fifo_ahead(uint32_t slot)
{
	return lines && lines[slot].head != lines[slot].next;
}

bool rx__fifo_turn(uint32_t slot, uint32_t place)
{
	return place == RX_FIFO_NONE || place == lines[slot].head;
}

void rx__fifo_leave(uint32_t slot, uint32_t place)
{
	struct key_line *k = &lines[slot];

	if (place == RX_FIFO_NONE || place - k->head >= k->next - k->head)
		return;
	k->gone |= UINT64_C(1) << (place % FIFO_MAX);
	while (k->head != k->next &&
	       (k->gone >> (k->head % FIFO_MAX) & 1)) {
		k->gone &= ~(UINT64_C(1) << (k->head % FIFO_MAX));
		k->head++;
	}
}

void rx__fifo_drop(uint32_t slot)
{
	if (lines)
		lines[slot] = (struct key_line){0, 0, 0};
}
