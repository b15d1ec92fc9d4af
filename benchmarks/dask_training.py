"""DaskCRFTagger on 2 local worker processes against a local n_jobs=2 fit.

    NLTK_DATA=/work/shared/nltk_data python benchmarks/dask_training.py
    python benchmarks/dask_training.py --quick      # smoke test, figures mean nothing

The window Treebank task (``_tasks.window_token_features``): the training
sentences replicated ``--replicas`` times (8: 645k tokens) are written to
``--files`` CoNLL files (word, tag; one partition each) and read back by
``skcrf.dask.read_conll``, which applies the window features on the workers.
Then, one after the other on the same machine:

- **dask**: ``DaskCRFTagger`` (``--iterations`` L-BFGS iterations) on a
  ``LocalCluster`` of 2 worker processes with one thread each, this process
  being the driver (the scheduler runs in it too, as LocalCluster does);
- **local**: ``CRFTagger(n_jobs=2)`` with the same settings, in a fresh
  process, on the same files read without Dask (``read_conll(bag=False)``).

Both fits follow the same iterates (the same model; sums in another order),
so their iterations make the same number of objective evaluations.

Figures:

- time per iteration: the median of the iterations' ``time`` in
  ``training_log_`` (iteration 1, which holds the first search's extra
  evaluations, is left out); time per evaluation: the same span divided by
  the evaluations it made. Target: dask within 1.5x of local;
- bytes sent per iteration: every byte written to a TCP connection by the
  driver (client and scheduler) and the workers between the end of
  iteration 2 and the last, counted by a wrapper around
  ``distributed.comm.tcp.TCP.write`` installed in every process; beside it
  the weights' size (one vector goes to each worker and one gradient comes
  back from each worker per evaluation);
- CPU seconds per iteration: user + system time of every process (driver with
  the scheduler, workers; local: the one process) over the same span, a figure
  that other processes on a shared machine do not inflate;
- driver peak memory: the driver's peak resident memory during the fit
  (Linux ``VmHWM`` after a reset) minus its resident memory just before it;
  target: below the size of the vectorized corpus (the workers' encoded
  arrays, ``fit_info_['vectorized_bytes']``).

The table is printed; ``benchmarks/results/dask_training.json`` (or
``--json``) gets every figure.
"""

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
MB = 2.0**20

sys.path.insert(0, str(HERE))
import _tasks  # noqa: E402
from _tasks import window_token_features  # noqa: E402

# -- data -------------------------------------------------------------------------------


def write_corpus(folder, replicas, n_files, quick):
    """The training sentences, ``replicas`` times, in ``n_files`` CoNLL files."""
    from skcrf.datasets import load_treebank

    train, _ = load_treebank(download=False)
    if quick:
        train = train[:300]
    sentences = train * replicas
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-len(sentences) // n_files)
    paths = []
    for f in range(n_files):
        path = folder / f"train-{f:02d}.conll"
        with open(path, "w", encoding="utf-8") as out:
            out.write(f"# window task, file {f}\n")
            for sentence in sentences[f * per_file : (f + 1) * per_file]:
                out.write("".join(f"{word}\t{tag}\n" for word, tag in sentence) + "\n")
        paths.append(str(path))
    return paths, sum(len(s) for s in sentences), len(sentences)


def window_features(rows):
    """read_conll's feature function: the window template over the words."""
    words = [row["word"] for row in rows]
    return [window_token_features(words, i) for i in range(len(words))]


# -- measurements -------------------------------------------------------------------------


def rss_bytes(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return None


def reset_peak():
    """Reset VmHWM to the current RSS (Linux); False where impossible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def install_byte_counter():
    """Count the bytes this process writes to TCP connections (run in every process)."""
    import distributed.comm.tcp as tcp

    if getattr(tcp.TCP, "_skcrf_counted", False):
        return True
    original = tcp.TCP.write

    async def write(self, msg, serializers=None, on_error="message"):
        n = await original(self, msg, serializers=serializers, on_error=on_error)
        tcp._skcrf_bytes = getattr(tcp, "_skcrf_bytes", 0) + int(n or 0)
        return n

    tcp.TCP.write = write
    tcp.TCP._skcrf_counted = True
    return True


def bytes_written():
    import distributed.comm.tcp as tcp

    return getattr(tcp, "_skcrf_bytes", 0)


def worker_counters():
    """(bytes written to TCP, CPU seconds) of this process (run on the workers)."""
    times = os.times()
    return bytes_written(), times.user + times.system


def iteration_figures(log, first=2):
    """Median time per iteration and mean time per evaluation, iterations >= first."""
    entries = [e for e in log.iterations if e["num"] >= first] or log.iterations
    times = [e["time"] for e in entries]
    evaluations = sum(e["linesearch_trials"] for e in entries)
    return {
        "iteration_s": statistics.median(times),
        "evaluation_s": sum(times) / max(evaluations, 1),
        "iterations_timed": len(entries),
        "evaluations_timed": evaluations,
        "iteration_times_s": [e["time"] for e in log.iterations],
        "evaluations_per_iteration": [e["linesearch_trials"] for e in log.iterations],
        "final_loss": log.iterations[-1]["loss"] if log.iterations else None,
    }


def run_dask(paths, params):
    import cloudpickle
    import distributed

    from skcrf.dask import DaskCRFTagger, read_conll

    # the feature function travels by value: workers need not import _tasks
    cloudpickle.register_pickle_by_value(_tasks)
    install_byte_counter()
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=logging.ERROR,
    )
    with cluster, distributed.Client(cluster) as client:
        client.run(install_byte_counter)
        data = read_conll(
            paths,
            columns=("word", "tag"),
            label_column="tag",
            feature_func=window_features,
            delimiter="\t",
        )
        X, y = data.pluck(0), data.pluck(1)
        snapshots = {}

        def snapshot(info):
            if info.iteration in (2, params["max_iterations"]):
                workers = client.run(worker_counters).values()
                snapshots[info.iteration] = (
                    bytes_written() + sum(b for b, _ in workers),
                    time.process_time(),
                    sum(c for _, c in workers),
                )

        tagger = DaskCRFTagger(**params)
        before = rss_bytes()
        peak_reset = reset_peak()
        started = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # stopped by max_iterations, as intended
            tagger.fit(X, y, callback=snapshot)
        fit_s = time.perf_counter() - started
        peak = rss_bytes("VmHWM")
    info = tagger.fit_info_
    figures = iteration_figures(tagger.training_log_)
    log = tagger.training_log_.iterations
    k_last = params["max_iterations"]
    sent = None
    if 2 in snapshots and k_last in snapshots and k_last > 2:
        evaluations = sum(e["linesearch_trials"] for e in log if e["num"] > 2)
        total = snapshots[k_last][0] - snapshots[2][0]
        sent = {
            "per_iteration_bytes": total / (k_last - 2),
            "per_evaluation_bytes": total / max(evaluations, 1),
            "weights_bytes": info["weights_bytes"],
        }
        # CPU seconds of every process (driver with scheduler, workers): on a
        # shared machine, a figure other processes' load does not inflate
        driver_cpu = (snapshots[k_last][1] - snapshots[2][1]) / (k_last - 2)
        workers_cpu = (snapshots[k_last][2] - snapshots[2][2]) / (k_last - 2)
        figures["cpu_per_iteration_s"] = driver_cpu + workers_cpu
        figures["driver_cpu_per_iteration_s"] = driver_cpu
        figures["workers_cpu_per_iteration_s"] = workers_cpu
    return {
        **figures,
        "fit_s": fit_s,
        "setup_s": info["setup_seconds"],
        "fit_info": info,
        "sent": sent,
        "driver_rss_before_bytes": before,
        "driver_peak_bytes": peak,
        "driver_peak_growth_bytes": (peak - before) if peak_reset else None,
        "peak_reset": peak_reset,
        "n_iter": tagger.n_iter_,
    }


def run_local(paths, params):
    """The local fit (run in a fresh process: ``--local-job``)."""
    from skcrf import CRFTagger
    from skcrf.dask import read_conll

    pairs = list(
        read_conll(
            paths,
            columns=("word", "tag"),
            label_column="tag",
            feature_func=window_features,
            delimiter="\t",
            bag=False,
        )
    )
    X, y = [x for x, _ in pairs], [t for _, t in pairs]
    del pairs
    tagger = CRFTagger(n_jobs=2, **params)
    cpu = {}

    def snapshot(info):
        if info.iteration in (2, params["max_iterations"]):
            cpu[info.iteration] = time.process_time()

    before = rss_bytes()
    peak_reset = reset_peak()
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tagger.fit(X, y, callback=snapshot)
    fit_s = time.perf_counter() - started
    peak = rss_bytes("VmHWM")
    k_last = params["max_iterations"]
    figures = iteration_figures(tagger.training_log_)
    if 2 in cpu and k_last in cpu and k_last > 2:
        figures["cpu_per_iteration_s"] = (cpu[k_last] - cpu[2]) / (k_last - 2)
    return {
        **figures,
        "fit_s": fit_s,
        "fit_peak_growth_bytes": (peak - before) if peak_reset else None,
        "n_iter": tagger.n_iter_,
    }


# -- report -------------------------------------------------------------------------------


def machine():
    import dask
    import distributed
    import numpy

    import skcrf

    return {
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "skcrf": skcrf.__version__,
        "dask": dask.__version__,
        "distributed": distributed.__version__,
        "numpy": numpy.__version__,
        "load_average": os.getloadavg(),
    }


def table(results):
    dask_run, local = results["dask"], results["local"]
    sent = dask_run["sent"] or {}
    growth = dask_run["driver_peak_growth_bytes"]
    corpus = dask_run["fit_info"]["vectorized_bytes"]
    ratio = dask_run["iteration_s"] / local["iteration_s"]
    eval_ratio = dask_run["evaluation_s"] / local["evaluation_s"]
    rows = [
        ("tokens (sequences)", f"{results['n_tokens']:,} ({results['n_sequences']:,})", ""),
        (
            "partitions / groups / workers",
            f"{dask_run['fit_info']['n_partitions']} / "
            f"{dask_run['fit_info'].get('n_groups', '-')} / {dask_run['fit_info']['n_workers']}",
            "",
        ),
        ("time per iteration, local n_jobs=2", f"{local['iteration_s']:.3f} s", ""),
        (
            "time per iteration, dask 2 workers",
            f"{dask_run['iteration_s']:.3f} s",
            f"{ratio:.2f}x local (target <= 1.5x): {'met' if ratio <= 1.5 else 'NOT met'}",
        ),
        (
            "time per evaluation, local / dask",
            f"{local['evaluation_s']:.3f} s / {dask_run['evaluation_s']:.3f} s",
            f"{eval_ratio:.2f}x",
        ),
        (
            "CPU seconds per iteration (all processes), local / dask",
            f"{local.get('cpu_per_iteration_s', float('nan')):.2f} s / "
            f"{dask_run.get('cpu_per_iteration_s', float('nan')):.2f} s",
            f"{dask_run.get('cpu_per_iteration_s', float('nan')) / local.get('cpu_per_iteration_s', float('nan')):.2f}x "
            f"(driver and scheduler {dask_run.get('driver_cpu_per_iteration_s', float('nan')):.2f} s, "
            f"workers {dask_run.get('workers_cpu_per_iteration_s', float('nan')):.2f} s)",
        ),
        (
            "machine load average (1 min) before / after",
            f"{results['machine']['load_average'][0]:.1f} / "
            f"{results['machine']['load_average_after'][0]:.1f}",
            f"on {results['machine']['cpu_count']} cores: timings are not reliable above "
            f"{results['machine']['cpu_count']}"
            if max(
                results["machine"]["load_average"][0], results["machine"]["load_average_after"][0]
            )
            > results["machine"]["cpu_count"] + 0.5
            else "",
        ),
        (
            "dask setup (read, featurize, vocabulary, vectorize)",
            f"{dask_run['setup_s']:.1f} s",
            "",
        ),
        (
            "bytes sent per iteration (all processes)",
            f"{sent.get('per_iteration_bytes', float('nan')) / MB:.2f} MB",
            f"{sent.get('per_evaluation_bytes', float('nan')) / MB:.2f} MB per evaluation; "
            f"weights {dask_run['fit_info']['weights_bytes'] / MB:.2f} MB",
        ),
        ("vectorized corpus (on the workers)", f"{corpus / MB:.1f} MB", ""),
        (
            "driver peak memory growth during fit",
            "n/a" if growth is None else f"{growth / MB:.1f} MB",
            ""
            if growth is None
            else f"{growth / corpus:.2f}x the vectorized corpus (target < 1x): "
            f"{'met' if growth < corpus else 'NOT met'}",
        ),
        (
            "driver peak RSS (absolute, incl. scheduler)",
            f"{dask_run['driver_peak_bytes'] / MB:.0f} MB",
            "",
        ),
        (
            "final loss, local / dask",
            f"{local['final_loss']:.6f} / {dask_run['final_loss']:.6f}",
            f"rel. diff {abs(local['final_loss'] - dask_run['final_loss']) / abs(local['final_loss']):.1e}",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"{name:<{width}}  {value:<22}  {note}".rstrip() for name, value, note in rows]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=8)
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--c2", type=float, default=1.0)
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where to write the CoNLL files (default: a temporary folder)",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--quick", action="store_true", help="300 sentences x 2, 4 iterations: a smoke test"
    )
    parser.add_argument("--local-job", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.local_job:
        job = json.loads(args.local_job)
        print(json.dumps(run_local(job["paths"], job["params"])))
        return
    if args.quick:
        args.replicas, args.iterations = 2, 4
    params = {"c2": args.c2, "max_iterations": args.iterations}
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.data_dir or Path(tmp)
        print("writing the CoNLL files ...", file=sys.stderr)
        paths, n_tokens, n_sequences = write_corpus(folder, args.replicas, args.files, args.quick)
        results = {
            "created": time.strftime("%Y-%m-%d %H:%M:%S"),
            "machine": machine(),
            "params": params,
            "replicas": args.replicas,
            "files": len(paths),
            "n_tokens": n_tokens,
            "n_sequences": n_sequences,
        }
        print(f"dask fit: {n_tokens:,} tokens, {len(paths)} files ...", file=sys.stderr)
        results["dask"] = run_dask(paths, params)
        print("local fit (a fresh process) ...", file=sys.stderr)
        job = json.dumps({"paths": paths, "params": params})
        out = subprocess.run(
            [sys.executable, __file__, "--local-job", job],
            check=True,
            capture_output=True,
            text=True,
        )
        results["local"] = json.loads(out.stdout.strip().splitlines()[-1])
        results["machine"]["load_average_after"] = os.getloadavg()
    print(table(results))
    path = args.json or (
        Path(tempfile.gettempdir()) / "dask_training-quick.json"
        if args.quick
        else HERE / "results" / "dask_training.json"
    )
    path.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
