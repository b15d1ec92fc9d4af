"""Randomly damaged CRFsuite files, skcrf against python-crfsuite (issue 40).

Seeded mutants of a small model trained by python-crfsuite (bytes changed,
32-bit fields overwritten, tables' buckets and records aimed at, files cut):
each must be either refused by skcrf (a ValueError naming what is wrong: at
open, or, for what the attributes' hash tables hold beyond their shape, at
the first lookup, which verifies them before anything is tagged) or opened
and tagged exactly as python-crfsuite tags it. python-crfsuite runs in
a subprocess (one for all the mutants skcrf accepts), each mutant in a child
of its own, forked, killed after a timeout: a mutant can make CRFsuite crash
or probe forever, and then skcrf must have refused it.
"""

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_crfsuite_file import _layout, _train, _u32

from skcrf import CRFTagger
from skcrf.pycrfsuite import Tagger

pytest.importorskip("pycrfsuite")

# more, or another seed, from the environment (a longer run by hand)
N_MUTANTS = int(os.environ.get("SKCRF_FUZZ_MUTANTS", 300))
SEED = int(os.environ.get("SKCRF_FUZZ_SEED", 40))
TIMEOUT_S = 5.0  # per mutant, in python-crfsuite's child

# Reads {"paths": [...], "sequences": [...]} on stdin; writes one JSON line per
# path: {"tags": [...]}, {"error": "..."}, {"crash": signal} or {"timeout": true}.
CHILD = textwrap.dedent(
    """
    import json, os, select, signal, sys
    import pycrfsuite

    job = json.load(sys.stdin)
    for path in job["paths"]:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            try:
                tagger = pycrfsuite.Tagger()
                tagger.open(path)
                out = {"tags": [tagger.tag(xseq) for xseq in job["sequences"]]}
            except Exception as exc:
                out = {"error": f"{type(exc).__name__}: {exc}"}
            os.write(write, json.dumps(out).encode())
            os._exit(0)
        os.close(write)
        chunks, timed_out = [], False
        while True:
            ready, _, _ = select.select([read], [], [], job["timeout"])
            if not ready:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
        os.close(read)
        _, status = os.waitpid(pid, 0)
        if timed_out:
            result = {"timeout": True}
        elif os.WIFSIGNALED(status):
            result = {"crash": os.WTERMSIG(status)}
        else:
            result = json.loads(b"".join(chunks) or b'{"crash": 0}')
        print(json.dumps(result), flush=True)
    """
)


def pycrfsuite_results(paths, sequences):
    """python-crfsuite's outcome for every file of ``paths`` (see CHILD)."""
    if not paths:
        return []
    job = {"paths": [str(p) for p in paths], "sequences": sequences, "timeout": TIMEOUT_S}
    completed = subprocess.run(
        [sys.executable, "-c", CHILD],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=60 + TIMEOUT_S * len(paths),
        check=True,
    )
    results = [json.loads(line) for line in completed.stdout.splitlines()]
    assert len(results) == len(paths), completed.stderr
    return results


def mutants(data, rng, n):
    """``n`` damaged copies of the model file ``data``, of various kinds."""
    layout = _layout(data)
    cq = layout["attributes"]
    size = _u32(data, cq + 4)
    tables = [
        (_u32(data, cq + 24 + 8 * t), _u32(data, cq + 28 + 8 * t))
        for t in range(256)
        if _u32(data, cq + 24 + 8 * t)
    ]
    records = [_u32(data, cq + _u32(data, cq + 20) + 4 * k) for k in range(layout["n_attributes"])]
    out = []
    for i in range(n):
        mutated = bytearray(data)
        kind = i % 5
        if kind == 0:  # a few random bytes
            for position in rng.integers(len(data), size=int(rng.integers(1, 4))):
                mutated[position] = int(rng.integers(256))
        elif kind == 1:  # a 32-bit field somewhere: a small number, or anything
            position = 4 * int(rng.integers(len(data) // 4))
            value = int(rng.integers(64)) if rng.random() < 0.5 else int(rng.integers(2**32))
            struct.pack_into("<I", mutated, position, value)
        elif kind == 2 and rng.random() < 0.05:  # a table made full: CRFsuite
            # would probe it forever for an unknown string in it
            offset, m = tables[int(rng.integers(len(tables)))]
            filled = [_u32(data, cq + offset + 8 * b + 4) for b in range(m)]
            for b in range(m):
                if not filled[b]:
                    struct.pack_into("<II", mutated, cq + offset + 8 * b, 12345, max(filled))
        elif kind == 2:  # a bucket of the attributes' tables
            offset, m = tables[int(rng.integers(len(tables)))]
            at = cq + offset + 8 * int(rng.integers(m)) + 4 * int(rng.integers(2))
            choices = [
                0,
                int(rng.choice(records)),
                int(rng.integers(size)),
                int(rng.integers(2**32)),
            ]
            struct.pack_into("<I", mutated, at, choices[int(rng.integers(len(choices)))])
        elif kind == 3:  # an attribute's record (id, key size, key) or backward link
            k = int(rng.integers(len(records)))
            if rng.random() < 0.3:
                at = cq + _u32(data, cq + 20) + 4 * k
                struct.pack_into("<I", mutated, at, int(rng.choice(records)))
            else:
                at = cq + records[k] + int(rng.integers(12))
                mutated[at] = int(rng.integers(256))
        else:  # cut short, the header's size kept or fixed
            cut = int(rng.integers(48, len(data)))
            mutated = mutated[:cut]
            if rng.random() < 0.5:
                struct.pack_into("<I", mutated, 4, cut)
        out.append(bytes(mutated))
    return out


def skcrf_outcome(data, sequences):
    """skcrf's tags of ``sequences`` with the file ``data``, or its error (and
    the sequences tagged before a lookup found the file damaged)."""
    try:
        tagger = Tagger()
        tagger.open_inmemory(data)
    except ValueError as exc:
        return {"error": str(exc)}
    tags = []
    try:
        for xseq in sequences:
            tags.append(tagger.tag(xseq))
    except ValueError as exc:  # found damaged by the first lookup's verification
        return {"error": str(exc), "tagged before": tags}
    return {"tags": tags}


def test_mutants_are_refused_or_tagged_as_pycrfsuite_tags_them(tmp_path):
    path = tmp_path / "model.crfsuite"
    X = _train(path, "lbfgs", {"c1": 0.05, "c2": 0.01, "max_iterations": 30})
    data = path.read_bytes()
    # unknown attributes in every hash table (a lookup of each probes its table)
    unseen = {f"unseen{i}": 1.0 for i in range(2000)}
    sequences = X[:12] + [[{"w": "unseen", "other": 1.0}, {"w": "cat"}], [unseen]]
    rng = np.random.default_rng(SEED)
    accepted, outcomes = [], []
    all_mutants = mutants(data, rng, N_MUTANTS)
    for k, mutated in enumerate(all_mutants):
        outcome = skcrf_outcome(mutated, sequences)
        outcomes.append(outcome)
        if "error" in outcome:
            assert outcome["error"].startswith("Invalid model: "), outcome["error"]
            # refused at the first lookup: nothing tagged from the damaged file
            assert outcome.get("tagged before", []) == [], outcome
            continue
        file = tmp_path / f"mutant{k}.crfsuite"
        file.write_bytes(mutated)
        accepted.append((k, file))
    theirs = pycrfsuite_results([file for _, file in accepted], sequences)
    differences = []
    for (k, _), their in zip(accepted, theirs):
        if their != outcomes[k]:
            differences.append((k, str(their)[:200], str(outcomes[k])[:200]))
    assert not differences, (len(differences), differences[:5])
    # the mutants reach both sides: refused ones and accepted ones (unchanged
    # bytes in padding, or changes CRFsuite reads the same way)
    n_refused = sum("error" in o for o in outcomes)
    n_at_lookup = sum("tagged before" in o for o in outcomes)
    print(
        f"{N_MUTANTS} mutants (seed {SEED}): skcrf refused {n_refused} ({n_at_lookup} at "
        f"the first lookup); accepted {len(accepted)}, pycrfsuite: "
        f"{sorted(set(next(iter(r)) for r in theirs))}"
    )
    assert 0.3 * N_MUTANTS < n_refused < N_MUTANTS
    # CRFTagger.from_crfsuite refuses what Tagger.open refuses (at open, or at
    # the first prediction, naming the file), and tags the others as it does
    for k in range(0, N_MUTANTS, 7):
        file = tmp_path / "again.crfsuite"
        file.write_bytes(all_mutants[k])
        if "error" in outcomes[k]:
            with pytest.raises(
                ValueError, match=r"Cannot read CRFsuite model '.*again\.crfsuite'"
            ):
                crf = CRFTagger.from_crfsuite(file)
                assert "tagged before" in outcomes[k]  # (else refused at open)
                crf.predict_single(sequences[0])
        else:
            crf = CRFTagger.from_crfsuite(file)
            assert [list(crf.predict_single(x)) for x in sequences] == outcomes[k]["tags"]
