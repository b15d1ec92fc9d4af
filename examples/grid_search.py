"""
Grid search over the L1 and L2 coefficients
===========================================

Cross-validates a :class:`~skcrf.CRFTagger` for every (c1, c2) pair of a
small grid with scikit-learn's :class:`~sklearn.model_selection.GridSearchCV`
on the training sentences of the NLTK Penn Treebank sample, with several
scorers of :mod:`skcrf.metrics` at once, prints the ``cv_results_`` table,
then scores the refitted best model on the test sentences. With ``--plot`` it
draws the mean cross-validated token accuracy over the grid::

    python examples/grid_search.py
    python examples/grid_search.py --c1 0 0.1 --c2 0.01 0.1 1 --cv 5
    python examples/grid_search.py --max-sentences 300 --max-iterations 30   # quick
    python examples/grid_search.py --plot                                    # the figure

The search runs the folds and candidates in parallel processes (``--n-jobs``);
each CRFTagger uses one thread. The full run (18 fits of 50 iterations) takes
about a minute on two cores. The data comes from NLTK's data path; when it
is missing the script calls nltk.download('treebank'). Without network access,
set NLTK_DATA to a folder that holds corpora/treebank.zip.
"""

import argparse
import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import make_scorer
from sklearn.model_selection import GridSearchCV

from skcrf import CRFTagger
from skcrf.datasets import load_treebank, treebank_sentence_features
from skcrf.metrics import (
    flat_accuracy_score,
    flat_f1_score,
    flat_precision_score,
    flat_recall_score,
    get_scorer,
    sequence_accuracy_score,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument(
        "--c1", type=float, nargs="+", default=[0.05, 0.25], help="L1 coefficients to try"
    )
    parser.add_argument(
        "--c2", type=float, nargs="+", default=[0.01, 0.1, 1.0], help="L2 coefficients to try"
    )
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
        "--plot", action="store_true", help="draw the cross-validated scores over the grid"
    )
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        train, test = load_treebank(max_sentences=args.max_sentences)
    except LookupError as exc:
        sys.exit(str(exc))
    X_train, y_train = treebank_sentence_features(train)
    X_test, y_test = treebank_sentence_features(test)
    print(
        f"train: {len(X_train)} sentences, {sum(map(len, X_train))} tokens; "
        f"test: {len(X_test)} sentences, {sum(map(len, X_test))} tokens"
    )

    tagger = CRFTagger(max_iterations=args.max_iterations, all_possible_transitions=True)
    grid = {"c1": args.c1, "c2": args.c2}
    # Scorers work on lists of label sequences (what CRFTagger.predict returns).
    # Several metrics are recorded; the best model is chosen by token accuracy.
    scoring = {
        "accuracy": get_scorer("flat_accuracy"),
        "f1_macro": make_scorer(flat_f1_score, average="macro", zero_division=0),
        "sentence_accuracy": get_scorer("sequence_accuracy"),
    }
    # An integer cv means KFold: CRFTagger is not a classifier, so scikit-learn
    # does not try to stratify the folds on the label sequences.
    search = GridSearchCV(
        tagger,
        grid,
        scoring=scoring,
        refit="accuracy",
        cv=args.cv,
        n_jobs=args.n_jobs,
    )
    n_fits = args.cv * len(args.c1) * len(args.c2)
    print(
        f"grid search: {len(args.c1) * len(args.c2)} candidates x {args.cv} folds "
        f"= {n_fits} fits (max_iterations={args.max_iterations}, n_jobs={args.n_jobs})"
    )
    start = time.perf_counter()
    with warnings.catch_warnings():
        # With a bounded number of iterations most fits stop before
        # converging; that is intended here.
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X_train, y_train)
    print(f"search: {time.perf_counter() - start:.1f} s\n")

    print_results(search.cv_results_)

    best = search.best_estimator_
    print(
        f"\nbest params: {search.best_params_} (mean cv token accuracy {search.best_score_:.4f})"
    )
    print(
        f"best model: {best.n_iter_} iterations, stopped: {best.status_.name}, "
        f"{best.n_features_} features"
    )

    y_pred = search.predict(X_test)
    print(f"\ntest token accuracy: {flat_accuracy_score(y_test, y_pred):.4f}")
    for average in ("macro", "weighted"):
        precision = flat_precision_score(y_test, y_pred, average=average, zero_division=0)
        recall = flat_recall_score(y_test, y_pred, average=average, zero_division=0)
        f1 = flat_f1_score(y_test, y_pred, average=average, zero_division=0)
        print(f"test {average:8} precision {precision:.4f}  recall {recall:.4f}  F1 {f1:.4f}")
    print(f"test sentence accuracy: {sequence_accuracy_score(y_test, y_pred):.4f}")

    if args.plot:
        plot_scores(search.cv_results_, args.c1, args.c2)
        show_figures()


def print_results(results):
    """The cv_results_ table, best candidate first."""
    columns = ("accuracy", "f1_macro", "sentence_accuracy")
    header = f"{'rank':>4}  {'c1':>8}  {'c2':>8}"
    header += "".join(f"  {name + ' (mean ± std)':>28}" for name in columns)
    header += f"  {'fit time':>8}"
    print(header)
    order = sorted(
        range(len(results["params"])), key=lambda i: (results["rank_test_accuracy"][i], i)
    )
    for i in order:
        params = results["params"][i]
        line = f"{results['rank_test_accuracy'][i]:>4}  {params['c1']:>8g}  {params['c2']:>8g}"
        for name in columns:
            mean = results[f"mean_test_{name}"][i]
            std = results[f"std_test_{name}"][i]
            line += f"  {f'{mean:.4f} ± {std:.4f}':>28}"
        line += f"  {results['mean_fit_time'][i]:>7.1f}s"
        print(line)


def plot_scores(results, c1_values, c2_values):
    """Mean cross-validated token accuracy of every (c1, c2) pair, as a heatmap."""
    import matplotlib.pyplot as plt
    import numpy as np

    scores = np.full((len(c1_values), len(c2_values)), np.nan)
    for params, score in zip(results["params"], results["mean_test_accuracy"]):
        scores[c1_values.index(params["c1"]), c2_values.index(params["c2"])] = score
    fig, axis = plt.subplots(figsize=(1.4 * len(c2_values) + 2.5, 1.0 * len(c1_values) + 1.8))
    image = axis.imshow(scores, cmap="viridis")
    axis.set_xticks(range(len(c2_values)), [f"{c:g}" for c in c2_values])
    axis.set_yticks(range(len(c1_values)), [f"{c:g}" for c in c1_values])
    axis.set_xlabel("c2 (L2)")
    axis.set_ylabel("c1 (L1)")
    for i in range(len(c1_values)):
        for j in range(len(c2_values)):
            axis.text(j, i, f"{scores[i, j]:.3f}", ha="center", va="center", color="white")
    axis.set_title("Mean cross-validated token accuracy")
    fig.colorbar(image, ax=axis, label="token accuracy")
    fig.tight_layout()


def show_figures():
    """Show the figures on an interactive backend (not on Agg, nor in the docs build)."""
    import matplotlib
    import matplotlib.pyplot as plt

    if matplotlib.get_backend().lower() != "agg":
        plt.show()


if __name__ == "__main__":
    main()
