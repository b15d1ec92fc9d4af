"""
Label weights for rare tags: ``class_weight='balanced'``
========================================================

Trains :class:`~skcrf.CRFTagger` twice on the training sentences of the
Treebank task, without and with ``class_weight='balanced'`` (each token's
term of the objective weighted by ``n_tokens / (n_labels * count(label))``
of its gold tag, so that every tag weighs as much in total), and prints
the test recall and precision of the rarest tags (those with fewer than
``--rare`` training tokens that occur in the test sentences), their macro
averages, and the overall token accuracy of both models. ``--plot PATH``
saves a bar chart of the per-tag recall::

    python examples/class_weight.py
    python examples/class_weight.py --plot class_weight.png
    python examples/class_weight.py --max-sentences 300 --max-iterations 50   # a few seconds

Rare tags are recognized more often with the weights (higher recall),
at some cost in precision on them and, usually, a little overall accuracy:
the weights trade errors on frequent tags for errors on rare ones. The
weighted objective (defined in the user guide's mathematics page) is each
token's ``-log p(y_t | y_{t-1}, x)`` times its weight; with every weight 1
it is the usual log-likelihood.

The data comes from NLTK's data path; when it is missing the script calls
nltk.download('treebank'). Without network access, set NLTK_DATA to a
folder that holds corpora/treebank.zip.
"""

import argparse
import sys
import time
import warnings
from collections import Counter

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger
from skcrf.datasets import load_treebank, treebank_sentence_features
from skcrf.metrics import flat_accuracy_score


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument("--c2", type=float, default=0.1, help="L2 coefficient")
    parser.add_argument(
        "--rare", type=int, default=60, help="a tag with fewer training tokens is rare"
    )
    parser.add_argument("--max-iterations", type=int, default=None)
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument("--plot", metavar="PATH", default=None, help="save a bar chart (PNG)")
    return parser.parse_args(argv)


def per_tag(y_true, y_pred, tags):
    """Recall and precision of each tag (nan where undefined)."""
    true = [t for s in y_true for t in s]
    pred = [p for s in y_pred for p in s]
    result = {}
    for tag in tags:
        hits = sum(1 for t, p in zip(true, pred) if t == tag and p == tag)
        n_true, n_pred = true.count(tag), pred.count(tag)
        result[tag] = (
            hits / n_true if n_true else float("nan"),
            hits / n_pred if n_pred else float("nan"),
        )
    return result


def main(argv=None):
    args = parse_args(argv)
    try:
        train, test = load_treebank(max_sentences=args.max_sentences)
    except LookupError as exc:
        sys.exit(str(exc))
    X_train, y_train = treebank_sentence_features(train)
    X_test, y_test = treebank_sentence_features(test)
    counts = Counter(t for s in y_train for t in s)
    in_test = {t for s in y_test for t in s}
    rare = sorted((t for t, n in counts.items() if n < args.rare and t in in_test), key=counts.get)
    print(
        f"train: {len(X_train)} sentences, {sum(counts.values())} tokens, {len(counts)} tags; "
        f"{len(rare)} rare tags (< {args.rare} training tokens, present in the test part)\n"
    )

    results = {}
    for class_weight in (None, "balanced"):
        tagger = CRFTagger(
            c2=args.c2,
            max_iterations=args.max_iterations,
            n_jobs=args.n_jobs,
            class_weight=class_weight,
        )
        start = time.perf_counter()
        with warnings.catch_warnings():
            # --max-iterations may stop a fit before it converges: intended.
            warnings.simplefilter("ignore", ConvergenceWarning)
            tagger.fit(X_train, y_train)
        seconds = time.perf_counter() - start
        predicted = tagger.predict(X_test)
        results[class_weight] = (
            per_tag(y_test, predicted, rare),
            flat_accuracy_score(y_test, predicted),
            seconds,
        )

    plain, weighted = results[None][0], results["balanced"][0]
    print(f"{'tag':<8}{'train':>6}   recall: none  balanced   precision: none  balanced")
    for tag in rare:
        print(
            f"{tag:<8}{counts[tag]:>6}{plain[tag][0]:>14.3f}{weighted[tag][0]:>10.3f}"
            f"{plain[tag][1]:>17.3f}{weighted[tag][1]:>10.3f}"
        )
    for name, index in (("recall", 0), ("precision", 1)):
        means = [np.nanmean([r[tag][index] for tag in rare]) for r in (plain, weighted)]
        print(f"macro {name} over the rare tags: none {means[0]:.3f}, balanced {means[1]:.3f}")
    for class_weight, (_, accuracy, seconds) in results.items():
        print(
            f"class_weight={class_weight!r}: test token accuracy {accuracy:.4f}, "
            f"fit {seconds:.1f} s"
        )

    if args.plot:
        plot_recall(rare, counts, plain, weighted, args.plot)
        print(f"saved {args.plot}")


def plot_recall(rare, counts, plain, weighted, path):
    """Bars of the test recall of each rare tag, without and with the weights."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(rare))
    fig, axis = plt.subplots(figsize=(max(6.0, 0.6 * len(rare) + 2), 4))
    axis.bar(x - 0.2, [plain[t][0] for t in rare], 0.4, label="class_weight=None")
    axis.bar(x + 0.2, [weighted[t][0] for t in rare], 0.4, label="class_weight='balanced'")
    axis.set_xticks(x, [f"{t}\n({counts[t]})" for t in rare], fontsize=8)
    axis.set_ylabel("test recall")
    axis.set_ylim(0, 1.05)
    axis.set_title("Rare tags (training tokens in brackets)")
    axis.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
