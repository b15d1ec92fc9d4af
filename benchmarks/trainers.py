"""Every training algorithm of skcrf against CRFsuite on the seed Treebank task.

For each algorithm (lbfgs, l2sgd, ap, pa, arow), skcrf's ``CRFTagger`` and
``sklearn_crfsuite.CRF`` fit the same training data with the same settings,
each fit in a fresh Python process, the engines alternating, ``--repeats``
times; the table shows the medians of the fit time (featurization included
for both), the median per-repetition speed ratio (CRFsuite ÷ skcrf), the
token accuracy on the test part and its difference in percentage points.
Writes benchmarks/results/trainers.json (every repetition, the settings and
the machine).

    PYTHONPATH=. python benchmarks/trainers.py                 # ~10 min on 2 cores
    PYTHONPATH=. python benchmarks/trainers.py --quick         # smoke test
    PYTHONPATH=. python benchmarks/trainers.py --algorithms ap pa --repeats 5

Settings: lbfgs as in treebank.py (c1=0.1, c2=0.1, max_iterations=100,
all_possible_transitions=True); the online algorithms CRFsuite's defaults with
max_iterations=50. skcrf uses random_state=0, or with ``--random-states 0 1 2``
those in turn, one per repetition (the shuffles are skcrf's own, not CRFsuite's,
so the two engines see the sequences in different orders):

    PYTHONPATH=. python benchmarks/trainers.py --algorithms l2sgd --repeats 3 --random-states 0 1 2
This process imports nothing heavy; progress goes to stderr.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENGINES = ("crfsuite", "skcrf")
ALGORITHMS = ("lbfgs", "l2sgd", "ap", "pa", "arow")
PARAMS = {
    "lbfgs": {"c1": 0.1, "c2": 0.1, "max_iterations": 100, "all_possible_transitions": True},
    "l2sgd": {"max_iterations": 50},
    "ap": {"max_iterations": 50},
    "pa": {"max_iterations": 50},
    "arow": {"max_iterations": 50},
}
QUICK_ITERATIONS = 5
START = time.perf_counter()


def progress(message):
    print(f"[{time.perf_counter() - START:7.1f} s] {message}", file=sys.stderr, flush=True)


# -- worker (one fit in this process) -------------------------------------------


def token_accuracy(predicted, y):
    pairs = [(p, t) for pseq, tseq in zip(predicted, y) for p, t in zip(pseq, tseq)]
    return sum(p == t for p, t in pairs) / len(pairs)


def run_job(job):
    """Fit one engine with one algorithm; time, epochs and test accuracy."""
    sys.path.insert(0, str(HERE))
    import warnings

    from _tasks import load_task
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)  # max_iterations is reached on purpose
    X_train, y_train, X_test, y_test = load_task("seed", job["quick"], job["split"])
    algorithm, params = job["algorithm"], job["params"]
    with tempfile.TemporaryDirectory() as tmp:
        if job["engine"] == "crfsuite":
            import sklearn_crfsuite

            model = sklearn_crfsuite.CRF(
                algorithm=algorithm, model_filename=os.path.join(tmp, "model"), **params
            )
        else:
            from skcrf import CRFTagger

            model = CRFTagger(
                algorithm=algorithm, random_state=job.get("random_state", 0), n_jobs=1, **params
            )
        start = time.perf_counter()
        model.fit(X_train, y_train)
        fit_s = time.perf_counter() - start
        accuracy = token_accuracy(model.predict(X_test), y_test)
    iterations = model.training_log_.iterations
    return {
        "fit_s": fit_s,
        "iterations": len(iterations),
        "iteration_time_sum_s": sum(entry["time"] for entry in iterations),
        "final_loss": iterations[-1]["loss"] if iterations else None,
        "accuracy": accuracy,
    }


# -- driver ---------------------------------------------------------------------


def child(job):
    """Run ``job`` in a fresh interpreter; its JSON result."""
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])),
    )
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--job", json.dumps(job)],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        raise RuntimeError(f"job {job} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine_info():
    """The worker's machine and package versions (through _worker.py's info job)."""
    out = subprocess.run(
        [sys.executable, str(HERE / "_worker.py"), json.dumps({"kind": "info"})],
        capture_output=True,
        text=True,
        check=True,
    )
    info = json.loads(out.stdout.strip().splitlines()[-1])
    info.pop("threadpools", None)
    info.pop("job", None)
    return info


def summarize(runs):
    """Medians per algorithm and engine, and the median per-repetition ratio."""
    rows = {}
    for algorithm, by_engine in runs.items():
        if not (by_engine["crfsuite"] and by_engine["skcrf"]):
            continue
        med = {
            engine: {
                key: statistics.median(r[key] for r in results)
                for key in ("fit_s", "accuracy", "iterations")
            }
            for engine, results in by_engine.items()
        }
        ratios = [
            c["fit_s"] / s["fit_s"] for c, s in zip(by_engine["crfsuite"], by_engine["skcrf"])
        ]
        rows[algorithm] = {
            "crfsuite_fit_s": med["crfsuite"]["fit_s"],
            "skcrf_fit_s": med["skcrf"]["fit_s"],
            "speed_ratio": statistics.median(ratios),
            "speed_ratios": ratios,
            "crfsuite_accuracy": med["crfsuite"]["accuracy"],
            "skcrf_accuracy": med["skcrf"]["accuracy"],
            "accuracy_difference_points": 100
            * (med["skcrf"]["accuracy"] - med["crfsuite"]["accuracy"]),
            "crfsuite_iterations": med["crfsuite"]["iterations"],
            "skcrf_iterations": med["skcrf"]["iterations"],
        }
    return rows


def table(rows):
    lines = [
        "| algorithm | CRFsuite fit (s) | skcrf fit (s) | speed-up | CRFsuite acc. | "
        "skcrf acc. | diff. (points) | epochs (CRFsuite / skcrf) | speed-up per repeat |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for algorithm, r in rows.items():
        lines.append(
            f"| {algorithm} | {r['crfsuite_fit_s']:.2f} | {r['skcrf_fit_s']:.2f} | "
            f"{r['speed_ratio']:.2f}x | {100 * r['crfsuite_accuracy']:.2f}% | "
            f"{100 * r['skcrf_accuracy']:.2f}% | {r['accuracy_difference_points']:+.2f} | "
            f"{r['crfsuite_iterations']:g} / {r['skcrf_iterations']:g} | "
            + ", ".join(f"{x:.2f}x" for x in r["speed_ratios"])
            + " |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--algorithms", nargs="+", choices=ALGORITHMS, default=list(ALGORITHMS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--random-states",
        type=int,
        nargs="+",
        default=[0],
        help="skcrf's random_state, one per repetition in turn (default 0 for all)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a few sentences and {QUICK_ITERATIONS} iterations (smoke test)",
    )
    parser.add_argument("--output", default=str(HERE / "results" / "trainers.json"))
    args = parser.parse_args()
    if args.job:
        result = run_job(json.loads(args.job))
        print(json.dumps(result))
        return

    with tempfile.TemporaryDirectory() as tmp:
        split = os.path.join(tmp, "split.json")
        progress("loading the treebank")
        subprocess.run(
            [
                sys.executable,
                str(HERE / "_worker.py"),
                json.dumps({"kind": "prepare", "split": split}),
            ],
            check=True,
            capture_output=True,
        )
        runs = {a: {e: [] for e in ENGINES} for a in args.algorithms}
        failures = []
        for repeat in range(args.repeats):
            for algorithm in args.algorithms:
                params = dict(PARAMS[algorithm])
                if args.quick:
                    params["max_iterations"] = QUICK_ITERATIONS
                # alternate which engine goes first
                for engine in ENGINES if repeat % 2 == 0 else ENGINES[::-1]:
                    job = {
                        "engine": engine,
                        "random_state": args.random_states[repeat % len(args.random_states)],
                        "algorithm": algorithm,
                        "params": params,
                        "quick": args.quick,
                        "split": split,
                    }
                    try:
                        result = child(job)
                    except RuntimeError as error:  # keep the other measurements
                        progress(f"repeat {repeat + 1} {algorithm} {engine} failed: {error}")
                        failures.append({"job": job, "error": str(error)[-2000:]})
                        continue
                    result["random_state"] = job["random_state"]
                    runs[algorithm][engine].append(result)
                    progress(
                        f"repeat {repeat + 1}/{args.repeats} {algorithm:5s} {engine:8s} "
                        f"rs {job['random_state']} "
                        f"fit {result['fit_s']:6.2f} s, accuracy "
                        f"{100 * result['accuracy']:.2f}%"
                    )
    rows = summarize(runs)
    report = table(rows)
    print(report)
    output = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "task": "seed",
        "quick": args.quick,
        "repeats": args.repeats,
        "random_states": args.random_states,
        "params": {a: PARAMS[a] for a in args.algorithms},
        "machine": machine_info(),
        "summary": rows,
        "runs": runs,
        "failures": failures,
        "note": "fit_s includes featurization for both engines; medians over repeats; "
        "speed_ratio = CRFsuite time / skcrf time (median of per-repeat ratios).",
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(output, f, indent=1)
    progress(f"wrote {args.output}")


if __name__ == "__main__":
    main()
