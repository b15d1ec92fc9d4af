"""Randomly damaged Wapiti models: a clear ValueError, or a model that labels (issue 43).

Seeded mutants of the tiny model of ``tests/data/wapiti`` (lines removed,
repeated or garbled, bytes changed, numbers changed: counts, netstring
lengths, weight indices and values; files cut, garbage) must each be refused
by :func:`read_wapiti_model` with a ValueError naming the file and what is
wrong (from its checks, never the safety net that turns an unexpected
exception into one), or be read into a model that labels. With Wapiti built
(``$SKCRF_WAPITI``), a sample of the mutants skcrf reads are labelled by
``wapiti label`` too, which must agree.
"""

import os
import re
import subprocess

import numpy as np
import pytest
from test_crfpp_fuzz import check_mutants, line_mutant
from test_crfpp_model import read_columns
from test_wapiti_model import DATA, TINY_TEST, assert_labels_as_wapiti, wapiti_command

from skcrf import CRFTagger
from skcrf._persist._wapiti_model import read_wapiti_model

# more, or another seed, from the environment (a longer run by hand)
N_MUTANTS = int(os.environ.get("SKCRF_FUZZ_MUTANTS", 1000))
SEED = int(os.environ.get("SKCRF_FUZZ_SEED", 43))
N_LIVE = 25  # accepted mutants also labelled by wapiti

MODEL = (DATA / "tiny.model").read_bytes()
SEQUENCES = read_columns(TINY_TEST)[:4]
_NUMBER = re.compile(rb"[0-9]+")


def _number(rng, lines, at):
    """A number changed: a count, a netstring's length, a weight's index."""
    numbers = list(_NUMBER.finditer(lines[at]))
    if numbers:
        match = numbers[int(rng.integers(len(numbers)))]
        old = int(match.group())
        new = int(rng.choice([0, 1, old - 1, old + 1, old * 2, int(rng.integers(0, 1 << 31))]))
        lines[at] = (
            lines[at][: match.start()] + str(max(new, 0)).encode() + lines[at][match.end() :]
        )


def _weight(rng, lines, at):
    """A weight's value changed."""
    weights = [k for k, line in enumerate(lines) if b"=0x" in line]
    k = weights[int(rng.integers(len(weights)))]
    value = rng.choice([b"nan", b"inf", b"0x1p+2000", b"1e5", b"-0x1.8p+1", b"zz"])
    lines[k] = lines[k].split(b"=")[0] + b"=" + value


def mutant(rng):
    extra = [
        ("number", _number),
        ("weight", _weight),
        ("garbage", lambda rng, lines, at: rng.bytes(int(rng.integers(0, 2000)))),
    ]
    return line_mutant(rng, MODEL, extra)


def test_mutants_are_refused_clearly_or_label():
    rng = np.random.default_rng(SEED)
    check_mutants(read_wapiti_model, mutant, rng, N_MUTANTS, "Wapiti model", SEQUENCES)


def test_mutants_read_label_as_wapiti(tmp_path):
    wapiti = wapiti_command()
    if wapiti is None:
        pytest.skip("Wapiti is absent: set SKCRF_WAPITI to a built Wapiti 1.5.0 source tree")
    rng = np.random.default_rng(SEED + 1)
    data_path = tmp_path / "test.data"
    data_path.write_text(
        "".join("".join(" ".join(row) + "\n" for row in s) + "\n" for s in SEQUENCES),
        encoding="utf-8",
    )
    checked = 0
    for _ in range(20 * N_LIVE):
        data, kind = mutant(rng)
        try:
            state = read_wapiti_model(data)
        except ValueError:
            continue
        if data == MODEL:
            continue
        path = tmp_path / f"mutant{checked}.model"
        path.write_bytes(data)
        output = subprocess.run(
            [wapiti, "label", "-m", str(path), str(data_path)],
            capture_output=True,
            check=True,
            timeout=30,
        ).stdout.decode("utf-8")
        assert_labels_as_wapiti(CRFTagger._from_fitted_state(state), SEQUENCES, output)
        checked += 1
        if checked == N_LIVE:
            break
    assert checked == N_LIVE
