"""Dense vector features.

A token value ``{'emb': vector}`` (a 1-D numpy array or a list of floats) is
the attributes ``emb[0]`` ... ``emb[d-1]``: exactly the model CRFsuite trains
from ``d`` scalar keys. Training keeps the vectors as a dense block (distinct
rows + a row per token) whose scores and expected counts are BLAS products;
everything else sees ordinary attributes.
"""

import re

import numpy as np
import pytest

from skcrf import CRFTagger
from skcrf._featurize._labels import encode_labels
from skcrf._featurize._validation import check_sums, token_attributes
from skcrf._featurize._vectors import expand_dense
from skcrf._featurize._vocabulary import StreamEncoder, Vocabulary
from skcrf._training._objective import CRFObjective, select_features


def vector_data(n=80, d=6, seed=0, with_list=True):
    rng = np.random.default_rng(seed)
    words = [f"w{k}" for k in range(12)]
    vectors = {w: rng.normal(size=d) for w in words}
    small = {w: rng.normal(size=3).tolist() for w in words}
    X, y = [], []
    for _ in range(n):
        seq, labels = [], []
        for w in rng.choice(words, int(rng.integers(1, 8))):
            token = {"w": w, "bias": 1.0}
            if w != "w11":  # some tokens without the key
                token["emb"] = vectors[w]
            if with_list and w in ("w0", "w1", "w2"):
                token["e2"] = small[w]  # a list of floats: the general path
            seq.append(token)
            v = vectors[w]
            labels.append("A" if v[0] > 0.3 else "B" if v[1] > 0 else "C")
        X.append(seq)
        y.append(labels)
    return X, y


def as_scalar_keys(X):
    out = []
    for seq in X:
        new = []
        for token in seq:
            t = {}
            for key, value in token.items():
                if isinstance(value, (np.ndarray, list)):
                    t.update({f"{key}[{k}]": float(v) for k, v in enumerate(value)})
                else:
                    t[key] = value
            new.append(t)
        out.append(new)
    return out


def test_token_attributes_vectors():
    assert token_attributes({"e": np.array([1.0, -2.0])}, 0, 0) == [("e[0]", 1.0), ("e[1]", -2.0)]
    assert token_attributes({"e": np.array([1, 2])}, 0, 0) == [("e[0]", 1.0), ("e[1]", 2.0)]
    assert token_attributes({"e": [1.0, np.float32(2.5)]}, 0, 0) == [("e[0]", 1.0), ("e[1]", 2.5)]
    assert token_attributes({"n": {"e": [0.5]}}, 0, 0) == [("n:e[0]", 0.5)]
    # a tuple, or a list of ints, is not a vector (a list of floats is)
    with pytest.raises(TypeError, match="tuple"):
        token_attributes({"e": (0.5,)}, 0, 0)
    with pytest.raises(TypeError, match="list of floats"):
        token_attributes({"e": [1, 2]}, 0, 0)
    # lists of str keep their meaning; an empty list is no attribute
    assert token_attributes({"l": ["a", "b"], "z": []}, 0, 0) == [("l:a", 1.0), ("l:b", 1.0)]
    with pytest.raises(ValueError, match=r"X\[2\]\[3\]: feature 'e' has the value nan at index 1"):
        token_attributes({"e": [1.0, float("nan")]}, 2, 3)
    with pytest.raises(ValueError, match=r"X\[0\]\[1\]: feature 'e' is a 2-D array"):
        token_attributes({"e": np.zeros((2, 2))}, 0, 1)
    with pytest.raises(ValueError, match="empty vector"):
        token_attributes({"e": np.zeros(0)}, 0, 0)
    with pytest.raises(TypeError, match="must hold only str"):
        token_attributes({"e": ["a", 1.0]}, 0, 0)


@pytest.mark.parametrize("dense", [False, True])
def test_vector_length_must_agree(dense):
    X = [[{"e": np.ones(3)}], [{"w": "a"}, {"e": np.ones(4)}]]
    vocabulary = Vocabulary(["kept"])
    with pytest.raises(
        ValueError,
        match=r"X\[1\]\[1\]: feature 'e' is a vector of length 4, "
        r"but X\[0\]\[0\] gives it length 3",
    ):
        vocabulary.encode(X, grow=True, dense=dense)
    assert vocabulary.attributes == ["kept"]
    encoder = StreamEncoder(Vocabulary(), grow=True, dense=dense)
    encoder.add(X[0])
    with pytest.raises(ValueError, match=r"X\[1\]\[1\]: feature 'e'"):
        encoder.add(X[1])


def test_vector_and_scalar_of_the_same_name_is_an_error():
    X = [[{"e": np.ones(2)}, {"e[0]": 1.0}]]
    with pytest.raises(ValueError, match=r"'e\[0\]' is both a dimension of a vector"):
        Vocabulary().encode(X, grow=True, dense=True)


def test_dense_encoding_expands_to_the_scalar_encoding():
    X, _ = vector_data()
    scalar, dense, expanded = Vocabulary(), Vocabulary(), Vocabulary()
    e1 = scalar.encode(as_scalar_keys(X), grow=True)
    e2 = dense.encode(X, grow=True, dense=True)
    e3 = expanded.encode(X, grow=True)  # vectors as CSR entries
    assert scalar.attributes == dense.attributes == expanded.attributes
    assert e2.dense is not None and e3.dense is None
    # distinct rows: one per word (and key combination), not one per token
    assert len(e2.dense.values) <= 13 < len(e2.dense.row_index)
    for other in (e3, expand_dense(e2)):
        np.testing.assert_array_equal(other.indptr, e1.indptr)
        for row in range(len(e1.indptr) - 1):
            a = slice(e1.indptr[row], e1.indptr[row + 1])
            assert sorted(zip(e1.ids[a].tolist(), e1.values[a].tolist())) == sorted(
                zip(other.ids[a].tolist(), other.values[a].tolist())
            )
    check_sums(e2, dense)


@pytest.mark.parametrize(
    "options",
    [{}, {"all_possible_states": True}, {"min_freq": 0.5}, {"min_freq": -50.0}],
)
@pytest.mark.parametrize("n_threads", [1, 2])
def test_dense_objective_equals_scalar_objective(options, n_threads):
    X, y = vector_data()
    labels = [label for seq in y for label in seq]
    label_index, classes = encode_labels(labels)
    v1, v2 = Vocabulary(), Vocabulary()
    e1 = v1.encode(as_scalar_keys(X), grow=True)
    e2 = v2.encode(X, grow=True, dense=True)
    m1, o1 = select_features(e1, label_index, classes, v1.attributes, **options)
    m2, o2 = select_features(e2, label_index, classes, v2.attributes, **options)
    np.testing.assert_array_equal(m1.state_ptr, m2.state_ptr)
    np.testing.assert_array_equal(m1.state_labels, m2.state_labels)
    np.testing.assert_allclose(o1, o2, rtol=1e-13, atol=1e-13)
    w = np.random.default_rng(3).normal(scale=0.3, size=m1.n_features)
    with (
        CRFObjective(e1, m1, o1, c2=0.1, n_threads=n_threads) as f1,
        CRFObjective(e2, m2, o2, c2=0.1, n_threads=n_threads) as f2,
    ):
        l1, g1 = f1.loss_gradient(w)
        l2, g2 = f2.loss_gradient(w)
    assert l2 == pytest.approx(l1, rel=1e-12)
    np.testing.assert_allclose(g2, g1, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("params", [dict(c2=0.1), dict(c1=0.05, c2=0.01)])
def test_fit_matches_scalar_keys_at_convergence(params):
    X, y = vector_data(120)
    vectors = CRFTagger(**params).fit(X, y)
    scalars = CRFTagger(**params).fit(as_scalar_keys(X), y)
    assert vectors.attributes_ == scalars.attributes_
    loss_v = vectors.training_log_.iterations[-1]["loss"]
    loss_s = scalars.training_log_.iterations[-1]["loss"]
    assert loss_v == pytest.approx(loss_s, rel=1e-6)
    assert vectors.predict(X) == scalars.predict(as_scalar_keys(X))


def test_dense_attributes_are_ordinary_attributes(tmp_path):
    X, y = vector_data(60)
    tagger = CRFTagger(c2=0.1, max_iterations=40).fit(X, y)
    assert "emb[0]" in tagger.attributes_ and "e2[2]" in tagger.attributes_
    assert any(a == "emb[5]" for a, _ in tagger.state_features_)
    coef = tagger.coef_
    assert coef.shape == (len(tagger.attributes_), len(tagger.classes_))
    predicted = tagger.predict(X)
    tagger.save(tmp_path / "model.npz")
    assert CRFTagger.load(tmp_path / "model.npz").predict(X) == predicted
    tagger.to_crfsuite(tmp_path / "model.crfsuite")
    assert CRFTagger.from_crfsuite(tmp_path / "model.crfsuite").predict(X) == predicted
    assert tagger.predict(as_scalar_keys(X)) == predicted


def test_online_trainers_take_vectors():
    X, y = vector_data(60)
    a = CRFTagger(algorithm="ap", max_iterations=3, random_state=0).fit(X, y)
    b = CRFTagger(algorithm="ap", max_iterations=3, random_state=0).fit(as_scalar_keys(X), y)
    np.testing.assert_allclose(a._model.weights, b._model.weights)


def _unaligned(values):
    """A read-only float64 copy of ``values`` at an odd address."""
    data = b"\0" + np.asarray(values, dtype=np.float64).tobytes()
    array = np.frombuffer(data, dtype=np.float64, offset=1)
    assert not array.flags.aligned
    return array


def _strided(values, dtype=np.float64):
    array = np.zeros(2 * len(values), dtype=dtype)
    array[::2] = values
    return array[::2]


# Each converts a float64 vector whose numbers every dtype holds exactly
# (multiples of 1/4, small), so the model must be the float64 one, bitwise.
VECTOR_FORMS = {
    "big-endian": lambda v: v.astype(">f8"),
    "little-endian": lambda v: v.astype("<f8"),
    "strided": _strided,
    "reversed view": lambda v: np.ascontiguousarray(v[::-1])[::-1],
    "big-endian strided": lambda v: _strided(v, ">f8"),
    "unaligned": _unaligned,
    "read-only": lambda v: _readonly(v),
    "float32": lambda v: v.astype(np.float32),
    "big-endian float32": lambda v: v.astype(">f4"),
    "float16": lambda v: v.astype(np.float16),
    "longdouble": lambda v: v.astype(np.longdouble),
    "int64 (whole numbers)": lambda v: np.round(v).astype(np.int64),
    "big-endian int32": lambda v: np.round(v).astype(">i4"),
    "uint8": lambda v: np.abs(np.round(v)).astype(np.uint8),
    "bool": lambda v: v > 0,
    "column of a Fortran array": lambda v: np.asfortranarray(np.stack([v, v + 1], axis=1))[:, 0],
}


def _readonly(v):
    v = v.copy()
    v.flags.writeable = False
    return v


def _vector_problem(form):
    rng = np.random.default_rng(4)
    words = [f"w{k}" for k in range(8)]
    vectors = {w: np.round(rng.normal(size=4) * 8) / 4 for w in words}
    X_native, X_form, y = [], [], []
    for _ in range(40):
        # plain str values (not np.str_): the encoder's fast path sees the vectors
        chosen = [str(w) for w in rng.choice(words, int(rng.integers(1, 6)))]
        # the numbers the equivalent list of floats holds
        native = {w: np.array([float(x) for x in form(vectors[w]).tolist()]) for w in chosen}
        X_native.append([{"w": w, "emb": native[w]} for w in chosen])
        X_form.append([{"w": w, "emb": form(vectors[w])} for w in chosen])
        y.append(["A" if native[w][0] > 0 else "B" for w in chosen])
    return X_native, X_form, y


@pytest.mark.parametrize("form", list(VECTOR_FORMS))
def test_vector_arrays_of_any_byte_order_layout_and_numeric_dtype(form):
    # the same model and predictions as float64 vectors of the same numbers
    # (and as lists of floats), through fit (dense block), predict (CSR
    # entries), predict_single and the online trainers
    convert = VECTOR_FORMS[form]
    X_native, X_form, y = _vector_problem(convert)
    as_lists = [[{**t, "emb": t["emb"].tolist()} for t in seq] for seq in X_native]
    for params in (
        dict(c2=0.1, max_iterations=30),
        dict(algorithm="ap", max_iterations=5, random_state=0),
    ):
        native = CRFTagger(**params).fit(X_native, y)
        other = CRFTagger(**params).fit(X_form, y)
        assert other.attributes_ == native.attributes_
        np.testing.assert_array_equal(other._model.weights, native._model.weights)
        expected = native.predict(X_native)
        assert native.predict(as_lists) == expected
        assert other.predict(X_form) == expected
        assert native.predict(X_form) == expected
        assert [native.predict_single(x) for x in X_form] == expected
        assert native.predict_marginals(X_form) == native.predict_marginals(X_native)


@pytest.mark.parametrize(
    "value, error, message",
    [
        (np.array(0.5), ValueError, "is a 0-D array; a vector feature must be 1-D"),
        (np.array(0.5, dtype=">f8"), ValueError, "is a 0-D array"),
        (np.zeros((1, 3)), ValueError, "is a 2-D array"),
        (np.zeros((3, 1), dtype=">f8"), ValueError, "is a 2-D array"),
        (np.zeros(0, dtype=">f8"), ValueError, "empty vector"),
        (np.array([0.5, np.nan, 1.0], dtype=">f8"), ValueError, "the value nan at index 1"),
        (_strided([0.5, np.inf, 1.0]), ValueError, "the value inf at index 1"),
        (np.array([0.5, 1.0], dtype=object), TypeError, "numpy ndarray of dtype object"),
        (np.array([0.5, 1.0], dtype=complex), TypeError, "numpy ndarray of dtype complex128"),
        (np.array(["a", "b"]), TypeError, "numpy ndarray of dtype <U1"),
    ],
)
def test_vector_arrays_that_are_not_vectors_name_their_token(value, error, message):
    tagger = CRFTagger(max_iterations=5).fit(
        [[{"w": "a", "emb": np.ones(3)}, {"w": "b", "emb": -np.ones(3)}]], [["A", "B"]]
    )
    X = [[{"w": "a"}], [{"w": "a"}, {"w": "b"}, {"w": "a", "emb": value}]]
    where = r"\[1\]\[2\]: feature 'emb' "
    with pytest.raises(error, match=r"X" + where + ".*" + re.escape(message)):
        tagger.predict(X)
    with pytest.raises(error, match=r"X" + where + ".*" + re.escape(message)):
        CRFTagger(max_iterations=2).fit(X, [["A"], ["A", "B", "A"]])
    with pytest.raises(error, match=re.escape(message)):
        tagger.predict_single(X[1])
