"""Input-conditioned transitions on the window Treebank task: fit cost and accuracy.

Two skcrf fits of the window task (benchmarks/_tasks.py), each in a fresh
process, alternating for ``--repeats`` repetitions:

- ``plain``: the window features (the reference settings: c1=0.1, c2=0.1,
  100 L-BFGS iterations, all_possible_transitions=True);
- ``conditioned``: the same, plus the previous word (lower-cased) as a
  transition attribute of each token (``{'__transition__': {'w[-1]': word}}``):
  a transition matrix per previous word, features on the label pairs seen
  with it.

Rows: fit seconds (featurization included, as in treebank.py), the fit's
peak memory above the loaded data, the number of features, test accuracy;
medians over the repetitions, and the ratio conditioned / plain of the fit
time (the median of the per-repetition ratios).

    NLTK_DATA=/work/shared/nltk_data PYTHONPATH=. python benchmarks/conditioned.py
    PYTHONPATH=. python benchmarks/conditioned.py --quick     # smoke test

Writes benchmarks/results/conditioned.json (--quick: the temp folder) and
prints a table.
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

HERE = Path(__file__).resolve().parent
MODES = ("plain", "conditioned")
PARAMS = {"c1": 0.1, "c2": 0.1, "all_possible_transitions": True, "max_iterations": 100}


def _worker(mode, split, quick, n_jobs):
    import resource

    sys.path.insert(0, str(HERE))
    from _tasks import load_task

    from skcrf import CRFTagger

    X_train, y_train, X_test, y_test = load_task("window", quick=quick, split=split)
    if mode == "conditioned":
        for X in (X_train, X_test):
            for seq in X:
                for i in range(1, len(seq)):
                    seq[i]["__transition__"] = {"w[-1]": seq[i]["w[-1]"]}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with open("/proc/self/status") as f:
        rss = next(int(line.split()[1]) for line in f if line.startswith("VmRSS"))
    with open("/proc/self/clear_refs", "w") as f:  # reset the peak to the current RSS
        f.write("5")
    params = dict(PARAMS, max_iterations=10 if quick else PARAMS["max_iterations"])
    tagger = CRFTagger(**params, n_jobs=n_jobs)
    start = time.perf_counter()
    tagger.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
    accuracy = tagger.score(X_test, y_test)
    return {
        "mode": mode,
        "fit_s": seconds,
        "fit_memory_mb": (peak - rss) / 1024,
        "ru_maxrss_before_kb": before,
        "n_features": tagger.n_features_,
        "n_conditioned": len(tagger.conditioned_transition_features_),
        "n_iter": tagger.n_iter_,
        "accuracy": accuracy,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", nargs=3, metavar=("MODE", "SPLIT", "QUICK"))
    args = parser.parse_args()
    if args.worker:
        mode, split, quick = args.worker
        print(json.dumps(_worker(mode, split, quick == "1", args.n_jobs)))
        return

    sys.path.insert(0, str(HERE))
    from _tasks import save_split

    out = args.json or (
        os.path.join(tempfile.gettempdir(), "conditioned-quick.json")
        if args.quick
        else str(HERE / "results" / "conditioned.json")
    )
    runs = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        split = os.path.join(tmp, "split.json")
        save_split(split)
        for r in range(1 if args.quick else args.repeats):
            for mode in MODES:
                command = [sys.executable, __file__, "--n-jobs", str(args.n_jobs)]
                command += ["--worker", mode, split, "1" if args.quick else "0"]
                result = subprocess.run(command, capture_output=True, text=True, check=True)
                runs[mode].append(json.loads(result.stdout.strip().splitlines()[-1]))
                print(f"repeat {r} {mode}: {runs[mode][-1]}", file=sys.stderr)
    ratios = [c["fit_s"] / p["fit_s"] for p, c in zip(runs["plain"], runs["conditioned"])]
    rows = {
        mode: {
            key: statistics.median(run[key] for run in runs[mode])
            for key in ("fit_s", "fit_memory_mb", "n_features", "n_conditioned", "accuracy")
        }
        for mode in MODES
    }
    lines = [
        f"window task, n_jobs={args.n_jobs}, {len(ratios)} repetition(s), medians",
        "",
        "| model | fit s | fit memory MB | features | conditioned | test accuracy |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for mode in MODES:
        row = rows[mode]
        lines.append(
            f"| {mode} | {row['fit_s']:.1f} | {row['fit_memory_mb']:.0f} | "
            f"{row['n_features']:.0f} | {row['n_conditioned']:.0f} | {row['accuracy']:.4f} |"
        )
    lines += ["", f"fit time conditioned / plain: {statistics.median(ratios):.2f}x"]
    print("\n".join(lines))
    with open(out, "w") as f:
        json.dump(
            {
                "params": PARAMS,
                "n_jobs": args.n_jobs,
                "runs": runs,
                "ratios": ratios,
                "rows": rows,
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
