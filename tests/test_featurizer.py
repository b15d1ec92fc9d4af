"""Tests for skcrf._featurize._featurizer.SequenceFeaturizer."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.utils import get_tags
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.validation import check_is_fitted

from skcrf._featurize._featurizer import SequenceFeaturizer, word_shape

SENT = ["Hi", "NASA", "42"]


def upper_and_position(sequence, i):
    """Module-level (picklable) feature function used by several tests."""
    return {"w": sequence[i].upper(), "pos": i, "last": i == len(sequence) - 1}


# --------------------------------------------------------------------------
# structure and exact features
# --------------------------------------------------------------------------


def test_output_structure_and_lengths():
    X = [["a", "b", "c"], [], ["Only"], ["x", "y"]]
    out = SequenceFeaturizer().fit_transform(X)
    assert isinstance(out, list)
    assert [len(s) for s in out] == [3, 0, 1, 2]
    for seq in out:
        assert isinstance(seq, list)
        for feats in seq:
            assert isinstance(feats, dict)
            for key, value in feats.items():
                assert isinstance(key, str)
                assert isinstance(value, (str, bool, int, float))
    assert SequenceFeaturizer().transform([]) == []


def test_exact_features_small_sentence():
    out = SequenceFeaturizer(affix_length=2).fit_transform([SENT])
    hi, nasa, n42 = out[0]
    assert hi == {
        "bias": 1.0,
        "word.lower": "hi",
        "shape": "Xx",
        "shape.short": "Xx",
        "prefix1": "h",
        "prefix2": "hi",
        "suffix1": "i",
        "suffix2": "hi",
        "is_title": True,
        "is_upper": False,
        "is_digit": False,
        "has_hyphen": False,
        "has_digit": False,
        "BOS": True,
        "+1:word.lower": "nasa",
        "+1:shape": "XXXX",
        "+1:is_title": False,
        "+1:is_upper": True,
    }
    assert nasa == {
        "bias": 1.0,
        "word.lower": "nasa",
        "shape": "XXXX",
        "shape.short": "X",
        "prefix1": "n",
        "prefix2": "na",
        "suffix1": "a",
        "suffix2": "sa",
        "is_title": False,
        "is_upper": True,
        "is_digit": False,
        "has_hyphen": False,
        "has_digit": False,
        "-1:word.lower": "hi",
        "-1:shape": "Xx",
        "-1:is_title": True,
        "-1:is_upper": False,
        "+1:word.lower": "42",
        "+1:shape": "dd",
        "+1:is_title": False,
        "+1:is_upper": False,
    }
    assert n42 == {
        "bias": 1.0,
        "word.lower": "42",
        "shape": "dd",
        "shape.short": "d",
        "prefix1": "4",
        "prefix2": "42",
        "suffix1": "2",
        "suffix2": "42",
        "is_title": False,
        "is_upper": False,
        "is_digit": True,
        "has_hyphen": False,
        "has_digit": True,
        "EOS": True,
        "-1:word.lower": "nasa",
        "-1:shape": "XXXX",
        "-1:is_title": False,
        "-1:is_upper": True,
    }


@pytest.mark.parametrize(
    "word, shape, short",
    [
        ("Paris", "Xxxxx", "Xx"),
        ("Washington", "Xxxxx", "Xx"),  # runs are cut at 4
        ("12", "dd", "d"),
        ("U.S.-based", "X.X.-xxxx", "X.X.-x"),
        ("iPhone4", "xXxxxxd", "xXxd"),
        ("Émile", "Xxxxx", "Xx"),
        ("", "", ""),
    ],
)
def test_word_shape(word, shape, short):
    assert word_shape(word) == shape
    assert word_shape(word, collapse=True) == short


def test_affixes_hyphen_and_short_words():
    feats = SequenceFeaturizer().transform([["Co-op", "a"]])[0]
    assert feats[0]["has_hyphen"] is True
    assert [feats[0][f"prefix{k}"] for k in (1, 2, 3)] == ["c", "co", "co-"]
    assert [feats[0][f"suffix{k}"] for k in (1, 2, 3)] == ["p", "op", "-op"]
    # no affix longer than the word
    assert feats[1]["prefix1"] == feats[1]["suffix1"] == "a"
    assert "prefix2" not in feats[1] and "suffix2" not in feats[1]
    no_affix = SequenceFeaturizer(affix_length=0).transform([["Hello"]])[0][0]
    assert not any(k.startswith(("prefix", "suffix")) for k in no_affix)


def test_single_token_has_bos_and_eos():
    (feats,) = SequenceFeaturizer().transform([["Alone"]])[0]
    assert feats["BOS"] is True and feats["EOS"] is True
    assert not any(":" in key for key in feats)


def test_window_zero_and_two():
    X = [["a", "b", "c", "d"]]
    zero = SequenceFeaturizer(window=0).transform(X)[0]
    assert all(":" not in key for feats in zero for key in feats)

    two = SequenceFeaturizer(window=2).transform(X)[0]
    assert two[0]["-2:BOS"] is True
    assert "-1:BOS" not in two[0]  # would duplicate "BOS"
    assert two[0]["+2:word.lower"] == "c"
    assert two[1]["-2:BOS"] is True and two[1]["-1:word.lower"] == "a"
    assert two[2]["+2:EOS"] is True and "-2:BOS" not in two[2]
    assert two[3]["EOS"] is True and two[3]["+2:EOS"] is True
    assert two[3]["-2:word.lower"] == "b"
    assert "+1:EOS" not in two[3]


def test_lowercase_false():
    feats = SequenceFeaturizer(lowercase=False).transform([["The", "Cat"]])[0]
    assert feats[0]["word"] == "The" and "word.lower" not in feats[0]
    assert feats[0]["prefix2"] == "Th"
    assert feats[0]["+1:word"] == "Cat"


def test_tuple_tokens_with_pos_column():
    X = [[("John", "NNP"), ["runs", "VBZ"], ("fast", "RB")]]
    feats = SequenceFeaturizer().transform(X)[0]
    assert feats[0]["word.lower"] == "john"
    assert feats[0]["col1"] == "NNP"
    assert feats[0]["+1:col1"] == "VBZ"
    assert feats[1]["col1"] == "VBZ"
    assert feats[1]["-1:col1"] == "NNP" and feats[1]["+1:col1"] == "RB"
    assert feats[2]["-1:col1"] == "VBZ" and "+1:col1" not in feats[2]
    # the word features are the same as for the bare words
    bare = SequenceFeaturizer().transform([["John", "runs", "fast"]])[0]
    for with_cols, without in zip(feats, bare):
        assert {k: v for k, v in with_cols.items() if "col" not in k} == without


def test_extra_column_value_types():
    X = [[("a", "NN", 3, np.int64(4), 0.5, True, None)]]
    (feats,) = SequenceFeaturizer().transform(X)[0]
    assert feats["col1"] == "NN"
    assert feats["col2"] == 3 and type(feats["col2"]) is int
    assert feats["col3"] == 4 and type(feats["col3"]) is int
    assert feats["col4"] == 0.5
    assert feats["col5"] is True
    assert feats["col6"] == "None"


def test_accepts_tuples_and_arrays_rejects_generators():
    ref = SequenceFeaturizer().transform([["a", "b"], ["c"]])
    assert SequenceFeaturizer().transform((("a", "b"), ("c",))) == ref
    assert SequenceFeaturizer().transform([np.array(["a", "b"]), ["c"]]) == ref
    ragged = np.empty(2, dtype=object)
    ragged[:] = [["a", "b"], ["c"]]
    assert SequenceFeaturizer().transform(ragged) == ref
    # the estimator's rule (skcrf._featurize._validation): a one-shot iterator is rejected,
    # by fit and transform alike, with a message saying to pass list(...)
    for method in ("fit", "transform", "fit_transform"):
        with pytest.raises(TypeError, match=r"^X must be .*generator.*list\(\.\.\.\)"):
            getattr(SequenceFeaturizer(), method)(s for s in [["a", "b"], ["c"]])
        with pytest.raises(TypeError, match=r"^X\[1\] must be .*generator.*list\(\.\.\.\)"):
            getattr(SequenceFeaturizer(), method)([["a"], (w for w in ["b"])])
    assert SequenceFeaturizer().transform(list(s for s in [["a", "b"], ["c"]])) == ref


def test_deterministic():
    X = [["The", "U.S.-based", "firm"], [("x", "NN")]]
    a = SequenceFeaturizer(window=2).transform(X)
    b = SequenceFeaturizer(window=2).transform(X)
    assert a == b
    assert [list(d) for s in a for d in s] == [list(d) for s in b for d in s]


# --------------------------------------------------------------------------
# feature_func
# --------------------------------------------------------------------------


def test_feature_func_overrides_template():
    fz = SequenceFeaturizer(feature_func=upper_and_position, window=3)
    out = fz.fit_transform([["a", "b"], ["c"]])
    assert out == [
        [{"w": "A", "pos": 0, "last": False}, {"w": "B", "pos": 1, "last": True}],
        [{"w": "C", "pos": 0, "last": True}],
    ]


def test_feature_func_receives_raw_sequence():
    seen = []

    def func(sequence, i):
        seen.append((sequence, i))
        return {"x": 1}

    seq = [("a", "NN"), ("b", "VB")]
    SequenceFeaturizer(feature_func=func).transform([seq])
    assert seen == [(seq, 0), (seq, 1)]


def test_feature_func_non_dict_names_indices():
    def bad(sequence, i):
        return {"ok": True} if i == 0 else ["nope"]

    fz = SequenceFeaturizer(feature_func=bad)
    with pytest.raises(TypeError, match=r"X\[2\]\[1\] it returned list"):
        fz.transform([["a"], ["b"], ["c", "d"]])


def test_feature_func_non_str_key_names_indices():
    fz = SequenceFeaturizer(feature_func=lambda s, i: {i: 1.0})
    with pytest.raises(TypeError, match=r"non-str key 0 .*X\[0\]\[0\]"):
        fz.transform([["a"]])


# --------------------------------------------------------------------------
# input errors
# --------------------------------------------------------------------------


def test_error_flat_list_of_str():
    with pytest.raises(
        TypeError, match=r"got a list of str: X\[0\] is the word .John.*\[sentence\]"
    ):
        SequenceFeaturizer().fit_transform(["John", "runs"])
    with pytest.raises(TypeError, match=r"got a list of str"):
        SequenceFeaturizer().fit(["John", "runs"])


def test_error_plain_string():
    with pytest.raises(TypeError, match="X must be a list of sequences.*str"):
        SequenceFeaturizer().transform("John runs")


@pytest.mark.parametrize("X", [5, None, {"a": ["b"]}])
def test_error_not_iterable(X):
    with pytest.raises(TypeError, match="X must be a list of sequences"):
        SequenceFeaturizer().transform(X)


def test_error_bad_sequence_names_index():
    with pytest.raises(TypeError, match=r"X\[1\] must be a sequence .*got int"):
        SequenceFeaturizer().transform([["a"], 3])
    with pytest.raises(TypeError, match=r"X\[1\] is a str \('b'\)"):
        SequenceFeaturizer().transform([["a"], "b"])
    with pytest.raises(TypeError, match=r"X\[0\] is a dict.*already featurized"):
        SequenceFeaturizer().transform([{"w": "a"}])
    with pytest.raises(TypeError, match=r"X\[0\] must be .*set"):
        SequenceFeaturizer().transform([{"a", "b"}])


@pytest.mark.parametrize(
    "token, exc, pattern",
    [
        (3, TypeError, r"X\[1\]\[1\] must be a str or a tuple/list"),
        ({"w": "a"}, TypeError, r"X\[1\]\[1\] .*already featurized"),
        ((), ValueError, r"X\[1\]\[1\] is an empty tuple"),
        ((3, "NN"), TypeError, r"X\[1\]\[1\]: the first element"),
    ],
)
def test_error_bad_token_names_indices(token, exc, pattern):
    X = [["ok"], ["fine", token]]
    with pytest.raises(exc, match=pattern):
        SequenceFeaturizer().transform(X)


@pytest.mark.parametrize(
    "params",
    [
        {"window": -1},
        {"window": 1.5},
        {"affix_length": -2},
        {"lowercase": "yes"},
        {"feature_func": "not callable"},
    ],
)
def test_invalid_params(params):
    fz = SequenceFeaturizer(**params)
    with pytest.raises(InvalidParameterError):
        fz.fit([["a"]])
    with pytest.raises(InvalidParameterError):
        fz.transform([["a"]])


# --------------------------------------------------------------------------
# scikit-learn API
# --------------------------------------------------------------------------


def test_stateless_fit_and_tags():
    fz = SequenceFeaturizer()
    assert get_tags(fz).requires_fit is False
    check_is_fitted(fz)  # does not raise: nothing to learn
    assert fz.fit([["a"]]) is fz
    assert vars(fz) == vars(SequenceFeaturizer())  # fit stores nothing
    # dict output: no feature names, no set_output wrapping
    assert not hasattr(fz, "get_feature_names_out")
    assert not hasattr(fz, "set_output")


def test_clone_get_set_params_repr():
    fz = SequenceFeaturizer(window=2, lowercase=False)
    assert fz.get_params() == {
        "feature_func": None,
        "window": 2,
        "affix_length": 3,
        "lowercase": False,
        "embeddings": None,
        "embedding_window": 0,
    }
    cl = clone(fz)
    assert cl is not fz and cl.get_params() == fz.get_params()
    assert fz.set_params(window=0) is fz and fz.window == 0
    assert repr(SequenceFeaturizer()) == "SequenceFeaturizer()"
    assert repr(fz) == "SequenceFeaturizer(lowercase=False, window=0)"
    with pytest.raises(TypeError):
        SequenceFeaturizer(2)  # keyword-only


@pytest.mark.parametrize("feature_func", [None, upper_and_position])
def test_pickle_round_trip(feature_func):
    X = [["The", "cat"], ["sat"]]
    if feature_func is None:
        X.append([("on", "IN"), ("mats", "NNS")])
    fz = SequenceFeaturizer(feature_func=feature_func, window=2).fit(X)
    fz2 = pickle.loads(pickle.dumps(fz))
    assert fz2.get_params() == fz.get_params()
    assert fz2.transform(X) == fz.transform(X)


class MemorizingTagger(BaseEstimator):
    """Tiny final estimator: remembers X and predicts the majority label."""

    def fit(self, X, y):
        self.X_ = X
        labels = [t for seq in y for t in seq]
        self.label_ = max(sorted(set(labels)), key=labels.count)
        return self

    def predict(self, X):
        return [[self.label_] * len(seq) for seq in X]

    def score(self, X, y=None):
        # more context features on the first token -> higher score
        return float(len(X[0][0]))


def test_pipeline_and_grid_search():
    X = [["John", "lives", "in", "Paris"], ["Mary", "runs"], ["Go", "home", "now"]] * 2
    y = [["B", "O", "O", "B"], ["B", "O"], ["O", "O", "O"]] * 2
    pipe = make_pipeline(SequenceFeaturizer(), MemorizingTagger())
    pipe.fit(X, y)
    tagger = pipe[-1]
    assert [len(s) for s in tagger.X_] == [len(s) for s in X]
    assert tagger.X_[0][0]["word.lower"] == "john"
    assert pipe.predict([["a", "b"]]) == [["O", "O"]]

    search = GridSearchCV(pipe, {"sequencefeaturizer__window": [0, 1, 2]}, cv=2)
    search.fit(X, y)
    assert search.best_params_ == {"sequencefeaturizer__window": 2}
    assert search.best_estimator_[0].window == 2
    assert "-2:word.lower" in search.best_estimator_[-1].X_[0][2]


# --------------------------------------------------------------------------
# property test
# --------------------------------------------------------------------------

words = st.text(min_size=0, max_size=8)
tokens = st.one_of(words, st.tuples(words, st.sampled_from(["NN", "VB", "DT"])))


@settings(max_examples=40, deadline=None)
@given(
    X=st.lists(st.lists(tokens, max_size=6), max_size=4),
    window=st.integers(0, 3),
    affix_length=st.integers(0, 4),
)
def test_property_lengths_and_types(X, window, affix_length):
    fz = SequenceFeaturizer(window=window, affix_length=affix_length)
    if X and all(isinstance(s, str) for s in X):  # cannot happen: lists
        return
    out = fz.transform(X)
    assert [len(s) for s in out] == [len(s) for s in X]
    for seq in out:
        for i, feats in enumerate(seq):
            assert ("BOS" in feats) == (i == 0)
            assert ("EOS" in feats) == (i == len(seq) - 1)
            for key, value in feats.items():
                assert isinstance(key, str)
                assert isinstance(value, (str, bool, int, float))
            offsets = {int(k.split(":")[0]) for k in feats if ":" in k}
            assert all(1 <= abs(d) <= window for d in offsets)
    assert fz.transform(X) == out


# -- embeddings -----------------------------------------------------------------


def _embeddings():
    from skcrf._featurize._embeddings import Embeddings

    rng = np.random.default_rng(0)
    table = {w: rng.normal(size=4) for w in ["paris", "london", "saw", "i", "Rome"]}
    return Embeddings(table), table


def test_embeddings_add_the_word_vectors():
    embeddings, table = _embeddings()
    featurizer = SequenceFeaturizer(embeddings=embeddings, embedding_window=1)
    (seq,) = featurizer.transform([["I", "saw", "Paris", "Berlin"]])
    np.testing.assert_array_equal(seq[0]["emb"], table["i"])  # lower-cased fallback
    np.testing.assert_array_equal(seq[2]["emb"], table["paris"])
    np.testing.assert_array_equal(seq[2]["-1:emb"], table["saw"])
    np.testing.assert_array_equal(seq[2]["+1:emb"], np.zeros(4))  # Berlin: unknown
    assert seq[3]["emb.unknown"] is True and "emb.unknown" not in seq[2]
    assert "+1:emb" not in seq[3] and "-1:emb" not in seq[0]
    assert "+1:emb" not in SequenceFeaturizer(embeddings=embeddings).transform([["a", "b"]])[0][0]
    # the same word gives the same (read-only) array object
    (again,) = featurizer.transform([["Paris"]])
    assert again[0]["emb"] is seq[2]["emb"] and not again[0]["emb"].flags.writeable


def test_embeddings_are_shared_by_clone_and_get_params():
    import copy
    import pickle

    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline

    from skcrf import CRFTagger

    embeddings, table = _embeddings()
    featurizer = SequenceFeaturizer(embeddings=embeddings)
    twin = clone(featurizer)
    assert twin.embeddings is embeddings
    assert np.shares_memory(twin.embeddings.vectors["paris"], table["paris"])
    assert featurizer.get_params(deep=True)["embeddings"] is embeddings
    pipeline = make_pipeline(featurizer, CRFTagger(max_iterations=5))
    assert clone(pipeline).get_params()["sequencefeaturizer__embeddings"] is embeddings
    assert copy.deepcopy(embeddings) is embeddings
    restored = pickle.loads(pickle.dumps(embeddings))
    np.testing.assert_array_equal(restored.lookup("paris"), table["paris"])


def test_embeddings_from_a_plain_dict_and_keyedvectors_like():
    class KeyedVectorsLike:
        vector_size = 2

        def __init__(self):
            self.data = {"a": [1.0, 2.0]}

        def __getitem__(self, word):
            return self.data[word]

        def __contains__(self, word):
            return word in self.data

    for vectors in ({"a": np.array([1.0, 2.0])}, KeyedVectorsLike()):
        (seq,) = SequenceFeaturizer(embeddings=vectors).transform([["a", "b"]])
        assert seq[0]["emb"].tolist() == [1.0, 2.0] and seq[1]["emb"].tolist() == [0.0, 0.0]
    from skcrf._featurize._embeddings import Embeddings

    with pytest.raises(ValueError, match="has 3 values, but vector_size is 2"):
        Embeddings({"a": [1.0, 2.0], "b": [1.0, 2.0, 3.0]}).lookup("b")
    with pytest.raises(TypeError, match="must map words to vectors"):
        Embeddings(5)


def test_embeddings_train_a_tagger():
    from skcrf import CRFTagger

    embeddings, _ = _embeddings()
    X = [["I", "saw", "Paris"], ["I", "saw", "London"], ["Rome", "saw", "I"]]
    y = [["P", "V", "N"], ["P", "V", "N"], ["N", "V", "P"]]
    featurizer = SequenceFeaturizer(embeddings=embeddings, embedding_window=1)
    tagger = CRFTagger(c2=0.01, max_iterations=50).fit(featurizer.transform(X), y)
    assert "emb[0]" in tagger.attributes_ and "+1:emb[3]" in tagger.attributes_
    assert tagger.predict(featurizer.transform(X)) == y
