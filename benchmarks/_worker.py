"""One benchmark measurement in a fresh Python process (started by treebank.py).

    python benchmarks/_worker.py '{"kind": "run", "engine": "skcrf", ...}'

The only argument is a JSON job; the last line printed to stdout is the JSON
result. Each job runs in its own process so that its memory figure and its
first-call timings are clean. Job kinds:

- ``prepare``: load the NLTK treebank once and write the split to ``split``
  (every later job reads it instead of parsing the corpus again);
- ``info``: the machine, the package versions and the thread pools;
- ``run``: fit one engine on one task, then predict, predict_single, save
  (fit time, peak memory, first and later predict calls, accuracy, model size);
- ``scaling``: fit on the training data replicated ``factor`` times, a few
  iterations (time per iteration per token);
- ``converge``: fit without an iteration limit and return the loss curve.

Memory: ``fit_peak_mb`` is ``ru_maxrss`` after ``fit`` minus the resident
memory right before it, once the data is loaded and featurized and the model
object made (its modules imported). On Linux the peak is first reset to the
current size (``echo 5 > /proc/self/clear_refs``, which ``ru_maxrss`` follows):
otherwise the transient peak of loading the data (``loading_peak_mb``) would
hide the fit's. ``ru_maxrss`` of a child also starts at its parent's peak
(vfork + exec), which is why the driver imports nothing heavy. Where the reset
is impossible (``peak_reset`` false) the figure is an upper bound.
"""

import gc
import hashlib
import importlib.metadata
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

MB = 2.0**20
PREDICT_LATER_CALLS = 5  # whole-test-set predict calls after the first (median)


# -- memory -------------------------------------------------------------------


def rss_mb():
    """Current resident memory in MB (VmRSS); ru_maxrss where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024 / MB
    except (OSError, ValueError):
        pass
    return ru_maxrss_mb()


def ru_maxrss_mb():
    unit = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit / MB


# -- engines ------------------------------------------------------------------


def make_model(engine, params, n_jobs, model_path=None):
    """An unfitted model; CRFsuite (one thread always) keeps its model file at ``model_path``."""
    if engine == "crfsuite":
        import sklearn_crfsuite

        return sklearn_crfsuite.CRF(algorithm="lbfgs", model_filename=model_path, **params)
    from skcrf import CRFTagger

    return CRFTagger(n_jobs=n_jobs, **params)


def log_summary(model, fit_s):
    """Iterations, logged iteration time and final loss from ``training_log_``."""
    iterations = model.training_log_.iterations
    iteration_s = sum(entry["time"] for entry in iterations)
    weights = getattr(getattr(model, "_model", None), "weights", None)  # skcrf's
    return {
        "fit_s": fit_s,
        "iterations": len(iterations),
        "iteration_time_sum_s": iteration_s,
        "s_per_iteration": iteration_s / len(iterations),
        "setup_s": fit_s - iteration_s,  # featurization etc. before iteration 1, and finishing
        "final_loss": iterations[-1]["loss"],
        # the learned weights' bytes, to compare fits bit for bit
        "weights_sha1": None if weights is None else hashlib.sha1(weights.tobytes()).hexdigest(),
    }


def timed(function, *args):
    start = time.perf_counter()
    out = function(*args)
    return out, time.perf_counter() - start


def token_accuracy(predicted, y):
    pairs = [(p, t) for pseq, tseq in zip(predicted, y) for p, t in zip(pseq, tseq)]
    return sum(p == t for p, t in pairs) / len(pairs)


def load(job):
    """The job's task data (train and test)."""
    from _tasks import load_task

    return load_task(job["task"], job["quick"], job["split"])


def reset_peak():
    """Reset the peak RSS (VmHWM, and so ru_maxrss) to the current RSS; False if impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def fit_with_memory(job, X, y, model_path=None):
    """Fit a fresh model: the model, its log summary and the memory figures."""
    model = make_model(job["engine"], job["params"], job.get("n_jobs"), model_path)
    gc.collect()
    loading_peak = ru_maxrss_mb()
    peak_reset = reset_peak()
    baseline = rss_mb()
    _, fit_s = timed(model.fit, X, y)
    peak = ru_maxrss_mb()
    return model, dict(
        log_summary(model, fit_s),
        loading_peak_mb=loading_peak,
        peak_reset=peak_reset,
        rss_before_fit_mb=baseline,
        ru_maxrss_after_fit_mb=peak,
        fit_peak_mb=peak - baseline,
    )


# -- jobs ---------------------------------------------------------------------


def job_prepare(job):
    from _tasks import save_split

    save_split(job["split"])
    return {"split": job["split"]}


def job_run(job):
    X_train, y_train, X_test, y_test = load(job)
    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "model")
        model, result = fit_with_memory(job, X_train, y_train, model_path)
        predicted, result["predict_first_s"] = timed(model.predict, X_test)
        result["accuracy"] = token_accuracy(predicted, y_test)
        result["predict_later_s"] = [
            timed(model.predict, X_test)[1] for _ in range(PREDICT_LATER_CALLS)
        ]
        start = time.perf_counter()
        for xseq in X_test:
            model.predict_single(xseq)
        result["predict_single_total_s"] = time.perf_counter() - start
        result["n_features"] = getattr(model, "n_features_", None)  # (skcrf's)
        if job["engine"] == "skcrf":
            model.save(model_path)
        result["model_bytes"] = os.path.getsize(model_path)
    from _tasks import n_tokens

    result.update(
        train_sentences=len(X_train),
        train_tokens=n_tokens(X_train),
        test_sentences=len(X_test),
        test_tokens=n_tokens(X_test),
        labels=len({tag for tags in y_train for tag in tags}),
    )
    return result


def job_scaling(job):
    from _tasks import n_tokens

    X_train, y_train, _, _ = load(job)
    factor = job["factor"]
    X, y = X_train * factor, y_train * factor  # the same dicts, referenced again
    _, result = fit_with_memory(job, X, y)
    tokens = n_tokens(X)
    result.update(
        factor=factor,
        tokens=tokens,
        us_per_iteration_per_token=1e6 * result["s_per_iteration"] / tokens,
        us_per_iteration_per_token_from_fit=1e6 * result["fit_s"] / result["iterations"] / tokens,
    )
    return result


def job_converge(job):
    X_train, y_train, _, _ = load(job)
    model, result = fit_with_memory(job, X_train, y_train)
    result["curve"] = [[entry["loss"], entry["time"]] for entry in model.training_log_.iterations]
    return result


def job_info(job):
    import numpy  # noqa: F401  (loads the BLAS that threadpool_info reports)
    import scipy.linalg  # noqa: F401
    from threadpoolctl import threadpool_info

    import skcrf

    cpu_model, physical = platform.processor() or "unknown", set()
    try:
        block = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines() + [""]:
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
    for package in (
        "numpy",
        "scipy",
        "scikit-learn",
        "sklearn-crfsuite",
        "python-crfsuite",
        "threadpoolctl",
    ):
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
        "skcrf_path": str(Path(skcrf.__file__).parent),
        "skcrf_git": git_revision(Path(skcrf.__file__).parent),
        "threadpools": threadpool_info(),
    }


def git_revision(where):
    """The commit of the skcrf checkout and whether it has local changes (read only)."""

    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.CalledProcessError):
        return None


JOBS = {
    "prepare": job_prepare,
    "info": job_info,
    "run": job_run,
    "scaling": job_scaling,
    "converge": job_converge,
}


def main():
    job = json.loads(sys.argv[1])
    from sklearn.exceptions import ConvergenceWarning

    warnings.simplefilter("ignore", ConvergenceWarning)  # max_iterations is reached on purpose
    result = JOBS[job["kind"]](job)
    print(json.dumps(dict(result, job=job)))


if __name__ == "__main__":
    main()
