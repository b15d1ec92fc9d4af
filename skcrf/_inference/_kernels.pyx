"""Compiled kernels of training and inference: state scores over the features
that exist, the scaled forward-backward over a packed block of sequences, and
the expected state counts.

Conventions
-----------
- Token features are CSR rows: token ``r`` has the attribute ids
  ``ids[indptr[r]:indptr[r + 1]]`` with the values ``values[...]``. The
  state score and expected count kernels also take ``values=None``: every
  value is 1 (most features are strings or ``True``; training blocks then
  hold no values array, and a product by 1 is exact, so the sums are the
  same to the bit).
- State features are CSR by attribute (see :mod:`skcrf._model`): attribute
  ``a`` has the features ``state_ptr[a]:state_ptr[a + 1]`` with labels
  ``state_labels[k]``. Scores and expected counts touch only these, never a
  dense attributes x labels array.
- ``packed``: the state kernels' ``ids`` hold, instead of attribute ids,
  where each entry's features are (:func:`pack_entries`): an entry
  ``e`` (read as unsigned) is ``count << 24 | start``, the ``count``
  features from ``start`` on, or with ``count`` 0 the dense row ``start``.
  The kernels then read neither ``state_ptr`` nor ``dense_row``: one cache
  miss less per entry once the model outgrows the caches.
- Forward-backward works on one block of sequences in the packed time-major
  layout of :mod:`skcrf._utils._packing`: step ``t`` is ``batch_sizes[t]``
  consecutive rows, and the sequences still active at ``t + 1`` are the first
  rows of step ``t``. Each step is one matrix product through BLAS for all
  sequences of the block (a chain of per-sequence vector products is
  latency-bound; GEMM over many sequences at once is not).
- ``psi = exp(emissions - row max)`` (:func:`exp_shifted`, a vectorized exp)
  and ``exp_trans = exp(T - max T)`` are computed first; with the transition
  spread bounded (see :func:`forward_backward`), every scale factor stays
  far from underflow: a normalized forward row times ``exp_trans`` is at
  least ``exp(-spread) / L`` everywhere, and ``psi`` has a 1 in every row.

All kernels release the GIL; the Python wrappers check shapes once.
"""

from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer
from libc.math cimport log
from libc.stdint cimport uint64_t
from libc.stdlib cimport abort, free

import numpy as np

from skcrf._utils._simd import avx2_disabled


# exp(x) for x <= 0, vectorized (shared with the other kernels).
cdef extern from "_vector_exp.h":
    void skcrf_exp_nonpositive(double* a, Py_ssize_t n) noexcept nogil

# AVX2 or baseline code, chosen once at import (SKCRF_DISABLE_AVX2=1: baseline)
cdef extern from "_simd.h":
    int skcrf_simd_init(int disable) noexcept

AVX2_PATH = bool(skcrf_simd_init(avx2_disabled()))


# SciPy's BLAS dgemm (scipy.linalg.cython_blas), looked up on first use
# rather than cimported: a cimport imports scipy.linalg with this module,
# a quarter of a second, and reading a model or decoding never multiplies
# matrices; the lookup loads the extension alone (skcrf/_utils/_blas.py).
# The def functions that reach dgemm look it up first (an error is an
# exception there); the cdef kernels that other modules cimport
# (forward_scaled) look it up under the GIL if no one has.
ctypedef void (*_dgemm_t)(char* transa, char* transb, int* m, int* n, int* k,
                          double* alpha, double* a, int* lda, double* b, int* ldb,
                          double* beta, double* c, int* ldc) noexcept nogil

cdef _dgemm_t _dgemm = NULL


cdef int _load_dgemm() except -1:
    global _dgemm
    if _dgemm == NULL:
        from skcrf._utils._blas import cython_blas

        capsule = cython_blas().__pyx_capi__["dgemm"]
        _dgemm = <_dgemm_t>PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule))
    return 0


cdef void _load_dgemm_nogil() noexcept nogil:
    with gil:
        try:
            _load_dgemm()
        except BaseException:
            # SciPy (a dependency) without its BLAS: there is nothing to call
            import traceback
            traceback.print_exc()
            abort()


cdef inline void dgemm(char* transa, char* transb, int* m, int* n, int* k,
                       double* alpha, double* a, int* lda, double* b, int* ldb,
                       double* beta, double* c, int* ldc) noexcept nogil:
    if _dgemm == NULL:
        _load_dgemm_nogil()
    _dgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

# a hint to the cache (a no-op for compilers without GCC's builtin)
cdef extern from *:
    """
    #if defined(__GNUC__)
    #define SKCRF_PREFETCH(p) __builtin_prefetch((const void*)(p), 0, 3)
    #else
    #define SKCRF_PREFETCH(p) ((void)0)
    #endif
    """
    void SKCRF_PREFETCH(const void* p) noexcept nogil

# The state score and expected count loops read, per CSR entry, an
# attribute's dense row index and feature range, then its features: misses
# in a dependent chain once the model outgrows the caches. At each entry they
# ask the cache for the row index and range of the entry _AHEAD ahead, and
# for the features of the entry _AHEAD / 2 ahead, without a branch on its
# kind (the dense rows, of the most frequent attributes, stay cached).
cdef enum:
    _AHEAD = 16


cdef inline Py_ssize_t _entry_prefetching(
    const int* ids, Py_ssize_t p, Py_ssize_t last, const int* dense_row,
    const long long* state_ptr, const int* state_labels, const double* per_feature,
) noexcept nogil:
    """The attribute of entry ``p``, once the prefetches for the entries ahead
    (at most ``last``) are issued: ``per_feature`` is what the loop reads or
    writes per state feature; ``dense_row`` NULL: not read. (It returns the
    attribute because GCC drops a call whose only effects are prefetches.)
    """
    cdef Py_ssize_t a = ids[p + _AHEAD if p + _AHEAD <= last else last]
    if dense_row != NULL:
        SKCRF_PREFETCH(&dense_row[a])
    SKCRF_PREFETCH(&state_ptr[a])
    a = ids[p + _AHEAD // 2 if p + _AHEAD // 2 <= last else last]
    SKCRF_PREFETCH(&state_labels[state_ptr[a]])
    SKCRF_PREFETCH(&per_feature[state_ptr[a]])
    return ids[p]


cdef enum:
    _START_BITS = 24
    _START_MASK = (1 << 24) - 1
    _MAX_COUNT = 255

#: Packed entries (see the conventions): starts below this, counts up to the other.
PACKED_STARTS = _START_MASK + 1
PACKED_MAX_COUNT = _MAX_COUNT


cdef inline Py_ssize_t _packed_prefetching(
    const int* ids, Py_ssize_t p, Py_ssize_t last, const int* state_labels,
    const double* per_feature,
) noexcept nogil:
    """The packed entry ``p`` (see the module's conventions), once the
    prefetches for the features of the entry ``_AHEAD / 2`` ahead (at most
    ``last``) are issued."""
    cdef Py_ssize_t ahead = p + _AHEAD // 2 if p + _AHEAD // 2 <= last else last
    cdef Py_ssize_t k = (<unsigned int> ids[ahead]) & _START_MASK
    SKCRF_PREFETCH(&state_labels[k])
    SKCRF_PREFETCH(&per_feature[k])
    return <unsigned int> ids[p]


cdef inline Py_ssize_t _dense_row_of(Py_ssize_t a, const int* dense_row,
                                     Py_ssize_t n_dense) noexcept nogil:
    """The dense row of attribute ``a``, or -1 (``dense_row`` NULL: the
    first ``n_dense`` attributes have rows ``0 .. n_dense - 1``)."""
    if dense_row == NULL:
        return a if a < n_dense else -1
    return dense_row[a]


cdef inline void _matmul(
    const double* a, int n_rows, const double* b, int n_labels, double* c
) noexcept nogil:
    """c (n_rows x L) = a (n_rows x L) @ b (L x L), all row-major."""
    cdef double one = 1.0, zero = 0.0
    # Row-major C = A B is column-major C^T = B^T A^T: swap the operands.
    dgemm(b"N", b"N", &n_labels, &n_rows, &n_labels, &one, <double*>b, &n_labels,
          <double*>a, &n_labels, &zero, c, &n_labels)


cdef inline void _matmul_bt(
    const double* a, int n_rows, const double* b, int n_labels, double* c
) noexcept nogil:
    """c (n_rows x L) = a (n_rows x L) @ b.T (b is L x L), all row-major."""
    cdef double one = 1.0, zero = 0.0
    dgemm(b"T", b"N", &n_labels, &n_rows, &n_labels, &one, <double*>b, &n_labels,
          <double*>a, &n_labels, &zero, c, &n_labels)


cdef void add_state_scores(
    const long long[::1] indptr, const int[::1] ids, const double* values,
    const long long[::1] state_ptr, const int[::1] state_labels,
    const double[::1] state_weights, const int[::1] dense_row, bint dense_first,
    const double[:, ::1] dense_weights, double[:, ::1] out, bint packed,
) noexcept nogil:
    """out[r, label] += value * weight over the features of each token's attributes
    (``values`` NULL: every value is 1).

    An attribute with a dense row (``dense_row[a] >= 0``) adds that whole
    row of ``dense_weights``: a contiguous loop the compiler vectorizes, for
    the few frequent attributes that hold features with most labels. A row's
    leading run of such entries is added without the per-entry choice
    between a dense row and sparse features (``Block.put_dense_first`` puts
    them first); entries in any order give the same sums.

    ``dense_first``: the attributes with a dense row are exactly the first
    ones, attribute ``a < len(dense_weights)`` having row ``a``
    (``StateLayout.dense_first``); ``dense_row`` is then not read: one
    cache miss less per entry. ``packed``: ``ids`` are packed entries (see
    the module's conventions); ``state_ptr`` and ``dense_row`` are not read.
    """
    cdef Py_ssize_t r, p, end, k, a, d, j, n_labels = out.shape[1]
    cdef Py_ssize_t n_dense = dense_weights.shape[0]
    cdef double v
    cdef double* row
    cdef const double* dense
    cdef const int* rows_of = NULL
    cdef Py_ssize_t last = indptr[out.shape[0]] - 1
    if packed:
        _add_packed_state_scores(indptr, ids, values, state_labels, state_weights,
                                 dense_weights, out)
        return
    if not dense_first:
        rows_of = &dense_row[0]
    for r in range(out.shape[0]):
        row = &out[r, 0]
        p, end = indptr[r], indptr[r + 1]
        while p < end:  # the leading dense run
            d = _dense_row_of(ids[p], rows_of, n_dense)
            if d < 0:
                break
            v = values[p] if values != NULL else 1.0
            dense = &dense_weights[d, 0]
            for j in range(n_labels):
                row[j] += v * dense[j]
            p += 1
        for p in range(p, end):
            a = _entry_prefetching(&ids[0], p, last, rows_of, &state_ptr[0],
                                   &state_labels[0], &state_weights[0])
            v = values[p] if values != NULL else 1.0
            d = _dense_row_of(a, rows_of, n_dense)
            if d >= 0:
                dense = &dense_weights[d, 0]
                for j in range(n_labels):
                    row[j] += v * dense[j]
            else:
                for k in range(state_ptr[a], state_ptr[a + 1]):
                    row[state_labels[k]] += v * state_weights[k]


cdef void _add_packed_state_scores(
    const long long[::1] indptr, const int[::1] ids, const double* values,
    const int[::1] state_labels, const double[::1] state_weights,
    const double[:, ::1] dense_weights, double[:, ::1] out,
) noexcept nogil:
    """:func:`add_state_scores` of packed entries."""
    cdef Py_ssize_t r, p, end, k, e, count, j, n_labels = out.shape[1]
    cdef double v
    cdef double* row
    cdef const double* dense
    cdef Py_ssize_t last = indptr[out.shape[0]] - 1
    for r in range(out.shape[0]):
        row = &out[r, 0]
        p, end = indptr[r], indptr[r + 1]
        while p < end and (<unsigned int> ids[p]) >> _START_BITS == 0:  # dense run
            v = values[p] if values != NULL else 1.0
            dense = &dense_weights[ids[p], 0]
            for j in range(n_labels):
                row[j] += v * dense[j]
            p += 1
        for p in range(p, end):
            e = _packed_prefetching(&ids[0], p, last, &state_labels[0], &state_weights[0])
            v = values[p] if values != NULL else 1.0
            k, count = e & _START_MASK, e >> _START_BITS
            if count == 0:
                dense = &dense_weights[k, 0]
                for j in range(n_labels):
                    row[j] += v * dense[j]
            else:
                for k in range(k, k + count):
                    row[state_labels[k]] += v * state_weights[k]


cdef void add_expected_states(
    const long long[::1] indptr, const int[::1] ids, const double* values,
    const long long[::1] state_ptr, const int[::1] state_labels,
    const double[:, ::1] marginals, const int[::1] dense_row, bint dense_first,
    double[::1] out, double[:, ::1] dense_out, bint packed,
) noexcept nogil:
    """out[k] += value * p(label of k) over every token holding k's attribute
    (``values`` NULL: every value is 1).

    Attributes with a dense row accumulate whole rows into ``dense_out``; a
    row's leading run of them, ``dense_first`` and ``packed``, as in
    :func:`add_state_scores`.
    """
    cdef Py_ssize_t r, p, end, k, a, d, j, n_labels = marginals.shape[1]
    cdef Py_ssize_t n_dense = dense_out.shape[0]
    cdef double v
    cdef const double* row
    cdef double* dense
    cdef const int* rows_of = NULL
    cdef Py_ssize_t last = indptr[marginals.shape[0]] - 1
    if packed:
        _add_packed_expected_states(indptr, ids, values, state_labels, marginals, out,
                                    dense_out)
        return
    if not dense_first:
        rows_of = &dense_row[0]
    for r in range(marginals.shape[0]):
        row = &marginals[r, 0]
        p, end = indptr[r], indptr[r + 1]
        while p < end:  # the leading dense run
            d = _dense_row_of(ids[p], rows_of, n_dense)
            if d < 0:
                break
            v = values[p] if values != NULL else 1.0
            dense = &dense_out[d, 0]
            for j in range(n_labels):
                dense[j] += v * row[j]
            p += 1
        for p in range(p, end):
            a = _entry_prefetching(&ids[0], p, last, rows_of, &state_ptr[0],
                                   &state_labels[0], &out[0])
            v = values[p] if values != NULL else 1.0
            d = _dense_row_of(a, rows_of, n_dense)
            if d >= 0:
                dense = &dense_out[d, 0]
                for j in range(n_labels):
                    dense[j] += v * row[j]
            else:
                for k in range(state_ptr[a], state_ptr[a + 1]):
                    out[k] += v * row[state_labels[k]]


cdef void _add_packed_expected_states(
    const long long[::1] indptr, const int[::1] ids, const double* values,
    const int[::1] state_labels, const double[:, ::1] marginals,
    double[::1] out, double[:, ::1] dense_out,
) noexcept nogil:
    """:func:`add_expected_states` of packed entries."""
    cdef Py_ssize_t r, p, end, k, e, count, j, n_labels = marginals.shape[1]
    cdef double v
    cdef const double* row
    cdef double* dense
    cdef Py_ssize_t last = indptr[marginals.shape[0]] - 1
    for r in range(marginals.shape[0]):
        row = &marginals[r, 0]
        p, end = indptr[r], indptr[r + 1]
        while p < end and (<unsigned int> ids[p]) >> _START_BITS == 0:  # dense run
            v = values[p] if values != NULL else 1.0
            dense = &dense_out[ids[p], 0]
            for j in range(n_labels):
                dense[j] += v * row[j]
            p += 1
        for p in range(p, end):
            e = _packed_prefetching(&ids[0], p, last, &state_labels[0], &out[0])
            v = values[p] if values != NULL else 1.0
            k, count = e & _START_MASK, e >> _START_BITS
            if count == 0:
                dense = &dense_out[k, 0]
                for j in range(n_labels):
                    dense[j] += v * row[j]
            else:
                for k in range(k, k + count):
                    out[k] += v * row[state_labels[k]]


cdef double forward_scaled(
    const double[:, ::1] psi, const double[:, ::1] exp_trans,
    const Py_ssize_t[::1] batch_sizes, double[:, ::1] alpha, double[::1] scale,
    const Corrections* corrections,
) noexcept nogil:
    """Normalized forward rows; returns the sum of the log scale factors.

    alpha[row] = normalize((alpha[previous row] @ exp_trans) * psi[row]) and
    scale[row] is the normalizer (at step 0, alpha = normalize(psi)). With
    ``corrections``, the row's own transition matrix replaces ``exp_trans``
    (the product by the base matrix, then the few entries it changes).
    """
    cdef int n_labels = psi.shape[1]
    cdef Py_ssize_t t, r, j, lo = 0, prev_lo = 0, n
    cdef double total, inv, log_sum = 0.0
    cdef double* a_row
    cdef const double* p_row
    for t in range(batch_sizes.shape[0]):
        n = batch_sizes[t]
        if t == 0:
            for r in range(n):
                for j in range(n_labels):
                    alpha[r, j] = psi[r, j]
        else:
            _matmul(&alpha[prev_lo, 0], <int>n, &exp_trans[0, 0], n_labels, &alpha[lo, 0])
            if corrections != NULL:
                _correct_forward(exp_trans, alpha, lo, prev_lo, n, corrections)
            for r in range(lo, lo + n):
                a_row = &alpha[r, 0]
                p_row = &psi[r, 0]
                for j in range(n_labels):
                    a_row[j] *= p_row[j]
        for r in range(lo, lo + n):
            a_row = &alpha[r, 0]
            total = 0.0
            for j in range(n_labels):
                total += a_row[j]
            scale[r] = total
            inv = 1.0 / total
            for j in range(n_labels):
                a_row[j] *= inv
            log_sum += log(total)
        prev_lo = lo
        lo += n
    return log_sum


cdef void backward_marginals(
    const double[:, ::1] psi, const double[:, ::1] exp_trans,
    const Py_ssize_t[::1] batch_sizes, double[:, ::1] alpha,
    const double[::1] scale, double[:, ::1] beta, double[:, ::1] weighted,
    double[:, ::1] pair_sums, bint want_pairs, const double* row_weights,
    const Corrections* corrections,
) noexcept nogil:
    """Scaled backward pass turning ``alpha`` into the marginals in place.

    beta[t] = (psi[t+1] * beta[t+1] / scale[t+1]) @ exp_trans.T (1 at a
    sequence's last token) and p(y_t = i) = alpha[t, i] * beta[t, i]. The
    weighted rows psi[t+1] * beta[t+1] / scale[t+1] are stored in
    ``weighted`` at the rows of step t that they continue (0 where a
    sequence ends), so that one product over the whole block,
    ``pair_sums += alpha.T @ weighted`` (when ``want_pairs``), sums the
    pairwise terms of every step: times ``exp_trans`` (elementwise, by the
    caller) they are the expected label pair counts. ``beta`` and
    ``weighted`` have at least as many rows as ``psi``.

    With ``row_weights`` (``v``, one per row, or NULL), the recursion is
    beta[t] = v[t] + (psi[t+1] * beta[t+1] / scale[t+1]) @ exp_trans.T
    (beta = v[t] at a sequence's last token): reverse-mode differentiation
    of ``sum_t v[t] log Z(x_1..t)`` (each prefix's log partition) through
    the forward pass, so that alpha * beta and the pair sums are that sum's
    derivatives by the state and transition scores. NULL is ``v = 1`` at a
    sequence's last token and 0 elsewhere: the ordinary marginals.

    With ``corrections`` (the rows' own transition matrices, as in
    :func:`forward_scaled`) the pair sums include the changed entries too,
    and ``corrections.out`` (when not NULL) gets each entry's pair term
    ``alpha[prev, i] * exp_trans[i, j] * factor * weighted[prev, j]``.
    """
    cdef int n_labels = psi.shape[1]
    cdef Py_ssize_t n_steps = batch_sizes.shape[0], n_rows = psi.shape[0]
    cdef Py_ssize_t t, r, j, lo, next_lo, n, n_next
    cdef double inv
    cdef double* w_row
    cdef const double* p_row
    cdef const double* b_row
    cdef double* a_row
    cdef double one = 1.0
    cdef int k_rows = <int> n_rows
    if n_steps == 0:
        return
    lo = n_rows - batch_sizes[n_steps - 1]
    n = batch_sizes[n_steps - 1]
    for r in range(lo, lo + n):
        inv = 1.0 if row_weights == NULL else row_weights[r]
        for j in range(n_labels):
            beta[r, j] = inv
            weighted[r, j] = 0.0
    for t in range(n_steps - 2, -1, -1):
        next_lo = lo
        n_next = n
        n = batch_sizes[t]
        lo = next_lo - n
        for r in range(n_next):
            w_row = &weighted[lo + r, 0]
            p_row = &psi[next_lo + r, 0]
            b_row = &beta[next_lo + r, 0]
            inv = 1.0 / scale[next_lo + r]
            for j in range(n_labels):
                w_row[j] = p_row[j] * b_row[j] * inv
        _matmul_bt(&weighted[lo, 0], <int>n_next, &exp_trans[0, 0], n_labels, &beta[lo, 0])
        if corrections != NULL:
            _correct_backward(exp_trans, beta, weighted, lo, next_lo, n_next, corrections)
        if row_weights != NULL:
            for r in range(lo, lo + n_next):
                inv = row_weights[r]
                for j in range(n_labels):
                    beta[r, j] += inv
        for r in range(lo + n_next, lo + n):
            inv = 1.0 if row_weights == NULL else row_weights[r]
            for j in range(n_labels):
                beta[r, j] = inv
                weighted[r, j] = 0.0
    if want_pairs:
        # pair_sums (L x L) += alpha.T @ weighted, over every row of the block
        dgemm(b"N", b"T", &n_labels, &n_labels, &k_rows, &one, &weighted[0, 0], &n_labels,
              &alpha[0, 0], &n_labels, &one, &pair_sums[0, 0], &n_labels)
    if corrections != NULL:
        _correction_pairs(exp_trans, batch_sizes, alpha, weighted, pair_sums, want_pairs,
                          corrections)
    for r in range(n_rows):
        a_row = &alpha[r, 0]
        b_row = &beta[r, 0]
        for j in range(n_labels):
            a_row[j] *= b_row[j]


cdef inline void _correct_forward(
    const double[:, ::1] exp_trans, double[:, ::1] alpha, Py_ssize_t lo, Py_ssize_t prev_lo,
    Py_ssize_t n, const Corrections* c,
) noexcept nogil:
    """alpha[r] += alpha[prev] at the changed pairs of row r, times their change."""
    cdef Py_ssize_t k, e, i, j, n_labels = exp_trans.shape[0]
    for k in range(n):
        for e in range(c.ptr[lo + k], c.ptr[lo + k + 1]):
            i = c.pair[e] // n_labels
            j = c.pair[e] - i * n_labels
            alpha[lo + k, j] += alpha[prev_lo + k, i] * exp_trans[i, j] * (c.factor[e] - 1.0)


cdef inline void _correct_backward(
    const double[:, ::1] exp_trans, double[:, ::1] beta, const double[:, ::1] weighted,
    Py_ssize_t lo, Py_ssize_t next_lo, Py_ssize_t n_next, const Corrections* c,
) noexcept nogil:
    """beta[r] += weighted[r] at the changed pairs of the next row, times their change."""
    cdef Py_ssize_t k, e, i, j, n_labels = exp_trans.shape[0]
    for k in range(n_next):
        for e in range(c.ptr[next_lo + k], c.ptr[next_lo + k + 1]):
            i = c.pair[e] // n_labels
            j = c.pair[e] - i * n_labels
            beta[lo + k, i] += weighted[lo + k, j] * exp_trans[i, j] * (c.factor[e] - 1.0)


cdef void _correction_pairs(
    const double[:, ::1] exp_trans, const Py_ssize_t[::1] batch_sizes,
    const double[:, ::1] alpha, const double[:, ::1] weighted, double[:, ::1] pair_sums,
    bint want_pairs, const Corrections* c,
) noexcept nogil:
    """The changed pairs' share of the pair sums, and each entry's pair term.

    Runs after the backward pass and before ``alpha`` becomes the marginals
    (it is still the normalized forward rows); ``pair_sums`` is taken
    before the caller's product by ``exp_trans``.
    """
    cdef Py_ssize_t t, k, e, i, j, lo = 0, next_lo, n_labels = exp_trans.shape[0]
    cdef double x
    for t in range(batch_sizes.shape[0] - 1):
        next_lo = lo + batch_sizes[t]
        for k in range(batch_sizes[t + 1]):
            for e in range(c.ptr[next_lo + k], c.ptr[next_lo + k + 1]):
                i = c.pair[e] // n_labels
                j = c.pair[e] - i * n_labels
                x = alpha[lo + k, i] * weighted[lo + k, j]
                if want_pairs:
                    pair_sums[i, j] += x * (c.factor[e] - 1.0)
                if c.out != NULL:
                    c.out[e] = x * exp_trans[i, j] * c.factor[e]
        lo = next_lo


# -- Python entry points ------------------------------------------------------


def state_scores(
    const long long[::1] indptr, const int[::1] ids, const double[::1] values,
    const long long[::1] state_ptr, const int[::1] state_labels,
    const double[::1] state_weights, const int[::1] dense_row,
    const double[:, ::1] dense_weights, double[:, ::1] out, bint dense_first=False,
    bint packed=False,
):
    """Overwrite ``out`` (n_tokens x n_labels) with the tokens' state scores
    (``values`` None: every value is 1; ``dense_first`` and ``packed`` as in
    add_state_scores)."""
    _check_state_arrays(indptr, out.shape[0], state_ptr, state_labels.shape[0],
                        state_weights.shape[0], dense_row, dense_weights, out.shape[1])
    cdef const double* value_data = _value_data(values, ids)
    with nogil:
        out[:, :] = 0.0
        add_state_scores(indptr, ids, value_data, state_ptr, state_labels, state_weights,
                         dense_row, dense_first, dense_weights, out, packed)


def expected_states(
    const long long[::1] indptr, const int[::1] ids, const double[::1] values,
    const long long[::1] state_ptr, const int[::1] state_labels,
    const double[:, ::1] marginals, const int[::1] dense_row,
    double[::1] out, double[:, ::1] dense_out, bint dense_first=False,
    bint packed=False,
):
    """Add each state feature's expected value sum under ``marginals`` to ``out``
    (to ``dense_out`` for the attributes with a dense row; ``values`` None:
    every value is 1; ``dense_first`` and ``packed`` as in add_state_scores)."""
    _check_state_arrays(indptr, marginals.shape[0], state_ptr, state_labels.shape[0],
                        out.shape[0], dense_row, dense_out, marginals.shape[1])
    cdef const double* value_data = _value_data(values, ids)
    with nogil:
        add_expected_states(indptr, ids, value_data, state_ptr, state_labels, marginals,
                            dense_row, dense_first, out, dense_out, packed)


cdef double _NO_VALUE = 0.0


cdef const double* _value_data(const double[::1] values, const int[::1] ids) except? NULL:
    """The values' data, or NULL for None (every value 1); checks the length."""
    if values is None:
        return NULL
    if values.shape[0] != ids.shape[0]:
        raise ValueError("values must have as many entries as ids")
    if values.shape[0] == 0:
        return &_NO_VALUE  # any address: no entry is read
    return &values[0]


cdef int _check_state_arrays(
    const long long[::1] indptr, Py_ssize_t n_rows, const long long[::1] state_ptr,
    Py_ssize_t n_states, Py_ssize_t n_weights, const int[::1] dense_row,
    const double[:, ::1] dense, Py_ssize_t n_labels,
) except -1:
    if indptr.shape[0] != n_rows + 1:
        raise ValueError("indptr must have one entry more than there are rows")
    if state_ptr.shape[0] == 0 or n_states != n_weights:
        raise ValueError("inconsistent state feature arrays")
    if dense_row.shape[0] != state_ptr.shape[0] - 1 or (
        dense.shape[0] and dense.shape[1] != n_labels
    ):
        raise ValueError("inconsistent dense rows")
    return 0


def forward_backward(
    const double[:, ::1] psi, const double[:, ::1] exp_trans,
    const Py_ssize_t[::1] batch_sizes, double[:, ::1] alpha, double[::1] scale,
    double[:, ::1] beta, double[:, ::1] weighted, pair_sums=None,
    const double[::1] row_weights=None, corrections=None,
):
    """Marginals of one packed block, in place of ``alpha``.

    Parameters
    ----------
    psi : ndarray of shape (n_rows, n_labels)
        ``exp(emissions - row max)``.
    exp_trans : ndarray of shape (n_labels, n_labels)
        ``exp(transitions - max)``, with ``max - min`` of the transitions at
        most a few hundred (see the module docstring).
    batch_sizes : ndarray of intp
    alpha : ndarray of shape (n_rows, n_labels)
        Output: the marginals ``p(y_r = j | x)``.
    scale : ndarray of shape (n_rows,)
        Output: the scale factors.
    beta, weighted : ndarray of shape (>= n_rows, n_labels)
        Scratch.
    pair_sums : ndarray of shape (n_labels, n_labels) or None
        When given, ``alpha[t].T @ weighted[t + 1]`` summed over steps is
        added to it (times ``exp_trans``: the expected label pair counts).
    row_weights : ndarray of shape (n_rows,) or None
        ``v``: the outputs become the derivatives of ``sum_r v[r] log Z_r``
        by the state scores (``alpha``) and the transitions (the pair sums),
        where ``Z_r`` is the partition function of row ``r``'s sequence cut
        after that row (see :func:`backward_marginals`). None: ``v`` is 1 at
        each sequence's last row and 0 elsewhere (the marginals).
    corrections : tuple (ptr, pair, factor, out) or None
        Input-conditioned transitions: the transition matrix into row ``r``
        is ``exp_trans`` with the entries ``pair[e]`` (flat ``i * L + j``)
        multiplied by ``factor[e]``, for ``e`` in ``ptr[r]:ptr[r + 1]``
        (at most once per pair and row; ignored at a sequence's first row).
        ``out[e]`` (float64, one per entry, or None) receives the entry's
        pair marginal ``p(y_prev = i, y_r = j | x)`` (with ``row_weights``:
        the derivative by the entry's log factor). ``pair_sums`` then
        holds the sums over every row's own matrix.

    Returns
    -------
    float
        The sum of ``log(scale)``.
    """
    cdef Py_ssize_t n_rows = psi.shape[0], n_labels = psi.shape[1], total = 0, t
    cdef double log_sum
    cdef double[:, ::1] pairs
    cdef bint want_pairs = pair_sums is not None
    for t in range(batch_sizes.shape[0]):
        total += batch_sizes[t]
    if (
        total != n_rows or alpha.shape[0] < n_rows or alpha.shape[1] != n_labels
        or scale.shape[0] < n_rows or exp_trans.shape[0] != n_labels
        or exp_trans.shape[1] != n_labels
        or beta.shape[0] < n_rows or weighted.shape[0] < n_rows
        or beta.shape[1] != n_labels or weighted.shape[1] != n_labels
    ):
        raise ValueError("inconsistent shapes")
    if row_weights is not None and row_weights.shape[0] != n_rows:
        raise ValueError("row_weights must have one entry per row")
    if n_rows == 0 or n_labels == 0:
        return 0.0
    cdef const double* v = NULL
    if row_weights is not None:
        v = &row_weights[0]
    pairs = pair_sums if want_pairs else beta  # unused unless want_pairs
    if want_pairs and (pairs.shape[0] != n_labels or pairs.shape[1] != n_labels):
        raise ValueError("pair_sums must be n_labels x n_labels")
    cdef Corrections c
    cdef Corrections* cp = NULL
    cdef const long long[::1] c_ptr
    cdef const int[::1] c_pair
    cdef const double[::1] c_factor
    cdef double[::1] c_out
    if corrections is not None:
        c_ptr, c_pair, c_factor, out = corrections
        _check_corrections(c_ptr, c_pair, c_factor, n_rows, n_labels)
        c.ptr, c.out = &c_ptr[0], NULL
        if c_pair.shape[0]:
            c.pair, c.factor = &c_pair[0], &c_factor[0]
        if out is not None:
            c_out = out
            if c_out.shape[0] != c_pair.shape[0]:
                raise ValueError("corrections' out must have one entry per pair")
            if c_out.shape[0]:
                c.out = &c_out[0]
        cp = &c
    _load_dgemm()
    with nogil:
        log_sum = forward_scaled(psi, exp_trans, batch_sizes, alpha, scale, cp)
        backward_marginals(psi, exp_trans, batch_sizes, alpha, scale, beta, weighted,
                           pairs, want_pairs, v, cp)
    return log_sum


cdef int _check_corrections(
    const long long[::1] ptr, const int[::1] pair, const double[::1] factor,
    Py_ssize_t n_rows, Py_ssize_t n_labels,
) except -1:
    cdef Py_ssize_t r, e
    if ptr.shape[0] != n_rows + 1 or factor.shape[0] != pair.shape[0] or ptr[0] != 0:
        raise ValueError("inconsistent corrections")
    for r in range(n_rows):
        if ptr[r + 1] < ptr[r]:
            raise ValueError("inconsistent corrections")
    if ptr[n_rows] != pair.shape[0]:
        raise ValueError("inconsistent corrections")
    for e in range(pair.shape[0]):
        if pair[e] < 0 or pair[e] >= n_labels * n_labels:
            raise ValueError("correction pair out of range")
    return 0


def transition_deltas(
    const long long[::1] indptr, const int[::1] ids, const double[::1] values,
    const long long[::1] ptr, const int[::1] pairs, const double[::1] weights,
    Py_ssize_t n_labels,
):
    """The change of each row's transition scores by its conditioned features.

    Token ``r`` holds the transition attributes ``ids[indptr[r]:indptr[r + 1]]``
    (values ``values``, None: all 1); attribute ``a`` has the features
    ``ptr[a]:ptr[a + 1]`` on the label pairs ``pairs[k]`` (flat ``i * L + j``)
    with the weights ``weights[k]``. Returns ``(entry_ptr, entry_pair,
    delta)``: for row ``r`` the entries ``entry_ptr[r]:entry_ptr[r + 1]``, one
    per pair that some feature of the row touches (in order of first touch),
    with the sum of ``value * weight`` over those features (0 included: every
    touched pair has an entry, for its expected count).
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, r, p, k, a, total = 0, n = 0
    cdef const double* value_data = _value_data(values, ids)
    cdef int q
    cdef double v
    if (
        ptr.shape[0] == 0 or pairs.shape[0] != weights.shape[0]
        or ptr[ptr.shape[0] - 1] != pairs.shape[0]
    ):
        raise ValueError("inconsistent transition feature arrays")
    for p in range(ids.shape[0]):
        if ids[p] < 0 or ids[p] >= ptr.shape[0] - 1:
            raise ValueError("transition attribute id out of range")
        total += ptr[ids[p] + 1] - ptr[ids[p]]
    entry_ptr = np.zeros(n_rows + 1, dtype=np.int64)
    entry_pair = np.empty(total, dtype=np.int32)
    delta = np.zeros(total)
    slot = np.full(n_labels * n_labels, -1, dtype=np.intp)
    cdef long long[::1] e_ptr = entry_ptr
    cdef int[::1] e_pair = entry_pair
    cdef double[::1] e_delta = delta
    cdef Py_ssize_t[::1] where = slot
    with nogil:
        for r in range(n_rows):
            for p in range(indptr[r], indptr[r + 1]):
                a = ids[p]
                v = 1.0 if value_data == NULL else value_data[p]
                for k in range(ptr[a], ptr[a + 1]):
                    q = pairs[k]
                    if where[q] < 0:
                        where[q] = n
                        e_pair[n] = q
                        n += 1
                    e_delta[where[q]] += v * weights[k]
            for k in range(e_ptr[r], n):
                where[e_pair[k]] = -1
            e_ptr[r + 1] = n
    return entry_ptr, entry_pair[:n].copy(), delta[:n].copy()


def conditioned_expected(
    const long long[::1] indptr, const int[::1] ids, const double[::1] values,
    const long long[::1] ptr, const int[::1] pairs, const long long[::1] entry_ptr,
    const int[::1] entry_pair, const double[::1] entry_marginal, Py_ssize_t n_labels,
    double[::1] out,
):
    """Add each conditioned feature's expected value sum to ``out``.

    The rows and features as in :func:`transition_deltas`, with its entries
    and their pair marginals (``forward_backward``'s ``corrections`` out).
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, r, p, k, a, e
    cdef const double* value_data = _value_data(values, ids)
    cdef double v
    if entry_ptr.shape[0] != n_rows + 1 or entry_marginal.shape[0] != entry_pair.shape[0]:
        raise ValueError("inconsistent entries")
    if out.shape[0] != pairs.shape[0]:
        raise ValueError("out must have one entry per conditioned feature")
    slot = np.zeros(n_labels * n_labels)
    cdef double[::1] marginal = slot
    with nogil:
        for r in range(n_rows):
            for e in range(entry_ptr[r], entry_ptr[r + 1]):
                marginal[entry_pair[e]] = entry_marginal[e]
            for p in range(indptr[r], indptr[r + 1]):
                a = ids[p]
                v = 1.0 if value_data == NULL else value_data[p]
                for k in range(ptr[a], ptr[a + 1]):
                    out[k] += v * marginal[pairs[k]]
            for e in range(entry_ptr[r], entry_ptr[r + 1]):
                marginal[entry_pair[e]] = 0.0


def exp_shifted(double[:, ::1] scores, double[::1] out_max):
    """``scores = exp(scores - row max)`` in place; the row maxima go to ``out_max``."""
    cdef Py_ssize_t r, j, n_labels = scores.shape[1]
    cdef double m
    cdef double* row
    if out_max.shape[0] < scores.shape[0]:
        raise ValueError("out_max too short")
    if n_labels == 0 or scores.shape[0] == 0:
        return
    with nogil:
        for r in range(scores.shape[0]):
            row = &scores[r, 0]
            m = row[0]
            for j in range(1, n_labels):
                if row[j] > m:
                    m = row[j]
            out_max[r] = m
            for j in range(n_labels):
                row[j] -= m
        skcrf_exp_nonpositive(&scores[0, 0], scores.shape[0] * n_labels)


from libc.math cimport isfinite
from libc.stdlib cimport free, malloc
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t
from skcrf._utils._typedefs cimport intp
from skcrf._utils._byte_index cimport ByteIndex
from skcrf._template._expand cimport Rows, expand_rows, state_row_capacity
from skcrf._inference._viterbi cimport (
    SharedBound,
    ViterbiWork,
    shared_bound_claim,
    viterbi_bound_new,
    viterbi_sequence,
    viterbi_work_free,
    viterbi_work_init,
    viterbi_work_share,
)

cnp.import_array()


cdef class SequenceDecoder:
    """Viterbi for one sequence at a time, with the model's arrays held once.

    The prediction path of ``predict_single``: a 25-token sentence is a
    short chain, so the per-call cost is what matters. The model's arrays
    are converted once here and one call computes the state scores and the
    path. A decoder is shared by the threads that serve one model: what it
    holds is read-only once published, and every call allocates its own
    scores and backpointers.

    The per-label pruning bound costs O(n_labels ** 3) once; it is built,
    outside the GIL, by the call after which the tokens decoded so far
    number ``8 * n_labels`` (so its cost stays below the O(n * n_labels ** 2)
    work already done), and used by every later call; never for more than
    ``TIGHT_BOUND_MAX_LABELS`` labels (256: one call must not pay
    O(n_labels ** 3) however many tokens came before; many labels prune with
    the transition spread alone).

    Parameters
    ----------
    state_ptr, state_labels, state_weights : ndarray
        The model's state features (CSR by attribute).
    transitions : ndarray of shape (n_labels, n_labels)
    """

    cdef const long long[::1] state_ptr
    cdef const int[::1] state_labels
    cdef const double[::1] state_weights
    cdef const double[:, ::1] transitions
    cdef Py_ssize_t n_labels
    cdef ViterbiWork model       # transitions, spread and margin (its scratch is unused)
    cdef bint has_model
    cdef SharedBound shared      # the per-label bound, built once it pays

    def __cinit__(self, const long long[::1] state_ptr, const int[::1] state_labels,
                  const double[::1] state_weights, const double[:, ::1] transitions):
        self.has_model = False
        self.shared = SharedBound(NULL, 0, False)
        if state_labels.shape[0] != state_weights.shape[0] or state_ptr.shape[0] == 0:
            raise ValueError("inconsistent state feature arrays")
        if transitions.shape[0] != transitions.shape[1]:
            raise ValueError("transitions must be square")
        self.state_ptr = state_ptr
        self.state_labels = state_labels
        self.state_weights = state_weights
        self.transitions = transitions
        self.n_labels = transitions.shape[0]
        if viterbi_work_init(&self.model, &self.transitions[0, 0] if self.n_labels else NULL,
                             self.n_labels, 1, False) != 0:
            raise MemoryError()
        self.has_model = True

    def __dealloc__(self):
        if self.has_model:
            viterbi_work_free(&self.model)
        free(self.shared.bound)

    @property
    def has_tight_bound(self):
        """Whether the per-label pruning bound has been built."""
        return self.shared.bound != NULL

    def decode(self, indptr, ids, values):
        """Label index of each token of one encoded sequence.

        ``indptr`` (int64), ``ids`` (int32), ``values`` (float64): the CSR
        rows of the tokens. Raises ``OverflowError(row)`` when the scores of
        token ``row`` are not finite (the caller words the error).
        """
        # One call per sentence: the encoder's arrays are read through the
        # C API (a typed memoryview costs about as much as a short sentence's
        # scores); any other buffer of these types through memoryviews.
        cdef const long long[::1] indptr_view
        cdef const int[::1] ids_view
        cdef const double[::1] values_view
        cdef Py_ssize_t length
        if _plain_array(indptr, cnp.NPY_INT64) and _plain_array(ids, cnp.NPY_INT32) \
                and _plain_array(values, cnp.NPY_FLOAT64):
            length = cnp.PyArray_DIM(<cnp.ndarray> indptr, 0) - 1
            return self._decode(<const long long*> cnp.PyArray_DATA(<cnp.ndarray> indptr),
                                length, <const int*> cnp.PyArray_DATA(<cnp.ndarray> ids),
                                <const double*> cnp.PyArray_DATA(<cnp.ndarray> values))
        indptr_view = indptr
        ids_view = ids
        values_view = values
        length = indptr_view.shape[0] - 1
        return self._decode(&indptr_view[0] if length >= 0 else NULL, length,
                            &ids_view[0] if ids_view.shape[0] else NULL,
                            &values_view[0] if values_view.shape[0] else NULL)

    def decode_tokens(self, plan, tokens, ByteIndex index, constant_ids):
        """Label index of each token of one sequence of raw tokens.

        The tokens are featurized by a template (``plan``, a
        :class:`~skcrf._template._expand.CompiledPlan`, its attributes'
        ``index`` and ``constant_ids``) into rows that this call decodes
        straight away: :meth:`decode` of the rows
        :func:`~skcrf._template._expand.expand` gives, without their arrays.
        Errors as those two raise.
        """
        path = np.empty(len(tokens), dtype=np.intp)
        bad = self.decode_token_sequences(plan, [tokens], index, constant_ids, path, 0, "xseq")
        if bad >= 0:
            raise OverflowError(bad)
        return path

    def decode_token_sequences(self, plan, list sequences, ByteIndex index, constant_ids,
                               intp[::1] path, Py_ssize_t first_sequence=0, str name="X"):
        """Decode sequences of raw tokens into ``path`` (their flat rows).

        :meth:`decode_tokens` for many sentences: the template's rows of all
        of them, then each decoded as :meth:`decode_sequences` decodes it,
        without the GIL once the tokens are read (threads decoding shards of
        one batch run in parallel). ``first_sequence``: the index of
        ``sequences[0]`` in the data (errors name tokens from it). Returns -1,
        or the first row (of these sequences) whose scores are not finite
        (nothing written after it).
        """
        cdef Py_ssize_t n_seq = len(sequences), s, n_tokens = 0, capacity
        cdef intp* lengths = <intp*> malloc(max(1, n_seq) * sizeof(intp))
        cdef intp* starts = <intp*> malloc(max(1, n_seq) * sizeof(intp))
        cdef Rows rows
        rows.indptr = NULL
        rows.ids = NULL
        rows.values = NULL
        try:
            if lengths == NULL or starts == NULL:
                raise MemoryError()
            for s in range(n_seq):
                starts[s] = n_tokens
                lengths[s] = len(sequences[s])
                n_tokens += lengths[s]
            if path.shape[0] != n_tokens:
                raise ValueError("path must hold one entry per token")
            capacity = state_row_capacity(plan, n_tokens)
            rows.size = 0
            rows.capacity = capacity
            rows.indptr = <int64_t*> malloc((n_tokens + 1) * sizeof(int64_t))
            rows.ids = <int32_t*> malloc(max(1, capacity) * sizeof(int32_t))
            rows.values = <double*> malloc(max(1, capacity) * sizeof(double))
            if rows.indptr == NULL or rows.ids == NULL or rows.values == NULL:
                raise MemoryError()
            expand_rows(plan, sequences, <const Py_ssize_t*> lengths, n_seq, n_tokens, index,
                        None, False, name, first_sequence, constant_ids, &rows, NULL)
            if self.n_labels == 0:
                return -1
            return self._decode_many(<const long long*> rows.indptr, <const int*> rows.ids,
                                     rows.values, starts, lengths, NULL, n_seq, n_tokens,
                                     &path[0] if n_tokens else NULL)
        finally:
            free(lengths)
            free(starts)
            free(rows.indptr)
            free(rows.ids)
            free(rows.values)

    def decode_sequences(self, const long long[::1] indptr, const int[::1] ids,
                         const double[::1] values, const intp[::1] starts,
                         const intp[::1] lengths, const intp[::1] which, intp[::1] path):
        """Decode the sequences ``which`` of encoded data into ``path`` (flat rows).

        Sequence ``s`` has the rows ``starts[s]`` .. ``starts[s] + lengths[s]``
        of the CSR arrays (``indptr`` over all tokens). One call for many
        sentences, each decoded as :meth:`decode` decodes it, without the
        GIL: threads decoding shards of one batch run in parallel. Returns
        -1, or the first row whose scores are not finite (nothing written
        after it).
        """
        cdef Py_ssize_t q, s, total = 0
        if self.n_labels == 0:
            return -1
        for q in range(which.shape[0]):
            s = which[q]
            if (s < 0 or s >= starts.shape[0] or starts[s] < 0 or lengths[s] < 0
                    or starts[s] + lengths[s] > path.shape[0]
                    or starts[s] + lengths[s] >= indptr.shape[0]):
                raise ValueError("sequence rows out of range")
            total += lengths[s]
        return self._decode_many(&indptr[0], &ids[0], &values[0], &starts[0], &lengths[0],
                                 &which[0], which.shape[0], total, &path[0])

    cdef Py_ssize_t _decode_many(self, const long long* indptr, const int* ids,
                                 const double* values, const intp* starts,
                                 const intp* lengths, const intp* which, Py_ssize_t n,
                                 Py_ssize_t total, intp* path) except -2:
        """Decode ``n`` sequences (``which[q]``, or ``q`` when ``which`` is NULL)
        into ``path``, without the GIL: sequence ``s`` has the rows
        ``starts[s]`` .. ``starts[s] + lengths[s]``. Returns -1, or the first
        row whose scores are not finite (nothing written after it)."""
        cdef Py_ssize_t q, s, bad = -1
        cdef int status = 0
        cdef double* new_bound = NULL
        cdef bint build = shared_bound_claim(&self.shared, self.n_labels, total)
        cdef const double* bound = self.shared.bound
        with nogil:
            for q in range(n):
                s = q if which == NULL else which[q]
                if lengths[s] == 0:
                    continue
                status = self._decode_rows(&indptr[starts[s]], lengths[s], ids, values, bound,
                                           &path[starts[s]], &bad)
                if status != 0 or bad >= 0:
                    if bad >= 0:
                        bad += starts[s]
                    break
            if build:
                new_bound = viterbi_bound_new(&self.model)
        if build:
            self.shared.bound = new_bound
        if status != 0:
            raise MemoryError()
        return bad

    cdef int _decode_rows(self, const long long* indptr, Py_ssize_t length, const int* ids,
                          const double* values, const double* bound, intp* path_data,
                          Py_ssize_t* bad) noexcept nogil:
        """The path of one sequence's rows into ``path_data``; -1 out of memory.

        ``bad`` gets the first row (from 0) whose scores are not finite.
        """
        cdef Py_ssize_t r, p, k, a, j, n_labels = self.n_labels
        cdef double v
        cdef double* row
        cdef ViterbiWork work
        cdef double* scores = <double*> malloc(length * n_labels * sizeof(double))
        if scores == NULL or viterbi_work_share(&work, &self.model, bound, length) != 0:
            free(scores)
            return -1
        for r in range(length):
            row = scores + r * n_labels
            for j in range(n_labels):
                row[j] = 0.0
            for p in range(indptr[r], indptr[r + 1]):
                a = ids[p]
                v = values[p]
                for k in range(self.state_ptr[a], self.state_ptr[a + 1]):
                    row[self.state_labels[k]] += v * self.state_weights[k]
            for j in range(n_labels):
                if not isfinite(row[j]):
                    bad[0] = r
                    break
            if bad[0] >= 0:
                break
        if bad[0] < 0:
            viterbi_sequence(&work, scores, NULL, 0, length, path_data)
        viterbi_work_free(&work)
        free(scores)
        return 0

    cdef object _decode(self, const long long* indptr, Py_ssize_t length, const int* ids,
                        const double* values):
        cdef Py_ssize_t n_labels = self.n_labels, bad = -1
        cdef cnp.npy_intp size = max(length, 0)
        cdef double* new_bound = NULL
        cdef const double* bound
        cdef int status = 0
        cdef bint build
        path = cnp.PyArray_EMPTY(1, &size, cnp.NPY_INTP, 0)
        cdef intp* path_data = <intp*> cnp.PyArray_DATA(<cnp.ndarray> path)
        if length <= 0 or n_labels == 0:
            return path
        # with the GIL: one thread takes the build, the others go on without
        build = shared_bound_claim(&self.shared, n_labels, length)
        bound = self.shared.bound
        with nogil:
            status = self._decode_rows(indptr, length, ids, values, bound, path_data, &bad)
            if build:
                new_bound = viterbi_bound_new(&self.model)
        if build:
            # published once; NULL (no bound possible, or no memory) is final
            self.shared.bound = new_bound
        if status != 0:
            raise MemoryError()
        if bad >= 0:
            raise OverflowError(bad)
        return path


cdef inline bint _plain_array(object array, int typenum):
    """Whether ``array`` is a 1-D ndarray of ``typenum``, C-contiguous,
    aligned and in the machine's byte order (what the encoder makes)."""
    return (cnp.PyArray_CheckExact(array)
            and cnp.PyArray_NDIM(<cnp.ndarray> array) == 1
            and cnp.PyArray_EquivTypenums(cnp.PyArray_TYPE(<cnp.ndarray> array), typenum)
            and cnp.PyArray_ISCARRAY_RO(<cnp.ndarray> array)
            and cnp.PyArray_ISNOTSWAPPED(<cnp.ndarray> array))


def state_feature_sums(
    const long long[::1] indptr, const int[::1] ids, const double[::1] values,
    const Py_ssize_t[::1] labels, Py_ssize_t n_attributes, Py_ssize_t n_labels,
    bint all_labels=False,
):
    """The (attribute, label) pairs stored in the training data, with value sums.

    A pair is stored when a token with that label holds the attribute
    (explicit zeros included). With ``all_labels``, every label of every
    attribute is returned (sum 0 where never seen).

    Returns
    -------
    state_ptr : ndarray of int64, shape (n_attributes + 1,)
    state_labels : ndarray of int32
        Increasing within an attribute.
    state_sums : ndarray of float64
        The value sum of each pair.

    Notes
    -----
    One bit per (attribute, label) marks the pairs seen (n_attributes x
    n_labels bits: 1/64 of a dense array of weights), then a second pass
    adds each value to its pair, found by binary search among the
    attribute's labels. No sort, no per-entry temporary.
    """
    cdef Py_ssize_t n_tokens = indptr.shape[0] - 1, n_entries = ids.shape[0]
    cdef Py_ssize_t words = (n_labels + 63) // 64
    cdef Py_ssize_t r, p, a, j, lo, hi, mid, n_states
    cdef uint64_t[::1] seen
    if labels.shape[0] != n_tokens:
        raise ValueError("one label per token is needed")
    for r in range(n_tokens):
        if labels[r] < 0 or labels[r] >= n_labels:
            raise ValueError("label index out of range")
    for p in range(n_entries):
        if ids[p] < 0 or ids[p] >= n_attributes:
            raise ValueError("attribute id out of range")
    state_ptr_arr = np.zeros(n_attributes + 1, dtype=np.int64)
    cdef long long[::1] state_ptr = state_ptr_arr
    if all_labels:
        state_ptr_arr[1:] = np.arange(1, n_attributes + 1, dtype=np.int64) * n_labels
        state_labels_arr = np.tile(np.arange(n_labels, dtype=np.int32), n_attributes)
    else:
        seen_arr = np.zeros(max(n_attributes * words, 1), dtype=np.uint64)
        seen = seen_arr
        with nogil:
            for r in range(n_tokens):
                j = labels[r]
                for p in range(indptr[r], indptr[r + 1]):
                    seen[ids[p] * words + j // 64] |= (<uint64_t> 1) << (j % 64)
            n_states = 0
            for a in range(n_attributes):
                for j in range(n_labels):
                    if (seen[a * words + j // 64] >> (j % 64)) & 1:
                        n_states += 1
                state_ptr[a + 1] = n_states
        state_labels_arr = np.empty(n_states, dtype=np.int32)
        state_labels_view = state_labels_arr
        _fill_labels(seen, words, n_attributes, n_labels, state_labels_view)
        del seen_arr
    state_sums_arr = np.zeros(state_ptr_arr[n_attributes], dtype=np.float64)
    cdef const int[::1] state_labels = state_labels_arr
    cdef double[::1] state_sums = state_sums_arr
    with nogil:
        for r in range(n_tokens):
            j = labels[r]
            for p in range(indptr[r], indptr[r + 1]):
                a = ids[p]
                lo = state_ptr[a]
                hi = state_ptr[a + 1] - 1
                while lo < hi:  # the pair exists: find it among a's labels
                    mid = (lo + hi) // 2
                    if state_labels[mid] < j:
                        lo = mid + 1
                    else:
                        hi = mid
                state_sums[lo] += values[p]
    return state_ptr_arr, state_labels_arr, state_sums_arr


cdef void _fill_labels(const uint64_t[::1] seen, Py_ssize_t words, Py_ssize_t n_attributes,
                       Py_ssize_t n_labels, int[::1] out) noexcept nogil:
    cdef Py_ssize_t a, j, k = 0
    for a in range(n_attributes):
        for j in range(n_labels):
            if (seen[a * words + j // 64] >> (j % 64)) & 1:
                out[k] = <int> j
                k += 1


# -- dense vector features: products through BLAS -----------------------------


def add_vector_scores(const double[:, ::1] vectors, const double[:, ::1] weights,
                      double[:, ::1] out):
    """``out += vectors @ weights``: (n x D) @ (D x L) added to (n x L), row-major."""
    cdef int n = vectors.shape[0], d = vectors.shape[1], n_labels = weights.shape[1]
    cdef double one = 1.0
    if weights.shape[0] != d or out.shape[1] != n_labels or out.shape[0] < n:
        raise ValueError("add_vector_scores: shapes do not match.")
    if n == 0 or d == 0 or n_labels == 0:
        return
    _load_dgemm()
    with nogil:
        # row-major C += A B is column-major C^T += B^T A^T
        dgemm(b"N", b"N", &n_labels, &n, &d, &one, <double*>&weights[0, 0], &n_labels,
              <double*>&vectors[0, 0], &d, &one, &out[0, 0], &n_labels)


def add_vector_expected(const double[:, ::1] vectors, const double[:, ::1] marginals,
                        double[:, ::1] out):
    """``out += vectors.T @ marginals``: (D x n) @ (n x L) added to (D x L), row-major."""
    cdef int n = vectors.shape[0], d = vectors.shape[1], n_labels = marginals.shape[1]
    cdef double one = 1.0
    if marginals.shape[0] < n or out.shape[0] != d or out.shape[1] != n_labels:
        raise ValueError("add_vector_expected: shapes do not match.")
    if n == 0 or d == 0 or n_labels == 0:
        return
    _load_dgemm()
    with nogil:
        # column-major: out^T (L x D) += M^T-as-stored (L x n) @ (V as stored, D x n)^T
        dgemm(b"N", b"T", &n_labels, &d, &n, &one, <double*>&marginals[0, 0], &n_labels,
              <double*>&vectors[0, 0], &d, &one, &out[0, 0], &n_labels)


def add_rows(const double[:, ::1] table, const Py_ssize_t[::1] index, double[:, ::1] out):
    """``out[t] += table[index[t]]`` for every row ``t`` of ``index`` (a gather)."""
    cdef Py_ssize_t n = index.shape[0], n_cols = table.shape[1], t, k, r
    if out.shape[0] < n or out.shape[1] != n_cols:
        raise ValueError("add_rows: shapes do not match.")
    for t in range(n):
        if index[t] < 0 or index[t] >= table.shape[0]:
            raise IndexError("add_rows: index out of range.")
    with nogil:
        for t in range(n):
            r = index[t]
            for k in range(n_cols):
                out[t, k] += table[r, k]


def scatter_rows(const double[:, ::1] rows, const Py_ssize_t[::1] index, double[:, ::1] out):
    """``out[index[t]] += rows[t]`` for every row ``t`` of ``index`` (a scatter-add)."""
    cdef Py_ssize_t n = index.shape[0], n_cols = rows.shape[1], t, k, r
    if rows.shape[0] < n or out.shape[1] != n_cols:
        raise ValueError("scatter_rows: shapes do not match.")
    for t in range(n):
        if index[t] < 0 or index[t] >= out.shape[0]:
            raise IndexError("scatter_rows: index out of range.")
    with nogil:
        for t in range(n):
            r = index[t]
            for k in range(n_cols):
                out[r, k] += rows[t, k]


def drop_zeros_in_place(long long[::1] indptr, int[::1] ids, double[::1] values):
    """Remove the explicit zeros of CSR rows in place; returns the entries kept.

    The kept entries move to the front of ``ids`` and ``values`` (their order
    unchanged) and ``indptr`` is rewritten to match; the caller trims the
    arrays to the returned size.
    """
    cdef Py_ssize_t n_rows = indptr.shape[0] - 1, r, p, end, kept = 0
    if n_rows < 0 or ids.shape[0] != values.shape[0] or indptr[n_rows] > ids.shape[0]:
        raise ValueError("drop_zeros_in_place: shapes do not match.")
    with nogil:
        end = indptr[0]
        for r in range(n_rows):
            p, end = end, indptr[r + 1]
            indptr[r] = kept
            while p < end:
                if values[p] != 0.0:
                    ids[kept] = ids[p]
                    values[kept] = values[p]
                    kept += 1
                p += 1
        indptr[n_rows] = kept
    return kept


cdef int _check_index(const int[::1] index, Py_ssize_t size, Py_ssize_t n_values,
                      str values) except -1:
    """The errors of :func:`take` and :func:`put`: ``values`` (named) must
    have one entry per index, and every index be in ``[0, size)``."""
    cdef Py_ssize_t k
    if n_values != index.shape[0]:
        raise ValueError(f"{values} must have one entry per index")
    for k in range(index.shape[0]):
        if not 0 <= index[k] < size:
            raise IndexError(f"index {index[k]} is out of bounds for {size} entries")
    return 0


cdef Py_ssize_t _pack_entries(
    long long[::1] indptr, int[::1] ids, double* values,
    const long long[::1] state_ptr, const int[::1] dense_row,
) noexcept nogil:
    """:func:`pack_entries` once its arguments are checked."""
    cdef Py_ssize_t r, p, kept = 0, start = 0, n_rows = indptr.shape[0] - 1
    cdef long long a, count
    for p in range(ids.shape[0]):  # first whether every entry fits
        a = ids[p]
        if dense_row[a] >= 0:
            if dense_row[a] > _START_MASK:
                return -1
        elif state_ptr[a + 1] - state_ptr[a] > _MAX_COUNT or state_ptr[a] > _START_MASK:
            return -1
    for r in range(n_rows):
        for p in range(start, indptr[r + 1]):
            a = ids[p]
            count = 0 if dense_row[a] >= 0 else state_ptr[a + 1] - state_ptr[a]
            if dense_row[a] < 0 and count == 0:
                continue
            ids[kept] = <int> <unsigned int> (
                (count << _START_BITS) | (dense_row[a] if count == 0 else state_ptr[a])
            )
            if values != NULL:
                values[kept] = values[p]
            kept += 1
        start = indptr[r + 1]
        indptr[r + 1] = kept
    return kept


def pack_entries(long long[::1] indptr, int[::1] ids, double[::1] values,
                 const long long[::1] state_ptr, const int[::1] dense_row):
    """Turn the attribute ids of CSR rows into packed entries, in place.

    See the module's conventions. The entries of attributes without features
    are dropped, ``indptr`` and ``values`` (None: every value is 1) following
    in place; nothing else is allocated. Returns the number of entries kept
    (the first ones of ``ids`` and ``values``), or -1, having changed nothing,
    when an entry does not fit: a start or dense row of ``PACKED_STARTS`` or
    more, or an attribute with more than ``PACKED_MAX_COUNT`` sparse features.
    """
    cdef Py_ssize_t kept, n_rows = indptr.shape[0] - 1
    if n_rows < 0 or state_ptr.shape[0] != dense_row.shape[0] + 1:
        raise ValueError("inconsistent CSR rows or state feature arrays")
    if indptr[n_rows] != ids.shape[0]:
        raise ValueError("indptr must end at the number of ids")
    cdef double* value_data = <double*> _value_data(values, ids)
    _check_index(ids, dense_row.shape[0], ids.shape[0], "ids")
    with nogil:
        kept = _pack_entries(indptr, ids, value_data, state_ptr, dense_row)
    return kept


def take(const double[::1] source, const int[::1] index, double[::1] out):
    """``out[k] = source[index[k]]`` (an int32 index: no intp copy of it)."""
    cdef Py_ssize_t k
    _check_index(index, source.shape[0], out.shape[0], "out")
    with nogil:
        for k in range(index.shape[0]):
            out[k] = source[index[k]]


def put(const double[::1] source, const int[::1] index, double[::1] out):
    """``out[index[k]] = source[k]`` (an int32 index: no intp copy of it;
    numpy's fancy assignment takes about twice as long)."""
    cdef Py_ssize_t k
    _check_index(index, out.shape[0], source.shape[0], "source")
    with nogil:
        for k in range(index.shape[0]):
            out[index[k]] = source[k]
