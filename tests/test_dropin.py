"""skcrf as a drop-in replacement for sklearn-crfsuite.

The behaviours sklearn-crfsuite's users and its own test suite rely on: the
five trainers behind one constructor (positional ``algorithm``), held-out
evaluation in ``training_log_``, ``model_filename``, CRFsuite model files both
ways, ``tagger_``, ``size_``/``num_attributes_`` and ``partial_fit``; and the
calls of sklearn-crfsuite's tutorial on the Treebank task.
"""

import os
import pickle
import warnings
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import cross_val_score

from skcrf import CRFTagger, metrics

ALGORITHMS = ["lbfgs", "l2sgd", "ap", "pa", "arow"]

# A day-by-day weather diary: numeric, boolean, string, bytes and unicode values.
DAYS = [
    {"umbrella": 1, "coat": 0.5},
    {"umbrella": 1},
    {"umbrella": 1, "sunglasses": 0.5},
    {"coat": 0.5, "sunglasses": 0.5},
    {"umbrella": 0.5, "sunglasses": 1},
    {"sunglasses": 1, "coat": 0.2},
    {"umbrella": 1, "coat": 0.5},
    {},
    {"sunglasses": 1, "sky": "clear"},
    {"небо": "ясное".encode(), "sunglasses": 1},
]
WEATHER = ["rain", "rain", "rain", "sun", "sun", "sun", "rain", "rain", "sun", "sun"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_fits_from_a_positional_call(algorithm):
    tagger = CRFTagger(algorithm, random_state=0).fit([DAYS], [WEATHER])
    assert tagger.algorithm == algorithm
    if algorithm != "ap":  # averaging keeps the perceptron from fitting one sequence exactly
        assert tagger.predict([DAYS]) == [WEATHER]
        assert tagger.score([DAYS], [WEATHER]) == 1.0
    assert tagger.score([DAYS], [WEATHER]) > 0.5


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("with_dev", [True, False])
def test_verbose_training_prints_each_iteration(algorithm, with_dev, capsys):
    dev = ([DAYS], [WEATHER]) if with_dev else (None, None)
    tagger = CRFTagger(algorithm, verbose=2, max_iterations=5, random_state=0)
    with warnings.catch_warnings():
        # lbfgs stops early (ConvergenceWarning); the online trainers do not warn
        warnings.simplefilter("ignore" if algorithm == "lbfgs" else "error")
        tagger.fit([DAYS, DAYS], [WEATHER, WEATHER], *dev)
    printed = capsys.readouterr().err
    assert printed.count("iteration") >= len(tagger.training_log_)
    entry = tagger.training_log_.last_iteration
    assert ("item_accuracy" in entry) is with_dev
    assert entry["scores"] if with_dev else entry["scores"] == {}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_marginals_are_over_the_tagger_labels(algorithm):
    tagger = CRFTagger(algorithm, random_state=0).fit([DAYS], [WEATHER])
    (marginals,) = tagger.predict_marginals([DAYS])
    assert len(marginals) == len(WEATHER)
    for row in marginals:
        assert set(row) == set(tagger.tagger_.labels()) == {"rain", "sun"}
        assert sum(row.values()) == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_pickled_tagger_keeps_algorithm_and_predictions(algorithm):
    tagger = CRFTagger(algorithm=algorithm, random_state=0).fit([DAYS], [WEATHER])
    copy = pickle.loads(pickle.dumps(tagger, protocol=pickle.HIGHEST_PROTOCOL))
    assert copy.algorithm == algorithm
    assert copy.predict([DAYS]) == tagger.predict([DAYS])


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_predict_before_fit_is_not_fitted_error(algorithm):
    with pytest.raises(NotFittedError, match="not fitted"):
        CRFTagger(algorithm).predict([DAYS])


def test_online_fits_are_reproducible_with_random_state():
    rng = np.random.default_rng(0)
    X = [[{"f": str(v)} for v in rng.integers(0, 6, size=8)] for _ in range(30)]
    y = [[str(int(t["f"]) % 3) if rng.random() > 0.2 else "x" for t in seq] for seq in X]
    for algorithm in ["l2sgd", "ap", "pa", "arow"]:
        a = CRFTagger(algorithm, max_iterations=3, random_state=7).fit(X, y)
        b = CRFTagger(algorithm, max_iterations=3, random_state=7).fit(X, y)
        c = CRFTagger(algorithm, max_iterations=3, random_state=8).fit(X, y)
        np.testing.assert_array_equal(a._model.weights, b._model.weights)
        assert not np.array_equal(a._model.weights, c._model.weights), algorithm


# -- model files -------------------------------------------------------------------


def test_model_filename_is_written_by_fit_and_read_lazily(tmp_path):
    path = tmp_path / "weather.crfsuite"
    trained = CRFTagger(model_filename=str(path)).fit([DAYS], [WEATHER])
    assert path.exists()

    loaded = CRFTagger(model_filename=str(path))
    assert "_model" not in vars(loaded)  # __init__ and clone read nothing
    assert clone(loaded).get_params() == loaded.get_params()
    assert loaded.score([DAYS], [WEATHER]) == 1.0
    for a, b in zip(loaded.predict_marginals([DAYS])[0], trained.predict_marginals([DAYS])[0]):
        assert a == pytest.approx(b, abs=1e-12)
    # fitted attributes of a file not read yet are read on access
    assert set(CRFTagger(model_filename=path).classes_) == {"rain", "sun"}

    again = pickle.loads(pickle.dumps(trained))
    assert again.score([DAYS], [WEATHER]) == 1.0


def test_model_filename_that_does_not_exist_or_cannot_be_written(tmp_path):
    missing = tmp_path / "none.crfsuite"
    with pytest.raises(NotFittedError, match="does not exist yet"):
        CRFTagger(model_filename=missing).predict([DAYS])
    assert not hasattr(CRFTagger(model_filename=missing), "classes_")
    with pytest.raises(FileNotFoundError, match="folder"):
        CRFTagger(model_filename=tmp_path / "no" / "m.crfsuite").fit([DAYS], [WEATHER])


def fitted_snapshot(tagger):
    """Everything a failed fit must leave as it was: each attribute (the same
    object), the log's entries, the weights, the online trainer's state and
    random stream."""
    attributes = dict(vars(tagger))
    log = attributes.get("training_log_")
    state = attributes.get("_trainer_state")
    rng = attributes.get("_partial_fit_rng")
    model = attributes.get("_model")
    deep = {
        "log": None if log is None else (list(log.iterations), log.status, log.message),
        "weights": None if model is None else model.weights.copy(),
        "trainer": None
        if state is None
        else [None if a is None else a.copy() for a in (state.weights, state.weight_sums)]
        + [state.n_epochs, state.n_updates, state.counter, state.order.copy()],
        "rng": None if rng is None else pickle.dumps(rng.get_state()),
    }
    return attributes, deep


def assert_unchanged(tagger, snapshot, X):
    attributes, deep = snapshot
    assert vars(tagger).keys() == attributes.keys()
    for name, value in attributes.items():
        assert vars(tagger)[name] is value, name
    again = fitted_snapshot(tagger)[1]
    for name in ("log", "rng"):
        assert again[name] == deep[name], name
    for name in ("weights",):
        np.testing.assert_array_equal(again[name], deep[name])
    if deep["trainer"] is not None:
        for a, b in zip(again["trainer"], deep["trainer"]):
            np.testing.assert_array_equal(a, b)
    if "_model" in attributes:
        assert tagger.predict(X) == tagger.predict(X)


@pytest.mark.parametrize("warm_start", [False, True])
@pytest.mark.parametrize("algorithm", ["lbfgs", "ap"])
def test_a_fit_that_fails_to_write_model_filename_leaves_the_estimator_and_the_file(
    tmp_path, warm_start, algorithm
):
    X, y = [DAYS, DAYS[::-1]], [WEATHER, WEATHER[::-1]]
    path = tmp_path / "weather.crfsuite"
    tagger = CRFTagger(algorithm, model_filename=path, warm_start=warm_start, max_iterations=5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tagger.fit(X, y)
    content = path.read_bytes()
    predicted = tagger.predict(X)
    before = fitted_snapshot(tagger)

    # a path that becomes a folder while training
    late = tmp_path / "late.crfsuite"
    tagger.set_params(model_filename=late)
    before[0]["model_filename"] = late

    def make_folder(info):
        late.mkdir(exist_ok=True)

    with pytest.raises(IsADirectoryError, match="model_filename=.*late.crfsuite.*could not be"):
        tagger.fit([DAYS[2:]], [WEATHER[2:]], callback=make_folder)
    assert_unchanged(tagger, before, X)
    assert tagger.predict(X) == predicted
    late.rmdir()

    # labels CRFsuite cannot tell apart (1 and "1" are both "1" in the file)
    tagger.set_params(model_filename=path, warm_start=False)
    before[0]["model_filename"], before[0]["warm_start"] = path, False
    with pytest.raises(ValueError, match="'1'"):
        tagger.fit([DAYS], [[1, "1"] * 5])
    assert_unchanged(tagger, before, X)
    assert path.read_bytes() == content
    assert not late.exists()
    # the file and the estimator agree
    assert CRFTagger(model_filename=path).predict(X) == predicted


def test_a_partial_fit_that_fails_late_leaves_the_log_and_random_stream(tmp_path, monkeypatch):
    import errno

    import skcrf._persist._estimator_files

    X, y = [DAYS, DAYS[::-1], DAYS[2:]], [WEATHER, WEATHER[::-1], WEATHER[2:]]
    path = tmp_path / "weather.crfsuite"
    tagger = CRFTagger("pa", model_filename=path, random_state=0)
    twin = CRFTagger("pa", random_state=0)
    for estimator in (tagger, twin):
        estimator.partial_fit(X, y, classes=["rain", "sun"])
        estimator.partial_fit(X, y)
    content = path.read_bytes()
    before = fitted_snapshot(tagger)
    assert len(tagger.training_log_) == 2

    def read_only(model, path, **kwargs):  # a folder made read-only after the check
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    with monkeypatch.context() as patch:
        patch.setattr(skcrf._persist._estimator_files, "write_crfsuite", read_only)
        with pytest.raises(OSError, match="model_filename=.*could not be written"):
            tagger.partial_fit(X, y)
        with pytest.raises(OSError, match="Read-only"):
            tagger.fit(X, y)
    assert_unchanged(tagger, before, X)
    assert len(tagger.training_log_) == 2
    assert path.read_bytes() == content
    # the failed calls consumed nothing: the next one is the one it would have been
    tagger.partial_fit(X, y)
    twin.partial_fit(X, y)
    np.testing.assert_array_equal(tagger._model.weights, twin._model.weights)
    assert len(tagger.training_log_) == 3
    assert CRFTagger(model_filename=path).predict(X) == tagger.predict(X)


def test_an_unfitted_estimator_whose_fit_fails_late_stays_unfitted(tmp_path, monkeypatch):
    import skcrf._persist._estimator_files

    def failing(model, path, **kwargs):
        raise OSError(28, "No space left on device")

    tagger = CRFTagger(model_filename=tmp_path / "m.crfsuite")
    before = fitted_snapshot(tagger)
    monkeypatch.setattr(skcrf._persist._estimator_files, "write_crfsuite", failing)
    with pytest.raises(OSError, match="No space left"):
        tagger.fit([DAYS], [WEATHER])
    assert_unchanged(tagger, before, [DAYS])
    assert not hasattr(tagger, "classes_")
    assert not (tmp_path / "m.crfsuite").exists()


def test_model_filename_that_is_a_folder_or_read_only_fails_before_training(tmp_path):
    called = []
    with pytest.raises(IsADirectoryError, match="is a folder"):
        CRFTagger(model_filename=tmp_path).fit([DAYS], [WEATHER], callback=called.append)
    assert not called
    if os.geteuid() == 0:
        pytest.skip("root writes into read-only folders")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(PermissionError, match="not writable"):
            CRFTagger(model_filename=folder / "m.crfsuite").fit([DAYS], [WEATHER])
    finally:
        folder.chmod(0o700)


def test_models_move_between_sklearn_crfsuite_and_skcrf(tmp_path):
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    pycrfsuite = pytest.importorskip("pycrfsuite")
    X = [DAYS, DAYS[::-1], DAYS[2:]]
    y = [WEATHER, WEATHER[::-1], WEATHER[2:]]
    theirs = sklearn_crfsuite.CRF(c1=0.05, c2=0.01, max_iterations=30).fit(X, y)
    ours = CRFTagger.from_crfsuite(theirs)
    assert ours.c1 == 0.05 and ours.max_iterations == 30
    assert ours.predict(X) == [theirs.predict_single(x) for x in X]
    for a, b in zip(ours.predict_marginals(X), map(theirs.predict_marginals_single, X)):
        for row_a, row_b in zip(a, b):
            assert row_a == pytest.approx(row_b, abs=1e-9)

    path = str(tmp_path / "ours.crfsuite")
    mine = CRFTagger(c2=0.01).fit(X, y)
    mine.to_crfsuite(path)
    tagger = pycrfsuite.Tagger()
    tagger.open(path)
    for seq, predicted in zip(X, mine.predict(X)):
        assert tagger.tag(seq) == predicted
    assert mine.size_ == os.path.getsize(path)
    assert mine.num_attributes_ == len(mine.attributes_) == len(tagger.info().attributes)


def test_held_out_log_matches_sklearn_crfsuite():
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    rng = np.random.default_rng(1)
    X = [[{"w": str(v), "n": float(v)} for v in rng.integers(0, 9, size=7)] for _ in range(40)]
    y = [[["a", "b", "c"][int(t["w"]) % 3] if rng.random() > 0.3 else "d" for t in s] for s in X]
    X_dev, y_dev = X[:15], y[:15]
    settings = {"c2": 0.5, "max_iterations": 15}
    ours = CRFTagger(**settings)
    theirs = sklearn_crfsuite.CRF(**settings)
    with pytest.warns():
        ours.fit(X[15:], y[15:], X_dev, y_dev)
    theirs.fit(X[15:], y[15:], X_dev=X_dev, y_dev=y_dev)
    for mine, reference in zip(ours.training_log_.iterations, theirs.training_log_.iterations):
        for key in ("item_accuracy", "instance_accuracy"):
            assert mine[key] == reference[key]
        for key in ("avg_precision", "avg_recall", "avg_f1"):
            assert mine[key] == pytest.approx(reference[key], abs=1e-6)
        for label, score in reference["scores"].items():
            assert mine["scores"][label][:3] == score[:3]
            if score.precision is not None:
                assert mine["scores"][label][3:] == pytest.approx(score[3:], abs=1e-4)


def test_held_out_labels_unknown_to_the_model_score_zero_and_count_in_averages():
    X_dev = [DAYS, DAYS[:4]]
    y_dev = [["fog"] + WEATHER[1:], ["rain", "rain", "fog", "sun"]]
    tagger = CRFTagger(max_iterations=3).fit([DAYS], [WEATHER], X_dev, y_dev)
    entry = tagger.training_log_.last_iteration
    assert entry["scores"]["fog"] == (0, 0, 2, 0.0, 0.0, 0.0)
    assert tagger.classes_.tolist() == ["rain", "sun"]  # the model does not change
    known = [entry["scores"][label] for label in ("rain", "sun")]
    assert entry["avg_f1"] == pytest.approx(sum(s.f1 for s in known) / 3)
    predicted = tagger.predict(X_dev)
    n_correct = sum(a == b for p, t in zip(predicted, y_dev) for a, b in zip(p, t))
    assert entry["item_accuracy"] == Fraction(n_correct, 14)
    assert entry["instance_accuracy"] == 0 and entry["dev_accuracy"] == n_correct / 14


def test_fitted_attributes_like_sklearn_crfsuite():
    tagger = CRFTagger().fit([DAYS] * 5, [WEATHER] * 5)
    assert tagger.size_ > 100
    assert "sunglasses" in tagger.attributes_ and "небо:ясное" in tagger.attributes_
    assert tagger.num_attributes_ == len(tagger.attributes_)
    assert all(isinstance(w, float) for w in tagger.state_features_.values())
    assert all(a in tagger.attributes_ and k in tagger.classes_ for a, k in tagger.state_features_)
    assert Counter(tagger.transition_features_).most_common(1)
    assert metrics.flatten(tagger.predict([DAYS])) == WEATHER


def test_cross_validation_with_processes():
    scores = cross_val_score(CRFTagger(), [DAYS] * 10, [WEATHER] * 10, n_jobs=2, cv=5)
    assert scores.mean() == 1.0


def test_dev_data_without_labels_is_an_error():
    with pytest.raises(ValueError, match="X_dev and y_dev"):
        CRFTagger().fit([DAYS] * 3, [WEATHER] * 3, [DAYS])


# -- partial_fit ------------------------------------------------------------------


def test_partial_fit_needs_classes_first_and_an_online_trainer():
    with pytest.raises(ValueError, match="classes must be given"):
        CRFTagger("ap").partial_fit([DAYS], [WEATHER])
    with pytest.raises(ValueError, match="online trainer"):
        CRFTagger().partial_fit([DAYS], [WEATHER], classes=["rain", "sun"])
    with pytest.raises(ValueError, match=r"y\[0\]\[3\]: the label 'sun' is not one of"):
        CRFTagger("pa").partial_fit([DAYS], [WEATHER], classes=["rain", "fog"])
    tagger = CRFTagger("arow").partial_fit([DAYS], [WEATHER], classes=["sun", "rain"])
    with pytest.raises(ValueError, match="differs from classes_"):
        tagger.partial_fit([DAYS], [WEATHER], classes=["sun", "rain", "fog"])
    tagger.set_params(algorithm="ap")
    with pytest.raises(ValueError, match="trained with algorithm='arow'"):
        tagger.partial_fit([DAYS], [WEATHER])


@pytest.mark.parametrize("algorithm", ["l2sgd", "ap", "pa", "arow"])
def test_partial_fit_adds_features_and_keeps_the_old_ones(algorithm):
    first, second = DAYS[:5], DAYS[5:]
    tagger = CRFTagger(algorithm, random_state=0, all_possible_transitions=True)
    tagger.partial_fit([first], [WEATHER[:5]], classes=["rain", "sun", "fog"])
    before = tagger.state_features_
    attributes = list(tagger.attributes_)
    assert tagger.classes_.tolist() == ["fog", "rain", "sun"] and tagger.n_iter_ == 1
    tagger.partial_fit([second], [WEATHER[5:]])
    assert tagger.n_iter_ == 2 and len(tagger.training_log_) == 2
    assert tagger.attributes_[: len(attributes)] == attributes
    assert "небо:ясное" in tagger.attributes_[len(attributes) :]
    # features of the first batch that the second batch does not touch keep their weights
    untouched = {"umbrella"} - {a for t in second for a in t}
    for (attribute, label), weight in before.items():
        if attribute in untouched and algorithm != "l2sgd":  # l2sgd decays every weight
            assert tagger.state_features_[(attribute, label)] == weight


def test_partial_fit_continues_a_fit():
    tagger = CRFTagger("pa", max_iterations=2, random_state=0).fit([DAYS], [WEATHER])
    tagger.partial_fit([DAYS], [WEATHER])
    assert tagger.n_iter_ == 3 and [e["num"] for e in tagger.training_log_.iterations] == [1, 2, 3]


# -- sklearn-crfsuite's tutorial on the Treebank task ------------------------------


@pytest.mark.treebank
def test_sklearn_crfsuite_tutorial_calls(treebank):
    import scipy.stats
    from sklearn.metrics import make_scorer
    from sklearn.model_selection import RandomizedSearchCV

    from skcrf.datasets import treebank_token_features

    def features(sentences):
        return [[treebank_token_features(s, i) for i in range(len(s))] for s in sentences]

    train, test = treebank
    X_train = features([[w for w, _ in s] for s in train[:300]])
    y_train = [[t for _, t in s] for s in train[:300]]
    X_test = features([[w for w, _ in s] for s in test[:100]])
    y_test = [[t for _, t in s] for s in test[:100]]

    crf = CRFTagger(
        algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=50, all_possible_transitions=True
    )
    crf.fit(X_train, y_train)
    labels = [label for label in crf.classes_ if label not in {"-NONE-", "."}]
    y_pred = crf.predict(X_test)
    f1 = metrics.flat_f1_score(y_test, y_pred, average="weighted", labels=labels)
    assert 0.7 < f1 <= 1.0
    report = metrics.flat_classification_report(y_test, y_pred, labels=sorted(labels), digits=3)
    assert "NN" in report and "weighted avg" in report

    search = RandomizedSearchCV(
        CRFTagger(algorithm="lbfgs", max_iterations=20, all_possible_transitions=True),
        {"c1": scipy.stats.expon(scale=0.5), "c2": scipy.stats.expon(scale=0.05)},
        cv=3,
        n_iter=3,
        n_jobs=1,
        random_state=0,
        scoring=make_scorer(metrics.flat_f1_score, average="weighted", labels=labels),
    )
    search.fit(X_train, y_train)
    assert set(search.best_params_) == {"c1", "c2"} and 0.5 < search.best_score_ <= 1.0
    best = search.best_estimator_
    top_transitions = Counter(best.transition_features_).most_common(5)
    assert len(top_transitions) == 5 and all(w > 0 for _, w in top_transitions)
    top_states = Counter(best.state_features_).most_common(5)
    assert all(attribute in best.attributes_ for (attribute, _), _ in top_states)


@pytest.mark.treebank
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_each_trainer_is_as_accurate_as_crfsuite_on_a_treebank_slice(treebank, algorithm):
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    from skcrf.datasets import treebank_token_features

    train, test = treebank

    def xy(sentences):
        X = [
            [treebank_token_features([w for w, _ in s], i) for i in range(len(s))]
            for s in sentences
        ]
        return X, [[t for _, t in s] for s in sentences]

    (X_train, y_train), (X_test, y_test) = xy(train[:400]), xy(test[:150])
    settings = (
        {"max_iterations": 20}
        if algorithm != "lbfgs"
        else {"c1": 0.1, "c2": 0.1, "max_iterations": 50}
    )
    ours = CRFTagger(algorithm, random_state=0, **settings)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours.fit(X_train, y_train)
    theirs = sklearn_crfsuite.CRF(algorithm=algorithm, **settings).fit(X_train, y_train)
    # shuffling differs (our random_state, CRFsuite's own generator): on this
    # small slice the online trainers land a point or two apart, either way
    assert ours.score(X_test, y_test) >= theirs.score(X_test, y_test) - 0.015


# -- persistence of the new fitted state ----------------------------------------------


@pytest.mark.parametrize("algorithm", ["lbfgs", "pa"])
def test_saved_model_keeps_status_and_held_out_log(algorithm, tmp_path):
    tagger = CRFTagger(algorithm, max_iterations=4, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tagger.fit([DAYS, DAYS[3:]], [WEATHER, WEATHER[3:]], [DAYS], [WEATHER])
    tagger.save(tmp_path / "m.skcrf")
    loaded = CRFTagger.load(tmp_path / "m.skcrf")
    assert loaded.status_ is tagger.status_
    assert loaded.training_log_.iterations == tagger.training_log_.iterations
    assert type(loaded.training_log_.last_iteration["item_accuracy"]) is Fraction
    assert loaded.predict([DAYS]) == tagger.predict([DAYS])


def test_merge_features_is_the_union_with_the_old_weights():
    from skcrf._model import merge_features

    tagger = CRFTagger("ap", random_state=0).fit([DAYS[:4]], [WEATHER[:4]])
    old = tagger._model
    wider = CRFTagger("ap", random_state=0).fit([DAYS[:4] + DAYS], [WEATHER[:4] + WEATHER])._model
    merged, index, wider_index = merge_features(old, wider)
    assert set(index) | set(wider_index) == set(range(merged.n_features))
    assert merged.attributes == wider.attributes
    np.testing.assert_array_equal(merged.weights[index], old.weights)
    assert merged.n_features == wider.n_features  # the old features are a subset here
    rest = np.setdiff1d(np.arange(merged.n_features), index)
    assert not merged.weights[rest].any()
    pairs = {
        (merged.attributes[a], merged.classes[k])
        for a, k in zip(merged.state_attributes(), merged.state_labels)
    }
    assert pairs == {
        (wider.attributes[a], wider.classes[k])
        for a, k in zip(wider.state_attributes(), wider.state_labels)
    }
