"""Input validation: every public entry point names what is wrong and where.

Each bad input must raise ValueError or TypeError whose message names the
problem and its place (``X[i][j]``, the feature key, ``y[i]``), from every
entry point that takes the input: fit, predict, predict_marginals, score,
predict_single and predict_marginals_single. Allowed inputs that look odd
(empty sequences, unseen features, unicode, labels of any hashable type) must
simply work.

Decisions documented here (see also skcrf/_validation.py):

- Generators and other one-shot iterators are rejected (for X, y and each
  sequence) with a message saying to pass ``list(...)``: a consumed generator
  would otherwise give silently empty predictions. Tuples, numpy arrays and
  other sized, indexable containers are accepted.
- NaN labels are rejected; labels equal under ``==`` (1, 1.0, True) are one
  label, as in a dict.
"""

import math
import re
import warnings
from decimal import Decimal

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger
from skcrf._featurize._labels import check_labels, encode_labels
from skcrf._featurize._validation import MAX_NESTING, check_sequences, token_attributes
from skcrf._featurize._vocabulary import Vocabulary

X_TOY = [
    [{"w": "the"}, {"w": "dog"}, {"w": "barks"}],
    [{"w": "a"}, {"w": "cat"}],
    [{"w": "the"}, {"w": "cat"}, {"w": "sleeps"}],
]
Y_TOY = [["D", "N", "V"], ["D", "N"], ["D", "N", "V"]]

ERRORS = (ValueError, TypeError)


@pytest.fixture(scope="module")
def tagger():
    return CRFTagger(c2=0.1).fit(X_TOY, Y_TOY)


def _quiet_fit(estimator, X, y, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return estimator.fit(X, y, **kwargs)


def _row_sums(tokens, separator=":"):
    """``{attribute: summed value}`` of each token, through the compiled encoder."""
    vocabulary = Vocabulary(value_separator=separator)
    encoded = vocabulary.encode([list(tokens)], grow=True)
    rows = []
    for start, stop in zip(encoded.indptr[:-1], encoded.indptr[1:]):
        row = {}
        for k in range(start, stop):
            name = vocabulary.attributes[encoded.ids[k]]
            row[name] = row.get(name, 0.0) + float(encoded.values[k])
        rows.append(row)
    return rows


def assert_same_coef(a, b):
    """Sparse coef_ with the same stored entries (features) and weights."""
    assert a.shape == b.shape
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data, b.data)


def _loc(*parts):
    """Regex for a literal fragment of a message."""
    return ".*".join(re.escape(part) for part in parts)


# -- bad tokens and feature values, through every entry point ---------------

_self_referencing = {}
_self_referencing["a"] = _self_referencing
_deep = {"leaf": 1.0}
for _ in range(MAX_NESTING + 5):
    _deep = {"k": _deep}

# (id, bad token, exception, fragments that must appear after "X[1][1]")
BAD_TOKENS = [
    ("token-int", 5, TypeError, ["dict of features or a list of feature names", "int"]),
    ("token-None", None, TypeError, ["NoneType"]),
    ("token-float", 3.5, TypeError, ["float"]),
    ("token-str", "dog", TypeError, ["str", "'dog'", "[sequence]", "predict_single"]),
    ("token-set-of-ints", {1, 2}, TypeError, ["int"]),
    ("token-bytes", b"dog", TypeError, ["bytes"]),
    ("token-object", object(), TypeError, ["object"]),
    ("value-None", {"w": None}, TypeError, ["'w'", "NoneType", "omit its key"]),
    ("value-nan", {"w": float("nan")}, ValueError, ["'w'", "nan", "finite"]),
    ("value-np-nan", {"w": np.nan}, ValueError, ["'w'", "nan", "finite"]),
    ("value-float32-nan", {"w": np.float32("nan")}, ValueError, ["'w'", "nan", "finite"]),
    ("value-float16-inf", {"w": np.float16("inf")}, ValueError, ["'w'", "inf", "finite"]),
    ("value-inf", {"w": float("inf")}, ValueError, ["'w'", "inf", "finite"]),
    ("value-neg-inf", {"w": -math.inf}, ValueError, ["'w'", "-inf", "finite"]),
    ("value-np-inf", {"w": np.float64("-inf")}, ValueError, ["'w'", "inf", "finite"]),
    ("value-huge-int", {"w": 10**400}, ValueError, ["'w'", "too large"]),
    (
        "value-huge-int-slow-path",
        {"w": 10**400, "x": np.float64(1)},
        ValueError,
        ["'w'", "too large"],
    ),
    ("value-tuple", {"w": (1, 2)}, TypeError, ["'w'", "tuple"]),
    ("value-object", {"w": object()}, TypeError, ["'w'", "object"]),
    ("value-bad-utf8", {"w": b"\xff"}, ValueError, ["'w'", "not valid UTF-8"]),
    ("value-complex", {"w": 1j}, TypeError, ["'w'", "complex"]),
    ("value-decimal", {"w": Decimal("1.5")}, TypeError, ["'w'", "Decimal"]),
    ("value-ndarray", {"w": np.array(["a", "b"])}, TypeError, ["'w'", "ndarray"]),
    ("nested-nan", {"n": {"m": {"x": float("nan")}}}, ValueError, ["'n:m:x'", "finite"]),
    ("key-int", {1: "x"}, TypeError, ["keys must be str", "int 1"]),
    ("key-None", {None: 1.0}, TypeError, ["keys must be str", "NoneType None"]),
    ("key-tuple", {("a", "b"): 1.0}, TypeError, ["keys must be str", "tuple"]),
    ("key-bad-utf8", {b"\xff": 1.0}, ValueError, ["feature key", "not valid UTF-8"]),
    ("key-nested-int", {"n": {2: 1.0}}, TypeError, ["keys must be str", "int 2", "'n'"]),
    ("list-value-int", {"l": ["x", 1]}, TypeError, ["'l'", "list holding int 1", "only str"]),
    ("list-value-None", {"l": ["x", None]}, TypeError, ["'l'", "NoneType"]),
    ("set-value-float", {"l": {"x", 2.5}}, TypeError, ["'l'", "set holding float"]),
    ("list-token-int", ["a", 1], TypeError, ["feature names (str)", "int 1"]),
    ("list-token-None", ["a", None], TypeError, ["NoneType"]),
    ("list-token-dicts", [{"w": "a"}], TypeError, ["nested one level too deep"]),
    ("self-referencing", _self_referencing, ValueError, ["'a:a:a", "contain itself"]),
    ("too-deep", _deep, ValueError, ["'k:k:k", f"more than {MAX_NESTING}"]),
]


def _with_bad_token(bad):
    """X with the bad token at X[1][1]; y to match."""
    X = [[{"w": "the"}], [{"w": "a"}, bad, {"w": "cat"}]]
    y = [["D"], ["D", "N", "N"]]
    return X, y


@pytest.mark.parametrize(
    "bad, exc, fragments", [case[1:] for case in BAD_TOKENS], ids=[case[0] for case in BAD_TOKENS]
)
def test_bad_token_is_named_by_every_entry_point(tagger, bad, exc, fragments):
    X, y = _with_bad_token(bad)
    where = _loc("X[1][1]", *fragments)
    with pytest.raises(exc, match=where):
        CRFTagger().fit(X, y)
    with pytest.raises(exc, match=where):
        tagger.predict(X)
    with pytest.raises(exc, match=where):
        tagger.predict_marginals(X)
    with pytest.raises(exc, match=where):
        tagger.score(X, y)
    # predict_single sees one sequence; the token is its element 1 (a token
    # that is a list of dicts is caught by predict_single's own check)
    if isinstance(bad, list) and isinstance(bad[0], dict):
        fragments = ["sequence"]
    with pytest.raises(exc, match=_loc("[1]", *fragments)):
        tagger.predict_single(X[1])
    with pytest.raises(exc, match=_loc("[1]", *fragments)):
        tagger.predict_marginals_single(X[1])
    # as dev data, with the dev name
    with pytest.raises(exc, match=_loc("X_dev[1][1]", *fragments)):
        CRFTagger().fit(X_TOY, Y_TOY, X_dev=X, y_dev=y)


def test_bad_value_is_found_in_a_later_token_of_a_long_input(tagger):
    X = [[{"w": str(k)} for k in range(50)] for _ in range(20)]
    X[13][41] = {"w": "x", "v": float("nan")}
    with pytest.raises(ValueError, match=_loc("X[13][41]", "'v'")):
        tagger.predict(X)


# -- shapes of X and y ----------------------------------------------------------


def test_x_and_y_of_different_lengths(tagger):
    with pytest.raises(ValueError, match="X has 3 sequences but y has 2 label sequences"):
        CRFTagger().fit(X_TOY, Y_TOY[:2])
    with pytest.raises(ValueError, match="X has 3 sequences but y has 4"):
        CRFTagger().fit(X_TOY, Y_TOY + [["D"]])
    with pytest.raises(ValueError, match="X has 3 sequences but y has 2"):
        tagger.score(X_TOY, Y_TOY[:2])
    with pytest.raises(ValueError, match="X_dev has 3 sequences but y_dev has 1"):
        CRFTagger().fit(X_TOY, Y_TOY, X_dev=X_TOY, y_dev=Y_TOY[:1])


def test_sequence_and_labels_of_different_lengths(tagger):
    y = [Y_TOY[0], ["D"], Y_TOY[2]]
    with pytest.raises(ValueError, match=_loc("y[1] has 1 label but X[1] has 2 tokens")):
        CRFTagger().fit(X_TOY, y)
    with pytest.raises(ValueError, match=_loc("y[1] has 1 label but X[1] has 2 tokens")):
        tagger.score(X_TOY, y)
    y = [Y_TOY[0], Y_TOY[1], Y_TOY[2] + ["V"]]
    with pytest.raises(ValueError, match=_loc("y[2] has 4 labels but X[2] has 3 tokens")):
        CRFTagger().fit(X_TOY, y)
    with pytest.raises(ValueError, match=_loc("y_dev[0] has 2 labels but X_dev[0] has 3")):
        CRFTagger().fit(X_TOY, Y_TOY, X_dev=X_TOY[:1], y_dev=[["D", "N"]])


def test_empty_training_data():
    with pytest.raises(ValueError, match="X is empty"):
        CRFTagger().fit([], [])
    with pytest.raises(ValueError, match="all 2 sequences are empty"):
        CRFTagger().fit([[], []], [[], []])
    with pytest.raises(ValueError, match="X is empty"):
        CRFTagger().fit((), ())
    with pytest.raises(ValueError, match="X is empty"):
        CRFTagger().fit(np.empty(0, dtype=object), [])


def test_y_as_a_flat_list_of_labels(tagger):
    flat = [label for seq in Y_TOY for label in seq]
    for y in (flat, flat[:3], ["D", "N", "V"], [0, 1, 2], np.array(["D", "N", "V"])):
        with pytest.raises(TypeError, match=_loc("y[0] is", "flat list of labels")):
            CRFTagger().fit(X_TOY, y)
        with pytest.raises(TypeError, match=_loc("y[0] is", "flat list of labels")):
            tagger.score(X_TOY, y)
    # a single flat label sequence for a single sequence
    with pytest.raises(TypeError, match="flat list of labels"):
        CRFTagger().fit([X_TOY[0]], Y_TOY[0])
    # a later label sequence that is not a list
    with pytest.raises(TypeError, match=_loc("y[2] is str 'DNV'")):
        CRFTagger().fit(X_TOY, [Y_TOY[0], Y_TOY[1], "DNV"])


def test_bad_y_containers():
    for y, fragment in [
        (None, "got NoneType"),
        ("DNV", "got str"),
        ({"a": 1}, "got dict"),
        ({("D",)}, "got set"),
    ]:
        with pytest.raises(TypeError, match=_loc("y must be a list of label sequences", fragment)):
            CRFTagger().fit(X_TOY, y)
    with pytest.raises(TypeError, match=_loc("y[1]", "list(...)")):
        CRFTagger().fit(X_TOY, [Y_TOY[0], iter(Y_TOY[1]), Y_TOY[2]])
    with pytest.raises(TypeError, match=_loc("y[1] is NoneType")):
        CRFTagger().fit(X_TOY, [Y_TOY[0], None, Y_TOY[2]])


def test_unhashable_and_nan_labels_are_named():
    y = [Y_TOY[0], ["D", ["N"]], Y_TOY[2]]
    with pytest.raises(TypeError, match=_loc("y[1][1]", "['N']", "not hashable")):
        CRFTagger().fit(X_TOY, y)
    for nan in (float("nan"), np.nan, np.float32("nan")):
        y = [Y_TOY[0], ["D", "N"], ["D", nan, "V"]]
        with pytest.raises(ValueError, match=_loc("y[2][1]", "NaN")):
            CRFTagger().fit(X_TOY, y)
    with pytest.raises(TypeError, match=_loc("y_dev[0][0]", "not hashable")):
        CRFTagger().fit(X_TOY, Y_TOY, X_dev=X_TOY[:1], y_dev=[[{}, "N", "V"]])


@pytest.mark.parametrize("method", ["predict", "predict_marginals"])
def test_single_sequence_where_a_list_is_expected(tagger, method):
    predict = getattr(tagger, method)
    # dict tokens: X[0] is a dict
    with pytest.raises(TypeError, match=_loc("X[0] is a dict", "predict_single")):
        predict(X_TOY[0])
    # list-of-strings tokens: X[0][0] is a str
    as_lists = [["w=the", "bias"], ["w=dog", "bias"]]
    with pytest.raises(TypeError, match=_loc("X[0][0] is a str", "[sequence]", "predict_single")):
        predict(as_lists)


def test_single_sequence_given_to_fit_and_score(tagger):
    with pytest.raises(TypeError, match=_loc("X[0] is a dict", "pass [sequence]")):
        CRFTagger().fit(X_TOY[0], Y_TOY[0])
    with pytest.raises(TypeError, match=_loc("X[0][0] is a str", "[sequence]")):
        CRFTagger().fit([["a", "b"], ["c"]], ["D", "N"])
    with pytest.raises(TypeError, match=_loc("X[0] is a dict", "[sequence]")):
        tagger.score(X_TOY[0], Y_TOY[0])


def test_list_of_sequences_where_one_sequence_is_expected(tagger):
    for method in (tagger.predict_single, tagger.predict_marginals_single):
        with pytest.raises(TypeError, match="predict"):
            method(X_TOY)
        as_lists = [[["w=the"], ["w=dog"]], [["w=a"]]]
        with pytest.raises(TypeError, match="nested one level too deep"):
            method(as_lists)
        with pytest.raises(TypeError, match="str"):
            method("the dog")


@pytest.mark.parametrize(
    "X, fragments",
    [
        ("the dog barks", ["X must be a list of sequences", "got str"]),
        (b"bytes", ["X must be a list of sequences", "got bytes"]),
        (None, ["X must be a list of sequences", "got NoneType"]),
        (42, ["X must be a list of sequences", "got int"]),
        ({"w": "the"}, ["X must be a list of sequences", "got dict", "one token"]),
        (np.array(3.0), ["X must be a list of sequences", "0-dimensional"]),
        (["the", "dog"], ["X[0] is a str", "raw words", "features"]),
        ([X_TOY[0], None], ["X[1] must be a sequence", "NoneType"]),
        ([X_TOY[0], 7], ["X[1] must be a sequence", "int"]),
        ([X_TOY[0], (t for t in X_TOY[1])], ["X[1]", "generator", "list(...)"]),
        ([X_TOY[0], {frozenset("a")}], ["X[1]", "set"]),
    ],
    ids=[
        "str",
        "bytes",
        "None",
        "int",
        "dict",
        "0d-array",
        "list-of-str",
        "None-sequence",
        "int-sequence",
        "generator-sequence",
        "set-sequence",
    ],
)
def test_bad_containers_through_every_entry_point(tagger, X, fragments):
    where = _loc(*fragments)
    # a fresh generator per call
    make = (lambda: (s for s in X_TOY)) if "generator" in str(type(X)) else (lambda: X)
    with pytest.raises(TypeError, match=where):
        CRFTagger().fit(make(), Y_TOY)
    with pytest.raises(TypeError, match=where):
        tagger.predict(make())
    with pytest.raises(TypeError, match=where):
        tagger.predict_marginals(make())
    with pytest.raises(TypeError, match=where):
        tagger.score(make(), Y_TOY)


def test_one_shot_iterators_are_read_once(tagger):
    assert tagger.predict(s for s in X_TOY) == tagger.predict(X_TOY)
    assert tagger.score(iter(X_TOY), iter(Y_TOY)) == tagger.score(X_TOY, Y_TOY)


def test_predict_single_rejects_non_sequences(tagger):
    for xseq in ("the dog", b"x", {"w": "a"}, (t for t in X_TOY[0])):
        with pytest.raises(TypeError):
            tagger.predict_single(xseq)
        with pytest.raises(TypeError):
            tagger.predict_marginals_single(xseq)


@pytest.mark.parametrize("xseq", [None, 5])
def test_predict_single_names_xseq_for_non_iterables(tagger, xseq):
    with pytest.raises(TypeError, match="xseq must be one sequence"):
        tagger.predict_single(xseq)


def test_score_rejects_only_empty_sequences(tagger):
    with pytest.raises(ValueError, match="at least one token"):
        tagger.score([], [])
    with pytest.raises(ValueError, match="at least one token"):
        tagger.score([[], []], [[], []])


# -- parameters -----------------------------------------------------------------


@pytest.mark.parametrize(
    "param, value, fragment",
    [
        ("c1", -0.1, "must be a float in the range [0.0, inf)"),
        ("c1", np.nan, "range [0.0, inf)"),
        ("c1", "0.1", "range [0.0, inf)"),
        ("c2", -1, "must be a float in the range [0.0, inf)"),
        ("c2", np.inf, "range [0.0, inf)"),
        ("c2", "1", "range [0.0, inf) or None"),
        ("epsilon", -1e-5, "must be a float in the range [0.0, inf)"),
        ("delta", -1e-5, "must be a float in the range [0.0, inf)"),
        ("delta", "small", "range [0.0, inf)"),
        ("num_memories", 0, "must be an int in the range [1, inf)"),
        ("num_memories", 2.5, "range [1, inf)"),
        ("num_memories", True, "must be an integer >= 1"),
        ("linesearch", "Bogus", "must be a str among"),
        ("linesearch", "morethuente", "MoreThuente"),
        ("linesearch", 1, "StrongBacktracking"),
        ("max_iterations", -1, "must be an int in the range [0, inf) or None"),
        ("max_iterations", 10.5, "range [0, inf) or None"),
        ("max_iterations", True, "must be an integer >= 0"),
        ("max_linesearch", 0, "must be an int in the range [1, inf)"),
        ("max_linesearch", 20.0, "range [1, inf)"),
        ("period", -1, "must be an int in the range [0, inf)"),
        ("period", "10", "range [0, inf)"),
        ("n_jobs", 1.5, "must be an instance of 'int' or None"),
        ("n_jobs", "2", "'int' or None"),
        ("min_freq", np.nan, "must be a float in the range (-inf, inf)"),
        ("min_freq", "1", "(-inf, inf)"),
        ("all_possible_states", "yes", "must be an instance of 'bool'"),
        ("all_possible_transitions", 1, "must be an instance of 'bool'"),
        ("verbose", -1, "must be an int in the range [0, inf)"),
    ],
)
def test_invalid_parameters_name_the_valid_range(param, value, fragment):
    # "The 'c1' parameter of CRFTagger must be a float in the range [0.0, inf).
    # Got -0.1 instead." (scikit-learn's InvalidParameterError); bools that
    # pass scikit-learn's int check are caught by the optimizer's own check
    with pytest.raises(ValueError, match=_loc(param, fragment)):
        CRFTagger(**{param: value}).fit(X_TOY, Y_TOY)


def test_none_means_the_algorithms_default():
    # sklearn_crfsuite.CRF's convention: every training parameter defaults to
    # None, CRFsuite's default for the algorithm (c2=1, MoreThuente, ...)
    default = CRFTagger().fit(X_TOY, Y_TOY)
    explicit = CRFTagger(
        algorithm="lbfgs",
        min_freq=0.0,
        all_possible_states=False,
        all_possible_transitions=False,
        c1=0.0,
        c2=1.0,
        max_iterations=None,
        num_memories=6,
        epsilon=1e-5,
        period=10,
        delta=1e-5,
        linesearch="MoreThuente",
        max_linesearch=20,
    ).fit(X_TOY, Y_TOY)
    assert_same_coef(default.coef_, explicit.coef_)
    np.testing.assert_array_equal(default.transition_, explicit.transition_)
    assert default.n_iter_ == explicit.n_iter_
    other = CRFTagger(c2=0.5).fit(X_TOY, Y_TOY)
    assert not np.array_equal(other.coef_.data, default.coef_.data)


def test_parameter_errors_are_both_value_and_type_errors():
    # scikit-learn's InvalidParameterError subclasses ValueError and TypeError
    for params in ({"c2": -1}, {"n_jobs": "2"}):
        with pytest.raises(ValueError) as info:
            CRFTagger(**params).fit(X_TOY, Y_TOY)
        assert isinstance(info.value, TypeError)
        assert type(info.value).__name__ == "InvalidParameterError"
    # parameters are checked before the data
    with pytest.raises(ValueError, match="'c2' parameter"):
        CRFTagger(c2=-1).fit(None, None)


@pytest.mark.parametrize(
    "params",
    [
        {"c1": 0, "c2": 0},
        {"c1": np.float32(0.1), "c2": np.int64(1)},
        {"num_memories": np.int64(1), "max_linesearch": 1},
        {"max_iterations": 0},
        {"max_iterations": None},
        {"period": 0, "delta": 0.0, "epsilon": 0.0, "max_iterations": 5},
        {"n_jobs": -1},
        {"n_jobs": 2},
        {"n_jobs": None},
        {"linesearch": "StrongBacktracking", "verbose": 0},
        {"min_freq": -1.0},
    ],
)
def test_valid_edge_parameters_are_accepted(params):
    tagger = _quiet_fit(CRFTagger(**params), X_TOY, Y_TOY)
    assert np.isfinite(tagger.coef_.data).all()
    assert len(tagger.predict(X_TOY)) == len(X_TOY)


# -- allowed inputs that must work ---------------------------------------------


def test_empty_sequences_and_empty_inputs_at_predict_time(tagger):
    assert tagger.predict([]) == []
    assert tagger.predict_marginals([]) == []
    assert tagger.predict([[]]) == [[]]
    assert tagger.predict_marginals([[], []]) == [[], []]
    assert tagger.predict([[], X_TOY[1], []]) == [[], ["D", "N"], []]
    assert tagger.predict_single([]) == []
    assert tagger.predict_marginals_single([]) == []
    assert tagger.predict(()) == []
    assert tagger.score([[], X_TOY[1]], [[], ["D", "N"]]) == 1.0


def test_empty_sequences_among_training_data():
    tagger = CRFTagger(c2=0.1).fit([[]] + X_TOY + [[]], [[]] + Y_TOY + [[]])
    assert tagger.predict(X_TOY) == Y_TOY


def test_unseen_features_and_labels_at_predict_time(tagger):
    X = [[{"never": "seen", "w": "dog"}, {"unknown": 3.0}, ["brand-new", "w:cat"], {}]]
    predicted = tagger.predict(X)
    assert len(predicted[0]) == 4 and set(predicted[0]) <= {"D", "N", "V"}
    # a label never seen in training just counts as wrong
    assert tagger.score(X_TOY[:1], [["D", "N", "UNSEEN"]]) == pytest.approx(2 / 3)


def test_single_label_in_training():
    tagger = CRFTagger().fit([[{"w": "x"}, {"w": "y"}], [{"w": "z"}]], [["L", "L"], ["L"]])
    assert tagger.classes_.tolist() == ["L"]
    assert tagger.predict([[{"w": "q"}], []]) == [["L"], []]
    marginals = tagger.predict_marginals([[{"w": "x"}, {"w": "q"}]])
    assert marginals == [[{"L": 1.0}, {"L": 1.0}]]
    assert tagger.score(X_TOY, [["L"] * len(seq) for seq in X_TOY]) == 1.0


def test_unicode_everywhere():
    X = [
        [{"wörd": "naïve", "😀": "🎉"}, {"e\u0301": "cafe\u0301", "ключ": ["да", "нет"]}],
        [{"汉字": {"子": "字"}}, ["\u05e9\u05dc\u05d5\u05dd", "\u0000nul", "a=b:c"]],
    ]
    y = [["名詞", "😀"], ["e\u0301", "ñ"]]
    tagger = CRFTagger(c2=0.01).fit(X, y)
    assert tagger.predict(X) == y
    names = set(tagger.vectorizer_.feature_names_)
    assert {
        "wörd:naïve",
        "😀:🎉",
        "e\u0301:cafe\u0301",
        "ключ:да",
        "ключ:нет",
        "汉字:子:字",
        "\u05e9\u05dc\u05d5\u05dd",
        "\u0000nul",
        "a=b:c",
    } == names
    # composed and decomposed forms are different strings: no silent
    # normalization, so the composed one is an unseen feature
    assert "e\u0301:caf\u00e9" not in names
    composed = [[{"e\u0301": "caf\u00e9"}]]
    assert tagger.predict_marginals(composed) == tagger.predict_marginals([[{}]])


@pytest.mark.parametrize(
    "labels",
    [
        [0, 1, 2],
        ["D", "N", "V"],
        [("B", "PER"), ("I", "PER"), ("O",)],
        [np.int64(0), np.int64(1), np.int64(2)],
        [False, True, None],
        [frozenset("d"), frozenset("n"), frozenset("v")],
        ["D", 1, ("v",)],
        [-1.5, 0.0, 2.25],
    ],
    ids=["int", "str", "tuple", "np.int64", "bool-None", "frozenset", "mixed", "float"],
)
def test_labels_of_any_hashable_type_are_returned_as_given(labels):
    y = [[labels[k] for k in range(len(seq))] for seq in X_TOY]
    tagger = CRFTagger(c2=0.01).fit(X_TOY, y)
    predicted = tagger.predict(X_TOY)
    assert predicted == y
    for seq_pred, seq_true in zip(predicted, y):
        for a, b in zip(seq_pred, seq_true):
            assert type(a) is type(b)
    marginals = tagger.predict_marginals(X_TOY[:1])
    assert set(marginals[0][0]) == set(labels)
    assert tagger.score(X_TOY, y) == 1.0


@pytest.mark.parametrize(
    "first, second, kinds",
    [(1, True, "int.*bool"), (1, 1.0, "int.*float"), (np.int64(2), 2.0, "int64.*float")],
)
def test_labels_equal_but_not_the_same_are_an_error(first, second, kinds):
    # Python's == would merge them into one class: a silent wrong answer
    y = [[first, "b", "c"], [second, "b"], ["a", "b", "c"]]
    with pytest.raises(ValueError, match=f"equal in Python but not the same.*{kinds}|{kinds}"):
        CRFTagger(c2=0.01).fit(X_TOY, y)


# Two kinds only, each label its own class in Python: the labels (1, True)
# merge into one key before any type is looked at.
EQUAL_NOT_SAME = [
    (1, True),
    (0, False),
    (1, 1.0),
    (True, 1.0),
    (np.int64(2), 2.0),
    (np.bool_(True), 1),
    (Decimal(1), 1),
    ((1, "a"), (True, "a")),
    (frozenset({0}), frozenset({False})),
]
EQUAL_NOT_SAME_IDS = [
    "int-bool",
    "0-False",
    "int-float",
    "bool-float",
    "np.int64-float",
    "np.bool_-int",
    "Decimal-int",
    "tuple",
    "frozenset",
]


@pytest.mark.parametrize("first, second", EQUAL_NOT_SAME, ids=EQUAL_NOT_SAME_IDS)
@pytest.mark.parametrize("algorithm", ["lbfgs", "ap"])
def test_fit_rejects_two_labels_equal_but_not_the_same_as_only_labels(first, second, algorithm):
    y = [[first, first, second], [second, first], [first, second, second]]
    with pytest.raises(
        ValueError,
        match=r"y\[0\]\[2\]: the labels .* at y\[0\]\[0\] and .* "
        "equal in Python but not the same",
    ):
        CRFTagger(algorithm=algorithm).fit(X_TOY, y)


@pytest.mark.parametrize("first, second", EQUAL_NOT_SAME, ids=EQUAL_NOT_SAME_IDS)
def test_partial_fit_rejects_labels_equal_to_classes_but_not_the_same(first, second):
    y = [[first, first, second], [first, first], [first, first, first]]
    tagger = CRFTagger(algorithm="ap")
    # the labels against the classes
    with pytest.raises(ValueError, match=r"y\[0\]\[2\]: the label .* of partial_fit's classes"):
        tagger.partial_fit(X_TOY, y, classes=[first, "z"])
    # the classes among themselves
    with pytest.raises(ValueError, match="classes: the labels .* at index 0 and .* at index 1"):
        tagger.partial_fit(X_TOY, [[first] * 3, [first] * 2, [first] * 3], classes=[first, second])
    assert not hasattr(tagger, "classes_")
    # a later call: its labels and its classes against the first call's
    tagger.partial_fit(X_TOY, [[first] * 3, [first] * 2, [first] * 3], classes=[first, "z"])
    before = tagger.coef_.toarray()
    with pytest.raises(ValueError, match=r"y\[0\]\[2\]: the label .* of partial_fit's classes"):
        tagger.partial_fit(X_TOY, y)
    with pytest.raises(ValueError, match="differs from classes_"):
        tagger.partial_fit(X_TOY, [[first] * 3, [first] * 2, [first] * 3], classes=[second, "z"])
    np.testing.assert_array_equal(tagger.coef_.toarray(), before)
    assert tagger.classes_.tolist() == [first, "z"]
    assert type(tagger.classes_[0]) is type(first)


@pytest.mark.parametrize("first, second", EQUAL_NOT_SAME, ids=EQUAL_NOT_SAME_IDS)
@pytest.mark.parametrize("missing_label", [None, "?"])
def test_warm_start_rejects_labels_equal_to_previous_classes_but_not_the_same(
    first, second, missing_label
):
    tagger = CRFTagger(c2=0.01, warm_start=True, missing_label=missing_label)
    tagger.fit(X_TOY, [[first, "b", "b"], ["b", first], [first, "b", first]])
    classes = tagger.classes_.tolist()
    y = [["b", "b", "b"], ["b", second], ["b", "b", "b"]]
    with pytest.raises(
        ValueError,
        match=r"y\[1\]\[1\]: the label .* of classes_ \(of the model "
        r"warm_start continues\)",
    ):
        tagger.fit(X_TOY, y)
    assert tagger.classes_.tolist() == classes
    assert [type(c) for c in tagger.classes_] == [type(c) for c in classes]


def test_warm_start_rejects_a_mix_of_labels_equal_to_previous_classes():
    # fit with [1, 2], then warm-start with [True, 2.0]: every new label has a
    # twin among the classes, and the two kinds alone would merge silently
    tagger = CRFTagger(c2=0.01, warm_start=True)
    tagger.fit(X_TOY, [[1, 2, 2], [1, 2], [1, 2, 1]])
    with pytest.raises(ValueError, match=r"y\[0\]\[0\]: the label True \(bool\) and the label 1 "):
        tagger.fit(X_TOY, [[True, 2.0, 2.0], [True, 2.0], [True, 2.0, True]])
    assert tagger.classes_.tolist() == [1, 2]
    assert [type(c) for c in tagger.classes_] == [int, int]


def test_labels_equal_to_the_model_labels_but_not_the_same_are_an_error_everywhere():
    y = [[1, 2, 2], [1, 2], [1, 2, 1]]
    twin = [[True, 2, 2], [1, 2], [1, 2, 1]]
    tagger = CRFTagger(c2=0.01).fit(X_TOY, y)
    match = r"y\[0\]\[0\]: the label True \(bool\) and the label 1 \(int\) of classes_"
    with pytest.raises(ValueError, match=match):
        tagger.score(X_TOY, twin)
    with pytest.raises(ValueError, match=match):
        tagger.sequence_log_proba(X_TOY, twin)
    with pytest.raises(ValueError, match=r"y_dev\[0\]\[0\]: the label True \(bool\)"):
        CRFTagger(c2=0.01).fit(X_TOY, y, X_TOY, twin)
    with pytest.raises(ValueError, match=r"partial_labels\[0\]\[0\]: the label True \(bool\)"):
        tagger.predict(X_TOY, partial_labels=[[True, None, None], None, None])
    with pytest.raises(ValueError, match=r"partial_labels\[0\]\[1\]: the label 2.0 \(float\)"):
        tagger.predict(X_TOY, partial_labels=[[None, {1, 2.0}, None], None, None])
    with pytest.raises(ValueError, match=r"allowed_transitions: .* True \(bool\), which is equal"):
        tagger.predict(X_TOY, allowed_transitions=[(True, 2)])
    # missing_label=0 and a label False: unknown or a label? Not silently unknown
    with pytest.raises(
        ValueError,
        match=r"y\[0\]\[0\]: the label False \(bool\) is equal in Python to missing_label=0",
    ):
        CRFTagger(c2=0.01, missing_label=0).fit(X_TOY, [[False, 2, 2], [1, 2], [1, 2, 1]])
    # a fuzzy label's members are labels too
    with pytest.raises(ValueError, match="equal in Python but not the same"):
        CRFTagger(c2=0.01, missing_label=-1).fit(X_TOY, [[{True, 2}, 2, 2], [1, 2], [1, 2, 1]])


def test_labels_of_one_kind_in_different_types_are_one_label():
    # np.str_ and str (or np.int64 and int) are the same label, not a conflict
    y = [[np.str_("A"), "B", "C"], ["A", np.str_("B")], ["A", "B", "C"]]
    tagger = CRFTagger(c2=0.01).fit(X_TOY, y)
    assert tagger.classes_.tolist() == ["A", "B", "C"]
    y_int = [[np.int64(1), 2, 3], [1, np.int32(2)], [1, 2, 3]]
    assert CRFTagger(c2=0.01).fit(X_TOY, y_int).classes_.tolist() == [1, 2, 3]


def test_empty_dict_tokens_and_feature_lists_with_duplicates():
    X = [[{}, {"a": 1.0}], [{}, {}]]
    tagger = CRFTagger().fit(X, [["E", "A"], ["E", "E"]])
    assert tagger.predict([[{}, {}]]) == [["E", "E"]]
    # duplicates in a feature-name list add up: ["a", "a", "b"] == {"a": 2, "b": 1}
    as_lists = [[["a", "a", "b"], ["b"]], [["a"], ["b", "b", "b"]]]
    as_dicts = [[{"a": 2.0, "b": 1.0}, {"b": 1.0}], [{"a": 1.0}, {"b": 3.0}]]
    y = [["X", "Y"], ["X", "Y"]]
    from_lists, from_dicts = CRFTagger().fit(as_lists, y), CRFTagger().fit(as_dicts, y)
    # the same features; the weights equal up to rounding: a repeated name is
    # stored once per occurrence (Encoded), so its value is summed in another order
    assert from_lists.attributes_ == from_dicts.attributes_
    np.testing.assert_array_equal(from_lists.coef_.indptr, from_dicts.coef_.indptr)
    np.testing.assert_array_equal(from_lists.coef_.indices, from_dicts.coef_.indices)
    np.testing.assert_allclose(from_lists.coef_.data, from_dicts.coef_.data, rtol=1e-12)
    np.testing.assert_allclose(from_lists.transition_, from_dicts.transition_, rtol=1e-12)
    # a repeated name is listed each time; the values add up where they are used
    assert token_attributes(("a", "b", "a"), 0, 0) == [("a", 1.0), ("b", 1.0), ("a", 1.0)]
    assert _row_sums([("a", "b", "a")]) == [{"a": 2.0, "b": 1.0}]


def test_nested_dicts_zeros_negatives_bools_and_numpy_scalars():
    X = [
        [{"n": {"a": 1, "b": {"c": "x", "d": -2.5}}, "z": 0, "f": False, "t": True}],
        [{"n": {"a": np.int32(-3)}, "g": np.float32(0.5), "h": np.bool_(True)}],
    ]
    tagger = CRFTagger(c2=0.1).fit(X, [["A"], ["B"]])
    names = set(tagger.vectorizer_.feature_names_)
    assert {"n:a", "n:b:c:x", "n:b:d", "z", "f", "t", "g", "h"} == names
    assert tagger.predict(X) == [["A"], ["B"]]
    assert token_attributes({"n": {"a": 1, "b": {"c": "x"}}}, 0, 0) == [
        ("n:a", 1.0),
        ("n:b:c:x", 1.0),
    ]
    # the same attribute from two routes (a nested key, a key:value string)
    # is one attribute, and its values add up
    assert token_attributes({"n:a": 1.0, "n": {"a": 2.0}}, 0, 0) == [("n:a", 1.0), ("n:a", 2.0)]
    assert _row_sums([{"n:a": 1.0, "n": {"a": 2.0}}, {"k:v": 1, "k": "v"}]) == [
        {"n:a": 3.0},
        {"k:v": 2.0},
    ]
    nested = {"a": 1.0}
    for _ in range(MAX_NESTING - 1):
        nested = {"k": nested}
    assert [value for _, value in token_attributes(nested, 0, 0)] == [1.0]


def test_containers_other_than_lists(tagger):
    as_tuples = tuple(tuple(seq) for seq in X_TOY)
    assert tagger.predict(as_tuples) == Y_TOY
    ragged = np.empty(len(X_TOY), dtype=object)
    ragged[:] = X_TOY
    assert tagger.predict(ragged) == Y_TOY
    assert tagger.score(as_tuples, tuple(tuple(seq) for seq in Y_TOY)) == 1.0
    y_arrays = np.empty(len(Y_TOY), dtype=object)
    y_arrays[:] = [np.array(seq, dtype=object) for seq in Y_TOY]
    tagger2 = CRFTagger(c2=0.1).fit(as_tuples, y_arrays)
    assert tagger2.attributes_ == tagger.attributes_
    assert_same_coef(tagger2.coef_, tagger.coef_)


# -- the helpers directly --------------------------------------------------------


def test_helpers_keep_their_contracts():
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(check_sequences(X_TOY), grow=True)
    assert encoded.indptr.dtype == np.int64 and encoded.indptr.tolist() == list(range(9))
    assert encoded.ids.dtype == np.int32 and encoded.values.dtype == np.float64
    assert vocabulary.attributes == ["w:the", "w:dog", "w:barks", "w:a", "w:cat", "w:sleeps"]
    assert encoded.ids.tolist() == [0, 1, 2, 3, 4, 0, 4, 5]
    lengths = encoded.lengths
    assert lengths.tolist() == [3, 2, 3]
    assert check_sequences(X_TOY) == X_TOY
    labels = check_labels(Y_TOY, lengths)
    assert labels == [label for seq in Y_TOY for label in seq]
    indices, classes = encode_labels(labels)
    assert classes.tolist() == ["D", "N", "V"]
    assert indices.tolist() == [0, 1, 2, 0, 1, 0, 1, 2]
    indices, _ = encode_labels(["N", "X"], classes)
    assert indices.tolist() == [1, -1]
    # predicting: empty sequences, and unseen attributes skipped (no growth)
    empty = vocabulary.encode([[], []], grow=False)
    assert empty.indptr.tolist() == [0] and empty.lengths.tolist() == [0, 0]
    unseen = vocabulary.encode([[{"w": "dog", "new": 1.0}]], grow=False)
    assert unseen.ids.tolist() == [1] and len(vocabulary) == 6
    with pytest.raises(ValueError, match="X has no tokens"):
        Vocabulary().encode([[], []], grow=True)


def test_plain_dict_fast_path_equals_the_checked_path():
    # Plain dicts take the encoder's compiled path; any other mapping (and a
    # numpy scalar value) takes the checked path, token_attributes.
    from types import MappingProxyType

    token = {"w": "x", "b": True, "i": 3, "f": -1.5, "z": False}
    vocabulary = Vocabulary()
    fast = vocabulary.encode([[token]], grow=True)
    checked = vocabulary.encode([[MappingProxyType(token)]], grow=False)
    for a, b in zip(fast, checked):
        np.testing.assert_array_equal(a, b)
    assert vocabulary.attributes == ["w:x", "b", "i", "f", "z"]
    assert fast.values.tolist() == [1.0, 1.0, 3.0, -1.5, 0.0]
    assert token_attributes(MappingProxyType(token), 0, 0) == [
        ("w:x", 1.0),
        ("b", 1.0),
        ("i", 3.0),
        ("f", -1.5),
        ("z", 0.0),
    ]
    assert token_attributes({"f": np.float64(2.0)}, 0, 0) == [("f", 2.0)]
    assert _row_sums([{"f": np.float64(2.0), "g": np.int8(-3), "h": np.bool_(False)}]) == [
        {"f": 2.0, "g": -3.0, "h": 0.0}
    ]


def test_error_messages_stay_short_for_huge_values(tagger):
    huge = "x" * 100_000
    with pytest.raises(TypeError) as info:
        tagger.predict([[{"w": [huge, 1]}]])
    assert len(str(info.value)) < 400
    with pytest.raises(TypeError) as info:
        tagger.predict([[{"w": list(range(100_000))}]])
    assert len(str(info.value)) < 400


@pytest.mark.parametrize(
    "X, y",
    [
        ([[{}]], [["A"]]),  # empty tokens, one-token sequences
        ([[{}], [[]]], [["A"], ["B"]]),
        ([[{"x": -1.0}]], [["A"]]),  # the only feature sums below min_freq=0
    ],
)
def test_training_data_that_gives_no_features(X, y):
    tagger = CRFTagger().fit(X, y)
    assert tagger.n_features_ == 0 and tagger.n_iter_ == 0
    assert len(tagger.predict([[{}, {"x": 1.0}]])[0]) == 2
    marginals = tagger.predict_marginals([[{}]])[0][0]
    assert sum(marginals.values()) == pytest.approx(1.0)


def test_bytes_values_are_utf8_text_as_in_python_crfsuite():
    as_bytes = [[{"w": b"the", "солнце".encode(): "не светит".encode()}, [b"n"]]]
    as_text = [[{"w": "the", "солнце": "не светит"}, ["n"]]]
    y = [["D", "N"]]
    a, b = CRFTagger().fit(as_bytes, y), CRFTagger().fit(as_text, y)
    assert a.attributes_ == b.attributes_ == ["w:the", "солнце:не светит", "n"]
    assert a.predict(as_text) == b.predict(as_bytes) == y
    with_list = [[{"tags": [b"x", "y"]}, {}]]
    assert CRFTagger().fit(with_list, y).attributes_ == ["tags:x", "tags:y"]


@pytest.mark.parametrize(
    "token, where",
    [
        ({"w": b"\xff\xfe"}, r"X\[0\]\[1\]: feature 'w' is bytes that are not valid UTF-8"),
        ({b"\xc3": 1.0}, r"X\[0\]\[1\]: feature key is bytes that are not valid UTF-8"),
        ([b"ok", b"\x80"], r"X\[0\]\[1\]: feature name is bytes that are not valid UTF-8"),
        ({"l": [b"\xe2\x82"]}, r"X\[0\]\[1\]: feature 'l' is bytes that are not valid UTF-8"),
    ],
)
def test_invalid_utf8_bytes_are_an_error_naming_the_token(token, where):
    with pytest.raises(ValueError, match=where):
        CRFTagger().fit([[{"w": "a"}, token]], [["A", "B"]])


def test_item_sequences_sets_and_dict_keys_are_accepted_as_pycrfsuite_takes_them():
    import pycrfsuite

    from skcrf.pycrfsuite import ItemSequence

    X = [[{"w": "a", "n": 2.0}, {"w": "b"}], [{"w": "b"}, {"w": "a"}]] * 3
    y = [["A", "B"], ["B", "A"]] * 3
    crf = CRFTagger(max_iterations=10).fit(X, y)
    expected = crf.predict(X)
    for wrap in (ItemSequence, pycrfsuite.ItemSequence):
        wrapped = [wrap(x) for x in X]
        assert crf.predict(wrapped) == expected
        assert crf.predict(iter(wrapped)) == expected  # the streaming path
        assert [crf.predict_single(x) for x in wrapped] == expected
        assert crf.predict_marginals_single(wrapped[0]) == crf.predict_marginals_single(X[0])
        refit = CRFTagger(max_iterations=10).fit(wrapped, y)
        assert refit.attributes_ == crf.attributes_
        assert refit.predict(X) == expected
        assert isinstance(wrapped[0], wrap)  # the caller's list is left as it was
    names = [["w:a", "n"], ["w:b"]]
    as_lists = crf.predict_marginals_single(names)
    assert crf.predict_marginals_single([set(t) for t in names]) == as_lists
    assert crf.predict_marginals_single([dict.fromkeys(t).keys() for t in names]) == as_lists
    # a set's names come in sorted order: ids do not depend on str hashing
    fitted = CRFTagger(max_iterations=5).fit([[{"z", "m", "a"}]], [["A"]])
    assert fitted.attributes_ == ["a", "m", "z"]
