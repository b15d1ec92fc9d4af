"""Open time of a large CRFsuite model: skcrf's lazy open vs python-crfsuite's (issue 40).

    PYTHONPATH=. python benchmarks/crfsuite_open.py [--model PATH] [--repeats 21]
        [--fresh] [--json benchmarks/results/crfsuite_open.json]

The model (``--model``, else a synthetic one written to the temp folder): a
CRFsuite file of 200,000 attributes named like window features
(``w[-1]=word123``), 10 labels, 2 state features per attribute (written by
skcrf's ``write_crfsuite``, which writes what CRFsuite writes). The file is
read once first (page cache). Per repetition, in one process, round robin:
``pycrfsuite.Tagger().open(path)``, ``skcrf.pycrfsuite.Tagger().open(path)``
and ``skcrf.CRFTagger.from_crfsuite(path)``, each timed with
``perf_counter`` around the open alone (and ``close`` / drop after), then
around the open and the first tagging of a short sequence (3 items, 6
attributes, 2 of them unseen: ``Tagger.tag`` / ``predict_single``), which
is where skcrf verifies the attributes' hash tables in full (the open checks
their shape only). Prints the medians (ms) and the median per-repetition
ratios to pycrfsuite's. Target (issue 40): skcrf.pycrfsuite's open ≤ 1.5 ×
pycrfsuite's.

``--fresh``: each open in a fresh process instead (as serving.py's load
section: the engine's module and numpy imported, then ``perf_counter`` around
the open, then around the first tag), round robin over the engines per
repetition; what a server starting up pays (the file's buffer is new memory,
not in the CPU caches). ``--json``: the settings, every sample and the
medians, written there.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def synthetic_model(path, n_attributes=200_000, n_labels=10, seed=0):
    from skcrf._model import CRFModel
    from skcrf._persist._crfsuite_file import write_crfsuite

    rng = np.random.default_rng(seed)
    attributes = [f"w[{k % 5 - 2}]=word{k}" for k in range(n_attributes)]
    per = 2
    state_labels = np.sort(
        np.stack([rng.choice(n_labels, size=per, replace=False) for _ in range(n_attributes)]),
        axis=1,
    ).ravel()
    classes = np.empty(n_labels, dtype=object)
    classes[:] = [f"L{k}" for k in range(n_labels)]
    model = CRFModel(
        classes=classes,
        attributes=attributes,
        state_ptr=np.arange(0, per * n_attributes + 1, per, dtype=np.int64),
        state_labels=state_labels.astype(np.int32),
        state_weights=rng.normal(size=per * n_attributes),
        transition_index=np.arange(n_labels * n_labels, dtype=np.int64),
        transition_weights=rng.normal(size=n_labels * n_labels),
    )
    write_crfsuite(model, path)


# the first sequence tagged: known attributes of the synthetic model and unseen ones
FIRST = [
    {"w[-2]=word10": 1.0, "w[0]=word12": 1.0},
    {"w[-1]=word123456": 1.0, "w[1]=unseen": 1.0},
    {"w[2]=word199999": 1.0, "bias=unseen": 1.0},
]

FRESH = """
import json, sys, time
import numpy
name, path, first = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
if name == "pycrfsuite":
    import pycrfsuite
    tagger = pycrfsuite.Tagger()
    start = time.perf_counter()
    tagger.open(path)
    opened = time.perf_counter()
    tagger.tag(first)
elif name == "skcrf.pycrfsuite":
    import skcrf.pycrfsuite
    tagger = skcrf.pycrfsuite.Tagger()
    start = time.perf_counter()
    tagger.open(path)
    opened = time.perf_counter()
    tagger.tag(first)
else:
    from skcrf import CRFTagger  # imported first: skcrf imports its estimator lazily

    start = time.perf_counter()
    tagger = CRFTagger.from_crfsuite(path)
    opened = time.perf_counter()
    tagger.predict_single(first)
print(json.dumps([opened - start, time.perf_counter() - start]))
"""


def fresh_open(name, path):
    """The open time, and the open and first tag's, of engine ``name`` in a new
    process (seconds)."""
    out = subprocess.run(
        [sys.executable, "-c", FRESH, name, str(path), json.dumps(FIRST)],
        capture_output=True,
        text=True,
        check=True,
        # (not the current folder: from a checkout, ``-c`` would import its
        # skcrf before the one PYTHONPATH names)
        cwd=tempfile.gettempdir(),
    )
    return tuple(json.loads(out.stdout))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--json", type=Path, help="write the samples and medians there")
    args = parser.parse_args(argv)

    import pycrfsuite

    import skcrf
    import skcrf.pycrfsuite as sp

    path = args.model
    if path is None:
        path = Path(tempfile.gettempdir()) / "skcrf-open-200k.crfsuite"
        if not path.exists():
            synthetic_model(path)
    path.read_bytes()  # page cache

    def timed(open_model, tag):
        start = time.perf_counter()
        tagger = open_model()
        opened = time.perf_counter()
        tag(tagger)
        return opened - start, time.perf_counter() - start

    def open_theirs():
        def open_model():
            t = pycrfsuite.Tagger()
            t.open(str(path))
            return t

        return timed(open_model, lambda t: t.tag(FIRST))

    def open_ours():
        def open_model():
            t = sp.Tagger()
            t.open(str(path))
            return t

        return timed(open_model, lambda t: t.tag(FIRST))

    def from_crfsuite():
        return timed(
            lambda: skcrf.CRFTagger.from_crfsuite(path), lambda crf: crf.predict_single(FIRST)
        )

    engines = {
        "pycrfsuite": open_theirs,
        "skcrf.pycrfsuite": open_ours,
        "CRFTagger.from_crfsuite": from_crfsuite,
    }
    times = {name: [] for name in engines}  # (open, open + first tag) per repetition
    load_before = os.getloadavg()
    if args.fresh:
        for _ in range(args.repeats):
            for name in engines:
                times[name].append(fresh_open(name, path))
    else:
        for engine in engines.values():  # warm-up
            engine()
        for _ in range(args.repeats):
            for name, engine in engines.items():
                times[name].append(engine())
    print(f"skcrf {skcrf.__file__}; model {path} ({path.stat().st_size} bytes)")
    print(
        f"{'engine':<26}{'open (ms)':>10}{'÷ pycrfsuite':>14}"
        f"{'+ first tag (ms)':>18}{'÷ pycrfsuite':>14}"
    )
    medians = {}
    for name, values in times.items():
        row = {}
        for i, what in enumerate(("open", "open_and_first_tag")):
            ours = [v[i] for v in values]
            theirs = [v[i] for v in times["pycrfsuite"]]
            row[f"{what}_ms"] = round(1e3 * statistics.median(ours), 2)
            row[f"{what}_ratio"] = round(statistics.median(a / b for a, b in zip(ours, theirs)), 3)
        medians[name] = row
        print(
            f"{name:<26}{row['open_ms']:>10.2f}{row['open_ratio']:>14.2f}"
            f"{row['open_and_first_tag_ms']:>18.2f}{row['open_and_first_tag_ratio']:>14.2f}"
        )
    if args.json:
        result = {
            "benchmark": "crfsuite_open",
            "command": "python benchmarks/crfsuite_open.py " + " ".join(argv or sys.argv[1:]),
            "skcrf": skcrf.__file__,
            "skcrf_version": skcrf.__version__,
            "model": str(path),
            "model_bytes": path.stat().st_size,
            "fresh_processes": args.fresh,
            "repeats": args.repeats,
            "first_tag_items": FIRST,
            "medians": medians,
            "target": "skcrf.pycrfsuite open_ratio <= 1.5 (issue 40)",
            "load_average_before_after": [load_before, os.getloadavg()],
            "cpu_count": os.cpu_count(),
            "samples_s": {
                name: [[round(a, 6), round(b, 6)] for a, b in values]
                for name, values in times.items()
            },
        }
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
