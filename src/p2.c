/*
 * p2.c - the P² streaming quantile estimator (Jain & Chlamtac, CACM
 * 28(10):1076-1085, 1985).
 *
 * Five markers sit at the minimum, the p/2, p and (1+p)/2 quantiles and the
 * maximum. Each observation moves the positions of the markers above it by
 * one; a middle marker that has drifted at least one position from where it
 * should be (1 + (n-1) x {0, p/2, p, (1+p)/2, 1}) steps one position
 * towards it, and its height moves along a parabola through its two
 * neighbours (the "piecewise-parabolic" P² formula), or along the straight
 * line to the neighbour it steps towards when the parabola would leave the
 * interval between them. The estimate is the middle marker's height.
 *
 * Decisions, where this differs from the paper or from Boost.Accumulators'
 * p_square_quantile:
 *   - Desired positions are computed from the count on every step instead
 *     of being accumulated by adding the increments: same values in exact
 *     arithmetic, no accumulated rounding, two fewer arrays. Accumulating
 *     would save one multiplication per marker and change estimates in
 *     their last bits, so the count stays the source (ADR-181); the
 *     conversions are made once per observation instead.
 *   - A marker due to move between two neighbours of equal height keeps
 *     its height without evaluating either formula: both would return it
 *     (ADR-181). Streams of equal latencies, common with coarse clocks and
 *     cached answers, then cost no division.
 *   - The linear fallback is evaluated as (1-t) q[i] + t q[i+s] with
 *     t = 1/|n[i+s]-n[i]| <= 1/2: it cannot overflow even when the markers
 *     span the whole double range, and the parabola, whose intermediate
 *     products can overflow, is only ever accepted when it lands strictly
 *     between the neighbours (a NaN or infinite candidate fails that test).
 *   - NaN and infinities are ignored: one of them would make every later
 *     estimate NaN.
 *   - With n <= 5 samples the value is the exact quantile of the samples
 *     (linear interpolation at rank p(n-1)), not the middle sample: the
 *     paper only defines the estimate from the sixth observation on.
 * Positions are integers (uint64_t), exact at any count.
 *
 * The data path (ADR-301): the cell search only decides which positions
 * grow, so it is a few comparisons from the top with no loop; positions
 * convert to double through the signed conversion while the count is
 * below 2^62 (the same doubles, one instruction on x86-64); the formulas
 * run out of line. Bit-identical to the previous code (a differential run
 * of six million observations, every byte of the estimator compared after
 * each).
 */
#include <math.h>
#include <stdbool.h>

#include "internal.h"
#include "resilix/error.h"
#include "resilix/p2.h"

/* The P² piecewise-parabolic prediction for marker @i moved by @s. */
static double parabolic(const struct rx_p2 *e, int i, double s)
{
	double n_lo = (double)e->n[i - 1];
	double n_i = (double)e->n[i];
	double n_hi = (double)e->n[i + 1];

	return e->q[i] +
	       s / (n_hi - n_lo) *
		   ((n_i - n_lo + s) * (e->q[i + 1] - e->q[i]) / (n_hi - n_i) +
		    (n_hi - n_i - s) * (e->q[i] - e->q[i - 1]) / (n_i - n_lo));
}

/* Linear prediction towards the neighbour in direction @s, as a convex
 * combination so that it cannot overflow. */
static double linear(const struct rx_p2 *e, int i, int s)
{
	int j = i + s;
	uint64_t gap = s > 0 ? e->n[j] - e->n[i] : e->n[i] - e->n[j];
	double t = 1.0 / (double)gap;
	double a = e->q[i], b = e->q[j];
	double diff = b - a;
	double v;

	/* The usual form is exact for equal heights; the convex form only
	 * when the difference overflows, clamped against its rounding. */
	if (isfinite(diff))
		return a + t * diff;
	v = (1.0 - t) * a + t * b;
	if (v < fmin(a, b))
		v = fmin(a, b);
	if (v > fmax(a, b))
		v = fmax(a, b);
	return v;
}

/*
 * Move marker @i (1..3) one position in direction @s (+1 or -1): the
 * height along the parabola, or the line when the parabola would leave
 * the interval between the neighbours. Out of line: with a spread of
 * latencies most observations move no marker, and the formulas' registers
 * would otherwise be saved and restored on every observation (ADR-301).
 */
static RX__NOINLINE void move(struct rx_p2 *e, int i, int s)
{
	double qp = parabolic(e, i, (double)s);
	if (qp > e->q[i - 1] && qp < e->q[i + 1])
		e->q[i] = qp;
	else
		e->q[i] = linear(e, i, s);
	e->n[i] = s > 0 ? e->n[i] + 1 : e->n[i] - 1;
}

/* A marker position as a double: through the signed conversion (one
 * instruction on x86-64) when @small says every position is below 2^63,
 * where it gives the same double as the unsigned one. */
static RX__INLINE double position(uint64_t n, bool small)
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
static RX__INLINE void adjust(struct rx_p2 *e, int i, double desired, bool small)
{
	double d = desired - position(e->n[i], small);
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
		move(e, i, s);
	}
}

/* Desired positions 1 + c x {p/2, p, (1+p)/2} for the middle markers, c
 * the count before this observation, converted once per observation, not
 * once per marker (ADR-181). */
static RX__INLINE void adjust_all(struct rx_p2 *e, double c, bool small)
{
	adjust(e, 1, 1.0 + c * (e->p / 2.0), small);
	adjust(e, 2, 1.0 + c * e->p, small);
	adjust(e, 3, 1.0 + c * ((1.0 + e->p) / 2.0), small);
}

int rx_p2_init(struct rx_p2 *e, double p)
{
	int rc = RX_OK;

	/* Written so that NaN fails the test too. */
	if (!(p > 0.0 && p < 1.0)) {
		p = 0.5;
		rc = RX_EINVAL;
	}
	e->p = p;
	e->count = 0;
	for (int i = 0; i < 5; i++) {
		e->q[i] = 0.0;
		e->n[i] = (uint64_t)i + 1;
	}
	return rc;
}

void rx_p2_add(struct rx_p2 *e, double x)
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
		adjust_all(e, (double)(int64_t)count, true);
	else
		adjust_all(e, (double)count, false);
}

double rx_p2_value(const struct rx_p2 *e)
{
	if (e->count == 0)
		return 0.0;
	if (e->count > 5)
		return e->q[2];

	/* Exact: interpolate the sorted samples at rank p(n-1). */
	double h = e->p * (double)(e->count - 1);
	double lo = floor(h);
	int i = (int)lo;
	double frac = h - lo;

	if (i + 1 >= (int)e->count)
		return e->q[e->count - 1];
	return (1.0 - frac) * e->q[i] + frac * e->q[i + 1];
}

uint64_t rx_p2_count(const struct rx_p2 *e)
{
	return e->count;
}
