"""Tests of skcrf._training._lbfgs: L-BFGS / OWL-QN with libLBFGS (CRFsuite) semantics."""

import math
import weakref

import _reference
import numpy as np
import pytest

from skcrf._training._lbfgs import (
    Handover,
    IterationInfo,
    LBFGSResult,
    LBFGSStatus,
    _cubic_minimizer,
    _cubic_minimizer_safeguarded,
    _Interval,
    _quadratic_minimizer,
    _secant_minimizer,
    _update_trial_interval,
    minimize_lbfgs,
    pseudo_gradient,
    two_loop_direction,
)
from skcrf._training._lbfgs_kernels import (
    BLOCK,
    all_finite,
    block_runs,
    dot,
    lbfgs_pair,
    owlqn_trial,
    search_start,
    trial_point,
    two_loop,
)

# quick, run-time dependencies only: tools/build_wheels.py runs these against each wheel
pytestmark = pytest.mark.wheel

SMOOTH_SEARCHES = ["MoreThuente", "Backtracking", "StrongBacktracking"]
ALL_SEARCHES = SMOOTH_SEARCHES + ["BacktrackingArmijo"]


# ---------------------------------------------------------------------------
# Test problems
# ---------------------------------------------------------------------------


def make_quadratic(n=20, seed=0, minimum=1.0):
    """f(x) = 0.5 x'Ax - b'x + c with a random SPD A; returns (fun, solution).

    c makes the minimum value `minimum` (positive by default, like a CRF
    objective, so that the relative-improvement test behaves as intended).
    """
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    eigenvalues = np.linspace(1.0, 50.0, n)
    a = (q * eigenvalues) @ q.T
    b = rng.standard_normal(n)
    solution = np.linalg.solve(a, b)

    def fun(x):
        # Written around the solution so that f has no cancellation error.
        ar = a @ (x - solution)
        return minimum + 0.5 * (x - solution) @ ar, ar

    return fun, solution


def rosenbrock(x):
    """Chained Rosenbrock function, minimum 0 at (1, ..., 1)."""
    a, b = x[:-1], x[1:]
    f = np.sum(100.0 * (b - a**2) ** 2 + (1.0 - a) ** 2)
    g = np.zeros_like(x)
    g[:-1] = -400.0 * a * (b - a**2) - 2.0 * (1.0 - a)
    g[1:] += 200.0 * (b - a**2)
    return f, g


def rosenbrock_start(n):
    x0 = np.ones(n)
    x0[::2] = -1.2
    return x0


class Counting:
    """Wraps an objective and counts its calls."""

    def __init__(self, fun):
        self.fun = fun
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        return self.fun(x)


class Recorder:
    """A callback that records every IterationInfo."""

    def __init__(self, stop_at=None):
        self.infos = []
        self.stop_at = stop_at

    def __call__(self, info):
        assert isinstance(info, IterationInfo)
        self.infos.append(info._replace(x=info.x.copy(), grad=info.grad.copy()))
        return self.stop_at is not None and info.k >= self.stop_at


def test_rosenbrock_gradient_is_right():
    x = np.array([0.3, -0.7, 1.1, 0.2])
    _, g = rosenbrock(x)
    eps = 1e-6
    numeric = [
        (rosenbrock(x + eps * e)[0] - rosenbrock(x - eps * e)[0]) / (2 * eps) for e in np.eye(4)
    ]
    np.testing.assert_allclose(g, numeric, rtol=1e-6)


# ---------------------------------------------------------------------------
# Convergence
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("linesearch", ALL_SEARCHES)
def test_quadratic_converges_to_solution(linesearch):
    # Minimum value 0: near the optimum the Armijo decreases (~ ||g||^2) must
    # be representable next to f, which they would not be next to f = 1.
    fun, solution = make_quadratic(minimum=0.0)
    res = minimize_lbfgs(
        fun, np.zeros(20), linesearch=linesearch, epsilon=1e-8, period=0, max_iterations=1000
    )
    assert isinstance(res, LBFGSResult)
    assert res.status is LBFGSStatus.CONVERGED
    assert res.status.converged and not res.status.is_linesearch_failure
    np.testing.assert_allclose(res.x, solution, atol=1e-6)
    f, g = fun(res.x)
    assert res.fun == f
    np.testing.assert_array_equal(res.grad, g)
    assert np.linalg.norm(res.grad) / max(1.0, np.linalg.norm(res.x)) <= 1e-8
    assert res.message == LBFGSStatus.CONVERGED.description


@pytest.mark.parametrize("linesearch", SMOOTH_SEARCHES)
@pytest.mark.parametrize("n", [2, 10])
def test_rosenbrock_reaches_minimum(linesearch, n):
    res = minimize_lbfgs(
        rosenbrock,
        rosenbrock_start(n),
        linesearch=linesearch,
        epsilon=1e-10,
        period=0,
        max_iterations=2000,
        max_linesearch=40,
    )
    assert res.status is LBFGSStatus.CONVERGED, res.message
    np.testing.assert_allclose(res.x, np.ones(n), atol=1e-4)


def test_x0_is_not_modified():
    fun, _ = make_quadratic(5)
    x0 = np.full(5, 3.0)
    res = minimize_lbfgs(fun, x0)
    np.testing.assert_array_equal(x0, np.full(5, 3.0))
    assert res.x is not x0


def test_first_step_is_inverse_gradient_norm_then_one():
    # A quadratic with identity Hessian: the first trial step 1/||g||
    # satisfies the Wolfe conditions for Backtracking and is accepted as is.
    def fun(x):
        return 0.5 * x @ x, x.copy()

    rec = Recorder()
    x0 = np.array([3.0, 4.0])
    minimize_lbfgs(fun, x0, linesearch="Backtracking", callback=rec)
    assert rec.infos[0].step == pytest.approx(1.0 / 5.0)
    np.testing.assert_allclose(rec.infos[0].x, x0 * (1.0 - 1.0 / 5.0))
    # The second iteration's direction is exact (y = s), so step 1 is accepted.
    assert rec.infos[1].step == 1.0
    np.testing.assert_allclose(rec.infos[1].x, 0.0, atol=1e-12)


# ---------------------------------------------------------------------------
# OWL-QN
# ---------------------------------------------------------------------------


def test_pseudo_gradient_cases():
    c = 1.0
    x = np.array([2.0, -2.0, 0.0, 0.0, 0.0, 0.0])
    g = np.array([0.5, 0.5, -3.0, 3.0, 0.7, -1.0])
    expected = [1.5, -0.5, -2.0, 2.0, 0.0, 0.0]
    np.testing.assert_array_equal(pseudo_gradient(x, g, c), expected)


def test_owlqn_trial_projects_onto_the_orthant():
    # the orthant is x0's signs, and -pg0's where x0 is 0; a coordinate that
    # would leave it becomes 0
    x0 = np.array([1.0, -1.0, 0.0, 0.0, 2.0])
    pg0 = np.array([0.5, 0.5, 3.0, -3.0, 1.0])
    d = np.array([-3.0, 0.5, 1.0, 1.0, -1.0])
    x, l1, decrease = owlqn_trial(x0, pg0, d, 1.0)
    np.testing.assert_array_equal(x, [0.0, -0.5, 0.0, 1.0, 1.0])
    assert l1 == 2.5
    assert decrease == -4.25  # (x - x0) . pg0
    np.testing.assert_array_equal(x0, [1.0, -1.0, 0.0, 0.0, 2.0])  # input untouched


@pytest.mark.parametrize("n", [1, 7, 1001])
def test_owlqn_trial_matches_numpy(n):
    rng = np.random.default_rng(n)
    x0, pg0, d = rng.standard_normal((3, n))
    x0[rng.random(n) < 0.3] = 0.0
    x, l1, decrease = owlqn_trial(x0, pg0, d, 0.3)
    expected = _reference.owlqn_trial(x0, pg0, d, 0.3)
    np.testing.assert_array_equal(x, expected[0])  # the same arithmetic per element
    assert l1 == pytest.approx(expected[1], rel=1e-13)
    assert decrease == pytest.approx(expected[2], rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("c1", [0.0, 0.7])
def test_lbfgs_pair_matches_numpy(c1):
    # s = x - x_prev, y = -g_prev + g, the pseudo-gradient (zeros of x with
    # g inside and outside [-c1, c1], -0.0, NaN) and the four dot products
    rng = np.random.default_rng(3)
    n = 1003
    x, x_prev, g, g_prev = rng.standard_normal((4, n))
    x[rng.random(n) < 0.3] = 0.0
    x[:3] = [-0.0, 0.0, 0.0]
    g[:3] = [2.0, -2.0, 0.1]
    s, y = np.empty(n), -g_prev
    pg, xx, pgpg, ys, yy, n_nonzero = lbfgs_pair(x, x_prev, g, s, y, c1)
    assert n_nonzero == np.count_nonzero(x)  # -0.0 is 0
    np.testing.assert_array_equal(s, x - x_prev)
    np.testing.assert_array_equal(y, -g_prev + g)
    if c1 == 0.0:
        assert pg is g
    else:
        np.testing.assert_array_equal(pg, pseudo_gradient(x, g, c1))
    for got, expected in [(xx, x @ x), (pgpg, pg @ pg), (ys, y @ s), (yy, y @ y)]:
        assert got == pytest.approx(expected, rel=1e-12)
    x[5] = np.nan
    pg, *_, n_nonzero = lbfgs_pair(x, x_prev, g, s, y, c1)
    assert np.isnan(pg[5]) == (c1 > 0.0)
    assert n_nonzero == np.count_nonzero(x)  # NaN is not 0


def test_two_loop_with_no_memory_is_scaled_steepest_descent():
    g = np.array([1.0, -2.0])
    mem = np.zeros((3, 2))
    d = two_loop_direction(g, mem, mem, np.zeros(3), -1, 0, 0.5)
    np.testing.assert_array_equal(d, [-0.5, 1.0])
    np.testing.assert_array_equal(g, [1.0, -2.0])  # input untouched


def test_two_loop_recovers_newton_direction_on_quadratic():
    # With n exact, mutually A-conjugate pairs of a quadratic (here scaled
    # eigenvectors of A), -H g is the Newton step.
    fun, _ = make_quadratic(4, seed=3)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(4)
    a = np.array([fun(e)[1] - fun(np.zeros(4))[1] for e in np.eye(4)])
    s_mem = np.linalg.eigh(a)[1].T * np.array([[0.5], [2.0], [-1.0], [3.0]])
    y_mem = np.array([fun(x + s)[1] - fun(x)[1] for s in s_mem])
    ys = np.einsum("ij,ij->i", s_mem, y_mem)
    g = fun(x)[1]
    gamma = ys[3] / (y_mem[3] @ y_mem[3])
    d = two_loop_direction(g, s_mem, y_mem, ys, 3, 4, gamma)
    np.testing.assert_allclose(d, -np.linalg.solve(a, g), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("owlqn", [False, True])
@pytest.mark.parametrize("n", [1, 3, 4, 5, 1001])
@pytest.mark.parametrize(("newest", "n_pairs"), [(0, 0), (0, 1), (2, 3), (1, 4), (3, 4)])
def test_two_loop_kernel_matches_the_numpy_recursion(n, newest, n_pairs, owlqn):
    # the compiled passes (remainders of 4 included) against one numpy pass
    # at a time; the dot products are summed in another order
    rng = np.random.default_rng(n + 10 * newest + 100 * n_pairs)
    s_mem, y_mem = rng.standard_normal((2, 4, n))
    ys = rng.random(4) + 0.5
    g = rng.standard_normal(n)
    before = (g.copy(), s_mem.copy(), y_mem.copy(), ys.copy())
    d = two_loop_direction(g, s_mem, y_mem, ys, newest, n_pairs, 0.7, owlqn)
    expected = _reference.two_loop_direction(g, s_mem, y_mem, ys, newest, n_pairs, 0.7, owlqn)
    np.testing.assert_allclose(d, expected, rtol=1e-12, atol=1e-12 * np.abs(expected).max())
    np.testing.assert_array_equal(d == 0.0, expected == 0.0)
    if owlqn and n > 5 and n_pairs > 0:  # (with no pair, d = -0.7 g moves against g)
        assert (d == 0.0).any() and (d * g < 0.0).any()  # both kinds of component
    for array, copy in zip((g, s_mem, y_mem, ys), before):
        np.testing.assert_array_equal(array, copy)  # inputs untouched


def test_block_runs_cover_the_blocks_once():
    assert block_runs(10, 4) == (1, [(0, 1)])  # one block: one thread
    assert block_runs(3 * BLOCK + 1, 2) == (4, [(0, 2), (2, 4)])
    assert block_runs(2 * BLOCK, 5) == (2, [(0, 1), (1, 2)])


# three blocks and a remainder: the passes' sums are the blocks' in order
LONG = 3 * BLOCK + 17


@pytest.mark.parametrize("owlqn", [False, True])
def test_threaded_passes_give_the_same_bits(owlqn):
    rng = np.random.default_rng(5)
    n = LONG
    s_mem, y_mem = rng.standard_normal((2, 4, n))
    ys = rng.random(4) + 0.5
    g = rng.standard_normal(n)
    x0, pg0, d = rng.standard_normal((3, n))
    x0[rng.random(n) < 0.3] = 0.0
    outcomes = []
    for n_threads in (1, 2, 3):
        direction = two_loop_direction(g, s_mem, y_mem, ys, 2, 4, 0.7, owlqn, n_threads)
        trial = owlqn_trial(x0, pg0, d, 0.3, n_threads)
        s, y = np.empty(n), -g.copy()
        pair = lbfgs_pair(x0, pg0, d, s, y, 0.5 if owlqn else 0.0, n_threads)
        point = trial_point(x0, 0.3, d, n_threads)
        outcomes.append(
            (
                direction.tobytes(),
                trial[0].tobytes(),
                trial[1:],
                pair[0].tobytes(),
                pair[1:],
                s.tobytes(),
                y.tobytes(),
                point.tobytes(),
                dot(x0, d, n_threads),
            )
        )
    assert outcomes[1] == outcomes[0] and outcomes[2] == outcomes[0]
    expected = _reference.two_loop_direction(g, s_mem, y_mem, ys, 2, 4, 0.7, owlqn)
    np.testing.assert_allclose(
        np.frombuffer(outcomes[0][0]), expected, rtol=1e-10, atol=1e-10 * np.abs(expected).max()
    )
    np.testing.assert_array_equal(np.frombuffer(outcomes[0][7]), d * 0.3 + x0)
    assert outcomes[0][8] == pytest.approx(x0 @ d, rel=1e-12)


@pytest.mark.parametrize("c1", [0.0, 0.3])
def test_the_optimizer_on_threads_gives_the_same_iterates(c1):
    rng = np.random.default_rng(2)
    a = rng.random(LONG) + 0.1
    b = rng.standard_normal(LONG)

    def fun(x):
        r = a * x - b
        return 0.5 * float(r @ r), a * r

    results = [
        minimize_lbfgs(fun, np.zeros(LONG), c1=c1, max_iterations=15, n_threads=n_threads)
        for n_threads in (1, 2)
    ]
    assert results[0].x.tobytes() == results[1].x.tobytes()
    assert results[0].fun == results[1].fun and results[0].n_evals == results[1].n_evals


def test_search_start_copies_x_and_negates_g_on_any_threads():
    rng = np.random.default_rng(11)
    x, g = rng.standard_normal((2, LONG))
    g[:4] = [0.0, -0.0, np.inf, np.nan]
    expected_y = np.negative(g)
    for n_threads in (1, 2, 3):
        x_prev, y = np.full((2, LONG), 7.0)
        search_start(x, g, x_prev, y, n_threads)
        assert x_prev.tobytes() == x.tobytes()
        assert y.tobytes() == expected_y.tobytes()  # signed zeros and NaN's sign too
    with pytest.raises(ValueError, match="same length"):
        search_start(x, g[:-1], np.empty(LONG), np.empty(LONG))


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_all_finite_finds_a_non_finite_value_in_any_block(n_threads):
    assert all_finite(np.empty(0), n_threads)
    values = np.random.default_rng(4).standard_normal(LONG)
    assert all_finite(values, n_threads)
    # the first and last element of each block, and the remainder's last
    for where in sorted({0, LONG - 1, *range(BLOCK - 1, LONG, BLOCK), *range(0, LONG, BLOCK)}):
        for bad in (np.nan, np.inf, -np.inf):
            values[where] = bad
            assert not all_finite(values, n_threads)
            values[where] = 1.0e308  # large but finite
            assert all_finite(values, n_threads)


def test_two_loop_kernel_rejects_bad_slots_and_lengths():
    s_mem = np.zeros((3, 4))
    with pytest.raises(ValueError, match="slot out of range"):
        two_loop(np.ones(4), s_mem, s_mem, np.ones(3), np.array([3], dtype=np.intp), 1.0)
    with pytest.raises(ValueError, match="at least one pair"):
        two_loop(np.ones(5), s_mem, s_mem, np.ones(3), np.array([0], dtype=np.intp), 1.0)
    with pytest.raises(ValueError, match="at least one pair"):
        two_loop(np.ones(4), s_mem, s_mem, np.ones(3), np.array([], dtype=np.intp), 1.0)


def test_interpolation_helpers_find_known_minimizers():
    # t^3 - 3t has its local minimum at 1; (t - 1)^2 and its derivative too.
    assert _cubic_minimizer(0.0, 0.0, -3.0, 2.0, 2.0, 9.0) == pytest.approx(1.0)
    assert _quadratic_minimizer(0.0, 1.0, -2.0, 3.0, 4.0) == pytest.approx(1.0)
    assert _secant_minimizer(0.0, -2.0, 3.0, 4.0) == pytest.approx(1.0)
    # -t + 0.1 t^2 keeps decreasing past v = 1; its minimiser is 5.
    assert _cubic_minimizer_safeguarded(
        0.0, 0.0, -1.0, 1.0, -0.9, -0.8, 0.5, 7.0
    ) == pytest.approx(5.0)
    # No minimiser beyond v and theta < 0: go to the upper bound.
    assert _cubic_minimizer_safeguarded(0.0, 0.0, -1.0, 1.0, -0.2, -0.5, 0.5, 7.0) == 7.0


def test_trial_interval_update_keeps_new_step_inside_66_percent():
    # Bracketed in [0, 4]; the trial t = 1 has a lower value and a smaller
    # slope of the same sign (case 3): both interpolants point to 5, clipped
    # to tmax = 4, then to 66% of the way from the new best step 1 to 4.
    iv = _Interval(0.0, 0.0, -1.0, 4.0, 1.0, 2.0, bracketed=True)
    new_t, error = _update_trial_interval(iv, 1.0, -0.9, -0.8, 0.0, 4.0)
    assert error is None
    assert (iv.x, iv.fx, iv.dx) == (1.0, -0.9, -0.8)
    assert (iv.y, iv.bracketed) == (4.0, True)
    assert new_t == pytest.approx(1.0 + 0.66 * 3.0)


def test_trial_interval_update_case1_brackets():
    # A higher value at t = 4: the minimiser is bracketed in [0, 4].
    iv = _Interval(0.0, 0.0, -1.0, 0.0, 0.0, -1.0)
    new_t, error = _update_trial_interval(iv, 4.0, 10.0, 20.0, 0.0, 20.0)
    assert error is None and iv.bracketed
    assert (iv.x, iv.y, iv.fy) == (0.0, 4.0, 10.0)
    assert 0.0 < new_t < 0.66 * 4.0


@pytest.mark.parametrize(
    "t, dx, tmin, tmax, status",
    [
        (5.0, -1.0, 0.0, 4.0, LBFGSStatus.OUT_OF_INTERVAL),
        (2.0, 1.0, 0.0, 4.0, LBFGSStatus.INCREASE_GRADIENT),
        (2.0, -1.0, 4.0, 0.0, LBFGSStatus.INCORRECT_TMINMAX),
    ],
)
def test_trial_interval_update_errors(t, dx, tmin, tmax, status):
    iv = _Interval(0.0, 0.0, dx, 4.0, 1.0, 2.0, bracketed=True)
    assert _update_trial_interval(iv, t, 0.0, 0.0, tmin, tmax)[1] is status


def make_l1_least_squares(c1):
    """0.5 ||Xw - y||^2 with orthonormal X: the L1 solution is soft-thresholding."""
    rng = np.random.default_rng(42)
    x_design, _ = np.linalg.qr(rng.standard_normal((40, 12)))
    w_ls = np.array([3.0, -2.5, 0.3, -0.2, 1.5, 0.0, 0.05, -4.0, 0.6, -0.9, 2.0, 0.1])
    y = x_design @ w_ls + 0.1 * (np.eye(40)[0] - x_design @ (x_design.T @ np.eye(40)[0]))
    xty = x_design.T @ y
    solution = np.sign(xty) * np.maximum(np.abs(xty) - c1, 0.0)

    def smooth(w):
        r = x_design @ w - y
        return 0.5 * r @ r, x_design.T @ r

    return smooth, solution


@pytest.mark.parametrize("linesearch", SMOOTH_SEARCHES)
def test_owlqn_finds_soft_threshold_solution(linesearch):
    c1 = 0.7
    smooth, solution = make_l1_least_squares(c1)
    assert np.sum(solution == 0) >= 4 and np.sum(solution != 0) >= 4
    rec = Recorder()
    res = minimize_lbfgs(
        smooth,
        np.zeros(12),
        c1=c1,
        epsilon=1e-10,
        period=0,
        linesearch=linesearch,
        callback=rec,
        max_iterations=500,
    )
    assert res.status is LBFGSStatus.CONVERGED, res.message
    np.testing.assert_array_equal(res.x == 0, solution == 0)  # exact zeros
    np.testing.assert_allclose(res.x, solution, atol=1e-6)
    f_smooth, g = smooth(res.x)
    assert res.fun == pytest.approx(f_smooth + c1 * np.abs(res.x).sum(), rel=1e-14)
    np.testing.assert_allclose(res.grad, g)
    # gnorm is the norm of the pseudo-gradient, not of the smooth gradient.
    last = rec.infos[-1]
    assert last.gnorm == pytest.approx(np.linalg.norm(pseudo_gradient(res.x, g, c1)))
    assert last.gnorm < np.linalg.norm(g)
    funs = [info.fun for info in rec.infos]
    assert all(b <= a for a, b in zip(funs, funs[1:]))


def test_owlqn_linesearch_choice_is_ignored():
    c1 = 0.7
    smooth, _ = make_l1_least_squares(c1)
    results = [
        minimize_lbfgs(smooth, np.zeros(12), c1=c1, linesearch=ls) for ls in SMOOTH_SEARCHES
    ]
    for res in results[1:]:
        np.testing.assert_array_equal(res.x, results[0].x)
        assert res.n_evals == results[0].n_evals


def test_owlqn_huge_c1_gives_zero_at_once():
    smooth, _ = make_l1_least_squares(0.0)
    res = minimize_lbfgs(smooth, np.zeros(12), c1=1e6)
    assert res.status is LBFGSStatus.ALREADY_MINIMIZED
    assert res.n_iter == 0 and res.n_evals == 1


# ---------------------------------------------------------------------------
# Stopping rules
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("epsilon", [1e-3, 1e-6])
def test_epsilon_rule(epsilon):
    fun, _ = make_quadratic()
    rec = Recorder()
    res = minimize_lbfgs(fun, np.zeros(20), epsilon=epsilon, period=0, callback=rec)
    assert res.status is LBFGSStatus.CONVERGED
    ratio = np.linalg.norm(res.grad) / max(1.0, np.linalg.norm(res.x))
    assert ratio <= epsilon
    # Every earlier iteration failed the test.
    for info in rec.infos[:-1]:
        assert info.gnorm / max(1.0, info.xnorm) > epsilon
    assert rec.infos[-1].gnorm == pytest.approx(np.linalg.norm(res.grad))
    assert rec.infos[-1].xnorm == pytest.approx(np.linalg.norm(res.x))


def slow_quartic(x):
    """1 + sum(x^4): L-BFGS converges only linearly."""
    return 1.0 + np.sum(x**4), 4.0 * x**3


@pytest.mark.parametrize("period", [3, 10])
def test_delta_rule(period):
    delta = 1e-4
    rec = Recorder()
    x0 = np.array([1.0, -0.5, 2.0])
    res = minimize_lbfgs(
        slow_quartic,
        x0,
        epsilon=0.0,
        period=period,
        delta=delta,
        callback=rec,
        max_iterations=10_000,
    )
    assert res.status is LBFGSStatus.STOPPED_DELTA
    assert res.status.converged
    funs = [slow_quartic(x0)[0]] + [info.fun for info in rec.infos]
    k = len(funs) - 1
    assert k == res.n_iter and k >= period
    assert (funs[k - period] - funs[k]) / funs[k] < delta
    for j in range(period, k):
        assert (funs[j - period] - funs[j]) / funs[j] >= delta


def test_delta_rule_has_no_absolute_value():
    # CRFsuite's libLBFGS tests (f_{k-period} - f_k) / f_k < delta, without
    # fabs(): with a negative objective the ratio is negative and the test
    # stops as soon as k == period.
    fun, _ = make_quadratic(minimum=-10.0)
    res = minimize_lbfgs(fun, np.zeros(20), period=2, delta=1e-5)
    assert res.status is LBFGSStatus.STOPPED_DELTA
    assert res.n_iter == 2


def test_delta_rule_disabled_by_period_zero():
    res = minimize_lbfgs(
        slow_quartic,
        np.array([1.0, -0.5, 2.0]),
        epsilon=0.0,
        period=0,
        delta=1e-2,
        max_iterations=25,
    )
    assert res.status is LBFGSStatus.MAX_ITERATIONS


@pytest.mark.parametrize("max_iterations", [1, 7])
def test_max_iterations_rule(max_iterations):
    rec = Recorder()
    res = minimize_lbfgs(
        rosenbrock, rosenbrock_start(10), max_iterations=max_iterations, callback=rec
    )
    assert res.status is LBFGSStatus.MAX_ITERATIONS
    assert not res.status.converged and not res.status.is_linesearch_failure
    assert res.n_iter == max_iterations
    assert [info.k for info in rec.infos] == list(range(1, max_iterations + 1))
    np.testing.assert_array_equal(res.x, rec.infos[-1].x)
    assert res.fun == rec.infos[-1].fun


@pytest.mark.parametrize("max_iterations", [None, 0])
def test_max_iterations_none_or_zero_is_unlimited(max_iterations):
    res = minimize_lbfgs(rosenbrock, rosenbrock_start(10), max_iterations=max_iterations)
    assert res.status is LBFGSStatus.CONVERGED
    assert res.n_iter > 20


@pytest.mark.parametrize("c1", [0.0, 0.5])
def test_already_minimized(c1):
    fun, solution = make_quadratic()
    if c1:
        fun, solution = make_l1_least_squares(c1)
    rec = Recorder()
    res = minimize_lbfgs(fun, solution, c1=c1, callback=rec)
    assert res.status is LBFGSStatus.ALREADY_MINIMIZED
    assert res.status.converged
    assert res.n_iter == 0 and res.n_evals == 1 and rec.infos == []
    np.testing.assert_array_equal(res.x, solution)


def test_callback_stop():
    rec = Recorder(stop_at=3)
    res = minimize_lbfgs(rosenbrock, rosenbrock_start(10), callback=rec)
    assert res.status is LBFGSStatus.CALLBACK_STOP
    assert not res.status.converged  # a stop the user asked for
    assert res.n_iter == 3 and len(rec.infos) == 3
    np.testing.assert_array_equal(res.x, rec.infos[-1].x)


def test_callback_runs_before_the_stopping_tests():
    # The converging iteration is reported too.
    fun, _ = make_quadratic()
    rec = Recorder()
    res = minimize_lbfgs(fun, np.zeros(20), callback=rec, period=0)
    assert res.status is LBFGSStatus.CONVERGED
    assert len(rec.infos) == res.n_iter
    np.testing.assert_array_equal(rec.infos[-1].x, res.x)


# ---------------------------------------------------------------------------
# Line-search failures, evaluation counts, monotonicity
# ---------------------------------------------------------------------------


class TurnsInconsistent:
    """Rosenbrock whose gradient flips sign after `good_calls` evaluations."""

    def __init__(self, good_calls):
        self.good_calls = good_calls
        self.calls = 0

    def __call__(self, x):
        self.calls += 1
        f, g = rosenbrock(x)
        return f, (g if self.calls <= self.good_calls else -g)


@pytest.mark.parametrize("linesearch", ALL_SEARCHES)
@pytest.mark.parametrize("c1", [0.0, 0.1])
def test_linesearch_failure_keeps_last_accepted_point(linesearch, c1):
    fun = TurnsInconsistent(good_calls=15)
    rec = Recorder()
    res = minimize_lbfgs(fun, rosenbrock_start(4), linesearch=linesearch, c1=c1, callback=rec)
    assert res.status.is_linesearch_failure, res.status
    assert not res.status.converged
    assert res.n_iter == len(rec.infos) >= 1
    np.testing.assert_array_equal(res.x, rec.infos[-1].x)
    np.testing.assert_array_equal(res.grad, rec.infos[-1].grad)
    assert res.fun == rec.infos[-1].fun
    f, _ = rosenbrock(res.x)
    assert res.fun == f + c1 * np.abs(res.x).sum()
    assert res.n_evals == fun.calls


def test_ascent_direction_is_reported():
    # The gradient has the wrong sign from the start: -g is an ascent direction
    # for f, every trial increases f and the search fails at x0.
    def fun(x):
        return x @ x, -2.0 * x

    x0 = np.array([1.0, 2.0])
    res = minimize_lbfgs(fun, x0, linesearch="Backtracking")
    assert res.status in (LBFGSStatus.MAX_LINESEARCH, LBFGSStatus.MINIMUM_STEP)
    np.testing.assert_array_equal(res.x, x0)
    assert res.fun == 5.0 and res.n_iter == 0
    assert res.n_evals == 1 + 20


@pytest.mark.parametrize("linesearch", ALL_SEARCHES)
@pytest.mark.parametrize("c1", [0.0, 0.3])
def test_evaluation_counts_and_monotone_objective(linesearch, c1):
    fun = Counting(rosenbrock)
    rec = Recorder()
    res = minimize_lbfgs(
        fun, rosenbrock_start(6), linesearch=linesearch, c1=c1, callback=rec, max_iterations=60
    )
    assert res.n_evals == fun.calls
    assert res.n_evals == 1 + sum(info.n_evals_linesearch for info in rec.infos)
    assert all(info.n_evals_linesearch >= 1 for info in rec.infos)
    funs = [info.fun for info in rec.infos]
    assert all(b <= a for a, b in zip(funs, funs[1:]))
    assert funs[0] < rosenbrock(rosenbrock_start(6))[0] + c1 * 6.6


def test_max_linesearch_bounds_the_evaluations_per_iteration():
    rec = Recorder()
    minimize_lbfgs(
        rosenbrock, rosenbrock_start(10), max_linesearch=3, callback=rec, max_iterations=30
    )
    assert max(info.n_evals_linesearch for info in rec.infos) <= 3


# ---------------------------------------------------------------------------
# Non-finite objectives
# ---------------------------------------------------------------------------


class FiniteInsideBall:
    """log(cosh(x - 3)) (flat tails, so steps overshoot); inf or NaN for |x| > 6."""

    def __init__(self, bad_value):
        self.bad_value = bad_value
        self.bad_calls = 0

    def __call__(self, x):
        if np.max(np.abs(x)) > 6.0:
            self.bad_calls += 1
            return self.bad_value, np.full_like(x, self.bad_value)
        z = x - 3.0
        return float(np.sum(np.logaddexp(z, -z) - np.log(2.0))), np.tanh(z)


@pytest.mark.parametrize("linesearch", ALL_SEARCHES)
@pytest.mark.parametrize("bad_value", [np.inf, np.nan])
def test_non_finite_trial_points_are_backed_off(linesearch, bad_value):
    fun = FiniteInsideBall(bad_value)
    rec = Recorder()
    res = minimize_lbfgs(
        fun,
        np.array([-4.0, 0.5, 5.0]),
        linesearch=linesearch,
        epsilon=1e-8,
        callback=rec,
        max_linesearch=40,
    )
    assert fun.bad_calls > 0  # the test does exercise the non-finite path
    assert res.status is LBFGSStatus.CONVERGED, res.message
    np.testing.assert_allclose(res.x, 3.0, atol=1e-6)
    assert all(math.isfinite(info.fun) for info in rec.infos)
    assert np.isfinite(res.x).all() and math.isfinite(res.fun)


@pytest.mark.parametrize("linesearch", ALL_SEARCHES)
def test_non_finite_everywhere_but_x0_reports_non_finite(linesearch):
    x0 = np.array([1.0, 2.0])

    def fun(x):
        if np.array_equal(x, x0):
            return 5.0, x.copy()
        return np.nan, np.full_like(x, np.nan)

    res = minimize_lbfgs(fun, x0, linesearch=linesearch)
    assert res.status is LBFGSStatus.NON_FINITE
    assert res.status.is_linesearch_failure
    np.testing.assert_array_equal(res.x, x0)
    assert res.fun == 5.0


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_start_raises(bad):
    with pytest.raises(ValueError, match="x0"):
        minimize_lbfgs(lambda x: (bad, x.copy()), np.ones(3))
    with pytest.raises(ValueError, match="x0"):
        minimize_lbfgs(lambda x: (1.0, np.full(3, bad)), np.ones(3))


def test_keyboard_interrupt_propagates():
    def fun(x):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        minimize_lbfgs(fun, np.ones(3))


def test_reused_gradient_buffer_is_safe():
    fun, solution = make_quadratic(8, minimum=0.0)
    buffer = np.empty(8)

    def in_place(x):
        f, g = fun(x)
        buffer[:] = g
        return f, buffer

    res = minimize_lbfgs(in_place, np.zeros(8), epsilon=1e-8, period=0)
    assert res.status is LBFGSStatus.CONVERGED
    np.testing.assert_allclose(res.x, solution, atol=1e-6)
    assert res.grad is not buffer


# ---------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option, value",
    [
        ("num_memories", 0),
        ("num_memories", 2.5),
        ("epsilon", -1e-3),
        ("period", -1),
        ("delta", -1.0),
        ("max_iterations", -1),
        ("max_linesearch", 0),
        ("ftol", 0.0),
        ("ftol", 0.5),
        ("wolfe", 1e-5),
        ("wolfe", 1.0),
        ("gtol", 0.0),
        ("gtol", 1.5),
        ("xtol", -1.0),
        ("min_step", 0.0),
        ("max_step", 1e-30),
        ("c1", -0.1),
        ("c1", float("nan")),
        ("linesearch", "Wolfe"),
        ("callback", 3),
        ("n_threads", 0),
    ],
)
def test_invalid_options_raise(option, value):
    fun, _ = make_quadratic(3)
    with pytest.raises(ValueError, match=option):
        minimize_lbfgs(fun, np.zeros(3), **{option: value})


def test_unknown_linesearch_lists_valid_names():
    with pytest.raises(ValueError) as excinfo:
        minimize_lbfgs(rosenbrock, np.zeros(2), linesearch="morethuente")
    for name in ["MoreThuente", "Backtracking", "StrongBacktracking"]:
        assert name in str(excinfo.value)


@pytest.mark.parametrize("x0", [np.zeros((2, 2)), np.zeros(0), 1.0])
def test_x0_must_be_a_non_empty_vector(x0):
    with pytest.raises(ValueError, match="x0"):
        minimize_lbfgs(rosenbrock, x0)


def test_gradient_shape_is_checked():
    with pytest.raises(ValueError, match="shape"):
        minimize_lbfgs(lambda x: (1.0, np.zeros(5)), np.zeros(3))


def test_status_properties_are_exhaustive():
    converged = {s for s in LBFGSStatus if s.converged}
    failures = {s for s in LBFGSStatus if s.is_linesearch_failure}
    assert converged == {
        LBFGSStatus.CONVERGED,
        LBFGSStatus.STOPPED_DELTA,
        LBFGSStatus.ALREADY_MINIMIZED,
        LBFGSStatus.EARLY_STOPPING,
    }
    assert not converged & failures
    # normal stops that are not convergence: the limit, and a stop the user asked for
    assert set(LBFGSStatus) - converged - failures == {
        LBFGSStatus.MAX_ITERATIONS,
        LBFGSStatus.CALLBACK_STOP,
    }
    assert all(s.description for s in LBFGSStatus)


# ---------------------------------------------------------------------------
# Cross-check against CRFsuite itself
# ---------------------------------------------------------------------------


def make_logistic_crf_problem(seed=0, n_samples=60, n_attrs=6, n_labels=3, scale=1.0):
    """A CRF on length-1 sequences is multinomial logistic regression.

    With all possible state features and non-negative attribute values (so
    that no feature falls below min_freq = 0), CRFsuite's objective is
    sum_i -log softmax(x_i W)_{y_i} + c2 * ||W||^2, which we can compute.
    `scale` multiplies the attribute values: large values make step 1
    overshoot (several More-Thuente trials), small ones make it too short
    (the backtracking searches grow the step by 2.1).
    """
    rng = np.random.default_rng(seed)
    x = np.abs(rng.standard_normal((n_samples, n_attrs))).round(3)
    w_true = rng.standard_normal((n_attrs, n_labels)) * 2.0
    w_true -= w_true.mean(axis=0)
    scores = x @ w_true
    probs = np.exp(scores - scores.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(n_labels, p=p) for p in probs])
    _, y = np.unique(y, return_inverse=True)  # keep only labels that occur
    n_labels = y.max() + 1
    rows = np.arange(n_samples)
    x = x * scale  # after drawing the labels

    def objective(c2):
        def fun(w):
            s = x @ w.reshape(n_attrs, n_labels)
            top = s.max(axis=1)
            log_z = top + np.log(np.exp(s - top[:, None]).sum(axis=1))
            loss = np.sum(log_z - s[rows, y]) + c2 * w @ w
            p = np.exp(s - log_z[:, None])
            p[rows, y] -= 1.0
            return loss, (x.T @ p).ravel() + 2.0 * c2 * w

        return fun

    return x, y, n_labels, objective


@pytest.mark.parametrize(
    "c1, c2, linesearch, seed, scale",
    [
        (0.0, 1.0, "MoreThuente", 0, 1.0),
        (0.0, 0.01, "MoreThuente", 0, 1.0),
        (0.0, 0.01, "Backtracking", 0, 1.0),
        (0.0, 0.01, "StrongBacktracking", 0, 1.0),
        (0.5, 0.01, "MoreThuente", 0, 1.0),  # OWL-QN ignores the line search name
        (2.0, 0.0, "Backtracking", 0, 1.0),
        (0.0, 1.0, "MoreThuente", 0, 20.0),  # several More-Thuente trials
        (0.0, 0.01, "MoreThuente", 2, 20.0),
        (0.0, 0.01, "Backtracking", 4, 0.05),  # the step grows by 2.1
        (0.0, 0.01, "StrongBacktracking", 4, 0.05),
        (0.3, 0.01, "MoreThuente", 0, 20.0),
        (0.0, 0.01, "MoreThuente", 0, 0.01),  # interval update, case 3
        (0.0, 0.01, "MoreThuente", 1, 5.0),  # interval update, case 2
        (0.0, 0.01, "StrongBacktracking", 0, 5.0),  # strong Wolfe shrinks
    ],
)
def test_iterates_match_crfsuite(tmp_path, c1, c2, linesearch, seed, scale):
    pycrfsuite = pytest.importorskip("pycrfsuite")
    x, y, n_labels, objective = make_logistic_crf_problem(seed=seed, scale=scale)
    n_attrs = x.shape[1]
    max_iterations = 30

    trainer = pycrfsuite.Trainer(verbose=False)
    for xi, yi in zip(x, y):
        trainer.append([{f"a{j}": float(v) for j, v in enumerate(xi)}], [f"L{yi}"])
    trainer.set_params(
        {
            "c1": c1,
            "c2": c2,
            "linesearch": linesearch,
            "max_iterations": max_iterations,
            "feature.possible_states": True,
        }
    )
    model = str(tmp_path / "model.crfsuite")
    trainer.train(model)
    log = trainer.logparser.iterations
    tagger = pycrfsuite.Tagger()
    tagger.open(model)
    weights = tagger.info().state_features
    tagger.close()

    rec = Recorder()
    res = minimize_lbfgs(
        objective(c2),
        np.zeros(n_attrs * n_labels),
        c1=c1,
        linesearch=linesearch,
        max_iterations=max_iterations,
        callback=rec,
    )
    assert len(rec.infos) == len(log)
    for theirs, ours in zip(log, rec.infos):
        assert ours.fun == pytest.approx(theirs["loss"], rel=1e-7, abs=1e-6)
        assert ours.gnorm == pytest.approx(theirs["error_norm"], abs=2e-6)
        assert ours.xnorm == pytest.approx(theirs["feature_norm"], abs=2e-6)
        assert ours.step == pytest.approx(theirs["linesearch_step"], abs=2e-6)
        assert ours.n_evals_linesearch == theirs["linesearch_trials"]
        assert np.count_nonzero(ours.x) == theirs["active_features"]
    w = res.x.reshape(n_attrs, n_labels)
    theirs = np.array(
        [[weights.get((f"a{a}", f"L{k}"), 0.0) for k in range(n_labels)] for a in range(n_attrs)]
    )
    np.testing.assert_allclose(w, theirs, atol=2e-6)


@pytest.mark.parametrize("num_memories", [1, 3])
def test_negative_curvature_pairs_are_skipped(num_memories):
    # -cos(x) is concave on (pi/2, 3pi/2): from x = 2.5 the first Armijo step
    # lands near 1.5 where the slope is larger, so y.s < 0. Such pairs must
    # not enter the memory (the metric would stop being positive definite).
    def fun(x):
        return float(np.sum(-np.cos(x))), np.sin(x)

    x0 = np.array([2.5, 2.4, -2.6])
    res = minimize_lbfgs(
        fun,
        x0,
        linesearch="BacktrackingArmijo",
        epsilon=1e-9,
        period=0,
        num_memories=num_memories,
        max_iterations=200,
    )
    assert res.status is LBFGSStatus.CONVERGED, res.message
    np.testing.assert_allclose(res.x, 0.0, atol=1e-8)


@pytest.mark.parametrize("c1", [0.0, 0.7])
def test_fresh_gradient_changes_nothing_but_the_copies(c1):
    # the objective returns a new array every call: kept without a copy, the
    # iterates and the result are the same, bit for bit
    smooth, _ = make_l1_least_squares(0.7)
    runs = [
        minimize_lbfgs(smooth, np.zeros(12), c1=c1, max_iterations=30, fresh_gradient=fresh)
        for fresh in (False, True)
    ]
    np.testing.assert_array_equal(runs[0].x, runs[1].x)
    np.testing.assert_array_equal(runs[0].grad, runs[1].grad)
    assert (runs[0].fun, runs[0].n_evals) == (runs[1].fun, runs[1].n_evals)


@pytest.mark.parametrize("c1", [0.0, 0.5])
def test_no_gradient_is_held_while_the_next_point_is_evaluated(c1):
    # the y slot keeps -g: an accepted gradient (also the one the callback
    # saw) must be gone before the line search evaluates the next trial
    # point, or a large model holds one vector too many at fit's peak
    fun, _ = make_quadratic(30)
    returned = []

    def tracked(x):
        alive = sum(ref() is not None for ref in returned)
        assert alive == 0, f"{alive} earlier gradient(s) still held"
        f, g = fun(x)
        returned.append(weakref.ref(g))
        return f, g

    res = minimize_lbfgs(
        tracked,
        np.zeros(30),
        c1=c1,
        max_iterations=10,
        callback=lambda info: False,
        fresh_gradient=True,
    )
    assert res.n_iter == 10 and len(returned) > 10


@pytest.mark.parametrize("c1", [0.0, 0.5])
def test_a_handed_over_start_is_freed_after_the_first_iteration(c1):
    fun, _ = make_quadratic(30)
    start = np.linspace(-1.0, 1.0, 30)
    plain = minimize_lbfgs(fun, start, c1=c1, max_iterations=8)
    calls = []

    def tracked(x):
        calls.append(handed_start() is not None)
        return fun(x)

    handover = Handover(start.copy())
    handed_start = weakref.ref(handover.array)
    res = minimize_lbfgs(tracked, handover, c1=c1, max_iterations=8, callback=lambda info: False)
    assert handover.array is None and handed_start() is None
    # alive for the start's evaluation only: the line searches start from its
    # copy in the history's free slot
    assert calls[0] and not any(calls[1:])
    # the same run, bit for bit
    np.testing.assert_array_equal(res.x, plain.x)
    assert (res.fun, res.n_iter, res.n_evals) == (plain.fun, plain.n_iter, plain.n_evals)


def test_a_failed_first_search_from_a_handed_over_start_returns_its_values():
    def fun(x):
        return x @ x, -2.0 * x  # an ascent direction: every trial fails

    x0 = np.array([1.0, 2.0])
    handover = Handover(x0)
    assert len(handover) == 2
    x0_values = x0.copy()
    res = minimize_lbfgs(fun, handover, linesearch="MoreThuente", max_linesearch=3)
    assert res.n_iter == 0 and res.x is not x0  # (x0 itself was let go before the search)
    np.testing.assert_array_equal(res.x, x0_values)
    assert handover.array is None


def test_a_failed_first_search_returns_a_copy_of_x0_and_its_gradient():
    def fun(x):
        return x @ x, -2.0 * x  # an ascent direction: every trial fails

    x0 = np.array([1.0, 2.0])
    res = minimize_lbfgs(fun, x0, linesearch="MoreThuente", max_linesearch=3)
    assert res.x is not x0 and res.n_iter == 0
    np.testing.assert_array_equal(res.x, x0)
    np.testing.assert_array_equal(res.grad, -2.0 * x0)
