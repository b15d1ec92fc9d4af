"""The L-BFGS two-loop recursion in fused vector passes.

The recursion (:func:`skcrf._training._lbfgs.two_loop_direction`) takes, per
history pair, a dot product with the direction and then updates it. Done
by numpy, each is its own pass over long vectors (and the update goes
through a scratch vector): seven vector reads and writes per pair. Here one
pass updates the direction by one pair and takes the next dot product with
the updated values: four. Each element gets the same arithmetic as numpy's
(a product and a sum, never fused on the baseline build); the dot products
are summed in four interleaved partial sums, so their last bits may differ
from numpy's.
"""

import numpy as np


cdef inline double _negate_dot(
    const double* g, double* d, const double* u, Py_ssize_t n
) noexcept nogil:
    """``d = -g``, then ``u . d``."""
    cdef Py_ssize_t i, n4 = n - n % 4
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    for i in range(0, n4, 4):
        d[i] = -g[i]
        d[i + 1] = -g[i + 1]
        d[i + 2] = -g[i + 2]
        d[i + 3] = -g[i + 3]
        s0 += u[i] * d[i]
        s1 += u[i + 1] * d[i + 1]
        s2 += u[i + 2] * d[i + 2]
        s3 += u[i + 3] * d[i + 3]
    for i in range(n4, n):
        d[i] = -g[i]
        s0 += u[i] * d[i]
    return (s0 + s1) + (s2 + s3)


cdef inline double _update_dot(
    double* d, double scale, double a, const double* v, const double* u, Py_ssize_t n
) noexcept nogil:
    """``d = scale * d + a * v``, then ``u . d`` (not taken for ``u`` NULL: 0)."""
    cdef Py_ssize_t i, n4 = n - n % 4
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    if u == NULL:
        for i in range(n):
            d[i] = scale * d[i] + a * v[i]
        return 0.0
    for i in range(0, n4, 4):
        d[i] = scale * d[i] + a * v[i]
        d[i + 1] = scale * d[i + 1] + a * v[i + 1]
        d[i + 2] = scale * d[i + 2] + a * v[i + 2]
        d[i + 3] = scale * d[i + 3] + a * v[i + 3]
        s0 += u[i] * d[i]
        s1 += u[i + 1] * d[i + 1]
        s2 += u[i + 2] * d[i + 2]
        s3 += u[i + 3] * d[i + 3]
    for i in range(n4, n):
        d[i] = scale * d[i] + a * v[i]
        s0 += u[i] * d[i]
    return (s0 + s1) + (s2 + s3)


def two_loop(
    const double[::1] grad, const double[:, ::1] s_mem, const double[:, ::1] y_mem,
    const double[::1] ys_mem, const Py_ssize_t[::1] slots, double gamma,
):
    """``-H grad`` by the two-loop recursion over the pairs ``slots`` (newest
    first, at least one); ``gamma * I`` is the initial inverse Hessian.

    Returns the direction, a new array.
    """
    cdef Py_ssize_t n = grad.shape[0], k = slots.shape[0], i, j
    if k == 0 or s_mem.shape[1] != n or y_mem.shape[1] != n:
        raise ValueError("two_loop needs at least one pair, of the gradient's length")
    for i in range(k):
        if not 0 <= slots[i] < min(s_mem.shape[0], y_mem.shape[0], ys_mem.shape[0]):
            raise ValueError("slot out of range")
    out = np.empty(n)
    cdef double[::1] d = out
    cdef double[::1] alpha = np.empty(k)
    cdef double dot, beta
    with nogil:
        # first loop, newest pair first: alpha_i = s_i . d / ys_i, d -= alpha_i y_i
        j = slots[0]
        dot = _negate_dot(&grad[0], &d[0], &s_mem[j, 0], n)
        for i in range(k):
            j = slots[i]
            alpha[i] = dot / ys_mem[j]
            # the next dot: s of the next pair, or y of the oldest for the
            # second loop (taken before d is scaled by gamma)
            dot = _update_dot(&d[0], 1.0, -alpha[i], &y_mem[j, 0],
                              &s_mem[slots[i + 1], 0] if i + 1 < k else &y_mem[j, 0], n)
        # second loop, oldest pair first: beta = y_i . d / ys_i,
        # d += (alpha_i - beta) s_i; the first pass also scales d by gamma
        for i in range(k - 1, -1, -1):
            j = slots[i]
            if i == k - 1:
                beta = gamma * dot / ys_mem[j]
            else:
                beta = dot / ys_mem[j]
            dot = _update_dot(&d[0], gamma if i == k - 1 else 1.0, alpha[i] - beta,
                              &s_mem[j, 0], &y_mem[slots[i - 1], 0] if i > 0 else NULL, n)
    return out
