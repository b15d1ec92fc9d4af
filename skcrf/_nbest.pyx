# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Compiled k-best (list) Viterbi with forbidden labels and transitions, and
the per-sequence log partition function of a packed block.

Conventions
-----------
- Same layouts as :mod:`skcrf._viterbi`: ``emissions[r, j]`` is the score of
  label ``j`` at packed row ``r`` (layout of :mod:`skcrf._packing`),
  ``transitions[i, j]`` the score of label ``i`` followed by label ``j``; no
  start or end transitions.
- Constraints are scores of ``-inf``: an emission of ``-inf`` forbids the
  label at that token, a transition of ``-inf`` forbids the pair. A labelling
  is allowed when its score is finite. Other scores must be finite.
- The k best labellings of every (token, label) are kept, best first, with a
  backpointer to (previous label, rank there); the k best of the sequence
  are merged from its last token. Scores are summed in the order of the
  Viterbi kernel, ``(previous + T[i, j]) + emission``, so the best path and
  its score are bitwise those of :func:`skcrf._viterbi.viterbi_packed`.
- Ties: labellings of equal score are ordered by their labels read from the
  end: the lower last label index first, then the lower label before it, and
  so on (a labelling's key at each token is its score, then its label, then
  its rank at that label). The first labelling is therefore the Viterbi
  path, whose ties go to the lowest label index.

Pruning (exact): at each step the previous labels are put in bands of their
best score (band ``b``: ``floor((top - best) / width) == b``), and for each
label ``j`` the bands are visited best first; once a band's largest score
plus ``max_i T[i, j]`` is below the k-th kept score of ``j``, no label of
that band or of a later one can enter (rounding is monotonic, so the test on
computed sums is exact). Within a label, its k scores are visited best first
and the visit stops at the first that cannot enter.
"""

from libc.math cimport INFINITY, floor, log
from libc.stdint cimport int32_t, INT32_MAX
from libc.stdlib cimport free, malloc

import numpy as np

cimport numpy as cnp

cnp.import_array()

from skcrf._kernels cimport forward_scaled

# Bands of previous scores (the last one takes every lower score).
DEF N_BANDS = 24


cdef int kbest_work_init(KBestWork* work, const double* transitions, intp n_labels,
                         intp k, intp max_length) noexcept nogil:
    cdef intp i, j, size
    cdef double lo = INFINITY, hi = -INFINITY, m, v
    work.n_labels = n_labels
    work.k = k
    work.max_length = max_length
    work.transitions = transitions
    work.column_max = NULL
    work.scores = NULL
    work.order = NULL
    work.band_start = NULL
    work.band_max = NULL
    work.back_label = NULL
    work.back_rank = NULL
    work.final_scores = NULL
    work.final_label = NULL
    work.final_rank = NULL
    if n_labels < 1:
        n_labels = 1
    if max_length < 1:
        max_length = 1
    size = max_length * n_labels * k
    work.column_max = <double*>malloc(n_labels * sizeof(double))
    work.scores = <double*>malloc(2 * n_labels * k * sizeof(double))
    work.order = <int32_t*>malloc(n_labels * sizeof(int32_t))
    work.band_start = <int32_t*>malloc((N_BANDS + 1) * sizeof(int32_t))
    work.band_max = <double*>malloc(N_BANDS * sizeof(double))
    work.back_label = <int32_t*>malloc(size * sizeof(int32_t))
    work.back_rank = <int32_t*>malloc(size * sizeof(int32_t))
    work.final_scores = <double*>malloc(k * sizeof(double))
    work.final_label = <int32_t*>malloc(k * sizeof(int32_t))
    work.final_rank = <int32_t*>malloc(k * sizeof(int32_t))
    if (work.column_max == NULL or work.scores == NULL or work.order == NULL
            or work.band_start == NULL or work.band_max == NULL
            or work.back_label == NULL or work.back_rank == NULL
            or work.final_scores == NULL or work.final_label == NULL
            or work.final_rank == NULL):
        kbest_work_free(work)
        return -1
    for j in range(work.n_labels):
        m = -INFINITY
        for i in range(work.n_labels):
            v = transitions[i * work.n_labels + j]
            if v > m:
                m = v
            if v != -INFINITY:
                lo = v if v < lo else lo
                hi = v if v > hi else hi
        work.column_max[j] = m
    # a quarter of the allowed transitions' spread: a band then holds few labels
    work.width = (hi - lo) / 4.0 if hi > lo else 1.0
    if not work.width > 1e-3:
        work.width = 1e-3
    return 0


cdef void kbest_work_free(KBestWork* work) noexcept nogil:
    free(work.column_max)
    free(work.scores)
    free(work.order)
    free(work.band_start)
    free(work.band_max)
    free(work.back_label)
    free(work.back_rank)
    free(work.final_scores)
    free(work.final_label)
    free(work.final_rank)
    work.final_scores = NULL
    work.final_label = NULL
    work.final_rank = NULL
    work.column_max = NULL
    work.scores = NULL
    work.order = NULL
    work.band_start = NULL
    work.band_max = NULL
    work.back_label = NULL
    work.back_rank = NULL


cdef inline intp _row(const intp* offsets, intp column, intp t) noexcept nogil:
    if offsets == NULL:
        return t
    return offsets[t] + column


cdef inline bint _before(double s, int32_t i, int32_t r, double s2, int32_t i2,
                         int32_t r2) noexcept nogil:
    """Whether key (s, i, r) comes before (s2, i2, r2): higher score, then lower label, rank."""
    if s != s2:
        return s > s2
    if i != i2:
        return i < i2
    return r < r2


cdef inline intp _insert(double* c, int32_t* bl, int32_t* br, intp n_in, intp k,
                         double s, int32_t i, int32_t r) noexcept nogil:
    """Insert (s, i, r) into the sorted list of ``n_in`` keys (at most k kept).

    Returns the new length, or -1 when the key does not enter (the list is
    full and the key comes after its last one).
    """
    cdef intp pos
    if n_in == k:
        if not _before(s, i, r, c[k - 1], bl[k - 1], br[k - 1]):
            return -1
        pos = k - 1
    else:
        pos = n_in
        n_in += 1
    while pos > 0 and _before(s, i, r, c[pos - 1], bl[pos - 1], br[pos - 1]):
        c[pos] = c[pos - 1]
        bl[pos] = bl[pos - 1]
        br[pos] = br[pos - 1]
        pos -= 1
    c[pos] = s
    bl[pos] = i
    br[pos] = r
    return n_in


cdef intp kbest_sequence(KBestWork* work, const double* emissions, const intp* offsets,
                         intp column, intp length, intp* paths, intp n_rows,
                         double* scores) noexcept nogil:
    cdef intp n_labels = work.n_labels, k = work.k
    cdef const double* transitions = work.transitions
    cdef double* prev = work.scores
    cdef double* cur = work.scores + n_labels * k
    cdef double* swap
    cdef const double* em
    cdef double top, s, p, tij, e, width = work.width, inv_width = 1.0 / work.width
    cdef double* c
    cdef int32_t* bl
    cdef int32_t* br
    cdef int32_t* order = work.order
    cdef int32_t* band_start = work.band_start
    cdef double* band_max = work.band_max
    cdef int32_t counts[N_BANDS]
    cdef intp t, j, r, q, b, idx, n_in, result, n_found, band
    cdef int32_t i, label, rank

    if length <= 0:
        return 0
    em = emissions + _row(offsets, column, 0) * n_labels
    for j in range(n_labels):
        prev[j * k] = em[j]
        for r in range(1, k):
            prev[j * k + r] = -INFINITY

    for t in range(1, length):
        # bands of the previous labels by their best score
        top = -INFINITY
        for j in range(n_labels):
            if prev[j * k] > top:
                top = prev[j * k]
        bl = work.back_label + t * n_labels * k
        br = work.back_rank + t * n_labels * k
        if top == -INFINITY:
            # nothing allowed so far: the sequence has no allowed labelling
            for q in range(k):
                scores[q] = -INFINITY
            return 0
        for b in range(N_BANDS):
            counts[b] = 0
            band_max[b] = -INFINITY
        for j in range(n_labels):
            s = prev[j * k]
            if s == -INFINITY:
                continue
            s = floor((top - s) * inv_width)
            band = <intp>s if s < N_BANDS - 1 else N_BANDS - 1
            counts[band] += 1
            if prev[j * k] > band_max[band]:
                band_max[band] = prev[j * k]
        band_start[0] = 0
        for b in range(N_BANDS):
            band_start[b + 1] = band_start[b] + counts[b]
            counts[b] = band_start[b]
        for j in range(n_labels):
            s = prev[j * k]
            if s == -INFINITY:
                continue
            s = floor((top - s) * inv_width)
            band = <intp>s if s < N_BANDS - 1 else N_BANDS - 1
            order[counts[band]] = <int32_t>j
            counts[band] += 1

        em = emissions + _row(offsets, column, t) * n_labels
        for j in range(n_labels):
            c = cur + j * k
            e = em[j]
            n_in = 0
            if e != -INFINITY and work.column_max[j] != -INFINITY:
                for b in range(N_BANDS):
                    if band_start[b] == band_start[b + 1]:
                        continue
                    if n_in == k and band_max[b] + work.column_max[j] < c[k - 1]:
                        break
                    for idx in range(band_start[b], band_start[b + 1]):
                        i = order[idx]
                        tij = transitions[i * n_labels + j]
                        if tij == -INFINITY:
                            continue
                        for r in range(k):
                            p = prev[i * k + r]
                            if p == -INFINITY:
                                break
                            result = _insert(c, bl + j * k, br + j * k, n_in, k,
                                             p + tij, i, <int32_t>r)
                            if result < 0:
                                break  # this label's later paths score no higher
                            n_in = result
            for r in range(n_in):
                c[r] = c[r] + e
            for r in range(n_in, k):
                c[r] = -INFINITY
                bl[j * k + r] = -1
                br[j * k + r] = -1
        swap = prev
        prev = cur
        cur = swap

    # the k best over the last token's labels: keys (score, label, rank)
    n_found = 0
    c = work.final_scores
    bl = work.final_label
    br = work.final_rank
    for j in range(n_labels):
        for r in range(k):
            s = prev[j * k + r]
            if s == -INFINITY:
                break
            result = _insert(c, bl, br, n_found, k, s, <int32_t>j, <int32_t>r)
            if result < 0:
                break  # this label's later paths score no higher
            n_found = result
    for q in range(n_found):
        scores[q] = c[q]
    for q in range(n_found, k):
        scores[q] = -INFINITY
    # backtrack every path
    for q in range(n_found):
        label = bl[q]
        rank = br[q]
        for t in range(length - 1, -1, -1):
            paths[q * n_rows + _row(offsets, column, t)] = label
            if t > 0:
                idx = (t * n_labels + label) * k + rank
                label = work.back_label[idx]
                rank = work.back_rank[idx]
    return n_found



# -- Python entry points ------------------------------------------------------


cdef int _check_packed(const Py_ssize_t[::1] batch_sizes, intp n_rows) except -1:
    cdef intp t, total = 0
    for t in range(batch_sizes.shape[0]):
        if batch_sizes[t] <= 0 or (t > 0 and batch_sizes[t] > batch_sizes[t - 1]):
            raise ValueError("batch_sizes must be positive and non-increasing")
        total += batch_sizes[t]
    if total != n_rows:
        raise ValueError(f"batch_sizes sum to {total}, but there are {n_rows} rows")
    return 0


def kbest_packed(const double[:, ::1] emissions, const double[:, ::1] transitions,
                 const Py_ssize_t[::1] batch_sizes, intp k, intp[:, ::1] paths_out,
                 double[:, ::1] scores_out):
    """The k best labellings of every sequence of a packed batch.

    Parameters
    ----------
    emissions : ndarray of shape (n_rows, n_labels), float64, C-contiguous
        Packed rows; ``-inf`` forbids a label at a token.
    transitions : ndarray of shape (n_labels, n_labels), float64
        ``-inf`` forbids a pair.
    batch_sizes : ndarray of intp
        Non-increasing, positive, summing to ``n_rows``.
    k : int
        Labellings wanted per sequence (>= 1).
    paths_out : ndarray of shape (k, n_rows), intp
        ``paths_out[q, row]``: the label of packed row ``row`` in the
        sequence's labelling of rank ``q`` (left as is past the number found).
    scores_out : ndarray of shape (n_sequences, k), float64
        Their scores, best first, per sequence in packed order (-inf past
        the number found).

    Returns
    -------
    n_found : ndarray of shape (n_sequences,), intp
        How many allowed labellings were found (at most k; 0 when none is
        allowed).
    """
    cdef intp n_rows = emissions.shape[0], n_labels = emissions.shape[1]
    cdef intp max_length = batch_sizes.shape[0], n_sequences, t, column, length
    cdef KBestWork work
    cdef intp* offsets
    cdef int status = 0
    if transitions.shape[0] != n_labels or transitions.shape[1] != n_labels:
        raise ValueError("transitions must be n_labels x n_labels")
    if n_labels > INT32_MAX or k > INT32_MAX:
        raise ValueError("too many labels or paths")
    if k < 1:
        raise ValueError("k must be at least 1")
    _check_packed(batch_sizes, n_rows)
    n_sequences = batch_sizes[0] if max_length else 0
    if paths_out.shape[0] != k or paths_out.shape[1] != n_rows:
        raise ValueError("paths_out must have shape (k, n_rows)")
    if scores_out.shape[0] != n_sequences or scores_out.shape[1] != k:
        raise ValueError("scores_out must have shape (n_sequences, k)")
    found = np.zeros(n_sequences, dtype=np.intp)
    cdef intp[::1] found_view = found
    if n_rows == 0:
        return found
    if n_labels == 0:
        raise ValueError("cannot decode with 0 labels")
    with nogil:
        offsets = <intp*>malloc((max_length + 1) * sizeof(intp))
        if offsets == NULL:
            status = -1
        elif kbest_work_init(&work, &transitions[0, 0], n_labels, k, max_length) != 0:
            free(offsets)
            status = -1
        else:
            offsets[0] = 0
            for t in range(max_length):
                offsets[t + 1] = offsets[t] + batch_sizes[t]
            length = max_length
            for column in range(n_sequences):
                while length > 0 and batch_sizes[length - 1] <= column:
                    length -= 1
                found_view[column] = kbest_sequence(
                    &work, &emissions[0, 0], offsets, column, length, &paths_out[0, 0],
                    n_rows, &scores_out[column, 0])
            kbest_work_free(&work)
            free(offsets)
    if status != 0:
        raise MemoryError()
    return found


def forward_log_partition(const double[:, ::1] psi, const double[:, ::1] exp_trans,
                          const Py_ssize_t[::1] batch_sizes, double[:, ::1] alpha,
                          double[::1] scale, double[::1] out):
    """Scaled forward pass of a packed block; the log scale sums per sequence.

    ``psi`` and ``exp_trans`` as for :func:`skcrf._kernels.forward_backward`
    (zeros allowed: forbidden labels and pairs). ``out[c]`` (packed sequence
    order) receives the sum of ``log(scale)`` over the rows of sequence ``c``:
    its ``log Z`` less the shifts. A sequence whose allowed labellings all
    underflow (or that has none) gets ``-inf`` or NaN.
    """
    cdef intp n_rows = psi.shape[0], n_labels = psi.shape[1]
    cdef intp t, r, lo = 0, n
    _check_packed(batch_sizes, n_rows)
    if (alpha.shape[0] < n_rows or alpha.shape[1] != n_labels or scale.shape[0] < n_rows
            or exp_trans.shape[0] != n_labels or exp_trans.shape[1] != n_labels
            or out.shape[0] != (batch_sizes[0] if batch_sizes.shape[0] else 0)):
        raise ValueError("inconsistent shapes")
    if n_rows == 0 or n_labels == 0:
        return
    with nogil:
        forward_scaled(psi, exp_trans, batch_sizes, alpha, scale)
        for r in range(out.shape[0]):
            out[r] = 0.0
        for t in range(batch_sizes.shape[0]):
            n = batch_sizes[t]
            for r in range(n):
                out[r] += log(scale[lo + r])
            lo += n
