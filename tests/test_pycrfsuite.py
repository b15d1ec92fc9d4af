"""skcrf.pycrfsuite: python-crfsuite's API on skcrf's engine, against python-crfsuite.

Every comparison runs the same calls on ``pycrfsuite`` (the real one) and on
``skcrf.pycrfsuite``: the same tags, labels and info, probabilities and
marginals to 1e-9, the same trainer parameters, defaults and help, models
that each library opens from the other's files.
"""

import io
import random
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skcrf.pycrfsuite as ours
from skcrf import CRFTagger
from skcrf._featurize._validation import check_sequences
from skcrf._featurize._vocabulary import Vocabulary, item_pairs, summed_items
from skcrf._model import CRFModel
from skcrf._persist._crfsuite_file import crfsuite_bytes
from skcrf._tagger_view import TaggerClosedError, UnknownLabelError

TOL = 1e-9
LABELS = ["DET", "NOUN", "VERB", "ADJ"]
WORDS = {
    "DET": ["the", "a", "this"],
    "NOUN": ["dog", "cat", "idea", "Paris", "3rd"],
    "VERB": ["runs", "sees", "is"],
    "ADJ": ["big", "green", "old"],
}
ALGORITHMS = ["lbfgs", "l2sgd", "ap", "averaged-perceptron", "pa", "passive-aggressive", "arow"]


def _item(word, i, words, style):
    """One item in each of python-crfsuite's forms."""
    prev = words[i - 1] if i else "<s>"
    if style == 0:
        return {
            "w": word.lower(),
            "suffix": word[-2:],
            "title": word.istitle(),
            "len": len(word) / 4,
        }
    if style == 1:
        return [f"w={word.lower()}", f"prev={prev}"] + (["first"] if i == 0 else [])
    if style == 2:
        return {
            "w": word.lower().encode(),
            "ctx": {"prev": prev, "shape": {"upper": word[0].isupper(), "len": len(word)}},
            "tags": [word[:1], word[-1:]],
            "set": {word[:2]},
        }
    return {f"w:{word.lower()}", f"prev:{prev}"}


def _data(n, seed):
    rng = random.Random(seed)
    X, y = [], []
    for s in range(n):
        tags = [rng.choice(LABELS) for _ in range(rng.randint(1, 7))]
        words = [rng.choice(WORDS[t]) for t in tags]
        X.append([_item(w, i, words, s % 4) for i, w in enumerate(words)])
        y.append(tags)
    return X, y


X_TRAIN, Y_TRAIN = _data(80, seed=0)
X_TEST, Y_TEST = _data(30, seed=1)
X_TEST += [[{"w": "zebra", "unseen": 1.0}], [], [{"w": "the", "title": False}, ["w=dog"]]]
Y_TEST += [["NOUN"], [], ["DET", "NOUN"]]


@pytest.fixture(scope="module")
def real():
    return pytest.importorskip("pycrfsuite")


def _train(module, path, algorithm="lbfgs", params=None, holdout=-1, data=(X_TRAIN, Y_TRAIN)):
    trainer = module.Trainer(algorithm, params=params or {}, verbose=False)
    for k, (xseq, yseq) in enumerate(zip(*data)):
        trainer.append(xseq, yseq, group=k % 5)
    trainer.train(str(path), holdout=holdout)
    return trainer


@pytest.fixture(scope="module", params=[{"c2": 0.1}, {"c1": 0.2, "c2": 0.01}], ids=["l2", "l1"])
def crfsuite_model(request, real, tmp_path_factory):
    """A model file trained by CRFsuite (python-crfsuite)."""
    path = tmp_path_factory.mktemp("crfsuite") / "m.crfsuite"
    _train(real, path, params=request.param)
    return str(path)


def _pair(real, path):
    reference = real.Tagger()
    reference.open(path)
    tagger = ours.Tagger()
    tagger.open(path)
    return reference, tagger


# -- the tagger against python-crfsuite ----------------------------------------------


def test_tagger_matches_pycrfsuite(real, crfsuite_model):
    reference, tagger = _pair(real, crfsuite_model)
    assert tagger.labels() == reference.labels()
    rng = random.Random(3)
    for xseq, yseq in zip(X_TEST, Y_TEST):
        assert tagger.tag(xseq) == reference.tag(xseq)
        assert tagger.tag() == reference.tag()
        for labels in (yseq, reference.tag(), [rng.choice(LABELS) for _ in yseq]):
            assert tagger.probability(labels) == pytest.approx(
                reference.probability(labels), abs=TOL, rel=TOL
            )
        for pos in range(len(xseq)):
            for label in LABELS:
                assert tagger.marginal(label, pos) == pytest.approx(
                    reference.marginal(label, pos), abs=TOL
                )


def test_item_sequences_tag_the_same(real, crfsuite_model):
    reference, tagger = _pair(real, crfsuite_model)
    for xseq in X_TEST:
        assert tagger.tag(ours.ItemSequence(xseq)) == reference.tag(real.ItemSequence(xseq))
        # a pycrfsuite.ItemSequence too
        assert tagger.tag(real.ItemSequence(xseq)) == reference.tag(xseq)


def test_info_and_dump_match_pycrfsuite(real, crfsuite_model, tmp_path):
    reference, tagger = _pair(real, crfsuite_model)
    expected, info = reference.info(), tagger.info()
    for name in ("header", "labels", "attributes", "transitions", "state_features"):
        assert getattr(info, name) == getattr(expected, name), name
    reference.dump(str(tmp_path / "a.txt"))
    tagger.dump(tmp_path / "b.txt")
    assert (tmp_path / "b.txt").read_text("utf-8") == (tmp_path / "a.txt").read_text("utf-8")


def test_files_with_zero_weights_show_as_they_are(real, crfsuite_model, tmp_path):
    """A file holding zero-weight features (skcrf writes them) is shown as CRFsuite shows it."""
    from skcrf._persist._crfsuite_file import read_crfsuite, write_crfsuite

    model = read_crfsuite(crfsuite_model).model
    padded = model.with_weights(np.where(np.arange(model.n_features) % 3 == 0, 0.0, model.weights))
    path = str(tmp_path / "zeros.crfsuite")
    write_crfsuite(padded, path)
    reference, tagger = _pair(real, path)
    expected, info = reference.info(), tagger.info()
    for name in ("header", "labels", "attributes", "transitions", "state_features"):
        assert getattr(info, name) == getattr(expected, name), name
    for xseq in X_TEST[:10]:
        assert tagger.tag(xseq) == reference.tag(xseq)


def test_open_inmemory_and_context_manager(real, crfsuite_model):
    data = open(crfsuite_model, "rb").read()
    with ours.Tagger().open_inmemory(data) as tagger:
        assert tagger.labels() == real.Tagger().open_inmemory(data).thing.labels()
        assert tagger.tag(X_TEST[0])
    with pytest.raises(ValueError):
        tagger.labels()  # closed by the with block
    with ours.Tagger().open(crfsuite_model) as other:
        assert other.tag(X_TEST[0]) == tagger.open_inmemory(data).thing.tag(X_TEST[0])


# -- the tagger's own behaviour ------------------------------------------------------------


def test_closed_tagger_errors(crfsuite_model):
    tagger = ours.Tagger()
    # pycrfsuite: ValueError from these ...
    for call in (
        tagger.labels,
        tagger.tag,
        lambda: tagger.set(X_TEST[0]),
        lambda: tagger.tag(X_TEST[0]),
        lambda: tagger.probability(["DET"]),
        lambda: tagger.marginal("DET", 0),
    ):
        with pytest.raises(ValueError, match="no model"):
            call()
    # ... and RuntimeError from these
    for call in (tagger.info, tagger.dump):
        with pytest.raises(RuntimeError, match="no model"):
            call()
    assert issubclass(TaggerClosedError, ValueError) and issubclass(
        TaggerClosedError, RuntimeError
    )
    tagger.close()  # closing a closed tagger is harmless
    assert "closed" in repr(tagger)


def test_reopening_forgets_the_sequence_set(crfsuite_model):
    tagger = ours.Tagger()
    tagger.open(crfsuite_model)
    tagger.set(X_TEST[0])
    assert tagger.tag()
    tagger.open(crfsuite_model)
    with pytest.raises(ValueError, match="no sequence is set"):
        tagger.tag()


def test_open_errors(tmp_path, crfsuite_model):
    tagger = ours.Tagger()
    with pytest.raises(OSError):
        tagger.open(str(tmp_path / "missing.crfsuite"))
    for content in (b"", b"foo", b"lCRFfoo", b"lCRF" + b"\0" * 100, b"lCRFfoo" * 100):
        path = tmp_path / "bad.crfsuite"
        path.write_bytes(content)
        with pytest.raises(ValueError, match="Invalid model"):
            tagger.open(str(path))
        with pytest.raises(ValueError, match="Invalid model"):
            tagger.open_inmemory(content)
    with pytest.raises(TypeError):
        tagger.open_inmemory("lCRF")
    data = bytearray(open(crfsuite_model, "rb").read())
    data[60] ^= 0xFF  # inside the features chunk or a CQDB: caught before use
    with pytest.raises(ValueError, match="Invalid model"):
        tagger.open_inmemory(bytes(data[:-7]))
    assert tagger.model is None


def test_path_like_and_bytes_labels(crfsuite_model, tmp_path):
    from pathlib import Path

    tagger = ours.Tagger()
    tagger.open(Path(crfsuite_model))
    tagger.set(X_TEST[1])
    labels = tagger.tag()
    assert tagger.probability([label.encode() for label in labels]) == tagger.probability(labels)
    assert tagger.marginal(labels[0].encode(), 0) == tagger.marginal(labels[0], 0)
    with pytest.raises(UnknownLabelError):
        tagger.marginal("XX", 0)
    with pytest.raises(RuntimeError, match="not a label"):  # pycrfsuite's type
        tagger.probability(["XX"] * len(labels))


def test_tagger_threads_give_sequential_results(crfsuite_model):
    tagger = ours.Tagger()
    tagger.open(crfsuite_model)
    queries = X_TEST * 4
    expected = [tagger.tag(xseq) for xseq in queries]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(tagger.tag, queries)) == expected

    # set() is per thread: each thread reads back its own sequence
    barrier = threading.Barrier(4)
    results = {}

    def work(k):
        xseq = X_TEST[k]
        tagger.set(xseq)
        barrier.wait()  # every thread has set its sequence
        results[k] = (tagger.tag(), tagger.marginal(LABELS[0], 0) if xseq else None)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        tagger.set(X_TEST[k])
        assert results[k] == (tagger.tag(), tagger.marginal(LABELS[0], 0) if X_TEST[k] else None)


# -- items -------------------------------------------------------------------------------

ITEM_FORMS = [
    [],
    [["foo", "bar"], ["bar", "baz"]],
    [{"foo": True, "bar": {"foo": -1, "baz": False}}],
    [{"foo": "привет", "ключ": 1.0, "привет": "мир"}],
    [{"a": b"bytes", b"k": 2, "n": np.float32(2.5), "i": np.int64(3)}],
    [{"foo": {"bar": "baz", "spam": 0.5, "egg": ["x", "y"], "ham": {"x": -0.5, "y": -0.1}}}],
    [{"foo": {"bar": "ham", "ham": {"x", "y"}}}],
    [{"walk": 1, "shop": 0.5}.keys(), ("t1", "t2"), {"s"}],
    [{"x": 1}, {}, []],
]


@pytest.mark.parametrize("pyseq", ITEM_FORMS)
def test_item_sequence_items_match_pycrfsuite(real, pyseq):
    seq = ours.ItemSequence(pyseq)
    expected = real.ItemSequence(pyseq)
    assert len(seq) == len(expected)
    assert seq.items() == expected.items()
    assert repr(seq) == repr(expected)
    assert ours.ItemSequence(seq).items() == seq.items()
    assert ours.ItemSequence(seq.items()).items() == seq.items()


def test_generators_are_read_once(real, crfsuite_model):
    reference, tagger = _pair(real, crfsuite_model)
    xseq = X_TEST[3]
    assert tagger.tag(item for item in xseq) == reference.tag(xseq)
    lists = [list(item) if not isinstance(item, dict) else list(item.keys()) for item in xseq]
    assert tagger.tag([(key for key in item) for item in lists]) == reference.tag(lists)


def test_repeated_attributes_add_up(real, crfsuite_model):
    reference, tagger = _pair(real, crfsuite_model)
    xseq = [["w=dog", "w=dog", "prev=the"], ["w=runs"]]
    assert tagger.tag(xseq) == reference.tag(xseq)
    for pos in range(2):
        assert tagger.marginal("NOUN", pos) == pytest.approx(
            reference.marginal("NOUN", pos), abs=TOL
        )
    assert ours.ItemSequence([["a", "a"]]).items() == [{"a": 1.0}]  # as pycrfsuite shows it


# -- the C path of the common item forms -------------------------------------------------

# Sequences that Vocabulary.encode_items encodes (lists or tuples of plain
# dicts and of lists or tuples of str): the same arrays as the Python conversion.
C_FORMS = [
    [],
    [{}, [], ()],
    [["w=dog", "w=dog", "prev=the"], ("w=runs", "first")],
    [{"w": "dog", "w:dog": 2.5, "title": True, "len": 3, "suffix": "og", "off": False}],
    [{"w:dog": 1.0, "w": "dog"}, {"len": -0.0, "title": -0.0}, {"len": 0.25, "len:": 1}],
    # pycrfsuite's lists give no weights: "len:2.5" is a name of its own
    [["len:2.5", "w=dog:2.5", "unseen", ""]],
    [{"w": "zebra", "unseen": 1.0, "title": 2}, ["first", "w=the", "zzz"]],
    [[f"n{k}" for k in range(200)] + ["w=dog"] * 3 + ["prev=the", "w=dog"]],
    ({"w": "the", "prev": "<s>"}, ("w=dog", "prev=the")),
    # nested dicts, lists and sets of names, bytes (python-crfsuite's other forms)
    [{"w": b"dog"}, {b"w": "the", "prev": b"<s>"}, [b"w=dog", "prev=the"]],
    [{"w": "the"}, {"ctx": {"prev": "the", "n": {"len": 3, "w": "dog"}, "on": True}}],
    [{"tags": ["d", "g", b"w=dog"], "s": {"x", "y"}, "w": ["dog"], "e": [], "f": set()}],
    [{"ctx": {"prev": ["the", "a"], "p": {"r": {"e": {"v": 0.5}}}}, "w": {}, "prev": "the"}],
    [{"w": {"dog": 2.0}, "w:dog": 1, "prev": {"the": False}}],  # repeats: summed
    # usaddress's shape: numbers, bools and str values, one level of nesting
    [
        {"w": "the", "len": 3, "title": False, "next": {"w": "dog", "title": False, "len": 3}},
        {"w": "dog", "len": 3, "previous": {"w": "the", "end": True}, "unseen": {"w": "dog"}},
    ],
]
# Sequences it leaves to the Python conversion (it answers None).
PYTHON_FORMS = [
    [["w=dog"], {"w:dog", "first"}],
    [{"w:dog": 1}.keys()],
    [{"len": np.float64(1.0)}],
    [{"ctx": {"len": np.float64(1.0)}}],
    [["w=dog", np.str_("first")]],
    [{"w": np.str_("dog")}],
    [{"ctx": {"w": np.str_("dog")}}],
    [{"tags": ["d", np.str_("g")]}],
]


def _converted(tagger, xseq):
    """``xseq`` encoded through the Python conversion of the items."""
    return super(ours.Tagger, tagger)._encode(tagger._loaded, xseq)


def _assert_same_arrays(left, right):
    assert left.dense is None and right.dense is None
    for a, b in zip(left[:4], right[:4]):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("xseq", C_FORMS)
def test_c_path_encodes_as_the_python_conversion(real, crfsuite_model, xseq):
    reference, tagger = _pair(real, crfsuite_model)
    encoded = tagger._loaded.vocabulary.encode_items(xseq)
    assert encoded is not None
    _assert_same_arrays(encoded, _converted(tagger, xseq))
    # an ItemSequence's tokens take the C path too
    _assert_same_arrays(tagger._encode(tagger._loaded, ours.ItemSequence(xseq)), encoded)
    assert tagger.tag(xseq) == reference.tag(xseq)
    for pos in range(len(xseq)):
        assert tagger.marginal("NOUN", pos) == pytest.approx(
            reference.marginal("NOUN", pos), abs=TOL
        )


@pytest.mark.parametrize("xseq", PYTHON_FORMS)
def test_other_forms_take_the_python_conversion(real, crfsuite_model, xseq):
    reference, tagger = _pair(real, crfsuite_model)
    assert tagger._loaded.vocabulary.encode_items(xseq) is None
    _assert_same_arrays(
        tagger._encode(tagger._loaded, ours.ItemSequence(xseq)), _converted(tagger, xseq)
    )
    assert tagger.tag(xseq) == reference.tag(xseq)
    assert Vocabulary(["w:dog"], value_separator="=").encode_items([{"w": "dog"}]) is None


_names = st.sampled_from(["a", "b", "a:b", "b:a", "", ":", "é", "a long name:with a value"])
_number = st.one_of(
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([2**53 + 1, -(10**20)]),
    st.sampled_from([0.0, -0.0, 0.1, 1e-300, 2.5, -7.25, 1e300]),
)
_names_or_bytes = st.one_of(_names, _names.map(str.encode))
_leaf = st.one_of(
    _names_or_bytes,
    _number,
    st.lists(_names_or_bytes, max_size=3),
    st.sets(_names, max_size=3),
)
_item_value = st.recursive(
    _leaf, lambda inner: st.dictionaries(_names_or_bytes, inner, max_size=3), max_leaves=8
)
_c_item = st.one_of(
    st.dictionaries(_names, st.one_of(_names, _number), max_size=6),
    # python-crfsuite's other forms: nested dicts, lists and sets, bytes
    st.dictionaries(_names_or_bytes, _item_value, max_size=6),
    st.lists(_names_or_bytes, max_size=6),
    st.lists(_names, max_size=3).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(xseq=st.lists(_c_item, max_size=4))
def test_random_items_encode_as_the_python_conversion(xseq):
    # repeated attributes (["a", "a"], {"a:b": 1, "a": "b"}) summed as the
    # conversion sums them, unseen attributes skipped, -0.0, ...
    names = ["a", "a:b", ":", "b:a:b", "a:é", "a:", "b", "a long name:with a value"]
    vocabulary = Vocabulary(names)
    for _ in range(2):  # and with the caches warm
        encoded = vocabulary.encode_items(xseq)
        assert encoded is not None
        tokens = ours._pycrfsuite._tokens(ours._pycrfsuite._sequence_pairs(xseq))
        _assert_same_arrays(encoded, vocabulary.encode(check_sequences([tokens]), grow=False))


@settings(max_examples=300, deadline=None)
@given(xseq=st.lists(_c_item, max_size=4))
def test_random_items_convert_as_in_python(xseq):
    # ItemSequence's and Trainer.append's compiled conversion: the Python
    # conversion's pairs (names, float values, order, repeats) and summed tokens
    pairs = item_pairs(xseq)
    expected = ours._pycrfsuite._sequence_pairs(xseq)
    assert pairs == expected
    assert [[type(v) for _, v in item] for item in pairs] == [
        [float] * len(item) for item in expected
    ]
    tokens = summed_items(pairs)
    assert tokens == ours._pycrfsuite._tokens(expected)
    assert [[str(v) for v in t.values()] for t in tokens] == [
        [str(v) for v in t.values()] for t in ours._pycrfsuite._tokens(expected)
    ]  # -0.0 summed to 0.0 as in Python
    assert item_pairs(tuple(xseq)) == expected
    assert ours.ItemSequence(xseq).items() == [dict(item) for item in expected]


def test_forms_left_to_the_python_conversion():
    for xseq in PYTHON_FORMS + [iter([{"a": 1}]), [{"a": None}], [{"a": {"b": [1]}}], "ab"]:
        assert item_pairs(xseq) is None


def test_items_the_c_path_leaves_are_named(crfsuite_model):
    tagger = ours.Tagger()
    tagger.open(crfsuite_model)
    with pytest.raises(ours.ItemFormatError, match=r"xseq\[1\]: a feature name .* int 1"):
        tagger.tag([["w=dog"], ["w=dog", 1]])
    with pytest.raises(ValueError, match=r"xseq\[1\]\['len'\]: the value nan is not finite"):
        tagger.tag([{"w": "dog"}, {"w": "the", "len": float("nan")}])
    with pytest.raises(ours.ItemFormatError, match=r"xseq\[2\]: an item must be .* not a str"):
        tagger.tag([{"w": "dog"}, [], "w=dog"])
    with pytest.raises(ours.ItemFormatError, match=r"xseq\[0\]\['w'\]: a feature value"):
        tagger.tag([{"w": None}])
    # inside nested dicts and lists (the C path gives up halfway through an item)
    with pytest.raises(ours.ItemFormatError, match=r"xseq\[1\]\['n'\]\['w'\]: a feature value"):
        tagger.tag([{"w": "dog"}, {"w": "the", "n": {"p": "the", "w": None}}])
    with pytest.raises(ValueError, match=r"xseq\[0\]\['n'\]\['m'\]\['x'\]: the value inf"):
        tagger.set([{"n": {"p": 1, "m": {"x": float("inf")}}}])
    with pytest.raises(ours.ItemFormatError, match=r"xseq\[0\]\['t'\]: a feature name .* int 2"):
        tagger.tag([{"t": ["a", 2]}])
    with pytest.raises(UnicodeDecodeError):
        tagger.tag([{"w": b"\xff"}])


def _big_weights_tagger():
    model = CRFModel(
        classes=np.array(["A", "B"], dtype=object),
        attributes=["big", "w:x"],
        state_ptr=np.array([0, 2, 3], dtype=np.int64),
        state_labels=np.array([0, 1, 0], dtype=np.int32),
        state_weights=np.array([10.0, -10.0, 1.0]),
        transition_index=np.arange(4, dtype=np.int64),
        transition_weights=np.array([0.5, -0.5, 0.0, 0.25]),
    )
    tagger = ours.Tagger()
    tagger.open_inmemory(crfsuite_bytes(model))
    return tagger


def test_scores_that_overflow_name_the_token():
    tagger = _big_weights_tagger()
    tagger.set([["w:x"], ["w:x"]])
    for bad in (
        [{"w": "x"}, {"big": 1e308}],
        [["w:x"], {"w": "x", "big": 1e308}],
        [{"w": b"x"}, {"big": 1e308}],  # (the Python conversion)
    ):
        with pytest.raises(ValueError, match=r"xseq\[0\]\[1\]: the label scores .* not finite"):
            tagger.tag(bad)
        with pytest.raises(ValueError, match=r"xseq\[0\]\[1\]: the label scores .* not finite"):
            tagger.set(bad)
    assert tagger.tag() == ["A", "A"]  # the sequence set before stays set
    assert tagger.tag([{"big": 1e300}]) == ["A"]


def _address_items(words):
    """Items shaped as usaddress's: bools, str or False values, and each item's
    neighbours' features nested under 'previous' and 'next'."""

    def features(word):
        clean = word.strip(",.").lower()
        return {
            "abbrev": word.endswith("."),
            "digits": "all_digits" if clean.isdigit() else "no_digits",
            "word": False if clean.isdigit() else clean,
            "length": f"{'d' if clean.isdigit() else 'w'}:{len(clean)}",
            "endsinpunc": word[-1] if word[-1] in ",." else False,
            "has.vowels": bool(set(clean[1:]) & set("aeiou")),
            "n": len(clean) / 3,
        }

    items = [features(word) for word in words]
    for k, item in enumerate(items):
        if k:
            item["previous"] = features(words[k - 1])
        if k + 1 < len(items):
            item["next"] = features(words[k + 1])
    items[0]["address.start"] = True
    items[-1]["address.end"] = True
    return items


def _addresses(n, seed):
    rng = random.Random(seed)
    X, y = [], []
    for _ in range(n):
        words = [str(rng.randint(1, 999)), rng.choice(["Main", "Oak", "Elm", "N."])]
        words += [rng.choice(["St.", "Ave,", "Rd"]), rng.choice(["Salem", "Austin,"])]
        X.append(_address_items(words))
        y.append(["Number", "Name", "Type", "City"])
    return X, y


def test_nested_items_match_pycrfsuite(real, tmp_path):
    # a model trained by python-crfsuite on usaddress-like items, tagged by
    # both (skcrf's compiled path) and by CRFTagger.predict_single
    path = str(tmp_path / "addresses.crfsuite")
    _train(real, path, params={"c1": 0.05, "c2": 0.01}, data=_addresses(60, 0))
    reference, tagger = _pair(real, path)
    estimator = CRFTagger.from_crfsuite(path)
    X, _ = _addresses(30, 1)
    X.append([{"word": "unseen", "next": {"word": b"main", "x": {"y": 1}}, "t": ["a"]}])
    for xseq in X:
        assert tagger._loaded.vocabulary.encode_items(xseq) is not None
        labels = reference.tag(xseq)
        assert tagger.tag(xseq) == labels == estimator.predict_single(xseq)
        assert tagger.probability(labels) == pytest.approx(
            reference.probability(labels), abs=TOL, rel=TOL
        )
        for pos in range(len(xseq)):
            assert tagger.marginal("Name", pos) == pytest.approx(
                reference.marginal("Name", pos), abs=TOL
            )
        assert tagger.tag(ours.ItemSequence(xseq)) == labels


def test_tag_then_probability_and_marginal_as_after_set(crfsuite_model):
    # tag(xseq) scores the tokens once; what probability and marginal read
    # is computed when first needed: the same numbers as after set(xseq)
    tagger = ours.Tagger()
    tagger.open(crfsuite_model)
    for xseq in X_TEST:
        labels = tagger.tag(xseq)
        after_tag = (
            tagger.probability(labels),
            [tagger.marginal(label, pos) for pos in range(len(xseq)) for label in LABELS],
        )
        tagger.set(xseq)
        after_set = (
            tagger.probability(labels),
            [tagger.marginal(label, pos) for pos in range(len(xseq)) for label in LABELS],
        )
        assert after_tag == after_set
        assert tagger.tag() == labels


@pytest.mark.parametrize(
    "bad",
    [
        "foo",
        b"foo",
        {"a": 1},
        ["foo"],
        [[{"foo": 1.0}]],
        [{"a": None}],
        [{"a": ("x",)}],
        [{1: 1.0}],
        [[1, 2]],
        [{"a": [{"x": 1}]}],
        [3],
        [{"w": "dog"}, {"a": frozenset(["x"])}],
        [{"a": {"b": {"c": None}}}],
        [{"a": {"b": [1]}}],
        [{"a": {2: "x"}}],
    ],
)
def test_malformed_items(crfsuite_model, bad):
    tagger = ours.Tagger()
    tagger.open(crfsuite_model)
    with pytest.raises(ours.ItemFormatError):
        tagger.tag(bad)
    with pytest.raises(TypeError):
        ours.ItemSequence(bad)
    with pytest.raises(ValueError):
        ours.Trainer(verbose=False).append(bad, ["DET"] * 1)


def test_non_finite_values():
    with pytest.raises(ValueError, match="not finite"):
        ours.ItemSequence([{"a": float("nan")}])
    with pytest.raises(ValueError, match="not finite"):
        ours.ItemSequence([{"a": {"b": float("inf")}}])


# -- the trainer ---------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_parameters_match_pycrfsuite(real, algorithm):
    trainer, reference = ours.Trainer(algorithm), real.Trainer(algorithm)
    assert trainer.params() == reference.params()
    assert trainer.get_params() == reference.get_params()
    for name in reference.params():
        assert type(trainer.get(name)) is type(reference.get(name)), name
        assert trainer.help(name) == reference.help(name), name
    values = ["0.123456789", 7, 2.9, "1e-7", "abc", " 12x", True, False, -3, "inf", 1e20]
    for name in reference.params():
        for value in values:
            trainer.set(name, value)
            reference.set(name, value)
            assert trainer.get(name) == reference.get(name), (name, value)
    trainer.select(algorithm)  # select() resets the parameters
    assert trainer.get_params() == real.Trainer(algorithm).get_params()


def test_parameter_errors(real):
    trainer = ours.Trainer("l2sgd")
    for call in (
        lambda: trainer.get("foo"),
        lambda: trainer.set("foo", 1),
        lambda: trainer.set("c1", 1),  # an L-BFGS parameter
        lambda: trainer.help("foo"),
        lambda: trainer.help("c1"),
        lambda: trainer.set_params({"c2": 1, "foo": 5}),
        lambda: trainer.select("foo"),
        lambda: trainer.select("lbfgs", "crf2d"),
    ):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError, match="Parameter not found: foo = 5"):
        trainer.set("foo", 5)
    with pytest.raises(ValueError, match="Bad arguments: algorithm='foo', type='crf1d'"):
        trainer.select("FOO")
    trainer.select("LBFGS")
    assert "c1" in trainer.params()
    assert ours.Trainer(params={"c2": 100}).get("c2") == 100.0


def test_trained_model_opens_in_pycrfsuite(real, tmp_path):
    ours_path, real_path = tmp_path / "ours.crfsuite", tmp_path / "real.crfsuite"
    _train(ours, ours_path, params={"c2": 0.1})
    _train(real, real_path, params={"c2": 0.1})
    mine, theirs = real.Tagger(), real.Tagger()
    mine.open(str(ours_path))
    theirs.open(str(real_path))
    # CRFsuite's numbering: labels and attributes by first appearance
    assert mine.labels() == theirs.labels()
    ours_info, real_info = mine.info(), theirs.info()
    assert ours_info.labels == real_info.labels
    assert ours_info.attributes == real_info.attributes
    assert ours_info.header == real_info.header
    assert set(ours_info.state_features) == set(real_info.state_features)
    for key, weight in real_info.state_features.items():
        assert ours_info.state_features[key] == pytest.approx(weight, abs=2e-6)
    for key, weight in real_info.transitions.items():
        assert ours_info.transitions[key] == pytest.approx(weight, abs=2e-6)
    tagger = ours.Tagger()
    tagger.open(ours_path)
    for xseq in X_TEST:
        assert mine.tag(xseq) == tagger.tag(xseq) == theirs.tag(xseq)
        mine.set(xseq)
        for pos in range(len(xseq)):
            assert tagger.marginal("NOUN", pos) == pytest.approx(
                mine.marginal("NOUN", pos), abs=TOL
            )


@pytest.mark.parametrize("algorithm", ["l2sgd", "ap", "pa", "arow"])
def test_online_trainers_write_models_pycrfsuite_opens(real, tmp_path, algorithm):
    path = tmp_path / "m.crfsuite"
    _train(ours, path, algorithm, params={"max_iterations": 5})
    reference = real.Tagger()
    reference.open(str(path))
    tagger = ours.Tagger()
    tagger.open(path)
    assert set(reference.labels()) == set(LABELS)
    for xseq in X_TEST:
        assert tagger.tag(xseq) == reference.tag(xseq)


def _messages(module, path, algorithm, holdout, params):
    class Capturing(module.Trainer):
        def message(self, message):
            self.captured.append(message)
            super().message(message)

    trainer = Capturing(algorithm, params=params, verbose=False)
    trainer.captured = []
    for k, (xseq, yseq) in enumerate(zip(X_TRAIN, Y_TRAIN)):
        trainer.append(xseq, yseq, group=k % 5)
    trainer.train(str(path), holdout=holdout)
    return trainer


@pytest.mark.parametrize("algorithm", ["lbfgs", "l2sgd", "ap", "pa", "arow"])
def test_log_parses_as_pycrfsuite_logs(real, tmp_path, algorithm):
    params = {"max_iterations": 4}
    mine = _messages(ours, tmp_path / "a", algorithm, 2, params)
    theirs = _messages(real, tmp_path / "b", algorithm, 2, params)
    assert "type: CRF1d\n" in mine.captured
    events = [e for e, _, _ in mine.logparser.events]
    n_iterations = len(mine.logparser.iterations)
    assert events == ["start"] + ["featgen_progress"] * 51 + ["featgen_end", "prepared"] + [
        "iteration"
    ] * n_iterations + ["optimization_end", "end"]
    assert mine.logparser.featgen_num_features == theirs.logparser.featgen_num_features
    if algorithm == "lbfgs":
        # CRFsuite's online trainers shuffle with rand(), whose state depends on
        # what ran before in the process: only L-BFGS is comparable step by step
        assert events == [e for e, _, _ in theirs.logparser.events]
        assert n_iterations == len(theirs.logparser.iterations) == 4
    for it, expected in zip(mine.logparser.iterations, theirs.logparser.iterations):
        assert set(it) == set(expected)
        assert set(it["scores"]) == set(expected["scores"])
        assert list(it["scores"]) == list(expected["scores"])  # CRFsuite's label order
        if algorithm == "lbfgs":  # the same iterates as CRFsuite
            for key in ("loss", "feature_norm", "error_norm", "linesearch_step"):
                assert it[key] == pytest.approx(expected[key], rel=1e-5, abs=1e-6), key
            assert it["item_accuracy"] == expected["item_accuracy"]
            assert it["scores"] == expected["scores"]
    # the same text before the first iteration (timings aside)
    head = "".join(mine.captured).split("***** ")[0]
    expected_head = "".join(theirs.captured).split("***** ")[0]
    if algorithm == "l2sgd":  # CRFsuite also logs every calibration trial
        expected_head = expected_head.split("Initial loss")[0]
        head = head.rstrip("\n") + "\n"
    assert _untimed(head) == _untimed(expected_head)


def _untimed(text):
    import re

    return re.sub(r"Seconds required: \d+\.\d+", "Seconds required: -", text)


def test_on_hooks_and_verbose(capsys, tmp_path):
    calls = []

    class Hooked(ours.Trainer):
        def on_iteration(self, log, info):
            calls.append(info["num"])
            assert log.startswith("***** Iteration")

    trainer = Hooked(params={"max_iterations": 3})
    trainer.append(X_TRAIN[0], Y_TRAIN[0])
    trainer.train(str(tmp_path / "m"))
    assert calls == [1, 2, 3]
    out = capsys.readouterr().out
    assert "Feature generation" in out and "Storing the model" in out
    trainer.verbose = False
    trainer.train(str(tmp_path / "m"))
    assert capsys.readouterr().out == ""


def test_message_errors_stop_training(tmp_path):
    class Stop(Exception):
        pass

    class Bad(ours.Trainer):
        def message(self, message):
            if message.startswith("***** Iteration #2"):
                raise Stop

    trainer = Bad()
    trainer.append(X_TRAIN[0], Y_TRAIN[0])
    with pytest.raises(Stop):
        trainer.train(str(tmp_path / "m.crfsuite"))
    assert not (tmp_path / "m.crfsuite").exists()


def test_subclass_without_init(tmp_path):
    class Capturing(ours.Trainer):
        def __init__(self):
            self.messages = []

        def message(self, message):
            self.messages.append(message)

    trainer = Capturing()
    trainer.append(X_TRAIN[0], Y_TRAIN[0])
    trainer.train(str(tmp_path / "m.crfsuite"))
    assert trainer.params() == ours.Trainer().params()
    assert "type: CRF1d\n" in trainer.messages


def test_no_data_writes_crfsuites_empty_model(real, tmp_path):
    for holdout in (-1, 0):
        mine, theirs = ours.Trainer(verbose=False), real.Trainer(verbose=False)
        if holdout == 0:
            for trainer in (mine, theirs):
                trainer.append(X_TRAIN[0], Y_TRAIN[0], group=0)
        mine.train(str(tmp_path / "a"), holdout=holdout)
        theirs.train(str(tmp_path / "b"), holdout=holdout)
        assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes()
        assert [e for e, _, _ in mine.logparser.events] == [
            e for e, _, _ in theirs.logparser.events
        ]
        if holdout == -1:
            with pytest.raises(ValueError, match="no labels"):
                ours.Tagger().open(str(tmp_path / "a"))  # CRFsuite's tagger would crash on it
        else:  # the held-out labels, no features
            with ours.Tagger().open(str(tmp_path / "a")) as tagger:
                assert tagger.labels() == list(dict.fromkeys(Y_TRAIN[0]))


def test_train_without_a_file_and_clear(tmp_path):
    trainer = ours.Trainer(verbose=False)
    trainer.append(X_TRAIN[0], Y_TRAIN[0])
    trainer.train("")
    assert trainer.logparser.iterations
    trainer.clear()
    trainer.train(str(tmp_path / "m"))
    assert (tmp_path / "m").read_bytes()[:4] == b"lCRF"


def test_append_errors():
    trainer = ours.Trainer(verbose=False)
    with pytest.raises(ValueError, match=r"\|x\| = 1, \|y\| = 2"):
        trainer.append([["a"]], ["x", "y"])
    with pytest.raises(TypeError):
        trainer.append([["a"]], [1])
    with pytest.raises(TypeError):
        trainer.append([["a"], ["b"]], "xy")
    with pytest.raises(TypeError):
        trainer.append([["a"]], ["x"], "1")
    trainer.append([["a"]], [b"x"])  # bytes labels are UTF-8
    trainer.append([], [])


def test_out_of_range_parameters_are_errors(tmp_path):
    trainer = ours.Trainer("pa", params={"type": 5}, verbose=False)
    trainer.append(X_TRAIN[0], Y_TRAIN[0])
    with pytest.raises(ValueError, match="pa_type"):
        trainer.train(str(tmp_path / "m"))


def test_holdout_only_labels_score_as_wrong(tmp_path):
    trainer = ours.Trainer(params={"max_iterations": 2}, verbose=False)
    trainer.append([["a"], ["b"]], ["x", "y"])
    trainer.append([["a"], ["b"]], ["x", "z"], group=1)
    trainer.train(str(tmp_path / "m"), holdout=1)
    last = trainer.logparser.last_iteration
    assert last["item_accuracy"] == pytest.approx(0.5)
    tagger = ours.Tagger()
    tagger.open(tmp_path / "m")
    assert tagger.labels() == ["x", "y", "z"]  # (a label of the model, without features)


@pytest.mark.parametrize("possible_transitions", [False, True])
def test_holdout_only_labels_are_in_every_normalizer(real, tmp_path, possible_transitions):
    # CRFsuite's label set is the whole data set's: a label seen only in the
    # held-out group is a label of the model, and the loss sums over it
    params = {"max_iterations": 5, "feature.possible_transitions": possible_transitions}
    trainers = []
    for module, name in ((ours, "a"), (real, "b")):
        trainer = module.Trainer(params=params, verbose=False)
        for k, (xseq, yseq) in enumerate(zip(X_TRAIN, Y_TRAIN)):
            trainer.append(xseq, yseq, group=k % 3)
        trainer.append([["w=odd"], ["w=one"]], ["NOUN", "ONLY_HELD_OUT"], group=1)
        trainer.train(str(tmp_path / name), holdout=1)
        trainers.append(trainer)
    mine, theirs = (trainer.logparser.iterations for trainer in trainers)
    assert len(mine) == len(theirs) == 5
    for it, expected in zip(mine, theirs):
        for key in ("loss", "feature_norm", "error_norm"):
            assert it[key] == pytest.approx(expected[key], rel=1e-6), key
    ours_tagger, real_tagger = ours.Tagger(), real.Tagger()
    ours_tagger.open(tmp_path / "a")
    real_tagger.open(str(tmp_path / "b"))
    assert ours_tagger.labels() == real_tagger.labels()
    assert "ONLY_HELD_OUT" in ours_tagger.labels()
    for xseq in X_TEST:
        assert ours_tagger.tag(xseq) == real_tagger.tag(xseq)


def test_version_and_error(real):
    assert ours.CRFSUITE_VERSION == real.CRFSUITE_VERSION
    error = ours.CRFSuiteError(ours.CRFSuiteError.OVERFLOW)
    assert error.code == ours.CRFSuiteError.OVERFLOW
    assert str(error) == "Overflow"
    assert str(ours.CRFSuiteError(1)) == "Unexpected error"


def test_logparser_reads_a_crfsuite_log(real, tmp_path):
    """Our parser reads CRFsuite's own log as pycrfsuite's parser does."""
    trainer = _messages(real, tmp_path / "m", "lbfgs", 1, {"max_iterations": 3})
    parser, expected = ours.TrainLogParser(), real._logparser.TrainLogParser()
    for message in trainer.captured:
        assert parser.feed(message) == expected.feed(message)
        assert parser.last_log == expected.last_log
    assert parser.iterations == expected.iterations
    for name in ("featgen_num_features", "featgen_seconds", "training_seconds", "state"):
        assert getattr(parser, name) == getattr(expected, name)


def test_dump_to_stdout(crfsuite_model, capsys):
    tagger = ours.Tagger()
    tagger.open(crfsuite_model)
    tagger.dump()
    out = capsys.readouterr().out
    assert out.startswith("FILEHEADER = {") and "STATE_FEATURES = {" in out
    buffer = io.StringIO(out)
    assert "LABELS = {\n" in buffer.getvalue()
