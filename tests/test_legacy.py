"""Pickles and model files made by the flat layout (commit bcfe774) still load.

``tests/data/legacy`` (see its README.md) holds fitted estimators pickled by
skcrf before its private modules moved into subpackages, the same taggers
saved as npz and CRFsuite model files, and what each gave then.
"""

import importlib
import importlib.util
import json
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import skcrf
from skcrf._moved import MOVED, install

LEGACY = Path(__file__).parent / "data" / "legacy"
EXPECTED = json.loads((LEGACY / "expected.json").read_text())
QUERIES = json.loads((LEGACY / "queries.json").read_text())


def _load(name):
    path = LEGACY / name
    if name.endswith(".pkl"):
        with open(path, "rb") as f:
            return pickle.load(f)
    if name.endswith(".skcrf"):
        return skcrf.CRFTagger.load(path)
    return skcrf.CRFTagger.from_crfsuite(path)


def _check_tagger(model, expected):
    assert [c.item() if isinstance(c, np.generic) else c for c in model.classes_] == expected[
        "classes"
    ]
    assert model.predict(QUERIES["queries"]) == expected["predict"]
    marginals = model.predict_marginals(QUERIES["queries"][:2])
    for seq, expected_seq in zip(marginals, expected["marginals"]):
        for token, expected_token in zip(seq, expected_seq):
            got = {str(label): p for label, p in token.items()}
            assert got.keys() == expected_token.keys()
            for label, p in expected_token.items():
                assert got[label] == pytest.approx(p, abs=1e-11)
    if "params" in expected:
        params = model.get_params()
        assert {k: params[k] for k in expected["params"]} == expected["params"]


@pytest.mark.parametrize("name", sorted(EXPECTED["files"]))
def test_legacy_file_loads_and_predicts_as_before(name):
    expected = EXPECTED["files"][name]
    model = _load(name)
    if "classes" in expected:
        _check_tagger(model, expected)
    elif "best_params" in expected:
        assert model.best_params_ == expected["best_params"]
        assert model.predict(QUERIES["queries"]) == expected["predict"]
    elif name.startswith("pipeline"):
        assert model.predict(QUERIES["raw_queries"]) == expected["predict"]
    else:  # unfitted
        params = model.get_params()
        assert {k: params[k] for k in expected["params"]} == expected["params"]


def test_legacy_pickles_name_the_old_private_paths():
    # the fixtures really exercise the moved paths (skcrf/_moved.py)
    names = {g for e in EXPECTED["files"].values() for g in e.get("globals", [])}
    assert {"skcrf._lbfgs.LBFGSStatus", "skcrf._online_train.OnlineState"} <= names
    assert "skcrf._training_log.TrainingLog" in names
    old_paths = {name.rpartition(".")[0] for name in names} - {
        "skcrf._cv",
        "skcrf._model",
        "skcrf._tagger",
    }
    assert old_paths <= MOVED.keys()


# -- old module paths (skcrf/_moved.py) ------------------------------------------------
# The classes each old path held when the pickles above were made.
OLD_NAMES = {
    "skcrf._lbfgs": ["IterationInfo", "LBFGSResult", "LBFGSStatus"],
    "skcrf._monitor": ["CallbackInfo"],
    "skcrf._online_train": ["OnlineResult", "OnlineState", "OnlineStatus"],
    "skcrf._training_log": ["LabelScore", "TrainingLog"],
    "skcrf._embeddings": ["Embeddings"],
    "skcrf._featurizer": ["SequenceFeaturizer"],
}


def _global(module, name):
    """A protocol 0 pickle of the global ``module.name`` (what find_class is given)."""
    return f"c{module}\n{name}\n.".encode("ascii")


def test_every_moved_path_is_listed_and_has_no_file():
    assert MOVED.keys() == OLD_NAMES.keys()
    package = Path(skcrf.__file__).parent
    for old, new in MOVED.items():
        assert not (package / f"{old.rpartition('.')[2]}.py").exists(), old
        assert importlib.util.find_spec(new).origin.startswith(str(package)), new


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_old_path_imports_as_the_new_module(old):
    module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    assert module is sys.modules[old] is getattr(skcrf, old.rpartition(".")[2])
    assert module.__name__ == module.__spec__.name == MOVED[old]  # the new module, untouched
    for name in OLD_NAMES[old]:
        assert getattr(module, name).__module__ == MOVED[old]
    assert importlib.import_module(old) is module  # a second import gives it again


@pytest.mark.parametrize("old", sorted(OLD_NAMES))
def test_pickles_naming_an_old_path_load_the_new_class(old):
    new = importlib.import_module(MOVED[old])
    for name in OLD_NAMES[old]:
        assert pickle.loads(_global(old, name)) is getattr(new, name)
    # and a pickle made today names the new path
    cls = getattr(new, OLD_NAMES[old][0])
    assert pickle.loads(pickle.dumps(cls, protocol=0)) is cls
    assert old.encode() + b"\n" not in pickle.dumps(cls, protocol=0)


def test_pickled_instances_of_old_paths_load():
    # LBFGSStatus("converged"): GLOBAL, MARK, UNICODE, TUPLE, REDUCE, STOP
    status = pickle.loads(_global("skcrf._lbfgs", "LBFGSStatus")[:-1] + b"(Vconverged\ntR.")
    assert status is skcrf.LBFGSStatus.CONVERGED


def test_unknown_private_paths_are_still_missing():
    for missing in ("skcrf._xyz", "skcrf._training._lbfgs_old", "skcrf._lbfgs.sub"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(missing)
        assert missing not in sys.modules
    with pytest.raises(ModuleNotFoundError, match="skcrf._xyz"):
        pickle.loads(_global("skcrf._xyz", "LBFGSStatus"))
    with pytest.raises(AttributeError):  # an old path holds only its module's names
        pickle.loads(_global("skcrf._lbfgs", "TrainingLog"))


def test_the_finder_is_installed_once():
    finders = [f for f in sys.meta_path if getattr(f, "_skcrf_moved_finder", False)]
    assert len(finders) == 1
    install()
    assert [f for f in sys.meta_path if getattr(f, "_skcrf_moved_finder", False)] == finders


def test_old_paths_load_in_a_fresh_interpreter_without_importing_skcrf_first():
    # pickle imports skcrf itself (the parent of the old path), whose
    # __init__ installs the finder; the old paths are registered only when asked
    code = f"""
import pickle, sys
blobs = {[_global(old, names[0]) for old, names in sorted(OLD_NAMES.items())]!r}
assert not any(name == "skcrf" or name.startswith("skcrf.") for name in sys.modules)
assert "skcrf._lbfgs" not in sys.modules
loaded = [pickle.loads(blob) for blob in blobs]
moved = sys.modules["skcrf._moved"].MOVED
for cls, (old, new) in zip(loaded, sorted(moved.items())):
    assert cls.__module__ == new, (cls, new)
    assert sys.modules[old] is sys.modules[new]
with open({str(LEGACY / "early_stopping.pkl")!r}, "rb") as f:
    tagger = pickle.load(f)
assert type(tagger.status_).__module__ == "skcrf._training._lbfgs"
assert type(tagger.training_log_).__module__ == "skcrf._training._training_log"
print("ok")
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_importing_skcrf_registers_no_old_path():
    code = "import sys, skcrf; print(sorted(m for m in sys.modules if m in skcrf._moved.MOVED))"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_legacy_models_keep_training():
    # a refit and a partial_fit on unpickled estimators (their state is usable)
    with open(LEGACY / "l2sgd_partial_fit.pkl", "rb") as f:
        online = pickle.load(f)
    X = QUERIES["queries"]
    y = online.predict(X)
    online.partial_fit(X, y)
    assert len(online.predict(X)) == len(X)
    repickled = pickle.loads(pickle.dumps(online))
    assert repickled.predict(X) == online.predict(X)


# -- sklearn-crfsuite pickles ---------------------------------------------------------
# Fitted sklearn_crfsuite.CRF objects pickled by sklearn-crfsuite 0.3 to 0.5
# (see tests/data/legacy/make_sklearn_crfsuite_pickles.py). Before 0.4 a CRF
# has no keep_tempfiles or model_filename attribute, so get_params fails on
# it once unpickled with a later sklearn-crfsuite.

SKLEARN_CRFSUITE = json.loads((LEGACY / "sklearn_crfsuite_expected.json").read_text())
SKLEARN_CRFSUITE_VERSIONS = sorted(k for k in SKLEARN_CRFSUITE if k != "X_test")


@pytest.mark.parametrize("release", SKLEARN_CRFSUITE_VERSIONS)
def test_from_crfsuite_reads_sklearn_crfsuite_pickles_of_every_version(release):
    pytest.importorskip("sklearn_crfsuite")
    with open(LEGACY / f"sklearn_crfsuite_{release}.pkl", "rb") as f:
        crf = pickle.load(f)
    X = SKLEARN_CRFSUITE["X_test"]
    expected = SKLEARN_CRFSUITE[release]
    tagger = skcrf.CRFTagger.from_crfsuite(crf)
    # what the pickle's own tagger predicts, now and when it was made
    own = [list(seq) for seq in crf.predict(X)]
    assert tagger.predict(X) == own == expected["predict"]
    for seq, own_seq in zip(tagger.predict_marginals(X), crf.predict_marginals(X)):
        for token, own_token in zip(seq, own_seq):
            assert token.keys() == own_token.keys()
            for label, p in token.items():
                assert p == pytest.approx(own_token[label], abs=1e-9)
    # its parameters are copied, the ones it lacks are CRFTagger's defaults
    params = tagger.get_params()
    assert (params["c1"], params["c2"], params["max_iterations"]) == (0.05, 0.01, 50)
    assert params["algorithm"] == "lbfgs" and params["all_possible_transitions"] is True
    assert params["keep_tempfiles"] is False and params["model_filename"] is None
    if "keep_tempfiles" not in expected["attributes"]:
        assert not hasattr(crf, "keep_tempfiles")  # the case get_params fails on


def test_from_crfsuite_takes_a_crf_without_get_params_or_unfitted():
    sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite")
    with open(LEGACY / "sklearn_crfsuite_0.3.6.pkl", "rb") as f:
        crf = pickle.load(f)
    X = SKLEARN_CRFSUITE["X_test"]

    class Bare:  # a CRF of a version whose BaseEstimator was a plain object
        pass

    bare = Bare()
    bare.__dict__.update(vars(crf))
    assert not hasattr(bare, "get_params")
    tagger = skcrf.CRFTagger.from_crfsuite(bare)
    assert tagger.predict(X) == SKLEARN_CRFSUITE["0.3.6"]["predict"]
    assert tagger.get_params()["c1"] == 0.05
    with pytest.raises(NotFittedError, match="no model file"):
        skcrf.CRFTagger.from_crfsuite(sklearn_crfsuite.CRF())
    with pytest.raises(TypeError, match="sklearn_crfsuite.CRF; got object"):
        skcrf.CRFTagger.from_crfsuite(object())
