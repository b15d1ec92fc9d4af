"""CRFsuite's binary model files: read, write, and refuse hostile ones.

Models trained by python-crfsuite are read and must tag, give marginals and
weights exactly as python-crfsuite does; models written here must be opened
by python-crfsuite and tag as skcrf does; hostile files must raise
ValueError (never another exception, never hang).
"""

import json
import os
import struct
import time

import numpy as np
import pytest
from _reference import hashlittle

from skcrf._featurize._vocabulary import Vocabulary
from skcrf._inference._decode import Decoder
from skcrf._model import CRFModel, FittedState
from skcrf._persist._cqdb import hash_keys
from skcrf._persist._crfsuite_file import crfsuite_bytes, read_crfsuite, write_crfsuite

pycrfsuite = pytest.importorskip("pycrfsuite")

WORDS = ["the", "cat", "sat", "on", "mat", "dog", "ran", "a", "big", "über", "日本", "naïve"]
LABELS = ["DT", "NN", "VB", "IN", "JJ"]


# -- helpers -----------------------------------------------------------------


def _token(rng, i, seq):
    word = seq[i]
    token = {
        "w": word,
        "suffix": word[-2:],
        "len": float(len(word)),  # a numeric attribute: its key, this value
        "upper": word[0].isupper(),
        "ctx": {"prev": seq[i - 1] if i else "<s>"},  # nested: ctx:prev:word
    }
    if rng.random() < 0.3:
        token["weight"] = float(rng.uniform(0.1, 2.0))
    return token


def _dataset(seed, n_sequences=60):
    rng = np.random.default_rng(seed)
    X, y = [], []
    for _ in range(n_sequences):
        n = int(rng.integers(2, 9))
        seq = [WORDS[k] for k in rng.integers(len(WORDS), size=n)]
        X.append([_token(rng, i, seq) for i in range(n)])
        y.append([LABELS[k] for k in rng.integers(len(LABELS), size=n)])
    # A label seen only in one-token sequences: it has no transitions.
    for _ in range(5):
        seq = [WORDS[int(rng.integers(len(WORDS)))]]
        X.append([_token(rng, 0, seq)])
        y.append(["SOLO"])
    return X, y


def _train(path, algorithm, params, seed=0):
    X, y = _dataset(seed)
    trainer = pycrfsuite.Trainer(algorithm=algorithm, verbose=False)
    for xseq, yseq in zip(X, y):
        trainer.append(xseq, yseq)
    trainer.set_params(params)
    trainer.train(str(path))
    return X


def _encode(model, X):
    return Vocabulary(model.attributes, model.value_separator).encode(X, grow=False, name="X")


def _split(flat, lengths):
    out, start = [], 0
    for n in lengths:
        out.append(flat[start : start + n])
        start += n
    return out


def _skcrf_tags(model, X):
    encoded = _encode(model, X)
    path = Decoder(model).viterbi(encoded)
    return _split(list(path), encoded.lengths)


def _skcrf_marginals(model, X):
    encoded = _encode(model, X)
    return _split(Decoder(model).marginals(encoded), encoded.lengths)


def _assert_same_as_pycrfsuite(model, tagger, X, strings):
    """Tags, marginals and weights of ``model`` equal the tagger's.

    ``strings[k]`` is CRFsuite's name of label ``k``.
    """
    index = {s: k for k, s in enumerate(strings)}
    tags = _skcrf_tags(model, X)
    marginals = _skcrf_marginals(model, X)
    for xseq, path, probs in zip(X, tags, marginals):
        expected = tagger.tag(xseq)
        assert [index[s] for s in expected] == list(path)
        for t in range(len(xseq)):
            for k, s in enumerate(strings):
                assert abs(tagger.marginal(s, t) - probs[t, k]) <= 1e-9
    info = tagger.info()
    # The dump prints weights with %f: 6 decimals.
    coef = model.coef().tocoo()
    states = {
        (model.attributes[a], strings[label]): w
        for a, label, w in zip(coef.row, coef.col, coef.data)
    }
    assert set(info.state_features) == set(states)
    for key, w in states.items():
        assert abs(info.state_features[key] - w) <= 5.1e-7
    n_labels = model.n_labels
    transitions = {
        (strings[i // n_labels], strings[i % n_labels]): w
        for i, w in zip(model.transition_index, model.transition_weights)
    }
    assert set(info.transitions) == set(transitions)
    for key, w in transitions.items():
        assert abs(info.transitions[key] - w) <= 5.1e-7
    assert info.attributes.keys() == set(model.attributes)
    assert info.labels.keys() == set(strings)


def _assert_models_identical(a, b):
    assert list(a.classes) == list(b.classes)
    assert [type(c) for c in a.classes] == [type(c) for c in b.classes]
    assert a.attributes == b.attributes
    assert a.value_separator == b.value_separator
    for name in ("state_ptr", "state_labels", "transition_index"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    for name in ("state_weights", "transition_weights"):
        x = np.asarray(getattr(a, name), dtype=np.float64)
        y = np.asarray(getattr(b, name), dtype=np.float64)
        assert x.shape == y.shape
        assert np.array_equal(x.view(np.uint64), y.view(np.uint64))  # bit-exact


def _random_model(seed, n_labels=6, n_attributes=40, classes=None):
    rng = np.random.default_rng(seed)
    letters = "abcxyzßéλ日"
    attributes = []
    while len(attributes) < n_attributes:
        name = "".join(rng.choice(list(letters), size=int(rng.integers(1, 30))))
        name = f"f{len(attributes) % 5}:{name}"
        if name not in attributes:
            attributes.append(name)
    mask = rng.random((n_attributes, n_labels)) < 0.3
    mask[rng.integers(n_attributes, size=5)] = False  # attributes without features
    rows, cols = np.nonzero(mask)
    state_ptr = np.zeros(n_attributes + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_attributes), out=state_ptr[1:])
    weights = rng.normal(size=len(rows))
    weights[rng.random(len(rows)) < 0.1] = 0.0  # zero-weight features exist
    if len(weights) > 3:
        weights[3] = -0.0
    flat = np.flatnonzero(rng.random(n_labels * n_labels) < 0.6)
    if classes is None:
        classes = [f"L{k}" for k in range(n_labels)]
    labels = np.empty(n_labels, dtype=object)
    labels[:] = classes
    return CRFModel(
        classes=labels,
        attributes=attributes,
        state_ptr=state_ptr,
        state_labels=cols.astype(np.int32),
        state_weights=weights,
        transition_index=flat.astype(np.int64),
        transition_weights=rng.normal(size=len(flat)),
    )


def _random_sequences(model, seed, n_sequences=30):
    rng = np.random.default_rng(seed)
    X = []
    for _ in range(n_sequences):
        seq = []
        for _ in range(int(rng.integers(1, 7))):
            token = {}
            for a in rng.integers(model.n_attributes, size=int(rng.integers(0, 6))):
                token[model.attributes[a]] = float(rng.uniform(-1.5, 2.0))
            token["unknown attribute"] = 1.0  # not in the model: skipped by both
            seq.append(token)
        X.append(seq)
    return X


def _tagger(source):
    tagger = pycrfsuite.Tagger()
    if isinstance(source, bytes):
        tagger.open_inmemory(source)
    else:
        tagger.open(str(source))
    return tagger


# -- the hash ----------------------------------------------------------------


def _hash_all(keys):
    """hash_keys of the byte strings ``keys`` (as given: no NUL is added)."""
    joined = np.frombuffer(b"".join(keys), dtype=np.uint8)
    return hash_keys(joined, np.array([len(k) for k in keys], dtype=np.int64)).tolist()


def test_hashlittle_known_values():
    # lookup3's published values: the reference, and the package's hash (seed 0).
    assert hashlittle(b"") == 0xDEADBEEF
    assert hashlittle(b"Four score and seven years ago") == 0x17770551
    assert hashlittle(b"Four score and seven years ago", 1) == 0xCD628161
    assert _hash_all([b"", b"Four score and seven years ago"]) == [0xDEADBEEF, 0x17770551]
    assert _hash_all([b"Four score and seven years ago", b""]) == [0x17770551, 0xDEADBEEF]
    assert _hash_all([]) == []


def test_vectorized_hash_equals_scalar():
    rng = np.random.default_rng(0)
    keys = [bytes(rng.integers(1, 256, size=n, dtype=np.uint8)) for n in range(0, 80)]
    keys += [
        bytes(rng.integers(1, 256, size=int(n), dtype=np.uint8))
        for n in rng.integers(0, 40, size=300)
    ]
    keys += [b"x" * 1000, b"y" * 4999, b"z" * 37]  # long keys: a tail of few keys
    joined = np.frombuffer(b"".join(k + b"\0" for k in keys), dtype=np.uint8)
    sizes = np.array([len(k) + 1 for k in keys], dtype=np.int64)
    got = hash_keys(joined, sizes)
    assert got.tolist() == [hashlittle(k + b"\0") for k in keys]
    # one long key alone, and keys without their NUL (any bytes hash)
    assert _hash_all([b"w" * 5000]) == [hashlittle(b"w" * 5000)]
    assert _hash_all(keys) == [hashlittle(k) for k in keys]


# -- reading files written by CRFsuite -----------------------------------------


TRAINED = [
    ("lbfgs", {"c1": 0.0, "c2": 1.0, "max_iterations": 40}),
    (
        "lbfgs",
        {
            "c1": 0.5,
            "c2": 0.01,
            "max_iterations": 60,
            "feature.possible_transitions": True,
            "feature.possible_states": True,
        },
    ),
    ("l2sgd", {"c2": 0.1, "max_iterations": 10}),
    ("ap", {"max_iterations": 8}),
    ("pa", {"max_iterations": 8, "type": 2}),
    ("arow", {"max_iterations": 8}),
]


@pytest.mark.parametrize("algorithm, params", TRAINED)
def test_read_crfsuite_trained_models(tmp_path, algorithm, params):
    path = tmp_path / "model.crfsuite"
    X = _train(path, algorithm, params)
    state = read_crfsuite(path)
    assert isinstance(state, FittedState)
    assert state.params == {} and state.n_iter == 0
    assert state.status is None and state.training_log is None
    model = state.model
    assert model.value_separator == ":"
    assert "SOLO" in list(model.classes)
    assert all(type(c) is str for c in model.classes)
    tagger = _tagger(path)
    assert tagger.labels() == list(model.classes)  # CRFsuite's label-id order
    X_test, _ = _dataset(99, n_sequences=25)
    _assert_same_as_pycrfsuite(model, tagger, X[:20] + X_test, list(model.classes))

    # Bytes and path give the same model; written back, the file is the same
    # byte for byte (CRFsuite's layout, reproduced).
    content = path.read_bytes()
    _assert_models_identical(read_crfsuite(content).model, model)
    _assert_models_identical(read_crfsuite(bytearray(content)).model, model)
    assert crfsuite_bytes(model) == content


def test_read_model_with_no_state_features(tmp_path):
    # Every attribute's weight ends up zero under a huge L1: CRFsuite keeps
    # no attribute; what is left must still read and tag.
    path = tmp_path / "model.crfsuite"
    X = _train(path, "lbfgs", {"c1": 1e6, "max_iterations": 5})
    model = read_crfsuite(path).model
    tagger = _tagger(path)
    _assert_same_as_pycrfsuite(model, tagger, X[:10], list(model.classes))


# -- writing -----------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_written_models_open_in_pycrfsuite(tmp_path, seed):
    model = _random_model(seed, n_labels=2 + seed, n_attributes=20 + 30 * seed)
    path = tmp_path / "m.crfsuite"
    write_crfsuite(model, path)
    content = path.read_bytes()
    assert content == crfsuite_bytes(model)
    assert content[-4:] != b"SKLB" and b"SKLB" not in content[-200:]  # all str
    tagger = _tagger(path)
    X = _random_sequences(model, seed)
    _assert_same_as_pycrfsuite(model, tagger, X, list(model.classes))
    _assert_same_as_pycrfsuite(model, _tagger(content), X[:5], list(model.classes))
    _assert_models_identical(read_crfsuite(path).model, model)
    # Every attribute can be looked up by its string (CQDB hash tables).
    for name in model.attributes:
        tagger.set([{name: 1.0}])
        assert len(tagger.tag()) == 1


def test_many_strings_hash_tables(tmp_path):
    # Enough strings to fill every one of the 256 hash tables with clusters.
    model = _random_model(3, n_labels=3, n_attributes=3000)
    path = tmp_path / "m.crfsuite"
    write_crfsuite(model, path)
    tagger = _tagger(path)
    info = tagger.info()
    assert {name: int(k) for name, k in info.attributes.items()} == {
        name: k for k, name in enumerate(model.attributes)
    }
    _assert_models_identical(read_crfsuite(path).model, model)
    X = _random_sequences(model, 1, n_sequences=20)
    _assert_same_as_pycrfsuite(model, tagger, X, list(model.classes))


def test_non_string_labels_round_trip(tmp_path):
    classes = [3, True, None, 2.5, "x", np.int64(7), float("inf")]
    model = _random_model(11, n_labels=len(classes), classes=classes)
    path = tmp_path / "m.crfsuite"
    write_crfsuite(model, path)
    strings = ["3", "True", "None", "2.5", "x", "7", "inf"]
    tagger = _tagger(path)  # CRFsuite ignores the trailing labels chunk
    assert sorted(tagger.labels()) == sorted(strings)
    X = _random_sequences(model, 2)
    _assert_same_as_pycrfsuite(model, tagger, X, strings)
    back = read_crfsuite(path).model
    _assert_models_identical(back, model)  # types too: ints stay ints, True a bool
    assert type(back.classes[1]) is bool and type(back.classes[5]) is np.int64


def test_labels_argument(tmp_path):
    model = _random_model(5, n_labels=3, classes=[0, 1, 2])
    path = tmp_path / "m.crfsuite"
    write_crfsuite(model, path, labels=["O", "B-PER", "I-PER"])
    tagger = _tagger(path)
    assert tagger.labels() == ["O", "B-PER", "I-PER"]
    _assert_same_as_pycrfsuite(model, tagger, _random_sequences(model, 3), ["O", "B-PER", "I-PER"])
    assert list(read_crfsuite(path).model.classes) == [0, 1, 2]
    # Strings given for str labels: the originals are kept too.
    model = _random_model(5, n_labels=2, classes=["a", "b"])
    write_crfsuite(model, path, labels=["A", "B"])
    assert _tagger(path).labels() == ["A", "B"]
    assert list(read_crfsuite(path).model.classes) == ["a", "b"]


def test_small_models(tmp_path):
    # One label, no attributes, no transitions.
    base = _random_model(0, n_labels=1, n_attributes=3)
    for model in (
        base,
        CRFModel(
            classes=base.classes,
            attributes=[],
            state_ptr=np.zeros(1, np.int64),
            state_labels=np.zeros(0, np.int32),
            state_weights=np.zeros(0),
            transition_index=np.zeros(0, np.int64),
            transition_weights=np.zeros(0),
        ),
    ):
        path = tmp_path / "m.crfsuite"
        write_crfsuite(model, path)
        assert os.path.getsize(path) == len(crfsuite_bytes(model))
        _assert_models_identical(read_crfsuite(path).model, model)
        tagger = _tagger(path)
        assert tagger.tag([{"a": 1.0}, {}]) == ["L0", "L0"]


def test_write_refuses_ambiguous_or_unstorable(tmp_path):
    path = tmp_path / "m.crfsuite"
    with pytest.raises(ValueError, match="both written as '1'"):
        crfsuite_bytes(_random_model(0, n_labels=2, classes=[1, "1"]))
    with pytest.raises(ValueError, match="both written as"):
        crfsuite_bytes(_random_model(0, n_labels=2), labels=["A", "A"])
    with pytest.raises(ValueError, match="2 strings"):
        crfsuite_bytes(_random_model(0, n_labels=3), labels=["A", "B"])
    with pytest.raises(TypeError, match="not a str"):
        crfsuite_bytes(_random_model(0, n_labels=2), labels=["A", 2])
    with pytest.raises(ValueError, match="labels 0 and 1 .* are equal"):
        crfsuite_bytes(_random_model(0, n_labels=2, classes=[1, True]))
    with pytest.raises(TypeError, match="can map back only"):
        crfsuite_bytes(_random_model(0, n_labels=2, classes=[(1, 2), "b"]))
    model = _random_model(0)
    model.attributes[4] = "bad\0name"
    with pytest.raises(ValueError, match="attribute 4 .* NUL"):
        crfsuite_bytes(model)
    model.attributes[4] = "bad\ud800"
    with pytest.raises(ValueError, match="attribute 4 .* UTF-8"):
        crfsuite_bytes(model)
    model = _random_model(0)
    model.attributes[7] = model.attributes[2]
    with pytest.raises(ValueError, match="attributes 2 and 7"):
        write_crfsuite(model, path)
    assert not path.exists()
    model = _random_model(0)
    model.state_weights[0] = np.nan
    with pytest.raises(ValueError, match="non-finite"):
        crfsuite_bytes(model)
    assert os.listdir(tmp_path) == []  # no temp file left behind


def test_write_is_atomic_and_respects_umask(tmp_path):
    model = _random_model(1)
    path = tmp_path / "m.crfsuite"
    path.write_bytes(b"old content")
    old = os.umask(0o027)
    try:
        write_crfsuite(model, path)
    finally:
        os.umask(old)
    assert (os.stat(path).st_mode & 0o777) == 0o640
    assert path.read_bytes() == crfsuite_bytes(model)
    assert os.listdir(tmp_path) == ["m.crfsuite"]
    with pytest.raises(FileNotFoundError):
        write_crfsuite(model, tmp_path / "missing" / "m.crfsuite")
    write_crfsuite(model, str(tmp_path / "s.crfsuite"))  # str paths too
    assert sorted(os.listdir(tmp_path)) == ["m.crfsuite", "s.crfsuite"]


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_crfsuite(tmp_path / "nope.crfsuite")


# -- hostile files -------------------------------------------------------------


def _u32(data, offset):
    return struct.unpack_from("<I", data, offset)[0]


def _patched(data, offset, fmt, *values):
    data = bytearray(data)
    struct.pack_into(fmt, data, offset, *values)
    return bytes(data)


def _with_size(data):
    """``data`` with the header's file size fixed to its length."""
    return _patched(data, 4, "<I", len(data))


def _layout(data):
    fields = struct.unpack_from("<4sI4sIIIIIIIII", data, 0)
    names = (
        "magic",
        "size",
        "type",
        "version",
        "n_features",
        "n_labels",
        "n_attributes",
        "features",
        "labels",
        "attributes",
        "label_refs",
        "attribute_refs",
    )
    return dict(zip(names, fields))


def _check_model_well_formed(model):
    assert np.isfinite(model.state_weights).all()
    assert np.isfinite(model.transition_weights).all()
    assert model.state_ptr[0] == 0 and model.state_ptr[-1] == model.n_states
    assert (np.diff(model.state_ptr) >= 0).all()
    if model.n_states:
        assert 0 <= model.state_labels.min() and model.state_labels.max() < model.n_labels
    if len(model.transition_index):
        assert model.transition_index[0] >= 0
        assert model.transition_index[-1] < model.n_labels**2
    assert len(set(model.attributes)) == model.n_attributes


def _read_or_refuse(data):
    """read_crfsuite(data): a ValueError, or a well-formed model; never else."""
    try:
        state = read_crfsuite(data)
    except ValueError as exc:
        assert str(exc).startswith("Cannot read CRFsuite model (bytes): ")
        assert "corrupted or invalid file (" not in str(exc)  # no safety-net catch
        return None
    _check_model_well_formed(state.model)
    return state.model


@pytest.fixture(scope="module")
def hostile_sources(tmp_path_factory):
    """A CRFsuite-trained file and a written one with a labels chunk."""
    path = tmp_path_factory.mktemp("hostile") / "trained.crfsuite"
    _train(path, "lbfgs", {"c1": 0.1, "c2": 0.1, "max_iterations": 20})
    trained = path.read_bytes()
    written = crfsuite_bytes(
        _random_model(4, n_labels=4, n_attributes=12, classes=[0, 1, None, "x"])
    )
    return {"trained": trained, "written": written}


def _expect_error(data, match):
    with pytest.raises(ValueError, match=match) as info:
        read_crfsuite(data)
    assert "corrupted or invalid file (" not in str(info.value)


def test_hostile_truncation_and_flips(hostile_sources):
    started = time.perf_counter()
    rng = np.random.default_rng(2024)
    accepted = 0
    for name, data in hostile_sources.items():
        reference = read_crfsuite(data).model
        X = _random_sequences(reference, 7, n_sequences=5)
        # Cut exactly before skcrf's labels chunk, a file is a valid CRFsuite
        # file (its labels are the strings).
        valid_cut = data.rfind(b"SKLB")
        # Every cut of the small written file; a sample of the trained one's.
        cuts = (
            range(len(data))
            if name == "written"
            else sorted(set(range(64)) | set(rng.integers(len(data), size=1500).tolist()))
        )
        for cut in cuts:
            assert _read_or_refuse(data[:cut]) is None
            if cut >= 48 and cut != valid_cut:  # the header's size made to agree
                assert _read_or_refuse(_with_size(data[:cut])) is None
        if valid_cut > 0:
            model = _read_or_refuse(_with_size(data[:valid_cut]))
            assert list(model.classes) == ["0", "1", "None", "x"]
        for _ in range(300):
            mutated = bytearray(data)
            for position in rng.integers(len(data), size=int(rng.integers(1, 4))):
                mutated[position] = int(rng.integers(256))
            mutated = bytes(mutated)
            model = _read_or_refuse(mutated)
            if model is not None and mutated != data:
                accepted += 1
                # A harmless change (a weight, padding, an unused field):
                # CRFsuite must still agree with the model read.
                if (
                    max(
                        np.abs(model.state_weights).max(initial=0),
                        np.abs(model.transition_weights).max(initial=0),
                    )
                    < 50
                ):
                    strings = list(model.classes) if name == "trained" else ["0", "1", "None", "x"]
                    _assert_same_as_pycrfsuite(model, _tagger(mutated), X, strings)
    assert accepted > 0  # some flips hit weights
    assert time.perf_counter() - started < 30


def test_hostile_not_a_model():
    for data in (b"", b"lCR", b"PK\x03\x04" + bytes(100), b"\0" * 48):
        _expect_error(data, "not a CRFsuite model file")
    _expect_error(b"lCRF" + bytes(20), "truncated")


def test_hostile_header(hostile_sources):
    data = hostile_sources["trained"]
    layout = _layout(data)
    _expect_error(_patched(data, 4, "<I", len(data) + 1), "file size")
    _expect_error(_patched(data, 8, "4s", b"FOMX"), "model type")
    _expect_error(_patched(data, 12, "<I", 101), "version 101")
    _expect_error(_patched(data, 16, "<I", 7), "features chunk holds")
    _expect_error(_patched(data, 20, "<I", 0), "no labels")
    for field, at in (("n_labels", 20), ("n_attributes", 24)):
        for value in (0xFFFFFFFF, 0x7FFFFFFF, layout[field] + 1):
            _expect_error(_patched(data, at, "<I", value), "labels|attributes")
    for at in range(28, 48, 4):
        for value in (0, 47, len(data) - 1, len(data), 0xFFFFFFFF, 2049):
            _expect_error(_patched(data, at, "<I", value), ".")


def test_hostile_features(hostile_sources):
    data = hostile_sources["trained"]
    layout = _layout(data)
    base = layout["features"]
    n_features = _u32(data, base + 8)
    first = base + 12
    _expect_error(_patched(data, base, "4s", b"FEAX"), "features chunk .* id")
    _expect_error(_patched(data, base + 4, "<I", 0xFFFFFFF0), "features chunk")
    _expect_error(_patched(data, base + 8, "<I", 0xFFFFFFFF), "features")
    _expect_error(_patched(data, base + 8, "<I", n_features - 1), "features")
    _expect_error(_patched(data, first, "<I", 2), "feature 0 has type 2")
    _expect_error(_patched(data, first, "<I", 1), "label references|transition feature 0")
    _expect_error(_patched(data, first + 4, "<I", layout["n_attributes"]), "state feature 0")
    _expect_error(_patched(data, first + 8, "<I", layout["n_labels"]), "state feature 0")
    _expect_error(_patched(data, first + 4, "<I", 0xFFFFFFFF), "state feature 0")
    last = first + 20 * (n_features - 1)  # a transition (CRFsuite: states first)
    assert _u32(data, last) == 1
    _expect_error(_patched(data, last + 4, "<I", layout["n_labels"]), "transition feature")
    for bad in (np.nan, np.inf, -np.inf):
        _expect_error(_patched(data, first + 12, "<d", bad), "feature 0 has a non-finite")
    # Feature 1 made a copy of feature 0: a repeated state feature (and a
    # reference to the wrong source).
    copy = bytearray(data)
    copy[first + 20 : first + 40] = copy[first : first + 20]
    _expect_error(bytes(copy), "refers to feature|appears twice")


def _cqdb_tables(data, offset):
    refs = struct.unpack_from("<512I", data, offset + 24)
    return [(t, refs[2 * t], refs[2 * t + 1]) for t in range(256) if refs[2 * t]]


def test_hostile_cqdb(hostile_sources):
    data = hostile_sources["trained"]
    layout = _layout(data)
    cq = layout["attributes"]
    n = layout["n_attributes"]
    size = _u32(data, cq + 4)
    bwd = _u32(data, cq + 20)
    record = _u32(data, cq + bwd)  # id 0's record
    key = cq + record + 8
    key_size = _u32(data, cq + record + 4)
    where = "attributes CQDB"
    _expect_error(_patched(data, cq, "4s", b"CQDX"), f"{where} .* id")
    _expect_error(_patched(data, cq + 4, "<I", 0xFFFFFFFF), f"{where}")
    _expect_error(_patched(data, cq + 4, "<I", 100), f"{where} .* invalid size")
    _expect_error(_patched(data, cq + 12, "<I", 0x71534462), "byte-order")
    _expect_error(_patched(data, cq + 16, "<I", n - 1), "backward array holds")
    _expect_error(_patched(data, cq + 20, "<I", 0), "no backward array")
    _expect_error(_patched(data, cq + 20, "<I", size - 3), "backward array at offset")
    _expect_error(_patched(data, cq + 20, "<I", 0xFFFFFFFF), "backward array at offset")
    _expect_error(_patched(data, cq + bwd, "<I", 0), "record of id 0 has an invalid offset")
    _expect_error(_patched(data, cq + bwd, "<I", size - 4), "record of id 0")
    _expect_error(_patched(data, cq + bwd + 4, "<I", record), "record of id 1 holds the id 0")
    _expect_error(_patched(data, cq + record, "<i", -1), "record of id 0 holds the id -1")
    _expect_error(_patched(data, cq + record + 4, "<I", 0xFFFFFFFF), "id 0 .* runs outside")
    _expect_error(_patched(data, cq + record + 4, "<I", 0), "id 0 .* runs outside")
    # Unterminated, inner NUL, invalid UTF-8, duplicate.
    _expect_error(_patched(data, key + key_size - 1, "B", ord("x")), "not NUL-terminated|overlap")
    _expect_error(_patched(data, key, "B", 0), "id 0 holds a NUL")
    _expect_error(_patched(data, key, "B", 0xFF), "id 0 is not valid UTF-8")
    # Two records overlapping: id 1 pointed into id 0's record.
    _expect_error(_patched(data, cq + bwd + 4, "<I", record + 2), "record of id 1|overlap")
    names = read_crfsuite(data).model.attributes
    i, j = next(
        (i, j)
        for i in range(n)
        for j in range(i + 1, n)
        if len(names[i].encode()) == len(names[j].encode())
    )
    record_j = _u32(data, cq + bwd + 4 * j)
    copy = bytearray(data)
    raw = names[i].encode()
    copy[cq + record_j + 8 : cq + record_j + 8 + len(raw)] = raw
    _expect_error(bytes(copy), f"ids {i} and {j} have the same string")
    # Same length, different string: the hash tables no longer find it.
    raw = names[j].encode()
    raw = (b"z" if raw[:1] != b"z" else b"y") + raw[1:]
    copy[cq + record_j + 8 : cq + record_j + 8 + len(raw)] = raw
    _expect_error(bytes(copy), "does not match its hash|stops at an empty")


def test_hostile_hash_tables(hostile_sources):
    data = hostile_sources["trained"]
    layout = _layout(data)
    cq = layout["attributes"]
    size = _u32(data, cq + 4)
    tables = _cqdb_tables(data, cq)
    t, table_offset, m = tables[0]
    ref = cq + 24 + 8 * t
    _expect_error(_patched(data, ref, "<I", size), f"hash table {t} at offset")
    _expect_error(_patched(data, ref + 4, "<I", 0xFFFFFFFF), "buckets in all")
    _expect_error(_patched(data, ref, "<I", 0), f"hash table {t} has the offset 0")
    _expect_error(_patched(data, ref + 4, "<I", m + 2), f"table {t} has {m + 2} buckets|hold")
    empty_table = next(u for u in range(256) if u not in {x[0] for x in tables})
    _expect_error(  # python-crfsuite would count (and read) 1000 more records
        _patched(data, cq + 24 + 8 * empty_table + 4, "<I", 2000),
        f"hash table {empty_table} has the offset 0 and 2000 buckets",
    )
    buckets = [struct.unpack_from("<II", data, cq + table_offset + 8 * k) for k in range(m)]
    filled = [k for k in range(m) if buckets[k][1]]
    empty = [k for k in range(m) if not buckets[k][1]]
    k = filled[0]
    _expect_error(
        _patched(data, cq + table_offset + 8 * k, "<I", buckets[k][0] ^ 1), "does not match"
    )
    _expect_error(
        _patched(data, cq + table_offset + 8 * k + 4, "<I", buckets[k][1] + 1), "no record"
    )
    # A full table: CRFsuite would loop forever on an unknown string.
    full = bytearray(data)
    for e in empty:
        struct.pack_into("<I", full, cq + table_offset + 8 * e + 4, buckets[k][1])
    _expect_error(bytes(full), f"hash table {t} has {m} buckets for {m} strings")
    # A string twice in the tables.
    if len(empty):
        _expect_error(
            _patched(data, cq + table_offset + 8 * empty[0], "<II", *buckets[k]),
            "more than one bucket|buckets for",
        )
    # Buckets swapped: a lookup meets an empty bucket before the string's
    # (when the table has an empty bucket between start and the string).
    for k in filled:
        h, off = buckets[k]
        start = (h >> 8) % m
        target = next((e for e in empty if e != start), None)
        if target is None:
            continue
        moved = bytearray(data)
        struct.pack_into("<II", moved, cq + table_offset + 8 * k, 0, 0)
        struct.pack_into("<II", moved, cq + table_offset + 8 * target, h, off)
        reached = all(buckets[(start + d) % m][1] for d in range((target - start) % m)) and (
            (target - start) % m < (k - start) % m
        )
        if not reached:
            _expect_error(bytes(moved), "stops at an empty bucket")
            break


def test_hostile_refs(hostile_sources):
    data = hostile_sources["trained"]
    layout = _layout(data)
    n_labels = layout["n_labels"]
    for field, magic, n in (
        ("label_refs", b"LFRF", n_labels),
        ("attribute_refs", b"AFRF", layout["n_attributes"]),
    ):
        base = layout[field]
        assert data[base : base + 4] == magic
        entries = _u32(data, base + 8)
        first_list = _u32(data, base + 12)
        count = _u32(data, first_list)
        _expect_error(_patched(data, base, "4s", b"XXXX"), "chunk at offset")
        _expect_error(_patched(data, base + 4, "<I", 0xFFFFFFF0), "outside the file")
        _expect_error(_patched(data, base + 8, "<I", n - 1), "entries")
        _expect_error(_patched(data, base + 8, "<I", 0xFFFFFFFF), "do not fit")
        _expect_error(_patched(data, base + 12, "<I", 0), "invalid offset")
        _expect_error(_patched(data, base + 12, "<I", first_list + 1), "invalid offset")
        _expect_error(_patched(data, base + 12, "<I", 0xFFFFFFFC), "invalid offset")
        _expect_error(_patched(data, first_list, "<I", 0xFFFFFFFF), "names .* features")
        if count:
            fid = _u32(data, first_list + 4)
            _expect_error(_patched(data, first_list + 4, "<I", 0xFFFFFFFF), "beyond the")
            _expect_error(_patched(data, first_list + 4, "<I", fid + 1), "refers to (a )?feature")
        if entries > 1 and count:
            # Two entries sharing a list: the features are named twice.
            _expect_error(_patched(data, base + 16, "<I", first_list), "names|refers to feature")
    # CRFsuite's two unused label-reference entries are ignored.
    base = layout["label_refs"]
    assert _u32(data, base + 8) == n_labels + 2
    model = read_crfsuite(_patched(data, base + 12 + 4 * n_labels, "<I", 12345)).model
    _assert_models_identical(model, read_crfsuite(data).model)


def test_hostile_labels_chunk(hostile_sources):
    data = hostile_sources["written"]
    end = data.rindex(b"SKLB")
    good = json.loads(data[end + 12 :])
    assert good["format"] == "skcrf-labels"

    def with_chunk(payload, num=4, size=None, magic=b"SKLB"):
        size = 12 + len(payload) if size is None else size
        return _with_size(data[:end] + struct.pack("<4sII", magic, size, num) + payload)

    def doc(**changes):
        return json.dumps({**good, **changes}).encode()

    assert list(read_crfsuite(with_chunk(doc())).model.classes) == [0, 1, None, "x"]
    _expect_error(with_chunk(doc(), magic=b"JUNK"), "unexpected bytes after")
    _expect_error(with_chunk(doc(), num=3), "holds 3 labels")
    _expect_error(with_chunk(doc(), size=7), "labels chunk .* size")
    _expect_error(with_chunk(b"{not json"), "not valid JSON")
    _expect_error(with_chunk(b"\xff\xfe"), "not ASCII JSON")
    _expect_error(with_chunk(b"[" * 100000 + b"]" * 100000), "JSON")
    _expect_error(with_chunk(b'{"format": 1, "format": 2}'), "duplicate JSON key")
    _expect_error(with_chunk(b"NaN"), "JSON")
    _expect_error(with_chunk(doc(format="other")), "format")
    _expect_error(with_chunk(doc(format_version=2)), "upgrade skcrf")
    _expect_error(with_chunk(doc(extra=1)), "keys")
    _expect_error(with_chunk(doc(labels=good["labels"][:3])), "must list 4 labels")
    labels = list(good["labels"])
    labels[0] = {"type": "bytes", "value": "00"}
    _expect_error(with_chunk(doc(labels=labels)), "not a supported label")
    labels[0] = {"type": "bool", "value": True}
    _expect_error(with_chunk(doc(labels=labels)), "same label twice")  # True and 1
    labels[0] = {"type": "pickle", "value": "x"}
    _expect_error(with_chunk(doc(labels=labels)), "unknown value type")
    _expect_error(_with_size(data + b"\0\0\0"), "labels chunk at offset .* has size")
    _expect_error(_with_size(data[:end] + b"\0" * 8), "unexpected bytes after")


# -- speed -------------------------------------------------------------------


def test_large_model_speed():
    rng = np.random.default_rng(0)
    n_attributes, n_labels, n_states = 100_000, 20, 200_000
    attributes = [f"w[{i % 5 - 2}]:token{i}" for i in range(n_attributes)]
    flat = np.sort(rng.choice(n_attributes * n_labels, n_states, replace=False))
    state_ptr = np.zeros(n_attributes + 1, dtype=np.int64)
    np.cumsum(np.bincount(flat // n_labels, minlength=n_attributes), out=state_ptr[1:])
    classes = np.empty(n_labels, dtype=object)
    classes[:] = [f"T{k}" for k in range(n_labels)]
    model = CRFModel(
        classes,
        attributes,
        state_ptr,
        (flat % n_labels).astype(np.int32),
        rng.normal(size=n_states),
        np.arange(n_labels * n_labels, dtype=np.int64),
        rng.normal(size=n_labels * n_labels),
    )
    started = time.perf_counter()
    content = crfsuite_bytes(model)
    back = read_crfsuite(content).model
    assert time.perf_counter() - started < 10  # ~0.5 s on a laptop
    _assert_models_identical(back, model)


@pytest.mark.parametrize("field, what", [(20, "labels"), (24, "attributes")])
@pytest.mark.parametrize("count", [10**9, 2**32 - 1])
def test_a_huge_count_is_refused_before_any_allocation(field, what, count):
    # no fixed cap: the counts of the header are bounded by what the file can
    # hold; a crafted one fails before anything of its size is allocated
    import struct
    import tracemalloc

    model = _small_model_for_label_cap()
    data = bytearray(crfsuite_bytes(model)[:1024])  # a 1 kB file: its header, then some
    struct.pack_into("<I", data, 4, len(data))
    # the label and attribute counts: the 6th and 7th 32-bit fields of the header
    struct.pack_into("<I", data, field, count)
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=f"gives {count} {what}, but a file of 1024 bytes"):
            read_crfsuite(bytes(data))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100_000


def test_five_thousand_labels_are_written_and_read_back(tmp_path):
    # beyond the former 4,096-label cap: written, read back, same predictions
    from skcrf import CRFTagger

    rng = np.random.default_rng(5)
    n_labels, n_attributes = 5000, 40
    classes = np.array([f"T{k}" for k in range(n_labels)], dtype=object)
    per_attribute = 60
    state_labels = np.sort(
        np.stack(
            [rng.choice(n_labels, per_attribute, replace=False) for _ in range(n_attributes)]
        ),
        axis=1,
    )
    transition_index = np.sort(rng.choice(n_labels * n_labels, 20_000, replace=False))
    model = CRFModel(
        classes,
        [f"a{k}" for k in range(n_attributes)],
        np.arange(n_attributes + 1, dtype=np.int64) * per_attribute,
        state_labels.ravel().astype(np.int32),
        rng.normal(size=n_attributes * per_attribute) * 3,
        transition_index.astype(np.int64),
        rng.normal(size=len(transition_index)),
    )
    path = tmp_path / "m.crfsuite"
    write_crfsuite(model, path)
    back = read_crfsuite(path).model
    _assert_models_identical(back, model)
    original = CRFTagger._from_fitted_state(FittedState(params={}, model=model))
    loaded = CRFTagger.from_crfsuite(path)
    X = [[{f"a{a}": 1.0} for a in rng.integers(n_attributes, size=n)] for n in (1, 5, 12)]
    assert loaded.predict(X) == original.predict(X)
    assert [loaded.predict_single(x) for x in X] == loaded.predict(X)


def _small_model_for_label_cap():
    import numpy as np

    from skcrf._model import CRFModel

    return CRFModel(
        classes=np.array(["A", "B"], dtype=object),
        attributes=["x"],
        state_ptr=np.array([0, 1]),
        state_labels=np.array([1], dtype=np.int32),
        state_weights=np.array([0.5]),
        transition_index=np.array([1]),
        transition_weights=np.array([-0.25]),
    )
