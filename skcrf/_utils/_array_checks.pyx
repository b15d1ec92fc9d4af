"""Compiled checks of a model's arrays: one pass each, no temporary arrays.

Opening a model checks its arrays before any kernel reads them (a file may
be damaged or crafted); done with numpy, each check made several
temporaries over every feature, the largest part of opening a mapped model.
The members' CRC-32 by carry-less multiplication (``_crc32.h``): zlib's
byte-at-a-time loop took a sixth of opening a mapped model.
"""

import zlib

from libc.math cimport isfinite
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t

__all__ = ["all_finite", "crc32", "csr_problem", "model_arrays_problem"]


cdef extern from "_crc32.h" nogil:
    int skcrf_crc32_init() noexcept
    uint32_t skcrf_crc32(uint32_t value, const uint8_t *data, size_t size) noexcept


def _clmul_crc32(const uint8_t[::1] data, uint32_t value=0):
    """``zlib.crc32(data, value)``, by carry-less multiplication (see ``_crc32.h``)."""
    cdef uint32_t crc = value
    if data.shape[0]:
        with nogil:
            crc = skcrf_crc32(value, &data[0], data.shape[0])
    return crc


#: ``crc32(data, value=0)``: :func:`zlib.crc32`'s result, computed with
#: PCLMULQDQ where the CPU has it (x86-64, GCC builds), else zlib's function.
crc32 = _clmul_crc32 if skcrf_crc32_init() else zlib.crc32

ctypedef fused index_t:
    int32_t
    int64_t

cdef enum:
    _PTR_NOT_RISING = 1
    _COLUMN_OUT_OF_RANGE = 2
    _COLUMNS_NOT_INCREASING = 3
    _TRANSITIONS_NOT_INCREASING = 4
    _STATE_WEIGHTS_NOT_FINITE = 5
    _TRANSITION_WEIGHTS_NOT_FINITE = 6

#: What :func:`csr_problem` finds (0: nothing).
PTR_NOT_RISING = _PTR_NOT_RISING
COLUMN_OUT_OF_RANGE = _COLUMN_OUT_OF_RANGE
COLUMNS_NOT_INCREASING = _COLUMNS_NOT_INCREASING
#: What :func:`model_arrays_problem` finds besides those.
TRANSITIONS_NOT_INCREASING = _TRANSITIONS_NOT_INCREASING
STATE_WEIGHTS_NOT_FINITE = _STATE_WEIGHTS_NOT_FINITE
TRANSITION_WEIGHTS_NOT_FINITE = _TRANSITION_WEIGHTS_NOT_FINITE


cdef int _csr_problem(const int64_t[::1] ptr, const index_t[::1] columns,
                      int64_t n_columns) noexcept nogil:
    # Branch-free passes over the columns (a row holds a label or two: a
    # loop per row would cost more than its columns): a column not above
    # its predecessor is allowed only where a row starts.
    cdef Py_ssize_t n_rows = ptr.shape[0] - 1, n = columns.shape[0], row, k
    cdef Py_ssize_t falls = 0, falls_at_starts = 0
    cdef int64_t low = 0, high = 0
    cdef bint rising = True
    if n_rows < 0 or ptr[0] != 0 or ptr[n_rows] != n:
        return _PTR_NOT_RISING
    for row in range(n_rows):
        rising &= ptr[row + 1] >= ptr[row]
    if not rising:
        return _PTR_NOT_RISING
    if n == 0:
        return 0
    low = high = columns[0]
    for k in range(1, n):
        low = min(low, <int64_t> columns[k])
        high = max(high, <int64_t> columns[k])
        falls += columns[k] <= columns[k - 1]
    if low < 0 or high >= n_columns:
        return _COLUMN_OUT_OF_RANGE
    for row in range(n_rows):
        # (a row's start is its columns' first only when it has columns;
        # rows with columns start at distinct positions)
        k = ptr[row]
        if k > 0 and ptr[row + 1] > k:
            falls_at_starts += columns[k] <= columns[k - 1]
    if falls != falls_at_starts:
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


cdef inline bint _finite(const double[::1] values) noexcept nogil:
    cdef Py_ssize_t k
    cdef bint finite = True
    for k in range(values.shape[0]):
        finite &= isfinite(values[k]) != 0  # (no early exit: the loop vectorizes)
    return finite


def model_arrays_problem(const int64_t[::1] state_ptr, const index_t[::1] state_labels,
                         int64_t n_labels, const int64_t[::1] transition_index,
                         const double[::1] state_weights, const double[::1] transition_weights):
    """What is wrong with a model's arrays, 0 if nothing; one call for opening a model.

    The first problem in this order: :func:`csr_problem`'s codes for the
    state features (columns: labels in ``[0, n_labels)``), then
    ``TRANSITIONS_NOT_INCREASING`` (the transition indices are not strictly
    increasing in ``[0, n_labels ** 2)``), ``STATE_WEIGHTS_NOT_FINITE``,
    ``TRANSITION_WEIGHTS_NOT_FINITE``.

    >>> import numpy as np
    >>> ptr, labels = np.array([0, 1, 2]), np.array([1, 0], dtype=np.int32)
    >>> model_arrays_problem(ptr, labels, 2, np.array([0, 3]), np.ones(2), np.ones(2))
    0
    >>> model_arrays_problem(ptr, labels, 2, np.array([3, 0]), np.ones(2), np.ones(2))
    4
    """
    cdef int problem
    cdef Py_ssize_t k
    cdef int64_t size = n_labels * n_labels
    with nogil:
        problem = _csr_problem(state_ptr, state_labels, n_labels)
        if not problem:
            for k in range(transition_index.shape[0]):
                if (transition_index[k] < 0 or transition_index[k] >= size
                        or (k and transition_index[k] <= transition_index[k - 1])):
                    problem = _TRANSITIONS_NOT_INCREASING
                    break
        if not problem and not _finite(state_weights):
            problem = _STATE_WEIGHTS_NOT_FINITE
        if not problem and not _finite(transition_weights):
            problem = _TRANSITION_WEIGHTS_NOT_FINITE
    return problem


def all_finite(const double[::1] values):
    """Whether every value is finite (no NaN, no infinity).

    >>> import numpy as np
    >>> all_finite(np.array([0.5, -1.0])), all_finite(np.array([1.0, np.nan]))
    (True, False)
    """
    cdef bint finite
    with nogil:
        finite = _finite(values)
    return finite
