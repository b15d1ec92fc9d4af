"""Input-conditioned transitions: transition attributes under the token key '__transition__'.

Every quantity is checked against brute-force enumeration of the labellings
of tiny sequences, the compiled training pass against the log-domain
reference and finite differences, and the estimator's paths against the
same model's enumeration.
"""

import itertools
import random
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from skcrf import CRFTagger
from skcrf._featurize._stream import encode_data
from skcrf._featurize._transitions import TransitionParts, with_transitions
from skcrf._featurize._vocabulary import Vocabulary
from skcrf._inference import _conditioned, _kernels
from skcrf._training._objective import CRFObjective, select_features

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

KEY = "__transition__"
LABELS = ["A", "B", "C"]


def _data(seed, n_sequences=8, max_length=4, p_transition=0.8):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_sequences):
        seq, lab = [], []
        for _ in range(int(rng.integers(1, max_length + 1))):
            token = {"w": f"w{rng.integers(4)}", "x": float(rng.normal())}
            if rng.random() < p_transition:
                token[KEY] = {"p": f"q{rng.integers(3)}", "v": float(rng.normal())}
            seq.append(token)
            lab.append(LABELS[int(rng.integers(len(LABELS)))])
        X.append(seq)
        y.append(lab)
    return X, y


def _encode(X, y, all_pairs=True):
    parts = TransitionParts()
    vocabulary, transitions = Vocabulary(), Vocabulary()
    encoded = encode_data(vocabulary, X, grow=True, transitions=parts)
    encoded = with_transitions(encoded, parts, transitions, grow=True)
    label_index = np.array([LABELS.index(label) for seq in y for label in seq])
    model, observed = select_features(
        encoded,
        label_index,
        np.array(LABELS, dtype=object),
        vocabulary.attributes,
        all_possible_states=True,
        all_possible_transitions=True,
        transition_attributes=transitions.attributes,
        all_possible_conditioned_transitions=all_pairs,
    )
    return encoded, model, observed


def _sequence_scores(encoded, model, i):
    """Emissions (n, L) and per-token transitions (n, L, L) of sequence i, by loops."""
    start = int(np.sum(encoded.lengths[:i]))
    n, n_labels = int(encoded.lengths[i]), model.n_labels
    emissions = np.zeros((n, n_labels))
    for t in range(n):
        r = start + t
        for p in range(encoded.indptr[r], encoded.indptr[r + 1]):
            a, v = encoded.ids[p], encoded.values[p]
            for k in range(model.state_ptr[a], model.state_ptr[a + 1]):
                emissions[t, model.state_labels[k]] += v * model.state_weights[k]
    transitions = np.repeat(model.transition_matrix()[None], n, axis=0)
    c, tr = model.conditioned, encoded.transitions
    for t in range(1, n):
        r = start + t
        for p in range(tr.indptr[r], tr.indptr[r + 1]):
            a, v = tr.ids[p], tr.values[p]
            for k in range(c.ptr[a], c.ptr[a + 1]):
                transitions[t].flat[c.pairs[k]] += v * c.weights[k]
    return emissions, transitions


def _path_score(emissions, transitions, path):
    score = sum(emissions[t, path[t]] for t in range(len(path)))
    return score + sum(transitions[t, path[t - 1], path[t]] for t in range(1, len(path)))


def _brute_loss(encoded, model, y, c2):
    total = 0.0
    for i, labels in enumerate(y):
        emissions, transitions = _sequence_scores(encoded, model, i)
        n = len(labels)
        scores = [
            _path_score(emissions, transitions, p)
            for p in itertools.product(range(len(LABELS)), repeat=n)
        ]
        gold = [LABELS.index(label) for label in labels]
        total += np.logaddexp.reduce(scores) - _path_score(emissions, transitions, gold)
    w = model.weights
    return total + c2 * (w @ w)


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("all_pairs", [False, True])
def test_objective_and_gradient_match_brute_force_and_finite_differences(n_threads, all_pairs):
    X, y = _data(0)
    encoded, model, observed = _encode(X, y, all_pairs)
    assert model.n_conditioned > 0
    rng = np.random.default_rng(1)
    w = rng.normal(size=model.n_features)
    with CRFObjective(encoded, model, observed, c2=0.1, n_threads=n_threads) as objective:
        loss, gradient = objective.loss_gradient(w)
    brute = _brute_loss(encoded, model.with_weights(w), y, 0.1)
    assert loss == pytest.approx(brute, rel=1e-10)
    eps = 1e-6
    for k in rng.choice(model.n_features, size=min(25, model.n_features), replace=False):
        step = np.zeros_like(w)
        step[k] = eps
        numeric = (
            _brute_loss(encoded, model.with_weights(w + step), y, 0.1)
            - _brute_loss(encoded, model.with_weights(w - step), y, 0.1)
        ) / (2 * eps)
        assert gradient[k] == pytest.approx(numeric, abs=1e-6)


def test_feature_selection_follows_the_pairs_seen():
    X = [[{"w": "a"}, {"w": "b", KEY: {"p": "x"}}, {"w": "c", KEY: {"p": "x", "q": 2.0}}]]
    y = [["A", "B", "A"]]
    encoded, model, observed = _encode(X, y, all_pairs=False)
    c = model.conditioned
    found = {}
    for a, name in enumerate(c.attributes):
        for k in range(c.ptr[a], c.ptr[a + 1]):
            found[(name, divmod(int(c.pairs[k]), 3))] = observed[-model.n_conditioned + k]
    # p:x seen at token 1 (A -> B) and token 2 (B -> A); q (value 2) at token 2
    assert found == {("p:x", (0, 1)): 1.0, ("p:x", (1, 0)): 1.0, ("q", (1, 0)): 2.0}


def test_first_token_transition_attributes_are_ignored():
    X = [[{"w": "a", KEY: {"p": "only_first"}}, {"w": "b"}]]
    parts = TransitionParts()
    encoded = encode_data(Vocabulary(), X, grow=True, transitions=parts)
    transitions = Vocabulary()
    encoded = with_transitions(encoded, parts, transitions, grow=True)
    assert encoded.transitions.indptr[-1] == 0


def _fit_random(seed, **params):
    X, y = _data(seed, n_sequences=30, max_length=5)
    tagger = CRFTagger(c2=0.05, max_iterations=60, **params).fit(X, y)
    return tagger, X, y


def _tagger_brute(tagger, xseq):
    """All labellings of one sequence with their log-probabilities, by enumeration."""
    parts = TransitionParts()
    encoded = encode_data(tagger._predictor.vocabulary, [xseq], grow=False, transitions=parts)
    encoded = with_transitions(encoded, parts, tagger._predictor.transition_vocabulary, grow=False)
    emissions, transitions = _sequence_scores(encoded, tagger._model, 0)
    paths = list(itertools.product(range(len(tagger.classes_)), repeat=len(xseq)))
    scores = np.array([_path_score(emissions, transitions, p) for p in paths])
    return paths, scores - np.logaddexp.reduce(scores), emissions, transitions


def _oracle_split(X):
    """Plain Python: each sequence without transition attributes, and those (not at j=0)."""
    stripped, taken, found = [], [], False
    for i, seq in enumerate(X):
        state = []
        for j, token in enumerate(seq):
            if isinstance(token, dict) and KEY in token:
                found = True
                if j:
                    taken.append((i, j, dict(token[KEY])))
                token = {k: v for k, v in token.items() if k != KEY}
            state.append(token)
        stripped.append(state)
    return stripped, taken, found


class _Tokens(dict):
    """A dict subclass: the encoder's general path, the key still taken out."""


@pytest.mark.parametrize("streamed", [False, True])
def test_the_encoder_takes_transition_attributes_out_in_its_one_pass(streamed):
    X, _ = _data(11, n_sequences=12, max_length=5, p_transition=0.5)
    X[0][0][KEY] = {"p": "first"}  # a first token's: taken out, then ignored
    X[1] = [_Tokens(token) for token in X[1]]
    X[2] = [["name=a", "name=b"], {"w": "w1", KEY: {"q": 2.0}}]  # a names token before
    stripped, taken, found = _oracle_split(X)
    before = [[dict(t) if isinstance(t, dict) else list(t) for t in seq] for seq in X]
    parts = TransitionParts()
    vocabulary = Vocabulary()
    encoded = encode_data(vocabulary, iter(X) if streamed else X, grow=True, transitions=parts)
    expected_vocabulary = Vocabulary()
    expected = expected_vocabulary.encode(stripped, grow=True)
    assert vocabulary.attributes == expected_vocabulary.attributes
    for field in ("indptr", "ids", "values", "lengths"):
        np.testing.assert_array_equal(getattr(encoded, field), getattr(expected, field))
    assert parts.found is found is True
    assert [(i, j, dict(a)) for i, j, a in parts.tokens] == taken
    assert [[dict(t) if isinstance(t, dict) else list(t) for t in seq] for seq in X] == before
    # without TransitionParts the key is an ordinary (nested) feature, as before
    plain = Vocabulary()
    plain.encode(X, grow=True)
    assert any(name.startswith(KEY) for name in plain.attributes)


@pytest.mark.parametrize("streamed", [False, True])
def test_a_transition_value_that_is_no_dict_is_named(streamed):
    X = [[{"w": "a"}], [{"w": "a"}, {"w": "b", KEY: "p"}]]
    vocabulary = Vocabulary()
    with pytest.raises(ValueError, match=r"X\[1\]\[1\]\['__transition__'\] must be a dict"):
        encode_data(
            vocabulary, iter(X) if streamed else X, grow=True, transitions=TransitionParts()
        )
    assert len(vocabulary) == 0  # the failed encoding added nothing


def test_estimator_predictions_match_enumeration():
    tagger, X, _ = _fit_random(2)
    assert tagger.conditioned_transition_features_
    classes = tagger.classes_.tolist()
    for xseq in X[:8]:
        paths, log_proba, _, _ = _tagger_brute(tagger, xseq)
        order = np.argsort(-log_proba, kind="stable")
        best = [classes[k] for k in paths[order[0]]]
        assert tagger.predict_single(xseq) == best
        assert tagger.predict([xseq]) == [best]
        nbest = tagger.predict_nbest([xseq], n=4)[0]
        expected = sorted(log_proba, reverse=True)[:4]
        np.testing.assert_allclose([lp for _, lp in nbest], expected, atol=1e-10)
        for labels, lp in nbest:
            k = paths.index(tuple(classes.index(label) for label in labels))
            assert lp == pytest.approx(log_proba[k], abs=1e-10)
        marginals = tagger.predict_marginals([xseq])[0]
        for t in range(len(xseq)):
            for j, label in enumerate(classes):
                exact = np.exp(log_proba[[p[t] == j for p in paths]]).sum()
                assert marginals[t][label] == pytest.approx(exact, abs=1e-10)
        pairs = tagger.predict_transition_marginals([xseq])[0]
        for t in range(len(xseq) - 1):
            for i, j in itertools.product(range(len(classes)), repeat=2):
                exact = np.exp(log_proba[[p[t] == i and p[t + 1] == j for p in paths]]).sum()
                assert pairs[t][i, j] == pytest.approx(exact, abs=1e-10)
        gold = [classes[k] for k in paths[order[-1]]]
        assert tagger.sequence_log_proba([xseq], [gold])[0] == pytest.approx(
            log_proba[order[-1]], abs=1e-10
        )


@pytest.mark.parametrize("log_domain", [False, True], ids=["compiled pass", "log domain"])
def test_marginals_and_probabilities_match_enumeration_in_either_domain(log_domain, monkeypatch):
    # unconstrained marginals and log Z take the training's compiled pass,
    # and the log-domain rows beyond its range of transition scores
    from skcrf._inference import _blocks, _structured

    if log_domain:
        monkeypatch.setattr(_blocks, "MAX_TRANSITION_SPREAD", -1.0)
        monkeypatch.setattr(_structured, "MAX_TRANSITION_SPREAD", -1.0)
    tagger, X, _ = _fit_random(3)
    classes = tagger.classes_.tolist()
    for xseq in X[:6]:
        paths, log_proba, _, _ = _tagger_brute(tagger, xseq)
        single = tagger.predict_marginals_single(xseq)
        batch = tagger.predict_marginals([xseq])[0]
        for t in range(len(xseq)):
            for j, label in enumerate(classes):
                exact = np.exp(log_proba[[p[t] == j for p in paths]]).sum()
                assert single[t][label] == pytest.approx(exact, abs=1e-10)
                assert batch[t][label] == pytest.approx(exact, abs=1e-10)
        gold = [classes[k] for k in paths[int(np.argmin(log_proba))]]
        assert tagger.sequence_log_proba([xseq], [gold])[0] == pytest.approx(
            log_proba.min(), abs=1e-10
        )
        assert tagger.sequence_log_proba([xseq])[0] == pytest.approx(log_proba.max(), abs=1e-10)
        ((best, best_log_proba),) = tagger.predict_nbest([xseq], n=1)[0]
        assert best == tagger.predict_single(xseq)
        assert best_log_proba == pytest.approx(log_proba.max(), abs=1e-10)


def test_constraints_apply_to_conditioned_models():
    tagger, X, _ = _fit_random(3)
    classes = tagger.classes_.tolist()
    allowed = [(a, b) for a in classes for b in classes if (a, b) != (classes[0], classes[1])]
    for xseq in X[:6]:
        paths, log_proba, _, _ = _tagger_brute(tagger, xseq)
        valid = [
            all((p[t - 1], p[t]) != (0, 1) for t in range(1, len(p))) and p[0] != 2 for p in paths
        ]
        # partial label: token 0 is not the last class
        partial = [{classes[0], classes[1]}] + [None] * (len(xseq) - 1)
        kept = np.flatnonzero(valid)
        best = kept[np.argmax(log_proba[kept])]
        predicted = tagger.predict([xseq], allowed_transitions=allowed, partial_labels=[partial])
        assert predicted == [[classes[k] for k in paths[best]]]
        marginals = tagger.predict_marginals(
            [xseq], allowed_transitions=allowed, partial_labels=[partial]
        )[0]
        mass = np.exp(log_proba[kept])
        for t in range(len(xseq)):
            for j, label in enumerate(classes):
                exact = mass[[paths[k][t] == j for k in kept]].sum() / mass.sum()
                assert marginals[t][label] == pytest.approx(exact, abs=1e-10)


def test_compiled_pass_matches_the_log_domain_reference():
    tagger, X, _ = _fit_random(4)
    parts = TransitionParts()
    encoded = encode_data(tagger._predictor.vocabulary, X, grow=False, transitions=parts)
    encoded = with_transitions(encoded, parts, tagger._predictor.transition_vocabulary, grow=False)
    from skcrf._inference._blocks import make_blocks

    model = tagger._model
    block = make_blocks(encoded, np.arange(len(X)), model.n_labels)[0]
    decoder = tagger._predictor.decoder
    emissions = np.zeros((block.n_rows, model.n_labels))
    decoder._emissions(block.indptr, block.ids, block.values, emissions)
    conditioned = model.conditioned.arrays()
    deltas = _conditioned.row_deltas(block, conditioned, model.n_labels)
    row_trans = _conditioned.row_transitions(model.transition_matrix(), deltas)
    log_z, marginals, pairs = _conditioned.forward_backward_rows(
        emissions, row_trans, block.batch_sizes
    )
    psi = emissions.copy()
    row_max = np.empty(block.n_rows)
    _kernels.exp_shifted(psi, row_max)
    transitions = model.transition_matrix()
    t_max = transitions.max()
    exp_trans = np.exp(transitions - t_max)
    alpha = np.empty_like(psi)
    scale = np.empty(block.n_rows)
    beta, weighted = np.empty_like(psi), np.empty_like(psi)
    pair_sums = np.zeros((model.n_labels, model.n_labels))
    out = np.zeros(len(deltas[2]))
    log_sum = _kernels.forward_backward(
        psi,
        exp_trans,
        block.batch_sizes,
        alpha,
        scale,
        beta,
        weighted,
        pair_sums,
        None,
        (deltas[0], deltas[1], np.exp(deltas[2]), out),
    )
    total = log_sum + row_max.sum() + t_max * (block.n_rows - block.n_sequences)
    assert total == pytest.approx(log_z.sum(), rel=1e-12)
    np.testing.assert_allclose(alpha, marginals, atol=1e-12)
    np.testing.assert_allclose(pair_sums * exp_trans, pairs.sum(axis=0), atol=1e-10)
    rows = np.repeat(np.arange(block.n_rows), np.diff(deltas[0]))
    np.testing.assert_allclose(out, pairs.reshape(block.n_rows, -1)[rows, deltas[1]], atol=1e-12)


def test_save_load_and_clear_errors(tmp_path):
    tagger, X, y = _fit_random(5)
    path = tmp_path / "model.npz"
    tagger.save(path)
    loaded = CRFTagger.load(path)
    assert loaded.predict(X) == tagger.predict(X)
    assert loaded.conditioned_transition_features_ == tagger.conditioned_transition_features_
    for what, call in [  # noqa: B007 (the name says which call failed)
        ("to_crfsuite", lambda: tagger.to_crfsuite(tmp_path / "m.crfsuite")),
        ("tagger_", lambda: tagger.tagger_),
        ("size_", lambda: tagger.size_),
    ]:
        with pytest.raises(ValueError, match="conditioned"):
            call()
    for params, reason in [
        ({"algorithm": "ap"}, "lbfgs"),
        ({"model_filename": str(tmp_path / "f.crfsuite")}, "model_filename"),
        ({"class_weight": "balanced"}, "class_weight"),
    ]:
        with pytest.raises(ValueError, match=reason):
            CRFTagger(**params).fit(X, y)
    assert not (tmp_path / "f.crfsuite").exists()
    with pytest.raises(ValueError, match=r"X\[0\]\[1\]\['__transition__'\] must be a dict"):
        CRFTagger().fit([[{"w": "a"}, {"w": "b", KEY: "x"}]], [["A", "B"]])


def test_unused_feature_leaves_the_model_unchanged():
    X, y = _data(6, n_sequences=20, p_transition=0.0)
    plain = CRFTagger(c2=0.1, max_iterations=30).fit(X, y)
    assert plain._model.conditioned is None
    assert plain.conditioned_transition_features_ == {}
    stream = CRFTagger(c2=0.1, max_iterations=30).fit(iter(X), iter(y))
    np.testing.assert_array_equal(plain._model.weights, stream._model.weights)


def test_streamed_and_list_fits_agree_and_weights_scale():
    X, y = _data(7, n_sequences=25)
    listed = CRFTagger(c2=0.1, max_iterations=30).fit(X, y)
    streamed = CRFTagger(c2=0.1, max_iterations=30).fit(iter(X), iter(y))
    np.testing.assert_array_equal(listed._model.weights, streamed._model.weights)
    doubled = CRFTagger(c2=0.1, max_iterations=30, min_freq=0).fit(X + X, y + y)
    weighted = CRFTagger(c2=0.1, max_iterations=30, min_freq=0).fit(
        X, y, sample_weight=np.full(len(X), 2.0)
    )
    np.testing.assert_allclose(doubled._model.weights, weighted._model.weights, atol=1e-6)


def test_threads_give_the_sequential_answers():
    tagger, _, _ = _fit_random(8)
    rng = random.Random(0)
    X = [_data(100 + k, n_sequences=1, max_length=rng.randrange(1, 40))[0][0] for k in range(40)]
    calls = [
        lambda: tagger.predict(X),
        lambda: tagger.predict_marginals(X),
        lambda: tagger.predict_nbest(X, n=3),
        lambda: tagger.sequence_log_proba(X),
        lambda: [tagger.predict_single(x) for x in X],
    ]
    expected = [call() for call in calls]
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda k: calls[k % len(calls)](), range(40)))
    for k, result in enumerate(results):
        assert repr(result) == repr(expected[k % len(calls)])


def test_explain_terms_add_up_to_the_path_score():
    tagger, X, _ = _fit_random(9)
    classes = tagger.classes_.tolist()
    for xseq in X[:6]:
        paths, _, emissions, transitions = _tagger_brute(tagger, xseq)
        entries = tagger.explain(xseq)
        path = [classes.index(entry["label"]) for entry in entries]
        total = sum(term for entry in entries for _, _, term in entry["state"])
        total += sum(entry["transition"][2] for entry in entries[1:])
        total += sum(term[3] for entry in entries for term in entry["conditioned"])
        assert total == pytest.approx(_path_score(emissions, transitions, path), abs=1e-10)
        assert entries[0]["conditioned"] == []
    assert any(entry["conditioned"] for xseq in X[:6] for entry in tagger.explain(xseq))


def _bio_spans(labels):
    spans, start = [], None
    for t, label in enumerate([*labels, "O"]):
        if start is not None and label != "I-X":
            spans.append((start, t, "X"))
            start = None
        if label == "B-X":
            start = t
    return spans


def test_entity_probabilities_match_enumeration():
    rng = np.random.default_rng(10)
    X, y = [], []
    for _ in range(40):
        n = int(rng.integers(1, 6))
        seq = [{"w": f"w{rng.integers(4)}", KEY: {"p": f"q{rng.integers(3)}"}} for _ in range(n)]
        labels, inside = [], False
        for _ in range(n):
            label = ["O", "B-X", "I-X"][int(rng.integers(3 if inside else 2))]
            inside = label != "O"
            labels.append(label)
        X.append(seq)
        y.append(labels)
    tagger = CRFTagger(c2=0.05, max_iterations=60).fit(X, y)
    classes = tagger.classes_.tolist()
    for xseq in X[:8]:
        paths, log_proba, _, _ = _tagger_brute(tagger, xseq)
        names = [[classes[k] for k in p] for p in paths]
        valid = np.array([_bio_spans(p) is not None and not _breaks_bio(p) for p in names])
        mass = np.exp(log_proba) * valid
        for start, end, kind, probability in tagger.predict_entities([xseq])[0]:
            exact = sum(m for m, p in zip(mass, names) if (start, end, kind) in _bio_spans(p))
            assert probability == pytest.approx(exact / mass.sum(), abs=1e-10)


def _breaks_bio(labels):
    return any(
        label == "I-X" and (t == 0 or labels[t - 1] == "O") for t, label in enumerate(labels)
    )


def test_warm_start_cross_validation_and_early_stopping():
    from skcrf import CRFTaggerCV

    X, y = _data(11, n_sequences=60, max_length=6)
    first = CRFTagger(c2=0.1, max_iterations=15).fit(X, y)
    warm = CRFTagger(c2=0.1, max_iterations=15, warm_start=True).fit(X, y)
    np.testing.assert_array_equal(warm._model.weights, first._model.weights)
    # one more iteration starts from those weights (a cold one starts from 0)
    warm.set_params(max_iterations=1).fit(X, y)
    cold = CRFTagger(c2=0.1, max_iterations=1).fit(X, y)
    final = first.training_log_.iterations[-1]["loss"]
    assert warm.training_log_.iterations[-1]["loss"] <= final + 1e-9
    assert cold.training_log_.iterations[-1]["loss"] > final + 1.0
    assert warm.n_features_ == first.n_features_
    kept = warm._model.weights.copy()
    plain = [[{k: v for k, v in token.items() if k != KEY} for token in seq] for seq in X]
    with pytest.raises(ValueError, match="holds no transition attributes"):
        warm.set_params(max_iterations=5).fit(plain, y)
    np.testing.assert_array_equal(warm._model.weights, kept)  # a failed fit changes nothing
    search = CRFTaggerCV(CRFTagger(max_iterations=15), c1=[0.0, 0.1], c2=[0.01, 0.1], cv=3)
    search.fit(X, y)
    assert search.best_estimator_.conditioned_transition_features_
    stopped = CRFTagger(c2=0.1, max_iterations=40, early_stopping=True, n_iter_no_change=3)
    stopped.fit(X[:40], y[:40], X_dev=X[40:], y_dev=y[40:])
    assert stopped.best_iteration_ is not None


def _rewrite(path, change):
    with np.load(path) as npz:
        arrays = {name: npz[name] for name in npz.files}
    change(arrays)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("conditioned_pairs", lambda a: a + 10**6, "label pairs"),
        ("conditioned_weights", lambda a: np.full_like(a, np.nan), "non-finite"),
        ("conditioned_ptr", lambda a: a[::-1].copy(), "non-decreasing"),
    ],
)
def test_format_4_checks_its_arrays(tmp_path, name, value, message):
    from skcrf.io import load_state, save_state

    tagger, X, _ = _fit_random(12)
    path = tmp_path / "m.npz"
    save_state(tagger._get_fitted_state(), path, format_version=4)
    with np.load(path) as npz:
        import json

        assert json.loads(npz["metadata"].tobytes())["format_version"] == 4
    state = load_state(path)
    with pytest.raises(ValueError, match="format_version=4 is the format"):
        save_state(state, tmp_path / "other.npz", format_version=3)

    def change(arrays):
        arrays[name] = value(arrays[name])

    _rewrite(path, change)
    with pytest.raises(ValueError, match=message):
        CRFTagger.load(path)
