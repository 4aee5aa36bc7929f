/*
 * common.h - the policy core's shared arithmetic, clock clamp and compiler
 * hints; never installed. Every file of src/ may include it; it includes
 * nothing of resilix, so it sits at the bottom of the include graph.
 *
 * Two rules of CONTRIBUTING.md live here so every policy applies them the same
 * way: arithmetic on times and counters saturates instead of wrapping, and
 * a clock reading earlier than the last one seen means "no time passed"
 * (nginx clamps negative deltas the same way). Nothing here allocates,
 * reads a clock or does I/O. A policy's own inline half is not here but
 * beside its owner, in <policy>-inl.h (ADR-320).
 */
#ifndef RESILIX_COMMON_H
#define RESILIX_COMMON_H

#include <stdint.h>

#define RX__NS_PER_MS UINT64_C(1000000)
#define RX__NS_PER_US UINT64_C(1000)

/* Cold paths (state transitions, window closes, rare formulas) kept out
 * of line, so the data path that calls them saves fewer registers and
 * stays short; hot helpers the compiler must inline whatever its size
 * heuristics say (one copy per constant argument); and branch hints for
 * the tests that guard cold paths (ADR-301). All are only hints: without
 * GCC or Clang they expand to nothing (RX__INLINE to plain inline). */
#if defined(__GNUC__) || defined(__clang__)
#define RX__NOINLINE __attribute__((noinline))
#define RX__INLINE inline __attribute__((always_inline))
#define RX__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RX__LIKELY(x) __builtin_expect(!!(x), 1)
#else
#define RX__NOINLINE
#define RX__INLINE inline
#define RX__UNLIKELY(x) (x)
#define RX__LIKELY(x) (x)
#endif

/* a + b, or UINT64_MAX when the sum does not fit. */
static inline uint64_t rx__sat_add(uint64_t a, uint64_t b)
{
	uint64_t s = a + b;
	return s < a ? UINT64_MAX : s;
}

/* a - b, or 0 when b > a. */
static inline uint64_t rx__sat_sub(uint64_t a, uint64_t b)
{
	return a > b ? a - b : 0;
}

/* a * b, or UINT64_MAX when the product does not fit. The data path
 * converts milliseconds to nanoseconds with it on every call, so where the
 * compiler can, the overflow comes from the multiplication's own flag
 * rather than from a 64-bit division (tens of cycles on common cores). */
static inline uint64_t rx__sat_mul(uint64_t a, uint64_t b)
{
#if defined(__GNUC__) || defined(__clang__)
	uint64_t p;
	if (__builtin_mul_overflow(a, b, &p))
		return UINT64_MAX;
	return p;
#else
	if (a != 0 && b > UINT64_MAX / a)
		return UINT64_MAX;
	return a * b;
#endif
}

/* Increment a 32-bit counter, sticking at UINT32_MAX. */
static inline uint32_t rx__sat_inc32(uint32_t v)
{
	return v == UINT32_MAX ? v : v + 1;
}

/* Decrement a 32-bit counter, sticking at 0 (a double release must not
 * turn into four billion calls in flight). */
static inline uint32_t rx__sat_dec32(uint32_t v)
{
	return v == 0 ? 0 : v - 1;
}

static inline uint64_t rx__ms_to_ns(uint64_t ms)
{
	return rx__sat_mul(ms, RX__NS_PER_MS);
}

/* Whole milliseconds covering @ns, rounded up, so a retry-after never
 * sends a caller back before the moment it names. */
static inline uint64_t rx__ns_to_ms_ceil(uint64_t ns)
{
	return ns / RX__NS_PER_MS + (ns % RX__NS_PER_MS != 0);
}

/*
 * rx__clock - the time a policy acts on: @now_ns, unless it is earlier than
 * the latest time seen (*@last), in which case no time has passed. Updates
 * *@last. Source: CONTRIBUTING.md "Memory, time, errors".
 */
static inline uint64_t rx__clock(uint64_t *last, uint64_t now_ns)
{
	if (now_ns > *last)
		*last = now_ns;
	return *last;
}

/* The same clamp without recording the reading (read-only stats). */
static inline uint64_t rx__clock_peek(uint64_t last, uint64_t now_ns)
{
	return now_ns > last ? now_ns : last;
}

/*
 * rx__floor, rx__ceil - floor(3) and ceil(3) without libm: the policy core
 * and the shim link no libm at all (loading it costs every process under
 * the shim a mapped object and its relocations, ADR-530). Exact for every
 * finite double: below 2^52 in magnitude truncation through int64_t is
 * exact and one step corrects it; from 2^52 up every double is already an
 * integer and is returned, as are infinities and NaN. rx__ceil is
 * -rx__floor(-v). The sign of a zero result may differ from libm's
 * (-0.5 floors to -1.0 but 0.5 ... -0.9 truncate to +0.0), which no
 * comparison can tell. Pure; thread-safe.
 */
static inline double rx__floor(double v)
{
	if (!(v > -4503599627370496.0 && v < 4503599627370496.0))
		return v;
	double t = (double)(int64_t)v;
	return t > v ? t - 1.0 : t;
}

static inline double rx__ceil(double v)
{
	return -rx__floor(-v);
}

/* The lesser and the greater of two doubles, a NaN losing to a number as
 * with fmin(3) and fmax(3). */
static inline double rx__fmin(double a, double b)
{
	return (a < b || b != b) ? a : b;
}

static inline double rx__fmax(double a, double b)
{
	return (a > b || b != b) ? a : b;
}

#endif
