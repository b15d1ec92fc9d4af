"""skcrf.nltk.CRFTagger against nltk.tag.CRFTagger (python-crfsuite) on the Treebank.

The Treebank split of ``_tasks.py`` (the NLTK sample, first 80% of sentences
train, the rest test), NLTK's default token features, the same
``training_opt`` for both (NLTK's defaults unless ``--training-opt``). Every
measurement runs in a fresh Python process per engine, the engines
alternating for ``--repeats`` repetitions; the table shows medians and the
median of the per-repetition ratios. Measured, per engine:

- ``train``: ``tagger.train(train_sents, model_file)`` (featurizing, training
  and writing the CRFsuite model file; NLTK's also opens it);
- ``tag``: ``tagger.tag_sents(test_sentences)`` on the whole test set, and the
  token accuracy of its tags.

Targets: accuracy within 0.2 percentage points of NLTK's, training faster.

    PYTHONPATH=. python benchmarks/nltk_tagger.py                 # ~5 min
    PYTHONPATH=. python benchmarks/nltk_tagger.py --quick         # smoke test

Writes ``benchmarks/results/nltk_tagger.json`` (``--json``). This process
imports nothing heavy; progress goes to stderr.
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
ENGINES = ("nltk", "skcrf")
ACCURACY_TOLERANCE = 0.2  # percentage points, either way
TRAIN_TARGET = 1.0  # least speed ratio, nltk time / skcrf time (> 1: faster)
QUICK_SENTENCES = (300, 100)
START = time.perf_counter()


def progress(message):
    print(f"[{time.perf_counter() - START:7.1f} s] {message}", file=sys.stderr, flush=True)


# -- worker side ------------------------------------------------------------------


def job_prepare(job):
    sys.path.insert(0, str(HERE))
    from _tasks import save_split

    save_split(job["split"])
    return {"split": job["split"]}


def job_info(job):
    import importlib.metadata
    import platform

    versions = {"python": platform.python_version()}
    for package in ("skcrf", "nltk", "python-crfsuite", "numpy", "scipy", "scikit-learn"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": cpu,
        "logical_cores": os.cpu_count(),
        "versions": versions,
        "platform": platform.platform(),
    }


def job_run(job):
    import warnings

    import nltk

    with open(job["split"]) as f:
        parts = json.load(f)
    train = [[tuple(pair) for pair in sent] for sent in parts["train"]]
    test = [[tuple(pair) for pair in sent] for sent in parts["test"]]
    if job["quick"]:
        train, test = train[: QUICK_SENTENCES[0]], test[: QUICK_SENTENCES[1]]
    if job["engine"] == "nltk":
        from nltk.tag import CRFTagger
    else:
        from skcrf.nltk import CRFTagger
    sentences = [[word for word, _ in sent] for sent in test]
    with tempfile.TemporaryDirectory() as tmp:
        # NLTK (3.9+) writes and reads model files only inside its data roots
        nltk.data.path.insert(0, tmp)
        model_file = os.path.join(tmp, "model.crf.tagger")
        tagger = CRFTagger(training_opt=job["training_opt"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            tagger.train(train, model_file)
            train_s = time.perf_counter() - start
        model_bytes = os.path.getsize(model_file)
        start = time.perf_counter()
        tagged = tagger.tag_sents(sentences)
        tag_s = time.perf_counter() - start
    pairs = [(t, g) for tsent, gsent in zip(tagged, test) for (_, t), (_, g) in zip(tsent, gsent)]
    return {
        "train_s": train_s,
        "tag_s": tag_s,
        "model_bytes": model_bytes,
        "accuracy": sum(t == g for t, g in pairs) / len(pairs),
        "train_sentences": len(train),
        "train_tokens": sum(map(len, train)),
        "test_sentences": len(test),
        "test_tokens": len(pairs),
    }


JOBS = {"prepare": job_prepare, "info": job_info, "run": job_run}


# -- driver side ------------------------------------------------------------------


def worker(job):
    """Run one job in a fresh process of this script; its JSON result."""
    out = subprocess.run(
        [sys.executable, __file__, "--job", json.dumps(job)], capture_output=True, text=True
    )
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise RuntimeError(f"benchmark job failed: {job}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine_busy_s():
    """CPU seconds all processes of the machine have used (/proc/stat); None elsewhere."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rows(runs):
    def med(engine, key):
        return statistics.median(r[key] for r in runs[engine])

    def pairs(key, combine):
        pairs_ = zip(runs["nltk"], runs["skcrf"])
        return statistics.median(combine(a[key], b[key]) for a, b in pairs_)

    train_ratio = pairs("train_s", lambda a, b: a / b)
    tag_ratio = pairs("tag_s", lambda a, b: a / b)
    points = pairs("accuracy", lambda a, b: 100 * (b - a))
    return [
        {
            "label": "train (featurize, fit, write the model file)",
            "unit": "s",
            "nltk": med("nltk", "train_s"),
            "skcrf": med("skcrf", "train_s"),
            "ratio": f"{train_ratio:.2f}× faster",
            "target": f"> {TRAIN_TARGET:g}×",
            "met": train_ratio > TRAIN_TARGET,
        },
        {
            "label": "tag_sents, whole test set",
            "unit": "s",
            "nltk": med("nltk", "tag_s"),
            "skcrf": med("skcrf", "tag_s"),
            "ratio": f"{tag_ratio:.2f}× faster",
            "target": None,
            "met": None,
        },
        {
            "label": "test token accuracy",
            "unit": "%",
            "nltk": 100 * med("nltk", "accuracy"),
            "skcrf": 100 * med("skcrf", "accuracy"),
            "ratio": f"{points:+.2f} pt",
            "target": f"±{ACCURACY_TOLERANCE:g} pt",
            "met": abs(points) <= ACCURACY_TOLERANCE,
        },
        {
            "label": "model file",
            "unit": "kB",
            "nltk": med("nltk", "model_bytes") / 1e3,
            "skcrf": med("skcrf", "model_bytes") / 1e3,
            "ratio": f"{pairs('model_bytes', lambda a, b: b / a):.2f}× the size",
            "target": None,
            "met": None,
        },
    ]


def table(rows):
    lines = [
        "| measure | unit | nltk.tag.CRFTagger | skcrf.nltk.CRFTagger | ratio | target | met |",
        "|---|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        met = "" if r["met"] is None else ("yes" if r["met"] else "**no**")
        lines.append(
            f"| {r['label']} | {r['unit']} | {r['nltk']:.3f} | {r['skcrf']:.3f} | "
            f"{r['ratio']} | {r['target'] or ''} | {met} |"
        )
    return lines


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="repetitions (default 3)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"first {QUICK_SENTENCES} train/test sentences (a smoke test)",
    )
    parser.add_argument(
        "--training-opt",
        default="{}",
        help="training_opt of both taggers, JSON (default: NLTK's defaults)",
    )
    parser.add_argument(
        "--json",
        help="default: benchmarks/results/nltk_tagger.json (a temporary file with --quick)",
    )
    parser.add_argument("--job", help=argparse.SUPPRESS)  # worker mode
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.job:
        job = json.loads(args.job)
        print(json.dumps(dict(JOBS[job["kind"]](job), job=job)))
        return
    training_opt = json.loads(args.training_opt)
    out = Path(tempfile.gettempdir()) if args.quick else HERE / "results"
    json_path = Path(args.json) if args.json else out / "nltk_tagger.json"
    busy_start, own_start = machine_busy_s(), children_cpu_s()
    with tempfile.TemporaryDirectory() as tmp:
        split = os.path.join(tmp, "split.json")
        progress("loading the treebank")
        worker({"kind": "prepare", "split": split})
        info = worker({"kind": "info"})
        runs = {engine: [] for engine in ENGINES}
        for rep in range(args.repeats):
            for engine in ENGINES:
                progress(f"{engine} (repetition {rep + 1}/{args.repeats})")
                runs[engine].append(
                    worker(
                        {
                            "kind": "run",
                            "engine": engine,
                            "split": split,
                            "quick": args.quick,
                            "training_opt": training_opt,
                        }
                    )
                )
    wall = time.perf_counter() - START
    busy_end = machine_busy_s()
    other = (
        None
        if busy_start is None or busy_end is None
        else max(0.0, (busy_end - busy_start) - (children_cpu_s() - own_start)) / wall
    )
    result_rows = rows(runs)
    data = runs["nltk"][0]
    lines = [
        "# skcrf.nltk.CRFTagger vs nltk.tag.CRFTagger, Treebank POS",
        "",
        f"{datetime.datetime.now().isoformat(timespec='seconds')} · {info['cpu_model']}, "
        f"{info['logical_cores']} logical cores · each engine in its own fresh process · "
        f"medians of {args.repeats} alternated repetitions · training_opt={training_opt} · "
        "NLTK's default features" + (" · **--quick: figures mean nothing**" if args.quick else ""),
        "",
        f"Data: {data['train_sentences']} train sentences ({data['train_tokens']} tokens), "
        f"{data['test_sentences']} test sentences ({data['test_tokens']} tokens).",
        "",
        *table(result_rows),
        "",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in info["versions"].items()),
    ]
    if other is not None:
        lines.append(
            f"Other processes kept {other:.2f} cores busy on average during the run"
            + (" — timings are indicative." if other > 0.1 else ".")
        )
    text = "\n".join(lines)
    print(text)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(
        json.dumps(
            {
                "created": datetime.datetime.now().isoformat(timespec="seconds"),
                "machine": info,
                "repeats": args.repeats,
                "quick": args.quick,
                "training_opt": training_opt,
                "other_load_cores": other,
                "rows": result_rows,
                "runs": runs,
                "runtime_s": wall,
            },
            indent=2,
        )
        + "\n"
    )
    progress(f"wrote {json_path}")


if __name__ == "__main__":
    main()
