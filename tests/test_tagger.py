"""CRFTagger: the public API, token formats, labels, logs and warnings."""

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

from skcrf import CRFTagger
from skcrf._lbfgs import LBFGSStatus

X_TOY = [
    [{"w": "the"}, {"w": "dog"}, {"w": "barks"}],
    [{"w": "a"}, {"w": "cat"}],
    [{"w": "the"}, {"w": "cat"}, {"w": "sleeps"}],
    [{"w": "a"}, {"w": "dog"}, {"w": "sleeps"}],
]
Y_TOY = [["D", "N", "V"], ["D", "N"], ["D", "N", "V"], ["D", "N", "V"]]


def fit_quietly(tagger, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return tagger.fit(X, y, **kwargs)


def test_fit_predict_and_fitted_attributes():
    tagger = CRFTagger(c2=0.01).fit(X_TOY, Y_TOY)
    assert tagger.predict(X_TOY) == Y_TOY
    assert tagger.score(X_TOY, Y_TOY) == 1.0
    assert tagger.classes_.tolist() == ["D", "N", "V"]
    assert tagger.coef_.shape == (len(tagger.vectorizer_.feature_names_), 3)
    assert tagger.transition_.shape == (3, 3)
    assert tagger.status_.converged and tagger.training_log_.converged
    assert tagger.n_iter_ == len(tagger.training_log_.iterations) > 0
    entry = tagger.training_log_.last_iteration
    for key in ("loss", "feature_norm", "error_norm", "active_features",
                "linesearch_trials", "linesearch_step", "time"):
        assert key in entry
    # only transitions seen in training exist: D->N, N->V
    assert set(tagger.transition_features_) == {("D", "N"), ("N", "V")}
    assert all(w != 0 for w in tagger.state_features_.values())
    assert ("w=dog", "N") in tagger.state_features_


def test_predict_returns_lists_even_for_equal_lengths():
    tagger = CRFTagger().fit(X_TOY, Y_TOY)
    predicted = tagger.predict([X_TOY[0], X_TOY[2]])
    assert isinstance(predicted, list) and all(isinstance(p, list) for p in predicted)
    assert tagger.predict_single(X_TOY[1]) == ["D", "N"]
    assert tagger.predict([]) == []
    assert tagger.predict([[], X_TOY[1]]) == [[], ["D", "N"]]


def test_marginals_are_distributions_and_agree_with_viterbi():
    tagger = CRFTagger(c2=0.1).fit(X_TOY, Y_TOY)
    marginals = tagger.predict_marginals(X_TOY)
    for seq_marginals, seq in zip(marginals, X_TOY):
        assert len(seq_marginals) == len(seq)
        for token in seq_marginals:
            assert set(token) == {"D", "N", "V"}
            assert sum(token.values()) == pytest.approx(1.0, abs=1e-12)
    single = tagger.predict_marginals_single(X_TOY[0])
    assert max(single[1], key=single[1].get) == "N"


def test_labels_of_any_hashable_type_come_back_as_given():
    y_int = [[0, 1, 2], [0, 1], [0, 1, 2], [0, 1, 2]]
    tagger = CRFTagger(c2=0.01).fit(X_TOY, y_int)
    predicted = tagger.predict(X_TOY)
    assert predicted == y_int
    assert all(type(label) is int for seq in predicted for label in seq)

    y_mixed = [["D", 1, ("v",)], ["D", 1], ["D", 1, ("v",)], ["D", 1, ("v",)]]
    tagger = CRFTagger(c2=0.01).fit(X_TOY, y_mixed)
    assert tagger.predict(X_TOY) == y_mixed


def test_token_formats_follow_python_crfsuite():
    # The same information as dicts, as feature-name lists, nested and as
    # list values gives the same model.
    as_dicts = [[{"a": 1.0, "b": True}], [{"a": 1.0, "c": True}]]
    as_lists = [[["a", "b"]], [["a", "c"]]]
    y = [["X"], ["Y"]]
    t_dicts = CRFTagger().fit(as_dicts, y)
    t_lists = CRFTagger().fit(as_lists, y)
    np.testing.assert_array_equal(t_dicts.coef_, t_lists.coef_)

    # "c": False stores c with value 0, which still creates the feature
    # (c, X) as in CRFsuite; c = 1 at the Y token then pushes its weight down.
    with_false = [[{"a": 1.0, "b": True, "c": False}], [{"a": 1.0, "c": True}]]
    t_false = CRFTagger().fit(with_false, y)
    assert t_false.n_features_ == t_lists.n_features_ + 1
    assert t_false.state_features_[("c", "X")] < 0
    assert ("c", "X") not in t_lists.state_features_

    nested = [[{"n": {"a": 1, "b": "x"}, "l": ["p", "q"]}], [{"n": {"a": 2}}]]
    tagger = CRFTagger().fit(nested, y)
    names = set(tagger.vectorizer_.feature_names_)
    assert names == {"n:a", "n:b=x", "l=p", "l=q"}


def test_dev_data_is_logged_but_does_not_change_the_model():
    X_dev = [[{"w": "a"}, {"w": "dog"}], [{"w": "the"}, {"w": "bird"}]]
    y_dev = [["D", "N"], ["D", "UNSEEN"]]
    plain = CRFTagger(c2=0.1).fit(X_TOY, Y_TOY)
    with_dev = CRFTagger(c2=0.1).fit(X_TOY, Y_TOY, X_dev=X_dev, y_dev=y_dev)
    np.testing.assert_array_equal(plain.coef_, with_dev.coef_)
    np.testing.assert_array_equal(plain.transition_, with_dev.transition_)
    assert "UNSEEN" not in with_dev.classes_.tolist()
    accuracies = [it["dev_accuracy"] for it in with_dev.training_log_.iterations]
    assert accuracies[-1] == 0.75  # the unseen label is always wrong
    with pytest.raises(ValueError, match="together"):
        CRFTagger().fit(X_TOY, Y_TOY, X_dev=X_dev)


def test_max_iterations_warns_and_keeps_last_weights():
    tagger = CRFTagger(max_iterations=2)
    with pytest.warns(ConvergenceWarning, match="MAX_ITERATIONS"):
        tagger.fit(X_TOY, Y_TOY)
    assert tagger.n_iter_ == 2
    assert tagger.status_ is LBFGSStatus.MAX_ITERATIONS
    assert not tagger.training_log_.converged


@pytest.mark.parametrize("linesearch", ["MoreThuente", "Backtracking", "StrongBacktracking"])
def test_line_searches_reach_the_same_optimum(linesearch):
    reference = CRFTagger(c2=0.5, epsilon=1e-7, period=0).fit(X_TOY, Y_TOY)
    tagger = CRFTagger(c2=0.5, linesearch=linesearch, epsilon=1e-7, period=0).fit(X_TOY, Y_TOY)
    assert tagger.status_ is LBFGSStatus.CONVERGED
    assert tagger.training_log_.last_iteration["loss"] == pytest.approx(
        reference.training_log_.last_iteration["loss"], rel=1e-10
    )


def test_l1_gives_sparse_weights():
    dense = CRFTagger(c1=0.0, c2=0.01).fit(X_TOY, Y_TOY)
    sparse = CRFTagger(c1=1.0, c2=0.01).fit(X_TOY, Y_TOY)
    assert sparse.training_log_.last_iteration["active_features"] < dense.n_features_
    assert len(sparse.state_features_) < len(dense.state_features_)


def test_n_jobs_gives_the_same_model():
    one = CRFTagger(n_jobs=1).fit(X_TOY, Y_TOY)
    two = CRFTagger(n_jobs=2).fit(X_TOY, Y_TOY)
    np.testing.assert_allclose(one.coef_, two.coef_, rtol=1e-9, atol=1e-12)


def test_training_is_deterministic():
    a = CRFTagger(c1=0.05, c2=0.1).fit(X_TOY, Y_TOY)
    b = CRFTagger(c1=0.05, c2=0.1).fit(X_TOY, Y_TOY)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.transition_, b.transition_)


def test_not_fitted_error_before_fit():
    tagger = CRFTagger()
    for method in (tagger.predict, tagger.predict_marginals):
        with pytest.raises(NotFittedError):
            method(X_TOY)
    with pytest.raises(NotFittedError):
        tagger.state_features_


def test_unseen_features_and_single_label():
    tagger = CRFTagger().fit([[{"w": "x"}], [{"w": "y"}]], [["only"], ["only"]])
    assert tagger.predict([[{"never": "seen"}, {"w": "x"}]]) == [["only", "only"]]


def test_parameter_validation_names_the_range():
    with pytest.raises(ValueError, match="'c1' parameter.*range"):
        CRFTagger(c1=-1).fit(X_TOY, Y_TOY)
    with pytest.raises(ValueError, match="'num_memories'"):
        CRFTagger(num_memories=0).fit(X_TOY, Y_TOY)
    with pytest.raises(ValueError, match="'linesearch'.*MoreThuente"):
        CRFTagger(linesearch="Bogus").fit(X_TOY, Y_TOY)
