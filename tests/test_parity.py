"""Parity with CRFsuite (through sklearn-crfsuite) on a Treebank subset.

Both engines train to convergence with the same settings; the final
objective (skcrf's objective function evaluated at both weight vectors) and
the test predictions must agree.
"""

import numpy as np
import pytest

from skcrf import CRFTagger
from skcrf._objective import CRFObjective, pack_weights, select_features
from skcrf._vectorize import check_labels, encode_labels, vectorize
from skcrf.datasets import treebank_sentence_features

sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")

N_TRAIN = 600
N_TEST = 200


@pytest.fixture(scope="module")
def subset(treebank):
    train, test = treebank
    return treebank_sentence_features(train[:N_TRAIN]), treebank_sentence_features(test[:N_TEST])


def full_objective(tagger, X, y, state_weights, transition_weights, c1, c2):
    """skcrf's objective at weights given as CRFsuite-style dicts."""
    matrix, lengths, _ = vectorize(X, tagger.vectorizer_)
    labels, classes = encode_labels(check_labels(y, lengths), tagger.classes_)
    n_labels = len(classes)
    features = select_features(matrix, labels, lengths, n_labels, all_possible_transitions=True)
    column = tagger.vectorizer_.vocabulary_
    label_index = {label: k for k, label in enumerate(classes)}
    W = np.zeros((matrix.shape[1], n_labels))
    for (attribute, label), weight in state_weights.items():
        # CRFsuite names string features key:value; DictVectorizer key=value
        name = attribute if attribute in column else attribute.replace(":", "=", 1)
        W[column[name], label_index[label]] = weight
    T = np.zeros((n_labels, n_labels))
    for (label_from, label_to), weight in transition_weights.items():
        T[label_index[label_from], label_index[label_to]] = weight
    w = pack_weights(W, T, features)
    # every CRFsuite weight must be a feature of skcrf's model
    assert np.abs(w).sum() == pytest.approx(np.abs(W).sum() + np.abs(T).sum(), rel=1e-12)
    objective = CRFObjective(matrix, lengths, n_labels, features, c2=c2)
    return objective.loss_gradient(w)[0] + c1 * np.abs(w).sum()


@pytest.mark.treebank
@pytest.mark.parametrize("c1, c2, rtol", [(0.0, 1.0, 1e-4), (0.1, 0.1, 1e-3)])
def test_same_objective_and_predictions_as_crfsuite(subset, c1, c2, rtol):
    (X, y), (X_test, y_test) = subset
    reference = sklearn_crfsuite.CRF(
        algorithm="lbfgs", c1=c1, c2=c2, all_possible_transitions=True
    ).fit(X, y)
    tagger = CRFTagger(c1=c1, c2=c2, all_possible_transitions=True).fit(X, y)

    ours = full_objective(
        tagger, X, y, tagger.state_features_, tagger.transition_features_, c1, c2
    )
    theirs = full_objective(
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
