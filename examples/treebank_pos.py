"""
Part-of-speech tagging of the NLTK Penn Treebank sample
=======================================================

Trains a :class:`~skcrf.CRFTagger` on the first 80% of the treebank sentences
(the Treebank task), prints the test accuracy, a per-tag classification
report, the most informative state features and transitions, and tags a
sentence. The task's seed features are given as a template
(:func:`skcrf.templates.treebank_seed_spec` in a
:class:`~skcrf.TemplateFeaturizer`): the tagger takes the raw words and
featurizes them in compiled code. ``--features dicts`` builds the same
features as Python dicts instead (:func:`skcrf.datasets.treebank_token_features`),
the same model. With ``--plot`` it draws the learning curve (training objective and
test accuracy at every L-BFGS iteration, from ``training_log_``), the
strongest state-feature weights and the transition weights as a heatmap::

    python examples/treebank_pos.py
    python examples/treebank_pos.py --sentence "The cat sat on the mat ."
    python examples/treebank_pos.py --plot          # the figures, saved as PNG files
    python examples/treebank_pos.py --features dicts  # feature dicts built in Python

The data comes from NLTK's data path; when it is missing the script calls
nltk.download('treebank'). Without network access, set NLTK_DATA to a folder
that holds corpora/treebank.zip.
"""

import argparse
import sys
import time
import warnings
from collections import Counter

from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger, TemplateFeaturizer
from skcrf.datasets import load_treebank, treebank_sentence_features, treebank_token_features
from skcrf.metrics import flat_accuracy_score, flat_classification_report
from skcrf.templates import treebank_seed_spec


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
        default="The quick brown fox jumps over the lazy dog .",
        help="a sentence to tag (words separated by spaces)",
    )
    parser.add_argument(
        "--features",
        choices=("template", "dicts"),
        default="template",
        help="the seed features as a compiled template (raw words in) or as Python dicts",
    )
    parser.add_argument("--top", type=int, default=10, help="features to show")
    parser.add_argument("--plot", action="store_true", help="draw the figures")
    parser.add_argument(
        "--plot-prefix",
        default="treebank_pos",
        help="save the figures as PREFIX_*.png ('' draws them only)",
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        train, test = load_treebank(max_sentences=args.max_sentences)
    except LookupError as exc:
        sys.exit(str(exc))
    if args.features == "template":
        # raw words: the tagger's featurizer turns them into the seed features
        X_train, y_train = [[w for w, _ in s] for s in train], [[t for _, t in s] for s in train]
        X_test, y_test = [[w for w, _ in s] for s in test], [[t for _, t in s] for s in test]
        featurizer = TemplateFeaturizer(treebank_seed_spec())
    else:
        X_train, y_train = treebank_sentence_features(train)
        X_test, y_test = treebank_sentence_features(test)
        featurizer = None
    print(
        f"train: {len(X_train)} sentences, {sum(map(len, X_train))} tokens; "
        f"test: {len(X_test)} sentences, {sum(map(len, X_test))} tokens; "
        f"features: {args.features}"
    )

    tagger = CRFTagger(
        c1=args.c1,
        c2=args.c2,
        max_iterations=args.max_iterations,
        all_possible_transitions=True,
        n_jobs=args.n_jobs,
        featurizer=featurizer,
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        # 100 iterations stop before convergence on purpose (the reference
        # setting); the status is printed below.
        warnings.simplefilter("ignore", ConvergenceWarning)
        tagger.fit(X_train, y_train, X_dev=X_test, y_dev=y_test)
    fit_seconds = time.perf_counter() - start
    log = tagger.training_log_
    print(
        f"fit: {fit_seconds:.1f} s (with the test accuracy logged at every iteration), "
        f"{tagger.n_iter_} iterations, "
        f"final loss {log.last_iteration['loss']:.2f}, stopped: {tagger.status_.name}"
    )

    y_pred = tagger.predict(X_test)
    print(f"test token accuracy: {flat_accuracy_score(y_test, y_pred):.4f}\n")
    print(flat_classification_report(y_test, y_pred, digits=3, zero_division=0))

    show_features(tagger, args.top)

    words = args.sentence.split()
    if featurizer is not None:
        tags = tagger.predict_single(words)
    else:
        features = [treebank_token_features(words, i) for i in range(len(words))]
        tags = tagger.predict_single(features)
    print("tagged:", " ".join(f"{w}/{t}" for w, t in zip(words, tags)))

    if args.plot:
        save_plots(tagger, args.plot_prefix, args.top)
        show_figures()


def show_features(tagger, top):
    states = Counter(tagger.state_features_)
    transitions = Counter(tagger.transition_features_)
    print(f"Top {top} state features:")
    for (attribute, label), weight in states.most_common(top):
        print(f"  {weight:8.3f}  {label:6} {attribute}")
    print(f"Top {top} negative state features:")
    for (attribute, label), weight in states.most_common()[: -top - 1 : -1]:
        print(f"  {weight:8.3f}  {label:6} {attribute}")
    print(f"Top {top} transitions:")
    for (label_from, label_to), weight in transitions.most_common(top):
        print(f"  {weight:8.3f}  {label_from:6} -> {label_to}")
    print()


def save_plots(tagger, prefix, top=10):
    """Learning curve, feature weights and transition heatmap (saved unless prefix is '')."""
    import matplotlib.pyplot as plt

    figures = {}
    iterations = tagger.training_log_.iterations
    nums = [it["num"] for it in iterations]
    fig, loss_axis = plt.subplots(figsize=(7, 4))
    loss_axis.plot(nums, [it["loss"] for it in iterations], color="tab:blue")
    loss_axis.set_yscale("log")
    loss_axis.set_xlabel("L-BFGS iteration")
    loss_axis.set_ylabel("training objective", color="tab:blue")
    dev_axis = loss_axis.twinx()
    dev_axis.plot(nums, [it["dev_accuracy"] for it in iterations], color="tab:orange")
    dev_axis.set_ylabel("test token accuracy", color="tab:orange")
    dev_axis.set_ylim(0.5, 1.0)
    loss_axis.set_title("Learning curve")
    fig.tight_layout()
    figures["learning_curve"] = fig

    states = Counter(tagger.state_features_)
    strongest = states.most_common(top) + states.most_common()[: -top - 1 : -1][::-1]
    fig, axis = plt.subplots(figsize=(7, 0.3 * len(strongest) + 1.2))
    names = [f"{attribute} → {label}" for (attribute, label), _ in strongest]
    weights = [weight for _, weight in strongest]
    axis.barh(
        range(len(weights)), weights, color=["tab:red" if w < 0 else "tab:green" for w in weights]
    )
    axis.set_yticks(range(len(names)), names, fontsize=8)
    axis.invert_yaxis()
    axis.axvline(0, color="black", linewidth=0.8)
    axis.set_xlabel("state feature weight")
    axis.set_title(f"The {top} strongest positive and negative state features")
    fig.tight_layout()
    figures["state_features"] = fig

    labels = [str(label) for label in tagger.classes_]
    fig, axis = plt.subplots(figsize=(9, 8))
    limit = abs(tagger.transition_).max() or 1.0
    image = axis.imshow(tagger.transition_, cmap="RdBu_r", vmin=-limit, vmax=limit)
    axis.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
    axis.set_yticks(range(len(labels)), labels, fontsize=7)
    axis.set_xlabel("to")
    axis.set_ylabel("from")
    axis.set_title("Transition weights")
    fig.colorbar(image, ax=axis, shrink=0.8, label="transition weight")
    fig.tight_layout()
    figures["transitions"] = fig
    if prefix:
        for name, figure in figures.items():
            figure.savefig(f"{prefix}_{name}.png", dpi=120)
        print(f"saved {', '.join(f'{prefix}_{name}.png' for name in figures)}")


def show_figures():
    """Show the figures on an interactive backend (not on Agg, nor in the docs build)."""
    import matplotlib
    import matplotlib.pyplot as plt

    if matplotlib.get_backend().lower() != "agg":
        plt.show()


if __name__ == "__main__":
    main()
