"""Structured prediction through the public estimator: predict_nbest, sequence_log_proba,
predict_transition_marginals, constraints at decoding time
(allowed_transitions, partial_labels) and training with missing labels."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skcrf import CRFTagger

WORDS = ["john", "smith", "lives", "in", "new", "york", "city", "mary", "jones", "paris", "the"]


def entity_data(seed=0, n=60):
    """Toy sentences with BIO tags: names (PER) and places (LOC)."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n):
        words, tags = [], []
        for _ in range(rng.integers(1, 4)):
            kind = rng.integers(3)
            if kind == 0:
                span, tag = (["john", "smith"] if rng.random() < 0.5 else ["mary", "jones"]), "PER"
            elif kind == 1:
                span, tag = (["new", "york", "city"] if rng.random() < 0.5 else ["paris"]), "LOC"
            else:
                span, tag = [str(rng.choice(["lives", "in", "the"]))], None
            words += span
            tags += ["O"] if tag is None else [f"B-{tag}"] + [f"I-{tag}"] * (len(span) - 1)
        X.append(
            [
                {"w": w, "prev": words[k - 1] if k else "<s>", "bias": 1.0}
                for k, w in enumerate(words)
            ]
        )
        y.append(tags)
    return X, y


@pytest.fixture(scope="module")
def fitted():
    X, y = entity_data()
    return CRFTagger(c2=0.1, all_possible_transitions=True).fit(X, y), X, y


def test_nbest_first_is_predict_and_ordered(fitted):
    tagger, X, _ = fitted
    result = tagger.predict_nbest(X[:10], n=7)
    predicted = tagger.predict(X[:10])
    for nbest, best in zip(result, predicted):
        assert nbest[0][0] == best
        log_p = [p for _, p in nbest]
        assert all(a >= b for a, b in zip(log_p, log_p[1:]))
        assert np.exp(log_p).sum() <= 1 + 1e-9
        assert len({tuple(labels) for labels, _ in nbest}) == len(nbest)


def test_nbest_exhaustive_sums_to_one(fitted):
    tagger, _, _ = fitted
    X = [[{"w": "john"}, {"w": "lives"}]]
    n_all = len(tagger.classes_) ** 2
    (nbest,) = tagger.predict_nbest(X, n=n_all + 3)
    assert len(nbest) == n_all
    np.testing.assert_allclose(sum(np.exp(p) for _, p in nbest), 1.0, rtol=1e-9)
    for labels, log_p in nbest[:5]:
        np.testing.assert_allclose(tagger.sequence_log_proba(X, [labels])[0], log_p, rtol=1e-9)


def test_nbest_argument_checks(fitted):
    tagger, X, _ = fitted
    for n in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n must be"):
            tagger.predict_nbest(X[:1], n=n)
    assert tagger.predict_nbest([[]], n=3) == [[([], 0.0)]]


def test_sequence_log_proba(fitted):
    tagger, X, y = fitted
    viterbi = tagger.sequence_log_proba(X[:8])
    nbest = tagger.predict_nbest(X[:8], n=1)
    np.testing.assert_allclose(viterbi, [b[0][1] for b in nbest], rtol=1e-12)
    given_y = tagger.sequence_log_proba(X[:8], y[:8])
    assert isinstance(given_y, np.ndarray) and given_y.shape == (8,)
    assert np.all(given_y <= viterbi + 1e-9)
    unseen = [list(seq) for seq in y[:2]]
    unseen[0][0] = "B-ORG"
    scores = tagger.sequence_log_proba(X[:2], unseen)
    assert scores[0] == -np.inf and np.isfinite(scores[1])


def test_transition_marginals(fitted):
    tagger, X, _ = fitted
    pairs = tagger.predict_transition_marginals(X[:5])
    marginals = tagger.predict_marginals(X[:5])
    classes = list(tagger.classes_)
    for p, m, x in zip(pairs, marginals, X[:5]):
        assert p.shape == (len(x) - 1, len(classes), len(classes))
        token = np.array([[row[c] for c in classes] for row in m])
        np.testing.assert_allclose(p.sum(axis=2), token[:-1], atol=1e-10)
        np.testing.assert_allclose(p.sum(axis=1), token[1:], atol=1e-10)


def _violations(labels):
    """BIO violations: an I-X that does not follow B-X or I-X."""
    bad = 0
    for prev, tag in zip(["O"] + labels[:-1], labels):
        if tag.startswith("I-") and prev[2:] != tag[2:]:
            bad += 1
    return bad


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_bio_constraints():
    # a weakly trained model makes BIO mistakes; the constraint removes them
    X, y = entity_data(seed=1, n=30)
    tagger = CRFTagger(c2=5.0, max_iterations=3, all_possible_transitions=True).fit(X, y)
    X_test = [[{"w": w} for w in words] for words in itertools.permutations(WORDS[:6], 4)]
    constrained = tagger.predict(X_test, allowed_transitions="BIO")
    assert sum(_violations(seq) for seq in constrained) == 0
    for nbest in tagger.predict_nbest(X_test[:20], n=5, allowed_transitions="IOB2"):
        assert all(_violations(labels) == 0 for labels, _ in nbest)
    marginals = tagger.predict_marginals(X_test[:20], allowed_transitions="BIO")
    assert all(m[0]["I-PER"] == 0 and m[0]["I-LOC"] == 0 for m in marginals)
    # the estimator's default is used by every method, by score, and persisted
    tagger.set_params(allowed_transitions="BIO")
    assert tagger.predict(X_test) == constrained
    assert tagger.predict_single(X_test[3]) == constrained[3]
    assert 0 <= tagger.score(X, y) <= 1


def test_default_allowed_transitions_is_saved(tmp_path, fitted):
    tagger, X, _ = fitted
    tagger = CRFTagger(c2=0.1, allowed_transitions="BIO").fit(*entity_data(n=20))
    tagger.save(tmp_path / "m.npz")
    loaded = CRFTagger.load(tmp_path / "m.npz")
    assert loaded.allowed_transitions == "BIO"
    assert loaded.predict(X[:5]) == tagger.predict(X[:5])


def test_allowed_pairs_and_errors(fitted):
    tagger, X, _ = fitted
    pairs = [(a, b) for a in tagger.classes_ for b in tagger.classes_ if b != "I-LOC"]
    pairs.append(("B-LOC", "I-LOC"))
    for seq in tagger.predict(X, allowed_transitions=pairs):
        for a, b in zip(seq, seq[1:]):
            assert b != "I-LOC" or a == "B-LOC"
    with pytest.raises(ValueError, match="not one of the model's labels"):
        tagger.predict(X[:1], allowed_transitions=[("B-XYZ", "O")])
    with pytest.raises(ValueError, match="Unknown tagging scheme"):
        tagger.predict(X[:1], allowed_transitions="BILOU2")
    with pytest.raises(ValueError, match="Unknown tagging scheme"):
        CRFTagger(allowed_transitions="XYZ").fit(*entity_data(n=5))


def test_partial_labels(fitted):
    tagger, X, _ = fitted
    free = tagger.predict(X[:6])
    partial = [None] * 6
    partial[2] = [None] * len(X[2])
    partial[2][0] = "O"
    partial[3] = [{"B-LOC", "O"}] + [None] * (len(X[3]) - 1)
    result = tagger.predict(X[:6], partial_labels=partial)
    assert result[2][0] == "O" and result[3][0] in {"B-LOC", "O"}
    assert result[0] == free[0]
    marginals = tagger.predict_marginals(X[:6], partial_labels=partial)
    assert marginals[2][0]["O"] == pytest.approx(1.0)
    assert marginals[3][0]["B-PER"] == 0.0
    single = tagger.predict_single(X[2], partial_labels=partial[2])
    assert single == result[2]
    assert tagger.predict_marginals_single(X[2], partial_labels=partial[2]) == marginals[2]
    with pytest.raises(ValueError, match=r"partial_labels\[2\]\[0\]"):
        tagger.predict(
            X[:6],
            partial_labels=[None, None, ["B-XYZ"] + [None] * (len(X[2]) - 1), None, None, None],
        )
    with pytest.raises(ValueError, match=r"partial_labels\[1\] has"):
        tagger.predict(X[:2], partial_labels=[None, ["O"]])


def test_no_valid_labelling_names_the_sequence(fitted):
    tagger, X, _ = fitted
    partial = [None, ["I-PER"] + [None] * (len(X[1]) - 1)]
    with pytest.raises(ValueError, match="sequence 1"):
        tagger.predict(X[:2], partial_labels=partial, allowed_transitions="BIO")
    partial = [None, [None] * len(X[1])]
    if len(X[1]) >= 2:
        partial[1][0], partial[1][1] = "O", "I-PER"
        with pytest.raises(ValueError, match=r"X\[1\]"):
            tagger.predict(X[:2], partial_labels=partial, allowed_transitions="BIO")


def test_missing_labels_training():
    X, y = entity_data(seed=3, n=60)
    full = CRFTagger(c2=0.1).fit(X, y)
    # missing_label set but nothing missing: exactly the usual fit
    same = CRFTagger(c2=0.1, missing_label="?").fit(X, y)
    np.testing.assert_array_equal(same.coef_.toarray(), full.coef_.toarray())
    rng = np.random.default_rng(0)
    hidden = [[tag if rng.random() > 0.5 else "?" for tag in seq] for seq in y]
    hidden[0] = [{"B-PER", "B-LOC"} if t.startswith("B") else t for t in y[0]]
    partial = CRFTagger(c2=0.1, missing_label="?").fit(X, hidden)
    assert set(partial.classes_) <= set(full.classes_)
    assert partial.score(X, y) > 0.8
    with pytest.raises(ValueError, match="only 'lbfgs'"):
        CRFTagger(algorithm="ap", missing_label="?").fit(X, hidden)


@pytest.mark.parametrize("missing_label", ["?", 0, -1, ("no", "label")])
@pytest.mark.parametrize("algorithm", ["lbfgs", "l2sgd", "ap"])
def test_every_label_missing_is_an_error_at_fit(missing_label, algorithm):
    # zero classes: the fit used to succeed and predict to fail on an index
    X, y = entity_data(seed=4, n=8)
    hidden = [[missing_label] * len(seq) for seq in y]
    tagger = CRFTagger(algorithm=algorithm, missing_label=missing_label)
    with pytest.raises(ValueError, match=r"every label of y \(\d+ tokens\) is missing_label"):
        tagger.fit(X, hidden)
    assert not hasattr(tagger, "classes_")
    # on a warm start the previous classes exist, but nothing is learned from them
    tagger.set_params(algorithm="lbfgs", warm_start=True)
    tagger.fit(X, y)
    before = tagger.coef_.toarray()
    with pytest.raises(ValueError, match="every label of y"):
        tagger.fit(X, hidden)
    np.testing.assert_array_equal(tagger.coef_.toarray(), before)
    # partial_fit, with classes given
    with pytest.raises(ValueError, match="every label of y"):
        CRFTagger(algorithm="ap", missing_label=tagger.missing_label).partial_fit(
            X, hidden, classes=["O", "B-PER"]
        )


def test_sets_of_every_label_and_missing_labels_only_are_an_error_at_fit():
    X, y = entity_data(seed=4, n=8)
    everything = {"O", "B-PER"}
    unknown = [[everything if k % 2 else "?" for k in range(len(seq))] for seq in y]
    with pytest.raises(ValueError, match="constrain nothing"):
        CRFTagger(missing_label="?").fit(X, unknown)
    # one set that excludes a label is something to learn from
    unknown[0][0] = {"O"}
    tagger = CRFTagger(missing_label="?").fit(X, unknown)
    assert tagger.classes_.tolist() == ["B-PER", "O"]
    assert len(tagger.predict(X)) == len(X)


# ---------------------------------------------------------------- properties


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6), min_size=1, max_size=4),
    st.integers(1, 6),
    st.booleans(),
)
def test_properties(fitted, sentences, n, constrained):
    tagger, _, _ = fitted
    X = [[{"w": w, "prev": s[k - 1] if k else "<s>"} for k, w in enumerate(s)] for s in sentences]
    scheme = "BIO" if constrained else None
    predicted = tagger.predict(X, allowed_transitions=scheme)
    nbest = tagger.predict_nbest(X, n=n, allowed_transitions=scheme)
    confidence = tagger.sequence_log_proba(X, allowed_transitions=scheme)
    for best, listed, conf in zip(predicted, nbest, confidence):
        assert listed[0][0] == best
        log_p = [p for _, p in listed]
        assert all(a >= b for a, b in zip(log_p, log_p[1:]))
        assert conf == pytest.approx(log_p[0], abs=1e-9)
        if constrained:
            assert all(_violations(labels) == 0 for labels, _ in listed)
    # the Viterbi path is the most probable labelling
    others = tagger.sequence_log_proba(X, [["O"] * len(x) for x in X], allowed_transitions=scheme)
    assert np.all(others <= confidence + 1e-9)
