"""The partial-label objective (Tsuboi et al., 2008) of skcrf._training._objective:
brute force over every labelling, finite differences, and equality with the
usual objective when every label is known."""

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from skcrf._featurize._encoded import Encoded
from skcrf._featurize._labels import check_partial_training_labels
from skcrf._inference import _blocks
from skcrf._training._objective import CRFObjective, select_features

pytest.importorskip("skcrf._inference._kernels", reason="compiled extension not built")

MISSING = "?"


def random_data(
    rng, n_sequences=4, n_attributes=5, n_labels=3, max_length=4, hide=0.4, fuzzy=0.15
):
    lengths = rng.integers(1, max_length + 1, size=n_sequences)
    rows = []
    for _ in range(int(lengths.sum())):
        ids = rng.choice(n_attributes, size=rng.integers(1, 4), replace=False)
        rows.append((np.sort(ids), rng.normal(size=len(ids))))
    indptr = np.concatenate([[0], np.cumsum([len(ids) for ids, _ in rows])]).astype(np.int64)
    encoded = Encoded(
        indptr=indptr,
        ids=np.concatenate([ids for ids, _ in rows]).astype(np.int32),
        values=np.concatenate([v for _, v in rows]),
        lengths=lengths.astype(np.intp),
    )
    names = [f"L{k}" for k in range(n_labels)]
    y, start = [], 0
    for length in lengths:
        seq = []
        for _ in range(length):
            u = rng.random()
            if u < hide:
                seq.append(MISSING)
            elif u < hide + fuzzy:
                seq.append(frozenset(rng.choice(names, size=2, replace=False).tolist()))
            else:
                seq.append(names[rng.integers(n_labels)])
        y.append(seq)
        start += length
    # every label appears known somewhere, so that classes are all the labels
    y[0] = [names[k % n_labels] for k in range(len(y[0]))]
    return encoded, y, [f"a{k}" for k in range(n_attributes)]


def build(encoded, y, attributes, **kwargs):
    label_index, classes, partial = check_partial_training_labels(y, encoded.lengths, MISSING)
    model, observed = select_features(
        encoded, label_index, classes, attributes, partial=partial, **kwargs
    )
    return model, observed, partial


def brute_force_loss(encoded, y, model, w, c2):
    """-sum log sum_{consistent y} p(y | x) + c2 ||w||^2, by enumeration."""
    n_labels = model.n_labels
    m = model.with_weights(w)
    emissions = np.zeros((len(encoded.indptr) - 1, n_labels))
    coef = m.coef().toarray()
    for r in range(len(emissions)):
        a, b = encoded.indptr[r], encoded.indptr[r + 1]
        emissions[r] = encoded.values[a:b] @ coef[encoded.ids[a:b]]
    T = m.transition_matrix()
    index = {label: k for k, label in enumerate(model.classes)}
    loss, start = 0.0, 0
    for seq in y:
        length = len(seq)
        e = emissions[start : start + length]
        start += length
        all_scores, consistent = [], []
        for labels in itertools.product(range(n_labels), repeat=length):
            score = e[np.arange(length), labels].sum() + sum(
                T[a, b] for a, b in zip(labels, labels[1:])
            )
            all_scores.append(score)
            ok = all(
                value == MISSING
                or (isinstance(value, frozenset) and model.classes[k] in value)
                or (not isinstance(value, frozenset) and index[value] == k)
                for value, k in zip(seq, labels)
            )
            if ok:
                consistent.append(score)
        loss += logsumexp(all_scores) - logsumexp(consistent)
    return loss + c2 * (w @ w)


@pytest.mark.parametrize("seed", range(6))
def test_loss_matches_brute_force_and_gradient_finite_differences(seed):
    rng = np.random.default_rng(seed)
    encoded, y, attributes = random_data(rng)
    model, observed, partial = build(encoded, y, attributes, all_possible_transitions=True)
    c2 = 0.3
    w = rng.normal(size=model.n_features) * 0.7
    with CRFObjective(encoded, model, observed, c2=c2, partial=partial) as objective:
        loss, gradient = objective.loss_gradient(w)
        np.testing.assert_allclose(loss, brute_force_loss(encoded, y, model, w, c2), rtol=1e-9)
        h = 1e-6
        numeric = np.empty_like(w)
        for k in range(len(w)):
            step = np.zeros_like(w)
            step[k] = h
            numeric[k] = (
                objective.loss_gradient(w + step)[0] - objective.loss_gradient(w - step)[0]
            ) / (2 * h)
    np.testing.assert_allclose(gradient, numeric, rtol=1e-5, atol=1e-6)


def test_blocks_and_threads_agree(monkeypatch):
    rng = np.random.default_rng(42)
    encoded, y, attributes = random_data(rng, n_sequences=30, max_length=6)
    model, observed, partial = build(encoded, y, attributes)
    w = rng.normal(size=model.n_features)
    with CRFObjective(encoded, model, observed, c2=0.1, partial=partial) as objective:
        expected = objective.loss_gradient(w)
    monkeypatch.setattr(_blocks, "BLOCK_ELEMENTS", 12)
    with CRFObjective(encoded, model, observed, c2=0.1, partial=partial, n_threads=3) as objective:
        got = objective.loss_gradient(w)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-10, atol=1e-12)


def test_no_missing_label_is_the_usual_objective():
    rng = np.random.default_rng(1)
    encoded, y, attributes = random_data(rng, hide=0.0, fuzzy=0.0)
    label_index, classes, partial = check_partial_training_labels(y, encoded.lengths, MISSING)
    assert partial is None
    model, observed = select_features(encoded, label_index, classes, attributes)
    w = rng.normal(size=model.n_features)
    with CRFObjective(encoded, model, observed, c2=0.2, partial=partial) as objective:
        loss, gradient = objective.loss_gradient(w)
    with CRFObjective(encoded, model, observed, c2=0.2) as objective:
        loss0, gradient0 = objective.loss_gradient(w)
    assert loss == loss0
    np.testing.assert_array_equal(gradient, gradient0)


def test_fully_missing_sequence_contributes_nothing():
    rng = np.random.default_rng(2)
    encoded, y, attributes = random_data(rng, hide=0.0, fuzzy=0.0)
    model0, observed0, _ = build(encoded, y, attributes, all_possible_transitions=True)
    hidden = [list(seq) for seq in y]
    hidden.append([MISSING] * 3)
    lengths = np.append(encoded.lengths, 3)
    n = len(encoded.indptr) - 1
    extra_rows = np.array([1, 2, 1])
    encoded2 = Encoded(
        indptr=np.concatenate([encoded.indptr, encoded.indptr[-1] + np.cumsum(extra_rows)]),
        ids=np.concatenate([encoded.ids, np.array([0, 1, 2, 3], dtype=np.int32)]),
        values=np.concatenate([encoded.values, np.ones(4)]),
        lengths=lengths,
    )
    model, observed, partial = build(encoded2, hidden, attributes, all_possible_transitions=True)
    assert model.n_features == model0.n_features
    np.testing.assert_array_equal(observed, observed0)
    w = rng.normal(size=model.n_features)
    with CRFObjective(encoded2, model, observed, c2=0.1, partial=partial) as objective:
        loss, gradient = objective.loss_gradient(w)
    with CRFObjective(encoded, model0, observed0, c2=0.1) as objective:
        loss0, gradient0 = objective.loss_gradient(w)
    np.testing.assert_allclose(loss, loss0, rtol=1e-12)
    np.testing.assert_allclose(gradient, gradient0, rtol=1e-12)
    assert n == int(encoded.lengths.sum())


def test_features_from_known_labels_only():
    encoded = Encoded(
        indptr=np.array([0, 1, 2, 3], dtype=np.int64),
        ids=np.array([0, 1, 2], dtype=np.int32),
        values=np.ones(3),
        lengths=np.array([3], dtype=np.intp),
    )
    y = [["A", MISSING, "B"]]
    model, observed, _ = build(encoded, y, ["x", "y", "z"])
    # attribute y (the unknown token's) has no feature; no transition is known
    assert np.diff(model.state_ptr).tolist() == [1, 0, 1]
    assert len(model.transition_index) == 0
    # the sequence is partial: no observed counts
    assert not observed.any()
    model, _, _ = build(encoded, y, ["x", "y", "z"], all_possible_states=True)
    assert np.diff(model.state_ptr).tolist() == [2, 2, 2]
