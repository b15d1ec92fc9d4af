"""Validation of sequences of token features and labels.

The checks that name the place of a problem (``X[i][j]``, the feature key,
``y[i]``) so a user can find it in their data; nothing invalid reaches the
numerical code. The compiled encoder (:mod:`skcrf._featurize`) handles plain
dict tokens itself and hands every other token to :func:`token_attributes`,
so the rules and the error messages live here, once.

Token features follow CRFsuite's (python-crfsuite's) conventions: a string
value ``v`` of key ``k`` is the attribute ``k:v`` with value 1 (``:`` is the
vocabulary's ``value_separator``); numbers and bools are the value of the
attribute ``k``; nested dicts are flattened with ``key:`` prefixes (always
``:``); a list or set of strings gives one attribute per string.

What is accepted
----------------
- ``X`` (and ``y``): a list, tuple, numpy array or other sized, indexable
  container of sequences. :func:`check_sequences` rejects generators and
  other one-shot iterators with a message saying to pass ``list(X)``; the
  streaming entry points (:func:`skcrf._stream.encode_data`: ``fit``,
  ``predict``...) accept any iterable (:func:`check_iterable`), read once,
  and data that is read more than once (``X_dev``) must be a list
  (:func:`check_reusable`). Sets and dicts are rejected (a set has no
  order; a dict is one token).
- A sequence ``X[i]``: a sized, indexable container of tokens (possibly
  empty). A str, a dict or a generator is rejected.
- A token ``X[i][j]``: a mapping of str keys to str, bool, int, float
  (finite), numpy scalars (any ``numbers.Real``, ``np.bool_``), nested
  mappings, lists/sets of str, or vectors (a 1-D numeric numpy array or a
  non-empty list of floats: the attributes ``key[0]``, ``key[1]``...; the
  same length for a key everywhere in the data); or a list or tuple of
  feature names (str).
  Nesting deeper than :data:`MAX_NESTING` levels (a dict that contains
  itself, for instance) is rejected.
- Labels: any hashable value except NaN (NaN is not equal to itself, so it
  could never be predicted or scored). Labels equal under ``==`` (``1``,
  ``1.0`` and ``True``) are one label, as in a dict.
- Partial labels (decoding, ``partial_labels=``): per sequence None (free)
  or one entry per token: None (free), a label of the model (known), or a
  non-empty set / frozenset of labels (the true one is among them; labels
  the model does not know are ignored, but at least one must be known).
- Partially labelled training data (``missing_label=``): a token whose label
  equals ``missing_label`` is unknown; a set / frozenset of labels is a
  fuzzy label (non-empty, hashable members, not NaN, not ``missing_label``).
"""

import math
import numbers
import reprlib
from collections.abc import Iterator, Mapping, Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "MAX_NESTING",
    "DenseFeatures",
    "Encoded",
    "check_emissions",
    "check_iterable",
    "check_label_sequence",
    "check_reusable",
    "check_sequence",
    "check_label_sequence_pair",
    "check_label_sequences",
    "check_labels",
    "check_partial_labels",
    "check_partial_training_labels",
    "check_sequences",
    "check_sums",
    "encode_labels",
    "token_attributes",
]

#: Deepest nesting of dicts inside a token that is accepted.
MAX_NESTING = 100

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 6


class Encoded(NamedTuple):
    """Sequences of tokens as attribute ids and values, one CSR row per token.

    Rows are in flat order: the tokens of sequence 0, then sequence 1, ...
    A row may hold the same id more than once (the same attribute reached
    twice in one token, e.g. ``['a', 'a']``); such values add up.
    """

    indptr: np.ndarray  # int64, shape (n_tokens + 1,)
    ids: np.ndarray  # int32, shape (indptr[-1],)
    values: np.ndarray  # float64, shape (indptr[-1],)
    lengths: np.ndarray  # intp, shape (n_sequences,)
    #: Vector features kept dense (``encode(..., dense=True)``), or None: then
    #: every vector dimension is an ordinary CSR entry.
    dense: "DenseFeatures | None" = None


class DenseFeatures(NamedTuple):
    """Vector-valued token features as one dense block beside the CSR rows.

    A token value ``{'emb': vector}`` means the attributes ``emb[0]`` ...
    ``emb[d-1]`` with those values; here they are the columns of the dense
    rows. Vectors repeat (one per word type), so ``values`` holds the
    distinct rows once and ``row_index`` gives each token's row (flat order;
    0 where a token has no such key): token ``t`` has the values
    ``values[row_index[t]]``.
    """

    columns: np.ndarray  # int64, shape (n_columns,): attribute id of each column
    values: np.ndarray  # float64, C order, shape (n_distinct, n_columns)
    key_of_column: np.ndarray  # intp, shape (n_columns,): its key's number
    present: np.ndarray  # bool, shape (n_tokens, n_keys): the token has the key
    keys: tuple  # the keys (feature names), in key-number order
    row_index: np.ndarray  # intp, shape (n_tokens,): the row of each token


def _short(obj):
    """A repr of ``obj`` short enough for an error message."""
    return _repr.repr(obj)


def _type_name(obj):
    return type(obj).__name__


# -- sequences ------------------------------------------------------------------


def check_sequences(X, name="X", single_hint=True):
    """Check that ``X`` is a list of sequences; return it as a list.

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
        if type(seq) is not list:  # a list is the common case
            check_sequence(seq, i, name, single_hint)
    return sequences


def check_sequence(seq, i, name="X", single_hint=True):
    """Check that ``seq``, the sequence ``name[i]``, is a container of tokens.

    The per-sequence rule of :func:`check_sequences` (the tokens themselves
    are checked by the encoder).
    """
    if type(seq) is not list:
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


def is_reusable(X):
    """Whether ``X`` can be read more than once in order.

    A sized, indexable container, not a one-shot iterator.
    """
    return not isinstance(X, Iterator) and _is_sequence(X)


def check_iterable(X, name="X", what="a list of sequences (lists of tokens)"):
    """Check that ``X`` is an ordered iterable of sequences, read once.

    Streaming entry points (``fit``, ``predict``...) accept any iterable,
    a generator included; a str, bytes, a dict (one token) and sets (no
    order) are rejected, as are non-iterables.
    """
    if X is None or isinstance(X, (str, bytes, Mapping, set, frozenset)):
        raise TypeError(f"{name} must be {what}; got {_type_name(X)}{_value_hint(X)}.")
    if isinstance(X, np.ndarray) and X.ndim == 0:
        raise TypeError(f"{name} must be {what}; got a 0-dimensional numpy array.")
    if not hasattr(X, "__iter__"):
        raise TypeError(f"{name} must be {what}; got {_type_name(X)}.")


def check_reusable(
    X, name="X", reason="it is read more than once", what="a list of sequences (lists of tokens)"
):
    """Reject a one-shot iterator where the data is read more than once.

    ``reason`` completes "... must be a list: ..." in the message.
    """
    if isinstance(X, Iterator):
        raise TypeError(
            f"{name} must be {what}, not a one-shot iterator ({_type_name(X)}): "
            f"{reason}. Pass list({name}) instead."
        )
    _check_container(X, name, what)


def check_label_sequence(seq, i, length, name="y", x_name="X"):
    """Check the label sequence ``name[i]`` against its ``length`` tokens.

    The per-sequence rule of :func:`check_labels`, for streamed data (the
    labels themselves are checked by :func:`check_labels` afterwards).
    Returns the labels as a list.
    """
    if type(seq) is not list:
        if isinstance(seq, (str, bytes, Mapping, set, frozenset)) or not (
            _is_sequence(seq) or isinstance(seq, Iterator)
        ):
            raise TypeError(
                f"{name} must be a list of label sequences, but {name}[{i}] is "
                f"{_type_name(seq)} {_short(seq)}. Give one list of labels per "
                f"sequence: {name} = [[label, label, ...], ...]."
            )
        _check_container(seq, f"{name}[{i}]", "a label sequence (a list of labels)")
        seq = seq.tolist() if isinstance(seq, np.ndarray) else list(seq)
    if len(seq) != length:
        raise ValueError(
            f"{name}[{i}] has {_count(len(seq), 'label')} but {x_name}[{i}] has "
            f"{_count(length, 'token')}; every token needs exactly one label."
        )
    return seq


def _check_container(obj, where, what):
    """Raise if ``obj`` is not a sized, ordered, indexable container."""
    if obj is None or isinstance(obj, (str, bytes, Mapping, set, frozenset)):
        raise TypeError(f"{where} must be {what}; got {_type_name(obj)}{_value_hint(obj)}.")
    if isinstance(obj, Iterator) or not _is_sequence(obj):
        hint = (
            " Generators and other one-shot iterators are not accepted: pass list(...) instead."
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


def check_nonempty(sequences, n_tokens, name="X"):
    """Raise when training data holds no token (fit needs at least one)."""
    if n_tokens:
        return
    if not len(sequences):
        raise ValueError(
            f"{name} is empty: training needs at least one sequence with at least one token."
        )
    raise ValueError(
        f"{name} has no tokens: all {len(sequences)} sequences are empty; "
        "training needs at least one token."
    )


# -- tokens ---------------------------------------------------------------------


def token_attributes(token, i, j, name="X", separator=":", vectors=False):
    """``(attribute, value)`` pairs of one token, checked; CRFsuite's names.

    The general path of :meth:`skcrf._featurize.Vocabulary.encode`: any
    accepted token format, with the error messages naming ``name[i][j]`` and
    the feature key. The same attribute may come more than once (its values
    add up).

    A vector value (a 1-D numeric numpy array, or a non-empty list of
    floats) of key ``k`` is the attributes ``k[0]`` ... ``k[d-1]`` with its
    values (finite). With ``vectors=True`` it comes as one pair
    ``(k, array)`` (a float64 ndarray) instead, for the encoder to keep dense.

    >>> token_attributes({"emb": [0.5, -1.0]}, 0, 0)
    [('emb[0]', 0.5), ('emb[1]', -1.0)]

    Examples
    --------
    >>> token_attributes({"w": "Hi", "n": {"a": 1, "b": "x"}, "l": ["p", "q"]}, 0, 0)
    [('w:Hi', 1.0), ('n:a', 1.0), ('n:b:x', 1.0), ('l:p', 1.0), ('l:q', 1.0)]
    >>> token_attributes(["a", "b", "a"], 0, 0)
    [('a', 1.0), ('b', 1.0), ('a', 1.0)]
    >>> token_attributes({"w": "Hi", "on": False}, 0, 0, separator="=")
    [('w=Hi', 1.0), ('on', 0.0)]
    """
    pairs = []
    if isinstance(token, Mapping):
        _add_mapping(pairs, token, "", i, j, name, separator, 0)
        if vectors:
            return pairs
        expanded = []
        for attribute, value in pairs:
            if type(value) is np.ndarray:
                expanded.extend((f"{attribute}[{k}]", v) for k, v in enumerate(value.tolist()))
            else:
                expanded.append((attribute, value))
        return expanded
    if isinstance(token, (list, tuple)):
        for feature in token:
            if isinstance(feature, bytes):
                feature = _utf8(feature, f"{name}[{i}][{j}]: feature name")
            elif not isinstance(feature, str):
                raise TypeError(_list_token_message(token, feature, i, j, name))
            # a str subclass (np.str_) becomes a plain str name
            pairs.append((feature if type(feature) is str else str.__str__(feature), 1.0))
        return pairs
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


def _add_mapping(pairs, mapping, prefix, i, j, name, separator, depth):
    if depth >= MAX_NESTING:
        raise ValueError(
            f"{name}[{i}][{j}]: feature {_short(prefix[:-1])} is nested more than "
            f"{MAX_NESTING} dicts deep (does a dict contain itself?)."
        )
    for key, value in mapping.items():
        if isinstance(key, bytes):
            key = _utf8(key, f"{name}[{i}][{j}]: feature key")
        if not isinstance(key, str):
            inside = f" inside feature {prefix[:-1]!r}" if prefix else ""
            raise TypeError(
                f"{name}[{i}][{j}]: feature keys must be str; found "
                f"{_type_name(key)} {_short(key)}{inside}."
            )
        full_key = f"{prefix}{key}"  # a plain str even for a str subclass key
        if isinstance(value, str):
            pairs.append((f"{full_key}{separator}{value}", 1.0))
        elif isinstance(value, bytes):
            text = _utf8(value, f"{name}[{i}][{j}]: feature {full_key!r}")
            pairs.append((f"{full_key}{separator}{text}", 1.0))
        elif isinstance(value, (bool, np.bool_)):
            pairs.append((full_key, 1.0 if value else 0.0))
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
            pairs.append((full_key, number))
        elif isinstance(value, Mapping):
            # nested keys are always joined with ':' (python-crfsuite's rule)
            _add_mapping(pairs, value, full_key + ":", i, j, name, separator, depth + 1)
        elif _is_vector(value):
            pairs.append((full_key, _vector(value, i, j, name, full_key)))
        elif isinstance(value, (list, set, frozenset)):
            for item in value:
                if isinstance(item, bytes):
                    item = _utf8(item, f"{name}[{i}][{j}]: feature {full_key!r}")
                if not isinstance(item, str):
                    raise TypeError(
                        f"{name}[{i}][{j}]: feature {full_key!r} is a "
                        f"{_type_name(value)} holding {_type_name(item)} "
                        f"{_short(item)}; a list or set value must hold only str (a "
                        "vector feature is a numpy array or a list of floats)."
                    )
                pairs.append((f"{full_key}{separator}{item}", 1.0))
        else:
            none_hint = " (to leave a feature out, omit its key)" if value is None else ""
            raise TypeError(
                f"{name}[{i}][{j}]: feature {full_key!r} has a value of "
                f"unsupported type {_type_name(value)} ({_short(value)}); use str "
                f"(or UTF-8 bytes), bool, int, float, a dict, or a list or set of "
                f"str{none_hint}."
            )


def _is_vector(value):
    """Whether a feature value is a vector (numeric array, list of numbers)."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    if type(value) is list and value:
        return all(isinstance(v, (float, np.floating)) for v in value)
    return False


def _vector(value, i, j, name, key):
    """A vector value as a 1-D float64 array, checked (finite)."""
    where = f"{name}[{i}][{j}]: feature {key!r}"
    try:
        array = np.asarray(value, dtype=np.float64)
    except OverflowError:
        raise ValueError(f"{where} holds a value too large for a float.") from None
    if array.ndim != 1:
        raise ValueError(f"{where} is a {array.ndim}-D array; a vector feature must be 1-D.")
    if not len(array):
        raise ValueError(f"{where} is an empty vector; a vector feature needs a value.")
    finite = np.isfinite(array)
    if not finite.all():
        k = int(np.flatnonzero(~finite)[0])
        raise ValueError(
            f"{where} has the value {float(array[k])!r} at index {k}, which is not a finite "
            "float; vector values must be finite numbers (no NaN or infinity)."
        )
    return array


def _utf8(data, where):
    """``bytes`` as python-crfsuite reads them: UTF-8 text."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{where} is bytes that are not valid UTF-8 ({exc.reason} at byte "
            f"{exc.start}: {_short(data)}); bytes are read as UTF-8 text, as "
            "python-crfsuite does. Decode them yourself, or pass str."
        ) from None


def _too_large_message(name, i, j, key, value):
    return (
        f"{name}[{i}][{j}]: feature {key!r} has the value {_short(value)}, which is "
        "too large for a float; feature values must be finite numbers."
    )


# -- encoded data ---------------------------------------------------------------


def locate_row(flat_row, lengths):
    """``(i, j)``: sequence and token of a row in flat order."""
    ends = np.cumsum(lengths)
    i = int(np.searchsorted(ends, flat_row, side="right"))
    return i, int(flat_row - (ends[i] - lengths[i]))


def check_sums(encoded, vocabulary, name="X"):
    """Reject training values whose sums overflow (the objective would be inf).

    Parameters
    ----------
    encoded : Encoded
        The training data, as :meth:`Vocabulary.encode` returns it.
    vocabulary : Vocabulary
        The vocabulary that encoded it (for the attribute's name).
    name : str
        How to call the data in the error message.
    """
    dense = getattr(encoded, "dense", None)
    if dense is not None and dense.values.size:
        largest = float(np.abs(dense.values).max())
        if largest * len(dense.row_index) >= 1e300:
            with np.errstate(over="ignore"):
                sums = np.abs(dense.values[dense.row_index]).sum(axis=0)
            bad = np.flatnonzero(~np.isfinite(sums))
            if len(bad):
                raise ValueError(
                    f"The values of feature "
                    f"{vocabulary.attributes[int(dense.columns[bad[0]])]!r} are too "
                    "large: the sum of their magnitudes over the training data "
                    f"overflows a float (in {name}). Scale the feature values down."
                )
    values = encoded.values
    if not len(values):
        return
    largest = float(np.abs(values).max())
    if largest * len(values) < 1e300:
        return  # no sum of values can overflow: the cheap, common case
    with np.errstate(over="ignore"):
        sums = np.bincount(encoded.ids, weights=np.abs(values), minlength=len(vocabulary))
    bad = np.flatnonzero(~np.isfinite(sums))
    if not len(bad):
        return
    attribute = int(bad[0])
    positions = np.flatnonzero(encoded.ids == attribute)
    position = int(positions[np.argmax(np.abs(values[positions]))])
    row = int(np.searchsorted(encoded.indptr, position, side="right")) - 1
    i, j = locate_row(row, encoded.lengths)
    raise ValueError(
        f"The values of feature {vocabulary.attributes[attribute]!r} are too large: "
        "the sum of their magnitudes over the training data overflows a float (the "
        f"largest is {float(values[position])!r}, at {name}[{i}][{j}]). Scale the "
        "feature values down."
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
    i, j = locate_row(row, lengths)
    raise ValueError(
        f"{name}[{i}][{j}]: the label scores of this token are not finite: its "
        "feature values are too large for the model's weights. Scale the "
        "feature values down."
    )


# -- labels ---------------------------------------------------------------------


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
        if (
            isinstance(first, (str, bytes))
            or not _is_sequence(first)
            or isinstance(first, Mapping)
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


def check_classes(classes):
    """``classes`` of partial_fit as a list of labels."""
    if isinstance(classes, (str, bytes, Mapping)) or not hasattr(classes, "__iter__"):
        raise TypeError(
            f"classes must be a list of labels; got {type(classes).__name__} {classes!r:.100}."
        )
    classes = list(classes)
    if not classes:
        raise ValueError("classes must hold at least one label.")
    return classes


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
                i, j = locate_row(row, np.asarray(lengths))
                raise TypeError(
                    f"{name}[{i}][{j}]: the label {_short(label)} is not hashable; "
                    "labels must be hashable (str, int, tuple, ...)."
                ) from None
        raise
    for label in unique:
        if _is_nan(label):
            row = next(k for k, other in enumerate(labels) if _is_nan(other))
            i, j = locate_row(row, np.asarray(lengths))
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
            if len(set(map(type, unique))) > 1:
                _check_distinct_labels(labels, name)
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


def _label_kind(label):
    """What a label is, with numpy's scalar types counted as Python's."""
    if isinstance(label, str):
        return str
    if isinstance(label, (bool, np.bool_)):
        return bool
    if isinstance(label, numbers.Integral):
        return int
    if isinstance(label, numbers.Real):
        return float
    return type(label)


def _check_distinct_labels(labels, name):
    """Reject labels that are equal but not the same (``1``, ``1.0``, ``True``).

    Python's ``==`` would merge them into one class, and predictions would
    return only one of them: a silent wrong answer.
    """
    first = {}
    for k, label in enumerate(labels):
        seen = first.setdefault(label, (k, label))
        if _label_kind(seen[1]) is not _label_kind(label):
            raise ValueError(
                f"{name}: the labels {seen[1]!r} ({type(seen[1]).__name__}, token "
                f"{seen[0]} in flat order) and {label!r} ({type(label).__name__}, "
                f"token {k}) are equal in Python but not the same label; they would "
                "be merged into one class. Use labels of one type (e.g. all str)."
            )


# -- label sequences on their own (metrics) ------------------------------------


def _flat_list_error(name, i, seq):
    kind = "a string" if isinstance(seq, (str, bytes)) else "a single label"
    return TypeError(
        f"{name}[{i}] is {kind} ({_short(seq)}), not a sequence of labels: is {name} "
        f"a flat list of labels? {name} must be a list of label sequences, "
        f"{name} = [[label, label, ...], ...]; wrap a single sequence as [{name}]."
    )


def check_label_sequences(y, name="y", iterables=False):
    """Check a list of label sequences; return it as a list of lists.

    Parameters
    ----------
    y : sequence of sequences of hashable labels
        A list, tuple or numpy array of sequences; each sequence a list,
        tuple or 1-D array of labels. Generators are rejected (pass
        ``list(y)``).
    name : str
        How to call ``y`` in error messages.
    iterables : bool, default=False
        Accept any iterable of label sequences (a generator included, read
        once) for ``y`` itself; the sequences are still checked one by one.

    Returns
    -------
    list of list
        The label sequences (numpy scalars as Python scalars).

    Examples
    --------
    >>> check_label_sequences([["B", "I"], ("O",)], name="y_true")
    [['B', 'I'], ['O']]
    """
    if iterables and not is_reusable(y):
        check_iterable(y, name, "a list of label sequences")
    else:
        _check_container(y, name, "a list of label sequences")
    sequences = []
    for i, seq in enumerate(y if type(y) is list else list(y)):
        if type(seq) is not list:
            if isinstance(seq, (set, frozenset, Mapping)):
                raise TypeError(
                    f"{name}[{i}] is a {type(seq).__name__}, which is unordered; each "
                    "sequence must be a list, tuple or 1-D array of labels."
                )
            if isinstance(seq, Iterator):  # a generator: "pass list(...)"
                _check_container(seq, f"{name}[{i}]", "a label sequence (a list of labels)")
            if (
                isinstance(seq, (str, bytes))
                or not _is_sequence(seq)
                or (isinstance(seq, np.ndarray) and seq.ndim == 0)
            ):
                raise _flat_list_error(name, i, seq)
            if isinstance(seq, np.ndarray) and seq.ndim != 1:
                raise ValueError(
                    f"{name}[{i}] is a {seq.ndim}-D array; each sequence must be 1-D."
                )
            _check_container(seq, f"{name}[{i}]", "a label sequence (a list of labels)")
            seq = seq.tolist() if isinstance(seq, np.ndarray) else list(seq)
        sequences.append(seq)
    labels = [label for seq in sequences for label in seq]
    _check_label_values(labels, [len(seq) for seq in sequences], name)
    return sequences


def check_label_sequence_pair(y_true, y_pred, names=("y_true", "y_pred"), iterables=False):
    """Check two lists of label sequences of the same shape.

    ``iterables=True`` accepts any iterable (a generator included) for
    either, as :func:`check_label_sequences` does.

    Returns
    -------
    y_true, y_pred : list of list

    Raises
    ------
    TypeError
        If either is not a list of label sequences (a string, a flat list of
        labels, a generator, ...).
    ValueError
        If the numbers of sequences differ, or ``y_true[i]`` and ``y_pred[i]``
        have different lengths (the message names ``i``).
    """
    true_name, pred_name = names
    y_true = check_label_sequences(y_true, true_name, iterables)
    y_pred = check_label_sequences(y_pred, pred_name, iterables)
    if len(y_true) != len(y_pred):
        raise ValueError(
            f"{true_name} and {pred_name} must contain the same number of sequences; "
            f"got {len(y_true)} and {len(y_pred)}."
        )
    for i, (seq_true, seq_pred) in enumerate(zip(y_true, y_pred)):
        if len(seq_true) != len(seq_pred):
            raise ValueError(
                f"{true_name}[{i}] has length {len(seq_true)} but {pred_name}[{i}] has "
                f"length {len(seq_pred)}; each pair of sequences must have the same "
                "length."
            )
    return y_true, y_pred


# -- partial labels -------------------------------------------------------------


def check_partial_labels(partial_labels, lengths, classes, name="partial_labels"):
    """Check decoding-time partial labels; return them as token masks.

    Parameters
    ----------
    partial_labels : list
        One entry per sequence: None (every token free) or a list with one
        entry per token: None (free), a label of ``classes`` (known), or a
        set / frozenset of labels (the true label is one of them; members
        that are not in ``classes`` are ignored, at least one must be).
    lengths : ndarray of int
        Tokens of each sequence.
    classes : ndarray of object
        The model's labels.
    name : str

    Returns
    -------
    token_index : ndarray of int32, shape (n_tokens,)
        -1 for a free token, else its row of ``token_masks`` (flat order).
    token_masks : ndarray of bool, shape (n_masked, n_labels)
        The labels allowed at each constrained token.
    """
    _check_container(partial_labels, name, "a list with one entry (None or a list) per sequence")
    sequences = partial_labels if type(partial_labels) is list else list(partial_labels)
    lengths = np.asarray(lengths)
    if len(sequences) != len(lengths):
        raise ValueError(
            f"X has {len(lengths)} sequences but {name} has {len(sequences)} entries; "
            "give one entry (None or a list with one entry per token) per sequence."
        )
    index = {label: k for k, label in enumerate(classes.tolist())}
    n_labels = len(index)
    rows, known, set_rows, set_masks = [], [], [], []
    offset = 0
    for i, (seq, length) in enumerate(zip(sequences, lengths.tolist())):
        if seq is not None:
            if type(seq) is not list:
                if isinstance(seq, (str, bytes, Mapping, set, frozenset)) or not _is_sequence(seq):
                    raise TypeError(
                        f"{name}[{i}] must be None or a list with one entry per token; got "
                        f"{_type_name(seq)} {_short(seq)}."
                    )
            if len(seq) != length:
                raise ValueError(
                    f"{name}[{i}] has {len(seq)} {'entry' if len(seq) == 1 else 'entries'}"
                    f" but X[{i}] has {_count(length, 'token')}; give one entry (None, a "
                    "label or a set of labels) per token."
                )
            for j, value in enumerate(seq):
                if value is None:
                    continue
                if isinstance(value, (set, frozenset)):
                    mask = np.zeros(n_labels, dtype=bool)
                    for member in value:
                        k = _label_position(index, member, name, i, j)
                        if k is not None:
                            mask[k] = True
                    if not mask.any():
                        raise ValueError(
                            f"{name}[{i}][{j}]: none of the labels {_short(value)} is one of "
                            f"the model's labels {_short(list(classes))}; a set must hold at "
                            "least one of them."
                        )
                    set_rows.append(offset + j)
                    set_masks.append(mask)
                    continue
                k = _label_position(index, value, name, i, j)
                if k is None:
                    raise ValueError(
                        f"{name}[{i}][{j}]: the label {_short(value)} is not one of the "
                        f"model's labels {_short(list(classes))}."
                    )
                rows.append(offset + j)
                known.append(k)
        offset += length
    token_index = np.full(offset, -1, dtype=np.int32)
    token_masks = np.zeros((len(rows) + len(set_rows), n_labels), dtype=bool)
    token_masks[np.arange(len(rows)), np.asarray(known, dtype=np.intp)] = True
    if set_rows:
        token_masks[len(rows) :] = set_masks
    token_index[np.asarray(rows + set_rows, dtype=np.intp)] = np.arange(
        len(token_masks), dtype=np.int32
    )
    return token_index, token_masks


def _label_position(index, label, name, i, j):
    """Index of ``label`` among the model's labels, or None."""
    try:
        return index.get(label)
    except TypeError:
        raise TypeError(
            f"{name}[{i}][{j}]: {_short(label)} is not hashable; give None, a label or "
            "a set of labels."
        ) from None


class PartialLabels(NamedTuple):
    """Partially labelled training data (see :func:`check_partial_training_labels`).

    ``sequences`` are the indices of the sequences that are neither fully
    labelled nor fully unknown; ``token_index`` / ``token_masks`` give the
    labels allowed at each of their tokens (known: one label; fuzzy: the
    set; unknown: free, -1), in flat order over all tokens.
    """

    sequences: np.ndarray  # intp
    token_index: np.ndarray  # int32, shape (n_tokens,)
    token_masks: np.ndarray  # bool, shape (n_masked, n_labels)
    complete: np.ndarray  # bool, shape (n_sequences,): every label known


def check_partial_training_labels(y, lengths, missing_label, name="y", previous_classes=None):
    """Check training labels where some are missing or fuzzy.

    Parameters
    ----------
    y : list of label sequences
        A label equal to ``missing_label`` is unknown; a set / frozenset of
        labels is fuzzy (the true label is one of them).
    lengths : ndarray of int
    missing_label : hashable, not None
    name : str
    previous_classes : ndarray of object, optional
        Labels the model already has (warm start): they stay classes.

    Returns
    -------
    label_index : ndarray of intp, shape (n_tokens,)
        Index into ``classes`` of each known label; -1 for an unknown or
        fuzzy one.
    classes : ndarray of object
        The known labels and the members of the fuzzy ones (sorted when they
        can be, as :func:`encode_labels`).
    partial : PartialLabels or None
        None when every label is known (training is then exactly the usual).
    """
    if _is_nan(missing_label):
        raise ValueError("missing_label is NaN, which equals nothing; use another marker.")
    _check_container(y, name, "a list of label sequences")
    sequences = y if type(y) is list else list(y)
    if len(sequences) != len(lengths):
        raise ValueError(
            f"X has {len(lengths)} sequences but {name} has {len(sequences)} label "
            "sequences; they must have one label sequence per sequence."
        )
    flat, kinds = [], []  # kind: 0 known, 1 missing, 2 fuzzy
    members, member_rows = [], []
    for i, (seq, length) in enumerate(zip(sequences, lengths)):
        if type(seq) is not list:
            if isinstance(seq, (str, bytes, Mapping)) or not _is_sequence(seq):
                raise TypeError(
                    f"{name} must be a list of label sequences, but {name}[{i}] is "
                    f"{_type_name(seq)} {_short(seq)}."
                )
        if len(seq) != length:
            raise ValueError(
                f"{name}[{i}] has {_count(len(seq), 'label')} but X[{i}] has "
                f"{_count(length, 'token')}; every token needs exactly one label (or "
                "missing_label)."
            )
        for j, label in enumerate(seq):
            if isinstance(label, (set, frozenset)):
                if not label:
                    raise ValueError(
                        f"{name}[{i}][{j}]: the fuzzy label is an empty set; it must hold "
                        "at least one label."
                    )
                for member in label:
                    if _is_missing(member, missing_label):
                        raise ValueError(
                            f"{name}[{i}][{j}]: the fuzzy label {_short(label)} holds "
                            f"missing_label={missing_label!r:.60}; use missing_label alone "
                            "for an unknown label."
                        )
                    members.append(member)
                    member_rows.append(len(flat))
                flat.append(label)
                kinds.append(2)
            elif _is_missing(label, missing_label):
                flat.append(label)
                kinds.append(1)
            else:
                flat.append(label)
                kinds.append(0)
    kinds = np.asarray(kinds, dtype=np.int8)
    known_rows = np.flatnonzero(kinds == 0)
    known_labels = [flat[k] for k in known_rows.tolist()]
    # the checks name the token in flat order through locate_row
    _check_label_values(known_labels + members, [len(known_labels) + len(members)], name)
    prior = [] if previous_classes is None else list(previous_classes)
    _, classes = encode_labels(prior + known_labels + members, name=name)
    label_index = np.full(len(flat), -1, dtype=np.intp)
    label_index[known_rows], _ = encode_labels(known_labels, classes, name=name)
    if not (kinds != 0).any():
        return label_index, classes, None
    n_labels = len(classes)
    member_index, _ = encode_labels(members, classes, name=name)
    masks = np.zeros((len(flat), n_labels), dtype=bool)
    masks[known_rows, label_index[known_rows]] = True
    if len(members):
        masks[np.asarray(member_rows, dtype=np.intp), member_index] = True
    free = ~masks.any(axis=1) | masks.all(axis=1)  # unknown, or a set of every label
    lengths = np.asarray(lengths, dtype=np.intp)
    sequence_of = np.repeat(np.arange(len(lengths)), lengths)
    n_free = np.bincount(sequence_of, weights=free, minlength=len(lengths))
    n_uncertain = np.bincount(sequence_of, weights=kinds != 0, minlength=len(lengths))
    complete = n_uncertain == 0
    partial = np.flatnonzero(~complete & (n_free < lengths))
    constrained = ~free & ~complete[sequence_of]
    token_index = np.full(len(flat), -1, dtype=np.int32)
    rows = np.flatnonzero(constrained)
    token_index[rows] = np.arange(len(rows), dtype=np.int32)
    return label_index, classes, PartialLabels(partial, token_index, masks[rows], complete)


def _is_missing(label, missing_label):
    try:
        return bool(label == missing_label)
    except Exception:  # noqa: BLE001 - an odd __eq__ (numpy arrays): not missing
        return False
