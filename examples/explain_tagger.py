"""
Why this tag? Explaining a part-of-speech tagger's decisions
============================================================

Trains a :class:`~skcrf.CRFTagger` on the Treebank task (a slice of it with
``--max-sentences``), then explains how it tags a sentence with
:meth:`~skcrf.CRFTagger.explain`: for each token, the state-feature terms
(weight x value) that push the predicted tag, those of the runner-up tag
(the next most probable one at that token), and the transition into the
token. It prints the strongest features of the model
(:meth:`~skcrf.CRFTagger.top_features`) and, with ``--plot``, draws the
terms of the token the model is least sure of, for its tag and the
runner-up: the strongest state terms and the transitions to the neighbours'
tags (the sums include every term)::

    python examples/explain_tagger.py
    python examples/explain_tagger.py --sentence "Time flies like an arrow ."
    python examples/explain_tagger.py --plot

The data comes from NLTK's data path; when it is missing the script calls
nltk.download('treebank'). Without network access, set NLTK_DATA to a folder
that holds corpora/treebank.zip.
"""

import argparse
import sys
import warnings

from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger
from skcrf.datasets import load_treebank, treebank_sentence_features, treebank_token_features


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument("--c1", type=float, default=0.1)
    parser.add_argument("--c2", type=float, default=0.1)
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=None,
        help="use only this many training and test sentences (a quick run)",
    )
    parser.add_argument(
        "--sentence",
        default="The old man the boats .",
        help="a sentence to explain (words separated by spaces)",
    )
    parser.add_argument("--top", type=int, default=5, help="terms and features to show")
    parser.add_argument("--plot", action="store_true", help="draw the figure")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        train, _ = load_treebank(max_sentences=args.max_sentences)
    except LookupError as exc:
        sys.exit(str(exc))
    X_train, y_train = treebank_sentence_features(train)
    tagger = CRFTagger(
        c1=args.c1,
        c2=args.c2,
        max_iterations=args.max_iterations,
        all_possible_transitions=True,
        n_jobs=args.n_jobs,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # a quick run stops early
        tagger.fit(X_train, y_train)
    print(f"trained on {len(X_train)} sentences")

    top = tagger.top_features(args.top)
    print(f"Top {args.top} state features (by |weight|):")
    for attribute, label, weight in top["state"]:
        print(f"  {weight:8.3f}  {label:6} {attribute}")
    print(f"Top {args.top} transitions:")
    for source, label, weight in top["transition"]:
        print(f"  {weight:8.3f}  {source:6} -> {label}")

    words = args.sentence.split()
    xseq = [treebank_token_features(words, i) for i in range(len(words))]
    explanation = tagger.explain(xseq)
    print("\nexplained:", " ".join(f"{w}/{t['label']}" for w, t in zip(words, explanation)))
    for word, token in zip(words, explanation):
        print(
            f"{word:>10} {token['label']:5} p={token['probability']:.2f}"
            f"  (runner-up {token['runner_up']} p={token['runner_up_probability']:.2f})"
        )
        for attribute, _, term in token["state"][: args.top]:
            print(f"{'':18}{term:+7.3f}  {attribute}")
        if token["transition"] is not None:
            source, _, weight = token["transition"]
            print(f"{'':18}{weight:+7.3f}  transition from {source}")

    # the token the model is least sure of
    hardest = min(explanation, key=lambda token: token["probability"])
    print(f"\nleast sure: {words[hardest['position']]!r} ({hardest['probability']:.2f})")
    if args.plot:
        plot_token(tagger, words, explanation, hardest, args.top)


def neighbour_terms(tagger, explanation, position, label):
    """The transition terms into and out of ``position`` if it had ``label``."""
    classes = list(tagger.classes_)
    terms = []
    if position > 0:
        previous = explanation[position - 1]["label"]
        weight = tagger.transition_[classes.index(previous), classes.index(label)]
        terms.append((f"transition from {previous}", weight))
    if position + 1 < len(explanation):
        following = explanation[position + 1]["label"]
        weight = tagger.transition_[classes.index(label), classes.index(following)]
        terms.append((f"transition to {following}", weight))
    return terms


def plot_token(tagger, words, explanation, token, top):
    """The terms of the predicted and the runner-up tag of one token.

    Its state terms (the strongest ``top``) and the transitions to its
    neighbours' predicted tags: the two labellings differ by these terms only.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 0.35 * (top + 2) + 1.8), sharex=True)
    for axis, key, label in (
        (axes[0], "state", token["label"]),
        (axes[1], "runner_up_state", token["runner_up"]),
    ):
        transitions = neighbour_terms(tagger, explanation, token["position"], label)
        terms = [(a, c) for a, _, c in token[key][:top]] + transitions
        values = [c for _, c in terms]
        axis.barh(
            range(len(values)),
            values,
            color=["tab:red" if v < 0 else "tab:green" for v in values],
        )
        axis.set_yticks(range(len(values)), [name for name, _ in terms], fontsize=8)
        axis.invert_yaxis()
        axis.axvline(0, color="black", linewidth=0.8)
        total = sum(c for _, _, c in token[key]) + sum(c for _, c in transitions)
        axis.set_title(f"{label}: all terms sum to {total:+.2f}")
        axis.set_xlabel("weight x value")
    fig.suptitle(f"Why {words[token['position']]!r} is {token['label']}, not {token['runner_up']}")
    fig.tight_layout()

    import matplotlib

    if matplotlib.get_backend().lower() != "agg":
        plt.show()


if __name__ == "__main__":
    main()
