"""
Word vectors as CRF features
============================

Builds word vectors from the Treebank training sentences themselves (a
truncated SVD of a positive-PMI word co-occurrence matrix, with scikit-learn),
then trains two taggers on the Treebank task with
:class:`~skcrf.SequenceFeaturizer`: its template alone, and the template plus
the vector of each word and of its neighbours (``embeddings=``,
``embedding_window=1``). It prints the test accuracy of both, overall and on
the words never seen in training.

A vector is one feature value, ``{'emb': vector}``: the CRF treats it as the
attributes ``emb[0]`` ... ``emb[d-1]`` (exactly CRFsuite's model with ``d``
scalar keys), but trains it as a dense block through BLAS. The vectors are
wrapped in :class:`skcrf.Embeddings`, which ``clone`` and grid
searches share instead of copying. A word without a vector (every unseen word,
when the vectors come from the training part only) gets the zero vector and
the feature ``emb.unknown``; ``--vectors-from all`` builds the vectors from the
raw text of every sentence instead (no tags are used), as vectors trained on a
large unlabelled corpus would cover most test words::

    python examples/embeddings.py
    python examples/embeddings.py --dim 100 --vectors-from all
"""

import argparse
import time
import warnings
from collections import Counter

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.exceptions import ConvergenceWarning

from skcrf import CRFTagger, Embeddings, SequenceFeaturizer
from skcrf.datasets import load_treebank


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument("--dim", type=int, default=50, help="vector size (SVD components)")
    parser.add_argument("--context", type=int, default=2, help="co-occurrence window")
    parser.add_argument("--vectors-from", choices=["train", "all"], default="train")
    parser.add_argument("--c1", type=float, default=0.1)
    parser.add_argument("--c2", type=float, default=0.1)
    parser.add_argument("--max-iterations", type=int, default=100)
    parser.add_argument("--n-jobs", type=int, default=-1)
    parser.add_argument(
        "--max-sentences",
        type=int,
        default=None,
        help="use only the first N training and N/4 test sentences",
    )
    return parser.parse_args(argv)


def word_vectors(sentences, dim, context, seed=0):
    """Vectors of the lower-cased words: SVD of the PPMI co-occurrence matrix."""
    words = [[w.lower() for w in sentence] for sentence in sentences]
    vocabulary = {w: k for k, w in enumerate(sorted({w for s in words for w in s}))}
    rows, cols = [], []
    for sentence in words:
        ids = [vocabulary[w] for w in sentence]
        for i, a in enumerate(ids):
            for j in range(max(0, i - context), min(len(ids), i + context + 1)):
                if j != i:
                    rows.append(a)
                    cols.append(ids[j])
    n = len(vocabulary)
    counts = sp.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n))
    counts.sum_duplicates()
    total = counts.sum()
    row_sums = np.asarray(counts.sum(axis=1)).ravel()
    col_sums = np.asarray(counts.sum(axis=0)).ravel()
    coo = counts.tocoo()
    pmi = np.log(coo.data * total / (row_sums[coo.row] * col_sums[coo.col]))
    keep = pmi > 0
    ppmi = sp.csr_matrix((pmi[keep], (coo.row[keep], coo.col[keep])), shape=(n, n))
    dim = max(1, min(dim, n - 1))
    vectors = TruncatedSVD(n_components=dim, random_state=seed).fit_transform(ppmi)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return {w: vectors[k] for w, k in vocabulary.items()}


def accuracies(predicted, y, words, seen):
    """Token accuracy overall and on words not seen in training."""
    flat = [
        (p == t, w in seen)
        for ps, ts, ws in zip(predicted, y, words)
        for p, t, w in zip(ps, ts, ws)
    ]
    overall = np.mean([ok for ok, _ in flat])
    unseen = [ok for ok, known in flat if not known]
    return overall, (np.mean(unseen) if unseen else float("nan")), len(unseen)


def main(argv=None):
    args = parse_args(argv)
    warnings.simplefilter("ignore", ConvergenceWarning)
    train, test = load_treebank()
    if args.max_sentences is not None:
        train, test = train[: args.max_sentences], test[: max(1, args.max_sentences // 4)]
    X_train = [[w for w, _ in s] for s in train]
    y_train = [[t for _, t in s] for s in train]
    X_test = [[w for w, _ in s] for s in test]
    y_test = [[t for _, t in s] for s in test]
    seen = {w for s in X_train for w in s}
    text = X_train if args.vectors_from == "train" else X_train + X_test
    start = time.perf_counter()
    embeddings = Embeddings(word_vectors(text, args.dim, args.context))
    print(
        f"train: {len(train)} sentences, test: {len(test)} sentences; "
        f"{embeddings.vector_size}-dimensional vectors of {len(embeddings.vectors)} words "
        f"from the {args.vectors_from} sentences ({time.perf_counter() - start:.1f} s)"
    )
    unknown = Counter(w in seen for s in X_test for w in s)
    print(f"test tokens: {sum(unknown.values())}, of words unseen in training: {unknown[False]}")
    results = {}
    for name, featurizer in [
        ("template", SequenceFeaturizer()),
        ("template + vectors", SequenceFeaturizer(embeddings=embeddings, embedding_window=1)),
    ]:
        tagger = CRFTagger(
            c1=args.c1,
            c2=args.c2,
            max_iterations=args.max_iterations,
            all_possible_transitions=True,
            n_jobs=args.n_jobs,
        )
        start = time.perf_counter()
        tagger.fit(featurizer.transform(X_train), y_train)
        fit_s = time.perf_counter() - start
        predicted = tagger.predict(featurizer.transform(X_test))
        results[name] = accuracies(predicted, y_test, X_test, seen) + (fit_s,)
    print()
    print(f"{'features':<22}{'test accuracy':>15}{'unseen words':>15}{'fit (s)':>10}")
    for name, (overall, unseen, _, fit_s) in results.items():
        print(f"{name:<22}{overall:>15.4f}{unseen:>15.4f}{fit_s:>10.1f}")
    overall, unseen, _, _ = results["template + vectors"]
    print()
    print(f"test token accuracy: {overall:.4f}")
    print(f"unseen-word accuracy: {unseen:.4f}")


if __name__ == "__main__":
    main()
