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
 */
#include <math.h>

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
 * Step marker @i (1..3) towards @desired, its desired position, when it
 * has drifted at least one position from it and the neighbour it steps
 * towards is more than one position away. Called for the three middle
 * markers in order with a constant @i, so the compiler specialises each
 * call (no loop, no array of increments, fixed offsets).
 */
static inline void adjust(struct rx_p2 *e, int i, double desired)
{
	double d = desired - (double)e->n[i];
	int s;

	if (d >= 1.0 && e->n[i + 1] - e->n[i] > 1)
		s = 1;
	else if (d <= -1.0 && e->n[i] - e->n[i - 1] > 1)
		s = -1;
	else
		return;

	if (e->q[i - 1] == e->q[i + 1]) {
		/* Heights are ordered, so all three are equal: the parabola
		 * lands on q[i], which is not strictly between its
		 * neighbours, and the linear step moves it by t x 0. Both
		 * are skipped (ADR-181); the "+ 0.0" keeps the one bit they
		 * change, a -0.0 height becoming +0.0. */
		e->q[i] = e->q[i] + 0.0;
	} else {
		double qp = parabolic(e, i, (double)s);
		if (qp > e->q[i - 1] && qp < e->q[i + 1])
			e->q[i] = qp;
		else
			e->q[i] = linear(e, i, s);
	}
	e->n[i] = s > 0 ? e->n[i] + 1 : e->n[i] - 1;
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
	int k;

	if (!isfinite(x) || e->count == UINT64_MAX)
		return;

	if (e->count < 5) {
		/* Keep the first five sorted: they become the markers. */
		int i = (int)e->count;
		while (i > 0 && e->q[i - 1] > x) {
			e->q[i] = e->q[i - 1];
			i--;
		}
		e->q[i] = x;
		e->count++;
		return;
	}

	/* The cell k holding x: q[k] <= x < q[k+1]; extremes move out. */
	if (x < e->q[0]) {
		e->q[0] = x;
		k = 0;
	} else if (x >= e->q[4]) {
		e->q[4] = x;
		k = 3;
	} else {
		k = 0;
		while (k < 3 && x >= e->q[k + 1])
			k++;
	}
	for (int i = k + 1; i < 5; i++)
		e->n[i]++;
	e->count++;

	/* Desired positions 1 + (count - 1) x {p/2, p, (1+p)/2} for the
	 * middle markers: the count is converted once per observation, not
	 * once per marker (ADR-181). */
	const double c = (double)(e->count - 1);

	adjust(e, 1, 1.0 + c * (e->p / 2.0));
	adjust(e, 2, 1.0 + c * e->p);
	adjust(e, 3, 1.0 + c * ((1.0 + e->p) / 2.0));
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
