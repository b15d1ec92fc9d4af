"""
Early stopping on the NLTK Penn Treebank sample
===============================================

Trains a weakly regularized :class:`~skcrf.CRFTagger` (``c1=0, c2=0.001``) on
the training sentences of the Treebank task twice: with
``early_stopping=True``, which holds out ``validation_fraction`` of the
training sentences, scores them after every iteration (token accuracy, or
``scoring``), stops when the score has not improved by more than ``tol`` for
``n_iter_no_change`` iterations and keeps the weights of the best iteration
(``best_iteration_``); and without it, run until L-BFGS's stopping rules stop
it (or ``--max-iterations``). It prints the iterations, the best iteration,
how each fit stopped, its time and its test accuracy. ``--plot PATH`` saves
the validation accuracy at every iteration, the best iteration marked, next
to the test accuracy of the second fit, and the training loss of both fits::

    python examples/early_stopping.py
    python examples/early_stopping.py --plot early_stopping.png
    python examples/early_stopping.py --algorithm ap     # any trainer: an iteration is an epoch
    python examples/early_stopping.py --quick            # a slice, a few seconds

The early-stopped model is trained on the sentences not held out. Instead of
holding out a part of the training data, you can give your own validation
data: with ``early_stopping=True``, ``fit(X, y, X_dev=X_val, y_dev=y_val)``
trains on all of ``X`` and scores ``X_val`` instead. Without
``early_stopping``, dev data are only scored at every iteration (in
``training_log_``) and never change the model: the second fit logs its test
accuracy that way, to show what training on after the early stop gains.

The full run takes a few minutes on two cores, nearly all of it in the fit
without early stopping. The data comes from NLTK's data path; when it is
missing the script calls nltk.download('treebank'). Without network access,
set NLTK_DATA to a folder that holds corpora/treebank.zip.
"""

import argparse
import sys
import time
import warnings

from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger
from skcrf.datasets import load_treebank, treebank_sentence_features
from skcrf.metrics import flat_accuracy_score

QUICK = {"max_sentences": 300, "max_iterations": 50}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument(
        "--algorithm", default="lbfgs", choices=["lbfgs", "l2sgd", "ap", "pa", "arow"]
    )
    parser.add_argument("--c1", type=float, default=0.0, help="L1 coefficient (lbfgs)")
    parser.add_argument("--c2", type=float, default=1e-3, help="L2 coefficient (lbfgs, l2sgd)")
    parser.add_argument("--validation-fraction", type=float, default=0.1)
    parser.add_argument("--n-iter-no-change", type=int, default=10)
    parser.add_argument("--random-state", type=int, default=0, help="the validation split")
    parser.add_argument(
        "--max-iterations",
        type=int,
        default=None,
        help="iteration limit of both fits (default: the trainer's stopping rules)",
    )
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=None,
        help="use only this many training and test sentences",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"a slice: --max-sentences {QUICK['max_sentences']} "
        f"--max-iterations {QUICK['max_iterations']} unless given",
    )
    parser.add_argument(
        "--plot", metavar="PATH", default=None, help="save the learning curves to PATH (PNG)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            if getattr(args, name) is None:
                setattr(args, name, value)
    return args


def make_tagger(args, **params):
    """A CRFTagger with the regularization its trainer takes (c1: lbfgs; c2: lbfgs, l2sgd)."""
    if args.algorithm in ("lbfgs", "l2sgd"):
        params["c2"] = args.c2
    if args.algorithm == "lbfgs":
        params["c1"] = args.c1
    return CRFTagger(
        algorithm=args.algorithm,
        max_iterations=args.max_iterations,
        all_possible_transitions=True,
        random_state=args.random_state,
        n_jobs=args.n_jobs,
        **params,
    )


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
        f"test: {len(X_test)} sentences, {sum(map(len, X_test))} tokens\n"
    )

    stopped = make_tagger(
        args,
        early_stopping=True,
        validation_fraction=args.validation_fraction,
        n_iter_no_change=args.n_iter_no_change,
    )
    full = make_tagger(args)
    rows = []
    for tagger, dev in ((stopped, {}), (full, {"X_dev": X_test, "y_dev": y_test})):
        start = time.perf_counter()
        with warnings.catch_warnings():
            # --max-iterations may stop a fit before it converges: intended.
            warnings.simplefilter("ignore", ConvergenceWarning)
            tagger.fit(X_train, y_train, **dev)
        seconds = time.perf_counter() - start
        rows.append((tagger, seconds, flat_accuracy_score(y_test, tagger.predict(X_test))))

    print(f"{'':22}iterations  best  stopped by       fit (s)  test accuracy")
    for tagger, seconds, accuracy in rows:
        best = "-" if tagger.best_iteration_ is None else tagger.best_iteration_
        print(
            f"early_stopping={tagger.early_stopping!s:<7}{tagger.n_iter_:>10}{best:>6}  "
            f"{tagger.status_.name:<16}{seconds:>8.1f}{accuracy:>15.4f}"
        )

    best = stopped.training_log_.iterations[stopped.best_iteration_ - 1]
    print(
        f"\nbest iteration {best['num']}: validation accuracy {best['validation_score']:.4f} "
        f"({args.validation_fraction:.0%} of the training sentences, held out)"
    )
    # The second fit's test accuracy at every iteration (its X_dev, which the
    # model never sees): what training on after the early stop would gain.
    curve = [entry["dev_accuracy"] for entry in full.training_log_.iterations]
    stop = min(stopped.n_iter_, len(curve))
    peak = max(range(len(curve)), key=curve.__getitem__) + 1
    print("test accuracy of the fit without early stopping, logged at every iteration:")
    print(
        f"  {curve[stop - 1]:.4f} at iteration {stop} (where the early-stopping fit ended), "
        f"highest {curve[peak - 1]:.4f} (iteration {peak}), last {curve[-1]:.4f} "
        f"(iteration {len(curve)})"
    )

    if args.plot:
        plot_curves(stopped, full, args.plot)
        print(f"saved {args.plot}")


def plot_curves(stopped, full, path):
    """Accuracy per iteration (validation, test), the best iteration marked; training loss."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (score_axis, loss_axis) = plt.subplots(2, 1, sharex=True, figsize=(7, 6))
    curves = (
        (stopped, "validation_score", "validation accuracy (held-out training sentences)"),
        (full, "dev_accuracy", "test accuracy (X_dev: logged, never used by the fit)"),
    )
    for (tagger, key, what), color in zip(curves, ("tab:blue", "tab:orange")):
        log = tagger.training_log_.iterations
        nums = [entry["num"] for entry in log]
        name = f"early_stopping={tagger.early_stopping}"
        score_axis.plot(nums, [entry[key] for entry in log], color=color, label=f"{name}: {what}")
        loss_axis.plot(nums, [entry["loss"] for entry in log], color=color, label=name)
    best = stopped.training_log_.iterations[stopped.best_iteration_ - 1]
    score = best["validation_score"]
    score_axis.plot(best["num"], score, "*", color="tab:red", markersize=14)
    score_axis.annotate(
        f"best iteration {best['num']}",
        (best["num"], score),
        textcoords="offset points",
        xytext=(-10, 12),
        horizontalalignment="right",
        color="tab:red",
    )
    for axis in (score_axis, loss_axis):
        axis.axvline(best["num"], color="tab:red", linestyle="--", linewidth=1)
    score_axis.set_ylim(max(0.0, score - 0.1), 1.0)
    score_axis.set_ylabel("token accuracy")
    score_axis.legend(loc="lower right", fontsize=8)
    score_axis.set_title(f"Early stopping: stopped after {stopped.n_iter_} iterations")
    if full.n_iter_ > 4 * stopped.n_iter_:
        loss_axis.set_xscale("log")  # the early stop and a long tail, both readable
    loss_axis.set_yscale("log")
    loss_axis.set_xlabel("iteration (an epoch for the online trainers)")
    loss_axis.set_ylabel("training loss")
    loss_axis.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")


if __name__ == "__main__":
    main()
