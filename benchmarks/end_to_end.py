"""End to end, raw tokens to tags: skcrf (feature dicts, and templates) against sklearn-crfsuite.

    NLTK_DATA=/work/shared/nltk_data PYTHONPATH=. python benchmarks/end_to_end.py
    ... --part predict   (or fit, or threads; default all three)

Three feature sets (``benchmarks/_tasks.py``), each as the Python function
a user writes and as a template (``skcrf.templates`` recipes giving the same
attributes):

- ``seed``: the Treebank seed features, tokens are words;
- ``window``: the window template, tokens are words;
- ``tutorial``: sklearn-crfsuite's tutorial ``word2features`` over
  ``(word, POS)`` tokens, labels the universal tags (the CoNLL layout: a POS
  column in, another tagging out).

Prediction (``--part predict``): one model per task, trained here by skcrf
from raw tokens (c1=0.1, c2=0.1, 100 iterations, all possible transitions;
the same model as from the dicts, bit for bit), served by every engine:

- ``sklearn-crfsuite``: the Python function's dicts, ``sklearn_crfsuite.CRF``
  on the model's CRFsuite file;
- ``skcrf dicts``: the same dicts, ``CRFTagger.from_crfsuite``;
- ``skcrf template``: the raw tokens, the model saved by ``CRFTagger.save``
  (it carries its template).

Each with ``n_jobs`` 1 and 2 (skcrf), two ways: ``single`` (each test
sentence alone, ``predict_single``) and ``batch`` (one ``predict``), timed
from the raw tokens, after a warm-up (``predict_single`` of one sentence
and one ``predict`` of the test sentences, every engine alike: timed as a
server's later calls); ``batch`` is the median of 5 calls in the process. Every (engine, task) runs in its own process,
alternated, ``--repeats`` times; medians; tags checked equal.

Threads (``--part threads``): the gain of ``n_jobs=2`` over ``n_jobs=1``
for one ``predict`` of the test sentences from the raw tokens (the dicts
built in the timed call for ``skcrf dicts``), both thread counts in one
process, alternated call by call (the order swapped every round), so that
both see the same machine: a second thread is what a busy neighbour takes
first, and runs in separate processes minutes apart measured the machine
as much as the threads. The ratio is the median of the rounds' ratios, over
``--repeats`` processes of ``--rounds`` rounds each.

Training (``--part fit``): from the raw training tokens to a fitted model
(100 iterations, same settings), each engine in its own process:
``sklearn-crfsuite`` (dicts + CRFsuite's fit), ``skcrf dicts`` (dicts +
fit) and ``skcrf template`` (raw tokens, ``featurizer=``); wall time and
the peak RSS above the process's RSS once the raw tokens are loaded and
the engine's modules imported (the dicts included, for the engines that
build them).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = ("seed", "window", "tutorial")
ENGINES = (
    "sklearn-crfsuite",
    "skcrf dicts n_jobs=1",
    "skcrf dicts n_jobs=2",
    "skcrf template n_jobs=1",
    "skcrf template n_jobs=2",
)
FIT_ENGINES = ("sklearn-crfsuite", "skcrf dicts", "skcrf template")
SETTINGS = "c1=0.1, c2=0.1, max_iterations=100, all_possible_transitions=True"

_COMMON = """
import json, resource, sys, time
sys.path.insert(0, {here!r})
from _tasks import raw_task, TOKEN_FEATURES, TEMPLATES

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

# the skcrf tagger of a measuring process: the template's, or the dicts' (CRFsuite file)
def skcrf_tagger(template, model):
    import skcrf
    return (skcrf.CRFTagger.load(model + ".skcrf") if template
            else skcrf.CRFTagger.from_crfsuite(model + ".crfsuite"))

# what a user's code does with one sentence's raw tokens before tagging it
def featurizer(task, template):
    features = TOKEN_FEATURES[task]
    def featurize(tokens):
        if template:
            return tokens
        return [features(tokens, i) for i in range(len(tokens))]
    return featurize
"""

_MEASURE = (
    _COMMON
    + """
engine, task, model, split = sys.argv[1:5]
_, _, sentences, _ = raw_task(task, split)
template = engine.startswith("skcrf template")
featurize = featurizer(task, template)
if engine == "sklearn-crfsuite":
    import sklearn_crfsuite
    tagger = sklearn_crfsuite.CRF(model_filename=model + ".crfsuite")
else:
    tagger = skcrf_tagger(template, model)
    tagger.set_params(n_jobs=int(engine.rsplit("=", 1)[1]))

# warm up as a server would be: its first calls make what later calls
# reuse (skcrf: the prediction threads, the Viterbi bound)
tagger.predict_single(featurize(sentences[0]))
tagger.predict([featurize(tokens) for tokens in sentences])
start = time.perf_counter()
single = []
featurizing = 0.0
for tokens in sentences:
    t = time.perf_counter()
    xseq = featurize(tokens)
    featurizing += time.perf_counter() - t
    single.append(tagger.predict_single(xseq))
single_s = time.perf_counter() - start
# one predict of the test part is tens of milliseconds: the median of
# several (a garbage collection lands in one of them, not in the figure)
runs = []
for _ in range(5):
    start = time.perf_counter()
    X = [featurize(tokens) for tokens in sentences]
    batch_featurizing = time.perf_counter() - start
    batch = tagger.predict(X)
    runs.append((time.perf_counter() - start, batch_featurizing))
batch_s, batch_featurizing = sorted(runs)[len(runs) // 2]
print(json.dumps({{
    "tokens": sum(map(len, sentences)), "single_s": single_s, "single_featurizing_s": featurizing,
    "batch_s": batch_s, "batch_featurizing_s": batch_featurizing,
    "tags": [list(map(str, seq)) for seq in single],
    "batch_equal": [list(seq) for seq in batch] == [list(seq) for seq in single],
}}))
"""
)

_THREADS = (
    _COMMON
    + """
kind, task, model, split, rounds = sys.argv[1:6]
_, _, sentences, _ = raw_task(task, split)
featurize = featurizer(task, kind == "template")
tagger = skcrf_tagger(kind == "template", model)

def timed(n_jobs):
    tagger.set_params(n_jobs=n_jobs)
    start = time.perf_counter()
    tagger.predict([featurize(tokens) for tokens in sentences])
    return time.perf_counter() - start

timed(1), timed(2)  # warm-up: the prediction threads, the Viterbi bound
one, two = [], []
for k in range(int(rounds)):
    for n_jobs in ((1, 2) if k % 2 == 0 else (2, 1)):
        (one if n_jobs == 1 else two).append(timed(n_jobs))
print(json.dumps({{"one_s": one, "two_s": two, "tokens": sum(map(len, sentences))}}))
"""
)

_TRAIN = (
    _COMMON
    + """
import skcrf
task, split, path = sys.argv[1:4]
X, y, _, _ = raw_task(task, split)
tagger = skcrf.CRFTagger(featurizer=skcrf.TemplateFeaturizer(TEMPLATES[task]()), {settings})
tagger.fit(X, y)
tagger.save(path + ".skcrf")
tagger.to_crfsuite(path + ".crfsuite")
"""
)

_FIT = (
    _COMMON
    + """
import warnings
warnings.simplefilter("ignore")
engine, task, split = sys.argv[1:4]
X, y, _, _ = raw_task(task, split)
# every module the fit uses is imported before the baseline (skcrf imports its
# estimator, scikit-learn and SciPy lazily: their import is not the fit's memory)
if engine == "sklearn-crfsuite":
    import sklearn_crfsuite
    import pycrfsuite
    sklearn_crfsuite.CRF()
else:
    import skcrf
    import skcrf._training._fit, skcrf._training._objective, skcrf._template._expand
    skcrf.CRFTagger(featurizer=skcrf.TemplateFeaturizer(TEMPLATES[task]()))
features = TOKEN_FEATURES[task]
before = rss_mb()
start = time.perf_counter()
if engine == "skcrf template":
    tagger = skcrf.CRFTagger(featurizer=skcrf.TemplateFeaturizer(TEMPLATES[task]()), {settings})
    tagger.fit(X, y)
else:
    dicts = [[features(s, i) for i in range(len(s))] for s in X]
    if engine == "sklearn-crfsuite":
        tagger = sklearn_crfsuite.CRF(algorithm="lbfgs", {settings})
    else:
        tagger = skcrf.CRFTagger({settings})
    tagger.fit(dicts, y)
seconds = time.perf_counter() - start
print(json.dumps({{"fit_s": seconds, "peak_mb": peak_mb() - before, "tokens": sum(map(len, X))}}))
"""
)


def _run(script, *args):
    out = subprocess.run(
        [sys.executable, "-c", script.format(here=str(HERE), settings=SETTINGS), *args],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"{args[0]} failed:\n{out.stderr[-3000:]}")
    return out.stdout


def _predict_rows(split, tmp, repeats):
    rows = []
    for task in TASKS:
        model = os.path.join(tmp, task)
        _run(_TRAIN, task, split, model)
        runs = {engine: [] for engine in ENGINES}
        for _ in range(repeats):
            for engine in ENGINES:
                runs[engine].append(json.loads(_run(_MEASURE, engine, task, model, split)))
        reference = runs["sklearn-crfsuite"]
        for engine in ENGINES:
            result = runs[engine]
            tokens = result[0]["tokens"]
            row = {"task": task, "engine": engine, "tokens": tokens}
            for mode in ("single", "batch"):
                seconds = [r[f"{mode}_s"] for r in result]
                row[f"{mode}_tokens_per_s"] = tokens / statistics.median(seconds)
                row[f"{mode}_featurizing_share"] = statistics.median(
                    r[f"{mode}_featurizing_s"] / r[f"{mode}_s"] for r in result
                )
                row[f"{mode}_ratio"] = statistics.median(
                    ref[f"{mode}_s"] / r[f"{mode}_s"] for ref, r in zip(reference, result)
                )
            row["same_tags"] = all(
                r["tags"] == ref["tags"] and r["batch_equal"] for r, ref in zip(result, reference)
            )
            rows.append(row)
            print(
                f"{task} {engine}: single {row['single_ratio']:.2f}x, "
                f"batch {row['batch_ratio']:.2f}x",
                file=sys.stderr,
            )
    return rows


def _thread_rows(split, tmp, repeats, rounds):
    rows = []
    for task in TASKS:
        model = os.path.join(tmp, task)
        if not os.path.exists(model + ".skcrf"):
            _run(_TRAIN, task, split, model)
        for kind in ("dicts", "template"):
            runs = [
                json.loads(_run(_THREADS, kind, task, model, split, str(rounds)))
                for _ in range(repeats)
            ]
            one = [t for r in runs for t in r["one_s"]]
            two = [t for r in runs for t in r["two_s"]]
            row = {
                "task": task,
                "engine": f"skcrf {kind}",
                "tokens": runs[0]["tokens"],
                "n_jobs_1_tokens_per_s": runs[0]["tokens"] / statistics.median(one),
                "n_jobs_2_tokens_per_s": runs[0]["tokens"] / statistics.median(two),
                "ratio": statistics.median(a / b for a, b in zip(one, two)),
                "ratio_per_process": [
                    statistics.median(a / b for a, b in zip(r["one_s"], r["two_s"])) for r in runs
                ],
            }
            rows.append(row)
            print(f"{task} {kind}: 2 threads / 1 thread {row['ratio']:.2f}x", file=sys.stderr)
    return rows


def _fit_rows(split, repeats):
    rows = []
    for task in TASKS:
        runs = {engine: [] for engine in FIT_ENGINES}
        for _ in range(repeats):
            for engine in FIT_ENGINES:
                runs[engine].append(json.loads(_run(_FIT, engine, task, split)))
        for engine in FIT_ENGINES:
            row = {
                "task": task,
                "engine": engine,
                "fit_s": statistics.median(r["fit_s"] for r in runs[engine]),
                "peak_mb": statistics.median(r["peak_mb"] for r in runs[engine]),
            }
            rows.append(row)
        by = {r["engine"]: r for r in rows if r["task"] == task}
        for row in by.values():
            row["speed_vs_dicts"] = by["skcrf dicts"]["fit_s"] / row["fit_s"]
            row["memory_vs_dicts"] = row["peak_mb"] / by["skcrf dicts"]["peak_mb"]
            row["memory_vs_crfsuite"] = row["peak_mb"] / by["sklearn-crfsuite"]["peak_mb"]
            print(f"{task} {row['engine']}: {row}", file=sys.stderr)
    return rows


def _report(predict, fit, repeats, fit_repeats, threads=(), rounds=None):
    lines = []
    if predict:
        lines += [
            f"Raw test tokens to tags, medians of {repeats} alternated runs, each engine "
            "in its own process; ratio = sklearn-crfsuite time ÷ this engine's time; "
            "featurizing = the share of the time spent building feature dicts in "
            "Python (0 for templates: the compiled path featurizes while encoding).",
            "",
            "| task | engine | single: tokens/s | ratio | featurizing | batch: tokens/s "
            "| ratio | featurizing | same tags |",
            "|---|---|--:|--:|--:|--:|--:|--:|---|",
        ]
        lines += [
            f"| {r['task']} | {r['engine']} | {r['single_tokens_per_s']:,.0f} | "
            f"{r['single_ratio']:.2f}× | {r['single_featurizing_share']:.0%} | "
            f"{r['batch_tokens_per_s']:,.0f} | {r['batch_ratio']:.2f}× | "
            f"{r['batch_featurizing_share']:.0%} | {r['same_tags']} |"
            for r in predict
        ]
    if threads:
        lines += [
            "",
            "Raw test tokens to tags, one `predict` of the test sentences, n_jobs=2 "
            f"against n_jobs=1 in the same process, alternated over {rounds} rounds a "
            "process; ratio = median of the rounds' ratios (target ≥ 1.8× for the "
            "template, issue 41).",
            "",
            "| task | engine | n_jobs=1 tokens/s | n_jobs=2 tokens/s | 2 ÷ 1 thread "
            "| per process |",
            "|---|---|--:|--:|--:|---|",
        ]
        lines += [
            f"| {r['task']} | {r['engine']} | {r['n_jobs_1_tokens_per_s']:,.0f} | "
            f"{r['n_jobs_2_tokens_per_s']:,.0f} | {r['ratio']:.2f}× | "
            + ", ".join(f"{x:.2f}" for x in r["ratio_per_process"])
            + " |"
            for r in threads
        ]
    if fit:
        lines += [
            "",
            f"Raw training tokens to a fitted model ({SETTINGS}), medians of {fit_repeats} "
            "runs, each in its own process; peak = peak RSS above the RSS with the raw "
            "tokens loaded (dicts included).",
            "",
            "| task | engine | fit s | × skcrf dicts | peak MB | ÷ skcrf dicts | ÷ CRFsuite |",
            "|---|---|--:|--:|--:|--:|--:|",
        ]
        lines += [
            f"| {r['task']} | {r['engine']} | {r['fit_s']:.2f} | {r['speed_vs_dicts']:.2f}× "
            f"| {r['peak_mb']:.0f} | {r['memory_vs_dicts']:.2f} | {r['memory_vs_crfsuite']:.2f} |"
            for r in fit
        ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fit-repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=21, help="rounds a process (threads)")
    parser.add_argument("--part", choices=("predict", "fit", "threads", "all"), default="all")
    parser.add_argument("--output", default=str(HERE / "results" / "end_to_end.json"))
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from _tasks import save_split

    predict, fit, threads = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        split = os.path.join(tmp, "split.json")
        save_split(split)
        if args.part in ("predict", "all"):
            predict = _predict_rows(split, tmp, args.repeats)
        if args.part in ("threads", "all"):
            threads = _thread_rows(split, tmp, args.repeats, args.rounds)
        if args.part in ("fit", "all"):
            fit = _fit_rows(split, args.fit_repeats)
    print(_report(predict, fit, args.repeats, args.fit_repeats, threads, args.rounds))
    output = Path(args.output)
    previous = json.loads(output.read_text()) if output.exists() else {}
    document = {
        "predict": predict or previous.get("predict", []),
        "predict_repeats": args.repeats if predict else previous.get("predict_repeats"),
        "fit": fit or previous.get("fit", []),
        "fit_repeats": args.fit_repeats if fit else previous.get("fit_repeats"),
        "threads": threads or previous.get("threads", []),
        "threads_repeats": args.repeats if threads else previous.get("threads_repeats"),
        "threads_rounds": args.rounds if threads else previous.get("threads_rounds"),
    }
    document["report"] = _report(
        document["predict"],
        document["fit"],
        document["predict_repeats"],
        document["fit_repeats"],
        document["threads"],
        document["threads_rounds"],
    )
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(document, indent=1))


if __name__ == "__main__":
    main()
