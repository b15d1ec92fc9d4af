"""Input-conditioned transitions on both Treebank tasks: fit cost and accuracy.

For each task (seed, window: benchmarks/_tasks.py) and each ``--n-jobs``, two
skcrf fits, each in a fresh process, alternating for ``--repeats``
repetitions:

- ``plain``: the task's features (the reference settings: c1=0.1, c2=0.1,
  100 L-BFGS iterations, all_possible_transitions=True);
- ``conditioned``: the same, plus the previous word (lower-cased) as a
  transition attribute of each token (``{'__transition__': {'prev': word}}``):
  a transition matrix per previous word, features on the label pairs seen
  with it.

Rows: fit seconds (featurization included, as in treebank.py), the fit's
peak memory above the loaded data, the number of features, test accuracy,
the seconds of ``predict`` on the test part (feature dicts given; the
median of 5 calls, with the fit's ``n_jobs``);
medians over the repetitions, and the ratio conditioned / plain of the fit
time (the median of the per-repetition ratios).

    NLTK_DATA=/work/shared/nltk_data PYTHONPATH=. python benchmarks/conditioned.py  # ~10 min
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


def _worker(task, mode, split, quick, n_jobs):
    import resource

    sys.path.insert(0, str(HERE))
    from _tasks import QUICK_SENTENCES, load_task

    from skcrf import CRFTagger

    X_train, y_train, X_test, y_test = load_task(task, quick=quick, split=split)
    if mode == "conditioned":
        with open(split) as f:
            parts = json.load(f)
        train, test = parts["train"], parts["test"]
        if quick:
            train, test = train[: QUICK_SENTENCES[0]], test[: QUICK_SENTENCES[1]]
        for X, sentences in ((X_train, train), (X_test, test)):
            for seq, sentence in zip(X, sentences):
                for i in range(1, len(seq)):
                    seq[i]["__transition__"] = {"prev": sentence[i - 1][0].lower()}
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
    predict_s = []
    for _ in range(5):
        start = time.perf_counter()
        tagger.predict(X_test)
        predict_s.append(time.perf_counter() - start)
    return {
        "task": task,
        "n_jobs": n_jobs,
        "mode": mode,
        "fit_s": seconds,
        "fit_memory_mb": (peak - rss) / 1024,
        "ru_maxrss_before_kb": before,
        "n_features": tagger.n_features_,
        "n_conditioned": len(tagger.conditioned_transition_features_),
        "n_iter": tagger.n_iter_,
        "accuracy": accuracy,
        "predict_s": statistics.median(predict_s),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--task", choices=("seed", "window", "both"), default="both")
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", default=None)
    parser.add_argument("--worker", nargs=4, metavar=("TASK", "MODE", "SPLIT", "QUICK"))
    args = parser.parse_args()
    if args.worker:
        task, mode, split, quick = args.worker
        print(json.dumps(_worker(task, mode, split, quick == "1", args.n_jobs[0])))
        return

    sys.path.insert(0, str(HERE))
    from _tasks import save_split

    out = args.json or (
        os.path.join(tempfile.gettempdir(), "conditioned-quick.json")
        if args.quick
        else str(HERE / "results" / "conditioned.json")
    )
    tasks = ("seed", "window") if args.task == "both" else (args.task,)
    configs = [(task, n_jobs) for task in tasks for n_jobs in args.n_jobs]
    runs = {f"{task} n_jobs={n}": {mode: [] for mode in MODES} for task, n in configs}
    with tempfile.TemporaryDirectory() as tmp:
        split = os.path.join(tmp, "split.json")
        save_split(split)
        for r in range(1 if args.quick else args.repeats):
            for task, n_jobs in configs:
                for mode in MODES:
                    command = [sys.executable, __file__, "--n-jobs", str(n_jobs)]
                    command += ["--worker", task, mode, split, "1" if args.quick else "0"]
                    result = subprocess.run(command, capture_output=True, text=True, check=True)
                    run = json.loads(result.stdout.strip().splitlines()[-1])
                    runs[f"{task} n_jobs={n_jobs}"][mode].append(run)
                    print(f"repeat {r} {task} n_jobs={n_jobs} {mode}: {run}", file=sys.stderr)
    keys = ("fit_s", "fit_memory_mb", "n_features", "n_conditioned", "accuracy", "predict_s")
    rows, ratios = {}, {}
    for name, by_mode in runs.items():
        ratios[name] = [c["fit_s"] / p["fit_s"] for p, c in zip(*(by_mode[m] for m in MODES))]
        rows[name] = {
            mode: {key: statistics.median(run[key] for run in by_mode[mode]) for key in keys}
            for mode in MODES
        }
    n_repeats = 1 if args.quick else args.repeats
    lines = [
        f"{n_repeats} repetition(s), medians; fit time ratio: median of per-repetition ratios",
        "",
        "| task | model | fit s | fit memory MB | features | conditioned | test accuracy |"
        " fit ÷ plain | predict s |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for name, by_mode in rows.items():
        for mode in MODES:
            row = by_mode[mode]
            ratio = f"{statistics.median(ratios[name]):.2f}×" if mode == "conditioned" else ""
            lines.append(
                f"| {name} | {mode} | {row['fit_s']:.1f} | {row['fit_memory_mb']:.0f} | "
                f"{row['n_features']:.0f} | {row['n_conditioned']:.0f} | "
                f"{row['accuracy']:.4f} | {ratio} | {row['predict_s']:.3f} |"
            )
    print("\n".join(lines))
    with open(out, "w") as f:
        json.dump({"params": PARAMS, "runs": runs, "ratios": ratios, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
