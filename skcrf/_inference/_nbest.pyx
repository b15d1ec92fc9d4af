"""Compiled k-best (list) Viterbi with forbidden labels and transitions, and
the per-sequence log partition function of a packed block.

Conventions
-----------
- Same layouts as :mod:`skcrf._inference._viterbi`: ``emissions[r, j]`` is the score of
  label ``j`` at packed row ``r`` (layout of :mod:`skcrf._utils._packing`),
  ``transitions[i, j]`` the score of label ``i`` followed by label ``j``; no
  start or end transitions.
- Constraints are scores of ``-inf``: an emission of ``-inf`` forbids the
  label at that token, a transition of ``-inf`` forbids the pair. A labelling
  is allowed when its score is finite. Other scores must be finite.
- :func:`kbest_packed` is the lazy k-best of Huang & Chiang (2005,
  algorithm 3, below): a pruned Viterbi pass gives every (token, label) its
  best labelling so far, then only the nodes that the k best paths reach
  past their best one are expanded. Scores are summed in the order of the
  Viterbi kernel, ``(previous + T[i, j]) + emission``, so the best path and
  its score are bitwise those of :func:`skcrf._inference._viterbi.viterbi_packed`.
- Ties: labellings of equal score are ordered by their labels read from the
  end: the lower last label index first, then the lower label before it, and
  so on (a labelling's key at each token is its score, then its label, then
  its rank at that label). The first labelling is therefore the Viterbi
  path, whose ties go to the lowest label index.
"""

from libc.math cimport INFINITY, log
from libc.stdint cimport int32_t, INT32_MAX
from libc.stdlib cimport free, malloc, realloc

import numpy as np

from skcrf._utils._simd import avx2_disabled

cimport numpy as cnp

cnp.import_array()

from skcrf._inference._kernels cimport Corrections, _check_corrections, forward_scaled
from skcrf._inference._viterbi cimport (
    ViterbiWork,
    packed_row,
    tight_bound_pays,
    viterbi_start,
    viterbi_step,
    viterbi_work_free,
    viterbi_work_init,
)

# the max-plus sweep's AVX2 or baseline code (_viterbi.pxd), chosen once at
# import (SKCRF_DISABLE_AVX2=1: baseline)
cdef extern from "_simd.h":
    int skcrf_simd_init(int disable) noexcept

AVX2_PATH = bool(skcrf_simd_init(avx2_disabled()))


# -- lazy k-best ----------------------------------------------------------------
#
# Huang & Chiang (2005), "Better k-best parsing", algorithm 3, on the chain.
# A node is a (token t, label j); its derivations are the labellings of
# tokens 0..t that end with j, and derivation r of (t, j) is derivation s of
# (t - 1, i) followed by j, of key D_s(t - 1, i) + T[i, j] and score key +
# e[t, j]. A forward max-product pass (the pruned Viterbi, every row kept)
# gives every node's best derivation: alpha[t, j] and its previous label
# bp[t, j] (rank 0 there). A node's later derivations are made on demand:
# the first time its derivation 1 is needed, its candidates are set up: one
# per previous label i, (i, 0) for every i but bp[t, j] (a node's
# candidates never hold two of the same label, so an array by label with a
# linear scan replaces the heap: cheaper for ~50 labels and the few
# derivations a node gives). Derivation r + 1 sets the successor (i, s + 1)
# of derivation r's candidate (i, s), which needs derivation s + 1 of
# (t - 1, i) (a chain of such requests runs down the tokens until a node has
# it or has no more), then takes the best candidate.
# The root (past the last token) does the same over the last token's labels
# with keys D_r(length - 1, j). Only the nodes that the k best paths reach
# past their best derivation get candidates: about one Viterbi pass plus
# O(length * k * n_labels) cheap (vectorized) steps per sequence.
#
# Keys are compared by the tie rule of the conventions above: the higher key
# first, then the lower label (the first of equal keys in label order), then
# the lower rank (a label's derivations come best first). The keys and
# scores are the Viterbi kernel's sums, in its order.


cdef int lazy_kbest_work_init(LazyKBestWork* work, const double* transitions, intp n_labels,
                              intp k, intp max_length, bint tight) noexcept nogil:
    cdef ViterbiWork vit
    cdef intp size, t, i, j
    work.n_labels = n_labels
    work.k = k
    work.max_length = max_length
    work.transitions = transitions
    work.transposed = NULL
    work.bound = NULL
    work.candidates = NULL
    work.alpha = NULL
    work.bp = NULL
    work.slot_of = NULL
    work.n_slots = 0
    work.capacity = 0
    work.slot_node = NULL
    work.slot_count = NULL
    work.slot_open = NULL
    work.slot_found = NULL
    work.slot_key = NULL
    work.slot_rank = NULL
    work.root_key = NULL
    work.root_rank = NULL
    work.final = NULL
    work.stack = NULL
    # the pruning bound and margins of the Viterbi kernel (its buffers unused)
    if viterbi_work_init(&vit, transitions, n_labels, 1, tight) != 0:
        return -1
    work.spread = vit.spread
    work.margin = vit.margin
    work.bound = vit.bound
    vit.bound = NULL
    viterbi_work_free(&vit)
    if n_labels < 1:
        n_labels = 1
    if max_length < 1:
        max_length = 1
    if k < 1:
        k = 1
    size = max_length * n_labels
    work.transposed = <double*>malloc(n_labels * n_labels * sizeof(double))
    work.candidates = <int32_t*>malloc(n_labels * sizeof(int32_t))
    work.alpha = <double*>malloc(size * sizeof(double))
    work.bp = <int32_t*>malloc(size * sizeof(int32_t))
    work.slot_of = <int32_t*>malloc(size * sizeof(int32_t))
    work.root_key = <double*>malloc(n_labels * sizeof(double))
    work.root_rank = <int32_t*>malloc(n_labels * sizeof(int32_t))
    work.final = <Derivation*>malloc(k * sizeof(Derivation))
    work.stack = <intp*>malloc(max_length * sizeof(intp))
    if (work.transposed == NULL or work.candidates == NULL or work.alpha == NULL
            or work.bp == NULL or work.slot_of == NULL or work.root_key == NULL
            or work.root_rank == NULL or work.final == NULL or work.stack == NULL
            or _grow_slots(work) != 0):
        lazy_kbest_work_free(work)
        return -1
    for t in range(size):
        work.slot_of[t] = -1
    for i in range(work.n_labels):
        for j in range(work.n_labels):
            work.transposed[j * work.n_labels + i] = transitions[i * work.n_labels + j]
    return 0


cdef void lazy_kbest_work_free(LazyKBestWork* work) noexcept nogil:
    free(work.transposed)
    free(work.bound)
    free(work.candidates)
    free(work.alpha)
    free(work.bp)
    free(work.slot_of)
    free(work.slot_node)
    free(work.slot_count)
    free(work.slot_open)
    free(work.slot_found)
    free(work.slot_key)
    free(work.slot_rank)
    free(work.root_key)
    free(work.root_rank)
    free(work.final)
    free(work.stack)
    work.transposed = NULL
    work.bound = NULL
    work.candidates = NULL
    work.alpha = NULL
    work.bp = NULL
    work.slot_of = NULL
    work.slot_node = NULL
    work.slot_count = NULL
    work.slot_open = NULL
    work.slot_found = NULL
    work.slot_key = NULL
    work.slot_rank = NULL
    work.root_key = NULL
    work.root_rank = NULL
    work.final = NULL
    work.stack = NULL
    work.capacity = 0
    work.n_slots = 0


cdef int _grow_slots(LazyKBestWork* work) noexcept nogil:
    """Double the slots (64 at first). Returns 0, or -1 when out of memory."""
    cdef intp capacity = 2 * work.capacity if work.capacity else 64
    cdef intp n_labels = work.n_labels if work.n_labels > 0 else 1
    cdef intp k = work.k if work.k > 0 else 1
    cdef void* p
    p = realloc(work.slot_node, capacity * sizeof(intp))
    if p == NULL:
        return -1
    work.slot_node = <intp*>p
    p = realloc(work.slot_count, capacity * sizeof(int32_t))
    if p == NULL:
        return -1
    work.slot_count = <int32_t*>p
    p = realloc(work.slot_open, capacity * sizeof(int32_t))
    if p == NULL:
        return -1
    work.slot_open = <int32_t*>p
    p = realloc(work.slot_found, capacity * k * sizeof(Derivation))
    if p == NULL:
        return -1
    work.slot_found = <Derivation*>p
    p = realloc(work.slot_key, capacity * n_labels * sizeof(double))
    if p == NULL:
        return -1
    work.slot_key = <double*>p
    p = realloc(work.slot_rank, capacity * n_labels * sizeof(int32_t))
    if p == NULL:
        return -1
    work.slot_rank = <int32_t*>p
    work.capacity = capacity
    return 0


cdef inline intp _argmax(const double* key, intp n) noexcept nogil:
    """The first index of the largest key, or -1 when every key is -inf."""
    cdef intp i, best = -1
    cdef double top = -INFINITY
    for i in range(n):
        if key[i] > top:
            top = key[i]
            best = i
    return best


cdef void _forward(LazyKBestWork* work, const double* emissions, const intp* offsets,
                   intp column, intp length) noexcept nogil:
    """alpha and bp of every node: the Viterbi kernel's steps (sums, ties and pruning)."""
    cdef intp n_labels = work.n_labels, t, top_label
    cdef double* prev
    cdef double top
    top = viterbi_start(emissions + packed_row(offsets, column, 0) * n_labels, n_labels,
                        work.alpha, &top_label)
    for t in range(1, length):
        prev = work.alpha + (t - 1) * n_labels
        top = viterbi_step(work.transitions, n_labels, work.spread, work.margin, work.bound,
                           work.candidates, prev, top, &top_label,
                           emissions + packed_row(offsets, column, t) * n_labels,
                           prev + n_labels, work.bp + t * n_labels)


cdef inline intp _new_slot(LazyKBestWork* work, intp t, intp j) noexcept nogil:
    """The candidates of node (t >= 1, j), whose derivation 0 (bp, 0) is made.

    Returns the slot, or -1 when out of memory.
    """
    cdef intp n_labels = work.n_labels, slot, i
    cdef int32_t best = work.bp[t * n_labels + j]
    cdef const double* prev = work.alpha + (t - 1) * n_labels
    cdef const double* column = work.transposed + j * n_labels
    cdef double* key
    cdef int32_t* rank
    cdef Derivation* found
    if work.n_slots == work.capacity and _grow_slots(work) != 0:
        return -1
    slot = work.n_slots
    work.n_slots += 1
    work.slot_of[t * n_labels + j] = <int32_t>slot
    work.slot_node[slot] = t * n_labels + j
    work.slot_count[slot] = 1
    work.slot_open[slot] = 1
    found = work.slot_found + slot * work.k
    found[0].score = work.alpha[t * n_labels + j]
    found[0].label = best
    found[0].rank = 0
    key = work.slot_key + slot * n_labels
    rank = work.slot_rank + slot * n_labels
    for i in range(n_labels):
        key[i] = prev[i] + column[i]  # -inf: no candidate
        rank[i] = 0
    key[best] = -INFINITY  # taken: its successor comes with the next request
    return slot


cdef inline double _derivation(LazyKBestWork* work, intp t, intp j, intp r) noexcept nogil:
    """Score of derivation r of (t, j) once requested (-inf: it does not exist)."""
    cdef intp slot = work.slot_of[t * work.n_labels + j]
    if slot < 0:
        return work.alpha[t * work.n_labels + j] if r == 0 else -INFINITY
    if r < work.slot_count[slot]:
        return work.slot_found[slot * work.k + r].score
    return -INFINITY


cdef int _request(LazyKBestWork* work, const double* emissions, const intp* offsets,
                  intp column, intp t, intp j, intp r) noexcept nogil:
    """Make derivation r of node (t, j) if it exists (derivation r - 1 is made).

    Returns 0, or -1 when out of memory.
    """
    cdef intp n_labels = work.n_labels, k = work.k, depth = 0, slot, node, best
    cdef Derivation* found
    cdef double* key
    cdef int32_t* rank
    cdef double p
    cdef int32_t i, s
    # down: each node on the way needs its next derivation, whose successor
    # candidate needs the next derivation of a node one token earlier
    while t > 0:
        slot = work.slot_of[t * n_labels + j]
        if slot < 0:
            if r == 0:
                break
            slot = _new_slot(work, t, j)
            if slot < 0:
                return -1
        elif r < work.slot_count[slot] or not work.slot_open[slot]:
            break  # made, or the node has no more
        work.stack[depth] = t * n_labels + j
        depth += 1
        found = work.slot_found + slot * k + work.slot_count[slot] - 1
        t -= 1
        j = found.label
        r = found.rank + 1
    # up: set each node's successor candidate (when it exists), take the best
    while depth > 0:
        depth -= 1
        node = work.stack[depth]
        t = node // n_labels
        j = node - t * n_labels
        slot = work.slot_of[node]
        found = work.slot_found + slot * k + work.slot_count[slot] - 1  # the last made
        key = work.slot_key + slot * n_labels
        rank = work.slot_rank + slot * n_labels
        i = found.label
        s = found.rank + 1
        found += 1
        p = _derivation(work, t - 1, i, s)
        key[i] = p + work.transitions[i * n_labels + j]
        rank[i] = s
        best = _argmax(key, n_labels)
        if best < 0:
            work.slot_open[slot] = 0
            continue
        found.score = key[best] + emissions[packed_row(offsets, column, t) * n_labels + j]
        found.label = <int32_t>best
        found.rank = rank[best]
        key[best] = -INFINITY
        work.slot_count[slot] += 1
    return 0


cdef intp lazy_kbest_sequence(LazyKBestWork* work, const double* emissions,
                              const intp* offsets, intp column, intp length, intp* paths,
                              intp n_rows, double* scores) noexcept nogil:
    cdef intp n_labels = work.n_labels, k = work.k, q, j, t, slot, best, status = 0
    cdef intp n_found = 0
    cdef const double* last
    cdef double* key = work.root_key
    cdef int32_t* rank = work.root_rank
    cdef Derivation* final = work.final
    cdef int32_t label, r
    if length <= 0:
        return 0
    _forward(work, emissions, offsets, column, length)
    work.n_slots = 0
    last = work.alpha + (length - 1) * n_labels
    for j in range(n_labels):
        key[j] = last[j]
        rank[j] = 0
    for q in range(k):
        if q > 0:
            # the successor of the last path's candidate
            label = final[q - 1].label
            r = final[q - 1].rank + 1
            if _request(work, emissions, offsets, column, length - 1, label, r) != 0:
                status = -1
                break
            key[label] = _derivation(work, length - 1, label, r)
            rank[label] = r
        best = _argmax(key, n_labels)
        if best < 0:
            break
        final[q].score = key[best]
        final[q].label = <int32_t>best
        final[q].rank = rank[best]
        key[best] = -INFINITY
        n_found += 1
    if status == 0:
        for q in range(n_found):
            scores[q] = final[q].score
        for q in range(n_found, k):
            scores[q] = -INFINITY
        # backtrack every path
        for q in range(n_found):
            label = final[q].label
            r = final[q].rank
            for t in range(length - 1, -1, -1):
                paths[q * n_rows + packed_row(offsets, column, t)] = label
                if t > 0:
                    slot = work.slot_of[t * n_labels + label]
                    if slot < 0:
                        label = work.bp[t * n_labels + label]  # rank 0 stays 0
                    else:
                        j = slot * k + r
                        label = work.slot_found[j].label
                        r = work.slot_found[j].rank
    # free the nodes' slots for the next sequence
    for slot in range(work.n_slots):
        work.slot_of[work.slot_node[slot]] = -1
    work.n_slots = 0
    return n_found if status == 0 else -1


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


def _check_kbest_args(const double[:, ::1] emissions, const double[:, ::1] transitions,
                      const Py_ssize_t[::1] batch_sizes, intp k, intp[:, ::1] paths_out,
                      double[:, ::1] scores_out):
    cdef intp n_rows = emissions.shape[0], n_labels = emissions.shape[1]
    cdef intp n_sequences
    if transitions.shape[0] != n_labels or transitions.shape[1] != n_labels:
        raise ValueError("transitions must be n_labels x n_labels")
    if n_labels > INT32_MAX or k > INT32_MAX:
        raise ValueError("too many labels or paths")
    if k < 1:
        raise ValueError("k must be at least 1")
    _check_packed(batch_sizes, n_rows)
    n_sequences = batch_sizes[0] if batch_sizes.shape[0] else 0
    if paths_out.shape[0] != k or paths_out.shape[1] != n_rows:
        raise ValueError("paths_out must have shape (k, n_rows)")
    if scores_out.shape[0] != n_sequences or scores_out.shape[1] != k:
        raise ValueError("scores_out must have shape (n_sequences, k)")
    if n_rows and n_labels == 0:
        raise ValueError("cannot decode with 0 labels")
    return n_sequences


def kbest_packed(const double[:, ::1] emissions, const double[:, ::1] transitions,
                 const Py_ssize_t[::1] batch_sizes, intp k, intp[:, ::1] paths_out,
                 double[:, ::1] scores_out):
    """The k best labellings of every sequence of a packed batch.

    The lazy kernel (Huang & Chiang's algorithm 3), at about the cost of one
    Viterbi pass plus ``O(length * k * n_labels)`` per sequence; ties as the
    module's conventions say.

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
    cdef intp max_length = batch_sizes.shape[0], n_sequences, t, column, length, got
    cdef LazyKBestWork work
    cdef intp* offsets
    cdef int status = 0
    n_sequences = _check_kbest_args(emissions, transitions, batch_sizes, k, paths_out,
                                    scores_out)
    found = np.zeros(n_sequences, dtype=np.intp)
    cdef intp[::1] found_view = found
    if n_rows == 0:
        return found
    with nogil:
        offsets = <intp*>malloc((max_length + 1) * sizeof(intp))
        if offsets == NULL:
            status = -1
        # the pruning bound costs ~n_labels ** 3 / 2 vector operations once
        elif lazy_kbest_work_init(&work, &transitions[0, 0], n_labels, k, max_length,
                                  tight_bound_pays(n_labels, n_rows)) != 0:
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
                got = lazy_kbest_sequence(
                    &work, &emissions[0, 0], offsets, column, length, &paths_out[0, 0],
                    n_rows, &scores_out[column, 0])
                if got < 0:
                    status = -1
                    break
                found_view[column] = got
            lazy_kbest_work_free(&work)
            free(offsets)
    if status != 0:
        raise MemoryError()
    return found


def forward_log_partition(const double[:, ::1] psi, const double[:, ::1] exp_trans,
                          const Py_ssize_t[::1] batch_sizes, double[:, ::1] alpha,
                          double[::1] scale, double[::1] out, corrections=None):
    """Scaled forward pass of a packed block; the log scale sums per sequence.

    ``psi``, ``exp_trans`` and ``corrections`` (``(ptr, pair, factor)`` or
    None: input-conditioned transitions) as for
    :func:`skcrf._inference._kernels.forward_backward` (zeros allowed:
    forbidden labels and pairs). ``out[c]`` (packed sequence order) receives
    the sum of ``log(scale)`` over the rows of sequence ``c``: its ``log Z``
    less the shifts. A sequence whose allowed labellings all underflow (or
    that has none) gets ``-inf`` or NaN.
    """
    cdef intp n_rows = psi.shape[0], n_labels = psi.shape[1]
    cdef intp t, r, lo = 0, n
    cdef Corrections c
    cdef Corrections* cp = NULL
    cdef const long long[::1] c_ptr
    cdef const int[::1] c_pair
    cdef const double[::1] c_factor
    _check_packed(batch_sizes, n_rows)
    if (alpha.shape[0] < n_rows or alpha.shape[1] != n_labels or scale.shape[0] < n_rows
            or exp_trans.shape[0] != n_labels or exp_trans.shape[1] != n_labels
            or out.shape[0] != (batch_sizes[0] if batch_sizes.shape[0] else 0)):
        raise ValueError("inconsistent shapes")
    if n_rows == 0 or n_labels == 0:
        return
    if corrections is not None:
        c_ptr, c_pair, c_factor = corrections
        _check_corrections(c_ptr, c_pair, c_factor, n_rows, n_labels)
        c.ptr, c.out = &c_ptr[0], NULL
        if c_pair.shape[0]:
            c.pair, c.factor = &c_pair[0], &c_factor[0]
        cp = &c
    with nogil:
        forward_scaled(psi, exp_trans, batch_sizes, alpha, scale, cp)
        for r in range(out.shape[0]):
            out[r] = 0.0
        for t in range(batch_sizes.shape[0]):
            n = batch_sizes[t]
            for r in range(n):
                out[r] += log(scale[lo + r])
            lo += n
