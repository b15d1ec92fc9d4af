"""skcrf.io: saving and loading fitted states without pickle, refusing bad files,
and reading the format version 1 files of skcrf 0.1."""

import ast
import builtins
import copy
import json
import math
import os
import pathlib
import zipfile

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import skcrf
import skcrf._persist._json
import skcrf._persist._npz
import skcrf.io
from skcrf._model import CRFModel, FittedState
from skcrf._persist._cqdb import cqdb_bytes, encode_strings, read_cqdb
from skcrf._training._lbfgs import LBFGSStatus
from skcrf._training._training_log import TrainingLog
from skcrf._utils._cqdb_index import LazyNames
from skcrf.io import FORMAT_VERSION, load_model, load_state, save_model, save_state

DATA = pathlib.Path(__file__).parent / "data"
V1_PATH = DATA / "model_v1.skcrf"
V1_EXPECTED = json.loads((DATA / "model_v1_expected.json").read_text())
# -- building states directly --------------------------------------------------


def make_log(n=3):
    log = TrainingLog()
    for k in range(1, n + 1):
        log.record(
            {
                "num": k,
                "loss": 10.0 / k,
                "feature_norm": 0.5 * k,
                "error_norm": 1e-3 / k,
                "active_features": 7,
                "linesearch_trials": 1,
                "linesearch_step": 1.0,
                "time": 0.01,
            }
        )
    log.finish(LBFGSStatus.CONVERGED, "Converged.")
    return log


def make_state(classes=("D", "N", "V"), n_attributes=6, seed=0, **overrides):
    """A consistent FittedState: some attribute/label pairs, zero and -0.0
    weights among them, some transitions, an attribute with no feature."""
    rng = np.random.default_rng(seed)
    n_labels = len(classes)
    ptr, labels = [0], []
    for a in range(n_attributes):
        chosen = (
            []
            if a == 1
            else sorted(
                rng.choice(n_labels, rng.integers(1, n_labels + 1), replace=False).tolist()
            )
        )
        labels += chosen
        ptr.append(len(labels))
    weights = rng.normal(size=len(labels))
    weights[::3] = 0.0
    if len(weights) > 1:
        weights[1] = -0.0
    index = np.flatnonzero(rng.random(n_labels * n_labels) < 0.6)
    class_array = np.empty(n_labels, dtype=object)
    class_array[:] = list(classes) if n_labels else []
    model = CRFModel(
        classes=class_array,
        attributes=[f"w:tok{a}" for a in range(n_attributes)],
        state_ptr=np.array(ptr, dtype=np.int64),
        state_labels=np.array(labels, dtype=np.int32),
        state_weights=weights,
        transition_index=index.astype(np.int64),
        transition_weights=rng.normal(size=len(index)),
        value_separator=":",
    )
    state = dict(
        params={
            "c1": 0.0,
            "c2": 0.05,
            "max_iterations": 50,
            "linesearch": "MoreThuente",
            "verbose": False,
            "n_jobs": None,
        },
        model=model,
        n_iter=3,
        status=LBFGSStatus.CONVERGED,
        training_log=make_log(3),
        extra={"n_features": len(labels) + len(index)},
    )
    state.update(overrides)
    return FittedState(**state)


def assert_same_state(a, b):
    assert type(b) is FittedState
    assert b.params == a.params
    assert list(b.params) == list(a.params)
    assert [type(v) for v in b.params.values()] == [type(v) for v in a.params.values()]
    ma, mb = a.model, b.model
    assert type(mb) is CRFModel
    assert mb.classes.dtype == object and mb.classes.ndim == 1
    assert mb.classes.tolist() == list(ma.classes)
    assert [type(c) for c in mb.classes] == [type(c) for c in ma.classes]
    # (a list from load_state; names looked up in place from load_model)
    assert mb.attribute_names() == list(ma.attribute_names())
    assert type(mb.attribute_names()) is list
    assert mb.value_separator == ma.value_separator
    for name, dtype in (
        ("state_ptr", np.int64),
        ("state_labels", np.int32),
        ("state_weights", np.float64),
        ("transition_index", np.int64),
        ("transition_weights", np.float64),
    ):
        got, want = getattr(mb, name), np.asarray(getattr(ma, name), dtype=dtype)
        assert got.dtype == dtype and got.ndim == 1
        assert got.tobytes() == want.tobytes(), name  # bit-exact, -0.0 included
    assert b.n_iter == a.n_iter and type(b.n_iter) is int
    assert b.status is a.status
    if a.training_log is None:
        assert b.training_log is None
    else:
        la, lb = a.training_log, b.training_log
        assert isinstance(lb, TrainingLog)
        assert lb.iterations == la.iterations
        assert [[type(v) for v in it.values()] for it in lb.iterations] == [
            [type(v) for v in it.values()] for it in la.iterations
        ]
        assert lb.status is la.status
        assert (lb.message, lb.verbose) == (la.message, la.verbose)
    assert b.extra == a.extra
    assert [type(v) for v in b.extra.values()] == [type(v) for v in a.extra.values()]


def round_trip(state, tmp_path, name="m.skcrf", format_version=3):
    """Save and load; format 3 (4 with conditioned transitions) keeps every feature."""
    path = tmp_path / name
    if format_version == 3 and state.model.conditioned is not None:
        format_version = 4
    save_state(state, path, format_version=format_version)
    return load_state(path)


def prediction_state(state):
    """``state`` as formats 5 and 6 keep it: the nonzero features, the attributes keeping one."""
    model = state.model
    kept = [
        (model.attributes[a], int(label), weight)
        for a in range(len(model.attributes))
        for label, weight in zip(
            model.state_labels[model.state_ptr[a] : model.state_ptr[a + 1]],
            model.state_weights[model.state_ptr[a] : model.state_ptr[a + 1]],
        )
        if weight != 0
    ]
    attributes = list(dict.fromkeys(name for name, _, _ in kept))
    counts = [sum(name == attribute for name, _, _ in kept) for attribute in attributes]
    keep = np.asarray(model.transition_weights) != 0
    reduced = CRFModel(
        classes=model.classes,
        attributes=attributes,
        state_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        state_labels=np.array([label for _, label, _ in kept], dtype=np.int32),
        state_weights=np.array([weight for _, _, weight in kept], dtype=np.float64),
        transition_index=np.asarray(model.transition_index)[keep],
        transition_weights=np.asarray(model.transition_weights)[keep],
        value_separator=model.value_separator,
    )
    return FittedState(**{**vars(state), "model": reduced})


class StandIn:
    """The two methods persistence needs from an estimator."""

    def __init__(self, state=None):
        self.state = state

    def _get_fitted_state(self):
        if self.state is None:
            raise NotFittedError("StandIn is not fitted.")
        return self.state

    @classmethod
    def _from_fitted_state(cls, state):
        return cls(state)


@pytest.fixture
def state():
    return make_state()


@pytest.fixture
def model_path(state, tmp_path):
    """A format 2 file (the metadata tests edit its JSON attribute list)."""
    path = tmp_path / "model.npz"
    save_state(state, path, format_version=2)
    return path


# -- the module's dependencies -------------------------------------------------


def test_persistence_imports_no_estimator():
    # the format duck-types estimators; only the public skcrf.io knows CRFTagger
    for module in (skcrf._persist._npz, skcrf._persist._json):
        tree = ast.parse(pathlib.Path(module.__file__).read_text())
        for node in ast.walk(tree):  # at any depth: lazy imports count too
            if isinstance(node, ast.ImportFrom):
                assert "_tagger" not in (node.module or ""), ast.dump(node)
                assert all(alias.name != "_tagger" for alias in node.names)
            elif isinstance(node, ast.Import):
                assert all("_tagger" not in alias.name for alias in node.names)


# -- round trips -----------------------------------------------------------------


def test_round_trip(state, tmp_path):
    assert_same_state(state, round_trip(state, tmp_path))


def test_every_feature_is_kept_zero_weights_included(state, tmp_path):
    loaded = round_trip(state, tmp_path)
    assert (loaded.model.state_weights == 0).sum() >= 2
    assert np.signbit(loaded.model.state_weights[1])
    assert loaded.model.n_features == state.model.n_features


def test_save_model_and_load_model_duck_type_the_estimator(state, tmp_path):
    path = tmp_path / "m.skcrf"
    save_model(StandIn(state), path)
    loaded = load_model(path, cls=StandIn)
    assert type(loaded) is StandIn
    assert_same_state(prediction_state(state), loaded.state)
    with np.load(path) as npz:
        assert json.loads(npz["metadata"].tobytes())["estimator"] == (f"{__name__}.StandIn")


def test_load_model_defaults_to_crftagger(model_path, monkeypatch):
    import skcrf._tagger

    calls = []

    def from_state(cls, state):
        calls.append((cls, state))
        return "built"

    monkeypatch.setattr(
        skcrf._tagger.CRFTagger, "_from_fitted_state", classmethod(from_state), raising=False
    )
    assert load_model(model_path) == "built"
    assert calls[0][0] is skcrf._tagger.CRFTagger and type(calls[0][1]) is FittedState


def test_save_model_of_an_unfitted_estimator_writes_nothing(tmp_path):
    with pytest.raises(NotFittedError):
        save_model(StandIn(), tmp_path / "m.npz")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "classes",
    [
        (0, 1, -(2**70)),  # ints, one beyond int64
        (0.5, 1e300, math.inf),
        (True, False, None),
        ("d", 7, None),  # mixed, unsortable
        (("det", 1), ("n", ("x", None)), ()),
        (b"\x00D", b"N", "V\u00e9\ud800"),
        (np.int64(3), np.int64(-1), np.int64(2**62)),
        (np.uint8(255), np.int8(-5), np.bool_(True)),
        (np.float32(0.1), np.float16(2.5), np.float64(-1e-300)),
        (np.str_("d"), np.str_("n"), np.str_("\u00e9")),
        ("only",),
    ],
    ids=[
        "int",
        "float",
        "bool-none",
        "mixed",
        "tuple",
        "bytes-unicode",
        "np.int64",
        "np.small-ints",
        "np.floats",
        "np.str_",
        "one-label",
    ],
)
def test_label_types_round_trip(tmp_path, classes):
    original = make_state(classes=classes)
    loaded = round_trip(original, tmp_path)
    assert_same_state(original, loaded)
    # numpy scalar labels come back as the same numpy type, not Python ones
    assert [type(c) for c in loaded.model.classes] == [type(c) for c in classes]


def test_classes_given_as_a_list_or_typed_array(tmp_path):
    for classes in (["a", "b"], np.array([3, 5])):
        state = make_state()
        state.model = CRFModel(
            classes=classes,
            attributes=[],
            state_ptr=[0],
            state_labels=[],
            state_weights=[],
            transition_index=[1],
            transition_weights=[0.5],
        )
        loaded = round_trip(state, tmp_path)
        assert loaded.model.classes.tolist() == list(classes)
        assert [type(c) for c in loaded.model.classes] == [type(c) for c in classes]
        assert loaded.model.state_ptr.tolist() == [0]


def test_encoding_of_special_floats():
    for value in (math.nan, -0.0, math.inf, -math.inf, 5e-324, 0.1):
        encoded = skcrf._persist._json.encode_value(value, "label")
        decoded = skcrf._persist._json.decode_value(json.loads(json.dumps(encoded)), "label")
        assert type(decoded) is float and repr(decoded) == repr(value)
    decoded = skcrf._persist._json.decode_value({"type": "numpy:float32", "value": "nan"}, "label")
    assert type(decoded) is np.float32 and np.isnan(decoded)


@pytest.mark.parametrize(
    "item, decoded",
    [
        ({"type": "none"}, None),
        ({"type": "str", "value": "B-PER"}, "B-PER"),
        ({"value": "", "type": "str"}, ""),
        ({"type": "bool", "value": False}, False),
        ({"type": "int", "value": 3}, 3),
    ],
)
def test_decode_value_of_plain_scalars(item, decoded):
    got = skcrf._persist._json.decode_value(item, "label 0")
    assert type(got) is type(decoded) and got == decoded
    plain = skcrf._persist._json.plain_value(item)  # (none, str and bool; the others not)
    if item["type"] == "int":
        assert plain is skcrf._persist._json.NOT_PLAIN
    else:
        assert type(plain) is type(decoded) and plain == decoded


@pytest.mark.parametrize(
    "item",
    [
        {"type": "none", "value": None},
        {"type": "str", "value": 1},
        {"type": "str", "label": "a"},
        {"type": "str"},
        {"type": "bool", "value": 1},
        {"type": "bool", "value": "true"},
        {"kind": "none"},
        {"type": "none", "extra": 0},
        ["str", "a"],
        "a",
    ],
)
def test_decode_value_refuses_near_misses(item):
    # the common scalars are answered first: what is not exactly one of
    # them still goes through every check
    with pytest.raises(ValueError, match="label 0"):
        skcrf._persist._json.decode_value(item, "label 0")
    assert skcrf._persist._json.plain_value(item) is skcrf._persist._json.NOT_PLAIN


def test_parameters_extra_and_log_round_trip(tmp_path):
    log = make_log(4)
    log.verbose = 2
    log.iterations[0]["dev_accuracy"] = np.float64(0.75)
    original = make_state(
        params={
            "c1": np.float64(0.01),
            "c2": 0,
            "max_iterations": None,
            "linesearch": "Backtracking",
            "weights": (1, 2.5),
            "names": ["a", ("b",)],
            "options": {"x": {"y": [None, b"z"]}},
            "flag": np.bool_(False),
        },
        training_log=log,
        status=LBFGSStatus.MAX_ITERATIONS,
        n_iter=np.int64(4),
        extra={"nested": {"a": [1, 2.0, "3"]}, "empty": {}, "t": ()},
    )
    loaded = round_trip(original, tmp_path)
    original.n_iter = 4
    assert_same_state(original, loaded)
    assert type(loaded.params["c1"]) is np.float64 and type(loaded.params["c2"]) is int
    assert loaded.training_log.verbose == 2


def test_optional_parts_may_be_empty(tmp_path):
    original = make_state(status=None, training_log=None, extra={}, params={}, n_iter=0)
    assert_same_state(original, round_trip(original, tmp_path))


def test_empty_model(tmp_path):
    # no attributes, no state features, no transition features
    model = CRFModel(
        classes=np.array(["x"], dtype=object),
        attributes=[],
        state_ptr=np.zeros(1, np.int64),
        state_labels=np.zeros(0, np.int32),
        state_weights=np.zeros(0),
        transition_index=np.zeros(0, np.int64),
        transition_weights=np.zeros(0),
    )
    original = make_state(model=model)
    assert_same_state(original, round_trip(original, tmp_path))


def test_attribute_names_and_separator_round_trip(tmp_path):
    state = make_state()
    state.model.attributes = ["w:\u00e9t\u00e9", "", "a=b:c", "\ud800", "x" * 1000, "bias"]
    state.model.value_separator = "="
    # (a lone surrogate: format 2, the default's fallback, which keeps every feature)
    assert_same_state(state, round_trip(state, tmp_path, format_version=None))


def test_format_2_is_a_plain_npz_with_the_documented_layout(model_path, state):
    with np.load(model_path, allow_pickle=False) as npz:
        assert sorted(npz.files) == sorted(
            [
                "metadata",
                "state_ptr",
                "state_labels",
                "state_weights",
                "transition_index",
                "transition_weights",
            ]
        )
        doc = json.loads(npz["metadata"].tobytes())
        dtypes = {name: npz[name].dtype for name in npz.files}
        assert npz["state_ptr"].shape == (len(state.model.attributes) + 1,)
    assert dtypes == {
        "metadata": np.uint8,
        "state_ptr": np.int64,
        "state_labels": np.int32,
        "state_weights": np.float64,
        "transition_index": np.int64,
        "transition_weights": np.float64,
    }
    assert set(doc) == {
        "format",
        "format_version",
        "skcrf_version",
        "estimator",
        "params",
        "labels",
        "attributes",
        "value_separator",
        "n_iter",
        "status",
        "training_log",
        "extra",
    }
    assert doc["format"] == "skcrf-model" and doc["format_version"] == 2
    assert doc["skcrf_version"] == skcrf.__version__
    assert doc["estimator"] is None
    assert doc["labels"] == [{"type": "str", "value": label} for label in "DNV"]
    assert doc["attributes"] == state.model.attributes
    assert doc["value_separator"] == ":"
    assert doc["status"] == "CONVERGED" and doc["n_iter"] == 3
    assert doc["extra"] == {"n_features": {"type": "int", "value": state.model.n_features}}


def test_format_3_is_a_stored_npz_with_the_names_in_a_cqdb_chunk(state, tmp_path):
    path = tmp_path / "m.npz"
    save_state(state, path, format_version=3)
    with zipfile.ZipFile(path) as archive:
        # stored, not deflated: loading reads the arrays as they lie
        assert {info.compress_type for info in archive.infolist()} == {zipfile.ZIP_STORED}
    with np.load(path, allow_pickle=False) as npz:
        assert list(npz.files) == [
            "metadata",
            "attributes",
            "state_ptr",
            "state_labels",
            "state_weights",
            "transition_index",
            "transition_weights",
        ]
        doc = json.loads(npz["metadata"].tobytes())
        chunk = npz["attributes"]
        assert chunk.dtype == np.uint8 and chunk.ndim == 1
        for name in ("state_ptr", "state_labels", "state_weights"):
            assert np.array_equal(npz[name], getattr(state.model, name))
    n = len(state.model.attributes)
    # format 3 for every model without input-conditioned transitions (4 holds them)
    assert doc["format_version"] == 3 and FORMAT_VERSION == 6 and doc["n_attributes"] == n
    assert "attributes" not in doc
    # exactly CRFsuite's string database of the names, ids in order
    names = state.model.attributes
    assert chunk.tobytes() == cqdb_bytes(*encode_strings(names, "attribute"))
    assert read_cqdb(chunk.tobytes(), 0, n, "attributes", 0)[0] == names


def _with_kept_name(state, name):
    """``state`` with ``name`` for its last attribute that keeps a nonzero feature."""
    model = state.model
    state.model = model.with_weights(model.weights)
    ptr, weights = model.state_ptr, model.state_weights
    kept = [a for a in range(len(model.attributes)) if weights[ptr[a] : ptr[a + 1]].any()]
    state.model.attributes = list(model.attributes)
    state.model.attributes[kept[-1]] = name
    return state


@pytest.mark.parametrize(
    "name, default", [("w:a\0b", 6), ("w:\ud800", 2)], ids=["nul", "lone-surrogate"]
)
def test_names_a_format_cannot_hold_are_saved_in_format_2(state, tmp_path, name, default):
    # a CQDB chunk (formats 3 to 5) holds no NUL; no format but 2 holds a
    # str that is not valid Unicode
    state = _with_kept_name(state, name)
    path = tmp_path / "m.npz"
    save_state(state, path)
    with np.load(path) as npz:
        assert json.loads(npz["metadata"].tobytes())["format_version"] == default
    names = load_state(path).model.attributes
    lazy = load_model(path)._fitted_model().attributes  # (format 6: looked up in place)
    assert (lazy.id_of(name) if default == 6 else lazy.index(name)) == names.index(name) >= 0
    with pytest.raises(ValueError, match="cannot be saved in format 3.*format_version=2"):
        save_state(state, path, format_version=3)
    with pytest.raises(ValueError, match="format_version=4 is the format of models with"):
        save_state(state, path, format_version=4)
    with pytest.raises(ValueError, match="cannot be saved in format 5.*format_version=2"):
        save_state(state, path, format_version=5)
    if default == 2:
        with pytest.raises(ValueError, match="cannot be saved in format 6.*format_version=2"):
            save_state(state, path, format_version=6)
    with pytest.raises(ValueError, match="format_version must be None, 2, 3, 4, 5 or 6"):
        save_state(state, path, format_version=7)


def test_format_3_loads_lazily_for_estimators_and_whole_for_load_state(state, tmp_path):
    path = tmp_path / "m.npz"
    save_state(state, path, format_version=3)
    assert type(load_state(path).model.attributes) is list
    lazy = load_state(path, lazy_attributes=True).model
    assert isinstance(lazy.attributes, LazyNames)
    assert len(lazy.attributes) == len(state.model.attributes)
    assert [lazy.attributes.id_of(n) for n in state.model.attributes] == list(
        range(len(state.model.attributes))
    )
    assert lazy.attribute_names() == state.model.attributes


def test_format_3_damaged_names(state, tmp_path):
    path = tmp_path / "m.npz"
    save_state(state, path, format_version=3)
    doc, arrays = read_parts(path)
    chunk = arrays["attributes"].copy()
    bwd = int(chunk[20:24].view("<u4")[0])
    record = int(chunk[bwd : bwd + 4].view("<u4")[0])
    # a byte of id 0's name: load_state (which lists) names the damage; the
    # lazy load finds it too, at its first lookup (the name no longer has its
    # bucket's hash: the first lookup verifies every bucket and record), and
    # every lookup after it, naming the file
    chunk[record + 8] = 0xFF
    bad = tmp_path / "bad.npz"
    write_parts(bad, doc, {**arrays, "attributes": chunk})
    with pytest.raises(ValueError, match="Cannot load skcrf model.*id 0 is not valid UTF-8"):
        load_state(bad)
    lazy = load_state(bad, lazy_attributes=True).model
    for name in (state.model.attributes[-1], "absent", state.model.attributes[-1]):
        with pytest.raises(
            ValueError, match=r"Cannot load skcrf model .*bad\.npz.*not its string's"
        ):
            lazy.attributes.id_of(name)
    with pytest.raises(ValueError, match="Cannot load skcrf model.*id 0 is not valid UTF-8"):
        lazy.attribute_names()
    # structure damaged: refused at once, lazily or not
    for lazy_attributes in (False, True):
        chunk = arrays["attributes"].copy()
        chunk[:4] = list(b"CQDX")
        write_parts(bad, doc, {**arrays, "attributes": chunk})
        with pytest.raises(ValueError, match="Cannot load skcrf model"):
            load_state(bad, lazy_attributes=lazy_attributes)
        write_parts(bad, doc, {**arrays, "attributes": arrays["attributes"][:-4]})
        with pytest.raises(ValueError, match="Cannot load skcrf model.*not one CQDB chunk"):
            load_state(bad, lazy_attributes=lazy_attributes)
    write_parts(bad, {**doc, "n_attributes": 10**9}, arrays)
    with pytest.raises(ValueError, match="cannot hold 1000000000 attribute names"):
        load_state(bad)


# -- where and how the file is written ---------------------------------------


@pytest.mark.parametrize("name", ["model.npz", "model", "model.skcrf", "my model.bin"])
def test_file_is_exactly_at_the_path(state, tmp_path, name):
    save_state(state, tmp_path / name)
    assert os.listdir(tmp_path) == [name]
    save_state(state, str(tmp_path / name))  # overwrite in place
    assert os.listdir(tmp_path) == [name]
    assert_same_state(prediction_state(state), load_state(tmp_path / name))


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_file_mode_follows_the_umask(state, tmp_path):
    mask = os.umask(0o027)
    try:
        save_state(state, tmp_path / "m")
    finally:
        os.umask(mask)
    assert (tmp_path / "m").stat().st_mode & 0o777 == 0o640


def _partial_savez(file, **arrays):
    file.write(b"PK\x03\x04 partial data")
    raise RuntimeError("disk exploded")


@pytest.mark.parametrize(
    "target, replacement, error",
    [
        ("os.fsync", OSError("fsync failed"), OSError),
        ("os.replace", OSError("rename failed"), OSError),
        ("np.savez", _partial_savez, RuntimeError),
        ("np.savez", KeyboardInterrupt(), KeyboardInterrupt),
    ],
)
@pytest.mark.parametrize("version", [3, None])
def test_failed_write_leaves_old_file_and_no_temp_file(
    state, tmp_path, monkeypatch, target, replacement, error, version
):
    if target == "np.savez" and version is None:
        target = "skcrf._persist._npz.aligned_npz_bytes"  # (format 5 is not written by numpy)
        if not isinstance(replacement, BaseException):
            replacement = RuntimeError("disk exploded")
    path = tmp_path / "model"
    old = make_state(seed=1)
    save_state(old, path, format_version=version)
    old_bytes = path.read_bytes()

    if isinstance(replacement, BaseException):

        def replacement(*args, _exc=replacement, **kwargs):
            raise _exc

    if target.startswith("skcrf."):
        monkeypatch.setattr(target, replacement)
    else:
        module, attribute = target.split(".")
        monkeypatch.setattr(getattr(skcrf._persist._npz, module), attribute, replacement)
    with pytest.raises(error):
        save_state(state, path, format_version=version)
    monkeypatch.undo()

    assert os.listdir(tmp_path) == ["model"]
    assert path.read_bytes() == old_bytes
    assert_same_state(old if version else prediction_state(old), load_state(path))


def _with_label(bad):
    def mutate(state):
        classes = np.empty(3, dtype=object)
        classes[:] = ["D", "N", None]
        classes[2] = bad
        state.model.classes = classes

    return mutate


def _set_model(name, value):
    def mutate(state):
        setattr(state.model, name, value)

    return mutate


def _set_state(name, value):
    def mutate(state):
        setattr(state, name, value)

    return mutate


def _edit_array(name, index, value):
    def mutate(state):
        array = np.array(getattr(state.model, name))
        array[index] = value
        setattr(state.model, name, array)

    return mutate


class _Color(int):
    pass


@pytest.mark.parametrize(
    "mutate, error, message",
    [
        (_with_label(object()), TypeError, "cannot store safely"),
        (_with_label(frozenset({1})), TypeError, "cannot store safely"),
        (_with_label(_Color(1)), TypeError, "cannot store safely"),
        (_with_label(1j), TypeError, "cannot store safely"),
        (_with_label(("ok", object())), TypeError, "cannot store safely"),
        (_with_label(["a"]), TypeError, "unhashable"),
        (_with_label("D"), ValueError, "same label twice"),
        (_set_model("classes", np.array([], dtype=object)), ValueError, "at least one label"),
        (_set_model("classes", np.array([["D", "N", "V"]], dtype=object)), ValueError, "1-D"),
        (_set_state("params", {"linesearch": print}), TypeError, "Parameter 'linesearch'"),
        (_set_state("params", {"__class__": 1}), TypeError, "not a valid parameter name"),
        (_set_state("params", {"a": {1: 2}}), TypeError, "not a str"),
        (_set_state("params", [("c2", 1.0)]), TypeError, "params must be a dict"),
        (_set_state("extra", {"x": object()}), TypeError, "Extra value 'x'"),
        (_set_state("extra", {1: 2}), TypeError, "extra key"),
        (_set_state("n_iter", 1.5), TypeError, "n_iter must be an int"),
        (_set_state("n_iter", -1), ValueError, "negative"),
        (_set_state("status", "CONVERGED"), TypeError, "LBFGSStatus"),
        (_set_state("training_log", {"iterations": []}), TypeError, "TrainingLog"),
        (_set_state("model", None), TypeError, "CRFModel"),
        (_set_model("attributes", ["a", "b", 3, "d", "e", "f"]), TypeError, "Attribute 2"),
        (_set_model("attributes", ["a"] * 6), ValueError, "same name twice"),
        (_set_model("value_separator", ""), TypeError, "value_separator"),
        (_set_model("attributes", ["a"]), ValueError, "state_ptr has 7 entries"),
        (_edit_array("state_weights", 0, np.nan), ValueError, "non-finite"),
        (_edit_array("transition_weights", 0, np.inf), ValueError, "non-finite"),
        (_edit_array("state_labels", 0, 3), ValueError, r"label indices in \[0, 3\)"),
        (_edit_array("state_labels", 0, -1), ValueError, "label indices"),
        (_edit_array("state_ptr", 0, 1), ValueError, "non-decreasing from 0"),
        (_edit_array("state_ptr", 3, 0), ValueError, "non-decreasing"),
        (_edit_array("transition_index", 0, 9), ValueError, "transition_index"),
        (_set_model("state_weights", np.zeros(2)), ValueError, "different lengths"),
        (_set_model("state_labels", np.array(["a"])), ValueError, "integer array"),
        (_set_model("state_ptr", np.zeros((2, 2), np.int64)), ValueError, "1-D integer"),
        (_set_model("state_weights", np.array(["x"])), ValueError, "1-D float"),
        (_set_model("state_ptr", np.array([2**64 - 1], np.uint64)), ValueError, "int64"),
    ],
)
def test_invalid_states_are_refused_and_nothing_is_written(tmp_path, mutate, error, message):
    state = make_state()
    mutate(state)
    with pytest.raises(error, match=message):
        save_state(state, tmp_path / "m.npz")
    assert os.listdir(tmp_path) == []


def test_labels_strictly_increasing_within_an_attribute_on_save(tmp_path):
    state = make_state(classes=("a", "b"), n_attributes=1)
    state.model.state_ptr = np.array([0, 2])
    state.model.state_labels = np.array([1, 0], np.int32)
    state.model.state_weights = np.ones(2)
    with pytest.raises(ValueError, match="strictly increasing within an attribute"):
        save_state(state, tmp_path / "m")
    state.model.state_labels = np.array([0, 1], np.int32)
    save_state(state, tmp_path / "m")  # but may restart at a new attribute
    state.model.attributes = ["x", "y"]
    state.model.state_ptr = np.array([0, 1, 2])
    state.model.state_labels = np.array([1, 0], np.int32)
    assert_same_state(state, round_trip(state, tmp_path))


def test_not_a_state_is_refused(tmp_path):
    with pytest.raises(TypeError, match="FittedState"):
        save_state({"model": None}, tmp_path / "m")
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


def test_rewritten_valid_file_still_loads(model_path, state):
    # guards the tests below: the rewrite helpers alone do not break a file
    doc, arrays = read_parts(model_path)
    write_parts(model_path, doc, arrays)
    assert_same_state(state, load_state(model_path))


@pytest.mark.parametrize("fraction", [0.0, 0.001, 0.1, 0.5, 0.9, 0.99])
@pytest.mark.parametrize("which", ["v2", "v1"])
def test_truncated_file(model_path, fraction, which):
    data = (model_path if which == "v2" else V1_PATH).read_bytes()
    for cut in {int(len(data) * fraction), len(data) - 1, len(data) - 30}:
        model_path.write_bytes(data[:cut])
        with pytest.raises(ValueError, match="Cannot load skcrf model"):
            load_state(model_path)


@pytest.mark.parametrize("which", ["v5", "v3", "v2", "v1"])
def test_random_byte_flips_are_refused_or_harmless(model_path, state, tmp_path, which):
    source = {"v2": model_path, "v1": V1_PATH}.get(which, tmp_path / f"{which}.npz")
    if which in ("v3", "v5"):
        save_state(state, source, format_version=int(which[1]))
    data = source.read_bytes()
    original = load_state(source)
    rng = np.random.default_rng(0)
    refused = 0
    for _ in range(150):
        corrupted = bytearray(data)
        for position in rng.integers(0, len(data), size=rng.integers(1, 4)):
            corrupted[position] ^= int(rng.integers(1, 256))
        model_path.write_bytes(bytes(corrupted))
        for lazy in (False, True):
            try:
                loaded = load_state(model_path, lazy_attributes=lazy)
                names = loaded.model.attribute_names()
            except ValueError:
                refused += not lazy
            else:  # only bytes zip ignores (timestamps, local header copies)
                assert names == original.model.attributes
                assert_same_state(original, loaded)
    assert refused > 100


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"hello, this is not a model\n",
        b"PK\x03\x04",
        bytes(range(256)) * 4,
        b"\x93NUMPY\x01\x00",
    ],
    ids=["empty", "text", "zip-magic-only", "binary", "npy-magic"],
)
def test_not_a_model_file(tmp_path, content):
    path = tmp_path / "m.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="not an skcrf model file|Cannot load"):
        load_state(path)


def test_other_archives_are_refused(tmp_path):
    path = tmp_path / "m.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("readme.txt", "hi")
    with pytest.raises(ValueError, match="not an skcrf model file"):
        load_state(path)
    np.save(tmp_path / "a.npy", np.zeros(3))
    with pytest.raises(ValueError, match="not an skcrf model file"):
        load_state(tmp_path / "a.npy")
    with open(path, "wb") as file:
        np.savez(
            file,
            metadata=np.frombuffer(b'{"format": "other"}', np.uint8),
            state_ptr=np.zeros(1, np.int64),
            state_labels=np.zeros(0, np.int32),
            state_weights=np.zeros(0),
            transition_index=np.zeros(0, np.int64),
            transition_weights=np.zeros(0),
        )
    with pytest.raises(ValueError, match="not an skcrf model file"):
        load_state(path)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_state(tmp_path / "nope.npz")
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "nope.npz", cls=StandIn)


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 99])
def test_newer_format_version(model_path, version):
    doc, arrays = read_parts(model_path)
    doc["format_version"] = version
    doc["something_new"] = 1
    arrays["new_array"] = np.zeros(2)
    write_parts(model_path, doc, arrays)
    # a newer file may have other arrays: the message is about the version
    with np.load(model_path) as npz:
        assert "new_array" in npz.files
    with pytest.raises(ValueError, match="not an skcrf model file"):
        load_state(model_path)
    del arrays["new_array"]
    write_parts(model_path, doc, arrays)
    with pytest.raises(
        ValueError,
        match=(f"format version {version}.*reads format version {FORMAT_VERSION}.*upgrade skcrf"),
    ):
        load_state(model_path)


@pytest.mark.parametrize("version", [0, -1, "2", 2.0, None, True])
def test_invalid_format_version(model_path, version):
    doc, arrays = read_parts(model_path)
    doc["format_version"] = version
    write_parts(model_path, doc, arrays)
    with pytest.raises(ValueError, match="format version"):
        load_state(model_path)


def test_version_and_arrays_must_agree(model_path):
    doc, arrays = read_parts(model_path)
    doc["format_version"] = 1
    write_parts(model_path, doc, arrays)
    with pytest.raises(
        ValueError,
        match=r"metadata says format version 1, whose arrays are "
        r"\['metadata', 'coef_indices'.*the archive has",
    ):
        load_state(model_path)
    v1_doc, v1_arrays = read_parts(V1_PATH)
    v1_doc["format_version"] = 2
    write_parts(model_path, v1_doc, v1_arrays)
    with pytest.raises(ValueError, match="metadata says format version 2"):
        load_state(model_path)


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
        (_set(["attributes"], KeyError), r"missing keys \['attributes'\]"),
        (_set(["extra"], KeyError), r"missing keys \['extra'\]"),
        (_set(["training_log", "message"], KeyError), r"training_log: missing keys"),
        (_set(["vocabulary"], []), r"unexpected keys \['vocabulary'\]"),
        (_set(["labels"], "DNV"), "labels must be a list"),
        (_set(["labels"], []), "no labels"),
        (_set(["labels", 0], {"type": "object", "value": "os.system"}), "unknown value type"),
        (_set(["labels", 0], {"type": "int", "value": "3"}), "invalid int"),
        (_set(["labels", 0], {"type": "int", "value": True}), "invalid int"),
        (_set(["labels", 0], {"type": "str", "value": "N"}), "appears twice"),
        (_set(["labels", 0], {"type": "list", "value": []}), "must be hashable"),
        (
            _set(["labels", 0], {"type": "tuple", "value": [{"type": "dict", "value": {}}]}),
            "must be hashable",
        ),
        (_set(["labels", 0], {"type": "numpy:int8", "value": 300}), "out of the range"),
        (_set(["labels", 0], {"type": "numpy:object", "value": 1}), "unknown value type"),
        (_set(["labels", 0], {"type": "numpy:float16", "value": "0.1"}), "not exactly"),
        (_set(["labels", 0], {"type": "float", "value": "1_0"}), "invalid float"),
        (_set(["labels", 0], {"type": "float", "value": " 1"}), "invalid float"),
        (_set(["labels", 0], {"type": "bytes", "value": "zz"}), "invalid value"),
        (_set(["labels", 0], {"type": "dict", "value": []}), "invalid value"),
        (_set(["labels", 0], {"type": "str", "value": "D", "x": 1}), "exactly the keys"),
        (_set(["labels", 0], {"type": "none", "value": None}), "exactly the keys"),
        (_set(["labels", 0], "D"), "expected a tagged value"),
        (
            _set(["labels", 0], json.loads('{"type": "tuple", "value": [' * 40 + "]}" * 40)),
            "nested more than 32",
        ),
        (_set(["attributes", 0], 5), "attribute name must be a str"),
        (lambda doc: doc["attributes"].append(doc["attributes"][0]), "appears twice"),
        (_set(["attributes"], "abc"), "attributes must be a list"),
        (_set(["value_separator"], 1), "value_separator must be a str"),
        (_set(["value_separator"], ""), "value_separator is empty"),
        (_set(["params"], []), "params must be a dict"),
        (_set(["params", "__class__"], {"type": "none"}), "invalid parameter name"),
        (_set(["params", "not a name"], {"type": "int", "value": 1}), "invalid parameter name"),
        (_set(["params", "c2"], {"type": "float"}), "exactly the keys"),
        (_set(["extra"], []), "extra must be a dict"),
        (_set(["extra", "x"], 1), "expected a tagged value"),
        (_set(["n_iter"], "3"), "n_iter must be a int"),
        (_set(["n_iter"], True), "n_iter must be a int"),
        (_set(["n_iter"], -3), "negative"),
        (_set(["estimator"], {"x": 1}), "estimator must be a str"),
        (_set(["skcrf_version"], 2), "skcrf_version must be a str"),
        (_set(["status"], "__class__"), "unknown training status"),
        (_set(["status"], ["CONVERGED"]), "unknown training status"),
        (_set(["training_log"], []), "training_log must be a JSON object"),
        (_set(["training_log", "iterations"], {}), "iterations must be a list"),
        (_set(["training_log", "iterations", 0], []), "iteration 0 must be a dict"),
        (_set(["training_log", "iterations", 0, "loss"], 1.0), "expected a tagged value"),
        (
            _set(["training_log", "iterations", 0, "loss"], {"type": "tuple", "value": []}),
            "not a scalar",
        ),
        (_set(["training_log", "status"], "NOPE"), "unknown training status"),
        (_set(["training_log", "message"], None), "message must be a str"),
    ],
)
def test_invalid_metadata(model_path, mutate, message):
    doc, arrays = read_parts(model_path)
    mutate(doc)
    write_parts(model_path, doc, arrays)
    with pytest.raises(ValueError, match=message):
        load_state(model_path)


def test_null_status_log_and_estimator_are_valid(model_path, state):
    doc, arrays = read_parts(model_path)
    doc["status"] = doc["training_log"] = doc["estimator"] = None
    write_parts(model_path, doc, arrays)
    loaded = load_state(model_path)
    assert loaded.status is None and loaded.training_log is None


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
        load_state(model_path)


def test_invalid_utf8_metadata(model_path):
    _, arrays = read_parts(model_path)
    with open(model_path, "wb") as file:
        np.savez(file, metadata=np.frombuffer(b'{"a": "\xff"}', np.uint8), **arrays)
    with pytest.raises(ValueError, match="UnicodeDecodeError"):
        load_state(model_path)


def _array_cases():
    def edit(name, index, value):
        def mutate(a):
            a[name] = a[name].copy()
            a[name][index] = value

        return mutate

    def replace(name, function):
        def mutate(a):
            a[name] = function(a[name])

        return mutate

    def drop(name):
        def mutate(a):
            del a[name]

        return mutate

    def bonus(a):
        a["bonus"] = np.zeros(1)

    def too_many_states(a):
        n = 10**4
        a["state_labels"] = np.zeros(n, np.int32)
        a["state_weights"] = np.ones(n)

    def too_many_transitions(a):
        a["transition_index"] = np.arange(10, dtype=np.int64)
        a["transition_weights"] = np.ones(10)

    return [
        (replace("state_weights", lambda w: w[:-1]), r"state_weights.*shape \(\d+,\)"),
        (replace("state_ptr", lambda p: p[:-1]), r"state_ptr.*shape \(7,\).*the attributes"),
        (replace("state_ptr", lambda p: p.astype(np.int32)), "state_ptr' must be int64"),
        (replace("state_labels", lambda v: v.astype(np.int64)), "state_labels' must be int32"),
        (replace("state_weights", lambda v: v.astype(np.float32)), "must be float64"),
        (replace("transition_weights", lambda v: v.reshape(1, -1)), "transition_weights"),
        (replace("transition_index", lambda v: v.astype(np.uint64)), "must be int64"),
        (replace("state_weights", lambda v: v.astype(np.complex128)), "dtype complex128"),
        (edit("state_ptr", 0, 1), "non-decreasing from 0"),
        (edit("state_ptr", -1, 10**6), "non-decreasing from 0 to n_states"),
        (edit("state_ptr", 3, 0), "non-decreasing"),
        (edit("state_labels", 0, 3), r"label indices in \[0, 3\)"),
        (edit("state_labels", 0, -1), "label indices"),
        (edit("state_labels", 1, 0), "strictly increasing within an attribute"),
        (edit("transition_index", -1, 9), r"transition_index must be strictly increasing"),
        (edit("transition_index", 0, -1), "transition_index"),
        (edit("transition_index", 1, 0), "transition_index"),
        (edit("state_weights", 0, np.nan), "state_weights holds non-finite"),
        (edit("transition_weights", 0, -np.inf), "transition_weights holds non-finite"),
        (too_many_states, "10000 state features for 6 attributes and 3 labels"),
        (too_many_transitions, "10 transition features for 3 labels"),
        (bonus, r"unexpected \['bonus.npy'\]"),
        (drop("transition_weights"), r"missing \['transition_weights.npy'\]"),
        (replace("state_ptr", lambda p: p.astype(">i8")), None),  # byte order is fine
    ]


@pytest.mark.parametrize("mutate, message", _array_cases())
def test_inconsistent_arrays(model_path, state, mutate, message):
    doc, arrays = read_parts(model_path)
    assert arrays["state_ptr"][3] > 0 and arrays["state_labels"][1] > 0  # for edits above
    mutate(arrays)
    write_parts(model_path, doc, arrays, savez=np.savez_compressed)
    if message is None:
        assert_same_state(state, load_state(model_path))
        return
    with pytest.raises(ValueError, match=message):
        load_state(model_path)


def test_attributes_shorter_than_state_ptr(model_path):
    doc, arrays = read_parts(model_path)
    doc["attributes"] = doc["attributes"][:-1]
    write_parts(model_path, doc, arrays)
    with pytest.raises(ValueError, match="state_ptr.*inconsistent with the attributes"):
        load_state(model_path)


class _Payload:
    """Unpickling this creates the marker file: proof that code ran."""

    marker = None

    def __reduce__(self):
        return builtins.open, (str(self.marker), "w")


@pytest.mark.parametrize("where", ["state_weights", "state_ptr", "metadata", "bonus"])
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
        load_state(model_path)
    assert not marker.exists()


def _npy_header(shape, descr="<f8"):
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def _write_members(path, doc, members):
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        text = json.dumps(doc).encode()
        archive.writestr("metadata.npy", _npy_header((len(text),), "|u1") + text)
        for name, data in members.items():
            archive.writestr(f"{name}.npy", data)


def test_huge_claimed_array_sizes_are_refused_without_allocating(model_path):
    doc, _ = read_parts(model_path)
    _write_members(
        model_path,
        doc,
        {
            "state_ptr": _npy_header((10**12,), "<i8"),
            "state_labels": _npy_header((10**12,), "<i4"),
            "state_weights": _npy_header((10**12,)),
            "transition_index": _npy_header((10**12,), "<i8"),
            "transition_weights": _npy_header((2**40, 2**40)),
        },
    )
    with pytest.raises(ValueError, match="does not match its stored size"):
        load_state(model_path)


def test_large_index_arrays_are_checked_against_the_metadata_before_reading(
    model_path, monkeypatch
):
    # Index arrays are exempt from the ratio check, so an attacker may make
    # them big and all zeros (a great compression ratio); they are refused by
    # their shapes, before their data is read.
    doc, arrays = read_parts(model_path)
    n = 4 * 10**6
    zeros = np.zeros(n, np.int64)
    for name, replacement, message in (
        ("state_ptr", zeros, r"state_ptr.*shape \(7,\)"),
        ("state_labels", zeros.astype(np.int32), "state_weights' must be float64 of shape"),
        ("transition_index", zeros, "transition_weights' must be float64 of shape"),
    ):
        bad = dict(arrays, **{name: replacement})
        write_parts(model_path, doc, bad, savez=np.savez_compressed)
        read = []
        real = skcrf._persist._npz._array

        def spy(npz, name, dtype, read=read, real=real):
            read.append(name)
            return real(npz, name, dtype)

        monkeypatch.setattr(skcrf._persist._npz, "_array", spy)
        with pytest.raises(ValueError, match=message):
            load_state(model_path)
        assert read == ["metadata"]  # refused before the arrays were decompressed
        monkeypatch.undo()


def test_huge_label_count_allocates_nothing_dense(model_path, tmp_path):
    # Format 2 has no (n_labels, n_labels) array: many labels cost nothing.
    doc, arrays = read_parts(model_path)
    doc["labels"] = [{"type": "int", "value": k} for k in range(50_000)]
    write_parts(model_path, doc, arrays)
    assert load_state(model_path).model.n_labels == 50_000
    # Format 1 has one, and refuses the claim by its shape before reading.
    doc, arrays = read_parts(V1_PATH)
    doc["labels"] = [{"type": "int", "value": k} for k in range(50_000)]
    write_parts(tmp_path / "v1", doc, arrays)
    with pytest.raises(ValueError, match=r"transition.*shape \(50000, 50000\)"):
        load_state(tmp_path / "v1")


def test_zip_bomb_guard(model_path, monkeypatch):
    # The model's JSON compresses well; with a tiny allowance it is refused.
    monkeypatch.setattr(skcrf._persist._npz, "_FREE_UNCOMPRESSED_BYTES", 0)
    monkeypatch.setattr(skcrf._persist._npz, "_MAX_COMPRESSION_RATIO", 1.01)
    with pytest.raises(ValueError, match="suspicious size"):
        load_state(model_path)


def test_compressible_index_arrays_are_not_refused(tmp_path, monkeypatch):
    # Every attribute/label pair: state_ptr and state_labels are periodic and
    # compress far better than the weights; the ratio guard ignores them.
    n_attributes, n_labels = 20_000, 4
    rng = np.random.default_rng(0)
    model = CRFModel(
        classes=np.array(list("abcd"), dtype=object),
        attributes=[f"f{rng.integers(10**12)}:{k}" for k in range(n_attributes)],
        state_ptr=np.arange(n_attributes + 1, dtype=np.int64) * n_labels,
        state_labels=np.tile(np.arange(n_labels, dtype=np.int32), n_attributes),
        state_weights=rng.normal(size=n_attributes * n_labels),
        transition_index=np.arange(16, dtype=np.int64),
        transition_weights=rng.normal(size=16),
    )
    state = make_state(model=model)
    path = tmp_path / "big.skcrf"
    save_state(state, path, format_version=2)  # (format 3 is not compressed)
    with zipfile.ZipFile(path) as archive:
        ratios = {i.filename: i.file_size / i.compress_size for i in archive.infolist()}
    assert ratios["state_ptr.npy"] > 5 and ratios["state_labels.npy"] > 50
    assert ratios["state_weights.npy"] < 1.2 and ratios["metadata.npy"] < 5
    monkeypatch.setattr(skcrf._persist._npz, "_FREE_UNCOMPRESSED_BYTES", 0)
    monkeypatch.setattr(skcrf._persist._npz, "_MAX_COMPRESSION_RATIO", 5)
    assert_same_state(state, load_state(path))


def test_paths_may_be_str_or_pathlike(state, tmp_path):
    save_state(state, str(tmp_path / "a"))
    save_state(state, pathlib.PurePath(tmp_path / "b"))
    save_model(StandIn(state), os.fsencode(tmp_path / "c"))
    expected = prediction_state(state)
    for name in ("a", "b", "c"):
        assert_same_state(expected, load_state(pathlib.Path(tmp_path / name)))
        assert_same_state(expected, load_state(str(tmp_path / name)))
    assert_same_state(expected, load_model(tmp_path / "c", cls=StandIn).state)


# -- format version 1 (skcrf 0.1) ----------------------------------------------
#
# tests/data/model_v1.skcrf was written by skcrf 0.1 (tests/data/make_model_v1.py
# says how); model_v1_expected.json holds what that model predicted.


def _flatten(token, prefix, out, separator):
    """skcrf 0.1's token features, for a model whose attributes join a key and a
    string value with ``separator``."""
    if isinstance(token, list):
        for name in token:
            out[prefix + name] = out.get(prefix + name, 0.0) + 1.0
        return out
    for key, value in token.items():
        name = prefix + key
        if isinstance(value, dict):
            _flatten(value, name + ":", out, separator)
        elif isinstance(value, list):
            for item in value:
                out[name + separator + item] = out.get(name + separator + item, 0.0) + 1.0
        elif isinstance(value, str):
            out[name + separator + value] = out.get(name + separator + value, 0.0) + 1.0
        else:
            out[name] = out.get(name, 0.0) + float(value)
    return out


def _emissions(model, sequence):
    coef = model.coef().toarray()
    index = {name: k for k, name in enumerate(model.attributes)}
    scores = np.zeros((len(sequence), model.n_labels))
    for t, token in enumerate(sequence):
        for name, value in _flatten(token, "", {}, model.value_separator).items():
            if name in index:
                scores[t] += value * coef[index[name]]
    return scores


def _viterbi(emissions, transitions):
    score, back = emissions[0].copy(), []
    for row in emissions[1:]:
        candidates = score[:, None] + transitions
        back.append(candidates.argmax(axis=0))
        score = candidates.max(axis=0) + row
    path = [int(score.argmax())]
    for pointers in reversed(back):
        path.append(int(pointers[path[-1]]))
    return path[::-1]


def _marginals(emissions, transitions):
    from scipy.special import logsumexp

    n = len(emissions)
    alpha, beta = np.zeros_like(emissions), np.zeros_like(emissions)
    alpha[0] = emissions[0]
    for t in range(1, n):
        alpha[t] = logsumexp(alpha[t - 1][:, None] + transitions, axis=0) + emissions[t]
    for t in range(n - 2, -1, -1):
        beta[t] = logsumexp(transitions + (emissions[t + 1] + beta[t + 1])[None, :], axis=1)
    log_z = logsumexp(alpha[-1])
    return np.exp(alpha + beta - log_z)


def test_v1_file_loads_into_a_fitted_state():
    state = load_state(V1_PATH)
    model = state.model
    assert model.classes.tolist() == V1_EXPECTED["classes"] == ["A", "D", "N", "V"]
    assert model.attributes == V1_EXPECTED["attributes"]
    assert model.value_separator == "="
    assert "w=the" in model.attributes and "shape:kind=X" in model.attributes
    classes = model.classes.tolist()
    states = {
        (model.attributes[a], classes[label]): weight
        for a, label, weight in zip(
            model.state_attributes().tolist(),
            model.state_labels.tolist(),
            model.state_weights.tolist(),
        )
    }
    assert states == {(a, label): w for a, label, w in V1_EXPECTED["state_features"]}
    assert model.n_states == len(V1_EXPECTED["state_features"])
    n = model.n_labels
    transitions = {
        (classes[k // n], classes[k % n]): w
        for k, w in zip(model.transition_index.tolist(), model.transition_weights.tolist())
    }
    assert transitions == {(a, b): w for a, b, w in V1_EXPECTED["transition_features"]}
    assert state.n_iter == V1_EXPECTED["n_iter"] > 0
    assert state.status is LBFGSStatus[V1_EXPECTED["status"]]
    assert len(state.training_log.iterations) == state.n_iter
    assert state.training_log.status is state.status
    assert state.params == {
        "c1": 0.02,
        "c2": 0.05,
        "max_iterations": 100,
        "all_possible_states": False,
        "all_possible_transitions": False,
        "min_freq": 0.0,
        "num_memories": 6,
        "epsilon": 1e-05,
        "period": 10,
        "delta": 1e-05,
        "linesearch": "MoreThuente",
        "max_linesearch": 20,
        "verbose": False,
        "n_jobs": None,
    }
    assert state.extra == {}
    # the arrays follow the conventions of skcrf._model
    assert model.state_ptr.dtype == np.int64 and model.state_labels.dtype == np.int32
    assert model.transition_index.dtype == np.int64
    assert model.state_ptr[0] == 0 and model.state_ptr[-1] == model.n_states


def test_v1_file_predicts_what_skcrf_0_1_predicted():
    # An independent decoder over the loaded state: 0.1's token features with
    # the state's value_separator, a plain Viterbi and forward-backward.
    model = load_state(V1_PATH).model
    transitions = model.transition_matrix()
    classes = model.classes.tolist()
    n_nonempty = 0
    for sequence, want, want_marginals in zip(
        V1_EXPECTED["X"], V1_EXPECTED["predict"], V1_EXPECTED["predict_marginals"]
    ):
        if not sequence:
            assert want == []
            continue
        n_nonempty += 1
        emissions = _emissions(model, sequence)
        assert [classes[k] for k in _viterbi(emissions, transitions)] == want
        marginals = _marginals(emissions, transitions)
        want_array = np.array([[row[label] for label in classes] for row in want_marginals])
        np.testing.assert_allclose(marginals, want_array, rtol=1e-9, atol=1e-12)
    assert n_nonempty >= 10
    assert len({tuple(p) for p in V1_EXPECTED["predict"]}) >= 5  # not a trivial model


def test_v1_file_through_the_estimator_predicts_like_0_1():
    tagger = load_model(V1_PATH)
    assert isinstance(tagger, skcrf.CRFTagger)
    assert tagger.predict(V1_EXPECTED["X"]) == V1_EXPECTED["predict"]
    got = tagger.predict_marginals(V1_EXPECTED["X"])
    for seq_got, seq_want in zip(got, V1_EXPECTED["predict_marginals"]):
        for row_got, row_want in zip(seq_got, seq_want):
            assert row_got.keys() == row_want.keys()
            np.testing.assert_allclose(
                list(row_got.values()), list(row_want.values()), rtol=1e-9, atol=1e-12
            )


def test_v1_file_resaves_in_the_newest_format(tmp_path):
    state = load_state(V1_PATH)
    path = tmp_path / "v3.skcrf"
    save_state(state, path)
    with np.load(path) as npz:
        assert json.loads(npz["metadata"].tobytes())["format_version"] == FORMAT_VERSION
    assert_same_state(prediction_state(state), load_state(path))


def test_v1_stored_negative_zeros_and_zero_transitions(tmp_path):
    doc, arrays = read_parts(V1_PATH)
    arrays["coef_values"] = arrays["coef_values"].copy()
    arrays["coef_values"][0] = -0.0
    arrays["transition"] = arrays["transition"].copy()
    arrays["transition"][0, 0] = -0.0  # a zero: no transition feature
    arrays["transition"][0, 1] = 0.25
    path = tmp_path / "m"
    write_parts(path, doc, arrays)
    model = load_state(path).model
    assert model.n_states == len(arrays["coef_indices"]) and np.signbit(model.state_weights[0])
    assert 0 not in model.transition_index.tolist() and 1 in model.transition_index.tolist()
    assert model.transition_matrix()[0, 1] == 0.25


@pytest.mark.parametrize(
    "mutate, message",
    [
        (_set(["vocabulary"], KeyError), r"missing keys \['vocabulary'\]"),
        (_set(["attributes"], []), r"unexpected keys \['attributes'\]"),
        (_set(["vocabulary", 0], 5), "attribute name must be a str"),
        (lambda doc: doc["vocabulary"].append(doc["vocabulary"][0]), "appears twice"),
        (_set(["vectorizer", "dtype"], "object"), "unsupported dtype"),
        (_set(["vectorizer", "sort"], "yes"), "sort must be a bool"),
        (_set(["vectorizer", "separator"], ""), "separator is empty"),
        (_set(["vectorizer", "extra"], 1), "vectorizer: unexpected keys"),
        (_set(["n_features"], 10**30), "out of range"),
        (_set(["n_features"], -1), "out of range"),
        (_set(["status"], None), "unknown training status"),
        (_set(["training_log"], None), "training_log must be a JSON object"),
        (_set(["estimator"], None), "estimator must be a str"),
        (_set(["params", "__class__"], {"type": "none"}), "invalid parameter name"),
        (_set(["labels", 0], {"type": "str", "value": "D"}), "appears twice"),
    ],
)
def test_invalid_v1_metadata(tmp_path, mutate, message):
    doc, arrays = read_parts(V1_PATH)
    mutate(doc)
    path = tmp_path / "m"
    write_parts(path, doc, arrays)
    with pytest.raises(ValueError, match=message):
        load_state(path)


def _v1_array_cases():
    def edit(name, index, value):
        def mutate(a):
            a[name] = a[name].copy()
            a[name][index] = value

        return mutate

    def too_many_nonzeros(a):
        a["coef_indices"] = np.arange(10**4, dtype=np.int64)
        a["coef_values"] = np.ones(10**4)

    def replace(name, value):
        def mutate(a):
            a[name] = value(a[name])

        return mutate

    return [
        (replace("coef_values", lambda v: v[:-1]), "coef_values"),
        (replace("transition", lambda t: np.zeros((5, 5))), r"transition.*shape \(4, 4\)"),
        (replace("transition", lambda t: t.astype(np.float32)), "must be float64"),
        (replace("transition", lambda t: t.ravel()), "transition"),
        (replace("coef_indices", lambda v: v.astype(np.int32)), "coef_indices' must be int64"),
        (edit("coef_indices", -1, 10**6), "strictly increasing indices below"),
        (edit("coef_indices", 0, -1), "strictly increasing indices below"),
        (edit("coef_indices", 1, 0), "strictly increasing"),
        (edit("coef_values", 0, np.nan), "non-finite"),
        (edit("transition", (0, 0), np.inf), "non-finite"),
        (too_many_nonzeros, "nonzeros"),
        (replace("coef_values", lambda v: v.astype(np.complex128)), "dtype complex128"),
    ]


@pytest.mark.parametrize("mutate, message", _v1_array_cases())
def test_inconsistent_v1_arrays(tmp_path, mutate, message):
    doc, arrays = read_parts(V1_PATH)
    assert arrays["coef_indices"][0] > 0
    mutate(arrays)
    path = tmp_path / "m"
    write_parts(path, doc, arrays, savez=np.savez_compressed)
    with pytest.raises(ValueError, match=message):
        load_state(path)


def test_v1_huge_claims_are_refused(tmp_path):
    doc, _ = read_parts(V1_PATH)
    path = tmp_path / "m"
    _write_members(
        path,
        doc,
        {
            "coef_indices": _npy_header((10**12,), "<i8"),
            "coef_values": _npy_header((10**12,)),
            "transition": _npy_header((2**40, 2**40)),
        },
    )
    with pytest.raises(ValueError, match="does not match its stored size"):
        load_state(path)


# -- end to end through the estimator (re-enable with the new estimator) ------

X_TOY = [
    [{"w": "the"}, {"w": "dog"}, {"w": "barks"}],
    [{"w": "a"}, {"w": "cat"}],
    [{"w": "the"}, {"w": "cat", "n": 2.5}, {"w": "sleeps"}],
    [{"w": "a"}, {"w": "dog"}, {"w": "sleeps"}],
]
Y_TOY = [["D", "N", "V"], ["D", "N"], ["D", "N", "V"], ["D", "N", "V"]]
X_NEW = [[{"w": "a"}, {"w": "cat"}, {"w": "barks"}], [{"w": "unseen"}], []]


@pytest.mark.parametrize("how", ["method", "function"])
def test_estimator_round_trip(tmp_path, how):
    tagger = skcrf.CRFTagger(c2=0.05, max_iterations=50).fit(X_TOY, Y_TOY)
    path = tmp_path / "tagger.skcrf"
    if how == "method":
        tagger.save(path)
        loaded = skcrf.CRFTagger.load(path)
    else:
        save_model(tagger, path)
        loaded = load_model(path)
    assert type(loaded) is skcrf.CRFTagger
    assert loaded.get_params() == tagger.get_params()
    assert_same_state(tagger._get_fitted_state(), loaded._get_fitted_state())
    assert loaded.predict(X_TOY + X_NEW) == tagger.predict(X_TOY + X_NEW)
    assert loaded.predict_marginals(X_TOY + X_NEW) == tagger.predict_marginals(X_TOY + X_NEW)


def test_estimator_subclass_and_unfitted(tmp_path):
    class Tagger2(skcrf.CRFTagger):
        pass

    tagger = skcrf.CRFTagger(c2=0.05).fit(X_TOY, Y_TOY)
    save_model(tagger, tmp_path / "m")
    loaded = load_model(tmp_path / "m", cls=Tagger2)
    assert type(loaded) is Tagger2 and type(Tagger2.load(tmp_path / "m")) is Tagger2
    assert loaded.predict(X_TOY) == tagger.predict(X_TOY)
    with pytest.raises(NotFittedError):
        save_model(skcrf.CRFTagger(), tmp_path / "u")
    with pytest.raises(NotFittedError):
        skcrf.CRFTagger().save(tmp_path / "u")
    assert os.listdir(tmp_path) == ["m"]


def test_stand_in_is_not_mutated_by_saving(state, tmp_path):
    before = copy.deepcopy(state)
    save_model(StandIn(state), tmp_path / "m")
    assert_same_state(before, state)


def test_a_flipped_weight_bit_is_a_crc_error(state, tmp_path):
    path = tmp_path / "m.npz"
    save_state(state, path, format_version=3)  # stored, so the weights lie as they are
    data = bytearray(path.read_bytes())
    at = data.find(state.model.state_weights.tobytes())
    assert at > 0
    data[at] ^= 1  # still a finite weight: only the CRC can tell
    path.write_bytes(bytes(data))
    for lazy in (False, True):
        with pytest.raises(ValueError, match="'state_weights' is corrupted \\(CRC mismatch\\)"):
            load_state(path, lazy_attributes=lazy)
