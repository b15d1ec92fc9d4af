/* The scaled forward-backward recursion of l2sgd (skcrf/_training/_online.pyx).

   Compiled for AVX2 and for the baseline, chosen at run time
   (skcrf/_utils/_simd.h). The loops are written so that vectorizing them changes no result:
   every vector lane is one label j (or i), and the sums over the other index
   run in the same order as in a scalar loop; the AVX2 clone has no FMA, so
   no product is fused with its sum. Both clones give the same bits.

   Inputs: et (L x L, row i = previous label) = exp(transitions - max), ett its
   transpose, psi (T x L) = exp(emissions - row max). Outputs: alpha (T x L)
   the state marginals, prs (L x L) the summed pair marginals (when T > 1),
   scale (T) the forward normalizers; beta and tmp are work buffers. Returns
   log_z plus the sum of the logs of the normalizers, added in order. */
#ifndef SKCRF_ONLINE_FB_H
#define SKCRF_ONLINE_FB_H

#include <math.h>
#include <string.h>

#include "_simd.h"

#if defined(_MSC_VER)
#define SKCRF_FB_RESTRICT __restrict
#else
#define SKCRF_FB_RESTRICT restrict
#endif

/* The parameters (and arguments) of the body and of each clone's wrapper. */
#define SKCRF_FB_PARAMS                                                          \
    Py_ssize_t T, Py_ssize_t L, double log_z, const double* SKCRF_FB_RESTRICT et, \
    const double* SKCRF_FB_RESTRICT ett, const double* SKCRF_FB_RESTRICT psi,    \
    double* SKCRF_FB_RESTRICT alpha, double* SKCRF_FB_RESTRICT beta,             \
    double* SKCRF_FB_RESTRICT scale, double* SKCRF_FB_RESTRICT tmp,              \
    double* SKCRF_FB_RESTRICT prs
#define SKCRF_FB_ARGS T, L, log_z, et, ett, psi, alpha, beta, scale, tmp, prs

SKCRF_INLINE_BODY
double skcrf_l2sgd_fb_body(SKCRF_FB_PARAMS) {
    Py_ssize_t t, i, j;
    double c, ai, bj;
    /* forward: alpha[t] normalized to sum 1, scale[t] its normalizer */
    for (t = 0; t < T; t++) {
        const double* ps = psi + t * L;
        double* cur = alpha + t * L;
        if (t == 0) {
            for (j = 0; j < L; j++) cur[j] = ps[j];
        } else {
            const double* prev = alpha + (t - 1) * L;
            memset(tmp, 0, L * sizeof(double));
            for (i = 0; i < L; i++) {
                ai = prev[i];
                if (ai != 0.0) {
                    const double* e = et + i * L;
                    for (j = 0; j < L; j++) tmp[j] += ai * e[j];
                }
            }
            for (j = 0; j < L; j++) cur[j] = tmp[j] * ps[j];
        }
        c = 0.0;
        for (j = 0; j < L; j++) c += cur[j];
        scale[t] = c;
        c = 1.0 / c;
        for (j = 0; j < L; j++) cur[j] *= c;
        log_z += log(scale[t]);
    }
    /* backward, with the pair marginals */
    {
        double* bt = beta + (T - 1) * L;
        for (j = 0; j < L; j++) bt[j] = 1.0;
    }
    if (T > 1) memset(prs, 0, L * L * sizeof(double));
    for (t = T - 2; t >= 0; t--) {
        const double* nxt = beta + (t + 1) * L;
        const double* ps = psi + (t + 1) * L;
        const double* prev = alpha + t * L;
        double* bt = beta + t * L;
        c = 1.0 / scale[t + 1];
        for (j = 0; j < L; j++) tmp[j] = ps[j] * nxt[j] * c;
        memset(bt, 0, L * sizeof(double));
        for (j = 0; j < L; j++) {
            bj = tmp[j];
            const double* e = ett + j * L;
            for (i = 0; i < L; i++) bt[i] += e[i] * bj;
        }
        for (i = 0; i < L; i++) {
            ai = prev[i];
            if (ai != 0.0) {
                const double* e = et + i * L;
                double* pr = prs + i * L;
                for (j = 0; j < L; j++) pr[j] += ai * e[j] * tmp[j];
            }
        }
    }
    for (t = 0; t < T; t++) {
        double* cur = alpha + t * L;
        const double* bt = beta + t * L;
        for (j = 0; j < L; j++) cur[j] *= bt[j];
    }
    return log_z;
}

#ifdef SKCRF_AVX2_DISPATCH
SKCRF_TARGET_AVX2
static double skcrf_l2sgd_fb_avx2(SKCRF_FB_PARAMS) {
    return skcrf_l2sgd_fb_body(SKCRF_FB_ARGS);
}
#endif

static double skcrf_l2sgd_fb_baseline(SKCRF_FB_PARAMS) {
    return skcrf_l2sgd_fb_body(SKCRF_FB_ARGS);
}

static double skcrf_l2sgd_fb(SKCRF_FB_PARAMS) {
#ifdef SKCRF_AVX2_DISPATCH
    if (skcrf_use_avx2)
        return skcrf_l2sgd_fb_avx2(SKCRF_FB_ARGS);
#endif
    return skcrf_l2sgd_fb_baseline(SKCRF_FB_ARGS);
}

#endif
