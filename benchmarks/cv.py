"""CRFTaggerCV against GridSearchCV on the seed Treebank task, side by side.

Three searches: GridSearchCV, CRFTaggerCV with its defaults (every fit to
convergence) and CRFTaggerCV with ``plateau=10`` (its warm-started fits also
stop once their held-out accuracy has stopped moving: see the user guide's
model-selection page). All choose (c1, c2) over the same 4 × 4 grid with the same 3 folds
(``KFold(3)``), the same estimator settings, the same scoring (token accuracy)
and the same ``n_jobs``, each followed by its refit on all the training data.
Each search runs in a fresh Python process (this script with ``--worker``),
one after the other; the table shows medians over ``--repeats``.
Writes benchmarks/results/cv.json (with --quick: cv-quick.json in the temp
folder): ``rows`` compares the default CRFTaggerCV with GridSearchCV,
``rows_plateau`` the plateau one.

    PYTHONPATH=. python benchmarks/cv.py             # about 20 minutes on two cores
    PYTHONPATH=. python benchmarks/cv.py --quick     # smoke test (figures mean nothing)
    PYTHONPATH=. python benchmarks/cv.py --skip-default  # GridSearchCV and plateau=10
                                                         # only: cv-plateau.json

Warm starts pay off when fits run to convergence, so the fits run until
CRFsuite's stopping rules stop them (``max_iterations=None``: ``delta`` over
``period`` iterations, ``epsilon``). Besides wall time, the total number of
L-BFGS iterations of each search (GridSearchCV's are read through a second
scorer that returns ``n_iter_``) and its CPU time (the worker process and its
joblib worker processes, which are shut down and reaped before it is read)
are reported: on a machine shared with other work they depend far less on the
load than wall time does.
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

C1 = [0.0, 0.01, 0.1, 1.0]
C2 = [0.001, 0.01, 0.1, 1.0]
N_FOLDS = 3
ESTIMATOR = {"all_possible_transitions": True, "max_iterations": None, "n_jobs": 1}
N_JOBS = 2  # both searches
SPEED_TARGET = 3.0  # GridSearchCV time ÷ CRFTaggerCV time, at least
SCORE_TOLERANCE = 0.1  # points of mean CV accuracy

QUICK = {"sentences": 300, "max_iterations": 15}
PLATEAU = {"plateau": 10, "plateau_tol": 2e-4}  # CRFTaggerCV's opt-in held-out plateau stop
PLATEAU_SEARCH = "CRFTaggerCV(plateau=10)"
SEARCHES = {"CRFTaggerCV": {}, PLATEAU_SEARCH: PLATEAU, "GridSearchCV": None}

START = time.perf_counter()


def progress(message):
    print(f"[{time.perf_counter() - START:7.1f} s] {message}", file=sys.stderr, flush=True)


def machine_busy_s():
    """CPU seconds all processes of the machine have used (/proc/stat); None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


# -- worker: one search in this process -----------------------------------------


def cpu_s():
    """CPU seconds of this process and of its children that have been reaped."""
    import resource

    return sum(
        resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )


def n_iter_scorer(estimator, X, y):
    return float(estimator.n_iter_)


def run_search(job):
    import warnings

    import numpy as np
    from _tasks import load_task
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.model_selection import GridSearchCV, KFold

    from skcrf import CRFTagger, CRFTaggerCV
    from skcrf.metrics import get_scorer

    X, y, X_test, y_test = load_task("seed", quick=job["quick"])
    if job["quick"]:
        X, y = X[: QUICK["sentences"]], y[: QUICK["sentences"]]
    estimator = CRFTagger(**job["estimator"])
    cv = KFold(N_FOLDS)
    warnings.simplefilter("ignore", ConvergenceWarning)
    is_path = job["search"] != "GridSearchCV"
    if is_path:
        search = CRFTaggerCV(
            estimator,
            c1=job["c1"],
            c2=job["c2"],
            cv=cv,
            n_jobs=job["n_jobs"],
            **SEARCHES[job["search"]],
        )
    else:
        search = GridSearchCV(
            estimator,
            {"c1": job["c1"], "c2": job["c2"]},
            cv=cv,
            n_jobs=job["n_jobs"],
            scoring={"accuracy": get_scorer("flat_accuracy"), "n_iter": n_iter_scorer},
            refit="accuracy",
        )
    from joblib.externals.loky import get_reusable_executor

    get_reusable_executor().shutdown(wait=True)  # loading the data started none; be sure
    cpu_start, start = cpu_s(), time.perf_counter()
    search.fit(X, y)
    total_s = time.perf_counter() - start
    get_reusable_executor().shutdown(wait=True)  # reaped: their CPU time is counted
    total_cpu_s = cpu_s() - cpu_start
    results = search.cv_results_
    # Iterations of every CV fit, shape (fold, c1, c2) in the order of C1 and C2.
    if is_path:
        mean_scores = results["mean_test_score"]
        n_iter = search.n_iter_
    else:
        mean_scores = results["mean_test_accuracy"]
        n_iter = np.array([results[f"split{k}_test_n_iter"] for k in range(N_FOLDS)])
        n_iter = n_iter.reshape(N_FOLDS, len(job["c1"]), len(job["c2"]))
    iterations = int(np.sum(n_iter))
    return {
        "search": job["search"],
        "total_s": total_s,
        "total_cpu_s": total_cpu_s,
        "refit_s": search.refit_time_,
        "search_s": total_s - search.refit_time_,
        "iterations": iterations,
        "refit_iterations": int(search.best_estimator_.n_iter_),
        "n_iter": np.asarray(n_iter).astype(int).tolist(),
        "best_params": search.best_params_,
        "best_score": float(search.best_score_),
        "mean_scores": [float(v) for v in mean_scores],
        "params": [dict(p) for p in results["params"]],
        "test_accuracy": float(search.score(X_test, y_test)),
        "train_sentences": len(X),
        "train_tokens": sum(map(len, X)),
    }


# -- driver -----------------------------------------------------------------------


def worker(job):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(HERE), str(HERE.parent), env.get("PYTHONPATH")])
    )
    out = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(job)],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise RuntimeError(f"benchmark job failed: {job['search']}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def median(values):
    return statistics.median(values)


def rows(runs, variant="CRFTaggerCV"):
    """The table of ``variant`` (a CRFTaggerCV search) against GridSearchCV."""
    cv, gs = runs[variant], runs["GridSearchCV"]
    pairs = list(zip(gs, cv))

    def ratio(key):
        return median([g[key] / c[key] for g, c in pairs])

    # The mean CV score, in GridSearchCV's cv_results_, of CRFTaggerCV's choice.
    def gap(g, c):
        chosen = g["params"].index(c["best_params"])
        return 100 * (g["best_score"] - g["mean_scores"][chosen])

    gaps = [gap(g, c) for g, c in pairs]
    same = [g["best_params"] == c["best_params"] for g, c in pairs]
    speed = ratio("total_s")
    return [
        {
            "measure": "search + refit (wall)",
            "unit": "s",
            "GridSearchCV": median([g["total_s"] for g in gs]),
            "CRFTaggerCV": median([c["total_s"] for c in cv]),
            "ratio": speed,
            "target": f"≥ {SPEED_TARGET:g}×",
            "met": speed >= SPEED_TARGET,
        },
        {
            "measure": "search + refit (CPU time, all processes of the search)",
            "unit": "s",
            "GridSearchCV": median([g["total_cpu_s"] for g in gs]),
            "CRFTaggerCV": median([c["total_cpu_s"] for c in cv]),
            "ratio": ratio("total_cpu_s"),
        },
        {
            "measure": "search alone, without the refit (wall)",
            "unit": "s",
            "GridSearchCV": median([g["search_s"] for g in gs]),
            "CRFTaggerCV": median([c["search_s"] for c in cv]),
            "ratio": ratio("search_s"),
        },
        {
            "measure": "refit on all the training data (wall)",
            "unit": "s",
            "GridSearchCV": median([g["refit_s"] for g in gs]),
            "CRFTaggerCV": median([c["refit_s"] for c in cv]),
            "ratio": ratio("refit_s"),
        },
        {
            "measure": "L-BFGS iterations of the 48 CV fits",
            "unit": "",
            "GridSearchCV": median([g["iterations"] for g in gs]),
            "CRFTaggerCV": median([c["iterations"] for c in cv]),
            "ratio": ratio("iterations"),
        },
        {
            "measure": "chosen (c1, c2)",
            "unit": "",
            "GridSearchCV": str(gs[0]["best_params"]),
            "CRFTaggerCV": str(cv[0]["best_params"]),
            "ratio": None,
            "target": "same or within 0.1 pt",
            "met": all(s or abs(x) <= SCORE_TOLERANCE for s, x in zip(same, gaps)),
        },
        {
            "measure": "best mean CV accuracy − mean CV accuracy of CRFTaggerCV's choice "
            "(GridSearchCV's scores)",
            "unit": "pt",
            "GridSearchCV": None,
            "CRFTaggerCV": median(gaps),
            "ratio": None,
            "target": f"≤ {SCORE_TOLERANCE:g} pt",
            "met": all(abs(x) <= SCORE_TOLERANCE for x in gaps),
        },
        {
            "measure": "best mean CV accuracy",
            "unit": "%",
            "GridSearchCV": 100 * median([g["best_score"] for g in gs]),
            "CRFTaggerCV": 100 * median([c["best_score"] for c in cv]),
            "ratio": None,
        },
        {
            "measure": "test token accuracy of the refitted model",
            "unit": "%",
            "GridSearchCV": 100 * median([g["test_accuracy"] for g in gs]),
            "CRFTaggerCV": 100 * median([c["test_accuracy"] for c in cv]),
            "ratio": None,
        },
    ]


def table(rows, variant="CRFTaggerCV"):
    lines = [
        f"| measure | unit | GridSearchCV | {variant} | ratio (GridSearchCV ÷ {variant}) "
        "| target | met |",
        "|---|---|--:|--:|--:|---|---|",
    ]

    def cell(value):
        if value is None:
            return "—"
        if isinstance(value, str):
            return value
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.2f}"

    for r in rows:
        met = r.get("met")
        met = "—" if met is None else ("met" if met else "**not met**")
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}×"
        lines.append(
            f"| {r['measure']} | {r['unit']} | {cell(r['GridSearchCV'])} | "
            f"{cell(r['CRFTaggerCV'])} | {ratio} | {r.get('target') or '—'} | {met} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=1, help="repetitions (default 1)")
    parser.add_argument("--quick", action="store_true", help="smoke test: a slice, few iterations")
    parser.add_argument("--json", help="default: benchmarks/results/cv.json")
    parser.add_argument(
        "--skip-default",
        action="store_true",
        help="leave out CRFTaggerCV's default path (a shorter run: GridSearchCV and "
        "plateau=10 only; default JSON: cv-plateau.json, without 'rows')",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(run_search(json.loads(args.worker))))
        return
    out = Path(tempfile.gettempdir()) if args.quick else HERE / "results"
    name = "cv-plateau" if args.skip_default else "cv"
    json_path = args.json or str(out / (f"{name}-quick.json" if args.quick else f"{name}.json"))
    estimator = dict(ESTIMATOR)
    if args.quick:
        estimator["max_iterations"] = QUICK["max_iterations"]
    job = {"quick": args.quick, "estimator": estimator, "c1": C1, "c2": C2, "n_jobs": N_JOBS}
    busy_start = machine_busy_s()
    runs = {s: [] for s in SEARCHES if not (args.skip_default and s == "CRFTaggerCV")}
    for rep in range(args.repeats):
        for search in runs:
            progress(f"{search} (repetition {rep + 1}/{args.repeats})")
            runs[search].append(worker(dict(job, search=search)))
            progress(f"{search}: {runs[search][-1]['total_s']:.1f} s")
    wall = time.perf_counter() - START
    busy_end = machine_busy_s()
    result_rows = None if args.skip_default else rows(runs)
    plateau_rows = rows(runs, PLATEAU_SEARCH)
    first = runs["GridSearchCV"][0]
    import platform

    results = {
        "benchmark": "cv",
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "quick": args.quick,
        "repeats": args.repeats,
        "settings": {
            "task": "seed",
            "grid": {"c1": C1, "c2": C2},
            "cv": f"KFold({N_FOLDS})",
            "estimator": estimator,
            "n_jobs": N_JOBS,
            "scoring": "token accuracy",
        },
        "data": {
            "train_sentences": first["train_sentences"],
            "train_tokens": first["train_tokens"],
        },
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            # busy cores on average, all processes (this benchmark uses N_JOBS)
            "mean_busy_cores": None if busy_start is None else (busy_end - busy_start) / wall,
        },
        **({} if result_rows is None else {"rows": result_rows}),
        "plateau": PLATEAU,
        "rows_plateau": plateau_rows,
        "runs": runs,
        "runtime_s": wall,
    }
    Path(json_path).parent.mkdir(parents=True, exist_ok=True)
    Path(json_path).write_text(json.dumps(results, indent=2) + "\n")
    print(
        f"# CRFTaggerCV vs GridSearchCV, seed Treebank task"
        f"{' (QUICK: figures mean nothing)' if args.quick else ''}\n"
    )
    print(
        f"{first['train_sentences']:,} training sentences ({first['train_tokens']:,} tokens); "
        f"grid c1={C1} × c2={C2}; KFold({N_FOLDS}); n_jobs={N_JOBS} for all; "
        f"estimator CRFTagger({', '.join(f'{k}={v}' for k, v in estimator.items())}); "
        f"medians of {args.repeats} repetition(s); mean busy cores during the run "
        f"(all processes): {results['machine']['mean_busy_cores'] or float('nan'):.2f} of "
        f"{os.cpu_count()}.\n"
    )
    if result_rows is not None:
        print(table(result_rows))
    print(f"\nCRFTaggerCV({', '.join(f'{k}={v:g}' for k, v in PLATEAU.items())}):\n")
    print(table(plateau_rows, PLATEAU_SEARCH))
    progress(f"wrote {json_path}")


if __name__ == "__main__":
    main()
