"""C-level Viterbi kernels of skcrf._inference._viterbi, for reuse by other Cython modules.

Usage from another module (all nogil)::

    from skcrf._inference._viterbi cimport (
        ViterbiWork,
        viterbi_work_init,
        viterbi_work_free,
        viterbi_sequence,
    )

    cdef ViterbiWork work
    if viterbi_work_init(&work, transitions_ptr, n_labels, max_length, tight) != 0:
        ...  # out of memory
    score = viterbi_sequence(&work, emissions_ptr, offsets_ptr, column, length, path_ptr)
    viterbi_work_free(&work)

Conventions: ``transitions[i * n_labels + j]`` is the score of label ``i``
followed by label ``j``; emission rows are ``n_labels`` contiguous doubles.
Ties go to the lowest label index.
"""

from libc.math cimport fabs
from libc.stdint cimport int32_t

from skcrf._utils._typedefs cimport intp


cdef struct ViterbiWork:
    intp n_labels
    intp max_length          # capacity of ``backpointers``, in tokens
    const double* transitions  # (n_labels, n_labels), row-major, not owned
    double spread            # max T - min T (NaN if T is not finite)
    double margin            # rounding margin without its per-row part: 1e-9 * (1 + max |T|)
    # NULL, or bound[a * n_labels + i] = max_j T[i, j] - T[a, j] (<= spread):
    # a per-label pruning bound relative to the best previous label a
    double* bound
    bint owns_bound          # False: ``bound`` belongs to another work (shared, read-only)
    double* scores           # 2 * n_labels: previous and current step
    int32_t* candidates      # n_labels
    int32_t* backpointers    # max_length * n_labels


# Fill ``work`` (one scan of the transitions, then malloc; with ``tight``
# also the per-label bound, O(n_labels ** 3) once: pass
# ``tight_bound_pays(n_labels, n_tokens)``). Returns 0, or -1 when out of
# memory (``work`` then owns nothing). Free with viterbi_work_free.
cdef int viterbi_work_init(ViterbiWork* work, const double* transitions,
                           intp n_labels, intp max_length, bint tight) noexcept nogil

cdef void viterbi_work_free(ViterbiWork* work) noexcept nogil

# The per-label bound of ``work``'s transitions (see viterbi_work_init), in
# new memory the caller owns (free it); NULL when out of memory, when the
# transitions (NaN, +inf) admit no bound, or when there are more than
# TIGHT_BOUND_MAX_LABELS labels. O(n_labels ** 3).
cdef double* viterbi_bound_new(const ViterbiWork* work) noexcept nogil

# A work for one call that shares ``model``'s read-only part (transitions,
# spread, margin and ``bound``, which may be NULL and is not freed with this
# work) and has scratch space of its own for ``max_length`` tokens: threads
# decoding with one model each take their own. Returns 0, or -1 when out of
# memory. Free with viterbi_work_free.
cdef int viterbi_work_share(ViterbiWork* work, const ViterbiWork* model,
                            const double* bound, intp max_length) noexcept nogil

# Best labelling of one sequence of ``length`` tokens (1 <= length <=
# work.max_length; 0 returns 0.0 and writes nothing). Token ``t`` lives at row
# ``offsets[t] + column`` (``offsets == NULL``: row ``t``) of ``emissions``;
# its label is written to ``path[row]``. Returns the best score (-inf when no
# path has a finite score; the path is then unspecified).
cdef double viterbi_sequence(ViterbiWork* work, const double* emissions,
                             const intp* offsets, intp column, intp length,
                             intp* path) noexcept nogil

# Whole packed batch (layout of skcrf._utils._packing): ``batch_sizes`` has
# ``max_length`` non-increasing positive entries; ``path`` gets one label per
# packed row and ``best_score`` (may be NULL) one score per sequence, in
# packed order. ``model``: NULL, or a work of the same transitions made by
# viterbi_work_init (read only: its spread and margin, so that the batch
# does not scan the n_labels ** 2 transitions again); ``bound``: NULL, or
# ``model``'s per-label bound (read only, not freed: see viterbi_bound_new),
# else the batch builds its own when tight_bound_pays. Returns 0, or -1 when
# out of memory.
cdef int viterbi_packed_c(const double* emissions, const double* transitions,
                          intp n_labels, const intp* batch_sizes, intp max_length,
                          intp* path, double* best_score,
                          const ViterbiWork* model, const double* bound) noexcept nogil


# -- one step of the recursion, shared by every Viterbi pass -----------------
#
# Inline (defined here, compiled into each module that cimports it): the
# Viterbi kernel and the forward pass of the lazy k-best (skcrf._inference._nbest)
# take the same sums in the same order, so their scores are bitwise equal.

cdef extern from *:
    """
    #include <stdint.h>
    #include "_simd.h"
    #if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
    #include <emmintrin.h>
    #define SKCRF_VITERBI_SSE2 1
    #else
    #define SKCRF_VITERBI_SSE2 0
    #endif

    /* Relative margin of the pruning bound against rounding (the sums round
       at ~1e-16 relative; any margin much larger than that is exact and safe). */
    #define SKCRF_PRUNE_RELATIVE_MARGIN 1e-9

    /* The per-label bound costs n_labels ** 3 / 2 vector operations and
       n_labels ** 2 doubles: it is built for at most this many labels, so its
       cost stays below TIGHT_BOUND_MAX_LABELS / 2 unpruned Viterbi steps
       (O(n_labels ** 2) each); more labels prune with the spread alone. */
    #define SKCRF_TIGHT_BOUND_MAX_LABELS 256

    /* cur[j], bp[j] = p + trow[j], i  where  p + trow[j] > cur[j]  (strict:
       an equal score keeps the earlier, lower label), for j < n. The
       scalar loop compiles to branches, which the data mispredict; SSE2 is
       part of the x86-64 baseline (no -march needed), AVX2 is chosen at run
       time (_simd.h). Every path takes the same sums and comparisons (a NaN
       or equal score never replaces), so all give the same bits. */
    static inline void skcrf_maxplus_update_baseline(double *cur, int32_t *bp,
                                                     const double *trow, double p,
                                                     int32_t i, Py_ssize_t j,
                                                     Py_ssize_t n) {
    #if SKCRF_VITERBI_SSE2
        const __m128d vp = _mm_set1_pd(p);
        const __m128i vi = _mm_set1_epi32(i);
        for (; j + 2 <= n; j += 2) {
            __m128d v = _mm_add_pd(vp, _mm_loadu_pd(trow + j));
            __m128d s = _mm_loadu_pd(cur + j);
            /* 64-bit lane masks -> two 32-bit masks in the low half */
            __m128i m = _mm_shuffle_epi32(_mm_castpd_si128(_mm_cmpgt_pd(v, s)),
                                          _MM_SHUFFLE(2, 0, 2, 0));
            __m128i b = _mm_loadl_epi64((const __m128i *)(bp + j));
            _mm_storeu_pd(cur + j, _mm_max_pd(v, s));  /* v > s ? v : s */
            b = _mm_or_si128(_mm_andnot_si128(m, b), _mm_and_si128(m, vi));
            _mm_storel_epi64((__m128i *)(bp + j), b);
        }
    #endif
        for (; j < n; j++) {
            double v = p + trow[j];
            if (v > cur[j]) {
                cur[j] = v;
                bp[j] = i;
            }
        }
    }

    #ifdef SKCRF_AVX2_DISPATCH
    #include <immintrin.h>
    /* four labels per step, the rest (n % 4) by the baseline */
    SKCRF_TARGET_AVX2
    static void skcrf_maxplus_update_avx2(double *cur, int32_t *bp, const double *trow,
                                          double p, int32_t i, Py_ssize_t n) {
        Py_ssize_t j = 0;
        const __m256d vp = _mm256_set1_pd(p);
        const __m128i vi = _mm_set1_epi32(i);
        for (; j + 4 <= n; j += 4) {
            __m256d v = _mm256_add_pd(vp, _mm256_loadu_pd(trow + j));
            __m256d s = _mm256_loadu_pd(cur + j);
            /* four 64-bit lane masks -> four 32-bit masks (their low halves) */
            __m256 gt = _mm256_castpd_ps(_mm256_cmp_pd(v, s, _CMP_GT_OQ));
            __m128i m = _mm_castps_si128(_mm_shuffle_ps(_mm256_castps256_ps128(gt),
                                                        _mm256_extractf128_ps(gt, 1),
                                                        _MM_SHUFFLE(2, 0, 2, 0)));
            __m128i b = _mm_loadu_si128((const __m128i *)(bp + j));
            _mm256_storeu_pd(cur + j, _mm256_max_pd(v, s));  /* v > s ? v : s */
            _mm_storeu_si128((__m128i *)(bp + j), _mm_blendv_epi8(b, vi, m));
        }
        skcrf_maxplus_update_baseline(cur, bp, trow, p, i, j, n);
    }
    #endif

    static inline void skcrf_maxplus_update(double *cur, int32_t *bp, const double *trow,
                                            double p, int32_t i, Py_ssize_t n) {
    #ifdef SKCRF_AVX2_DISPATCH
        if (skcrf_use_avx2) {
            skcrf_maxplus_update_avx2(cur, bp, trow, p, i, n);
            return;
        }
    #endif
        skcrf_maxplus_update_baseline(cur, bp, trow, p, i, 0, n);
    }
    """
    # the relative rounding margin of the pruning (see ViterbiWork.margin)
    const double PRUNE_RELATIVE_MARGIN "SKCRF_PRUNE_RELATIVE_MARGIN"
    # the most labels for which the per-label bound is built
    const intp TIGHT_BOUND_MAX_LABELS "SKCRF_TIGHT_BOUND_MAX_LABELS"
    void skcrf_maxplus_update(double* cur, int32_t* bp, const double* trow,
                              double p, int32_t i, intp n) noexcept nogil


cdef inline bint tight_bound_pays(intp n_labels, intp n_tokens) noexcept nogil:
    """Whether to build the per-label bound for ``n_tokens`` tokens (one batch,
    or all a model has decoded so far): at most TIGHT_BOUND_MAX_LABELS labels
    and at least ``8 * n_labels`` tokens, so that its O(n_labels ** 3) cost
    stays within a constant of one O(n_labels ** 2) step per token."""
    return 0 < n_labels <= TIGHT_BOUND_MAX_LABELS and n_tokens >= 8 * n_labels


# The per-label bound one set of transitions shares between calls and threads
# (a model's single-sequence decoder, a TransitionPruning): built once, by the
# call that brings the tokens decoded with it to where it pays. Touched only
# with the GIL held; ``bound`` is NULL until built, then read-only until the
# owner frees it. NULL published after a build (none possible, or no memory)
# is final.
cdef struct SharedBound:
    double* bound
    intp tokens_seen
    bint building


cdef inline bint shared_bound_claim(SharedBound* shared, intp n_labels,
                                    intp n_tokens) noexcept:
    """With the GIL held: count ``n_tokens`` more decoded; True when this
    caller is to build the bound (viterbi_bound_new) and publish it in
    ``shared.bound``, False when it goes on with ``shared.bound`` as it is
    (NULL while another thread builds it)."""
    shared.tokens_seen += n_tokens
    if (shared.bound != NULL or shared.building
            or not tight_bound_pays(n_labels, shared.tokens_seen)):
        return False
    shared.building = True
    return True


cdef inline intp packed_row(const intp* offsets, intp column, intp t) noexcept nogil:
    """Row of token ``t`` of sequence ``column``: ``offsets[t] + column``
    (``offsets == NULL``: row ``t``)."""
    if offsets == NULL:
        return t
    return offsets[t] + column


cdef inline double viterbi_start(const double* em, intp n_labels, double* cur,
                                 intp* top_label) noexcept nogil:
    """Step 0: ``cur = em``. Returns max(em); its lowest label into ``top_label``."""
    cdef intp j, best = 0
    cdef double s, top = em[0]
    for j in range(n_labels):
        s = em[j]
        cur[j] = s
        if s > top:
            top = s
            best = j
    top_label[0] = best
    return top


cdef inline double viterbi_step(const double* transitions, intp n_labels, double spread,
                                double margin, const double* bound, int32_t* candidates,
                                const double* prev, double top, intp* top_label,
                                const double* em, double* cur,
                                int32_t* backpointer) noexcept nogil:
    """One step: ``cur[j] = (prev[i] + T[i, j]) + em[j]`` for the best ``i``
    (the lowest on ties), written to ``backpointer[j]``.

    Only the previous labels that the exact pruning keeps are swept, in
    increasing order: with ``bound == NULL`` those within ``spread`` (plus
    the margins) of ``top``, else within the per-label ``bound`` of the best
    previous label (see ViterbiWork). ``top`` and ``top_label`` are the best
    previous score and its lowest label; returns the best new score, its
    lowest label into ``top_label``. ``candidates``: n_labels scratch.
    """
    cdef intp j, c, n_candidates = 0, best = top_label[0]
    cdef int32_t i
    cdef double threshold, p, s
    cdef const double* trow
    # previous labels still in the running, in increasing order
    # (branch-free); a NaN threshold (infinite scores) prunes nothing
    if bound == NULL:
        threshold = top - (spread + margin + PRUNE_RELATIVE_MARGIN * fabs(top))
        for j in range(n_labels):
            candidates[n_candidates] = <int32_t>j
            n_candidates += not (prev[j] < threshold)
    else:
        threshold = top - (margin + PRUNE_RELATIVE_MARGIN * fabs(top))
        bound = bound + best * n_labels
        for j in range(n_labels):
            candidates[n_candidates] = <int32_t>j
            n_candidates += not (prev[j] < threshold - bound[j])
    if n_candidates == 0:  # cannot happen (the top label passes); be safe
        for j in range(n_labels):
            candidates[j] = <int32_t>j
        n_candidates = n_labels

    i = candidates[0]
    p = prev[i]
    trow = transitions + i * n_labels
    for j in range(n_labels):
        cur[j] = p + trow[j]
        backpointer[j] = i
    for c in range(1, n_candidates):
        i = candidates[c]
        skcrf_maxplus_update(cur, backpointer, transitions + i * n_labels, prev[i], i,
                             n_labels)

    top = cur[0] + em[0]
    best = 0
    for j in range(n_labels):
        s = cur[j] + em[j]
        cur[j] = s
        if s > top:
            top = s
            best = j
    top_label[0] = best
    return top
