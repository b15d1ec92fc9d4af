"""Parity with CRFsuite (through sklearn-crfsuite) on a Treebank subset.

skcrf names attributes as CRFsuite does, so the two models compare feature by
feature: the same feature set, the same iterates (the loss of every early
iteration, on real sequences with transitions), the same objective at
convergence (skcrf's objective evaluated at both weight vectors) and the same
predictions.
"""

import numpy as np
import pytest

from skcrf import CRFTagger
from skcrf._featurize._labels import check_labels, encode_labels
from skcrf._featurize._vocabulary import Vocabulary
from skcrf._training._objective import CRFObjective, select_features
from skcrf.datasets import treebank_sentence_features

sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")

N_TRAIN = 600
N_TEST = 200


@pytest.fixture(scope="module")
def subset(treebank):
    train, test = treebank
    return treebank_sentence_features(train[:N_TRAIN]), treebank_sentence_features(test[:N_TEST])


def objective_at(tagger, X, y, state_weights, transition_weights, c1, c2):
    """skcrf's full objective at weights given as ``state_features_``-style dicts.

    Every weight must belong to a feature of skcrf's model.
    """
    vocabulary = Vocabulary(tagger.attributes_)
    encoded = vocabulary.encode(X, grow=False)
    labels, classes = encode_labels(check_labels(y, encoded.lengths), tagger.classes_)
    model, observed = select_features(
        encoded, labels, classes, vocabulary.attributes, all_possible_transitions=True
    )
    label_index = {label: k for k, label in enumerate(classes)}
    position = {
        (a, int(label)): k
        for k, (a, label) in enumerate(zip(model.state_attributes().tolist(), model.state_labels))
    }
    w = np.zeros(model.n_features)
    for (attribute, label), weight in state_weights.items():
        w[position[vocabulary.get(attribute), label_index[label]]] = weight
    transition_position = {int(k): n for n, k in enumerate(model.transition_index)}
    n_labels = len(classes)
    for (label_from, label_to), weight in transition_weights.items():
        flat = label_index[label_from] * n_labels + label_index[label_to]
        w[model.n_states + transition_position[flat]] = weight
    with CRFObjective(encoded, model, observed, c2=c2) as objective:
        return objective.loss_gradient(w)[0] + c1 * np.abs(w).sum()


@pytest.mark.treebank
@pytest.mark.parametrize("c1, c2, rtol", [(0.0, 1.0, 1e-6), (0.1, 0.1, 1e-4)])
def test_same_objective_and_predictions_as_crfsuite(subset, c1, c2, rtol):
    (X, y), (X_test, y_test) = subset
    reference = sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=c1, c2=c2, all_possible_transitions=True
    ).fit(X, y)
    tagger = CRFTagger(c1=c1, c2=c2, all_possible_transitions=True).fit(X, y)

    ours = objective_at(tagger, X, y, tagger.state_features_, tagger.transition_features_, c1, c2)
    theirs = objective_at(
        tagger, X, y, reference.state_features_, reference.transition_features_, c1, c2
    )
    # our log reports the same objective as our objective function
    assert tagger.training_log_.last_iteration["loss"] == pytest.approx(ours, rel=1e-9)
    # CRFsuite's own log reports the same objective for its weights (which
    # sklearn-crfsuite rounds to 6 decimals)
    assert reference.training_log_.last_iteration["loss"] == pytest.approx(theirs, rel=1e-6)
    assert ours == pytest.approx(theirs, rel=rtol)

    ours_pred = [t for seq in tagger.predict(X_test) for t in seq]
    theirs_pred = [t for seq in reference.predict(X_test) for t in seq]
    agreement = np.mean(np.array(ours_pred) == np.array(theirs_pred))
    assert agreement >= 0.995


@pytest.mark.treebank
@pytest.mark.parametrize("c1, c2", [(0.0, 1.0), (0.1, 0.1)])
def test_same_iterates_as_crfsuite(subset, c1, c2):
    # On real sentences (with transitions) the two optimizers take the same
    # steps: the loss of each early iteration agrees to the precision that
    # CRFsuite's log prints, until rounding differences accumulate.
    (X, y), _ = subset
    X, y = X[:200], y[:200]
    settings = dict(c1=c1, c2=c2, all_possible_transitions=True, max_iterations=15)
    reference = sklearn_crfsuite.CRF(algorithm="lbfgs", **settings).fit(X, y)
    with pytest.warns(Warning):  # stopped by max_iterations
        tagger = CRFTagger(**settings).fit(X, y)
    theirs = reference.training_log_.iterations
    ours = tagger.training_log_.iterations
    assert len(ours) == len(theirs) == 15
    for mine, other in zip(ours, theirs):
        assert mine["loss"] == pytest.approx(other["loss"], rel=1e-6)
        assert mine["linesearch_trials"] == other["linesearch_trials"]


@pytest.mark.treebank
def test_same_feature_set_as_crfsuite(subset):
    # With c1 = 0 every feature has a nonzero weight, so CRFsuite's model
    # lists all its features: they must be exactly skcrf's, by name.
    (X, y), _ = subset
    settings = dict(c1=0.0, c2=1.0, max_iterations=5)
    for options in ({}, {"all_possible_transitions": True}, {"min_freq": 2.0}):
        reference = sklearn_crfsuite.CRF(algorithm="lbfgs", **settings, **options).fit(X, y)
        with pytest.warns(Warning):
            tagger = CRFTagger(**settings, **options).fit(X, y)
        model = tagger._model
        ours = {
            (model.attributes[a], model.classes[k])
            for a, k in zip(model.state_attributes().tolist(), model.state_labels.tolist())
        }
        assert ours == set(reference.state_features_)
        assert set(tagger.transition_features_) == set(reference.transition_features_)
        assert tagger.n_features_ == len(reference.state_features_) + len(
            reference.transition_features_
        )
