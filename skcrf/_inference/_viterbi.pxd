"""C-level Viterbi kernels of skcrf._inference._viterbi, for reuse by other Cython modules.

Usage from another module (all nogil)::

    from skcrf._inference._viterbi cimport (
        ViterbiWork,
        viterbi_work_init,
        viterbi_work_free,
        viterbi_sequence,
    )

    cdef ViterbiWork work
    if viterbi_work_init(&work, transitions_ptr, n_labels, max_length) != 0:
        ...  # out of memory
    score = viterbi_sequence(&work, emissions_ptr, offsets_ptr, column, length, path_ptr)
    viterbi_work_free(&work)

Conventions: ``transitions[i * n_labels + j]`` is the score of label ``i``
followed by label ``j``; emission rows are ``n_labels`` contiguous doubles.
Ties go to the lowest label index.
"""

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
# also the per-label bound, O(n_labels ** 3) once, worth it for batches of
# more than a few dozen tokens). Returns 0, or -1 when out of memory
# (``work`` then owns nothing). Free with viterbi_work_free.
cdef int viterbi_work_init(ViterbiWork* work, const double* transitions,
                           intp n_labels, intp max_length, bint tight) noexcept nogil

cdef void viterbi_work_free(ViterbiWork* work) noexcept nogil

# The per-label bound of ``work``'s transitions (see viterbi_work_init), in
# new memory the caller owns (free it); NULL when out of memory or when the
# transitions (NaN, +inf) admit no bound. O(n_labels ** 3).
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
# packed order. Returns 0, or -1 when out of memory.
cdef int viterbi_packed_c(const double* emissions, const double* transitions,
                          intp n_labels, const intp* batch_sizes, intp max_length,
                          intp* path, double* best_score) noexcept nogil
