"""Compiled epochs of the online trainers: SGD (l2sgd), the averaged
perceptron (ap), passive-aggressive (pa) and AROW (arow).

One call runs one pass over the sequences in a given order, without the GIL
and without Python per sequence; :mod:`skcrf._training._online_train` shuffles, keeps
the state between epochs, averages and tests the stopping rules.

Conventions
-----------
- Token features are CSR rows (``indptr``, ``ids``, ``values``) in flat
  order; sequence ``s`` holds the rows ``starts[s]:starts[s] + lengths[s]``
  (every sequence here has at least one token). A row may hold the same id
  twice: the values add.
- State features are CSR by attribute (``state_ptr``, ``state_labels``,
  labels increasing within an attribute), transition features are the flat
  indices ``transition_index`` (``i * L + j``: label ``i`` then ``j``), and
  the weight vector is ``w = [state weights, transition weights]``
  (:mod:`skcrf._model`). A pair with no feature scores 0 and is never updated.
- Per sequence, the emission scores of every label are summed over the
  features that exist (a ``(length, L)`` buffer), the transition scores are
  held in a dense ``(L, L)`` buffer (0 where no feature exists).
- Viterbi is :func:`skcrf._inference._viterbi.viterbi_sequence` (ties go to the lowest
  label, as in CRFsuite). Its pruning bound depends on the spread of the
  transition scores, refreshed whenever an update touches a transition.
- An update by the difference ``F(x, y) - F(x, y_viterbi)`` is gathered
  sparsely (a dense accumulator, the list of touched features, a mark per
  feature): only tokens whose two labels differ (and transitions whose label
  pairs differ) contribute, the others cancel exactly.
- l2sgd keeps the weights as ``decay * w`` (the L2 shrinkage of every step is
  one multiplication of ``decay``; an update by ``g`` adds ``g / decay``);
  the forward-backward is scaled (emissions shifted by their row maximum,
  transitions by their maximum, each forward row normalized), which neither
  overflows nor underflows while the spread of the transition scores stays
  below ``spread_limit``; beyond it a log-domain pass is used.
"""

from libc.math cimport exp, log, pow, sqrt, fabs, isfinite, INFINITY, NAN
from libc.string cimport memset

import numpy as np

from skcrf._utils._simd import avx2_disabled

cimport numpy as cnp

from skcrf._utils._typedefs cimport intp
from skcrf._inference._viterbi cimport (
    PRUNE_RELATIVE_MARGIN,
    ViterbiWork,
    viterbi_sequence,
    viterbi_work_free,
    viterbi_work_init,
)

cnp.import_array()


# exp(x) for x <= 0, vectorized (shared with the other kernels).
cdef extern from "_vector_exp.h":
    void skcrf_exp_nonpositive(double* a, Py_ssize_t n) noexcept nogil

# The scaled forward and backward recursions (AVX2 or baseline, same bits).
cdef extern from "_online_fb.h":
    double skcrf_l2sgd_fb(Py_ssize_t T, Py_ssize_t L, double log_z, const double* et,
                          const double* ett, const double* psi, double* alpha,
                          double* beta, double* scale, double* tmp,
                          double* prs) noexcept nogil

# AVX2 or baseline code, chosen once at import (SKCRF_DISABLE_AVX2=1: baseline)
cdef extern from "_simd.h":
    int skcrf_simd_init(int disable) noexcept

AVX2_PATH = bool(skcrf_simd_init(avx2_disabled()))

# Fold the l2sgd decay factor into the weights before it gets this small
# (it is exactly 0 when eta * lambda == 1, which would divide by zero).
cdef double _MIN_DECAY = 1e-9


cdef class OnlineProblem:
    """Training data, feature layout and work buffers of the online trainers.

    Parameters
    ----------
    indptr : ndarray of int64, shape (n_tokens + 1,)
    ids : ndarray of int32
    values : ndarray of float64
    starts : ndarray of int64, shape (n_sequences,)
        First token row of each sequence.
    lengths : ndarray of intp, shape (n_sequences,)
        Tokens of each sequence (all >= 1).
    labels : ndarray of intp, shape (n_tokens,)
        Label index of each token.
    state_ptr : ndarray of int64, shape (n_attributes + 1,)
    state_labels : ndarray of int32, shape (n_states,)
    transition_index : ndarray of int64, shape (n_transitions,)
    n_labels : int
    token_weights : ndarray of float64, shape (n_tokens,), optional
        Each token's weight (``sample_weight`` times ``class_weight``): the
        epochs then scale their updates (see each epoch). None: weights 1,
        the unweighted code path.
    """

    cdef const long long[::1] indptr
    cdef const int[::1] ids
    cdef const double[::1] values
    cdef const long long[::1] starts
    cdef const intp[::1] lengths
    cdef const intp[::1] labels
    cdef const long long[::1] state_ptr
    cdef const int[::1] state_labels
    cdef const long long[::1] transition_index
    cdef long long[::1] transition_feature  # L * L: feature index, or -1
    cdef readonly intp n_labels, n_states, n_features, n_sequences, max_length
    #: Spread of the transition scores above which l2sgd's forward-backward
    #: runs in the log domain (a negative value forces it: for tests).
    cdef public double spread_limit

    # work buffers
    cdef double[:, ::1] emissions
    cdef double[::1] transitions
    cdef intp[::1] path
    cdef double[::1] delta
    cdef double[::1] delta_w          # the difference with each token's weight
    cdef const double[::1] weights    # per token (weighted training)
    cdef readonly bint weighted
    cdef unsigned char[::1] used
    cdef long long[::1] actives
    cdef double[:, ::1] alpha
    cdef double[:, ::1] beta
    cdef double[:, ::1] psi
    cdef double[::1] scale
    cdef double[::1] exp_trans
    cdef double[::1] exp_trans_t
    cdef double[::1] pairs
    cdef double[::1] tmp
    cdef ViterbiWork work
    cdef bint has_work

    def __cinit__(self):
        self.has_work = False

    def __init__(self, indptr, ids, values, starts, lengths, labels, state_ptr,
                 state_labels, transition_index, n_labels, token_weights=None):
        cdef intp L = n_labels
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.ids = np.ascontiguousarray(ids, dtype=np.int32)
        self.values = np.ascontiguousarray(values, dtype=np.float64)
        self.starts = np.ascontiguousarray(starts, dtype=np.int64)
        self.lengths = np.ascontiguousarray(lengths, dtype=np.intp)
        self.labels = np.ascontiguousarray(labels, dtype=np.intp)
        self.state_ptr = np.ascontiguousarray(state_ptr, dtype=np.int64)
        self.state_labels = np.ascontiguousarray(state_labels, dtype=np.int32)
        self.transition_index = np.ascontiguousarray(transition_index, dtype=np.int64)
        self.n_labels = L
        self.n_states = len(state_labels)
        self.n_features = self.n_states + len(transition_index)
        self.n_sequences = len(lengths)
        self.spread_limit = 500.0
        lengths_np = np.asarray(self.lengths)
        if self.n_sequences and lengths_np.min() < 1:
            raise ValueError("every sequence must have at least one token")
        self.max_length = int(lengths_np.max()) if self.n_sequences else 1
        feature = np.full(L * L, -1, dtype=np.int64)
        feature[np.asarray(self.transition_index)] = self.n_states + np.arange(
            len(transition_index), dtype=np.int64)
        self.transition_feature = feature

        # Distinct features of one update: at most two per stored value of a
        # token and two transitions per token.
        starts_np = np.asarray(self.starts)
        indptr_np = np.asarray(self.indptr)
        if self.n_sequences:
            nnz = indptr_np[starts_np + lengths_np] - indptr_np[starts_np]
            capacity = int((2 * nnz + 2 * lengths_np).max())
        else:
            capacity = 1
        capacity = max(1, min(capacity, self.n_features))

        T = self.max_length
        self.emissions = np.zeros((T, max(L, 1)))
        self.transitions = np.zeros(max(L * L, 1))
        self.path = np.zeros(T, dtype=np.intp)
        self.delta = np.zeros(max(self.n_features, 1))
        self.weighted = token_weights is not None
        if self.weighted:
            self.weights = np.ascontiguousarray(token_weights, dtype=np.float64)
            if self.weights.shape[0] != self.labels.shape[0]:
                raise ValueError("token_weights needs one weight per token")
            self.delta_w = np.zeros(max(self.n_features, 1))
        else:
            self.weights = np.zeros(1)
            self.delta_w = np.zeros(1)
        self.used = np.zeros(max(self.n_features, 1), dtype=np.uint8)
        self.actives = np.zeros(capacity, dtype=np.int64)
        self.alpha = np.zeros((T, max(L, 1)))
        self.beta = np.zeros((T, max(L, 1)))
        self.psi = np.zeros((T, max(L, 1)))
        self.scale = np.zeros(T)
        self.exp_trans = np.zeros(max(L * L, 1))
        self.exp_trans_t = np.zeros(max(L * L, 1))
        self.pairs = np.zeros(max(L * L, 1))
        self.tmp = np.zeros(max(L, 1))
        if viterbi_work_init(&self.work, &self.transitions[0], L, T, False) != 0:
            raise MemoryError()
        self.has_work = True

    def __dealloc__(self):
        if self.has_work:
            viterbi_work_free(&self.work)
            self.has_work = False

    def sequence_lengths(self):
        """Lengths of the sequences, an ndarray of intp."""
        return np.asarray(self.lengths).copy()

    # -- per-sequence helpers -------------------------------------------------

    cdef void _emissions(self, intp start, intp length, const double* w,
                         double factor) noexcept nogil:
        """emissions[t, j] = factor * sum of w[k] * value over the features (a, j) of token t."""
        cdef intp L = self.n_labels, t, j
        cdef long long p, k, r
        cdef int a
        cdef double v
        cdef double* row
        for t in range(length):
            row = &self.emissions[t, 0]
            memset(row, 0, L * sizeof(double))
            r = start + t
            for p in range(self.indptr[r], self.indptr[r + 1]):
                v = self.values[p]
                if v == 0.0:  # an explicit zero (a False value) adds nothing
                    continue
                a = self.ids[p]
                for k in range(self.state_ptr[a], self.state_ptr[a + 1]):
                    row[self.state_labels[k]] += w[k] * v
            if factor != 1.0:
                for j in range(L):
                    row[j] *= factor

    cdef void _load_transitions(self, const double* w, double factor) noexcept nogil:
        """The dense transition scores: factor * weight, 0 where no feature."""
        cdef intp m, n_trans = self.transition_index.shape[0]
        memset(&self.transitions[0], 0, self.n_labels * self.n_labels * sizeof(double))
        for m in range(n_trans):
            self.transitions[self.transition_index[m]] = factor * w[self.n_states + m]

    cdef void _refresh_pruning(self) noexcept nogil:
        """Viterbi's pruning bound after the transition scores changed."""
        cdef intp i, n = self.n_labels * self.n_labels
        cdef double lo, hi, x, absmax
        if n == 0:
            return
        lo = self.transitions[0]
        hi = lo
        for i in range(1, n):
            x = self.transitions[i]
            lo = x if x < lo else lo
            hi = x if x > hi else hi
        if not (isfinite(lo) and isfinite(hi)):
            self.work.spread = NAN  # prunes nothing
            self.work.margin = NAN
            return
        absmax = fabs(lo) if fabs(lo) > fabs(hi) else fabs(hi)
        self.work.spread = hi - lo
        # the relative rounding margin of skcrf._inference._viterbi's pruning
        self.work.margin = PRUNE_RELATIVE_MARGIN * (1.0 + absmax)

    cdef inline long long _find(self, int a, intp label) noexcept nogil:
        """The feature (attribute a, label), or -1 (binary search: labels increase)."""
        cdef long long lo = self.state_ptr[a], hi = self.state_ptr[a + 1], mid
        cdef int x
        while lo < hi:
            mid = (lo + hi) >> 1
            x = self.state_labels[mid]
            if x < label:
                lo = mid + 1
            elif x > label:
                hi = mid
            else:
                return mid
        return -1

    cdef double _path_score(self, intp start, intp length, const intp* y) noexcept nogil:
        """Score of the labelling y from the emission and transition buffers."""
        cdef intp t, L = self.n_labels
        cdef double s = self.emissions[0, y[0]]
        for t in range(1, length):
            s += self.transitions[y[t - 1] * L + y[t]] + self.emissions[t, y[t]]
        return s

    cdef inline void _add_weighted(self, long long k, double v, double c,
                                   intp* n) noexcept nogil:
        """_add, and ``c * v`` into the weighted difference."""
        self._add(k, v, n)
        if k >= 0:
            self.delta_w[k] += c * v

    cdef inline void _add(self, long long k, double v, intp* n) noexcept nogil:
        if k < 0:
            return
        if not self.used[k]:
            self.used[k] = 1
            self.actives[n[0]] = k
            n[0] += 1
        self.delta[k] += v

    cdef intp _difference(self, intp start, intp length, const intp* y,
                          const intp* z) noexcept nogil:
        """delta = F(x, y) - F(x, z) on the touched features; returns their count.

        Weighted: ``delta_w`` gets each token's terms (its state features and
        the transition into it) times the token's weight.
        """
        cdef intp t, L = self.n_labels, n = 0
        cdef long long p, r
        cdef int a
        cdef double v, c
        if self.weighted:
            for t in range(length):
                r = start + t
                c = self.weights[r]
                if y[t] != z[t]:
                    for p in range(self.indptr[r], self.indptr[r + 1]):
                        a = self.ids[p]
                        v = self.values[p]
                        self._add_weighted(self._find(a, y[t]), v, c, &n)
                        self._add_weighted(self._find(a, z[t]), -v, c, &n)
                if t > 0 and (y[t] != z[t] or y[t - 1] != z[t - 1]):
                    self._add_weighted(self.transition_feature[y[t - 1] * L + y[t]], 1.0, c, &n)
                    self._add_weighted(self.transition_feature[z[t - 1] * L + z[t]], -1.0, c,
                                       &n)
            return n
        for t in range(length):
            if y[t] != z[t]:
                r = start + t
                for p in range(self.indptr[r], self.indptr[r + 1]):
                    a = self.ids[p]
                    v = self.values[p]
                    self._add(self._find(a, y[t]), v, &n)
                    self._add(self._find(a, z[t]), -v, &n)
            if t > 0 and (y[t] != z[t] or y[t - 1] != z[t - 1]):
                self._add(self.transition_feature[y[t - 1] * L + y[t]], 1.0, &n)
                self._add(self.transition_feature[z[t - 1] * L + z[t]], -1.0, &n)
        return n

    cdef void _clear(self, intp n) noexcept nogil:
        cdef intp i
        cdef long long k
        for i in range(n):
            k = self.actives[i]
            self.delta[k] = 0.0
            self.used[k] = 0
            if self.weighted:
                self.delta_w[k] = 0.0

    cdef void _sync_transitions(self, intp n, const double* w) noexcept nogil:
        """Copy the updated transition weights into the dense buffer."""
        cdef intp i
        cdef long long k
        cdef bint changed = False
        for i in range(n):
            k = self.actives[i]
            if k >= self.n_states:
                self.transitions[self.transition_index[k - self.n_states]] = w[k]
                changed = True
        if changed:
            self._refresh_pruning()

    cdef double _mean_weight(self, intp start, intp length) noexcept nogil:
        """Mean weight of a sequence's tokens (1 unweighted)."""
        cdef intp t
        cdef double total = 0.0
        if not self.weighted:
            return 1.0
        for t in range(length):
            total += self.weights[start + t]
        return total / length

    cdef inline intp _viterbi(self, intp start, intp length, double* score) noexcept nogil:
        """Best labelling into self.path; returns the number of wrong labels."""
        cdef intp t, d = 0
        score[0] = viterbi_sequence(&self.work, &self.emissions[0, 0], NULL, 0, length,
                                    &self.path[0])
        for t in range(length):
            d += self.path[t] != self.labels[start + t]
        return d

    # -- epochs ---------------------------------------------------------------

    def perceptron_epoch(self, const intp[::1] order, double[::1] w, double[::1] ws,
                         double counter):
        """One epoch of the averaged perceptron.

        For a wrongly labelled sequence: ``w += delta`` and ``ws += counter *
        delta`` with ``delta = F(x, y) - F(x, viterbi)``; ``counter`` goes up
        by one per sequence (the average is ``w - ws / counter``). Weighted:
        ``delta`` is the weighted difference (each token's terms times its
        weight: a sequence weight ``s`` scales the update by ``s``) and the
        loss term is multiplied by the mean weight of the sequence's tokens.

        Returns
        -------
        loss : float
            Sum over sequences of the fraction of wrong labels.
        counter : float
        """
        cdef intp i, q, s, length, n, d
        cdef long long start, k
        cdef double loss = 0.0, score, dv
        cdef const intp* y
        cdef double* wp = &w[0]
        with nogil:
            self._load_transitions(wp, 1.0)
            self._refresh_pruning()
            for i in range(order.shape[0]):
                s = order[i]
                start = self.starts[s]
                length = self.lengths[s]
                y = &self.labels[start]
                self._emissions(start, length, wp, 1.0)
                d = self._viterbi(start, length, &score)
                if d > 0:
                    n = self._difference(start, length, y, &self.path[0])
                    for q in range(n):
                        k = self.actives[q]
                        dv = self.delta_w[k] if self.weighted else self.delta[k]
                        w[k] += dv
                        ws[k] += counter * dv
                    self._sync_transitions(n, wp)
                    self._clear(n)
                    loss += d / <double>length * self._mean_weight(start, length)
                counter += 1.0
        return loss, counter

    def passive_aggressive_epoch(self, const intp[::1] order, double[::1] w, double[::1] ws,
                                 double counter, int pa_type, double c, bint error_sensitive):
        """One epoch of passive-aggressive training (PA, PA-I or PA-II).

        For a wrongly labelled sequence (``d`` wrong labels): ``cost =
        score(viterbi) - score(y) + (sqrt(d) if error_sensitive else 1)``,
        ``tau = cost / |delta|^2`` (type 0), ``min(c, cost / |delta|^2)``
        (type 1) or ``cost / (|delta|^2 + 1 / (2 c))`` (type 2); ``w += tau *
        delta``, ``ws += tau * counter * delta``. A zero ``delta`` (no feature
        tells the two labellings apart) updates nothing. Weighted: ``tau`` is
        computed as above and the update is ``tau`` times the weighted
        difference (a sequence weight ``s``: ``s * tau * delta``, so PA-I's
        step is capped at ``s * c``); the cost enters the loss times the mean
        token weight.

        Returns
        -------
        loss : float
            Sum of the costs.
        counter : float
        """
        cdef intp i, q, s, length, n, d
        cdef long long start, k
        cdef double loss = 0.0, sv, sc, cost, norm2, tau, dv
        cdef const intp* y
        cdef double* wp = &w[0]
        with nogil:
            self._load_transitions(wp, 1.0)
            self._refresh_pruning()
            for i in range(order.shape[0]):
                s = order[i]
                start = self.starts[s]
                length = self.lengths[s]
                y = &self.labels[start]
                self._emissions(start, length, wp, 1.0)
                d = self._viterbi(start, length, &sv)
                if d > 0:
                    sc = self._path_score(start, length, y)
                    cost = sv - sc + (sqrt(<double>d) if error_sensitive else 1.0)
                    n = self._difference(start, length, y, &self.path[0])
                    norm2 = 0.0
                    for q in range(n):
                        dv = self.delta[self.actives[q]]
                        norm2 += dv * dv
                    if pa_type == 0:
                        tau = cost / norm2 if norm2 > 0.0 else 0.0
                    elif pa_type == 1:
                        tau = cost / norm2 if norm2 > 0.0 else 0.0
                        tau = c if tau > c else tau
                    else:
                        tau = cost / (norm2 + 0.5 / c)
                    if norm2 > 0.0 and isfinite(tau):
                        for q in range(n):
                            k = self.actives[q]
                            dv = self.delta_w[k] if self.weighted else self.delta[k]
                            w[k] += tau * dv
                            ws[k] += tau * counter * dv
                        self._sync_transitions(n, wp)
                    self._clear(n)
                    loss += cost * self._mean_weight(start, length)
                counter += 1.0
        return loss, counter

    def arow_epoch(self, const intp[::1] order, double[::1] mean, double[::1] cov,
                   double gamma):
        """One epoch of AROW (diagonal covariance).

        For a wrongly labelled sequence: ``cost = score(viterbi) - score(y) +
        d``, ``alpha = cost / (gamma + sum cov * delta^2)``, ``mean += alpha *
        cov * delta``, ``cov = 1 / (1 / cov + delta^2 / gamma)``. Weighted
        (``delta_w`` the weighted difference): ``mean += alpha * cov *
        delta_w`` and ``cov = 1 / (1 / cov + |delta * delta_w| / gamma)``
        (a sequence weight ``s``: the mean's step and the confidence gained
        are ``s`` times the unweighted ones); the cost enters the loss times
        the mean token weight.

        Returns
        -------
        loss : float
            Sum of the costs.
        """
        cdef intp i, q, s, length, n, d
        cdef long long start, k
        cdef double loss = 0.0, sv, sc, cost, frac, alpha, dv, dw
        cdef const intp* y
        cdef double* wp = &mean[0]
        with nogil:
            self._load_transitions(wp, 1.0)
            self._refresh_pruning()
            for i in range(order.shape[0]):
                s = order[i]
                start = self.starts[s]
                length = self.lengths[s]
                y = &self.labels[start]
                self._emissions(start, length, wp, 1.0)
                d = self._viterbi(start, length, &sv)
                if d > 0:
                    sc = self._path_score(start, length, y)
                    cost = sv - sc + <double>d
                    n = self._difference(start, length, y, &self.path[0])
                    frac = gamma
                    for q in range(n):
                        k = self.actives[q]
                        dv = self.delta[k]
                        frac += cov[k] * dv * dv
                    alpha = cost / frac
                    for q in range(n):
                        k = self.actives[q]
                        dv = self.delta[k]
                        if self.weighted:
                            dw = self.delta_w[k]
                            if dw != 0.0:
                                mean[k] += alpha * cov[k] * dw
                                cov[k] = 1.0 / (1.0 / cov[k] + fabs(dv * dw) / gamma)
                        elif dv != 0.0:  # a cancelled feature keeps its variance exactly
                            mean[k] += alpha * cov[k] * dv
                            cov[k] = 1.0 / (1.0 / cov[k] + dv * dv / gamma)
                    self._sync_transitions(n, wp)
                    self._clear(n)
                    loss += cost * self._mean_weight(start, length)
        return loss

    cdef void _gradient_step(self, long long start, intp length, const intp* y, double* wp,
                             double* vp, double gain, double b) noexcept nogil:
        """``wp += gain * (F(x, y) - E[F(x, Y)])``, the marginals in alpha and pairs.

        With ``vp`` (averaged SGD), every change ``x`` of ``wp[k]`` also
        subtracts ``b * x`` from ``vp[k]`` (see :meth:`asgd_epoch`).
        """
        cdef intp t_, m, L = self.n_labels
        cdef intp n_trans = self.transition_index.shape[0]
        cdef long long k, p, r
        cdef int a
        cdef double g, v, x
        cdef const double* prob
        # observed counts
        for t_ in range(length):
            r = start + t_
            for p in range(self.indptr[r], self.indptr[r + 1]):
                v = self.values[p]
                if v == 0.0:  # explicit zeros move no weight
                    continue
                k = self._find(self.ids[p], y[t_])
                if k >= 0:
                    x = gain * v
                    wp[k] += x
                    if vp != NULL:
                        vp[k] -= b * x
            if t_ > 0:
                k = self.transition_feature[y[t_ - 1] * L + y[t_]]
                if k >= 0:
                    wp[k] += gain
                    if vp != NULL:
                        vp[k] -= b * gain
        # expected counts (the marginals are in self.alpha)
        for t_ in range(length):
            r = start + t_
            prob = &self.alpha[t_, 0]
            for p in range(self.indptr[r], self.indptr[r + 1]):
                v = self.values[p]
                if v == 0.0:
                    continue
                a = self.ids[p]
                g = gain * v
                for k in range(self.state_ptr[a], self.state_ptr[a + 1]):
                    x = g * prob[self.state_labels[k]]
                    wp[k] -= x
                    if vp != NULL:
                        vp[k] += b * x
        if length > 1:
            for m in range(n_trans):
                x = gain * self.pairs[self.transition_index[m]]
                wp[self.n_states + m] -= x
                if vp != NULL:
                    vp[self.n_states + m] += b * x

    def l2sgd_epoch(self, const intp[::1] order, double[::1] w, double t0, double lam,
                    double t, double loss_limit=INFINITY):
        """One epoch of SGD on ``sum_i -log p(y_i | x_i) + (lam / 2) * N * |w|^2``.

        Step ``t`` (counted over all epochs) has the learning rate ``eta = 1 /
        (lam * (t0 + t))``: the weights shrink by ``1 - eta * lam``, then move
        by ``eta * (F(x, y) - E[F(x, Y)])`` at the shrunk weights. The loss of
        a sequence is taken before its own update. ``w`` is left holding the
        true weights (the decay factor folded in). Weighted (one weight ``s``
        per sequence: the caller checks it is constant over the sequence):
        the move is ``s * eta * (F(x, y) - E[F(x, Y)])``, the gradient step of
        ``s * (-log p(y | x))``, and the loss term is ``s`` times; the
        shrink of the L2 term stays one per step.

        The epoch stops early once the summed loss exceeds ``loss_limit``
        (calibration: such a trial is rejected whatever the rest brings).

        Returns
        -------
        loss : float
            Sum of the per-sequence losses (without the L2 term); inf when
            stopped by ``loss_limit``.
        t : float
            The step counter after the epoch.
        eta : float
            The learning rate of the last step (nan if no step).
        """
        cdef intp i, s, length
        cdef intp K = self.n_features
        cdef long long start, k
        cdef double loss = 0.0, eta = NAN, decay = 1.0, gain, log_z, weight
        cdef const intp* y
        cdef double* wp = &w[0]
        with nogil:
            for i in range(order.shape[0]):
                s = order[i]
                start = self.starts[s]
                length = self.lengths[s]
                y = &self.labels[start]

                eta = 1.0 / (lam * (t0 + t))
                decay *= 1.0 - eta * lam
                if fabs(decay) < _MIN_DECAY:
                    for k in range(K):
                        wp[k] *= decay
                    decay = 1.0
                gain = eta / decay
                weight = self.weights[start] if self.weighted else 1.0
                gain *= weight

                self._emissions(start, length, wp, decay)
                self._load_transitions(wp, decay)
                log_z = self._forward_backward(length)
                if self.weighted:
                    loss += weight * (log_z - self._path_score(start, length, y))
                else:
                    loss += log_z - self._path_score(start, length, y)
                if loss > loss_limit:
                    loss = INFINITY
                    break

                self._gradient_step(start, length, y, wp, NULL, gain, 0.0)
                t += 1.0
            if decay != 1.0:
                for k in range(K):
                    wp[k] *= decay
        return loss, t, eta

    def asgd_epoch(self, const intp[::1] order, double[::1] w, double[::1] w_avg,
                   double eta0, double lam, double power, double t, double n_averaged,
                   bint average):
        """One epoch of averaged SGD on ``sum_i -log p(y_i | x_i) + (lam / 2) * N * |w|^2``.

        Step ``t`` (counted over all epochs) has the learning rate ``eta =
        eta0 * (1 + lam * eta0 * t) ** -power`` and is l2sgd's step (see
        :meth:`l2sgd_epoch`; a weight per sequence scales the move). With
        ``average``, after every step the average becomes ``w_avg += (w -
        w_avg) / n`` with ``n = n_averaged + 1`` (the mean of the iterates
        since averaging began; the first one sets ``w_avg = w``).

        Both vectors stay sparse to update: ``w = a * u`` (the shrink of a
        step is one multiplication of ``a``) and ``w_avg = (v + b * u) / c``,
        so a step that moves ``u`` by ``x`` moves ``v`` by ``-b * x``, and
        the average's other terms are the scalars ``c /= 1 - 1 / n``, ``b +=
        a * c / n``. ``u`` and ``v`` are ``w`` and ``w_avg`` in place, which
        leave the epoch holding the true weights and average (folded in
        whenever ``a`` gets small, and at the end).

        Returns
        -------
        loss : float
            Sum of the per-sequence losses, each before its own step
            (without the L2 term).
        t : float
            The step counter after the epoch.
        n_averaged : float
            Iterates in the average after the epoch.
        eta : float
            The learning rate of the last step (nan if no step).
        """
        cdef intp i, s, length
        cdef intp K = self.n_features
        cdef long long start, k
        cdef double loss = 0.0, eta = NAN, decay = 1.0, gain, log_z, weight, mu
        cdef double b = 0.0, c = 1.0
        cdef const intp* y
        cdef double* wp = &w[0]
        cdef double* vp = &w_avg[0]
        if w_avg.shape[0] < K:
            raise ValueError("w_avg needs one entry per feature")
        with nogil:
            for i in range(order.shape[0]):
                s = order[i]
                start = self.starts[s]
                length = self.lengths[s]
                y = &self.labels[start]

                eta = eta0 * pow(1.0 + lam * eta0 * t, -power)
                decay *= 1.0 - eta * lam
                if fabs(decay) < _MIN_DECAY:
                    self._fold_average(vp, wp, b, c, average)
                    b = 0.0
                    c = 1.0
                    for k in range(K):
                        wp[k] *= decay
                    decay = 1.0
                gain = eta / decay
                weight = self.weights[start] if self.weighted else 1.0
                gain *= weight

                self._emissions(start, length, wp, decay)
                self._load_transitions(wp, decay)
                log_z = self._forward_backward(length)
                if self.weighted:
                    loss += weight * (log_z - self._path_score(start, length, y))
                else:
                    loss += log_z - self._path_score(start, length, y)

                self._gradient_step(start, length, y, wp, vp if average else NULL, gain, b)
                t += 1.0
                if average:
                    n_averaged += 1.0
                    if n_averaged == 1.0:  # the average starts as the iterate itself
                        memset(vp, 0, K * sizeof(double))
                        b = decay
                        c = 1.0
                    else:
                        mu = 1.0 / n_averaged
                        c /= 1.0 - mu
                        b += mu * decay * c
            self._fold_average(vp, wp, b, c, average)
            if decay != 1.0:
                for k in range(K):
                    wp[k] *= decay
        return loss, t, n_averaged, eta

    cdef void _fold_average(self, double* vp, const double* up, double b, double c,
                            bint average) noexcept nogil:
        """``v = (v + b * u) / c``: the average's true value (asgd_epoch)."""
        cdef intp k
        if not average or (b == 0.0 and c == 1.0):
            return
        for k in range(self.n_features):
            vp[k] = (vp[k] + b * up[k]) / c

    def sequence_marginals(self, intp s, const double[::1] w, double factor=1.0):
        """log Z, state marginals and summed pair marginals of sequence ``s``
        at the weights ``factor * w`` (for tests).

        Returns
        -------
        log_z : float
        marginals : ndarray of shape (length, n_labels)
        pairs : ndarray of shape (n_labels, n_labels)
            Sum over positions of P(y_t = i, y_t+1 = j).
        """
        cdef intp length = self.lengths[s]
        cdef double log_z
        with nogil:
            self._emissions(self.starts[s], length, &w[0], factor)
            self._load_transitions(&w[0], factor)
            log_z = self._forward_backward(length)
        L = self.n_labels
        pairs = np.asarray(self.pairs)[: L * L].reshape(L, L).copy()
        if length == 1:
            pairs[:] = 0.0
        return log_z, np.asarray(self.alpha)[:length].copy(), pairs

    # -- forward-backward (l2sgd) ---------------------------------------------

    cdef double _forward_backward(self, intp length) noexcept nogil:
        """log Z of the buffered scores; marginals into alpha, pair sums into pairs."""
        cdef intp L = self.n_labels, n = L * L, t, i, j
        cdef double tmax, tmin, x, m, log_z = 0.0
        cdef double* et = &self.exp_trans[0]
        cdef double* ett = &self.exp_trans_t[0]
        cdef double* tr = &self.transitions[0]
        cdef double* tmp = &self.tmp[0]
        cdef double* prs = &self.pairs[0]
        cdef double* row
        cdef double* ps

        tmax = tr[0]
        tmin = tr[0]
        for i in range(1, n):
            x = tr[i]
            tmax = x if x > tmax else tmax
            tmin = x if x < tmin else tmin
        if length > 1 and not (tmax - tmin <= self.spread_limit):
            return self._forward_backward_log(length)
        if length > 1:
            for i in range(n):
                et[i] = tr[i] - tmax
            skcrf_exp_nonpositive(et, n)
            for i in range(L):
                for j in range(L):
                    ett[j * L + i] = et[i * L + j]

        # psi = exp(emissions - row maximum), one vectorized exp
        for t in range(length):
            row = &self.emissions[t, 0]
            m = row[0]
            for j in range(1, L):
                m = row[j] if row[j] > m else m
            ps = &self.psi[t, 0]
            for j in range(L):
                ps[j] = row[j] - m
            log_z += m
        skcrf_exp_nonpositive(&self.psi[0, 0], length * L)

        log_z = skcrf_l2sgd_fb(length, L, log_z, et, ett, &self.psi[0, 0], &self.alpha[0, 0],
                               &self.beta[0, 0], &self.scale[0], tmp, prs)
        return log_z + (length - 1) * tmax

    cdef double _forward_backward_log(self, intp length) noexcept nogil:
        """As _forward_backward, in the log domain (any spread of scores)."""
        cdef intp L = self.n_labels, t, i, j
        cdef double m, s, x, log_z
        cdef double* tr = &self.transitions[0]
        cdef double* tmp = &self.tmp[0]
        cdef double* prs = &self.pairs[0]
        cdef double* cur
        cdef double* prev
        cdef double* em
        cdef double* nxt
        cdef double* bt
        # log alpha
        em = &self.emissions[0, 0]
        cur = &self.alpha[0, 0]
        for j in range(L):
            cur[j] = em[j]
        for t in range(1, length):
            prev = &self.alpha[t - 1, 0]
            cur = &self.alpha[t, 0]
            em = &self.emissions[t, 0]
            for j in range(L):
                m = prev[0] + tr[j]
                for i in range(1, L):
                    x = prev[i] + tr[i * L + j]
                    m = x if x > m else m
                s = 0.0
                for i in range(L):
                    s += exp(prev[i] + tr[i * L + j] - m)
                cur[j] = em[j] + m + log(s)
        cur = &self.alpha[length - 1, 0]
        m = cur[0]
        for j in range(1, L):
            m = cur[j] if cur[j] > m else m
        s = 0.0
        for j in range(L):
            s += exp(cur[j] - m)
        log_z = m + log(s)
        # log beta
        bt = &self.beta[length - 1, 0]
        for j in range(L):
            bt[j] = 0.0
        memset(prs, 0, L * L * sizeof(double))
        for t in range(length - 2, -1, -1):
            nxt = &self.beta[t + 1, 0]
            em = &self.emissions[t + 1, 0]
            bt = &self.beta[t, 0]
            prev = &self.alpha[t, 0]
            for j in range(L):
                tmp[j] = em[j] + nxt[j]
            for i in range(L):
                m = tr[i * L] + tmp[0]
                for j in range(1, L):
                    x = tr[i * L + j] + tmp[j]
                    m = x if x > m else m
                s = 0.0
                for j in range(L):
                    x = exp(tr[i * L + j] + tmp[j] - m)
                    s += x
                    prs[i * L + j] += exp(prev[i] + tr[i * L + j] + tmp[j] - log_z)
                bt[i] = m + log(s)
        for t in range(length):
            cur = &self.alpha[t, 0]
            bt = &self.beta[t, 0]
            for j in range(L):
                cur[j] = exp(cur[j] + bt[j] - log_z)
        return log_z
