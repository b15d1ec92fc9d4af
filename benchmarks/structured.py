"""Structured decoding on the Treebank tasks: n-best, constrained decoding, partial labels.

Rows (each call on the whole test split; the calls alternate, ``--repeats``
times, so that drifts of the machine hit all of them; the times are medians,
the ratios the medians of the per-repetition ratios to ``predict``; decoding
uses ``--n-jobs`` threads, default None: one):

- ``predict``: the unconstrained Viterbi (the reference of the ratios);
- ``predict_nbest(n=10)``: exact 10-best with log-probabilities, target <= 3x
  (the lazy k-best kernel);
- ``allowed_transitions`` with 50% of the label pairs forbidden (at random,
  ``--seed``), target <= 1.2x;
- ``partial_labels`` fixing 20% of the positions (to the gold tags, at
  random), target <= 1.2x;
- training with 50% of the training tokens' labels hidden at random
  (``missing_label``): its test accuracy next to a fit on only the
  sentences that kept every label, and next to the full-label fit (the
  partial-label fit must beat the complete-sentences one).

    PYTHONPATH=. python benchmarks/structured.py            # both tasks, ~5 min
    PYTHONPATH=. python benchmarks/structured.py --n-jobs 2 --skip-training \
        --output benchmarks/results/structured-n_jobs2.json
    PYTHONPATH=. python benchmarks/structured.py --quick    # smoke test

Prints a table and writes ``benchmarks/results/structured.json``.
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
from _worker import timed  # noqa: E402

from skcrf import CRFTagger  # noqa: E402

FIT_PARAMS = {"c1": 0.1, "c2": 0.1, "max_iterations": 100, "all_possible_transitions": True}
NBEST_TARGET = 3.0
CONSTRAINED_TARGET = 1.2
MISSING = "<?>"


def decoding_rows(tagger, X_test, y_test, repeats, rng):
    classes = list(tagger.classes_)
    n_labels = len(classes)
    # 50% of the label pairs forbidden, at random
    forbidden = rng.random((n_labels, n_labels)) < 0.5
    pairs = [
        (classes[i], classes[j])
        for i in range(n_labels)
        for j in range(n_labels)
        if not forbidden[i, j]
    ]
    # 20% of the positions fixed to their gold tag
    known = set(classes)
    partial = [
        [tag if (rng.random() < 0.2 and tag in known) else None for tag in seq] for seq in y_test
    ]
    calls = [
        ("predict", lambda: tagger.predict(X_test), None),
        ("predict_nbest(n=10)", lambda: tagger.predict_nbest(X_test, n=10), NBEST_TARGET),
        (
            "predict, allowed_transitions 50% forbidden",
            lambda: tagger.predict(X_test, allowed_transitions=pairs),
            CONSTRAINED_TARGET,
        ),
        (
            "predict, partial_labels 20% fixed",
            lambda: tagger.predict(X_test, partial_labels=partial),
            CONSTRAINED_TARGET,
        ),
        ("predict_marginals", lambda: tagger.predict_marginals(X_test), None),
        ("sequence_log_proba (Viterbi path)", lambda: tagger.sequence_log_proba(X_test), None),
    ]
    for _, fn, _ in calls:
        fn()  # warm the caches
    # alternated: a drift of the machine hits every call of a repetition
    times = [[] for _ in calls]
    for _ in range(repeats):
        for k, (_, fn, _) in enumerate(calls):
            times[k].append(timed(fn)[1])  # the result freed after the clock stopped
    rows = []
    for (name, _, target), all_times in zip(calls, times):
        ratios = [t / base for t, base in zip(all_times, times[0])]
        rows.append(
            {
                "row": name,
                "seconds": statistics.median(all_times),
                "all": all_times,
                "ratio": statistics.median(ratios),
                "ratios": ratios,
                "target": target,
            }
        )
    # sanity: the first of the n best is predict's labelling
    assert [lst[0][0] for lst in tagger.predict_nbest(X_test, n=10)] == tagger.predict(X_test)
    # sanity: the constraints hold
    constrained = tagger.predict(X_test, allowed_transitions=pairs)
    index = {c: k for k, c in enumerate(classes)}
    assert not any(
        forbidden[index[a], index[b]] for seq in constrained for a, b in zip(seq, seq[1:])
    )
    fixed = tagger.predict(X_test, partial_labels=partial)
    assert all(p is None or p == f for ps, fs in zip(partial, fixed) for p, f in zip(ps, fs))
    return rows


def training_rows(X_train, y_train, X_test, y_test, rng, quick):
    params = dict(FIT_PARAMS)
    if quick:
        params["max_iterations"] = 10
    hidden = [[MISSING if rng.random() < 0.5 else tag for tag in seq] for seq in y_train]
    complete = [i for i, seq in enumerate(hidden) if MISSING not in seq]
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in [
            ("full labels", lambda: CRFTagger(**params).fit(X_train, y_train)),
            (
                "50% hidden, partial-label fit (missing_label)",
                lambda: CRFTagger(**params, missing_label=MISSING).fit(X_train, hidden),
            ),
            (
                f"50% hidden, complete sentences only ({len(complete)} of {len(hidden)})",
                lambda: (
                    CRFTagger(**params).fit(
                        [X_train[i] for i in complete], [y_train[i] for i in complete]
                    )
                    if complete
                    else None
                ),
            ),
        ]:
            start = time.perf_counter()
            tagger = make()
            seconds = time.perf_counter() - start
            accuracy = tagger.score(X_test, y_test) if tagger is not None else float("nan")
            rows.append({"row": name, "fit_seconds": seconds, "test_accuracy": accuracy})
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", default="seed,window")
    parser.add_argument("--skip-training", action="store_true")
    parser.add_argument("--n-jobs", type=int, default=None)
    parser.add_argument("--output", default=str(HERE / "results" / "structured.json"))
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
    for task in args.tasks.split(","):
        rng = np.random.default_rng(args.seed)
        X_train, y_train, X_test, y_test = load_task(task, quick=args.quick)
        params = dict(FIT_PARAMS, max_iterations=10 if args.quick else 100)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tagger = CRFTagger(**params).fit(X_train, y_train)
        tagger.set_params(n_jobs=args.n_jobs)
        print(
            f"\n## {task}: {n_tokens(X_test)} test tokens, {len(tagger.classes_)} labels, "
            f"n_jobs={args.n_jobs}"
        )
        rows = decoding_rows(tagger, X_test, y_test, args.repeats, rng)
        print(f"{'row':48} {'median s':>9} {'ratio':>7} {'target':>7}  met")
        for row in rows:
            target = row["target"]
            met = "" if target is None else ("yes" if row["ratio"] <= target else "NO")
            print(
                f"{row['row']:48} {row['seconds']:9.4f} {row['ratio']:7.2f} "
                f"{'' if target is None else f'<= {target}':>7}  {met}"
            )
        result = {"decoding": rows}
        if task == "seed" and not args.skip_training:
            train_rows = training_rows(X_train, y_train, X_test, y_test, rng, args.quick)
            print(f"\n{'training':60} {'fit s':>7} {'test acc':>9}")
            for row in train_rows:
                print(f"{row['row']:60} {row['fit_seconds']:7.1f} {row['test_accuracy']:9.4f}")
            partial_acc = train_rows[1]["test_accuracy"]
            complete_acc = train_rows[2]["test_accuracy"]
            met = bool(partial_acc > complete_acc) or np.isnan(complete_acc)
            print(f"partial-label fit beats complete sentences only: {'yes' if met else 'NO'}")
            result["training"] = train_rows
        report["tasks"][task] = result
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(report, f, indent=1)
    print(f"\nwrote {args.output}")


if __name__ == "__main__":
    main()
