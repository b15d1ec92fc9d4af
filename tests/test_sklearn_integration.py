"""CRFTagger (and SequenceFeaturizer) inside scikit-learn's machinery.

Covered: cloning, parameters and repr; scikit-learn's estimator API checks;
GridSearchCV / RandomizedSearchCV (``n_jobs=2``), cross_val_score and
cross_validate with skcrf scorers; KFold / GroupKFold / integer ``cv`` on lists
of sequences; Pipeline with SequenceFeaturizer (and grid search through it);
validation / learning curves; X_dev / y_dev as fit parameters (and with metadata
routing); pickle / joblib round trips without temporary files; the same grid
search on a dask.distributed cluster. One expected failure is marked:
cross_val_predict (a scikit-learn limitation with ragged predictions; the
workaround is tested). A global ``transform_output`` config does not affect
skcrf (its vectorization does not go through DictVectorizer.transform).

scikit-learn's common checks
----------------------------
``check_estimator(CRFTagger())`` runs only ``check_estimator_cloneable`` in
scikit-learn 1.9: every other check needs 2-D array input
(``input_tags.two_d_array``), and the tagger takes lists of sequences of
feature dicts. Each check scikit-learn would otherwise yield is accounted for
here (``test_every_common_check_is_accounted_for`` fails when a new
scikit-learn release adds one):

* ``SKLEARN_CHECKS``: run as they are, imported from
  ``sklearn.utils.estimator_checks``, on CRFTagger and SequenceFeaturizer
  (they never feed data, or fail on parameters before looking at it);
* ``ADAPTED_CHECKS``: they feed arrays, so the same property is tested here
  with sequence data, by the test named in the dict;
* ``NOT_APPLICABLE_CHECKS``: the property is about arrays (dtypes, sparse
  matrices, memory layout, ``n_features_in_``, array API) and has no sequence
  counterpart; the reason is given for each.

Everything runs on a small generated corpus (48 sentences, 282 tokens); each
fit takes a few milliseconds.
"""

import functools
import inspect
import io
import os
import pickle
import random
import tempfile
import threading
import time
import warnings
from copy import deepcopy

import joblib
import numpy as np
import pytest
from joblib import parallel_config
from scipy.stats import loguniform
from sklearn import config_context
from sklearn.base import clone, is_classifier, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import (
    GridSearchCV,
    GroupKFold,
    KFold,
    RandomizedSearchCV,
    StratifiedKFold,
    check_cv,
    cross_val_predict,
    cross_val_score,
    cross_validate,
    learning_curve,
    validation_curve,
)
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.utils import estimator_checks
from sklearn.utils.estimator_checks import estimator_checks_generator
from sklearn.utils.validation import check_is_fitted

from skcrf import CRFTagger, SequenceFeaturizer
from skcrf.metrics import (
    flat_accuracy_score,
    flat_f1_score,
    get_scorer,
    scorers,
    sequence_accuracy_score,
)

# ---------------------------------------------------------------------------
# Toy data: a tiny generated tagging task with ambiguous words ("run", "fish",
# "duck" are nouns or verbs) and 8% label noise, so that scores differ between
# regularization settings.
# ---------------------------------------------------------------------------

_POOLS = {
    "D": ["the", "a", "this", "every"],
    "J": ["big", "small", "red", "quick", "old"],
    "N": ["dog", "cat", "fish", "run", "walk", "duck", "man"],
    "V": ["runs", "walks", "sleeps", "fish", "run", "duck", "sees"],
    "R": ["quickly", "slowly", "today", "well"],
    "P": ["in", "on", "near"],
}


def make_corpus(n_sentences=48, seed=0, noise=0.08):
    """Raw sentences (lists of words), their tags and a group id per sentence."""
    rng = random.Random(seed)
    words, tags, groups = [], [], []
    for i in range(n_sentences):
        pattern = ["D"] + ["J"] * (rng.random() < 0.5) + ["N", "V"]
        pattern += ["R"] * (rng.random() < 0.4)
        pattern += ["P", "D", "N"] * (rng.random() < 0.5)
        words.append([rng.choice(_POOLS[tag]) for tag in pattern])
        tags.append([rng.choice("DJNVRP") if rng.random() < noise else t for t in pattern])
        groups.append(i % 6)  # six "documents"
    return words, tags, groups


def featurize(words):
    """Feature dicts of one sentence: the word, its suffix and its neighbours."""
    return [
        {
            "w": word,
            "suffix": word[-2:],
            "prev": words[i - 1] if i > 0 else "<s>",
            "next": words[i + 1] if i + 1 < len(words) else "</s>",
        }
        for i, word in enumerate(words)
    ]


WORDS, Y, GROUPS = make_corpus()
X = [featurize(sentence) for sentence in WORDS]
GRID = {"c1": [0.0, 0.5], "c2": [0.01, 1.0, 10.0]}
FITTED_ATTRIBUTES = (
    "classes_",
    "attributes_",
    "vectorizer_",
    "coef_",
    "transition_",
    "n_features_",
    "n_iter_",
    "status_",
    "training_log_",
)


def assert_same_coef(a, b):
    """Sparse coef_ with the same stored entries (features) and weights."""
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)


def subset(seq, indices):
    return [seq[i] for i in indices]


def manual_cv_scores(estimator, X, y, splits, scorer=None):
    """Fit a clone on every training fold and score it on the test fold."""
    scores = []
    for train, test in splits:
        fitted = clone(estimator).fit(subset(X, train), subset(y, train))
        X_test, y_test = subset(X, test), subset(y, test)
        scores.append(
            fitted.score(X_test, y_test) if scorer is None else scorer(fitted, X_test, y_test)
        )
    return np.array(scores)


@pytest.fixture(scope="module")
def fitted():
    return CRFTagger(c1=0.05, c2=0.1).fit(X, Y)


# ---------------------------------------------------------------------------
# Parameters, clone, repr, fitted state
# ---------------------------------------------------------------------------


def test_get_params_set_params_and_clone():
    tagger = CRFTagger(c1=0.3, max_iterations=7, linesearch="Backtracking")
    params = tagger.get_params()
    assert params["c1"] == 0.3 and params["max_iterations"] == 7
    assert set(params) == set(inspect.signature(CRFTagger).parameters)
    assert tagger.set_params(c2=2.5, n_jobs=2) is tagger
    assert (tagger.c2, tagger.n_jobs) == (2.5, 2)
    with pytest.raises(ValueError, match="Invalid parameter 'c3'"):
        tagger.set_params(c3=1.0)

    copy = clone(tagger)
    assert copy is not tagger and type(copy) is CRFTagger
    assert copy.get_params() == tagger.get_params()
    # set_params does not validate (scikit-learn defers that to fit)
    CRFTagger().set_params(c1=-1.0, linesearch="nope")


def test_repr_shows_only_changed_parameters():
    assert repr(CRFTagger()) == "CRFTagger()"
    assert repr(CRFTagger(c1=0.1, max_iterations=50)) == "CRFTagger(c1=0.1, max_iterations=50)"
    assert repr(make_pipeline(SequenceFeaturizer(window=2), CRFTagger(c2=0.5))) == (
        "Pipeline(steps=[('sequencefeaturizer', SequenceFeaturizer(window=2)),\n"
        "                ('crftagger', CRFTagger(c2=0.5))])"
    )


def test_init_sets_only_the_parameters():
    tagger = CRFTagger(c1=0.2)
    assert set(vars(tagger)) == set(inspect.signature(CRFTagger).parameters)
    assert not is_classifier(tagger) and not is_regressor(tagger)


def test_fitted_attributes_appear_only_after_fit():
    """check_fit_check_is_fitted, with sequences."""
    tagger = CRFTagger(c2=0.1)
    for name in FITTED_ATTRIBUTES:
        assert not hasattr(tagger, name), name
    with pytest.raises(NotFittedError):
        check_is_fitted(tagger)
    tagger.fit(X, Y)
    check_is_fitted(tagger)
    for name in FITTED_ATTRIBUTES:
        assert hasattr(tagger, name), name
    # clone gives an unfitted copy with the same parameters
    copy = clone(tagger)
    assert copy.get_params() == tagger.get_params()
    assert not any(hasattr(copy, name) for name in FITTED_ATTRIBUTES)
    with pytest.raises(NotFittedError):
        check_is_fitted(copy)


def test_not_fitted_error_before_fit():
    """check_estimators_unfitted, with sequences."""
    tagger = CRFTagger()
    for call in (
        lambda: tagger.predict(X),
        lambda: tagger.predict_single(X[0]),
        lambda: tagger.predict_marginals(X),
        lambda: tagger.predict_marginals_single(X[0]),
        lambda: tagger.score(X, Y),
        lambda: tagger.state_features_,
        lambda: tagger.transition_features_,
    ):
        with pytest.raises(NotFittedError):
            call()


def test_fit_returns_self_and_does_not_change_parameters():
    """check_estimators_fit_returns_self, check_estimators_overwrite_params and
    check_dont_overwrite_parameters, with sequences."""
    tagger = CRFTagger(c1=0.1, c2=0.5, max_iterations=100, n_jobs=2)
    params = deepcopy(tagger.get_params())
    dict_before = dict(vars(tagger))
    assert tagger.fit(X, Y) is tagger
    after = tagger.get_params()
    for name, value in params.items():
        assert joblib.hash(after[name]) == joblib.hash(value), name
    public_after = {
        key for key in vars(tagger) if not key.startswith("_") and not key.endswith("_")
    }
    assert public_after == set(dict_before), "fit added a public attribute"
    for key in public_after:
        assert vars(tagger)[key] is dict_before[key], f"fit changed {key}"


def test_fit_and_score_take_y():
    """check_fit_score_takes_y: y is the second argument of fit and score."""
    for method in (CRFTagger.fit, CRFTagger.score):
        args = list(inspect.signature(method).parameters)
        assert args[1:3] == ["X", "y"], method.__name__


# Derived, unpicklable caches rebuilt from ``_model`` (which is hashed): the
# decoder holds compiled arrays and a Viterbi workspace that decoding reuses.
_CACHES = {"_predictor"}


def test_prediction_does_not_change_the_estimator(fitted):
    """check_dict_unchanged, with sequences."""

    def state():
        return {
            key: value if key in _CACHES else joblib.hash(value)
            for key, value in vars(fitted).items()
        }

    before = state()
    assert "_model" in before
    fitted.predict(X)
    fitted.predict_marginals(X)
    fitted.predict_single(X[0])
    fitted.score(X, Y)
    after = state()
    assert after.keys() == before.keys()
    for key in before:
        if key in _CACHES:
            assert after[key] is before[key], key  # the same cache object
        else:
            assert after[key] == before[key], key


def test_refit_is_idempotent():
    """check_fit_idempotent: fitting again gives the same model."""
    tagger = CRFTagger(c1=0.05, c2=0.1)
    first_pred = tagger.fit(X, Y).predict(X)
    first_marginals = tagger.predict_marginals(X)
    first_coef = tagger.coef_.copy()
    first_attributes = list(tagger.attributes_)
    tagger.fit(X[:10], Y[:10])  # something else in between
    tagger.fit(X, Y)
    assert tagger.predict(X) == first_pred
    assert tagger.predict_marginals(X) == first_marginals
    assert tagger.attributes_ == first_attributes
    assert_same_coef(tagger.coef_, first_coef)


def test_predictions_follow_sequence_order_and_subsets(fitted):
    """check_methods_sample_order_invariance and check_methods_subset_invariance."""
    order = np.random.RandomState(0).permutation(len(X))
    expected = fitted.predict(X)
    expected_marginals = fitted.predict_marginals(X)
    assert fitted.predict(subset(X, order)) == subset(expected, order)
    assert fitted.predict_marginals(subset(X, order)) == subset(expected_marginals, order)

    def as_array(marginals):
        return np.array([list(token.values()) for seq in marginals for token in seq])

    for start in range(0, len(X), 7):  # batches of 7, the last one shorter
        batch = slice(start, start + 7)
        assert fitted.predict(X[batch]) == expected[batch]
        np.testing.assert_allclose(
            as_array(fitted.predict_marginals(X[batch])),
            as_array(expected_marginals[batch]),
            rtol=0,
            atol=1e-12,
        )
    assert fitted.predict_single(X[5]) == expected[5]


def test_one_sequence_is_enough_to_fit():
    """check_fit2d_1sample: a single training sequence (even a single token)."""
    tagger = CRFTagger(c2=0.1).fit(X[:1], Y[:1])
    assert tagger.predict(X[:1]) == Y[:1]
    tagger = CRFTagger().fit([[{"w": "a"}]], [["D"]])
    assert tagger.predict([[{"w": "b"}]]) == [["D"]]


def test_informative_errors_for_bad_input():
    """check_estimators_empty_data_messages, check_requires_y_none,
    check_estimators_nan_inf, check_complex_data, check_fit1d and
    check_fit2d_predict1d, with sequences."""
    tagger = CRFTagger()
    with pytest.raises(ValueError, match="empty|no tokens"):
        tagger.fit([], [])
    with pytest.raises(ValueError, match="empty|no tokens"):
        tagger.fit([[]], [[]])
    with pytest.raises(TypeError, match="y must be"):
        tagger.fit(X, None)
    with pytest.raises(ValueError, match="sequences"):
        tagger.fit(X, Y[:-1])
    for bad in (float("nan"), float("inf"), -np.inf):
        with pytest.raises(ValueError, match="finite"):
            tagger.fit([[{"w": "a", "x": bad}]], [["D"]])
    with pytest.raises(TypeError, match="complex"):
        tagger.fit([[{"w": "a", "x": 1 + 2j}]], [["D"]])
    # one sequence passed where a list of sequences is expected (the "1-D X")
    with pytest.raises(TypeError, match="list of sequences"):
        tagger.fit(X[0], Y[0])
    # an array, as the array-based checks would pass
    with pytest.raises(TypeError):
        tagger.fit(np.ones((4, 2)), np.array([0, 1, 0, 1]))
    tagger.fit(X, Y)
    with pytest.raises(TypeError, match="list of sequences"):
        tagger.predict(X[0])
    with pytest.raises(ValueError, match="finite"):
        tagger.predict([[{"w": "a", "x": float("nan")}]])


def test_object_arrays_and_numpy_scalars_are_accepted(fitted):
    """check_dtype_object / check_estimators_dtypes, with sequences: object
    arrays of sequences and numpy scalar values give the same model."""
    X_obj = np.empty(len(X), dtype=object)
    X_obj[:] = [list(seq) for seq in X]
    Y_obj = np.empty(len(Y), dtype=object)
    Y_obj[:] = [np.array(seq, dtype=object) for seq in Y]
    tagger = clone(fitted).fit(X_obj, Y_obj)
    assert tagger.predict(X) == fitted.predict(X)

    X_num = [[{"a": 1.0, "b": 2} for _ in seq] for seq in X[:5]]
    X_np = [[{"a": np.float32(1.0), "b": np.int64(2)} for _ in seq] for seq in X[:5]]
    first = CRFTagger().fit(X_num, Y[:5])
    second = CRFTagger().fit(X_np, Y[:5])
    assert_same_coef(first.coef_, second.coef_)


# ---------------------------------------------------------------------------
# scikit-learn's own checks
# ---------------------------------------------------------------------------

SKLEARN_CHECKS = [
    "check_estimator_cloneable",
    "check_estimator_tags_renamed",
    "check_valid_tag_types",
    "check_estimator_repr",
    "check_no_attributes_set_in_init",
    "check_mixin_order",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_parameters_default_constructible",
    "check_get_params_invariance",
    "check_set_params",
    # not yielded by check_estimator (scikit-learn runs it in its own test
    # suite), but public and data-independent: invalid parameters are
    # rejected by fit before the data is looked at
    "check_param_validation",
]

ADAPTED_CHECKS = {
    "check_fit_score_takes_y": "test_fit_and_score_take_y",
    "check_estimators_overwrite_params": "test_fit_returns_self_and_does_not_change_parameters",
    "check_dont_overwrite_parameters": "test_fit_returns_self_and_does_not_change_parameters",
    "check_estimators_fit_returns_self": "test_fit_returns_self_and_does_not_change_parameters",
    "check_estimators_unfitted": "test_not_fitted_error_before_fit",
    "check_fit_check_is_fitted": "test_fitted_attributes_appear_only_after_fit",
    "check_dict_unchanged": "test_prediction_does_not_change_the_estimator",
    "check_fit_idempotent": "test_refit_is_idempotent",
    "check_methods_sample_order_invariance": "test_predictions_follow_sequence_order_and_subsets",
    "check_methods_subset_invariance": "test_predictions_follow_sequence_order_and_subsets",
    "check_fit2d_1sample": "test_one_sequence_is_enough_to_fit",
    "check_estimators_empty_data_messages": "test_informative_errors_for_bad_input",
    "check_requires_y_none": "test_informative_errors_for_bad_input",
    "check_estimators_nan_inf": "test_informative_errors_for_bad_input",
    "check_complex_data": "test_informative_errors_for_bad_input",
    "check_fit1d": "test_informative_errors_for_bad_input",
    "check_fit2d_predict1d": "test_informative_errors_for_bad_input",
    "check_dtype_object": "test_object_arrays_and_numpy_scalars_are_accepted",
    "check_estimators_dtypes": "test_object_arrays_and_numpy_scalars_are_accepted",
    "check_pipeline_consistency": "test_pipeline_on_raw_sentences_matches_manual_steps",
    "check_estimators_pickle": "test_pickle_and_joblib_round_trips",
    "check_sample_weights_not_an_array": "test_sample_weight_forms_and_errors",
    "check_sample_weights_list": "test_sample_weight_forms_and_errors",
    "check_sample_weights_pandas_series": "test_sample_weight_forms_and_errors",
    "check_sample_weights_shape": "test_sample_weight_forms_and_errors",
    "check_sample_weights_not_overwritten": "test_sample_weight_forms_and_errors",
    "check_all_zero_sample_weights_error": "test_sample_weight_forms_and_errors",
    "check_sample_weight_equivalence_on_dense_data": "test_sample_weight_equivalence",
}

NOT_APPLICABLE_CHECKS = {
    "check_readonly_memmap_input": "input is lists of dicts, never a (memmapped) array",
    "check_f_contiguous_array_estimator": "input is not an array: no memory layout",
    "check_positive_only_tag_during_fit": "about positive-only numeric arrays "
    "(positive_only tag is False)",
    "check_n_features_in": "n_features_in_ is defined for array input; tokens carry "
    "named features, the vocabulary is vectorizer_.feature_names_",
    "check_n_features_in_after_fitting": "same as check_n_features_in",
    "check_fit2d_1feature": "needs a 2-D array with one column; a one-feature token "
    "is covered by test_one_sequence_is_enough_to_fit",
    "check_estimator_sparse_tag": "sparse input tag is about scipy sparse X (False)",
    "check_estimator_sparse_array": "X cannot be a scipy sparse array",
    "check_estimator_sparse_matrix": "X cannot be a scipy sparse matrix",
    "check_array_api_input": "array API support concerns array input",
}


def _check_function(name):
    return getattr(estimator_checks, name)


@pytest.mark.parametrize(
    "estimator",
    [CRFTagger(), CRFTagger(c1=0.1, max_iterations=5, n_jobs=-1), SequenceFeaturizer(window=2)],
    ids=repr,
)
@pytest.mark.parametrize("check_name", SKLEARN_CHECKS)
def test_sklearn_api_check(check_name, estimator, request):
    with warnings.catch_warnings():
        # e.g. check_set_params warns when set_params validates: it must not
        warnings.simplefilter("error")
        _check_function(check_name)(type(estimator).__name__, estimator)


def test_check_estimator_runs_what_applies_to_sequences():
    """check_estimator skips every array-based check (and says so)."""
    with pytest.warns(estimator_checks.SkipTestWarning, match="requires input"):
        results = estimator_checks.check_estimator(CRFTagger(), on_fail=None)
    assert [r["check_name"] for r in results] == ["check_estimator_cloneable"]
    assert all(r["status"] == "passed" for r in results)


class _ClaimsArrayInput(CRFTagger):
    """Only used to list the checks scikit-learn yields for array estimators."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.two_d_array = True
        return tags


def _base_function(check):
    while isinstance(check, functools.partial):
        check = check.func
    return check.__name__


def test_every_common_check_is_accounted_for():
    yielded = {
        _base_function(check)
        for _, check in estimator_checks_generator(_ClaimsArrayInput(), mark=None)
    }
    accounted = set(SKLEARN_CHECKS) | set(ADAPTED_CHECKS) | set(NOT_APPLICABLE_CHECKS)
    assert not yielded - accounted, f"new scikit-learn checks to classify: {yielded - accounted}"
    # every classified check exists in this scikit-learn
    assert all(hasattr(estimator_checks, name) for name in accounted)
    assert not set(SKLEARN_CHECKS) & set(ADAPTED_CHECKS)
    assert not (set(SKLEARN_CHECKS) | set(ADAPTED_CHECKS)) & set(NOT_APPLICABLE_CHECKS)
    module = globals()
    for check_name, test_name in ADAPTED_CHECKS.items():
        assert callable(module.get(test_name)), (check_name, test_name)


def test_sample_weight_forms_and_errors():
    """scikit-learn's sample-weight checks, with sequences (one weight per sequence)."""
    weights = np.linspace(0.5, 2.0, len(X))
    reference = CRFTagger(c2=0.1).fit(X, Y, sample_weight=weights)
    forms = [weights.tolist(), tuple(weights.tolist())]
    try:
        import pandas as pd
    except ImportError:
        pass
    else:
        forms.append(pd.Series(weights))
    for form in forms:
        tagger = CRFTagger(c2=0.1).fit(X, Y, sample_weight=form)
        assert (tagger.coef_ != reference.coef_).nnz == 0
    before = weights.copy()
    CRFTagger(c2=0.1).fit(X, Y, sample_weight=weights)
    np.testing.assert_array_equal(weights, before)  # not overwritten
    with pytest.raises(ValueError, match="must be 1-D"):
        CRFTagger(c2=0.1).fit(X, Y, sample_weight=weights[:, None])
    with pytest.raises(ValueError, match="weights for"):
        CRFTagger(c2=0.1).fit(X, Y, sample_weight=weights[:-1])
    with pytest.raises(ValueError, match="0 for every sequence"):
        CRFTagger(c2=0.1).fit(X, Y, sample_weight=np.zeros(len(X)))


def test_sample_weight_equivalence():
    """Integer weights are repeated sequences (the check's property, on sequences)."""
    rng = np.random.default_rng(0)
    weights = rng.integers(0, 3, size=len(X)).astype(float)
    weighted = CRFTagger(c2=0.1, epsilon=1e-8).fit(X, Y, sample_weight=weights)
    repeated = [i for i in range(len(X)) for _ in range(int(weights[i]))]
    plain = CRFTagger(c2=0.1, epsilon=1e-8).fit([X[i] for i in repeated], [Y[i] for i in repeated])
    loss = [t.training_log_.last_iteration["loss"] for t in (weighted, plain)]
    assert loss[0] == pytest.approx(loss[1], rel=1e-8)
    assert weighted.predict(X) == plain.predict(X)
    a, b = weighted.state_features_, plain.state_features_
    assert set(a) == set(b)
    assert max(abs(a[k] - b[k]) for k in a) < 1e-5 * max(abs(v) for v in b.values())


# ---------------------------------------------------------------------------
# Model selection
# ---------------------------------------------------------------------------


def test_integer_cv_is_plain_kfold_because_the_tagger_is_not_a_classifier():
    tagger = CRFTagger(c2=0.1)
    assert not is_classifier(tagger)
    cv = check_cv(3, Y, classifier=is_classifier(tagger))
    assert type(cv) is KFold and not cv.shuffle
    np.testing.assert_array_equal(
        cross_val_score(tagger, X, Y, cv=3),
        cross_val_score(tagger, X, Y, cv=KFold(3)),
    )
    # what integer cv would do for a classifier cannot split label sequences
    with pytest.raises(ValueError):
        list(StratifiedKFold(3).split(X, Y))


def test_cross_val_score_default_scoring_is_token_accuracy():
    tagger = CRFTagger(c1=0.05, c2=0.1)
    cv = KFold(4, shuffle=True, random_state=0)
    scores = cross_val_score(tagger, X, Y, cv=cv, error_score="raise")
    splits = list(cv.split(X))
    np.testing.assert_allclose(scores, manual_cv_scores(tagger, X, Y, splits), rtol=0, atol=1e-15)
    token_accuracy = manual_cv_scores(
        tagger,
        X,
        Y,
        splits,
        scorer=lambda est, X_, y_: flat_accuracy_score(y_, est.predict(X_)),
    )
    np.testing.assert_allclose(scores, token_accuracy, rtol=0, atol=1e-15)
    assert 0.5 < scores.mean() < 1.0


def test_cross_validate_with_several_scorers():
    tagger = CRFTagger(c1=0.05, c2=0.1)
    cv = KFold(3)
    by_name = scorers("flat_accuracy", "flat_f1_macro", "sequence_accuracy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined F1 of a label missing in a fold
        result = cross_validate(
            tagger,
            X,
            Y,
            cv=cv,
            scoring=by_name,
            return_train_score=True,
            return_indices=True,
            error_score="raise",
        )
    for key in (
        "test_flat_accuracy",
        "test_flat_f1_macro",
        "test_sequence_accuracy",
        "train_flat_accuracy",
        "fit_time",
        "score_time",
    ):
        assert result[key].shape == (3,), key
    np.testing.assert_array_equal(
        result["test_flat_accuracy"], cross_val_score(tagger, X, Y, cv=cv)
    )
    splits = list(zip(result["indices"]["train"], result["indices"]["test"]))
    np.testing.assert_allclose(
        result["test_sequence_accuracy"],
        manual_cv_scores(
            tagger,
            X,
            Y,
            splits,
            scorer=lambda est, X_, y_: sequence_accuracy_score(y_, est.predict(X_)),
        ),
    )
    assert np.all(result["test_sequence_accuracy"] <= result["test_flat_accuracy"])
    assert np.all(result["train_flat_accuracy"] >= result["test_flat_accuracy"])

    # scorer objects from get_scorer, under names of one's choosing
    result2 = cross_validate(
        tagger,
        X,
        Y,
        cv=cv,
        error_score="raise",
        scoring={"acc": get_scorer("flat_accuracy"), "seq": get_scorer("sequence_accuracy")},
    )
    np.testing.assert_array_equal(result2["test_acc"], result["test_flat_accuracy"])
    np.testing.assert_array_equal(result2["test_seq"], result["test_sequence_accuracy"])
    # a single scorer object
    np.testing.assert_array_equal(
        cross_val_score(tagger, X, Y, cv=cv, scoring=get_scorer("sequence_accuracy")),
        result["test_sequence_accuracy"],
    )


def test_scorers_accept_list_of_lists_predictions(fitted):
    predicted = fitted.predict(X)
    assert isinstance(predicted, list) and all(isinstance(p, list) for p in predicted)
    assert len({len(p) for p in predicted}) > 1  # ragged: not an array
    assert get_scorer("flat_accuracy")(fitted, X, Y) == flat_accuracy_score(Y, predicted)
    assert get_scorer("flat_accuracy")(fitted, X, Y) == fitted.score(X, Y)
    assert get_scorer("flat_f1_weighted")(fitted, X, Y) == pytest.approx(
        flat_f1_score(Y, predicted, average="weighted")
    )
    assert get_scorer("sequence_accuracy")(fitted, X, Y) == sequence_accuracy_score(Y, predicted)
    values = {
        name: scorer(fitted, X, Y)
        for name, scorer in scorers("flat_accuracy", "sequence_accuracy").items()
    }
    assert values == {
        "flat_accuracy": fitted.score(X, Y),
        "sequence_accuracy": sequence_accuracy_score(Y, predicted),
    }


def test_kfold_and_group_kfold_split_lists_of_sequences():
    tagger = CRFTagger(c2=0.1)
    kfold = KFold(3, shuffle=True, random_state=1)
    splits = list(kfold.split(X, Y))
    assert sorted(np.concatenate([test for _, test in splits]).tolist()) == list(range(len(X)))
    np.testing.assert_allclose(
        cross_val_score(tagger, X, Y, cv=kfold, error_score="raise"),
        manual_cv_scores(tagger, X, Y, splits),
    )

    group_kfold = GroupKFold(3)
    splits = list(group_kfold.split(X, Y, groups=GROUPS))
    groups = np.asarray(GROUPS)
    for train, test in splits:
        assert not set(groups[train]) & set(groups[test])
    scores = cross_val_score(tagger, X, Y, cv=group_kfold, groups=GROUPS, error_score="raise")
    np.testing.assert_allclose(scores, manual_cv_scores(tagger, X, Y, splits))


def test_grid_search_over_c1_c2_in_parallel():
    search = GridSearchCV(CRFTagger(), GRID, cv=KFold(3), n_jobs=2, error_score="raise")
    search.fit(X, Y)
    results = search.cv_results_
    assert len(results["params"]) == 6
    # the parallel results are those of a plain loop (scoring=None: tagger.score)
    splits = list(KFold(3).split(X))
    for params, mean in zip(results["params"], results["mean_test_score"]):
        manual = manual_cv_scores(CRFTagger(**params), X, Y, splits)
        assert mean == pytest.approx(manual.mean(), abs=1e-12), params
    assert np.ptp(results["mean_test_score"]) > 0.02  # the grid matters
    best = int(np.argmax(results["mean_test_score"]))
    assert results["rank_test_score"][best] == 1
    assert search.best_params_ == results["params"][best]
    assert {k: search.best_estimator_.get_params()[k] for k in GRID} == search.best_params_
    assert search.predict(X) == search.best_estimator_.predict(X)
    assert search.score(X, Y) == search.best_estimator_.score(X, Y)
    # threads instead of processes: no shared state between concurrent fits
    with parallel_config(backend="threading"):
        threaded = GridSearchCV(CRFTagger(), GRID, cv=KFold(3), n_jobs=2, error_score="raise").fit(
            X, Y
        )
    np.testing.assert_array_equal(
        threaded.cv_results_["mean_test_score"], results["mean_test_score"]
    )


def test_grid_search_with_multiple_scorers_refits_on_the_named_one():
    search = GridSearchCV(
        CRFTagger(),
        GRID,
        cv=3,
        n_jobs=2,
        error_score="raise",
        scoring=scorers("flat_accuracy", "sequence_accuracy"),
        refit="sequence_accuracy",
    )
    search.fit(X, Y)
    results = search.cv_results_
    assert search.best_index_ == int(np.argmin(results["rank_test_sequence_accuracy"]))
    assert search.best_score_ == results["mean_test_sequence_accuracy"][search.best_index_]
    # default scoring and the flat_accuracy scorer agree
    plain = GridSearchCV(CRFTagger(), GRID, cv=3, n_jobs=2, error_score="raise").fit(X, Y)
    np.testing.assert_array_equal(
        results["mean_test_flat_accuracy"], plain.cv_results_["mean_test_score"]
    )


def test_randomized_search_over_c1_c2_in_parallel():
    distributions = {"c1": [0.0, 0.1, 0.5], "c2": loguniform(1e-3, 1e1)}
    kwargs = dict(
        n_iter=5,
        cv=KFold(3),
        n_jobs=2,
        random_state=0,
        error_score="raise",
        scoring=get_scorer("flat_accuracy"),
    )
    search = RandomizedSearchCV(CRFTagger(), distributions, **kwargs).fit(X, Y)
    params = search.cv_results_["params"]
    assert len(params) == 5
    assert all(p["c1"] in distributions["c1"] and 1e-3 <= p["c2"] <= 1e1 for p in params)
    assert search.best_score_ == search.cv_results_["mean_test_score"].max()
    again = RandomizedSearchCV(CRFTagger(), distributions, **kwargs).fit(X, Y)
    assert again.cv_results_["params"] == params
    np.testing.assert_array_equal(
        again.cv_results_["mean_test_score"], search.cv_results_["mean_test_score"]
    )


def test_validation_and_learning_curves():
    cv = KFold(3)
    train, test = validation_curve(
        CRFTagger(), X, Y, param_name="c2", param_range=[0.01, 10.0], cv=cv, error_score="raise"
    )
    assert train.shape == test.shape == (2, 3)
    np.testing.assert_allclose(
        test[1], manual_cv_scores(CRFTagger(c2=10.0), X, Y, list(cv.split(X)))
    )
    sizes, train, test = learning_curve(
        CRFTagger(c2=0.1), X, Y, cv=cv, train_sizes=[0.5, 1.0], error_score="raise"
    )
    assert sizes.tolist() == [16, 32] and test.shape == (2, 3)


def test_dev_data_through_search_and_pipeline():
    """X_dev / y_dev reach CRFTagger.fit as fit parameters and with metadata routing."""
    X_dev, Y_dev = X[:5], Y[:5]
    search = GridSearchCV(CRFTagger(), {"c2": [0.1, 1.0]}, cv=3, error_score="raise")
    search.fit(X, Y, X_dev=X_dev, y_dev=Y_dev)
    assert "dev_accuracy" in search.best_estimator_.training_log_.last_iteration

    pipe = make_pipeline(SequenceFeaturizer(), CRFTagger(c2=0.1))
    pipe.fit(
        WORDS,
        Y,
        crftagger__X_dev=SequenceFeaturizer().transform(WORDS[:5]),
        crftagger__y_dev=Y_dev,
    )
    assert "dev_accuracy" in pipe[-1].training_log_.last_iteration

    with config_context(enable_metadata_routing=True):
        tagger = CRFTagger().set_fit_request(X_dev=True, y_dev=True)
        search = GridSearchCV(tagger, {"c2": [0.1, 1.0]}, cv=3, error_score="raise")
        search.fit(X, Y, X_dev=X_dev, y_dev=Y_dev)
    assert "dev_accuracy" in search.best_estimator_.training_log_.last_iteration


@pytest.mark.xfail(
    raises=ValueError,
    strict=True,
    reason=(
        "scikit-learn limitation: cross_val_predict concatenates the per-fold "
        "predictions with numpy, which fails on ragged lists of label sequences; "
        "see test_out_of_fold_predictions_without_cross_val_predict"
    ),
)
def test_cross_val_predict_cannot_concatenate_sequences():
    cross_val_predict(CRFTagger(c2=0.1), X, Y, cv=3)


def test_out_of_fold_predictions_without_cross_val_predict():
    result = cross_validate(
        CRFTagger(c2=0.1),
        X,
        Y,
        cv=KFold(3, shuffle=True, random_state=0),
        return_estimator=True,
        return_indices=True,
        error_score="raise",
    )
    predicted = [None] * len(X)
    for estimator, test in zip(result["estimator"], result["indices"]["test"]):
        for i, labels in zip(test, estimator.predict(subset(X, test))):
            predicted[i] = labels
    assert [len(p) for p in predicted] == [len(y) for y in Y]
    assert flat_accuracy_score(Y, predicted) == pytest.approx(
        np.average(
            result["test_score"],
            weights=[sum(len(Y[i]) for i in test) for test in result["indices"]["test"]],
        )
    )


@pytest.mark.parametrize("output", ["pandas", "polars"])
def test_global_transform_output_config_is_ignored(output):
    pipe = make_pipeline(SequenceFeaturizer(), CRFTagger(c2=0.1))
    expected = clone(pipe).fit(WORDS, Y)
    with config_context(transform_output=output):
        fitted = clone(pipe).fit(WORDS, Y)
        assert fitted.predict(WORDS) == expected.predict(WORDS)
        features = fitted[0].transform(WORDS)
        assert fitted[-1].predict_marginals(features) == expected[-1].predict_marginals(features)
        assert fitted.score(WORDS, Y) == expected.score(WORDS, Y)


# ---------------------------------------------------------------------------
# Pipeline with SequenceFeaturizer
# ---------------------------------------------------------------------------


def test_pipeline_on_raw_sentences_matches_manual_steps():
    """check_pipeline_consistency, with sequences."""
    pipe = make_pipeline(SequenceFeaturizer(window=2), CRFTagger(c1=0.05, c2=0.1))
    assert list(pipe.named_steps) == ["sequencefeaturizer", "crftagger"]
    params = pipe.get_params()
    assert params["crftagger__c1"] == 0.05 and params["sequencefeaturizer__window"] == 2
    pipe.fit(WORDS, Y)

    features = SequenceFeaturizer(window=2).fit_transform(WORDS)
    tagger = CRFTagger(c1=0.05, c2=0.1).fit(features, Y)
    assert pipe.predict(WORDS) == tagger.predict(features)
    assert pipe.score(WORDS, Y) == tagger.score(features, Y)
    assert pipe[-1].attributes_ == tagger.attributes_
    assert_same_coef(pipe[-1].coef_, tagger.coef_)
    marginals = pipe[-1].predict_marginals(pipe[:-1].transform(WORDS))
    assert marginals == tagger.predict_marginals(features)
    assert pipe.predict([["the", "old", "man", "sees", "a", "duck"]])[0][:3] == ["D", "J", "N"]

    # named steps; set_params reaches into the steps
    named = Pipeline([("feat", SequenceFeaturizer()), ("crf", CRFTagger())])
    named.set_params(feat__window=2, crf__c1=0.05, crf__c2=0.1).fit(WORDS, Y)
    assert named.predict(WORDS) == pipe.predict(WORDS)
    unfitted = clone(pipe)
    with pytest.raises(NotFittedError):
        unfitted.predict(WORDS)


def test_grid_search_through_the_pipeline():
    pipe = make_pipeline(SequenceFeaturizer(), CRFTagger(c2=0.1))
    grid = {"crftagger__c1": [0.0, 0.3], "sequencefeaturizer__window": [0, 2]}
    search = GridSearchCV(pipe, grid, cv=KFold(3), n_jobs=2, error_score="raise").fit(WORDS, Y)
    results = search.cv_results_
    assert len(results["params"]) == 4
    splits = list(KFold(3).split(WORDS))
    for params, mean in zip(results["params"], results["mean_test_score"]):
        manual = manual_cv_scores(clone(pipe).set_params(**params), WORDS, Y, splits)
        assert mean == pytest.approx(manual.mean(), abs=1e-12), params
    best = search.best_estimator_
    assert isinstance(best, Pipeline)
    assert {k: best.get_params()[k] for k in grid} == search.best_params_
    assert (
        best.named_steps["sequencefeaturizer"].window
        == search.best_params_["sequencefeaturizer__window"]
    )
    assert search.predict(WORDS[:3]) == best.predict(WORDS[:3])


# ---------------------------------------------------------------------------
# Persistence
# ---------------------------------------------------------------------------


class _Snapshot:
    """What _assert_same_model compares, taken from a fitted estimator
    before it is pickled (see test_pickling_leaves_the_estimator_usable)."""

    def __init__(self, tagger, X_):
        self.type = type(tagger)
        self.params = tagger.get_params()
        self.predicted = tagger.predict(X_)
        self.marginals = tagger.predict_marginals(X_)
        self.coef_ = tagger.coef_
        self.transition_ = tagger.transition_
        self.classes_ = tagger.classes_
        self.attributes_ = list(tagger.attributes_)
        self.vectorizer_ = tagger.vectorizer_

    def get_params(self):
        return self.params

    def predict(self, X_):
        return self.predicted

    def predict_marginals(self, X_):
        return self.marginals


def _assert_same_model(original, loaded, X_):
    if isinstance(original, _Snapshot):
        assert type(loaded) is original.type
    else:
        assert type(loaded) is type(original)
    assert loaded.get_params() == original.get_params()
    assert loaded.predict(X_) == original.predict(X_)
    assert loaded.predict_marginals(X_) == original.predict_marginals(X_)
    assert_same_coef(loaded.coef_, original.coef_)
    np.testing.assert_array_equal(loaded.transition_, original.transition_)
    assert loaded.classes_.tolist() == original.classes_.tolist()
    assert loaded.attributes_ == original.attributes_
    assert loaded.vectorizer_.feature_names_ == original.vectorizer_.feature_names_


def test_pickle_and_joblib_round_trips(fitted, tmp_path):
    """check_estimators_pickle, with sequences: identical predictions and marginals."""
    snapshot = _Snapshot(fitted, X)
    for protocol in (pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL):
        _assert_same_model(snapshot, pickle.loads(pickle.dumps(fitted, protocol=protocol)), X)
    path = tmp_path / "tagger.joblib"
    joblib.dump(fitted, path, compress=3)
    _assert_same_model(snapshot, joblib.load(path), X)
    # unfitted estimators and fitted pipelines too
    unfitted = pickle.loads(pickle.dumps(CRFTagger(c1=0.2)))
    assert unfitted.get_params() == CRFTagger(c1=0.2).get_params()
    pipe = make_pipeline(SequenceFeaturizer(), CRFTagger(c2=0.1)).fit(WORDS, Y)
    features = pipe[:-1].transform(WORDS)
    predicted, marginals = pipe.predict(WORDS), pipe[-1].predict_marginals(features)
    loaded = pickle.loads(pickle.dumps(pipe))
    assert loaded.predict(WORDS) == predicted
    assert loaded[-1].predict_marginals(features) == marginals


def test_pickling_leaves_the_estimator_usable():
    tagger = CRFTagger(c2=0.1).fit(X, Y)
    predicted = tagger.predict(X)
    for dump in (pickle.dumps, deepcopy, lambda t: joblib.dump(t, io.BytesIO())):
        dump(tagger)
        assert tagger.predict(X) == predicted
        assert tagger.predict_single(X[0]) == predicted[0]


_TEMPFILE_FUNCTIONS = (
    "mkstemp",
    "mkdtemp",
    "mktemp",
    "NamedTemporaryFile",
    "TemporaryFile",
    "SpooledTemporaryFile",
    "TemporaryDirectory",
)


def test_fitted_model_lives_in_memory(monkeypatch, tmp_path):
    """Unlike sklearn_crfsuite, no model file: fit and pickling create no
    temporary file, and the fitted state references no file."""
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))

    def forbidden(*args, **kwargs):
        raise AssertionError("a temporary file was created")

    for name in _TEMPFILE_FUNCTIONS:
        monkeypatch.setattr(tempfile, name, forbidden)

    for n_jobs in (None, 2):
        tagger = CRFTagger(c1=0.05, c2=0.1, n_jobs=n_jobs).fit(X, Y)
        snapshot = _Snapshot(tagger, X)
        buffer = io.BytesIO()
        joblib.dump(tagger, buffer)
        buffer.seek(0)
        for loaded in (pickle.loads(pickle.dumps(tagger)), joblib.load(buffer)):
            _assert_same_model(snapshot, loaded, X)
        for value in vars(tagger).values():
            assert not (isinstance(value, (str, bytes, os.PathLike)) and os.path.exists(value))
    assert list(private_tmp.iterdir()) == []


# ---------------------------------------------------------------------------
# Dask
# ---------------------------------------------------------------------------

DASK_TIMEOUT = 120  # seconds for the whole grid search on the cluster


def _run_with_timeout(func, timeout):
    """Run ``func`` in a daemon thread; fail (not hang) after ``timeout`` s."""
    outcome = {}

    def target():
        try:
            outcome["value"] = func()
        except BaseException as exc:  # re-raised in the test's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        pytest.fail(f"did not finish within {timeout} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _live_children():
    import psutil

    children = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                children.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return children


def test_grid_search_on_dask_matches_local_run():
    distributed = pytest.importorskip("dask.distributed")
    pytest.importorskip("psutil")

    def make_search():
        return GridSearchCV(
            CRFTagger(),
            GRID,
            cv=KFold(3),
            n_jobs=2,
            error_score="raise",
            scoring=scorers("flat_accuracy", "sequence_accuracy"),
            refit="flat_accuracy",
        )

    local = make_search().fit(X, Y)

    children_before = _live_children()
    cluster = client = None
    try:
        cluster = distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=40,  # logging.ERROR
        )
        client = distributed.Client(cluster, timeout="60s")
        client.wait_for_workers(2, timeout=60)
        worker_pids = set(client.run(os.getpid).values())
        assert len(worker_pids) == 2 and os.getpid() not in worker_pids

        def search_on_dask():
            with parallel_config(backend="dask", client=client, wait_for_workers_timeout=60):
                return make_search().fit(X, Y)

        with distributed.get_task_stream(client) as stream:
            remote = _run_with_timeout(search_on_dask, DASK_TIMEOUT)
        assert len(stream.data) > 0, "no task ran on the dask workers"
    finally:
        if client is not None:
            client.close(timeout=30)
        if cluster is not None:
            cluster.close(timeout=30)

    for key in (
        "mean_test_flat_accuracy",
        "mean_test_sequence_accuracy",
        "std_test_flat_accuracy",
    ):
        np.testing.assert_allclose(
            remote.cv_results_[key], local.cv_results_[key], rtol=1e-12, atol=0
        )
    assert remote.cv_results_["params"] == local.cv_results_["params"]
    assert remote.best_params_ == local.best_params_
    assert remote.predict(X) == local.predict(X)

    # no worker process is left behind
    deadline = time.monotonic() + 30
    while (_live_children() - children_before) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not (_live_children() - children_before)
    assert not worker_pids & _live_children()


def test_param_names_read_from_code_equal_scikit_learns():
    """skcrf's fast read of ``__init__``'s arguments names what scikit-learn's inspection does."""
    import skcrf.dask
    import skcrf.nltk  # noqa: F401
    from skcrf._compat import _init_argument_names, param_names

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    from sklearn.base import BaseEstimator

    ours = [c for c in subclasses(BaseEstimator) if c.__module__.startswith("skcrf")]
    assert len(ours) >= 3
    for cls in ours:
        assert param_names(cls) == tuple(cls._get_param_names()), cls

    class Wrapped(CRFTagger):
        @functools.wraps(CRFTagger.__init__)
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)

    class VarArgs(CRFTagger):
        def __init__(self, c1=0.0, *args):
            super().__init__(c1=c1)

    assert _init_argument_names(Wrapped) is None and _init_argument_names(VarArgs) is None
    assert param_names(Wrapped) == param_names(CRFTagger)
    with pytest.raises(RuntimeError, match="no varargs"):
        param_names(VarArgs)
