"""Dense vector features: skcrf's BLAS path against sklearn-crfsuite's scalar keys.

The seed Treebank task (benchmarks/_tasks.py) plus a ``d``-dimensional vector
per token (fixed random vectors per lower-cased word type, N(0, 1/d), seeded),
for d = 100 and 300, 100 L-BFGS iterations:

- ``skcrf``: the vector as one feature value, ``{'emb': vector}`` (a dense
  tokens x d block; emissions and expected counts are BLAS products);
- ``crfsuite``: sklearn-crfsuite given the same numbers as d scalar keys
  ``emb[0]`` ... ``emb[d-1]`` (the same model: CRFsuite's semantics).

Each fit runs in a fresh process: per repetition (``--repeats``, default 3)
and ``d``, one CRFsuite fit, then skcrf at each ``--n-jobs`` (default 1 and 2;
CRFsuite has one thread). The table gives the median fit times (the data is
built before the fit) and the median of the per-repetition speed-ups, the
final objective of both and their relative difference, and memory: the
process's peak RSS and the fit's own peak (peak RSS during fit minus RSS
before it, the data built). Target of issue #15: skcrf's fit at least 10x
faster, same objective.

    PYTHONPATH=. python benchmarks/dense.py                   # d = 100, 300
    PYTHONPATH=. python benchmarks/dense.py --dimensions 100  # the target's row
    PYTHONPATH=. python benchmarks/dense.py --quick           # smoke test

Writes benchmarks/results/dense.json (--quick: the temp folder).
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
ROOT = HERE.parent
PARAMS = {"c1": 0.1, "c2": 0.1, "all_possible_transitions": True}
DIMENSIONS = (100, 300)
SPEED_TARGET = 10.0
ENGINES = ("crfsuite", "skcrf")


def word_vectors(words, d, seed=0):
    """A fixed random vector per lower-cased word type (N(0, 1/d))."""
    import numpy as np

    rng = np.random.default_rng(seed)
    types = sorted({w.lower() for w in words})
    table = rng.normal(scale=1.0 / np.sqrt(d), size=(len(types), d))
    return {w: table[k] for k, w in enumerate(types)}


def run_job(job):
    sys.path.insert(0, str(HERE))
    import gc
    import warnings

    from _tasks import TOKEN_FEATURES
    from _worker import reset_peak, rss_mb, ru_maxrss_mb
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)
    after_imports = rss_mb()
    with open(job["split"]) as f:
        train = json.load(f)["train"]
    if job["quick"]:
        train = train[:300]
    d = job["d"]
    vectors = word_vectors([w for s in train for w, _ in s], d)
    token_features = TOKEN_FEATURES["seed"]
    X, y = [], []
    for sentence in train:
        words = [w for w, _ in sentence]
        seq = []
        for i in range(len(words)):
            features = token_features(words, i)
            vector = vectors[words[i].lower()]
            if job["engine"] == "skcrf":
                features["emb"] = vector
            else:
                features.update({f"emb[{k}]": v for k, v in enumerate(vector.tolist())})
            seq.append(features)
        X.append(seq)
        y.append([t for _, t in sentence])
    if job["engine"] == "skcrf":
        from skcrf import CRFTagger

        model = CRFTagger(max_iterations=job["iterations"], n_jobs=job["n_jobs"], **PARAMS)
    else:
        import sklearn_crfsuite

        tmp = tempfile.mkdtemp()
        model = sklearn_crfsuite.CRF(
            algorithm="lbfgs",
            max_iterations=job["iterations"],
            model_filename=os.path.join(tmp, "model"),
            **PARAMS,
        )
    gc.collect()
    data_rss = rss_mb()
    data_peak = ru_maxrss_mb()
    peak_reset = reset_peak()
    start = time.perf_counter()
    model.fit(X, y)
    fit_s = time.perf_counter() - start
    peak = ru_maxrss_mb()
    iterations = model.training_log_.iterations
    return {
        "engine": job["engine"],
        "d": d,
        "fit_s": fit_s,
        "iterations": len(iterations),
        "final_loss": iterations[-1]["loss"],
        "s_per_iteration": sum(e["time"] for e in iterations) / len(iterations),
        "rss_after_imports_mb": after_imports,
        "rss_data_built_mb": data_rss,
        "peak_before_fit_mb": data_peak,
        "peak_rss_mb": max(peak, data_peak),
        "fit_peak_mb": peak - data_rss,
        "peak_reset": peak_reset,
        "train_sentences": len(train),
        "n_jobs": job["n_jobs"] if job["engine"] == "skcrf" else 1,
    }


def child(job):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    out = subprocess.run(
        [sys.executable, __file__, "--job", json.dumps(job)],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise RuntimeError(f"job failed: {job}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="300 sentences, 5 iterations")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--dimensions", type=int, nargs="+", default=list(DIMENSIONS))
    parser.add_argument("--n-jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.job:
        print(json.dumps(run_job(json.loads(args.job))))
        return 0
    iterations = 5 if args.quick else args.iterations
    output = args.output or (
        Path(tempfile.gettempdir()) / "dense.json"
        if args.quick
        else HERE / "results" / "dense.json"
    )
    started = time.perf_counter()
    # CRFsuite runs on one thread: one CRFsuite fit per repetition and d, then
    # skcrf at each thread count, in that order, alternated over repetitions
    configurations = [("crfsuite", 1)] + [("skcrf", n_jobs) for n_jobs in args.n_jobs]
    runs = {f"{engine}_{d}_{n}": [] for d in args.dimensions for engine, n in configurations}
    with tempfile.TemporaryDirectory() as tmp:
        split = Path(tmp) / "split.json"
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
        )
        subprocess.run(
            [
                sys.executable,
                str(HERE / "_worker.py"),
                json.dumps({"kind": "prepare", "split": str(split)}),
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        for rep in range(args.repeats):
            for d in args.dimensions:
                for engine, n_jobs in configurations:
                    print(
                        f"[{time.perf_counter() - started:6.1f} s] d={d} {engine} "
                        f"n_jobs={n_jobs} ({rep + 1}/{args.repeats})",
                        file=sys.stderr,
                        flush=True,
                    )
                    job = {
                        "engine": engine,
                        "d": d,
                        "split": str(split),
                        "quick": args.quick,
                        "iterations": iterations,
                        "n_jobs": n_jobs,
                    }
                    runs[f"{engine}_{d}_{n_jobs}"].append(child(job))
    header = (
        "d",
        "skcrf n_jobs",
        "crfsuite fit (s)",
        "skcrf fit (s)",
        "speed-up",
        "target",
        "met",
        "crfsuite loss",
        "skcrf loss",
        "rel. diff",
        "crfsuite peak RSS (MB)",
        "skcrf peak RSS (MB)",
        "crfsuite fit peak (MB)",
        "skcrf fit peak (MB)",
    )
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    summary = {}

    def median_of(key, field):
        return statistics.median(run[field] for run in runs[key])

    for d in args.dimensions:
        crfsuite = f"crfsuite_{d}_1"
        for n_jobs in args.n_jobs:
            ours = f"skcrf_{d}_{n_jobs}"
            # the median of the per-repetition ratios (a drift hits both fits)
            speedup = statistics.median(
                c["fit_s"] / s["fit_s"] for c, s in zip(runs[crfsuite], runs[ours])
            )
            c_loss, s_loss = runs[crfsuite][0]["final_loss"], runs[ours][0]["final_loss"]
            rel = abs(s_loss - c_loss) / abs(c_loss)
            summary[f"{d}_{n_jobs}"] = {
                "d": d,
                "n_jobs": n_jobs,
                "speedup": speedup,
                "met": speedup >= SPEED_TARGET,
                "loss_relative_difference": rel,
                "same_loss_every_repetition": len({r["final_loss"] for r in runs[ours]}) == 1,
            }
            lines.append(
                "| "
                + " | ".join(
                    [
                        str(d),
                        str(n_jobs),
                        f"{median_of(crfsuite, 'fit_s'):.1f}",
                        f"{median_of(ours, 'fit_s'):.1f}",
                        f"{speedup:.1f}x",
                        f">= {SPEED_TARGET:.0f}x",
                        "yes" if speedup >= SPEED_TARGET else "NO",
                        f"{c_loss:.6f}",
                        f"{s_loss:.6f}",
                        f"{rel:.1e}",
                        f"{median_of(crfsuite, 'peak_rss_mb'):.0f}",
                        f"{median_of(ours, 'peak_rss_mb'):.0f}",
                        f"{median_of(crfsuite, 'fit_peak_mb'):.0f}",
                        f"{median_of(ours, 'fit_peak_mb'):.0f}",
                    ]
                )
                + " |"
            )
    table = "\n".join(lines)
    print(
        f"Seed Treebank task + d-dimensional word vectors, {iterations} iterations, "
        f"params {PARAMS}, medians of {args.repeats} alternated repetition(s):\n"
    )
    print(table)
    result = {
        "iterations": iterations,
        "params": PARAMS,
        "quick": args.quick,
        "repeats": args.repeats,
        "n_jobs": args.n_jobs,
        "speed_target": SPEED_TARGET,
        "summary": summary,
        "runs": runs,
        "table": table,
        "runtime_s": time.perf_counter() - started,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\nwritten: {output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
