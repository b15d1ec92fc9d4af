"""Threads where features are many: every attribute x label pair a feature (issue 44, item 4).

The Treebank tasks (benchmarks/_tasks.py) with ``all_possible_states=True``,
``c1=0``, ``c2=0.1``, ``all_possible_transitions=True`` and a fixed number of
L-BFGS iterations (``--iterations``, default 100): 1.83M features on the seed
task, 11.4M on the window task. Each fit runs in a fresh process
(benchmarks/_worker.py's ``run`` job: the fit, then prediction), in turn:
skcrf with ``n_jobs=1``, skcrf with ``n_jobs=2`` and, with ``--crfsuite``,
CRFsuite (sklearn-crfsuite, one thread) for its peak memory.

Figures: the fit's wall time (median over ``--repeats``), the 2-thread
speed-up (median of the per-repetition ratios; target >= 1.7), the fit's
peak memory above the loaded data (``fit_peak_mb``, see _worker.py) and its
ratio to CRFsuite's (target <= 0.8), and the relative difference of the
final losses of the two thread counts, and whether the two fits' weights
are the same bytes (target: the same bits; one thread evaluates the two
shards of two threads in turn).

    NLTK_DATA=... PYTHONPATH=. python benchmarks/vector_threads.py --tasks seed --crfsuite
    PYTHONPATH=. python benchmarks/vector_threads.py --tasks seed window --iterations 30

Writes benchmarks/results/vector_threads.json (or ``--json``).
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from treebank import machine_busy_s, other_load, own_cpu_s  # noqa: E402  (stdlib only)

PARAMS = {"all_possible_states": True, "all_possible_transitions": True, "c1": 0.0, "c2": 0.1}
SPEEDUP_TARGET = 1.7
MEMORY_TARGET = 0.8


def worker(job):
    out = subprocess.run(
        [sys.executable, str(HERE / "_worker.py"), json.dumps(job)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def progress(message):
    print(message, file=sys.stderr, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["seed"], choices=("seed", "window"))
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--crfsuite", action="store_true", help="also CRFsuite's peak memory")
    parser.add_argument("--json", default=str(HERE / "results" / "vector_threads.json"))
    args = parser.parse_args(argv)
    busy_start, own_start = machine_busy_s(), own_cpu_s()
    import time

    wall_start = time.perf_counter()
    params = dict(PARAMS, max_iterations=args.iterations)
    results = {"params": params, "tasks": {}}
    with tempfile.TemporaryDirectory() as tmp:
        split = str(Path(tmp) / "split.json")
        worker({"kind": "prepare", "split": split})
        for task in args.tasks:
            base = {"kind": "run", "task": task, "quick": False, "split": split, "params": params}
            runs = {"1": [], "2": [], "crfsuite": []}
            for rep in range(args.repeats):
                for n_jobs in (1, 2):
                    progress(f"{task}: skcrf n_jobs={n_jobs} ({rep + 1}/{args.repeats})")
                    runs[str(n_jobs)].append(worker(dict(base, engine="skcrf", n_jobs=n_jobs)))
                if args.crfsuite and rep == 0:
                    progress(f"{task}: CRFsuite")
                    runs["crfsuite"].append(worker(dict(base, engine="crfsuite")))
            one, two = runs["1"], runs["2"]
            row = {
                "fit_s_1": statistics.median(r["fit_s"] for r in one),
                "fit_s_2": statistics.median(r["fit_s"] for r in two),
                "speedup_pairs": [a["fit_s"] / b["fit_s"] for a, b in zip(one, two)],
                "peak_mb_1": statistics.median(r["fit_peak_mb"] for r in one),
                "peak_mb_2": statistics.median(r["fit_peak_mb"] for r in two),
                "final_loss_relative_difference": abs(one[0]["final_loss"] - two[0]["final_loss"])
                / abs(one[0]["final_loss"]),
                "same_bits": len({r["weights_sha1"] for r in one + two}) == 1,
                "runs": runs,
            }
            row["speedup"] = statistics.median(row["speedup_pairs"])
            if runs["crfsuite"]:
                crfsuite = runs["crfsuite"][0]["fit_peak_mb"]
                row["crfsuite_peak_mb"] = crfsuite
                row["peak_ratio_1"] = row["peak_mb_1"] / crfsuite
                row["peak_ratio_2"] = row["peak_mb_2"] / crfsuite
            results["tasks"][task] = row
    wall = time.perf_counter() - wall_start
    results["other_load_cores"] = other_load(busy_start, own_start, wall)
    lines = [
        f"Every attribute x label pair a feature, {args.iterations} L-BFGS iterations "
        f"(medians of {args.repeats}); other processes kept "
        f"{results['other_load_cores'] or 0:.2f} cores busy.",
        "",
        "| task | features | 1 thread (s) | 2 threads (s) | 2 ÷ 1 | target | fit peak 1 / 2 "
        "threads (MB) | CRFsuite (MB) | ÷ CRFsuite | final loss, 2 vs 1 thread | same bits |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task, row in results["tasks"].items():
        features = row["runs"]["1"][0].get("n_features", "—")
        crfsuite = row.get("crfsuite_peak_mb")
        lines.append(
            f"| {task} | {features} | {row['fit_s_1']:.1f} | {row['fit_s_2']:.1f} | "
            f"{row['speedup']:.2f}× | ≥ {SPEEDUP_TARGET}× "
            f"({'met' if row['speedup'] >= SPEEDUP_TARGET else 'not met'}) | "
            f"{row['peak_mb_1']:.0f} / {row['peak_mb_2']:.0f} | "
            + (f"{crfsuite:.0f} | {row['peak_ratio_2']:.2f}× |" if crfsuite else "— | — |")
            + f" {row['final_loss_relative_difference']:.1e} |"
            + f" {'yes' if row['same_bits'] else 'no'} |"
        )
    print("\n".join(lines))
    Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
