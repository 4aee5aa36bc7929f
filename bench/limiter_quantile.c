/*
 * bench/limiter_quantile.c - the limiter's window quantile two ways, on
 * the same samples: the P² estimator the limiter runs (src/p2-inl.h,
 * inline, as src/limiter-inl.h feeds it) and a log-linear histogram of
 * 2^SUB buckets per octave of microseconds, reset per window (ADR-522).
 *
 *   bench/limiter_quantile        accuracy: |estimate - exact p90| /
 *       exact over 2000 windows of 50, 200 and 1000 samples, for four
 *       latency shapes (SplitMix64, rng.h; exact = linear interpolation
 *       at rank 0.9 (n - 1), as tests/unit/test_p2.c)
 *   bench/limiter_quantile 1 N    N samples into P², a p90 and a reset
 *       every 50 (the limiter's default window_min_samples)
 *   bench/limiter_quantile 2 N    the same into the histogram
 *
 * Under callgrind, the difference of two lengths is instructions per
 * sample, the window's close included (scripts/bench core prints it).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "p2-inl.h"
#include "resilix/rng.h"

#ifndef SUB
#define SUB 4 /* 2^SUB sub-buckets per octave */
#endif
#define NB (64 << SUB)
struct hist { uint32_t c[NB]; uint32_t n; uint16_t lo, hi; };
static inline unsigned hidx(uint64_t v)
{
	v |= 1;
	unsigned e = 63u - (unsigned)__builtin_clzll(v);
	if (e < SUB) return (unsigned)v; /* exact small values */
	return ((e - SUB + 1) << SUB) | (unsigned)((v >> (e - SUB)) & ((1u << SUB) - 1));
}
static inline double hlow(unsigned i)
{
	unsigned o = i >> SUB, m = i & ((1u << SUB) - 1);
	if (o == 0) return m;
	return ldexp((double)((1u << SUB) | m), (int)o - 1);
}
static inline void hadd(struct hist *h, uint64_t v)
{
	unsigned i = hidx(v);
	h->c[i]++; h->n++;
	if (i < h->lo) h->lo = i;
	if (i > h->hi) h->hi = i;
}
static double hq(const struct hist *h, double q)
{
	double rank = q * h->n, below = 0;
	for (unsigned i = h->lo; i <= h->hi; i++) {
		if (h->c[i] && below + h->c[i] >= rank) {
			double lo = hlow(i), hi = hlow(i + 1);
			return lo + (hi - lo) * (rank - below) / h->c[i];
		}
		below += h->c[i];
	}
	return hlow(h->hi + 1);
}
static void hreset(struct hist *h)
{
	if (h->n) memset(&h->c[h->lo], 0, (h->hi - h->lo + 1) * sizeof(h->c[0]));
	h->n = 0; h->lo = NB - 1; h->hi = 0;
}
static struct rx_rng rng;
static double unif(void) { return ((double)(rx_rng_next(&rng) >> 11) + 0.5) / 9007199254740992.0; }
static double normal(void) { return sqrt(-2 * log(unif())) * cos(2 * M_PI * unif()); }
static uint64_t sample(int dist)
{
	switch (dist) {
	case 0: return (uint64_t)(1000 * exp(0.5 * normal()));          /* lognormal 1 ms s=0.5 */
	case 1: return (uint64_t)(200 + 100 * -log(unif()));            /* 200us + exp(100) */
	case 2: return unif() < 0.85 ? (uint64_t)(300 * exp(0.2 * normal())) : (uint64_t)(5000 * exp(0.3 * normal())); /* bimodal */
	default: return (uint64_t)(50000 * exp(1.0 * normal()));        /* heavy 50 ms s=1 */
	}
}
static int cmp(const void *a, const void *b) { uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b; return (x > y) - (x < y); }
static struct hist H;
int main(int argc, char **argv)
{
	int mode = argc > 1 ? atoi(argv[1]) : 0;
	long n = argc > 2 ? atol(argv[2]) : 0;
	rx_rng_seed(&rng, 3);
	hreset(&H);
	if (mode == 0) {
		static const char *dn[] = {"lognormal 1ms s0.5", "200us+exp100us", "bimodal 85% 300us/5ms", "lognormal 50ms s1"};
		int wins[] = {50, 200, 1000};
		for (int d = 0; d < 4; d++) for (int wi = 0; wi < 3; wi++) {
			int w = wins[wi]; double ep = 0, eh = 0, mp = 0, mh = 0; int W = 2000;
			static uint64_t s[1000];
			for (int k = 0; k < W; k++) {
				struct rx_p2 p; rx_p2_init(&p, 0.9); hreset(&H);
				for (int i = 0; i < w; i++) { s[i] = sample(d); rx__p2_add(&p, (double)s[i]); hadd(&H, s[i]); }
				qsort(s, w, 8, cmp);
				/* exact: linear interpolation at rank p(n-1), as test_p2 */
				double r = 0.9 * (w - 1); int lo = (int)r; double ex = s[lo] + (r - lo) * (s[lo + 1 < w ? lo + 1 : lo] - s[lo]);
				double a = fabs(rx_p2_value(&p) - ex) / ex, b = fabs(hq(&H, 0.9) - ex) / ex;
				ep += a; eh += b; if (a > mp) mp = a; if (b > mh) mh = b;
			}
			printf("%-24s w=%4d  P2 mean %5.2f%% max %6.2f%%   hist(%d/oct) mean %5.2f%% max %6.2f%%\n", dn[d], w, 100 * ep / W, 100 * mp, 1 << SUB, 100 * eh / W, 100 * mh);
		}
		return 0;
	}
	/* cost: n samples, windows of 50, a p90 at each window's close */
	static uint64_t v[4096]; for (int i = 0; i < 4096; i++) v[i] = sample(0);
	struct rx_p2 p; rx_p2_init(&p, 0.9); volatile double sink = 0;
	for (long i = 0; i < n; i++) {
		uint64_t x = v[i & 4095];
		if (mode == 1) { rx__p2_add(&p, (double)x); if ((i % 50) == 49) { sink += rx_p2_value(&p); rx_p2_init(&p, 0.9); } }
		else { hadd(&H, x); if ((i % 50) == 49) { sink += hq(&H, 0.9); hreset(&H); } }
	}
	return (int)sink & 0;
}
