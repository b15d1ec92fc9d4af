"""CRFsuite model files both ways on the Treebank task: predictions and marginals agree.

    NLTK_DATA=../shared/nltk_data python benchmarks/roundtrip.py [--task seed|window] [--quick]

1. CRFsuite -> skcrf: sklearn-crfsuite trains a model (c1=0.1, c2=0.1,
   max_iterations=100, all_possible_transitions=True);
   ``CRFTagger.from_crfsuite(crf)`` reads its model file; both predict the
   test part.
2. skcrf -> CRFsuite: skcrf trains with the same settings;
   ``tagger.to_crfsuite(path)`` writes the file that ``pycrfsuite.Tagger``
   opens; both predict the test part.

For each direction the table gives the share of sequences predicted
identically, the token agreement, and the largest absolute difference of a
marginal probability (target: 100% identical, marginals within 1e-6).
Results are written to ``benchmarks/results/roundtrip.json``.
"""

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _tasks import load_task  # noqa: E402

SETTINGS = {"c1": 0.1, "c2": 0.1, "max_iterations": 100, "all_possible_transitions": True}


def agreement(predicted_a, predicted_b, marginals_a, marginals_b):
    """Identical sequences, token agreement and the largest marginal difference."""
    same_sequences = sum(a == b for a, b in zip(predicted_a, predicted_b))
    tokens = [(x, y) for a, b in zip(predicted_a, predicted_b) for x, y in zip(a, b)]
    largest = 0.0
    for seq_a, seq_b in zip(marginals_a, marginals_b):
        for row_a, row_b in zip(seq_a, seq_b):
            assert set(row_a) == set(row_b)
            largest = max(largest, max(abs(row_a[k] - row_b[k]) for k in row_a))
    return {
        "identical_sequences": same_sequences / len(predicted_a),
        "token_agreement": sum(x == y for x, y in tokens) / len(tokens),
        "max_marginal_difference": largest,
    }


def crfsuite_to_skcrf(X_train, y_train, X_test):
    import sklearn_crfsuite

    from skcrf import CRFTagger

    crf = sklearn_crfsuite.CRF(**SETTINGS).fit(X_train, y_train)
    start = time.perf_counter()
    tagger = CRFTagger.from_crfsuite(crf)
    read_seconds = time.perf_counter() - start
    theirs = [crf.predict_single(x) for x in X_test]
    their_marginals = [crf.predict_marginals_single(x) for x in X_test]
    result = agreement(
        tagger.predict(X_test), theirs, tagger.predict_marginals(X_test), their_marginals
    )
    return {**result, "read_seconds": read_seconds, "n_features": tagger.n_features_}


def skcrf_to_crfsuite(X_train, y_train, X_test):
    import pycrfsuite

    from skcrf import CRFTagger

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iterations reached
        tagger = CRFTagger(**SETTINGS).fit(X_train, y_train)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.crfsuite")
        start = time.perf_counter()
        tagger.to_crfsuite(path)
        write_seconds = time.perf_counter() - start
        crf = pycrfsuite.Tagger()
        crf.open(path)
        theirs, their_marginals = [], []
        for x in X_test:
            theirs.append(crf.tag(x))
            their_marginals.append(
                [{label: crf.marginal(label, t) for label in crf.labels()} for t in range(len(x))]
            )
        crf.close()
    result = agreement(
        tagger.predict(X_test), theirs, tagger.predict_marginals(X_test), their_marginals
    )
    return {**result, "write_seconds": write_seconds, "n_features": tagger.n_features_}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=["seed", "window"], default="seed")
    parser.add_argument("--quick", action="store_true", help="a slice of the data")
    parser.add_argument(
        "--output", default=str(Path(__file__).parent / "results" / "roundtrip.json")
    )
    args = parser.parse_args()
    X_train, y_train, X_test, _ = load_task(args.task, quick=args.quick)
    rows = {
        "CRFsuite -> skcrf": crfsuite_to_skcrf(X_train, y_train, X_test),
        "skcrf -> CRFsuite": skcrf_to_crfsuite(X_train, y_train, X_test),
    }
    print(f"Treebank {args.task} task, {len(X_test)} test sentences")
    print(
        f"{'direction':<20} {'identical seqs':>15} {'tokens':>10} {'max |dP|':>10} {'features':>9}"
    )
    for name, row in rows.items():
        print(
            f"{name:<20} {row['identical_sequences']:>14.2%} {row['token_agreement']:>9.2%} "
            f"{row['max_marginal_difference']:>10.1e} {row['n_features']:>9}"
        )
    met = all(
        r["identical_sequences"] == 1.0 and r["max_marginal_difference"] <= 1e-6
        for r in rows.values()
    )
    print("target (100% identical, marginals within 1e-6):", "met" if met else "NOT met")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(
            {
                "task": args.task,
                "quick": args.quick,
                "settings": SETTINGS,
                "rows": rows,
                "target_met": met,
            },
            f,
            indent=2,
        )


if __name__ == "__main__":
    main()
