"""skcrf's vectorization is DictVectorizer's, faster: same vocabulary, same matrix."""

import numpy as np
import pytest
from sklearn import config_context
from sklearn.feature_extraction import DictVectorizer

from skcrf._vectorize import token_features, vectorize


def random_tokens(seed, n_sequences=30):
    rng = np.random.default_rng(seed)
    words = ["a", "b", "c=d", "", "é", "x:y"]
    X = []
    for _ in range(n_sequences):
        sequence = []
        for _ in range(rng.integers(0, 6)):
            token = {}
            for key in rng.choice(["w", "p", "n", "k=v", "f", "g"], size=rng.integers(0, 5)):
                kind = rng.integers(0, 4)
                if kind == 0:
                    token[key] = str(rng.choice(words))
                elif kind == 1:
                    token[key] = bool(rng.integers(0, 2))  # False is an explicit 0
                elif kind == 2:
                    token[key] = float(rng.normal())
                else:
                    token[key] = int(rng.integers(-3, 4))
            sequence.append(token)
        X.append(sequence)
    return X


@pytest.mark.parametrize("seed", range(5))
def test_matrix_and_vocabulary_equal_dictvectorizer(seed):
    X = random_tokens(seed)
    X_new = random_tokens(seed + 100)
    matrix, lengths, vectorizer = vectorize(X)

    flat = [token_features(token, 0, 0) for seq in X for token in seq]
    reference = DictVectorizer(dtype=np.float64, separator="=", sparse=True, sort=True)
    expected = reference.fit_transform(flat)
    expected.sum_duplicates()
    assert vectorizer.feature_names_ == reference.feature_names_
    assert vectorizer.vocabulary_ == reference.vocabulary_
    assert lengths.tolist() == [len(seq) for seq in X]
    np.testing.assert_array_equal(matrix.indptr, expected.indptr)
    np.testing.assert_array_equal(matrix.indices, expected.indices)
    np.testing.assert_array_equal(matrix.data, expected.data)  # explicit zeros too

    # transforming unseen data skips unknown features, like DictVectorizer
    transformed, _, _ = vectorize(X_new, vectorizer)
    flat_new = [token_features(token, 0, 0) for seq in X_new for token in seq]
    if flat_new:
        want = reference.transform(flat_new)
        want.sum_duplicates()
        np.testing.assert_array_equal(transformed.toarray(), want.toarray())
        # and the fitted vectorizer is usable on its own
        np.testing.assert_array_equal(vectorizer.transform(flat_new).toarray(), want.toarray())


def test_global_output_config_does_not_matter():
    X = random_tokens(7)
    plain, _, vectorizer = vectorize(X)
    with config_context(transform_output="pandas"):
        configured, _, _ = vectorize(X)
        again, _, _ = vectorize(X, vectorizer)
    np.testing.assert_array_equal(plain.toarray(), configured.toarray())
    np.testing.assert_array_equal(plain.toarray(), again.toarray())


@pytest.mark.parametrize("seed", range(3))
def test_plain_dict_fast_path_equals_general_path(seed):
    # At predict time plain dict tokens take a fast path; it must agree with
    # the general path (forced here by a list token in the batch).
    X = random_tokens(seed)
    _, _, vectorizer = vectorize(X[: len(X) // 2])
    fast, _, _ = vectorize(X, vectorizer)
    general, _, _ = vectorize(X + [[["forces-general-path"]]], vectorizer)
    np.testing.assert_array_equal(fast.toarray(), general.toarray()[: fast.shape[0]])


def test_fast_path_with_only_string_and_bool_values():
    X = [[{"w": "a", "cap": True, "first": False}, {"w": "b", "cap": False}],
         [{"w": "a", "new": True, "x": "a=b"}]]
    _, _, vectorizer = vectorize(X)
    fast, _, _ = vectorize(X, vectorizer)
    general, _, _ = vectorize(X + [[["forces-general-path"]]], vectorizer)
    np.testing.assert_array_equal(fast.toarray(), general.toarray()[:3])
    assert fast.toarray().sum() == 1 + 1 + 0 + 1 + 0 + 1 + 1 + 1
