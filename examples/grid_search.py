"""Grid search over the CRF's L1/L2 coefficients on the NLTK Penn Treebank sample.

Cross-validates a CRFTagger for every (c1, c2) pair of a small grid with
scikit-learn's GridSearchCV on the training sentences (the Treebank task),
prints the cv_results_ table, then scores the refitted best model on the test
sentences.

    python examples/grid_search.py
    python examples/grid_search.py --c1 0 0.1 --c2 0.01 0.1 1 --cv 5
    python examples/grid_search.py --max-sentences 300 --max-iterations 30   # quick

The search runs the folds and candidates in parallel processes (--n-jobs);
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
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--c1", type=float, nargs="+", default=[0.05, 0.25],
                        help="L1 coefficients to try")
    parser.add_argument("--c2", type=float, nargs="+", default=[0.01, 0.1, 1.0],
                        help="L2 coefficients to try")
    parser.add_argument("--cv", type=int, default=3, help="number of folds")
    parser.add_argument(
        "--max-iterations", type=int, default=50,
        help="L-BFGS iterations per fit (bounded to keep the search short)",
    )
    parser.add_argument("--n-jobs", type=int, default=-1,
                        help="parallel fits of the search (-1: all cores)")
    parser.add_argument(
        "--max-sentences", type=int, default=None,
        help="use only this many training and test sentences (a quick run)",
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
    print(f"train: {len(X_train)} sentences, {sum(map(len, X_train))} tokens; "
          f"test: {len(X_test)} sentences, {sum(map(len, X_test))} tokens")

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
        tagger, grid, scoring=scoring, refit="accuracy",
        cv=args.cv, n_jobs=args.n_jobs,
    )
    n_fits = args.cv * len(args.c1) * len(args.c2)
    print(f"grid search: {len(args.c1) * len(args.c2)} candidates x {args.cv} folds "
          f"= {n_fits} fits (max_iterations={args.max_iterations}, n_jobs={args.n_jobs})")
    start = time.perf_counter()
    with warnings.catch_warnings():
        # With a bounded number of iterations most fits stop before
        # converging; that is intended here.
        warnings.simplefilter("ignore", ConvergenceWarning)
        search.fit(X_train, y_train)
    print(f"search: {time.perf_counter() - start:.1f} s\n")

    print_results(search.cv_results_)

    best = search.best_estimator_
    print(f"\nbest params: {search.best_params_} "
          f"(mean cv token accuracy {search.best_score_:.4f})")
    print(f"best model: {best.n_iter_} iterations, stopped: {best.status_.name}, "
          f"{best.n_features_} features")

    y_pred = search.predict(X_test)
    print(f"\ntest token accuracy: {flat_accuracy_score(y_test, y_pred):.4f}")
    for average in ("macro", "weighted"):
        precision = flat_precision_score(y_test, y_pred, average=average, zero_division=0)
        recall = flat_recall_score(y_test, y_pred, average=average, zero_division=0)
        f1 = flat_f1_score(y_test, y_pred, average=average, zero_division=0)
        print(f"test {average:8} precision {precision:.4f}  recall {recall:.4f}  "
              f"F1 {f1:.4f}")
    print(f"test sentence accuracy: {sequence_accuracy_score(y_test, y_pred):.4f}")


def print_results(results):
    """The cv_results_ table, best candidate first."""
    columns = ("accuracy", "f1_macro", "sentence_accuracy")
    header = f"{'rank':>4}  {'c1':>8}  {'c2':>8}"
    header += "".join(f"  {name + ' (mean ± std)':>28}" for name in columns)
    header += f"  {'fit time':>8}"
    print(header)
    order = sorted(range(len(results["params"])),
                   key=lambda i: (results["rank_test_accuracy"][i], i))
    for i in order:
        params = results["params"][i]
        line = f"{results['rank_test_accuracy'][i]:>4}  {params['c1']:>8g}  {params['c2']:>8g}"
        for name in columns:
            mean = results[f"mean_test_{name}"][i]
            std = results[f"std_test_{name}"][i]
            line += f"  {f'{mean:.4f} ± {std:.4f}':>28}"
        line += f"  {results['mean_fit_time'][i]:>7.1f}s"
        print(line)


if __name__ == "__main__":
    main()
