"""Property-based tests (hypothesis) of featurization, inference and CRFTagger.

- random token features (unicode keys, str/bool/int/float values, zeros,
  negatives, nested dicts, lists of str, feature-name lists) and labels (str,
  int, mixed): fit and predict never crash, predictions have the right
  lengths and known labels, marginals are finite and sum to 1;
- an invalid value anywhere is reported at its place ``X[i][j]``;
- encoding loses nothing: a token's row sums to its values, and the compiled
  encoder gives exactly the attributes (names, ids, values, order) of a plain
  Python oracle of CRFsuite's naming rules;
- Viterbi finds a path of maximum score, checked by enumerating all paths of
  small random problems in the packed layout;
- forward-backward's log Z, marginals and transition marginals equal their
  brute-force values.

The example counts keep the default run to a few seconds per property; set
SKCRF_HYPOTHESIS_SCALE (e.g. 20) to multiply them for a longer run. No
example database is written (``database=None``).
"""

import itertools
import math
import os
import warnings

import numpy as np
import pytest
from _reference import to_flat, viterbi
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy.special import logsumexp
from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger
from skcrf._featurize._labels import check_labels, encode_labels
from skcrf._featurize._validation import check_sequences
from skcrf._featurize._vocabulary import Vocabulary
from skcrf._inference._logspace import forward_backward
from skcrf._training._objective import select_features
from skcrf._utils._packing import pack

_SCALE = max(1, int(os.environ.get("SKCRF_HYPOTHESIS_SCALE", "1")))


def _settings(n):
    return settings(
        max_examples=n * _SCALE,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- strategies ----------------------------------------------------------------

# unicode text including emoji, combining marks, separators; no surrogates
text = st.text(max_size=4)
keys = st.one_of(st.sampled_from(["w", "pos", "ключ", "😀", "e\u0301", ""]), text)
scalars = st.one_of(
    text,
    st.booleans(),
    st.integers(-1000, 1000),
    st.just(0),
    st.just(0.0),
    st.just(-0.0),
    st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.lists(text, max_size=3),
)
values = st.recursive(
    scalars, lambda inner: st.dictionaries(keys, inner, max_size=3), max_leaves=6
)
dict_tokens = st.dictionaries(keys, values, max_size=4)
list_tokens = st.lists(st.sampled_from(["a", "b", "bias", "ñ", "😀"]) | text, max_size=4)
tokens = st.one_of(dict_tokens, dict_tokens, list_tokens)
sequences = st.lists(tokens, max_size=5)
label_sets = st.one_of(
    st.lists(text, min_size=1, max_size=4, unique=True),
    st.lists(st.integers(-5, 5), min_size=1, max_size=4, unique=True),
    st.lists(
        st.one_of(st.sampled_from(["B", "I", "O", "🙂"]), st.integers(0, 3)),
        min_size=1,
        max_size=4,
        unique=True,
    ),
)


@st.composite
def training_data(draw, max_sequences=5):
    X = draw(st.lists(sequences, min_size=1, max_size=max_sequences))
    assume(any(X))  # at least one token (all-empty training data is an error)
    labels = draw(label_sets)
    y = [[draw(st.sampled_from(labels)) for _ in seq] for seq in X]
    return X, y


def _n_parameters(X, y, **options):
    """Number of features the model of (X, y) would have."""
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(check_sequences(X), grow=True)
    indices, classes = encode_labels(check_labels(y, encoded.lengths))
    model, _ = select_features(encoded, indices, classes, vocabulary.attributes, **options)
    return model.n_features


def _transition_exists(tagger):
    return tagger.transition_ != 0


def _fit(X, y, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return CRFTagger(max_iterations=15, **params).fit(X, y)


def _check_predictions(tagger, X):
    predicted = tagger.predict(X)
    assert isinstance(predicted, list) and len(predicted) == len(X)
    assert [len(p) for p in predicted] == [len(seq) for seq in X]
    classes = tagger.classes_.tolist()
    for seq in predicted:
        for label in seq:
            assert label in classes
    marginals = tagger.predict_marginals(X)
    assert [len(m) for m in marginals] == [len(seq) for seq in X]
    for seq in marginals:
        for token in seq:
            assert list(token) == classes
            probabilities = np.array(list(token.values()))
            assert np.isfinite(probabilities).all()
            assert (probabilities >= 0).all()
            assert abs(probabilities.sum() - 1.0) <= 1e-9


# -- the estimator ---------------------------------------------------------------


@_settings(40)
@given(
    data=training_data(),
    X_new=st.lists(sequences, max_size=4),
    c1=st.sampled_from([0.0, 0.1]),
    c2=st.sampled_from([0.0, 0.01, 1.0]),
)
def test_fit_and_predict_never_crash(data, X_new, c1, c2):
    X, y = data
    # (a model without any feature is fitted too, see
    # test_validation.py::test_training_data_that_gives_no_features)
    tagger = _fit(X, y, c1=c1, c2=c2)
    assert tagger.n_features_ == _n_parameters(X, y)
    assert tagger.coef_.nnz + np.count_nonzero(_transition_exists(tagger)) <= tagger.n_features_
    assert np.isfinite(tagger.coef_.data).all() and np.isfinite(tagger.transition_).all()
    losses = [entry["loss"] for entry in tagger.training_log_.iterations]
    assert np.isfinite(losses).all()
    _check_predictions(tagger, X)
    _check_predictions(tagger, X_new)  # unseen features, empty sequences
    assert 0.0 <= tagger.score(X, y) <= 1.0
    for seq in X[:2]:
        assert tagger.predict_single(seq) == tagger.predict([seq])[0]


@_settings(25)
@given(data=training_data(max_sequences=4))
def test_options_never_crash(data):
    X, y = data
    options = {"all_possible_states": True, "all_possible_transitions": True, "min_freq": 0.5}
    tagger = _fit(X, y, n_jobs=2, **options)
    assert tagger.n_features_ == _n_parameters(X, y, **options)
    _check_predictions(tagger, X)


@_settings(40)
@given(labels=label_sets, data=st.data())
def test_labels_come_back_as_given(labels, data):
    # one distinct word per label: the model can learn the mapping exactly
    words = [f"w{k}" for k in range(len(labels))]
    order = data.draw(st.lists(st.integers(0, len(labels) - 1), min_size=1, max_size=8))
    X = [[{"w": words[k]} for k in order]] + [[{"w": w}] for w in words]
    y = [[labels[k] for k in order]] + [[label] for label in labels]
    tagger = _fit(X, y, c2=0.001)
    assert sorted(map(repr, tagger.classes_.tolist())) == sorted(map(repr, labels))
    predicted = tagger.predict(X)
    for seq_pred, seq_true in zip(predicted, y):
        for a, b in zip(seq_pred, seq_true):
            assert type(a) is type(b)
    if len(labels) > 1:
        assert tagger.score(X, y) == 1.0


_BAD_VALUES = [
    None,
    float("nan"),
    np.nan,
    np.float32("nan"),
    math.inf,
    -math.inf,
    (1, 2),
    object(),
    b"\xff",
    1j,
    10**400,
    {1: "x"},
    ["x", 3],
]


@_settings(60)
@given(X=st.lists(sequences, min_size=1, max_size=4), data=st.data())
def test_an_invalid_value_is_reported_where_it_is(X, data):
    places = [(i, j) for i, seq in enumerate(X) for j in range(len(seq))]
    assume(places)
    i, j = data.draw(st.sampled_from(places))
    bad = data.draw(st.sampled_from(_BAD_VALUES))
    key = data.draw(keys)
    nested = data.draw(st.booleans())
    X = [list(seq) for seq in X]
    X[i][j] = {"ok": 1.0, "n": {key: bad}} if nested else {"ok": 1.0, key: bad}
    y = [["L"] * len(seq) for seq in X]
    with pytest.raises((ValueError, TypeError), match=rf"X\[{i}\]\[{j}\]"):
        Vocabulary().encode(check_sequences(X), grow=True)
    with pytest.raises((ValueError, TypeError), match=rf"X\[{i}\]\[{j}\]"):
        CRFTagger().fit(X, y)


def _expected_row_sum(token):
    """Sum of a token's feature values: numbers as given, 1 per str and list item."""
    if isinstance(token, list):
        return float(len(token))
    total = []

    def walk(mapping):
        for value in mapping.values():
            if isinstance(value, str):
                total.append(1.0)
            elif isinstance(value, dict):
                walk(value)
            elif isinstance(value, list):
                total.extend([1.0] * len(value))
            else:
                total.append(float(value))

    walk(token)
    return math.fsum(total)


def _rows(encoded, vocabulary):
    """Each token's ``[(attribute name, value), ...]``, in stored order."""
    names = vocabulary.attributes
    return [
        [
            (names[a], v)
            for a, v in zip(encoded.ids[start:stop].tolist(), encoded.values[start:stop].tolist())
        ]
        for start, stop in zip(encoded.indptr[:-1].tolist(), encoded.indptr[1:].tolist())
    ]


@_settings(100)
@given(X=st.lists(sequences, min_size=1, max_size=4))
def test_encoding_keeps_every_value(X):
    assume(any(X))
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(check_sequences(X), grow=True)
    assert encoded.lengths.tolist() == [len(seq) for seq in X]
    assert len(encoded.indptr) - 1 == sum(encoded.lengths)
    assert np.isfinite(encoded.values).all()
    flat = [token for seq in X for token in seq]
    for token, row in zip(flat, _rows(encoded, vocabulary)):
        expected = _expected_row_sum(token)
        assert math.fsum(v for _, v in row) == pytest.approx(expected, rel=1e-9, abs=1e-6)
    # encoding again with the fitted vocabulary gives the same arrays
    again = vocabulary.encode(check_sequences(X), grow=False)
    for a, b in zip(encoded, again):
        np.testing.assert_array_equal(a, b)


# -- the compiled encoder against a plain-Python oracle --------------------------


def _oracle_pairs(token, separator):
    """CRFsuite's (python-crfsuite's) attributes of one valid token, written
    from the rules alone: ``key<sep>value`` for a str value, the key with the
    number for a number or bool, nested keys joined by ':', one ``key<sep>item``
    per str of a list, a list token's names with 1.0 each; in token order."""
    if isinstance(token, (list, tuple)):
        return [(str(name), 1.0) for name in token]
    pairs = []

    def walk(mapping, prefix):
        for key, value in mapping.items():
            name = prefix + str(key)
            if isinstance(value, str):
                pairs.append((name + separator + str(value), 1.0))
            elif isinstance(value, dict):
                walk(value, name + ":")
            elif isinstance(value, (list, set, frozenset)):
                pairs.extend((name + separator + str(item), 1.0) for item in value)
            elif isinstance(value, (bool, np.bool_)):
                pairs.append((name, 1.0 if value else 0.0))
            else:
                pairs.append((name, float(value)))

    walk(token, "")
    return pairs


def _oracle_encode(X, separator, attributes=None):
    """``(attributes, rows)``: ids in order of first appearance when learning
    (``attributes`` None), unseen names dropped when given."""
    growing = attributes is None
    attributes = [] if growing else list(attributes)
    ids = {name: k for k, name in enumerate(attributes)}
    rows = []
    for seq in X:
        for token in seq:
            row = []
            for name, value in _oracle_pairs(token, separator):
                if name not in ids:
                    if not growing:
                        continue
                    ids[name] = len(attributes)
                    attributes.append(name)
                row.append((name, value))
            rows.append(row)
    return attributes, rows


class _StrSubclass(str):
    pass


# values the compiled fast path hands to the checked path (numpy scalars, str
# subclasses, nested dicts, lists) next to those it handles itself
oracle_scalars = st.one_of(
    scalars,
    st.builds(np.float64, st.floats(-1e3, 1e3, allow_nan=False)),
    st.builds(np.int32, st.integers(-1000, 1000)),
    st.builds(np.bool_, st.booleans()),
    st.builds(_StrSubclass, text),
    st.integers(-(2**70), 2**70),  # ints past int64
    st.sampled_from(["", ":", "a:b", "=", "x=y"]),
)
oracle_keys = st.one_of(keys, st.sampled_from(["a", "a:b", "a=b", ":"]))
oracle_values = st.recursive(
    oracle_scalars,
    lambda inner: st.dictionaries(oracle_keys, inner, max_size=3),
    max_leaves=6,
)
oracle_tokens = st.one_of(
    st.dictionaries(oracle_keys, oracle_values, max_size=5),
    st.dictionaries(
        st.sampled_from(["w", "p", "a"]), st.sampled_from(["a", "b", "b:c"]), max_size=3
    ),  # few distinct keys and values: the caches are hit
    list_tokens,
    st.tuples(st.sampled_from(["a:b", "w:a", "bias"]), text),
)
oracle_sequences = st.lists(st.lists(oracle_tokens, max_size=6), min_size=1, max_size=5)


@_settings(150)
@given(X=oracle_sequences, X_new=oracle_sequences, separator=st.sampled_from([":", "="]))
def test_compiled_encoder_equals_a_plain_python_oracle(X, X_new, separator):
    assume(any(X))
    vocabulary = Vocabulary(value_separator=separator)
    encoded = vocabulary.encode(check_sequences(X), grow=True)
    attributes, rows = _oracle_encode(X, separator)
    assert vocabulary.attributes == attributes
    assert _rows(encoded, vocabulary) == rows
    assert encoded.lengths.tolist() == [len(seq) for seq in X]
    # predicting: unseen attributes are skipped, the vocabulary does not grow;
    # the same with a vocabulary rebuilt from the names (a loaded model)
    for known in (vocabulary, Vocabulary(attributes, value_separator=separator)):
        for data in (X_new, X, X_new + X):
            predicted = known.encode(check_sequences(data), grow=False)
            assert _rows(predicted, known) == _oracle_encode(data, separator, attributes)[1]
        assert known.attributes == attributes
    # growing further adds the new names after the old ones
    more = vocabulary.encode(check_sequences(X_new + X), grow=True)
    attributes_more, rows_more = _oracle_encode(X_new + X, separator, None)
    assert vocabulary.attributes == attributes + [
        name for name in attributes_more if name not in set(attributes)
    ]
    assert _rows(more, vocabulary) == rows_more


# -- inference kernels against brute force ---------------------------------------

moderate_scores = st.one_of(
    st.floats(-5, 5, allow_nan=False),
    st.floats(-50, 50, allow_nan=False),
    st.integers(-2, 2).map(float),  # ties
)
# beyond exp's range: the rescaling and log-domain fallbacks
extreme_scores = st.one_of(moderate_scores, st.floats(-800, 800, allow_nan=False))


@st.composite
def packed_problems(draw, scores=extreme_scores, max_labels=4, max_length=5, max_sequences=4):
    n_labels = draw(st.integers(1, max_labels))
    lengths = draw(st.lists(st.integers(0, max_length), min_size=1, max_size=max_sequences))
    n_tokens = sum(lengths)
    flat = np.array(
        draw(st.lists(scores, min_size=n_tokens * n_labels, max_size=n_tokens * n_labels)),
        dtype=float,
    ).reshape(n_tokens, n_labels)
    transitions = np.array(
        draw(st.lists(scores, min_size=n_labels**2, max_size=n_labels**2)), dtype=float
    ).reshape(n_labels, n_labels)
    return lengths, flat, transitions


def _path_scores(emissions, transitions):
    """Score of every labelling of one sequence, in itertools.product order."""
    length, n_labels = emissions.shape
    paths = list(itertools.product(range(n_labels), repeat=length))
    totals = []
    for path in paths:
        terms = [emissions[t, path[t]] for t in range(length)]
        terms += [transitions[path[t - 1], path[t]] for t in range(1, length)]
        totals.append(math.fsum(terms))
    return paths, np.array(totals)


def _sequences_of(lengths, flat):
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    return [flat[starts[k] : starts[k + 1]] for k in range(len(lengths))]


@_settings(150)
@given(problem=packed_problems())
def test_viterbi_finds_a_best_path(problem):
    lengths, flat, transitions = problem
    layout = pack(lengths)
    path, best_score = viterbi(flat[layout.flat_index], transitions, layout.batch_sizes)
    flat_path = to_flat(layout, path)
    assert len(flat_path) == sum(lengths)
    per_sequence = _sequences_of(lengths, flat_path)
    best_by_sequence = {}
    for k, (emissions, labels) in enumerate(zip(_sequences_of(lengths, flat), per_sequence)):
        if lengths[k] == 0:
            continue
        _, totals = _path_scores(emissions, transitions)
        best = totals.max()
        chosen = math.fsum(
            [emissions[t, labels[t]] for t in range(lengths[k])]
            + [transitions[labels[t - 1], labels[t]] for t in range(1, lengths[k])]
        )
        tolerance = 1e-9 * max(1.0, abs(best), np.abs(emissions).max(), np.abs(transitions).max())
        assert chosen >= best - tolerance
        best_by_sequence[k] = best
    # best_score is in packed order: position p is sequence layout.order[p]
    assert len(best_score) == len(best_by_sequence)
    for p, score in enumerate(best_score):
        best = best_by_sequence[int(layout.order[p])]
        assert score == pytest.approx(best, rel=1e-9, abs=1e-9)


@_settings(150)
@given(problem=packed_problems(scores=moderate_scores))
def test_forward_backward_matches_brute_force(problem):
    _check_forward_backward(*problem)


@_settings(150)
@given(problem=packed_problems(scores=extreme_scores))
def test_forward_backward_matches_brute_force_for_extreme_scores(problem):
    _check_forward_backward(*problem)


def _two_label_case(emission):
    flat = np.zeros((9, 2))
    flat[2, 1] = emission
    return [4, 5], flat, np.array([[0.0, 0.0], [581.0, 0.0]])


def _four_label_case():
    flat = np.array([[0, 0, 377.0, 0], [0, 0, 335.0, 0], [0, 0, 0, 0]])
    transitions = np.zeros((4, 4))
    transitions[3, 3] = 710.0
    return [2, 1], flat, transitions


@pytest.mark.parametrize(
    "problem",
    [_two_label_case(-329.0), _two_label_case(-288.0), _four_label_case()],
    ids=["spread-581+329", "spread-581+288", "spread-710+377"],
)
def test_forward_backward_wide_score_spreads(problem):
    """Cases hypothesis found (log Z 582.8 instead of 833, inf marginals)."""
    _check_forward_backward(*problem)


def _check_forward_backward(lengths, flat, transitions):
    layout = pack(lengths)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow or invalid-value warnings
        result = forward_backward(flat[layout.flat_index], transitions, layout.batch_sizes)
    marginals = to_flat(layout, result.marginals)
    assert np.isfinite(result.log_partition).all()
    assert np.isfinite(marginals).all() and np.isfinite(result.transition_marginals).all()
    n_labels = transitions.shape[0]
    expected_pairs = np.zeros((n_labels, n_labels))
    log_z_by_sequence = {}
    for k, (emissions, seq_marginals) in enumerate(
        zip(_sequences_of(lengths, flat), _sequences_of(lengths, marginals))
    ):
        if lengths[k] == 0:
            continue
        paths, totals = _path_scores(emissions, transitions)
        log_z = logsumexp(totals)
        log_z_by_sequence[k] = log_z
        probabilities = np.exp(totals - log_z)
        expected = np.zeros_like(emissions)
        for path, probability in zip(paths, probabilities):
            expected[np.arange(len(path)), path] += probability
            for t in range(1, len(path)):
                expected_pairs[path[t - 1], path[t]] += probability
        np.testing.assert_allclose(seq_marginals, expected, rtol=0, atol=1e-9)
        np.testing.assert_allclose(seq_marginals.sum(axis=1), 1.0, rtol=0, atol=1e-9)
    np.testing.assert_allclose(result.transition_marginals, expected_pairs, rtol=0, atol=1e-8)
    assert len(result.log_partition) == len(log_z_by_sequence)
    for p, log_z in enumerate(result.log_partition):
        expected = log_z_by_sequence[int(layout.order[p])]
        assert log_z == pytest.approx(expected, rel=1e-10, abs=1e-9)
