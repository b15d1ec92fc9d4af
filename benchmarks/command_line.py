"""``skcrf crfpp learn`` / ``test`` against CRF++'s ``crf_learn -p 2`` / ``crf_test``,
and ``skcrf wapiti train`` / ``label`` against Wapiti 1.5's (``--tool wapiti``).

    NLTK_DATA=/work/shared/nltk_data PYTHONPATH=. python benchmarks/command_line.py
    ... --sentences 1000 --maxiter 100 --repeats 1
    ... --tool wapiti --wapiti /path/to/wapiti   # (or $SKCRF_WAPITI: a built source tree)

The Treebank sample as a CRF++ column file: each token's seed features
(``skcrf.datasets.treebank_token_features``: capitalisation flags,
prefixes and suffixes of 1-3 characters, hyphen, digits, capitals inside)
as columns after the word, the POS tag last; the template reads every
column of the token and the previous and next words (CRF++ pads them with
``_B-1`` / ``_B+1``, which gives ``is_first`` / ``is_last``), and ``B``.
The first ``--sentences`` training sentences train, the test part (783
sentences) is tagged.

Each run is its own process, timed from the command line (file reading,
featurization, training and writing the model included) with its peak
resident memory (``getrusage`` of the child). Both train CRF-L2 with C=1
for exactly ``--maxiter`` iterations (``-e 1e-30``: no stopping on the
objective's change, CRF++ refuses 0; skcrf's gradient test still applies) on
``--threads`` threads; then each tags the test file with its own model
(``crf_test -m``, ``skcrf crfpp test -m``) and the token accuracy is
computed from the output. With ``--tool wapiti``, the same columns and the
same template as Wapiti patterns (``u00:%x[0,0]``..., ``b``), the same
objective (``-1 0 -2 1``: Wapiti's ``rho2 / 2 ||w||^2`` is CRF++'s
``||w||^2 / (2 C)`` with C=1), exactly ``--maxiter`` iterations (``-e 0``)
on ``-t`` threads, then ``wapiti label`` / ``skcrf wapiti label``. Medians of ``--repeats`` runs, alternated; each
tagging is run ``--test-repeats`` times (it takes about a second), medians.
skcrf's bytecode is compiled first (``compileall``), as an installed
package's is: with ``PYTHONDONTWRITEBYTECODE`` set, every run would
otherwise compile skcrf's modules again. Results: a table, and
``benchmarks/results/command_line.json``.
"""

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

COLUMNS = (
    "is_capitalized",
    "is_all_caps",
    "is_all_lower",
    "prefix-1",
    "prefix-2",
    "prefix-3",
    "suffix-1",
    "suffix-2",
    "suffix-3",
    "has_hyphen",
    "is_numeric",
    "capitals_inside",
)


def _template(tool="crfpp"):
    """The template: CRF++'s (``U00:%x[0,0]``) or Wapiti's patterns (``u00:...``)."""
    lines = ["U00:%x[0,0]", "U01:%x[-1,0]", "U02:%x[1,0]"]
    lines += [f"U{10 + k}:%x[0,{k + 1}]" for k in range(len(COLUMNS))]
    if tool == "wapiti":
        return "\n".join("u" + line[1:] for line in lines) + "\n\nb\n"
    return "\n".join(lines) + "\n\nB\n"


def _value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return value.replace(" ", "_") or "_"


def write_files(folder, n_sentences, tool="crfpp"):
    from skcrf.datasets import load_treebank, treebank_token_features

    train, test = load_treebank(download=False)
    paths = {name: os.path.join(folder, name) for name in ("template", "train.txt", "test.txt")}
    with open(paths["template"], "w", encoding="utf-8") as f:
        f.write(_template(tool))
    for name, sentences in (("train.txt", train[:n_sentences]), ("test.txt", test)):
        with open(paths[name], "w", encoding="utf-8") as f:
            for sentence in sentences:
                words = [word for word, _ in sentence]
                for i, (word, tag) in enumerate(sentence):
                    features = treebank_token_features(words, i)
                    row = [word] + [_value(features[c]) for c in COLUMNS] + [tag]
                    f.write(" ".join(row) + "\n")
                f.write("\n")
    return paths


_MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
with open(sys.argv[1], "wb") as out:
    done = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE)
seconds = time.perf_counter() - start
if done.returncode:
    sys.stderr.write(done.stderr.decode(errors="replace"))
    sys.exit(done.returncode)
print(seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def measure(argv, output):
    """(seconds, peak RSS in MiB) of ``argv`` run in its own process, stdout to ``output``."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, output, *argv],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    seconds, peak_kib = done.stdout.split()
    return float(seconds), int(peak_kib) / 1024


def accuracy(path):
    correct = total = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if fields and not line.startswith("#"):
                total += 1
                correct += fields[-2] == fields[-1]
    if not total:
        raise RuntimeError(f"{path}: no tagged token (did the tool fail?)")
    return correct / total


def _commands(args):
    """``({learn name: argv}, {test name: argv})``, the reference tool's first."""
    skcrf = [sys.executable, "-m", "skcrf", args.tool]
    if args.tool == "crfpp":
        bin_dir = os.path.dirname(sys.executable)
        crf_learn = shutil.which("crf_learn") or os.path.join(bin_dir, "crf_learn")
        crf_test = shutil.which("crf_test") or os.path.join(bin_dir, "crf_test")
        options = ["-c", "1", "-e", "1e-30", "-m", str(args.maxiter), "-p", str(args.threads)]
        return (
            {"crf_learn": [crf_learn, *options], "skcrf crfpp learn": [*skcrf, "learn", *options]},
            {"crf_test": [crf_test], "skcrf crfpp test": [*skcrf, "test"]},
        )
    wapiti = args.wapiti or os.path.join(os.environ.get("SKCRF_WAPITI", ""), "wapiti")
    if not os.path.isfile(wapiti):
        sys.exit(f"no Wapiti binary at {wapiti!r}: give --wapiti or set SKCRF_WAPITI")
    options = ["-1", "0", "-2", "1", "-e", "0", "-i", str(args.maxiter), "-t", str(args.threads)]
    return (
        {"wapiti train": [wapiti, "train", *options],
         "skcrf wapiti train": [*skcrf, "train", *options]},
        {"wapiti label": [wapiti, "label"], "skcrf wapiti label": [*skcrf, "label"]},
    )  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=3131)
    parser.add_argument("--maxiter", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--test-repeats", type=int, default=5)
    parser.add_argument("--tool", choices=("crfpp", "wapiti"), default="crfpp")
    parser.add_argument("--wapiti", help="Wapiti's binary (default: $SKCRF_WAPITI/wapiti)")
    parser.add_argument("--output", help="default: benchmarks/results/command_line[-wapiti].json")
    args = parser.parse_args()
    suffix = "" if args.tool == "crfpp" else "-wapiti"
    args.output = args.output or str(HERE / "results" / f"command_line{suffix}.json")
    load_at_start = os.getloadavg()[0]  # the machine is shared: the figures' context
    compileall.compile_dir(str(ROOT / "skcrf"), quiet=1)
    commands = _commands(args)
    (reference_learn, skcrf_learn), (reference_test, skcrf_test) = map(list, commands)
    runs = {name: [] for name in commands[0]}
    tags = {name: [] for name in commands[1]}
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_files(tmp, args.sentences, args.tool)
        models = {reference_learn: os.path.join(tmp, f"{args.tool}.model"),
                  skcrf_learn: os.path.join(tmp, "model.skcrf")}  # fmt: skip
        trainers = {reference_test: reference_learn, skcrf_test: skcrf_learn}
        for repeat in range(args.repeats):
            for name, argv in commands[0].items():
                argv = [*argv, paths["template"], paths["train.txt"], models[name]]
                if args.tool == "wapiti":  # wapiti train -p PATTERNS TRAIN MODEL
                    argv.insert(-3, "-p")
                log = os.path.join(tmp, f"{name}.log")
                seconds, peak = measure(argv, log)
                runs[name].append((seconds, peak))
                print(f"[{repeat + 1}] {name}: {seconds:.1f} s, {peak:.0f} MiB", flush=True)
            for _ in range(args.test_repeats):
                for name, argv in commands[1].items():
                    out = os.path.join(tmp, f"{name}.out")
                    argv = [*argv, "-m", models[trainers[name]], paths["test.txt"]]
                    seconds, peak = measure(argv, out)
                    tags[name].append((seconds, peak, accuracy(out)))
                    print(f"[{repeat + 1}] {name}: {seconds:.2f} s, {peak:.0f} MiB", flush=True)
        with open(paths["train.txt"]) as f:
            n_tokens = sum(1 for line in f if line.strip())
    results = {
        "settings": {
            "tool": args.tool,
            "sentences": args.sentences,
            "train_tokens": n_tokens,
            "maxiter": args.maxiter,
            "threads": args.threads,
            "repeats": args.repeats,
            "test_repeats": args.test_repeats,
            "load_average_at_start": load_at_start,
            "C": 1.0,
            "template": _template(args.tool),
        },
        "learn": {
            name: {
                "seconds": statistics.median(r[0] for r in values),
                "peak_mib": statistics.median(r[1] for r in values),
            }
            for name, values in runs.items()
        },
        "test": {
            name: {
                "seconds": statistics.median(r[0] for r in values),
                "peak_mib": statistics.median(r[1] for r in values),
                "accuracy": values[-1][2],
            }
            for name, values in tags.items()
        },
    }
    learn_speedup = (
        results["learn"][reference_learn]["seconds"] / results["learn"][skcrf_learn]["seconds"]
    )
    test_speedup = (
        results["test"][reference_test]["seconds"] / results["test"][skcrf_test]["seconds"]
    )
    results["speedup"] = {"learn": learn_speedup, "test": test_speedup}
    results["settings"]["load_average_at_end"] = os.getloadavg()[0]
    print()
    print(
        f"Treebank seed columns, {args.sentences} sentences ({n_tokens} tokens), "
        f"{args.maxiter} iterations, {args.threads} threads, median of {args.repeats}"
    )
    print(f"{'engine':<20} {'seconds':>9} {'peak MiB':>9} {'accuracy':>9}")
    for name, row in results["learn"].items():
        print(f"{name:<20} {row['seconds']:>9.1f} {row['peak_mib']:>9.0f} {'':>9}")
    for name, row in results["test"].items():
        print(f"{name:<20} {row['seconds']:>9.2f} {row['peak_mib']:>9.0f} {row['accuracy']:>9.4f}")
    print(
        f"learn: skcrf {learn_speedup:.1f}x {reference_learn}; "
        f"test: {test_speedup:.1f}x {reference_test}"
    )
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
