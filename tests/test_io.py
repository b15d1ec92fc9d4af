"""skcrf.io: saving and loading models without pickle, and refusing bad files."""

import builtins
import json
import math
import os
import pathlib
import warnings
import zipfile

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning, NotFittedError

import skcrf.io
from skcrf import CRFTagger
from skcrf._lbfgs import LBFGSStatus
from skcrf._training_log import TrainingLog
from skcrf.io import FORMAT_VERSION, load_model, save_model

X_TOY = [
    [{"w": "the"}, {"w": "dog"}, {"w": "barks"}],
    [{"w": "a"}, {"w": "cat"}],
    [{"w": "the"}, {"w": "cat", "n": 2.5}, {"w": "sleeps"}],
    [{"w": "a"}, {"w": "dog"}, {"w": "sleeps"}],
]
Y_TOY = [["D", "N", "V"], ["D", "N"], ["D", "N", "V"], ["D", "N", "V"]]
X_NEW = [[{"w": "a"}, {"w": "cat"}, {"w": "barks"}], [{"w": "unseen"}], []]


def fit_quietly(tagger, X=X_TOY, y=Y_TOY):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return tagger.fit(X, y)


def relabel(mapping):
    return [[mapping[label] for label in seq] for seq in Y_TOY]


@pytest.fixture(scope="module")
def tagger():
    return fit_quietly(CRFTagger(c2=0.05, max_iterations=50, all_possible_transitions=True))


@pytest.fixture
def model_path(tagger, tmp_path):
    path = tmp_path / "model.npz"
    save_model(tagger, path)
    return path


def assert_same_model(a, b):
    assert type(b) is type(a)
    assert b.get_params() == a.get_params()
    assert [type(v) for v in b.get_params().values()] == [
        type(v) for v in a.get_params().values()
    ]
    assert b.classes_.dtype == object
    assert b.classes_.tolist() == a.classes_.tolist()
    assert [type(c) for c in b.classes_] == [type(c) for c in a.classes_]
    for name in ("coef_", "transition_"):
        got, want = getattr(b, name), getattr(a, name)
        assert got.dtype == np.float64 and got.shape == want.shape
        # bit-exact, negative zeros included
        assert got.tobytes() == want.tobytes()
    assert b.vectorizer_.get_params() == a.vectorizer_.get_params()
    assert b.vectorizer_.feature_names_ == a.vectorizer_.feature_names_
    assert b.vectorizer_.vocabulary_ == a.vectorizer_.vocabulary_
    tokens = [token for seq in X_TOY + X_NEW for token in seq]
    assert (b.vectorizer_.transform(tokens) != a.vectorizer_.transform(tokens)).nnz == 0
    assert (b.n_features_, b.n_iter_) == (a.n_features_, a.n_iter_)
    assert b.status_ is a.status_
    assert isinstance(b.training_log_, TrainingLog)
    assert b.training_log_.iterations == a.training_log_.iterations
    assert [[type(v) for v in it.values()] for it in b.training_log_.iterations] == [
        [type(v) for v in it.values()] for it in a.training_log_.iterations
    ]
    assert b.training_log_.status is a.training_log_.status
    assert b.training_log_.message == a.training_log_.message
    assert b.training_log_.verbose == a.training_log_.verbose
    assert b.predict(X_TOY + X_NEW) == a.predict(X_TOY + X_NEW)
    assert b.predict_marginals(X_TOY + X_NEW) == a.predict_marginals(X_TOY + X_NEW)


# -- round trips -------------------------------------------------------------


@pytest.mark.parametrize("how", ["method", "function"])
def test_round_trip(tagger, tmp_path, how):
    path = tmp_path / "tagger.npz"
    if how == "method":
        tagger.save(path)
        loaded = CRFTagger.load(path)
    else:
        save_model(tagger, str(path))
        loaded = load_model(str(path))
    assert isinstance(loaded, CRFTagger)
    assert_same_model(tagger, loaded)
    assert loaded.status_ in LBFGSStatus
    assert loaded.predict(X_TOY) == Y_TOY


class Tagger2(CRFTagger):
    pass


def test_load_with_a_class(model_path, tagger):
    loaded = load_model(model_path, cls=Tagger2)
    assert type(loaded) is Tagger2
    assert loaded.predict(X_TOY) == tagger.predict(X_TOY)
    assert type(Tagger2.load(model_path)) is Tagger2


@pytest.mark.parametrize(
    "mapping",
    [
        {"D": 0, "N": 1, "V": -(2**70)},  # ints, one beyond int64
        {"D": 0.5, "N": 1e300, "V": math.inf},
        {"D": True, "N": False, "V": None},
        {"D": "d", "N": 7, "V": None},  # mixed, unsortable
        {"D": ("det", 1), "N": ("n", ("x", None)), "V": ()},
        {"D": b"\x00D", "N": b"N", "V": "V\u00e9\ud800"},
        {"D": np.int64(3), "N": np.int64(-1), "V": np.int64(2**62)},
        {"D": np.uint8(255), "N": np.int8(-5), "V": np.bool_(True)},
        {"D": np.float32(0.1), "N": np.float16(2.5), "V": np.float64(-1e-300)},
        {"D": np.str_("d"), "N": np.str_("n"), "V": np.str_("\u00e9")},
    ],
    ids=["int", "float", "bool-none", "mixed", "tuple", "bytes-unicode", "np.int64",
         "np.small-ints", "np.floats", "np.str_"],
)
def test_label_types_round_trip(tmp_path, mapping):
    original = fit_quietly(CRFTagger(c2=0.05), y=relabel(mapping))
    path = tmp_path / "m.npz"
    save_model(original, path)
    loaded = load_model(path)
    assert_same_model(original, loaded)
    # numpy scalar labels come back as the same numpy type, not Python ones
    assert [type(c) for c in loaded.classes_] == [type(c) for c in original.classes_]
    assert loaded.predict(X_TOY) == relabel(mapping)


def test_encoding_of_special_floats():
    for value in (math.nan, -0.0, math.inf, -math.inf, 5e-324, 0.1):
        encoded = skcrf.io._encode_value(value, "label")
        decoded = skcrf.io._decode_value(json.loads(json.dumps(encoded)), "label")
        assert type(decoded) is float and repr(decoded) == repr(value)
    decoded = skcrf.io._decode_value({"type": "numpy:float32", "value": "nan"}, "label")
    assert type(decoded) is np.float32 and np.isnan(decoded)


def test_parameters_and_log_round_trip(tmp_path):
    original = fit_quietly(
        CRFTagger(c1=np.float64(0.01), c2=0, max_iterations=7, min_freq=0.5, period=3,
                  linesearch="Backtracking", n_jobs=1, verbose=0)
    )
    original.coef_[0, 0] = -0.0  # a negative zero survives too
    path = tmp_path / "m.npz"
    save_model(original, path)
    loaded = load_model(path)
    assert_same_model(original, loaded)
    assert type(loaded.c1) is np.float64 and type(loaded.c2) is int
    assert np.signbit(loaded.coef_[0, 0])
    assert len(loaded.training_log_.iterations) == original.n_iter_ > 0


def test_file_is_a_plain_npz_with_the_documented_layout(model_path, tagger):
    with np.load(model_path, allow_pickle=False) as npz:
        assert sorted(npz.files) == ["coef_indices", "coef_values", "metadata", "transition"]
        doc = json.loads(npz["metadata"].tobytes())
        assert npz["coef_indices"].dtype == np.int64
        assert npz["coef_values"].dtype == np.float64
        assert npz["transition"].shape == (3, 3)
    assert doc["format"] == "skcrf-model" and doc["format_version"] == FORMAT_VERSION
    assert doc["skcrf_version"] == skcrf.__version__
    assert doc["labels"] == [{"type": "str", "value": label} for label in "DNV"]
    assert doc["vocabulary"] == tagger.vectorizer_.feature_names_
    assert doc["status"] == tagger.status_.name


# -- where and how the file is written ---------------------------------------


@pytest.mark.parametrize("name", ["model.npz", "model", "model.skcrf", "my model.bin"])
def test_file_is_exactly_at_the_path(tagger, tmp_path, name):
    save_model(tagger, tmp_path / name)
    assert os.listdir(tmp_path) == [name]
    tagger.save(str(tmp_path / name))  # overwrite in place
    assert os.listdir(tmp_path) == [name]
    assert load_model(tmp_path / name).predict(X_TOY) == tagger.predict(X_TOY)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_file_mode_follows_the_umask(tagger, tmp_path):
    mask = os.umask(0o027)
    try:
        save_model(tagger, tmp_path / "m")
    finally:
        os.umask(mask)
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o640


def test_unfitted_raises_not_fitted(tmp_path):
    with pytest.raises(NotFittedError):
        save_model(CRFTagger(), tmp_path / "m.npz")
    with pytest.raises(NotFittedError):
        CRFTagger().save(tmp_path / "m.npz")
    assert os.listdir(tmp_path) == []


def _partial_savez(file, **arrays):
    file.write(b"PK\x03\x04 partial data")
    raise RuntimeError("disk exploded")


@pytest.mark.parametrize(
    "target, replacement, error",
    [
        ("os.fsync", OSError("fsync failed"), OSError),
        ("os.replace", OSError("rename failed"), OSError),
        ("np.savez_compressed", _partial_savez, RuntimeError),
        ("np.savez_compressed", KeyboardInterrupt(), KeyboardInterrupt),
    ],
)
def test_failed_write_leaves_old_file_and_no_temp_file(
    tagger, tmp_path, monkeypatch, target, replacement, error
):
    path = tmp_path / "model"
    old = fit_quietly(CRFTagger(c2=5.0))
    save_model(old, path)
    old_bytes = path.read_bytes()

    if isinstance(replacement, BaseException):
        def replacement(*args, _exc=replacement, **kwargs):
            raise _exc
    module, attribute = target.split(".")
    monkeypatch.setattr(getattr(skcrf.io, module), attribute, replacement)
    with pytest.raises(error):
        save_model(tagger, path)
    monkeypatch.undo()

    assert os.listdir(tmp_path) == ["model"]
    assert path.read_bytes() == old_bytes
    assert_same_model(old, load_model(path))


def test_unsupported_label_or_parameter_type_is_refused(tagger, tmp_path):
    import copy
    import enum

    class Color(enum.IntEnum):
        RED = 1

    for bad in (object(), frozenset({1}), Color.RED, 1j, ("ok", object())):
        broken = copy.deepcopy(tagger)
        broken.classes_ = np.array(["D", "N", None], dtype=object)
        broken.classes_[2] = bad
        with pytest.raises(TypeError, match="cannot store safely"):
            save_model(broken, tmp_path / "m.npz")
    broken = copy.deepcopy(tagger)
    broken.linesearch = print
    with pytest.raises(TypeError, match="Parameter 'linesearch'"):
        save_model(broken, tmp_path / "m.npz")
    assert os.listdir(tmp_path) == []


# -- refusing bad files -------------------------------------------------------


def read_parts(path):
    with np.load(path, allow_pickle=False) as npz:
        arrays = {key: npz[key] for key in npz.files}
    return json.loads(arrays.pop("metadata").tobytes()), arrays


def write_parts(path, doc, arrays, savez=np.savez, **kwargs):
    text = doc if isinstance(doc, str) else json.dumps(doc)
    with open(path, "wb") as file:
        savez(file, metadata=np.frombuffer(text.encode(), dtype=np.uint8), **arrays, **kwargs)


def test_rewritten_valid_file_still_loads(model_path, tagger):
    # guards the tests below: the rewrite helpers alone do not break a file
    doc, arrays = read_parts(model_path)
    write_parts(model_path, doc, arrays)
    assert_same_model(tagger, load_model(model_path))


@pytest.mark.parametrize("fraction", [0.0, 0.001, 0.1, 0.5, 0.9, 0.99])
def test_truncated_file(model_path, fraction):
    data = model_path.read_bytes()
    for cut in {int(len(data) * fraction), len(data) - 1, len(data) - 30}:
        model_path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match="Cannot load skcrf model"):
            load_model(model_path)


def test_random_byte_flips_are_refused_or_harmless(model_path, tagger):
    data = model_path.read_bytes()
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(150):
        corrupted = bytearray(data)
        for position in rng.integers(0, len(data), size=rng.integers(1, 4)):
            corrupted[position] ^= int(rng.integers(1, 256))
        model_path.write_bytes(bytes(corrupted))
        try:
            loaded = load_model(model_path)
        except ValueError:
            refused += 1
        else:  # only bytes zip ignores (timestamps, local header copies)
            assert_same_model(tagger, loaded)
    assert refused > 100


@pytest.mark.parametrize(
    "content",
    [b"", b"hello, this is not a model\n", b"PK\x03\x04", bytes(range(256)) * 4,
     b"\x93NUMPY\x01\x00"],
    ids=["empty", "text", "zip-magic-only", "binary", "npy-magic"],
)
def test_not_a_model_file(tmp_path, content):
    path = tmp_path / "m.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not an skcrf model file|Cannot load"):
        load_model(path)


def test_other_archives_are_refused(tmp_path):
    path = tmp_path / "m.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hi")
    with pytest.raises(ValueError, match="not an skcrf model file"):
        load_model(path)
    np.save(tmp_path / "a.npy", np.zeros(3))
    with pytest.raises(ValueError, match="not an skcrf model file"):
        load_model(tmp_path / "a.npy")
    with open(path, "wb") as file:
        np.savez(file, metadata=np.frombuffer(b'{"format": "other"}', np.uint8),
                 coef_indices=np.zeros(0, np.int64), coef_values=np.zeros(0),
                 transition=np.zeros((1, 1)))
    with pytest.raises(ValueError, match="not an skcrf model file"):
        load_model(path)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "nope.npz")


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 99])
def test_newer_format_version(model_path, version):
    doc, arrays = read_parts(model_path)
    doc["format_version"] = version
    doc["something_new"] = 1
    write_parts(model_path, doc, arrays)
    with pytest.raises(ValueError, match=(
        f"format version {version}.*reads format version {FORMAT_VERSION}.*upgrade skcrf"
    )):
        load_model(model_path)


@pytest.mark.parametrize("version", [0, -1, "1", 1.0, None, True])
def test_invalid_format_version(model_path, version):
    doc, arrays = read_parts(model_path)
    doc["format_version"] = version
    write_parts(model_path, doc, arrays)
    with pytest.raises(ValueError, match="format version"):
        load_model(model_path)


def _set(path, value):
    def mutate(doc):
        target = doc
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value
    return mutate


@pytest.mark.parametrize(
    "mutate, message",
    [
        (_set(["vocabulary"], KeyError), r"missing keys \['vocabulary'\]"),
        (_set(["training_log", "message"], KeyError), r"training_log: missing keys"),
        (_set(["extra"], 1), r"unexpected keys \['extra'\]"),
        (_set(["labels"], "DNV"), "labels must be a list"),
        (_set(["labels"], []), "no labels"),
        (_set(["labels", 0], {"type": "object", "value": "os.system"}), "unknown value type"),
        (_set(["labels", 0], {"type": "int", "value": "3"}), "invalid int"),
        (_set(["labels", 0], {"type": "int", "value": True}), "invalid int"),
        (_set(["labels", 0], {"type": "str", "value": "N"}), "appears twice"),
        (_set(["labels", 0], {"type": "numpy:int8", "value": 300}), "out of the range"),
        (_set(["labels", 0], {"type": "numpy:object", "value": 1}), "unknown value type"),
        (_set(["labels", 0], {"type": "float", "value": "1_0"}), "invalid float"),
        (_set(["labels", 0], {"type": "str", "value": "D", "x": 1}), "exactly the keys"),
        (_set(["labels", 0], "D"), "expected a tagged value"),
        (_set(["vocabulary", 0], 5), "feature name must be a str"),
        (lambda doc: doc["vocabulary"].append(doc["vocabulary"][0]), "appears twice"),
        (_set(["vectorizer", "dtype"], "object"), "unsupported dtype"),
        (_set(["vectorizer", "sort"], "yes"), "sort must be a bool"),
        (_set(["params", "c2"], {"type": "str", "value": "x"}), "invalid parameters"),
        (_set(["params", "c2"], {"type": "float", "value": "-1.0"}), "invalid parameters"),
        (_set(["params", "__class__"], {"type": "none"}), "unknown parameters"),
        (_set(["params", "evil"], {"type": "int", "value": 1}), "unknown parameters"),
        (_set(["params", "c2"], {"type": "tuple", "value": []}), "parameter 'c2'"),
        (_set(["n_iter"], "3"), "n_iter must be a int"),
        (_set(["estimator"], {"x": 1}), "estimator must be a str"),
        (_set(["n_iter"], -3), "negative"),
        (_set(["n_features"], 10**30), "out of range"),
        (_set(["status"], "__class__"), "unknown optimizer status"),
        (_set(["status"], ["CONVERGED"]), "unknown optimizer status"),
        (_set(["training_log", "iterations"], {}), "iterations must be a list"),
        (_set(["training_log", "iterations", 0, "loss"], 1.0), "expected a tagged value"),
        (_set(["training_log", "status"], "NOPE"), "unknown optimizer status"),
    ],
)
def test_invalid_metadata(model_path, mutate, message):
    doc, arrays = read_parts(model_path)
    mutate(doc)
    write_parts(model_path, doc, arrays)
    with pytest.raises(ValueError, match=message):
        load_model(model_path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{not json", "JSONDecodeError"),
        ('{"format": "skcrf-model", "format": "skcrf-model"}', "duplicate JSON key"),
        ('{"format": "skcrf-model", "format_version": NaN}', "invalid JSON constant"),
        ("[" * 100_000 + "]" * 100_000, "Cannot load"),
        ('"\\ud800 just a string"', "not an skcrf model file"),
    ],
)
def test_invalid_json(model_path, text, message):
    _, arrays = read_parts(model_path)
    write_parts(model_path, text, arrays)
    with pytest.raises(ValueError, match=message):
        load_model(model_path)


def test_invalid_utf8_metadata(model_path):
    _, arrays = read_parts(model_path)
    with open(model_path, "wb") as file:
        np.savez(file, metadata=np.frombuffer(b'{"a": "\xff"}', np.uint8), **arrays)
    with pytest.raises(ValueError, match="UnicodeDecodeError"):
        load_model(model_path)


def _shape_cases():
    def coef_values_short(a):
        a["coef_values"] = a["coef_values"][:-1]

    def transition_wrong(a):
        a["transition"] = np.zeros((4, 4))

    def transition_float32(a):
        a["transition"] = a["transition"].astype(np.float32)

    def transition_1d(a):
        a["transition"] = a["transition"].ravel()

    def coef_index_out_of_range(a):
        a["coef_indices"] = a["coef_indices"].copy()
        a["coef_indices"][-1] = 10**6

    def coef_index_negative(a):
        a["coef_indices"] = a["coef_indices"].copy()
        a["coef_indices"][0] = -1

    def coef_index_repeated(a):
        a["coef_indices"] = a["coef_indices"].copy()
        a["coef_indices"][1] = a["coef_indices"][0]

    def coef_indices_int32(a):
        a["coef_indices"] = a["coef_indices"].astype(np.int32)

    def coef_nan(a):
        a["coef_values"] = a["coef_values"].copy()
        a["coef_values"][0] = np.nan

    def transition_inf(a):
        a["transition"] = a["transition"].copy()
        a["transition"][0, 0] = -np.inf

    def too_many_nonzeros(a):
        a["coef_indices"] = np.arange(10**4, dtype=np.int64)
        a["coef_values"] = np.ones(10**4)

    def complex_values(a):
        a["coef_values"] = a["coef_values"].astype(np.complex128)

    def extra_array(a):
        a["bonus"] = np.zeros(1)

    def missing_array(a):
        del a["transition"]

    return [
        (coef_values_short, "coef_values"),
        (transition_wrong, r"transition.*shape \(3, 3\).*shape \(4, 4\)"),
        (transition_float32, "transition' must be float64"),
        (transition_1d, "transition"),
        (coef_index_out_of_range, "strictly increasing indices below"),
        (coef_index_negative, "strictly increasing indices below"),
        (coef_index_repeated, "strictly increasing"),
        (coef_indices_int32, "coef_indices' must be int64"),
        (coef_nan, "non-finite"),
        (transition_inf, "non-finite"),
        (too_many_nonzeros, "nonzeros"),
        (complex_values, "dtype complex128"),
        (extra_array, r"unexpected \['bonus.npy'\]"),
        (missing_array, r"missing \['transition.npy'\]"),
    ]


@pytest.mark.parametrize("mutate, message", _shape_cases())
def test_inconsistent_arrays(model_path, mutate, message):
    doc, arrays = read_parts(model_path)
    mutate(arrays)
    write_parts(model_path, doc, arrays, savez=np.savez_compressed)
    with pytest.raises(ValueError, match=message):
        load_model(model_path)


def test_vocabulary_shorter_than_the_weights(model_path):
    doc, arrays = read_parts(model_path)
    doc["vocabulary"] = doc["vocabulary"][:-1]
    write_parts(model_path, doc, arrays)
    with pytest.raises(ValueError, match="indices below n_attributes"):
        load_model(model_path)


class _Payload:
    """Unpickling this creates the marker file: proof that code ran."""

    marker = None

    def __reduce__(self):
        return builtins.open, (str(self.marker), "w")


@pytest.mark.parametrize("where", ["coef_values", "metadata", "bonus"])
def test_pickled_object_arrays_are_never_unpickled(model_path, tmp_path, where):
    marker = tmp_path / "PWNED"
    _Payload.marker = marker
    evil = np.empty(1, dtype=object)
    evil[0] = _Payload()
    doc, arrays = read_parts(model_path)
    arrays[where] = evil
    with open(model_path, "wb") as file:
        kwargs = dict(arrays)
        if where != "metadata":
            kwargs["metadata"] = np.frombuffer(json.dumps(doc).encode(), np.uint8)
        np.savez(file, allow_pickle=True, **kwargs)

    # the payload is live: numpy would run it if asked to unpickle
    with np.load(model_path, allow_pickle=True) as npz:
        npz[where]
    assert marker.exists()
    marker.unlink()

    with pytest.raises(ValueError, match="object arrays and pickles are refused|unexpected"):
        load_model(model_path)
    assert not marker.exists()


def _npy_header(shape, descr="<f8"):
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def test_huge_claimed_array_sizes_are_refused_without_allocating(model_path):
    doc, arrays = read_parts(model_path)
    with zipfile.ZipFile(model_path, "w") as archive:
        archive.writestr("metadata.npy", _npy_header((len(json.dumps(doc)),), "|u1")
                         + json.dumps(doc).encode())
        archive.writestr("coef_indices.npy", _npy_header((10**12,), "<i8"))
        archive.writestr("coef_values.npy", _npy_header((10**12,)))
        archive.writestr("transition.npy", _npy_header((2**40, 2**40)))
    with pytest.raises(ValueError, match="does not match its stored size"):
        load_model(model_path)


def test_huge_label_count_claim_is_refused(model_path):
    doc, arrays = read_parts(model_path)
    doc["labels"] = [{"type": "int", "value": k} for k in range(50_000)]
    write_parts(model_path, doc, arrays)
    with pytest.raises(ValueError, match=r"transition.*shape \(50000, 50000\)"):
        load_model(model_path)


def test_zip_bomb_guard(model_path, monkeypatch):
    # The model's JSON compresses well; with a tiny allowance it is refused.
    monkeypatch.setattr(skcrf.io, "_FREE_UNCOMPRESSED_BYTES", 0)
    monkeypatch.setattr(skcrf.io, "_MAX_COMPRESSION_RATIO", 1.01)
    with pytest.raises(ValueError, match="suspicious size"):
        load_model(model_path)


def test_paths_may_be_str_or_pathlike(tagger, tmp_path):
    save_model(tagger, str(tmp_path / "a"))
    save_model(tagger, pathlib.PurePath(tmp_path / "b"))
    assert load_model(pathlib.Path(tmp_path / "a")).predict(X_TOY) == tagger.predict(X_TOY)
    assert load_model(str(tmp_path / "b")).predict(X_TOY) == tagger.predict(X_TOY)
