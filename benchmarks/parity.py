"""Parity with CRFsuite on the full Treebank tasks: final objective and predictions.

    python benchmarks/parity.py            # both tasks, about 12 minutes on 2 cores
    python benchmarks/parity.py --task seed

Trains sklearn-crfsuite and skcrf with the same settings (the Treebank task,
all_possible_transitions=True) and prints, per setting, both engines' final
objective (from their logs), the relative difference, the share of test
tokens on which their predictions agree and both test accuracies, as a
Markdown table per task.
"""

import argparse
import warnings

import numpy as np
import sklearn_crfsuite
from _tasks import load_task
from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger

SETTINGS = {
    "seed": [(0.1, 0.1, 100), (0.0, 1.0, None), (0.1, 0.1, None)],
    # (c1 > 0 to convergence on the window task takes CRFsuite several minutes)
    "window": [(0.1, 0.1, 100), (0.0, 1.0, None)],
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=(*SETTINGS, "both"), default="both")
    tasks = list(SETTINGS) if (task := parser.parse_args().task) == "both" else [task]
    for task in tasks:
        print(f"\n## {task} features\n", flush=True)
        compare(task)


def compare(task):
    X, y, X_test, y_test = load_task(task)
    truth = np.array([tag for tags in y_test for tag in tags])
    print(
        "| c1 | c2 | max_iterations | CRFsuite loss (iterations) | skcrf loss (iterations) "
        "| relative difference | test-token agreement | accuracy CRFsuite / skcrf |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for c1, c2, max_iterations in SETTINGS[task]:
        params = dict(c1=c1, c2=c2, max_iterations=max_iterations, all_possible_transitions=True)
        reference = sklearn_crfsuite.CRF(algorithm="lbfgs", **params).fit(X, y)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            tagger = CRFTagger(n_jobs=-1, **params).fit(X, y)
        theirs = np.array([tag for tags in reference.predict(X_test) for tag in tags])
        ours = np.array([tag for tags in tagger.predict(X_test) for tag in tags])
        loss_c = reference.training_log_.last_iteration["loss"]
        loss_s = tagger.training_log_.last_iteration["loss"]
        print(
            f"| {c1} | {c2} | {max_iterations} "
            f"| {loss_c:.6f} ({len(reference.training_log_.iterations)}) "
            f"| {loss_s:.6f} ({tagger.n_iter_}) | {(loss_s - loss_c) / loss_c:.1e} "
            f"| {np.mean(ours == theirs):.5f} "
            f"| {np.mean(theirs == truth):.4f} / {np.mean(ours == truth):.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
