"""Memory of a one-pass streaming fit: a Treebank task from a generator.

Fits skcrf on the window task (``--task``, or the seed task; benchmarks/_tasks.py)
with ``--n-jobs`` threads (default 1) twice, each in a fresh
process, the two alternating for ``--repeats`` repetitions:

- ``list``: the usual way, ``fit(X, y)`` with ``X`` a prebuilt list of token
  dicts (built in the measured process, after the imports);
- ``generator``: ``fit(features(s) for s in train), (tags(s) for s in train))``,
  each sentence featurized as the fit reads it, its dicts dropped after.

Memory is ``peak RSS - RSS after imports`` of the process (the peak reset
to the current RSS right after the imports, as benchmarks/_worker.py does;
both read the same tagged sentences from a JSON split first). The target of
issue #15: generator <= 1/3 of list, with the same model (the SHA-256 of the
weights and the final loss must agree).

    PYTHONPATH=. python benchmarks/streaming.py               # 100 iterations, 2 repeats
    PYTHONPATH=. python benchmarks/streaming.py --n-jobs 2 \
        --output benchmarks/results/streaming-n_jobs2.json
    PYTHONPATH=. python benchmarks/streaming.py --task seed \
        --output benchmarks/results/streaming-seed.json
    PYTHONPATH=. python benchmarks/streaming.py --quick       # smoke test

Writes benchmarks/results/streaming.json (--quick: the temp folder) and prints
a table. This process imports nothing heavy (a child's ru_maxrss starts at its
parent's peak).
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
TARGET = 1 / 3  # generator peak / list peak, at most
MODES = ("list", "generator")


# -- the measuring process ------------------------------------------------------


def run_job(job):
    sys.path.insert(0, str(HERE))
    import hashlib
    import warnings

    import numpy as np
    from _tasks import TOKEN_FEATURES
    from _worker import reset_peak, rss_mb, ru_maxrss_mb
    from sklearn.exceptions import ConvergenceWarning

    import skcrf
    from skcrf import CRFTagger

    warnings.simplefilter("ignore", ConvergenceWarning)
    token_features = TOKEN_FEATURES[job["task"]]
    import gc

    gc.collect()
    peak_reset = reset_peak()
    after_imports = rss_mb()
    start = time.perf_counter()
    with open(job["split"]) as f:
        train = json.load(f)["train"]
    if job["quick"]:
        train = train[:300]

    def features(sentence):
        words = [w for w, _ in sentence]
        return [token_features(words, i) for i in range(len(words))]

    def tags(sentence):
        return [t for _, t in sentence]

    tagger = CRFTagger(max_iterations=job["iterations"], n_jobs=job["n_jobs"], **PARAMS)
    if job["mode"] == "list":
        X = [features(s) for s in train]
        y = [tags(s) for s in train]
        data_ready = rss_mb()
        tagger.fit(X, y)
    else:
        data_ready = rss_mb()
        tagger.fit((features(s) for s in train), (tags(s) for s in train))
    fit_s = time.perf_counter() - start
    peak = ru_maxrss_mb()
    weights = np.ascontiguousarray(tagger._model.weights)
    return {
        "mode": job["mode"],
        "peak_minus_after_imports_mb": peak - after_imports,
        "rss_after_imports_mb": after_imports,
        "rss_data_ready_mb": data_ready,
        "peak_mb": peak,
        "peak_reset": peak_reset,
        "load_and_fit_s": fit_s,
        "iterations": tagger.n_iter_,
        "final_loss": tagger.training_log_.iterations[-1]["loss"],
        "n_features": int(tagger.n_features_),
        "n_attributes": len(tagger.attributes_),
        "weights_sha256": hashlib.sha256(weights.tobytes()).hexdigest(),
        "train_sentences": len(train),
        "skcrf_path": str(Path(skcrf.__file__).parent),
    }


# -- the driver -------------------------------------------------------------------


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


def prepare_split(path):
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    )
    subprocess.run(
        [
            sys.executable,
            str(HERE / "_worker.py"),
            json.dumps({"kind": "prepare", "split": str(path)}),
        ],
        check=True,
        capture_output=True,
        env=env,
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="300 sentences, 5 iterations")
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--task", choices=("window", "seed"), default="window")
    parser.add_argument("--n-jobs", type=int, default=1)
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    if args.job:
        print(json.dumps(run_job(json.loads(args.job))))
        return 0
    iterations = 5 if args.quick else args.iterations
    output = args.output or (
        Path(tempfile.gettempdir()) / "streaming.json"
        if args.quick
        else HERE / "results" / "streaming.json"
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        split = Path(tmp) / "split.json"
        prepare_split(split)
        runs = {mode: [] for mode in MODES}
        for rep in range(args.repeats):
            for mode in MODES:
                print(
                    f"[{time.perf_counter() - started:6.1f} s] {mode} ({rep + 1}/{args.repeats})",
                    file=sys.stderr,
                    flush=True,
                )
                runs[mode].append(
                    child(
                        {
                            "task": args.task,
                            "n_jobs": args.n_jobs,
                            "mode": mode,
                            "split": str(split),
                            "quick": args.quick,
                            "iterations": iterations,
                        }
                    )
                )
    peak = {m: statistics.median(r["peak_minus_after_imports_mb"] for r in runs[m]) for m in MODES}
    fit_s = {m: statistics.median(r["load_and_fit_s"] for r in runs[m]) for m in MODES}
    ratio = peak["generator"] / peak["list"]
    same_model = (
        len({r["weights_sha256"] for m in MODES for r in runs[m]}) == 1
        and len({r["final_loss"] for m in MODES for r in runs[m]}) == 1
    )
    rows = [
        (
            "peak RSS - RSS after imports (MB)",
            f"{peak['list']:.1f}",
            f"{peak['generator']:.1f}",
            f"{ratio:.3f}",
            f"<= {TARGET:.3f}",
            "yes" if ratio <= TARGET else "NO",
        ),
        (
            "load + featurize + fit (s)",
            f"{fit_s['list']:.1f}",
            f"{fit_s['generator']:.1f}",
            f"{fit_s['generator'] / fit_s['list']:.3f}",
            "",
            "",
        ),
        (
            "same model (weights SHA-256, final loss)",
            "",
            "",
            "",
            "identical",
            "yes" if same_model else "NO",
        ),
    ]
    header = ("row", "list of dicts", "generator", "generator / list", "target", "met")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    table = "\n".join(lines)
    print(
        f"{args.task.capitalize()} Treebank task, {iterations} iterations, params {PARAMS}, "
        f"n_jobs={args.n_jobs}, "
        f"median of {args.repeats}:\n"
    )
    print(table)
    result = {
        "task": args.task,
        "n_jobs": args.n_jobs,
        "iterations": iterations,
        "params": PARAMS,
        "repeats": args.repeats,
        "quick": args.quick,
        "target_ratio": TARGET,
        "ratio": ratio,
        "met": ratio <= TARGET,
        "same_model": same_model,
        "median_peak_mb": peak,
        "median_fit_s": fit_s,
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
