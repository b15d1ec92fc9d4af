"""Numerical robustness of CRFTagger: no NaN or inf anywhere, clean stops.

Long sequences, large feature values, unregularized training on separable
data and thousands of labels must give finite losses, weights and marginals
(rows summing to 1), and the optimizer must stop cleanly (possibly with a
ConvergenceWarning). Training is deterministic, and an interrupted fit leaves
the estimator as it was.
"""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

import skcrf._training._objective
from skcrf import CRFTagger

# quick, run-time dependencies only: tools/build_wheels.py runs these against each wheel
pytestmark = pytest.mark.wheel


def fit_quietly(tagger, X, y, **kwargs):
    """Fit, allowing only a ConvergenceWarning (no numpy RuntimeWarnings)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return tagger.fit(X, y, **kwargs)


def assert_finite_model(tagger):
    losses = np.array([entry["loss"] for entry in tagger.training_log_.iterations])
    assert np.isfinite(losses).all()
    for key in ("feature_norm", "error_norm", "linesearch_step"):
        assert np.isfinite([entry[key] for entry in tagger.training_log_.iterations]).all()
    assert np.isfinite(tagger.coef_.data).all()
    assert np.isfinite(tagger.transition_).all()


def assert_same_coef(a, b):
    """Two sparse coef_ with the same stored entries (the same features) and weights."""
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)


def assert_sane_predictions(tagger, X):
    """Viterbi labels of the right lengths; marginals finite, summing to 1."""
    predicted = tagger.predict(X)
    assert [len(p) for p in predicted] == [len(seq) for seq in X]
    classes = set(tagger.classes_.tolist())
    assert all(label in classes for seq in predicted for label in seq)
    marginals = tagger.predict_marginals(X)
    rows = np.array([list(token.values()) for seq in marginals for token in seq])
    if len(rows):
        assert np.isfinite(rows).all()
        assert (rows >= 0).all() and (rows <= 1 + 1e-9).all()
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, rtol=0, atol=1e-9)
    return predicted


def test_sequence_of_10000_tokens():
    n = 10_000
    X = [[{"w": str(t % 7), "prev": str((t - 1) % 7)} for t in range(n)]]
    y = [[("A", "B", "C")[t % 7 % 3] for t in range(n)]]
    tagger = fit_quietly(CRFTagger(c2=0.1, max_iterations=4), X, y)
    assert_finite_model(tagger)
    assert tagger.training_log_.last_iteration["loss"] < tagger.training_log_.iterations[0]["loss"]
    predicted = assert_sane_predictions(tagger, X)
    assert predicted == y
    # and a long sequence at predict time, next to short and empty ones
    long_X = [X[0][:37], [], X[0], X[0][:1]]
    predicted = assert_sane_predictions(tagger, long_X)
    assert predicted[2] == y[0]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"c2": 0.0},
        {"c1": 0.1, "c2": 0.0},
        {"linesearch": "Backtracking"},
        {"linesearch": "StrongBacktracking", "c2": 1e-3},
    ],
    ids=["default", "c2=0", "l1", "backtracking", "strong-backtracking"],
)
def test_feature_values_up_to_1e6(params):
    rng = np.random.default_rng(0)
    # the large feature decides the label (next to large noise): training must
    # find that, however badly scaled, and stop cleanly
    X, y = [], []
    for _ in range(30):
        labels = rng.integers(0, 2, size=6)
        y.append([f"L{k}" for k in labels])
        X.append(
            [
                {
                    "w": f"w{rng.integers(5)}",
                    "v": (1e6 if k else -1e6) * rng.uniform(0.5, 1),
                    "noise": float(rng.uniform(-1e6, 1e6)),
                }
                for k in labels
            ]
        )
    tagger = fit_quietly(CRFTagger(**params), X, y)
    assert_finite_model(tagger)
    assert_sane_predictions(tagger, X)
    assert tagger.score(X, y) == 1.0

    # features of scale 1 and 1e6 side by side: an ill-conditioned problem on
    # which L-BFGS may stop early (as CRFsuite's does), but never with NaN
    X, y = [], []
    for _ in range(30):
        labels = rng.integers(0, 3, size=6)
        y.append([f"L{k}" for k in labels])
        X.append(
            [
                {"w": f"w{k}", "big": float(rng.uniform(-1e6, 1e6)), "k": int(k) * 10**6}
                for k in labels
            ]
        )
    tagger = fit_quietly(CRFTagger(**params), X, y)
    assert_finite_model(tagger)
    assert_sane_predictions(tagger, X)
    assert tagger.score(X, y) > 1 / 3


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"epsilon": 0.0, "period": 0},
        {"epsilon": 0.0, "period": 0, "linesearch": "Backtracking"},
        {"epsilon": 0.0, "period": 0, "linesearch": "StrongBacktracking"},
        {"epsilon": 0.0, "delta": 0.0, "c1": 1e-6},
        {
            "epsilon": 0.0,
            "period": 0,
            "all_possible_states": True,
            "all_possible_transitions": True,
        },
    ],
    ids=["default", "no-stop-test", "backtracking", "strong", "l1", "all-possible"],
)
def test_unregularized_training_on_separable_data_stops_cleanly(params):
    # c2 = 0 on separable data: the optimum is at infinity, the weights grow
    # until a stopping test or the line search ends training.
    X = [
        [{"w": "a"}, {"w": "b"}, {"w": "c"}],
        [{"w": "b"}, {"w": "a"}],
        [{"w": "c"}, {"w": "c"}, {"w": "a"}],
    ]
    y = [["A", "B", "C"], ["B", "A"], ["C", "C", "A"]]
    tagger = fit_quietly(CRFTagger(c2=0.0, max_iterations=500, **params), X, y)
    assert_finite_model(tagger)
    assert tagger.n_iter_ < 500
    assert assert_sane_predictions(tagger, X) == y
    # confident, but still finite, probabilities
    marginals = tagger.predict_marginals(X)
    assert marginals[0][0]["A"] > 0.99


def test_more_than_a_thousand_labels():
    n_labels = 1200
    # mostly one-token sequences keep forward-backward cheap (no L x L step)
    X = [[{"w": f"w{k}"}] for k in range(n_labels)] + [[{"w": "w0"}, {"w": "w1"}, {"w": "w2"}]]
    y = [[k] for k in range(n_labels)] + [[0, 1, 2]]
    tagger = fit_quietly(CRFTagger(c2=0.01, max_iterations=20), X, y)
    assert len(tagger.classes_) == n_labels
    assert tagger.coef_.shape == (n_labels, n_labels)
    assert_finite_model(tagger)
    test_X = [[{"w": "w0"}, {"w": "w1"}, {"w": "unseen"}, {"w": "w1199"}], []]
    predicted = assert_sane_predictions(tagger, test_X)
    assert predicted[0][0] == 0 and predicted[0][3] == 1199
    assert all(type(label) is int for label in predicted[0])


def test_training_is_deterministic():
    rng = np.random.default_rng(1)
    X = [
        [{"w": f"w{rng.integers(20)}", "x": float(rng.normal())} for _ in range(8)]
        for _ in range(40)
    ]
    y = [[f"L{rng.integers(4)}" for _ in range(8)] for _ in range(40)]
    for params in ({"c2": 0.1}, {"c1": 0.05, "c2": 0.01}, {"n_jobs": 2}):
        a = fit_quietly(CRFTagger(max_iterations=30, **params), X, y)
        b = fit_quietly(CRFTagger(max_iterations=30, **params), X, y)
        assert_same_coef(a.coef_, b.coef_)
        np.testing.assert_array_equal(a.transition_, b.transition_)
        assert [e["loss"] for e in a.training_log_.iterations] == [
            e["loss"] for e in b.training_log_.iterations
        ]
        assert a.predict_marginals(X) == b.predict_marginals(X)


X_SMALL = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}, {"w": "runs"}]]
Y_SMALL = [["D", "N"], ["D", "N", "V"]]


def _interrupt_on_third_call(monkeypatch):
    original = skcrf._training._objective.CRFObjective.loss_gradient
    calls = []

    def loss_gradient(self, w):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(self, w)

    monkeypatch.setattr(skcrf._training._objective.CRFObjective, "loss_gradient", loss_gradient)
    return calls


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_interrupted_fit_leaves_an_unfitted_estimator_unfitted(monkeypatch, n_jobs):
    tagger = CRFTagger(n_jobs=n_jobs)
    calls = _interrupt_on_third_call(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        tagger.fit(X_SMALL, Y_SMALL)
    assert len(calls) == 3
    with pytest.raises(NotFittedError):
        tagger.predict(X_SMALL)
    assert not hasattr(tagger, "coef_") and not hasattr(tagger, "classes_")


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_interrupted_fit_leaves_a_fitted_estimator_as_it_was(monkeypatch, n_jobs):
    tagger = CRFTagger(c2=0.1, n_jobs=n_jobs).fit(X_SMALL, Y_SMALL)
    # coef_, transition_ and vectorizer_ are computed from the fitted model on
    # access: the model object itself must be the one from before
    before = {
        name: getattr(tagger, name)
        for name in (
            "_model",
            "classes_",
            "attributes_",
            "n_iter_",
            "status_",
            "training_log_",
            "n_features_",
        )
    }
    coef, transition = tagger.coef_, tagger.transition_
    names = list(tagger.vectorizer_.feature_names_)
    predicted = tagger.predict(X_SMALL)
    _interrupt_on_third_call(monkeypatch)
    other_X = [[{"w": "x"}, {"w": "y"}]] * 3
    with pytest.raises(KeyboardInterrupt):
        tagger.fit(other_X, [["P", "Q"]] * 3)
    for name, value in before.items():
        assert getattr(tagger, name) is value, name
    assert_same_coef(tagger.coef_, coef)
    np.testing.assert_array_equal(tagger.transition_, transition)
    assert tagger.vectorizer_.feature_names_ == names
    assert tagger.predict(X_SMALL) == predicted


def test_feature_sums_that_overflow_are_rejected_at_fit():
    X = [[{"w": "a", "v": 1e308}], [{"w": "b", "v": 1e308}]]
    with pytest.raises(ValueError, match=r"feature 'v'.*overflows.*X\[0\]\[0\]"):
        CRFTagger().fit(X, [["A"], ["B"]])
    # large but summable values train (and stop) without error
    X = [[{"w": "a", "v": 1e150}], [{"w": "b", "v": -1e150}]]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no numpy overflow noise
        warnings.simplefilter("ignore", ConvergenceWarning)
        tagger = CRFTagger().fit(X, [["A"], ["B"]])
    assert np.isfinite(tagger.coef_.data).all()


def test_overflowing_scores_at_predict_time_are_an_error():
    tagger = CRFTagger(c2=0.01).fit([[{"a": 1.0, "b": 1.0}, {"c": 1.0}]] * 2, [["A", "B"]] * 2)
    X = [[{"c": 1.0}], [{"a": 1.7e308, "b": -1.7e308}, {"c": 1.0}]]
    with pytest.raises(ValueError, match=r"X\[1\]\[0\].*not finite"):
        tagger.predict_marginals(X)


def test_huge_values_stop_without_numpy_warnings():
    X = [[{"w": "a", "v": 1e200}], [{"w": "b", "v": -1e200}]]
    fit_quietly(CRFTagger(), X, [["A"], ["B"]])


def test_a_failed_line_search_names_a_large_feature_value():
    X = [[{"a": 1.0, "b": 1.0}, {"c": 1.0}], [{"a": 2.0}, {"b": 1e12, "c": 3.0}]] * 5
    y = [["x", "y"], ["y", "x"]] * 5
    with pytest.warns(ConvergenceWarning, match=r"Line search failed") as record:
        tagger = CRFTagger(max_iterations=50).fit(X, y)
    assert tagger.status_.is_linesearch_failure
    message = str(record[0].message)
    assert "too large for the line search: 1e+12 at X[1][1] (feature 'b')" in message
    # values near 1: the same warning (here: the iterations run out) names none
    with pytest.warns(ConvergenceWarning) as record:
        CRFTagger(max_iterations=1).fit(X[1:2] + [[{"a": 1.0}, {"b": 1.0}]], y[:2])
    assert "feature values" not in str(record[0].message)


def test_largest_value_finds_the_largest_magnitude_and_its_token():
    from skcrf._featurize._encoded import Encoded
    from skcrf._featurize._validation import largest_value

    encoded = Encoded(
        indptr=np.array([0, 2, 2, 3, 5]),
        ids=np.array([4, 1, 0, 2, 3], dtype=np.int32),
        values=np.array([3.0, -1.0, 2.0, 0.5, -7.0]),
        lengths=np.array([1, 3]),
    )
    assert largest_value(encoded, "X_dev") == (-7.0, "X_dev[1][2]", 3)
    encoded = encoded._replace(values=np.array([3.0, -1.0, 2.0, 0.5, 7.0]))
    assert largest_value(encoded) == (7.0, "X[1][2]", 3)
    empty = Encoded(np.zeros(2, np.int64), np.zeros(0, np.int32), np.zeros(0), np.array([1]))
    assert largest_value(empty) is None


def test_a_numpy_c2_too_large_to_start_is_an_error_without_numpy_warnings():
    X, y = [[{"a": 1.0}, {"b": 1.0}]] * 2, [["x", "y"]] * 2
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(ValueError, match=r"c2=1e\+308 is too large"):
            CRFTagger(c2=np.float64(1e308)).fit(X, y)


def test_check_emissions_names_the_token():
    from skcrf._featurize._validation import check_emissions

    lengths = np.array([1, 3, 2])
    flat = np.zeros((6, 2))
    check_emissions(flat, lengths)  # finite: no error
    flat[2, 1] = np.nan  # sequence 1, token 1
    with pytest.raises(ValueError, match=r"X\[1\]\[1\].*not finite"):
        check_emissions(flat, lengths)
    flat[2, 1] = 0.0
    flat[5, 0] = -np.inf  # sequence 2, token 1
    with pytest.raises(ValueError, match=r"X_dev\[2\]\[1\]"):
        check_emissions(flat, lengths, name="X_dev")
