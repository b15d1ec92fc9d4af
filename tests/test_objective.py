"""The objective: features CRFsuite would create, value and gradient."""

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import logsumexp

from skcrf._objective import (
    CRFObjective,
    pack_weights,
    select_features,
    split_sequences,
    unpack_weights,
)


def random_problem(seed, n_sequences=6, n_attributes=7, n_labels=3, max_length=5):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, max_length + 1, size=n_sequences)
    n_tokens = lengths.sum()
    dense = rng.normal(size=(n_tokens, n_attributes))
    dense[rng.random(dense.shape) < 0.5] = 0.0
    X = sp.csr_matrix(dense)
    labels = rng.integers(0, n_labels, size=n_tokens)
    return X, labels, lengths, n_labels


def brute_force_nll(X, labels, lengths, W, T):
    """-sum log p(y|x) by enumerating every labelling of every sequence."""
    emissions = X.toarray() @ W
    n_labels = T.shape[0]
    total, start = 0.0, 0
    for length in lengths:
        em = emissions[start : start + length]
        y = labels[start : start + length]
        paths = np.array(list(itertools.product(range(n_labels), repeat=length)))
        scores = em[np.arange(length), paths].sum(axis=1)
        scores += T[paths[:, :-1], paths[:, 1:]].sum(axis=1)
        gold = em[np.arange(length), y].sum() + T[y[:-1], y[1:]].sum()
        total += logsumexp(scores) - gold
        start += length
    return total


@pytest.mark.parametrize("c2", [0.0, 0.7])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("seed", range(3))
def test_loss_matches_brute_force(c2, n_threads, seed):
    X, labels, lengths, n_labels = random_problem(seed)
    features = select_features(X, labels, lengths, n_labels, all_possible_transitions=True)
    objective = CRFObjective(X, lengths, n_labels, features, c2=c2, n_threads=n_threads)
    w = np.random.default_rng(seed + 10).normal(size=features.n_parameters)
    loss, _ = objective.loss_gradient(w)
    W, T = unpack_weights(w, features, X.shape[1], n_labels)
    expected = brute_force_nll(X, labels, lengths, W, T) + c2 * (w @ w)
    assert loss == pytest.approx(expected, rel=1e-12)
    objective.close()


@pytest.mark.parametrize("c2", [0.0, 1.3])
@pytest.mark.parametrize("options", [{}, {"all_possible_states": True}])
@pytest.mark.parametrize("seed", range(4))
def test_gradient_matches_finite_differences(c2, options, seed):
    X, labels, lengths, n_labels = random_problem(seed, n_sequences=8, n_labels=4)
    features = select_features(X, labels, lengths, n_labels, **options)
    objective = CRFObjective(X, lengths, n_labels, features, c2=c2, n_threads=2)
    w = np.random.default_rng(seed).normal(scale=0.5, size=features.n_parameters)
    _, gradient = objective.loss_gradient(w)
    step = 1e-6
    numeric = np.empty_like(w)
    for k in range(len(w)):
        e = np.zeros_like(w)
        e[k] = step
        numeric[k] = (objective.loss_gradient(w + e)[0] - objective.loss_gradient(w - e)[0]) / (
            2 * step
        )
    error = np.linalg.norm(gradient - numeric) / np.linalg.norm(numeric)
    assert error < 1e-6
    objective.close()


def test_gradient_is_zero_sum_of_expected_minus_observed_at_zero():
    # At w = 0 every labelling is equally likely: the expected count of a
    # transition pair is (number of adjacent token pairs) / L^2.
    X, labels, lengths, n_labels = random_problem(0)
    features = select_features(X, labels, lengths, n_labels, all_possible_transitions=True)
    objective = CRFObjective(X, lengths, n_labels, features)
    _, gradient = objective.loss_gradient(np.zeros(features.n_parameters))
    n_pairs = (lengths - 1).sum()
    transition_gradient = gradient[features.n_states :] + features.observed[features.n_states :]
    np.testing.assert_allclose(transition_gradient, n_pairs / n_labels**2)


def test_feature_selection_follows_crfsuite():
    # tokens: attribute columns a0, a1, a2; a1 is stored as an explicit 0.
    X = sp.csr_matrix(
        (np.array([1.0, 0.0, 2.0, -3.0, 1.0]), np.array([0, 1, 0, 2, 2]), np.array([0, 2, 4, 5])),
        shape=(3, 3),
    )
    labels = np.array([0, 1, 0])
    lengths = np.array([3])
    features = select_features(X, labels, lengths, 2)
    # labels 0, 1, 0: (a0, 0) sums 1, (a0, 1) sums 2; (a1, 0) is an explicit
    # 0 -> exists with sum 0; (a2, 1) sums -3 < 0 = min_freq -> dropped;
    # (a2, 0) sums 1. Flat index = attribute * n_labels + label.
    assert features.state_index.tolist() == [0, 1, 2, 4]
    assert features.observed[: features.n_states].tolist() == [1.0, 2.0, 0.0, 1.0]
    # transitions 0->1 and 1->0 occur once each
    assert features.transition_index.tolist() == [1, 2]

    with_min = select_features(X, labels, lengths, 2, min_freq=1.0)
    assert with_min.state_index.tolist() == [0, 1, 4]
    everything = select_features(
        X, labels, lengths, 2, all_possible_states=True, all_possible_transitions=True,
        min_freq=-10.0,
    )
    assert everything.n_parameters == 3 * 2 + 2 * 2
    # all_possible features with value sum 0 are still cut by a positive min_freq
    cut = select_features(X, labels, lengths, 2, all_possible_transitions=True, min_freq=0.5)
    assert cut.transition_index.tolist() == [1, 2]


def test_transitions_do_not_cross_sequence_boundaries():
    X = sp.csr_matrix(np.ones((4, 1)))
    labels = np.array([0, 1, 1, 0])
    features = select_features(X, labels, np.array([2, 0, 2]), 2)
    # pairs: (0, 1) in the first sequence, (1, 0) in the last; none across.
    assert features.transition_index.tolist() == [1, 2]


def test_pack_unpack_round_trip():
    X, labels, lengths, n_labels = random_problem(3)
    features = select_features(X, labels, lengths, n_labels)
    w = np.arange(features.n_parameters, dtype=float) + 1
    W, T = unpack_weights(w, features, X.shape[1], n_labels)
    np.testing.assert_array_equal(pack_weights(W, T, features), w)
    assert np.count_nonzero(W) + np.count_nonzero(T) == features.n_parameters


def test_split_sequences_deals_every_sequence_once():
    lengths = np.array([5, 1, 7, 3, 3, 0, 9])
    shards = split_sequences(lengths, 3)
    assert sorted(np.concatenate(shards).tolist()) == list(range(len(lengths)))
    assert len(split_sequences(lengths, 100)) == len(lengths)
