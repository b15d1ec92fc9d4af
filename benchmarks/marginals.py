"""predict_marginals against predict on the Treebank tasks (target: at most 3x).

For each task, a model is fitted with the task's reference settings (or read
from ``--models DIR/<task>.crfsuite``), then ``predict`` and
``predict_marginals`` of the whole test split are timed alternately,
``--repeats`` times each, so that drifts of the machine hit both. The ratio
is the median of the per-repetition ratios (``predict_marginals`` of
repetition r over ``predict`` of repetition r); the times are medians. A
call's result is kept until its time is taken (its deallocation is not
counted: a caller holds the result). Both calls use ``n_jobs`` threads
(``--n-jobs``, default None: one).

Rows: per task, the test tokens and labels, the median seconds of both
calls, the ratio and the target.

    PYTHONPATH=. python benchmarks/marginals.py                    # both tasks, ~2 min
    PYTHONPATH=. python benchmarks/marginals.py --models /tmp/models
    PYTHONPATH=. python benchmarks/marginals.py --quick            # smoke test

Prints a table and writes ``benchmarks/results/marginals.json``.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _tasks import load_task, n_tokens  # noqa: E402

from skcrf import CRFTagger  # noqa: E402

FIT_PARAMS = {"c1": 0.1, "c2": 0.1, "max_iterations": 100, "all_possible_transitions": True}
TARGET = 3.0


def timed(fn):
    start = time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - start
    del result  # freed after the clock stopped
    return seconds


def measure(tagger, X_test, repeats):
    """Alternated timings of both calls, and the per-repetition ratios."""
    tagger.predict(X_test)  # warm the caches (lookup tables, score arrays)
    marginals = tagger.predict_marginals(X_test)
    # sanity: every token's marginals sum to 1
    sums = [sum(token.values()) for seq in marginals for token in seq]
    assert np.allclose(sums, 1.0), "marginals do not sum to 1"
    del marginals
    predict, marginal = [], []
    for _ in range(repeats):
        predict.append(timed(lambda: tagger.predict(X_test)))
        marginal.append(timed(lambda: tagger.predict_marginals(X_test)))
    ratios = [m / p for m, p in zip(marginal, predict)]
    return {
        "predict_seconds": statistics.median(predict),
        "predict_marginals_seconds": statistics.median(marginal),
        "ratio": statistics.median(ratios),
        "target": TARGET,
        "predict_all": predict,
        "predict_marginals_all": marginal,
        "ratios": ratios,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test (figures mean nothing)")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--tasks", default="seed,window")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--models", help="read DIR/<task>.crfsuite instead of fitting")
    parser.add_argument("--output", default=str(HERE / "results" / "marginals.json"))
    args = parser.parse_args()
    report = {
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "settings": {"repeats": args.repeats, "n_jobs": args.n_jobs, "quick": args.quick},
        "tasks": {},
    }
    rows = []
    for task in args.tasks.split(","):
        X_train, y_train, X_test, _ = load_task(task, quick=args.quick)
        if args.models:
            tagger = CRFTagger.from_crfsuite(os.path.join(args.models, f"{task}.crfsuite"))
        else:
            params = dict(FIT_PARAMS, max_iterations=10 if args.quick else 100)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tagger = CRFTagger(**params).fit(X_train, y_train)
        del X_train, y_train
        tagger.set_params(n_jobs=args.n_jobs)
        row = measure(tagger, X_test, args.repeats)
        row.update(task=task, tokens=n_tokens(X_test), labels=len(tagger.classes_))
        report["tasks"][task] = row
        rows.append(row)
        print(f"{task}: done", file=sys.stderr)
    print(
        f"\n{'task':8} {'tokens':>7} {'labels':>6} {'predict s':>10} "
        f"{'marginals s':>12} {'ratio':>6} {'target':>7}  met"
    )
    for row in rows:
        met = "yes" if row["ratio"] <= TARGET else "NO"
        print(
            f"{row['task']:8} {row['tokens']:7d} {row['labels']:6d} "
            f"{row['predict_seconds']:10.4f} {row['predict_marginals_seconds']:12.4f} "
            f"{row['ratio']:6.2f} {'<= ' + str(TARGET):>7}  {met}"
        )
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
