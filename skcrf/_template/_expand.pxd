from libc.stdint cimport int32_t, int64_t

from skcrf._utils._byte_index cimport ByteIndex


cdef struct Rows:
    int32_t *ids
    double *values
    Py_ssize_t size
    Py_ssize_t capacity
    int64_t *indptr


cdef Py_ssize_t state_row_capacity(object plan, Py_ssize_t n_tokens) except -1
cdef int expand_rows(object compiled, list sequences, const Py_ssize_t *lengths,
                     Py_ssize_t n_seq, Py_ssize_t n_tokens, ByteIndex index,
                     ByteIndex transitions, bint grow, str name, Py_ssize_t first_sequence,
                     object constant_ids, Rows *state, Rows *transition) except -1
