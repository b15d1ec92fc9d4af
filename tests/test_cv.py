"""CRFTaggerCV: the warm-started regularization path against an exhaustive search.

Covered: the chosen (c1, c2) and the mean scores equal GridSearchCV's on the
same folds and scoring (tight stopping rules on tiny data, so warm and cold
fits reach the same optimum); cv_results_ in GridSearchCV's layout; groups
passed to the splitter; scorer names and callables; n_jobs=2 and a joblib
backend give the n_jobs=1 result; the grids made from ints; a search over c2
alone (l2sgd too); clone, pickle and nested parameters; refit=False;
delegation to best_estimator_ (the model of a plain CRFTagger); verbose
output; errors. Everything runs on a small generated corpus.
"""

import pickle
import random

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold
from sklearn.utils import estimator_checks

from skcrf import CRFTagger, CRFTaggerCV
from skcrf.metrics import get_scorer, sequence_accuracy_score

# Few iterations (FAST) and the tight rules stop fits unconverged on purpose.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

_POOLS = {
    "D": ["the", "a", "this"],
    "J": ["big", "small", "red", "old"],
    "N": ["dog", "cat", "fish", "run", "duck"],
    "V": ["runs", "sleeps", "fish", "run", "duck"],
    "R": ["quickly", "today"],
}


def make_corpus(n_sentences=36, seed=1, noise=0.08):
    """Feature-dict sentences, their tags (with label noise) and a group id each."""
    rng = random.Random(seed)
    X, y, groups = [], [], []
    for i in range(n_sentences):
        pattern = ["D"] + ["J"] * (rng.random() < 0.5) + ["N", "V"] + ["R"] * (rng.random() < 0.4)
        words = [rng.choice(_POOLS[tag]) for tag in pattern]
        X.append(
            [
                {"w": w, "suffix": w[-2:], "prev": words[k - 1] if k else "<s>"}
                for k, w in enumerate(words)
            ]
        )
        y.append([rng.choice("DJNVR") if rng.random() < noise else t for t in pattern])
        groups.append(i % 4)
    return X, y, groups


X, Y, GROUPS = make_corpus()
C1, C2 = [0.0, 0.3], [0.01, 1.0]
# Tight stopping rules: warm- and cold-started fits end at the same optimum.
TIGHT = CRFTagger(epsilon=1e-9, delta=1e-10, all_possible_transitions=True)
FAST = CRFTagger(max_iterations=15)


@pytest.fixture(scope="module")
def search():
    return CRFTaggerCV(TIGHT, c1=C1, c2=C2, cv=KFold(3)).fit(X, Y)


@pytest.fixture(scope="module")
def grid_search():
    return GridSearchCV(TIGHT, {"c1": C1, "c2": C2}, cv=KFold(3)).fit(X, Y)


def test_chooses_what_an_exhaustive_search_chooses(search, grid_search):
    assert search.best_params_ == grid_search.best_params_
    assert (search.c1_, search.c2_) == (
        grid_search.best_params_["c1"],
        grid_search.best_params_["c2"],
    )
    assert search.best_index_ == grid_search.best_index_
    np.testing.assert_allclose(
        search.cv_results_["mean_test_score"],
        grid_search.cv_results_["mean_test_score"],
        atol=0.01,
    )
    np.testing.assert_allclose(search.best_score_, grid_search.best_score_, atol=1e-3)
    for k in range(3):
        np.testing.assert_allclose(
            search.cv_results_[f"split{k}_test_score"],
            grid_search.cv_results_[f"split{k}_test_score"],
            atol=0.02,
        )
    # warm starts did happen: fewer iterations after the first fit of a fold
    assert search.n_iter_.shape == (3, 2, 2) and (search.n_iter_ > 0).all()


def test_cv_results_have_grid_search_layout(search, grid_search):
    ours, theirs = search.cv_results_, grid_search.cv_results_
    assert list(ours) == list(theirs)
    assert ours["params"] == theirs["params"]
    for key in ("param_c1", "param_c2"):
        assert isinstance(ours[key], np.ma.MaskedArray)
        assert ours[key].dtype == theirs[key].dtype
        assert not ours[key].mask.any()
        np.testing.assert_array_equal(ours[key].data, theirs[key].data)
    for key, value in theirs.items():
        if key != "params":
            assert np.shape(ours[key]) == np.shape(value), key
            assert np.asarray(ours[key]).dtype.kind == np.asarray(value).dtype.kind, key
    assert sorted(ours["rank_test_score"])[0] == 1
    # scores_ is (fold, c1, c2); cv_results_ candidates run c1 outer, c2 inner
    assert search.scores_.shape == (3, 2, 2)
    np.testing.assert_array_equal(search.scores_[1].ravel(), ours["split1_test_score"])
    np.testing.assert_array_equal(search.c1s_, C1)
    np.testing.assert_array_equal(search.c2s_, C2)
    assert search.n_splits_ == 3 and search.refit_time_ > 0
    pandas = pytest.importorskip("pandas")
    assert pandas.DataFrame(ours).shape == pandas.DataFrame(theirs).shape


def test_best_estimator_is_a_plain_cold_fit(search):
    best = search.best_estimator_
    plain = clone(TIGHT).set_params(c1=search.c1_, c2=search.c2_).fit(X, Y)
    assert best.get_params() == plain.get_params()
    np.testing.assert_array_equal(best.coef_.toarray(), plain.coef_.toarray())
    np.testing.assert_array_equal(best.transition_, plain.transition_)
    assert best.n_iter_ == plain.n_iter_


def test_prediction_is_delegated(search):
    best = search.best_estimator_
    assert search.predict(X) == best.predict(X)
    assert search.predict_single(X[0]) == best.predict_single(X[0])
    assert search.predict_marginals(X[:3]) == best.predict_marginals(X[:3])
    assert search.predict_marginals_single(X[0]) == best.predict_marginals_single(X[0])
    assert search.score(X, Y) == best.score(X, Y)
    assert list(search.classes_) == list(best.classes_)


def test_groups_are_passed_to_the_splitter():
    grid = {"c1": [0.0], "c2": [0.1, 1.0]}
    ours = CRFTaggerCV(FAST, c1=grid["c1"], c2=grid["c2"], cv=GroupKFold(4)).fit(
        X, Y, groups=GROUPS
    )
    theirs = GridSearchCV(FAST, grid, cv=GroupKFold(4)).fit(X, Y, groups=GROUPS)
    assert ours.n_splits_ == 4
    # the same folds: the first fit of each fold's path is cold, as GridSearchCV's
    np.testing.assert_array_equal(
        ours.scores_[:, 0, 1], [theirs.cv_results_[f"split{k}_test_score"][1] for k in range(4)]
    )
    with pytest.raises(ValueError, match="groups"):
        CRFTaggerCV(FAST, c1=[0.0], c2=[1.0], cv=GroupKFold(4)).fit(X, Y)


@pytest.mark.parametrize("scoring", ["sequence_accuracy", "callable"])
def test_scoring_names_and_callables(scoring):
    calls = []

    def sentence_accuracy(estimator, X_test, y_test):
        calls.append(len(X_test))
        return sequence_accuracy_score(y_test, estimator.predict(X_test))

    scorer = sentence_accuracy if scoring == "callable" else scoring
    ours = CRFTaggerCV(FAST, c1=[0.0], c2=[0.1, 1.0], cv=3, scoring=scorer).fit(X, Y)
    theirs = GridSearchCV(
        FAST, {"c1": [0.0], "c2": [0.1, 1.0]}, cv=3, scoring=get_scorer("sequence_accuracy")
    ).fit(X, Y)
    # the cold first fits (c2=1, the strongest) equal GridSearchCV's exactly
    np.testing.assert_array_equal(
        ours.scores_[:, 0, 1], [theirs.cv_results_[f"split{k}_test_score"][1] for k in range(3)]
    )
    if scoring == "callable":
        assert calls == [12] * 6
        assert ours.scorer_ is sentence_accuracy
    assert ours.score(X, Y) == sequence_accuracy_score(Y, ours.predict(X))


def test_parallel_gives_the_sequential_result():
    kwargs = dict(c1=[0.0, 0.2], c2=[0.1, 1.0], cv=3)
    one = CRFTaggerCV(FAST, n_jobs=1, **kwargs).fit(X, Y)
    two = CRFTaggerCV(FAST, n_jobs=2, **kwargs).fit(X, Y)
    np.testing.assert_array_equal(one.scores_, two.scores_)
    np.testing.assert_array_equal(one.n_iter_, two.n_iter_)
    assert one.best_params_ == two.best_params_
    with joblib.parallel_backend("threading", n_jobs=2):
        threaded = CRFTaggerCV(FAST, **kwargs).fit(X, Y)
    np.testing.assert_array_equal(one.scores_, threaded.scores_)


def test_grids_from_ints_and_c2_alone():
    search = CRFTaggerCV(FAST, c1=3, c2=2, cv=2, refit=False).fit(X, Y)
    np.testing.assert_allclose(search.c1s_, [0.0, 0.01, 1.0])  # 0, then 0.01 to 1
    np.testing.assert_allclose(search.c2s_, [0.001, 1.0])
    assert search.scores_.shape == (2, 3, 2)

    estimator = clone(FAST).set_params(c1=0.05)
    alone = CRFTaggerCV(estimator, c1=None, c2=[0.1, 1.0], cv=2).fit(X, Y)
    theirs = GridSearchCV(estimator, {"c2": [0.1, 1.0]}, cv=2).fit(X, Y)
    assert list(alone.cv_results_) == list(theirs.cv_results_)
    assert "param_c1" not in alone.cv_results_ and set(alone.best_params_) == {"c2"}
    assert alone.c1_ == 0.05 and alone.best_estimator_.c1 == 0.05
    assert alone.scores_.shape == (2, 1, 2)


def test_l2sgd_searches_c2():
    estimator = CRFTagger(algorithm="l2sgd", max_iterations=3, random_state=0)
    search = CRFTaggerCV(estimator, c1=None, c2=[0.1, 1.0], cv=2).fit(X, Y)
    assert set(search.best_params_) == {"c2"}
    assert search.best_estimator_.algorithm == "l2sgd"


def test_clone_pickle_and_nested_params(search):
    unfitted = CRFTaggerCV(CRFTagger(c2=0.5), c1=[0.0, 0.1], cv=3)
    params = unfitted.get_params()
    assert params["estimator__c2"] == 0.5 and params["c1"] == [0.0, 0.1]
    copy = clone(unfitted)
    assert copy.get_params()["estimator__c2"] == 0.5 and copy.estimator is not unfitted.estimator
    copy.set_params(estimator__max_iterations=7, c2=[1.0])
    assert copy.estimator.max_iterations == 7 and copy.c2 == [1.0]
    assert not hasattr(clone(search), "best_estimator_")

    restored = pickle.loads(pickle.dumps(search))
    assert restored.predict(X) == search.predict(X)
    np.testing.assert_array_equal(restored.scores_, search.scores_)
    assert restored.best_params_ == search.best_params_


def test_refit_false():
    search = CRFTaggerCV(FAST, c1=[0.0], c2=[0.1, 1.0], cv=2, refit=False).fit(X, Y)
    assert not hasattr(search, "best_estimator_")
    assert search.refit_time_ == 0.0 and set(search.best_params_) == {"c1", "c2"}
    for method in ("predict", "predict_single", "predict_marginals", "score"):
        assert not hasattr(search, method), method
    with pytest.raises(AttributeError, match="predict"):
        search.predict(X)


def test_not_fitted():
    with pytest.raises(NotFittedError):
        CRFTaggerCV().predict(X)
    with pytest.raises(NotFittedError):
        CRFTaggerCV().classes_  # noqa: B018 - the access is the test


def test_model_filename_is_used_by_the_refit_only(tmp_path):
    path = tmp_path / "model.crfsuite"
    estimator = clone(FAST).set_params(model_filename=str(path))
    search = CRFTaggerCV(estimator, c1=[0.0], c2=[0.1, 1.0], cv=2).fit(X, Y)
    assert path.is_file()
    assert CRFTagger(model_filename=str(path)).predict(X) == search.predict(X)


def test_verbose(capsys):
    CRFTaggerCV(FAST, c1=[0.0, 0.1], c2=[1.0], cv=2, verbose=1).fit(X, Y)
    out = capsys.readouterr().out
    assert "Fitting 2 folds for each of 2 candidates, totalling 4 fits" in out
    assert out.count("[CV fold") == 4
    assert "(cold start)" in out and "(warm start)" in out


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"c1": []}, ValueError, "empty"),
        ({"c2": 0}, ValueError, r"c2 == 0|empty|range"),
        ({"c1": [0.1, -1.0]}, ValueError, ">= 0"),
        ({"c2": [float("nan")]}, ValueError, "finite"),
        ({"c1": [0.1, 0.1]}, ValueError, "distinct"),
        ({"c1": 0.1}, TypeError, "an int in the range"),
        ({"c1": [[0.1]]}, ValueError, "flat"),
        ({"c1": None, "c2": None}, ValueError, "nothing to search"),
        (
            {"estimator": CRFTagger(algorithm="l2sgd")},
            ValueError,
            "c1=4: algorithm='l2sgd' has no c1",
        ),
        ({"estimator": CRFTagger(algorithm="ap"), "c1": None}, ValueError, "has no c2"),
        ({"scoring": "accuracy"}, ValueError, "not a valid skcrf scoring"),
        ({"estimator": KFold()}, (TypeError, ValueError), "estimator"),
        ({"plateau": 0}, ValueError, "'plateau' parameter"),
        ({"plateau": 2.5}, ValueError, "'plateau' parameter"),
        ({"plateau": True}, ValueError, "'plateau' parameter"),
        ({"plateau": 5, "plateau_tol": -0.01}, ValueError, "'plateau_tol' parameter"),
        ({"plateau": 5, "plateau_tol": 1.5}, ValueError, "'plateau_tol' parameter"),
        ({"plateau": 5, "plateau_tol": "0.1"}, ValueError, "'plateau_tol' parameter"),
    ],
)
def test_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        CRFTaggerCV(**{"estimator": FAST, "cv": 2, **kwargs}).fit(X, Y)


# -- plateau: warm-started fits stop once their held-out accuracy stops moving ----


def test_plateau_chooses_what_an_exhaustive_search_chooses(search, grid_search):
    fast = CRFTaggerCV(TIGHT, c1=C1, c2=C2, cv=KFold(3), plateau=3, plateau_tol=0.0).fit(X, Y)
    assert fast.best_params_ == grid_search.best_params_
    assert fast.best_index_ == grid_search.best_index_
    np.testing.assert_allclose(
        fast.cv_results_["mean_test_score"], grid_search.cv_results_["mean_test_score"], atol=0.02
    )
    # fewer iterations, the cut made on the warm-started fits only: the first
    # fit of each fold (strongest c1 and c2) starts cold and runs to the end
    assert fast.n_iter_.sum() < search.n_iter_.sum()
    i0, j0 = int(np.argmax(C1)), int(np.argmax(C2))
    np.testing.assert_array_equal(fast.n_iter_[:, i0, j0], search.n_iter_[:, i0, j0])


def test_plateau_never_reached_changes_nothing(search):
    patient = CRFTaggerCV(TIGHT, c1=C1, c2=C2, cv=KFold(3), plateau=10**6).fit(X, Y)
    np.testing.assert_array_equal(patient.n_iter_, search.n_iter_)
    np.testing.assert_array_equal(patient.scores_, search.scores_)
    assert patient.best_params_ == search.best_params_


def test_plateau_measures_the_score_of_the_iterate():
    # The held-out accuracy the plateau test reads is the fitted model's score,
    # L1 zeros included, with sample weights and allowed transitions.
    from skcrf._cv import _HeldOutPlateau

    train, test = next(iter(KFold(3).split(X)))
    X_train, y_train = [X[k] for k in train], [Y[k] for k in train]
    X_test, y_test = [X[k] for k in test], [Y[k] for k in test]
    weights = np.linspace(0.5, 2.0, len(test))
    everything_but = [(a, b) for a in "DJNVR" for b in "DJNVR" if (a, b) != ("D", "V")]
    for params in ({"c1": 0.3, "c2": 0.01}, {"c1": 0.0, "allowed_transitions": everything_but}):
        tagger = clone(FAST).set_params(**params).fit(X_train, y_train)
        monitor = _HeldOutPlateau(tagger, X_test, y_test, weights, patience=2, tol=0.0)
        accuracy = monitor.evaluator.accuracy(tagger._fitted().model.weights)
        assert accuracy == pytest.approx(tagger.score(X_test, y_test, sample_weight=weights))
        assert monitor.n_features == tagger.n_features_


def test_plateau_with_weights_and_a_scorer():
    weights = np.linspace(0.5, 2.0, len(X))
    kwargs = {"c1": C1, "c2": C2, "cv": KFold(3), "scoring": "flat_f1_macro", "refit": False}
    full = CRFTaggerCV(TIGHT, **kwargs).fit(X, Y, sample_weight=weights)
    fast = CRFTaggerCV(TIGHT, plateau=3, **kwargs).fit(X, Y, sample_weight=weights)
    assert fast.n_iter_.sum() < full.n_iter_.sum()
    assert fast.best_params_ == full.best_params_
    np.testing.assert_allclose(
        fast.cv_results_["mean_test_score"], full.cv_results_["mean_test_score"], atol=0.02
    )


def test_plateau_with_a_template_featurizer():
    # raw tokens: the held-out part is featurized by the fit's template vocabulary
    from skcrf import TemplateFeaturizer

    words = [[token["w"] for token in sentence] for sentence in X]
    tagger = clone(TIGHT).set_params(
        featurizer=TemplateFeaturizer("U00:%x[0,0]\nU01:%x[-1,0]\nB\n")
    )
    full = CRFTaggerCV(tagger, c1=C1, c2=C2, cv=KFold(3), refit=False).fit(words, Y)
    fast = CRFTaggerCV(tagger, c1=C1, c2=C2, cv=KFold(3), refit=False, plateau=3).fit(words, Y)
    assert fast.n_iter_.sum() < full.n_iter_.sum()
    assert fast.best_params_ == full.best_params_


def test_bad_data():
    with pytest.raises(ValueError, match="sequences"):
        CRFTaggerCV(FAST, c1=[0.0], c2=[1.0], cv=2).fit(X, Y[:-1])


@pytest.mark.parametrize(
    "check",
    [
        "check_estimator_cloneable",
        "check_estimator_repr",
        "check_no_attributes_set_in_init",
        "check_do_not_raise_errors_in_init_or_set_params",
        "check_parameters_default_constructible",
        "check_get_params_invariance",
        "check_set_params",
        "check_estimator_tags_renamed",
        "check_valid_tag_types",
        "check_param_validation",
    ],
)
def test_sklearn_checks(check):
    """scikit-learn's checks that feed no data (as for CRFTagger in
    tests/test_sklearn_integration.py); the rest are tested above with sequences."""
    estimator = CRFTaggerCV()
    function = getattr(estimator_checks, check)
    function(type(estimator).__name__, estimator)
