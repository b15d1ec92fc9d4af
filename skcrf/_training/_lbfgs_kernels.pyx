"""The vector passes of L-BFGS / OWL-QN, compiled and fused.

Done by numpy, each step of the optimizer is its own pass over long
vectors. Here one pass does what several did: the two-loop recursion
(:func:`skcrf._training._lbfgs.two_loop_direction`) updates the direction
by one history pair and takes the next dot product with the updated values
(four vector reads and writes per pair instead of seven), and projects
OWL-QN's direction in its last pass; :func:`owlqn_trial` makes a line
search's trial point with its projection, L1 norm and decrease term;
:func:`lbfgs_pair` makes the new pair, the pseudo-gradient and the dot
products after a step. Each element gets the same arithmetic as numpy's (a
product and a sum, never fused on the baseline build); dot products are
summed in another order, so their last bits may differ from numpy's.
"""

import numpy as np

from libc.math cimport fabs


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


cdef inline void _update_project(
    double* d, double scale, double a, const double* v, const double* g, Py_ssize_t n
) noexcept nogil:
    """``d = scale * d + a * v``, then 0 where ``d`` does not move against ``g``."""
    cdef Py_ssize_t i
    for i in range(n):
        d[i] = scale * d[i] + a * v[i]
        if d[i] * g[i] >= 0.0:
            d[i] = 0.0


def two_loop(
    const double[::1] grad, const double[:, ::1] s_mem, const double[:, ::1] y_mem,
    const double[::1] ys_mem, const Py_ssize_t[::1] slots, double gamma, bint owlqn=False,
):
    """``-H grad`` by the two-loop recursion over the pairs ``slots`` (newest
    first, at least one); ``gamma * I`` is the initial inverse Hessian.

    Returns the direction, a new array; with ``owlqn``, 0 where it does not
    move against ``grad`` (``d * grad >= 0``: OWL-QN keeps the orthant).
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
            if i == 0 and owlqn:
                _update_project(&d[0], gamma if k == 1 else 1.0, alpha[0] - beta,
                                &s_mem[j, 0], &grad[0], n)
            else:
                dot = _update_dot(&d[0], gamma if i == k - 1 else 1.0, alpha[i] - beta,
                                  &s_mem[j, 0], &y_mem[slots[i - 1], 0] if i > 0 else NULL, n)
    return out


def owlqn_trial(
    const double[::1] x0, const double[::1] pg0, const double[::1] d, double step,
):
    """OWL-QN's trial point, ``x0 + step * d`` projected onto the orthant.

    The orthant is ``x0``'s signs, and ``-pg0``'s where ``x0`` is 0: a
    coordinate with ``x * orthant < 0`` becomes 0. Returns ``(x, |x|_1,
    (x - x0) . pg0)``; ``x`` is a new array.
    """
    cdef Py_ssize_t n = x0.shape[0], i
    if pg0.shape[0] != n or d.shape[0] != n:
        raise ValueError("x0, pg0 and d must have the same length")
    out = np.empty(n)
    cdef double[::1] x = out
    cdef double l1 = 0.0, decrease = 0.0, xi, orthant
    with nogil:
        for i in range(n):
            xi = d[i] * step + x0[i]
            orthant = x0[i] if x0[i] != 0.0 else -pg0[i]
            if xi * orthant < 0.0:
                xi = 0.0
            x[i] = xi
            l1 += fabs(xi)
            decrease += (xi - x0[i]) * pg0[i]
    return out, l1, decrease


def lbfgs_pair(
    const double[::1] x, const double[::1] x_prev, g_array,
    double[::1] s, double[::1] y, double c1,
):
    """After an accepted step: the pair ``s = x - x_prev``, ``y += g`` (``y``
    holds ``-g_prev``), OWL-QN's pseudo-gradient (``c1 > 0``) and the dot
    products the iteration needs.

    Returns ``(pg, x . x, pg . pg, y . s, y . y)``; ``pg`` is ``g_array``
    itself for ``c1 == 0``, else a new array (see
    :func:`skcrf._training._lbfgs.pseudo_gradient`).
    """
    cdef const double[::1] g = g_array
    cdef Py_ssize_t n = x.shape[0], i
    if x_prev.shape[0] != n or g.shape[0] != n or s.shape[0] != n or y.shape[0] != n:
        raise ValueError("x, x_prev, g, s and y must have the same length")
    pg_array = np.empty(n) if c1 > 0.0 else g_array
    cdef double[::1] pg = pg_array if c1 > 0.0 else s  # s: never written through pg
    cdef double xx = 0.0, pp = 0.0, ys = 0.0, yy = 0.0, p, clipped
    with nogil:
        for i in range(n):
            s[i] = x[i] - x_prev[i]
            y[i] = y[i] + g[i]
            if c1 > 0.0:
                if x[i] > 0.0:
                    p = c1 + g[i]
                elif x[i] < 0.0:
                    p = -c1 + g[i]
                elif x[i] == 0.0:
                    clipped = g[i]  # g - clip(g, -c1, c1): 0 between the two
                    if clipped < -c1:
                        clipped = -c1
                    elif clipped > c1:
                        clipped = c1
                    p = g[i] - clipped
                else:  # NaN
                    p = x[i] + g[i]
                pg[i] = p
            else:
                p = g[i]
            xx += x[i] * x[i]
            pp += p * p
            ys += y[i] * s[i]
            yy += y[i] * y[i]
    return pg_array, xx, pp, ys, yy
