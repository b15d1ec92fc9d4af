"""skcrf against sklearn-crfsuite on both Treebank tasks, side by side.

Every measurement runs in a fresh Python process per engine (``_worker.py``),
the engines alternating (CRFsuite, skcrf n_jobs=1, skcrf n_jobs=2, CRFsuite,
...) for ``--repeats`` repetitions; the tables show medians and the median of
the per-repetition ratios. Writes a Markdown report (also printed) and a JSON
file with every repetition and the machine. See benchmarks/README.md.

    PYTHONPATH=. python benchmarks/treebank.py                  # both tasks, ~12 min
    PYTHONPATH=. python benchmarks/treebank.py --quick          # the CI guard, ~3 min

This process imports nothing heavy on purpose: a child's ``ru_maxrss`` starts
at its parent's peak. Progress goes to stderr.
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
TASKS = ("seed", "window")  # "both" (README's table); as in _tasks.py (not imported here)
#: Also measurable alone (``--task universal``): the window features with 12 labels;
#: ``rich`` (461k attributes, 12 labels) and ``names`` (the same, 3 labels): see _tasks.py.
OTHER_TASKS = ("universal", "rich", "names")

FIT_PARAMS = {"c1": 0.1, "c2": 0.1, "max_iterations": 100, "all_possible_transitions": True}
CONVERGENCE_PARAMS = {
    "c1": 0.0,
    "c2": 1.0,
    "max_iterations": None,
    "all_possible_transitions": True,
}
SCALING_TASK = "window"
SCALING_FACTORS = (1, 2, 4, 8)
SCALING_ITERATIONS = 10
SCALING_GROWTH = 1.3  # skcrf's time per iteration per token: at most ×1.3 that of data ×1

# The engines of every measurement, in the order they alternate: name -> (engine, n_jobs).
CONFIGS = {"crfsuite": ("crfsuite", 1), "skcrf_n1": ("skcrf", 1), "skcrf_n2": ("skcrf", 2)}
SKCRF_CONFIGS = ("skcrf_n1", "skcrf_n2")

# Targets per task: the least speed ratio (crfsuite time ÷ skcrf time).
FIT_TARGETS = {
    "seed": {"skcrf_n1": 3.5, "skcrf_n2": 5.5},
    "window": {"skcrf_n1": 2.5, "skcrf_n2": 4.5},
    "universal": {"skcrf_n1": 2.5, "skcrf_n2": 2.5},  # issue 21: >= 2.5x on every task
    "rich": {"skcrf_n1": 2.5, "skcrf_n2": 2.5},
    "names": {"skcrf_n1": 2.5, "skcrf_n2": 2.5},
}
PREDICT_FIRST_TARGET = 2.0
PREDICT_SINGLE_TARGET = 1.0
MEMORY_TARGET = 0.8  # skcrf ÷ crfsuite, at most (issue 21)
MODEL_SIZE_TARGET = 1.0  # skcrf ÷ crfsuite, at most
ACCURACY_TOLERANCE = 0.1  # percentage points, either way

# Warn when other processes used more than this many cores on average during the run.
OTHER_LOAD_WARNING = 0.1

# --quick, the regression guard that ends .ci/run: both tasks on all the
# data, 30 iterations, one repetition, no scaling table.
QUICK_FIT_ITERATIONS = 30

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
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu_s():
    """CPU seconds used by this process and its finished children."""
    import resource

    return sum(
        resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
    )


def other_load(busy_start, own_start, wall_s):
    """Mean number of cores that other processes kept busy during the benchmark."""
    busy_end = machine_busy_s()
    if busy_start is None or busy_end is None:
        return None
    return max(0.0, (busy_end - busy_start) - (own_cpu_s() - own_start)) / wall_s


def worker(job):
    """Run one job of ``_worker.py`` in a fresh process; its JSON result."""
    out = subprocess.run(
        [sys.executable, str(HERE / "_worker.py"), json.dumps(job)], capture_output=True, text=True
    )
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise RuntimeError(f"benchmark job failed: {job}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def alternate(repeats, label, job):
    """``job`` (a dict) for every config in turn, ``repeats`` times: name -> [results]."""
    results = {name: [] for name in CONFIGS}
    for rep in range(repeats):
        for name, (engine, n_jobs) in CONFIGS.items():
            progress(f"{label}: {name} (repetition {rep + 1}/{repeats})")
            results[name].append(worker(dict(job, engine=engine, n_jobs=n_jobs)))
    return results


# -- rows ---------------------------------------------------------------------


def median(values):
    return None if not values or any(v is None for v in values) else statistics.median(values)


def row(
    label,
    unit,
    crfsuite,
    skcrf,
    ratio=None,
    ratio_pairs=None,
    target=None,
    met=None,
    fmt="{:.3f}",
    ratio_fmt="{:.2f}×",
):
    return {
        "label": label,
        "unit": unit,
        "crfsuite": crfsuite,
        "skcrf": skcrf,
        "ratio": ratio,
        "ratio_pairs": ratio_pairs,
        "target": target,
        "met": met,
        "format": fmt,
        "ratio_format": ratio_fmt,
    }


def compare(label, unit, runs, name, value, kind, target=None, fmt="{:.3f}"):
    """A row comparing ``value(run)`` of CRFsuite and of skcrf config ``name``, pair by pair.

    ``kind``: 'time' (ratio crfsuite ÷ skcrf, target = least ratio), 'rate'
    (skcrf ÷ crfsuite, least ratio), 'size' (skcrf ÷ crfsuite, greatest
    ratio), 'points' (skcrf − crfsuite, target = tolerance either way) or
    None (no ratio).
    """
    a = [value(r) for r in runs["crfsuite"]]
    b = [value(r) for r in runs[name]]
    pairs = None
    if kind == "time":
        pairs = [x / y for x, y in zip(a, b)]
    elif kind in ("rate", "size"):
        pairs = [y / x for x, y in zip(a, b)]
    elif kind == "points":
        pairs = [y - x for x, y in zip(a, b)]
    ratio = median(pairs) if pairs else None
    met, target_text = None, None
    if target is not None:
        if kind == "size":
            met, target_text = ratio <= target, f"≤ {target:g}×"
        elif kind == "points":
            met, target_text = abs(ratio) <= target, f"±{target:g} pt"
        else:
            met, target_text = ratio >= target, f"≥ {target:g}×"
    return row(
        label,
        unit,
        median(a),
        median(b),
        ratio,
        pairs,
        target_text,
        met,
        fmt,
        "{:+.2f} pt" if kind == "points" else "{:.2f}×",
    )


def task_rows(task, runs):
    """The rows of one task's table from its ``run`` results (name -> repetitions)."""
    rows = []
    jobs = {name: f"skcrf n_jobs={CONFIGS[name][1]}" for name in SKCRF_CONFIGS}
    iterations = runs["crfsuite"][0]["job"]["params"]["max_iterations"]
    for name in SKCRF_CONFIGS:
        rows.append(
            compare(
                f"fit, {iterations} iterations ({jobs[name]})",
                "s",
                runs,
                name,
                lambda r: r["fit_s"],
                "time",
                FIT_TARGETS[task][name],
            )
        )
    for name in SKCRF_CONFIGS:
        rows.append(
            compare(
                f"time per iteration, logged ({jobs[name]})",
                "s",
                runs,
                name,
                lambda r: r["s_per_iteration"],
                "time",
            )
        )
    for name in SKCRF_CONFIGS:
        rows.append(
            compare(
                f"predict, whole test set, first call after fit ({jobs[name]})",
                "s",
                runs,
                name,
                lambda r: r["predict_first_s"],
                "time",
                PREDICT_FIRST_TARGET,
            )
        )
    for name in SKCRF_CONFIGS:
        rows.append(
            compare(
                f"predict, whole test set, median of later calls ({jobs[name]})",
                "s",
                runs,
                name,
                lambda r: median(r["predict_later_s"]),
                "time",
            )
        )
    for name in SKCRF_CONFIGS:
        rows.append(
            compare(
                f"predict_single, each test sentence alone ({jobs[name]})",
                "tokens/s",
                runs,
                name,
                lambda r: r["test_tokens"] / r["predict_single_total_s"],
                "rate",
                PREDICT_SINGLE_TARGET,
                fmt="{:,.0f}",
            )
        )
    for name in SKCRF_CONFIGS:
        rows.append(
            compare(
                f"fit peak memory above the loaded data ({jobs[name]})",
                "MB",
                runs,
                name,
                lambda r: r["fit_peak_mb"],
                "size",
                MEMORY_TARGET,
                fmt="{:.1f}",
            )
        )
    rows.append(
        compare(
            f"saved model file ({jobs['skcrf_n1']})",
            "kB",
            runs,
            "skcrf_n1",
            lambda r: r["model_bytes"] / 1e3,
            "size",
            MODEL_SIZE_TARGET,
            fmt="{:,.0f}",
        )
    )
    for name in SKCRF_CONFIGS:
        rows.append(
            compare(
                f"test token accuracy ({jobs[name]})",
                "%",
                runs,
                name,
                lambda r: 100 * r["accuracy"],
                "points",
                ACCURACY_TOLERANCE,
                fmt="{:.2f}",
            )
        )
    rows.append(
        compare(
            f"final loss after {iterations} iterations ({jobs['skcrf_n1']})",
            "",
            runs,
            "skcrf_n1",
            lambda r: r["final_loss"],
            None,
            fmt="{:.4f}",
        )
    )
    return rows


def time_to_loss(curve, setup_s, target):
    """Setup time + logged iteration times up to the first loss at or below ``target``.

    CRFsuite logs its loss to 6 decimals, so losses are compared at that precision.
    """
    elapsed = setup_s
    for loss, seconds in curve:
        elapsed += seconds
        if round(loss, 6) <= target:
            return elapsed
    return None


def convergence_rows(runs):
    """Time for skcrf to reach the final loss of the CRFsuite run it is paired with."""
    rows = []
    for name in SKCRF_CONFIGS:
        for ref, run in zip(runs["crfsuite"], runs[name]):
            run["time_to_target_s"] = time_to_loss(run["curve"], run["setup_s"], ref["final_loss"])
        a = [r["fit_s"] for r in runs["crfsuite"]]
        b = [r["time_to_target_s"] for r in runs[name]]
        pairs = [None if y is None else x / y for x, y in zip(a, b)]
        rows.append(
            row(
                f"time to CRFsuite's converged loss, c1=0, c2=1 "
                f"(skcrf n_jobs={CONFIGS[name][1]}; — = not reached)",
                "s",
                median(a),
                median(b),
                median(pairs),
                pairs,
            )
        )
    return rows


def growth(runs, name):
    """Largest time per iteration per token of config ``name`` over the data
    sizes ÷ its time at the first size (×1); a time that falls gives < 1."""
    values = [
        median([r["us_per_iteration_per_token"] for r in by_config[name]])
        for by_config in runs.values()
    ]
    return max(values) / values[0]


def scaling_rows(scaling):
    rows = []
    for name in SKCRF_CONFIGS:
        for factor, runs in scaling.items():
            tokens = runs["crfsuite"][0]["tokens"]
            rows.append(
                compare(
                    f"data ×{factor} ({tokens:,} tokens), skcrf n_jobs={CONFIGS[name][1]}",
                    "µs/token",
                    runs,
                    name,
                    lambda r: r["us_per_iteration_per_token"],
                    "time",
                )
            )
    crfsuite_growth = growth(scaling, "crfsuite")
    for name in SKCRF_CONFIGS:
        skcrf_growth = growth(scaling, name)
        rows.append(
            row(
                f"largest size ÷ ×1, skcrf n_jobs={CONFIGS[name][1]}",
                "",
                crfsuite_growth,
                skcrf_growth,
                target=f"skcrf: ≤ ×{SCALING_GROWTH:g}",
                met=skcrf_growth <= SCALING_GROWTH,
                fmt="{:.2f}",
            )
        )
    return rows


# -- report -------------------------------------------------------------------


def table(rows):
    lines = [
        "| measure | unit | sklearn-crfsuite | skcrf | ratio | target | met |",
        "|---|---|--:|--:|--:|---|---|",
    ]

    def cell(value, fmt):
        return "—" if value is None else fmt.format(value)

    for r in rows:
        met = "—" if r["met"] is None else ("met" if r["met"] else "**not met**")
        lines.append(
            f"| {r['label']} | {r['unit']} | {cell(r['crfsuite'], r['format'])} | "
            f"{cell(r['skcrf'], r['format'])} | {cell(r['ratio'], r['ratio_format'])} | "
            f"{r['target'] or '—'} | {met} |"
        )
    return lines


def params_text(params):
    return ", ".join(f"{key}={value}" for key, value in params.items())


def markdown(results):
    mach, settings = results["machine"], results["settings"]
    lines = [
        "# skcrf vs sklearn-crfsuite on the Treebank POS tasks",
        "",
        f"{results['created']} · {mach['cpu_model']}, {mach['logical_cores']} logical cores · "
        f"each engine in its own fresh process · medians of {results['repeats']} alternated "
        "repetition(s)"
        + (
            f" · **QUICK MODE: {QUICK_FIT_ITERATIONS} iterations, one repetition, no scaling: a "
            "regression guard, as noisy as one run is**"
            if results["quick"]
            else ""
        ),
        "",
        "Versions: "
        + ", ".join(f"{k} {v}" for k, v in mach["versions"].items())
        + (
            f" (git {mach['skcrf_git']['commit'][:10]}"
            + (", with local changes" if mach["skcrf_git"]["dirty"] else "")
            + ")"
            if mach.get("skcrf_git")
            else ""
        )
        + ". "
        "Thread pools: "
        + "; ".join(
            f"{lib.get('internal_api')} {lib.get('version')} ({lib.get('num_threads')} threads)"
            for lib in mach["threadpools"]
        )
        + ".",
        "",
        f"Fit settings (both engines): {params_text(settings['fit'])}. "
        "sklearn-crfsuite (CRFsuite's C code) runs on one thread always.",
    ]
    other = mach["other_processes_cores"]
    if other is not None and other > OTHER_LOAD_WARNING:
        lines += [
            "",
            f"**Warning: other processes kept {other:.2f} cores busy on average during "
            "the run: the timings are not reliable.**",
        ]
    if not all(
        r["peak_reset"]
        for runs in results["measurements"]["run"].values()
        for by_config in runs.values()
        for r in by_config
    ):
        lines += [
            "",
            "Note: the peak memory could not be reset before some fits (no "
            "/proc/self/clear_refs): those memory figures are upper bounds.",
        ]
    for task in results["tasks"]:
        data = results["data"][task]
        lines += [
            "",
            f"## {task} features",
            "",
            f"{data['train_sentences']:,} training sentences ({data['train_tokens']:,} tokens), "
            f"{data['test_sentences']:,} test sentences ({data['test_tokens']:,} tokens), "
            f"{data['labels']} labels.",
            "",
            *table(results["rows"][task]),
        ]
    if "scaling" in results["rows"]:
        lines += [
            "",
            f"## Scaling: {SCALING_TASK} features, training data replicated",
            "",
            f"Time per iteration per token (Σ logged iteration times ÷ iterations ÷ tokens), "
            f"{params_text(settings['scaling'])}, medians of {settings['scaling_repeats']} "
            "repetition(s).",
            "",
            *table(results["rows"]["scaling"]),
        ]
    if "convergence" in results["rows"]:
        lines += [
            "",
            f"## Time to CRFsuite's converged objective ({params_text(settings['convergence'])})",
            "",
        ]
        for task in results["tasks"]:
            lines += [f"{task} features:", "", *table(results["rows"]["convergence"][task]), ""]
    lines += [
        "",
        "Ratios are medians of per-repetition ratios. Times: sklearn-crfsuite ÷ skcrf; "
        "throughputs: skcrf ÷ sklearn-crfsuite (above 1: skcrf is faster, in both). "
        "Memory and model size: skcrf ÷ sklearn-crfsuite (below 1: skcrf is smaller). "
        "Accuracy: skcrf − sklearn-crfsuite in points. See benchmarks/README.md.",
        "",
        f"Total benchmark time: {results['runtime_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


# -- main ---------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=(*TASKS, *OTHER_TASKS, "both"), default="both")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument(
        "--scaling-repeats",
        type=int,
        default=1,
        help="repetitions of the scaling fits (default 1)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"the CI guard: {QUICK_FIT_ITERATIONS} iterations, 1 repetition, no scaling",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="also the time to CRFsuite's converged objective (c1=0, c2=1)",
    )
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument(
        "--json",
        help="default: benchmarks/results/treebank.json "
        "(with --quick: treebank-quick.json in the temp folder)",
    )
    parser.add_argument(
        "--markdown",
        help="default: benchmarks/results/treebank.md "
        "(with --quick: treebank-quick.md in the temp folder)",
    )
    args = parser.parse_args(argv)
    out = Path(tempfile.gettempdir()) if args.quick else HERE / "results"
    stem = "treebank-quick" if args.quick else "treebank"
    args.json = args.json or str(out / f"{stem}.json")
    args.markdown = args.markdown or str(out / f"{stem}.md")
    if args.quick:
        args.repeats = args.scaling_repeats = 1
        args.skip_scaling = True
    return args


def main(argv=None):
    args = parse_args(argv)
    tasks = TASKS if args.task == "both" else (args.task,)
    fit_params = dict(FIT_PARAMS)
    scaling_params = dict(FIT_PARAMS, max_iterations=SCALING_ITERATIONS)
    conv_params = dict(CONVERGENCE_PARAMS)
    if args.quick:
        fit_params["max_iterations"] = QUICK_FIT_ITERATIONS
        conv_params["max_iterations"] = 10 * QUICK_FIT_ITERATIONS
    factors = SCALING_FACTORS
    busy_start, own_start = machine_busy_s(), own_cpu_s()

    with tempfile.TemporaryDirectory() as tmp:
        split = str(Path(tmp) / "treebank-split.json")
        progress("loading the treebank (once, into a split file)")
        worker({"kind": "prepare", "split": split})
        base = {"quick": False, "split": split}  # (all the data, --quick too)
        machine = worker({"kind": "info"})

        m = {"run": {}, "convergence": {}}
        for task in tasks:
            m["run"][task] = alternate(
                args.repeats,
                f"{task}: fit, predict, save",
                dict(base, kind="run", task=task, params=fit_params),
            )
        if args.full:
            for task in tasks:
                m["convergence"][task] = alternate(
                    args.repeats,
                    f"{task}: convergence",
                    dict(base, kind="converge", task=task, params=conv_params),
                )
        if not args.skip_scaling:
            m["scaling"] = {
                factor: alternate(
                    args.scaling_repeats,
                    f"scaling ×{factor}",
                    dict(
                        base,
                        kind="scaling",
                        task=SCALING_TASK,
                        factor=factor,
                        params=scaling_params,
                    ),
                )
                for factor in factors
            }

    rows = {task: task_rows(task, m["run"][task]) for task in tasks}
    if args.full:
        rows["convergence"] = {task: convergence_rows(m["convergence"][task]) for task in tasks}
    if "scaling" in m:
        rows["scaling"] = scaling_rows(m["scaling"])
    data_keys = ("train_sentences", "train_tokens", "test_sentences", "test_tokens", "labels")
    results = {
        "benchmark": "treebank",
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "quick": args.quick,
        "repeats": args.repeats,
        "tasks": list(tasks),
        "data": {task: {k: m["run"][task]["crfsuite"][0][k] for k in data_keys} for task in tasks},
        "settings": {
            "fit": fit_params,
            "convergence": conv_params,
            "scaling": scaling_params,
            "scaling_task": SCALING_TASK,
            "scaling_factors": list(factors),
            "scaling_repeats": args.scaling_repeats,
            "configs": {name: {"engine": e, "n_jobs": n} for name, (e, n) in CONFIGS.items()},
        },
        "rows": rows,
        "measurements": m,
        "machine": dict(
            machine,
            other_processes_cores=other_load(busy_start, own_start, time.perf_counter() - START),
        ),
        "runtime_s": time.perf_counter() - START,
    }
    text = markdown(results)
    for path, content in (
        (args.json, json.dumps(results, indent=2) + "\n"),
        (args.markdown, text),
    ):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    progress(f"wrote {args.json} and {args.markdown}")
    print(text)


if __name__ == "__main__":
    main()
