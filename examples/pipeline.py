"""
A featurizer and CRF pipeline on raw words
==========================================

The pipeline ``make_pipeline(SequenceFeaturizer(), CRFTagger())`` takes
sentences as plain lists of words: SequenceFeaturizer turns each word into a
dict of features (the word, its shape, affixes and its neighbours within
``window``), and CRFTagger learns the POS tags. Because both are scikit-learn
estimators, GridSearchCV tunes a featurizer parameter and a CRF parameter
together (``sequencefeaturizer__window``, ``crftagger__c2``), refeaturizing
inside every cross-validation fold. The full run (12 fits of 50 iterations)
takes a few minutes on two cores. With ``--plot`` it draws the
cross-validated accuracy of every candidate::

    python examples/pipeline.py
    python examples/pipeline.py --window 1 2 3 --c2 0.01 0.1
    python examples/pipeline.py --max-sentences 300 --max-iterations 30   # quick
    python examples/pipeline.py --plot                                    # the figure

The data comes from NLTK's data path; when it is missing the script calls
nltk.download('treebank'). Without network access, set NLTK_DATA to a folder
that holds corpora/treebank.zip.
"""

import argparse
import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline

from skcrf import CRFTagger, SequenceFeaturizer
from skcrf.datasets import load_treebank
from skcrf.metrics import flat_accuracy_score, flat_f1_score, sequence_accuracy_score


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument(
        "--window", type=int, nargs="+", default=[1, 2], help="featurizer context windows to try"
    )
    parser.add_argument(
        "--c2", type=float, nargs="+", default=[0.01, 0.1], help="L2 coefficients to try"
    )
    parser.add_argument("--c1", type=float, default=0.1, help="fixed L1 coefficient")
    parser.add_argument("--cv", type=int, default=3, help="number of folds")
    parser.add_argument(
        "--max-iterations",
        type=int,
        default=50,
        help="L-BFGS iterations per fit (bounded to keep the search short)",
    )
    parser.add_argument(
        "--n-jobs", type=int, default=-1, help="parallel fits of the search (-1: all cores)"
    )
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
        "--plot", action="store_true", help="draw the cross-validated accuracy of every candidate"
    )
    return parser.parse_args(argv)


def words_and_tags(tagged_sentences):
    """Split tagged sentences into raw word lists (the input) and tag lists."""
    words = [[word for word, _ in sentence] for sentence in tagged_sentences]
    tags = [[tag for _, tag in sentence] for sentence in tagged_sentences]
    return words, tags


def main(argv=None):
    args = parse_args(argv)
    try:
        train, test = load_treebank(max_sentences=args.max_sentences)
    except LookupError as exc:
        sys.exit(str(exc))
    X_train, y_train = words_and_tags(train)
    X_test, y_test = words_and_tags(test)
    print(
        f"train: {len(X_train)} sentences, {sum(map(len, X_train))} tokens; "
        f"test: {len(X_test)} sentences, {sum(map(len, X_test))} tokens"
    )
    print("first training sentence (the pipeline's input):", X_train[0][:8], "...")

    pipeline = make_pipeline(
        SequenceFeaturizer(),
        CRFTagger(c1=args.c1, max_iterations=args.max_iterations, all_possible_transitions=True),
    )
    print(pipeline)
    grid = {"sequencefeaturizer__window": args.window, "crftagger__c2": args.c2}
    # scoring=None: the pipeline's score, i.e. CRFTagger.score (token accuracy);
    # integer cv: KFold over the sentences (CRFTagger is not a classifier).
    search = GridSearchCV(pipeline, grid, cv=args.cv, n_jobs=args.n_jobs)
    start = time.perf_counter()
    with warnings.catch_warnings():
        # With a bounded number of iterations most fits stop before
        # converging; that is intended here.
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X_train, y_train)
    print(
        f"grid search: {len(search.cv_results_['params'])} candidates x {args.cv} "
        f"folds in {time.perf_counter() - start:.1f} s\n"
    )

    results = search.cv_results_
    print(f"{'rank':>4}  {'window':>6}  {'c2':>8}  {'cv token accuracy':>20}")
    for i in sorted(range(len(results["params"])), key=lambda i: results["rank_test_score"][i]):
        params = results["params"][i]
        print(
            f"{results['rank_test_score'][i]:>4}  "
            f"{params['sequencefeaturizer__window']:>6}  {params['crftagger__c2']:>8g}  "
            f"{results['mean_test_score'][i]:>11.4f} ± {results['std_test_score'][i]:.4f}"
        )

    print(
        f"\nbest params: {search.best_params_} (mean cv token accuracy {search.best_score_:.4f})"
    )
    best = search.best_estimator_
    tagger = best.named_steps["crftagger"]
    print(
        f"best model: {len(tagger.vectorizer_.feature_names_)} attributes, "
        f"{tagger.n_features_} features, {tagger.n_iter_} iterations"
    )

    y_pred = search.predict(X_test)  # raw word lists in, tag lists out
    print(f"\ntest token accuracy: {flat_accuracy_score(y_test, y_pred):.4f}")
    print(f"test macro F1: {flat_f1_score(y_test, y_pred, average='macro', zero_division=0):.4f}")
    print(f"test sentence accuracy: {sequence_accuracy_score(y_test, y_pred):.4f}")

    words = args.sentence.split()
    tags = search.predict([words])[0]
    print("tagged:", " ".join(f"{w}/{t}" for w, t in zip(words, tags)))

    if args.plot:
        plot_scores(results)
        show_figures()


def plot_scores(results):
    """Cross-validated accuracy against the window, one line per c2."""
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6, 4))
    by_c2 = {}
    for params, mean, std in zip(
        results["params"], results["mean_test_score"], results["std_test_score"]
    ):
        by_c2.setdefault(params["crftagger__c2"], []).append(
            (params["sequencefeaturizer__window"], mean, std)
        )
    for c2, points in sorted(by_c2.items()):
        points.sort()
        axis.errorbar(
            [p[0] for p in points],
            [p[1] for p in points],
            yerr=[p[2] for p in points],
            marker="o",
            capsize=3,
            label=f"c2={c2:g}",
        )
    axis.set_xlabel("SequenceFeaturizer window")
    axis.set_xticks(sorted({p[0] for points in by_c2.values() for p in points}))
    axis.set_ylabel("cross-validated token accuracy")
    axis.set_title("Tuning the featurizer and the CRF together")
    axis.legend()
    fig.tight_layout()


def show_figures():
    """Show the figures on an interactive backend (not on Agg, nor in the docs build)."""
    import matplotlib
    import matplotlib.pyplot as plt

    if matplotlib.get_backend().lower() != "agg":
        plt.show()


if __name__ == "__main__":
    main()
