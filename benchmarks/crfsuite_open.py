"""Open time of a large CRFsuite model: skcrf's lazy open vs python-crfsuite's (issue 40).

    PYTHONPATH=. python benchmarks/crfsuite_open.py [--model PATH] [--repeats 21]

The model (``--model``, else a synthetic one written to the temp folder): a
CRFsuite file of 200,000 attributes named like window features
(``w[-1]=word123``), 10 labels, 2 state features per attribute (written by
skcrf's ``write_crfsuite``, which writes what CRFsuite writes). The file is
read once first (page cache). Per repetition, in one process, round robin:
``pycrfsuite.Tagger().open(path)``, ``skcrf.pycrfsuite.Tagger().open(path)``
and ``skcrf.CRFTagger.from_crfsuite(path)``, each timed with
``perf_counter`` around the open alone (and ``close`` / drop after). Prints
the medians (ms) and the median per-repetition ratio to pycrfsuite's.
Target (issue 40): skcrf.pycrfsuite's open ≤ 1.5 × pycrfsuite's.

``--fresh``: each open in a fresh process instead (as serving.py's load
section: the engine's module and numpy imported, then ``perf_counter`` around
the open), round robin over the engines per repetition; what a server
starting up pays (the file's buffer is new memory, not in the CPU caches).
"""

import argparse
import json
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


FRESH = """
import json, sys, time
import numpy
name, path = sys.argv[1], sys.argv[2]
if name == "pycrfsuite":
    import pycrfsuite
    tagger = pycrfsuite.Tagger()
    start = time.perf_counter()
    tagger.open(path)
elif name == "skcrf.pycrfsuite":
    import skcrf.pycrfsuite
    tagger = skcrf.pycrfsuite.Tagger()
    start = time.perf_counter()
    tagger.open(path)
else:
    from skcrf import CRFTagger  # imported first: skcrf imports its estimator lazily

    start = time.perf_counter()
    CRFTagger.from_crfsuite(path)
print(json.dumps(time.perf_counter() - start))
"""


def fresh_open(name, path):
    """The open time of engine ``name`` in a new process (seconds)."""
    out = subprocess.run(
        [sys.executable, "-c", FRESH, name, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--fresh", action="store_true")
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

    def open_theirs():
        t = pycrfsuite.Tagger()
        start = time.perf_counter()
        t.open(str(path))
        seconds = time.perf_counter() - start
        t.close()
        return seconds

    def open_ours():
        t = sp.Tagger()
        start = time.perf_counter()
        t.open(str(path))
        seconds = time.perf_counter() - start
        t.close()
        return seconds

    def from_crfsuite():
        start = time.perf_counter()
        crf = skcrf.CRFTagger.from_crfsuite(path)
        seconds = time.perf_counter() - start
        del crf
        return seconds

    engines = {
        "pycrfsuite": open_theirs,
        "skcrf.pycrfsuite": open_ours,
        "CRFTagger.from_crfsuite": from_crfsuite,
    }
    times = {name: [] for name in engines}
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
    print(f"{'engine':<26}{'open (ms)':>10}{'÷ pycrfsuite':>14}")
    for name, values in times.items():
        ratio = statistics.median(v / p for v, p in zip(values, times["pycrfsuite"]))
        print(f"{name:<26}{1e3 * statistics.median(values):>10.2f}{ratio:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
