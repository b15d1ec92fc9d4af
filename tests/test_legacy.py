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
