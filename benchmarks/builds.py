"""skcrf against skcrf: two source trees (e.g. before and after a refactoring), side by side.

Each tree must hold a built ``skcrf`` (``python setup.py build_ext --inplace``
there). Every measurement is ``_worker.py``'s ``run`` job (fit, predict,
predict_single) in a fresh process with ``PYTHONPATH`` set to the tree, the
trees alternating within each repetition, on both Treebank tasks with
n_jobs=1 and 2. The table gives medians and the median of the
per-repetition ratios (second tree ÷ first tree: above 1 is slower for
times, larger for memory).

    PYTHONPATH=. python benchmarks/builds.py /tmp/before . --repeats 3
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = ("seed", "window")
FIT_PARAMS = {"c1": 0.1, "c2": 0.1, "max_iterations": 100, "all_possible_transitions": True}
MEASURES = {
    "fit_s": "fit (s)",
    "s_per_iteration": "time per iteration (s)",
    "predict_first_s": "predict, first call (s)",
    "predict_single_total_s": "predict_single, every test sentence (s)",
    "fit_peak_mb": "fit peak memory above the data (MB)",
}


def progress(message):
    print(f"[{datetime.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def worker(job, tree):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), str(HERE)]))
    out = subprocess.run(
        [sys.executable, str(HERE / "_worker.py"), json.dumps(job)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),  # not a folder holding another skcrf
    )
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise RuntimeError(f"benchmark job failed in {tree}: {job}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_tree(tree):
    """The skcrf a worker imports with ``tree`` on PYTHONPATH must be the tree's."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    found = subprocess.run(
        [sys.executable, "-c", "import skcrf; print(skcrf.__file__)"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
        check=True,
    ).stdout.strip()
    if not Path(found).resolve().is_relative_to(Path(tree).resolve()):
        raise SystemExit(f"{tree}: a worker imports skcrf from {found}, not from the tree")
    revision = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return revision or None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, help="two source trees: before, after")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--task", choices=(*TASKS, "both"), default="both")
    parser.add_argument("--max-iterations", type=int, default=FIT_PARAMS["max_iterations"])
    parser.add_argument("--output", default=str(HERE / "results" / "builds.json"))
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.trees]
    revisions = [check_tree(t) for t in trees]
    tasks = TASKS if args.task == "both" else (args.task,)
    params = dict(FIT_PARAMS, max_iterations=args.max_iterations)

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        split = os.path.join(tmp, "split.json")
        worker({"kind": "prepare", "split": split}, trees[0])
        for rep in range(args.repeats):
            for task in tasks:
                for n_jobs in (1, 2):
                    for k, tree in enumerate(trees):
                        progress(f"{task} n_jobs={n_jobs} tree {k} (repetition {rep + 1})")
                        job = {
                            "kind": "run",
                            "engine": "skcrf",
                            "task": task,
                            "quick": False,
                            "split": split,
                            "params": params,
                            "n_jobs": n_jobs,
                        }
                        key = f"{task}|{n_jobs}|{k}"
                        results.setdefault(key, []).append(worker(job, tree))

    lines = [
        f"Trees: {trees[0]} ({revisions[0]}) then {trees[1]} ({revisions[1]}); "
        f"{args.repeats} repetitions, alternated; medians; ratio = second ÷ first "
        "(median of the per-repetition ratios).",
        "",
        "| task | n_jobs | measure | first | second | ratio |",
        "|---|--:|---|--:|--:|--:|",
    ]
    table = []
    for task in tasks:
        for n_jobs in (1, 2):
            before, after = results[f"{task}|{n_jobs}|0"], results[f"{task}|{n_jobs}|1"]
            for measure, label in MEASURES.items():
                a = [r[measure] for r in before]
                b = [r[measure] for r in after]
                ratio = statistics.median(y / x for x, y in zip(a, b))
                row = dict(
                    task=task,
                    n_jobs=n_jobs,
                    measure=measure,
                    first=statistics.median(a),
                    second=statistics.median(b),
                    ratio=ratio,
                )
                table.append(row)
                lines.append(
                    f"| {task} | {n_jobs} | {label} | {row['first']:.3f} | "
                    f"{row['second']:.3f} | {ratio:.3f} |"
                )
            same = {r["final_loss"] for r in before} | {r["final_loss"] for r in after}
            lines.append(f"| {task} | {n_jobs} | final losses seen | {sorted(same)} | | |")
    report = "\n".join(lines)
    print(report)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(
            {
                "trees": [str(t) for t in trees],
                "revisions": revisions,
                "table": table,
                "runs": results,
                "report": report,
            },
            f,
            indent=1,
        )


if __name__ == "__main__":
    main()
