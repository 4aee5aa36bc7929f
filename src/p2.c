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

#include "p2-inl.h"
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
	if (v < rx__fmin(a, b))
		v = rx__fmin(a, b);
	if (v > rx__fmax(a, b))
		v = rx__fmax(a, b);
	return v;
}

/*
 * rx__p2_move (p2-inl.h): the height along the parabola, or the line
 * when the parabola would leave the interval between the neighbours. Out
 * of line: with a spread of latencies most observations move no marker,
 * and the formulas' registers would otherwise be saved and restored on
 * every observation (ADR-301).
 */
RX__NOINLINE void rx__p2_move(struct rx_p2 *e, int i, int s)
{
	double qp = parabolic(e, i, (double)s);
	if (qp > e->q[i - 1] && qp < e->q[i + 1])
		e->q[i] = qp;
	else
		e->q[i] = linear(e, i, s);
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
	rx__p2_add(e, x);
}

double rx_p2_value(const struct rx_p2 *e)
{
	if (e->count == 0)
		return 0.0;
	if (e->count > 5)
		return e->q[2];

	/* Exact: interpolate the sorted samples at rank p(n-1). */
	double h = e->p * (double)(e->count - 1);
	double lo = rx__floor(h);
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
