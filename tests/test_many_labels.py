"""Decoding with many labels: every method stays O(n * n_labels ** 2) per
sequence (no O(n_labels ** 3) setup per model or per call) and exact."""

import numpy as np
import pytest
from _reference import viterbi
from scipy.special import logsumexp

from skcrf import CRFTagger
from skcrf._model import CRFModel, FittedState

_viterbi = pytest.importorskip("skcrf._inference._viterbi", reason="compiled extension not built")


def dense_tagger(state_weights, transitions):
    """A fitted tagger: attribute ``a{r}`` scores row ``r`` of ``state_weights``."""
    n_attributes, n_labels = state_weights.shape
    model = CRFModel(
        classes=np.array([f"L{k}" for k in range(n_labels)], dtype=object),
        attributes=[f"a{r}" for r in range(n_attributes)],
        state_ptr=np.arange(n_attributes + 1, dtype=np.int64) * n_labels,
        state_labels=np.tile(np.arange(n_labels, dtype=np.int32), n_attributes),
        state_weights=state_weights.ravel().copy(),
        transition_index=np.arange(n_labels * n_labels, dtype=np.int64),
        transition_weights=transitions.ravel().copy(),
    )
    return CRFTagger._from_fitted_state(FittedState(params={}, model=model))


def log_marginals(emissions, transitions):
    """Plain log-domain forward-backward of one sequence."""
    n = len(emissions)
    alpha, beta = [emissions[0]], [np.zeros(emissions.shape[1])]
    for t in range(1, n):
        alpha.append(logsumexp(alpha[-1][:, None] + transitions, axis=0) + emissions[t])
    for t in range(n - 1, 0, -1):
        beta.insert(0, logsumexp(transitions + (emissions[t] + beta[0])[None, :], axis=1))
    log_z = logsumexp(alpha[-1])
    return np.array(alpha) + np.array(beta) - log_z, log_z


def top3_of_three_tokens(e, transitions):
    """The 3 best labellings of a 3-token chain (continuous scores: no ties).

    A path among the 3 best has, given its middle label, a first label among
    the 3 best for it and a last label among the 3 best for it.
    """
    left = e[0][:, None] + transitions  # [i, j]
    right = transitions + e[2][None, :]  # [j, k]
    li = np.argpartition(-left, 2, axis=0)[:3]  # (3, L): i
    rk = np.argpartition(-right, 2, axis=1)[:, :3]  # (L, 3): k
    j = np.arange(e.shape[1])
    paths, scores = [], []
    for a in range(3):
        for b in range(3):
            i, k = li[a], rk[:, b]
            paths.append(np.stack([i, j, k], axis=1))
            scores.append(left[i, j] + e[1] + right[j, k])
    paths, scores = np.concatenate(paths), np.concatenate(scores)
    best = np.argsort(-scores)[:3]
    return [paths[q].tolist() for q in best], scores[best]


def test_five_thousand_labels_decode_exactly():
    rng = np.random.default_rng(0)
    n_labels = 5000
    emissions = rng.normal(size=(3, n_labels)) * 2.0
    transitions = rng.normal(size=(n_labels, n_labels))
    tagger = dense_tagger(emissions, transitions)
    X = [[{"a0": 1.0}, {"a1": 1.0}, {"a2": 1.0}]]
    path, _ = viterbi(emissions, transitions, np.array([1, 1, 1]))
    expected = [f"L{j}" for j in path]

    assert tagger.predict_single(X[0]) == expected
    assert tagger.predict(X) == [expected]
    assert not tagger._predictor.decoder._single.has_tight_bound

    log_p, log_z = log_marginals(emissions, transitions)
    marginals = tagger.predict_marginals(X)[0]
    got = np.array([[token[f"L{j}"] for j in range(n_labels)] for token in marginals])
    np.testing.assert_allclose(got, np.exp(log_p), rtol=1e-7, atol=1e-12)

    paths, scores = top3_of_three_tokens(emissions, transitions)
    nbest = tagger.predict_nbest(X, n=3)[0]
    assert [labels for labels, _ in nbest] == [[f"L{j}" for j in p] for p in paths]
    assert nbest[0][0] == expected
    np.testing.assert_allclose([lp for _, lp in nbest], scores - log_z, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("above_cap", [False, True])
def test_single_sequence_decoder_builds_the_tight_bound_only_for_few_labels(above_cap):
    # SequenceDecoder builds the O(n_labels ** 3) bound once 8 * n_labels
    # tokens were decoded, but never above the cap; answers equal predict's
    cap = _viterbi.max_tight_labels()
    n_labels = cap + 1 if above_cap else 20
    rng = np.random.default_rng(1)
    n_attributes = 30
    weights = rng.normal(size=(n_attributes, n_labels))
    weights[np.arange(n_attributes), rng.integers(n_labels, size=n_attributes)] += 4.0
    tagger = dense_tagger(weights, rng.normal(size=(n_labels, n_labels)))
    X = [
        [{f"a{a}": 1.0} for a in rng.integers(n_attributes, size=12)]
        for _ in range(8 * n_labels // 12 + 2)
    ]
    got = [tagger.predict_single(x) for x in X]
    assert tagger._predictor.decoder._single.has_tight_bound is (not above_cap)
    assert got == tagger.predict(X)
    assert [tagger.predict_single(x) for x in X] == got
