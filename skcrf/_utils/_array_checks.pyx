"""Compiled checks of a model's arrays: one pass each, no temporary arrays.

Opening a model checks its arrays before any kernel reads them (a file may
be damaged or crafted); done with numpy, each check made several
temporaries over every feature, the largest part of opening a mapped model.
"""

from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t

__all__ = ["all_finite", "csr_problem"]

ctypedef fused index_t:
    int32_t
    int64_t

cdef enum:
    _PTR_NOT_RISING = 1
    _COLUMN_OUT_OF_RANGE = 2
    _COLUMNS_NOT_INCREASING = 3

#: What :func:`csr_problem` finds (0: nothing).
PTR_NOT_RISING = _PTR_NOT_RISING
COLUMN_OUT_OF_RANGE = _COLUMN_OUT_OF_RANGE
COLUMNS_NOT_INCREASING = _COLUMNS_NOT_INCREASING


cdef int _csr_problem(const int64_t[::1] ptr, const index_t[::1] columns,
                      int64_t n_columns) noexcept nogil:
    cdef Py_ssize_t n_rows = ptr.shape[0] - 1, row, k
    if n_rows < 0 or ptr[0] != 0 or ptr[n_rows] != columns.shape[0]:
        return _PTR_NOT_RISING
    for row in range(n_rows):
        if ptr[row + 1] < ptr[row]:
            return _PTR_NOT_RISING
    for row in range(n_rows):
        for k in range(ptr[row], ptr[row + 1]):
            if columns[k] < 0 or columns[k] >= n_columns:
                return _COLUMN_OUT_OF_RANGE
            if k > ptr[row] and columns[k] <= columns[k - 1]:
                return _COLUMNS_NOT_INCREASING
    return 0


def csr_problem(const int64_t[::1] ptr, const index_t[::1] columns, int64_t n_columns):
    """What is wrong with a CSR pattern, 0 if nothing.

    ``PTR_NOT_RISING``: ``ptr`` does not rise (non-decreasing) from 0 to
    ``len(columns)``; ``COLUMN_OUT_OF_RANGE``: a column outside
    ``[0, n_columns)``; ``COLUMNS_NOT_INCREASING``: a row's columns not
    strictly increasing.

    >>> import numpy as np
    >>> csr_problem(np.array([0, 2, 3]), np.array([0, 2, 1], dtype=np.int32), 3)
    0
    >>> csr_problem(np.array([0, 2, 3]), np.array([2, 0, 1], dtype=np.int32), 3)
    3
    """
    cdef int problem
    with nogil:
        problem = _csr_problem(ptr, columns, n_columns)
    return problem


def all_finite(const double[::1] values):
    """Whether every value is finite (no NaN, no infinity).

    >>> import numpy as np
    >>> all_finite(np.array([0.5, -1.0])), all_finite(np.array([1.0, np.nan]))
    (True, False)
    """
    cdef Py_ssize_t k
    cdef bint finite = True
    with nogil:
        for k in range(values.shape[0]):
            if not isfinite(values[k]):
                finite = False
                break
    return finite
