"""Pickles and model files made by the flat layout (commit bcfe774) still load.

``tests/data/legacy`` (see its README.md) holds fitted estimators pickled by
skcrf before its private modules moved into subpackages, the same taggers
saved as npz and CRFsuite model files, and what each gave then.
"""

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import skcrf

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
    # the fixtures really exercise the alias modules
    names = {g for e in EXPECTED["files"].values() for g in e.get("globals", [])}
    assert {"skcrf._lbfgs.LBFGSStatus", "skcrf._online_train.OnlineState"} <= names
    assert "skcrf._training_log.TrainingLog" in names


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
