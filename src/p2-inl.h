/*
 * p2-inl.h - the inline half of p2.c: the P² estimator's update, inline
 * in the limiter's settlement, which the guard inlines in turn (ADR-302).
 * rx_p2_add is this function; the formulas that move a marker's height are
 * out of line in p2.c. Never installed; included by p2.c and
 * limiter-inl.h (ADR-320).
 */
#ifndef RESILIX_P2_INL_H
#define RESILIX_P2_INL_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "common.h"
#include "resilix/p2.h"

/* Move marker @i (1..3) one position in direction @s (+1 or -1). */
void rx__p2_move(struct rx_p2 *e, int i, int s);

/* A marker position as a double: through the signed conversion (one
 * instruction on x86-64) when @small says every position is below 2^63,
 * where it gives the same double as the unsigned one. */
static RX__INLINE double rx__p2_position(uint64_t n, bool small)
{
	return small ? (double)(int64_t)n : (double)n;
}

/*
 * Step marker @i (1..3) towards @desired, its desired position, when it
 * has drifted at least one position from it and the neighbour it steps
 * towards is more than one position away. Called for the three middle
 * markers in order with a constant @i and @small, so the compiler
 * specialises each call (no loop, no array of increments, fixed offsets).
 */
static RX__INLINE void rx__p2_adjust(struct rx_p2 *e, int i, double desired,
				     bool small)
{
	double d = desired - rx__p2_position(e->n[i], small);
	int s;

	if (d >= 1.0) {
		if (e->n[i + 1] - e->n[i] <= 1)
			return;
		s = 1;
	} else if (d <= -1.0) {
		if (e->n[i] - e->n[i - 1] <= 1)
			return;
		s = -1;
	} else {
		return;
	}

	if (e->q[i - 1] == e->q[i + 1]) {
		/* Heights are ordered, so all three are equal: the parabola
		 * lands on q[i], which is not strictly between its
		 * neighbours, and the linear step moves it by t x 0. Both
		 * are skipped (ADR-181); the "+ 0.0" keeps the one bit they
		 * change, a -0.0 height becoming +0.0. */
		e->q[i] = e->q[i] + 0.0;
		e->n[i] = s > 0 ? e->n[i] + 1 : e->n[i] - 1;
	} else {
		rx__p2_move(e, i, s);
	}
}

/* Desired positions 1 + c x {p/2, p, (1+p)/2} for the middle markers, c
 * the count before this observation, converted once per observation, not
 * once per marker (ADR-181). */
static RX__INLINE void rx__p2_adjust_all(struct rx_p2 *e, double c, bool small)
{
	rx__p2_adjust(e, 1, 1.0 + c * (e->p / 2.0), small);
	rx__p2_adjust(e, 2, 1.0 + c * e->p, small);
	rx__p2_adjust(e, 3, 1.0 + c * ((1.0 + e->p) / 2.0), small);
}

/* rx_p2_add. */
static RX__INLINE void rx__p2_add(struct rx_p2 *e, double x)
{
	uint64_t count = e->count;

	if (!isfinite(x))
		return;
	/* One test for both rare cases: count < 5 and count == UINT64_MAX
	 * (the subtraction wraps below 5). */
	if (count - 5 >= UINT64_MAX - 5) {
		if (count == UINT64_MAX)
			return;
		/* Keep the first five sorted: they become the markers. */
		int i = (int)count;
		while (i > 0 && e->q[i - 1] > x) {
			e->q[i] = e->q[i - 1];
			i--;
		}
		e->q[i] = x;
		e->count = count + 1;
		return;
	}

	/* The cell k holding x (q[k] <= x < q[k+1]; extremes move out)
	 * only decides which positions grow: those of the markers above x.
	 * Heights are ordered, so a middle marker is above x exactly when
	 * x < its height, and the top marker always is. Tested from the top,
	 * where the p90's and the maximum's markers make the common answers
	 * short (ADR-301). */
	if (x < e->q[0]) {
		e->q[0] = x;
		e->n[1]++;
		e->n[2]++;
		e->n[3]++;
	} else if (x >= e->q[4]) {
		e->q[4] = x;
	} else if (x < e->q[3]) {
		e->n[3]++;
		if (x < e->q[2]) {
			e->n[2]++;
			if (x < e->q[1])
				e->n[1]++;
		}
	}
	e->n[4]++;
	e->count = count + 1;

	/* Every position is at most the count, so below 2^62 every one
	 * converts through int64_t, to the same double (ADR-301). */
	if (count < (UINT64_C(1) << 62))
		rx__p2_adjust_all(e, (double)(int64_t)count, true);
	else
		rx__p2_adjust_all(e, (double)count, false);
}

#endif
