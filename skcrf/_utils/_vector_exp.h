/* The vectorized exp shared by the kernels (skcrf/_kernels.pyx, skcrf/_online.pyx).

   exp(x) for x <= 0 (scores shifted by their row maximum), vectorized:
   2^k * p(r) with r = x - k ln 2, |r| <= ln(2) / 2, p the degree-13 Taylor
   polynomial (error below 1 ulp before rounding; measured: at most 1 ulp
   from libm's exp). x below -708 gives exp(-708) (about 3e-308) instead of
   a subnormal or 0: in a sum of probabilities with a 1 in every row that
   is no change. NaN stays NaN. Compiled for AVX2 (4 lanes) and for the
   baseline (2 lanes), chosen at run time (skcrf/_utils/_simd.h); no FMA, so
   both give the same bits. "no-trapping-math" lets GCC turn the selects into
   vector blends. Static: each module has its own copy. */
#ifndef SKCRF_VECTOR_EXP_H
#define SKCRF_VECTOR_EXP_H

#include <stdint.h>

#include "_simd.h"

#if defined(SKCRF_AVX2_DISPATCH)
#define SKCRF_NO_TRAPPING_MATH __attribute__((optimize("no-trapping-math")))
#else
#define SKCRF_NO_TRAPPING_MATH
#endif

/* MSVC's C compiler knows restrict only as __restrict */
#if defined(_MSC_VER)
#define SKCRF_RESTRICT __restrict
#else
#define SKCRF_RESTRICT restrict
#endif

SKCRF_INLINE_BODY SKCRF_NO_TRAPPING_MATH
void skcrf_exp_nonpositive_body(double* SKCRF_RESTRICT a, Py_ssize_t n) {
    const double log2e = 1.4426950408889634;
    const double ln2_hi = 6.93147180369123816490e-01;
    const double ln2_lo = 1.90821492927058770002e-10;
    const double shifter = 6755399441055744.0; /* 1.5 * 2^52: rounds to integers */
    for (Py_ssize_t i = 0; i < n; i++) {
        double x0 = a[i];
        double x = x0 > -708.0 ? x0 : -708.0;
        double t = x * log2e + shifter;
        double k = t - shifter;
        double r = (x - k * ln2_hi) - k * ln2_lo;
        double r2 = r * r, r3 = r2 * r, r4 = r2 * r2;
        double p_hi = ((((1.0 / 6227020800.0) * r + 1.0 / 479001600.0) * r
                        + 1.0 / 39916800.0) * r + 1.0 / 3628800.0) * r + 1.0 / 362880.0;
        double p_mid = ((1.0 / 40320.0) * r + 1.0 / 5040.0) * r + 1.0 / 720.0;
        double p_lo = (((1.0 / 120.0) * r + 1.0 / 24.0) * r + 1.0 / 6.0) * r + 0.5;
        double p = 1.0 + r + r2 * (p_lo + r4 * (p_mid + r3 * p_hi));
        union { double d; int64_t i; } bits, scale;
        bits.d = t;  /* k sits in the low bits of t */
        scale.i = (bits.i - 0x4338000000000000LL + 1023) << 52;
        double y = p * scale.d;
        a[i] = x0 == x0 ? y : x0;
    }
}

#ifdef SKCRF_AVX2_DISPATCH
SKCRF_TARGET_AVX2 SKCRF_NO_TRAPPING_MATH
static void skcrf_exp_nonpositive_avx2(double* SKCRF_RESTRICT a, Py_ssize_t n) {
    skcrf_exp_nonpositive_body(a, n);
}
#endif

SKCRF_NO_TRAPPING_MATH
static void skcrf_exp_nonpositive_baseline(double* SKCRF_RESTRICT a, Py_ssize_t n) {
    skcrf_exp_nonpositive_body(a, n);
}

/* a[i] = exp(a[i]) for the n entries of a, all <= 0 */
static void skcrf_exp_nonpositive(double* SKCRF_RESTRICT a, Py_ssize_t n) {
#ifdef SKCRF_AVX2_DISPATCH
    if (skcrf_use_avx2) {
        skcrf_exp_nonpositive_avx2(a, n);
        return;
    }
#endif
    skcrf_exp_nonpositive_baseline(a, n);
}

#endif
