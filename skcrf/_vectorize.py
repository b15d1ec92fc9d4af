"""Validation and vectorization of sequences of token features and labels.

Token features follow python-crfsuite's conventions (see the table in
:class:`skcrf.CRFTagger`); each token becomes one flat ``{name: value}``
mapping that scikit-learn's :class:`~sklearn.feature_extraction.DictVectorizer`
turns into one row of a CSR matrix. Rows are in "flat" order: the tokens of
sequence 0, then sequence 1, and so on.

Every check names the place of the problem (``X[i][j]``, the feature key) so a
user can find it in their data; nothing invalid reaches the numerical code.
"""

import math
import numbers
from collections.abc import Mapping, Sequence

import numpy as np
from sklearn.feature_extraction import DictVectorizer

_SCALAR_FAST_TYPES = (str, bool, int)


def check_sequences(X, name="X", single_hint=True):
    """Check that ``X`` is a list of sequences; return it as a list of lists.

    Parameters
    ----------
    X : sequence of sequences
    name : str
        How to call ``X`` in error messages.
    single_hint : bool
        Whether to suggest ``predict_single`` when ``X`` looks like one sequence.
    """
    if isinstance(X, (str, bytes, Mapping)) or not _is_sequence(X):
        raise TypeError(
            f"{name} must be a list of sequences (lists of tokens); "
            f"got {type(X).__name__}."
        )
    sequences = list(X)
    for i, seq in enumerate(sequences):
        if isinstance(seq, Mapping):
            hint = (
                " It looks like a single sequence: pass [sequence], or use "
                "predict_single / predict_marginals_single."
                if single_hint
                else " It looks like a single sequence: pass [sequence]."
            )
            raise TypeError(
                f"{name}[{i}] is a dict (a token), but {name} must be a list of "
                f"sequences of tokens.{hint}"
            )
        if isinstance(seq, (str, bytes)) or not _is_sequence(seq):
            raise TypeError(
                f"{name}[{i}] must be a sequence (a list of tokens); "
                f"got {type(seq).__name__}."
            )
    return sequences


def _is_sequence(obj):
    return isinstance(obj, (Sequence, np.ndarray)) or (
        hasattr(obj, "__len__") and hasattr(obj, "__getitem__")
    )


def token_features(token, i, j, name="X"):
    """Flat ``{feature: value}`` mapping of one token, checked.

    String values stay strings (DictVectorizer makes ``key=value`` of them);
    numbers are finite floats or bools; nested mappings are flattened with
    ``key:`` prefixes; lists and sets of strings become one feature each.

    Examples
    --------
    >>> token_features({"w": "Hi", "n": {"a": 1, "b": "x"}, "l": ["p", "q"]}, 0, 0)
    {'w=Hi': 1.0, 'n:a': 1.0, 'n:b=x': 1.0, 'l=p': 1.0, 'l=q': 1.0}
    >>> token_features(["a", "b", "a"], 0, 0)
    {'a': 2.0, 'b': 1.0}
    """
    if type(token) is dict:
        for key, value in token.items():
            if type(key) is not str:
                break
            value_type = type(value)
            if value_type in _SCALAR_FAST_TYPES:
                continue
            if value_type is float and math.isfinite(value):
                continue
            break
        else:
            return token  # the common case: already flat and valid
        flat = {}
        _add_mapping(flat, token, "", i, j, name)
        return flat
    if isinstance(token, Mapping):
        flat = {}
        _add_mapping(flat, token, "", i, j, name)
        return flat
    if isinstance(token, (list, tuple)):
        flat = {}
        for feature in token:
            if not isinstance(feature, str):
                raise TypeError(
                    f"{name}[{i}][{j}]: a token given as a list must hold feature "
                    f"names (str); found {type(feature).__name__} {feature!r}."
                )
            flat[feature] = flat.get(feature, 0.0) + 1.0
        return flat
    if isinstance(token, str):
        raise TypeError(
            f"{name}[{i}][{j}] is a str ({token!r}); a token must be a dict of "
            "features or a list of feature names. If you passed a single "
            f"sequence, wrap it in a list: [sequence]."
        )
    raise TypeError(
        f"{name}[{i}][{j}] must be a dict of features or a list of feature "
        f"names; got {type(token).__name__}."
    )


def _add_mapping(flat, mapping, prefix, i, j, name):
    for key, value in mapping.items():
        if not isinstance(key, str):
            raise TypeError(
                f"{name}[{i}][{j}]: feature keys must be str; found "
                f"{type(key).__name__} {key!r}."
            )
        full_key = prefix + key
        if isinstance(value, str):
            _add(flat, full_key, value)
        elif isinstance(value, (bool, np.bool_)):
            _add(flat, full_key, float(value))
        elif isinstance(value, numbers.Real):
            number = float(value)
            if not math.isfinite(number):
                raise ValueError(
                    f"{name}[{i}][{j}]: feature {full_key!r} has the non-finite "
                    f"value {value!r}; feature values must be finite numbers."
                )
            _add(flat, full_key, number)
        elif isinstance(value, Mapping):
            _add_mapping(flat, value, full_key + ":", i, j, name)
        elif isinstance(value, (list, set, frozenset)):
            for item in value:
                if not isinstance(item, str):
                    raise TypeError(
                        f"{name}[{i}][{j}]: feature {full_key!r} is a "
                        f"{type(value).__name__} holding {type(item).__name__} "
                        f"{item!r}; a list or set value must hold only str."
                    )
                _add(flat, f"{full_key}={item}", 1.0)
        else:
            raise TypeError(
                f"{name}[{i}][{j}]: feature {full_key!r} has a value of "
                f"unsupported type {type(value).__name__} ({value!r}); use str, "
                "bool, int, float, a dict, or a list or set of str."
            )


def _add(flat, key, value):
    """Add a feature; the same numeric feature twice in a token adds up."""
    if isinstance(value, str):
        key = f"{key}={value}"
        value = 1.0
    flat[key] = flat.get(key, 0.0) + value


def vectorize(X, vectorizer=None, name="X"):
    """Vectorize sequences of tokens into one CSR row per token.

    Parameters
    ----------
    X : list of sequences of tokens
    vectorizer : DictVectorizer or None
        Fitted vectorizer to transform with; ``None`` fits a new one.
    name : str
        How to call ``X`` in error messages.

    Returns
    -------
    matrix : scipy.sparse.csr_array of shape (n_tokens, n_features)
    lengths : ndarray of shape (n_sequences,)
    vectorizer : DictVectorizer
    """
    sequences = check_sequences(X, name=name)
    lengths = np.fromiter((len(seq) for seq in sequences), dtype=np.intp, count=len(sequences))
    tokens = [
        token_features(token, i, j, name)
        for i, seq in enumerate(sequences)
        for j, token in enumerate(seq)
    ]
    if vectorizer is None:
        vectorizer = DictVectorizer(dtype=np.float64, separator="=", sparse=True, sort=True)
        if not tokens:
            raise ValueError(f"{name} has no tokens: all sequences are empty.")
        matrix = vectorizer.fit_transform(tokens)
    elif tokens:
        matrix = vectorizer.transform(tokens)
    else:
        from scipy.sparse import csr_array

        matrix = csr_array((0, len(vectorizer.feature_names_)), dtype=np.float64)
    return matrix, lengths, vectorizer


def check_labels(y, lengths, name="y"):
    """Check label sequences against the token counts.

    Returns
    -------
    labels : list
        The labels of all tokens in flat order.
    """
    if isinstance(y, (str, bytes, Mapping)) or not _is_sequence(y):
        raise TypeError(
            f"{name} must be a list of label sequences; got {type(y).__name__}."
        )
    if len(y) != len(lengths):
        raise ValueError(
            f"X has {len(lengths)} sequences but {name} has {len(y)} label sequences."
        )
    labels = []
    for i, (seq, length) in enumerate(zip(y, lengths)):
        if isinstance(seq, (str, bytes)) or not _is_sequence(seq) or isinstance(seq, Mapping):
            raise TypeError(
                f"{name} must be a list of label sequences, but {name}[{i}] is "
                f"{type(seq).__name__} {seq!r}. Wrap a flat list of labels per "
                "sequence: y = [[label, label, ...], ...]."
            )
        if len(seq) != length:
            raise ValueError(
                f"Sequence {i} has {length} tokens in X but {len(seq)} labels in {name}."
            )
        labels.extend(seq)
    return labels


def encode_labels(labels, classes=None, name="y"):
    """Map labels to indices.

    Parameters
    ----------
    labels : list of hashable
    classes : ndarray of object or None
        Known classes; ``None`` learns them: sorted when the labels can be
        sorted, else in order of first appearance.

    Returns
    -------
    indices : ndarray of int
        Index into ``classes``; -1 for a label not in ``classes``.
    classes : ndarray of object
    """
    try:
        if classes is None:
            unique = list(dict.fromkeys(labels))
            try:
                unique = sorted(unique)
            except TypeError:
                pass  # mixed, unorderable label types: keep first appearance
            classes = np.empty(len(unique), dtype=object)
            classes[:] = unique
        index = {label: k for k, label in enumerate(classes)}
        indices = np.fromiter(
            (index.get(label, -1) for label in labels), dtype=np.intp, count=len(labels)
        )
    except TypeError as exc:
        for k, label in enumerate(labels):
            try:
                hash(label)
            except TypeError:
                raise TypeError(
                    f"{name}: label {label!r} (token {k} in flat order) is not "
                    "hashable; labels must be hashable (str, int, ...)."
                ) from exc
        raise
    return indices, classes
