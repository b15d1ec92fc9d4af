"""Inference kernels against brute-force enumeration of every labelling."""

import gc
import itertools

import _reference
import numpy as np
import pytest
from _reference import to_flat, viterbi
from scipy.special import logsumexp

from skcrf._inference._logspace import _forward_backward_log, forward_backward
from skcrf._utils._packing import pack

# quick, run-time dependencies only: tools/build_wheels.py runs these against each wheel
pytestmark = pytest.mark.wheel


def brute_force(emissions, transitions):
    """log Z, marginals, transition marginals and best path of one sequence."""
    length, n_labels = emissions.shape
    paths = np.array(list(itertools.product(range(n_labels), repeat=length)))
    scores = emissions[np.arange(length), paths].sum(axis=1)
    if length > 1:
        scores += transitions[paths[:, :-1], paths[:, 1:]].sum(axis=1)
    log_z = logsumexp(scores)
    prob = np.exp(scores - log_z)
    marginals = np.zeros((length, n_labels))
    pair = np.zeros((n_labels, n_labels))
    for path, p in zip(paths, prob):
        marginals[np.arange(length), path] += p
        for a, b in zip(path[:-1], path[1:]):
            pair[a, b] += p
    # itertools.product enumerates in lexicographic order, so the first
    # maximum is the lexicographically smallest best path.
    best = paths[np.argmax(scores)]
    return log_z, marginals, pair, best, scores.max()


def random_batch(rng, lengths, n_labels, scale=1.0):
    emissions = [rng.normal(scale=scale, size=(n, n_labels)) for n in lengths]
    transitions = rng.normal(scale=scale, size=(n_labels, n_labels))
    return emissions, transitions


def assert_viterbi_matches(emissions, transitions, lengths, reference):
    """Batched Viterbi against ``reference(em, transitions) -> (path, score)``."""
    layout, packed_emissions = packed(emissions, lengths)
    path, best_score = viterbi(packed_emissions, transitions, layout.batch_sizes)
    flat_path = to_flat(layout, path)
    score = np.empty(len(lengths))
    score[layout.order] = best_score
    start = 0
    for i, em in enumerate(emissions):
        expected_path, expected_score = reference(em, transitions)
        np.testing.assert_array_equal(flat_path[start : start + len(em)], expected_path)
        assert score[i] == pytest.approx(expected_score, rel=1e-12)
        start += len(em)


def packed(emissions, lengths):
    layout = pack(lengths)
    flat = np.concatenate(emissions) if emissions else np.zeros((0, 1))
    return layout, flat[layout.flat_index]


@pytest.mark.parametrize("n_labels", [2, 3, 4])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("kernel", [forward_backward, _forward_backward_log])
def test_forward_backward_matches_brute_force(n_labels, seed, kernel):
    rng = np.random.default_rng(seed)
    lengths = [3, 1, 5, 2, 4, 5]
    emissions, transitions = random_batch(rng, lengths, n_labels)
    layout, packed_emissions = packed(emissions, lengths)

    result = kernel(packed_emissions, transitions, layout.batch_sizes)

    marginals = to_flat(layout, result.marginals)
    log_z = np.empty(len(lengths))
    log_z[layout.order] = result.log_partition
    expected_pairs = np.zeros((n_labels, n_labels))
    start = 0
    for i, em in enumerate(emissions):
        bf_log_z, bf_marginals, bf_pairs, _, _ = brute_force(em, transitions)
        assert log_z[i] == pytest.approx(bf_log_z, rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(marginals[start : start + len(em)], bf_marginals, atol=1e-12)
        expected_pairs += bf_pairs
        start += len(em)
    np.testing.assert_allclose(result.transition_marginals, expected_pairs, atol=1e-12)


@pytest.mark.parametrize("n_labels", [2, 3, 4])
@pytest.mark.parametrize("seed", range(3))
def test_viterbi_matches_brute_force(n_labels, seed):
    rng = np.random.default_rng(100 + seed)
    lengths = [2, 5, 1, 4, 3, 5]
    emissions, transitions = random_batch(rng, lengths, n_labels)
    assert_viterbi_matches(emissions, transitions, lengths, lambda em, tr: brute_force(em, tr)[3:])


def test_viterbi_ties_go_to_lowest_label():
    # All scores equal: every path ties, the all-zeros path must win.
    layout = pack([3, 2])
    path, _ = viterbi(np.zeros((5, 3)), np.zeros((3, 3)), layout.batch_sizes)
    assert path.tolist() == [0] * 5


def test_empty_sequences_and_empty_batch():
    rng = np.random.default_rng(0)
    layout = pack([0, 3, 0])
    em = rng.normal(size=(3, 2))
    tr = rng.normal(size=(2, 2))
    result = forward_backward(em[layout.flat_index], tr, layout.batch_sizes)
    assert layout.order.tolist() == [1, 0, 2] and layout.batch_sizes.tolist() == [1, 1, 1]
    assert result.log_partition.shape == (1,)
    np.testing.assert_allclose(result.marginals.sum(axis=1), 1.0)

    empty = pack([])
    result = forward_backward(np.zeros((0, 2)), tr, empty.batch_sizes)
    assert result.marginals.shape == (0, 2)
    path, score = viterbi(np.zeros((0, 2)), tr, empty.batch_sizes)
    assert path.shape == (0,) and score.shape == (0,)


def test_extreme_scores_stay_finite_and_agree_with_log_domain():
    # Transition scores spanning thousands of nats underflow the scaled
    # recursion; the kernel must fall back to the log domain.
    rng = np.random.default_rng(1)
    lengths = [4, 3]
    emissions, _ = random_batch(rng, lengths, 3, scale=1e3)
    transitions = np.array([[0.0, -3000.0, 10.0], [-3000.0, 0.0, 5.0], [2000.0, -10.0, 0.0]])
    layout, packed_emissions = packed(emissions, lengths)
    result = forward_backward(packed_emissions, transitions, layout.batch_sizes)
    assert np.all(np.isfinite(result.log_partition))
    np.testing.assert_allclose(result.marginals.sum(axis=1), 1.0, atol=1e-9)
    start = 0
    log_z = np.empty(2)
    log_z[layout.order] = result.log_partition
    for i, em in enumerate(emissions):
        bf_log_z = brute_force(em, transitions)[0]
        assert log_z[i] == pytest.approx(bf_log_z, rel=1e-12)
        start += len(em)


@pytest.mark.parametrize("overwrite", [False, True])
def test_wide_emissions_use_row_maxima(overwrite):
    # Emission scores spanning ~1e4 nats overflow a mean shift.
    rng = np.random.default_rng(3)
    lengths = [4, 2, 3]
    emissions, transitions = random_batch(rng, lengths, 3, scale=1.0)
    emissions = [em * np.array([1.0, 5e3, -5e3]) for em in emissions]
    layout, packed_emissions = packed(emissions, lengths)
    original = packed_emissions.copy()
    result = forward_backward(
        packed_emissions, transitions, layout.batch_sizes, overwrite_emissions=overwrite
    )
    if not overwrite:
        np.testing.assert_array_equal(packed_emissions, original)
    marginals = to_flat(layout, result.marginals)
    log_z = np.empty(len(lengths))
    log_z[layout.order] = result.log_partition
    start = 0
    for i, em in enumerate(emissions):
        bf_log_z, bf_marginals, _, _, _ = brute_force(em, transitions)
        assert log_z[i] == pytest.approx(bf_log_z, rel=1e-12)
        np.testing.assert_allclose(marginals[start : start + len(em)], bf_marginals, atol=1e-12)
        start += len(em)


def test_long_sequence_is_finite():
    rng = np.random.default_rng(2)
    n_labels = 5
    emissions = rng.normal(scale=50.0, size=(5000, n_labels))
    transitions = rng.normal(scale=10.0, size=(n_labels, n_labels))
    layout = pack([5000])
    result = forward_backward(emissions, transitions, layout.batch_sizes)
    assert np.all(np.isfinite(result.marginals))
    np.testing.assert_allclose(result.marginals.sum(axis=1), 1.0, atol=1e-9)
    log_result = _forward_backward_log(emissions, transitions, layout.batch_sizes)
    assert result.log_partition[0] == pytest.approx(log_result.log_partition[0], rel=1e-10)
    np.testing.assert_allclose(result.marginals, log_result.marginals, atol=1e-8)


def reference_viterbi(emissions, transitions):
    """Plain dynamic programming over one sequence; ties to the lowest label."""
    delta = emissions[0].copy()
    back = []
    for em in emissions[1:]:
        candidates = delta[:, None] + transitions  # [previous, next]
        back.append(candidates.argmax(axis=0))
        delta = candidates.max(axis=0) + em
    path = [int(delta.argmax())]
    for pointers in reversed(back):
        path.append(int(pointers[path[-1]]))
    return path[::-1], delta.max()


@pytest.fixture(params=["pruned", "default"])
def pruning(request, monkeypatch):
    """Run with pruning at every step, and with the default size threshold."""
    if request.param == "pruned":
        monkeypatch.setattr(_reference, "_MIN_PRUNED_ELEMENTS", 0)


@pytest.mark.parametrize("scale", [1.0, 5.0, 50.0])
@pytest.mark.parametrize("integer", [False, True])
def test_viterbi_with_many_labels_matches_plain_dynamic_programming(scale, integer, pruning):
    # With many labels and peaked emissions most rows are reduced over a few
    # candidate labels only; integer scores make exact ties common.
    rng = np.random.default_rng(int(scale) + 7 * integer)
    n_labels = 40
    lengths = [7, 1, 12, 5, 9, 3]
    emissions, transitions = random_batch(rng, lengths, n_labels, scale=scale)
    transitions /= scale  # a narrow transition spread: pruning applies
    if integer:
        emissions = [np.round(em) for em in emissions]
        transitions = np.round(transitions * 2)
    assert_viterbi_matches(emissions, transitions, lengths, reference_viterbi)


def test_viterbi_keeps_a_label_that_wins_through_its_transition(pruning):
    # Step 0 favours label 0; label 25 trails by 0.9 * (transition spread)
    # but its transitions are the largest, so it must win every label at
    # step 1 (it is past the first candidates in label order, so only the
    # pruning bound keeps it).
    n_labels, spread = 40, 10.0
    transitions = np.zeros((n_labels, n_labels))
    transitions[25, :] = spread
    emissions = np.full((2, n_labels), -1e3)
    emissions[0, 0], emissions[0, 25] = 0.0, -0.9 * spread
    emissions[1, :] = 0.0
    emissions[1, 3] = 1.0
    layout = pack([2])
    path, score = viterbi(emissions, transitions, layout.batch_sizes)
    assert path.tolist() == [25, 3]
    assert score[0] == pytest.approx(-0.9 * spread + spread + 1.0)
    expected_path, _ = reference_viterbi(emissions, transitions)
    assert expected_path == [25, 3]


# -- the output dicts of predict_marginals (compiled) ----------------------------


@pytest.mark.parametrize(
    "labels",
    [["B", "I", "O"], [3, 1, 2], [("a", 1), None, 2.5]],
    ids=["str", "int", "mixed"],
)
@pytest.mark.parametrize("lengths", [[4, 0, 1, 7], [], [0, 0], [2]])
def test_marginal_dicts_match_python(labels, lengths):
    from skcrf._inference._output import marginal_dicts

    rng = np.random.default_rng(len(lengths))
    marginals = rng.random((sum(lengths), len(labels)))
    marginals[:, 0] = [0.0, -0.0, 1e-300, np.nan][: len(marginals)] + [0.5] * max(
        0, len(marginals) - 4
    )
    lengths = np.asarray(lengths, dtype=np.intp)
    got = marginal_dicts(marginals, lengths, labels)
    expected = _reference.marginal_dicts(marginals, lengths, labels)
    assert len(got) == len(expected)
    for seq, expected_seq in zip(got, expected):
        assert type(seq) is list and len(seq) == len(expected_seq)
        for token, expected_token in zip(seq, expected_seq):
            assert type(token) is dict
            assert list(token) == list(expected_token)  # the labels' order
            for key, value in token.items():
                assert type(value) is float
                # bitwise the same doubles (nan and -0.0 included)
                assert np.float64(value).tobytes() == np.float64(expected_token[key]).tobytes()
            assert gc.is_tracked(token) == gc.is_tracked(expected_token)


def test_marginal_dicts_without_labels():
    from skcrf._inference._output import marginal_dicts

    got = marginal_dicts(np.empty((3, 0)), np.array([2, 1], dtype=np.intp), [])
    assert got == [[{}, {}], [{}]]


@pytest.mark.parametrize(
    "shape, lengths, labels, message",
    [
        ((3, 2), [3], ["a"], "one label per column"),
        ((3, 2), [2], ["a", "b"], "sum to the number of rows"),
        ((3, 2), [4, -1], ["a", "b"], "negative"),
        ((3, 2), [3], ["a", "a"], "distinct"),
    ],
)
def test_marginal_dicts_check_their_input(shape, lengths, labels, message):
    from skcrf._inference._output import marginal_dicts

    with pytest.raises(ValueError, match=message):
        marginal_dicts(np.zeros(shape), np.asarray(lengths, dtype=np.intp), labels)


@pytest.mark.parametrize("lengths", [[], [0], [3, 0, 2], [1] * 7, [40, 1, 0, 13]])
def test_label_lists_match_numpy(lengths):
    from skcrf._inference._output import label_lists

    rng = np.random.default_rng(len(lengths))
    classes = np.array(["O", 3, ("B", "X"), None], dtype=object)
    path = rng.integers(0, len(classes), size=sum(lengths)).astype(np.intp)
    lengths = np.asarray(lengths, dtype=np.intp)
    got = label_lists(path, lengths, classes.tolist())
    ends = np.cumsum(lengths)
    expected = [classes[path[end - n : end]].tolist() for n, end in zip(lengths, ends)]
    assert got == expected
    assert all(type(seq) is list for seq in got)
    assert all(a is b for seq, want in zip(got, expected) for a, b in zip(seq, want))


@pytest.mark.parametrize(
    "path, lengths, error, message",
    [
        ([0, 1], [3], ValueError, "sum to the number of tokens"),
        ([0, 1, 0], [4, -1], ValueError, "negative"),
        ([0, 2], [2], IndexError, "out of range"),
        ([0, -1], [2], IndexError, "out of range"),
    ],
)
def test_label_lists_check_their_input(path, lengths, error, message):
    from skcrf._inference._output import label_lists

    with pytest.raises(error, match=message):
        label_lists(
            np.asarray(path, dtype=np.intp), np.asarray(lengths, dtype=np.intp), ["a", "b"]
        )


def test_marginal_dicts_filled_in_any_row_order():
    from skcrf._inference._output import MarginalDicts

    rng = np.random.default_rng(5)
    lengths = np.array([3, 0, 5, 1], dtype=np.intp)
    labels = ["x", "y"]
    marginals = rng.random((9, 2))
    builder = MarginalDicts(lengths, labels)
    order = rng.permutation(9)
    for part in (order[:4], order[4:]):  # two blocks of rows, shuffled
        builder.fill(np.ascontiguousarray(marginals[part]), part.astype(np.intp))
    assert builder.result() == _reference.marginal_dicts(marginals, lengths, labels)


def test_marginal_dicts_refuse_missing_repeated_and_unknown_rows():
    from skcrf._inference._output import MarginalDicts

    builder = MarginalDicts(np.array([2, 1], dtype=np.intp), ["a"])
    builder.fill(np.ones((1, 1)), np.array([2], dtype=np.intp))
    with pytest.raises(ValueError, match="some rows"):
        builder.result()  # rows 0 and 1 have no dict yet
    with pytest.raises(ValueError, match="twice"):
        builder.fill(np.ones((1, 1)), np.array([2], dtype=np.intp))
    with pytest.raises(IndexError):
        builder.fill(np.ones((1, 1)), np.array([3], dtype=np.intp))
    with pytest.raises(ValueError, match="one row"):
        builder.fill(np.ones((2, 1)), np.array([0], dtype=np.intp))
    builder.fill(np.zeros((2, 1)), np.array([1, 0], dtype=np.intp))
    assert builder.result() == [[{"a": 0.0}, {"a": 0.0}], [{"a": 1.0}]]


def test_logsumexp_equals_scipys():
    from skcrf._inference._logspace import logsumexp as ours

    rng = np.random.default_rng(7)
    a = rng.normal(scale=50.0, size=(5, 7, 4))
    a[0, :, 1] = -np.inf  # a column with no finite term
    a[1, 2, :] = -np.inf
    a[2, 3, 0] = np.inf
    for axis in (None, 0, 1, 2):
        expected = logsumexp(a, axis=axis)
        np.testing.assert_allclose(ours(a, axis=axis), expected, rtol=1e-13, atol=0)
    assert ours(np.full(3, -np.inf)) == -np.inf
    assert ours([1000.0, 1000.0]) == pytest.approx(1000.0 + np.log(2.0), rel=1e-15)
