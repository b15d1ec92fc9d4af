"""Tests of the online trainers (skcrf._training._online, skcrf._training._online_train).

The compiled epochs are checked against a plain numpy oracle written from
CRFsuite's definitions: per sequence, feature vectors F(x, y) as dense
arrays, Viterbi and the l2sgd expectations by enumerating every labelling of
tiny sequences.
"""

import itertools

import numpy as np
import pytest

from skcrf._featurize._encoded import Encoded
from skcrf._training._objective import select_features
from skcrf._training._online_train import DEFAULTS, OnlineStatus, train_online

# quick, run-time dependencies only: tools/build_wheels.py runs these against each wheel
pytestmark = pytest.mark.wheel

# -- problems -----------------------------------------------------------------


def make_problem(
    seed,
    n_sequences=8,
    n_attributes=6,
    n_labels=3,
    max_length=4,
    separable=False,
    all_transitions=False,
):
    """Random tiny sequences: Encoded, labels, model; one empty sequence."""
    rng = np.random.RandomState(seed)
    lengths = rng.randint(1, max_length + 1, size=n_sequences)
    lengths[n_sequences // 2] = 0  # skipped by the trainers
    indptr, ids, values, labels = [0], [], [], []
    for length in lengths:
        for _ in range(length):
            label = rng.randint(n_labels)
            labels.append(label)
            row = list(rng.choice(n_attributes, size=rng.randint(1, 4), replace=False))
            if separable:
                row.append(n_attributes + label)  # an attribute naming the label
            if rng.rand() < 0.3:
                row.append(row[0])  # the same id twice: values add
            ids.extend(row)
            values.extend(rng.choice([0.5, 1.0, 1.5, 2.0], size=len(row)))
            indptr.append(len(ids))
    n_attr = n_attributes + (n_labels if separable else 0)
    encoded = Encoded(
        np.array(indptr, dtype=np.int64),
        np.array(ids, dtype=np.int32),
        np.array(values, dtype=np.float64),
        np.array(lengths, dtype=np.intp),
    )
    labels = np.array(labels, dtype=np.intp)
    classes = np.array([f"L{j}" for j in range(n_labels)], dtype=object)
    attributes = [f"a{i}" for i in range(n_attr)]
    model, _ = select_features(
        encoded, labels, classes, attributes, all_possible_transitions=all_transitions
    )
    return encoded, labels, model


class Oracle:
    """Per-sequence feature vectors and brute-force inference of a problem."""

    def __init__(self, encoded, labels, model):
        self.model = model
        self.L = model.n_labels
        self.K = model.n_features
        starts = np.concatenate([[0], np.cumsum(encoded.lengths)[:-1]])
        self.sequences = []  # (rows, gold) of every non-empty sequence
        for start, length in zip(starts, encoded.lengths):
            if length == 0:
                continue
            rows = [
                list(
                    zip(
                        encoded.ids[encoded.indptr[r] : encoded.indptr[r + 1]],
                        encoded.values[encoded.indptr[r] : encoded.indptr[r + 1]],
                    )
                )
                for r in range(start, start + length)
            ]
            self.sequences.append((rows, tuple(labels[start : start + length])))
        self.state = {}
        for a in range(model.n_attributes):
            for k in range(model.state_ptr[a], model.state_ptr[a + 1]):
                self.state[a, int(model.state_labels[k])] = k
        self.trans = {int(f): model.n_states + m for m, f in enumerate(model.transition_index)}

    def phi(self, s, path):
        rows, _ = self.sequences[s]
        f = np.zeros(self.K)
        for t, row in enumerate(rows):
            for a, v in row:
                k = self.state.get((int(a), path[t]))
                if k is not None:
                    f[k] += v
            if t > 0:
                k = self.trans.get(path[t - 1] * self.L + path[t])
                if k is not None:
                    f[k] += 1.0
        return f

    def paths(self, s):
        return list(itertools.product(range(self.L), repeat=len(self.sequences[s][0])))

    def viterbi(self, w, s):
        """Best path; ties as skcrf/CRFsuite (lowest last label, then backwards)."""
        paths = self.paths(s)
        scores = np.array([w @ self.phi(s, p) for p in paths])
        best = scores.max()
        tied = [p for p, sc in zip(paths, scores) if sc >= best - 1e-9 * (1 + abs(best))]
        return min(tied, key=lambda p: p[::-1]), best

    def expectations(self, w, s):
        """log Z and E[F(x, Y)] by enumeration."""
        paths = self.paths(s)
        feats = np.array([self.phi(s, p) for p in paths])
        scores = feats @ w
        log_z = np.logaddexp.reduce(scores)
        return log_z, np.exp(scores - log_z) @ feats


# -- oracle epochs --------------------------------------------------------------


def oracle_margin_epochs(algorithm, oracle, params, rs, n_epochs):
    """ap / pa / arow from scratch, as CRFsuite: (state dict, losses)."""
    n, K = len(oracle.sequences), oracle.K
    w, ws, c = np.zeros(K), np.zeros(K), 1.0
    cov = np.full(K, params.get("variance", 1.0))
    order = np.arange(n, dtype=np.intp)
    losses = []
    for _ in range(n_epochs):
        rs.shuffle(order)
        loss = 0.0
        for s in order:
            gold = oracle.sequences[s][1]
            z, sv = oracle.viterbi(w, s)
            d = sum(a != b for a, b in zip(gold, z))
            if d > 0:
                delta = oracle.phi(s, gold) - oracle.phi(s, z)
                sc = w @ oracle.phi(s, gold)
                if algorithm == "ap":
                    w += delta
                    ws += c * delta
                    loss += d / len(gold)
                elif algorithm == "pa":
                    cost = sv - sc + (np.sqrt(d) if params["error_sensitive"] else 1.0)
                    norm2 = delta @ delta
                    if norm2 > 0:
                        tau = {
                            0: cost / norm2,
                            1: min(params["c"], cost / norm2),
                            2: cost / (norm2 + 0.5 / params["c"]),
                        }[params["pa_type"]]
                        w += tau * delta
                        ws += tau * c * delta
                    loss += cost
                else:
                    cost = sv - sc + d
                    alpha = cost / (params["gamma"] + cov @ delta**2)
                    w += alpha * cov * delta
                    cov = 1.0 / (1.0 / cov + delta**2 / params["gamma"])
                    loss += cost
            c += 1.0
        losses.append(loss)
    return dict(w=w, ws=ws, c=c, cov=cov), losses


def oracle_l2sgd_epoch(oracle, order, w, t0, lam, t):
    """One SGD epoch on the true weights (no decay trick); returns loss, t."""
    loss = 0.0
    for s in order:
        eta = 1.0 / (lam * (t0 + t))
        w *= 1.0 - eta * lam
        log_z, expected = oracle.expectations(w, s)
        observed = oracle.phi(s, oracle.sequences[s][1])
        loss += log_z - w @ observed
        w += eta * (observed - expected)
        t += 1
    return loss, t


def problem_of(encoded, labels, model):
    from skcrf._training._online_train import _problem

    return _problem(encoded, labels, model)


def run(algorithm, data, seed=0, **kwargs):
    encoded, labels, model = data
    settings = dict(DEFAULTS[algorithm], **kwargs.pop("settings", {}))
    return train_online(
        algorithm,
        encoded,
        labels,
        model,
        settings,
        random_state=np.random.RandomState(seed),
        **kwargs,
    )


# -- (1) compiled epochs against the oracle ---------------------------------------


@pytest.mark.parametrize(
    "algorithm,params",
    [
        ("ap", {}),
        ("pa", {"pa_type": 0, "error_sensitive": True}),
        ("pa", {"pa_type": 1, "c": 0.3, "error_sensitive": False}),
        ("pa", {"pa_type": 2, "c": 0.7, "error_sensitive": True, "averaging": False}),
        ("arow", {"variance": 0.5, "gamma": 2.0}),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_margin_epochs_match_oracle(algorithm, params, seed):
    data = make_problem(seed, all_transitions=seed == 1)
    settings = dict(DEFAULTS[algorithm], **params)
    entries = []
    result = run(
        algorithm,
        data,
        seed=seed,
        settings=settings,
        n_epochs=3,
        callback=lambda entry, w: entries.append((entry, w.copy())),
    )
    expected, losses = oracle_margin_epochs(
        algorithm, Oracle(*data), settings, np.random.RandomState(seed), 3
    )
    state = result.state
    np.testing.assert_allclose(state.weights, expected["w"], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose([e["loss"] for e, _ in entries], losses, rtol=1e-10, atol=1e-10)
    if algorithm == "arow":
        np.testing.assert_allclose(state.variances, expected["cov"], rtol=1e-10)
        np.testing.assert_allclose(result.x, expected["w"], rtol=1e-10, atol=1e-10)
    else:
        np.testing.assert_allclose(state.weight_sums, expected["ws"], rtol=1e-10, atol=1e-10)
        assert state.counter == expected["c"]
        average = expected["w"] - expected["ws"] / expected["c"]
        out = average if algorithm == "ap" or settings["averaging"] else expected["w"]
        np.testing.assert_allclose(result.x, out, rtol=1e-10, atol=1e-10)
    # the callback's weights are the output weights of that epoch
    np.testing.assert_array_equal(entries[-1][1], result.x)
    assert entries[-1][0]["active_features"] == np.count_nonzero(result.x)
    assert entries[-1][0]["feature_norm"] == pytest.approx(np.linalg.norm(result.x))
    assert [e["num"] for e, _ in entries] == [1, 2, 3]
    assert np.any(result.x != 0)


@pytest.mark.parametrize("seed", [0, 3])
def test_l2sgd_epoch_matches_oracle(seed):
    data = make_problem(seed, all_transitions=seed == 3)
    oracle = Oracle(*data)
    problem = problem_of(*data)
    rng = np.random.RandomState(seed)
    w0 = rng.normal(scale=0.5, size=oracle.K)
    order = rng.permutation(len(oracle.sequences)).astype(np.intp)
    # eta * lam = 1 / (t0 + t): t0 = 1.5 exercises a strong decay within the epoch
    for t0, lam, t in [(40.0, 0.3, 0.0), (1.5, 0.5, 0.0), (7.0, 0.1, 5.0)]:
        w = w0.copy()
        loss, t_end, eta = problem.l2sgd_epoch(order, w, t0, lam, t)
        w_ref = w0.copy()
        loss_ref, t_ref = oracle_l2sgd_epoch(oracle, order, w_ref, t0, lam, t)
        assert t_end == t_ref
        assert eta == pytest.approx(1.0 / (lam * (t0 + t_ref - 1)))
        assert loss == pytest.approx(loss_ref, rel=1e-10)
        np.testing.assert_allclose(w, w_ref, rtol=1e-10, atol=1e-10)


def test_l2sgd_calibration_follows_crfsuite():
    data = make_problem(5)
    oracle = Oracle(*data)
    settings = dict(DEFAULTS["l2sgd"], calibration_candidates=3, calibration_max_trials=9)
    result = run("l2sgd", data, seed=2, settings=settings, n_epochs=1)
    cal = result.calibration
    n = len(oracle.sequences)
    lam = 2.0 * settings["c2"] / n
    order = np.arange(n, dtype=np.intp)
    np.random.RandomState(2).shuffle(order)
    init = sum(len(oracle.sequences[s][1]) for s in order) * np.log(oracle.L)
    assert cal["initial_loss"] == pytest.approx(init)
    etas = [eta for eta, _, _ in cal["trials"]]
    assert len(etas) <= settings["calibration_max_trials"] - 1
    for eta, loss, accepted in cal["trials"]:
        w = np.zeros(oracle.K)
        ref, _ = oracle_l2sgd_epoch(oracle, order, w, 1.0 / (lam * eta), lam, 0.0)
        ref += 0.5 * lam * (w @ w) * n
        assert loss == pytest.approx(ref, rel=1e-9)
        assert accepted == (ref < init)
    # eta grows by the rate while accepted (and fewer than `candidates`), then
    # shrinks from eta0 / rate until `candidates` more are accepted
    eta, num, decreasing, expected_etas = 0.1, 3, False, []
    for _, _, accepted in cal["trials"]:
        expected_etas.append(eta)
        num -= accepted
        if not decreasing and accepted and num > 0:
            eta *= 2.0
        elif not decreasing:
            decreasing, num, eta = True, 3, 0.05
        else:
            eta /= 2.0
    assert etas == pytest.approx(expected_etas)
    assert len(etas) == 8 or (decreasing and num == 0)
    assert decreasing
    finite = [(loss, eta) for eta, loss, _ in cal["trials"] if np.isfinite(loss)]
    assert cal["eta"] == min(finite)[1]
    assert result.state.eta == cal["eta"]


# -- (2) forward-backward ---------------------------------------------------------


def expected_counts(problem, data, s, w):
    """log Z and E[F] of sequence s from the compiled marginals."""
    encoded, labels, model = data
    log_z, marg, pairs = problem.sequence_marginals(s, w)
    oracle = Oracle(*data)
    e = np.zeros(model.n_features)
    for t, row in enumerate(oracle.sequences[s][0]):
        for a, v in row:
            for j in range(model.n_labels):
                k = oracle.state.get((int(a), j))
                if k is not None:
                    e[k] += v * marg[t, j]
    e[model.n_states :] = pairs.ravel()[model.transition_index]
    return log_z, e


def test_l2sgd_gradient_finite_differences():
    data = make_problem(7, all_transitions=True)
    problem = problem_of(*data)
    oracle = Oracle(*data)
    rng = np.random.RandomState(0)
    w = rng.normal(size=oracle.K)
    for s in range(len(oracle.sequences)):
        gold = oracle.phi(s, oracle.sequences[s][1])
        log_z, e = expected_counts(problem, data, s, w)
        ref_z, ref_e = oracle.expectations(w, s)
        assert log_z == pytest.approx(ref_z, rel=1e-12)
        np.testing.assert_allclose(e, ref_e, atol=1e-12)
        grad = e - gold  # gradient of -log p(y | x)
        h = 1e-6
        for k in rng.choice(oracle.K, size=10, replace=False):
            step = np.zeros(oracle.K)
            step[k] = h
            f_plus = problem.sequence_marginals(s, w + step)[0] - (w + step) @ gold
            f_minus = problem.sequence_marginals(s, w - step)[0] - (w - step) @ gold
            assert (f_plus - f_minus) / (2 * h) == pytest.approx(grad[k], abs=1e-7)


def test_forward_backward_large_weights_and_log_domain():
    data = make_problem(8, n_sequences=3, max_length=300, all_transitions=True)
    problem = problem_of(*data)
    rng = np.random.RandomState(1)
    w = rng.normal(scale=300.0, size=data[2].n_features)  # spreads of ~1000
    for s in range(problem.n_sequences):
        problem.spread_limit = 500.0
        log_z, marg, pairs = problem.sequence_marginals(s, w)
        problem.spread_limit = -1.0  # force the log domain
        log_z2, marg2, pairs2 = problem.sequence_marginals(s, w)
        assert np.isfinite(log_z) and np.isfinite(marg).all() and np.isfinite(pairs).all()
        assert log_z == pytest.approx(log_z2, rel=1e-12)
        np.testing.assert_allclose(marg.sum(axis=1), 1.0)
        np.testing.assert_allclose(marg, marg2, atol=1e-9)
        np.testing.assert_allclose(pairs, pairs2, atol=1e-8)
    # moderate weights on the scaled path agree with the log domain too
    w = rng.normal(scale=3.0, size=data[2].n_features)
    problem.spread_limit = 500.0
    a = problem.sequence_marginals(0, w)
    problem.spread_limit = -1.0
    b = problem.sequence_marginals(0, w)
    assert a[0] == pytest.approx(b[0], rel=1e-12)
    np.testing.assert_allclose(a[1], b[1], atol=1e-10)
    np.testing.assert_allclose(a[2], b[2], atol=1e-8)


# -- (3) reproducibility ----------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["l2sgd", "asgd", "ap", "pa", "arow"])
def test_reproducible(algorithm):
    data = make_problem(11, n_sequences=12)
    settings = {"max_iterations": 3}
    a = run(algorithm, data, seed=0, settings=settings)
    b = run(algorithm, data, seed=0, settings=settings)
    c = run(algorithm, data, seed=1, settings=settings)
    np.testing.assert_array_equal(a.x, b.x)
    assert not np.array_equal(a.x, c.x)


# -- (4) separable problems ---------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["l2sgd", "asgd", "ap", "pa", "arow"])
def test_fits_separable_problem(algorithm):
    data = make_problem(13, n_sequences=10, separable=True)
    settings = {"max_iterations": 30, "c2": 0.01}
    result = run(algorithm, data, settings=settings)
    oracle = Oracle(*data)
    errors = sum(
        oracle.viterbi(result.x, s)[0] != oracle.sequences[s][1]
        for s in range(len(oracle.sequences))
    )
    if algorithm == "ap":
        assert errors <= 1  # the average need not separate (as CRFsuite's tests note)
    else:
        assert errors == 0
    assert np.isfinite(result.x).all()


# -- (5) resume and expanded ------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["l2sgd", "asgd", "ap", "pa", "arow"])
def test_resume_equals_uninterrupted(algorithm):
    data = make_problem(17, n_sequences=10)
    rs = np.random.RandomState(4)
    settings = dict(DEFAULTS[algorithm])
    encoded, labels, model = data
    first = train_online(algorithm, encoded, labels, model, settings, random_state=rs, n_epochs=1)
    second = train_online(
        algorithm,
        encoded,
        labels,
        model,
        settings,
        random_state=rs,
        n_epochs=1,
        resume=first.state,
    )
    whole = run(algorithm, data, seed=4, n_epochs=2)
    np.testing.assert_array_equal(second.x, whole.x)
    np.testing.assert_array_equal(second.state.weights, whole.state.weights)
    assert second.state.n_epochs == whole.state.n_epochs == 2
    assert second.status is OnlineStatus.EPOCHS_DONE and not second.status.converged
    # resuming copies: the first state is unchanged
    assert first.state.n_epochs == 1


@pytest.mark.parametrize("algorithm", ["ap", "arow"])
def test_expanded_state(algorithm):
    data = make_problem(19)
    result = run(algorithm, data, n_epochs=2)
    state = result.state
    K = state.n_features
    index = np.arange(K) * 2 + 1  # old features at odd positions
    bigger = state.expanded(index, 2 * K + 1)
    np.testing.assert_array_equal(bigger.weights[index], state.weights)
    assert not bigger.weights[::2].any()
    if algorithm == "arow":
        np.testing.assert_array_equal(bigger.variances[index], state.variances)
        assert (bigger.variances[::2] == state.initial_variance).all()
    else:
        np.testing.assert_array_equal(bigger.weight_sums[index], state.weight_sums)
        assert bigger.counter == state.counter
    with pytest.raises(ValueError, match="expand"):
        run(algorithm, data, resume=bigger, n_epochs=1)


# -- (6) stopping rules -------------------------------------------------------------


def test_epsilon_stopping():
    data = make_problem(13, n_sequences=10, separable=True)
    # ap and pa compare strictly (as CRFsuite): epsilon = 0 never stops them
    for algorithm in ("ap", "pa"):
        result = run(algorithm, data, settings={"max_iterations": 15})
        assert result.status is OnlineStatus.MAX_ITERATIONS and result.n_iter == 15
        assert not result.status.converged
        result = run(algorithm, data, settings={"epsilon": 100.0})
        assert result.status is OnlineStatus.SMALL_LOSS and result.n_iter == 1
        assert result.status.converged
    entries = []
    result = run(
        "arow", data, settings={"max_iterations": 50}, callback=lambda e, w: entries.append(e)
    )
    assert result.status is OnlineStatus.SMALL_LOSS and result.n_iter < 50
    assert entries[-1]["loss"] == 0.0 and all(e["loss"] > 0 for e in entries[:-1])


def test_l2sgd_stopping():
    data = make_problem(13, n_sequences=10)
    entries = []
    result = run(
        "l2sgd",
        data,
        settings={"period": 3, "delta": 1e9},
        callback=lambda e, w: entries.append(e),
    )
    assert result.status is OnlineStatus.SMALL_IMPROVEMENT and result.status.converged
    assert result.n_iter == 4
    assert "improvement" in entries[3] and "improvement" not in entries[2]
    assert entries[3]["improvement"] == pytest.approx(
        (entries[0]["loss"] - entries[3]["loss"]) / entries[3]["loss"]
    )
    assert {"learning_rate", "total_updates"} <= set(entries[0])
    result = run("l2sgd", data, settings={"period": 3, "delta": -1e9, "max_iterations": 6})
    assert result.status is OnlineStatus.MAX_ITERATIONS and result.n_iter == 6
    result = run("l2sgd", data, settings={"max_iterations": 0})
    assert result.n_iter == 0 and not result.x.any()


def test_l2sgd_returns_best_epoch():
    data = make_problem(21, n_sequences=10)
    entries = []
    result = run(
        "l2sgd",
        data,
        settings={"max_iterations": 5, "calibration_eta": 50.0, "calibration_max_trials": 2},
        callback=lambda e, w: entries.append((e["loss"], w.copy())),
    )
    best = int(np.argmin([loss for loss, _ in entries]))
    np.testing.assert_array_equal(result.x, entries[-1][1])
    if best < len(entries) - 1:
        assert not np.array_equal(result.x, result.state.weights)
    assert np.isfinite(result.x).all()


def test_zero_norm_difference_is_safe():
    # two labels with identical features and no transitions: Viterbi can be
    # wrong with F(x, y) - F(x, z) = 0 (no feature tells them apart)
    encoded = Encoded(
        np.array([0, 1, 2], dtype=np.int64),
        np.array([0, 0], dtype=np.int32),
        np.array([0.0, 0.0]),
        np.array([1, 1], dtype=np.intp),
    )
    labels = np.array([0, 1], dtype=np.intp)
    model, _ = select_features(encoded, labels, np.array(["A", "B"], dtype=object), ["a"])
    for algorithm in ("pa", "arow", "ap"):
        for pa_type in (0, 1, 2):
            result = train_online(
                algorithm,
                encoded,
                labels,
                model,
                dict(DEFAULTS[algorithm], pa_type=pa_type, max_iterations=3),
                random_state=np.random.RandomState(0),
            )
            assert np.isfinite(result.x).all()


def test_empty_training_set():
    encoded = Encoded(
        np.array([0], dtype=np.int64),
        np.zeros(0, dtype=np.int32),
        np.zeros(0),
        np.array([0], dtype=np.intp),
    )
    labels = np.zeros(0, dtype=np.intp)
    model, _ = select_features(encoded, labels, np.array(["A"], dtype=object), [])
    for algorithm in ("l2sgd", "ap", "pa", "arow"):
        result = train_online(
            algorithm,
            encoded,
            labels,
            model,
            DEFAULTS[algorithm],
            random_state=np.random.RandomState(0),
        )
        assert result.x.shape == (model.n_features,)


def test_l2sgd_period_zero_disables_the_delta_test():
    # the docs: 0 turns the test off (it divided by zero)
    data = make_problem(13, n_sequences=10)
    entries = []
    result = run(
        "l2sgd",
        data,
        settings={"period": 0, "delta": 1e9, "max_iterations": 5},
        callback=lambda e, w: entries.append(e),
    )
    assert result.status is OnlineStatus.MAX_ITERATIONS and result.n_iter == 5
    assert not any("improvement" in entry for entry in entries)
    # the same run with the test on stops at its first chance
    result = run("l2sgd", data, settings={"period": 1, "delta": 1e9, "max_iterations": 5})
    assert result.status is OnlineStatus.SMALL_IMPROVEMENT and result.n_iter == 2


# -- (4) explicit zeros and label counts (the compiled kernels' fast paths) ---------


def _with_zeros(data, seed):
    """The same problem with explicit zero values inserted (False-valued attributes)."""
    encoded, labels, model = data
    rng = np.random.RandomState(seed)
    indptr, ids, values = [0], [], []
    n_attributes = len(model.state_ptr) - 1
    for r in range(len(encoded.indptr) - 1):
        lo, hi = encoded.indptr[r], encoded.indptr[r + 1]
        row_ids = list(encoded.ids[lo:hi])
        row_values = list(encoded.values[lo:hi])
        for _ in range(rng.randint(0, 3)):
            at = rng.randint(len(row_ids) + 1)
            row_ids.insert(at, rng.randint(n_attributes))
            row_values.insert(at, 0.0)
        ids.extend(row_ids)
        values.extend(row_values)
        indptr.append(len(ids))
    zeros = Encoded(
        np.array(indptr, dtype=np.int64),
        np.array(ids, dtype=np.int32),
        np.array(values, dtype=np.float64),
        encoded.lengths,
    )
    return zeros, labels, model


@pytest.mark.parametrize("seed", [0, 1])
def test_l2sgd_explicit_zeros_change_nothing(seed):
    data = make_problem(seed, n_labels=5, all_transitions=True)
    zeros = _with_zeros(data, seed)
    assert (zeros[0].values == 0).any()
    oracle = Oracle(*zeros)
    rng = np.random.RandomState(seed)
    w0 = rng.normal(scale=0.5, size=oracle.K)
    order = rng.permutation(len(oracle.sequences)).astype(np.intp)
    w_plain, w_zeros, w_ref = w0.copy(), w0.copy(), w0.copy()
    out_plain = problem_of(*data).l2sgd_epoch(order, w_plain, 3.0, 0.3, 0.0)
    out_zeros = problem_of(*zeros).l2sgd_epoch(order, w_zeros, 3.0, 0.3, 0.0)
    loss_ref, _ = oracle_l2sgd_epoch(oracle, order, w_ref, 3.0, 0.3, 0.0)
    assert out_zeros == out_plain  # the zeros add nothing: the very same floats
    np.testing.assert_array_equal(w_zeros, w_plain)
    assert out_zeros[0] == pytest.approx(loss_ref, rel=1e-10)
    np.testing.assert_allclose(w_zeros, w_ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_labels", [1, 2, 5, 9, 17])
def test_scaled_forward_backward_any_label_count(n_labels):
    """The vectorized scaled recursion (vector lanes and their remainders) against
    enumeration where it is small, and against the log-domain recursion."""
    data = make_problem(n_labels, n_labels=n_labels, max_length=12, all_transitions=True)
    problem = problem_of(*data)
    oracle = Oracle(*data)
    w = np.random.RandomState(n_labels).normal(scale=1.0, size=data[2].n_features)
    for s in range(problem.n_sequences):
        problem.spread_limit = 500.0
        log_z, marg, pairs = problem.sequence_marginals(s, w)
        if n_labels ** problem.sequence_lengths()[s] <= 20000:
            log_z_ref, e_ref = oracle.expectations(w, s)
            log_z_c, e_c = expected_counts(problem, data, s, w)
            assert log_z == pytest.approx(log_z_ref, rel=1e-12)
            np.testing.assert_allclose(e_c, e_ref, atol=1e-10)
        problem.spread_limit = -1.0
        log_z2, marg2, pairs2 = problem.sequence_marginals(s, w)
        assert log_z == pytest.approx(log_z2, rel=1e-12)
        np.testing.assert_allclose(marg, marg2, atol=1e-12)
        np.testing.assert_allclose(pairs, pairs2, atol=1e-11)
