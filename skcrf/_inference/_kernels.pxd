# Declarations of the training and inference kernels of skcrf._inference._kernels, for
# reuse from other compiled modules. See _kernels.pyx for the conventions
# (``values`` NULL: every value is 1).

cdef void add_state_scores(
    const long long[::1] indptr, const int[::1] ids, const double* values,
    const long long[::1] state_ptr, const int[::1] state_labels,
    const double[::1] state_weights, const int[::1] dense_row, bint dense_first,
    const double[:, ::1] dense_weights, double[:, ::1] out, bint packed,
) noexcept nogil

# Input-conditioned transitions of a block (see forward_backward): row r's
# transition into it is exp_trans times factor[e] at the pairs pair[e],
# e in ptr[r]:ptr[r + 1]; out (or NULL) receives each entry's pair marginal.
cdef struct Corrections:
    const long long* ptr
    const int* pair
    const double* factor
    double* out

# ValueError unless (ptr, pair, factor) are corrections of a block of n_rows
# rows over n_labels labels (one ptr entry per row plus one, pairs in range).
cdef int _check_corrections(
    const long long[::1] ptr, const int[::1] pair, const double[::1] factor,
    Py_ssize_t n_rows, Py_ssize_t n_labels,
) except -1

cdef double forward_scaled(
    const double[:, ::1] psi, const double[:, ::1] exp_trans,
    const Py_ssize_t[::1] batch_sizes, double[:, ::1] alpha, double[::1] scale,
    const Corrections* corrections,
) noexcept nogil

cdef void backward_marginals(
    const double[:, ::1] psi, const double[:, ::1] exp_trans,
    const Py_ssize_t[::1] batch_sizes, double[:, ::1] alpha,
    const double[::1] scale, double[:, ::1] beta, double[:, ::1] weighted,
    double[:, ::1] pair_sums, bint want_pairs, const double* row_weights,
    const Corrections* corrections,
) noexcept nogil

cdef void add_expected_states(
    const long long[::1] indptr, const int[::1] ids, const double* values,
    const long long[::1] state_ptr, const int[::1] state_labels,
    const double[:, ::1] marginals, const int[::1] dense_row, bint dense_first,
    double[::1] out, double[:, ::1] dense_out, bint packed,
) noexcept nogil
