"""Compiled Viterbi decoding of linear-chain CRFs (batched and single sequence).

Conventions: ``emissions[r, j]`` is the score of label ``j`` at row ``r``,
``transitions[i, j]`` the score of label ``i`` followed by label ``j``, no
start or end transitions; ties go to the lowest label index, in the
backpointers and at the final argmax (as CRFsuite).

The batch is decoded one sequence at a time (the sequence's tokens are rows
``offsets[t] + s`` of the packed layout), so the two score rows of the
recursion and the sequence's backpointers stay in the L1/L2 cache. One step
(``viterbi_step``, defined inline in ``_viterbi.pxd`` and shared with the
forward pass of the lazy k-best in :mod:`skcrf._inference._nbest`) is a
max-plus product ``best[j] = max_i prev[i] + T[i, j]`` computed as a sweep
over the previous labels ``i`` (in increasing order, with a strict ``>`` so
the lowest label keeps a tie) of the contiguous row ``T[i, :]``, vectorized
across ``j`` (SSE2, or AVX2 where the CPU has it: the same bits).

Exact pruning: with ``spread = max T - min T``, a previous label ``i`` with
``prev[i] < max(prev) - spread`` can neither win nor tie at any ``j``, since
``prev[i] + T[i, j] <= prev[i] + max T < max(prev) + min T``. A small margin
covers the rounding of the sums (it is relative to the size of the scores
and of the transitions, so the rounded sums keep the exact order); pruning
less is always safe. With trained (peaked) emissions only a handful of
labels remain per step. Forbidden pairs (``-inf`` transitions, from
constraints) keep the tight per-label bound exact: a pair ``i -> j`` that is
forbidden cannot win at ``j``, and one the best label cannot take keeps
``i`` in the running.
"""

from libc.math cimport INFINITY, fabs
from libc.stdint cimport int32_t, int64_t, INT32_MAX
from libc.stdlib cimport free, malloc

import numpy as np

from skcrf._utils._simd import avx2_disabled

cimport numpy as cnp

cnp.import_array()

# the max-plus sweep's AVX2 or baseline code (_viterbi.pxd), chosen once at
# import (SKCRF_DISABLE_AVX2=1: baseline)
cdef extern from "_simd.h":
    int skcrf_simd_init(int disable) noexcept

AVX2_PATH = bool(skcrf_simd_init(avx2_disabled()))


cdef extern from *:
    """
    /* SKCRF_VITERBI_SSE2 and <emmintrin.h>: see _viterbi.pxd */

    /* lo, hi = min, max of x[:n] (n >= 1); *nonfinite = 0.0 if every x is
       finite, else NaN. Independent accumulators: no latency chain. */
    static void skcrf_minmax(const double *x, Py_ssize_t n, double *lo, double *hi,
                             double *nonfinite) {
        double l = x[0], h = x[0], z = 0.0;
        Py_ssize_t k = 0;
    #if SKCRF_VITERBI_SSE2
        if (n >= 4) {
            __m128d l0 = _mm_loadu_pd(x), l1 = _mm_loadu_pd(x + 2);
            __m128d h0 = l0, h1 = l1, zero = _mm_setzero_pd();
            __m128d z0 = _mm_mul_pd(l0, zero), z1 = _mm_mul_pd(l1, zero);
            double buf[2];
            for (k = 4; k + 4 <= n; k += 4) {
                __m128d a = _mm_loadu_pd(x + k), b = _mm_loadu_pd(x + k + 2);
                l0 = _mm_min_pd(l0, a); l1 = _mm_min_pd(l1, b);
                h0 = _mm_max_pd(h0, a); h1 = _mm_max_pd(h1, b);
                z0 = _mm_add_pd(z0, _mm_mul_pd(a, zero));
                z1 = _mm_add_pd(z1, _mm_mul_pd(b, zero));
            }
            _mm_storeu_pd(buf, _mm_min_pd(l0, l1));
            l = buf[0] < buf[1] ? buf[0] : buf[1];
            _mm_storeu_pd(buf, _mm_max_pd(h0, h1));
            h = buf[0] > buf[1] ? buf[0] : buf[1];
            _mm_storeu_pd(buf, _mm_add_pd(z0, z1));
            z = buf[0] + buf[1];
        }
    #endif
        for (; k < n; k++) {
            l = x[k] < l ? x[k] : l;
            h = x[k] > h ? x[k] : h;
            z += x[k] * 0.0;  /* NaN for an infinite or NaN x */
        }
        *lo = l;
        *hi = h;
        *nonfinite = z == 0.0 ? 0.0 : z - z;
    }
    """
    void skcrf_minmax(const double* x, intp n, double* lo, double* hi,
                      double* nonfinite) noexcept nogil


cdef int viterbi_work_init(ViterbiWork* work, const double* transitions,
                           intp n_labels, intp max_length, bint tight) noexcept nogil:
    cdef intp n = n_labels * n_labels
    cdef double lo = 0.0, hi = 0.0, nonfinite = 0.0, absmax
    cdef bint forbidden
    work.n_labels = n_labels
    work.max_length = max_length
    work.transitions = transitions
    work.scores = NULL
    work.candidates = NULL
    work.backpointers = NULL
    work.bound = NULL
    work.owns_bound = True
    if n > 0:
        skcrf_minmax(transitions, n, &lo, &hi, &nonfinite)
    forbidden = nonfinite != 0.0 and _finite_or_forbidden(transitions, n, &lo, &hi)
    if forbidden:
        # -inf transitions (forbidden pairs): the tight bound stays exact
        # (see viterbi_bound_new); the spread bound cannot prune
        nonfinite = 0.0
    absmax = fabs(lo) if fabs(lo) > fabs(hi) else fabs(hi)
    # NaN or +inf transitions give a NaN margin: no pruning at all
    work.spread = INFINITY if forbidden else (hi - lo) + nonfinite
    work.margin = PRUNE_RELATIVE_MARGIN * (1.0 + absmax) + nonfinite
    if _alloc_scratch(work) != 0:
        return -1
    if tight and n > 0 and nonfinite == 0.0:
        work.bound = viterbi_bound_new(work)
        if work.bound == NULL:
            viterbi_work_free(work)
            return -1
    return 0


cdef int viterbi_work_share(ViterbiWork* work, const ViterbiWork* model,
                            const double* bound, intp max_length) noexcept nogil:
    work.n_labels = model.n_labels
    work.max_length = max_length
    work.transitions = model.transitions
    work.spread = model.spread
    work.margin = model.margin
    work.bound = <double*> bound
    work.owns_bound = False
    return _alloc_scratch(work)


cdef int _alloc_scratch(ViterbiWork* work) noexcept nogil:
    """The per-call part of ``work``; -1 (``work`` then owns nothing) when out of memory."""
    cdef intp n_labels = work.n_labels if work.n_labels > 1 else 1
    cdef intp max_length = work.max_length if work.max_length > 1 else 1
    work.scores = <double*>malloc(2 * n_labels * sizeof(double))
    work.candidates = <int32_t*>malloc(n_labels * sizeof(int32_t))
    work.backpointers = <int32_t*>malloc(max_length * n_labels * sizeof(int32_t))
    if work.scores == NULL or work.candidates == NULL or work.backpointers == NULL:
        viterbi_work_free(work)
        return -1
    return 0


cdef double* viterbi_bound_new(const ViterbiWork* work) noexcept nogil:
    cdef intp a, i, j, n_labels = work.n_labels, n = n_labels * n_labels
    cdef const double* transitions = work.transitions
    cdef double ta, d
    cdef double* bound
    cdef double* transposed
    cdef double* row
    cdef const double* column
    if n == 0 or not work.margin == work.margin:  # NaN margin: NaN or +inf transitions
        return NULL
    if n_labels > TIGHT_BOUND_MAX_LABELS:  # O(n_labels ** 3): never for many labels
        return NULL
    bound = <double*>malloc(n * sizeof(double))
    transposed = <double*>malloc(n * sizeof(double))
    if bound == NULL or transposed == NULL:
        free(bound)
        free(transposed)
        return NULL
    for i in range(n_labels):
        for j in range(n_labels):
            transposed[j * n_labels + i] = transitions[i * n_labels + j]
    # bound[a, i] = max_j T[i, j] - T[a, j], vectorized over i. With
    # forbidden pairs: j with T[i, j] = -inf is not reachable from i and
    # does not count (-inf, or NaN when T[a, j] = -inf too, which the
    # strict > skips); T[a, j] = -inf alone gives +inf (never pruned).
    for a in range(n_labels):
        row = bound + a * n_labels
        for i in range(n_labels):
            row[i] = -INFINITY
        for j in range(n_labels):
            ta = transitions[a * n_labels + j]
            column = transposed + j * n_labels
            for i in range(n_labels):
                d = column[i] - ta
                row[i] = d if d > row[i] else row[i]
    free(transposed)
    return bound


cdef bint _finite_or_forbidden(const double* transitions, intp n, double* lo,
                               double* hi) noexcept nogil:
    """True if every transition is finite or -inf; then lo, hi span the finite ones."""
    cdef intp k
    cdef double v, low = INFINITY, high = -INFINITY
    for k in range(n):
        v = transitions[k]
        if v == -INFINITY:
            continue
        if not fabs(v) < INFINITY:  # NaN or +inf
            return False
        low = v if v < low else low
        high = v if v > high else high
    if low > high:  # every pair forbidden
        low = high = 0.0
    lo[0] = low
    hi[0] = high
    return True


cdef void viterbi_work_free(ViterbiWork* work) noexcept nogil:
    free(work.scores)
    free(work.candidates)
    free(work.backpointers)
    if work.owns_bound:
        free(work.bound)
    work.bound = NULL
    work.scores = NULL
    work.candidates = NULL
    work.backpointers = NULL


cdef double viterbi_sequence(ViterbiWork* work, const double* emissions,
                             const intp* offsets, intp column, intp length,
                             intp* path) noexcept nogil:
    cdef intp n_labels = work.n_labels
    cdef double* prev = work.scores
    cdef double* cur = work.scores + n_labels
    cdef double* swap
    cdef intp t, j, top_label
    cdef double top

    if length <= 0:
        return 0.0
    # step 0: the emissions; track the best label (lowest index on ties)
    top = viterbi_start(emissions + packed_row(offsets, column, 0) * n_labels, n_labels,
                        prev, &top_label)
    for t in range(1, length):
        top = viterbi_step(work.transitions, n_labels, work.spread, work.margin, work.bound,
                           work.candidates, prev, top, &top_label,
                           emissions + packed_row(offsets, column, t) * n_labels, cur,
                           work.backpointers + t * n_labels)
        swap = prev
        prev = cur
        cur = swap

    # backtrack
    path[packed_row(offsets, column, length - 1)] = top_label
    j = top_label
    for t in range(length - 1, 0, -1):
        j = work.backpointers[t * n_labels + j]
        path[packed_row(offsets, column, t - 1)] = j
    return top


cdef inline intp offsets_total(const intp* batch_sizes, intp max_length) noexcept nogil:
    cdef intp t, total = 0
    for t in range(max_length):
        total += batch_sizes[t]
    return total


cdef int viterbi_packed_c(const double* emissions, const double* transitions,
                          intp n_labels, const intp* batch_sizes, intp max_length,
                          intp* path, double* best_score,
                          const ViterbiWork* model, const double* bound) noexcept nogil:
    cdef ViterbiWork work
    cdef intp* offsets
    cdef intp t, column, length, n_sequences
    cdef double score
    cdef double* own_bound = NULL
    cdef bint tight
    if max_length <= 0:
        return 0
    offsets = <intp*>malloc((max_length + 1) * sizeof(intp))
    if offsets == NULL:
        return -1
    # the per-label bound costs ~n_labels ** 3 / 2 vector operations once
    tight = tight_bound_pays(n_labels, offsets_total(batch_sizes, max_length))
    if model == NULL:
        if viterbi_work_init(&work, transitions, n_labels, max_length, tight) != 0:
            free(offsets)
            return -1
    else:
        if bound == NULL and tight:
            # NULL (none possible, no memory): spread alone
            own_bound = viterbi_bound_new(model)
            bound = own_bound
        if viterbi_work_share(&work, model, bound, max_length) != 0:
            free(own_bound)
            free(offsets)
            return -1
    offsets[0] = 0
    for t in range(max_length):
        offsets[t + 1] = offsets[t] + batch_sizes[t]
    n_sequences = batch_sizes[0]
    length = max_length
    for column in range(n_sequences):
        # sequence ``column`` is active at the steps t with batch_sizes[t] > column
        while length > 0 and batch_sizes[length - 1] <= column:
            length -= 1
        score = viterbi_sequence(&work, emissions, offsets, column, length, path)
        if best_score != NULL:
            best_score[column] = score
    viterbi_work_free(&work)
    free(own_bound)
    free(offsets)
    return 0


cdef class TransitionPruning:
    """The pruning parameters of one transition matrix, computed once.

    A batch decoded by :func:`viterbi_packed` scans its ``n_labels ** 2``
    transitions for their spread; with many labels a block holds about one
    sequence, and that scan (not the pruned steps, O(n_labels) each) is most
    of the work. A decoder makes one of these per model (or per call for
    constrained transitions) and passes it to every block: read-only, shared
    by threads. Holds a reference to ``transitions``, which must not change.
    The per-label bound (O(n_labels ** 3)) is built once, by the first
    batch that brings the tokens decoded with this object to where it pays
    (``tight_bound_pays``), and kept for the later ones.
    """

    cdef const double[:, ::1] transitions
    cdef ViterbiWork work
    cdef bint ready
    cdef SharedBound shared

    def __cinit__(self, const double[:, ::1] transitions):
        self.ready = False
        self.shared = SharedBound(NULL, 0, False)
        if transitions.shape[0] != transitions.shape[1]:
            raise ValueError("transitions must be square")
        if transitions.shape[0] > INT32_MAX:
            raise ValueError("too many labels")
        self.transitions = transitions
        if viterbi_work_init(&self.work,
                             &transitions[0, 0] if transitions.shape[0] else NULL,
                             transitions.shape[0], 1, False) != 0:
            raise MemoryError()
        self.ready = True

    def __dealloc__(self):
        if self.ready:
            viterbi_work_free(&self.work)
        free(self.shared.bound)

    @property
    def has_tight_bound(self):
        """Whether the per-label pruning bound has been built."""
        return self.shared.bound != NULL

    cdef const ViterbiWork* model_for(self, const double[:, ::1] transitions) except NULL:
        """The work, if ``transitions`` is the array this was made for."""
        if (transitions.shape[0] != self.transitions.shape[0]
                or transitions.shape[1] != self.transitions.shape[1]
                or (transitions.shape[0] > 0
                    and &transitions[0, 0] != &self.transitions[0, 0])):
            raise ValueError("pruning was made for other transitions")
        return &self.work


cdef intp _check_transitions(intp n_labels, const double[:, ::1] transitions) except -1:
    if transitions.shape[0] != n_labels or transitions.shape[1] != n_labels:
        raise ValueError(
            f"transitions must have shape ({n_labels}, {n_labels}) to match the "
            f"emissions' {n_labels} labels, got ({transitions.shape[0]}, {transitions.shape[1]})"
        )
    if n_labels > INT32_MAX:
        raise ValueError("too many labels")
    return 0


cdef int _check_batch(const intp[::1] batch_sizes, intp n_tokens, intp[::1] path_out,
                      double[::1] best_score_out) except -1:
    """ValueError unless ``batch_sizes`` is a packed layout of the ``n_tokens``
    rows and the outputs have one entry per row (per sequence: may be None)."""
    cdef intp t, total = 0, max_length = batch_sizes.shape[0]
    for t in range(max_length):
        if batch_sizes[t] <= 0 or (t > 0 and batch_sizes[t] > batch_sizes[t - 1]):
            raise ValueError("batch_sizes must be positive and non-increasing")
        total += batch_sizes[t]
    if total != n_tokens:
        raise ValueError(f"batch_sizes sum to {total}, but there are {n_tokens} emission rows")
    if path_out.shape[0] != n_tokens:
        raise ValueError(f"path_out has {path_out.shape[0]} entries, expected {n_tokens}")
    if (best_score_out is not None
            and best_score_out.shape[0] != (batch_sizes[0] if max_length else 0)):
        raise ValueError(
            f"best_score_out has {best_score_out.shape[0]} entries, expected one entry per "
            "sequence"
        )
    return 0


def viterbi_packed(const double[:, ::1] emissions, const double[:, ::1] transitions,
                   const intp[::1] batch_sizes, intp[::1] path_out,
                   double[::1] best_score_out=None, TransitionPruning pruning=None):
    """Most probable labelling of every sequence of a packed batch.

    The GIL is released for the whole computation, so threads can decode
    shards concurrently.

    Parameters
    ----------
    emissions : ndarray of shape (n_tokens, n_labels), float64, C-contiguous
        Packed rows (layout of :mod:`skcrf._utils._packing`).
    transitions : ndarray of shape (n_labels, n_labels), float64, C-contiguous
    batch_sizes : ndarray of shape (max_length,), intp
        Non-increasing, positive, summing to ``n_tokens``.
    path_out : ndarray of shape (n_tokens,), intp
        Receives the label of each packed row.
    best_score_out : ndarray of shape (n_sequences,), float64, optional
        Receives the best score of each sequence, in packed (sorted) order.
    pruning : TransitionPruning, optional
        Made for this very ``transitions`` array (ValueError otherwise): its
        pruning parameters, instead of a scan of the transitions per call.
    """
    cdef intp n_tokens = emissions.shape[0], n_labels = emissions.shape[1]
    cdef intp max_length = batch_sizes.shape[0]
    cdef int status
    cdef double* score_ptr = NULL
    cdef const ViterbiWork* model = NULL
    cdef const double* bound = NULL
    cdef double* new_bound = NULL
    cdef bint build = False
    _check_transitions(n_labels, transitions)
    if pruning is not None:
        model = pruning.model_for(transitions)
    _check_batch(batch_sizes, n_tokens, path_out, best_score_out)
    if best_score_out is not None and max_length:
        score_ptr = &best_score_out[0]
    if n_tokens == 0:
        return None
    if n_labels == 0:
        raise ValueError("cannot decode with 0 labels")
    if pruning is not None:
        # meanwhile other threads decode without it (a bound of their own if it pays)
        build = shared_bound_claim(&pruning.shared, n_labels, n_tokens)
        bound = pruning.shared.bound
    with nogil:
        if build:
            new_bound = viterbi_bound_new(model)
            bound = new_bound
        status = viterbi_packed_c(&emissions[0, 0], &transitions[0, 0], n_labels,
                                  &batch_sizes[0], max_length, &path_out[0], score_ptr,
                                  model, bound)
    if build:
        # published once; NULL (no bound possible, or no memory) is final
        pruning.shared.bound = new_bound
    if status != 0:
        raise MemoryError()
    return None


def uses_tight_bound(intp n_labels, intp n_tokens):
    """Whether a batch of ``n_tokens`` tokens over ``n_labels`` labels (or a
    single-sequence decoder that has decoded that many) builds the per-label
    pruning bound: never above ``max_tight_labels()`` labels."""
    return bool(tight_bound_pays(n_labels, n_tokens))


def max_tight_labels():
    """The most labels for which the O(n_labels ** 3) per-label bound is built."""
    return TIGHT_BOUND_MAX_LABELS


def viterbi_single(const double[:, ::1] emissions, const double[:, ::1] transitions):
    """Most probable labelling of one sequence (rows = tokens in order).

    Returns
    -------
    path : ndarray of shape (n_tokens,), intp
        Ties go to the lowest label index.
    """
    cdef intp n_tokens = emissions.shape[0], n_labels = emissions.shape[1]
    cdef cnp.npy_intp dims[1]
    cdef ViterbiWork work
    cdef int status
    _check_transitions(n_labels, transitions)
    dims[0] = n_tokens
    path = cnp.PyArray_EMPTY(1, dims, cnp.NPY_INTP, 0)
    if n_tokens == 0:
        return path
    if n_labels == 0:
        raise ValueError("cannot decode with 0 labels")
    cdef intp* path_ptr = <intp*>cnp.PyArray_DATA(<cnp.ndarray>path)
    with nogil:
        status = viterbi_work_init(&work, &transitions[0, 0], n_labels, n_tokens, False)
        if status == 0:
            viterbi_sequence(&work, &emissions[0, 0], NULL, 0, n_tokens, path_ptr)
            viterbi_work_free(&work)
    if status != 0:
        raise MemoryError()
    return path


cdef double _conditioned_sequence(ViterbiWork* work, const double* emissions, double* matrix,
                                  const double* transitions, const intp* offsets, intp column,
                                  intp length, const int64_t* entry_ptr,
                                  const int32_t* entry_pair, const double* delta,
                                  intp* path) noexcept nogil:
    """One sequence of :func:`viterbi_conditioned`; returns its best score.

    ``matrix``: a copy of ``transitions``, left as it was found. Each step
    is :func:`viterbi_sequence`'s (the exact pruning included) on the row's
    own matrix, whose spread is at most the base's plus twice its largest
    change, and its rounding margin at most the base's plus that change's.
    """
    cdef intp n_labels = work.n_labels, t, j, r, top_label
    cdef int64_t e
    cdef double* prev = work.scores
    cdef double* cur = work.scores + n_labels
    cdef double* swap
    cdef double top, change
    top = viterbi_start(emissions + (offsets[0] + column) * n_labels, n_labels, prev, &top_label)
    for t in range(1, length):
        r = offsets[t] + column
        change = 0.0
        for e in range(entry_ptr[r], entry_ptr[r + 1]):
            matrix[entry_pair[e]] += delta[e]
            change = fabs(delta[e]) if fabs(delta[e]) > change else change
        top = viterbi_step(matrix, n_labels, work.spread + 2.0 * change,
                           work.margin + PRUNE_RELATIVE_MARGIN * change, NULL, work.candidates,
                           prev, top, &top_label, emissions + r * n_labels, cur,
                           work.backpointers + t * n_labels)
        for e in range(entry_ptr[r], entry_ptr[r + 1]):
            matrix[entry_pair[e]] = transitions[entry_pair[e]]
        swap = prev
        prev = cur
        cur = swap
    path[offsets[length - 1] + column] = top_label
    j = top_label
    for t in range(length - 1, 0, -1):
        j = work.backpointers[t * n_labels + j]
        path[offsets[t - 1] + column] = j
    return top


def viterbi_conditioned(const double[:, ::1] emissions, const double[:, ::1] transitions,
                        const int64_t[::1] entry_ptr, const int32_t[::1] entry_pair,
                        const double[::1] delta, const intp[::1] batch_sizes,
                        intp[::1] path_out, double[::1] best_score_out not None):
    """Most probable labelling of every sequence of a packed batch whose rows
    have transition matrices of their own (input-conditioned transitions).

    Row ``r``'s matrix (the one *into* it from the previous token of its
    sequence) is ``transitions`` plus ``delta[e]`` at the flat pair
    ``entry_pair[e]`` (``i * n_labels + j``, each pair at most once a row)
    for ``e`` in ``entry_ptr[r]:entry_ptr[r + 1]``, as
    :func:`skcrf._inference._conditioned.row_transitions` builds them; the
    answer is :func:`skcrf._inference._conditioned.viterbi_rows`'s (the same
    sums, ties to the lowest label), without the per-row matrices, with the
    GIL released, and with :func:`viterbi_packed`'s exact pruning of the
    previous labels (the spread bound, widened by each row's changes).

    Parameters
    ----------
    emissions : ndarray of shape (n_tokens, n_labels), float64
        Packed rows (layout of :mod:`skcrf._utils._packing`).
    transitions : ndarray of shape (n_labels, n_labels), float64
    entry_ptr : ndarray of shape (n_tokens + 1,), int64
    entry_pair : ndarray of int32
    delta : ndarray of float64
    batch_sizes : ndarray of shape (max_length,), intp
    path_out : ndarray of shape (n_tokens,), intp
        Receives the label of each packed row.
    best_score_out : ndarray of shape (n_sequences,), float64
        Receives each sequence's best score (``-inf``: no allowed labelling).
    """
    cdef intp n_tokens = emissions.shape[0], n_labels = emissions.shape[1]
    cdef intp max_length = batch_sizes.shape[0], t, column, length
    cdef int64_t e, size
    _check_transitions(n_labels, transitions)
    _check_batch(batch_sizes, n_tokens, path_out, best_score_out)
    size = n_labels * n_labels
    if entry_ptr.shape[0] != n_tokens + 1 or entry_ptr[0] != 0:
        raise ValueError("entry_ptr must have one entry per row, plus one, from 0")
    for t in range(n_tokens):
        if entry_ptr[t + 1] < entry_ptr[t]:
            raise ValueError("entry_ptr must not decrease")
    if entry_ptr[n_tokens] != entry_pair.shape[0] or delta.shape[0] != entry_pair.shape[0]:
        raise ValueError("entry_ptr, entry_pair and delta disagree on the number of entries")
    for e in range(entry_pair.shape[0]):
        if entry_pair[e] < 0 or entry_pair[e] >= size:
            raise ValueError(f"entry_pair[{e}] = {entry_pair[e]} is not a pair of labels")
    if n_tokens == 0:
        return None
    if n_labels == 0:
        raise ValueError("cannot decode with 0 labels")
    offsets = np.zeros(max_length + 1, dtype=np.intp)
    np.cumsum(batch_sizes, out=offsets[1:])
    matrix = np.array(transitions, dtype=np.float64, order="C")
    cdef const intp[::1] offsets_view = offsets
    cdef double[:, ::1] matrix_view = matrix
    cdef const int64_t* ptr_data = &entry_ptr[0]
    cdef const int32_t* pair_data = NULL
    cdef const double* delta_data = NULL
    cdef ViterbiWork work
    cdef int status
    if entry_pair.shape[0]:
        pair_data = &entry_pair[0]
        delta_data = &delta[0]
    with nogil:
        # the base's spread and margin; scratch for the longest sequence
        status = viterbi_work_init(&work, &transitions[0, 0], n_labels, max_length, False)
        if status == 0:
            length = max_length
            for column in range(batch_sizes[0]):
                while batch_sizes[length - 1] <= column:
                    length -= 1
                best_score_out[column] = _conditioned_sequence(
                    &work, &emissions[0, 0], &matrix_view[0, 0], &transitions[0, 0],
                    &offsets_view[0], column, length, ptr_data, pair_data, delta_data,
                    &path_out[0])
            viterbi_work_free(&work)
    if status != 0:
        raise MemoryError()
    return None
