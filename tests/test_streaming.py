"""One-pass streaming fit.

``X`` and ``y`` may be any iterable (a generator included): each sequence is
encoded as it arrives (skcrf._featurize._vocabulary.StreamEncoder through
skcrf._featurize._stream.encode_data) into the same arrays the list path builds, so the
model is the same to the last bit. Mismatched lengths and bad tokens are
errors naming the sequence, raised before anything fitted changes. Data read
more than once (X_dev, early stopping's validation split) must be a list.

The estimator-level tests need CRFTagger.fit to stream (the handoff of
.handoff/issue15_tagger.md); they are skipped until then
(``.handoff/issue15_run_patched.py`` runs them against the patched methods).
"""

import gc
import tracemalloc

import numpy as np
import pytest

from skcrf import CRFTagger
from skcrf._featurize._stream import encode_data
from skcrf._featurize._validation import check_sequences
from skcrf._featurize._vocabulary import StreamEncoder, Vocabulary
from skcrf.datasets import treebank_token_features


def _streams():
    try:
        CRFTagger(max_iterations=1).fit(iter([[{"a": 1.0}]]), iter([["A"]]))
    except TypeError:
        return False
    return True


needs_streaming_fit = pytest.mark.skipif(
    not _streams(), reason="CRFTagger.fit does not stream yet (.handoff/issue15_tagger.md)"
)


def toy_data(n=60, seed=0):
    """Mixed tokens: fast path (str / float / bool), general path (nested,
    lists, list tokens), empty sequences."""
    rng = np.random.default_rng(seed)
    words = ["the", "dog", "cat", "runs", "a", "big", "x" * 40]
    X, y = [], []
    for i in range(n):
        length = int(rng.integers(0, 7))
        seq, labels = [], []
        for j in range(length):
            w = words[int(rng.integers(len(words)))]
            kind = int(rng.integers(4))
            if kind == 0:
                token = {"w": w, "len": float(len(w)), "cap": bool(j == 0)}
            elif kind == 1:
                token = {"w": w, "n": {"p": w[:1], "v": 0.5}, "tags": ["t1", w]}
            elif kind == 2:
                token = ["bias", "w=" + w]
            else:
                token = {f"k{i % 3}": w, "bias": 1}
            seq.append(token)
            labels.append("N" if w in ("dog", "cat") else "O")
        X.append(seq)
        y.append(labels)
    return X, y


def assert_same_encoded(a, b):
    for name in ("indptr", "ids", "values", "lengths"):
        x, z = getattr(a, name), getattr(b, name)
        assert x.dtype == z.dtype, name
        np.testing.assert_array_equal(x, z, err_msg=name)


# -- the encoder -------------------------------------------------------------------


def test_stream_encoder_equals_encode():
    X, _ = toy_data()
    listed, streamed = Vocabulary(), Vocabulary()
    expected = listed.encode(check_sequences(X), grow=True)
    encoder = StreamEncoder(streamed, grow=True)
    for seq in X:
        encoder.add(seq)
    assert_same_encoded(encoder.finish(), expected)
    assert streamed.attributes == listed.attributes
    # predict time (grow=False): unseen attributes skipped, the same way
    X2, _ = toy_data(seed=1)
    X2.append([{"unseen": "zzz", "w": "dog"}])
    expected = listed.encode(X2, grow=False)
    assert_same_encoded(encode_data(streamed, iter(X2), grow=False), expected)
    assert streamed.attributes == listed.attributes


def test_encode_data_list_and_generator_agree_with_labels():
    X, y = toy_data()
    a, b = Vocabulary(), Vocabulary()
    enc_list, y_list = encode_data(a, X, y, grow=True)
    enc_gen, y_gen = encode_data(b, (s for s in X), (labels for labels in y), grow=True)
    assert_same_encoded(enc_gen, enc_list)
    assert y_gen == y_list == y
    # tuples, arrays and iterators of label sequences
    c = Vocabulary()
    _, y_tuple = encode_data(c, iter(X), iter([tuple(labels) for labels in y]), grow=True)
    assert y_tuple == y


def test_stream_encoder_grows_buffers():
    # many sequences and tokens: the doubling buffers of indptr, lengths, ids
    X = [[{"w": str(i), "b": 1.0} for _ in range(i % 9)] for i in range(3000)]
    v1, v2 = Vocabulary(), Vocabulary()
    assert_same_encoded(encode_data(v2, iter(X), grow=True), v1.encode(X, grow=True))


@pytest.mark.parametrize(
    "X, y, message",
    [
        (
            [[{"a": 1}], [{"a": 2}]],
            [["A"]],
            r"X has more sequences than y .*y ended after "
            r"1 label sequence, but X\[1\] exists",
        ),
        (
            [[{"a": 1}]],
            [["A"], ["B"]],
            r"y has more label sequences than X .*X ended after "
            r"1 sequence, but y\[1\] exists",
        ),
        (
            [[{"a": 1}], [{"a": 1}, {"a": 2}]],
            [["A"], ["A"]],
            r"y\[1\] has 1 label but X\[1\] has 2 tokens",
        ),
        ([[{"a": 1}], [{"a": None}]], [["A"], ["A"]], r"X\[1\]\[0\]: feature 'a'"),
        ([[{"a": 1}], "words"], [["A"], ["A"]], r"X\[1\] is a str"),
        ([[{"a": 1}], [{"a": 1}]], [["A"], "A"], r"y\[1\] is str"),
    ],
    ids=["X-longer", "y-longer", "label-count", "bad-token", "str-sequence", "str-labels"],
)
def test_stream_errors_name_the_sequence(X, y, message):
    vocabulary = Vocabulary(["kept"])
    with pytest.raises((ValueError, TypeError), match=message):
        encode_data(vocabulary, (s for s in X), (labels for labels in y), grow=True)
    # a failed encode leaves the vocabulary as it was
    assert vocabulary.attributes == ["kept"]


def test_stream_rejects_non_iterables_and_empty():
    for bad, fragment in [
        (None, "NoneType"),
        (5, "int"),
        ({"a": 1}, "one token"),
        ({1, 2}, "no order"),
        ("abc", "str"),
    ]:
        with pytest.raises(TypeError, match=fragment):
            encode_data(Vocabulary(), bad, grow=True)
    with pytest.raises(ValueError, match="X is empty"):
        encode_data(Vocabulary(), iter([]), grow=True)
    with pytest.raises(ValueError, match="no tokens"):
        encode_data(Vocabulary(), iter([[], []]), grow=True)


def test_stream_keeps_no_token_dicts():
    # streaming holds one sequence's dicts at a time: the traced peak stays
    # far below the list path's, which holds them all
    def sequences():
        for i in range(2000):
            words = [f"w{(i * 7 + k) % 50}" for k in range(20)]
            yield [treebank_token_features(words, j) for j in range(len(words))]

    gc.collect()
    tracemalloc.start()
    encode_data(Vocabulary(), sequences(), grow=True)
    _, stream_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    gc.collect()
    tracemalloc.start()
    X = list(sequences())
    encode_data(Vocabulary(), X, grow=True)
    _, list_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del X
    assert stream_peak < 0.5 * list_peak


# -- the estimator -----------------------------------------------------------------


@needs_streaming_fit
@pytest.mark.parametrize(
    "params",
    [
        dict(c2=0.1, max_iterations=30),
        dict(c1=0.1, c2=0.01, max_iterations=30, min_freq=2, all_possible_transitions=True),
        dict(algorithm="ap", max_iterations=5, random_state=0),
        dict(c2=0.1, max_iterations=20, n_jobs=2),
    ],
    ids=["lbfgs", "owlqn-minfreq", "ap", "threads"],
)
def test_generator_fit_is_bit_identical(params):
    X, y = toy_data(200)
    listed = CRFTagger(**params).fit(X, y)
    streamed = CRFTagger(**params).fit((s for s in X), (labels for labels in y))
    assert streamed.attributes_ == listed.attributes_
    assert streamed.classes_.tolist() == listed.classes_.tolist()
    np.testing.assert_array_equal(streamed._model.weights, listed._model.weights)
    assert streamed.n_iter_ == listed.n_iter_
    # X a generator, y a list (and the reverse)
    mixed = CRFTagger(**params).fit(iter(X), y)
    np.testing.assert_array_equal(mixed._model.weights, listed._model.weights)
    mixed = CRFTagger(**params).fit(X, iter(y))
    np.testing.assert_array_equal(mixed._model.weights, listed._model.weights)


@needs_streaming_fit
@pytest.mark.treebank
def test_treebank_generator_fit_is_bit_identical(treebank):
    train, _ = treebank
    train = train[:400]

    def features(sentence):
        words = [w for w, _ in sentence]
        return [treebank_token_features(words, i) for i in range(len(words))]

    X = [features(s) for s in train]
    y = [[t for _, t in s] for s in train]
    params = dict(c1=0.1, c2=0.1, max_iterations=25, all_possible_transitions=True)
    listed = CRFTagger(**params).fit(X, y)
    streamed = CRFTagger(**params).fit(
        (features(s) for s in train), ([t for _, t in s] for s in train)
    )
    np.testing.assert_array_equal(streamed._model.weights, listed._model.weights)
    assert streamed.attributes_ == listed.attributes_
    assert (
        streamed.training_log_.iterations[-1]["loss"]
        == (listed.training_log_.iterations[-1]["loss"])
    )


@needs_streaming_fit
@pytest.mark.parametrize(
    "X, y, message",
    [
        ([[{"a": 1}], [{"a": 2}]], [["A"]], r"X has more sequences than y"),
        ([[{"a": 1}]], [["A"], ["B"]], r"y has more label sequences than X"),
        ([[{"a": 1}], [{"a": 1}, {"a": 2}]], [["A"], ["A"]], r"y\[1\] has 1 label"),
        ([[{"a": 1}], [{"a": float("nan")}]], [["A"], ["A"]], r"X\[1\]\[0\]: feature 'a'"),
    ],
)
def test_fit_errors_leave_the_fitted_model(X, y, message):
    tagger = CRFTagger(c2=0.1, max_iterations=5).fit([[{"w": "a"}]], [["B"]])
    model, attributes = tagger._model, tagger.attributes_
    with pytest.raises(ValueError, match=message):
        tagger.fit((s for s in X), (labels for labels in y))
    assert tagger._model is model and tagger.attributes_ is attributes
    assert tagger.predict([[{"w": "a"}]]) == [["B"]]


@needs_streaming_fit
def test_predict_and_metrics_accept_iterables():
    X, y = toy_data(100)
    tagger = CRFTagger(c2=0.1, max_iterations=20).fit(X, y)
    expected = tagger.predict(X)
    predicted = tagger.predict(s for s in X)
    assert isinstance(predicted, list) and predicted == expected
    marginals = tagger.predict_marginals(iter(X))
    assert isinstance(marginals, list) and marginals == tagger.predict_marginals(X)
    assert tagger.score(iter(X), iter(y)) == tagger.score(X, y)
    np.testing.assert_array_equal(
        tagger.sequence_log_proba(iter(X), iter(y)), tagger.sequence_log_proba(X, y)
    )
    assert tagger.predict_nbest(iter(X), 2) == tagger.predict_nbest(X, 2)


@needs_streaming_fit
def test_data_read_twice_must_be_a_list():
    X, y = toy_data(50)
    with pytest.raises(
        TypeError,
        match=r"X_dev must be .*not a one-shot iterator.*"
        r"scored at every iteration.*list\(X_dev\)",
    ):
        CRFTagger(max_iterations=3).fit(X, y, X_dev=iter(X), y_dev=y)
    with pytest.raises(TypeError, match=r"y_dev must be .*one-shot"):
        CRFTagger(max_iterations=3).fit(X, y, X_dev=X, y_dev=iter(y))
    with pytest.raises(TypeError, match=r"X must be .*one-shot.*early_stopping.*list\(X\)"):
        CRFTagger(max_iterations=3, early_stopping=True).fit(iter(X), y)
    # with X_dev given, early stopping streams X
    tagger = CRFTagger(max_iterations=5, early_stopping=True).fit(
        iter(X), iter(y), X_dev=X[:10], y_dev=y[:10]
    )
    assert tagger.n_iter_ >= 1


@needs_streaming_fit
def test_partial_fit_accepts_generators():
    X, y = toy_data(80)
    a = CRFTagger(algorithm="ap", random_state=0).partial_fit(X, y, classes=["N", "O"])
    b = CRFTagger(algorithm="ap", random_state=0).partial_fit(iter(X), iter(y), classes=["N", "O"])
    np.testing.assert_array_equal(a._model.weights, b._model.weights)
