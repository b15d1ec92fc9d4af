"""Import times (issue 39): ``import skcrf.pycrfsuite`` and ``import skcrf``, fresh processes.

    PYTHONPATH=. python benchmarks/import_time.py
    PYTHONPATH=. python benchmarks/import_time.py --repeats 11 --json /tmp/import_time.json

The skcrf measured is whichever ``import skcrf`` finds: the measuring
processes inherit this one's environment (PYTHONPATH included); the JSON
records its path and git commit. One change: they run without
``PYTHONDONTWRITEBYTECODE``, so that the untimed round leaves the bytecode
of a source tree in its ``__pycache__`` folders, as ``pip install`` leaves
it for an installed package (numpy's and scikit-learn's are there): else
every import would compile skcrf's sources anew (~60 ms here) and none of
the others'.

Modules: ``numpy``, ``sklearn.base`` (scikit-learn's estimator base, what
any estimator module imports), ``pycrfsuite`` (python-crfsuite, the real
one, for reference; skipped when it is not installed), ``skcrf.pycrfsuite``
and ``skcrf``. Each repetition (``--repeats``, default 5) imports each
module once in a fresh interpreter, round robin (one untimed round first,
so that every file is in the page cache): ``perf_counter`` around the
``import`` statement alone (the interpreter's start-up and ``site`` are not
counted; ``process_time`` too, the CPU time, which other processes on a
busy machine inflate less), then the number of modules the import added to ``sys.modules``
and whether scikit-learn or SciPy are among them. Figures: medians over
the repetitions, and ``skcrf.pycrfsuite``'s and ``skcrf``'s time minus
their baseline's (median of the per-repetition differences).

Targets: ``import skcrf.pycrfsuite`` ≤ 0.25 s and ≤ ``import numpy`` + 0.1 s;
``import skcrf`` ≤ ``import sklearn.base`` + 0.15 s; neither loads
scikit-learn (``skcrf.pycrfsuite`` loads no SciPy either).

Prints a Markdown table; writes benchmarks/results/import_time.json. This
driver imports nothing heavy. Progress goes to stderr.
"""

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from treebank import machine_busy_s, other_load, own_cpu_s, worker  # noqa: E402  (stdlib only)

MODULES = ["numpy", "sklearn.base", "pycrfsuite", "skcrf.pycrfsuite", "skcrf"]
# module -> (its baseline, the most it may exceed the baseline by, in seconds)
TARGETS_OVER = {"skcrf.pycrfsuite": ("numpy", 0.10), "skcrf": ("sklearn.base", 0.15)}
TARGETS_ABSOLUTE = {"skcrf.pycrfsuite": 0.25}
OTHER_LOAD_WARNING = 0.1

# run by each fresh interpreter (python -c): one JSON line out
PROBE = """
import json, sys, time
before = set(sys.modules)
start, cpu_start = time.perf_counter(), time.process_time()
import {module}
seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
added = set(sys.modules) - before
print(json.dumps({{
    "seconds": seconds,
    "cpu_seconds": cpu_seconds,
    "modules_added": len(added),
    "sklearn": any(m == "sklearn" or m.startswith("sklearn.") for m in added),
    "scipy": any(m == "scipy" or m.startswith("scipy.") for m in added),
    "file": getattr(sys.modules[{module!r}], "__file__", None),
}}))
"""


def progress(message):
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure(module):
    """One fresh interpreter importing ``module``: the probe's result, or None if absent."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        capture_output=True,
        text=True,
        env=env,
    )
    if out.returncode != 0:
        if "ModuleNotFoundError" in out.stderr:
            return None
        sys.stderr.write(out.stderr)
        raise RuntimeError(f"import {module} failed")
    return json.loads(out.stdout.strip().splitlines()[-1])


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", type=Path, default=HERE / "results" / "import_time.json")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    start_time = time.perf_counter()
    busy_start, own_start = machine_busy_s(), own_cpu_s()
    machine = worker({"kind": "info"})
    present = [m for m in MODULES if measure(m) is not None]  # the untimed round
    runs = {m: [] for m in present}
    for rep in range(args.repeats):
        progress(f"repetition {rep + 1}/{args.repeats}")
        for module in present:
            runs[module].append(measure(module))
    seconds = {m: [r["seconds"] for r in runs[m]] for m in present}
    rows = []
    for module in present:
        row = {
            "module": module,
            "median_s": statistics.median(seconds[module]),
            "min_s": min(seconds[module]),
            "max_s": max(seconds[module]),
            "cpu_median_s": statistics.median(r["cpu_seconds"] for r in runs[module]),
            "modules_added": statistics.median(r["modules_added"] for r in runs[module]),
            "sklearn": any(r["sklearn"] for r in runs[module]),
            "scipy": any(r["scipy"] for r in runs[module]),
            "file": runs[module][0]["file"],
        }
        if module in TARGETS_OVER:
            base, over = TARGETS_OVER[module]
            diffs = [a - b for a, b in zip(seconds[module], seconds[base])]
            row["baseline"] = base
            row["over_baseline_s"] = statistics.median(diffs)
            row["over_baseline_of_medians_s"] = row["median_s"] - statistics.median(seconds[base])
            row["target_over_baseline_s"] = over
            met = row["over_baseline_of_medians_s"] <= over
            if module in TARGETS_ABSOLUTE:
                row["target_s"] = TARGETS_ABSOLUTE[module]
                met = met and row["median_s"] <= TARGETS_ABSOLUTE[module]
            row["target_met"] = met and not row["sklearn"]
        rows.append(row)
    runtime = time.perf_counter() - start_time
    other = other_load(busy_start, own_start, runtime)
    machine["other_processes_cores"] = other

    def fmt(s):
        return f"{s * 1000:.0f} ms"

    lines = [
        "| import | median | min – max | CPU (median) | modules added | sklearn | scipy "
        "| over baseline | target |",
        "|---|---:|---:|---:|---:|---|---|---:|---|",
    ]
    for row in rows:
        if "baseline" in row:
            over = f"{fmt(row['over_baseline_of_medians_s'])} over {row['baseline']}"
            target = f"+{fmt(row['target_over_baseline_s'])}"
            if "target_s" in row:
                target = f"≤ {fmt(row['target_s'])} and {target}"
            target += ": " + ("met" if row["target_met"] else "**missed**")
        else:
            over = target = ""
        lines.append(
            f"| `{row['module']}` | {fmt(row['median_s'])} | {fmt(row['min_s'])} – "
            f"{fmt(row['max_s'])} | {fmt(row['cpu_median_s'])} | {row['modules_added']:.0f} | "
            f"{'yes' if row['sklearn'] else 'no'} | {'yes' if row['scipy'] else 'no'} | "
            f"{over} | {target} |"
        )
    git = machine.get("skcrf_git") or {}
    intro = [
        "# Import times",
        "",
        f"{datetime.datetime.now().isoformat(timespec='seconds')} · {machine['cpu_model']}, "
        f"{machine['logical_cores']} logical cores · skcrf {machine['versions']['skcrf']} from "
        f"{machine['skcrf_path']}"
        + (
            f" (git {git['commit'][:10]}{', with local changes' if git['dirty'] else ''})"
            if git
            else ""
        )
        + f" · python-crfsuite {machine['versions']['python-crfsuite']}",
        "",
        f"Median of {args.repeats} fresh interpreters per module (round robin, after one "
        "untimed round, which leaves skcrf's bytecode cached); the time of the import "
        "statement alone. 'over baseline': the difference of the medians.",
    ]
    if other is not None and other > OTHER_LOAD_WARNING:
        intro += [
            "",
            f"**Warning: other processes kept {other:.2f} cores busy on average during the "
            "run: the timings are not reliable.**",
        ]
    text = "\n".join([*intro, "", *lines, "", f"Total time: {runtime:.0f} s."]) + "\n"
    results = {
        "benchmark": "import_time",
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "settings": {
            "repeats": args.repeats,
            "modules": MODULES,
            "bytecode": "cached (children run without PYTHONDONTWRITEBYTECODE)",
        },
        "targets": {
            "over_baseline_s": {
                m: {"baseline": b, "max": o} for m, (b, o) in TARGETS_OVER.items()
            },
            "absolute_s": TARGETS_ABSOLUTE,
        },
        "machine": machine,
        "runs": runs,
        "rows": rows,
        "runtime_s": runtime,
        "report": text,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1) + "\n")
    progress(f"wrote {args.json}")
    print(text)
    return 0 if all(r.get("target_met", True) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
