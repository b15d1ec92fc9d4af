"""Randomly damaged CRF++ models: a clear ValueError, or a model that tags (issue 43).

Seeded mutants of the tiny model of ``tests/data/crfpp`` (binary and text:
bytes changed, header fields and trie units overwritten, weights made
non-finite, lines removed, repeated or garbled, files cut, garbage) must
each be refused by :func:`read_crfpp_model` with a ValueError naming the
file and what is wrong (from its checks, never the safety net that turns
an unexpected exception into one), or be read into a model that tags.
With ``crf_test`` at hand, a sample of the binary mutants that skcrf reads
are tagged by ``crf_test`` too, which must agree.
"""

import os
import struct
import subprocess

import numpy as np
import pytest
from test_crfpp_model import DATA, assert_tags_as_crf_test, crfpp_command, read_columns

from skcrf import CRFTagger
from skcrf._persist._crfpp_model import read_crfpp_model

# more, or another seed, from the environment (a longer run by hand)
N_MUTANTS = int(os.environ.get("SKCRF_FUZZ_MUTANTS", 700))  # of each format
SEED = int(os.environ.get("SKCRF_FUZZ_SEED", 43))
N_LIVE = 25  # accepted binary mutants also tagged by crf_test

BINARY = (DATA / "tiny.model").read_bytes()
TEXT = (DATA / "tiny.model.txt").read_bytes()
SEQUENCES = read_columns(DATA / "tiny_test.data")[:4]


def _layout(data):
    """Offsets of the binary model's parts: header fields, trie, weights."""
    labels_size = struct.unpack_from("<I", data, 28)[0]
    templates_at = 32 + labels_size
    templates_size = struct.unpack_from("<I", data, templates_at)[0]
    trie_at = templates_at + 4 + templates_size
    dsize = struct.unpack_from("<I", data, 24)[0]
    return [0, 4, 16, 20, 24, 28, templates_at], trie_at, dsize, trie_at + dsize


def _interesting(rng, around):
    return int(
        rng.choice(
            [0, 1, 2, 3, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, around - 1, around + 1, around * 2]
            + [int(rng.integers(0, 1 << 32))]
        )
        % (1 << 32)
    )


def binary_mutant(rng):
    data = bytearray(BINARY)
    fields, trie_at, dsize, weights_at = _layout(BINARY)
    kind = rng.integers(8)
    if kind == 0:  # cut
        return bytes(data[: rng.integers(0, len(data))]), "cut"
    if kind == 1:  # a few bytes anywhere
        for at in rng.integers(0, len(data), size=rng.integers(1, 5)):
            data[at] = rng.integers(256)
        return bytes(data), "bytes"
    if kind == 2:  # a header field
        at = int(rng.choice(fields))
        value = _interesting(rng, struct.unpack_from("<I", data, at)[0])
        struct.pack_into("<I", data, at, value)
        return bytes(data), "field"
    if kind in (3, 4):  # a trie unit's base or check
        unit = trie_at + 8 * int(rng.integers(0, dsize // 8))
        at = unit + 4 * int(rng.integers(2))
        old = struct.unpack_from("<i", data, at)[0]
        new = int(rng.choice([old + 1, old - 1, -old, 0, int(rng.integers(-300, dsize // 8))]))
        struct.pack_into("<i", data, at, new)
        return bytes(data), "trie"
    if kind == 5:  # a weight
        at = weights_at + 4 * int(rng.integers(0, (len(data) - weights_at) // 4))
        value = rng.choice([np.nan, np.inf, -np.inf, 1e30, rng.normal(scale=5.0)])
        struct.pack_into("<f", data, at, float(value))
        return bytes(data), "huge weight" if value == 1e30 else "weight"
    if kind == 6:  # bytes inserted or removed in the middle
        at = int(rng.integers(0, len(data)))
        if rng.integers(2):
            return bytes(data[:at] + rng.bytes(int(rng.integers(1, 9))) + data[at:]), "insert"
        return bytes(data[:at] + data[at + int(rng.integers(1, 9)) :]), "delete"
    garbage = rng.bytes(int(rng.integers(0, 3000)))  # garbage, after a valid header or not
    return (bytes(data[: 32 * int(rng.integers(2))]) + garbage), "garbage"


def line_mutant(rng, content, extra=()):
    """A mutant of a text file, and its kind.

    A line removed, repeated (another one), garbled or a blank one
    inserted, a few bytes changed, the file cut, or one of ``extra``:
    ``(kind, function)`` pairs, ``function(rng, lines, at)`` changing the
    lines in place (or returning the mutant's bytes).
    """
    lines = content.split(b"\n")
    at = int(rng.integers(0, len(lines)))
    kinds = ["delete", "repeat", "garble", "blank", "bytes", "cut", *(kind for kind, _ in extra)]
    kind = kinds[int(rng.integers(len(kinds)))]
    if kind == "bytes":
        data = bytearray(content)
        for k in rng.integers(0, len(data), size=rng.integers(1, 5)):
            data[k] = rng.integers(256)
        return bytes(data), kind
    if kind == "cut":
        return content[: rng.integers(0, len(content))], kind
    if kind == "delete":
        del lines[at]
    elif kind == "repeat":
        lines.insert(at, lines[int(rng.integers(0, len(lines)))])
    elif kind == "garble":
        lines[at] = rng.bytes(int(rng.integers(0, 20)))
    elif kind == "blank":
        lines.insert(at, b"")
    else:
        replaced = dict(extra)[kind](rng, lines, at)
        if replaced is not None:
            return replaced, kind
    return b"\n".join(lines), kind


def _crfpp_number(rng, lines, at):
    """A number changed: an id, a header value, a weight."""
    head, sep, tail = lines[at].partition(b" ")
    number = str(int(rng.integers(-5, 7000))).encode()
    lines[at] = (number + sep + tail) if sep and head.isdigit() else number


def text_mutant(rng):
    return line_mutant(rng, TEXT, [("number", _crfpp_number)])


def check_mutants(read, make, rng, n_mutants, what, sequences):
    """Each of ``n_mutants`` from ``make(rng)``: refused clearly, or read into a model that tags.

    ``what`` names the format in the error (``"CRF++ model"``). Returns the
    count of each outcome, both of which must happen (the mutants reach
    past the first check).
    """
    outcomes = {"refused": 0, "read": 0}
    for k in range(n_mutants):
        data, kind = make(rng)
        try:
            state = read(data)
        except ValueError as exc:
            message = str(exc)
            assert message.startswith(f"Cannot read {what} (bytes): "), (k, kind, message)
            assert "corrupted or invalid file (" not in message, (k, kind, message)  # safety net
            outcomes["refused"] += 1
            continue
        outcomes["read"] += 1
        tagger = CRFTagger._from_fitted_state(state)
        marginals = tagger.predict_marginals(sequences)
        assert all(np.isfinite(p) for seq in marginals for token in seq for p in token.values())
        assert len(tagger.predict(sequences)) == len(sequences)
    assert outcomes["refused"] > n_mutants // 4 and outcomes["read"] > 20, outcomes
    return outcomes


@pytest.mark.parametrize("form", ["binary", "text"])
def test_mutants_are_refused_clearly_or_tag(form):
    rng = np.random.default_rng(SEED + (form == "text"))
    make = binary_mutant if form == "binary" else text_mutant
    check_mutants(read_crfpp_model, make, rng, N_MUTANTS, "CRF++ model", SEQUENCES)


def test_binary_mutants_read_tag_as_crf_test(tmp_path):
    test = crfpp_command("crf_test")
    if test is None:
        if os.environ.get("SKCRF_REQUIRE_CRFPP"):
            pytest.fail("SKCRF_REQUIRE_CRFPP is set but crf_test is absent (crfpy)")
        pytest.skip("crf_test is absent (pip install crfpy ships CRF++)")
    rng = np.random.default_rng(SEED + 2)
    data_path = tmp_path / "test.data"
    data_path.write_text(
        "".join("".join(" ".join(row) + "\n" for row in s) + "\n" for s in SEQUENCES),
        encoding="utf-8",
    )
    checked = 0
    while checked < N_LIVE:
        data, kind = binary_mutant(rng)
        # (a weight of 1e30 leaves the scores' sums to rounding: their order decides)
        if kind in ("cut", "garbage", "huge weight"):
            continue
        try:
            state = read_crfpp_model(data)
        except ValueError:
            continue
        path = tmp_path / f"mutant{checked}.model"
        path.write_bytes(data)
        output = subprocess.run(
            [*test, "-v2", "-m", str(path), str(data_path)],
            capture_output=True,
            check=True,
            timeout=30,
        ).stdout.decode("utf-8")
        assert_tags_as_crf_test(CRFTagger._from_fitted_state(state), SEQUENCES, output)
        checked += 1
