"""n-best labellings, sequence probabilities, transition marginals and
constrained decoding (skcrf._inference._structured, skcrf._inference._nbest, skcrf._inference._constraints)
against brute-force enumeration of every labelling on tiny problems."""

import itertools

import _reference
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp

from skcrf._featurize._encoded import Encoded
from skcrf._inference import _blocks
from skcrf._inference._constraints import (
    Constraints,
    NoValidLabelling,
    scheme_transitions,
    transition_constraints,
)
from skcrf._inference._logspace import pair_marginals
from skcrf._model import CRFModel
from skcrf._utils._packing import pack

_nbest = pytest.importorskip("skcrf._inference._nbest", reason="compiled extension not built")
from skcrf._inference import _structured  # noqa: E402
from skcrf._inference._decode import Decoder  # noqa: E402

# ---------------------------------------------------------------- tiny problems


def tiny_problem(emissions, transitions, lengths):
    """A model and encoded data whose state scores are exactly ``emissions``.

    Token ``r`` (flat order) holds one attribute, ``r``, of value 1; the
    model has a state feature for every (attribute, label).
    """
    n_tokens, n_labels = emissions.shape
    classes = np.array([f"L{k}" for k in range(n_labels)], dtype=object)
    model = CRFModel(
        classes=classes,
        attributes=[f"a{r}" for r in range(n_tokens)],
        state_ptr=np.arange(n_tokens + 1, dtype=np.int64) * n_labels,
        state_labels=np.tile(np.arange(n_labels, dtype=np.int32), n_tokens),
        state_weights=emissions.ravel().copy(),
        transition_index=np.arange(n_labels * n_labels, dtype=np.int64),
        transition_weights=transitions.ravel().copy(),
    )
    encoded = Encoded(
        indptr=np.arange(n_tokens + 1, dtype=np.int64),
        ids=np.arange(n_tokens, dtype=np.int32),
        values=np.ones(n_tokens),
        lengths=np.asarray(lengths, dtype=np.intp),
    )
    return model, encoded


def random_problem(rng, max_length=6, max_labels=4, integer=False, n_sequences=None):
    n_labels = int(rng.integers(2, max_labels + 1))
    n_sequences = n_sequences or int(rng.integers(1, 4))
    lengths = rng.integers(1, max_length + 1, size=n_sequences)
    shape = (int(lengths.sum()), n_labels)
    if integer:  # ties
        emissions = rng.integers(-2, 3, size=shape).astype(float)
        transitions = rng.integers(-2, 3, size=(n_labels, n_labels)).astype(float)
    else:
        emissions = rng.normal(size=shape) * 2
        transitions = rng.normal(size=(n_labels, n_labels))
    # a zero state weight is dropped by the decoder: keep every one nonzero
    emissions[emissions == 0] = 0.5
    return emissions, transitions, lengths


def random_constraints(rng, n_labels, lengths, forbid=0.3, fix=0.3):
    """Random allowed pairs, first/last labels and partial labels."""
    allowed = rng.random((n_labels, n_labels)) >= forbid
    start = rng.random(n_labels) >= forbid / 2
    end = rng.random(n_labels) >= forbid / 2
    start[rng.integers(n_labels)] = True
    end[rng.integers(n_labels)] = True
    partial = []
    for length in lengths:
        seq = []
        for _ in range(length):
            u = rng.random()
            if u < fix / 2:
                seq.append(f"L{rng.integers(n_labels)}")
            elif u < fix:
                members = rng.random(n_labels) < 0.5
                members[rng.integers(n_labels)] = True
                seq.append({f"L{k}" for k in np.flatnonzero(members)})
            else:
                seq.append(None)
        partial.append(seq if rng.random() < 0.8 else None)
    return allowed, start, end, partial


def build_constraints(classes, lengths, allowed=None, start=None, end=None, partial=None):
    n = len(classes)
    transitions = None
    if allowed is not None or start is not None or end is not None:
        transitions = (
            np.ones((n, n), bool) if allowed is None else allowed,
            np.ones(n, bool) if start is None else start,
            np.ones(n, bool) if end is None else end,
        )
    token_index = token_masks = None
    if partial is not None:
        from skcrf._featurize._labels import check_partial_labels

        token_index, token_masks = check_partial_labels(partial, lengths, classes)
    constraints = Constraints(n, transitions, token_index, token_masks)
    return None if constraints.empty else constraints


def enumerate_labellings(emissions, transitions, allowed=None, start=None, end=None, masks=None):
    """Every allowed labelling of one sequence with its score (kernel order)."""
    length, n_labels = emissions.shape
    out = []
    for y in itertools.product(range(n_labels), repeat=length):
        if start is not None and not start[y[0]]:
            continue
        if end is not None and not end[y[-1]]:
            continue
        if masks is not None and not all(m is None or m[k] for m, k in zip(masks, y)):
            continue
        if allowed is not None and not all(allowed[a, b] for a, b in zip(y, y[1:])):
            continue
        score = emissions[0, y[0]]
        for t in range(1, length):
            score = (score + transitions[y[t - 1], y[t]]) + emissions[t, y[t]]
        out.append((score, y))
    return out


def brute_force(emissions, transitions, lengths, constraints_args=None):
    """Per sequence: the sorted labellings (score desc, reversed labels asc), log Z."""
    allowed, start, end, partial = constraints_args or (None, None, None, None)
    n_labels = emissions.shape[1]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    results = []
    for i, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
        masks = None
        if partial is not None and partial[i] is not None:
            masks = []
            for value in partial[i]:
                if value is None:
                    masks.append(None)
                else:
                    value = {value} if isinstance(value, str) else value
                    masks.append(np.array([f"L{k}" in value for k in range(n_labels)]))
        paths = enumerate_labellings(emissions[a:b], transitions, allowed, start, end, masks)
        paths.sort(key=lambda p: (-p[0], p[1][::-1]))
        log_z = logsumexp([p[0] for p in paths]) if paths else -np.inf
        results.append((paths, log_z))
    return results


# ---------------------------------------------------------------- n-best


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("constrained", [False, True])
def test_nbest_matches_brute_force(seed, constrained):
    rng = np.random.default_rng(seed)
    emissions, transitions, lengths = random_problem(rng, integer=seed % 4 == 0)
    model, encoded = tiny_problem(emissions, transitions, lengths)
    decoder = Decoder(model)
    args = random_constraints(rng, model.n_labels, lengths) if constrained else None
    truth = brute_force(emissions, transitions, lengths, args)
    if any(not paths for paths, _ in truth):
        with pytest.raises(NoValidLabelling):
            constraints = build_constraints(model.classes, lengths, *args)
            _structured.nbest(decoder, encoded, 3, constraints=constraints)
        return
    constraints = build_constraints(model.classes, lengths, *args) if args else None
    n = int(rng.integers(1, 12))
    paths, log_proba, found = _structured.nbest(decoder, encoded, n, constraints=constraints)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for i, (expected, log_z) in enumerate(truth):
        expected = expected[:n]
        assert found[i] == len(expected)
        got = [tuple(paths[q, starts[i] : starts[i + 1]].tolist()) for q in range(found[i])]
        assert got == [y for _, y in expected]
        np.testing.assert_allclose(
            log_proba[i, : found[i]], [s - log_z for s, _ in expected], rtol=1e-9, atol=1e-9
        )
        assert np.all(log_proba[i, found[i] :] == -np.inf)


def test_nbest_all_labellings_sum_to_one():
    rng = np.random.default_rng(3)
    for _ in range(10):
        emissions, transitions, lengths = random_problem(rng, max_length=4, max_labels=3)
        model, encoded = tiny_problem(emissions, transitions, lengths)
        n_all = 3 ** int(lengths.max())
        _, log_proba, found = _structured.nbest(Decoder(model), encoded, n_all)
        np.testing.assert_allclose(np.exp(log_proba).sum(axis=1), 1.0, rtol=1e-10)
        np.testing.assert_array_equal(found, model.n_labels**lengths)


def test_nbest_first_is_viterbi_and_blocks_threads(monkeypatch):
    rng = np.random.default_rng(11)
    emissions, transitions, lengths = random_problem(rng, n_sequences=60, max_labels=4)
    model, encoded = tiny_problem(emissions, transitions, lengths)
    decoder = Decoder(model)
    paths, log_proba, _ = _structured.nbest(decoder, encoded, 4)
    np.testing.assert_array_equal(paths[0], decoder.viterbi(encoded))
    monkeypatch.setattr(_blocks, "BLOCK_ELEMENTS", 16)
    monkeypatch.setattr("skcrf._inference._decode._TOKENS_PER_THREAD", 10)
    paths2, log_proba2, _ = _structured.nbest(decoder, encoded, 4, n_threads=3)
    np.testing.assert_array_equal(paths, paths2)
    np.testing.assert_allclose(log_proba, log_proba2, rtol=1e-12)


def test_empty_sequences():
    rng = np.random.default_rng(0)
    emissions, transitions, _ = random_problem(rng, n_sequences=1)
    lengths = np.array([0, len(emissions), 0])
    model, encoded = tiny_problem(emissions, transitions, lengths)
    decoder = Decoder(model)
    paths, log_proba, found = _structured.nbest(decoder, encoded, 2)
    assert found[0] == 1 and found[2] == 1 and log_proba[0, 0] == 0.0
    scores = _structured.sequence_scores(decoder, encoded, decoder.viterbi(encoded))
    assert scores[0] == 0.0 and scores[2] == 0.0
    np.testing.assert_allclose(scores[1], log_proba[1, 0])


# ---------------------------------------------------------------- the lazy k-best kernel
# _nbest.kbest_packed (lazy, Huang & Chiang's algorithm 3) against the eager
# numpy reference (tests/_reference.py) and brute force, on packed
# blocks with -inf emissions (forbidden labels) and transitions (pairs).


def random_block(
    rng, n_labels, lengths, integer=False, forbid_labels=0.0, forbid_pairs=0.0, peaked=0.0
):
    """Flat emissions, transitions and the packed layout of random sequences."""
    n_tokens = int(np.sum(lengths))
    if integer:  # many ties
        emissions = rng.integers(-2, 3, size=(n_tokens, n_labels)).astype(float)
        transitions = rng.integers(-2, 3, size=(n_labels, n_labels)).astype(float)
    else:
        emissions = rng.normal(size=(n_tokens, n_labels)) * 2
        transitions = rng.normal(size=(n_labels, n_labels))
    if peaked:  # a trained model's emissions: one label well ahead at most tokens
        emissions[np.arange(n_tokens), rng.integers(n_labels, size=n_tokens)] += peaked
    emissions[rng.random(emissions.shape) < forbid_labels] = -np.inf
    transitions[rng.random(transitions.shape) < forbid_pairs] = -np.inf
    return emissions, transitions, pack(np.asarray(lengths))


def run_kbest(kernel, emissions, transitions, layout, k):
    packed = np.ascontiguousarray(emissions[layout.flat_index])
    batch_sizes = np.asarray(layout.batch_sizes, dtype=np.intp)
    paths = np.full((k, len(packed)), -1, dtype=np.intp)
    scores = np.empty((len(layout.order), k))
    found = kernel(packed, np.ascontiguousarray(transitions), batch_sizes, k, paths, scores)
    return paths, scores, found


def kbest_lists(emissions, layout, paths, scores, found):
    """Per sequence (user order): [(score, labels)] from a kernel's output."""
    flat = np.empty_like(paths)
    flat[:, layout.flat_index] = paths
    starts = np.concatenate([[0], np.cumsum(layout.lengths)])
    out = []
    for sequence in range(len(layout.lengths)):
        column = int(np.flatnonzero(layout.order == sequence)[0])
        a, b = starts[sequence], starts[sequence + 1]
        out.append(
            [(scores[column, q], tuple(flat[q, a:b].tolist())) for q in range(found[column])]
        )
    return out


@pytest.mark.parametrize("seed", range(40))
def test_lazy_kbest_matches_brute_force_and_eager(seed):
    rng = np.random.default_rng(1000 + seed)
    n_labels = int(rng.integers(2, 5))
    lengths = rng.integers(1, 7, size=int(rng.integers(1, 5)))
    constrained = seed % 2 == 1
    emissions, transitions, layout = random_block(
        rng,
        n_labels,
        lengths,
        integer=seed % 4 < 2,
        forbid_labels=0.15 if constrained else 0.0,
        forbid_pairs=0.3 if constrained else 0.0,
    )
    k = int(rng.integers(1, 20))
    lazy = run_kbest(_nbest.kbest_packed, emissions, transitions, layout, k)
    eager = run_kbest(_reference.kbest_packed, emissions, transitions, layout, k)
    for a, b in zip(lazy, eager):
        np.testing.assert_array_equal(a, b)
    got = kbest_lists(emissions, layout, *lazy)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for sequence, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
        allowed = np.isfinite(transitions)
        expected = [
            p
            for p in enumerate_labellings(emissions[a:b], transitions, allowed)
            if np.isfinite(p[0])
        ]
        expected.sort(key=lambda p: (-p[0], p[1][::-1]))
        assert got[sequence] == expected[:k]  # scores bitwise, labels, tie order


@pytest.mark.parametrize("seed", range(12))
def test_lazy_kbest_matches_eager_on_large_blocks(seed):
    """Many labels and long sequences: the forward pass prunes (with the
    per-label bound from 8 * n_labels rows on), nodes give many derivations."""
    rng = np.random.default_rng(2000 + seed)
    n_labels = int(rng.integers(5, 48))
    lengths = rng.integers(1, 40, size=int(rng.integers(1, 40)))
    emissions, transitions, layout = random_block(
        rng,
        n_labels,
        lengths,
        integer=seed % 3 == 0,
        forbid_labels=0.1 if seed % 4 == 1 else 0.0,
        forbid_pairs=0.4 if seed % 4 >= 2 else 0.0,
        peaked=[0.0, 4.0, 10.0][seed % 3],
    )
    for k in (1, 2, 10, 37):
        lazy = run_kbest(_nbest.kbest_packed, emissions, transitions, layout, k)
        eager = run_kbest(_reference.kbest_packed, emissions, transitions, layout, k)
        for a, b in zip(lazy, eager):
            np.testing.assert_array_equal(a, b)


def test_lazy_kbest_exhausts_every_labelling():
    """k beyond the number of labellings: every one, once, in order."""
    rng = np.random.default_rng(7)
    for integer in (False, True):
        emissions, transitions, layout = random_block(
            rng, 3, [5, 3, 1, 4], integer=integer, forbid_pairs=0.2 if integer else 0.0
        )
        paths, scores, found = run_kbest(_nbest.kbest_packed, emissions, transitions, layout, 400)
        eager = run_kbest(_reference.kbest_packed, emissions, transitions, layout, 400)
        np.testing.assert_array_equal(found, eager[2])
        np.testing.assert_array_equal(scores, eager[1])
        np.testing.assert_array_equal(paths, eager[0])
        for lst in kbest_lists(emissions, layout, paths, scores, found):
            assert len(set(y for _, y in lst)) == len(lst)
        if not integer:
            np.testing.assert_array_equal(found, [3**n for n in layout.lengths[layout.order]])


def test_lazy_kbest_no_allowed_labelling():
    emissions = np.array([[0.0, -np.inf], [-np.inf, 1.0], [2.0, 3.0]])
    transitions = np.array([[0.0, -np.inf], [0.5, 0.0]])
    layout = pack(np.array([2, 1]))
    for kernel in (_nbest.kbest_packed, _reference.kbest_packed):
        paths, scores, found = run_kbest(kernel, emissions, transitions, layout, 3)
        np.testing.assert_array_equal(found, [0, 2])
        assert np.all(scores[0] == -np.inf) and np.all(scores[1, 2:] == -np.inf)


# ---------------------------------------------------------------- probabilities


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("constrained", [False, True])
def test_sequence_scores_and_marginals_match_brute_force(seed, constrained):
    rng = np.random.default_rng(100 + seed)
    emissions, transitions, lengths = random_problem(rng, max_length=5)
    model, encoded = tiny_problem(emissions, transitions, lengths)
    decoder = Decoder(model)
    args = random_constraints(rng, model.n_labels, lengths) if constrained else None
    truth = brute_force(emissions, transitions, lengths, args)
    if any(not paths for paths, _ in truth):
        return
    constraints = build_constraints(model.classes, lengths, *args) if args else None
    log_z = _structured.log_partition(decoder, encoded, constraints=constraints)
    np.testing.assert_allclose(log_z, [z for _, z in truth], rtol=1e-10)

    # every labelling: probabilities of the allowed ones sum to 1, the others -inf
    starts = np.concatenate([[0], np.cumsum(lengths)])
    n_labels = model.n_labels
    for i, (paths, z) in enumerate(truth):
        allowed = {y: s for s, y in paths}
        every = list(itertools.product(range(n_labels), repeat=int(lengths[i])))
        label_index = np.tile(np.asarray(decoder.viterbi(encoded)), 1)
        total = 0.0
        for y in every[:30]:
            label_index[starts[i] : starts[i + 1]] = y
            got = _structured.sequence_scores(
                decoder, encoded, label_index, constraints=constraints
            )[i]
            if y in allowed:
                np.testing.assert_allclose(got, allowed[y] - z, rtol=1e-9, atol=1e-9)
                total += np.exp(got)
            else:
                assert got == -np.inf
        if len(every) <= 30:
            np.testing.assert_allclose(total, 1.0, rtol=1e-9)

    # token and pair marginals
    marginals = decoder.marginals(encoded, constraints=constraints)
    pairs = _structured.transition_marginals(decoder, encoded, constraints=constraints)
    for i, (paths, z) in enumerate(truth):
        length = int(lengths[i])
        token = np.zeros((length, n_labels))
        pair = np.zeros((max(length - 1, 0), n_labels, n_labels))
        for s, y in paths:
            p = np.exp(s - z)
            token[np.arange(length), y] += p
            for t in range(length - 1):
                pair[t, y[t], y[t + 1]] += p
        a, b = starts[i], starts[i + 1]
        np.testing.assert_allclose(marginals[a:b], token, atol=1e-10)
        np.testing.assert_allclose(pairs[a : b - 1], pair, atol=1e-10)
        assert np.all(pairs[b - 1] == 0)
        # pair marginals sum to the token marginals on both sides
        np.testing.assert_allclose(pairs[a : b - 1].sum(axis=2), marginals[a : b - 1], atol=1e-10)
        np.testing.assert_allclose(pairs[a : b - 1].sum(axis=1), marginals[a + 1 : b], atol=1e-10)


def test_unseen_label_gives_minus_inf():
    rng = np.random.default_rng(5)
    emissions, transitions, lengths = random_problem(rng, n_sequences=2)
    model, encoded = tiny_problem(emissions, transitions, lengths)
    decoder = Decoder(model)
    labels = decoder.viterbi(encoded).copy()
    labels[0] = -1
    scores = _structured.sequence_scores(decoder, encoded, labels)
    assert scores[0] == -np.inf and np.isfinite(scores[1])


def test_pair_marginals_oracle_against_kernel_path():
    rng = np.random.default_rng(8)
    emissions, transitions, lengths = random_problem(rng, n_sequences=5)
    model, encoded = tiny_problem(emissions, transitions, lengths)
    layout = pack(lengths)
    expected, _ = pair_marginals(
        np.ascontiguousarray(emissions[layout.flat_index]), transitions, layout.batch_sizes
    )
    got = _structured.transition_marginals(Decoder(model), encoded)
    np.testing.assert_allclose(got[layout.flat_index], expected, atol=1e-12)


def test_wide_scores_take_the_log_domain():
    rng = np.random.default_rng(9)
    emissions, transitions, lengths = random_problem(rng, n_sequences=2, max_length=4)
    transitions = transitions * 400  # spread beyond MAX_TRANSITION_SPREAD
    model, encoded = tiny_problem(emissions, transitions, lengths)
    truth = brute_force(emissions, transitions, lengths)
    log_z = _structured.log_partition(Decoder(model), encoded)
    np.testing.assert_allclose(log_z, [z for _, z in truth], rtol=1e-10)


# ---------------------------------------------------------------- constrained Viterbi


@pytest.mark.parametrize("seed", range(16))
def test_constrained_viterbi_matches_brute_force(seed):
    rng = np.random.default_rng(200 + seed)
    emissions, transitions, lengths = random_problem(rng, integer=seed % 3 == 0)
    model, encoded = tiny_problem(emissions, transitions, lengths)
    decoder = Decoder(model)
    args = random_constraints(rng, model.n_labels, lengths)
    if seed % 2:
        args = (None, None, None, args[3])  # partial labels only: the kernel still prunes
    truth = brute_force(emissions, transitions, lengths, args)
    constraints = build_constraints(model.classes, lengths, *args)
    if constraints is None:
        return
    if any(not paths for paths, _ in truth):
        with pytest.raises(ValueError, match="No labelling"):
            decoder.viterbi(encoded, constraints=constraints)
        return
    path = decoder.viterbi(encoded, constraints=constraints)
    starts = np.concatenate([[0], np.cumsum(lengths)])
    for i, (paths, _) in enumerate(truth):
        assert tuple(path[starts[i] : starts[i + 1]].tolist()) == paths[0][1]


def test_no_valid_path_names_the_sequence():
    emissions = np.array([[1.0, 2.0], [1.0, 2.0], [3.0, 1.0], [1.0, 1.5]])
    transitions = np.array([[0.5, 0.2], [0.1, 0.3]])
    model, encoded = tiny_problem(emissions, transitions, [2, 2])
    allowed = np.array([[True, False], [False, True]])
    partial = [None, ["L0", "L1"]]
    constraints = build_constraints(model.classes, [2, 2], allowed, None, None, partial)
    decoder = Decoder(model)
    for call in (
        lambda: decoder.viterbi(encoded, constraints=constraints),
        lambda: decoder.marginals(encoded, constraints=constraints),
        lambda: _structured.nbest(decoder, encoded, 2, constraints=constraints),
        lambda: _structured.log_partition(decoder, encoded, constraints=constraints),
    ):
        with pytest.raises(ValueError, match=r"X\[1\]"):
            call()


# ---------------------------------------------------------------- schemes


def test_bio_scheme():
    allowed, start, end = scheme_transitions(["B-PER", "I-PER", "B-LOC", "I-LOC", "O"], "BIO")
    assert not allowed[4, 1] and not allowed[2, 1] and allowed[0, 1] and allowed[1, 1]
    assert allowed[1, 2] and allowed[4, 0] and not start[1] and start[0] and end.all()
    same, _, _ = scheme_transitions(["B-PER", "I-PER", "B-LOC", "I-LOC", "O"], "iob2")
    np.testing.assert_array_equal(allowed, same)


def test_iob1_scheme():
    allowed, start, end = scheme_transitions(["B-X", "I-X", "I-Y", "O"], "IOB1")
    assert allowed[1, 0] and not allowed[3, 0] and not allowed[2, 0] and allowed[3, 1]
    assert not start[0] and start[1] and end.all()


def test_iobes_and_bioul_schemes():
    labels = ["B-X", "I-X", "E-X", "S-X", "O"]
    allowed, start, end = scheme_transitions(labels, "IOBES")
    assert allowed[0, 1] and allowed[0, 2] and not allowed[0, 4] and not allowed[4, 1]
    assert allowed[2, 4] and allowed[3, 0] and not allowed[1, 3]
    np.testing.assert_array_equal(start, [True, False, False, True, True])
    np.testing.assert_array_equal(end, [False, False, True, True, True])
    bioul = scheme_transitions(["B-X", "I-X", "L-X", "U-X", "O"], "BIOUL")
    np.testing.assert_array_equal(bioul[0], allowed)


def test_bmes_scheme():
    allowed, start, end = scheme_transitions(["B", "M", "E", "S"], "BMES")
    assert allowed[0, 1] and allowed[1, 2] and not allowed[2, 1] and allowed[2, 3]
    np.testing.assert_array_equal(start, [True, False, False, True])
    np.testing.assert_array_equal(end, [False, False, True, True])


def test_scheme_errors():
    with pytest.raises(ValueError, match="Unknown tagging scheme"):
        scheme_transitions(["O"], "XYZ")
    with pytest.raises(ValueError, match="NN"):
        scheme_transitions(["O", "NN"], "BIO")


# ---------------------------------------------------------------- properties


@st.composite
def problems(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    integer = draw(st.booleans())
    emissions, transitions, lengths = random_problem(rng, max_length=6, integer=integer)
    constrained = draw(st.booleans())
    args = random_constraints(rng, transitions.shape[0], lengths, fix=0.2) if constrained else None
    return emissions, transitions, lengths, args


@settings(max_examples=40, deadline=None)
@given(problems(), st.integers(1, 8))
def test_properties(problem, n):
    emissions, transitions, lengths, args = problem
    model, encoded = tiny_problem(emissions, transitions, lengths)
    decoder = Decoder(model)
    constraints = build_constraints(model.classes, lengths, *args) if args else None
    try:
        path = decoder.viterbi(encoded, constraints=constraints)
    except ValueError:
        truth = brute_force(emissions, transitions, lengths, args)
        assert any(not paths for paths, _ in truth)
        return
    paths, log_proba, found = _structured.nbest(decoder, encoded, n, constraints=constraints)
    # the first n-best labelling is the Viterbi path
    np.testing.assert_array_equal(paths[0], path)
    # probabilities are non-increasing
    for i in range(len(lengths)):
        assert np.all(np.diff(log_proba[i, : found[i]]) <= 1e-12)
    # the Viterbi path is the most probable: above any other labelling
    viterbi_log_p = _structured.sequence_scores(decoder, encoded, path, constraints=constraints)
    np.testing.assert_allclose(viterbi_log_p, log_proba[:, 0], rtol=1e-9, atol=1e-9)
    rng = np.random.default_rng(int(lengths.sum()))
    other = rng.integers(0, model.n_labels, size=len(path))
    other_log_p = _structured.sequence_scores(decoder, encoded, other, constraints=constraints)
    assert np.all(other_log_p <= viterbi_log_p + 1e-9)
    # constrained outputs never contain a forbidden transition or label
    if args is not None:
        allowed, start, end, _ = args
        starts = np.concatenate([[0], np.cumsum(lengths)])
        for q in range(n):
            for i in range(len(lengths)):
                if q >= found[i]:
                    continue
                y = paths[q, starts[i] : starts[i + 1]]
                assert start[y[0]] and end[y[-1]]
                assert all(allowed[a, b] for a, b in zip(y[:-1], y[1:]))
        pairs = _structured.transition_marginals(decoder, encoded, constraints=constraints)
        assert np.all(pairs[:, ~allowed] == 0)


def test_allowed_pairs_in_every_form_give_the_same_matrix():
    # Tuples of plain labels take the index alone; lists, numpy strings,
    # generators and mixed forms are checked in full: the same matrix.
    classes = np.array(["B", "I", "O"], dtype=object)
    pairs = [("B", "I"), ("I", "I"), ("O", "B"), ("B", "O")]
    expected = np.zeros((3, 3), dtype=bool)
    for a, b in pairs:
        expected["BIO".index(a), "BIO".index(b)] = True
    for form in (
        pairs,
        [list(pair) for pair in pairs],
        [(np.str_(a), b) for a, b in pairs],
        (pair for pair in pairs),
        [pairs[0], list(pairs[1]), *pairs[2:]],
    ):
        allowed, start, end = transition_constraints(classes, form)
        np.testing.assert_array_equal(allowed, expected)
        assert start.all() and end.all()
    with pytest.raises(TypeError, match="is not a .from_label, to_label. pair"):
        transition_constraints(classes, [("B", "I"), ("B", "I", "O")])
    with pytest.raises(ValueError, match="names the label 'X'"):
        transition_constraints(classes, [("B", "I"), ("X", "O")])
    numbers = np.array([0, 1, 2], dtype=object)
    with pytest.raises(ValueError, match="not the same label"):
        transition_constraints(numbers, [(0, 1), (True, 2)])


def test_partial_labels_in_every_form_give_the_same_masks():
    # Labels of the model's one plain type take the index alone; numpy
    # strings, singleton sets, tuples and arrays are checked in full: the
    # same token masks.
    from skcrf._featurize._labels import check_partial_labels

    classes = np.array(["B", "I", "O"], dtype=object)
    lengths = np.array([3, 2, 1])
    partial = [["B", None, "O"], None, [None]]
    expected_index = np.array([0, -1, 1, -1, -1, -1])
    expected_masks = np.array([[True, False, False], [False, False, True]])
    for form in (
        partial,
        [["B", None, np.str_("O")], None, [None]],
        [[{"B"}, None, frozenset({"O", "X"})], None, [None]],
        [("B", None, "O"), None, (None,)],
        [np.array(["B", None, "O"], dtype=object), None, [None]],
    ):
        token_index, token_masks = check_partial_labels(form, lengths, classes)
        np.testing.assert_array_equal(token_index, expected_index)
        np.testing.assert_array_equal(token_masks, expected_masks)
    with pytest.raises(ValueError, match=r"partial_labels\[0\]\[2\]: the label 'X'"):
        check_partial_labels([["B", None, "X"], None, None], lengths, classes)
    numbers = np.array([0, 1, 2], dtype=object)
    with pytest.raises(ValueError, match=r"partial_labels\[2\]\[0\]: the label True"):
        check_partial_labels([None, [1, 2], [True]], lengths, numbers)
    token_index, _ = check_partial_labels([None, [1, 2], [0]], lengths, numbers)
    np.testing.assert_array_equal(token_index, [-1, -1, -1, 0, 1, 2])
