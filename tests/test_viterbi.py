"""Compiled Viterbi (skcrf._inference._viterbi) against the numpy oracle, plain dynamic
programming and brute-force enumeration of every labelling."""

import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from _reference import to_flat, viterbi
from hypothesis import given, settings
from hypothesis import strategies as st

from skcrf._utils._packing import pack

_viterbi = pytest.importorskip("skcrf._inference._viterbi", reason="compiled extension not built")
viterbi_packed = _viterbi.viterbi_packed
viterbi_single = _viterbi.viterbi_single


# ---------------------------------------------------------------- references


def brute_force(emissions, transitions):
    """Best path and score of one sequence by enumeration.

    Ties: Viterbi with lowest-index backpointers and final argmax picks, among
    the best paths, the one with the smallest last label, then the smallest
    label before it, and so on (lexicographic order of the reversed path).
    """
    length, n_labels = emissions.shape
    if length == 0:
        return np.zeros(0, dtype=np.intp), 0.0
    paths = np.array(list(itertools.product(range(n_labels), repeat=length)))
    scores = emissions[np.arange(length), paths].sum(axis=1)
    if length > 1:
        scores += transitions[paths[:, :-1], paths[:, 1:]].sum(axis=1)
    best = scores.max()
    winners = [tuple(p[::-1]) for p in paths[scores == best]]
    return np.array(min(winners)[::-1], dtype=np.intp), best


def plain_viterbi(emissions, transitions):
    """Unpruned dynamic programming with the same floating-point operations
    as the kernels (so paths and scores agree bitwise)."""
    length = len(emissions)
    if length == 0:
        return np.zeros(0, dtype=np.intp), 0.0
    delta = emissions[0].copy()
    back = []
    for em in emissions[1:]:
        candidates = delta[:, None] + transitions  # [previous, next]
        arg = candidates.argmax(axis=0)
        back.append(arg)
        delta = candidates[arg, np.arange(len(arg))] + em
    path = [int(delta.argmax())]
    for pointers in reversed(back):
        path.append(int(pointers[path[-1]]))
    return np.array(path[::-1], dtype=np.intp), delta[path[0]]


def decode(flat_emissions, transitions, lengths):
    """Compiled batched Viterbi on flat (user-order) emissions.

    Returns per-sequence paths and scores, checking against the numpy oracle
    on the way (the compiled kernel must equal it exactly)."""
    layout = pack(lengths)
    packed = np.ascontiguousarray(flat_emissions[layout.flat_index])
    path = np.full(len(packed), -1, dtype=np.intp)
    score = np.full(int(layout.batch_sizes[0]) if len(layout.batch_sizes) else 0, np.nan)
    viterbi_packed(packed, np.ascontiguousarray(transitions), layout.batch_sizes, path, score)
    return layout, path, score


def split(flat, lengths):
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return [flat[a:b] for a, b in zip(starts[:-1], starts[1:])]


def check(
    flat_emissions,
    transitions,
    lengths,
    references=(plain_viterbi,),
    oracle=True,
    exact_score=True,
):
    """Compiled kernel == numpy oracle (exactly) == each reference."""
    flat_emissions = np.asarray(flat_emissions, dtype=np.float64).reshape(
        sum(lengths), transitions.shape[0]
    )
    layout, path, score = decode(flat_emissions, transitions, lengths)
    if oracle:
        packed = flat_emissions[layout.flat_index]
        expected_path, expected_score = viterbi(packed, transitions, layout.batch_sizes)
        np.testing.assert_array_equal(path, expected_path)
        np.testing.assert_array_equal(score, expected_score)
    flat_path = to_flat(layout, path)
    sequence_score = {int(s): score[k] for k, s in enumerate(layout.order) if lengths[s] > 0}
    for s, (em, p) in enumerate(zip(split(flat_emissions, lengths), split(flat_path, lengths))):
        for reference in references:
            ref_path, ref_score = reference(em, transitions)
            np.testing.assert_array_equal(p, ref_path, err_msg=f"sequence {s}, {reference}")
            if len(em):
                if exact_score:
                    assert sequence_score[s] == ref_score
                else:
                    assert sequence_score[s] == pytest.approx(ref_score, rel=1e-12, abs=1e-12)
            # the single-sequence entry point agrees with the batched one
            np.testing.assert_array_equal(
                viterbi_single(np.ascontiguousarray(em), np.ascontiguousarray(transitions)), p
            )
    return layout, path, score


def peaked(rng, n_tokens, n_labels, scale=3.0, bonus=8.0):
    """Emissions like a trained model's: one clear favourite per token."""
    em = rng.normal(size=(n_tokens, n_labels)) * scale
    em[np.arange(n_tokens), rng.integers(0, n_labels, n_tokens)] += bonus
    return em


# ---------------------------------------------------------------- tiny problems


@pytest.mark.parametrize("n_labels", [1, 2, 3, 4])
@pytest.mark.parametrize("length", range(7))
def test_single_sequence_matches_brute_force(n_labels, length):
    rng = np.random.default_rng(10 * n_labels + length)
    em = rng.normal(size=(length, n_labels))
    tr = rng.normal(size=(n_labels, n_labels))
    path = viterbi_single(em, tr)
    assert path.dtype == np.intp and path.shape == (length,)
    np.testing.assert_array_equal(path, brute_force(em, tr)[0])
    if length:
        check(em, tr, [length], references=(plain_viterbi,))
        check(em, tr, [length], references=(brute_force,), exact_score=False)


@pytest.mark.parametrize("n_labels", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(4))
def test_mixed_lengths_match_brute_force(n_labels, seed):
    rng = np.random.default_rng(seed)
    lengths = list(rng.permutation([0, 1, 2, 3, 4, 5, 6, 0, 3, 6]))
    em = rng.normal(size=(sum(lengths), n_labels))
    tr = rng.normal(size=(n_labels, n_labels))
    check(em, tr, lengths, references=(brute_force,), exact_score=False)
    check(em, tr, lengths, references=(plain_viterbi,))


def test_empty_batch_and_empty_sequences():
    tr = np.zeros((3, 3))
    empty = pack([])
    path = np.zeros(0, dtype=np.intp)
    viterbi_packed(np.zeros((0, 3)), tr, empty.batch_sizes, path)
    viterbi_packed(np.zeros((0, 3)), tr, empty.batch_sizes, path, np.zeros(0))
    assert viterbi_single(np.zeros((0, 3)), tr).shape == (0,)
    assert viterbi_single(np.zeros((0, 0)), np.zeros((0, 0))).shape == (0,)
    layout, path, score = check(np.arange(6.0).reshape(2, 3), tr, [0, 2, 0])
    assert path.tolist() == [2, 2] and score.tolist() == [7.0]


def test_best_score_is_optional():
    rng = np.random.default_rng(3)
    lengths = [3, 5, 1]
    em = rng.normal(size=(9, 4))
    tr = rng.normal(size=(4, 4))
    layout = pack(lengths)
    packed = np.ascontiguousarray(em[layout.flat_index])
    path = np.empty(9, dtype=np.intp)
    viterbi_packed(packed, tr, layout.batch_sizes, path)
    np.testing.assert_array_equal(path, viterbi(packed, tr, layout.batch_sizes)[0])


# ---------------------------------------------------------------- ties


@pytest.mark.parametrize("n_labels", [1, 2, 3, 4])
@pytest.mark.parametrize("seed", range(5))
def test_integer_ties_go_to_the_lowest_label(n_labels, seed):
    # Scores in {-1, 0, 1}: most problems have several best paths, and the
    # sums are exact, so brute force gives the tie-break without rounding.
    rng = np.random.default_rng(seed)
    lengths = [6, 0, 4, 5, 1, 2, 3, 6]
    em = rng.integers(-1, 2, size=(sum(lengths), n_labels)).astype(float)
    tr = rng.integers(-1, 2, size=(n_labels, n_labels)).astype(float)
    check(em, tr, lengths, references=(brute_force, plain_viterbi))


def test_all_equal_scores_give_label_zero():
    layout, path, _ = check(np.zeros((9, 5)), np.zeros((5, 5)), [4, 3, 2])
    assert path.tolist() == [0] * 9


@pytest.mark.parametrize("seed", range(4))
def test_integer_ties_with_many_labels(seed):
    # pruning on (many labels) and frequent exact ties
    rng = np.random.default_rng(seed)
    lengths = list(rng.integers(1, 30, size=60))
    n_labels = 60
    em = np.round(peaked(rng, sum(lengths), n_labels))
    tr = rng.integers(-2, 3, size=(n_labels, n_labels)).astype(float)
    check(em, tr, lengths)
    check(em[:7], tr, [7])  # a small batch: global (untightened) pruning


# ---------------------------------------------------------------- pruning


@pytest.mark.parametrize("scale", [0.1, 1.0, 3.0, 30.0])
@pytest.mark.parametrize("seed", range(3))
def test_many_labels_match_plain_dynamic_programming(scale, seed):
    rng = np.random.default_rng(seed)
    n_labels = 60
    lengths = list(rng.integers(0, 40, size=50))
    em = peaked(rng, sum(lengths), n_labels, scale=scale, bonus=8 * scale)
    tr = rng.normal(size=(n_labels, n_labels))
    check(em, tr, lengths)
    # one sequence alone: the small-batch path (bound from the global spread)
    check(em[: lengths[0]], tr, lengths[:1])


def test_treebank_like_batch_matches_oracle():
    rng = np.random.default_rng(0)
    n_labels = 46
    lengths = list(np.clip(rng.gamma(2.5, 10.0, size=300).astype(int), 0, 120))
    em = peaked(rng, sum(lengths), n_labels)
    tr = rng.normal(size=(n_labels, n_labels))
    check(em, tr, lengths, references=())


@pytest.mark.parametrize("n_tokens", [2, 2000])
def test_keeps_a_label_that_wins_through_its_transition(n_tokens):
    # Step 0 favours label 0; label 25 trails by 0.9 * (transition spread)
    # but its transitions are the largest, so it must win every label at
    # step 1. n_tokens = 2000: the same problem repeated in a large batch
    # (per-label pruning bound).
    n_labels, spread = 40, 10.0
    tr = np.zeros((n_labels, n_labels))
    tr[25, :] = spread
    one = np.full((2, n_labels), -1e3)
    one[0, 0], one[0, 25] = 0.0, -0.9 * spread
    one[1, :] = 0.0
    one[1, 3] = 1.0
    em = np.tile(one, (n_tokens // 2, 1))
    layout, path, score = check(em, tr, [2] * (n_tokens // 2), references=(plain_viterbi,))
    assert path.reshape(2, -1)[0].tolist() == [25] * (n_tokens // 2)
    assert path.reshape(2, -1)[1].tolist() == [3] * (n_tokens // 2)
    assert np.all(score == pytest.approx(-0.9 * spread + spread + 1.0))


def test_winner_only_through_a_large_transition_in_a_long_chain():
    # A label far behind at every step but with a huge self-transition: the
    # best path stays on it.
    rng = np.random.default_rng(5)
    n_labels, length = 30, 40
    tr = rng.normal(size=(n_labels, n_labels))
    tr[17, 17] = 50.0
    em = peaked(rng, length, n_labels)
    em[:, 17] -= 20.0
    layout, path, _ = check(em, tr, [length])
    assert path.tolist() == [17] * length
    check(np.tile(em, (20, 1)), tr, [length] * 20)


# ---------------------------------------------------------------- extreme values


def test_huge_emission_bonus():
    rng = np.random.default_rng(1)
    n_labels = 20
    lengths = [6, 1, 5, 3, 6] * 30
    n_tokens = sum(lengths)
    target = rng.integers(0, n_labels, n_tokens)
    em = rng.normal(size=(n_tokens, n_labels))
    em[np.arange(n_tokens), target] = 1e300
    tr = rng.normal(size=(n_labels, n_labels))
    layout, path, score = check(em, tr, lengths)
    np.testing.assert_array_equal(to_flat(layout, path), target)
    assert np.all(np.isfinite(score))


@pytest.mark.parametrize("tight", [False, True])
def test_forbidden_labels_and_transitions(tight):
    # -1e300 marks forbidden emissions and transitions. The same problem with
    # a sane -1e4 instead must have the same answer (brute force on those).
    rng = np.random.default_rng(2)
    n_labels = 4
    lengths = [6, 3, 5, 1, 4] * (20 if tight else 1)
    n_tokens = sum(lengths)
    em = rng.normal(size=(n_tokens, n_labels))
    em[rng.random((n_tokens, n_labels)) < 0.3] = -1e300
    em[:, 0] = rng.normal(size=n_tokens)  # label 0 always allowed
    tr = rng.normal(size=(n_labels, n_labels))
    tr[rng.random((n_labels, n_labels)) < 0.3] = -1e300
    tr[:, 0] = 0.0
    layout, path, _ = check(em, tr, lengths)
    sane_em, sane_tr = np.maximum(em, -1e4), np.maximum(tr, -1e4)
    flat_path = to_flat(layout, path)
    for em_s, p in zip(split(sane_em, lengths)[:5], split(flat_path, lengths)[:5]):
        np.testing.assert_array_equal(p, brute_force(em_s, sane_tr)[0])


def test_huge_transitions():
    # |T| ~ 1e300: the transition spread is huge, nothing may be pruned
    # wrongly; the exact DP semantics are the reference.
    rng = np.random.default_rng(4)
    n_labels = 30
    lengths = list(rng.integers(1, 6, size=200))
    em = peaked(rng, sum(lengths), n_labels) * 1e290
    tr = rng.normal(size=(n_labels, n_labels))
    tr[rng.random((n_labels, n_labels)) < 0.1] = 1e300
    tr[rng.random((n_labels, n_labels)) < 0.1] = -1e300
    check(em, tr, lengths)
    check(em[: lengths[0]], tr, lengths[:1])


def test_constant_huge_transitions_do_not_break_ties():
    # All transitions 1e300 (spread 0): previous scores that differ by less
    # than the rounding of 1e300 tie after the transition; a pruning bound
    # without a margin relative to |T| would drop the lower label.
    n_labels = 20
    tr = np.full((n_labels, n_labels), 1e300)
    em = np.zeros((2, n_labels))
    em[0, 5] = 1.0  # ahead of label 0..4 by 1, nothing at the 1e300 scale
    layout, path, _ = decode(em, tr, [2])
    assert path.tolist() == plain_viterbi(em, tr)[0].tolist() == [0, 0]
    em_big = np.tile(em, (200, 1))
    layout, path, _ = decode(em_big, tr, [2] * 200)
    assert path.tolist() == [0] * 400


def test_infinite_scores_do_not_crash():
    # -inf marks forbidden labels (each token keeps a finite one); infinite
    # transitions disable pruning.
    rng = np.random.default_rng(6)
    n_labels = 25
    lengths = [5, 2, 7, 1] * 30
    em = peaked(rng, sum(lengths), n_labels)
    em[rng.random(em.shape) < 0.5] = -np.inf
    em[:, 3] = 0.0
    tr = rng.normal(size=(n_labels, n_labels))
    check(em, tr, lengths)
    tr[2, 4] = -np.inf
    layout, path, _ = decode(em, tr, lengths)
    flat_path = to_flat(layout, path)
    for em_s, p in zip(split(em, lengths), split(flat_path, lengths)):
        np.testing.assert_array_equal(p, plain_viterbi(em_s, tr)[0])


@pytest.mark.parametrize("density", [0.1, 0.5, 0.9])
@pytest.mark.parametrize("integer", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_forbidden_pairs_match_unpruned(density, integer, seed):
    # -inf transitions keep exact pruning over the allowed pairs: paths and
    # scores equal the unpruned dynamic programme, ties (integer scores)
    # included. A sequence with no allowed labelling scores -inf there too;
    # its path is unspecified (the callers raise NoValidLabelling).
    rng = np.random.default_rng(seed)
    n_labels = int(rng.integers(2, 30))
    lengths = list(rng.integers(1, 12, size=60))
    n_tokens = sum(lengths)
    if integer:
        em = rng.integers(-3, 4, size=(n_tokens, n_labels)).astype(float)
        tr = rng.integers(-2, 3, size=(n_labels, n_labels)).astype(float)
    else:
        em = peaked(rng, n_tokens, n_labels)
        tr = rng.normal(size=(n_labels, n_labels)) * 2
    tr[rng.random((n_labels, n_labels)) < density] = -np.inf
    em[rng.random(em.shape) < 0.2] = -np.inf
    layout, path, score = decode(em, tr, lengths)
    flat_path = to_flat(layout, path)
    sequence_score = {int(s): score[k] for k, s in enumerate(layout.order)}
    for s, (em_s, p) in enumerate(zip(split(em, lengths), split(flat_path, lengths))):
        ref_path, ref_score = plain_viterbi(em_s, tr)
        assert sequence_score[s] == ref_score
        if ref_score == -np.inf:
            continue
        np.testing.assert_array_equal(p, ref_path, err_msg=f"sequence {s}")
        np.testing.assert_array_equal(
            viterbi_single(np.ascontiguousarray(em_s), np.ascontiguousarray(tr)), p
        )


@pytest.mark.parametrize("seed", range(3))
def test_forbidden_pairs_per_label_pruning_edge_cases(seed):
    # Forbidden pairs prune per label against the eight best previous labels:
    # many labels (an allowed predecessor often outside those eight), a label
    # no pair may enter, a label that may be followed by nothing, BIO-like
    # constraints (I-x only after B-x or I-x), and ties (integer scores).
    rng = np.random.default_rng(seed)
    n_labels = 41
    lengths = list(rng.integers(1, 15, size=80))
    n_tokens = sum(lengths)
    em = rng.integers(-3, 4, size=(n_tokens, n_labels)).astype(float)
    tr = rng.integers(-2, 3, size=(n_labels, n_labels)).astype(float)
    for k in range(20):  # label 2k + 1 = "B-k", 2k + 2 = "I-k", label 0 = "O"
        inside = 2 * k + 2
        tr[:, inside] = -np.inf
        tr[[inside - 1, inside], inside] = rng.integers(-2, 3, size=2)
    tr[:, 7] = -np.inf  # no label may come before label 7
    tr[9, :] = -np.inf  # nothing may follow label 9
    em[rng.random(em.shape) < 0.2] = -np.inf
    layout, path, score = decode(em, tr, lengths)
    flat_path = to_flat(layout, path)
    sequence_score = {int(s): score[k] for k, s in enumerate(layout.order)}
    for s, (em_s, p) in enumerate(zip(split(em, lengths), split(flat_path, lengths))):
        ref_path, ref_score = plain_viterbi(em_s, tr)
        assert sequence_score[s] == ref_score
        if ref_score > -np.inf:
            np.testing.assert_array_equal(p, ref_path, err_msg=f"sequence {s}")


def test_forbidden_pairs_brute_force():
    rng = np.random.default_rng(11)
    for _ in range(200):
        n_labels = int(rng.integers(1, 5))
        length = int(rng.integers(1, 6))
        em = rng.integers(-2, 3, size=(length, n_labels)).astype(float)
        tr = rng.integers(-2, 3, size=(n_labels, n_labels)).astype(float)
        tr[rng.random((n_labels, n_labels)) < 0.4] = -np.inf
        layout, path, score = decode(em, tr, [length])
        ref_path, ref_score = brute_force(em, tr)
        assert score[0] == ref_score
        if np.isfinite(ref_score):
            np.testing.assert_array_equal(path, ref_path)


# ---------------------------------------------------------------- API


def test_single_equals_packed_on_the_same_sequence():
    rng = np.random.default_rng(7)
    tr = rng.normal(size=(46, 46))
    for length in [1, 2, 25, 80]:
        em = peaked(rng, length, 46)
        layout, path, _ = decode(em, tr, [length])
        np.testing.assert_array_equal(viterbi_single(em, tr), path)


def test_inputs_are_validated():
    tr = np.zeros((3, 3))
    em = np.zeros((4, 3))
    bs = pack([3, 1]).batch_sizes
    path = np.empty(4, dtype=np.intp)
    with pytest.raises(ValueError, match="transitions"):
        viterbi_packed(em, np.zeros((2, 2)), bs, path)
    with pytest.raises(ValueError, match="sum"):
        viterbi_packed(em, tr, pack([2, 1]).batch_sizes, path)
    with pytest.raises(ValueError, match="non-increasing"):
        viterbi_packed(em, tr, np.array([1, 3], dtype=np.intp), path)
    with pytest.raises(ValueError, match="non-increasing"):
        viterbi_packed(em, tr, np.array([4, 0], dtype=np.intp), path)
    with pytest.raises(ValueError, match="path_out"):
        viterbi_packed(em, tr, bs, np.empty(3, dtype=np.intp))
    with pytest.raises(ValueError, match="best_score_out"):
        viterbi_packed(em, tr, bs, path, np.empty(3))
    with pytest.raises(ValueError, match="transitions"):
        viterbi_single(em, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="0 labels"):
        viterbi_single(np.zeros((2, 0)), np.zeros((0, 0)))
    with pytest.raises(ValueError):  # not C-contiguous
        viterbi_single(np.zeros((3, 4)).T, np.zeros((3, 3)))


def test_read_only_inputs():
    rng = np.random.default_rng(8)
    em = rng.normal(size=(5, 3))
    tr = rng.normal(size=(3, 3))
    bs = pack([5]).batch_sizes
    for a in (em, tr, bs):
        a.setflags(write=False)
    path = np.empty(5, dtype=np.intp)
    viterbi_packed(em, tr, bs, path)
    np.testing.assert_array_equal(viterbi_single(em, tr), path)


def test_threads_decode_shards_concurrently():
    rng = np.random.default_rng(9)
    n_labels = 46
    shards = []
    for _ in range(8):
        lengths = list(rng.integers(0, 50, size=100))
        layout = pack(lengths)
        em = np.ascontiguousarray(peaked(rng, sum(lengths), n_labels)[layout.flat_index])
        shards.append((em, layout.batch_sizes))
    tr = rng.normal(size=(n_labels, n_labels))
    expected = [viterbi(em, tr, bs)[0] for em, bs in shards]

    def run(shard):
        em, bs = shard
        path = np.empty(len(em), dtype=np.intp)
        viterbi_packed(em, tr, bs, path)
        return path

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(run, shards * 3))
    for k, path in enumerate(results):
        np.testing.assert_array_equal(path, expected[k % len(shards)])


# ---------------------------------------------------------------- property


@st.composite
def problems(draw):
    n_labels = draw(st.integers(1, 24))
    lengths = draw(st.lists(st.integers(0, 12), min_size=0, max_size=12))
    if draw(st.booleans()):
        lengths = lengths * draw(st.integers(1, 30))  # large enough to tighten
    integer = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([0.01, 1.0, 3.0, 100.0]))
    rng = np.random.default_rng(seed)
    n_tokens = sum(lengths)
    em = peaked(rng, n_tokens, n_labels, scale=scale, bonus=draw(st.sampled_from([0.0, 8.0])))
    tr = rng.normal(size=(n_labels, n_labels)) * draw(st.sampled_from([0.0, 0.5, 2.0]))
    if integer:
        em, tr = np.round(em), np.round(tr)
    return em, tr, lengths


@settings(max_examples=150, deadline=None)
@given(problems())
def test_property_matches_oracle_and_plain_dynamic_programming(problem):
    em, tr, lengths = problem
    if not lengths or sum(lengths) == 0:
        layout = pack(lengths)
        path = np.zeros(0, dtype=np.intp)
        viterbi_packed(np.zeros((0, tr.shape[0])), tr, layout.batch_sizes, path)
        return
    check(em, tr, lengths)


# ---------------------------------------------------------------- many labels


def test_tight_bound_is_never_built_for_many_labels():
    # the per-label bound costs O(n_labels ** 3): built only when amortized
    # (8 * n_labels tokens) and never above max_tight_labels() labels
    cap = _viterbi.max_tight_labels()
    assert 46 <= cap <= 512
    assert _viterbi.uses_tight_bound(46, 8 * 46)
    assert not _viterbi.uses_tight_bound(46, 8 * 46 - 1)
    assert _viterbi.uses_tight_bound(cap, 8 * cap)
    for n_labels in (cap + 1, 2000, 10_000):
        assert not _viterbi.uses_tight_bound(n_labels, 10**12)


def test_large_batch_beyond_the_tight_bound_cap_matches_oracle():
    # a batch long enough to tighten, with more labels than the cap: the
    # spread bound alone, still exact
    rng = np.random.default_rng(11)
    n_labels = _viterbi.max_tight_labels() + 1
    lengths = [9] * (8 * n_labels // 9 + 1)
    em = peaked(rng, sum(lengths), n_labels, scale=1.0, bonus=3.0)
    tr = rng.normal(size=(n_labels, n_labels))
    check(em, tr, lengths, references=())


@pytest.mark.parametrize("n_labels", [5, 60, 300])
def test_shared_pruning_gives_the_same_paths(n_labels):
    # TransitionPruning: the transitions scanned once per model, not per
    # block; same paths and scores, tight bound or not, forbidden pairs too
    rng = np.random.default_rng(n_labels)
    tr = rng.normal(size=(n_labels, n_labels))
    for transitions in (tr, np.where(rng.random(tr.shape) < 0.2, -np.inf, tr)):
        pruning = _viterbi.TransitionPruning(transitions)
        for lengths in ([7, 3], [9] * (8 * n_labels // 9 + 1)):
            em = peaked(rng, sum(lengths), n_labels, scale=1.0, bonus=3.0)
            layout = pack(np.asarray(lengths))
            packed_em = np.ascontiguousarray(em[layout.flat_index])
            expected = [np.empty(len(em), dtype=np.intp), np.empty(len(lengths))]
            viterbi_packed(packed_em, transitions, layout.batch_sizes, *expected)
            got = [np.empty(len(em), dtype=np.intp), np.empty(len(lengths))]
            viterbi_packed(packed_em, transitions, layout.batch_sizes, *got, pruning=pruning)
            np.testing.assert_array_equal(got[0], expected[0])
            np.testing.assert_array_equal(got[1], expected[1])
    with pytest.raises(ValueError, match="other transitions"):
        viterbi_packed(packed_em, tr.copy(), layout.batch_sizes, got[0], pruning=pruning)


@pytest.mark.parametrize("forbid", [False, True])
def test_shared_pruning_builds_its_bound_once_it_pays(forbid):
    # the per-label bound is built by the batch that brings the tokens decoded
    # with this pruning to 8 per label, then kept (not one per block); with
    # 8 threads decoding at once, every path is the unshared one
    rng = np.random.default_rng(5)
    n_labels = 20
    transitions = rng.normal(size=(n_labels, n_labels))
    if forbid:
        transitions[rng.random(transitions.shape) < 0.5] = -np.inf
    pruning = _viterbi.TransitionPruning(transitions)
    batches = []
    for _ in range(30):  # about 400 tokens: the bound pays at 160
        lengths = [int(k) for k in rng.integers(1, 9, size=3)]
        em = peaked(rng, sum(lengths), n_labels, scale=1.0, bonus=3.0)
        layout = pack(np.asarray(lengths))
        batches.append((np.ascontiguousarray(em[layout.flat_index]), layout.batch_sizes))

    def decode(batch, shared):
        em, batch_sizes = batch
        out = [np.empty(len(em), dtype=np.intp), np.empty(batch_sizes[0])]
        viterbi_packed(em, transitions, batch_sizes, *out, pruning=shared)
        return out

    seen = 0
    for batch in batches:
        got, expected = decode(batch, pruning), decode(batch, None)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
        seen += len(batch[0])
        assert pruning.has_tight_bound is _viterbi.uses_tight_bound(n_labels, seen)
    assert pruning.has_tight_bound
    fresh = _viterbi.TransitionPruning(transitions)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda b: decode(b, fresh), batches * 2))
    for batch, got in zip(batches * 2, results):
        expected = decode(batch, None)
        np.testing.assert_array_equal(got[0], expected[0])
        np.testing.assert_array_equal(got[1], expected[1])
    assert fresh.has_tight_bound


# ------------------------------------------- input-conditioned transitions


def _conditioned_problem(rng, n_labels, lengths, integer, forbid):
    """Packed emissions, base transitions and each row's deltas (unique pairs)."""
    n_rows = sum(lengths)
    draw = (lambda *shape: rng.integers(-2, 3, size=shape).astype(float)) if integer else (
        lambda *shape: rng.normal(size=shape)
    )  # fmt: skip
    emissions, transitions = draw(n_rows, n_labels), draw(n_labels, n_labels)
    if forbid:
        transitions[rng.random((n_labels, n_labels)) < forbid] = -np.inf
        emissions[rng.random((n_rows, n_labels)) < forbid / 2] = -np.inf
    counts = rng.integers(0, n_labels * n_labels + 1, size=n_rows)
    entry_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    entry_pair = np.concatenate(
        [rng.permutation(n_labels * n_labels)[:c] for c in counts] + [np.zeros(0, int)]
    ).astype(np.int32)
    delta = draw(len(entry_pair))
    batch_sizes = pack(lengths).batch_sizes
    return emissions, transitions, (entry_ptr, entry_pair, delta), batch_sizes


@pytest.mark.parametrize("integer", [False, True], ids=["real", "integer ties"])
@pytest.mark.parametrize("forbid", [0.0, 0.3])
@pytest.mark.parametrize("peaked", [1, 8], ids=["flat", "peaked"])
@pytest.mark.parametrize("seed", range(12))
def test_conditioned_kernel_equals_the_numpy_reference(integer, forbid, peaked, seed):
    # peaked emissions (and large deltas) leave few previous labels in the
    # running: the pruning must keep every label that can win or tie
    from skcrf._inference._conditioned import row_transitions, viterbi_rows

    rng = np.random.default_rng(seed)
    n_labels = int(rng.integers(1, 7 if peaked == 1 else 13))
    lengths = sorted(rng.integers(1, 9, size=int(rng.integers(1, 6))), reverse=True)
    emissions, transitions, deltas, batch_sizes = _conditioned_problem(
        rng, n_labels, lengths, integer, forbid
    )
    emissions *= peaked
    deltas = (deltas[0], deltas[1], deltas[2] * peaked)
    expected_path, expected_best = viterbi_rows(
        emissions, row_transitions(transitions, deltas), batch_sizes
    )
    path = np.full(len(emissions), -1, dtype=np.intp)
    best = np.empty(len(lengths))
    before = transitions.copy()
    _viterbi.viterbi_conditioned(emissions, transitions, *deltas, batch_sizes, path, best)
    np.testing.assert_array_equal(path, expected_path)
    np.testing.assert_array_equal(best, expected_best)  # the same sums: the same bits
    np.testing.assert_array_equal(transitions, before)


@pytest.mark.parametrize("seed", range(6))
def test_conditioned_kernel_matches_brute_force(seed):
    rng = np.random.default_rng(100 + seed)
    n_labels, length = 3, 5
    emissions, transitions, deltas, batch_sizes = _conditioned_problem(
        rng, n_labels, [length], integer=True, forbid=0.0
    )
    from skcrf._inference._conditioned import row_transitions

    matrices = row_transitions(transitions, deltas)
    paths = np.array(list(itertools.product(range(n_labels), repeat=length)))
    scores = emissions[np.arange(length), paths].sum(axis=1)
    scores += matrices[np.arange(1, length), paths[:, :-1], paths[:, 1:]].sum(axis=1)
    winners = [tuple(p[::-1]) for p in paths[scores == scores.max()]]
    path, best = np.empty(length, dtype=np.intp), np.empty(1)
    _viterbi.viterbi_conditioned(emissions, transitions, *deltas, batch_sizes, path, best)
    assert tuple(path) == min(winners)[::-1]  # ties: the lowest labels, last token first
    assert best[0] == scores.max()


def test_conditioned_kernel_validates_its_inputs():
    rng = np.random.default_rng(0)
    emissions, transitions, (ptr, pair, delta), batch_sizes = _conditioned_problem(
        rng, 3, [4, 2], integer=False, forbid=0.0
    )
    path, best = np.empty(6, dtype=np.intp), np.empty(2)
    run = _viterbi.viterbi_conditioned
    bad_pair = pair.copy()
    if len(bad_pair):
        bad_pair[-1] = 9
        with pytest.raises(ValueError, match="is not a pair of labels"):
            run(emissions, transitions, ptr, bad_pair, delta, batch_sizes, path, best)
    with pytest.raises(ValueError, match="one entry per row"):
        run(emissions, transitions, ptr[:-1], pair, delta, batch_sizes, path, best)
    with pytest.raises(ValueError, match="disagree on the number of entries"):
        run(emissions, transitions, ptr, pair, delta[:-1], batch_sizes, path, best)
    with pytest.raises(ValueError, match="one entry per sequence"):
        run(emissions, transitions, ptr, pair, delta, batch_sizes, path, best[:1])
    with pytest.raises(ValueError, match="transitions must have shape"):
        run(emissions, transitions[:2, :2].copy(), ptr, pair, delta, batch_sizes, path, best)
    decreasing = ptr.copy()
    decreasing[1], decreasing[2] = decreasing[2] + 1, decreasing[2]
    with pytest.raises(ValueError, match="must not decrease"):
        run(emissions, transitions, decreasing, pair, delta, batch_sizes, path, best)
