"""The objective: features CRFsuite would create, value and gradient.

Checked against brute-force enumeration of every labelling (tiny problems),
central finite differences, and the numpy forward-backward oracle; with
blocks forced small so that sequences span several blocks and threads.
"""

import math

import numpy as np
import pytest
from _reference import labellings
from scipy.special import logsumexp

import skcrf._inference._blocks
import skcrf._training._objective
from skcrf._featurize._encoded import Encoded
from skcrf._featurize._labels import check_partial_training_labels
from skcrf._inference import _kernels
from skcrf._inference._blocks import (
    StateLayout,
    deal_blocks,
    gather_rows,
    score_arrays,
    state_scores,
)
from skcrf._inference._logspace import forward_backward as numpy_forward_backward
from skcrf._training._objective import (
    CRFObjective,
    FrequencyOrder,
    ObservedCounts,
    drop_zeros,
    select_features,
)
from skcrf._utils._packing import pack
from skcrf._utils._threads import split_sequences

# quick, run-time dependencies only: tools/build_wheels.py runs these against each wheel
pytestmark = pytest.mark.wheel


def random_problem(seed, n_sequences=6, n_attributes=7, n_labels=3, max_length=5, unit=False):
    """Random token features (with explicit zeros and repeated ids) and labels.

    ``unit``: every value that is not an explicit zero is 1 (string and
    ``True`` features), so that training blocks keep no values.
    """
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0 if seed % 2 else 1, max_length + 1, size=n_sequences)
    n_tokens = int(lengths.sum())
    dense = (
        np.ones((n_tokens, n_attributes)) if unit else rng.normal(size=(n_tokens, n_attributes))
    )
    dense[rng.random(dense.shape) < 0.5] = 0.0
    ids, values, indptr = [], [], [0]
    for row in dense:
        for a in np.flatnonzero(row):
            ids.append(a)
            values.append(row[a])
        if len(row) > 1 and rng.random() < 0.3:  # an explicit zero
            ids.append(int(rng.integers(n_attributes)))
            values.append(0.0)
        indptr.append(len(ids))
    encoded = Encoded(
        np.array(indptr, dtype=np.int64),
        np.array(ids, dtype=np.int32),
        np.array(values, dtype=np.float64),
        lengths.astype(np.intp),
    )
    labels = rng.integers(0, n_labels, size=n_tokens)
    classes = np.array([f"L{k}" for k in range(n_labels)], dtype=object)
    attributes = [f"a{k}" for k in range(n_attributes)]
    return encoded, labels, classes, attributes


def dense_features(encoded, n_attributes):
    X = np.zeros((len(encoded.indptr) - 1, n_attributes))
    for r in range(len(X)):
        for p in range(encoded.indptr[r], encoded.indptr[r + 1]):
            X[r, encoded.ids[p]] += encoded.values[p]
    return X


def dense_weights(model, w):
    W = np.zeros((model.n_attributes, model.n_labels))
    W[model.state_attributes(), model.state_labels] = w[: model.n_states]
    return W, model.transition_matrix(w[model.n_states :])


def brute_force_nll(X, labels, lengths, W, T):
    """-sum log p(y|x) by enumerating every labelling of every sequence."""
    emissions = X @ W
    total = 0.0
    for tokens, _, scores in labellings(emissions, T, lengths):
        y = labels[tokens]
        gold = emissions[tokens][np.arange(len(y)), y].sum() + T[y[:-1], y[1:]].sum()
        total += logsumexp(scores) - gold
    return total


@pytest.mark.parametrize("seed", range(4))
def test_drop_zeros_compacts_in_place(seed):
    encoded, labels, classes, attributes = random_problem(seed)
    rows = np.arange(len(encoded.indptr) - 1)
    expected = gather_rows(encoded.indptr, encoded.ids, encoded.values, rows, drop_zeros=True)
    arrays = encoded.indptr, encoded.ids, encoded.values
    model, observed = select_features(encoded, labels, classes, attributes)
    objective = CRFObjective(encoded, model, observed, c2=0.3)
    w = np.random.default_rng(seed).normal(size=model.n_features)
    before = objective.loss_gradient(w)
    compacted = drop_zeros(encoded)
    assert all(a is b for a, b in zip(compacted[:3], arrays))  # the same arrays, trimmed
    for got, want in zip(compacted[:3], expected):
        np.testing.assert_array_equal(got, want)
    after = CRFObjective(compacted, model, observed, c2=0.3).loss_gradient(w)
    assert after[0] == before[0]
    np.testing.assert_array_equal(after[1], before[1])


def test_drop_zeros_leaves_arrays_it_does_not_own():
    encoded, _, _, _ = random_problem(0)
    view = encoded._replace(values=encoded.values[:])  # a view: not its own memory
    assert (view.values == 0).any()
    assert drop_zeros(view) is view
    assert (view.values == 0).any()


@pytest.mark.parametrize("c2", [0.0, 0.7])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("unit", [False, True], ids=["values", "unit"])
def test_loss_matches_brute_force(c2, n_threads, seed, unit, block_size):
    encoded, labels, classes, attributes = random_problem(seed, unit=unit)
    model, observed = select_features(
        encoded, labels, classes, attributes, all_possible_transitions=True
    )
    w = np.random.default_rng(seed + 10).normal(size=model.n_features)
    with CRFObjective(encoded, model, observed, c2=c2, n_threads=n_threads) as objective:
        loss, _ = objective.loss_gradient(w)
    W, T = dense_weights(model, w)
    X = dense_features(encoded, len(attributes))
    expected = brute_force_nll(X, labels, encoded.lengths, W, T) + c2 * (w @ w)
    assert loss == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("c2", [0.0, 1.3])
@pytest.mark.parametrize("options", [{}, {"all_possible_states": True}])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("unit", [False, True], ids=["values", "unit"])
def test_gradient_matches_finite_differences(c2, options, seed, unit, block_size):
    encoded, labels, classes, attributes = random_problem(
        seed, n_sequences=8, n_labels=4, unit=unit
    )
    model, observed = select_features(encoded, labels, classes, attributes, **options)
    w = np.random.default_rng(seed).normal(scale=0.5, size=model.n_features)
    with CRFObjective(encoded, model, observed, c2=c2, n_threads=2) as objective:
        _, gradient = objective.loss_gradient(w)
        step = 1e-6
        numeric = np.empty_like(w)
        for k in range(len(w)):
            e = np.zeros_like(w)
            e[k] = step
            numeric[k] = (
                objective.loss_gradient(w + e)[0] - objective.loss_gradient(w - e)[0]
            ) / (2 * step)
    error = np.linalg.norm(gradient - numeric) / np.linalg.norm(numeric)
    assert error < 1e-6


def test_threads_and_blocks_give_the_same_value(monkeypatch):
    encoded, labels, classes, attributes = random_problem(5, n_sequences=40, max_length=9)
    model, observed = select_features(encoded, labels, classes, attributes)
    w = np.random.default_rng(0).normal(size=model.n_features)
    results = []
    for elements, n_threads in [(1 << 18, 1), (1 << 18, 2), (10, 1), (10, 2)]:
        monkeypatch.setattr(skcrf._inference._blocks, "BLOCK_ELEMENTS", elements)
        with CRFObjective(encoded, model, observed, c2=0.1, n_threads=n_threads) as objective:
            results.append(objective.loss_gradient(w))
    for loss, gradient in results[1:]:
        assert loss == pytest.approx(results[0][0], rel=1e-13)
        np.testing.assert_allclose(gradient, results[0][1], rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("n_shards", [1, 2, 3, 7])
@pytest.mark.parametrize("elements", [1, 60, 1 << 16])
def test_deal_blocks_covers_every_sequence_once_in_balanced_shards(
    n_shards, elements, monkeypatch
):
    monkeypatch.setattr(skcrf._inference._blocks, "BLOCK_ELEMENTS", elements)
    lengths = np.random.default_rng(n_shards).integers(0, 12, 50)
    lengths[:3] = [40, 0, 25]  # a sequence longer than a block; an empty one
    shards = deal_blocks(lengths, np.arange(50), 3, n_shards)
    groups = [group for shard in shards for group in shard]
    dealt = np.concatenate(groups)
    assert sorted(dealt.tolist()) == list(range(50))
    budget = min(max(1, elements // 3), -(-int(lengths.sum()) // n_shards))
    sizes = [int(lengths[group].sum()) for group in groups]
    assert all(size <= budget or len(group) == 1 for size, group in zip(sizes, groups))
    # as many shards as asked for (there are blocks enough), within one block
    assert len(shards) == n_shards
    tokens = [sum(int(lengths[group].sum()) for group in shard) for shard in shards]
    assert max(tokens) - min(tokens) <= max(sizes)
    # each shard's blocks in the cut's order: longest sequences first
    for shard in shards:
        firsts = [lengths[group[0]] for group in shard]
        assert firsts == sorted(firsts, reverse=True)


@pytest.mark.parametrize("case", ["sparse", "all_states", "partial", "weighted"])
def test_one_and_two_threads_give_the_same_bits(case):
    # one thread evaluates the two shards of a two-thread objective in turn
    # and adds their counts in the same order: the same loss and gradient
    encoded, labels, classes, attributes = random_problem(
        9, n_sequences=40, n_attributes=12, max_length=9, unit=case != "weighted"
    )
    options, partial_labels, weights = {}, None, None
    if case == "all_states":
        options = {"all_possible_states": True}
    elif case == "partial":
        ends = np.cumsum(encoded.lengths)
        y = [[f"L{k}" for k in labels[end - n : end]] for n, end in zip(encoded.lengths, ends)]
        y[2][0] = y[7][1] = "?"
        labels, classes, partial_labels = check_partial_training_labels(y, encoded.lengths, "?")
        options = {"partial": partial_labels}
    elif case == "weighted":  # weights that vary within sequences
        weights = np.random.default_rng(9).uniform(0.2, 3.0, len(labels))
        options = {"token_weights": weights}
    model, observed = select_features(encoded, labels, classes, attributes, **options)
    w = np.random.default_rng(9).normal(size=model.n_features)
    results = []
    for n_threads in (1, 2):
        with CRFObjective(
            encoded,
            model,
            observed,
            c2=0.2,
            n_threads=n_threads,
            partial=partial_labels,
            token_weights=weights,
            labels=labels if weights is not None else None,
        ) as objective:
            assert len(objective._shards) == 2
            assert (objective._pool is None) == (n_threads == 1)
            loss, gradient = objective.loss_gradient(w)
            results.append((loss, gradient.tobytes()))
    assert results[0] == results[1]


@pytest.mark.parametrize("c2", [0.0, 0.3])
def test_parameter_passes_shared_by_threads_give_the_same_bits(c2, monkeypatch):
    # the element-wise passes over the parameters (to the internal order and
    # back, the shards' sum, the observed counts and c2) cut among threads
    encoded, labels, classes, attributes = random_problem(7, n_sequences=40, max_length=9)
    model, observed = select_features(encoded, labels, classes, attributes)
    w = np.random.default_rng(1).normal(size=model.n_features)
    results = []
    for size in (1 << 30, 1):  # one part; a part per thread
        monkeypatch.setattr(skcrf._training._objective, "_MIN_PARTS_SIZE", size)
        with CRFObjective(encoded, model, observed, c2=c2, n_threads=2) as objective:
            loss, gradient = objective.loss_gradient(w)
            results.append((loss, gradient.tobytes()))
    assert results[0] == results[1]


@pytest.mark.parametrize("density", [0.0, 0.05, 0.9])
def test_observed_counts_by_their_nonzero_entries(density):
    # mostly zeros (all_possible_states): kept as (index, value) pairs, which
    # subtract to the same bits as the vector, part by part
    rng = np.random.default_rng(4)
    n = 5000
    observed = np.where(rng.random(n) < density, rng.integers(1, 9, n) * 0.5, 0.0)
    observed[rng.integers(0, n, 3)] = -0.0  # g - (-0.0) is not g when g is -0.0
    counts = ObservedCounts(observed)
    assert (counts.dense is None) == (density < 0.5)
    gradient = rng.normal(size=n)
    gradient[rng.integers(0, n, 50)] = -0.0
    got, want = gradient.copy(), gradient - observed
    for lo, hi in [(0, 1234), (1234, 1234), (1234, n)]:
        counts.subtract_from(got, lo, hi)
    assert got.tobytes() == want.tobytes()
    w = rng.normal(size=n)
    assert counts.dot(w) == pytest.approx(w @ observed, rel=1e-13, abs=1e-13)


def test_all_possible_states_keep_the_nonzero_observed_counts():
    encoded, labels, classes, attributes = random_problem(
        2, n_sequences=4, n_attributes=40, n_labels=20, unit=True
    )
    model, observed = select_features(
        encoded, labels, classes, attributes, all_possible_states=True
    )
    assert np.count_nonzero(observed) * 3 < len(observed)
    objective = CRFObjective(encoded, model, observed)
    assert objective._observed.dense is None
    assert objective._observed.values.nbytes * 2 < observed.nbytes


def test_wide_transition_spread_takes_the_log_domain_path():
    # Trial points of a line search can have transitions hundreds of nats
    # apart: the value must stay right (log-domain fallback), not NaN.
    encoded, labels, classes, attributes = random_problem(2, n_labels=3)
    model, observed = select_features(
        encoded, labels, classes, attributes, all_possible_transitions=True
    )
    w = np.random.default_rng(1).normal(size=model.n_features)
    w[model.n_states] = 400.0
    w[model.n_states + 1] = -400.0
    with CRFObjective(encoded, model, observed) as objective:
        loss, gradient = objective.loss_gradient(w)
    W, T = dense_weights(model, w)
    X = dense_features(encoded, len(attributes))
    assert loss == pytest.approx(brute_force_nll(X, labels, encoded.lengths, W, T), rel=1e-10)
    assert np.isfinite(gradient).all()


def test_gradient_is_expected_minus_observed_at_zero():
    # At w = 0 every labelling is equally likely: the expected count of a
    # transition pair is (number of adjacent token pairs) / L^2.
    encoded, labels, classes, attributes = random_problem(0)
    model, observed = select_features(
        encoded, labels, classes, attributes, all_possible_transitions=True
    )
    with CRFObjective(encoded, model, observed) as objective:
        _, gradient = objective.loss_gradient(np.zeros(model.n_features))
    n_pairs = np.maximum(encoded.lengths - 1, 0).sum()
    transition_gradient = gradient[model.n_states :] + observed[model.n_states :]
    np.testing.assert_allclose(transition_gradient, n_pairs / model.n_labels**2)


def test_feature_selection_follows_crfsuite():
    # tokens: attribute ids a0, a1, a2; a1 is stored as an explicit 0.
    encoded = Encoded(
        np.array([0, 2, 4, 5], dtype=np.int64),
        np.array([0, 1, 0, 2, 2], dtype=np.int32),
        np.array([1.0, 0.0, 2.0, -3.0, 1.0]),
        np.array([3], dtype=np.intp),
    )
    labels = np.array([0, 1, 0])
    classes = np.array(["A", "B"], dtype=object)
    attributes = ["a0", "a1", "a2"]
    model, observed = select_features(encoded, labels, classes, attributes)
    # labels 0, 1, 0: (a0, A) sums 1, (a0, B) sums 2; (a1, A) is an explicit
    # 0 -> exists with sum 0; (a2, B) sums -3 < 0 = min_freq -> dropped;
    # (a2, A) sums 1.
    assert model.state_ptr.tolist() == [0, 2, 3, 4]
    assert model.state_labels.tolist() == [0, 1, 0, 0]
    assert observed[: model.n_states].tolist() == [1.0, 2.0, 0.0, 1.0]
    # transitions A->B and B->A occur once each
    assert model.transition_index.tolist() == [1, 2]
    assert not model.weights.any()

    with_min, _ = select_features(encoded, labels, classes, attributes, min_freq=1.0)
    assert with_min.state_ptr.tolist() == [0, 2, 2, 3]
    everything, _ = select_features(
        encoded,
        labels,
        classes,
        attributes,
        all_possible_states=True,
        all_possible_transitions=True,
        min_freq=-10.0,
    )
    assert everything.n_features == 3 * 2 + 2 * 2
    # all_possible features with value sum 0 are still cut by a positive min_freq
    cut, _ = select_features(
        encoded, labels, classes, attributes, all_possible_transitions=True, min_freq=0.5
    )
    assert cut.transition_index.tolist() == [1, 2]


def test_transitions_do_not_cross_sequence_boundaries():
    encoded = Encoded(
        np.arange(5, dtype=np.int64),
        np.zeros(4, dtype=np.int32),
        np.ones(4),
        np.array([2, 0, 2], dtype=np.intp),
    )
    model, _ = select_features(
        encoded, np.array([0, 1, 1, 0]), np.array([0, 1], dtype=object), ["a"]
    )
    # pairs: (0, 1) in the first sequence, (1, 0) in the last; none across.
    assert model.transition_index.tolist() == [1, 2]


def test_split_sequences_deals_every_sequence_once():
    lengths = np.array([5, 1, 7, 3, 3, 0, 9])
    shards = split_sequences(lengths, 3)
    assert sorted(np.concatenate(shards).tolist()) == list(range(len(lengths)))
    # one shard per sequence with a token at most (the empty one joins a shard)
    assert len(split_sequences(lengths, 100)) == np.count_nonzero(lengths)
    equal = np.full(30, 4)
    assert [equal[s].sum() for s in split_sequences(equal, 2)] == [60, 60]


# -- compiled kernels against the numpy oracle ------------------------------------


@pytest.mark.parametrize("n_labels", [1, 2, 5, 46])
@pytest.mark.parametrize("seed", range(3))
def test_forward_backward_kernel_matches_numpy(n_labels, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 30, size=25)
    layout = pack(lengths)
    n = len(layout.flat_index)
    emissions = rng.normal(scale=4, size=(n, n_labels))
    transitions = rng.normal(scale=2, size=(n_labels, n_labels))
    expected = numpy_forward_backward(emissions.copy(), transitions, layout.batch_sizes)

    psi = emissions.copy()
    row_max = np.empty(n)
    _kernels.exp_shifted(psi, row_max)
    t_max = transitions.max()
    exp_trans = np.exp(transitions - t_max)
    alpha, scale = np.empty_like(psi), np.empty(n)
    beta, weighted = np.empty_like(psi), np.empty_like(psi)
    pairs = np.zeros((n_labels, n_labels))
    log_sum = _kernels.forward_backward(
        psi, exp_trans, layout.batch_sizes, alpha, scale, beta, weighted, pairs
    )
    n_sequences = np.count_nonzero(lengths)
    log_z = log_sum + row_max.sum() + t_max * (n - n_sequences)
    assert log_z == pytest.approx(expected.log_partition.sum(), rel=1e-13)
    np.testing.assert_allclose(alpha, expected.marginals, atol=1e-12)
    np.testing.assert_allclose(pairs * exp_trans, expected.transition_marginals, atol=1e-10)


@pytest.mark.parametrize("denominator", [1, 4, 1000], ids=["sparse", "mixed", "dense"])
def test_state_score_and_expected_count_kernels_match_dense_products(denominator, monkeypatch):
    # denominator 1: only attributes with every label are dense rows; 1000:
    # every attribute with a feature is.
    monkeypatch.setattr(skcrf._inference._blocks, "DENSE_DENOMINATOR", denominator)
    encoded, labels, classes, attributes = random_problem(3, n_sequences=10, n_labels=4)
    model, _ = select_features(encoded, labels, classes, attributes)
    layout = StateLayout(model.state_ptr, model.state_labels, model.n_labels)
    assert layout.n_dense > 0 if denominator > 1 else True
    X = dense_features(encoded, len(attributes))
    assert_kernels_give_dense_products(
        encoded.indptr, encoded.ids, encoded.values, X, model, layout, np.random.default_rng(0)
    )


def assert_kernels_give_dense_products(indptr, ids, values, X, model, layout, rng):
    """The state scores and expected counts of CSR rows (token features ``X``
    as a dense matrix) are ``X @ W`` and ``X.T @ marginals`` at random weights
    and marginals."""
    w = rng.normal(size=model.n_states)
    W = np.zeros((X.shape[1], model.n_labels))
    W[model.state_attributes(), model.state_labels] = w
    scores = np.full((len(X), model.n_labels), np.nan)
    arrays = score_arrays(layout, w, np.zeros((model.n_labels, model.n_labels)))
    state_scores(indptr, ids, values, arrays, scores)
    np.testing.assert_allclose(scores, X @ W, atol=1e-12)

    marginals = rng.random((len(X), model.n_labels))
    expected = np.zeros(model.n_states)
    dense_expected = np.zeros((layout.n_dense, model.n_labels))
    _kernels.expected_states(
        indptr,
        ids,
        values,
        layout.state_ptr,
        layout.state_labels,
        marginals,
        layout.dense_row,
        expected,
        dense_expected,
    )
    layout.gather(dense_expected, expected)
    np.testing.assert_allclose(
        expected, (X.T @ marginals)[model.state_attributes(), model.state_labels], atol=1e-12
    )


def test_dense_rows_go_to_frequent_attributes(monkeypatch):
    monkeypatch.setattr(skcrf._inference._blocks, "DENSE_DENOMINATOR", 4)
    # 8 labels, DENSE_DENOMINATOR 4: an attribute with features for 2 or
    # more labels (1/4) is dense
    state_ptr = np.array([0, 1, 3, 11])
    state_labels = np.array([5, 0, 7, 0, 1, 2, 3, 4, 5, 6, 7])
    layout = StateLayout(state_ptr, state_labels, 8)
    assert layout.dense_row.tolist() == [-1, 0, 1]
    w = np.arange(11, dtype=float) + 1
    dense = layout.dense_weights(w)
    assert dense[0].tolist() == [2, 0, 0, 0, 0, 0, 0, 3]
    assert dense[1].tolist() == [4, 5, 6, 7, 8, 9, 10, 11]
    out = np.zeros(11)
    layout.gather(dense, out)
    assert out.tolist() == [0] + list(range(2, 12))


@pytest.mark.parametrize(
    "state_ptr, state_labels, complete",
    [
        ([0, 3, 6], [0, 1, 2, 0, 1, 2], True),  # every label of every attribute
        ([0, 3, 5], [0, 1, 2, 0, 2], False),  # a label missing
        ([0, 1, 4], [1, 0, 1, 2], False),  # a sparse attribute first
        ([0, 3, 4], [0, 1, 2, 1], True),  # (sparse attributes after the dense ones)
        ([0, 3, 6], [0, 1, 2, 2, 0, 1], False),  # every label, not in label order
    ],
)
def test_complete_dense_rows_are_the_weights_themselves(state_ptr, state_labels, complete):
    # all_possible_states: the rows are a read-only view of the weights, not
    # a copy; the same values and expected counts as the scatter oracle
    layout = StateLayout(np.array(state_ptr), np.array(state_labels), 3)
    assert layout.complete == complete
    # no index arrays the size of the weights where the rows are the weights
    assert (layout.dense_features is None) == complete
    counts = np.zeros(len(state_labels))
    rows = layout.dense_rows_of(counts)
    assert (rows is not None and np.shares_memory(rows, counts)) == complete
    w = np.arange(len(state_labels), dtype=float) + 1.5
    want = np.zeros((layout.n_dense, 3))
    for a, row in enumerate(layout.dense_row):
        for k in range(state_ptr[a], state_ptr[a + 1]):
            if row >= 0:
                want[row, state_labels[k]] = w[k]
    dense = layout.dense_weights(w)
    assert dense.tolist() == want.tolist()
    assert np.shares_memory(dense, w) == complete
    expected_dense = np.arange(want.size, dtype=float).reshape(want.shape) + 10
    got, oracle = np.full(len(w), -1.0), np.full(len(w), -1.0)
    layout.gather(expected_dense, got)
    for a, row in enumerate(layout.dense_row):
        for k in range(state_ptr[a], state_ptr[a + 1]):
            if row >= 0:
                oracle[k] = expected_dense[row, state_labels[k]]
    assert got.tolist() == oracle.tolist()


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("partial", [False, True], ids=["labelled", "partial"])
def test_complete_rows_summed_where_they_lie_give_the_same_bits(n_threads, partial, monkeypatch):
    # all_possible_states: each shard sums the dense rows' expected counts in
    # the counts themselves (no buffer of their own, no copy back): the same
    # loss and gradient, to the bit, as through a buffer and Layout.gather
    encoded, labels, classes, attributes = random_problem(
        3, n_sequences=30, n_attributes=12, max_length=8, unit=True
    )
    partial_labels = None
    if partial:
        ends = np.cumsum(encoded.lengths)
        y = [[f"L{k}" for k in labels[end - n : end]] for n, end in zip(encoded.lengths, ends)]
        y[0][1] = "?"  # an unknown label: the first sequence is partial
        labels, classes, partial_labels = check_partial_training_labels(y, encoded.lengths, "?")
        assert partial_labels is not None
    model, observed = select_features(
        encoded, labels, classes, attributes, all_possible_states=True, partial=partial_labels
    )
    w = np.random.default_rng(3).normal(size=model.n_features)
    results = []
    for in_place in (True, False):
        if not in_place:
            monkeypatch.setattr(StateLayout, "dense_rows_of", lambda self, expected: None)
            monkeypatch.setattr(
                skcrf._training._objective,
                "_dense_buffer",
                lambda layout: np.empty((layout.n_dense, layout.n_labels)),
            )
        with CRFObjective(
            encoded, model, observed, c2=0.2, n_threads=n_threads, partial=partial_labels
        ) as objective:
            assert objective._layout.complete
            assert all((s.dense_expected is None) == in_place for s in objective._shards)
            loss, gradient = objective.loss_gradient(w)
            results.append((loss, gradient.tobytes()))
    assert results[0] == results[1]


@pytest.mark.parametrize("seed", range(3))
def test_dense_first_keeps_each_row_and_the_kernels_sums(seed, monkeypatch):
    # Block.put_dense_first: each row's entries are the same (id, value)
    # pairs, those with a dense row first, both groups in their old order;
    # the state scores and expected counts stay the dense products.
    monkeypatch.setattr(skcrf._inference._blocks, "DENSE_DENOMINATOR", 4)
    encoded, labels, classes, attributes = random_problem(
        seed, n_sequences=12, n_attributes=30, n_labels=8, max_length=7
    )
    model, _ = select_features(encoded, labels, classes, attributes)
    layout = StateLayout(model.state_ptr, model.state_labels, model.n_labels)
    assert 0 < layout.n_dense < len(attributes)
    sequences = np.arange(len(encoded.lengths))
    (block,) = skcrf._inference._blocks.make_blocks(encoded, sequences, model.n_labels)
    before = [
        list(zip(block.ids[a:b].tolist(), block.values[a:b].tolist()))
        for a, b in zip(block.indptr[:-1], block.indptr[1:])
    ]
    assert any(  # a row that needs reordering
        (layout.dense_row[[i for i, _ in row]] >= 0).tolist()
        != sorted((layout.dense_row[[i for i, _ in row]] >= 0).tolist(), reverse=True)
        for row in before
    )
    block.put_dense_first(layout.dense_row)
    for r, row in enumerate(before):
        a, b = block.indptr[r], block.indptr[r + 1]
        after = list(zip(block.ids[a:b].tolist(), block.values[a:b].tolist()))
        dense = [entry for entry in row if layout.dense_row[entry[0]] >= 0]
        assert after == dense + [entry for entry in row if layout.dense_row[entry[0]] < 0]

    X = dense_features(encoded, len(attributes))[block.rows]
    assert_kernels_give_dense_products(
        block.indptr, block.ids, block.values, X, model, layout, np.random.default_rng(seed)
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("dense_run", [True, False], ids=["dense-run", "mixed"])
def test_packed_blocks_give_the_same_sums_bit_for_bit(seed, dense_run, monkeypatch):
    # Block.pack_features: each entry names its features' start and count (or
    # its dense row); the state scores and expected counts are those of the
    # attribute ids to the bit, and the dense products. min_freq leaves some
    # attributes without features: their entries go.
    monkeypatch.setattr(skcrf._inference._blocks, "DENSE_DENOMINATOR", 4)
    encoded, labels, classes, attributes = random_problem(
        seed, n_sequences=12, n_attributes=30, n_labels=8, max_length=7
    )
    model, _ = select_features(encoded, labels, classes, attributes, min_freq=1.5)
    counts = np.diff(model.state_ptr)
    layout = StateLayout(model.state_ptr, model.state_labels, model.n_labels)
    assert 0 < layout.n_dense < len(attributes)
    sequences = np.arange(len(encoded.lengths))
    (block,) = skcrf._inference._blocks.make_blocks(encoded, sequences, model.n_labels)
    featureless = counts[block.ids] == 0
    assert featureless.any() and not featureless.all()
    if dense_run:  # each row's dense entries lead: the kernels' first loop
        block.put_dense_first(layout.dense_row)
    plain = (block.indptr.copy(), block.ids.copy(), block.values.copy())
    assert block.pack_features(layout) and block.packed
    assert len(block.ids) == len(plain[1]) - np.count_nonzero(featureless)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=model.n_states)
    arrays = score_arrays(layout, w, np.zeros((model.n_labels, model.n_labels)))
    n_rows = len(block.indptr) - 1
    scores = np.empty((2, n_rows, model.n_labels))
    state_scores(*plain, arrays, scores[0])
    skcrf._inference._blocks.block_state_scores(block, arrays, scores[1])
    np.testing.assert_array_equal(scores[1], scores[0])
    X = dense_features(encoded, len(attributes))[block.rows]
    W = np.zeros((X.shape[1], model.n_labels))
    W[model.state_attributes(), model.state_labels] = w
    np.testing.assert_allclose(scores[1], X @ W, atol=1e-12)

    marginals = rng.random((n_rows, model.n_labels))
    sums = []
    for packed in (False, True):
        out, dense_out = np.zeros(model.n_states), np.zeros((layout.n_dense, model.n_labels))
        if packed:
            skcrf._inference._blocks.expected_states(block, marginals, layout, out, dense_out)
        else:
            _kernels.expected_states(
                *plain,
                layout.state_ptr,
                layout.state_labels,
                marginals,
                layout.dense_row,
                out,
                dense_out,
            )
        layout.gather(dense_out, out)
        sums.append(out)
    np.testing.assert_array_equal(sums[1], sums[0])
    np.testing.assert_allclose(
        sums[1], (X.T @ marginals)[model.state_attributes(), model.state_labels], atol=1e-12
    )


def test_pack_entries_in_place_and_refusals():
    # attribute 0: a dense row (2); 1: no features; 2: features 3..5
    state_ptr = np.array([0, 3, 3, 6], dtype=np.int64)
    dense_row = np.array([2, -1, -1], dtype=np.int32)
    indptr = np.array([0, 3, 4, 6], dtype=np.int64)
    ids = np.array([0, 1, 2, 1, 2, 0], dtype=np.int32)
    values = np.arange(6, dtype=float) + 1
    assert _kernels.pack_entries(indptr, ids, values, state_ptr, dense_row) == 4
    assert indptr.tolist() == [0, 2, 2, 4]
    assert ids[:4].view(np.uint32).tolist() == [2, 3 << 24 | 3, 3 << 24 | 3, 2]
    assert values[:4].tolist() == [1, 3, 5, 6]
    # a sparse attribute with more features than a count holds, or a start
    # beyond 24 bits: -1, nothing changed
    for ptr in ([0, 1, 2 + _kernels.PACKED_MAX_COUNT], [0, 1 << 24, (1 << 24) + 1]):
        indptr, ids = np.array([0, 2], dtype=np.int64), np.array([0, 1], dtype=np.int32)
        rows = np.array([-1, -1], dtype=np.int32)
        assert _kernels.pack_entries(indptr, ids, None, np.array(ptr), rows) == -1
        assert indptr.tolist() == [0, 2] and ids.tolist() == [0, 1]
    with pytest.raises(IndexError):
        _kernels.pack_entries(
            np.array([0, 1], dtype=np.int64),
            np.array([3], dtype=np.int32),
            None,
            state_ptr,
            dense_row,
        )


def test_training_blocks_are_packed():
    encoded, labels, classes, attributes = random_problem(2, n_sequences=10)
    model, observed = select_features(encoded, labels, classes, attributes)
    objective = CRFObjective(encoded, model, observed, c2=0.1)
    assert all(block.packed for shard in objective._shards for block in shard.blocks)


def test_vectorized_exp_matches_libm_within_one_ulp():
    rng = np.random.default_rng(0)
    scores = np.concatenate([-rng.random(200_000) * 708, -rng.random(1000) * 1e-6, [0.0]])
    scores = np.concatenate([scores, np.zeros(-len(scores) % 7)]).reshape(-1, 7)
    scores[:, 0] = 0.0  # each row's maximum, so nothing is shifted
    psi, row_max = scores.copy(), np.empty(len(scores))
    _kernels.exp_shifted(psi, row_max)
    # libm's exp (math.exp), not numpy's: numpy's own SIMD exp differs by
    # version and CPU (numpy 1.23 with AVX-512 is 1 ulp from libm the other
    # way, 2 ulp from this kernel: found by tools/build_wheels.py)
    expected = np.frompyfunc(math.exp, 1, 1)(scores).astype(float)
    assert (row_max == 0).all()
    assert np.max(np.abs(psi - expected) / np.spacing(expected)) <= 1.0


def test_vectorized_exp_keeps_nan_and_bounds_underflow():
    scores = np.array([[0.0, -1000.0, -np.inf, np.nan, -707.0, -709.0]])
    psi, row_max = scores.copy(), np.empty(1)
    _kernels.exp_shifted(psi, row_max)
    assert psi[0, 0] == 1.0 and np.isnan(psi[0, 3])
    assert psi[0, 4] == pytest.approx(np.exp(-707.0), rel=1e-15)
    # below exp(-708) the result stays at exp(-708): no subnormals, no 0
    assert psi[0, 1] == psi[0, 2] == psi[0, 5] == pytest.approx(np.exp(-708.0), rel=1e-15)


def test_kernels_reject_inconsistent_shapes():
    with pytest.raises(ValueError, match="indptr"):
        _kernels.state_scores(
            np.zeros(3, dtype=np.int64),
            np.zeros(0, dtype=np.int32),
            np.zeros(0),
            np.zeros(2, dtype=np.int64),
            np.zeros(0, dtype=np.int32),
            np.zeros(0),
            np.full(1, -1, dtype=np.int32),
            np.zeros((0, 2)),
            np.zeros((5, 2)),
        )
    with pytest.raises(ValueError, match="dense"):
        _kernels.state_scores(
            np.zeros(6, dtype=np.int64),
            np.zeros(0, dtype=np.int32),
            np.zeros(0),
            np.zeros(2, dtype=np.int64),
            np.zeros(0, dtype=np.int32),
            np.zeros(0),
            np.full(2, -1, dtype=np.int32),
            np.zeros((0, 2)),
            np.zeros((5, 2)),
        )
    with pytest.raises(ValueError, match="inconsistent"):
        _kernels.forward_backward(
            np.zeros((3, 2)),
            np.zeros((2, 2)),
            np.array([2], dtype=np.intp),
            np.zeros((3, 2)),
            np.zeros(3),
            np.zeros((2, 2)),
            np.zeros((2, 2)),
        )


@pytest.mark.parametrize("seed", range(3))
def test_kernels_read_no_values_as_every_value_one(seed):
    encoded, labels, classes, attributes = random_problem(seed, n_sequences=10, unit=True)
    encoded = drop_zeros(encoded)
    assert (encoded.values == 1.0).all()
    model, _ = select_features(encoded, labels, classes, attributes)
    layout = StateLayout(model.state_ptr, model.state_labels, model.n_labels)
    rng = np.random.default_rng(seed)
    w = rng.normal(size=model.n_states)
    arrays = score_arrays(layout, w, np.zeros((model.n_labels, model.n_labels)))
    n_rows = len(encoded.indptr) - 1
    with_values, without = np.empty((2, n_rows, model.n_labels))
    state_scores(encoded.indptr, encoded.ids, encoded.values, arrays, with_values)
    state_scores(encoded.indptr, encoded.ids, None, arrays, without)
    np.testing.assert_array_equal(without, with_values)  # a product by 1 is exact

    marginals = rng.random((n_rows, model.n_labels))
    counts = []
    for values in (encoded.values, None):
        expected = np.zeros(model.n_states)
        dense_expected = np.zeros((layout.n_dense, model.n_labels))
        _kernels.expected_states(
            encoded.indptr,
            encoded.ids,
            values,
            layout.state_ptr,
            layout.state_labels,
            marginals,
            layout.dense_row,
            expected,
            dense_expected,
        )
        layout.gather(dense_expected, expected)
        counts.append(expected)
    np.testing.assert_array_equal(counts[1], counts[0])
    X = dense_features(encoded, len(attributes))
    np.testing.assert_allclose(
        counts[1], (X.T @ marginals)[model.state_attributes(), model.state_labels], atol=1e-12
    )


def test_kernels_reject_values_of_another_length():
    encoded, labels, classes, attributes = random_problem(0, n_sequences=5)
    model, _ = select_features(encoded, labels, classes, attributes)
    layout = StateLayout(model.state_ptr, model.state_labels, model.n_labels)
    arrays = score_arrays(layout, np.zeros(model.n_states), np.zeros((3, 3)))
    out = np.empty((len(encoded.indptr) - 1, model.n_labels))
    with pytest.raises(ValueError, match="as many entries as ids"):
        state_scores(encoded.indptr, encoded.ids, encoded.values[:-1], arrays, out)


def test_training_blocks_keep_no_values_when_every_value_is_one():
    encoded, _, _, _ = random_problem(1, n_sequences=12, unit=True)
    values = encoded.values.copy()
    values[np.flatnonzero(values)[0]] = 2.0  # one value other than 1
    with_two = encoded._replace(values=values)
    sequences = np.arange(len(encoded.lengths))
    for blocks in (
        skcrf._inference._blocks.make_blocks(encoded, sequences, 3, drop_zeros=True),
        skcrf._inference._blocks.make_blocks(with_two, sequences, 3, unit_values=True),
    ):
        assert all(block.values is not None for block in blocks)
    unit_blocks = skcrf._inference._blocks.make_blocks(
        encoded, sequences, 3, drop_zeros=True, unit_values=True
    )
    assert all(block.values is None for block in unit_blocks)


def test_frequency_order_numbers_dense_rows_first_then_by_decreasing_count(monkeypatch):
    # DENSE_DENOMINATOR 4, 4 labels: an attribute with a feature is dense
    # when it has one label; 2: when it has 2 of the 4
    monkeypatch.setattr(skcrf._inference._blocks, "DENSE_DENOMINATOR", 2)
    encoded, labels, classes, attributes = random_problem(
        4, n_sequences=30, n_attributes=12, max_length=8
    )
    model, _ = select_features(encoded, labels, classes, attributes)
    order = FrequencyOrder(encoded, model.state_ptr, model.state_labels, model.n_labels)
    counts = np.bincount(encoded.ids, minlength=len(attributes))
    dense = np.diff(model.state_ptr) * 2 >= model.n_labels
    n_dense = int(dense.sum())
    assert 0 < n_dense < len(attributes)
    assert sorted(order.rank.tolist()) == list(range(len(attributes)))
    assert (order.rank[dense] < n_dense).all()  # dense rows first
    by_rank = np.empty_like(counts)
    by_rank[order.rank] = counts
    # then most frequent first, in each group
    assert (np.diff(by_rank[:n_dense]) <= 0).all()
    assert (np.diff(by_rank[n_dense:]) <= 0).all()
    # ties keep the model's order
    for a in range(len(attributes)):
        for b in range(a + 1, len(attributes)):
            if counts[a] == counts[b] and dense[a] == dense[b]:
                assert order.rank[a] < order.rank[b]
    layout = StateLayout(order.state_ptr, order.state_labels, model.n_labels)
    assert layout.dense_first and layout.n_dense == n_dense
    assert layout.dense_row.tolist() == list(range(n_dense)) + [-1] * (len(attributes) - n_dense)
    # each internal attribute holds its model attribute's features, in order
    for a in range(len(attributes)):
        internal = order.features[
            order.state_ptr[order.rank[a]] : order.state_ptr[order.rank[a] + 1]
        ]
        np.testing.assert_array_equal(
            internal, np.arange(model.state_ptr[a], model.state_ptr[a + 1])
        )
    np.testing.assert_array_equal(order.state_labels, model.state_labels[order.features])


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("unit", [False, True], ids=["values", "unit"])
def test_frequency_order_gives_the_same_bits_as_the_model_order(n_threads, unit, monkeypatch):
    # The objective in its own attribute order sums every feature's terms in
    # the same order as in the model's: the same loss and gradient to the bit.
    encoded, labels, classes, attributes = random_problem(
        6, n_sequences=40, n_attributes=15, max_length=9, unit=unit
    )
    model, observed = select_features(encoded, labels, classes, attributes)
    # (every attribute may have every label here: the frequency order anyway)
    monkeypatch.setattr(skcrf._training._objective, "_every_label", lambda *a: False)
    w = np.random.default_rng(1).normal(size=model.n_features)
    with CRFObjective(encoded, model, observed, c2=0.3, n_threads=n_threads) as objective:
        assert not (objective._order.rank == np.arange(len(attributes))).all()
        # the kernels tell dense rows by their number (dense_row unread)
        assert objective._layout.dense_first and objective._layout.n_dense > 0
        reordered = objective.loss_gradient(w)

    def identity(self, encoded, state_ptr, state_labels, n_labels):
        no_ids = encoded._replace(ids=np.zeros(0, dtype=np.int32))  # every count 0
        original(self, no_ids, state_ptr, state_labels, n_labels)

    original = FrequencyOrder.__init__
    monkeypatch.setattr(FrequencyOrder, "__init__", identity)
    # no attribute put first for its dense row either
    monkeypatch.setattr(
        skcrf._training._objective,
        "has_dense_row",
        lambda state_ptr, n_labels: np.zeros(len(state_ptr) - 1, dtype=bool),
    )
    with CRFObjective(encoded, model, observed, c2=0.3, n_threads=n_threads) as objective:
        assert (objective._order.rank == np.arange(len(attributes))).all()
        objective._layout.dense_first = False  # the kernels read dense_row (always valid)
        in_model_order = objective.loss_gradient(w)
    assert reordered[0] == in_model_order[0]
    np.testing.assert_array_equal(reordered[1], in_model_order[1])


@pytest.mark.parametrize("n_threads", [1, 2])
def test_every_label_keeps_the_model_order_to_the_same_bits(n_threads, monkeypatch):
    # all_possible_states: the objective reads the weights and sums the
    # counts in the model's vectors (no internal copy, no index per feature):
    # the same loss and gradient, to the bit, as in the frequency order
    monkeypatch.setattr(skcrf._training._objective, "_MIN_PARTS_SIZE", 8)  # parts: threads
    encoded, labels, classes, attributes = random_problem(
        8, n_sequences=30, n_attributes=12, max_length=8, unit=True
    )
    model, observed = select_features(
        encoded, labels, classes, attributes, all_possible_states=True
    )
    w = np.random.default_rng(8).normal(size=model.n_features)
    results = []
    for identity in (True, False):
        if not identity:
            monkeypatch.setattr(skcrf._training._objective, "_every_label", lambda *a: False)
        with CRFObjective(encoded, model, observed, c2=0.1, n_threads=n_threads) as objective:
            order = objective._order
            assert order.identity == identity
            assert (order.features is None) == identity
            assert (objective._state_weights is None) == identity
            if identity:
                assert order.state_labels is model.state_labels
                assert (order.rank == np.arange(len(attributes))).all()
            else:
                assert not (order.rank == np.arange(len(attributes))).all()
            loss, gradient = objective.loss_gradient(w)
            results.append((loss, gradient.tobytes()))
    assert results[0] == results[1]


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_take_matches_numpy(n):
    rng = np.random.default_rng(n)
    index = rng.permutation(n).astype(np.int32)
    x = rng.normal(size=n)
    out = np.empty(n)
    _kernels.take(x, index, out)
    np.testing.assert_array_equal(out, x[index])


def test_take_rejects_an_index_out_of_bounds():
    x = np.arange(4.0)
    with pytest.raises(IndexError):
        _kernels.take(x, np.array([0, 4], dtype=np.int32), np.empty(2))


@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_put_matches_numpy(n):
    rng = np.random.default_rng(n)
    index = rng.permutation(n).astype(np.int32)
    x = rng.normal(size=n)
    out, expected = np.full(n, np.nan), np.full(n, np.nan)
    _kernels.put(x, index, out)
    expected[index] = x
    np.testing.assert_array_equal(out, expected)


def test_put_rejects_bad_indices_and_lengths():
    out = np.zeros(4)
    with pytest.raises(IndexError, match="index 4 is out of bounds for 4"):
        _kernels.put(np.ones(2), np.array([0, 4], dtype=np.int32), out)
    with pytest.raises(IndexError, match="index -1"):
        _kernels.put(np.ones(2), np.array([0, -1], dtype=np.int32), out)
    with pytest.raises(ValueError, match="one entry per index"):
        _kernels.put(np.ones(3), np.array([0, 1], dtype=np.int32), out)
    assert (out == 0).all()  # nothing written before the checks
