"""Instructions per prediction call of two skcrf source trees, counted by callgrind.

Wall-clock ratios of calls that take tens of milliseconds move by ±20% on a
shared 2-core machine; valgrind's instruction counts do not (the same binary,
inputs and environment give the same count, whatever else runs). This script
counts, for each tree and Treebank task, the instructions of ``--calls`` calls
of ``predict`` on the test sentences, of ``predict_single`` on each of them and
of ``fit`` (``--fit-iterations`` L-BFGS iterations on ``--train-sentences``
training sentences: featurization, feature selection and the objective), as
the difference between a process that makes the calls and one that does not
(imports, loading and warm-up calls cancel out). The model is trained
once, with the first tree, and read by both as a CRFsuite file, so both decode
the same weights. Each tree must hold a built ``skcrf`` (``python setup.py
build_ext --inplace`` there); valgrind must be installed.

    PYTHONPATH=. python benchmarks/instructions.py /tmp/before . --sentences 300

Rows: per task and method, the instructions per call (millions) of each tree
and their ratio (second ÷ first: above 1 is more work). Instructions are not
time (cache misses, vector width and branch prediction differ), but a change
that adds work to a path shows here without noise.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TASKS = ("seed", "window")
METHODS = ("predict", "predict_single", "fit")
FIT_PARAMS = {"c1": 0.1, "c2": 0.1, "max_iterations": 50, "all_possible_transitions": True}

# What each measured process runs: load, warm up, then ``calls`` calls.
_CALLS = """
import json, sys, warnings
import skcrf
model, data, method, calls = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
with open(data) as f:
    data = json.load(f)
X, X_train, y_train, fit_params = data["X"], data["X_train"], data["y_train"], data["fit"]
warnings.simplefilter("ignore")  # fits stop at max_iterations on purpose
tagger = skcrf.CRFTagger.from_crfsuite(model)
tagger.predict(X[:50])
tagger.predict_single(X[0])
skcrf.CRFTagger(max_iterations=1).fit(X_train[:5], y_train[:5])
for _ in range(calls):
    if method == "predict":
        tagger.predict(X)
    elif method == "predict_single":
        for xseq in X:
            tagger.predict_single(xseq)
    else:
        skcrf.CRFTagger(**fit_params).fit(X_train, y_train)
"""


def count(tree, model, data, method, calls):
    """Instructions of one process, as callgrind counts them."""
    env = dict(
        os.environ,
        PYTHONPATH=str(tree),
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="1",  # one BLAS thread: the same instructions each run
        OPENBLAS_NUM_THREADS="1",
    )
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            "-c",
            _CALLS,
            model,
            data,
            method,
            str(calls),
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split(":")[-1].strip())
    sys.stderr.write(out.stderr[-2000:])
    raise RuntimeError(f"callgrind failed in {tree}")


def prepare(tree, tmp, n_sentences, n_train, fit_iterations):
    """Train the models (first tree) and write the data of the calls: paths per task."""
    fit = {**FIT_PARAMS, "max_iterations": fit_iterations}
    script = f"""
import json, sys
sys.path.insert(0, {str(HERE)!r})
import skcrf
from _tasks import load_task
for task in {TASKS!r}:
    X_train, y_train, X_test, _ = load_task(task)
    tagger = skcrf.CRFTagger(**{FIT_PARAMS!r}).fit(X_train, y_train)
    tagger.to_crfsuite(f"{tmp}/{{task}}.crfsuite")
    data = {{"X": X_test[:{n_sentences}], "X_train": X_train[:{n_train}],
             "y_train": y_train[:{n_train}], "fit": {fit!r}}}
    with open(f"{tmp}/{{task}}.json", "w") as f:
        json.dump(data, f)
"""
    env = dict(os.environ, PYTHONPATH=str(tree))
    subprocess.run([sys.executable, "-c", script], check=True, env=env, cwd=tmp)
    return {task: (f"{tmp}/{task}.crfsuite", f"{tmp}/{task}.json") for task in TASKS}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, help="two source trees: before, after")
    parser.add_argument("--sentences", type=int, default=300, help="test sentences decoded")
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--train-sentences", type=int, default=500, help="sentences fitted")
    parser.add_argument("--fit-iterations", type=int, default=5, help="L-BFGS iterations of fit")
    parser.add_argument("--output", default=str(HERE / "results" / "instructions.json"))
    args = parser.parse_args()
    trees = [Path(t).resolve() for t in args.trees]

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        inputs = prepare(trees[0], tmp, args.sentences, args.train_sentences, args.fit_iterations)
        for task, (model, data) in inputs.items():
            base = [count(tree, model, data, "predict", 0) for tree in trees]
            for method in METHODS:
                per_call = [
                    (count(tree, model, data, method, args.calls) - b) / args.calls
                    for tree, b in zip(trees, base)
                ]
                rows.append(
                    {
                        "task": task,
                        "method": method,
                        "first": per_call[0],
                        "second": per_call[1],
                        "ratio": per_call[1] / per_call[0],
                    }
                )
                print(f"{task} {method}: {per_call[0]:.0f} -> {per_call[1]:.0f}", file=sys.stderr)

    lines = [
        f"Trees: {trees[0]} then {trees[1]}; {args.sentences} test sentences, "
        f"fit: {args.train_sentences} training sentences, {args.fit_iterations} iterations; "
        f"{args.calls} calls; instructions per call (millions), ratio = second ÷ first.",
        "",
        "| task | method | first | second | ratio |",
        "|---|---|--:|--:|--:|",
    ]
    lines += [
        f"| {r['task']} | {r['method']} | {r['first'] / 1e6:.2f} | "
        f"{r['second'] / 1e6:.2f} | {r['ratio']:.3f} |"
        for r in rows
    ]
    report = "\n".join(lines)
    print(report)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        json.dump({"trees": [str(t) for t in trees], "rows": rows, "report": report}, f, indent=1)


if __name__ == "__main__":
    main()
