"""Averaged SGD against CRFsuite's converged L-BFGS: the time to the same test accuracy.

For each task, in fresh Python processes (one fit each, one thread each):

1. CRFsuite (``sklearn_crfsuite.CRF()``, CRFsuite's defaults: L-BFGS, c1=0,
   c2=1, until converged): fit time, iterations, test token accuracy (the
   reference accuracy);
2. skcrf ``CRFTagger(algorithm='asgd')`` (same objective, c2=1) traced over
   ``--max-epochs`` epochs with the test part as ``X_dev`` (the log's
   ``item_accuracy`` of each epoch; its time is not used): the first epoch
   ``E`` whose accuracy is within ``--tolerance`` points of the reference;
3. skcrf ``algorithm='asgd', max_iterations=E`` timed (no ``X_dev``): fit
   time and accuracy (the same model as the trace's epoch ``E``:
   deterministic for ``random_state=0``);
4. skcrf ``algorithm='asgd'`` with its default stopping rule: time, epochs,
   accuracy.

The ratio is skcrf's time to the accuracy ÷ CRFsuite's time to
convergence (target ≤ 0.1). Both fit times include turning the token dicts
into the engine's data. Tasks: ``seed`` and ``window`` (benchmarks/_tasks.py),
and ``rich``: many attributes and few labels (the window features plus the
neighbours' affixes and shapes and word trigrams, universal tagset).

    PYTHONPATH=. python benchmarks/asgd.py                      # ~15 min on 2 cores
    PYTHONPATH=. python benchmarks/asgd.py --tasks seed --quick  # smoke test
    PYTHONPATH=. python benchmarks/asgd.py --crfsuite-from benchmarks/results/asgd.json

``--crfsuite-from`` reuses the CRFsuite rows of an earlier output (they do
not depend on skcrf). Writes benchmarks/results/asgd.json.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = ("seed", "window", "rich")
START = time.perf_counter()


def progress(message):
    print(f"[{time.perf_counter() - START:7.1f} s] {message}", file=sys.stderr, flush=True)


# -- worker (one fit in this process) -------------------------------------------


def token_accuracy(predicted, y):
    pairs = [(p, t) for pseq, tseq in zip(predicted, y) for p, t in zip(pseq, tseq)]
    return sum(p == t for p, t in pairs) / len(pairs)


def run_job(job):
    sys.path.insert(0, str(HERE))
    import warnings

    from _tasks import load_task
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)  # epoch budgets are reached on purpose
    X_train, y_train, X_test, y_test = load_task(job["task"], job["quick"], job["split"])
    load = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if job["engine"] == "crfsuite":
            import sklearn_crfsuite

            model = sklearn_crfsuite.CRF(model_filename=os.path.join(tmp, "model"))
            fit_kwargs = {}
        else:
            from skcrf import CRFTagger

            model = CRFTagger(algorithm="asgd", random_state=0, n_jobs=1, **job["params"])
            fit_kwargs = {"X_dev": X_test, "y_dev": y_test} if job.get("trace") else {}
        start = time.perf_counter()
        model.fit(X_train, y_train, **fit_kwargs)
        fit_s = time.perf_counter() - start
        accuracy = token_accuracy(model.predict(X_test), y_test)
    iterations = model.training_log_.iterations
    out = {
        "fit_s": fit_s,
        "load_s": load - START,
        "iterations": len(iterations),
        "final_loss": iterations[-1]["loss"] if iterations else None,
        "accuracy": accuracy,
        "n_features": int(getattr(model, "n_features_", 0) or 0),
        "n_attributes": len(model.attributes_),
        "n_labels": len(model.classes_),
        "n_train_tokens": sum(map(len, X_train)),
    }
    if job["engine"] == "skcrf":
        out["status"] = str(model.status_.value)
        if job.get("trace"):
            out["epoch_accuracy"] = [float(entry["item_accuracy"]) for entry in iterations]
            out["epoch_loss"] = [entry["loss"] for entry in iterations]
    return out


# -- driver ---------------------------------------------------------------------


def child(job):
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


def first_epoch_within(accuracies, reference, tolerance):
    """The first epoch (from 1) whose accuracy is within ``tolerance`` of ``reference``."""
    for epoch, accuracy in enumerate(accuracies, 1):
        if accuracy is not None and abs(accuracy - reference) <= tolerance:
            return epoch
    return None


def table(rows):
    lines = [
        "| task | attributes / labels | CRFsuite L-BFGS (s, iterations) | CRFsuite acc. | "
        "asgd epochs to ±0.1 pt | asgd time (s) | asgd acc. | ratio (target ≤ 0.1) | "
        "asgd default stop (s, epochs, acc.) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for task, r in rows.items():
        c, timed, default = r["crfsuite"], r.get("asgd_to_accuracy"), r.get("asgd_default")
        if timed is None:
            reach = "not reached | — | — | —"
        else:
            reach = (
                f"{r['epochs_to_accuracy']} | {timed['fit_s']:.2f} | "
                f"{100 * timed['accuracy']:.2f}% | {timed['fit_s'] / c['fit_s']:.3f}"
            )
        stop = (
            "—"
            if default is None
            else f"{default['fit_s']:.2f} s, {default['iterations']}, "
            f"{100 * default['accuracy']:.2f}% ({default['status']})"
        )
        lines.append(
            f"| {task} | {c['n_attributes']:,} / {c['n_labels']} | "
            f"{c['fit_s']:.1f} ({c['iterations']}) | {100 * c['accuracy']:.2f}% | {reach} | {stop} |"
        )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--max-epochs", type=int, default=30, help="epochs of the trace")
    parser.add_argument("--tolerance", type=float, default=0.1, help="accuracy points")
    parser.add_argument("--quick", action="store_true", help="a few sentences (smoke test)")
    parser.add_argument("--crfsuite-from", help="reuse the CRFsuite rows of this output")
    parser.add_argument("--crfsuite-only", action="store_true")
    parser.add_argument("--no-default", action="store_true", help="skip step 4")
    parser.add_argument("--output", default=str(HERE / "results" / "asgd.json"))
    args = parser.parse_args()
    if args.job:
        print(json.dumps(run_job(json.loads(args.job))))
        return
    previous = {}
    if args.crfsuite_from:
        with open(args.crfsuite_from) as f:
            previous = json.load(f)["rows"]
    rows = {}
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
        base = {"quick": args.quick, "split": split}
        for task in args.tasks:
            row = rows[task] = {}
            if task in previous:
                row["crfsuite"] = previous[task]["crfsuite"]
                row["crfsuite_reused"] = True
            else:
                row["crfsuite"] = child({**base, "task": task, "engine": "crfsuite"})
            reference = row["crfsuite"]["accuracy"]
            progress(
                f"{task}: CRFsuite {row['crfsuite']['fit_s']:.1f} s, "
                f"{row['crfsuite']['iterations']} iterations, {100 * reference:.2f}%"
            )
            if args.crfsuite_only:
                continue
            job = {**base, "task": task, "engine": "skcrf"}
            trace = child(
                {**job, "trace": True, "params": {"max_iterations": args.max_epochs, "period": 0}}
            )
            row["asgd_trace"] = trace
            epoch = first_epoch_within(trace["epoch_accuracy"], reference, args.tolerance / 100)
            row["epochs_to_accuracy"] = epoch
            progress(
                f"{task}: asgd trace "
                + " ".join(f"{100 * a:.2f}" for a in trace["epoch_accuracy"])
                + f"; first within ±{args.tolerance} pt: epoch {epoch}"
            )
            if epoch is not None:
                timed = child({**job, "params": {"max_iterations": epoch, "period": 0}})
                row["asgd_to_accuracy"] = timed
                progress(
                    f"{task}: asgd {epoch} epochs {timed['fit_s']:.2f} s, "
                    f"{100 * timed['accuracy']:.2f}%"
                )
            if not args.no_default:
                row["asgd_default"] = default = child({**job, "params": {}})
                progress(
                    f"{task}: asgd default {default['fit_s']:.2f} s, "
                    f"{default['iterations']} epochs, {100 * default['accuracy']:.2f}%"
                )
    report = table({t: r for t, r in rows.items() if "asgd_trace" in r or args.crfsuite_only})
    print(report)
    load = os.getloadavg()
    output = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "quick": args.quick,
        "tolerance_points": args.tolerance,
        "machine": machine_info(),
        "load_average_at_end": load,
        "rows": rows,
        "note": "one run per measurement; fit_s includes turning the token dicts into each "
        "engine's data; CRFsuite: sklearn_crfsuite.CRF() defaults (L-BFGS, c1=0, c2=1, until "
        "converged); skcrf: CRFTagger(algorithm='asgd', random_state=0, n_jobs=1); the "
        "machine's 2 cores are shared with other work (see load_average_at_end).",
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(output, f, indent=1)
    progress(f"wrote {args.output}")


if __name__ == "__main__":
    main()
