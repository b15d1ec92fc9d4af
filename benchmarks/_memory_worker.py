"""Peak memory of one fit, measured in this fresh process (run by treebank.py).

    python benchmarks/_memory_worker.py {crfsuite,skcrf} --params JSON [--n-jobs N] [--quick]

Loads the data and builds the token features first, then takes the baseline
(the current RSS), fits, and reads the peak RSS. Prints one JSON line whose
``fit_peak_mb`` is the peak during the fit minus the baseline.

On Linux the peak is ``VmHWM`` of /proc/self/status, reset to the current RSS
just before the fit (``echo 5 > /proc/self/clear_refs``), so that neither the
data loading nor the parent process counts. ``ru_maxrss`` cannot be used
alone: in a child started by ``subprocess`` (vfork + exec) it starts at the
parent's peak, and the data loading's transient peak would hide the fit's.
``ru_maxrss`` is still reported, and used where /proc is missing.
"""

import argparse
import gc
import json
import resource
import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning

from treebank import load_task, make_model

MB = 2.0**20


def proc_status_mb(field):
    """``VmRSS``/``VmHWM`` of this process in MB (Linux); None elsewhere."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024 / MB
    except (OSError, ValueError):
        pass
    return None


def reset_peak():
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def ru_maxrss_mb():
    # Kilobytes on Linux, bytes on macOS.
    unit = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * unit / MB


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("engine", choices=["crfsuite", "skcrf"])
    parser.add_argument("--params", required=True)
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)

    X_train, y_train, _, _ = load_task(args.quick)
    model = make_model(args.engine, json.loads(args.params), args.n_jobs)
    gc.collect()
    peak_reset = reset_peak()
    baseline = proc_status_mb("VmRSS")
    peak_before = proc_status_mb("VmHWM")
    ru_before = ru_maxrss_mb()
    start = time.perf_counter()
    model.fit(X_train, y_train)
    fit_s = time.perf_counter() - start
    peak_after = proc_status_mb("VmHWM")
    ru_after = ru_maxrss_mb()
    if baseline is None or peak_after is None:  # no /proc: ru_maxrss only
        baseline, peak_before, peak_after = ru_before, ru_before, ru_after
    print(json.dumps({
        "engine": args.engine,
        "baseline_rss_mb": baseline,
        "peak_before_fit_mb": peak_before,
        "peak_after_fit_mb": peak_after,
        "fit_peak_mb": peak_after - baseline,
        "peak_reset": peak_reset,
        # True when the fit never rose above the peak before it: then
        # fit_peak_mb is only an upper bound.
        "masked_by_earlier_peak": peak_after <= peak_before and peak_before > baseline,
        "ru_maxrss_before_fit_mb": ru_before,
        "ru_maxrss_after_fit_mb": ru_after,
        "fit_s": fit_s,
    }))


if __name__ == "__main__":
    main()
