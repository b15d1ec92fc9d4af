"""The weighted objective (sample_weight, class_weight): value and gradient.

The weighted objective of token weights ``c`` is, per sequence,
``sum_t c_t (-log p(y_t | y_{t-1}, x))``: the log-likelihood split into its
chain-rule factors under the model, each weighted. It is checked against brute-force enumeration of every labelling of every
prefix, central finite differences, and the unweighted objective (weights 1,
a sequence of weight 2 against the sequence twice, weight 0 against the
sequence left out).
"""

import numpy as np
import pytest
from _reference import labellings
from scipy.special import logsumexp
from test_objective import dense_features, dense_weights, random_problem

from skcrf._featurize._encoded import Encoded
from skcrf._featurize._labels import PartialLabels
from skcrf._inference import _kernels
from skcrf._inference._blocks import gather_rows
from skcrf._training._objective import CRFObjective, select_features
from skcrf._utils._packing import pack


def brute_force_weighted(X, labels, lengths, W, T, c, allowed=None):
    """The weighted objective by enumerating every labelling of every sequence.

    ``sum_t c_t (-log p(y_t | y_{t-1}, x))`` (``-log p(y_1 | x)`` at the
    first token) for a fully labelled sequence; with ``allowed`` (bool,
    n_tokens x n_labels), a sequence with more than one allowed labelling is
    partially labelled: ``c (log Z - log Z_c)``, ``c`` constant over it.
    """
    total = 0.0
    for tokens, paths, scores in labellings(X @ W, T, lengths):
        y, cw = labels[tokens], c[tokens]
        length = len(y)
        log_z = logsumexp(scores)
        if allowed is not None:
            ok = allowed[tokens][np.arange(length), paths].all(axis=1)
            if ok.sum() > 1:
                assert (cw == cw[0]).all()
                total += cw[0] * (log_z - logsumexp(scores[ok]))
                continue
        for t in range(length):
            # -log p(y_t | y_{t-1}) = log p(y_{t-1}) - log p(y_{t-1}, y_t)
            both = paths[:, t] == y[t]
            if t == 0:
                term = log_z - logsumexp(scores[both])
            else:
                before = paths[:, t - 1] == y[t - 1]
                term = logsumexp(scores[before]) - logsumexp(scores[before & both])
            total += cw[t] * term
    return total


def weighted_problem(seed, **kwargs):
    encoded, labels, classes, attributes = random_problem(seed, **kwargs)
    rng = np.random.default_rng(seed + 100)
    c = rng.uniform(0.2, 3.0, size=len(labels))
    c[rng.random(len(c)) < 0.15] = 0.0
    return encoded, labels, classes, attributes, c


@pytest.mark.parametrize("c2", [0.0, 0.7])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("seed", range(4))
def test_weighted_loss_matches_brute_force(c2, n_threads, seed, block_size):
    encoded, labels, classes, attributes, c = weighted_problem(seed)
    model, observed = select_features(
        encoded, labels, classes, attributes, all_possible_transitions=True, token_weights=c
    )
    w = np.random.default_rng(seed + 10).normal(size=model.n_features)
    with CRFObjective(
        encoded, model, observed, c2=c2, n_threads=n_threads, token_weights=c, labels=labels
    ) as objective:
        loss, _ = objective.loss_gradient(w)
    W, T = dense_weights(model, w)
    X = dense_features(encoded, len(attributes))
    expected = brute_force_weighted(X, labels, encoded.lengths, W, T, c) + c2 * (w @ w)
    assert loss == pytest.approx(expected, rel=1e-11)


def numeric_gradient(objective, w, step=1e-6):
    numeric = np.empty_like(w)
    for k in range(len(w)):
        e = np.zeros_like(w)
        e[k] = step
        numeric[k] = (objective.loss_gradient(w + e)[0] - objective.loss_gradient(w - e)[0]) / (
            2 * step
        )
    return numeric


@pytest.mark.parametrize("c2", [0.0, 1.3])
@pytest.mark.parametrize("options", [{}, {"all_possible_states": True}])
@pytest.mark.parametrize("seed", range(3))
def test_weighted_gradient_matches_finite_differences(c2, options, seed, block_size):
    encoded, labels, classes, attributes, c = weighted_problem(seed, n_sequences=8, n_labels=4)
    model, observed = select_features(
        encoded, labels, classes, attributes, token_weights=c, **options
    )
    w = np.random.default_rng(seed).normal(scale=0.5, size=model.n_features)
    with CRFObjective(
        encoded, model, observed, c2=c2, n_threads=2, token_weights=c, labels=labels
    ) as objective:
        _, gradient = objective.loss_gradient(w)
        numeric = numeric_gradient(objective, w)
    error = np.linalg.norm(gradient - numeric) / np.linalg.norm(numeric)
    assert error < 1e-6


@pytest.mark.parametrize("seed", range(4))
def test_weights_one_give_the_unweighted_objective(seed, block_size):
    encoded, labels, classes, attributes = random_problem(seed, n_sequences=9)
    ones = np.ones(len(labels))
    model, observed = select_features(encoded, labels, classes, attributes)
    model_w, observed_w = select_features(encoded, labels, classes, attributes, token_weights=ones)
    np.testing.assert_array_equal(model_w.state_labels, model.state_labels)
    np.testing.assert_array_equal(observed_w, observed)
    w = np.random.default_rng(seed).normal(size=model.n_features)
    with CRFObjective(encoded, model, observed, c2=0.5) as objective:
        loss, gradient = objective.loss_gradient(w)
    with CRFObjective(encoded, model, observed, c2=0.5, token_weights=ones) as objective:
        loss_w, gradient_w = objective.loss_gradient(w)
    assert loss_w == pytest.approx(loss, rel=1e-12)
    np.testing.assert_allclose(gradient_w, gradient, rtol=1e-12, atol=1e-12)


def duplicate(encoded, labels, sequences):
    """``encoded`` and ``labels`` with the given sequences appended once more."""
    lengths = np.asarray(encoded.lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    rows = np.concatenate(
        [np.arange(starts[-1])] + [np.arange(starts[i], starts[i + 1]) for i in sequences]
    ).astype(np.intp)
    indptr, ids, values = gather_rows(encoded.indptr, encoded.ids, encoded.values, rows)
    new = Encoded(indptr, ids, values, np.concatenate([lengths, lengths[sequences]]))
    return new, labels[rows]


@pytest.mark.parametrize("seed", range(4))
def test_sequence_weight_two_is_the_sequence_twice(seed, block_size):
    encoded, labels, classes, attributes = random_problem(seed, n_sequences=7)
    # non-negative values: with min_freq=0, a feature whose value sum is
    # negative is dropped (CRFsuite's rule), and selection counts a weighted
    # sequence once, so a sum that changes sign when a sequence is doubled
    # would choose other features
    encoded = encoded._replace(values=np.abs(encoded.values))
    twice = [1, 4]
    sample = np.ones(len(encoded.lengths))
    sample[twice] = 2.0
    c = np.repeat(sample, encoded.lengths)
    model, observed = select_features(encoded, labels, classes, attributes, token_weights=c)
    enc2, labels2 = duplicate(encoded, labels, twice)
    model2, observed2 = select_features(enc2, labels2, classes, attributes)
    np.testing.assert_array_equal(model.state_ptr, model2.state_ptr)
    np.testing.assert_array_equal(model.state_labels, model2.state_labels)
    np.testing.assert_array_equal(model.transition_index, model2.transition_index)
    np.testing.assert_allclose(observed, observed2, rtol=1e-12, atol=1e-13)
    w = np.random.default_rng(seed).normal(size=model.n_features)
    with CRFObjective(encoded, model, observed, c2=0.3, n_threads=2, token_weights=c) as obj:
        loss, gradient = obj.loss_gradient(w)
    with CRFObjective(enc2, model2, observed2, c2=0.3, n_threads=2) as obj:
        loss2, gradient2 = obj.loss_gradient(w)
    assert loss == pytest.approx(loss2, rel=1e-12)
    scale = np.abs(gradient2).max()
    np.testing.assert_allclose(gradient, gradient2, rtol=1e-12, atol=1e-12 * scale)


def test_uniform_weight_scales_the_negative_log_likelihood():
    encoded, labels, classes, attributes = random_problem(3, n_sequences=6)
    model, observed = select_features(encoded, labels, classes, attributes)
    w = np.random.default_rng(0).normal(size=model.n_features)
    with CRFObjective(encoded, model, observed) as objective:
        loss, gradient = objective.loss_gradient(w)
    c = np.full(len(labels), 0.37)
    _, observed_c = select_features(encoded, labels, classes, attributes, token_weights=c)
    with CRFObjective(encoded, model, observed_c, token_weights=c) as objective:
        loss_c, gradient_c = objective.loss_gradient(w)
    assert loss_c == pytest.approx(0.37 * loss, rel=1e-12)
    np.testing.assert_allclose(gradient_c, 0.37 * gradient, rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_weighted_partial_sequences_match_brute_force(seed):
    # a partially labelled sequence: -c_t (log Z_c growth - log Z growth)
    encoded, labels, classes, attributes, c = weighted_problem(seed, n_sequences=5)
    n_labels = len(classes)
    rng = np.random.default_rng(seed)
    lengths = np.asarray(encoded.lengths)
    n_tokens = len(labels)
    # sequence 0 (if it has tokens) partly unknown: its token 0 free, token 1 in {0, 1}
    allowed = np.zeros((n_tokens, n_labels), dtype=bool)
    allowed[np.arange(n_tokens), labels] = True
    partial_seq = int(np.flatnonzero(lengths >= 2)[0])
    start = int(lengths[:partial_seq].sum())
    c[start : start + lengths[partial_seq]] = 1.7  # one weight over a partial sequence
    allowed[start] = True
    allowed[start + 1] = [True, True] + [False] * (n_labels - 2)
    label_index = labels.copy()
    label_index[start : start + 2] = -1
    token_index = np.full(n_tokens, -1, dtype=np.int32)
    masks = []
    for r in range(start, start + lengths[partial_seq]):
        token_index[r] = len(masks)
        masks.append(allowed[r])
    complete = np.ones(len(lengths), dtype=bool)
    complete[partial_seq] = False
    partial = PartialLabels(
        np.array([partial_seq], dtype=np.intp), token_index, np.array(masks), complete
    )
    model, observed = select_features(
        encoded,
        label_index,
        classes,
        attributes,
        all_possible_states=True,
        all_possible_transitions=True,
        partial=partial,
        token_weights=c,
    )
    w = rng.normal(scale=0.5, size=model.n_features)
    with CRFObjective(
        encoded, model, observed, c2=0.1, partial=partial, token_weights=c, labels=label_index
    ) as objective:
        loss, gradient = objective.loss_gradient(w)
        numeric = numeric_gradient(objective, w)
    W, T = dense_weights(model, w)
    X = dense_features(encoded, len(attributes))
    expected = brute_force_weighted(X, labels, lengths, W, T, c, allowed=allowed)
    assert loss == pytest.approx(expected + 0.1 * (w @ w), rel=1e-11)
    assert np.linalg.norm(gradient - numeric) / np.linalg.norm(numeric) < 1e-6


@pytest.mark.parametrize("seed", range(3))
def test_row_weights_kernel_is_the_prefix_derivative(seed):
    # forward_backward with row weights v: alpha * beta summed per row is
    # sum_{s >= t} v_s (a probability sums to 1 per prefix)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 6, size=4)
    layout = pack(lengths)
    n, n_labels = int(lengths.sum()), 3
    psi = np.exp(rng.normal(size=(n, n_labels)))
    exp_trans = np.exp(rng.normal(size=(n_labels, n_labels)))
    v = rng.normal(size=n)
    alpha, beta, weighted = (np.empty((n, n_labels)) for _ in range(3))
    scale = np.empty(n)
    batch_sizes = np.asarray(layout.batch_sizes, dtype=np.intp)
    _kernels.forward_backward(psi, exp_trans, batch_sizes, alpha, scale, beta, weighted, None, v)
    # expected: per packed row, the sum of v over the row and its successors
    expected = v.copy()
    starts = np.concatenate([[0], np.cumsum(batch_sizes)])
    for t in range(len(batch_sizes) - 2, -1, -1):
        n_next = batch_sizes[t + 1]
        expected[starts[t] : starts[t] + n_next] += expected[
            starts[t + 1] : starts[t + 1] + n_next
        ]
    np.testing.assert_allclose(alpha.sum(axis=1), expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="row_weights"):
        _kernels.forward_backward(
            psi, exp_trans, batch_sizes, alpha, scale, beta, weighted, None, v[:-1]
        )
