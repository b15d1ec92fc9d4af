"""Serving targets (issue 20): model loading, one-sentence latency, threads.

    NLTK_DATA=/work/shared/nltk_data PYTHONPATH=. python benchmarks/serving.py
    PYTHONPATH=. python benchmarks/serving.py --quick        # smoke test, 30-50 s
    PYTHONPATH=. python benchmarks/serving.py --models-dir /tmp/models --only load
    PYTHONPATH=. python benchmarks/serving.py --only share        # sizes and section D

The skcrf measured is whichever ``import skcrf`` finds: the measuring
processes inherit this one's environment unchanged (PYTHONPATH included);
the JSON records its path and git commit. The engines:

- ``pycrfsuite``: python-crfsuite's ``Tagger().open(path)`` and ``tag`` (the
  reference, CRFsuite's C code);
- ``skcrf.pycrfsuite``: ``skcrf.pycrfsuite.Tagger().open(path)`` and ``tag``;
- ``CRFTagger.from_crfsuite``: ``skcrf.CRFTagger.from_crfsuite(path)`` and
  ``predict_single``;
- ``CRFTagger.load``: ``skcrf.CRFTagger.load(npz)`` and ``predict_single``,
  the npz written by ``tagger.save`` (this run's skcrf, its default format,
  float64 weights) from the ``from_crfsuite`` tagger;
- ``CRFTagger.load(mmap=True)``: the same file mapped in place;
- ``skcrf.pycrfsuite (skcrf file)``: ``skcrf.pycrfsuite.Tagger().open(npz)``
  and ``tag``.

Sizes (with the load and share sections): the CRFsuite file of each load
model against skcrf's files of its ``from_crfsuite`` tagger: the default
format (float64), ``save(dtype="float32")``, format 5 (the names in a CQDB
chunk) and format 3 (every feature).
Targets: ≤ 0.8× (float64), ≤ 0.5× (float32).

Models (``--models-dir``, trained by python-crfsuite when missing, on the
task's training part, c1=0.1, c2=0.1, max_iterations=100,
feature.possible_transitions=True): ``seed.crfsuite`` and ``window.crfsuite``
(the Treebank tasks of _tasks.py), ``window_l2.crfsuite`` (window, c1=0 so
every attribute stays: 248k) and ``strings.crfsuite`` (tokens as lists of 34
attribute strings, :func:`string_token_features`), ``usaddress.crfsuite`` and
``probablepeople.crfsuite`` (items of usaddress's and probablepeople's shapes
made from the Treebank's words, benchmarks/_nested_items.py: each item's
features and, nested under 'previous' and 'next', its neighbours'; bools,
str, ints and floats mixed). A model trained here gets
a ``NAME.json`` beside it with its settings; a file found without one is used
as it is (``provenance`` in the JSON says so).

A. **load** (``--repeats`` default 5): every (model, engine) in a fresh
   process, round robin (for each repetition, each model, the four engines in
   turn): ``numpy`` and the engine's module imported, then VmRSS (from
   /proc/self/status), then ``perf_counter`` around opening the model plus
   tagging the first test sentence, then VmRSS again. Memory = the VmRSS
   difference (the model and whatever the first call built); the JSON also has
   the peak above the baseline (VmHWM reset first). Targets for the skcrf
   engines: time ÷ pycrfsuite's (median of per-repetition ratios) ≤ 1.5,
   memory ÷ the CRFsuite file's size ≤ 1.5.
B. **latency** (default 15): one process, models opened once, one warm-up
   pass; per repetition and item kind each engine (order rotating) tags the
   200 shortest test sentences of at least 5 tokens once, call by call; the
   figure is the pass time ÷ 200 (µs per call), median over repetitions.
   Item kinds: seed dicts, window dicts, string lists, usaddress-like and
   probablepeople-like nested dicts, each in the form the engine takes (all
   three take the same dicts and lists). Target:
   pycrfsuite's time ÷ skcrf's ≥ 1.
D. **share** (default 3): per load model, ``mmap=True`` and not: 1 and then
   4 fresh processes import numpy and skcrf and warm up (load and tag a
   tiny model file of the same format, so that what loading imports on
   first use is in the baseline); then all of them load the model with
   ``CRFTagger.load`` and tag the first test sentence (``predict_single``).
   PSS (Pss of /proc/PID/smaps_rollup, which counts a page shared by k
   processes 1/k in each) is read for all of them after the warm-up and
   after the tag; PSS added = the sums' difference. Target (mmap=True):
   4-process ÷ 1-process PSS added ≤ 1.5 (median of per-repetition ratios).
C. **threads** (default 7): one process, the window model: one
   ``CRFTagger`` (from_crfsuite) and one ``skcrf.pycrfsuite.Tagger`` (and
   pycrfsuite's, for reference) tag the test sentences 4 times over, with a
   ThreadPoolExecutor of 1 thread (all sentences) and of 2 threads (each its
   contiguous half), alternating; throughput = tokens ÷ wall time; every
   threaded result is asserted equal to the sequential one. Target: 2-thread
   ÷ 1-thread throughput ≥ 1.7 (2 cores).

Prints the Markdown tables; writes benchmarks/results/serving.json
(--quick: serving-quick.json in the temp folder). This driver imports
nothing heavy. Progress goes to stderr. skcrf's bytecode is compiled first
(``compileall``), as an installed package's is: with
``PYTHONDONTWRITEBYTECODE`` set, each fresh process would otherwise compile
the modules changed since the last write, inside the timed open.
"""

import argparse
import compileall
import datetime
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from treebank import machine_busy_s, other_load, own_cpu_s  # noqa: E402  (stdlib only)

TRAIN_PARAMS = {
    "c1": 0.1,
    "c2": 0.1,
    "max_iterations": 100,
    "feature.possible_transitions": True,
}
# name -> (features, training parameters); the file is NAME.crfsuite
MODELS = {
    "seed": ("seed", TRAIN_PARAMS),
    "window": ("window", TRAIN_PARAMS),
    "window_l2": ("window", dict(TRAIN_PARAMS, c1=0.0)),
    "strings": ("strings", TRAIN_PARAMS),
    "usaddress": ("usaddress", TRAIN_PARAMS),
    "probablepeople": ("probablepeople", TRAIN_PARAMS),
}
LOAD_MODELS = ("seed", "window", "window_l2")
LATENCY_KINDS = {
    "seed dicts": "seed",
    "window dicts": "window",
    "string lists": "strings",
    "usaddress-like nested dicts": "usaddress",
    "probablepeople-like nested dicts": "probablepeople",
}
THREADS_MODEL = "window"

LOAD_ENGINES = (
    "pycrfsuite",
    "skcrf.pycrfsuite",
    "CRFTagger.from_crfsuite",
    "CRFTagger.load",
    "CRFTagger.load(mmap=True)",
    "skcrf.pycrfsuite (skcrf file)",
)
# the skcrf files of each model (section A's CRFTagger.load reads "float64")
NPZ_KINDS = ("float64", "float32", "format5", "format3")
TAG_ENGINES = ("pycrfsuite", "skcrf.pycrfsuite", "CRFTagger.predict_single")
SKCRF_TAG_ENGINES = TAG_ENGINES[1:]

LOAD_TIME_TARGET = 1.5  # engine time ÷ pycrfsuite's, at most
# issue 42: skcrf's own files opened in place, at most pycrfsuite's time
MAPPED_LOAD_TIME_TARGET = 1.0
MAPPED_ENGINES = ("CRFTagger.load(mmap=True)", "skcrf.pycrfsuite (skcrf file)")
LOAD_MEMORY_TARGET = 1.5  # memory ÷ model file size, at most
SIZE_TARGETS = {"float64": 0.8, "float32": 0.5}  # skcrf file ÷ CRFsuite file, at most
SHARE_TARGET = 1.5  # PSS of 4 processes ÷ PSS of 1 (mmap=True), at most
SHARE_WORKERS = 4
LATENCY_TARGET = 1.0  # pycrfsuite time ÷ skcrf time, at least
THREADS_TARGET = 1.7  # 2-thread ÷ 1-thread throughput, at least

DEFAULT_REPEATS = {"load": 5, "latency": 15, "threads": 7, "share": 3}
QUICK_REPEATS = {"load": 1, "latency": 2, "threads": 2, "share": 1}
SHORT_SENTENCES = 200  # latency: the shortest test sentences of at least MIN_SHORT tokens
QUICK_SHORT_SENTENCES = 40
MIN_SHORT = 5
THREADS_COPIES = 4  # threads: the test part this many times over
QUICK_THREADS_COPIES = 1
QUICK_MAX_ITERATIONS = 20  # --quick: training on the 300-sentence slice
OTHER_LOAD_WARNING = 0.1
UNKNOWN_PROVENANCE = "found in --models-dir without a NAME.json: settings not recorded"  # cores used by other processes, on average

START = time.perf_counter()


def progress(message):
    print(f"[{time.perf_counter() - START:7.1f} s] {message}", file=sys.stderr, flush=True)


# -- features (pure Python: the load processes must not import skcrf) -----------


def string_token_features(words, i):
    """Token ``i`` as 34 attribute strings: the window template's features as
    ``name=value`` plus the shapes and 3-letter suffixes of the neighbours and
    the length; positions outside the sentence are padded (``<s>``, ``</s>``)."""
    from _tasks import word_shape

    n = len(words)

    def at(k):
        j = i + k
        return words[j] if 0 <= j < n else ("<s>" if j < 0 else "</s>")

    word = words[i]
    out = ["bias"]
    for k in range(-2, 3):
        w = at(k)
        out += [f"w[{k}]={w.lower()}", f"shape[{k}]={word_shape(w)}", f"suffix3[{k}]={w[-3:]}"]
    for k in range(-2, 2):
        out.append(f"w[{k}]|w[{k + 1}]={at(k).lower()}|{at(k + 1).lower()}")
    out.append(f"w[-1]|w[1]={at(-1).lower()}|{at(1).lower()}")
    out += [f"prefix-{m}={word[:m]}" for m in range(1, 5)]
    out += [f"suffix-{m}={word[-m:]}" for m in range(1, 5)]
    out += [
        f"is_title={word.istitle()}",
        f"is_upper={word.isupper()}",
        f"has_digit={any(ch.isdigit() for ch in word)}",
        f"has_hyphen={'-' in word}",
        f"len={min(len(word), 10)}",
    ]
    return out


def features_of(kind, tagged_sentences):
    """Items of every sentence (kind 'seed', 'window', 'strings', 'usaddress' or
    'probablepeople') and their tags."""
    from _nested_items import ITEMS, nested_features

    if kind in ITEMS:
        return nested_features(kind, tagged_sentences)
    from _tasks import TOKEN_FEATURES, sentence_features

    function = string_token_features if kind == "strings" else TOKEN_FEATURES[kind]
    return sentence_features(tagged_sentences, function)


def read_split(job):
    with open(job["split"]) as f:
        parts = json.load(f)
    train, test = parts["train"], parts["test"]
    if job["quick"]:
        from _tasks import QUICK_SENTENCES

        train, test = train[: QUICK_SENTENCES[0]], test[: QUICK_SENTENCES[1]]
    return train, test


def short_sentences(test, count):
    """The ``count`` shortest test sentences of at least MIN_SHORT tokens (ties: test order)."""
    candidates = [(len(s), i) for i, s in enumerate(test) if len(s) >= MIN_SHORT]
    chosen = sorted(i for _, i in sorted(candidates)[:count])
    return [test[i] for i in chosen]


# -- the measuring processes -------------------------------------------------------


def job_first_items(job):
    """The first test sentence's items for each feature kind (for the load jobs)."""
    _, test = read_split(job)
    return {kind: features_of(kind, test[:1])[0][0] for kind in ("seed", "window", "strings")}


def job_train(job):
    """Train one model with python-crfsuite; written atomically to ``job['path']``."""
    import pycrfsuite

    train, _ = read_split(job)
    X, y = features_of(job["features"], train)
    trainer = pycrfsuite.Trainer(verbose=False)
    for xseq, yseq in zip(X, y):
        trainer.append(xseq, yseq)
    trainer.set_params(job["params"])
    tmp = job["path"] + ".part"
    start = time.perf_counter()
    trainer.train(tmp)
    seconds = time.perf_counter() - start
    os.replace(tmp, job["path"])
    return {"train_s": seconds, "train_sentences": len(X)}


def job_save_npz(job):
    """Write skcrf's files of the from_crfsuite tagger of a CRFsuite file: the
    default format (float64), with float32 weights, format 5 (the names in a CQDB
    chunk) and format 3 (every feature)."""
    from skcrf import CRFTagger
    from skcrf.io import save_state

    tagger = CRFTagger.from_crfsuite(job["path"])
    paths = job["npz"]
    tagger.save(paths["float64"])
    tagger.save(paths["float32"], dtype="float32")
    save_state(tagger._get_fitted_state(), paths["format5"], format_version=5)
    save_state(tagger._get_fitted_state(), paths["format3"], format_version=3)
    return {kind: os.path.getsize(path) for kind, path in paths.items()}


def job_load(job):
    """Open one model with one engine and tag one sentence: time and memory."""
    import gc

    import numpy  # noqa: F401  (every engine's baseline has it)
    from _worker import reset_peak, rss_mb, ru_maxrss_mb

    engine, items = job["engine"], job["items"]
    if engine == "pycrfsuite":
        import pycrfsuite

        def open_model():
            tagger = pycrfsuite.Tagger()
            tagger.open(job["path"])
            return tagger, tagger.tag

    elif engine.startswith("skcrf.pycrfsuite"):
        import skcrf.pycrfsuite

        source = job["npz"] if engine.endswith("(skcrf file)") else job["path"]

        def open_model():
            tagger = skcrf.pycrfsuite.Tagger()
            tagger.open(source)
            return tagger, tagger.tag

    else:
        import skcrf

        loads = engine.startswith("CRFTagger.load")
        source = job["npz"] if loads else job["path"]
        mmap = engine == "CRFTagger.load(mmap=True)"
        if loads:
            load = skcrf.CRFTagger.load  # (imported here, not timed)

            def opener(path):
                return load(path, mmap=mmap)

        else:
            opener = skcrf.CRFTagger.from_crfsuite

        def open_model():
            tagger = opener(source)
            return tagger, tagger.predict_single

    gc.collect()
    peak_reset = reset_peak()
    rss_before = rss_mb()
    start = time.perf_counter()
    tagger, tag = open_model()
    opened = time.perf_counter()
    tags = tag(items)
    seconds = time.perf_counter() - start
    rss_after = rss_mb()
    peak = ru_maxrss_mb()
    del tagger
    return {
        "engine": engine,
        "model": job["model"],
        "open_and_first_tag_s": seconds,
        "open_s": opened - start,
        "rss_after_imports_mb": rss_before,
        "rss_after_first_tag_mb": rss_after,
        "memory_mb": rss_after - rss_before,
        "peak_above_imports_mb": peak - rss_before,
        "peak_reset": peak_reset,
        "tags": tags,
    }


def open_engines(path):
    """engine name -> a function tagging one sequence, for one CRFsuite model file."""
    import pycrfsuite

    import skcrf
    import skcrf.pycrfsuite

    theirs = pycrfsuite.Tagger()
    theirs.open(path)
    ours = skcrf.pycrfsuite.Tagger()
    ours.open(path)
    estimator = skcrf.CRFTagger.from_crfsuite(path)
    return {
        "pycrfsuite": theirs.tag,
        "skcrf.pycrfsuite": ours.tag,
        "CRFTagger.predict_single": estimator.predict_single,
    }


def rotated(items, shift):
    shift %= len(items)
    return list(items[shift:]) + list(items[:shift])


def job_latency(job):
    """Per-call time of each engine on the short test sentences, per item kind."""
    _, test = read_split(job)
    sentences = short_sentences(test, job["sentences"])
    kinds = {}
    for label, model in job["kinds"].items():
        X, _ = features_of(MODELS[model][0], sentences)
        engines = open_engines(job["paths"][model])
        reference = [engines["pycrfsuite"](x) for x in X]
        identical = {
            name: sum(tag(x) == ref for x, ref in zip(X, reference)) / len(X)
            for name, tag in engines.items()
        }
        kinds[label] = {"X": X, "engines": engines, "identical": identical}
    samples = {label: {name: [] for name in TAG_ENGINES} for label in kinds}
    for rep in range(job["repeats"]):
        for label, kind in kinds.items():
            for name in rotated(TAG_ENGINES, rep):
                tag, X = kind["engines"][name], kind["X"]
                start = time.perf_counter()
                for x in X:
                    tag(x)
                samples[label][name].append((time.perf_counter() - start) / len(X))
    lengths = [len(s) for s in sentences]
    return {
        "samples_s_per_call": samples,
        "identical_to_pycrfsuite": {label: kind["identical"] for label, kind in kinds.items()},
        "sentences": len(sentences),
        "tokens_min": min(lengths),
        "tokens_max": max(lengths),
        "tokens_mean": statistics.fmean(lengths),
        "attributes_per_token_mean": {
            label: statistics.fmean(n_attributes(item) for x in kind["X"] for item in x)
            for label, kind in kinds.items()
        },
    }


def n_attributes(item):
    """The attributes of one item (nested dicts, lists and sets counted inside)."""
    if not isinstance(item, dict):
        return len(item)
    return sum(
        n_attributes(value) if isinstance(value, (dict, list, set)) else 1
        for value in item.values()
    )


def job_threads(job):
    """Throughput of one shared tagger with 1 and 2 threads; threaded == sequential."""
    from concurrent.futures import ThreadPoolExecutor

    _, test = read_split(job)
    X, _ = features_of("window", test)
    X = X * job["copies"]
    tokens = sum(len(x) for x in X)
    engines = open_engines(job["path"])
    sequential = {name: [tag(x) for x in X] for name, tag in engines.items()}
    assert sequential["skcrf.pycrfsuite"] == sequential["CRFTagger.predict_single"]
    half = len(X) // 2
    shares = {1: [X], 2: [X[:half], X[half:]]}
    pools = {n: ThreadPoolExecutor(max_workers=n) for n in shares}
    for pool in pools.values():  # start the threads before timing
        list(pool.map(lambda _: None, range(4)))

    def run(tag, n_threads):
        def work(share):
            return [tag(x) for x in share]

        start = time.perf_counter()
        futures = [pools[n_threads].submit(work, share) for share in shares[n_threads]]
        results = [labels for future in futures for labels in future.result()]
        return time.perf_counter() - start, results

    samples = {name: {"1": [], "2": []} for name in engines}
    for rep in range(job["repeats"]):
        for name in rotated(TAG_ENGINES, rep):
            for n_threads in (1, 2) if rep % 2 == 0 else (2, 1):
                seconds, results = run(engines[name], n_threads)
                assert results == sequential[name], f"{name}, {n_threads} threads"
                samples[name][str(n_threads)].append(seconds)
    for pool in pools.values():
        pool.shutdown()
    return {
        "samples_s": samples,
        "sentences": len(X),
        "tokens": tokens,
        "threaded_equals_sequential": True,  # asserted for every pass
        "usable_cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
    }


def smaps_pss_kb(pid):
    """Pss of a process from /proc/PID/smaps_rollup, in kB."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    raise RuntimeError(f"no Pss in /proc/{pid}/smaps_rollup")


def serve_worker(job):
    """A serving process: imports, then on each stdin line one step (load and tag)."""
    import gc

    import numpy  # noqa: F401

    import skcrf

    # warm-up on a tiny model of the same format: the modules that loading and
    # tagging import on first use are in the baseline, not in the model's share
    warm = skcrf.CRFTagger.load(job["tiny"], mmap=job["mmap"])
    warm.predict_single([{"w": "the"}])
    del warm
    gc.collect()
    print("ready", flush=True)
    sys.stdin.readline()
    tagger = skcrf.CRFTagger.load(job["npz"], mmap=job["mmap"])
    tags = tagger.predict_single(job["items"])
    print(json.dumps({"tags": tags}), flush=True)
    sys.stdin.readline()
    return {}


def job_tiny_npz(job):
    """A tiny model file (2 sentences), for the serving workers' warm-up."""
    from skcrf import CRFTagger

    X = [[{"w": "the"}, {"w": "dog"}], [{"w": "a"}, {"w": "cat"}]]
    CRFTagger(c2=0.1).fit(X, [["D", "N"], ["D", "N"]]).save(job["path"])
    return {}


def share_round(job, n_workers):
    """PSS of ``n_workers`` processes serving one model, after imports and after
    the load + first tag (all of them at once at each point), in kB."""
    argv = [sys.executable, __file__, "--job", json.dumps(dict(job, kind="serve_worker"))]
    workers = [
        subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(n_workers)
    ]
    try:
        for worker in workers:
            assert worker.stdout.readline().strip() == "ready"
        before = [smaps_pss_kb(worker.pid) for worker in workers]
        for worker in workers:
            worker.stdin.write("load\n")
            worker.stdin.flush()
        tags = [json.loads(worker.stdout.readline())["tags"] for worker in workers]
        after = [smaps_pss_kb(worker.pid) for worker in workers]
        for worker in workers:
            worker.stdin.write("quit\n")
            worker.stdin.flush()
    finally:
        for worker in workers:
            worker.wait(timeout=60)
    return {"before_kb": before, "after_kb": after, "tags": tags}


JOBS = {
    "first_items": job_first_items,
    "train": job_train,
    "save_npz": job_save_npz,
    "load": job_load,
    "latency": job_latency,
    "threads": job_threads,
    "serve_worker": serve_worker,
    "tiny_npz": job_tiny_npz,
}


# -- the driver ---------------------------------------------------------------------


def child(job, script=__file__):
    """Run a job in a fresh process (this file with --job, or _worker.py); its JSON result."""
    argv = [sys.executable, str(script)]
    argv += [json.dumps(job)] if Path(script).name == "_worker.py" else ["--job", json.dumps(job)]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise RuntimeError(f"benchmark job failed: {job['kind']} {job.get('engine', '')}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def crfsuite_header(path):
    """num_labels and num_attrs from a CRFsuite file's header (48 bytes, little-endian)."""
    with open(path, "rb") as f:
        fields = struct.unpack("<4sI4s9I", f.read(48))
    assert fields[0] == b"lCRF", f"{path} is not a CRFsuite model file"
    return {"num_labels": fields[5], "num_attrs": fields[6]}


def warm_page_cache(path):
    """Read a file once (in chunks: this process stays small) so that every engine reads it cached."""
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def ensure_models(names, models_dir, base, quick):
    """Train the missing models; name -> {path, bytes, header, provenance}."""
    models = {}
    for name in names:
        path = models_dir / f"{name}.crfsuite"
        sidecar = path.with_suffix(".json")
        features, params = MODELS[name]
        if quick:
            params = dict(params, max_iterations=QUICK_MAX_ITERATIONS)
        trained_now = not path.exists()
        if trained_now:
            progress(f"training {path.name} with python-crfsuite ({features} features, {params})")
            models_dir.mkdir(parents=True, exist_ok=True)
            result = child(
                dict(base, kind="train", features=features, params=params, path=str(path))
            )
            sidecar.write_text(
                json.dumps(
                    {
                        "trainer": "python-crfsuite",
                        "features": features,
                        "params": params,
                        "quick": quick,
                        **result,
                    },
                    indent=1,
                )
                + "\n"
            )
        recorded = json.loads(sidecar.read_text()) if sidecar.exists() else None
        models[name] = {
            "path": str(path),
            "bytes": path.stat().st_size,
            **crfsuite_header(path),
            "trained_now": trained_now,
            "provenance": recorded or UNKNOWN_PROVENANCE,
            "intended_settings": {"trainer": "python-crfsuite", "features": features, **params},
        }
        warm_page_cache(path)
    return models


def median(values):
    return statistics.median(values)


def fmt_met(met):
    return "—" if met is None else ("met" if met else "**not met**")


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_npz(models, base, tmp):
    """skcrf's files of each model (NPZ_KINDS); their sizes go into ``models``."""
    npz = {}
    for name in LOAD_MODELS:
        paths = {kind: str(Path(tmp) / f"{name}-{kind}.npz") for kind in NPZ_KINDS}
        models[name]["npz_bytes"] = child(
            dict(base, kind="save_npz", path=models[name]["path"], npz=paths)
        )
        for path in paths.values():
            warm_page_cache(path)
        npz[name] = paths["float64"]
    return npz


def size_rows(models):
    rows = []
    for name in LOAD_MODELS:
        crfsuite = models[name]["bytes"]
        sizes = models[name]["npz_bytes"]
        row = {
            "model": name,
            "crfsuite_bytes": crfsuite,
            **{f"{k}_bytes": v for k, v in sizes.items()},
        }
        for kind, target in SIZE_TARGETS.items():
            ratio = sizes[kind] / crfsuite
            row[f"{kind}_ratio"] = ratio
            row[f"{kind}_met"] = ratio <= target
        row["format5_ratio"] = sizes["format5"] / crfsuite
        row["format3_ratio"] = sizes["format3"] / crfsuite
        rows.append(row)
    return rows


def size_table(rows, models):
    header = [
        "model",
        "CRFsuite file (MB)",
        "default format, float64 (MB)",
        "÷ CRFsuite",
        f"target ≤ {SIZE_TARGETS['float64']:g}×",
        "default format, float32 (MB)",
        "÷ CRFsuite",
        f"target ≤ {SIZE_TARGETS['float32']:g}×",
        "format 5 ÷ CRFsuite",
        "format 3 (every feature) ÷ CRFsuite",
    ]
    body = [
        [
            f"{r['model']} ({models[r['model']]['num_attrs']:,} attr.)",
            f"{r['crfsuite_bytes'] / 2**20:.2f}",
            f"{r['float64_bytes'] / 2**20:.2f}",
            f"{r['float64_ratio']:.2f}×",
            fmt_met(r["float64_met"]),
            f"{r['float32_bytes'] / 2**20:.2f}",
            f"{r['float32_ratio']:.2f}×",
            fmt_met(r["float32_met"]),
            f"{r['format5_ratio']:.2f}×",
            f"{r['format3_ratio']:.2f}×",
        ]
        for r in rows
    ]
    return markdown_table(header, body)


def run_share(models, npz, base, repeats):
    """Section D: PSS of 1 and of SHARE_WORKERS processes serving one model."""
    items = child(dict(base, kind="first_items"))
    tiny = str(Path(npz[LOAD_MODELS[0]]).with_name("tiny.npz"))
    child(dict(base, kind="tiny_npz", path=tiny))
    samples = {name: {"mmap": [], "copy": []} for name in LOAD_MODELS}
    for rep in range(repeats):
        for name in LOAD_MODELS:
            progress(f"share: {name} (repetition {rep + 1}/{repeats})")
            for mode in ("mmap", "copy"):
                job = dict(
                    npz=npz[name], tiny=tiny, mmap=mode == "mmap", items=items[MODELS[name][0]]
                )
                one = share_round(job, 1)
                many = share_round(job, SHARE_WORKERS)
                samples[name][mode].append({"1": one, str(SHARE_WORKERS): many})
    rows = []
    for name in LOAD_MODELS:
        for mode in ("mmap", "copy"):
            runs = samples[name][mode]

            def added_mb(run):
                return (sum(run["after_kb"]) - sum(run["before_kb"])) / 1024

            one = [added_mb(r["1"]) for r in runs]
            many = [added_mb(r[str(SHARE_WORKERS)]) for r in runs]
            total_one = [sum(r["1"]["after_kb"]) / 1024 for r in runs]
            total_many = [sum(r[str(SHARE_WORKERS)]["after_kb"]) / 1024 for r in runs]
            ratio = median([m / o for m, o in zip(many, one)])
            tags = {json.dumps(t) for r in runs for k in r for t in r[k]["tags"]}
            rows.append(
                {
                    "model": name,
                    "mmap": mode == "mmap",
                    "pss_added_1_mb": median(one),
                    "pss_added_n_mb": median(many),
                    "ratio": ratio,
                    "ratio_pairs": [m / o for m, o in zip(many, one)],
                    "pss_total_1_mb": median(total_one),
                    "pss_total_n_mb": median(total_many),
                    "target": f"≤ {SHARE_TARGET:g}×" if mode == "mmap" else None,
                    "met": ratio <= SHARE_TARGET if mode == "mmap" else None,
                    "same_tags": len(tags) == 1,
                }
            )
    return {"rows": rows, "samples": samples, "workers": SHARE_WORKERS}


def share_table(section, models):
    n = section["workers"]
    header = [
        "model",
        "load",
        "PSS added, 1 process (MB)",
        f"PSS added, {n} processes (MB)",
        f"{n} ÷ 1",
        "target",
        "met",
        f"PSS total, 1 / {n} processes (MB)",
    ]
    body = [
        [
            f"{r['model']} ({models[r['model']]['num_attrs']:,} attr.)",
            "mmap=True" if r["mmap"] else "mmap=False",
            f"{r['pss_added_1_mb']:.1f}",
            f"{r['pss_added_n_mb']:.1f}",
            f"{r['ratio']:.2f}×",
            r["target"] or "—",
            fmt_met(r["met"]),
            f"{r['pss_total_1_mb']:.1f} / {r['pss_total_n_mb']:.1f}",
        ]
        for r in section["rows"]
    ]
    return markdown_table(header, body)


def run_load(models, base, repeats, npz):
    """Section A: the load jobs, round robin; rows and samples."""
    items = child(dict(base, kind="first_items"))
    samples = {name: {engine: [] for engine in LOAD_ENGINES} for name in LOAD_MODELS}
    for rep in range(repeats):
        for name in LOAD_MODELS:
            progress(f"load: {name} (repetition {rep + 1}/{repeats})")
            for engine in LOAD_ENGINES:
                job = dict(
                    base,
                    kind="load",
                    engine=engine,
                    model=name,
                    path=models[name]["path"],
                    npz=npz[name],
                    items=items[MODELS[name][0]],
                )
                samples[name][engine].append(child(job))
    rows = []
    for name in LOAD_MODELS:
        runs = samples[name]
        reference_tags = runs["pycrfsuite"][0]["tags"]
        file_mb = models[name]["bytes"] / 2**20
        for engine in LOAD_ENGINES:
            times = [r["open_and_first_tag_s"] for r in runs[engine]]
            pairs = [
                r["open_and_first_tag_s"] / p["open_and_first_tag_s"]
                for r, p in zip(runs[engine], runs["pycrfsuite"])
            ]
            memory = median([r["memory_mb"] for r in runs[engine]])
            skcrf_engine = engine != "pycrfsuite"
            time_ratio = median(pairs)
            time_target = MAPPED_LOAD_TIME_TARGET if engine in MAPPED_ENGINES else LOAD_TIME_TARGET
            memory_ratio = memory / file_mb
            rows.append(
                {
                    "model": name,
                    "engine": engine,
                    "open_and_first_tag_ms": 1e3 * median(times),
                    "open_ms": 1e3 * median([r["open_s"] for r in runs[engine]]),
                    "time_ratio_vs_pycrfsuite": time_ratio,
                    "time_ratio_pairs": pairs,
                    "time_target": f"≤ {time_target:g}×" if skcrf_engine else None,
                    "time_met": time_ratio <= time_target if skcrf_engine else None,
                    "memory_mb": memory,
                    "peak_above_imports_mb": median(
                        [r["peak_above_imports_mb"] for r in runs[engine]]
                    ),
                    "model_file_mb": file_mb,
                    "memory_ratio_vs_file": memory_ratio,
                    "memory_target": f"≤ {LOAD_MEMORY_TARGET:g}×" if skcrf_engine else None,
                    "memory_met": memory_ratio <= LOAD_MEMORY_TARGET if skcrf_engine else None,
                    "first_tags_equal_pycrfsuite": all(
                        r["tags"] == reference_tags for r in runs[engine]
                    ),
                }
            )
    return {"rows": rows, "samples": samples}


def load_table(section, models):
    header = [
        "model",
        "engine",
        "open + 1st tag (ms)",
        "of which open",
        "÷ pycrfsuite",
        "target",
        "met",
        "memory (MB)",
        "÷ file size",
        "target",
        "met",
        "same tags",
    ]
    rows = []
    for r in section["rows"]:
        rows.append(
            [
                f"{r['model']} ({models[r['model']]['num_attrs']:,} attr., "
                f"{r['model_file_mb']:.1f} MB)",
                r["engine"],
                f"{r['open_and_first_tag_ms']:.1f}",
                f"{r['open_ms']:.1f}",
                f"{r['time_ratio_vs_pycrfsuite']:.2f}×",
                r["time_target"] or "—",
                fmt_met(r["time_met"]),
                f"{r['memory_mb']:.1f}",
                f"{r['memory_ratio_vs_file']:.2f}×",
                r["memory_target"] or "—",
                fmt_met(r["memory_met"]),
                "yes" if r["first_tags_equal_pycrfsuite"] else "**no**",
            ]
        )
    return markdown_table(header, rows)


def latency_rows(result):
    rows = []
    for label, by_engine in result["samples_s_per_call"].items():
        reference = by_engine["pycrfsuite"]
        for engine in TAG_ENGINES:
            pairs = [p / s for p, s in zip(reference, by_engine[engine])]
            ratio = median(pairs)
            skcrf_engine = engine != "pycrfsuite"
            rows.append(
                {
                    "items": label,
                    "engine": engine,
                    "us_per_call": 1e6 * median(by_engine[engine]),
                    "ratio_pycrfsuite_over_engine": ratio,
                    "ratio_pairs": pairs,
                    "target": f"≥ {LATENCY_TARGET:g}×" if skcrf_engine else None,
                    "met": ratio >= LATENCY_TARGET if skcrf_engine else None,
                    "identical_to_pycrfsuite": result["identical_to_pycrfsuite"][label][engine],
                }
            )
    return rows


def latency_table(rows, result):
    header = [
        "items",
        "engine",
        "µs per call",
        "pycrfsuite ÷ engine",
        "target",
        "met",
        "same tags",
    ]
    body = []
    for r in rows:
        attrs = result["attributes_per_token_mean"][r["items"]]
        body.append(
            [
                f"{r['items']} ({attrs:.0f} attr./token)",
                r["engine"],
                f"{r['us_per_call']:.1f}",
                f"{r['ratio_pycrfsuite_over_engine']:.2f}×",
                r["target"] or "—",
                fmt_met(r["met"]),
                f"{100 * r['identical_to_pycrfsuite']:.1f}%",
            ]
        )
    return markdown_table(header, body)


def threads_rows(result):
    rows = []
    for engine in TAG_ENGINES:
        one, two = result["samples_s"][engine]["1"], result["samples_s"][engine]["2"]
        pairs = [a / b for a, b in zip(one, two)]  # throughput ratio = time ratio
        ratio = median(pairs)
        skcrf_engine = engine != "pycrfsuite"
        rows.append(
            {
                "engine": engine,
                "tokens_per_s_1_thread": result["tokens"] / median(one),
                "tokens_per_s_2_threads": result["tokens"] / median(two),
                "ratio_2_over_1": ratio,
                "ratio_pairs": pairs,
                "target": f"≥ {THREADS_TARGET:g}×" if skcrf_engine else None,
                "met": ratio >= THREADS_TARGET if skcrf_engine else None,
            }
        )
    return rows


def threads_table(rows):
    header = [
        "engine (window model)",
        "1 thread (tokens/s)",
        "2 threads (tokens/s)",
        "2 ÷ 1",
        "target",
        "met",
        "threaded = sequential",
    ]
    body = [
        [
            r["engine"] + ("" if r["target"] else " (reference)"),
            f"{r['tokens_per_s_1_thread']:,.0f}",
            f"{r['tokens_per_s_2_threads']:,.0f}",
            f"{r['ratio_2_over_1']:.2f}×",
            r["target"] or "—",
            fmt_met(r["met"]),
            "yes (asserted)",
        ]
        for r in rows
    ]
    return markdown_table(header, body)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="smoke test: a data slice, 1-2 reps")
    parser.add_argument("--only", choices=("load", "latency", "threads", "share"))
    parser.add_argument(
        "--repeats",
        type=int,
        help="repetitions of every section (default: load 5, latency 15, threads 7, share 3)",
    )
    parser.add_argument(
        "--models-dir",
        type=Path,
        help="where the CRFsuite models are cached (trained when missing); default "
        "skcrf-serving-models (--quick: skcrf-serving-models-quick) in the temp folder",
    )
    parser.add_argument(
        "--json",
        type=Path,
        help="default benchmarks/results/serving.json (--quick: the temp folder)",
    )
    args = parser.parse_args(argv)
    temp = Path(tempfile.gettempdir())
    if args.models_dir is None:
        args.models_dir = temp / (
            "skcrf-serving-models-quick" if args.quick else "skcrf-serving-models"
        )
    if args.json is None:
        args.json = (
            temp / "serving-quick.json" if args.quick else HERE / "results" / "serving.json"
        )
    base = QUICK_REPEATS if args.quick else DEFAULT_REPEATS
    args.repeats_by_section = {k: args.repeats or v for k, v in base.items()}
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.job:
        job = json.loads(args.job)
        print(json.dumps(JOBS[job["kind"]](job)))
        return 0
    compileall.compile_dir(str(HERE.parent / "skcrf"), quiet=1)
    sections = (args.only,) if args.only else ("load", "latency", "threads", "share")
    repeats = args.repeats_by_section
    busy_start, own_start = machine_busy_s(), own_cpu_s()
    results = {
        "benchmark": "serving",
        "created": datetime.datetime.now().isoformat(timespec="seconds"),
        "command": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "quick": args.quick,
        "sections": list(sections),
        "settings": {
            "repeats": {s: repeats[s] for s in sections},
            "models_dir": str(args.models_dir),
            "train_params": TRAIN_PARAMS,
            "models": {name: {"features": f, "params": p} for name, (f, p) in MODELS.items()},
            "load_models": list(LOAD_MODELS),
            "load_engines": list(LOAD_ENGINES),
            "memory": "VmRSS (/proc/self/status) after the first tag minus VmRSS after imports",
            "latency_kinds": LATENCY_KINDS,
            "threads_model": THREADS_MODEL,
            "threads_copies": QUICK_THREADS_COPIES if args.quick else THREADS_COPIES,
        },
        "targets": {
            "load_time_ratio_max": LOAD_TIME_TARGET,
            "mapped_load_time_ratio_max": MAPPED_LOAD_TIME_TARGET,
            "size_over_crfsuite_max": SIZE_TARGETS,
            "share_4_over_1_max": SHARE_TARGET,
            "load_memory_over_file_max": LOAD_MEMORY_TARGET,
            "latency_pycrfsuite_over_skcrf_min": LATENCY_TARGET,
            "threads_2_over_1_min": THREADS_TARGET,
        },
    }
    printed = []
    with tempfile.TemporaryDirectory() as tmp:
        split = str(Path(tmp) / "treebank-split.json")
        progress("loading the treebank (once, into a split file)")
        child({"kind": "prepare", "split": split}, HERE / "_worker.py")
        results["machine"] = child({"kind": "info"}, HERE / "_worker.py")
        base = {"split": split, "quick": args.quick}
        needed = set()
        if "load" in sections or "share" in sections:
            needed.update(LOAD_MODELS)
        if "latency" in sections:
            needed.update(LATENCY_KINDS.values())
        if "threads" in sections:
            needed.add(THREADS_MODEL)
        models = ensure_models(
            [n for n in MODELS if n in needed], args.models_dir, base, args.quick
        )
        results["models"] = models
        for name, model in models.items():
            progress(f"{name}.crfsuite: {model['num_attrs']:,} attributes (file header)")

        if "load" in sections or "share" in sections:
            npz = write_npz(models, base, tmp)
            results["size"] = size_rows(models)
            printed += [
                "## Model file sizes",
                "",
                "skcrf's files of the from_crfsuite tagger of each CRFsuite file: the default "
                "format (6: the nonzero features, arrays aligned for mmap, the names in a "
                "packed table), with float32 weights, format 5 (the names in a CQDB chunk) "
                "and format 3 (every feature, zero weights included).",
                "",
                size_table(results["size"], models),
                "",
            ]
        if "load" in sections:
            load = run_load(models, base, repeats["load"], npz)
            results["load"] = load
            printed += [
                "## A. Loading: open + first tag, each in a fresh process",
                "",
                f"Medians of {repeats['load']} round-robin repetitions. Memory: VmRSS after the "
                "first tag − VmRSS after imports (numpy + the engine's module); ÷ file size is "
                "over the CRFsuite model file (the npz sizes are in the JSON). Time ratio: "
                "engine ÷ pycrfsuite, median of per-repetition ratios (target ≤ 1× for skcrf files opened in place, issue 42; ≤ 1.5× for the others).",
                "",
                load_table(load, models),
            ]
        if "latency" in sections:
            progress(f"latency: {repeats['latency']} repetitions")
            result = child(
                dict(
                    base,
                    kind="latency",
                    kinds=LATENCY_KINDS,
                    paths={n: models[n]["path"] for n in LATENCY_KINDS.values()},
                    sentences=QUICK_SHORT_SENTENCES if args.quick else SHORT_SENTENCES,
                    repeats=repeats["latency"],
                )
            )
            rows = latency_rows(result)
            results["latency"] = dict(result, rows=rows)
            printed += [
                "",
                "## B. One short sentence: time per call",
                "",
                f"The {result['sentences']} shortest test sentences of at least {MIN_SHORT} tokens "
                f"({result['tokens_min']}–{result['tokens_max']} tokens, mean "
                f"{result['tokens_mean']:.1f}), one call each per pass; median over "
                f"{repeats['latency']} passes (engines rotating, one process, after a warm-up). "
                "Ratio: pycrfsuite's time ÷ the engine's (median of per-pass ratios).",
                "",
                latency_table(rows, result),
            ]
        if "threads" in sections:
            progress(f"threads: {repeats['threads']} repetitions")
            result = child(
                dict(
                    base,
                    kind="threads",
                    path=models[THREADS_MODEL]["path"],
                    copies=results["settings"]["threads_copies"],
                    repeats=repeats["threads"],
                )
            )
            rows = threads_rows(result)
            results["threads"] = dict(result, rows=rows)
            printed += [
                "",
                "## C. Threads: one shared tagger, 1 vs 2 threads",
                "",
                f"{result['sentences']:,} sentences ({result['tokens']:,} tokens: the test part "
                f"×{results['settings']['threads_copies']}), window model; median of "
                f"{repeats['threads']} repetitions; {result['usable_cores']} usable cores.",
                "",
                threads_table(rows),
            ]
        if "share" in sections:
            share = run_share(models, npz, base, repeats["share"])
            results["share"] = share
            printed += [
                "",
                f"## D. Processes sharing one model: PSS of 1 and {SHARE_WORKERS} processes",
                "",
                f"Fresh processes import numpy and skcrf, then (all at once) load the default-format "
                "file with CRFTagger.load and tag the first test sentence (predict_single). "
                "PSS added = the sum over the processes of Pss (/proc/PID/smaps_rollup) after "
                "the first tag minus after the imports, read for all of them at each point "
                f"(pages shared by k processes count 1/k in each). Medians of {repeats['share']} "
                "repetitions (ratio: median of per-repetition ratios).",
                "",
                share_table(share, models),
            ]
    runtime = time.perf_counter() - START
    other = other_load(busy_start, own_start, runtime)
    results["machine"]["other_processes_cores"] = other
    results["runtime_s"] = runtime
    mach = results["machine"]
    intro = [
        "# Serving: skcrf against python-crfsuite",
        "",
        f"{results['created']} · {mach['cpu_model']}, {mach['logical_cores']} logical cores · "
        f"skcrf {mach['versions']['skcrf']} from {mach['skcrf_path']}"
        + (
            f" (git {mach['skcrf_git']['commit'][:10]}"
            + (", with local changes" if mach["skcrf_git"]["dirty"] else "")
            + ")"
            if mach.get("skcrf_git")
            else ""
        )
        + f" · python-crfsuite {mach['versions']['python-crfsuite']}"
        + (" · **QUICK MODE: the figures mean nothing**" if args.quick else ""),
    ]
    if other is not None and other > OTHER_LOAD_WARNING:
        intro += [
            "",
            f"**Warning: other processes kept {other:.2f} cores busy on average during the "
            "run: the timings are not reliable.**",
        ]
    text = "\n".join([*intro, "", *printed, "", f"Total time: {runtime:.0f} s."]) + "\n"
    results["report"] = text
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1) + "\n")
    progress(f"wrote {args.json}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
