"""The compiled encoder (skcrf._featurize._vocabulary.Vocabulary) against a plain Python oracle.

The oracle turns one token into CRFsuite's (python-crfsuite's) attributes:
``{'w': 'Hi'}`` -> ``w:Hi`` = 1, numbers and bools are their value, nested
dicts are prefixed with ``key:``, a list or set of str gives one attribute per
item, a list token gives one attribute per name. The encoder must give the same
rows (values of one attribute in one token add up), number attributes in order
of first appearance, skip unseen attributes at predict time, and raise the
errors of skcrf._featurize._validation naming ``X[i][j]`` and the key.
"""

import math
import pickle
import re
from collections import OrderedDict
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skcrf._featurize._validation import MAX_NESTING, check_sequences, check_sums
from skcrf._featurize._vocabulary import Encoded, Vocabulary

# -- the oracle -------------------------------------------------------------------


def oracle_pairs(token, sep=":"):
    """``[(name, value), ...]`` of one valid token, in order."""
    if isinstance(token, (list, tuple)):
        return [(str(name), 1.0) for name in token]
    pairs = []

    def walk(mapping, prefix):
        for key, value in mapping.items():
            name = prefix + str(key)
            if isinstance(value, dict):
                walk(value, name + ":")
            elif isinstance(value, str):
                pairs.append((name + sep + str(value), 1.0))
            elif isinstance(value, (list, set, frozenset)):
                pairs.extend((name + sep + str(item), 1.0) for item in value)
            else:
                pairs.append((name, float(value)))

    walk(token, "")
    return pairs


def oracle_fit(X, sep=":"):
    names = {}
    for seq in X:
        for token in seq:
            for name, _ in oracle_pairs(token, sep):
                names.setdefault(name, len(names))
    return list(names)


def rows_by_name(encoded, vocabulary):
    """Each row as ``{name: summed value}``."""
    names = vocabulary.attributes
    rows = []
    for start, end in zip(encoded.indptr[:-1], encoded.indptr[1:]):
        row = {}
        for attribute, value in zip(encoded.ids[start:end], encoded.values[start:end]):
            row[names[attribute]] = row.get(names[attribute], 0.0) + value
        rows.append(row)
    return rows


def oracle_rows(X, known=None, sep=":"):
    rows = []
    for seq in X:
        for token in seq:
            row = {}
            for name, value in oracle_pairs(token, sep):
                if known is None or name in known:
                    row[name] = row.get(name, 0.0) + value
            rows.append(row)
    return rows


def check_encoded(encoded, X):
    assert isinstance(encoded, Encoded)
    assert encoded.indptr.dtype == np.int64 and encoded.ids.dtype == np.int32
    assert encoded.values.dtype == np.float64 and encoded.lengths.dtype == np.intp
    assert encoded.lengths.tolist() == [len(seq) for seq in X]
    assert len(encoded.indptr) == sum(map(len, X)) + 1 and encoded.indptr[0] == 0
    assert encoded.indptr[-1] == len(encoded.ids) == len(encoded.values)
    assert np.all(np.diff(encoded.indptr) >= 0)


def assert_matches_oracle(X, X_new, sep=":"):
    vocabulary = Vocabulary(value_separator=sep)
    fitted = vocabulary.encode(X, grow=True)
    check_encoded(fitted, X)
    assert vocabulary.attributes == oracle_fit(X, sep)  # first-appearance order
    assert rows_by_name(fitted, vocabulary) == oracle_rows(X, sep=sep)
    before = list(vocabulary.attributes)
    transformed = vocabulary.encode(X_new, grow=False)
    check_encoded(transformed, X_new)
    assert vocabulary.attributes == before  # predict never grows
    assert rows_by_name(transformed, vocabulary) == oracle_rows(X_new, set(before), sep)
    # and again, with warm caches
    again = vocabulary.encode(X_new, grow=False)
    for a, b in zip(transformed, again):
        np.testing.assert_array_equal(a, b)
    return vocabulary, fitted


# -- hand-made tokens ---------------------------------------------------------------


def test_every_format_by_hand():
    X = [
        [
            {"w": "Hello", "cap": True, "first": False, "n": 3, "x": -2.5},
            ["bias", "bias", "w:Hello"],
        ],
        [],
        [
            {
                "n": {"a": 1, "b": "x", "c": {"d": False}},
                "l": ["p", "q"],
                "s": {"r"},
                "fs": frozenset({"t"}),
                "e": [],
            }
        ],
        (("tuple-token",),),
    ]
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(X, grow=True)
    assert vocabulary.attributes == [
        "w:Hello",
        "cap",
        "first",
        "n",
        "x",
        "bias",
        "n:a",
        "n:b:x",
        "n:c:d",
        "l:p",
        "l:q",
        "s:r",
        "fs:t",
        "tuple-token",
    ]
    assert rows_by_name(encoded, vocabulary) == [
        {"w:Hello": 1.0, "cap": 1.0, "first": 0.0, "n": 3.0, "x": -2.5},
        {"bias": 2.0, "w:Hello": 1.0},
        {"n:a": 1.0, "n:b:x": 1.0, "n:c:d": 0.0, "l:p": 1.0, "l:q": 1.0, "s:r": 1.0, "fs:t": 1.0},
        {"tuple-token": 1.0},
    ]
    assert encoded.lengths.tolist() == [2, 0, 1, 1]
    assert encoded.indptr.tolist() == [0, 5, 8, 15, 16]  # list token: 3 entries


def test_explicit_zeros_are_kept():
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(
        [[{"f": False, "z": 0, "zf": 0.0, "nz": np.float64(0)}]], grow=True
    )
    assert vocabulary.attributes == ["f", "z", "zf", "nz"]
    assert encoded.values.tolist() == [0.0, 0.0, 0.0, 0.0]
    assert encoded.ids.tolist() == [0, 1, 2, 3]
    again = vocabulary.encode([[{"f": False, "z": 0}]], grow=False)
    assert again.ids.tolist() == [0, 1] and again.values.tolist() == [0.0, 0.0]


def test_collisions_are_one_attribute():
    # a numeric key 'a:b' and key 'a' with the string 'b' are CRFsuite's 'a:b'
    X = [[{"a:b": 2.0, "a": "b"}, {"a": "b"}, {"n": {"a": 1.0}, "n:a": 0.5}, ["a:b"]]]
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(X, grow=True)
    assert vocabulary.attributes == ["a:b", "n:a"]
    assert rows_by_name(encoded, vocabulary) == [
        {"a:b": 3.0},
        {"a:b": 1.0},
        {"n:a": 1.5},
        {"a:b": 1.0},
    ]
    # the other way round, first seen as a string value
    vocabulary = Vocabulary()
    vocabulary.encode([[{"a": "b"}]], grow=True)
    encoded = vocabulary.encode([[{"a:b": 4}, {"a": "b"}]], grow=False)
    assert encoded.ids.tolist() == [0, 0] and encoded.values.tolist() == [4.0, 1.0]


def test_string_value_cache_is_exact():
    # the cache keeps values of up to 15 one-byte characters in its entries
    # (zero-padded, with their length) and refers to the others: values that
    # differ only in length, padding-like NULs, kind or under another key
    # stay apart; many values grow the table
    odd = [
        "",
        "\x00",
        "\x00\x00",
        "x" * 14,
        "x" * 14 + "\x00",
        "x" * 15,
        "x" * 16,
        "x" * 15 + "\x00",
        "é" * 15,
        "é" * 16,
        "😀",
        "😀" * 20,
        "ä" * 14 + "b",
    ]
    many = [f"value{k}" for k in range(3000)] + [f"a long value number {k}" for k in range(500)]
    X = [[{"w": value, "v": value, "w:x": 1.0} for value in odd + many[::2]]]
    X_new = [
        [
            {"w": "".join(value), "v": value + "", "u": value}  # fresh str objects
            for value in odd + many + [odd[-1] + "c", "y" * 15]
        ]
    ]
    assert_matches_oracle(X, X_new)


def test_tokens_with_more_items_than_the_memo():
    # a token is encoded in chunks of 64 items; a value for the general path
    # in a later chunk sends the whole token there (same ids, same order)
    def token(i, odd=None):
        features = {f"k{k}": (f"v{(i + k) % 7}" if k % 3 else float(k)) for k in range(150)}
        if odd is not None:
            features[f"k{odd}"] = np.float64(2.5)
        return features

    X = [[token(0), token(1, odd=100), token(2)], [token(3, odd=5)]]
    assert_matches_oracle(X, [[token(4), token(5, odd=130)]])
    with pytest.raises(TypeError, match=r"X\[0\]\[1\].*k140"):
        Vocabulary().encode([[token(0), token(1) | {"k140": object()}]], grow=True)


def test_predict_finds_names_from_outside_the_cache():
    # names given to the constructor, added by the general path or by another
    # split of "key:value" are found by plain (key, value) tokens at predict
    loaded = Vocabulary(["w:x", "a:b:c"])
    encoded = loaded.encode([[{"w": "x"}, {"a": "b:c"}, {"a:b": "c"}, {"w": "y"}]], grow=False)
    assert encoded.ids.tolist() == [0, 1, 1]
    for fitted in (
        [[{"w": {"x": 1}}]],
        [[{"w": np.str_("x")}]],
        [[["w:x"]]],
        [[{"w:x": 2.0}]],
        [[{"w": ["x"]}]],
    ):
        vocabulary = Vocabulary()
        vocabulary.encode(fitted, grow=True)
        assert vocabulary.encode([[{"w": "x"}]], grow=False).ids.tolist() == [0]
    vocabulary = Vocabulary()
    vocabulary.encode([[{"a": "b:c"}]], grow=True)
    assert vocabulary.encode([[{"a:b": "c"}]], grow=False).ids.tolist() == [0]
    # with a longer separator, "ka" + "aa" + "k" is "k" + "aa" + "ak"
    vocabulary = Vocabulary(value_separator="aa")
    vocabulary.encode([[{"ka": "k"}]], grow=True)
    assert vocabulary.attributes == ["kaaak"]
    assert vocabulary.encode([[{"k": "ak"}]], grow=False).ids.tolist() == [0]
    # a failed fit empties the cache, not the names fitted before
    vocabulary = Vocabulary()
    vocabulary.encode([[{"w": "a"}]], grow=True)
    with pytest.raises(TypeError):
        vocabulary.encode([[{"w": "b"}, {"w": "c", "bad": object()}]], grow=True)
    assert vocabulary.attributes == ["w:a"]
    assert vocabulary.encode([[{"w": "a"}, {"w": "b"}]], grow=False).ids.tolist() == [0]
    # __init__ again starts afresh
    vocabulary.__init__(["w:b"])
    assert vocabulary.encode([[{"w": "a"}, {"w": "b"}]], grow=False).ids.tolist() == [0]


def test_value_separator():
    X = [[{"w": "Hi", "n": {"b": "x"}, "l": ["p"], "k": 1}, ["w=Hi"]]]
    vocabulary = Vocabulary(value_separator="=")
    encoded = vocabulary.encode(X, grow=True)
    # nested keys are always joined with ':'
    assert vocabulary.attributes == ["w=Hi", "n:b=x", "l=p", "k"]
    assert encoded.ids.tolist() == [0, 1, 2, 3, 0]
    assert vocabulary.value_separator == "="
    # a model with DictVectorizer's names reads tokens like the ones it was fit on
    loaded = Vocabulary(["w=Hi", "k"], value_separator="=")
    encoded = loaded.encode([[{"w": "Hi", "k": 2, "w2": "Hi"}]], grow=False)
    assert encoded.ids.tolist() == [0, 1] and encoded.values.tolist() == [1.0, 2.0]


def test_unseen_attributes_are_skipped_at_predict():
    vocabulary = Vocabulary()
    vocabulary.encode([[{"w": "a", "n": 1.0}]], grow=True)
    encoded = vocabulary.encode(
        [[{"w": "b", "m": 1.0, "n": 2.0}, {"new": "x"}, ["w:a", "zzz"], {}], []], grow=False
    )
    assert encoded.indptr.tolist() == [0, 1, 1, 2, 2]
    assert encoded.ids.tolist() == [1, 0] and encoded.values.tolist() == [2.0, 1.0]
    assert vocabulary.attributes == ["w:a", "n"]
    # a later fit call still adds what predict only looked up (cached as unseen)
    encoded = vocabulary.encode([[{"w": "b", "m": 1.0}]], grow=True)
    assert vocabulary.attributes == ["w:a", "n", "w:b", "m"]
    assert encoded.ids.tolist() == [2, 3]


def test_many_unseen_values_at_predict_stay_correct():
    # more unseen values than the cache of unseen answers remembers
    vocabulary = Vocabulary()
    vocabulary.encode([[{"w": "known", "k": 1}]], grow=True)
    X = [[{"w": f"unseen{k}", f"key{k}": "v", "k": 2} for k in range(70_000)], [{"w": "known"}]]
    for _ in range(2):
        encoded = vocabulary.encode(X, grow=False)
        assert encoded.ids.tolist() == [1] * 70_000 + [0]
    assert len(vocabulary) == 2
    grown = vocabulary.encode([[{"w": "unseen69999"}, {"w": "unseen3"}]], grow=True)
    assert grown.ids.tolist() == [2, 3]
    assert vocabulary.attributes[2:] == ["w:unseen69999", "w:unseen3"]


def test_numpy_scalars_and_number_types():
    X = [
        [
            {
                "a": np.float64(1.5),
                "b": np.float32(0.5),
                "c": np.int64(-3),
                "d": np.bool_(True),
                "e": np.bool_(False),
                "f": np.int8(2),
                "g": np.uint64(7),
                "h": 10**20,
                "i": -7,
                "j": True,
                "k": np.float16(0.25),
                "m": {"n": np.int32(4)},
            }
        ]
    ]
    vocabulary, encoded = assert_matches_oracle(X, X)
    assert encoded.values.tolist() == [
        1.5,
        0.5,
        -3.0,
        1.0,
        0.0,
        2.0,
        7.0,
        1e20,
        -7.0,
        1.0,
        0.25,
        4.0,
    ]
    assert vocabulary.attributes[-1] == "m:n"


def test_unicode_and_odd_strings():
    X = [
        [
            {"wörd": "naïve", "😀": "🎉", "e\u0301": "cafe\u0301", "ключ": ["да", "нет"]},
            {"汉字": {"子": "字"}, "": "", "nul\x00": "\x00", "a=b": "c:d"},
            ["\u05e9\u05dc\u05d5\u05dd", "a=b:c", ""],
        ]
    ]
    vocabulary, _ = assert_matches_oracle(X, X)
    assert {
        "wörd:naïve",
        "😀:🎉",
        "e\u0301:cafe\u0301",
        "ключ:да",
        "汉字:子:字",
        ":",
        "nul\x00:\x00",
        "a=b:c:d",
        "",
    } <= set(vocabulary.attributes)
    # no normalization: the composed form is another attribute
    assert vocabulary.encode([[{"e\u0301": "caf\u00e9"}]], grow=False).ids.tolist() == []


def test_str_subclasses_give_plain_str_names():
    X = [[{np.str_("k"): np.str_("v"), "n": np.str_("w")}, [np.str_("name")]]]
    vocabulary, _ = assert_matches_oracle(X, X)
    assert vocabulary.attributes == ["k:v", "n:w", "name"]
    assert all(type(name) is str for name in vocabulary.attributes)


def test_fast_and_general_paths_agree():
    # OrderedDict tokens (a Mapping, not a dict) always take the general path;
    # a numpy value halfway through a dict sends it there after a partial pass
    tokens = [
        {"w": "a", "x": 1.0, "b": True, "i": 3},
        {"w": "b", "x": np.float64(2.0), "v": "c"},
        {"w": "a", "q": "r"},
    ]
    X_dict = [tokens]
    X_ordered = [[OrderedDict(token) for token in tokens]]
    a, b = Vocabulary(), Vocabulary()
    encoded_a = a.encode(X_dict, grow=True)
    encoded_b = b.encode(X_ordered, grow=True)
    assert a.attributes == b.attributes == ["w:a", "x", "b", "i", "w:b", "v:c", "q:r"]
    for left, right in zip(encoded_a, encoded_b):
        np.testing.assert_array_equal(left, right)


def test_sequences_as_tuples_and_arrays():
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "c"}]]
    ragged = np.empty(2, dtype=object)
    ragged[:] = [np.array(X[0], dtype=object), tuple(X[1])]
    a, b = Vocabulary(), Vocabulary()
    encoded_a = a.encode(X, grow=True)
    encoded_b = b.encode(check_sequences(ragged), grow=True)
    for left, right in zip(encoded_a, encoded_b):
        np.testing.assert_array_equal(left, right)


def test_fresh_key_objects_each_token():
    # keys built per token (f-strings): equal but distinct objects
    X = [
        [
            {f"w[{k}]": f"v{(i + k) % 3}" for k in range(-1, 2) if i + k >= 0}
            | {f"n{1}": float(i)}
            for i in range(6)
        ]
    ]
    assert_matches_oracle(X, [[{f"w[{0}]": "v1", "n1": 3.0}]])


def _name_rows(vocabulary, X):
    """``(indptr, ids)`` of list-of-names tokens, looked up one by one."""
    indptr, ids = [0], []
    for seq in X:
        for token in seq:
            ids += [vocabulary.get(name) for name in token if name in vocabulary]
            indptr.append(len(ids))
    return indptr, ids


def test_lists_of_names_are_exact():
    # lists and tuples of plain str names are encoded in C through the
    # string-value cache: names short enough to be kept in an entry and
    # longer ones, other kinds, fresh str objects, repeats, unseen names
    odd = ["", "\x00", "x" * 15, "x" * 16, "x" * 15 + "\x00", "é" * 15, "é" * 16, "😀", "w:x"]
    many = [f"name{k}" for k in range(3000)] + [f"a long attribute name {k}" for k in range(500)]
    X = [[list(odd), tuple(many[::2]), many[1::2][:100] + ["w:x", "w:x"]]]
    vocabulary = Vocabulary()
    fitted = vocabulary.encode(X, grow=True)
    assert vocabulary.attributes == list(dict.fromkeys(odd + many[::2] + many[1::2][:100]))
    assert (fitted.indptr.tolist(), fitted.ids.tolist()) == _name_rows(vocabulary, X)
    assert fitted.values.tolist() == [1.0] * len(fitted.ids)
    X_new = [
        [["".join(name) for name in odd + many + ["x" * 17, "zzz"]], ("w:x", "unseen", "w:x")],
        [[], ("é" * 16,)],
    ]
    for _ in range(2):  # and again, with the names cached
        encoded = vocabulary.encode(X_new, grow=False)
        check_encoded(encoded, X_new)
        assert (encoded.indptr.tolist(), encoded.ids.tolist()) == _name_rows(vocabulary, X_new)
    # names in other forms take the general path: the same (plain str) names
    general = vocabulary.encode([[[np.str_("w:x"), b"\xc3\xa9" * 15, "zzz", "name7"]]], grow=False)
    assert general.ids.tolist() == [vocabulary.get(n) for n in ("w:x", "é" * 15, "name7")]


def test_lists_of_names_added_by_other_paths():
    # a name unseen at predict, added later by another path, is found: the
    # cache remembers only names that have an id
    vocabulary = Vocabulary(["a"])
    assert vocabulary.encode([[["w:x", "a", "n"]]], grow=False).ids.tolist() == [0]
    vocabulary.encode([[{"w": "x"}, {"n": 2.0}]], grow=True)
    assert vocabulary.encode([[["w:x", "a", "n"]]], grow=False).ids.tolist() == [1, 0, 2]
    # fit through lists, then dicts find those names, and lists find the dicts'
    vocabulary = Vocabulary()
    vocabulary.encode([[["k:v", "long attribute name:value"]]], grow=True)
    dicts = [[{"k": "v", "long attribute name": "value"}]]
    assert vocabulary.encode(dicts, grow=False).ids.tolist() == [0, 1]
    # a failed fit forgets what it added, and what the cache held
    with pytest.raises(TypeError, match=r"X\[0\]\[1\].*int 1"):
        vocabulary.encode([[["new", "k:v"], ["newer", 1]]], grow=True)
    assert vocabulary.attributes == ["k:v", "long attribute name:value"]
    assert vocabulary.encode([[["new", "k:v", "newer"]]], grow=False).ids.tolist() == [0]
    encoded = vocabulary.encode([[["new", "k:v"], ("newer",)]], grow=True)
    assert encoded.ids.tolist() == [2, 0, 3]


def test_long_lists_of_names():
    # more names than one chunk (64): a non-str name in a later chunk sends
    # the token to the general path, which names it
    names = [f"n{k}" for k in range(150)]
    vocabulary = Vocabulary(names[::3])
    encoded = vocabulary.encode([[names, names[::-1]]], grow=False)
    assert (encoded.indptr.tolist(), encoded.ids.tolist()) == _name_rows(
        vocabulary, [[names, names[::-1]]]
    )
    with pytest.raises(TypeError, match=r"X\[0\]\[1\].*found int 7"):
        vocabulary.encode([[names, names[:140] + [7]]], grow=False)


# -- random tokens ------------------------------------------------------------------

_text = st.sampled_from(["a", "b", "a:b", "b=c", "", "é", "😀", ":", "k"])
_leaf = st.one_of(
    _text,
    st.booleans(),
    st.integers(-5, 5),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.sampled_from([np.float64(0.5), np.int64(-2), np.bool_(True), np.float32(2.0)]),
    st.lists(_text, max_size=3),
    st.frozensets(_text, max_size=3),
)
_value = st.recursive(_leaf, lambda inner: st.dictionaries(_text, inner, max_size=3), max_leaves=6)
_token = st.one_of(
    st.dictionaries(_text, _value, max_size=5),
    st.lists(_text, max_size=4),
    st.tuples(_text, _text),
)
_X = st.lists(st.lists(_token, max_size=5), max_size=5)


@settings(max_examples=200, deadline=None)
@given(X=_X, X_new=_X, sep=st.sampled_from([":", "="]))
def test_random_tokens_match_the_oracle(X, X_new, sep):
    if not sum(map(len, X)):
        with pytest.raises(ValueError, match="X is empty|X has no tokens"):
            Vocabulary().encode(X, grow=True)
        return
    assert_matches_oracle(X, X_new, sep)


def _general(token):
    """``token`` with each dict an OrderedDict: a Mapping, which only the general
    path (token_attributes) takes."""
    if type(token) is dict:
        return OrderedDict((key, _general(value)) for key, value in token.items())
    return token


_mixed_text = st.sampled_from(["a", "b", "a:b", "", "é", ":", "w", "next"])
_mixed_name = st.one_of(_mixed_text, _mixed_text.map(str.encode))
_valid_leaf = st.one_of(
    _mixed_name,
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([0.0, -0.0, 2.5, 1e300, np.float64(0.5)]),
    st.lists(_mixed_name, max_size=3),
    st.sets(_mixed_text, max_size=3),
    st.lists(st.sampled_from([0.5, -1.0]), min_size=1, max_size=2),  # a vector
    st.sampled_from([np.array([0.5, 2.0]), np.array([1.0, -1.0])]),
)
# now and then a value the general path refuses (or converts)
_bad_leaf = st.sampled_from([None, float("nan"), 10**400, b"\xff", ["a", 1], np.str_("x")])
_mixed_leaf = st.integers(0, 24).flatmap(lambda k: _bad_leaf if k == 0 else _valid_leaf)
_mixed_value = st.recursive(
    _mixed_leaf, lambda inner: st.dictionaries(_mixed_name, inner, max_size=3), max_leaves=8
)
_mixed_token = st.one_of(
    st.dictionaries(_mixed_name, _mixed_value, max_size=5),
    st.lists(_mixed_name, max_size=4),
    st.tuples(_mixed_name, _mixed_name),
)


def _encode_or_error(vocabulary, X, grow, dense=False):
    try:
        return vocabulary.encode(X, grow=grow, dense=dense), vocabulary.attributes[:]
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)


@settings(max_examples=300, deadline=None)
@given(
    X=st.lists(st.lists(_mixed_token, min_size=1, max_size=4), min_size=1, max_size=3),
    X_new=st.lists(st.lists(_mixed_token, max_size=4), max_size=3),
    sep=st.sampled_from([":", "="]),
    dense=st.booleans(),
)
def test_nested_and_mixed_tokens_encode_as_the_general_path(X, X_new, sep, dense):
    # nested dicts, lists and sets of names, bytes keys and values, numbers:
    # the compiled path gives the general path's arrays, names and errors
    # (halfway through a token it may give up: invalid values, bad UTF-8...)
    fast, general = Vocabulary(value_separator=sep), Vocabulary(value_separator=sep)
    X_general = [[_general(token) for token in seq] for seq in X]
    left = _encode_or_error(fast, X, True, dense)
    right = _encode_or_error(general, X_general, True, dense)
    if isinstance(left[0], type):
        assert left == right
        return
    assert left[1] == right[1]
    for a, b in zip(left[0][:4], right[0][:4]):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert (left[0].dense is None) == (right[0].dense is None)
    if left[0].dense is not None:
        for a, b in zip(left[0].dense, right[0].dense):
            np.testing.assert_array_equal(a, b)
    X_new_general = [[_general(token) for token in seq] for seq in X_new]
    for _ in range(2):  # and with warm caches
        left = _encode_or_error(fast, X_new, False)
        right = _encode_or_error(general, X_new_general, False)
        if isinstance(left[0], type):
            assert left == right
            continue
        for a, b in zip(left[0][:4], right[0][:4]):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


# -- errors -------------------------------------------------------------------------


def _loc(*parts):
    return ".*".join(re.escape(part) for part in parts)


_self_referencing = {}
_self_referencing["a"] = _self_referencing
_deep = {"leaf": 1.0}
for _ in range(MAX_NESTING + 5):
    _deep = {"k": _deep}

BAD_TOKENS = [
    ("token-int", 5, TypeError, ["dict of features or a list of feature names", "int"]),
    ("token-None", None, TypeError, ["NoneType"]),
    ("token-str", "dog", TypeError, ["str", "'dog'", "[sequence]", "predict_single"]),
    ("token-set-of-ints", {1, 2}, TypeError, ["int"]),
    ("token-bytes", b"dog", TypeError, ["bytes"]),
    ("value-None", {"w": None}, TypeError, ["'w'", "NoneType", "omit its key"]),
    ("value-nan", {"w": float("nan")}, ValueError, ["'w'", "nan", "finite"]),
    (
        "value-nan-after-valid",
        {"a": "x", "b": 1, "w": float("nan")},
        ValueError,
        ["'w'", "nan", "finite"],
    ),
    ("value-float32-nan", {"w": np.float32("nan")}, ValueError, ["'w'", "nan", "finite"]),
    ("value-inf", {"w": float("inf")}, ValueError, ["'w'", "inf", "finite"]),
    ("value-neg-inf", {"w": -math.inf}, ValueError, ["'w'", "-inf", "finite"]),
    ("value-np-inf", {"w": np.float64("-inf")}, ValueError, ["'w'", "inf", "finite"]),
    ("value-huge-int", {"w": 10**400}, ValueError, ["'w'", "too large"]),
    ("value-huge-negative-int", {"a": "b", "w": -(10**400)}, ValueError, ["'w'", "too large"]),
    # (a numpy array or a list of floats is a vector feature: tests/test_dense.py)
    ("value-tuple", {"w": (1, 2)}, TypeError, ["'w'", "tuple"]),
    ("value-object", {"w": object()}, TypeError, ["'w'", "object"]),
    ("value-bad-utf8", {"w": b"\xff"}, ValueError, ["'w'", "not valid UTF-8"]),
    ("value-complex", {"w": 1j}, TypeError, ["'w'", "complex"]),
    ("value-decimal", {"w": Decimal("1.5")}, TypeError, ["'w'", "Decimal"]),
    ("value-ndarray", {"w": np.array(["a", "b"])}, TypeError, ["'w'", "ndarray"]),
    ("value-vector-nan", {"w": np.array([1.0, np.nan])}, ValueError, ["'w'", "finite"]),
    ("value-vector-2d", {"w": np.ones((2, 2))}, ValueError, ["'w'", "2-D"]),
    ("nested-nan", {"n": {"m": {"x": float("nan")}}}, ValueError, ["'n:m:x'", "finite"]),
    ("key-int", {1: "x"}, TypeError, ["keys must be str", "int 1"]),
    ("key-None-after-valid", {"a": 1, None: 1.0}, TypeError, ["keys must be str", "NoneType"]),
    ("key-bad-utf8", {b"\xff": 1.0}, ValueError, ["feature key", "not valid UTF-8"]),
    ("key-nested-int", {"n": {2: 1.0}}, TypeError, ["keys must be str", "int 2", "'n'"]),
    ("list-value-int", {"l": ["x", 1]}, TypeError, ["'l'", "list holding int 1", "only str"]),
    ("set-value-float", {"l": {"x", 2.5}}, TypeError, ["'l'", "set holding float"]),
    ("list-token-int", ["a", 1], TypeError, ["feature names (str)", "int 1"]),
    ("list-token-dicts", [{"w": "a"}], TypeError, ["nested one level too deep"]),
    ("self-referencing", _self_referencing, ValueError, ["'a:a:a", "contain itself"]),
    ("too-deep", _deep, ValueError, ["'k:k:k", f"more than {MAX_NESTING}"]),
]


@pytest.mark.parametrize("grow", [True, False])
@pytest.mark.parametrize(
    "bad, exc, fragments", [case[1:] for case in BAD_TOKENS], ids=[case[0] for case in BAD_TOKENS]
)
def test_bad_token_is_named(bad, exc, fragments, grow):
    vocabulary = Vocabulary(["w:the"])
    X = [[{"w": "the"}], [{"w": "a", "new": 1.0}, bad, {"w": "cat"}]]
    with pytest.raises(exc, match=_loc("X[1][1]", *fragments)):
        vocabulary.encode(X, grow=grow)
    with pytest.raises(exc, match=_loc("X_dev[1][1]", *fragments)):
        vocabulary.encode(X, grow=grow, name="X_dev")
    # a failed fit leaves the vocabulary as it was, and it still works
    assert vocabulary.attributes == ["w:the"]
    encoded = vocabulary.encode([[{"w": "the", "new": 1.0}]], grow=True)
    assert encoded.ids.tolist() == [0, 1] and vocabulary.attributes == ["w:the", "new"]


def test_bad_value_in_a_later_token_of_a_long_input():
    X = [[{"w": str(k)} for k in range(50)] for _ in range(20)]
    X[13][41] = {"w": "x", "v": float("nan")}
    with pytest.raises(ValueError, match=_loc("X[13][41]", "'v'")):
        Vocabulary().encode(X, grow=True)


def test_empty_training_data():
    with pytest.raises(ValueError, match="X is empty"):
        Vocabulary().encode([], grow=True)
    with pytest.raises(ValueError, match="all 2 sequences are empty"):
        Vocabulary().encode([[], []], grow=True)
    with pytest.raises(ValueError, match="X_dev is empty"):
        Vocabulary().encode([], grow=True, name="X_dev")
    # tokens without features are fine, and predict takes anything empty
    encoded = Vocabulary().encode([[{}], [[]]], grow=True)
    assert encoded.indptr.tolist() == [0, 0, 0] and len(encoded.ids) == 0
    encoded = Vocabulary(["a"]).encode([[], []], grow=False)
    assert encoded.indptr.tolist() == [0] and encoded.lengths.tolist() == [0, 0]


def test_check_sums_names_the_attribute_and_its_largest_value():
    X = [[{"x": 1e308, "y": 1.0}], [{"x": -1.5e308}, {"x": 1e307}]]
    vocabulary = Vocabulary()
    encoded = vocabulary.encode(X, grow=True)
    with pytest.raises(
        ValueError, match=_loc("feature 'x' are too large", "-1.5e+308", "X[1][0]", "Scale")
    ):
        check_sums(encoded, vocabulary)
    fine = Vocabulary()
    check_sums(fine.encode([[{"x": 1e300}, {"x": 1e300}]], grow=True), fine)


# -- the vocabulary itself ---------------------------------------------------------


def test_vocabulary_api_and_pickle():
    vocabulary = Vocabulary(["a", "w:x"])
    assert len(vocabulary) == 2 and vocabulary.get("w:x") == 1
    assert vocabulary.get("nope") == -1 and vocabulary.get("nope", None) is None
    assert "a" in vocabulary and "b" not in vocabulary
    assert vocabulary.attributes is vocabulary.attributes  # no copy per call
    vocabulary.encode([[{"w": "y"}]], grow=True)
    restored = pickle.loads(pickle.dumps(vocabulary))
    assert restored.attributes == ["a", "w:x", "w:y"]
    assert restored.value_separator == ":"
    encoded = restored.encode([[{"w": "y", "a": 2}]], grow=False)
    assert encoded.ids.tolist() == [2, 0]
    with pytest.raises(ValueError, match="given twice"):
        Vocabulary(["a", "a"])
    with pytest.raises(TypeError, match="must be str"):
        Vocabulary(["a", 1])
    with pytest.raises(TypeError, match="value_separator"):
        Vocabulary(value_separator=None)
    assert "3 attributes" in repr(restored)


def test_an_unseen_pair_added_later_through_another_form_is_found():
    # predict caches (key, value) as unseen; a fit then adds "key:value"
    # through another form (a numeric key, a list of names): the cached
    # "unseen" must not hide it afterwards
    for added in ([{"k:v": 1.0}], [["k:v"]], [{"k": {"v": 1.0}}]):
        vocabulary = Vocabulary(["a:x"])
        before = vocabulary.encode([[{"k": "v", "a": "x"}, {"k": "w"}]], grow=False)
        assert before.ids.tolist() == [0]
        vocabulary.encode([added], grow=True)
        after = vocabulary.encode([[{"k": "v", "a": "x"}, {"k": "w"}]], grow=False)
        assert after.ids.tolist() == [1, 0], added  # "k:v" (its own order), "a:x"
        assert vocabulary.attributes == ["a:x", "k:v"]


def _rest_data():
    """Tokens of every cached kind: short and long string values (15 and 16
    characters: the longest kept in an entry, and one more), values and keys
    beyond Latin-1, keys holding the separator, lists of names, numbers, and
    unseen values at predict time."""
    train = [
        [{"w": "the", "long": "a-value-longer-than-fifteen", "n": 2.5}, ["bias", "x:y"]],
        [{"w": "dog", "k:ey": "v", "long": "another-very-long-value"}, {"w": "the"}],
        [{"w": "fifteen-chars-x", "v": "sixteen-chars-xy", "é": "café", "ж": "dog"}],
        [{"w": "\u4e2d\u6587", "k": "", "w2": "the"}],
    ]
    test = [
        [{"w": "dog", "long": "a-value-longer-than-fifteen"}, ["bias", "unseen-name"]],
        [{"w": "cat", "k:ey": "v", "n": 1.0}, {"w": "the", "new": "z"}],
    ]
    return train, test


def _encoded_lists(encoded):
    return encoded.indptr.tolist(), encoded.ids.tolist(), encoded.values.tolist()


@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize("wake", ["wake", "encode", "get", "contains", "stream"])
def test_a_rested_vocabulary_answers_as_before(wake, pack):
    # pack=True: the names go into one UTF-8 text (lazy names); the cache's
    # entries come back from an ASCII name's bytes, or from the str of any
    # other (Latin-1, beyond Latin-1, long values)
    train, test = _rest_data()
    plain, rested = Vocabulary(), Vocabulary()
    for vocabulary in (plain, rested):
        vocabulary.encode(train, grow=True)
        vocabulary.encode(test, grow=False)  # caches "unseen" answers too
    packed = rested.rest(pack=pack)
    assert (packed is not None) == pack
    if pack:
        assert packed == plain.attributes and len(packed) == len(plain)
    rested.rest(pack=pack)  # twice: still at rest, nothing lost
    assert len(rested) == len(plain)  # (reading attributes would wake it)
    if wake == "wake":
        rested.wake()
    elif wake == "get":
        assert rested.get("w:dog") == plain.get("w:dog")
    elif wake == "contains":
        assert "x:y" in rested and "w:cat" not in rested
    elif wake == "stream":
        from skcrf._featurize._vocabulary import StreamEncoder

        stream = StreamEncoder(rested, grow=False)
        for seq in test:
            stream.add(seq)
        assert _encoded_lists(stream.finish()) == _encoded_lists(plain.encode(test, grow=False))
    for grow in (False, True):  # known answers, then new attributes
        assert _encoded_lists(rested.encode(test, grow=grow)) == _encoded_lists(
            plain.encode(test, grow=grow)
        )
    assert rested.attributes == plain.attributes
    assert pickle.loads(pickle.dumps(rested)).attributes == plain.attributes


def test_a_rested_vocabulary_keeps_every_known_cache_entry():
    # After waking, a predict-time miss of a known (key, value) would build its
    # name; a vocabulary whose every separator-holding name is cached answers
    # unseen pairs without building names. Both rely on every known entry
    # coming back: the encodings match, and a new unseen pair is still -1.
    train, test = _rest_data()
    vocabulary = Vocabulary()
    vocabulary.encode(train, grow=True)
    vocabulary.rest()
    vocabulary.wake()
    known = vocabulary.encode(train, grow=False)
    fresh = Vocabulary()
    assert _encoded_lists(known) == _encoded_lists(fresh.encode(train, grow=True))
    assert vocabulary.encode([[{"w": "never-seen"}]], grow=False).ids.tolist() == []


def test_rest_of_lazy_names_does_nothing(tmp_path):
    from skcrf import CRFTagger

    X = [[{"w": "a"}, {"w": "b"}]] * 3
    y = [["A", "B"]] * 3
    tagger = CRFTagger(max_iterations=5).fit(X, y)
    path = tmp_path / "model.crfsuite"
    tagger.to_crfsuite(path)
    opened = CRFTagger.from_crfsuite(path)
    vocabulary = opened._predictor.vocabulary
    vocabulary.rest()
    assert opened.predict(X) == tagger.predict(X)


def test_a_failed_fit_of_many_new_names_is_rolled_back():
    # The name -> id table grows several times during the failed encode
    # (1,024 slots at first); its rollback empties the new names' slots in
    # place and closes the gaps in the probe runs: every kept name is found,
    # no forgotten one is, and the same names get the same ids again.
    kept = [f"k{i}" for i in range(700)]
    vocabulary = Vocabulary(kept)
    X = [[{f"n{i}": 1.0 for i in range(j, j + 50)} for j in range(0, 5000, 50)]]
    X[0].append({"bad": float("nan")})
    with pytest.raises(ValueError, match="'bad'"):
        vocabulary.encode(X, grow=True)
    assert vocabulary.attributes == kept and len(vocabulary) == 700
    assert [vocabulary.get(name) for name in kept] == list(range(700))
    assert vocabulary.get("n0") == -1 and "n4999" not in vocabulary
    del X[0][-1]
    vocabulary.encode(X, grow=True)
    fresh = Vocabulary(kept)
    fresh.encode(X, grow=True)
    assert vocabulary.attributes == fresh.attributes
    assert [vocabulary.get(f"n{i}") for i in range(5000)] == list(range(700, 5700))


def test_get_takes_str_subclasses_and_answers_default_for_anything_else():
    class Name(str):
        def __hash__(self):
            return 0  # never consulted: looked up as its plain str

    vocabulary = Vocabulary(["a", "b:c"])
    assert vocabulary.get(Name("b:c")) == 1 and vocabulary.get(Name("x")) == -1
    assert vocabulary.get(1, "none") == "none" and vocabulary.get(["a"]) == -1
    assert Name("a") not in vocabulary  # __contains__ takes plain str only, as before


@pytest.mark.parametrize("pack", [False, True])
def test_a_rested_vocabulary_woken_by_many_threads_at_once(pack):
    # A fitted model's vocabulary rests until its first use; eight threads
    # that use it at once all get the sequential answers (one rebuilds it).
    import threading

    train, test = _rest_data()
    plain = Vocabulary()
    plain.encode(train, grow=True)
    expected = _encoded_lists(plain.encode(test + train, grow=False))
    for _ in range(20):
        rested = Vocabulary()
        rested.encode(train, grow=True)
        rested.rest(pack=pack)
        barrier, answers = threading.Barrier(8), []

        def use(lists_first, rested=rested, barrier=barrier, answers=answers):
            barrier.wait()
            if lists_first:  # (packed names listed while others wake the tables)
                assert rested.attributes == plain.attributes
            answers.append(_encoded_lists(rested.encode(test + train, grow=False)))

        threads = [threading.Thread(target=use, args=(k % 2,)) for k in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert answers == [expected] * 8


def test_a_fit_trains_on_packed_names_and_predicts_as_with_the_list(tmp_path):
    # The fit packs the names while the optimizer runs (no str per
    # attribute): the model's attributes are lazy names afterwards, equal to
    # the list, and the model predicts as one opened from its file.
    from skcrf import CRFTagger
    from skcrf._utils._cqdb_index import LazyNames

    train, test = _rest_data()
    y = [["A"] * len(seq) for seq in train]
    y[0][0] = "B"
    tagger = CRFTagger(max_iterations=10).fit(train, y)
    model = tagger._fitted_model()
    assert isinstance(model.attributes, LazyNames)
    fresh = Vocabulary()
    fresh.encode(train, grow=True)
    assert tagger.attributes_ == fresh.attributes
    tagger.save(tmp_path / "model")
    opened = CRFTagger.load(tmp_path / "model")
    assert opened.predict_marginals(test) == tagger.predict_marginals(test)
    assert pickle.loads(pickle.dumps(tagger)).predict(test) == tagger.predict(test)
