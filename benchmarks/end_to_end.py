"""End to end, raw tokens to tags: skcrf against sklearn-crfsuite on both Treebank tasks.

    NLTK_DATA=/work/shared/nltk_data PYTHONPATH=. python benchmarks/end_to_end.py

What a user's tagger does: the words of each test sentence go through the
task's Python featurizer (``benchmarks/_tasks.py``: the seed features or the
window template) and the feature dicts to the tagger. One model per task
(trained here by skcrf, c1=0.1, c2=0.1, 100 iterations, all possible
transitions, written as a CRFsuite file) is served by both engines, so both
tag with the same weights:

- ``sklearn-crfsuite``: ``sklearn_crfsuite.CRF(model_filename=path)``;
- ``skcrf``: ``skcrf.CRFTagger.from_crfsuite(path)`` with ``n_jobs`` 1 or 2.

Two ways of calling, each timed from the raw words: ``single`` (each sentence
alone: featurize, ``predict_single``) and ``batch`` (featurize the whole test
part, one ``predict``). Every (engine, task) runs in its own process,
alternated, ``--repeats`` times; the table gives medians of tokens per second,
the ratio skcrf ÷ sklearn-crfsuite, and the share of skcrf's time spent
building the feature dicts. Tags are checked equal.
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
TASKS = ("seed", "window")
ENGINES = ("sklearn-crfsuite", "skcrf n_jobs=1", "skcrf n_jobs=2")

_MEASURE = """
import json, sys, time
sys.path.insert(0, {here!r})
from _tasks import TOKEN_FEATURES
engine, task, model, split = sys.argv[1:5]
with open(split) as f:
    test = json.load(f)["test"]
sentences = [[word for word, _ in sentence] for sentence in test]
features = TOKEN_FEATURES[task]
if engine == "sklearn-crfsuite":
    import sklearn_crfsuite
    tagger = sklearn_crfsuite.CRF(model_filename=model)
else:
    import skcrf
    tagger = skcrf.CRFTagger.from_crfsuite(model)
    tagger.set_params(n_jobs=int(engine.rsplit("=", 1)[1]))
tagger.predict_single([features(sentences[0], i) for i in range(len(sentences[0]))])
start = time.perf_counter()
single = []
featurizing = 0.0
for words in sentences:
    t = time.perf_counter()
    xseq = [features(words, i) for i in range(len(words))]
    featurizing += time.perf_counter() - t
    single.append(tagger.predict_single(xseq))
single_s = time.perf_counter() - start
start = time.perf_counter()
X = [[features(words, i) for i in range(len(words))] for words in sentences]
batch_featurizing = time.perf_counter() - start
batch = tagger.predict(X)
batch_s = time.perf_counter() - start
print(json.dumps({{
    "tokens": sum(map(len, sentences)), "single_s": single_s, "single_featurizing_s": featurizing,
    "batch_s": batch_s, "batch_featurizing_s": batch_featurizing,
    "tags": [list(map(str, seq)) for seq in single], "batch_equal": [list(seq) for seq in batch] == [list(seq) for seq in single],
}}))
"""

_TRAIN = """
import sys
sys.path.insert(0, {here!r})
import skcrf
from _tasks import load_task
task, split, path = sys.argv[1:4]
X, y, _, _ = load_task(task, split=split)
skcrf.CRFTagger(c1=0.1, c2=0.1, max_iterations=100, all_possible_transitions=True).fit(
    X, y
).to_crfsuite(path)
"""


def _run(script, *args):
    out = subprocess.run(
        [sys.executable, "-c", script.format(here=str(HERE)), *args],
        capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"{args[0]} failed:\n{out.stderr[-3000:]}")
    return out.stdout


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=str(HERE / "results" / "end_to_end.json"))
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from _tasks import save_split

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        split = os.path.join(tmp, "split.json")
        save_split(split)
        for task in TASKS:
            model = os.path.join(tmp, f"{task}.crfsuite")
            _run(_TRAIN, task, split, model)
            runs = {engine: [] for engine in ENGINES}
            for _ in range(args.repeats):
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
                    r["tags"] == ref["tags"] and r["batch_equal"]
                    for r, ref in zip(result, reference)
                )
                rows.append(row)
                print(
                    f"{task} {engine}: single {row['single_ratio']:.2f}x, "
                    f"batch {row['batch_ratio']:.2f}x",
                    file=sys.stderr,
                )

    lines = [
        f"Raw words of the {rows[0]['tokens']:,} test tokens (seed) to tags, medians of "
        f"{args.repeats} alternated runs, each engine in its own process; ratio = "
        "sklearn-crfsuite time ÷ skcrf time; featurizing = the share of the time spent "
        "building feature dicts in Python.",
        "",
        "| task | engine | single: tokens/s | ratio | featurizing | batch: tokens/s | ratio "
        "| featurizing | same tags |",
        "|---|---|--:|--:|--:|--:|--:|--:|---|",
    ]
    lines += [
        f"| {r['task']} | {r['engine']} | {r['single_tokens_per_s']:,.0f} | "
        f"{r['single_ratio']:.2f}× | {r['single_featurizing_share']:.0%} | "
        f"{r['batch_tokens_per_s']:,.0f} | {r['batch_ratio']:.2f}× | "
        f"{r['batch_featurizing_share']:.0%} | {r['same_tags']} |"
        for r in rows
    ]
    report = "\n".join(lines)
    print(report)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"rows": rows, "report": report}, f, indent=1)


if __name__ == "__main__":
    main()
