"""skcrf against sklearn-crfsuite on the Treebank POS task, side by side.

Runs both engines on the same data and settings, alternating them (A B A B ...)
for every measurement, and writes a Markdown table (also printed to stdout) and
a JSON file with every figure and the machine it ran on. See
benchmarks/README.md for what each row means.

    python benchmarks/treebank.py                      # full run, 3 repetitions
    python benchmarks/treebank.py --quick --json /tmp/tb.json --markdown /tmp/tb.md

skcrf must be importable (``pip install -e .`` or ``PYTHONPATH=.``), and the
NLTK treebank sample available (``NLTK_DATA``). Progress goes to stderr.
"""

import argparse
import datetime
import gc
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import sklearn_crfsuite
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_info

import skcrf
from skcrf import CRFTagger
from skcrf.datasets import load_treebank, treebank_sentence_features

HERE = Path(__file__).resolve().parent

# The settings of each measurement (see treebank-task.md and the README).
FIT_PARAMS = {"c1": 0.1, "c2": 0.1, "max_iterations": 100, "all_possible_transitions": True}
CONVERGENCE_PARAMS = {  # to convergence
    "c1": 0.0, "c2": 1.0, "max_iterations": None, "all_possible_transitions": True,
}
SCALING_FACTORS = (1, 2, 4, 8)
SCALING_ITERATIONS = 10
SKCRF_N_JOBS = -1
EVALUATION_CALLS = 15  # direct loss_gradient timings (>= 10)
PREDICT_CALLS = 5  # whole-test-set predict timings per repetition (median)
CRFSUITE_LOSS_DECIMALS = 6  # CRFsuite's log prints the loss with "%f"

# --quick: a subset of the data and few iterations, 1 repetition (smoke test).
QUICK_SENTENCES = (300, 100)  # train, test
QUICK_FIT_ITERATIONS = 10
QUICK_CONVERGENCE_ITERATIONS = 300
QUICK_SCALING_ITERATIONS = 3

ENGINES = ("crfsuite", "skcrf")
START = time.perf_counter()


def progress(message):
    print(f"[{time.perf_counter() - START:7.1f} s] {message}", file=sys.stderr, flush=True)


# -- data and engines -------------------------------------------------------


def load_task(quick=False):
    """Token features and tags of the Treebank task (a subset with ``quick``)."""
    train, test = load_treebank()
    if quick:
        train, test = train[: QUICK_SENTENCES[0]], test[: QUICK_SENTENCES[1]]
    X_train, y_train = treebank_sentence_features(train)
    X_test, y_test = treebank_sentence_features(test)
    return X_train, y_train, X_test, y_test


def make_model(engine, params, n_jobs=SKCRF_N_JOBS):
    """An unfitted model of ``engine`` with the CRFsuite parameters ``params``."""
    if engine == "crfsuite":
        return sklearn_crfsuite.CRF(algorithm="lbfgs", **params)
    return CRFTagger(n_jobs=n_jobs, **params)


def n_tokens(X):
    return sum(len(seq) for seq in X)


def token_accuracy(predicted, y):
    pairs = [(p, t) for pseq, tseq in zip(predicted, y) for p, t in zip(pseq, tseq)]
    return sum(p == t for p, t in pairs) / len(pairs)


def timed_fit(engine, params, X, y, n_jobs=SKCRF_N_JOBS):
    """Fit a fresh model; return it and the wall time of ``fit``."""
    gc.collect()
    model = make_model(engine, params, n_jobs)
    start = time.perf_counter()
    model.fit(X, y)
    return model, time.perf_counter() - start


def log_summary(model, fit_s):
    """Figures from a fitted model's ``training_log_`` (same keys in both engines)."""
    iterations = model.training_log_.iterations
    iteration_s = sum(entry["time"] for entry in iterations)
    evaluations = 1 + sum(entry["linesearch_trials"] for entry in iterations)  # + the initial one
    return {
        "fit_s": fit_s,
        "iterations": len(iterations),
        "evaluations": evaluations,
        "iteration_time_sum_s": iteration_s,
        "setup_s": fit_s - iteration_s,  # vectorization etc. before iteration 1, and finishing
        "s_per_iteration": iteration_s / len(iterations),
        "s_per_evaluation": fit_s / evaluations,
        "final_loss": iterations[-1]["loss"],
    }


# -- one function per measurement -------------------------------------------


def measure_fit(engine, data, params, n_jobs=SKCRF_N_JOBS):
    """Fit time, iterations and evaluations, and test token accuracy."""
    X_train, y_train, X_test, y_test = data
    model, fit_s = timed_fit(engine, params, X_train, y_train, n_jobs)
    result = log_summary(model, fit_s)
    result["accuracy"] = token_accuracy(model.predict(X_test), y_test)
    return result, model


def time_to_loss(model, setup_s, target_loss):
    """Seconds and iterations a fit took to reach ``target_loss``, from its log.

    Setup time plus the cumulative iteration time up to the first iteration
    whose loss is at or below the target; (None, None) if it never was.
    CRFsuite logs its loss rounded to 6 decimals, so the loss is compared at
    that precision.
    """
    elapsed = setup_s
    for entry in model.training_log_.iterations:
        elapsed += entry["time"]
        if round(entry["loss"], CRFSUITE_LOSS_DECIMALS) <= target_loss:
            return elapsed, entry["num"]
    return None, None


def measure_convergence(engine, data, params, reference=None):
    """Fit to convergence; for skcrf also the time to reach CRFsuite's final loss.

    ``reference`` is the result of the CRFsuite run. The time to its final
    loss is read from the training log of the timed fit (no callback), with
    the setup time (fit wall time minus the sum of iteration times) added.
    If skcrf's own stopping tests end the fit above that loss, a second fit
    with them disabled (epsilon=0, delta=0, at most twice CRFsuite's
    iterations; the same path, continued) measures it instead, and
    ``time_to_target_fit`` says so.
    """
    X_train, y_train = data[:2]
    model, fit_s = timed_fit(engine, params, X_train, y_train)
    result = log_summary(model, fit_s)
    if reference is None:
        return result
    target = reference["final_loss"]
    seconds, iterations = time_to_loss(model, result["setup_s"], target)
    how = "same settings"
    if seconds is None:
        progress(f"  {engine} stopped at loss {result['final_loss']:.6f} above the target "
                 f"{target:.6f}: fitting again without the stopping tests")
        del model
        longer = dict(params, epsilon=0.0, delta=0.0, max_iterations=2 * reference["iterations"])
        model, longer_s = timed_fit(engine, longer, X_train, y_train)
        longer_setup = log_summary(model, longer_s)["setup_s"]
        seconds, iterations = time_to_loss(model, longer_setup, target)
        how = "stopping tests disabled" if seconds is not None else "not reached"
    result.update(target_loss=target, time_to_target_s=seconds, iterations_to_target=iterations,
                  time_to_target_fit=how)
    return result


def measure_evaluation(tagger, data, params, n_jobs, n_calls=EVALUATION_CALLS):
    """Seconds per skcrf objective+gradient evaluation, timed directly.

    Builds the ``CRFObjective`` of the training data as ``CRFTagger.fit`` does
    (private API) and times ``loss_gradient`` at the fitted weights of
    ``tagger`` (nonzero), ``n_calls`` times after one warm-up call.
    """
    from skcrf._objective import CRFObjective, effective_n_threads, pack_weights, select_features
    from skcrf._vectorize import check_labels, encode_labels, vectorize

    X_train, y_train = data[:2]
    matrix, lengths, _ = vectorize(X_train, tagger.vectorizer_)
    labels, classes = encode_labels(check_labels(y_train, lengths), tagger.classes_)
    features = select_features(
        matrix, labels, lengths, len(classes),
        all_possible_transitions=params.get("all_possible_transitions", False),
    )
    w = pack_weights(tagger.coef_, tagger.transition_, features)
    n_threads = effective_n_threads(n_jobs)
    # as in fit: the context sets one BLAS thread and closes the shard threads
    with CRFObjective(matrix, lengths, len(classes), features, c2=params["c2"],
                      n_threads=n_threads) as objective:
        loss, _ = objective.loss_gradient(w)  # warm-up
        times = []
        for _ in range(n_calls):
            start = time.perf_counter()
            objective.loss_gradient(w)
            times.append(time.perf_counter() - start)
    # Sanity check: the objective at the fitted weights is the log's last loss.
    logged = tagger.training_log_.iterations[-1]["loss"]
    recomputed = loss + params["c1"] * float(np.abs(w).sum())
    return {
        "n_jobs": n_jobs,
        "n_threads": n_threads,
        "calls": n_calls,
        "median_s": statistics.median(times),
        "min_s": min(times),
        "times_s": times,
        "loss_check": {"logged": logged, "recomputed": recomputed},
    }


def measure_predict(model, X_test):
    """Tagging throughput, features included: whole test set, then one sentence at a time."""
    tokens = n_tokens(X_test)
    model.predict(X_test[:10])  # warm-up
    gc.collect()
    batch_times = []
    for _ in range(PREDICT_CALLS):  # one call is ~0.1 s: the median of a few
        start = time.perf_counter()
        model.predict(X_test)
        batch_times.append(time.perf_counter() - start)
    batch_s = statistics.median(batch_times)
    latencies = []
    for xseq in X_test:
        start = time.perf_counter()
        model.predict_single(xseq)
        latencies.append(time.perf_counter() - start)
    return {
        "tokens": tokens,
        "batch_s": batch_s,
        "batch_times_s": batch_times,
        "batch_tokens_per_s": tokens / batch_s,
        "single_median_s": statistics.median(latencies),
        "single_total_s": sum(latencies),
        "single_tokens_per_s": tokens / sum(latencies),
    }


def measure_memory(engine, params, quick):
    """Peak memory added by ``fit``, in a fresh Python process (see _memory_worker.py)."""
    command = [
        sys.executable, str(HERE / "_memory_worker.py"), engine,
        "--params", json.dumps(params), "--n-jobs", str(SKCRF_N_JOBS),
    ] + (["--quick"] if quick else [])
    out = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_scaling(engine, data, factor, params):
    """Seconds per iteration with the training set replicated ``factor`` times."""
    X_train, y_train = data[:2]
    X, y = X_train * factor, y_train * factor  # the same dicts, referenced again
    model, fit_s = timed_fit(engine, params, X, y)
    result = log_summary(model, fit_s)
    result["factor"] = factor
    result["tokens"] = n_tokens(X)
    result["s_per_iteration_per_100k_tokens"] = result["s_per_iteration"] / (result["tokens"] / 1e5)
    del model
    return result


# -- alternation, summaries --------------------------------------------------


def alternate(repeats, label, runs):
    """Run ``runs`` (name -> zero-argument function) in turn, ``repeats`` times.

    Returns name -> list of results, one per repetition. A function may return
    ``(result, extra)``; only ``result`` is kept (``extra`` of the last
    repetition is returned in a second dict, e.g. the fitted models).
    """
    results = {name: [] for name in runs}
    extras = {}
    for rep in range(repeats):
        for name, run in runs.items():
            progress(f"{label}: {name} (repetition {rep + 1}/{repeats})")
            out = run()
            if isinstance(out, tuple):
                out, extras[name] = out
            results[name].append(out)
    return results, extras


def median_of(runs, key):
    values = [run[key] for run in runs]
    if any(v is None for v in values):
        return None
    return statistics.median(values)


def pair_ratios(a_runs, b_runs, a_key, b_key=None, invert=False):
    """Per-repetition ratios a/b (b/a with ``invert``); None where a value is missing."""
    b_key = b_key or a_key
    ratios = []
    for a, b in zip(a_runs, b_runs):
        x, y = a[a_key], b[b_key]
        if x is None or y is None or (y if not invert else x) == 0:
            ratios.append(None)
        else:
            ratios.append(y / x if invert else x / y)
    return ratios


def median_ratio(ratios):
    if not ratios or any(r is None for r in ratios):
        return None
    return statistics.median(ratios)


def row(label, unit, crfsuite, skcrf_value, ratio=None, ratios=None, target=None, met=None,
        fmt="{:.3f}", missing="—"):
    """One table row: ``fmt`` prints its values, ``missing`` stands for None."""
    return {
        "label": label, "unit": unit, "crfsuite": crfsuite, "skcrf": skcrf_value,
        "ratio": ratio, "ratio_pairs": ratios, "target": target, "met": met,
        "format": fmt, "missing": missing,
    }


def speed_row(label, unit, a_runs, a_key, b_runs, b_key=None, target=None, invert=False,
              fmt="{:.3f}", missing="—"):
    """A row of two timings (or throughputs, with ``invert``) and their per-pair ratio.

    Times: ratio crfsuite / skcrf. Throughputs (``invert``): skcrf / crfsuite.
    Either way a ratio above 1 means skcrf is faster. ``target`` is the least
    ratio that meets the target.
    """
    ratios = pair_ratios(a_runs, b_runs, a_key, b_key, invert=invert)
    ratio = median_ratio(ratios)
    met = None if target is None else (ratio is not None and ratio >= target)
    return row(label, unit, median_of(a_runs, a_key), median_of(b_runs, b_key or a_key),
               ratio, ratios, None if target is None else f"≥ {target:g}×", met, fmt, missing)


def build_rows(m):
    """The table rows from the measurements ``m`` (medians over repetitions)."""
    rows = []
    fit = m["fit"]
    rows.append(speed_row(f"fit, {m['fit_label']}: time", "s", fit["crfsuite"], "fit_s",
                          fit["skcrf"], target=3))
    rows.append(speed_row(f"fit, {m['fit_label']}: time, skcrf n_jobs=1", "s", fit["crfsuite"],
                          "fit_s", fit["skcrf_n_jobs_1"]))
    diffs = [100 * (b["accuracy"] - a["accuracy"]) for a, b in zip(fit["crfsuite"], fit["skcrf"])]
    diff = statistics.median(diffs)
    rows.append(row("test token accuracy", "%", 100 * median_of(fit["crfsuite"], "accuracy"),
                    100 * median_of(fit["skcrf"], "accuracy"), diff, diffs,
                    "≥ −0.1 pt", diff >= -0.1, fmt="{:.2f}"))

    if "convergence" in m:
        conv = m["convergence"]
        rows.append(speed_row("time to CRFsuite's converged objective (c1=0, c2=1)", "s",
                              conv["crfsuite"], "fit_s", conv["skcrf"], "time_to_target_s",
                              target=3, missing="not reached"))
        rows.append(speed_row("full convergence (c1=0, c2=1): time", "s", conv["crfsuite"],
                              "fit_s", conv["skcrf"]))
        for key, label, fmt in (("iterations", "iterations", "{:.0f}"),
                                ("final_loss", "final loss", "{:.6f}")):
            rows.append(row(f"full convergence: {label}", "", median_of(conv["crfsuite"], key),
                            median_of(conv["skcrf"], key), fmt=fmt))

    rows.append(speed_row("fit time ÷ objective evaluations", "s", fit["crfsuite"],
                          "s_per_evaluation", fit["skcrf"]))
    for ev in m["evaluation"]:
        rows.append(row(f"objective+gradient evaluation, direct (skcrf n_jobs={ev['n_jobs']})", "s",
                        None, ev["median_s"]))
    rows.append(speed_row("time per iteration (Σ iteration times ÷ iterations)", "s",
                          fit["crfsuite"], "s_per_iteration", fit["skcrf"]))

    pred = m["predict"]
    rows.append(speed_row("predict, whole test set", "tokens/s", pred["crfsuite"],
                          "batch_tokens_per_s", pred["skcrf"], target=1, invert=True,
                          fmt="{:,.0f}"))
    rows.append(speed_row("predict_single, median latency per sentence", "ms",
                          [{"v": 1e3 * r["single_median_s"]} for r in pred["crfsuite"]], "v",
                          [{"v": 1e3 * r["single_median_s"]} for r in pred["skcrf"]]))
    rows.append(speed_row("predict_single, one sentence at a time", "tokens/s", pred["crfsuite"],
                          "single_tokens_per_s", pred["skcrf"], invert=True, fmt="{:,.0f}"))

    if "memory" in m:
        mem = m["memory"]
        ratios = pair_ratios(mem["crfsuite"], mem["skcrf"], "fit_peak_mb", invert=True)
        ratio = median_ratio(ratios)
        rows.append(row("fit peak memory (above the loaded data)", "MB",
                        median_of(mem["crfsuite"], "fit_peak_mb"),
                        median_of(mem["skcrf"], "fit_peak_mb"), ratio, ratios, "≤ 2×",
                        ratio is not None and ratio <= 2, fmt="{:.1f}"))

    if "scaling" in m:
        for factor, runs in m["scaling"].items():
            tokens = runs["crfsuite"][0]["tokens"]
            rows.append(speed_row(f"time per iteration per 100k tokens, data ×{factor} "
                                  f"({tokens:,} tokens)", "s", runs["crfsuite"],
                                  "s_per_iteration_per_100k_tokens", runs["skcrf"]))
    return rows


def markdown(results):
    """The results as a Markdown document: a header, the table, the legend."""
    mach = results["machine"]
    data = results["data"]
    lines = [
        "# skcrf vs sklearn-crfsuite on the Treebank POS task",
        "",
        f"{results['created']} · {mach['cpu_model']}, {mach['logical_cores']} logical cores · "
        f"skcrf n_jobs={results['settings']['skcrf_n_jobs']} "
        f"({results['settings']['skcrf_n_threads']} threads) · "
        f"medians of {results['repeats']} alternated repetition(s)"
        + (" · **QUICK MODE: a data subset, few iterations; not representative**"
           if results["quick"] else ""),
        "",
        f"Data: {data['train_sentences']:,} training sentences ({data['train_tokens']:,} tokens), "
        f"{data['test_sentences']:,} test sentences ({data['test_tokens']:,} tokens). "
        "Versions: " + ", ".join(f"{k} {v}" for k, v in mach["versions"].items()) + ". "
        "BLAS: " + "; ".join(f"{lib.get('internal_api')} {lib.get('version')} "
                              f"({lib.get('num_threads')} threads)"
                              for lib in mach["threadpools"]) + ".",
        "",
        "| measure | unit | sklearn-crfsuite | skcrf | ratio | target | met |",
        "|---|---|--:|--:|--:|---|---|",
    ]

    def cell(value, r):
        return r["missing"] if value is None else r["format"].format(value)

    for r in results["rows"]:
        ratio = ("—" if r["ratio"] is None else
                 (f"{r['ratio']:+.2f} pt" if r["unit"] == "%" else f"{r['ratio']:.2f}×"))
        met = "—" if r["met"] is None else ("met" if r["met"] else "**not met**")
        lines.append(
            f"| {r['label']} | {r['unit']} | {cell(r['crfsuite'], r)} | {cell(r['skcrf'], r)} | "
            f"{ratio} | {r['target'] or '—'} | {met} |"
        )
    settings = results["settings"]
    lines += [
        "",
        "Settings (CRFsuite parameters, the same for both engines): fit "
        + params_text(settings["fit"]) + "; convergence " + params_text(settings["convergence"])
        + "; scaling " + params_text(settings["scaling"]) + ".",
    ]
    conv = results["measurements"].get("convergence")
    if conv:
        hows = [run["time_to_target_fit"] for run in conv["skcrf"]]
        if any(how != "same settings" for how in hows):
            lines.append(
                "Time to CRFsuite's objective: skcrf's own stopping tests ended its fit above "
                "CRFsuite's final loss, so the time was read from a fit with them disabled "
                f"(per repetition: {', '.join(hows)}).")
    lines += [
        "",
        "Ratios are medians of per-repetition ratios. Times: sklearn-crfsuite ÷ skcrf; "
        "throughputs: skcrf ÷ sklearn-crfsuite (above 1: skcrf is faster, in both). "
        "Memory: skcrf ÷ sklearn-crfsuite. Accuracy: skcrf − sklearn-crfsuite in points. "
        "See benchmarks/README.md.",
        "",
        f"Total benchmark time: {results['runtime_s']:.0f} s.",
    ]
    return "\n".join(lines) + "\n"


def params_text(params):
    return ", ".join(f"{key}={value}" for key, value in params.items())


# -- the machine ---------------------------------------------------------------


def machine_info():
    cpu_model = platform.processor() or "unknown"
    physical = set()
    try:
        with open("/proc/cpuinfo") as f:
            block = {}
            for line in f:
                if not line.strip():
                    physical.add((block.get("physical id"), block.get("core id")))
                    block = {}
                    continue
                key, _, value = line.partition(":")
                block[key.strip()] = value.strip()
                if key.strip() == "model name":
                    cpu_model = value.strip()
    except OSError:
        pass
    versions = {"python": platform.python_version(), "skcrf": skcrf.__version__}
    for package in ("numpy", "scipy", "scikit-learn", "sklearn-crfsuite", "python-crfsuite",
                    "threadpoolctl"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu_model": cpu_model,
        "logical_cores": os.cpu_count(),
        "physical_cores": len(physical - {(None, None)}) or None,
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "platform": platform.platform(),
        "versions": versions,
        "skcrf_git": git_revision(),
        "threadpools": threadpool_info(),
    }


def git_revision():
    try:
        def git(*args):
            return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True,
                                  check=True).stdout.strip()
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.CalledProcessError):
        return None


# -- main ----------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument("--quick", action="store_true",
                        help="data subset, few iterations, 1 repetition (a smoke test)")
    parser.add_argument("--json", default=str(HERE / "results" / "treebank.json"))
    parser.add_argument("--markdown", default=str(HERE / "results" / "treebank.md"))
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-memory", action="store_true")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    fit_params = dict(FIT_PARAMS)
    conv_params = dict(CONVERGENCE_PARAMS)
    scaling_params = dict(FIT_PARAMS, max_iterations=SCALING_ITERATIONS)
    if args.quick:
        fit_params["max_iterations"] = QUICK_FIT_ITERATIONS
        conv_params["max_iterations"] = QUICK_CONVERGENCE_ITERATIONS
        scaling_params["max_iterations"] = QUICK_SCALING_ITERATIONS
    warnings.simplefilter("ignore", ConvergenceWarning)  # max_iterations is reached on purpose

    progress("loading the treebank and building token features")
    data = load_task(args.quick)
    X_train, y_train, X_test, y_test = data
    from skcrf._objective import effective_n_threads

    results = {
        "benchmark": "treebank",
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "quick": args.quick,
        "repeats": repeats,
        "data": {
            "train_sentences": len(X_train), "train_tokens": n_tokens(X_train),
            "test_sentences": len(X_test), "test_tokens": n_tokens(X_test),
            "labels": len({t for seq in y_train for t in seq}),
        },
        "settings": {
            "fit": fit_params, "convergence": conv_params, "scaling": scaling_params,
            "scaling_factors": list(SCALING_FACTORS),
            "skcrf_n_jobs": SKCRF_N_JOBS, "skcrf_n_threads": effective_n_threads(SKCRF_N_JOBS),
            "evaluation_calls": EVALUATION_CALLS,
        },
    }
    m = {"fit_label": "c1={c1}, c2={c2}, {max_iterations} iterations".format(**fit_params)}

    progress("warm-up fits")
    for engine in ENGINES:
        timed_fit(engine, dict(fit_params, max_iterations=2), X_train[:50], y_train[:50])

    m["fit"], models = alternate(repeats, "fit", {
        "crfsuite": lambda: measure_fit("crfsuite", data, fit_params),
        "skcrf": lambda: measure_fit("skcrf", data, fit_params),
        "skcrf_n_jobs_1": lambda: measure_fit("skcrf", data, fit_params, n_jobs=1),
    })

    m["predict"], _ = alternate(repeats, "predict", {
        engine: (lambda engine=engine: measure_predict(models[engine], X_test))
        for engine in ENGINES
    })

    progress("objective+gradient evaluations, timed directly (skcrf)")
    m["evaluation"] = [measure_evaluation(models["skcrf"], data, fit_params, n_jobs)
                       for n_jobs in (SKCRF_N_JOBS, 1)]
    del models
    gc.collect()

    # Convergence: skcrf's target is the final loss of the crfsuite run just before it.
    m["convergence"] = {"crfsuite": [], "skcrf": []}
    for rep in range(repeats):
        progress(f"convergence: crfsuite (repetition {rep + 1}/{repeats})")
        ref = measure_convergence("crfsuite", data, conv_params)
        progress(f"convergence: skcrf (repetition {rep + 1}/{repeats}), "
                 f"target loss {ref['final_loss']:.4f}")
        m["convergence"]["crfsuite"].append(ref)
        m["convergence"]["skcrf"].append(
            measure_convergence("skcrf", data, conv_params, reference=ref))

    if not args.skip_memory:
        m["memory"], _ = alternate(repeats, "fit peak memory (fresh process)", {
            engine: (lambda engine=engine: measure_memory(engine, fit_params, args.quick))
            for engine in ENGINES
        })

    if not args.skip_scaling:
        m["scaling"] = {}
        for factor in SCALING_FACTORS:
            m["scaling"][factor], _ = alternate(repeats, f"scaling ×{factor}", {
                engine: (lambda engine=engine: measure_scaling(engine, data, factor,
                                                               scaling_params))
                for engine in ENGINES
            })

    results["rows"] = build_rows(m)
    results["measurements"] = {k: v for k, v in m.items() if k != "fit_label"}
    results["machine"] = machine_info()
    results["runtime_s"] = time.perf_counter() - START
    text = markdown(results)

    for path, content in ((args.json, json.dumps(results, indent=2, default=str) + "\n"),
                          (args.markdown, text)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(content)
    progress(f"wrote {args.json} and {args.markdown}")
    print(text)


if __name__ == "__main__":
    main()
