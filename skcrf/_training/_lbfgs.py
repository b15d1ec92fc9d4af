"""Limited-memory BFGS (L-BFGS) and OWL-QN minimisation, with CRFsuite's semantics.

This private module minimises ``F(x) = f(x) + c1 * ||x||_1`` where ``f`` is a
smooth function supplied together with its gradient. It is written so that a
model trained with it is the model CRFsuite 0.12.2 trains: the options, the
stopping tests, the line searches and the order in which they are applied
follow libLBFGS (Naoaki Okazaki's C port of Jorge Nocedal's L-BFGS, the
optimiser CRFsuite calls, as bundled with python-crfsuite). The code is an
independent Python/numpy implementation of those semantics.

Algorithm
---------
At every iteration ``k = 1, 2, ...``:

1. A line search along the direction ``d`` finds a step ``t`` and the new
   point ``x + t * d``. The first iteration starts from ``d = -g`` (minus the
   gradient) with the trial step ``1 / ||d||``; later iterations try ``t = 1``
   first.
2. The progress callback sees the accepted point (so every accepted
   iteration is reported exactly once), then the stopping tests run, in this
   order: the gradient test (``epsilon``), the relative-improvement test
   (``period``/``delta``) and the iteration limit (``max_iterations``).
3. The pair ``s = x_new - x_old``, ``y = g_new - g_old`` enters a ring buffer
   of the last ``num_memories`` pairs, and the two-loop recursion computes
   the next direction ``d = -H g`` where ``H`` is the L-BFGS inverse-Hessian
   estimate whose initial matrix is ``(y.s / y.y) I`` for the newest pair.

When ``c1 > 0`` the method is OWL-QN (Andrew and Gao, ICML 2007): ``g`` is
replaced by the pseudo-gradient ``pg`` of ``F`` in the direction computation
and in the stopping tests, the direction components whose sign agrees with
``pg`` are zeroed, and the line search is a backtracking search whose trial
points are projected onto the orthant of the current point (a coordinate
that would change sign becomes zero). The memory pairs are still built from
the gradient of the smooth part. As in CRFsuite, OWL-QN always uses this
projected backtracking search, whatever ``linesearch`` says.

Deliberate differences from libLBFGS
------------------------------------
- A pair with ``y.s <= 0`` is not used (libLBFGS uses it and then divides by
  zero or loses positive definiteness); if the memory is full, the oldest
  pair is dropped with it. This cannot happen with a strictly convex smooth
  part, such as the L2-regularised CRF objective, so the iterates are
  unchanged there.
- A trial point where the objective or its gradient is not finite is treated
  as a step that was too long (see ``minimize_lbfgs``); libLBFGS would carry
  the NaN along.
- After a line-search failure the result reports the objective at the last
  accepted point (libLBFGS returns the value of the last, rejected, trial).
- An error of the More-Thuente interval update is reported as its own status
  (``OUT_OF_INTERVAL``, ``INCREASE_GRADIENT``, ``INCORRECT_TMINMAX``)
  instead of being turned into ``ROUNDING_ERROR`` after one more evaluation.
  Either way the search fails and the last accepted point is kept.

References
----------
- J. Nocedal. Updating quasi-Newton matrices with limited storage.
  Mathematics of Computation 35(151), 1980.
- D. C. Liu and J. Nocedal. On the limited memory BFGS method for large
  scale optimization. Mathematical Programming B 45(3), 1989.
- J. J. More and D. J. Thuente. Line search algorithms with guaranteed
  sufficient decrease. ACM TOMS 20(3), 1994.
- G. Andrew and J. Gao. Scalable training of L1-regularized log-linear
  models. ICML 2007.
- libLBFGS, https://www.chokkan.org/software/liblbfgs/ and CRFsuite,
  https://www.chokkan.org/software/crfsuite/ (semantics reference).
"""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ._lbfgs_kernels import (
    all_finite,
    dot,
    lbfgs_pair,
    owlqn_trial,
    search_start,
    trial_point,
    two_loop,
)

__all__ = [
    "Handover",
    "IterationInfo",
    "LBFGSResult",
    "LBFGSStatus",
    "NonFiniteStartError",
    "minimize_lbfgs",
    "pseudo_gradient",
    "two_loop_direction",
]

LINESEARCH_METHODS = (
    "MoreThuente",
    "Backtracking",
    "StrongBacktracking",
    "BacktrackingArmijo",
)

# Step multipliers of the backtracking searches (fixed in libLBFGS too).
_BACKTRACK_SHRINK = 0.5
_BACKTRACK_GROW = 2.1


class LBFGSStatus(enum.Enum):
    """Why L-BFGS / OWL-QN stopped: ``CRFTagger.status_`` with ``algorithm='lbfgs'``.

    The first six members are normal terminations (``converged`` is True for
    four of them; ``MAX_ITERATIONS`` and ``CALLBACK_STOP`` are normal but not
    converged). The others
    are line-search failures: the search could not find an acceptable step
    from the last accepted point, which is then the result.
    """

    #: ``||g|| / max(1, ||x||) <= epsilon`` after an iteration (``g`` is the
    #: pseudo-gradient under OWL-QN).
    CONVERGED = "converged"
    #: ``(f_{k-period} - f_k) / f_k < delta``: the objective improved by less
    #: than ``delta`` (relative) over the last ``period`` iterations.
    STOPPED_DELTA = "stopped_delta"
    #: The start point already passes the ``epsilon`` test; no iteration ran.
    ALREADY_MINIMIZED = "already_minimized"
    #: ``max_iterations`` iterations ran without any other test stopping.
    MAX_ITERATIONS = "max_iterations"
    #: The callback returned True: a stop the user asked for (normal, but
    #: not converged).
    CALLBACK_STOP = "callback_stop"
    #: The estimator's early stopping ended training: the validation score
    #: did not improve for ``n_iter_no_change`` iterations (the weights of
    #: the best iteration are kept).
    EARLY_STOPPING = "early_stopping"
    #: More-Thuente: the trial step left the interval of uncertainty, usually
    #: because rounding errors prevent progress, or no step satisfies the
    #: sufficient decrease and curvature conditions.
    ROUNDING_ERROR = "rounding_error"
    #: The step became smaller than ``min_step`` without an acceptable point.
    MINIMUM_STEP = "minimum_step"
    #: The step became larger than ``max_step``.
    MAXIMUM_STEP = "maximum_step"
    #: The line search used ``max_linesearch`` evaluations without success.
    MAX_LINESEARCH = "max_linesearch"
    #: More-Thuente: the interval of uncertainty is narrower than ``xtol``
    #: (relative).
    WIDTH_TOO_SMALL = "width_too_small"
    #: The search direction is not a descent direction (``g.d > 0``), or the
    #: More-Thuente interval update found the function increasing from its
    #: best point.
    INCREASE_GRADIENT = "increase_gradient"
    #: More-Thuente: a trial step fell outside the bracketing interval.
    OUT_OF_INTERVAL = "out_of_interval"
    #: More-Thuente: the bounds of the step interval became inconsistent.
    INCORRECT_TMINMAX = "incorrect_tminmax"
    #: The line search ended on a trial point where the objective or its
    #: gradient was NaN or infinite, and backing off did not find a finite one
    #: within ``max_linesearch`` evaluations.
    NON_FINITE = "non_finite"

    @property
    def converged(self) -> bool:
        """True for the statuses that mean "stopped normally, at a good point"."""
        return self in _CONVERGED_STATUSES

    @property
    def is_linesearch_failure(self) -> bool:
        """True when the line search failed and the last accepted point was kept."""
        return self in _LINESEARCH_FAILURES

    @property
    def description(self) -> str:
        """A one-sentence human readable explanation."""
        return _DESCRIPTIONS[self]


_CONVERGED_STATUSES = frozenset(
    {
        LBFGSStatus.CONVERGED,
        LBFGSStatus.STOPPED_DELTA,
        LBFGSStatus.ALREADY_MINIMIZED,
        LBFGSStatus.EARLY_STOPPING,
    }
)
_LINESEARCH_FAILURES = frozenset(
    {
        LBFGSStatus.ROUNDING_ERROR,
        LBFGSStatus.MINIMUM_STEP,
        LBFGSStatus.MAXIMUM_STEP,
        LBFGSStatus.MAX_LINESEARCH,
        LBFGSStatus.WIDTH_TOO_SMALL,
        LBFGSStatus.INCREASE_GRADIENT,
        LBFGSStatus.OUT_OF_INTERVAL,
        LBFGSStatus.INCORRECT_TMINMAX,
        LBFGSStatus.NON_FINITE,
    }
)
_DESCRIPTIONS = {
    LBFGSStatus.CONVERGED: "Converged: ||g|| / max(1, ||x||) <= epsilon.",
    LBFGSStatus.STOPPED_DELTA: (
        "Stopped: the relative improvement of the objective over the last "
        "`period` iterations is below delta."
    ),
    LBFGSStatus.ALREADY_MINIMIZED: "The start point already satisfies the epsilon test.",
    LBFGSStatus.MAX_ITERATIONS: "Reached max_iterations before convergence.",
    LBFGSStatus.CALLBACK_STOP: "The callback asked to stop.",
    LBFGSStatus.EARLY_STOPPING: (
        "Early stopping: the validation score did not improve for n_iter_no_change "
        "iterations; the weights of the best iteration are kept."
    ),
    LBFGSStatus.ROUNDING_ERROR: (
        "Line search failed: rounding errors prevent progress, or no step "
        "satisfies the sufficient decrease and curvature conditions."
    ),
    LBFGSStatus.MINIMUM_STEP: "Line search failed: the step became smaller than min_step.",
    LBFGSStatus.MAXIMUM_STEP: "Line search failed: the step became larger than max_step.",
    LBFGSStatus.MAX_LINESEARCH: (
        "Line search failed: max_linesearch evaluations without an acceptable step."
    ),
    LBFGSStatus.WIDTH_TOO_SMALL: (
        "Line search failed: the interval of uncertainty became narrower than xtol."
    ),
    LBFGSStatus.INCREASE_GRADIENT: (
        "Line search failed: the search direction does not decrease the objective."
    ),
    LBFGSStatus.OUT_OF_INTERVAL: (
        "Line search failed: a trial step fell outside the interval of uncertainty."
    ),
    LBFGSStatus.INCORRECT_TMINMAX: (
        "Line search failed: the bounds of the step interval became inconsistent."
    ),
    LBFGSStatus.NON_FINITE: (
        "Line search failed: the objective was not finite at the trial points "
        "and backing off did not find a finite one."
    ),
}


class NonFiniteStartError(ValueError):
    """The objective or its gradient is not finite at the start point.

    A ValueError: the input, not the optimizer, is at fault (callers that
    know the objective's terms word which one may overflow).
    """


class IterationInfo(NamedTuple):
    """What the callback receives after each accepted iteration.

    Attributes
    ----------
    k : int
        Iteration number, starting at 1.
    x : ndarray
        The accepted point. Do not modify it.
    fun : float
        The objective at ``x``, including ``c1 * ||x||_1``.
    grad : ndarray
        The gradient of the smooth part at ``x``. Do not modify it.
    xnorm : float
        ``||x||_2``.
    gnorm : float
        ``||g||_2``, or ``||pg||_2`` (pseudo-gradient) when ``c1 > 0``.
    step : float
        The accepted step length along the search direction.
    n_evals_linesearch : int
        Objective evaluations the line search used in this iteration.
    n_nonzero : int
        Components of ``x`` that are not 0 (the training log's active
        features), counted in the pass that makes the iteration's pair.
    """

    k: int
    x: np.ndarray
    fun: float
    grad: np.ndarray
    xnorm: float
    gnorm: float
    step: float
    n_evals_linesearch: int
    n_nonzero: int


@dataclass
class LBFGSResult:
    """The outcome of :func:`minimize_lbfgs`.

    Attributes
    ----------
    x : ndarray
        The last accepted point (never a rejected trial point).
    fun : float
        The objective at ``x``, including ``c1 * ||x||_1``.
    grad : ndarray
        The gradient of the smooth part at ``x``.
    status : LBFGSStatus
        Why the optimiser stopped.
    n_iter : int
        Number of accepted iterations (callbacks made).
    n_evals : int
        Number of calls to the objective, the one at ``x0`` included.
    message : str
        Human readable version of ``status``.
    """

    x: np.ndarray
    fun: float
    grad: np.ndarray
    status: LBFGSStatus
    n_iter: int
    n_evals: int
    message: str


class Handover:
    """A start point given away to :func:`minimize_lbfgs`.

    The caller keeps no other reference to ``array``: the optimizer takes it
    out and drops it after the first iteration, one vector of ``n`` less
    for the rest of the run (a large model's fit peak). ``len()`` is the
    array's.
    """

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __len__(self):
        return len(self.array)

    def take(self):
        """The array, which this object no longer holds."""
        array, self.array = self.array, None
        return array


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def pseudo_gradient(x, g, c1):
    """Pseudo-gradient of ``f(x) + c1 * ||x||_1`` (OWL-QN).

    Parameters
    ----------
    x : ndarray of shape (n,)
        The point.
    g : ndarray of shape (n,)
        Gradient of the smooth part ``f`` at ``x``.
    c1 : float
        The L1 coefficient, ``c1 >= 0``.

    Returns
    -------
    pg : ndarray of shape (n,)
        Where ``x_i != 0`` the (differentiable) partial derivative
        ``g_i + c1 * sign(x_i)``. Where ``x_i == 0`` the one-sided derivative
        that allows a decrease: ``g_i + c1`` if ``g_i < -c1``, ``g_i - c1`` if
        ``g_i > c1``, and 0 when neither side decreases the objective.

    Examples
    --------
    >>> pseudo_gradient(np.array([1.0, -1.0, 0.0, 0.0, 0.0]),
    ...                 np.array([0.5, 0.5, 3.0, -3.0, 0.5]), 1.0)
    array([ 1.5, -0.5,  2. , -2. ,  0. ])
    """
    pg = np.sign(x)
    pg *= c1
    pg += g
    at_zero = x == 0.0
    if at_zero.any():
        # g - clip(g, -c1, c1) is g + c1 below -c1, g - c1 above c1, else 0.
        g_zero = g[at_zero]
        g_zero -= np.clip(g_zero, -c1, c1)
        pg[at_zero] = g_zero
    return pg


def two_loop_direction(
    grad, s_mem, y_mem, ys_mem, newest, n_pairs, gamma, owlqn=False, n_threads=1
):
    """L-BFGS search direction ``-H grad`` by the two-loop recursion.

    Parameters
    ----------
    grad : ndarray of shape (n,)
        Gradient (or pseudo-gradient) at the current point.
    s_mem, y_mem : ndarray of shape (m, n)
        Ring buffers of the steps ``s_i`` and gradient changes ``y_i``.
    ys_mem : ndarray of shape (m,)
        ``y_i . s_i`` for each slot (all positive for the used slots).
    newest : int
        Slot of the most recent pair.
    n_pairs : int
        Number of valid pairs (``0 <= n_pairs <= m``); the pairs occupy the
        slots ``newest, newest - 1, ...`` (modulo ``m``).
    gamma : float
        Scale of the initial inverse Hessian ``gamma * I``; L-BFGS uses
        ``y.s / y.y`` of the newest pair.
    owlqn : bool
        Keep only the components that move against ``grad`` (the others
        become 0), as OWL-QN does with the pseudo-gradient.
    n_threads : int
        Threads of each pass (the same bits with any number).

    Returns
    -------
    d : ndarray of shape (n,)
        The direction (a new array).

    Notes
    -----
    The optimizer's main cost for large ``n``: the compiled
    :func:`~skcrf._training._lbfgs_kernels.two_loop` updates the direction
    and takes the next dot product in one pass per pair.
    """
    if n_pairs == 0:
        d = np.negative(grad)
        d *= gamma
        if owlqn:
            d[d * grad >= 0.0] = 0.0
        return d
    m = s_mem.shape[0]
    slots = np.array([(newest - i) % m for i in range(n_pairs)], dtype=np.intp)  # newest first
    return two_loop(
        np.ascontiguousarray(grad, dtype=np.float64),
        np.ascontiguousarray(s_mem, dtype=np.float64),
        np.ascontiguousarray(y_mem, dtype=np.float64),
        np.ascontiguousarray(ys_mem, dtype=np.float64),
        slots,
        float(gamma),
        owlqn,
        n_threads,
    )


def _dot(a, b, n_threads=1):
    """Dot product of two vectors, as a Python float.

    Compiled (:func:`~skcrf._training._lbfgs_kernels.dot`) rather than BLAS:
    on few cores a multi-threaded BLAS dot leaves its threads spinning while
    the passes that follow run, which made the optimiser several times
    slower in measurements; its blocks' sums give the same bits on any
    number of threads.
    """
    return dot(a, b, n_threads)


def _relative_improvement(f_past, f_now):
    """``(f_past - f_now) / f_now`` with IEEE semantics when ``f_now == 0``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.float64(f_past - f_now) / np.float64(f_now))


class _Objective:
    """Wraps the user's smooth objective: adds ``c1 * ||x||_1``, counts calls.

    The returned gradient is always a fresh float64 array, so a user function
    that reuses an output buffer cannot overwrite an accepted gradient; with
    ``fresh_gradient`` the function promises one (a new float64 array at
    every call) and it is kept as it is.
    """

    def __init__(self, loss_gradient, c1, n, fresh_gradient=False):
        self.loss_gradient = loss_gradient
        self.c1 = c1
        self.n = n
        self.n_evals = 0
        self.fresh_gradient = fresh_gradient

    def __call__(self, x, l1=None):
        """``(f, g)`` at ``x``; ``l1``: ``|x|_1`` if the caller has it."""
        f, g = self.loss_gradient(x)
        self.n_evals += 1
        if not (
            self.fresh_gradient
            and isinstance(g, np.ndarray)
            and g.dtype == np.float64
            and g.flags.c_contiguous
        ):
            g = np.array(g, dtype=np.float64)  # a copy
        if g.shape != (self.n,):
            raise ValueError(
                f"loss_gradient returned a gradient of shape {g.shape}, expected {(self.n,)}."
            )
        f = float(f)
        if self.c1 > 0.0:
            f += self.c1 * (float(np.abs(x).sum()) if l1 is None else l1)
        return f, g


def _is_finite(f, g, n_threads=1):
    # (compiled, on the passes' threads: no temporary array of the gradient's length)
    return math.isfinite(f) and all_finite(g, n_threads)


class _Options(NamedTuple):
    ftol: float
    wolfe: float
    gtol: float
    xtol: float
    min_step: float
    max_step: float
    max_linesearch: int
    linesearch: str
    n_threads: int = 1  # of the vector passes


class _SearchOutcome(NamedTuple):
    """Result of one line search; ``status`` is None on success."""

    status: LBFGSStatus | None
    x: np.ndarray | None
    f: float
    g: np.ndarray | None
    step: float
    n_evals: int


def _failure(status, step, count, last_finite=True):
    if not last_finite:
        status = LBFGSStatus.NON_FINITE
    return _SearchOutcome(status, None, math.nan, None, step, count)


# ---------------------------------------------------------------------------
# Backtracking line searches (Armijo, Wolfe, strong Wolfe)
# ---------------------------------------------------------------------------


def _trial_point(x0, step, d, n_threads=1):
    """``x0 + step * d``, a new array (``(d * step) + x0``, compiled)."""
    return trial_point(x0, step, d, n_threads)


def _backtracking(objective, x0, f0, dg_init, d, step, opts):
    """Backtracking search for the smooth case (``c1 == 0``).

    Starting from ``step``, each trial multiplies the step by 0.5 when the
    sufficient decrease (Armijo) test ``f(x0 + t d) <= f0 + ftol * t * g0.d``
    fails or the objective is not finite, and, for the Wolfe variants, by
    2.1 when the curvature test ``g.d >= wolfe * g0.d`` fails (the step is
    too short). ``"StrongBacktracking"`` also shrinks when
    ``g.d > -wolfe * g0.d``. ``"BacktrackingArmijo"`` accepts as soon as the
    sufficient decrease holds. After each rejected trial the search fails if
    ``t < min_step``, ``t > max_step`` or ``max_linesearch`` evaluations
    have been used. ``dg_init`` is ``g0.d``.
    """
    if dg_init > 0.0:
        return _failure(LBFGSStatus.INCREASE_GRADIENT, step, 0)
    dg_test = opts.ftol * dg_init
    kind = opts.linesearch
    count = 0
    while True:
        x = g = None  # a rejected trial's vectors go before the next is made
        x = _trial_point(x0, step, d, opts.n_threads)
        f, g = objective(x)
        count += 1
        finite = _is_finite(f, g, opts.n_threads)
        if not finite or f > f0 + step * dg_test:
            factor = _BACKTRACK_SHRINK
        elif kind == "BacktrackingArmijo":
            return _SearchOutcome(None, x, f, g, step, count)
        else:
            dg = _dot(g, d, opts.n_threads)
            if dg < opts.wolfe * dg_init:
                factor = _BACKTRACK_GROW
            elif kind == "Backtracking" or dg <= -opts.wolfe * dg_init:
                # Regular Wolfe, or strong Wolfe (|g.d| <= -wolfe * g0.d).
                return _SearchOutcome(None, x, f, g, step, count)
            else:
                factor = _BACKTRACK_SHRINK
        if step < opts.min_step:
            return _failure(LBFGSStatus.MINIMUM_STEP, step, count, finite)
        if step > opts.max_step:
            return _failure(LBFGSStatus.MAXIMUM_STEP, step, count, finite)
        if count >= opts.max_linesearch:
            return _failure(LBFGSStatus.MAX_LINESEARCH, step, count, finite)
        step *= factor


def _backtracking_owlqn(objective, x0, f0, pg0, d, step, opts):
    """Projected backtracking search of OWL-QN (``c1 > 0``).

    Each trial point ``x0 + t d`` is projected onto the orthant of ``x0``
    (for coordinates where ``x0`` is 0, the orthant of ``-pg0``): a
    coordinate that would change sign becomes 0. The trial is accepted when
    ``F(x) <= F(x0) + ftol * (x - x0).pg0`` (``F`` includes the L1 term) and
    the objective is finite; otherwise the step is halved. The search fails
    after a rejected trial with ``t < min_step``, ``t > max_step`` or
    ``max_linesearch`` evaluations. Each trial point, its L1 norm and
    ``(x - x0).pg0`` come from one compiled pass (:func:`owlqn_trial`).
    """
    count = 0
    while True:
        x = g = None  # a rejected trial's vectors go before the next is made
        x, l1, decrease = owlqn_trial(x0, pg0, d, step, opts.n_threads)
        f, g = objective(x, l1)
        count += 1
        finite = _is_finite(f, g, opts.n_threads)
        if finite and f <= f0 + opts.ftol * decrease:
            return _SearchOutcome(None, x, f, g, step, count)
        if step < opts.min_step:
            return _failure(LBFGSStatus.MINIMUM_STEP, step, count, finite)
        if step > opts.max_step:
            return _failure(LBFGSStatus.MAXIMUM_STEP, step, count, finite)
        if count >= opts.max_linesearch:
            return _failure(LBFGSStatus.MAX_LINESEARCH, step, count, finite)
        step *= _BACKTRACK_SHRINK


# ---------------------------------------------------------------------------
# More-Thuente line search
# ---------------------------------------------------------------------------


def _cubic_terms(u, fu, du, v, fv, dv):
    """``(width, theta, a, gamma)`` of the cubic through two points.

    The points are ``(u, fu, du)`` and ``(v, fv, dv)``: ``gamma`` is the
    square root of its discriminant (>= 0) and ``a = theta / scale``, the
    scaled cubic coefficient.
    """
    width = v - u
    theta = 3.0 * (fu - fv) / width + du + dv
    scale = max(abs(theta), abs(du), abs(dv))
    a = theta / scale
    # The scaling avoids overflow; the max() guards against a tiny negative
    # discriminant from rounding.
    gamma = scale * math.sqrt(max(0.0, a * a - (du / scale) * (dv / scale)))
    return width, theta, a, gamma


def _cubic_minimizer(u, fu, du, v, fv, dv):
    """Minimiser of the cubic interpolating ``(u, fu, du)`` and ``(v, fv, dv)``."""
    width, theta, _, gamma = _cubic_terms(u, fu, du, v, fv, dv)
    if v < u:
        gamma = -gamma
    ratio = (gamma - du + theta) / (2.0 * gamma - du + dv)
    return u + ratio * width


def _cubic_minimizer_safeguarded(u, fu, du, v, fv, dv, lo, hi):
    """Cubic step of More-Thuente's case 3, falling back to ``lo``/``hi``.

    Used when the derivative keeps its sign but shrinks in magnitude. If the
    cubic has no minimiser beyond ``v`` the step goes to a bound of the
    allowed interval; as in libLBFGS the bound is ``hi`` when the scaled
    cubic coefficient ``theta`` is negative and ``lo`` otherwise.
    """
    width, theta, a, gamma = _cubic_terms(u, fu, du, v, fv, dv)
    if u < v:
        gamma = -gamma
    ratio = (gamma - dv + theta) / (2.0 * gamma - dv + du)
    if ratio < 0.0 and gamma != 0.0:
        return v - ratio * width
    if a < 0.0:
        return hi
    return lo


def _quadratic_minimizer(u, fu, du, v, fv):
    """Minimiser of the quadratic through ``(u, fu)``, ``(v, fv)`` with slope ``du`` at u."""
    width = v - u
    return u + du / ((fu - fv) / width + du) / 2.0 * width


def _secant_minimizer(u, du, v, dv):
    """Zero of the linear interpolation of the derivatives ``du`` at u and ``dv`` at v."""
    return v + dv / (dv - du) * (u - v)


@dataclass
class _Interval:
    """State of More-Thuente's interval of uncertainty.

    ``x`` is the best step so far (lowest function value), ``y`` the other
    endpoint; ``f*`` are function values, ``d*`` directional derivatives.
    """

    x: float
    fx: float
    dx: float
    y: float
    fy: float
    dy: float
    bracketed: bool = False


def _update_trial_interval(iv, t, ft, dt, tmin, tmax):
    """One safeguarded step of More and Thuente: new trial step, new interval.

    Updates ``iv`` in place with the trial ``(t, ft, dt)`` and returns
    ``(new_t, error)`` where ``error`` is None or a failure status.
    """
    if iv.bracketed:
        if t <= min(iv.x, iv.y) or t >= max(iv.x, iv.y):
            return t, LBFGSStatus.OUT_OF_INTERVAL
        if iv.dx * (t - iv.x) >= 0.0:
            return t, LBFGSStatus.INCREASE_GRADIENT
        if tmax < tmin:
            return t, LBFGSStatus.INCORRECT_TMINMAX

    x, fx, dx = iv.x, iv.fx, iv.dx
    opposite_signs = (dt < 0.0 < dx) or (dx < 0.0 < dt)

    if ft > fx:
        # Case 1: higher value. A minimiser lies in [x, t]. Take the cubic
        # step if it is closer to x than the quadratic one, else their mean.
        iv.bracketed = True
        limit_to_interval = True
        cubic = _cubic_minimizer(x, fx, dx, t, ft, dt)
        quad = _quadratic_minimizer(x, fx, dx, t, ft)
        if abs(cubic - x) < abs(quad - x):
            new_t = cubic
        else:
            new_t = cubic + 0.5 * (quad - cubic)
    elif opposite_signs:
        # Case 2: lower value, derivatives of opposite signs: bracketed.
        # Take whichever of the cubic and secant steps is farther from t.
        iv.bracketed = True
        limit_to_interval = False
        cubic = _cubic_minimizer(x, fx, dx, t, ft, dt)
        secant = _secant_minimizer(x, dx, t, dt)
        new_t = cubic if abs(cubic - t) > abs(secant - t) else secant
    elif abs(dt) < abs(dx):
        # Case 3: lower value, same sign, derivative shrinking. If bracketed
        # take the step closer to t, otherwise the one farther from t.
        limit_to_interval = True
        cubic = _cubic_minimizer_safeguarded(x, fx, dx, t, ft, dt, tmin, tmax)
        secant = _secant_minimizer(x, dx, t, dt)
        cubic_closer = abs(t - cubic) < abs(t - secant)
        if iv.bracketed:
            new_t = cubic if cubic_closer else secant
        else:
            new_t = cubic if abs(t - cubic) > abs(t - secant) else secant
    else:
        # Case 4: lower value, same sign, derivative not shrinking. Use the
        # cubic through t and y if bracketed, else go to a bound.
        limit_to_interval = False
        if iv.bracketed:
            new_t = _cubic_minimizer(t, ft, dt, iv.y, iv.fy, iv.dy)
        elif x < t:
            new_t = tmax
        else:
            new_t = tmin

    # Update the interval; this depends only on the trial, not on new_t.
    if ft > fx:
        iv.y, iv.fy, iv.dy = t, ft, dt
    else:
        if opposite_signs:
            iv.y, iv.fy, iv.dy = x, fx, dx
        iv.x, iv.fx, iv.dx = t, ft, dt

    new_t = min(max(new_t, tmin), tmax)

    # Keep the new trial within 66% of the way from x to y.
    if iv.bracketed and limit_to_interval:
        limit = iv.x + 0.66 * (iv.y - iv.x)
        new_t = min(new_t, limit) if iv.x < iv.y else max(new_t, limit)
    return new_t, None


def _more_thuente(objective, x0, f0, dg_init, d, step, opts):
    """More-Thuente line search for the strong Wolfe conditions.

    Finds a step ``t`` with ``f(x0 + t d) <= f0 + ftol * t * g0.d`` and
    ``|g(x0 + t d).d| <= gtol * |g0.d|``, by safeguarded cubic/quadratic
    interpolation inside an interval of uncertainty that shrinks
    (by at least a third every other trial once a minimiser is bracketed).
    In the first stage, until a step with sufficient decrease and a
    non-negative modified derivative is found, the interpolation uses the
    modified function ``f(t) - f0 - ftol * t * g0.d``.

    Fails (see :class:`LBFGSStatus`) when rounding errors prevent progress,
    at ``min_step`` / ``max_step``, when the interval becomes narrower than
    ``xtol`` relative, or after ``max_linesearch`` evaluations.

    A non-finite objective at a trial step ``t`` moves the next trial halfway
    back towards the best step so far; later trials stay below ``t``.
    ``dg_init`` is ``g0.d``.
    """
    if dg_init > 0.0:
        return _failure(LBFGSStatus.INCREASE_GRADIENT, step, 0)

    ftol, gtol, xtol = opts.ftol, opts.gtol, opts.xtol
    min_step, max_step = opts.min_step, opts.max_step
    dg_test = ftol * dg_init
    stage1 = True
    width = max_step - min_step
    prev_width = 2.0 * width
    iv = _Interval(0.0, f0, dg_init, 0.0, f0, dg_init)
    update_error = None
    nonfinite_step = math.inf  # smallest step known to give a non-finite value
    count = 0

    while True:
        if step >= nonfinite_step:
            step = iv.x + 0.5 * (nonfinite_step - iv.x)

        # Bounds of the steps allowed for this trial.
        if iv.bracketed:
            step_lo, step_hi = min(iv.x, iv.y), max(iv.x, iv.y)
        else:
            step_lo, step_hi = iv.x, step + 4.0 * (step - iv.x)

        step = min(max(step, min_step), max_step)

        # On an unusual termination, evaluate at the best step so far.
        if iv.bracketed and (
            step <= step_lo
            or step >= step_hi
            or count + 1 >= opts.max_linesearch
            or step_hi - step_lo <= xtol * step_hi
        ):
            step = iv.x

        x = g = None  # a rejected trial's vectors go before the next is made
        x = _trial_point(x0, step, d, opts.n_threads)
        f, g = objective(x)
        count += 1

        if not _is_finite(f, g, opts.n_threads):
            if count >= opts.max_linesearch:
                return _failure(LBFGSStatus.NON_FINITE, step, count)
            nonfinite_step = step
            step = iv.x + 0.5 * (step - iv.x)
            continue

        dg = _dot(g, d, opts.n_threads)
        f_test = f0 + step * dg_test

        if iv.bracketed and (step <= step_lo or step >= step_hi):
            return _failure(LBFGSStatus.ROUNDING_ERROR, step, count)
        if step == max_step and f <= f_test and dg <= dg_test:
            return _failure(LBFGSStatus.MAXIMUM_STEP, step, count)
        if step == min_step and (f > f_test or dg >= dg_test):
            return _failure(LBFGSStatus.MINIMUM_STEP, step, count)
        if iv.bracketed and step_hi - step_lo <= xtol * step_hi:
            return _failure(LBFGSStatus.WIDTH_TOO_SMALL, step, count)
        if count >= opts.max_linesearch:
            return _failure(LBFGSStatus.MAX_LINESEARCH, step, count)
        if f <= f_test and abs(dg) <= gtol * (-dg_init):
            return _SearchOutcome(None, x, f, g, step, count)

        if stage1 and f <= f_test and min(ftol, gtol) * dg_init <= dg:
            stage1 = False

        if stage1 and f_test < f <= iv.fx:
            # Interpolate the modified function psi(t) = f(t) - t * dg_test.
            modified = _Interval(
                iv.x,
                iv.fx - iv.x * dg_test,
                iv.dx - dg_test,
                iv.y,
                iv.fy - iv.y * dg_test,
                iv.dy - dg_test,
                iv.bracketed,
            )
            step, update_error = _update_trial_interval(
                modified, step, f - step * dg_test, dg - dg_test, step_lo, step_hi
            )
            iv = _Interval(
                modified.x,
                modified.fx + modified.x * dg_test,
                modified.dx + dg_test,
                modified.y,
                modified.fy + modified.y * dg_test,
                modified.dy + dg_test,
                modified.bracketed,
            )
        else:
            step, update_error = _update_trial_interval(iv, step, f, dg, step_lo, step_hi)
        if update_error is not None:
            return _failure(update_error, step, count)

        # Force the interval of uncertainty to shrink enough.
        if iv.bracketed:
            if 0.66 * prev_width <= abs(iv.y - iv.x):
                step = iv.x + 0.5 * (iv.y - iv.x)
            prev_width = width
            width = abs(iv.y - iv.x)


# ---------------------------------------------------------------------------
# Option validation
# ---------------------------------------------------------------------------


def _check_int(name, value, low, desc):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise ValueError(f"{name} must be an integer {desc}, got {value!r}.")
    return int(value)


def _check_float(name, value, ok, desc):
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number {desc}, got {value!r}.") from None
    if isinstance(value, bool) or math.isnan(as_float) or not ok(as_float):
        raise ValueError(f"{name} must be a real number {desc}, got {value!r}.")
    return as_float


def _validate(
    c1,
    num_memories,
    epsilon,
    period,
    delta,
    max_iterations,
    linesearch,
    max_linesearch,
    ftol,
    wolfe,
    gtol,
    xtol,
    min_step,
    max_step,
    callback,
):
    if linesearch not in LINESEARCH_METHODS:
        raise ValueError(
            f"linesearch must be one of {', '.join(map(repr, LINESEARCH_METHODS))}, "
            f"got {linesearch!r}."
        )
    c1 = _check_float("c1", c1, lambda v: 0.0 <= v < math.inf, "with c1 >= 0")
    num_memories = _check_int("num_memories", num_memories, 1, ">= 1")
    epsilon = _check_float("epsilon", epsilon, lambda v: v >= 0.0, "with epsilon >= 0")
    period = _check_int("period", period, 0, ">= 0")
    delta = _check_float("delta", delta, lambda v: v >= 0.0, "with delta >= 0")
    if max_iterations is None:
        max_iterations = 0
    max_iterations = _check_int("max_iterations", max_iterations, 0, ">= 0 (or None)")
    max_linesearch = _check_int("max_linesearch", max_linesearch, 1, ">= 1")
    ftol = _check_float("ftol", ftol, lambda v: 0.0 < v < 0.5, "in (0, 0.5)")
    wolfe = _check_float("wolfe", wolfe, lambda v: ftol < v < 1.0, f"in (ftol={ftol}, 1)")
    gtol = _check_float("gtol", gtol, lambda v: 0.0 < v < 1.0, "in (0, 1)")
    xtol = _check_float("xtol", xtol, lambda v: v >= 0.0, "with xtol >= 0")
    min_step = _check_float(
        "min_step", min_step, lambda v: 0.0 < v < math.inf, "with min_step > 0"
    )
    max_step = _check_float(
        "max_step",
        max_step,
        lambda v: v > min_step,
        f"with max_step > min_step={min_step}",
    )
    if callback is not None and not callable(callback):
        raise ValueError(f"callback must be callable or None, got {callback!r}.")
    options = _Options(ftol, wolfe, gtol, xtol, min_step, max_step, max_linesearch, linesearch)
    return c1, num_memories, epsilon, period, delta, max_iterations, options


# ---------------------------------------------------------------------------
# Main loop
# ---------------------------------------------------------------------------


def minimize_lbfgs(
    loss_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]],
    x0,
    *,
    c1=0.0,
    num_memories=6,
    epsilon=1e-5,
    period=10,
    delta=1e-5,
    max_iterations=None,
    linesearch="MoreThuente",
    max_linesearch=20,
    ftol=1e-4,
    wolfe=0.9,
    gtol=0.9,
    xtol=1e-16,
    min_step=1e-20,
    max_step=1e20,
    callback=None,
    fresh_gradient=False,
    n_threads=1,
) -> LBFGSResult:
    """Minimise ``f(x) + c1 * ||x||_1`` by L-BFGS (OWL-QN when ``c1 > 0``).

    Parameters
    ----------
    loss_gradient : callable
        ``loss_gradient(x) -> (f, g)``: the smooth part of the objective and
        its gradient (an array of the same shape as ``x``). It must not modify
        ``x``; it may reuse its output buffer (the gradient is copied).
        Exceptions, ``KeyboardInterrupt`` included, propagate.
    x0 : array-like of shape (n,) or Handover
        Start point (not modified). ``f`` and ``g`` must be finite there.
        A :class:`Handover` gives the array away: it is freed once the
        first iteration no longer needs it.
    c1 : float, default=0.0
        L1 coefficient, ``c1 >= 0``. When positive the optimiser adds
        ``c1 * ||x||_1`` over all coordinates and runs OWL-QN with its
        projected backtracking line search, whatever ``linesearch`` says.
    num_memories : int, default=6
        Number of ``(s, y)`` pairs kept to approximate the inverse Hessian,
        ``>= 1``.
    epsilon : float, default=1e-5
        Convergence test, ``>= 0``: stop with ``CONVERGED`` when
        ``||g|| / max(1, ||x||) <= epsilon`` after an iteration (``g`` is the
        pseudo-gradient under OWL-QN); the same test at ``x0`` gives
        ``ALREADY_MINIMIZED``.
    period : int, default=10
        Distance, in iterations, of the relative-improvement test, ``>= 0``;
        0 disables that test. See ``delta``.
    delta : float, default=1e-5
        Relative-improvement test, ``>= 0``: at iteration ``k >= period``
        stop with ``STOPPED_DELTA`` when ``(f_{k-period} - f_k) / f_k <
        delta``, where ``f_0`` is the objective at ``x0``. (No absolute
        value, as in CRFsuite's libLBFGS; the objective never increases
        between accepted iterations, so for a positive objective the ratio
        is never negative.)
    max_iterations : int or None, default=None
        Stop with ``MAX_ITERATIONS`` after this many iterations, ``>= 0``;
        None or 0 means no limit. Exactly ``max_iterations`` iterations run
        unless another test stops earlier.
    linesearch : {"MoreThuente", "Backtracking", "StrongBacktracking", \
"BacktrackingArmijo"}, default="MoreThuente"
        Line search when ``c1 == 0``. ``"MoreThuente"``: More and Thuente's
        search for the strong Wolfe conditions (``ftol``, ``gtol``).
        ``"Backtracking"``: backtracking to the sufficient decrease (Armijo)
        and regular Wolfe curvature conditions (``ftol``, ``wolfe``).
        ``"StrongBacktracking"``: the same with the strong Wolfe condition.
        ``"BacktrackingArmijo"``: backtracking to sufficient decrease only.
    max_linesearch : int, default=20
        Maximum number of objective evaluations per line search, ``>= 1``;
        reaching it fails with ``MAX_LINESEARCH`` (or ``NON_FINITE``).
    ftol : float, default=1e-4
        Sufficient decrease parameter, in ``(0, 0.5)``: a step ``t`` must
        satisfy ``f(x + t d) <= f(x) + ftol * t * g.d`` (under OWL-QN,
        ``F(x_new) <= F(x) + ftol * (x_new - x).pg``).
    wolfe : float, default=0.9
        Curvature parameter of the backtracking searches, in ``(ftol, 1)``:
        ``g_new.d >= wolfe * g.d`` (regular Wolfe), and also
        ``g_new.d <= -wolfe * g.d`` for ``"StrongBacktracking"``.
    gtol : float, default=0.9
        Curvature parameter of More-Thuente, in ``(0, 1)``:
        ``|g_new.d| <= gtol * |g.d|``.
    xtol : float, default=1e-16
        More-Thuente fails with ``WIDTH_TOO_SMALL`` when the interval of
        uncertainty is narrower than ``xtol`` times its upper end, ``>= 0``.
    min_step : float, default=1e-20
        Smallest step length, ``> 0``; reaching it fails with
        ``MINIMUM_STEP``.
    max_step : float, default=1e20
        Largest step length, ``> min_step``; exceeding it fails with
        ``MAXIMUM_STEP``.
    callback : callable or None, default=None
        ``callback(info)`` with an :class:`IterationInfo`, called once after
        every accepted iteration and before that iteration's stopping tests.
        Returning True stops with ``CALLBACK_STOP`` (the reported point is
        the result).
    fresh_gradient : bool, default=False
        ``loss_gradient`` returns a new float64 gradient array at every call
        (one it does not keep): the optimizer keeps it without a copy.
        Otherwise every gradient is copied.
    n_threads : int, default=1
        Threads of the vector passes (two-loop recursion, trial points, the
        new pair, dot products), ``>= 1``: each sum is the sum of fixed
        blocks' sums in order, so any number gives the same iterates.

    Returns
    -------
    result : LBFGSResult
        The last accepted point, its objective and gradient, and the status.
        On a line-search failure the point is the last accepted one.

    Raises
    ------
    ValueError
        If an option is out of its range, ``x0`` is not a non-empty 1-D
        array, the objective or gradient at ``x0`` is not finite, or the
        gradient has the wrong shape.

    Notes
    -----
    The first iteration searches along ``-g`` from the step ``1 / ||g||``;
    later ones along the L-BFGS direction from step 1. A trial point where
    the objective or gradient is NaN or infinite is never accepted: the
    backtracking searches shrink the step, More-Thuente moves back halfway
    towards its best step so far; if the line search runs out of
    evaluations on such a point the status is ``NON_FINITE``. The optimiser
    adds ``O(num_memories * n)`` numpy work per iteration.

    Examples
    --------
    >>> a = np.array([1.0, 10.0])
    >>> res = minimize_lbfgs(lambda x: (0.5 * x @ (a * x), a * x), [1.0, 1.0])
    >>> res.status.name, bool(np.allclose(res.x, 0.0, atol=1e-4))
    ('CONVERGED', True)
    """
    n_threads = _check_int("n_threads", n_threads, 1, ">= 1")
    c1, m, epsilon, period, delta, max_iterations, opts = _validate(
        c1,
        num_memories,
        epsilon,
        period,
        delta,
        max_iterations,
        linesearch,
        max_linesearch,
        ftol,
        wolfe,
        gtol,
        xtol,
        min_step,
        max_step,
        callback,
    )
    opts = opts._replace(n_threads=n_threads)

    handed_over = isinstance(x0, Handover)
    if handed_over:
        x0 = x0.take()
    # x0 is never modified (nor x: every point is a new array), so no copy
    x = np.asarray(x0, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x0 must be a non-empty 1-D array, got shape {x.shape}.")
    x = np.ascontiguousarray(x)  # the compiled passes read contiguous vectors
    # the result must not be the caller's own array (a copy if the start is)
    start_is_callers = x is x0 and not handed_over
    del x0
    n = x.size
    owlqn = c1 > 0.0
    objective = _Objective(loss_gradient, c1, n, fresh_gradient)

    f, g = objective(x)
    if not _is_finite(f, g, n_threads):
        raise NonFiniteStartError("The objective or its gradient is not finite at x0.")
    pg = pseudo_gradient(x, g, c1) if owlqn else g

    def finish(status, n_iter):
        # x is the start point exactly when no iteration was accepted
        return LBFGSResult(
            x=x.copy() if n_iter == 0 and start_is_callers else x,
            fun=f,
            grad=g,
            status=status,
            n_iter=n_iter,
            n_evals=objective.n_evals,
            message=status.description,
        )

    # Objective history for the `period`/`delta` test: slot k % period holds
    # the value of iteration k - period when iteration k is tested.
    past_f = np.empty(period) if period > 0 else None
    if past_f is not None:
        past_f[0] = f

    xnorm = math.sqrt(_dot(x, x, n_threads))
    gnorm = math.sqrt(_dot(pg, pg, n_threads))
    if gnorm / max(1.0, xnorm) <= epsilon:
        return finish(LBFGSStatus.ALREADY_MINIMIZED, 0)

    # Limited memory: a ring buffer of the last m pairs (s, y). While a line
    # search runs, the slot the next pair goes to (the oldest pair, which the
    # direction has used, or an unused one) holds the search's start x0 and
    # -g, from which s and y are made (x and the gradient themselves are
    # freed: a vector fewer at the fit's peak).
    s_mem = np.zeros((m, n))
    y_mem = np.zeros((m, n))
    ys_mem = np.zeros(m)
    newest = -1
    n_pairs = 0
    gamma = 1.0

    d = -pg
    step = 1.0 / gnorm
    k = 1
    while True:
        slot = (newest + 1) % m
        x_prev = s_mem[slot]
        search_start(x, g, x_prev, y_mem[slot], n_threads)
        del x
        if owlqn:
            del g
            out = _backtracking_owlqn(objective, x_prev, f, pg, d, step, opts)
        else:
            dg_init = _dot(g, d, n_threads)
            del g, pg  # pg is g
            search = _more_thuente if opts.linesearch == "MoreThuente" else _backtracking
            out = search(objective, x_prev, f, dg_init, d, step, opts)
        if out.status is not None:
            # the last accepted point, exactly (copies: not views of the history)
            x, g = x_prev.copy(), np.negative(y_mem[slot])
            start_is_callers = False
            return finish(out.status, k - 1)  # x, f, g: last accepted point
        x, f, g, step, n_evals = out.x, out.f, out.g, out.step, out.n_evals
        del out
        # The new pair goes to that slot (kept below if the iteration does
        # not stop): y = g - g_prev is -g_prev + g (the same sum). One pass
        # makes it, the pseudo-gradient and the dot products below; the old
        # direction and pseudo-gradient are freed before it makes the new one.
        del d
        if owlqn:
            del pg
        pg, xx, pgpg, ys, yy, n_nonzero = lbfgs_pair(
            x, x_prev, g, s_mem[slot], y_mem[slot], c1, n_threads
        )
        del x_prev

        xnorm = math.sqrt(xx)
        gnorm = math.sqrt(pgpg)
        if callback is not None:
            # no local keeps the info: g must go before the next line search
            if callback(IterationInfo(k, x, f, g, xnorm, gnorm, step, n_evals, n_nonzero)):
                return finish(LBFGSStatus.CALLBACK_STOP, k)

        if gnorm / max(1.0, xnorm) <= epsilon:
            return finish(LBFGSStatus.CONVERGED, k)

        if past_f is not None:
            if k >= period:
                rate = _relative_improvement(past_f[k % period], f)
                if rate < delta:
                    return finish(LBFGSStatus.STOPPED_DELTA, k)
            past_f[k % period] = f

        if max_iterations and k + 1 > max_iterations:
            return finish(LBFGSStatus.MAX_ITERATIONS, k)

        # Keep the new pair (in the next slot of the ring buffer: the oldest
        # pair once it is full). A pair whose curvature y.s is not positive
        # is not used; it has overwritten the oldest pair, which is dropped.
        if ys > 0.0:
            newest = slot
            ys_mem[slot] = ys
            n_pairs = min(n_pairs + 1, m)
            gamma = ys / yy
        else:
            n_pairs = min(n_pairs, m - 1)

        # OWL-QN keeps only the components that move against the pseudo-gradient
        d = two_loop_direction(pg, s_mem, y_mem, ys_mem, newest, n_pairs, gamma, owlqn, n_threads)
        k += 1
        step = 1.0
