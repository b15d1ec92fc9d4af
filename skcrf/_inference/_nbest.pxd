# Declarations of the k-best (list) Viterbi of skcrf._inference._nbest, for reuse from
# other compiled modules. See _nbest.pyx for the conventions.

from libc.stdint cimport int32_t

from skcrf._utils._typedefs cimport intp


# -- lazy k-best (Huang & Chiang 2005, algorithm 3, on the chain) ------------

cdef struct Derivation:
    double score
    int32_t label            # previous label (the root: the last label)
    int32_t rank             # its rank there


cdef struct LazyKBestWork:
    intp n_labels
    intp k                   # paths wanted per sequence
    intp max_length          # capacity, in tokens
    const double* transitions  # (n_labels, n_labels) row-major, -inf = forbidden; not owned
    double* transposed       # n_labels * n_labels: transposed[j * n_labels + i] = T[i, j]
    double spread            # pruning of the forward pass, as skcrf._inference._viterbi
    double margin
    double* bound            # NULL, or n_labels * n_labels (see skcrf._inference._viterbi)
    int32_t* candidates      # n_labels
    double* alpha            # max_length * n_labels: best score of each (token, label)
    int32_t* bp              # max_length * n_labels: its previous label
    int32_t* slot_of         # max_length * n_labels: -1, or the node's slot
    intp n_slots             # slots in use (this sequence)
    intp capacity            # slots allocated
    intp* slot_node          # capacity: its node, t * n_labels + j
    int32_t* slot_count      # capacity: derivations made
    int32_t* slot_open       # capacity: 0 once the node has no more derivations
    Derivation* slot_found   # capacity * k: the node's derivations, best first
    double* slot_key         # capacity * n_labels: key of each previous label's candidate
    int32_t* slot_rank       # capacity * n_labels: its rank (-inf key: no candidate)
    double* root_key         # n_labels: the root's candidates, by last label
    int32_t* root_rank       # n_labels
    Derivation* final        # k: the sequence's paths (score, last label, rank there)
    intp* stack              # max_length: nodes waiting for their next derivation


# Fill ``work`` for ``k`` paths per sequence and sequences of up to
# ``max_length`` tokens (transitions: n_labels x n_labels, -inf where
# forbidden, read, not copied; ``tight``: the O(n_labels ** 3) pruning bound
# of skcrf._inference._viterbi: pass its ``tight_bound_pays(n_labels,
# n_tokens)``, never true above TIGHT_BOUND_MAX_LABELS labels). Returns 0,
# or -1 when out of memory (``work`` then owns nothing). Free with
# lazy_kbest_work_free.
cdef int lazy_kbest_work_init(LazyKBestWork* work, const double* transitions, intp n_labels,
                              intp k, intp max_length, bint tight) noexcept nogil

cdef void lazy_kbest_work_free(LazyKBestWork* work) noexcept nogil

# The k best labellings of one sequence of ``length`` tokens (1 <= length <=
# work.max_length), best first (ties: see _nbest.pyx). Token ``t`` lives at
# row ``offsets[t] + column`` (``offsets == NULL``: row ``t``) of
# ``emissions`` (-inf = label not allowed there); path ``q``'s label of that
# row is written to ``paths[q * n_rows + row]`` and its score to
# ``scores[q]`` (-inf and no labels written for the ranks past the number of
# labellings that exist). Returns the number of labellings found (0: no
# allowed labelling), or -1 when out of memory.
cdef intp lazy_kbest_sequence(LazyKBestWork* work, const double* emissions,
                              const intp* offsets, intp column, intp length, intp* paths,
                              intp n_rows, double* scores) noexcept nogil
