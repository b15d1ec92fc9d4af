"""Validation and vectorization of sequences of token features and labels.

Token features follow python-crfsuite's conventions (see the table in
:class:`skcrf.CRFTagger`); each token becomes one flat ``{name: value}``
mapping that scikit-learn's :class:`~sklearn.feature_extraction.DictVectorizer`
turns into one row of a CSR matrix. Rows are in "flat" order: the tokens of
sequence 0, then sequence 1, and so on.

Every check names the place of the problem (``X[i][j]``, the feature key) so a
user can find it in their data; nothing invalid reaches the numerical code.

What is accepted
----------------
- ``X`` (and ``y``): a list, tuple, numpy array or other sized, indexable
  container of sequences. Generators and other one-shot iterators are
  rejected with a message saying to pass ``list(X)``: a consumed generator
  would otherwise give silently empty predictions. Sets and dicts are
  rejected (a set has no order; a dict is one token).
- A sequence ``X[i]``: a sized, indexable container of tokens (possibly
  empty). A str, a dict or a generator is rejected.
- A token ``X[i][j]``: a mapping of str keys to str, bool, int, float
  (finite), nested mappings, or lists/sets of str; or a list or tuple of
  feature names (str). Nesting deeper than :data:`MAX_NESTING` levels (a dict
  that contains itself, for instance) is rejected.
- Labels: any hashable value except NaN (NaN is not equal to itself, so it
  could never be predicted or scored). Labels equal under ``==`` (``1``,
  ``1.0`` and ``True``) are one label, as in a dict.
"""

import math
import numbers
import reprlib
import weakref
from array import array
from collections.abc import Iterator, Mapping, Sequence
from itertools import repeat

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction import DictVectorizer

_SCALAR_FAST_TYPES = (str, bool)
_PLAIN_VALUE_TYPES = {str, bool, int, float}
_BOOL_VALUES = {True: 1.0, False: 0.0}
_MAX_INT = int(np.finfo(np.float64).max)  # larger ints overflow a float

#: Deepest nesting of dicts inside a token that is accepted.
MAX_NESTING = 100

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 6


def _short(obj):
    """A repr of ``obj`` short enough for an error message."""
    return _repr.repr(obj)


def _type_name(obj):
    return type(obj).__name__


def check_sequences(X, name="X", single_hint=True):
    """Check that ``X`` is a list of sequences; return it as a list of lists.

    Parameters
    ----------
    X : sequence of sequences
    name : str
        How to call ``X`` in error messages.
    single_hint : bool
        Whether to suggest ``predict_single`` when ``X`` looks like one sequence.

    Returns
    -------
    list
        The sequences of ``X`` (each left as given: list, tuple or array).
    """
    _check_container(X, name, "a list of sequences (lists of tokens)")
    sequences = X if type(X) is list else list(X)
    for i, seq in enumerate(sequences):
        if type(seq) is list:
            continue  # the common case
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
        if isinstance(seq, (str, bytes)):
            raise TypeError(
                f"{name}[{i}] is a {_type_name(seq)} ({_short(seq)}), but a sequence "
                "must be a list of tokens (dicts of features or lists of feature "
                "names). If these are raw words, turn them into features first "
                "(for example with skcrf.SequenceFeaturizer)."
            )
        _check_container(seq, f"{name}[{i}]", "a sequence (a list of tokens)")
    return sequences


def _check_container(obj, where, what):
    """Raise if ``obj`` is not a sized, ordered, indexable container."""
    if obj is None or isinstance(obj, (str, bytes, Mapping, set, frozenset)):
        raise TypeError(f"{where} must be {what}; got {_type_name(obj)}{_value_hint(obj)}.")
    if isinstance(obj, Iterator) or not _is_sequence(obj):
        hint = (
            f" Generators and other one-shot iterators are not accepted: pass "
            f"list(...) instead."
            if isinstance(obj, Iterator)
            else ""
        )
        raise TypeError(f"{where} must be {what}; got {_type_name(obj)}.{hint}")
    if isinstance(obj, np.ndarray) and obj.ndim == 0:
        raise TypeError(f"{where} must be {what}; got a 0-dimensional numpy array.")


def _value_hint(obj):
    if obj is None:
        return ""
    if isinstance(obj, (str, bytes)):
        return f" ({_short(obj)})"
    if isinstance(obj, Mapping):
        return " (a dict is one token)"
    return " (a set has no order)"


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
            if value_type is float:
                if math.isfinite(value):
                    continue
            elif value_type is int and -_MAX_INT <= value <= _MAX_INT:
                continue
            break
        else:
            return token  # the common case: already flat and valid
        flat = {}
        _add_mapping(flat, token, "", i, j, name, 0)
        return flat
    if isinstance(token, Mapping):
        flat = {}
        _add_mapping(flat, token, "", i, j, name, 0)
        return flat
    if isinstance(token, (list, tuple)):
        flat = {}
        for feature in token:
            if not isinstance(feature, str):
                raise TypeError(_list_token_message(token, feature, i, j, name))
            flat[feature] = flat.get(feature, 0.0) + 1.0
        return flat
    if isinstance(token, str):
        raise TypeError(
            f"{name}[{i}][{j}] is a str ({_short(token)}), but a token must be a dict "
            "of features or a list of feature names. If you passed one sequence "
            "whose tokens are lists of feature names, pass [sequence] (or use "
            "predict_single for one sequence); if these are raw words, turn them "
            "into features first."
        )
    raise TypeError(
        f"{name}[{i}][{j}] must be a dict of features or a list of feature "
        f"names; got {_type_name(token)} ({_short(token)})."
    )


def _list_token_message(token, feature, i, j, name):
    where = f"{name}[{i}][{j}]"
    if isinstance(feature, (Mapping, list, tuple)):
        return (
            f"{where} is a {_type_name(token)} holding {_type_name(feature)}s: it "
            "looks like a sequence of tokens, not a token, so the input is nested "
            "one level too deep. Pass a list of sequences to predict / "
            "predict_marginals and one sequence to predict_single."
        )
    return (
        f"{where}: a token given as a list must hold feature names (str); found "
        f"{_type_name(feature)} {_short(feature)}."
    )


def _add_mapping(flat, mapping, prefix, i, j, name, depth):
    if depth >= MAX_NESTING:
        raise ValueError(
            f"{name}[{i}][{j}]: feature {_short(prefix[:-1])} is nested more than "
            f"{MAX_NESTING} dicts deep (does a dict contain itself?)."
        )
    for key, value in mapping.items():
        if not isinstance(key, str):
            inside = f" inside feature {prefix[:-1]!r}" if prefix else ""
            raise TypeError(
                f"{name}[{i}][{j}]: feature keys must be str; found "
                f"{_type_name(key)} {_short(key)}{inside}."
            )
        full_key = prefix + key
        if isinstance(value, str):
            _add(flat, full_key, value)
        elif isinstance(value, (bool, np.bool_)):
            _add(flat, full_key, float(value))
        elif isinstance(value, numbers.Real):
            try:
                number = float(value)
            except OverflowError:
                raise ValueError(_too_large_message(name, i, j, full_key, value)) from None
            if not math.isfinite(number):
                raise ValueError(
                    f"{name}[{i}][{j}]: feature {full_key!r} has the value "
                    f"{_short(value)}, which is not a finite float; feature values "
                    "must be finite numbers (no NaN or infinity)."
                )
            _add(flat, full_key, number)
        elif isinstance(value, Mapping):
            _add_mapping(flat, value, full_key + ":", i, j, name, depth + 1)
        elif isinstance(value, (list, set, frozenset)):
            for item in value:
                if not isinstance(item, str):
                    raise TypeError(
                        f"{name}[{i}][{j}]: feature {full_key!r} is a "
                        f"{_type_name(value)} holding {_type_name(item)} "
                        f"{_short(item)}; a list or set value must hold only str."
                    )
                _add(flat, f"{full_key}={item}", 1.0)
        else:
            none_hint = " (to leave a feature out, omit its key)" if value is None else ""
            raise TypeError(
                f"{name}[{i}][{j}]: feature {full_key!r} has a value of "
                f"unsupported type {_type_name(value)} ({_short(value)}); use str, "
                f"bool, int, float, a dict, or a list or set of str{none_hint}."
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
        Fitted vectorizer to transform with; ``None`` fits a new one (and then
        ``X`` must hold at least one token).
    name : str
        How to call ``X`` in error messages.

    Returns
    -------
    matrix : scipy.sparse.csr_array of shape (n_tokens, n_features)
    lengths : ndarray of shape (n_sequences,)
    vectorizer : DictVectorizer
    """
    fitting = vectorizer is None
    sequences = check_sequences(X, name=name, single_hint=not fitting and name == "X")
    lengths = np.fromiter((len(seq) for seq in sequences), dtype=np.intp, count=len(sequences))
    if not fitting:
        matrix = _encode_plain(sequences, vectorizer)
        if matrix is not None:
            return matrix, lengths, vectorizer
    tokens = [
        token_features(token, i, j, name)
        for i, seq in enumerate(sequences)
        for j, token in enumerate(seq)
    ]
    if fitting:
        if not tokens:
            if not sequences:
                raise ValueError(
                    f"{name} is empty: training needs at least one sequence with at "
                    "least one token."
                )
            raise ValueError(
                f"{name} has no tokens: all {len(sequences)} sequences are empty; "
                "training needs at least one token."
            )
        vectorizer = DictVectorizer(dtype=np.float64, separator="=", sparse=True, sort=True)
        vocabulary = {}
        matrix = _encode(tokens, vocabulary, "=", fitting=True)
        # DictVectorizer(sort=True) numbers the features in sorted order.
        names = sorted(vocabulary)
        rank = np.empty(len(names), dtype=np.int32)
        rank[[vocabulary[feature] for feature in names]] = np.arange(len(names), dtype=np.int32)
        matrix.indices = rank[matrix.indices]
        vectorizer.feature_names_ = names
        vectorizer.vocabulary_ = {feature: k for k, feature in enumerate(names)}
        matrix.sum_duplicates()
        _check_sums(matrix, vectorizer, lengths, name)
    else:
        matrix = _encode(tokens, vectorizer.vocabulary_, vectorizer.separator, fitting=False)
        matrix.sum_duplicates()
    return matrix, lengths, vectorizer


def _encode(tokens, vocabulary, separator, fitting):
    """CSR rows of checked flat tokens, as DictVectorizer would encode them.

    One pass in plain Python over the features (DictVectorizer's own loop is
    about four times slower, and holds a Python float object per value). A
    string value ``v`` of key ``k`` is the feature ``k=v`` with value 1;
    numbers and bools are their value (explicit zeros kept). ``fitting``
    adds unseen features to ``vocabulary`` (numbered in order of appearance);
    otherwise they are skipped.
    """
    indices = array("i")
    values = array("d")
    indptr = array("q", [0]) * (len(tokens) + 1)
    lookup = vocabulary.get
    for row, token in enumerate(tokens, start=1):
        for key, value in token.items():
            if type(value) is str:
                key = key + separator + value
                value = 1.0
            index = lookup(key)
            if index is None:
                if not fitting:
                    continue
                index = vocabulary[key] = len(vocabulary)
            indices.append(index)
            values.append(value)
        indptr[row] = len(indices)
    return sp.csr_matrix(
        (
            np.frombuffer(values, dtype=np.float64),
            np.frombuffer(indices, dtype=np.int32),
            np.frombuffer(indptr, dtype=np.int64),
        ),
        shape=(len(tokens), len(vocabulary)),
    )


def _encode_plain(sequences, vectorizer):
    """Transform tokens that are plain dicts of str, bool and number values.

    The prediction fast path: one comprehension over all features, string
    features looked up by (key, value) in a cached two-level table (no
    ``key=value`` string is built). Returns None, so that the caller takes
    the general path, as soon as a token is anything else (a list, a nested
    dict, a list value, a key that is not a str, a non-finite number...):
    validation and its error messages stay in one place.
    """
    tokens = [token for seq in sequences for token in seq]
    if not tokens or not all(type(token) is dict for token in tokens):
        return None
    try:
        keys = set().union(*tokens)
    except TypeError:
        return None
    if not all(type(key) is str for key in keys):
        return None
    by_key, vocabulary = _lookup_tables(vectorizer)
    none = {}
    try:
        indices = np.fromiter(
            [
                by_key.get(key, none).get(value, -1)
                if type(value) is str
                else vocabulary.get(key, -1)
                for token in tokens
                for key, value in token.items()
            ],
            dtype=np.int32,
        )
        raw_values = [value for token in tokens for value in token.values()]
        value_types = set(map(type, raw_values))
        if not value_types <= _PLAIN_VALUE_TYPES:
            return None
        if value_types <= {str, bool}:
            # a lookup in C: strings miss and count 1, as a string feature does
            values = np.fromiter(
                map(_BOOL_VALUES.get, raw_values, repeat(1.0)), dtype=np.float64,
                count=len(indices),
            )
        else:
            values = np.fromiter(
                [1.0 if type(value) is str else value for value in raw_values],
                dtype=np.float64,
                count=len(indices),
            )
    except (TypeError, OverflowError):
        return None  # an unhashable value, or an int too large for a float
    if not np.isfinite(values).all():
        return None
    counts = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    known = indices >= 0
    if not known.all():
        rows = np.repeat(np.arange(len(tokens)), counts)
        counts = np.bincount(rows[known], minlength=len(tokens))
        indices, values = indices[known], values[known]
    indptr = np.zeros(len(tokens) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    matrix = sp.csr_matrix(
        (values, indices, indptr), shape=(len(tokens), len(vectorizer.feature_names_))
    )
    matrix.sum_duplicates()
    return matrix


# vectorizer -> (its vocabulary_, {key: {value: column}}), rebuilt when the
# vocabulary object changes; weak, so models are freed as usual.
_LOOKUP_CACHE = weakref.WeakKeyDictionary()


def _lookup_tables(vectorizer):
    """``({key: {value: column}}, vocabulary)`` for the string features.

    A feature ``k=v`` is found as ``table[k][v]``. A name with several
    separators is entered under every split, since the name alone does not
    say where the key ends; each entry still maps the exact name.
    """
    vocabulary = vectorizer.vocabulary_
    cached = _LOOKUP_CACHE.get(vectorizer)
    if cached is not None and cached[0] is vocabulary:
        return cached[1], vocabulary
    separator = vectorizer.separator
    by_key = {}
    for feature, column in vocabulary.items():
        position = feature.find(separator)
        while position >= 0:
            by_key.setdefault(feature[:position], {})[feature[position + len(separator):]] = column
            position = feature.find(separator, position + 1)
    _LOOKUP_CACHE[vectorizer] = (vocabulary, by_key)
    return by_key, vocabulary


def _locate(flat_row, lengths):
    """``(i, j)``: sequence and token of a row in flat order."""
    ends = np.cumsum(lengths)
    i = int(np.searchsorted(ends, flat_row, side="right"))
    return i, int(flat_row - (ends[i] - lengths[i]))


def _too_large_message(name, i, j, key, value):
    return (
        f"{name}[{i}][{j}]: feature {key!r} has the value {_short(value)}, which is "
        "too large for a float; feature values must be finite numbers."
    )


def _check_sums(matrix, vectorizer, lengths, name):
    """Reject training values whose sums overflow (the objective would be inf)."""
    data = matrix.data
    if not len(data):
        return
    largest = float(np.abs(data).max())
    if largest * len(data) < 1e300:
        return  # no sum of values can overflow: the cheap, common case
    with np.errstate(over="ignore"):
        sums = np.bincount(matrix.indices, weights=np.abs(data), minlength=matrix.shape[1])
    bad = np.flatnonzero(~np.isfinite(sums))
    if len(bad):
        column = int(bad[0])
        feature = vectorizer.feature_names_[column]
        rows = matrix.tocsc()[:, [column]].tocoo()
        row = int(rows.row[np.argmax(np.abs(rows.data))])
        i, j = _locate(row, lengths)
        largest = float(matrix[row, column])
        raise ValueError(
            f"The values of feature {feature!r} are too large: the sum of their "
            "magnitudes over the training data overflows a float (the largest is "
            f"{largest!r}, at {name}[{i}][{j}]). Scale the feature values down."
        )


def check_emissions(emissions, lengths, name="X"):
    """Raise if label scores overflowed; name the first token concerned.

    Parameters
    ----------
    emissions : ndarray of shape (n_tokens, n_labels)
        ``X @ coef_`` in flat order.
    lengths : ndarray of int, shape (n_sequences,)
    name : str
    """
    if np.isfinite(emissions).all():
        return
    row = int(np.flatnonzero(~np.isfinite(emissions).all(axis=1))[0])
    i, j = _locate(row, lengths)
    raise ValueError(
        f"{name}[{i}][{j}]: the label scores of this token are not finite: its "
        "feature values are too large for the model's weights. Scale the "
        "feature values down."
    )


def check_labels(y, lengths, name="y"):
    """Check label sequences against the token counts.

    Returns
    -------
    labels : list
        The labels of all tokens in flat order.
    """
    x_name = "X" + name[1:] if name.startswith("y") else "X"
    _check_container(y, name, "a list of label sequences")
    sequences = y if type(y) is list else list(y)
    if sequences:
        first = sequences[0]
        if isinstance(first, (str, bytes)) or not _is_sequence(first) or isinstance(
            first, Mapping
        ):
            raise TypeError(
                f"{name} must be a list of label sequences, but {name}[0] is "
                f"{_type_name(first)} {_short(first)} (is {name} a flat list of "
                "labels?). Give one list of labels per sequence: "
                f"{name} = [[label, label, ...], ...]."
            )
    if len(sequences) != len(lengths):
        raise ValueError(
            f"{x_name} has {len(lengths)} sequences but {name} has {len(sequences)} "
            "label sequences; they must have one label sequence per sequence."
        )
    labels = []
    for i, (seq, length) in enumerate(zip(sequences, lengths)):
        if type(seq) is not list:
            if isinstance(seq, (str, bytes, Mapping)) or not (
                _is_sequence(seq) or isinstance(seq, Iterator)
            ):
                raise TypeError(
                    f"{name} must be a list of label sequences, but {name}[{i}] is "
                    f"{_type_name(seq)} {_short(seq)}. Give one list of labels per "
                    f"sequence: {name} = [[label, label, ...], ...]."
                )
            _check_container(seq, f"{name}[{i}]", "a label sequence (a list of labels)")
        if len(seq) != length:
            raise ValueError(
                f"{name}[{i}] has {_count(len(seq), 'label')} but {x_name}[{i}] has "
                f"{_count(length, 'token')}; every token needs exactly one label."
            )
        labels.extend(seq)
    _check_label_values(labels, lengths, name)
    return labels


def _count(n, noun):
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _check_label_values(labels, lengths, name):
    """Labels must be hashable and not NaN; name the first offender."""
    try:
        unique = dict.fromkeys(labels)
    except TypeError:
        for row, label in enumerate(labels):
            try:
                hash(label)
            except TypeError:
                i, j = _locate(row, np.asarray(lengths))
                raise TypeError(
                    f"{name}[{i}][{j}]: the label {_short(label)} is not hashable; "
                    "labels must be hashable (str, int, tuple, ...)."
                ) from None
        raise
    for label in unique:
        if _is_nan(label):
            row = next(k for k, other in enumerate(labels) if _is_nan(other))
            i, j = _locate(row, np.asarray(lengths))
            raise ValueError(
                f"{name}[{i}][{j}]: the label is NaN; NaN is not equal to itself, "
                "so it cannot be a label."
            )


def _is_nan(label):
    try:
        return bool(label != label)
    except Exception:  # noqa: BLE001 - a label with an odd __ne__ is not NaN
        return False


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
