"""Entity spans with exact probabilities (predict_entities) and posterior decoding
(decoding='posterior'), checked against brute-force enumeration on tiny models."""

import itertools
import threading

import numpy as np
import pytest
from sklearn.model_selection import GridSearchCV, KFold

from skcrf import CRFTagger
from skcrf._inference._blocks import count_blocks
from skcrf._inference._constraints import scheme_roles
from skcrf._inference._spans import RoleMasks, span_log_proba
from skcrf.metrics import _extract_chunks, get_scorer

WORDS = ["a", "b", "c", "d"]

SCHEME_LABELS = {
    "BIO": ["B-X", "I-X", "B-Y", "I-Y", "O"],
    "IOB1": ["B-X", "I-X", "B-Y", "I-Y", "O"],
    "IOBES": ["B-X", "I-X", "E-X", "S-X", "S-Y", "O"],
    "BIOUL": ["B-X", "I-X", "L-X", "U-X", "O"],
    "BMES": ["B-X", "M-X", "E-X", "S-X", "S-Y"],
}
# the metrics' name of each scheme's prefixes (BIOUL's L/U are read as E/S)
METRIC_SCHEME = {"BIO": "IOB2", "IOB1": "IOB1", "IOBES": "IOBES", "BIOUL": "BIOUL", "BMES": "BMES"}


def random_tagger(labels, seed=0, **params):
    """A diffuse model: random words with random labels (every label seen)."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(40):
        n = int(rng.integers(1, 6))
        X.append([{"w": str(rng.choice(WORDS)), "bias": 1.0} for _ in range(n)])
        y.append([str(rng.choice(labels)) for _ in range(n)])
    y[0] = list(labels)
    X[0] = [{"w": WORDS[k % len(WORDS)], "bias": 1.0} for k in range(len(labels))]
    params.setdefault("c2", 0.05)
    return CRFTagger(all_possible_transitions=True, all_possible_states=True, **params).fit(X, y)


def test_sequences(seed, n=6, max_length=5):
    rng = np.random.default_rng(seed)
    lengths = [1, max_length] + [int(rng.integers(1, max_length + 1)) for _ in range(n - 2)]
    return [[{"w": str(rng.choice(WORDS)), "bias": 1.0} for _ in range(k)] for k in lengths]


test_sequences.__test__ = False  # a helper, not a test


def valid(labels, scheme):
    """Whether a labelling follows the scheme (its rules written out here, by role)."""
    roles = []
    for label in labels:
        if label == "O":
            roles.append(("O", None))
        else:
            prefix, kind = label.split("-", 1)
            prefix = {"M": "I", "L": "E", "U": "S"}.get(prefix, prefix)
            roles.append((prefix, kind))
    previous = ("O", None)
    for k, (role, kind) in enumerate(roles):
        inside_same = previous[0] in ("B", "I") and previous[1] == kind
        if scheme == "BIO" and role == "I" and not inside_same:
            return False
        if scheme == "IOB1" and role == "B" and not inside_same:
            return False
        if scheme in ("IOBES", "BIOUL", "BMES"):
            if previous[0] in ("B", "I"):
                if not (role in ("I", "E") and previous[1] == kind):
                    return False
            elif role in ("I", "E"):
                return False
            if k == len(roles) - 1 and role in ("B", "I"):
                return False
        previous = (role, kind)
    return True


def brute_force(tagger, xseq, scheme, allowed=None, partial=None):
    """Every allowed labelling valid in the scheme with its probability (normalized)."""
    classes = tagger.classes_.tolist()
    labellings = [list(y) for y in itertools.product(classes, repeat=len(xseq))]
    log_p = tagger.sequence_log_proba(
        [xseq] * len(labellings),
        labellings,
        allowed_transitions=[(a, b) for a in classes for b in classes],
    )
    keep = []
    for y, lp in zip(labellings, log_p):
        if scheme is not None and not valid(y, scheme):
            continue
        if allowed is not None and not all(pair in allowed for pair in zip(y, y[1:])):
            continue
        if partial is not None and not all(
            p is None or (t in p if isinstance(p, set) else t == p) for p, t in zip(partial, y)
        ):
            continue
        keep.append((y, lp))
    probs = np.exp(np.array([lp for _, lp in keep]) - max(lp for _, lp in keep))
    probs /= probs.sum()
    return [y for y, _ in keep], probs


def span_oracle(labellings, probs, scheme):
    """{(start, end, type): probability that a labelling has exactly this entity}."""
    out = {}
    for y, p in zip(labellings, probs):
        for kind, start, end in _extract_chunks(y, METRIC_SCHEME[scheme]):
            out[(start, end, kind)] = out.get((start, end, kind), 0.0) + p
    return out


@pytest.mark.parametrize("scheme", sorted(SCHEME_LABELS))
def test_span_probabilities_match_brute_force_for_every_span(scheme):
    labels = SCHEME_LABELS[scheme]
    tagger = random_tagger(labels, seed=len(scheme))
    X = test_sequences(seed=1)
    encoded = tagger._predictor.encode(X)
    constraints = tagger._predictor.constraints(
        encoded.lengths, tagger._decoding(), None, None, scheme=scheme
    )
    name, roles = scheme_roles(tagger.classes_.tolist(), scheme)
    kinds = sorted({kind for _, kind in roles if kind is not None})
    # every span of every type: at the start, at the end, inside, whole sequence
    spans = [
        [(s, e, kind) for s in range(len(x)) for e in range(s + 1, len(x) + 1) for kind in kinds]
        for x in X
    ]
    log_proba = span_log_proba(
        tagger._predictor.decoder, encoded, spans, RoleMasks(name, roles), 1, constraints
    )
    checked = 0
    for xseq, seq_spans, seq_log_proba in zip(X, spans, log_proba):
        labellings, probs = brute_force(tagger, xseq, scheme)
        oracle = span_oracle(labellings, probs, scheme)
        for span, lp in zip(seq_spans, seq_log_proba):
            np.testing.assert_allclose(np.exp(lp), oracle.get(span, 0.0), atol=1e-12, rtol=1e-9)
            checked += oracle.get(span, 0.0) > 1e-3
    assert checked > 10  # the oracle is not trivially zero


@pytest.mark.parametrize("scheme", sorted(SCHEME_LABELS))
@pytest.mark.parametrize("decoding", ["viterbi", "posterior"])
def test_predict_entities_match_brute_force(scheme, decoding):
    labels = SCHEME_LABELS[scheme]
    tagger = random_tagger(labels, seed=3, decoding=decoding)
    X = test_sequences(seed=2, n=8)
    result = tagger.predict_entities(X, scheme=scheme)
    assert len(result) == len(X)
    n_entities = 0
    adjacent = 0
    for xseq, entities in zip(X, result):
        labellings, probs = brute_force(tagger, xseq, scheme)
        if decoding == "viterbi":
            best = labellings[int(np.argmax(probs))]
        else:
            marginals = {}
            for y, p in zip(labellings, probs):
                for t, label in enumerate(y):
                    marginals[t, label] = marginals.get((t, label), 0.0) + p
            gains = [
                sum(marginals.get((t, lab), 0.0) for t, lab in enumerate(y)) for y in labellings
            ]
            best = labellings[int(np.argmax(gains))]
        expected = _extract_chunks(best, METRIC_SCHEME[scheme])
        assert [(s, e, kind) for s, e, kind, _ in entities] == [
            (s, e, kind) for kind, s, e in expected
        ]
        oracle = span_oracle(labellings, probs, scheme)
        for s, e, kind, p in entities:
            assert isinstance(p, float) and 0 < p <= 1 + 1e-12
            np.testing.assert_allclose(p, oracle[(s, e, kind)], rtol=1e-9)
        n_entities += len(entities)
        adjacent += sum(a[1] == b[0] for a, b in zip(entities, entities[1:]))
    assert n_entities > 3


def test_predict_entities_with_other_constraints():
    labels = SCHEME_LABELS["BIO"]
    tagger = random_tagger(labels, seed=5)
    X = test_sequences(seed=4, n=5, max_length=4)
    classes = tagger.classes_.tolist()
    allowed = {(a, b) for a in classes for b in classes if (a, b) != ("B-X", "B-Y")}
    partial = [[None, {"B-X", "O"}] + [None] * (len(x) - 2) if len(x) > 1 else None for x in X]
    result = tagger.predict_entities(X, "BIO", allowed_transitions=allowed, partial_labels=partial)
    for xseq, p_seq, entities in zip(X, partial, result):
        labellings, probs = brute_force(tagger, xseq, "BIO", allowed, p_seq)
        best = labellings[int(np.argmax(probs))]
        assert [(s, e, k) for s, e, k, _ in entities] == [
            (s, e, k) for k, s, e in _extract_chunks(best)
        ]
        oracle = span_oracle(labellings, probs, "BIO")
        for s, e, kind, p in entities:
            np.testing.assert_allclose(p, oracle[(s, e, kind)], rtol=1e-9)
    # the estimator's allowed_transitions applies by default
    tagger.set_params(allowed_transitions=sorted(allowed))
    assert tagger.predict_entities(X, "BIO", partial_labels=partial) == result


def test_invalid_viterbi_path_is_decoded_under_the_scheme():
    # a model that prefers I-X at the first token: predict gives an invalid
    # BIO labelling, predict_entities decodes the best valid one
    X = [[{"w": "a"}], [{"w": "b"}, {"w": "a"}]]
    y = [["I-X"], ["O", "B-X"]]
    tagger = CRFTagger(c2=0.001, all_possible_transitions=True).fit(X * 5, y * 5)
    assert tagger.predict([[{"w": "a"}]]) == [["I-X"]]
    (entities,) = tagger.predict_entities([[{"w": "a"}]])
    assert [e[:3] for e in entities] in ([(0, 1, "X")], [])
    labellings, probs = brute_force(tagger, [{"w": "a"}], "BIO")
    best = labellings[int(np.argmax(probs))]
    assert best == tagger.predict([[{"w": "a"}]], allowed_transitions="BIO")[0]
    assert [e[:3] for e in entities] == [(s, e, k) for k, s, e in _extract_chunks(best)]


def test_predict_entities_errors_and_empty():
    tagger = random_tagger(SCHEME_LABELS["BIO"], seed=0)
    with pytest.raises(ValueError, match=r"scheme='XYZ': unknown tagging scheme"):
        tagger.predict_entities([[{"w": "a"}]], scheme="XYZ")
    with pytest.raises(ValueError, match=r"scheme='BIO'.*label 'E-X' does not follow"):
        random_tagger(["B-X", "E-X", "O"], seed=0).predict_entities([[{"w": "a"}]], "BIO")
    pos = random_tagger(["NOUN", "VERB"], seed=0)
    with pytest.raises(ValueError, match=r"scheme='BIO'.*label 'NOUN' does not follow"):
        pos.predict_entities([[{"w": "a"}]])
    assert tagger.predict_entities([[], [{"w": "a"}]])[0] == []
    with pytest.raises(ValueError, match=r"X\[1\]"):
        tagger.predict_entities(
            [[{"w": "a"}], [{"w": "a"}, {"w": "b"}]],
            partial_labels=[None, ["O", "I-Y"]],
            allowed_transitions=[("O", "O")],
        )
    with pytest.raises(ValueError, match=r"X\[0\]\[1\]"):
        tagger.predict_entities([[{"w": "a"}, {"w": float("nan")}]])


def test_bad_label_type_message():
    tagger = random_tagger(["B", "O"], seed=0)
    with pytest.raises(ValueError, match="has no entity type"):
        tagger.predict_entities([[{"w": "a"}]])


# ----------------------------------------------------------- posterior decoding


def marginal_oracle(tagger, xseq, allowed=None, partial=None):
    labellings, probs = brute_force(tagger, xseq, None, allowed, partial)
    marginals = {}
    for y, p in zip(labellings, probs):
        for t, label in enumerate(y):
            marginals[t, label] = marginals.get((t, label), 0.0) + p
    gains = np.array(
        [sum(marginals.get((t, label), 0.0) for t, label in enumerate(y)) for y in labellings]
    )
    return labellings, gains, marginals


@pytest.mark.parametrize("seed", range(4))
def test_posterior_maximizes_expected_correct_tokens(seed):
    rng = np.random.default_rng(seed)
    tagger = random_tagger(["A", "B", "C", "D"], seed=seed, decoding="posterior")
    classes = tagger.classes_.tolist()
    allowed = {(a, b) for a in classes for b in classes if rng.random() > 0.35}
    allowed |= {(a, a) for a in classes}
    X = test_sequences(seed=seed + 10, n=5, max_length=5)
    partial = [[None] * len(x) for x in X]
    partial[1][-1] = {"A", "C"}
    partial[2][0] = "B"
    for allowed_transitions, partial_labels in (
        (None, None),
        (allowed, None),
        (allowed, partial),
    ):
        predicted = tagger.predict(
            X, allowed_transitions=allowed_transitions, partial_labels=partial_labels
        )
        for i, (xseq, path) in enumerate(zip(X, predicted)):
            p_seq = None if partial_labels is None else partial_labels[i]
            labellings, gains, _ = marginal_oracle(tagger, xseq, allowed_transitions, p_seq)
            assert path in labellings  # allowed
            np.testing.assert_allclose(gains[labellings.index(path)], gains.max(), rtol=1e-12)
            single = tagger.predict_single(
                xseq, allowed_transitions=allowed_transitions, partial_labels=p_seq
            )
            assert single == path


def test_posterior_without_constraints_is_tokenwise_argmax():
    tagger = random_tagger(["A", "B", "C"], seed=1, decoding="posterior")
    X = test_sequences(seed=3, n=10)
    classes = tagger.classes_.tolist()
    expected = [
        [classes[int(np.argmax([m[c] for c in classes]))] for m in seq]
        for seq in tagger.predict_marginals(X)
    ]
    assert tagger.predict(X) == expected
    viterbi = tagger.set_params(decoding="viterbi").predict(X)
    assert viterbi == [labels for ((labels, _),) in tagger.predict_nbest(X, n=1)]


def test_posterior_changes_the_answer_and_score_sees_it():
    # find sequences where the two decodings differ, then check score and
    # sequence_log_proba follow the parameter
    tagger = random_tagger(["A", "B", "C"], seed=2)
    X = test_sequences(seed=5, n=60)
    viterbi = tagger.predict(X)
    posterior = tagger.set_params(decoding="posterior").predict(X)
    assert viterbi != posterior
    y = [[("A" if k % 2 else "B") for k in range(len(x))] for x in X]
    accuracy = np.mean([a == b for p, t in zip(posterior, y) for a, b in zip(p, t)])
    assert tagger.score(X, y) == pytest.approx(accuracy)
    np.testing.assert_allclose(
        tagger.sequence_log_proba(X), tagger.sequence_log_proba(X, posterior), rtol=1e-12
    )
    tagger.set_params(decoding="best")
    with pytest.raises(ValueError, match="'decoding' parameter"):
        tagger.predict(X)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_grid_search_sees_decoding():
    labels = ["A", "B", "C"]
    rng = np.random.default_rng(0)
    X = test_sequences(seed=6, n=40)
    y = [[str(rng.choice(labels)) for _ in x] for x in X]
    search = GridSearchCV(
        CRFTagger(c2=0.1, max_iterations=20),
        {"decoding": ["viterbi", "posterior"]},
        cv=2,
        scoring=get_scorer("flat_accuracy"),
        error_score="raise",
    )
    search.fit(X, y)
    assert list(search.cv_results_["param_decoding"]) == ["viterbi", "posterior"]
    # each candidate's test score is its own decoding's accuracy on the fold
    differ = False
    for k, (train, test) in enumerate(KFold(2).split(X)):
        predictions = []
        for c, decoding in enumerate(["viterbi", "posterior"]):
            model = CRFTagger(c2=0.1, max_iterations=20, decoding=decoding).fit(
                [X[i] for i in train], [y[i] for i in train]
            )
            expected = model.score([X[i] for i in test], [y[i] for i in test])
            assert search.cv_results_[f"split{k}_test_score"][c] == pytest.approx(expected)
            predictions.append(model.predict([X[i] for i in test]))
        differ |= predictions[0] != predictions[1]
    assert differ  # the two candidates are not the same model


def test_posterior_empty_sequences_and_one_label():
    tagger = random_tagger(["A", "B"], seed=0, decoding="posterior")
    assert tagger.predict([[], [{"w": "a"}], []])[0::2] == [[], []]
    assert tagger.predict_single([]) == []
    one = CRFTagger(c2=0.1, decoding="posterior").fit([[{"w": "a"}]], [["X"]])
    assert one.predict([[{"w": "a"}, {"w": "b"}]]) == [["X", "X"]]


def test_decoding_is_keyword_only_and_default_unchanged():
    with pytest.raises(TypeError):
        CRFTagger(*([None] * 28), "posterior")
    assert CRFTagger().decoding == "viterbi"


def test_threads_give_sequential_answers():
    tagger = random_tagger(SCHEME_LABELS["BIO"], seed=7, decoding="posterior")
    X = test_sequences(seed=8, n=30, max_length=6)

    def answers():
        return (
            tagger.predict(X),
            tagger.predict_entities(X),
            tagger.predict_entities(X, "IOB1", allowed_transitions="BIO"),
            [tagger.predict_single(x) for x in X[:5]],
            [tagger.explain(x) for x in X[:5]],
            tagger.score(X, tagger.set_params().predict(X)),
        )

    expected = answers()
    results = [None] * 8
    barrier = threading.Barrier(8)

    def work(k):
        barrier.wait()
        results[k] = answers()

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(result == expected for result in results)


def test_pickle_from_before_decoding_existed():
    import pickle

    tagger = random_tagger(["A", "B"], seed=0)
    state = tagger.__getstate__()
    state.pop("decoding")
    old = CRFTagger.__new__(CRFTagger)
    old.__setstate__(state)
    assert old.get_params()["decoding"] == "viterbi"
    X = test_sequences(seed=1)
    assert old.predict(X) == tagger.predict(X)
    again = pickle.loads(pickle.dumps(tagger.set_params(decoding="posterior")))
    assert again.decoding == "posterior" and again.predict(X) == tagger.predict(X)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_early_stopping_scores_with_the_decoding():
    rng = np.random.default_rng(3)
    X = test_sequences(seed=9, n=60)
    y = [[str(rng.choice(["A", "B", "C"])) for _ in x] for x in X]
    X_dev, y_dev = X[:20], y[:20]
    common = dict(c2=0.05, max_iterations=8, early_stopping=True, n_iter_no_change=50)
    for decoding in ("viterbi", "posterior"):
        tagger = CRFTagger(decoding=decoding, **common).fit(
            X[20:], y[20:], X_dev=X_dev, y_dev=y_dev
        )
        best = tagger.best_iteration_
        (entry,) = [it for it in tagger.training_log_.iterations if it["num"] == best]
        # the kept weights are the best iteration's: its validation score is
        # the fitted model's own token accuracy (under its decoding)
        assert entry["validation_score"] == pytest.approx(tagger.score(X_dev, y_dev), abs=1e-12)
    # (the two decodings differ there: the check above tells them apart)
    viterbi_score = tagger.set_params(decoding="viterbi").score(X_dev, y_dev)
    assert viterbi_score != pytest.approx(entry["validation_score"], abs=1e-12)


def test_partial_label_against_the_scheme_names_the_token():
    tagger = random_tagger(SCHEME_LABELS["BIO"], seed=0)
    X = [[{"w": "a"}], [{"w": "a"}, {"w": "b"}]]
    with pytest.raises(ValueError, match=r"sequence 1 .* token 0 .* first of a sequence"):
        tagger.predict_entities(X, partial_labels=[None, ["I-X", None]])
    # without the scheme, I-X may begin a sequence
    assert tagger.predict(X, partial_labels=[None, ["I-X", None]])[1][0] == "I-X"


def test_many_blocks_and_threads_match_one_sequence_at_a_time():
    # enough tokens for several blocks and two shards: the per-block
    # bookkeeping (packed rows, sequence order) must match one-by-one calls
    tagger = random_tagger(SCHEME_LABELS["IOB1"], seed=11, n_jobs=2)
    X = test_sequences(seed=12, n=4000, max_length=10)
    lengths = [len(x) for x in X]
    assert count_blocks(lengths, len(tagger.classes_)) >= 2 and sum(lengths) > 2 * 4000
    entities = tagger.predict_entities(X, "IOB1")
    posterior = tagger.set_params(decoding="posterior").predict(X)
    tagger.set_params(decoding="viterbi")
    rng = np.random.default_rng(0)
    for i in rng.choice(len(X), size=40, replace=False).tolist():
        (alone,) = tagger.predict_entities([X[i]], "IOB1")
        assert [e[:3] for e in alone] == [e[:3] for e in entities[i]]
        np.testing.assert_allclose([e[3] for e in alone], [e[3] for e in entities[i]], rtol=1e-12)
        assert tagger.set_params(decoding="posterior").predict_single(X[i]) == posterior[i]
        tagger.set_params(decoding="viterbi")
