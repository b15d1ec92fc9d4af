"""Tests for skcrf.metrics."""

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm
from sklearn.base import BaseEstimator, clone
from sklearn.exceptions import UndefinedMetricWarning
from sklearn.model_selection import (
    GridSearchCV,
    KFold,
    cross_val_score,
    cross_validate,
)

from skcrf import metrics
from skcrf.metrics import (
    SCORERS,
    _extract_chunks,
    _flatten,
    entity_classification_report,
    entity_f1_score,
    entity_precision_score,
    entity_recall_score,
    flat_accuracy_score,
    flat_classification_report,
    flat_f1_score,
    flat_fbeta_score,
    flat_precision_score,
    flat_recall_score,
    get_scorer,
    get_scorer_names,
    scorers,
    sequence_accuracy_score,
)


def random_sequences(rng, labels, n_seqs=20, max_len=8, noise=0.3):
    """A random (y_true, y_pred) pair of lists of sequences."""
    y_true, y_pred = [], []
    for _ in range(n_seqs):
        n = int(rng.integers(1, max_len + 1))
        seq = [labels[i] for i in rng.integers(0, len(labels), n)]
        pred = [
            labels[int(rng.integers(0, len(labels)))] if rng.random() < noise else t for t in seq
        ]
        y_true.append(seq)
        y_pred.append(pred)
    return y_true, y_pred


def flat(y):
    return [label for seq in y for label in seq]


# ---------------------------------------------------------------------------
# flat metrics
# ---------------------------------------------------------------------------

LABEL_SETS = {
    "str": ["B-PER", "I-PER", "B-LOC", "I-LOC", "O"],
    "int": [0, 1, 2, 3],
}


@pytest.mark.parametrize("kind", sorted(LABEL_SETS))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_flat_metrics_equal_sklearn_on_flattened(kind, seed):
    labels = LABEL_SETS[kind]
    y_true, y_pred = random_sequences(np.random.default_rng(seed), labels)
    ft, fp = flat(y_true), flat(y_pred)

    assert flat_accuracy_score(y_true, y_pred) == skm.accuracy_score(ft, fp)
    assert flat_accuracy_score(y_true, y_pred, normalize=False) == (
        skm.accuracy_score(ft, fp, normalize=False)
    )
    for average in ["micro", "macro", "weighted"]:
        kw = dict(average=average, zero_division=0)
        assert flat_precision_score(y_true, y_pred, **kw) == (skm.precision_score(ft, fp, **kw))
        assert flat_recall_score(y_true, y_pred, **kw) == (skm.recall_score(ft, fp, **kw))
        assert flat_f1_score(y_true, y_pred, **kw) == skm.f1_score(ft, fp, **kw)
        assert flat_fbeta_score(y_true, y_pred, 0.5, **kw) == (
            skm.fbeta_score(ft, fp, beta=0.5, **kw)
        )
        assert flat_fbeta_score(y_true, y_pred, beta=2, **kw) == (
            skm.fbeta_score(ft, fp, beta=2, **kw)
        )
    subset = labels[:2]
    np.testing.assert_array_equal(
        flat_f1_score(y_true, y_pred, average=None, labels=subset),
        skm.f1_score(ft, fp, average=None, labels=subset),
    )
    assert flat_classification_report(y_true, y_pred, subset) == (
        skm.classification_report(ft, fp, labels=subset)
    )
    assert flat_classification_report(
        y_true, y_pred, output_dict=True, digits=3
    ) == skm.classification_report(ft, fp, output_dict=True, digits=3)


def test_flat_metrics_accept_tuples_arrays_and_numpy_labels():
    y_true = [("a", "b"), np.array(["a", "c", "c"])]
    y_pred = [["a", "a"], np.array(["a", "c", "b"])]
    assert flat_accuracy_score(y_true, y_pred) == pytest.approx(3 / 5)
    assert _flatten(y_true, y_pred) == (
        ["a", "b", "a", "c", "c"],
        ["a", "a", "a", "c", "b"],
    )
    # a 2-D array is a list of equal-length sequences
    y2d = np.array([[1, 2], [2, 2]])
    assert flat_accuracy_score(y2d, [[1, 2], [2, 1]]) == 0.75
    # any iterable of sequences is read once, as by the estimator; a
    # generator as one sequence is still rejected
    assert flat_accuracy_score((s for s in [[1], [2]]), iter([[1], [3]])) == 0.5
    with pytest.raises(TypeError, match=r"y_pred\[1\] must be .*generator"):
        flat_accuracy_score([[1], [2]], [[1], (s for s in [3])])
    assert flat_accuracy_score(list(s for s in [[1], [2]]), [[1], [3]]) == 0.5


def test_flat_metrics_match_sklearn_crfsuite():
    crfsuite_metrics = pytest.importorskip("sklearn_crfsuite.metrics")
    y_true, y_pred = random_sequences(np.random.default_rng(5), LABEL_SETS["str"], n_seqs=10)
    assert flat_accuracy_score(y_true, y_pred) == (
        crfsuite_metrics.flat_accuracy_score(y_true, y_pred)
    )
    assert flat_f1_score(y_true, y_pred, average="macro") == (
        crfsuite_metrics.flat_f1_score(y_true, y_pred, average="macro")
    )
    assert flat_fbeta_score(y_true, y_pred, 2, average="micro") == (
        crfsuite_metrics.flat_fbeta_score(y_true, y_pred, 2, average="micro")
    )
    assert flat_classification_report(y_true, y_pred, ["B-PER", "O"]) == (
        crfsuite_metrics.flat_classification_report(y_true, y_pred, ["B-PER", "O"])
    )


# ---------------------------------------------------------------------------
# input validation
# ---------------------------------------------------------------------------

ALL_METRICS = [
    flat_accuracy_score,
    lambda t, p: flat_f1_score(t, p, average="macro"),
    lambda t, p: flat_fbeta_score(t, p, 1.0, average="macro"),
    flat_classification_report,
    sequence_accuracy_score,
    entity_f1_score,
    entity_precision_score,
    entity_recall_score,
    entity_classification_report,
]


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_sequence_length_mismatch_names_index_and_lengths(metric):
    y_true = [["O"], ["O", "B-PER"], ["O", "O", "O"]]
    y_pred = [["O"], ["O", "B-PER"], ["O", "O"]]
    with pytest.raises(ValueError, match=r"y_true\[2\] has length 3 but y_pred\[2\] has length 2"):
        metric(y_true, y_pred)


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_number_of_sequences_mismatch(metric):
    with pytest.raises(ValueError, match="same number of sequences; got 2 and 1"):
        metric([["O"], ["O"]], [["O"]])


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_flat_list_of_labels_is_rejected(metric):
    with pytest.raises(TypeError, match=r"y_true\[0\] is a string.*flat list"):
        metric(["B-PER", "O"], [["B-PER"], ["O"]])
    with pytest.raises(TypeError, match=r"y_pred\[0\] is a single label.*flat"):
        metric([["O"], ["O"]], [0, 1])
    with pytest.raises(TypeError, match=r"y_pred\[1\] is a single label"):
        metric([["O"], ["O"]], [["O"], np.int64(1)])
    with pytest.raises(TypeError, match=r"y_true\[0\] is a string"):
        metric(np.array(["O", "O"]), [["O"], ["O"]])


@pytest.mark.parametrize("metric", ALL_METRICS)
def test_plain_string_is_rejected(metric):
    with pytest.raises(TypeError, match="got str"):
        metric("B-PER O", [["B-PER", "O"]])
    with pytest.raises(TypeError, match="got int"):
        metric([["O"]], 3)


def test_other_bad_sequences():
    with pytest.raises(TypeError, match="unordered"):
        flat_accuracy_score([{"a", "b"}], [["a", "b"]])
    with pytest.raises(ValueError, match=r"y_true\[0\] is a 2-D array"):
        flat_accuracy_score([np.zeros((2, 2))], [[0, 0]])
    # the estimator's label rules: hashable, not NaN, named at their place
    with pytest.raises(TypeError, match=r"y_pred\[1\]\[0\].*not hashable"):
        flat_accuracy_score([["a"], ["b"]], [["a"], [["b"]]])
    with pytest.raises(ValueError, match=r"y_true\[0\]\[1\].*NaN"):
        flat_accuracy_score([[1.0, float("nan")]], [[1.0, 2.0]])
    with pytest.raises(TypeError, match=r"y_true must be .*set"):
        flat_accuracy_score({("a",)}, [["a"]])


# ---------------------------------------------------------------------------
# sequence accuracy
# ---------------------------------------------------------------------------


def test_sequence_accuracy_varying_lengths():
    y_true = [["a", "b", "c"], ["a"], ["b", "b"], []]
    y_pred = [["a", "b", "c"], ["b"], ["b", "b"], []]
    assert sequence_accuracy_score(y_true, y_pred) == 0.75


def test_sequence_accuracy_equal_lengths_is_a_fraction_of_sequences():
    y_true = [["a", "b"], ["a", "b"], ["c", "c"]]
    y_pred = [["a", "b"], ["a", "c"], ["c", "a"]]
    assert sequence_accuracy_score(y_true, y_pred) == pytest.approx(1 / 3)
    assert sequence_accuracy_score(np.array(y_true), np.array(y_pred)) == (pytest.approx(1 / 3))
    assert sequence_accuracy_score(y_true, y_true) == 1.0
    assert sequence_accuracy_score([[1, 2]], [[2, 1]]) == 0.0


def test_sequence_accuracy_fixes_sklearn_crfsuite_bug():
    crfsuite_metrics = pytest.importorskip("sklearn_crfsuite.metrics")
    # all sequences of length 2: sklearn-crfsuite builds a 2-D array and
    # counts matching tokens (3) instead of matching sequences (1).
    y_true = [["a", "b"], ["a", "b"]]
    y_pred = [["a", "b"], ["a", "c"]]
    assert sequence_accuracy_score(y_true, y_pred) == 0.5
    assert crfsuite_metrics.sequence_accuracy_score(y_true, y_pred) == 1.5
    # with different lengths both agree
    y_true = [["a", "b"], ["a"]]
    y_pred = [["a", "b"], ["b"]]
    assert sequence_accuracy_score(y_true, y_pred) == (
        crfsuite_metrics.sequence_accuracy_score(y_true, y_pred)
    )


def test_sequence_accuracy_empty_raises():
    with pytest.raises(ValueError, match="at least one sequence"):
        sequence_accuracy_score([], [])


# ---------------------------------------------------------------------------
# chunk extraction
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tags, expected",
    [
        ([], []),
        (["O", "O"], []),
        (["B-PER"], [("PER", 0, 1)]),
        (["O", "B-LOC", "I-LOC"], [("LOC", 1, 3)]),  # chunk at the very end
        # I- without B- starts a chunk
        (["I-PER", "I-PER", "O"], [("PER", 0, 2)]),
        (["O", "I-PER"], [("PER", 1, 2)]),
        (["B-PER", "O", "I-PER"], [("PER", 0, 1), ("PER", 2, 3)]),
        # adjacent chunks of the same type
        (["B-X", "I-X", "B-X"], [("X", 0, 2), ("X", 2, 3)]),
        (["B-X", "B-X", "B-X"], [("X", 0, 1), ("X", 1, 2), ("X", 2, 3)]),
        # IOB1: B- only separates adjacent chunks of the same type
        (["I-X", "I-X", "B-X", "I-X"], [("X", 0, 2), ("X", 2, 4)]),
        # a change of type ends a chunk and starts another
        (["B-X", "I-Y"], [("X", 0, 1), ("Y", 1, 2)]),
        (["B-X", "I-X", "I-Y", "I-Y", "O"], [("X", 0, 2), ("Y", 2, 4)]),
        # the type is everything after the first "-"
        (["B-GPE-LOC", "I-GPE-LOC"], [("GPE-LOC", 0, 2)]),
    ],
)
def test_extract_chunks_iob2(tags, expected):
    assert _extract_chunks(tags) == expected
    assert _extract_chunks(tags, scheme="BIO") == expected
    assert _extract_chunks(tuple(tags), scheme="bio") == expected


@pytest.mark.parametrize(
    "tags, expected",
    [
        (["S-PER"], [("PER", 0, 1)]),
        (["S-PER", "S-PER"], [("PER", 0, 1), ("PER", 1, 2)]),
        (["B-PER", "I-PER", "E-PER", "O", "S-LOC"], [("PER", 0, 3), ("LOC", 4, 5)]),
        (["B-LOC", "E-LOC", "B-LOC", "E-LOC"], [("LOC", 0, 2), ("LOC", 2, 4)]),
        (["E-PER"], [("PER", 0, 1)]),  # E- without B-
        (["B-PER", "E-PER", "E-PER"], [("PER", 0, 2), ("PER", 2, 3)]),
        (["B-PER", "S-PER"], [("PER", 0, 1), ("PER", 1, 2)]),
        (["S-PER", "I-PER", "E-PER"], [("PER", 0, 1), ("PER", 1, 3)]),
        (["B-PER", "E-LOC"], [("PER", 0, 1), ("LOC", 1, 2)]),
        # BIO tags are valid IOBES input
        (["B-X", "I-X", "B-X"], [("X", 0, 2), ("X", 2, 3)]),
    ],
)
def test_extract_chunks_iobes(tags, expected):
    assert _extract_chunks(tags, scheme="IOBES") == expected


@pytest.mark.parametrize(
    "tag, scheme, match",
    [
        ("PER", "IOB2", "no.*prefix|without a prefix"),
        ("B-", "IOB2", "PREFIX-TYPE"),
        ("B_PER", "IOB2", "PREFIX-TYPE"),
        ("X-PER", "IOBES", "PREFIX-TYPE"),
        ("S-PER", "IOB2", "scheme='IOBES'"),
        ("E-PER", "BIO", "scheme='IOBES'"),
        (1, "IOB2", "got 1"),
        (None, "IOB2", "got None"),
    ],
)
def test_bad_tags_raise(tag, scheme, match):
    with pytest.raises(ValueError, match=match):
        _extract_chunks(["O", tag], scheme=scheme)


def test_bad_tag_error_names_position():
    with pytest.raises(ValueError, match=r"y_pred\[1\]\[2\].*'PER'"):
        entity_f1_score([["O"], ["O", "O", "O"]], [["O"], ["O", "O", "PER"]])


@pytest.mark.parametrize("scheme", ["IOE", "BILOU", None, 2])
def test_unknown_scheme(scheme):
    with pytest.raises(ValueError, match="Unknown tagging scheme"):
        entity_f1_score([["O"]], [["O"]], scheme=scheme)


def conlleval_counts(y_true, y_pred):
    """Transliteration of conlleval's counting loop (B/I/O/E tags).

    Returns (correct chunks, chunks in y_true, chunks in y_pred). Each
    sentence is followed by a boundary token tagged O, as in conlleval.
    """

    def split(tag):
        if "-" in tag:
            prefix, chunk_type = tag.split("-", 1)
            return prefix, chunk_type
        return tag, ""

    def end_of_chunk(prev_tag, tag, prev_type, type_):
        pairs = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"),
                 ("E", "E"), ("E", "I"), ("E", "O")}  # fmt: skip
        return (prev_tag, tag) in pairs or (prev_tag not in ("O", ".") and prev_type != type_)

    def start_of_chunk(prev_tag, tag, prev_type, type_):
        pairs = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"),
                 ("E", "E"), ("E", "I"), ("O", "E")}  # fmt: skip
        return (prev_tag, tag) in pairs or (tag not in ("O", ".") and prev_type != type_)

    correct = found_true = found_pred = 0
    in_correct = False
    last_t, last_t_type, last_p, last_p_type = "O", "", "O", ""
    for seq_true, seq_pred in zip(y_true, y_pred):
        for tag_t, tag_p in list(zip(seq_true, seq_pred)) + [("O", "O")]:
            t, t_type = split(tag_t)
            p, p_type = split(tag_p)
            end_t = end_of_chunk(last_t, t, last_t_type, t_type)
            end_p = end_of_chunk(last_p, p, last_p_type, p_type)
            if in_correct:
                if end_t and end_p and last_p_type == last_t_type:
                    in_correct = False
                    correct += 1
                elif end_t != end_p or p_type != t_type:
                    in_correct = False
            start_t = start_of_chunk(last_t, t, last_t_type, t_type)
            start_p = start_of_chunk(last_p, p, last_p_type, p_type)
            if start_t and start_p and p_type == t_type:
                in_correct = True
            found_true += start_t
            found_pred += start_p
            last_t, last_t_type, last_p, last_p_type = t, t_type, p, p_type
    return correct, found_true, found_pred


BIO_TAGS = ["O", "B-X", "I-X", "B-Y", "I-Y", "B-Z-W", "I-Z-W"]
tag_seqs = st.lists(st.sampled_from(BIO_TAGS), max_size=7)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(tag_seqs, st.randoms()), max_size=5))
def test_entity_counts_match_conlleval(data):
    y_true, y_pred = [], []
    for seq, rnd in data:
        y_true.append(seq)
        y_pred.append([rnd.choice(BIO_TAGS) if rnd.random() < 0.4 else t for t in seq])
    n_correct, n_true, n_pred = conlleval_counts(y_true, y_pred)
    types, correct, pred, true = metrics._entity_counts(y_true, y_pred, "IOB2")
    assert (correct.sum(), true.sum(), pred.sum()) == (n_correct, n_true, n_pred)
    # and conlleval's overall scores are the micro averages
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        p = entity_precision_score(y_true, y_pred)
        r = entity_recall_score(y_true, y_pred)
        f = entity_f1_score(y_true, y_pred)
    assert p == (n_correct / n_pred if n_pred else 0.0)
    assert r == (n_correct / n_true if n_true else 0.0)
    expected_f = 2 * p * r / (p + r) if p + r else 0.0
    assert f == pytest.approx(expected_f)


def to_iobes(tags):
    """Re-encode the chunks of a BIO sequence in IOBES."""
    out = ["O"] * len(tags)
    for chunk_type, start, end in _extract_chunks(tags):
        if end - start == 1:
            out[start] = f"S-{chunk_type}"
        else:
            out[start] = f"B-{chunk_type}"
            out[start + 1 : end - 1] = [f"I-{chunk_type}"] * (end - start - 2)
            out[end - 1] = f"E-{chunk_type}"
    return out


@settings(max_examples=150, deadline=None)
@given(tag_seqs)
def test_iobes_encoding_gives_same_chunks(tags):
    assert _extract_chunks(to_iobes(tags), scheme="IOBES") == _extract_chunks(tags)


# ---------------------------------------------------------------------------
# entity metrics
# ---------------------------------------------------------------------------


def test_perfect_prediction_is_one():
    y = [["B-PER", "I-PER", "O", "B-LOC"], ["I-ORG", "O"], ["O"]]
    for average in ["micro", "macro", "weighted"]:
        for func in [entity_precision_score, entity_recall_score, entity_f1_score]:
            assert func(y, y, average=average) == 1.0
    y = [["S-PER", "O", "B-LOC", "I-LOC", "E-LOC"]]
    assert entity_f1_score(y, y, scheme="IOBES") == 1.0


@pytest.mark.parametrize(
    "pred",
    [
        ["B-PER", "I-PER", "I-PER", "O"],  # end one token late
        ["B-PER", "O", "O", "O"],  # end one token early
        ["O", "B-PER", "O", "O"],  # start one token late
        ["O", "I-PER", "I-PER", "O"],  # start late, same end
        ["B-LOC", "I-LOC", "O", "O"],  # right span, wrong type
    ],
)
def test_boundary_or_type_off_is_not_counted(pred):
    y_true = [["B-PER", "I-PER", "O", "O"]]
    assert entity_precision_score(y_true, [pred]) == 0.0
    assert entity_recall_score(y_true, [pred]) == 0.0
    assert entity_f1_score(y_true, [pred]) == 0.0


def test_i_without_b_and_adjacent_chunks_scores():
    # I-PER I-PER is one chunk, equal to B-PER I-PER
    assert entity_f1_score([["B-PER", "I-PER"]], [["I-PER", "I-PER"]]) == 1.0
    # B-X I-X B-X: two chunks; predicting one long chunk gets none right
    y_true = [["B-X", "I-X", "B-X"]]
    assert entity_recall_score(y_true, [["B-X", "I-X", "I-X"]]) == 0.0
    # predicting B-X B-X B-X gets the last one right: p = 1/3, r = 1/2
    assert entity_precision_score(y_true, [["B-X", "B-X", "B-X"]]) == (pytest.approx(1 / 3))
    assert entity_recall_score(y_true, [["B-X", "B-X", "B-X"]]) == 0.5
    # B-X I-Y is two chunks X(0,1) and Y(1,2)
    assert entity_f1_score([["B-X", "O"]], [["B-X", "I-Y"]]) == pytest.approx(2 / 3)
    # a chunk at the very end of a sequence
    assert entity_f1_score([["O", "B-X", "I-X"]], [["O", "B-X", "I-X"]]) == 1.0


def test_iobes_scores():
    y_true = [["S-PER", "B-LOC", "E-LOC", "O"]]
    y_pred = [["S-PER", "S-LOC", "S-LOC", "O"]]
    assert entity_precision_score(y_true, y_pred, scheme="IOBES") == 1 / 3
    assert entity_recall_score(y_true, y_pred, scheme="IOBES") == 0.5


# A hand-made case with every kind of error:
#   seq 0: PER(0,2) correct; LOC(3,4) predicted as LOC(3,5) (boundary)
#   seq 1: ORG(0,3) correct; PER(4,5) predicted as LOC(4,5) (type)
#   seq 2: no true chunk; MISC(1,2) predicted (spurious)
# true:    LOC 1, ORG 1, PER 2          -> 4
# pred:    LOC 2, MISC 1, ORG 1, PER 1  -> 5
# correct: ORG 1, PER 1                 -> 2
HAND_TRUE = [
    ["B-PER", "I-PER", "O", "B-LOC", "O"],
    ["B-ORG", "I-ORG", "I-ORG", "O", "B-PER"],
    ["O", "O", "O"],
]
HAND_PRED = [
    ["B-PER", "I-PER", "O", "B-LOC", "I-LOC"],
    ["B-ORG", "I-ORG", "I-ORG", "O", "B-LOC"],
    ["O", "B-MISC", "O"],
]
HAND_REPORT = {
    "LOC": {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 1},
    # MISC has no true chunk: recall is undefined (-> 0.0), F1 = 0 / (1 + 0)
    "MISC": {"precision": 0.0, "recall": 0.0, "f1-score": 0.0, "support": 0},
    "ORG": {"precision": 1.0, "recall": 1.0, "f1-score": 1.0, "support": 1},
    "PER": {"precision": 1.0, "recall": 0.5, "f1-score": 2 / 3, "support": 2},
    "micro avg": {"precision": 2 / 5, "recall": 2 / 4, "f1-score": 4 / 9, "support": 4},
    "macro avg": {
        "precision": (0 + 0 + 1 + 1) / 4,
        "recall": (0 + 0 + 1 + 0.5) / 4,
        "f1-score": (0 + 0 + 1 + 2 / 3) / 4,
        "support": 4,
    },
    "weighted avg": {
        "precision": (0 * 1 + 1 * 1 + 1 * 2) / 4,
        "recall": (0 * 1 + 1 * 1 + 0.5 * 2) / 4,
        "f1-score": (0 * 1 + 1 * 1 + 2 / 3 * 2) / 4,
        "support": 4,
    },
}


def assert_report_close(actual, expected):
    assert list(actual) == list(expected)
    for name, row in expected.items():
        assert list(actual[name]) == ["precision", "recall", "f1-score", "support"]
        for key, value in row.items():
            assert actual[name][key] == pytest.approx(value, nan_ok=True), (name, key)
        assert isinstance(actual[name]["support"], int)


def test_hand_made_report_dict():
    with pytest.warns(UndefinedMetricWarning, match="Recall is ill-defined"):
        report = entity_classification_report(HAND_TRUE, HAND_PRED, output_dict=True)
    assert_report_close(report, HAND_REPORT)


def test_hand_made_scores_match_report():
    kw = dict(zero_division=0)
    for average in ["micro", "macro", "weighted"]:
        row = HAND_REPORT[f"{average} avg"]
        p = entity_precision_score(HAND_TRUE, HAND_PRED, average=average, **kw)
        r = entity_recall_score(HAND_TRUE, HAND_PRED, average=average, **kw)
        f = entity_f1_score(HAND_TRUE, HAND_PRED, average=average, **kw)
        assert (p, r, f) == pytest.approx((row["precision"], row["recall"], row["f1-score"]))


def test_hand_made_report_text():
    text = entity_classification_report(HAND_TRUE, HAND_PRED, digits=3, zero_division=0)
    lines = text.splitlines()
    assert lines[0].split() == ["precision", "recall", "f1-score", "support"]
    assert lines[2].split() == ["LOC", "0.000", "0.000", "0.000", "1"]
    assert lines[5].split() == ["PER", "1.000", "0.500", "0.667", "2"]
    assert lines[7].split() == ["micro", "avg", "0.400", "0.500", "0.444", "4"]
    assert lines[8].split() == ["macro", "avg", "0.500", "0.375", "0.417", "4"]
    assert lines[9].split() == ["weighted", "avg", "0.750", "0.500", "0.583", "4"]
    # columns are right-aligned like scikit-learn's report
    assert len({len(line) for line in lines if line}) == 1


def test_zero_division_options_on_hand_made_case():
    def recall(zero_division):
        return entity_recall_score(
            HAND_TRUE, HAND_PRED, average="macro", zero_division=zero_division
        )

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert recall(0.0) == 0.375
        assert recall(1.0) == (0 + 1 + 1 + 0.5) / 4  # MISC recall -> 1
        assert recall(np.nan) == (0 + 1 + 0.5) / 3  # MISC left out
        # precision and F1 are defined for every type: no warning
        assert entity_precision_score(HAND_TRUE, HAND_PRED, average="macro") == 0.5
        entity_f1_score(HAND_TRUE, HAND_PRED, average="macro")
        entity_recall_score(HAND_TRUE, HAND_PRED)  # micro recall is defined
    with pytest.warns(UndefinedMetricWarning, match="in entity types with no true"):
        assert recall("warn") == 0.375
    report = entity_classification_report(
        HAND_TRUE, HAND_PRED, output_dict=True, zero_division=np.nan
    )
    assert math.isnan(report["MISC"]["recall"])
    assert report["macro avg"]["recall"] == 0.5


def test_no_chunks():
    y_true = [["O", "O"], ["O"]]
    y_pred_some = [["B-X", "O"], ["O"]]
    # no predicted chunk: precision undefined
    with pytest.warns(UndefinedMetricWarning, match="Precision.*no predicted"):
        assert entity_precision_score(y_pred_some, y_true) == 0.0
    assert entity_precision_score(y_pred_some, y_true, zero_division=1.0) == 1.0
    assert entity_recall_score(y_pred_some, y_true, zero_division=1.0) == 0.0
    # no true chunk: recall undefined, F1 = 0
    with pytest.warns(UndefinedMetricWarning, match="Recall.*no true entities"):
        assert entity_recall_score(y_true, y_pred_some) == 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert entity_f1_score(y_true, y_pred_some) == 0.0
    # no chunk at all: everything undefined
    for average in ["micro", "macro", "weighted"]:
        with pytest.warns(UndefinedMetricWarning, match="F1-score.*true nor pred"):
            assert entity_f1_score(y_true, y_true, average=average) == 0.0
        assert entity_f1_score(y_true, y_true, average=average, zero_division=1) == 1
        assert math.isnan(entity_f1_score(y_true, y_true, average=average, zero_division=np.nan))
    report = entity_classification_report(y_true, y_true, output_dict=True,
                                          zero_division=0)  # fmt: skip
    assert list(report) == ["micro avg", "macro avg", "weighted avg"]
    assert report["micro avg"]["support"] == 0
    # empty input
    assert entity_f1_score([], [], zero_division=0) == 0.0


@pytest.mark.parametrize("bad", [{"average": "binary"}, {"average": None},
                                 {"zero_division": 0.5}, {"zero_division": "x"},
                                 {"zero_division": True}])  # fmt: skip
def test_bad_parameters(bad):
    with pytest.raises(ValueError):
        entity_f1_score([["B-X"]], [["B-X"]], **bad)


# ---------------------------------------------------------------------------
# scorers
# ---------------------------------------------------------------------------


class MemorizingTagger(BaseEstimator):
    """Tags each token with the last label seen for it in fit."""

    def __init__(self, default="O"):
        self.default = default

    def fit(self, X, y):
        self.memory_ = {}
        for tokens, labels in zip(X, y):
            self.memory_.update(zip(tokens, labels))
        return self

    def predict(self, X):
        return [[self.memory_.get(tok, self.default) for tok in seq] for seq in X]


def make_corpus(n=30, seed=0):
    rng = np.random.default_rng(seed)
    words = {"john": "PER", "mary": "PER", "paris": "LOC", "acme": "ORG"}
    X, y = [], []
    for _ in range(n):
        tokens, tags = [], []
        for _ in range(int(rng.integers(1, 7))):
            if rng.random() < 0.4:
                word = list(words)[int(rng.integers(len(words)))]
                tokens.append(word)
                tags.append(f"B-{words[word]}")
            else:
                tokens.append(f"w{int(rng.integers(12))}")
                tags.append("O")
        # make some tokens ambiguous so the tagger is not perfect
        if rng.random() < 0.3:
            tags[0] = "I-LOC"
        X.append(tokens)
        y.append(tags)
    return X, y


def manual_cv_scores(estimator, X, y, cv, metric, **kwargs):
    scores = []
    for train, test in cv.split(X):
        est = clone(estimator).fit([X[i] for i in train], [y[i] for i in train])
        y_test = [y[i] for i in test]
        scores.append(metric(y_test, est.predict([X[i] for i in test]), **kwargs))
    return np.array(scores)


def test_cross_val_score_with_named_scorer():
    X, y = make_corpus()
    cv = KFold(3)
    est = MemorizingTagger()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        scores = cross_val_score(est, X, y, cv=cv, scoring=get_scorer("entity_f1"))
        expected = manual_cv_scores(est, X, y, cv, entity_f1_score)
    np.testing.assert_allclose(scores, expected)
    assert 0 < scores.mean() < 1


def test_cross_validate_multimetric():
    X, y = make_corpus(seed=1)
    cv = KFold(3, shuffle=True, random_state=0)
    est = MemorizingTagger()
    checks = {
        "flat_accuracy": (flat_accuracy_score, {}),
        "flat_f1_macro": (flat_f1_score, {"average": "macro"}),
        "flat_f1_weighted": (flat_f1_score, {"average": "weighted"}),
        "sequence_accuracy": (sequence_accuracy_score, {}),
        "entity_precision": (entity_precision_score, {}),
        "entity_recall_macro": (entity_recall_score, {"average": "macro"}),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        result = cross_validate(est, X, y, cv=cv, scoring=scorers(*checks))
        for name, (metric, kwargs) in checks.items():
            expected = manual_cv_scores(est, X, y, cv, metric, **kwargs)
            np.testing.assert_allclose(result[f"test_{name}"], expected, err_msg=name)


def test_grid_search_with_scorer_dict():
    X, y = make_corpus(seed=2)
    grid = GridSearchCV(
        MemorizingTagger(),
        {"default": ["O", "B-PER"]},
        scoring={"f1": get_scorer("entity_f1"), "acc": get_scorer("flat_accuracy")},
        refit="f1",
        cv=KFold(2),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        grid.fit(X, y)
    assert grid.best_params_ == {"default": "O"}
    assert grid.score(X, y) == entity_f1_score(y, grid.predict(X))


def test_scorer_on_fitted_estimator_equals_metric():
    X, y = make_corpus(seed=3)
    est = MemorizingTagger().fit(X[:20], y[:20])
    y_pred = est.predict(X[20:])
    for name, scorer in SCORERS.items():
        func, kwargs = scorer._score_func, scorer._kwargs
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            assert scorer(est, X[20:], y[20:]) == func(y[20:], y_pred, **kwargs), name


def test_scorer_registry():
    names = get_scorer_names()
    assert names == sorted(names) == sorted(SCORERS)
    expected = {
        "flat_accuracy", "flat_f1_macro", "flat_f1_micro", "flat_f1_weighted",
        "flat_precision_macro", "flat_recall_macro", "sequence_accuracy",
        "entity_f1", "entity_precision", "entity_recall",
    }  # fmt: skip
    assert expected <= set(names)
    assert get_scorer("entity_f1") is not SCORERS["entity_f1"]  # a copy
    assert list(scorers()) == names
    with pytest.raises(ValueError, match="Valid names: .*entity_f1"):
        get_scorer("f1_macro")
    with pytest.raises(ValueError, match="not a valid skcrf scoring value"):
        scorers("entity_f1", "nope")
    # non-strings go through scikit-learn
    scorer = skm.make_scorer(skm.accuracy_score)
    assert get_scorer(scorer) is scorer
    assert get_scorer(None) is None
    # scikit-learn's own registry is left alone
    assert "entity_f1" not in skm.get_scorer_names()


def test_public_names():
    for name in metrics.__all__:
        assert hasattr(metrics, name)
        if callable(getattr(metrics, name)):
            assert getattr(metrics, name).__doc__


def test_flatten_concatenates_sequences_like_sklearn_crfsuite():
    from sklearn_crfsuite.utils import flatten as reference

    y = [["B-PER", "I-PER"], [], ("O",), np.array(["x", "y"])]
    assert metrics.flatten(y) == list(reference(y)) == ["B-PER", "I-PER", "O", "x", "y"]
    assert metrics.flatten(iter([[1], [2, 3]])) == [1, 2, 3]


@pytest.mark.parametrize("bad", ["abc", ["ab", "c"], [1, 2]])
def test_flatten_rejects_what_is_not_a_list_of_sequences(bad):
    with pytest.raises(TypeError, match="list of sequences"):
        metrics.flatten(bad)


# -- the scheme names of decoding constraints -------------------------------


def test_entity_scores_accept_constraint_scheme_names():
    from skcrf.metrics import entity_f1_score

    bioul = [["U-PER", "B-LOC", "I-LOC", "L-LOC", "O"]]
    iobes = [["S-PER", "B-LOC", "I-LOC", "E-LOC", "O"]]
    assert entity_f1_score(bioul, bioul, scheme="BIOUL") == 1.0
    assert entity_f1_score(iobes, iobes, scheme="IOBES") == 1.0
    with pytest.raises(ValueError, match="scheme='IOBES'"):
        entity_f1_score(iobes, iobes, scheme="bioul")
    half = [["U-PER", "O", "O", "O", "O"]]
    assert entity_f1_score(bioul, half, scheme="BIOUL") == pytest.approx(2 / 3)
    bmes = [["B-X", "M-X", "E-X", "S-Y"]]
    assert entity_f1_score(bmes, bmes, scheme="BMES") == 1.0
    with pytest.raises(ValueError, match="scheme='BMES'"):
        entity_f1_score([["M-X"]], [["M-X"]], scheme="IOB2")
