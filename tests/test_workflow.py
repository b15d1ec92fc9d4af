"""The training workflow: warm starts, early stopping, callbacks, live progress."""

import io
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger
from skcrf._training._lbfgs import LBFGSStatus


def _corpus(seed, n_sequences=40, vocabulary=12, labels="ABC"):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_sequences):
        words = rng.integers(0, vocabulary, size=rng.integers(2, 8))
        X.append([{"w": f"w{v}", "odd": bool(v % 2)} for v in words])
        y.append([labels[v % len(labels)] if rng.random() > 0.15 else labels[0] for v in words])
    return X, y


# -- warm start ---------------------------------------------------------------------


def test_refit_from_a_converged_model_stops_within_period_plus_three():
    X, y = _corpus(0)
    tagger = CRFTagger(c2=0.1, period=5, warm_start=True).fit(X, y)
    assert tagger.status_.converged
    weights = tagger._model.weights
    tagger.fit(X, y)
    assert tagger.status_.converged and tagger.n_iter_ <= 5 + 3
    np.testing.assert_allclose(tagger._model.weights, weights, atol=1e-2)


def test_warm_start_with_new_attributes_and_labels_reaches_the_cold_objective():
    X_a, y_a = _corpus(1, vocabulary=6, labels="AB")
    X_b, y_b = _corpus(2, vocabulary=12, labels="ABC")  # new words and a new label
    X, y = X_a + X_b, y_a + y_b
    settings = {"c1": 0.05, "c2": 0.1, "epsilon": 1e-8, "delta": 1e-10}
    warm = CRFTagger(warm_start=True, **settings).fit(X_a, y_a)
    assert warm.classes_.tolist() == ["A", "B"]
    warm.fit(X, y)
    cold = CRFTagger(**settings).fit(X, y)
    assert warm.classes_.tolist() == cold.classes_.tolist() == ["A", "B", "C"]
    assert sorted(warm.attributes_) == sorted(cold.attributes_)
    assert warm.n_features_ == cold.n_features_
    warm_loss = warm.training_log_.last_iteration["loss"]
    cold_loss = cold.training_log_.last_iteration["loss"]
    assert warm_loss == pytest.approx(cold_loss, rel=1e-6)


def test_old_features_that_no_longer_occur_are_kept():
    X_a, y_a = _corpus(3, vocabulary=6)
    tagger = CRFTagger(warm_start=True, c2=1.0).fit(X_a, y_a)
    before = dict(tagger.state_features_)
    X_b = [[{"w": "new"}, {"w": "other"}]] * 5
    tagger.fit(X_b, [["A", "B"]] * 5)
    assert set(tagger.attributes_) >= set(before_attribute for before_attribute, _ in before)
    assert "w:new" in tagger.attributes_
    assert tagger.n_features_ > len(before)


def test_warm_start_is_false_by_default_and_an_online_trainer_continues_its_state():
    X, y = _corpus(4)
    cold = CRFTagger(c2=0.1).fit(X[:10], y[:10])
    n_features = cold.n_features_
    cold.fit(X, y)
    assert cold.n_features_ != n_features or cold.n_iter_ > 1
    online = CRFTagger("pa", max_iterations=2, random_state=0, warm_start=True).fit(X, y)
    online.fit(X, y)
    assert online.training_log_.iterations[0]["num"] == 1
    switched = CRFTagger("ap", warm_start=True).fit(X, y).set_params(algorithm="arow")
    with pytest.raises(ValueError, match="warm_start with algorithm='arow'"):
        switched.fit(X, y)


# -- callbacks ----------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ["lbfgs", "l2sgd", "ap", "pa", "arow"])
def test_callback_sees_every_iteration_and_can_stop(algorithm):
    X, y = _corpus(5)
    seen = []

    def callback(info):
        seen.append(info)
        assert not info.weights.flags.writeable
        return info.iteration == 3

    tagger = CRFTagger(algorithm, random_state=0, max_iterations=50)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # a requested stop warns not
        tagger.fit(X, y, callback=callback)
    assert [info.iteration for info in seen] == [1, 2, 3]
    assert tagger.n_iter_ == 3 and tagger.status_.name == "CALLBACK_STOP"
    assert not tagger.status_.converged
    assert seen[-1].loss == pytest.approx(tagger.training_log_.last_iteration["loss"])
    assert (seen[0].gradient_norm is None) == (algorithm != "lbfgs")
    assert seen[0].elapsed <= seen[-1].elapsed


def test_callback_must_be_callable():
    with pytest.raises(TypeError, match="callback must be callable"):
        CRFTagger().fit(*_corpus(0), callback=3)


# -- early stopping -------------------------------------------------------------------


def test_early_stopping_keeps_the_best_iteration_of_the_dev_data():
    X, y = _corpus(6, n_sequences=60)
    X_dev, y_dev = _corpus(7, n_sequences=30)
    tagger = CRFTagger(c2=0.001, early_stopping=True, n_iter_no_change=3, max_iterations=200)
    tagger.fit(X, y, X_dev, y_dev)
    scores = [entry["validation_score"] for entry in tagger.training_log_.iterations]
    best = tagger.best_iteration_
    assert scores[best - 1] == max(scores)
    assert tagger.status_ in (
        LBFGSStatus.EARLY_STOPPING,
        LBFGSStatus.CONVERGED,
        LBFGSStatus.STOPPED_DELTA,
    )
    if tagger.status_ is LBFGSStatus.EARLY_STOPPING:
        assert tagger.n_iter_ - best >= 3
    # L-BFGS is deterministic: the weights are those of a fit stopped at the best iteration
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        stopped = CRFTagger(c2=0.001, max_iterations=best).fit(X, y)
    np.testing.assert_array_equal(tagger._model.weights, stopped._model.weights)
    assert tagger.score(X_dev, y_dev) == max(scores)


def test_early_stopping_holds_out_part_of_the_training_data():
    X, y = _corpus(8, n_sequences=50)
    # tag every sequence with its own attribute, to see which ones were trained on
    X = [[{**token, "seq": f"s{i}"} for token in seq] for i, seq in enumerate(X)]
    tagger = CRFTagger(
        "ap", early_stopping=True, validation_fraction=0.2, random_state=0, max_iterations=30
    ).fit(X, y)
    trained_on = {a for a in tagger.attributes_ if a.startswith("seq:")}
    assert len(trained_on) == 40  # the validation sequences never reach the model
    again = CRFTagger(
        "ap", early_stopping=True, validation_fraction=0.2, random_state=0, max_iterations=30
    ).fit(X, y)
    assert again.attributes_ == tagger.attributes_
    assert "validation_score" in tagger.training_log_.last_iteration
    with pytest.raises(ValueError, match="validation_fraction"):
        CRFTagger(early_stopping=True, validation_fraction=0.5).fit(X[:1], y[:1])


def test_early_stopping_with_a_scorer():
    X, y = _corpus(9, n_sequences=40)
    tagger = CRFTagger(
        early_stopping=True,
        scoring="flat_f1_macro",
        n_iter_no_change=2,
        max_iterations=30,
        random_state=1,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tagger.fit(X, y)
    scores = [e["validation_score"] for e in tagger.training_log_.iterations]
    assert 0.0 <= max(scores) <= 1.0 and scores[tagger.best_iteration_ - 1] == max(scores)


def _score_from(iteration, value):
    """A scorer whose score is ``value`` from the ``iteration``-th call on."""
    calls = []

    def flaky_scorer(estimator, X, y):
        calls.append(1)
        return value if len(calls) >= iteration else 0.5 + 0.01 * len(calls)

    return flaky_scorer


@pytest.mark.parametrize(
    "value, error",
    [
        (float("nan"), ValueError),
        (np.float64("nan"), ValueError),
        (float("inf"), ValueError),
        (-np.inf, ValueError),
        (None, TypeError),
        ("0.9", TypeError),
        (np.array([0.5]), TypeError),
        (True, TypeError),
        (1 + 0j, TypeError),
    ],
    ids=["nan", "np.nan", "inf", "-inf", "None", "str", "array", "bool", "complex"],
)
@pytest.mark.parametrize("algorithm", ["lbfgs", "ap"])
def test_early_stopping_score_that_is_not_a_finite_number_is_an_error(value, error, algorithm):
    X, y = _corpus(9, n_sequences=30)
    X_dev, y_dev = _corpus(10, n_sequences=10)
    tagger = CRFTagger(
        algorithm,
        early_stopping=True,
        scoring=_score_from(1, 0.5),
        n_iter_no_change=100,
        max_iterations=6,
        warm_start=True,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        tagger.fit(X, y, X_dev, y_dev)
    before = dict(vars(tagger))
    weights, log = tagger._model.weights.copy(), list(tagger.training_log_.iterations)
    predicted = tagger.predict(X_dev)

    tagger.set_params(scoring=_score_from(3, value))
    before["scoring"] = tagger.scoring
    with pytest.raises(
        error, match="early stopping: scoring=.*flaky_scorer returned .* at iteration 3"
    ):
        tagger.fit(X, y, X_dev, y_dev)
    # the failed fit left the estimator as it was
    assert vars(tagger).keys() == before.keys()
    assert all(vars(tagger)[name] is value for name, value in before.items())
    np.testing.assert_array_equal(tagger._model.weights, weights)
    assert tagger.training_log_.iterations == log
    assert tagger.predict(X_dev) == predicted


def test_early_stopping_accepts_numpy_and_zero_dimensional_scores():
    X, y = _corpus(9, n_sequences=30)
    for value in (np.float32(0.25), np.array(0.25), 0, np.int64(1)):
        tagger = CRFTagger(
            early_stopping=True, scoring=_score_from(1, value), n_iter_no_change=2
        ).fit(X, y)
        scores = [e["validation_score"] for e in tagger.training_log_.iterations]
        assert scores == [float(value)] * len(scores)
        assert all(type(score) is float for score in scores)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("decoding", ["viterbi", "posterior"])
@pytest.mark.parametrize("algorithm", ["lbfgs", "ap"])
def test_early_stopping_scores_under_the_allowed_transitions(decoding, algorithm):
    # Labels drawn at random break BIO's rules: the unconstrained paths hold
    # I-X after O, which allowed_transitions='BIO' forbids. The monitored
    # score must be score(X_dev, y_dev) of each iteration's model, decoded
    # under the estimator's constraints as predict and score are.
    X, y = _corpus(11, n_sequences=60, labels=["O", "B-X", "I-X"])
    X_dev, y_dev = _corpus(12, n_sequences=30, labels=["O", "B-X", "I-X"])
    seen = []
    tagger = CRFTagger(
        algorithm,
        allowed_transitions="BIO",
        decoding=decoding,
        early_stopping=True,
        n_iter_no_change=100,
        max_iterations=6,
    ).fit(X, y, X_dev, y_dev, callback=lambda info: seen.append(info.weights.copy()))
    logged = [entry["validation_score"] for entry in tagger.training_log_.iterations]
    assert len(logged) == len(seen) == tagger.n_iter_
    unconstrained = []
    for weights, score in zip(seen, logged):
        probe = clone(tagger)
        probe._set_fitted(
            tagger._model.with_weights(weights), 0, None, None, tagger._predictor.vocabulary
        )
        assert score == probe.score(X_dev, y_dev)
        unconstrained.append(probe.set_params(allowed_transitions=None).score(X_dev, y_dev))
    # the constraints change the score here: the check above tells them apart
    assert unconstrained != logged
    assert tagger.score(X_dev, y_dev) == logged[tagger.best_iteration_ - 1]


def test_best_iteration_survives_save_and_pickle(tmp_path):
    import pickle

    X, y = _corpus(10)
    tagger = CRFTagger(early_stopping=True, n_iter_no_change=2, random_state=0).fit(X, y)
    tagger.save(tmp_path / "m.skcrf")
    assert CRFTagger.load(tmp_path / "m.skcrf").best_iteration_ == tagger.best_iteration_
    assert pickle.loads(pickle.dumps(tagger)).best_iteration_ == tagger.best_iteration_
    assert CRFTagger().fit(X, y).best_iteration_ is None


# -- live progress --------------------------------------------------------------------

_PROGRESS_SCRIPT = textwrap.dedent(
    """
    import sys, warnings
    import numpy as np
    import skcrf._utils._progress
    from skcrf import CRFTagger
    skcrf._utils._progress.PLAIN_INTERVAL = float(sys.argv[1])
    rng = np.random.default_rng(0)
    X = [[{"w": str(v)} for v in rng.integers(0, 9, size=6)] for _ in range(30)]
    y = [[str(int(t["w"]) % 3) for t in s] for s in X]
    warnings.simplefilter("ignore")
    CRFTagger(verbose=1, max_iterations=12).fit(X, y, X[:5], y[:5])
    """
)


def test_progress_on_a_plain_pipe_is_a_line_every_few_seconds():
    result = subprocess.run(
        [sys.executable, "-c", _PROGRESS_SCRIPT, "1000"],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stderr.splitlines()
    # the first iteration, the last one, and why it stopped: not one line per iteration
    assert len(lines) == 3, result.stderr
    assert lines[0].startswith("[skcrf] iteration 1/12") and "dev=" in lines[0]
    assert lines[1].startswith("[skcrf] iteration 12/12") and "remaining" in lines[1]
    assert "stopped: MAX_ITERATIONS" in lines[2]
    assert "\r" not in result.stderr


def test_progress_on_a_terminal_updates_one_line_in_place():
    pty = pytest.importorskip("pty")
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", _PROGRESS_SCRIPT, "1000"],
        stderr=follower,
        stdout=subprocess.DEVNULL,
    )
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the follower side closed
            break
        if not chunk:
            break
        output += chunk
    process.wait(timeout=60)
    os.close(leader)
    text = output.decode(errors="replace")
    assert process.returncode == 0
    assert "\r" in text  # redrawn in place (tqdm, or a carriage return without it)
    assert text.count("\n") <= 4
    assert "12/12" in text and "stopped: MAX_ITERATIONS" in text


def test_progress_display_without_tqdm_on_a_terminal(monkeypatch):
    from skcrf._utils._progress import ProgressDisplay

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    stream = Terminal()
    display = ProgressDisplay(3, stream=stream, use_tqdm=False)
    for k in (1, 2, 3):
        display.update({"num": k, "loss": 10.0 / k})
    display.close("stopped: done")
    text = stream.getvalue()
    assert text.count("\r") == 3 and "iteration 3/3" in text and "improvement=" in text
    assert text.endswith("[skcrf] stopped: done\n")
