"""The vector passes of L-BFGS / OWL-QN, compiled and fused.

Done by numpy, each step of the optimizer is its own pass over long
vectors. Here one pass does what several did: the two-loop recursion
(:func:`skcrf._training._lbfgs.two_loop_direction`) updates the direction
by one history pair and takes the next dot product with the updated values
(four vector reads and writes per pair instead of seven), and projects
OWL-QN's direction in its last pass; :func:`owlqn_trial` makes a line
search's trial point with its projection, L1 norm and decrease term;
:func:`lbfgs_pair` makes the new pair, the pseudo-gradient, the dot
products and the count of nonzero weights after a step; :func:`search_start`
saves a line search's start and :func:`all_finite` checks a gradient, so
none of the optimizer's passes over a vector is left to one thread. Each
element gets the same arithmetic as numpy's (a product and a sum, never
fused on the baseline build); dot products are summed in another order, so
their last bits may differ from numpy's.

Threads: a vector is cut into blocks of :data:`BLOCK` elements; a sum is the
sum of its blocks' sums, added in block order, whatever the number of
threads (``n_threads``) that computed them, so that any number of threads
gives the same bits. A vector of one block is summed as before blocks
existed. Each pass hands contiguous runs of blocks to the threads of
:func:`~skcrf._utils._threads.thread_map` (no task waits for another).
"""

import numpy as np

from libc.math cimport fabs, isfinite
from libc.stdint cimport int64_t

from skcrf._utils._threads import thread_map

cdef enum:
    _BLOCK = 1 << 16

#: Elements per block of the blocked sums (and the least work of a thread).
BLOCK = _BLOCK


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


def block_runs(Py_ssize_t n, Py_ssize_t n_threads):
    """``(n_blocks, runs)``: the blocks of ``n`` elements, and the runs of
    blocks ``(first, stop)`` of each thread (at most ``n_threads``)."""
    cdef Py_ssize_t n_blocks = max(1, (n + _BLOCK - 1) // _BLOCK)
    cdef Py_ssize_t t = max(1, min(n_threads, n_blocks)), k
    return n_blocks, [(k * n_blocks // t, (k + 1) * n_blocks // t) for k in range(t)]


def _each_run(work, runs):
    """``work(first, stop)`` for each run, on as many threads."""
    if len(runs) == 1:
        work(*runs[0])
    else:
        thread_map(lambda run: work(*run), len(runs), runs)


cdef inline double _ordered_sum(const double* partials, Py_ssize_t n_blocks) noexcept nogil:
    cdef double total = partials[0]
    cdef Py_ssize_t b
    for b in range(1, n_blocks):
        total += partials[b]
    return total


cdef enum:
    _NEGATE_DOT = 0
    _UPDATE_DOT = 1
    _UPDATE_PROJECT = 2


cdef class _Pass:
    """A pass over runs of blocks: ``pass_(first, stop)`` runs its blocks without the GIL."""

    def __call__(self, Py_ssize_t first, Py_ssize_t stop):
        with nogil:
            self.run(first, stop)

    cdef void run(self, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
        pass


cdef class _DirectionPass(_Pass):
    """One pass of the two-loop recursion over runs of blocks (see two_loop)."""
    cdef double* d
    cdef const double* g
    cdef const double* v
    cdef const double* u
    cdef double* partials
    cdef double scale, a
    cdef Py_ssize_t n
    cdef int kind

    cdef void run(self, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
        cdef Py_ssize_t b, lo, m
        for b in range(first, stop):
            lo = b * _BLOCK
            m = min(<Py_ssize_t> _BLOCK, self.n - lo)
            if self.kind == _NEGATE_DOT:
                self.partials[b] = _negate_dot(self.g + lo, self.d + lo, self.u + lo, m)
            elif self.kind == _UPDATE_DOT:
                self.partials[b] = _update_dot(self.d + lo, self.scale, self.a, self.v + lo,
                                               self.u + lo if self.u != NULL else NULL, m)
            else:
                _update_project(self.d + lo, self.scale, self.a, self.v + lo, self.g + lo, m)


def two_loop(
    const double[::1] grad, const double[:, ::1] s_mem, const double[:, ::1] y_mem,
    const double[::1] ys_mem, const Py_ssize_t[::1] slots, double gamma, bint owlqn=False,
    Py_ssize_t n_threads=1,
):
    """``-H grad`` by the two-loop recursion over the pairs ``slots`` (newest
    first, at least one); ``gamma * I`` is the initial inverse Hessian.

    Returns the direction, a new array; with ``owlqn``, 0 where it does not
    move against ``grad`` (``d * grad >= 0``: OWL-QN keeps the orthant).
    ``n_threads`` threads make each pass (the same bits with any number).
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
    n_blocks, runs = block_runs(n, n_threads)
    cdef double[::1] partials = np.empty(n_blocks)
    cdef double dot, beta
    cdef _DirectionPass step = _DirectionPass()
    step.d, step.g, step.n, step.partials = &d[0], &grad[0], n, &partials[0]

    # first loop, newest pair first: alpha_i = s_i . d / ys_i, d -= alpha_i y_i
    step.kind, step.u = _NEGATE_DOT, &s_mem[slots[0], 0]
    _each_run(step, runs)
    dot = _ordered_sum(&partials[0], n_blocks)
    for i in range(k):
        j = slots[i]
        alpha[i] = dot / ys_mem[j]
        # the next dot: s of the next pair, or y of the oldest for the
        # second loop (taken before d is scaled by gamma)
        step.kind, step.scale, step.a, step.v = _UPDATE_DOT, 1.0, -alpha[i], &y_mem[j, 0]
        step.u = &s_mem[slots[i + 1], 0] if i + 1 < k else &y_mem[j, 0]
        _each_run(step, runs)
        dot = _ordered_sum(&partials[0], n_blocks)
    # second loop, oldest pair first: beta = y_i . d / ys_i,
    # d += (alpha_i - beta) s_i; the first pass also scales d by gamma
    for i in range(k - 1, -1, -1):
        j = slots[i]
        if i == k - 1:
            beta = gamma * dot / ys_mem[j]
        else:
            beta = dot / ys_mem[j]
        step.v = &s_mem[j, 0]
        if i == 0 and owlqn:
            step.kind, step.a = _UPDATE_PROJECT, alpha[0] - beta
            step.scale = gamma if k == 1 else 1.0
            _each_run(step, runs)
        else:
            step.kind, step.a = _UPDATE_DOT, alpha[i] - beta
            step.scale = gamma if i == k - 1 else 1.0
            step.u = &y_mem[slots[i - 1], 0] if i > 0 else NULL
            _each_run(step, runs)
            dot = _ordered_sum(&partials[0], n_blocks)
    return out


cdef class _TrialPass(_Pass):
    """OWL-QN's trial point over runs of blocks (see owlqn_trial)."""
    cdef const double* x0
    cdef const double* pg0
    cdef const double* d
    cdef double* x
    cdef double* partials   # 2 per block: |x|_1, (x - x0) . pg0
    cdef double step
    cdef Py_ssize_t n, n_blocks

    cdef void run(self, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
        cdef Py_ssize_t b, i
        cdef double l1, decrease, xi, orthant
        for b in range(first, stop):
            l1 = 0.0
            decrease = 0.0
            for i in range(b * _BLOCK, min(self.n, (b + 1) * _BLOCK)):
                xi = self.d[i] * self.step + self.x0[i]
                orthant = self.x0[i] if self.x0[i] != 0.0 else -self.pg0[i]
                if xi * orthant < 0.0:
                    xi = 0.0
                self.x[i] = xi
                l1 += fabs(xi)
                decrease += (xi - self.x0[i]) * self.pg0[i]
            self.partials[b] = l1
            self.partials[self.n_blocks + b] = decrease


def owlqn_trial(
    const double[::1] x0, const double[::1] pg0, const double[::1] d, double step,
    Py_ssize_t n_threads=1,
):
    """OWL-QN's trial point, ``x0 + step * d`` projected onto the orthant.

    The orthant is ``x0``'s signs, and ``-pg0``'s where ``x0`` is 0: a
    coordinate with ``x * orthant < 0`` becomes 0. Returns ``(x, |x|_1,
    (x - x0) . pg0)``; ``x`` is a new array.
    """
    cdef Py_ssize_t n = x0.shape[0]
    if pg0.shape[0] != n or d.shape[0] != n:
        raise ValueError("x0, pg0 and d must have the same length")
    out = np.empty(n)
    cdef double[::1] x = out
    n_blocks, runs = block_runs(n, n_threads)
    cdef double[::1] partials = np.empty(2 * n_blocks)
    cdef _TrialPass trial = _TrialPass()
    trial.x0, trial.pg0, trial.d, trial.x = &x0[0], &pg0[0], &d[0], &x[0]
    trial.partials, trial.step, trial.n, trial.n_blocks = &partials[0], step, n, n_blocks
    _each_run(trial, runs)
    return (out, _ordered_sum(&partials[0], n_blocks),
            _ordered_sum(&partials[n_blocks], n_blocks))


cdef class _PairPass(_Pass):
    """The new pair and its dot products over runs of blocks (see lbfgs_pair)."""
    cdef const double* x
    cdef const double* x_prev
    cdef const double* g
    cdef double* s
    cdef double* y
    cdef double* pg
    cdef double* partials   # 4 per block: x . x, pg . pg, y . s, y . y
    cdef int64_t* nonzero   # per block: components of x that are not 0
    cdef double c1
    cdef Py_ssize_t n, n_blocks

    cdef void run(self, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
        cdef Py_ssize_t b, i
        cdef int64_t nz
        cdef double xx, pp, ys, yy, p, clipped, c1 = self.c1
        cdef const double* x = self.x
        cdef const double* g = self.g
        cdef double* s = self.s
        cdef double* y = self.y
        for b in range(first, stop):
            xx = 0.0
            pp = 0.0
            ys = 0.0
            yy = 0.0
            nz = 0
            for i in range(b * _BLOCK, min(self.n, (b + 1) * _BLOCK)):
                s[i] = x[i] - self.x_prev[i]
                nz += x[i] != 0.0
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
                    self.pg[i] = p
                else:
                    p = g[i]
                xx += x[i] * x[i]
                pp += p * p
                ys += y[i] * s[i]
                yy += y[i] * y[i]
            self.partials[b] = xx
            self.partials[self.n_blocks + b] = pp
            self.partials[2 * self.n_blocks + b] = ys
            self.partials[3 * self.n_blocks + b] = yy
            self.nonzero[b] = nz


def lbfgs_pair(
    const double[::1] x, const double[::1] x_prev, g_array,
    double[::1] s, double[::1] y, double c1, Py_ssize_t n_threads=1,
):
    """After an accepted step: the pair ``s = x - x_prev``, ``y += g`` (``y``
    holds ``-g_prev``), OWL-QN's pseudo-gradient (``c1 > 0``), the dot
    products the iteration needs and the number of nonzero components of
    ``x`` (the training log's active features).

    Returns ``(pg, x . x, pg . pg, y . s, y . y, n_nonzero)``; ``pg`` is
    ``g_array`` itself for ``c1 == 0``, else a new array (see
    :func:`skcrf._training._lbfgs.pseudo_gradient`).
    """
    cdef const double[::1] g = g_array
    cdef Py_ssize_t n = x.shape[0], k
    if x_prev.shape[0] != n or g.shape[0] != n or s.shape[0] != n or y.shape[0] != n:
        raise ValueError("x, x_prev, g, s and y must have the same length")
    pg_array = np.empty(n) if c1 > 0.0 else g_array
    cdef double[::1] pg = pg_array if c1 > 0.0 else s  # s: never written through pg
    n_blocks, runs = block_runs(n, n_threads)
    cdef double[::1] partials = np.empty(4 * n_blocks)
    nonzero = np.empty(n_blocks, dtype=np.int64)
    cdef int64_t[::1] nonzero_view = nonzero
    cdef _PairPass pair = _PairPass()
    pair.x, pair.x_prev, pair.g, pair.s, pair.y = &x[0], &x_prev[0], &g[0], &s[0], &y[0]
    pair.pg, pair.partials, pair.nonzero, pair.c1, pair.n, pair.n_blocks = (
        &pg[0], &partials[0], &nonzero_view[0], c1, n, n_blocks)
    _each_run(pair, runs)
    sums = [_ordered_sum(&partials[k * n_blocks], n_blocks) for k in range(4)]
    return (pg_array, *sums, int(nonzero.sum()))


cdef class _StartPass(_Pass):
    """``x_prev = x`` and ``y = -g`` over runs of blocks (see search_start)."""
    cdef const double* x
    cdef const double* g
    cdef double* x_prev
    cdef double* y
    cdef Py_ssize_t n

    cdef void run(self, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(first * _BLOCK, min(self.n, stop * _BLOCK)):
            self.x_prev[i] = self.x[i]
            self.y[i] = -self.g[i]


def search_start(
    const double[::1] x, const double[::1] g, double[::1] x_prev, double[::1] y,
    Py_ssize_t n_threads=1,
):
    """Before a line search: ``x_prev = x`` and ``y = -g`` (the history slot
    the next pair is made in), in one pass on ``n_threads``."""
    cdef Py_ssize_t n = x.shape[0]
    if g.shape[0] != n or x_prev.shape[0] != n or y.shape[0] != n:
        raise ValueError("x, g, x_prev and y must have the same length")
    if n == 0:
        return
    _, runs = block_runs(n, n_threads)
    cdef _StartPass start = _StartPass()
    start.x, start.g, start.x_prev, start.y, start.n = &x[0], &g[0], &x_prev[0], &y[0], n
    _each_run(start, runs)


cdef class _FinitePass(_Pass):
    """Whether each block's values are all finite (see all_finite)."""
    cdef const double* values
    cdef unsigned char* finite
    cdef Py_ssize_t n

    cdef void run(self, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
        cdef Py_ssize_t b, i
        cdef bint finite
        for b in range(first, stop):
            finite = True
            for i in range(b * _BLOCK, min(self.n, (b + 1) * _BLOCK)):
                finite &= isfinite(self.values[i]) != 0  # (no early exit: the loop vectorizes)
            self.finite[b] = finite


def all_finite(const double[::1] values, Py_ssize_t n_threads=1):
    """Whether every value is finite (no NaN, no infinity), on ``n_threads``.

    :func:`skcrf._utils._array_checks.all_finite` in the passes' blocks, so
    that a gradient's check shares out as the optimizer's other passes do.
    """
    cdef Py_ssize_t n = values.shape[0]
    if n == 0:
        return True
    n_blocks, runs = block_runs(n, n_threads)
    finite = np.empty(n_blocks, dtype=np.uint8)
    cdef unsigned char[::1] finite_view = finite
    cdef _FinitePass check = _FinitePass()
    check.values, check.finite, check.n = &values[0], &finite_view[0], n
    _each_run(check, runs)
    return bool(finite.all())


cdef class _AxpyPass(_Pass):
    """``x = d * step + x0`` over runs of blocks (see trial_point)."""
    cdef const double* x0
    cdef const double* d
    cdef double* x
    cdef double step
    cdef Py_ssize_t n

    cdef void run(self, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
        cdef Py_ssize_t i
        for i in range(first * _BLOCK, min(self.n, stop * _BLOCK)):
            self.x[i] = self.d[i] * self.step + self.x0[i]


def trial_point(const double[::1] x0, double step, const double[::1] d, Py_ssize_t n_threads=1):
    """``x0 + step * d``, a new array (numpy's arithmetic: ``(d * step) + x0``)."""
    cdef Py_ssize_t n = x0.shape[0]
    if d.shape[0] != n:
        raise ValueError("x0 and d must have the same length")
    out = np.empty(n)
    cdef double[::1] x = out
    _, runs = block_runs(n, n_threads)
    cdef _AxpyPass axpy = _AxpyPass()
    axpy.x0, axpy.d, axpy.x, axpy.step, axpy.n = &x0[0], &d[0], &x[0], step, n
    _each_run(axpy, runs)
    return out


cdef class _DotPass(_Pass):
    """Blocks' dot products (see dot)."""
    cdef const double* a
    cdef const double* b
    cdef double* partials
    cdef Py_ssize_t n

    cdef void run(self, Py_ssize_t first, Py_ssize_t stop) noexcept nogil:
        cdef Py_ssize_t k, lo, i, m, m4
        cdef double s0, s1, s2, s3
        for k in range(first, stop):
            lo = k * _BLOCK
            m = min(<Py_ssize_t> _BLOCK, self.n - lo)
            m4 = m - m % 4
            s0 = s1 = s2 = s3 = 0.0
            for i in range(lo, lo + m4, 4):
                s0 += self.a[i] * self.b[i]
                s1 += self.a[i + 1] * self.b[i + 1]
                s2 += self.a[i + 2] * self.b[i + 2]
                s3 += self.a[i + 3] * self.b[i + 3]
            for i in range(lo + m4, lo + m):
                s0 += self.a[i] * self.b[i]
            self.partials[k] = (s0 + s1) + (s2 + s3)


def dot(const double[::1] a, const double[::1] b, Py_ssize_t n_threads=1):
    """``a . b`` as the sum of the blocks' dot products (the same bits on any threads)."""
    cdef Py_ssize_t n = a.shape[0]
    if b.shape[0] != n:
        raise ValueError("a and b must have the same length")
    if n == 0:
        return 0.0
    n_blocks, runs = block_runs(n, n_threads)
    cdef double[::1] partials = np.empty(n_blocks)
    cdef _DotPass pass_ = _DotPass()
    pass_.a, pass_.b, pass_.partials, pass_.n = &a[0], &b[0], &partials[0], n
    _each_run(pass_, runs)
    return _ordered_sum(&partials[0], n_blocks)
