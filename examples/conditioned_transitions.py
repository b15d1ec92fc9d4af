"""
Transitions that depend on the input: ``'__transition__'`` attributes
======================================================================

A linear-chain CRF scores each pair of neighbouring tags with one weight,
whatever the words. A *transition attribute* (CRF++'s bigram templates)
makes that score depend on the input: here every token gets the previous
word as a transition attribute, so the model learns, for instance, how
much likelier a determiner followed by a noun is after one word than after
another.

Trains :class:`~skcrf.CRFTagger` twice on the Treebank task's training
sentences (its seed features), without and with the attribute, and prints
the test accuracy of both, the number of input-conditioned transition
features and the strongest of them. ``--plot PATH`` saves, for two
previous words, the change they make to the transition scores between the
most frequent tags (``conditioned_transition_features_``)::

    python examples/conditioned_transitions.py
    python examples/conditioned_transitions.py --plot conditioned.png
    python examples/conditioned_transitions.py --max-sentences 300 --max-iterations 50

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
    parser.add_argument("--max-iterations", type=int, default=None)
    parser.add_argument("--max-sentences", type=int, default=None)
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument("--words", nargs=2, default=["the", "to"], help="words to plot")
    parser.add_argument("--plot", metavar="PATH", default=None, help="save a figure (PNG)")
    return parser.parse_args(argv)


def with_previous_word(X, sentences):
    """Each token's dict plus the previous word (lower-cased) as a transition attribute."""
    return [
        [
            {**token, "__transition__": {"prev": words[t - 1][0].lower()}} if t else token
            for t, token in enumerate(seq)
        ]
        for seq, words in zip(X, sentences)
    ]


def main(argv=None):
    args = parse_args(argv)
    try:
        train, test = load_treebank(max_sentences=args.max_sentences)
    except LookupError as exc:
        sys.exit(str(exc))
    X_train, y_train = treebank_sentence_features(train)
    X_test, y_test = treebank_sentence_features(test)
    data = {
        "plain": (X_train, X_test),
        "previous word": (with_previous_word(X_train, train), with_previous_word(X_test, test)),
    }
    taggers = {}
    for name, (X_fit, X_eval) in data.items():
        tagger = CRFTagger(c2=args.c2, max_iterations=args.max_iterations, n_jobs=args.n_jobs)
        start = time.perf_counter()
        with warnings.catch_warnings():
            # --max-iterations may stop a fit before it converges: intended.
            warnings.simplefilter("ignore", ConvergenceWarning)
            tagger.fit(X_fit, y_train)
        seconds = time.perf_counter() - start
        accuracy = flat_accuracy_score(y_test, tagger.predict(X_eval))
        conditioned = tagger.conditioned_transition_features_
        print(
            f"{name}: test token accuracy {accuracy:.4f}, {tagger.n_features_} features "
            f"({len(conditioned)} input-conditioned transitions), fit {seconds:.1f} s"
        )
        taggers[name] = tagger

    conditioned = taggers["previous word"].conditioned_transition_features_
    print("\nstrongest input-conditioned transitions (previous word: tag -> tag):")
    for (attribute, source, target), weight in sorted(
        conditioned.items(), key=lambda item: -abs(item[1])
    )[:10]:
        print(f"  {attribute:<16} {source:>6} -> {target:<6} {weight:+.3f}")

    if args.plot:
        counts = Counter(t for s in y_train for t in s)
        plot_changes(conditioned, counts, args.words, args.plot)
        print(f"saved {args.plot}")


def plot_changes(conditioned, counts, words, path):
    """Heat maps of the transition score changes that two previous words make.

    For each word, between the tags of its strongest features (at most 8).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(words), figsize=(5 * len(words), 4.4), layout="constrained")
    limit = max([abs(w) for w in conditioned.values()] + [1e-9])
    for axis, word in zip(np.atleast_1d(axes), words):
        # the tags of the word's strongest features first, at most 8
        strongest = sorted(
            ((w, i, j) for (a, i, j), w in conditioned.items() if a == f"prev:{word}"),
            key=lambda item: -abs(item[0]),
        )
        tags = list(dict.fromkeys(tag for _, i, j in strongest for tag in (i, j)))[:8]
        tags.sort(key=lambda tag: -counts[tag])
        change = np.zeros((len(tags), len(tags)))
        for i, source in enumerate(tags):
            for j, target in enumerate(tags):
                change[i, j] = conditioned.get((f"prev:{word}", source, target), 0.0)
        image = axis.imshow(change, cmap="RdBu_r", vmin=-limit, vmax=limit)
        axis.set_xticks(range(len(tags)), tags, rotation=90, fontsize=8)
        axis.set_yticks(range(len(tags)), tags, fontsize=8)
        axis.set_xlabel("tag")
        axis.set_ylabel("previous tag")
        axis.set_title(f"after the word {word!r}")
    fig.colorbar(image, ax=axes, shrink=0.8, label="change of the transition score")
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
