/* The run-time choice between the AVX2 and the baseline code of the kernels
   (skcrf/_utils/_vector_exp.h, skcrf/_training/_online_fb.h, the Viterbi
   max-plus sweep of skcrf/_inference/_viterbi.pxd).

   No -march flag is given to the compiler: every file is compiled for the
   baseline of the architecture (x86-64: SSE2), and only the functions marked
   SKCRF_TARGET_AVX2 (GCC's target attribute) use AVX2 instructions. They are
   called only when skcrf_use_avx2 is set, which skcrf_simd_init sets from
   __builtin_cpu_supports("avx2") (CPUID, and the OS saving the YMM registers)
   unless the caller disables it: the SKCRF_DISABLE_AVX2 environment variable,
   read at import (skcrf/_utils/_simd.py), the test hook of the baseline path.
   No FMA: a product is never fused with its sum, so both paths give the same
   bits. Static: each extension module has its own copy, set when it is
   imported (the GIL held, before any kernel runs), never changed after. */
#ifndef SKCRF_SIMD_H
#define SKCRF_SIMD_H

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SKCRF_AVX2_DISPATCH 1
#define SKCRF_TARGET_AVX2 __attribute__((target("avx2")))
/* the one body of a kernel, inlined into its AVX2 and its baseline function */
#define SKCRF_INLINE_BODY static inline __attribute__((always_inline))
#else
#define SKCRF_INLINE_BODY static inline
#endif

static int skcrf_use_avx2 = 0;

/* Choose the code path (disable != 0: the baseline); returns 1 for AVX2. */
static int skcrf_simd_init(int disable) {
#ifdef SKCRF_AVX2_DISPATCH
    __builtin_cpu_init();
    skcrf_use_avx2 = !disable && __builtin_cpu_supports("avx2");
#else
    (void)disable;
#endif
    return skcrf_use_avx2;
}

#endif
