"""Randomly damaged skcrf model files of every format (issue 42).

Seeded mutants of one small model in each format (1, read from tests/data;
2 to 4, and 5 and 6 in float64 and float32, written here): bytes changed, 16- and
32-bit fields overwritten (zip headers aimed at), bytes inserted or deleted,
files cut short. Each is opened every way a user can (``load_state``;
``CRFTagger.load`` with and without ``mmap``, then tagging): it must be
refused with a ValueError naming the file (at open, or, for the attributes'
hash tables read lazily, at the first lookup), or be harmless (the bytes
changed are ones no reader uses: padding, timestamps, copies the directory
overrides) and predict exactly what the intact file predicts. A crash would
end the test run.

``SKCRF_FUZZ_MUTANTS`` (default 300 per format) and ``SKCRF_FUZZ_SEED`` run
more by hand: ``SKCRF_FUZZ_MUTANTS=1000 pytest tests/test_model_fuzz.py -s``
prints the counts.
"""

import json
import os
import struct

import numpy as np
import pytest
from test_io import V1_PATH

from skcrf import CRFTagger
from skcrf.io import load_state, save_state

N_MUTANTS = int(os.environ.get("SKCRF_FUZZ_MUTANTS", 300))
SEED = int(os.environ.get("SKCRF_FUZZ_SEED", 42))
FORMATS = [
    "v1",
    "v2",
    "v3",
    "v4",
    "v5",
    "v5-float32",
    "v5-conditioned",
    "v6",
    "v6-float32",
    "v6-conditioned",
]


def _model(conditioned=False):
    rng = np.random.default_rng(0)
    X, y = [], []
    for _ in range(40):
        words = [f"w{int(k)}" for k in rng.integers(0, 25, size=int(rng.integers(1, 7)))]
        tokens = [{"w": w, "n": float(len(w)), "s": w[-1]} for w in words]
        if conditioned:
            for token in tokens:
                token["__transition__"] = {"s": token["s"]}
        X.append(tokens)
        y.append(["A" if int(w[1:]) % 3 else "B" if int(w[1:]) % 2 else "C" for w in words])
    params = {"c1": 0.3, "c2": 0.01, "max_iterations": 30}
    return CRFTagger(**params).fit(X, y), X


@pytest.fixture(scope="module")
def models():
    return {False: _model(), True: _model(conditioned=True)}


def _source(which, models, tmp_path):
    """(file bytes, sequences to tag) of a format's intact model file."""
    if which == "v1":
        expected = json.loads(V1_PATH.with_name("model_v1_expected.json").read_text())
        return V1_PATH.read_bytes(), expected["X"]
    tagger, X = models[which == "v4" or which.endswith("-conditioned")]
    path = tmp_path / f"{which}.skcrf"
    dtype = "float32" if which.endswith("-float32") else "float64"
    save_state(tagger._get_fitted_state(), path, format_version=int(which[1]), dtype=dtype)
    # tokens the model has not seen too: a lookup of each probes its table
    return path.read_bytes(), X[:8] + [
        [{"w": "unseen", "x": 1.0}],
        [{f"u{k}": 1 for k in range(300)}],
    ]


def _zip_header_fields(data):
    """Offsets of the 16- and 32-bit fields of every zip header in ``data``."""
    fields = []
    for magic, size in ((b"PK\x03\x04", 30), (b"PK\x01\x02", 46), (b"PK\x05\x06", 22)):
        at = data.find(magic)
        while at >= 0:
            fields += [at + k for k in range(4, size, 2)]
            at = data.find(magic, at + 1)
    return fields


def mutants(data, rng, n):
    fields = _zip_header_fields(data)
    out = []
    for i in range(n):
        mutated = bytearray(data)
        kind = i % 6
        if kind == 0:  # a few random bytes
            for position in rng.integers(len(data), size=int(rng.integers(1, 4))):
                mutated[position] = int(rng.integers(256))
        elif kind == 1:  # a 32-bit field somewhere: small, or anything
            position = 4 * int(rng.integers(len(data) // 4))
            value = int(rng.integers(64)) if rng.random() < 0.5 else int(rng.integers(2**32))
            struct.pack_into("<I", mutated, position, value)
        elif kind == 2:  # a zip header's field (sizes, offsets, name and extra lengths)
            position = int(rng.choice(fields))
            choices = [0, 1, 64, int(rng.integers(2**16)), int(rng.integers(len(data)) & 0xFFFF)]
            struct.pack_into("<H", mutated, position, choices[int(rng.integers(len(choices)))])
        elif kind == 3:  # bytes inserted or deleted: everything after shifts
            at = int(rng.integers(len(data)))
            if rng.random() < 0.5:
                mutated[at:at] = bytes(rng.integers(256, size=int(rng.integers(1, 9))).tolist())
            else:
                del mutated[at : at + int(rng.integers(1, 9))]
        elif kind == 4:  # cut short
            mutated = mutated[: int(rng.integers(len(data)))]
        else:  # a bit of an array's data (the weights, the names' tables)
            position = int(rng.integers(len(data) // 3, len(data)))
            mutated[position] ^= 1 << int(rng.integers(8))
        out.append(bytes(mutated))
    return out


def _tag(loaded, sequences, single):
    if single:
        return [list(loaded.predict_single(x)) for x in sequences]
    return [list(labels) for labels in loaded.predict(sequences)]


def _outcome(path, sequences, how):
    """What opening ``path`` one way and tagging with it gives: tags, or the error."""
    try:
        if how == "load_state":
            state = load_state(path)
            loaded = CRFTagger._from_fitted_state(state)
        else:
            loaded = CRFTagger.load(path, mmap=how == "mmap")
    except ValueError as exc:
        return {"error": str(exc)}
    try:  # a lazily read table found damaged by the first lookup
        return {"tags": _tag(loaded, sequences, single=how == "mmap")}
    except ValueError as exc:
        return {"error": str(exc), "at": "first lookup"}


@pytest.mark.parametrize("which", FORMATS)
def test_mutants_are_refused_or_harmless(models, tmp_path, which):
    data, sequences = _source(which, models, tmp_path)
    path = tmp_path / "mutant.skcrf"
    path.write_bytes(data)
    expected = _outcome(path, sequences, "load")
    assert "tags" in expected
    rng = np.random.default_rng([SEED, FORMATS.index(which)])
    counts = {"refused": 0, "at first lookup": 0, "harmless": 0}
    for k, mutated in enumerate(mutants(data, rng, N_MUTANTS)):
        path.write_bytes(mutated)
        outcomes = {how: _outcome(path, sequences, how) for how in ("load_state", "load", "mmap")}
        for how, outcome in outcomes.items():
            if "error" in outcome:
                assert outcome["error"].startswith("Cannot load skcrf model"), (k, how, outcome)
                assert repr(str(path)) in outcome["error"], (k, how, outcome)
            else:
                assert outcome == expected, (k, how, outcome)
        # every way agrees, but the lazy reads: load_state checks every name at
        # once, the estimator's load at the first lookup
        assert ("error" in outcomes["load"]) == ("error" in outcomes["mmap"]), (k, outcomes)
        if "error" in outcomes["load"]:
            assert "error" in outcomes["load_state"], (k, outcomes)
            counts["at first lookup" if "at" in outcomes["load"] else "refused"] += 1
        else:
            counts["harmless"] += 1
    print(f"{which}: {N_MUTANTS} mutants (seed {SEED}): {counts}")
    assert counts["refused"] + counts["at first lookup"] > 0.7 * N_MUTANTS
